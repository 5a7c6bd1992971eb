/*
 * mincap.c - minimum capacity search and sweep parsing (mincap.h).
 *
 * One uncapped pass gives the trace's peak requested R and the policy's peak reserved P;
 * then every capacity of the grid [roundup(R), roundup(P)] is run, `batch` capacities per
 * decode, bottom up. The answer is read off the complete table of outcomes, so it is
 * exact on the grid whatever shape the fit/fail pattern has.
 */
#include "mincap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>
#include <unistd.h>

#include "curve.h"
#include "grow.h"
#include "report.h"

#define DEFAULT_BATCH 64u

static void set_why(char *why, size_t n, const char *fmt, const char *a, const char *b)
{
    if (why && n)
        snprintf(why, n, fmt, a, b);
}

/* The trace decoded into memory for curve mode. */
typedef struct mem_trace {
    as_event *ev;
    size_t n;
    size_t map_bytes;    /* ev is a mapping of this many bytes (huge pages), 0: malloc'd */
    int pinned;          /* the policy read the capacity at once: passes instead */
    as_sites *sites;     /* the trace's call sites, copied: its reader is closed */
    unsigned pass_batch; /* runs per pass then (the memory budget's batch) */
} mem_trace;

static as_mincap_point point_of(const as_run_result *r, uint64_t cap)
{
    return (as_mincap_point){
        .capacity = cap,
        .completed = r->completed,
        .oom_event = r->completed ? AS_NONE : r->oom_event,
        .oom_alloc = r->completed ? AS_NONE : r->oom_alloc,
        .allocs = r->completed ? r->allocs : (r->oom_alloc == AS_NONE ? r->allocs : r->oom_alloc),
        .peak_requested = r->peak_requested,
        .peak_reserved = r->peak_reserved,
    };
}

/* Frees mt's events and call sites. */
static void mt_free(mem_trace *mt)
{
    if (mt->map_bytes)
        munmap(mt->ev, mt->map_bytes);
    else
        free(mt->ev);
    as_sites_free(mt->sites);
    *mt = (mem_trace){0};
}

#define HUGE_PAGE (2u << 20)

/* Moves mt's events into transparent huge pages where the kernel gives them (Linux's
 * MADV_HUGEPAGE; elsewhere, or when refused, they stay where they are). A curve forks at
 * every split and each of its processes reads the events from its fork to the end: a fork
 * copies, and an exit drops, one page-table entry per 4 KiB page of them (888 for llama's
 * 75,748 events, most of what a curve's process maps) but one per 2 MiB page, and the
 * reads miss the TLB less (sim/README.md, tune: 15 % less CPU for a threshold curve of
 * llama). The copy holds both for a moment: not when that passes the events' limit. */
static void mt_huge(mem_trace *mt, uint64_t limit)
{
#ifdef MADV_HUGEPAGE
    size_t bytes = mt->n * sizeof *mt->ev;
    if (bytes < HUGE_PAGE / 4)
        return; /* under 128 pages: clearing a huge page costs about what it saves */
    size_t len = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    if (limit && (uint64_t)bytes + len > limit)
        return;
    /* a huge page must be aligned: map one more and trim both ends */
    char *m =
        mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return;
    char *a = (char *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (a > m)
        munmap(m, (size_t)(a - m));
    if (a + len < m + len + HUGE_PAGE)
        munmap(a + len, (size_t)(m + len + HUGE_PAGE - (a + len)));
    if (madvise(a, len, MADV_HUGEPAGE)) {
        munmap(a, len);
        return;
    }
    memcpy(a, mt->ev, bytes);
    free(mt->ev);
    mt->ev = (as_event *)(void *)a;
    mt->map_bytes = len;
#else
    (void)mt;
    (void)limit;
#endif
}

/* Decodes the whole trace into mt when it takes at most `limit` bytes (0: no limit).
 * Returns 0 (mt->ev NULL when it does not fit), or a trace error (err filled). */
static int load_events(as_trace_open_fn open, void *ou, uint64_t limit, mem_trace *mt,
                       as_trace_error *err)
{
    as_trace_reader *rd = NULL;
    size_t cap = 0;
    *mt = (mem_trace){0};
    int rc = open(ou, &rd, err);
    while (rc == 0) {
        if (mt->n == cap && (as_grow((void **)&mt->ev, &cap, mt->n + 4096, sizeof *mt->ev, 4096) ||
                             (limit && cap * sizeof *mt->ev > limit))) {
            free(mt->ev); /* too large for the budget (or the host): passes instead */
            *mt = (mem_trace){0};
            break;
        }
        size_t got = 0;
        rc = as_trace_next_batch(rd, mt->ev + mt->n, cap - mt->n, &got);
        for (size_t i = 0; i < got; i++)
            if (mt->ev[mt->n + i].op == AS_OP_MARK) /* an ALLOC's pool shares the field */
                mt->ev[mt->n + i].label = NULL; /* valid until the next read; no run needs it */
        mt->n += got;
    }
    if (rc == AS_TRACE_EOF && mt->ev &&
        (as_sites_new(&mt->sites) || as_sites_copy(mt->sites, as_trace_reader_sites(rd)))) {
        free(mt->ev); /* no room for the call sites (caught OOMs): passes instead */
        as_sites_free(mt->sites);
        *mt = (mem_trace){0};
    }
    if (rc < 0 && err) {
        const as_trace_error *re = as_trace_reader_error(rd);
        if (re)
            *err = *re;
    }
    if (rd)
        as_trace_close(rd);
    if (rc == AS_TRACE_EOF) {
        if (mt->ev)
            mt_huge(mt, limit);
        return 0;
    }
    free(mt->ev);
    as_sites_free(mt->sites);
    *mt = (mem_trace){0};
    return rc < 0 ? rc : 0;
}

/* caps[0..n) as one curve over the decoded trace; fills pts. Returns as as_curve_run. */
static int run_curve(const mem_trace *mt, const as_policy_spec *spec, const as_mincap_opts *o,
                     const uint64_t *caps, size_t n, as_mincap_point *pts, char *why,
                     size_t why_len)
{
    as_run_result *res = malloc(n * sizeof *res);
    if (!res) {
        set_why(why, why_len, "out of host memory for %s%s", "the sweep", "");
        return AS_ENOMEM;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    as_curve_opts co = {.procs = o->threads  ? o->threads
                                 : cores > 0 ? (unsigned)cores
                                             : 1,
                        .stop = o->stop,
                        .sites = mt->sites,
                        .no_caught_ooms = o->no_caught_ooms,
                        .streams = o->streams};
    int rc = as_curve_run(spec, caps, n, mt->ev, mt->n, &co, res, why, why_len);
    for (size_t i = 0; rc == 0 && i < n; i++)
        pts[i] = point_of(&res[i], caps[i]);
    free(res);
    return rc;
}

/* One pass: runs spec at caps[0..n) over a fresh reader (or, with mt, as a curve); fills
 * pts. */
static int run_pass(as_trace_open_fn open, void *ou, const as_policy_spec *spec,
                    const as_mincap_opts *o, const uint64_t *caps, size_t n, as_mincap_point *pts,
                    as_trace_summary *sum, as_trace_error *err, char *why, size_t why_len,
                    mem_trace *mt)
{
    if (mt && mt->ev && !mt->pinned) {
        int rc = run_curve(mt, spec, o, caps, n, pts, why, why_len);
        if (rc != AS_CURVE_PINNED)
            return rc;
        mt->pinned = 1; /* nothing to share: one run per capacity from now on */
    }
    if (mt && mt->ev) {
        for (size_t i = 0; i < n; i += mt->pass_batch) {
            size_t k = n - i < mt->pass_batch ? n - i : mt->pass_batch;
            int rc =
                run_pass(open, ou, spec, o, caps + i, k, pts + i, NULL, err, why, why_len, NULL);
            if (rc)
                return rc;
        }
        return 0;
    }
    as_engine *e = NULL;
    as_trace_reader *rd = NULL;
    as_engine_opts eo = {.threads = o->threads,
                         .stop = o->stop,
                         .on_runs = o->on_runs,
                         .user = o->user,
                         .no_caught_ooms = o->no_caught_ooms,
                         .streams = o->streams};
    int rc = as_engine_create(&eo, &e);
    if (rc) {
        set_why(why, why_len, "cannot create the engine%s%s", "", "");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        rc = as_engine_add_run(e, spec, caps[i]);
        if (rc < 0) {
            set_why(why, why_len, "cannot add a run: %s%s", as_engine_errmsg(e), "");
            goto out;
        }
    }
    rc = open(ou, &rd, err);
    if (rc)
        goto out;
    rc = as_engine_run(e, rd, err);
    if (rc) {
        if (!err || err->code == 0) /* the engine failed, not the trace */
            set_why(why, why_len, "%s%s", as_engine_errmsg(e), "");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        pts[i] = point_of(as_engine_result(e, (unsigned)i), caps[i]);
    if (sum)
        *sum = *as_engine_summary(e);
out:
    if (rd)
        as_trace_close(rd);
    as_engine_destroy(e);
    return rc;
}

/* Reads min capacity, monotonicity and the failing ranges off the full table. */
static int analyse(as_mincap_result *m)
{
    m->min_capacity = AS_NONE;
    m->fits_from = AS_NONE;
    m->monotone = 0;
    size_t first = m->npoints;
    for (size_t i = 0; i < m->npoints; i++)
        if (m->points[i].completed) {
            first = i;
            break;
        }
    if (first == m->npoints)
        return 0;
    m->min_capacity = m->points[first].capacity;
    if (m->points[m->npoints - 1].completed) {
        size_t k = m->npoints - 1;
        while (k > first && m->points[k - 1].completed)
            k--;
        m->fits_from = m->points[k].capacity;
    }
    size_t cap = 0;
    for (size_t i = first + 1; i < m->npoints; i++) {
        const as_mincap_point *p = &m->points[i];
        if (p->completed)
            continue;
        if (m->ngaps && m->gaps[m->ngaps - 1].hi + m->step == p->capacity) {
            as_cap_range *g = &m->gaps[m->ngaps - 1];
            g->hi = p->capacity;
            g->count++;
            if (p->oom_alloc < g->oom_alloc_min)
                g->oom_alloc_min = p->oom_alloc;
            if (p->oom_alloc > g->oom_alloc_max)
                g->oom_alloc_max = p->oom_alloc;
            continue;
        }
        if (m->ngaps == cap) {
            size_t nc = cap ? cap * 2 : 8;
            as_cap_range *ng = realloc(m->gaps, nc * sizeof *ng);
            if (!ng)
                return AS_ENOMEM;
            m->gaps = ng;
            cap = nc;
        }
        m->gaps[m->ngaps++] = (as_cap_range){.lo = p->capacity,
                                             .hi = p->capacity,
                                             .count = 1,
                                             .oom_alloc_min = p->oom_alloc,
                                             .oom_alloc_max = p->oom_alloc};
    }
    m->monotone = m->ngaps == 0;
    return 0;
}

/* A policy that enforces the capacity itself (AS_POLICY_F_LIMITS_ITSELF) may hold a little
 * more than it: PyTorch checks a new allocation's rounded size against its limit but maps
 * expandable segments in whole 20 MiB pages, so a run can fit below peak requested. Then
 * capacities are run downwards, a batch at a time, until every grid capacity from the
 * lowest one that fits down to `below` under it has been run (or the grid's first step).
 * New points go in front of m->points; m->lo moves down. */
static int probe_below(as_trace_open_fn open, void *ou, const as_policy_spec *spec,
                       const as_mincap_opts *o, as_mincap_result *m, uint64_t *caps, unsigned batch,
                       as_trace_error *err, char *why, size_t why_len, mem_trace *mt)
{
    const uint64_t step = m->step;
    const uint64_t below = o->below ? o->below : AS_MINCAP_BELOW;
    m->self_limited = 1;
    for (;;) {
        uint64_t low = m->lo;
        for (size_t i = 0; i < m->npoints; i++)
            if (m->points[i].completed) {
                low = m->points[i].capacity;
                break;
            }
        uint64_t target = low > below + step ? (low - below + step - 1) / step * step : step;
        if (m->lo <= target || m->lo <= step)
            return 0;
        uint64_t top = m->lo - step;
        size_t n = (size_t)((top - target) / step + 1);
        if (n > batch)
            n = batch;
        if (o->max_points && m->npoints + n > o->max_points) {
            if (why && why_len)
                snprintf(why, why_len, "more than %llu capacities to probe below the lowest fit",
                         (unsigned long long)o->max_points);
            return AS_ELIMIT;
        }
        as_mincap_point *np = malloc((m->npoints + n) * sizeof *np);
        if (!np) {
            set_why(why, why_len, "out of host memory for %s%s", "the sweep", "");
            return AS_ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
            caps[i] = top - (uint64_t)(n - 1 - i) * step;
        int rc = run_pass(open, ou, spec, o, caps, n, np, NULL, err, why, why_len, mt);
        if (rc) {
            free(np);
            return rc;
        }
        memcpy(np + n, m->points, m->npoints * sizeof *np);
        free(m->points);
        m->points = np;
        m->npoints += n;
        m->lo = caps[0];
        m->below = m->lo;
        m->passes++;
    }
}

/* "N capacities from LO to HI in STEP steps, more than MAX allowed: --step S (not exact)". */
static void too_many(char *why, size_t n, const as_mincap_result *m, uint64_t max)
{
    char lo[32], hi[32], st[32];
    as_fmt_bytes(lo, sizeof lo, m->lo);
    as_fmt_bytes(hi, sizeof hi, m->hi);
    as_fmt_bytes(st, sizeof st, m->step);
    /* the smallest multiple of the granularity that gives at most max capacities */
    uint64_t g = AS_DEV_GRANULARITY, need = (m->hi - m->lo + max - 2) / (max - 1);
    uint64_t fit = (need + g - 1) / g * g;
    if (why && n)
        snprintf(why, n,
                 "%zu capacities from %s to %s in %s steps, more than the %llu allowed: "
                 "--step %lluM sweeps at most that many (not exact between its steps)",
                 m->npoints, lo, hi, st, (unsigned long long)max, (unsigned long long)(fit >> 20));
}

/* The grid of m: from peak requested to the uncapped peak reserved, plus what the
 * process's streams take of the device (extra), in steps, no higher than the card (max, 0
 * for none). */
static void grid(as_mincap_result *m, uint64_t max, uint64_t step, uint64_t extra)
{
    m->lo = (m->peak_requested + step - 1) / step * step;
    m->hi = (m->peak_reserved + extra + step - 1) / step * step;
    if (m->hi < m->lo)
        m->hi = m->lo; /* a policy holding less than requested is a bug; still sweep one */
    if (max && m->hi > max / step * step) { /* nothing above the card matters */
        m->hi = max / step * step;
        if (m->hi < m->lo) /* the card is below peak requested: run it, then probe below */
            m->lo = m->hi;
    }
    m->npoints = (size_t)((m->hi - m->lo) / step + 1);
}

/* Every point of m's grid, batch capacities a pass (caps holds batch). 0 or a code. */
static int sweep(as_trace_open_fn open, void *open_user, const as_policy_spec *spec,
                 const as_mincap_opts *o, as_mincap_result *m, uint64_t *caps, unsigned batch,
                 as_trace_error *err, char *why, size_t why_len, mem_trace *mt)
{
    for (size_t done = 0; done < m->npoints;) {
        size_t n = m->npoints - done < batch ? m->npoints - done : batch;
        for (size_t i = 0; i < n; i++)
            caps[i] = m->lo + (uint64_t)(done + i) * m->step;
        int rc = run_pass(open, open_user, spec, o, caps, n, m->points + done, NULL, err, why,
                          why_len, mt);
        if (rc)
            return rc;
        m->passes++;
        done += n;
        if (o->on_progress)
            o->on_progress(o->user, done, m->npoints);
    }
    return 0;
}

int as_mincap(as_trace_open_fn open, void *open_user, const as_policy_spec *spec,
              const as_mincap_opts *opts, as_mincap_result *out, as_trace_error *err, char *why,
              size_t why_len)
{
    static const as_mincap_opts defaults = {0};
    const as_mincap_opts *o = opts ? opts : &defaults;
    unsigned batch = o->batch ? o->batch : DEFAULT_BATCH;
    const uint64_t step = o->step ? o->step : AS_DEV_GRANULARITY;
    uint64_t *caps = NULL;
    as_mincap_result m = {.step = step};
    as_trace_summary sum;
    as_mincap_point up;
    if (why && why_len)
        why[0] = 0;

    const uint64_t none = AS_CAPACITY_NONE;
    mem_trace mt = {0};
    int rc = run_pass(open, open_user, spec, o, &none, 1, &up, &sum, err, why, why_len, NULL);
    if (rc)
        goto fail;
    m.passes = 1;
    m.events = sum.events;
    m.allocs = sum.allocs;
    m.peak_requested = sum.peak_requested;
    m.peak_reserved = up.peak_reserved;
    if (!up.completed) {
        /* Even an unlimited device cannot serve it (a request no policy segment can hold):
         * no capacity fits. */
        m.lo = m.hi = 0;
        m.min_capacity = m.fits_from = AS_NONE;
        *out = m;
        return 0;
    }
    /* the streams the engine tells the device of (engine.h) by the trace's end */
    uint32_t ns = o->streams == AS_ENGINE_STREAMS_EACH ? (uint32_t)sum.streams
                  : sum.streams > 1                    ? o->streams
                                                       : 0;
    grid(&m, o->max, step, as_simdev_stream_memory(ns));
    if (o->max_points > 1 && m.npoints > o->max_points) {
        too_many(why, why_len, &m, o->max_points);
        rc = AS_ELIMIT;
        goto fail;
    }
    if (o->memory) { /* a pass's runs within the budget */
        uint64_t fit = o->memory / as_engine_run_bytes(sum.peak_live, sum.streams, 0);
        if (fit < batch)
            batch = fit ? (unsigned)fit : 1;
    }
    if (!o->exact_passes) {
        /* a quarter of the budget for the events (0: no budget, no limit) */
        rc = load_events(open, open_user, o->memory ? o->memory / 4 + !(o->memory / 4) : 0, &mt,
                         err);
        if (rc)
            goto fail;
        mt.pass_batch = batch;
        if (mt.ev && batch < m.npoints)
            batch = m.npoints > UINT32_MAX ? UINT32_MAX : (unsigned)m.npoints; /* one curve */
    }
    m.points = calloc(m.npoints, sizeof *m.points);
    caps = malloc(batch * sizeof *caps); /* a pass's capacities, here and in probe_below */
    if (!m.points || !caps) {
        rc = AS_ENOMEM;
        set_why(why, why_len, "out of host memory for %s%s", "the sweep", "");
        goto fail;
    }
    if (o->on_progress)
        o->on_progress(o->user, 0, m.npoints);
    rc = sweep(open, open_user, spec, o, &m, caps, batch, err, why, why_len, &mt);
    if (rc)
        goto fail;
    if (spec->policy->flags & AS_POLICY_F_LIMITS_ITSELF) {
        rc = probe_below(open, open_user, spec, o, &m, caps, batch, err, why, why_len, &mt);
        if (rc)
            goto fail;
    }
    rc = analyse(&m);
    if (rc) {
        set_why(why, why_len, "out of host memory for %s%s", "the result", "");
        goto fail;
    }
    free(caps);
    mt_free(&mt);
    *out = m;
    return 0;
fail:
    free(caps);
    mt_free(&mt);
    as_mincap_result_free(&m);
    return rc;
}

void as_mincap_result_free(as_mincap_result *r)
{
    if (!r)
        return;
    free(r->gaps);
    free(r->points);
    r->gaps = NULL;
    r->points = NULL;
    r->ngaps = r->npoints = 0;
}

/* ---- sweeps ------------------------------------------------------------------------- */

int as_sweep_parse(const char *text, uint64_t max_count, uint64_t **caps, size_t *n, char *why,
                   size_t why_len)
{
    char buf[3][64];
    const char *s = text;
    const char *a = strchr(s, ':');
    size_t la, lb;
    const char *b, *c;
    *caps = NULL;
    *n = 0;
    if (a) { /* LO:HI:STEP */
        b = strchr(a + 1, ':');
        if (!b || strchr(b + 1, ':'))
            goto bad;
        la = (size_t)(a - s);
        lb = (size_t)(b - a - 1);
        c = b + 1;
        b = a + 1;
    } else { /* LO..HI/STEP */
        a = strstr(s, "..");
        const char *sl = a ? strchr(a + 2, '/') : NULL;
        if (!a || !sl || strchr(sl + 1, '/'))
            goto bad;
        la = (size_t)(a - s);
        b = a + 2;
        lb = (size_t)(sl - b);
        c = sl + 1;
    }
    if (la == 0 || lb == 0 || !*c || la >= sizeof buf[0] || lb >= sizeof buf[0] ||
        strlen(c) >= sizeof buf[0])
        goto bad;
    memcpy(buf[0], s, la);
    buf[0][la] = 0;
    memcpy(buf[1], b, lb);
    buf[1][lb] = 0;
    strcpy(buf[2], c);
    uint64_t v[3];
    for (int i = 0; i < 3; i++)
        if (as_parse_bytes(buf[i], &v[i])) {
            set_why(why, why_len, "sweep '%s': bad byte quantity '%s'", text, buf[i]);
            return -1;
        }
    if (v[1] < v[0]) {
        set_why(why, why_len, "sweep '%s': HI is below LO%s", text, "");
        return -1;
    }
    uint64_t count = (v[1] - v[0]) / v[2] + 1;
    if (count > max_count) {
        /* the smallest step in whole MiB (or bytes, below 1 MiB) within the limit */
        uint64_t need = max_count > 1 ? (v[1] - v[0] + max_count - 2) / (max_count - 1) : 0;
        char step[32];
        if (need >= (1u << 20) || max_count < 2)
            snprintf(step, sizeof step, "%lluM",
                     (unsigned long long)((need + (1u << 20) - 1) >> 20));
        else
            snprintf(step, sizeof step, "%llu", (unsigned long long)need);
        if (why && why_len)
            snprintf(why, why_len,
                     "sweep '%s' gives %llu capacities, more than the %llu allowed: use a "
                     "coarser step (%s or more)",
                     text, (unsigned long long)count, (unsigned long long)max_count, step);
        return -1;
    }
    uint64_t *p = malloc(count * sizeof *p);
    if (!p) {
        set_why(why, why_len, "sweep '%s': out of memory%s", text, "");
        return -1;
    }
    for (uint64_t i = 0; i < count; i++)
        p[i] = v[0] + i * v[2];
    *caps = p;
    *n = (size_t)count;
    return 0;
bad:
    set_why(why, why_len, "sweep '%s': expected LO:HI:STEP or LO..HI/STEP%s", text, "");
    return -1;
}
