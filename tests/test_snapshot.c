/*
 * test_snapshot.c - the torch snapshot importer (traces/torch_snapshot.c) through the public
 * reader: the real H200 snapshots (tests/data) against the answer keys and Python's view
 * of the pickles, and small snapshots written here (a tiny pickle writer below, protocol 2
 * or 4 with the memo, the way torch's C++ pickler and Python's pickle write them) for the
 * free pairing rule, address reuse, prehistoric blocks, several devices and bad input.
 */
#include <CUnit/CUnit.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include "check.h"
#include "pickle.h"
#include "trace.h"
#include "util.h"

/* ---- reading a whole trace ------------------------------------------------------------ */

typedef struct got {
    as_event ev[64];
    size_t n, allocs, frees, free_reqs; /* n: events other than MARKs */
    size_t marks;
    uint64_t hash; /* the same fold as the Python reference in snapshot_h200_events */
    uint64_t warnings;
    int rc;
    as_trace_error err;
    char meta[2048]; /* "k=v\n..." */
} got;

static uint64_t fold(uint64_t h, const as_event *e)
{
    uint64_t op = e->op == AS_OP_ALLOC ? 0 : e->op == AS_OP_FREE ? 1 : 2;
    return h * 1000003u + op * 7 + e->id * 31 + e->size * 131 + e->stream;
}

static int read_all(const char *path, int lenient, got *g)
{
    memset(g, 0, sizeof *g);
    as_trace_reader *r = NULL;
    as_reader_opts o = {.lenient = lenient};
    g->rc = as_trace_open(path, &o, &r, &g->err);
    if (g->rc)
        return g->rc;
    const as_meta *m = as_trace_reader_meta(r);
    size_t j = 0;
    for (size_t i = 0; i < m->n && j < sizeof g->meta; i++)
        j += (size_t)snprintf(g->meta + j, sizeof g->meta - j, "%s=%s\n", m->kv[i].key,
                              m->kv[i].value);
    as_event e;
    while ((g->rc = as_trace_next(r, &e)) == 0) {
        if (e.op == AS_OP_MARK) { /* annotations: test_frames.c */
            g->marks++;
            continue;
        }
        if (g->n < 64)
            g->ev[g->n] = e;
        g->n++;
        g->allocs += e.op == AS_OP_ALLOC;
        g->frees += e.op == AS_OP_FREE;
        g->free_reqs += e.op == AS_OP_FREE_REQ;
        g->hash = fold(g->hash, &e);
    }
    if (g->rc == AS_TRACE_EOF)
        g->rc = 0;
    else
        g->err = *as_trace_reader_error(r);
    g->warnings = as_trace_reader_warnings(r);
    as_trace_close(r);
    return g->rc;
}

/* 1 if the metadata holds exactly key=value. */
static int has_meta(const got *g, const char *kv)
{
    char want[256];
    snprintf(want, sizeof want, "%s\n", kv);
    const char *p = g->meta;
    size_t n = strlen(want);
    while (p && *p) {
        if (strncmp(p, want, n) == 0)
            return 1;
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return 0;
}

#define CHECK_EV(g, i, op_, id_, size_, stream_)                                                   \
    do {                                                                                           \
        CU_ASSERT_EQUAL((g)->ev[i].op, op_);                                                       \
        CU_ASSERT_EQUAL((g)->ev[i].id, id_);                                                       \
        CU_ASSERT_EQUAL((g)->ev[i].size, size_);                                                   \
        CU_ASSERT_EQUAL((g)->ev[i].stream, stream_);                                               \
    } while (0)

/* ---- the real H200 snapshots (tests/data) -------------------------------------------- */

static void snapshot_h200_counts(void)
{
    /* allocs and events from the keys (key.json "allocs"/"events"). The resnet and moe
     * traces have no deferred free: every free_requested is directly followed by its
     * free_completed, so each pair is one FREE and events = allocs + free_completed, which is
     * what the key counts (11460 + 11457 = 22917, 9261 + 9258 = 18519). The 3 blocks never
     * freed are the ones active in the final segments. */
    static const struct {
        const char *path;
        size_t allocs, events, frees, free_reqs;
        const char *config;
    } want[] = {
        {"tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst", 11460, 22917, 11457, 0,
         "allocator_config="},
        {"tests/data/torch-2.11-h200/moe_like.pickle.zst", 9261, 18519, 9258, 0,
         "allocator_config="},
        /* The streams keys say 28952 events: every alloc, free_requested and free_completed
         * entry (9811 + 9576 + 9565). We emit a free_requested whose free_completed is the
         * next alloc/free entry as one FREE (9428 of them), and the other 148 as FREE_REQ
         * followed later by FREE (137 complete; 11 are still pending at the dump, matching
         * the 11 active_pending_free blocks): 9811 + 9428 + 148 + 137 = 19524 events. The
         * allocation ordinals, which the key's segment events use, are the same. */
        {"tests/data/torch-2.11-h200-streams/streams2_default.pickle.zst", 9811, 19524, 9565, 148,
         "allocator_config="},
        /* Same run under expandable segments: 9430 pairs fold, 146 deferred (135 complete):
         * 9811 + 9430 + 146 + 135 = 19522. */
        {"tests/data/torch-2.11-h200-streams/streams2_expandable_segments_True.pickle.zst", 9811,
         19522, 9565, 146, "allocator_config=expandable_segments:True"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        got *g = malloc(sizeof *g);
        int rc = read_all(tu_path(want[i].path), 0, g);
        if (rc && g->err.offset != UINT64_MAX)
            fprintf(stderr, "\n%s: byte %llu: %s\n", want[i].path,
                    (unsigned long long)g->err.offset, g->err.msg);
        else if (rc)
            fprintf(stderr, "\n%s: %s\n", want[i].path, g->err.msg);
        CU_ASSERT_EQUAL(rc, 0);
        CU_ASSERT_EQUAL(g->allocs, want[i].allocs);
        CU_ASSERT_EQUAL(g->n, want[i].events);
        CU_ASSERT_EQUAL(g->frees, want[i].frees);
        CU_ASSERT_EQUAL(g->free_reqs, want[i].free_reqs);
        CU_ASSERT(has_meta(g, "source=torch-snapshot"));
        CU_ASSERT(has_meta(g, "device=0"));
        CU_ASSERT(has_meta(g, "prehistoric_allocs=0"));
        CU_ASSERT(has_meta(g, "torch.history_truncated=0"));
        CU_ASSERT(has_meta(g, "torch.state_mismatches=0"));
        CU_ASSERT(has_meta(g, "torch.max_split_size=-1"));
        CU_ASSERT(has_meta(g, want[i].config));
        free(g);
    }
}

static void snapshot_h200_events(void)
{
    /* Every event against an independent Python reading of the pickles. The reference
     * (python3, on the zstd -d output):
     *   t = [e for e in pickle.load(f)['device_traces'][0]
     *        if e['action'] in ('alloc', 'free_requested', 'free_completed')]
     *   walk t keeping live[addr] = (ordinal, size, stream); alloc -> (0, k, size, stream);
     *   free_requested whose t[i+1] is the free_completed of the same addr -> (1, ...) and
     *   skip t[i+1]; other free_requested -> (2, ...); free_completed -> (1, ...)
     *   h = 0; for (op, a, s, st) in events: h = (h*1000003 + op*7 + a*31 + s*131 + st) % 2**64
     * gave these values. */
    static const struct {
        const char *path;
        uint64_t hash;
    } want[] = {
        {"tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst", 0xff64cafac1a57fb2ull},
        {"tests/data/torch-2.11-h200/moe_like.pickle.zst", 0x78e8cd5b9f5c6749ull},
        {"tests/data/torch-2.11-h200-streams/streams2_default.pickle.zst", 0x829cb068a33cbd4aull},
        {"tests/data/torch-2.11-h200-streams/streams2_expandable_segments_True.pickle.zst",
         0x3892a34dbe03d28aull},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        got *g = malloc(sizeof *g);
        CU_ASSERT_EQUAL(read_all(tu_path(want[i].path), 0, g), 0);
        CU_ASSERT_EQUAL(g->hash, want[i].hash);
        free(g);
    }
}

/* Reads events until index `upto` and returns that event. */
static int event_at(const char *path, uint64_t upto, as_event *out)
{
    as_trace_reader *r = NULL;
    as_trace_error err;
    int rc = as_trace_open(path, NULL, &r, &err);
    if (rc)
        return rc;
    for (uint64_t i = 0; i <= upto && rc == 0; i++)
        rc = as_trace_next(r, out);
    as_trace_close(r);
    return rc;
}

static void snapshot_h200_spot_values(void)
{
    /* Golden values from python3 on the zstd -d output:
     *   al = [e for e in pickle.load(f)['device_traces'][0] if e['action'] == 'alloc']
     *   [(k, al[k]['size'], al[k]['stream'], al[k]['time_us']) for k in (0, 1, 2, 5000)]
     * resnet: (0, 37632, 0, 1795936507807473), (1, 256, 0, 1795936507807812),
     *         (2, 256, ...), (5000, 1048576, 0, 1795936509079227)
     * With no deferred free the k-th alloc is event 0, 1, 2 here (the first frees come
     * later), checked by the id. */
    const char *resnet = tu_path("tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst");
    as_event e;
    CU_ASSERT_EQUAL_FATAL(event_at(resnet, 0, &e), 0);
    CU_ASSERT_EQUAL(e.op, AS_OP_ALLOC);
    CU_ASSERT_EQUAL(e.id, 0);
    CU_ASSERT_EQUAL(e.size, 37632);
    CU_ASSERT_EQUAL(e.time_us, 1795936507807473ll);
    CU_ASSERT_EQUAL_FATAL(event_at(resnet, 1, &e), 0);
    CU_ASSERT_EQUAL(e.id, 1);
    CU_ASSERT_EQUAL(e.size, 256);
    CU_ASSERT_EQUAL(e.time_us, 1795936507807812ll);

    /* streams2_default: the first deferred free (python: the first free_requested not
     * followed by its free_completed) is of alloc ordinal 676, size 18905088, on stream
     * 319724480 (a real cudaStream_t), and is event 1188 of the reference walk above. */
    const char *streams = tu_path("tests/data/torch-2.11-h200-streams/streams2_default.pickle.zst");
    CU_ASSERT_EQUAL_FATAL(event_at(streams, 1188, &e), 0);
    CU_ASSERT_EQUAL(e.op, AS_OP_FREE_REQ);
    CU_ASSERT_EQUAL(e.id, 676);
    CU_ASSERT_EQUAL(e.size, 18905088);
    CU_ASSERT_EQUAL(e.stream, 319724480);
}

/* ---- a tiny pickle writer for hand-made snapshots ------------------------------------- */

typedef struct pw {
    uint8_t b[1 << 16];
    size_t n;
    int proto;
    /* memo of key strings, as both picklers share key objects */
    const char *keys[32];
    size_t keymemo[32];
    int nkeys;
    size_t memo; /* next memo index */
} pw;

static void put(pw *w, const void *p, size_t n)
{
    if (w->n + n <= sizeof w->b)
        memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void op(pw *w, uint8_t o)
{
    put(w, &o, 1);
}

static void memoize(pw *w)
{
    if (w->proto >= 4) {
        op(w, 0x94);
    } else {
        uint8_t q[5] = {'r', (uint8_t)w->memo, (uint8_t)(w->memo >> 8), 0, 0};
        put(w, q, 5); /* LONG_BINPUT */
    }
    w->memo++;
}

static void pw_int(pw *w, int64_t v)
{
    if (v >= 0 && v < 256) {
        uint8_t q[2] = {'K', (uint8_t)v};
        put(w, q, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        uint32_t u = (uint32_t)v;
        uint8_t q[5] = {'J', (uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
        put(w, q, 5);
    } else {
        uint8_t q[10] = {0x8a, 8};
        uint64_t u = (uint64_t)v;
        for (int i = 0; i < 8; i++)
            q[2 + i] = (uint8_t)(u >> (8 * i));
        put(w, q, 10);
    }
}

static void pw_str(pw *w, const char *s)
{
    size_t n = strlen(s);
    /* Strings are memoized once and fetched again with BINGET/LONG_BINGET, as real
     * snapshots do with their shared key objects. */
    for (int i = 0; i < w->nkeys; i++) {
        if (strcmp(w->keys[i], s) == 0) {
            size_t m = w->keymemo[i];
            if (m < 256) {
                uint8_t q[2] = {'h', (uint8_t)m};
                put(w, q, 2);
            } else {
                uint8_t q[5] = {'j', (uint8_t)m, (uint8_t)(m >> 8), 0, 0};
                put(w, q, 5);
            }
            return;
        }
    }
    if (w->proto >= 4) {
        uint8_t q[2] = {0x8c, (uint8_t)n};
        put(w, q, 2);
    } else {
        uint8_t q[5] = {'X', (uint8_t)n, 0, 0, 0};
        put(w, q, 5);
    }
    put(w, s, n);
    if (w->nkeys < 32) {
        w->keys[w->nkeys] = s;
        w->keymemo[w->nkeys++] = w->memo;
    }
    memoize(w);
}

static void pw_begin(pw *w, int proto)
{
    memset(w, 0, sizeof *w);
    w->proto = proto;
    uint8_t h[2] = {0x80, (uint8_t)proto};
    put(w, h, 2);
    if (proto >= 4) { /* one FRAME over everything, patched at the end */
        uint8_t f[9] = {0x95};
        put(w, f, 9);
    }
}

static void pw_end(pw *w)
{
    op(w, '.');
    if (w->proto >= 4) {
        uint64_t len = w->n - 11;
        for (int i = 0; i < 8; i++)
            w->b[3 + i] = (uint8_t)(len >> (8 * i));
    }
}

static void dict_open(pw *w)
{
    op(w, '}'), memoize(w), op(w, '(');
}
static void list_open(pw *w)
{
    op(w, ']'), memoize(w), op(w, '(');
}
static void dict_close(pw *w)
{
    op(w, 'u');
}
static void list_close(pw *w)
{
    op(w, 'e');
}

/* One trace entry dict; returns the byte offset of its EMPTY_DICT (what errors name). */
/* A trace entry's dict opened with its plain pairs; the caller adds more and closes it. */
static void entry_open(pw *w, const char *action, int64_t addr, int64_t size, int64_t stream,
                       int64_t t)
{
    dict_open(w);
    pw_str(w, "action"), pw_str(w, action);
    pw_str(w, "addr"), pw_int(w, addr);
    pw_str(w, "size"), pw_int(w, size);
    pw_str(w, "stream"), pw_int(w, stream);
    pw_str(w, "time_us"), pw_int(w, t);
}

static size_t entry(pw *w, const char *action, int64_t addr, int64_t size, int64_t stream,
                    int64_t t)
{
    size_t at = w->n;
    entry_open(w, action, addr, size, stream, t);
    pw_str(w, "compile_context"), pw_str(w, "N/A");
    dict_close(w);
    return at;
}

/* A segment on `device` with one block per (addr, size, state) triple. */
static void segment(pw *w, int device, int64_t base, int64_t total, int64_t stream, int nb, ...)
{
    va_list ap;
    va_start(ap, nb);
    dict_open(w);
    pw_str(w, "device"), pw_int(w, device);
    pw_str(w, "address"), pw_int(w, base);
    pw_str(w, "total_size"), pw_int(w, total);
    pw_str(w, "stream"), pw_int(w, stream);
    pw_str(w, "blocks"), list_open(w);
    for (int i = 0; i < nb; i++) {
        int64_t a = va_arg(ap, int64_t), s = va_arg(ap, int64_t);
        const char *state = va_arg(ap, const char *);
        dict_open(w);
        pw_str(w, "address"), pw_int(w, a);
        pw_str(w, "size"), pw_int(w, s);
        pw_str(w, "requested_size"), pw_int(w, s);
        pw_str(w, "state"), pw_str(w, state);
        dict_close(w);
    }
    list_close(w);
    dict_close(w);
    va_end(ap);
}

static void settings(pw *w, const char *conf)
{
    pw_str(w, "allocator_settings"), dict_open(w);
    pw_str(w, "PYTORCH_CUDA_ALLOC_CONF"), pw_str(w, conf);
    pw_str(w, "max_split_size"), pw_int(w, 134217728);
    pw_str(w, "expandable_segments"), op(w, 0x89);
    pw_str(w, "roundup_power2_divisions"), dict_open(w);
    pw_str(w, "1"), pw_int(w, 4), pw_str(w, "2"), pw_int(w, 8);
    dict_close(w);
    dict_close(w);
}

static const char *write_file(const pw *w, int compress)
{
    const char *path = tu_tmp(compress ? ".pickle.zst" : ".pickle");
    FILE *f = fopen(path, "wb");
    if (!f)
        return path;
    if (compress) {
        size_t cap = ZSTD_compressBound(w->n);
        void *z = malloc(cap);
        size_t zn = ZSTD_compress(z, cap, w->b, w->n, 3);
        fwrite(z, 1, ZSTD_isError(zn) ? 0 : zn, f);
        free(z);
    } else {
        fwrite(w->b, 1, w->n, f);
    }
    fclose(f);
    return path;
}

/* ---- hand-made snapshots -------------------------------------------------------------- */

static void build_basic(pw *w, int proto)
{
    pw_begin(w, proto);
    dict_open(w);
    pw_str(w, "segments"), list_open(w);
    segment(w, 0, 0x1000, 0x2000, 0, 2, (int64_t)0x1000, (int64_t)512, "active_allocated",
            (int64_t)0x1200, (int64_t)0x1e00, "inactive");
    list_close(w);
    pw_str(w, "device_traces"), list_open(w);
    list_open(w);
    entry(w, "segment_alloc", 0x1000, 0x2000, 0, 100);
    entry(w, "alloc", 0x1000, 100, 0, 101); /* A: id 0 */
    entry(w, "segment_alloc", 0x8000, 0x200000, 7, 102);
    entry(w, "alloc", 0x8000, 300000, 7, 103);          /* B: id 1, on stream 7 */
    entry(w, "free_requested", 0x1000, 100, 0, 104);    /* A: no stream use */
    entry(w, "free_completed", 0x1000, 100, 0, 104);    /*   -> one FREE */
    entry(w, "free_requested", 0x8000, 300000, 7, 105); /* B: record_stream'd */
    entry(w, "oom", 123456, 2097152, 0, 106);
    entry(w, "alloc", 0x1000, 50, 0, 107);              /* C: reuses A's address, id 2 */
    entry(w, "free_completed", 0x8000, 300000, 7, 108); /* B completes later */
    entry(w, "snapshot", 0, 512, 0, 109);
    entry(w, "free_requested", 0x1000, 50, 0, 110);     /* C: its completion comes after... */
    entry(w, "segment_free", 0x8000, 0x200000, 7, 111); /* ...a non-event entry: still a FREE */
    entry(w, "free_completed", 0x1000, 50, 0, 112);
    entry(w, "alloc", 0x1000, 512, 0, 113); /* D: id 3, live at the dump */
    entry(w, "mystery_action", 1, 2, 3, 114);
    list_close(w);
    list_close(w);
    settings(w, "max_split_size_mb:128,roundup_power2_divisions:[1:4,2:8]");
    pw_str(w, "external_annotations"), list_open(w), list_close(w);
    dict_close(w);
    pw_end(w);
}

static void snapshot_handmade_basic(void)
{
    static pw w;
    got *g = malloc(sizeof *g);
    static const int protos[] = {2, 4, 5};
    for (int pi = 0; pi < 3; pi++) {
        int proto = protos[pi];
        for (int z = 0; z < 2; z++) {
            build_basic(&w, proto);
            const char *path = write_file(&w, z);
            int rc = read_all(path, 0, g);
            if (rc)
                fprintf(stderr, "\nbasic: %s at %llu\n", g->err.msg,
                        (unsigned long long)g->err.offset);
            CU_ASSERT_EQUAL_FATAL(rc, 0);
            CU_ASSERT_EQUAL_FATAL(g->n, 8);
            CHECK_EV(g, 0, AS_OP_ALLOC, 0, 100, 0);
            CU_ASSERT_EQUAL(g->ev[0].time_us, 101);
            CHECK_EV(g, 1, AS_OP_ALLOC, 1, 300000, 7);
            CHECK_EV(g, 2, AS_OP_FREE, 0, 100, 0);
            CHECK_EV(g, 3, AS_OP_FREE_REQ, 1, 300000, 7);
            CU_ASSERT_EQUAL(g->ev[3].time_us, 105);
            CHECK_EV(g, 4, AS_OP_ALLOC, 2, 50, 0);
            CHECK_EV(g, 5, AS_OP_FREE, 1, 300000, 7);
            CU_ASSERT_EQUAL(g->ev[5].time_us, 108);
            CHECK_EV(g, 6, AS_OP_FREE, 2, 50, 0);
            CHECK_EV(g, 7, AS_OP_ALLOC, 3, 512, 0);
            CU_ASSERT(has_meta(g, "prehistoric_allocs=0"));
            CU_ASSERT(has_meta(g, "torch.deferred_frees=1"));
            CU_ASSERT(has_meta(g, "torch.oom_entries=1"));
            CU_ASSERT(has_meta(g, "torch.actions=alloc:4,free_requested:3,free_completed:3,"
                                  "segment_alloc:2,segment_free:1,snapshot:1,oom:1,other:1"));
            CU_ASSERT(has_meta(g, "allocator_config=max_split_size_mb:128,"
                                  "roundup_power2_divisions:[1:4,2:8]"));
            CU_ASSERT(has_meta(g, "torch.max_split_size=134217728"));
            CU_ASSERT(has_meta(g, "torch.expandable_segments=False"));
            CU_ASSERT(has_meta(g, "torch.roundup_power2_divisions=[1:4,2:8]"));
            /* One segment of 0x2000 at the dump; the trace made 0x2000 + 0x200000 and freed
             * 0x200000, so 0x2000 - (0x2000 + 0x200000) + 0x200000 = 0 came before it. */
            CU_ASSERT(has_meta(g, "torch.segments_at_dump=1"));
            CU_ASSERT(has_meta(g, "torch.reserved_before_trace=0"));
            CU_ASSERT(has_meta(g, "torch.state_mismatches=0"));
            CU_ASSERT(has_meta(g, "torch.history_truncated=0"));
            char pv[40];
            snprintf(pv, sizeof pv, "torch.pickle_protocol=%d", proto);
            CU_ASSERT(has_meta(g, pv));
            tu_rm(path);
        }
    }
    free(g);
}

static void snapshot_prehistoric(void)
{
    /* Recording began while three blocks were live: 0x5000 is only free_completed, 0x3000
     * is freed by a folded pair, 0x9000 is still active in the final segments and never
     * appears in the trace. They become ALLOCs 0..2 in address order (0x3000, 0x5000,
     * 0x9000) and the trace's first alloc (0x6000) is ordinal 3 = prehistoric_allocs + 0. */
    static pw w;
    pw_begin(&w, 4);
    dict_open(&w);
    pw_str(&w, "segments"), list_open(&w);
    segment(&w, 0, 0x2000, 0x200000, 0, 3, (int64_t)0x6000, (int64_t)4096, "active_allocated",
            (int64_t)0x9000, (int64_t)16, "active_allocated", (int64_t)0xa000, (int64_t)64,
            "inactive");
    segment(&w, 1, 0x90000, 0x200000, 0, 1, (int64_t)0x90000, (int64_t)8, "active_allocated");
    list_close(&w);
    pw_str(&w, "device_traces"), list_open(&w);
    list_open(&w);
    entry(&w, "free_completed", 0x5000, 64, 3, 10);
    entry(&w, "free_requested", 0x3000, 32, 0, 11);
    entry(&w, "free_completed", 0x3000, 32, 0, 11);
    entry(&w, "alloc", 0x6000, 4096, 0, 12);
    list_close(&w);
    list_close(&w);
    dict_close(&w);
    pw_end(&w);
    const char *path = write_file(&w, 0);
    got *g = malloc(sizeof *g);
    CU_ASSERT_EQUAL_FATAL(read_all(path, 0, g), 0);
    CU_ASSERT_EQUAL_FATAL(g->n, 6);
    CHECK_EV(g, 0, AS_OP_ALLOC, 0, 32, 0);
    CHECK_EV(g, 1, AS_OP_ALLOC, 1, 64, 3);
    CHECK_EV(g, 2, AS_OP_ALLOC, 2, 16, 0);
    CU_ASSERT_EQUAL(g->ev[0].time_us, 10); /* prologue events take the first entry's time */
    CHECK_EV(g, 3, AS_OP_FREE, 1, 64, 3);
    CHECK_EV(g, 4, AS_OP_FREE, 0, 32, 0);
    CHECK_EV(g, 5, AS_OP_ALLOC, 3, 4096, 0);
    CU_ASSERT(has_meta(g, "prehistoric_allocs=3"));
    CU_ASSERT(has_meta(g, "torch.trace_allocs=1"));
    CU_ASSERT(has_meta(g, "torch.history_truncated=1"));
    CU_ASSERT(has_meta(g, "torch.segments_at_dump=1")); /* device 1's segment not counted */
    CU_ASSERT(has_meta(g, "torch.reserved_before_trace=2097152"));
    CU_ASSERT(has_meta(g, "torch.state_mismatches=0"));
    tu_rm(path);
    free(g);
}

static void snapshot_devices(void)
{
    /* device_traces[0] is empty: device 1's trace is used and the metadata says so. */
    static pw w;
    pw_begin(&w, 2);
    dict_open(&w);
    pw_str(&w, "segments"), list_open(&w), list_close(&w);
    pw_str(&w, "device_traces"), list_open(&w);
    op(&w, ']'); /* device 0: empty list */
    list_open(&w);
    entry(&w, "alloc", 0x7f0000000000ll, 1ll << 33, 0x7f00deadbeefll, 5);
    list_close(&w);
    list_close(&w);
    dict_close(&w);
    pw_end(&w);
    const char *path = write_file(&w, 0);
    got *g = malloc(sizeof *g);
    CU_ASSERT_EQUAL_FATAL(read_all(path, 0, g), 0);
    CU_ASSERT_EQUAL_FATAL(g->n, 1);
    CHECK_EV(g, 0, AS_OP_ALLOC, 0, 1ull << 33, 0x7f00deadbeefull);
    CU_ASSERT(has_meta(g, "device=1"));
    CU_ASSERT(has_meta(g, "torch.devices=2"));
    CU_ASSERT(has_meta(g, "torch.traced_devices=1"));
    tu_rm(path);

    /* No device_traces at all (history was off): the live blocks of the dump, as ALLOCs. */
    pw_begin(&w, 4);
    dict_open(&w);
    pw_str(&w, "segments"), list_open(&w);
    segment(&w, 0, 0x2000, 0x200000, 5, 2, (int64_t)0x2000, (int64_t)1000, "active_allocated",
            (int64_t)0x3000, (int64_t)2000, "active_pending_free");
    list_close(&w);
    dict_close(&w);
    pw_end(&w);
    path = write_file(&w, 1);
    CU_ASSERT_EQUAL_FATAL(read_all(path, 0, g), 0);
    CU_ASSERT_EQUAL_FATAL(g->n, 2);
    CHECK_EV(g, 0, AS_OP_ALLOC, 0, 1000, 5);
    CHECK_EV(g, 1, AS_OP_ALLOC, 1, 2000, 5);
    CU_ASSERT(has_meta(g, "prehistoric_allocs=2"));
    tu_rm(path);
    free(g);
}

/* Two devices traced, each with a segment of its own at the dump: device 1's trace is
 * three entries (an alloc, its free, a second alloc still live) and device 0's two (an
 * alloc and a free of a block allocated before the trace, so a prehistoric block). */
static void build_two_devices(pw *w, int proto)
{
    pw_begin(w, proto);
    dict_open(w);
    pw_str(w, "segments"), list_open(w);
    segment(w, 0, 0x10000, 0x200000, 0, 1, (int64_t)0x10000, (int64_t)512, "active_allocated");
    segment(w, 1, 0x90000, 0x200000, 0, 1, (int64_t)0x90200, (int64_t)1024, "active_allocated");
    list_close(w);
    pw_str(w, "device_traces"), list_open(w);
    list_open(w);
    entry(w, "alloc", 0x10000, 500, 0, 1);
    entry(w, "free_completed", 0x10400, 700, 0, 2);
    list_close(w);
    list_open(w);
    entry(w, "alloc", 0x90000, 512, 0, 3);
    entry(w, "free_completed", 0x90000, 512, 0, 4);
    entry(w, "alloc", 0x90200, 1000, 0, 5);
    list_close(w);
    list_close(w);
    dict_close(w);
    pw_end(w);
}

static int read_device(const char *path, int set, unsigned dev, got *g)
{
    memset(g, 0, sizeof *g);
    as_trace_reader *r = NULL;
    as_reader_opts o = {.device_set = set, .device = dev};
    g->rc = as_trace_open(path, &o, &r, &g->err);
    if (g->rc)
        return g->rc;
    const as_meta *m = as_trace_reader_meta(r);
    size_t j = 0;
    for (size_t i = 0; i < m->n && j < sizeof g->meta; i++)
        j += (size_t)snprintf(g->meta + j, sizeof g->meta - j, "%s=%s\n", m->kv[i].key,
                              m->kv[i].value);
    as_event e;
    while ((g->rc = as_trace_next(r, &e)) == 0 && g->n < 64)
        g->ev[g->n++] = e;
    g->rc = g->rc == AS_TRACE_EOF ? 0 : g->rc;
    as_trace_close(r);
    return g->rc;
}

/* The command line: info lists the devices, and every command takes --snapshot-device. */
static void device_cli(const char *tmp)
{
    static char out[8192], err[2048], args[1200], path[1024];
    snprintf(path, sizeof path, "%s", tmp); /* tu_tmp's buffer is reused by tu_run_allocsim */
    snprintf(args, sizeof args, "info '%s'", path);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "traces 2 devices: 0 (2 entries), 1 (3 entries); pick "
                                       "one (allocsim: --snapshot-device N)"));
    snprintf(args, sizeof args, "info --snapshot-device 1 '%s'", path);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\ndevices: 0 (2 trace entries), 1 (3 trace entries, "
                                       "read)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "events: 3 (alloc 2, free 1,"));
    snprintf(args, sizeof args, "run --snapshot-device cuda:0 -f csv '%s'", path);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    snprintf(args, sizeof args, "mincap --snapshot-device 3 '%s'", path);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "device 3: the snapshot's device_traces has 2 devices"));
    snprintf(args, sizeof args, "convert --snapshot-device x '%s' -", path);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 2);
    snprintf(args, sizeof args, "convert --snapshot-device 0 '%s' - --text", path);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "device=0"));
}

static void snapshot_device_choice(void)
{
    static pw w;
    got *g = malloc(sizeof *g);
    for (int proto = 2; proto <= 4; proto += 2) {
        build_two_devices(&w, proto);
        const char *path = write_file(&w, proto == 4);
        /* No choice: refused, naming both devices and their entry counts. */
        CU_ASSERT_EQUAL(read_device(path, 0, 0, g), AS_EINVAL);
        CU_ASSERT_PTR_NOT_NULL(strstr(g->err.msg, "traces 2 devices: 0 (2 entries), 1 (3 "
                                                  "entries)"));
        CU_ASSERT_PTR_NOT_NULL(strstr(g->err.msg, "--snapshot-device"));
        /* Device 1: its three entries are ALLOC, FREE, ALLOC; nothing of device 0. */
        CU_ASSERT_EQUAL_FATAL(read_device(path, 1, 1, g), 0);
        CU_ASSERT_EQUAL_FATAL(g->n, 3);
        CHECK_EV(g, 0, AS_OP_ALLOC, 0, 512, 0);
        CU_ASSERT_EQUAL(g->ev[1].op, AS_OP_FREE);
        CHECK_EV(g, 2, AS_OP_ALLOC, 1, 1000, 0);
        CU_ASSERT(has_meta(g, "device=1"));
        CU_ASSERT(has_meta(g, "prehistoric_allocs=0"));
        CU_ASSERT(has_meta(g, "torch.device_entries=0:2,1:3"));
        CU_ASSERT(has_meta(g, "torch.segments_at_dump=1"));
        /* Device 0: its free of 0x10400 was allocated before the trace (one prehistoric
         * ALLOC first), and the block at 0x10000 is live at the dump as the trace says. */
        CU_ASSERT_EQUAL_FATAL(read_device(path, 1, 0, g), 0);
        CU_ASSERT_EQUAL_FATAL(g->n, 3);
        CHECK_EV(g, 0, AS_OP_ALLOC, 0, 700, 0);
        CHECK_EV(g, 1, AS_OP_ALLOC, 1, 500, 0);
        CU_ASSERT_EQUAL(g->ev[2].op, AS_OP_FREE);
        CU_ASSERT_EQUAL(g->ev[2].id, 0);
        CU_ASSERT(has_meta(g, "device=0"));
        CU_ASSERT(has_meta(g, "prehistoric_allocs=1"));
        CU_ASSERT(has_meta(g, "torch.state_mismatches=0"));
        /* A device the snapshot does not have. */
        CU_ASSERT_EQUAL(read_device(path, 1, 2, g), AS_EINVAL);
        CU_ASSERT_PTR_NOT_NULL(strstr(g->err.msg, "device 2: the snapshot's device_traces has "
                                                  "2 devices (0..1)"));
        if (proto == 4)
            device_cli(path);
        tu_rm(path);
    }
    free(g);
}

static void snapshot_bad_frees(void)
{
    /* A double free: an error in strict mode naming the entry's byte offset; skipped (one
     * warning) when lenient. Then an alloc over a live address: strict error; lenient, the
     * old block is freed first. */
    static pw w;
    pw_begin(&w, 4);
    dict_open(&w);
    pw_str(&w, "device_traces"), list_open(&w);
    list_open(&w);
    entry(&w, "alloc", 0x1000, 10, 0, 1);
    entry(&w, "free_completed", 0x1000, 10, 0, 2);
    size_t dbl = entry(&w, "free_completed", 0x1000, 10, 0, 3);
    entry(&w, "alloc", 0x2000, 20, 0, 4);
    size_t again = entry(&w, "alloc", 0x2000, 30, 0, 5);
    list_close(&w);
    list_close(&w);
    dict_close(&w);
    pw_end(&w);
    const char *path = write_file(&w, 0);
    got *g = malloc(sizeof *g);
    CU_ASSERT_EQUAL(read_all(path, 0, g), AS_EINVAL);
    CU_ASSERT_EQUAL(g->err.offset, dbl);
    CU_ASSERT_PTR_NOT_NULL(strstr(g->err.msg, "device_traces[0][2]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(g->err.msg, "double free"));
    CU_ASSERT_EQUAL(read_all(path, 1, g), 0);
    CU_ASSERT_EQUAL(g->warnings, 2);
    CU_ASSERT_EQUAL_FATAL(g->n, 5);
    CHECK_EV(g, 0, AS_OP_ALLOC, 0, 10, 0);
    CHECK_EV(g, 1, AS_OP_FREE, 0, 10, 0);
    CHECK_EV(g, 2, AS_OP_ALLOC, 1, 20, 0);
    CHECK_EV(g, 3, AS_OP_FREE, 1, 20, 0);
    CHECK_EV(g, 4, AS_OP_ALLOC, 2, 30, 0);
    tu_rm(path);

    /* Without the double free, the live-address alloc is the strict error. */
    pw_begin(&w, 4);
    dict_open(&w);
    pw_str(&w, "device_traces"), list_open(&w);
    list_open(&w);
    entry(&w, "alloc", 0x2000, 20, 0, 4);
    again = entry(&w, "alloc", 0x2000, 30, 0, 5);
    list_close(&w);
    list_close(&w);
    dict_close(&w);
    pw_end(&w);
    path = write_file(&w, 0);
    CU_ASSERT_EQUAL(read_all(path, 0, g), AS_EINVAL);
    CU_ASSERT_EQUAL(g->err.offset, again);
    CU_ASSERT_PTR_NOT_NULL(strstr(g->err.msg, "still live"));
    tu_rm(path);
    free(g);
}

static void snapshot_bad_input(void)
{
    static pw w;
    got *g = malloc(sizeof *g);

    /* A pickle that is not a snapshot (a list). */
    pw_begin(&w, 4);
    list_open(&w), pw_int(&w, 1), list_close(&w);
    pw_end(&w);
    const char *path = write_file(&w, 0);
    CU_ASSERT_EQUAL(read_all(path, 0, g), AS_EFORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(g->err.msg, "not a torch memory snapshot"));
    tu_rm(path);

    /* device_traces is not a list. */
    pw_begin(&w, 4);
    dict_open(&w), pw_str(&w, "device_traces"), pw_int(&w, 3), dict_close(&w);
    pw_end(&w);
    path = write_file(&w, 0);
    CU_ASSERT_EQUAL(read_all(path, 0, g), AS_ECORRUPT);
    CU_ASSERT_PTR_NOT_NULL(strstr(g->err.msg, "device_traces"));
    tu_rm(path);

    /* An entry without an action, and an alloc without an address. */
    pw_begin(&w, 4);
    dict_open(&w), pw_str(&w, "device_traces"), list_open(&w), list_open(&w);
    size_t at = w.n;
    dict_open(&w), pw_str(&w, "addr"), pw_int(&w, 5), dict_close(&w);
    list_close(&w), list_close(&w), dict_close(&w);
    pw_end(&w);
    path = write_file(&w, 0);
    CU_ASSERT_EQUAL(read_all(path, 0, g), AS_ECORRUPT);
    CU_ASSERT_EQUAL(g->err.offset, at);
    CU_ASSERT_PTR_NOT_NULL(strstr(g->err.msg, "action"));
    CU_ASSERT_EQUAL(read_all(path, 1, g), 0); /* lenient: skipped */
    CU_ASSERT_EQUAL(g->n, 0);
    CU_ASSERT_EQUAL(g->warnings, 1);
    tu_rm(path);

    /* A zero-size alloc is refused (strict) or skipped with its free (lenient). */
    pw_begin(&w, 4);
    dict_open(&w), pw_str(&w, "device_traces"), list_open(&w), list_open(&w);
    entry(&w, "alloc", 0x1000, 0, 0, 1);
    entry(&w, "free_completed", 0x1000, 0, 0, 2);
    entry(&w, "alloc", 0x1000, 8, 0, 3);
    list_close(&w), list_close(&w), dict_close(&w);
    pw_end(&w);
    path = write_file(&w, 0);
    CU_ASSERT_EQUAL(read_all(path, 0, g), AS_EINVAL);
    CU_ASSERT_EQUAL(read_all(path, 1, g), 0);
    CU_ASSERT_EQUAL_FATAL(g->n, 1);
    CHECK_EV(g, 0, AS_OP_ALLOC, 0, 8, 0);
    tu_rm(path);

    /* A refused opcode and a truncation, reported through the reader with their offsets:
     * the basic snapshot with a GLOBAL spliced in at byte 13 ("\x80\x04" + FRAME is 11
     * bytes, then EMPTY_DICT, MEMOIZE), and cut in half. */
    build_basic(&w, 4);
    memmove(w.b + 14, w.b + 13, w.n - 13);
    w.b[13] = 'c';
    w.n++;
    path = write_file(&w, 0);
    CU_ASSERT_EQUAL(read_all(path, 0, g), AS_EFORMAT);
    CU_ASSERT_EQUAL(g->err.offset, 13);
    CU_ASSERT_PTR_NOT_NULL(strstr(g->err.msg, "GLOBAL"));
    tu_rm(path);
    build_basic(&w, 2); /* protocol 2 has no FRAME, so the cut shows as a missing STOP */
    w.n /= 2;
    path = write_file(&w, 1);
    CU_ASSERT_EQUAL(read_all(path, 0, g), AS_ECORRUPT);
    CU_ASSERT_PTR_NOT_NULL(strstr(g->err.msg, "truncated"));
    CU_ASSERT(g->err.offset <= w.n);
    tu_rm(path);
    free(g);
}

static void pw_get(pw *w, size_t m)
{
    uint8_t q[5] = {'j', (uint8_t)m, (uint8_t)(m >> 8), (uint8_t)(m >> 16), 0};
    put(w, q, 5); /* LONG_BINGET */
}

/* Memo references let a small pickle describe a huge walk: 3000 segments that are all one
 * dict, whose blocks list is 3000 references to one block dict of 2000 keys. Walking it
 * naively costs 3000 * 3000 * 2000 * 4 key visits (hours); the importer's work budget
 * (64 visits per input byte) must stop it at once with an error. */
static void snapshot_repetition_bomb(void)
{
    static pw w;
    pw_begin(&w, 4);
    dict_open(&w);
    pw_str(&w, "segments"), list_open(&w);
    size_t seg = w.memo;
    dict_open(&w);
    pw_str(&w, "device"), pw_int(&w, 0);
    pw_str(&w, "blocks"), list_open(&w);
    size_t blk = w.memo;
    dict_open(&w);
    for (int i = 0; i < 2000; i++)
        pw_int(&w, 1000 + i), pw_int(&w, i);
    dict_close(&w);
    for (int i = 1; i < 3000; i++)
        pw_get(&w, blk);
    list_close(&w);
    dict_close(&w);
    for (int i = 1; i < 3000; i++)
        pw_get(&w, seg);
    list_close(&w);
    dict_close(&w);
    pw_end(&w);
    CU_ASSERT_FATAL(w.n < sizeof w.b);
    const char *path = write_file(&w, 0);
    got *g = malloc(sizeof *g);
    CU_ASSERT_EQUAL(read_all(path, 0, g), AS_ENOMEM);
    CU_ASSERT_PTR_NOT_NULL(strstr(g->err.msg, "repetitive"));
    tu_rm(path);
    free(g);
}

/* Every proper prefix of a snapshot, read from memory at its exact size (so that ASan sees
 * any overread), must be an error located inside the prefix: never success, never a crash. */
static void snapshot_truncated_everywhere(void)
{
    static pw w;
    for (int proto = 2; proto <= 4; proto += 2) {
        build_basic(&w, proto);
        size_t bad = 0;
        for (size_t n = 0; n < w.n; n++) {
            uint8_t *copy = malloc(n ? n : 1);
            memcpy(copy, w.b, n);
            as_trace_reader *r = NULL;
            as_trace_error err;
            int rc = as_trace_open_mem(copy, n, "prefix", NULL, &r, &err);
            if (rc == 0) {
                as_event e;
                while ((rc = as_trace_next(r, &e)) == 0)
                    ;
                rc = rc == AS_TRACE_EOF ? 0 : rc;
                as_trace_close(r);
            }
            bad += rc >= 0 || (n >= 2 && err.offset > n);
            free(copy);
        }
        CU_ASSERT_EQUAL(bad, 0);
    }
}

/* Random byte changes in a valid snapshot: any outcome but a crash, and errors name an
 * offset inside the input (or none, for host memory). */
static void snapshot_random_corruption(void)
{
    static pw w;
    uint64_t st = tu_seed("snapshot_random_corruption");
    build_basic(&w, 4);
    size_t failures = 0, bad = 0;
    uint8_t *c = malloc(w.n);
    for (int round = 0; round < 3000; round++) {
        memcpy(c, w.b, w.n);
        int flips = 1 + (int)(tu_rand(&st) % 4);
        for (int f = 0; f < flips; f++)
            c[2 + tu_rand(&st) % (w.n - 2)] = (uint8_t)tu_rand(&st); /* keep the PROTO */
        as_trace_reader *r = NULL;
        as_trace_error err;
        as_reader_opts o = {.lenient = round & 1};
        int rc = as_trace_open_mem(c, w.n, "mutant", &o, &r, &err);
        if (rc == 0) {
            as_event e;
            while ((rc = as_trace_next(r, &e)) == 0)
                ;
            if (rc != AS_TRACE_EOF)
                err = *as_trace_reader_error(r);
            rc = rc == AS_TRACE_EOF ? 0 : rc;
            as_trace_close(r);
        }
        if (rc < 0) {
            failures++;
            bad += err.offset != UINT64_MAX && err.offset > w.n;
        }
    }
    free(c);
    CU_ASSERT(failures > 0);
    CU_ASSERT_EQUAL(bad, 0);
}

/* ---- streaming: one pass and two agree; bombs; every truncation of a real snapshot ----- */

static const char *const shared_snapshots[] = {
    "tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst",
    "tests/data/torch-2.11-h200/moe_like.pickle.zst",
    "tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst",
    "tests/data/torch-2.11-h200-streams/streams2_default.pickle.zst",
    "tests/data/torch-2.11-h200-streams/streams2_expandable_segments_True.pickle.zst",
    "tests/data/torch-2.11-h200-pools/graph_probe.pickle.zst",
};

/* A snapshot whose events do not fit the first pass's buffer is read twice, the second
 * pass emitting as it parses (prehistoric blocks preloaded). Forced here with a buffer of
 * 50 events: every event and every metadata pair must equal the one-pass reading. */
static void snapshot_two_passes_agree(void)
{
    for (size_t i = 0; i < sizeof shared_snapshots / sizeof shared_snapshots[0]; i++) {
        as_reader_opts one = {0}, two = {.max_pickle_buffered = 50};
        as_trace_reader *a = NULL, *b = NULL;
        as_trace_error e;
        CU_ASSERT_EQUAL_FATAL(as_trace_open(tu_path(shared_snapshots[i]), &one, &a, &e), 0);
        CU_ASSERT_EQUAL_FATAL(as_trace_open(tu_path(shared_snapshots[i]), &two, &b, &e), 0);
        const as_meta *ma = as_trace_reader_meta(a), *mb = as_trace_reader_meta(b);
        CU_ASSERT_EQUAL(ma->n, mb->n);
        for (size_t k = 0; k < ma->n && k < mb->n; k++) {
            CU_ASSERT_STRING_EQUAL(ma->kv[k].key, mb->kv[k].key);
            CU_ASSERT_STRING_EQUAL(ma->kv[k].value, mb->kv[k].value);
        }
        as_event x, y;
        int ra, rb;
        uint64_t n = 0, diff = 0;
        for (;;) {
            ra = as_trace_next(a, &x);
            rb = as_trace_next(b, &y);
            if (ra || rb)
                break;
            diff += x.op != y.op || x.id != y.id || x.size != y.size || x.stream != y.stream ||
                    x.time_us != y.time_us || (x.op == AS_OP_ALLOC && x.pool != y.pool);
            n++;
        }
        CU_ASSERT_EQUAL(ra, AS_TRACE_EOF);
        CU_ASSERT_EQUAL(rb, AS_TRACE_EOF);
        CU_ASSERT_EQUAL(diff, 0);
        const as_snapshot_record *qa = as_trace_reader_snapshot(a);
        const as_snapshot_record *qb = as_trace_reader_snapshot(b);
        CU_ASSERT_EQUAL(qa->pool_allocs, qb->pool_allocs); /* counted at hand-out there */
        CU_ASSERT_EQUAL(qa->pool_ambiguous, qb->pool_ambiguous);
        CU_ASSERT_EQUAL(qa->pool_by_stream, qb->pool_by_stream);
        CU_ASSERT(n > 50); /* so the second reader really took two passes */
        as_trace_close(a);
        as_trace_close(b);
    }
}

/* A zstd frame by hand: a raw block with the pickle's first bytes, then RLE blocks of one
 * byte (each 4 bytes of file for 128 KiB of content, which is what zstd itself writes for
 * a run), the last one flagged. window_desc is the frame's window descriptor byte:
 * exponent << 3, window = 2^(10 + exponent). Returns the file size. */
static size_t rle_bomb(const char *path, uint8_t window_desc, const char *head, uint8_t fill,
                       size_t blocks)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    static const uint8_t magic[4] = {0x28, 0xB5, 0x2F, 0xFD};
    fwrite(magic, 1, 4, f);
    uint8_t fh[2] = {0x00, window_desc}; /* no content size, no checksum, no dictionary */
    fwrite(fh, 1, 2, f);
    size_t hn = strlen(head);
    uint32_t bh = (uint32_t)hn << 3; /* raw block */
    uint8_t b3[3] = {(uint8_t)bh, (uint8_t)(bh >> 8), (uint8_t)(bh >> 16)};
    fwrite(b3, 1, 3, f);
    fwrite(head, 1, hn, f);
    for (size_t i = 0; i < blocks; i++) {
        bh = (uint32_t)(128u << 10) << 3 | 1u << 1 | (i + 1 == blocks); /* RLE */
        uint8_t r[4] = {(uint8_t)bh, (uint8_t)(bh >> 8), (uint8_t)(bh >> 16), fill};
        fwrite(r, 1, 4, f);
    }
    long n = ftell(f);
    fclose(f);
    return n > 0 ? (size_t)n : 0;
}

/* Runs `allocsim convert in out` in a child limited to mib MiB of address space (not under
 * ASan, whose allocsim maps terabytes of shadow); returns its exit status, CPU seconds,
 * peak RSS (KiB: at least the parent's at the fork, which Linux counts for the child) and
 * stderr. */
static int run_limited(const char *in, unsigned long mib, double *cpu, long *rss_kb, char *err,
                       size_t cap)
{
    const char *bin = tu_allocsim();
    const char *out = tu_tmp(".zst");
    const char *errf = tu_tmp(".err");
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {mib << 20, mib << 20};
        if (!AS_UNDER_ASAN)
            setrlimit(RLIMIT_AS, &rl);
        if (!freopen(errf, "w", stderr))
            _exit(99);
        execl(bin, bin, "convert", in, out, (char *)NULL);
        _exit(98);
    }
    int status = 0;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid)
        return -1;
    *cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
    *rss_kb = ru.ru_maxrss;
    FILE *f = fopen(errf, "r");
    size_t n = f ? fread(err, 1, cap - 1, f) : 0;
    err[n] = 0;
    if (f)
        fclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The bombs, 67 KB each: 2.1 GB of zeros behind a pickle header (took 2.1 GB of
 * memory when the whole stream was read first), 2.1 GB of nested EMPTY_LISTs (the tree:
 * 1.45 GB for 11 KB), and a frame asking for a 2 GiB window (zstd --long=31: 1.5 GB).
 * Each must be refused with its reason, in under a second of CPU, in a process that may
 * not map more than 256 MiB. */
static void snapshot_bombs_refused_small(void)
{
    static const struct {
        uint8_t window_desc, fill;
        const char *why;
    } bombs[] = {
        {(17 - 10) << 3, 0x00, "invalid pickle opcode 0x00"},
        {(17 - 10) << 3, ']', "stack deeper than"},
        {(31 - 10) << 3, ']', "window"},
    };
    for (size_t i = 0; i < sizeof bombs / sizeof bombs[0]; i++) {
        const char *path = tu_tmp(".pickle.zst");
        size_t n = rle_bomb(path, bombs[i].window_desc, "\x80\x04", bombs[i].fill, 16700);
        CU_ASSERT(n > 66000 && n < 68000);
        double cpu = 0;
        long rss = 0;
        char err[512];
        int st = run_limited(path, 256, &cpu, &rss, err, sizeof err);
        if (st != 1 || !strstr(err, bombs[i].why) ||
            (!AS_UNDER_ASAN && (cpu >= 1.0 || rss >= 256 * 1024)))
            fprintf(stderr, "\nbomb %zu: status %d, %.2f s, %ld KiB: %s", i, st, cpu, rss, err);
        CU_ASSERT_EQUAL(st, 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, bombs[i].why));
        CU_ASSERT_PTR_NOT_NULL(strstr(err, path)); /* the message names the file */
        if (!AS_UNDER_ASAN) { /* ASan's own memory and time are not the reader's */
            CU_ASSERT(cpu < 1.0);
            CU_ASSERT(rss < 256 * 1024);
        }
        tu_rm(path);
    }
}

/* A snapshot of n blocks at distinct addresses, each allocated and freed (the importer's
 * address map once kept a slot for every one), between the allocs and frees of FREES_HELD
 * blocks live all along (so that the map grows past its clean-ups too); then a free of an
 * address never seen (a prehistoric block) and a second free of the first block's address;
 * the final segments have the second block active (the trace freed it: a mismatch, not a
 * prehistoric block). Written as it goes, through pw's buffer. Returns the byte offset of
 * the second free. */
/* Writes out w's buffer once it is nearly full; *done: the bytes written before it. */
static void spill(pw *w, FILE *f, size_t *done)
{
    if (w->n > sizeof w->b - 256) {
        fwrite(w->b, 1, w->n, f);
        *done += w->n;
        w->n = 0;
    }
}

#define FREES_BASE 0x7f0000000000ll
#define FREES_HELD 3000
static size_t write_many_frees(const char *path, size_t n)
{
    static pw w;
    FILE *f = fopen(path, "wb");
    size_t at = 0, done = 0;
    if (!f)
        return 0;
    memset(&w, 0, sizeof w);
    w.proto = 4;
    put(&w, "\x80\x04", 2); /* no FRAME: the file is far past pw's buffer */
    dict_open(&w);
    pw_str(&w, "segments"), list_open(&w);
    segment(&w, 0, FREES_BASE, 0x40000000, 0, 1, (int64_t)(FREES_BASE + 512), (int64_t)512,
            "active_allocated");
    list_close(&w);
    pw_str(&w, "device_traces"), list_open(&w);
    list_open(&w);
    for (int64_t i = 0; i < FREES_HELD; i++) {
        spill(&w, f, &done);
        if (i && i % 1000 == 0)
            op(&w, 'e'), op(&w, '('); /* APPENDS of 1,000 entries, as Python batches */
        entry(&w, "alloc", 2 * FREES_BASE + i * 512, 512, 0, 0);
    }
    for (size_t i = 0; i <= n; i++) {
        spill(&w, f, &done);
        if (i % 500 == 0)
            op(&w, 'e'), op(&w, '('); /* a pair of entries each: 1,000 a batch */
        if (i < n) {
            entry(&w, "alloc", FREES_BASE + (int64_t)i * 512, 512, 0, (int64_t)i);
            entry(&w, "free_completed", FREES_BASE + (int64_t)i * 512, 512, 0, (int64_t)i);
        }
    }
    for (int64_t i = 0; i < FREES_HELD; i++) {
        spill(&w, f, &done);
        if (i % 1000 == 0)
            op(&w, 'e'), op(&w, '(');
        entry(&w, "free_completed", 2 * FREES_BASE + i * 512, 512, 0, (int64_t)n);
    }
    entry(&w, "free_completed", 0x1000, 1024, 0, (int64_t)n); /* prehistoric */
    at = done + entry(&w, "free_completed", FREES_BASE, 512, 0, (int64_t)n + 1);
    list_close(&w);
    list_close(&w);
    dict_close(&w);
    op(&w, '.');
    fwrite(w.b, 1, w.n, f);
    fclose(f);
    return at;
}

/* Issue 15: the importer's memory follows the blocks live, not the addresses ever seen.
 * 400,000 blocks at distinct addresses, each freed at once, converted in a child limited to
 * 48 MiB of address space (the bound on memory: its peak RSS would count the test
 * process's own): the map that kept a 40-byte slot for each (1,048,576 slots, 40 MiB, and
 * the 20 MiB table it grew from) ran out of memory there (it needed 64-80 MiB; peak RSS
 * 67 MiB); with the freed addresses 8 bytes each (a 1,048,576-key set, 8 MiB, and the 4
 * MiB one it grew from) the child reads it all within 24 MiB (peak RSS 20 MiB) and stops
 * at the double free. And what the freed addresses mean is kept past the map's
 * clean-ups: a second free of the first block is a double free (strict: the error at its
 * entry; lenient: one warning), the never-seen address a prehistoric block, the second
 * block active at the dump a mismatch. */
static void snapshot_frees_bounded(void)
{
    const char *path = tu_tmp(".pickle");
    size_t at = write_many_frees(path, 20000);
    got *g = malloc(sizeof *g);
    CU_ASSERT_EQUAL(read_all(path, 0, g), AS_EINVAL);
    CU_ASSERT_EQUAL(g->err.offset, at);
    CU_ASSERT_PTR_NOT_NULL(strstr(g->err.msg, "device_traces[0][46001]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(g->err.msg, "double free"));
    CU_ASSERT_EQUAL_FATAL(read_all(path, 1, g), 0);
    CU_ASSERT_EQUAL(g->warnings, 1);
    CU_ASSERT_EQUAL(g->n, 46002); /* the prehistoric ALLOC, 3,000 + 20,000 pairs, its FREE */
    CU_ASSERT_EQUAL(g->allocs, 23001);
    CHECK_EV(g, 0, AS_OP_ALLOC, 0, 1024, 0);
    CHECK_EV(g, 1, AS_OP_ALLOC, 1, 512, 0);
    CU_ASSERT(has_meta(g, "prehistoric_allocs=1"));
    CU_ASSERT(has_meta(g, "torch.state_mismatches=1"));
    tu_rm(path);
    free(g);

    at = write_many_frees(path, 400000);
    double cpu = 0;
    long rss = 0;
    char err[512];
    int st = run_limited(path, 48, &cpu, &rss, err, sizeof err);
    if (st != 1 || !strstr(err, "double free"))
        fprintf(stderr, "\nmany frees: status %d, %.2f s: %s", st, cpu, err);
    CU_ASSERT_EQUAL(st, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "device_traces[0][806001]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "double free")); /* not "out of host memory" */
    tu_rm(path);
}

/* Every proper prefix of a small real snapshot, decompressed and compressed, is an error
 * located inside the prefix: never success, never a crash (the prefixes are copied to
 * buffers of their exact size, so ASan sees any overread). */
/* ---- the entry scanner (traces/pickle_entry.c) against the pickle VM alone ------------ */

/* A whole reading folded: every event's fields and label, the metadata, the sites and
 * their frames, the warnings, and how it ended. */
typedef struct reading {
    int rc;
    as_trace_error err;
    uint64_t digest, events;
} reading;

static uint64_t mix(uint64_t h, uint64_t x)
{
    return (h ^ x) * 0x100000001b3ull;
}

static uint64_t mix_str(uint64_t h, const char *s)
{
    for (; s && *s; s++)
        h = mix(h, (uint8_t)*s);
    return mix(h, 0);
}

static void read_mode(const uint8_t *b, size_t n, const char *path, int vm_only, int lenient,
                      reading *g)
{
    memset(g, 0, sizeof *g);
    as_trace_reader *r = NULL;
    as_reader_opts o = {.lenient = lenient, .pickle_vm_only = vm_only};
    g->rc =
        path ? as_trace_open(path, &o, &r, &g->err) : as_trace_open_mem(b, n, "m", &o, &r, &g->err);
    uint64_t h = 0xcbf29ce484222325ull;
    if (g->rc == 0) {
        const as_meta *m = as_trace_reader_meta(r);
        for (size_t i = 0; i < m->n; i++)
            h = mix_str(mix_str(h, m->kv[i].key), m->kv[i].value);
        as_event e;
        while ((g->rc = as_trace_next(r, &e)) == 0) {
            g->events++;
            h = mix(mix(mix(mix(mix(h, e.op), e.id), e.size), e.stream), (uint64_t)e.time_us);
            h = e.op == AS_OP_MARK ? mix_str(h, e.label) : mix(mix(h, e.site), e.pool);
        }
        if (g->rc == AS_TRACE_EOF) {
            g->rc = 0;
        } else {
            g->err = *as_trace_reader_error(r);
        }
        const as_sites *st = as_trace_reader_sites(r);
        for (uint32_t k = 0; st && k < as_sites_nframes(st); k++) {
            as_frame f;
            if (as_sites_frame(st, k, &f) == 0)
                h = mix(mix_str(mix_str(h, f.filename), f.name), f.line);
        }
        for (uint32_t k = 1; st && k <= as_sites_count(st); k++) {
            const uint32_t *fids;
            size_t nf = as_sites_stack(st, k, &fids);
            for (size_t i = 0; i < nf; i++)
                h = mix(h, fids[i]);
            h = mix(h, nf);
        }
        h = mix(h, as_trace_reader_warnings(r));
        as_trace_close(r);
    }
    if (g->rc)
        h = mix_str(mix(mix(h, (uint64_t)g->rc), g->err.offset), g->err.msg);
    g->digest = h;
}

/* 1 when the two readings are the same; says where they differ. */
static int same_reading(const uint8_t *b, size_t n, const char *path, int lenient)
{
    reading g[2];
    for (int k = 0; k < 2; k++)
        read_mode(b, n, path, k, lenient, &g[k]);
    int same = g[0].digest == g[1].digest && g[0].rc == g[1].rc && g[0].events == g[1].events;
    if (!same)
        fprintf(stderr,
                "\nscanner: rc %d, %llu events, at %llu: %s\nVM:      rc %d, %llu events, at %llu: "
                "%s\n",
                g[0].rc, (unsigned long long)g[0].events, (unsigned long long)g[0].err.offset,
                g[0].err.msg, g[1].rc, (unsigned long long)g[1].events,
                (unsigned long long)g[1].err.offset, g[1].err.msg);
    return same;
}

/* Every shared snapshot imports the same with the scanner as with the VM alone: events,
 * metadata, sites and frames. */
static void snapshot_scanner_real(void)
{
    static const char *const more[] = {
        "tests/data/torch-2.11-h200-midrun/midrun.pickle.zst",
        "tests/data/torch-2.11-h200-midrun/midrun_state.pickle.zst",
        "tests/data/torch-2.11-h200-graphs/train.pickle.zst",
    };
    for (size_t i = 0; i < sizeof shared_snapshots / sizeof *shared_snapshots; i++)
        CU_ASSERT(same_reading(NULL, 0, tu_path(shared_snapshots[i]), 0));
    for (size_t i = 0; i < sizeof more / sizeof *more; i++)
        CU_ASSERT(same_reading(NULL, 0, tu_path(more[i]), 0));
}

/* A snapshot of one device's trace, {"device_traces": [[entries...]]}, with allocator
 * settings (conf, unless NULL) after the trace, as real snapshots have something after it
 * (the scanner reads a batch with 16 bytes after it). */
static void trace_begin(pw *w, int proto)
{
    pw_begin(w, proto);
    dict_open(w);
    pw_str(w, "device_traces"), list_open(w);
    list_open(w);
}

static void trace_end(pw *w, const char *conf)
{
    list_close(w);
    list_close(w);
    if (conf)
        settings(w, conf);
    dict_close(w);
    pw_end(w);
}

/* Entry i's dict opened (entry_open): an alloc (i even) or the free_completed of the alloc
 * before it. */
static void framed_entry(pw *w, int i)
{
    entry_open(w, i % 2 ? "free_completed" : "alloc", 0x1000 + (i / 2) * 0x1000, 512 + i, 0,
               100 + i);
}

/* Entries with `frames` lists as Python's pickler writes them: the first alloc's frame
 * dicts fresh, later ones memo references to them, and an empty list on each free. */
static void build_framed(pw *w, int proto)
{
    size_t fd[3] = {0};
    trace_begin(w, proto);
    for (int i = 0; i < 12; i++) {
        framed_entry(w, i);
        pw_str(w, "frames"), list_open(w);
        for (int k = 0; i % 2 == 0 && k < 3 - (i % 4 == 2); k++) {
            if (i == 0) {
                fd[k] = w->memo;
                dict_open(w);
                pw_str(w, "filename"), pw_str(w, k ? "model.py" : "train.py");
                pw_str(w, "line"), pw_int(w, 10 + k);
                pw_str(w, "name"), pw_str(w, k == 2 ? "forward" : "step");
                dict_close(w);
            } else {
                pw_get(w, fd[k]);
            }
        }
        list_close(w);
        pw_str(w, "user_metadata"), pw_str(w, i < 6 ? "" : "phase2");
        dict_close(w);
    }
    trace_end(w, NULL);
}

/* Entries whose frames lists are what a snapshot recorded with stacks holds: over a hundred
 * frames, fresh frame dicts among references to those of earlier entries, frames that recur
 * within their own list (a reference to a dict the list has not finished), and C++ frames
 * whose line is -1 as an unsigned 64-bit number (a LONG1 of 9 bytes). */
static void build_stacked(pw *w, int proto)
{
    static char name[130][8];
    static const uint8_t line_max[11] = {0x8a, 9, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0xff, 0xff, 0x00};
    size_t fd[130] = {0};
    trace_begin(w, proto);
    for (int i = 0; i < 8; i++) {
        framed_entry(w, i);
        pw_str(w, "frames"), list_open(w);
        for (int k = 0; i % 2 == 0 && k < 100 + 5 * i; k++) {
            if (k > 10 && k % 7 == 3) { /* recursion: a frame of this stack again */
                pw_get(w, fd[k - 5]);
                continue;
            }
            if (fd[k]) {
                pw_get(w, fd[k]);
                continue;
            }
            fd[k] = w->memo;
            snprintf(name[k], sizeof name[k], "f%d", k);
            dict_open(w);
            pw_str(w, "filename"), pw_str(w, k % 2 ? "libtorch.so" : "model.py");
            pw_str(w, "line");
            if (k % 3)
                pw_int(w, k);
            else
                put(w, line_max, sizeof line_max);
            pw_str(w, "name"), pw_str(w, name[k]);
            dict_close(w);
        }
        list_close(w);
        dict_close(w);
    }
    trace_end(w, "expandable_segments:False");
}

/* A frame dict that holds a reference to itself (a crafted cycle): the scanner finishes it
 * at the reference (freeze) and must leave the batch to the VM when the dict's fill comes. */
static void build_selfref(pw *w, int proto)
{
    trace_begin(w, proto);
    for (int i = 0; i < 2; i++) {
        framed_entry(w, i);
        pw_str(w, "frames"), list_open(w);
        if (!i) {
            size_t self = w->memo;
            dict_open(w);
            pw_str(w, "filename"), pw_str(w, "model.py");
            pw_str(w, "line"), pw_get(w, self);
            pw_str(w, "name"), pw_str(w, "forward");
            dict_close(w);
        }
        list_close(w);
        dict_close(w);
    }
    trace_end(w, "expandable_segments:False");
}

/* An alloc whose frames list is n fresh frame dicts and then a reference to each, the last
 * first, while the list is still being read (each one a freeze), and its free. */
static void build_recurring(pw *w, int proto, int n)
{
    static size_t fd[600];
    trace_begin(w, proto);
    for (int i = 0; i < 2; i++) {
        framed_entry(w, i);
        pw_str(w, "frames"), list_open(w);
        for (int k = 0; !i && k < n; k++) {
            fd[k] = w->memo;
            dict_open(w);
            pw_str(w, "name"), pw_str(w, "f");
            dict_close(w);
        }
        for (int k = n; !i && k-- > 0;)
            pw_get(w, fd[k]);
        list_close(w);
        dict_close(w);
    }
    trace_end(w, "expandable_segments:False");
}

/* The trace entries of pickle b[0..n) that the entry scanner read (the rest the VM did), or
 * -1 when the reading fails. */
static long scanned_entries(const uint8_t *b, size_t n)
{
    static const char *const keys[] = {"action", "addr", "size", "frames"};
    as_pk_limits lim = {0};
    as_pk_stream *ps = NULL;
    as_pk_error e = {0};
    as_pk_item it;
    const as_pk_entry *pe;
    size_t nent;
    long scanned = 0;
    int rc = as_pk_stream_open_mem(b, n, &lim, &ps, &e);
    if (!rc)
        rc = as_pk_stream_keys(ps, keys, 4);
    while (!rc && (rc = as_pk_stream_next_entries(ps, &it, &pe, &nent, &e)) == 1) {
        rc = 0;
        if (it.ref == AS_PK_NIL)
            scanned += (long)nent;
    }
    as_pk_stream_close(ps);
    return rc < 0 ? -1 : scanned;
}

/* A snapshot recorded with stacks is read by the entry scanner, every entry (its frames
 * lists outgrow the scanner's first stack, and its recurring frames and 9-byte lines once
 * sent whole batches to the VM, 7-12 times the instructions), the same as by the VM; a
 * crafted one whose freezes would cost more than its bytes is left to the VM. */
static void snapshot_scanner_stacks(void)
{
    static pw w;
    for (int proto = 2; proto <= 4; proto += 2) {
        build_stacked(&w, proto);
        CU_ASSERT_FATAL(w.n <= sizeof w.b);
        CU_ASSERT(same_reading(w.b, w.n, NULL, 0));
        CU_ASSERT_EQUAL(scanned_entries(w.b, w.n), 8);
    }
    /* the freezes' look through the containers is bounded by the bytes read: 20 frames
     * each referred back are read, 500 (a quarter of a million looks) left to the VM */
    for (int n = 20; n <= 500; n += 480) {
        build_recurring(&w, 4, n);
        CU_ASSERT_FATAL(w.n <= sizeof w.b);
        CU_ASSERT(same_reading(w.b, w.n, NULL, 0));
        CU_ASSERT_EQUAL(scanned_entries(w.b, w.n), n == 20 ? 2 : 0);
    }
}

/* Mutants of handmade snapshots (protocols 2 and 4, the layout Python's pickler writes,
 * which the scanner reads): flipped bytes, and a byte cut or repeated, lenient or not,
 * read the same both ways (the same events or the same error at the same offset). */
static void snapshot_scanner_mutants(void)
{
    static pw w;
    uint64_t st = tu_seed("snapshot_scanner_mutants");
    size_t differ = 0, failed = 0, runs = 0;
    for (int v = 0; v < 8; v++) {
        if (v < 2)
            build_basic(&w, v ? 4 : 2);
        else if (v < 4)
            build_framed(&w, v == 3 ? 4 : 2);
        else if (v < 6)
            build_stacked(&w, v == 5 ? 4 : 2);
        else
            build_selfref(&w, v == 7 ? 4 : 2);
        CU_ASSERT(same_reading(w.b, w.n, NULL, 0));
        uint8_t *c = malloc(w.n + 1);
        for (int round = 0; round < 1000; round++) {
            size_t n = w.n;
            memcpy(c, w.b, w.n);
            size_t at = 2 + tu_rand(&st) % (w.n - 2);
            int kind = (int)(tu_rand(&st) % 4);
            if (kind == 0) { /* a byte cut */
                memmove(c + at, c + at + 1, n - at - 1), n--;
            } else if (kind == 1) { /* a byte repeated */
                memmove(c + at + 1, c + at, n - at), n++;
            } else {
                for (int f = 0; f < kind; f++)
                    c[2 + tu_rand(&st) % (w.n - 2)] = (uint8_t)tu_rand(&st);
            }
            reading g;
            read_mode(c, n, NULL, 0, round & 1, &g);
            failed += g.rc != 0;
            differ += !same_reading(c, n, NULL, round & 1);
            runs++;
        }
        free(c);
    }
    CU_ASSERT(failed > 0 && failed < runs); /* both kinds of outcome were exercised */
    CU_ASSERT_EQUAL(differ, 0);
}

/* A trace of n alloc/free pairs in the layout of _dump_snapshot (keys memo references after
 * the first entry, a fresh "N/A" and its MEMOIZE in each); with over >= 0, entry `over`
 * puts its "N/A" (over even) or a fresh "" user_metadata (odd) by BINPUT into the memo slot
 * of the key "size", so that every entry after it names that string where it had "size" (a
 * crafted pickle: the entry scanner's skeleton of the keys must not outlive the slot's
 * change); with fwd >= 0, entry fwd's action is a memo reference to the slot its own "N/A"
 * is put in later (unset when it is read: the templates write an entry's puts first). */
static void build_skeleton(pw *w, int n, int over, int fwd)
{
    trace_begin(w, 4);
    size_t size_slot = 0;
    for (int i = 0; i < 2 * n; i++) {
        dict_open(w);
        pw_str(w, "action");
        if (i == fwd) /* a memo reference to the slot its "N/A" is put in later */
            op(w, 'h'), op(w, (uint8_t)w->memo);
        else
            pw_str(w, i % 2 ? "free_completed" : "alloc");
        pw_str(w, "addr"), pw_int(w, 0x10000 + (i / 2) * 0x1000);
        if (!size_slot)
            size_slot = w->memo;
        pw_str(w, "size"), pw_int(w, i % 3 ? 512 + i : 70000 + i);
        pw_str(w, "stream"), pw_int(w, 0);
        pw_str(w, "time_us"), pw_int(w, 100 + i);
        pw_str(w, "compile_context");
        uint8_t na[5] = {0x8c, 3, 'N', '/', 'A'};
        put(w, na, 5);
        uint8_t q[2] = {'q', (uint8_t)size_slot}; /* BINPUT over the key's slot */
        if (i == over && over % 2 == 0)
            put(w, q, 2);
        else
            memoize(w);
        pw_str(w, "user_metadata");
        if (i == over && over % 2) { /* a fresh "" put there, in a value the skeleton reads */
            uint8_t e[2] = {0x8c, 0};
            put(w, e, 2), put(w, q, 2);
        } else {
            pw_str(w, "");
        }
        dict_close(w);
    }
    trace_end(w, "expandable_segments:False");
}

/* The scanner's skeleton and templates (pickle_entry.c sk_match, tm_read) read what the VM
 * reads: a plain trace; one with a memo reference to a slot its entry puts later (fails
 * with the templates' puts taken as done); ones whose key slot is overwritten in the middle
 * of a batch, by the skeleton's fresh string or by a value it reads (each fails with a
 * skeleton kept past the write). */
static void snapshot_scanner_skeleton(void)
{
    static pw w;
    reading g;
    build_skeleton(&w, 40, -1, -1);
    CU_ASSERT(same_reading(w.b, w.n, NULL, 0));
    read_mode(w.b, w.n, NULL, 0, 0, &g);
    CU_ASSERT_EQUAL(g.rc, 0);
    CU_ASSERT_EQUAL(g.events, 80);
    build_skeleton(&w, 40, -1, 50);
    CU_ASSERT(same_reading(w.b, w.n, NULL, 0));
    read_mode(w.b, w.n, NULL, 0, 0, &g);
    CU_ASSERT(g.rc < 0 && strstr(g.err.msg, "memo"));
    for (int over = 3; over < 70; over += 19) {
        build_skeleton(&w, 40, over, -1);
        CU_ASSERT(same_reading(w.b, w.n, NULL, 0));
        CU_ASSERT(same_reading(w.b, w.n, NULL, 1));
        read_mode(w.b, w.n, NULL, 0, 1, &g); /* lenient: the allocs without a size skipped */
        CU_ASSERT_EQUAL(g.rc, 0);
        CU_ASSERT(g.events < 80);
    }
}

/* Python's pickler writes a list or dict of more than 1000 items as batches of APPENDS or
 * SETITEMS. A trace entry is read before STOP (streamed), so a frames list of three
 * batches must iterate in its written order, and a key set again in a later batch of an
 * entry dict keeps its last value, as in Python. */
static void build_batched(pw *w, int proto, int nframes)
{
    trace_begin(w, proto);
    dict_open(w);
    pw_str(w, "action"), pw_str(w, "alloc");
    pw_str(w, "addr"), pw_int(w, 0x10000);
    pw_str(w, "size"), pw_int(w, 4096);
    pw_str(w, "stream"), pw_int(w, 0);
    op(w, 'u'), op(w, '('); /* a second SETITEMS batch: size again, then the rest */
    pw_str(w, "size"), pw_int(w, 8192);
    pw_str(w, "time_us"), pw_int(w, 100);
    pw_str(w, "frames"), list_open(w);
    for (int k = 0; k < nframes; k++) {
        if (k && k % 1000 == 0)
            op(w, 'e'), op(w, '(');
        dict_open(w);
        pw_str(w, "filename"), pw_str(w, "deep.py");
        pw_str(w, "line"), pw_int(w, k);
        pw_str(w, "name"), pw_str(w, "f");
        dict_close(w);
    }
    list_close(w);
    dict_close(w);
    entry(w, "free_completed", 0x10000, 8192, 0, 101);
    trace_end(w, NULL);
}

static void snapshot_batched_containers(void)
{
    static pw w;
    for (int v = 0; v < 4; v++) {
        build_batched(&w, v & 1 ? 4 : 2, 2100);
        CU_ASSERT_FATAL(w.n <= sizeof w.b);
        as_trace_reader *r = NULL;
        as_trace_error err;
        as_reader_opts o = {.pickle_vm_only = v >> 1};
        CU_ASSERT_EQUAL_FATAL(as_trace_open_mem(w.b, w.n, "m", &o, &r, &err), 0);
        as_event e;
        size_t allocs = 0, in_order = 0;
        const uint32_t *fids = NULL;
        while (as_trace_next(r, &e) == 0) {
            if (e.op != AS_OP_ALLOC)
                continue;
            allocs++;
            CU_ASSERT_EQUAL(e.size, 8192);
            const as_sites *st = as_trace_reader_sites(r);
            size_t nf = as_sites_stack(st, e.site, &fids);
            CU_ASSERT_EQUAL(nf, 2100);
            for (size_t i = 0; i < nf; i++) {
                as_frame f;
                in_order += as_sites_frame(st, fids[i], &f) == 0 && f.line == (int64_t)i;
            }
        }
        CU_ASSERT_EQUAL(allocs, 1);
        CU_ASSERT_EQUAL(in_order, 2100);
        as_trace_close(r);
    }
}

static void snapshot_real_truncations(void)
{
    const char *path = tu_path("tests/data/torch-2.11-h200-pools/graph_probe.pickle.zst");
    FILE *f = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static uint8_t z[1 << 16];
    size_t zn = fread(z, 1, sizeof z, f);
    fclose(f);
    size_t cap = 1 << 20;
    uint8_t *raw = malloc(cap);
    ZSTD_DStream *ds = ZSTD_createDStream();
    ZSTD_inBuffer ib = {z, zn, 0};
    ZSTD_outBuffer ob = {raw, cap, 0};
    size_t zr = ZSTD_decompressStream(ds, &ob, &ib);
    ZSTD_freeDStream(ds);
    CU_ASSERT_EQUAL_FATAL(zr, 0); /* the whole frame, within 1 MiB */
    size_t rn = ob.pos;
    for (int compressed = 0; compressed <= 1; compressed++) {
        const uint8_t *src = compressed ? z : raw;
        size_t len = compressed ? zn : rn, bad = 0, ok = 0;
        for (size_t n = 0; n <= len; n++) {
            uint8_t *copy = malloc(n ? n : 1);
            memcpy(copy, src, n);
            as_trace_reader *r = NULL;
            as_trace_error err = {0};
            int rc = as_trace_open_mem(copy, n, "prefix", NULL, &r, &err);
            if (rc == 0) {
                as_event e;
                while ((rc = as_trace_next(r, &e)) == 0)
                    ;
                if (rc != AS_TRACE_EOF)
                    err = *as_trace_reader_error(r);
                rc = rc == AS_TRACE_EOF ? 0 : rc;
                as_trace_close(r);
            }
            if (n == len)
                ok = rc == 0;
            else
                bad += rc >= 0 || !err.msg[0] ||
                       (!compressed && err.offset != UINT64_MAX && err.offset > n);
            free(copy);
        }
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL(ok, 1); /* the whole file reads */
    }
    free(raw);
}

/* Reads path through a pipe (not seekable, so never read twice) into g; opts as given. */
static int read_piped(const char *path, const as_reader_opts *o, got *g, uint64_t *events)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        FILE *f = fopen(path, "rb");
        char buf[8192];
        size_t n;
        while (f && (n = fread(buf, 1, sizeof buf, f)) > 0)
            if (write(fd[1], buf, n) != (ssize_t)n)
                break;
        _exit(0);
    }
    close(fd[1]);
    char dev[64];
    snprintf(dev, sizeof dev, "/dev/fd/%d", fd[0]);
    as_trace_reader *r = NULL;
    int rc = as_trace_open(dev, o, &r, &g->err);
    *events = 0;
    g->hash = 0;
    if (rc == 0) {
        as_event e;
        while ((rc = as_trace_next(r, &e)) == 0)
            g->hash = fold(g->hash, &e), (*events)++;
        if (rc != AS_TRACE_EOF)
            g->err = *as_trace_reader_error(r);
        rc = rc == AS_TRACE_EOF ? 0 : rc;
        as_trace_close(r);
    }
    close(fd[0]);
    waitpid(pid, NULL, 0);
    return rc;
}

/* From a pipe the first pass keeps every event (it cannot read twice): the same events as
 * from the file; with a buffer limit set, a longer trace is refused, saying why. */
static void snapshot_from_a_pipe(void)
{
    const char *path = tu_path("tests/data/torch-2.11-h200-pools/graph_probe.pickle.zst");
    got *g = malloc(sizeof *g);
    CU_ASSERT_EQUAL_FATAL(read_all(path, 0, g), 0);
    uint64_t want = g->hash, n = 0;
    size_t want_n = g->n;
    as_reader_opts o = {0};
    CU_ASSERT_EQUAL(read_piped(path, &o, g, &n), 0);
    CU_ASSERT_EQUAL(n, want_n);
    CU_ASSERT_EQUAL(g->hash, want);
    o.max_pickle_buffered = 50;
    CU_ASSERT_EQUAL(read_piped(path, &o, g, &n), AS_EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(g->err.msg, "read twice"));
    free(g);
}

/* A recording begun mid-run, worked by hand: before the trace, one 20 MiB segment at
 * 0x200000 holds a 4 MiB block (which the trace frees) and a 6 MiB one (live at the dump),
 * 10 MiB free after them. The trace frees the 4 MiB block, allocates 3 MiB (best fit takes
 * the 4 MiB hole; the 1 MiB left is not split off), then 12 MiB, which no free block holds:
 * a new 12 MiB segment. Rebuilt, the start pool is that segment with two live blocks (one
 * known from its free, one from the dump), and the simulation makes the one segment_alloc
 * at allocation 3 (2 prehistoric ALLOCs first) with the peak 20 + 12 MiB. */
static void snapshot_midrun_by_hand(void)
{
    static pw w;
    const int64_t M = 1 << 20;
    pw_begin(&w, 4);
    dict_open(&w);
    pw_str(&w, "segments"), list_open(&w);
    segment(&w, 0, 0x200000, 20 * M, 0, 3, (int64_t)0x200000, 4 * M, "active_allocated",
            (int64_t)0x600000, 6 * M, "active_allocated", (int64_t)0xc00000, 10 * M, "inactive");
    segment(&w, 0, 0x2000000, 12 * M, 0, 1, (int64_t)0x2000000, 12 * M, "active_allocated");
    list_close(&w);
    pw_str(&w, "device_traces"), list_open(&w), list_open(&w);
    entry(&w, "free_requested", 0x200000, 4 * M, 0, 1);
    entry(&w, "free_completed", 0x200000, 4 * M, 0, 2);
    entry(&w, "alloc", 0x200000, 3 * M, 0, 3);
    entry(&w, "segment_alloc", 0x2000000, 12 * M, 0, 4);
    entry(&w, "alloc", 0x2000000, 12 * M, 0, 5);
    list_close(&w), list_close(&w);
    pw_str(&w, "allocator_settings"), dict_open(&w);
    pw_str(&w, "PYTORCH_CUDA_ALLOC_CONF"), pw_str(&w, "");
    pw_str(&w, "max_split_size"), pw_int(&w, -1);
    pw_str(&w, "expandable_segments"), op(&w, 0x89);
    dict_close(&w);
    dict_close(&w);
    pw_end(&w);
    const char *path = write_file(&w, 0);
    as_check_result r;
    as_trace_error err;
    CU_ASSERT_EQUAL_FATAL(as_check(path, NULL, &r, &err), 0);
    char line[1200];
    as_check_line(&r, line, sizeof line);
    if (!r.reproduced)
        fprintf(stderr, "\n  %s", line);
    CU_ASSERT(r.reproduced);
    CU_ASSERT(r.start.possible && r.start.reconstructed);
    CU_ASSERT_EQUAL(r.start.segments, 1);
    CU_ASSERT_EQUAL(r.start.reserved, 20 * M);
    CU_ASSERT_EQUAL(r.start.live, 2);
    CU_ASSERT_EQUAL(r.start.from_frees, 1);
    CU_ASSERT_EQUAL(r.start.from_dump, 1);
    CU_ASSERT_EQUAL(r.start.live_bytes, 10 * M);
    CU_ASSERT_EQUAL(r.recorded, 1);
    CU_ASSERT_EQUAL(r.rec_peak, 32 * M);
    CU_ASSERT_EQUAL(r.sim_peak, 32 * M);
    CU_ASSERT_STRING_EQUAL(r.spec, "torch");
    tu_rm(path);
}

/* An older snapshot (PyTorch 2.0-2.3): no allocator_settings, and blocks without
 * requested_size. It is read (the dump's live block becomes a prehistoric ALLOC of its
 * size); check and -p recorded refuse it, saying to name the setting; info gives its
 * segment map, the block's request taken as its size. */
static void snapshot_older(void)
{
    static pw w;
    static char out[8192], err[2048], args[1200], path[1024];
    pw_begin(&w, 4);
    dict_open(&w);
    pw_str(&w, "segments"), list_open(&w);
    dict_open(&w);
    pw_str(&w, "device"), pw_int(&w, 0);
    pw_str(&w, "address"), pw_int(&w, 0x200000);
    pw_str(&w, "total_size"), pw_int(&w, 0x200000);
    pw_str(&w, "stream"), pw_int(&w, 0);
    pw_str(&w, "blocks"), list_open(&w);
    dict_open(&w);
    pw_str(&w, "address"), pw_int(&w, 0x200000);
    pw_str(&w, "size"), pw_int(&w, 1024);
    pw_str(&w, "state"), pw_str(&w, "active_allocated");
    dict_close(&w);
    list_close(&w);
    dict_close(&w);
    list_close(&w);
    pw_str(&w, "device_traces"), list_open(&w), list_open(&w);
    entry(&w, "segment_alloc", 0x400000, 0x200000, 0, 1);
    entry(&w, "segment_free", 0x400000, 0x200000, 0, 2);
    list_close(&w), list_close(&w);
    dict_close(&w);
    pw_end(&w);
    snprintf(path, sizeof path, "%s", write_file(&w, 0));
    got *g = malloc(sizeof *g);
    CU_ASSERT_EQUAL_FATAL(read_all(path, 0, g), 0);
    CU_ASSERT_EQUAL(g->n, 2); /* the trace's segment_free: an inferred empty_cache() */
    CHECK_EV(g, 0, AS_OP_ALLOC, 0, 1024, 0);
    CU_ASSERT_EQUAL(g->ev[1].op, AS_OP_EMPTY_CACHE);
    free(g);
    as_check_result r;
    as_trace_error e;
    CU_ASSERT_EQUAL(as_check(path, NULL, &r, &e), AS_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no allocator_settings"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "-p"));
    snprintf(args, sizeof args, "run -p recorded '%s'", path);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "name the setting the job ran with"));
    snprintf(args, sizeof args, "info '%s'", path);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "state at the dump: 1 segments (0 small), 2.0 MiB reserved; "
                                       "1.0 KiB allocated in 1 blocks (1.0 KiB requested)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "internal 0 B"));
    tu_rm(path);
}

/* ---- pools of reused addresses ---------------------------------------------------------- */

#define PL_SLOTS 24   /* 2 MiB address slots; a segment takes 1-3 */
#define PL_SEGS 120   /* segments made over the trace */
#define PL_MIB (1ll << 20)

typedef struct pl_seg {
    int64_t addr, size;
    int live;     /* alive at the dump */
    int64_t pool; /* at the dump: its segment_pool_id (pool, 0) */
} pl_seg;

typedef struct pl_case {
    pl_seg seg[PL_SEGS];
    struct { const char *act; int64_t addr, size; int seg; } e[6 * PL_SEGS];
    size_t ne, nseg;
} pl_case;

/* Segments made and freed at random over PL_SLOTS slots, never two alive at one address,
 * each with two allocations inside freed before it; those alive at the end are at the
 * dump, in pool (1, 0) and the default one by turns (both, so neither is the stream's). */
static void pl_make(pl_case *c, uint64_t s)
{
    memset(c, 0, sizeof *c);
    int live[PL_SLOTS];
    for (int i = 0; i < PL_SLOTS; i++)
        live[i] = -1;
#define PL_E(a, x, n, k) (c->e[c->ne].act = (a), c->e[c->ne].addr = (x), \
                          c->e[c->ne].size = (n), c->e[c->ne++].seg = (k))
    while (c->nseg < PL_SEGS) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int at = (int)((s >> 33) % PL_SLOTS), len = 1 + (int)((s >> 20) % 3);
        if (live[at] >= 0) {
            int k = live[at];
            pl_seg *g = &c->seg[k];
            PL_E("free_completed", g->addr, PL_MIB / 2, k);
            PL_E("free_completed", g->addr + PL_MIB, PL_MIB / 2, k);
            PL_E("segment_free", g->addr, g->size, k);
            for (int i = 0; i < PL_SLOTS; i++)
                if (live[i] == k)
                    live[i] = -1;
            continue;
        }
        while (at + len > PL_SLOTS || (len > 1 && live[at + len - 1] >= 0) ||
               (len > 2 && live[at + 1] >= 0))
            len--;
        int k = (int)c->nseg++;
        c->seg[k] = (pl_seg){.addr = (at + 1) * 2 * PL_MIB, .size = len * 2 * PL_MIB};
        PL_E("segment_alloc", c->seg[k].addr, c->seg[k].size, k);
        PL_E("alloc", c->seg[k].addr, PL_MIB / 2, k);
        PL_E("alloc", c->seg[k].addr + PL_MIB, PL_MIB / 2, k);
        for (int i = at; i < at + len; i++)
            live[i] = k;
    }
    int n = 0;
    for (int i = 0; i < PL_SLOTS; i++)
        if (live[i] >= 0 && !c->seg[live[i]].live) {
            c->seg[live[i]].live = 1;
            c->seg[live[i]].pool = n++ % 2;
            PL_E("free_completed", c->seg[live[i]].addr, PL_MIB / 2, live[i]);
            PL_E("free_completed", c->seg[live[i]].addr + PL_MIB, PL_MIB / 2, live[i]);
        }
#undef PL_E
}

/* A large segment of stream 0 at the dump, free, in pool (pool, 0). */
static void pl_segment(pw *w, int64_t addr, int64_t size, int64_t pool)
{
    dict_open(w);
    pw_str(w, "device"), pw_int(w, 0);
    pw_str(w, "address"), pw_int(w, addr);
    pw_str(w, "total_size"), pw_int(w, size);
    pw_str(w, "stream"), pw_int(w, 0);
    pw_str(w, "segment_type"), pw_str(w, "large");
    pw_str(w, "segment_pool_id"), list_open(w), pw_int(w, pool), pw_int(w, 0), list_close(w);
    pw_str(w, "blocks"), list_open(w), dict_open(w);
    pw_str(w, "address"), pw_int(w, addr);
    pw_str(w, "size"), pw_int(w, size);
    pw_str(w, "requested_size"), pw_int(w, 0);
    pw_str(w, "state"), pw_str(w, "inactive");
    dict_close(w), list_close(w);
    dict_close(w);
}

static void pl_write(pw *w, const pl_case *c)
{
    pw_begin(w, 4);
    dict_open(w);
    pw_str(w, "segments"), list_open(w);
    for (int i = 0; i < PL_SLOTS; i++) /* in address order */
        for (size_t k = 0; k < c->nseg; k++) {
            const pl_seg *g = &c->seg[k];
            if (!g->live || g->addr != (i + 1) * 2 * PL_MIB)
                continue;
            pl_segment(w, g->addr, g->size, g->pool);
        }
    list_close(w);
    pw_str(w, "device_traces"), list_open(w), list_open(w);
    for (size_t i = 0; i < c->ne; i++)
        entry(w, c->e[i].act, c->e[i].addr, c->e[i].size, 0, (int64_t)i + 1);
    list_close(w), list_close(w);
    settings(w, "");
    dict_close(w);
    pw_end(w);
}

/* Each ALLOC's pool is its segment's, over 120 segments that reuse 24 slots of addresses:
 * the recorded pool of one alive at the dump, the default for one freed in the trace (the
 * lookup's cache of the last answer in each 2 MiB must never outlive its segment). */
static void snapshot_pools_reused_addresses(void)
{
    static pw w;
    static pl_case c;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        pl_make(&c, seed);
        pl_write(&w, &c);
        CU_ASSERT_FATAL(w.n <= sizeof w.b);
        const char *path = write_file(&w, 0);
        as_trace_reader *r = NULL;
        as_trace_error err;
        CU_ASSERT_EQUAL_FATAL(as_trace_open(path, NULL, &r, &err), 0);
        size_t k = 0, wrong = 0, recorded = 0, in1 = 0;
        as_event e;
        while (as_trace_next(r, &e) == 0) {
            if (e.op != AS_OP_ALLOC)
                continue;
            while (k < c.ne && strcmp(c.e[k].act, "alloc") != 0)
                k++;
            CU_ASSERT_FATAL(k < c.ne);
            const pl_seg *g = &c.seg[c.e[k++].seg];
            wrong += e.pool != (uint32_t)(g->live ? g->pool : 0);
            recorded += g->live;
            in1 += g->live && g->pool;
        }
        const as_snapshot_record *rec = as_trace_reader_snapshot(r);
        CU_ASSERT_EQUAL(wrong, 0);
        CU_ASSERT(in1 > 0);
        CU_ASSERT_EQUAL(rec->pool_recorded, recorded);
        CU_ASSERT_EQUAL(rec->pool_allocs, in1);
        CU_ASSERT_EQUAL(rec->pool_recorded + rec->pool_ambiguous + rec->pool_by_release +
                            rec->pool_by_frames + rec->pool_by_stream, 2 * c.nseg);
        as_trace_close(r);
        tu_rm(path);
    }
}

/* A crafted record: segment Y [3, 5) MiB made inside X [2, 10) MiB, both alive. The pool
 * of an ALLOC is then that of the highest-starting segment holding it, whatever was asked
 * before in the same 2 MiB: 3.5 MiB is Y's (the default pool) even after 2.5 MiB, X's
 * (recorded, pool (1, 0)), was looked up (the cache must stay off for such a record). */
static void snapshot_pools_overlap(void)
{
    static pw w;
    pw_begin(&w, 4);
    dict_open(&w);
    pw_str(&w, "segments"), list_open(&w);
    pl_segment(&w, 2 * PL_MIB, 8 * PL_MIB, 1);
    list_close(&w);
    pw_str(&w, "device_traces"), list_open(&w), list_open(&w);
    static const int64_t at[] = {5 * PL_MIB / 2, 7 * PL_MIB / 2, 5 * PL_MIB / 2, 7 * PL_MIB / 2};
    entry(&w, "segment_alloc", 2 * PL_MIB, 8 * PL_MIB, 0, 1);
    entry(&w, "segment_alloc", 3 * PL_MIB, 2 * PL_MIB, 7, 2); /* (not X's stream: no pool) */
    for (int i = 0; i < 4; i++) {
        entry(&w, "alloc", at[i], 4096, 0, 3 + 2 * i);
        entry(&w, "free_completed", at[i], 4096, 0, 4 + 2 * i);
    }
    list_close(&w), list_close(&w);
    settings(&w, "");
    dict_close(&w);
    pw_end(&w);
    const char *path = write_file(&w, 0);
    as_trace_reader *r = NULL;
    as_trace_error err;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(path, NULL, &r, &err), 0);
    as_event e;
    uint32_t pools[4];
    int n = 0;
    while (as_trace_next(r, &e) == 0)
        if (e.op == AS_OP_ALLOC && n < 4)
            pools[n++] = e.pool;
    CU_ASSERT_EQUAL_FATAL(n, 4);
    CU_ASSERT_EQUAL(pools[0], 1);
    CU_ASSERT_EQUAL(pools[1], 0);
    CU_ASSERT_EQUAL(pools[2], 1);
    CU_ASSERT_EQUAL(pools[3], 0);
    as_trace_close(r);
    tu_rm(path);
}

CU_TestInfo test_snapshot[] = {
    {"older", snapshot_older},
    {"midrun_by_hand", snapshot_midrun_by_hand},
    {"h200_counts", snapshot_h200_counts},
    {"h200_events", snapshot_h200_events},
    {"h200_spot_values", snapshot_h200_spot_values},
    {"handmade_basic", snapshot_handmade_basic},
    {"prehistoric", snapshot_prehistoric},
    {"devices", snapshot_devices},
    {"device_choice", snapshot_device_choice},
    {"bad_frees", snapshot_bad_frees},
    {"bad_input", snapshot_bad_input},
    {"truncated_everywhere", snapshot_truncated_everywhere},
    {"repetition_bomb", snapshot_repetition_bomb},
    {"random_corruption", snapshot_random_corruption},
    {"two_passes_agree", snapshot_two_passes_agree},
    {"bombs_refused_small", snapshot_bombs_refused_small},
    {"frees_bounded", snapshot_frees_bounded},
    {"real_truncations", snapshot_real_truncations},
    {"scanner_real", snapshot_scanner_real},
    {"scanner_mutants", snapshot_scanner_mutants},
    {"scanner_stacks", snapshot_scanner_stacks},
    {"scanner_skeleton", snapshot_scanner_skeleton},
    {"batched_containers", snapshot_batched_containers},
    {"from_a_pipe", snapshot_from_a_pipe},
    {"pools_reused_addresses", snapshot_pools_reused_addresses},
    {"pools_overlap", snapshot_pools_overlap},
    CU_TEST_INFO_NULL,
};
