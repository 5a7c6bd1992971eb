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
   inside a pool's context leaves the context.
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

            def __del__(self):
                fake.log.append(("mempool_end", self.pid))

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
        c.memory = Memory
        c.synchronize = lambda: None
        c.reset_peak_memory_stats = lambda: None
        c.empty_cache = lambda: fake.log.append(("empty_cache",))
        c.set_per_process_memory_fraction = lambda f: setattr(fake, "limit", int(f * total))
        c.memory_stats = lambda: {}
        self.cuda = c

    def empty(self, size, dtype=None, device=None):
        pool = self.pool_now[-1] if self.pool_now else 0
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


def main():
    allocsim = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "AS_ALLOCSIM", os.path.join(ROOT, "build", "allocsim"))
    reader()
    probe(allocsim)
    replay()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
