#!/bin/sh
# record.sh - one device call (README.md): the reservation probe (record_reserve.py), then
# the same validate.py run as ../validate-h200-gmlake/record.sh with this tree's build (the
# simulated device placing cuMemAddressReserve ranges in its chunked heap), every output
# packed into one gmlake.tar.zst under $OUT (the device tool returns at most eight files).
set -u
V=$OUT/gmlake
mkdir -p $V
t0=$(date +%s)
# the device image has no libjansson-dev: build/allocsim and build/allocsim-replay come built
# (make build/allocsim build/allocsim-replay LDLIBS="-Wl,-Bstatic -ljansson -lzstd
# -Wl,-Bdynamic -lm -pthread -ldl"); make only where they are missing
[ -x build/allocsim-replay ] && [ -x build/allocsim ] ||
  make -j16 build/allocsim replay > $V/build.log 2>&1 || { tail -30 $V/build.log; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $V/gpu.txt
{ build/allocsim --version; build/allocsim-replay --version; } > $V/version.txt 2>&1
timeout 45 python3 replay/record_reserve.py --out $V/reserve.csv --seeds 0-39 --ops 400 \
  --jobs 8 > $V/reserve.log 2>&1
echo "reserve rc $? $(( $(date +%s) - t0 )) s" > $V/timing.txt
timeout 170 python3 replay/validate.py --out $V/v \
  --traces resnet_varbatch,moe_like,llama_accum_ckpt,streams2_default,streams2_expandable,graph_probe \
  --policies 'gmlake;gmlake,fraglimit=2M' --no-pytorch --async-budget 0 --budget 160 --jobs 1 \
  > $V/validate.log 2>&1
echo "validate rc $? $(( $(date +%s) - t0 )) s" >> $V/timing.txt
tail -16 $V/validate.log
cd $OUT
if command -v zstd > /dev/null; then
  tar cf - gmlake | zstd -q -19 -T0 -o gmlake.tar.zst
else
  tar czf gmlake.tar.gz gmlake
fi
rm -rf gmlake
ls -la $OUT
