/*
 * test_gen.c - the workload generators: knob parsing, determinism, streaming memory, the
 * statistics of the random baseline, and the closed-form peaks of the model generators
 * (computed here from the formulas in the generators' header comments, not from their
 * code).
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "util.h"

/* Everything a test wants to know about one generated stream. */
typedef struct gstats {
    uint64_t events, allocs, frees, marks, empties;
    uint64_t live, peak, peak_event, end_live_bytes, max_gen_live;
    uint64_t hash; /* FNV-1a over the event fields */
    int rc, bad;   /* bad: an id that is not an ordinal, or a free of a dead id */
} gstats;

static uint64_t fnv(uint64_t h, uint64_t x)
{
    for (int i = 0; i < 8; i++) {
        h ^= (x >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Per-id sizes to check frees; ids are ordinals so a flat array does (small traces). */
static gstats run_gen(const char *kind, int n, char **kv, uint64_t max_events)
{
    gstats s = { 0 };
    s.hash = 0xcbf29ce484222325ull;
    as_gen *g = NULL;
    as_trace_error err;
    s.rc = as_gen_create(kind, n, kv, &g, &err);
    if (s.rc) {
        fprintf(stderr, "  gen %s: %s\n", kind, err.msg);
        return s;
    }
    size_t cap = 1 << 16;
    uint64_t *sz = calloc(cap, sizeof *sz);
    as_event ev;
    while ((s.rc = as_gen_next(g, &ev)) == 0 && s.events < max_events) {
        s.events++;
        s.hash = fnv(fnv(fnv(fnv(s.hash, ev.op), ev.id), ev.size), ev.stream);
        if (as_gen_live(g) > s.max_gen_live)
            s.max_gen_live = as_gen_live(g);
        switch (ev.op) {
        case AS_OP_ALLOC:
            if (ev.id != s.allocs)
                s.bad = 1;
            if (ev.id >= cap) {
                size_t nc = cap * 2;
                uint64_t *nsz = realloc(sz, nc * sizeof *nsz);
                CU_ASSERT_PTR_NOT_NULL_FATAL(nsz);
                memset(nsz + cap, 0, (nc - cap) * sizeof *nsz);
                sz = nsz, cap = nc;
            }
            sz[ev.id] = ev.size;
            s.allocs++;
            s.live += ev.size;
            if (s.live > s.peak) {
                s.peak = s.live;
                s.peak_event = s.events - 1;
            }
            break;
        case AS_OP_FREE:
            if (ev.id >= s.allocs || sz[ev.id] == 0 || sz[ev.id] != ev.size)
                s.bad = 1;
            else
                s.live -= sz[ev.id], sz[ev.id] = 0;
            s.frees++;
            break;
        case AS_OP_MARK:
            s.marks++;
            s.hash = fnv(s.hash, strlen(ev.label));
            break;
        case AS_OP_EMPTY_CACHE:
            s.empties++;
            break;
        default:
            break;
        }
    }
    s.end_live_bytes = s.live;
    free(sz);
    as_gen_destroy(g);
    return s;
}

#define KV(...) ((char *[]){ __VA_ARGS__ }), (int)(sizeof((char *[]){ __VA_ARGS__ }) / sizeof(char *))

static gstats gen_kv(const char *kind, char **kv, int n) { return run_gen(kind, n, kv, UINT64_MAX); }

/* ---- knobs and framework ------------------------------------------------------------ */

static void gen_knob_errors(void)
{
    as_gen *g = (as_gen *)1;
    as_trace_error err;
    CU_ASSERT_EQUAL(as_gen_create("nosuch", 0, NULL, &g, &err), AS_TRACE_EUSAGE);
    CU_ASSERT_PTR_NULL(g);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "nosuch"));
    char *bad1[] = { "bogus=1" };
    CU_ASSERT_EQUAL(as_gen_create("random", 1, bad1, &g, &err), AS_TRACE_EUSAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bogus"));
    char *bad2[] = { "max=12Q" };
    CU_ASSERT_EQUAL(as_gen_create("random", 1, bad2, &g, &err), AS_TRACE_EUSAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "max=12Q"));
    char *bad3[] = { "life=weird" };
    CU_ASSERT_EQUAL(as_gen_create("random", 1, bad3, &g, &err), AS_TRACE_EUSAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "exp|uniform|fixed"));
    char *bad4[] = { "min=2M", "max=1M" };
    CU_ASSERT_EQUAL(as_gen_create("random", 2, bad4, &g, &err), AS_TRACE_EUSAGE);
    char *bad5[] = { "sizes=4096:x" };
    CU_ASSERT_EQUAL(as_gen_create("random", 1, bad5, &g, &err), AS_TRACE_EUSAGE);
    char *bad6[] = { "noequals" };
    CU_ASSERT_EQUAL(as_gen_create("random", 1, bad6, &g, &err), AS_TRACE_EUSAGE);
    char *bad7[] = { "sizes=1G:1", "cap=512M" };
    CU_ASSERT_EQUAL(as_gen_create("random", 2, bad7, &g, &err), AS_TRACE_EUSAGE);
}

static void gen_help_lists_every_knob(void)
{
    const char *all = as_gen_help(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(all);
    CU_ASSERT_PTR_NOT_NULL(strstr(all, "random"));
    CU_ASSERT_PTR_NULL(as_gen_help("nosuch"));
    const char *h = as_gen_help("random");
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    const char *names[] = { "allocs", "min", "max", "sizes", "align", "life", "life_mean",
                            "cap", "streams", "mark_every", "empty_cache_every", "drain",
                            "seed" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char pat[64];
        snprintf(pat, sizeof pat, "\n  %s ", names[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(h, pat));
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "default 64M bytes"));
}

static void gen_meta_has_knobs(void)
{
    as_gen *g;
    char *kv[] = { "allocs=10", "seed=7" };
    CU_ASSERT_EQUAL_FATAL(as_gen_create("random", 2, kv, &g, NULL), 0);
    const as_meta *m = as_gen_meta(g);
    int seen_seed = 0, seen_min = 0, seen_src = 0;
    for (size_t i = 0; i < m->n; i++) {
        seen_seed |= !strcmp(m->kv[i].key, "gen.seed") && !strcmp(m->kv[i].value, "7");
        seen_min |= !strcmp(m->kv[i].key, "gen.min") && !strcmp(m->kv[i].value, "512");
        seen_src |= !strcmp(m->kv[i].key, "source") && !strcmp(m->kv[i].value, "gen");
    }
    CU_ASSERT(seen_seed && seen_min && seen_src);
    as_gen_destroy(g);
}

/* ---- random --------------------------------------------------------------------------- */

static void gen_random_deterministic(void)
{
    uint64_t seed = tu_seed("gen_random_deterministic");
    char sd[64], sd2[64];
    snprintf(sd, sizeof sd, "seed=%llu", (unsigned long long)seed);
    snprintf(sd2, sizeof sd2, "seed=%llu", (unsigned long long)(seed + 1));
    gstats a = gen_kv("random", KV("allocs=20000", "streams=3", "mark_every=1000", sd));
    gstats b = gen_kv("random", KV("allocs=20000", "streams=3", "mark_every=1000", sd));
    gstats c = gen_kv("random", KV("allocs=20000", "streams=3", "mark_every=1000", sd2));
    CU_ASSERT_EQUAL(a.rc, AS_TRACE_EOF);
    CU_ASSERT_EQUAL(a.bad, 0);
    CU_ASSERT_EQUAL(a.hash, b.hash);
    CU_ASSERT_EQUAL(a.events, b.events);
    CU_ASSERT_NOT_EQUAL(a.hash, c.hash);
    /* drain=1: every allocation is freed, so events = 2 * allocs + marks */
    CU_ASSERT_EQUAL(a.allocs, 20000);
    CU_ASSERT_EQUAL(a.frees, 20000);
    CU_ASSERT_EQUAL(a.marks, 20);
    CU_ASSERT_EQUAL(a.events, 40020);
    CU_ASSERT_EQUAL(a.end_live_bytes, 0);
}

/* Fixed lifetimes of L events: the allocation made at event t dies at event t + L. The
 * first L events are allocations (nothing is due), the next L are their frees in order,
 * and so on: the live set saws between 0 and L, so with one size S the peak is L * S
 * (and the mean, by Little's law, L/2 * S). */
static void gen_random_fixed_life(void)
{
    gstats s = gen_kv("random", KV("allocs=10000", "sizes=1M", "life=fixed", "life_mean=100"));
    CU_ASSERT_EQUAL(s.bad, 0);
    CU_ASSERT_EQUAL(s.peak, 100ull << 20);
    CU_ASSERT_EQUAL(s.frees, 10000);
}

/* Histogram proportions within 4 standard deviations of the binomial expectation; with
 * an exponential life of mean m the average live count is about m/2. */
static void gen_random_histogram(void)
{
    uint64_t seed = tu_seed("gen_random_histogram");
    char sd[64];
    snprintf(sd, sizeof sd, "seed=%llu", (unsigned long long)seed);
    as_gen *g;
    char *kv[] = { "allocs=40000", "sizes=4096:0.5,1M:0.3,64M:0.2", "life_mean=200", sd };
    CU_ASSERT_EQUAL_FATAL(as_gen_create("random", 4, kv, &g, NULL), 0);
    as_event ev;
    uint64_t n4k = 0, n1m = 0, n64m = 0, other = 0, live = 0, live_sum = 0, samples = 0;
    while (as_gen_next(g, &ev) == 0) {
        if (ev.op == AS_OP_ALLOC) {
            n4k += ev.size == 4096;
            n1m += ev.size == (1u << 20);
            n64m += ev.size == (64u << 20);
            other += ev.size != 4096 && ev.size != (1u << 20) && ev.size != (64u << 20);
            live++;
            if (ev.id > 5000 && ev.id < 35000)
                live_sum += live, samples++;
        } else if (ev.op == AS_OP_FREE) {
            live--;
        }
    }
    as_gen_destroy(g);
    double n = 40000;
    CU_ASSERT_EQUAL(other, 0);
    CU_ASSERT(fabs(n4k - 0.5 * n) < 4 * sqrt(n * 0.25));
    CU_ASSERT(fabs(n1m - 0.3 * n) < 4 * sqrt(n * 0.21));
    CU_ASSERT(fabs(n64m - 0.2 * n) < 4 * sqrt(n * 0.16));
    double mean_live = (double)live_sum / (double)samples;
    CU_ASSERT(mean_live > 85 && mean_live < 115);
}

static void gen_random_loguniform_and_cap(void)
{
    as_gen *g;
    char *kv[] = { "allocs=50000", "min=1K", "max=1M", "cap=64M", "life_mean=5000",
                   "align=256" };
    CU_ASSERT_EQUAL_FATAL(as_gen_create("random", 6, kv, &g, NULL), 0);
    as_event ev;
    uint64_t live = 0, peak = 0, below32k = 0, n = 0;
    int ok = 1;
    while (as_gen_next(g, &ev) == 0) {
        if (ev.op == AS_OP_ALLOC) {
            ok &= ev.size >= 1024 && ev.size <= (1u << 20) && ev.size % 256 == 0;
            below32k += ev.size <= 32768;
            n++;
            live += ev.size;
            if (live > peak)
                peak = live;
        } else if (ev.op == AS_OP_FREE) {
            live -= ev.size;
        }
    }
    as_gen_destroy(g);
    CU_ASSERT(ok);
    CU_ASSERT(peak <= (64u << 20));
    CU_ASSERT(peak > (60u << 20)); /* 2500 live of mean ~100 KiB would be ~250 MiB */
    /* log-uniform on [2^10, 2^20]: P(size <= 2^15) = 1/2 */
    CU_ASSERT(fabs((double)below32k / n - 0.5) < 0.02);
}

/* Streaming: 2 M events with a live set of ~50 must not keep more than the live set. */
static void gen_random_streaming(void)
{
    gstats s = run_gen("random", 2, (char *[]){ "allocs=1000000", "life_mean=100" },
                       UINT64_MAX);
    CU_ASSERT_EQUAL(s.events, 2000000);
    CU_ASSERT(s.max_gen_live < 2000);
    CU_ASSERT_EQUAL(s.bad, 0);
}

CU_TestInfo test_gen[] = {
    { "knob_errors", gen_knob_errors },
    { "help_lists_every_knob", gen_help_lists_every_knob },
    { "meta_has_knobs", gen_meta_has_knobs },
    { "random_deterministic", gen_random_deterministic },
    { "random_fixed_life", gen_random_fixed_life },
    { "random_histogram", gen_random_histogram },
    { "random_loguniform_and_cap", gen_random_loguniform_and_cap },
    { "random_streaming", gen_random_streaming },
    CU_TEST_INFO_NULL,
};
