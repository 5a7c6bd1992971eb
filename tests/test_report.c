/*
 * test_report.c - the report contract (sim/REPORT.md) held to the program: every field
 * the JSON and CSV outputs of run, mincap, info and compare carry, in the documented
 * order and type, CSV columns that load with one type each (tests/check_outputs.py,
 * with pandas where installed), and the README outputs regenerated and compared
 * (tests/docs.py --check, what `make docs` writes).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "util.h"

/* Runs `python3 SCRIPT ARGS` from the source tree; prints its output when it fails.
 * Returns its exit status (-1 when it could not run). */
static int python(const char *script, const char *args)
{
    char cmd[4096], line[1024];
    const char *allocsim = getenv("AS_ALLOCSIM");
    snprintf(cmd, sizeof cmd, "cd '%s' && AS_ALLOCSIM='%s' python3 '%s' %s 2>&1", tu_path(""),
             allocsim ? allocsim : "build/allocsim", tu_path(script), args);
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
    const char *allocsim = getenv("AS_ALLOCSIM");
    char args[1100];
    snprintf(args, sizeof args, "'%s'", allocsim ? allocsim : "build/allocsim");
    CU_ASSERT_EQUAL(python("tests/check_outputs.py", args), 0);
}

/* Every output quoted in the Markdown files is what the program prints now. */
static void quoted_outputs(void)
{
    CU_ASSERT_EQUAL(python("tests/docs.py", "--check"), 0);
}

CU_TestInfo test_report[] = {
    {"JSON and CSV outputs are what sim/REPORT.md says, and load cleanly", report_contract},
    {"outputs quoted in README.md and the folders' docs are current (make docs)", quoted_outputs},
    CU_TEST_INFO_NULL,
};
