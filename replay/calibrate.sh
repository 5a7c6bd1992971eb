#!/usr/bin/env bash
# calibrate.sh OUTDIR [SECONDS] - on the GPU machine: the device model's calibration and
# the PyTorch ground-truth replays, in one go (replay/PLACEMENT.md, replay/RESULTS.md).
#   1. allocsim-calib: cudaMalloc placement, capacity exactness, call latencies;
#   2. torch_replay.py over the shared real snapshots, every config of the key, with the
#      key's protocol and caps, segment addresses recorded;
#   3. the same snapshots through backend:cudaMallocAsync, the caps enforced by a ballast.
# Everything goes to OUTDIR/; each step is time-boxed so the whole fits in SECONDS.
set -u
out=${1:?usage: calibrate.sh OUTDIR [SECONDS]}
budget=${2:-480}
mkdir -p "$out"
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
log() { echo "[$(( $(date +%s) - start ))s] $*"; }
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1

{
    git log -1 --oneline 2>/dev/null
    uname -a; cat /etc/os-release 2>/dev/null | head -2
    nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv 2>&1
    ls /usr/include/zstd.h /usr/include/CUnit/CUnit.h 2>&1
    ldconfig -p | grep -E 'libzstd|libcunit' ; command -v zstd gcc nvcc
    $py -c 'import torch, sys; print(sys.version); print(torch.__version__, torch.cuda.get_device_name(0))'
} > "$out/env.txt" 2>&1
log "env done"

make -j8 replay > "$out/build.log" 2>&1 || log "make replay failed (see build.log)"
if [ -x build/allocsim-calib ]; then
    timeout $(( $(left) / 3 )) build/allocsim-calib "$out/calib" > "$out/calib.log" 2>&1
    log "calib rc=$?"
fi

caps_of() { grep "^$1 " replay/data/key_caps.txt | cut -d' ' -f2-; }
torch_run() { # trace name, config...
    local name=$1; shift
    local capargs="--cap none"
    for c in $(caps_of "$name"); do capargs="$capargs --cap $c"; done
    local confargs=""
    for c in "$@"; do confargs="$confargs --conf $c"; done
    [ "$(left)" -lt 40 ] && { log "skip $name $*: out of time"; return; }
    timeout $(( $(left) - 20 )) $py replay/torch_replay.py "tests/data/torch-2.11-h200/$name.pickle.zst" \
        --key-protocol $capargs $confargs --json "$out/torch_${name}_$TAG.json" \
        --segments "$out/torch_${name}_$TAG.csv" >> "$out/torch.log" 2>&1
    log "torch $name $TAG rc=$?"
}
TAG=main torch_run resnet_varbatch default expandable_segments:True max_split_size_mb:128
TAG=main torch_run moe_like default expandable_segments:True max_split_size_mb:128
TAG=async torch_run resnet_varbatch backend:cudaMallocAsync
TAG=async torch_run moe_like backend:cudaMallocAsync
TAG=more torch_run resnet_varbatch "garbage_collection_threshold:0.6,max_split_size_mb:256" \
    "max_split_size_mb:128,expandable_segments:True" "roundup_power2_divisions:4" \
    "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]"
log "all done"
