# validation.gp - the simulator against the real allocator: predicted against measured OOM
# point (the allocation that failed) and peak reserved, one point per run, coloured by
# policy. Points on the diagonal are exact; runs without an OOM sit on the "no OOM" line.
#
#   gnuplot -e "in='validation.csv'; out='validation.png'" plots/validation.gp
#
# in:    `allocsim compare -f csv PREDICTED.json MEASURED.json` (columns policy,
#        pred_oom_alloc, meas_oom_alloc, oom_match, pred_peak_reserved, meas_peak_reserved,
#        peak_match; -1 where a run had no OOM, "-" in files written before report
#        schema 2). Several such files may be concatenated
#        (one header) to cover several traces.
# title: optional.

dirn(s) = (strlen(s) == 0) ? "" : (s[strlen(s):] eq "/") ? s : dirn(s[1:strlen(s)-1])
here = dirn(ARG0)
call here."readcol.gp" in "policy"
nrows = RC_n
if (nrows == 0) { exit error in.": no rows" }
array pol[nrows]
do for [i=1:nrows] { pol[i] = RC[i] }
array pname[nrows]
np = 0
do for [i=1:nrows] {
    dup = 0
    do for [k=1:np] { if (pname[k] eq pol[i]) { dup = 1 } }
    if (!dup) { np = np + 1; pname[np] = pol[i] }
}
if (!exists("default_size")) { default_size = "1300,680" }
load here."common.gp"

# Exact counts, and the largest OOM ordinal (where the "no OOM" line goes).
stats in using (column("oom_match")) nooutput
oom_exact = STATS_sum
stats in using (column("peak_match")) nooutput
peak_exact = STATS_sum
nruns = STATS_records
omax = 0
num(c) = strcol(c) ne "-" && strcol(c) ne "" && column(c) >= 0  # -1 or "-": no OOM
stats in using ((num("pred_oom_alloc") && column("pred_oom_alloc") > omax ? omax = column("pred_oom_alloc") : 0), \
                (num("meas_oom_alloc") && column("meas_oom_alloc") > omax ? omax = column("meas_oom_alloc") : 0)) nooutput
if (omax == 0) { omax = 1 }
none = omax * 1.12
oomv(c) = num(c) ? column(c) : none
oomtxt(c) = num(c) ? strcol(c) : "no OOM"
stats in using (gib(column("meas_peak_reserved"))) nooutput
plo = STATS_min
phi = STATS_max
ppad = (phi - plo) * 0.06 + 0.05

# (stats honours the ranges set for the panels below, so every stats comes first)
stats in using (mib(column("pred_peak_reserved") - column("meas_peak_reserved"))) nooutput
emax = abs(STATS_min) > abs(STATS_max) ? abs(STATS_min) : abs(STATS_max)
if (emax < 2) { emax = 2 }
if (!exists("title")) {
    title = sprintf("Predicted (allocsim) against measured: OOM point exact in %d of %d runs, peak reserved exact in %d of %d", \
                    oom_exact, nruns, peak_exact, nruns)
}
set multiplot layout 1, 2 title title font ",14" margins 0.07, 0.98, 0.2, 0.9 spacing 0.08, 0
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 4 reverse Left box lc rgb "#bbbbbb"
mine(k) = pol[int($0)+1] eq pname[k]

# Left: OOM point.
set title "OOM point (allocation ordinal that failed)"
set xlabel "measured"
set ylabel "predicted"
set xrange [0 : none * 1.05]
set yrange [0 : none * 1.05]
set format x "%.0s%c"
set format y "%.0s%c"
set size ratio -1
set arrow from 0, none to none * 1.05, none nohead lc rgb "#888888" dt 3
set arrow from none, 0 to none, none * 1.05 nohead lc rgb "#888888" dt 3
set label "no OOM" at graph 0.02, first none left offset 0, 0.6 tc rgb "#555555"
set label "no OOM" at first none, graph 0.6 right offset -0.5, 0 rotate by 90 tc rgb "#555555"
cmd = 'plot x with lines lc rgb "#aaaaaa" dt 2 title "predicted = measured"'
do for [k=1:np] {
    cmd = cmd . sprintf(', in using (mine(%d) ? oomv("meas_oom_alloc") : NaN):(oomv("pred_oom_alloc")) with points pt pt(%d) ps (2.8 - 0.5 * (%d - 1)) lw 2 lc rgb col(%d) title pname[%d]', k, k, k, k, k)
}
# Name the runs that differ: at this scale a few allocations apart look exact.
if (oom_exact < nruns) {
    cmd = cmd . ', in using (column("oom_match") == 0 ? oomv("meas_oom_alloc") : NaN):(oomv("pred_oom_alloc")):(sprintf("predicted %s, measured %s at %s", oomtxt("pred_oom_alloc"), oomtxt("meas_oom_alloc"), capfmt(column("capacity")))) with labels left offset 1.5, -1 tc rgb "#d62728" notitle'
}
eval cmd
unset arrow
unset label

# Right: peak reserved, as the error at MiB resolution against the measured peak, so that
# a one-segment difference shows where a GiB scatter would hide it.
set title "peak reserved: predicted - measured"
set xlabel "measured peak reserved (GiB)"
set ylabel "error (MiB)"
set size noratio
set xrange [plo - ppad : phi + ppad]
set yrange [-emax * 1.25 : emax * 1.25]
set format x "%.1f"
set format y "%g"
cmd = 'plot 0 with lines lc rgb "#aaaaaa" dt 2 notitle'
do for [k=1:np] {
    cmd = cmd . sprintf(', in using (mine(%d) ? gib(column("meas_peak_reserved")) : NaN):(mib(column("pred_peak_reserved") - column("meas_peak_reserved"))) with points pt pt(%d) ps (2.8 - 0.5 * (%d - 1)) lw 2 lc rgb col(%d) notitle', k, k, k, k)
}
if (peak_exact < nruns) {
    cmd = cmd . ', in using (column("peak_match") == 0 ? gib(column("meas_peak_reserved")) : NaN):(mib(column("pred_peak_reserved") - column("meas_peak_reserved"))):(sprintf("%+.1f MiB at %s", mib(column("pred_peak_reserved") - column("meas_peak_reserved")), capfmt(column("capacity")))) with labels left offset 1.5, 0 tc rgb "#d62728" notitle'
}
eval cmd
unset multiplot
