#!/bin/bash
# replay each recording's imported events through PyTorch's allocator (torch_replay.py), from
# the repository root on the GPU machine, with build/allocsim there (the importer)
mkdir -p /tmp/r
for f in replay/data/h200-pool-xstream/*.pickle.zst; do
  n=$(basename $f .pickle.zst); conf=default; cap=none
  case $n in *_exp) conf=expandable_segments:True;; capture_oom|mp_oom|mp_oom_thread) cap=1501098803;; esac
  timeout 60 python3 replay/torch_replay.py $f --conf $conf --cap $cap --allocsim build/allocsim \
    --json /tmp/r/$n.json --segments /tmp/r/$n.csv 2> /tmp/r/$n.log; echo "$n rc=$?"
done
