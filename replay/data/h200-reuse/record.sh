#!/bin/sh
# record.sh - what made this folder (one device call on an H200; see README.md).
# Run from the repository root with build/allocsim and build/allocsim-replay built
# (make build/allocsim replay); writes everything under $OUT/rec and packs it.
set -u
R=$OUT/rec; mkdir -p $R
L=tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst
S=tests/data/torch-2.11-h200-streams
B=build
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  $B/allocsim-replay --version; } > $R/versions.txt 2>&1
CAPS=$(python3 -c 'import json; k=json.load(open("tests/data/torch-2.11-h200-llama/key.json"))["llama_accum_ckpt"]; print(" ".join("--cap %d" % c["allowed_bytes"] for c in k["configs"]["default"]["caps"]))')
t0=$(date +%s)
# Phase A: nothing here depends on the GPU's free memory, so it runs side by side.
i=0
for conf in default expandable_segments:True garbage_collection_threshold:0.6,max_split_size_mb:256 \
    max_split_size_mb:128 max_split_size_mb:128,expandable_segments:True roundup_power2_divisions:4 \
    'roundup_power2_divisions:[256:1,512:2,1024:4,>:8]'; do
  timeout 300 python3 replay/torch_replay.py $L --key-protocol --conf "$conf" --cap none $CAPS \
    --json $R/llama_$i.json --segments $R/llama_$i.csv 2> $R/llama_$i.log &
  i=$((i+1))
done
timeout 240 python3 replay/record_reuse.py --out $R/reuse.csv --seeds 0-79 --ops 600 --jobs 4 2> $R/reuse.log &
for f in default expandable_segments_True; do
  conf=$(echo $f | sed 's/_True/:True/')
  timeout 200 python3 replay/torch_replay.py $S/streams2_$f.pickle.zst --conf $conf \
    --json $R/streams_$f.pytorch.json --segments $R/streams_$f.pytorch.csv 2> $R/streams_$f.pytorch.log
  spec=$(echo $conf | sed 's/^default$/torch/')
  timeout 200 $B/allocsim-replay -f json -p $spec -o $R/streams_$f.replay.json \
    --segments $R/streams_$f.replay.csv $S/streams2_$f.pickle.zst 2> $R/streams_$f.replay.log
done
wait
echo "phase A $(( $(date +%s) - t0 )) s" >> $R/timing.txt
# Phase B: alone on the GPU (a ballast sets the free memory).
timeout 200 python3 replay/probe_nearfull.py --out $R/nearfull.jsonl 2> $R/nearfull.log
echo "probe $(( $(date +%s) - t0 )) s" >> $R/timing.txt
$B/allocsim gen kvcache requests=200 layers=8 output_mean=256 prompt_mean=512 max_batch=32 -o $R/kv.zst
P="-p firstfit -p bestfit -p segfit"
C=""; for m in 1060 1066 1070 1074 1076 1080 1090 1100 1150 1250; do C="$C -c ${m}MiB"; done
timeout 150 $B/allocsim-replay -f json $P $C -o $R/kv_near.replay.json --segments $R/kv_near.replay.csv \
  --latency $R/kv_near.lat.csv $R/kv.zst 2> $R/kv_near.replay.log
$B/allocsim -q -f json $P $C -o $R/kv_near.pred.json --segments $R/kv_near.pred.csv $R/kv.zst
rm -f $R/kv.zst
echo "all $(( $(date +%s) - t0 )) s" >> $R/timing.txt
cd $OUT && tar czf rec.tar.gz rec && cp rec/timing.txt rec/versions.txt . ; ls -la $OUT
