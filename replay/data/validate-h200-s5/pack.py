#!/usr/bin/env python3
"""pack.py DIR OUT - validate.py's output folder DIR into at most six xz tar archives
OUT/partN.tar.xz of at most ~14 MiB each (the device tool returns eight files of at most
16 MiB), compressed in parallel. Left out: the simulator's own files (*.pred*, which the
same build makes again, the same bytes) except for items where a run differs, the per-call
timing logs (*.calls.csv) and the generated traces (*.zst). Part 0 holds the summary, the
logs and every item with a PyTorch side; the others the replay items, nocache last."""
import concurrent.futures as cf
import json
import lzma
import os
import sys
import tarfile

RAW_PER_PART = 96 << 20  # CSV logs compress about 10x under xz


def differs(p):
    return any(x["oom_match"] != "1" or x["peak_match"] != "1" or
               not x["segments"].startswith("same")
               for v in p.get("measured", {}).values() for x in v.get("rows") or [])


def pack(path, d, names):
    with tarfile.open(path, "w:xz", preset=3) as t:
        for n in names:
            t.add(os.path.join(d, n), arcname="v/" + n)
    return path, os.path.getsize(path), len(names)


def main():
    d, out = sys.argv[1], sys.argv[2]
    res = json.load(open(os.path.join(d, "summary.json")))
    keep_pred = set()
    for i, p in enumerate(res):
        if differs(p):
            keep_pred.add("%02d_" % i)
    names = sorted(os.listdir(d))

    def wanted(n):
        if n.endswith(".calls.csv") or n.endswith(".zst"):
            return False
        return ".pred" not in n or n[:3] in keep_pred

    names = [n for n in names if wanted(n)]
    pyt = {n[:3] for n in names if ".pytorch." in n}
    first = [n for n in names if not n[:2].isdigit() or n[:3] in pyt]
    rest = [n for n in names if n not in first]
    rest.sort(key=lambda n: ("nocache" in n, n))
    parts, cur, size = [first], [], 0
    for n in rest:
        s = os.path.getsize(os.path.join(d, n))
        if cur and size + s > RAW_PER_PART:
            parts.append(cur)
            cur, size = [], 0
        cur.append(n)
        size += s
    if cur:
        parts.append(cur)
    parts = parts[:6]

    jobs = [(os.path.join(out, "part%d.tar.xz" % k), d, p) for k, p in enumerate(parts)]
    with cf.ProcessPoolExecutor(max_workers=len(parts)) as ex:
        for path, s, n in ex.map(pack, *zip(*jobs)):
            print(f"{path}: {n} files, {s} B")
    left = sum(len(p) for p in parts)
    print(f"packed {left} files of {len(names)} wanted")


if __name__ == "__main__":
    main()
