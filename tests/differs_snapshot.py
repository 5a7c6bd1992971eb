#!/usr/bin/env python3
"""differs_snapshot.py OUT - writes a tiny snapshot pickle that `allocsim check` finds to
differ: two 1 MiB requests on one stream, the second given a 2 MiB segment of its own at
0x20000000 although the first's freed block lay in the first segment (as if another pool
had served it). PyTorch 2.11's allocator would have reused that block, so the simulation
makes one segment where the recording has two: the first difference is the recorded
segment_alloc of the second request (allocation 1), with nothing simulated there."""
import pickle
import sys

S, M, A, B = 2 << 20, 1 << 20, 0x10000000, 0x20000000


def entry(action, addr, size):
    return {"action": action, "addr": addr, "size": size, "stream": 0}


def block(addr, size, state):
    return {"address": addr, "size": size, "requested_size": size, "state": state}


def segment(addr, blocks):
    return {"device": 0, "address": addr, "total_size": S, "stream": 0, "segment_type": "small",
            "segment_pool_id": (0, 0), "is_expandable": False, "allocated_size": 0,
            "active_size": 0, "requested_size": 0, "blocks": blocks}


trace = [entry("segment_alloc", A, S), entry("alloc", A, M), entry("free_requested", A, M),
         entry("free_completed", A, M), entry("segment_alloc", B, S), entry("alloc", B, M)]
segments = [segment(A, [block(A, S, "inactive")]),
            segment(B, [block(B, M, "active_allocated"), block(B + M, M, "inactive")])]
settings = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "expandable_segments": False,
            "garbage_collection_threshold": 0.0}
with open(sys.argv[1], "wb") as f:
    pickle.dump({"segments": segments, "device_traces": [trace], "allocator_settings": settings},
                f, protocol=4)
