/*
 * test_siterep.c - call sites in the reports (sim/siterep.c) through `allocsim run --sites`:
 * on a trace written here, the OOM's request site is the one the trace gives it, and the
 * rows of a walk add up to the run's reserved bytes (live + waste, the cache included);
 * on the shared ResNet snapshot, the OOM lines name code.
 */
#include <CUnit/CUnit.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The CSV's column k of a line. */
static void col(const char *line, int k, char *out, size_t n)
{
    for (int i = 0; i < k && line; i++)
        line = strchr(line, ',') ? strchr(line, ',') + 1 : NULL;
    size_t j = 0;
    while (line && *line && *line != ',' && *line != '\n' && j + 1 < n)
        out[j++] = *line++;
    out[j] = 0;
}

/* Column index of name in a CSV header line. */
static int col_of(const char *header, const char *name)
{
    char h[4096];
    snprintf(h, sizeof h, "%s", header);
    int k = 0;
    for (char *p = strtok(h, ",\n"); p; p = strtok(NULL, ",\n"), k++)
        if (strcmp(p, name) == 0)
            return k;
    return -1;
}

/* traces/samples/sites.txt: two sites, four allocations. */
static void siterep_small(void)
{
    static const unsigned site_of[] = {1, 2, 1, 2};
    static const uint64_t size_of[] = {1048576, 3145728, 1000000, 8388608};
    const char *t = tu_path("traces/samples/sites.txt"), *csv = tu_tmp(".csv");
    char cmd[1024], *out = malloc(1 << 16), *err = malloc(4096);
    /* nocache at 12 MiB runs out at alloc 3, bestfit (a 20 MiB first segment) at alloc 0;
     * both fit in 24 MiB. */
    snprintf(cmd, sizeof cmd, "run -q -p nocache -p bestfit -c 12MiB -c 24MiB -f csv --sites %s %s",
             csv, t);
    CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(cmd, out, 1 << 16, err, 4096), 0);
    int pr = col_of(out, "peak_reserved"), oa = col_of(out, "oom_alloc");
    CU_ASSERT_FATAL(pr >= 0 && oa >= 0);
    uint64_t reserved[4] = {0};
    long oom_alloc[4] = {-1, -1, -1, -1};
    const char *line = strchr(out, '\n') + 1;
    for (int r = 0; r < 4 && line && *line; r++) {
        char v[32];
        col(line, pr, v, sizeof v);
        reserved[r] = strtoull(v, NULL, 10);
        col(line, oa, v, sizeof v);
        oom_alloc[r] = atol(v);
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    CU_ASSERT_EQUAL(oom_alloc[0], 3);
    CU_ASSERT_EQUAL(oom_alloc[2], 0);
    FILE *f = fopen(csv, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char l[512];
    uint64_t sum[4] = {0}, blocks[4] = {0};
    int requests = 0;
    CU_ASSERT_PTR_NOT_NULL(fgets(l, sizeof l, f));
    CU_ASSERT_STRING_EQUAL(l, "run,when,by,rank,site,bytes,blocks,frame\n");
    while (fgets(l, sizeof l, f)) {
        char run[8], when[8], by[16], site[8], bytes[32], nb[16], frame[64];
        col(l, 0, run, sizeof run), col(l, 1, when, sizeof when), col(l, 2, by, sizeof by);
        col(l, 4, site, sizeof site), col(l, 5, bytes, sizeof bytes), col(l, 6, nb, sizeof nb);
        col(l, 7, frame, sizeof frame);
        int r = atoi(run);
        CU_ASSERT_FATAL(r >= 0 && r < 4);
        if (strcmp(when, "peak") == 0) {
            sum[r] += strtoull(bytes, NULL, 10);
            if (!strcmp(by, "live"))
                blocks[r] += strtoull(nb, NULL, 10);
        }
        if (!strcmp(by, "request")) { /* the site and size the trace gives that alloc */
            requests++;
            CU_ASSERT_FATAL(oom_alloc[r] >= 0 && oom_alloc[r] < 4);
            CU_ASSERT_EQUAL((unsigned)atoi(site), site_of[oom_alloc[r]]);
            CU_ASSERT_EQUAL(strtoull(bytes, NULL, 10), size_of[oom_alloc[r]]);
        }
        if (!strcmp(site, "1"))
            CU_ASSERT_STRING_EQUAL(frame, "a.py:1 f");
        if (!strcmp(site, "2"))
            CU_ASSERT_STRING_EQUAL(frame, "b.py:2 g");
    }
    fclose(f);
    CU_ASSERT_EQUAL(requests, 2);
    for (int r = 0; r < 4; r++) {
        if (!reserved[r])
            continue; /* bestfit at 12 MiB reserved nothing */
        /* live + waste over every peak row (the cache's too) = reserved, within a byte a
         * block: every site has a row (two sites, top 10) */
        CU_ASSERT(sum[r] <= reserved[r] && sum[r] + blocks[r] >= reserved[r]);
    }
    free(out);
    free(err);
}

/* `allocsim run -q OPTS --sites CSV TRACE`: its exit status, its output in out (64 KiB)
 * and the CSV's first 4,095 bytes in rows, terminated. */
static int run_sites(const char *opts, const char *trace, char *out, char *rows)
{
    const char *csv = tu_tmp(".csv");
    char cmd[1024], err[4096];
    snprintf(cmd, sizeof cmd, "run -q %s --sites %s %s", opts, csv, trace);
    int rc = tu_run_allocsim(cmd, out, 1 << 16, err, sizeof err);
    FILE *f = fopen(csv, "r");
    size_t n = f ? fread(rows, 1, 4095, f) : 0;
    rows[n] = 0;
    if (f)
        fclose(f);
    return rc;
}

/* --keep-going: the peak a run reaches after its OOM is the one its rows describe. nocache
 * at 12 MiB: 4 MiB (site 1) fits, 10 MiB (site 2) does not, 6 MiB (site 1) then does; at the
 * peak (10 MiB reserved, after the OOM) site 1 holds both blocks, exact segments (no waste):
 * live 10 MiB in 2 blocks, and nothing else. At the OOM only the first block was live. */
static void siterep_keep_going_peak(void)
{
    const char *t = tu_write_tmp(".txt", "allocsim-text 2\nframe 0 1 a.py f\nframe 1 2 b.py g\n"
                                         "site 1 0\nsite 2 1\nalloc 0 4194304 site=1\n"
                                         "alloc 1 10485760 site=2\nalloc 2 6291456 site=1\n");
    char *out = malloc(1 << 16), *rows = malloc(4096);
    CU_ASSERT_FATAL(out && rows);
    CU_ASSERT_EQUAL_FATAL(run_sites("-p nocache -c 12MiB --keep-going", t, out, rows), 0);
    CU_ASSERT_STRING_EQUAL(rows, "run,when,by,rank,site,bytes,blocks,frame\n"
                                 "0,peak,live,1,1,10485760,2,a.py:1 f\n"
                                 "0,oom,request,1,2,10485760,1,b.py:2 g\n"
                                 "0,oom,live,1,1,4194304,1,a.py:1 f\n");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "at its peak reserved (10.0 MiB):\n"
                                       "    live    10.0 MiB  #1 a.py:1 f\n"));
    free(out);
    free(rows);
}

/* A trace whose reserved memory grows with every allocation (nocache: a segment each):
 * the engine's peak walks run out of their budget long before the last ALLOC, the peak,
 * and the driver walks it in a pass of its own. 3,000 ALLOCs alternate 2 MiB at site 1
 * and 1 MiB at site 2, so at the peak site 1 holds 1,500 x 2 MiB live and site 2 1,500 x
 * 1 MiB; without that pass the peak's rows would be empty. */
static void siterep_growing_peak(void)
{
    size_t cap = 64 * 3000 + 128, len = 0;
    char *txt = malloc(cap), *out = malloc(1 << 16), *rows = malloc(4096);
    CU_ASSERT_FATAL(txt && out && rows);
    len += (size_t)snprintf(txt + len, cap - len,
                            "allocsim-text 2\nframe 0 1 a.py f\n"
                            "frame 1 2 b.py g\nsite 1 0\nsite 2 1\n");
    for (int i = 0; i < 3000; i++)
        len += (size_t)snprintf(txt + len, cap - len, "alloc %d %d site=%d\n", i,
                                i % 2 ? 1048576 : 2097152, 1 + i % 2);
    CU_ASSERT_EQUAL_FATAL(run_sites("-p nocache", tu_write_tmp(".txt", txt), out, rows), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(rows, "run,when,by,rank,site,bytes,blocks,frame\n"
                                        "0,peak,live,1,1,3145728000,1500,a.py:1 f\n"
                                        "0,peak,live,2,2,1572864000,1500,b.py:2 g\n"));
    free(txt);
    free(out);
    free(rows);
}

static void siterep_resnet_oom_lines(void)
{
    char *out = malloc(1 << 16), *err = malloc(4096);
    CU_ASSERT_EQUAL_FATAL(
        tu_run_allocsim(
            "run -q -p bestfit -c 8GiB tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst", out,
            1 << 16, err, 4096),
        0);
    /* The failing request (alloc 3452, 36.8 MiB) comes from a torchvision layer, and the
     * table names its site and those pinning the fragmented segments. */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "48 call sites"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "bestfit @ 8 GiB: OOM asking 36.8 MiB from #"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "torchvision/models/resnet.py:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "free, pinned by #"));
    /* a snapshot without frames says how to record them (with --sites) */
    const char *csv = tu_tmp(".csv");
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "run -q -p bestfit -c none --sites %s tests/data/torch-2.11-h200/moe_like.pickle.zst",
             csv);
    CU_ASSERT_EQUAL(tu_run_allocsim(cmd, out, 1 << 16, err, 4096), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "_record_memory_history(enabled=\"all\""));
    free(out);
    free(err);
}

static void siterep_info_peak(void)
{
    /* python3 on the zstd -d output: replaying alloc / free_completed entries, requested
     * bytes first peak at 8,604,832,144 (the trace's peak requested); the live bytes there,
     * summed by frames list, are largest for the stack through torchvision's
     * resnet.py:155 forward (924,850,176 B = 882.0 MiB), then resnet.py:154 (924,844,032). */
    char *out = malloc(1 << 16), *err = malloc(4096);
    CU_ASSERT_EQUAL_FATAL(
        tu_run_allocsim("info tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst", out, 1 << 16,
                        err, 4096),
        0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "call sites: 48 "));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "by bytes live at the peak requested:\n"
                                       "   882.0 MiB  torchvision/models/resnet.py:155 forward\n"
                                       "   882.0 MiB  torchvision/models/resnet.py:154 forward\n"));
    free(out);
    free(err);
}

/* --by-mark (sim/bymark.c) on the frames seed (fuzz/make_seeds.py, frames_seed): alloc k
 * at 100k us, 256 + k % 5 bytes, freed 50 us later; marks containing "step" are
 * START step#1 (event 201, after alloc 100) and END step#1 (event 1105, after free 550). */
static void siterep_by_mark(void)
{
    char *out = malloc(1 << 16), *err = malloc(4096);
    CU_ASSERT_EQUAL_FATAL(tu_run_allocsim("run -q -p bestfit -c none --by-mark=step "
                                          "fuzz/corpus/pickle/frames.pickle",
                                          out, 1 << 16, err, 4096),
                          0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "by mark \"step\": 2 marks, 3 intervals"));
    /* allocs 0..100, 101..550, 551..599; one block live at a time, at most 260 B; the one
     * segment reserved in interval 0 is kept by bestfit's cache: no calls after it */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "       0            0     101      260 B"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "       1          201     450      260 B"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "       2         1105      49      260 B"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "1/0  (before the first mark)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "0/0  START step#1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "0/0  END step#1\n"));
    free(out);
    free(err);
}

CU_TestInfo test_siterep[] = {
    {"by_mark", siterep_by_mark},
    {"info_peak", siterep_info_peak},
    {"small", siterep_small},
    {"resnet_oom_lines", siterep_resnet_oom_lines},
    {"keep_going_peak", siterep_keep_going_peak},
    {"growing_peak", siterep_growing_peak},
    CU_TEST_INFO_NULL,
};
