#!/usr/bin/env python3
"""recompare.py [ALLOCSIM] [--write SUMMARY3.json] - the six PyTorch sides that the
device calls measured but could not compare (README.md): validate.py as run (003d444)
made the `--device-streams pytorch` prediction (`NN_*.predpt.*`) only for an item with a
pytorch_capture side, so the PyTorch sides of the two multi-stream recordings without
private pools (streams2_default, streams2_expandable; three torch configs each) ended
with "compare: ... predpt.json: cannot open" in summary1/summary2 (fixed since, and
tests/check_validate.py fails without the fix). Their measurements came back
(runs-pytorch.tar.zst); the prediction is the simulator's, the same bytes from the same
build. This makes it again, for the item's capacities, the way validate.py does, and runs
`allocsim compare -f csv --segments` on it and the measured files. Prints one row per
item; --write puts the items with their rows in a summary validate_table.py merges after
the two parts (summary3.json.zst here). Exit 1 when an item cannot be redone."""
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "replay"))
import validate  # noqa: E402
import validate_table  # noqa: E402


def failed_sides(results):
    for p in results:
        for side, v in p.get("measured", {}).items():
            if "predpt.json: cannot open" in v.get("error", ""):
                yield p, side


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    write = sys.argv[sys.argv.index("--write") + 1] if "--write" in sys.argv else None
    if write:
        args.remove(write)
    allocsim = args[0] if args else os.path.join(ROOT, "build", "allocsim")
    res = validate_table.load(os.path.join(HERE, "summary1.json.zst")) + \
        validate_table.load(os.path.join(HERE, "summary2.json.zst"))
    res.sort(key=lambda p: p["index"])
    data = subprocess.run(["zstd", "-dc", os.path.join(HERE, "runs-pytorch.tar.zst")],
                          capture_output=True, check=True).stdout
    tar = tarfile.open(fileobj=io.BytesIO(data))
    out = []
    print("| trace | policy | side | runs | OOM exact | peak exact | events identical |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for p, side in failed_sides(res):
            tag = "%02d_%s_%s" % (p["index"], p["trace"],
                                  p["spec"].replace(":", "-").replace(",", "-"))
            base = os.path.join(d, tag)
            caps = sum((["-c", str(c)] for c in p["caps"]), [])
            r = subprocess.run([allocsim, "-q", "-f", "json", "-p", p["spec"], *caps,
                                "--device-streams", p["device_streams"][side], "-o",
                                base + ".predpt.json", "--segments", base + ".predpt.csv",
                                os.path.join(ROOT, validate.REAL[p["trace"]])],
                               capture_output=True, text=True)
            for ext in ("json", "csv"):
                with open(f"{base}.{side}.{ext}", "wb") as f:
                    f.write(tar.extractfile(f"v/{tag}.{side}.{ext}").read())
            c = subprocess.run([allocsim, "compare", "-f", "csv", "--segments",
                                base + ".predpt.csv", f"{base}.{side}.csv", base + ".predpt.json",
                                f"{base}.{side}.json"], capture_output=True, text=True)
            if r.returncode or c.returncode:
                print(f"recompare: {tag}: {(r.stderr + c.stderr).strip()}", file=sys.stderr)
                return 1
            rows = validate.read_csv_rows(c.stdout)
            o, pk, ev, _ = validate_table.count(rows)
            print(f"| {p['trace']} | {p['spec']} | {side} | {len(rows)} | {o} | {pk} | {ev} |")
            q = {k: v for k, v in p.items() if k != "measured"}
            q["measured"] = {side: {"rows": rows, "recompared": True}}
            out.append(q)
    if write:
        with open(write, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
