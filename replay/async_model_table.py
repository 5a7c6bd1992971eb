#!/usr/bin/env python3
"""The cudamallocasync model against the H200's stream-ordered pool, trace by trace.

Two sets of measured runs (allocsim-replay --async on the H200):
- fit: replay/data/validate-h200/async/async_runs.csv.zst, 198 runs of four traces
  (thresholds 0 and max, capacities near the pool's frontier), and the same four traces
  uncapped address by address (replay/data/async-probe-h200/fit_*): the model's rules
  were read off these and the probes (async-probe-h200/probe*.csv);
- held: seven traces none of that looked at (async-probe-h200/held_*), each uncapped and
  at six capacities between its peak requested and the pool's uncapped peak reserved.

Per trace and threshold it replays the trace through `allocsim -p cudamallocasync` at
every measured capacity and prints: runs (capped), outcome exact (completed or not as on
the GPU), OOM allocation exact (and at the same allocation), the same with the device not
told of the replay's streams (column 'no stream', multi-stream traces only: the model
before the streams' pages, replay/PLACEMENT.md section 10; the replay makes one stream per
trace stream, `--device-streams each`), the uncapped peak reserved on the GPU and in the
model, and for how many
allocations of the uncapped run the model's reserved after the allocation equals the
pool's ReservedMemCurrent, with the first that differs.

usage: async_model_table.py [ALLOCSIM]   (default build/allocsim)
"""
import csv, io, json, os, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OLD = os.path.join(ROOT, "replay/data/validate-h200/async/async_runs.csv.zst")
NEW = os.path.join(ROOT, "replay/data/async-probe-h200")
sys.path.insert(0, os.path.join(ROOT, "replay"))
from validate import GEN, REAL  # noqa: E402
from record_async import FIT, HELD_GEN, HELD_REAL  # noqa: E402

MAX = 18446744073709551615


def zcat(path):
    return subprocess.run(["zstd", "-dc", path], check=True, capture_output=True,
                          text=True).stdout


def trace_path(bin_, name, tmp):
    if name in REAL:
        return os.path.join(ROOT, REAL[name])
    out = os.path.join(tmp, name + ".zst")
    if not os.path.exists(out):
        subprocess.run([bin_, "gen", *{**GEN, **HELD_GEN}[name], "-o", out], check=True)
    return out


def spec(thr):
    return "cudamallocasync,release_threshold=" + (str(2**63 - 1) if thr == "max" else thr)


def model(bin_, path, thr, caps, streams="each"):
    """{capacity: (completed, oom_alloc, peak_reserved)}, the model at each cap, the device
    told of the replay's streams as allocsim-replay --async makes them (one per trace
    stream, at its first allocation: --device-streams each) or not (streams="none")."""
    args = [bin_, "-q", "-p", spec(thr), "-f", "csv", "--device-streams", streams, path]
    for c in caps:
        args += ["-c", "none" if c == MAX else str(c)]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    res = {}
    for c, r in zip(caps, csv.DictReader(io.StringIO(out))):
        done = r["completed"] == "1"
        res[c] = (done, -1 if done else int(r["oom_alloc"]), int(r["peak_reserved"]))
    return res


def reserved_match(bin_, path, thr, blocks, tmp):
    """(allocations whose reserved after them equals the GPU's, allocations, first that
    differs or None), the model's uncapped run against the pool's --blocks log."""
    tl = os.path.join(tmp, "timeline.csv")
    subprocess.run([bin_, "-q", "-p", spec(thr), "--timeline", tl, "--timeline-every", "1",
                    "-o", os.devnull, path], check=True)
    after = {}  # alloc k: reserved after it (the last row before the count passes k)
    with open(tl) as f:
        for r in csv.DictReader(f):
            after[int(r["alloc"])] = int(r["reserved"])
    gpu = [int(r["reserved"]) for r in csv.DictReader(io.StringIO(zcat(blocks)))
           if r["action"] == "alloc"]
    same = [after.get(k) == g for k, g in enumerate(gpu)]
    return sum(same), len(gpu), next((k for k, s in enumerate(same) if not s), None)


def streams_of(bin_, path):
    out = subprocess.run([bin_, "info", path], check=True, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("streams:"):
            return int(line.split(":", 1)[1].split()[0])
    return 1


def row(st, name, thr, ns, capped, bin_, path, unc_gpu, blocks, tmp):
    """One line: capped is [(capacity, completed, oom_alloc)] as the GPU did them."""
    caps = [c for c, _, _ in capped]
    m = model(bin_, path, thr, caps + [MAX])
    mp = model(bin_, path, thr, caps, "none") if ns > 1 else None
    outc = sum(m[c][0] == d for c, d, _ in capped)
    oom = sum(m[c][0] == d and m[c][1] == o for c, d, o in capped)
    pg = sum(mp[c][0] == d and mp[c][1] == o for c, d, o in capped) if mp else None
    peak = m[MAX][2]
    same, n, first = reserved_match(bin_, path, thr, blocks, tmp)
    print("%-4s %-17s %-4s %7d %4d %8d %9d %7s  %12d %12d %+6.2f%%  %6d/%-6d %s" %
          (st, name, thr, ns, len(capped), outc, oom, "-" if pg is None else pg, unc_gpu, peak,
           100.0 * (peak - unc_gpu) / unc_gpu, same, n, "-" if first is None else first))
    return len(capped), oom, pg if pg is not None else oom


def probe_pools(bin_, tmp):
    """(pools reproduced, pools) over the probe scripts with allocations, frees and
    synchronisations only: the model's reserved after every allocation and at every
    synchronisation equals the pool's, op by op."""
    good = n = 0
    for f in ("probe1.csv.zst", "probe2.csv.zst"):
        pools, cur = {}, None
        for r in csv.DictReader(io.StringIO(zcat(os.path.join(NEW, f)))):
            if r["op"] == "pool":
                cur = pools.setdefault(r["pool"], [r])
            else:
                cur.append(r)
        for name, rs in pools.items():
            if any(r["op"] not in "afs" for r in rs[1:]):
                continue  # streams, host functions, events, TrimTo: not a trace's events
            n += 1
            path = os.path.join(tmp, "probe.txt")
            ordinal = {}  # a trace numbers its allocations in order
            with open(path, "w") as t:
                t.write("allocsim-text 1\n")
                for r in rs[1:]:
                    if r["op"] == "a":
                        ordinal[r["id"]] = len(ordinal)
                        t.write("alloc %d %s\n" % (ordinal[r["id"]], r["size"]))
                    elif r["op"] == "f":
                        t.write("free %d\n" % ordinal[r["id"]])
            tl = os.path.join(tmp, "probe.tl.csv")
            thr = "max" if int(rs[0]["size"]) == MAX else rs[0]["size"]
            subprocess.run([bin_, "-q", "-p", spec(thr), "--timeline", tl, "--timeline-every",
                            "1", "-o", os.devnull, path], check=True)
            with open(tl) as t:
                model_res = [int(x["reserved"]) for x in csv.DictReader(t)]
            ev, ok = -1, True
            for r in rs[1:]:
                ev += r["op"] != "s"
                if r["op"] in "as" and model_res[ev] != int(r["reserved"]):
                    ok = False
            good += ok
    return good, n


def main():
    bin_ = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/allocsim")
    old = list(csv.DictReader(io.StringIO(zcat(OLD))))
    print("set  trace             thr  streams runs  outcome  oom alloc  no       "
          "uncapped peak: GPU    model     err   reserved = GPU's  first")
    print("                                         exact      exact     stream"
          "                                     after allocs      differs")
    tot = {"fit": [0, 0, 0], "held": [0, 0, 0]}
    with tempfile.TemporaryDirectory() as tmp:
        for name in FIT:
            path = trace_path(bin_, name, tmp)
            ns = streams_of(bin_, path)
            for thr in ("0", "max"):
                rs = [r for r in old if r["trace"] == name and r["threshold"] == thr]
                capped = [(int(r["capacity"]), r["completed"] == "1", int(r["oom_alloc"]))
                          for r in rs if r["set"] != "none"]
                unc = [int(r["peak_reserved"]) for r in rs if r["set"] == "none"][0]
                blocks = os.path.join(NEW, f"fit_{name}_thr{thr}.blocks.csv.zst")
                t = row("fit", name, thr, ns, capped, bin_, path, unc, blocks, tmp)
                tot["fit"] = [a + b for a, b in zip(tot["fit"], t)]
        for name in list(HELD_GEN) + HELD_REAL:
            path = trace_path(bin_, name, tmp)
            ns = streams_of(bin_, path)
            for thr in ("0", "max"):
                base = os.path.join(NEW, f"held_{name}_thr{thr}")
                with open(base + "_caps.json") as f:
                    capped = [(r["capacity"], bool(r["completed"]),
                               -1 if r["completed"] else r["oom_alloc"])
                              for r in json.load(f)["runs"]]
                with open(base + "_none.json") as f:
                    unc = json.load(f)["runs"][0]["peak_reserved"]
                t = row("held", name, thr, ns, capped, bin_, path, unc,
                        base + "_none.blocks.csv.zst", tmp)
                tot["held"] = [a + b for a, b in zip(tot["held"], t)]
        good, n = probe_pools(bin_, tmp)
    print("probes: the model's reserved equals the pool's after every allocation and "
          "synchronisation in %d of %d probe pools" % (good, n))
    for k, (n, oom, pg) in tot.items():
        print("%s: %d capped runs, OOM allocation exact in %d; without the streams' pages %d" %
              (k, n, oom, pg))


if __name__ == "__main__":
    main()
