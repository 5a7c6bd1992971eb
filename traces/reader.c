/*
 * reader.c - the generic trace reader: format detection by content, the live table, and
 * the validation every format goes through (ids are ordinals, sizes in range, no free of
 * an unknown or freed id). Decoders only turn bytes into raw events (source.h).
 *
 * Invariant: the live table holds exactly the live allocations, so the reader's memory is
 * its input buffers plus O(live), whatever the trace length. Errors are sticky: after the
 * first one, every call returns it again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live_internal.h"
#include "trace_internal.h"

/*
 * The importers (torch pickle, RMM CSV) live in their own files. Declaring them weak lets
 * the library link in a build that leaves one out: an undefined weak symbol has address
 * NULL and the probe loop skips it. With the file in the build, the strong definition
 * wins and nothing here changes.
 */
extern const as_source_ops as_src_torch __attribute__((weak));
extern const as_source_ops as_src_rmm __attribute__((weak));

/* Probe order: the binary magics first (cheap and unambiguous), then text, then CSV (the
 * loosest test). */
static const as_source_ops *const probe_order[] = {
    &as_src_native,
    &as_src_torch,
    &as_src_text,
    &as_src_rmm,
};

#define PROBE_BYTES 4096
#define BATCH 256 /* events decoded ahead for as_trace_next on the native fast path */

/* ---- live table ------------------------------------------------------------------ */

#define LIVE_MIN_CAP AS_LIVE_MIN_CAP

int as_live_rehash(as_live *t, size_t ncap)
{
    as_live_ent *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return -1;
    as_live_ent *old = t->slot;
    size_t ocap = t->cap;
    unsigned bits = 0;
    while (((size_t)1 << bits) < ncap)
        bits++;
    t->slot = ns;
    t->cap = ncap;
    t->shift = 64 - bits;
    size_t mask = ncap - 1;
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i].key)
            continue;
        size_t j = live_home(t, old[i].key);
        while (ns[j].key)
            j = (j + 1) & mask;
        ns[j] = old[i];
    }
    free(old);
    return 0;
}

as_live_ent *as_live_find(as_live *t, uint64_t id)
{
    return live_find(t, id);
}
as_live_ent *as_live_insert(as_live *t, uint64_t id)
{
    return live_insert(t, id);
}
void as_live_remove(as_live *t, as_live_ent *e)
{
    live_remove(t, e);
}

int as_live_ring_init(as_live *t)
{
    t->ring = calloc(AS_LIVE_RING, sizeof *t->ring);
    return t->ring ? 0 : -1;
}

int as_live_evict(as_live *t, const as_live_ent *e)
{
    as_live_ent *h = hash_insert(t, e->key - 1);
    if (!h)
        return -1;
    *h = *e;
    return 0;
}

void as_live_free(as_live *t)
{
    free(t->slot);
    free(t->ring);
    memset(t, 0, sizeof *t);
}

size_t as_live_bytes(const as_live *t)
{
    return (t->cap + (t->ring ? AS_LIVE_RING : 0)) * sizeof(as_live_ent);
}

size_t as_live_count(const as_live *t)
{
    return t->n + t->ring_n;
}

/* ---- validation ------------------------------------------------------------------ */

int as_validate(as_validator *v, as_event *ev, char *msg, size_t cap)
{
    as_live_ent *e;
    switch (ev->op) {
    case AS_OP_ALLOC: {
        uint64_t ord = v->allocs_in++;
        if (ev->size == 0 || ev->size > AS_MAX_ALLOC_SIZE) {
            snprintf(msg, cap, "ALLOC %llu: %s size %llu (allowed 1..%llu bytes)",
                     (unsigned long long)ev->id, ev->size ? "absurd" : "zero",
                     (unsigned long long)ev->size, (unsigned long long)AS_MAX_ALLOC_SIZE);
            goto bad;
        }
        if (ev->id != ord) {
            snprintf(msg, cap, "ALLOC id %llu is not the allocation ordinal %llu",
                     (unsigned long long)ev->id, (unsigned long long)ord);
            if (!v->lenient || as_live_find(&v->live, ev->id))
                goto bad;
            v->warnings++; /* lenient: keep it, keyed by the id the frees will use */
        }
        e = live_insert(&v->live, ev->id);
        if (!e) {
            snprintf(msg, cap, "out of memory for the live-allocation table");
            return AS_TRACE_ENOMEM;
        }
        e->size = ev->size;
        e->stream = ev->stream;
        e->out_id = v->allocs_out++;
        ev->id = e->out_id;
        break;
    }
    case AS_OP_FREE:
    case AS_OP_FREE_REQ: {
        const char *what = ev->op == AS_OP_FREE ? "FREE" : "FREE_REQ";
        e = live_find(&v->live, ev->id);
        if (!e) {
            if (ev->id < v->allocs_in)
                snprintf(msg, cap, "%s %llu: double free (allocation %llu was already freed)", what,
                         (unsigned long long)ev->id, (unsigned long long)ev->id);
            else if (v->allocs_in == 0)
                snprintf(msg, cap, "%s %llu: unknown id (no allocation yet)", what,
                         (unsigned long long)ev->id);
            else
                snprintf(msg, cap, "%s %llu: unknown id (the ids so far are 0..%llu)", what,
                         (unsigned long long)ev->id, (unsigned long long)v->allocs_in - 1);
            goto bad;
        }
        if (ev->op == AS_OP_FREE_REQ) {
            if (e->out_id & AS_LIVE_FREEREQ) {
                snprintf(msg, cap, "FREE_REQ %llu: requested twice (no FREE in between)",
                         (unsigned long long)ev->id);
                goto bad;
            }
            e->out_id |= AS_LIVE_FREEREQ;
        }
        ev->id = AS_LIVE_ID(e);
        ev->size = e->size;
        ev->stream = e->stream;
        if (ev->op == AS_OP_FREE)
            live_remove(&v->live, e);
        break;
    }
    case AS_OP_EMPTY_CACHE:
        ev->id = ev->size = ev->stream = 0;
        break;
    case AS_OP_MARK:
        if (!ev->label) {
            snprintf(msg, cap, "MARK without a label");
            goto bad;
        }
        if (strnlen(ev->label, AS_MAX_LABEL + 1) > AS_MAX_LABEL) {
            snprintf(msg, cap, "MARK label longer than %d bytes", AS_MAX_LABEL);
            goto bad;
        }
        ev->id = ev->size = ev->stream = 0;
        break;
    default:
        snprintf(msg, cap, "unknown event op %d", (int)ev->op);
        return AS_TRACE_EINVAL;
    }
    v->events++;
    return 0;
bad:
    if (v->lenient) {
        v->warnings++;
        return 1;
    }
    return AS_TRACE_EINVAL;
}

/* ---- the reader ------------------------------------------------------------------ */

struct as_trace_reader {
    const as_source_ops *ops;
    void *st;
    as_instream *in; /* NULL for wrapped sources */
    as_meta meta;
    as_trace_fmt fmt;
    char name[256];
    as_validator v;
    as_reader_opts opts;
    uint64_t *sset; /* distinct ALLOC streams (value + 1), generic path only */
    size_t sn, scap;
    int smax; /* stream UINT64_MAX seen */
    uint64_t last_stream;
    uint64_t in_events; /* events taken from the decoder (the input position) */
    int rc;             /* sticky: AS_TRACE_EOF or an error, once reached */
    as_trace_error err;
    int native; /* ops == &as_src_native: use the batch decoder */
    /* events validated ahead for as_trace_next (native batches) */
    as_event *ahead;
    size_t ahead_n, ahead_pos;
};

/* Records the reader's sticky error, giving precedence to a broken stream. */
static int reader_fail(as_trace_reader *r, const as_trace_error *e)
{
    const as_trace_error *se = r->in ? as_instream_error(r->in) : NULL;
    r->err = se ? *se : *e;
    if (r->err.code >= 0)
        r->err.code = AS_TRACE_ECORRUPT;
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

/* Counts a stream of an accepted ALLOC: every format holds at most AS_MAX_STREAMS distinct
 * ones (the native format's table, where the default stream 0 always has a slot), so a
 * trace that has more is refused here, whatever its format, and never half-converted. */
static int count_stream(as_trace_reader *r, uint64_t stream, char *msg, size_t cap)
{
    if (r->scap == 0 || (r->sn + 1) * 2 > r->scap) {
        size_t nc = r->scap ? r->scap * 2 : 64;
        uint64_t *ns = calloc(nc, sizeof *ns); /* value + 1; 0 = empty */
        if (!ns) {
            snprintf(msg, cap, "out of memory for the stream table");
            return AS_TRACE_ENOMEM;
        }
        for (size_t i = 0; i < r->scap; i++) {
            if (!r->sset[i])
                continue;
            size_t j = (size_t)((r->sset[i] * 0x9E3779B97F4A7C15ull) >> 32) & (nc - 1);
            while (ns[j])
                j = (j + 1) & (nc - 1);
            ns[j] = r->sset[i];
        }
        free(r->sset);
        r->sset = ns;
        r->scap = nc;
        if (r->sn == 0) /* the default stream always counts */
            r->sset[(size_t)((1 * 0x9E3779B97F4A7C15ull) >> 32) & (nc - 1)] = 1, r->sn = 1;
    }
    if (stream == UINT64_MAX) { /* its key would be the empty mark: a flag instead */
        if (!r->smax && r->sn >= AS_MAX_STREAMS)
            goto full;
        r->sn += !r->smax;
        r->smax = 1;
        return 0;
    }
    uint64_t key = stream + 1;
    size_t j = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (r->scap - 1);
    while (r->sset[j]) {
        if (r->sset[j] == key)
            return 0;
        j = (j + 1) & (r->scap - 1);
    }
    if (r->sn < AS_MAX_STREAMS) {
        r->sset[j] = key;
        r->sn++;
        return 0;
    }
full:
    {
        snprintf(msg, cap,
                 "ALLOC on stream 0x%llx: more than %d distinct streams (the limit of every "
                 "trace format, the default stream 0 included)",
                 (unsigned long long)stream, AS_MAX_STREAMS);
        return AS_TRACE_ENOMEM;
    }
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
                as_trace_set_error(&e, rc, r->name, off0, 0, "decoder failed: %s",
                                   as_strerror(rc));
            return reader_fail(r, &e);
        }
        uint64_t idx = r->in_events++;
        char msg[256];
        int vr = validate_fast(&r->v, ev) == 0 ? 0 : as_validate(&r->v, ev, msg, sizeof msg);
        if (vr == 0 && ev->op == AS_OP_ALLOC && ev->stream != r->last_stream &&
            (vr = count_stream(r, ev->stream, msg, sizeof msg)) == 0)
            r->last_stream = ev->stream;
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

/* Fills up to cap validated events from the native batch decoder, which runs the
 * validator's fast path itself; only an event the fast path declines comes back here. */
static int next_native(as_trace_reader *r, as_event *evs, size_t cap, size_t *n)
{
    *n = 0;
    while (*n == 0) {
        size_t got = 0, checked = 0;
        as_trace_error e;
        e.code = 0;
        int rc = as_native_next_batch(r->st, &r->v, evs, cap, &got, &checked, &e);
        r->in_events += checked;
        *n = checked;
        if (checked < got) {
            /* The last event: an error, a lenient skip, or just not a fast-path case. */
            char msg[256];
            int vr = as_validate(&r->v, &evs[checked], msg, sizeof msg);
            if (vr < 0) {
                reader_invalid(r, vr, as_native_last_offset(r->st), 0, msg);
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
    if (!r->native)
        return next_generic(r, ev);
    r->ahead_pos = r->ahead_n = 0;
    int rc = next_native(r, r->ahead, BATCH, &r->ahead_n);
    if (rc)
        return rc;
    *ev = r->ahead[r->ahead_pos++];
    return 0;
}

int as_trace_next_batch(as_trace_reader *r, as_event *evs, size_t cap, size_t *n)
{
    *n = 0;
    if (cap == 0)
        return AS_TRACE_EUSAGE;
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
    if (r->native)
        return next_native(r, evs, cap, n);
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

const as_meta *as_trace_reader_meta(const as_trace_reader *r)
{
    return &r->meta;
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

void as_trace_reader_live(const as_trace_reader *r, uint64_t *live, size_t *table_bytes)
{
    if (live)
        *live = as_live_count(&r->v.live);
    if (table_bytes)
        *table_bytes = as_live_bytes(&r->v.live);
}

void as_trace_close(as_trace_reader *r)
{
    if (!r)
        return;
    if (r->st && r->ops->close)
        r->ops->close(r->st);
    as_instream_close(r->in);
    as_meta_free(&r->meta);
    as_live_free(&r->v.live);
    free(r->sset);
    free(r->ahead);
    free(r);
}

static as_trace_reader *reader_new(const char *name, const as_reader_opts *opts)
{
    as_trace_reader *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
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

static int set_native(as_trace_reader *r)
{
    r->native = r->ops == &as_src_native;
    if (r->native) {
        r->ahead = malloc(BATCH * sizeof *r->ahead);
        if (!r->ahead)
            return AS_TRACE_ENOMEM;
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
        if (ops && ops->probe && ops->probe(head, (size_t)n)) {
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
            rc = as_trace_set_error(err, AS_TRACE_EFORMAT, r->name, 0, 0,
                                    "not a recognised trace format (%scontent starts: %s)", z, hex);
        else
            rc = as_trace_set_error(err, AS_TRACE_EFORMAT, r->name, 0, 0,
                                    "empty input%s: not a trace",
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
    rc = set_native(r);
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
        return as_trace_set_error(err, AS_TRACE_EUSAGE, "", UINT64_MAX, 0, "no path given");
    as_trace_reader *r = reader_new(path, opts);
    if (!r)
        return as_trace_set_error(err, AS_TRACE_ENOMEM, path, 0, 0, "out of memory");
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
        return as_trace_set_error(err, AS_TRACE_EUSAGE, name, UINT64_MAX, 0, "no data");
    as_trace_reader *r = reader_new(name, opts);
    if (!r)
        return as_trace_set_error(err, AS_TRACE_ENOMEM, name, 0, 0, "out of memory");
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
        return AS_TRACE_EUSAGE;
    }
    as_trace_reader *r = reader_new(name, NULL);
    if (!r) {
        if (ops->close && st)
            ops->close(st);
        return AS_TRACE_ENOMEM;
    }
    r->ops = ops;
    r->st = st;
    r->fmt = ops->fmt;
    /* A wrapped source has no instream, so it cannot use the native batch path. */
    if (as_meta_copy(&r->meta, meta) < 0) {
        as_trace_close(r);
        return AS_TRACE_ENOMEM;
    }
    *out = r;
    return 0;
}
