#!/usr/bin/env python3
"""reuse_snapshot.py OUT N [expandable] - writes a snapshot pickle whose trace reuses N segment
addresses: each one's 2 MiB segment, made before the trace, is freed; a 20 MiB segment is
made at the same address and holds a 1 MiB block; the 20 MiB segments are freed, in
address order. One more segment is made at the end and is alive at the dump. Walked back
from the dump, each address has exactly its 2 MiB segment at the start of the trace (N
segments, 2N MiB), which tests/test_check.c checks; a walk that searched the segments for
each segment_alloc took seconds on such a trace (0.1 s at N = 20,000, 6.8 s at 160,000
made and freed). With `expandable`: N expandable segments at the dump, of 4 MiB on
streams of their own, each grown by a 2 MiB segment_map in the trace: again N segments
of 2 MiB at the start (each segment scanned every entry and every other segment: 17 s at
N = 60,000, where this takes 0.2 s)."""
import pickle
import sys

out, n = sys.argv[1], int(sys.argv[2])
MIB = 1 << 20
if sys.argv[3:] == ["expandable"]:
    bases = [(i + 1) << 32 for i in range(n)]
    segments = [{"device": 0, "address": a, "total_size": 4 * MIB, "stream": i,
                 "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": True,
                 "allocated_size": 0, "active_size": 0, "requested_size": 0,
                 "blocks": [{"address": a, "size": 4 * MIB, "requested_size": 0,
                             "state": "inactive"}]} for i, a in enumerate(bases)]
    trace = [{"action": "segment_map", "addr": a + 2 * MIB, "size": 2 * MIB,
              "stream": i % 60000, "time_us": i} for i, a in enumerate(bases)]
    with open(out, "wb") as f:
        pickle.dump({"segments": segments, "device_traces": [trace]}, f, protocol=4)
    sys.exit(0)
addrs = [(i + 1) * 32 * MIB for i in range(n)]
last = (n + 1) * 32 * MIB


def entry(action, addr, size, t):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t}


trace = [entry("segment_free", a, 2 * MIB, 0) for a in addrs]
for a in addrs:
    trace += [entry("segment_alloc", a, 20 * MIB, 1), entry("alloc", a, MIB, 2),
              entry("free_requested", a, MIB, 3), entry("free_completed", a, MIB, 4)]
trace += [entry("segment_free", a, 20 * MIB, 5) for a in addrs]
trace.append(entry("segment_alloc", last, 4 * MIB, 6))
segments = [{"device": 0, "address": last, "total_size": 4 * MIB, "stream": 0,
             "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
             "allocated_size": 0, "active_size": 0, "requested_size": 0,
             "blocks": [{"address": last, "size": 4 * MIB, "requested_size": 0,
                         "state": "inactive"}]}]
with open(out, "wb") as f:
    pickle.dump({"segments": segments, "device_traces": [trace]}, f, protocol=4)
