#!/bin/sh
# callgrind.sh - instructions per event of whole allocsim processes, two builds side by
# side: the deterministic counterpart of make bench's CPU-time table (on a shared, loaded
# machine CPU time moves by tens of percent from run to run; instruction counts do not).
#
# usage: sim/bench/callgrind.sh OLD NEW TRACE...
#   OLD, NEW: allocsim binaries; TRACE: native traces (e.g. build/bench's, or
#   'allocsim convert --repeat N' of a snapshot). Needs valgrind.
# Prints, per policy setting and trace, instructions per event old -> new and the change.
set -eu
old=${1:?usage: callgrind.sh OLD NEW TRACE...}
new=${2:?usage: callgrind.sh OLD NEW TRACE...}
shift 2
specs=${SPECS:-"torch torch,expandable=true torch,maxsplit=128 torch,roundup=4 bestfit firstfit segfit
buddy bfc nocache"}

ir() { # instructions of one whole run of $1 with policy $2 on $3
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" run -q -p "$2" --threads 1 \
        "$3" 2>&1 >/dev/null | awk '/Collected/ { print $4 }'
}

printf '%-26s' "instructions/event"
for t in "$@"; do printf '  %-24s' "$(basename "$t" .zst)"; done
printf '\n%-26s' "events"
for t in "$@"; do
    printf '  %-24s' "$("$new" run -p bestfit --threads 1 "$t" | awk 'NR == 1 { print $2 }')"
done
printf '\n'
for s in $specs; do
    printf '%-26s' "$s"
    for t in "$@"; do
        n=$("$new" run -p bestfit --threads 1 "$t" | awk 'NR == 1 { print $2 }')
        a=$(ir "$old" "$s" "$t")
        b=$(ir "$new" "$s" "$t")
        printf '  %-24s' "$(awk -v a="$a" -v b="$b" -v n="$n" \
            'BEGIN { printf "%.0f->%.0f (%+.1f%%)", a / n, b / n, (b - a) * 100 / a }')"
    done
    printf '\n'
done
