#!/bin/bash
# threads.sh - one device call (README.md): sim/README.md's Threads command on the GPU
# host's 16 cores, run from the repository root of a copy of the tree with build/allocsim
# built (static, as for ../validate-h200-s6/). Two rounds of 1, 2, 4, 8 and 16 threads,
# then each of the 16 settings alone on one thread and the decode alone. Bash's `time`
# (TIMEFORMAT), not /usr/bin/time, which the device image may lack.
set -u
P="-p torch -p bestfit -p firstfit -p segfit -p buddy -p bfc -p nocache -p torch,expandable=true
   -p torch,maxsplit=128 -p torch,roundup=4 -p torch,gc=0.6 -p torch,maxsplit=64
   -p bestfit,maxsplit=64 -p segfit,classes=pow2 -p firstfit,maxsplit=64 -p bfc,gc=true"
L=/tmp/l.zst
C=/tmp/csv
mkdir -p $C
build/allocsim convert --repeat 67 tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst $L
{ nproc; lscpu | grep -E "Model name|^CPU\(s\)|Thread|MHz"; uptime; build/allocsim --version
  cat REVISION; } > $OUT/machine.txt 2>&1
TIMEFORMAT="%R s wall, %U s user, %S s sys"
for round in 1 2; do
  for n in 1 2 4 8 16; do
    echo -n "round $round, $n threads: " >> $OUT/threads.txt
    { time build/allocsim -q --threads $n $P -f csv -o $C/t$n-r$round.csv $L > /dev/null; } \
      2>> $OUT/threads.txt
  done
done
for p in $P; do
  [ "$p" = -p ] && continue
  echo -n "$p alone, 1 thread: " >> $OUT/perpolicy.txt
  { time build/allocsim -q --threads 1 -p $p $L > /dev/null; } 2>> $OUT/perpolicy.txt
done
echo -n "decode only (info): " >> $OUT/perpolicy.txt
{ time build/allocsim info $L > /dev/null; } 2>> $OUT/perpolicy.txt
python3 -c 'import sys, tarfile, os
with tarfile.open(sys.argv[1], "w:xz") as t:
    for n in sorted(os.listdir(sys.argv[2])): t.add(os.path.join(sys.argv[2], n), arcname=n)' \
  $OUT/reports.tar.xz $C
cat $OUT/machine.txt $OUT/threads.txt $OUT/perpolicy.txt
ls -l $OUT
