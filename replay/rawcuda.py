"""rawcuda.py - cudaMalloc, cudaFree and cudaMemGetInfo through ctypes, for the recording
scripts (record_reuse.py, record_reserve.py, probe_nearfull.py) that must see the driver with
nothing between, and seeded_main, their command line and fan-out over fresh processes.

No torch: the CUDA runtime is loaded from the toolkit ($CUDA_HOME, /usr/local/cuda) or the
loader's path. AS_FAKE_CUDA=1 swaps in a small simulated heap (lowest free address, no
limit but AS_FAKE_CUDA_BYTES) so the scripts can be exercised on a machine without a GPU;
its addresses mean nothing."""
import argparse
import concurrent.futures as cf
import ctypes
import glob
import os
import subprocess
import sys

MIB = 1 << 20


class CudaError(Exception):
    pass


def _load():
    names = []
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root:
            names += sorted(glob.glob(os.path.join(root, "lib64", "libcudart.so*")))
            names += sorted(glob.glob(os.path.join(root, "targets", "*", "lib", "libcudart.so*")))
    names += ["libcudart.so.13", "libcudart.so.12", "libcudart.so"]
    for n in names:
        try:
            return ctypes.CDLL(n)
        except OSError:
            continue
    raise CudaError("no libcudart found (set CUDA_HOME)")


class Cuda:
    """The real runtime: malloc returns the address or None when refused."""

    def __init__(self):
        self.rt = _load()
        for fn in ("cudaMalloc", "cudaFree", "cudaMemGetInfo", "cudaGetLastError",
                   "cudaDeviceSynchronize", "cudaRuntimeGetVersion", "cudaDriverGetVersion"):
            getattr(self.rt, fn).restype = ctypes.c_int
        if self.rt.cudaFree(None) != 0:
            raise CudaError("cudaFree(NULL) failed: no usable GPU")

    def malloc(self, n):
        p = ctypes.c_void_p()
        if self.rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) != 0:
            self.rt.cudaGetLastError()
            return None
        return p.value

    def free(self, a):
        if self.rt.cudaFree(ctypes.c_void_p(a)) != 0:
            raise CudaError("cudaFree(%#x) failed" % a)

    def meminfo(self):
        f, t = ctypes.c_size_t(), ctypes.c_size_t()
        self.rt.cudaMemGetInfo(ctypes.byref(f), ctypes.byref(t))
        return f.value, t.value

    def versions(self):
        r, d = ctypes.c_int(), ctypes.c_int()
        self.rt.cudaRuntimeGetVersion(ctypes.byref(r))
        self.rt.cudaDriverGetVersion(ctypes.byref(d))
        return {"runtime": r.value, "driver": d.value}


class FakeCuda:
    """Lowest-address first fit in 2 MiB pages over AS_FAKE_CUDA_BYTES (default 16 GiB)."""

    def __init__(self):
        self.total = int(os.environ.get("AS_FAKE_CUDA_BYTES", 16 << 30))
        self.base = 0x7f0000000000
        self.live = {}

    def _r2(self, n):
        return (n + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)

    def malloc(self, n):
        n = self._r2(n)
        if sum(self.live.values()) + n > self.total:
            return None
        a = self.base
        for b, s in sorted(self.live.items()):
            if b - a >= n:
                break
            a = max(a, b + s)
        self.live[a] = n
        return a

    def free(self, a):
        del self.live[a]

    def meminfo(self):
        return self.total - sum(self.live.values()), self.total

    def versions(self):
        return {"runtime": 0, "driver": 0, "fake": True}


def open_cuda():
    return FakeCuda() if os.environ.get("AS_FAKE_CUDA") else Cuda()


def seeded_main(script, doc, worker, seeds, ops):
    """The command line of a recording script whose worker(seed, ops) returns CSV rows
    (proc, step, op, size, addr): each seed runs in a fresh process (`script --worker SEED`:
    the driver's address space must be a new process's), --jobs at a time, and the rows go
    to --out in seed order, written to out.tmp and renamed when complete."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seeds", default=seeds)
    ap.add_argument("--ops", type=int, default=ops)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker is not None:
        for r in worker(a.worker, a.ops):
            print("%d,%d,%s,%d,%d" % r)
        return 0
    lo, _, hi = a.seeds.partition("-")

    def one(s):
        r = subprocess.run([sys.executable, os.path.abspath(script), "--out", "-",
                            "--worker", str(s), "--ops", str(a.ops)],
                           capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError("seed %d: %s" % (s, r.stderr.strip()))
        return r.stdout

    with cf.ThreadPoolExecutor(a.jobs) as ex:
        outs = list(ex.map(one, range(int(lo), int(hi or lo) + 1)))
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write("proc,step,op,size,addr\n")
        for o in outs:
            f.write(o)
    os.replace(tmp, a.out)
    return 0
