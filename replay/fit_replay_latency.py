#!/usr/bin/env python3
"""fit_replay_latency.py DIR - fit the device cost model on the calls of real replays.

Reads every DIR/*.lat.csv that allocsim-replay wrote in `make validate` (run,alloc,event,
action,size,ns: each successful device call of every policy on every trace, timed on the
GPU), fits ns = fixed + per_mib * MiB per action by least squares on the median time of
each size (sizes seen at least 20 times, weighted by 1/median: relative error), then
checks the model where it matters: for every run, the modelled total device time
(from the simulator's own --segments rows, DIR/*.pred.csv) against the measured total
(DIR/*.replay.json, device_time_s)."""
import csv
import glob
import json
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fit_latency import fit  # noqa: E402


def main():
    d = sys.argv[1]
    per = defaultdict(list)
    for f in glob.glob(os.path.join(d, "*.lat.csv")):
        for r in csv.DictReader(open(f)):
            per[(r["action"], int(r["size"]))].append(float(r["ns"]))
    params = {}
    print(f"{'action':14s} {'fixed_ns':>9s} {'ns_per_mib':>10s} {'sizes':>5s} {'calls':>7s} "
          f"{'med|err|':>8s} {'max|err|':>8s}")
    for action in ("segment_alloc", "segment_free", "segment_map", "segment_unmap"):
        pts = [(s / 2**20, statistics.median(v), len(v)) for (a, s), v in per.items()
               if a == action and len(v) >= 20]
        if not pts:
            continue
        a, b = fit([(x, y) for x, y, _ in pts])
        errs = [abs(a + b * x - y) / y for x, y, _ in pts]
        params[action] = (a, b)
        print(f"{action:14s} {a:9.0f} {b:10.1f} {len(pts):5d} {sum(n for *_, n in pts):7d} "
              f"{statistics.median(errs):8.1%} {max(errs):8.1%}")
    ratios = []
    for f in sorted(glob.glob(os.path.join(d, "*.pred.csv"))):
        t = f[: -len(".pred.csv")]
        try:
            meas = json.load(open(t + ".replay.json"))["runs"]
        except (OSError, ValueError, KeyError):
            continue
        model = defaultdict(float)
        for r in csv.DictReader(open(f)):
            a, b = params.get(r["action"], (0, 0))
            model[int(r["run"])] += (a + b * int(r["size"]) / 2**20) / 1e9
        for i, m in enumerate(meas):
            if m.get("device_time_s"):
                ratios.append((model[i] / m["device_time_s"], os.path.basename(t), i))
    ratios.sort()
    if ratios:
        q = [r[0] for r in ratios]
        print(f"modelled / measured device time over {len(q)} runs: median {statistics.median(q):.2f}, "
              f"10% {q[len(q)//10]:.2f}, 90% {q[len(q)*9//10]:.2f}, min {q[0]:.2f} ({ratios[0][1]}), "
              f"max {q[-1]:.2f} ({ratios[-1][1]})")


if __name__ == "__main__":
    main()
