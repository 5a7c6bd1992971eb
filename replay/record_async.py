#!/usr/bin/env python3
"""Records, on a GPU, what replay/data/async-probe-h200/ holds: the stream-ordered pool
op by op (allocsim-asyncprobe over async_probe_patterns.py), every allocation's address
through the pool on the four traces the cudamallocasync model is fitted on (uncapped,
thresholds 0 and max: allocsim-replay --async --blocks), and held-out traces the model
never saw, uncapped and at six capacities each between their peak requested and the
pool's uncapped peak reserved (the check in async_model_table.py --heldout).

Runs in priority order and stops starting new steps after --budget seconds, so a device
call of fixed length returns what it finished (steps.log says what ran and how long).

usage: record_async.py --out DIR [--budget S] [--bin build]"""
import argparse, json, os, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "replay"))
from validate import GEN, REAL  # noqa: E402

MIB2 = 2 << 20
FIT = ["resnet_varbatch", "moe_like", "transformer", "kvcache"]
# held out: none of these was used to fit the model
HELD_GEN = {
    "transformer_l12": ["transformer", "seq_dist=uniform", "steps=6", "layers=12", "seed=2"],
    "cnn34": ["cnn", "depth=34", "steps=20", "seed=3"],
    "kvcache_paged": ["kvcache", "cache=paged", "requests=60", "layers=4", "output_mean=128",
                      "prompt_mean=256", "max_batch=16", "seed=3"],
    "random_2s": ["random", "allocs=20000", "min=512", "max=64M", "life_mean=400",
                  "streams=2", "seed=5"],
}
HELD_REAL = ["llama_accum_ckpt", "streams2_default", "graph_probe"]
FRACS = [0.2, 0.5, 0.8, 0.95]


def r2(x):
    return max(MIB2, int(x) // MIB2 * MIB2)


class Rec:
    def __init__(self, a):
        self.a, self.t0 = a, time.time()
        self.bin = os.path.join(ROOT, a.bin)
        self.log = open(os.path.join(a.out, "steps.log"), "w")

    def left(self):
        return self.a.budget - (time.time() - self.t0)

    def run(self, name, cmd, stdin=None, stdout=None):
        if self.left() < 5:
            self.log.write(f"SKIPPED {name}: out of time\n")
            return None
        t = time.time()
        r = subprocess.run(cmd, stdin=stdin, stdout=stdout or subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=max(5, self.left()))
        self.log.write(f"{name}: rc {r.returncode}, {time.time() - t:.1f} s: {' '.join(cmd)}\n")
        if r.stderr:
            with open(os.path.join(self.a.out, name + ".log"), "w") as f:
                f.write(r.stderr)
        self.log.flush()
        return r

    def replay(self, name, trace, thr, caps, blocks):
        base = os.path.join(self.a.out, name)
        cmd = [os.path.join(self.bin, "allocsim-replay"), "--async", "--release-threshold", thr,
               *sum((["-c", str(c)] for c in caps), []), "-f", "json", "-o", base + ".json",
               "--segments", base + ".seg.csv", "--pool", base + ".pool.csv"]
        if blocks:
            cmd += ["--blocks", base + ".blocks.csv"]
        r = self.run(name, cmd + [trace])
        if not r or r.returncode:
            return None
        with open(base + ".json") as f:
            return json.load(f)["runs"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=230)
    ap.add_argument("--bin", default="build")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rec = Rec(a)
    pat = os.path.join(a.out, "patterns.txt")
    with open(pat, "w") as f:
        subprocess.run([sys.executable, os.path.join(ROOT, "replay/async_probe_patterns.py")],
                       stdout=f, check=True)
    with open(pat) as fi, open(os.path.join(a.out, "probe.csv"), "w") as fo:
        rec.run("probe", [os.path.join(rec.bin, "allocsim-asyncprobe")], stdin=fi, stdout=fo)
    traces = {}
    for name, args in {**{k: GEN[k] for k in FIT if k in GEN}, **HELD_GEN}.items():
        traces[name] = os.path.join(a.out, name + ".zst")
        subprocess.run([os.path.join(rec.bin, "allocsim"), "gen", *args, "-o", traces[name]],
                       check=True)
    for name in FIT + HELD_REAL:
        if name in REAL:
            traces[name] = os.path.join(ROOT, REAL[name])
    for name in FIT:
        for thr in ("0", "max"):
            rec.replay(f"fit_{name}_thr{thr}", traces[name], thr, ["none"], True)
    held = list(HELD_GEN) + HELD_REAL
    unc = {}
    for name in held:
        for thr in ("0", "max"):
            runs = rec.replay(f"held_{name}_thr{thr}_none", traces[name], thr, ["none"], True)
            if runs:
                unc[(name, thr)] = runs[0]
    for name in held:
        for thr in ("0", "max"):
            u = unc.get((name, thr))
            if not u:
                continue
            req, peak = u["peak_requested"], u["peak_reserved"]
            caps = sorted({r2(req + (peak - req) * x) for x in FRACS} | {peak - MIB2, peak})
            rec.replay(f"held_{name}_thr{thr}_caps", traces[name], thr, caps, False)
    rec.log.write(f"done in {time.time() - rec.t0:.1f} s\n")


if __name__ == "__main__":
    main()
