/*
 * slab.c - an example policy built outside allocsim, against the installed headers only
 * (policies/README.md, "Bring your own policy"):
 *
 *   cc -shared -fPIC $(pkg-config --cflags allocsim-policy) slab.c -o libslab.so
 *   allocsim -p plugin:./libslab.so,step=4M trace.zst
 *
 * An exact-size cache: every block is a whole device reservation (the request rounded up
 * to `step`, a multiple of the 2 MiB granularity); a freed block stays reserved and only a
 * request of the same rounded size takes it again; when the device refuses, every cached
 * block is given back and the reservation tried once more, and empty_cache gives them all
 * back. Invariant: the segments, kept in address order, never overlap; each holds one block,
 * free (cached) or handed out; the counters are the sums over them.
 */
#include <stdlib.h>
#include <string.h>

#include "policy.h"

#define REQUEST_MAX (1ull << 50) /* larger requests are refused as an OOM, as every policy does */

enum { SEG_FREE, SEG_USED, SEG_PENDING };

typedef struct seg {
    uint64_t addr, size, id, stream;
    int state;
} seg;

typedef struct slab {
    as_device dev;
    uint64_t round;
    seg *s; /* by address */
    size_t n, cap;
    uint64_t reserved, allocated, reserves, releases;
} slab;

static const as_knob knobs[] = {
    {.name = "step",
     .type = AS_KNOB_SIZE,
     .unit = "bytes",
     .def = 2 << 20,
     .min = 2 << 20,
     .max = 1ll << 30,
     .multiple = 0,
     .help = "block size step (a multiple of 2 MiB): every request is rounded up to it"},
};

static int sl_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    slab *s = st;
    if (cfg[0].i % (int64_t)AS_DEV_GRANULARITY)
        return AS_EINVAL;
    s->dev = *dev;
    s->round = (uint64_t)cfg[0].i;
    return 0;
}

/* Index of the segment at addr, or of where it would go. */
static size_t find(const slab *s, uint64_t addr)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->s[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int release_cache(slab *s)
{
    size_t w = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->s[i].state != SEG_FREE) {
            s->s[w++] = s->s[i];
            continue;
        }
        int rc = s->dev.ops->release(s->dev.ctx, s->s[i].addr, s->s[i].size);
        if (rc)
            return rc < 0 ? rc : AS_EDEVICE;
        s->reserved -= s->s[i].size;
        s->releases++;
    }
    s->n = w;
    return 0;
}

static int reserve(slab *s, uint64_t size, size_t *at)
{
    uint64_t addr;
    int rc = s->dev.ops->reserve(s->dev.ctx, size, &addr);
    if (rc == AS_DEV_OOM) {
        if ((rc = release_cache(s)))
            return rc;
        rc = s->dev.ops->reserve(s->dev.ctx, size, &addr);
    }
    if (rc == AS_DEV_OOM)
        return AS_POLICY_OOM;
    if (rc)
        return rc < 0 ? rc : AS_EDEVICE;
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 64;
        seg *ns = realloc(s->s, nc * sizeof *ns);
        if (!ns) {
            s->dev.ops->release(s->dev.ctx, addr, size);
            return AS_ENOMEM;
        }
        s->s = ns;
        s->cap = nc;
    }
    size_t i = find(s, addr);
    memmove(&s->s[i + 1], &s->s[i], (s->n - i) * sizeof *s->s);
    s->s[i] = (seg){.addr = addr, .size = size, .state = SEG_FREE};
    s->n++;
    s->reserved += size;
    s->reserves++;
    *at = i;
    return 0;
}

static int sl_alloc(void *st, const as_request *req, as_block *out)
{
    slab *s = st;
    if (req->size > REQUEST_MAX)
        return AS_POLICY_OOM;
    uint64_t size = (req->size + s->round - 1) / s->round * s->round;
    size_t i = 0;
    while (i < s->n && !(s->s[i].state == SEG_FREE && s->s[i].size == size))
        i++; /* the lowest cached block of this size: a linear scan, this is an example */
    if (i == s->n) {
        int rc = reserve(s, size, &i);
        if (rc)
            return rc;
    }
    s->s[i].state = SEG_USED;
    s->s[i].id = req->id;
    s->s[i].stream = req->stream;
    s->allocated += size;
    *out = (as_block){.addr = s->s[i].addr, .size = size, .handle = s->s[i].addr};
    return 0;
}

static int sl_free(void *st, uint64_t handle, unsigned flags)
{
    slab *s = st;
    size_t i = find(s, handle);
    if (i == s->n || s->s[i].addr != handle || s->s[i].state == SEG_FREE)
        return AS_EINVAL;
    if (flags & AS_FREE_PENDING) {
        if (s->s[i].state != SEG_USED)
            return AS_EINVAL;
        s->s[i].state = SEG_PENDING;
        return 0;
    }
    s->s[i].state = SEG_FREE;
    s->allocated -= s->s[i].size;
    return 0;
}

static int sl_empty_cache(void *st)
{
    return release_cache(st);
}

static void sl_stats(const void *st, as_policy_stats *out)
{
    const slab *s = st;
    uint64_t largest = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->s[i].state == SEG_FREE && s->s[i].size > largest)
            largest = s->s[i].size;
    *out = (as_policy_stats){.allocated = s->allocated,
                             .reserved = s->reserved,
                             .free_bytes = s->reserved - s->allocated,
                             .largest_free = largest,
                             .segments = s->n,
                             .device_reserves = s->reserves,
                             .device_releases = s->releases};
}

static int sl_check(const void *st, as_check_failure *f)
{
    const slab *s = st;
    uint64_t res = 0, used = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (i && s->s[i - 1].addr + s->s[i - 1].size > s->s[i].addr) {
            strcpy(f->msg, "segments overlap or are out of address order");
            return AS_ECHECK;
        }
        res += s->s[i].size;
        used += s->s[i].state == SEG_FREE ? 0 : s->s[i].size;
    }
    if (res != s->reserved || used != s->allocated) {
        strcpy(f->msg, "the counters are not the sums over the segments");
        return AS_ECHECK;
    }
    return 0;
}

static int sl_walk(const void *st, as_walk_fn fn, void *user)
{
    const slab *s = st;
    for (size_t i = 0; i < s->n; i++) {
        const seg *g = &s->s[i];
        as_walk_item a = {
            .kind = AS_WALK_SEGMENT, .addr = g->addr, .size = g->size, .id = UINT64_MAX};
        as_walk_item b = {.kind = AS_WALK_BLOCK,
                          .addr = g->addr,
                          .size = g->size,
                          .stream = g->stream,
                          .state = g->state == SEG_FREE      ? AS_BLOCK_FREE
                                   : g->state == SEG_PENDING ? AS_BLOCK_PENDING
                                                             : AS_BLOCK_ALLOCATED,
                          .id = g->state == SEG_FREE ? UINT64_MAX : g->id};
        int rc = fn(user, &a);
        if (!rc)
            rc = fn(user, &b);
        if (rc)
            return rc;
    }
    return 0;
}

static void sl_fini(void *st)
{
    slab *s = st;
    for (size_t i = 0; i < s->n; i++)
        s->dev.ops->release(s->dev.ctx, s->s[i].addr, s->s[i].size);
    free(s->s);
    memset(s, 0, sizeof *s);
}

static const as_policy slab_policy = {
    .name = "slab",
    .summary = "example plug-in: exact-size cache of whole device reservations",
    .abi = AS_POLICY_ABI,
    .knobs = knobs,
    .n_knobs = sizeof knobs / sizeof knobs[0],
    .state_size = sizeof(slab),
    .init = sl_init,
    .alloc = sl_alloc,
    .free = sl_free,
    .empty_cache = sl_empty_cache,
    .stats = sl_stats,
    .check = sl_check,
    .walk = sl_walk,
    .fini = sl_fini,
};

AS_POLICY_EXPORT(slab_policy)
