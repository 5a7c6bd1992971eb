/*
 * replay_main.c - allocsim-replay: the simulator's runs, on a real GPU.
 *
 *   allocsim-replay [-p SPEC]... [-c CAP]... [-f table|csv|json] [-o FILE]
 *                   [--segments F] [--latency F] [--calls F] [--no-sync] TRACE...
 *   allocsim-replay --async [--release-threshold N]... [-c CAP]... [--pool F] [--blocks F]
 *                   ... TRACE...
 *
 * Every -p crossed with every -c is one run, exactly as `allocsim run` numbers them: this
 * is the library's run driver (sim/driver.h) with the same policy code; only the device
 * differs, a CUDA device (cuda_device.c) whose capacity the GPU's driver enforces. The runs
 * go one at a time (max_group 1), each with its own engine (the ballast of two devices
 * cannot coexist), so each trace is read once per run. This file is the program's command
 * layer: it alone prints and exits, as sim/cli/ does for allocsim, whose helpers it may not
 * include (the Makefile gives replay/ no -Isim/cli).
 * The JSON report is allocsim's, marked "measured": true at the top; --segments is
 * allocsim's CSV with the real addresses; --latency has every successful device call
 * with its measured time: run,alloc,event,action,size,ns; --calls every call of the CUDA
 * device, those that log no segment event too (va_reserve, alias: a stitched block's maps)
 * and the parts of an alias (cuda_device.h): run,call,rc,size,ns.
 *
 * --async replays through the CUDA stream-ordered pool instead of a policy (async_pool.h):
 * one run per release threshold and capacity, reserved = the pool's ReservedMemCurrent;
 * --segments then logs the pool's growth and trim steps, and --pool one CSV line per run
 * with the pool's own high-water marks.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "async_pool.h"
#include "cuda_device.h"
#include "cuda_driver.h"
#include "driver.h"
#include "engine.h"
#include "report.h"
#include "text.h"
#include "units.h"

enum { EXIT_OK_ = 0, EXIT_INPUT = 1, EXIT_USAGE = 2 };
static const char prog[] = "allocsim-replay";

static const char help[] =
    "usage: allocsim-replay [options] TRACE...\n"
    "\n"
    "Replays each TRACE through every policy at every capacity on the GPU: reserve and\n"
    "release are cudaMalloc/cudaFree, expandable mappings cuMemCreate/cuMemMap, and the\n"
    "capacity is enforced by the driver (a ballast holds the rest of the GPU), except for\n"
    "a policy that applies it itself (torch: PyTorch's memory fraction), which runs on the\n"
    "whole GPU with the capacity as its limit, as PyTorch does.\n"
    "\n"
    "  -p, --policy SPEC     as allocsim (repeatable; default torch)\n"
    "  -c, --capacity CAP    as allocsim (repeatable; default none = the GPU's free memory)\n"
    "  -f, --format FMT      table (default), csv or json\n"
    "  -o, --output FILE     the report goes here instead of stdout\n"
    "      --segments FILE   CSV run,alloc,event,action,addr,size (real addresses)\n"
    "      --latency FILE    CSV run,alloc,event,action,size,ns: measured time of each call\n"
    "      --calls FILE      CSV run,call,rc,size,ns: every device call, va_reserve, alias\n"
    "                        (a second mapping of existing pages) and refusals included\n"
    "      --no-sync         no cudaDeviceSynchronize before each timed call\n"
    "      --device N        CUDA device ordinal (default 0)\n"
    "  -V, --version         the version, and those of zstd and the CUDA runtime\n"
    "\n"
    "      --async           replay through cudaMallocAsync's pool instead of -p policies:\n"
    "                        each ALLOC cudaMallocFromPoolAsync on the trace stream's own\n"
    "                        real stream, each FREE cudaFreeAsync there, then a stream sync\n"
    "                        (the pool trims to its threshold only at syncs; --no-sync: never)\n"
    "      --release-threshold N  the pool's release threshold in bytes, or max (repeatable;\n"
    "                        default 0, CUDA's default; PyTorch's backend uses max)\n"
    "      --pool FILE       CSV per run: the pool's reserved/used high, grows, trims, retries\n"
    "      --blocks FILE     CSV run,id,action,stream,addr,size,reserved,used: every\n"
    "                        allocation (addr 0: refused) and free, the pool's counters after\n"
    "\n"
    "Needs an NVIDIA GPU and its driver (libcuda.so.1, loaded at run time); without them it\n"
    "says so and exits 1. 'allocsim run' simulates the same runs on any machine.\n"
    "\n"
    "Exit status: 0 when it ran (OOMs included), 1 bad input, I/O or CUDA failure (no\n"
    "driver included), 2 usage.\n";

enum {
    OPT_SEGMENTS = 256,
    OPT_LATENCY,
    OPT_NOSYNC,
    OPT_DEVICE,
    OPT_ASYNC,
    OPT_THRESHOLD,
    OPT_POOL,
    OPT_BLOCKS,
    OPT_CALLS
};
static const struct option opts[] = {
    {"policy", required_argument, NULL, 'p'},
    {"capacity", required_argument, NULL, 'c'},
    {"format", required_argument, NULL, 'f'},
    {"output", required_argument, NULL, 'o'},
    {"segments", required_argument, NULL, OPT_SEGMENTS},
    {"latency", required_argument, NULL, OPT_LATENCY},
    {"no-sync", no_argument, NULL, OPT_NOSYNC},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"async", no_argument, NULL, OPT_ASYNC},
    {"release-threshold", required_argument, NULL, OPT_THRESHOLD},
    {"pool", required_argument, NULL, OPT_POOL},
    {"blocks", required_argument, NULL, OPT_BLOCKS},
    {"calls", required_argument, NULL, OPT_CALLS},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

typedef struct ctx {
    as_cudadev_params p;
    char why[256];
    as_runlog *segs;
    FILE *lat;
    unsigned run; /* report index of the run in progress */
    uint64_t effective, probed;
    int async;          /* --async: the factory makes as_asyncpool devices */
    int limits_itself;  /* the run's policy applies the capacity itself */
    uint64_t threshold; /* the release threshold of the run being created */
    as_asyncpool *pool; /* the async run in progress */
    FILE *poolf;
    FILE *blocksf;       /* --blocks: every allocation and free of the pool */
    FILE *callsf;        /* --calls: every call of the CUDA device */
    const uint64_t *thr; /* --async: run i's threshold is thr[i / ncap] */
    size_t ncap;
} ctx;

/* ---- messages ---------------------------------------------------------------------------- */

static void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    as_put_safe_v(stderr, "allocsim-replay: ", fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* A usage error: the message and a pointer to --help; returns 2. */
static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    as_put_safe_v(stderr, "allocsim-replay: ", fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help'.\n", prog);
    return EXIT_USAGE;
}

static int no_memory(void)
{
    msg("out of host memory");
    return EXIT_INPUT;
}

/* fopen(path, "w"), or the message. 0 or EXIT_INPUT. */
static int create(const char *path, FILE **out)
{
    if ((*out = fopen(path, "w")))
        return 0;
    msg("%s: cannot create: %s", path, strerror(errno));
    return EXIT_INPUT;
}

/* The status after writing output path (rc: 0 or a code of error.h, why its words),
 * naming only the first failure. */
static int write_error(int rc, const char *why, const char *path, int ret)
{
    if (rc && !ret) {
        msg("%s: %s", path, why && why[0] ? why : as_strerror(rc));
        return EXIT_INPUT;
    }
    return ret;
}

/* The same after closing a stdio stream (failed: fclose failed). */
static int write_status(int failed, const char *path, int ret)
{
    return write_error(failed ? AS_EIO : 0, "write failed", path, ret);
}

/* ---- the device factory ---------------------------------------------------------------- */

/* One row of --blocks (addr 0: the pool refused the allocation). */
static void on_block(void *user, const as_asyncpool_op *op)
{
    ctx *c = user;
    fprintf(c->blocksf, "%u,%llu,%s,%u,%llu,%llu,%llu,%llu\n", c->run, (unsigned long long)op->id,
            op->is_free ? "free" : "alloc", op->stream, (unsigned long long)op->addr,
            (unsigned long long)op->size, (unsigned long long)op->reserved,
            (unsigned long long)op->used);
}

/* One row of --calls. */
static void on_call(void *user, const as_cudadev_call *k)
{
    ctx *c = user;
    fprintf(c->callsf, "%u,%s,%d,%llu,%.0f\n", c->run, k->kind, k->rc, (unsigned long long)k->size,
            k->ns);
}

static int f_create(void *user, uint64_t capacity, as_device *out, void **handle)
{
    ctx *c = user;
    if (c->async) {
        as_asyncpool_params ap = {.capacity = capacity,
                                  .release_threshold = c->threshold,
                                  .device = c->p.device,
                                  .no_sync = c->p.no_sync};
        as_asyncpool *a;
        int rc = as_asyncpool_create(&ap, &a, c->why, sizeof c->why);
        if (rc)
            return rc < 0 ? rc : AS_EDEVICE;
        as_asyncpool_stats st;
        as_asyncpool_stats_get(a, &st);
        c->probed = st.probed;
        c->pool = a;
        if (c->blocksf)
            as_asyncpool_set_op_log(a, on_block, c);
        *out = *as_asyncpool_device(a);
        *handle = a;
        return 0;
    }
    as_cudadev_params p = c->p;
    as_cudadev *d;
    p.capacity = capacity;
    if (c->limits_itself && capacity != AS_CAPACITY_NONE) {
        /* PyTorch's memory fraction on the whole GPU: the policy refuses, never the driver
         * (expandable pages may map past the limit, replay/RESULTS.md) */
        p.limit = capacity;
        p.capacity = AS_CAPACITY_NONE;
    }
    int rc = as_cudadev_create(&p, &d, c->why, sizeof c->why);
    if (rc)
        return rc < 0 ? rc : AS_EDEVICE;
    c->effective = as_cudadev_effective_capacity(d);
    c->probed = as_cudadev_probed_capacity(d);
    if (c->callsf)
        as_cudadev_set_call_log(d, on_call, c);
    *out = *as_cudadev_device(d);
    *handle = d;
    return 0;
}

static void f_destroy(void *user, void *handle)
{
    ctx *c = user;
    if (c->async) {
        if (c->pool == handle)
            c->pool = NULL;
        as_asyncpool_destroy(handle);
        return;
    }
    as_cudadev_destroy(handle);
}

static void f_counters(void *user, void *handle, as_dev_counters *out)
{
    if (((ctx *)user)->async)
        as_asyncpool_counters_get(handle, out);
    else
        as_cudadev_counters_get(handle, out);
}

static void f_set_log(void *user, void *handle, as_dev_log_fn fn, void *log_user)
{
    if (((ctx *)user)->async)
        as_asyncpool_set_log(handle, fn, log_user);
    else
        as_cudadev_set_log(handle, fn, log_user);
}

/* ---- the driver's hooks ------------------------------------------------------------------ */

/* Before each run (a group of one): the device the factory makes next. */
static int on_group(void *user, const as_driver_group *g)
{
    ctx *c = user;
    c->threshold = c->async ? c->thr[g->r0 / c->ncap] : 0;
    c->limits_itself = !c->async && (g->spec->policy->flags & AS_POLICY_F_LIMITS_ITSELF);
    c->why[0] = 0;
    c->run = g->report_base;
    return 0;
}

/* The pool's own figures after an --async run: a line on stderr, a row of --pool. */
static void pool_done(ctx *c, const as_driver_group *g, const as_run_result *res)
{
    as_asyncpool_stats st;
    as_asyncpool_stats_get(c->pool, &st);
    fprintf(stderr,
            "allocsim-replay:   pool: reserved high %llu, used high %llu, %llu grows, "
            "%llu trims, %llu OOM retries, %llu streams\n",
            (unsigned long long)st.reserved_high, (unsigned long long)st.used_high,
            (unsigned long long)st.grows, (unsigned long long)st.trims,
            (unsigned long long)st.oom_retries, (unsigned long long)st.streams);
    if (c->poolf)
        fprintf(c->poolf, "%u,\"%s\",%llu,%llu,%d,%lld,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu\n",
                c->run, g->spec->text, (unsigned long long)g->cap, (unsigned long long)c->probed,
                res->completed, res->oom_alloc == AS_NONE ? -1LL : (long long)res->oom_alloc,
                (unsigned long long)res->peak_reserved, (unsigned long long)st.reserved_high,
                (unsigned long long)st.used_high, (unsigned long long)st.reserved_end,
                (unsigned long long)st.grows, (unsigned long long)st.trims,
                (unsigned long long)st.oom_retries, (unsigned long long)st.streams);
}

/* After each run: what the GPU did, on stderr. */
static void on_group_done(void *user, const as_driver_group *g, const as_engine *e)
{
    ctx *c = user;
    const as_run_result *res = as_engine_result(e, 0);
    fprintf(stderr, "allocsim-replay: %s %s cap %llu (%s %llu): %s, peak reserved %llu\n", g->path,
            g->spec->text, (unsigned long long)g->cap,
            c->limits_itself ? "policy-enforced, no ballast" : "driver-enforced",
            (unsigned long long)(c->limits_itself ? g->cap : c->probed),
            res->completed ? "completed" : "OOM", (unsigned long long)res->peak_reserved);
    if (c->async && c->pool)
        pool_done(c, g, res);
}

/* A failure: the driver's message, and what the device said of it. */
static void on_fail(void *user, const as_driver_fail *f)
{
    ctx *c = user;
    const char *pe = c->async && c->pool ? as_asyncpool_errmsg(c->pool) : "";
    if (f->usage)
        usage("%s", f->msg);
    else
        msg("%s%s%s%s%s", f->msg, c->why[0] ? ": " : "", c->why, pe[0] ? ": " : "", pe);
}

static void on_note(void *user, const char *text)
{
    (void)user;
    msg("%s", text);
}

static void on_segment(void *user, const as_seg_record *r)
{
    ctx *c = user;
    if (c->lat)
        fprintf(c->lat, "%u,%llu,%llu,%s,%llu,%.0f\n", c->run + r->run,
                (unsigned long long)r->alloc, (unsigned long long)r->event,
                as_dev_action_name(r->dev.action), (unsigned long long)r->dev.size, r->dev.cost_ns);
}

/* The report with "measured": true as its first member. */
static int write_report(const as_report *rep, FILE *out, as_report_fmt fmt, char *why,
                        size_t why_len)
{
    if (fmt != AS_REPORT_JSON)
        return as_report_write(rep, out, fmt, why, why_len);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return as_errno_error(errno, "cannot buffer the report", why, why_len);
    int rc = as_report_write(rep, m, fmt, why, why_len);
    if (fclose(m) && !rc)
        rc = as_errno_error(errno, "cannot buffer the report", why, why_len);
    char *brace = rc ? NULL : strchr(buf, '{');
    if (brace) {
        fwrite(buf, 1, (size_t)(brace - buf) + 1, out);
        fputs("\"measured\": true, ", out);
        fputs(brace + 1, out);
    } else if (!rc) {
        rc = AS_EINVAL;
        snprintf(why, why_len, "the JSON report has no object");
    }
    free(buf);
    if (!rc && (fflush(out) || ferror(out)))
        rc = as_errno_error(errno, "write failed", why, why_len);
    return rc;
}

/* ---- the command line -------------------------------------------------------------------- */

typedef struct args {
    const char **ptext;
    size_t np;
    uint64_t *caps, *thr;
    size_t ncap, nthr;
    const char *out_path, *seg_path, *lat_path, *pool_path, *blocks_path, *calls_path;
    as_report_fmt fmt;
    int done; /* --help or --version was printed */
} args;

static void version(void)
{
    /* The zstd library actually loaded, and the headers built against when they differ. */
    printf("%s %s\nzstd %s", prog, AS_VERSION, ZSTD_versionString());
    if (ZSTD_versionNumber() != ZSTD_VERSION_NUMBER)
        printf(" (built with %s)", ZSTD_VERSION_STRING);
    printf("\nCUDA runtime %d.%d (static)\n", CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
}

/* -c TEXT, as allocsim reads it (the same words for a bad one, the same warning). */
static int capacity(const char *text, uint64_t *out)
{
    char why[512];
    int rc = as_parse_capacity(text, out);
    if (rc) {
        as_capacity_why(rc, "-c", text, why, sizeof why);
        return usage("%s", why);
    }
    if (as_bare_number_note("-c", text, *out, why, sizeof why))
        msg("%s", why);
    return 0;
}

static int option(int ch, char **argv, args *a, ctx *c)
{
    uint64_t d;
    switch (ch) {
    case 'p':
        a->ptext[a->np++] = optarg;
        return 0;
    case 'c':
        return capacity(optarg, &a->caps[a->ncap++]);
    case 'f':
        if (as_report_fmt_parse(optarg, &a->fmt) || a->fmt == AS_REPORT_JSONL)
            return usage("-f %s: table, csv or json", optarg);
        return 0;
    case 'o':
        a->out_path = optarg;
        return 0;
    case OPT_SEGMENTS:
        a->seg_path = optarg;
        return 0;
    case OPT_LATENCY:
        a->lat_path = optarg;
        return 0;
    case OPT_NOSYNC:
        c->p.no_sync = 1;
        return 0;
    case OPT_ASYNC:
        c->async = 1;
        return 0;
    case OPT_THRESHOLD:
        if (strcmp(optarg, "max") == 0)
            a->thr[a->nthr++] = UINT64_MAX;
        else if (as_parse_count(optarg, &a->thr[a->nthr++]))
            return usage("--release-threshold %s: bytes or max", optarg);
        return 0;
    case OPT_POOL:
        a->pool_path = optarg;
        return 0;
    case OPT_BLOCKS:
        a->blocks_path = optarg;
        return 0;
    case OPT_CALLS:
        a->calls_path = optarg;
        return 0;
    case OPT_DEVICE:
        if (as_parse_count(optarg, &d) || d > 64)
            return usage("--device %s: a device ordinal", optarg);
        c->p.device = (int)d;
        return 0;
    case 'h':
        fputs(help, stdout);
        a->done = 1;
        return 0;
    case 'V':
        version();
        a->done = 1;
        return 0;
    case ':':
        return usage("option '%s' needs a value", argv[optind - 1]);
    default:
        return usage("unknown option '%s'", argv[optind - 1]);
    }
}

/* The command line into a and c: 0 or an exit status (a->done: nothing more to do). */
static int parse(int argc, char **argv, args *a, ctx *c)
{
    a->ptext = calloc((size_t)argc + 1, sizeof *a->ptext);
    a->caps = calloc((size_t)argc + 1, sizeof *a->caps);
    a->thr = calloc((size_t)argc + 1, sizeof *a->thr);
    if (!a->ptext || !a->caps || !a->thr)
        return no_memory();
    opterr = 0;
    int ch, ret = 0;
    while (!ret && !a->done && (ch = getopt_long(argc, argv, ":p:c:f:o:hV", opts, NULL)) != -1)
        ret = option(ch, argv, a, c);
    if (ret || a->done)
        return ret;
    if (optind >= argc)
        return usage("no trace given");
    if (c->async && a->np)
        return usage("--async replays the CUDA pool itself: no -p");
    if (!c->async && (a->nthr || a->pool_path || a->blocks_path))
        return usage("--release-threshold, --pool and --blocks need --async");
    if (c->async && a->calls_path)
        return usage("--calls logs the CUDA device's calls: not with --async");
    return 0;
}

/* The runs' specs: -p (default torch), or with --async one per release threshold. */
static int make_specs(args *a, ctx *c, as_policy_spec **specs, size_t *nspec)
{
    char why[512];
    if (c->async && a->nthr == 0)
        a->thr[a->nthr++] = 0;
    if (a->np == 0 && !c->async)
        a->ptext[a->np++] = "torch";
    if (a->ncap == 0)
        a->caps[a->ncap++] = AS_CAPACITY_NONE;
    size_t np = c->async ? a->nthr : a->np;
    if (!(*specs = calloc(np, sizeof **specs)))
        return no_memory();
    for (; *nspec < np; (*nspec)++) {
        if (c->async) {
            if (as_asyncpool_spec(a->thr[*nspec], &(*specs)[*nspec]))
                return no_memory();
        } else if (as_policy_spec_parse(a->ptext[*nspec], &(*specs)[*nspec], why, sizeof why)) {
            return usage("-p %s: %s", a->ptext[*nspec], why);
        }
    }
    c->thr = a->thr;
    c->ncap = a->ncap;
    return 0;
}

/* The CUDA driver, then the logs (created before any run). 0 or an exit status. */
static int open_logs(const args *a, ctx *c)
{
    char why[512];
    if (as_cu_load(why, sizeof why)) {
        fprintf(stderr,
                "allocsim-replay: cannot load the NVIDIA CUDA driver (%s): it replays "
                "on a GPU; 'allocsim run' simulates the same runs without one\n",
                why);
        return EXIT_INPUT;
    }
    int ret;
    if (a->seg_path && as_runlog_open(a->seg_path, AS_RUNLOG_SEGMENTS, &c->segs, why, sizeof why)) {
        msg("%s: %s", a->seg_path, why);
        return EXIT_INPUT;
    }
    if (a->lat_path) {
        if ((ret = create(a->lat_path, &c->lat)))
            return ret;
        fputs("run,alloc,event,action,size,ns\n", c->lat);
    }
    if (a->pool_path) {
        if ((ret = create(a->pool_path, &c->poolf)))
            return ret;
        fputs("run,policy,capacity,probed,completed,oom_alloc,peak_reserved,reserved_high,"
              "used_high,reserved_end,grows,trims,oom_retries,streams\n",
              c->poolf);
    }
    if (a->blocks_path) {
        if ((ret = create(a->blocks_path, &c->blocksf)))
            return ret;
        fputs("run,id,action,stream,addr,size,reserved,used\n", c->blocksf);
    }
    if (a->calls_path) {
        if ((ret = create(a->calls_path, &c->callsf)))
            return ret;
        fputs("run,call,rc,size,ns\n", c->callsf);
    }
    return 0;
}

/* Every run through the driver, on the GPU, into rep. 0 or an exit status. */
static int replay(const args *a, ctx *c, const as_policy_spec *specs, size_t nspec, char **traces,
                  unsigned ntr, as_report *rep)
{
    as_device_factory fac = {.create = f_create,
                             .destroy = f_destroy,
                             .counters = f_counters,
                             .set_log = f_set_log,
                             .user = c};
    as_driver_opts d = {
        .specs = specs,
        .nspec = nspec,
        .caps = a->caps,
        .ncap = a->ncap,
        .engine = {.threads = 1, .factory = &fac},
        .max_group = 1, /* one device at a time: its ballast fills the GPU */
        .segs = c->segs,
        .seg_name = a->seg_path,
        .user = c,
        .on_group = on_group,
        .on_group_done = on_group_done,
        .on_segment = c->lat ? on_segment : NULL,
        .on_fail = on_fail,
        .on_note = on_note,
    };
    as_driver_result res = {.units = calloc(ntr, sizeof *res.units)};
    if (!res.units)
        return no_memory();
    int rc = as_driver_run(&d, traces, ntr, rep, &res);
    free(res.units);
    return rc ? EXIT_INPUT : 0;
}

int main(int argc, char **argv)
{
    args a = {.fmt = AS_REPORT_TABLE};
    ctx c = {.p = {.capacity = AS_CAPACITY_NONE}};
    as_policy_spec *specs = NULL;
    size_t nspec = 0;
    as_report *rep = NULL;
    FILE *out = stdout;
    char msgbuf[1024];
    int ret = parse(argc, argv, &a, &c);
    if (ret || a.done || (ret = make_specs(&a, &c, &specs, &nspec)) || (ret = open_logs(&a, &c)))
        goto done;
    if (as_report_create(&rep)) {
        ret = no_memory();
        goto done;
    }
    if ((ret = replay(&a, &c, specs, nspec, argv + optind, (unsigned)(argc - optind), rep)))
        goto done;
    for (unsigned t = 0; t < as_report_ntraces(rep); t++)
        if (as_driver_small_caps(rep, t, msgbuf, sizeof msgbuf))
            msg("%s", msgbuf);
    if (a.out_path && (ret = create(a.out_path, &out)))
        goto done;
    ret = write_error(write_report(rep, out, a.fmt, msgbuf, sizeof msgbuf), msgbuf,
                      a.out_path ? a.out_path : "stdout", ret);
done:
    if (c.segs)
        ret = write_error(as_runlog_close(c.segs, msgbuf, sizeof msgbuf), msgbuf, a.seg_path, ret);
    if (c.poolf)
        ret = write_status(fclose(c.poolf), a.pool_path, ret);
    if (c.blocksf)
        ret = write_status(fclose(c.blocksf), a.blocks_path, ret);
    if (c.callsf)
        ret = write_status(fclose(c.callsf), a.calls_path, ret);
    if (c.lat)
        ret = write_status(fclose(c.lat), a.lat_path, ret);
    if (out != stdout)
        ret = write_status(fclose(out), a.out_path, ret);
    as_report_destroy(rep);
    for (size_t i = 0; i < nspec; i++)
        as_policy_spec_free(&specs[i]);
    free(specs);
    free(a.caps);
    free(a.thr);
    free(a.ptext);
    return ret;
}
