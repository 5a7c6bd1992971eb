/*
 * test_nocache.c - nocache pays one device reservation per request and one release per
 * free, each exactly the request rounded up to 2 MiB; a pending free holds its memory.
 */
#include <CUnit/CUnit.h>

#include "fuzz/policy_harness.h"

#define MIB PH_MIB

static void nocache_device_calls(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "nocache", AS_CAPACITY_NONE) == 0);
    /* 1 B -> 2 MiB, 2 MiB -> 2 MiB, 2 MiB + 1 -> 4 MiB, 100 MiB -> 100 MiB. */
    static const uint64_t sizes[] = {1, 2 * MIB, 2 * MIB + 1, 100 * MIB};
    static const uint64_t held[] = {2 * MIB, 2 * MIB, 4 * MIB, 100 * MIB};
    uint64_t id[4], total = 0;
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_NOT_EQUAL(ph_alloc(&t, sizes[i], &id[i]), 0);
        CU_ASSERT_EQUAL(t.blk[id[i]].size, held[i]);
        total += held[i];
    }
    as_policy_stats s = ph_stats(&t);
    CU_ASSERT_EQUAL(s.device_reserves, 4);
    CU_ASSERT_EQUAL(s.reserved, total);
    CU_ASSERT_EQUAL(s.allocated, total);
    CU_ASSERT_EQUAL(s.segments, 4);
    CU_ASSERT_EQUAL(ph_dev(&t).reserves, 4);
    /* Pending: memory stays until the FREE. */
    CU_ASSERT_EQUAL(ph_free(&t, id[3], AS_FREE_PENDING), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, total);
    CU_ASSERT_EQUAL(ph_free(&t, id[3], AS_FREE_COMPLETE), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, total - 100 * MIB);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(ph_free(&t, id[i], 0), 0);
    s = ph_stats(&t);
    CU_ASSERT_EQUAL(s.reserved, 0);
    CU_ASSERT_EQUAL(s.device_releases, 4);
    CU_ASSERT_EQUAL(ph_dev(&t).releases, 4);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

static void nocache_oom(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "nocache", 10 * MIB) == 0);
    uint64_t a, b;
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 7 * MIB, &a), 0); /* 8 MiB */
    as_block blk;
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 3 * MIB, 0, &b, &blk), AS_POLICY_OOM);
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 2 * MIB, 0, &b, &blk), 0);
    CU_ASSERT_EQUAL(ph_dev(&t).refusals, 1);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

CU_TestInfo test_nocache[] = {
    {"device_calls", nocache_device_calls},
    {"oom", nocache_oom},
    CU_TEST_INFO_NULL,
};
