/*
 * test_bfc.c - the BFC rules of TensorFlow's bfc_allocator.cc, with the numbers worked by
 * hand: 256 B rounding, best fit by (size, addr) across bins, the split rule
 * (>= 2x the request, or leftover >= max_internal_fragmentation), region doubling, the
 * 0.9 backpedal (once), garbage collection of free regions, and preallocation.
 */
#include <CUnit/CUnit.h>

#include "fuzz/policy_harness.h"

#define MIB PH_MIB
#define KIB 1024ull
#define BASE AS_SIMDEV_BASE

static void bfc_rounding_and_split_rule(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "bfc", AS_CAPACITY_NONE) == 0);
    uint64_t a, b, c, d;
    /* First region: 2 MiB (allow_growth). 1.5 MiB: 2 < 2 x 1.5 and the 0.5 MiB leftover is
     * under 128 MiB, so the whole 2 MiB chunk is handed out. */
    ph_alloc(&t, 3 * MIB / 2, &a);
    CU_ASSERT_EQUAL(t.blk[a].size, 2 * MIB);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 2 * MIB);
    /* Next region doubles to 4 MiB; 1 MiB: 4 >= 2 x 1, split. */
    ph_alloc(&t, MIB, &b);
    CU_ASSERT_EQUAL(t.blk[b].size, MIB);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 6 * MIB);
    /* 2 MiB from the 3 MiB leftover: 3 < 4, not split: 3 MiB handed out. */
    ph_alloc(&t, 2 * MIB, &c);
    CU_ASSERT_EQUAL(t.blk[c].size, 3 * MIB);
    /* 256 B rounding: 1 -> 256, 300 -> 512 (a new 8 MiB region, split). */
    ph_alloc(&t, 1, &d);
    CU_ASSERT_EQUAL(t.blk[d].size, 256);
    ph_alloc(&t, 300, &d);
    CU_ASSERT_EQUAL(t.blk[d].size, 512);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 14 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);

    /* The leftover rule: with max_internal_fragmentation = 512 KiB, the 0.5 MiB leftover
     * of 1.5 MiB in a 2 MiB chunk is enough to split. */
    CU_ASSERT_FATAL(ph_open(&t, "bfc,max_internal_fragmentation=512K", AS_CAPACITY_NONE) == 0);
    ph_alloc(&t, 3 * MIB / 2, &a);
    CU_ASSERT_EQUAL(t.blk[a].size, 3 * MIB / 2);
    ph_close(&t);
}

static void bfc_best_fit_across_bins(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "bfc", AS_CAPACITY_NONE) == 0);
    uint64_t id[8], x;
    /* Region 1 (2 MiB): [a 256K][s 256K][b 768K][s 256K][tail 512K]. */
    static const uint64_t k[] = {256, 256, 768, 256};
    uint64_t at = BASE;
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(ph_alloc(&t, k[i] * KIB, &id[i]), at);
        at += k[i] * KIB;
    }
    ph_free(&t, id[0], 0); /* 256K free @0: bin 10 */
    ph_free(&t, id[2], 0); /* 768K free @512K: bin 11 */
    /* Free: 256K @0 (bin 10), 768K @512K (bin 11), 512K @1.5M (bin 11). A 300 KiB request
     * starts at bin 10 (256K..512K) where nothing fits, then takes the smallest chunk of
     * bin 11: the 512K tail at 1.5M, not the lower 768K one. */
    CU_ASSERT_EQUAL(ph_alloc(&t, 300 * KIB, &x), BASE + 1536 * KIB);
    /* 512K tail was < 2 x 300K: handed out whole. */
    CU_ASSERT_EQUAL(t.blk[x].size, 512 * KIB);
    /* 200 KiB: bin 9 is empty, bin 10 holds the 256K chunk: taken whole (256 < 400). */
    CU_ASSERT_EQUAL(ph_alloc(&t, 200 * KIB, &x), BASE);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

static void bfc_region_doubling(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "bfc", AS_CAPACITY_NONE) == 0);
    uint64_t x;
    /* 1 MiB chunks: regions of 2, 4, 8 MiB (each extension that did not have to grow
     * doubles the next): reserved 2, 6, 14 MiB after 1, 3, 7 allocations. */
    static const uint64_t want[] = {2, 2, 6, 6, 6, 6, 14};
    for (int i = 0; i < 7; i++) {
        ph_alloc(&t, MIB, &x);
        CU_ASSERT_EQUAL(ph_stats(&t).reserved, want[i] * MIB);
    }
    /* The next region would be 16 MiB; 100 MiB doubles it to 128 MiB (grown, so the one
     * after stays 128). */
    ph_alloc(&t, 100 * MIB, &x);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, (14 + 128) * MIB);
    /* 128 < 2 x 100 and the 28 MiB leftover < 128 MiB: the whole region is handed out. */
    CU_ASSERT_EQUAL(t.blk[x].size, 128 * MIB);
    ph_close(&t);
}

/* Capacity 100 MiB but limit 1 GiB, so the device refuses what BFC asks for. */
static void bfc_backpedal(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "bfc,limit=1G", 100 * MIB) == 0);
    uint64_t x;
    as_block blk;
    /* Fill regions of 2, 4, 8, 16 and 32 MiB with 1 MiB chunks: 62 MiB reserved. */
    for (int i = 0; i < 62; i++)
        CU_ASSERT_EQUAL_FATAL(ph_alloc_id(&t, MIB, 0, &x, &blk), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 62 * MIB);
    /* The next region is 64 MiB: refused (62 + 64 > 100). Backpedal: 64 x 0.9 = 57.6 -> 56
     * (2 MiB steps, rounded down), 56 x 0.9 = 50.4 -> 50, 50 x 0.9 = 45 -> 44,
     * 44 x 0.9 = 39.6 -> 38, and 62 + 38 = 100 fits. */
    CU_ASSERT_EQUAL(ph_alloc_id(&t, MIB, 0, &x, &blk), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 100 * MIB);
    CU_ASSERT_EQUAL(ph_dev(&t).refusals, 4);
    for (int i = 0; i < 37; i++)
        CU_ASSERT_EQUAL(ph_alloc_id(&t, MIB, 0, &x, &blk), 0);
    /* Full. The next extension is refused and, backpedal being once only, is not retried:
     * exactly one more refusal, then OOM. */
    CU_ASSERT_EQUAL(ph_alloc_id(&t, MIB, 0, &x, &blk), AS_POLICY_OOM);
    CU_ASSERT_EQUAL(ph_dev(&t).refusals, 5);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

static void bfc_garbage_collection(void)
{
    for (int gc = 0; gc <= 1; gc++) {
        ph t;
        CU_ASSERT_FATAL(ph_open(&t, gc ? "bfc" : "bfc,gc=false", 64 * MIB) == 0);
        uint64_t a, b;
        as_block blk;
        /* 30 MiB: the 2 MiB region size doubles to 32; 32 < 60, handed out whole. */
        ph_alloc(&t, 30 * MIB, &a);
        CU_ASSERT_EQUAL(t.blk[a].size, 32 * MIB);
        ph_free(&t, a, 0);
        /* 40 MiB: no chunk fits, the limit leaves only 32 MiB to extend; GC gives the free
         * 32 MiB region back (64 - 32 + 32 >= 40) and a 64 MiB region is taken. */
        int rc = ph_alloc_id(&t, 40 * MIB, 0, &b, &blk);
        if (gc) {
            CU_ASSERT_EQUAL(rc, 0);
            CU_ASSERT_EQUAL(ph_stats(&t).reserved, 64 * MIB);
            CU_ASSERT_EQUAL(ph_stats(&t).retries, 1);
            CU_ASSERT_EQUAL(blk.size, 64 * MIB);
        } else {
            CU_ASSERT_EQUAL(rc, AS_POLICY_OOM);
            CU_ASSERT_EQUAL(ph_stats(&t).reserved, 32 * MIB);
        }
        CU_ASSERT_EQUAL(ph_check(&t), 0);
        ph_close(&t);
    }
}

static void bfc_preallocation(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "bfc,allow_growth=false,fraction=0.5", 100 * MIB) == 0);
    uint64_t a, b;
    as_block blk;
    /* The first allocation takes the whole limit: 0.5 x 100 MiB = 50 MiB. */
    ph_alloc(&t, KIB, &a);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 50 * MIB);
    CU_ASSERT_EQUAL(ph_stats(&t).segments, 1);
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 49 * MIB, 0, &b, &blk), 0);
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 2 * MIB, 0, &b, &blk), AS_POLICY_OOM);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 50 * MIB);
    ph_close(&t);
}

CU_TestInfo test_bfc[] = {
    {"rounding_and_split_rule", bfc_rounding_and_split_rule},
    {"best_fit_across_bins", bfc_best_fit_across_bins},
    {"region_doubling", bfc_region_doubling},
    {"backpedal", bfc_backpedal},
    {"garbage_collection", bfc_garbage_collection},
    {"preallocation", bfc_preallocation},
    CU_TEST_INFO_NULL,
};
