/*
 * test_simdev.c - the simulated device: both placement rules (first-fit lowest address
 * growing upward; top-down highest hole growing downward, the default) with reuse and
 * merging of freed ranges, capacity refusals as results, counters and the event log.
 */
#include <CUnit/CUnit.h>

#include "simdev.h"

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
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, c, 2 * MIB), AS_DEV_EINVAL);
    CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, c + 2 * MIB, 8 * MIB), AS_DEV_EINVAL);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 3 * MIB, &x), AS_DEV_EINVAL);
    as_simdev_destroy(d);
}

static void simdev_placement_top_down(void)
{
    as_simdev *d;
    CU_ASSERT_FATAL(as_simdev_create(NULL, &d) == 0); /* the default rule */
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
    CU_ASSERT_EQUAL(dv->ops->map(dv->ctx, va + 1024 * MIB, 2 * MIB), AS_DEV_EINVAL);
    CU_ASSERT_EQUAL(dv->ops->unmap(dv->ctx, va, 6 * MIB), 0);
    as_simdev_counters c;
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
    logbuf l = { .n = 0 };
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

static void simdev_many_holes(void)
{
    /* 1000 ranges, free every other one, then fill each hole: every reuse must land in
     * the hole the rule names (lowest for first fit, highest for top-down, which here is
     * allocation order either way), proving the search holds over a deep tree. */
    for (int rule = 0; rule < 2; rule++) {
        as_simdev *d;
        as_simdev_params prm;
        as_simdev_default_params(&prm);
        prm.placement = rule ? AS_PLACE_TOP_DOWN : AS_PLACE_LOW_FIRST_FIT;
        CU_ASSERT_FATAL(as_simdev_create(&prm, &d) == 0);
        const as_device *dv = as_simdev_device(d);
        uint64_t addr[1000];
        for (int i = 0; i < 1000; i++)
            CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 2 * MIB, &addr[i]), 0);
        for (int i = 0; i < 1000; i += 2)
            CU_ASSERT_EQUAL(dv->ops->release(dv->ctx, addr[i], 2 * MIB), 0);
        int ok = 1;
        for (int i = 0; i < 1000; i += 2) {
            uint64_t x;
            ok &= dv->ops->reserve(dv->ctx, 2 * MIB, &x) == 0 && x == addr[i];
        }
        CU_ASSERT(ok);
        as_simdev_destroy(d);
    }
}

CU_TestInfo test_simdev[] = {
    {"placement_first_fit", simdev_placement_first_fit},
    {"placement_top_down", simdev_placement_top_down},
    {"capacity", simdev_capacity},
    {"log", simdev_log},
    {"many_holes", simdev_many_holes},
    CU_TEST_INFO_NULL,
};
