#!/usr/bin/env python3
"""compare.py - the simulator against this folder's PyTorch reruns (record.sh): for each
item of ../summary.json.zst that it reran, one line per run with allocsim compare's
verdict, then the item's totals. Run from the repository root (build/allocsim)."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "replay"))
import validate  # noqa: E402
import validate_table  # noqa: E402

ITEMS = (13, 19, 49, 51, 57, 59)


def main():
    allocsim = os.environ.get("AS_ALLOCSIM", "build/allocsim")
    res = validate_table.load(os.path.join(HERE, "..", "summary.json.zst"))
    with tempfile.TemporaryDirectory() as td:
        for i in ITEMS:
            p = res[i]
            tag = "%02d_%s_%s" % (i, p["trace"], p["spec"].replace(":", "-").replace(",", "-"))
            trace = validate.REAL.get(p["trace"])
            if trace is None:
                trace = os.path.join(td, p["trace"] + ".zst")
                subprocess.run([allocsim, "gen", *validate.GEN[p["trace"]], "-o", trace],
                               check=True)
            caps = sum((["-c", str(c)] for c in p["caps"]), [])
            pj, pc, mc = (os.path.join(td, x) for x in ("p.json", "p.csv", "m.csv"))
            subprocess.run([allocsim, "-q", "-f", "json", "-p", p["spec"], *caps, "-o", pj,
                            "--segments", pc, trace], check=True)
            with open(mc, "wb") as f:
                f.write(subprocess.run(["zstd", "-dc", os.path.join(HERE, tag + ".csv.zst")],
                                       capture_output=True, check=True).stdout)
            out = subprocess.run([allocsim, "compare", "-f", "csv", "--segments", pc, mc, pj,
                                  os.path.join(HERE, tag + ".json")],
                                 capture_output=True, text=True, check=True).stdout
            rows = validate.read_csv_rows(out)
            o, pk, ev, _ = validate_table.count(rows)
            print(f"{p['trace']} {p['spec']}: {len(rows)} runs, OOM exact {o}, peak exact {pk}, "
                  f"events identical {ev}")
            for r in rows:
                if not r["segments"].startswith("same"):
                    print(f"  cap {r['capacity']}: {r['segments']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
