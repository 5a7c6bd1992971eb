#!/usr/bin/env python3
"""torch_replay.py - replay an allocation trace through PyTorch's own CUDA allocator.

The method is the one that made the ground-truth key (tests/data/torch-2.11-h200/README.md):
each ALLOC is torch.empty(size, dtype=torch.uint8, device="cuda") and each FREE drops that
tensor; every allocator config runs in a fresh process with PYTORCH_CUDA_ALLOC_CONF set
("default" leaves it unset); each run follows empty_cache(), reset_peak_memory_stats() and
set_per_process_memory_fraction(allowed / total_memory) (1.0 uncapped); segment events are
read from the run's own snapshot trace (_record_memory_history). With --key-protocol a
warm-up and a timing replay run first in the same process, as they did for the key.

backend:cudaMallocAsync cannot be snapshotted and ignores the fraction for reservations,
so a capacity is enforced there by a ballast of cudaMalloc'd memory that leaves exactly
`capacity` bytes free, and the pool's ReservedMem/UsedMem (current, high) are read with
cudaMemPoolGetAttribute. --release-threshold sets cudaMemPoolAttrReleaseThreshold.

Harness variants, for the question of what the key's own harness did to the address space
(issue 17, PLACEMENT.md section 7): --keep-snapshots keeps every run's snapshot object alive
(with "last", each one until the next run's replaces it), --timing events times each run with
CUDA events instead of time.perf_counter, --pinned-bytes keeps a pinned host buffer from each
run's end, --load-late reads the trace after CUDA's initialisation, and --maps records the
process's /proc/self/maps (in full at the start, then what each moment of a run added and
removed: its start, the end of its replay, after its snapshot, after its teardown), so that a
host mapping inside cudaMalloc's address range can be seen.

Private pools and empty_cache(): an ALLOC of private pool k (a CUDA graph's or a
MemPool's, traces/FORMAT.md "Private pools") is made inside torch.cuda.use_mem_pool of the
run's own torch.cuda.MemPool for k (made at k's first ALLOC). Inside that context PyTorch's
captures_underway is not empty, as during the graph capture or use_mem_pool that made the
allocation, so the allocator serves it from the pool's own block pools and its OOM retry
releases nothing (policies/torch.c models the same). An EMPTY_CACHE calls
torch.cuda.empty_cache(); one of pool k drops the run's MemPool for k, whose destructor is
what a graph's or MemPool's end does (releasePool, then emptyCache of that pool); the
pools left at a run's end are dropped after its tensors.

Real captures (--pools capture): a pool whose allocations are on a side stream came from
a CUDA graph capture (a graph is captured on its own stream; a MemPool's use_mem_pool
routes a thread's allocations, on the default stream in the recordings). Its
allocations are then made inside a real capture instead: CUDAGraph.capture_begin(pool=
the MemPool's id, capture_error_mode="thread_local") on that stream, as cudagraph trees
capture, ended (capture_end) before the next event that is neither a FREE nor another
allocation of the same pool on the same stream; the run's graphs of pool k are dropped
at k's EMPTY_CACHE, before its MemPool (releasePool for each, then the MemPool's). The
allocator then sees the capture's own stream filter (cudaStreamGetCaptureInfo of the
allocating stream) instead of use_mem_pool's thread filter, and cudaMalloc runs under a
capture. torch.empty launches no kernel, so each graph is empty. A capture's first
registration of the RNG generator allocates its seed and offset (two 8-byte tensors,
CUDAGeneratorState::register_graph) in the default pool; the trace holds the recorded
capture's two already, so the worker registers the generator once, before the runs,
with an empty graph on a stream of its own that the trace never uses (the holder): its
2 MiB small segment is reserved through every run, and each run's memory fraction and
the reported reserved (peak, at the OOM) and allocated peak are shifted by exactly what
the holder holds (the report's "holder_reserved").

Reads: allocsim text (`allocsim-text` 1 and 2), torch snapshot pickles (.pickle or
zstd'd), and allocsim native traces. With --allocsim PATH a snapshot or native trace is
read through `allocsim convert`, so the events replayed are the simulator's (the
snapshot's private pools and the importer's inferred empty_cache() included); without it
a snapshot's own device_traces are read (no pools, no empty_cache: every allocation in
the default pool). Writes the allocsim JSON report (marked "measured": true) and a
--segments CSV run,alloc,event,action,addr,size.

Exit status: 0 when it ran (an OOM is a result), 1 on bad input or a failed run, 2 usage.
"""
import argparse
import contextlib
import ctypes
import json
import math
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time

VERSION = "0.1"
REPORT_SCHEMA = 3  # sim/report.h AS_REPORT_SCHEMA: the report contract of sim/REPORT.md
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class TraceError(Exception):
    pass


# ---- reading traces ---------------------------------------------------------------------

def zstd_decompress(data, path):
    try:
        import zstandard  # noqa: F401
        return zstandard.ZstdDecompressor().stream_reader(data).read()
    except ImportError:
        pass
    exe = shutil.which("zstd")
    if exe:
        r = subprocess.run([exe, "-dc"], input=data, capture_output=True)
        if r.returncode == 0:
            return r.stdout
        raise TraceError(f"{path}: zstd -d failed: {r.stderr.decode(errors='replace').strip()}")
    return zstd_ctypes(data, path)


def zstd_ctypes(data, path):
    """Streaming decompression through libzstd.so.1, for machines without zstd tools."""
    lib = None
    for name in ("libzstd.so.1", "libzstd.so"):
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        raise TraceError(f"{path}: zstd input but no zstandard module, zstd tool or libzstd")

    class Buf(ctypes.Structure):
        _fields_ = [("ptr", ctypes.c_void_p), ("size", ctypes.c_size_t), ("pos", ctypes.c_size_t)]

    lib.ZSTD_createDStream.restype = ctypes.c_void_p
    lib.ZSTD_decompressStream.restype = ctypes.c_size_t
    lib.ZSTD_decompressStream.argtypes = [ctypes.c_void_p, ctypes.POINTER(Buf), ctypes.POINTER(Buf)]
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
    lib.ZSTD_getErrorName.restype = ctypes.c_char_p
    lib.ZSTD_getErrorName.argtypes = [ctypes.c_size_t]
    lib.ZSTD_freeDStream.argtypes = [ctypes.c_void_p]
    ds = lib.ZSTD_createDStream()
    lib.ZSTD_initDStream(ctypes.c_void_p(ds))
    src = ctypes.create_string_buffer(data, len(data))
    inb = Buf(ctypes.cast(src, ctypes.c_void_p), len(data), 0)
    chunk = 1 << 20
    dst = ctypes.create_string_buffer(chunk)
    out = []
    while True:
        outb = Buf(ctypes.cast(dst, ctypes.c_void_p), chunk, 0)
        r = lib.ZSTD_decompressStream(ctypes.c_void_p(ds), ctypes.byref(outb), ctypes.byref(inb))
        if lib.ZSTD_isError(r):
            lib.ZSTD_freeDStream(ctypes.c_void_p(ds))
            raise TraceError(f"{path}: zstd: {lib.ZSTD_getErrorName(r).decode()}")
        out.append(dst.raw[:outb.pos])
        if inb.pos >= inb.size and outb.pos < chunk:
            break
    lib.ZSTD_freeDStream(ctypes.c_void_p(ds))
    return b"".join(out)


def events_from_snapshot(snap, path):
    """alloc / free_requested / free_completed of device_traces, as the key used them.

    A free_requested immediately followed by its free_completed is one FREE (as the key's
    events = allocs + frees count says); a free_requested whose completion comes later is
    a FREE_REQ, then a FREE at the free_completed. Frees of blocks allocated before the
    recording started are skipped and counted."""
    traces = snap.get("device_traces") if isinstance(snap, dict) else None
    if not traces:
        raise TraceError(f"{path}: not a memory snapshot (no device_traces)")
    dev = next((t for t in traces if t), [])
    live = {}  # addr -> id
    evs, nalloc, skipped = [], 0, 0
    pending_req = None
    for i, e in enumerate(dev):
        act = e.get("action")
        if act == "alloc":
            live[e["addr"]] = nalloc
            evs.append(("a", nalloc, int(e["size"]), int(e.get("stream", 0)), 0))
            nalloc += 1
        elif act == "free_requested":
            if e["addr"] in live:
                nxt = dev[i + 1] if i + 1 < len(dev) else None
                if not (nxt and nxt.get("action") == "free_completed" and nxt["addr"] == e["addr"]):
                    evs.append(("r", live[e["addr"]]))
        elif act == "free_completed":
            k = live.pop(e["addr"], None)
            if k is None:
                skipped += 1
                continue
            evs.append(("f", k))
    meta = {"source": "torch-snapshot", "skipped_frees": skipped}
    return evs, meta


def pool_param(words, npools):
    """The pool=K of an alloc or empty_cache line's parameters (0 when absent)."""
    k = 0
    for x in words:
        if x.startswith("pool="):
            k = int(x[5:])
            if not 1 <= k <= npools:
                raise ValueError(f"pool {k} outside 1..{npools} (meta pools)")
    return k


def events_from_text(text, path):
    """Events of an allocsim text trace (traces/FORMAT.md, versions 1 and 2; a version 2
    file's frame and site lines name call sites, which a replay does not need):
    ("a", id, size, stream, pool), ("f", id), ("r", id) for free_req, ("e", pool) for
    empty_cache (pool 0: empty_cache() itself), ("m",) for a mark."""
    lines = text.splitlines()
    if not lines or lines[0].split()[:1] != ["allocsim-text"] or \
            lines[0].split()[1:2] not in (["1"], ["2"]):
        raise TraceError(f"{path}: line 1: expected 'allocsim-text 1' or 'allocsim-text 2'")
    evs, meta, ids = [], {}, {}
    nalloc = 0
    npools = 0
    for ln, line in enumerate(lines[1:], start=2):
        s = line.split("#", 1)[0].strip() if not line.lstrip().startswith("mark") else line.strip()
        if not s:
            continue
        w = s.split()
        try:
            if w[0] == "meta":
                k, _, v = s[5:].partition("=")
                meta[k.strip()] = v.strip()
                if k.strip() == "pools":
                    npools = int(v)
            elif w[0] in ("frame", "site"):
                continue
            elif w[0] == "alloc":
                tid, size = w[1], int(w[2])
                stream = 0
                for x in w[3:]:
                    if x.startswith("s="):
                        stream = int(x[2:], 0)
                if size <= 0:
                    raise ValueError("size must be >= 1")
                ids[tid] = nalloc
                evs.append(("a", nalloc, size, stream, pool_param(w[3:], npools)))
                nalloc += 1
            elif w[0] in ("free", "free_req"):
                if w[1] not in ids:
                    raise ValueError(f"unknown id {w[1]}")
                k = ids[w[1]] if w[0] == "free_req" else ids.pop(w[1])
                evs.append(("f" if w[0] == "free" else "r", k))
            elif w[0] == "empty_cache":
                evs.append(("e", pool_param(w[1:], npools)))
            elif w[0] == "mark":
                evs.append(("m",))
            else:
                raise ValueError(f"unknown op '{w[0]}'")
        except (IndexError, ValueError) as ex:
            raise TraceError(f"{path}: line {ln}: {ex}")
    return evs, meta


def load_trace(path, allocsim=None):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] == ZSTD_MAGIC:
        data = zstd_decompress(data, path)
    if data.startswith(b"allocsim-text"):
        return events_from_text(data.decode("utf-8", errors="replace"), path)
    if data[:1] == b"\x80" and not allocsim:
        try:
            snap = pickle.loads(data)
        except Exception as ex:  # any unpickling failure is bad input
            raise TraceError(f"{path}: bad pickle: {ex}")
        return events_from_snapshot(snap, path)
    if allocsim:
        # the simulator's own reading of the trace: for a snapshot, its private pools and
        # the empty_cache() calls the importer infers (traces/snap_pools.c)
        with tempfile.TemporaryDirectory() as td:
            txt = os.path.join(td, "t.txt")
            r = subprocess.run([allocsim, "convert", path, txt], capture_output=True)
            if r.returncode != 0:
                raise TraceError(f"{path}: allocsim convert failed: {r.stderr.decode().strip()}")
            with open(txt) as f:
                return events_from_text(f.read(), path)
    raise TraceError(f"{path}: not a text trace or snapshot; give --allocsim to convert it")


# ---- the worker: one config, fresh process ------------------------------------------------

def find_cudart():
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if "libcudart.so" in line:
                    return ctypes.CDLL(line.split()[-1])
    except OSError:
        pass
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


class Ballast:
    """cudaMalloc'd memory that leaves `capacity` bytes free on the GPU."""

    def __init__(self, rt, capacity):
        self.rt, self.ptrs = rt, []
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        for _ in range(8):
            rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
            want = free.value - capacity
            if want < (2 << 20):
                break
            while want >= (2 << 20):
                n = min(want, 4 << 30) // (2 << 20) * (2 << 20)
                p = ctypes.c_void_p()
                if rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) != 0:
                    rt.cudaGetLastError()
                    break
                self.ptrs.append(p)
                want -= n
        rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
        self.effective = free.value

    def release(self):
        for p in self.ptrs:
            self.rt.cudaFree(p)
        self.ptrs = []


def pool_attrs(rt):
    """ReservedMem/UsedMem current and high of the device's default pool (cudaMallocAsync)."""
    if rt is None:
        return {}
    pool = ctypes.c_void_p()
    if rt.cudaDeviceGetDefaultMemPool(ctypes.byref(pool), 0) != 0:
        return {}
    out = {}
    # cudaMemPoolAttr: ReleaseThreshold 4, ReservedMemCurrent 5, ReservedMemHigh 6,
    # UsedMemCurrent 7, UsedMemHigh 8 (cuda_runtime_api.h, enum cudaMemPoolAttr)
    for name, code in (("release_threshold", 4), ("pool_reserved_current", 5),
                       ("pool_reserved_high", 6), ("pool_used_current", 7), ("pool_used_high", 8)):
        v = ctypes.c_uint64()
        if rt.cudaMemPoolGetAttribute(pool, code, ctypes.byref(v)) == 0:
            out[name] = v.value
    return out


def pool_reset_high(rt):
    pool = ctypes.c_void_p()
    if rt is None or rt.cudaDeviceGetDefaultMemPool(ctypes.byref(pool), 0) != 0:
        return
    zero = ctypes.c_uint64(0)
    rt.cudaMemPoolSetAttribute(pool, 6, ctypes.byref(zero))
    rt.cudaMemPoolSetAttribute(pool, 8, ctypes.byref(zero))


def pool_set_threshold(rt, thr):
    pool = ctypes.c_void_p()
    if rt is None or rt.cudaDeviceGetDefaultMemPool(ctypes.byref(pool), 0) != 0:
        return
    v = ctypes.c_uint64(thr)
    rt.cudaMemPoolSetAttribute(pool, 4, ctypes.byref(v))


def fraction_for(allowed, total):
    """The fraction f with int(f * total) == allowed, as the C++ computes allowed bytes."""
    f = allowed / total
    for _ in range(64):
        got = int(f * total)
        if got == allowed:
            break
        f = math.nextafter(f, 2.0 if got < allowed else 0.0)
    return min(f, 1.0)


class MapsLog:
    """/proc/self/maps over a process's life: the first read in full, then per moment the
    lines it added and removed (address range, permissions, offset and name)."""

    def __init__(self):
        self.last = None
        self.log = []

    @staticmethod
    def read():
        with open("/proc/self/maps") as f:
            return [ln.rstrip("\n") for ln in f]

    def mark(self, run, moment):
        now = self.read()
        if self.last is None:
            self.log.append({"run": run, "moment": moment, "full": now})
        else:
            old, new = set(self.last), set(now)
            self.log.append({"run": run, "moment": moment,
                             "added": [x for x in now if x not in old],
                             "removed": [x for x in self.last if x not in new]})
        self.last = now


cfg_maps = None          # a MapsLog with --maps
cfg_keep = None          # --keep-snapshots: the runs' snapshots kept (a list)
cfg_keep_mode = "all"
cfg_timing = "perf"
cfg_pinned = 0
cfg_pinned_keep = []
cfg_pools = "mempool"    # --pools: side-stream pools in MemPools, or in real captures
cfg_holder = (0, 0)      # (reserved, allocated) bytes the holder graph keeps (capture)


def capture_pools(evs):
    """The private pools replayed in real captures: those with an allocation on a side
    stream (empty unless --pools capture)."""
    if cfg_pools != "capture":
        return set()
    return {e[4] for e in evs if e[0] == "a" and e[4] and e[3] != 0}


class Captures:
    """The run's real captures: at most one underway (pool, stream, graph), and each
    pool's ended graphs, kept until the pool's EMPTY_CACHE or the run's end."""

    def __init__(self, torch, streams, pools):
        self.torch, self.streams, self.pools = torch, streams, pools
        self.cur = None
        self.graphs = {}
        self.error = None

    def enter(self, k, s):
        """Pool k's allocation on stream s is next: inside a capture of k on s."""
        if self.cur and self.cur[:2] == (k, s):
            return
        self.end()
        g = self.torch.cuda.CUDAGraph()
        with self.torch.cuda.stream(self.streams[s]):
            g.capture_begin(pool=self.pools[k].id, capture_error_mode="thread_local")
        self.cur = (k, s, g)

    def end(self):
        if not self.cur:
            return
        k, s, g = self.cur
        self.cur = None
        try:
            with self.torch.cuda.stream(self.streams[s]):
                g.capture_end()
        except RuntimeError as ex:  # after a failed allocation inside it: said in the run
            self.error = self.error or f"capture_end: {ex}"[:400]
        self.graphs.setdefault(k, []).append(g)

    def drop(self, k):
        """Pool k's graphs end (each releasePool), before its MemPool does."""
        self.end()
        self.graphs.pop(k, None)


def make_holder(torch):
    """The default generator registered once with an empty graph on a stream of its own,
    so that no capture of a run allocates its RNG state (see the docstring). Returns the
    graph and stream, to be kept, and the (reserved, allocated) bytes they hold."""
    stream = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        g.capture_begin(capture_error_mode="thread_local")
        g.capture_end()
    torch.cuda.synchronize()
    st = torch.cuda.memory_stats()
    return (g, stream), (st.get("reserved_bytes.all.current", 0),
                         st.get("allocated_bytes.all.current", 0))


def maps_mark(label, moment):
    if cfg_maps is not None:
        cfg_maps.mark(label, moment)


def one_run(torch, evs, cap, total, is_async, rt, record, label):
    """Replays evs once; returns the run dict and its segment rows (alloc, event, action,
    addr, size)."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    ballast = None
    if is_async:
        torch.cuda.set_per_process_memory_fraction(1.0)
        if cfg_threshold is not None:
            pool_set_threshold(rt, cfg_threshold)
        if rt is not None:
            pool = ctypes.c_void_p()
            rt.cudaDeviceGetDefaultMemPool(ctypes.byref(pool), 0)
            rt.cudaMemPoolTrimTo(pool, ctypes.c_size_t(0))
        pool_reset_high(rt)
        if cap is not None and rt is not None:
            ballast = Ballast(rt, cap)
    else:
        torch.cuda.set_per_process_memory_fraction(
            1.0 if cap is None else fraction_for(cap + cfg_holder[0], total))
    if record:
        # --history pytorch: _record_memory_history()'s own defaults (every entry's C++ and
        # Python stacks), which take far more host memory while the run goes
        ctx, stk = (None, "python") if cfg_history == "light" else ("all", "all")
        torch.cuda.memory._record_memory_history(enabled="all", context=ctx, stacks=stk,
                                                 max_entries=1 << 30)
    streams = {0: None}
    pools = {}  # private pool k -> this run's torch.cuda.MemPool
    in_capture = capture_pools(evs)
    caps = Captures(torch, streams, pools)
    live = {}
    ev_of_alloc = []
    requested = peak_requested = 0
    oom_alloc = oom_event = None
    nalloc = 0
    maps_mark(label, "start")
    if cfg_timing == "events":
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ev0.record()
    t0 = time.perf_counter()
    for i, e in enumerate(evs):
        op = e[0]
        if op == "a":
            _, k, size, s, pk = e
            ev_of_alloc.append(i)
            try:
                if s not in streams:
                    streams[s] = torch.cuda.Stream()
                if pk and pk not in pools:
                    pools[pk] = torch.cuda.MemPool()
                if pk in in_capture:
                    caps.enter(pk, s)
                else:
                    caps.end()
                with contextlib.ExitStack() as cx:
                    if streams[s] is not None:
                        cx.enter_context(torch.cuda.stream(streams[s]))
                    if pk and pk not in in_capture:
                        cx.enter_context(torch.cuda.use_mem_pool(pools[pk]))
                    t = torch.empty(size, dtype=torch.uint8, device="cuda")
            except torch.cuda.OutOfMemoryError:
                oom_alloc, oom_event = k, i
                break
            except RuntimeError as ex:
                if not caps.cur:
                    raise
                # a CUDA call refused under the capture: not an OOM; the run stops, says so
                caps.error = f"allocation {k}: {ex}"[:400]
                oom_alloc, oom_event = k, i
                break
            live[k] = (t, size)
            requested += size
            peak_requested = max(peak_requested, requested)
            nalloc += 1
        elif op == "f":
            t = live.pop(e[1], None)
            if t is not None:
                requested -= t[1]
            del t
        elif op == "e":
            caps.end()  # empty_cache() frees memory: never under a capture
            if e[1]:
                # the pool's end: its graphs' releasePool, then ~MemPool: releasePool and
                # emptyCache of that pool
                caps.drop(e[1])
                pools.pop(e[1], None)
            else:
                torch.cuda.empty_cache()
    caps.end()
    wall = time.perf_counter() - t0
    if cfg_timing == "events":
        ev1.record()
        ev1.synchronize()
        wall = ev0.elapsed_time(ev1) / 1000.0
    torch.cuda.synchronize()
    maps_mark(label, "end")
    if cfg_pinned:
        cfg_pinned_keep.append(torch.empty(cfg_pinned, dtype=torch.uint8, pin_memory=True))
    st = torch.cuda.memory_stats()
    run = {
        "label": label,
        "capacity": cap,
        "completed": oom_alloc is None,
        "oom_event": oom_event,
        "oom_alloc": oom_alloc,
        "oom_size": evs[oom_event][2] if oom_event is not None else None,
        "oom_reserved": st.get("reserved_bytes.all.current") if oom_alloc is not None else None,
        "oom_allocated": st.get("allocated_bytes.all.current") if oom_alloc is not None else None,
        "oom": oom_alloc is not None,
        "allocs": nalloc,
        "peak_requested": peak_requested,
        "peak_allocated": st.get("allocated_bytes.all.peak"),
        "peak_reserved": st.get("reserved_bytes.all.peak"),
        "num_alloc_retries": st.get("num_alloc_retries"),
        "num_device_alloc": st.get("num_device_alloc"),
        "num_device_free": st.get("num_device_free"),
        "wall_s": wall,
        "events_per_second": (i + 1) / wall if wall > 0 else None,
        "measured": True,
    }
    if cfg_holder[0] and in_capture:
        hr, ha = cfg_holder
        run["holder_reserved"] = hr
        for key, by in (("peak_reserved", hr), ("oom_reserved", hr), ("peak_allocated", ha),
                        ("oom_allocated", ha)):
            if run[key] is not None:
                run[key] -= by
    if caps.error:
        run["error"] = caps.error
    pa = run["peak_allocated"] or 0
    pr = run["peak_reserved"] or 0
    run["fragmentation"] = 1 - pa / pr if pr else 0.0
    rows = []
    if record:
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        if cfg_keep is not None:
            # "last": the previous run's snapshot lives until this one replaces it, as in a
            # loop that assigns each run's snapshot to one variable
            if cfg_keep_mode == "last":
                cfg_keep.clear()
            cfg_keep.append(snap)
        dev = next((t for t in snap["device_traces"] if t), [])
        seen = 0
        nres = nrel = 0
        for te in dev:
            a = te["action"]
            if a == "alloc":
                seen += 1
            elif a.startswith("segment_"):
                ev = ev_of_alloc[seen] if seen < len(ev_of_alloc) else len(evs)
                rows.append((seen, ev, a, te["addr"], te["size"]))
                if a in ("segment_alloc", "segment_map"):
                    nres += 1
                else:
                    nrel += 1
        run["device_reserves"], run["device_releases"] = nres, nrel
        if seen != nalloc:
            run["warning"] = f"snapshot has {seen} alloc entries for {nalloc} allocations"
    if is_async:
        run.update(pool_attrs(rt))
        run["peak_reserved"] = run.get("pool_reserved_high", run["peak_reserved"])
        run["peak_allocated"] = run.get("pool_used_high", run["peak_allocated"])
        if ballast is not None:
            run["effective_capacity"] = ballast.effective
    if oom_alloc is not None and cap is None:
        run["hit_device_limit"] = True
    maps_mark(label, "snapshot")
    live.clear()
    caps.graphs.clear()  # the graphs' releasePool before their MemPools'
    pools.clear()  # each pool's segments go back as its MemPool ends
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    if ballast is not None:
        ballast.release()
    maps_mark(label, "teardown")
    return run, rows


cfg_threshold = None
cfg_history = "light"


def worker(args):
    global cfg_threshold, cfg_history, cfg_maps, cfg_keep, cfg_keep_mode, cfg_timing, cfg_pinned
    global cfg_pools, cfg_holder
    cfg_pools = args.pools
    cfg_history = args.history
    cfg_maps = MapsLog() if args.maps else None
    cfg_keep = [] if args.keep_snapshots else None
    cfg_keep_mode = args.keep_snapshots
    cfg_timing, cfg_pinned = args.timing, args.pinned_bytes
    import torch
    maps_mark("process", "imported")
    if not args.load_late:
        evs, meta = load_trace(args.trace, args.allocsim)
    torch.cuda.init()
    torch.cuda.synchronize()
    if args.load_late:
        evs, meta = load_trace(args.trace, args.allocsim)
    maps_mark("process", "initialised")
    total = torch.cuda.get_device_properties(0).total_memory
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    is_async = "cudaMallocAsync" in conf
    rt = find_cudart()
    cfg_threshold = args.release_threshold
    if is_async and rt is not None:
        for fn in ("cudaMalloc", "cudaFree", "cudaMemGetInfo", "cudaDeviceGetDefaultMemPool",
                   "cudaMemPoolGetAttribute", "cudaMemPoolSetAttribute", "cudaMemPoolTrimTo",
                   "cudaGetLastError"):
            getattr(rt, fn).restype = ctypes.c_int
    out = {"total_memory": total, "torch": torch.__version__, "conf": conf or "default",
           "runs": [], "segments": []}
    holder = None
    if capture_pools(evs) and not is_async:
        import warnings
        # torch.empty launches nothing: every capture is empty, and PyTorch says so
        warnings.filterwarnings("ignore", message=".*CUDA Graph is empty.*")
        holder, cfg_holder = make_holder(torch)  # kept to the worker's end
        out["holder"] = {"reserved": cfg_holder[0], "allocated": cfg_holder[1]}
    record = not is_async
    if args.key_protocol:
        for label in ("warmup", "timing"):
            r, _ = one_run(torch, evs, None, total, is_async, rt, False, label)
    for n, c in enumerate(args.caps):
        cap = None if c == "none" else int(c)
        r, rows = one_run(torch, evs, cap, total, is_async, rt, record, n)
        r["label"] = "uncapped" if cap is None else "cap"
        out["runs"].append(r)
        out["segments"].append(rows)
    if cfg_maps is not None:
        out["maps"] = cfg_maps.log
    with open(args.worker_out, "w") as f:
        json.dump(out, f)


# ---- the driver ------------------------------------------------------------------------

def spec_of(conf):
    return "torch" if conf == "default" else conf


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--conf", action="append", help="PYTORCH_CUDA_ALLOC_CONF ('default' = unset)")
    ap.add_argument("--cap", action="append", help="capacity in bytes (allowed_bytes), or 'none'")
    ap.add_argument("--key-protocol", action="store_true",
                    help="warm-up and timing replays first in each process, as the key did")
    ap.add_argument("--json", help="write the report here (default stdout)")
    ap.add_argument("--segments", help="write run,alloc,event,action,addr,size here")
    ap.add_argument("--allocsim", help="allocsim binary, to convert native traces")
    ap.add_argument("--release-threshold", type=lambda s: int(s, 0),
                    help="cudaMallocAsync pool release threshold (bytes)")
    ap.add_argument("--history", choices=("light", "pytorch"), default="light",
                    help="memory history recorded without stacks (light, default) or with "
                         "PyTorch's defaults (context and stacks 'all')")
    ap.add_argument("--host-heap", choices=("brk", "default"), default="brk",
                    help="the worker's host memory from the brk heap alone (default), or "
                         "Python's and glibc's defaults (mmap'd arenas, as the key's runs had)")
    ap.add_argument("--keep-snapshots", nargs="?", const="all", choices=("all", "last"),
                    help="keep every run's snapshot object alive to the process's end (all), "
                         "or each one until the next run's replaces it (last)")
    ap.add_argument("--timing", choices=("perf", "events"), default="perf",
                    help="time each run with time.perf_counter (default) or CUDA events")
    ap.add_argument("--pinned-bytes", type=int, default=0,
                    help="keep a pinned host buffer of this many bytes from each run's end")
    ap.add_argument("--load-late", action="store_true",
                    help="read the trace after CUDA's initialisation instead of before")
    ap.add_argument("--maps", help="write the worker's /proc/self/maps log here (JSON)")
    ap.add_argument("--pools", choices=("mempool", "capture"), default="mempool",
                    help="a private pool's allocations inside use_mem_pool of a MemPool "
                         "(default), or, for a pool allocated on a side stream (a graph's), "
                         "inside real CUDA graph captures on that stream")
    ap.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.caps = args.cap or ["none"]
    for c in args.caps:
        if c != "none" and not c.isdigit():
            ap.error(f"--cap {c}: bytes or 'none'")
    if args.worker_out:
        try:
            worker(args)
        except TraceError as ex:
            print(f"torch_replay: {ex}", file=sys.stderr)
            return 1
        return 0
    try:
        evs, meta = load_trace(args.trace, args.allocsim)
    except (TraceError, OSError) as ex:
        print(f"torch_replay: {ex}", file=sys.stderr)
        return 1
    nalloc = sum(1 for e in evs if e[0] == "a")
    req = peak_req = 0
    sizes = {}
    for e in evs:
        if e[0] == "a":
            sizes[e[1]] = e[2]
            req += e[2]
            peak_req = max(peak_req, req)
        elif e[0] == "f":
            req -= sizes.pop(e[1], 0)
    # allocsim's report schema (sim/REPORT.md): one trace object in "traces", runs that
    # name it by index and carry their own "run" index (that of --segments).
    report = {"allocsim": VERSION, "schema": REPORT_SCHEMA, "measured": True,
              "tool": "torch_replay.py",
              "traces": [{"trace": 0, "file": args.trace, "format": None, "events": len(evs),
                          "allocs": nalloc, "peak_requested": peak_req, "meta": meta}],
              "runs": []}
    seg_rows = []
    maps_of = []
    for conf in args.conf or ["default"]:
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if args.host_heap == "brk":
            # The host's own allocations from the brk heap only, never from mmap: a mapping
            # made while a run holds segments lands in a gap of cudaMalloc's address space
            # (PLACEMENT.md section 6a) and, kept, moves the later runs' segments.
            env.update(PYTHONMALLOC="malloc", MALLOC_MMAP_MAX_="0", MALLOC_ARENA_MAX="1")
        if conf != "default":
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tf:
            wout = tf.name
        cmd = [sys.executable, os.path.abspath(__file__), args.trace, "--worker-out", wout]
        for c in args.caps:
            cmd += ["--cap", c]
        if args.key_protocol:
            cmd.append("--key-protocol")
        if args.allocsim:
            cmd += ["--allocsim", args.allocsim]
        if args.release_threshold is not None:
            cmd += ["--release-threshold", str(args.release_threshold)]
        cmd += ["--history", args.history, "--timing", args.timing,
                "--pinned-bytes", str(args.pinned_bytes)]
        if args.keep_snapshots:
            cmd += ["--keep-snapshots", args.keep_snapshots]
        cmd += ["--load-late"] * args.load_late
        if args.maps:
            cmd += ["--maps", "1"]
        cmd += ["--pools", args.pools]
        r = subprocess.run(cmd, env=env)
        if r.returncode != 0:
            print(f"torch_replay: config {conf}: worker failed ({r.returncode})", file=sys.stderr)
            os.unlink(wout)
            return 1
        with open(wout) as f:
            w = json.load(f)
        os.unlink(wout)
        if args.maps:
            maps_of.append({"conf": conf, "log": w.get("maps", [])})
        report.setdefault("total_memory", w["total_memory"])
        report.setdefault("torch", w["torch"])
        for run, rows in zip(w["runs"], w["segments"]):
            idx = len(report["runs"])
            run = {"run": idx, "trace": 0, "file": args.trace, "spec": conf,
                   "policy": spec_of(conf), **run}
            run["conf"] = conf
            report["runs"].append(run)
            seg_rows += [(idx,) + tuple(x) for x in rows]
    text = json.dumps(report, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    if args.maps:
        with open(args.maps, "w") as f:
            json.dump(maps_of, f)
    if args.segments:
        with open(args.segments, "w") as f:
            f.write("run,alloc,event,action,addr,size\n")
            for row in seg_rows:
                f.write("%d,%d,%d,%s,%d,%d\n" % row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
