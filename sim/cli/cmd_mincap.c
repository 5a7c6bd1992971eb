/*
 * cmd_mincap.c - `allocsim mincap`: the minimum capacity of a trace per policy, whether
 * every larger capacity up to the uncapped peak fits, and the capacities that fail above
 * it (the search itself is mincap.c). CLI code: it prints and returns exit statuses.
 *
 *   allocsim mincap -p SPEC [-p SPEC]... [-f table|json] [--csv F] [--batch N]
 *                   [--step BYTES] [-j THREADS] TRACE
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "driver.h"
#include "mincap.h"
#include "options.h"
#include "outfile.h"
#include "progress.h"
#include "report.h"

#define MAX_SPECS 64

static const char usage_text[] =
    "usage: allocsim mincap [-p SPEC]... [options] TRACE\n"
    "  The smallest capacity, in 2 MiB steps, at which TRACE runs whole under each SPEC,\n"
    "  whether every larger capacity up to the uncapped peak reserved fits too, and the\n"
    "  capacities above the minimum that fail (fitting is not monotone in capacity).\n"
    "  Every capacity from peak requested to the uncapped peak reserved is run; for a\n"
    "  policy that enforces the capacity itself (torch), also 64 MiB under the lowest that\n"
    "  fits, since it may hold a little more than its limit.\n"
    "options:\n"
    "  -p, --policy SPEC   policy spec (as for run, 'recorded' included); repeat for\n"
    "                      several; default torch\n"
    "  -f, --format F      table (default) or json\n"
    "  --csv FILE          write every capacity run (the sweep) as CSV, for\n"
    "                      `allocsim plot capacity --csv FILE`\n"
    "  --batch N           capacities per decode of the trace (default 64, fewer when\n"
    "                      they do not fit --memory)\n"
    "  --memory BYTES      host memory for one decode's runs (default 2G)\n"
    "  --step BYTES        grid step (default 2MiB; coarser is faster but not exact);\n"
    "                      at most 16384 capacities per policy\n"
    "  -j, --threads N     engine threads, or curve processes (default: one per core)\n"
    "  --exact-passes      one run per capacity, --batch runs per decode, instead of\n"
    "                      the default curve mode (one run forking where the capacity\n"
    "                      decides; the same results)\n"
    "  --max BYTES         sweep no higher than this (default: the uncapped peak reserved,\n"
    "                      or the card's usable memory with --device)\n"
    "  --device CARD       a card (sim/CARDS.md) or its bytes: --max is its usable memory\n"
    "  --outside BYTES     memory outside the allocator (as for run; default train)\n"
    "  --snapshot-device N  which device of a multi-device snapshot (as for run)\n"
    "  --no-caught-ooms    an OOM at a cuDNN workspace request fails the capacity too\n"
    "                      (as for run)\n"
    "  --device-streams S  the CUDA streams the process made, whose pages take room in\n"
    "                      the heap and the capacity (as for run; default none)\n"
    "  --shard I/N         only the policies at positions k (0-based, in -p order) with\n"
    "                      k % N == I - 1; -f jsonl writes one line per policy for\n"
    "                      'allocsim merge'\n"
    "  -q, --quiet         no progress line (shown only on a terminal)\n"
    "Ctrl-C stops the search: the policies already answered are written, and the exit\n"
    "status is 130.\n";

typedef struct open_ctx {
    const char *path;
} open_ctx;

static int open_trace(void *user, as_trace_reader **out, as_trace_error *err)
{
    const open_ctx *c = user;
    return as_trace_open(c->path, as_cli_reader_opts(), out, err);
}

/* Every pass decodes the trace again. A PyTorch pickle or a text trace is slow to parse,
 * so such an input is first written once to a temporary native file (about 2 bytes per
 * event, decoded in memory bounded by the live allocations) and the passes read that.
 * Fills tmp (empty when the input is already native), its registry slot and the input's
 * format (for the report). Returns 0 or an exit status. */
static int spool_native(const char *path, char *tmp, size_t n, int *slot, as_trace_fmt *fmt)
{
    as_trace_reader *rd = NULL;
    as_trace_writer *w = NULL;
    as_trace_error err = {.offset = UINT64_MAX, .event = UINT64_MAX};
    as_event ev;
    int rc, fd;
    tmp[0] = 0;
    if ((rc = as_cli_open_trace(path, &rd)))
        return rc;
    *fmt = as_trace_reader_format(rd);
    if (*fmt == AS_FMT_NATIVE) {
        as_trace_close(rd);
        return AS_EXIT_OK;
    }
    const char *t = getenv("TMPDIR");
    snprintf(tmp, n, "%s/allocsim-mincap-XXXXXX.zst", t && *t ? t : "/tmp");
    if ((fd = as_out_mkstemps(tmp, 4, slot)) < 0) { /* removed on every exit path */
        rc = as_cli_cannot_create(tmp, errno);
        tmp[0] = 0;
        as_trace_close(rd);
        return rc;
    }
    close(fd);
    if (as_trace_writer_open_sites(tmp, AS_FMT_NATIVE, as_trace_reader_meta(rd),
                                   as_trace_reader_sites(rd), &w, &err)) {
        rc = as_cli_trace_fail(&err, tmp);
        goto fail;
    }
    while ((rc = as_trace_next(rd, &ev)) == 0)
        if ((rc = as_trace_write(w, &ev)) < 0)
            break;
    if (rc < 0) {
        const as_trace_error *re = as_trace_reader_error(rd);
        rc = as_cli_trace_fail(re && re->code ? re : &err, path);
        as_trace_writer_close(w, &err);
        goto fail;
    }
    if (as_trace_writer_close(w, &err)) {
        rc = as_cli_trace_fail(&err, tmp);
        goto fail;
    }
    as_trace_close(rd);
    return AS_EXIT_OK;
fail:
    as_trace_close(rd);
    unlink(tmp);
    as_out_tmp_del(*slot);
    *slot = -1;
    tmp[0] = 0;
    return rc;
}

/* The progress line of one policy's search: capacities done of the grid, and within a
 * pass the engine's fraction of it, for the time left. */
typedef struct progress_ctx {
    as_progress prog;
    uint64_t done, total;
} progress_ctx;

static void on_progress(void *user, uint64_t done, uint64_t total)
{
    progress_ctx *p = user;
    p->done = done;
    p->total = total;
    as_progress_show(&p->prog, done, total, total ? (double)done / (double)total : 0);
}

static void on_runs(void *user, const as_engine_progress *e)
{
    progress_ctx *p = user;
    if (!p->total || e->runs == 1) /* the uncapped pass, before the grid is known */
        return;
    double f = ((double)p->done + as_driver_engine_frac(e, 0) * e->runs) / (double)p->total;
    as_progress_show(&p->prog, p->done + e->runs_done, p->total, f);
}

/* The sweep CSV (also what `allocsim plot capacity` reads): one row per capacity run, its
 * columns the first of the run report's (sim/REPORT.md), -1 where a value does not
 * apply. `run` numbers the rows of the file, across policies. */
static void csv_header(FILE *f)
{
    fputs("run,trace,file,spec,policy,capacity,completed,oom,oom_event,oom_alloc,allocs,"
          "peak_requested,peak_reserved\n",
          f);
}

static void csv_rows(FILE *f, uint64_t *run, const char *trace, const as_policy_spec *spec,
                     const as_mincap_result *m)
{
    for (size_t i = 0; i < m->npoints; i++) {
        const as_mincap_point *p = &m->points[i];
        fprintf(f, "%" PRIu64 ",0,", (*run)++);
        as_report_csv_str(f, trace);
        fputc(',', f);
        as_report_csv_str(f, spec->input ? spec->input : spec->text);
        fputc(',', f);
        as_report_csv_str(f, spec->text);
        fprintf(f, ",%" PRIu64 ",%d,%d,", p->capacity, p->completed, !p->completed);
        as_report_csv_u64(f, !p->completed, p->oom_event);
        fputc(',', f);
        as_report_csv_u64(f, !p->completed, p->oom_alloc);
        fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", p->allocs, p->peak_requested,
                p->peak_reserved);
    }
}

static void print_table(FILE *f, const char *policy, const as_mincap_result *m, double secs)
{
    char a[32], b[32], c[32];
    as_fmt_bytes(a, sizeof a, m->peak_reserved);
    fprintf(f, "policy %s (uncapped peak reserved %s)\n", policy, a);
    if (m->min_capacity == AS_NONE) {
        fprintf(f, "  minimum capacity   none: %s\n",
                m->npoints ? "no capacity up to the uncapped peak fits"
                           : "the trace does not run even on an unlimited device");
    } else {
        as_fmt_capacity(a, sizeof a, m->min_capacity);
        fprintf(f, "  minimum capacity   %" PRIu64 " B (%s)\n", m->min_capacity, a);
        if (m->monotone) {
            fprintf(f, "  monotone above it  yes: every capacity up to the %s fits\n",
                    m->hi < m->peak_reserved ? "top of the sweep (--max)" : "uncapped peak");
        } else {
            uint64_t nfail = 0;
            for (size_t i = 0; i < m->ngaps; i++)
                nfail += m->gaps[i].count;
            fprintf(f, "  monotone above it  no: %" PRIu64 " %s above it %s\n", nfail,
                    nfail == 1 ? "capacity" : "capacities", nfail == 1 ? "fails" : "fail");
            for (size_t i = 0; i < m->ngaps; i++) {
                const as_cap_range *g = &m->gaps[i];
                as_fmt_capacity(a, sizeof a, g->lo);
                as_fmt_capacity(b, sizeof b, g->hi);
                if (g->oom_alloc_min == g->oom_alloc_max)
                    snprintf(c, sizeof c, "%" PRIu64, g->oom_alloc_min);
                else
                    snprintf(c, sizeof c, "%" PRIu64 "-%" PRIu64, g->oom_alloc_min,
                             g->oom_alloc_max);
                if (g->count == 1)
                    fprintf(f, "    fails at %" PRIu64 " B (%s): OOM at alloc %s\n", g->lo, a, c);
                else
                    fprintf(f,
                            "    fails %" PRIu64 " B - %" PRIu64 " B (%s - %s, %" PRIu64
                            " capacities): OOM at alloc %s\n",
                            g->lo, g->hi, a, b, g->count, c);
            }
            if (m->fits_from != AS_NONE) {
                as_fmt_capacity(a, sizeof a, m->fits_from);
                fprintf(f, "  fits from          %" PRIu64 " B (%s) up to the %s\n", m->fits_from,
                        a, m->hi < m->peak_reserved ? "top of the sweep (--max)" : "uncapped peak");
            } else {
                fprintf(f, "  fits from          none: the uncapped peak itself fails "
                           "(the policy reads the capacity)\n");
            }
        }
    }
    /* Only when the probe under peak requested ran: otherwise every capacity within the
     * margin under the minimum was in the sweep anyway. */
    if (m->self_limited && m->npoints &&
        m->lo < (m->peak_requested + m->step - 1) / m->step * m->step)
        fprintf(
            f,
            "  below it           the policy enforces the capacity itself and may hold a little "
            "more,\n                     so capacities down to %" PRIu64
            " B, under peak requested, were run too\n",
            m->lo);
    as_fmt_capacity(a, sizeof a, m->lo);
    as_fmt_capacity(b, sizeof b, m->hi);
    as_fmt_bytes(c, sizeof c, m->step);
    fprintf(f,
            "  swept              %zu capacities, %s to %s in %s steps, %" PRIu64
            " decodes, %.2f s\n",
            m->npoints, a, b, c, m->passes, secs);
}

static void print_json_one(FILE *f, const as_policy_spec *spec, const as_mincap_result *m,
                           double secs)
{
    fputs("{\"trace\": 0, \"spec\": ", f);
    as_report_json_str(f, spec->input ? spec->input : spec->text);
    fputs(", \"policy\": ", f);
    as_report_json_str(f, spec->text);
    fputs(", \"min_capacity\": ", f);
    as_report_json_u64(f, 1, m->min_capacity);
    fputs(", \"monotone\": ", f);
    fputs(m->min_capacity == AS_NONE ? "null" : m->monotone ? "true" : "false", f);
    fputs(", \"fits_from\": ", f);
    as_report_json_u64(f, 1, m->fits_from);
    fprintf(f, ", \"peak_requested\": %" PRIu64 ", \"peak_reserved\": %" PRIu64, m->peak_requested,
            m->peak_reserved);
    fputs(", \"failing_above_min\": [", f);
    for (size_t i = 0; i < m->ngaps; i++) {
        const as_cap_range *g = &m->gaps[i];
        fprintf(f,
                "%s{\"lo\": %" PRIu64 ", \"hi\": %" PRIu64 ", \"count\": %" PRIu64
                ", \"oom_alloc_min\": %" PRIu64 ", \"oom_alloc_max\": %" PRIu64 "}",
                i ? ", " : "", g->lo, g->hi, g->count, g->oom_alloc_min, g->oom_alloc_max);
    }
    fprintf(f,
            "], \"self_limited\": %s, \"sweep\": {\"lo\": %" PRIu64 ", \"hi\": %" PRIu64
            ", \"step\": %" PRIu64 ", \"capacities\": %zu, \"decodes\": %" PRIu64 ", \"wall_s\": ",
            m->self_limited ? "true" : "false", m->lo, m->hi, m->step, m->npoints, m->passes);
    as_report_json_real(f, secs);
    fputs("}}", f);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum { OPT_CSV = 256, OPT_BATCH, OPT_STEP, OPT_MAX, OPT_PASSES, OPT_STREAMS };

static const struct option mincap_opts[] = {
    {"format", required_argument, NULL, 'f'},
    {"csv", required_argument, NULL, OPT_CSV},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"step", required_argument, NULL, OPT_STEP},
    {"exact-passes", no_argument, NULL, OPT_PASSES},
    {"max", required_argument, NULL, OPT_MAX},
    {"device-streams", required_argument, NULL, OPT_STREAMS},
    AS_CLI_BASE_OPTIONS,
    AS_CLI_TRACE_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* The command line of one `mincap`. */
typedef struct mincap_args {
    as_cli_common co; /* -p, --device, --outside, --shard, --memory, -j, -q, ... */
    const char *spec_text[MAX_SPECS];
    const char *trace, *csv_path;
    int json; /* 0 table, 1 json, 2 jsonl */
    int help;
    as_mincap_opts o;
} mincap_args;

/* One `mincap` as it searches: the policies, the outputs, what has been printed. */
typedef struct mincap_run {
    const char *cmd;
    mincap_args *a;
    as_policy_spec specs[MAX_SPECS];
    unsigned nparsed, k_done, printed;
    int opened;      /* JSON: the "mincap" array is open */
    int interrupted; /* a signal stopped the search after k_done policies */
    char spooled[PATH_MAX];
    char recorded[300]; /* -p recorded, resolved from the trace */
    int spool_slot;
    as_out *csv_out, *out;
    FILE *csv;
    uint64_t csv_run;
    as_trace_fmt in_fmt;
    open_ctx oc;
    progress_ctx pc;
} mincap_run;

static int mincap_option(const char *cmd, int c, char **argv, mincap_args *a)
{
    uint64_t v;
    switch (c) {
    case 'f':
        return as_cli_fmt_tjl(cmd, optarg, &a->json);
    case OPT_CSV:
        a->csv_path = optarg;
        return 0;
    case OPT_PASSES:
        a->o.exact_passes = 1;
        return 0;
    case OPT_BATCH:
        if (as_cli_parse_u64(optarg, &v) || v == 0 || v > 100000)
            return as_cli_usage(cmd, "--batch %s: a count from 1 to 100000", optarg);
        a->o.batch = (unsigned)v;
        return 0;
    case OPT_STEP:
        if (as_parse_bytes(optarg, &v) || v % AS_DEV_GRANULARITY)
            return as_cli_usage(cmd, "--step %s: a multiple of 2MiB", optarg);
        a->o.step = v;
        return 0;
    case OPT_MAX:
        if (as_parse_bytes(optarg, &a->o.max))
            return as_cli_usage(cmd, "--max %s: bytes with an optional unit", optarg);
        return 0;
    case OPT_STREAMS:
        return as_cli_parse_streams(cmd, optarg, &a->o.streams);
    case 'h':
        fputs(usage_text, stdout);
        a->help = 1;
        return 0;
    }
    int ret = as_cli_common_option(cmd, c, optarg, &a->co);
    return ret == AS_CLI_NOT_COMMON ? as_cli_bad_option(cmd, c, argv) : ret;
}

/* The command line into a: 0 or an exit status (a->help: nothing more to do). */
static int mincap_parse(const char *cmd, int argc, char **argv, mincap_args *a)
{
    as_cli_common_init(&a->co, a->spec_text, MAX_SPECS, "policies");
    a->o.max_points = AS_CLI_MAX_CAPACITIES;
    optind = 1;
    opterr = 0;
    int c, ret = 0;
    while (!ret && !a->help && (c = getopt_long(argc, argv, ":p:f:j:qh", mincap_opts, NULL)) != -1)
        ret = mincap_option(cmd, c, argv, a);
    if (ret || a->help)
        return ret;
    if (optind >= argc)
        return as_cli_usage(cmd, "no trace given");
    if (optind + 1 < argc)
        return as_cli_usage(cmd, "one trace at a time (got %s and %s)", argv[optind],
                            argv[optind + 1]);
    a->trace = argv[optind];
    if (a->co.np == 0)
        a->spec_text[a->co.np++] = "torch";
    a->o.memory = a->co.memory;
    a->o.threads = (unsigned)a->co.threads;
    a->o.no_caught_ooms = a->co.no_caught;
    return 0;
}

/* Before the search: every -p parsed, the outputs checked and opened, the card's usable
 * memory as --max, the trace spooled to native. 0 or an exit status. */
static int mincap_setup(mincap_run *r)
{
    mincap_args *a = r->a;
    int status;
    for (unsigned k = 0; k < a->co.np; k++) {
        if (!strcmp(a->spec_text[k], "recorded") &&
            (status = as_cli_recorded(r->cmd, &a->trace, 1, r->recorded, sizeof r->recorded, NULL)))
            return status;
        if (!strcmp(a->spec_text[k], "recorded"))
            a->spec_text[k] = r->recorded;
        if ((status = as_cli_parse_spec(r->cmd, a->spec_text[k], &r->specs[k])))
            return status;
        r->nparsed++;
    }
    const char *outs[] = {"-", a->csv_path};
    if ((status = as_out_check(r->cmd, outs, 2, &a->trace, 1)) ||
        (status = as_out_open("-", &r->out)))
        return status;
    if (a->csv_path) {
        if ((status = as_out_open(a->csv_path, &r->csv_out)))
            return status;
        r->csv = as_out_file(r->csv_out);
        csv_header(r->csv);
    }
    if (a->co.card && !a->o.max && /* the card's usable memory */
        (status = as_cli_device(r->cmd, a->co.card, a->co.outside, !a->json, &a->o.max)))
        return status;
    if ((status =
             spool_native(a->trace, r->spooled, sizeof r->spooled, &r->spool_slot, &r->in_fmt)))
        return status;
    r->oc.path = r->spooled[0] ? r->spooled : a->trace;
    a->o.on_progress = on_progress;
    a->o.on_runs = on_runs;
    a->o.stop = &as_out_stop;
    a->o.user = &r->pc;
    return 0;
}

/* The trace's counts, once, before the first policy's answer (jsonl: in every line). */
static void print_trace(mincap_run *r, unsigned k, const as_mincap_result *m)
{
    const char *trace = r->a->trace, *fmt = as_trace_fmt_name(r->in_fmt);
    if (r->a->json == 2) { /* one line per policy: the trace's object in each */
        as_report_json_head(stdout);
        printf(", \"command\": \"mincap\", \"unit\": %u, \"of\": %u, \"trace\": ", k, r->nparsed);
        as_report_json_trace_open(stdout, 0, trace, fmt, NULL, NULL);
        printf(", \"events\": %" PRIu64 ", \"allocs\": %" PRIu64 ", \"peak_requested\": %" PRIu64
               "}, \"mincap\": ",
               m->events, m->allocs, m->peak_requested);
    } else if (r->printed == 0 && r->a->json) {
        /* mincap knows these counts of the trace, not the whole summary */
        as_report_json_trace_open(stdout, 0, trace, fmt, NULL, NULL);
        printf(", \"events\": %" PRIu64 ", \"allocs\": %" PRIu64 ", \"peak_requested\": %" PRIu64
               "}], \"mincap\": [",
               m->events, m->allocs, m->peak_requested);
        r->opened = 1;
    } else if (r->printed == 0) {
        char b[32];
        as_fmt_bytes(b, sizeof b, m->peak_requested);
        fputs("trace ", stdout);
        as_cli_put_safe(stdout, trace);
        printf(": %" PRIu64 " events, %" PRIu64 " allocations, peak requested %s\n", m->events,
               m->allocs, b);
    }
}

/* Policy k's answer, in the format asked and in --csv. */
static void print_answer(mincap_run *r, unsigned k, const as_mincap_result *m, double secs)
{
    print_trace(r, k, m);
    if (r->a->json == 2) {
        print_json_one(stdout, &r->specs[k], m, secs);
        fputs("}\n", stdout);
    } else if (r->a->json == 1) {
        if (r->printed)
            fputs(", ", stdout);
        print_json_one(stdout, &r->specs[k], m, secs);
    } else {
        print_table(stdout, r->specs[k].text, m, secs);
    }
    fflush(stdout); /* each policy's answer as soon as it is known */
    if (r->csv)
        csv_rows(r->csv, &r->csv_run, r->a->trace, &r->specs[k], m);
    r->k_done++;
    r->printed++;
}

/* mincap_one's answer when a signal stopped the search after some policies (not an exit
 * status: those are >= 0). */
#define STOPPED (-1)

/* Searches policy k and prints its answer. 0, an exit status, or STOPPED (a signal:
 * r->interrupted, the JSON closed). */
static int mincap_one(mincap_run *r, unsigned k)
{
    mincap_args *a = r->a;
    as_mincap_result m;
    as_trace_error err = {.offset = UINT64_MAX, .event = UINT64_MAX};
    char why[512];
    as_progress_start(&r->pc.prog, a->co.quiet, "capacities");
    r->pc.prog.label = r->specs[k].text;
    r->pc.done = r->pc.total = 0;
    double t0 = now_s();
    int rc = as_mincap(open_trace, &r->oc, &r->specs[k], &a->o, &m, &err, why, sizeof why);
    as_progress_clear(&r->pc.prog);
    if (rc == AS_ENGINE_STOPPED) {
        if (a->json == 1)
            fputs(r->opened ? "]}\n" : "], \"mincap\": []}\n", stdout);
        r->interrupted = 1;
        if (!r->k_done) { /* nothing answered: the old --csv is worth more */
            as_cli_msg("interrupted before any policy was answered; no output written");
            return AS_EXIT_SIGNAL;
        }
        return STOPPED;
    }
    if (rc == AS_ELIMIT)
        return as_cli_usage(r->cmd, "%s: %s: %s", a->trace, r->specs[k].text, why);
    if (rc && why[0]) {
        as_cli_msg("%s: %s", a->trace, why);
        return AS_EXIT_INPUT;
    }
    if (rc)
        return as_cli_trace_fail(&err, a->trace);
    print_answer(r, k, &m, now_s() - t0);
    as_mincap_result_free(&m);
    return 0;
}

/* Every policy of this shard, in -p order. 0 or an exit status. */
static int mincap_all(mincap_run *r)
{
    mincap_args *a = r->a;
    as_out_graceful(1); /* a first Ctrl-C keeps the policies already answered */
    if (a->json == 1) {
        as_report_json_head(stdout);
        fputs(", \"traces\": [", stdout);
    }
    for (unsigned k = 0; k < r->nparsed; k++) {
        if (k % a->co.nshards != a->co.shard)
            continue; /* another shard's policy */
        int status = mincap_one(r, k);
        if (status == STOPPED)
            return 0;
        if (status)
            return status;
    }
    if (a->json == 1)
        fputs(r->printed ? "]}\n" : "], \"mincap\": []}\n", stdout);
    return 0;
}

int as_cmd_mincap(int argc, char **argv)
{
    mincap_args a = {0};
    mincap_run r = {.cmd = "mincap", .a = &a, .spool_slot = -1};
    int status = mincap_parse(r.cmd, argc, argv, &a);
    if (status || a.help)
        return status;
    if (!(status = mincap_setup(&r)))
        status = mincap_all(&r);
    if (r.spooled[0])
        unlink(r.spooled);
    as_out_tmp_del(r.spool_slot);
    status = as_out_commit(r.csv_out, status);
    status = as_out_commit(r.out, status);
    if (r.interrupted && !status) {
        as_cli_msg("interrupted: %u of %u policies searched; the outputs hold those", r.k_done,
                   r.nparsed);
        status = AS_EXIT_SIGNAL;
    }
    for (unsigned k = 0; k < r.nparsed; k++)
        as_policy_spec_free(&r.specs[k]);
    return status;
}

int as_cli_spool_native(const char *path, char *tmp, size_t n, int *slot)
{
    as_trace_fmt fmt = AS_FMT_UNKNOWN;
    return spool_native(path, tmp, n, slot, &fmt);
}
