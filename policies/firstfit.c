/*
 * firstfit.c - address-ordered first fit over device segments, with split and coalesce.
 *
 * A rounded request takes the free block with the lowest address that fits. Free blocks
 * sit in an address-ordered B+ tree whose inner nodes carry the largest size below each
 * child, so the lowest fitting address is found in O(log n) (descend into the first child
 * that can fit; common.h). With maxsplit, oversize blocks (>= maxsplit) are kept apart in
 * a binned (size, addr) index (as_bins, bestfit's): requests below maxsplit never see
 * them, and oversize requests take the smallest that fits within the tolerance (as
 * PyTorch does), since "lowest address among blocks in [req, req + tolerance)" has no
 * O(log n) index. Segments, splitting, coalescing and release follow bestfit. Invariant:
 * as_heap_check; each free block is in exactly the index its size selects.
 */
#include "builtin.h"
#include "common.h"

typedef struct firstfit {
    as_heap h;
    as_btree byaddr;  /* blocks below maxsplit (all blocks when maxsplit is off) */
    as_bins oversize; /* blocks of maxsplit bytes or more, by (size, addr) */
    uint64_t round, maxsplit, segment;
    int64_t release;
    uint32_t div[AS_DIV_INTERVALS];
    int divs; /* some division is on (as_round_req) */
} firstfit;

enum { K_ROUND, K_ROUNDUP, K_MAXSPLIT, K_SEGMENT, K_RELEASE, K_N };

static const as_knob knobs[K_N] = {
    [K_ROUND] = AS_KNOB_ROUND(512),
    [K_ROUNDUP] = AS_KNOB_ROUNDUP,
    [K_MAXSPLIT] = AS_KNOB_MAXSPLIT,
    [K_SEGMENT] = AS_KNOB_SEGMENT(20),
    [K_RELEASE] = AS_KNOB_RELEASE(AS_RELEASE_OOM),
};

static int oversize(const firstfit *s, uint64_t size)
{
    return s->maxsplit && size >= s->maxsplit;
}

AS_HOT void ix_insert(as_heap *h, uint32_t b)
{
    firstfit *s = (firstfit *)h;
    if (oversize(s, h->b[b].size))
        as_bins_insert(h, &s->oversize, b);
    else
        as_btree_insert(h, &s->byaddr, b);
}

/* Takes b out of the index its size `as_size` selected when it went in, b's size may have
 * changed since (the B+ tree follows b's leaf link, the bins b's own record of its bin). */
AS_HOT void remove_as(firstfit *s, uint32_t b, uint64_t as_size)
{
    if (oversize(s, as_size))
        as_bins_remove(&s->h, &s->oversize, b);
    else
        as_btree_remove(&s->h, &s->byaddr, b);
}

AS_HOT void ix_remove(as_heap *h, uint32_t b)
{
    remove_as((firstfit *)h, b, h->b[b].size);
}

AS_HOT void ix_replace(as_heap *h, uint32_t old, uint32_t nw, uint64_t old_size)
{
    firstfit *s = (firstfit *)h;
    if (!oversize(s, old_size) && !oversize(s, h->b[nw].size)) {
        as_btree_replace(h, &s->byaddr, old, nw);
        return;
    }
    remove_as(s, old, old_size);
    ix_insert(h, nw);
}

AS_HOT void ix_resized(as_heap *h, uint32_t b, uint64_t old_size)
{
    firstfit *s = (firstfit *)h;
    if (!oversize(s, old_size) && !oversize(s, h->b[b].size)) {
        as_btree_resized(h, &s->byaddr, b);
        return;
    }
    remove_as(s, b, old_size);
    ix_insert(h, b);
}

static const as_index_ops index_ops = {
    .insert = ix_insert,
    .remove = ix_remove,
    .replace = ix_replace,
    .resized = ix_resized,
};

/* With maxsplit off (the default) every free block is in the B+ tree: the same index
 * without the oversize tests, for the per-event paths (the heap's own calls through h->ix,
 * growth and release, take index_ops, which does the same there). */
AS_HOT void tree_insert(as_heap *h, uint32_t b)
{
    as_btree_insert(h, &((firstfit *)h)->byaddr, b);
}

AS_HOT void tree_remove(as_heap *h, uint32_t b)
{
    as_btree_remove(h, &((firstfit *)h)->byaddr, b);
}

AS_HOT void tree_replace(as_heap *h, uint32_t old, uint32_t nw, uint64_t old_size)
{
    (void)old_size;
    as_btree_replace(h, &((firstfit *)h)->byaddr, old, nw);
}

AS_HOT void tree_resized(as_heap *h, uint32_t b, uint64_t old_size)
{
    (void)old_size;
    as_btree_resized(h, &((firstfit *)h)->byaddr, b);
}

static const as_index_ops tree_ops = {
    .insert = tree_insert,
    .remove = tree_remove,
    .replace = tree_replace,
    .resized = tree_resized,
};

/* For the take of the block the search has just found, or of a new segment's block that
 * growth has just inserted: the tree has not changed since, so its leaf slot hint is exact
 * and the remove or replace of the take needs no check of it. */
AS_HOT void tree_remove_found(as_heap *h, uint32_t b)
{
    as_btree_remove_found(h, &((firstfit *)h)->byaddr, b);
}

AS_HOT void tree_replace_found(as_heap *h, uint32_t old, uint32_t nw, uint64_t old_size)
{
    (void)old_size;
    as_btree_replace_found(h, &((firstfit *)h)->byaddr, old, nw);
}

static const as_index_ops take_ops = {
    .insert = tree_insert,
    .remove = tree_remove_found,
    .replace = tree_replace_found,
    .resized = tree_resized,
};

static int ff_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    firstfit *s = st;
    uint64_t round = (uint64_t)cfg[K_ROUND].i;
    if (round & (round - 1))
        return AS_EINVAL;
    int rc = as_heap_init(&s->h, dev, &index_ops);
    if (rc)
        return rc;
    as_btree_init(&s->byaddr);
    as_bins_init(&s->oversize);
    s->round = round;
    s->maxsplit = (uint64_t)cfg[K_MAXSPLIT].i * AS_MIB;
    s->segment = (uint64_t)cfg[K_SEGMENT].i * AS_MIB;
    s->release = cfg[K_RELEASE].i;
    for (int i = 0; i < AS_DIV_INTERVALS; i++)
        s->div[i] = cfg[K_ROUNDUP].div[i];
    s->divs = as_divs_on(s->div);
    return 0;
}

static int ff_alloc(void *st, const as_request *req, as_block *out)
{
    firstfit *s = st;
    if (req->size > AS_REQUEST_MAX)
        return AS_POLICY_OOM;
    /* A new segment's block and a split tail: two insertions at most. */
    if (as_btree_reserve(&s->byaddr, 2))
        return AS_ENOMEM;
    uint64_t size = as_round_req(req->size, s->round, s->div, s->divs);
    uint32_t b;
    if (!s->maxsplit) {
        b = as_btree_find(&s->h, &s->byaddr, size);
        if (!b) {
            int rc =
                as_heap_grow_or_release(&s->h, as_segment_size(size, s->segment), s->release, &b);
            if (rc)
                return rc;
        }
        return as_heap_take_ix(&s->h, &take_ops, b, size, 1, req, out);
    }
    if (size < s->maxsplit) {
        b = as_btree_find(&s->h, &s->byaddr, size);
    } else {
        b = as_bins_find(&s->h, &s->oversize, size);
        if (b && !as_maxsplit_fits(s->h.b[b].size, size, s->maxsplit, s->segment))
            b = AS_NIL;
    }
    if (!b) {
        int rc = as_heap_grow_or_release(&s->h, as_segment_size(size, s->segment), s->release, &b);
        if (rc)
            return rc;
    }
    int split = as_maxsplit_may_split(s->h.b[b].size, s->maxsplit);
    return as_heap_take_ix(&s->h, &index_ops, b, size, split, req, out);
}

static int ff_free(void *st, uint64_t handle, unsigned flags)
{
    firstfit *s = st;
    uint32_t b;
    if (as_btree_reserve(&s->byaddr, 1))
        return AS_ENOMEM;
    int rc = s->maxsplit ? as_heap_free_ix(&s->h, &index_ops, handle, flags, 1, &b)
                         : as_heap_free_ix(&s->h, &tree_ops, handle, flags, 1, &b);
    if (rc)
        return rc;
    return as_heap_after_free(&s->h, b, s->release);
}

static int ff_empty_cache(void *st)
{
    return as_heap_release_empty(&((firstfit *)st)->h, NULL);
}

static void ff_stats(const void *st, as_policy_stats *out)
{
    const firstfit *s = st;
    as_heap_stats(&s->h, out);
    uint64_t a = as_btree_max(&s->byaddr), o = as_bins_max(&s->h, &s->oversize);
    out->largest_free = a > o ? a : o;
}

static int ff_check(const void *st, as_check_failure *f)
{
    const firstfit *s = st;
    int rc = as_heap_check(&s->h, 1, f);
    if (!rc)
        rc = as_btree_check(&s->h, &s->byaddr, f);
    if (!rc)
        rc = as_bins_check(&s->h, &s->oversize, f);
    if (rc)
        return rc;
    if (s->byaddr.n + s->oversize.n != s->h.nfree)
        return as_check_fail(f, "free trees hold %llu blocks, the heap has %llu free",
                             (unsigned long long)(s->byaddr.n + s->oversize.n),
                             (unsigned long long)s->h.nfree);
    if (!s->maxsplit && s->oversize.n)
        return as_check_fail(f, "oversize tree used with maxsplit off");
    if (s->maxsplit && as_btree_max(&s->byaddr) >= s->maxsplit)
        return as_check_fail(f, "an oversize block is in the address tree");
    if (s->release == AS_RELEASE_ALWAYS && s->h.empty)
        return as_check_fail(f, "release=always but an empty segment is still held");
    return 0;
}

static int ff_walk(const void *st, as_walk_fn fn, void *user)
{
    return as_heap_walk(&((const firstfit *)st)->h, fn, user);
}

static void ff_fini(void *st)
{
    as_heap_fini(&((firstfit *)st)->h);
    as_btree_fini(&((firstfit *)st)->byaddr);
}

AS_BUILTIN_ENTRIES(firstfit, ff_alloc, ff_free)

const as_policy as_policy_firstfit = {
    .name = "firstfit",
    .summary = "address-ordered first fit over device segments, with split and coalesce",
    .abi = AS_POLICY_ABI,
    .knobs = knobs,
    .n_knobs = K_N,
    .state_size = sizeof(firstfit),
    .init = ff_init,
    .alloc = ff_alloc,
    .free = ff_free,
    .empty_cache = ff_empty_cache,
    .stats = ff_stats,
    .check = ff_check,
    .walk = ff_walk,
    .fini = ff_fini,
};
