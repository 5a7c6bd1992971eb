# timeline.gp - requested, allocated and reserved memory through a trace, one colour per run,
# with each run's capacity and its OOM point marked.
#
#   gnuplot -e "in='timeline.csv'; runs='runs.csv'; out='timeline.png'" plots/timeline.gp
#
# in:    `allocsim run --timeline F` (run,event,alloc,time_us,requested,allocated,reserved),
#        rows of one run in event order.
# runs:  optional, the `-f csv` report of the same command (one row per run, in run order):
#        names the runs by policy spec, draws capacities, marks OOMs (columns file,
#        policy, capacity, completed, oom_alloc; -1 where none). Without it the runs are
#        called "run N".
# x:     "event" (default), "alloc" or "time" (seconds from the start of the trace; time_us
#        is relative to its first timed event, -1 where a sample has no time).
# title: optional.

dirn(s) = (strlen(s) == 0) ? "" : (s[strlen(s):] eq "/") ? s : dirn(s[1:strlen(s)-1])
base(s) = (strstrt(s, "/") == 0) ? s : base(s[strstrt(s, "/")+1:])
here = dirn(ARG0)
load here."common.gp"

if (!exists("x")) { x = "event" }
if (x ne "event" && x ne "alloc" && x ne "time") { exit error "x must be event, alloc or time" }

stats in using (column("run")) nooutput
N = int(STATS_max) + 1
array name[N]
array cap[N]
array oom[N]
do for [r=1:N] { name[r] = sprintf("run %d", r - 1); cap[r] = NaN; oom[r] = NaN }
tracename = ""
if (exists("runs") && strlen(runs) > 0) {
    call here."readcol.gp" runs "file"
    if (RC_n > 0) { tracename = base(RC[1]) }
    call here."readcol.gp" runs "policy"
    do for [r=1:(RC_n < N ? RC_n : N)] { name[r] = RC[r] }
    set datafile separator ","
    set datafile columnheaders
    stats runs using (r = int($0) + 1, r <= N ? (cap[r] = opt(column("capacity")), \
          oom[r] = opt(column("oom_alloc"))) : 0, 0) nooutput
}

if (x eq "time") {
    stats in using (opt(column("time_us"))) nooutput
    if (!exists("STATS_records") || STATS_records == 0) { exit error in.": the trace has no times; use x='event'" }
}
X = (x eq "event") ? 'column("event")' : (x eq "alloc") ? 'column("alloc")' : 'opt(column("time_us")) / 1e6'
xv(r) = (column("run") == r - 1) ? @X : NaN

# Where each stopped run ended (its last sample is the OOM), and the top of the data.
array lastx[N]
array lasty[N]
stats in using (r = int(column("run")) + 1, lastx[r] = @X, lasty[r] = column("reserved"), \
      column("reserved")) nooutput
ymax = STATS_max
xlast = 0
do for [r=1:N] { if (lastx[r] > xlast) { xlast = lastx[r] } }
# Requested is the trace's, the same in every run: draw it from the run that got furthest.
rq = 1
do for [r=2:N] { if (lastx[r] > lastx[rq]) { rq = r } }
do for [r=1:N] { if (cap[r] == cap[r] && cap[r] > ymax) { ymax = cap[r] } }

if (!exists("title")) { title = (strlen(tracename) ? tracename.": " : "")."memory through the trace" }
set title title font ",15"
set xlabel (x eq "event") ? "event (0-based position in the trace)" : (x eq "alloc") ? \
    "allocation ordinal" : "time (s)"
set ylabel "GiB"
set format x (x eq "time") ? "%g" : "%.0s%c"
set yrange [0:gib(ymax) * 1.12]
set xrange [0:*]

# Capacities: one dashed line per distinct value, labelled at the right.
set link y2
set y2tics () out scale 0.5 tc rgb "#000000"
ncap = 0
do for [r=1:N] {
    dup = 0
    do for [q=1:r-1] { if (cap[q] == cap[r]) { dup = 1 } }
    if (cap[r] == cap[r] && !dup) {
        ncap = ncap + 1
        set arrow from graph 0, first gib(cap[r]) to graph 1, first gib(cap[r]) nohead ls 100 front
        # Named on the right axis, where no curve can run over the text.
        set y2tics add (sprintf("capacity\n%s", capfmt(cap[r])) gib(cap[r]))
    }
}
# OOM points, labelled with the allocation that failed; kept in a datablock so that runs
# without an OOM add nothing to the plot.
noom = 0
set print $OOM
print "x,y,run,pt"  # a header: CSV settings apply to datablocks too
do for [r=1:N] {
    if (oom[r] == oom[r]) {
        noom = noom + 1
        print sprintf("%.17g,%.17g,%d,%d", lastx[r], gib(lasty[r]), r, pt(r))
        # Centred above the point, or ending at it near the right edge.
        near_right = lastx[r] > xlast * 0.85
        eval sprintf('set label "OOM at alloc %d" at first %.17g, first %.17g %s tc rgb "%s" front', \
            oom[r], lastx[r], gib(lasty[r]), near_right ? "right offset -1, 1.4" : "center offset 0, 1.4", col(r))
    }
}
unset print
OOMPLOT = (noom > 0) ? ', $OOM using 1:2:4:(rgb_of($3)) with points pt variable ps 2.4 lw 2 lc rgb variable notitle, NaN with points pt 6 ps 2 lw 2 lc rgb "#000000" title "OOM (first allocation that failed)"' : ''
rgb_of(r) = int("0x".col(r)[2:])

# The key goes under the x label: gnuplot's own "below" placement overlaps the label.
nkey = 1 + 2 * N + (noom > 0)
set bmargin 4 + (nkey + 1) / 2 + 1
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 2 reverse Left box lc rgb "#bbbbbb"

plot \
    in using (column("run") == rq - 1 ? @X : NaN):(gib(column("requested"))) with filledcurves y1=0 \
        fc rgb "#d0d0d0" fs solid 1.0 title "requested (live bytes, the same for every run)", \
    for [r=1:N] in using (xv(r)):(gib(column("reserved"))) with lines lw 2.6 lc rgb col(r) \
        dt dt(r) title "reserved: ".name[r], \
    for [r=1:N] in using (xv(r)):(gib(column("allocated"))) with lines lw 1.5 lc rgb col(r) \
        dt (3, 3) title "allocated: ".name[r] @OOMPLOT
