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

#include <sys/stat.h>

#include "bymark.h"
#include "cards.h"
#include "check.h"
#include "cli.h"
#include "driver.h"
#include "grow.h"
#include "mincap.h"
#include "options.h"
#include "outfile.h"
#include "progress.h"
#include "report.h"
#include "segmap.h"
#include "siterep.h"
#include "snapout.h"

#define DEFAULT_TIMELINE_EVERY 100

static const char run_help[] =
    "usage: allocsim [run] [options] TRACE...\n"
    "\n"
    "Replays each TRACE (native .zst, text, PyTorch snapshot pickle, RMM CSV; '-' is stdin)\n"
    "through every policy at every capacity and prints one row per run. Under the table,\n"
    "for a snapshot (up to 32 MiB), the line of 'allocsim check': whether the simulation\n"
    "reproduces the run it recorded.\n"
    "\n"
    "  -p, --policy SPEC     policy and knobs, '[name,]knob=value,...' or a\n"
    "                        PYTORCH_CUDA_ALLOC_CONF string; no name means torch.\n"
    "                        Repeatable; default: torch. 'allocsim policies' lists them.\n"
    "                        'recorded' is the setting a snapshot's allocator_settings\n"
    "                        holds (with its per_process_memory_fraction, if set).\n"
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
    "      --sites FILE      CSV of the call sites (snapshot frames) with the most bytes live\n"
    "                        and the most waste at each run's peak and OOM, and the OOM's\n"
    "                        request; the table then lists each run's top sites too, and\n"
    "                        -f json holds the rows as \"sites\"\n"
    "      --by-mark[=TEXT]  break the table's runs down between the trace's marks whose\n"
    "                        label contains TEXT (all marks without it): per interval the\n"
    "                        peak requested, each run's peak reserved and device calls; a\n"
    "                        snapshot's annotations are marks 'START name' and 'END name';\n"
    "                        with -f json, the rows are \"by_mark\" (not with csv, jsonl)\n"
    "      --snapshot-out FILE  write the run as a torch.cuda.memory._dump_snapshot()\n"
    "                        pickle (its device_traces under the simulated policy and\n"
    "                        capacity, the segments at its end, the trace's frames) for\n"
    "                        pytorch.org/memory_viz; one trace (a file), -p and -c only\n"
    "      --sweep LO:HI:STEP  add the capacities LO, LO+STEP, ... <= HI (also LO..HI/STEP),\n"
    "                        e.g. --sweep 8GiB:12GiB:64MiB -f csv for 'allocsim plot capacity';\n"
    "                        at most 16384 capacities in all\n"
    "      --keep-going      after an OOM, skip the failed request and go on (counts OOMs)\n"
    "      --no-caught-ooms  an OOM at a cuDNN workspace request stops the run too; by\n"
    "                        default one is caught as PyTorch does and the fallback needs\n"
    "                        no workspace (a snapshot recorded with C++ frames names\n"
    "                        these requests; sim/REPORT.md, 'OOMs treated as caught')\n"
    "      --skip-bad        with several traces, name each one that cannot be read, report\n"
    "                        the others and exit 1; without it every trace is decoded\n"
    "                        before any run, and the first bad one stops the command\n"
    "      --device-streams S  the CUDA streams the traced process made, whose pages take\n"
    "                        room in the device's heap and memory (replay/PLACEMENT.md\n"
    "                        section 10): none (the default: allocsim-replay makes none),\n"
    "                        pytorch (PyTorch's pool, 128 streams on an H100/H200, made\n"
    "                        before the first allocation on a second stream), each (one\n"
    "                        per trace stream at its first allocation: allocsim-replay\n"
    "                        --async), or N (N streams, made as pytorch's)\n"
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
    OPT_SITES,
    OPT_BY_MARK,
    OPT_SWEEP,
    OPT_KEEP,
    OPT_SKIP_BAD,
    OPT_CHECK,
    OPT_SNAPOUT,
    OPT_STREAMS,
};

static const struct option run_opts[] = {
    {"capacity", required_argument, NULL, 'c'},
    {"format", required_argument, NULL, 'f'},
    {"output", required_argument, NULL, 'o'},
    {"timeline", required_argument, NULL, OPT_TIMELINE},
    {"timeline-every", required_argument, NULL, OPT_TL_EVERY},
    {"segments", required_argument, NULL, OPT_SEGMENTS},
    {"segment-map", required_argument, NULL, OPT_SEGMAP},
    {"sites", required_argument, NULL, OPT_SITES},
    {"by-mark", optional_argument, NULL, OPT_BY_MARK},
    {"sweep", required_argument, NULL, OPT_SWEEP},
    {"keep-going", no_argument, NULL, OPT_KEEP},
    {"skip-bad", no_argument, NULL, OPT_SKIP_BAD},
    {"check", no_argument, NULL, OPT_CHECK},
    {"snapshot-out", required_argument, NULL, OPT_SNAPOUT},
    {"device-streams", required_argument, NULL, OPT_STREAMS},
    AS_CLI_BASE_OPTIONS,
    AS_CLI_TRACE_OPTIONS,
    {NULL, 0, NULL, 0},
};

/* The command line of one `run`, as read. */
typedef struct run_args {
    as_cli_common co;   /* -p, --outside, --threads, --memory, --shard, -q, ... */
    const char **ptext; /* co's -p array */
    char recorded[300]; /* -p recorded, resolved from the traces */
    uint64_t *caps;     /* -c and --sweep, in order; a card's slot is filled once all is read */
    size_t ncap, capcap;
    const char **cards; /* -c CARD, --device: resolved with --outside */
    size_t *card_slot, ncard;
    const char *out_path, *seg_path, *tl_path, *segmap_path, *sites_path, *snap_path;
    const char *by_mark; /* --by-mark's TEXT ("" for every mark), NULL without it */
    as_report_fmt fmt;
    uint64_t tl_every;
    int keep, check, skip_bad, help;
    uint32_t streams; /* --device-streams: as_engine_opts.streams */
} run_args;

/* The outputs of one `run` and the progress line, for the driver's hooks. */
typedef struct run_out {
    as_out *out, *seg, *tl, *map, *sites, *snap;
    as_runlog *segs, *timeline;
    as_segmap *segmap;
    as_snapout *snapout; /* --snapshot-out: the run's records */
    as_run_result res;   /* and its result */
    as_progress prog;
    int usage; /* the driver's failure was a usage error */
} run_out;

/* --sweep LO:HI:STEP (or -c LO..HI/STEP): appends the capacities. 0 or an exit status. */
static int add_sweep(const char *cmd, const char *text, run_args *a)
{
    uint64_t *sw = NULL;
    size_t nsw = 0;
    char why[300];
    if (as_sweep_parse(text, AS_CLI_MAX_CAPACITIES, &sw, &nsw, why, sizeof why))
        return as_cli_usage(cmd, "%s", why);
    uint64_t *nc = realloc(a->caps, (a->capcap + nsw) * sizeof *nc);
    if (!nc) {
        free(sw);
        as_cli_msg("out of host memory");
        return AS_EXIT_INPUT;
    }
    a->caps = nc;
    a->capcap += nsw;
    memcpy(nc + a->ncap, sw, nsw * sizeof *sw);
    a->ncap += nsw;
    free(sw);
    return AS_EXIT_OK;
}

/* -c CAP: a sweep, a card (resolved with --outside once all is read) or bytes. */
static int add_capacity(const char *cmd, const char *text, run_args *a)
{
    if (strstr(text, "..")) /* -c LO..HI/STEP is a sweep */
        return add_sweep(cmd, text, a);
    if (as_card_find(text)) {
        a->card_slot[a->ncard] = a->ncap++;
        a->cards[a->ncard++] = text;
        return AS_EXIT_OK;
    }
    return as_cli_parse_capacity(cmd, text, &a->caps[a->ncap++]);
}

/* One option of getopt_long's: 0 or an exit status. */
static int run_option(const char *cmd, int c, char **argv, run_args *a)
{
    switch (c) {
    case 'c':
        return add_capacity(cmd, optarg, a);
    case AS_CLI_OPT_DEVICE: /* each is a capacity, in order with -c */
        a->card_slot[a->ncard] = a->ncap++;
        a->cards[a->ncard++] = optarg;
        return 0;
    case 'f':
        if (as_report_fmt_parse(optarg, &a->fmt))
            return as_cli_usage(cmd, "-f %s: the format is table, csv, json or jsonl", optarg);
        return 0;
    case 'o':
        a->out_path = optarg;
        return 0;
    case OPT_TIMELINE:
        a->tl_path = optarg;
        return 0;
    case OPT_SEGMENTS:
        a->seg_path = optarg;
        return 0;
    case OPT_SEGMAP:
        a->segmap_path = optarg;
        return 0;
    case OPT_SITES:
        a->sites_path = optarg;
        return 0;
    case OPT_BY_MARK:
        a->by_mark = optarg ? optarg : "";
        return 0;
    case OPT_SWEEP:
        return add_sweep(cmd, optarg, a);
    case OPT_TL_EVERY:
        if (as_cli_parse_u64(optarg, &a->tl_every) || a->tl_every == 0)
            return as_cli_usage(cmd, "--timeline-every %s: a positive count", optarg);
        return 0;
    case OPT_KEEP:
        a->keep = 1;
        return 0;
    case OPT_SKIP_BAD:
        a->skip_bad = 1;
        return 0;
    case OPT_CHECK:
        a->check = 1;
        return 0;
    case OPT_STREAMS:
        return as_cli_parse_streams(cmd, optarg, &a->streams);
    case OPT_SNAPOUT:
        a->snap_path = optarg;
        return 0;
    case 'h':
        a->help = 1;
        return 0;
    }
    int ret = as_cli_common_option(cmd, c, optarg, &a->co);
    return ret == AS_CLI_NOT_COMMON ? as_cli_bad_option(cmd, c, argv) : ret;
}

/* Reads the command line into a (its arrays sized for argc). 0 or an exit status; a->help
 * when --help was printed. */
static int run_parse(const char *cmd, int argc, char **argv, run_args *a)
{
    size_t n = (size_t)argc + 1;
    a->fmt = AS_REPORT_TABLE;
    a->tl_every = DEFAULT_TIMELINE_EVERY;
    a->capcap = n;
    a->ptext = calloc(n, sizeof *a->ptext);
    a->caps = calloc(n, sizeof *a->caps);
    a->cards = calloc(n, sizeof *a->cards);
    a->card_slot = calloc(n, sizeof *a->card_slot);
    if (!a->ptext || !a->caps || !a->cards || !a->card_slot) {
        as_cli_msg("out of host memory");
        return AS_EXIT_INPUT;
    }
    as_cli_common_init(&a->co, a->ptext, n, "policies");
    optind = 1;
    opterr = 0;
    int c, ret = 0;
    while (!ret && !a->help && (c = getopt_long(argc, argv, ":p:c:f:o:qh", run_opts, NULL)) != -1)
        ret = run_option(cmd, c, argv, a);
    if (ret || a->help) {
        if (a->help)
            fputs(run_help, stdout);
        return ret;
    }
    if (optind >= argc)
        return as_cli_usage(cmd, "no trace given");
    if (a->by_mark && (a->fmt == AS_REPORT_CSV || a->fmt == AS_REPORT_JSONL))
        return as_cli_usage(cmd, "--by-mark breaks down the table or -f json, not -f %s",
                            a->fmt == AS_REPORT_CSV ? "csv" : "jsonl");
    return 0;
}

/* What `run` gathers in the runs' own pass (the driver's as_driver_pass), where each would
 * read the trace again: the call sites (siterep.h) and, under the table, for each snapshot
 * small enough that its events cost little to keep (a file of at most 32 MiB), the line of
 * `allocsim check` (check.h: whether the simulation reproduces the run it recorded) from
 * the events the runs' first group read. Inputs that are no snapshot (the reader knows),
 * or hold no segment entries, get no line. */
typedef struct run_pass {
    as_siterep *sites;
    int sites_on;     /* this group's trace has call sites */
    int check;        /* the table's check lines are wanted */
    const char *path; /* this group's trace */
    as_event *ev;     /* its events without the MARKs, for the check; NULL: none */
    size_t nev, capev;
    int collect;           /* this group keeps its events (the trace's first group) */
    as_check_result *line; /* by report trace: its check, when has[t] */
    unsigned char *has;
    size_t nline;
} run_pass;

static int pass_begin(void *user, const char *path, const as_trace_reader *rd, size_t r0, size_t n)
{
    run_pass *p = user;
    struct stat sb;
    int want = 0, rc = p->sites ? as_siterep_group(p->sites, rd, n) : 0;
    if (rc < 0)
        return rc;
    p->sites_on = rc > 0;
    if (p->sites_on)
        want |=
            AS_DRIVER_EVENTS | AS_DRIVER_WALKS | (as_siterep_full(p->sites) ? AS_DRIVER_PEAKS : 0);
    p->path = path;
    p->nev = 0;
    p->collect = p->check && r0 == 0 && as_trace_reader_format(rd) == AS_FMT_TORCH_PICKLE &&
                 strcmp(path, "-") && !stat(path, &sb) && sb.st_size <= (32 << 20);
    return want | (p->collect ? AS_DRIVER_EVENTS : 0);
}

static void pass_events(void *user, const as_event *ev, size_t n)
{
    run_pass *p = user;
    if (p->sites_on)
        as_siterep_events(p->sites, ev, n);
    if (!p->collect)
        return;
    if (as_grow((void **)&p->ev, &p->capev, p->nev + n, sizeof *p->ev, 4096) < 0) {
        p->collect = 0; /* no line then, as when the check could not run */
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (ev[i].op != AS_OP_MARK) /* the check needs no labels (nor do they outlive it) */
            p->ev[p->nev++] = ev[i];
}

static void pass_walk(void *user, unsigned run, uint64_t event, uint64_t alloc, const char *why,
                      const as_walk_item *it)
{
    as_siterep_walk(((run_pass *)user)->sites, run, event, alloc, why, it);
}

static int pass_keep(void *user, const as_report *rep, unsigned t, as_trace_reader *rd,
                     const as_engine *e, unsigned base)
{
    run_pass *p = user;
    int rc = p->sites ? as_siterep_keep(p->sites, rep, t, rd, e, base) : 0;
    if (rc || !p->collect)
        return rc;
    p->collect = 0;
    size_t had = p->nline;
    unsigned char *h;
    if (as_grow((void **)&p->line, &p->nline, (size_t)t + 1, sizeof *p->line, 8) < 0 ||
        !(h = realloc(p->has, p->nline)))
        return AS_ENOMEM;
    memset(h + had, 0, p->nline - had);
    p->has = h;
    as_trace_error err;
    memset(&err, 0, sizeof err);
    p->has[t] = as_check_events(rd, p->path, p->ev, p->nev, &p->line[t], &err) == 0;
    return 0;
}

static void pass_free(run_pass *p)
{
    as_siterep_destroy(p->sites);
    free(p->ev);
    free(p->line);
    free(p->has);
}

/* The check lines under the table, trace by trace. */
static void run_check_lines(FILE *f, const as_report *rep, const run_pass *p)
{
    for (unsigned t = 0; t < as_report_ntraces(rep) && t < p->nline; t++) {
        char line[1200];
        const char *path;
        if (!p->has[t])
            continue;
        as_report_trace(rep, t, &path);
        as_check_line(&p->line[t], line, sizeof line);
        as_cli_put_safe(f, path);
        fputs(": check: ", f);
        as_cli_put_safe(f, line);
        fputc('\n', f);
    }
}

/* -p recorded becomes the setting the snapshots recorded (and, with no -c, its memory
 * fraction the capacity). 0 or an exit status. */
static int run_recorded(const char *cmd, run_args *a, char **traces, int ntr)
{
    int ret;
    for (size_t i = 0; i < a->co.np; i++) {
        if (strcmp(a->ptext[i], "recorded") != 0)
            continue;
        uint64_t cap = AS_CAPACITY_NONE;
        if (!a->recorded[0] && (ret = as_cli_recorded(cmd, (const char *const *)traces, ntr,
                                                      a->recorded, sizeof a->recorded, &cap)))
            return ret;
        if (cap != AS_CAPACITY_NONE && a->ncap == 0 && a->ncard == 0)
            a->caps[a->ncap++] = cap;
        a->ptext[i] = a->recorded;
    }
    return 0;
}

/* The runs' specs and capacities: the defaults, each card's usable memory, the limit on
 * capacities, every -p parsed. 0 or an exit status. */
static int run_resolve(const char *cmd, run_args *a, as_policy_spec **specs, size_t *nspec)
{
    int ret;
    if (a->co.np == 0)
        a->ptext[a->co.np++] = "torch";
    for (size_t i = 0; i < a->ncard; i++) /* a card is its usable memory */
        if ((ret = as_cli_device(cmd, a->cards[i], a->co.outside,
                                 a->fmt == AS_REPORT_TABLE && !a->out_path,
                                 &a->caps[a->card_slot[i]])))
            return ret;
    if (a->ncap == 0)
        a->caps[a->ncap++] = AS_CAPACITY_NONE;
    if (a->ncap > AS_CLI_MAX_CAPACITIES)
        return as_cli_usage(cmd,
                            "%zu capacities from -c and --sweep, more than the %d allowed: use a "
                            "coarser sweep step",
                            a->ncap, AS_CLI_MAX_CAPACITIES);
    if (!(*specs = calloc(a->co.np, sizeof **specs))) {
        as_cli_msg("out of host memory");
        return AS_EXIT_INPUT;
    }
    for (; *nspec < a->co.np; (*nspec)++)
        if ((ret = as_cli_parse_spec(cmd, a->ptext[*nspec], &(*specs)[*nspec])))
            return ret;
    return 0;
}

/* Every output is checked against the inputs and opened (as a temporary file beside it)
 * before any work, so a mistake costs nothing and a failure destroys nothing. */
static int run_open(const char *cmd, const run_args *a, char **traces, int ntr, run_out *ro)
{
    const char *outs[] = {a->out_path ? a->out_path : "-",
                          a->seg_path,
                          a->tl_path,
                          a->segmap_path,
                          a->sites_path,
                          a->snap_path};
    int ret = as_out_check(cmd, outs, 6, (const char *const *)traces, (size_t)ntr);
    if (ret || (ret = as_out_open(a->out_path, &ro->out)) ||
        (a->snap_path && (ret = as_out_open(a->snap_path, &ro->snap))) ||
        (a->seg_path && (ret = as_out_open(a->seg_path, &ro->seg))) ||
        (a->tl_path && (ret = as_out_open(a->tl_path, &ro->tl))) ||
        (a->segmap_path && (ret = as_out_open(a->segmap_path, &ro->map))) ||
        (a->sites_path && (ret = as_out_open(a->sites_path, &ro->sites))))
        return ret;
    if ((ro->seg && as_runlog_open_stream(as_out_file(ro->seg), AS_RUNLOG_SEGMENTS, &ro->segs)) ||
        (ro->tl && as_runlog_open_stream(as_out_file(ro->tl), AS_RUNLOG_TIMELINE, &ro->timeline)) ||
        (ro->map && as_segmap_open_stream(as_out_file(ro->map), &ro->segmap)) ||
        (ro->snap && as_snapout_create(&ro->snapout))) {
        as_cli_msg("out of host memory");
        return AS_EXIT_INPUT;
    }
    return 0;
}

/* --snapshot-out is one run: one trace (a file, read again), one spec, one capacity. */
static int snap_usage(const char *cmd, const run_args *a, char **traces, int ntr, size_t nspec)
{
    if (!a->snap_path)
        return 0;
    if (ntr != 1 || nspec != 1 || a->ncap != 1)
        return as_cli_usage(cmd,
                            "--snapshot-out writes one run: give one trace, one -p and one -c "
                            "(here %d, %zu and %zu)",
                            ntr, nspec, a->ncap);
    if (strcmp(traces[0], "-") == 0)
        return as_cli_usage(cmd, "--snapshot-out reads the trace twice: give a file, not stdin");
    return 0;
}

static void snap_segment(void *user, const as_seg_record *r)
{
    as_snapout_segment(((run_out *)user)->snapout, r);
}

static void snap_block(void *user, const as_block_record *r)
{
    as_snapout_block(((run_out *)user)->snapout, r);
}

static void snap_done(void *user, const as_driver_group *g, const as_engine *e)
{
    (void)g;
    ((run_out *)user)->res = *as_engine_result(e, 0);
}

/* Writes the --snapshot-out pickle of the one run. 0 or an exit status. */
static int snap_write(const run_args *a, const as_policy_spec *spec, char **traces, run_out *ro)
{
    char why[600];
    if (!ro->snap)
        return 0;
    if (as_snapout_write(ro->snapout, traces[0], as_cli_reader_opts(), spec, &ro->res,
                         as_out_file(ro->snap), why, sizeof why)) {
        as_cli_msg("%s: %s", a->snap_path, why);
        return AS_EXIT_INPUT;
    }
    return 0;
}

static void on_progress(void *user, const as_driver_progress *p)
{
    run_out *ro = user;
    if (p->clear) {
        as_progress_clear(&ro->prog);
        return;
    }
    ro->prog.label = p->label;
    as_progress_show(&ro->prog, p->done, p->total, p->frac);
}

static void on_fail(void *user, const as_driver_fail *f)
{
    run_out *ro = user;
    as_progress_clear(&ro->prog);
    ro->usage = f->usage;
    if (f->usage)
        as_cli_usage("run", "%s", f->msg);
    else
        as_cli_msg("%s", f->msg);
}

static void on_note(void *user, const char *msg)
{
    as_progress_clear(&((run_out *)user)->prog);
    as_cli_msg("%s", msg);
}

/* The driver over the traces, into rep; units (one per trace) get the report's traces'
 * positions. 0 or an exit status; *interrupted when a signal stopped the work after some
 * runs had finished (the report holds those). */
static int run_traces(const run_args *a, const as_policy_spec *specs, size_t nspec, char **traces,
                      int ntr, run_out *ro, run_pass *pass, as_report *rep, as_driver_result *res,
                      int *interrupted)
{
    const as_driver_pass hooks = {pass_begin, pass_events, pass_walk, pass_keep, pass};
    as_driver_opts d = {
        .specs = specs,
        .nspec = nspec,
        .caps = a->caps,
        .ncap = a->ncap,
        .reader = as_cli_reader_opts(),
        .engine = {.threads = (unsigned)a->co.threads,
                   .no_caught_ooms = a->co.no_caught,
                   .keep_going = a->keep,
                   .check = a->check,
                   .streams = a->streams,
                   .timeline_every = a->tl_every,
                   .stop = &as_out_stop},
        .budget = a->co.memory,
        .segs = ro->segs,
        .timeline = ro->timeline,
        .seg_name = a->seg_path,
        .tl_name = a->tl_path,
        .segmap = ro->segmap,
        .pass = &hooks,
        .skip_bad = a->skip_bad,
        .shard = a->co.shard,
        .nshards = a->co.nshards,
        .user = ro,
        .on_progress = ro->prog.on ? on_progress : NULL,
        .on_fail = on_fail,
        .on_note = on_note,
        .on_segment = ro->snapout ? snap_segment : NULL,
        .on_block = ro->snapout ? snap_block : NULL,
        .on_group_done = ro->snapout ? snap_done : NULL,
    };
    /* From here a first Ctrl-C stops the work after its current batch: the groups of runs
     * that finished are written, whole, and the command exits 130. */
    as_out_graceful(1);
    int rc = as_driver_run(&d, traces, (unsigned)ntr, rep, res);
    as_progress_clear(&ro->prog);
    int ret = rc == AS_ENGINE_STOPPED ? AS_EXIT_SIGNAL
              : rc < 0                ? (ro->usage ? AS_EXIT_USAGE : AS_EXIT_INPUT)
                                      : AS_EXIT_OK;
    if (ret == AS_EXIT_SIGNAL || as_out_stop) {
        *interrupted = 1;
        ret = AS_EXIT_OK;
        if (!as_report_nruns(rep)) { /* nothing finished: the old files are worth more */
            as_cli_msg("interrupted before any run finished; no output written");
            ret = AS_EXIT_SIGNAL;
        }
    }
    return ret;
}

/* What the report adds under the table or in -f json: call sites (siterep.h, gathered in
 * the runs' pass) for a table (each OOM's request and pinning sites when the trace has
 * frames) or --sites, and the breakdown between marks (bymark.h, a second pass after the
 * runs) for --by-mark. */
typedef struct run_extra {
    run_pass pass;     /* the call sites and the check lines, from the runs' own pass */
    as_bymark **marks; /* one per trace of the report */
    unsigned nmarks;
} run_extra;

static void extra_free(run_extra *x)
{
    pass_free(&x->pass);
    for (unsigned t = 0; t < x->nmarks; t++)
        as_bymark_destroy(x->marks[t]);
    free(x->marks);
}

/* A second pass's failure, said: a trace error, or the engine's why. An exit status. */
static int extra_fail(int rc, const as_trace_error *err, const char *path, const char *why)
{
    if (err->code < 0)
        return as_cli_trace_fail(err, path);
    as_cli_msg("%s: %s", path, why[0] ? why : as_strerror(rc));
    return AS_EXIT_INPUT;
}

/* The runs' own pass's collectors, before the runs: the call sites when the report shows
 * them, the check lines for a table. 0 or an exit status. */
static int extra_sites(const run_args *a, run_extra *x)
{
    x->pass.check = a->fmt == AS_REPORT_TABLE;
    if ((a->fmt == AS_REPORT_TABLE || a->sites_path) &&
        as_siterep_create(a->sites_path != NULL, &x->pass.sites)) {
        as_cli_msg("out of host memory");
        return AS_EXIT_INPUT;
    }
    return AS_EXIT_OK;
}

/* The --by-mark pass, after the runs. 0 or an exit status. */
static int extra_compute(const run_args *a, const as_policy_spec *specs, size_t nspec,
                         const as_report *rep, run_extra *x)
{
    unsigned nt = as_report_ntraces(rep);
    char why[300];
    if (!a->by_mark)
        return AS_EXIT_OK;
    if (!(x->marks = calloc(nt ? nt : 1, sizeof *x->marks))) {
        as_cli_msg("out of host memory");
        return AS_EXIT_INPUT;
    }
    for (unsigned t = 0; t < nt; t++) {
        const char *path;
        as_report_trace(rep, t, &path);
        as_trace_error err = {0};
        why[0] = 0;
        int rc = as_bymark_trace(rep, t, path, as_cli_reader_opts(), specs, nspec, a->ncap,
                                 a->by_mark, &x->marks[t], &err, why, sizeof why);
        x->nmarks += rc == 0;
        if (rc < 0)
            return extra_fail(rc, &err, path, why);
    }
    return AS_EXIT_OK;
}

/* After a table: the sites' lines, then each trace's runs between its marks; and the
 * --sites CSV file. 0 or an exit status. */
static int extra_write(const run_args *a, const run_out *ro, const as_report *rep,
                       const run_extra *x, FILE *table)
{
    int rc = 0;
    if (a->fmt == AS_REPORT_TABLE && x->pass.sites)
        rc = as_siterep_write_text(x->pass.sites, rep, table, ro->sites != NULL, 5);
    for (unsigned t = 0; rc == 0 && a->fmt == AS_REPORT_TABLE && t < x->nmarks; t++)
        rc = as_bymark_write_text(x->marks[t], rep, table);
    if (rc)
        return as_cli_write_error(AS_EIO, "write failed", "the report", AS_EXIT_OK);
    if (ro->sites && as_siterep_write_csv(x->pass.sites, rep, as_out_file(ro->sites), 10))
        return as_cli_write_error(AS_EIO, "write failed", a->sites_path, AS_EXIT_OK);
    return AS_EXIT_OK;
}

/* -f json: the report, then its "by_mark" and "sites" members (sim/REPORT.md). Returns 0,
 * AS_ENOMEM or AS_EIO (why). */
static int json_write(const run_args *a, const as_report *rep, const run_extra *x, FILE *f,
                      char *why, size_t why_len)
{
    int rc = as_report_write_json_open(rep, f);
    unsigned n = 0;
    if (rc == 0 && x->marks) {
        fputs(",\n \"by_mark\": {\"match\": ", f);
        as_report_json_str(f, a->by_mark);
        fputs(", \"rows\": [", f);
        for (unsigned t = 0; rc == 0 && t < x->nmarks; t++)
            rc = as_bymark_write_json(x->marks[t], rep, f, &n);
        fputs("]}", f);
    }
    if (rc == 0 && x->pass.sites) {
        fputs(",\n \"sites\": ", f);
        rc = as_siterep_write_json(x->pass.sites, f, 10);
    }
    if (rc == AS_ENOMEM) {
        snprintf(why, why_len, "out of host memory");
        return rc;
    }
    fputs("}\n", f);
    if (fflush(f) || ferror(f) || rc)
        return as_errno_error(errno ? errno : EIO, "write failed", why, why_len);
    return 0;
}

/* Closes the logs and renames each output into place only when it and everything before it
 * succeeded; then the messages about skipped traces and an interrupt. The final status. */
static int run_close(const run_args *a, run_out *ro, int ret, int interrupted, int ntr,
                     const as_driver_result *res, const as_report *rep)
{
    char why[300];
    if (ro->segs)
        ret = as_cli_write_error(as_runlog_close(ro->segs, why, sizeof why), why, a->seg_path, ret);
    if (ro->timeline)
        ret = as_cli_write_error(as_runlog_close(ro->timeline, why, sizeof why), why, a->tl_path,
                                 ret);
    if (ro->segmap)
        ret = as_cli_write_error(as_segmap_close(ro->segmap, why, sizeof why), why, a->segmap_path,
                                 ret);
    ret = as_out_commit(ro->seg, ret);
    ret = as_out_commit(ro->tl, ret);
    ret = as_out_commit(ro->map, ret);
    ret = as_out_commit(ro->sites, ret);
    ret = as_out_commit(ro->snap, ret);
    as_snapout_free(ro->snapout);
    ret = as_out_commit(ro->out, ret);
    if (res->nbad && !ret && !interrupted) {
        as_cli_msg("%u of %d traces could not be read (named above); the report holds the "
                   "others",
                   res->nbad, ntr);
        ret = AS_EXIT_INPUT;
    }
    if ((interrupted || as_out_stop) && !ret) { /* a signal during the writing counts too */
        as_cli_msg("interrupted: %u of %llu runs had finished; the outputs hold those",
                   rep ? as_report_nruns(rep) : 0, (unsigned long long)res->runs_total);
        ret = AS_EXIT_SIGNAL;
    }
    return ret;
}

int as_cmd_run(int argc, char **argv)
{
    const char *cmd = "run";
    run_args a = {0};
    run_out ro = {0};
    as_policy_spec *specs = NULL;
    size_t nspec = 0;
    as_report *rep = NULL;
    as_driver_result res = {0};
    run_extra extra = {0};
    int interrupted = 0, ret = run_parse(cmd, argc, argv, &a);
    char **traces = argv + optind;
    int ntr = argc - optind;
    if (ret || a.help || (ret = run_recorded(cmd, &a, traces, ntr)) ||
        (ret = run_resolve(cmd, &a, &specs, &nspec)) ||
        (ret = snap_usage(cmd, &a, traces, ntr, nspec)) ||
        (ret = run_open(cmd, &a, traces, ntr, &ro)))
        goto done;
    if (as_report_create(&rep) || !(res.units = calloc((size_t)ntr, sizeof *res.units))) {
        as_cli_msg("out of host memory");
        ret = AS_EXIT_INPUT;
        goto done;
    }
    as_progress_start(&ro.prog, a.co.quiet, "runs");
    if ((ret = extra_sites(&a, &extra)) || (ret = run_traces(&a, specs, nspec, traces, ntr, &ro,
                                                             &extra.pass, rep, &res, &interrupted)))
        goto done;
    if (interrupted && ro.snap) { /* the run did not finish: keep the old file */
        as_out_abort(ro.snap);
        ro.snap = NULL;
    }
    if ((ret = snap_write(&a, specs, traces, &ro)))
        goto done;
    as_cli_warn_small_caps(rep);
    FILE *f = as_out_file(ro.out);
    char why[300];
    /* JSON holds the --by-mark pass's results, so it runs first; a table shows its runs
     * before it starts. */
    if (a.fmt == AS_REPORT_JSON && !interrupted &&
        (ret = extra_compute(&a, specs, nspec, rep, &extra)))
        goto done;
    int wrc = a.fmt == AS_REPORT_JSONL
                  ? as_report_write_jsonl(rep, f, res.units, (unsigned)ntr, why, sizeof why)
              : a.fmt == AS_REPORT_JSON ? json_write(&a, rep, &extra, f, why, sizeof why)
                                        : as_report_write(rep, f, a.fmt, why, sizeof why);
    ret = as_cli_write_error(wrc, why, as_out_name(ro.out), ret);
    if (!ret && a.fmt == AS_REPORT_TABLE)
        run_check_lines(f, rep, &extra.pass);
    if (!ret && !interrupted && a.fmt != AS_REPORT_JSON)
        ret = extra_compute(&a, specs, nspec, rep, &extra);
    if (!ret && !interrupted)
        ret = extra_write(&a, &ro, rep, &extra, f);
done:
    ret = run_close(&a, &ro, ret, interrupted, ntr, &res, rep);
    extra_free(&extra);
    as_report_destroy(rep);
    for (size_t i = 0; i < nspec; i++)
        as_policy_spec_free(&specs[i]);
    free(specs);
    free(a.caps);
    free(a.cards);
    free(a.card_slot);
    free(a.ptext);
    free(res.units);
    return ret;
}
