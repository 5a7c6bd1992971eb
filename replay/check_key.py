#!/usr/bin/env python3
"""check_key.py KEY.json WORKLOAD MEASURED.json MEASURED.csv - does a torch_replay.py run
reproduce the ground-truth key? (It must, for the replay method to be trusted.)

Matches runs by config and order (the uncapped run, then the key's caps in its order) and
compares oom_alloc, peak_reserved and the segment event sequence [alloc, action, size].
Prints one line per run and a summary; exit 0 when everything matched."""
import csv
import json
import sys
from collections import defaultdict


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    key = json.load(open(sys.argv[1]))[sys.argv[2]]
    rep = json.load(open(sys.argv[3]))
    segs = defaultdict(list)
    for r in csv.DictReader(open(sys.argv[4])):
        segs[int(r["run"])].append([int(r["alloc"]), r["action"], int(r["size"])])
    byconf = defaultdict(list)
    for i, run in enumerate(rep["runs"]):
        byconf[run["conf"]].append(i)
    total = ok = 0
    for conf, idx in byconf.items():
        kc = key["configs"].get(conf)
        if kc is None:
            print(f"{conf}: not in the key")
            continue
        want = [dict(kc, allowed_bytes=None, oom_alloc=None)] + kc["caps"]
        for j, i in enumerate(idx):
            if j >= len(want):
                break
            k, m = want[j], rep["runs"][i]
            if (k["allowed_bytes"] or None) != m["capacity"]:
                print(f"{conf} run {i}: capacity {m['capacity']} != key {k['allowed_bytes']}")
                continue
            ks, ms = k["segment_events"], segs[i]
            first = next((n for n, (a, b) in enumerate(zip(ks, ms)) if a != b), None)
            if first is None and len(ks) != len(ms):
                first = min(len(ks), len(ms))
            same = (k["oom_alloc"] == m["oom_alloc"] and k["peak_reserved"] == m["peak_reserved"]
                    and first is None)
            total += 1
            ok += same
            diff = "" if first is None else (
                f" first segment difference at #{first}: key "
                f"{ks[first] if first < len(ks) else 'end'} measured "
                f"{ms[first] if first < len(ms) else 'end'}")
            print(f"{'OK  ' if same else 'DIFF'} {conf:50s} cap={m['capacity']} "
                  f"oom {m['oom_alloc']} (key {k['oom_alloc']}) peak {m['peak_reserved']} "
                  f"(key {k['peak_reserved']}) segs {len(ms)}/{len(ks)}{diff}")
    print(f"{ok}/{total} runs reproduce the key exactly")
    return 0 if ok == total else 1


if __name__ == "__main__":
    sys.exit(main())
