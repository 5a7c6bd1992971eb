# segments.gp - the address-space map of one run at its reserved peak or at its OOM: one row
# per device segment, its blocks drawn allocated, free, pending-free (freed by the program,
# a stream still uses it) or unmapped (expandable segments), with the largest free block
# outlined. Free blocks inside segments are the fragmentation that made the OOM.
#
#   gnuplot -e "in='segmap.csv'; out='segments.png'; when='oom'" plots/segments.gp
#
# runs:  optional, the `-f csv` report of the same run: names the policy and capacity and
#        the request that failed.
# in:    `allocsim run --segment-map F` (run,when,segment,seg_addr,seg_size,block_addr,
#        block_size,state,stream,pool), blocks in address order within each segment.
# run:   the run index (default 0).  when: "peak" (default) or "oom".
# x:     "bytes" (default; a row's length is its segment's size) or "fraction" (every row
#        the same length, for maps where small segments would be slivers).
# title: optional.

dirn(s) = (strlen(s) == 0) ? "" : (s[strlen(s):] eq "/") ? s : dirn(s[1:strlen(s)-1])
here = dirn(ARG0)
if (!exists("run")) { run = 0 }
if (!exists("when")) { when = "peak" }
if (!exists("x")) { x = "bytes" }

set datafile separator ","
set datafile columnheaders
mine(dummy) = column("run") == run && strcol("when") eq when
stats in using (mine(0) ? column("segment") : NaN) nooutput
if (STATS_records == 0) { exit error sprintf("%s: no rows for run %d at '%s'", in, run, when) }
nseg = int(STATS_max) + 1
hpx = 170 + 16 * nseg
if (hpx > 6000) { hpx = 6000 }
if (!exists("default_size")) { default_size = sprintf("1200,%d", hpx < 500 ? 500 : hpx) }
load here."common.gp"

stats in using (mine(0) ? column("seg_size") : NaN) nooutput
segmax = STATS_max
# The largest free block, and totals by state.
big = 0; big_seg = -1; big_addr = 0; big_segaddr = 0; big_segsize = 1
free_b = 0; alloc_b = 0; pend_b = 0; unmap_b = 0; reserved_b = 0
stats in using (mine(0) ? ( \
        strcol("state") eq "free" ? (free_b = free_b + column("block_size"), \
            column("block_size") > big ? (big = column("block_size"), big_seg = column("segment"), \
                big_addr = column("block_addr"), big_segaddr = column("seg_addr"), big_segsize = column("seg_size")) : 0) : \
        strcol("state") eq "allocated" ? (alloc_b = alloc_b + column("block_size")) : \
        strcol("state") eq "pending" ? (pend_b = pend_b + column("block_size")) : \
        strcol("state") eq "unmapped" ? (unmap_b = unmap_b + column("block_size")) : 0) : 0, 0) nooutput
# Reserved = the sum of distinct segments' sizes (mapped part only for expandable ones).
stats in using (mine(0) && strcol("state") ne "unmapped" ? column("block_size") : 0) nooutput
reserved_b = STATS_sum

frac = (x eq "fraction")
xl(dummy) = frac ? 100.0 * (column("block_addr") - column("seg_addr")) / column("seg_size") \
                 : mib(column("block_addr") - column("seg_addr"))
xh(dummy) = frac ? 100.0 * (column("block_addr") - column("seg_addr") + column("block_size")) / column("seg_size") \
                 : mib(column("block_addr") - column("seg_addr") + column("block_size"))
y(dummy) = column("segment")
in_state(s) = mine(0) && strcol("state") eq s

# From the run report, when given: the policy, the capacity and the request that failed.
who = sprintf("run %d", run)
oom_what = ""
if (exists("runs") && strlen(runs) > 0) {
    call here."readcol.gp" runs "policy"
    if (RC_n > run) { who = RC[run + 1] }
    set datafile separator ","
    set datafile columnheaders
    r_cap = NaN; r_size = NaN; r_alloc = NaN; r_res = NaN
    stats runs using (int($0) == run ? (r_cap = column("capacity"), r_size = column("oom_size"), \
        r_alloc = column("oom_alloc"), r_res = column("oom_reserved")) : 0, 0) nooutput
    if (r_cap == r_cap) { who = who . sprintf(" at %s (%.2f GB)", human(r_cap), r_cap / 1e9) }
    if (r_size == r_size) {
        oom_what = sprintf(": alloc %d asked for %s", r_alloc, human(r_size))
        if (r_cap == r_cap && r_res == r_res && r_cap >= r_res) {
            oom_what = oom_what . sprintf(", %s left under the cap", human(r_cap - r_res))
        }
    }
}
if (!exists("title")) {
    title = sprintf("%s, segments at the %s%s\n%d segments, %s reserved, %s allocated, %s free, largest free block %s", \
        who, when eq "oom" ? "OOM" : "reserved peak", when eq "oom" ? oom_what : "", \
        nseg, human(reserved_b), human(alloc_b), human(free_b), human(big))
}
set title title font ",14"
set xlabel frac ? "offset in the segment (% of its size)" : "offset in the segment (MiB)"
set ylabel "segment (address order)"
set yrange [nseg - 0.5 : -0.5]
set xrange [0 : frac ? 100 : mib(segmax) * 1.01]
set ytics out
if (nseg > 40) { set ytics 0, 10 } else { set ytics 0, 1 }
set grid noytics xtics
set bmargin 7
set key at screen 0.5, screen 0.005 center bottom horizontal maxcols 3 reverse Left box lc rgb "#bbbbbb"
set style fill solid 1.0 border lc rgb "#ffffff"
h = nseg > 60 ? 0.46 : 0.4

if (big > 0) {
    set label sprintf("largest free block: %s", human(big)) at first (frac ? 100.0 * (big_addr - big_segaddr) / big_segsize : mib(big_addr - big_segaddr + big)), first big_seg \
        left offset 1, 0 tc rgb "#d62728" front
}
pcmd = 'plot in using (mine(0) ? mib(column("seg_size")) / (frac ? mib(column("seg_size")) / 100.0 : 1) / 2 : NaN):(y(0)):(0):(frac ? 100 : mib(column("seg_size"))):(y(0) - h - 0.06):(y(0) + h + 0.06) with boxxyerror fs empty border lc rgb "#666666" lc rgb "#666666" lw 1 title "segment", '
pcmd = pcmd . 'in using (in_state("allocated") ? xl(0) : NaN):(y(0)):(xl(0)):(xh(0)):(y(0) - h):(y(0) + h) with boxxyerror fc rgb "#0b1f65" fs solid 1.0 border lc rgb "#ffffff" title "allocated", '
if (pend_b > 0) { pcmd = pcmd . 'in using (in_state("pending") ? xl(0) : NaN):(y(0)):(xl(0)):(xh(0)):(y(0) - h):(y(0) + h) with boxxyerror fc rgb "#f0a202" fs pattern 1 border lc rgb "#a06a00" title "pending free (stream still using it)", ' }
pcmd = pcmd . 'in using (in_state("free") ? xl(0) : NaN):(y(0)):(xl(0)):(xh(0)):(y(0) - h):(y(0) + h) with boxxyerror fc rgb "#bfe3f5" fs solid 1.0 border lc rgb "#7aa6bd" title "free (inside reserved memory)", '
if (unmap_b > 0) { pcmd = pcmd . 'in using (in_state("unmapped") ? xl(0) : NaN):(y(0)):(xl(0)):(xh(0)):(y(0) - h):(y(0) + h) with boxxyerror fc rgb "#eeeeee" fs pattern 2 border lc rgb "#bbbbbb" title "unmapped (expandable, no pages)", ' }
pcmd = pcmd . 'in using (mine(0) && strcol("state") eq "free" && column("block_size") == big && column("segment") == big_seg && column("block_addr") == big_addr ? xl(0) : NaN):(y(0)):(xl(0)):(xh(0)):(y(0) - h - 0.08):(y(0) + h + 0.08) with boxxyerror fs empty border lc rgb "#d62728" lc rgb "#d62728" lw 3 title "largest free block"'
eval pcmd
