/*
 * buddy.c - the binary buddy system (Knowlton 1965; Knuth TAOCP 2.5).
 *
 * Segments of 2^max_order bytes are cut into power-of-two blocks; a request gets the
 * block of order max(ceil(log2 size), min_order), taken from the smallest non-empty
 * order (a bitmap of orders: O(1)) and halved down to size. A freed block merges with
 * its buddy, the block at offset ^ size within the segment, only while that buddy is
 * wholly free and the same size, then moves up an order. Requests above 2^max_order get
 * a segment of their own power of two. Because buddies are physical neighbours, the
 * buddy is found through the block chain with no lookup table. Invariant: every block is
 * a power of two aligned to its size within its segment, and no free block has a free
 * buddy of its own size (merging is complete).
 */
#include "builtin.h"
#include "common.h"

#define ORDERS 64

typedef struct buddy {
    as_heap h;
    unsigned min_order, max_order;
    int64_t release;
    uint64_t omap; /* bit k: the order-k list is non-empty */
    uint32_t head[ORDERS];
} buddy;

enum { K_MIN, K_MAX, K_RELEASE, K_N };

static const as_knob knobs[K_N] = {
    [K_MIN] = {.name = "min_order",
               .type = AS_KNOB_INT,
               .unit = "log2 bytes",
               .def = 9,
               .min = 8,
               .max = 20,
               .help = "smallest block, 2^min_order bytes (9 = 512 B)"},
    [K_MAX] = {.name = "max_order",
               .type = AS_KNOB_INT,
               .unit = "log2 bytes",
               .def = 26,
               .min = 21,
               .max = 40,
               .help = "segment size and largest buddy block, 2^max_order bytes (26 = 64 MiB)"},
    [K_RELEASE] = AS_KNOB_RELEASE(AS_RELEASE_OOM),
};

static unsigned order_of(uint64_t size)
{
    return as_log2_floor(size);
}

AS_HOT void ix_insert(as_heap *h, uint32_t b)
{
    buddy *s = (buddy *)h;
    unsigned k = order_of(h->b[b].size);
    as_blk *x = &h->b[b];
    x->l = AS_NIL;
    x->r = s->head[k];
    if (x->r)
        h->b[x->r].l = b;
    s->head[k] = b;
    s->omap |= 1ull << k;
}

AS_HOT void ix_remove(as_heap *h, uint32_t b)
{
    buddy *s = (buddy *)h;
    as_blk *x = &h->b[b];
    if (x->r)
        h->b[x->r].l = x->l;
    if (x->l) {
        h->b[x->l].r = x->r;
        return;
    }
    unsigned k = order_of(x->size);
    s->head[k] = x->r;
    if (!x->r)
        s->omap &= ~(1ull << k);
}

static const as_index_ops index_ops = {.insert = ix_insert, .remove = ix_remove};

static int bd_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    buddy *s = st;
    int rc = as_heap_init(&s->h, dev, &index_ops);
    if (rc)
        return rc;
    s->min_order = (unsigned)cfg[K_MIN].i;
    s->max_order = (unsigned)cfg[K_MAX].i;
    s->release = cfg[K_RELEASE].i;
    return 0;
}

static int bd_alloc(void *st, const as_request *req, as_block *out)
{
    buddy *s = st;
    if (req->size > AS_REQUEST_MAX)
        return AS_POLICY_OOM;
    unsigned k = as_log2_ceil(req->size);
    if (k < s->min_order)
        k = s->min_order;
    uint32_t b;
    uint64_t m = s->omap & (~0ull << k);
    if (m) {
        b = s->head[__builtin_ctzll(m)];
    } else {
        /* The segment is 2^max_order, or the request's own power of two when larger (and
         * never below the device granularity). */
        unsigned seg = k > s->max_order ? k : s->max_order;
        int rc = as_heap_grow_or_release(&s->h, 1ull << seg, s->release, &b);
        if (rc)
            return rc;
    }
    as_heap_unindex_ix(&s->h, &index_ops, b);
    /* Halve down to order k; each upper half becomes a free block of its order. */
    for (unsigned j = order_of(s->h.b[b].size); j > k; j--) {
        uint32_t tail;
        int rc = as_heap_split_(&s->h, b, 1ull << (j - 1), &tail);
        if (rc) {
            as_heap_index_ix(&s->h, &index_ops, b);
            return rc;
        }
        as_heap_index_ix(&s->h, &index_ops, tail);
    }
    return as_heap_take_ix(&s->h, &index_ops, b, 1ull << k, 0, req, out);
}

static int bd_free(void *st, uint64_t handle, unsigned flags)
{
    buddy *s = st;
    as_heap *h = &s->h;
    uint32_t b;
    int rc = as_heap_free_mark(h, handle, flags, &b);
    if (rc || !b)
        return rc;
    for (;;) {
        const as_blk *x = &h->b[b];
        const as_seg *g = &h->s[x->seg];
        uint64_t sz = x->size, off = x->addr - g->addr;
        if (sz >= g->size)
            break;
        uint32_t bud = (off & sz) ? x->prev : x->next;
        if (!bud || h->b[bud].state != AS_BLOCK_FREE || h->b[bud].size != sz)
            break;
        as_heap_unindex_ix(h, &index_ops, bud);
        uint32_t left = (off & sz) ? bud : b;
        as_heap_merge_next_(h, left);
        b = left;
    }
    as_heap_index_ix(h, &index_ops, b);
    return as_heap_after_free(h, b, s->release);
}

static int bd_empty_cache(void *st)
{
    return as_heap_release_empty(&((buddy *)st)->h, NULL);
}

static void bd_stats(const void *st, as_policy_stats *out)
{
    const buddy *s = st;
    as_heap_stats(&s->h, out);
    out->largest_free = s->omap ? 1ull << as_log2_floor(s->omap) : 0;
}

static int bd_check(const void *st, as_check_failure *f)
{
    const buddy *s = st;
    const as_heap *h = &s->h;
    int rc = as_heap_check(h, 0, f);
    if (rc)
        return rc;
    for (uint32_t si = 1; si < h->ns; si++) {
        const as_seg *g = &h->s[si];
        if (!g->head)
            continue;
        if (g->size & (g->size - 1))
            return as_check_fail(f, "segment %#llx size %llu is not a power of 2",
                                 (unsigned long long)g->addr, (unsigned long long)g->size);
        for (uint32_t b = g->head; b; b = h->b[b].next) {
            const as_blk *x = &h->b[b];
            uint64_t off = x->addr - g->addr;
            if ((x->size & (x->size - 1)) || x->size < 1ull << s->min_order || off % x->size)
                return as_check_fail(f, "block %#llx+%llu is not a buddy block of its segment",
                                     (unsigned long long)x->addr, (unsigned long long)x->size);
            if (x->state != AS_BLOCK_FREE || x->size == g->size)
                continue;
            uint32_t bud = (off & x->size) ? x->prev : x->next;
            if (bud && h->b[bud].state == AS_BLOCK_FREE && h->b[bud].size == x->size)
                return as_check_fail(f, "free buddies %#llx and %#llx were not merged",
                                     (unsigned long long)x->addr,
                                     (unsigned long long)h->b[bud].addr);
        }
    }
    uint64_t n = 0;
    for (unsigned k = 0; k < ORDERS; k++) {
        if (!!(s->omap >> k & 1) != (s->head[k] != AS_NIL))
            return as_check_fail(f, "order bitmap bit %u disagrees with its list", k);
        uint32_t prev = AS_NIL;
        for (uint32_t b = s->head[k]; b; b = h->b[b].r) {
            if (++n > h->nfree)
                return as_check_fail(f, "order lists hold more blocks than are free");
            const as_blk *x = &h->b[b];
            if (x->state != AS_BLOCK_FREE || x->size != 1ull << k || x->l != prev)
                return as_check_fail(f, "block %#llx+%llu is wrongly on the order-%u list",
                                     (unsigned long long)x->addr, (unsigned long long)x->size, k);
            prev = b;
        }
    }
    if (n != h->nfree)
        return as_check_fail(f, "order lists hold %llu blocks, %llu are free",
                             (unsigned long long)n, (unsigned long long)h->nfree);
    if (s->release == AS_RELEASE_ALWAYS && h->empty)
        return as_check_fail(f, "release=always but an empty segment is still held");
    return 0;
}

static int bd_walk(const void *st, as_walk_fn fn, void *user)
{
    return as_heap_walk(&((const buddy *)st)->h, fn, user);
}

static void bd_fini(void *st)
{
    as_heap_fini(&((buddy *)st)->h);
}

AS_BUILTIN_ENTRIES(buddy, bd_alloc, bd_free)

const as_policy as_policy_buddy = {
    .name = "buddy",
    .summary = "binary buddy system: power-of-two blocks, merging only true buddies",
    .abi = AS_POLICY_ABI,
    .knobs = knobs,
    .n_knobs = K_N,
    .state_size = sizeof(buddy),
    .init = bd_init,
    .alloc = bd_alloc,
    .free = bd_free,
    .empty_cache = bd_empty_cache,
    .stats = bd_stats,
    .check = bd_check,
    .walk = bd_walk,
    .fini = bd_fini,
};
