#!/usr/bin/env python3
"""record_caught.py - a cuDNN convolution training job recorded with C++ frames, without
memory pressure and on emulated smaller cards, to see the OOMs the program survives.

The job: a ResNet-50-like net in plain torch (a 7x7 stem, bottleneck blocks [3, 4, 6, 3]
of widths 64..512, batch norm, a 1000-way head), fp32 (cuDNN's default TF32), SGD with
momentum, 128x128 images, the batch drawn each step from {16, 32, ..., 128} by a seeded
generator, so every run asks for the same tensors in the same order until memory runs
short. cudnn.benchmark is off (the default): cuDNN's heuristics order the engines and
PyTorch (Conv_v8.cpp run_single_conv/try_configs) takes the first whose workspace it can
allocate, catching the allocator's OutOfMemoryError, and caches that engine per shape.

Each run is a fresh process recording with
_record_memory_history(max_entries=1_000_000, context="all", stacks="all"), so every
allocation and every `oom` entry carries its C++ frames (the workspace request's name
at::native::run_conv_plan). Runs:

  unpressured        the whole H200
  fraction_<k>       set_per_process_memory_fraction(f): the allocator refuses a new
                     segment when reserved + size > int(f * total_memory); an exact
                     capacity, the one the simulator is given
  ballast            device memory taken with cuMemAlloc outside PyTorch right after the
                     CUDA context is made, leaving `cap` bytes free: a smaller card as the
                     driver sees it (memory outside the allocator still grows as cuDNN and
                     cuBLAS load, so the usable capacity is a little less than `cap`)

A run that dies (an OutOfMemoryError out of the training step) dumps its snapshot there.
Writes OUT/<run>.pickle.gz and OUT/results.json (per run: caps, memory_stats() counters,
the step it died at and the failing request, mem_get_info at start and end, timings).

usage: python3 record_caught.py OUT [--steps N] [--fractions a,b,c] [--ballast x]
  (fractions and ballast as multiples of the unpressured run's peak reserved)
"""
import argparse
import ctypes
import gzip
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)


def build_net(torch):
    nn, F = torch.nn, torch.nn.functional

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * 4
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x):
            idt = x if self.down is None else self.down(x)
            y = F.relu(self.bn1(self.conv1(x)))
            y = F.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return F.relu(y + idt)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                      nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
            blocks, cin = [], 64
            for width, n, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
                for i in range(n):
                    blocks.append(Bottleneck(cin, width, stride if i == 0 else 1))
                    cin = width * 4
            self.blocks = nn.Sequential(*blocks)
            self.head = nn.Linear(cin, 1000)

        def forward(self, x):
            x = self.blocks(self.stem(x))
            return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    return Net()


def ballast(cap):
    """cuMemAlloc outside PyTorch until `cap` bytes are left free (the driver API, on the
    primary context torch made current)."""
    cu = ctypes.CDLL("libcuda.so.1")
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    held = []
    for _ in range(64):
        cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
        want = free.value - cap
        if want < (2 << 20):
            break
        n = min(want, 8 << 30) // (2 << 20) * (2 << 20)
        p = ctypes.c_uint64()
        if cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)) != 0:
            break
        held.append(p)
    cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
    return held, free.value


def child(a):
    import torch
    res = {"run": a.name, "mode": a.mode, "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(),
           "symbolize": os.environ.get("TORCH_SYMBOLIZE_MODE", "")}
    torch.cuda.init()
    torch.empty(1, device="cuda")
    total = torch.cuda.get_device_properties(0).total_memory
    res["total_memory"] = total
    res["start_free"], _ = torch.cuda.mem_get_info()
    keep = None
    if a.mode == "fraction":
        f = a.cap / total
        torch.cuda.set_per_process_memory_fraction(f)
        res.update(fraction=f, allowed_bytes=int(f * total))
    elif a.mode == "ballast":
        keep, left = ballast(a.cap)
        res.update(ballast_target_free=a.cap, free_after_ballast=left)
    torch.manual_seed(1234)
    rng = random.Random(1234)
    batches = [rng.choice(range(16, 129, 16)) for _ in range(a.steps)]
    if a.batches:
        batches = [int(x) for x in a.batches.split(",")]
    res["batches"] = batches
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, context="all",
                                             stacks="all")
    t0 = time.time()
    died = None
    try:
        net = build_net(torch).cuda()
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        lossf = torch.nn.CrossEntropyLoss()
        for i, b in enumerate(batches):
            x = torch.randn(b, 3, a.image, a.image, device="cuda")
            y = torch.randint(0, 1000, (b,), device="cuda")
            loss = lossf(net(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del x, y, loss
            res["steps_done"] = i + 1
        torch.cuda.synchronize()
    except torch.OutOfMemoryError as e:
        died = {"step": res.get("steps_done", 0), "exception": type(e).__name__,
                "message": str(e).split("\n")[0][:400]}
    except RuntimeError as e:  # a library's own allocation failing (cuDNN, cuBLAS)
        died = {"step": res.get("steps_done", 0), "exception": type(e).__name__,
                "message": str(e).split("\n")[0][:400]}
    res["died"] = died
    res["train_s"] = time.time() - t0
    st = torch.cuda.memory_stats()
    for k in ("reserved_bytes.all.peak", "allocated_bytes.all.peak", "requested_bytes.all.peak",
              "num_ooms", "num_alloc_retries", "num_device_alloc", "num_device_free"):
        res[k] = st.get(k)
    res["end_free"], _ = torch.cuda.mem_get_info()
    res["end_reserved"] = torch.cuda.memory_reserved()
    t1 = time.time()
    snap = torch.cuda.memory._snapshot()
    res["dump_s"] = time.time() - t1
    torch.cuda.memory._record_memory_history(enabled=None)
    tr = snap["device_traces"][0]
    res["entries"] = len(tr)
    res["allocs"] = sum(1 for e in tr if e["action"] == "alloc")
    res["oom_entries"] = sum(1 for e in tr if e["action"] == "oom")
    names = [fr.get("name", "") for e in tr[:4000] for fr in e.get("frames", [])]
    res["frames_name_run_conv_plan"] = any("run_conv_plan" in n for n in names)
    import pickle
    with gzip.open(os.path.join(a.out, a.name + ".pickle.gz"), "wb", compresslevel=6) as f:
        pickle.dump(snap, f, protocol=4)
    with open(os.path.join(a.out, a.name + ".json"), "w") as f:
        json.dump(res, f, indent=1)
    del keep


def probe(a):
    """Does this symbolizer name run_conv_plan in a workspace request's frames?"""
    import torch
    torch.cuda.memory._record_memory_history(max_entries=100000, context="all", stacks="all")
    x = torch.randn(32, 64, 56, 56, device="cuda", requires_grad=True)
    w = torch.randn(64, 64, 3, 3, device="cuda", requires_grad=True)
    torch.nn.functional.conv2d(x, w, padding=1).sum().backward()
    torch.cuda.synchronize()
    t = time.time()
    snap = torch.cuda.memory._snapshot()
    names = [fr.get("name", "") for e in snap["device_traces"][0] for fr in e.get("frames", [])]
    print(json.dumps({"mode": os.environ.get("TORCH_SYMBOLIZE_MODE"), "dump_s": time.time() - t,
                      "ok": any("run_conv_plan" in n for n in names),
                      "sample": [n for n in names if "conv" in n][:6]}))


def spawn(args, env_extra, timeout):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **env_extra)
    return subprocess.Popen([sys.executable, HERE] + args, env=env), timeout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--image", type=int, default=128)
    ap.add_argument("--batches", default="", help="the batch of each step (else drawn)")
    ap.add_argument("--fractions", default="0.95,0.85,0.7")
    ap.add_argument("--ballast", default="0.85")
    ap.add_argument("--headroom", type=int, default=0,
                    help="bytes the ballast leaves free beyond the cap (for cuBLAS, cuDNN)")
    ap.add_argument("--peak", type=int, default=0,
                    help="the unpressured peak reserved, from an earlier call: skip that run")
    ap.add_argument("--symbolize", default="", help="TORCH_SYMBOLIZE_MODE, skip the probe")
    ap.add_argument("--tag", default="", help="prefix of the pressured runs' names")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--probe", action="store_true")
    ap.add_argument("--mode", default="unpressured")
    ap.add_argument("--name", default="unpressured")
    ap.add_argument("--cap", type=int, default=0)
    a = ap.parse_args()
    if a.probe:
        return probe(a)
    if a.child:
        return child(a)
    os.makedirs(a.out, exist_ok=True)
    log = {"started": time.time()}
    sym = a.symbolize
    for mode in () if sym else ("fast", "dladdr", "addr2line"):
        r = subprocess.run([sys.executable, HERE, a.out, "--probe"], capture_output=True,
                           text=True, env=dict(os.environ, TORCH_SYMBOLIZE_MODE=mode),
                           timeout=90)
        print("probe", mode, r.stdout.strip()[-600:], r.stderr.strip()[-300:], flush=True)
        if '"ok": true' in r.stdout:
            sym = mode
            break
    env = {"TORCH_SYMBOLIZE_MODE": sym} if sym else {}
    common = ["--steps", str(a.steps), "--image", str(a.image), "--batches", a.batches]
    peak = a.peak
    if not peak:
        subprocess.run([sys.executable, HERE, a.out, "--child", "--mode", "unpressured",
                        "--name", "unpressured"] + common, env=dict(os.environ, **env),
                       timeout=240)
        with open(os.path.join(a.out, "unpressured.json")) as f:
            base = json.load(f)
        peak = base["reserved_bytes.all.peak"]
        print("unpressured", json.dumps({k: base[k] for k in ("reserved_bytes.all.peak",
              "allocs", "train_s", "dump_s", "frames_name_run_conv_plan")}), flush=True)
    procs = []
    for k, fr in enumerate(float(x) for x in a.fractions.split(",") if x):
        cap = int(peak * fr) // (2 << 20) * (2 << 20)
        procs.append(subprocess.Popen([sys.executable, HERE, a.out, "--child", "--mode",
                                       "fraction", "--name", "%sfraction_%d" % (a.tag, k), "--cap",
                                       str(cap)] + common, env=dict(os.environ, **env)))
    for q in procs:
        q.wait(timeout=240)
    for k, fr in enumerate(float(x) for x in a.ballast.split(",") if x):
        cap = int(peak * fr) // (2 << 20) * (2 << 20) + a.headroom
        subprocess.run([sys.executable, HERE, a.out, "--child", "--mode", "ballast", "--name",
                        "%sballast_%d" % (a.tag, k), "--cap", str(cap)] + common,
                       env=dict(os.environ, **env), timeout=240)
    runs = {}
    for n in sorted(os.listdir(a.out)):
        if n.endswith(".json") and n != "results.json":
            with open(os.path.join(a.out, n)) as f:
                runs[n[:-5]] = json.load(f)
            os.remove(os.path.join(a.out, n))
    log.update(symbolize=sym, peak=peak, argv=sys.argv[1:], runs=runs, wall_s=time.time() - log["started"])
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(log, f, indent=1)
    for n, r in runs.items():
        print(n, json.dumps({k: r.get(k) for k in ("allowed_bytes", "free_after_ballast",
              "died", "oom_entries", "num_ooms", "allocs", "steps_done", "train_s",
              "dump_s")}), flush=True)


if __name__ == "__main__":
    main()
