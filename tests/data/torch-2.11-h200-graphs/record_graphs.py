"""Record real CUDA-graph workloads as snapshots. Usage: record_graphs.py WORKLOAD OUTDIR [none]

WORKLOAD is one of
  infer  torch.compile(mode="reduce-overhead") inference of a small MLP (cudagraph trees:
         warm-up, capture into the tree's private pool, replay), two batch sizes
  train  the same MLP trained 10 steps (AdamW, MSE) through the compiled function
  dyn    (held out) a different model, reduce-overhead inference over four batch sizes in
         an irregular order, so that the tree records new graphs after replays
  graph  (held out) torch.cuda.graph by hand: two graphs sharing one pool
         (graph_pool_handle), replayed, plus a torch.cuda.MemPool used through use_mem_pool
then the compiled function (graphs, pools) dropped and the cache emptied, so that every
private pool is released before the dump, as a user's job would have it.

Memory history records frames (context="all", stacks="all": Python and C++; "none" as the
third argument records none, as the first recordings did) from the process's first
allocation. Writes OUTDIR/WORKLOAD.pickle (the dump), OUTDIR/WORKLOAD_live.pickle (a
snapshot taken before the release: its segments carry segment_pool_id, the allocator's own
word on which pool each segment alive then belongs to: the ground truth for the importer's
inference) and OUTDIR/WORKLOAD_stats.json (versions, the capture stream and pool of the
cudagraph tree, memory_stats() before the release, after it and at the dump).

The cudagraph-tree phases are written into the trace's user_metadata ("phase=warmup",
"phase=record", "phase=replay", "phase=checkpoint" around CUDAWarmupNode.run,
CUDAGraphNode._record, CUDAGraphNode.run and the tree's checkpoint restore): ground truth for
tests only; users' snapshots have none of it and the importer does not read it for pools."""
import contextlib, functools, gc, inspect, json, os, pickle, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

SET_META = getattr(torch._C, "_cuda_setMemoryMetadata", None)
GET_META = getattr(torch._C, "_cuda_getMemoryMetadata", None)


def phase_wrap(cls, name, label):
    f = getattr(cls, name, None)
    if f is None or SET_META is None:
        return False

    @functools.wraps(f)
    def w(*a, **k):
        old = GET_META() if GET_META else ""
        SET_META("phase=" + label)
        try:
            return f(*a, **k)
        finally:
            SET_META(old)

    setattr(cls, name, w)
    return True


def annotate_phases():
    try:
        from torch._inductor import cudagraph_trees as ct
    except Exception as e:  # noqa: BLE001
        return {"error": repr(e)}
    done = {}
    done["warmup"] = phase_wrap(ct.CUDAWarmupNode, "run", "warmup")
    done["record"] = phase_wrap(ct.CUDAGraphNode, "_record", "record")
    done["replay"] = phase_wrap(ct.CUDAGraphNode, "run", "replay")
    done["checkpoint"] = phase_wrap(ct.CUDAGraphTreeManager,
                                    "apply_checkpoint_execution_state_in_allocator", "checkpoint")
    return done


def tree_info():
    try:
        from torch._inductor import cudagraph_trees as ct
        c = ct.get_container(0)
        m = c.tree_manager
        if m is None:
            return {"tree": None}
        return {"tree_stream": m.stream.cuda_stream, "tree_pool": list(m.cuda_graphs_thread_pool)}
    except Exception as e:  # noqa: BLE001
        return {"tree_error": repr(e)}


def mlp():
    torch.manual_seed(7)
    return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(),
                         nn.Linear(4096, 1024)).cuda()


def peaks():
    s = torch.cuda.memory_stats()
    keys = ["allocated_bytes.all.peak", "reserved_bytes.all.peak", "active_bytes.all.peak",
            "allocated_bytes.all.current", "reserved_bytes.all.current", "num_alloc_retries",
            "num_ooms", "segment.all.peak", "segment.all.current", "num_device_alloc",
            "num_device_free"]
    return {k: s.get(k) for k in keys}


def infer(info):
    m = mlp().eval()
    f = torch.compile(m, mode="reduce-overhead", dynamic=False)
    outs = []
    with torch.no_grad():
        for i in range(12):
            bs = 64 if i < 8 else 96  # a second shape: a second graph in the same tree
            x = torch.randn(bs, 1024, device="cuda")
            y = f(x)
            outs.append(y.clone())  # outputs of a replay are overwritten by the next
            if len(outs) > 3:
                outs.pop(0)
    info.update(tree_info())
    return [f, outs]


def train(info):
    m = mlp()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    f = torch.compile(m, mode="reduce-overhead", dynamic=False)
    for i in range(10):
        torch.compiler.cudagraph_mark_step_begin()
        x = torch.randn(128, 1024, device="cuda")
        t = torch.randn(128, 1024, device="cuda")
        loss = F.mse_loss(f(x), t)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    info.update(tree_info())
    return [f, m, opt]


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.n = nn.LayerNorm(d)
        self.a = nn.Linear(d, 3 * d)
        self.b = nn.Linear(3 * d, d)

    def forward(self, x):
        return x + self.b(F.silu(self.a(self.n(x))))


def dyn(info):
    torch.manual_seed(11)
    m = nn.Sequential(Block(768), Block(768), nn.Linear(768, 256)).cuda().eval()
    f = torch.compile(m, mode="reduce-overhead", dynamic=False)
    keep = []
    with torch.no_grad():
        for i, bs in enumerate([32, 32, 32, 80, 80, 32, 80, 48, 48, 48, 32, 80, 128, 128, 128, 48]):
            torch.compiler.cudagraph_mark_step_begin()
            y = f(torch.randn(bs, 768, device="cuda"))
            keep.append(y.sum(dim=1))  # a small result outlives the step
            if len(keep) > 4:
                keep.pop(0)
    info.update(tree_info())
    return [f, keep]


def graph(info):
    torch.manual_seed(5)
    m = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 512)).cuda().eval()
    xa = torch.randn(32, 512, device="cuda")
    xb = torch.randn(256, 512, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.no_grad():
        with torch.cuda.stream(s):
            for _ in range(2):
                m(xa), m(xb)
        torch.cuda.current_stream().wait_stream(s)
        pool = torch.cuda.graph_pool_handle()
        ga, gb = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(ga, pool=pool):
            ya = m(xa)
        with torch.cuda.graph(gb, pool=pool):
            yb = m(xb)
        info["graph_pool"] = list(pool)
        outs = []
        for i in range(6):
            (ga if i % 2 else gb).replay()
            outs.append((ya if i % 2 else yb).clone())
        up = torch.cuda.MemPool()
        info["mempool"] = list(up.id)
        with torch.cuda.use_mem_pool(up):
            u1 = torch.empty(24 << 20, dtype=torch.uint8, device="cuda")
            u2 = torch.empty(300 << 10, dtype=torch.uint8, device="cuda")
        del u1
        u3 = torch.empty(24 << 20, dtype=torch.uint8, device="cuda")
    return [ga, gb, ya, yb, outs, up, u2, u3]


def record_history(frames):
    kw = dict(max_entries=1_000_000)
    if frames:
        kw.update(context="all", stacks="all")
    else:
        kw.update(context=None)
    if "compile_context" in inspect.signature(torch.cuda.memory._record_memory_history).parameters:
        kw["compile_context"] = True
    torch.cuda.memory._record_memory_history(**kw)
    return {k: v for k, v in kw.items() if k != "max_entries"}


def main():
    work, outdir = sys.argv[1], sys.argv[2]
    frames = len(sys.argv) < 4 or sys.argv[3] != "none"
    info = dict(workload=work, torch=torch.__version__, cuda=torch.version.cuda,
                device=torch.cuda.get_device_name(), phases=annotate_phases())
    info["history"] = record_history(frames)
    t0 = time.time()
    keep = {"infer": infer, "train": train, "dyn": dyn, "graph": graph}[work](info)
    torch.cuda.synchronize()
    info["stats_before_release"] = peaks()
    live = torch.cuda.memory._snapshot()
    with open(os.path.join(outdir, work + "_live.pickle"), "wb") as fh:
        pickle.dump(live, fh)
    info["live_pools"] = sorted({str(sg.get("segment_pool_id")) for sg in live["segments"]})
    info["live_entries"] = len(live["device_traces"][0])
    del live
    # release: drop the compiled function (its cudagraph tree) or the graphs and pools
    keep.clear()
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    info["stats_after_release"] = peaks()
    z = [torch.empty(3 << 20, dtype=torch.uint8, device="cuda") for _ in range(3)]
    del z
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    with open(os.path.join(outdir, work + ".pickle"), "wb") as fh:
        pickle.dump(snap, fh)
    tr = snap["device_traces"][0]
    acts = {}
    for e in tr:
        acts[e["action"]] = acts.get(e["action"], 0) + 1
    info.update(seconds=round(time.time() - t0, 1),
                allocator_settings=snap.get("allocator_settings"),
                stats_end=peaks(), trace_actions=acts, entries=len(tr),
                framed=sum(1 for e in tr if e.get("frames")),
                streams=sorted({e["stream"] for e in tr}),
                pools=sorted({str(sg.get("segment_pool_id")) for sg in snap["segments"]}))
    with open(os.path.join(outdir, work + "_stats.json"), "w") as fh:
        json.dump(info, fh, indent=1, default=str)
    print(json.dumps({k: info[k] for k in ("workload", "seconds", "entries", "framed",
                                           "live_pools", "phases", "trace_actions")},
                     default=str))


if __name__ == "__main__":
    main()
