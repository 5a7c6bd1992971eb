# segments.gp - the address-space map of one run at its reserved peak or at its OOM: its
# device segments in address order, their blocks drawn allocated, free, pending-free (freed
# by the program, a stream still uses it) or unmapped (expandable segments), with the
# largest free block outlined. Free blocks inside segments are the fragmentation that made
# the OOM: compare the largest one with the request that failed (in the title).
#
#   gnuplot -e "in='segmap.csv'; runs='runs.csv'; out='segments.png'; when='oom'" plots/segments.gp
#
# in:    `allocsim run --segment-map F` (run,when,segment,seg_addr,seg_size,block_addr,
#        block_size,state,...), blocks in address order within each segment.
# runs:  optional, the `-f csv` report of the same command: names the policy and the
#        capacity and the request that failed.
# run:   the run index (default 0).  when: "peak" (default) or "oom".
# x:     "bytes": one row per segment, its length its size;
#        "wrap": rows of a fixed number of bytes, a segment taking as many rows as it needs
#        (for a few huge segments, as expandable segments make: one row would hide them);
#        "fraction": one row per segment, every row the same length.
#        Default: wrap when one segment holds over a quarter of the reserved bytes.
# title: optional.

dirn(s) = (strlen(s) == 0) ? "" : (s[strlen(s):] eq "/") ? s : dirn(s[1:strlen(s)-1])
here = dirn(ARG0)
if (!exists("run")) { run = 0 }
if (!exists("when")) { when = "peak" }

set datafile separator ","
set datafile columnheaders
mine(dummy) = column("run") == run && strcol("when") eq when
stats in using (mine(0) ? column("segment") : NaN) nooutput
if (!exists("STATS_records") || STATS_records == 0) { exit error sprintf("%s: no rows for run %d at '%s'", in, run, when) }
nseg = int(STATS_max) + 1
array segsz[nseg]
do for [k=1:nseg] { segsz[k] = 0 }
stats in using (mine(0) ? (segsz[int(column("segment")) + 1] = column("seg_size")) : 0, 0) nooutput
segmax = 0
segsum = 0
do for [k=1:nseg] { segsum = segsum + segsz[k]; if (segsz[k] > segmax) { segmax = segsz[k] } }
if (!exists("x")) { x = (segmax * 4 > segsum) ? "wrap" : "bytes" }
if (x ne "bytes" && x ne "wrap" && x ne "fraction") { exit error "x must be bytes, wrap or fraction" }
frac = (x eq "fraction")

# Row layout: W bytes per row (a row per segment unless wrapping), rowbase[k] the first row
# of segment k-1 (arrays count from 1).
G2 = 2097152.0
W = (x eq "wrap") ? ceil(segsum / 48.0 / G2) * G2 : segmax
if (frac) { W = 0 }
array rowbase[nseg + 1]
rowbase[1] = 0
do for [k=1:nseg] { rowbase[k + 1] = rowbase[k] + (frac ? 1 : ceil(segsz[k] / W)) }
nrows = rowbase[nseg + 1]
hpx = 170 + 16 * nrows
if (hpx > 6000) { hpx = 6000 }
if (!exists("default_size")) { default_size = sprintf("1200,%d", hpx < 500 ? 500 : hpx) }
load here."common.gp"

# The largest free block, and totals by state.
big = 0; big_seg = -1; big_addr = 0
free_b = 0; alloc_b = 0; pend_b = 0; unmap_b = 0
stats in using (mine(0) ? ( \
        strcol("state") eq "free" ? (free_b = free_b + column("block_size"), \
            column("block_size") > big ? (big = column("block_size"), big_seg = column("segment"), \
                big_addr = column("block_addr")) : 0) : \
        strcol("state") eq "allocated" ? (alloc_b = alloc_b + column("block_size")) : \
        strcol("state") eq "pending" ? (pend_b = pend_b + column("block_size")) : \
        strcol("state") eq "unmapped" ? (unmap_b = unmap_b + column("block_size")) : 0) : 0, 0) nooutput
# Reserved: every block but the unmapped parts of expandable segments.
reserved_b = free_b + alloc_b + pend_b

# A block may span rows: piece j (0-based) of a block is its part in the j-th row it touches.
# Offsets are in bytes from the segment's start; x is MiB from the row's start (or % of
# the segment in the fraction layout).
s0(d) = column("block_addr") - column("seg_addr")
e0(d) = s0(0) + column("block_size")
r0(d) = frac ? 0 : floor(s0(0) / W)
rs(j) = (r0(0) + j) * W
plo(j) = frac ? s0(0) : (s0(0) > rs(j) ? s0(0) : rs(j))
phi(j) = frac ? e0(0) : (e0(0) < rs(j) + W ? e0(0) : rs(j) + W)
xl(j) = frac ? 100.0 * plo(j) / column("seg_size") : mib(plo(j) - rs(j))
xh(j) = frac ? 100.0 * phi(j) / column("seg_size") : mib(phi(j) - rs(j))
y(j) = mine(0) && column("segment") < nseg ? rowbase[int(column("segment")) + 1] + r0(0) + j : NaN
piece(j) = mine(0) && (j == 0 || (!frac && phi(j) > plo(j)))
maxspan = 1
if (!frac) {
    stats in using (mine(0) ? (n = ceil(e0(0) / W) - floor(s0(0) / W), n > maxspan ? maxspan = n : 0) : 0, 0) nooutput
}
in_state(s, j) = piece(j) && strcol("state") eq s
is_big(j) = piece(j) && strcol("state") eq "free" && column("block_size") == big && \
            column("segment") == big_seg && column("block_addr") == big_addr
# A segment's outline: piece j of its whole extent, drawn from its first block's row.
seg_lo(j) = 0
seg_hi(j) = frac ? 100 : mib((j + 1) * W < column("seg_size") ? W : column("seg_size") - j * W)
seg_piece(j) = mine(0) && column("block_addr") == column("seg_addr") && (frac ? j == 0 : j * W < column("seg_size"))
segspan = frac ? 1 : ceil(segmax / W)
# Streams (PyTorch keeps a stream's blocks in its own segments): with more than one, each
# stream's segments get their own outline colour.
array strm[nseg]
nstr = 0
stats in using (mine(0) && column("block_addr") == column("seg_addr") ? \
    (v = column("stream"), known = sum [q=1:(nstr > 0 ? nstr : 1)] (nstr > 0 && strm[q] == v ? 1 : 0), \
     known ? 0 : (nstr = nstr + 1, strm[nstr] = v)) : 0, 0) nooutput
array strcolr[4] = ["#999999", "#7b3294", "#2a9d5c", "#a6611a"]

# Where the largest free block's first piece ends (stats come before the ranges are set).
big_x = 0; big_y = 0
if (big > 0) {
    stats in using (is_big(0) ? (big_x = xh(0), big_y = y(0)) : 0, 0) nooutput
}

# From the run report, when given: the policy, the capacity and the request that failed.
who = sprintf("run %d", run)
oom_what = ""
if (exists("runs") && strlen(runs) > 0) {
    call here."readcol.gp" runs "policy"
    if (RC_n > run) { who = RC[run + 1] }
    set datafile separator ","
    set datafile columnheaders
    r_cap = NaN; r_size = NaN; r_alloc = NaN; r_res = NaN
    stats runs using (column("run") == run ? (r_cap = opt(column("capacity")), r_size = opt(column("oom_size")), \
        r_alloc = opt(column("oom_alloc")), r_res = opt(column("oom_reserved"))) : 0, 0) nooutput
    if (r_cap == r_cap) { who = who . sprintf(" at %s", capfmt(r_cap)) }
    if (r_size == r_size) {
        oom_what = sprintf("\nalloc %d asked for %s", r_alloc, human(r_size))
        if (r_cap == r_cap && r_res == r_res && r_cap >= r_res) {
            oom_what = oom_what . sprintf("; %s was left under the cap%s", human(r_cap - r_res), \
                r_size <= r_cap - r_res ? " (device memory comes in 2 MiB pages)" : "")
        }
    }
}
# A given title replaces the first line; the numbers stay.
if (!exists("title")) {
    title = sprintf("%s, segments at the %s%s", who, when eq "oom" ? "OOM" : "reserved peak", \
        when eq "oom" ? oom_what : "")
}
title = title . sprintf("\n%d segments, %s reserved, %s allocated, %s free, largest free block %s", \
    nseg, human(reserved_b), human(alloc_b), human(free_b), human(big))
set title title font ",14"
set xlabel frac ? "offset in the segment (% of its size)" : \
    (x eq "wrap" ? sprintf("offset in the row (MiB); a row is %s, a segment continues on the next row", human(W)) \
                 : "offset in the segment (MiB)")
set ylabel x eq "wrap" ? "segment (address order), wrapped" : "segment (address order)"
set yrange [nrows - 0.5 : -0.5]
xmaxv = frac ? 100 : mib(W) * 1.01
strip = xmaxv * 0.012
set xrange [(nstr > 1 ? -strip * 1.3 : 0) : xmaxv]
set ytics out
set ytics ()
step = nseg > 40 ? 10 : (nseg > 15 ? 5 : 1)
do for [k=1:nseg] { if ((k - 1) % step == 0) { set ytics add (sprintf("%d", k - 1) rowbase[k]) } }
set grid noytics xtics
nkey = 4 + (nstr > 1 ? nstr : 0) + (pend_b > 0) + (unmap_b > 0)
set bmargin 5 + ceil(nkey / 3.0)
set key at screen 0.5, screen 0.005 center bottom horizontal maxcols 3 reverse Left box lc rgb "#bbbbbb"
h = nrows > 60 ? 0.46 : 0.4
set style textbox opaque noborder fc rgb "#ffffff"

if (big > 0) {
    set label sprintf("largest free block: %s", human(big)) at first big_x, first big_y \
        left offset 1, 0 tc rgb "#d62728" front boxed
}
# One clause per piece index: `for [j=0:maxspan-1]` draws every row a block touches.
P(st, rest) = sprintf('for [j=0:%d] in using (in_state("%s", j) ? xl(j) : NaN):(y(j)):(xl(j)):(xh(j)):(y(j) - h):(y(j) + h) %s', maxspan - 1, st, rest)
pcmd = sprintf('plot for [j=0:%d] in using (seg_piece(j) ? seg_lo(j) : NaN):(y(j)):(seg_lo(j)):(seg_hi(j)):(y(j) - h - 0.06):(y(j) + h + 0.06) with boxxyerror fs empty border lc rgb "#666666" lc rgb "#666666" lw 1 title (j == 0 ? "segment" : ""), ', segspan - 1)
if (nstr > 1) {
    # A strip left of each row in its stream's colour.
    do for [q=1:nstr] {
        pcmd = pcmd . sprintf('for [j=0:%d] in using (seg_piece(j) && column("stream") == %.17g ? 0 : NaN):(y(j)):(-strip):(-strip * 0.2):(y(j) - h):(y(j) + h) with boxxyerror fs solid 1.0 noborder fc rgb "%s" title (j == 0 ? "stream %s" : ""), ', \
            segspan - 1, strm[q], strcolr[(q - 1) % 4 + 1], strm[q] == 0 ? "0 (default)" : sprintf("0x%x", strm[q]))
    }
}
pcmd = pcmd . P("allocated", 'with boxxyerror fc rgb "#0b1f65" fs solid 1.0 border lc rgb "#ffffff" title (j == 0 ? "allocated" : ""), ')
if (pend_b > 0) { pcmd = pcmd . P("pending", 'with boxxyerror fc rgb "#f0a202" fs pattern 1 border lc rgb "#a06a00" title (j == 0 ? "pending free (stream still using it)" : ""), ') }
pcmd = pcmd . P("free", 'with boxxyerror fc rgb "#bfe3f5" fs solid 1.0 border lc rgb "#7aa6bd" title (j == 0 ? "free (inside reserved memory)" : ""), ')
if (unmap_b > 0) { pcmd = pcmd . P("unmapped", 'with boxxyerror fc rgb "#eeeeee" fs pattern 2 border lc rgb "#bbbbbb" title (j == 0 ? "unmapped (expandable, no pages)" : ""), ') }
pcmd = pcmd . sprintf('for [j=0:%d] in using (is_big(j) ? xl(j) : NaN):(y(j)):(xl(j)):(xh(j)):(y(j) - h - 0.08):(y(j) + h + 0.08) with boxxyerror fs empty border lc rgb "#d62728" lc rgb "#d62728" lw 3 title (j == 0 ? "largest free block" : "")', maxspan - 1)
eval pcmd
