#!/bin/sh
# record.sh - the stitched gmlake device call (README.md): the validate.py run of
# ../validate-h200-gmlake/ again, now with the stitched blocks mapped on the GPU (device ABI 3:
# alias/unalias) and every device call's time logged (allocsim-replay --calls), then every
# output packed into one archive under $OUT (the device tool returns at most eight files).
set -u
V=$OUT/stitch
mkdir -p $V
t0=$(date +%s)
# the device image has no libjansson-dev and no zstd CLI: build/allocsim and
# build/allocsim-replay come built here (glibc 2.36; make build/allocsim replay
# LDLIBS="-Wl,-Bstatic -ljansson -lzstd -Wl,-Bdynamic -lm -pthread -ldl"); make only where
# they are missing
[ -x build/allocsim-replay ] && [ -x build/allocsim ] ||
  make -j16 build/allocsim replay > $V/build.log 2>&1 || { tail -30 $V/build.log; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $V/gpu.txt
{ build/allocsim --version; build/allocsim-replay --version; } > $V/version.txt 2>&1
timeout 250 python3 replay/validate.py --out $V/v \
  --traces resnet_varbatch,moe_like,llama_accum_ckpt,streams2_default,streams2_expandable,graph_probe \
  --policies 'gmlake;gmlake,fraglimit=2M' --no-pytorch --async-budget 0 --budget 230 --jobs 1 \
  > $V/validate.log 2>&1
echo "rc $? $(( $(date +%s) - t0 )) s" > $V/timing.txt
tail -16 $V/validate.log
cd $OUT
tar czf stitch.tar.gz stitch
rm -rf stitch
ls -la $OUT
