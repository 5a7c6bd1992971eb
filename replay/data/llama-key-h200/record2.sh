#!/bin/sh
# record2.sh - the second device call of replay/data/llama-key-h200 (README.md): more harness
# variants for the same two configs, each run's snapshot kept until the next run's replaces
# it (--keep-snapshots last), with and without CUDA-event timing and PyTorch's default
# memory history. Run from the repository root; writes $OUT/keyh2.tar.gz.
set -u
R=$OUT/keyh2; mkdir -p $R
L=tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst
CAPS=$(python3 -c 'import json; k=json.load(open("tests/data/torch-2.11-h200-llama/key.json"))["llama_accum_ckpt"]; print(" ".join("--cap %d" % c["allowed_bytes"] for c in k["configs"]["default"]["caps"]))')
one() { # variant config-index config options...
  v=$1; i=$2; c=$3; shift 3
  timeout 75 python3 replay/torch_replay.py $L --key-protocol --conf "$c" --cap none $CAPS "$@" \
    --maps $R/${v}_$i.maps.json --json $R/${v}_$i.json --segments $R/${v}_$i.csv 2> $R/${v}_$i.log
  echo "$v $i rc $? $(( $(date +%s) - t0 )) s" >> $R/timing.txt
}
pair() { # variant options...: both configs side by side
  v=$1; shift
  one $v gc garbage_collection_threshold:0.6,max_split_size_mb:256 "$@" &
  one $v ms max_split_size_mb:128 "$@" &
}
pack() { (cd $OUT && tar czf keyh2.tar.gz.tmp keyh2 && mv keyh2.tar.gz.tmp keyh2.tar.gz); }
t0=$(date +%s)
# 29 GB each uncapped: four processes at a time; the archive after each batch
pair w1 --host-heap default --keep-snapshots last
pair w2 --host-heap default --keep-snapshots last --timing events
wait; pack
pair w0 --host-heap default --timing events
pair w3 --host-heap default --keep-snapshots last --history pytorch
wait; pack
pair w4 --host-heap default --keep-snapshots last --history pytorch --timing events
pair w5 --host-heap default --keep-snapshots all --history pytorch --timing events
wait; pack
pair w6 --host-heap default --keep-snapshots last --timing events --load-late
wait
echo "all $(( $(date +%s) - t0 )) s" >> $R/timing.txt
pack; cp $R/timing.txt $OUT/; ls -la $OUT
