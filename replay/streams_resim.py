#!/usr/bin/env python3
"""streams_resim.py SUMMARY [--totals] [--allocsim BIN] - validate_table.py's tables with
the PyTorch side of the multi-stream traces compared again against today's simulator, told
of PyTorch's stream pool (`--device-streams pytorch`, replay/PLACEMENT.md section 10).

validate.py compared every PyTorch run with a prediction that made no stream. For each
(trace, config) of a trace with more than one stream, this predicts it again with the
pool and:
- where the PyTorch runs' segment events were kept (mismatch/TAG.pytorch.csv.zst and
  .json beside SUMMARY: the items that differed), compares them with `allocsim compare`,
  as validate.py does;
- where they were not (the items whose events were identical), requires the new
  prediction's events to be the old one's (the pool moves no segment of theirs) and keeps
  the measured rows; otherwise the item is reported as not comparable.
Every other row is the summary's as measured. Prints the tables as validate_table.py does."""
import argparse
import csv
import io
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import validate_table  # noqa: E402
from validate import REAL, TORCH_CONFS, spec_of  # noqa: E402


def sh(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def streams_of(bin_, path):
    for line in sh([bin_, "info", path]).splitlines():
        if line.startswith("streams:"):
            return int(line.split(":", 1)[1].split()[0])
    return 1


def predict(bin_, p, path, streams, tmp):
    base = os.path.join(tmp, "pred-" + streams)
    caps = sum((["-c", str(c)] for c in p["caps"]), [])
    sh([bin_, "-q", "-f", "json", "-p", p["spec"], *caps, "--device-streams", streams,
        "-o", base + ".json", "--segments", base + ".csv", path])
    return base


def events(csv_path):
    """The (run, alloc, event, action, size) rows of a --segments file: no addresses."""
    with open(csv_path) as f:
        return [",".join(x[:4] + x[5:]) for x in (ln.rstrip("\n").split(",") for ln in f)]


def resim(summary_path, bin_):
    results = validate_table.load(summary_path)
    kept = os.path.join(os.path.dirname(summary_path), "mismatch")
    specs = {spec_of(c) for c in TORCH_CONFS}
    with tempfile.TemporaryDirectory() as tmp:
        for i, p in enumerate(results):
            path = os.path.join(ROOT, REAL.get(p["trace"], ""))
            if (p["spec"] not in specs or "pytorch" not in p.get("measured", {})
                    or p["trace"] not in REAL or streams_of(bin_, path) < 2):
                continue
            tag = f"{i:02d}_{p['trace']}_{p['spec'].replace(':', '-').replace(',', '-')}"
            new = predict(bin_, p, path, "pytorch", tmp)
            gpu = os.path.join(kept, tag + ".pytorch")
            if os.path.exists(gpu + ".csv.zst"):
                meas = os.path.join(tmp, "gpu.csv")
                with open(meas, "w") as f:
                    f.write(sh(["zstd", "-dc", gpu + ".csv.zst"]))
                out = sh([bin_, "compare", "-f", "csv", "--segments", new + ".csv", meas,
                          new + ".json", gpu + ".json"])
                p["measured"]["pytorch"] = {"rows": list(csv.DictReader(io.StringIO(out)))}
            elif events(predict(bin_, p, path, "none", tmp) + ".csv") != events(new + ".csv"):
                p["measured"]["pytorch"] = {"error": "events not kept, and the pool moves them"}
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("summary")
    ap.add_argument("--totals", action="store_true")
    ap.add_argument("--allocsim", default=os.environ.get("AS_ALLOCSIM",
                                                         os.path.join(ROOT, "build/allocsim")))
    a = ap.parse_args()
    results = resim(a.summary, a.allocsim)
    print("\n".join(validate_table.totals(results, head=True) if a.totals
                    else validate_table.table(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
