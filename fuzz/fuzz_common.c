/*
 * fuzz_common.c - the decoder oracle shared by the format harnesses.
 *
 * as_fuzz_decode feeds bytes to the real reader from memory and checks: every refusal is
 * one of the documented negative codes with a message naming the input; the error is
 * sticky; the events decoded before any error are valid, so the native and text writers
 * accept them and reading back what they wrote gives the same metadata and events (the
 * lossless round trip of traces/FORMAT.md); a zstd-wrapped copy of the input decodes to
 * the same outcome (offsets are in the decompressed stream, so even the message matches).
 * Invariant: nothing here aborts except through FUZZ_ASSERT.
 */
#define _GNU_SOURCE
#include "fuzz/fuzz.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "trace.h"

/* ---- decoded traces --------------------------------------------------------------------- */

/* Events kept for the round trip; beyond this the input is only decoded (the fuzzer's
 * -max_len keeps inputs far below it, but a pickle can expand). */
#define MAX_KEEP (1u << 16)
#define MAX_DECODE (1u << 20)

typedef struct decoded {
    as_event *ev;
    size_t n, cap;
    as_meta meta;
    as_sites *sites;     /* the reader's call-site table, copied */
    int rc;              /* AS_TRACE_EOF or the error */
    as_trace_error err;
    int truncated;       /* more than MAX_KEEP events */
    as_trace_fmt fmt;
} decoded;

static void decoded_free(decoded *d)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->ev[i].op == AS_OP_MARK) /* the others' pool and slot share the field */
            free((void *)(uintptr_t)d->ev[i].label);
    free(d->ev);
    as_meta_free(&d->meta);
    as_sites_free(d->sites);
    memset(d, 0, sizeof *d);
}

static int known_code(int rc)
{
    return rc == AS_EIO || rc == AS_EFORMAT || rc == AS_ECORRUPT || rc == AS_EINVAL ||
           rc == AS_ENOMEM || rc == AS_EUSAGE;
}

static void keep(decoded *d, const as_event *e)
{
    if (d->n == MAX_KEEP) {
        d->truncated = 1;
        return;
    }
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 256;
        d->ev = realloc(d->ev, d->cap * sizeof *d->ev);
        FUZZ_ASSERT_MSG(d->ev, "host memory");
    }
    as_event c = *e;
    if (e->op != AS_OP_ALLOC && e->op != AS_OP_EMPTY_CACHE) /* their pool shares the field */
        c.label = NULL;
    if (e->op == AS_OP_MARK) {
        FUZZ_ASSERT_MSG(e->label && strlen(e->label) <= AS_MAX_LABEL, "MARK label");
        c.label = strdup(e->label);
    } else {
        /* a FREE's pool is zero (its live slot shares the field with the label) */
        FUZZ_ASSERT_MSG(e->pool == 0 || e->op == AS_OP_ALLOC || e->op == AS_OP_EMPTY_CACHE,
                        "pool on a FREE");
    }
    d->ev[d->n++] = c;
}

/* Checks on each event that every reader must guarantee (trace.h). */
static void check_event(const as_event *e, uint64_t nalloc)
{
    FUZZ_ASSERT_MSG((unsigned)e->op <= AS_OP_MARK, "op %d", (int)e->op);
    if (e->op == AS_OP_ALLOC) {
        FUZZ_ASSERT_MSG(e->id == nalloc, "ALLOC id %llu, ordinal %llu",
                        (unsigned long long)e->id, (unsigned long long)nalloc);
        FUZZ_ASSERT_MSG(e->size >= 1 && e->size <= AS_MAX_ALLOC_SIZE, "size %llu",
                        (unsigned long long)e->size);
    } else if (e->op == AS_OP_FREE || e->op == AS_OP_FREE_REQ) {
        FUZZ_ASSERT_MSG(e->id < nalloc, "free of id %llu >= allocs %llu",
                        (unsigned long long)e->id, (unsigned long long)nalloc);
        FUZZ_ASSERT_MSG(e->size >= 1, "FREE without its size");
    }
}

/* Decodes data fully; reads in batches of a size picked from the input so that both
 * as_trace_next and as_trace_next_batch are exercised. */
static void decode(const uint8_t *data, size_t size, const char *name, int lenient,
                   decoded *d)
{
    memset(d, 0, sizeof *d);
    as_reader_opts o = { .lenient = lenient };
    as_trace_reader *r = NULL;
    as_trace_error err;
    memset(&err, 0, sizeof err);
    int rc = as_trace_open_mem(data, size, name, &o, &r, &err);
    if (rc < 0) {
        FUZZ_ASSERT_MSG(known_code(rc) && err.code == rc, "open returned %d, err.code %d", rc,
                        err.code);
        FUZZ_ASSERT_MSG(r == NULL, "reader left open after a refusal");
        FUZZ_ASSERT_MSG(err.msg[0] && strcmp(err.path, name) == 0, "message '%s' path '%s'",
                        err.msg, err.path);
        d->rc = rc;
        d->err = err;
        return;
    }
    FUZZ_ASSERT_MSG(rc == 0 && r, "open returned %d", rc);
    d->fmt = as_trace_reader_format(r);
    FUZZ_ASSERT(as_meta_copy(&d->meta, as_trace_reader_meta(r)) == 0);
    FUZZ_ASSERT(as_sites_new(&d->sites) == 0 &&
                as_sites_copy(d->sites, as_trace_reader_sites(r)) == 0);
    uint32_t nsites = as_sites_count(as_trace_reader_sites(r));
    size_t batch = 1 + (size ? data[size / 2] % 7 : 0) * 37;
    as_event evs[256];
    uint64_t nalloc = 0, total = 0;
    for (;;) {
        size_t n = 0;
        if (batch == 1) {
            rc = as_trace_next(r, &evs[0]);
            n = rc == 0;
        } else {
            rc = as_trace_next_batch(r, evs, batch, &n);
            FUZZ_ASSERT_MSG(rc == 0 ? n >= 1 && n <= batch : n == 0, "batch rc %d n %zu", rc, n);
        }
        for (size_t i = 0; i < n; i++) {
            check_event(&evs[i], nalloc);
            FUZZ_ASSERT_MSG(evs[i].site <= nsites && (evs[i].op == AS_OP_ALLOC || !evs[i].site),
                            "site %u of %u sites", evs[i].site, nsites);
            FUZZ_ASSERT_MSG(evs[i].op != AS_OP_MARK || i == n - 1, "MARK not last of batch");
            nalloc += evs[i].op == AS_OP_ALLOC;
            keep(d, &evs[i]);
        }
        total += n;
        if (rc != 0)
            break;
        if (total >= MAX_DECODE) {
            d->truncated = 1;
            break;
        }
    }
    if (rc < 0) {
        const as_trace_error *e = as_trace_reader_error(r);
        FUZZ_ASSERT_MSG(known_code(rc) && e && e->code == rc, "next returned %d", rc);
        FUZZ_ASSERT_MSG(e->msg[0] && strcmp(e->path, name) == 0, "message '%s' path '%s'",
                        e->msg, e->path);
        d->err = *e;
        /* Errors are sticky. */
        as_event again;
        FUZZ_ASSERT_MSG(as_trace_next(r, &again) == rc, "error not sticky");
    } else if (rc == AS_TRACE_EOF) {
        as_event again;
        FUZZ_ASSERT_MSG(as_trace_next(r, &again) == AS_TRACE_EOF, "EOF not sticky");
    }
    d->rc = rc;
    as_trace_close(r);
}

static int same_event(const as_event *a, const as_event *b)
{
    if (a->op != b->op || a->id != b->id || a->size != b->size || a->stream != b->stream ||
        a->time_us != b->time_us || a->site != b->site)
        return 0;
    if (a->op == AS_OP_MARK)
        return strcmp(a->label, b->label) == 0;
    if (a->op == AS_OP_ALLOC || a->op == AS_OP_EMPTY_CACHE)
        return a->pool == b->pool;
    return 1;
}

/* Every site of a and b: the same stack of the same frames. */
static int same_sites(const as_sites *a, const as_sites *b)
{
    if (as_sites_count(a) != as_sites_count(b))
        return 0;
    for (uint32_t k = 1; k <= as_sites_count(a); k++) {
        const uint32_t *ia, *ib;
        size_t na = as_sites_stack(a, k, &ia), nb = as_sites_stack(b, k, &ib);
        if (na != nb)
            return 0;
        for (size_t i = 0; i < na; i++) {
            as_frame fa, fb;
            as_sites_frame(a, ia[i], &fa);
            as_sites_frame(b, ib[i], &fb);
            if (fa.line != fb.line || strcmp(fa.filename, fb.filename) || strcmp(fa.name, fb.name))
                return 0;
        }
    }
    return 1;
}

static int same_meta(const as_meta *a, const as_meta *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->kv[i].key, b->kv[i].key) || strcmp(a->kv[i].value, b->kv[i].value))
            return 0;
    return 1;
}

static uint64_t content_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* ---- the round trip, through a memfd so that the real file writer is used --------------- */

static int rt_fd = -1;

static void rt_write(const decoded *d, as_trace_fmt fmt, uint8_t **out, size_t *n)
{
    if (rt_fd < 0) {
        rt_fd = memfd_create("as_fuzz_rt", MFD_CLOEXEC);
        FUZZ_ASSERT_MSG(rt_fd >= 0, "memfd_create");
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", rt_fd);
    as_trace_writer *w = NULL;
    as_trace_error err;
    int rc = as_trace_writer_open_sites(path, fmt, &d->meta, d->sites, &w, &err);
    FUZZ_ASSERT_MSG(rc == 0, "writer refused the metadata it read: %s", err.msg);
    for (size_t i = 0; i < d->n; i++) {
        rc = as_trace_write(w, &d->ev[i]);
        FUZZ_ASSERT_MSG(rc == 0, "%s writer refused event %zu that the reader accepted",
                        as_trace_fmt_name(fmt), i);
    }
    rc = as_trace_writer_close(w, &err);
    FUZZ_ASSERT_MSG(rc == 0, "writer close: %s", err.msg);
    struct stat st;
    FUZZ_ASSERT(fstat(rt_fd, &st) == 0);
    *n = (size_t)st.st_size;
    *out = malloc(*n ? *n : 1);
    FUZZ_ASSERT(*out);
    FUZZ_ASSERT(pread(rt_fd, *out, *n, 0) == (ssize_t)*n);
}

static void round_trip(const decoded *d, as_trace_fmt fmt)
{
    uint8_t *buf;
    size_t n;
    rt_write(d, fmt, &buf, &n);
    decoded back;
    decode(buf, n, "<round-trip>", 0, &back);
    FUZZ_ASSERT_MSG(back.rc == AS_TRACE_EOF, "%s round trip does not read back: %s",
                    as_trace_fmt_name(fmt), back.err.msg);
    FUZZ_ASSERT_MSG(back.fmt == fmt, "round trip format %d", (int)back.fmt);
    FUZZ_ASSERT_MSG(same_meta(&d->meta, &back.meta), "%s round trip changed the metadata",
                    as_trace_fmt_name(fmt));
    FUZZ_ASSERT_MSG(same_sites(d->sites, back.sites), "%s round trip changed the call sites",
                    as_trace_fmt_name(fmt));
    FUZZ_ASSERT_MSG(back.n == d->n, "%s round trip: %zu events, was %zu",
                    as_trace_fmt_name(fmt), back.n, d->n);
    for (size_t i = 0; i < d->n; i++)
        FUZZ_ASSERT_MSG(same_event(&d->ev[i], &back.ev[i]), "%s round trip changed event %zu",
                        as_trace_fmt_name(fmt), i);
    decoded_free(&back);
    free(buf);
}

/* ---- zstd-wrapped copy ------------------------------------------------------------------ */

static ZSTD_CCtx *cctx;

static void zstd_same(const uint8_t *data, size_t size, const char *name, int lenient,
                      const decoded *d)
{
    if (!cctx)
        cctx = ZSTD_createCCtx();
    FUZZ_ASSERT(cctx);
    size_t cap = ZSTD_compressBound(size);
    uint8_t *z = malloc(cap);
    FUZZ_ASSERT(z);
    size_t zn = ZSTD_compressCCtx(cctx, z, cap, data, size, 1);
    FUZZ_ASSERT_MSG(!ZSTD_isError(zn), "zstd: %s", ZSTD_getErrorName(zn));
    decoded w;
    decode(z, zn, name, lenient, &w);
    FUZZ_ASSERT_MSG(w.rc == d->rc, "zstd-wrapped: rc %d, plain %d", w.rc, d->rc);
    FUZZ_ASSERT_MSG(w.n == d->n, "zstd-wrapped: %zu events, plain %zu", w.n, d->n);
    for (size_t i = 0; i < d->n; i++)
        FUZZ_ASSERT_MSG(same_event(&d->ev[i], &w.ev[i]), "zstd-wrapped: event %zu differs", i);
    if (d->rc < 0)
        FUZZ_ASSERT_MSG(w.err.offset == d->err.offset && w.err.event == d->err.event,
                        "zstd-wrapped error at offset %llu event %llu, plain %llu %llu",
                        (unsigned long long)w.err.offset, (unsigned long long)w.err.event,
                        (unsigned long long)d->err.offset, (unsigned long long)d->err.event);
    decoded_free(&w);
    free(z);
}

void as_fuzz_decode(const uint8_t *data, size_t size, const char *name, unsigned flags)
{
    for (int lenient = 0; lenient <= !!(flags & AS_FUZZ_LENIENT); lenient++) {
        decoded d;
        decode(data, size, name, lenient, &d);
        if ((flags & AS_FUZZ_RT) && !d.truncated && d.fmt != AS_FMT_UNKNOWN) {
            /* The valid prefix of a refused input round-trips too. */
            round_trip(&d, AS_FMT_TEXT);
            /* The native writer's level-9 zstd context costs ~9 ms per trace under ASan
             * (100 runs/s), so only one input in 32, chosen by content so that a
             * crash reproduces, take the native round trip. */
            if (content_hash(data, size) % 32 == 0)
                round_trip(&d, AS_FMT_NATIVE);
        }
        /* A zstd frame inside zstd is not unwrapped twice: only wrap plain input. */
        if ((flags & AS_FUZZ_ZSTD) && !d.truncated && size < (64u << 10) &&
            !(size >= 4 && data[0] == 0x28 && data[1] == 0xB5 && data[2] == 0x2F &&
              data[3] == 0xFD))
            zstd_same(data, size, name, lenient, &d);
        decoded_free(&d);
    }
}
