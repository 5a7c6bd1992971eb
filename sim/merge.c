/*
 * merge.c - shards' JSON Lines back into one report (merge.h). Each line is parsed with
 * the one JSON reader's library (libjansson, duplicate keys refused) only to read its
 * command, unit and count; the text itself is kept byte for byte.
 */
#include "merge.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "jsonin.h"

void as_merge_free(as_merge *m)
{
    for (size_t i = 0; m && i < m->n; i++)
        free(m->lines[i].text);
    if (m) {
        free(m->lines);
        free(m->command);
        *m = (as_merge){0};
    }
}

static int cmp_unit(const void *a, const void *b)
{
    const as_merge_line *x = a, *y = b;
    return (x->unit > y->unit) - (x->unit < y->unit);
}

/* One line: its command, unit and count; checked against the first line's. */
static int take_line(as_merge *m, size_t *cap, uint64_t *of, char *text, const char *path,
                     uint64_t lineno, char *why, size_t wl)
{
    json_error_t je;
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    uint64_t unit = 0, n = 0; /* n is stored in *of on every path */
    const char *cmd = o ? json_string_value(json_object_get(o, "command")) : NULL;
    int rc = AS_EFORMAT;
    if (!o)
        snprintf(why, wl, "%s: line %llu: not JSON: %s", path, (unsigned long long)lineno, je.text);
    else if (!cmd || as_json_u64(o, "unit", &unit) != 1 || as_json_u64(o, "of", &n) != 1)
        snprintf(why, wl, "%s: line %llu: not a shard's line (no command, unit and of)", path,
                 (unsigned long long)lineno);
    else if (m->command && (strcmp(cmd, m->command) || n != *of))
        snprintf(why, wl, "%s: line %llu: a %s line of %llu units among %s lines of %llu", path,
                 (unsigned long long)lineno, cmd, (unsigned long long)n, m->command,
                 (unsigned long long)*of);
    else if (unit >= n)
        snprintf(why, wl, "%s: line %llu: unit %llu of %llu", path, (unsigned long long)lineno,
                 (unsigned long long)unit, (unsigned long long)n);
    else
        rc = 0;
    if (rc == 0 && !m->command && !(m->command = strdup(cmd)))
        rc = AS_ENOMEM;
    *of = n;
    json_decref(o);
    if (rc)
        return rc;
    if (m->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        as_merge_line *nl = realloc(m->lines, nc * sizeof *nl);
        if (!nl)
            return AS_ENOMEM;
        m->lines = nl;
        *cap = nc;
    }
    if (!(m->lines[m->n].text = strdup(text)))
        return AS_ENOMEM;
    m->lines[m->n++].unit = unit;
    return 0;
}

static int read_file(as_merge *m, size_t *cap, uint64_t *of, const char *path, char *why, size_t wl)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, wl, "%s: cannot open: %s", path, strerror(errno));
        return AS_EIO;
    }
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    uint64_t lineno = 0;
    int rc = 0;
    while (rc == 0 && (len = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (len)
            rc = take_line(m, cap, of, line, path, lineno, why, wl);
    }
    if (rc == 0 && ferror(f)) {
        snprintf(why, wl, "%s: read failed", path);
        rc = AS_EIO;
    }
    free(line);
    fclose(f);
    return rc;
}

int as_merge_files(const char *const *paths, size_t n, as_merge *out, char *why, size_t why_len)
{
    size_t cap = 0;
    uint64_t of = 0;
    int rc = 0;
    *out = (as_merge){0};
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = read_file(out, &cap, &of, paths[i], why, why_len);
    if (rc == 0 && out->n == 0) {
        snprintf(why, why_len, "no lines to merge");
        rc = AS_EFORMAT;
    }
    if (rc == 0) {
        qsort(out->lines, out->n, sizeof *out->lines, cmp_unit);
        for (size_t i = 0; i < out->n && rc == 0; i++)
            if (out->lines[i].unit != i) {
                rc = AS_EFORMAT;
                if (out->lines[i].unit < i)
                    snprintf(why, why_len, "unit %llu appears twice",
                             (unsigned long long)out->lines[i].unit);
                else
                    snprintf(why, why_len, "unit %zu of %llu is missing (no shard wrote it)", i,
                             (unsigned long long)of);
            }
        if (rc == 0 && out->n != of) {
            if (out->n + 1 == of)
                snprintf(why, why_len, "unit %zu of %llu is missing (no shard wrote it)", out->n,
                         (unsigned long long)of);
            else
                snprintf(why, why_len, "units %zu to %llu of %llu are missing", out->n,
                         (unsigned long long)of - 1, (unsigned long long)of);
            rc = AS_EFORMAT;
        }
    }
    if (rc)
        as_merge_free(out);
    return rc;
}
