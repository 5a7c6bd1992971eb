/*
 * test_text.c - the text format: parsing what a person writes by hand, the canonical form
 * the writer emits, escapes that make labels and metadata lossless, and errors that name
 * the line and byte.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "util.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char b[65536];
    size_t n = fread(b, 1, sizeof b - 1, f);
    b[n] = 0;
    fclose(f);
    return b;
}

static void text_parse_by_hand(void)
{
    const char *p = tu_write_tmp(".log", "allocsim-text 1   # made by hand\n"
                                         "\n"
                                         "# a comment\n"
                                         "meta source=hand # trailing comment\n"
                                         "meta device=H200\n"
                                         "alloc 0 2MiB s=0x7f00 t=100\n"
                                         "  alloc 1 1K t=-3\r\n"
                                         "alloc 2 3G s=17\n"
                                         "free_req 0 t=101\n"
                                         "mark step 1 # done\n"
                                         "mark epoch#2 end t=7\n"
                                         "free 0\n"
                                         "empty_cache t=200\n"
                                         "free 1");
    as_trace_reader *r;
    as_trace_error err;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(p, NULL, &r, &err), 0);
    CU_ASSERT_EQUAL(as_trace_reader_format(r), AS_FMT_TEXT);
    const as_meta *m = as_trace_reader_meta(r);
    CU_ASSERT_EQUAL(m->n, 2);
    CU_ASSERT_STRING_EQUAL(as_meta_get(m, "source"), "hand");
    CU_ASSERT_STRING_EQUAL(as_meta_get(m, "device"), "H200");
    as_event e;
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    CU_ASSERT(e.op == AS_OP_ALLOC && e.id == 0 && e.size == 2u << 20 && e.stream == 0x7f00 &&
              e.time_us == 100);
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    CU_ASSERT(e.op == AS_OP_ALLOC && e.id == 1 && e.size == 1024 && e.stream == 0 &&
              e.time_us == -3);
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    CU_ASSERT(e.size == 3ull << 30 && e.stream == 17 && e.time_us == AS_TIME_NONE);
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    CU_ASSERT(e.op == AS_OP_FREE_REQ && e.id == 0 && e.size == 2u << 20 && e.stream == 0x7f00);
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    CU_ASSERT(e.op == AS_OP_MARK && strcmp(e.label, "step 1") == 0);
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    /* '#' inside a word is not a comment; a trailing t= is the mark's time */
    CU_ASSERT(e.op == AS_OP_MARK && strcmp(e.label, "epoch#2 end") == 0 && e.time_us == 7);
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    CU_ASSERT(e.op == AS_OP_FREE && e.id == 0);
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    CU_ASSERT(e.op == AS_OP_EMPTY_CACHE && e.time_us == 200);
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0); /* last line without a newline */
    CU_ASSERT(e.op == AS_OP_FREE && e.id == 1 && e.size == 1024);
    CU_ASSERT_EQUAL(as_trace_next(r, &e), AS_TRACE_EOF);
    CU_ASSERT_EQUAL(as_trace_next(r, &e), AS_TRACE_EOF);
    as_trace_close(r);
    tu_rm(p);
}

static void text_bom_and_crlf(void)
{
    /* what a Windows editor saves: a UTF-8 BOM and CR LF line ends */
    const char *p = tu_write_tmp(".txt", "\xEF\xBB\xBF" "allocsim-text 1\r\n"
                                         "meta k=v\r\n"
                                         "alloc 0 1K\r\n"
                                         "mark two words\r\n"
                                         "free 0\r\n");
    as_trace_reader *r;
    as_trace_error err;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(p, NULL, &r, &err), 0);
    CU_ASSERT_STRING_EQUAL(as_meta_get(as_trace_reader_meta(r), "k"), "v");
    as_event e;
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    CU_ASSERT_EQUAL(e.size, 1024);
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.label, "two words");
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    CU_ASSERT_EQUAL(as_trace_next(r, &e), AS_TRACE_EOF);
    as_trace_close(r);
    tu_rm(p);
}

static void text_writer_canonical(void)
{
    as_meta m = {0};
    as_meta_set(&m, "source", "a#b\\c");
    const as_event ev[] = {
        {.op = AS_OP_ALLOC, .id = 0, .size = 2u << 20, .stream = 0x7f00, .time_us = 5},
        {.op = AS_OP_ALLOC, .id = 1, .size = 1, .time_us = AS_TIME_NONE},
        {.op = AS_OP_FREE_REQ, .id = 0, .time_us = -6},
        {.op = AS_OP_FREE, .id = 0, .time_us = AS_TIME_NONE},
        {.op = AS_OP_MARK, .label = " lead, trail ", .time_us = AS_TIME_NONE},
        {.op = AS_OP_MARK, .label = "x t=5", .time_us = 9},
        {.op = AS_OP_MARK, .label = "t=5", .time_us = AS_TIME_NONE},
        {.op = AS_OP_EMPTY_CACHE, .time_us = AS_TIME_NONE},
    };
    const char *p = tu_tmp(".txt");
    as_trace_writer *w;
    CU_ASSERT_EQUAL_FATAL(as_trace_writer_open(p, AS_FMT_TEXT, &m, &w, NULL), 0);
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
        CU_ASSERT_EQUAL(as_trace_write(w, &ev[i]), 0);
    CU_ASSERT_EQUAL(as_trace_writer_close(w, NULL), 0);
    CU_ASSERT_STRING_EQUAL(slurp(p), "allocsim-text 1\n"
                                     "meta source=a\\#b\\\\c\n"
                                     "alloc 0 2097152 s=0x7f00 t=5\n"
                                     "alloc 1 1\n"
                                     "free_req 0 t=-6\n"
                                     "free 0\n"
                                     "mark \\x20lead, trail\\x20\n"
                                     "mark x\\x20t=5 t=9\n"
                                     "mark \\x74=5\n"
                                     "empty_cache\n");
    /* and it reads back to the same events */
    as_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(p, NULL, &r, NULL), 0);
    CU_ASSERT_STRING_EQUAL(as_meta_get(as_trace_reader_meta(r), "source"), "a#b\\c");
    as_event e;
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        CU_ASSERT_EQUAL_FATAL(as_trace_next(r, &e), 0);
        CU_ASSERT_EQUAL(e.op, ev[i].op);
        CU_ASSERT_EQUAL(e.time_us, ev[i].time_us);
        if (e.op == AS_OP_MARK)
            CU_ASSERT_STRING_EQUAL(e.label, ev[i].label);
    }
    CU_ASSERT_EQUAL(as_trace_next(r, &e), AS_TRACE_EOF);
    as_trace_close(r);
    as_meta_free(&m);
    tu_rm(p);
}

/* Opens text and reads to the end; returns the final code with err filled. */
static int text_err(const char *text, as_trace_error *err)
{
    const char *p = tu_write_tmp(".txt", text);
    as_trace_reader *r;
    int rc = as_trace_open(p, NULL, &r, err);
    if (rc == 0) {
        as_event e;
        while ((rc = as_trace_next(r, &e)) == 0)
            ;
        if (rc < 0)
            *err = *as_trace_reader_error(r);
        as_trace_close(r);
    }
    tu_rm(p);
    return rc;
}

static void text_errors(void)
{
    as_trace_error err;
    /* Offsets are bytes from the start of the file to the offending token. */
    CU_ASSERT_EQUAL(text_err("allocsim-text 3\n", &err), AS_EFORMAT);
    CU_ASSERT_EQUAL(err.line, 1);
    CU_ASSERT_EQUAL(err.offset, 14);
    CU_ASSERT_EQUAL(text_err("allocsim-text x\n", &err), AS_EFORMAT);
    CU_ASSERT_EQUAL(err.offset, 14);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a number"));
    CU_ASSERT_EQUAL(text_err("allocsim-text 99999999999999999999999\n", &err), AS_EFORMAT);
    CU_ASSERT_EQUAL(err.offset, 14);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "version 99999999999999999999999 is out of range"));
    /* "allocsim-text 1\n" is 16 bytes; line 2 starts at 16, "alloc 0 " is 8 bytes */
    CU_ASSERT_EQUAL(text_err("allocsim-text 1\nalloc 0 12Q\n", &err), AS_ECORRUPT);
    CU_ASSERT_EQUAL(err.line, 2);
    CU_ASSERT_EQUAL(err.offset, 24);
    CU_ASSERT_EQUAL(err.event, 0);
    CU_ASSERT_EQUAL(text_err("allocsim-text 1\nalloc 0 1\nfrob 3\n", &err), AS_ECORRUPT);
    CU_ASSERT_EQUAL(err.line, 3);
    CU_ASSERT_EQUAL(err.offset, 26);
    CU_ASSERT_EQUAL(err.event, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "frob"));
    CU_ASSERT_EQUAL(text_err("allocsim-text 1\nalloc 0 1\nmeta a=b\n", &err), AS_ECORRUPT);
    CU_ASSERT_EQUAL(err.line, 3);
    CU_ASSERT_EQUAL(text_err("allocsim-text 1\nalloc 0 1 s=0xZZ\n", &err), AS_ECORRUPT);
    CU_ASSERT_EQUAL(err.offset, 28);
    CU_ASSERT_EQUAL(text_err("allocsim-text 1\nalloc 0 1 t=9223372036854775808\n", &err),
                    AS_ECORRUPT);
    CU_ASSERT_EQUAL(text_err("allocsim-text 1\nalloc 0 18446744073709551616\n", &err), AS_ECORRUPT);
    CU_ASSERT_EQUAL(text_err("allocsim-text 1\nalloc 0 16777216T\n", &err), AS_ECORRUPT);
    CU_ASSERT_EQUAL(text_err("allocsim-text 1\nalloc 0 1 x=1\n", &err), AS_ECORRUPT);
    CU_ASSERT_EQUAL(text_err("allocsim-text 1\nfree\n", &err), AS_ECORRUPT);
    CU_ASSERT_EQUAL(text_err("allocsim-text 1\nmeta bad key=1\n", &err), AS_ECORRUPT);
    CU_ASSERT_EQUAL(err.line, 2);
    CU_ASSERT_EQUAL(text_err("allocsim-text 1\nmark a\\q\n", &err), AS_ECORRUPT);
    CU_ASSERT_EQUAL(err.offset, 22);
    /* Semantic errors found by the reader still name the event's line and byte. */
    CU_ASSERT_EQUAL(text_err("allocsim-text 1\n# c\nalloc 0 1\n  free 1\n", &err), AS_EINVAL);
    CU_ASSERT_EQUAL(err.line, 4);
    CU_ASSERT_EQUAL(err.offset, 32);
    CU_ASSERT_EQUAL(err.event, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "unknown id"));
    /* A 300-byte label is refused (the limit is 255). */
    char big[400] = "allocsim-text 1\nmark ";
    memset(big + strlen(big), 'x', 300);
    CU_ASSERT_EQUAL(text_err(big, &err), AS_ECORRUPT);
}

static void text_escapes_lossless(void)
{
    /* Every byte 1..255 in a label and in a metadata value comes back unchanged. */
    char label[AS_MAX_LABEL + 1], value[300];
    for (int i = 0; i < AS_MAX_LABEL; i++)
        label[i] = (char)(1 + i);
    label[AS_MAX_LABEL] = 0;
    for (int i = 0; i < 255; i++)
        value[i] = (char)(255 - i);
    value[255] = 0;
    as_meta m = {0};
    as_meta_set(&m, "k", value);
    as_event ev = {.op = AS_OP_MARK, .label = label, .time_us = AS_TIME_NONE};
    const char *p = tu_tmp(".txt");
    as_trace_writer *w;
    CU_ASSERT_EQUAL_FATAL(as_trace_writer_open(p, AS_FMT_TEXT, &m, &w, NULL), 0);
    CU_ASSERT_EQUAL(as_trace_write(w, &ev), 0);
    CU_ASSERT_EQUAL(as_trace_writer_close(w, NULL), 0);
    as_trace_reader *r;
    as_trace_error err;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(p, NULL, &r, &err), 0);
    CU_ASSERT_STRING_EQUAL(as_meta_get(as_trace_reader_meta(r), "k"), value);
    as_event e;
    CU_ASSERT_EQUAL(as_trace_next(r, &e), 0);
    CU_ASSERT_STRING_EQUAL(e.label, label);
    as_trace_close(r);
    as_meta_free(&m);
    tu_rm(p);
}


/* The native format holds 65,536 distinct streams, the default stream 0 among them: a text
 * trace with 65,535 others converts and comes back the same; one more is refused by the
 * reader at its line, before any conversion starts (the RMM and pickle readers share the
 * check: it is the generic reader's). */
static void text_stream_limit(void)
{
    for (int extra = 0; extra <= 1; extra++) {
        size_t n = AS_MAX_STREAMS - 1 + (size_t)extra, cap = 40 * n + 64, len = 0;
        char *t = malloc(cap);
        len += (size_t)snprintf(t, cap, "allocsim-text 1\n");
        for (size_t i = 0; i < n; i++)
            len += (size_t)snprintf(t + len, cap - len, "alloc %zu 8 s=0x%zx\n", i, 0x1000 + i);
        const char *p = tu_write_tmp(".txt", t);
        const char *nat = tu_tmp(".zst"), *back = tu_tmp(".txt");
        as_trace_error err;
        int rc = as_trace_convert(p, nat, AS_FMT_NATIVE, NULL, NULL, NULL, &err);
        if (!extra) {
            CU_ASSERT_EQUAL(rc, 0);
            CU_ASSERT_EQUAL(as_trace_convert(nat, back, AS_FMT_TEXT, NULL, NULL, NULL, &err), 0);
            FILE *f = fopen(back, "rb");
            CU_ASSERT_PTR_NOT_NULL_FATAL(f);
            char *b = malloc(cap);
            size_t bn = fread(b, 1, cap, f);
            fclose(f);
            /* the canonical form is what was written */
            CU_ASSERT(bn == len && memcmp(b, t, len) == 0);
            free(b);
        } else {
            CU_ASSERT_EQUAL(rc, AS_ENOMEM);
            CU_ASSERT_EQUAL(err.line, n + 1); /* the 65,536th non-default stream */
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "more than 65536 distinct streams"));
        }
        tu_rm(p);
        free(t);
    }
}

CU_TestInfo test_text[] = {
    {"stream_limit", text_stream_limit},
    {"parse_by_hand", text_parse_by_hand},
    {"bom_and_crlf", text_bom_and_crlf},
    {"writer_canonical", text_writer_canonical},
    {"errors", text_errors},
    {"escapes_lossless", text_escapes_lossless},
    CU_TEST_INFO_NULL,
};
