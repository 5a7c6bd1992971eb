#!/bin/sh
# record3.sh - the third device call (README.md): the PyTorch runs that differed from the
# simulator in the wider validate, again with the worker's host memory from the brk heap
# (torch_replay.py --host-heap brk, now the default), and three llama configs.
set -u
R=$OUT/rec3; mkdir -p $R
B=build
$B/allocsim gen kvcache requests=40 layers=4 output_mean=128 prompt_mean=256 max_batch=16 -o $R/kvcache.zst
$B/allocsim gen kvcache requests=200 layers=8 output_mean=256 prompt_mean=512 max_batch=32 -o $R/kvcache_long.zst
S=tests/data/torch-2.11-h200-streams
L=tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst
one() { # name trace conf caps...
  n=$1; t=$2; c=$3; shift 3
  timeout 200 python3 replay/torch_replay.py $t --conf "$c" --key-protocol --allocsim $B/allocsim "$@" \
    --json $R/$n.json --segments $R/$n.csv 2> $R/$n.log
}
t0=$(date +%s)
one 13_kvcache_max_split_size_mb-128 $R/kvcache.zst max_split_size_mb:128 --cap 121634816 --cap 174063616 --cap 199229440 --cap 203423744 --cap 205520896 --cap 207618048 --cap 253755392 --cap 304087040 &
one 19_kvcache_long_torch $R/kvcache_long.zst default --cap 746586112 --cap 1056964608 --cap 1207959552 --cap 1233125376 --cap 1243611136 --cap 1245708288 --cap 1268776960 --cap 1302331392 --cap 1361051648 &
MS="--cap 8835301376 --cap 12517900288 --cap 14285799424 --cap 14579400704 --cap 14726201344 --cap 14728298496 --cap 15021899776 --cap 29664215040 --cap 44600131584"
TS="--cap 9250537472 --cap 13107200000 --cap 14956888064 --cap 15265169408 --cap 15418261504 --cap 15420358656 --cap 15728640000 --cap 17064525824 --cap 18708692992"
one 49_streams2_default_max_split_size_mb-128 $S/streams2_default.pickle.zst max_split_size_mb:128 $MS &
p1=$!
one 57_streams2_expandable_max_split_size_mb-128 $S/streams2_expandable_segments_True.pickle.zst max_split_size_mb:128 $MS &
p2=$!
wait $p1 $p2  # 44.6 GB each at their largest cap: the next ones start after them
echo "batch 1 $(( $(date +%s) - t0 )) s" >> $R/timing.txt
one 51_streams2_default_torch $S/streams2_default.pickle.zst default $TS &
one 59_streams2_expandable_torch $S/streams2_expandable_segments_True.pickle.zst default $TS &
CAPS=$(python3 -c 'import json; k=json.load(open("tests/data/torch-2.11-h200-llama/key.json"))["llama_accum_ckpt"]; print(" ".join("--cap %d" % c["allowed_bytes"] for c in k["configs"]["default"]["caps"]))')
i=0
for conf in default garbage_collection_threshold:0.6,max_split_size_mb:256 max_split_size_mb:128; do
  one llama_brk_$i $L "$conf" --cap none $CAPS &
  i=$((i+1))
done
wait
echo "all $(( $(date +%s) - t0 )) s" >> $R/timing.txt
rm -f $R/*.zst
cd $OUT && tar czf rec3.tar.gz rec3 && ls -la $OUT
