/*
 * test_simdev.c - the simulated device: the placement rules (first-fit lowest address
 * growing upward; top-down highest hole growing downward; the CUDA driver's chunked heap,
 * the default) with reuse and merging of freed ranges, capacity refusals as results,
 * counters and the event log; and the chunked heap against the addresses the H200's
 * driver really returned (replay/data/torch-key-replay).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

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

/* A whole file, NUL-terminated (caller frees), zstd-decoded when zst; NULL on error. */
static char *read_file(const char *path, int zst)
{
    FILE *f = fopen(path, "rb");
    ZSTD_DCtx *z = ZSTD_createDCtx();
    size_t cap = 1 << 20, n = 0, got;
    char *out = malloc(cap + 1), in[1 << 16];
    int bad = !f || !z || !out;
    while (!bad && (got = fread(in, 1, sizeof in, f)) > 0) {
        ZSTD_inBuffer ib = {in, got, 0};
        while (!bad && ib.pos < ib.size) {
            if (cap - n < sizeof in) {
                char *nn = realloc(out, 2 * cap + 1);
                bad = !nn;
                if (bad)
                    break;
                out = nn;
                cap *= 2;
            }
            if (!zst) {
                memcpy(out + n, in, got);
                n += got;
                break;
            }
            ZSTD_outBuffer ob = {out + n, cap - n, 0};
            bad = ZSTD_isError(ZSTD_decompressStream(z, &ob, &ib));
            n += ob.pos;
        }
    }
    if (f)
        fclose(f);
    ZSTD_freeDCtx(z);
    if (bad) {
        free(out);
        return NULL;
    }
    out[n] = 0;
    return out;
}

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
        char *csv = read_file(tu_path(path), 1);
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

/* One row of record_reuse.py's CSV (proc,step,op,size,addr) at l + 1; 1 when it is one. */
static int reuse_row(const char *l, int *proc, char op[16], unsigned long long *size,
                     unsigned long long *addr)
{
    return sscanf(l + 1, "%d,%*u,%15[^,],%llu,%llu", proc, op, size, addr) == 4;
}

/* One process of record_reuse.py (its rows from *line on), free-running as replay_process
 * does; *line ends at the next process's first row. */
static void reuse_process(const char **line, unsigned *exact, unsigned *total)
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
        if (!strcmp(op, "malloc")) {
            uint64_t s = 0;
            ok &= dv->ops->reserve(dv->ctx, sz, &s) == 0;
            (*total)++;
            *exact += s - AS_SIMDEV_TOP == a - rec_top;
            if (nlive == cap) {
                cap = cap ? 2 * cap : 256;
                live = realloc(live, cap * sizeof *live);
                CU_ASSERT_FATAL(live != NULL);
            }
            live[nlive++] = (rec_seg){a, s, sz};
        } else if (!strcmp(op, "free")) {
            for (size_t i = 0; i < nlive; i++)
                if (live[i].rec == a) {
                    ok &= dv->ops->release(dv->ctx, live[i].sim, sz) == 0;
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
    unsigned exact = 0, total = 0, rexact = 0, rtotal = 0, procs = 0;
    torch_recordings("replay/data/h200-reuse", stems, 7, &exact, &total);
    char *csv = read_file(tu_path("replay/data/h200-reuse/reuse.csv.zst"), 1);
    CU_ASSERT_FATAL(csv != NULL);
    for (const char *line = strchr(csv, '\n'); line && line[1]; procs++)
        reuse_process(&line, &rexact, &rtotal);
    free(csv);
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

/* ---- the chunked heap against a straightforward model of the same rules -------------- */

/* The rules of simdev.h, written as plainly as possible: every chunk and range in flat
 * arrays, every decision by a full scan. The device must place exactly the same. */
typedef struct ref_chunk {
    uint64_t base, len, seq;
    int alive;
} ref_chunk;

typedef struct ref_range {
    uint64_t addr, size;
    int chunk;
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
    h->r[h->nr++] = (ref_range){AS_SIMDEV_TOP + 480 * MIB, 8 * MIB, 0};
    ref_add_chunk(h, AS_SIMDEV_TOP + 384 * MIB, 32 * MIB);
    h->r[h->nr++] = (ref_range){AS_SIMDEV_TOP + 384 * MIB, 30 * MIB, 1};
}

/* The start of the smallest free range of chunk c that holds `size` bytes, the lowest of
 * equals (best fit inside the chunk), or 0: every page of the chunk, one by one. */
static uint64_t ref_fit_in(const ref_heap *h, int c, uint64_t size)
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
            }
            run = 0;
        }
    }
    return best;
}

static uint64_t ref_reserve(ref_heap *h, uint64_t size)
{
    /* the most recently made chunk with room, best fit inside it */
    int best = -1;
    uint64_t at = 0;
    for (int c = 0; c < h->nch; c++) {
        uint64_t a;
        if (h->ch[c].alive && (best < 0 || h->ch[c].seq > h->ch[best].seq) &&
            (a = ref_fit_in(h, c, size))) {
            best = c;
            at = a;
        }
    }
    if (best < 0) {
        /* a new chunk at the top of the highest gap under the top larger than itself, or
         * under the lowest chunk */
        uint64_t clen = (size + 32 * MIB - 1) / (32 * MIB) * (32 * MIB), top = AS_SIMDEV_TOP;
        for (;;) {
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
    h->r[h->nr++] = (ref_range){at, size, best};
    return at;
}

static int ref_release(ref_heap *h, uint64_t addr, uint64_t size)
{
    int i = 0;
    while (i < h->nr && !(h->r[i].addr == addr && h->r[i].size == size && i > 1))
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
        int nlive = 0, ok = 1, step;
        for (step = 0; step < 6000 && ok; step++) {
            uint64_t x = tu_rand(&rng);
            if (nlive < 512 && (nlive == 0 || (int)(x % (2 * target)) >= nlive)) {
                uint64_t pages = (x >> 8) % 100 < (uint64_t)big
                                     ? 1 + (x >> 16) % 600
                                     : 1 + (x >> 16) % ((x >> 40) % 2 ? 2 : 16);
                uint64_t size = pages * (g == 2 * MIB ? 2 * MIB : (x >> 50) % 2 ? g : 2 * MIB);
                uint64_t a = 0, want = ref_reserve(&h, size);
                ok &= dv->ops->reserve(dv->ctx, size, &a) == 0 && a == want;
                live[nlive] = a;
                lsz[nlive++] = size;
            } else {
                int i = (int)((x >> 8) % (uint64_t)nlive);
                if ((x >> 40) % 16 == 0) /* a wrong size is refused by both */
                    ok &= dv->ops->release(dv->ctx, live[i], lsz[i] + g) == AS_EINVAL &&
                          ref_release(&h, live[i], lsz[i] + g) == AS_EINVAL;
                ok &= dv->ops->release(dv->ctx, live[i], lsz[i]) == 0 &&
                      ref_release(&h, live[i], lsz[i]) == 0;
                live[i] = live[--nlive];
                lsz[i] = lsz[nlive];
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
    {"chunked_matches_model", simdev_chunked_matches_model},
    {"granularity", simdev_granularity},
    CU_TEST_INFO_NULL,
};
