#!/usr/bin/env python3
"""long_snapshot.py OUT N IN.pickle... - a long snapshot pickle from real ones (for make bench).

Writes OUT: the first input's dict with device_traces[0] replaced by N rounds of every
input's device_traces[0], each copy's addresses moved to its own 2^44-byte range and its
times after the previous copy's. Each copy gets its own string and list objects where the
input had its own (shared ones stay shared within the copy), so that the pickler's memo
works on OUT as on the recording: a fresh string where torch made one, a memo reference
where torch reused an object. Inputs are plain pickles (zstd -d first); `pickle` here is
only the standard library's, on the plain dicts and lists a torch snapshot is made of.
"""
import pickle
import sys


def dup(v, memo):
    """A copy of v with the sharing structure of the original (memo: id -> copy)."""
    if isinstance(v, (str, list, dict, tuple)):
        key = id(v)
        if key in memo:
            return memo[key]
        if isinstance(v, str):
            c = (v + " ")[:-1]
        elif isinstance(v, list):
            c = [dup(x, memo) for x in v]
        elif isinstance(v, tuple):
            c = tuple(dup(x, memo) for x in v)
        else:
            c = {k: dup(x, memo) for k, x in v.items()}
        memo[key] = c
        return c
    return v


def main():
    if len(sys.argv) < 4:
        sys.exit("usage: long_snapshot.py OUT N IN.pickle...")
    out, rounds, srcs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    snaps = []
    for s in srcs:
        with open(s, "rb") as f:
            snaps.append(pickle.load(f))
    trace, t, copy = [], 0, 0
    for _ in range(rounds):
        for s in snaps:
            tr = s["device_traces"][0]
            t0 = tr[0]["time_us"] if tr else 0
            memo, off = {}, copy << 44
            for e in tr:
                e2 = {k: dup(v, memo) for k, v in e.items()}
                if "addr" in e2:
                    e2["addr"] = e["addr"] + off
                if "time_us" in e2:
                    e2["time_us"] = e["time_us"] - t0 + t
                trace.append(e2)
            t = (trace[-1].get("time_us", t) if trace else t) + 1000
            copy += 1
    d = dict(snaps[0])
    d["device_traces"] = [trace]
    with open(out + ".tmp", "wb") as f:
        pickle.dump(d, f, protocol=4)
    import os

    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main()
