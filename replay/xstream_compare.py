#!/usr/bin/env python3
"""xstream_compare.py RUNS.tar.zst [ALLOCSIM] - the cross-stream pool recordings
(replay/data/h200-pool-xstream) three ways: the recording itself against the torch policy
(`allocsim check`), and PyTorch's own allocator replaying the importer's events
(torch_replay.py on the H200, the per-recording NAME.json and NAME.csv in RUNS.tar.zst,
made by that folder's replay_pytorch.sh) against the torch policy's prediction of the same
events (`allocsim run`, PyTorch's stream pool in the simulated device), compared by
`allocsim compare --segments`: OOM allocation, peak reserved, and the segment events
(action and size, in order), with the recording's own peak reserved (memory_stats()
at its dump, NAME.json) beside the replay's. The OOM recordings ran at their recorded fraction's capacity
(1,501,098,803 B), the `_exp` ones with expandable segments. Prints a markdown table.
Exit 0; 1 when the archive or a run cannot be read."""
import csv
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_compare import members  # noqa: E402  (the archive's files, as text)

DATA = "replay/data/h200-pool-xstream"


def one(allocsim, name, files, tmp):
    trace = os.path.join(ROOT, DATA, name + ".pickle.zst")
    chk = subprocess.run([allocsim, "check", trace], capture_output=True, text=True)
    if chk.returncode not in (0, 3):  # 3: it differs
        raise OSError(f"check {name}: {chk.stderr.strip()}")
    check = chk.stdout.split(": ", 1)[1].split(" ", 1)[0].rstrip(":") if ": " in chk.stdout \
        else "?"
    with open(os.path.join(ROOT, DATA, name + ".json")) as f:
        recorded = json.load(f)["stats_end"]["reserved_bytes.all.peak"]
    meas = json.loads(files[name + ".json"])
    run = meas["runs"][0]
    cap = run.get("capacity")
    spec = "torch,expandable=true" if "expandable" in (run.get("conf") or "") else "torch"
    base = os.path.join(tmp, name)
    for ext in (".json", ".csv"):
        with open(base + ext, "w") as f:
            f.write(files[name + ext])
    cmd = [allocsim, "-q", "-f", "json", "-p", spec, "--device-streams", "pytorch",
           "-o", base + ".pred.json", "--segments", base + ".pred.csv", trace]
    if cap is not None:
        cmd[4:4] = ["-c", str(cap)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise OSError(f"predict {name}: {p.stderr.strip()}")
    c = subprocess.run([allocsim, "compare", "-f", "csv", "--segments", base + ".pred.csv",
                        base + ".csv", base + ".pred.json", base + ".json"],
                       capture_output=True, text=True)
    if c.returncode:
        raise OSError(f"compare {name}: {c.stderr.strip()}")
    row = next(csv.DictReader(io.StringIO(c.stdout)))
    return (name, check, str(recorded), "yes" if row["oom_match"] == "1" else "no",
            row["meas_peak_reserved"],
            "yes" if row["peak_match"] == "1" else "no", row["segments"])


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    allocsim = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build", "allocsim")
    try:
        files = members(sys.argv[1])
        names = sorted(n[:-5] for n in files if n.endswith(".json"))
        with tempfile.TemporaryDirectory() as tmp:
            rows = [one(allocsim, n, files, tmp) for n in names]
    except (OSError, KeyError, ValueError, subprocess.CalledProcessError, tarfile.TarError) as ex:
        print(f"xstream_compare: {ex}", file=sys.stderr)
        return 1
    print("| recording | allocsim check | recorded peak reserved | PyTorch replay: same OOM | "
          "its peak reserved | same peak | segment events |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    same = sum(1 for r in rows if r[3] == r[5] == "yes" and r[6].startswith("same"))
    print(f"\n{sum(1 for r in rows if r[1] == 'reproduced')} of {len(rows)} recordings "
          f"reproduced by allocsim check; {same} of {len(rows)} PyTorch replays equal to "
          "the torch policy's prediction")
    return 0


if __name__ == "__main__":
    sys.exit(main())
