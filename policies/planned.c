/*
 * planned.c - the offline yardstick: a policy that sees the whole trace (plan) and gives
 * every allocation a fixed offset in one arena before the first event, as a compiler's
 * memory planner does for a static graph (arena_plan.h: greedy by size, by breadth and by
 * lifetime, keeping the smallest arena). Its peak reserved is what a placement that knew
 * the future gets; the peak requested is the bound no placement beats.
 *
 * Lifetimes: a block is occupied from its ALLOC to its FREE; a FREE_REQ in between does
 * not free it (a stream may still use it), and streams do not partition the arena (a block
 * freed on one stream is reused by another after its FREE, as the stream-unaware policies
 * do). Capacity: the plan does not depend on it. The arena (rounded up to the device
 * granularity) is reserved at the first ALLOC; when the device refuses it, the largest
 * prefix the capacity leaves is reserved instead, and each allocation planned past that
 * prefix is an OOM, so the first OOM is the first allocation the capacity cannot place.
 * Requests are rounded to `round` bytes, as the online policies round theirs.
 *
 * Invariant: live blocks (allocated or pending) lie inside the reservation and never
 * overlap; allocated is the sum of their sizes. alloc() of an id the plan does not know,
 * or of another size than planned, is misuse (AS_EINVAL).
 */
#include <stdlib.h>
#include <string.h>

#include "arena_plan.h"
#include "common.h"

enum { K_ROUND, K_ORDER, K_N };

enum { ST_NONE, ST_LIVE, ST_PENDING, ST_DONE };

static const as_knob knobs[] = {
    [K_ROUND] = AS_KNOB_ROUND(512),
    [K_ORDER] = {.name = "order",
                 .type = AS_KNOB_ENUM,
                 .unit = "",
                 .def = AS_PLAN_BEST,
                 .min = 0,
                 .max = AS_PLAN_LENGTH,
                 .choices = "best|size|breadth|length",
                 .help = "placement order: greedy by size, by breadth (bytes live during the "
                         "block's life), by lifetime, or the best of the three"},
};

typedef struct pitem {
    uint64_t size, off, stream; /* block size (rounded), offset (AS_PLAN_NONE: left out) */
} pitem;

typedef struct span {
    uint64_t off, id;
} span;

typedef struct planned {
    as_device dev;
    uint64_t round;
    as_plan_order order, used;
    int planned;
    pitem *it;
    unsigned char *state; /* ST_* by id */
    size_t *pos;          /* index in live[] while live */
    size_t n;
    uint64_t arena;      /* the plan's size: the largest end offset */
    uint64_t base, held; /* the reservation (held = 0: none) */
    uint64_t *live;      /* live ids */
    size_t nlive, caplive;
    span *sorted; /* scratch for walk/stats/check: caplive entries */
    uint64_t allocated, reserves, releases;
} planned;

static int pl_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    planned *s = st;
    uint64_t round = (uint64_t)cfg[K_ROUND].i;
    if (round & (round - 1))
        return AS_EINVAL;
    s->dev = *dev;
    s->round = round;
    s->order = (as_plan_order)cfg[K_ORDER].i;
    return 0;
}

static int pl_plan(void *st, const as_lifetime *lt, size_t n)
{
    planned *s = st;
    if (s->planned)
        return AS_EINVAL;
    as_plan_item *items = malloc((n ? n : 1) * sizeof *items);
    uint64_t *off = malloc((n ? n : 1) * sizeof *off);
    s->it = malloc((n ? n : 1) * sizeof *s->it);
    s->state = calloc(n ? n : 1, 1);
    s->pos = malloc((n ? n : 1) * sizeof *s->pos);
    int rc = items && off && s->it && s->state && s->pos ? 0 : AS_ENOMEM;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        /* A request no device holds stays out of the plan and is refused as an OOM. */
        uint64_t size =
            lt[k].size && lt[k].size <= AS_REQUEST_MAX ? as_align_up(lt[k].size, s->round) : 0;
        items[k] = (as_plan_item){size, lt[k].start, lt[k].end};
        s->it[k] = (pitem){size, AS_PLAN_NONE, lt[k].stream};
    }
    if (rc == 0)
        rc = as_arena_plan(items, n, s->order, off, &s->arena, &s->used);
    for (size_t k = 0; rc == 0 && k < n; k++)
        s->it[k].off = off[k];
    free(items);
    free(off);
    s->n = n;
    s->planned = rc == 0;
    return rc;
}

/* The arena, or the largest prefix of it the capacity leaves. */
static int reserve_arena(planned *s)
{
    uint64_t need = as_align_up(s->arena, AS_DEV_GRANULARITY), addr = 0;
    int rc = s->dev.ops->reserve(s->dev.ctx, need, &addr);
    if (rc == AS_DEV_OOM) {
        uint64_t cap = s->dev.ops->capacity(s->dev.ctx), cur = s->dev.ops->reserved(s->dev.ctx);
        uint64_t avail = cap > cur ? (cap - cur) / AS_DEV_GRANULARITY * AS_DEV_GRANULARITY : 0;
        if (avail == 0 || avail >= need)
            return AS_POLICY_OOM;
        need = avail;
        rc = s->dev.ops->reserve(s->dev.ctx, need, &addr);
    }
    if (rc == AS_DEV_OOM)
        return AS_POLICY_OOM;
    if (rc)
        return rc < 0 ? rc : AS_EDEVICE;
    s->base = addr;
    s->held = need;
    s->reserves++;
    return 0;
}

static int pl_alloc(void *st, const as_request *req, as_block *out)
{
    planned *s = st;
    if (req->size > AS_REQUEST_MAX)
        return AS_POLICY_OOM;
    if (!s->planned || req->id >= s->n || s->state[req->id] != ST_NONE)
        return AS_EINVAL;
    pitem *x = &s->it[req->id];
    if (x->size != as_align_up(req->size, s->round))
        return AS_EINVAL;
    if (x->off == AS_PLAN_NONE)
        return AS_POLICY_OOM;
    if (!s->held && s->arena) {
        int rc = reserve_arena(s);
        if (rc)
            return rc;
    }
    if (x->off > s->held || x->size > s->held - x->off)
        return AS_POLICY_OOM;
    if (s->nlive == s->caplive) {
        size_t nc = s->caplive ? 2 * s->caplive : 64;
        uint64_t *nl = realloc(s->live, nc * sizeof *nl);
        if (!nl)
            return AS_ENOMEM;
        s->live = nl;
        span *ns = realloc(s->sorted, nc * sizeof *ns);
        if (!ns)
            return AS_ENOMEM;
        s->sorted = ns;
        s->caplive = nc;
    }
    s->pos[req->id] = s->nlive;
    s->live[s->nlive++] = req->id;
    s->state[req->id] = ST_LIVE;
    s->allocated += x->size;
    *out = (as_block){.addr = s->base + x->off, .size = x->size, .handle = req->id};
    return 0;
}

static int pl_free(void *st, uint64_t handle, unsigned flags)
{
    planned *s = st;
    if (handle >= s->n || (s->state[handle] != ST_LIVE && s->state[handle] != ST_PENDING))
        return AS_EINVAL;
    if (flags & AS_FREE_PENDING) {
        if (s->state[handle] != ST_LIVE)
            return AS_EINVAL;
        s->state[handle] = ST_PENDING;
        return 0;
    }
    size_t p = s->pos[handle];
    uint64_t last = s->live[--s->nlive];
    s->live[p] = last;
    s->pos[last] = p;
    s->state[handle] = ST_DONE;
    s->allocated -= s->it[handle].size;
    return 0;
}

/* With nothing live the arena holds nothing: give it back (the next ALLOC takes it again). */
static int pl_empty_cache(void *st)
{
    planned *s = st;
    if (s->nlive || !s->held)
        return 0;
    int rc = s->dev.ops->release(s->dev.ctx, s->base, s->held);
    if (rc)
        return rc < 0 ? rc : AS_EDEVICE;
    s->held = 0;
    s->releases++;
    return 0;
}

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The live blocks in address order, in the scratch array (not part of the state's value). */
static const span *by_offset(const planned *s)
{
    for (size_t k = 0; k < s->nlive; k++)
        s->sorted[k] = (span){s->it[s->live[k]].off, s->live[k]};
    if (s->nlive)
        qsort(s->sorted, s->nlive, sizeof *s->sorted, span_cmp);
    return s->sorted;
}

static void pl_stats(const void *st, as_policy_stats *out)
{
    const planned *s = st;
    const span *v = by_offset(s);
    uint64_t top = 0, largest = 0;
    for (size_t k = 0; k < s->nlive; k++) {
        if (v[k].off > top && v[k].off - top > largest)
            largest = v[k].off - top;
        uint64_t end = v[k].off + s->it[v[k].id].size;
        top = end > top ? end : top;
    }
    if (s->held > top && s->held - top > largest)
        largest = s->held - top;
    *out = (as_policy_stats){
        .allocated = s->allocated,
        .reserved = s->held,
        .free_bytes = s->held - s->allocated,
        .largest_free = s->held ? largest : 0,
        .segments = s->held ? 1 : 0,
        .device_reserves = s->reserves,
        .device_releases = s->releases,
    };
}

static int pl_check(const void *st, as_check_failure *f)
{
    const planned *s = st;
    const span *v = by_offset(s);
    uint64_t top = 0, sum = 0;
    for (size_t k = 0; k < s->nlive; k++) {
        const pitem *x = &s->it[v[k].id];
        if (v[k].off < top)
            return as_check_fail(f, "block of id %llu at offset %llu overlaps a live block",
                                 (unsigned long long)v[k].id, (unsigned long long)v[k].off);
        top = v[k].off + x->size;
        if (top > s->held)
            return as_check_fail(f, "block of id %llu ends at %llu, past the %llu held",
                                 (unsigned long long)v[k].id, (unsigned long long)top,
                                 (unsigned long long)s->held);
        sum += x->size;
    }
    if (sum != s->allocated)
        return as_check_fail(f, "live blocks add up to %llu, allocated says %llu",
                             (unsigned long long)sum, (unsigned long long)s->allocated);
    if (s->held && s->dev.ops->reserved(s->dev.ctx) < s->held)
        return as_check_fail(f, "arena of %llu bytes, the device holds less",
                             (unsigned long long)s->held);
    return 0;
}

static int pl_walk(const void *st, as_walk_fn fn, void *user)
{
    const planned *s = st;
    if (!s->held)
        return 0;
    as_walk_item seg = {
        .kind = AS_WALK_SEGMENT, .addr = s->base, .size = s->held, .id = UINT64_MAX};
    int rc = fn(user, &seg);
    const span *v = by_offset(s);
    uint64_t top = 0;
    for (size_t k = 0; rc == 0 && k <= s->nlive; k++) {
        uint64_t off = k < s->nlive ? v[k].off : s->held;
        if (off > top) {
            as_walk_item gap = {.kind = AS_WALK_BLOCK,
                                .addr = s->base + top,
                                .size = off - top,
                                .state = AS_BLOCK_FREE,
                                .id = UINT64_MAX};
            rc = fn(user, &gap);
        }
        if (rc || k == s->nlive)
            break;
        const pitem *x = &s->it[v[k].id];
        as_walk_item b = {.kind = AS_WALK_BLOCK,
                          .addr = s->base + off,
                          .size = x->size,
                          .stream = x->stream,
                          .id = v[k].id,
                          .state = s->state[v[k].id] == ST_PENDING ? AS_BLOCK_PENDING
                                                                   : AS_BLOCK_ALLOCATED};
        rc = fn(user, &b);
        top = off + x->size;
    }
    return rc;
}

static void pl_fini(void *st)
{
    planned *s = st;
    if (s->held)
        s->dev.ops->release(s->dev.ctx, s->base, s->held);
    free(s->it);
    free(s->state);
    free(s->pos);
    free(s->live);
    free(s->sorted);
    memset(s, 0, sizeof *s);
}

const as_policy as_policy_planned = {
    .name = "planned",
    .summary = "the yardstick: sees the whole trace, places every block in one arena "
               "ahead of time (greedy by size, breadth, lifetime)",
    .abi = AS_POLICY_ABI,
    .knobs = knobs,
    .n_knobs = K_N,
    .state_size = sizeof(planned),
    .init = pl_init,
    .alloc = pl_alloc,
    .free = pl_free,
    .empty_cache = pl_empty_cache,
    .stats = pl_stats,
    .check = pl_check,
    .walk = pl_walk,
    .fini = pl_fini,
    .plan = pl_plan,
};
