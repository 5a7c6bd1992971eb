/*
 * cmd_run.c - `allocsim [run] [-p SPEC]... [-c CAP]... TRACE...`: every -p crossed with
 * every -c is one run; each trace is decoded once and feeds all of its runs; one report
 * covers every trace. An OOM is a result (exit 0).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cards.h"
#include "cli.h"
#include "engine.h"
#include "mincap.h"
#include "outfile.h"
#include "progress.h"
#include "report.h"
#include "segmap.h"

#define DEFAULT_TIMELINE_EVERY 100

static const char run_help[] =
    "usage: allocsim [run] [options] TRACE...\n"
    "\n"
    "Replays each TRACE (native .zst, text, PyTorch snapshot pickle, RMM CSV; '-' is stdin)\n"
    "through every policy at every capacity and prints one row per run.\n"
    "\n"
    "  -p, --policy SPEC     policy and knobs, '[name,]knob=value,...' or a\n"
    "                        PYTORCH_CUDA_ALLOC_CONF string; no name means torch.\n"
    "                        Repeatable; default: torch. 'allocsim policies' lists them.\n"
    "  -c, --capacity CAP    device capacity: bytes, or with a unit: K/M/G/T = KiB/MiB/GiB/TiB\n"
    "                        are binary (80G = 80 GiB), KB/MB/GB/TB decimal; 141e9, 1.5G;\n"
    "                        'none' (the default) for unlimited. Repeatable.\n"
    "                        LO..HI/STEP is a sweep, as --sweep.\n"
    "                        A card name (h200, a100-80gb, rtx-4090, ...: 'allocsim tune\n"
    "                        --cards') is that card's usable memory, as --device.\n"
    "      --device CARD     a card (preset or its total bytes): runs at total - outside\n"
    "      --outside BYTES   memory outside the allocator (CUDA context, cuBLAS, NCCL), or\n"
    "                        a preset (context, cublas, nccl, train, none); default train,\n"
    "                        788 MB: a real training process's at its end (sim/CARDS.md)\n"
    "      --snapshot-device N  which device of a multi-device snapshot (allocsim info\n"
    "                        lists them; one tracing several devices needs it)\n"
    "  -f, --format FMT      table (default), csv, json, or jsonl (one line per trace)\n"
    "      --shard I/N       only the traces at positions k (0-based, in the order given)\n"
    "                        with k % N == I - 1; 'allocsim merge' joins the shards' jsonl\n"
    "  -o, --output FILE     write the report to FILE instead of stdout\n"
    "      --timeline FILE   CSV run,event,alloc,time_us,requested,allocated,reserved:\n"
    "                        every N events, at each new peak of reserved, at the OOM\n"
    "      --timeline-every N  the N above (default 100)\n"
    "      --segments FILE   CSV run,alloc,event,action,addr,size: every device-level event\n"
    "      --segment-map FILE  CSV of each run's segments and blocks at its reserved peak\n"
    "                        and at its OOM (a second pass over the trace), for\n"
    "                        'allocsim plot segments'\n"
    "      --sweep LO:HI:STEP  add the capacities LO, LO+STEP, ... <= HI (also LO..HI/STEP),\n"
    "                        e.g. --sweep 8GiB:12GiB:64MiB -f csv for 'allocsim plot capacity';\n"
    "                        at most 16384 capacities in all\n"
    "      --keep-going      after an OOM, skip the failed request and go on (counts OOMs)\n"
    "      --skip-bad        with several traces, name each one that cannot be read, report\n"
    "                        the others and exit 1; without it every trace is decoded\n"
    "                        before any run, and the first bad one stops the command\n"
    "      --check           verify the policy's invariants after every event (slow)\n"
    "      --threads N       worker threads (default: one per run, up to the cores);\n"
    "                        results do not depend on it\n"
    "      --memory BYTES    host memory for the runs in flight (default 2G): runs that\n"
    "                        do not fit at once go in groups, one decode of the trace each\n"
    "                        (plus one to size them), with the same results\n"
    "  -q, --quiet           no progress line (shown only on a terminal: runs done, time\n"
    "                        left)\n"
    "\n"
    "Ctrl-C (SIGINT, SIGTERM) stops the runs: those that finished are written whole (the\n"
    "report, -o and the CSV files), and the exit status is 130.\n"
    "\n"
    "Exit status: 0 when it ran (OOMs included), 1 bad input or I/O, 2 usage error.\n";

enum {
    OPT_TIMELINE = 256,
    OPT_TL_EVERY,
    OPT_SEGMENTS,
    OPT_SEGMAP,
    OPT_SWEEP,
    OPT_KEEP,
    OPT_SKIP_BAD,
    OPT_CHECK,
    OPT_THREADS,
    OPT_MEMORY,
    OPT_DEVICE,
    OPT_OUTSIDE,
    OPT_SHARD,
    OPT_HELP
};

static const struct option run_opts[] = {
    {"policy", required_argument, NULL, 'p'},
    {"capacity", required_argument, NULL, 'c'},
    {"format", required_argument, NULL, 'f'},
    {"output", required_argument, NULL, 'o'},
    {"timeline", required_argument, NULL, OPT_TIMELINE},
    {"timeline-every", required_argument, NULL, OPT_TL_EVERY},
    {"segments", required_argument, NULL, OPT_SEGMENTS},
    {"segment-map", required_argument, NULL, OPT_SEGMAP},
    {"sweep", required_argument, NULL, OPT_SWEEP},
    {"keep-going", no_argument, NULL, OPT_KEEP},
    {"skip-bad", no_argument, NULL, OPT_SKIP_BAD},
    {"check", no_argument, NULL, OPT_CHECK},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"outside", required_argument, NULL, OPT_OUTSIDE},
    {"shard", required_argument, NULL, OPT_SHARD},
    {"quiet", no_argument, NULL, 'q'},
    {"snapshot-device", required_argument, NULL, AS_CLI_OPT_SNAPSHOT_DEVICE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct run_ctx {
    as_runlog *segs, *timeline;
    const char *seg_path, *tl_path;
    as_segmap *segmap;
    const char *trace;
    /* The progress line: runs of earlier traces and groups, this group's, and the weights
     * (input sizes) of the traces done, this one and all, for the fraction done. */
    as_progress prog;
    uint64_t runs_total, runs_before; /* runs_before: of earlier traces */
    size_t group_r0, group_n, trace_runs;
    uint64_t trace_events; /* this trace's length once a group has decoded it, else 0 */
    double w_before, w_cur, w_total;
} run_ctx;

static void cb_segment(void *user, const as_seg_record *r)
{
    as_runlog_segment(((run_ctx *)user)->segs, r);
}

static void cb_sample(void *user, const as_timeline_sample *s)
{
    as_runlog_sample(((run_ctx *)user)->timeline, s);
}

/* The engine's report after each batch: runs done over every trace, and the fraction of
 * all the work (this group's fraction within the trace, the trace's within all). */
static void cb_runs(void *user, const as_engine_progress *p)
{
    run_ctx *c = user;
    double g = as_progress_engine_frac(p, c->trace_events);
    double t =
        c->trace_runs ? ((double)c->group_r0 + g * (double)c->group_n) / (double)c->trace_runs : 0;
    double f = c->w_total > 0 ? (c->w_before + c->w_cur * t) / c->w_total : 0;
    as_progress_show(&c->prog, c->runs_before + c->group_r0 + p->runs_done, c->runs_total, f);
}

static void progress_clear(run_ctx *c)
{
    as_progress_clear(&c->prog);
}

/* The runs of one trace: spec-major (run i is specs[i / ncap] at caps[i % ncap]), fed in
 * groups of runs that fit the memory budget, each group over its own decode of the trace. */
typedef struct run_set {
    const char *path;
    const as_engine_opts *base;
    const as_policy_spec *specs;
    const uint64_t *caps;
    size_t ncap, nruns;
    int trace;   /* the report's index of the trace, -1 until the first group is added */
    size_t step; /* at most this many runs per group (RUN_STEP for a native file) */
} run_set;

/* Runs per decode of a native trace file, however many fit the budget: runs then finish
 * (and an interrupt keeps them) group by group, every few seconds, for a decode that costs
 * about 1% of the runs' work (decoding is some 100 times faster than a run). Other formats
 * decode slower and stdin can be read only once: they go in as few groups as fit. */
#ifndef RUN_STEP
#define RUN_STEP 32
#endif

static int engine_fail(const char *path, int rc, const as_trace_error *err, const as_engine *e)
{
    if (rc < 0 && err->code < 0) /* the trace failed, not the engine */
        return as_cli_trace_fail(err, path);
    as_cli_msg("%s: %s", path, as_engine_errmsg(e));
    return AS_EXIT_INPUT;
}

/* The --segment-map pass for runs [r0, r0 + n) that engine e ran. */
static int segmap_group(const run_set *rs, run_ctx *ctx, const as_engine *e, size_t r0, size_t n,
                        unsigned base_run)
{
    as_trace_reader *rd2 = NULL;
    as_trace_error err = {.offset = UINT64_MAX, .event = UINT64_MAX};
    char why[400];
    int ret = as_cli_open_trace(rs->path, &rd2);
    if (ret)
        return ret;
    int rc = as_segmap_pass(ctx->segmap, e, rd2, rs->base, rs->specs, rs->caps, rs->ncap, r0, n,
                            base_run, &err, why, sizeof why);
    as_trace_close(rd2);
    if (rc == AS_ENGINE_STOPPED)
        return AS_EXIT_SIGNAL;
    if (rc < 0 && why[0]) {
        as_cli_msg("%s: %s", rs->path, why);
        return AS_EXIT_INPUT;
    }
    if (rc < 0 && err.code < 0) /* the trace failed */
        return as_cli_trace_fail(&err, rs->path);
    if (rc < 0) {
        as_cli_msg("%s: segment map: %s", rs->path, strerror(-rc));
        return AS_EXIT_INPUT;
    }
    return AS_EXIT_OK;
}

/* One decode of the trace feeding runs [r0, r0 + n); adds them to the report. With max_live
 * set, *budget_hit says the trace outgrew it (nothing added: run again in groups). */
static int run_group(run_set *rs, run_ctx *ctx, size_t r0, size_t n, uint64_t max_live,
                     as_report *rep, int *budget_hit)
{
    as_trace_reader *rd = NULL;
    as_engine *e = NULL;
    as_engine_opts o = *rs->base;
    o.max_live = max_live;
    int ret = as_cli_open_trace(rs->path, &rd);
    if (ret)
        return ret;
    if (as_engine_create(&o, &e)) {
        as_cli_msg("out of host memory");
        ret = AS_EXIT_INPUT;
        goto out;
    }
    for (size_t i = r0; i < r0 + n; i++) {
        const as_policy_spec *sp = &rs->specs[i / rs->ncap];
        if (as_engine_add_run(e, sp, rs->caps[i % rs->ncap]) < 0) {
            as_cli_msg("cannot add run %s at capacity %llu", sp->text,
                       (unsigned long long)rs->caps[i % rs->ncap]);
            ret = AS_EXIT_INPUT;
            goto out;
        }
    }
    unsigned base_run = as_report_nruns(rep);
    if (ctx->segs)
        as_runlog_set_base(ctx->segs, base_run);
    if (ctx->timeline)
        as_runlog_set_base(ctx->timeline, base_run);
    ctx->group_r0 = r0;
    ctx->group_n = n;
    as_trace_error err = {.offset = UINT64_MAX, .event = UINT64_MAX};
    int rc = as_engine_run(e, rd, &err);
    if (rc == 0)
        ctx->trace_events = as_engine_summary(e)->events;
    if (rc == 0 && ctx->segmap)
        ret = segmap_group(rs, ctx, e, r0, n, base_run);
    progress_clear(ctx);
    /* A group counts whole or not at all: one that failed, was interrupted (or its segment
     * map was) or outgrew the budget is void, and the rows it logged go too. */
    if (rc != 0 || ret) {
        if (ctx->segs)
            as_runlog_discard(ctx->segs, base_run);
        if (ctx->timeline)
            as_runlog_discard(ctx->timeline, base_run);
        if (ctx->segmap)
            as_segmap_drop_from(ctx->segmap, base_run);
        if (rc == AS_ELIMIT && max_live)
            *budget_hit = 1;
        else if (rc == AS_ENGINE_STOPPED)
            ret = AS_EXIT_SIGNAL;
        else if (rc < 0)
            ret = engine_fail(rs->path, rc, &err, e);
        goto out;
    }
    if (as_report_add_engine(rep, &rs->trace, rs->path, rd, e)) {
        as_cli_msg("out of host memory");
        ret = AS_EXIT_INPUT;
        goto out;
    }
    /* The group's rows are complete: out of their spool files into the output. */
    unsigned done = as_report_nruns(rep);
    if (ctx->segs && as_runlog_flush(ctx->segs, done)) {
        ret = as_cli_write_status(1, ctx->seg_path, AS_EXIT_OK);
        goto out;
    }
    if (ctx->timeline && as_runlog_flush(ctx->timeline, done)) {
        ret = as_cli_write_status(1, ctx->tl_path, AS_EXIT_OK);
        goto out;
    }
    if (r0 + n == rs->nruns && as_trace_reader_warnings(rd))
        as_cli_msg("%s: %llu malformed records skipped", rs->path,
                   (unsigned long long)as_trace_reader_warnings(rd));
out:
    as_engine_destroy(e);
    as_trace_close(rd);
    return ret;
}

/* Runs in flight with --segments/--timeline: each holds a spool file per log, so at most
 * AS_RUN_LOG_GROUP and what the open-files limit leaves (64 kept for everything else). */
static size_t log_group(const run_ctx *ctx)
{
    unsigned logs = (ctx->segs != NULL) + (ctx->timeline != NULL);
    struct rlimit rl;
    size_t g = AS_RUN_LOG_GROUP;
    if (logs && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        size_t room = rl.rlim_cur > 64 + logs ? (size_t)(rl.rlim_cur - 64) / logs : 1;
        if (room < g)
            g = room;
    }
    return logs ? g : SIZE_MAX;
}

/* Runs per group within the budget, from the trace's peak live allocations (one decode of
 * the trace without runs). 0 or an exit status. */
static int group_size(const run_set *rs, run_ctx *ctx, uint64_t budget, size_t *group)
{
    as_trace_reader *rd = NULL;
    as_engine *e = NULL;
    as_trace_error err = {.offset = UINT64_MAX, .event = UINT64_MAX};
    int ret = as_cli_open_trace(rs->path, &rd);
    if (ret)
        return ret;
    as_engine_opts o = {.stop = rs->base->stop};
    if (as_engine_create(&o, &e)) {
        as_cli_msg("out of host memory");
        ret = AS_EXIT_INPUT;
        goto out;
    }
    int rc = as_engine_scan(e, rd, &err);
    progress_clear(ctx);
    if (rc == AS_ENGINE_STOPPED) {
        ret = AS_EXIT_SIGNAL;
        goto out;
    }
    if (rc < 0) {
        ret = engine_fail(rs->path, rc, &err, e);
        goto out;
    }
    int logs = ctx->segs || ctx->timeline;
    uint64_t per = as_engine_run_bytes(as_engine_summary(e)->peak_live, logs);
    uint64_t g = budget / per;
    if (g > log_group(ctx))
        g = log_group(ctx);
    if (g > rs->step)
        g = rs->step;
    *group = g < 1 ? 1 : g > rs->nruns ? rs->nruns : (size_t)g;
    ctx->trace_events = as_engine_summary(e)->events;
out:
    as_engine_destroy(e);
    as_trace_close(rd);
    return ret;
}

/* 1 when path is a file in the native format (cheap to decode again). */
static int native_file(const char *path)
{
    as_trace_reader *rd = NULL;
    if (!strcmp(path, "-") || as_trace_open(path, as_cli_reader_opts(), &rd, NULL) < 0)
        return 0;
    int native = as_trace_reader_format(rd) == AS_FMT_NATIVE;
    as_trace_close(rd);
    return native;
}

/* Runs one trace; adds its trace entry and runs to the report. The runs go in one pass
 * when they fit the budget (engine stops at max_live if the trace proves too big), else
 * in groups (a decode of the trace each, plus one to size them). */
static int run_trace(const char *path, const as_engine_opts *base, run_ctx *ctx,
                     const as_policy_spec *specs, size_t nspec, const uint64_t *caps, size_t ncap,
                     uint64_t budget, as_report *rep)
{
    run_set rs = {path, base, specs, caps, ncap, nspec * ncap, -1, SIZE_MAX};
    if (native_file(path))
        rs.step = RUN_STEP;
    int logs = ctx->segs || ctx->timeline;
    uint64_t per0 = as_engine_run_bytes(0, logs), max_live = 0;
    int grouped = rs.nruns > 1 &&
                  (rs.nruns > log_group(ctx) || budget / rs.nruns <= per0 || rs.nruns > rs.step);
    if (rs.nruns > 1 && !grouped)
        max_live = (budget / rs.nruns - per0) / AS_ENGINE_RUN_PER_LIVE;
    ctx->trace = path;
    ctx->prog.label = path;
    ctx->trace_runs = rs.nruns;
    ctx->trace_events = 0;
    if (!grouped) {
        int hit = 0, ret = run_group(&rs, ctx, 0, rs.nruns, max_live, rep, &hit);
        if (ret || !hit)
            return ret;
    }
    if (strcmp(path, "-") == 0) {
        char b[32];
        as_fmt_bytes(b, sizeof b, budget);
        return as_cli_usage("run",
                            "-: %zu runs of this trace do not fit --memory %s at once, and "
                            "standard input can be read only once: give the trace as a file, "
                            "or a larger --memory",
                            rs.nruns, b);
    }
    size_t group = 1;
    int ret = group_size(&rs, ctx, budget, &group);
    for (size_t r0 = 0; !ret && r0 < rs.nruns; r0 += group) {
        int hit = 0;
        size_t n = rs.nruns - r0 < group ? rs.nruns - r0 : group;
        ret = run_group(&rs, ctx, r0, n, 0, rep, &hit);
    }
    return ret;
}

/* Before any run of several traces: opens and decodes each one (decoding is far cheaper
 * than a run), so that a bad trace costs no simulation. Standard input can be read only
 * once: it is checked as it runs. Without skip_bad the first bad trace is the answer (its
 * message, exit 1); with it, each bad one is named and marked. 0 or an exit status. */
static int check_traces(char **paths, int n, int skip_bad, unsigned char *bad, unsigned *nbad)
{
    as_event *evs = malloc(4096 * sizeof *evs);
    if (!evs) {
        as_cli_msg("out of host memory");
        return AS_EXIT_INPUT;
    }
    int ret = 0;
    for (int i = 0; i < n && !as_out_stop && (!ret || skip_bad); i++) {
        if (!strcmp(paths[i], "-"))
            continue;
        as_trace_reader *rd = NULL;
        size_t got;
        int rc = 0;
        if ((ret = as_cli_open_trace(paths[i], &rd)) == 0) {
            while (!as_out_stop && (rc = as_trace_next_batch(rd, evs, 4096, &got)) == 0)
                ;
            if (rc < 0)
                ret = as_cli_trace_fail(as_trace_reader_error(rd), paths[i]);
        }
        as_trace_close(rd);
        if (ret) {
            bad[i] = 1;
            (*nbad)++;
        }
    }
    free(evs);
    if (ret && !skip_bad)
        return ret;
    return as_out_stop ? AS_EXIT_SIGNAL : 0;
}

/* A trace's share of the work for the progress line: its size (1 for stdin). */
static double trace_weight(const char *path)
{
    struct stat st;
    return strcmp(path, "-") && stat(path, &st) == 0 && st.st_size > 0 ? (double)st.st_size : 1;
}

/* --sweep LO:HI:STEP (or -c LO..HI/STEP): appends the capacities. 0 or an exit status. */
static int add_sweep(const char *cmd, const char *text, uint64_t **caps, size_t *ncap,
                     size_t *capcap)
{
    uint64_t *sw = NULL;
    size_t nsw = 0;
    char why[300];
    if (as_sweep_parse(text, AS_CLI_MAX_CAPACITIES, &sw, &nsw, why, sizeof why))
        return as_cli_usage(cmd, "%s", why);
    uint64_t *nc = realloc(*caps, (*capcap + nsw) * sizeof *nc);
    if (!nc) {
        free(sw);
        as_cli_msg("out of host memory");
        return AS_EXIT_INPUT;
    }
    *caps = nc;
    *capcap += nsw;
    memcpy(nc + *ncap, sw, nsw * sizeof *sw);
    *ncap += nsw;
    free(sw);
    return AS_EXIT_OK;
}

int as_cmd_run(int argc, char **argv)
{
    const char *cmd = "run";
    as_policy_spec *specs = NULL;
    uint64_t *caps = NULL;
    size_t nspec = 0, ncap = 0;
    const char **ptext = calloc((size_t)argc + 1, sizeof *ptext);
    const char **cards = calloc((size_t)argc + 1, sizeof *cards); /* -c CARD, --device */
    size_t *card_slot = calloc((size_t)argc + 1, sizeof *card_slot), ncard = 0;
    const char *outside = NULL;
    unsigned shard = 0, nshards = 1, *units = calloc((size_t)argc + 1, sizeof *units), nunits = 0;
    const char *out_path = NULL, *seg_path = NULL, *tl_path = NULL, *segmap_path = NULL;
    size_t capcap = (size_t)argc + 1;
    as_report_fmt fmt = AS_REPORT_TABLE;
    uint64_t tl_every = DEFAULT_TIMELINE_EVERY, threads = 0, budget = AS_CLI_MEMORY_DEFAULT;
    int keep = 0, check = 0, quiet = 0, ret = AS_EXIT_OK, c, interrupted = 0, skip_bad = 0;
    unsigned char *bad = NULL; /* per trace: it failed (--skip-bad) */
    unsigned nbad = 0;
    size_t np = 0;
    run_ctx ctx = {0};
    as_report *rep = NULL;
    as_out *out = NULL, *seg_out = NULL, *tl_out = NULL, *segmap_out = NULL;

    caps = calloc((size_t)argc + 1, sizeof *caps);
    if (!ptext || !caps || !cards || !card_slot || !units) {
        as_cli_msg("out of host memory");
        ret = AS_EXIT_INPUT;
        goto done;
    }
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":p:c:f:o:qh", run_opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            ptext[np++] = optarg;
            break;
        case 'c':
            if (strstr(optarg, "..")) { /* -c LO..HI/STEP is a sweep */
                if ((ret = add_sweep(cmd, optarg, &caps, &ncap, &capcap)))
                    goto done;
                break;
            }
            if (as_card_find(optarg)) { /* resolved with --outside below */
                card_slot[ncard] = ncap++;
                cards[ncard++] = optarg;
                break;
            }
            if ((ret = as_cli_parse_capacity(cmd, optarg, &caps[ncap++])))
                goto done;
            break;
        case 'f':
            if (as_report_fmt_parse(optarg, &fmt)) {
                ret = as_cli_usage(cmd, "-f %s: the format is table, csv, json or jsonl", optarg);
                goto done;
            }
            break;
        case 'o':
            out_path = optarg;
            break;
        case OPT_TIMELINE:
            tl_path = optarg;
            break;
        case OPT_SEGMENTS:
            seg_path = optarg;
            break;
        case OPT_SEGMAP:
            segmap_path = optarg;
            break;
        case OPT_SWEEP:
            if ((ret = add_sweep(cmd, optarg, &caps, &ncap, &capcap)))
                goto done;
            break;
        case OPT_TL_EVERY:
            if (as_cli_parse_u64(optarg, &tl_every) || tl_every == 0) {
                ret = as_cli_usage(cmd, "--timeline-every %s: a positive count", optarg);
                goto done;
            }
            break;
        case OPT_THREADS:
            if (as_cli_parse_u64(optarg, &threads) || threads == 0 || threads > 1024) {
                ret = as_cli_usage(cmd, "--threads %s: a count from 1 to 1024", optarg);
                goto done;
            }
            break;
        case OPT_MEMORY:
            if (as_parse_bytes(optarg, &budget)) {
                ret = as_cli_usage(cmd, "--memory %s: bytes with an optional unit (2G, 512MiB)",
                                   optarg);
                goto done;
            }
            break;
        case OPT_DEVICE:
            card_slot[ncard] = ncap++;
            cards[ncard++] = optarg;
            break;
        case OPT_OUTSIDE:
            outside = optarg;
            break;
        case AS_CLI_OPT_SNAPSHOT_DEVICE:
            if ((ret = as_cli_snapshot_device(cmd, optarg)))
                goto done;
            break;
        case OPT_SHARD:
            if (as_cli_parse_shard(optarg, &shard, &nshards)) {
                ret = as_cli_usage(cmd, "--shard %s: I/N with 1 <= I <= N", optarg);
                goto done;
            }
            break;
        case OPT_KEEP:
            keep = 1;
            break;
        case OPT_SKIP_BAD:
            skip_bad = 1;
            break;
        case OPT_CHECK:
            check = 1;
            break;
        case 'q':
            quiet = 1;
            break;
        case 'h':
            fputs(run_help, stdout);
            goto done;
        case ':':
        default:
            ret = as_cli_bad_option(cmd, c, argv);
            goto done;
        }
    }
    if (optind >= argc) {
        ret = as_cli_usage(cmd, "no trace given");
        goto done;
    }
    if (np == 0)
        ptext[np++] = "torch";
    for (size_t i = 0; i < ncard; i++) /* a card is its usable memory */
        if ((ret = as_cli_device(cmd, cards[i], outside, fmt == AS_REPORT_TABLE && !out_path,
                                 &caps[card_slot[i]])))
            goto done;
    if (ncap == 0)
        caps[ncap++] = AS_CAPACITY_NONE;
    if (ncap > AS_CLI_MAX_CAPACITIES) {
        ret = as_cli_usage(cmd,
                           "%zu capacities from -c and --sweep, more than the %d allowed: use a "
                           "coarser sweep step",
                           ncap, AS_CLI_MAX_CAPACITIES);
        goto done;
    }
    specs = calloc(np, sizeof *specs);
    if (!specs) {
        as_cli_msg("out of host memory");
        ret = AS_EXIT_INPUT;
        goto done;
    }
    for (; nspec < np; nspec++)
        if ((ret = as_cli_parse_spec(cmd, ptext[nspec], &specs[nspec])))
            goto done;

    ctx.seg_path = seg_path;
    ctx.tl_path = tl_path;
    /* Every output is checked against the inputs and opened (as a temporary file beside
     * it) before any work, so a mistake costs nothing and a failure destroys nothing. */
    const char *outs[] = {out_path ? out_path : "-", seg_path, tl_path, segmap_path};
    if ((ret = as_out_check(cmd, outs, 4, (const char *const *)argv + optind,
                            (size_t)(argc - optind))))
        goto done;
    if ((ret = as_out_open(out_path, &out)) ||
        (seg_path && (ret = as_out_open(seg_path, &seg_out))) ||
        (tl_path && (ret = as_out_open(tl_path, &tl_out))) ||
        (segmap_path && (ret = as_out_open(segmap_path, &segmap_out))))
        goto done;
    if ((seg_out && as_runlog_open_stream(as_out_file(seg_out), AS_RUNLOG_SEGMENTS, &ctx.segs)) ||
        (tl_out && as_runlog_open_stream(as_out_file(tl_out), AS_RUNLOG_TIMELINE, &ctx.timeline)) ||
        (segmap_out && as_segmap_open_stream(as_out_file(segmap_out), &ctx.segmap)) ||
        as_report_create(&rep)) {
        as_cli_msg("out of host memory");
        ret = AS_EXIT_INPUT;
        goto done;
    }
    as_progress_start(&ctx.prog, quiet, "runs");
    unsigned mine = 0;
    for (int i = optind; i < argc; i++)
        if ((unsigned)(i - optind) % nshards == shard) { /* this shard's traces */
            mine++;
            ctx.w_total += trace_weight(argv[i]);
        }
    ctx.runs_total = (uint64_t)nspec * ncap * mine;
    as_engine_opts o = {
        .threads = (unsigned)threads,
        .keep_going = keep,
        .check = check,
        .timeline_every = ctx.timeline ? tl_every : 0,
        .on_segment = ctx.segs ? cb_segment : NULL,
        .on_sample = ctx.timeline ? cb_sample : NULL,
        .on_runs = ctx.prog.on ? cb_runs : NULL,
        .stop = &as_out_stop,
        .user = &ctx,
    };
    /* From here a first Ctrl-C stops the work after its current batch: the groups of runs
     * that finished are written, whole, and the command exits 130. */
    as_out_graceful(1);
    int ntr = argc - optind;
    if (!(bad = calloc((size_t)ntr, 1))) {
        as_cli_msg("out of host memory");
        ret = AS_EXIT_INPUT;
        goto done;
    }
    if (ntr > 1)
        ret = check_traces(argv + optind, ntr, skip_bad, bad, &nbad);
    for (int i = 0; i < ntr && !ret; i++) {
        if ((unsigned)i % nshards != shard)
            continue; /* another shard's trace */
        ctx.w_cur = trace_weight(argv[optind + i]);
        unsigned before = as_report_ntraces(rep);
        if (!bad[i])
            ret = run_trace(argv[optind + i], &o, &ctx, specs, nspec, caps, ncap, budget, rep);
        if (as_report_ntraces(rep) > before) /* the report's trace is unit i */
            units[nunits++] = (unsigned)i;
        if (ret == AS_EXIT_INPUT && skip_bad) { /* named; its runs are not in the report */
            bad[i] = 1;
            nbad++;
            ret = AS_EXIT_OK;
        }
        ctx.runs_before += (uint64_t)nspec * ncap;
        ctx.w_before += ctx.w_cur;
    }
    progress_clear(&ctx);
    if (ret == AS_EXIT_SIGNAL || as_out_stop) {
        interrupted = 1;
        ret = AS_EXIT_OK;
        if (!as_report_nruns(rep)) { /* nothing finished: the old files are worth more */
            as_cli_msg("interrupted before any run finished; no output written");
            ret = AS_EXIT_SIGNAL;
        }
    }
    if (ret)
        goto done;
    as_cli_warn_small_caps(rep);
    ret = as_cli_write_status(
        fmt == AS_REPORT_JSONL
            ? as_report_write_jsonl(rep, as_out_file(out), units, (unsigned)(argc - optind))
            : as_report_write(rep, as_out_file(out), fmt),
        as_out_name(out), ret);
done:
    /* Each output is renamed into place only when it and everything before it succeeded. */
    if (ctx.segs)
        ret = as_cli_write_status(as_runlog_close(ctx.segs), seg_path, ret);
    if (ctx.timeline)
        ret = as_cli_write_status(as_runlog_close(ctx.timeline), tl_path, ret);
    if (ctx.segmap)
        ret = as_cli_write_status(as_segmap_close(ctx.segmap), segmap_path, ret);
    ret = as_out_commit(seg_out, ret);
    ret = as_out_commit(tl_out, ret);
    ret = as_out_commit(segmap_out, ret);
    ret = as_out_commit(out, ret);
    if (nbad && !ret && !interrupted) {
        as_cli_msg("%u of %d traces could not be read (named above); the report holds the "
                   "others",
                   nbad, argc - optind);
        ret = AS_EXIT_INPUT;
    }
    if ((interrupted || as_out_stop) && !ret) { /* a signal during the writing counts too */
        as_cli_msg("interrupted: %u of %llu runs had finished; the outputs hold those",
                   rep ? as_report_nruns(rep) : 0, (unsigned long long)ctx.runs_total);
        ret = AS_EXIT_SIGNAL;
    }
    as_report_destroy(rep);
    for (size_t i = 0; i < nspec; i++)
        as_policy_spec_free(&specs[i]);
    free(specs);
    free(caps);
    free(cards);
    free(card_slot);
    free(units);
    free(ptext);
    free(bad);
    return ret;
}
