#!/usr/bin/env python3
"""Writes rmm_cudf_join.csv: a short RMM logging_resource_adaptor log in the exact format
RMM writes (header `Thread,Time,Action,Pointer,Size,Stream`, rows `%t,%H:%M:%S.%f,%v`).

It models a cuDF-style job on a 2 GiB pool: four worker threads read column chunks
(int64/float64 data, 64-byte-padded null masks, int32 string offsets and chars), hash-join
and group them on two streams (the default stream 0x0 and one created stream), free their
temporaries, and near the end ask for an 8 GiB scratch buffer that fails twice
(`allocate failure`, pointer `(nil)`) before a smaller retry succeeds. Addresses come from a
best-fit simulation of the pool, 256-byte aligned, so freed addresses are reused, as in
real logs. Deterministic: `python3 make_rmm_sample.py > rmm_cudf_join.csv`."""
import random

rng = random.Random(20240611)
BASE, POOL = 0x7F3A2C000000, 2 << 30
free_list = [(BASE, POOL)]  # (addr, size), address ordered
threads = [2847193, 2847201, 2847202, 2847207]
streams = ["0x0", "0x55d0c1e3a2f0"]
t_us = (14 * 3600 + 3 * 60 + 27) * 1_000_000 + 118_204
rows = []


def clock():
    global t_us
    t_us += rng.randint(3, 400)
    h, r = divmod(t_us, 3_600_000_000)
    m, r = divmod(r, 60_000_000)
    s, us = divmod(r, 1_000_000)
    return f"{h:02d}:{m:02d}:{s:02d}.{us:06d}"


def alloc(size, thread, stream):
    need = (size + 255) // 256 * 256
    best = None
    for i, (a, s) in enumerate(free_list):
        if s >= need and (best is None or s < free_list[best][1]):
            best = i
    if best is None:
        rows.append(f"{thread},{clock()},allocate failure,(nil),{size},{stream}")
        return None
    a, s = free_list[best]
    if s == need:
        free_list.pop(best)
    else:
        free_list[best] = (a + need, s - need)
    rows.append(f"{thread},{clock()},allocate,{a:#x},{size},{stream}")
    return (a, size, need, stream)


def free(blk, thread):
    a, size, need, stream = blk
    rows.append(f"{thread},{clock()},free,{a:#x},{size},{stream}")
    free_list.append((a, need))
    free_list.sort()
    merged = []
    for fa, fs in free_list:
        if merged and merged[-1][0] + merged[-1][1] == fa:
            merged[-1] = (merged[-1][0], merged[-1][1] + fs)
        else:
            merged.append((fa, fs))
    free_list[:] = merged


def column(n, kind, thread, stream):
    """A cuDF column: data, null mask (64-byte padded), offsets+chars for strings."""
    out = []
    if kind == "str":
        out.append(alloc((n + 1) * 4, thread, stream))
        out.append(alloc(n * rng.randint(8, 24), thread, stream))
    else:
        out.append(alloc(n * 8, thread, stream))
    if rng.random() < 0.6:
        out.append(alloc((n + 511) // 512 * 64, thread, stream))
    return [b for b in out if b]


persistent = []
for chunk in range(8):
    thread = threads[chunk % 4]
    stream = streams[chunk % 2]
    n = rng.choice([250_000, 500_000, 1_000_000, 2_000_000])
    cols = []
    for kind in ["i64", "f64", "str", "i64"]:
        cols += column(n, kind, thread, stream)
    # hash join: a hash table 2x the build side, gather maps, result columns
    table = alloc(2 * n * 16, thread, stream)
    left = alloc(n * 4, thread, stream)
    right = alloc(n * 4, thread, stream)
    res = []
    for kind in ["i64", "f64", "str"]:
        res += column(n, kind, thread, stream)
    for b in [table, left, right]:
        if b:
            free(b, thread)
    # groupby on the result: sort keys, reduce, temporaries
    keys = alloc(n * 8, thread, stream)
    perm = alloc(n * 4, thread, stream)
    tmp = alloc(rng.randint(1, 64) << 20, thread, stream)
    agg = alloc((n // 10) * 8, thread, stream)
    for b in [tmp, perm, keys]:
        if b:
            free(b, thread)
    for b in cols:
        free(b, thread)
    keep = res[:2] + ([agg] if agg else [])
    for b in res[2:]:
        free(b, thread)
    persistent += keep
    if chunk % 2 == 1:  # drop the previous chunk's results
        for b in persistent[:-len(keep)]:
            free(b, thread)
        persistent = persistent[-len(keep):]

# the big scratch buffer: two failures, then a smaller retry
for size in [8 << 30, 6 << 30]:
    alloc(size, threads[0], streams[0])
scratch = alloc(512 << 20, threads[0], streams[0])
free(scratch, threads[0])
for b in persistent:
    free(b, threads[1])

print("Thread,Time,Action,Pointer,Size,Stream")
print("\n".join(rows))
