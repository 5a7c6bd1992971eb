#!/usr/bin/env python3
"""measure_outside.py - the device memory a PyTorch process holds outside its caching
allocator, step by step, on the GPU it runs on; prints one JSON object.

outside = (total - free from cudaMemGetInfo) - torch.cuda.memory_reserved(), read after
each step of one process, in order (each step keeps what the ones before loaded):

  context        torch.cuda.init() and one tiny tensor: the CUDA context
  cublas_fp32    a 4096x4096 fp32 GEMM (cuBLAS handle, its kernels)
  cublas_bf16    the same in bf16
  cudnn_conv     a 3x3 conv2d forward and backward in bf16 (cuDNN handle, engines)
  nccl           torch.distributed, NCCL backend, world size 1, one all-reduce (with
                 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1)
  cuda_graph     a captured and replayed CUDA graph of a GEMM
  compile        torch.compile of a small MLP, run once (Triton kernels loaded)

The GPU must be otherwise idle: cudaMemGetInfo sees the whole device, so another
process's memory counts as outside too (check nvidia-smi first). These are the figures
sim/cards.c's outside presets hold (sim/CARDS.md); pass yours with --outside BYTES.

usage: python3 replay/measure_outside.py [--steps a,b,...] [--out FILE]
"""
import argparse
import json
import os
import sys
import time

STEPS = ["context", "cublas_fp32", "cublas_bf16", "cudnn_conv", "nccl", "cuda_graph", "compile"]


def outside(torch):
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    reserved = torch.cuda.memory_reserved()
    return {"used": total - free, "reserved": reserved, "outside": total - free - reserved,
            "free": free}


def step_context(torch):
    torch.cuda.init()
    torch.empty(1, device="cuda")


def step_gemm(torch, dtype):
    a = torch.randn(4096, 4096, device="cuda", dtype=dtype)
    b = torch.randn(4096, 4096, device="cuda", dtype=dtype)
    (a @ b).sum().item()


def step_conv(torch):
    x = torch.randn(16, 64, 56, 56, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).to("cuda", torch.bfloat16)
    conv(x).float().sum().backward()


def step_nccl(torch):
    for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                 ("NVSHMEM_DISABLE_NVLS", "1"), ("MASTER_ADDR", "127.0.0.1"),
                 ("MASTER_PORT", "29517")):
        os.environ.setdefault(k, v)
    import torch.distributed as dist
    dist.init_process_group("nccl", rank=0, world_size=1,
                            device_id=torch.device("cuda", torch.cuda.current_device()))
    t = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()


def step_graph(torch):
    a = torch.randn(2048, 2048, device="cuda")
    b = torch.randn(2048, 2048, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            a @ b
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        c = a @ b
    g.replay()
    c.sum().item()


def step_compile(torch):
    m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                            torch.nn.Linear(4096, 1024)).cuda()
    f = torch.compile(m)
    f(torch.randn(64, 1024, device="cuda")).sum().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", default=",".join(STEPS),
                    help="comma-separated subset, in this order: " + ",".join(STEPS))
    ap.add_argument("--out", help="write the JSON here too")
    args = ap.parse_args()
    want = args.steps.split(",")
    bad = [s for s in want if s not in STEPS]
    if bad:
        print(f"measure_outside.py: unknown step {bad[0]} (known: {','.join(STEPS)})",
              file=sys.stderr)
        return 2
    if "context" not in want:
        want.insert(0, "context")  # every later step needs the context
    try:
        import torch
    except ImportError:
        print("measure_outside.py: needs PyTorch with CUDA", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("measure_outside.py: no CUDA device", file=sys.stderr)
        return 1
    runs = {
        "context": lambda: step_context(torch),
        "cublas_fp32": lambda: step_gemm(torch, torch.float32),
        "cublas_bf16": lambda: step_gemm(torch, torch.bfloat16),
        "cudnn_conv": lambda: step_conv(torch),
        "nccl": lambda: step_nccl(torch),
        "cuda_graph": lambda: step_graph(torch),
        "compile": lambda: step_compile(torch),
    }
    out = {"tool": "measure_outside.py", "steps": []}
    for name in STEPS:
        if name not in want:
            continue
        t0 = time.time()
        rec = {"step": name}
        try:
            runs[name]()
            rec.update(outside(torch))
        except Exception as ex:  # a step that cannot run here (no NCCL, no Triton) is named
            rec["error"] = f"{type(ex).__name__}: {ex}"
        rec["seconds"] = round(time.time() - t0, 3)
        out["steps"].append(rec)
        if name == "context":
            p = torch.cuda.get_device_properties(0)
            out.update({"device": p.name, "total_memory": p.total_memory,
                        "torch": torch.__version__, "cuda": torch.version.cuda,
                        "cuda_module_loading": os.environ.get("CUDA_MODULE_LOADING", "(default)")})
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            f.write(text + "\n")
        os.replace(args.out + ".tmp", args.out)
    if "nccl" in want:
        try:
            import torch.distributed as dist
            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
