/*
 * test_patho.c - the pathological traces that fuzz_patho found (traces/samples/
 * pathological/<name>.zst) replay to the ratio the search recorded in their metadata.
 *
 * For each file: the trace stays inside its setting (every size a multiple of patho.unit,
 * at most patho.n units, live bytes never above patho.M units); the engine, as `allocsim
 * run` drives it (default simulated device, no capacity), gives exactly the recorded
 * patho.peak_reserved and patho.peak_requested, so peak_reserved / peak_requested prints as
 * the recorded patho.ratio; and the allocsim binary's JSON report shows the same peaks.
 * The numbers are the search's, computed by fuzz/fuzz_patho.c over the policy directly;
 * this checks that the engine and the CLI agree with them, not the numbers themselves.
 */
#include <CUnit/CUnit.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "fuzz/patho.h"
#include "gen.h"
#include "policy.h"
#include "trace.h"
#include "util.h"

static const char *const samples[] = {
    "bestfit", "firstfit", "segfit", "buddy", "bfc", "torch", "torch_maxsplit_expandable",
};

static uint64_t meta_u64(const as_meta *m, const char *key)
{
    const char *v = as_meta_get(m, key);
    CU_ASSERT_PTR_NOT_NULL(v);
    return v ? strtoull(v, NULL, 10) : 0;
}

/* The JSON number after "key": in text, or UINT64_MAX. */
static uint64_t json_u64(const char *text, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(text, pat);
    return p ? strtoull(p + strlen(pat), NULL, 10) : UINT64_MAX;
}

static void replay_one(const char *name)
{
    char rel[256];
    snprintf(rel, sizeof rel, "traces/samples/pathological/%s.zst", name);
    const char *path = tu_path(rel);
    as_trace_reader *r;
    as_trace_error err;
    CU_ASSERT_FATAL(as_trace_open(path, NULL, &r, &err) == 0);
    as_meta meta = {0};
    CU_ASSERT_FATAL(as_meta_copy(&meta, as_trace_reader_meta(r)) == 0);
    const char *spec_text = as_meta_get(&meta, "patho.policy");
    CU_ASSERT_FATAL(spec_text != NULL);
    uint64_t unit = meta_u64(&meta, "patho.unit"), n = meta_u64(&meta, "patho.n");
    uint64_t m = meta_u64(&meta, "patho.M") * unit;
    uint64_t want_res = meta_u64(&meta, "patho.peak_reserved");
    uint64_t want_req = meta_u64(&meta, "patho.peak_requested");

    /* Inside the setting. */
    as_event e;
    uint64_t live = 0;
    int rc;
    while ((rc = as_trace_next(r, &e)) == 0) {
        if (e.op == AS_OP_ALLOC) {
            CU_ASSERT(e.size % unit == 0 && e.size <= n * unit);
            live += e.size;
            CU_ASSERT(live <= m);
        } else {
            CU_ASSERT_EQUAL(e.op, AS_OP_FREE);
            live -= e.size;
        }
    }
    CU_ASSERT_EQUAL(rc, AS_TRACE_EOF);
    as_trace_close(r);

    /* The engine, as allocsim runs it. */
    as_policy_spec spec;
    char why[256];
    CU_ASSERT_FATAL(as_policy_spec_parse(spec_text, &spec, why, sizeof why) == 0);
    as_engine_opts o = {.threads = 1};
    as_engine *eng;
    CU_ASSERT_FATAL(as_engine_create(&o, &eng) == 0);
    CU_ASSERT_FATAL(as_engine_add_run(eng, &spec, AS_CAPACITY_NONE) == 0);
    CU_ASSERT_FATAL(as_trace_open(path, NULL, &r, &err) == 0);
    CU_ASSERT_FATAL(as_engine_run(eng, r, &err) == 0);
    const as_run_result *res = as_engine_result(eng, 0);
    CU_ASSERT(res->completed);
    CU_ASSERT_EQUAL(res->peak_reserved, want_res);
    CU_ASSERT_EQUAL(res->peak_requested, want_req);
    char ratio[32];
    snprintf(ratio, sizeof ratio, "%.6f", (double)res->peak_reserved / (double)res->peak_requested);
    CU_ASSERT_STRING_EQUAL(ratio, as_meta_get(&meta, "patho.ratio"));
    if (res->peak_reserved != want_res || strcmp(ratio, as_meta_get(&meta, "patho.ratio")))
        fprintf(stderr, "\n  %s: engine %" PRIu64 "/%" PRIu64 " = %s, recorded %s\n", name,
                res->peak_reserved, res->peak_requested, ratio, as_meta_get(&meta, "patho.ratio"));
    /* The search's objective never exceeds the ratio allocsim reports (requested <= M). */
    CU_ASSERT(strtod(as_meta_get(&meta, "patho.bound_ratio"), NULL) <= strtod(ratio, NULL));
    as_trace_close(r);
    as_engine_destroy(eng);

    /* And the command itself. */
    char args[1024], out[1 << 16];
    snprintf(args, sizeof args, "run -p '%s' -f json '%s'", spec_text, path);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, NULL, 0), 0);
    const char *runs = strstr(out, "\"runs\"");
    CU_ASSERT_PTR_NOT_NULL(runs);
    if (runs) {
        CU_ASSERT_EQUAL(json_u64(runs, "peak_reserved"), want_res);
        CU_ASSERT_EQUAL(json_u64(runs, "peak_requested"), want_req);
    }
    as_policy_spec_free(&spec);
    as_meta_free(&meta);
}

static void patho_samples_replay(void)
{
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
        replay_one(samples[i]);
}

/* ---- the constructions (traces/gen_robson.c) -------------------------------------------
 * Each is replayed through the engine against its target and its peak reserved compared
 * with the count of segments the construction's argument gives (fuzz/README.md,
 * "Constructions"), computed here from that argument, not from the generator's code. */

typedef struct gen_peaks {
    uint64_t reserved, requested, max_live, bad_sizes;
} gen_peaks;

static gen_peaks run_robson(const char *spec, char **kv, int nkv, uint64_t unit, uint64_t n)
{
    gen_peaks p = {0};
    as_trace_reader *r;
    as_trace_error err;
    CU_ASSERT_FATAL(as_gen_open("robson", nkv, kv, &r, &err) == 0);
    as_policy_spec sp;
    char why[256];
    CU_ASSERT_FATAL(as_policy_spec_parse(spec, &sp, why, sizeof why) == 0);
    as_engine_opts o = {.threads = 1};
    as_engine *eng;
    CU_ASSERT_FATAL(as_engine_create(&o, &eng) == 0);
    CU_ASSERT_FATAL(as_engine_add_run(eng, &sp, AS_CAPACITY_NONE) == 0);
    CU_ASSERT_FATAL(as_engine_run(eng, r, &err) == 0);
    const as_run_result *res = as_engine_result(eng, 0);
    CU_ASSERT(res->completed);
    p.reserved = res->peak_reserved;
    p.requested = res->peak_requested;
    as_trace_close(r);
    as_engine_destroy(eng);
    as_policy_spec_free(&sp);
    /* The setting, from a second pass over the same stream. */
    CU_ASSERT_FATAL(as_gen_open("robson", nkv, kv, &r, &err) == 0);
    as_event e;
    uint64_t live = 0;
    while (as_trace_next(r, &e) == 0) {
        if (e.op == AS_OP_ALLOC) {
            p.bad_sizes += e.size % unit || e.size == 0 || e.size > n * unit;
            live += e.size;
            p.max_live = live > p.max_live ? live : p.max_live;
        } else if (e.op == AS_OP_FREE) {
            live -= e.size;
        }
    }
    as_trace_close(r);
    return p;
}

/* firstfit: one pinned segment per live unit while n more fit, and the last n: M-n+1. */
static void robson_firstfit(void)
{
    char *kv[] = {"target=firstfit"};
    gen_peaks p = run_robson("firstfit", kv, 1, 1u << 20, 16);
    CU_ASSERT_EQUAL(p.reserved, (256ull - 16 + 1) * (20u << 20));
    CU_ASSERT_EQUAL(p.max_live, 256u << 20);
    CU_ASSERT_EQUAL(p.bad_sizes, 0);
}

/* bestfit: phase b (10..15) adds segments while live + (b+1) per segment, +1 for the
 * one being built, fits in M; each leaves a 1-unit pin; then n-unit fillers. */
static void robson_bestfit(void)
{
    for (int m = 256; m <= 1024; m *= 4) {
        char mk[16];
        snprintf(mk, sizeof mk, "M=%d", m);
        char *kv[] = {"target=bestfit", mk};
        gen_peaks p = run_robson("bestfit", kv, 2, 1u << 20, 16);
        uint64_t pins = 0, segs = 0;
        for (uint64_t b = 10; b <= 15; b++) {
            uint64_t k = ((uint64_t)m - pins - 1) / (b + 1);
            pins += k;
            segs += k;
        }
        segs += ((uint64_t)m - pins) / 16;
        CU_ASSERT_EQUAL(p.reserved, segs * (20u << 20));
        CU_ASSERT(p.max_live <= (uint64_t)m << 20);
        CU_ASSERT_EQUAL(p.bad_sizes, 0);
        if (m == 256) /* the search's target at M = 256 MiB, n = 16 MiB */
            CU_ASSERT(p.reserved >= 8 * (256ull << 20));
    }
}

/* buddy: phase j fills fresh memory with blocks of 2^j units (requests 2^(j-1)+1), then
 * one live block per 2^(j+1) window is kept; memory is used contiguously, so the
 * reservation is the used length rounded up to 64-unit segments. */
static void robson_buddy(void)
{
    char *kv[] = {"target=buddy"};
    gen_peaks p = run_robson("buddy", kv, 1, 1u << 20, 16);
    uint64_t end = 0, live = 0, kept[5] = {0}; /* kept[i]: phase-i memory, units */
    for (unsigned j = 0; j <= 4; j++) {
        uint64_t occ = 1ull << j, req = j ? occ / 2 + 1 : 1;
        /* before phase j, one live block per 2^j window of every older phase's memory */
        live = 0;
        for (unsigned i = 0; i < j; i++)
            live += kept[i] / occ * (i ? (1ull << (i - 1)) + 1 : 1);
        uint64_t c = (256 - live) / req;
        end = (end + occ - 1) / occ * occ + c * occ;
        kept[j] = c * occ;
    }
    CU_ASSERT_EQUAL(p.reserved, (end + 63) / 64 * (64u << 20));
    CU_ASSERT_EQUAL(p.max_live, 256u << 20);
    CU_ASSERT_EQUAL(p.bad_sizes, 0);
}

/* torch: phase b (7..13) makes segments of b+3 MiB rounded up to 2 MiB, each holding b
 * units until the phase ends and a pin of 2 (odd b) or 3 (even b) after; it goes on while
 * the b+3 that starts a segment fits under M. Then 16-unit fillers. */
static void robson_torch(void)
{
    char *kv[] = {"target=torch"};
    gen_peaks p = run_robson("torch", kv, 1, 1u << 20, 16);
    uint64_t pins = 0, mib = 0;
    for (uint64_t b = 7; b <= 13; b++) {
        uint64_t pin = b & 1 ? 2 : 3, k = 0;
        while (pins + k * (b + pin) + b + 3 <= 256)
            k++;
        pins += k * pin;
        mib += k * ((b + 3 + 1) / 2 * 2);
    }
    mib += (256 - pins) / 16 * 16;
    CU_ASSERT_EQUAL(p.reserved, mib << 20);
    CU_ASSERT(p.max_live <= 256u << 20);
    CU_ASSERT_EQUAL(p.bad_sizes, 0);
    char *bad[] = {"target=torch", "unit=2M"};
    as_trace_reader *r;
    as_trace_error err;
    CU_ASSERT_EQUAL(as_gen_open("robson", 2, bad, &r, &err), AS_EUSAGE);
}

/* bfc: its regions (policies/bfc.c, TF's Extend()) start at 2 MiB; a request of curr + 1
 * units (3, 5, 9 at n = 16) doubles curr before the region is made, so the prelude gives
 * regions of 4, 8 and 16 MiB, and from then on each region is twice the last: 16, 32, ...
 * The phases take more fresh memory than the regions up to 256 MiB hold (524 MiB) and less
 * than those up to 512 MiB (1036), gen_robson_bfc.c's argument: the peak is the sum of the
 * regions up to 512 MiB. At n = 8 the prelude stops at 8 MiB (9 > n). */
static uint64_t bfc_regions_mib(uint64_t n, uint64_t last)
{
    uint64_t curr = 2, sum = 0;
    while (curr + 1 <= n)
        curr *= 2, sum += curr; /* the prelude's regions: curr doubled, and kept */
    for (; curr <= last; curr *= 2)
        sum += curr;
    return sum;
}

static void robson_bfc(void)
{
    char *kv[] = {"target=bfc"};
    gen_peaks p = run_robson("bfc", kv, 1, 1u << 20, 16);
    CU_ASSERT_EQUAL(bfc_regions_mib(16, 512), 4 + 8 + 16 + 16 + 32 + 64 + 128 + 256 + 512);
    CU_ASSERT_EQUAL(p.reserved, bfc_regions_mib(16, 512) << 20); /* 1036 MiB, 4.05 x M */
    CU_ASSERT(p.reserved > 4 * (256ull << 20));                  /* past the search's 4.02 */
    CU_ASSERT(p.max_live <= 256u << 20);
    CU_ASSERT_EQUAL(p.bad_sizes, 0);
    char *kv8[] = {"target=bfc", "n=8"};
    p = run_robson("bfc", kv8, 2, 1u << 20, 8);
    CU_ASSERT_EQUAL(p.reserved, bfc_regions_mib(8, 512) << 20); /* 4 + 8 + 8 + ... + 512 */
    CU_ASSERT_EQUAL(p.bad_sizes, 0);
    char *bad[] = {"target=bfc", "unit=4M"}; /* a unit its 2 MiB first region cannot hold */
    as_trace_reader *r;
    as_trace_error err;
    CU_ASSERT_EQUAL(as_gen_open("robson", 2, bad, &r, &err), AS_EUSAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "2 MiB"));
}

static void robson_bad_knobs(void)
{
    as_trace_reader *r;
    as_trace_error err;
    char *a[] = {"target=bestfit", "n=20"}; /* a 20-unit segment cannot hold the pin */
    CU_ASSERT_EQUAL(as_gen_open("robson", 2, a, &r, &err), AS_EUSAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "segment"));
    char *b[] = {"target=buddy", "segment=48M"};
    CU_ASSERT_EQUAL(as_gen_open("robson", 2, b, &r, &err), AS_EUSAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "power"));
}

/* ---- the minimiser ------------------------------------------------------------------ */

/* The bestfit construction at M = 64 with a tail of 1-unit allocations and frees that
 * land in holes after the peak: minimising removes the tail and keeps the ratios; the
 * result replays through the engine to the peaks its metadata records. */
static void minimiser_drops_the_tail_and_keeps_the_ratio(void)
{
    as_trace_reader *r;
    as_trace_error err;
    char *kv[] = {"target=bestfit", "M=64"};
    CU_ASSERT_FATAL(as_gen_open("robson", 2, kv, &r, &err) == 0);
    size_t cap = 1 << 20, len = 0;
    char *txt = malloc(cap);
    CU_ASSERT_FATAL(txt != NULL);
    len += (size_t)snprintf(txt, cap, "allocsim-text 1\n");
    as_event e;
    uint64_t ids = 0, ops = 0;
    while (as_trace_next(r, &e) == 0) {
        if (e.op == AS_OP_ALLOC)
            len += (size_t)snprintf(txt + len, cap - len, "alloc %" PRIu64 " %" PRIu64 "\n", ids++,
                                    e.size);
        else
            len += (size_t)snprintf(txt + len, cap - len, "free %" PRIu64 "\n", e.id);
        ops++;
    }
    as_trace_close(r);
    for (int i = 0; i < 10; i++) /* the tail: fits in the holes, changes nothing */
        len += (size_t)snprintf(txt + len, cap - len,
                                "alloc %" PRIu64 " 1048576\nfree %" PRIu64 "\n", ids, ids),
            ids++;
    as_patho_setting s = {.m_units = 64, .n = 16, .unit = 1u << 20};
    snprintf(s.policy, sizeof s.policy, "bestfit");
    uint8_t *out;
    size_t out_len;
    as_patho_result before, after;
    CU_ASSERT_FATAL(
        as_patho_minimise((const uint8_t *)txt, len, &s, 0, &out, &out_len, &before, &after) == 0);
    CU_ASSERT_EQUAL(before.ops, ops + 20);
    CU_ASSERT(after.ops <= ops);
    CU_ASSERT(after.peak_reserved >= before.peak_reserved);
    CU_ASSERT(after.peak_reserved * before.peak_requested >=
              before.peak_reserved * after.peak_requested);
    /* The output is a trace that replays to what it records. */
    const char *path = tu_tmp(".txt");
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    fwrite(out, 1, out_len, f);
    fclose(f);
    CU_ASSERT_FATAL(as_trace_open(path, NULL, &r, &err) == 0);
    as_meta meta = {0};
    CU_ASSERT_FATAL(as_meta_copy(&meta, as_trace_reader_meta(r)) == 0);
    as_trace_close(r);
    CU_ASSERT_EQUAL(meta_u64(&meta, "patho.peak_reserved"), after.peak_reserved);
    CU_ASSERT_EQUAL(meta_u64(&meta, "patho.ops_before_minimising"), ops + 20);
    as_policy_spec sp;
    char why[256];
    CU_ASSERT_FATAL(as_policy_spec_parse("bestfit", &sp, why, sizeof why) == 0);
    as_engine_opts o = {.threads = 1};
    as_engine *eng;
    CU_ASSERT_FATAL(as_engine_create(&o, &eng) == 0);
    CU_ASSERT_FATAL(as_engine_add_run(eng, &sp, AS_CAPACITY_NONE) == 0);
    CU_ASSERT_FATAL(as_trace_open(path, NULL, &r, &err) == 0);
    CU_ASSERT_FATAL(as_engine_run(eng, r, &err) == 0);
    CU_ASSERT_EQUAL(as_engine_result(eng, 0)->peak_reserved, after.peak_reserved);
    CU_ASSERT_EQUAL(as_engine_result(eng, 0)->peak_requested, after.peak_requested);
    as_trace_close(r);
    as_engine_destroy(eng);
    as_policy_spec_free(&sp);
    as_meta_free(&meta);
    free(out);
    free(txt);
}

CU_TestInfo test_patho[] = {
    {"minimiser_drops_the_tail_and_keeps_the_ratio", minimiser_drops_the_tail_and_keeps_the_ratio},
    {"samples_replay_to_recorded_ratio", patho_samples_replay},
    {"robson_firstfit_one_segment_per_unit", robson_firstfit},
    {"robson_bestfit_phases", robson_bestfit},
    {"robson_buddy_doubling_phases", robson_buddy},
    {"robson_torch_exact_segments", robson_torch},
    {"robson_bfc_doubling_regions", robson_bfc},
    {"robson_bad_knobs", robson_bad_knobs},
    CU_TEST_INFO_NULL,
};
