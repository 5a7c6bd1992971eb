#!/usr/bin/env python3
"""Writes the hand-made seeds of fuzz/corpus/{pickle,rmm,text}: small inputs that reach
every branch of each decoder's grammar (run from the repository root; the native seeds
are made by mk/fuzz.mk's fuzz-seeds from the text ones with `allocsim convert`). The
seeds are committed; rerunning this rewrites them identically."""
import os, pickle

def w(path, data):
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

# ---- torch snapshot pickles ---------------------------------------------------------
def ev(action, addr, size, stream=0, t=None):
    d = {"action": action, "addr": addr, "size": size, "stream": stream}
    if t is not None:
        d["time_us"] = t
    return d

def snap(traces, segments=(), settings=None):
    s = {"segments": list(segments), "device_traces": traces}
    if settings is not None:
        s["allocator_settings"] = settings
    return s

basic = [ev("segment_alloc", 0x1000, 2 << 20, 0, 1), ev("alloc", 0x1000, 512, 0, 2),
         ev("alloc", 0x1200, 1024, 0, 3), ev("free_requested", 0x1000, 512, 0, 4),
         ev("free_completed", 0x1000, 512, 0, 5), ev("free_requested", 0x1200, 1024, 0, 6),
         ev("alloc", 0x1600, 4096, 7, 7), ev("free_completed", 0x1200, 1024, 0, 8),
         ev("oom", 0, 1 << 40, 0, 9), ev("snapshot", 0, 0, 0, 10),
         ev("segment_map", 0x200000, 2 << 20), ev("segment_unmap", 0x200000, 2 << 20)]
seg = [{"address": 0x1000, "total_size": 2 << 20, "stream": 0, "device": 0,
        "blocks": [{"address": 0x1600, "size": 4096, "requested_size": 4000,
                    "state": "active_allocated"},
                   {"address": 0x2000, "size": 512, "requested_size": 512,
                    "state": "active_pending_free"}]}]
settings = {"expandable_segments": False, "max_split_size": -1,
            "garbage_collection_threshold": 0.0, "roundup_power2_divisions": [1] * 16}
os.makedirs("fuzz/corpus/pickle", exist_ok=True)
for proto in (2, 4, 5):
    w(f"fuzz/corpus/pickle/basic_p{proto}.pickle", pickle.dumps(snap([basic], seg, settings), protocol=proto))
w("fuzz/corpus/pickle/two_devices.pickle", pickle.dumps(snap([[], basic[:5]]), protocol=4))
w("fuzz/corpus/pickle/no_traces.pickle", pickle.dumps({"segments": seg}, protocol=4))
w("fuzz/corpus/pickle/prehistoric.pickle",
  pickle.dumps(snap([[ev("free_completed", 0x9000, 64), ev("alloc", 0x9000, 64)]], seg), protocol=3))
shared = ev("alloc", 0x5000, 256)
w("fuzz/corpus/pickle/memo.pickle", pickle.dumps(snap([[shared, shared, ev("free_completed", 0x5000, 256)]]), protocol=4))
w("fuzz/corpus/pickle/annotations.pickle",
  pickle.dumps({"segments": [], "device_traces": [basic[:3]], "external_annotations": [{"stage": "x"}]}, protocol=4))
# entries laid out as torch 2.11 writes them (the entry scanner's layout): keys in one order,
# fresh strings, frames lists of {filename, line, name} dicts (empty, one, several)
def tev(action, addr, i, nframes):
    frames = [{"filename": "/opt/model.py", "line": 100 + i + k, "name": "forward"}
              for k in range(nframes)]
    return dict(ev(action, addr, 256 + i, 0, 1000 + i), compile_context="N" + "/A",
                user_metadata="", frames=frames)
w("fuzz/corpus/pickle/torch_entries.pickle",
  pickle.dumps(snap([[tev("alloc", 0x7000 + 0x200 * i, i, i % 4) for i in range(20)] +
                     [tev("free_completed", 0x7000 + 0x200 * i, i, 0) for i in range(6)]],
                    seg, settings), protocol=4))
w("fuzz/corpus/pickle/bad_type.pickle", pickle.dumps({"device_traces": 3}, protocol=4))
w("fuzz/corpus/pickle/floats_big.pickle",
  pickle.dumps(snap([[ev("alloc", 2**63, 2**47, 2**64 - 1, -5), ev("free_completed", 2**63, 2**47, 0, 1.5)]]), protocol=5))

# ---- RMM CSV --------------------------------------------------------------------------
os.makedirs("fuzz/corpus/rmm", exist_ok=True)
new = ("Thread,Time,Action,Pointer,Size,Stream\n"
       "1,08:12:01.123456,allocate,0x7f0000000000,1024,0x0\n"
       "1,08:12:01.123460,allocate,0x7f0000000400,2048,0x1\n"
       "2,08:12:01.123470,free,0x7f0000000000,1024,0x0\n"
       "1,08:12:01.123480,allocate failure,0x0,1099511627776,0x0\n"
       "1,23:59:59.999999,free,0x7f0000000400,2048,0x1\n"
       "1,00:00:00.000001,allocate,0x7f0000000000,1,0x0\n")
old = ("Thread,Time,Action,Pointer,Size,Stream\n"
       "140000,1600000000123456,allocate,0x7f0000000000,256,0x0\n"
       "140000,1600000000123457,free,0x7f0000000000,256,0x0\n")
w("fuzz/corpus/rmm/new.csv", new)
w("fuzz/corpus/rmm/old.csv", old)
w("fuzz/corpus/rmm/cnmem.csv", "[cnmem] header line\n" + new)
w("fuzz/corpus/rmm/crlf.csv", new.replace("\n", "\r\n"))
w("fuzz/corpus/rmm/reorder.csv", "Size,Pointer,Action,Time,Thread,Stream\n1024,0x10,allocate,01:00:00.5,1,0\n1024,0x10,free,01:00:01,1,0\n")
w("fuzz/corpus/rmm/unknown_free.csv", "Thread,Time,Action,Pointer,Size,Stream\n1,00:00:01.0,free,0x99,8,0x0\n1,00:00:02.0,allocate,0x99,8,0x0\n")
with open("traces/samples/rmm_cudf_join.csv") as f:
    w("fuzz/corpus/rmm/sample_head.csv", "".join(f.readlines()[:40]))

# Frames, user_metadata and annotations: 600 allocs, 1,200 entries (more than one 1,000-item APPENDS
# batch, so later entries reach the shared frame dicts and lists through memo references
# to values of an earlier, dropped batch), stacks[k % 3] for alloc k (the same list
# objects, as PyTorch shares them), every alloc freed at once; user_metadata "phase1"
# from alloc 200 on, "" again from 400; four annotations, one of another device.
def frames_seed():
    fr = [{"filename": "/venv/site-packages/torch/nn/modules/conv.py", "line": 548, "name": "_conv_forward"},
          {"filename": "model.py", "line": 12, "name": "forward"},
          {"filename": "train.py", "line": 40, "name": "step"}]
    stacks = [[fr[0], fr[1], fr[2]], [fr[1], fr[2]], [fr[0], fr[2]]]
    t = []
    for k in range(600):
        meta = "phase1" if 200 <= k < 400 else ""
        a = ev("alloc", 0x10000 + 0x100 * (k % 7), 256 + k % 5, 0, 100 * k)
        a["frames"], a["user_metadata"] = stacks[k % 3], meta
        f = ev("free_completed", a["addr"], a["size"], 0, 100 * k + 50)
        f["frames"], f["user_metadata"] = [], meta
        t += [a, f]
    ann = [{"name": "step#1", "stage": "START", "device": 0, "time_us": 100 * 100 + 10},
           {"name": "step#1", "stage": "END", "device": 0, "time_us": 100 * 550 + 60},
           {"name": "other", "stage": "START", "device": 1, "time_us": 5},
           {"name": "tail", "stage": "START", "device": 0, "time_us": 10 ** 9}]
    s = snap([t])
    s["external_annotations"] = ann
    return s
w("fuzz/corpus/pickle/frames.pickle", pickle.dumps(frames_seed(), protocol=4))

# Stacks as _record_memory_history(context="all", stacks="all") records them: 130 frames an
# alloc, Python and C++ (a C++ frame's line is 2**64 - 1 when unknown: a LONG1 of 9 bytes),
# new frames fresh among frames of earlier allocs, and a recursion: the same frame dict
# twice in one stack (a memo reference to a dict of the list being written).
def stacks_seed():
    fr = [{"filename": "/venv/site-packages/torch/lib/libtorch_cpu.so" if k % 2 else "model.py",
           "line": 2 ** 64 - 1 if k % 3 == 0 else 10 + k, "name": f"f{k}"} for k in range(400)]
    t = []
    for k in range(8):
        stack = fr[30 * k:30 * k + 130]
        stack = stack[:60] + stack[50:55] + stack[60:]  # five frames again: recursion
        a = ev("alloc", 0x20000 + 0x1000 * k, 512 + k, 0, 10 * k)
        a["frames"] = stack
        f = ev("free_completed", a["addr"], a["size"], 0, 10 * k + 5)
        f["frames"] = []
        t += [a, f]
    s = snap([t], settings=settings)
    return s
w("fuzz/corpus/pickle/stacks.pickle", pickle.dumps(stacks_seed(), protocol=4))

# ---- text ------------------------------------------------------------------------------
os.makedirs("fuzz/corpus/text", exist_ok=True)
with open("traces/samples/handwritten.txt") as f:
    w("fuzz/corpus/text/handwritten.txt", f.read())
w("fuzz/corpus/text/all_ops.txt", "allocsim-text 1\nmeta source=fuzz seed\nmeta k.e-y_1=v\\#a\\x41\\t\\n\\\\l \n"
  "alloc 0 2M s=0x7f00 t=5\nalloc 1 1 t=-3\nalloc 2 3KiB\ts=12\nfree_req 0 t=6\nmark step 1\n"
  "mark t=3 label ending t=7\nfree 0 t=9\nempty_cache t=10\n# comment\n\n  free 1 # trailing\r\nfree_req 2\n")
w("fuzz/corpus/text/units.txt", "allocsim-text 1\nalloc 0 1K\nalloc 1 1T\nalloc 2 256TiB\nalloc 3 1G s=0xffffffffffffffff\nfree 3\nfree 2\nfree 1\nfree 0\n")
w("fuzz/corpus/text/errors.txt", "allocsim-text 1\nalloc 0 0\n")
w("fuzz/corpus/text/double_free.txt", "allocsim-text 1\nalloc 0 5\nfree 0\nfree 0\n")
w("fuzz/corpus/text/meta_late.txt", "allocsim-text 1\nalloc 0 5\nmeta a=b\n")
w("fuzz/corpus/text/version2.txt", "allocsim-text 2\nalloc 0 5\n")
w("fuzz/corpus/text/escapes.txt", "allocsim-text 1\nmark \\x01\\x7f\\\\\\# x t=1 t=2\nmark  lead\n")
