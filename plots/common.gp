# common.gp - the look shared by every allocsim chart, loaded first by each script.
#
# Sets the terminal from the output name (FILE.png: pngcairo, FILE.svg: svg), plain text
# (no enhanced mode: policy specs hold '_' and '^'), one colour, dash type and point type
# per series so that series stay apart in greyscale too, and byte-unit helpers. Every
# script reads CSV with a header row: `set datafile columnheaders`, columns by name.
#
# Variables a caller may set with -e: in, out (required), title, size ("W,H" pixels).

if (!exists("out")) {
    exit error "set the output: gnuplot -e \"in='data.csv'; out='chart.png'\" SCRIPT"
}
if (!exists("in")) { exit error "set the input: gnuplot -e \"in='data.csv'; out='chart.png'\" SCRIPT" }
if (!exists("size")) { size = exists("default_size") ? default_size : "1200,700" }

is_svg = strlen(out) > 4 && out[strlen(out)-3:] eq ".svg"
if (is_svg) {
    eval "set terminal svg size ".size." fixed noenhanced font 'DejaVu Sans,13' background '#ffffff'"
} else {
    eval "set terminal pngcairo size ".size." noenhanced font 'DejaVu Sans,12' background '#ffffff'"
}
set output out

set datafile separator ","
set datafile columnheaders
set datafile missing NaN  # a filtered-out row (NaN) does not break a line

# Colours whose grey levels (Rec. 601 luma) differ from each neighbour: navy 13%, red 36%,
# amber 66%, green 45%, purple 33%, sky 62%, grey 27%, brown 43%; dash and point types
# change with them, so that series stay apart when printed in grey.
array C[8] = ["#0b1f65", "#d62728", "#f0a202", "#2a9d5c", "#7b3294", "#56b4e9", "#444444", "#a6611a"]
array DT[8] = [1, 2, 4, 5, 3, 1, 2, 4]
array PT[8] = [7, 5, 9, 13, 6, 4, 8, 12]
col(i) = C[(int(i) - 1) % 8 + 1]
dt(i) = DT[(int(i) - 1) % 8 + 1]
pt(i) = PT[(int(i) - 1) % 8 + 1]

GiB = 1073741824.0
MiB = 1048576.0
gib(x) = x / GiB
mib(x) = x / MiB
# Bytes as a short human string: 9.31 GiB, 412.0 MiB, 512 B (as allocsim's table).
human(b) = (b >= GiB) ? sprintf("%.2f GiB", b / GiB) : (b >= MiB) ? sprintf("%.1f MiB", b / MiB) : (b >= 1024) ? sprintf("%.1f KiB", b / 1024.0) : sprintf("%d B", int(b))
# A capacity as allocsim's table shows it (sim/REPORT.md): exact when a whole number of
# GiB or MiB (80 GiB, 8600 MiB), else rounded and marked "~" (~74.51 GiB); -1 is none.
capfmt(b) = (b != b || b < 0) ? "none" : \
    (b >= GiB && int(b) % 1073741824 == 0) ? sprintf("%d GiB", int(b) / 1073741824) : \
    (b >= MiB && int(b) % 1048576 == 0) ? sprintf("%d MiB", int(b) / 1048576) : \
    (b < MiB && b >= 1024 && int(b) % 1024 == 0) ? sprintf("%d KiB", int(b) / 1024) : \
    (b < 1024) ? sprintf("%d B", int(b)) : "~".human(b)
# allocsim's CSV writes -1 where an integer does not apply (no capacity, no OOM).
opt(v) = (v < 0) ? NaN : v

set border 3 lw 1.2
set tics nomirror out
set grid back lc rgb "#d8d8d8" lw 1 dt 1
set key noautotitle opaque box lc rgb "#bbbbbb" samplen 3 spacing 1.15
set style line 100 lc rgb "#000000" lw 1.5 dt (8, 4, 2, 4)  # capacity
