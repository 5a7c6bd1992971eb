/*
 * test_streams.c - the CUDA streams a process makes, on the simulated device and through the
 * engine (replay/PLACEMENT.md section 10). The golden numbers are the H200's
 * (replay/data/streams-h200-2026-12-01): the pages lost after n streams (cap.jsonl.zst) and
 * the addresses of cudaMalloc sequences after and among the streams, relative to the
 * heap's top T (addr.jsonl.zst; T read from the process's /proc/self/maps, or as the top
 * of the first chunk it made), which is AS_SIMDEV_TOP here.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "policy.h"
#include "simdev.h"
#include "trace.h"
#include "util.h"

#define MIB (1ull << 20)
#define T AS_SIMDEV_TOP

static as_simdev *make(uint64_t capacity)
{
    as_simdev_params p;
    as_simdev_default_params(&p);
    p.capacity = capacity;
    as_simdev *d = NULL;
    CU_ASSERT_FATAL(as_simdev_create(&p, &d) == 0);
    return d;
}

static int streams(as_simdev *d, uint32_t n)
{
    const as_device *v = as_simdev_device(d);
    return v->ops->streams(v->ctx, n);
}

static uint64_t take(as_simdev *d, uint64_t size)
{
    const as_device *v = as_simdev_device(d);
    uint64_t a = 0;
    CU_ASSERT_EQUAL(v->ops->reserve(v->ctx, size, &a), AS_DEV_OK);
    return a;
}

/* cap.jsonl.zst: free memory and the largest cudaMalloc lost these many 2 MiB pages after
 * n cudaStreamCreate (the same for non-blocking streams and for priorities); PyTorch's pool
 * (torch.cuda.Stream(): 128 streams on the H200) lost 35. */
static void streams_memory(void)
{
    static const struct {
        uint32_t n, pages;
    } measured[] = {{1, 0},   {2, 1},   {5, 1},    {6, 2},    {35, 9},   {36, 10}, {64, 17},
                    {78, 21}, {79, 22}, {121, 32}, {122, 34}, {128, 35}, {130, 36}};
    for (size_t i = 0; i < sizeof measured / sizeof measured[0]; i++) {
        as_simdev *d = make(AS_CAPACITY_NONE);
        CU_ASSERT_EQUAL(streams(d, measured[i].n), 0);
        CU_ASSERT_EQUAL(as_simdev_stream_bytes(d), measured[i].pages * 2 * MIB);
        as_dev_counters c;
        as_simdev_counters_get(d, &c);
        CU_ASSERT_EQUAL(c.reserved, 0); /* not the policy's */
        as_simdev_destroy(d);
    }
    /* one at a time as a process makes them, and never fewer */
    as_simdev *d = make(AS_CAPACITY_NONE);
    for (uint32_t n = 1; n <= 128; n++)
        CU_ASSERT_EQUAL(streams(d, n), 0);
    CU_ASSERT_EQUAL(streams(d, 3), 0);
    CU_ASSERT_EQUAL(as_simdev_stream_bytes(d), 35 * 2 * MIB);
    as_simdev_destroy(d);
}

/* The pages come out of an enforced capacity: after 2 streams (one page) a 100 MiB device
 * holds 98 MiB for the policy, and capacity() and cap_test() say so; a limit the policy
 * checks itself (PyTorch's memory fraction) is not lowered. */
static void streams_capacity(void)
{
    as_simdev *d = make(100 * MIB);
    const as_device *v = as_simdev_device(d);
    CU_ASSERT_EQUAL(streams(d, 2), 0);
    CU_ASSERT_EQUAL(v->ops->capacity(v->ctx), 98 * MIB);
    int yes = -1;
    CU_ASSERT_EQUAL(as_dev_cap_at_least(v, 98 * MIB, &yes), 0);
    CU_ASSERT_EQUAL(yes, 1);
    CU_ASSERT_EQUAL(as_dev_cap_at_least(v, 100 * MIB, &yes), 0);
    CU_ASSERT_EQUAL(yes, 0);
    uint64_t a;
    CU_ASSERT_EQUAL(v->ops->reserve(v->ctx, 98 * MIB, &a), AS_DEV_OK);
    CU_ASSERT_EQUAL(v->ops->reserve(v->ctx, 2 * MIB, &a), AS_DEV_OOM);
    as_simdev_destroy(d);

    as_simdev_params p;
    as_simdev_default_params(&p);
    as_simdev_set_capacity(&p, 100 * MIB, AS_POLICY_F_LIMITS_ITSELF);
    CU_ASSERT_FATAL(as_simdev_create(&p, &d) == 0);
    v = as_simdev_device(d);
    CU_ASSERT_EQUAL(streams(d, 128), 0);
    CU_ASSERT_EQUAL(v->ops->capacity(v->ctx), 100 * MIB);
    as_simdev_destroy(d);
}

/* addr.jsonl.zst, plain:64, sequence A: 64 streams, then 12, 2, 20, 20, 20, 94, 2, 20 MiB.
 * Their 16 heap pages fill the context's 2 MiB at T + 414 and 24 MiB at T + 488 and the
 * bottom 6 MiB of a new chunk [T - 32, T) (the maps: the region grew from T to T - 32).
 * After one stream (plain:1) the first two land where they do after none. */
static void streams_placement(void)
{
    static const int64_t want[] = {-26, -14, -64, -96, -128, -224, -130, -256};
    static const uint64_t sizes[] = {12, 2, 20, 20, 20, 94, 2, 20};
    as_simdev *d = make(AS_CAPACITY_NONE);
    CU_ASSERT_EQUAL(streams(d, 64), 0);
    for (size_t i = 0; i < 8; i++)
        CU_ASSERT_EQUAL(take(d, sizes[i] * MIB), T + (uint64_t)(want[i] * (int64_t)MIB));
    as_simdev_destroy(d);

    d = make(AS_CAPACITY_NONE);
    CU_ASSERT_EQUAL(streams(d, 1), 0);
    CU_ASSERT_EQUAL(take(d, 12 * MIB), T + 488 * MIB);
    CU_ASSERT_EQUAL(take(d, 2 * MIB), T + 414 * MIB);
    as_simdev_destroy(d);
}

/* pool:4, sequence E: 94, 12, 2, 20, 20, 20 MiB, then PyTorch's pool (128 streams, 32 heap
 * pages: the free tails of the three 20 MiB segments' chunks and of the context's, then a
 * new chunk), then all six freed, then 12, 2, 20, 20, 2, 94, 2 MiB: the chunks that held
 * the pages stay and take them. */
static void streams_mid_run(void)
{
    static const uint64_t first[] = {94, 12, 2, 20, 20, 20}, then[] = {12, 2, 20, 20, 2, 94, 2};
    static const int64_t want[] = {-210, -198, -192, -160, -196, -320, -226};
    as_simdev *d = make(AS_CAPACITY_NONE);
    const as_device *v = as_simdev_device(d);
    uint64_t a[6];
    for (size_t i = 0; i < 6; i++)
        a[i] = take(d, first[i] * MIB);
    CU_ASSERT_EQUAL(a[0], T - 96 * MIB);
    CU_ASSERT_EQUAL(a[1], T + 488 * MIB);
    CU_ASSERT_EQUAL(streams(d, 128), 0);
    for (size_t i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(v->ops->release(v->ctx, a[i], first[i] * MIB), AS_DEV_OK);
    for (size_t i = 0; i < 7; i++)
        CU_ASSERT_EQUAL(take(d, then[i] * MIB), T + (uint64_t)(want[i] * (int64_t)MIB));
    as_simdev_destroy(d);
}

/* The engine tells the device: PyTorch's pool before the first allocation on a second
 * stream, with 'each' one stream more at every new stream, nothing by default. */
typedef struct seg_log {
    uint64_t addr[8];
    unsigned n;
} seg_log;

static void on_seg(void *user, const as_seg_record *r)
{
    seg_log *l = user;
    if (r->dev.action == AS_DEV_SEGMENT_ALLOC && l->n < 8)
        l->addr[l->n++] = r->dev.addr;
}

static void engine_run(uint32_t mode, seg_log *l)
{
    /* nocache: one segment per allocation, at the device's address */
    const char *text = "allocsim-text 1\nalloc 0 12582912\nalloc 1 2097152 s=7\n"
                       "alloc 2 20971520 s=9\n";
    as_trace_reader *rd;
    as_trace_error err;
    CU_ASSERT_FATAL(as_trace_open_mem(text, strlen(text), "streams", NULL, &rd, &err) == 0);
    memset(l, 0, sizeof *l);
    as_engine_opts o = {.threads = 1, .streams = mode, .on_segment = on_seg, .user = l};
    as_engine *e;
    CU_ASSERT_FATAL(as_engine_create(&o, &e) == 0);
    as_policy_spec spec;
    char why[128];
    CU_ASSERT_FATAL(as_policy_spec_parse("nocache", &spec, why, sizeof why) == 0);
    CU_ASSERT_FATAL(as_engine_add_run(e, &spec, AS_CAPACITY_NONE) == 0);
    CU_ASSERT_EQUAL(as_engine_run(e, rd, &err), 0);
    as_engine_destroy(e);
    as_policy_spec_free(&spec);
    as_trace_close(rd);
}

static void streams_engine(void)
{
    seg_log l;
    engine_run(0, &l); /* no streams: the context's chunks */
    CU_ASSERT_EQUAL(l.n, 3);
    CU_ASSERT_EQUAL(l.addr[0], T + 488 * MIB);
    CU_ASSERT_EQUAL(l.addr[1], T + 414 * MIB);
    CU_ASSERT_EQUAL(l.addr[2], T - 32 * MIB);
    /* PyTorch's pool before allocation 1: its 32 pages take T + 414, the 6 left from
     * T + 500, all of a new chunk [T - 32, T) and 9 of [T - 64, T - 32), where the 2 MiB
     * segment goes after them; the 20 MiB one needs a chunk of its own */
    engine_run(AS_ENGINE_STREAMS_PYTORCH, &l);
    CU_ASSERT_EQUAL(l.n, 3);
    CU_ASSERT_EQUAL(l.addr[0], T + 488 * MIB);
    CU_ASSERT_EQUAL(l.addr[1], T - 46 * MIB);
    CU_ASSERT_EQUAL(l.addr[2], T - 96 * MIB);
    /* each: 2 streams by allocation 1 (one page, T + 414), 3 by allocation 2 (no more) */
    engine_run(AS_ENGINE_STREAMS_EACH, &l);
    CU_ASSERT_EQUAL(l.n, 3);
    CU_ASSERT_EQUAL(l.addr[1], T + 500 * MIB);
    CU_ASSERT_EQUAL(l.addr[2], T - 32 * MIB);
}

/* The command line: a bad value is a usage error naming it; pytorch moves the side
 * stream's first segment from the context's chunk into the pages' chunk (streams_engine). */
static void streams_cli(void)
{
    static char out[8192], err[2048], trace[600], seg[600];
    snprintf(trace, sizeof trace, "%s",
             tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 12582912\nalloc 1 2097152 s=7\n"
                                  "alloc 2 20971520 s=9\n"));
    char args[1600];
    snprintf(args, sizeof args, "-q -p nocache --device-streams 0 '%s'", trace);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--device-streams 0"));
    snprintf(seg, sizeof seg, "%s", tu_tmp(".csv")); /* both helpers' buffers are static */
    char want[64];
    for (int m = 0; m < 2; m++) {
        snprintf(args, sizeof args, "-q -p nocache --device-streams %s --segments '%s' '%s'",
                 m ? "pytorch" : "none", seg, trace);
        CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
        char *csv = tu_slurp(seg, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(csv);
        snprintf(want, sizeof want, ",segment_alloc,%llu,2097152",
                 (unsigned long long)(m ? T - 46 * MIB : T + 414 * MIB));
        CU_ASSERT_PTR_NOT_NULL(strstr(csv, want));
        free(csv);
    }
}

/* mincap: nocache holds the trace's 34 MiB at its end; the streams' pages come on top, in
 * curve mode and in exact passes alike: none 0, each 1 (3 streams), pytorch 35 (128). */
static void streams_mincap(void)
{
    static char out[8192], err[2048], trace[600];
    snprintf(trace, sizeof trace, "%s",
             tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 12582912\nalloc 1 2097152 s=7\n"
                                  "alloc 2 20971520 s=9\n"));
    static const struct {
        const char *mode;
        uint64_t pages;
    } want[] = {{"none", 0}, {"each", 1}, {"pytorch", 35}};
    for (size_t i = 0; i < 3; i++)
        for (int exact = 0; exact < 2; exact++) {
            char args[1600], line[100];
            snprintf(args, sizeof args, "mincap -q %s -p nocache --device-streams %s '%s'",
                     exact ? "--exact-passes" : "", want[i].mode, trace);
            CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
            snprintf(line, sizeof line, "minimum capacity   %llu B",
                     (unsigned long long)((34 + 2 * want[i].pages) * MIB));
            CU_ASSERT_PTR_NOT_NULL(strstr(out, line));
        }
}

CU_TestInfo test_streams[] = {
    {"memory", streams_memory},       {"capacity", streams_capacity},
    {"placement", streams_placement}, {"mid_run", streams_mid_run},
    {"engine", streams_engine},       {"cli", streams_cli},
    {"mincap", streams_mincap},       CU_TEST_INFO_NULL,
};
