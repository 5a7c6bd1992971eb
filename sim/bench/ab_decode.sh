#!/bin/sh
# ab_decode.sh - CPU of one snapshot decode per process, two or more allocsim-bench builds
# side by side: ROUNDS rounds, the builds in turn within each (so a load that comes and goes
# falls on all of them), perf's task-clock of `allocsim-bench --child 7 1 PICKLE 1 0`.
# Prints each build's median and lowest, in ms. The bench's own best-of-N cells move by
# 20-30 % on a shared 2-core VM; medians of alternating runs move by a few per cent.
#
# usage: sim/bench/ab_decode.sh PICKLE ROUNDS BENCH...   (needs perf)
set -eu
p=${1:?usage: ab_decode.sh PICKLE ROUNDS BENCH...}
rounds=${2:?usage}
shift 2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ab_decode.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
i=0
while [ "$i" -lt "$rounds" ]; do
    k=0
    for b in "$@"; do
        perf stat -x, -e task-clock "$b" --child 7 1 "$p" 1 0 2>&1 >/dev/null |
            awk -F, '/task-clock/ { print $1 }' >>"$tmp/$k"
        k=$((k + 1))
    done
    i=$((i + 1))
done
k=0
for b in "$@"; do
    sort -n "$tmp/$k" | awk -v b="$b" '{ a[NR] = $1 }
        END { printf "%-40s median %8.2f ms  lowest %8.2f ms  (%d runs)\n", b, a[int((NR + 1) / 2)], a[1], NR }'
    k=$((k + 1))
done
