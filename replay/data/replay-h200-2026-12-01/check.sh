export LD_LIBRARY_PATH=$PWD/.gpu/bin; B=.gpu/bin; R=tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst
{ $B/allocsim --version; $B/allocsim-replay --version; nproc; } > $OUT/versions.txt 2>&1
P="-p torch -p expandable_segments:True -p max_split_size_mb:128 -p bestfit -p segfit"
timeout 200 $B/allocsim-replay -f json $P -c 8812000000 -c 9GiB $R -o $OUT/replay.json > $OUT/replay.log 2>&1; echo "replay rc=$?" >> $OUT/replay.log
$B/allocsim -q -f json $P -c 8812000000 -c 9GiB $R -o $OUT/sim.json
$B/allocsim compare $OUT/sim.json $OUT/replay.json > $OUT/compare.txt 2>&1; echo "compare rc=$?" >> $OUT/compare.txt
$B/allocsim convert --repeat 67 tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst /tmp/l.zst
TIMEFORMAT="%R s wall, %U s user"
for t in 1 2 4 8 16; do echo -n "$t threads: "; { time $B/allocsim -q --threads $t -p torch -p bestfit -p firstfit -p segfit -p buddy -p bfc -p nocache -p torch,expandable=true -p torch,maxsplit=128 -p torch,roundup=4 -p torch,gc=0.6 -p torch,maxsplit=64 -p bestfit,maxsplit=64 -p segfit,classes=pow2 -p firstfit,maxsplit=64 -p bfc,gc=true /tmp/l.zst >/dev/null; } 2>&1; done > $OUT/threads.txt
