/*
 * test_snapout.c - `allocsim run --snapshot-out` (sim/snapout.c): the exported pickle read
 * back. The golden results are the original run's own: the same run over the export (same
 * -p and -c) must give the same report (every column but the file and the timings) and the
 * same device-level events at the same addresses (--segments); `allocsim check` on the
 * export must reproduce it under the setting the export records; tests/check_snapshot.py
 * reads it as memory_viz does. Also: the OOM entry where the run failed, frames and
 * annotations carried over, and the usage errors (one run only). A run that stopped at an
 * OOM is not round-tripped: the export ends with its `oom` entry, which an import (as for
 * any snapshot) does not turn into a request.
 */
#include <CUnit/CUnit.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define CAP 65536

static char out[CAP], err[CAP];

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int run(const char *fmt, ...)
{
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    int rc = tu_run_allocsim(args, out, sizeof out, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n  allocsim %s: exit %d: %s", args, rc, err);
    return rc;
}

/* The CSV report's row with the columns that depend on the file name or the clock blanked. */
static int pressure; /* the run frees cached segments to retry: see test_round_trip_capacity */

static void report_row(const char *csv, char *row, size_t n)
{
    const char *nl = strchr(csv, '\n');
    char hdr[2048];
    snprintf(hdr, sizeof hdr, "%.*s", nl ? (int)(nl - csv) : 0, csv);
    const char *r = nl ? nl + 1 : "";
    size_t j = 0;
    char *save = NULL, *h = strtok_r(hdr, ",", &save);
    while (h && *r && j + 1 < n) {
        size_t len = strcspn(r, ",\n");
        int skip = !strcmp(h, "file") || !strcmp(h, "wall_s") || !strcmp(h, "cpu_s") ||
                   !strcmp(h, "events_per_second") ||
                   (pressure && (!strcmp(h, "events") || !strcmp(h, "peak_reserved_event") ||
                                 !strcmp(h, "retries")));
        j += (size_t)snprintf(row + j, n - j, "%s=%.*s;", h, skip ? 0 : (int)len, r);
        r += len + (r[len] == ',');
        h = strtok_r(NULL, ",", &save);
    }
    row[j < n ? j : n - 1] = 0;
}

static int python_check(const char *pickle)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s' 2>&1", tu_path("tests/check_snapshot.py"), pickle);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[1024] = "";
    while (fgets(line, sizeof line, p))
        if (!strstr(line, ": ok: "))
            fprintf(stderr, "\n  %s", line);
    return pclose(p);
}

/* Removes the third column (event) of every line, in place. */
static void drop_event_column(char *csv)
{
    char *w = csv;
    for (const char *r = csv; *r;) {
        const char *nl = strchr(r, '\n');
        size_t len = nl ? (size_t)(nl - r) + 1 : strlen(r);
        const char *c1 = memchr(r, ',', len),
                   *c2 = c1 ? memchr(c1 + 1, ',', len - (size_t)(c1 + 1 - r)) : NULL;
        const char *c3 = c2 ? memchr(c2 + 1, ',', len - (size_t)(c2 + 1 - r)) : NULL;
        if (c3) {
            memmove(w, r, (size_t)(c2 - r));
            w += c2 - r;
            memmove(w, c3, len - (size_t)(c3 - r));
            w += len - (size_t)(c3 - r);
        } else {
            memmove(w, r, len);
            w += len;
        }
        r += len;
    }
    *w = 0;
}

static long long csv_field(const char *csv, const char *name);
static long long info_value(const char *text, const char *key);

/* The run of args over trace, exported, then the same run over the export. */
static void round_trip(const char *trace, const char *args, int torch)
{
    char x[256], s1[256], s2[256], row1[4096], row2[4096];
    snprintf(x, sizeof x, "%s", tu_tmp(".pickle"));
    snprintf(s1, sizeof s1, "%s", tu_tmp(".csv"));
    snprintf(s2, sizeof s2, "%s", tu_tmp(".csv"));
    char t[256];
    snprintf(t, sizeof t, "%s", tu_path(trace));
    CU_ASSERT_EQUAL_FATAL(
        run("run -q %s -f csv --segments %s --snapshot-out %s %s", args, s1, x, t), 0);
    report_row(out, row1, sizeof row1);
    CU_ASSERT_EQUAL_FATAL(run("run -q %s -f csv --segments %s %s", args, s2, x), 0);
    report_row(out, row2, sizeof row2);
    CU_ASSERT_STRING_EQUAL(row1, row2);
    char *a = tu_slurp(s1, NULL), *b = tu_slurp(s2, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    if (pressure) { /* run,alloc,event,...: the event index shifts by the inferred calls */
        drop_event_column(a);
        drop_event_column(b);
    }
    CU_ASSERT(strchr(strchr(a, '\n') + 1, '\n') != NULL); /* a device event at least */
    CU_ASSERT_STRING_EQUAL(a, b);
    free(a);
    free(b);
    CU_ASSERT_EQUAL(python_check(x), 0);
    if (torch) { /* the export records the setting and capacity: check reproduces the run */
        CU_ASSERT_EQUAL(run("check %s", x), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, ": reproduced: all "));
    }
}

static void test_round_trip_torch(void)
{
    round_trip("tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst", "", 1);
}

static void test_round_trip_expandable(void)
{
    round_trip("tests/data/torch-2.11-h200-streams/streams2_default.pickle.zst",
               "-p expandable_segments:True,max_split_size_mb:200", 1);
}

/* Python over an export: "RUNS FRAMED" for its runs of segment_free entries that a
 * segment_alloc follows at once, and those of them whose frees carry frames. */
static void retry_runs(const char *pickle, long *runs, long *framed)
{
    char cmd[2048], line[64] = "";
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import pickle,sys\n"
             "t = pickle.load(open(sys.argv[1], \"rb\"))[\"device_traces\"][0]\n"
             "r = f = 0\n"
             "for i in range(1, len(t)):\n"
             "    if t[i][\"action\"] == \"segment_alloc\" and t[i - 1][\"action\"] == "
             "\"segment_free\":\n"
             "        r += 1; f += bool(t[i][\"frames\"]) and t[i - 1][\"frames\"] == "
             "t[i][\"frames\"]\n"
             "print(r, f)' '%s'",
             pickle);
    FILE *p = popen(cmd, "r");
    *runs = *framed = -1;
    if (p && fgets(line, sizeof line, p))
        sscanf(line, "%ld %ld", runs, framed);
    if (p)
        pclose(p);
}

static void test_round_trip_capacity(void)
{
    /* 9 GiB: the cached-segment frees and retries of a device that fills (4 retries), and
     * no OOM. PyTorch records a retry's segment_free entries under the malloc's context,
     * the frames of its segment_alloc, and so does the export: the import tells such a
     * release from an empty_cache() call by that, and the simulation retries by itself.
     * Of the 4 failing requests only 1 has frames in the snapshot (the other 3 were made
     * with no Python stack): their releases read as empty_cache() calls, so the run of the
     * export has 3 of those as events and 1 retry, with the same device events at the same
     * allocations and addresses and the same peaks, which is what is compared. */
    char x[256], t[256];
    snprintf(x, sizeof x, "%s", tu_tmp(".pickle"));
    snprintf(t, sizeof t, "%s", tu_path("tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst"));
    CU_ASSERT_EQUAL_FATAL(run("run -q -c 9G -f csv --snapshot-out %s %s", x, t), 0);
    long long retries = csv_field(out, "retries");
    long runs, framed;
    retry_runs(x, &runs, &framed);
    CU_ASSERT_EQUAL(runs, retries);
    CU_ASSERT_EQUAL(framed, 1);
    CU_ASSERT_EQUAL_FATAL(run("info %s", x), 0);
    CU_ASSERT_EQUAL(info_value(out, "torch.oom_retry_runs"), framed);
    char want[64];
    snprintf(want, sizeof want, "empty_cache %lld,", retries - framed);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
    pressure = 1;
    round_trip("tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst", "-c 9G", 1);
    pressure = 0;
}

static void test_round_trip_other_policy(void)
{
    round_trip("tests/data/torch-2.11-h200/moe_like.pickle.zst", "-p bestfit", 0);
    round_trip("tests/data/torch-2.11-h200-midrun/midrun.pickle.zst", "-p segfit", 0);
}

/* The value of field `name` in the CSV report row (the first run). */
static long long csv_field(const char *csv, const char *name)
{
    const char *nl = strchr(csv, '\n');
    int col = 0;
    for (const char *h = csv; h < nl; col++) {
        size_t len = strcspn(h, ",\n");
        if (len == strlen(name) && !strncmp(h, name, len))
            break;
        h += len + 1;
    }
    const char *r = nl + 1;
    for (int i = 0; i < col; i++)
        r += strcspn(r, ",\n") + 1;
    return strtoll(r, NULL, 10);
}

static void test_oom(void)
{
    char x[256];
    snprintf(x, sizeof x, "%s", tu_tmp(".pickle"));
    char t[256];
    snprintf(t, sizeof t, "%s", tu_path("tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst"));
    CU_ASSERT_EQUAL_FATAL(run("run -q -c 8G -f csv --snapshot-out %s %s", x, t), 0);
    long long oom_alloc = csv_field(out, "oom_alloc");
    CU_ASSERT(oom_alloc > 0);
    /* the allocations before the failing one, then its oom entry */
    CU_ASSERT_EQUAL_FATAL(run("info %s", x), 0);
    char want[128];
    snprintf(want, sizeof want, "torch.actions = alloc:%lld,", oom_alloc);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "oom:1"));
    CU_ASSERT_EQUAL(python_check(x), 0);
    /* its size as PyTorch writes it: the request rounded (round_size: up to 512 B, no
     * roundup_power2_divisions in the default setting), not the request */
    CU_ASSERT_EQUAL_FATAL(run("run -q -c 8G -f csv %s", t), 0);
    long long req = csv_field(out, "oom_size");
    char cmd[1024], line[64] = "";
    snprintf(
        cmd, sizeof cmd,
        "python3 -c 'import pickle,sys; print([e[\"size\"] for e in pickle.load(open(sys.argv[1],"
        "\"rb\"))[\"device_traces\"][0] if e[\"action\"] == \"oom\"])' '%s'",
        x);
    FILE *p = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    if (!fgets(line, sizeof line, p))
        line[0] = 0;
    pclose(p);
    char rounded[64];
    snprintf(rounded, sizeof rounded, "[%lld]\n", (req + 511) / 512 * 512);
    CU_ASSERT(req % 512 != 0); /* else the rounding is not seen */
    CU_ASSERT_STRING_EQUAL(line, rounded);
}

/* The pools snapshot exported: its segments alive at the end carry their private pools'
 * segment_pool_id (the trace's pool table), so the export imports with the same pools, and
 * check reproduces it with the allocations in them. */
static void test_pools(void)
{
    char x[256], t[256];
    snprintf(x, sizeof x, "%s", tu_tmp(".pickle"));
    snprintf(t, sizeof t, "%s", tu_path("tests/data/torch-2.11-h200-pools/graph_probe.pickle.zst"));
    CU_ASSERT_EQUAL_FATAL(run("info %s", t), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(strstr(out, "pools = 2\n  pool.1 = (0, 1)\n  pool.2 = (1, 0)\n"));
    CU_ASSERT_EQUAL_FATAL(run("run -q --snapshot-out %s %s", x, t), 0);
    CU_ASSERT_EQUAL_FATAL(run("info %s", x), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "pools = 2\n  pool.1 = (0, 1)\n  pool.2 = (1, 0)\n"));
    CU_ASSERT_EQUAL(python_check(x), 0);
    CU_ASSERT_EQUAL(run("check %s", x), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ": reproduced: all 23 segment events"));
    CU_ASSERT_PTR_NULL(strstr(out, "ambiguous"));
    /* Pools released before the end: the export writes each release's frees with a frame
     * naming the call (empty_cache(), or empty_cache(pool=K) for a pool released alone, as
     * graph's MemPool is), from which the import reads its pools again: the same report,
     * device events and check. */
    round_trip("tests/data/torch-2.11-h200-graphs/graph.pickle.zst", "", 1);
    round_trip("tests/data/torch-2.11-h200-graphs/train.pickle.zst", "", 1);
}

/* The number after "KEY = " in `allocsim info` output, or -1. */
static long long info_value(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtoll(p + strlen(key) + 3, NULL, 10) : -1;
}

static void test_frames_and_marks(void)
{
    char x[256];
    snprintf(x, sizeof x, "%s", tu_tmp(".pickle"));
    char t[256];
    snprintf(t, sizeof t, "%s", tu_path("tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst"));
    CU_ASSERT_EQUAL_FATAL(run("info %s", t), 0);
    long long sites = info_value(out, "torch.sites"),
              framed = info_value(out, "torch.allocs_with_frames");
    long long marks = info_value(out, "torch.annotation_marks");
    CU_ASSERT(sites > 0 && framed > 0 && marks > 0);
    CU_ASSERT_EQUAL_FATAL(run("run -q --snapshot-out %s %s", x, t), 0);
    CU_ASSERT_EQUAL_FATAL(run("info %s", x), 0);
    CU_ASSERT_EQUAL(info_value(out, "torch.sites"), sites);
    CU_ASSERT_EQUAL(info_value(out, "torch.allocs_with_frames"), framed);
    CU_ASSERT_EQUAL(info_value(out, "torch.annotation_marks"), marks);
    CU_ASSERT_EQUAL(info_value(out, "torch.state_mismatches"), 0);
}

static void test_usage(void)
{
    char t[256], x[256]; /* copies: tu_path and tu_tmp names rotate through 4 buffers */
    snprintf(t, sizeof t, "%s", tu_path("tests/data/torch-2.11-h200-midrun/midrun.pickle.zst"));
    snprintf(x, sizeof x, "%s/none.pickle", tu_tmpdir());
    CU_ASSERT_EQUAL(
        tu_run_allocsim("run -q -p torch -p bestfit --snapshot-out x.pickle t", NULL, 0, NULL, 0),
        2);
    char a[1024];
    snprintf(a, sizeof a, "run -q -c 8G -c 9G --snapshot-out %s %s", x, t);
    CU_ASSERT_EQUAL(tu_run_allocsim(a, NULL, 0, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "one -c"));
    snprintf(a, sizeof a, "run -q --snapshot-out %s %s %s", x, t, t);
    CU_ASSERT_EQUAL(tu_run_allocsim(a, NULL, 0, NULL, 0), 2);
    snprintf(a, sizeof a, "run -q --snapshot-out %s -", x); /* stdin: it is read twice */
    CU_ASSERT_EQUAL(tu_run_allocsim(a, NULL, 0, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not stdin"));
    snprintf(a, sizeof a, "run -q --snapshot-out %s %s", t, t); /* never over an input */
    CU_ASSERT_EQUAL(tu_run_allocsim(a, NULL, 0, NULL, 0), 2);
    snprintf(a, sizeof a, "run -q --snapshot-out %s/no/dir/x.pickle %s", tu_tmpdir(), t);
    CU_ASSERT_EQUAL(tu_run_allocsim(a, NULL, 0, NULL, 0), 1);
    FILE *f = fopen(x, "rb");
    CU_ASSERT_PTR_NULL(f); /* the refused runs wrote nothing */
    if (f)
        fclose(f);
}

/* clang-format off */
CU_TestInfo test_snapout[] = {
    {"round trip: torch, the recorded setting", test_round_trip_torch},
    {"round trip: expandable segments", test_round_trip_expandable},
    {"round trip: a capacity that fills", test_round_trip_capacity},
    {"round trip: other policies", test_round_trip_other_policy},
    {"the oom entry of a failed run", test_oom},
    {"private pools' segment_pool_id", test_pools},
    {"frames and annotations carried over", test_frames_and_marks},
    {"one run only; never over an input", test_usage},
    CU_TEST_INFO_NULL,
};
/* clang-format on */
