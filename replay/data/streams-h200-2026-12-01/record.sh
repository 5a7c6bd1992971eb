#!/bin/sh
# record.sh - what made this folder: one device call on an H200 (92.9 s), from the
# repository root, with the three scripts it needs (probe_streams.py, probe_nearfull.py,
# rawcuda.py); everything under $OUT/s, packed into one archive.
set -u
mkdir -p $OUT/s
(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
 nvidia-smi --query-compute-apps=pid,used_memory --format=csv) > $OUT/s/gpu.txt 2>&1
PYTHONUNBUFFERED=1 timeout 180 python3 replay/probe_streams.py --out $OUT/s --jobs 8 2>&1 | tee $OUT/s/log.txt
tar -C $OUT -cJf $OUT/streams-h200.tar.xz s && rm -rf $OUT/s
# here: addr.jsonl and cap.jsonl compressed with zstd -19; log.txt kept as timing.txt
