# readcol.gp FILE NAME: RC[1..RC_n] = the string in column NAME of each data row of the CSV
# FILE, read whole even when it holds commas inside quotes. Policy specs do
# ("torch,maxsplit=128") and gnuplot 5.4's strcol() cuts a quoted field at its first comma,
# while a plain column number given to `with labels` reads it whole: so the column is
# printed through `set table` and parsed back. Usage: call "readcol.gp" FILE "policy".
set datafile separator ","
unset datafile columnheaders
stats ARG1 every ::0::0 using (RC_col = sum [i=1:64] (columnhead(i) eq ARG2 ? i : 0), 0) nooutput
if (RC_col == 0) { print sprintf("%s: no column '%s'", ARG1, ARG2); exit error "bad input" }
set table $RC_T
set yrange [-1:1]
set xrange [-1:*]
plot ARG1 every ::1 using 0:(0):RC_col with labels
unset table
set autoscale y
set autoscale x
RC_n = 0
do for [i=1:|$RC_T|] { if ($RC_T[i][1:1] ne "#" && strstrt($RC_T[i], "\"") > 0) { RC_n = RC_n + 1 } }
array RC[RC_n > 0 ? RC_n : 1]
RC_k = 0
do for [i=1:|$RC_T|] {
    RC_l = $RC_T[i]
    RC_q = strstrt(RC_l, "\"")
    if (RC_l[1:1] ne "#" && RC_q > 0) {
        RC_k = RC_k + 1
        RC_s = RC_l[RC_q+1:]
        while (strlen(RC_s) > 0 && RC_s[strlen(RC_s):] ne "\"") { RC_s = RC_s[1:strlen(RC_s)-1] }
        RC[RC_k] = RC_s[1:strlen(RC_s)-1]
    }
}
undefine $RC_T
