/*
 * driver.c - the run driver (driver.h): specs x capacities over each trace, in groups of
 * runs that fit the host memory budget, each group one engine over its own decode.
 * Invariant: a group is in the report (and its rows in the logs) whole or not at all, and
 * every failure reaches on_fail exactly once before the driver returns its code.
 */
#include "driver.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* Runs per decode of a native trace file, however many fit the budget: runs then finish
 * (and an interrupt keeps them) group by group, every few seconds, for a decode that costs
 * about 1% of the runs' work (decoding is some 100 times faster than a run). Other formats
 * decode slower and stdin can be read only once: they go in as few groups as fit. */
#ifndef RUN_STEP
#define RUN_STEP 32
#endif

typedef struct drv {
    const as_driver_opts *o;
    as_engine_opts eng; /* o->engine with the driver's callbacks */
    as_report *rep;
    uint64_t budget;
    int usage; /* the failure was a usage error (stdin does not fit the budget) */
    /* The progress line: runs of earlier traces and groups, this group's, and the weights
     * (input sizes) of the traces done, this one and all, for the fraction done. */
    const char *label;
    uint64_t runs_total, runs_before; /* runs_before: of earlier traces */
    size_t group_r0, group_n, trace_runs;
    uint64_t trace_events; /* this trace's length once a group has decoded it, else 0 */
    double w_before, w_cur, w_total;
    int peaks; /* the group's pass walks at its peaks (AS_DRIVER_PEAKS) */
} drv;

/* The runs of one trace: how many, the report's index of the trace (-1 until its first
 * group is added), at most how many runs per group, and the reader that found the format
 * (native or not), still at its first event: the first decode takes it, so a trace run in
 * one group is opened once. */
typedef struct run_set {
    const char *path;
    size_t nruns;
    int trace;
    size_t step;
    as_trace_reader *first;
} run_set;

static int vfail(drv *d, int code, const char *path, const char *fmt, va_list ap)
{
    as_driver_fail f = {.code = code < 0 ? code : AS_EIO, .usage = d->usage, .path = path};
    vsnprintf(f.msg, sizeof f.msg, fmt, ap);
    if (d->o->on_fail)
        d->o->on_fail(d->o->user, &f);
    return f.code;
}

static int fail(drv *d, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(drv *d, int code, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(d, code, path, fmt, ap);
    va_end(ap);
    return rc;
}

static int trace_fail(drv *d, const as_trace_error *e, const char *path)
{
    char msg[800];
    as_trace_error_text(e, path, msg, sizeof msg);
    return fail(d, e->code, path, "%s", msg);
}

static int open_trace(drv *d, const char *path, as_trace_reader **out)
{
    as_trace_error err;
    memset(&err, 0, sizeof err);
    err.offset = err.event = UINT64_MAX;
    if (as_trace_open(path, d->o->reader, out, &err) < 0)
        return trace_fail(d, &err, path);
    return 0;
}

/* The trace's first decode takes the reader that probed it; the others open it afresh. */
static int take_trace(drv *d, run_set *rs, as_trace_reader **out)
{
    if (!rs->first)
        return open_trace(d, rs->path, out);
    *out = rs->first;
    rs->first = NULL;
    return 0;
}

static int oom(drv *d)
{
    return fail(d, AS_ENOMEM, NULL, "out of host memory");
}

static void clear(drv *d)
{
    as_driver_progress p = {.clear = 1};
    if (d->o->on_progress)
        d->o->on_progress(d->o->user, &p);
}

static void cb_segment(void *user, const as_seg_record *r)
{
    drv *d = user;
    if (d->o->segs)
        as_runlog_segment(d->o->segs, r);
    if (d->o->on_segment)
        d->o->on_segment(d->o->user, r);
}

static void cb_block(void *user, const as_block_record *r)
{
    drv *d = user;
    d->o->on_block(d->o->user, r);
}

static void cb_walk(void *user, unsigned run, uint64_t event, uint64_t alloc, const char *why,
                    const as_walk_item *it)
{
    const as_driver_pass *p = ((drv *)user)->o->pass;
    p->walk(p->user, run, event, alloc, why, it);
}

static void cb_events(void *user, const as_event *ev, size_t n)
{
    const as_driver_pass *p = ((drv *)user)->o->pass;
    p->events(p->user, ev, n);
}

static void cb_sample(void *user, const as_timeline_sample *s)
{
    as_runlog_sample(((drv *)user)->o->timeline, s);
}

/* The engine's report after each batch: runs done over every trace, and the fraction of
 * all the work (this group's fraction within the trace, the trace's within all). */
static void cb_runs(void *user, const as_engine_progress *p)
{
    drv *d = user;
    double g = as_driver_engine_frac(p, d->trace_events);
    double t =
        d->trace_runs ? ((double)d->group_r0 + g * (double)d->group_n) / (double)d->trace_runs : 0;
    as_driver_progress q = {
        .label = d->label,
        .done = d->runs_before + d->group_r0 + p->runs_done,
        .total = d->runs_total,
        .frac = d->w_total > 0 ? (d->w_before + d->w_cur * t) / d->w_total : 0,
    };
    d->o->on_progress(d->o->user, &q);
}

static int engine_fail(drv *d, const char *path, int rc, const as_trace_error *err,
                       const as_engine *e)
{
    if (rc < 0 && err->code < 0) /* the trace failed, not the engine */
        return trace_fail(d, err, path);
    return fail(d, rc, path, "%s: %s", path, as_engine_errmsg(e));
}

/* The --segment-map pass for runs [r0, r0 + n) that engine e ran. */
static int segmap_group(drv *d, const run_set *rs, const as_engine *e, size_t r0, size_t n,
                        unsigned base_run)
{
    as_trace_reader *rd2 = NULL;
    as_trace_error err = {.offset = UINT64_MAX, .event = UINT64_MAX};
    char why[400];
    int ret = open_trace(d, rs->path, &rd2);
    if (ret)
        return ret;
    int rc = as_segmap_pass(d->o->segmap, e, rd2, &d->eng, d->o->specs, d->o->caps, d->o->ncap, r0,
                            n, base_run, &err, why, sizeof why);
    as_trace_close(rd2);
    if (rc == AS_ENGINE_STOPPED)
        return AS_ENGINE_STOPPED;
    if (rc < 0 && why[0])
        return fail(d, rc, rs->path, "%s: %s", rs->path, why);
    if (rc < 0 && err.code < 0) /* the trace failed */
        return trace_fail(d, &err, rs->path);
    if (rc < 0)
        return fail(d, rc, rs->path, "%s: segment map: %s", rs->path, as_strerror(rc));
    return 0;
}

/* The peak walks that engine e's runs [r0, r0 + n) missed (peak_walk_missed: over the
 * engine's walk budget), in a pass of their own: the same runs again, each missed one
 * walked right after its peak_reserved_event, to the pass's walk hook; nothing else is
 * logged twice (no device log, samples, blocks, OOM walks or progress). */
static int peaks_group(drv *d, const run_set *rs, const as_engine *e, size_t r0, size_t n)
{
    const as_driver_opts *o = d->o;
    int missed = 0;
    for (size_t i = 0; i < n; i++) {
        const as_run_result *r = as_engine_result(e, (unsigned)i);
        missed |= r && r->peak_walk_missed && r->peak_reserved_event != AS_NONE;
    }
    if (!missed)
        return 0;
    as_engine_opts eo = d->eng;
    eo.timeline_every = 0;
    eo.on_segment = NULL;
    eo.on_sample = NULL;
    eo.on_progress = NULL;
    eo.on_runs = NULL;
    eo.on_block = NULL;
    eo.on_events = NULL;
    eo.max_live = 0;
    eo.walk_at_oom = 0;
    eo.walk_at_peak = 0;
    eo.on_walk = cb_walk;
    as_trace_reader *rd2 = NULL;
    as_engine *e2 = NULL;
    as_trace_error err = {.offset = UINT64_MAX, .event = UINT64_MAX};
    int rc = open_trace(d, rs->path, &rd2);
    if (rc)
        return rc;
    if (as_engine_create(&eo, &e2)) {
        rc = oom(d);
        goto out;
    }
    for (size_t i = r0; i < r0 + n && rc >= 0; i++) {
        const as_run_result *r = as_engine_result(e, (unsigned)(i - r0));
        rc = as_engine_add_run(e2, &o->specs[i / o->ncap], o->caps[i % o->ncap]);
        if (rc >= 0 && r->peak_walk_missed && r->peak_reserved_event != AS_NONE)
            rc = as_engine_walk_after(e2, (unsigned)rc, r->peak_reserved_event);
    }
    if (rc < 0) {
        rc = fail(d, rc, rs->path, "%s: the peaks' pass: %s", rs->path, as_engine_errmsg(e2));
        goto out;
    }
    rc = as_engine_run(e2, rd2, &err);
    if (rc < 0)
        rc = engine_fail(d, rs->path, rc, &err, e2);
out:
    as_engine_destroy(e2);
    as_trace_close(rd2);
    return rc;
}

/* The group's engine, its runs added, before its decode (of rd). */
static int group_engine(drv *d, const run_set *rs, const as_trace_reader *rd, size_t r0, size_t n,
                        uint64_t max_live, as_engine **out)
{
    const as_driver_opts *o = d->o;
    as_engine_opts eo = d->eng;
    eo.max_live = max_live;
    const as_driver_pass *p = o->pass;
    int want = p && p->begin ? p->begin(p->user, rs->path, rd, r0, n) : 0;
    if (want < 0)
        return fail(d, want, rs->path, "%s: %s", rs->path, as_strerror(want));
    if ((want & AS_DRIVER_EVENTS) && p->events)
        eo.on_events = cb_events;
    if ((want & AS_DRIVER_WALKS) && p->walk) { /* at the OOMs, and the peaks when asked */
        eo.on_walk = cb_walk;
        eo.walk_at_oom = 1;
        /* standard input cannot be read again for the peaks' pass: every peak is walked */
        eo.walk_at_peak = !(want & AS_DRIVER_PEAKS) ? 0 : strcmp(rs->path, "-") ? 1 : 2;
    }
    d->peaks = eo.walk_at_peak;
    as_driver_group g = {
        rs->path, r0, n, &o->specs[r0 / o->ncap], o->caps[r0 % o->ncap], as_report_nruns(d->rep)};
    int rc = o->on_group ? o->on_group(o->user, &g) : 0;
    if (rc)
        return fail(d, rc, rs->path, "%s: %s", rs->path, as_strerror(rc));
    if (as_engine_create(&eo, out))
        return oom(d);
    for (size_t i = r0; i < r0 + n; i++) {
        const as_policy_spec *sp = &o->specs[i / o->ncap];
        if ((rc = as_engine_add_run(*out, sp, o->caps[i % o->ncap])) < 0)
            return fail(d, rc, rs->path, "cannot add run %s at capacity %llu", sp->text,
                        (unsigned long long)o->caps[i % o->ncap]);
    }
    return 0;
}

/* A group that failed, was interrupted (or its segment map was) or outgrew the budget is
 * void: the rows it logged go too. Returns the group's status. */
static int group_void(drv *d, const run_set *rs, const as_engine *e, int rc, int ret,
                      unsigned base_run, uint64_t max_live, const as_trace_error *err,
                      int *budget_hit)
{
    const as_driver_opts *o = d->o;
    if (o->segs)
        as_runlog_discard(o->segs, base_run);
    if (o->timeline)
        as_runlog_discard(o->timeline, base_run);
    if (o->segmap)
        as_segmap_drop_from(o->segmap, base_run);
    if (rc == AS_ELIMIT && max_live)
        *budget_hit = 1;
    else if (rc == AS_ENGINE_STOPPED)
        ret = AS_ENGINE_STOPPED;
    else if (rc < 0)
        ret = engine_fail(d, rs->path, rc, err, e);
    return ret;
}

/* The group's rows are complete: into the report, out of their spool files into the logs. */
static int group_keep(drv *d, run_set *rs, as_trace_reader *rd, const as_engine *e, size_t r0,
                      size_t n)
{
    const as_driver_opts *o = d->o;
    if (as_report_add_engine(d->rep, &rs->trace, rs->path, rd, e))
        return oom(d);
    unsigned done = as_report_nruns(d->rep);
    int rc;
    if (o->pass && o->pass->keep &&
        (rc = o->pass->keep(o->pass->user, d->rep, (unsigned)rs->trace, rd, e, done - (unsigned)n)))
        return fail(d, rc, rs->path, "%s: %s", rs->path, as_strerror(rc));
    char why[300];
    if (o->segs && (rc = as_runlog_flush(o->segs, done, why, sizeof why)))
        return fail(d, rc, o->seg_name, "%s: %s", o->seg_name, why);
    if (o->timeline && (rc = as_runlog_flush(o->timeline, done, why, sizeof why)))
        return fail(d, rc, o->tl_name, "%s: %s", o->tl_name, why);
    if (r0 + n == rs->nruns && as_trace_reader_warnings(rd) && o->on_note) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s: %llu malformed records skipped", rs->path,
                 (unsigned long long)as_trace_reader_warnings(rd));
        o->on_note(o->user, msg);
    }
    if (o->on_group_done) {
        as_driver_group g = {
            rs->path, r0, n, &o->specs[r0 / o->ncap], o->caps[r0 % o->ncap], done - (unsigned)n};
        o->on_group_done(o->user, &g, e);
    }
    return 0;
}

/* One decode of the trace feeding runs [r0, r0 + n); adds them to the report. With max_live
 * set, *budget_hit says the trace outgrew it (nothing added: run again in groups). */
static int run_group(drv *d, run_set *rs, size_t r0, size_t n, uint64_t max_live, int *budget_hit)
{
    const as_driver_opts *o = d->o;
    as_trace_reader *rd = NULL;
    as_engine *e = NULL;
    int ret = take_trace(d, rs, &rd);
    if (ret)
        return ret;
    if ((ret = group_engine(d, rs, rd, r0, n, max_live, &e)))
        goto out;
    unsigned base_run = as_report_nruns(d->rep);
    if (o->segs)
        as_runlog_set_base(o->segs, base_run);
    if (o->timeline)
        as_runlog_set_base(o->timeline, base_run);
    d->group_r0 = r0;
    d->group_n = n;
    as_trace_error err = {.offset = UINT64_MAX, .event = UINT64_MAX};
    int rc = as_engine_run(e, rd, &err);
    if (rc == 0)
        d->trace_events = as_engine_summary(e)->events;
    if (rc == 0 && d->peaks)
        ret = peaks_group(d, rs, e, r0, n);
    if (rc == 0 && !ret && o->segmap)
        ret = segmap_group(d, rs, e, r0, n, base_run);
    clear(d);
    if (rc != 0 || ret)
        ret = group_void(d, rs, e, rc, ret, base_run, max_live, &err, budget_hit);
    else
        ret = group_keep(d, rs, rd, e, r0, n);
out:
    as_engine_destroy(e);
    as_trace_close(rd);
    return ret;
}

/* Runs in flight with --segments/--timeline: each holds a spool file per log, so at most
 * AS_DRIVER_LOG_GROUP and what the open-files limit leaves (64 kept for everything else). */
static size_t log_group(const drv *d)
{
    unsigned logs = (d->o->segs != NULL) + (d->o->timeline != NULL);
    struct rlimit rl;
    size_t g = AS_DRIVER_LOG_GROUP;
    if (logs && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        size_t room = rl.rlim_cur > 64 + logs ? (size_t)(rl.rlim_cur - 64) / logs : 1;
        if (room < g)
            g = room;
    }
    return logs ? g : SIZE_MAX;
}

/* Runs per group within the budget, from the trace's peak live allocations (one decode of
 * the trace without runs; none when a group is one run). 0 or a status. */
static int group_size(drv *d, run_set *rs, size_t *group)
{
    as_trace_reader *rd = NULL;
    as_engine *e = NULL;
    as_trace_error err = {.offset = UINT64_MAX, .event = UINT64_MAX};
    if (rs->step == 1) {
        *group = 1;
        return 0;
    }
    int ret = take_trace(d, rs, &rd);
    if (ret)
        return ret;
    as_engine_opts o = {.stop = d->eng.stop};
    if (as_engine_create(&o, &e)) {
        ret = oom(d);
        goto out;
    }
    int rc = as_engine_scan(e, rd, &err);
    clear(d);
    if (rc == AS_ENGINE_STOPPED) {
        ret = AS_ENGINE_STOPPED;
        goto out;
    }
    if (rc < 0) {
        ret = engine_fail(d, rs->path, rc, &err, e);
        goto out;
    }
    int logs = d->o->segs || d->o->timeline;
    const as_trace_summary *sum = as_engine_summary(e);
    uint64_t per = as_engine_run_bytes(sum->peak_live, sum->streams, logs);
    uint64_t g = d->budget / per;
    if (g > log_group(d))
        g = log_group(d);
    if (g > rs->step)
        g = rs->step;
    *group = g < 1 ? 1 : g > rs->nruns ? rs->nruns : (size_t)g;
    d->trace_events = as_engine_summary(e)->events;
out:
    as_engine_destroy(e);
    as_trace_close(rd);
    return ret;
}

/* 1 when path is a file in the native format (cheap to decode again). The reader that
 * found out goes in *rd for the first decode; NULL when the file did not open (that
 * decode opens it again and names the error). */
static int native_file(const drv *d, const char *path, as_trace_reader **rd)
{
    *rd = NULL;
    if (!strcmp(path, "-") || as_trace_open(path, d->o->reader, rd, NULL) < 0)
        return 0;
    return as_trace_reader_format(*rd) == AS_FMT_NATIVE;
}

/* Standard input can be read only once: its runs must go in one group. */
static int stdin_fail(drv *d, const run_set *rs)
{
    char b[32];
    d->usage = 1;
    if (rs->step < rs->nruns)
        return fail(d, AS_ELIMIT, "-",
                    "-: %zu runs of this trace go %zu at a time on this device, and standard "
                    "input can be read only once: give the trace as a file",
                    rs->nruns, rs->step);
    as_fmt_bytes(b, sizeof b, d->budget);
    return fail(d, AS_ELIMIT, "-",
                "-: %zu runs of this trace do not fit --memory %s at once, and standard input "
                "can be read only once: give the trace as a file, or a larger --memory",
                rs->nruns, b);
}

/* The runs of rs, its format known. They go in one pass when they fit the budget (engine
 * stops at max_live if the trace proves too big), else in groups (a decode of the trace
 * each, plus one to size them). */
static int run_runs(drv *d, run_set *rs)
{
    const as_driver_opts *o = d->o;
    if (o->max_group && o->max_group < rs->step)
        rs->step = o->max_group;
    int logs = o->segs || o->timeline;
    uint64_t per0 = as_engine_run_bytes(0, 0, logs), max_live = 0;
    int grouped = rs->nruns > 1 && (rs->nruns > log_group(d) || d->budget / rs->nruns <= per0 ||
                                    rs->nruns > rs->step);
    if (rs->nruns > 1 && !grouped)
        max_live = (d->budget / rs->nruns - per0) / AS_ENGINE_RUN_PER_LIVE;
    d->label = rs->path;
    d->trace_runs = rs->nruns;
    d->trace_events = 0;
    if (!grouped) {
        int hit = 0, ret = run_group(d, rs, 0, rs->nruns, max_live, &hit);
        if (ret || !hit)
            return ret;
    }
    if (strcmp(rs->path, "-") == 0)
        return stdin_fail(d, rs);
    size_t group = 1;
    int ret = group_size(d, rs, &group);
    for (size_t r0 = 0; !ret && r0 < rs->nruns; r0 += group) {
        int hit = 0;
        size_t n = rs->nruns - r0 < group ? rs->nruns - r0 : group;
        ret = run_group(d, rs, r0, n, 0, &hit);
    }
    return ret;
}

/* Runs one trace; adds its trace entry and runs to the report. */
static int run_trace(drv *d, const char *path)
{
    run_set rs = {path, d->o->nspec * d->o->ncap, -1, SIZE_MAX, NULL};
    if (native_file(d, path, &rs.first))
        rs.step = RUN_STEP;
    int ret = run_runs(d, &rs);
    as_trace_close(rs.first); /* not taken: a group failed before its decode */
    return ret;
}

static int stopped(const drv *d)
{
    return d->eng.stop && *d->eng.stop;
}

/* Before any run of several traces: opens and decodes each one (decoding is far cheaper
 * than a run), so that a bad trace costs no simulation. Standard input can be read only
 * once: it is checked as it runs. Without skip_bad the first bad trace is the answer;
 * with it, each bad one is named and marked. 0 or a status. */
static int check_traces(drv *d, char *const *paths, unsigned n, unsigned char *bad, unsigned *nbad)
{
    as_event *evs = malloc(4096 * sizeof *evs);
    if (!evs)
        return oom(d);
    int ret = 0;
    for (unsigned i = 0; i < n && !stopped(d) && (!ret || d->o->skip_bad); i++) {
        if (!strcmp(paths[i], "-"))
            continue;
        as_trace_reader *rd = NULL;
        size_t got;
        int rc = 0;
        if ((ret = open_trace(d, paths[i], &rd)) == 0) {
            while (!stopped(d) && (rc = as_trace_next_batch(rd, evs, 4096, &got)) == 0)
                ;
            if (rc < 0)
                ret = trace_fail(d, as_trace_reader_error(rd), paths[i]);
        }
        as_trace_close(rd);
        if (ret) {
            bad[i] = 1;
            (*nbad)++;
        }
    }
    free(evs);
    if (ret && !d->o->skip_bad)
        return ret;
    return stopped(d) ? AS_ENGINE_STOPPED : 0;
}

/* A trace's share of the work for the progress line: its size (1 for stdin). */
static double trace_weight(const char *path)
{
    struct stat st;
    return strcmp(path, "-") && stat(path, &st) == 0 && st.st_size > 0 ? (double)st.st_size : 1;
}

static void drv_init(drv *d, const as_driver_opts *o, as_report *rep)
{
    memset(d, 0, sizeof *d);
    d->o = o;
    d->rep = rep;
    d->budget = o->budget ? o->budget : AS_DRIVER_MEMORY_DEFAULT;
    d->eng = o->engine;
    d->eng.user = d;
    d->eng.timeline_every = o->timeline ? o->engine.timeline_every : 0;
    d->eng.on_segment = o->segs || o->on_segment ? cb_segment : NULL;
    d->eng.on_sample = o->timeline ? cb_sample : NULL;
    d->eng.on_block = o->on_block ? cb_block : NULL;
    d->eng.on_runs = o->on_progress ? cb_runs : NULL;
    d->eng.max_live = 0;
}

int as_driver_run(const as_driver_opts *o, char *const *paths, unsigned n, as_report *rep,
                  as_driver_result *res)
{
    drv d;
    drv_init(&d, o, rep);
    unsigned nshards = o->nshards ? o->nshards : 1, mine = 0;
    for (unsigned i = 0; i < n; i++)
        if (i % nshards == o->shard) { /* this shard's traces */
            mine++;
            d.w_total += trace_weight(paths[i]);
        }
    d.runs_total = (uint64_t)o->nspec * o->ncap * mine;
    res->runs_total = d.runs_total;
    res->nbad = 0;
    res->nunits = 0;
    unsigned char *bad = calloc(n ? n : 1, 1); /* per trace: it failed (skip_bad) */
    if (!bad)
        return oom(&d);
    int ret = n > 1 ? check_traces(&d, paths, n, bad, &res->nbad) : 0;
    for (unsigned i = 0; i < n && !ret; i++) {
        if (i % nshards != o->shard)
            continue; /* another shard's trace */
        d.w_cur = trace_weight(paths[i]);
        unsigned before = as_report_ntraces(rep);
        if (!bad[i])
            ret = run_trace(&d, paths[i]);
        if (as_report_ntraces(rep) > before) /* the report's trace is unit i */
            res->units[res->nunits++] = i;
        if (ret < 0 && o->skip_bad && !d.usage) { /* named; its runs are not in the report */
            bad[i] = 1;
            res->nbad++;
            ret = 0;
        }
        d.runs_before += (uint64_t)o->nspec * o->ncap;
        d.w_before += d.w_cur;
    }
    clear(&d);
    free(bad);
    return ret;
}

int as_driver_small_caps(const as_report *rep, unsigned t, char *msg, size_t n)
{
    const char *path;
    unsigned nr = as_report_nruns(rep);
    uint64_t runs = 0, below = 0, min = as_report_trace(rep, t, &path)->min_request;
    for (unsigned i = 0; i < nr && min; i++) {
        unsigned rt;
        const as_run_result *r = as_report_run(rep, i, &rt);
        if (rt == t && r->capacity != AS_CAPACITY_NONE && r->capacity < min) {
            runs++;
            below = r->capacity > below ? r->capacity : below;
        }
    }
    if (!runs)
        return 0;
    char a[32], b[32];
    as_fmt_bytes(a, sizeof a, below);
    as_fmt_bytes(b, sizeof b, min);
    snprintf(msg, n,
             "%s: %llu run%s at a capacity %s%s, below the trace's smallest request (%s): %s at "
             "the first allocation",
             path, (unsigned long long)runs, runs == 1 ? "" : "s", runs == 1 ? "of " : "up to ", a,
             b, runs == 1 ? "it fails" : "they fail");
    return 1;
}

double as_driver_engine_frac(const as_engine_progress *e, uint64_t events_total)
{
    double total = (double)events_total;
    if (!events_total) {
        if (!e->bytes_total || !e->bytes_done)
            return 0;
        total = (double)e->decoded * (double)e->bytes_total / (double)e->bytes_done;
    }
    if (total < (double)e->events)
        total = (double)e->events;
    /* Runs still going handle every event left; finished ones are done. */
    double active = (double)(e->runs - e->runs_done);
    double left = active * (total - (double)e->events);
    double done = (double)e->run_events;
    return done + left > 0 ? done / (done + left) : 0;
}
