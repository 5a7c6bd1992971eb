/*
 * test_firstfit.c - firstfit takes the lowest address that fits (not the smallest block),
 * coalesces, and keeps oversize blocks (maxsplit) away from small requests.
 */
#include <CUnit/CUnit.h>

#include "fuzz/policy_harness.h"

#define MIB PH_MIB
#define BASE AS_SIMDEV_BASE

static void firstfit_lowest_address(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "firstfit", AS_CAPACITY_NONE) == 0);
    uint64_t id[6], x;
    /* One 20 MiB segment: [a 2M][s 1M][b 4M][s 1M][c 3M][s 1M][tail 8M]. */
    static const uint64_t sizes[] = {2, 1, 4, 1, 3, 1};
    for (int i = 0; i < 6; i++)
        ph_alloc(&t, sizes[i] * MIB, &id[i]);
    ph_free(&t, id[0], 0);
    ph_free(&t, id[2], 0);
    ph_free(&t, id[4], 0);
    /* Holes 2M @0, 4M @3M, 3M @8M, 8M @12M. 3 MiB: the lowest hole that fits is the 4M one
     * at 3M (best fit would take the exact 3M hole at 8M). */
    CU_ASSERT_EQUAL(ph_alloc(&t, 3 * MIB, &x), BASE + 3 * MIB);
    /* 1 MiB: the hole at 0. 3 MiB again: now the 3M hole at 8M is the lowest fit. */
    CU_ASSERT_EQUAL(ph_alloc(&t, MIB, &x), BASE);
    CU_ASSERT_EQUAL(ph_alloc(&t, 3 * MIB, &x), BASE + 8 * MIB);
    /* 5 MiB: only the tail fits. */
    CU_ASSERT_EQUAL(ph_alloc(&t, 5 * MIB, &x), BASE + 12 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* Many holes, each 1 MiB bigger than the one before it: the search must find the lowest
 * fitting one wherever it is in the tree. */
static void firstfit_many_holes(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "firstfit,segment=2048", AS_CAPACITY_NONE) == 0);
    enum { N = 40 };
    uint64_t hole[N], sep[N], addr[N], x;
    for (int i = 0; i < N; i++) {
        addr[i] = ph_alloc(&t, (uint64_t)(i + 1) * MIB, &hole[i]);
        ph_alloc(&t, 512, &sep[i]);
    }
    for (int i = N - 1; i >= 0; i--)
        ph_free(&t, hole[i], 0);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    for (int i = N - 1; i >= 0; i -= 7) {
        /* i+1 MiB: holes 0..i-1 are too small, so hole i is the lowest fit. */
        CU_ASSERT_EQUAL(ph_alloc(&t, (uint64_t)(i + 1) * MIB, &x), addr[i]);
    }
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

static void firstfit_maxsplit(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "firstfit,maxsplit=40", AS_CAPACITY_NONE) == 0);
    uint64_t big, x, y;
    uint64_t big_addr = ph_alloc(&t, 50 * MIB, &big);
    ph_free(&t, big, 0);
    /* The oversize block sits at the lowest address but a small request never takes it. */
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, MIB, &x), big_addr);
    CU_ASSERT_EQUAL(ph_stats(&t).segments, 2);
    /* An oversize request does, whole. */
    CU_ASSERT_EQUAL(ph_alloc(&t, 41 * MIB, &y), big_addr);
    CU_ASSERT_EQUAL(t.blk[y].size, 50 * MIB);
    CU_ASSERT_EQUAL(ph_stats(&t).largest_free, 19 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

CU_TestInfo test_firstfit[] = {
    {"lowest_address", firstfit_lowest_address},
    {"many_holes", firstfit_many_holes},
    {"maxsplit", firstfit_maxsplit},
    CU_TEST_INFO_NULL,
};
