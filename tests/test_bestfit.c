/*
 * test_bestfit.c - the rules that make bestfit itself: the smallest fit wins (lowest
 * address among equals), tails split and frees coalesce, the segment-size rule, maxsplit,
 * and release=none/oom/always. Addresses are relative to the first segment, which the
 * simulated device places at AS_SIMDEV_BASE.
 */
#include <CUnit/CUnit.h>

#include "fuzz/policy_harness.h"

#define MIB PH_MIB
#define BASE AS_SIMDEV_BASE

static void bestfit_smallest_fit(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "bestfit", AS_CAPACITY_NONE) == 0);
    uint64_t id[8];
    /* One 20 MiB segment: [a 2M][s 1M][b 4M][s 1M][c 3M][s 1M][tail 8M]. */
    static const uint64_t sizes[] = {2, 1, 4, 1, 3, 1};
    uint64_t at = BASE;
    for (int i = 0; i < 6; i++) {
        CU_ASSERT_EQUAL(ph_alloc(&t, sizes[i] * MIB, &id[i]), at);
        at += sizes[i] * MIB;
    }
    CU_ASSERT_EQUAL(ph_stats(&t).segments, 1);
    ph_free(&t, id[0], 0);
    ph_free(&t, id[2], 0);
    ph_free(&t, id[4], 0);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    /* Holes 2M @0, 4M @3M, 3M @8M, 8M @12M. A 3 MiB request takes the exact 3M hole
     * (first fit would take the 4M one at 3M). */
    CU_ASSERT_EQUAL(ph_alloc(&t, 3 * MIB, &id[6]), BASE + 8 * MIB);
    /* 1.5 MiB: the smallest hole >= 1.5M is the 2M one at 0. */
    CU_ASSERT_EQUAL(ph_alloc(&t, 3 * MIB / 2, &id[7]), BASE);
    /* 2 MiB: holes now 0.5M @1.5M, 4M @3M, 8M @12M -> the 4M one. */
    uint64_t x;
    CU_ASSERT_EQUAL(ph_alloc(&t, 2 * MIB, &x), BASE + 3 * MIB);
    CU_ASSERT_EQUAL(ph_stats(&t).largest_free, 8 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

static void bestfit_equal_sizes_lowest_address(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "bestfit", AS_CAPACITY_NONE) == 0);
    uint64_t id[6], x;
    for (int i = 0; i < 6; i++)
        ph_alloc(&t, MIB, &id[i]);
    /* Free the 1 MiB blocks at 4M, 2M and 0 (in that order): the next 1 MiB takes 0. */
    ph_free(&t, id[4], 0);
    ph_free(&t, id[2], 0);
    ph_free(&t, id[0], 0);
    CU_ASSERT_EQUAL(ph_alloc(&t, MIB, &x), BASE);
    CU_ASSERT_EQUAL(ph_alloc(&t, MIB, &x), BASE + 2 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

static void bestfit_split_coalesce(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "bestfit", AS_CAPACITY_NONE) == 0);
    uint64_t a, b, c;
    ph_alloc(&t, 1000, &a); /* rounds to 1024 */
    ph_alloc(&t, 1000, &b);
    ph_alloc(&t, 1000, &c);
    as_policy_stats s = ph_stats(&t);
    CU_ASSERT_EQUAL(s.allocated, 3 * 1024);
    CU_ASSERT_EQUAL(s.reserved, 20 * MIB);
    CU_ASSERT_EQUAL(s.free_bytes, 20 * MIB - 3 * 1024);
    /* Free the middle, then its neighbours: everything merges back into one block. */
    ph_free(&t, b, 0);
    CU_ASSERT_EQUAL(ph_stats(&t).largest_free, 20 * MIB - 3 * 1024);
    ph_free(&t, a, 0);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_free(&t, c, 0);
    s = ph_stats(&t);
    CU_ASSERT_EQUAL(s.largest_free, 20 * MIB);
    CU_ASSERT_EQUAL(s.allocated, 0);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    /* The segment rule: requests below `segment` get 20 MiB, bigger ones their size
     * rounded up to 2 MiB (21 MiB + 1 -> 22 MiB). */
    uint64_t x;
    ph_alloc(&t, 21 * MIB + 1, &x);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 42 * MIB);
    CU_ASSERT_EQUAL(t.blk[x].size, 21 * MIB + 512);
    ph_close(&t);
}

static void bestfit_maxsplit(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "bestfit,maxsplit=40", AS_CAPACITY_NONE) == 0);
    uint64_t big, x, y;
    uint64_t big_addr = ph_alloc(&t, 50 * MIB, &big); /* a 50 MiB segment */
    ph_free(&t, big, 0);
    /* A 10 MiB request may not take the oversize 50 MiB block: a new 20 MiB segment. */
    uint64_t xa = ph_alloc(&t, 10 * MIB, &x);
    CU_ASSERT_NOT_EQUAL(xa, big_addr);
    CU_ASSERT_EQUAL(ph_stats(&t).segments, 2);
    /* 45 MiB >= maxsplit takes it (50 < 45 + 20 tolerance), unsplit: 50 MiB handed out. */
    CU_ASSERT_EQUAL(ph_alloc(&t, 45 * MIB, &y), big_addr);
    CU_ASSERT_EQUAL(t.blk[y].size, 50 * MIB);
    CU_ASSERT_EQUAL(ph_stats(&t).allocated, 60 * MIB);
    ph_free(&t, y, 0);
    /* 25 MiB is below maxsplit (40), so the oversize block is refused: a new segment. */
    uint64_t z;
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 25 * MIB, &z), big_addr);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);

    /* Without maxsplit the same 10 MiB request splits the 50 MiB block. */
    CU_ASSERT_FATAL(ph_open(&t, "bestfit", AS_CAPACITY_NONE) == 0);
    big_addr = ph_alloc(&t, 50 * MIB, &big);
    ph_free(&t, big, 0);
    CU_ASSERT_EQUAL(ph_alloc(&t, 10 * MIB, &x), big_addr);
    CU_ASSERT_EQUAL(t.blk[x].size, 10 * MIB);
    ph_close(&t);
}

/* capacity 40 MiB, segment 20: two 15 MiB blocks fill two segments; both freed; then a
 * 30 MiB request needs a 30 MiB segment, which fits only once the empty ones go back. */
static void release_case(const char *spec, int want_rc, uint64_t reserved_after_frees)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, spec, 40 * MIB) == 0);
    uint64_t a, b, c;
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 15 * MIB, &a), 0);
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 15 * MIB, &b), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 40 * MIB);
    ph_free(&t, a, 0);
    ph_free(&t, b, 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, reserved_after_frees);
    as_block blk;
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 30 * MIB, 0, &c, &blk), want_rc);
    as_policy_stats s = ph_stats(&t);
    CU_ASSERT_EQUAL(s.reserved, want_rc == 0 ? 30 * MIB : 40 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

static void bestfit_release(void)
{
    release_case("bestfit,release=none", AS_POLICY_OOM, 40 * MIB);
    release_case("bestfit,release=oom", 0, 40 * MIB);
    release_case("bestfit,release=always", 0, 0);
    /* The OOM path counts one retry and two releases. */
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "bestfit", 40 * MIB) == 0);
    uint64_t a, b, c;
    ph_alloc(&t, 15 * MIB, &a);
    ph_alloc(&t, 15 * MIB, &b);
    ph_free(&t, a, 0);
    as_block blk;
    /* Fails even after the retry released a's segment: b's is in use (20 + 30 > 40). */
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 30 * MIB, 0, &c, &blk), AS_POLICY_OOM);
    ph_free(&t, b, 0);
    as_policy_stats s = ph_stats(&t);
    CU_ASSERT_EQUAL(s.retries, 1);
    CU_ASSERT_EQUAL(s.device_releases, 1); /* a's segment went back during the retry */
    /* empty_cache gives back the rest. */
    CU_ASSERT_EQUAL(t.p->empty_cache(t.st), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 0);
    CU_ASSERT_EQUAL(ph_dev(&t).reserved, 0);
    ph_close(&t);
}

static void bestfit_pending_and_bad_handles(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "bestfit", AS_CAPACITY_NONE) == 0);
    uint64_t a, b;
    uint64_t aa = ph_alloc(&t, MIB, &a);
    CU_ASSERT_EQUAL(ph_free(&t, a, AS_FREE_PENDING), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).allocated, MIB);
    /* Not reusable while pending. */
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, MIB, &b), aa);
    CU_ASSERT_EQUAL(ph_free(&t, a, AS_FREE_PENDING), AS_EINVAL); /* twice */
    CU_ASSERT_EQUAL(ph_free(&t, a, AS_FREE_COMPLETE), 0);
    CU_ASSERT_EQUAL(ph_free(&t, a, AS_FREE_COMPLETE), AS_EINVAL); /* double free */
    CU_ASSERT_EQUAL(t.p->free(t.st, 12345, 0), AS_EINVAL);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

CU_TestInfo test_bestfit[] = {
    {"smallest_fit", bestfit_smallest_fit},
    {"equal_sizes_lowest_address", bestfit_equal_sizes_lowest_address},
    {"split_coalesce", bestfit_split_coalesce},
    {"maxsplit", bestfit_maxsplit},
    {"release", bestfit_release},
    {"pending_and_bad_handles", bestfit_pending_and_bad_handles},
    CU_TEST_INFO_NULL,
};
