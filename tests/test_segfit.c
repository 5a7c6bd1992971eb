/*
 * test_segfit.c - segfit's TLSF class mapping at the class boundaries, the good-fit
 * rounding (a block in the request's own class is passed over unless the request is at
 * the class start), pow2 classes, and the split and coalesce switches.
 */
#include <CUnit/CUnit.h>

#include "common.h"
#include "fuzz/policy_harness.h"

#define MIB PH_MIB
#define KIB 1024ull
#define BASE AS_SIMDEV_BASE

static void check_class(uint64_t size, unsigned sl_log2, int search, unsigned fl, unsigned sl)
{
    unsigned f, s;
    as_tlsf_class(size, sl_log2, search, &f, &s);
    CU_ASSERT_EQUAL(f, fl);
    CU_ASSERT_EQUAL(s, sl);
    if (f != fl || s != sl)
        fprintf(stderr, "\n  class(%llu, sl %u, search %d) = (%u,%u), want (%u,%u)\n",
                (unsigned long long)size, sl_log2, search, f, s, fl, sl);
}

static void segfit_class_boundaries(void)
{
    /* sl = 4: [1 MiB, 2 MiB) in 16 classes of 64 KiB. */
    check_class(MIB, 4, 0, 20, 0);
    check_class(MIB + 64 * KIB - 1, 4, 0, 20, 0);
    check_class(MIB + 64 * KIB, 4, 0, 20, 1);
    check_class(2 * MIB - 1, 4, 0, 20, 15);
    check_class(2 * MIB, 4, 0, 21, 0);
    check_class(512, 4, 0, 9, 0);
    check_class(512 + 32, 4, 0, 9, 1);
    /* Searching rounds up to the next class start unless already at one. */
    check_class(MIB, 4, 1, 20, 0);
    check_class(MIB + 1, 4, 1, 20, 1);
    check_class(MIB + 64 * KIB, 4, 1, 20, 1);
    check_class(MIB + 64 * KIB + 1, 4, 1, 20, 2);
    check_class(2 * MIB - 1, 4, 1, 21, 0);
    /* pow2 (sl = 0): one class per power of two; a search goes to the next power. */
    check_class(3 * MIB, 0, 0, 21, 0);
    check_class(3 * MIB, 0, 1, 22, 0);
    check_class(2 * MIB, 0, 1, 21, 0);
    check_class(1ull << 40, 6, 1, 40, 0);
    check_class((1ull << 40) + 1, 6, 1, 40, 1);
}

static void segfit_good_fit(void)
{
    ph t;
    /* sl = 2: [1 MiB, 2 MiB) in classes of 256 KiB. */
    CU_ASSERT_FATAL(ph_open(&t, "segfit,sl=2", AS_CAPACITY_NONE) == 0);
    uint64_t a, b, x;
    uint64_t aa = ph_alloc(&t, 1400 * KIB, &a); /* class [1.25M, 1.5M) once free */
    ph_alloc(&t, MIB, &b);                      /* keeps it from merging with the tail */
    ph_free(&t, a, 0);
    /* 1.3 MiB is inside that class but not at its start: good fit searches from the
     * [1.5M, 1.75M) class up and takes the big tail, not the 1.4 MiB block that fits. */
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 1300 * KIB, &x), aa);
    /* 1.25 MiB is exactly the class start: the 1.4 MiB block is taken. */
    CU_ASSERT_EQUAL(ph_alloc(&t, 1280 * KIB, &x), aa);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);

    CU_ASSERT_FATAL(ph_open(&t, "segfit,classes=pow2", AS_CAPACITY_NONE) == 0);
    aa = ph_alloc(&t, 3584 * KIB, &a); /* 3.5 MiB */
    ph_alloc(&t, MIB, &b);
    ph_free(&t, a, 0);
    /* 3 MiB searches the 4 MiB class: the 3.5 MiB block is passed over; 2 MiB takes it. */
    CU_ASSERT_NOT_EQUAL(ph_alloc(&t, 3 * MIB, &x), aa);
    CU_ASSERT_EQUAL(ph_alloc(&t, 2 * MIB, &x), aa);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

static void segfit_switches(void)
{
    ph t;
    uint64_t a, b;
    /* split=false: the whole fresh 20 MiB segment goes to a 1 MiB request. */
    CU_ASSERT_FATAL(ph_open(&t, "segfit,split=false", AS_CAPACITY_NONE) == 0);
    ph_alloc(&t, MIB, &a);
    CU_ASSERT_EQUAL(t.blk[a].size, 20 * MIB);
    ph_close(&t);
    /* coalesce=false: two freed neighbours stay two blocks. */
    CU_ASSERT_FATAL(ph_open(&t, "segfit,coalesce=false", AS_CAPACITY_NONE) == 0);
    ph_alloc(&t, MIB, &a);
    ph_alloc(&t, MIB, &b);
    ph_free(&t, a, 0);
    ph_free(&t, b, 0);
    as_policy_stats s = ph_stats(&t);
    CU_ASSERT_EQUAL(s.largest_free, 18 * MIB);
    CU_ASSERT_EQUAL(s.free_bytes, 20 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    /* The segment is still wholly free, so empty_cache gives it back. */
    CU_ASSERT_EQUAL(t.p->empty_cache(t.st), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 0);
    ph_close(&t);
    /* coalesce=true: they merge back into the whole segment. */
    CU_ASSERT_FATAL(ph_open(&t, "segfit", AS_CAPACITY_NONE) == 0);
    ph_alloc(&t, MIB, &a);
    ph_alloc(&t, MIB, &b);
    ph_free(&t, a, 0);
    ph_free(&t, b, 0);
    CU_ASSERT_EQUAL(ph_stats(&t).largest_free, 20 * MIB);
    ph_close(&t);
}

/* A segment for a large request is sized to the start of the request's good-fit class, so
 * the same request finds it again once it is free: 100 MiB + 1 at sl = 4 searches the
 * [104, 108) MiB class (steps of 4 MiB in [64, 128)), so the segment is 104 MiB. */
static void segfit_segment_reuse(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "segfit", AS_CAPACITY_NONE) == 0);
    uint64_t a, b;
    uint64_t aa = ph_alloc(&t, 100 * MIB + 1, &a);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 104 * MIB);
    ph_free(&t, a, 0);
    CU_ASSERT_EQUAL(ph_alloc(&t, 100 * MIB + 1, &b), aa);
    CU_ASSERT_EQUAL(ph_stats(&t).segments, 1);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* The shared roundup knob: 5,000,000 B at 4 divisions rounds to 5 MiB (4 MiB interval,
 * steps of 1 MiB); without it to the next 512 B, 5,000,192. */
static void segfit_roundup(void)
{
    ph t;
    uint64_t a;
    CU_ASSERT_FATAL(ph_open(&t, "segfit,roundup=4", AS_CAPACITY_NONE) == 0);
    ph_alloc(&t, 5000000, &a);
    CU_ASSERT_EQUAL(t.blk[a].size, 5 * MIB);
    ph_close(&t);
    CU_ASSERT_FATAL(ph_open(&t, "segfit", AS_CAPACITY_NONE) == 0);
    ph_alloc(&t, 5000000, &a);
    CU_ASSERT_EQUAL(t.blk[a].size, 5000192);
    ph_close(&t);
}

CU_TestInfo test_segfit[] = {
    {"roundup", segfit_roundup},
    {"segment_reuse", segfit_segment_reuse},
    {"class_boundaries", segfit_class_boundaries},
    {"good_fit", segfit_good_fit},
    {"switches", segfit_switches},
    CU_TEST_INFO_NULL,
};
