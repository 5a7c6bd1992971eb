#!/usr/bin/env bash
# tune_validate.sh - one device call (run from the repository root on the GPU machine, OUT set
# to a folder for the results): memory outside the allocator (measure_outside.py), then
# what allocsim tune recommended at each shared snapshot's card size, against the default,
# through PyTorch's own allocator (torch_replay.py). replay/tune_table.py reads the results.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $OUT/gpu.txt 2>&1
timeout 150 python3 replay/measure_outside.py --out $OUT/outside.json > $OUT/outside.log 2>&1; echo "outside rc=$?" >> $OUT/outside.log
run() { # name trace cap conf
  timeout 300 python3 replay/torch_replay.py --conf "$4" --cap $3 --json $OUT/$1.json $2 > $OUT/$1.log 2>&1; echo "rc=$?" >> $OUT/$1.log; }
R=tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst; M=tests/data/torch-2.11-h200/moe_like.pickle.zst; L=tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst
run resnet_default $R 8812000000 default &
run resnet_rec $R 8812000000 expandable_segments:True &
run moe_default $M 11212000000 default &
run moe_rec $M 11212000000 max_split_size_mb:64,roundup_power2_divisions:2,garbage_collection_threshold:0.8 &
run llama_default $L 7801934592 default &
run llama_rec $L 7801934592 max_split_size_mb:64,garbage_collection_threshold:0.6 &
wait
cd $OUT && tar czf replays.tgz *.json *.log && rm -f resnet_* moe_* llama_*
ls -la $OUT
