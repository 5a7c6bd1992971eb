#!/usr/bin/env python3
"""validate_pack.py DIR OUT [--files N] [--max-mib M] - validate.py's output folder DIR
packed for the device tool, which returns at most eight files of at most 16 MiB each and
64 MiB in all: OUT/summary.json.xz and at most N - 1 xz tar archives OUT/partK.tar.xz,
each at most M MiB (default 7 files, 14 MiB).

Kept: every item's reports, segment events, latency logs and logs (each policy's,
gmlake's too), the summary, the call's logs. Left out: the simulator's own files (*.pred*,
which the same build makes again, the same bytes) except for items where a run differs,
the per-call timing logs (*.calls.csv) and the generated traces (*.zst). Part 0 holds the
summary, the logs and every item with a PyTorch side; the rest is spread over the other
parts by size. Nothing is dropped silently: a part over M MiB is split in two and packed
again while files are left; if that does not suffice, the exit status is 1 and the
message says what would be lost. Prints every file written and its size."""
import argparse
import concurrent.futures as cf
import json
import lzma
import os
import sys
import tarfile


def differs(p):
    return any(x["oom_match"] != "1" or x["peak_match"] != "1" or
               not x["segments"].startswith("same")
               for v in p.get("measured", {}).values() for x in v.get("rows") or [])


def pack(path, d, names):
    tmp = path + ".tmp"
    with tarfile.open(tmp, "w:xz", preset=3) as t:
        for n in names:
            t.add(os.path.join(d, n), arcname="v/" + n)
    os.replace(tmp, path)
    return path, os.path.getsize(path), names


def wanted_names(d, res):
    keep_pred = {"%02d_" % i for i, p in enumerate(res) if differs(p)}

    def wanted(n):
        if n.endswith(".calls.csv") or n.endswith(".zst") or n == "summary.json":
            return False
        return ".pred" not in n or n[:3] in keep_pred

    return [n for n in sorted(os.listdir(d)) if os.path.isfile(os.path.join(d, n)) and wanted(n)]


def spread(d, names, k):
    """names over k parts of about equal raw size, largest first into the smallest part."""
    parts = [[] for _ in range(k)]
    size = [0] * k
    for n in sorted(names, key=lambda n: -os.path.getsize(os.path.join(d, n))):
        j = size.index(min(size))
        parts[j].append(n)
        size[j] += os.path.getsize(os.path.join(d, n))
    return [sorted(p) for p in parts if p]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("out")
    ap.add_argument("--files", type=int, default=7)
    ap.add_argument("--max-mib", type=float, default=14)
    a = ap.parse_args()
    limit = int(a.max_mib * (1 << 20))
    with open(os.path.join(a.dir, "summary.json"), "rb") as f:
        raw = f.read()
    res = json.loads(raw)
    with open(os.path.join(a.out, "summary.json.xz"), "wb") as f:
        f.write(lzma.compress(raw, preset=6))
    names = wanted_names(a.dir, res)
    pyt = {n[:3] for n in names if ".pytorch." in n}
    first = [n for n in names if not n[:2].isdigit() or n[:3] in pyt]
    rest = [n for n in names if n not in first]
    slots = a.files - 1  # summary.json.xz is one of the files
    parts = [first] + spread(a.dir, rest, max(1, slots - 1))
    done = []
    rounds = 0
    while parts:
        rounds += 1
        jobs = [(os.path.join(a.out, "r%d-%d.tar.xz" % (rounds, i)), a.dir, p)
                for i, p in enumerate(parts)]
        with cf.ProcessPoolExecutor(max_workers=len(jobs)) as ex:
            got = list(ex.map(pack, *zip(*jobs)))
        parts = []
        for path, s, p in got:
            if s <= limit:
                done.append((path, s, p))
                continue
            os.unlink(path)
            if len(p) < 2:
                print(f"validate_pack: {p[0]} alone is {s} B of xz, over {limit}", file=sys.stderr)
                return 1
            parts += [p[: len(p) // 2], p[len(p) // 2:]]
        if len(done) + len(parts) > slots:
            lost = sum(len(p) for p in parts)
            print(f"validate_pack: {lost} files need more than {slots} archives of at most "
                  f"{limit} B", file=sys.stderr)
            return 1
    for k, (path, s, p) in enumerate(done):  # part0 is the summary's and PyTorch's
        want = os.path.join(a.out, "part%d.tar.xz" % k)
        os.replace(path, want)
        print(f"{want}: {len(p)} files, {s} B")
    print(f"{a.out}/summary.json.xz: {os.path.getsize(os.path.join(a.out, 'summary.json.xz'))} B; "
          f"packed {sum(len(p) for _, _, p in done)} files of {len(names)} wanted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
