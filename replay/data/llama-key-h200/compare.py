#!/usr/bin/env python3
"""compare.py - the llama key's two configs replayed on the H200 under harness variants
(record.sh, record2.sh; README.md): which of the key's cells each process reproduced, where
its host memory went, and how well the placement model puts its segments with and without
that host memory.

For every process (a variant of torch_replay.py's harness, one config, the key's protocol):
- cells: one letter per run, uncapped then the key's 8 caps; K = the run reproduced the key
  (oom_alloc, peak_reserved, every segment event [alloc, action, size]), . = it did not;
- host: the anonymous read-write mappings (the harness's own host memory: Python's and
  glibc's) that lay inside cudaMalloc's address range at a run's end, read off the
  process's /proc/self/maps log (maps.tar.zst): the first run that had one, and the most
  MiB there at once;
- placed: segment addresses the placement model (../../placement_model.py, rule 'cuda',
  free-running) puts where the driver did, without and then with the host mappings
  (occupied ranges, as of each moment the log has: a run's start, end and teardown).

Usage: compare.py [-v]   (-v: every placement difference with the host mappings)
"""
import csv
import io
import json
import os
import subprocess
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ left in the tree
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from placement_model import CH, Heap, first_top  # noqa: E402

KEY = os.path.join(HERE, "..", "..", "..", "tests", "data", "torch-2.11-h200-llama", "key.json")
CONFIGS = {"gc": "garbage_collection_threshold:0.6,max_split_size_mb:256",
           "ms": "max_split_size_mb:128"}
# record.sh's and record2.sh's variants, in the order they were run
VARIANTS = [
    ("v0", "mmap'd host heap (the h200-reuse recordings' harness)"),
    ("v1", "+ every run's snapshot kept"),
    ("v2", "+ every run's snapshot kept, CUDA-event timing"),
    ("v3", "+ a 4 KiB pinned host buffer kept from each run"),
    ("v4", "+ every run's snapshot kept, trace read after CUDA init"),
    ("v5", "+ every run's snapshot kept, PyTorch's default history"),
    ("w0", "+ CUDA-event timing"),
    ("w1", "+ each snapshot kept until the next"),
    ("w2", "+ each snapshot kept until the next, CUDA-event timing"),
    ("w3", "+ each snapshot kept until the next, PyTorch's default history"),
    ("w4", "+ each snapshot kept until the next, default history, CUDA events"),
    ("w5", "+ every snapshot kept, default history, CUDA events"),
    ("w6", "+ each snapshot kept until the next, CUDA events, trace read late"),
]
MOMENT = {"start": 0, "end": 1, "snapshot": 1, "teardown": 2}


def zcat(path):
    return subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout


def segments(name):
    """run -> [(alloc, action, addr, size)] from NAME.csv.zst"""
    out = {}
    for r in csv.DictReader(io.StringIO(zcat(os.path.join(HERE, name + ".csv.zst")).decode())):
        out.setdefault(int(r["run"]), []).append(
            (int(r["alloc"]), r["action"], int(r["addr"]), int(r["size"])))
    return out


def cells(key_cfg, rep, segs):
    want = [key_cfg] + key_cfg["caps"]
    s = ""
    for i, (k, run) in enumerate(zip(want, rep["runs"])):
        got = [[a, act, sz] for a, act, _, sz in segs.get(i, [])]
        ok = (got == k["segment_events"] and run["peak_reserved"] == k["peak_reserved"]
              and (i == 0 or run["oom_alloc"] == k["oom_alloc"]))
        s += "K" if ok else "."
    return s


def host_states(log):
    """(run, moment) -> the process's anonymous rw-p ranges then, for the recorded runs
    (0 = uncapped); moments 0 start, 1 end (after the snapshot), 2 teardown."""
    state, out = set(), {}
    for e in log:
        if "full" in e:
            state = set(e["full"])
        else:
            state = (state - set(e["removed"])) | set(e["added"])
        if isinstance(e["run"], int):
            rs = []
            for ln in state:
                f = ln.split()
                if (f[1] == "rw-p" and len(f) == 5) or (f[1] == "rw-s" and f[5:6] == ["zero"]):
                    a, b = (int(x, 16) for x in f[0].split("-"))
                    rs.append((a, b - a))
            out[(e["run"], MOMENT[e["moment"]])] = sorted(rs)
    return out


class HostHeap(Heap):
    """The placement model with foreign ranges in the address space: the host's own
    mappings take space as chunks do, and a new chunk's aligned range is found in a gap
    whose top need not be 32 MiB aligned (an aligned mmap of size + 32 MiB - 4 KiB at the
    gap's top, the aligned part kept)."""

    def __init__(s, rule, top):
        super().__init__(rule, top)
        s.host = []

    def gaps(s):
        occ = sorted([(b, c[0]) for b, c in s.chunks.items()] + s.host, reverse=True)
        g, prev = [], s.top
        for b, n in occ:
            if b >= prev:
                continue
            if b + n < prev:
                g.append((b + n, prev - b - n))
            prev = min(prev, b)
        g.append((0, prev))
        return g

    def predict(s, size):
        size = (size + (2 << 20) - 1) // (2 << 20) * (2 << 20)
        for base in reversed(s.chunks):  # made in this order (creation numbers rise)
            fits = [(ln, a) for a, ln in s.chunks[base][1] if ln >= size]
            if fits:
                return min(fits)[1]
        n = (size + CH - 1) // CH * CH
        need = n + CH - 4096
        for b, ln in s.gaps():
            if ln >= need or b == 0:
                return (b + ln - need + CH - 1) // CH * CH


def free_running(segs, states):
    """Exact addresses of the model placing every segment itself (frees mapped to its own
    addresses), with the host ranges of `states` (None: none) at each moment."""
    seq = [("a" if act == "segment_alloc" else "f", a, sz)
           for r in sorted(segs) for _, act, a, sz in segs[r]]
    h = HostHeap("cuda", first_top(seq))
    ok = tot = 0
    miss = []
    for r in sorted(segs):
        if states and (r, 0) in states:
            h.host = states[(r, 0)]
        amap = {}
        for alloc, act, a, sz in segs[r]:
            if act == "segment_alloc":
                p = h.predict(sz)
                tot += 1
                ok += p == a
                if p != a:
                    miss.append((r, alloc, sz, a, p))
                amap[a] = p
                h.place(p, sz)
            elif a in amap:
                h.free(amap.pop(a))
        if states and (r, 1) in states:
            h.host = states[(r, 1)]  # what the run's end (its snapshot) left
        for x in list(h.live):
            h.free(x)  # the teardown: every segment released
        if states and (r, 2) in states:
            h.host = states[(r, 2)]
    return ok, tot, miss


def main():
    verbose = "-v" in sys.argv
    key = json.load(open(KEY))["llama_accum_ckpt"]["configs"]
    tf = tarfile.open(fileobj=io.BytesIO(zcat(os.path.join(HERE, "maps.tar.zst"))))
    print("| variant | harness | gc cells | ms cells | host in the heap: first run, most MiB "
          "| placed without | placed with |")
    print("|---|---|---|---|---|---:|---:|")
    tot = [0, 0, 0]
    for v, what in VARIANTS:
        row, first, most, pl = [], [], [], []
        for c in ("gc", "ms"):
            name = f"{v}_{c}"
            rep = json.load(open(os.path.join(HERE, name + ".json")))
            segs = segments(name)
            row.append(cells(key[CONFIGS[c]], rep, segs))
            log = json.load(tf.extractfile(f"maps/{name}.maps.json"))[0]["log"]
            T = first_top([("a", a, sz) for _, act, a, sz in segs[0] if act == "segment_alloc"])
            lo = min(a for r in segs.values() for _, _, a, _ in r)
            st = {k: [(a, n) for a, n in rs if a + n > lo and a < T]
                  for k, rs in host_states(log).items()}
            inside = [(r, sum(n for _, n in rs)) for (r, m), rs in st.items() if m == 1 and rs]
            first.append(str(min(r for r, _ in inside)) if inside else "-")
            most.append(max(n for _, n in inside) >> 20 if inside else 0)
            a = free_running(segs, None)
            b = free_running(segs, st)
            pl.append((a, b))
            tot[0] += a[0]
            tot[1] += b[0]
            tot[2] += a[1]
            if verbose:
                for r, alloc, sz, want, got in b[2]:
                    print(f"  {name} run {r} alloc {alloc}: {sz >> 20} MiB at {want:#x}, "
                          f"model {got:#x}")
        host = " / ".join(f"{f}, {m}" for f, m in zip(first, most))
        print(f"| {v} | {what} | {row[0]} | {row[1]} | {host} "
              f"| {pl[0][0][0] + pl[1][0][0]}/{pl[0][0][1] + pl[1][0][1]} "
              f"| {pl[0][1][0] + pl[1][1][0]}/{pl[0][1][1] + pl[1][1][1]} |")
    print(f"\nall {2 * len(VARIANTS)} processes: {tot[2]} segment addresses, the placement "
          f"model free-running places {tot[0]} without the host mappings, {tot[1]} with them")


if __name__ == "__main__":
    main()
