#!/usr/bin/env python3
"""capture_compare.py RUNS.tar.zst [ALLOCSIM] - the two PyTorch replays of a trace with a
graph's pool, one against the other: torch_replay.py's MemPool replay (`pytorch`: the
pool's allocations inside use_mem_pool) and its real-capture replay (`pytorch_capture`:
inside CUDAGraph captures on the pool's stream; --pools capture), from the per-run files
`make validate` keeps (v/NN_TRACE_SPEC.pytorch*.json and .csv, in a zstd'd tar).

Per trace, over its torch configs: the runs, how many have the same OOM allocation, peak
reserved (the capture replay's less its holder graph's bytes) and OOM retries
(num_alloc_retries) in both, how many the same segment events (action and size, in
order; the addresses are two processes' and are not compared), the capture replay's
runs that stopped on a refused CUDA call (none is an OOM), and its OOMs that came inside
a real capture (the OOM allocation is a graph pool's; with ALLOCSIM, from the trace's
events through `allocsim convert`; the trace paths are the repository's). Exit 0; 1 on
an unreadable archive."""
import csv
import io
import json
import os
import subprocess
import sys
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_replay  # noqa: E402
import validate  # noqa: E402

SUFFIXES = ("_torch", "_max_split_size_mb-128", "_expandable_segments-True")


def members(path):
    data = subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        for m in t.getmembers():
            if m.isfile():
                out[os.path.basename(m.name)] = t.extractfile(m).read().decode()
    return out


def events(text):
    return [(r["run"], r["alloc"], r["action"], r["size"]) for r in csv.DictReader(io.StringIO(text))]


def capture_allocs(allocsim, trace):
    if not allocsim or trace not in validate.REAL:
        return None
    evs, _ = torch_replay.load_trace(os.path.join(ROOT, validate.REAL[trace]), allocsim)
    return {e[1] for e in evs if e[0] == "a" and e[4] and e[3] != 0}


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        files = members(sys.argv[1])
    except (OSError, subprocess.CalledProcessError, tarfile.TarError) as ex:
        print(f"capture_compare: {sys.argv[1]}: {ex}", file=sys.stderr)
        return 1
    allocsim = sys.argv[2] if len(sys.argv) > 2 else None
    per = {}
    for name in sorted(files):
        if not name.endswith(".pytorch_capture.json"):
            continue
        base = name[: -len(".pytorch_capture.json")]
        trace = next(base[3:-len(s)] for s in SUFFIXES if base.endswith(s))
        cap, mem = json.loads(files[name])["runs"], json.loads(files[base + ".pytorch.json"])["runs"]
        t = per.setdefault(trace, [0] * 7)
        inside = capture_allocs(allocsim, trace)
        for c, m in zip(cap, mem):
            t[0] += 1
            t[1] += c["oom_alloc"] == m["oom_alloc"]
            t[2] += c["peak_reserved"] == m["peak_reserved"]
            t[3] += c["num_alloc_retries"] == m["num_alloc_retries"]
            t[5] += bool(c.get("error"))
            t[6] += inside is not None and c["oom_alloc"] in inside
        ec = events(files[base + ".pytorch_capture.csv"])
        em = events(files[base + ".pytorch.csv"])
        for r in {x[0] for x in ec} | {x[0] for x in em}:
            t[4] += [x for x in ec if x[0] == r] == [x for x in em if x[0] == r]
    print("| trace | runs | same OOM allocation | same peak reserved | same OOM retries | "
          "same segment events | refused calls | OOMs inside a capture |")
    print("|---|---|---|---|---|---|---|---|")
    for trace, t in per.items():
        print(f"| {trace} | " + " | ".join(str(x) for x in t[:6]) +
              f" | {t[6] if allocsim else '-'} |")
    tot = [sum(t[k] for t in per.values()) for k in range(7)]
    print("| **all** | " + " | ".join(str(x) for x in tot[:6]) +
          f" | {tot[6] if allocsim else '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
