/*
 * test_simdev.c - the simulated device: the placement rules (first-fit lowest address
 * growing upward; top-down highest hole growing downward; the CUDA driver's chunked heap,
 * the default) with reuse and merging of freed ranges, capacity refusals as results,
 * counters and the event log; and the chunked heap against the addresses the H200's
 * driver really returned (replay/data/torch-key-replay, h200-reuse and
 * validate-h200-gmlake-heap: cudaMalloc's and cuMemAddressReserve's).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "jsonin.h"
#include "simdev.h"
#include "util.h"

#define MIB (1ull << 20)

static void simdev_placement_first_fit(void)
{
    as_simdev *d;
    as_simdev_params p;
    as_simdev_default_params(&p);
    p.placement = AS_PLACE_LOW_FIRST_FIT;
    CU_ASSERT_FATAL(as_simdev_create(&p, &d) == 0);
    const as_device *dv = as_simdev_device(d);
    uint64_t a, b, c, x;
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 4 * MIB, &a), 0);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &b), 0);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 8 * MIB, &c), 0);
    CU_ASSERT_EQUAL(a, AS_SIMDEV_BASE);
    CU_ASSERT_EQUAL(b, a + 4 * MIB);
    CU_ASSERT_EQUAL(c, b + 2 * MIB);
    /* Free a and b: they merge into one 6 MiB hole at the bottom. */
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, a, 4 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, b, 2 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 6 * MIB, &x), 0);
    CU_ASSERT_EQUAL(x, a);
    /* Too big for any hole: goes past the top. */
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 10 * MIB, &x), 0);
    CU_ASSERT_EQUAL(x, c + 8 * MIB);
    /* Wrong size or address is a policy bug, not an OOM. */
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, c, 2 * MIB), AS_EINVAL);
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, c + 2 * MIB, 8 * MIB), AS_EINVAL);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 3 * MIB, &x), AS_EINVAL);
    as_simdev_destroy(d);
}

static void simdev_placement_top_down(void)
{
    as_simdev *d;
    as_simdev_params prm;
    as_simdev_default_params(&prm);
    prm.placement = AS_PLACE_TOP_DOWN;
    CU_ASSERT_FATAL(as_simdev_create(&prm, &d) == 0);
    const as_device *dv = as_simdev_device(d);
    uint64_t a, b, c, x, y;
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 4 * MIB, &a), 0);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &b), 0);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 8 * MIB, &c), 0);
    /* Each new range sits right below the previous one. */
    CU_ASSERT_EQUAL(a, AS_SIMDEV_TOP - 4 * MIB);
    CU_ASSERT_EQUAL(b, a - 2 * MIB);
    CU_ASSERT_EQUAL(c, b - 8 * MIB);
    /* Free a and b: one 6 MiB hole at the top; a 2 MiB range takes its top end. */
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, a, 4 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, b, 2 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &x), 0);
    CU_ASSERT_EQUAL(x, AS_SIMDEV_TOP - 2 * MIB);
    /* Too big for the 4 MiB left in the hole: below everything. */
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 6 * MIB, &y), 0);
    CU_ASSERT_EQUAL(y, c - 6 * MIB);
    /* Freeing the bottom range lets the space shrink back up: the next one lands there. */
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, y, 6 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 8 * MIB, &y), 0);
    CU_ASSERT_EQUAL(y, c - 8 * MIB);
    as_simdev_destroy(d);
}

static void simdev_placement_chunked(void)
{
    as_simdev *d;
    CU_ASSERT_FATAL(as_simdev_create(NULL, &d) == 0); /* the default rule */
    const as_device *dv = as_simdev_device(d);
    const uint64_t top = AS_SIMDEV_TOP;
    uint64_t p, q, a, b, e, x, y, z;
    /* The CUDA context's chunks (placement_chunked.c, ctx_chunks) catch the first 2 MiB ranges: its
     * newer chunk's last 2 MiB at T+414 MiB, then the older one's 24 MiB from T+488 MiB,
     * as every recorded process on the H200 shows. */
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &p), 0);
    CU_ASSERT_EQUAL(p, top + 414 * MIB);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &q), 0);
    CU_ASSERT_EQUAL(q, top + 488 * MIB);
    /* 26 MiB fits no chunk (22 MiB left up there): a new 32 MiB chunk right below the top,
     * the range at its bottom; 2 MiB then goes to the new chunk's tail, the newest chunk
     * with room. */
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 26 * MIB, &a), 0);
    CU_ASSERT_EQUAL(a, top - 32 * MIB);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &b), 0);
    CU_ASSERT_EQUAL(b, a + 26 * MIB);
    /* 98 MiB: a 128 MiB chunk right below; 26 MiB fits its 30 MiB tail. */
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 98 * MIB, &e), 0);
    CU_ASSERT_EQUAL(e, a - 128 * MIB);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 26 * MIB, &x), 0);
    CU_ASSERT_EQUAL(x, e + 98 * MIB);
    /* 22 MiB: only the context's older chunk has room (4 MiB in each new one). */
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 22 * MIB, &y), 0);
    CU_ASSERT_EQUAL(y, q + 2 * MIB);
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, y, 22 * MIB), 0);
    /* Emptying the top chunk gives its 32 MiB back, but a gap must be larger than the
     * chunk (mmap of size + alignment - a page, replay/PLACEMENT.md section 6): a 30 MiB
     * range opens a chunk below the lowest one instead. */
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, a, 26 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, b, 2 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 30 * MIB, &y), 0);
    CU_ASSERT_EQUAL(y, e - 32 * MIB);
    /* A larger gap is taken at its top: emptying the 128 MiB chunk leaves 160 MiB free
     * under the top; a 64 MiB chunk goes to its top. */
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, e, 98 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, x, 26 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 64 * MIB, &z), 0);
    CU_ASSERT_EQUAL(z, top - 64 * MIB);
    /* A hole freed inside a live chunk is reused; the most recently made chunk with room
     * wins even when an older one lies lower (replay/PLACEMENT.md rule 3): a 24 MiB chunk
     * (more than the context's 22 MiB) in the 96 MiB left under z (newest, 8 MiB free),
     * then 2 MiB goes to it, not to the chunk at y (2 MiB free) nor to the context's. */
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 24 * MIB, &a), 0);
    CU_ASSERT_EQUAL(a, z - 32 * MIB);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &b), 0);
    CU_ASSERT_EQUAL(b, a + 24 * MIB);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &x), 0);
    CU_ASSERT_EQUAL(x, b + 2 * MIB);
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, b, 2 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &b), 0);
    CU_ASSERT_EQUAL(b, a + 24 * MIB);
    as_simdev_destroy(d);
}

static void simdev_placement_best_fit(void)
{
    /* Inside a chunk the smallest free range that holds the request wins (PLACEMENT.md
     * section 6): the key's GC replays freed the 98 MiB range at the bottom of a 128 MiB
     * chunk, and the next 26 MiB segment went to the 28 MiB tail, not to the bottom. */
    as_simdev *d;
    CU_ASSERT_FATAL(as_simdev_create(NULL, &d) == 0);
    const as_device *dv = as_simdev_device(d);
    uint64_t a, b, x;
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 98 * MIB, &a), 0);
    CU_ASSERT_EQUAL(a, AS_SIMDEV_TOP - 128 * MIB);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &b), 0);
    CU_ASSERT_EQUAL(b, a + 98 * MIB);
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, a, 98 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 26 * MIB, &x), 0);
    CU_ASSERT_EQUAL(x, a + 100 * MIB);
    /* 2 MiB takes the 2 MiB left of the tail (the smaller range), 40 MiB the bottom */
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &x), 0);
    CU_ASSERT_EQUAL(x, a + 126 * MIB);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 40 * MIB, &x), 0);
    CU_ASSERT_EQUAL(x, a);
    as_simdev_destroy(d);
}

static void simdev_placement_reservations(void)
{
    /* cuMemAddressReserve's ranges share the chunked heap (PLACEMENT.md section 9): they
     * take free space in any chunk, a cudaMalloc takes a reservation chunk's tail, and a
     * reservation that fits no chunk opens one at the lowest gap from AS_SIMDEV_VA_LOW. */
    as_simdev *d;
    CU_ASSERT_FATAL(as_simdev_create(NULL, &d) == 0);
    const as_device *dv = as_simdev_device(d);
    const uint64_t low = AS_SIMDEV_VA_LOW;
    uint64_t c, r, s, t, u, x;
    /* a first 20 MiB reservation lands in the CUDA context's chunk, as gmlake's did */
    CU_ASSERT_EQUAL(dv->ops->va_reserve(dv->ctx, 20 * MIB, &c), 0);
    CU_ASSERT_EQUAL(c, AS_SIMDEV_TOP + 488 * MIB);
    /* 100 MiB: a 128 MiB chunk at the bottom; 2 MiB cudaMalloc goes to its tail (the
     * newest chunk with room), and so does a 12 MiB reservation */
    CU_ASSERT_EQUAL(dv->ops->va_reserve(dv->ctx, 100 * MIB, &r), 0);
    CU_ASSERT_EQUAL(r, low);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &x), 0);
    CU_ASSERT_EQUAL(x, low + 100 * MIB);
    CU_ASSERT_EQUAL(dv->ops->va_reserve(dv->ctx, 12 * MIB, &s), 0);
    CU_ASSERT_EQUAL(s, low + 102 * MIB);
    /* 40 MiB fits no chunk: the next one up, not under the cudaMalloc heap's top */
    CU_ASSERT_EQUAL(dv->ops->va_reserve(dv->ctx, 40 * MIB, &t), 0);
    CU_ASSERT_EQUAL(t, low + 128 * MIB);
    /* a chunk emptied gives its range back, and the lowest gap that holds the next one is
     * taken, an exact fit included: 128 MiB goes back to the bottom */
    CU_ASSERT_EQUAL(dv->ops->va_release(dv->ctx, r, 100 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->va_release(dv->ctx, s, 12 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, x, 2 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->va_reserve(dv->ctx, 128 * MIB, &u), 0);
    CU_ASSERT_EQUAL(u, low);
    /* inside a chunk a reservation takes the lowest free range that holds it, a cudaMalloc
     * the smallest: the 40 MiB one's 64 MiB chunk (the newest with room, u's is full)
     * takes 8 MiB above it; with the 40 MiB freed it has 40 MiB free at its bottom and
     * 16 MiB at its top */
    CU_ASSERT_EQUAL(dv->ops->va_reserve(dv->ctx, 8 * MIB, &x), 0);
    CU_ASSERT_EQUAL(x, low + 168 * MIB);
    CU_ASSERT_EQUAL(dv->ops->va_release(dv->ctx, t, 40 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->va_reserve(dv->ctx, 16 * MIB, &s), 0);
    CU_ASSERT_EQUAL(s, low + 128 * MIB);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &r), 0);
    CU_ASSERT_EQUAL(r, low + 176 * MIB);
    /* each kind is given back by its own call; map() wants a reservation */
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, s, 16 * MIB), AS_EINVAL);
    CU_ASSERT_EQUAL(dv->ops->va_release(dv->ctx, r, 2 * MIB), AS_EINVAL);
    CU_ASSERT_EQUAL(dv->ops->map(dv->ctx, s + 14 * MIB, 2 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->map(dv->ctx, s + 14 * MIB, 4 * MIB), AS_EINVAL);
    CU_ASSERT_EQUAL(dv->ops->map(dv->ctx, r, 2 * MIB), AS_EINVAL);
    CU_ASSERT_EQUAL(dv->ops->unmap(dv->ctx, s + 14 * MIB, 2 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->va_release(dv->ctx, s, 16 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->map(dv->ctx, s, 2 * MIB), AS_EINVAL);
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, r, 2 * MIB), 0);
    as_simdev_destroy(d);
}

static void simdev_capacity(void)
{
    as_simdev_params p;
    as_simdev_default_params(&p);
    p.capacity = 10 * MIB;
    as_simdev *d;
    CU_ASSERT_FATAL(as_simdev_create(&p, &d) == 0);
    const as_device *dv = as_simdev_device(d);
    uint64_t a, b, va;
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 8 * MIB, &a), 0);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 4 * MIB, &b), AS_DEV_OOM);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &b), 0); /* exactly full */
    CU_ASSERT_EQUAL(dv->ops->capacity(dv->ctx), 10 * MIB);
    CU_ASSERT_EQUAL(dv->ops->reserved(dv->ctx), 10 * MIB);
    /* Address space costs no capacity; mapped pages do. */
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, a, 8 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->va_reserve(dv->ctx, 1024 * MIB, &va), 0);
    CU_ASSERT_EQUAL(dv->ops->map(dv->ctx, va, 6 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->map(dv->ctx, va + 6 * MIB, 4 * MIB), AS_DEV_OOM);
    CU_ASSERT_EQUAL(dv->ops->map(dv->ctx, va + 1024 * MIB, 2 * MIB), AS_EINVAL);
    CU_ASSERT_EQUAL(dv->ops->unmap(dv->ctx, va, 6 * MIB), 0);
    as_dev_counters c;
    as_simdev_counters_get(d, &c);
    CU_ASSERT_EQUAL(c.reserved, 2 * MIB);
    CU_ASSERT_EQUAL(c.peak_reserved, 10 * MIB);
    CU_ASSERT_EQUAL(c.reserves, 2);
    CU_ASSERT_EQUAL(c.releases, 1);
    CU_ASSERT_EQUAL(c.maps, 1);
    CU_ASSERT_EQUAL(c.unmaps, 1);
    CU_ASSERT_EQUAL(c.refusals, 2);
    as_simdev_destroy(d);
}

typedef struct logbuf {
    as_dev_event ev[8];
    int n;
} logbuf;

static void log_fn(void *user, const as_dev_event *ev)
{
    logbuf *l = user;
    if (l->n < 8)
        l->ev[l->n++] = *ev;
}

static void simdev_log(void)
{
    as_simdev *d;
    CU_ASSERT_FATAL(as_simdev_create(NULL, &d) == 0);
    logbuf l = {.n = 0};
    as_simdev_set_log(d, log_fn, &l);
    const as_device *dv = as_simdev_device(d);
    uint64_t a;
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 20 * MIB, &a), 0);
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, a, 20 * MIB), 0);
    CU_ASSERT_EQUAL_FATAL(l.n, 2);
    CU_ASSERT_EQUAL(l.ev[0].action, AS_DEV_SEGMENT_ALLOC);
    CU_ASSERT_EQUAL(l.ev[0].size, 20 * MIB);
    CU_ASSERT_EQUAL(l.ev[1].action, AS_DEV_SEGMENT_FREE);
    CU_ASSERT_STRING_EQUAL(as_dev_action_name(l.ev[1].action), "segment_free");
    CU_ASSERT(l.ev[0].cost_ns > 0);
    as_simdev_destroy(d);
}

/* alias() maps pages a second time: no capacity (it succeeds on a full device), no
 * segment event, its own cost; both ranges must lie in reservations, granularity-aligned. */
static void simdev_alias(void)
{
    as_simdev_params p;
    as_simdev_default_params(&p);
    p.capacity = 8 * MIB;
    p.alias = (as_cost){.fixed_ns = 1000, .ns_per_mib = 10};
    p.unalias = (as_cost){.fixed_ns = 300, .ns_per_mib = 1};
    as_simdev *d;
    CU_ASSERT_FATAL(as_simdev_create(&p, &d) == 0);
    logbuf l = {.n = 0};
    as_simdev_set_log(d, log_fn, &l);
    const as_device *dv = as_simdev_device(d);
    uint64_t a, s;
    CU_ASSERT_EQUAL(dv->ops->va_reserve(dv->ctx, 8 * MIB, &a), 0);
    CU_ASSERT_EQUAL(dv->ops->va_reserve(dv->ctx, 8 * MIB, &s), 0);
    CU_ASSERT_EQUAL(dv->ops->map(dv->ctx, a, 8 * MIB), 0); /* the device is full */
    as_dev_counters c0, c;
    as_simdev_counters_get(d, &c0);
    CU_ASSERT_EQUAL(dv->ops->alias(dv->ctx, s + 4 * MIB, a, 4 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->alias(dv->ctx, s, a + 4 * MIB, 4 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->reserved(dv->ctx), 8 * MIB);
    CU_ASSERT_EQUAL(dv->ops->alias(dv->ctx, s + MIB, a, 2 * MIB), AS_EINVAL); /* misaligned */
    CU_ASSERT_EQUAL(dv->ops->alias(dv->ctx, s, a + MIB, 2 * MIB), AS_EINVAL);
    CU_ASSERT_EQUAL(dv->ops->alias(dv->ctx, s, a, 0), AS_EINVAL);
    CU_ASSERT_EQUAL(dv->ops->alias(dv->ctx, s + 6 * MIB, a, 4 * MIB), AS_EINVAL); /* past s */
    CU_ASSERT_EQUAL(dv->ops->alias(dv->ctx, a, s + 8 * MIB, 2 * MIB), AS_EINVAL); /* no range */
    CU_ASSERT_EQUAL(dv->ops->unalias(dv->ctx, s + 9 * MIB, 2 * MIB), AS_EINVAL);
    CU_ASSERT_EQUAL(dv->ops->unalias(dv->ctx, s, 8 * MIB), 0);
    as_simdev_counters_get(d, &c);
    CU_ASSERT_EQUAL(c.aliases, 2);
    CU_ASSERT_EQUAL(c.unaliases, 1);
    CU_ASSERT_EQUAL(c.reserved, 8 * MIB);
    CU_ASSERT_EQUAL(c.peak_reserved, 8 * MIB);
    CU_ASSERT_EQUAL(c.maps, 1);
    CU_ASSERT_EQUAL(c.refusals, 0);
    /* 2 x (1000 + 10 x 4) + 300 + 1 x 8 */
    CU_ASSERT_DOUBLE_EQUAL(c.time_ns - c0.time_ns, 2388.0, 1e-6);
    CU_ASSERT_EQUAL(l.n, 1); /* the map alone: a second mapping is no segment event */
    CU_ASSERT_EQUAL(dv->ops->unmap(dv->ctx, a, 8 * MIB), 0);
    CU_ASSERT_EQUAL(dv->ops->reserved(dv->ctx), 0);
    as_simdev_destroy(d);
}

static void simdev_many_holes(void)
{
    /* 1024 ranges (64 full chunks), free every other one, then fill each hole: every reuse
     * must land in the hole the rule names (lowest address for first fit, and, all holes
     * being equal, inside chunks; highest for top-down), proving the search holds over a
     * deep tree. */
    for (int rule = 0; rule < 3; rule++) {
        as_simdev *d;
        as_simdev_params prm;
        as_simdev_default_params(&prm);
        prm.placement = rule == 0   ? AS_PLACE_LOW_FIRST_FIT
                        : rule == 1 ? AS_PLACE_TOP_DOWN
                                    : AS_PLACE_CHUNKED;
        CU_ASSERT_FATAL(as_simdev_create(&prm, &d) == 0);
        const as_device *dv = as_simdev_device(d);
        uint64_t addr[1024], ctx1, ctx2;
        /* chunked: fill the CUDA context's free space first (24 MiB and 2 MiB), so that
         * the 1024 ranges fill 64 new chunks exactly */
        if (rule == 2) {
            CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 24 * MIB, &ctx1), 0);
            CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &ctx2), 0);
            CU_ASSERT(ctx1 > AS_SIMDEV_TOP && ctx2 > AS_SIMDEV_TOP);
        }
        for (int i = 0; i < 1024; i++)
            CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &addr[i]), 0);
        for (int i = 0; i < 1024; i += 2)
            CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, addr[i], 2 * MIB), 0);
        int ok = 1;
        for (int k = 0; k < 512; k++) {
            int want = -1; /* the freed range the rule picks next */
            for (int i = 0; i < 1024; i += 2)
                if (addr[i] &&
                    (want < 0 || (rule == 1 ? addr[i] > addr[want] : addr[i] < addr[want])))
                    want = i;
            uint64_t x;
            ok &= dv->ops->reserve(dv->ctx, 2 * MIB, &x) == 0 && x == addr[want];
            addr[want] = 0;
        }
        CU_ASSERT(ok);
        as_simdev_destroy(d);
    }
}

/* ---- the chunked heap against the H200's recorded addresses ------------------------------ */


typedef struct rec_seg {
    uint64_t rec, sim, size; /* one live segment: the recorded address, ours, its size */
} rec_seg;

/* The next row of process `conf` after *line (a row's leading newline); 1 with its fields. */
static int next_row(const char **line, const char *const conf_of_run[], int nruns, const char *conf,
                    int *run, char act[32], uint64_t *addr, uint64_t *size)
{
    for (const char *l = *line; l && l[1]; l = strchr(l + 1, '\n')) {
        unsigned long long a, sz;
        if (sscanf(l + 1, "%d,%*u,%*u,%31[^,],%llu,%llu", run, act, &a, &sz) == 4 && *run >= 0 &&
            *run < nruns && strcmp(conf_of_run[*run], conf) == 0) {
            *line = strchr(l + 1, '\n');
            *addr = a;
            *size = sz;
            return 1;
        }
    }
    return 0;
}

/* Free-running: our device places every segment itself, fed the recorded sequence of
 * cudaMalloc / cudaFree sizes of one process (its runs back to back, each ending with its
 * segments freed, as the policy's teardown does). A segment counts when our address,
 * relative to our heap's top, equals the recorded one relative to the recorded heap's top
 * (the top of the first chunk the process made: its first 32 MiB aligned address). */
static void replay_process(const char *csv, const char *const conf_of_run[], int nruns,
                           const char *conf, unsigned *exact, unsigned *total)
{
    const char *line = strchr(csv, '\n');
    char act[32];
    int run, cur_run = -1, ok = 1;
    uint64_t addr, size, rec_top = 0;
    while (!rec_top && next_row(&line, conf_of_run, nruns, conf, &run, act, &addr, &size))
        if (!strcmp(act, "segment_alloc") && addr % AS_SIMDEV_CHUNK == 0)
            rec_top = addr + (size + AS_SIMDEV_CHUNK - 1) / AS_SIMDEV_CHUNK * AS_SIMDEV_CHUNK;
    if (!rec_top)
        return; /* no cudaMalloc segment in this process (expandable segments) */
    as_simdev *d;
    CU_ASSERT_FATAL(as_simdev_create(NULL, &d) == 0);
    const as_device *dv = as_simdev_device(d);
    rec_seg *live = NULL;
    size_t nlive = 0, cap = 0;
    line = strchr(csv, '\n');
    while (next_row(&line, conf_of_run, nruns, conf, &run, act, &addr, &size)) {
        if (run != cur_run) { /* the previous run's teardown */
            for (size_t i = 0; i < nlive; i++)
                ok &= dv->ops->release(dv->ctx, live[i].sim, live[i].size) == 0;
            nlive = 0;
            cur_run = run;
        }
        if (!strcmp(act, "segment_alloc")) {
            uint64_t a = 0;
            ok &= dv->ops->reserve(dv->ctx, size, &a) == 0;
            (*total)++;
            *exact += a - AS_SIMDEV_TOP == addr - rec_top;
            if (nlive == cap) {
                cap = cap ? 2 * cap : 1024;
                live = realloc(live, cap * sizeof *live);
                CU_ASSERT_FATAL(live != NULL);
            }
            live[nlive++] = (rec_seg){addr, a, size};
        } else if (!strcmp(act, "segment_free")) {
            for (size_t i = 0; i < nlive; i++)
                if (live[i].rec == addr) {
                    ok &= dv->ops->release(dv->ctx, live[i].sim, size) == 0;
                    live[i] = live[--nlive];
                    break;
                }
        }
    }
    CU_ASSERT(ok);
    free(live);
    as_simdev_destroy(d);
}

/* Every process of the key replays with cudaMalloc segments (the cudaMallocAsync ones have
 * none; expandable ones only maps, which the policy places): 13283 segments. The rules of
 * replay/PLACEMENT.md section 6 place every one of them where the H200's driver did
 * (replay/placement_model.py, an independent implementation, agrees: 13283 free-running);
 * the rules before them placed 5417. */
static void torch_recordings(const char *dir, const char *const *stems, size_t nstems,
                             unsigned *exact, unsigned *total)
{
    for (size_t f = 0; f < nstems; f++) {
        char path[512], why[600];
        json_t *root = NULL;
        snprintf(path, sizeof path, "%s/%s.json", dir, stems[f]);
        if (as_json_load(tu_path(path), &root, why, sizeof why))
            fprintf(stderr, "\n  %s\n", why);
        snprintf(path, sizeof path, "%s/%s.csv.zst", dir, stems[f]);
        char *csv = tu_slurp_zst(tu_path(path), NULL);
        CU_ASSERT_FATAL(root && csv);
        /* the JSON's runs, in order, each with its "conf": one process per conf */
        const char *conf_of_run[64], *confs[16];
        int nruns = 0, nconfs = 0;
        size_t i;
        const json_t *r;
        json_array_foreach(json_object_get(root, "runs"), i, r)
        {
            const char *conf = json_string_value(json_object_get(r, "conf"));
            CU_ASSERT_FATAL(conf != NULL && nruns < 64);
            conf_of_run[nruns++] = conf;
            if (nconfs < 16 && (!nconfs || strcmp(confs[nconfs - 1], conf)))
                confs[nconfs++] = conf;
        }
        for (int c = 0; c < nconfs; c++)
            replay_process(csv, conf_of_run, nruns, confs[c], exact, total);
        json_decref(root);
        free(csv);
    }
}

static void simdev_key_replay_addresses(void)
{
    static const char *const stems[] = {"torch_moe_like_main", "torch_resnet_varbatch_main",
                                        "torch_resnet_varbatch_more"};
    unsigned exact = 0, total = 0;
    torch_recordings("replay/data/torch-key-replay", stems, 3, &exact, &total);
    fprintf(stderr, "\n  simdev on the H200's recorded addresses: %u of %u segments exact\n", exact,
            total);
    CU_ASSERT_EQUAL(total, 13283);
    CU_ASSERT_EQUAL(exact, total);
}

/* One row of record_reuse.py's or record_reserve.py's CSV (proc,step,op,size,addr) at
 * l + 1; 1 when it is one. */
static int reuse_row(const char *l, int *proc, char op[16], unsigned long long *size,
                     unsigned long long *addr)
{
    return sscanf(l + 1, "%d,%*u,%15[^,],%llu,%llu", proc, op, size, addr) == 4;
}

#define HIGH 0x700000000000ull /* the driver's cudaMalloc heap lies above, reservations below */

typedef struct addr_count {
    unsigned exact, total;   /* cudaMallocs */
    unsigned vexact, vtotal; /* cuMemAddressReserve ranges */
} addr_count;

/* Where our device should have put what the driver put at rec: below HIGH the same address
 * (AS_SIMDEV_VA_LOW is the driver's own), above it the same offset from the heap's top. */
static uint64_t ours(uint64_t rec, uint64_t rec_top)
{
    return rec < HIGH ? rec : rec - rec_top + AS_SIMDEV_TOP;
}

/* One process of record_reuse.py or record_reserve.py (its rows from *line on),
 * free-running as replay_process does, reservations through va_reserve; *line ends at the
 * next process's first row. */
static void reuse_process(const char **line, addr_count *n)
{
    int proc = -1, p, ok = 1;
    uint64_t rec_top = 0;
    char op[16];
    unsigned long long a, sz;
    for (const char *l = *line; l && l[1] && !rec_top; l = strchr(l + 1, '\n'))
        if (reuse_row(l, &p, op, &sz, &a) && (proc < 0 || p == proc)) {
            proc = p;
            if (!strcmp(op, "malloc") && a % AS_SIMDEV_CHUNK == 0) /* its first chunk's top */
                rec_top = a + (sz + AS_SIMDEV_CHUNK - 1) / AS_SIMDEV_CHUNK * AS_SIMDEV_CHUNK;
        }
    as_simdev *d;
    CU_ASSERT_FATAL(as_simdev_create(NULL, &d) == 0);
    const as_device *dv = as_simdev_device(d);
    rec_seg *live = NULL;
    size_t nlive = 0, cap = 0;
    for (const char *l = *line; l && l[1]; l = strchr(l + 1, '\n')) {
        if (!reuse_row(l, &p, op, &sz, &a))
            continue;
        if (p != proc)
            break;
        *line = strchr(l + 1, '\n');
        int va = !strcmp(op, "reserve") || !strcmp(op, "release");
        if (!strcmp(op, "malloc") || !strcmp(op, "reserve")) {
            uint64_t s = 0;
            ok &= (va ? dv->ops->va_reserve(dv->ctx, sz, &s) : dv->ops->reserve(dv->ctx, sz, &s)) ==
                  0;
            *(va ? &n->vtotal : &n->total) += 1;
            *(va ? &n->vexact : &n->exact) += s == ours(a, rec_top);
            if (nlive == cap) {
                cap = cap ? 2 * cap : 256;
                live = realloc(live, cap * sizeof *live);
                CU_ASSERT_FATAL(live != NULL);
            }
            live[nlive++] = (rec_seg){a, s, sz};
        } else if (!strcmp(op, "free") || !strcmp(op, "release")) {
            for (size_t i = 0; i < nlive; i++)
                if (live[i].rec == a) {
                    ok &= (va ? dv->ops->va_release(dv->ctx, live[i].sim, sz)
                              : dv->ops->release(dv->ctx, live[i].sim, sz)) == 0;
                    live[i] = live[--nlive];
                    break;
                }
        }
    }
    CU_ASSERT(ok && rec_top);
    free(live);
    as_simdev_destroy(d);
}

/* Recordings made after the rules were fixed, never used to fit them (replay/PLACEMENT.md
 * section 7, replay/data/h200-reuse): the llama key's replays through PyTorch (5742
 * segments in 5 processes with cudaMalloc segments; its expandable configs only map) and
 * 80 processes of record_reuse.py's free-and-reallocate patterns (24992 cudaMallocs). */
static void simdev_held_out_addresses(void)
{
    static const char *const stems[] = {"torch_llama_0", "torch_llama_1", "torch_llama_2",
                                        "torch_llama_3", "torch_llama_4", "torch_llama_5",
                                        "torch_llama_6"};
    unsigned exact = 0, total = 0, procs = 0;
    torch_recordings("replay/data/h200-reuse", stems, 7, &exact, &total);
    char *csv = tu_slurp_zst(tu_path("replay/data/h200-reuse/reuse.csv.zst"), NULL);
    CU_ASSERT_FATAL(csv != NULL);
    addr_count n = {0};
    for (const char *line = strchr(csv, '\n'); line && line[1]; procs++)
        reuse_process(&line, &n);
    free(csv);
    unsigned rexact = n.exact, rtotal = n.total;
    CU_ASSERT_EQUAL(n.vtotal, 0);
    fprintf(stderr,
            "\n  simdev, held out: llama replays %u of %u segments exact, free/reallocate "
            "patterns %u of %u in %u processes\n",
            exact, total, rexact, rtotal, procs);
    CU_ASSERT_EQUAL(total, 5742);
    CU_ASSERT_EQUAL(exact, total);
    CU_ASSERT_EQUAL(procs, 80);
    CU_ASSERT_EQUAL(rtotal, 24992);
    CU_ASSERT_EQUAL(rexact, rtotal);
}

/* ---- cuMemAddressReserve's ranges against the H200's addresses -------------------------- */

/* record_reserve.py's 40 processes (replay/data/validate-h200-gmlake-heap), recorded after
 * the rule of PLACEMENT.md section 9 was fixed: cudaMalloc and cuMemAddressReserve calls in
 * four patterns made to put reservations and cudaMallocs into each other's chunks and to
 * give a chunk several free ranges. Every range where the driver put it, free-running: the
 * 3180 cudaMallocs and all 5549 reservations (with a reservation taking the smallest free
 * range of its chunk, as a cudaMalloc does, 3056: replay/gmlake_addresses.py --probe). */
static void simdev_reservation_probe(void)
{
    char *csv =
        tu_slurp_zst(tu_path("replay/data/validate-h200-gmlake-heap/reserve.csv.zst"), NULL);
    CU_ASSERT_FATAL(csv != NULL);
    addr_count n = {0};
    unsigned procs = 0;
    for (const char *line = strchr(csv, '\n'); line && line[1]; procs++)
        reuse_process(&line, &n);
    free(csv);
    fprintf(
        stderr,
        "\n  simdev, held out: %u of %u reservations, %u of %u cudaMallocs exact in %u processes\n",
        n.vexact, n.vtotal, n.exact, n.total, procs);
    CU_ASSERT_EQUAL(procs, 40);
    CU_ASSERT_EQUAL(n.vtotal, 5549);
    CU_ASSERT_EQUAL(n.vexact, n.vtotal);
    CU_ASSERT_EQUAL(n.total, 3180);
    CU_ASSERT_EQUAL(n.exact, n.total);
}

typedef struct tar_file {
    char name[101];
    const char *data;
    size_t len;
} tar_file;

/* The regular files of a ustar archive in memory, at most max; returns how many. */
static size_t tar_files(const char *t, size_t n, tar_file *out, size_t max)
{
    size_t k = 0;
    for (size_t off = 0; off + 512 <= n && t[off] && k < max;) {
        size_t len = (size_t)strtoull(t + off + 124, NULL, 8);
        if (off + 512 + len > n)
            break;
        if (t[off + 156] == '0' || t[off + 156] == 0) {
            memcpy(out[k].name, t + off, 100);
            out[k].name[100] = 0;
            out[k].data = t + off + 512;
            out[k++].len = len;
        }
        off += 512 + (len + 511) / 512 * 512;
    }
    return k;
}

typedef struct seg_row {
    unsigned run;
    unsigned long long alloc, addr, size;
    char act[32];
} seg_row;

/* A --segments CSV (run,alloc,event,action,addr,size) into rows; returns how many. */
static size_t seg_rows(const char *csv, seg_row **out)
{
    size_t n = 0, cap = 0;
    *out = NULL;
    for (const char *l = strchr(csv, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
        seg_row r;
        if (sscanf(l + 1, "%u,%llu,%*u,%31[^,],%llu,%llu", &r.run, &r.alloc, r.act, &r.addr,
                   &r.size) != 5)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            *out = realloc(*out, cap * sizeof **out);
            CU_ASSERT_FATAL(*out != NULL);
        }
        (*out)[n++] = r;
    }
    return n;
}

typedef struct gm_count {
    unsigned runs, same;     /* runs, runs with the GPU's device events */
    unsigned vexact, vtotal; /* mapped reservations at the driver's address */
    unsigned mexact, mtotal; /* cudaMallocs in reservation chunks (below HIGH) */
} gm_count;

/* One item of the gmlake validate: allocsim at its 9 capacities (its pred.json says the
 * spec, trace and capacities), the simulated device's addresses against the driver's
 * (replay.csv). A pBlock is mapped whole right after its cuMemAddressReserve, so a map's
 * address is its reservation's; stitched ranges are reserved unmapped and not in the log,
 * but the simulator makes them too. */
static void gm_item(const tar_file *pj, const tar_file *rc, gm_count *g)
{
    json_error_t jerr;
    json_t *root = json_loadb(pj->data, pj->len, 0, &jerr);
    CU_ASSERT_FATAL(root != NULL);
    const json_t *runs = json_object_get(root, "runs"), *r;
    const char *spec = json_string_value(json_object_get(json_array_get(runs, 0), "spec"));
    const char *trace = json_string_value(
        json_object_get(json_array_get(json_object_get(root, "traces"), 0), "file"));
    CU_ASSERT_FATAL(spec && trace);
    char tmp[1024]; /* tu_tmp's buffer is one of tu_path's four */
    snprintf(tmp, sizeof tmp, "%s", tu_tmp(".csv"));
    char args[4096];
    int at = snprintf(args, sizeof args, "-q -p '%s' --segments %s", spec, tmp);
    size_t i;
    json_array_foreach(runs, i, r) at +=
        snprintf(args + at, sizeof args - (size_t)at, " -c %lld",
                 (long long)json_integer_value(json_object_get(r, "capacity")));
    snprintf(args + at, sizeof args - (size_t)at, " %s > /dev/null", tu_path(trace));
    g->runs += (unsigned)json_array_size(runs);
    CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(args, NULL, 0, NULL, 0), 0);
    char *sim = tu_slurp(tmp, NULL), *rec = malloc(rc->len + 1);
    CU_ASSERT_FATAL(sim && rec);
    memcpy(rec, rc->data, rc->len);
    rec[rc->len] = 0;
    seg_row *a, *b;
    size_t na = seg_rows(sim, &a), nb = seg_rows(rec, &b);
    for (unsigned run = 0; run < json_array_size(runs); run++) {
        int same = 1;
        size_t x = 0, y = 0;
        while (x < na && a[x].run < run)
            x++;
        while (y < nb && b[y].run < run)
            y++;
        for (; x < na && y < nb && a[x].run == run && b[y].run == run; x++, y++) {
            same &=
                a[x].alloc == b[y].alloc && a[x].size == b[y].size && !strcmp(a[x].act, b[y].act);
            int map = !strcmp(b[y].act, "segment_map"), alloc = !strcmp(b[y].act, "segment_alloc");
            if (b[y].addr < HIGH && (map || alloc)) {
                *(map ? &g->vtotal : &g->mtotal) += 1;
                *(map ? &g->vexact : &g->mexact) += a[x].addr == b[y].addr;
            }
        }
        same &= !(x < na && a[x].run == run) && !(y < nb && b[y].run == run);
        g->same += same;
    }
    free(a);
    free(b);
    free(sim);
    free(rec);
    tu_rm(tmp);
    json_decref(root);
}

/* One gmlake validate's archive: every item (its pred.json and replay.csv), the items
 * section 9's rules were read off counted in fit, the others in held. */
static unsigned gm_archive(const char *rel, gm_count *fit, gm_count *held)
{
    size_t n;
    char *tar = tu_slurp_zst(tu_path(rel), &n);
    CU_ASSERT_FATAL(tar != NULL);
    static tar_file f[256];
    size_t nf = tar_files(tar, n, f, 256);
    unsigned items = 0;
    for (size_t i = 0; i < nf; i++) {
        size_t l = strlen(f[i].name);
        if (l < 10 || strcmp(f[i].name + l - 10, ".pred.json"))
            continue;
        char want[128];
        snprintf(want, sizeof want, "%.*s.replay.csv", (int)(l - 10), f[i].name);
        for (size_t j = 0; j < nf; j++)
            if (!strcmp(f[j].name, want)) {
                int fitted = strstr(want, "resnet_varbatch") || strstr(want, "graph_probe") ||
                             strstr(want, "moe_like_gmlake-fraglimit");
                gm_item(&f[i], &f[j], fitted ? fit : held);
                items++;
            }
    }
    free(tar);
    fprintf(stderr,
            "\n  %s: fitted %u of %u runs' events, %u of %u reservations, %u of %u "
            "cudaMallocs among them; held out %u of %u, %u of %u, %u of %u\n",
            rel, fit->same, fit->runs, fit->vexact, fit->vtotal, fit->mexact, fit->mtotal,
            held->same, held->runs, held->vexact, held->vtotal, held->mexact, held->mtotal);
    return items;
}

static void gm_expect(const gm_count *g, unsigned runs, unsigned resv, unsigned mallocs)
{
    CU_ASSERT_EQUAL(g->runs, runs);
    CU_ASSERT_EQUAL(g->same, g->runs);
    CU_ASSERT_EQUAL(g->vtotal, resv);
    CU_ASSERT_EQUAL(g->vexact, g->vtotal);
    CU_ASSERT_EQUAL(g->mtotal, mallocs);
    CU_ASSERT_EQUAL(g->mexact, g->mtotal);
}

/* The gmlake validates on the H200 (108 runs each: 6 traces, gmlake's defaults and
 * fraglimit=2M, 9 capacities each): the one recorded with this rule
 * (validate-h200-gmlake-heap) and the one with the stitched blocks mapped
 * (validate-h200-gmlake-stitch, at the earlier simulator's capacities): every run's device
 * events as the GPU's, every mapped reservation and every cudaMalloc that went into a
 * reservation's chunk at the driver's very address. Fitted: the items section 9's rules
 * were read off (resnet_varbatch, graph_probe; the lowest free range from moe_like at
 * fraglimit=2M, the only reservation where lowest and smallest differ); held out: moe_like
 * at the defaults, llama_accum_ckpt and both streams2 (of which only the first 40 events
 * of one run each were looked at; the later runs' large reservations, which
 * gmlake_addresses.py's replay of the log misses, follow ranges stitched and never mapped
 * as pBlocks). */
static void simdev_gmlake_addresses(void)
{
    gm_count fit = {0}, held = {0}, sfit = {0}, sheld = {0};
    CU_ASSERT_EQUAL(gm_archive("replay/data/validate-h200-gmlake-heap/runs.tar.zst", &fit, &held),
                    12);
    gm_expect(&fit, 45, 4117, 546);
    gm_expect(&held, 63, 6914, 365);
    CU_ASSERT_EQUAL(
        gm_archive("replay/data/validate-h200-gmlake-stitch/runs.tar.zst", &sfit, &sheld), 12);
    gm_expect(&sfit, 45, 4135, 534);
    gm_expect(&sheld, 63, 6914, 365);
}

/* PyTorch's expandable segments reserve with cuMemAddressReserve too (about 157 GiB a
 * segment on the H200): the streams2 recording replayed through PyTorch on the GPU
 * (replay/data/h200-reuse) put its 4 segments at 0x302000000 and each next chunk up, and
 * the simulator's torch,expandable=true maps all 102 pages at the very addresses. */
static void simdev_expandable_addresses(void)
{
    char tmp[1024]; /* tu_tmp's buffer is one of tu_path's four */
    snprintf(tmp, sizeof tmp, "%s", tu_tmp(".csv"));
    char args[3072];
    snprintf(
        args, sizeof args, "-q -p torch,expandable=true --segments %s %s > /dev/null", tmp,
        tu_path("tests/data/torch-2.11-h200-streams/streams2_expandable_segments_True.pickle.zst"));
    CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(args, NULL, 0, NULL, 0), 0);
    char *sim = tu_slurp(tmp, NULL);
    char *rec = tu_slurp_zst(
        tu_path("replay/data/h200-reuse/streams_expandable_segments_True.pytorch.csv.zst"), NULL);
    CU_ASSERT_FATAL(sim && rec);
    seg_row *a, *b;
    size_t na = seg_rows(sim, &a), nb = seg_rows(rec, &b), same = 0;
    for (size_t i = 0; i < na && i < nb; i++)
        same += a[i].alloc == b[i].alloc && a[i].addr == b[i].addr && a[i].size == b[i].size &&
                !strcmp(a[i].act, b[i].act);
    CU_ASSERT_EQUAL(nb, 102);
    CU_ASSERT_EQUAL(na, nb);
    CU_ASSERT_EQUAL(same, nb);
    free(a);
    free(b);
    free(sim);
    free(rec);
    tu_rm(tmp);
}

/* ---- the chunked heap against a straightforward model of the same rules -------------- */

/* The rules of simdev.h, written as plainly as possible: every chunk and range in flat
 * arrays, every decision by a full scan. The device must place exactly the same. */
typedef struct ref_chunk {
    uint64_t base, len, seq;
    int alive;
} ref_chunk;

typedef struct ref_range {
    uint64_t addr, size;
    int chunk, va; /* va: a va_reserve() range */
} ref_range;

typedef struct ref_heap {
    ref_chunk ch[4096];
    ref_range r[4096];
    int nch, nr;
    uint64_t seq, gran;
} ref_heap;

static void ref_add_chunk(ref_heap *h, uint64_t base, uint64_t len)
{
    h->ch[h->nch++] = (ref_chunk){base, len, ++h->seq, 1};
}

static void ref_init(ref_heap *h, uint64_t gran)
{
    h->nch = h->nr = 0;
    h->seq = 0;
    h->gran = gran;
    /* the CUDA context's chunks (simdev.h), with the part the context uses as a range
     * that is never released */
    ref_add_chunk(h, AS_SIMDEV_TOP + 480 * MIB, 32 * MIB);
    h->r[h->nr++] = (ref_range){AS_SIMDEV_TOP + 480 * MIB, 8 * MIB, 0, 0};
    ref_add_chunk(h, AS_SIMDEV_TOP + 384 * MIB, 32 * MIB);
    h->r[h->nr++] = (ref_range){AS_SIMDEV_TOP + 384 * MIB, 30 * MIB, 1, 0};
}

/* The start of the smallest free range of chunk c that holds `size` bytes, the lowest of
 * equals (best fit inside the chunk), or with `first` the lowest that holds it, or 0: every
 * page of the chunk, one by one. */
static uint64_t ref_fit_in(const ref_heap *h, int c, uint64_t size, int first)
{
    const ref_chunk *k = &h->ch[c];
    uint64_t best = 0, blen = UINT64_MAX, run = 0, start = 0;
    for (uint64_t a = k->base; a <= k->base + k->len; a += h->gran) {
        int used = a == k->base + k->len; /* the end closes the last run */
        for (int i = 0; i < h->nr && !used; i++)
            used = h->r[i].chunk == c && h->r[i].addr <= a && a < h->r[i].addr + h->r[i].size;
        if (!used && !run++)
            start = a;
        if (used && run) {
            if (run * h->gran >= size && run * h->gran < blen) {
                best = start;
                blen = run * h->gran;
                if (first)
                    return best;
            }
            run = 0;
        }
    }
    return best;
}

/* A new reservation chunk: the bottom of the lowest gap from AS_SIMDEV_VA_LOW up that
 * holds it, found by stepping over every chunk in the way. */
static uint64_t ref_low_gap(const ref_heap *h, uint64_t clen)
{
    uint64_t at = AS_SIMDEV_VA_LOW;
    for (;;) {
        int hit = -1;
        for (int c = 0; c < h->nch; c++)
            if (h->ch[c].alive && h->ch[c].base < at + clen && h->ch[c].base + h->ch[c].len > at)
                hit = c;
        if (hit < 0)
            return at;
        at = h->ch[hit].base + h->ch[hit].len;
    }
}

static uint64_t ref_reserve(ref_heap *h, uint64_t size, int va)
{
    /* the most recently made chunk with room, best fit inside it */
    int best = -1;
    uint64_t at = 0;
    for (int c = 0; c < h->nch; c++) {
        uint64_t a;
        if (h->ch[c].alive && (best < 0 || h->ch[c].seq > h->ch[best].seq) &&
            (a = ref_fit_in(h, c, size, va))) {
            best = c;
            at = a;
        }
    }
    if (best < 0) {
        /* a new chunk: a reservation's at the lowest gap from AS_SIMDEV_VA_LOW up that
         * holds it; a cudaMalloc's at the top of the highest gap under the top larger than
         * itself, or under the lowest chunk */
        uint64_t clen = (size + 32 * MIB - 1) / (32 * MIB) * (32 * MIB), top = AS_SIMDEV_TOP;
        if (va)
            top = ref_low_gap(h, clen) + clen;
        while (!va) {
            int below = -1; /* the highest chunk under `top` */
            for (int c = 0; c < h->nch; c++)
                if (h->ch[c].alive && h->ch[c].base < top &&
                    (below < 0 || h->ch[c].base > h->ch[below].base))
                    below = c;
            if (below < 0 || top - (h->ch[below].base + h->ch[below].len) > clen)
                break;
            top = h->ch[below].base;
        }
        at = top - clen;
        for (best = 0; best < h->nch && h->ch[best].alive; best++)
            ;
        if (best == h->nch)
            h->nch++;
        h->ch[best] = (ref_chunk){at, clen, ++h->seq, 1};
    }
    h->r[h->nr++] = (ref_range){at, size, best, va};
    return at;
}

static int ref_release(ref_heap *h, uint64_t addr, uint64_t size, int va)
{
    int i = 0;
    while (i < h->nr &&
           !(h->r[i].addr == addr && h->r[i].size == size && h->r[i].va == va && i > 1))
        i++;
    if (i == h->nr)
        return AS_EINVAL;
    int c = h->r[i].chunk, used = 0;
    h->r[i] = h->r[--h->nr];
    for (int j = 0; j < h->nr; j++)
        used |= h->r[j].chunk == c;
    if (!used)
        h->ch[c].alive = 0;
    return AS_DEV_OK;
}

static int dev_give(const as_device *dv, uint64_t a, uint64_t size, int va)
{
    return va ? dv->ops->va_release(dv->ctx, a, size) : dv->ops->release(dv->ctx, a, size);
}

/* cudaMalloc's ranges and, a third of them, cuMemAddressReserve's, in one heap. */
static void simdev_chunked_matches_model(void)
{
    uint64_t rng = tu_seed("simdev_chunked_matches_model");
    static ref_heap h;
    for (int round = 0; round < 6; round++) {
        /* rounds differ in how full the heap runs and how large the ranges are; the last
         * two use 256 KiB pages, so every chunk's bitmap spans several words */
        int target = 16 << (round % 4), big = 4 + 8 * (round % 4);
        uint64_t g = round < 4 ? 2 * MIB : MIB / 4;
        as_simdev_params prm;
        as_simdev_default_params(&prm);
        prm.granularity = g;
        as_simdev *d;
        CU_ASSERT_FATAL(as_simdev_create(&prm, &d) == 0);
        const as_device *dv = as_simdev_device(d);
        ref_init(&h, g);
        uint64_t live[512], lsz[512];
        int lva[512];
        int nlive = 0, ok = 1, step;
        for (step = 0; step < 6000 && ok; step++) {
            uint64_t x = tu_rand(&rng);
            if (nlive < 512 && (nlive == 0 || (int)(x % (2 * target)) >= nlive)) {
                uint64_t pages = (x >> 8) % 100 < (uint64_t)big
                                     ? 1 + (x >> 16) % 600
                                     : 1 + (x >> 16) % ((x >> 40) % 2 ? 2 : 16);
                uint64_t size = pages * (g == 2 * MIB ? 2 * MIB : (x >> 50) % 2 ? g : 2 * MIB);
                int va = (x >> 58) % 3 == 0;
                uint64_t a = 0, want = ref_reserve(&h, size, va);
                ok &= (va ? dv->ops->va_reserve(dv->ctx, size, &a)
                          : dv->ops->reserve(dv->ctx, size, &a)) == 0 &&
                      a == want;
                live[nlive] = a;
                lva[nlive] = va;
                lsz[nlive++] = size;
            } else {
                int i = (int)((x >> 8) % (uint64_t)nlive);
                int va = lva[i];
                if ((x >> 40) % 16 == 0) /* a wrong size is refused by both */
                    ok &= dev_give(dv, live[i], lsz[i] + g, va) == AS_EINVAL &&
                          ref_release(&h, live[i], lsz[i] + g, va) == AS_EINVAL;
                if ((x >> 44) % 16 == 0) /* and so is the other kind's call */
                    ok &= dev_give(dv, live[i], lsz[i], !va) == AS_EINVAL &&
                          ref_release(&h, live[i], lsz[i], !va) == AS_EINVAL;
                ok &= dev_give(dv, live[i], lsz[i], va) == 0 &&
                      ref_release(&h, live[i], lsz[i], va) == 0;
                live[i] = live[--nlive];
                lsz[i] = lsz[nlive];
                lva[i] = lva[nlive];
            }
        }
        if (!ok)
            fprintf(stderr, "\n  chunked heap and model differ at round %d step %d\n", round,
                    step - 1);
        CU_ASSERT(ok);
        as_simdev_destroy(d);
    }
}

static void simdev_granularity(void)
{
    /* a power of two; with the chunked heap, one that divides 2 MiB */
    as_simdev_params prm;
    as_simdev *d = NULL;
    as_simdev_default_params(&prm);
    prm.granularity = 3 * MIB;
    CU_ASSERT_EQUAL(as_simdev_create(&prm, &d), AS_EINVAL);
    prm.granularity = 4 * MIB;
    CU_ASSERT_EQUAL(as_simdev_create(&prm, &d), AS_EINVAL);
    prm.placement = AS_PLACE_TOP_DOWN;
    CU_ASSERT_EQUAL_FATAL(as_simdev_create(&prm, &d), 0);
    as_simdev_destroy(d);
    /* the chunked heap keeps a bit per page: an unlimited device still refuses 2^26 pages
     * (128 TiB) as out of memory, and goes on working */
    CU_ASSERT_EQUAL_FATAL(as_simdev_create(NULL, &d), 0);
    const as_device *dv = as_simdev_device(d);
    uint64_t a;
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, (1ull << 26) * 2 * MIB, &a), AS_DEV_OOM);
    /* the heap is [AS_SIMDEV_VA_LOW, AS_SIMDEV_TOP), 16 GiB short of 128 TiB: 64 TiB fit,
     * and then 64 TiB more do not, as a cudaMalloc nor as a reservation */
    uint64_t half = 1ull << 46, b;
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, half, &a), 0);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, half, &b), AS_DEV_OOM);
    CU_ASSERT_EQUAL(dv->ops->va_reserve(dv->ctx, half, &b), AS_DEV_OOM);
    CU_ASSERT_EQUAL(dv->ops->va_reserve(dv->ctx, half - 64 * (1ull << 30), &b), 0);
    CU_ASSERT_EQUAL(b, AS_SIMDEV_VA_LOW);
    CU_ASSERT_EQUAL(dv->ops->va_release(dv->ctx, b, half - 64 * (1ull << 30)), 0);
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, a, half), 0);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &a), 0);
    CU_ASSERT_EQUAL(a, AS_SIMDEV_TOP + 414 * MIB);
    as_dev_counters c;
    as_simdev_counters_get(d, &c);
    CU_ASSERT_EQUAL(c.refusals, 2);
    as_simdev_destroy(d);
}

/* The seam's rule (device.h): a device fills every slot and carries AS_DEVICE_ABI; without
 * virtual memory management it answers AS_ENOSYS, never a NULL slot. */
static void simdev_seam(void)
{
    as_simdev_params p;
    as_simdev_default_params(&p);
    as_simdev *d;
    CU_ASSERT_FATAL(as_simdev_create(&p, &d) == 0);
    const as_device_ops *o = as_simdev_device(d)->ops;
    CU_ASSERT_EQUAL(o->abi, AS_DEVICE_ABI);
    CU_ASSERT(o->reserve && o->release && o->va_reserve && o->va_release && o->map && o->unmap &&
              o->alias && o->unalias && o->capacity && o->reserved && o->cap_test);
    as_simdev_destroy(d);
}

/* A factory device of another ABI is refused: the run fails with AS_EDEVICE, named. */
static as_device_ops old_ops;
static int old_create(void *user, uint64_t cap, as_device *out, void **handle)
{
    as_simdev_params p;
    as_simdev_default_params(&p);
    p.capacity = cap;
    as_simdev *d;
    if (as_simdev_create(&p, &d))
        return -1;
    old_ops = *as_simdev_device(d)->ops;
    old_ops.abi = AS_DEVICE_ABI + 1;
    *out = (as_device){.ops = &old_ops, .ctx = as_simdev_device(d)->ctx};
    *handle = d;
    (void)user;
    return 0;
}
static void old_destroy(void *user, void *handle)
{
    (void)user;
    as_simdev_destroy(handle);
}

static void simdev_abi_refused(void)
{
    const char *text = "allocsim-text 1\nalloc 0 4096\nfree 0\n";
    as_trace_reader *rd;
    as_trace_error err;
    CU_ASSERT_FATAL(as_trace_open_mem(text, strlen(text), "abi", NULL, &rd, &err) == 0);
    as_device_factory f = {.create = old_create, .destroy = old_destroy};
    as_engine_opts o = {.threads = 1, .factory = &f};
    as_engine *e;
    CU_ASSERT_FATAL(as_engine_create(&o, &e) == 0);
    as_policy_spec spec;
    char why[128];
    CU_ASSERT_FATAL(as_policy_spec_parse("bestfit", &spec, why, sizeof why) == 0);
    CU_ASSERT_FATAL(as_engine_add_run(e, &spec, AS_CAPACITY_NONE) == 0);
    CU_ASSERT_EQUAL(as_engine_run(e, rd, &err), AS_EDEVICE);
    CU_ASSERT_EQUAL(err.code, 0); /* the engine's failure, not the trace's */
    CU_ASSERT_PTR_NOT_NULL(strstr(as_engine_errmsg(e), "device"));
    as_engine_destroy(e);
    as_policy_spec_free(&spec);
    as_trace_close(rd);
}

CU_TestInfo test_simdev[] = {
    {"seam", simdev_seam},
    {"abi_refused", simdev_abi_refused},
    {"placement_first_fit", simdev_placement_first_fit},
    {"placement_top_down", simdev_placement_top_down},
    {"placement_chunked", simdev_placement_chunked},
    {"placement_best_fit", simdev_placement_best_fit},
    {"placement_reservations", simdev_placement_reservations},
    {"capacity", simdev_capacity},
    {"log", simdev_log},
    {"alias", simdev_alias},
    {"many_holes", simdev_many_holes},
    {"key_replay_addresses", simdev_key_replay_addresses},
    {"held_out_addresses", simdev_held_out_addresses},
    {"reservation_probe", simdev_reservation_probe},
    {"gmlake_addresses", simdev_gmlake_addresses},
    {"expandable_addresses", simdev_expandable_addresses},
    {"chunked_matches_model", simdev_chunked_matches_model},
    {"granularity", simdev_granularity},
    CU_TEST_INFO_NULL,
};
