#!/bin/bash
# threads.sh - one device call: allocsim's engine threads on the 16-core host.
# bin/allocsim-base: main at 1e0eeec (runs taken in index order, 4096-event batches);
# bin/allocsim-lptNk: runs taken costliest first, N x 1024-event batches (AS_ENGINE_BATCH).
# All four static PIEs built on the development machine. l.zst: llama_accum_ckpt x67.
cd "$(dirname "$0")"
P="-p torch -p bestfit -p firstfit -p segfit -p buddy -p bfc -p nocache -p torch,expandable=true
   -p torch,maxsplit=128 -p torch,roundup=4 -p torch,gc=0.6 -p torch,maxsplit=64
   -p bestfit,maxsplit=64 -p segfit,classes=pow2 -p firstfit,maxsplit=64 -p bfc,gc=true"
TIMEFORMAT="%R s wall, %U s user, %S s sys"
{ nproc; lscpu | grep -E "Model name|^CPU\(s\)|Thread|MHz"; uptime; bin/allocsim-base --version; } > $OUT/machine.txt 2>&1
for round in 1 2; do
  for t in 1 2 4 8 16; do
    [ $round = 2 ] && [ $t -lt 8 ] && continue
    for b in base lpt4k lpt16k lpt64k; do
      echo -n "round $round $b $t threads: " >> $OUT/threads.txt
      { time bin/allocsim-$b -q --threads $t $P -f csv -o $OUT/$b-t$t-r$round.csv l.zst >/dev/null; } 2>> $OUT/threads.txt
    done
  done
done
for p in $P; do
  [ "$p" = -p ] && continue
  echo -n "$p alone, 1 thread: " >> $OUT/perpolicy.txt
  { time bin/allocsim-lpt4k -q --threads 1 -p $p l.zst >/dev/null; } 2>> $OUT/perpolicy.txt
done
echo -n "decode only (info): " >> $OUT/perpolicy.txt
{ time bin/allocsim-lpt4k info l.zst >/dev/null; } 2>> $OUT/perpolicy.txt
