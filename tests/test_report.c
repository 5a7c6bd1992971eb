/*
 * test_report.c - the report contract (sim/REPORT.md) held to the program: every field
 * the JSON and CSV outputs of run, mincap, info and compare carry, in the documented
 * order and type, CSV columns that load with one type each (tests/check_outputs.py,
 * with pandas where installed), and the README outputs regenerated and compared
 * (tests/docs.py --check, what `make docs` writes); the GPU harness's pure-Python parts
 * (tests/check_torch_replay.py), validate.py's plan in parts (tests/check_validate.py);
 * and the writers' failures, codes of the one error space with errno's words.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "report.h"
#include "segmap.h"
#include "util.h"

/* Runs `python3 SCRIPT ARGS` from the source tree; prints its output when it fails.
 * Returns its exit status (-1 when it could not run). */
static int python(const char *script, const char *args)
{
    char cmd[4096], line[1024];
    snprintf(cmd, sizeof cmd, "cd '%s' && AS_ALLOCSIM='%s' python3 '%s' %s 2>&1", tu_path(""),
             tu_allocsim(), tu_path(script), args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char *log = NULL;
    size_t len = 0;
    while (fgets(line, sizeof line, p)) {
        size_t k = strlen(line);
        char *n = realloc(log, len + k + 1);
        if (!n)
            break;
        log = n;
        memcpy(log + len, line, k + 1);
        len += k;
    }
    int st = pclose(p);
    int rc = st == -1 ? -1 : WEXITSTATUS(st);
    if (rc != 0 && log)
        fprintf(stderr, "\n%s", log);
    free(log);
    return rc;
}

static void report_contract(void)
{
    char args[1100];
    snprintf(args, sizeof args, "'%s'", tu_allocsim());
    CU_ASSERT_EQUAL(python("tests/check_outputs.py", args), 0);
}

/* Every output quoted in the Markdown files is what the program prints now. */
static void quoted_outputs(void)
{
    CU_ASSERT_EQUAL(python("tests/docs.py", "--check"), 0);
}

/* replay/torch_replay.py's reading of traces and its calls of torch, checked with a
 * stand-in for torch (tests/check_torch_replay.py): the harness needs none here. */
static void torch_harness(void)
{
    char args[1100];
    snprintf(args, sizeof args, "'%s'", tu_allocsim());
    CU_ASSERT_EQUAL(python("tests/check_torch_replay.py", args), 0);
}

/* replay/validate.py's plan in parts and validate_table.py's merge of their summaries
 * (tests/check_validate.py): no GPU needed. */
static void validate_parts(void)
{
    char args[1100];
    snprintf(args, sizeof args, "'%s'", tu_allocsim());
    CU_ASSERT_EQUAL(python("tests/check_validate.py", args), 0);
}

/* Every writer of report.h and segmap.h, on a full disk (/dev/full: ENOSPC) or a directory
 * that does not exist (ENOENT), returns AS_EIO and words errno for the caller to put after
 * the file's name. */
static void writers_fail_in_the_error_space(void)
{
    char why[300];
    as_runlog *l;
    CU_ASSERT_EQUAL(as_runlog_open("/nonexistent/dir/s.csv", AS_RUNLOG_SEGMENTS, &l, why,
                                   sizeof why),
                    AS_EIO);
    CU_ASSERT_STRING_EQUAL(why, "cannot create: No such file or directory");
    FILE *full = fopen("/dev/full", "w");
    if (!full) {
        CU_FAIL("/dev/full cannot be opened");
        return;
    }
    /* a run log: its rows are spooled, and the header and rows fail on the way out */
    CU_ASSERT_EQUAL_FATAL(as_runlog_open_stream(full, AS_RUNLOG_SEGMENTS, &l), 0);
    as_seg_record rec = {.run = 0, .alloc = 1, .event = 2,
                         .dev = {.action = AS_DEV_SEGMENT_ALLOC, .addr = 0, .size = 2 << 20}};
    for (int i = 0; i < 1000; i++) /* more than stdio's buffer */
        as_runlog_segment(l, &rec);
    why[0] = 0;
    CU_ASSERT_EQUAL(as_runlog_close(l, why, sizeof why), AS_EIO);
    CU_ASSERT_STRING_EQUAL(why, "write failed: No space left on device");
    clearerr(full);
    /* the report, in every format */
    as_report *r;
    CU_ASSERT_EQUAL_FATAL(as_report_create(&r), 0);
    as_trace_summary sum = {.events = 2, .allocs = 1, .frees = 1};
    CU_ASSERT_EQUAL(as_report_add_trace(r, "t.zst", "native", &sum, NULL), 0);
    CU_ASSERT_EQUAL(as_report_add_run(r, 5, &(as_run_result){0}), AS_EINVAL);
    for (int fmt = AS_REPORT_TABLE; fmt <= AS_REPORT_JSONL; fmt++) {
        why[0] = 0;
        CU_ASSERT_EQUAL(as_report_write(r, full, (as_report_fmt)fmt, why, sizeof why), AS_EIO);
        CU_ASSERT_STRING_EQUAL(why, "write failed: No space left on device");
        clearerr(full);
    }
    as_report_destroy(r);
    /* the segment map: its header alone fails */
    as_segmap *m;
    CU_ASSERT_EQUAL_FATAL(as_segmap_open_stream(full, &m), 0);
    why[0] = 0;
    CU_ASSERT_EQUAL(as_segmap_close(m, why, sizeof why), AS_EIO);
    CU_ASSERT_STRING_EQUAL(why, "write failed: No space left on device");
    fclose(full);
}

CU_TestInfo test_report[] = {
    {"writers: a failed write is AS_EIO, with errno's words", writers_fail_in_the_error_space},
    {"JSON and CSV outputs are what sim/REPORT.md says, and load cleanly", report_contract},
    {"outputs quoted in README.md and the folders' docs are current (make docs)", quoted_outputs},
    {"torch_replay.py: pools, empty_cache and its reading of traces", torch_harness},
    {"validate.py: the plan in parts, and their summaries merged", validate_parts},
    CU_TEST_INFO_NULL,
};
