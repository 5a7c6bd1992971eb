#!/usr/bin/env python3
"""capture_evidence.py [ALLOCSIM] - can a snapshot tell the importer that a CUDA graph
capture (or a tree's warm-up, or use_mem_pool) was underway at a default-pool
allocation? (issue 17: PyTorch 2.11's malloc skips release_cached_blocks for *every*
request while captures_underway is not empty, a default-pool one of another stream or
thread too, as replay/data/h200-pool-xstream's capture_oom and mp_oom_thread measured on
the H200; the torch policy skips it for a private pool's request alone.)

For each real recording with private pools (tests/data/torch-2.11-h200-graphs: infer,
train, dyn, graph; tests/data/torch-2.11-h200-pools: graph_probe) it prints:
- the keys its trace entries carry (a pool id or a capture flag would be the answer);
- its allocations, and how many the importer puts in private pools (`allocsim convert`);
- `in phase`: default-pool allocations made inside a cudagraph tree's warm-up, record or
  checkpoint (the recording script's `phase=` user_metadata around CUDAWarmupNode.run,
  CUDAGraphNode._record and the checkpoint restore, where the tree's pool context is
  underway: ground truth for tests, a user's snapshot has none); '-' where the recording
  has no phases (torch.cuda.graph and MemPool by hand);
- `tree frames`: default-pool allocations whose stack runs through
  torch/_inductor/cudagraph_trees.py, other than the RNG state's two 8-byte tensors
  (frames through torch/cuda/graphs.py capture_begin, made before the pool is entered):
  the one signal a snapshot with frames could give, for a tree's own thread;
- `window`: default-pool allocations between a pool's first and last allocation, what a
  rule "a capture spans its pool's allocations" would mark, and how many of those a
  phase marks (the ground truth of the tree recordings).
Exit 0; 1 when a recording cannot be read."""
import os
import pickle
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_replay  # noqa: E402

RECORDINGS = [("infer", "tests/data/torch-2.11-h200-graphs/infer.pickle.zst"),
              ("train", "tests/data/torch-2.11-h200-graphs/train.pickle.zst"),
              ("dyn", "tests/data/torch-2.11-h200-graphs/dyn.pickle.zst"),
              ("graph", "tests/data/torch-2.11-h200-graphs/graph.pickle.zst"),
              ("graph_probe", "tests/data/torch-2.11-h200-pools/graph_probe.pickle.zst")]


def frames_through(e, tail, name=None):
    return any(f.get("filename", "").endswith(tail) and (name is None or f.get("name") == name)
               for f in e.get("frames") or [])


def evidence(allocsim, path):
    with open(os.path.join(ROOT, path), "rb") as f:
        snap = pickle.loads(torch_replay.zstd_decompress(f.read(), path))
    trace = next(t for t in snap["device_traces"] if t)
    keys = sorted({k for e in trace for k in e})
    allocs = [e for e in trace if e["action"] == "alloc"]
    evs, _ = torch_replay.load_trace(os.path.join(ROOT, path), allocsim)
    pools = [e[4] for e in evs if e[0] == "a"]
    if len(pools) != len(allocs):
        raise ValueError(f"{path}: {len(pools)} allocations converted, {len(allocs)} traced")
    phased = any(e.get("user_metadata") for e in allocs)
    default = [i for i, p in enumerate(pools) if p == 0]
    in_phase = sum(1 for i in default if allocs[i].get("user_metadata"))
    tree = sum(1 for i in default if frames_through(allocs[i], "torch/_inductor/cudagraph_trees.py")
               and not frames_through(allocs[i], "torch/cuda/graphs.py", "capture_begin"))
    window = set()
    for k in set(pools) - {0}:
        at = [i for i, p in enumerate(pools) if p == k]
        window |= {i for i in range(at[0], at[-1]) if pools[i] == 0}
    window_phase = sum(1 for i in window if allocs[i].get("user_metadata"))
    return keys, len(allocs), len(allocs) - len(default), (in_phase if phased else "-"), tree, \
        len(window), (window_phase if phased else "-")


def main():
    allocsim = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "allocsim")
    rows, keys = [], set()
    for name, path in RECORDINGS:
        try:
            k, *row = evidence(allocsim, path)
        except (OSError, ValueError, torch_replay.TraceError) as ex:
            print(f"capture_evidence: {ex}", file=sys.stderr)
            return 1
        keys.update(k)
        rows.append((name, *row))
    print("trace entry keys:", ", ".join(sorted(keys)))
    print("| recording | allocations | in private pools | default pool: in phase | "
          "tree frames | window | window in phase |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
