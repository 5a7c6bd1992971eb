/*
 * test_sites.c - call sites: the interned table (traces/sites.c), its place in the native
 * (version 2) and text (version 2) formats, lossless conversion both ways, the writer's
 * validation and the decoders' errors, and that version-1 files still read.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "util.h"

static const as_frame fr_conv[] = {
    {"/venv/lib/python3.12/site-packages/torch/nn/modules/conv.py", "_conv_forward", 548},
    {"/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", "_call_impl", 1790},
    {"src/train.py", "step", 42},
    {"src/train.py", "<module>", 181},
};
static const as_frame fr_odd[] = {
    {"dir with space/x #1.py", "at::native::foo(at::Tensor const&)", 0},
    {"", "", 7}, /* empty strings survive too */
    {"tab\there\\back", "t=5", 1},
};

static void sites_interning(void)
{
    as_sites *s;
    CU_ASSERT_EQUAL_FATAL(as_sites_new(&s), 0);
    uint32_t a, b, c, z;
    CU_ASSERT_EQUAL(as_sites_intern(s, fr_conv, 4, &a), 0);
    CU_ASSERT_EQUAL(as_sites_intern(s, fr_conv, 3, &b), 0); /* a prefix is another stack */
    CU_ASSERT_EQUAL(as_sites_intern(s, fr_conv, 4, &c), 0);
    CU_ASSERT_EQUAL(as_sites_intern(s, fr_conv, 0, &z), 0);
    CU_ASSERT_EQUAL(a, 1);
    CU_ASSERT_EQUAL(b, 2);
    CU_ASSERT_EQUAL(c, 1);
    CU_ASSERT_EQUAL(z, 0);
    CU_ASSERT_EQUAL(as_sites_count(s), 2);
    CU_ASSERT_EQUAL(as_sites_nframes(s), 4); /* frames once, shared by both sites */
    const uint32_t *ids;
    CU_ASSERT_EQUAL(as_sites_stack(s, 2, &ids), 3);
    as_frame f;
    CU_ASSERT_EQUAL(as_sites_frame(s, ids[2], &f), 0);
    CU_ASSERT_STRING_EQUAL(f.filename, "src/train.py");
    CU_ASSERT_STRING_EQUAL(f.name, "step");
    CU_ASSERT_EQUAL(f.line, 42);
    /* The display frame skips PyTorch's own Python files: train.py:42, depth 2. */
    CU_ASSERT_EQUAL(as_sites_user_frame(s, 1, &f), 2);
    CU_ASSERT_STRING_EQUAL(f.name, "step");
    CU_ASSERT_EQUAL(as_sites_user_frame(s, 0, &f), -1);
    /* Memory follows distinct content: 100,000 more internings of known stacks add nothing. */
    size_t mem = as_sites_memory(s);
    for (int i = 0; i < 100000; i++)
        as_sites_intern(s, fr_conv, 1 + (size_t)(i % 4), &a);
    CU_ASSERT_EQUAL(as_sites_count(s), 4);
    CU_ASSERT(as_sites_memory(s) < mem + 256);
    as_sites_free(s);
}

/* Writes a small trace with sites 1..3 in fmt; returns its path. */
static const char *write_sited(as_trace_fmt fmt, const char *suffix)
{
    as_sites *s;
    uint32_t k;
    CU_ASSERT_EQUAL_FATAL(as_sites_new(&s), 0);
    as_sites_intern(s, fr_conv, 4, &k);
    as_sites_intern(s, fr_odd, 3, &k);
    as_sites_intern(s, fr_conv + 2, 2, &k);
    as_meta m = {0};
    as_meta_set(&m, "source", "test");
    const char *p = tu_tmp(suffix);
    as_trace_writer *w;
    as_trace_error err;
    CU_ASSERT_EQUAL_FATAL(as_trace_writer_open_sites(p, fmt, &m, s, &w, &err), 0);
    as_sites_free(s); /* the writer keeps a copy */
    as_event evs[] = {
        {.op = AS_OP_ALLOC, .id = 0, .size = 512, .site = 1, .time_us = 10},
        {.op = AS_OP_ALLOC, .id = 1, .size = 4096, .site = 0, .time_us = AS_TIME_NONE},
        {.op = AS_OP_MARK, .label = "step 1", .time_us = 11},
        {.op = AS_OP_ALLOC, .id = 2, .size = 7, .stream = 9, .site = 3, .time_us = 12},
        {.op = AS_OP_FREE, .id = 0, .time_us = 13},
        {.op = AS_OP_ALLOC, .id = 3, .size = 1 << 20, .site = 2, .time_us = 14},
    };
    for (size_t i = 0; i < sizeof evs / sizeof *evs; i++)
        CU_ASSERT_EQUAL(as_trace_write(w, &evs[i]), 0);
    CU_ASSERT_EQUAL(as_trace_writer_close(w, &err), 0);
    as_meta_free(&m);
    return p;
}

/* Every site's frames and every ALLOC's site, as one string. */
static void describe(const char *path, char *out, size_t cap)
{
    as_trace_reader *r;
    as_trace_error err;
    size_t j = 0;
    out[0] = 0;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(path, NULL, &r, &err), 0);
    const as_sites *s = as_trace_reader_sites(r);
    for (uint32_t k = 1; k <= as_sites_count(s); k++) {
        const uint32_t *ids;
        size_t n = as_sites_stack(s, k, &ids);
        j += (size_t)snprintf(out + j, cap - j, "site %u:", k);
        for (size_t i = 0; i < n; i++) {
            as_frame f;
            as_sites_frame(s, ids[i], &f);
            j += (size_t)snprintf(out + j, cap - j, " [%s|%u|%s]", f.filename, f.line, f.name);
        }
        j += (size_t)snprintf(out + j, cap - j, "\n");
    }
    as_event e;
    while (as_trace_next(r, &e) == 0)
        j += (size_t)snprintf(out + j, cap - j, "%d:%llu:%u%s%s ", e.op, (unsigned long long)e.id,
                              e.site, e.op == AS_OP_MARK ? ":" : "",
                              e.op == AS_OP_MARK && e.label ? e.label : "");
    as_trace_close(r);
}

static void sites_roundtrip(void)
{
    char a[4096], b[4096], c[4096];
    const char *nat = write_sited(AS_FMT_NATIVE, ".zst");
    describe(nat, a, sizeof a);
    /* What was written, by construction. */
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "site 2: [dir with space/x #1.py|0|at::native::foo(at::Tensor "
                                     "const&)] [|7|] [tab\there\\back|1|t=5]\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "site 3: [src/train.py|42|step] [src/train.py|181|<module>]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "0:0:1 0:1:0 4:0:0:step 1 0:2:3 1:0:0 0:3:2 "));
    /* native -> text -> native keeps every site and every ALLOC's site. */
    const char *txt = tu_tmp(".txt"), *nat2 = tu_tmp(".zst");
    as_trace_error err;
    CU_ASSERT_EQUAL(as_trace_convert(nat, txt, AS_FMT_TEXT, NULL, NULL, NULL, &err), 0);
    describe(txt, b, sizeof b);
    CU_ASSERT_STRING_EQUAL(a, b);
    CU_ASSERT_EQUAL(as_trace_convert(txt, nat2, AS_FMT_NATIVE, NULL, NULL, NULL, &err), 0);
    describe(nat2, c, sizeof c);
    CU_ASSERT_STRING_EQUAL(a, c);
    /* The text form is version 2, frames then sites, site= on ALLOCs. */
    FILE *f = fopen(txt, "r");
    char t[4096];
    size_t n = fread(t, 1, sizeof t - 1, f);
    t[n] = 0;
    fclose(f);
    CU_ASSERT(strncmp(t, "allocsim-text 2\n", 16) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "\nframe 4 0 dir\\x20with\\x20space/x\\x20\\#1.py "
                                     "at::native::foo(at::Tensor\\x20const&)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "\nframe 5 7 \\- \\-\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "\nsite 1 0 1 2 3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "\nalloc 2 7 s=0x9 site=3 t=12\n"));
}

static void sites_writer_validates(void)
{
    as_sites *s;
    uint32_t k;
    as_sites_new(&s);
    as_sites_intern(s, fr_conv, 2, &k);
    for (int fmt = 0; fmt < 2; fmt++) {
        as_trace_writer *w;
        as_trace_error err;
        const char *p = tu_tmp(".out");
        CU_ASSERT_EQUAL_FATAL(
            as_trace_writer_open_sites(p, fmt ? AS_FMT_TEXT : AS_FMT_NATIVE, NULL, s, &w, &err), 0);
        as_event ok = {.op = AS_OP_ALLOC, .id = 0, .size = 1, .site = 1, .time_us = AS_TIME_NONE};
        as_event past = {.op = AS_OP_ALLOC, .id = 1, .size = 1, .site = 2, .time_us = AS_TIME_NONE};
        CU_ASSERT_EQUAL(as_trace_write(w, &ok), 0);
        CU_ASSERT_EQUAL(as_trace_write(w, &past), AS_EINVAL);
        CU_ASSERT_PTR_NOT_NULL(
            strstr(as_trace_writer_error(w)->msg, "past the site table (1 sites)"));
        CU_ASSERT_EQUAL(as_trace_writer_error(w)->event, 1);
        as_trace_writer_close(w, NULL);
        /* A writer without a table refuses any site; a FREE never carries one. */
        CU_ASSERT_EQUAL_FATAL(as_trace_writer_open(p, AS_FMT_NATIVE, NULL, &w, &err), 0);
        CU_ASSERT_EQUAL(as_trace_write(w, &ok), AS_EINVAL);
        as_trace_writer_close(w, NULL);
        CU_ASSERT_EQUAL_FATAL(as_trace_writer_open_sites(p, AS_FMT_NATIVE, NULL, s, &w, &err), 0);
        as_event fr = {.op = AS_OP_FREE, .id = 0, .site = 1, .time_us = AS_TIME_NONE};
        CU_ASSERT_EQUAL(as_trace_write(w, &ok), 0);
        CU_ASSERT_EQUAL(as_trace_write(w, &fr), AS_EINVAL);
        as_trace_writer_close(w, NULL);
    }
    as_sites_free(s);
}

static int text_err(const char *text, as_trace_error *err)
{
    as_trace_reader *r;
    int rc = as_trace_open(tu_write_tmp(".txt", text), NULL, &r, err);
    if (rc)
        return rc;
    as_event e;
    while ((rc = as_trace_next(r, &e)) == 0)
        ;
    if (rc < 0)
        *err = *as_trace_reader_error(r);
    as_trace_close(r);
    return rc == AS_TRACE_EOF ? 0 : rc;
}

static void sites_text_errors(void)
{
    as_trace_error err;
    static const char head[] = "allocsim-text 2\nframe 0 3 a.py f\nsite 1 0\n";
    char t[512];
    snprintf(t, sizeof t, "%salloc 0 8 site=1\n", head);
    CU_ASSERT_EQUAL(text_err(t, &err), 0);
    snprintf(t, sizeof t, "%salloc 0 8 site=2\n", head); /* offset: the 2 after site= */
    CU_ASSERT_EQUAL(text_err(t, &err), AS_ECORRUPT);
    CU_ASSERT_EQUAL(err.line, 4);
    CU_ASSERT_EQUAL(err.offset, strlen(head) + strlen("alloc 0 8 site="));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not in the site table (1 sites)"));
    CU_ASSERT_EQUAL(text_err("allocsim-text 2\nframe 1 3 a.py f\n", &err), AS_ECORRUPT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "out of order (expected 0)"));
    CU_ASSERT_EQUAL(text_err("allocsim-text 2\nframe 0 3 a.py f\nsite 1 1\n", &err), AS_ECORRUPT);
    CU_ASSERT_EQUAL(err.offset, strlen("allocsim-text 2\nframe 0 3 a.py f\nsite 1 "));
    CU_ASSERT_EQUAL(text_err("allocsim-text 2\nframe 0 3 a.py f\nsite 1 0\nsite 2 0\n", &err),
                    AS_ECORRUPT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "site 2 repeats site 1"));
    CU_ASSERT_EQUAL(text_err("allocsim-text 1\nframe 0 3 a.py f\n", &err), AS_ECORRUPT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "need text format version 2"));
    snprintf(t, sizeof t, "%salloc 0 8\nsite 2 0\n", head);
    CU_ASSERT_EQUAL(text_err(t, &err), AS_ECORRUPT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "after the first event"));
}

/* Native version 2, byte by byte: a hand-made file checks the layout FORMAT.md gives. */
typedef struct raw {
    uint8_t b[512];
    size_t n;
} raw;
static void rb(raw *r, int v)
{
    r->b[r->n++] = (uint8_t)v;
}
static void rs(raw *r, const char *s)
{
    rb(r, (int)strlen(s));
    memcpy(r->b + r->n, s, strlen(s));
    r->n += strlen(s);
}

static const char *write_raw(const raw *r)
{
    const char *p = tu_tmp(".bin");
    FILE *f = fopen(p, "wb");
    fwrite(r->b, 1, r->n, f);
    fclose(f);
    return p;
}

/* magic, v2, flags 0, no meta, 2 frames, 1 site of both, one per-allocation column (id
 * col); then one block of 2 ALLOCs of 64 bytes whose site column holds s0 s1; the end. */
static raw native_v2(int col, int s0, int s1, size_t *site_col)
{
    raw r = {.n = 0};
    static const uint8_t magic[8] = {0x8A, 'A', 'S', 'T', 0x0D, 0x0A, 0x1A, 0x0A};
    memcpy(r.b, magic, 8);
    r.n = 8;
    rb(&r, 2), rb(&r, 0), rb(&r, 0); /* version 2, flags, no metadata */
    rb(&r, 2);                       /* 2 frames: line, file, name */
    rb(&r, 10), rs(&r, "a.py"), rs(&r, "f");
    rb(&r, 20), rs(&r, "b.py"), rs(&r, "<module>");
    rb(&r, 1), rb(&r, 2), rb(&r, 0), rb(&r, 1); /* 1 site: frames 0, 1 */
    rb(&r, 1), rb(&r, col);                     /* 1 column */
    rb(&r, 2), rb(&r, 3), rb(&r, 0), rb(&r, 2); /* E, S, T, site column length */
    unsigned slot = (unsigned)((((64ull * 0x9E3779B97F4A7C15ull) >> 32) * 60) >> 32);
    rb(&r, 60 << 2), rb(&r, 64), rb(&r, (int)(slot << 2)); /* literal 64, then its slot */
    *site_col = r.n;
    rb(&r, s0), rb(&r, s1);
    rb(&r, 0), rb(&r, 2), rb(&r, 2); /* end: 2 events, 2 allocations */
    return r;
}

static void sites_native_bytes(void)
{
    size_t scol;
    raw r = native_v2(1, 1, 0, &scol);
    char d[1024];
    describe(write_raw(&r), d, sizeof d);
    CU_ASSERT_STRING_EQUAL(d, "site 1: [a.py|10|f] [b.py|20|<module>]\n0:0:1 0:1:0 ");
    /* A site past the table: the error names the byte of the site column. */
    r = native_v2(1, 1, 2, &scol);
    as_trace_reader *rd;
    as_trace_error err;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(write_raw(&r), NULL, &rd, &err), 0);
    as_event e;
    int rc;
    while ((rc = as_trace_next(rd, &e)) == 0)
        ;
    CU_ASSERT_EQUAL(rc, AS_ECORRUPT);
    CU_ASSERT_EQUAL(as_trace_reader_error(rd)->offset, scol + 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(as_trace_reader_error(rd)->msg, "site 2 past the site table"));
    as_trace_close(rd);
    /* An unknown per-allocation column (3: 1 is the site's, 2 the pool's) is refused at
     * open. */
    r = native_v2(3, 1, 0, &scol);
    CU_ASSERT_EQUAL(as_trace_open(write_raw(&r), NULL, &rd, &err), AS_EFORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "per-allocation column 3 is unknown"));
    CU_ASSERT_EQUAL(err.offset, scol - 8);
}

CU_TestInfo test_sites[] = {
    {"interning", sites_interning},
    {"roundtrip", sites_roundtrip},
    {"writer_validates", sites_writer_validates},
    {"text_errors", sites_text_errors},
    {"native_bytes", sites_native_bytes},
    CU_TEST_INFO_NULL,
};
