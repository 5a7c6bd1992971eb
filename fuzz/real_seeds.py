#!/usr/bin/env python3
"""Writes seed corpora cut from the real snapshots of tests/data, for longer fuzzing
campaigns (`make fuzz-real-seeds` writes build/fuzz/seeds-real/NAME, which `make fuzz-run`
reads beside the committed seeds; the output is not committed). Each real pickle gives
small whole snapshots that fit the harness's -max_len: windows of its trace entries (the
start, the middle, the end, and one of each action) with a few of its segments and
blocks, its allocator_settings and annotations, pickled as torch does (protocol 4, with
frames and the memo). Those go to OUT/pickle; allocsim converts them to OUT/native
(decompressed), OUT/text and OUT/policy (text with fuzz.policy/fuzz.capacity lines), and
OUT/cli gets commands over them (run, info, mincap, check). Run from the repository root:
fuzz/real_seeds.py ALLOCSIM OUT"""
import os, pickle, subprocess, sys

allocsim, out = sys.argv[1], sys.argv[2]
# each harness's -max_len (mk/fuzz.mk)
lim = {"pickle": 16384, "native": 4096, "text": 4096, "policy": 8192, "cli": 4096}
POLICIES = ["torch", "bestfit", "firstfit,release=oom", "segfit", "buddy", "bfc", "nocache",
            "torch,expandable=true", "torch,maxsplit=20,gc=0.5", "gmlake", "cudamallocasync"]

def traces():
    for d, _, fs in sorted(os.walk("tests/data")):
        for f in sorted(fs):
            if f.endswith(".pickle.zst"):
                yield os.path.join(d, f)

def load(path):
    raw = subprocess.run(["zstd", "-dc", path], check=True, capture_output=True).stdout
    return pickle.loads(raw)

def cut(snap, entries, nseg):
    if not isinstance(snap, dict):
        return entries[:nseg + 1]
    s = dict(snap)
    segs = []
    for g in snap.get("segments", [])[:nseg]:
        g = dict(g)
        g["blocks"] = g.get("blocks", [])[:3]
        segs.append(g)
    s["segments"] = segs
    dev = [[] for _ in snap["device_traces"]]
    d = next((i for i, t in enumerate(snap["device_traces"]) if t), 0)
    dev[d] = entries
    s["device_traces"] = dev
    if "external_annotations" in snap:
        s["external_annotations"] = snap["external_annotations"][:6]
    return s

def fit(snap, pick, limit):
    """The largest window pick(n) whose pickle fits in limit bytes (n halves from 400)."""
    n = 400
    while n >= 2:
        for nseg in (3, 1, 0):
            b = pickle.dumps(cut(snap, pick(n), nseg), protocol=4)
            if len(b) <= limit:
                return b
        n //= 2
    return None

def windows(snap):
    if not isinstance(snap, dict):  # a bare segment list (memory_snapshot()["segments"])
        yield "segments", lambda n: snap[:n]
        return
    t = next((t for t in snap["device_traces"] if t), [])
    mid = len(t) // 2
    yield "head", lambda n: t[:n]
    yield "mid", lambda n: t[mid:mid + n]
    yield "tail", lambda n: t[-n:]
    def each(n):
        seen, pick = set(), []
        for e in t:
            if e.get("action") not in seen:
                seen.add(e.get("action"))
                pick.append(e)
        return pick[:n]
    yield "actions", each

def run(*args, inp=None):
    return subprocess.run([allocsim, *args], input=inp, capture_output=True)

def main():
    for k in lim:
        os.makedirs(os.path.join(out, k), exist_ok=True)
    i = 0
    for path in traces():
        snap = load(path)
        base = path[len("tests/data/"):].replace("/", "_").replace(".pickle.zst", "")
        for wname, pick in windows(snap):
            b = fit(snap, pick, lim["pickle"])
            if b is None:
                continue
            name = f"{base}_{wname}"
            with open(os.path.join(out, "pickle", name + ".pickle"), "wb") as f:
                f.write(b)
            nat = run("convert", "-", "-", "--native", inp=b)
            if nat.returncode == 0:
                raw = subprocess.run(["zstd", "-dc"], input=nat.stdout,
                                     capture_output=True).stdout
                with open(os.path.join(out, "native", name + ".bin"), "wb") as f:
                    f.write(raw[:lim["native"]])
            txt = run("convert", "-", "-", "--text", inp=b)
            if txt.returncode != 0:
                continue
            text = txt.stdout
            with open(os.path.join(out, "text", name + ".txt"), "wb") as f:
                f.write(text[:lim["text"]].rsplit(b"\n", 1)[0] + b"\n")
            spec = POLICIES[i % len(POLICIES)]
            cap = ["none", "268435456", "1073741824", "4294967296"][i % 4]
            head, _, body = text.partition(b"\n")
            pol = head + b"\n" + f"meta fuzz.policy={spec}\nmeta fuzz.capacity={cap}\n".encode()
            body = body[:lim["policy"] - len(pol) - 1].rsplit(b"\n", 1)[0] + b"\n"
            with open(os.path.join(out, "policy", name + ".txt"), "wb") as f:
                f.write(pol + body)
            argv = [["-p", spec, "-c", "1G", "--sites", "t"], ["info", "t"],
                    ["mincap", "-p", spec, "t"], ["check", "t"]][i % 4]
            cli = ("\n".join(argv) + "\n\n").encode() + text
            with open(os.path.join(out, "cli", name + ".txt"), "wb") as f:
                f.write(cli[:lim["cli"]].rsplit(b"\n", 1)[0] + b"\n")
            i += 1
    print(f"{i} windows from the real snapshots into {out}")

main()
