#!/bin/sh
# record.sh PART [VALIDATE ARGS...] - one device call of the sixth `make validate` on the
# H200 (README.md), from the repository root of a copy of the tree: replay/validate.py
# --part PART (I/N) of the whole plan, as `make validate VALIDATE_ARGS="--part PART
# --budget 530 --async-budget 0 --jobs 4 ..."` would, without make: the device image has
# no libjansson-dev and no zstd CLI, so build/allocsim and build/allocsim-replay come built
# (libjansson and libzstd linked statically). The GPU's memory in use logged every
# second; this torch's CUDA graph and MemPool Python side kept (what --pools capture
# calls); the outputs packed by replay/validate_pack.py into at most seven files under
# 14 MiB each.
set -u
P=$1
shift
V=$OUT/v
mkdir -p $V
t0=$(date +%s)
[ -x build/allocsim-replay ] && [ -x build/allocsim ] || { echo "no build/allocsim*"; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $V/gpu.txt
{ build/allocsim --version; build/allocsim-replay --version; cat REVISION;
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } \
  > $V/version.txt 2>&1
python3 -c 'import inspect, torch.cuda.graphs as g, torch.cuda.memory as m
for f in (g.CUDAGraph, g.graph, m.use_mem_pool, m.MemPool): print(inspect.getsource(f))' \
  > $V/torch_graphs.txt 2>&1
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader -lms 1000 > $V/gpumem.csv &
M=$!
PYTHONUNBUFFERED=1 timeout 540 python3 replay/validate.py --out $V --part $P --budget 530 \
  --async-budget 0 --jobs 4 "$@" > $V/validate.log 2>&1
echo "validate --part $P $* rc $? $(( $(date +%s) - t0 )) s" > $V/timing.txt
kill $M
tail -3 $V/validate.log
python3 replay/validate_pack.py $V $OUT
echo "packed at $(( $(date +%s) - t0 )) s"
rm -rf $V
ls -l $OUT
