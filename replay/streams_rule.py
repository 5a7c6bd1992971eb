#!/usr/bin/env python3
"""streams_rule.py - the stream rule of replay/PLACEMENT.md section 10, scored on what
probe_streams.py recorded on the H200 (replay/data/streams-h200-2026-12-01).

  streams_rule.py [DIR] [--memory | --placement]

The rule: a process that has made n CUDA streams holds floor((n + 2) / 4) 2 MiB pages for
them in cudaMalloc's heap, each placed when the stream that needs it is made, as a
cudaMalloc(2 MiB) then would be (PLACEMENT.md sections 3 and 6: the most recent chunk with
room, ...), and floor((n + 7) / 43) more pages outside that heap; both count against the
device memory, neither is given back when the streams are destroyed. Events take none.

--memory: per kind, the pages the free memory and the largest cudaMalloc lost after n
streams, against the rule, and at how many of the recorded n both equal it.
--placement: every recorded process's cudaMalloc addresses, free-running, under three
rules (no pages; the heap pages; every page in the heap), with one offset per process
(the heap's top T, which moves from process to process) taken as the most common
difference; the earlier probe's sequence (A) is where the rule was read, B to E check it.
"""
import collections
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from placement_model import Heap, MB  # noqa: E402

DATA = os.path.join(HERE, "data", "streams-h200-2026-12-01")
PAGE = 2 * MB
SHOW_N = [1, 2, 3, 5, 6, 10, 35, 36, 64, 65, 78, 79, 121, 122, 128]


def heap_pages(n):
    return (n + 2) // 4


def other_pages(n):
    return (n + 7) // 43


def jsonl(path):
    out = subprocess.run(["zstd", "-dc", path], check=True, capture_output=True, text=True)
    return [json.loads(x) for x in out.stdout.splitlines() if x.strip()]


def memory(d):
    rows = jsonl(os.path.join(d, "cap.jsonl.zst"))
    print("pages lost after n streams (free memory / largest cudaMalloc; rule = heap + other)")
    print("%-6s" % "kind" + "".join("%8d" % n for n in SHOW_N) + "   steps equal to the rule")
    print("%-6s" % "rule" + "".join("%8d" % (heap_pages(n) + other_pages(n)) for n in SHOW_N))
    for r in rows:
        if "error" in r:
            print("%-6s error" % r.get("worker", ["?"] * 3)[2])
            continue
        base = r["rows"][0]
        lost = {x["n"]: ((base["free"] - x["free"]) // PAGE, (base["largest"] - x["largest"]) // PAGE)
                for x in r["rows"]}
        if r["kind"] == "torch":
            f, g = lost[-1]
            print("torch  torch.cuda.Stream(): %d / %d pages; the rule at n = 128 (32 streams x 4 "
                  "priorities): %d" % (f, g, heap_pages(128) + other_pages(128)))
            continue
        ev = r["kind"] == "event"
        want = {n: 0 if ev else heap_pages(n) + other_pages(n) for n in lost}
        ok = sum(lost[n] == (want[n], want[n]) for n in lost)
        cells = "".join("%8s" % ("%d/%d" % lost[n] if n in lost else "") for n in SHOW_N)
        print("%-6s%s   %d of %d%s" % (r["kind"], cells, ok, len(lost),
                                      " (events: the rule is 0)" if ev else ""))
    print("capacity %d MiB; priority range %s" % (rows[0]["cap"] // MB, rows[0]["prio_range"]))


def nstreams(v):
    kind, _, n = v.partition(":")
    if kind == "torchstream":
        return 128  # PyTorch's pool: 32 x min(6 priority levels, 4)
    if kind == "pool":
        return 32 * int(n)
    return int(n) if kind in ("plain", "nb", "prio", "destroy") else 0


def free_running(r, rule):
    """(exact, addresses) of one process under rule 'none', 'heap' or 'all'."""
    top = 1 << 46
    h = Heap("cuda", top)
    n = nstreams(r["variant"])
    pages = {"none": 0, "heap": heap_pages(n), "all": heap_pages(n) + other_pages(n)}[rule]
    mine, pred, obs = [], [], []
    for o in r["ops"]:
        if o["op"] == "S":
            for _ in range(pages):
                h.place(h.predict(PAGE), PAGE)
        elif o["op"] == "free":
            h.free(mine[o["k"]])
        else:
            a = h.predict(o["size"])
            h.place(a, o["size"])
            mine.append(a)
            pred.append(a)
            obs.append(o["addr"])
    off = collections.Counter(b - a for a, b in zip(pred, obs)).most_common(1)[0][0]
    return sum(b - a == off for a, b in zip(pred, obs)), len(obs)


def placement(d):
    rows = [r for r in jsonl(os.path.join(d, "addr.jsonl.zst")) if "error" not in r]
    groups = [("raw runtime, sequence A (read)", lambda r: not r["variant"].startswith("torch")
               and r["seq"] == "A"),
              ("raw runtime, sequences B-E", lambda r: not r["variant"].startswith("torch")
               and r["seq"] != "A"),
              ("  of them streams made mid-run (D, E)", lambda r: not r["variant"].startswith(
                  "torch") and r["seq"] in "DE"),
              ("torch processes", lambda r: r["variant"].startswith("torch"))]
    print("| processes | n | no pages | heap pages (the rule) | every page in the heap |")
    print("|---|---:|---|---|---|")
    for name, sel in groups:
        g = [r for r in rows if sel(r)]
        cells = []
        for rule in ("none", "heap", "all"):
            res = [free_running(r, rule) for r in g]
            cells.append("%d procs, %d/%d addr" % (sum(a == b for a, b in res),
                                                   sum(a for a, _ in res), sum(b for _, b in res)))
        print("| %s | %d | %s |" % (name, len(g), " | ".join(cells)))
    for r in rows:
        a, b = free_running(r, "heap")
        if a < b:
            print("rule misses %s %s: %d of %d" % (r["variant"], r["seq"], a, b))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    d = args[0] if args else DATA
    want = {a for a in sys.argv[1:] if a.startswith("--")} or {"--memory", "--placement"}
    if "--memory" in want:
        memory(d)
    if "--placement" in want:
        placement(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
