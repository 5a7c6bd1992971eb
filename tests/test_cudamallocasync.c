/*
 * test_cudamallocasync.c - the stream-ordered pool's model: growth in multiples of 32 MiB
 * (a lone small allocation reserves 32 MiB, as on the H200), reuse of freed memory, the
 * release threshold deciding what a synchronisation gives back, and the refused growth
 * that trims first and then fails. Figures are hand-computed from those rules.
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
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 32 * MIB); /* 1 B: one 32 MiB step */
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 20 * MIB, &b), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 32 * MIB); /* fits the rest of the step */
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 40 * MIB, &c), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 96 * MIB); /* 40 MiB: 64 MiB more */
    /* threshold 0 (CUDA's default): a range whose last block goes is given back */
    CU_ASSERT_EQUAL(ph_free(&t, c, 0), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 32 * MIB);
    CU_ASSERT_EQUAL(ph_free(&t, b, 0), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 32 * MIB); /* a is still in it */
    CU_ASSERT_EQUAL(ph_free(&t, a, 0), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 0);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

static void async_threshold_keeps(void)
{
    ph t;
    /* 64 MiB threshold: the pool keeps free memory while it holds no more than that */
    CU_ASSERT_FATAL(ph_open(&t, "cudamallocasync,release_threshold=64M", AS_CAPACITY_NONE) == 0);
    uint64_t a, b, c;
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 30 * MIB, &a), 0);
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 30 * MIB, &b), 0);
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 30 * MIB, &c), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 96 * MIB);
    CU_ASSERT_EQUAL(ph_free(&t, c, 0), 0); /* 96 - 32 >= 64: trimmed */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 64 * MIB);
    CU_ASSERT_EQUAL(ph_free(&t, b, 0), 0); /* 64 - 32 < 64: kept */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 64 * MIB);
    uint64_t d;
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 30 * MIB, &d), 0); /* reuses b's range */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 64 * MIB);
    CU_ASSERT_EQUAL(ph_stats(&t).device_reserves, 3);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

static void async_oom_trims_then_fails(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "backend:cudaMallocAsync", 96 * MIB) == 0); /* never trims */
    uint64_t a, b, c;
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 20 * MIB, &a), 0);
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 20 * MIB, &b), 0); /* 20 + 20 > 32: a second range */
    CU_ASSERT_EQUAL(ph_free(&t, b, 0), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 64 * MIB); /* kept */
    /* 40 MiB needs 64 more: refused at 128 > 96, b's range is trimmed, 96 fits */
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 40 * MIB, &c), 0);
    as_policy_stats s = ph_stats(&t);
    CU_ASSERT_EQUAL(s.reserved, 96 * MIB);
    CU_ASSERT_EQUAL(s.retries, 1);
    /* 25 MiB more: no free range fits it (12 and 24 MiB), 32 more is refused, nothing is
     * free to trim: the OOM, with the pool unchanged */
    as_block blk;
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 25 * MIB, 0, &b, &blk), AS_POLICY_OOM);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 96 * MIB);
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
    {"threshold_keeps", async_threshold_keeps},
    {"oom_trims_then_fails", async_oom_trims_then_fails},
    {"kvcache_as_the_gpu", async_kvcache_gpu},
    CU_TEST_INFO_NULL,
};
