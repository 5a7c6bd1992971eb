#!/usr/bin/env python3
"""record_reuse.py - where the driver puts cudaMalloc segments after many frees.

  record_reuse.py --out FILE.csv [--seeds A-B] [--ops N] [--jobs J]

Each seed is one fresh process (a fresh CUDA context, as every PyTorch run is) that makes
N cudaMalloc/cudaFree calls of sizes PyTorch asks for (multiples of 2 MiB: small-pool
2 MiB segments and large ones), in one of five patterns chosen by seed % 5:
  0 churn       a random live set of 10-60 segments, a random one freed
  1 small       mostly 2 MiB segments with a few large ones, random frees
  2 stack/queue the newest or the oldest freed, at random
  3 waves       grow, then free all but a few survivors (empty_cache), again
  4 owner       a large segment whose chunk has a tail, small ones into the tail, then the
                large one freed and new ones of other sizes made (the chunk's first owner
                gone while the chunk lives on)
Writes proc,step,op,size,addr (op malloc or free; addr in decimal), every row of every
seed in seed order. The segments are never touched, so no kernel runs."""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rawcuda  # noqa: E402

MIB = 1 << 20
# segment sizes of the llama key's runs (MiB): the large pool's common sizes
LLAMA = [12, 14, 20, 26, 28, 32, 34, 46, 64, 66, 126, 132, 258, 282]


def size_of(rng, p_small):
    if rng.random() < p_small:
        return 2 * MIB
    if rng.random() < 0.6:
        return rng.choice(LLAMA) * MIB
    return rng.randrange(2, 401, 2) * MIB


def pattern(seed, nops):
    """The (op, tag, size) calls of one seed; a free names the tag of a live malloc."""
    rng = random.Random(seed)
    kind = seed % 5
    live, out, tag = [], [], 0

    def malloc(sz):
        nonlocal tag
        out.append(("malloc", tag, sz))
        live.append(tag)
        tag += 1

    def free(t):
        out.append(("free", t, 0))
        live.remove(t)

    target = rng.randrange(10, 61)
    while len(out) < nops:
        if kind == 4:
            big = rng.choice([rng.choice(LLAMA), rng.randrange(4, 200, 2)]) * MIB
            malloc(big)
            owner = live[-1]
            for _ in range(rng.randrange(0, 6)):
                malloc(2 * MIB if rng.random() < 0.7 else rng.randrange(2, 30, 2) * MIB)
            free(owner)
            for _ in range(rng.randrange(1, 5)):
                malloc(size_of(rng, 0.3))
            while len(live) > target:
                free(rng.choice(live))
            continue
        if kind == 3:
            while len(live) < target and len(out) < nops:
                malloc(size_of(rng, 0.4))
            keep = set(rng.sample(live, min(len(live), rng.randrange(0, 5))))
            for t in list(live):
                if t not in keep:
                    free(t)
            continue
        p_small = 0.8 if kind == 1 else 0.4
        if live and (len(live) >= target or rng.random() < 0.45):
            if kind == 2:
                free(live[-1] if rng.random() < 0.5 else live[0])
            else:
                free(rng.choice(live))
        else:
            malloc(size_of(rng, p_small))
        if rng.random() < 0.02:
            target = rng.randrange(10, 61)
    return out


def worker(seed, nops):
    cu = rawcuda.open_cuda()
    addr, rows = {}, []
    for step, (op, t, sz) in enumerate(pattern(seed, nops)):
        if op == "malloc":
            a = cu.malloc(sz)
            if a is None:
                rows.append((seed, step, "refused", sz, 0))
                continue
            addr[t] = (a, sz)
            rows.append((seed, step, "malloc", sz, a))
        elif t in addr:
            a, sz = addr.pop(t)
            cu.free(a)
            rows.append((seed, step, "free", sz, a))
    for a, _ in addr.values():
        cu.free(a)
    return rows


def main():
    return rawcuda.seeded_main(__file__, __doc__, worker, "0-59", 600)


if __name__ == "__main__":
    sys.exit(main())
