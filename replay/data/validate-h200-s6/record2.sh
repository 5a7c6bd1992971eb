#!/bin/sh
# record2.sh - the second device call (README.md): record.sh's call ran out of its 495 s
# before the last four nocache items (one device call per event; nocache goes last), so
# this one runs those four alone, the same way (same build, same capacities: the frontier
# search is deterministic), packed by replay/validate_pack.py.
set -u
V=$OUT/v
mkdir -p $V
t0=$(date +%s)
PYTHONUNBUFFERED=1 timeout 300 python3 replay/validate.py --out $V --budget 290 \
  --async-budget 0 --jobs 4 --policies nocache \
  --traces resnet_varbatch,streams2_default,streams2_expandable,transformer \
  > $V/validate.log 2>&1
echo "validate rc $? $(( $(date +%s) - t0 )) s" > $V/timing.txt
tail -3 $V/validate.log
python3 replay/validate_pack.py $V $OUT --files 3
rm -rf $V
ls -l $OUT
