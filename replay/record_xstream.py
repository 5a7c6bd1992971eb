#!/usr/bin/env python3
"""record_xstream.py WORKLOAD OUTDIR - record a small purpose-built workload of private
pools (torch.cuda.MemPool, CUDA graph pools) with cross-stream frees, or of default-pool
requests made while a capture or use_mem_pool is underway, as a snapshot (issue 17).

Run on a GPU with torch 2.11 (replay/data/h200-pool-xstream/README.md: how it was run and
what each recording shows). Writes OUTDIR/WORKLOAD.pickle (the snapshot, with the GPU's own
segment addresses) and OUTDIR/WORKLOAD.json (versions, the data pointers the workload saw,
the outcome of each request that may run out of memory, memory_stats() at the end).
`all` runs every workload but the held-out ones and the variants below, each in its own
process; `held` the three recorded after the importer's rule was written from
mp_empty_inside, to confirm it.

The workloads (SLEEP keeps a side stream busy for about half a second, so that a block
used there is still in use when it is freed):
  default_pending   no pool: a 24 MiB and a 256 KiB block used on a side stream, freed
                    while it is busy (record_stream), requested again before and after it
                    is done (the control: the default pool's deferred frees)
  mp_free_in        the same inside use_mem_pool: the blocks freed inside the context
                    (PyTorch defers their events until no capture is underway), requested
                    again inside it, then after the side stream is done
  mp_free_out       the MemPool's blocks freed outside the context (events inserted at
                    once), requested again inside it while the side stream is busy and after
  mp_teardown       a MemPool dropped while one of its blocks is pending (its destructor's
                    releasePool and emptyCache(pool))
  mp_empty          empty_cache() while a pool block and a default block are pending
  mp_empty_inside   empty_cache() called inside use_mem_pool, with a whole free default
                    segment, a pending default block and a freeable graph pool
  graph_pending     a CUDA graph's output freed while used on a side stream, then a second
                    graph captured into the same pool: by capture_begin directly while the
                    free is pending, then through torch.cuda.graph (whose entry empties the
                    cache)
  graph_teardown    the graphs dropped while a block of their pool is pending, then
                    empty_cache()
  capture_stream    default-pool requests on another stream during a torch.cuda.graph
                    capture (the pool's filter excludes them), no memory limit
  capture_oom       per_process_memory_fraction 0.01: a default-pool request on another
                    stream during a capture that fits only once the cache is released, then
                    the same request after the capture
  mp_oom            per_process_memory_fraction 0.01: a MemPool request (inside
                    use_mem_pool) that fits only once the default pool's cache is released
  mp_oom_thread     per_process_memory_fraction 0.01: a default-pool request from another
                    thread while the main thread is inside use_mem_pool, then after
  held_two_pools    (held out) empty_cache() inside use_mem_pool with two freeable graph
                    pools and a whole free large and small default segment
  held_thread       (held out) empty_cache() from another thread while the main thread is
                    inside use_mem_pool, a freeable graph pool beside a free default segment
  held_rerelease    (held out) empty_cache() twice inside use_mem_pool: the second frees a
                    graph pool's segment that a pending block kept at the first
"""
import gc
import json
import os
import pickle
import subprocess
import sys
import threading
import time

import torch

MIB = 1 << 20
SLEEP = 1_000_000_000  # torch.cuda._sleep cycles: about 0.5 s at 1.98 GHz
FRACTION = 0.01        # the memory-limited workloads (PYTORCH_CUDA_ALLOC_CONF)
LIMITED = ("capture_oom", "mp_oom", "mp_oom_thread")
# `all` also records these variants: (name suffix, workloads, PYTORCH_CUDA_ALLOC_CONF, large
# block size in MiB): expandable segments, and a 6 MiB block (a split 20 MiB segment).
VARIANTS = [("_exp", ("default_pending", "mp_free_in", "mp_free_out", "mp_teardown",
                      "graph_pending", "graph_teardown"), "expandable_segments:True", 24),
            ("_6m", ("default_pending", "mp_free_in", "mp_free_out", "mp_teardown"), None, 6)]
LARGE = int(os.environ.get("XS_LARGE_MIB", "24")) * MIB  # the large block of the workloads


def empty(n):
    return torch.empty(n, dtype=torch.uint8, device="cuda")


def busy(side):
    """The side stream, after the current one's work, sleeps SLEEP cycles."""
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP)


def stats():
    s = torch.cuda.memory_stats()
    keys = ["reserved_bytes.all.peak", "reserved_bytes.all.current", "num_alloc_retries",
            "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free"]
    return {k: s.get(k) for k in keys}


def try_alloc(n, info, name):
    """A request that may run out of memory: its pointer, or the OOM noted in info."""
    try:
        t = empty(n)
        info[name] = {"ok": True, "ptr": t.data_ptr()}
        return t
    except torch.OutOfMemoryError as e:
        info[name] = {"ok": False, "error": str(e).split(". ")[0]}
        return None


def default_pending(info):
    side = torch.cuda.Stream()
    x, s = empty(LARGE), empty(256 << 10)
    info["x"], info["s"] = x.data_ptr(), s.data_ptr()
    busy(side)
    x.record_stream(side)
    s.record_stream(side)
    del x, s
    y, t = empty(LARGE), empty(256 << 10)  # the frees are pending: new blocks
    info["y"], info["t"] = y.data_ptr(), t.data_ptr()
    side.synchronize()
    z, u = empty(LARGE), empty(256 << 10)  # process_events returned x and s: reused
    info["z"], info["u"] = z.data_ptr(), u.data_ptr()
    return [y, t, z, u]


def mp_free_in(info):
    side = torch.cuda.Stream()
    pool = torch.cuda.MemPool()
    info["pool"] = list(pool.id)
    with torch.cuda.use_mem_pool(pool):
        x, s = empty(LARGE), empty(256 << 10)
        info["x"], info["s"] = x.data_ptr(), s.data_ptr()
        busy(side)
        x.record_stream(side)
        s.record_stream(side)
        del x, s  # deferred: a capture (this use_mem_pool) is underway
        y, t = empty(LARGE), empty(256 << 10)
        info["y"], info["t"] = y.data_ptr(), t.data_ptr()
    d = empty(512)  # no capture now: the deferred events are recorded (side still busy)
    info["d"] = d.data_ptr()
    side.synchronize()
    d2 = empty(512)  # process_events: the frees complete
    with torch.cuda.use_mem_pool(pool):
        z, u = empty(LARGE), empty(256 << 10)
        info["z"], info["u"] = z.data_ptr(), u.data_ptr()
    return [pool, y, t, z, u, d, d2]


def mp_free_out(info):
    side = torch.cuda.Stream()
    pool = torch.cuda.MemPool()
    info["pool"] = list(pool.id)
    with torch.cuda.use_mem_pool(pool):
        x, s = empty(LARGE), empty(256 << 10)
    info["x"], info["s"] = x.data_ptr(), s.data_ptr()
    busy(side)
    x.record_stream(side)
    s.record_stream(side)
    del x, s  # no capture: events inserted now
    d = empty(512)  # process_events: still pending
    with torch.cuda.use_mem_pool(pool):
        y, t = empty(LARGE), empty(256 << 10)  # process_events skipped: new blocks
    info["y"], info["t"] = y.data_ptr(), t.data_ptr()
    side.synchronize()
    d2 = empty(512)  # the frees complete
    with torch.cuda.use_mem_pool(pool):
        z, u = empty(LARGE), empty(256 << 10)
    info["z"], info["u"] = z.data_ptr(), u.data_ptr()
    return [pool, y, t, z, u, d, d2]


def mp_teardown(info):
    side = torch.cuda.Stream()
    pool = torch.cuda.MemPool()
    info["pool"] = list(pool.id)
    with torch.cuda.use_mem_pool(pool):
        x, w, s = empty(LARGE), empty(40 * MIB), empty(256 << 10)
    info["x"], info["w"], info["s"] = x.data_ptr(), w.data_ptr(), s.data_ptr()
    d = empty(30 * MIB)  # a whole free default segment at the teardown
    del d
    busy(side)
    x.record_stream(side)
    del x, w, s  # x pending, w and s free
    del pool  # releasePool, emptyCache(pool): x's event too?
    gc.collect()
    info["after_teardown"] = stats()
    e = empty(512)
    side.synchronize()
    e2 = empty(512)
    torch.cuda.empty_cache()
    info["after_empty"] = stats()
    return [e, e2]


def mp_empty(info):
    side = torch.cuda.Stream()
    pool = torch.cuda.MemPool()
    info["pool"] = list(pool.id)
    with torch.cuda.use_mem_pool(pool):
        x = empty(LARGE)
    q = empty(26 * MIB)  # default pool
    info["x"], info["q"] = x.data_ptr(), q.data_ptr()
    busy(side)
    x.record_stream(side)
    q.record_stream(side)
    del x, q
    torch.cuda.empty_cache()  # synchronize_and_free_events: both complete; q's released
    info["after_empty"] = stats()
    with torch.cuda.use_mem_pool(pool):
        z = empty(LARGE)
    info["z"] = z.data_ptr()
    return [pool, z]


def small_graph(pool=None):
    x = empty(8 * MIB)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=pool):
        y = x.mul(2)
    return g, x, y


def mp_empty_inside(info):
    side = torch.cuda.Stream()
    g, gx, gy = small_graph()
    info["graph_pool"] = list(g.pool())
    del g, gy  # the graph's pool is freeable, its segment free
    gc.collect()
    pool = torch.cuda.MemPool()
    info["pool"] = list(pool.id)
    c = empty(30 * MIB)
    del c  # a whole free default segment
    q = empty(26 * MIB)
    busy(side)
    q.record_stream(side)
    del q  # a pending default block
    with torch.cuda.use_mem_pool(pool):
        m = empty(4 * MIB)
        torch.cuda.empty_cache()  # a capture is underway: the default pool kept, no sync?
        info["inside"] = stats()
    side.synchronize()
    d = empty(512)
    torch.cuda.empty_cache()
    info["after"] = stats()
    return [pool, m, d, gx]


def graph_pending(info):
    side = torch.cuda.Stream()
    g, x, y = small_graph()
    pool = g.pool()
    info["graph_pool"] = list(pool)
    info["y"] = y.data_ptr()
    busy(side)
    y.record_stream(side)
    del y  # pending in the graph's pool
    g2 = torch.cuda.CUDAGraph()
    cs = torch.cuda.Stream()
    cs.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(cs):
        g2.capture_begin(pool=pool)  # no empty_cache: y still pending
        y2 = x.mul(3)
        g2.capture_end()
    torch.cuda.current_stream().wait_stream(cs)
    info["y2"] = y2.data_ptr()
    busy(side)
    y2.record_stream(side)
    del y2
    g3 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g3, pool=pool):  # synchronize + empty_cache first: y2 completes
        y3 = x.mul(4)
    info["y3"] = y3.data_ptr()
    return [g, g2, g3, x, y3]


def graph_teardown(info):
    side = torch.cuda.Stream()
    g, x, y = small_graph()
    info["graph_pool"] = list(g.pool())
    g2, x2, y2 = small_graph(g.pool())
    info["y"], info["y2"] = y.data_ptr(), y2.data_ptr()
    busy(side)
    y.record_stream(side)
    del y, y2  # y pending, y2 free
    del g, g2  # the pool is freeable
    gc.collect()
    torch.cuda.empty_cache()  # synchronize_and_free_events, then the pool's segments
    info["after_empty"] = stats()
    return [x, x2]


def capture_stream(info):
    other = torch.cuda.Stream()
    x = empty(8 * MIB)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode="relaxed"):
        y = x.mul(2)
        with torch.cuda.stream(other):
            a = empty(6 * MIB)   # default pool, stream `other`: not captured
            b = empty(300 << 10)
        info["a"], info["b"] = a.data_ptr(), b.data_ptr()
        del a
        z = x.mul(3)
    with torch.cuda.stream(other):
        a2 = empty(6 * MIB)  # the default pool's cached block of `other`
    info["a2"] = a2.data_ptr()
    return [g, x, y, z, b, a2]


def capture_oom(info):
    other = torch.cuda.Stream()
    x = empty(8 * MIB)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode="relaxed"):  # its entry empties the cache
        y = x.mul(2)
        with torch.cuda.stream(other):
            c = empty(700 * MIB)
            del c  # cached: a whole free default segment of `other`
            b = try_alloc(900 * MIB, info, "during")  # fits only once the cache is released
        del b
    with torch.cuda.stream(other):
        b2 = try_alloc(900 * MIB, info, "after")
    return [g, x, y, b2]


def mp_oom(info):
    c = empty(700 * MIB)
    del c  # cached in the default pool
    pool = torch.cuda.MemPool()
    info["pool"] = list(pool.id)
    with torch.cuda.use_mem_pool(pool):
        b = try_alloc(900 * MIB, info, "during")
    del b
    b2 = try_alloc(900 * MIB, info, "after")
    return [pool, b2]


def mp_oom_thread(info):
    c = empty(700 * MIB)
    del c
    pool = torch.cuda.MemPool()
    info["pool"] = list(pool.id)
    keep = []

    def other(name):
        t = try_alloc(900 * MIB, info, name)
        keep.append(t)

    with torch.cuda.use_mem_pool(pool):
        m = empty(4 * MIB)  # the pool's, from this thread
        th = threading.Thread(target=other, args=("during",))
        th.start()
        th.join()
    keep.clear()
    th = threading.Thread(target=other, args=("after",))
    th.start()
    th.join()
    return [pool, m, keep]


def held_two_pools(info):
    g1, x1, y1 = small_graph()
    g2, x2, y2 = small_graph()  # a second graph with a pool of its own
    info["graph_pools"] = [list(g1.pool()), list(g2.pool())]
    del g1, y1, g2, y2  # both pools freeable, each with a whole free segment
    gc.collect()
    c, sm = empty(50 * MIB), empty(100 << 10)
    del c, sm  # a whole free large and small default segment
    pool = torch.cuda.MemPool()
    info["pool"] = list(pool.id)
    with torch.cuda.use_mem_pool(pool):
        m = empty(3 * MIB)
        torch.cuda.empty_cache()  # the two graph pools' segments only
        info["inside"] = stats()
    torch.cuda.empty_cache()  # now the default pool's
    info["after"] = stats()
    return [pool, m, x1, x2]


def held_thread(info):
    g, x, y = small_graph()
    info["graph_pool"] = list(g.pool())
    del g, y
    gc.collect()
    c = empty(30 * MIB)
    del c
    pool = torch.cuda.MemPool()
    info["pool"] = list(pool.id)
    with torch.cuda.use_mem_pool(pool):
        m = empty(3 * MIB)
        th = threading.Thread(target=torch.cuda.empty_cache)  # another thread's call
        th.start()
        th.join()
        info["inside"] = stats()
    torch.cuda.empty_cache()
    info["after"] = stats()
    return [pool, m, x]


def held_rerelease(info):
    side = torch.cuda.Stream()
    g, x, y = small_graph()
    info["graph_pool"] = list(g.pool())
    g2, x2, y2 = small_graph(g.pool())  # y2 takes the 12 MiB rest of y's 20 MiB segment
    busy(side)
    y.record_stream(side)
    del g, g2, y, y2  # freeable; y pending, y2 free
    gc.collect()
    c = empty(30 * MIB)
    del c
    pool = torch.cuda.MemPool()
    info["pool"] = list(pool.id)
    with torch.cuda.use_mem_pool(pool):
        m = empty(3 * MIB)
        torch.cuda.empty_cache()  # frees nothing: pending y keeps its segment (no sync inside)
        info["inside1"] = stats()
    side.synchronize()
    d = empty(512)  # y's free completes
    with torch.cuda.use_mem_pool(pool):
        torch.cuda.empty_cache()  # y's segment now, the default pool's still kept
        info["inside2"] = stats()
    torch.cuda.empty_cache()
    info["after"] = stats()
    return [pool, m, d, x, x2]


WORK = {f.__name__: f for f in [default_pending, mp_free_in, mp_free_out, mp_teardown, mp_empty,
                                mp_empty_inside, graph_pending, graph_teardown, capture_stream,
                                capture_oom, mp_oom, mp_oom_thread, held_two_pools, held_thread,
                                held_rerelease]}
HELD = ("held_two_pools", "held_thread", "held_rerelease")  # recorded after the rule was fitted


def run(work, outdir, name):
    info = dict(workload=work, name=name, large=LARGE, torch=torch.__version__,
                cuda=torch.version.cuda, device=torch.cuda.get_device_name(),
                total=torch.cuda.get_device_properties(0).total_memory,
                fraction=torch.cuda.get_per_process_memory_fraction())
    torch.cuda.memory._record_memory_history(max_entries=100_000, context="all", stacks="all")
    t0 = time.time()
    keep = WORK[work](info)
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    del keep
    with open(os.path.join(outdir, name + ".pickle"), "wb") as fh:
        pickle.dump(snap, fh)
    tr = snap["device_traces"][0]
    acts = {}
    for e in tr:
        acts[e["action"]] = acts.get(e["action"], 0) + 1
    info.update(seconds=round(time.time() - t0, 2), stats_end=stats(), trace_actions=acts,
                allocator_settings=snap.get("allocator_settings"),
                pools=sorted({str(sg.get("segment_pool_id")) for sg in snap["segments"]}))
    with open(os.path.join(outdir, name + ".json"), "w") as fh:
        json.dump(info, fh, indent=1, default=str)
    print(json.dumps({k: info.get(k) for k in ("name", "seconds", "trace_actions", "during",
                                               "after", "fraction")}, default=str), flush=True)


def main():
    modes = ("all", "held")
    if len(sys.argv) not in (3, 4) or (sys.argv[1] not in WORK and sys.argv[1] not in modes):
        print(__doc__, file=sys.stderr)
        return 2
    work, outdir = sys.argv[1], sys.argv[2]
    if work not in modes:
        run(work, outdir, sys.argv[3] if len(sys.argv) == 4 else work)
        return 0
    runs = [(w, w, f"per_process_memory_fraction:{FRACTION}" if w in LIMITED else None, 24)
            for w in WORK if (w in HELD) == (work == "held")]
    if work == "all":
        runs += [(w, w + suf, conf, large) for suf, ws, conf, large in VARIANTS for w in ws]
    rc = 0
    for w, name, conf, large in runs:
        env = dict(os.environ, TORCH_SYMBOLIZE_MODE="dladdr", XS_LARGE_MIB=str(large))
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        try:
            p = subprocess.run([sys.executable, os.path.abspath(__file__), w, outdir, name],
                               env=env, timeout=90)
            code = p.returncode
        except subprocess.TimeoutExpired:
            code = "timed out"
        if code:
            print(f"record_xstream: {name} exited {code}", file=sys.stderr, flush=True)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
