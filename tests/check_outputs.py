#!/usr/bin/env python3
"""check_outputs.py ALLOCSIM - do allocsim's reports load cleanly, and say what
sim/REPORT.md says they say?

Runs ALLOCSIM (run -f json, run -f csv with --timeline, --segments and --segment-map,
mincap -f json --csv, info -f json, compare -f csv) on a small text trace and on the real
H200 ResNet snapshot in tests/data/, then checks, for every file:
  - its fields (JSON keys, CSV header) are exactly the ones REPORT.md lists, in order;
  - every value has the documented type: an `int` column holds only non-negative
    integers, an `int?` column integers or -1 (null in JSON), never a blank; a `real`
    always has a decimal point; a `bool` is 0/1 (true/false in JSON);
  - with pandas installed, pandas reads each CSV column with the dtype the type implies
    (int64 for int, int? and bool; float64 for real; object for string), so a blank can
    never turn an integer column into floats; without pandas, the csv module and the
    checks above stand for it;
  - the CSV report and the JSON report of the same runs agree field by field, the run
    indexes of the timeline, segments and segment-map files are those of the report,
    and timeline times count from the trace's start.
Prints one line per failure and a summary; exit status 1 on any failure.
"""
import csv
import io
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SNAPSHOT = os.path.join(ROOT, "tests", "data", "torch-2.11-h200", "resnet_varbatch.pickle.zst")
TEXT_TRACE = """allocsim-text 1
meta source=check_outputs
alloc 0 1048576 t=1000
alloc 1 3145728 s=7 t=1040
free_req 0 t=1100
mark step
free 0 t=1150
alloc 2 5242880
free 1 t=1250
free 2 t=1300
"""

failures = []
checks = 0


def fail(where, msg):
    failures.append(f"{where}: {msg}")


def check(cond, where, msg):
    global checks
    checks += 1
    if not cond:
        fail(where, msg)
    return cond


def documented():
    """{kind: [(field, type)]} from the <!-- fields: KIND --> tables of sim/REPORT.md."""
    text = open(os.path.join(ROOT, "sim", "REPORT.md"), encoding="utf-8").read()
    out = {}
    for m in re.finditer(r"<!-- fields: ([\w-]+) -->\n(.*?)<!-- /fields -->", text, re.S):
        rows = []
        for line in m.group(2).splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 2 and cells[0].startswith("`"):
                rows.append((cells[0].strip("`"), cells[1]))
        out[m.group(1)] = rows
    return out


def run(allocsim, *args):
    r = subprocess.run([allocsim, *args], capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        fail(" ".join(args), f"exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


# ---- JSON ----------------------------------------------------------------------------

def json_type_ok(v, t):
    if t == "int":
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0
    if t == "int?":
        return v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0)
    if t == "real":
        return isinstance(v, float)
    if t == "real?":
        return v is None or isinstance(v, float)
    if t == "bool":
        return isinstance(v, bool)
    if t == "bool?":
        return v is None or isinstance(v, bool)
    if t == "string":
        return isinstance(v, str)
    if t == "string?":
        return v is None or isinstance(v, str)
    if t == "object":
        return isinstance(v, dict)
    if t == "object?":
        return v is None or isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "array?":
        return v is None or isinstance(v, list)
    return False


def check_object(where, obj, fields):
    names = [f for f, _ in fields]
    check(list(obj) == names, where, f"keys {list(obj)} != documented {names}")
    for f, t in fields:
        if f in obj:
            check(json_type_ok(obj[f], t), where, f"{f} = {obj[f]!r} is not {t}")


def check_head(where, doc):
    check(doc.get("schema") == 3, where, f"schema {doc.get('schema')!r}, expected 3")
    check(isinstance(doc.get("allocsim"), str), where, "no allocsim version")
    check(isinstance(doc.get("traces"), list) and doc["traces"], where, "no traces array")


# ---- CSV -----------------------------------------------------------------------------

INT = re.compile(r"^(0|[1-9][0-9]*)$")
REAL = re.compile(r"^-?[0-9]+\.[0-9]+$")


def csv_cell_ok(v, t):
    if t == "int":
        return bool(INT.match(v))
    if t == "int?":
        return bool(INT.match(v)) or v == "-1"
    if t == "bool":
        return v in ("0", "1")
    if t in ("real", "real?"):
        return bool(REAL.match(v)) or v == "nan"
    return t in ("string", "string?")


def check_csv(where, text, fields):
    rows = list(csv.reader(io.StringIO(text)))
    names = [f for f, _ in fields]
    if not check(bool(rows), where, "empty"):
        return []
    check(rows[0] == names, where, f"header {rows[0]} != documented {names}")
    check(len(rows) > 1, where, "no data rows")
    for i, row in enumerate(rows[1:], 2):
        if not check(len(row) == len(names), where, f"line {i}: {len(row)} fields"):
            continue
        for (f, t), v in zip(fields, row):
            check(csv_cell_ok(v, t), where, f"line {i}: {f} = {v!r} is not {t}")
    try:
        import pandas  # optional: the check the issue asks for, where pandas exists
    except ImportError:
        pandas = None
    if pandas is not None:
        df = pandas.read_csv(io.StringIO(text), keep_default_na=False, na_values=["nan"])
        want = {"int": "int64", "int?": "int64", "bool": "int64", "real": "float64",
                "real?": "float64",
                "string": "object", "string?": "object"}
        for f, t in fields:
            if f in df and t in want:
                got = str(df[f].dtype)
                # a string column whose values all look like numbers is read as numbers
                if t.startswith("string") and got != "object":
                    continue
                check(got == want[t], where, f"pandas reads {f} as {got}, documented {t}")
    return [dict(zip(rows[0], r)) for r in rows[1:]]


def same_value(j, c, t):
    if t in ("int?",) and j is None:
        return c == "-1"
    if t == "bool":
        return c == ("1" if j else "0")
    if t == "real?" and j is None:
        return c == "nan"
    if t in ("real", "real?"):
        return abs(float(c) - j) <= 1e-6 * max(1.0, abs(j))
    return str(j) == c


def check_checks(allocsim, doc):
    """check -f json on a reproduced snapshot, one that differs and one it cannot check."""
    with tempfile.TemporaryDirectory(prefix="allocsim-differs-") as tmp:
        differs = os.path.join(tmp, "differs.pickle")
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "differs_snapshot.py"),
                        differs], check=True)
        snaps = [SNAPSHOT, differs,
                 os.path.join(ROOT, "tests", "data", "torch-2.11-h200-midrun",
                              "midrun_state.pickle.zst")]
        r = subprocess.run([allocsim, "check", "-f", "json", *snaps], capture_output=True,
                           text=True, cwd=ROOT)
    check(r.returncode == 1, "check -f json", f"exit {r.returncode}, expected 1 (bad input)")
    cj = json.loads(r.stdout)
    check_head("check -f json", cj)
    check(cj.get("command") == "check", "check -f json", "no command")
    check([c["status"] for c in cj["checks"]] == ["reproduced", "differs", "error"],
          "check -f json", f"statuses {[c['status'] for c in cj['checks']]}")
    for i, c in enumerate(cj["checks"]):
        check_object(f"check -f json: checks[{i}]", c, doc["check"])
        if c["difference"] is not None:
            check_object(f"check -f json: checks[{i}].difference", c["difference"],
                         doc["check-difference"])
        if c["start"] is not None:
            check_object(f"check -f json: checks[{i}].start", c["start"], doc["check-start"])


def main():
    try:
        return checked()
    except (KeyError, IndexError, TypeError, ValueError) as ex:  # a report of another shape
        for f in failures:
            print("check_outputs: " + f)
        print(f"check_outputs: the reports are not of the documented shape: {ex!r}")
        return 1


def checked():
    if len(sys.argv) != 2:
        print(__doc__.split("\n")[0], file=sys.stderr)
        return 2
    allocsim = os.path.abspath(sys.argv[1])
    doc = documented()
    for kind in ("trace", "run", "timeline", "segments", "segmap", "sites", "by-mark", "mincap",
                 "mincap-csv", "info", "compare", "tune", "tune-setting", "check",
                 "check-difference", "check-start"):
        check(kind in doc, "REPORT.md", f"no <!-- fields: {kind} --> table")
    with tempfile.TemporaryDirectory(prefix="allocsim-check-") as tmp:
        txt = os.path.join(tmp, "t.txt")
        with open(txt, "w") as f:
            f.write(TEXT_TRACE)
        traces = [txt] + ([SNAPSHOT] if os.path.exists(SNAPSHOT) else [])
        check(len(traces) == 2, "tests/data", "resnet_varbatch.pickle.zst missing")
        # nocache at 5 MiB runs out at allocation 1; the typed PyTorch spec is normalised.
        common = ["-q", "-p", "nocache", "-p", "max_split_size_mb:128", "-c", "none",
                  "-c", "5MiB", "-c", "9G"]
        tl, sg, sm, st = (os.path.join(tmp, n) for n in ("tl.csv", "seg.csv", "map.csv",
                                                          "sites.csv"))
        sj = os.path.join(tmp, "sites-j.csv")
        js = run(allocsim, *common, "-f", "json", "--by-mark", "--sites", sj, *traces)
        cs = run(allocsim, *common, "-f", "csv", "--timeline", tl, "--segments", sg,
                 "--segment-map", sm, "--sites", st, *traces)
        rep = json.loads(js)
        check(list(rep) == ["allocsim", "schema", "traces", "runs", "by_mark", "sites"],
              "run -f json --by-mark --sites", f"members {list(rep)}")
        check(rep["by_mark"]["match"] == "", "run -f json --by-mark", "match is not \"\"")
        for i, x in enumerate(rep["by_mark"]["rows"]):
            check_object(f"run -f json: by_mark.rows[{i}]", x, doc["by-mark"])
        check({x["run"] for x in rep["by_mark"]["rows"]} == set(range(len(rep["runs"]))),
              "run -f json --by-mark", "not every run has its rows")
        for i, x in enumerate(rep["sites"]):
            check_object(f"run -f json: sites[{i}]", x, doc["sites"])
        with open(sj) as f:
            srows = check_csv("--sites (with -f json)", f.read(), doc["sites"])
        check(len(srows) == len(rep["sites"]) and len(srows) > 0, "run -f json --sites",
              f"{len(rep['sites'])} JSON rows, {len(srows)} in the CSV file")
        for i, (row, x) in enumerate(zip(srows, rep["sites"])):
            for f, t in doc["sites"]:
                check(same_value(x[f], row[f], t), "run -f json --sites",
                      f"row {i}: {f} = {row[f]!r} in CSV, {x[f]!r} in JSON")
        check_head("run -f json", rep)
        for i, t in enumerate(rep["traces"]):
            check_object(f"run -f json: traces[{i}]", t, doc["trace"])
            check(t["trace"] == i, "run -f json", f"traces[{i}].trace = {t['trace']}")
        for i, r in enumerate(rep["runs"]):
            check_object(f"run -f json: runs[{i}]", r, doc["run"])
            check(r.get("run") == i, "run -f json", f"runs[{i}].run = {r.get('run')}")
            check(rep["traces"][r["trace"]]["file"] == r["file"], "run -f json",
                  f"runs[{i}]: file is not its trace's")
            check(r["oom"] == (r["oom_alloc"] is not None), "run -f json",
                  f"runs[{i}]: oom disagrees with oom_alloc")
        specs = {(r["spec"], r["policy"]) for r in rep["runs"]}
        check(("max_split_size_mb:128", "torch,maxsplit=128") in specs, "run -f json",
              f"spec as typed and normalised: {specs}")
        check(any(r["oom"] for r in rep["runs"]), "run -f json", "no OOM among the runs")
        rows = check_csv("run -f csv", cs, doc["run"])
        check(len(rows) == len(rep["runs"]), "run -f csv", "not one row per JSON run")
        for i, (row, r) in enumerate(zip(rows, rep["runs"])):
            for f, t in doc["run"]:
                if f in ("wall_s", "cpu_s", "events_per_second") or f not in row or f not in r:
                    continue
                check(same_value(r[f], row[f], t), "run -f csv",
                      f"run {i}: {f} = {row[f]!r} in CSV, {r[f]!r} in JSON")
        nruns = len(rep["runs"])
        for name, path, kind in (("--timeline", tl, "timeline"), ("--segments", sg, "segments"),
                                 ("--segment-map", sm, "segmap"), ("--sites", st, "sites")):
            with open(path) as f:
                got = check_csv(name, f.read(), doc[kind])
            runs = {int(x["run"]) for x in got}
            check(runs <= set(range(nruns)), name, f"run indexes {sorted(runs)} not the report's")
            if kind == "timeline":
                times = [int(x["time_us"]) for x in got]
                check(min(t for t in times if t != -1) == 0, name,
                      "times do not count from the trace's first time")
                check(-1 in times, name, "an untimed sample is not -1")
        mc = os.path.join(tmp, "sweep.csv")
        mj = json.loads(run(allocsim, "mincap", "-p", "nocache", "-p", "expandable_segments:True",
                            "-f", "json", "--csv", mc, txt))
        check_head("mincap -f json", mj)
        sub = [x for x in doc["trace"] if x[0] in ("trace", "file", "format", "meta")]
        sub += [x for x in doc["trace"] if x[0] in ("events", "allocs", "peak_requested")]
        check_object("mincap -f json: traces[0]", mj["traces"][0], sub)
        for i, m in enumerate(mj["mincap"]):
            check_object(f"mincap -f json: mincap[{i}]", m, doc["mincap"])
        with open(mc) as f:
            check_csv("mincap --csv", f.read(), doc["mincap-csv"])
        tj = json.loads(run(allocsim, "tune", "--device", "1GB", "--outside", "0", "-p",
                            "default", "-p", "expandable_segments:True", "-p",
                            "garbage_collection_threshold:0.8", "-f", "json", txt))
        check_head("tune -f json", tj)
        for i, t in enumerate(tj["traces"]):
            check_object(f"tune -f json: traces[{i}]", t, doc["tune"])
            check(len(t["settings"]) == 3, "tune -f json", "not one entry per -p")
            for k, x in enumerate(t["settings"]):
                check_object(f"tune -f json: settings[{k}]", x, doc["tune-setting"])
                check(x["rank"] == k + 1, "tune -f json", f"settings[{k}].rank = {x['rank']}")
                if x["curve"] is not None:
                    check(x["curve"]["hi"] <= t["usable"], "tune -f json",
                          f"settings[{k}]: the curve passes the card")
        ij = json.loads(run(allocsim, "info", "-f", "json", traces[-1]))
        check_head("info -f json", ij)
        check_object("info -f json: traces[0]", ij["traces"][0], doc["trace"] + doc["info"])
        check_checks(allocsim, doc)
        pj = os.path.join(tmp, "p.json")
        with open(pj, "w") as f:
            f.write(js)
        check_csv("compare -f csv", run(allocsim, "compare", "-f", "csv", pj, pj), doc["compare"])
    for f in failures:
        print("check_outputs: " + f)
    print(f"check_outputs: {checks} checks, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
