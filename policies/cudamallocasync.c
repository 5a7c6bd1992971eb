/*
 * cudamallocasync.c - a calibrated model of CUDA's stream-ordered pool (cudaMallocAsync,
 * PyTorch's backend:cudaMallocAsync). It is not the driver's code, which is closed: its
 * rules are the ones the H200 measurements in replay/data/validate-h200/async/ show.
 *
 * Every growth of the pool's reservation is a multiple of 32 MiB (all 5,857 steps of the
 * uncapped runs): a request that no free range fits reserves a new range of the request
 * rounded up to `grow` (32 MiB). Requests are carved best fit (smallest free range, lowest
 * address) at `round` bytes, freed ranges merge with free neighbours, and a fully free
 * range is given back at the stream's synchronisation while the pool holds more than the
 * release threshold (0 = CUDA's default: at once; max = PyTorch's: never, except that a
 * refused growth first trims every free range, then fails). The replay synchronises after
 * every free, so a free is a synchronisation here. Invariant: as_heap_check, and the index
 * holds exactly the free blocks.
 */
#include <stddef.h>

#include "common.h"

typedef struct cmasync {
    as_heap h; /* first: the index callbacks recover the state from it */
    as_bins free;
    uint64_t round, grow, threshold;
} cmasync;

enum { K_THRESHOLD, K_ROUND, K_GROW, K_N };

static const as_knob knobs[K_N] = {
    [K_THRESHOLD] = {.name = "release_threshold",
                     .type = AS_KNOB_SIZE,
                     .unit = "bytes",
                     .def = 0,
                     .min = 0,
                     .max = INT64_MAX,
                     .help = "cudaMemPoolAttrReleaseThreshold: free memory above it goes back "
                             "at a synchronisation (0 = CUDA's default; max = PyTorch's)"},
    [K_ROUND] = AS_KNOB_ROUND(512),
    [K_GROW] = {.name = "grow",
                .type = AS_KNOB_INT,
                .unit = "MiB",
                .def = 32,
                .min = 2,
                .max = 1 << 20,
                .help = "the pool grows by a multiple of this (measured on the H200: 32)"},
};

static void ix_insert(as_heap *h, uint32_t b)
{
    as_bins_insert(h, &((cmasync *)h)->free, b);
}
static void ix_remove(as_heap *h, uint32_t b)
{
    as_bins_remove(h, &((cmasync *)h)->free, b);
}
static const as_index_ops index_ops = {.insert = ix_insert, .remove = ix_remove};

static int ca_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    cmasync *s = st;
    uint64_t round = (uint64_t)cfg[K_ROUND].i;
    if (round & (round - 1))
        return AS_EINVAL;
    int rc = as_heap_init(&s->h, dev, &index_ops);
    if (rc)
        return rc;
    as_bins_init(&s->free);
    s->round = round;
    s->grow = (uint64_t)cfg[K_GROW].i * AS_MIB;
    s->threshold = (uint64_t)cfg[K_THRESHOLD].i;
    return 0;
}

static int ca_alloc(void *st, const as_request *req, as_block *out)
{
    cmasync *s = st;
    if (req->size > AS_REQUEST_MAX)
        return AS_POLICY_OOM;
    uint64_t size = as_align_up(req->size, s->round);
    uint32_t b = as_bins_find(&s->h, &s->free, size);
    if (!b) {
        /* the pool's retry: a refused growth trims every free range, then fails */
        int rc = as_heap_grow_or_release(&s->h, as_align_up(size, s->grow), AS_RELEASE_OOM, &b);
        if (rc)
            return rc;
    }
    return as_heap_take_ix(&s->h, &index_ops, b, size, 1, req, out);
}

static int ca_free(void *st, uint64_t handle, unsigned flags)
{
    cmasync *s = st;
    uint32_t b;
    int rc = as_heap_free_ix(&s->h, &index_ops, handle, flags, 1, &b);
    if (rc || !b)
        return rc;
    uint32_t si = s->h.b[b].seg;
    if (s->h.s[si].nused == 0 && s->h.reserved - s->h.s[si].size >= s->threshold)
        return as_heap_release_seg(&s->h, si);
    return 0;
}

static int ca_empty_cache(void *st)
{
    return as_heap_release_empty(&((cmasync *)st)->h, NULL);
}

static void ca_stats(const void *st, as_policy_stats *out)
{
    const cmasync *s = st;
    as_heap_stats(&s->h, out);
    out->largest_free = as_bins_max(&s->h, &s->free);
}

static int ca_check(const void *st, as_check_failure *f)
{
    const cmasync *s = st;
    int rc = as_heap_check(&s->h, 1, f);
    if (!rc)
        rc = as_bins_check(&s->h, &s->free, f);
    if (!rc && s->free.n != s->h.nfree)
        rc = as_check_fail(f, "free index holds %llu blocks, the heap has %llu free",
                           (unsigned long long)s->free.n, (unsigned long long)s->h.nfree);
    return rc;
}

static int ca_walk(const void *st, as_walk_fn fn, void *user)
{
    return as_heap_walk(&((const cmasync *)st)->h, fn, user);
}

static void ca_fini(void *st)
{
    as_heap_fini(&((cmasync *)st)->h);
}

const as_policy as_policy_cudamallocasync = {
    .name = "cudamallocasync",
    .summary = "calibrated model of CUDA's stream-ordered pool (not the driver's code): "
               "32 MiB growth, best fit, trims above the release threshold",
    .abi = AS_POLICY_ABI,
    .knobs = knobs,
    .n_knobs = K_N,
    .state_size = sizeof(cmasync),
    .init = ca_init,
    .alloc = ca_alloc,
    .free = ca_free,
    .empty_cache = ca_empty_cache,
    .stats = ca_stats,
    .check = ca_check,
    .walk = ca_walk,
    .fini = ca_fini,
};
