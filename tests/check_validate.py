#!/usr/bin/env python3
"""check_validate.py [ALLOCSIM] - replay/validate.py's plan in parts (--part I/N) and
replay/validate_table.py's merge of the parts' summaries, without a GPU (make test,
through tests/test_report.c):

1. split_plan: every item in exactly one part, the same parts on every call, each part's
   predicted cost the sum of its items', and the parts within the dearest item of one
   another (the greedy rule's bound); one part takes the whole plan;
2. item_cost: a ballast side (a policy other than torch's) counts whole, the side-by-side
   sides (allocsim-replay of a torch config, PyTorch) over the --jobs workers;
3. the sixth measurement (replay/data/validate-h200-s7/summary1 and 2): the two parts
   merge into the whole plan, each index once and in order, and each part's validate.py
   ran within 540 s (timing.txt);
4. run_plan's predictions (--no-gpu): a multi-stream trace's PyTorch sides predicted with
   PyTorch's stream pool (its .predpt files made, device_streams "pytorch" for pytorch
   and pytorch_capture), a one-stream trace's with none;
5. merge: the parts' items once each, in the plan's order; a later summary's item of
   other capacities is refused; --part outside 1..N is
   a usage error (exit 2, before any simulation).
Prints `N passed, N failed` and exits 1 on a failure."""
import contextlib
import copy
import io
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "replay"))
import validate  # noqa: E402
import validate_table  # noqa: E402

S7 = os.path.join(ROOT, "replay/data/validate-h200-s7")
passed = failed = 0


def check(what, ok):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAILED: {what}")


def item(i, spec, events, ncaps, sides=("replay",)):
    return {"index": i, "trace": f"t{i}", "spec": spec, "events": events,
            "caps": list(range(ncaps)), "sides": list(sides)}


def splitting():
    plan = [item(i, spec, ev, n, sides) for i, (spec, ev, n, sides) in enumerate([
        ("bestfit", 20000, 9, ("replay",)), ("nocache", 80000, 7, ("replay",)),
        ("torch", 1700000, 9, ("replay", "pytorch")), ("gmlake", 20000, 9, ("replay",)),
        ("segfit", 171, 14, ("replay",)), ("nocache", 4457, 9, ("replay",)),
        ("expandable_segments:True", 171, 14, ("replay", "pytorch", "pytorch_capture"))])]
    for n in (1, 2, 3):
        a, b = copy.deepcopy(plan), copy.deepcopy(plan)
        la, lb = validate.split_plan(a, n, 4), validate.split_plan(b, n, 4)
        check(f"{n} parts: the same on every call", la == lb and
              [p["part"] for p in a] == [p["part"] for p in b])
        check(f"{n} parts: each item in one part 1..{n}",
              all(1 <= p["part"] <= n for p in a))
        costs = [validate.item_cost(p, 4) for p in a]
        check(f"{n} parts: a part's cost is its items'", all(
            abs(la[k] - sum(c for p, c in zip(a, costs) if p["part"] == k + 1)) < 1e-9
            for k in range(n)))
        check(f"{n} parts: within the dearest item of one another",
              max(la) - min(la) <= max(costs) + 1e-9)
    one = copy.deepcopy(plan)
    validate.split_plan(one, 1, 4)
    check("one part: the whole plan", {p["part"] for p in one} == {1})


def costs():
    s = validate.COST_SCALE
    b = item(0, "bestfit", 1000, 10)
    check("a ballast side counts whole",
          abs(validate.item_cost(b, 4) - s * validate.side_cost("replay", "bestfit", 1000, 10))
          < 1e-9)
    t = item(1, "torch", 1000, 10, ("replay", "pytorch"))
    want = s * (validate.side_cost("replay", "torch", 1000, 10) +
                validate.side_cost("pytorch", "torch", 1000, 10)) / 4
    check("side-by-side sides over the --jobs workers", abs(validate.item_cost(t, 4) - want) < 1e-9)
    check("nocache's time per event above the others'",
          validate.side_cost("replay", "nocache", 10 ** 6, 1) >
          10 * validate.side_cost("replay", "bestfit", 10 ** 6, 1))


def measured():
    one = validate_table.load(os.path.join(S7, "summary1.json.zst"))
    two = validate_table.load(os.path.join(S7, "summary2.json.zst"))
    check("part 1's items say part 1, part 2's part 2",
          {p["part"] for p in one} == {1} and {p["part"] for p in two} == {2})
    merged = validate_table.merge(copy.deepcopy(one), copy.deepcopy(two))
    check("merged: the whole plan, each index once, in order",
          [p["index"] for p in merged] == list(range(len(one) + len(two))))
    with open(os.path.join(S7, "timing.txt")) as f:
        secs = [int(line.split()[-2]) for line in f if "--part 1/2" in line or "--part 2/2" in line]
    check("each part's call within 540 s (timing.txt)", len(secs) == 2 and max(secs) <= 540)


def predictions(allocsim):
    class A:
        budget, async_budget, no_gpu, no_pytorch, jobs = 60, 0, True, False, 1
    traces = {t: os.path.join(ROOT, validate.REAL[t]) for t in ("streams2_default", "graph_probe")}
    traces["one"] = os.path.join(ROOT, "tests/data/torch-2.11-h200/moe_like.pickle.zst")
    plan = [{"index": 0, "trace": "streams2_default", "spec": "torch", "caps": [1 << 30],
             "sides": ["replay", "pytorch"]},
            {"index": 1, "trace": "graph_probe", "spec": "torch", "caps": [700 << 20],
             "sides": ["replay", "pytorch", "pytorch_capture"]},
            {"index": 2, "trace": "one", "spec": "torch", "caps": [1 << 30],
             "sides": ["replay", "pytorch"]}]
    with tempfile.TemporaryDirectory() as d:
        with contextlib.redirect_stdout(io.StringIO()):
            validate.run_plan(A, plan, traces, d, allocsim, "allocsim-replay", "torch_replay.py",
                              time.time())
        have = set(os.listdir(d))
    check("no prediction failed", all("error" not in p for p in plan))
    check("multi-stream: the PyTorch side predicted with its stream pool",
          plan[0]["device_streams"] == {"replay": "none", "pytorch": "pytorch"} and
          {"00_streams2_default_torch.predpt.json", "00_streams2_default_torch.predpt.csv"} <= have)
    check("a graph's pool: pytorch_capture predicted as pytorch",
          plan[1]["device_streams"] == {"replay": "none", "pytorch": "pytorch",
                                        "pytorch_capture": "pytorch"} and
          "01_graph_probe_torch.predpt.json" in have)
    check("one stream: no stream pool, no .predpt",
          plan[2]["device_streams"] == {"replay": "none", "pytorch": "none"} and
          "02_one_torch.pred.json" in have and "02_one_torch.predpt.json" not in have)


def refusals():
    one = [{"index": 2, "trace": "c", "spec": "torch", "caps": [1], "measured": {}},
           {"index": 0, "trace": "a", "spec": "torch", "caps": [1], "measured": {}}]
    two = [{"index": 1, "trace": "b", "spec": "torch", "caps": [1], "measured": {}}]
    check("parts merged in the plan's order, each item once",
          [p["index"] for p in validate_table.merge(one, two)] == [0, 1, 2])
    a = [{"trace": "x", "spec": "torch", "caps": [1, 2], "measured": {"pytorch": {"skipped": "t"}}}]
    b = [{"trace": "x", "spec": "torch", "caps": [1, 3],
          "measured": {"pytorch": {"rows": [{"oom_match": "1"}]}}}]
    try:
        validate_table.merge(a, b)
        check("other capacities refused", False)
    except ValueError as ex:
        check("other capacities refused", "other capacities" in str(ex))
    for bad in ("3/2", "0/2", "x"):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "replay/validate.py"), "--no-gpu",
                            "--part", bad, "--out", os.devnull], capture_output=True, text=True)
        check(f"--part {bad}: usage error", r.returncode == 2 and "--part" in r.stderr)


def main():
    splitting()
    costs()
    measured()
    predictions(sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "AS_ALLOCSIM", os.path.join(ROOT, "build", "allocsim")))
    refusals()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
