#!/usr/bin/env python3
"""check_snapshot.py - an `allocsim run --snapshot-out` pickle read as memory_viz reads it.

Loads each FILE with Python's pickle (no torch needed) and checks what
torch.cuda._memory_viz and MemoryViz.js rely on: the top-level keys, each segment's fields
and blocks (contiguous from its address, sizes summing to total_size, allocated/active/
requested sizes the sums over their blocks), each trace entry's fields and action, frames
as {filename, line, name}. Then it replays device_traces[0] forward, as MemoryViz.js replays
it backward from the segments: every free names a live allocation, every block lies in a
live segment, and the allocations and segments alive at the end are exactly the active
blocks and the segments of `segments`. Prints one line per file; exit 1 on the first
problem, naming the file and the entry.
"""
import pickle
import sys

ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom"}
STATES = {"active_allocated", "active_pending_free", "inactive"}


class Bad(Exception):
    pass


def need(cond, what):
    if not cond:
        raise Bad(what)


def check_frames(frames, where):
    need(isinstance(frames, list), f"{where}: frames is not a list")
    for f in frames:
        need(isinstance(f, dict) and isinstance(f.get("filename"), str)
             and isinstance(f.get("line"), int) and isinstance(f.get("name"), str),
             f"{where}: a frame is not {{filename, line, name}}: {f!r}")


def check_segments(segs):
    active = {}
    for i, s in enumerate(segs):
        w = f"segments[{i}]"
        for k, t in (("device", int), ("address", int), ("total_size", int),
                     ("allocated_size", int), ("active_size", int), ("requested_size", int),
                     ("stream", int), ("segment_type", str), ("is_expandable", bool),
                     ("segment_pool_id", tuple), ("blocks", list), ("frames", list)):
            need(isinstance(s.get(k), t), f"{w}: {k} missing or not {t.__name__}")
        need(s["segment_type"] in ("small", "large"), f"{w}: segment_type {s['segment_type']}")
        check_frames(s["frames"], w)
        at, alloc, act, req = s["address"], 0, 0, 0
        for j, b in enumerate(s["blocks"]):
            bw = f"{w}.blocks[{j}]"
            need(b.get("address") == at, f"{bw}: address {b.get('address')} is not {at}")
            need(b.get("size", 0) > 0, f"{bw}: size {b.get('size')}")
            need(b.get("state") in STATES, f"{bw}: state {b.get('state')}")
            check_frames(b.get("frames"), bw)
            if b["state"] != "inactive":
                act += b["size"]
                req += b["requested_size"]
                need(0 < b["requested_size"] <= b["size"], f"{bw}: requested_size")
                active[b["address"]] = (b["size"], b["state"])
            if b["state"] == "active_allocated":
                alloc += b["size"]
            at += b["size"]
        need(at == s["address"] + s["total_size"], f"{w}: blocks do not cover total_size")
        need((alloc, act, req) == (s["allocated_size"], s["active_size"], s["requested_size"]),
             f"{w}: allocated/active/requested sizes are not the sums over its blocks")
    return active


def covered(ranges, addr, size):
    """[addr, addr + size) lies in live ranges (adjacent mappings of one segment join)."""
    at, end = addr, addr + size
    for r in sorted(ranges):
        if r <= at < r + ranges[r]:
            at = r + ranges[r]
            if at >= end:
                return True
    return False


def replay(trace):
    live, pending, ranges, mapped = {}, set(), {}, 0
    for i, e in enumerate(trace):
        w = f"device_traces[0][{i}]"
        a = e.get("action")
        need(a in ACTIONS, f"{w}: action {a!r}")
        for k in ("size", "stream", "time_us"):
            need(isinstance(e.get(k), int), f"{w}: {k} missing")
        need(isinstance(e.get("addr" if a != "oom" else "device_free"), int), f"{w}: addr")
        check_frames(e.get("frames", []), w)
        addr, size = e.get("addr"), e["size"]
        if a == "alloc":
            need(addr not in live, f"{w}: alloc of a live address")
            need(covered(ranges, addr, size), f"{w}: alloc outside every live segment")
            live[addr] = size
        elif a == "free_requested":
            need(addr in live and addr not in pending, f"{w}: free_requested of no live block")
            pending.add(addr)
        elif a == "free_completed":
            need(addr in pending, f"{w}: free_completed without free_requested")
            pending.discard(addr)
            del live[addr]
        elif a in ("segment_alloc", "segment_map"):
            ranges[addr] = size
            mapped += size
        elif a in ("segment_free", "segment_unmap"):
            need(addr in ranges, f"{w}: {a} of no live range")
            rest = ranges.pop(addr) - size
            if rest > 0:  # part of a mapping
                ranges[addr + size] = rest
            mapped -= size
    return live, pending, mapped


def check(path):
    with open(path, "rb") as f:
        d = pickle.load(f)
    need(isinstance(d, dict), "not a dict")
    need(isinstance(d.get("segments"), list), "no segments list")
    need(isinstance(d.get("device_traces"), list) and len(d["device_traces"]) == 1,
         "device_traces is not one list for the device")
    active = check_segments(d["segments"])
    live, pending, mapped = replay(d["device_traces"][0])
    need(set(live) == set(active), "the allocations alive at the end of the trace are not the "
         "active blocks of segments")
    need({a for a in active if active[a][1] == "active_pending_free"} == pending,
         "pending blocks differ from the trace's")
    need(mapped == sum(s["total_size"] for s in d["segments"]),
         "the trace's segment bytes are not the segments' total_size")
    st = d.get("allocator_settings")
    if st is not None:
        need(isinstance(st.get("PYTORCH_CUDA_ALLOC_CONF"), str), "allocator_settings")
        need(isinstance(st.get("roundup_power2_divisions"), dict), "roundup_power2_divisions")
    for i, a in enumerate(d.get("external_annotations", [])):
        need(a.get("stage") in ("START", "END") and isinstance(a.get("name"), str)
             and isinstance(a.get("time_us"), int), f"external_annotations[{i}]")
    return (f"{path}: ok: {len(d['segments'])} segments, {len(d['device_traces'][0])} entries, "
            f"{len(live)} live at the end")


def main(argv):
    for p in argv[1:]:
        try:
            print(check(p))
        except (Bad, OSError, pickle.UnpicklingError, EOFError) as e:
            print(f"{p}: {e}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
