/*
 * test_knobs.c - the shared rounding rule (PyTorch round_size and
 * roundup_power2_next_division in c10/cuda/CUDACachingAllocator.cpp), checked against
 * examples worked by hand.
 */
#include <CUnit/CUnit.h>

#include "knobs.h"

static void knobs_round_plain(void)
{
    CU_ASSERT_EQUAL(as_round_size(1, 512, NULL), 512);
    CU_ASSERT_EQUAL(as_round_size(512, 512, NULL), 512);
    CU_ASSERT_EQUAL(as_round_size(513, 512, NULL), 1024);
    /* 5 MB = 5,000,000 -> 5,000,192 (next multiple of 512) */
    CU_ASSERT_EQUAL(as_round_size(5000000, 512, NULL), 5000192);
}

static void knobs_round_divisions(void)
{
    uint32_t d4[AS_DIV_INTERVALS], d8[AS_DIV_INTERVALS];
    for (int i = 0; i < AS_DIV_INTERVALS; i++)
        d4[i] = 4, d8[i] = 8;
    /* The threshold: 1200 <= 512*4, so plain 512 rounding gives 1536, not 1280. */
    CU_ASSERT_EQUAL(as_round_size(1200, 512, d4), 1536);
    /* 1,000,000 at d=4: floor pow2 = 524288, step 131072 -> 1,048,576 (stays small). */
    CU_ASSERT_EQUAL(as_round_size(1000000, 512, d4), 1048576);
    /* Powers of two are returned unchanged. */
    CU_ASSERT_EQUAL(as_round_size(1 << 20, 512, d4), 1 << 20);
    /* 5,000,000 at d=8: floor pow2 = 4 MiB, step 512 KiB -> 5 MiB. */
    CU_ASSERT_EQUAL(as_round_size(5000000, 512, d8), 5u << 20);
    /* d = 1 means off. */
    uint32_t d1[AS_DIV_INTERVALS];
    for (int i = 0; i < AS_DIV_INTERVALS; i++)
        d1[i] = 1;
    CU_ASSERT_EQUAL(as_round_size(5000000, 512, d1), 5000192);
}

static void knobs_div_interval(void)
{
    CU_ASSERT_EQUAL(as_div_interval(100), 0);
    CU_ASSERT_EQUAL(as_div_interval((2u << 20) - 1), 0);
    CU_ASSERT_EQUAL(as_div_interval(2u << 20), 1);
    CU_ASSERT_EQUAL(as_div_interval(1ull << 35), 15);
    CU_ASSERT_EQUAL(as_div_interval(1ull << 40), 15);
}

CU_TestInfo test_knobs[] = {
    {"round_plain", knobs_round_plain},
    {"round_divisions", knobs_round_divisions},
    {"div_interval", knobs_div_interval},
    CU_TEST_INFO_NULL,
};
