/*
 * test_reader.c - the generic reader: format detection by content (never by name), zstd
 * unwrapping, the validation every format goes through, lenient mode, wrapped sources,
 * the batch API, and memory bounded by live allocations rather than trace length.
 */
#include <CUnit/CUnit.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "source.h"
#include "trace.h"
#include "util.h"

static const char *write_file(const char *suffix, const void *data, size_t n)
{
    const char *p = tu_tmp(suffix);
    FILE *f = fopen(p, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
    return p;
}

static const char *write_zstd_text(const char *suffix, const char *text)
{
    size_t n = strlen(text), cap = ZSTD_compressBound(n);
    void *z = malloc(cap);
    size_t zn = ZSTD_compress(z, cap, text, n, 1);
    const char *p = write_file(suffix, z, zn);
    free(z);
    return p;
}

/* Reads to the end; returns the last code; err and the count of events delivered. */
static int drain(const char *path, const as_reader_opts *o, as_trace_error *err, uint64_t *n,
                 uint64_t *warnings)
{
    as_trace_reader *r;
    *n = 0;
    int rc = as_trace_open(path, o, &r, err);
    if (rc < 0)
        return rc;
    as_event e;
    while ((rc = as_trace_next(r, &e)) == 0)
        (*n)++;
    if (rc < 0)
        *err = *as_trace_reader_error(r);
    if (warnings)
        *warnings = as_trace_reader_warnings(r);
    as_trace_close(r);
    return rc;
}

static int text_case(const char *body, as_trace_error *err, uint64_t *n)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "allocsim-text 1\n%s", body);
    const char *p = tu_write_tmp(".txt", buf);
    int rc = drain(p, NULL, err, n, NULL);
    tu_rm(p);
    return rc;
}

static void reader_validation(void)
{
    as_trace_error err;
    uint64_t n;
    /* ALLOC ids are ordinals */
    CU_ASSERT_EQUAL(text_case("alloc 0 1\nalloc 2 1\n", &err, &n), AS_EINVAL);
    CU_ASSERT_EQUAL(err.event, 1);
    CU_ASSERT_EQUAL(err.line, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "ordinal 1"));
    /* zero and absurd sizes */
    CU_ASSERT_EQUAL(text_case("alloc 0 0\n", &err, &n), AS_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "zero size"));
    CU_ASSERT_EQUAL(err.offset, 16);
    CU_ASSERT_EQUAL(text_case("alloc 0 256TiB\n", &err, &n), AS_TRACE_EOF);
    CU_ASSERT_EQUAL(text_case("alloc 0 257TiB\n", &err, &n), AS_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "absurd"));
    /* unknown id, double free, FREE_REQ twice, free after FREE_REQ+FREE */
    CU_ASSERT_EQUAL(text_case("alloc 0 1\nfree 1\n", &err, &n), AS_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "unknown id"));
    CU_ASSERT_EQUAL(text_case("alloc 0 1\nfree 0\nfree 0\n", &err, &n), AS_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "double free"));
    CU_ASSERT_EQUAL(err.line, 4);
    CU_ASSERT_EQUAL(err.event, 2);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(text_case("alloc 0 1\nfree_req 0\nfree_req 0\n", &err, &n), AS_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "twice"));
    CU_ASSERT_EQUAL(text_case("alloc 0 1\nfree_req 0\nfree 0\nfree_req 0\n", &err, &n), AS_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "double free"));
    /* allowed: FREE without FREE_REQ, live memory at the end */
    CU_ASSERT_EQUAL(text_case("alloc 0 1\nalloc 1 1\nfree 0\n", &err, &n), AS_TRACE_EOF);
    CU_ASSERT_EQUAL(n, 3);
}

static void reader_lenient(void)
{
    const char *p = tu_write_tmp(".txt", "allocsim-text 1\n"
                                         "alloc 0 1\n"
                                         "free 5\n"    /* unknown: skipped */
                                         "alloc 1 0\n" /* zero size: skipped */
                                         "alloc 2 7\n" /* becomes id 1 */
                                         "free 1\n"    /* the skipped one: skipped */
                                         "free 2\n"    /* frees output id 1 */
                                         "free 2\n");  /* double: skipped */
    as_reader_opts o = {.lenient = 1};
    as_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(p, &o, &r, NULL), 0);
    as_event e;
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    CU_ASSERT(e.op == AS_OP_ALLOC && e.id == 0);
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    CU_ASSERT(e.op == AS_OP_ALLOC && e.id == 1 && e.size == 7);
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    CU_ASSERT(e.op == AS_OP_FREE && e.id == 1 && e.size == 7);
    CU_ASSERT_EQUAL(as_trace_next(r, &e), AS_TRACE_EOF);
    CU_ASSERT_EQUAL(as_trace_reader_warnings(r), 4);
    as_trace_close(r);
    tu_rm(p);
}

static void reader_detect_by_content(void)
{
    static const char text[] = "allocsim-text 1\nmeta k=v\nalloc 0 5\nfree 0\n";
    as_trace_error err;
    uint64_t n;
    as_trace_reader *r;
    /* text named like a zstd file and a pickle */
    const char *p = tu_write_tmp(".zst", text);
    CU_ASSERT_EQUAL_FATAL(as_trace_open(p, NULL, &r, &err), 0);
    CU_ASSERT_EQUAL(as_trace_reader_format(r), AS_FMT_TEXT);
    as_trace_close(r);
    tu_rm(p);
    /* zstd-wrapped text named .txt: unwrapped, then recognised as text */
    p = write_zstd_text(".txt", text);
    CU_ASSERT_EQUAL_FATAL(as_trace_open(p, NULL, &r, &err), 0);
    CU_ASSERT_EQUAL(as_trace_reader_format(r), AS_FMT_TEXT);
    CU_ASSERT_STRING_EQUAL(as_meta_get(as_trace_reader_meta(r), "k"), "v");
    as_trace_close(r);
    tu_rm(p);
    /* native named .txt */
    const char *t = tu_write_tmp(".pickle", text);
    const char *q = tu_tmp(".txt");
    CU_ASSERT_EQUAL(as_trace_convert(t, q, AS_FMT_NATIVE, NULL, NULL, &n, &err), 0);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL_FATAL(as_trace_open(q, NULL, &r, &err), 0);
    CU_ASSERT_EQUAL(as_trace_reader_format(r), AS_FMT_NATIVE);
    CU_ASSERT_STRING_EQUAL(as_meta_get(as_trace_reader_meta(r), "k"), "v");
    as_trace_close(r);
    tu_rm(t);
    tu_rm(q);
    /* a zstd skippable frame (magic 0x184D2A53, 4 bytes of payload) before the frame */
    {
        size_t tl = strlen(text), cap = ZSTD_compressBound(tl) + 12;
        uint8_t *z = malloc(cap);
        static const uint8_t skip[12] = {0x53, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 'a', 'b', 'c', 'd'};
        memcpy(z, skip, 12);
        size_t zn = ZSTD_compress(z + 12, cap - 12, text, tl, 1);
        p = write_file(".bin", z, zn + 12);
        CU_ASSERT_EQUAL(drain(p, NULL, &err, &n, NULL), AS_TRACE_EOF);
        CU_ASSERT_EQUAL(n, 2);
        tu_rm(p);
        free(z);
    }
    /* errors in zstd-wrapped text are located in the decompressed text */
    p = write_zstd_text(".bin", "allocsim-text 1\nalloc 0 1\nfree 3\n");
    CU_ASSERT_EQUAL(drain(p, NULL, &err, &n, NULL), AS_EINVAL);
    CU_ASSERT_EQUAL(err.line, 3);
    CU_ASSERT_EQUAL(err.offset, 26);
    tu_rm(p);
    /* unrecognised content, empty input, zstd of garbage */
    p = tu_write_tmp(".zst", "hello world\n");
    CU_ASSERT_EQUAL(drain(p, NULL, &err, &n, NULL), AS_EFORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a recognised"));
    tu_rm(p);
    p = tu_write_tmp(".zst", "");
    CU_ASSERT_EQUAL(drain(p, NULL, &err, &n, NULL), AS_EFORMAT);
    tu_rm(p);
    p = write_zstd_text(".zst", "\x01\x02\x03 binary junk");
    CU_ASSERT_EQUAL(drain(p, NULL, &err, &n, NULL), AS_EFORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "zstd-compressed"));
    tu_rm(p);
    /* a zstd magic followed by junk: corrupt zstd, not "unrecognised" */
    static const uint8_t junk[] = {0x28, 0xB5, 0x2F, 0xFD, 0xFF, 0xFF, 0xFF, 0xFF, 0, 1, 2, 3};
    p = write_file(".bin", junk, sizeof junk);
    CU_ASSERT_EQUAL(drain(p, NULL, &err, &n, NULL), AS_ECORRUPT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "zstd"));
    tu_rm(p);
}

static void reader_unreadable(void)
{
    as_trace_error err;
    uint64_t n;
    CU_ASSERT_EQUAL(drain("/nonexistent/allocsim/trace.zst", NULL, &err, &n, NULL), AS_EIO);
    CU_ASSERT_STRING_EQUAL(err.path, "/nonexistent/allocsim/trace.zst");
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "No such file"));
    CU_ASSERT_EQUAL(drain("/tmp", NULL, &err, &n, NULL), AS_EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "directory"));
    /* writing where it cannot */
    as_trace_writer *w;
    CU_ASSERT_EQUAL(as_trace_writer_open("/nonexistent/x.zst", AS_FMT_NATIVE, NULL, &w, &err),
                    AS_EIO);
    CU_ASSERT_EQUAL(as_trace_writer_open("/tmp/x", AS_FMT_TORCH_PICKLE, NULL, &w, &err), AS_EUSAGE);
}

static void reader_writer_validates(void)
{
    const char *p = tu_tmp(".zst");
    as_trace_writer *w;
    as_trace_error err;
    CU_ASSERT_EQUAL_FATAL(as_trace_writer_open(p, AS_FMT_NATIVE, NULL, &w, &err), 0);
    as_event a = {.op = AS_OP_ALLOC, .id = 0, .size = 10, .time_us = AS_TIME_NONE};
    as_event f = {.op = AS_OP_FREE, .id = 0, .time_us = AS_TIME_NONE};
    CU_ASSERT_EQUAL(as_trace_write(w, &a), 0);
    CU_ASSERT_EQUAL(as_trace_write(w, &f), 0);
    CU_ASSERT_EQUAL(as_trace_write(w, &f), AS_EINVAL); /* double free */
    CU_ASSERT_EQUAL(as_trace_write(w, &a), AS_EINVAL); /* sticky */
    CU_ASSERT_PTR_NOT_NULL(as_trace_writer_error(w));
    CU_ASSERT_EQUAL(as_trace_writer_error(w)->event, 2);
    CU_ASSERT_EQUAL(as_trace_writer_close(w, &err), AS_EINVAL);
    CU_ASSERT_EQUAL(err.event, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "double free"));
    /* convert refuses to overwrite its input */
    const char *t = tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 1\n");
    CU_ASSERT_EQUAL(as_trace_convert(t, t, AS_FMT_NATIVE, NULL, NULL, NULL, &err), AS_EUSAGE);
    uint64_t n = 0;
    CU_ASSERT_EQUAL(drain(t, NULL, &err, &n, NULL), AS_TRACE_EOF); /* input untouched */
    CU_ASSERT_EQUAL(n, 1);
    /* and a failed conversion leaves no partial output */
    const char *bad = tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 1\nfree 9\n");
    const char *out = tu_tmp(".zst");
    CU_ASSERT_EQUAL(as_trace_convert(bad, out, AS_FMT_NATIVE, NULL, NULL, NULL, &err), AS_EINVAL);
    CU_ASSERT_EQUAL(err.line, 3);
    FILE *fo = fopen(out, "rb");
    CU_ASSERT_PTR_NULL(fo);
    if (fo)
        fclose(fo);
    /* a full disk: the write error names the output */
    FILE *full = fopen("/dev/full", "wb");
    if (full) {
        fclose(full);
        CU_ASSERT_EQUAL(as_trace_convert(t, "/dev/full", AS_FMT_TEXT, NULL, NULL, NULL, &err),
                        AS_EIO);
        CU_ASSERT_STRING_EQUAL(err.path, "/dev/full");
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "write failed"));
    }
    tu_rm(p);
    tu_rm(t);
    tu_rm(bad);
}

/* A source wrapped with as_trace_reader_from_source: a counter-driven generator. */
typedef struct gen_st {
    uint64_t i, n;
} gen_st;

static int gen_next(void *st, as_event *ev, as_trace_error *err)
{
    (void)err;
    gen_st *g = st;
    if (g->i == g->n)
        return AS_TRACE_EOF;
    uint64_t k = g->i++;
    memset(ev, 0, sizeof *ev);
    ev->time_us = AS_TIME_NONE;
    ev->op = k % 2 ? AS_OP_FREE : AS_OP_ALLOC;
    ev->id = k / 2;
    ev->size = ev->op == AS_OP_ALLOC ? 100 + k : 0;
    if (k == 7)
        ev->id = 99; /* a bug in the generator: a free of an unknown id */
    return 0;
}

static void gen_close(void *st)
{
    free(st);
}

static const as_source_ops gen_ops = {
    .name = "test-gen", .fmt = AS_FMT_UNKNOWN, .next = gen_next, .close = gen_close};

static void reader_from_source(void)
{
    gen_st *g = calloc(1, sizeof *g);
    g->n = 100;
    as_meta m = {0};
    as_meta_set(&m, "source", "gen");
    as_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(as_trace_reader_from_source(&gen_ops, g, &m, "gen:test", &r), 0);
    as_meta_free(&m); /* copied */
    CU_ASSERT_STRING_EQUAL(as_meta_get(as_trace_reader_meta(r), "source"), "gen");
    as_event evs[16];
    size_t n;
    CU_ASSERT_EQUAL(as_trace_next_batch(r, evs, 16, &n), 0);
    CU_ASSERT_EQUAL(n, 7); /* the 8th is invalid: the 7 before it come first */
    CU_ASSERT_EQUAL(evs[5].op, AS_OP_FREE);
    CU_ASSERT_EQUAL(evs[5].size, 104); /* filled from the allocation */
    CU_ASSERT_EQUAL(as_trace_next_batch(r, evs, 16, &n), AS_EINVAL);
    CU_ASSERT_EQUAL(n, 0);
    const as_trace_error *e = as_trace_reader_error(r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(e->event, 7);
    CU_ASSERT_STRING_EQUAL(e->path, "gen:test");
    as_trace_close(r);
}

/* A source serving a prepared array of events. */
typedef struct arr_st {
    as_event *ev;
    size_t i, n;
} arr_st;

static int arr_next(void *st, as_event *ev, as_trace_error *err)
{
    (void)err;
    arr_st *a = st;
    if (a->i == a->n)
        return AS_TRACE_EOF;
    *ev = a->ev[a->i++];
    return 0;
}

static void arr_close(void *st)
{
    free(st);
}

static const as_source_ops arr_ops = {.name = "array", .next = arr_next, .close = arr_close};

/*
 * The live table under a model: ids freed young (in the ring), ids pinned for thousands
 * of allocations (moved to the hash map when their ring slot is reused), FREE_REQ before
 * and after that move, and at the end a double free and a FREE_REQ twice of long-evicted
 * ids. Every FREE must come back with its allocation's size and stream (size = id + 1,
 * stream = 7 * (id mod 4096)), and the live count must match the model's after every batch.
 */
static void reader_live_table_model(void)
{
    uint64_t seed = tu_seed("reader_live_table_model");
    size_t cap = 400000, n = 0, nlive = 0;
    as_event *ev = calloc(cap + 2, sizeof *ev);
    uint64_t *live = calloc(cap, sizeof *live), *until = calloc(cap, sizeof *until);
    uint8_t *req = calloc(cap, 1);
    uint64_t nalloc = 0;
    int64_t *live_after = calloc(cap + 2, sizeof *live_after);
    while (n < cap) {
        as_event *e = &ev[n];
        e->time_us = AS_TIME_NONE;
        if (nlive == 0 || tu_rand(&seed) % 2) {
            uint64_t id = nalloc++;
            *e = (as_event){.op = AS_OP_ALLOC,
                            .id = id,
                            .size = id + 1,
                            .stream = 7 * (id % 4096), /* within AS_MAX_STREAMS */
                            .time_us = AS_TIME_NONE};
            /* one in 50 lives for 2,000..20,000 more allocations; the rest die young */
            until[id] = tu_rand(&seed) % 50 == 0 ? id + 2000 + tu_rand(&seed) % 18000 : 0;
            live[nlive++] = id;
            if (until[id] && tu_rand(&seed) % 2 && n + 1 < cap) {
                /* a FREE_REQ while it is still in the ring (2 = requested early) */
                live_after[n++] = (int64_t)nlive;
                ev[n] = (as_event){.op = AS_OP_FREE_REQ, .id = id, .time_us = AS_TIME_NONE};
                req[id] = 2;
            }
        } else {
            size_t k = (size_t)(tu_rand(&seed) % nlive);
            uint64_t id = live[k];
            if (until[id] > nalloc) { /* pinned: maybe a FREE_REQ, never a FREE yet */
                if (req[id] || tu_rand(&seed) % 4) {
                    live_after[n] = (int64_t)nlive;
                    continue;
                }
                req[id] = 1;
                *e = (as_event){.op = AS_OP_FREE_REQ, .id = id, .time_us = AS_TIME_NONE};
            } else if (!req[id] && tu_rand(&seed) % 5 == 0) {
                req[id] = 1;
                *e = (as_event){.op = AS_OP_FREE_REQ, .id = id, .time_us = AS_TIME_NONE};
            } else {
                *e = (as_event){.op = AS_OP_FREE, .id = id, .time_us = AS_TIME_NONE};
                live[k] = live[--nlive];
            }
        }
        live_after[n++] = (int64_t)nlive;
    }
    /* an old id that was freed long ago (found by scanning for an early FREE) */
    uint64_t freed = UINT64_MAX;
    for (size_t i = 0; i < n && freed == UINT64_MAX; i++)
        if (ev[i].op == AS_OP_FREE && ev[i].id < 100)
            freed = ev[i].id;
    CU_ASSERT_FATAL(freed != UINT64_MAX);
    ev[n++] = (as_event){.op = AS_OP_FREE, .id = freed, .time_us = AS_TIME_NONE};

    arr_st *a = calloc(1, sizeof *a);
    a->ev = ev;
    a->n = n;
    as_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(as_trace_reader_from_source(&arr_ops, a, NULL, "model", &r), 0);
    as_event out[512];
    size_t got, total = 0, wrong = 0, count_wrong = 0;
    int rc;
    size_t max_table = 0;
    while ((rc = as_trace_next_batch(r, out, 512, &got)) == 0) {
        for (size_t i = 0; i < got; i++)
            if (out[i].op != AS_OP_ALLOC &&
                (out[i].size != out[i].id + 1 || out[i].stream != 7 * (out[i].id % 4096)))
                wrong++;
        total += got;
        uint64_t lv;
        size_t tb;
        as_trace_reader_live(r, &lv, &tb);
        if ((int64_t)lv != live_after[total - 1])
            count_wrong++;
        if (tb > max_table)
            max_table = tb;
    }
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(count_wrong, 0);
    CU_ASSERT_EQUAL(total, n - 1);
    CU_ASSERT_EQUAL(rc, AS_EINVAL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(as_trace_reader_error(r));
    CU_ASSERT_PTR_NOT_NULL(strstr(as_trace_reader_error(r)->msg, "double free"));
    /* the hash map was used: ids outlived the ring (of 1024 40-byte entries, beside a stack
     * of 1024 free slots that grows only when more than 1024 are live, in the hash too) */
    CU_ASSERT(max_table > 1024 * 40 + 1024 * 4);
    as_trace_close(r);

    /* Again, ending with a second FREE_REQ of a live id that got its first FREE_REQ and
     * was then moved out of the ring: its flag must have moved with it. */
    uint64_t twice = UINT64_MAX;
    for (size_t i = 0; i < nlive && twice == UINT64_MAX; i++)
        if (req[live[i]] == 2 && live[i] + 1024 < nalloc)
            twice = live[i];
    CU_ASSERT_FATAL(twice != UINT64_MAX);
    ev[n - 1] = (as_event){.op = AS_OP_FREE_REQ, .id = twice, .time_us = AS_TIME_NONE};
    a = calloc(1, sizeof *a);
    a->ev = ev;
    a->n = n;
    CU_ASSERT_EQUAL_FATAL(as_trace_reader_from_source(&arr_ops, a, NULL, "model", &r), 0);
    while ((rc = as_trace_next_batch(r, out, 512, &got)) == 0)
        ;
    CU_ASSERT_EQUAL(rc, AS_EINVAL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(as_trace_reader_error(r));
    CU_ASSERT_PTR_NOT_NULL(strstr(as_trace_reader_error(r)->msg, "requested twice"));
    as_trace_close(r);
    free(ev);
    free(live);
    free(until);
    free(req);
    free(live_after);
}

static void reader_batch_and_next_mix(void)
{
    /* 10 allocs, a mark, 10 frees: batches stop after the MARK; next and batch mix. */
    char text[1024] = "allocsim-text 1\n";
    for (int i = 0; i < 10; i++)
        sprintf(text + strlen(text), "alloc %d %d\n", i, i + 1);
    strcat(text, "mark half\n");
    for (int i = 0; i < 10; i++)
        sprintf(text + strlen(text), "free %d\n", i);
    const char *t = tu_write_tmp(".txt", text);
    const char *nat = tu_tmp(".zst");
    CU_ASSERT_EQUAL_FATAL(as_trace_convert(t, nat, AS_FMT_NATIVE, NULL, NULL, NULL, NULL), 0);
    const char *paths[2] = {t, nat};
    for (int k = 0; k < 2; k++) {
        as_trace_reader *r;
        CU_ASSERT_EQUAL_FATAL(as_trace_open(paths[k], NULL, &r, NULL), 0);
        as_event e, evs[64];
        size_t n;
        CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
        CU_ASSERT_EQUAL(as_trace_next_batch(r, evs, 64, &n), 0);
        CU_ASSERT_EQUAL(n, 10); /* allocs 1..9 and the mark, which ends the batch */
        CU_ASSERT_EQUAL(evs[9].op, AS_OP_MARK);
        CU_ASSERT_STRING_EQUAL(evs[9].label, "half");
        CU_ASSERT_EQUAL(as_trace_next_batch(r, evs, 3, &n), 0);
        CU_ASSERT_EQUAL(n, 3);
        CU_ASSERT(evs[0].op == AS_OP_FREE && evs[0].id == 0 && evs[0].size == 1);
        size_t total = 3;
        int rc;
        while ((rc = as_trace_next_batch(r, evs, 64, &n)) == 0)
            total += n;
        CU_ASSERT_EQUAL(rc, AS_TRACE_EOF);
        CU_ASSERT_EQUAL(total, 10);
        as_trace_close(r);
    }
    tu_rm(t);
    tu_rm(nat);
}

/* n events of a random trace (at most max_live <= 256 live at once) written in fmt to path. */
static void write_random(const char *path, as_trace_fmt fmt, size_t n, size_t max_live,
                         uint64_t seed)
{
    as_trace_writer *w;
    CU_ASSERT_EQUAL_FATAL(as_trace_writer_open(path, fmt, NULL, &w, NULL), 0);
    uint64_t next = 0, live[256];
    size_t nlive = 0;
    int64_t t = 0;
    for (size_t i = 0; i < n; i++) {
        as_event e = {.time_us = t += (int64_t)(tu_rand(&seed) % 50)};
        if (nlive < max_live && (nlive == 0 || tu_rand(&seed) % 2)) {
            e.op = AS_OP_ALLOC;
            e.id = next++;
            e.size = 1 + tu_rand(&seed) % (64u << 20);
            e.stream = tu_rand(&seed) % 3;
            live[nlive++] = e.id;
        } else {
            size_t k = (size_t)(tu_rand(&seed) % nlive);
            e.op = AS_OP_FREE;
            e.id = live[k];
            live[k] = live[--nlive];
        }
        CU_ASSERT_EQUAL_FATAL(as_trace_write(w, &e), 0);
    }
    CU_ASSERT_EQUAL_FATAL(as_trace_writer_close(w, NULL), 0);
}

/*
 * Bounded memory: a trace of several million events with at most 64 allocations live at
 * once. Two measurements, both independent of the trace length: the live table's own
 * capacity (exact), and the growth of the process heap (mallinfo2's in-use bytes) between
 * having read the first 1,000 events and the end, which covers every buffer the reader,
 * the decoder and libzstd allocate. With a table growing per event, 5 M events would add
 * well over 100 MB.
 */
static void reader_bounded_memory(void)
{
    const size_t N = 5000000, LIVE = 64;
    const char *p = tu_tmp(".zst");
    write_random(p, AS_FMT_NATIVE, N, LIVE, tu_seed("reader_bounded_memory"));

    as_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(p, NULL, &r, NULL), 0);
    as_event evs[1000];
    size_t got, total = 0, max_table = 0;
    uint64_t max_live = 0;
    int rc = 0;
    while (total < 1000 && (rc = as_trace_next_batch(r, evs, 1000 - total, &got)) == 0)
        total += got;
    struct mallinfo2 m0 = mallinfo2();
    while ((rc = as_trace_next_batch(r, evs, 1000, &got)) == 0) {
        total += got;
        uint64_t lv;
        size_t tb;
        as_trace_reader_live(r, &lv, &tb);
        if (tb > max_table)
            max_table = tb;
        if (lv > max_live)
            max_live = lv;
    }
    struct mallinfo2 m1 = mallinfo2();
    CU_ASSERT_EQUAL(rc, AS_TRACE_EOF);
    CU_ASSERT_EQUAL(total, N);
    CU_ASSERT(max_live <= LIVE);
    /* the ring's 1024 slots of 40 bytes, plus a hash of at most 128 slots (64 live at load
     * <= 1/2) for the few that outlive 1024 allocations, and the free live slots' stack at
     * its first 1024 */
    CU_ASSERT(max_table <= (1024 + 128) * 40 + 1024 * 4);
    long grown = (long)m1.uordblks - (long)m0.uordblks;
    fprintf(stderr, "  [%zu events: live table <= %zu bytes, heap grew %ld bytes]\n", total,
            max_table, grown);
    CU_ASSERT(grown < (1L << 20));
    as_trace_close(r);
    tu_rm(p);
}

static void reader_memory_and_stdin(void)
{
    static const char text[] = "allocsim-text 1\nalloc 0 5\nfree_req 0\nfree 0\n";
    as_trace_reader *r;
    as_trace_error err;
    as_event e;
    /* plain, from memory */
    CU_ASSERT_EQUAL_FATAL(as_trace_open_mem(text, strlen(text), "mem", NULL, &r, &err), 0);
    int n = 0;
    while (as_trace_next(r, &e) == 0)
        n++;
    CU_ASSERT_EQUAL(n, 3);
    as_trace_close(r);
    /* zstd in memory, whole and cut short */
    size_t cap = ZSTD_compressBound(sizeof text);
    char *z = malloc(cap);
    size_t zn = ZSTD_compress(z, cap, text, strlen(text), 3);
    CU_ASSERT_EQUAL_FATAL(as_trace_open_mem(z, zn, "memz", NULL, &r, &err), 0);
    n = 0;
    while (as_trace_next(r, &e) == 0)
        n++;
    CU_ASSERT_EQUAL(n, 3);
    as_trace_close(r);
    int rc = as_trace_open_mem(z, zn - 2, "memz", NULL, &r, &err);
    if (rc == 0) {
        while ((rc = as_trace_next(r, &e)) == 0)
            ;
        err = *as_trace_reader_error(r);
        as_trace_close(r);
    }
    CU_ASSERT_EQUAL(rc, AS_ECORRUPT);
    CU_ASSERT_STRING_EQUAL(err.path, "memz");
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "truncated zstd"));
    free(z);
    /* "-" is stdin */
    const char *p = tu_write_tmp(".txt", text);
    int saved = dup(0), fd = open(p, O_RDONLY);
    CU_ASSERT_FATAL(saved >= 0 && fd >= 0);
    dup2(fd, 0);
    close(fd);
    rc = as_trace_open("-", NULL, &r, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc == 0) {
        n = 0;
        while (as_trace_next(r, &e) == 0)
            n++;
        CU_ASSERT_EQUAL(n, 3);
        CU_ASSERT_STRING_EQUAL(as_trace_reader_error(r) ? "" : "ok", "ok");
        as_trace_close(r);
    }
    dup2(saved, 0);
    close(saved);
    tu_rm(p);
}

static void reader_names_and_meta(void)
{
    CU_ASSERT_EQUAL(as_trace_fmt_parse("text"), AS_FMT_TEXT);
    CU_ASSERT_EQUAL(as_trace_fmt_parse("NATIVE"), AS_FMT_NATIVE);
    CU_ASSERT_EQUAL(as_trace_fmt_parse("pickle"), AS_FMT_UNKNOWN);
    CU_ASSERT_EQUAL(as_trace_fmt_for_output("a/b.trace.txt"), AS_FMT_TEXT);
    CU_ASSERT_EQUAL(as_trace_fmt_for_output("b.TEXT"), AS_FMT_TEXT);
    CU_ASSERT_EQUAL(as_trace_fmt_for_output("b.zst"), AS_FMT_NATIVE);
    CU_ASSERT_EQUAL(as_trace_fmt_for_output("-"), AS_FMT_NATIVE);
    CU_ASSERT_STRING_EQUAL(as_trace_fmt_name(AS_FMT_TORCH_PICKLE), "torch-pickle");
    CU_ASSERT_STRING_EQUAL(as_trace_fmt_name((as_trace_fmt)99), "unknown");
    for (int c = AS_E_LAST; c <= AS_OK; c++) /* every code of the one error space has words */
        CU_ASSERT(strcmp(as_strerror(c), "unknown error") != 0);
    CU_ASSERT_STRING_EQUAL(as_strerror(AS_E_LAST - 1), "unknown error");
    CU_ASSERT_STRING_EQUAL(as_strerror(AS_TRACE_EOF), "unknown error"); /* a result */
    as_meta m = {0}, c = {0};
    CU_ASSERT_EQUAL(as_meta_set(&m, "a.b-c_1", "x"), 0);
    CU_ASSERT_EQUAL(as_meta_set(&m, "bad key", "x"), AS_EUSAGE);
    CU_ASSERT_EQUAL(as_meta_set(&m, "", "x"), AS_EUSAGE);
    CU_ASSERT_EQUAL(as_meta_set(&m, "z", "1"), 0);
    CU_ASSERT_EQUAL(as_meta_set(&m, "a.b-c_1", "y"), 0); /* replaces, keeps its place */
    CU_ASSERT_EQUAL(m.n, 2);
    CU_ASSERT_STRING_EQUAL(m.kv[0].value, "y");
    CU_ASSERT_PTR_NULL(as_meta_get(&m, "nope"));
    CU_ASSERT_EQUAL(as_meta_copy(&c, &m), 0);
    CU_ASSERT_STRING_EQUAL(as_meta_get(&c, "z"), "1");
    as_meta_free(&m);
    as_meta_free(&c);
    CU_ASSERT_EQUAL(m.n, 0);
}


/* zstd messages: an empty frame, a corrupt block named by its compressed range, a window
 * above the limit with what allows it. */
static void reader_zstd_messages(void)
{
    as_trace_error err;
    uint64_t n;
    /* "" compressed: a frame with no content */
    uint8_t z[64];
    size_t zn = ZSTD_compress(z, sizeof z, "", 0, 1);
    const char *p = write_file(".zst", z, zn);
    CU_ASSERT_EQUAL(drain(p, NULL, &err, &n, NULL), AS_EFORMAT);
    CU_ASSERT_STRING_EQUAL(err.msg, "empty input (a zstd stream with no content): not a trace");
    tu_rm(p);

    /* A byte flipped at 9000 of a real snapshot: the message names the block around it,
     * whose bounds the frame's own block headers give (6 = magic 4 + frame header 2). */
    FILE *f = fopen(tu_path("tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst"), "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static uint8_t buf[1 << 18];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    CU_ASSERT_FATAL(len > 9000);
    uint64_t bs = 6, be = 0;
    for (;;) { /* the first block ending past 9000 */
        uint32_t bh = buf[bs] | (uint32_t)buf[bs + 1] << 8 | (uint32_t)buf[bs + 2] << 16;
        be = bs + 3 + ((bh >> 1 & 3) == 1 ? 1 : bh >> 3);
        if (be > 9000 || (bh & 1))
            break;
        bs = be;
    }
    buf[9000] ^= 0xff;
    p = write_file(".zst", buf, len);
    CU_ASSERT_EQUAL(drain(p, NULL, &err, &n, NULL), AS_ECORRUPT);
    char want[96];
    snprintf(want, sizeof want, "in the block at compressed bytes %llu to %llu",
             (unsigned long long)bs, (unsigned long long)be);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
    if (!strstr(err.msg, want))
        fprintf(stderr, "\n  want '%s', got '%s'\n", want, err.msg);
    tu_rm(p);

    /* A frame asking for a 2 GiB window (what zstd --long=31 writes): refused at its header
     * with the default limit; accepted up to the header with the option raised. */
    static const uint8_t w31[] = {0x28, 0xB5, 0x2F, 0xFD, 0x00, (31 - 10) << 3, 0x11, 0, 0,
                                  0x80, 0x04};
    p = write_file(".zst", w31, sizeof w31);
    CU_ASSERT_EQUAL(drain(p, NULL, &err, &n, NULL), AS_ENOMEM);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "2048 MiB window"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "ALLOCSIM_ZSTD_WINDOW_LOG=31"));
    as_reader_opts o = {.zstd_window_log = 31};
    CU_ASSERT_NOT_EQUAL(drain(p, &o, &err, &n, NULL), 0);
    CU_ASSERT_PTR_NULL(strstr(err.msg, "window"));
    o.zstd_window_log = 40;
    CU_ASSERT_EQUAL(drain(p, &o, &err, &n, NULL), AS_EUSAGE);
    tu_rm(p);

    /* A frame asking for 1 TiB, more than zstd decodes at all: refused as not zstd's, with
     * its size, and no setting offered that could not allow it. */
    static const uint8_t w40[] = {0x28, 0xB5, 0x2F, 0xFD, 0x00, (40 - 10) << 3, 0x11, 0, 0,
                                  0x80, 0x04};
    p = write_file(".zst", w40, sizeof w40);
    CU_ASSERT_EQUAL(drain(p, NULL, &err, &n, NULL), AS_ECORRUPT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "1048576 MiB window"));
    CU_ASSERT_PTR_NULL(strstr(err.msg, "ALLOCSIM_ZSTD_WINDOW_LOG"));
    tu_rm(p);
}

/* The events of path ("-": stdin, made from path; never a one-call decode, as its size is
 * not known) into ev[0..cap), counted in *n; the last code, with err. When held is given,
 * the heap the open reader holds after the last event. */
static int events_of(const char *path, int as_stdin, as_event *ev, size_t cap, size_t *n,
                     as_trace_error *err, size_t *held)
{
    int saved = -1;
    if (as_stdin) {
        int fd = open(path, O_RDONLY);
        saved = dup(0);
        CU_ASSERT_FATAL(saved >= 0 && fd >= 0);
        dup2(fd, 0);
        close(fd);
    }
    struct mallinfo2 m0 = mallinfo2();
    as_trace_reader *r;
    *n = 0;
    int rc = as_trace_open(as_stdin ? "-" : path, NULL, &r, err);
    if (rc == 0) {
        as_event e;
        while ((rc = as_trace_next(r, &e)) == 0)
            if (*n < cap)
                ev[(*n)++] = e;
        if (rc < 0)
            *err = *as_trace_reader_error(r);
        if (held) {
            struct mallinfo2 m1 = mallinfo2();
            *held = (m1.uordblks + m1.hblkhd) - (m0.uordblks + m0.hblkhd);
        }
        as_trace_close(r);
    }
    if (as_stdin) {
        dup2(saved, 0);
        close(saved);
    }
    return rc;
}

/* A small zstd file is decoded in one call into a window of its blocks' size: the shipped
 * graph_probe.pickle.zst (2,135 bytes) names no content size and its frame asks for an 8 MiB
 * window, which zstd's streaming decoder allocates (then copies out of it) beside the
 * stream's 1 MiB window. Read to its end, the reader holds under 2 MiB of the heap (about
 * 10.5 MiB streamed), with the events the streamed path (stdin) gives. The same file with
 * a byte flipped, or cut short, fails with the message the streamed path gives. */
static void reader_zstd_small_one_call(void)
{
    const char *src = tu_path("tests/data/torch-2.11-h200-pools/graph_probe.pickle.zst");
    static as_event a[512], b[512];
    size_t na, nb, held = 0;
    as_trace_error err;
    CU_ASSERT_EQUAL(events_of(src, 0, a, 512, &na, &err, &held), AS_TRACE_EOF);
    CU_ASSERT_EQUAL(events_of(src, 1, b, 512, &nb, &err, NULL), AS_TRACE_EOF);
    CU_ASSERT(na > 100 && na < 512);
    CU_ASSERT(na == nb && memcmp(a, b, na * sizeof *a) == 0);
    CU_ASSERT(held < (2u << 20));
    if (held >= (2u << 20))
        fprintf(stderr, "\n  the reader holds %zu bytes\n", held);

    FILE *f = fopen(src, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static uint8_t z[4096];
    size_t zn = fread(z, 1, sizeof z, f);
    fclose(f);
    CU_ASSERT_FATAL(zn > 1000 && zn < sizeof z);
    for (int cut = 0; cut < 2; cut++) {
        static uint8_t bad[4096];
        memcpy(bad, z, zn);
        if (!cut)
            bad[zn / 2] ^= 0xff;
        const char *p = write_file(".zst", bad, cut ? zn - 2 : zn);
        as_trace_error e1, e2;
        int r1 = events_of(p, 0, a, 512, &na, &e1, NULL);
        int r2 = events_of(p, 1, b, 512, &nb, &e2, NULL);
        CU_ASSERT(r1 < 0);
        CU_ASSERT_EQUAL(r1, r2);
        CU_ASSERT_EQUAL(na, nb);
        CU_ASSERT_STRING_EQUAL(e1.msg, e2.msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(e1.msg, cut ? "truncated zstd" : "corrupt zstd"));
        tu_rm(p);
    }
}

/* The live slots (trace.h) of every ALLOC and FREE through the reader, against a model of
 * the rule: an ALLOC takes the slot freed most recently, or the next new one when none is
 * free; a FREE_REQ and a FREE carry their ALLOC's; a slot is never held twice at once, and
 * stays below the peak live count. Native (fast and general decode loops), text, and a
 * snapshot pickle with FREE_REQs. */
static void reader_live_slots(void)
{
    static const char *paths[] = {
        "traces/samples/transformer_gpt2.zst",
        "traces/samples/handwritten.txt",
        "tests/data/torch-2.11-h200-streams/streams2_default.pickle.zst",
        "tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst",
    };
    for (size_t k = 0; k < sizeof paths / sizeof *paths; k++) {
        as_trace_reader *r;
        CU_ASSERT_FATAL(as_trace_open(tu_path(paths[k]), NULL, &r, NULL) == 0);
        size_t cap = 1u << 17, nfree = 0, live = 0, peak = 0;
        uint32_t nslots = 0, *of = calloc(cap, sizeof *of), *stack = malloc(cap * sizeof *stack);
        uint64_t *held = calloc(cap, sizeof *held); /* slot -> id + 1, 0 = free */
        uint64_t bad = 0, frees = 0, reqs = 0;
        as_event ev[512];
        size_t n;
        int rc;
        while ((rc = as_trace_next_batch(r, ev, 512, &n)) == 0) {
            for (size_t i = 0; i < n; i++) {
                const as_event *x = &ev[i];
                if (x->op == AS_OP_ALLOC) {
                    CU_ASSERT_FATAL(x->id < cap);
                    uint32_t want = nfree ? stack[--nfree] : nslots++;
                    bad += x->slot != want;
                    peak = ++live > peak ? live : peak;
                    bad += x->slot >= peak;
                    held[x->slot] = x->id + 1;
                    of[x->id] = x->slot;
                } else if (x->op == AS_OP_FREE || x->op == AS_OP_FREE_REQ) {
                    bad += x->slot != of[x->id] || held[x->slot] != x->id + 1;
                    reqs += x->op == AS_OP_FREE_REQ;
                    if (x->op == AS_OP_FREE) {
                        held[x->slot] = 0;
                        stack[nfree++] = x->slot;
                        live--;
                        frees++;
                    }
                }
            }
        }
        CU_ASSERT_EQUAL(rc, AS_TRACE_EOF);
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT(frees > 0);
        CU_ASSERT(nslots == peak); /* fresh slots only when every one is held */
        if (k == 2)
            CU_ASSERT(reqs > 0); /* the streams trace frees through FREE_REQ */
        if (bad)
            fprintf(stderr, "\n  %s: %llu events break the slot rule\n", paths[k],
                    (unsigned long long)bad);
        free(of);
        free(stack);
        free(held);
        as_trace_close(r);
    }
}

/* A small zstd snapshot read in two passes (a first-pass buffer of 50 events forces the
 * second) is rewound after its one-call decode, which gave zstd's decoder context back
 * (instream.c, oneshot): the rewind makes a decoder again, and the events are those of one
 * pass. */
static void reader_zstd_one_call_rewound(void)
{
    const char *src = tu_path("tests/data/torch-2.11-h200-pools/graph_probe.pickle.zst");
    as_reader_opts one = {0}, two = {.max_pickle_buffered = 50};
    static as_event a[512], b[512];
    size_t na = 0, nb = 0;
    as_trace_reader *ra, *rb;
    as_trace_error err;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(src, &one, &ra, &err), 0);
    CU_ASSERT_EQUAL_FATAL(as_trace_open(src, &two, &rb, &err), 0);
    while (na < 512 && as_trace_next(ra, &a[na]) == 0)
        na++;
    while (nb < 512 && as_trace_next(rb, &b[nb]) == 0)
        nb++;
    CU_ASSERT(na > 100 && na < 512 && na == nb);
    for (size_t i = 0; i < na && i < nb; i++)
        CU_ASSERT(a[i].op == b[i].op && a[i].id == b[i].id && a[i].size == b[i].size &&
                  a[i].stream == b[i].stream && a[i].time_us == b[i].time_us);
    as_trace_close(ra);
    as_trace_close(rb);
}

/* ---- plain files read in place (instream.c's direct window, inmap.c) ----------------- */

/* A reading folded: every event's fields into one number, the count, how it ended. */
typedef struct folded {
    int rc;
    uint64_t n, h;
    as_trace_error err;
} folded;

static void fold(const char *path, const as_reader_opts *o, folded *f)
{
    memset(f, 0, sizeof *f);
    f->h = 1469598103934665603ull;
    as_trace_reader *r;
    if ((f->rc = as_trace_open(path, o, &r, &f->err)) < 0)
        return;
    as_event e;
    while ((f->rc = as_trace_next(r, &e)) == 0) {
        uint64_t v[7] = {e.op, e.id, e.size, e.stream, (uint64_t)e.time_us,
                         e.op == AS_OP_ALLOC ? e.site : 0, e.op == AS_OP_ALLOC ? e.pool : 0};
        for (int i = 0; i < 7; i++)
            f->h = (f->h ^ v[i]) * 1099511628211ull;
        f->n++;
    }
    if (f->rc < 0)
        f->err = *as_trace_reader_error(r);
    as_trace_close(r);
}

/* zpath decompressed into a fresh temporary file; its path. */
static const char *unzstd_file(const char *zpath, const char *suffix)
{
    size_t n = 0;
    char *b = tu_slurp_zst(zpath, &n);
    CU_ASSERT_PTR_NOT_NULL(b);
    const char *p = write_file(suffix, b ? b : "", n);
    free(b);
    return p;
}

/* A plain file of a MiB or more is read from a mapping of it, a window of some MiB at a time
 * (a snapshot's batches and a text line run across the windows' ends): the events are those
 * the same content gives through zstd, which copies it into a buffer; a snapshot read twice
 * (a first-pass buffer of 5,000 events) rewinds the mapping. */
static void reader_plain_mapped(void)
{
    const char *zs = tu_path("tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst");
    const char *ps = unzstd_file(zs, ".pickle");
    as_reader_opts twice = {.max_pickle_buffered = 5000};
    folded a, b, c;
    fold(zs, NULL, &a);
    fold(ps, NULL, &b);
    fold(ps, &twice, &c);
    CU_ASSERT(tu_file_size(ps) > (7L << 20)); /* several windows */
    CU_ASSERT_EQUAL(a.rc, AS_TRACE_EOF);
    CU_ASSERT_EQUAL(a.n, 75748); /* tests/data/torch-2.11-h200-llama/README.md */
    CU_ASSERT(b.rc == a.rc && b.n == a.n && b.h == a.h);
    CU_ASSERT(c.rc == a.rc && c.n == a.n && c.h == a.h);
    tu_rm(ps);

    const char *zn = tu_tmp(".zst"), *tx = tu_tmp(".txt");
    uint64_t seed = tu_seed("reader_plain_mapped");
    write_random(zn, AS_FMT_NATIVE, 600000, 200, seed);
    write_random(tx, AS_FMT_TEXT, 600000, 200, seed);
    const char *pn = unzstd_file(zn, ".native");
    fold(zn, NULL, &a);
    fold(pn, NULL, &b);
    fold(tx, NULL, &c);
    CU_ASSERT(tu_file_size(pn) > (2L << 20) && tu_file_size(tx) > (8L << 20));
    CU_ASSERT(a.rc == AS_TRACE_EOF && a.n == 600000);
    CU_ASSERT(b.rc == a.rc && b.n == a.n && b.h == a.h);
    CU_ASSERT(c.rc == a.rc && c.n == a.n && c.h == a.h);
    tu_rm(zn);
    tu_rm(tx);
    tu_rm(pn);
}

/* A mapped file cut shorter while it is read (another program rewriting it): the bytes
 * past the new end cannot be read from the mapping (the kernel's SIGBUS), so the read
 * ends with an error that says so, not with the signal; the events before are intact.
 * The file is opened and closed 100 times first: a map's guard slot (64 in all) is given
 * back when it closes, or this one would be read, not mapped. */
static void reader_plain_cut(void)
{
    const char *zn = tu_tmp(".zst");
    write_random(zn, AS_FMT_NATIVE, 600000, 200, tu_seed("reader_plain_cut"));
    const char *pn = unzstd_file(zn, ".native");
    long size = tu_file_size(pn);
    CU_ASSERT_FATAL(size > (2L << 20));
    as_trace_reader *r;
    as_trace_error err;
    for (int i = 0; i < 100; i++) {
        CU_ASSERT_EQUAL_FATAL(as_trace_open(pn, NULL, &r, &err), 0);
        as_trace_close(r);
    }
    CU_ASSERT_EQUAL_FATAL(as_trace_open(pn, NULL, &r, &err), 0);
    as_event e;
    uint64_t n = 0;
    int rc = 0;
    while (n < 1000 && (rc = as_trace_next(r, &e)) == 0)
        n++;
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(truncate(pn, size / 3), 0);
    while ((rc = as_trace_next(r, &e)) == 0)
        n++;
    CU_ASSERT(rc < 0 && rc != AS_TRACE_EOF);
    const as_trace_error *x = as_trace_reader_error(r);
    CU_ASSERT_EQUAL(x->code, AS_EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(x->msg, "changed while it was read"));
    CU_ASSERT(n > 1000 && n < 600000);
    as_trace_close(r);
    tu_rm(zn);
    tu_rm(pn);
}

CU_TestInfo test_reader[] = {
    {"zstd_messages", reader_zstd_messages},
    {"zstd_small_one_call", reader_zstd_small_one_call},
    {"zstd_one_call_rewound", reader_zstd_one_call_rewound},
    {"names_and_meta", reader_names_and_meta},
    {"memory_and_stdin", reader_memory_and_stdin},
    {"validation", reader_validation},
    {"lenient", reader_lenient},
    {"detect_by_content", reader_detect_by_content},
    {"unreadable", reader_unreadable},
    {"writer_validates", reader_writer_validates},
    {"from_source", reader_from_source},
    {"live_table_model", reader_live_table_model},
    {"batch_and_next_mix", reader_batch_and_next_mix},
    {"bounded_memory", reader_bounded_memory},
    {"live_slots", reader_live_slots},
    {"plain_mapped", reader_plain_mapped},
    {"plain_cut", reader_plain_cut},
    CU_TEST_INFO_NULL,
};
