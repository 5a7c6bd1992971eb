"""Record a snapshot the way users usually do: recording starts after the model is built
and a few training steps ran, so the trace begins with segments and blocks it never saw
created. Writes OUT/NAME.pickle (the _dump_snapshot file) and OUT/NAME.stats.json (the
recording run's own memory_stats() at the dump, peaks reset when recording began).
With --state-only it also writes OUT/NAME_state.pickle (history recorded with
enabled="state": no trace, only the segments at the dump) and OUT/NAME_segments.pickle
(torch.cuda.memory_snapshot(): the bare list of segments, as older tools save it).

usage: python3 record_midrun.py OUT NAME [--state-only]"""
import json, os, pickle, sys
import torch
import torch.nn as nn

out, name = sys.argv[1], sys.argv[2]
torch.manual_seed(7)
dev = "cuda"


class Net(nn.Module):
    def __init__(self, d=512, layers=4):
        super().__init__()
        self.emb = nn.Embedding(8192, d)
        enc = nn.TransformerEncoderLayer(d, 8, 4 * d, batch_first=True, dropout=0.0)
        self.body = nn.TransformerEncoder(enc, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, 8192)

    def forward(self, x):
        return self.head(self.body(self.emb(x)))


model = Net().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
lossf = nn.CrossEntropyLoss()


def step(batch, seq):
    x = torch.randint(0, 8192, (batch, seq), device=dev)
    y = torch.randint(0, 8192, (batch, seq), device=dev)
    loss = lossf(model(x).flatten(0, 1), y.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss)


# Before recording: the model, the optimizer state and a few steps' cache.
for b, s in [(8, 128), (8, 192), (12, 128)]:
    step(b, s)
torch.cuda.synchronize()

torch.cuda.memory._record_memory_history(max_entries=1_000_000, context=None)
torch.cuda.reset_peak_memory_stats()
# Recorded: the sequence length varies and grows past what was seen before, so the
# allocator makes new segments and reuses the ones it had.
for b, s in [(8, 128), (16, 256), (8, 96), (24, 256), (16, 320), (8, 160), (24, 384)]:
    step(b, s)
torch.cuda.synchronize()
st = torch.cuda.memory_stats()
torch.cuda.memory._dump_snapshot(os.path.join(out, name + ".pickle"))
torch.cuda.memory._record_memory_history(enabled=None)
keys = ["reserved_bytes.all.peak", "reserved_bytes.all.current", "allocated_bytes.all.peak",
        "allocated_bytes.all.current", "segment.all.current", "num_alloc_retries",
        "num_device_alloc", "num_device_free", "num_ooms"]
stats = {k: st.get(k) for k in keys}
stats.update(torch=torch.__version__, conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
             total_memory=torch.cuda.get_device_properties(0).total_memory)
with open(os.path.join(out, name + ".stats.json"), "w") as f:
    json.dump(stats, f, indent=1)

if "--state-only" in sys.argv:
    torch.cuda.memory._record_memory_history(enabled="state", context=None)
    step(16, 256)
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(os.path.join(out, name + "_state.pickle"))
    torch.cuda.memory._record_memory_history(enabled=None)
    with open(os.path.join(out, name + "_segments.pickle"), "wb") as f:
        pickle.dump(torch.cuda.memory_snapshot(), f)
    st2 = torch.cuda.memory_stats()
    with open(os.path.join(out, name + "_state.stats.json"), "w") as f:
        json.dump({k: st2.get(k) for k in keys}, f, indent=1)
print(json.dumps(stats))
