#!/bin/sh
# record.sh - the fourth `make validate` on the H200 (README.md): one device call, from the
# repository root of a copy of the tree, every output packed into one archive under $OUT
# (the device tool returns at most eight files). Same command as `make validate
# VALIDATE_ARGS="--async-budget 0 --jobs 4 --budget 525"`, without make (below).
set -u
V=$OUT/val
mkdir -p $V
t0=$(date +%s)
# the device image has no libjansson-dev and no zstd CLI: build/allocsim and
# build/allocsim-replay come built (glibc 2.36; make build/allocsim replay
# LDLIBS="-Wl,-Bstatic -ljansson -lzstd -Wl,-Bdynamic -lm -pthread -ldl"), so make, which
# would rebuild them, is not called; it builds only where they are missing
[ -x build/allocsim-replay ] && [ -x build/allocsim ] ||
  make -j16 build/allocsim replay > $V/build.log 2>&1 || { tail -30 $V/build.log; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $V/gpu.txt
{ build/allocsim --version; build/allocsim-replay --version; cat REVISION;
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } \
  > $V/version.txt 2>&1
PYTHONUNBUFFERED=1 timeout 540 python3 replay/validate.py --out $V/v --budget 525 \
  --async-budget 0 --jobs 4 > $V/validate.log 2>&1
echo "validate rc $? $(( $(date +%s) - t0 )) s" > $V/timing.txt
tail -4 $V/validate.log
cp $V/v/summary.json $V/v/summary.md $V/
# every output but the per-call timing logs (--calls: one row per device call, not compared)
# and the generated traces (allocsim gen makes them again, the same bytes)
cd $OUT && tar czf val.tar.gz --exclude='*.calls.csv' --exclude='*.zst' val && rm -rf val && ls -la $OUT
