/*
 * bestfit.c - size-ordered best fit over device segments, with split and coalesce.
 *
 * A request is rounded (round, roundup), then served by the smallest free block that
 * fits, lowest address among equals. The (size, addr) order is kept by a binned index
 * (common.h): the same answer as one treap over all free blocks, from much shallower
 * trees. The block's tail is split off unless the block is oversize (maxsplit). With no
 * fit, a new segment comes from the device (`segment` MiB, or the request rounded to
 * 2 MiB when larger); if the device refuses, empty segments are given back first
 * (release=oom). Frees merge with free neighbours immediately. Invariant: as_heap_check,
 * and the index holds exactly the free blocks.
 */
#include <stddef.h>

#include "builtin.h"
#include "common.h"

typedef struct bestfit {
    as_heap h; /* first: the index callbacks recover the state from it */
    as_bins free;
    uint64_t round, maxsplit, segment;
    int64_t release;
    uint32_t div[AS_DIV_INTERVALS];
    int divs; /* some division is on (as_round_req) */
} bestfit;

enum { K_ROUND, K_ROUNDUP, K_MAXSPLIT, K_SEGMENT, K_RELEASE, K_N };

static const as_knob knobs[K_N] = {
    [K_ROUND] = AS_KNOB_ROUND(512),
    [K_ROUNDUP] = AS_KNOB_ROUNDUP,
    [K_MAXSPLIT] = AS_KNOB_MAXSPLIT,
    [K_SEGMENT] = AS_KNOB_SEGMENT(20),
    [K_RELEASE] = AS_KNOB_RELEASE(AS_RELEASE_OOM),
};

AS_BINS_INDEX_OPS(index_ops, bestfit, free);

static int bf_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    bestfit *s = st;
    uint64_t round = (uint64_t)cfg[K_ROUND].i;
    if (round & (round - 1))
        return AS_EINVAL;
    int rc = as_heap_init(&s->h, dev, &index_ops);
    if (rc)
        return rc;
    as_bins_init(&s->free);
    s->round = round;
    s->maxsplit = (uint64_t)cfg[K_MAXSPLIT].i * AS_MIB;
    s->segment = (uint64_t)cfg[K_SEGMENT].i * AS_MIB;
    s->release = cfg[K_RELEASE].i;
    for (int i = 0; i < AS_DIV_INTERVALS; i++)
        s->div[i] = cfg[K_ROUNDUP].div[i];
    s->divs = as_divs_on(s->div);
    return 0;
}

static int bf_alloc(void *st, const as_request *req, as_block *out)
{
    bestfit *s = st;
    if (req->size > AS_REQUEST_MAX)
        return AS_POLICY_OOM;
    uint64_t size = as_round_req(req->size, s->round, s->div, s->divs);
    uint32_t b = as_bins_find(&s->h, &s->free, size);
    if (b && !as_maxsplit_fits(s->h.b[b].size, size, s->maxsplit, s->segment))
        b = AS_NIL; /* the smallest fit is refused, so every larger block is too */
    if (!b) {
        int rc = as_heap_grow_or_release(&s->h, as_segment_size(size, s->segment), s->release, &b);
        if (rc)
            return rc;
    }
    int split = as_maxsplit_may_split(s->h.b[b].size, s->maxsplit);
    return as_heap_take_ix(&s->h, &index_ops, b, size, split, req, out);
}

static int bf_free(void *st, uint64_t handle, unsigned flags)
{
    bestfit *s = st;
    uint32_t b;
    int rc = as_heap_free_ix(&s->h, &index_ops, handle, flags, 1, &b);
    if (rc)
        return rc;
    return as_heap_after_free(&s->h, b, s->release);
}

static int bf_empty_cache(void *st)
{
    return as_heap_release_empty(&((bestfit *)st)->h, NULL);
}

static void bf_stats(const void *st, as_policy_stats *out)
{
    const bestfit *s = st;
    as_heap_stats(&s->h, out);
    out->largest_free = as_bins_max(&s->h, &s->free);
}

static int bf_check(const void *st, as_check_failure *f)
{
    const bestfit *s = st;
    int rc = as_heap_check(&s->h, 1, f);
    if (!rc)
        rc = as_bins_check(&s->h, &s->free, f);
    if (!rc && s->free.n != s->h.nfree)
        rc = as_check_fail(f, "free index holds %llu blocks, the heap has %llu free",
                           (unsigned long long)s->free.n, (unsigned long long)s->h.nfree);
    if (!rc && s->release == AS_RELEASE_ALWAYS && s->h.empty)
        rc = as_check_fail(f, "release=always but an empty segment is still held");
    return rc;
}

static int bf_walk(const void *st, as_walk_fn fn, void *user)
{
    return as_heap_walk(&((const bestfit *)st)->h, fn, user);
}

static void bf_fini(void *st)
{
    as_heap_fini(&((bestfit *)st)->h);
}

AS_BUILTIN_ENTRIES(bestfit, bf_alloc, bf_free)

const as_policy as_policy_bestfit = {
    .name = "bestfit",
    .summary = "size-ordered best fit over device segments, with split and coalesce",
    .abi = AS_POLICY_ABI,
    .knobs = knobs,
    .n_knobs = K_N,
    .state_size = sizeof(bestfit),
    .init = bf_init,
    .alloc = bf_alloc,
    .free = bf_free,
    .empty_cache = bf_empty_cache,
    .stats = bf_stats,
    .check = bf_check,
    .walk = bf_walk,
    .fini = bf_fini,
};
