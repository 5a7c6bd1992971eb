/*
 * plot_csv.h - the check of a CSV given to `allocsim plot` (plot_csv.c).
 */
#ifndef AS_PLOT_CSV_H
#define AS_PLOT_CSV_H

/* Checks that the CSV at path has a header holding every column of cols (NULL-ended),
 * at least one data row, and as many fields on every row as in its header. what says
 * which file it should be ("a timeline from `allocsim run --timeline`"). Returns 0, or
 * prints what is wrong, with the line, and returns AS_EXIT_INPUT. */
int as_plot_check_csv(const char *path, const char *what, const char *const *cols);

#endif
