/*
 * replay_main.c - allocsim-replay: the simulator's runs, on a real GPU.
 *
 *   allocsim-replay [-p SPEC]... [-c CAP]... [-f table|csv|json] [-o FILE]
 *                   [--segments F] [--latency F] [--no-sync] TRACE...
 *   allocsim-replay --async [--release-threshold N]... [-c CAP]... [--pool F] ... TRACE...
 *
 * Every -p crossed with every -c is one run, exactly as `allocsim run` numbers them, with
 * the same policy code; only the device differs: a CUDA device (cuda_device.c) whose
 * capacity the driver enforces. The runs go one at a time, each with its own engine
 * (the ballast of two devices cannot coexist), so each trace is read once per run.
 * The JSON report is allocsim's, marked "measured": true at the top; --segments is
 * allocsim's CSV with the real addresses; --latency has every successful device call
 * with its measured time: run,alloc,event,action,size,ns.
 *
 * --async replays through the CUDA stream-ordered pool instead of a policy (async_pool.h):
 * one run per release threshold and capacity, reserved = the pool's ReservedMemCurrent;
 * --segments then logs the pool's growth and trim steps, and --pool one CSV line per run
 * with the pool's own high-water marks.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_pool.h"
#include "cli.h"
#include "cuda_device.h"
#include "cuda_driver.h"
#include "engine.h"
#include "report.h"

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
    "\n"
    "Needs an NVIDIA GPU and its driver (libcuda.so.1, loaded at run time); without them it\n"
    "says so and exits 1. 'allocsim run' simulates the same runs on any machine.\n"
    "\n"
    "Exit status: 0 when it ran (OOMs included), 1 bad input, I/O or CUDA failure (no\n"
    "driver included), 2 usage.\n";

enum { OPT_SEGMENTS = 256, OPT_LATENCY, OPT_NOSYNC, OPT_DEVICE, OPT_ASYNC, OPT_THRESHOLD,
       OPT_POOL };
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
    int async;               /* --async: the factory makes as_asyncpool devices */
    int limits_itself;       /* the run's policy applies the capacity itself */
    uint64_t threshold;      /* the release threshold of the run being created */
    as_asyncpool *pool;      /* the async run in progress */
    FILE *poolf;
} ctx;

/* ---- the device factory ---------------------------------------------------------------- */

static int f_create(void *user, uint64_t capacity, as_device *out, void **handle)
{
    ctx *c = user;
    if (c->async) {
        as_asyncpool_params ap = { .capacity = capacity, .release_threshold = c->threshold,
                                   .device = c->p.device, .no_sync = c->p.no_sync };
        as_asyncpool *a;
        int rc = as_asyncpool_create(&ap, &a, c->why, sizeof c->why);
        if (rc)
            return rc < 0 ? rc : AS_EDEVICE;
        as_asyncpool_stats st;
        as_asyncpool_stats_get(a, &st);
        c->probed = st.probed;
        c->pool = a;
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

static void on_segment(void *user, const as_seg_record *r)
{
    ctx *c = user;
    if (c->segs)
        as_runlog_segment(c->segs, r);
    if (c->lat)
        fprintf(c->lat, "%u,%llu,%llu,%s,%llu,%.0f\n", c->run, (unsigned long long)r->alloc,
                (unsigned long long)r->event, as_dev_action_name(r->dev.action),
                (unsigned long long)r->dev.size, r->dev.cost_ns);
}

/* ---- one run --------------------------------------------------------------------------- */

static int one_run(const char *path, ctx *c, const as_policy_spec *spec, uint64_t cap,
                   as_report *rep, int *trace_idx)
{
    as_trace_reader *rd = NULL;
    as_engine *e = NULL;
    as_device_factory fac = { .create = f_create, .destroy = f_destroy, .counters = f_counters,
                              .set_log = f_set_log, .user = c };
    as_engine_opts o = { .threads = 1, .on_segment = on_segment, .user = c, .factory = &fac };
    int ret = as_cli_open_trace(path, &rd);
    if (ret)
        return ret;
    ret = AS_EXIT_INPUT;
    c->why[0] = 0;
    if (as_engine_create(&o, &e) || as_engine_add_run(e, spec, cap) < 0) {
        as_cli_msg("out of host memory");
        goto out;
    }
    c->run = as_report_nruns(rep);
    if (c->segs)
        as_runlog_set_base(c->segs, c->run);
    as_trace_error err;
    memset(&err, 0, sizeof err);
    err.offset = err.event = UINT64_MAX;
    int rc = as_engine_run(e, rd, &err);
    if (rc < 0 && err.code < 0) { /* the trace failed, not the engine */
        ret = as_cli_trace_fail(&err, path);
        goto out;
    }
    if (rc < 0) {
        const char *pe = c->async && c->pool ? as_asyncpool_errmsg(c->pool) : "";
        as_cli_msg("%s: %s, capacity %llu: %s%s%s%s%s", path, spec->text,
                   (unsigned long long)cap, as_engine_errmsg(e), c->why[0] ? ": " : "", c->why,
                   pe[0] ? ": " : "", pe);
        goto out;
    }
    if (as_report_add_engine(rep, trace_idx, path, rd, e)) { /* e has the one run */
        as_cli_msg("out of host memory");
        goto out;
    }
    const as_run_result *res = as_engine_result(e, 0);
    fprintf(stderr, "allocsim-replay: %s %s cap %llu (%s %llu): %s, peak reserved %llu\n", path,
            spec->text, (unsigned long long)cap,
            c->limits_itself ? "policy-enforced, no ballast" : "driver-enforced",
            (unsigned long long)(c->limits_itself ? cap : c->probed),
            res->completed ? "completed" : "OOM", (unsigned long long)res->peak_reserved);
    if (c->async && c->pool) {
        as_asyncpool_stats st;
        as_asyncpool_stats_get(c->pool, &st);
        fprintf(stderr, "allocsim-replay:   pool: reserved high %llu, used high %llu, %llu grows, "
                        "%llu trims, %llu OOM retries, %llu streams\n",
                (unsigned long long)st.reserved_high, (unsigned long long)st.used_high,
                (unsigned long long)st.grows, (unsigned long long)st.trims,
                (unsigned long long)st.oom_retries, (unsigned long long)st.streams);
        if (c->poolf)
            fprintf(c->poolf, "%u,\"%s\",%llu,%llu,%d,%lld,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu\n",
                    c->run, spec->text, (unsigned long long)cap, (unsigned long long)c->probed,
                    res->completed,
                    res->oom_alloc == AS_NONE ? -1LL : (long long)res->oom_alloc,
                    (unsigned long long)res->peak_reserved, (unsigned long long)st.reserved_high,
                    (unsigned long long)st.used_high, (unsigned long long)st.reserved_end,
                    (unsigned long long)st.grows, (unsigned long long)st.trims,
                    (unsigned long long)st.oom_retries, (unsigned long long)st.streams);
    }
    ret = AS_EXIT_OK;
out:
    as_engine_destroy(e); /* frees the device, its segments and its ballast */
    as_trace_close(rd);
    return ret;
}

/* The report with "measured": true as its first member. */
static int write_report(const as_report *rep, FILE *out, as_report_fmt fmt)
{
    if (fmt != AS_REPORT_JSON)
        return as_report_write(rep, out, fmt);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return -ENOMEM;
    int rc = as_report_write(rep, m, fmt);
    if (fclose(m) && !rc)
        rc = -EIO;
    char *brace = rc ? NULL : strchr(buf, '{');
    if (brace) {
        fwrite(buf, 1, (size_t)(brace - buf) + 1, out);
        fputs("\"measured\": true, ", out);
        fputs(brace + 1, out);
    } else if (!rc) {
        rc = -EINVAL;
    }
    free(buf);
    return rc ? rc : (ferror(out) ? -EIO : 0);
}

int main(int argc, char **argv)
{
    const char *out_path = NULL, *seg_path = NULL, *lat_path = NULL, *pool_path = NULL;
    const char **ptext = calloc((size_t)argc + 1, sizeof *ptext);
    uint64_t *caps = calloc((size_t)argc + 1, sizeof *caps);
    uint64_t *thr = calloc((size_t)argc + 1, sizeof *thr);
    as_policy_spec *specs = NULL;
    size_t np = 0, ncap = 0, nspec = 0, nthr = 0;
    as_report_fmt fmt = AS_REPORT_TABLE;
    as_report *rep = NULL;
    ctx c = { .p = { .capacity = AS_CAPACITY_NONE } };
    FILE *out = stdout;
    int ret = AS_EXIT_OK, ch;
    const char *cmd = "allocsim-replay";
    if (!ptext || !caps || !thr) {
        as_cli_msg("out of host memory");
        ret = AS_EXIT_INPUT;
        goto done;
    }
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":p:c:f:o:hV", opts, NULL)) != -1) {
        switch (ch) {
        case 'p':
            ptext[np++] = optarg;
            break;
        case 'c':
            if ((ret = as_cli_parse_capacity(cmd, optarg, &caps[ncap++])))
                goto done;
            break;
        case 'f':
            if (as_report_fmt_parse(optarg, &fmt)) {
                ret = as_cli_usage(cmd, "-f %s: table, csv or json", optarg);
                goto done;
            }
            break;
        case 'o':
            out_path = optarg;
            break;
        case OPT_SEGMENTS:
            seg_path = optarg;
            break;
        case OPT_LATENCY:
            lat_path = optarg;
            break;
        case OPT_NOSYNC:
            c.p.no_sync = 1;
            break;
        case OPT_ASYNC:
            c.async = 1;
            break;
        case OPT_THRESHOLD:
            if (strcmp(optarg, "max") == 0)
                thr[nthr++] = UINT64_MAX;
            else if (as_cli_parse_u64(optarg, &thr[nthr++])) {
                ret = as_cli_usage(cmd, "--release-threshold %s: bytes or max", optarg);
                goto done;
            }
            break;
        case OPT_POOL:
            pool_path = optarg;
            break;
        case OPT_DEVICE: {
            uint64_t d;
            if (as_cli_parse_u64(optarg, &d) || d > 64) {
                ret = as_cli_usage(cmd, "--device %s: a device ordinal", optarg);
                goto done;
            }
            c.p.device = (int)d;
            break;
        }
        case 'h':
            fputs(help, stdout);
            goto done;
        case 'V':
            as_cli_version("allocsim-replay");
            printf("CUDA runtime %d.%d (static)\n", CUDART_VERSION / 1000,
                   CUDART_VERSION % 1000 / 10);
            goto done;
        case ':':
        default:
            ret = as_cli_bad_option(cmd, ch, argv);
            goto done;
        }
    }
    if (optind >= argc) {
        ret = as_cli_usage(cmd, "no trace given");
        goto done;
    }
    if (c.async && np) {
        ret = as_cli_usage(cmd, "--async replays the CUDA pool itself: no -p");
        goto done;
    }
    if (!c.async && (nthr || pool_path)) {
        ret = as_cli_usage(cmd, "--release-threshold and --pool need --async");
        goto done;
    }
    if (c.async && nthr == 0)
        thr[nthr++] = 0;
    if (np == 0 && !c.async)
        ptext[np++] = "torch";
    if (ncap == 0)
        caps[ncap++] = AS_CAPACITY_NONE;
    if (c.async)
        np = nthr;
    if (!(specs = calloc(np, sizeof *specs))) {
        as_cli_msg("out of host memory");
        ret = AS_EXIT_INPUT;
        goto done;
    }
    for (; nspec < np; nspec++) {
        if (c.async) {
            if (as_asyncpool_spec(thr[nspec], &specs[nspec])) {
                as_cli_msg("out of host memory");
                ret = AS_EXIT_INPUT;
                goto done;
            }
            continue;
        }
        if ((ret = as_cli_parse_spec(cmd, ptext[nspec], &specs[nspec])))
            goto done;
    }
    char why[512];
    if (as_cu_load(why, sizeof why)) {
        fprintf(stderr,
                "allocsim-replay: cannot load the NVIDIA CUDA driver (%s): it replays "
                "on a GPU; 'allocsim run' simulates the same runs without one\n",
                why);
        ret = AS_EXIT_INPUT;
        goto done;
    }
    int orc;
    if (seg_path && (orc = as_runlog_open(seg_path, AS_RUNLOG_SEGMENTS, &c.segs))) {
        ret = as_cli_cannot_create(seg_path, -orc);
        goto done;
    }
    if (lat_path) {
        if ((ret = as_cli_create(lat_path, &c.lat)))
            goto done;
        fputs("run,alloc,event,action,size,ns\n", c.lat);
    }
    if (pool_path) {
        if ((ret = as_cli_create(pool_path, &c.poolf)))
            goto done;
        fputs("run,policy,capacity,probed,completed,oom_alloc,peak_reserved,reserved_high,"
              "used_high,reserved_end,grows,trims,oom_retries,streams\n",
              c.poolf);
    }
    if (as_report_create(&rep)) {
        as_cli_msg("out of host memory");
        ret = AS_EXIT_INPUT;
        goto done;
    }
    for (int t = optind; t < argc; t++) {
        int trace_idx = -1;
        for (size_t i = 0; i < nspec; i++)
            for (size_t j = 0; j < ncap; j++) {
                c.threshold = c.async ? thr[i] : 0;
                c.limits_itself = !c.async && (specs[i].policy->flags & AS_POLICY_F_LIMITS_ITSELF);
                if ((ret = one_run(argv[t], &c, &specs[i], caps[j], rep, &trace_idx)))
                    goto done;
            }
    }
    as_cli_warn_small_caps(rep);
    if (out_path && (ret = as_cli_create(out_path, &out)))
        goto done;
    ret = as_cli_write_status(write_report(rep, out, fmt), out_path ? out_path : "stdout", ret);
done:
    if (c.segs)
        ret = as_cli_write_status(as_runlog_close(c.segs), seg_path, ret);
    if (c.poolf)
        ret = as_cli_write_status(fclose(c.poolf), pool_path, ret);
    if (c.lat)
        ret = as_cli_write_status(fclose(c.lat), lat_path, ret);
    if (out != stdout)
        ret = as_cli_write_status(fclose(out), out_path, ret);
    as_report_destroy(rep);
    for (size_t i = 0; i < nspec; i++)
        as_policy_spec_free(&specs[i]);
    free(specs);
    free(caps);
    free(thr);
    free(ptext);
    return ret;
}
