#!/usr/bin/env python3
"""key_from_replay.py WORKLOAD ALLOCS OUT.json REPLAY.json... - a key.json (the schema of
tests/data/torch-2.11-h200/README.md) from torch_replay.py --key-protocol recordings.

Each REPLAY.json (with its .csv.zst or .csv of segment events next to it) is one process:
its first run uncapped, then its caps in order. The key lists, per config, the uncapped
run's peak reserved and segment events and, per cap, allowed_bytes, oom_alloc, peak
reserved and segment events [alloc, action, size], as the ground-truth key does, so the
same fidelity test reads both."""
import csv
import io
import json
import os
import subprocess
import sys


def segments(base):
    if os.path.exists(base + ".csv.zst"):
        txt = subprocess.run(["zstd", "-dc", base + ".csv.zst"], capture_output=True, text=True,
                             check=True).stdout
    else:
        with open(base + ".csv") as f:
            txt = f.read()
    out = {}
    for r in csv.DictReader(io.StringIO(txt)):
        out.setdefault(int(r["run"]), []).append([int(r["alloc"]), r["action"], int(r["size"])])
    return out


def main():
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    wl, allocs, dest = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    configs = {}
    for path in sys.argv[4:]:
        rep = json.load(open(path))
        segs = segments(path[:-len(".json")])
        runs = rep["runs"]
        un = runs[0]
        assert un["capacity"] is None, f"{path}: the first run is capped"
        c = {"peak_reserved": un["peak_reserved"], "peak_allocated": un["peak_allocated"],
             "hit_device_limit": bool(un.get("hit_device_limit")),
             "segment_events": segs.get(un["run"], []), "caps": []}
        for r in runs[1:]:
            c["caps"].append({"allowed_bytes": r["capacity"], "oom_alloc": r["oom_alloc"],
                              "peak_reserved": r["peak_reserved"],
                              "segment_events": segs.get(r["run"], [])})
        configs[un["conf"]] = c
    key = {wl: {"allocs": allocs, "configs": configs}}
    tmp = dest + ".tmp"
    with open(tmp, "w") as f:
        json.dump(key, f, separators=(",", ":"))
        f.write("\n")
    os.replace(tmp, dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
