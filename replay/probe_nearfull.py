#!/usr/bin/env python3
"""probe_nearfull.py - what a ballast-enforced capacity really leaves usable.

  probe_nearfull.py --out FILE.jsonl [--caps MiB,MiB] [--jobs J]

Each experiment is one fresh process. A ballast (cudaMalloc'd, never freed during the
experiment) leaves the GPU so that the largest single cudaMalloc that succeeds is the
capacity C, as allocsim-replay's device does (cuda_device.c ballast_fill). Then:
  fill-S     cudaMalloc(S) until refused; then free them one at a time (every other one
             first, then the rest) and after each free ask again
  issue      C = 1368 MiB, 66 segments of 20 MiB (1320 MiB), then 56 MiB asked, one
             20 MiB segment freed (never two neighbours), asked again, ... (issue 17)
  mixed-K    random sizes to the full card, then random frees and large requests
After each step it records cudaMemGetInfo's free, the largest single cudaMalloc that
succeeds now (binary search in 2 MiB, each probe freed at once) and, at the fill's end,
how many 2 MiB cudaMallocs still succeed. One JSON object per line:
  {"exp", "cap", "step", "op", "size", "ok", "addr", "live", "free", "largest", ...}
live is the bytes the experiment holds (not the ballast)."""
import argparse
import concurrent.futures as cf
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rawcuda  # noqa: E402

MIB = 1 << 20
G2 = 2 * MIB


class Dev:
    def __init__(self, cap):
        self.cu = rawcuda.open_cuda()
        self.cap = cap
        self.ballast = []
        self.live = {}  # addr -> size
        self.rows = []
        self.exp = ""
        self.fill_ballast()

    def probe(self, n):
        a = self.cu.malloc(n)
        if a is None:
            return False
        self.cu.free(a)
        return True

    def fill_ballast(self):
        fr, _ = self.cu.meminfo()
        want = fr - self.cap - 3 * MIB
        while want >= G2:
            n = min(want, 4 << 30) // G2 * G2
            a = self.cu.malloc(n)
            if a is None:
                want = n // 2 // G2 * G2
                continue
            self.ballast.append((a, n))
            want -= n
        for _ in range(64):
            if self.probe(self.cap + G2):
                a = self.cu.malloc(G2)
                self.ballast.append((a, G2))
                continue
            if self.probe(self.cap) or not self.ballast:
                break
            a, n = self.ballast.pop()
            self.cu.free(a)
            if n > G2:
                b = self.cu.malloc(n - G2)
                if b is not None:
                    self.ballast.append((b, n - G2))
        self.probed = self.probe(self.cap) and not self.probe(self.cap + G2)

    def largest(self):
        lo, hi = 0, self.cap // G2 + 1  # lo fits (0 = nothing), hi does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.probe(mid * G2):
                lo = mid
            else:
                hi = mid
        return lo * G2

    def count2(self):
        got = []
        while True:
            a = self.cu.malloc(G2)
            if a is None:
                break
            got.append(a)
        for a in got:
            self.cu.free(a)
        return len(got)

    def log(self, op, size, ok, addr=0, **kw):
        fr, _ = self.cu.meminfo()
        r = {"exp": self.exp, "cap": self.cap, "step": len(self.rows), "op": op, "size": size,
             "ok": ok, "addr": addr, "live": sum(self.live.values()), "nlive": len(self.live),
             "free": fr, "largest": self.largest()}
        r.update(kw)
        self.rows.append(r)

    def malloc(self, n, keep=True):
        a = self.cu.malloc(n)
        if a is not None and keep:
            self.live[a] = n
        elif a is not None:
            self.cu.free(a)
        self.log("malloc" if keep else "ask", n, a is not None, a or 0)
        return a

    def free(self, a):
        n = self.live.pop(a)
        self.cu.free(a)
        self.log("free", n, True, a)


def exp_fill(d, s):
    d.log("start", 0, d.probed, ballast=sum(n for _, n in d.ballast))
    order = []
    while True:
        a = d.cu.malloc(s)
        if a is None:
            break
        d.live[a] = s
        order.append(a)
    d.log("filled", s, True, count=len(order), count2=d.count2())
    evens = order[0::2] + order[1::2]
    for a in evens[: min(len(evens), 24)]:
        d.free(a)


def exp_issue(d):
    d.log("start", 0, d.probed)
    segs = [d.malloc(20 * MIB) for _ in range(66)]
    segs = [a for a in segs if a]
    d.malloc(56 * MIB, keep=False)
    for i in (10, 30, 50, 20, 40, 60, 5, 15, 25):
        if i < len(segs):
            d.free(segs[i])
            if d.malloc(56 * MIB, keep=False):
                pass
    d.log("end", 0, True, count2=d.count2())


def exp_mixed(d, seed):
    rng = random.Random(seed)
    d.log("start", 0, d.probed)
    sizes = [2, 2, 2, 12, 20, 26, 56, 64, 100, 132, 200]
    while True:
        s = rng.choice(sizes) * MIB
        if not d.malloc(s):
            if s == G2:
                break
            if d.malloc(G2) is None:
                break
    for _ in range(40):
        if d.live and rng.random() < 0.5:
            d.free(rng.choice(list(d.live)))
        else:
            d.malloc(rng.choice(sizes[3:]) * MIB)


def worker(name, cap):
    d = Dev(cap)
    d.exp = name
    if name.startswith("fill-"):
        exp_fill(d, int(name[5:]) * MIB)
    elif name == "issue":
        exp_issue(d)
    elif name.startswith("mixed-"):
        exp_mixed(d, int(name[6:]))
    for a in list(d.live):
        d.cu.free(a)
    for a, _ in d.ballast:
        d.cu.free(a)
    return d.rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--caps", default="1368,8192")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--cap", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        for r in worker(a.worker, a.cap):
            print(json.dumps(r))
        return 0
    plan = [("issue", 1368 * MIB)]
    for c in (int(x) * MIB for x in a.caps.split(",")):
        plan += [("fill-%d" % s, c) for s in (2, 20, 56, 64, 100, 256)]
        plan += [("mixed-%d" % k, c) for k in range(3)]

    def one(p):
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--out", "-",
                            "--worker", p[0], "--cap", str(p[1])], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError("%s at %d: %s" % (p[0], p[1], r.stderr.strip()))
        return r.stdout

    # one at a time: the experiments share the GPU's physical memory
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        outs = list(ex.map(one, plan))
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps({"versions": rawcuda.open_cuda().versions()}) + "\n")
        for o in outs:
            f.write(o)
    os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
