#!/bin/sh
# record2.sh - the second device call (README.md): record.sh's first call ran every policy
# (gmlake's two specs too) in 472 s, and its one tar.gz archive, 22 MB, was over the 16 MiB
# the device tool returns. Here: the policies of the third measurement (no gmlake, so it
# fits the second call's 450 s), the GPU's memory in use logged every second, and the
# outputs packed by pack.py into xz archives of at most ~14 MiB.
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
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader -lms 1000 > $V/gpumem.csv &
M=$!
PYTHONUNBUFFERED=1 timeout 405 python3 replay/validate.py --out $V --budget 395 \
  --async-budget 0 --jobs 4 \
  --policies 'torch;max_split_size_mb:128;expandable_segments:True;bestfit;nocache;firstfit;segfit;buddy;bfc' \
  > $V/validate.log 2>&1
echo "validate rc $? $(( $(date +%s) - t0 )) s" > $V/timing.txt
kill $M
tail -3 $V/validate.log
cp $V/summary.json $OUT/
python3 replay/data/validate-h200-s5/pack.py $V $OUT
rm -rf $V
ls -la $OUT
