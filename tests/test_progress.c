/*
 * test_progress.c - the engine's stop flag and progress reports (engine.h on_runs, stop)
 * and the progress line's estimate (sim/progress.c): a stop after the first batch
 * returns AS_ENGINE_STOPPED with the runs that ended marked finished and the others not;
 * the reports count runs done and events handled exactly; the fraction done is the work
 * handled over the work handled plus what the runs still going have left.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "engine.h"
#include "progress.h"

#define N_ALLOC 20000 /* 40,000 events: about ten batches of 4096 */

typedef struct seen {
    volatile sig_atomic_t stop;
    int calls, stop_at;
    as_engine_progress last;
} seen;

static void on_runs(void *user, const as_engine_progress *p)
{
    seen *s = user;
    s->last = *p;
    if (++s->calls == s->stop_at)
        s->stop = 1;
}

/* "alloc i 1M, free i" N_ALLOC times: 1 MiB live at most, one 2 MiB segment under nocache,
 * which runs it whole at 4 MiB and fails at the first event at 1 KiB. */
static char *make_trace(size_t *len)
{
    size_t cap = 64 + (size_t)N_ALLOC * 40, k = 0;
    char *t = malloc(cap);
    k += (size_t)snprintf(t + k, cap - k, "allocsim-text 1\n");
    for (int i = 0; i < N_ALLOC; i++)
        k += (size_t)snprintf(t + k, cap - k, "alloc %d 1M\nfree %d\n", i, i);
    *len = k;
    return t;
}

static int run_engine(seen *s, const char *text, size_t len, as_engine **out)
{
    as_policy_spec spec;
    char why[200];
    static as_policy_spec kept;
    if (as_policy_spec_parse("nocache", &spec, why, sizeof why))
        return -1;
    as_policy_spec_free(&kept); /* the previous call's: the engine that borrowed it is gone */
    kept = spec;                /* borrowed by the engine: outlives it */
    as_engine_opts o = {.threads = 2, .on_runs = on_runs, .stop = &s->stop, .user = s};
    as_engine *e = NULL;
    as_trace_reader *rd = NULL;
    if (as_engine_create(&o, &e) || as_trace_open_mem(text, len, "mem", NULL, &rd, NULL))
        return -1;
    as_engine_add_run(e, &kept, 4ull << 20); /* fits: goes on to the end */
    as_engine_add_run(e, &kept, 1024);       /* OOM at event 0: ends at once */
    as_engine_add_run(e, &kept, 4ull << 20);
    as_trace_error err;
    int rc = as_engine_run(e, rd, &err);
    as_trace_close(rd);
    *out = e;
    return rc;
}

static void test_stop_after_first_batch(void)
{
    size_t len = 0;
    char *text = make_trace(&len);
    seen s = {.stop_at = 1};
    as_engine *e = NULL;
    int rc = run_engine(&s, text, len, &e);
    CU_ASSERT_EQUAL(rc, AS_ENGINE_STOPPED);
    CU_ASSERT_EQUAL(s.calls, 1);
    CU_ASSERT_EQUAL(s.last.runs, 3);
    CU_ASSERT_EQUAL(s.last.runs_done, 1); /* the 1 KiB run */
    /* Two runs handled every event of the batch, the failed one none (its OOM event is
     * not handled). */
    CU_ASSERT_EQUAL(s.last.run_events, 2 * s.last.events);
    CU_ASSERT_EQUAL(s.last.events, 4096); /* one batch */
    CU_ASSERT(s.last.decoded >= s.last.events && s.last.decoded < 2 * N_ALLOC);
    if (e) {
        CU_ASSERT_FALSE(as_engine_result(e, 0)->finished);
        CU_ASSERT_TRUE(as_engine_result(e, 1)->finished);
        CU_ASSERT_FALSE(as_engine_result(e, 1)->completed);
        CU_ASSERT_EQUAL(as_engine_result(e, 1)->oom_event, 0);
        CU_ASSERT_FALSE(as_engine_result(e, 2)->finished);
        CU_ASSERT(as_engine_result(e, 0)->events < 2 * N_ALLOC);
    }
    as_engine_destroy(e);

    /* No stop: every run finished, and the last report came after the last batch. */
    seen all = {.stop_at = -1};
    rc = run_engine(&all, text, len, &e);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(all.calls >= 2 * N_ALLOC / 4096);
    CU_ASSERT_EQUAL(all.last.events, 2 * N_ALLOC);
    CU_ASSERT_EQUAL(all.last.run_events, 4 * N_ALLOC);
    for (unsigned i = 0; e && i < 3; i++)
        CU_ASSERT_TRUE(as_engine_result(e, i)->finished);
    CU_ASSERT(e && as_engine_result(e, 0)->completed);
    as_engine_destroy(e);
    free(text);
}

/* The fraction done: handled / (handled + still going x events left). */
static void test_engine_fraction(void)
{
    /* 3 runs, 1 done after 10 events (handled 10), 2 at event 100 of 400. */
    as_engine_progress p = {
        .events = 100, .decoded = 100, .runs = 3, .runs_done = 1, .run_events = 210};
    double f = as_driver_engine_frac(&p, 400);
    CU_ASSERT_DOUBLE_EQUAL(f, 210.0 / (210.0 + 2 * 300.0), 1e-12);
    /* The length from the bytes read when it is unknown: a quarter read -> 400 events. */
    p.bytes_done = 250;
    p.bytes_total = 1000;
    CU_ASSERT_DOUBLE_EQUAL(as_driver_engine_frac(&p, 0), f, 1e-12);
    /* Nothing to go on: 0, not a guess. */
    p.bytes_total = 0;
    CU_ASSERT_DOUBLE_EQUAL(as_driver_engine_frac(&p, 0), 0, 0);
    /* Every run done: all the work is done. */
    as_engine_progress q = {
        .events = 100, .decoded = 100, .runs = 2, .runs_done = 2, .run_events = 30};
    CU_ASSERT_DOUBLE_EQUAL(as_driver_engine_frac(&q, 400), 1.0, 1e-12);
}

CU_TestInfo test_progress[] = {
    {"stop after the first batch: finished runs marked", test_stop_after_first_batch},
    {"fraction of the work done for the time left", test_engine_fraction},
    CU_TEST_INFO_NULL,
};
