/*
 * convert.c - the building blocks of `allocsim convert`: copy a reader into a writer, and
 * convert one file into another, metadata included.
 *
 * Invariant: a conversion never leaves a partial output file behind and never writes
 * over its own input.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace_internal.h"

#define COPY_BATCH 1024

int as_trace_copy(as_trace_reader *r, as_trace_writer *w, uint64_t *events, as_trace_error *err)
{
    as_event evs[COPY_BATCH];
    uint64_t n = 0;
    int rc;
    for (;;) {
        size_t got;
        rc = as_trace_next_batch(r, evs, COPY_BATCH, &got);
        if (rc == AS_TRACE_EOF) {
            rc = 0;
            break;
        }
        if (rc < 0) {
            if (err)
                *err = *as_trace_reader_error(r);
            break;
        }
        for (size_t i = 0; i < got; i++) {
            rc = as_trace_write(w, &evs[i]);
            if (rc < 0)
                break;
            n++;
        }
        if (rc < 0) {
            if (err)
                *err = *as_trace_writer_error(w);
            break;
        }
    }
    if (events)
        *events = n;
    return rc;
}

as_trace_fmt as_trace_fmt_parse(const char *name)
{
    if (!name)
        return AS_FMT_UNKNOWN;
    if (!strcasecmp(name, "text") || !strcasecmp(name, "txt"))
        return AS_FMT_TEXT;
    if (!strcasecmp(name, "native") || !strcasecmp(name, "zst"))
        return AS_FMT_NATIVE;
    return AS_FMT_UNKNOWN;
}

as_trace_fmt as_trace_fmt_for_output(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    if ((n >= 4 && !strcasecmp(path + n - 4, ".txt")) ||
        (n >= 5 && !strcasecmp(path + n - 5, ".text")))
        return AS_FMT_TEXT;
    return AS_FMT_NATIVE;
}

int as_trace_convert(const char *in, const char *out, as_trace_fmt fmt, const as_reader_opts *opts,
                     const as_meta *extra, uint64_t *events, as_trace_error *err)
{
    as_trace_error tmp;
    if (!err)
        err = &tmp;
    if (events)
        *events = 0;
    if (!in || !out)
        return as_trace_set_error(err, AS_EUSAGE, "", UINT64_MAX, 0, "no path given");
    struct stat si, so;
    int out_existed = strcmp(out, "-") != 0 && stat(out, &so) == 0;
    if (out_existed && strcmp(in, "-") != 0 && stat(in, &si) == 0 && si.st_dev == so.st_dev &&
        si.st_ino == so.st_ino)
        return as_trace_set_error(err, AS_EUSAGE, out, UINT64_MAX, 0,
                                  "output is the input file itself");
    int removable = strcmp(out, "-") != 0 && (!out_existed || S_ISREG(so.st_mode));
    as_trace_reader *r = NULL;
    as_trace_writer *w = NULL;
    as_meta meta = {0};
    int rc = as_trace_open(in, opts, &r, err);
    if (rc < 0)
        return rc;
    if ((rc = as_meta_copy(&meta, as_trace_reader_meta(r))) < 0 ||
        (rc = as_meta_copy(&meta, extra)) < 0) {
        as_trace_set_error(err, rc, out, UINT64_MAX, 0, "bad or oversized metadata");
        goto out;
    }
    rc = as_trace_writer_open_sites(out, fmt, &meta, as_trace_reader_sites(r), &w, err);
    if (rc < 0) {
        removable = 0; /* not ours: it was never created, or is the one we failed on */
        goto out;
    }
    as_trace_error cerr;
    rc = as_trace_copy(r, w, events, &cerr);
    as_trace_error werr;
    int wrc = as_trace_writer_close(w, &werr);
    w = NULL;
    if (rc < 0 && as_trace_reader_error(r))
        *err = cerr; /* the input was bad */
    else if (wrc < 0)
        rc = wrc, *err = werr; /* the writer's own, precise error */
    else if (rc < 0)
        *err = cerr;
out:
    as_trace_writer_close(w, NULL);
    as_trace_close(r);
    as_meta_free(&meta);
    if (rc < 0 && removable)
        unlink(out);
    return rc;
}
