/*
 * nocache.c - no caching at all: every request is its own device reservation (the
 * request rounded up to the device granularity), released when the block is freed, as
 * with PYTORCH_NO_CUDA_MEMORY_CACHING=1. Nothing is ever fragmented inside the policy;
 * every call pays the device's cost. A pending free (FREE_REQ) keeps the reservation until
 * the FREE. Invariant: one segment per live block, each exactly its block, none free; the
 * live blocks are the used slots of one table, and the counters are their sums.
 *
 * The table is the policy's own rather than the shared heap (common.h): a block here is
 * never split, merged or indexed, so an alloc is a slot and a device call, a free a check
 * of the handle and a device call.
 */
#include <stdlib.h>

#include "builtin.h"
#include "common.h"

typedef struct nc_blk {
    uint64_t addr, size, id, stream;
    uint32_t gen;   /* part of the handle: a stale one is refused */
    uint32_t state; /* AS_BLOCK_ALLOCATED or AS_BLOCK_PENDING; AS_BLOCK_FREE when unused */
    uint32_t next;  /* unused slots: the next one (0: none) */
} nc_blk;

typedef struct nocache {
    const as_device *dev;
    nc_blk *b; /* b[0] is unused: slot 0 is never a handle */
    uint32_t nb, cap, free_head;
    uint64_t allocated, segments, reserves, releases;
} nocache;

static int nc_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    (void)cfg;
    nocache *s = st;
    *s = (nocache){.dev = dev, .nb = 1, .cap = 256};
    s->b = malloc(s->cap * sizeof *s->b);
    return s->b ? 0 : AS_ENOMEM;
}

/* A slot for a new block, before any device call (a host failure leaves nothing held). */
static uint32_t slot_new(nocache *s)
{
    uint32_t i = s->free_head;
    if (i) {
        s->free_head = s->b[i].next;
        return i;
    }
    if (s->nb == s->cap) {
        nc_blk *nb = realloc(s->b, 2 * (size_t)s->cap * sizeof *nb);
        if (!nb)
            return 0;
        s->b = nb;
        s->cap *= 2;
    }
    s->b[s->nb].gen = 0;
    return s->nb++;
}

static void slot_put(nocache *s, uint32_t i)
{
    s->b[i].state = AS_BLOCK_FREE;
    s->b[i].gen++;
    s->b[i].next = s->free_head;
    s->free_head = i;
}

static int nc_alloc(void *st, const as_request *req, as_block *out)
{
    nocache *s = st;
    if (req->size > AS_REQUEST_MAX)
        return AS_POLICY_OOM;
    uint64_t size = as_align_up(req->size, AS_DEV_GRANULARITY), addr = 0;
    uint32_t i = slot_new(s);
    if (!i)
        return AS_ENOMEM;
    int rc = s->dev->ops->reserve(s->dev->ctx, size, &addr);
    if (rc != AS_DEV_OK) {
        slot_put(s, i);
        return rc == AS_DEV_OOM ? AS_POLICY_OOM : AS_EDEVICE;
    }
    nc_blk *x = &s->b[i];
    x->addr = addr;
    x->size = size;
    x->id = req->id;
    x->stream = req->stream;
    x->state = AS_BLOCK_ALLOCATED;
    s->allocated += size;
    s->segments++;
    s->reserves++;
    *out = (as_block){.addr = addr, .size = size, .handle = (uint64_t)x->gen << 32 | i};
    return 0;
}

static int nc_free(void *st, uint64_t handle, unsigned flags)
{
    nocache *s = st;
    uint32_t i = (uint32_t)handle;
    if (!i || i >= s->nb || s->b[i].gen != (uint32_t)(handle >> 32) ||
        s->b[i].state == AS_BLOCK_FREE)
        return AS_EINVAL;
    nc_blk *x = &s->b[i];
    if (flags & AS_FREE_PENDING) {
        if (x->state != AS_BLOCK_ALLOCATED)
            return AS_EINVAL;
        x->state = AS_BLOCK_PENDING;
        return 0;
    }
    if (s->dev->ops->release(s->dev->ctx, x->addr, x->size) != AS_DEV_OK)
        return AS_EDEVICE;
    s->allocated -= x->size;
    s->segments--;
    s->releases++;
    slot_put(s, i);
    return 0;
}

static void nc_stats(const void *st, as_policy_stats *out)
{
    const nocache *s = st;
    *out = (as_policy_stats){.allocated = s->allocated,
                             .reserved = s->allocated, /* each segment is its block */
                             .segments = s->segments,
                             .device_reserves = s->reserves,
                             .device_releases = s->releases};
}

static int nc_check(const void *st, as_check_failure *f)
{
    const nocache *s = st;
    uint64_t bytes = 0, live = 0, unused = 0;
    for (uint32_t i = 1; i < s->nb; i++) {
        const nc_blk *x = &s->b[i];
        if (x->state == AS_BLOCK_FREE) {
            unused++;
            continue;
        }
        if (x->state != AS_BLOCK_ALLOCATED && x->state != AS_BLOCK_PENDING)
            return as_check_fail(f, "block %u has bad state %u", i, x->state);
        if (!x->size || x->size % AS_DEV_GRANULARITY)
            return as_check_fail(f, "block %#llx: size %llu is not whole pages",
                                 (unsigned long long)x->addr, (unsigned long long)x->size);
        bytes += x->size;
        live++;
    }
    if (bytes != s->allocated || live != s->segments)
        return as_check_fail(f,
                             "nocache counts %llu bytes in %llu segments, its blocks %llu in %llu",
                             (unsigned long long)s->allocated, (unsigned long long)s->segments,
                             (unsigned long long)bytes, (unsigned long long)live);
    uint64_t chain = 0;
    for (uint32_t i = s->free_head; i && chain <= unused; i = s->b[i].next, chain++)
        if (i >= s->nb || s->b[i].state != AS_BLOCK_FREE)
            return as_check_fail(f, "nocache: the unused slots' list holds slot %u", i);
    if (chain != unused)
        return as_check_fail(f, "nocache: %llu unused slots, %llu on their list",
                             (unsigned long long)unused, (unsigned long long)chain);
    if (s->reserves - s->releases != s->segments)
        return as_check_fail(f, "nocache: %llu reserves, %llu releases, %llu segments",
                             (unsigned long long)s->reserves, (unsigned long long)s->releases,
                             (unsigned long long)s->segments);
    return 0;
}

typedef struct nc_at {
    uint64_t addr;
    uint32_t i;
} nc_at;

static int at_cmp(const void *a, const void *b)
{
    uint64_t x = ((const nc_at *)a)->addr, y = ((const nc_at *)b)->addr;
    return (x > y) - (x < y);
}

/* Segments in address order, each followed by its one block. */
static int nc_walk(const void *st, as_walk_fn fn, void *user)
{
    const nocache *s = st;
    nc_at *v = malloc(((size_t)s->segments + 1) * sizeof *v);
    if (!v)
        return AS_ENOMEM;
    size_t n = 0;
    for (uint32_t i = 1; i < s->nb; i++)
        if (s->b[i].state != AS_BLOCK_FREE)
            v[n++] = (nc_at){s->b[i].addr, i};
    qsort(v, n, sizeof *v, at_cmp);
    int rc = 0;
    for (size_t k = 0; k < n && !rc; k++) {
        const nc_blk *x = &s->b[v[k].i];
        as_walk_item seg = {
            .kind = AS_WALK_SEGMENT, .addr = x->addr, .size = x->size, .id = UINT64_MAX};
        as_walk_item blk = {.kind = AS_WALK_BLOCK,
                            .addr = x->addr,
                            .size = x->size,
                            .stream = x->stream,
                            .state = (as_block_state)x->state,
                            .id = x->id};
        rc = fn(user, &seg);
        if (!rc)
            rc = fn(user, &blk);
    }
    free(v);
    return rc;
}

/* Device memory still held goes back (as the shared heap's fini does). */
static void nc_fini(void *st)
{
    nocache *s = st;
    for (uint32_t i = 1; s->b && i < s->nb; i++)
        if (s->b[i].state != AS_BLOCK_FREE)
            s->dev->ops->release(s->dev->ctx, s->b[i].addr, s->b[i].size);
    free(s->b);
    s->b = NULL;
}

AS_BUILTIN_ENTRIES(nocache, nc_alloc, nc_free)

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
