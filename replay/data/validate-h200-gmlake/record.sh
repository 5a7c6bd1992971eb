#!/bin/sh
# record.sh - the second gmlake device call (README.md): build, the same validate.py run as
# the first call, then every output packed into one gmlake.tar.zst under $OUT (the device
# tool returns at most eight files; the first call lost summary.json that way).
set -u
V=$OUT/gmlake
mkdir -p $V
t0=$(date +%s)
# the device image has no libjansson-dev: build/allocsim and build/allocsim-replay come built
# (glibc 2.36, libjansson and libzstd from their archives: make ... LDLIBS="-Wl,-Bstatic
# -ljansson -lzstd -Wl,-Bdynamic -lm -pthread -ldl"); make only where they are missing
[ -x build/allocsim-replay ] && [ -x build/allocsim ] ||
  make -j16 build/allocsim replay > $V/build.log 2>&1 || { tail -30 $V/build.log; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $V/gpu.txt
{ build/allocsim --version; build/allocsim-replay --version; } > $V/version.txt 2>&1
timeout 330 python3 replay/validate.py --out $V/v \
  --traces resnet_varbatch,moe_like,llama_accum_ckpt,streams2_default,streams2_expandable,graph_probe \
  --policies 'gmlake;gmlake,fraglimit=2M' --no-pytorch --async-budget 0 --budget 230 --jobs 1 \
  > $V/validate.log 2>&1
echo "rc $? $(( $(date +%s) - t0 )) s" > $V/timing.txt
tail -16 $V/validate.log
cd $OUT
if command -v zstd > /dev/null; then
  tar cf - gmlake | zstd -q -19 -T0 -o gmlake.tar.zst
else
  tar czf gmlake.tar.gz gmlake
fi
rm -rf gmlake
ls -la $OUT
