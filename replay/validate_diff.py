#!/usr/bin/env python3
"""validate_diff.py OLD.json[,MORE...] NEW.json[,MORE...] - two `make validate`
measurements side by side (each a comma-separated list of summaries, merged as
validate_table.py merges them): the (trace, policy) items of both, of one alone, the
items whose frontier or capacities changed, and, over the runs of the items in both,
how many compare rows (each run's predicted and measured OOM allocation and peak
reserved, and its device event comparison) are the same in both, per side; the rows that
differ are listed."""
import sys

import validate_table


def load(arg):
    paths = arg.split(",")
    res = validate_table.load(paths[0])
    for p in paths[1:]:
        res = validate_table.merge(res, validate_table.load(p))
    return res


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    old, new = load(sys.argv[1]), load(sys.argv[2])
    a = {(p["trace"], p["spec"]): p for p in old}
    b = {(p["trace"], p["spec"]): p for p in new}
    both = [k for k in b if k in a]
    print(f"items: {len(both)} in both, {len(b) - len(both)} new "
          f"({', '.join(sorted({k[0] for k in b if k not in a})) or '-'}), "
          f"{len(a) - len(both)} gone")
    moved = [k for k in both if (a[k]["mincap"], a[k]["caps"]) != (b[k]["mincap"], b[k]["caps"])]
    print(f"frontier or capacities changed: {len(moved)} of {len(both)}")
    per, diffs = {}, []
    for k in both:
        for side, v in b[k].get("measured", {}).items():
            old_rows = a[k].get("measured", {}).get(side, {}).get("rows") or []
            t = per.setdefault(side, [0, 0, 0])
            if not old_rows:
                t[2] += len(v.get("rows") or [])
                continue
            for x, y in zip(v.get("rows") or [], old_rows):
                t[0] += 1
                if all(x[f] == y[f] for f in x if f != "run"):
                    t[1] += 1
                else:
                    diffs.append((k, side, x["capacity"]))
    for side, (n, same, unpaired) in per.items():
        if n:
            print(f"{side}: {n} runs in both, {same} the same"
                  + (f"; {unpaired} more, a side the old lacks" if unpaired else ""))
        else:
            print(f"{side}: {unpaired} runs of these items, a side the old lacks")
    for k, side, cap in diffs:
        print(f"  differs: {k[0]} {k[1]} {side} at {cap}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
