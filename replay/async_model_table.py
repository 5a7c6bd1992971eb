#!/usr/bin/env python3
"""The cudamallocasync model against the H200's stream-ordered pool, run by run.

Reads replay/data/validate-h200/async/async_runs.csv.zst (198 runs of allocsim-replay
--async: 4 traces x release threshold 0 and max x capacities near the pool's frontier),
replays each trace through `allocsim -p cudamallocasync,release_threshold=T` at every
measured capacity, and prints per trace and threshold how many runs the model gets exactly
right (completed or not, and the OOM allocation) and its peak reserved error. The model's
two constants (32 MiB growth, 512 B carving) were read from all of these runs, so no run
is held out from them.

usage: async_model_table.py [ALLOCSIM]   (default build/allocsim)
"""
import csv, io, os, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "replay/data/validate-h200/async/async_runs.csv.zst")
sys.path.insert(0, os.path.join(ROOT, "replay"))
from validate import GEN, REAL  # the traces the measurement replayed  # noqa: E402

MAX = 18446744073709551615


def read_runs():
    text = subprocess.run(["zstd", "-dc", DATA], check=True, capture_output=True,
                          text=True).stdout
    return list(csv.DictReader(io.StringIO(text)))


def trace_path(bin_, name, tmp):
    if name in REAL:
        return os.path.join(ROOT, REAL[name])
    out = os.path.join(tmp, name + ".zst")
    subprocess.run([bin_, "gen"] + GEN[name] + ["-o", out], check=True)
    return out


def model(bin_, path, thr, caps):
    """{capacity: (completed, oom_alloc, peak_reserved)} from one allocsim run."""
    spec = "cudamallocasync,release_threshold=" + (str(2**63 - 1) if thr == "max" else thr)
    args = [bin_, "-p", spec, "-f", "csv", path]
    for c in caps:
        args += ["-c", "none" if c == MAX else str(c)]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    res = {}
    for c, r in zip(caps, csv.DictReader(io.StringIO(out))):
        done = r["completed"] == "1"
        res[c] = (done, -1 if done else int(r["oom_alloc"]), int(r["peak_reserved"]))
    return res


def main():
    bin_ = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/allocsim")
    runs = read_runs()
    groups = {}
    for r in runs:
        groups.setdefault((r["trace"], r["threshold"]), []).append(r)
    print("trace            thr  runs  outcome exact  oom alloc exact  "
          "uncapped peak: GPU      model    err  max |peak err|")
    tot = [0, 0, 0]
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for (name, thr), rs in groups.items():
            if name not in paths:
                paths[name] = trace_path(bin_, name, tmp)
            caps = sorted({int(r["capacity"]) for r in rs})
            m = model(bin_, paths[name], thr, caps)
            n = outc = oom = 0
            allerr, unc = [], None
            for r in rs:
                done, alloc, peak = m[int(r["capacity"])]
                gdone = r["completed"] == "1"
                n += 1
                outc += done == gdone
                oom += done == gdone and alloc == int(r["oom_alloc"])
                e = (peak - int(r["peak_reserved"])) / int(r["peak_reserved"])
                allerr.append(abs(e))
                if r["set"] == "none":
                    unc = (int(r["peak_reserved"]), peak, e)
            tot[0] += n
            tot[1] += outc
            tot[2] += oom
            print("%-16s %-4s %4d  %13d  %15d  %14d %14d %+6.1f%%  %13.1f%%" %
                  (name, thr, n, outc, oom, unc[0], unc[1], 100 * unc[2],
                   100 * max(allerr)))
    print("all: %d runs, outcome exact %d, oom alloc exact %d" % tuple(tot))


if __name__ == "__main__":
    main()
