#!/usr/bin/env python3
"""viz_check.py DIR - torch.cuda._memory_viz over every `allocsim run --snapshot-out` pickle
in DIR, on a machine with PyTorch (README.md beside it says how it was run).

For each file, in one process (torch is imported once): stats (segsum: asserts that each
segment's blocks add up to its size), trace (the Pythonic listing, which names each alloc's
segment and offset), trace_plot (allocations and, with -s, segments) and segment_plot (the
HTML pages: the pickle embedded for MemoryViz.js, decoded here and compared with the file),
and segments/memory (the flamegraph input lines; flamegraph.pl itself needs the network).
One CLI run (`python3 -m torch.cuda._memory_viz stats`) shows the command line takes the
files too. Prints a few lines per file; exit 1 when any view failed.
"""
import base64
import glob
import json
import os
import pickle
import subprocess
import sys
import traceback

import torch
from torch.cuda import _memory_viz as mv


def embedded(html):
    """The pickle a trace_plot/segment_plot page embeds, loaded."""
    start = html.index("const local_files = ") + len("const local_files = ")
    files = json.loads(html[start:html.index("\n", start)])
    return pickle.loads(base64.b64decode(files[0]["base64"]))


def flame_lines(text):
    lines = [l for l in text.splitlines() if l]
    return len(lines), sum(int(l.rsplit(" ", 1)[1]) for l in lines)


def one(path, out_dir):
    with open(path, "rb") as f:
        data = pickle.load(f)
    name = os.path.basename(path)
    res = [f"== {name}"]
    s = mv.segsum(data).splitlines()
    res.append("stats: " + "; ".join(l for l in s if l.startswith(("segments:", "total_"))))
    t = mv.trace(data).splitlines()
    res.append(f"trace: {len(t)} lines, {sum('OutOfMemoryError' in l for l in t)} OOM, "
               f"{sum('cudaMalloc(' in l for l in t)} cudaMalloc, "
               f"{sum(' = MEM[' in l for l in t)} allocs outside every segment; {t[-1]}")
    for kind, html in (("trace_plot", mv.trace_plot(data)),
                       ("trace_plot -s", mv.trace_plot(data, plot_segments=True)),
                       ("segment_plot", mv.segment_plot(data))):
        same = embedded(html) == data
        res.append(f"{kind}: {len(html)} B of HTML, embedded snapshot equal to the file: {same}")
        if not same:
            raise AssertionError(f"{kind}: the embedded snapshot differs")
    n1, b1 = flame_lines(mv.segments(data, format_flamegraph=lambda x: x))
    n2, b2 = flame_lines(mv.memory(data, format_flamegraph=lambda x: x))
    reserved = sum(sg["total_size"] for sg in data["segments"])
    res.append(f"segments: {n1} flamegraph lines, {b1} B; memory: {n2} lines, {b2} B; "
               f"segments' total_size {reserved} B")
    return res


def main():
    d = sys.argv[1]
    print(f"torch {torch.__version__}, {mv.__file__.split('site-packages/')[-1]}")
    files = sorted(glob.glob(os.path.join(d, "*.pickle")))
    bad = 0
    for p in files:
        try:
            print("\n".join(one(p, d)))
        except Exception:
            bad += 1
            print(f"== {os.path.basename(p)}: FAILED\n{traceback.format_exc()}")
    r = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "stats", files[0]],
                       capture_output=True, text=True)
    print(f"cli: python3 -m torch.cuda._memory_viz stats {os.path.basename(files[0])}: exit "
          f"{r.returncode}, {len(r.stdout.splitlines())} lines")
    bad += r.returncode != 0
    print(f"{len(files) - bad} of {len(files)} files rendered in every view")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
