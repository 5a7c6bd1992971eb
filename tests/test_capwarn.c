/*
 * test_capwarn.c - capacities a user mistypes: a bare number under 1 MiB (`-c 80`) and a
 * capacity below the trace's smallest request run as asked with one warning line each on
 * stderr saying how they were read; 2^64-1 bytes, the value that means no limit inside, is
 * a usage error pointing to `-c none` instead of being read silently as unlimited.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report.h"
#include "util.h"

#define CAP 65536

static char out[CAP], err[CAP], trace[512];

/* Requests of 3, 1 and 2 MiB: the smallest is 1 MiB. */
static const char *the_trace(void)
{
    snprintf(trace, sizeof trace, "%s",
             tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 3M\nalloc 1 1M\nalloc 2 2M\n"
                                  "free 0\nfree 1\nfree 2\n"));
    return trace;
}

static int run(const char *caps)
{
    char args[1024];
    snprintf(args, sizeof args, "-q -p nocache %s '%s'", caps, trace);
    return tu_run_allocsim(args, out, sizeof out, err, sizeof err);
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_bare_small_number(void)
{
    the_trace();
    CU_ASSERT_EQUAL(run("-c 80"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "allocsim: -c 80: read as 80 bytes; did you mean 80G?\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "80 B")); /* it ran at 80 bytes */
    CU_ASSERT_EQUAL(run("-c 524288"), 0);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err, "-c 524288: read as 524288 bytes (512.0 KiB); add a unit (K, M, G)"));
    /* With a unit, or from 1 MiB up, the number is what was meant: no warning. */
    CU_ASSERT_EQUAL(run("-c 80G -c 1048576 -c 1M -c 2MiB -c none"), 0);
    CU_ASSERT_STRING_EQUAL(err, "");
    /* tune's card given as bytes reads the same way. */
    char args[1024];
    snprintf(args, sizeof args, "tune --device 24 --outside none '%s'", trace);
    tu_run_allocsim(args, out, sizeof out, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err, "allocsim: --device 24: read as 24 bytes; did you mean 24G?\n"));
    snprintf(args, sizeof args, "tune --device 24G --outside none '%s'", trace);
    tu_run_allocsim(args, out, sizeof out, err, sizeof err);
    CU_ASSERT_PTR_NULL(strstr(err, "read as"));
    tu_rm(trace);
}

static void test_below_smallest_request(void)
{
    the_trace();
    CU_ASSERT_EQUAL(run("-c 512K"), 0);
    CU_ASSERT_EQUAL(lines(err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "1 run at a capacity of 512.0 KiB, below the trace's "
                                       "smallest request (1.0 MiB): it fails at the first "
                                       "allocation\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, trace));
    /* One line per trace, counting its runs, naming the largest such capacity. */
    CU_ASSERT_EQUAL(run("-p bestfit -c 256K -c 768K -c 80G"), 0);
    CU_ASSERT_EQUAL(lines(err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "4 runs at a capacity up to 768.0 KiB, below the "
                                       "trace's smallest request (1.0 MiB): they fail"));
    /* Exactly the smallest request is not below it. */
    CU_ASSERT_EQUAL(run("-c 1M"), 0);
    CU_ASSERT_STRING_EQUAL(err, "");
    /* Both warnings for a bare 1000: how it was read, and that it is below the trace. */
    CU_ASSERT_EQUAL(run("-c 1000"), 0);
    CU_ASSERT_EQUAL(lines(err), 2);
    tu_rm(trace);
}

static void test_uint64_max_is_not_none(void)
{
    uint64_t v = 0;
    CU_ASSERT_EQUAL(as_parse_capacity("18446744073709551615", &v), AS_ELIMIT);
    CU_ASSERT_EQUAL(as_parse_capacity("18446744073709551614", &v), 0);
    CU_ASSERT_EQUAL(v, UINT64_MAX - 1);
    CU_ASSERT_EQUAL(as_parse_capacity("none", &v), 0);
    CU_ASSERT_EQUAL(v, AS_CAPACITY_NONE);
    CU_ASSERT_NOT_EQUAL(as_parse_capacity("18446744073709551616", &v), 0);
    the_trace();
    CU_ASSERT_EQUAL(run("-c 18446744073709551615"), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "-c 18446744073709551615: 2^64-1 bytes"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "-c none"));
    CU_ASSERT_STRING_EQUAL(out, "");
    CU_ASSERT_EQUAL(run("-c 18446744073709551614"), 0);
    CU_ASSERT_STRING_EQUAL(err, "");
    /* allocsim-replay reads -c the same way (before it needs the driver). */
    const char *replay = getenv("AS_REPLAY");
    if (replay && *replay && access(replay, X_OK) == 0) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "'%s' -c 18446744073709551615 '%s' 2>/dev/null", replay, trace);
        int st = system(cmd);
        CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    } else {
        fprintf(stderr, "\n  [allocsim-replay not built: its -c is not checked]\n");
    }
    tu_rm(trace);
}

CU_TestInfo test_capwarn[] = {
    {"-c 80: a bare number under 1 MiB warns how it was read", test_bare_small_number},
    {"a capacity below the smallest request warns once per trace", test_below_smallest_request},
    {"-c 18446744073709551615 is refused, not read as none", test_uint64_max_is_not_none},
    CU_TEST_INFO_NULL,
};
