#!/usr/bin/env python3
"""harness_pools.py [--allocsim BIN] - why graph_probe's PyTorch runs differ from the
simulator in this measurement (README.md), from the data: the simulator reads the
snapshot's private pools (a CUDA graph's and a MemPool's, traces/snap_pools.c) and the
empty_cache() the importer infers, while torch_replay.py replays every allocation into
PyTorch's default pool and makes no empty_cache() call. For each torch config this
simulates, at the measured capacities, (a) the snapshot as allocsim reads it, as
validate.py predicted, and (b) the events torch_replay.py itself replayed (its own
load_trace, written as an allocsim text trace), and compares both with PyTorch's runs
(mismatch/*.pytorch.*) through `allocsim compare`. Run from the repository root."""
import argparse
import csv
import io
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "replay"))
import torch_replay  # noqa: E402
import validate_table  # noqa: E402

TRACE = "tests/data/torch-2.11-h200-pools/graph_probe.pickle.zst"


def harness_text(path, out):
    """torch_replay.py's event list of path as an allocsim text trace."""
    evs, _ = torch_replay.load_trace(path)
    with open(out, "w") as f:
        f.write("allocsim-text 1\n")
        for e in evs:
            if e[0] == "a":
                f.write(f"alloc {e[1]} {e[2]} s={e[3]}\n")
            else:
                f.write(f"{'free_req' if e[0] == 'r' else 'free'} {e[1]}\n")
    return sum(e[0] == "a" for e in evs), len(evs)


def compare(bin_, p, trace, meas, tmp):
    caps = sum((["-c", str(c)] for c in p["caps"]), [])
    base = os.path.join(tmp, "pred")
    subprocess.run([bin_, "-q", "-f", "json", "-p", p["spec"], *caps, "--device-streams",
                    "pytorch", "-o", base + ".json", "--segments", base + ".csv", trace],
                   check=True)
    out = subprocess.run([bin_, "compare", "-f", "csv", "--segments", base + ".csv",
                          meas + ".csv", base + ".json", meas + ".json"], check=True,
                         capture_output=True, text=True).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    o, pk, ev, err = validate_table.count(rows)
    return f"{len(rows)} runs, OOM exact {o}, peak exact {pk}, events identical {ev}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--allocsim", default=os.path.join(ROOT, "build", "allocsim"))
    a = ap.parse_args()
    results = validate_table.load(os.path.join(HERE, "summary.json.zst"))
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "harness.txt")
        na, ne = harness_text(os.path.join(ROOT, TRACE), text)
        print(f"the events torch_replay.py replays: {na} allocations, {ne} events, one pool, "
              "no empty_cache")
        for i, p in enumerate(results):
            if p["trace"] != "graph_probe" or "pytorch" not in p["measured"]:
                continue
            tag = f"{i:02d}_graph_probe_{p['spec'].replace(':', '-')}.pytorch"
            meas = os.path.join(tmp, tag)
            kept = os.path.join(HERE, "mismatch", tag)
            with open(meas + ".csv", "wb") as f:
                f.write(subprocess.run(["zstd", "-dc", kept + ".csv.zst"], check=True,
                                       capture_output=True).stdout)
            with open(kept + ".json") as src, open(meas + ".json", "w") as dst:
                dst.write(src.read())
            print(f"{p['spec']}:")
            print("  the snapshot (private pools):  "
                  + compare(a.allocsim, p, os.path.join(ROOT, TRACE), meas, tmp))
            print("  the harness's events:          " + compare(a.allocsim, p, text, meas, tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
