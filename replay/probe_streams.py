#!/usr/bin/env python3
"""probe_streams.py - does making CUDA streams move where cudaMalloc puts segments?

  probe_streams.py --out FILE.csv

Each variant is one fresh process that makes the same cudaMalloc sequence (sizes in MiB:
12, 2, 20, 20, 20, 94, 2, 20) after a different start: nothing; 1 or 64 cudaStreamCreate;
torch's CUDA initialisation; torch's initialisation and one torch.cuda.Stream() (which
fills PyTorch's stream pool). Writes variant,step,size,addr."""
import argparse
import ctypes
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rawcuda  # noqa: E402

MIB = 1 << 20
SIZES = [12, 2, 20, 20, 20, 94, 2, 20]
VARIANTS = ["none", "stream1", "stream64", "torch", "torch_stream"]


def worker(v):
    if v.startswith("torch"):
        import torch
        torch.cuda.init()
        torch.empty(1, device="cuda")  # the context, as torch makes it
        if v == "torch_stream":
            torch.cuda.Stream()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    cu = rawcuda.open_cuda()
    if v.startswith("stream"):
        cu.rt.cudaStreamCreate.restype = ctypes.c_int
        for _ in range(1 if v == "stream1" else 64):
            s = ctypes.c_void_p()
            cu.rt.cudaStreamCreate(ctypes.byref(s))
    for i, m in enumerate(SIZES):
        print("%s,%d,%d,%d" % (v, i, m * MIB, cu.malloc(m * MIB) or 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--worker")
    a = ap.parse_args()
    if a.worker:
        worker(a.worker)
        return 0
    rows = []
    for v in VARIANTS:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--out", "-",
                            "--worker", v], capture_output=True, text=True)
        rows.append(r.stdout if r.returncode == 0 else "%s,-1,0,0\n" % v)
        if r.returncode:
            sys.stderr.write(r.stderr[-2000:])
    with open(a.out, "w") as f:
        f.write("variant,step,size,addr\n" + "".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
