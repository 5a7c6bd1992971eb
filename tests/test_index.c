/*
 * test_index.c - the free-block indexes of policies/common.h (the address-ordered B+ tree,
 * the binned size index, whose crowded bins are oset.h treaps, the pairing heap by size)
 * against a naive reference: random inserts, removes, resizes and replacements, with every
 * answer of find and max compared to a scan of all blocks, and each index's own check() run
 * as it goes.
 */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "../policies/common.h"
#include "util.h"

enum { NB = 1500, OPS = 30000 };

typedef enum { IX_BTREE, IX_BINS, IX_PHEAP } ix_kind;

typedef struct ix {
    ix_kind kind;
    as_heap h;
    as_btree bt;
    as_bins bins;
    uint32_t ph; /* pairing heap root */
    int in[NB + 1], nin;
    uint64_t rng;
} ix;

static uint64_t rnd(ix *x, uint64_t n)
{
    return tu_rand(&x->rng) % n;
}

/* Sizes with many ties and a few large ones, so that order among equals matters. */
static uint64_t rnd_size(ix *x)
{
    uint64_t r = rnd(x, 10);
    if (r < 6)
        return 1 + rnd(x, 24);
    if (r < 9)
        return 1 + rnd(x, 4096);
    return 1 + rnd(x, 1ull << 40);
}

/* An address no block in the index has: high bits random, low bits the block's own
 * index. */
static uint64_t fresh_addr(ix *x, uint32_t b)
{
    return (rnd(x, 1ull << 30) << 12) | b;
}

static void op_insert(ix *x, uint32_t b)
{
    switch (x->kind) {
    case IX_BTREE:
        CU_ASSERT_FATAL(as_btree_reserve(&x->bt, 1) == 0);
        as_btree_insert(&x->h, &x->bt, b);
        break;
    case IX_BINS:
        as_bins_insert(&x->h, &x->bins, b);
        break;
    case IX_PHEAP:
        as_pheap_insert(&x->h, &x->ph, b);
        break;
    }
    x->h.b[b].indexed = 1;
    x->in[b] = 1;
    x->nin++;
}

static void op_remove(ix *x, uint32_t b)
{
    switch (x->kind) {
    case IX_BTREE:
        as_btree_remove(&x->h, &x->bt, b);
        break;
    case IX_BINS:
        as_bins_remove(&x->h, &x->bins, b);
        break;
    case IX_PHEAP:
        as_pheap_remove(&x->h, &x->ph, b);
        break;
    }
    x->h.b[b].indexed = 0;
    x->in[b] = 0;
    x->nin--;
}

static uint32_t op_find(ix *x, uint64_t want)
{
    switch (x->kind) {
    case IX_BTREE:
        return as_btree_find(&x->h, &x->bt, want);
    case IX_PHEAP:
        return AS_NIL; /* no search: only the max is compared */
    default:
        return as_bins_find(&x->h, &x->bins, want);
    }
}

static uint64_t op_max(ix *x)
{
    switch (x->kind) {
    case IX_BTREE:
        return as_btree_max(&x->bt);
    case IX_PHEAP:
        return x->ph ? x->h.b[x->ph].size : 0;
    default:
        return as_bins_max(&x->h, &x->bins);
    }
}

static int op_check(ix *x, as_check_failure *f)
{
    switch (x->kind) {
    case IX_BTREE:
        return as_btree_check(&x->h, &x->bt, f);
    case IX_PHEAP:
        return as_pheap_check(&x->h, x->ph, (uint64_t)x->nin, f);
    default:
        return as_bins_check(&x->h, &x->bins, f);
    }
}

/* The naive answer: first fit is the lowest address with size >= want; best fit the
 * smallest (size, addr) with size >= want. */
static uint32_t naive_find(const ix *x, uint64_t want)
{
    const as_blk *B = x->h.b;
    uint32_t best = AS_NIL;
    if (x->kind == IX_PHEAP)
        return AS_NIL;
    for (uint32_t b = 1; b <= NB; b++) {
        if (!x->in[b] || B[b].size < want)
            continue;
        if (!best)
            best = b;
        else if (x->kind == IX_BTREE) {
            if (B[b].addr < B[best].addr)
                best = b;
        } else if (B[b].size < B[best].size ||
                   (B[b].size == B[best].size && B[b].addr < B[best].addr)) {
            best = b;
        }
    }
    return best;
}

static uint64_t naive_max(const ix *x)
{
    uint64_t m = 0;
    for (uint32_t b = 1; b <= NB; b++)
        if (x->in[b] && x->h.b[b].size > m)
            m = x->h.b[b].size;
    return m;
}

static void run_index(ix_kind kind, const char *name)
{
    ix *x = calloc(1, sizeof *x);
    CU_ASSERT_FATAL(x != NULL);
    x->kind = kind;
    x->rng = tu_seed(name);
    CU_ASSERT_FATAL(as_heap_init(&x->h, NULL, NULL) == 0);
    free(x->h.b);
    x->h.b = aligned_alloc(64, (NB + 1) * sizeof *x->h.b);
    CU_ASSERT_FATAL(x->h.b != NULL);
    memset(x->h.b, 0, (NB + 1) * sizeof *x->h.b);
    x->h.nb = x->h.cap_b = NB + 1;
    x->h.b[0].state = AS_BLK_DEAD;
    for (uint32_t b = 1; b <= NB; b++)
        x->h.b[b].state = AS_BLOCK_FREE;
    as_btree_init(&x->bt);
    as_bins_init(&x->bins);
    as_blk *B = x->h.b;
    as_check_failure f = {{0}};
    unsigned fails = 0;
    int saw_treap = 0; /* the bins test must reach crowded (treap) bins */
    for (int op = 0; op < OPS && fails < 5; op++) {
        uint32_t b = 1 + (uint32_t)rnd(x, NB);
        /* Grow to about 2/3 full, then churn around it (phases of mostly inserts, then
         * mostly removes, cross the B+ tree's split and collapse paths many times). */
        int grow = (op / 3000) % 2 == 0;
        uint64_t r = rnd(x, 100);
        if (!x->in[b] && r < (grow ? 80u : 30u)) {
            B[b].size = rnd_size(x);
            B[b].addr = fresh_addr(x, b);
            op_insert(x, b);
        } else if (x->in[b] && r < (grow ? 15u : 60u)) {
            op_remove(x, b);
        } else if (x->in[b] && r < 80) {
            /* A size change in place (coalescing, or a split shrinking the block). */
            if (kind == IX_BTREE) {
                B[b].size = rnd_size(x);
                as_btree_resized(&x->h, &x->bt, b);
            } else if (kind == IX_BINS && r < 70) {
                /* Out of the bin it was filed in after the size has changed (firstfit's
                 * oversize blocks). */
                B[b].size = rnd_size(x);
                as_bins_remove(&x->h, &x->bins, b);
                x->h.b[b].indexed = 0;
                x->in[b] = 0;
                x->nin--;
                op_insert(x, b);
            } else {
                op_remove(x, b);
                B[b].size = rnd_size(x);
                op_insert(x, b);
            }
        } else if (x->in[b] && kind == IX_BTREE) {
            /* A split's tail taking the block's place: same address order, new node. */
            uint32_t nw = 1 + (uint32_t)rnd(x, NB);
            if (x->in[nw])
                continue;
            B[nw].addr = B[b].addr;
            B[nw].size = rnd_size(x);
            as_btree_replace(&x->h, &x->bt, b, nw);
            B[b].indexed = 0;
            x->in[b] = 0;
            B[b].addr = fresh_addr(x, b);
            B[nw].indexed = 1;
            x->in[nw] = 1;
        }
        for (int q = 0; q < 4; q++) {
            uint64_t want = rnd_size(x);
            uint32_t got = op_find(x, want), exp = naive_find(x, want);
            if (got != exp) {
                fails++;
                CU_FAIL("find disagrees with the naive search");
            }
        }
        for (unsigned fl = 0; kind == IX_BINS && fl < AS_BINS_FL; fl++)
            saw_treap |= x->bins.treap[fl] != 0;
        if (op_max(x) != naive_max(x)) {
            fails++;
            CU_FAIL("max disagrees with the naive scan");
        }
        if (op % 64 == 0 && op_check(x, &f) != 0) {
            fails++;
            CU_FAIL(f.msg);
        }
    }
    CU_ASSERT_EQUAL(op_check(x, &f), 0);
    if (kind == IX_BINS)
        CU_ASSERT(saw_treap);
    /* Empty it completely: the B+ tree collapses back to nothing. */
    for (uint32_t b = 1; b <= NB; b++)
        if (x->in[b])
            op_remove(x, b);
    CU_ASSERT_EQUAL(op_find(x, 1), AS_NIL);
    CU_ASSERT_EQUAL(op_max(x), 0);
    CU_ASSERT_EQUAL(op_check(x, &f), 0);
    if (kind == IX_BTREE)
        CU_ASSERT_EQUAL(x->bt.root, AS_NIL);
    as_btree_fini(&x->bt);
    free(x->h.b);
    free(x->h.s);
    free(x);
}

static void index_btree(void)
{
    run_index(IX_BTREE, "index_btree");
}
static void index_bins(void)
{
    run_index(IX_BINS, "index_bins");
}

static void index_pheap(void)
{
    run_index(IX_PHEAP, "index_pheap");
}

/* One bin far more crowded than any list: 70,000 free blocks of one size (a crafted trace
 * of small allocations with live spacers between them makes this). The bin's count must
 * not wrap (it was 16 bits, and at 65,536 blocks the bin took its treap for an empty
 * list); best fit over equal sizes is the lowest address. */
static void index_bins_crowded(void)
{
    enum { NC = 70000 };
    as_heap h;
    as_bins bins;
    as_check_failure f = {{0}};
    CU_ASSERT_FATAL(as_heap_init(&h, NULL, NULL) == 0);
    free(h.b);
    h.b = aligned_alloc(64, (NC + 1) * sizeof *h.b);
    CU_ASSERT_FATAL(h.b != NULL);
    memset(h.b, 0, (NC + 1) * sizeof *h.b);
    h.nb = h.cap_b = NC + 1;
    h.b[0].state = AS_BLK_DEAD;
    as_bins_init(&bins);
    for (uint32_t b = 1; b <= NC; b++) { /* highest address first: each insert is a new front */
        h.b[b].state = AS_BLOCK_FREE;
        h.b[b].size = 4096;
        h.b[b].addr = (uint64_t)(NC + 1 - b) << 13;
        as_bins_insert(&h, &bins, b);
        h.b[b].indexed = 1;
    }
    CU_ASSERT_EQUAL(as_bins_check(&h, &bins, &f), 0);
    CU_ASSERT_EQUAL(as_bins_find(&h, &bins, 4096), NC);
    CU_ASSERT_EQUAL(as_bins_find(&h, &bins, 4097), AS_NIL);
    for (uint32_t b = NC; b > 10; b--) { /* lowest addresses out, one at a time */
        as_bins_remove(&h, &bins, b);
        h.b[b].indexed = 0;
        if (b % 9973 == 0) {
            CU_ASSERT_EQUAL(as_bins_find(&h, &bins, 1), b - 1);
            CU_ASSERT_EQUAL(as_bins_check(&h, &bins, &f), 0);
        }
    }
    CU_ASSERT_EQUAL(as_bins_find(&h, &bins, 1), 10);
    CU_ASSERT_EQUAL(as_bins_check(&h, &bins, &f), 0);
    free(h.b);
    free(h.s);
}

CU_TestInfo test_index[] = {
    {"btree_vs_naive", index_btree},
    {"bins_vs_naive", index_bins},
    {"pheap_vs_naive", index_pheap},
    {"bins_crowded", index_bins_crowded},
    CU_TEST_INFO_NULL,
};
