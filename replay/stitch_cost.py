#!/usr/bin/env python3
"""stitch_cost.py - what GMLake's stitching cost on the GPU, from allocsim-replay --calls.

    python3 replay/stitch_cost.py [--fit] RUNS.tar.zst|DIR

Reads every v/NN_TRACE_SPEC.calls.csv (run,call,rc,size,ns: every call of the CUDA device,
replay/cuda_device.h) of a validate run (an archive of it or its folder) and groups the
calls of each stitched block (sBlock): a stitch is a va_reserve followed by the alias calls
that map the block's chunks again (one per run of chunks in a row in one pBlock; each
alias logged with its parts alias.map, its cuMemMap calls, and alias.access, its
cuMemSetAccess calls, page by page as GMLake's VirBlock); a drop is the unalias calls (one
cuMemUnmap per mapped run) right before the va_release of the block's range. Unaliases not
followed by a va_release are the single pages a segment release takes from an active
sBlock. Prints, per item, the stitches and pages and the medians of the measured times;
with --fit, the least-squares fixed + per-MiB cost of alias and unalias calls (the
simulated device's as_simdev_params.alias and .unalias).
"""
import csv
import io
import os
import statistics
import subprocess
import sys
import tarfile

MIB = 1 << 20
PAGE = 2 * MIB


def members(path):
    """(name, text) of every calls.csv under path (a folder or a .tar.zst/.tar.gz)."""
    if os.path.isdir(path):
        for root, _, files in os.walk(path):
            for f in sorted(files):
                if f.endswith(".calls.csv"):
                    with open(os.path.join(root, f)) as fh:
                        yield f, fh.read()
        return
    if path.endswith(".zst"):
        raw = subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout
        tf = tarfile.open(fileobj=io.BytesIO(raw))
    else:
        tf = tarfile.open(path)
    for m in sorted(tf.getmembers(), key=lambda m: m.name):
        if m.isfile() and m.name.endswith(".calls.csv"):
            yield os.path.basename(m.name), tf.extractfile(m).read().decode()


def parse(text):
    """Stitches (size, reserve_ns, map_ns, access_ns), drops (size, unalias_ns, va_release_ns),
    lone single-page unaliases, every alias call (size, ns) and unalias call (size, ns), and
    the time of all calls (the parts aside)."""
    st, dr, lone, al, un = [], [], 0, [], []
    total = 0.0
    pend_va = None  # the last va_reserve: (run, size, ns)
    cur = None  # the stitch being read: [size, reserve_ns, map_ns, access_ns, mapped]
    unal = []  # unalias calls not yet followed by a va_release: (size, ns)
    parts = {}
    for r in csv.DictReader(io.StringIO(text)):
        call, size, ns, ok = r["call"], int(r["size"]), float(r["ns"]), r["rc"] == "0"
        if "." not in call:
            total += ns
        if not ok:
            continue
        if call == "va_reserve":
            pend_va, cur = (r["run"], size, ns), None
        elif call in ("alias.map", "alias.access"):
            parts[call] = ns
        elif call == "alias":
            al.append((size, ns))
            if cur is None and pend_va and pend_va[0] == r["run"]:
                cur = [pend_va[1], pend_va[2], 0.0, 0.0, 0]
                pend_va = None
            if cur is not None:
                cur[2] += parts.get("alias.map", 0.0)
                cur[3] += parts.get("alias.access", 0.0)
                cur[4] += size
                if cur[4] == cur[0]:
                    st.append(tuple(cur[:4]))
                    cur = None
        elif call == "unalias":
            un.append((size, ns))
            unal.append((size, ns))
        elif call == "va_release":
            if unal:
                dr.append((size, sum(n for _, n in unal), ns))
                unal = []
        else:
            lone += sum(1 for s, _ in unal if s == PAGE)
            unal = []
    return st, dr, lone, al, un, total


def med(xs, scale=1e-3):
    """The median in µs (scale 1e-3) or ms (1e-6), one decimal; '-' for none."""
    return f"{statistics.median(xs) * scale:.1f}" if xs else "-"


def fit(points):
    """Least squares ns = a + b * MiB over (size, ns)."""
    if len(points) < 2:
        return None
    xs = [s / MIB for s, _ in points]
    ys = [n for _, n in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def main(argv):
    do_fit = "--fit" in argv
    args = [a for a in argv if a != "--fit"]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    rows, all_al, all_un, pm, pa = [], [], [], [], []
    tot = [0, 0, 0, 0, 0.0, 0.0]
    for name, text in members(args[0]):
        st, dr, lone, al, un, total = parse(text)
        all_al += al
        all_un += un
        pm += [m / (s // PAGE) for s, _, m, _ in st]
        pa += [a / (s // PAGE) for s, _, _, a in st]
        pages = sum(s for s, *_ in st) // PAGE
        cost = sum(r + m + a for _, r, m, a in st) + sum(n + v for _, n, v in dr)
        tot = [tot[0] + len(st), tot[1] + pages, tot[2] + len(dr), tot[3] + lone,
               tot[4] + cost, tot[5] + total]
        share = f"{100 * cost / total:.1f} %" if total and st else "-"
        rows.append(f"| {name[:-len('.calls.csv')]} | {len(st)} | {pages} | "
                    f"{med([r + m + a for _, r, m, a in st], 1e-6)} | "
                    f"{med([m / (s // PAGE) for s, _, m, _ in st])} | "
                    f"{med([a / (s // PAGE) for s, _, _, a in st])} | {len(dr)} | "
                    f"{med([n / (s // PAGE) for s, n in un])} | {share} |")
    print("| item | stitches | pages | ms per stitch | cuMemMap µs/page | "
          "cuMemSetAccess µs/page | drops | cuMemUnmap µs/page | of device time |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    share = f"{100 * tot[4] / tot[5]:.1f} %" if tot[5] else "-"
    print(f"| **all** | {tot[0]} | {tot[1]} | | | | {tot[2]} | | {share} |")
    print(f"per page, every stitch: cuMemMap {med(pm)} µs, cuMemSetAccess {med(pa)} µs, "
          f"cuMemUnmap {med([n / (s // PAGE) for s, n in all_un])} µs (medians)")
    print(f"single pages a segment release unaliased from an active sBlock: {tot[3]}")
    if do_fit:
        for what, pts in (("alias", all_al), ("unalias", all_un)):
            f = fit(pts)
            if f:
                print(f"{what}: fixed_ns {f[0]:.0f}, ns_per_mib {f[1]:.1f} ({len(pts)} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
