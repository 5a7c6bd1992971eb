#!/usr/bin/env python3
"""validate.py - does simulated fragmentation predict what the GPU does? (`make validate`)

On the GPU machine, for every trace (every real snapshot in tests/data: the resnet, moe
and llama ones, the two multi-stream recordings, the private-pool probe and the four
CUDA-graph runs whose pools are released during the trace; and three generated
workloads, one of them a long KV-cache run near a full device) and every policy spec
(torch under three PyTorch configs and every other registered policy):
  1. find the OOM frontier with the simulator: the uncapped peak reserved, then the smallest
     capacity that completes, searched in passes of many capacities (one allocsim call
     each, so the trace is decoded once per pass); then five capacities around it and four
     across the whole range (0.6x and 0.85x the frontier, half way to the uncapped peak
     reserved, and that peak), and for a trace with private pools five more between 0.88x
     and 0.96x (caps_pools);
  2. predict: allocsim at those capacities (JSON report + --segments);
  3. measure: allocsim-replay with the same policy code over cudaMalloc/cuMem* with the
     capacity enforced by the driver; for the torch configs also PyTorch's own allocator
     through torch_replay.py (the ground-truth method of tests/data, the worker's host
     memory from the brk heap alone: --host-heap brk; the events allocsim's importer
     reads, so a snapshot's private pools are replayed in MemPools and its inferred
     empty_cache() called; a trace with a graph's pool, one allocated on a side stream,
     is replayed through PyTorch a second time with that pool's allocations inside real
     CUDA graph captures, the side "pytorch_capture": torch_replay.py --pools capture).
     PyTorch makes its stream pool at
     the first side stream, allocsim-replay no stream, so a multi-stream trace's PyTorch
     side is predicted with --device-streams pytorch, every other run with none (the
     summary's device_streams says which). Multi-stream traces
     run in their recorded order of requests and completions: a FREE_REQ then the FREE
     where the trace completes it (allocsim-replay: the engine's deferred free;
     torch_replay.py: the tensor dropped at its free_completed). Runs that only limit
     themselves (torch: PyTorch's memory fraction) go side by side (--jobs); runs whose
     capacity a ballast enforces go one at a time, alone on the GPU;
  4. compare with `allocsim compare -f csv`, and write summary.json and summary.md;
  5. the stream-ordered pool (allocsim-replay --async, no model to compare with): per trace
     and release threshold (0 and max), the uncapped run, the pool's own OOM frontier
     (three passes of capacities between peak requested and the uncapped peak reserved), five
     capacities around it, and the torch policy's five capacities: summary_async.{json,md}.
With --part I/N only part I of the plan is measured: every call computes the whole plan
(the same frontiers and capacities: the search is deterministic) and splits it into N
parts of about equal predicted device time (split_plan, from each item's predicted cost,
fitted to the fifth measurement's log), so that each part fits one device call; each
item keeps its index in the whole plan (its files' NN_ prefix and the summary's "index"),
and `validate_table.py` merges the parts' summaries. Everything goes to OUT (default
build/validate). Exit 0 when it ran."""
import argparse
import concurrent.futures as cf
import csv
import functools
import io
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_replay  # noqa: E402  (its trace reading only: torch is imported by its worker)
import validate_table  # noqa: E402

MIB2 = 2 << 20
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_CONFS = ["default", "max_split_size_mb:128", "expandable_segments:True"]
TORCH_SPECS = ["torch", "max_split_size_mb:128", "expandable_segments:True"]
OTHER = ["bestfit", "nocache", "firstfit", "segfit", "buddy", "bfc",
         # GMLake at its defaults (fragLimit 512 MiB) and stitching every large request
         "gmlake", "gmlake,fraglimit=2M"]
GEN = {
    "transformer": ["transformer", "seq_dist=uniform", "steps=8", "layers=8"],
    "kvcache": ["kvcache", "requests=40", "layers=4", "output_mean=128", "prompt_mean=256",
                "max_batch=16"],
    # 853,990 allocations, 1.0 GiB requested at the peak: the near-full KV-cache case
    "kvcache_long": ["kvcache", "requests=200", "layers=8", "output_mean=256",
                     "prompt_mean=512", "max_batch=32"],
}
# every real snapshot of tests/data (name: path under the repository)
REAL = {
    "resnet_varbatch": "tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst",
    "moe_like": "tests/data/torch-2.11-h200/moe_like.pickle.zst",
    "llama_accum_ckpt": "tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst",
    "streams2_default": "tests/data/torch-2.11-h200-streams/streams2_default.pickle.zst",
    "streams2_expandable": "tests/data/torch-2.11-h200-streams/"
                           "streams2_expandable_segments_True.pickle.zst",
    "graph_probe": "tests/data/torch-2.11-h200-pools/graph_probe.pickle.zst",
    # CUDA-graph runs whose pools are released during the trace (README there; the
    # _noframes recordings have the same events as infer and train, so are left out)
    "graphs_infer": "tests/data/torch-2.11-h200-graphs/infer.pickle.zst",
    "graphs_train": "tests/data/torch-2.11-h200-graphs/train.pickle.zst",
    "graphs_dyn": "tests/data/torch-2.11-h200-graphs/dyn.pickle.zst",
    "graphs_graph": "tests/data/torch-2.11-h200-graphs/graph.pickle.zst",
}
DEFAULT_TRACES = ",".join(list(REAL) + list(GEN))
# the long trace (one device call per event under nocache, buddy's and bfc's frontiers far
# from the others) runs the policies of the near-full question only
ONLY = {"kvcache_long": ["torch", "firstfit", "bestfit", "segfit"]}


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


@functools.lru_cache(maxsize=None)
def info_of(allocsim, path):
    """The counts of `allocsim info` for the trace (its `name: N ...` lines), one run of
    info per trace however many items ask."""
    r = sh([allocsim, "info", path])
    counts = {}
    for line in r.stdout.splitlines():
        name, sep, rest = line.partition(":")
        words = rest.split()
        if sep and words and words[0].isdigit():
            counts[name] = int(words[0])
    return counts


def streams_of(allocsim, path):
    """The trace's distinct streams (allocsim info's `streams: N`; 1 when not said)."""
    return info_of(allocsim, path).get("streams", 1)


def pools_of(allocsim, path):
    """The trace's private pools (allocsim info's `private pools: N`; 0 when none)."""
    return info_of(allocsim, path).get("private pools", 0)


@functools.lru_cache(maxsize=None)
def capture_pools_of(allocsim, path):
    """How many of the trace's private pools torch_replay.py --pools capture replays in
    real CUDA graph captures: those with an allocation on a side stream (a graph's)."""
    evs, _ = torch_replay.load_trace(path, allocsim)
    return len({e[4] for e in evs if e[0] == "a" and e[4] and e[3] != 0})


def spec_of(conf):
    return "torch" if conf == "default" else conf


# ---- the plan in parts (--part I/N) -------------------------------------------------------
# Each item's predicted device time, in seconds, fitted to the fifth measurement's log
# (replay/data/validate-h200-s6/validate.log: the completion times of its 67 ballast items
# one after another; the side-by-side phase, 50 measurements over 4 workers in 88 s, and its
# longest, kvcache_long's PyTorch side, 80 s): a ballast run costs its start (0.46 s:
# ballast, context, trace; gmlake 0.91 s) and a time per event (0.03 us; gmlake 0.25;
# nocache 33 us, one device call per event); a PyTorch side starts a process (6 s) and
# replays each event in each run, warm-up and timing runs included (4.3 us); the torch
# policy's allocsim-replay side costs about 1 s and 0.2 us an event a run. Those fits
# predict the fifth measurement's 92 items at 476 s, which took 530 s (491 + 39: the
# predictions, the calls' starts, the side-by-side phase's uneven end): COST_SCALE spreads
# the rest over every item.
COST_SCALE = 530 / 476
SEQ_COST = {"nocache": (0.41, 33.4e-6), "gmlake": (0.91, 0.25e-6), "": (0.46, 0.03e-6)}
PAR_COST = {"pytorch": (6.0, 4.3e-6, 2), "pytorch_capture": (6.0, 4.3e-6, 2),
            "replay": (1.0, 0.2e-6, 0)}


def side_cost(side, spec, events, ncaps):
    """The predicted seconds of one measuring side (see above)."""
    if side != "replay" or spec in TORCH_SPECS:
        start, per_event, extra_runs = PAR_COST[side]
        return start + per_event * events * (ncaps + extra_runs)
    start, per_event = SEQ_COST.get(spec.split(",")[0], SEQ_COST[""])
    return ncaps * (start + per_event * events)


def item_cost(p, jobs):
    """An item's share of a call: its side-by-side sides over the --jobs workers, its
    ballast side whole (they run one at a time)."""
    total = 0.0
    for side in p["sides"]:
        c = side_cost(side, p["spec"], p["events"], len(p["caps"]))
        total += c if side == "replay" and p["spec"] not in TORCH_SPECS else c / max(1, jobs)
    return total * COST_SCALE


def split_plan(plan, n, jobs):
    """Part k (1..n) of each item, the n parts' predicted costs as even as the greedy
    rule makes them: the dearest item first, each into the part predicted cheapest so far
    (ties to the lower part), the plan's order within a part kept. Deterministic: every
    call of a split run computes the same plan and the same parts."""
    load = [0.0] * n
    for i in sorted(range(len(plan)), key=lambda i: (-item_cost(plan[i], jobs), i)):
        k = load.index(min(load))
        plan[i]["part"] = k + 1
        load[k] += item_cost(plan[i], jobs)
    return load


def sim(allocsim, trace, spec, caps, extra=()):
    cmd = [allocsim, "-q", "-f", "json", "-p", spec] + sum((["-c", str(c)] for c in caps), []) \
        + list(extra) + [trace]
    r = sh(cmd)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return json.loads(r.stdout)["runs"]


def r2(x):
    return max(MIB2, int(x) // MIB2 * MIB2)


def frontier(allocsim, trace, spec):
    """Smallest 2 MiB-multiple capacity that completes (among those sampled), the
    uncapped peak reserved, and whether a larger sampled capacity failed (non-monotone)."""
    un = sim(allocsim, trace, spec, ["none"])[0]
    peak, req = un["peak_reserved"], un["peak_requested"]
    lo, hi = r2(req * 0.9), r2(peak) + MIB2
    nonmono = False
    for _ in range(6):
        if hi - lo <= MIB2:
            break
        n = 48
        step = max(MIB2, r2((hi - lo) / n))
        caps = sorted(set(range(lo, hi, step)) | {hi})
        runs = sim(allocsim, trace, spec, caps)
        ok = [c for c, r in zip(caps, runs) if r["completed"]]
        if not ok:
            lo = hi
            break
        first = min(ok)
        nonmono |= any(not r["completed"] and c > first for c, r in zip(caps, runs))
        below = [c for c in caps if c < first]
        lo, hi = (max(below) if below else first), first
    return hi, peak, nonmono


def caps_around(m):
    return sorted({r2(m * 0.97), r2(m * 0.99), m - MIB2, m, r2(m * 1.02)})


def caps_across(m, peak):
    """Four capacities over the whole range: well below the frontier, just below it, half
    way to the uncapped peak reserved, and that peak (where every run completes)."""
    return sorted({r2(m * 0.6), r2(m * 0.85), r2((m + peak) / 2), r2(peak)} - {m})


def caps_pools(m):
    """Five more capacities for a trace with private pools, every 2 % from 0.88 to 0.96 of
    the frontier: the band where allocations late in the trace meet a full card, so that
    a pool's request OOMs there while a default-pool request would have had the cached
    segments released for it (policies/torch.c: a request made while a capture or
    use_mem_pool is underway is not retried after release_cached_blocks)."""
    return sorted({r2(m * f) for f in (0.88, 0.90, 0.92, 0.94, 0.96)})


def read_csv_rows(text):
    return list(csv.DictReader(io.StringIO(text)))


ASYNC_THRESHOLDS = ["0", "max"]


def async_runs(replay, trace, thr, caps, base, timeout):
    """One allocsim-replay --async call over caps: the report's runs merged with the pool's
    CSV (reserved/used high, grows, trims, OOM retries)."""
    capargs = sum((["-c", str(c)] for c in caps), [])
    cmd = [replay, "--async", "--release-threshold", thr, *capargs, "-f", "json",
           "-o", base + ".json", "--segments", base + ".csv", "--pool", base + ".pool.csv", trace]
    r = sh(cmd, timeout=timeout)
    with open(base + ".log", "w") as f:
        f.write(r.stderr)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()[-400:]}")
    with open(base + ".json") as f:
        runs = json.load(f)["runs"]
    with open(base + ".pool.csv") as f:
        pool = list(csv.DictReader(f))
    for x, q in zip(runs, pool):
        x["pool"] = q
    return runs


def async_section(a, replay, traces, plan, out, deadline):
    """The cudaMallocAsync measurements (no simulated counterpart): see the docstring."""
    res = []
    adir = os.path.join(out, "async")
    os.makedirs(adir, exist_ok=True)
    front = {(p["trace"], p["spec"]): p for p in plan}
    for tn, tp in traces.items():
        for thr in ASYNC_THRESHOLDS:
            left = deadline - time.time()
            if left < 20:
                res.append({"trace": tn, "threshold": thr, "skipped": "out of time"})
                continue
            tag = f"{tn}_thr{thr}"
            row = {"trace": tn, "threshold": thr}
            try:
                un = async_runs(replay, tp, thr, ["none"], os.path.join(adir, tag + "_none"),
                                left - 5)[0]
                row["uncapped"] = un
                req, peak = un["peak_requested"], un["peak_reserved"]
                lo, hi = r2(req), r2(peak) + MIB2
                for k in range(3):
                    if hi - lo <= MIB2 or deadline - time.time() < 20:
                        break
                    step = max(MIB2, r2((hi - lo) / 8))
                    caps = sorted(set(range(lo, hi, step)) | {hi})
                    runs = async_runs(replay, tp, thr, caps,
                                      os.path.join(adir, f"{tag}_pass{k}"),
                                      deadline - time.time() - 5)
                    row.setdefault("search", []).extend(
                        {"capacity": c, "completed": x["completed"], "oom_alloc": x["oom_alloc"]}
                        for c, x in zip(caps, runs))
                    ok = [c for c, x in zip(caps, runs) if x["completed"]]
                    if not ok:
                        break
                    below = [c for c in caps if c < min(ok)]
                    lo, hi = (max(below) if below else min(ok)), min(ok)
                row["frontier"] = hi
                sets = [("near", caps_around(hi))]
                tp_ = front.get((tn, "torch"))
                if tp_:
                    sets.append(("torch_caps", tp_["caps"]))
                for name, caps in sets:
                    if deadline - time.time() < 20:
                        break
                    row[name] = async_runs(replay, tp, thr, caps,
                                           os.path.join(adir, f"{tag}_{name}"),
                                           deadline - time.time() - 5)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                row["error"] = str(e)[-400:]
            for k in ("torch", "expandable_segments:True"):
                if (tn, k) in front:
                    row[f"mincap_{k}"] = front[(tn, k)]["mincap"]
            res.append(row)
            print(f"[async] {tag}: frontier {row.get('frontier')} "
                  f"{row.get('error', '')[:200]}", flush=True)
    with open(os.path.join(out, "summary_async.json"), "w") as f:
        json.dump(res, f, indent=1)
    lines = ["| trace | threshold | peak requested | pool reserved high (uncapped) | used high | "
             "frontier (pool) | torch mincap | expandable mincap | near frontier: cap:OOM alloc |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in res:
        u = r.get("uncapped")
        if not u:
            lines.append(f"| {r['trace']} | {r['threshold']} | {r.get('error', r.get('skipped'))} "
                         "| | | | | | |")
            continue
        near = " ".join(f"{x['capacity']}:{'ok' if x['completed'] else x['oom_alloc']}"
                        for x in r.get("near", []))
        lines.append(f"| {r['trace']} | {r['threshold']} | {u['peak_requested']} | "
                     f"{u['pool']['reserved_high']} | {u['pool']['used_high']} | "
                     f"{r.get('frontier')} | {r.get('mincap_torch')} | "
                     f"{r.get('mincap_expandable_segments:True')} | {near} |")
    with open(os.path.join(out, "summary_async.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def sides_of(a, p, base, trace, allocsim, replay, torch_replay_py):
    """The measuring commands of one plan item: (side, parallel-safe, command)."""
    caps = [str(c) for c in p["caps"]]
    capargs = sum((["-c", c] for c in caps), [])
    torch_specs = [spec_of(c) for c in TORCH_CONFS]
    out = [("replay", p["spec"] in torch_specs,
            [replay, "-f", "json", "-p", p["spec"], *capargs, "-o", base + ".replay.json",
             "--segments", base + ".replay.csv", "--latency", base + ".lat.csv",
             "--calls", base + ".calls.csv", trace])]
    if p["spec"] in torch_specs and not a.no_pytorch:
        conf = [c for c in TORCH_CONFS if spec_of(c) == p["spec"]][0]
        out.append(("pytorch", True,
                    [sys.executable, torch_replay_py, trace, "--conf", conf, "--key-protocol",
                     "--host-heap", "brk", "--allocsim", allocsim,
                     *sum((["--cap", c] for c in caps), []),
                     "--json", base + ".pytorch.json", "--segments", base + ".pytorch.csv"]))
        if "pytorch_capture" in p["sides"]:
            cmd = out[-1][2][:]
            cmd[cmd.index("--json") + 1] = base + ".pytorch_capture.json"
            cmd[cmd.index("--segments") + 1] = base + ".pytorch_capture.csv"
            out.append(("pytorch_capture", True, cmd + ["--pools", "capture"]))
    return out


def measure(p, side, cmd, base, allocsim, deadline):
    left = deadline - time.time()
    if left < 20:
        p["measured"][side] = {"skipped": "out of time"}
        return
    try:
        r = sh(cmd, timeout=left - 10)
    except subprocess.TimeoutExpired:
        p["measured"][side] = {"error": "timed out"}
        return
    with open(base + f".{side}.log", "w") as f:
        f.write(r.stderr)
    if r.returncode:
        p["measured"][side] = {"error": r.stderr.strip()[-400:]}
        return
    errors = []
    with open(base + f".{side}.json") as f:
        errors = [x["error"] for x in json.load(f)["runs"] if x.get("error")]
    pred = base + (".predpt" if p["device_streams"].get(side) == "pytorch" else ".pred")
    c = sh([allocsim, "compare", "-f", "csv", "--segments", pred + ".csv",
            base + f".{side}.csv", pred + ".json", base + f".{side}.json"])
    if c.returncode:
        p["measured"][side] = {"error": "compare: " + c.stderr.strip()}
        return
    p["measured"][side] = {"rows": read_csv_rows(c.stdout)}
    if errors:  # a run stopped by a refused CUDA call, not an OOM (torch_replay.py)
        p["measured"][side]["run_errors"] = errors
    rows = p["measured"][side]["rows"]
    print(f"[{time.time() - deadline:+.0f}s] {os.path.basename(base)} {side}: "
          f"{sum(int(x['oom_match']) for x in rows)}/{len(rows)} OOM", flush=True)


def run_plan(a, plan, traces, out, allocsim, replay, torch_replay_py, t0):
    """Predicts every item, then measures: first the runs that limit themselves (no
    ballast: torch's memory fraction, PyTorch), --jobs at a time, then the ballast runs
    one after another, each alone on the GPU."""
    budget = a.budget - (a.async_budget if not a.no_gpu else 0)
    deadline = t0 + budget
    par, seq = [], []
    for p in plan:
        tag = f"{p['index']:02d}_{p['trace']}_{p['spec'].replace(':', '-').replace(',', '-')}"
        base = os.path.join(out, tag)
        capargs = sum((["-c", str(c)] for c in p["caps"]), [])
        r = sh([allocsim, "-q", "-f", "json", "-p", p["spec"], *capargs, "-o", base + ".pred.json",
                "--segments", base + ".pred.csv", traces[p["trace"]]])
        p["measured"] = {}
        # which streams each side's prediction made (allocsim --device-streams)
        p["device_streams"] = {"replay": "none"}
        torch_specs = [spec_of(c) for c in TORCH_CONFS]
        if not r.returncode and p["spec"] in torch_specs and not a.no_pytorch:
            p["device_streams"]["pytorch"] = "none"
            if streams_of(allocsim, traces[p["trace"]]) > 1:
                # PyTorch's process makes its stream pool at the first torch.cuda.Stream()
                # (PLACEMENT.md section 10); allocsim-replay makes none
                p["device_streams"]["pytorch"] = "pytorch"
                r = sh([allocsim, "-q", "-f", "json", "-p", p["spec"], *capargs,
                        "--device-streams", "pytorch", "-o", base + ".predpt.json",
                        "--segments", base + ".predpt.csv", traces[p["trace"]]])
            if "pytorch_capture" in p["sides"]:
                p["device_streams"]["pytorch_capture"] = p["device_streams"]["pytorch"]
        if r.returncode:
            p["error"] = "predict: " + r.stderr.strip()
            continue
        if a.no_gpu:
            p["skipped"] = "no GPU"
            continue
        for side, safe, cmd in sides_of(a, p, base, traces[p["trace"]], allocsim, replay,
                                        torch_replay_py):
            (par if safe else seq).append((p, side, cmd, base))
    print(f"[{time.time()-t0:.0f}s] predicted; {len(par)} side-by-side and {len(seq)} "
          "ballast measurements", flush=True)
    with cf.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        list(ex.map(lambda x: measure(x[0], x[1], x[2], x[3], allocsim, deadline), par))
    for p, side, cmd, base in seq:
        measure(p, side, cmd, base, allocsim, deadline)
    return plan


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "validate"))
    ap.add_argument("--budget", type=float, default=560, help="seconds for the whole run")
    ap.add_argument("--no-gpu", action="store_true", help="frontiers and predictions only")
    ap.add_argument("--traces", default=DEFAULT_TRACES)
    ap.add_argument("--jobs", type=int, default=6,
                    help="runs without a ballast (torch, PyTorch) at a time")
    ap.add_argument("--across", action=argparse.BooleanOptionalAction, default=True,
                    help="also four capacities across the whole range (default on)")
    ap.add_argument("--policies", default="",
                    help="the specs to run, separated by ';' (specs hold commas); default all")
    ap.add_argument("--no-pytorch", action="store_true", help="no torch_replay.py runs")
    ap.add_argument("--async-budget", type=float, default=180,
                    help="seconds kept for the cudaMallocAsync runs (0: none)")
    ap.add_argument("--part", default="1/1", metavar="I/N",
                    help="measure part I of N of the plan, the parts balanced by each item's "
                         "predicted device time (split_plan); the cudaMallocAsync runs go "
                         "with part 1. validate_table.py merges the parts' summaries")
    ap.add_argument("--no-capture", action="store_true",
                    help="no torch_replay.py --pools capture side")
    a = ap.parse_args()
    try:
        part, nparts = (int(x) for x in a.part.split("/"))
        if not 1 <= part <= nparts:
            raise ValueError
    except ValueError:
        ap.error(f"--part {a.part}: I/N with 1 <= I <= N")
    t0 = time.time()
    out = a.out
    os.makedirs(out, exist_ok=True)
    allocsim = os.path.join(ROOT, "build", "allocsim")
    replay = os.path.join(ROOT, "build", "allocsim-replay")
    torch_replay_py = os.path.join(ROOT, "replay", "torch_replay.py")
    have = sh([allocsim, "policies"]).stdout
    others = [p for p in OTHER if f"\n{p.split(',')[0]} - " in "\n" + have]

    traces = {}
    for name in a.traces.split(","):
        if name in GEN:
            path = os.path.join(out, f"{name}.zst")
            r = sh([allocsim, "gen"] + GEN[name] + ["-o", path])
            if r.returncode:
                print(f"validate: gen {name}: {r.stderr.strip()}", file=sys.stderr)
                continue
            traces[name] = path
        elif name in REAL:
            traces[name] = os.path.join(ROOT, REAL[name])
        else:
            print(f"validate: no trace '{name}'", file=sys.stderr)
    specs = [spec_of(c) for c in TORCH_CONFS] + others
    if a.policies:
        specs = [s for s in specs if s in a.policies.split(";")]

    pools = {tn: pools_of(allocsim, tp) for tn, tp in traces.items()}
    # 1. frontiers, in parallel (simulation only)
    jobs = {}
    with cf.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
        for tn, tp in traces.items():
            for s in specs:
                if s in ONLY.get(tn, [s]):
                    jobs[(tn, s)] = ex.submit(frontier, allocsim, tp, s)
    plan = []
    for (tn, s), f in jobs.items():
        try:
            m, peak, nonmono = f.result()
        except Exception as e:  # a failed search is reported, the rest goes on
            print(f"validate: frontier {tn} {s}: {e}", file=sys.stderr)
            continue
        caps = caps_around(m)
        if a.across:
            caps = sorted(set(caps) | set(caps_across(m, peak)))
        if pools.get(tn):
            caps = sorted(set(caps) | set(caps_pools(m)))
        sides = ["replay"]
        if s in TORCH_SPECS and not a.no_pytorch:
            sides.append("pytorch")
            if not a.no_capture and capture_pools_of(allocsim, traces[tn]):
                sides.append("pytorch_capture")
        plan.append({"trace": tn, "spec": s, "mincap": m, "peak_reserved": peak,
                     "nonmonotone": nonmono, "caps": caps, "sides": sides,
                     "events": info_of(allocsim, traces[tn]).get("events", 0)})
    print(f"[{time.time()-t0:.0f}s] frontiers done: {len(plan)} (trace, policy) pairs", flush=True)
    # the sequential (ballast) runs: nocache last, it makes one device call per event
    plan.sort(key=lambda p: (p["spec"] == "nocache", p["trace"], p["spec"]))
    for i, p in enumerate(plan):
        p["index"] = i
    load = split_plan(plan, nparts, a.jobs)
    plan = [p for p in plan if p["part"] == part]
    print(f"[{time.time()-t0:.0f}s] part {part}/{nparts}: {len(plan)} items, predicted "
          f"{load[part - 1]:.0f} s of device time (the parts: "
          f"{', '.join(f'{x:.0f}' for x in load)} s)", flush=True)
    results = run_plan(a, plan, traces, out, allocsim, replay, torch_replay_py, t0)

    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(results, f, indent=1)
    lines = validate_table.table(results)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    if not a.no_gpu and a.async_budget > 0 and part == 1:
        async_section(a, replay, traces, plan, out, t0 + a.budget)
    return 0


if __name__ == "__main__":
    sys.exit(main())
