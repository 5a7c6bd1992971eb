#!/usr/bin/env python3
"""check_torch_replay.py [ALLOCSIM] - replay/torch_replay.py's pure-Python parts, without
torch or a GPU (make test, through tests/test_report.c):

1. the text reader: versions 1 and 2, an ALLOC's pool=K and an empty_cache's, and the
   errors for a pool outside the header's `meta pools`;
2. load_trace through `allocsim convert` on the private-pool probe
   (tests/data/torch-2.11-h200-pools/README.md: an MLP captured in a CUDA graph, whose
   capture starts with empty_cache(), and two tensors of a torch.cuda.MemPool): 16
   allocations in its two pools, the graph's 14 on the capture's stream, one empty_cache()
   before the capture, and the same events as the snapshot's own device_traces otherwise;
3. one_run with a stand-in for the torch module that logs what the harness asks of it:
   each pool's allocations inside use_mem_pool of one MemPool of that run, on their
   stream; the pool's MemPool ended at its EMPTY_CACHE and no sooner; empty_cache() where
   the trace has it; at the run's end the tensors freed before the pools are ended; an OOM
   inside a pool's context leaves the context;
4. the same with --pools capture: a pool allocated on a side stream (a graph's) inside
   real captures (CUDAGraph.capture_begin with the MemPool's id, on that stream), each
   ended before the next event that is not a FREE or the same pool's allocation on that
   stream, its graphs ended before its MemPool at its EMPTY_CACHE, a default-stream pool
   still in use_mem_pool, never a capture underway at empty_cache(); the holder graph's
   bytes added to each capacity's memory fraction and taken off the reported reserved;
   an OOM and a refused CUDA call inside a capture.
Prints `N passed, N failed` and exits 1 on a failure."""
import contextlib
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "replay"))
import torch_replay  # noqa: E402

PROBE = os.path.join(ROOT, "tests/data/torch-2.11-h200-pools/graph_probe.pickle.zst")
passed = failed = 0


def check(what, ok):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAILED: {what}")


# ---- a stand-in for torch: a log of the calls, tensors that log their end ----------------

class FakeTorch:
    uint8 = "uint8"

    def __init__(self, total=1 << 30):
        self.log = []
        self.total, self.limit, self.live = total, total, 0
        self.stream_now, self.pool_now = 0, []
        self.capturing = None  # (pool id, stream) of the capture underway
        self.refuse = None     # a size whose allocation fails with a non-OOM error
        self.stats = {}
        self.entries = []
        fake = self

        class OutOfMemoryError(RuntimeError):
            pass

        class Stream:
            n = 0

            def __init__(self):
                Stream.n += 1
                self.sid = Stream.n

        class MemPool:
            n = 0

            def __init__(self):
                MemPool.n += 1
                self.pid = MemPool.n
                fake.log.append(("mempool", self.pid))

            @property
            def id(self):
                return (0, self.pid)

            def __del__(self):
                fake.log.append(("mempool_end", self.pid))

        class CUDAGraph:
            n = 0

            def __init__(self):
                CUDAGraph.n += 1
                self.gid = CUDAGraph.n

            def capture_begin(self, pool=None, capture_error_mode="global"):
                assert fake.capturing is None, "a capture inside a capture"
                assert fake.stream_now != 0, "a capture on the default stream"
                pid = pool[1] if pool else 0
                fake.capturing = (pid, fake.stream_now)
                fake.log.append(("capture_begin", self.gid, pid, fake.stream_now,
                                 capture_error_mode))

            def capture_end(self):
                assert fake.capturing and fake.capturing[1] == fake.stream_now
                fake.capturing = None
                fake.log.append(("capture_end", self.gid))

            def __del__(self):
                fake.log.append(("graph_end", self.gid))

        @contextlib.contextmanager
        def stream(s):
            old, fake.stream_now = fake.stream_now, s.sid
            try:
                yield
            finally:
                fake.stream_now = old

        @contextlib.contextmanager
        def use_mem_pool(p):
            fake.pool_now.append(p.pid)
            try:
                yield
            finally:
                fake.pool_now.pop()

        class Memory:
            @staticmethod
            def _record_memory_history(**kw):
                pass

            @staticmethod
            def _snapshot():
                return {"device_traces": [list(fake.entries)]}

        class Cuda:
            pass

        c = Cuda()
        c.OutOfMemoryError = OutOfMemoryError
        c.Stream, c.MemPool, c.stream, c.use_mem_pool = Stream, MemPool, stream, use_mem_pool
        c.CUDAGraph = CUDAGraph
        c.memory = Memory
        c.synchronize = lambda: None
        c.reset_peak_memory_stats = lambda: None
        c.empty_cache = lambda: fake.log.append(
            ("empty_cache",) if fake.capturing is None else ("empty_cache_in_capture",))
        c.set_per_process_memory_fraction = lambda f: setattr(fake, "limit", int(f * total))
        c.memory_stats = lambda: dict(fake.stats)
        self.cuda = c

    def empty(self, size, dtype=None, device=None):
        pool = self.pool_now[-1] if self.pool_now else 0
        if self.capturing and self.capturing[1] == self.stream_now:
            pool = self.capturing[0]  # the capture's stream filter
        if size == self.refuse:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        if self.live + size > self.limit:
            self.log.append(("oom", size, pool))
            raise self.cuda.OutOfMemoryError("fake")
        self.live += size
        self.entries.append({"action": "alloc", "addr": 0, "size": size})
        self.log.append(("alloc", size, self.stream_now, pool))
        return FakeTensor(self, size)


class FakeTensor:
    def __init__(self, fake, size):
        self.fake, self.size = fake, size

    def __del__(self):
        self.fake.live -= self.size
        self.fake.log.append(("free", self.size))


# ---- 1. the text reader -------------------------------------------------------------------

TEXT = """allocsim-text 2
meta pools=2
frame 0 7 train.py step
site 1 0
alloc 0 100 site=1
alloc 1 200 pool=1 s=0x10
alloc 2 300 pool=1 s=0x10
free_req 1
free 1
empty_cache pool=1
alloc 3 400 pool=2
mark step 1
empty_cache
free 0
"""


def reader():
    evs, meta = torch_replay.events_from_text(TEXT, "t.txt")
    check("text v2 events", evs == [
        ("a", 0, 100, 0, 0), ("a", 1, 200, 16, 1), ("a", 2, 300, 16, 1), ("r", 1), ("f", 1),
        ("e", 1), ("a", 3, 400, 0, 2), ("m",), ("e", 0), ("f", 0)])
    check("meta pools", meta.get("pools") == "2")
    v1, _ = torch_replay.events_from_text("allocsim-text 1\nalloc 0 5\nempty_cache\n", "v1")
    check("text v1", v1 == [("a", 0, 5, 0, 0), ("e", 0)])
    for bad, why in (("allocsim-text 1\nalloc 0 5 pool=1\n", "outside 1..0"),
                     ("allocsim-text 2\nmeta pools=1\nempty_cache pool=2\n", "outside 1..1"),
                     ("allocsim-text 3\n", "line 1")):
        try:
            torch_replay.events_from_text(bad, "bad.txt")
            check(f"refused: {bad!r}", False)
        except torch_replay.TraceError as ex:
            check(f"refused with '{why}': {ex}", why in str(ex) and "bad.txt" in str(ex))


# ---- 2. the probe through the importer ----------------------------------------------------

def probe(allocsim):
    evs, _ = torch_replay.load_trace(PROBE, allocsim)
    pools = {}
    for e in evs:
        if e[0] == "a" and e[4]:
            pools.setdefault(e[4], []).append(e)
    check("16 allocations in private pools", sum(map(len, pools.values())) == 16)
    graph = max(pools.values(), key=len)
    check("the graph's 14 on one stream, not the default one",
          len(graph) == 14 and len({e[3] for e in graph}) == 1 and graph[0][3] != 0)
    empties = [i for i, e in enumerate(evs) if e[0] == "e"]
    first_graph = evs.index(graph[0])
    check("one empty_cache(), before the capture",
          len(empties) == 1 and evs[empties[0]] == ("e", 0) and empties[0] < first_graph)
    own, _ = torch_replay.load_trace(PROBE)  # the snapshot's device_traces: no pools
    same = [e[:4] if e[0] == "a" else e for e in evs if e[0] not in ("e", "m")]
    check("otherwise the snapshot's own events", same == [e[:4] if e[0] == "a" else e
                                                          for e in own])


# ---- 3. one_run against the stand-in ------------------------------------------------------

def replay():
    evs, _ = torch_replay.events_from_text(TEXT, "t.txt")
    fake = FakeTorch()
    run, _ = torch_replay.one_run(fake, evs, None, fake.total, False, None, True, 0)
    log = fake.log
    check("completed, 4 allocations", run["completed"] and run["allocs"] == 4)
    allocs = [x for x in log if x[0] == "alloc"]
    p1 = [x[3] for x in allocs if x[1] in (200, 300)]
    check("pool 1's two allocations in one MemPool, on their stream",
          len(set(p1)) == 1 and p1[0] != 0 and
          all(x[2] != 0 for x in allocs if x[1] in (200, 300)))
    check("the default pool's and pool 2's elsewhere",
          [x[3] for x in allocs if x[1] == 100] == [0] and
          [x[3] for x in allocs if x[1] == 400] not in ([0], [p1[0]]))
    at = {x: i for i, x in enumerate(log)}
    end1 = at.get(("mempool_end", p1[0]))
    check("pool 1 ended at its EMPTY_CACHE: after its block's free, before pool 2's alloc",
          end1 is not None and at[("free", 200)] < end1 < at[("alloc", 400, 0, 2)])
    ec = [i for i, x in enumerate(log) if x == ("empty_cache",)]
    check("empty_cache() where the trace has it (and at the run's start and end)",
          len(ec) == 3 and at[("alloc", 400, 0, 2)] < ec[1] < at[("free", 100)])
    end2 = at.get(("mempool_end", 2))
    check("at the end, the tensors freed before pool 2 ends",
          end2 is not None and at[("free", 300)] < end2 and at[("free", 400)] < end2 < ec[2])
    # an OOM inside a pool's context: a result, the context left, the pool ended after
    fake = FakeTorch()
    oom = [("a", 0, 600, 0, 0), ("a", 1, 500, 0, 1), ("f", 0)]
    run, _ = torch_replay.one_run(fake, oom, 1000, fake.total, False, None, True, 0)
    check("OOM in pool 1 at allocation 1", run["oom"] and run["oom_alloc"] == 1)
    check("its context left", fake.pool_now == [])
    check("its pool ended", ("mempool_end", 1) in fake.log)


# ---- 4. real captures (--pools capture) ----------------------------------------------------

CAPTURE = """allocsim-text 2
meta pools=2
alloc 0 100
alloc 1 200 pool=1 s=0x10
free 0
alloc 2 300 pool=1 s=0x10
alloc 3 50
alloc 4 400 pool=1 s=0x10
alloc 5 500 pool=2
free 1
free 2
free 4
empty_cache pool=1
alloc 6 600
empty_cache
"""


def capture():
    evs, _ = torch_replay.events_from_text(CAPTURE, "c.txt")
    torch_replay.cfg_pools = "capture"
    try:
        check("capture_pools: the side-stream pool alone", torch_replay.capture_pools(evs) == {1})
        fake = FakeTorch()
        fake.stats = {"reserved_bytes.all.current": 1 << 10, "allocated_bytes.all.current": 16}
        _, held = torch_replay.make_holder(fake)
        check("the holder: one empty capture on its own stream, its bytes read",
              held == (1 << 10, 16) and [x[0] for x in fake.log] ==
              ["capture_begin", "capture_end"] and fake.log[0][2] == 0)
        torch_replay.cfg_holder = held
        fake.log.clear()
        fake.stats = {"reserved_bytes.all.peak": 5000, "allocated_bytes.all.peak": 2116}
        run, _ = torch_replay.one_run(fake, evs, 4000, fake.total, False, None, True, 0)
        log = [x for x in fake.log if x[0] != "free"]
        check("completed, 7 allocations", run["completed"] and run["allocs"] == 7)
        check("the fraction is the capacity and the holder's bytes",
              abs(fake.limit - (4000 + 1024)) <= 1)
        check("reserved and allocated peaks without the holder's",
              run["peak_reserved"] == 5000 - 1024 and run["peak_allocated"] == 2100 and
              run["holder_reserved"] == 1024)
        begins = [x for x in log if x[0] == "capture_begin"]
        allocs = {x[1]: x for x in log if x[0] == "alloc"}
        check("pool 1 in two captures of MemPool 1's id on its stream, thread_local",
              len(begins) == 2 and {(x[2], x[4]) for x in begins} == {(1, "thread_local")} and
              all(x[3] == allocs[200][2] != 0 for x in begins))
        check("pool 1's allocations in the capture's pool, not use_mem_pool",
              all(allocs[z][3] == 1 for z in (200, 300, 400)))
        at = {x: i for i, x in enumerate(log)}
        check("a capture ends before a default-pool allocation, spans a FREE",
              at[("capture_end", begins[0][1])] < at[allocs[50]] < at[begins[1]] and
              at[begins[0]] < at[allocs[300]] < at[("capture_end", begins[0][1])])
        check("a default-stream pool in use_mem_pool, no capture underway",
              allocs[500][3] == 2 and at[("capture_end", begins[1][1])] < at[allocs[500]])
        ends = [at.get(("graph_end", x[1])) for x in begins]
        mp1 = at.get(("mempool_end", 1))
        check("pool 1's graphs end at its EMPTY_CACHE, before its MemPool",
              None not in ends and mp1 is not None and max(ends) < mp1 < at[allocs[600]])
        check("empty_cache() never under a capture",
              ("empty_cache_in_capture",) not in log and log.count(("empty_cache",)) == 3)
        # an OOM inside a capture: the capture ended, the OOM the run's result
        fake = FakeTorch()
        torch_replay.cfg_holder = (0, 0)
        run, _ = torch_replay.one_run(fake, evs, 350, fake.total, False, None, True, 0)
        check("OOM inside the capture at allocation 2, the capture ended",
              run["oom_alloc"] == 2 and fake.capturing is None and "error" not in run)
        # a refused CUDA call inside a capture: the run stops there and says so
        fake = FakeTorch()
        fake.refuse = 300
        run, _ = torch_replay.one_run(fake, evs, None, fake.total, False, None, True, 0)
        check("a refused call inside the capture: stopped at allocation 2, said",
              run["oom_alloc"] == 2 and "not permitted" in run.get("error", "") and
              fake.capturing is None)
    finally:
        torch_replay.cfg_pools, torch_replay.cfg_holder = "mempool", (0, 0)


def main():
    allocsim = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "AS_ALLOCSIM", os.path.join(ROOT, "build", "allocsim"))
    reader()
    probe(allocsim)
    replay()
    capture()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
