#!/usr/bin/env python3
"""ground_truth.py - what the pressured runs of one recording folder did, read from their
snapshots alone: the OOMs caught at cuDNN workspace requests, the fallback each conv call
took, and where the job died, as an allocation ordinal of the UNPRESSURED snapshot (the
one the simulator is given). Writes DIR/ground_truth.json; make test checks it is current.

A workspace request is an entry whose frames name at::native::run_conv_plan (cuDNN v8,
Conv_v8.cpp: the allocation of plan.getWorkspaceSize() that try_configs, try_plans and the
cached-plan path of run_single_conv catch). The walk: every allocation that is not a
workspace request is the same (size, order) in both runs until the pressured one dies
(checked: a difference is an error); between two of them, the unpressured run's workspace
allocations (W0, the first engine's) map onto the pressured run's workspace entries of the
same conv calls: `oom` entries (each an engine tried and refused; caught) and the
allocation of the engine that ran, or none when it needs no workspace. The death is the
last entry, an `oom` outside any workspace site; its ordinal is that of the unpressured
allocation it corresponds to (the next one not yet matched).

usage: python3 ground_truth.py DIR [--check | --summary]
  DIR holds results.json and the pickles; --check: fail when DIR/ground_truth.json is not
  what the pickles give; --summary: print the runs as a table instead (the README's)
"""
import json
import os
import pickle
import subprocess
import sys

WORKSPACE = "at::native::run_conv_plan"


def load(path):
    raw = subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout
    return pickle.loads(raw)["device_traces"][0]


def is_ws(e):
    return any(f.get("name", "").startswith(WORKSPACE) for f in e.get("frames", ()))


def requests(trace):
    """[(action, size, workspace?)] of the alloc and oom entries, in order."""
    return [(e["action"], e["size"], is_ws(e)) for e in trace if e["action"] in ("alloc", "oom")]


def groups(reqs):
    """Split into [(workspace entries before it, the non-workspace entry)], and the tail."""
    out, ws = [], []
    for r in reqs:
        if r[2]:
            ws.append(r)
        else:
            out.append((ws, r))
            ws = []
    return out, ws


def compare(base, run):
    ub, _ = groups(base)
    pb, ptail = groups(run)
    ordinal = 0  # unpressured alloc ordinal of the next non-workspace alloc
    res = {"caught_ooms": 0, "caught_calls": 0, "fallbacks": [], "died": False,
           "death_alloc": None, "death_size": None}
    for k, (pws, pr) in enumerate(pb):
        if k >= len(ub):
            raise SystemExit("pressured run has more allocations than the unpressured one")
        uws, ur = ub[k]
        first_ws = ordinal
        ordinal += len(uws)
        ooms = [r for r in pws if r[0] == "oom"]
        res["caught_ooms"] += len(ooms)
        ran = [r[1] for r in pws if r[0] == "alloc"]
        if ooms or [r[1] for r in uws] != ran:
            res["caught_calls"] += bool(ooms)
            res["fallbacks"].append({"alloc": first_ws, "unpressured": [r[1] for r in uws],
                                     "ooms": len(ooms), "pressured": ran})
        if pr[0] == "oom":
            if k != len(pb) - 1:
                raise SystemExit("an oom outside a workspace site that is not the last")
            res.update(died=True, death_alloc=ordinal, death_size=pr[1],
                       death_unpressured_size=ur[1])
            break
        if pr[1] != ur[1]:
            raise SystemExit("allocation %d differs: %d against %d" % (ordinal, pr[1], ur[1]))
        ordinal += 1
    res["caught_ooms"] += sum(1 for r in ptail if r[0] == "oom")
    return res


def summary(out):
    print("unpressured: %d allocations (%d cuDNN workspace requests), peak reserved %d B"
          % (out["unpressured_allocs"], out["unpressured_workspace_allocs"],
             out["unpressured_peak_reserved"]))
    print("%-10s %-8s %13s %6s %5s %-16s %s" % ("run", "card", "capacity B", "caught", "calls",
                                               "died at alloc", "fallbacks (alloc: W0 -> ran)"))
    for name, r in sorted(out["runs"].items()):
        died = "%d (%d B)" % (r["death_alloc"], r["death_size"]) if r["died"] else \
            ("no" if not r["exception"] else r["exception"])
        fb = ", ".join("%d: %s -> %s" % (f["alloc"], "+".join(map(str, f["unpressured"])),
                                         "+".join(map(str, f["pressured"])) or "0")
                       for f in r["fallbacks"] if f["ooms"])
        print("%-10s %-8s %13d %6d %5d %-16s %s" % (name, r["mode"], r["capacity"],
                                                    r["caught_ooms"], r["caught_calls"], died,
                                                    fb or "-"))


def main():
    d = sys.argv[1]
    with open(os.path.join(d, "results.json")) as f:
        meta = json.load(f)["runs"]
    base = requests(load(os.path.join(d, "unpressured.pickle.zst")))
    out = {"unpressured_allocs": sum(1 for r in base if r[0] == "alloc"),
           "unpressured_workspace_allocs": sum(1 for r in base if r[2]),
           "unpressured_peak_reserved": meta["unpressured"]["reserved_bytes.all.peak"],
           "runs": {}}
    for name in sorted(meta):
        m = meta[name]
        if name == "unpressured":
            continue
        r = compare(base, requests(load(os.path.join(d, name + ".pickle.zst"))))
        r["mode"] = m["mode"]
        r["capacity"] = m.get("allowed_bytes") or m.get("free_after_ballast")
        r["num_ooms"] = m["num_ooms"]
        r["exception"] = (m.get("died") or {}).get("exception")
        out["runs"][name] = r
    if "--summary" in sys.argv:
        return summary(out)
    text = json.dumps(out, indent=1, sort_keys=True) + "\n"
    path = os.path.join(d, "ground_truth.json")
    if "--check" in sys.argv:
        with open(path) as f:
            if f.read() != text:
                raise SystemExit(path + " is stale: run ground_truth.py " + d)
        return
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
