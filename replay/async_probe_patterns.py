#!/usr/bin/env python3
"""The scripts allocsim-asyncprobe runs (replay/async_probe.c): patterns of stream-ordered
allocations and frees, each in a fresh pool, that ask one question of the driver's pool
each (replay/data/async-probe-h200/README.md lists them and what they showed).

usage: async_probe_patterns.py [2] > patterns.txt   (2: the second set, after the first's
findings: interior unmapped chunks, equal-size ties, trim order, what a stream costs)"""
import sys

K, M, G = 1 << 10, 1 << 20, 1 << 30
MAX = "max"
out = []


def pool(name, thr=MAX, flags=None):
    out.append(f"pool {name} {thr}" + ("" if flags is None else " %d %d %d" % flags))


def a(i, size, s=0):
    out.append(f"a {i} {size} {s}")


def f(i, s=None):
    out.append(f"f {i}" + ("" if s is None else f" {s}"))


def sync(s=None):
    out.append("s" + ("" if s is None else f" {s}"))


def emit():
    # 1. growth: what one request reserves in an empty pool, and where a second goes
    for s in [1, 512, 1 * M, 2 * M, 2 * M + 1, 8 * M, 31 * M, 32 * M, 32 * M + 1, 33 * M,
              48 * M, 63 * M, 64 * M, 65 * M, 96 * M + 1, 127 * M, 128 * M + 1, 256 * M + 1,
              G - 1, G + 1, 2 * G + 1, 4 * G + 1]:
        pool(f"grow_{s}")
        a(0, s), a(1, 1 * M), a(2, s)
    # 2. carving: consecutive small and mid requests (address deltas, UsedMemCurrent steps)
    pool("carve")
    for i, s in enumerate([1, 1, 2, 100, 256, 511, 512, 513, 1000, 1024, 2047, 2048, 4096,
                           4097, 8192, 65536, 65537, 100000, M - 1, M, M + 1, 2 * M - 1,
                           2 * M, 2 * M + 1, 3 * M, 1, 1]):
        a(i, s)
    # 3. contiguity across growths
    pool("contig")
    for i in range(10):
        a(i, 20 * M)
    # 4. free ranges merging across growths
    pool("merge_growths")
    for i in range(4):
        a(i, 30 * M)
    for i in range(4):
        f(i)
    sync(), a(4, 120 * M), a(5, 1 * M)
    pool("merge_partial")
    a(0, 30 * M), a(1, 30 * M), f(0), sync(), a(2, 50 * M), a(3, 20 * M)
    # 5. the kvcache trace's first events, threshold 0 (a 16 KiB request grew the pool)
    for thr in ("0", MAX):
        pool(f"kvstart_{thr}", thr)
        a(0, 9601024), a(1, 33603584)
        for i in range(2, 10):
            a(i, 1200128)
        a(10, 513024)
        for i in (1, 0, 10):
            f(i), sync()
        a(11, 16384), a(12, 57344), a(13, 1200128), a(14, 20 * M)
    # 6. what a trim gives back: whole growths, 32 MiB chunks or 2 MiB pages
    pool("trim_chunks", "0")
    a(0, 100 * M), a(1, 1 * M), f(0), sync(), a(2, 1 * M), a(3, 70 * M)
    pool("trim_pages", "0")
    a(0, 1 * M), a(1, 40 * M), a(2, 1 * M), f(1), sync(), a(3, 1 * M)
    pool("trim_mib", "0")
    for i in range(96):
        a(i, 1 * M)
    for i in range(40):
        f(i), sync()
    for i in range(41, 96, 2):
        f(i), sync()
    for i in range(40, 96, 2):
        f(i), sync()
    # 7. release thresholds other than 0 and max
    for thr in (1, 2 * M, 50 * M, 64 * M, 100 * M):
        pool(f"thr_{thr}", str(thr))
        for i in range(10):
            a(i, 20 * M)
        for i in range(10):
            f(i), sync()
        a(10, 1 * M)
    # 8. cudaMemPoolTrimTo
    pool("trimto")
    a(0, 100 * M), a(1, 1 * M), f(0), sync()
    for t in (150 * M, 64 * M, 40 * M, 0):
        out.append(f"t {t}")
    pool("trimto_low")
    a(0, 1 * M), a(1, 100 * M), a(2, 1 * M), f(1), sync(), out.append("t 0"), a(3, 60 * M)
    # 9. which free range a request takes: best or first fit, hole or tail, mapped or not
    pool("fit_holes")
    for i, s in enumerate([4 * M, 1 * M, 2 * M, 1 * M, 3 * M, 1 * M]):
        a(i, s)
    f(0), f(2), sync(), a(6, 2 * M), a(7, 1536 * K), a(8, 3 * M)
    pool("fit_hole_tail")
    a(0, 8 * M), a(1, 1 * M), f(0), sync(), a(2, 4 * M), a(3, 20 * M)
    pool("fit_unmapped", "0")
    a(0, 40 * M), a(1, 1 * M), a(2, 10 * M), f(0), sync(), a(3, 2 * M), a(4, 8 * M)
    pool("coalesce_order")
    a(0, 4 * M), a(1, 4 * M), a(2, 4 * M), a(3, 1 * M), f(0), f(2), f(1), sync(), a(4, 12 * M)
    # 10. address space: large requests, and the order of growths
    pool("big")
    a(0, 4 * G + 1), a(1, 8 * G), a(2, 1 * M), f(0), sync(), a(3, 6 * G)
    # 11. reuse across streams: pending free (a host function holds stream 0), event, sync
    for flags in [(1, 1, 1), (0, 0, 0), (0, 1, 0), (0, 0, 1), (1, 0, 0)]:
        tag = "%d%d%d" % flags
        pool(f"xs_pending_{tag}", MAX, flags)
        a(0, 64 * M, 0), out.append("h 0 200"), f(0), a(1, 64 * M, 1), sync()
        pool(f"xs_event_{tag}", MAX, flags)
        a(0, 64 * M, 0), out.append("h 0 200"), f(0), out.append("e 0 0"), out.append("w 0 1")
        a(1, 64 * M, 1), sync()
        pool(f"xs_done_{tag}", MAX, flags)
        a(0, 64 * M, 0), f(0), sync(0), a(1, 64 * M, 1), sync()
        pool(f"ss_pending_{tag}", MAX, flags)
        a(0, 64 * M, 0), out.append("h 0 200"), f(0), a(1, 64 * M, 0), sync()
    # 12. threshold 0 without a sync: when the trim happens
    pool("nosync_0", "0")
    a(0, 64 * M), f(0), a(1, 64 * M), f(1), sync(), a(2, 64 * M), out.append("h 0 200"), f(2)
    sync()


def blocks16(thr):
    """b0..b15: 8 MiB each over chunks 0..3, and a 1 MiB guard (id 16) in chunk 4."""
    for i in range(16):
        a(i, 8 * M)
    a(16, 1 * M)


def free_all(ids):
    for i in ids:
        f(i), sync()


def emit2():
    # 13. a free range whose middle chunk is unmapped ("M.M"), a leading one (".M"), a
    # trailing one ("M."); trimmed (threshold 0) or recycled (max); then one request
    for req in (6 * M, 20 * M):
        tag = req // M
        pool(f"mum_trim_last_{tag}", "0")   # the last free merges and trims at once
        blocks16("0"), free_all([3, 8, 4, 5, 6, 7]), a(20, req)
        pool(f"mum_trim_first_{tag}", "0")  # trimmed first, merged after
        blocks16("0"), free_all([4, 5, 6, 7, 3, 8]), a(20, req)
        pool(f"lead_trim_{tag}", "0")
        blocks16("0"), free_all([0, 1, 2, 3, 4]), a(20, req)
        pool(f"trail_trim_{tag}", "0")
        blocks16("0"), free_all([10, 11, 12, 13, 14, 15]), a(20, req)
        pool(f"mum_recycle_{tag}")
        blocks16(MAX), free_all([3, 8, 4, 5, 6, 7]), a(19, 40 * M), a(20, req)
        pool(f"mum_trim_hole16_{tag}", "0")  # and a mapped 16 MiB hole elsewhere
        blocks16("0"), free_all([3, 8, 4, 5, 6, 7, 13, 14]), a(20, req)
    # 14. equal sizes: which of two equal free ranges a request takes
    for order in ((2, 0), (0, 2)):
        pool("tie_free_%d%d" % order)
        a(0, 8 * M), a(1, 1 * M), a(2, 8 * M), a(3, 1 * M)
        free_all(order), a(4, 8 * M), a(5, 8 * M)
    # 15. which fully free chunk an intermediate threshold gives back
    pool("trim_order", str(128 * M))
    for i in range(4):
        a(i, 32 * M)
    a(4, 1 * M), f(1), f(3), sync(), a(5, 32 * M), a(6, 32 * M)
    # 16. what a stream costs the device
    pool("streams")
    out.append("m")
    for _ in range(8):
        out.append("c"), out.append("m")


if len(sys.argv) > 1 and sys.argv[1] == "2":
    emit2()
else:
    emit()
sys.stdout.write("\n".join(out) + "\n")
