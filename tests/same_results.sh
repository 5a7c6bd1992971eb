#!/bin/sh
# same_results.sh - do two allocsim builds give the same answers? For policy work that must
# not change a result (index and pool rewrites): every trace in the repository (the real
# snapshots, the samples, the pathological traces) through every policy and the main knob
# settings, with no capacity and at 1.02x, 1.1x and 1.3x the trace's peak request (OOMs,
# releases, garbage collection), once plainly and once with --keep-going, with the
# --segments log and the --timeline file, and once with neither (--segments turns the
# engine's lean loops off, so only that pass runs them); the JSON reports (host timings
# removed), the logs and the timeline files must be byte-identical.
#
# usage: tests/same_results.sh BASE [NEW]
#   BASE: a git revision (built into a temporary directory) or an allocsim binary
#   NEW:  an allocsim binary (default build/allocsim)
#   SPECS (environment): the policy settings to compare, space-separated (default: below)
# Run from the repository root. Exit 0 when every report is identical, 1 otherwise.
set -eu

base=${1:?usage: tests/same_results.sh BASE [NEW]}
new=${2:-build/allocsim}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/same-results.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

if [ -x "$base" ] && [ ! -d "$base" ]; then
    old=$base
else
    rev=$(git rev-parse --verify "$base^{commit}")
    echo "same_results: building $rev into $tmp/base"
    mkdir "$tmp/base"
    git archive "$rev" | tar -x -C "$tmp/base"
    make -C "$tmp/base" -j2 build/allocsim >/dev/null
    old=$tmp/base/build/allocsim
fi
[ -x "$new" ] || { echo "same_results: $new is not built" >&2; exit 1; }

specs=${SPECS:-"torch torch,expandable=true torch,maxsplit=128 torch,roundup=4 torch,gc=0.6
torch,maxsplit=40,expandable=true torch,gc=0.9,maxsplit=64,roundup=[256:1,>:8]
torch,sync_frees=true,large_segment=40 bestfit bestfit,maxsplit=64,release=always
firstfit firstfit,maxsplit=64,round=4096 segfit segfit,classes=pow2,coalesce=false
segfit,split=false buddy bfc nocache cudamallocasync cudamallocasync,release_threshold=max
gmlake gmlake,fraglimit=2M"}

traces=$(ls replay/data/*.pickle.zst tests/data/*.pickle.zst tests/data/*/*.pickle.zst \
    traces/samples/*.zst traces/samples/*.csv traces/samples/*.txt \
    traces/samples/pathological/*.zst 2>/dev/null | sort -u)

# Host timings differ from run to run; everything else must not. The schema number and
# schema 3's yardstick fields (computed from the runs' peak reserved, which are compared)
# are set aside, so that builds on either side of schema 3 compare.
strip() {
    sed -E -e 's/"(wall_s|cpu_s|events_per_second)": [-0-9.e+]+/"\1": 0/g' \
        -e 's/"schema": [0-9]+/"schema": N/' \
        -e 's/, "planned_peak_reserved": [0-9nul]+, "vs_planned": [-0-9.e+nul]+, "vs_requested": [-0-9.e+nul]+//g' "$1"
}

runs=0 bad=0
for t in $traces; do
    peak=$("$new" -q -f csv -p nocache "$t" |
        awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "peak_requested") c = i }
                 NR == 2 { print $c }')
    caps="-c none"
    for f in 1.02 1.1 1.3; do
        caps="$caps -c $(awk -v p="$peak" -v f="$f" 'BEGIN { printf "%.0f", p * f }')"
    done
    pols=""
    for s in $specs; do pols="$pols -p $s"; done
    for mode in plain --keep-going lean; do
        kg=""
        [ "$mode" != --keep-going ] || kg=--keep-going
        for side in old new; do
            bin=$old
            [ $side = old ] || bin=$new
            if [ "$mode" = lean ]; then
                # no per-event output: the runs take the engine's lean loops (and a built-in
                # policy's own copy, policies/builtin.h), which --segments turns off
                # shellcheck disable=SC2086
                "$bin" -q -f json $pols $caps "$t" >"$tmp/$side.json" 2>"$tmp/$side.err" || true
                : >"$tmp/$side.seg"
                : >"$tmp/$side.tl"
            else
                # shellcheck disable=SC2086
                "$bin" -q -f json $kg $pols $caps --segments "$tmp/$side.seg" \
                    --timeline "$tmp/$side.tl" "$t" >"$tmp/$side.json" 2>"$tmp/$side.err" || true
            fi
            strip "$tmp/$side.json" >"$tmp/$side.out"
            cat "$tmp/$side.err" "$tmp/$side.seg" "$tmp/$side.tl" >>"$tmp/$side.out"
        done
        n=$(grep -o '"policy":' "$tmp/new.json" | wc -l)
        runs=$((runs + n))
        if ! cmp -s "$tmp/old.out" "$tmp/new.out"; then
            bad=$((bad + 1))
            echo "DIFFERENT: $t ($mode)"
            diff "$tmp/old.out" "$tmp/new.out" | head -5
        fi
    done
done
echo "same_results: $runs runs over $(echo "$traces" | wc -w) traces, $bad differing report(s)"
[ $bad -eq 0 ]
