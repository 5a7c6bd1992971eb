#!/usr/bin/env python3
"""fit_latency.py LATENCY.csv [MAX_MIB] - fit each device call's time as fixed + per-MiB.

Reads allocsim-calib's latency.csv (call,size,rep,ns; rep -1 is a warm-up and is dropped),
takes the median time at each size, and fits ns = fixed + per_mib * MiB by least squares
on sizes up to MAX_MIB (default 2048: above 2 GiB cudaMalloc times scatter over two
orders of magnitude, see RESULTS.md). The fit is weighted by 1/median, so it minimises
relative error. For each call it prints the parameters, the worst and the median relative error of
the fit over the fitted sizes, and how far it is off at the largest measured size."""
import csv
import statistics
import sys
from collections import defaultdict

CALLS = {  # simdev parameter <- calib call
    "reserve": "cudaMalloc",
    "release": "cudaFree",
    "map": "map2M",
    "unmap": "unmap2M",
}


def fit(points):
    # weighted least squares, weight 1/y^2 on squared residuals (relative error)
    sw = swx = swy = swxx = swxy = 0.0
    for x, y in points:
        w = 1.0 / (y * y)
        sw += w
        swx += w * x
        swy += w * y
        swxx += w * x * x
        swxy += w * x * y
    det = sw * swxx - swx * swx
    if abs(det) < 1e-300:
        return swy / sw, 0.0
    b = (sw * swxy - swx * swy) / det
    a = (swy - b * swx) / sw
    return a, b


def main():
    path = sys.argv[1]
    max_mib = float(sys.argv[2]) if len(sys.argv) > 2 else 2048
    d = defaultdict(list)
    for r in csv.DictReader(open(path)):
        if int(r["rep"]) < 0:
            continue
        d[(r["call"], int(r["size"]))].append(float(r["ns"]))
    print(f"{'param':8s} {'call':12s} {'fixed_ns':>10s} {'ns_per_mib':>11s} "
          f"{'sizes':>5s} {'max|err|':>9s} {'med|err|':>9s}  largest size: measured vs fit")
    for param, call in CALLS.items():
        pts = sorted((s / 2**20, statistics.median(v)) for (c, s), v in d.items() if c == call)
        if not pts:
            continue
        use = [p for p in pts if p[0] <= max_mib]
        a, b = fit(use)
        errs = [abs(a + b * x - y) / y for x, y in use]
        big = pts[-1]
        print(f"{param:8s} {call:12s} {a:10.0f} {b:11.1f} {len(use):5d} {max(errs):9.1%} "
              f"{statistics.median(errs):9.1%}  {big[0]:.0f} MiB: {big[1]/1e3:.0f} us vs "
              f"{(a + b * big[0])/1e3:.0f} us")


if __name__ == "__main__":
    main()
