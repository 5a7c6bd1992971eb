/*
 * repeat.c - `allocsim convert --repeat N`: one trace played N times in a row as one
 * valid trace, to make long benchmark and soak inputs out of short real snapshots.
 *
 * Pass k's allocation ids follow pass k-1's (ids stay ordinals), its timestamps are moved
 * to start 1 us after the previous pass's last one (untimed events stay untimed), and
 * every allocation still live when a pass ends (including FREE_REQ'd ones) gets a FREE
 * there, before the next pass, so each pass starts with none of the earlier passes'
 * memory in use and the result's live set is bounded by one pass's. The last pass ends as
 * the input does. Metadata is the input's, with `repeat = N` added.
 *
 * Invariant: the output is written to a temporary file beside OUT and renamed over it only
 * when complete, so a failure leaves OUT as it was; it never names the input itself.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace_internal.h"

#define REPEAT_BATCH 1024

/* Per pass: the state of each of the pass's allocations, by its id within the pass. */
enum { R_DEAD = 0, R_LIVE = 1 };

typedef struct rep {
    as_trace_writer *w;
    uint8_t *live; /* R_LIVE / R_DEAD per id of the current pass */
    size_t cap;
    uint64_t base;    /* ids of earlier passes */
    uint64_t allocs;  /* ALLOCs of the current pass */
    int64_t shift;    /* added to this pass's times */
    int64_t first_in; /* first timestamp of the input, AS_TIME_NONE when none yet */
    int64_t last_out; /* last timestamp written, AS_TIME_NONE when none */
    uint64_t events;  /* written */
} rep;

static int put(rep *r, as_event *ev)
{
    if (ev->time_us != AS_TIME_NONE)
        r->last_out = ev->time_us;
    r->events++;
    return as_trace_write(r->w, ev);
}

/* One event of pass k: ids and times moved; ALLOC/FREE tracked. */
static int pass_event(rep *r, as_event *ev, as_trace_error *err, const char *in)
{
    if (ev->time_us != AS_TIME_NONE) {
        if (r->first_in == AS_TIME_NONE)
            r->first_in = ev->time_us;
        ev->time_us += r->shift;
    }
    if (ev->op == AS_OP_ALLOC) {
        if (as_grow((void **)&r->live, &r->cap, (size_t)ev->id + 1, 1, 4096) < 0)
            return as_trace_set_error(err, AS_ENOMEM, in, UINT64_MAX, 0, "out of memory");
        r->live[ev->id] = R_LIVE;
        r->allocs = ev->id + 1;
    } else if (ev->op == AS_OP_FREE) {
        r->live[ev->id] = R_DEAD; /* the reader validated the id */
    }
    if (ev->op == AS_OP_ALLOC || ev->op == AS_OP_FREE || ev->op == AS_OP_FREE_REQ)
        ev->id += r->base;
    return put(r, ev);
}

/* The end of a pass that is not the last: FREE what is live, then move the base on. */
static int pass_end(rep *r)
{
    for (uint64_t i = 0; i < r->allocs; i++) {
        if (r->live[i] != R_LIVE)
            continue;
        as_event ev = {.op = AS_OP_FREE, .id = r->base + i, .time_us = r->last_out};
        if (put(r, &ev) < 0)
            return -1;
    }
    r->base += r->allocs;
    r->allocs = 0;
    if (r->first_in != AS_TIME_NONE && r->last_out != AS_TIME_NONE)
        r->shift = r->last_out + 1 - r->first_in;
    return 0;
}

static int one_pass(rep *r, const char *in, const as_reader_opts *opts, int last,
                    as_trace_error *err)
{
    as_trace_reader *rd;
    int rc = as_trace_open(in, opts, &rd, err);
    if (rc < 0)
        return rc;
    as_event evs[REPEAT_BATCH];
    size_t n;
    if (r->live) /* none before the first pass's first ALLOC (memset of NULL is undefined) */
        memset(r->live, 0, r->cap);
    while ((rc = as_trace_next_batch(rd, evs, REPEAT_BATCH, &n)) == 0) {
        for (size_t i = 0; i < n && rc >= 0; i++)
            rc = pass_event(r, &evs[i], err, in);
        if (rc < 0)
            break;
    }
    if (rc < 0 && as_trace_reader_error(rd) && as_trace_reader_error(rd)->code)
        *err = *as_trace_reader_error(rd);
    as_trace_close(rd);
    if (rc == AS_TRACE_EOF)
        rc = last ? 0 : pass_end(r);
    if (rc < 0 && as_trace_writer_error(r->w))
        *err = *as_trace_writer_error(r->w);
    return rc < 0 ? rc : 0;
}

/* Opens the input once for its metadata, adds repeat = N. */
static int repeat_meta(const char *in, const as_reader_opts *opts, unsigned n, as_meta *meta,
                       as_sites *sites, as_trace_error *err)
{
    as_trace_reader *rd;
    int rc = as_trace_open(in, opts, &rd, err);
    if (rc < 0)
        return rc;
    char v[16];
    snprintf(v, sizeof v, "%u", n);
    rc = as_meta_copy(meta, as_trace_reader_meta(rd));
    if (rc >= 0)
        rc = as_meta_set(meta, "repeat", v);
    if (rc >= 0) /* every pass names the same sites: the table once */
        rc = as_sites_copy(sites, as_trace_reader_sites(rd));
    as_trace_close(rd);
    if (rc < 0)
        return as_trace_set_error(err, AS_ENOMEM, in, UINT64_MAX, 0, "bad or oversized metadata");
    return 0;
}

int as_trace_repeat(const char *in, const char *out, as_trace_fmt fmt, unsigned n,
                    const as_reader_opts *opts, uint64_t *events, as_trace_error *err)
{
    as_trace_error tmp;
    if (!err)
        err = &tmp;
    if (events)
        *events = 0;
    if (!in || !out || n == 0)
        return as_trace_set_error(err, AS_EUSAGE, out ? out : "", UINT64_MAX, 0,
                                  n ? "no path given" : "--repeat needs a count of 1 or more");
    if (strcmp(in, "-") == 0)
        return as_trace_set_error(err, AS_EUSAGE, in, UINT64_MAX, 0,
                                  "--repeat reads its input N times: it cannot be stdin");
    struct stat si, so;
    if (strcmp(out, "-") && stat(out, &so) == 0 && stat(in, &si) == 0 && si.st_dev == so.st_dev &&
        si.st_ino == so.st_ino)
        return as_trace_set_error(err, AS_EUSAGE, out, UINT64_MAX, 0,
                                  "output is the input file itself");
    int to_file = strcmp(out, "-") != 0;
    size_t pl = strlen(out) + 32;
    char *part = malloc(pl);
    if (!part)
        return as_trace_set_error(err, AS_ENOMEM, out, UINT64_MAX, 0, "out of memory");
    if (to_file)
        snprintf(part, pl, "%s.%ld.part", out, (long)getpid());
    else
        snprintf(part, pl, "-");
    as_meta meta = {0};
    rep r = {.first_in = AS_TIME_NONE, .last_out = AS_TIME_NONE};
    as_sites *sites = NULL;
    int rc = as_sites_new(&sites);
    if (rc < 0)
        rc = as_trace_set_error(err, AS_ENOMEM, in, UINT64_MAX, 0, "out of memory");
    if (rc >= 0)
        rc = repeat_meta(in, opts, n, &meta, sites, err);
    if (rc >= 0)
        rc = as_trace_writer_open_sites(part, fmt, &meta, sites, &r.w, err);
    as_sites_free(sites);
    for (unsigned k = 0; rc >= 0 && k < n; k++)
        rc = one_pass(&r, in, opts, k + 1 == n, err);
    if (r.w) {
        as_trace_error werr;
        int wrc = as_trace_writer_close(r.w, &werr);
        if (rc >= 0 && wrc < 0)
            rc = wrc, *err = werr;
    }
    if (rc >= 0 && to_file && rename(part, out) < 0)
        rc = as_trace_set_error(err, AS_EIO, out, UINT64_MAX, 0, "cannot rename %s: %s", part,
                                strerror(errno));
    if (rc < 0 && to_file)
        unlink(part);
    if (rc >= 0 && events)
        *events = r.events;
    free(part);
    free(r.live);
    as_meta_free(&meta);
    return rc < 0 ? rc : 0;
}
