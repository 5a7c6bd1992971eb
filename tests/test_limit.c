/*
 * test_limit.c - a capacity on a policy that limits itself (PyTorch's memory fraction)
 * is an allocator-level limit, not a smaller device: PyTorch checks reserved + segment
 * size against it, then maps whole 20 MiB pages for expandable segments, which may end
 * past the limit (the H200 ground truth shows such overshoots).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "simdev.h"
#include "util.h"

#define MIB (1ull << 20)

static void limit_simdev_reports_not_enforces(void)
{
    as_simdev_params p;
    as_simdev_default_params(&p);
    p.limit = 30 * MIB;
    as_simdev *d;
    CU_ASSERT_FATAL(as_simdev_create(&p, &d) == 0);
    const as_device *dv = as_simdev_device(d);
    uint64_t a;
    CU_ASSERT_EQUAL(dv->ops->capacity(dv->ctx), 30 * MIB);
    CU_ASSERT_EQUAL(dv->ops->reserve(dv->ctx, 40 * MIB, &a), 0); /* not refused */
    as_simdev_destroy(d);
}

/* One 30 MiB request under expandable segments with a 30 MiB limit: alloc_size is
 * 30 MiB (>= 10 MiB rounds to 2 MiB), so 0 + 30 MiB <= 30 MiB passes PyTorch's check;
 * the expandable path then maps ceil(30/20) = 2 pages of 20 MiB = 40 MiB. A device that
 * refused at 30 MiB would report an OOM instead. */
static void limit_torch_expandable_overshoot(void)
{
    const char *t = tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 30MiB\nfree 0\n");
    char out[4096], err[1024], args[1200];
    int rc;
    snprintf(args, sizeof args, "-f json -p expandable_segments:True -c 31457280 '%s'", t);
    rc = tu_run_allocsim(args, out, sizeof out, err, sizeof err);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"completed\": true"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"peak_reserved\": 41943040"));
    /* One byte less of limit and PyTorch's check itself refuses the segment. */
    snprintf(args, sizeof args, "-f json -p expandable_segments:True -c 31457279 '%s'", t);
    rc = tu_run_allocsim(args, out, sizeof out, err, sizeof err);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"oom_alloc\": 0"));
    tu_rm(t);
}

CU_TestInfo test_limit[] = {
    { "simdev_reports_not_enforces", limit_simdev_reports_not_enforces },
    { "torch_expandable_overshoot", limit_torch_expandable_overshoot },
    CU_TEST_INFO_NULL,
};
