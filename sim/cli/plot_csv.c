/*
 * plot_csv.c - checks a CSV that `allocsim plot --csv/--runs` was given before gnuplot
 * reads it, so that a wrong or damaged file is named with its line and what is wrong
 * ("no column 'reserved'", "7 fields where the header has 6") instead of a gnuplot
 * message about its own script. The file is read once, a line at a time, in bounded
 * memory; fields are counted outside double quotes, as the CSV writers quote them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "plot_csv.h"

/* Fields in one line, counted at the commas outside quotes; strips the line's end. */
static size_t count_fields(char *line)
{
    size_t n = 1;
    int quoted = 0;
    line[strcspn(line, "\r\n")] = 0;
    for (const char *p = line; *p; p++) {
        if (*p == '"')
            quoted = !quoted;
        else if (*p == ',' && !quoted)
            n++;
    }
    return n;
}

static int has_column(const char *header, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = header; p; p = strchr(p, ',')) {
        if (*p == ',')
            p++;
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == 0))
            return 1;
    }
    return 0;
}

static int check_header(const char *path, const char *what, char *header, const char *const *cols)
{
    for (size_t i = 0; cols[i]; i++)
        if (!has_column(header, cols[i])) {
            as_cli_msg("%s: line 1: no column '%s' (%s)", path, cols[i], what);
            return AS_EXIT_INPUT;
        }
    return 0;
}

int as_plot_check_csv(const char *path, const char *what, const char *const *cols)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        as_cli_msg("%s: cannot read: %s", path, strerror(errno));
        return AS_EXIT_INPUT;
    }
    char *line = NULL;
    size_t cap = 0, width = 0;
    long lineno = 0, rows = 0;
    int ret = 0;
    while (!ret && getline(&line, &cap, f) >= 0) {
        lineno++;
        size_t n = count_fields(line);
        if (lineno == 1) {
            width = n;
            ret = check_header(path, what, line, cols);
        } else if (line[0] && n != width) {
            as_cli_msg("%s: line %ld: %zu fields where the header has %zu", path, lineno, n, width);
            ret = AS_EXIT_INPUT;
        } else if (line[0]) {
            rows++;
        }
    }
    if (!ret && ferror(f)) {
        as_cli_msg("%s: read failed: %s", path, strerror(errno));
        ret = AS_EXIT_INPUT;
    } else if (!ret && lineno == 0) {
        as_cli_msg("%s: empty file (%s)", path, what);
        ret = AS_EXIT_INPUT;
    } else if (!ret && rows == 0) {
        as_cli_msg("%s: a header and no data rows (%s)", path, what);
        ret = AS_EXIT_INPUT;
    }
    free(line);
    fclose(f);
    return ret;
}
