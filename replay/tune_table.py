#!/usr/bin/env python3
"""tune_table.py [--allocsim EXE] - the GPU check of `allocsim tune`, as a Markdown table.

For each shared snapshot, replay/tune_validate.sh ran on the H200 (replay/data/tune-h200/)
PyTorch's own allocator (torch_replay.py, memory fraction = the usable size) under the
default setting and under the setting `allocsim tune` recommends at that card size. This
script simulates the same (setting, capacity) pairs with allocsim now and prints one row
per pair: predicted against measured OOM allocation and peak reserved. It exits 1 when a
measured file is missing or malformed; a disagreement is printed, not hidden.

The card sizes: resnet_varbatch at a 9.6 GB card, moe_like at 12 GB, llama_accum_ckpt at
8 GiB, each less the default outside memory (788 MB, sim/CARDS.md). With --outside it
prints instead what replay/measure_outside.py measured on the same machine.
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join("replay", "data", "tune-h200")
CASES = [  # name, trace, card, usable capacity (card - 788 MB)
    ("resnet", "tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst", "9.6 GB", 8812000000),
    ("moe", "tests/data/torch-2.11-h200/moe_like.pickle.zst", "12 GB", 11212000000),
    ("llama", "tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst", "8 GiB", 7801934592),
]


def measured(name, which):
    path = os.path.join(ROOT, DATA, f"{name}_{which}.json")
    with open(path) as f:
        run = json.load(f)["runs"][0]
    oom = None if run["completed"] else run["oom_alloc"]
    return run["policy"], oom, run["peak_reserved"]


def simulate(exe, trace, cap, conf):
    out = subprocess.run([exe, "-f", "csv", "-q", "-p", conf, "-c", str(cap), trace], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    row = next(csv.DictReader(io.StringIO(out)))
    oom = None if row["completed"] == "1" else int(row["oom_alloc"])
    return oom, int(row["peak_reserved"])


def show(oom):
    return "fits" if oom is None else f"OOM at alloc {oom}"


def outside_table():
    with open(os.path.join(ROOT, DATA, "outside.json")) as f:
        d = json.load(f)
    print(f"{d['device']}, torch {d['torch']}, CUDA {d['cuda']}: cudaMemGetInfo's used bytes"
          " minus torch.cuda.memory_reserved(), after each step of one process")
    print(f"{'step':<12} {'outside (bytes)':>16} {'added':>14}")
    last = 0
    for s in d["steps"]:
        print(f"{s['step']:<12} {s['outside']:>16,} {s['outside'] - last:>+14,}")
        last = s["outside"]
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--allocsim", default=os.environ.get("AS_ALLOCSIM", "build/allocsim"))
    ap.add_argument("--outside", action="store_true", help="the outside-memory table instead")
    a = ap.parse_args()
    if a.outside:
        return outside_table()
    print("| snapshot | card (usable bytes) | setting | simulated | H200, PyTorch 2.11 | peak reserved sim / GPU |")
    print("|---|---|---|---|---|---|")
    same = total = 0
    for name, trace, card, cap in CASES:
        for which in ("default", "rec"):
            try:
                conf, g_oom, g_peak = measured(name, which)
            except (OSError, KeyError, IndexError, ValueError) as ex:
                print(f"tune_table.py: {DATA}/{name}_{which}.json: {ex}", file=sys.stderr)
                return 1
            s_oom, s_peak = simulate(a.allocsim, trace, cap, conf)
            total += 1
            same += s_oom == g_oom and s_peak == g_peak
            label = "default" if conf == "torch" else f"`{conf}` (recommended)"
            peaks = f"{s_peak:,} / {g_peak:,}" + ("" if s_peak == g_peak else " (differ)")
            print(f"| {os.path.basename(trace).split('.')[0]} | {card} ({cap:,}) | {label} "
                  f"| {show(s_oom)} | {show(g_oom)} | {peaks} |")
    print(f"\n{same} of {total} runs: the same outcome, OOM allocation and peak reserved.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
