/*
 * test_codec.c - the native format: lossless round trips (by hand, randomised, through the
 * text format), its error classes with their offsets, and its size on loop-like traces.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "trace.h"
#include "util.h"

/* ---- helpers ---------------------------------------------------------------------- */

static int write_events(const char *path, as_trace_fmt fmt, const as_meta *meta, const as_event *ev,
                        size_t n)
{
    as_trace_writer *w;
    as_trace_error err;
    int rc = as_trace_writer_open(path, fmt, meta, &w, &err);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = as_trace_write(w, &ev[i]);
    int rc2 = as_trace_writer_close(w, &err);
    return rc ? rc : rc2;
}

static int same_event(const as_event *a, const as_event *b)
{
    if (a->op != b->op || a->id != b->id || a->time_us != b->time_us)
        return 0;
    if (a->op == AS_OP_ALLOC && (a->size != b->size || a->stream != b->stream))
        return 0;
    if (a->op == AS_OP_MARK && strcmp(a->label, b->label) != 0)
        return 0;
    return 1;
}

/* Reads path and compares with ev[0..n); returns the index of the first difference, n if
 * all equal and the trace ends there, or (size_t)-1 on a read error. */
static size_t compare_file(const char *path, const as_event *ev, size_t n, as_trace_fmt fmt)
{
    as_trace_reader *r;
    as_trace_error err;
    if (as_trace_open(path, NULL, &r, &err) < 0) {
        fprintf(stderr, "open %s: %s\n", err.path, err.msg);
        return (size_t)-1;
    }
    size_t i = 0;
    if (as_trace_reader_format(r) != fmt)
        i = (size_t)-1;
    as_event e;
    int rc = 0;
    for (; i < n; i++) {
        rc = as_trace_next(r, &e);
        if (rc || !same_event(&e, &ev[i]))
            break;
        /* FREE's size and stream come from the live table: the allocation's. */
        if (e.op == AS_OP_FREE && e.size == 0)
            break;
    }
    if (i == n && as_trace_next(r, &e) != AS_TRACE_EOF)
        i = n + 1;
    if (rc < 0)
        fprintf(stderr, "read %s: %s\n", as_trace_reader_error(r)->path,
                as_trace_reader_error(r)->msg);
    as_trace_close(r);
    return i;
}


/* Random valid trace: every op, several streams, times with jumps both ways, labels with
 * awkward bytes. */
static as_event *random_trace(uint64_t *seed, size_t n, char labels[][AS_MAX_LABEL + 1])
{
    as_event *ev = calloc(n, sizeof *ev);
    uint64_t *live = calloc(n, sizeof *live);
    uint8_t *req = calloc(n, 1);
    size_t nlive = 0, nalloc = 0, nl = 0;
    int64_t t = (int64_t)(tu_rand(seed) % 1000000) - 500000;
    static const char alphabet[] = "ab #\\\t\n=t0123456789-\x7f\xc3\xa9 ";
    for (size_t i = 0; i < n; i++) {
        uint64_t r = tu_rand(seed) % 100;
        as_event *e = &ev[i];
        e->time_us = AS_TIME_NONE;
        if (r < 3) {
            e->op = r == 0 ? AS_OP_EMPTY_CACHE : AS_OP_MARK;
            if (e->op == AS_OP_MARK) {
                size_t len = tu_rand(seed) % (r == 1 ? 12 : AS_MAX_LABEL + 1);
                char *l = labels[nl++ % 64];
                for (size_t k = 0; k < len; k++)
                    l[k] = alphabet[tu_rand(seed) % (sizeof alphabet - 1)];
                l[len] = 0;
                if (tu_rand(seed) % 4 == 0 && len < 200)
                    strcat(l, " t=42"); /* must stay part of the label */
                e->label = l;
            }
        } else if (r < 50 || nlive == 0) {
            e->op = AS_OP_ALLOC;
            e->id = nalloc++;
            uint64_t sk = tu_rand(seed) % 8;
            e->size = sk < 4 ? (uint64_t)512 << sk
                             : 1 + tu_rand(seed) % (sk == 7 ? AS_MAX_ALLOC_SIZE : 1u << 30);
            uint64_t st = tu_rand(seed) % 10;
            e->stream = st < 6 ? 0 : st < 9 ? 0x7f0000001000ull + st : tu_rand(seed);
            live[nlive++] = e->id;
        } else {
            size_t k = (size_t)(tu_rand(seed) % nlive);
            if (tu_rand(seed) % 10 == 0) /* sometimes a very old one */
                k = 0;
            e->id = live[k];
            if (!req[e->id] && tu_rand(seed) % 3 == 0) {
                e->op = AS_OP_FREE_REQ;
                req[e->id] = 1;
            } else {
                e->op = AS_OP_FREE;
                live[k] = live[--nlive];
            }
        }
        uint64_t tr = tu_rand(seed) % 10;
        if (tr < 7) {
            t += (int64_t)(tu_rand(seed) % 50);
            e->time_us = t;
        } else if (tr == 7) {
            /* extreme values, both signs: the delta coding must survive wrap-around */
            static const int64_t ext[] = {INT64_MAX, INT64_MIN + 1, -1, 0, 1};
            e->time_us = ext[tu_rand(seed) % 5];
        }
    }
    free(live);
    free(req);
    return ev;
}

/* ---- tests ------------------------------------------------------------------------ */

static void codec_roundtrip_by_hand(void)
{
    as_meta m = {0};
    CU_ASSERT_EQUAL(as_meta_set(&m, "source", "hand"), 0);
    CU_ASSERT_EQUAL(as_meta_set(&m, "allocator_config", "expandable_segments:True"), 0);
    const as_event ev[] = {
        {.op = AS_OP_ALLOC, .id = 0, .size = 1000, .stream = 0, .time_us = 10},
        {.op = AS_OP_ALLOC, .id = 1, .size = 1000, .stream = 0x7fab0000, .time_us = 12},
        {.op = AS_OP_MARK, .label = "step 1", .time_us = AS_TIME_NONE},
        {.op = AS_OP_FREE_REQ, .id = 0, .time_us = 11},
        {.op = AS_OP_ALLOC, .id = 2, .size = AS_MAX_ALLOC_SIZE, .stream = 0, .time_us = -5},
        {.op = AS_OP_FREE, .id = 0, .time_us = AS_TIME_NONE},
        {.op = AS_OP_EMPTY_CACHE, .time_us = 100},
        {.op = AS_OP_FREE, .id = 2, .time_us = 101},
        {.op = AS_OP_ALLOC, .id = 3, .size = 1, .stream = 0x7fab0000, .time_us = 102},
    };
    size_t n = sizeof ev / sizeof ev[0];
    const char *p = tu_tmp(".zst");
    CU_ASSERT_EQUAL_FATAL(write_events(p, AS_FMT_NATIVE, &m, ev, n), 0);
    CU_ASSERT_EQUAL(compare_file(p, ev, n, AS_FMT_NATIVE), n);
    as_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(p, NULL, &r, NULL), 0);
    const as_meta *rm = as_trace_reader_meta(r);
    CU_ASSERT_EQUAL(rm->n, 2);
    CU_ASSERT_STRING_EQUAL(as_meta_get(rm, "source"), "hand");
    CU_ASSERT_STRING_EQUAL(rm->kv[1].key, "allocator_config");
    as_event e;
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    /* the reader fills a FREE's size and stream from its allocation */
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    CU_ASSERT_EQUAL(e.op, AS_OP_FREE);
    CU_ASSERT_EQUAL(e.size, 1000);
    as_trace_close(r);
    as_meta_free(&m);
    tu_rm(p);
}

static void codec_roundtrip_random(void)
{
    uint64_t seed = tu_seed("codec_roundtrip_random");
    static char labels[64][AS_MAX_LABEL + 1];
    for (int round = 0; round < 6; round++) {
        size_t n = 1 + (size_t)(tu_rand(&seed) % (round < 3 ? 50 : 40000));
        as_event *ev = random_trace(&seed, n, labels);
        /* labels repeat every 64 marks; keep only unique ones alive by rewriting any MARK
         * whose buffer was reused later (simplest: point each at its own copy) */
        char(*own)[AS_MAX_LABEL + 1] = calloc(n, sizeof *own);
        for (size_t i = 0; i < n; i++)
            if (ev[i].op == AS_OP_MARK) {
                strcpy(own[i], ev[i].label);
                ev[i].label = own[i];
            }
        const char *nat = tu_tmp(".bin"), *txt = tu_tmp(".trace"), *nat2 = tu_tmp(".x");
        CU_ASSERT_EQUAL_FATAL(write_events(nat, AS_FMT_NATIVE, NULL, ev, n), 0);
        CU_ASSERT_EQUAL(compare_file(nat, ev, n, AS_FMT_NATIVE), n);
        /* native -> text -> native: every step lossless, and the two native files equal */
        as_trace_error err;
        uint64_t cnt;
        CU_ASSERT_EQUAL(as_trace_convert(nat, txt, AS_FMT_TEXT, NULL, NULL, &cnt, &err), 0);
        CU_ASSERT_EQUAL(cnt, n);
        CU_ASSERT_EQUAL(compare_file(txt, ev, n, AS_FMT_TEXT), n);
        CU_ASSERT_EQUAL(as_trace_convert(txt, nat2, AS_FMT_NATIVE, NULL, NULL, &cnt, &err), 0);
        CU_ASSERT_EQUAL(compare_file(nat2, ev, n, AS_FMT_NATIVE), n);
        CU_ASSERT_EQUAL(tu_file_size(nat), tu_file_size(nat2));
        free(ev);
        free(own);
        tu_rm(nat);
        tu_rm(txt);
        tu_rm(nat2);
    }
}

/* A native file's decompressed bytes built by hand, so corruptions can be placed exactly. */
typedef struct rawbuf {
    uint8_t b[4096];
    size_t n;
} rawbuf;

static void rb_bytes(rawbuf *r, const void *p, size_t n)
{
    memcpy(r->b + r->n, p, n);
    r->n += n;
}
static void rb_u8(rawbuf *r, uint8_t v)
{
    r->b[r->n++] = v;
}
static void rb_var(rawbuf *r, uint64_t v)
{
    while (v >= 0x80) {
        rb_u8(r, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    rb_u8(r, (uint8_t)v);
}

static const uint8_t MAGIC[8] = {0x8A, 'A', 'S', 'T', 0x0D, 0x0A, 0x1A, 0x0A};

/* Header (version 1, no metadata): 8 + 1 + 1 + 1 = 11 bytes. */
static void rb_header(rawbuf *r)
{
    r->n = 0;
    rb_bytes(r, MAGIC, 8);
    rb_var(r, 1);
    rb_var(r, 0);
    rb_var(r, 0);
}

static const char *write_zst(const rawbuf *r)
{
    const char *p = tu_tmp(".zst");
    size_t cap = ZSTD_compressBound(r->n);
    void *z = malloc(cap);
    size_t zn = ZSTD_compress(z, cap, r->b, r->n, 3);
    FILE *f = fopen(p, "wb");
    fwrite(z, 1, zn, f);
    fclose(f);
    free(z);
    return p;
}

/* Opens and reads to the end; returns the final code and the error. */
static int read_all(const char *path, as_trace_error *err, uint64_t *events)
{
    as_trace_reader *r;
    *events = 0;
    int rc = as_trace_open(path, NULL, &r, err);
    if (rc < 0)
        return rc;
    as_event e;
    while ((rc = as_trace_next(r, &e)) == 0)
        (*events)++;
    if (rc < 0)
        *err = *as_trace_reader_error(r);
    as_trace_close(r);
    return rc;
}

static void codec_errors(void)
{
    rawbuf r;
    as_trace_error err;
    uint64_t nev;
    const char *p;

    /* A valid minimal file: one block (ALLOC literal 4096, FREE d=1), the end record. */
    rb_header(&r);
    rb_var(&r, 2); /* 2 events */
    rb_var(&r, 4); /* structure: tag 0xF0, varint 4096 (2 bytes), tag 0x01 */
    rb_var(&r, 0); /* no times */
    rb_u8(&r, 60 << 2 | 0);
    rb_var(&r, 4096);
    rb_u8(&r, 0 << 2 | 1);
    rb_var(&r, 0);
    rb_var(&r, 2);
    rb_var(&r, 1);
    p = write_zst(&r);
    CU_ASSERT_EQUAL(read_all(p, &err, &nev), AS_TRACE_EOF);
    CU_ASSERT_EQUAL(nev, 2);
    tu_rm(p);

    /* Bad magic: the last magic byte changed. The probe still fails -> not recognised. */
    r.b[7] = 0x0B;
    p = write_zst(&r);
    CU_ASSERT_EQUAL(read_all(p, &err, &nev), AS_EFORMAT);
    tu_rm(p);
    r.b[7] = 0x0A;

    /* Bad version (3: this build reads 1 and 2) at offset 8. */
    r.b[8] = 3;
    p = write_zst(&r);
    CU_ASSERT_EQUAL(read_all(p, &err, &nev), AS_EFORMAT);
    CU_ASSERT_EQUAL(err.offset, 8);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "version 3"));
    tu_rm(p);
    r.b[8] = 1;

    /* Corrupt varint: the size literal 4096 (bytes 0x80 0x20 at offsets 15,16) made
     * overlong/unterminated: 0x80 0x80 runs into the FREE tag, whose value 0x01 then ends
     * the varint; the block then lacks a byte. The header is 3 bytes (11..13), structure
     * starts at 14: tag at 14, varint at 15. */
    r.b[16] = 0x80;
    p = write_zst(&r);
    CU_ASSERT_EQUAL(read_all(p, &err, &nev), AS_ECORRUPT);
    CU_ASSERT_EQUAL(err.offset, 18); /* structure ends at 18: FREE tag missing */
    tu_rm(p);
    r.b[16] = 0x20;

    /* A varint with an overlong zero continuation: 0x80 0x00 is refused. */
    {
        rawbuf q;
        rb_header(&q);
        rb_var(&q, 1);
        rb_var(&q, 3);
        rb_var(&q, 0);
        rb_u8(&q, 60 << 2 | 0);
        rb_u8(&q, 0x81);
        rb_u8(&q, 0x00);
        rb_var(&q, 0);
        rb_var(&q, 1);
        rb_var(&q, 1);
        p = write_zst(&q);
        CU_ASSERT_EQUAL(read_all(p, &err, &nev), AS_ECORRUPT);
        CU_ASSERT_EQUAL(err.offset, 15); /* the varint's first byte */
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "varint"));
        tu_rm(p);
    }

    /* Missing end record: cut the last 3 bytes. */
    r.n -= 3;
    p = write_zst(&r);
    CU_ASSERT_EQUAL(read_all(p, &err, &nev), AS_ECORRUPT);
    CU_ASSERT_EQUAL(nev, 2);
    CU_ASSERT_EQUAL(err.offset, 18);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "end record"));
    tu_rm(p);

    /* Trailing data after the end record. */
    r.n += 3;
    rb_u8(&r, 0);
    p = write_zst(&r);
    CU_ASSERT_EQUAL(read_all(p, &err, &nev), AS_ECORRUPT);
    CU_ASSERT_EQUAL(err.offset, 21);
    tu_rm(p);
    r.n -= 1;

    /* A free that refers before the first allocation: d = 2 with one alloc (tag 1<<2|1). */
    r.b[17] = 1 << 2 | 1;
    p = write_zst(&r);
    CU_ASSERT_EQUAL(read_all(p, &err, &nev), AS_ECORRUPT);
    CU_ASSERT_EQUAL(err.offset, 17);
    CU_ASSERT_EQUAL(err.event, 1);
    tu_rm(p);
    r.b[17] = 0 << 2 | 1;

    /* A double free in a well-formed block: ALLOC, FREE d=1, FREE d=1 -> EINVAL, event 2. */
    {
        rawbuf q;
        rb_header(&q);
        rb_var(&q, 3);
        rb_var(&q, 5);
        rb_var(&q, 0);
        rb_u8(&q, 60 << 2 | 0);
        rb_var(&q, 4096);
        rb_u8(&q, 0 << 2 | 1);
        rb_u8(&q, 0 << 2 | 1);
        rb_var(&q, 0);
        rb_var(&q, 3);
        rb_var(&q, 1);
        p = write_zst(&q);
        CU_ASSERT_EQUAL(read_all(p, &err, &nev), AS_EINVAL);
        CU_ASSERT_EQUAL(err.event, 2);
        CU_ASSERT_EQUAL(err.offset, 18);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "double free"));
        CU_ASSERT_EQUAL(nev, 2); /* the two good events came out first */
        tu_rm(p);
    }

    /* Zero size through the native path: literal 0. */
    {
        rawbuf q;
        rb_header(&q);
        rb_var(&q, 1);
        rb_var(&q, 2);
        rb_var(&q, 0);
        rb_u8(&q, 60 << 2 | 0);
        rb_var(&q, 0);
        rb_var(&q, 0);
        rb_var(&q, 1);
        rb_var(&q, 1);
        p = write_zst(&q);
        CU_ASSERT_EQUAL(read_all(p, &err, &nev), AS_EINVAL);
        CU_ASSERT_EQUAL(err.event, 0);
        CU_ASSERT_EQUAL(err.offset, 14);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "zero size"));
        tu_rm(p);
    }
}

/* One block: ALLOC 4096, then an ALLOC of each literal size with its FREE right after, so
 * that all but the first ALLOC are the decoder's fast loop's (the first sets the live
 * table up); bad, when not NULL, replaces the varint of size k (its bytes, nbad of them).
 * Returns the path; *off: the stream offset of literal k's varint. */
static const char *literal_block(const uint64_t *sizes, size_t n, size_t k, const uint8_t *bad,
                                 size_t nbad, uint64_t *off)
{
    rawbuf s, q;
    s.n = 0;
    rb_u8(&s, 60 << 2 | 0);
    rb_var(&s, 4096);
    for (size_t i = 0; i < n; i++) {
        rb_u8(&s, 60 << 2 | 0);
        if (i == k) {
            *off = s.n;
            rb_bytes(&s, bad, nbad);
        } else {
            rb_var(&s, sizes[i]);
        }
        rb_u8(&s, 0 << 2 | 1); /* FREE d=1 */
    }
    rb_header(&q);
    rb_var(&q, 1 + 2 * n);
    rb_var(&q, s.n);
    rb_var(&q, 0);
    *off += q.n;
    rb_bytes(&q, s.b, s.n);
    rb_var(&q, 0);
    rb_var(&q, 1 + 2 * n);
    rb_var(&q, 1 + n);
    return write_zst(&q);
}

/* A version-2 file with metadata pools=meta_pools (NULL: no such key) and a pool table of
 * table_pools (0: no pool column), and no events; *key_off is the `pools` key's offset. */
static const char *pools_file(const char *meta_pools, unsigned table_pools, uint64_t *key_off)
{
    rawbuf r;
    r.n = 0;
    rb_bytes(&r, MAGIC, 8);
    rb_var(&r, 2);
    rb_var(&r, 0);
    rb_var(&r, meta_pools ? 2 : 1);
    rb_var(&r, 6), rb_bytes(&r, "source", 6), rb_var(&r, 4), rb_bytes(&r, "test", 4);
    if (meta_pools) {
        *key_off = r.n;
        rb_var(&r, 5), rb_bytes(&r, "pools", 5);
        rb_var(&r, strlen(meta_pools)), rb_bytes(&r, meta_pools, strlen(meta_pools));
    }
    rb_var(&r, 0); /* no frames */
    rb_var(&r, 0); /* no sites */
    rb_var(&r, table_pools ? 1 : 0);
    if (table_pools)
        rb_var(&r, 2), rb_var(&r, table_pools);  /* the pool column and its table */
    rb_var(&r, 0), rb_var(&r, 0), rb_var(&r, 0); /* the end record: no events */
    return write_zst(&r);
}

/* The metadata's `pools` is the pool table's size, or the file is refused at open: one
 * that differed read here and then did not convert (the text reader refused its `meta
 * pools=` or its pool=K; found by the native fuzzer from a real snapshot's seed). */
static void codec_pools_meta(void)
{
    static const struct {
        const char *meta;
        unsigned table;
        int ok;
    } cases[] = {{NULL, 0, 1}, {"0", 0, 1}, {"3", 3, 1},  {"", 0, 0},      {"x", 0, 0},
                 {"2", 0, 0},  {"2", 3, 0}, {NULL, 1, 0}, {"70000", 0, 0}, {"-1", 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t key_off = 0, nev;
        as_trace_error err;
        const char *p = pools_file(cases[i].meta, cases[i].table, &key_off);
        int rc = read_all(p, &err, &nev);
        if (cases[i].ok) {
            CU_ASSERT_EQUAL(rc, AS_TRACE_EOF);
        } else {
            CU_ASSERT_EQUAL(rc, AS_ECORRUPT);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "pools"));
            CU_ASSERT_PTR_NOT_NULL(strstr(err.path, p));
            if (cases[i].meta) {
                CU_ASSERT_EQUAL(err.offset, key_off);
            } else { /* the key is missing: said so, not "pools=0" */
                CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no pools key"));
            }
        }
        tu_rm(p);
    }
}

/* Literal sizes of every varint length from 1 to 7 bytes (the largest valid size is 2^48),
 * decoded by the fast loop as the general one does, and its refusals: an overlong form, a
 * zero size, an absurd one, a varint of 9 bytes. */
static void codec_literal_sizes(void)
{
    const uint64_t sizes[] = {1,          127,
                              128,        4095,
                              1ull << 14, (1ull << 21) - 1,
                              1ull << 21, 1ull << 28,
                              1ull << 35, (1ull << 42) + 12345,
                              1ull << 48, 1000,
                              1ull << 47};
    const size_t n = sizeof sizes / sizeof sizes[0];
    uint64_t off = 0;
    as_trace_error err;
    const char *p = literal_block(sizes, n, n, NULL, 0, &off);
    as_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(p, NULL, &r, &err), 0);
    as_event ev[64];
    size_t got = 0, k, wrong = 0;
    while (got < 64 && as_trace_next_batch(r, ev + got, 64 - got, &k) == 0)
        got += k;
    CU_ASSERT_EQUAL(got, 1 + 2 * n);
    for (size_t i = 0; i < n && 2 + 2 * i < got; i++)
        wrong += ev[1 + 2 * i].op != AS_OP_ALLOC || ev[1 + 2 * i].size != sizes[i] ||
                 ev[2 + 2 * i].op != AS_OP_FREE || ev[2 + 2 * i].size != sizes[i];
    CU_ASSERT_EQUAL(wrong, 0);
    as_trace_close(r);
    tu_rm(p);

    static const struct {
        uint8_t b[10];
        size_t n;
        int code;
        const char *msg;
    } bad[] = {
        {{0x81, 0x80, 0x00}, 3, AS_ECORRUPT, "corrupt varint"}, /* overlong */
        {{0x00}, 1, AS_EINVAL, "zero size"},
        {{0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 9, AS_EINVAL, "absurd size"},
        {{0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40}, 7, AS_EINVAL, "absurd size"}, /* 2^48 + 1 */
    };
    for (size_t j = 0; j < sizeof bad / sizeof bad[0]; j++) {
        uint64_t nev;
        p = literal_block(sizes, n, 5, bad[j].b, bad[j].n, &off);
        CU_ASSERT_EQUAL(read_all(p, &err, &nev), bad[j].code);
        CU_ASSERT_EQUAL(nev, 11); /* ALLOC 4096 and five pairs */
        /* the ALLOC's record: its tag, or the varint itself when that is corrupt */
        CU_ASSERT_EQUAL(err.offset, bad[j].code == AS_ECORRUPT ? off : off - 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[j].msg));
        tu_rm(p);
    }
}

static void codec_truncated_zstd(void)
{
    /* A real trace, cut short at several points of its compressed bytes. */
    uint64_t seed = 12345;
    static char labels[64][AS_MAX_LABEL + 1];
    size_t n = 30000;
    as_event *ev = random_trace(&seed, n, labels);
    for (size_t i = 0; i < n; i++)
        if (ev[i].op == AS_OP_MARK) /* labels are reused; not the point here */
            ev[i] = (as_event){.op = AS_OP_EMPTY_CACHE, .time_us = ev[i].time_us};
    const char *p = tu_tmp(".zst");
    CU_ASSERT_EQUAL_FATAL(write_events(p, AS_FMT_NATIVE, NULL, ev, n), 0);
    uint64_t sz = tu_file_size(p);
    FILE *f = fopen(p, "rb");
    uint8_t *all = malloc(sz);
    CU_ASSERT_EQUAL_FATAL(fread(all, 1, sz, f), sz);
    fclose(f);
    const uint64_t cuts[] = {sz - 1, sz - 4, sz / 2, 10};
    for (size_t c = 0; c < 4; c++) {
        const char *q = tu_tmp(".zst");
        f = fopen(q, "wb");
        fwrite(all, 1, cuts[c], f);
        fclose(f);
        as_trace_error err;
        uint64_t nev;
        int rc = read_all(q, &err, &nev);
        CU_ASSERT_EQUAL(rc, AS_ECORRUPT);
        /* cut inside the checksum: every event arrived, the stream is still refused */
        CU_ASSERT(c < 2 ? nev <= n : nev < n);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "zstd") ? err.msg : strstr(err.msg, "truncated"));
        tu_rm(q);
    }
    /* A flipped byte in the middle: zstd's checksum (or its decoder) catches it. */
    all[sz / 2] ^= 0x55;
    const char *q = tu_tmp(".zst");
    f = fopen(q, "wb");
    fwrite(all, 1, sz, f);
    fclose(f);
    as_trace_error err;
    uint64_t nev;
    CU_ASSERT(read_all(q, &err, &nev) < 0);
    tu_rm(q);
    free(all);
    free(ev);
    tu_rm(p);
}

/* A training-loop-like trace: per step, the same sequence of activation allocations (with
 * a per-step batch size), freed in reverse, plus jittered microsecond timestamps. */
static size_t loop_trace(as_trace_writer *w, size_t steps, uint64_t *seed)
{
    static const uint64_t base[] = {4096, 8192, 1 << 20, 3 << 20, 512, 33554432, 67108864};
    uint64_t id = 0, n = 0;
    int64_t t = 1795936740984397;
    for (size_t s = 0; s < steps; s++) {
        uint64_t batch = 16 + tu_rand(seed) % 113;
        uint64_t first = id;
        size_t k = 24;
        for (size_t i = 0; i < k; i++) {
            t += (int64_t)(tu_rand(seed) % 20);
            as_event e = {.op = AS_OP_ALLOC,
                          .id = id++,
                          .size = base[i % 7] * (i % 3 ? batch : 1),
                          .time_us = t};
            as_trace_write(w, &e);
            n++;
        }
        for (size_t i = k; i-- > 0;) {
            t += (int64_t)(tu_rand(seed) % 20);
            as_event e = {.op = AS_OP_FREE, .id = first + i, .time_us = t};
            as_trace_write(w, &e);
            n++;
        }
        as_event m = {.op = AS_OP_MARK, .label = "step", .time_us = AS_TIME_NONE};
        if (s % 100 == 0) {
            as_trace_write(w, &m);
            n++;
        }
    }
    return n;
}

static void codec_size_loop_trace(void)
{
    uint64_t seed = tu_seed("codec_size_loop_trace");
    const char *p = tu_tmp(".zst");
    as_trace_writer *w;
    CU_ASSERT_EQUAL_FATAL(as_trace_writer_open(p, AS_FMT_NATIVE, NULL, &w, NULL), 0);
    size_t n = loop_trace(w, 4000, &seed);
    CU_ASSERT_EQUAL(as_trace_writer_close(w, NULL), 0);
    double bpe = (double)tu_file_size(p) / (double)n;
    fprintf(stderr, "  [native: %zu events, %.3f bytes/event]\n", n, bpe);
    /* The requirement: at most 2 bytes per event, timestamps included. */
    CU_ASSERT(bpe <= 2.0);
    tu_rm(p);
}

/* The real H200 snapshots (tests/data), once the pickle importer is in the build. */
extern const struct as_source_ops as_src_torch __attribute__((weak));

static void codec_size_real_traces(void)
{
    if (!&as_src_torch) {
        fprintf(stderr, "  [no pickle importer yet: skipped]\n");
        return;
    }
    static const char *snaps[] = {
        "tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst",
        "tests/data/torch-2.11-h200/moe_like.pickle.zst",
        "tests/data/torch-2.11-h200-streams/streams2_default.pickle.zst",
    };
    for (size_t i = 0; i < 3; i++) {
        const char *in = tu_path(snaps[i]);
        FILE *f = fopen(in, "rb");
        CU_ASSERT_PTR_NOT_NULL(f);
        if (!f)
            continue;
        fclose(f);
        char inb[1024];
        snprintf(inb, sizeof inb, "%s", in);
        const char *out = tu_tmp(".zst");
        uint64_t n = 0;
        as_trace_error err;
        int rc = as_trace_convert(inb, out, AS_FMT_NATIVE, NULL, NULL, &n, &err);
        CU_ASSERT_EQUAL(rc, 0);
        if (rc == 0 && n) {
            double bpe = (double)tu_file_size(out) / (double)n;
            fprintf(stderr, "  [%s: %llu events, %.3f bytes/event]\n", snaps[i],
                    (unsigned long long)n, bpe);
            CU_ASSERT(bpe <= 2.0);
        } else if (rc) {
            fprintf(stderr, "  [%s: %s]\n", err.path, err.msg);
        }
        tu_rm(out);
    }
}

/* Reads a whole in-memory trace; checks the result is the end or a well-formed error. */
static int check_decode(const void *data, size_t n, uint64_t *events)
{
    as_trace_reader *r;
    as_trace_error err;
    *events = 0;
    int rc = as_trace_open_mem(data, n, "mutant", NULL, &r, &err);
    if (rc == 0) {
        as_event evs[512];
        size_t got;
        while ((rc = as_trace_next_batch(r, evs, 512, &got)) == 0) {
            *events += got;
            for (size_t i = 0; i < got; i++)
                if (evs[i].op == AS_OP_MARK && strlen(evs[i].label) > AS_MAX_LABEL)
                    return -100;
        }
        if (rc < 0)
            err = *as_trace_reader_error(r);
        as_trace_close(r);
    }
    if (rc == AS_TRACE_EOF)
        return rc;
    /* an error: a known code, a message, the path */
    if (rc != err.code || rc >= 0 || !strcmp(as_strerror(rc), "unknown error") || !err.msg[0] ||
        strcmp(err.path, "mutant") != 0)
        return -101;
    return rc;
}

/*
 * Mutations of valid native and text traces (bytes flipped, cut, duplicated, inside the
 * decompressed content and in the zstd bytes): the reader must end cleanly or report a
 * well-formed error, never crash or read out of bounds (the suite also runs under ASan).
 */
static void codec_mutations(void)
{
    uint64_t seed = tu_seed("codec_mutations");
    static char labels[64][AS_MAX_LABEL + 1];
    size_t n = 3000;
    as_event *ev = random_trace(&seed, n, labels);
    const char *nat = tu_tmp(".zst"), *txt = tu_tmp(".txt");
    CU_ASSERT_EQUAL_FATAL(write_events(nat, AS_FMT_NATIVE, NULL, ev, n), 0);
    CU_ASSERT_EQUAL_FATAL(as_trace_convert(nat, txt, AS_FMT_TEXT, NULL, NULL, NULL, NULL), 0);
    uint64_t zn = tu_file_size(nat), tn = tu_file_size(txt);
    uint8_t *z = malloc(zn), *t = malloc(tn);
    FILE *f = fopen(nat, "rb");
    CU_ASSERT_EQUAL_FATAL(fread(z, 1, zn, f), zn);
    fclose(f);
    f = fopen(txt, "rb");
    CU_ASSERT_EQUAL_FATAL(fread(t, 1, tn, f), tn);
    fclose(f);
    /* the streaming writer does not record the content size: decompress into plenty */
    uint8_t *raw = malloc(16u << 20);
    size_t rn = ZSTD_decompress(raw, 16u << 20, z, zn);
    CU_ASSERT_FATAL(!ZSTD_isError(rn) && rn > 0);
    uint64_t evn;
    CU_ASSERT_EQUAL(check_decode(raw, rn, &evn), AS_TRACE_EOF); /* unwrapped native is fine */
    CU_ASSERT_EQUAL(evn, n);
    CU_ASSERT_EQUAL(check_decode(t, tn, &evn), AS_TRACE_EOF);
    CU_ASSERT_EQUAL(evn, n);

    size_t cap = (rn > tn ? rn : tn) + zn + 64;
    uint8_t *m = malloc(cap);
    int bad = 0, errors = 0;
    for (int round = 0; round < 600; round++) {
        const uint8_t *src = round % 3 == 0 ? raw : round % 3 == 1 ? t : z;
        size_t sn = round % 3 == 0 ? rn : round % 3 == 1 ? tn : zn, mn = sn;
        memcpy(m, src, sn);
        int kind = (int)(tu_rand(&seed) % 4);
        size_t at = (size_t)(tu_rand(&seed) % sn);
        if (kind == 0) { /* flip a few bytes */
            for (int k = 0; k < 1 + (int)(tu_rand(&seed) % 4); k++)
                m[(at + tu_rand(&seed) % 64) % sn] ^= (uint8_t)(1 + tu_rand(&seed) % 255);
        } else if (kind == 1) { /* cut */
            mn = at;
        } else if (kind == 2) { /* duplicate a slice */
            size_t len = 1 + (size_t)(tu_rand(&seed) % 32);
            if (at + len > sn)
                len = sn - at;
            memmove(m + at + len, m + at, sn - at);
            mn = sn + len;
        } else { /* a random byte, often a tag-like value */
            m[at] = (uint8_t)tu_rand(&seed);
        }
        int rc = check_decode(m, mn, &evn);
        if (rc < -99)
            bad++;
        else if (rc < 0)
            errors++;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(errors > 100); /* most mutations are caught (zstd's checksum, the validator) */
    free(m);
    free(raw);
    free(z);
    free(t);
    free(ev);
    tu_rm(nat);
    tu_rm(txt);
}

/*
 * Every native version stays readable: tests/data/native_v1.zst was written by the
 * version-1 writer from tests/data/native_v1.txt and committed. It exercises every v1
 * record: size-cache hits and literals, near and far frees (70 allocations back), FREE_REQ,
 * EMPTY_CACHE, MARKs, new and re-used streams, and times absent, delta-coded and absolute
 * (the jump from -5 to INT64_MAX). Whatever the writer becomes, this file must decode to
 * exactly the events of its text twin.
 */
static void codec_v1_golden(void)
{
    char nat[1024], txt[1024];
    snprintf(nat, sizeof nat, "%s", tu_path("tests/data/native_v1.zst"));
    snprintf(txt, sizeof txt, "%s", tu_path("tests/data/native_v1.txt"));
    as_trace_reader *a, *b;
    as_trace_error err;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(nat, NULL, &a, &err), 0);
    CU_ASSERT_EQUAL_FATAL(as_trace_open(txt, NULL, &b, &err), 0);
    CU_ASSERT_EQUAL(as_trace_reader_format(a), AS_FMT_NATIVE);
    const as_meta *ma = as_trace_reader_meta(a), *mb = as_trace_reader_meta(b);
    CU_ASSERT_EQUAL_FATAL(ma->n, 3);
    CU_ASSERT_EQUAL_FATAL(mb->n, 3);
    for (size_t i = 0; i < 3; i++) {
        CU_ASSERT_STRING_EQUAL(ma->kv[i].key, mb->kv[i].key);
        CU_ASSERT_STRING_EQUAL(ma->kv[i].value, mb->kv[i].value);
    }
    CU_ASSERT_STRING_EQUAL(as_meta_get(ma, "note"), "tab\there # hash");
    as_event ea, eb;
    int ra, rb, n = 0, far = 0, streams = 0;
    for (;;) {
        ra = as_trace_next(a, &ea);
        rb = as_trace_next(b, &eb);
        if (ra || rb)
            break;
        CU_ASSERT(same_event(&ea, &eb));
        CU_ASSERT_EQUAL(ea.size, eb.size);
        CU_ASSERT_EQUAL(ea.stream, eb.stream);
        if (ea.op == AS_OP_FREE && ea.id == 0)
            far++;
        if (ea.op == AS_OP_ALLOC && ea.stream != 0)
            streams++;
        n++;
    }
    CU_ASSERT_EQUAL(ra, AS_TRACE_EOF);
    CU_ASSERT_EQUAL(rb, AS_TRACE_EOF);
    CU_ASSERT_EQUAL(n, 80); /* 71 allocs, 2 free_req, 4 frees, 2 marks, 1 empty_cache */
    CU_ASSERT_EQUAL(far, 1);
    CU_ASSERT_EQUAL(streams, 4); /* allocs 5, 6, 7 and 70 */
    as_trace_close(a);
    as_trace_close(b);
}

CU_TestInfo test_codec[] = {
    {"v1_golden", codec_v1_golden},
    {"mutations", codec_mutations},
    {"roundtrip_by_hand", codec_roundtrip_by_hand},
    {"roundtrip_random", codec_roundtrip_random},
    {"errors", codec_errors},
    {"literal_sizes", codec_literal_sizes},
    {"pools_meta", codec_pools_meta},
    {"truncated_zstd", codec_truncated_zstd},
    {"size_loop_trace", codec_size_loop_trace},
    {"size_real_traces", codec_size_real_traces},
    CU_TEST_INFO_NULL,
};
