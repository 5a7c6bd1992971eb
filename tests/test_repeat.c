/*
 * test_repeat.c - `convert --repeat N` (traces/repeat.c): a small trace played three
 * times is checked event by event against the rule (ids follow on, times shift to 1 us
 * after the previous pass, what is live at a pass's end is freed there, the last pass ends
 * as the input does), a real snapshot repeated simulates to the same peak as one pass,
 * and bad uses are refused without touching an existing OUT.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "trace.h"
#include "util.h"

/* Pass: ALLOC 0 (t=10), ALLOC 1 (t=12), FREE_REQ 1 (t=15), FREE 0 (t=20); 1 stays live
 * (freed-requested, never FREE'd). */
static const char small_text[] = "allocsim-text 1\n"
                                 "alloc 0 100 s=7 t=10\n"
                                 "alloc 1 200 t=12\n"
                                 "free_req 1 t=15\n"
                                 "free 0 t=20\n";

typedef struct want {
    as_op op;
    uint64_t id;
    int64_t t;
} want;

static void repeat_small(void)
{
    const char *in = tu_write_tmp(".txt", small_text);
    const char *out = tu_tmp(".zst");
    as_trace_error err;
    uint64_t n = 0;
    int rc = as_trace_repeat(in, out, AS_FMT_NATIVE, 3, NULL, &n, &err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    /* Pass 2 starts 1 us after pass 1's last event (20 + the FREE of 1 at 20): shift 11. */
    static const want w[] = {
        {AS_OP_ALLOC, 0, 10},    {AS_OP_ALLOC, 1, 12},    {AS_OP_FREE_REQ, 1, 15},
        {AS_OP_FREE, 0, 20},     {AS_OP_FREE, 1, 20},     {AS_OP_ALLOC, 2, 21},
        {AS_OP_ALLOC, 3, 23},    {AS_OP_FREE_REQ, 3, 26}, {AS_OP_FREE, 2, 31},
        {AS_OP_FREE, 3, 31},     {AS_OP_ALLOC, 4, 32},    {AS_OP_ALLOC, 5, 34},
        {AS_OP_FREE_REQ, 5, 37}, {AS_OP_FREE, 4, 42},
    };
    size_t nw = sizeof w / sizeof w[0];
    CU_ASSERT_EQUAL(n, nw);
    as_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(out, NULL, &r, &err), 0);
    CU_ASSERT_STRING_EQUAL(as_meta_get(as_trace_reader_meta(r), "repeat"), "3");
    as_event e;
    size_t i = 0;
    while (as_trace_next(r, &e) == 0 && i < nw) {
        CU_ASSERT_EQUAL(e.op, w[i].op);
        CU_ASSERT_EQUAL(e.id, w[i].id);
        CU_ASSERT_EQUAL(e.time_us, w[i].t);
        if (e.op == AS_OP_ALLOC)
            CU_ASSERT_EQUAL(e.stream, (e.id % 2) ? 0u : 7u);
        i++;
    }
    CU_ASSERT_EQUAL(i, nw);
    uint64_t live;
    size_t bytes;
    as_trace_reader_live(r, &live, &bytes);
    CU_ASSERT_EQUAL(live, 1); /* the last pass's allocation 1 (id 5) */
    as_trace_close(r);
    tu_rm(out);
    tu_rm(in);
}

/* Each pass of a real snapshot starts with nothing of its own in use, and torch caches
 * what the pass before freed: three passes peak where one does. */
static void repeat_real_peak(void)
{
    char in[1024], out[1024], cmd[3000], a[8192], b[8192];
    /* Copies: tu_path and tu_tmp names share 4 rotating buffers. */
    snprintf(in, sizeof in, "%s", tu_path("tests/data/torch-2.11-h200/moe_like.pickle.zst"));
    snprintf(out, sizeof out, "%s", tu_tmp(".zst"));
    snprintf(cmd, sizeof cmd, "convert --repeat 3 %s %s", in, out);
    CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(cmd, NULL, 0, NULL, 0), 0);
    snprintf(cmd, sizeof cmd, "-f csv -p bestfit %s", in);
    CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(cmd, a, sizeof a, NULL, 0), 0);
    snprintf(cmd, sizeof cmd, "-f csv -p bestfit %s", out);
    CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(cmd, b, sizeof b, NULL, 0), 0);
    /* Columns 19-23 (events, allocs, peak_requested, peak_allocated, peak_reserved; see
     * sim/REPORT.md):
     * three times the events and allocations (plus one FREE per allocation live at the
     * end of the first two passes), the same peaks. */
    unsigned long long ea, aa, ra, la, va, eb, ab, rb, lb, vb;
    const char *fa = strchr(a, '\n'), *fb = strchr(b, '\n');
    CU_ASSERT_PTR_NOT_NULL_FATAL(fa);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fb);
    for (int k = 0; k < 18; k++) {
        fa = strchr(fa + 1, ',');
        fb = strchr(fb + 1, ',');
        CU_ASSERT_PTR_NOT_NULL_FATAL(fa);
        CU_ASSERT_PTR_NOT_NULL_FATAL(fb);
    }
    CU_ASSERT_EQUAL_FATAL(sscanf(fa, ",%llu,%llu,%llu,%llu,%llu", &ea, &aa, &ra, &la, &va), 5);
    CU_ASSERT_EQUAL_FATAL(sscanf(fb, ",%llu,%llu,%llu,%llu,%llu", &eb, &ab, &rb, &lb, &vb), 5);
    CU_ASSERT_EQUAL(ab, 3 * aa);
    CU_ASSERT(eb > 3 * ea && eb < 3 * ea + 2 * aa);
    CU_ASSERT_EQUAL(rb, ra);
    CU_ASSERT_EQUAL(lb, la);
    CU_ASSERT(vb >= va);
    tu_rm(out);
}

static void repeat_refusals(void)
{
    char in[1024], out[1024];
    snprintf(in, sizeof in, "%s", tu_write_tmp(".txt", small_text));
    snprintf(out, sizeof out, "%s", tu_write_tmp(".zst", "keep me"));
    as_trace_error err;
    CU_ASSERT_EQUAL(as_trace_repeat(in, in, AS_FMT_NATIVE, 2, NULL, NULL, &err), AS_EUSAGE);
    CU_ASSERT_EQUAL(as_trace_repeat("-", out, AS_FMT_NATIVE, 2, NULL, NULL, &err), AS_EUSAGE);
    CU_ASSERT_EQUAL(as_trace_repeat(in, out, AS_FMT_NATIVE, 0, NULL, NULL, &err), AS_EUSAGE);
    /* A bad input fails in its first pass; OUT keeps its old bytes. */
    const char *bad = tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 100\nfree 5\n");
    CU_ASSERT(as_trace_repeat(bad, out, AS_FMT_NATIVE, 2, NULL, NULL, &err) < 0);
    FILE *f = fopen(out, "rb");
    char buf[16] = {0};
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fread(buf, 1, sizeof buf - 1, f), 7);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(buf, "keep me");
    CU_ASSERT_EQUAL(tu_run_allocsim("convert --repeat 0 x y", NULL, 0, NULL, 0), 2);
    tu_rm(bad);
    tu_rm(out);
    tu_rm(in);
}

CU_TestInfo test_repeat[] = {
    {"small_three_passes", repeat_small},
    {"real_snapshot", repeat_real_peak},
    {"refusals", repeat_refusals},
    CU_TEST_INFO_NULL,
};
