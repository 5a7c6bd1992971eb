/*
 * test_compare.c - `allocsim compare`: runs paired by index, OOM ordinals and peaks, the
 * relative error, device event sequences with the first difference, and bad input. The
 * reports and CSVs are written by hand below; every expected value is read off them.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

/* Run 0: both complete, peaks equal. Run 1: OOM at alloc 5 predicted, 7 measured; peak
 * 100 vs 200, so the error is (100 - 200) / 200 = -0.5. Run 2: both OOM at 3, peaks 300.
 * The measured report has extra fields, nesting and escapes a real one may carry. */
static const char *pred_json =
    "{\"allocsim\": \"0.1.0\", \"trace\": {\"events\": 10},\n"
    " \"runs\": [\n"
    "  {\"policy\": \"torch\", \"capacity\": null, \"completed\": true, \"oom_event\": null,\n"
    "   \"oom_alloc\": null, \"peak_reserved\": 1000, \"fragmentation\": 0.25},\n"
    "  {\"policy\": \"bestfit\", \"capacity\": 4096, \"completed\": false, \"oom_alloc\": 5,\n"
    "   \"peak_reserved\": 100},\n"
    "  {\"policy\": \"torch,maxsplit=128\", \"capacity\": 8192, \"oom_alloc\": 3,\n"
    "   \"peak_reserved\": 300}]}\n";

static const char *meas_json =
    "{\"allocsim\": \"0.1\", \"measured\": true, \"note\": \"a \\\"quoted\\\" \\u0041\",\n"
    " \"runs\": [\n"
    "  {\"policy\": \"torch\", \"capacity\": null, \"oom_alloc\": null, \"peak_reserved\": 1000,\n"
    "   \"extra\": {\"list\": [1, 2.5, -3e2, true, false, null, [], {}]}},\n"
    "  {\"policy\": \"bestfit\", \"capacity\": 4096, \"oom_alloc\": 7, \"peak_reserved\": 200},\n"
    "  {\"policy\": \"max_split_size_mb:128\", \"capacity\": 8192, \"oom_alloc\": 3,\n"
    "   \"peak_reserved\": 300}]}\n";

/* Run 0 identical; run 1 differs at row #1 (size 20 vs 22); run 2: the measured side
 * stops after two rows, so they differ at #2 where the predicted has one more. */
static const char *pred_csv = "run,alloc,event,action,addr,size\n"
                              "0,0,0,segment_alloc,100,20\n"
                              "0,4,9,segment_free,100,20\n"
                              "1,0,0,segment_alloc,100,20\n"
                              "1,1,1,segment_alloc,200,20\n"
                              "2,0,0,segment_map,100,2\n"
                              "2,1,1,segment_map,102,2\n"
                              "2,2,2,segment_unmap,100,4\n";
static const char *meas_csv = "run,alloc,event,action,addr,size\n"
                              "0,0,0,segment_alloc,7000,20\n"
                              "0,4,9,segment_free,7000,20\n"
                              "1,0,0,segment_alloc,7000,20\n"
                              "1,1,1,segment_alloc,9000,22\n"
                              "2,0,0,segment_map,5,2\n"
                              "2,1,1,segment_map,7,2\n";

static char out[8192], err[4096];

static int compare(const char *extra, const char *p, const char *m)
{
    char args[2048];
    snprintf(args, sizeof args, "compare %s %s %s", extra, p, m);
    return tu_run_allocsim(args, out, sizeof out, err, sizeof err);
}

static void compare_csv_rows(void)
{
    char p[256], m[256], pc[256], mc[256];
    snprintf(p, sizeof p, "%s", tu_write_tmp(".json", pred_json));
    snprintf(m, sizeof m, "%s", tu_write_tmp(".json", meas_json));
    snprintf(pc, sizeof pc, "%s", tu_write_tmp(".csv", pred_csv));
    snprintf(mc, sizeof mc, "%s", tu_write_tmp(".csv", meas_csv));
    char extra[600];
    snprintf(extra, sizeof extra, "-f csv --segments %s %s", pc, mc);
    CU_ASSERT_EQUAL(compare(extra, p, m), 0);
    /* Absent values are -1 (no capacity, no OOM), as in every allocsim CSV. */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "0,torch,-1,-1,-1,1,1000,1000,0.000000000,1,same (2)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "1,bestfit,4096,5,7,0,100,200,-0.500000000,0,"
                                       "differ at #1 of 2/2: [1 segment_alloc 20] vs "
                                       "[1 segment_alloc 22]\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "2,\"torch,maxsplit=128\",8192,3,3,1,300,300,0.000000000,1,"
                                       "differ at #2 of 3/2: [2 segment_unmap 4] vs [end]\n"));
    /* The table says the same in words, with the totals. */
    CU_ASSERT_EQUAL(compare(extra + 7, p, m), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "3 runs: OOM point exact in 2, peak reserved exact in 2, "
                                       "device events identical in 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "-50.000%"));
    tu_rm(p);
    tu_rm(m);
    tu_rm(pc);
    tu_rm(mc);
}

static void compare_capacity_mismatch_warns(void)
{
    char p[256], m[256];
    snprintf(p, sizeof p, "%s",
             tu_write_tmp(".json", "{\"runs\":[{\"capacity\":10,\"oom_alloc\":1,"
                                   "\"peak_reserved\":8}]}"));
    snprintf(m, sizeof m, "%s",
             tu_write_tmp(".json", "{\"runs\":[{\"capacity\":12,\"oom_alloc\":1,"
                                   "\"peak_reserved\":8},{\"capacity\":1}]}"));
    CU_ASSERT_EQUAL(compare("", p, m), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "capacities differ"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "1 predicted runs, 2 measured"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "1 runs: OOM point exact in 1, peak reserved exact in 1"));
    tu_rm(p);
    tu_rm(m);
}

static void compare_bad_input(void)
{
    char p[256], m[256];
    snprintf(p, sizeof p, "%s", tu_write_tmp(".json", pred_json));
    /* Column 12 is the "x" where a key should start: "{\"runs\": [{" is 11 bytes. */
    snprintf(m, sizeof m, "%s", tu_write_tmp(".json", "{\"runs\": [{x}]}"));
    CU_ASSERT_EQUAL(compare("", p, m), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, m));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 1, column 12: string or '}' expected near 'x'"));
    tu_rm(m);
    /* Line 2: a byte count past 2^63 is refused, never rounded. */
    snprintf(m, sizeof m, "%s",
             tu_write_tmp(".json", "{\"runs\": [\n{\"peak_reserved\": 18446744073709551616}]}"));
    CU_ASSERT_EQUAL(compare("", p, m), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 2, column "));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "too big integer"));
    tu_rm(m);
    snprintf(m, sizeof m, "%s", tu_write_tmp(".json", "{\"runs\": [7]}"));
    CU_ASSERT_EQUAL(compare("", p, m), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "run 0 is not an object"));
    tu_rm(m);
    snprintf(m, sizeof m, "%s", tu_write_tmp(".json", "{\"runs\": [], \"runs\": []}"));
    CU_ASSERT_EQUAL(compare("", p, m), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "duplicate object key"));
    tu_rm(m);
    snprintf(m, sizeof m, "%s", tu_write_tmp(".json", "{\"trace\": {}}"));
    CU_ASSERT_EQUAL(compare("", p, m), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no \"runs\" array"));
    tu_rm(m);
    snprintf(m, sizeof m, "%s", tu_write_tmp(".json", "{\"runs\": [{\"oom_alloc\": -1}]}"));
    CU_ASSERT_EQUAL(compare("", p, m), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "non-negative integers"));
    tu_rm(m);
    snprintf(m, sizeof m, "%s", tu_write_tmp(".json", "{\"runs\": []} trailing"));
    CU_ASSERT_EQUAL(compare("", p, m), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "end of file expected near 'trailing'"));
    tu_rm(m);
    /* A CSV row that is not run,alloc,event,action,addr,size names its line. */
    char pc[256];
    snprintf(pc, sizeof pc, "%s",
             tu_write_tmp(".csv", "run,alloc,event,action,addr,size\n"
                                  "0,1,2,segment_alloc,3,4\n0,1,oops\n"));
    char extra[600];
    snprintf(extra, sizeof extra, "--segments %s %s", pc, pc);
    CU_ASSERT_EQUAL(compare(extra, p, p), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 3"));
    tu_rm(pc);
    CU_ASSERT_EQUAL(compare("", p, "/nonexistent/x.json"), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent/x.json: cannot open: No such file"));
    CU_ASSERT_EQUAL(compare("", p, ""), 2);
    CU_ASSERT_EQUAL(compare("-f xml", p, p), 2);
    tu_rm(p);
}

/* Byte counts above 2^53, where a double can no longer tell neighbours apart, compare
 * exactly: 2^53 + 1 against 2^53 differs; 2^63 - 1 and 2^53 + 1 against themselves match,
 * and the CSV prints them digit for digit. */
static void compare_exact_64bit(void)
{
    char p[256], m[256];
    snprintf(p, sizeof p, "%s",
             tu_write_tmp(".json", "{\"runs\": [{\"policy\": \"a\", \"capacity\": "
                                   "9223372036854775807, \"peak_reserved\": 9007199254740993},"
                                   "{\"policy\": \"b\", \"peak_reserved\": 9007199254740993}]}"));
    snprintf(m, sizeof m, "%s",
             tu_write_tmp(".json", "{\"runs\": [{\"capacity\": 9223372036854775807, "
                                   "\"peak_reserved\": 9007199254740993},"
                                   "{\"peak_reserved\": 9007199254740992}]}"));
    CU_ASSERT_EQUAL(compare("-f csv", p, m), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "0,a,9223372036854775807,-1,-1,1,9007199254740993,"
                                       "9007199254740993,0.000000000,1,"));
    /* The relative error, a double, rounds to 0; the match column does not. */
    CU_ASSERT_PTR_NOT_NULL(
        strstr(out, "1,b,-1,-1,-1,1,9007199254740993,9007199254740992,0.000000000,0,\n"));
    tu_rm(p);
    tu_rm(m);
}

CU_TestInfo test_compare[] = {
    {"64-bit byte counts compare exactly", compare_exact_64bit},
    {"csv rows: OOM, peak error, first segment difference", compare_csv_rows},
    {"capacity mismatch and run count warn", compare_capacity_mismatch_warns},
    {"bad input names the file and byte; usage errors", compare_bad_input},
    CU_TEST_INFO_NULL,
};
