/*
 * test_buddy.c - buddy rounds to powers of two, halves a segment down to the request,
 * and merges a freed block only with its true buddy (offset ^ size), never with an
 * adjacent free block of the same size that is not its buddy.
 */
#include <CUnit/CUnit.h>

#include "fuzz/policy_harness.h"

#define MIB PH_MIB
#define BASE AS_SIMDEV_BASE

typedef struct frees {
    uint64_t addr[64], size[64];
    int n;
} frees;

static int collect_free(void *user, const as_walk_item *it)
{
    frees *f = user;
    if (it->kind == AS_WALK_BLOCK && it->state == AS_BLOCK_FREE && f->n < 64) {
        f->addr[f->n] = it->addr - BASE;
        f->size[f->n++] = it->size;
    }
    return 0;
}

static frees free_blocks(ph *t)
{
    frees f = {.n = 0};
    t->p->walk(t->st, collect_free, &f);
    return f;
}

static void buddy_rounding_and_split(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "buddy", AS_CAPACITY_NONE) == 0);
    uint64_t a, b, c;
    ph_alloc(&t, 1, &a);
    CU_ASSERT_EQUAL(t.blk[a].size, 512); /* min_order 9 */
    ph_alloc(&t, 3000, &b);
    CU_ASSERT_EQUAL(t.blk[b].size, 4096);
    /* The 64 MiB segment was halved down to 512 B, leaving one free block of each order
     * 9..25 at offset == size; b then took the 4 KiB one. Free: orders 9-11 and 13-25. */
    frees f = free_blocks(&t);
    CU_ASSERT_EQUAL(f.n, 3 + (25 - 13 + 1));
    CU_ASSERT_EQUAL(f.addr[0], 512);
    CU_ASSERT_EQUAL(f.size[0], 512);
    CU_ASSERT_EQUAL(f.addr[3], 8192);
    CU_ASSERT_EQUAL(ph_stats(&t).largest_free, 32 * MIB);
    /* Bigger than the 64 MiB segment: its own power of two (100 MiB -> 128 MiB). */
    ph_alloc(&t, 100 * MIB, &c);
    CU_ASSERT_EQUAL(t.blk[c].size, 128 * MIB);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 192 * MIB);
    ph_free(&t, a, 0);
    ph_free(&t, b, 0);
    ph_free(&t, c, 0);
    f = free_blocks(&t);
    CU_ASSERT_EQUAL(f.n, 2); /* everything merged back: 64 MiB and 128 MiB */
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

static void buddy_true_buddies_only(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "buddy", AS_CAPACITY_NONE) == 0);
    uint64_t id[4];
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(ph_alloc(&t, MIB, &id[i]), BASE + (uint64_t)i * MIB);
    /* B (1M..2M) and C (2M..3M) are adjacent and the same size but not buddies: B's buddy
     * is A at 0, C's is D at 3M. Both stay 1 MiB. */
    ph_free(&t, id[1], 0);
    ph_free(&t, id[2], 0);
    frees f = free_blocks(&t);
    CU_ASSERT_EQUAL(f.addr[0], 1 * MIB);
    CU_ASSERT_EQUAL(f.size[0], MIB);
    CU_ASSERT_EQUAL(f.addr[1], 2 * MIB);
    CU_ASSERT_EQUAL(f.size[1], MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    /* A joins B: 2 MiB at 0; C still alone. */
    ph_free(&t, id[0], 0);
    f = free_blocks(&t);
    CU_ASSERT_EQUAL(f.addr[0], 0);
    CU_ASSERT_EQUAL(f.size[0], 2 * MIB);
    CU_ASSERT_EQUAL(f.addr[1], 2 * MIB);
    CU_ASSERT_EQUAL(f.size[1], MIB);
    /* D joins C, then the two 2 MiB buddies merge, and so on up to the whole segment. */
    ph_free(&t, id[3], 0);
    f = free_blocks(&t);
    CU_ASSERT_EQUAL(f.n, 1);
    CU_ASSERT_EQUAL(f.size[0], 64 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

static void buddy_orders_and_release(void)
{
    ph t;
    CU_ASSERT_FATAL(
        ph_open(&t, "buddy,min_order=12,max_order=22,release=always", AS_CAPACITY_NONE) == 0);
    uint64_t a;
    ph_alloc(&t, 1, &a);
    CU_ASSERT_EQUAL(t.blk[a].size, 4096);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 4 * MIB);
    ph_free(&t, a, 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 0); /* merged to the whole segment, released */
    CU_ASSERT_EQUAL(ph_stats(&t).device_releases, 1);
    ph_close(&t);
}

CU_TestInfo test_buddy[] = {
    {"rounding_and_split", buddy_rounding_and_split},
    {"true_buddies_only", buddy_true_buddies_only},
    {"orders_and_release", buddy_orders_and_release},
    CU_TEST_INFO_NULL,
};
