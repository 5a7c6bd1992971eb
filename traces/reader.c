/*
 * reader.c - the generic trace reader: format detection by content (the decoders' probes,
 * in probe_order), and every event through the validator (live.h: ids are ordinals, sizes
 * in range, no free of an unknown or freed id). Decoders only turn bytes into raw events
 * (source.h); the reader knows no format, only the interface's optional batch slot.
 *
 * Invariant: the live table holds exactly the live allocations, so the reader's memory is
 * its input buffers plus O(live), whatever the trace length. Errors are sticky: after the
 * first one, every call returns it again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live.h"
#include "trace_internal.h"

/* Probe order: the binary magics first (cheap and unambiguous), then text, then CSV (the
 * loosest test). */
static const as_source_ops *const probe_order[] = {
    &as_src_native,
    &as_src_torch,
    &as_src_text,
    &as_src_rmm,
};

#define PROBE_BYTES 4096
#define BATCH 256 /* events decoded ahead for as_trace_next by a batch decoder */

/* ---- the reader ------------------------------------------------------------------ */

struct as_trace_reader {
    const as_source_ops *ops;
    void *st;
    as_instream *in; /* NULL for wrapped sources */
    as_meta meta;
    as_sites *no_sites; /* the empty table of a format without frames */
    as_trace_fmt fmt;
    char name[256];
    as_validator v;
    as_reader_opts opts;
    uint64_t in_events; /* events taken from the decoder (the input position) */
    int rc;             /* sticky: AS_TRACE_EOF or an error, once reached */
    as_trace_error err;
    int batched; /* ops->next_batch: decode and validate in batches */
    /* events validated ahead for as_trace_next (batched decoders) */
    as_event *ahead;
    size_t ahead_n, ahead_pos;
};

/* Records the reader's sticky error, giving precedence to a broken stream. */
static int reader_fail(as_trace_reader *r, const as_trace_error *e)
{
    const as_trace_error *se = r->in ? as_instream_error(r->in) : NULL;
    r->err = se ? *se : *e;
    if (r->err.code >= 0)
        r->err.code = AS_ECORRUPT;
    if (!r->err.path[0])
        snprintf(r->err.path, sizeof r->err.path, "%s", r->name);
    r->err.event = r->in_events;
    r->rc = r->err.code;
    return r->rc;
}

static int reader_invalid(as_trace_reader *r, int code, uint64_t off, uint64_t line,
                          const char *msg)
{
    as_trace_error e;
    as_trace_set_error(&e, code, r->name, off, line, "%s", msg);
    return reader_fail(r, &e);
}

/* One event through the decoder's own next and the validator (the generic path). */
static int next_generic(as_trace_reader *r, as_event *ev)
{
    for (;;) {
        uint64_t off0 = r->in ? as_instream_offset(r->in) : UINT64_MAX;
        as_trace_error e;
        memset(ev, 0, sizeof *ev);
        ev->time_us = AS_TIME_NONE;
        e.code = 0;
        int rc = r->ops->next(r->st, ev, &e);
        if (rc == AS_TRACE_EOF) {
            r->rc = AS_TRACE_EOF;
            return rc;
        }
        if (rc < 0) {
            if (e.code >= 0)
                as_trace_set_error(&e, rc, r->name, off0, 0, "decoder failed: %s", as_strerror(rc));
            return reader_fail(r, &e);
        }
        uint64_t idx = r->in_events++;
        char msg[256];
        int vr = validate_fast(&r->v, ev) == 0 ? 0 : as_validate(&r->v, ev, msg, sizeof msg);
        if (vr == 0)
            return 0;
        if (vr < 0) {
            uint64_t off = off0, line = 0;
            if (r->in) {
                uint64_t mo, ml;
                as_instream_take_mark(r->in, &mo, &ml);
                if (mo != UINT64_MAX)
                    off = mo, line = ml;
            }
            r->in_events = idx;
            return reader_invalid(r, vr, off, line, msg);
        }
        /* vr == 1: skipped (lenient); take the next one */
    }
}

/* Fills up to cap validated events from the decoder's next_batch, which runs the
 * validator's fast path itself; only an event the fast path declines comes back here. */
static int next_batched(as_trace_reader *r, as_event *evs, size_t cap, size_t *n)
{
    *n = 0;
    while (*n == 0) {
        size_t got = 0, checked = 0;
        as_trace_error e;
        e.code = 0;
        int rc = r->ops->next_batch(r->st, &r->v, evs, cap, &got, &checked, &e);
        r->in_events += checked;
        *n = checked;
        if (checked < got) {
            /* The last event: an error, a lenient skip, or just not a fast-path case. */
            char msg[256];
            int vr = as_validate(&r->v, &evs[checked], msg, sizeof msg);
            if (vr < 0) {
                reader_invalid(r, vr, r->ops->last_offset(r->st), 0, msg);
                return *n ? 0 : r->rc;
            }
            r->in_events++;
            if (vr == 0)
                (*n)++;
        }
        if (rc < 0) {
            reader_fail(r, &e);
            return *n ? 0 : r->rc;
        }
        if (rc == AS_TRACE_EOF) {
            r->rc = AS_TRACE_EOF;
            return *n ? 0 : AS_TRACE_EOF;
        }
    }
    return 0;
}

int as_trace_next(as_trace_reader *r, as_event *ev)
{
    if (r->ahead_pos < r->ahead_n) {
        *ev = r->ahead[r->ahead_pos++];
        return 0;
    }
    if (r->rc)
        return r->rc;
    if (!r->batched)
        return next_generic(r, ev);
    r->ahead_pos = r->ahead_n = 0;
    int rc = next_batched(r, r->ahead, BATCH, &r->ahead_n);
    if (rc)
        return rc;
    *ev = r->ahead[r->ahead_pos++];
    return 0;
}

int as_trace_next_batch(as_trace_reader *r, as_event *evs, size_t cap, size_t *n)
{
    *n = 0;
    if (cap == 0)
        return AS_EUSAGE;
    /* Hand out what as_trace_next decoded ahead first, so the two calls can be mixed. */
    while (r->ahead_pos < r->ahead_n && *n < cap) {
        evs[(*n)++] = r->ahead[r->ahead_pos++];
        if (evs[*n - 1].op == AS_OP_MARK)
            return 0;
    }
    if (*n)
        return 0;
    if (r->rc)
        return r->rc;
    if (r->batched)
        return next_batched(r, evs, cap, n);
    while (*n < cap) {
        int rc = next_generic(r, &evs[*n]);
        if (rc)
            return *n ? 0 : rc;
        if (evs[(*n)++].op == AS_OP_MARK)
            break; /* its label is valid only until the decoder runs again */
    }
    return 0;
}

const as_trace_error *as_trace_reader_error(const as_trace_reader *r)
{
    return r->rc < 0 ? &r->err : NULL;
}

const as_snapshot_record *as_trace_reader_snapshot(const as_trace_reader *r)
{
    return r && r->ops->record ? r->ops->record(r->st) : NULL;
}

const as_meta *as_trace_reader_meta(const as_trace_reader *r)
{
    return &r->meta;
}
const as_sites *as_trace_reader_sites(const as_trace_reader *r)
{
    const as_sites *s = r->ops && r->ops->sites && r->st ? r->ops->sites(r->st) : NULL;
    return s ? s : r->no_sites;
}

as_trace_fmt as_trace_reader_format(const as_trace_reader *r)
{
    return r->fmt;
}

uint64_t as_trace_reader_warnings(const as_trace_reader *r)
{
    uint64_t w = r->v.warnings;
    if (r->ops->warnings)
        w += r->ops->warnings(r->st);
    return w;
}

void as_trace_reader_progress(const as_trace_reader *r, uint64_t *done, uint64_t *total)
{
    if (r->in) {
        as_instream_progress(r->in, done, total);
        return;
    }
    if (done)
        *done = 0;
    if (total)
        *total = 0;
}

int as_trace_reader_tally(const as_trace_reader *r, as_trace_tally *out)
{
    as_validator_tally(&r->v, out);
    return r->ahead_pos < r->ahead_n;
}

void as_trace_reader_live(const as_trace_reader *r, uint64_t *live, size_t *table_bytes)
{
    if (live)
        *live = as_live_count(&r->v.live);
    if (table_bytes) /* the id table and its stack of free live slots */
        *table_bytes = as_live_bytes(&r->v.live) + (size_t)r->v.slot_cap * sizeof *r->v.slot_free;
}

void as_trace_close(as_trace_reader *r)
{
    if (!r)
        return;
    if (r->st && r->ops->close)
        r->ops->close(r->st);
    as_instream_close(r->in);
    as_meta_free(&r->meta);
    as_sites_free(r->no_sites);
    as_validator_free(&r->v);
    free(r->ahead);
    free(r);
}

static as_trace_reader *reader_new(const char *name, const as_reader_opts *opts)
{
    as_trace_reader *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    if (as_sites_new(&r->no_sites) < 0) {
        free(r);
        return NULL;
    }
    snprintf(r->name, sizeof r->name, "%s", name ? name : "");
    r->v.lenient = opts ? opts->lenient : 0;
    if (opts)
        r->opts = *opts;
    if (!r->opts.zstd_window_log) {
        const char *env = getenv("ALLOCSIM_ZSTD_WINDOW_LOG");
        r->opts.zstd_window_log = env && *env ? atoi(env) : AS_ZSTD_WINDOW_LOG_DEFAULT;
    }
    return r;
}

static int set_batched(as_trace_reader *r)
{
    r->batched = r->ops->next_batch != NULL;
    if (r->batched) {
        r->ahead = malloc(BATCH * sizeof *r->ahead);
        if (!r->ahead)
            return AS_ENOMEM;
    }
    return 0;
}

/* Detects the format of r's open stream and reads the header. Frees r on failure. */
static int reader_start(as_trace_reader *r, as_trace_reader **out, as_trace_error *err)
{
    int rc;
    snprintf(r->name, sizeof r->name, "%s", as_instream_path(r->in));
    const void *head;
    long n = as_instream_peek(r->in, &head, PROBE_BYTES);
    if (n < 0) {
        rc = as_instream_fail(r->in, err, (int)n, "cannot read the trace");
        goto out;
    }
    for (size_t i = 0; i < sizeof probe_order / sizeof probe_order[0]; i++) {
        const as_source_ops *ops = probe_order[i];
        if (ops->probe(head, (size_t)n)) {
            r->ops = ops;
            break;
        }
    }
    if (!r->ops) {
        const uint8_t *h = head;
        char hex[40] = "";
        for (long i = 0; i < n && i < 8; i++)
            snprintf(hex + 3 * i, sizeof hex - 3 * (size_t)i, "%02x ", h[i]);
        const char *z = as_instream_is_zstd(r->in) ? "zstd-compressed, " : "";
        if (n)
            rc = as_trace_set_error(err, AS_EFORMAT, r->name, 0, 0,
                                    "not a recognised trace format (%scontent starts: %s)", z, hex);
        else
            rc = as_trace_set_error(err, AS_EFORMAT, r->name, 0, 0, "empty input%s: not a trace",
                                    *z ? " (a zstd stream with no content)" : "");
        goto out;
    }
    r->fmt = r->ops->fmt;
    rc = r->ops->open(r->in, &r->opts, &r->meta, &r->st, err);
    if (rc < 0) {
        const as_trace_error *se = as_instream_error(r->in);
        if (se)
            *err = *se;
        if (!err->path[0])
            snprintf(err->path, sizeof err->path, "%s", r->name);
        r->st = NULL;
        goto out;
    }
    rc = set_batched(r);
    if (rc < 0) {
        as_trace_set_error(err, rc, r->name, 0, 0, "out of memory");
        goto out;
    }
    *out = r;
    return 0;
out:
    if (err->code >= 0)
        err->code = rc;
    as_trace_close(r);
    return rc;
}

int as_trace_open(const char *path, const as_reader_opts *opts, as_trace_reader **out,
                  as_trace_error *err)
{
    as_trace_error tmp;
    if (!err)
        err = &tmp;
    *out = NULL;
    if (!path)
        return as_trace_set_error(err, AS_EUSAGE, "", UINT64_MAX, 0, "no path given");
    as_trace_reader *r = reader_new(path, opts);
    if (!r)
        return as_trace_set_error(err, AS_ENOMEM, path, 0, 0, "out of memory");
    int rc = as_instream_open(path, &r->in, err);
    if (rc == 0)
        rc = as_instream_set_window_log(r->in, r->opts.zstd_window_log, err);
    if (rc < 0) {
        as_trace_close(r);
        return rc;
    }
    return reader_start(r, out, err);
}

int as_trace_open_mem(const void *data, size_t n, const char *name, const as_reader_opts *opts,
                      as_trace_reader **out, as_trace_error *err)
{
    as_trace_error tmp;
    if (!err)
        err = &tmp;
    *out = NULL;
    if (!name)
        name = "<memory>";
    if (!data && n)
        return as_trace_set_error(err, AS_EUSAGE, name, UINT64_MAX, 0, "no data");
    as_trace_reader *r = reader_new(name, opts);
    if (!r)
        return as_trace_set_error(err, AS_ENOMEM, name, 0, 0, "out of memory");
    int rc = as_instream_open_mem(data ? data : "", n, name, &r->in, err);
    if (rc == 0)
        rc = as_instream_set_window_log(r->in, r->opts.zstd_window_log, err);
    if (rc < 0) {
        as_trace_close(r);
        return rc;
    }
    return reader_start(r, out, err);
}

int as_trace_reader_from_source(const as_source_ops *ops, void *st, const as_meta *meta,
                                const char *name, as_trace_reader **out)
{
    *out = NULL;
    if (!ops || !ops->next) {
        if (ops && ops->close && st)
            ops->close(st);
        return AS_EUSAGE;
    }
    as_trace_reader *r = reader_new(name, NULL);
    if (!r) {
        if (ops->close && st)
            ops->close(st);
        return AS_ENOMEM;
    }
    r->ops = ops;
    r->st = st;
    r->fmt = ops->fmt;
    /* A wrapped source is read through next, one event at a time (batched stays 0). */
    if (as_meta_copy(&r->meta, meta) < 0) {
        as_trace_close(r);
        return AS_ENOMEM;
    }
    *out = r;
    return 0;
}
