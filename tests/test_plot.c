/*
 * test_plot.c - `allocsim plot` and the gnuplot scripts in plots/: every chart kind drawn
 * from a small hand-made trace (or CSV), gnuplot exits 0, the file is a real PNG (signature
 * and IHDR size) or SVG (root element and size), and the CSV behind the chart holds the
 * rows the trace's content implies.
 *
 * The trace `ten` is ten 20 MiB allocations, then their ten frees. Under `torch` each
 * 20 MiB request gets a 20 MiB segment of its own (requests of at least 10 MiB get a
 * segment of their size) and frees only cache them: uncapped, reserved climbs to 200 MiB
 * and stays; at 100 MiB allocations 0..4 fit and allocation 5 fails (100 + 20 > 100, and
 * nothing is free to release).
 */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trace.h"
#include "util.h"

#define MiB (1ull << 20)

static void write_ten(char path[static 1024])
{
    snprintf(path, 1024, "%s", tu_tmp(".zst"));
    as_meta meta = {0};
    as_trace_writer *w = NULL;
    as_trace_error err;
    CU_ASSERT_FATAL(as_trace_writer_open(path, AS_FMT_NATIVE, &meta, &w, &err) == 0);
    for (uint64_t i = 0; i < 20; i++) {
        as_event ev = {.time_us = AS_TIME_NONE};
        ev.op = i < 10 ? AS_OP_ALLOC : AS_OP_FREE;
        ev.id = i % 10;
        ev.size = i < 10 ? 20 * MiB : 0;
        CU_ASSERT_FATAL(as_trace_write(w, &ev) == 0);
    }
    CU_ASSERT_FATAL(as_trace_writer_close(w, &err) == 0);
}

/* A fresh directory for the CSV files a chart was drawn from. */
static void tmp_dir(char dir[static 1024])
{
    snprintf(dir, 1024, "%s", tu_tmp(".d"));
    unlink(dir);
    CU_ASSERT_FATAL(mkdir(dir, 0755) == 0);
}

static void rm_dir(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CU_ASSERT(system(cmd) == 0);
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* 0 when path is a PNG whose IHDR says w x h. */
static int png_size(const char *path, uint32_t *w, uint32_t *h)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char b[24];
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    if (n != sizeof b || memcmp(b, sig, 8) || be32(b + 8) != 13 || memcmp(b + 12, "IHDR", 4))
        return -1;
    *w = be32(b + 16);
    *h = be32(b + 20);
    return 0;
}

/* 0 when path is an SVG document whose root <svg> element has width and height. */
static int svg_size(const char *path, unsigned *w, unsigned *h)
{
    static char buf[4096];
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *s = strstr(buf, "<svg");
    if (!s)
        return -1;
    char *end = strchr(s, '>');
    char *ws = strstr(s, "width=\""), *hs = strstr(s, "height=\"");
    if (!end || !ws || !hs || ws > end || hs > end)
        return -1;
    *w = (unsigned)strtoul(ws + 7, NULL, 10);
    *h = (unsigned)strtoul(hs + 8, NULL, 10);
    /* The document must be whole: its last tag closes the root. */
    f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, -64, SEEK_END);
    n = fread(buf, 1, 63, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, "</svg>") ? 0 : -1;
}

/* Data rows of a CSV file (lines after the header); with field/value, only the rows whose
 * 1-based field equals value (fields are split at commas; quoted fields are not needed
 * for the columns tested here). */
static long csv_rows(const char *path, int field, const char *value)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[2048];
    long n = 0, lineno = 0;
    while (fgets(line, sizeof line, f)) {
        if (lineno++ == 0)
            continue;
        if (!field) {
            n++;
            continue;
        }
        char *p = line;
        for (int i = 1; i < field && p; i++) {
            p = strchr(p, ',');
            if (p)
                p++;
        }
        if (!p)
            continue;
        size_t len = strcspn(p, ",\n");
        if (len == strlen(value) && strncmp(p, value, len) == 0)
            n++;
    }
    fclose(f);
    return n;
}

static int run(const char *fmt, const char *a, const char *b, const char *c, const char *d)
{
    char args[8192], err[4096];
    snprintf(args, sizeof args, fmt, a, b, c, d);
    int rc = tu_run_allocsim(args, NULL, 0, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\n  allocsim %s\n  -> %d: %s\n", args, rc, err);
    return rc;
}

static void plot_timeline_png(void)
{
    char trace[1024], dir[1024], png[1100], p[1100];
    write_ten(trace);
    tmp_dir(dir);
    snprintf(png, sizeof png, "%s/t.png", dir);
    CU_ASSERT_EQUAL_FATAL(run("plot timeline -q -p torch -c none -c 100MiB --every 1 "
                              "--size 900x600 --keep '%s' -o '%s' '%s'%s",
                              dir, png, trace, ""),
                          0);
    uint32_t w = 0, h = 0;
    CU_ASSERT_EQUAL(png_size(png, &w, &h), 0);
    CU_ASSERT_EQUAL(w, 900);
    CU_ASSERT_EQUAL(h, 600);
    /* Sampled at every event: run 0 has all 20 events, run 1 events 0..4 and its OOM at
     * event 5, where it stops. */
    snprintf(p, sizeof p, "%s/timeline.csv", dir);
    CU_ASSERT_EQUAL(csv_rows(p, 0, NULL), 26);
    CU_ASSERT_EQUAL(csv_rows(p, 1, "0"), 20);
    CU_ASSERT_EQUAL(csv_rows(p, 1, "1"), 6);
    snprintf(p, sizeof p, "%s/runs.csv", dir);
    CU_ASSERT_EQUAL(csv_rows(p, 0, NULL), 2);
    CU_ASSERT_EQUAL(csv_rows(p, 10, "5"), 1); /* oom_alloc of the capped run */

    /* The same CSV drawn by hand, as the scripts' headers say. */
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "gnuplot -e \"in='%s/timeline.csv'; runs='%s/runs.csv'; out='%s/h.svg'\" "
             "'%s' 2>/dev/null",
             dir, dir, dir, tu_path("plots/timeline.gp"));
    int st = system(cmd);
    CU_ASSERT(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    unsigned sw = 0, sh = 0;
    snprintf(p, sizeof p, "%s/h.svg", dir);
    CU_ASSERT_EQUAL(svg_size(p, &sw, &sh), 0);
    CU_ASSERT_EQUAL(sw, 1200); /* common.gp's default */
    CU_ASSERT_EQUAL(sh, 700);
    rm_dir(dir);
    tu_rm(trace);
}

/* A chart cut short (a full disk; here past ulimit -f, which gnuplot inherits with
 * SIGXFSZ ignored: its writes fail and it still exits 0): refused with exit 1, the old
 * file kept and no temporary file left, where the cut PNG or SVG was renamed over it. */
static void plot_cut_short(void)
{
    char trace[1024], dir[1024], out[1100], errf[1100], cmd[4096];
    const char *bin = tu_allocsim();
    write_ten(trace);
    tmp_dir(dir);
    snprintf(errf, sizeof errf, "%s/err", dir);
    for (int i = 0; i < 2; i++) {
        snprintf(out, sizeof out, "%s/c.%s", dir, i ? "svg" : "png");
        FILE *f = fopen(out, "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fputs("old chart\n", f);
        fclose(f);
        snprintf(cmd, sizeof cmd,
                 "ulimit -f 8; '%s' plot timeline -q -p torch -c none -c 100MiB --every 1 "
                 "--size 900x600 -o '%s' '%s' 2>'%s'",
                 bin, out, trace, errf);
        int st = system(cmd);
        CU_ASSERT(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1);
        size_t n = 0;
        char *t = tu_slurp(out, &n), *e = tu_slurp(errf, NULL);
        CU_ASSERT(t && n == 10 && !memcmp(t, "old chart\n", 10));
        CU_ASSERT(e && strstr(e, "incomplete") && strstr(e, out));
        free(t);
        free(e);
        unlink(out);
    }
    unlink(errf);
    DIR *d = opendir(dir);
    int left = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        left += de->d_name[0] != '.' || strncmp(de->d_name, ".tmp-", 5) == 0;
    if (d)
        closedir(d);
    CU_ASSERT_EQUAL(left, 0);
    rm_dir(dir);
    tu_rm(trace);
}

static void plot_segments_svg(void)
{
    char trace[1024], dir[1024], svg[1100], p[1100];
    write_ten(trace);
    tmp_dir(dir);
    snprintf(svg, sizeof svg, "%s/s.svg", dir);
    CU_ASSERT_EQUAL_FATAL(run("plot segments -q -p torch -c 100MiB --size 1000x640 --keep '%s' "
                              "-o '%s' '%s'%s",
                              dir, svg, trace, ""),
                          0);
    unsigned w = 0, h = 0;
    CU_ASSERT_EQUAL(svg_size(svg, &w, &h), 0);
    CU_ASSERT_EQUAL(w, 1000);
    CU_ASSERT_EQUAL(h, 640);
    /* At the peak (event 4, 100 MiB) and at the OOM: five 20 MiB segments, each one
     * allocated block. */
    snprintf(p, sizeof p, "%s/segmap.csv", dir);
    CU_ASSERT_EQUAL(csv_rows(p, 0, NULL), 10);
    CU_ASSERT_EQUAL(csv_rows(p, 2, "peak"), 5);
    CU_ASSERT_EQUAL(csv_rows(p, 2, "oom"), 5);
    CU_ASSERT_EQUAL(csv_rows(p, 8, "allocated"), 10);
    CU_ASSERT_EQUAL(csv_rows(p, 7, "20971520"), 10);
    CU_ASSERT_EQUAL(csv_rows(p, 11, "4"), 5); /* the peak map's event */
    CU_ASSERT_EQUAL(csv_rows(p, 11, "5"), 5); /* the OOM's event */

    /* A run the map does not hold: gnuplot's message, exit 1. */
    char bad[4000], err[4096];
    snprintf(bad, sizeof bad, "plot segments --csv '%s' --run 7 -o '%s/x.png'", p, dir);
    CU_ASSERT_EQUAL(tu_run_allocsim(bad, NULL, 0, err, sizeof err), 1);
    CU_ASSERT(strstr(err, "no rows for run 7") != NULL);

    /* Redrawn from the kept CSV in the wrapped layout (rows of equal bytes): the blocks
     * that straddle rows are drawn in pieces. */
    char runs[1100], png[1100], args[4000];
    snprintf(runs, sizeof runs, "%s/runs.csv", dir);
    snprintf(png, sizeof png, "%s/w.png", dir);
    snprintf(args, sizeof args,
             "plot segments --csv '%s' --runs '%s' --when peak --layout wrap -o '%s'", p, runs,
             png);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, NULL, 0, NULL, 0), 0);
    uint32_t pw = 0, ph = 0;
    CU_ASSERT_EQUAL(png_size(png, &pw, &ph), 0);
    CU_ASSERT_EQUAL(pw, 1200);
    rm_dir(dir);
    tu_rm(trace);
}

/* A block freed by the program while a stream still uses it (FREE_REQ, no FREE yet) is
 * "pending" in the map. Three 20 MiB allocations fill a 60 MiB device, the second is
 * FREE_REQ'd, and a fourth cannot reuse it (torch keeps it until the FREE) nor release its
 * segment: OOM at allocation 3, with blocks allocated, pending, allocated. */
static void plot_segments_pending(void)
{
    char trace[1024], dir[1024], png[1100], p[1100];
    snprintf(trace, sizeof trace, "%s", tu_tmp(".zst"));
    as_meta meta = {0};
    as_trace_writer *wr = NULL;
    as_trace_error err;
    CU_ASSERT_FATAL(as_trace_writer_open(trace, AS_FMT_NATIVE, &meta, &wr, &err) == 0);
    const as_event evs[] = {
        {.op = AS_OP_ALLOC, .id = 0, .size = 20 * MiB, .time_us = AS_TIME_NONE},
        {.op = AS_OP_ALLOC, .id = 1, .size = 20 * MiB, .time_us = AS_TIME_NONE},
        {.op = AS_OP_ALLOC, .id = 2, .size = 20 * MiB, .time_us = AS_TIME_NONE},
        {.op = AS_OP_FREE_REQ, .id = 1, .time_us = AS_TIME_NONE},
        {.op = AS_OP_ALLOC, .id = 3, .size = 20 * MiB, .time_us = AS_TIME_NONE},
        {.op = AS_OP_FREE, .id = 1, .time_us = AS_TIME_NONE},
    };
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
        CU_ASSERT_FATAL(as_trace_write(wr, &evs[i]) == 0);
    CU_ASSERT_FATAL(as_trace_writer_close(wr, &err) == 0);
    tmp_dir(dir);
    snprintf(png, sizeof png, "%s/p.png", dir);
    CU_ASSERT_EQUAL_FATAL(
        run("plot segments -q -p torch -c 60MiB --keep '%s' -o '%s' '%s'%s", dir, png, trace, ""),
        0);
    uint32_t w = 0, h = 0;
    CU_ASSERT_EQUAL(png_size(png, &w, &h), 0);
    snprintf(p, sizeof p, "%s/segmap.csv", dir);
    CU_ASSERT_EQUAL(csv_rows(p, 2, "peak"), 3); /* at event 2: three allocated blocks */
    CU_ASSERT_EQUAL(csv_rows(p, 2, "oom"), 3);
    CU_ASSERT_EQUAL(csv_rows(p, 8, "pending"), 1);
    CU_ASSERT_EQUAL(csv_rows(p, 8, "allocated"), 5);
    CU_ASSERT_EQUAL(csv_rows(p, 11, "4"), 3); /* the OOM is event 4 */
    CU_ASSERT_EQUAL(csv_rows(p, 12, "3"), 3); /* ... allocation 3 */
    CU_ASSERT_EQUAL(csv_rows(p, 13, "1"), 2); /* allocation 1: allocated, then pending */

    rm_dir(dir);
    tu_rm(trace);
}

/* The non-monotone trace of test_mincap.c: [220, 248] MiB fail above the minimum, 180. */
static void plot_capacity_png(void)
{
    static const uint64_t ev[][2] = {{0, 100}, {1, 0}, {0, 120}, {0, 30}, {1, 1}, {0, 150}};
    char trace[1024], dir[1024], png[1100], p[1100];
    snprintf(trace, sizeof trace, "%s", tu_tmp(".zst"));
    as_meta meta = {0};
    as_trace_writer *wr = NULL;
    as_trace_error err;
    CU_ASSERT_FATAL(as_trace_writer_open(trace, AS_FMT_NATIVE, &meta, &wr, &err) == 0);
    uint64_t next = 0;
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        as_event e = {.time_us = AS_TIME_NONE};
        e.op = ev[i][0] ? AS_OP_FREE : AS_OP_ALLOC;
        e.id = ev[i][0] ? ev[i][1] : next++;
        e.size = ev[i][0] ? 0 : ev[i][1] * MiB;
        CU_ASSERT_FATAL(as_trace_write(wr, &e) == 0);
    }
    CU_ASSERT_FATAL(as_trace_writer_close(wr, &err) == 0);
    tmp_dir(dir);
    snprintf(png, sizeof png, "%s/c.png", dir);
    CU_ASSERT_EQUAL_FATAL(
        run("plot capacity -q -p torch --keep '%s' -o '%s' '%s'%s", dir, png, trace, ""), 0);
    uint32_t w = 0, h = 0;
    CU_ASSERT_EQUAL(png_size(png, &w, &h), 0);
    CU_ASSERT_EQUAL(w, 1200);
    CU_ASSERT_EQUAL(h, 430); /* capacity.gp: 200 + 230 per policy */
    /* 180..370 MiB in 2 MiB steps, 15 of them failing, and 116..178 MiB below the minimum
     * (torch enforces its limit itself, so mincap runs 64 MiB under it: all fail). */
    snprintf(p, sizeof p, "%s/sweep.csv", dir);
    CU_ASSERT_EQUAL(csv_rows(p, 0, NULL), 128);
    CU_ASSERT_EQUAL(csv_rows(p, 7, "0"), 15 + 32);  /* completed */
    CU_ASSERT_EQUAL(csv_rows(p, 10, "3"), 15 + 15); /* above the minimum, and 150..178 MiB */

    /* The same chart from `run --sweep` CSV: 180..260 MiB, 41 capacities, 15 failing. */
    snprintf(png, sizeof png, "%s/c2.svg", dir);
    CU_ASSERT_EQUAL_FATAL(run("plot capacity -q -p torch --sweep 180MiB:260MiB:2MiB --keep '%s' "
                              "-o '%s' '%s'%s",
                              dir, png, trace, ""),
                          0);
    CU_ASSERT_EQUAL(csv_rows(p, 0, NULL), 41);
    CU_ASSERT_EQUAL(csv_rows(p, 7, "0"), 15);
    unsigned sw, sh;
    CU_ASSERT_EQUAL(svg_size(png, &sw, &sh), 0);
    rm_dir(dir);
    tu_rm(trace);
}

static void plot_compare_png(void)
{
    char t1[1024], t2[1024], dir[1024], png[1100], p[1100];
    write_ten(t1);
    write_ten(t2);
    tmp_dir(dir);
    snprintf(png, sizeof png, "%s/k.png", dir);
    CU_ASSERT_EQUAL_FATAL(
        run("plot compare -q -p torch -p bestfit --keep '%s' -o '%s' '%s' '%s'", dir, png, t1, t2),
        0);
    uint32_t w = 0, h = 0;
    CU_ASSERT_EQUAL(png_size(png, &w, &h), 0);
    CU_ASSERT(w >= 1000);
    CU_ASSERT_EQUAL(h, 900);
    /* Two traces times two policies. */
    snprintf(p, sizeof p, "%s/report.csv", dir);
    CU_ASSERT_EQUAL(csv_rows(p, 0, NULL), 4);
    CU_ASSERT_EQUAL(csv_rows(p, 5, "torch"), 2);
    CU_ASSERT_EQUAL(csv_rows(p, 5, "bestfit"), 2);
    rm_dir(dir);
    tu_rm(t1);
    tu_rm(t2);
}

/* validation draws `allocsim compare -f csv` output; three runs, one off by a segment. */
static void plot_validation_png(void)
{
    char dir[1024], png[1100], csv[1100];
    tmp_dir(dir);
    snprintf(csv, sizeof csv, "%s/v.csv", dir);
    FILE *f = fopen(csv, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("run,policy,capacity,pred_oom_alloc,meas_oom_alloc,oom_match,pred_peak_reserved,"
          "meas_peak_reserved,peak_error,peak_match,segments\n"
          "0,\"torch\",none,-,-,1,209715200,209715200,0,1,\"\"\n"
          "1,\"torch,maxsplit=128\",104857600,5,5,1,104857600,104857600,0,1,\"\"\n"
          "2,\"bestfit\",104857600,5,6,0,104857600,102760448,0.0204,0,\"\"\n",
          f);
    fclose(f);
    snprintf(png, sizeof png, "%s/v.png", dir);
    CU_ASSERT_EQUAL(
        run("plot validation -q --csv '%s' --title 'three runs' -o '%s'%s%s", csv, png, "", ""), 0);
    uint32_t w = 0, h = 0;
    CU_ASSERT_EQUAL(png_size(png, &w, &h), 0);
    CU_ASSERT_EQUAL(w, 1300);
    CU_ASSERT_EQUAL(h, 680);
    rm_dir(dir);
}

static void plot_usage(void)
{
    char err[4096];
    CU_ASSERT_EQUAL(tu_run_allocsim("plot timeline --csv x.csv", NULL, 0, err, sizeof err), 2);
    CU_ASSERT(strstr(err, "-o") != NULL);
    CU_ASSERT_EQUAL(tu_run_allocsim("plot timeline --csv x.csv -o x.jpg", NULL, 0, err, sizeof err),
                    2);
    CU_ASSERT_EQUAL(tu_run_allocsim("plot pie -o x.png", NULL, 0, err, sizeof err), 2);
    CU_ASSERT(strstr(err, "pie") != NULL);
    CU_ASSERT_EQUAL(tu_run_allocsim("plot validation -o x.png", NULL, 0, err, sizeof err), 2);
    /* A missing input is bad input (1), named before gnuplot runs, not a usage error. */
    char png[1024], args[1100];
    snprintf(png, sizeof png, "%s", tu_tmp(".png"));
    snprintf(args, sizeof args, "plot compare -q --csv /nonexistent/r.csv -o %s", png);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, NULL, 0, err, sizeof err), 1);
    CU_ASSERT(strstr(err, "/nonexistent/r.csv: cannot read") != NULL);
    tu_rm(png);
}

/* Writes text to a new temporary CSV, whose path goes to path. */
static void write_csv(char path[static 1024], const char *text)
{
    snprintf(path, 1024, "%s", tu_write_tmp(".csv", text));
}

/* Expects `plot KIND --csv CSV [--runs RUNS]` to exit 1 before drawing, with want in its
 * message and no chart left behind (tu_tmp's name is made afresh, then removed). */
static void expect_bad(const char *kind, const char *csv, const char *runs, const char *want)
{
    char png[1024], args[4000], err[4096];
    snprintf(png, sizeof png, "%s", tu_tmp(".png"));
    tu_rm(png);
    snprintf(args, sizeof args, "plot %s -q --csv '%s'%s%s%s -o '%s'", kind, csv,
             runs ? " --runs '" : "", runs ? runs : "", runs ? "'" : "", png);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, NULL, 0, err, sizeof err), 1);
    if (!strstr(err, want))
        fprintf(stderr, "\n  allocsim %s\n  said: %s\n  wanted: %s\n", args, err, want);
    CU_ASSERT(strstr(err, want) != NULL);
    CU_ASSERT(strstr(err, "gnuplot") == NULL);
    CU_ASSERT_EQUAL(access(png, F_OK), -1);
}

/* A CSV that is not the one a chart reads is named with its line and what is wrong, for
 * every kind, before gnuplot runs (it said "undefined variable: STATS_max" of its own
 * script for a timeline without a run column). */
static void plot_bad_csv(void)
{
    char other[1024], ragged[1024], empty[1024], header[1024], tl[1024];
    write_csv(other, "a,b\n1,2\n");
    write_csv(ragged, "run,event,alloc,time_us,requested,allocated,reserved\n"
                      "0,1,1,0,10,10,20\n0,2,2,\"5,6\",10,10,20\n0,3,3,0,10,10\n");
    write_csv(empty, "");
    write_csv(header, "run,event,alloc,time_us,requested,allocated,reserved\n");
    write_csv(tl, "run,event,alloc,time_us,requested,allocated,reserved\n0,1,1,0,10,10,20\n");
    expect_bad("timeline", other, NULL, "line 1: no column 'run' (a timeline");
    /* a quoted comma is inside one field: line 3 is whole, line 4 has a field short */
    expect_bad("timeline", ragged, NULL, "line 4: 6 fields where the header has 7");
    expect_bad("timeline", empty, NULL, "empty file");
    expect_bad("timeline", header, NULL, "a header and no data rows");
    expect_bad("timeline", tl, other, "line 1: no column 'file' (a run report");
    expect_bad("compare", other, NULL, "no column 'file'");
    expect_bad("capacity", other, NULL, "no column 'file' (a sweep");
    expect_bad("segments", other, NULL, "no column 'run' (a segment map");
    expect_bad("validation", other, NULL, "no column 'policy' (a validation table");
    tu_rm(other);
    tu_rm(ragged);
    tu_rm(empty);
    tu_rm(header);
    tu_rm(tl);
}

CU_TestInfo test_plot[] = {
    {"timeline_png", plot_timeline_png},
    {"cut_short", plot_cut_short},
    {"segments_svg", plot_segments_svg},
    {"segments_pending", plot_segments_pending},
    {"capacity_png", plot_capacity_png},
    {"compare_png", plot_compare_png},
    {"validation_png", plot_validation_png},
    {"usage", plot_usage},
    {"bad_csv", plot_bad_csv},
    CU_TEST_INFO_NULL,
};
