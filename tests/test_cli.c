/*
 * test_cli.c - the allocsim command as a user meets it: exit codes (0 ran, 1 bad input or
 * I/O, 2 usage), error messages that name the file and the offset, the JSON schema with
 * its nulls, the CSV and --segments/--timeline columns, info/convert/gen/policies, and
 * capacity parsing. Runs build/allocsim through tu_run_allocsim ($AS_ALLOCSIM).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "util.h"

#define OUT_CAP 65536

static char out[OUT_CAP], err[OUT_CAP];

/* allocsim with printf-formatted arguments, its stdout and stderr into out and err. */
#define run(...) tu_run_allocsimf(out, sizeof out, err, sizeof err, __VA_ARGS__)

/* tu_path and tu_tmp names live in 4 rotating buffers: a test that keeps more keeps copies. */
static const char *keep(char *dst, const char *tmp)
{
    snprintf(dst, 256, "%s", tmp);
    return dst;
}

/* A hand trace: 1 MiB then 3 MiB live (4 MiB requested), a FREE_REQ, a MARK.
 * With nocache every request is one segment, and the whole segment is the block handed
 * out: 1 MiB -> 2 MiB and 3 MiB -> 4 MiB (allocated = reserved = 6 MiB at the peak), so
 * at capacity 5 MiB the second ALLOC (event 1, alloc 1) cannot be served. */
static const char trace_txt[] = "allocsim-text 1\n"
                                "meta source=hand\n"
                                "alloc 0 1M\n"
                                "alloc 1 3M s=0x7\n"
                                "mark step 1\n"
                                "free_req 0\n"
                                "free 0\n"
                                "free 1\n";

static void test_exit_codes(void)
{
    CU_ASSERT_EQUAL(run("%s", ""), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "usage"));
    CU_ASSERT_EQUAL(run("--help"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "policies"));
    CU_ASSERT_EQUAL(run("--version"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, AS_VERSION));

    char tb[256];
    const char *t = keep(tb, tu_write_tmp(".txt", trace_txt));
    CU_ASSERT_EQUAL(run("--bogus %s", t), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--bogus"));
    CU_ASSERT_EQUAL(run("-p nocache -c 80X %s", t), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "80X"));
    CU_ASSERT_EQUAL(run("-p nocache -f yaml %s", t), 2);
    CU_ASSERT_EQUAL(run("-p nosuchpolicy %s", t), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "nosuchpolicy"));
    CU_ASSERT_EQUAL(run("-p bestfit,nosuchknob=1 %s", t), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "nosuchknob"));
    CU_ASSERT_EQUAL(run("-p nocache"), 2); /* no trace */
    CU_ASSERT_EQUAL(run("-p nocache --threads 0 %s", t), 2);
    CU_ASSERT_EQUAL(run("info"), 2);
    CU_ASSERT_EQUAL(run("convert %s", t), 2);

    /* An OOM is a result: exit 0. */
    CU_ASSERT_EQUAL(run("-p nocache -c 5MiB %s", t), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "OOM at event 1 (alloc 1)"));
    CU_ASSERT_EQUAL(run("run -p nocache -c 6MiB %s", t), 0);
    CU_ASSERT_PTR_NULL(strstr(out, "OOM"));
    tu_rm(t);
}

static void test_input_errors(void)
{
    /* A missing file: exit 1, the message names it. */
    CU_ASSERT_EQUAL(run("-p nocache /nonexistent/trace.zst"), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent/trace.zst"));
    CU_ASSERT_EQUAL(run("info /nonexistent/trace.zst"), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent/trace.zst"));

    /* A free of an id never allocated, on line 3 at byte 29 (after the 16-byte magic
     * line and the 13-byte "alloc 0 1000\n" line): the message names the file, the
     * byte offset and the line. */
    char tb[256];
    const char *t = keep(tb, tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 1000\nfree 5\n"));
    CU_ASSERT_EQUAL(run("-p nocache %s", t), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, t));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "byte 29"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 3"));
    CU_ASSERT_EQUAL(run("info %s", t), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 3"));
    tu_rm(t);

    /* Garbage that is no known format. */
    t = keep(tb, tu_write_tmp(".bin", "\x01\x02garbage\n"));
    CU_ASSERT_EQUAL(run("-p nocache %s", t), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, t));
    tu_rm(t);

    /* An unwritable report file is an I/O error. */
    t = keep(tb, tu_write_tmp(".txt", trace_txt));
    CU_ASSERT_EQUAL(run("-p nocache --segments /nonexistent/dir/s.csv %s", t), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent/dir/s.csv"));
    tu_rm(t);
}

static void test_json(void)
{
    char tb[256];
    const char *t = keep(tb, tu_write_tmp(".txt", trace_txt));
    CU_ASSERT_EQUAL_FATAL(run("-p nocache -c none -c 5MiB -f json %s", t), 0);
    const char *keys[] = {
        "\"allocsim\": \"" AS_VERSION "\"",
        "\"schema\": 3",
        "\"traces\": [\n  {\"trace\": 0, \"file\": ",
        "{\"run\": 0, \"trace\": 0, \"file\": ",
        "{\"run\": 1, \"trace\": 0, \"file\": ",
        "\"spec\": \"nocache\"",
        "\"oom\": true",
        "\"oom\": false",
        "\"events\": 6",
        "\"allocs\": 2",
        "\"peak_requested\": 4194304",
        "\"runs\": [",
        "\"policy\": \"nocache\"",
        "\"completed\": true",
        "\"completed\": false",
        "\"capacity\": null",
        "\"capacity\": 5242880",
        "\"oom_event\": null",
        "\"oom_alloc\": null",
        "\"oom_event\": 1",
        "\"oom_alloc\": 1",
        "\"peak_reserved\": 6291456",
        "\"peak_allocated\": 6291456",
        "\"fragmentation\": ",
        "\"device_reserves\": 2",
        "\"device_releases\": 2",
        "\"peak_pending\": 2097152",
        "\"events_per_second\": ",
        "\"source\": \"hand\"",
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strstr(out, keys[i])) {
            fprintf(stderr, "\n  missing %s in:\n%s\n", keys[i], out);
            CU_FAIL("JSON key missing");
        }
    /* Balanced braces and brackets outside strings: one object. */
    int depth = 0, in_str = 0, min = 1;
    for (const char *p = out; *p; p++) {
        if (in_str) {
            if (*p == '\\')
                p++;
            else if (*p == '"')
                in_str = 0;
            continue;
        }
        if (*p == '"')
            in_str = 1;
        else if (*p == '{' || *p == '[')
            depth++;
        else if (*p == '}' || *p == ']')
            if (--depth == 0 && p[1] && p[1] != '\n')
                min = 0;
    }
    CU_ASSERT_EQUAL(depth, 0);
    CU_ASSERT_TRUE(min);
    tu_rm(t);
}

static void test_csv_and_logs(void)
{
    char tb[256];
    const char *t = keep(tb, tu_write_tmp(".txt", trace_txt));
    char seg[256], tl[256];
    snprintf(seg, sizeof seg, "%s", tu_tmp(".csv"));
    snprintf(tl, sizeof tl, "%s", tu_tmp(".csv"));
    CU_ASSERT_EQUAL_FATAL(run("-p nocache -p bestfit -c none -c 5MiB -f csv --segments %s "
                              "--timeline %s --timeline-every 1 %s",
                              seg, tl, t),
                          0);
    static const char head[] = "run,trace,file,spec,policy,capacity,completed,oom,oom_event,"
                               "oom_alloc,";
    CU_ASSERT_EQUAL(strncmp(out, head, sizeof head - 1), 0);
    /* Four runs, in -p-major order: nocache/none, nocache/5MiB, bestfit/none, ... */
    int lines = 0;
    for (const char *p = out; *p; p++)
        lines += *p == '\n';
    CU_ASSERT_EQUAL(lines, 5);
    /* Absent integers are -1, never blank: the uncapped run, then the OOM at 5 MiB. */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n0,0,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ",nocache,nocache,-1,1,0,-1,-1,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n1,0,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ",nocache,nocache,5242880,0,1,1,1,"));
    CU_ASSERT_PTR_NULL(strstr(out, ",,"));

    char *s = tu_slurp(seg, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(strncmp(s, "run,alloc,event,action,addr,size\n", 33), 0);
    /* Run 0 (nocache, unlimited): two segment_alloc then two segment_free; the 2 MiB
     * segment of alloc 0 goes back at the FREE (event 4), keyed by the next ALLOC's
     * ordinal, 2. */
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\n0,0,0,segment_alloc,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\n0,1,1,segment_alloc,"));
    const char *f0 = strstr(s, "\n0,2,4,segment_free,");
    CU_ASSERT_PTR_NOT_NULL(f0);
    if (f0)
        CU_ASSERT_EQUAL(strncmp(strchr(f0 + 1, '\n') - 8, ",2097152", 8), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\n0,2,5,segment_free,"));
    /* Run 1 (nocache at 5 MiB) only reserved the first segment; runs come in order. */
    char *r1 = strstr(s, "\n1,");
    CU_ASSERT_PTR_NOT_NULL(r1);
    if (r1)
        CU_ASSERT_PTR_NULL(strstr(r1, "\n0,"));
    free(s);

    s = tu_slurp(tl, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(strncmp(s, "run,event,alloc,time_us,requested,allocated,reserved\n", 53), 0);
    /* After event 1 of run 0: 4 MiB requested, 6 MiB allocated and reserved; no times
     * in the trace, so time_us is -1. After the FREE_REQ (event 3): 3 MiB requested,
     * 4 MiB allocated, 6 MiB still reserved until the FREE (event 4). */
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\n0,1,1,-1,4194304,6291456,6291456\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\n0,3,2,-1,3145728,4194304,6291456\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\n0,4,2,-1,3145728,4194304,4194304\n"));
    free(s);
    tu_rm(seg);
    tu_rm(tl);
    tu_rm(t);
}

static void test_table_two_traces(void)
{
    const char *a = tu_write_tmp(".txt", trace_txt);
    char a_path[256];
    snprintf(a_path, sizeof a_path, "%s", a);
    char bb[256];
    const char *b = keep(bb, tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 100\n"));
    CU_ASSERT_EQUAL_FATAL(run("-p nocache -c 5MiB %s %s", a_path, b), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, a_path));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, b));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "OOM at event 1 (alloc 1)"));
    /* The OOM spelled out: 3 MiB asked with 2 MiB reserved and allocated. */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "asking 3.0 MiB: reserved 2.0 MiB, allocated 2.0 MiB"));
    /* One line across both traces: the first OOMs at 5 MiB, the second (100 bytes) fits. */
    const char *across = strstr(out, "across 2 traces:");
    CU_ASSERT_PTR_NOT_NULL_FATAL(across);
    CU_ASSERT_PTR_NOT_NULL(strstr(across, "nocache  5 MiB"));
    CU_ASSERT_PTR_NOT_NULL(strstr(across, "1/2"));
    tu_rm(a_path);
    tu_rm(b);
}

static void test_info_convert_gen_policies(void)
{
    const char *t = tu_write_tmp(".txt", trace_txt);
    char tp[256], nat[256], back[256];
    snprintf(tp, sizeof tp, "%s", t);
    snprintf(nat, sizeof nat, "%s", tu_tmp(".zst"));
    snprintf(back, sizeof back, "%s", tu_tmp(".txt"));

    CU_ASSERT_EQUAL(run("info %s", tp), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "events: 6 (alloc 2, free 2, free_req 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "peak requested: 4.0 MiB (4194304 bytes)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "source: hand"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "streams: 2"));
    /* 1 MiB and 3 MiB fall in the [1 MiB, 2 MiB) and [2 MiB, 4 MiB) buckets. */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "[1.0 MiB, 2.0 MiB)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "[2.0 MiB, 4.0 MiB)"));

    /* Lifetimes: id0 from event 0 to its FREE at 4, id1 from 1 to 5: both in [4, 8);
     * id0 was pending from its FREE_REQ (3) to its FREE (4): [1, 2). */
    CU_ASSERT_EQUAL(run("info -f json %s", tp), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"peak_requested\": 4194304"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"lifetimes\": [{\"lo\": 4, \"count\": 2}]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"pending\": [{\"lo\": 1, \"count\": 1}]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "{\"stream\": 7, \"allocs\": 1, \"bytes\": 3145728}"));
    CU_ASSERT_EQUAL(run("info -f yaml %s", tp), 2);

    /* Text -> native -> text gives the writer's canonical text of the input. */
    CU_ASSERT_EQUAL(run("convert %s %s", tp, nat), 0);
    CU_ASSERT_EQUAL(run("convert %s %s", nat, back), 0);
    char *x = tu_slurp(back, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    CU_ASSERT_PTR_NOT_NULL(strstr(x, "alloc 0 1048576\nalloc 1 3145728 s=0x7\nmark step 1\n"));
    free(x);
    CU_ASSERT_EQUAL(run("info %s", nat), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "format: native"));

    /* gen writes a trace the simulator reads back. */
    CU_ASSERT_EQUAL(run("gen random allocs=500 -o %s", nat), 0);
    CU_ASSERT_EQUAL(run("info %s", nat), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "alloc 500,"));
    CU_ASSERT_EQUAL(run("gen nosuchkind -o %s", nat), 2);
    CU_ASSERT_EQUAL(run("gen random -o"), 2);

    CU_ASSERT_EQUAL(run("policies"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "bestfit"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "nocache"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "maxsplit"));
    CU_ASSERT_EQUAL(run("policies nosuch"), 2);
    tu_rm(tp);
    tu_rm(nat);
    tu_rm(back);
}

/* The same runs with 1 and 3 threads give the same report and the same segment log. */
static void test_threads_cli(void)
{
    char tb[256], s1[256], s3[256];
    const char *t = keep(tb, tu_tmp(".zst"));
    keep(s1, tu_tmp(".csv"));
    keep(s3, tu_tmp(".csv"));
    CU_ASSERT_EQUAL_FATAL(run("gen random allocs=3000 seed=7 -o %s", t), 0);
    const char *args = "-q -f csv -p bestfit -p nocache -p buddy -c none -c 2GB -c 3GB";
    CU_ASSERT_EQUAL_FATAL(run("%s --threads 1 --segments %s %s", args, s1, t), 0);
    char *a = strdup(out);
    CU_ASSERT_EQUAL_FATAL(run("%s --threads 3 --segments %s %s", args, s3, t), 0);
    CU_ASSERT_EQUAL(tu_drop_timing(a), 0);
    CU_ASSERT_EQUAL(tu_drop_timing(out), 0);
    CU_ASSERT_STRING_EQUAL(a, out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ",bestfit,bestfit,2000000000,0,1,")); /* an OOM among them */
    char *x = tu_slurp(s1, NULL), *y = tu_slurp(s3, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT(strlen(x) > 1000);
    CU_ASSERT_STRING_EQUAL(x, y);
    free(a);
    free(x);
    free(y);
    tu_rm(t);
    tu_rm(s1);
    tu_rm(s3);
}

static void test_parse_capacity(void)
{
    uint64_t v;
    CU_ASSERT_EQUAL(as_parse_capacity("80G", &v), 0);
    CU_ASSERT_EQUAL(v, 80ull << 30);
    CU_ASSERT_EQUAL(as_parse_capacity("80GB", &v), 0);
    CU_ASSERT_EQUAL(v, 80000000000ull);
    CU_ASSERT_EQUAL(as_parse_capacity("80gib", &v), 0);
    CU_ASSERT_EQUAL(v, 80ull << 30);
    CU_ASSERT_EQUAL(as_parse_capacity("141e9", &v), 0);
    CU_ASSERT_EQUAL(v, 141000000000ull);
    CU_ASSERT_EQUAL(as_parse_capacity("1.5GiB", &v), 0);
    CU_ASSERT_EQUAL(v, 3ull << 29);
    CU_ASSERT_EQUAL(as_parse_capacity("150109880320", &v), 0);
    CU_ASSERT_EQUAL(v, 150109880320ull);
    CU_ASSERT_EQUAL(as_parse_capacity("2MiB", &v), 0);
    CU_ASSERT_EQUAL(v, 2ull << 20);
    CU_ASSERT_EQUAL(as_parse_capacity("none", &v), 0);
    CU_ASSERT_EQUAL(v, AS_CAPACITY_NONE);
    const char *bad[] = {
        "",   "0",   "-1",  "80X", "G", "1e", "99999999999999999999", "20000000TiB",
        " 5", "5 G", "nan", "inf"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (as_parse_capacity(bad[i], &v) == 0) {
            fprintf(stderr, "\n  accepted '%s'\n", bad[i]);
            CU_FAIL("bad capacity accepted");
        }
    char b[32];
    /* One human form, binary units: exact when whole, else rounded and marked "~". */
    as_fmt_capacity(b, sizeof b, 80000000000ull); /* 74.505805969 GiB */
    CU_ASSERT_STRING_EQUAL(b, "~74.51 GiB");
    as_fmt_capacity(b, sizeof b, 80ull << 30);
    CU_ASSERT_STRING_EQUAL(b, "80 GiB");
    as_fmt_capacity(b, sizeof b, 8600ull << 20);
    CU_ASSERT_STRING_EQUAL(b, "8600 MiB");
    as_fmt_capacity(b, sizeof b, 9019431321ull); /* 8.4 GiB, not a whole MiB */
    CU_ASSERT_STRING_EQUAL(b, "~8.40 GiB");
    as_fmt_capacity(b, sizeof b, (1ull << 20) + 1);
    CU_ASSERT_STRING_EQUAL(b, "~1.0 MiB");
    as_fmt_capacity(b, sizeof b, 4096);
    CU_ASSERT_STRING_EQUAL(b, "4 KiB");
    as_fmt_capacity(b, sizeof b, 80);
    CU_ASSERT_STRING_EQUAL(b, "80 B");
    as_fmt_capacity(b, sizeof b, 1000);
    CU_ASSERT_STRING_EQUAL(b, "1000 B");
    as_fmt_capacity(b, sizeof b, AS_CAPACITY_NONE);
    CU_ASSERT_STRING_EQUAL(b, "none");
}

CU_TestInfo test_cli[] = {
    {"exit codes: 0 ran (OOM included), 2 usage", test_exit_codes},
    {"bad input and I/O: exit 1 naming file and offset", test_input_errors},
    {"JSON schema fields, nulls where they apply", test_json},
    {"CSV report, --segments and --timeline columns", test_csv_and_logs},
    {"table with two traces and the OOM line", test_table_two_traces},
    {"info, convert round trip, gen, policies", test_info_convert_gen_policies},
    {"capacity parsing and printing", test_parse_capacity},
    {"same report and segment log with 1 and 3 threads", test_threads_cli},
    CU_TEST_INFO_NULL,
};
