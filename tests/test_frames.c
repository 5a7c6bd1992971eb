/*
 * test_frames.c - what the snapshot importer makes of a trace entry's `frames`,
 * `user_metadata` and the snapshot's `external_annotations`: call sites (through the
 * reader's site table), MARK events in time order, and a lossless trip through the native
 * and text formats. Golden values come from the seed's construction (fuzz/make_seeds.py,
 * frames_seed) and from Python's own reading of the shared H200 snapshot.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "util.h"

#define SEED "fuzz/corpus/pickle/frames.pickle"
#define RESNET "tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst"

typedef struct mark_at {
    uint64_t index; /* event index */
    int64_t time_us;
    char label[64];
} mark_at;

typedef struct seen {
    uint64_t events, allocs, framed;
    uint32_t sites;
    uint32_t site_of[600]; /* the seed's allocs */
    mark_at marks[80];
    size_t nmarks;
    int marks_in_order; /* every MARK sits after the events before its time, before the rest */
    uint64_t fold;      /* FNV-1a over "k:file:line:name;...\n" of each alloc with frames */
    size_t site_bytes;
} seen;

static uint64_t fnv(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static uint64_t fold_site(uint64_t h, const as_sites *s, uint64_t k, uint32_t site)
{
    const uint32_t *ids;
    size_t n = as_sites_stack(s, site, &ids);
    char buf[8192];
    snprintf(buf, sizeof buf, "%llu:", (unsigned long long)k);
    h = fnv(h, buf);
    for (size_t i = 0; i < n; i++) {
        as_frame f;
        as_sites_frame(s, ids[i], &f);
        snprintf(buf, sizeof buf, "%s%s:%u:%s", i ? ";" : "", f.filename, f.line, f.name);
        h = fnv(h, buf);
    }
    return fnv(h, "\n");
}

static void read_seen(const char *path, seen *w)
{
    memset(w, 0, sizeof *w);
    w->fold = 0xcbf29ce484222325ull;
    w->marks_in_order = 1;
    as_trace_reader *r;
    as_trace_error err;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(path, NULL, &r, &err), 0);
    const as_sites *s = as_trace_reader_sites(r);
    w->sites = as_sites_count(s);
    w->site_bytes = as_sites_memory(s);
    as_event e;
    int64_t last_time = INT64_MIN;
    int after_mark = 0;
    while (as_trace_next(r, &e) == 0) {
        if (e.op == AS_OP_MARK) {
            if (w->nmarks < 80) {
                mark_at *m = &w->marks[w->nmarks++];
                m->index = w->events;
                m->time_us = e.time_us;
                snprintf(m->label, sizeof m->label, "%s", e.label);
            }
            /* an annotation comes after the events strictly before its time */
            if (e.time_us < last_time)
                w->marks_in_order = 0;
            after_mark = 1;
            last_time = e.time_us;
        } else {
            if (after_mark && e.time_us != AS_TIME_NONE && e.time_us < last_time)
                w->marks_in_order = 0;
            after_mark = 0;
            if (e.time_us != AS_TIME_NONE)
                last_time = e.time_us;
        }
        if (e.op == AS_OP_ALLOC) {
            if (e.id < 600)
                w->site_of[e.id] = e.site;
            if (e.site) {
                w->framed++;
                w->fold = fold_site(w->fold, s, e.id, e.site);
            }
            w->allocs++;
        }
        w->events++;
    }
    CU_ASSERT_PTR_NULL(as_trace_reader_error(r));
    as_trace_close(r);
}

static void frames_seed(void)
{
    seen *w = calloc(1, sizeof *w);
    read_seen(tu_path(SEED), w);
    /* 600 allocs, each freed: 1,200 events and 5 MARKs (the device-1 annotation is not
     * this trace's). */
    CU_ASSERT_EQUAL(w->allocs, 600);
    CU_ASSERT_EQUAL(w->events, 1205);
    CU_ASSERT_EQUAL(w->sites, 3);
    /* alloc k uses stacks[k % 3], first seen in that order: site k % 3 + 1, also past the
     * first 1,000-entry batch, where the frames are memo references to a dropped batch. */
    int all = 1;
    for (int k = 0; k < 600; k++)
        all &= w->site_of[k] == (uint32_t)(k % 3 + 1);
    CU_ASSERT(all);
    /* Alloc k at 100k us, its free at 100k + 50. START step#1 at 10,010 follows alloc 100
     * (10,000) and precedes free 100 (10,050): 101 + 100 events before it. user_metadata
     * changes at alloc 200 and 400 (marks before them, after 400 and 800 events and the
     * marks so far); END at 55,060 after allocs and frees 0..550; tail last. */
    static const mark_at want[] = {
        {201, 10010, "START step#1"},     {401, 20000, "user_metadata=phase1"},
        {802, 40000, "user_metadata="},   {1105, 55060, "END step#1"},
        {1204, 1000000000, "START tail"},
    };
    CU_ASSERT_EQUAL_FATAL(w->nmarks, 5);
    for (size_t i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL(w->marks[i].index, want[i].index);
        CU_ASSERT_EQUAL(w->marks[i].time_us, want[i].time_us);
        CU_ASSERT_STRING_EQUAL(w->marks[i].label, want[i].label);
    }
    /* The sites' display frames: conv.py is PyTorch's own, so site 1 shows model.py. */
    as_trace_reader *r;
    as_trace_error err;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(tu_path(SEED), NULL, &r, &err), 0);
    as_frame f;
    CU_ASSERT_EQUAL(as_sites_user_frame(as_trace_reader_sites(r), 1, &f), 1);
    CU_ASSERT_STRING_EQUAL(f.filename, "model.py");
    CU_ASSERT_EQUAL(f.line, 12);
    CU_ASSERT_EQUAL(as_sites_user_frame(as_trace_reader_sites(r), 3, &f), 1);
    CU_ASSERT_STRING_EQUAL(f.name, "step");
    CU_ASSERT_STRING_EQUAL(as_meta_get(as_trace_reader_meta(r), "torch.allocs_with_frames"), "600");
    CU_ASSERT_STRING_EQUAL(as_meta_get(as_trace_reader_meta(r), "torch.annotation_marks"), "3");
    as_trace_close(r);
    free(w);
}

static void frames_h200(void)
{
    /* python3 on the zstd -d output, allocs in order, k their ordinal:
     *   h = FNV-1a 64 over, for each alloc with non-empty frames,
     *       f"{k}:" + ";".join(f"{f['filename']}:{f['line']}:{f['name']}" for f in frames) + "\n"
     * gave 0x237dc09e1ce72316 over 4,799 allocs with frames, 48 distinct stacks;
     * external_annotations holds 64 entries, all of device 0, in time order. */
    seen *w = calloc(1, sizeof *w);
    read_seen(tu_path(RESNET), w);
    CU_ASSERT_EQUAL(w->framed, 4799);
    CU_ASSERT_EQUAL(w->sites, 48);
    CU_ASSERT_EQUAL(w->fold, 0x237dc09e1ce72316ull);
    CU_ASSERT_EQUAL(w->nmarks, 64);
    CU_ASSERT(w->marks_in_order);
    CU_ASSERT_STRING_EQUAL(w->marks[0].label, "START Optimizer.step#SGD.step");
    CU_ASSERT_EQUAL(w->marks[0].time_us, 1795936508539802ll);
    CU_ASSERT_STRING_EQUAL(w->marks[1].label, "END Optimizer.step#SGD.step");
    CU_ASSERT_EQUAL(w->events, 22917 + 64);
    /* The table is the distinct content: 48 stacks of <= 19 of 51 frames, a few KB. */
    CU_ASSERT(w->site_bytes < 32768);
    free(w);
}

/* Sites, ALLOC sites and MARKs of a trace, as one string. */
static char *describe(const char *path)
{
    size_t cap = 8u << 20, j = 0;
    char *out = malloc(cap);
    as_trace_reader *r;
    as_trace_error err;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(path, NULL, &r, &err), 0);
    const as_sites *s = as_trace_reader_sites(r);
    for (uint32_t k = 1; k <= as_sites_count(s); k++) {
        const uint32_t *ids;
        size_t n = as_sites_stack(s, k, &ids);
        for (size_t i = 0; i < n; i++) {
            as_frame f;
            as_sites_frame(s, ids[i], &f);
            j += (size_t)snprintf(out + j, cap - j, "%u %s:%u:%s\n", k, f.filename, f.line, f.name);
        }
    }
    as_event e;
    while (as_trace_next(r, &e) == 0 && j + 400 < cap)
        j += (size_t)snprintf(out + j, cap - j, "%d %llu %llu %u %lld %s\n", e.op,
                              (unsigned long long)e.id, (unsigned long long)e.size, e.site,
                              (long long)e.time_us, e.op == AS_OP_MARK && e.label ? e.label : "");
    as_trace_close(r);
    return out;
}

static void frames_convert_lossless(void)
{
    const char *ins[] = {SEED, RESNET};
    for (size_t i = 0; i < 2; i++) {
        const char *nat = tu_tmp(".zst"), *txt = tu_tmp(".txt"), *nat2 = tu_tmp(".zst");
        as_trace_error err;
        CU_ASSERT_EQUAL(
            as_trace_convert(tu_path(ins[i]), nat, AS_FMT_NATIVE, NULL, NULL, NULL, &err), 0);
        CU_ASSERT_EQUAL(as_trace_convert(nat, txt, AS_FMT_TEXT, NULL, NULL, NULL, &err), 0);
        CU_ASSERT_EQUAL(as_trace_convert(txt, nat2, AS_FMT_NATIVE, NULL, NULL, NULL, &err), 0);
        char *a = describe(tu_path(ins[i])), *b = describe(nat), *c = describe(txt),
             *d = describe(nat2);
        CU_ASSERT_STRING_EQUAL(a, b);
        CU_ASSERT_STRING_EQUAL(a, c);
        CU_ASSERT_STRING_EQUAL(a, d);
        free(a), free(b), free(c), free(d);
    }
}

CU_TestInfo test_frames[] = {
    {"seed", frames_seed},
    {"h200", frames_h200},
    {"convert_lossless", frames_convert_lossless},
    CU_TEST_INFO_NULL,
};
