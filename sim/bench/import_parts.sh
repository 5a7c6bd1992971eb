#!/bin/sh
# import_parts.sh - instructions per event of a snapshot pickle's import, by part, two builds
# side by side (callgrind, whole process: allocsim-bench --child 7 decodes the file once).
#
# usage: sim/bench/import_parts.sh OLD_BENCH NEW_BENCH ALLOCSIM PICKLE...
#   OLD_BENCH, NEW_BENCH: allocsim-bench binaries; ALLOCSIM: an allocsim (counts the events);
#   PICKLE: plain (decompressed) snapshot pickles. Needs valgrind.
# Parts (inclusive costs): scanner = as_pk_stream_next_entries (the pickle scanner and VM);
# importer = feed_all less as_evlog_put; log = as_evlog_put + as_evlog_get + as_evlog_get_many
# (a build reads its log through one of the two); hand-out = as_trace_next_batch less the
# log's reads (the events to the reader, the validator, the pools).
set -eu
old=${1:?usage: import_parts.sh OLD_BENCH NEW_BENCH ALLOCSIM PICKLE...}
new=${2:?usage}
as=${3:?usage}
shift 3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/import_parts.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
parts() { # instructions in all, scanner, importer, log, hand-out of bench $1 on $2
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$1" --child 7 1 "$2" 1 0 \
        >/dev/null 2>&1
    callgrind_annotate --inclusive=yes "$tmp/cg" 2>/dev/null | awk '
        function v(s) { gsub(",", "", s); return s + 0 }
        /PROGRAM TOTALS/ && !t { t = v($1) }
        /:as_pk_stream_next_entries / { sc = v($1) }
        /:feed_all / { fa = v($1) }
        /:as_evlog_put / { put = v($1) }
        /:as_evlog_get / && !g1 { g1 = v($1) }
        /:as_evlog_get_many / && !g2 { g2 = v($1) }
        /:as_trace_next_batch / { nb = v($1) }
        END { get = g1 + g2; print t, sc, fa - put, put + get, nb - get }'
}
printf '%-28s %9s  %-13s %-13s %-11s %-9s %-11s\n' pickle events "in all" scanner importer \
    log hand-out
for f in "$@"; do
    n=$("$as" info "$f" | awk '/^events:/ { print $2; exit }')
    set -- $(parts "$old" "$f")
    o1=$1 o2=$2 o3=$3 o4=$4 o5=$5
    set -- $(parts "$new" "$f")
    awk -v n="$n" -v name="$(basename "$f" .pickle)" -v a="$o1 $o2 $o3 $o4 $o5" \
        -v b="$1 $2 $3 $4 $5" 'BEGIN {
        split(a, x, " "); split(b, y, " ")
        printf "%-28s %9d ", name, n
        w[1] = 13; w[2] = 13; w[3] = 11; w[4] = 9; w[5] = 11
        for (i = 1; i <= 5; i++)
            printf " %-" w[i] "s", sprintf("%.0f->%.0f", x[i] / n, y[i] / n)
        printf "\n" }'
done
