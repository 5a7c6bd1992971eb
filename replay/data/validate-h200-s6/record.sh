#!/bin/sh
# record.sh - the fifth `make validate` on the H200 (README.md): one device call from the
# repository root of a copy of the tree. The same as `make validate VALIDATE_ARGS="--budget
# 495 --async-budget 0 --jobs 4"`, without make: the device image has no libjansson-dev and
# no zstd CLI, so build/allocsim and build/allocsim-replay come built (make's default
# STATIC=1 links libjansson and libzstd statically; make would rebuild them there). Every
# policy (gmlake's two specs too); the GPU's memory in use logged every second; the
# outputs packed by replay/validate_pack.py into at most seven files under 14 MiB each.
set -u
V=$OUT/v
mkdir -p $V
t0=$(date +%s)
[ -x build/allocsim-replay ] && [ -x build/allocsim ] ||
  make -j16 build/allocsim replay > $V/build.log 2>&1 || { tail -30 $V/build.log; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $V/gpu.txt
{ build/allocsim --version; build/allocsim-replay --version; cat REVISION;
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } \
  > $V/version.txt 2>&1
# what the harness calls in this torch: use_mem_pool and MemPool's Python side
python3 -c 'import inspect, torch.cuda.memory as m
print(inspect.getsource(m.use_mem_pool)); print(inspect.getsource(m.MemPool))' \
  > $V/torch_mempool.txt 2>&1
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader -lms 1000 > $V/gpumem.csv &
M=$!
PYTHONUNBUFFERED=1 timeout 505 python3 replay/validate.py --out $V --budget 495 \
  --async-budget 0 --jobs 4 > $V/validate.log 2>&1
echo "validate rc $? $(( $(date +%s) - t0 )) s" > $V/timing.txt
kill $M
tail -3 $V/validate.log
python3 replay/validate_pack.py $V $OUT
echo "packed at $(( $(date +%s) - t0 )) s"
rm -rf $V
ls -l $OUT
