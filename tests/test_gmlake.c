/*
 * test_gmlake.c - GMLake's rules on hand-built sequences: PyTorch 2.0's sizes over 2 MiB
 * chunks, stitching of free blocks that are not contiguous without physical memory, the
 * reuse of a cached stitched block (whole only, within reuseLimit), its fragmented state
 * while another block uses one of its chunks, fragLimit, the paper's S4 (reAlloc) and
 * empty_cache. Every figure follows from those rules (policies/gmlake.c's comment).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "fuzz/policy_harness.h"
#include "util.h"

#define MIB PH_MIB

/* One 60 MiB segment cut into A, B, C of 20 MiB; A and C freed: 40 MiB free in two
 * pieces that no single block covers. Returns B's address (its id in *b). */
static uint64_t two_holes(ph *t, uint64_t *a, uint64_t *b, uint64_t *c)
{
    uint64_t x;
    CU_ASSERT_NOT_EQUAL_FATAL(ph_alloc(t, 60 * MIB, &x), 0);
    CU_ASSERT_EQUAL(ph_free(t, x, 0), 0);
    uint64_t pa = ph_alloc(t, 20 * MIB, a), pb = ph_alloc(t, 20 * MIB, b);
    uint64_t pc = ph_alloc(t, 20 * MIB, c);
    CU_ASSERT(pa && pb == pa + 20 * MIB && pc == pb + 20 * MIB); /* split in address order */
    CU_ASSERT_EQUAL(ph_free(t, *a, 0), 0);
    CU_ASSERT_EQUAL(ph_free(t, *c, 0), 0);
    CU_ASSERT_EQUAL(ph_stats(t).reserved, 60 * MIB);
    return pb;
}

static void gm_sizes(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "gmlake", AS_CAPACITY_NONE) == 0);
    uint64_t i;
    as_block b;
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 1, 0, &i, &b), 0);
    CU_ASSERT_EQUAL(b.size, 512); /* small pool: 512 B blocks of a 2 MiB cudaMalloc */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 2 * MIB);
    CU_ASSERT_EQUAL(ph_dev(&t).reserves, 1);
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 5 * MIB, 0, &i, &b), 0);
    CU_ASSERT_EQUAL(b.size, 6 * MIB); /* large: rounded to 2 MiB, from a 20 MiB segment */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 22 * MIB);
    CU_ASSERT_EQUAL(ph_dev(&t).maps, 1); /* pBlocks are mapped chunks, not cudaMalloc */
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 11 * MIB + 1, 0, &i, &b), 0);
    CU_ASSERT_EQUAL(b.size, 12 * MIB); /* the 14 MiB left of the segment */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 22 * MIB);
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 15 * MIB + 1, 0, &i, &b), 0);
    CU_ASSERT_EQUAL(b.size, 16 * MIB); /* 10 MiB and up: a segment of the rounded size */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 38 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* The 40 MiB request at a 60 MiB capacity: stitched from A and C, no new memory. Without
 * stitching (or below fragLimit) the split segment cannot be given back: OOM. */
static void gm_stitch_without_memory(void)
{
    const char *specs[] = {"gmlake,fraglimit=40M", "gmlake,stitch=false", "gmlake"};
    for (int k = 0; k < 3; k++) {
        ph t;
        CU_ASSERT_FATAL(ph_open(&t, specs[k], 60 * MIB) == 0);
        uint64_t a, b, c, d;
        uint64_t pb = two_holes(&t, &a, &b, &c);
        uint64_t pd = ph_alloc(&t, 40 * MIB, &d);
        as_policy_stats s = ph_stats(&t);
        if (k == 0) {
            CU_ASSERT(pd != 0 && (pd + 40 * MIB <= pb - 20 * MIB || pd >= pb + 40 * MIB));
            CU_ASSERT_EQUAL(s.reserved, 60 * MIB);
            CU_ASSERT_EQUAL(s.allocated, 60 * MIB);
            CU_ASSERT_EQUAL(s.free_bytes, 0);
            CU_ASSERT_EQUAL(ph_dev(&t).maps, 1);    /* the stitched range maps no new page */
            CU_ASSERT_EQUAL(ph_dev(&t).aliases, 2); /* it maps C's chunks, then A's, again */
        } else {
            CU_ASSERT_EQUAL(pd, 0); /* OOM */
            CU_ASSERT_EQUAL(s.reserved, 60 * MIB);
        }
        CU_ASSERT_EQUAL(ph_check(&t), 0);
        ph_close(&t);
    }
}

/* A freed stitched block stays cached whole and serves the next request of its size at
 * the same address; once another block uses one of its chunks it is fragmented and
 * serves nothing until that block is freed. */
static void gm_reuse_and_fragmented(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "gmlake,fraglimit=40M", 60 * MIB) == 0);
    uint64_t a, b, c, d, e, f, g;
    uint64_t pb = two_holes(&t, &a, &b, &c);
    uint64_t pd = ph_alloc(&t, 40 * MIB, &d);
    CU_ASSERT_EQUAL(ph_free(&t, d, 0), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).allocated, 20 * MIB);
    CU_ASSERT_EQUAL(ph_alloc(&t, 40 * MIB, &e), pd); /* the cached sBlock */
    CU_ASSERT_EQUAL(ph_free(&t, e, 0), 0);
    CU_ASSERT_EQUAL(ph_alloc(&t, 20 * MIB, &f), pb - 20 * MIB); /* best fit: A's chunks */
    CU_ASSERT_EQUAL(ph_alloc(&t, 40 * MIB, &g), 0); /* fragmented, and C alone is 20 MiB */
    CU_ASSERT_EQUAL(ph_free(&t, f, 0), 0);          /* A's chunks free again: cached whole */
    CU_ASSERT_EQUAL(ph_alloc(&t, 40 * MIB, &g), pd);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 60 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* A cached sBlock serves a smaller request with its first chunks (C's, then A's, as it
 * stitched them: the largest block first, the higher address among equals); the free
 * rest of A is a block of its own that serves others. */
static void gm_partial_reuse(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "gmlake,fraglimit=40M", 60 * MIB) == 0);
    uint64_t a, b, c, d, e, h, i;
    uint64_t pb = two_holes(&t, &a, &b, &c);
    uint64_t pd = ph_alloc(&t, 40 * MIB, &d);
    CU_ASSERT_EQUAL(ph_free(&t, d, 0), 0);
    as_block be;
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 30 * MIB, 0, &e, &be), 0);
    CU_ASSERT_EQUAL(be.addr, pd);
    CU_ASSERT_EQUAL(be.size, 30 * MIB); /* 10 chunks of C, 5 of A */
    CU_ASSERT_EQUAL(ph_stats(&t).largest_free, 10 * MIB);
    CU_ASSERT_EQUAL(ph_alloc(&t, 10 * MIB, &h), pb - 10 * MIB); /* A's last 10 MiB */
    CU_ASSERT_EQUAL(ph_stats(&t).free_bytes, 0);
    CU_ASSERT_EQUAL(ph_free(&t, e, 0), 0);
    CU_ASSERT_EQUAL(ph_alloc(&t, 20 * MIB, &i), pb + 20 * MIB); /* C is a block again */
    CU_ASSERT_EQUAL(ph_free(&t, i, 0), 0);
    CU_ASSERT_EQUAL(ph_free(&t, h, 0), 0); /* A's halves merge */
    CU_ASSERT_EQUAL(ph_alloc(&t, 20 * MIB, &i), pb - 20 * MIB);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 60 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* reuseLimit 1: the cached 40 MiB sBlock does not serve 30 MiB; a new segment does. */
static void gm_reuse_limit(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "gmlake,fraglimit=40M,reuselimit=1", AS_CAPACITY_NONE) == 0);
    uint64_t a, b, c, d, e;
    two_holes(&t, &a, &b, &c);
    uint64_t pd = ph_alloc(&t, 40 * MIB, &d);
    CU_ASSERT_EQUAL(ph_free(&t, d, 0), 0);
    uint64_t pe = ph_alloc(&t, 30 * MIB, &e);
    CU_ASSERT(pe != 0 && pe != pd);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 90 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* reAlloc (the paper's S4): 60 MiB with 40 MiB free at an 80 MiB capacity: a new 20 MiB
 * block stitched with the two holes; without it the 60 MiB segment does not fit. */
static void gm_realloc(void)
{
    const char *specs[] = {"gmlake,fraglimit=40M,realloc=true", "gmlake,fraglimit=40M"};
    for (int k = 0; k < 2; k++) {
        ph t;
        CU_ASSERT_FATAL(ph_open(&t, specs[k], 80 * MIB) == 0);
        uint64_t a, b, c, d;
        two_holes(&t, &a, &b, &c);
        uint64_t pd = ph_alloc(&t, 60 * MIB, &d);
        CU_ASSERT_EQUAL(pd != 0, k == 0);
        CU_ASSERT_EQUAL(ph_stats(&t).reserved, k == 0 ? 80 * MIB : 60 * MIB);
        CU_ASSERT_EQUAL(ph_check(&t), 0);
        ph_close(&t);
    }
}

/* empty_cache gives back whole free segments and drops cached sBlocks' ranges. */
static void gm_empty_cache(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "gmlake,fraglimit=40M", AS_CAPACITY_NONE) == 0);
    uint64_t a, b, c, d;
    two_holes(&t, &a, &b, &c);
    ph_alloc(&t, 40 * MIB, &d);
    CU_ASSERT_EQUAL(ph_free(&t, d, 0), 0);
    CU_ASSERT_EQUAL(ph_dev(&t).unaliases, 0); /* cached with its mapping */
    CU_ASSERT_EQUAL(t.p->empty_cache(t.st), 0);
    CU_ASSERT_EQUAL(ph_dev(&t).unaliases, 1);         /* dropped: its range unmapped at once */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 60 * MIB); /* B pins the segment */
    CU_ASSERT_EQUAL(ph_free(&t, b, 0), 0);
    CU_ASSERT_EQUAL(t.p->empty_cache(t.st), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 0);
    CU_ASSERT_EQUAL(ph_dev(&t).unmaps, 1);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

CU_TestInfo test_gmlake[] = {
    {"sizes", gm_sizes},
    {"stitch_without_memory", gm_stitch_without_memory},
    {"reuse_and_fragmented", gm_reuse_and_fragmented},
    {"partial_reuse", gm_partial_reuse},
    {"reuse_limit", gm_reuse_limit},
    {"realloc", gm_realloc},
    {"empty_cache", gm_empty_cache},
    CU_TEST_INFO_NULL,
};
