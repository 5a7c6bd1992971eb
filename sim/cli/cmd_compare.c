/*
 * cmd_compare.c - `allocsim compare`: predicted (simulated) against measured (real GPU) runs.
 *
 *   allocsim compare [-f table|csv] [--segments PRED.csv MEAS.csv] PREDICTED.json MEASURED.json
 *
 * Both files are allocsim JSON reports (`allocsim -f json`, allocsim-replay, torch_replay.py).
 * Runs are paired by their index in the report: the validation scripts write predictions
 * and measurements in the same order, and a pair whose capacities differ is flagged. For
 * each pair it prints the OOM allocation ordinal on both sides, peak reserved and its
 * relative error, and, with --segments, whether the device event sequences agree as
 * (alloc, action, size) rows, with the first difference. Addresses are not compared:
 * the driver places segments its own way (replay/PLACEMENT.md).
 *
 * Exit status: 0 when it compared (differences are results), 1 bad input, 2 usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "jsonin.h"
#include "report.h"

/* A report: a JSON object with a "runs" array (jsonin.h reads it). */
static int load_report(const char *path, json_t **root)
{
    char err[400];
    if (as_json_load(path, root, err, sizeof err)) {
        as_cli_msg("%s", err);
        return -1;
    }
    if (!json_is_array(json_object_get(*root, "runs"))) {
        as_cli_msg("%s: not an allocsim report (no \"runs\" array)", path);
        json_decref(*root);
        *root = NULL;
        return -1;
    }
    return 0;
}

/* ---- --segments CSV --------------------------------------------------------------------- */

typedef struct seg_row {
    uint64_t run, alloc, size;
    char action[16];
} seg_row;

typedef struct seg_log {
    seg_row *r;
    size_t n, cap;
} seg_log;

static int load_segments(const char *path, seg_log *log)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        as_cli_msg("%s: %s", path, strerror(errno));
        return -1;
    }
    char line[512];
    uint64_t ln = 0;
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (ln == 1 && strncmp(line, "run,", 4) == 0)
            continue;
        if (line[0] == '\n' || line[0] == 0)
            continue;
        seg_row s = {0};
        unsigned long long run, alloc, event, addr, size;
        char act[16];
        if (sscanf(line, "%llu,%llu,%llu,%15[a-z_],%llu,%llu", &run, &alloc, &event, act, &addr,
                   &size) != 6) {
            as_cli_msg("%s: line %" PRIu64 ": expected run,alloc,event,action,addr,size", path, ln);
            rc = -1;
            break;
        }
        (void)event;
        (void)addr;
        s.run = run;
        s.alloc = alloc;
        s.size = size;
        snprintf(s.action, sizeof s.action, "%s", act);
        if (log->n == log->cap) {
            size_t nc = log->cap ? log->cap * 2 : 1024;
            seg_row *nr = realloc(log->r, nc * sizeof *nr);
            if (!nr) {
                as_cli_msg("%s: out of memory", path);
                rc = -1;
                break;
            }
            log->r = nr;
            log->cap = nc;
        }
        log->r[log->n++] = s;
    }
    fclose(f);
    return rc;
}

/* The rows of one run, in file order, as pointers (*out is malloc'd; NULL when none). */
static int run_rows(const seg_log *log, uint64_t run, const seg_row ***out, size_t *n)
{
    size_t k = 0;
    *out = NULL;
    *n = 0;
    for (size_t i = 0; i < log->n; i++)
        k += log->r[i].run == run;
    if (!k)
        return 0;
    if (!(*out = malloc(k * sizeof **out)))
        return -1;
    for (size_t i = 0; i < log->n; i++)
        if (log->r[i].run == run)
            (*out)[(*n)++] = &log->r[i];
    return 0;
}

/* Index of the first row where the two runs' (alloc, action, size) differ, SIZE_MAX when
 * the sequences are equal, or SIZE_MAX - 1 when out of memory. *x and *y get the rows
 * there (NULL past the end). */
static size_t first_diff(const seg_log *pl, const seg_log *ml, uint64_t run, const seg_row **x,
                         const seg_row **y, size_t *np, size_t *nm)
{
    const seg_row **p, **m;
    size_t k = SIZE_MAX - 1;
    *x = *y = NULL;
    if (run_rows(pl, run, &p, np))
        return k;
    if (run_rows(ml, run, &m, nm)) {
        free(p);
        return k;
    }
    for (k = 0; k < *np && k < *nm; k++)
        if (p[k]->alloc != m[k]->alloc || p[k]->size != m[k]->size ||
            strcmp(p[k]->action, m[k]->action) != 0)
            break;
    if (k == *np && k == *nm) {
        k = SIZE_MAX;
    } else {
        *x = k < *np ? p[k] : NULL;
        *y = k < *nm ? m[k] : NULL;
    }
    free(p);
    free(m);
    return k;
}

/* ---- the command ------------------------------------------------------------------------- */

/* An integer that may be absent: "-" in the table, -1 in CSV (sim/REPORT.md). */
static void fmt_opt(char *buf, size_t n, int have, uint64_t v, int csv)
{
    if (have > 0)
        snprintf(buf, n, "%" PRIu64, v);
    else
        snprintf(buf, n, "%s", csv ? "-1" : "-");
}

static void fmt_row(char *buf, size_t n, const seg_row *r)
{
    if (r)
        snprintf(buf, n, "[%" PRIu64 " %s %" PRIu64 "]", r->alloc, r->action, r->size);
    else
        snprintf(buf, n, "[end]");
}

/* The device-events cell of run `run`: "same (N)" (returns 1) or where the two sequences
 * first differ (returns 0); -1 when out of memory. */
static int seg_cell(const seg_log *pl, const seg_log *ml, uint64_t run, char *buf, size_t n)
{
    const seg_row *x, *y;
    size_t np, nm;
    size_t k = first_diff(pl, ml, run, &x, &y, &np, &nm);
    if (k == SIZE_MAX - 1)
        return -1;
    if (k == SIZE_MAX) {
        snprintf(buf, n, "same (%zu)", np);
        return 1;
    }
    char rx[64], ry[64];
    fmt_row(rx, sizeof rx, x);
    fmt_row(ry, sizeof ry, y);
    snprintf(buf, n, "differ at #%zu of %zu/%zu: %s vs %s", k, np, nm, rx, ry);
    return 0;
}

/* The command line: -1 to go on (the options and the two files filled), else the exit
 * status (--help, or a usage error). */
static int compare_args(int argc, char **argv, const char **fmt, const char **pseg,
                        const char **mseg, const char *files[2])
{
    int nfiles = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: allocsim compare [-f table|csv] [--segments PRED.csv MEAS.csv] "
                   "PREDICTED.json MEASURED.json\n"
                   "Pairs the runs of two JSON reports by index and prints, per run, the OOM\n"
                   "allocation ordinal and peak reserved on both sides, the peak's relative\n"
                   "error, and whether the device event sequences agree.\n");
            return AS_EXIT_OK;
        } else if (strcmp(argv[i], "-f") == 0 && i + 1 < argc) {
            *fmt = argv[++i];
            if (strcmp(*fmt, "table") && strcmp(*fmt, "csv"))
                return as_cli_usage("compare", "-f %s: table or csv", *fmt);
        } else if (strcmp(argv[i], "--segments") == 0 && i + 2 < argc) {
            *pseg = argv[++i];
            *mseg = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return as_cli_usage("compare", "unknown or incomplete option '%s'", argv[i]);
        } else if (nfiles < 2) {
            files[nfiles++] = argv[i];
        } else {
            return as_cli_usage("compare", "too many files: '%s'", argv[i]);
        }
    }
    if (nfiles != 2)
        return as_cli_usage("compare", "needs PREDICTED.json and MEASURED.json");
    return -1;
}

/* The counts of the summary line. */
typedef struct tally {
    size_t oom_same, peak_same, seg_same, bad;
} tally;

/* Run i of both reports: its row (csv or table), its counts into t. 0, or -1 after the
 * message. */
static int compare_run(size_t i, const json_t *p, const json_t *m, const char *const files[2],
                       int csv, const seg_log *pl, const seg_log *ml, tally *t)
{
    int pseg = pl != NULL;
    uint64_t pcap = 0, mcap = 0, po = 0, mo = 0, pp = 0, mp = 0;
    int hpc = as_json_u64(p, "capacity", &pcap), hmc = as_json_u64(m, "capacity", &mcap);
    int hpo = as_json_u64(p, "oom_alloc", &po), hmo = as_json_u64(m, "oom_alloc", &mo);
    int hpp = as_json_u64(p, "peak_reserved", &pp);
    int hmp = as_json_u64(m, "peak_reserved", &mp);
    if (hpc < 0 || hmc < 0 || hpo < 0 || hmo < 0 || hpp < 0 || hmp < 0) {
        as_cli_msg("%s/%s: run %zu: capacity, oom_alloc and peak_reserved must be "
                   "non-negative integers or null",
                   files[0], files[1], i);
        return -1;
    }
    const char *policy = json_string_value(json_object_get(p, "policy"));
    if (!policy)
        policy = "?";
    if (hpc != hmc || pcap != mcap) {
        as_cli_msg("warning: run %zu: capacities differ (%" PRIu64 " predicted, %" PRIu64
                   " measured)",
                   i, hpc > 0 ? pcap : 0, hmc > 0 ? mcap : 0);
        t->bad++;
    }
    int osame = hpo == hmo && (hpo == 0 || po == mo);
    int psame = hpp > 0 && hmp > 0 && pp == mp;
    double err = hpp > 0 && hmp > 0 && mp ? ((double)pp - (double)mp) / (double)mp : NAN;
    t->oom_same += osame;
    t->peak_same += psame;
    char cap[24], a[24], b[24], c[24], d[24], segs[320] = "";
    if (csv)
        fmt_opt(cap, sizeof cap, hpc, pcap, csv);
    else
        as_fmt_capacity(cap, sizeof cap, hpc > 0 ? pcap : AS_CAPACITY_NONE);
    fmt_opt(a, sizeof a, hpo, po, csv);
    fmt_opt(b, sizeof b, hmo, mo, csv);
    fmt_opt(c, sizeof c, hpp, pp, csv);
    fmt_opt(d, sizeof d, hmp, mp, csv);
    if (pseg) {
        int same = seg_cell(pl, ml, i, segs, sizeof segs);
        if (same < 0) {
            as_cli_msg("out of memory");
            return -1;
        }
        t->seg_same += (size_t)same;
    }
    if (csv) {
        printf("%zu,", i);
        as_report_csv_str(stdout, policy);
        printf(",%s,%s,%s,%d,%s,%s,%.9f,%d,", cap, a, b, osame, c, d, err, psame);
        as_report_csv_str(stdout, segs);
        putchar('\n');
    } else
        printf("%-4zu %-34.34s %14s %9s %9s %5s %14s %14s %7.3f%%  %s\n", i, policy, cap, a, b,
               osame ? "yes" : "NO", c, d, 100 * err, segs);
    return 0;
}

int as_cmd_compare(int argc, char **argv)
{
    const char *fmt = "table", *pseg = NULL, *mseg = NULL, *files[2] = {NULL, NULL};
    int st = compare_args(argc, argv, &fmt, &pseg, &mseg, files);
    if (st >= 0)
        return st;

    json_t *pj = NULL, *mj = NULL;
    seg_log pl = {0}, ml = {0};
    int rc = AS_EXIT_INPUT;
    if (load_report(files[0], &pj) || load_report(files[1], &mj))
        goto out;
    if (pseg && (load_segments(pseg, &pl) || load_segments(mseg, &ml)))
        goto out;
    const json_t *pr = json_object_get(pj, "runs"), *mr = json_object_get(mj, "runs");
    size_t npr = json_array_size(pr), nmr = json_array_size(mr);
    size_t n = npr < nmr ? npr : nmr;
    int csv = strcmp(fmt, "csv") == 0;
    if (npr != nmr)
        as_cli_msg("warning: %zu predicted runs, %zu measured: comparing the first %zu", npr, nmr,
                   n);
    if (csv)
        printf("run,policy,capacity,pred_oom_alloc,meas_oom_alloc,oom_match,"
               "pred_peak_reserved,meas_peak_reserved,peak_error,peak_match,segments\n");
    else
        printf("%-4s %-34s %14s %9s %9s %5s %14s %14s %8s  %s\n", "run", "policy", "capacity",
               "oom pred", "oom meas", "same", "peak pred", "peak meas", "error",
               pseg ? "device events" : "");
    tally t = {0};
    for (size_t i = 0; i < n; i++) {
        const json_t *p = json_array_get(pr, i), *m = json_array_get(mr, i);
        if (!json_is_object(p) || !json_is_object(m)) {
            as_cli_msg("%s: run %zu is not an object", files[json_is_object(p)], i);
            goto out;
        }
        if (compare_run(i, p, m, files, csv, pseg ? &pl : NULL, pseg ? &ml : NULL, &t))
            goto out;
    }
    if (!csv) {
        printf("\n%zu runs: OOM point exact in %zu, peak reserved exact in %zu", n, t.oom_same,
               t.peak_same);
        if (pseg)
            printf(", device events identical in %zu", t.seg_same);
        printf("%s\n", t.bad ? " (some capacities differ: see warnings)" : "");
    }
    rc = AS_EXIT_OK;
out:
    json_decref(pj);
    json_decref(mj);
    free(pl.r);
    free(ml.r);
    return rc;
}
