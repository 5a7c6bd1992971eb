/*
 * bfc.c - TensorFlow's BFC ("best-fit with coalescing") allocator, as in
 * tensorflow/core/common_runtime/bfc_allocator.cc and xla/tsl/framework/bfc_allocator.h.
 *
 * Requests round up to 256 B. Free chunks sit in 21 bins, bin i holding sizes in
 * [256 << i, 256 << (i + 1)) and the last everything larger, each ordered by (size, addr);
 * the search starts at the request's bin and takes the first chunk that fits, so it is
 * best fit, lowest address among equals. A chunk is split iff it is at least twice the
 * request or the leftover is at least max_internal_fragmentation (128 MiB). Frees merge
 * with free neighbours at once. Regions come from the device: with allow_growth the first
 * is 2 MiB and the region size doubles as TF's Extend() does (doubling until a request
 * fits, and again after each extension that did not grow it); without it one region of
 * the whole memory limit (fraction of the capacity) is taken on first use. When the device
 * refuses, the size backs off by 0.9 repeatedly, once per allocator lifetime. When nothing
 * fits, whole free regions go back to the device (garbage collection) and growth is
 * retried. Regions never merge with each other (cudaMalloc memory cannot coalesce).
 *
 * TF's 21 bins, each ordered by (size, addr) and searched from the request's bin up, give
 * the smallest (size, addr) that fits overall, since the bins cut the sizes in order. So
 * here the free chunks sit in the shared binned index (common.h), whose finer bins (32 per
 * power of two) give that same chunk from smaller trees.
 *
 * Differences from TF, forced by the device interface: region sizes are rounded down to
 * the 2 MiB device granularity (cudaMalloc rounds internally); with an unlimited device
 * and no `limit`, preallocation is impossible and the policy grows as with allow_growth.
 * Invariant: the binned index holds exactly the free chunks (as_bins_check).
 */
#include "builtin.h"
#include "common.h"

#define MIN_ALLOC 256ull

typedef struct bfc {
    as_heap h;
    as_bins free; /* TF's bins, as a finer binned index: every free chunk by (size, addr) */
    int allow_growth, gc, started_backpedal;
    uint64_t limit;       /* memory_limit_; UINT64_MAX when unknown */
    uint64_t curr_region; /* curr_region_allocation_bytes_ */
    uint64_t max_frag;    /* max_internal_fragmentation_bytes */
} bfc;

enum { K_GROWTH, K_FRACTION, K_LIMIT, K_GC, K_MAXFRAG, K_N };

static const as_knob knobs[K_N] = {
    [K_GROWTH] = {.name = "allow_growth",
                  .type = AS_KNOB_BOOL,
                  .unit = "",
                  .def = 1,
                  .min = 0,
                  .max = 1,
                  .help = "grow regions on demand from 2 MiB (TF_FORCE_GPU_ALLOW_GROWTH); false "
                          "takes the whole limit at the first allocation (TF's default; needs a "
                          "capacity or limit)"},
    [K_FRACTION] = {.name = "fraction",
                    .type = AS_KNOB_FLOAT,
                    .unit = "",
                    .fdef = 1.0,
                    .fmin = 0.001,
                    .fmax = 1.0,
                    .help = "memory limit as a fraction of the device capacity "
                            "(per_process_gpu_memory_fraction; JAX preallocates 0.75)"},
    [K_LIMIT] = {.name = "limit",
                 .type = AS_KNOB_SIZE,
                 .unit = "bytes",
                 .def = 0,
                 .min = 0,
                 .max = INT64_MAX,
                 .help = "memory limit in bytes, overriding fraction; 0 = fraction x capacity"},
    [K_GC] = {.name = "gc",
              .type = AS_KNOB_BOOL,
              .unit = "",
              .def = 1,
              .min = 0,
              .max = 1,
              .help = "when nothing fits, return whole free regions to the device and retry "
                      "(TF_ENABLE_GPU_GARBAGE_COLLECTION)"},
    [K_MAXFRAG] = {.name = "max_internal_fragmentation",
                   .type = AS_KNOB_SIZE,
                   .unit = "bytes",
                   .def = 128ll << 20,
                   .min = 0,
                   .max = INT64_MAX,
                   .help = "split a chunk whose leftover is at least this, even when it is "
                           "less than twice the request"},
};

static uint64_t rounded_bytes(uint64_t n)
{
    return as_align_up(n ? n : 1, MIN_ALLOC);
}

AS_BINS_INDEX_OPS(index_ops, bfc, free);

static int bfc_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    bfc *s = st;
    int rc = as_heap_init(&s->h, dev, &index_ops);
    if (rc)
        return rc;
    as_bins_init(&s->free);
    s->gc = (int)cfg[K_GC].i;
    s->max_frag = (uint64_t)cfg[K_MAXFRAG].i;
    uint64_t cap = dev->ops->capacity(dev->ctx);
    if (cfg[K_LIMIT].i > 0)
        s->limit = (uint64_t)cfg[K_LIMIT].i;
    else if (cap != AS_CAPACITY_NONE)
        s->limit = (uint64_t)(cfg[K_FRACTION].f * (double)cap);
    else
        s->limit = UINT64_MAX;
    s->allow_growth = (int)cfg[K_GROWTH].i || s->limit == UINT64_MAX;
    if (s->allow_growth)
        s->curr_region = rounded_bytes(s->limit < (2ull << 20) ? s->limit : 2ull << 20);
    else
        s->curr_region = rounded_bytes(s->limit);
    return 0;
}

/* FindChunkPtr: the first chunk >= rounded in (size, addr) order from the request's bin up,
 * which is the first in the whole order. */
static uint32_t find_chunk(const bfc *s, uint64_t rounded)
{
    return as_bins_find(&s->h, &s->free, rounded);
}

static uint64_t backpedal(uint64_t bytes)
{
    /* TF: bytes = RoundedBytes(bytes * kBackpedalFactor), the factor a float 0.9. */
    uint64_t b = rounded_bytes((uint64_t)((float)bytes * 0.9f));
    return b / AS_DEV_GRANULARITY * AS_DEV_GRANULARITY;
}

/* Extend(): 1 when a region was added, 0 when not, < 0 on a host/device error. */
static int extend(bfc *s, uint64_t rounded)
{
    uint64_t available = s->limit == UINT64_MAX ? UINT64_MAX / 2 : s->limit - s->h.reserved;
    available = available / MIN_ALLOC * MIN_ALLOC;
    if (rounded > available)
        return 0;
    int increased = 0;
    while (rounded > s->curr_region) {
        s->curr_region *= 2;
        increased = 1;
    }
    uint64_t bytes = s->curr_region < available ? s->curr_region : available;
    bytes = bytes / AS_DEV_GRANULARITY * AS_DEV_GRANULARITY;
    if (bytes < rounded)
        return 0;
    uint32_t b;
    int rc = as_heap_grow(&s->h, bytes, &b);
    if (rc == AS_POLICY_OOM && !s->started_backpedal) {
        s->started_backpedal = 1; /* only backpedal once */
        while (rc == AS_POLICY_OOM) {
            bytes = backpedal(bytes);
            if (bytes < rounded)
                break;
            rc = as_heap_grow(&s->h, bytes, &b);
        }
    }
    if (rc == AS_POLICY_OOM)
        return 0;
    if (rc)
        return rc;
    if (!increased)
        s->curr_region *= 2;
    return 1;
}

/* DeallocateFreeRegions(): 1 when whole free regions were given back. */
static int deallocate_free_regions(bfc *s, uint64_t rounded)
{
    if (!s->gc)
        return 0;
    uint64_t total_free = 0;
    for (uint32_t si = s->h.empty; si; si = s->h.s[si].enext)
        total_free += s->h.s[si].size;
    if (total_free == 0)
        return 0;
    if (s->limit != UINT64_MAX && rounded > s->limit - s->h.reserved + total_free)
        return 0;
    s->h.retries++;
    int rc = as_heap_release_empty(&s->h, NULL);
    return rc ? rc : 1;
}

static int bfc_alloc(void *st, const as_request *req, as_block *out)
{
    bfc *s = st;
    if (req->size > AS_REQUEST_MAX)
        return AS_POLICY_OOM;
    uint64_t rounded = rounded_bytes(req->size);
    uint32_t b = find_chunk(s, rounded);
    if (!b) {
        int rc = extend(s, rounded);
        if (rc < 0)
            return rc;
        if (rc)
            b = find_chunk(s, rounded);
    }
    if (!b) {
        int rc = deallocate_free_regions(s, rounded);
        if (rc < 0)
            return rc;
        if (rc) {
            rc = extend(s, rounded);
            if (rc < 0)
                return rc;
            if (rc)
                b = find_chunk(s, rounded);
        }
    }
    if (!b)
        return AS_POLICY_OOM;
    uint64_t size = s->h.b[b].size;
    int split = size >= rounded * 2 || size - rounded >= s->max_frag;
    return as_heap_take_ix(&s->h, &index_ops, b, rounded, split, req, out);
}

static int bfc_free(void *st, uint64_t handle, unsigned flags)
{
    uint32_t b;
    return as_heap_free_ix(&((bfc *)st)->h, &index_ops, handle, flags, 1, &b);
}

static int bfc_empty_cache(void *st)
{
    return as_heap_release_empty(&((bfc *)st)->h, NULL);
}

static void bfc_stats(const void *st, as_policy_stats *out)
{
    const bfc *s = st;
    as_heap_stats(&s->h, out);
    out->largest_free = as_bins_max(&s->h, &s->free);
}

static int bfc_check(const void *st, as_check_failure *f)
{
    const bfc *s = st;
    int rc = as_heap_check(&s->h, 1, f);
    if (rc)
        return rc;
    rc = as_bins_check(&s->h, &s->free, f);
    if (rc)
        return rc;
    if (s->free.n != s->h.nfree)
        return as_check_fail(f, "the bins hold %llu chunks, %llu are free",
                             (unsigned long long)s->free.n, (unsigned long long)s->h.nfree);
    if (s->limit != UINT64_MAX && s->h.reserved > s->limit)
        return as_check_fail(f, "regions hold %llu bytes, over the limit %llu",
                             (unsigned long long)s->h.reserved, (unsigned long long)s->limit);
    return 0;
}

static int bfc_walk(const void *st, as_walk_fn fn, void *user)
{
    return as_heap_walk(&((const bfc *)st)->h, fn, user);
}

static void bfc_fini(void *st)
{
    as_heap_fini(&((bfc *)st)->h);
}

AS_BUILTIN_ENTRIES(bfc, bfc_alloc, bfc_free)

const as_policy as_policy_bfc = {
    .name = "bfc",
    .summary = "TensorFlow's BFC allocator: 21 bins, best fit with coalescing, region growth",
    .abi = AS_POLICY_ABI,
    .knobs = knobs,
    .n_knobs = K_N,
    .state_size = sizeof(bfc),
    .init = bfc_init,
    .alloc = bfc_alloc,
    .free = bfc_free,
    .empty_cache = bfc_empty_cache,
    .stats = bfc_stats,
    .check = bfc_check,
    .walk = bfc_walk,
    .fini = bfc_fini,
};
