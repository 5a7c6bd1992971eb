/*
 * cmd_tune.c - `allocsim tune TRACE... --device CARD`: which PYTORCH_CUDA_ALLOC_CONF fits
 * the card, with how much room, and the line to paste. The search, the ranking and the
 * curves are sim/tune.c; the card model is sim/cards.c. CLI code: it prints and returns
 * exit statuses.
 *
 *   allocsim tune --device CARD [--outside BYTES] [--device-streams S] [-p CONF]...
 *                 [--curves N] [--top N] [-f table|json|jsonl] [--shard I/N] [-j N]
 *                 [--memory BYTES] TRACE...
 *
 * --shard I/N takes the traces whose 0-based position k among the TRACE arguments has
 * k % N == I - 1; `allocsim merge` puts the JSON Lines of the shards back in that order.
 */
#include <getopt.h>
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cards.h"
#include "cli.h"
#include "driver.h"
#include "options.h"
#include "outfile.h"
#include "report.h"
#include "tune.h"

#define MAX_CONFS 1024
#define DEFAULT_CURVES 8
#define DEFAULT_TOP 12

static const char usage_text[] =
    "usage: allocsim tune --device CARD [options] TRACE...\n"
    "  Runs the PYTORCH_CUDA_ALLOC_CONF settings users set (expandable_segments,\n"
    "  max_split_size_mb 32..1024, roundup_power2_divisions 2..16 and a list,\n"
    "  garbage_collection_threshold 0.6/0.8, and their combinations: 252) at the card's\n"
    "  usable memory (total - outside), ranks them, runs the capacity curves of the best\n"
    "  (2 MiB steps up to the usable size) and prints the line to paste.\n"
    "options:\n"
    "  --device CARD       a card preset (--cards lists them) or its total bytes (24GB)\n"
    "  -c CARD             the same\n"
    "  --outside BYTES     memory outside the allocator, or a preset (none, context,\n"
    "                      cublas, cublas-bf16, nccl, train-start, train); default train,\n"
    "                      788 MB (sim/CARDS.md)\n"
    "  --device-streams S  the CUDA streams the job makes, whose 2 MiB pages the card\n"
    "                      loses: pytorch (the default: PyTorch's pool, 128 streams, 70 MiB\n"
    "                      on an H100/H200, if the trace has a second stream), none, each\n"
    "                      (one per trace stream) or N (as for run); none when --outside\n"
    "                      already holds them (the default with --outside nccl, or a\n"
    "                      figure measured in the job itself)\n"
    "  --snapshot-device N  which device of a multi-device snapshot (as for run)\n"
    "  --no-caught-ooms    an OOM at a cuDNN workspace request fails the setting too\n"
    "                      (as for run)\n"
    "  -p CONF             try only these settings (repeatable; PYTORCH_CUDA_ALLOC_CONF text,\n"
    "                      'default' for none)\n"
    "  --curves N          capacity curves for the N best distinct settings (default 8)\n"
    "  --top N             rows of the table (default 12; the default setting is always shown)\n"
    "  -f, --format F      table (default), json, or jsonl (one line per trace)\n"
    "  --shard I/N         only the traces at positions k with k % N == I - 1 (1 <= I <= N)\n"
    "  -j, --threads N     engine threads (default: one per core)\n"
    "  --memory BYTES      host memory for the runs in flight (default 2G)\n"
    "  -q, --quiet         no progress line (shown only on a terminal)\n"
    "  --cards             list the card and outside presets and exit\n"
    "Ranking: fits first; then lower peak reserved (among OOMs: the later OOM); ties: the\n"
    "default, then fewer knobs, then less device time. The curves re-order the best by the\n"
    "smallest capacity from which every capacity up to the card fits; within 64 MiB of the\n"
    "lowest that is a tie, won as above.\n";

enum { FMT_TABLE, FMT_JSON, FMT_JSONL };
enum { OPT_CURVES = 256, OPT_TOP, OPT_CARDS, OPT_STREAMS };

static const struct option tune_opts[] = {
    {"capacity", required_argument, NULL, 'c'},
    {"curves", required_argument, NULL, OPT_CURVES},
    {"top", required_argument, NULL, OPT_TOP},
    {"format", required_argument, NULL, 'f'},
    {"cards", no_argument, NULL, OPT_CARDS},
    {"device-streams", required_argument, NULL, OPT_STREAMS},
    AS_CLI_BASE_OPTIONS,
    AS_CLI_TRACE_OPTIONS,
    {NULL, 0, NULL, 0},
};

int as_cli_device(const char *cmd, const char *card, const char *outside, int to_stdout,
                  uint64_t *usable)
{
    as_device_model d;
    char why[256], a[32], b[32], c[32];
    if (as_device_model_parse(card, outside, &d, why, sizeof why))
        return as_cli_usage(cmd, "%s", why);
    if (!d.card)
        as_cli_warn_bare("--device", card, d.total);
    as_fmt_bytes(a, sizeof a, d.total);
    as_fmt_bytes(b, sizeof b, d.outside);
    as_fmt_bytes(c, sizeof c, d.usable);
    FILE *f = to_stdout ? stdout : stderr;
    if (d.card)
        fprintf(f, "device   %15" PRIu64 " B  %10s  %s (%s), %s\n", d.total, a, d.card->name,
                d.card->model, as_card_basis_name(d.card->basis));
    else
        fprintf(f, "device   %15" PRIu64 " B  %10s  given\n", d.total, a);
    fprintf(f, "outside  %15" PRIu64 " B  %10s  %s%s%s\n", d.outside, b,
            d.outside_name ? d.outside_name : "given", d.outside_name ? ": " : "",
            d.outside_name ? d.outside_what : "");
    fprintf(f,
            "usable   %15" PRIu64 " B  %10s  the allocator's capacity: device - outside - "
            "3.125 MiB the driver keeps, in 2 MiB\n",
            d.usable, c);
    *usable = d.usable;
    return AS_EXIT_OK;
}

static void list_cards(void)
{
    size_t n;
    const as_card *cs = as_card_list(&n);
    char a[32];
    printf("%-10s %-24s %16s %11s  %-9s  %s\n", "card", "reports as", "total B", "", "basis",
           "source");
    for (size_t i = 0; i < n; i++) {
        as_fmt_bytes(a, sizeof a, cs[i].total);
        printf("%-10s %-24s %16" PRIu64 " %11s  %-9s  %s\n", cs[i].name, cs[i].model, cs[i].total,
               a, as_card_basis_name(cs[i].basis), cs[i].source);
    }
    const as_outside *os = as_outside_list(&n);
    printf("\n%-12s %14s  %s\n", "outside", "bytes", "counts");
    for (size_t i = 0; i < n; i++)
        printf("%-12s %14" PRIu64 "  %s%s\n", os[i].name, os[i].bytes, os[i].what,
               strcmp(os[i].name, AS_OUTSIDE_DEFAULT) ? "" : " (the default)");
}

typedef struct open_ctx {
    const char *path;
} open_ctx;

static int open_trace(void *user, as_trace_reader **out, as_trace_error *err)
{
    const open_ctx *c = user;
    return as_trace_open(c->path, as_cli_reader_opts(), out, err);
}

static void on_progress(void *user, const char *what, uint64_t done, uint64_t total)
{
    (void)user;
    if (!isatty(2))
        return;
    fprintf(stderr, "\r\033[K  curve %" PRIu64 "/%" PRIu64 ": %s", done + 1, total, what);
    fflush(stderr);
}

static const char *conf_name(const as_tune_item *it)
{
    return it->conf[0] ? it->conf : "(default)";
}

static void result_text(char *buf, size_t n, const as_tune_item *it)
{
    if (it->completed)
        snprintf(buf, n, "ok");
    else
        snprintf(buf, n, "OOM at alloc %" PRIu64, it->oom_alloc);
}

/* "8.12 GiB" or, with gaps, "8.12 GiB (fails 8.2-8.3 GiB)"; "-" without a curve. */
static void curve_text(char *buf, size_t n, const as_tune_item *it, char *gaps, size_t gn)
{
    char a[32], b[32];
    gaps[0] = 0;
    if (!it->has_curve) {
        snprintf(buf, n, "-");
        snprintf(gaps, gn, "-");
        return;
    }
    if (it->fits_from == AS_NONE)
        snprintf(buf, n, "none");
    else
        as_fmt_capacity(buf, n, it->fits_from);
    if (it->ngaps == 0) {
        snprintf(gaps, gn, "none");
        return;
    }
    as_fmt_capacity(a, sizeof a, it->gaps[0].lo);
    as_fmt_capacity(b, sizeof b, it->gaps[it->ngaps - 1].hi);
    uint64_t cnt = 0;
    for (size_t i = 0; i < it->ngaps; i++)
        cnt += it->gaps[i].count;
    snprintf(gaps, gn, "%" PRIu64 " in %s..%s", cnt, a, b);
}

static size_t find_default(const as_tune_result *r)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->items[i].conf[0] == 0)
            return i;
    return r->n;
}

static int has_gc(const char *conf)
{
    return strstr(conf, "garbage_collection_threshold") != NULL;
}

/* The recommendation's sentence and paste line. */
static void print_recommendation(const as_tune_result *r, uint64_t usable)
{
    char a[32], b[32];
    const as_tune_item *best = r->n ? &r->items[0] : NULL;
    size_t di = find_default(r);
    const as_tune_item *def = di < r->n ? &r->items[di] : NULL;
    if (!best)
        return;
    if (!best->completed) {
        as_fmt_capacity(a, sizeof a, usable);
        printf("nothing fits: no setting runs the whole trace in the usable %s.\n", a);
        if (best->has_curve && best->min_capacity != AS_NONE) {
            uint64_t need = best->fits_from != AS_NONE ? best->fits_from : best->min_capacity;
            as_fmt_bytes(b, sizeof b, need - usable);
            as_fmt_capacity(a, sizeof a, need);
            printf("The best, %s, gets furthest (OOM at allocation %" PRIu64
                   ") and needs %s: %s more than the card has.\n",
                   conf_name(best), best->oom_alloc, a, b);
        } else {
            printf("The best, %s, gets furthest (OOM at allocation %" PRIu64 " of %" PRIu64 ").\n",
                   conf_name(best), best->oom_alloc, r->allocs);
        }
        return;
    }
    const uint64_t cap = r->capacity; /* usable less the streams' pages */
    if (best->peak_reserved > cap) {
        as_fmt_bytes(a, sizeof a, best->peak_reserved - cap);
        printf("recommendation: %s: fits, holding %s more than the usable size at its peak "
               "(whole expandable pages past the memory fraction)",
               conf_name(best), a);
    } else {
        as_fmt_bytes(a, sizeof a, cap - best->peak_reserved);
        printf("recommendation: %s: fits with %s of headroom", conf_name(best), a);
    }
    if (best->has_curve && best->fits_from != AS_NONE) {
        as_fmt_capacity(b, sizeof b, best->fits_from);
        printf(", and every capacity from %s up to the card fits", b);
    }
    if (def && def != best) {
        if (!def->completed)
            printf("; the default runs out of memory at allocation %" PRIu64, def->oom_alloc);
        else
            printf("; the default fits too, with less room");
    } else if (def == best) {
        printf(" (the default needs no setting)");
    }
    printf(".\n");
    printf("Its device calls (%" PRIu64 " maps or mallocs, %" PRIu64
           " unmaps or frees) take %.2f s over the trace",
           best->device_reserves, best->device_releases, best->device_time_s);
    if (def && def != best)
        printf(" (the default's: %.2f s)", def->device_time_s);
    printf(".\n");
    if (best->conf[0])
        printf("export PYTORCH_CUDA_ALLOC_CONF=%s\n", best->conf);
    else
        printf("unset PYTORCH_CUDA_ALLOC_CONF\n");
    if (has_gc(best->conf))
        printf("(garbage_collection_threshold acts only under a memory fraction: also call "
               "torch.cuda.set_per_process_memory_fraction for the usable size)\n");
}

static void print_row(const as_tune_item *it, size_t rank, uint64_t usable, int w)
{
    char res[48], pr[32], head[40], ff[32], gaps[96], dt[32];
    result_text(res, sizeof res, it);
    as_fmt_bytes(pr, sizeof pr, it->peak_reserved);
    if (!it->completed) {
        snprintf(head, sizeof head, "-");
    } else if (it->peak_reserved > usable) { /* expandable pages may pass a memory fraction */
        as_fmt_bytes(ff, sizeof ff, it->peak_reserved - usable);
        snprintf(head, sizeof head, "-%s", ff);
    } else {
        as_fmt_bytes(head, sizeof head, usable - it->peak_reserved);
    }
    curve_text(ff, sizeof ff, it, gaps, sizeof gaps);
    snprintf(dt, sizeof dt, "%.2f ms", it->device_time_s * 1e3);
    printf("  %4zu  %-*s  %-19s  %13s  %10s  %13s  %-21s  %10s\n", rank, w, conf_name(it), res, pr,
           head, ff, gaps, dt);
}

/* What the job's streams take of the card (tune.h), when they take anything. */
static void print_streams(const as_tune_result *r, uint32_t mode)
{
    char a[32], b[32], who[64];
    if (!r->streams)
        return;
    if (mode == AS_ENGINE_STREAMS_PYTORCH)
        snprintf(who, sizeof who, "PyTorch's pool of %u streams takes", r->streams);
    else if (mode == AS_ENGINE_STREAMS_EACH)
        snprintf(who, sizeof who, "%u streams, one a trace stream, take", r->streams);
    else
        snprintf(who, sizeof who, "%u streams take", r->streams);
    as_fmt_bytes(a, sizeof a, r->stream_bytes);
    as_fmt_capacity(b, sizeof b, r->capacity);
    printf("streams: %" PRIu64 " in the trace; %s %s of the card in 2 MiB pages "
           "(--device-streams): the settings run at %s\n",
           r->trace_streams, who, a, b);
}

static void print_table(const char *trace, const as_tune_result *r, uint64_t usable, unsigned top,
                        unsigned curves, double secs, uint32_t mode)
{
    char a[32];
    as_fmt_bytes(a, sizeof a, r->peak_requested);
    printf("trace %s: %" PRIu64 " events, %" PRIu64 " allocations, peak requested %s\n", trace,
           r->events, r->allocs, a);
    print_streams(r, mode);
    printf("%zu settings at the usable capacity, %u curves, %" PRIu64 " decodes, %.2f s\n", r->n,
           curves, r->decodes, secs);
    size_t di = find_default(r);
    int w = 9;
    for (size_t i = 0; i < r->n; i++)
        if ((i < top || i == di) && (int)strlen(conf_name(&r->items[i])) > w)
            w = (int)strlen(conf_name(&r->items[i]));
    printf("  %4s  %-*s  %-19s  %13s  %10s  %13s  %-21s  %10s\n", "rank", w, "setting", "result",
           "peak reserved", "headroom", "fits for good", "fails again", "dev time");
    for (size_t i = 0; i < r->n && i < top; i++)
        print_row(&r->items[i], i + 1, r->capacity, w);
    if (di < r->n && di >= top) {
        if (di > top)
            printf("  %4s\n", "...");
        print_row(&r->items[di], di + 1, r->capacity, w);
    }
    print_recommendation(r, usable);
}

static void json_item(FILE *f, const as_tune_item *it, size_t rank, uint64_t usable)
{
    as_policy_spec sp;
    char why[128];
    fprintf(f, "{\"rank\": %zu, \"conf\": ", rank);
    as_report_json_str(f, it->conf);
    fputs(", \"policy\": ", f);
    if (as_policy_spec_parse(it->conf[0] ? it->conf : "torch", &sp, why, sizeof why) == 0) {
        as_report_json_str(f, sp.text);
        as_policy_spec_free(&sp);
    } else {
        fputs("null", f);
    }
    fprintf(f, ", \"knobs\": %u, \"completed\": %s, \"oom_event\": ", it->knobs,
            it->completed ? "true" : "false");
    as_report_json_u64(f, 1, it->oom_event);
    fputs(", \"oom_alloc\": ", f);
    as_report_json_u64(f, 1, it->oom_alloc);
    fputs(", \"oom_size\": ", f);
    as_report_json_u64(f, 1, it->oom_size);
    fprintf(f, ", \"peak_reserved\": %" PRIu64 ", \"headroom\": ", it->peak_reserved);
    if (it->completed) /* signed: negative when it passed the capacity (expandable pages) */
        fprintf(f, "%lld", (long long)usable - (long long)it->peak_reserved);
    else
        fputs("null", f);
    fprintf(f,
            ", \"device_reserves\": %" PRIu64 ", \"device_releases\": %" PRIu64
            ", \"device_time_s\": ",
            it->device_reserves, it->device_releases);
    as_report_json_real(f, it->device_time_s);
    fputs(", \"curve\": ", f);
    if (!it->has_curve) {
        fputs("null}", f);
        return;
    }
    fputs("{\"min_capacity\": ", f);
    as_report_json_u64(f, 1, it->min_capacity);
    fputs(", \"fits_from\": ", f);
    as_report_json_u64(f, 1, it->fits_from);
    fprintf(f,
            ", \"lo\": %" PRIu64 ", \"hi\": %" PRIu64 ", \"capacities\": %" PRIu64
            ", \"failing_above_min\": [",
            it->curve_lo, it->curve_hi, it->curve_points);
    for (size_t i = 0; i < it->ngaps; i++)
        fprintf(f, "%s{\"lo\": %" PRIu64 ", \"hi\": %" PRIu64 ", \"count\": %" PRIu64 "}",
                i ? ", " : "", it->gaps[i].lo, it->gaps[i].hi, it->gaps[i].count);
    fputs("]}}", f);
}

/* One trace's object (no timing in it: shards merge to the same bytes). */
static void json_trace(FILE *f, unsigned index, const char *trace, const as_tune_result *r,
                       const char *card, uint64_t usable)
{
    as_report_json_trace_open(f, index, trace, NULL, NULL, NULL);
    fprintf(f, ", \"events\": %" PRIu64 ", \"allocs\": %" PRIu64 ", \"peak_requested\": %" PRIu64,
            r->events, r->allocs, r->peak_requested);
    fputs(", \"device\": ", f);
    as_report_json_str(f, card);
    fprintf(f, ", \"usable\": %" PRIu64 ", \"fits\": %s, \"recommendation\": ", usable,
            r->n && r->items[0].completed ? "true" : "false");
    if (r->n && r->items[0].completed)
        as_report_json_str(f, r->items[0].conf);
    else
        fputs("null", f);
    fprintf(f,
            ", \"streams\": {\"trace\": %" PRIu64 ", \"made\": %u, \"bytes\": %" PRIu64
            "}, \"capacity\": %" PRIu64,
            r->trace_streams, r->streams, r->stream_bytes, r->capacity);
    fputs(", \"settings\": [", f);
    for (size_t i = 0; i < r->n; i++) {
        if (i)
            fputs(", ", f);
        json_item(f, &r->items[i], i + 1, r->capacity);
    }
    fputs("]}", f);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int as_cli_parse_shard(const char *s, unsigned *i, unsigned *n)
{
    char *e;
    unsigned long a = strtoul(s, &e, 10);
    if (e == s || *e != '/')
        return -1;
    const char *t = e + 1;
    unsigned long b = strtoul(t, &e, 10);
    if (e == t || *e || a < 1 || b < 1 || a > b || b > 1000000)
        return -1;
    *i = (unsigned)a - 1;
    *n = (unsigned)b;
    return 0;
}

typedef struct tune_args {
    as_cli_common co; /* --device, --outside, --shard, --memory, -j, -q, ... (-p is tune's) */
    char *confs[MAX_CONFS];
    size_t nconfs;
    unsigned curves, top, of;
    int fmt;
    int streams_given; /* --device-streams was given */
    as_tune_opts o;
} tune_args;

static int tune_one(const char *cmd, tune_args *ta, unsigned index, const char *trace,
                    uint64_t usable)
{
    char spooled[PATH_MAX] = "", why[512];
    int slot = -1, st;
    as_tune_result r;
    as_trace_error err = {.offset = UINT64_MAX, .event = UINT64_MAX};
    if ((st = as_cli_spool_native(trace, spooled, sizeof spooled, &slot)))
        return st;
    open_ctx oc = {.path = spooled[0] ? spooled : trace};
    as_tune_opts o = ta->o;
    o.capacity = usable;
    o.curves = ta->curves;
    o.on_progress = ta->fmt == FMT_TABLE && !ta->co.quiet ? on_progress : NULL;
    o.max_points = AS_CLI_MAX_CAPACITIES;
    double t0 = now_s();
    int rc = as_tune(open_trace, &oc, ta->nconfs ? ta->confs : NULL, ta->nconfs, &o, &r, &err, why,
                     sizeof why);
    if (spooled[0])
        unlink(spooled);
    as_out_tmp_del(slot);
    if (isatty(2) && o.on_progress)
        fputs("\r\033[K", stderr);
    if (rc) {
        if (why[0]) {
            as_cli_msg("%s: %s", trace, why);
            return AS_EXIT_INPUT;
        }
        return as_cli_trace_fail(&err, trace);
    }
    if (ta->fmt == FMT_TABLE) {
        print_table(trace, &r, usable, ta->top, ta->curves, now_s() - t0, ta->o.streams);
    } else if (ta->fmt == FMT_JSONL) {
        as_report_json_head(stdout);
        printf(", \"command\": \"tune\", \"unit\": %u, \"of\": %u, \"tune\": ", index, ta->of);
        json_trace(stdout, index, trace, &r, ta->co.card, usable);
        fputs("}\n", stdout);
    } else {
        json_trace(stdout, index, trace, &r, ta->co.card, usable);
    }
    fflush(stdout);
    as_tune_result_free(&r);
    (void)cmd;
    return AS_EXIT_OK;
}

static char empty[] = "";

/* One option of getopt_long's: 0, an exit status, or -1 (--help or --cards printed). */
static int tune_option(const char *cmd, int c, char **argv, tune_args *ta)
{
    uint64_t v;
    switch (c) {
    case 'c':
        ta->co.card = optarg;
        return 0;
    case 'p': /* settings, not policies: 'default' is the empty one */
        if (ta->nconfs == MAX_CONFS)
            return as_cli_usage(cmd, "at most %d settings", MAX_CONFS);
        ta->confs[ta->nconfs++] = strcmp(optarg, "default") ? optarg : empty;
        return 0;
    case OPT_CURVES:
    case OPT_TOP:
        if (as_cli_parse_u64(optarg, &v) || v > 100000)
            return as_cli_usage(cmd, "%s: a count up to 100000", optarg);
        *(c == OPT_CURVES ? &ta->curves : &ta->top) = (unsigned)v;
        return 0;
    case 'f':
        return as_cli_fmt_tjl(cmd, optarg, &ta->fmt);
    case OPT_CARDS:
        list_cards();
        return -1;
    case OPT_STREAMS:
        ta->streams_given = 1;
        return as_cli_parse_streams(cmd, optarg, &ta->o.streams);
    case 'h':
        fputs(usage_text, stdout);
        return -1;
    }
    int ret = as_cli_common_option(cmd, c, optarg, &ta->co);
    return ret == AS_CLI_NOT_COMMON ? as_cli_bad_option(cmd, c, argv) : ret;
}

static int parse_args(int argc, char **argv, tune_args *ta)
{
    const char *cmd = "tune";
    int c, ret = 0;
    as_cli_common_init(&ta->co, NULL, 0, "settings");
    optind = 1;
    opterr = 0;
    while (!ret && (c = getopt_long(argc, argv, ":c:p:f:j:qh", tune_opts, NULL)) != -1)
        ret = tune_option(cmd, c, argv, ta);
    if (ret)
        return ret;
    ta->o.memory = ta->co.memory;
    ta->o.threads = (unsigned)ta->co.threads;
    ta->o.no_caught_ooms = ta->co.no_caught;
    /* The nccl preset was measured after NCCL's process group had made PyTorch's stream
     * pool (ProcessGroupNCCL takes its streams from it): its pages are counted there. */
    const as_outside *preset = ta->co.outside ? as_outside_find(ta->co.outside) : NULL;
    if (!ta->streams_given && preset && !strcmp(preset->name, "nccl"))
        ta->o.streams = 0;
    if (!ta->co.card)
        return as_cli_usage(cmd, "no card given: --device CARD (a preset, see --cards, or bytes)");
    if (optind >= argc)
        return as_cli_usage(cmd, "no trace given");
    for (size_t i = 0; i < ta->nconfs; i++) { /* every setting parses before any work */
        as_policy_spec sp;
        int st = as_cli_parse_spec(cmd, ta->confs[i][0] ? ta->confs[i] : "torch", &sp);
        if (st)
            return st;
        as_policy_spec_free(&sp);
    }
    return 0;
}

int as_cmd_tune(int argc, char **argv)
{
    const char *cmd = "tune";
    tune_args *ta = calloc(1, sizeof *ta);
    int st;
    uint64_t usable = 0;
    as_out *out = NULL;
    if (!ta) {
        as_cli_msg("out of host memory");
        return AS_EXIT_INPUT;
    }
#ifdef __GLIBC__
    /* One malloc arena: the settings' runs' threads would each leave one behind, its freed
     * top (megabytes, under glibc's raised trim threshold) still mapped, and every process
     * of a curve (sim/curve.h) forks with its page tables: on llama at 12 GB, 40 % of the
     * page-table copying. The threads allocate only as their runs grow. */
    mallopt(M_ARENA_MAX, 1);
#endif
    ta->curves = DEFAULT_CURVES;
    ta->top = DEFAULT_TOP;
    ta->o.streams = AS_ENGINE_STREAMS_PYTORCH; /* a real job's side streams come from it */
    if ((st = parse_args(argc, argv, ta))) {
        free(ta);
        return st < 0 ? AS_EXIT_OK : st;
    }
    const char *outs[] = {"-"};
    if ((st = as_out_check(cmd, outs, 1, (const char *const *)argv + optind,
                           (size_t)(argc - optind))) ||
        (st = as_out_open("-", &out)))
        goto done;
    if ((st = as_cli_device(cmd, ta->co.card, ta->co.outside, ta->fmt == FMT_TABLE, &usable)))
        goto done;
    if (ta->fmt == FMT_JSON) {
        as_report_json_head(stdout);
        fputs(", \"command\": \"tune\", \"traces\": [", stdout);
    }
    unsigned printed = 0;
    ta->of = (unsigned)(argc - optind);
    for (int i = optind; i < argc; i++) {
        unsigned k = (unsigned)(i - optind);
        if (k % ta->co.nshards != ta->co.shard)
            continue;
        if (ta->fmt == FMT_JSON && printed)
            fputs(", ", stdout);
        if (ta->fmt == FMT_TABLE && printed)
            fputc('\n', stdout);
        if ((st = tune_one(cmd, ta, k, argv[i], usable)))
            goto done;
        printed++;
    }
    if (ta->fmt == FMT_JSON)
        fputs("]}\n", stdout);
done:
    st = as_out_commit(out, st);
    free(ta);
    return st;
}
