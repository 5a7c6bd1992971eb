/*
 * nocache.c - no caching at all: every request is its own device reservation (the
 * request rounded up to the device granularity), released when the block is freed, as
 * with PYTORCH_NO_CUDA_MEMORY_CACHING=1. Nothing is ever fragmented inside the policy;
 * every call pays the device's cost. A pending free (FREE_REQ) keeps the reservation until
 * the FREE. Invariant: one segment per live block, each exactly its block, none free.
 */
#include "common.h"

typedef struct nocache {
    as_heap h;
} nocache;

static int nc_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    (void)cfg;
    return as_heap_init(&((nocache *)st)->h, dev, NULL);
}

static int nc_alloc(void *st, const as_request *req, as_block *out)
{
    nocache *s = st;
    if (req->size > AS_REQUEST_MAX)
        return AS_POLICY_OOM;
    uint32_t b;
    int rc = as_heap_grow(&s->h, as_align_up(req->size, AS_DEV_GRANULARITY), &b);
    if (rc)
        return rc;
    return as_heap_take_ix(&s->h, NULL, b, s->h.b[b].size, 0, req, out);
}

static int nc_free(void *st, uint64_t handle, unsigned flags)
{
    nocache *s = st;
    uint32_t b;
    int rc = as_heap_free_ix(&s->h, NULL, handle, flags, 0, &b);
    if (rc || !b)
        return rc;
    return as_heap_release_seg(&s->h, s->h.b[b].seg);
}

static void nc_stats(const void *st, as_policy_stats *out)
{
    as_heap_stats(&((const nocache *)st)->h, out);
}

static int nc_check(const void *st, as_check_failure *f)
{
    const nocache *s = st;
    int rc = as_heap_check(&s->h, 0, f);
    if (rc)
        return rc;
    if (s->h.nfree || s->h.free_bytes)
        return as_check_fail(f, "nocache holds %llu free bytes",
                             (unsigned long long)s->h.free_bytes);
    for (uint32_t si = 1; si < s->h.ns; si++) {
        const as_seg *g = &s->h.s[si];
        if (g->head && s->h.b[g->head].next)
            return as_check_fail(f, "segment %#llx holds more than one block",
                                 (unsigned long long)g->addr);
    }
    return 0;
}

static int nc_walk(const void *st, as_walk_fn fn, void *user)
{
    return as_heap_walk(&((const nocache *)st)->h, fn, user);
}

static void nc_fini(void *st)
{
    as_heap_fini(&((nocache *)st)->h);
}

const as_policy as_policy_nocache = {
    .name = "nocache",
    .summary = "one device reservation per request, released on free: no caching",
    .abi = AS_POLICY_ABI,
    .knobs = NULL,
    .n_knobs = 0,
    .state_size = sizeof(nocache),
    .init = nc_init,
    .alloc = nc_alloc,
    .free = nc_free,
    .empty_cache = NULL,
    .stats = nc_stats,
    .check = nc_check,
    .walk = nc_walk,
    .fini = nc_fini,
};
