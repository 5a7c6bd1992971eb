/*
 * test_cudamallocasync.c - the stream-ordered pool's model: 32 MiB chunks on one address
 * range (a lone small allocation maps one; blocks run on across chunks), free ranges that
 * merge across chunks (searched first among those all mapped), the release threshold
 * deciding what a synchronisation unmaps, free chunks moved to where a growth needs them,
 * and a refused growth that leaves the pool as it was. Figures are hand-computed from those rules
 * (policies/cudamallocasync.c), each of which the H200's pool showed in
 * replay/data/async-probe-h200/probe*.csv.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "fuzz/policy_harness.h"
#include "util.h"

#define MIB PH_MIB

static void async_growth_and_reuse(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "cudamallocasync", AS_CAPACITY_NONE) == 0);
    uint64_t a, b, c;
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 1, &a), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 32 * MIB); /* 1 B (512 carved): chunk 0 */
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 20 * MIB, &b), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 32 * MIB); /* [512 B, 20 MiB + 512): chunk 0 */
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 40 * MIB, &c), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 64 * MIB); /* runs on into chunk 1 only */
    /* threshold 0 (CUDA's default): a chunk whose last block goes is unmapped */
    CU_ASSERT_EQUAL(ph_free(&t, c, 0), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 32 * MIB);
    CU_ASSERT_EQUAL(ph_free(&t, b, 0), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 32 * MIB); /* a is still in chunk 0 */
    CU_ASSERT_EQUAL(ph_free(&t, a, 0), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 0);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* The H200's kvstart probe: a range whose lower chunk was unmapped still takes the next
 * request at its start (it is the best fit), which maps that chunk again. */
static void async_unmapped_range_is_free(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "cudamallocasync", AS_CAPACITY_NONE) == 0);
    uint64_t a, b, c, d;
    as_block ba, bd;
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 9601024, 0, &a, &ba), 0);
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 33603584, &b), 0); /* to 41.2 MiB: chunks 0, 1 */
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 1200128, &c), 0);  /* in chunk 1 */
    CU_ASSERT_EQUAL(ph_free(&t, b, 0), 0);
    CU_ASSERT_EQUAL(ph_free(&t, a, 0), 0); /* chunk 0 holds nothing: unmapped */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 32 * MIB);
    /* free: [0, 41.2 MiB) with chunk 0 unmapped, and the tail above c; best fit: the first */
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 16384, 0, &d, &bd), 0);
    CU_ASSERT_EQUAL(bd.addr, ba.addr);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 64 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

static void async_equal_ranges_first_freed(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "backend:cudaMallocAsync", AS_CAPACITY_NONE) == 0);
    uint64_t id[4], e;
    as_block blk[4], be;
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(ph_alloc_id(&t, (i % 2 ? 1 : 8) * MIB, 0, &id[i], &blk[i]), 0);
    CU_ASSERT_EQUAL(ph_free(&t, id[2], 0), 0); /* the upper 8 MiB range is free first */
    CU_ASSERT_EQUAL(ph_free(&t, id[0], 0), 0);
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 8 * MIB, 0, &e, &be), 0);
    CU_ASSERT_EQUAL(be.addr, blk[2].addr); /* as the H200's tie_free_20 */
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

static void async_threshold_keeps(void)
{
    ph t;
    /* 64 MiB threshold: free chunks go while the pool holds more than that */
    CU_ASSERT_FATAL(ph_open(&t, "cudamallocasync,release_threshold=64M", AS_CAPACITY_NONE) == 0);
    uint64_t a, b, c;
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 30 * MIB, &a), 0);
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 30 * MIB, &b), 0);
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 30 * MIB, &c), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 96 * MIB); /* [0, 90 MiB): chunks 0..2 */
    CU_ASSERT_EQUAL(ph_free(&t, c, 0), 0);            /* chunk 2 is free and 96 > 64: unmapped */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 64 * MIB);
    CU_ASSERT_EQUAL(ph_free(&t, b, 0), 0); /* chunk 1 is free, but 64 is not above 64 */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 64 * MIB);
    uint64_t d;
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 30 * MIB, &d), 0); /* where b was: nothing to map */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 64 * MIB);
    CU_ASSERT_EQUAL(ph_stats(&t).device_reserves, 3);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* Threshold max never unmaps, but a growth moves a free chunk before it asks for more: at
 * 96 MiB the 40 MiB request fits by moving chunk 0; the next request has nothing to move. */
static void async_growth_moves_free_chunks(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "backend:cudaMallocAsync", 96 * MIB) == 0);
    uint64_t a, b, c, d, e;
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 32 * MIB, &a), 0);
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 32 * MIB, &b), 0);
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 1 * MIB, &c), 0); /* chunk 2 */
    CU_ASSERT_EQUAL(ph_free(&t, a, 0), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 96 * MIB); /* chunk 0 kept, free */
    /* 40 MiB: not in [0, 32 MiB); at 65 MiB it needs chunk 3: chunk 0 moves there */
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 40 * MIB, &d), 0);
    as_policy_stats s = ph_stats(&t);
    CU_ASSERT_EQUAL(s.reserved, 96 * MIB);
    CU_ASSERT_EQUAL(s.device_releases, 1);
    /* 16 MiB: the best fit is [0, 32 MiB), unmapped now; 128 > 96 and nothing is free to
     * move: the OOM, with the pool unchanged */
    as_block blk;
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 16 * MIB, 0, &e, &blk), AS_POLICY_OOM);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 96 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* Ranges with every chunk mapped are searched first (moe_like's allocation 538 on the
 * H200): a 50 MiB request takes a mapped 60 MiB range over a 56 MiB one whose chunk was
 * moved away by a growth. Threshold max: only the growth unmaps. */
static void async_mapped_ranges_first(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "backend:cudaMallocAsync", AS_CAPACITY_NONE) == 0);
    static const uint64_t mib[] = {8, 56, 8, 24, 1, 60, 1}; /* [0,8) [8,64) ... [157,158) */
    uint64_t id[7], x, y;
    as_block blk[7], bx, by;
    for (int i = 0; i < 7; i++)
        CU_ASSERT_EQUAL(ph_alloc_id(&t, mib[i] * MIB, 0, &id[i], &blk[i]), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 160 * MIB); /* chunks 0..4 */
    CU_ASSERT_EQUAL(ph_free(&t, id[1], 0), 0);         /* [8, 64): chunk 1 holds nothing */
    /* 60 MiB fits no range: at 158 MiB it needs chunks 5 and 6; chunk 1 moves to one */
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 60 * MIB, 0, &x, &bx), 0);
    CU_ASSERT_EQUAL(bx.addr, blk[6].addr + MIB);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 192 * MIB);
    CU_ASSERT_EQUAL(ph_stats(&t).device_releases, 1);
    CU_ASSERT_EQUAL(ph_free(&t, id[5], 0), 0); /* [97, 157): all mapped */
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 50 * MIB, 0, &y, &by), 0);
    CU_ASSERT_EQUAL(by.addr, blk[5].addr); /* not blk[1]'s smaller range */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 192 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* The H200's pool on the kvcache trace (replay/data/validate-h200/async/async_runs.csv.zst,
 * threshold 0): at 199,229,440 B it fails at allocation 12527; at 201,326,592 B it
 * completes with that peak reserved. */
static void async_kvcache_gpu(void)
{
    static char out[8192], err[2048], args[1024];
    char trace[512];
    snprintf(trace, sizeof trace, "%s", tu_tmp(".zst"));
    snprintf(args, sizeof args,
             "gen kvcache requests=40 layers=4 output_mean=128 prompt_mean=256 max_batch=16 "
             "-o '%s'",
             trace);
    CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    snprintf(args, sizeof args, "run -f csv -p cudamallocasync -c 199229440 -c 201326592 '%s'",
             trace);
    CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    /* capacity,completed,oom,oom_event,oom_alloc ... peak_reserved */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ",199229440,0,1,"));
    const char *l = strstr(out, ",199229440,0,1,");
    if (l) {
        long ev = 0, alloc = 0;
        CU_ASSERT_EQUAL(sscanf(l, ",199229440,0,1,%ld,%ld,", &ev, &alloc), 2);
        CU_ASSERT_EQUAL(alloc, 12527);
    }
    const char *c = strstr(out, ",201326592,1,0,");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    /* peak requested (the GPU's used high), allocated, reserved (the GPU's reserved high) */
    CU_ASSERT_PTR_NOT_NULL(strstr(c, ",170745856,170745856,201326592,"));
}

CU_TestInfo test_cudamallocasync[] = {
    {"growth_and_reuse", async_growth_and_reuse},
    {"unmapped_range_is_free", async_unmapped_range_is_free},
    {"equal_ranges_first_freed", async_equal_ranges_first_freed},
    {"threshold_keeps", async_threshold_keeps},
    {"growth_moves_free_chunks", async_growth_moves_free_chunks},
    {"mapped_ranges_first", async_mapped_ranges_first},
    {"kvcache_as_the_gpu", async_kvcache_gpu},
    CU_TEST_INFO_NULL,
};
