#!/usr/bin/env python3
"""measure_nccl.py - device memory that NCCL holds outside PyTorch's caching allocator, per
rank, for a world of N processes on one host (one GPU each); prints one JSON object.

Each rank reads outside = (total - free from cudaMemGetInfo) - torch.cuda.memory_reserved()
after each step, in order (a step keeps what the ones before loaded):

  context         torch.cuda.init() and one tiny tensor: the CUDA context
  cublas          a 4096x4096 bf16 GEMM (the cuBLAS handle every training job has)
  init            init_process_group("nccl") with device_id (eager communicator)
  allreduce_SIZE  the first all-reduce of SIZE bytes, then all-gather and reduce-scatter
  allgather_SIZE    of the same size (one step each, for each size in --sizes)
  reducescatter_SIZE
  ddp             DistributedDataParallel over a 12-layer MLP, two steps (its buckets)
  fsdp2           fully_shard (FSDP2) of the same MLP, its first step

Every rank waits at a barrier before it reads, so a step's figure is the steady state
after all ranks ran it. NVLink multicast stays off in every process (NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1 are forced, whatever the
environment says); nothing here calls cuMulticastCreate. NCCL_BUFFSIZE is passed through
(--buffsize sets it for every rank; unset means NCCL's default, 4 MiB).

The GPUs must be otherwise idle: cudaMemGetInfo sees the whole device.

usage: python3 replay/measure_nccl.py --world-size N [--buffsize BYTES] [--sizes 1M,64M]
                                      [--steps ...] [--out FILE]
"""
import argparse
import json
import os
import sys
import time

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}
BASE_STEPS = ["context", "cublas", "init"]
COLLECTIVES = ["allreduce", "allgather", "reducescatter"]
TAIL_STEPS = ["ddp", "fsdp2"]


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper().rstrip("B").rstrip("I")
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def outside(torch):
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    reserved = torch.cuda.memory_reserved()
    return {"used": total - free, "reserved": reserved, "outside": total - free - reserved}


def mlp(torch, width=2048, layers=12):
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*mods).cuda()


def step_collective(torch, dist, kind, nbytes, world):
    n = max(world, nbytes // 4 // world * world)  # fp32 elements, a multiple of the world
    x = torch.ones(n, device="cuda")
    if kind == "allreduce":
        dist.all_reduce(x)
    elif kind == "allgather":
        out = torch.empty(n * world, device="cuda")
        dist.all_gather_into_tensor(out, x)
    else:
        out = torch.empty(n // world, device="cuda")
        dist.reduce_scatter_tensor(out, x)


def step_ddp(torch, dist):
    from torch.nn.parallel import DistributedDataParallel as DDP
    m = DDP(mlp(torch), device_ids=[torch.cuda.current_device()])
    opt = torch.optim.SGD(m.parameters(), lr=1e-3)
    for _ in range(2):
        m(torch.randn(64, 2048, device="cuda")).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    del m, opt


def step_fsdp2(torch, dist):
    from torch.distributed.fsdp import fully_shard
    m = mlp(torch)
    for layer in m:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(m)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    m(torch.randn(64, 2048, device="cuda")).sum().backward()
    opt.step()


def rank_main(rank, world, args, port, q):
    os.environ.update(NO_MULTICAST)
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                       "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank)})
    if args.buffsize:
        os.environ["NCCL_BUFFSIZE"] = str(args.buffsize)
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank)
    steps = []

    def record(name, fn):
        t0 = time.time()
        rec = {"step": name}
        try:
            fn()
            if dist.is_initialized():
                dist.barrier()
            rec.update(outside(torch))
        except Exception as ex:  # named, and the later steps still run
            rec["error"] = f"{type(ex).__name__}: {ex}"
        rec["seconds"] = round(time.time() - t0, 3)
        steps.append(rec)

    def init():
        dist.init_process_group("nccl", rank=rank, world_size=world,
                                device_id=torch.device("cuda", rank))

    def gemm():
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        (a @ a).sum().item()

    record("context", lambda: torch.empty(1, device="cuda"))
    record("cublas", gemm)
    record("init", init)
    for size in args.sizes:
        for kind in COLLECTIVES:
            record(f"{kind}_{size}", lambda k=kind, s=size: step_collective(torch, dist, k, s, world))
    if "ddp" in args.steps:
        record("ddp", lambda: step_ddp(torch, dist))
    if "fsdp2" in args.steps:
        record("fsdp2", lambda: step_fsdp2(torch, dist))
    p = torch.cuda.get_device_properties(rank)
    q.put({"rank": rank, "device": p.name, "total_memory": p.total_memory,
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "nccl": ".".join(map(str, torch.cuda.nccl.version())), "steps": steps})
    if dist.is_initialized():
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world-size", type=int, required=True)
    ap.add_argument("--buffsize", type=parse_size, default=0,
                    help="NCCL_BUFFSIZE for every rank (default: NCCL's own)")
    ap.add_argument("--sizes", default="1M,64M",
                    help="collective sizes in bytes (K/M/G suffixes), comma-separated")
    ap.add_argument("--steps", default="ddp,fsdp2", help="which of ddp,fsdp2 to run after the collectives")
    ap.add_argument("--port", type=int, default=29531)
    ap.add_argument("--out", help="write the JSON here too (temporary file, then rename)")
    args = ap.parse_args()
    args.sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    args.steps = [s for s in args.steps.split(",") if s]
    bad = [s for s in args.steps if s not in TAIL_STEPS]
    if bad or args.world_size < 1:
        print(f"measure_nccl.py: bad --steps {bad[0]!r} or --world-size" if bad else
              "measure_nccl.py: --world-size must be 1 or more", file=sys.stderr)
        return 2
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError:
        print("measure_nccl.py: needs PyTorch with CUDA", file=sys.stderr)
        return 1
    if torch.cuda.device_count() < args.world_size:
        print(f"measure_nccl.py: {args.world_size} ranks need as many GPUs, this host has "
              f"{torch.cuda.device_count()}", file=sys.stderr)
        return 1
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, args.world_size, args, args.port, q))
             for r in range(args.world_size)]
    for p in procs:
        p.start()
    ranks = [q.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=120)
    ranks.sort(key=lambda r: r["rank"])
    out = {"tool": "measure_nccl.py", "world_size": args.world_size,
           "nccl_buffsize": args.buffsize or "default", "env": NO_MULTICAST, "ranks": ranks}
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            f.write(text + "\n")
        os.replace(args.out + ".tmp", args.out)
    return 0 if all(p.exitcode == 0 for p in procs) else 1


if __name__ == "__main__":
    sys.exit(main())
