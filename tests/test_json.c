/*
 * test_json.c - the JSON that scripts read (sim/REPORT.md, schema 3), parsed with jansson
 * and held to values from other sources: run's yardstick fields against the planned run and
 * the trace's peak requested added up by hand; check -f json against the H200's own
 * memory_stats() (segment counts and peaks in tests/data/torch-2.11-h200*); --by-mark's
 * rows against how the frames seed is built; --sites' rows against the sites and sizes of a
 * trace written here; info's sites against the peak computed in Python (test_siterep.c's
 * info_peak).
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define BIG (1u << 20)

/* `allocsim ARGS` (printf's fmt) parsed, its exit status want (else a failure); a failure
 * that ends the test when it is not JSON. */
static json_t *run_json(int want, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static json_t *run_json(int want, const char *fmt, ...)
{
    char args[2048], *out = malloc(BIG), err[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    int rc = tu_run_allocsim(args, out, BIG, err, sizeof err);
    if (rc != want)
        fprintf(stderr, "\n  allocsim %s: exit %d (want %d): %s\n", args, rc, want, err);
    CU_ASSERT_EQUAL(rc, want);
    json_error_t je;
    json_t *doc = json_loads(out, 0, &je);
    if (!doc)
        fprintf(stderr, "\n  allocsim %s: not JSON (%s, line %d): %.300s\n", args, je.text, je.line,
                out);
    free(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    return doc;
}

static const char *str(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "(not a string)";
}

static uint64_t u64(const json_t *o, const char *key)
{
    return (uint64_t)json_integer_value(json_object_get(o, key));
}

/* The yardstick fields: the least peak reserved of the trace's completed planned runs, each
 * run's peak reserved over it and over the peak requested, absent (null) where the table
 * shows '-'. handwritten.txt's peak requested is 26 MiB, added up from the file: at alloc 8
 * the two 2 MiB weights, the 10 MiB and the 12 MiB scratch buffers are live (the side
 * stream's 3 MiB stopped counting at its free_req). */
static void yardstick_fields(void)
{
    json_t *doc = run_json(0, "-q -f json -p planned -p bestfit -p nocache -c none -c 8M %s",
                           tu_path("traces/samples/handwritten.txt"));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(doc, "schema")), 3);
    json_t *runs = json_object_get(doc, "runs");
    CU_ASSERT_EQUAL_FATAL(json_array_size(runs), 6);
    uint64_t plan = UINT64_MAX;
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r)
    {
        if (!strcmp(json_string_value(json_object_get(r, "policy")), "planned") &&
            json_is_true(json_object_get(r, "completed")) && u64(r, "peak_reserved") < plan)
            plan = u64(r, "peak_reserved");
    }
    CU_ASSERT_FATAL(plan != UINT64_MAX);
    unsigned completed = 0;
    json_array_foreach(runs, i, r)
    {
        CU_ASSERT_EQUAL(u64(r, "planned_peak_reserved"), plan);
        json_t *vp = json_object_get(r, "vs_planned"), *vr = json_object_get(r, "vs_requested");
        if (!json_is_true(json_object_get(r, "completed"))) {
            CU_ASSERT(json_is_null(vp));
            CU_ASSERT(json_is_null(vr));
            continue;
        }
        completed++;
        double res = (double)u64(r, "peak_reserved");
        CU_ASSERT(json_is_real(vp) && fabs(json_real_value(vp) - (res / (double)plan - 1)) < 1e-9);
        CU_ASSERT(json_is_real(vr) &&
                  fabs(json_real_value(vr) - (res / (double)(26u << 20) - 1)) < 1e-9);
    }
    CU_ASSERT_EQUAL(completed, 3); /* under the 26 MiB peak, at 8 MiB, every run stops */
    json_decref(doc);
    /* Without a planned run there is no yardstick; the bound still applies. */
    doc = run_json(0, "-q -f json -p bestfit %s", tu_path("traces/samples/handwritten.txt"));
    r = json_array_get(json_object_get(doc, "runs"), 0);
    CU_ASSERT(json_is_null(json_object_get(r, "planned_peak_reserved")));
    CU_ASSERT(json_is_null(json_object_get(r, "vs_planned")));
    CU_ASSERT(json_is_real(json_object_get(r, "vs_requested")));
    json_decref(doc);
}

/* A number of a JSON file of the GPU's (path in the tree, then a key, or two for a nested
 * object). */
static uint64_t stat_of(const char *path, const char *k1, const char *k2)
{
    json_t *d = json_load_file(tu_path(path), 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    json_t *v = json_object_get(d, k1);
    if (k2)
        v = json_object_get(v, k2);
    CU_ASSERT(json_is_integer(v));
    uint64_t x = (uint64_t)json_integer_value(v);
    json_decref(d);
    return x;
}

/* check -f json on three snapshots recorded on the H200: resnet from the process's start
 * (reproduced: its 126 segments, no frees, and its peak as memory_stats() gave them),
 * midrun recorded after its model was loaded (the segments rebuilt at the start plus those
 * the trace made are the process's num_device_alloc), and tests/differs_snapshot.py's
 * snapshot, whose second request got a segment of its own (differs: 2 segment events
 * recorded, 1 simulated, the first difference its segment_alloc), plus a state-only
 * snapshot it cannot check (exit 1 outranks 3). */
static void check_json(void)
{
    char pk[400], cmd[1000];
    snprintf(pk, sizeof pk, "%s", tu_tmp(".pickle"));
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s'", tu_path("tests/differs_snapshot.py"), pk);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    json_t *doc = run_json(1, "check -f json %s %s %s %s",
                           tu_path("tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst"),
                           tu_path("tests/data/torch-2.11-h200-midrun/midrun.pickle.zst"), pk,
                           tu_path("tests/data/torch-2.11-h200-midrun/midrun_state.pickle.zst"));
    CU_ASSERT_STRING_EQUAL(str(doc, "command"), "check");
    json_t *c = json_object_get(doc, "checks");
    CU_ASSERT_EQUAL_FATAL(json_array_size(c), 4);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(doc, "traces")), 4);
    /* resnet */
    json_t *r = json_array_get(c, 0);
    const char *meta = "tests/data/torch-2.11-h200/resnet_varbatch.meta.json";
    CU_ASSERT_STRING_EQUAL(str(r, "status"), "reproduced");
    CU_ASSERT(json_is_true(json_object_get(r, "reproduced")));
    CU_ASSERT_EQUAL(u64(r, "recorded_events"), stat_of(meta, "segments", NULL));
    CU_ASSERT_EQUAL(u64(r, "simulated_events"), stat_of(meta, "segments", NULL));
    CU_ASSERT_EQUAL(u64(r, "recorded_peak_reserved"), stat_of(meta, "peak_reserved", NULL));
    CU_ASSERT_EQUAL(u64(r, "simulated_peak_reserved"), stat_of(meta, "peak_reserved", NULL));
    CU_ASSERT(json_is_null(json_object_get(r, "difference")));
    CU_ASSERT(json_is_false(json_object_get(json_object_get(r, "start"), "possible")));
    /* midrun */
    r = json_array_get(c, 1);
    const char *ms = "tests/data/torch-2.11-h200-midrun/midrun.stats.json";
    json_t *st = json_object_get(r, "start");
    CU_ASSERT_STRING_EQUAL(str(r, "status"), "reproduced");
    CU_ASSERT(json_is_true(json_object_get(st, "rebuilt")));
    CU_ASSERT_EQUAL(u64(st, "segments") + u64(r, "recorded_events"),
                    stat_of(ms, "num_device_alloc", NULL) + stat_of(ms, "num_device_free", NULL));
    CU_ASSERT_EQUAL(u64(r, "recorded_peak_reserved"), stat_of(ms, "reserved_bytes.all.peak", NULL));
    CU_ASSERT(json_is_null(json_object_get(st, "why")));
    /* the differing one: its second request's segment_alloc, at 0x20000000, for allocation
     * 1, where nothing is simulated */
    r = json_array_get(c, 2);
    json_t *d = json_object_get(r, "difference");
    CU_ASSERT_STRING_EQUAL(str(r, "status"), "differs");
    CU_ASSERT_EQUAL(u64(r, "recorded_events"), 2);
    CU_ASSERT_EQUAL(u64(r, "simulated_events"), 1);
    CU_ASSERT_EQUAL(u64(r, "recorded_peak_reserved"), 4u << 20);
    CU_ASSERT_EQUAL(u64(r, "simulated_peak_reserved"), 2u << 20);
    CU_ASSERT_STRING_EQUAL(str(d, "kind"), "segment_event");
    json_t *re = json_object_get(d, "recorded");
    CU_ASSERT_STRING_EQUAL(str(re, "action"), "segment_alloc");
    CU_ASSERT_EQUAL(u64(re, "size"), 2u << 20);
    CU_ASSERT_EQUAL(u64(re, "addr"), 0x20000000u);
    CU_ASSERT_EQUAL(u64(re, "alloc"), 1);
    CU_ASSERT(json_is_null(json_object_get(d, "simulated")));
    CU_ASSERT_EQUAL(u64(d, "index"), 1);
    CU_ASSERT_EQUAL(u64(d, "allocation"), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(str(d, "why"), "decided otherwise"));
    /* the state-only snapshot */
    r = json_array_get(c, 3);
    CU_ASSERT_STRING_EQUAL(str(r, "status"), "error");
    CU_ASSERT_PTR_NOT_NULL(strstr(str(r, "error"), "no segment"));
    CU_ASSERT(json_is_null(json_object_get(r, "line")));
    json_decref(doc);
}

/* --by-mark on the frames seed (fuzz/make_seeds.py, frames_seed; test_siterep.c's by_mark):
 * alloc k at event 2k, 256 + k % 5 bytes, freed before the next; the marks with "step" are
 * START step#1 at event 201 (after alloc 100) and END step#1 at 1105 (after free 550): 101,
 * 450 and 49 allocations, at most 260 B live. bestfit keeps its one segment; at 4 KiB it
 * cannot reserve one, and stops at alloc 0, in interval 0. */
static void by_mark_json(void)
{
    json_t *doc = run_json(0, "run -q -f json -p bestfit -c none -c 4K --by-mark=step %s",
                           tu_path("fuzz/corpus/pickle/frames.pickle"));
    json_t *bm = json_object_get(doc, "by_mark"), *rows = json_object_get(bm, "rows");
    CU_ASSERT_STRING_EQUAL(str(bm, "match"), "step");
    CU_ASSERT_EQUAL_FATAL(json_array_size(rows), 4);
    static const uint64_t first[] = {0, 201, 1105}, allocs[] = {101, 450, 49};
    static const char *const mark[] = {NULL, "START step#1", "END step#1"};
    uint64_t run_peak = u64(json_array_get(json_object_get(doc, "runs"), 0), "peak_reserved");
    uint64_t reserves = 0;
    for (size_t k = 0; k < 3; k++) {
        json_t *x = json_array_get(rows, k);
        CU_ASSERT_EQUAL(u64(x, "run"), 0);
        CU_ASSERT_EQUAL(u64(x, "interval"), k);
        CU_ASSERT_EQUAL(u64(x, "first_event"), first[k]);
        CU_ASSERT_EQUAL(u64(x, "allocs"), allocs[k]);
        CU_ASSERT_EQUAL(u64(x, "peak_requested"), 260);
        CU_ASSERT_EQUAL(u64(x, "peak_reserved"), run_peak); /* one segment, kept */
        CU_ASSERT(json_is_false(json_object_get(x, "oom")));
        json_t *m = json_object_get(x, "mark");
        CU_ASSERT(mark[k] ? json_is_string(m) && !strcmp(json_string_value(m), mark[k])
                          : json_is_null(m));
        reserves += u64(x, "device_reserves");
    }
    CU_ASSERT_EQUAL(reserves, 1);
    json_t *x = json_array_get(rows, 3);
    CU_ASSERT_EQUAL(u64(x, "run"), 1);
    CU_ASSERT_EQUAL(u64(x, "interval"), 0);
    CU_ASSERT(json_is_true(json_object_get(x, "oom")));
    json_decref(doc);
    /* with -f csv it is refused, not ignored */
    char args[1024];
    snprintf(args, sizeof args, "run -q -f csv --by-mark %s",
             tu_path("fuzz/corpus/pickle/frames.pickle"));
    char out[256], err[512];
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 2);
}

/* --sites with -f json on traces/samples/sites.txt, two sites (a.py:1 f, b.py:2 g): nocache
 * at 12 MiB runs out at alloc 3 (8 MiB from site 2) and the request row says so; at its
 * peak the live rows are the requested bytes of each site's live allocations; the cache's
 * row, if any, has site null. */
static void sites_json(void)
{
    const char *t = tu_path("traces/samples/sites.txt");
    json_t *doc =
        run_json(0, "run -q -f json -p nocache -c 12MiB --sites %s %s", tu_tmp(".csv"), t);
    json_t *rows = json_object_get(doc, "sites");
    CU_ASSERT_FATAL(json_is_array(rows) && json_array_size(rows) > 0);
    size_t i;
    json_t *x;
    int requests = 0;
    uint64_t live[3] = {0};
    json_array_foreach(rows, i, x)
    {
        const char *when = json_string_value(json_object_get(x, "when"));
        const char *by = json_string_value(json_object_get(x, "by"));
        json_t *site = json_object_get(x, "site");
        const char *frame = json_string_value(json_object_get(x, "frame"));
        CU_ASSERT_EQUAL(u64(x, "run"), 0);
        if (json_is_null(site)) {
            CU_ASSERT_STRING_EQUAL(frame, "(cached: free segments)");
            continue;
        }
        uint64_t s = (uint64_t)json_integer_value(site);
        CU_ASSERT_STRING_EQUAL(frame, s == 1 ? "a.py:1 f" : "b.py:2 g");
        if (!strcmp(by, "request")) {
            requests++;
            CU_ASSERT_STRING_EQUAL(when, "oom");
            CU_ASSERT_EQUAL(s, 2);
            CU_ASSERT_EQUAL(u64(x, "bytes"), 8388608);
        }
        if (!strcmp(when, "peak") && !strcmp(by, "live") && s < 3)
            live[s] += u64(x, "bytes");
    }
    CU_ASSERT_EQUAL(requests, 1);
    /* nocache reserves a request at a time: its peak is after alloc 2, before free 0 */
    CU_ASSERT_EQUAL(live[1], 1048576 + 1000000);
    CU_ASSERT_EQUAL(live[2], 3145728);
    json_decref(doc);
}

/* info -f json on the ResNet snapshot: 48 sites; at the peak requested the most live bytes
 * are under resnet.py:155 forward (924,850,176 B), then resnet.py:154 (924,844,032 B), as
 * Python on the unpacked pickle adds them up (test_siterep.c's info_peak). */
static void info_sites_json(void)
{
    json_t *doc = run_json(0, "info -f json %s",
                           tu_path("tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst"));
    json_t *t = json_array_get(json_object_get(doc, "traces"), 0);
    CU_ASSERT_EQUAL(u64(t, "call_sites"), 48);
    json_t *top = json_object_get(t, "sites_at_peak");
    CU_ASSERT_EQUAL_FATAL(json_array_size(top), 10);
    json_t *a = json_array_get(top, 0), *b = json_array_get(top, 1);
    CU_ASSERT_EQUAL(u64(a, "rank"), 1);
    CU_ASSERT_EQUAL(u64(a, "bytes"), 924850176);
    CU_ASSERT_PTR_NOT_NULL(strstr(str(a, "frame"), "resnet.py:155"));
    CU_ASSERT_EQUAL(u64(b, "bytes"), 924844032);
    CU_ASSERT_PTR_NOT_NULL(strstr(str(b, "frame"), "resnet.py:154"));
    CU_ASSERT(u64(a, "site") != u64(b, "site"));
    json_decref(doc);
    /* a trace without frames: none, and an empty list */
    doc = run_json(0, "info -f json %s", tu_path("traces/samples/handwritten.txt"));
    t = json_array_get(json_object_get(doc, "traces"), 0);
    CU_ASSERT_EQUAL(u64(t, "call_sites"), 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(t, "sites_at_peak")), 0);
    json_decref(doc);
}

CU_TestInfo test_json[] = {
    {"run: the yardstick fields (planned, peak requested) and their nulls", yardstick_fields},
    {"check -f json: against the H200's memory_stats()", check_json},
    {"run -f json --by-mark: intervals of the frames seed", by_mark_json},
    {"run -f json --sites: the request's site and each site's live bytes", sites_json},
    {"info -f json: call sites at the peak requested", info_sites_json},
    CU_TEST_INFO_NULL,
};
