/*
 * test_grow.c - as_grow (sim/base/grow.c): capacities are `first` doubled, just enough for
 * the request; an overflowing request fails and leaves the array as it was.
 */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdlib.h>

#include "grow.h"

static void grow_doubles(void)
{
    int *a = NULL;
    size_t cap = 0;
    CU_ASSERT_EQUAL(as_grow((void **)&a, &cap, 0, sizeof *a, 16), 0); /* nothing needed */
    CU_ASSERT_PTR_NULL(a);
    CU_ASSERT_EQUAL(as_grow((void **)&a, &cap, 1, sizeof *a, 16), 0);
    CU_ASSERT_EQUAL(cap, 16);
    for (int i = 0; i < 16; i++)
        a[i] = i;
    CU_ASSERT_EQUAL(as_grow((void **)&a, &cap, 16, sizeof *a, 16), 0); /* fits: no change */
    CU_ASSERT_EQUAL(cap, 16);
    CU_ASSERT_EQUAL(as_grow((void **)&a, &cap, 17, sizeof *a, 16), 0);
    CU_ASSERT_EQUAL(cap, 32);
    CU_ASSERT_EQUAL(as_grow((void **)&a, &cap, 200, sizeof *a, 16), 0); /* 32 -> 256 */
    CU_ASSERT_EQUAL(cap, 256);
    int kept = 1;
    for (int i = 0; i < 16; i++)
        kept &= a[i] == i;
    CU_ASSERT(kept);
    free(a);
}

static void grow_overflow(void)
{
    char *a = NULL;
    size_t cap = 0;
    CU_ASSERT_EQUAL(as_grow((void **)&a, &cap, 8, 1, 8), 0);
    char *before = a;
    CU_ASSERT_EQUAL(as_grow((void **)&a, &cap, SIZE_MAX / 2 + 2, 1, 8), -1);
    CU_ASSERT_EQUAL(as_grow((void **)&a, &cap, SIZE_MAX / 16, 64, 8), -1); /* bytes overflow */
    CU_ASSERT_PTR_EQUAL(a, before);
    CU_ASSERT_EQUAL(cap, 8);
    size_t c0 = 0;
    void *p = NULL;
    CU_ASSERT_EQUAL(as_grow(&p, &c0, 1, 1, 0), -1); /* no first capacity: refused */
    free(a);
}

/* The uint32-indexed form: the same doubling, and a need past UINT32_MAX refused before
 * any allocation (an index would wrap). */
static void grow32_bounds(void)
{
    int *a = NULL;
    uint32_t cap = 0;
    CU_ASSERT_EQUAL(as_grow32((void **)&a, &cap, 65, sizeof *a, 64), 0);
    CU_ASSERT_EQUAL(cap, 128);
    CU_ASSERT_EQUAL(as_grow32((void **)&a, &cap, (size_t)UINT32_MAX + 1, 1, 64), -1);
    CU_ASSERT_EQUAL(cap, 128);
    CU_ASSERT_PTR_NOT_NULL(a);
    free(a);
}

CU_TestInfo test_grow[] = {
    {"doubles", grow_doubles},
    {"overflow", grow_overflow},
    {"uint32 tables", grow32_bounds},
    CU_TEST_INFO_NULL,
};
