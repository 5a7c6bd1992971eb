#!/usr/bin/env python3
"""probe_streams.py - what making CUDA streams does to cudaMalloc's heap and to the memory
a ballast-enforced capacity leaves (replay/PLACEMENT.md section 10).

  probe_streams.py --out DIR [--jobs J] [--only addr|cap]

Writes DIR/addr.jsonl, DIR/cap.jsonl and DIR/meta.json.

addr: each (variant, sequence) is one fresh process with no ballast. A sequence is a
list of ops: a number is a cudaMalloc of that many MiB (its address recorded), S makes
the variant's streams (or events) there, Fk cudaFree's the k-th cudaMalloc; without an S
the variant comes first. /proc/self/maps is read before and after S (the mappings that
appeared or went). Variants: plain:N (N cudaStreamCreate), nb:N
(cudaStreamCreateWithFlags non-blocking, as allocsim-replay --async makes them), prio:N
(non-blocking, priorities 0 and -1 alternating), pool:P (PyTorch's pool as
c10/cuda/CUDAStream.cpp makes it: for each of 32 indices, one non-blocking stream per
priority 0..-(P-1)), event:N (cudaEventCreateWithFlags(DisableTiming), as PyTorch's
allocator makes them), destroy:N (N made, then destroyed), torch (torch's CUDA
initialisation), torchstream (that and one torch.cuda.Stream()).

cap: each kind in one fresh process, one after another, alone on the GPU: a ballast
(cudaMalloc'd, probe_nearfull.py's) leaves the largest single cudaMalloc at 1,024 MiB;
then one stream (or event) at a time, and after each cudaMemGetInfo's free and the
largest cudaMalloc that succeeds (binary search in 2 MiB)."""
import argparse
import concurrent.futures as cf
import ctypes
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rawcuda  # noqa: E402

MIB = 1 << 20
NB = 1  # cudaStreamNonBlocking
EV_DISABLE_TIMING = 2
NS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 65, 128]
SEQS = {
    "A": "S 12 2 20 20 20 94 2 20",
    "B": "S" + " 2" * 40,
    "C": "S 20 6 26 2 40 2 12 8 2 20 64 2",
    "D": "94 12 2 20 20 20 S 2 2 2 20 12 2 20",
    "E": "94 12 2 20 20 20 S F0 F1 F2 F3 F4 F5 12 2 20 20 2 94 2",
}
ADDR_VARIANTS = (["plain:%d" % n for n in NS] + ["nb:2", "nb:3", "nb:64", "prio:64", "pool:2",
                 "pool:4", "event:64", "event:256", "destroy:64", "torch", "torchstream"])
CAP_KINDS = [("plain", 130), ("nb", 130), ("prio", 130), ("event", 260), ("torch", 0)]


class Streams:
    """The runtime's stream and event calls; counts what it made."""

    def __init__(self, cu):
        self.rt = getattr(cu, "rt", None)
        self.made = []
        if self.rt:
            for fn in ("cudaStreamCreate", "cudaStreamCreateWithFlags",
                       "cudaStreamCreateWithPriority", "cudaStreamDestroy",
                       "cudaEventCreateWithFlags", "cudaDeviceGetStreamPriorityRange"):
                getattr(self.rt, fn).restype = ctypes.c_int

    def _ck(self, rc, what):
        if rc:
            raise rawcuda.CudaError("%s failed: %d" % (what, rc))

    def one(self, kind, i=0, prio=0):
        if not self.rt:  # AS_FAKE_CUDA: nothing to make
            self.made.append(None)
            return
        s = ctypes.c_void_p()
        if kind == "plain":
            self._ck(self.rt.cudaStreamCreate(ctypes.byref(s)), kind)
        elif kind == "nb":
            self._ck(self.rt.cudaStreamCreateWithFlags(ctypes.byref(s), NB), kind)
        elif kind == "prio":
            self._ck(self.rt.cudaStreamCreateWithPriority(ctypes.byref(s), NB, -(i % 2)), kind)
        elif kind == "pool":
            self._ck(self.rt.cudaStreamCreateWithPriority(ctypes.byref(s), NB, prio), kind)
        elif kind == "event":
            self._ck(self.rt.cudaEventCreateWithFlags(ctypes.byref(s), EV_DISABLE_TIMING), kind)
        self.made.append(s)

    def make(self, v):
        kind, _, n = v.partition(":")
        n = int(n or 0)
        if kind == "pool":  # c10/cuda/CUDAStream.cpp initDeviceStreamState
            for _ in range(32):
                for p in range(n):
                    self.one("pool", prio=-p)
        elif kind == "destroy":
            for _ in range(n):
                self.one("plain")
            for s in self.made:
                if self.rt:
                    self._ck(self.rt.cudaStreamDestroy(s), "cudaStreamDestroy")
        elif kind in ("plain", "nb", "prio", "event"):
            for i in range(n):
                self.one(kind, i)
        elif kind == "torchstream":
            import torch
            torch.cuda.Stream()
            torch.cuda.synchronize()

    def prio_range(self):
        lo, hi = ctypes.c_int(), ctypes.c_int()
        if self.rt:
            self.rt.cudaDeviceGetStreamPriorityRange(ctypes.byref(lo), ctypes.byref(hi))
        return lo.value, hi.value


def maps():
    try:
        with open("/proc/self/maps") as f:
            return set(ln.split(None, 5)[0] + " " + (ln.split(None, 5)[5].strip()
                       if len(ln.split(None, 5)) > 5 else "") for ln in f)
    except OSError:
        return set()


def torch_init():
    import torch
    torch.cuda.init()
    torch.empty(1, device="cuda")  # the context, as torch makes it
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def worker_addr(v, seq):
    if v.startswith("torch"):
        torch_init()
    cu = rawcuda.open_cuda()
    st = Streams(cu)
    ops = SEQS[seq].split()
    if "S" not in ops:
        ops = ["S"] + ops
    addrs, out = [], []
    f0 = cu.meminfo()[0]
    row = {"variant": v, "seq": seq, "free_before": f0}
    for op in ops:
        if op == "S":
            m0 = maps()
            t = time.perf_counter()
            st.make(v)
            row["make_s"] = time.perf_counter() - t
            m1 = maps()
            row["maps_added"] = sorted(m1 - m0)
            row["maps_gone"] = sorted(m0 - m1)
            row["free_after"] = cu.meminfo()[0]
            out.append({"op": "S"})
        elif op[0] == "F":
            k = int(op[1:])
            cu.free(addrs[k])
            out.append({"op": "free", "k": k, "addr": addrs[k]})
        else:
            n = int(op) * MIB
            a = cu.malloc(n) or 0
            addrs.append(a)
            out.append({"op": "malloc", "size": n, "addr": a})
    row["ops"] = out
    print(json.dumps(row))


def worker_cap(kind, nmax):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import probe_nearfull
    if kind == "torch":
        torch_init()
    d = probe_nearfull.Dev(1024 * MIB)
    st = Streams(d.cu)
    rows = []

    def log(n):
        rows.append({"kind": kind, "n": n, "free": d.cu.meminfo()[0], "largest": d.largest()})
    log(0)
    if kind == "torch":
        st.make("torchstream")
        log(-1)  # after torch.cuda.Stream()
    for i in range(nmax):
        st.one(kind, i)
        log(i + 1)
    print(json.dumps({"kind": kind, "cap": d.cap, "probed": d.probed,
                      "prio_range": st.prio_range(), "rows": rows}))


def sub(args, timeout=120):
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--out", "-", *args],
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        return json.dumps({"worker": args, "error": r.stderr[-1500:]}) + "\n"
    return r.stdout


def meta():
    m = {"t": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        cu = rawcuda.open_cuda()
        m["versions"] = cu.versions()
        m["prio_range"] = Streams(cu).prio_range()
    except rawcuda.CudaError as e:
        m["error"] = str(e)
    try:
        import torch
        m["torch"] = torch.__version__
        h = os.path.join(os.path.dirname(torch.__file__), "include/c10/cuda/CUDAStream.h")
        with open(h) as f:
            m["max_compile_time_stream_priorities"] = [
                ln.strip() for ln in f if "max_compile_time_stream_priorities =" in ln]
    except (ImportError, OSError) as e:
        m["torch_error"] = str(e)
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--only", choices=["addr", "cap"])
    ap.add_argument("--worker", nargs="+")
    a = ap.parse_args()
    if a.worker:
        if a.worker[0] == "addr":
            worker_addr(a.worker[1], a.worker[2])
        else:
            worker_cap(a.worker[1], int(a.worker[2]))
        return 0
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta(), f, indent=1)
    t0 = time.time()
    if a.only != "cap":  # no ballast: side by side
        jobs = [["addr", v, s] for v in ADDR_VARIANTS for s in SEQS]
        with cf.ThreadPoolExecutor(a.jobs) as ex:
            res = list(ex.map(sub, (["--worker", *j] for j in jobs)))
        with open(os.path.join(a.out, "addr.jsonl"), "w") as f:
            f.write("".join(res))
        print("addr: %d processes, %.0f s" % (len(jobs), time.time() - t0), flush=True)
    if a.only != "addr":  # a ballast each: one at a time, alone on the GPU
        with open(os.path.join(a.out, "cap.jsonl"), "w") as f:
            for k, n in CAP_KINDS:
                f.write(sub(["--worker", "cap", k, str(n)], timeout=300))
                f.flush()
        print("cap: %.0f s" % (time.time() - t0), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
