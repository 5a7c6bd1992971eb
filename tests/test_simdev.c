/*
 * test_simdev.c - the simulated device: first-fit lowest-address placement with reuse and
 * merging of freed ranges, capacity refusals as results, counters and the event log.
 */
#include <CUnit/CUnit.h>

#include "simdev.h"

#define MIB (1ull << 20)

static void simdev_placement_first_fit(void)
{
    as_simdev *d;
    CU_ASSERT_FATAL(as_simdev_create(NULL, &d) == 0);
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
     * the lowest hole, proving first fit holds over a deep tree. */
    as_simdev *d;
    CU_ASSERT_FATAL(as_simdev_create(NULL, &d) == 0);
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

CU_TestInfo test_simdev[] = {
    { "placement_first_fit", simdev_placement_first_fit },
    { "capacity", simdev_capacity },
    { "log", simdev_log },
    { "many_holes", simdev_many_holes },
    CU_TEST_INFO_NULL,
};
