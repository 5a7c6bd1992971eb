/*
 * test_budget.c - runs in flight have a memory budget (allocsim --memory): the engine's
 * live-allocation limit and decode-only scan, the groups `allocsim run` feeds (the same
 * report and the same --segments, --timeline and --segment-map files whatever the
 * grouping), the caps on capacities (sweeps, mincap's grid), and the memory a grouped run
 * really takes (the child's peak RSS from wait4).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "engine.h"
#include "util.h"

#define HAND "traces/samples/handwritten.txt"

static char out[65536], err[65536];

/* allocsim with printf-formatted arguments, its stdout and stderr into out and err. */
#define run(...) tu_run_allocsimf(out, sizeof out, err, sizeof err, __VA_ARGS__)

static void run_bytes_model(void)
{
    CU_ASSERT_EQUAL(as_engine_run_bytes(0, 0, 0), AS_ENGINE_RUN_BASE);
    CU_ASSERT_EQUAL(as_engine_run_bytes(0, 1, 0), AS_ENGINE_RUN_BASE); /* the first stream */
    CU_ASSERT_EQUAL(as_engine_run_bytes(10, 1, 1),
                    AS_ENGINE_RUN_BASE + AS_ENGINE_RUN_LOGS + 10 * AS_ENGINE_RUN_PER_LIVE);
    CU_ASSERT_EQUAL(as_engine_run_bytes(10, 4, 0), AS_ENGINE_RUN_BASE +
                                                       10 * AS_ENGINE_RUN_PER_LIVE +
                                                       3 * AS_ENGINE_RUN_PER_STREAM);
    CU_ASSERT_EQUAL(as_engine_run_bytes(UINT64_MAX / 2, 0, 0), UINT64_MAX); /* no wrap */
    CU_ASSERT_EQUAL(as_engine_run_bytes(0, UINT64_MAX / 2, 0), UINT64_MAX);
}

/* handwritten.txt by hand: allocs 0-3 live (4), alloc 4 makes 5; frees bring it to 3,
 * allocs 5, 6, 7 never pass 4, alloc 8 with 7 still pending (free_req) is 5 again; then
 * only frees and single allocations. */
static void scan_peak_live(void)
{
    as_engine *e;
    as_trace_reader *rd;
    as_trace_error te;
    CU_ASSERT_FATAL(as_engine_create(NULL, &e) == 0);
    CU_ASSERT_FATAL(as_trace_open(tu_path(HAND), NULL, &rd, &te) == 0);
    CU_ASSERT_EQUAL(as_engine_scan(e, rd, &te), 0);
    const as_trace_summary *s = as_engine_summary(e);
    CU_ASSERT_EQUAL(s->peak_live, 5);
    CU_ASSERT_EQUAL(s->live_at_end, 0);
    CU_ASSERT_EQUAL(s->allocs, 10);
    CU_ASSERT_EQUAL(as_engine_scan(e, rd, &te), AS_EUSAGE); /* once */
    as_trace_close(rd);
    as_engine_destroy(e);
}

/* opts.max_live: handwritten.txt has 5 live at its peak and a second stream, which counts
 * as AS_ENGINE_STREAM_LIVES (4) more: 8 stops the engine before the batch; 9 lets it run. */
static void max_live_stops(void)
{
    for (uint64_t lim = 8; lim <= 9; lim++) {
        as_engine_opts o = {.max_live = lim, .threads = 2};
        as_engine *e;
        as_trace_reader *rd;
        as_trace_error te;
        as_policy_spec sp;
        char why[256];
        CU_ASSERT_FATAL(as_policy_spec_parse("bestfit", &sp, why, sizeof why) == 0);
        CU_ASSERT_FATAL(as_engine_create(&o, &e) == 0);
        CU_ASSERT(as_engine_add_run(e, &sp, AS_CAPACITY_NONE) == 0);
        CU_ASSERT(as_engine_add_run(e, &sp, 40ull << 20) == 1);
        CU_ASSERT_FATAL(as_trace_open(tu_path(HAND), NULL, &rd, &te) == 0);
        int rc = as_engine_run(e, rd, &te);
        CU_ASSERT_EQUAL(rc, lim == 8 ? AS_ELIMIT : 0);
        if (lim == 8) {
            CU_ASSERT_PTR_NOT_NULL(strstr(as_engine_errmsg(e), "more than 8 allocations"));
        } else {
            CU_ASSERT_EQUAL(as_engine_summary(e)->peak_live, 5);
        }
        as_trace_close(rd);
        as_engine_destroy(e);
        as_policy_spec_free(&sp);
    }
}

/* Peak RSS (KiB) of `allocsim args...` run directly (no shell), from wait4; -1 on error. */
static long child_rss_kib(char *const argv[])
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    return ru.ru_maxrss;
}

/* A trace whose every allocation is on a fresh stream: torch keeps about 1 KiB a stream
 * in each run, so 24 runs of 10,000 streams under --memory 16M go one at a time (12.9 MB
 * budgeted each) and stay near the budget; counting only the live allocations (2.6 MB a
 * run) they went 6 at a time and took about 80 MB. */
static void streams_in_budget(void)
{
    const char *bin = tu_allocsim(), *path = tu_tmp(".txt");
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "allocsim-text 1\n");
    for (int i = 0; i < 10000; i++)
        fprintf(f, "alloc %d 512 s=%d\n", i, i + 1);
    for (int i = 0; i < 10000; i++)
        fprintf(f, "free %d\n", i);
    fclose(f);
    static char caps[24][8], sbin[4096], spath[4096];
    static char run[] = "run", mem[] = "--memory", m16[] = "16M", c_[] = "-c", p_[] = "-p",
                torch[] = "torch";
    snprintf(sbin, sizeof sbin, "%s", bin);
    snprintf(spath, sizeof spath, "%s", path);
    char *argv[4 + 2 * 24 + 4] = {sbin, run, mem, m16};
    int a = 4;
    for (int c = 0; c < 24; c++) {
        snprintf(caps[c], sizeof caps[c], "%dG", 100 + c);
        argv[a++] = c_, argv[a++] = caps[c];
    }
    argv[a++] = p_, argv[a++] = torch, argv[a++] = spath, argv[a] = NULL;
    long rss = child_rss_kib(argv);
    CU_ASSERT(rss >= 0); /* it ran and exited 0 */
    if (!AS_UNDER_ASAN)  /* KiB: the 64 MiB budget, the trace's reader, the program */
        CU_ASSERT(rss < 48 * 1024);
}

/* One set of runs at three budgets: all at once (default), the one pass stopped by the
 * trace's live allocations and redone in groups of 8 (9 runs: the budget is 9 runs of
 * per-run base + logs + 4 live allocations, the trace reaches 5), and one run per group
 * (--memory 1). Reports and every log file must be byte-identical. */
static void groups_same_results(void)
{
    const char *files[3][3];
    char names[3][3][256];
    char *report[3];
    uint64_t per = AS_ENGINE_RUN_BASE + AS_ENGINE_RUN_LOGS + 4 * AS_ENGINE_RUN_PER_LIVE + 100;
    char budgets[3][32] = {"2G", "", "1"};
    snprintf(budgets[1], sizeof budgets[1], "%llu", (unsigned long long)(9 * per));
    for (int b = 0; b < 3; b++) {
        for (int k = 0; k < 3; k++) {
            snprintf(names[b][k], sizeof names[b][k], "%s", tu_tmp(".csv"));
            files[b][k] = names[b][k];
        }
        int rc = run("-q -f csv -p bestfit -p torch -p nocache -c 20M -c 30M -c none "
                     "--memory %s --segments %s --timeline %s --timeline-every 3 "
                     "--segment-map %s %s",
                     budgets[b], files[b][0], files[b][1], files[b][2], tu_path(HAND));
        CU_ASSERT_EQUAL(rc, 0);
        if (rc)
            fprintf(stderr, "\n  --memory %s: %s\n", budgets[b], err);
        CU_ASSERT_EQUAL(tu_drop_timing(out), 0);
        report[b] = strdup(out);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(report[0], ",nocache,nocache,20971520,0,1,")); /* an OOM */
    for (int b = 1; b < 3; b++) {
        CU_ASSERT_STRING_EQUAL(report[0], report[b]);
        for (int k = 0; k < 3; k++) {
            char *x = tu_slurp(files[0][k], NULL), *y = tu_slurp(files[b][k], NULL);
            CU_ASSERT_FATAL(x && y);
            CU_ASSERT(strlen(x) > 100);
            CU_ASSERT_STRING_EQUAL(x, y);
            free(x);
            free(y);
        }
    }
    for (int b = 0; b < 3; b++) {
        free(report[b]);
        for (int k = 0; k < 3; k++)
            tu_rm(files[b][k]);
    }
}

static void caps_and_messages(void)
{
    /* 99,981 capacities; the step for at most 16384: (100000M - 20M) / 16383 = 6.1M -> 7M */
    CU_ASSERT_EQUAL(run("--sweep 20M:100000M:1M %s", tu_path(HAND)), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "gives 99981 capacities, more than the 16384 allowed"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "coarser step (7M or more)"));
    CU_ASSERT_EQUAL(run("-c 1M..16G/1M -c 1G %s", tu_path(HAND)), 2); /* 16385 in all */
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "16385 capacities from -c and --sweep"));
    CU_ASSERT_EQUAL(run("--memory 12XB %s", tu_path(HAND)), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--memory 12XB"));
    /* Standard input read once cannot feed two groups. */
    CU_ASSERT_EQUAL(run("-p bestfit -p nocache --memory 1 -"), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "standard input can be read only once"));
    /* One 1-byte request in a 40000 MiB segment: mincap's grid is 2 MiB .. 40000 MiB,
     * 20000 capacities; the smallest 2 MiB multiple giving <= 16384 is 4 MiB. */
    const char *t = tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 1\nfree 0\n");
    CU_ASSERT_EQUAL(run("mincap -p bestfit,segment=40000 %s", t), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "20000 capacities from 2.0 MiB to 39.06 GiB"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--step 4M"));
    if (!strstr(err, "--step 4M"))
        fprintf(stderr, "\n  %s\n", err);
    tu_rm(t);
}

/* Cuts `"decodes": N, "wall_s": X` out of mincap's JSON (the cost, not the answer). */
static void drop_cost(char *j)
{
    char *p;
    while ((p = strstr(j, "\"decodes\": ")) != NULL) {
        char *e = strchr(p, '}');
        CU_ASSERT_FATAL(e != NULL);
        memmove(p, e, strlen(e) + 1);
    }
}

/* mincap with --memory 1 runs one capacity per decode: bestfit's grid on handwritten.txt is
 * 26 MiB (peak requested) to 40 MiB (uncapped peak reserved), 8 capacities, so 1 + 8
 * decodes; the answers are the same as in batches of 64. */
static void mincap_budget_same(void)
{
    const char *args = "mincap -p bestfit -p torch -f json";
    CU_ASSERT_EQUAL_FATAL(run("%s %s", args, tu_path(HAND)), 0);
    char *a = strdup(out);
    CU_ASSERT_EQUAL_FATAL(run("%s --memory 1 %s", args, tu_path(HAND)), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"capacities\": 8, \"decodes\": 9,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "\"capacities\": 8, \"decodes\": 2,"));
    drop_cost(a);
    drop_cost(out);
    CU_ASSERT_STRING_EQUAL(a, out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"min_capacity\": 41943040"));
    free(a);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

/* 2,000 runs: all at once they take at least 20 KB each (33 KB measured since a run's
 * device starts its range table at 64 entries, 52-85 KB before), 40 MB, well past the
 * 16 MiB; with --memory 16M in flight they stay within one run's process plus 16 MiB and
 * 4 MiB for the report's 2,000 results. Skipped under sanitizers (their shadow memory). */
static void grouped_memory_bounded(void)
{
    if (SANITIZED) {
        fprintf(stderr, "\n  [skipped under a sanitizer]\n");
        return;
    }
    char b[1024], h[1024];
    snprintf(b, sizeof b, "%s", tu_allocsim());
    snprintf(h, sizeof h, "%s", tu_path(HAND));
    char *one[] = {b, "-q", "-p", "bestfit", "-c", "100M", h, NULL};
    char *all[] = {b, "-q", "-p", "bestfit", "--sweep", "100M:2099M:1M", h, NULL};
    char *grp[] = {b,          "-q",  "-p", "bestfit", "--sweep", "100M:2099M:1M",
                   "--memory", "16M", h,    NULL};
    long r1 = child_rss_kib(one), ra = child_rss_kib(all), rg = child_rss_kib(grp);
    fprintf(stderr, "\n  [peak RSS: 1 run %ld KiB, 2000 at once %ld KiB, 2000 in 16M %ld KiB]\n",
            r1, ra, rg);
    CU_ASSERT_FATAL(r1 > 0 && ra > 0 && rg > 0);
    CU_ASSERT(ra >= r1 + 2000 * 20000 / 1024);
    CU_ASSERT(rg <= r1 + 16 * 1024 + 4 * 1024);
}

CU_TestInfo test_budget[] = {
    {"as_engine_run_bytes: base, logs, per live allocation, no overflow", run_bytes_model},
    {"as_engine_scan: peak live allocations of a trace counted by hand", scan_peak_live},
    {"max_live stops the engine before the batch that passes it", max_live_stops},
    {"fresh streams are in the memory budget", streams_in_budget},
    {"groups: same report and logs at three budgets", groups_same_results},
    {"caps on sweeps, -c, mincap's grid; stdin and --memory messages", caps_and_messages},
    {"mincap: the same answers one capacity per decode", mincap_budget_same},
    {"2000 runs within --memory 16M (peak RSS)", grouped_memory_bounded},
    CU_TEST_INFO_NULL,
};
