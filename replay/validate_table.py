#!/usr/bin/env python3
"""validate_table.py SUMMARY.json [MORE.json ...] [--totals] - replay/RESULTS.md's tables
from what `make validate` measured (replay/validate.py's summary.json, plain or zstd'd).
A later summary completes the first: where the first has a (trace, policy) side skipped
or failed (a call out of time), the later one's measurement of the same item (the same
capacities, else it is an error) takes its place; items the first lacks are added. The
parts of a split plan (validate.py --part I/N) merge so: each item once, and the items
in the whole plan's order (their "index").

Prints, in Markdown, one row per (trace, policy, side): the runs compared, how many have
the simulator's OOM allocation, peak reserved and device event sequence exactly, and the
largest relative peak error; then a total per side. --totals prints the totals alone, with
the traces, policies and capacities they cover. `make test` regenerates the tables quoted
in RESULTS.md from the committed summary (tests/docs.py), so they cannot go stale."""
import json
import subprocess
import sys


SIDES = {"replay": "the same policy on the real device",
         "pytorch": "PyTorch's own allocator",
         "pytorch_capture": "PyTorch's own allocator, graph pools in real captures"}


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] == b"\x28\xb5\x2f\xfd":
        data = subprocess.run(["zstd", "-dc"], input=data, capture_output=True,
                              check=True).stdout
    return json.loads(data)


def merge(results, more):
    """results with the skipped or failed sides filled from `more` (see the docstring)."""
    at = {(p["trace"], p["spec"]): p for p in results}
    for q in more:
        p = at.get((q["trace"], q["spec"]))
        if p is None:
            results.append(q)
            at[(q["trace"], q["spec"])] = q
            continue
        for side, v in q.get("measured", {}).items():
            if not v.get("rows") or p.get("measured", {}).get(side, {}).get("rows"):
                continue
            if p["caps"] != q["caps"]:
                raise ValueError(f"{q['trace']} {q['spec']}: other capacities than the first "
                                 "summary's")
            p.setdefault("measured", {})[side] = v
    if all("index" in p for p in results):
        results.sort(key=lambda p: p["index"])
    return results


def side_rows(results):
    """(trace, spec, mincap, side, rows or error text) in the summary's order."""
    order = list(SIDES)
    for p in results:
        m = p.get("measured", {})
        for side in sorted(m, key=lambda x: (order.index(x) if x in order else len(order), x)):
            v = m[side]
            yield p, side, v.get("rows") or v.get("error", v.get("skipped", "not run"))


def table(results):
    lines = ["| trace | policy | mincap (sim) | side | runs | OOM exact | peak exact | "
             "events identical | max abs peak error |", "|---|---|---|---|---|---|---|---|---|"]
    for p, side, rows in side_rows(results):
        if isinstance(rows, str):
            lines.append(f"| {p['trace']} | {p['spec']} | {p['mincap']} | {side} | - | "
                         f"{rows[:60]} | | | |")
            continue
        o, pk, ev, err = count(rows)
        lines.append(f"| {p['trace']} | {p['spec']} | {p['mincap']} | {side} | {len(rows)} | "
                     f"{o} | {pk} | {ev} | {100 * err:.3f}% |")
    return lines + totals(results)


def count(rows):
    return (sum(int(x["oom_match"]) for x in rows), sum(int(x["peak_match"]) for x in rows),
            sum(x["segments"].startswith("same") for x in rows),
            max(abs(float(x["peak_error"])) for x in rows))


def totals(results, head=False):
    tot = {}
    for p, side, rows in side_rows(results):
        if isinstance(rows, str):
            continue
        t = tot.setdefault(side, [0, 0, 0, 0, set(), set()])
        o, pk, ev, _ = count(rows)
        t[0] += len(rows)
        t[1] += o
        t[2] += pk
        t[3] += ev
        t[4].add(p["trace"])
        t[5].add(p["spec"])
    lines = []
    if head:
        lines = ["| against | traces | policies | runs | OOM allocation exact | "
                 "peak reserved exact | device events identical |", "|---|---|---|---|---|---|---|"]
    for side, t in tot.items():
        pct = [f"{t[k]} ({100 * t[k] / t[0]:.0f}%)" for k in (1, 2, 3)]
        if head:
            what = SIDES.get(side, side)
            lines.append(f"| {what} | {len(t[4])} | {len(t[5])} | {t[0]} | " + " | ".join(pct)
                         + " |")
        else:
            lines.append(f"| **all** | | | {side} | {t[0]} | " + " | ".join(pct) + " | |")
    return lines


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    res = load(args[0])
    for more in args[1:]:
        try:
            res = merge(res, load(more))
        except ValueError as ex:
            print(f"validate_table: {more}: {ex}", file=sys.stderr)
            return 1
    print("\n".join(totals(res, head=True) if "--totals" in sys.argv else table(res)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
