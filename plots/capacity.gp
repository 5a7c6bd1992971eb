# capacity.gp - how far a trace gets against the device capacity, one panel per policy:
# the allocation that first fails (or "complete") at each capacity of a sweep, with the
# minimum capacity marked and every capacity above it that fails again (fitting is not
# monotone in capacity: a larger device can fail where a smaller one fits).
#
#   gnuplot -e "in='sweep.csv'; out='capacity.png'" plots/capacity.gp
#
# in:    `allocsim mincap --csv F` or `allocsim run --sweep LO:HI:STEP -f csv`: one row per
#        (policy, capacity) with columns policy, capacity, completed, oom_alloc, allocs and,
#        when present, file and peak_requested.
# title: optional.

dirn(s) = (strlen(s) == 0) ? "" : (s[strlen(s):] eq "/") ? s : dirn(s[1:strlen(s)-1])
here = dirn(ARG0)
call here."readcol.gp" in "policy"
nrows = RC_n
array pol[nrows]
do for [i=1:nrows] { pol[i] = RC[i] }
# Several traces in one file: a panel per (trace, policy).
has_trace = 0
stats in every ::0::0 using (has_trace = sum [i=1:64] (columnhead(i) eq "file" ? 1 : 0), 0) nooutput
if (has_trace) {
    base(s) = (strstrt(s, "/") == 0) ? s : base(s[strstrt(s, "/")+1:])
    stem(s) = (strstrt(s, ".") <= 1) ? s : s[1:strstrt(s, ".")-1]
    call here."readcol.gp" in "file"
    ntr = 0
    do for [i=2:nrows] { if (RC[i] ne RC[1]) { ntr = 1 } }
    if (ntr) { do for [i=1:nrows] { pol[i] = stem(base(RC[i])) . ": " . pol[i] } }
}

# Distinct panels in order of first appearance.
np = 0
array pname[nrows]
do for [i=1:nrows] {
    dup = 0
    do for [k=1:np] { if (pname[k] eq pol[i]) { dup = 1 } }
    if (!dup) { np = np + 1; pname[np] = pol[i] }
}
if (np == 0) { exit error in.": no rows" }

if (!exists("default_size")) { default_size = sprintf("1200,%d", 200 + 230 * np) }
load here."common.gp"

# Per policy: the smallest capacity that fits, the largest that fails, the smallest that
# fits with every larger capacity fitting too, and the trace's allocation count.
array minfit[np]
array maxfail[np]
array fitsfrom[np]
array nfail_above[np]
array total[np]
array preq[np]
has_preq = 0
stats in every ::0::0 using (has_preq = sum [i=1:64] (columnhead(i) eq "peak_requested" ? 1 : 0), 0) nooutput
do for [k=1:np] {
    minfit[k] = NaN; maxfail[k] = NaN; fitsfrom[k] = NaN; nfail_above[k] = 0; total[k] = 0; preq[k] = 0
    stats in using (pol[int($0)+1] eq pname[k] ? (c = column("capacity"), \
        column("completed") != 0 ? (minfit[k] = (minfit[k] == minfit[k] && minfit[k] < c) ? minfit[k] : c, \
                                    total[k] = column("allocs") > total[k] ? column("allocs") : total[k]) \
                                 : (maxfail[k] = (maxfail[k] == maxfail[k] && maxfail[k] > c) ? maxfail[k] : c)) : 0, 0) nooutput
    stats in using (pol[int($0)+1] eq pname[k] && column("completed") != 0 && \
        (maxfail[k] != maxfail[k] || column("capacity") > maxfail[k]) ? \
        (c = column("capacity"), fitsfrom[k] = (fitsfrom[k] == fitsfrom[k] && fitsfrom[k] < c) ? fitsfrom[k] : c) : 0, \
        pol[int($0)+1] eq pname[k] && column("completed") == 0 && minfit[k] == minfit[k] && column("capacity") > minfit[k] ? \
        (nfail_above[k] = nfail_above[k] + 1) : 0) nooutput
}
if (has_preq) {
    stats in using (k = sum [j=1:np] (pol[int($0)+1] eq pname[j] ? j : 0), \
        column("completed") != 0 && column("peak_requested") > preq[k] ? (preq[k] = column("peak_requested")) : 0, 0) nooutput
}
pqmin = 0
do for [k=1:np] { if (preq[k] > 0 && (pqmin == 0 || preq[k] < pqmin)) { pqmin = preq[k] } }
stats in using (gib(column("capacity"))) nooutput
xlo = STATS_min
xhi = STATS_max
if (pqmin > 0 && gib(pqmin) < xlo) { xlo = gib(pqmin) }
# Above the last failure everything fits: zoom on [xlo, last change + a quarter], so that
# the failures stay readable when one policy's uncapped peak is far out (xmax overrides).
array chi[np]
do for [k=1:np] { chi[k] = NaN }
stats in using (c = gib(column("capacity")), k = sum [j=1:np] (pol[int($0)+1] eq pname[j] ? j : 0), \
    chi[k] = (chi[k] == chi[k] && chi[k] > c) ? chi[k] : c, 0) nooutput
focus = xlo
do for [k=1:np] {
    f = (fitsfrom[k] == fitsfrom[k]) ? gib(fitsfrom[k]) : (maxfail[k] == maxfail[k] ? gib(maxfail[k]) : xlo)
    if (f > focus) { focus = f }
}
xtop = focus + (focus - xlo) * 0.25 + 0.05
if (exists("xmax")) { xtop = xmax }
if (xtop > xhi) { xtop = xhi }
pad = (xtop - xlo) * 0.02 + 0.01

reached(k) = pol[int($0)+1] eq pname[k] ? (column("completed") != 0 ? column("allocs") : column("oom_alloc")) : NaN
capx(k) = pol[int($0)+1] eq pname[k] ? gib(column("capacity")) : NaN
failx(k) = pol[int($0)+1] eq pname[k] && column("completed") == 0 && minfit[k] == minfit[k] && column("capacity") > minfit[k] ? gib(column("capacity")) : NaN

if (!exists("title")) { title = "How far the trace gets at each capacity" }
title = title . "\nline: allocations served before the first OOM (at the top: the whole trace fits); red x: fails again above the minimum"
set multiplot layout np, 1 title title font ",14" margins 0.09, 0.97, (np > 1 ? 0.07 : 0.14), (np > 1 ? 0.88 : 0.8) spacing 0, (np > 3 ? 0.09 : 0.11)
set xrange [xlo - pad : xtop + pad]
set ytics format "%.0s%c"
set ylabel "allocations served"
unset key
do for [k=1:np] {
    unset arrow
    unset label
    set title pname[k] font ",13" tc rgb col(k)
    if (k == np) { set xlabel "capacity (GiB)" } else { unset xlabel }
    set yrange [0 : (total[k] > 0 ? total[k] : 1) * 1.38]
    set arrow from graph 0, first total[k] to graph 1, first total[k] nohead lc rgb "#888888" dt 3
    set label "complete (".sprintf("%d", total[k])." allocations)" at graph 0.02, first total[k] left offset 0, 0.6 tc rgb "#555555"
    if (preq[k] > 0) {
        set arrow from first gib(preq[k]), graph 0 to first gib(preq[k]), graph 1 nohead lc rgb "#888888" dt 2
        set label "peak requested" at first gib(preq[k]), graph 0.06 left offset 0.5, 0 tc rgb "#555555"
    }
    if (chi[k] == chi[k] && chi[k] > xtop + pad) {
        set label sprintf("fits up to the uncapped peak, %.2f GiB ->", chi[k]) at graph 0.99, first total[k] right offset 0, -0.8 tc rgb col(k)
    }
    if (minfit[k] == minfit[k]) {
        set arrow from first gib(minfit[k]), graph 0 to first gib(minfit[k]), graph 1 nohead lc rgb col(k) lw 2
        msg = sprintf("minimum %s", capfmt(minfit[k]))
        if (nfail_above[k] > 0) {
            msg = msg . sprintf("; %d %s above it %s; all fit from %s", nfail_above[k], \
                  nfail_above[k] == 1 ? "capacity" : "capacities", nfail_above[k] == 1 ? "fails" : "fail", \
                  fitsfrom[k] == fitsfrom[k] ? capfmt(fitsfrom[k]) : "(none in range)")
        } else {
            msg = msg . "; every larger capacity fits"
        }
        # Left of the line when the line is far right, so that the text stays inside.
        if (gib(minfit[k]) > xlo + (xtop - xlo) * 0.55) {
            set label msg at first gib(minfit[k]), graph 0.9 right offset -0.6, 0 tc rgb col(k) front
        } else {
            set label msg at first gib(minfit[k]), graph 0.9 left offset 0.6, 0 tc rgb col(k) front
        }
    } else {
        set label "no capacity in the sweep fits" at graph 0.5, graph 0.5 center tc rgb col(k)
    }
    # A macro would be expanded when the loop is read, so the command is built and eval'd.
    cmd = 'plot in using (capx(k)):(reached(k)) with steps lw 2 lc rgb col(k) ' . \
          'title "allocations served before the first OOM (all when it fits)"'
    if (nfail_above[k] > 0) {
        cmd = cmd . ', in using (failx(k)):(reached(k)) with points pt 2 ps 1.4 lw 2 ' . \
              'lc rgb "#d62728" title "fails again above the minimum"'
    }
    eval cmd
}
unset multiplot
