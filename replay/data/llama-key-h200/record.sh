#!/bin/sh
# record.sh - the first device call of replay/data/llama-key-h200 (README.md): the llama
# key's two configs whose cells the H200's replay did not reproduce, replayed with the key's
# protocol under harness variants, each process's /proc/self/maps logged at every moment of
# every run (torch_replay.py --maps). Run from the repository root; writes $OUT/keyh.tar.gz.
set -u
R=$OUT/keyh; mkdir -p $R
L=tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch, sys; print("torch", torch.__version__, "cuda", torch.version.cuda, "python", sys.version.split()[0])'
  ldd --version | head -1; uname -r; } > $R/versions.txt 2>&1
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
pack() { (cd $OUT && tar czf keyh.tar.gz.tmp keyh && mv keyh.tar.gz.tmp keyh.tar.gz); }
t0=$(date +%s)
# 29 GB each uncapped: four processes at a time; the archive after each batch
pair v0 --host-heap default
pair v1 --host-heap default --keep-snapshots
wait; pack
pair v2 --host-heap default --keep-snapshots --timing events
pair v4 --host-heap default --keep-snapshots --load-late
wait; pack
pair v3 --host-heap default --pinned-bytes 4096
pair v5 --host-heap default --keep-snapshots --history pytorch
wait
echo "all $(( $(date +%s) - t0 )) s" >> $R/timing.txt
pack; cp $R/timing.txt $OUT/; ls -la $OUT
