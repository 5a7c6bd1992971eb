/*
 * segmap.c - the segment map CSV (segmap.h).
 *
 * Rows arrive from the engine's on_walk callback on the reading thread, one walk at a
 * time per run (a SEGMENT item, then its blocks, in address order), possibly interleaved
 * between runs. Each run's rows are formatted into its own growing buffer and the buffers
 * are written in run order on close, so the file is grouped by run.
 */
#include "segmap.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct seg_run {
    char *buf;
    size_t len, cap;
    /* The walk in progress: its kind and the segment the next blocks belong to. */
    int oom; /* -1 before the first walk */
    uint64_t event;
    uint64_t nseg, seg_addr, seg_size;
    int have_seg;
} seg_run;

struct as_segmap {
    FILE *f;
    seg_run *runs; /* indexed by report run number */
    size_t nruns;
    unsigned base; /* report index of the current pass's run 0 */
    int err;       /* the first failure: AS_ENOMEM or AS_EINVAL (a row it could not format) */
};

/* The words for m->err. */
static const char *err_words(int err)
{
    return err == AS_ENOMEM ? "out of host memory" : "a row could not be formatted";
}

static const char header[] = "run,when,segment,seg_addr,seg_size,block_addr,block_size,state,"
                             "stream,pool,event,alloc,id\n";

int as_segmap_open_stream(FILE *f, as_segmap **out)
{
    *out = NULL;
    as_segmap *m = calloc(1, sizeof *m);
    if (!m)
        return AS_ENOMEM;
    m->f = f;
    *out = m;
    return 0;
}

void as_segmap_drop_from(as_segmap *m, unsigned first)
{
    for (size_t i = first; i < m->nruns; i++) {
        free(m->runs[i].buf);
        memset(&m->runs[i], 0, sizeof m->runs[i]);
        m->runs[i].oom = -1;
    }
}

static int need_runs(as_segmap *m, size_t n)
{
    if (n <= m->nruns)
        return 0;
    seg_run *r = realloc(m->runs, n * sizeof *r);
    if (!r)
        return AS_ENOMEM;
    memset(r + m->nruns, 0, (n - m->nruns) * sizeof *r);
    for (size_t i = m->nruns; i < n; i++)
        r[i].oom = -1;
    m->runs = r;
    m->nruns = n;
    return 0;
}

static void appendf(as_segmap *m, seg_run *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void appendf(as_segmap *m, seg_run *r, const char *fmt, ...)
{
    if (m->err)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(r->buf ? r->buf + r->len : NULL, r->cap - r->len, fmt, ap);
        va_end(ap);
        if (k < 0) {
            m->err = AS_EINVAL;
            return;
        }
        if ((size_t)k < r->cap - r->len) {
            r->len += (size_t)k;
            return;
        }
        size_t nc = r->cap ? r->cap * 2 : 4096;
        while (nc - r->len <= (size_t)k)
            nc *= 2;
        char *nb = realloc(r->buf, nc);
        if (!nb) {
            m->err = AS_ENOMEM;
            return;
        }
        r->buf = nb;
        r->cap = nc;
    }
}

static const char *state_name(as_block_state s)
{
    switch (s) {
    case AS_BLOCK_FREE:
        return "free";
    case AS_BLOCK_ALLOCATED:
        return "allocated";
    case AS_BLOCK_PENDING:
        return "pending";
    case AS_BLOCK_UNMAPPED:
        return "unmapped";
    }
    return "unknown";
}

static void on_walk(void *user, unsigned run, uint64_t event, uint64_t alloc, const char *why,
                    const as_walk_item *it)
{
    as_segmap *m = user;
    size_t idx = (size_t)m->base + run;
    if (m->err || need_runs(m, idx + 1)) {
        m->err = m->err ? m->err : AS_ENOMEM;
        return;
    }
    seg_run *r = &m->runs[idx];
    const int oom = strcmp(why, "oom") == 0;
    const char *when = oom ? "oom" : "peak";
    if (r->oom != oom || r->event != event) { /* a new walk: number segments from 0 */
        r->oom = oom;
        r->event = event;
        r->nseg = 0;
        r->have_seg = 0;
    }
    if (it->kind == AS_WALK_SEGMENT) {
        if (r->have_seg)
            r->nseg++;
        r->have_seg = 1;
        r->seg_addr = it->addr;
        r->seg_size = it->size;
        return;
    }
    if (!r->have_seg)
        return; /* a block outside any segment: the policy's walk broke its contract */
    appendf(m, r,
            "%zu,%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%s,%" PRIu64
            ",%s,%" PRIu64 ",%" PRIu64 ",",
            idx, when, r->nseg, r->seg_addr, r->seg_size, it->addr, it->size, state_name(it->state),
            it->stream, it->pool ? it->pool : "", event, alloc);
    if ((it->state == AS_BLOCK_ALLOCATED || it->state == AS_BLOCK_PENDING) && it->id != UINT64_MAX)
        appendf(m, r, "%" PRIu64 "\n", it->id);
    else
        appendf(m, r, "-1\n"); /* no id: a free or unmapped block (sim/REPORT.md) */
}

int as_segmap_pass(as_segmap *m, const as_engine *first, as_trace_reader *rd,
                   const as_engine_opts *base, const as_policy_spec *specs, const uint64_t *caps,
                   size_t ncap, size_t r0, size_t n, unsigned run_base, as_trace_error *err,
                   char *why, size_t why_len)
{
    as_engine *e = NULL;
    as_engine_opts o = {
        .threads = base ? base->threads : 0,
        .keep_going = base ? base->keep_going : 0,
        .no_caught_ooms = base ? base->no_caught_ooms : 0,
        .streams = base ? base->streams : 0,
        .dev_params = base ? base->dev_params : NULL,
        .factory = base ? base->factory : NULL,
        .on_walk = on_walk,
        .walk_at_oom = 1,
        .user = m,
    };
    if (why && why_len)
        why[0] = 0;
    m->base = run_base;
    int rc = as_engine_create(&o, &e);
    if (rc) {
        if (why && why_len)
            snprintf(why, why_len, "cannot create the engine for the segment map");
        goto out;
    }
    for (size_t i = r0; i < r0 + n; i++) {
        rc = as_engine_add_run(e, &specs[i / ncap], caps[i % ncap]);
        if (rc < 0) {
            if (why && why_len)
                snprintf(why, why_len, "segment map: %s", as_engine_errmsg(e));
            goto out;
        }
        const as_run_result *r = as_engine_result(first, (unsigned)(i - r0));
        if (r && r->peak_reserved_event != AS_NONE && r->peak_reserved > 0)
            as_engine_walk_after(e, (unsigned)rc, r->peak_reserved_event);
    }
    rc = as_engine_run(e, rd, err);
    if (rc && (!err || err->code == 0) && why && why_len) /* the engine failed, not the trace */
        snprintf(why, why_len, "segment map: %s", as_engine_errmsg(e));
    if (!rc && m->err) {
        rc = m->err;
        if (why && why_len)
            snprintf(why, why_len, "segment map: %s", err_words(rc));
    }
out:
    as_engine_destroy(e);
    return rc;
}

int as_segmap_close(as_segmap *m, char *why, size_t why_len)
{
    if (!m)
        return 0;
    int rc = m->err, werr = 0;
    if (rc && why && why_len)
        snprintf(why, why_len, "%s", err_words(rc));
    if (fputs(header, m->f) < 0)
        werr = errno ? errno : EIO;
    for (size_t i = 0; i < m->nruns; i++) {
        if (!werr && m->runs[i].len &&
            fwrite(m->runs[i].buf, 1, m->runs[i].len, m->f) != m->runs[i].len)
            werr = errno ? errno : EIO;
        free(m->runs[i].buf);
    }
    if (!werr && (fflush(m->f) || ferror(m->f)))
        werr = errno ? errno : EIO;
    if (werr && !rc)
        rc = as_errno_error(werr, "write failed", why, why_len);
    free(m->runs);
    free(m);
    return rc;
}
