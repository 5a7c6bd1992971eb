"""Record real CUDA-graph workloads as snapshots: torch.compile(mode="reduce-overhead")
(cudagraph trees: warm-up, capture into the tree's private pool, replay) for inference and
for training of a small MLP, then the compiled function dropped and the cache emptied (the
private pool released). Usage: record_graphs.py infer|train OUTDIR. Writes
OUTDIR/WORKLOAD.pickle (the snapshot, memory history from the process's first allocation)
and OUTDIR/WORKLOAD_stats.json (memory_stats() peaks before the release and at the end)."""
import gc, json, os, pickle, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

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

def infer():
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
    return f, [outs]

def train():
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
    return f, [m, opt]

def main():
    work, outdir = sys.argv[1], sys.argv[2]
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, context=None)
    t0 = time.time()
    f, keep = {"infer": infer, "train": train}[work]()
    torch.cuda.synchronize()
    before = peaks()
    # release: drop the compiled function and its cudagraph tree, then empty the cache
    del f
    keep.clear()
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    after_release = peaks()
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
    info = dict(workload=work, torch=torch.__version__, cuda=torch.version.cuda,
                device=torch.cuda.get_device_name(), seconds=round(time.time() - t0, 1),
                allocator_settings=snap.get("allocator_settings"),
                stats_before_release=before, stats_after_release=after_release,
                stats_end=peaks(), trace_actions=acts, entries=len(tr),
                pools=sorted({str(sg.get("segment_pool_id")) for sg in snap["segments"]}))
    with open(os.path.join(outdir, work + "_stats.json"), "w") as fh:
        json.dump(info, fh, indent=1, default=str)
    print(json.dumps(info, default=str))

if __name__ == "__main__":
    main()
