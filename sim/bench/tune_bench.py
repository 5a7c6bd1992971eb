#!/usr/bin/env python3
"""tune_bench.py [--old BIN] [--new BIN] [--reps N] [--trace PATH]... [--card CARD]... [--no-json]

Wall, user and system time of `allocsim tune -q --device CARD TRACE` (the 252 settings and
the 8 curves, what a user runs) on the repository's real snapshots at the cards users have,
and, with --old, the same for another build beside it and whether the two print the same:
the table byte for byte but the end of its "N settings ..." line (the decodes and the
host time; the decodes are shown), and `-f json` byte for byte.

The cards are 16GB, 24GB, 40GB and 80GB and, per trace, the tight one: the smallest whole
GB whose usable capacity (the card less the default outside memory, 788 MB, and the
driver's 3.125 MiB, tune's own rule) holds the default setting's uncapped peak reserved,
where the curves have the most to do. Times are of the whole process tree (the curves'
processes included: RUSAGE_CHILDREN), the median of --reps runs, old and new interleaved
so that both see the same load; the machine is shared, so compare the two columns of one
run, not runs of different days.

Run from the repository root; prints the table (sim/bench/*-tune*.txt keep one).
"""
import argparse
import json
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import time

TRACES = [
    "tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst",
    "tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst",
    "tests/data/torch-2.11-h200/moe_like.pickle.zst",
    "tests/data/torch-2.11-h200-streams/streams2_default.pickle.zst",
    "tests/data/torch-2.11-h200-streams/streams2_expandable_segments_True.pickle.zst",
]
CARDS = ["16GB", "24GB", "40GB", "80GB"]
OUTSIDE = 788000000  # the default outside memory (sim/cards.c, "train")
DRIVER = 3276800  # 3.125 MiB the driver keeps
# the host time ending the "N settings ..." line, and the decodes before it (a count of the
# work, which a build that reads the trace fewer or more times changes): shown beside
TIMING = re.compile(r"([0-9]+) decodes, [0-9.]+ s$", re.M)


def run(cmd):
    """(stdout, wall, user, sys) of cmd and every process under it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"tune_bench: {' '.join(cmd)} exited {r.returncode}: {r.stderr[-400:]}")
    return (r.stdout, wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime)


def tight_card(binary, trace):
    out = subprocess.run([binary, "run", "-f", "json", "-p", "torch", trace], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    peak = json.loads(out)["runs"][0]["peak_reserved"]
    return f"{math.ceil((peak + OUTSIDE + DRIVER) / 1e9)}GB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old")
    ap.add_argument("--new", default="build/allocsim")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--trace", action="append")
    ap.add_argument("--card", action="append")
    ap.add_argument("--no-json", action="store_true", help="compare the tables alone")
    ap.add_argument("--names", default="", help="OLD,NEW: what the builds are (commits)")
    a = ap.parse_args()
    bins = [("old", a.old)] if a.old else []
    bins.append(("new", a.new))
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True).stdout.strip() or "unknown"
    except OSError:  # no git (a copy of the tree elsewhere)
        commit = "unknown"
    load0 = os.getloadavg()[0]
    print(f"allocsim tune -q --device CARD TRACE: wall / user / sys seconds, median of {a.reps}"
          f" (whole process tree)")
    names = a.names.split(",") if a.names else [a.old or "", a.new]
    print(f"checkout {commit}" + (f"; old: {names[0]}" if a.old else "") + f"; new: {names[-1]}")
    print(f"{os.cpu_count()} CPUs, load {load0:.2f} at the start")
    head = f"{'trace':<38} {'card':>5}"
    for name, _ in bins:
        head += f"  {name + ' wall':>9} {'user':>6} {'sys':>6}"
    head += f"  {'decodes':>7}"
    if a.old:
        head += "  same"
    print(head)
    differ = 0
    for trace in a.trace or TRACES:
        cards = a.card or CARDS + [tight_card(a.new, trace)]
        for card in cards:
            cmd = ["tune", "-q", "--device", card, trace]
            times = {name: [] for name, _ in bins}
            outs, decodes = {}, {}
            for _ in range(a.reps):
                for name, b in bins:
                    out, *t = run([b] + cmd)
                    times[name].append(t)
                    outs[name] = TIMING.sub("", out)
                    m = TIMING.search(out)
                    decodes[name] = m.group(1) if m else "?"
            line = f"{os.path.basename(trace).replace('.pickle.zst', ''):<38} {card:>5}"
            for name, _ in bins:
                med = [statistics.median(x[i] for x in times[name]) for i in range(3)]
                line += f"  {med[0]:9.2f} {med[1]:6.2f} {med[2]:6.2f}"
            line += f"  {'->'.join(decodes[name] for name, _ in bins):>7}"
            if a.old:
                js = [] if a.no_json else [
                    run([b, "tune", "-f", "json", "--device", card, trace])[0] for _, b in bins]
                same = outs["old"] == outs["new"] and (a.no_json or js[0] == js[1])
                differ += not same
                line += "  yes" if same else "  NO"
            print(line, flush=True)
    print(f"load {os.getloadavg()[0]:.2f} at the end" +
          (f"; {differ} case(s) print differently" if a.old else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
