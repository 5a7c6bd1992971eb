/*
 * test_curve.c - curve mode (sim/curve.c) against one run per capacity: on every shared
 * trace of the repository (the real snapshots, the replay key's, the samples and the
 * pathological ones), for torch's main settings and the other policies, every field of
 * every run's result is identical (the host timings aside, which a curve reports as 0).
 *
 * The grid is coarse to keep the test short, but in pairs of neighbouring 2 MiB steps
 * (c, c + 2 MiB) from 64 MiB under the peak requested up to the uncapped peak reserved,
 * so the curve splits both across wide gaps and between adjacent capacities.
 */
#include <CUnit/CUnit.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curve.h"
#include "engine.h"
#include "policy.h"
#include "trace.h"
#include "util.h"

#define MiB (1ull << 20)
#define PAIRS 6

static const char *const patterns[] = {
    "replay/data/*.pickle.zst",  "tests/data/*.pickle.zst",
    "tests/data/*/*.pickle.zst", "tests/data/*.zst",
    "traces/samples/*.zst",      "traces/samples/*.csv",
    "traces/samples/*.txt",      "traces/samples/pathological/*.zst",
};

static const char *const specs[] = {
    "torch",
    "torch,expandable=true",
    "torch,maxsplit=128",
    "torch,gc=0.8",
    "torch,roundup=4",
    "bestfit",
    "segfit",
    "buddy",
    "bfc",
};

/* Every field but the host timings; 0 when equal, else the field's name is printed. */
static int same(const as_run_result *a, const as_run_result *b)
{
#define U(f)                                                                                       \
    if (a->f != b->f) {                                                                            \
        fprintf(stderr, "  %s: %llu vs %llu\n", #f, (unsigned long long)a->f,                      \
                (unsigned long long)b->f);                                                         \
        return 1;                                                                                  \
    }
#define D(f)                                                                                       \
    if (memcmp(&a->f, &b->f, sizeof a->f)) {                                                       \
        fprintf(stderr, "  %s: %.17g vs %.17g\n", #f, a->f, b->f);                                 \
        return 1;                                                                                  \
    }
    if (strcmp(a->policy, b->policy) || strcmp(a->spec, b->spec))
        return 1;
    U(capacity)
    U(completed) U(oom_event) U(oom_alloc) U(oom_size) U(oom_reserved) U(oom_allocated)
        U(oom_requested) U(ooms) U(events) U(allocs) U(peak_requested) U(peak_allocated)
            U(peak_reserved) U(final_reserved) D(fragmentation) U(waste) D(max_ext_frag)
                U(device_reserves) U(device_releases) U(device_refusals) D(device_time_s) U(retries)
                    U(oom_free_bytes) U(oom_largest_free) U(peak_reserved_event) U(final_allocated)
                        U(final_requested) U(peak_pending) U(oom_pending) U(finished)
#undef U
#undef D
                            return 0;
}

/* The decoded events of path (MARK labels dropped), their slots the reader's; NULL on a
 * decode error. */
static as_event *load(const char *path, size_t *n)
{
    as_trace_reader *rd;
    as_trace_error err;
    if (as_trace_open(path, NULL, &rd, &err))
        return NULL;
    size_t cap = 1024;
    as_event *ev = malloc(cap * sizeof *ev);
    *n = 0;
    int rc = 0;
    while (ev && rc == 0) {
        if (*n == cap) {
            as_event *ne = realloc(ev, 2 * cap * sizeof *ev);
            if (!ne) {
                free(ev);
                ev = NULL;
                break;
            }
            ev = ne;
            cap *= 2;
        }
        size_t got = 0;
        rc = as_trace_next_batch(rd, ev + *n, cap - *n, &got);
        for (size_t i = 0; i < got; i++)
            if (ev[*n + i].op == AS_OP_MARK) /* an ALLOC's pool and slot share the field */
                ev[*n + i].label = NULL;
        *n += got;
    }
    as_trace_close(rd);
    if (rc != AS_TRACE_EOF) {
        free(ev);
        return NULL;
    }
    return ev;
}

/* One engine over evs with a run per capacity (caps[0] == AS_CAPACITY_NONE allowed);
 * copies the results. Returns 0 or the engine's code. */
static int passes(const as_policy_spec *sp, const as_event *evs, size_t nev, const uint64_t *caps,
                  size_t n, as_run_result *out, as_trace_summary *sum)
{
    as_engine_opts eo = {.threads = 1};
    as_engine *e;
    int rc = as_engine_create(&eo, &e);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = as_engine_add_run(e, sp, caps[i]) < 0;
    if (rc == 0)
        rc = as_engine_run_events(e, evs, nev, NULL);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        out[i] = *as_engine_result(e, (unsigned)i);
        out[i].wall_s = out[i].cpu_s = out[i].events_per_second = 0;
    }
    if (rc == 0 && sum)
        *sum = *as_engine_summary(e);
    as_engine_destroy(e);
    return rc;
}

/* The pairs grid from 64 MiB under peak requested to the uncapped peak reserved. */
static size_t grid_of(uint64_t req, uint64_t res, uint64_t *grid)
{
    uint64_t lo = (req + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
    lo = lo > 66 * MiB ? lo - 64 * MiB : 2 * MiB;
    uint64_t hi = (res + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
    if (hi < lo)
        hi = lo;
    uint64_t span = (hi - lo) / (2 * MiB);
    size_t n = 0;
    for (unsigned k = 0; k < PAIRS; k++) {
        uint64_t c = lo + span * k / (PAIRS - 1) * (2 * MiB);
        if (n && grid[n - 1] >= c)
            continue;
        grid[n++] = c;
        grid[n++] = c + 2 * MiB;
    }
    return n;
}

static void curve_equals_passes(void)
{
    unsigned traces = 0, runs = 0, differ = 0;
    for (size_t p = 0; p < sizeof patterns / sizeof *patterns; p++) {
        glob_t g;
        char pat[1200];
        snprintf(pat, sizeof pat, "%s/%s", tu_path("."), patterns[p]);
        if (glob(pat, 0, NULL, &g))
            continue;
        for (size_t t = 0; t < g.gl_pathc; t++) {
            size_t nev;
            as_event *evs = load(g.gl_pathv[t], &nev);
            if (!evs) /* a trace made to be refused (pathological decode errors) */
                continue;
            traces++;
            for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
                as_policy_spec sp;
                char why[300];
                CU_ASSERT_FATAL(as_policy_spec_parse(specs[s], &sp, why, sizeof why) == 0);
                const uint64_t none = AS_CAPACITY_NONE;
                as_run_result up, want[2 * PAIRS], got[2 * PAIRS];
                as_trace_summary sum;
                CU_ASSERT_FATAL(passes(&sp, evs, nev, &none, 1, &up, &sum) == 0);
                uint64_t grid[2 * PAIRS];
                size_t n = grid_of(sum.peak_requested, up.peak_reserved, grid);
                CU_ASSERT_FATAL(passes(&sp, evs, nev, grid, n, want, NULL) == 0);
                as_curve_opts co = {.procs = 2, .pin = 1};
                int rc = as_curve_run(&sp, grid, n, evs, nev, &co, got, why, sizeof why);
                CU_ASSERT_EQUAL(rc, 0);
                for (size_t i = 0; rc == 0 && i < n; i++) {
                    runs++;
                    if (same(&want[i], &got[i])) {
                        differ++;
                        fprintf(stderr, "curve differs: %s, %s at %llu\n", g.gl_pathv[t], specs[s],
                                (unsigned long long)grid[i]);
                    }
                }
                as_policy_spec_free(&sp);
            }
            free(evs);
        }
        globfree(&g);
    }
    CU_ASSERT(traces >= 10); /* the repository's shared traces were found */
    CU_ASSERT_EQUAL(differ, 0);
    printf("\n  curve mode: %u runs over %u traces, %u differing\n", runs, traces, differ);
}

/* The pinned fallback: a policy reading the capacity as a number at init (bfc's fraction)
 * cannot share anything; without opts.pin the curve says so instead of forking per
 * capacity. */
static void curve_pinned(void)
{
    as_policy_spec sp;
    char why[300];
    CU_ASSERT_FATAL(as_policy_spec_parse("bfc", &sp, why, sizeof why) == 0);
    as_event ev[2] = {{.op = AS_OP_ALLOC, .id = 0, .size = 4 * MiB, .time_us = AS_TIME_NONE},
                      {.op = AS_OP_FREE, .id = 0, .size = 4 * MiB, .time_us = AS_TIME_NONE}};
    CU_ASSERT_FATAL(as_engine_number_slots(ev, 2) == 0);
    uint64_t grid[3] = {8 * MiB, 10 * MiB, 12 * MiB};
    as_run_result got[3];
    as_curve_opts co = {.procs = 1};
    CU_ASSERT_EQUAL(as_curve_run(&sp, grid, 3, ev, 2, &co, got, why, sizeof why), AS_CURVE_PINNED);
    co.pin = 1;
    CU_ASSERT_EQUAL(as_curve_run(&sp, grid, 3, ev, 2, &co, got, why, sizeof why), 0);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(got[i].capacity, grid[i]);
        CU_ASSERT(got[i].completed);
    }
    as_policy_spec_free(&sp);
}

/* The curve reads the events in place with the reader's slots (as_engine_run_slotted):
 * as_engine_number_slots gives events made by hand the same numbers, here over a real
 * trace whose slots are scrambled first (ids reused as they free, slots taken last in,
 * first out). */
static void number_slots(void)
{
    size_t n;
    as_event *want =
        load(tu_path("tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst"), &n);
    CU_ASSERT_FATAL(want != NULL);
    as_event *got = malloc(n * sizeof *got);
    CU_ASSERT_FATAL(got != NULL);
    memcpy(got, want, n * sizeof *got);
    size_t numbered = 0, differ = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i].op == AS_OP_ALLOC || got[i].op == AS_OP_FREE || got[i].op == AS_OP_FREE_REQ) {
            got[i].slot = (uint32_t)(i * 2654435761u);
            numbered++;
        }
    CU_ASSERT_EQUAL(as_engine_number_slots(got, n), 0);
    for (size_t i = 0; i < n; i++)
        differ += got[i].slot != want[i].slot;
    CU_ASSERT(numbered > 70000);
    CU_ASSERT_EQUAL(differ, 0);
    free(got);
    free(want);
}

CU_TestInfo test_curve[] = {
    {"equals_passes", curve_equals_passes},
    {"pinned", curve_pinned},
    {"number_slots", number_slots},
    CU_TEST_INFO_NULL,
};
