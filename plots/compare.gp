# compare.gp - peak reserved and waste per policy, grouped by trace, over a corpus: the
# design-review summary of which policy holds how much memory.
#
#   gnuplot -e "in='report.csv'; out='compare.png'" plots/compare.gp
#
# in:    `allocsim run -f csv` over one or more traces (columns file, policy, capacity,
#        peak_reserved, waste, completed, and peak_requested when present; one row per
#        run). Runs that hit an OOM are drawn hatched: their peaks are only up to
#        the OOM. Each trace's peak requested (the bound) and, with a `-p planned` run, the
#        offline yardstick's peak reserved are marked across its bars.
# title: optional.

dirn(s) = (strlen(s) == 0) ? "" : (s[strlen(s):] eq "/") ? s : dirn(s[1:strlen(s)-1])
here = dirn(ARG0)
base(s) = (strstrt(s, "/") == 0) ? s : base(s[strstrt(s, "/")+1:])
stem(s) = (strstrt(s, ".") <= 1) ? s : s[1:strstrt(s, ".")-1]

call here."readcol.gp" in "policy"
nrows = RC_n
array pol[nrows]
do for [i=1:nrows] { pol[i] = RC[i] }
call here."readcol.gp" in "file"
array trc[nrows]
do for [i=1:nrows] { trc[i] = stem(base(RC[i])) }
# With several capacities in the report, a series is a (policy, capacity) pair.
call here."readcol.gp" in "capacity"
array capt[nrows]
do for [i=1:nrows] { capt[i] = RC[i] }
ncapv = 0
do for [i=2:nrows] { if (capt[i] ne capt[1]) { ncapv = 1 } }
capname(c) = (c + 0 < 0) ? "uncapped" : capfmt(c + 0)
# A series is keyed by policy and the raw capacity; its title (capfmt, from common.gp) comes
# once common.gp is loaded.
array polbase[nrows]
do for [i=1:nrows] { polbase[i] = pol[i] }
if (ncapv) { do for [i=1:nrows] { pol[i] = pol[i] . " @ " . capt[i] } }

array pname[nrows]
array pfirst[nrows]
array tname[nrows]
np = 0
nt = 0
do for [i=1:nrows] {
    dup = 0
    do for [k=1:np] { if (pname[k] eq pol[i]) { dup = 1 } }
    if (!dup) { np = np + 1; pname[np] = pol[i]; pfirst[np] = i }
    dup = 0
    do for [k=1:nt] { if (tname[k] eq trc[i]) { dup = 1 } }
    if (!dup) { nt = nt + 1; tname[nt] = trc[i] }
}
if (nrows == 0) { exit error in.": no rows" }

if (!exists("default_size")) { default_size = sprintf("%d,900", 300 + nt * (60 + 34 * np) < 1000 ? 1000 : 300 + nt * (60 + 34 * np)) }
load here."common.gp"
array ptitle[np]
do for [k=1:np] { ptitle[k] = ncapv ? polbase[pfirst[k]] . " @ " . capname(capt[pfirst[k]]) : pname[k] }

pidx(s) = sum [k=1:np] (pname[k] eq s ? k : 0)
tidx(s) = sum [k=1:nt] (tname[k] eq s ? k : 0)
bw = 0.8 / np
bx(i) = tidx(trc[i]) - 1 + (pidx(pol[i]) - (np + 1) / 2.0) * bw
row = 'int($0) + 1'
is_oom(x) = x == 0

has_preq = 0
stats in every ::0::0 using (has_preq = sum [i=1:64] (columnhead(i) eq "peak_requested" ? 1 : 0), 0) nooutput
array preq[nt]
do for [t=1:nt] { preq[t] = 0 }
if (has_preq) {
    stats in using (t = tidx(trc[int($0)+1]), column("peak_requested") > preq[t] ? (preq[t] = column("peak_requested")) : 0, 0) nooutput
}

# The offline yardstick: the least peak reserved of a trace's completed `planned` runs
# (policy "planned" or "planned,..."), -1 when the report has none for it.
array plan[nt]
do for [t=1:nt] { plan[t] = -1 }
isplan(s) = (s eq "planned" || s[1:8] eq "planned,")
stats in using (i = int($0) + 1, t = tidx(trc[i]), (isplan(strcol("policy")) && column("completed") == 1 && (plan[t] < 0 || column("peak_reserved") < plan[t])) ? (plan[t] = column("peak_reserved")) : 0, 0) nooutput
has_plan = 0
do for [t=1:nt] { if (plan[t] >= 0) { has_plan = 1 } }

# Runs that hit an OOM (stats honours the ranges set below, so it comes first).
stats in using (column("completed") == 0 ? 1 : 0) nooutput
noom = STATS_sum
if (!exists("title")) { title = "Peak reserved and waste per policy" }
set multiplot layout 2, 1 title title font ",15" margins 0.08, 0.97, 0.22, 0.92 spacing 0, 0.08
set xrange [-0.6 : nt - 0.4]
set xtics () 
do for [t=1:nt] { set xtics add (tname[t] t - 1) }
set xtics scale 0
set grid noxtics ytics
set boxwidth bw * 0.9 absolute
set ylabel "peak reserved (GiB)"
set yrange [0:*]
set key at screen 0.5, 0.1 center center horizontal maxcols 3 reverse Left box lc rgb "#bbbbbb"
unset xlabel
set format x ""

# Bars: one colour per policy; policies past the first alternate solid and hatched fills so
# that neighbours stay apart in greyscale. OOM runs are drawn with a cross-hatch on top.
fs(k) = (k % 2 == 1) ? 'solid 0.85 border lc rgb "#000000"' : 'pattern 4 border lc rgb "#000000"'
cmd = 'plot '
do for [k=1:np] {
    cmd = cmd . sprintf('in using (pol[%s] eq pname[%d] ? bx(%s) : NaN):(gib(column("peak_reserved"))) with boxes fs %s fc rgb col(%d) title ptitle[%d], ', row, k, row, fs(k), k, k)
}
if (has_preq) {
    set print $PREQ
    print "x,y"
    do for [t=1:nt] { print sprintf("%d,%.17g", t - 1, gib(preq[t])) }
    unset print
    cmd = cmd . '$PREQ using 1:2:(0.45) with xerrorbars pt -1 lw 3 lc rgb "#000000" title "peak requested (live bytes)", '
}
if (has_plan) {
    set print $PLAN
    print "x,y"
    do for [t=1:nt] { if (plan[t] >= 0) { print sprintf("%d,%.17g", t - 1, gib(plan[t])) } }
    unset print
    cmd = cmd . '$PLAN using 1:2:(0.45) with xerrorbars pt -1 lw 2 dt 2 lc rgb "#2ca02c" title "planned (offline yardstick)", '
}
if (noom > 0) {
    cmd = cmd . 'in using (column("completed") == 0 ? bx(' . row . ') : NaN):(gib(column("peak_reserved"))) with boxes fs pattern 2 transparent border lc rgb "#d62728" fc rgb "#d62728" title "hit an OOM (peak up to it)"'
} else {
    cmd = cmd[1:strlen(cmd)-2]
}
eval cmd

set format x "% h"
set xtics () 
do for [t=1:nt] { set xtics add (tname[t] t - 1) }
unset key  # an empty key would still draw its box, as a stray line
set ylabel "waste = peak reserved - peak requested (GiB)"
set yrange [0:*]
cmd = 'plot '
do for [k=1:np] {
    cmd = cmd . sprintf('in using (pol[%s] eq pname[%d] ? bx(%s) : NaN):(gib(column("waste"))) with boxes fs %s fc rgb col(%d) notitle, ', row, k, row, fs(k), k)
}
# The value over each bar: a bar a few pixels high still reads as a number.
cmd = cmd . 'in using (bx(' . row . ')):(gib(column("waste"))):(sprintf(gib(column("waste")) < 10 ? "%.1f" : "%.0f", gib(column("waste")))) with labels center offset 0, 0.6 font ",9" notitle'
set yrange [0:*]
set offsets 0, 0, graph 0.08, 0
eval cmd
unset multiplot
