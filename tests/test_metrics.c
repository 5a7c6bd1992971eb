/*
 * test_metrics.c - the metric definitions of sim/REPORT.md on small traces computed by hand,
 * with the fixture policy of engine_fixture.h (block = request rounded up to 512 bytes,
 * one segment of the block rounded up to 2 MiB each).
 */
#include <CUnit/CUnit.h>
#include <string.h>

#include "engine_fixture.h"

#define NEV(a) (sizeof(a) / sizeof((a)[0]))

/* After each event (tnc, unlimited):
 *   e0 ALLOC id0 1000 B     block 1024,  segment 2 MiB: req 1000,    alloc 1024,    res 2 MiB
 *   e1 ALLOC id1 3 MiB      block 3 MiB, segment 4 MiB: req 3146728, alloc 3146752, res 6 MiB
 *   e2 FREE id0                                          req 3145728, alloc 3145728, res 4 MiB
 *   e3 ALLOC id2 100 B      block 512,   segment 2 MiB: req 3145828, alloc 3146240, res 6 MiB
 *   e4 MARK
 *   e5 FREE id1                                          req 100,     alloc 512,     res 2 MiB
 *   e6 FREE id2                                          0, 0, 0
 * peak_requested 3146728 and peak_allocated 3146752 (e1); peak_reserved 6291456 (e1 first)
 * fragmentation = 1 - 3146752 / 6291456; waste = 6291456 - 3146728 = 3144728. */
static const as_event metrics_trace[] = {
    {AS_OP_ALLOC, 0, 0, 1000, 0, AS_TIME_NONE, {NULL}}, {AS_OP_ALLOC, 0, 1, 3 << 20, 0, AS_TIME_NONE, {NULL}},
    {AS_OP_FREE, 0, 0, 0, 0, AS_TIME_NONE, {NULL}},     {AS_OP_ALLOC, 0, 2, 100, 0, AS_TIME_NONE, {NULL}},
    {AS_OP_MARK, 0, 0, 0, 0, AS_TIME_NONE, {NULL}},     {AS_OP_FREE, 0, 1, 0, 0, AS_TIME_NONE, {NULL}},
    {AS_OP_FREE, 0, 2, 0, 0, AS_TIME_NONE, {NULL}},
};

static void test_peaks_frag_waste(void)
{
    as_policy_spec sp;
    tf_spec(&sp, 0, 0, 0);
    uint64_t cap = AS_CAPACITY_NONE;
    as_engine *e;
    as_engine_opts o = {.threads = 1, .check = 1};
    CU_ASSERT_EQUAL_FATAL(tf_run(metrics_trace, NEV(metrics_trace), &o, &sp, &cap, 1, &e), 0);
    const as_run_result *r = as_engine_result(e, 0);
    CU_ASSERT_TRUE(r->completed);
    CU_ASSERT_EQUAL(r->capacity, AS_CAPACITY_NONE);
    CU_ASSERT_EQUAL(r->events, 7);
    CU_ASSERT_EQUAL(r->allocs, 3);
    CU_ASSERT_EQUAL(r->peak_requested, 3146728);
    CU_ASSERT_EQUAL(r->peak_allocated, 3146752);
    CU_ASSERT_EQUAL(r->peak_reserved, 6291456);
    CU_ASSERT_EQUAL(r->peak_reserved_event, 1);
    CU_ASSERT_DOUBLE_EQUAL(r->fragmentation, 1.0 - 3146752.0 / 6291456.0, 1e-12);
    CU_ASSERT_EQUAL(r->waste, 3144728);
    CU_ASSERT_EQUAL(r->final_reserved, 0);
    CU_ASSERT_EQUAL(r->final_allocated, 0);
    CU_ASSERT_EQUAL(r->device_reserves, 3);
    CU_ASSERT_EQUAL(r->device_releases, 3);
    CU_ASSERT_EQUAL(r->oom_event, AS_NONE);
    CU_ASSERT_STRING_EQUAL(r->policy, "tf,cache=0");
    /* External fragmentation is sampled at each new reserved peak (e0, e1):
     *   e0: free inside reserved 2 MiB - 1024, all in one block: 0
     *   e1: free 2096128 (id0's segment) + 1 MiB (id1's): 1 - 2096128 / 3144704 */
    CU_ASSERT_DOUBLE_EQUAL(r->max_ext_frag, 1.0 - 2096128.0 / 3144704.0, 1e-12);
    const as_trace_summary *s = as_engine_summary(e);
    CU_ASSERT_EQUAL(s->events, 7);
    CU_ASSERT_EQUAL(s->allocs, 3);
    CU_ASSERT_EQUAL(s->frees, 3);
    CU_ASSERT_EQUAL(s->marks, 1);
    CU_ASSERT_EQUAL(s->peak_requested, 3146728);
    as_engine_destroy(e);
    tf_spec_free(&sp);
}

/* The cost model: reserve 1000 ns + 10 ns/MiB, release 500 ns flat. Segments reserved:
 * 2, 4, 2 MiB -> 3 * 1000 + 10 * 8 = 3080 ns; three releases 1500 ns; 4580 ns in all. */
static void test_device_time(void)
{
    as_policy_spec sp;
    tf_spec(&sp, 0, 0, 0);
    as_simdev_params p;
    as_simdev_default_params(&p);
    p.reserve = (as_cost){.fixed_ns = 1000, .ns_per_mib = 10};
    p.release = (as_cost){.fixed_ns = 500, .ns_per_mib = 0};
    uint64_t cap = AS_CAPACITY_NONE;
    as_engine *e;
    as_engine_opts o = {.threads = 1, .dev_params = &p};
    CU_ASSERT_EQUAL_FATAL(tf_run(metrics_trace, NEV(metrics_trace), &o, &sp, &cap, 1, &e), 0);
    CU_ASSERT_DOUBLE_EQUAL(as_engine_result(e, 0)->device_time_s, 4580e-9, 1e-15);
    as_engine_destroy(e);
    tf_spec_free(&sp);
}

/* At 4 MiB the 4 MiB segment of e1 does not fit next to id0's 2 MiB: OOM at event 1,
 * alloc 1, with reserved 2 MiB, allocated 1024, requested 1000, and 2096128 bytes free
 * inside reserved memory, all in one block. The OOM request was 3 MiB. */
static void test_oom_state(void)
{
    as_policy_spec sp;
    tf_spec(&sp, 0, 0, 0);
    uint64_t cap = 4 * TF_MIB;
    as_engine *e;
    as_engine_opts o = {.threads = 1, .check = 1};
    CU_ASSERT_EQUAL_FATAL(tf_run(metrics_trace, NEV(metrics_trace), &o, &sp, &cap, 1, &e), 0);
    const as_run_result *r = as_engine_result(e, 0);
    CU_ASSERT_FALSE(r->completed);
    CU_ASSERT_EQUAL(r->capacity, 4 * TF_MIB);
    CU_ASSERT_EQUAL(r->oom_event, 1);
    CU_ASSERT_EQUAL(r->oom_alloc, 1);
    CU_ASSERT_EQUAL(r->oom_size, 3 * TF_MIB);
    CU_ASSERT_EQUAL(r->oom_reserved, 2 * TF_MIB);
    CU_ASSERT_EQUAL(r->oom_allocated, 1024);
    CU_ASSERT_EQUAL(r->oom_requested, 1000);
    CU_ASSERT_EQUAL(r->oom_free_bytes, 2096128);
    CU_ASSERT_EQUAL(r->oom_largest_free, 2096128);
    /* Peaks stop at the OOM: only e0 ran. */
    CU_ASSERT_EQUAL(r->peak_reserved, 2 * TF_MIB);
    CU_ASSERT_EQUAL(r->peak_allocated, 1024);
    CU_ASSERT_EQUAL(r->device_refusals, 1);
    /* The trace summary still covers every event. */
    CU_ASSERT_EQUAL(as_engine_summary(e)->events, 7);
    as_engine_destroy(e);
    tf_spec_free(&sp);
}

/* Nothing reserved: fragmentation and waste are 0, not NaN. Streams are counted
 * distinctly, including the largest stream value. */
static void test_degenerate_and_streams(void)
{
    as_event t[] = {tf_op(AS_OP_MARK), tf_op(AS_OP_EMPTY_CACHE), tf_alloc(0, 10), tf_alloc(1, 10),
                    tf_alloc(2, 10),   tf_alloc(3, 10),          tf_free(3)};
    t[3].stream = 7;
    t[4].stream = UINT64_MAX;
    t[5].stream = 7;
    as_policy_spec sp;
    tf_spec(&sp, 0, 0, 0);
    uint64_t cap = AS_CAPACITY_NONE;
    as_engine *e;
    CU_ASSERT_EQUAL_FATAL(tf_run(t, 2, NULL, &sp, &cap, 1, &e), 0);
    const as_run_result *r = as_engine_result(e, 0);
    CU_ASSERT_TRUE(r->completed);
    CU_ASSERT_EQUAL(r->peak_reserved, 0);
    CU_ASSERT_DOUBLE_EQUAL(r->fragmentation, 0.0, 0);
    CU_ASSERT_EQUAL(r->waste, 0);
    CU_ASSERT_EQUAL(as_engine_summary(e)->empty_caches, 1);
    as_engine_destroy(e);

    CU_ASSERT_EQUAL_FATAL(tf_run(t, NEV(t), NULL, &sp, &cap, 1, &e), 0);
    const as_trace_summary *s = as_engine_summary(e);
    CU_ASSERT_EQUAL(s->streams, 3); /* 0, 7, UINT64_MAX */
    CU_ASSERT_EQUAL(s->live_at_end, 3);
    CU_ASSERT_EQUAL(s->peak_requested, 40);
    /* Four 512-byte blocks in 2 MiB segments: 1 - 2048 / 8 MiB. */
    CU_ASSERT_DOUBLE_EQUAL(as_engine_result(e, 0)->fragmentation, 1.0 - 2048.0 / (8 << 20), 1e-12);
    as_engine_destroy(e);
    tf_spec_free(&sp);
}

CU_TestInfo test_metrics[] = {
    {"peaks, fragmentation, waste, external fragmentation", test_peaks_frag_waste},
    {"modelled device time from the cost model", test_device_time},
    {"state at the OOM", test_oom_state},
    {"nothing reserved; distinct streams", test_degenerate_and_streams},
    CU_TEST_INFO_NULL,
};
