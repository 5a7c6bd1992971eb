/*
 * siterep.c - call sites in the reports (siterep.h): the walks of each run's policy at its
 * OOM and its new peaks, in the runs' own pass, add every block to its allocation's site.
 *
 * Invariant: for one walk, the sum over sites (the cache's row included) of live is the
 * requested bytes of the blocks walked and of live + waste their reserved bytes, to within
 * a byte per block (the free bytes of a segment are shared out with integer division).
 */
#include "siterep.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "units.h"

#define NPIN 3       /* the largest fragmented segments named at an OOM */
#define PIN_SITES 16 /* sites kept per pinned segment (the rest lumped into the last) */

typedef struct acc {
    uint64_t live, waste, blocks;
} acc;

typedef struct pin {
    uint64_t addr, size, free;
    uint32_t site[PIN_SITES];
    uint64_t bytes[PIN_SITES];
    unsigned n;
} pin;

typedef struct run_sites {
    unsigned rep_run;
    acc *peak, *oom;  /* nsites + 2 rows: site 0..nsites, then the cache */
    uint64_t peak_ev; /* the event of the peak walk in peak (AS_NONE: none yet) */
    int has_oom;
    uint32_t req_site;
    uint64_t req_size;
    pin pins[NPIN];
    unsigned npin;
} run_sites;

typedef struct trace_sites {
    unsigned t;
    as_sites *sites;
    uint32_t nsites;
    int no_frames_snapshot; /* a torch snapshot recorded without stacks */
    run_sites *runs;
    size_t nruns, capruns;
} trace_sites;

typedef struct blk {
    uint32_t site;
    uint64_t size, req;
} blk;

struct as_siterep {
    int full; /* walks at the peak too (--sites), not only at the OOM */
    trace_sites *tr;
    size_t ntr, captr;
    /* the group of runs in progress (as_siterep_group): its engine's runs 0..ng-1 */
    run_sites *g;
    size_t ng;
    uint32_t nsites;   /* the group's trace's */
    uint32_t *site_of; /* per allocation ordinal, as the group's decode has them so far */
    uint64_t *req_of;
    size_t nalloc, capsite, capreq;
    int seg_run, seg_oom; /* the segment being walked (seg_run -1: none) */
    uint64_t seg_addr, seg_size, seg_free;
    blk *blks;
    size_t nb, capb;
    int err;
};

static void free_runs(run_sites *r, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        free(r[j].peak);
        free(r[j].oom);
    }
    free(r);
}

int as_siterep_create(int full, as_siterep **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return AS_ENOMEM;
    (*out)->full = full;
    (*out)->seg_run = -1;
    return 0;
}

void as_siterep_destroy(as_siterep *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->ntr; i++) {
        free_runs(s->tr[i].runs, s->tr[i].nruns);
        as_sites_free(s->tr[i].sites);
    }
    free_runs(s->g, s->ng);
    free(s->tr);
    free(s->site_of);
    free(s->req_of);
    free(s->blks);
    free(s);
}

int as_siterep_full(const as_siterep *s)
{
    return s->full;
}

void as_site_label(const as_sites *s, uint32_t site, char *buf, size_t n)
{
    as_frame f;
    if (as_sites_user_frame(s, site, &f) < 0) {
        snprintf(buf, n, "(no frames)");
        return;
    }
    const char *file = f.filename, *p;
    if ((p = strstr(file, "site-packages/")) || (p = strstr(file, "dist-packages/"))) {
        const char *q;
        while ((q = strstr(p + 1, "site-packages/")) || (q = strstr(p + 1, "dist-packages/")))
            p = q;
        file = p + 14;
    } else {
        const char *last = strrchr(file, '/');
        if (last && last > file) {
            const char *prev = last - 1;
            while (prev > file && *prev != '/')
                prev--;
            file = *prev == '/' ? prev + 1 : prev;
        }
    }
    snprintf(buf, n, "%s:%u %s", file, f.line, f.name);
}

static const as_run_result *run_of(const as_report *rep, unsigned i)
{
    unsigned t;
    return as_report_run(rep, i, &t);
}

/* ---- the walk ------------------------------------------------------------------------- */

/* Adds the segment just walked to its run's rows (and, at an OOM, to the pinned ones). */
static void flush_segment(as_siterep *s)
{
    if (s->seg_run < 0)
        return;
    run_sites *r = &s->g[s->seg_run];
    acc *a = s->seg_oom ? r->oom : r->peak;
    uint64_t used = 0;
    for (size_t i = 0; i < s->nb; i++)
        used += s->blks[i].size;
    if (!used) {
        a[s->nsites + 1].waste += s->seg_free; /* a free segment: the cache's */
    }
    for (size_t i = 0; i < s->nb; i++) {
        const blk *b = &s->blks[i];
        acc *x = &a[b->site];
        x->live += b->req;
        x->blocks++;
        x->waste += b->size - b->req + (uint64_t)((unsigned __int128)s->seg_free * b->size / used);
    }
    if (s->seg_oom && used && s->seg_free) {
        unsigned k = r->npin < NPIN ? r->npin++ : NPIN - 1;
        if (k == NPIN - 1 && r->npin == NPIN && r->pins[k].free >= s->seg_free)
            goto out; /* not among the largest */
        pin *p = &r->pins[k];
        *p = (pin){.addr = s->seg_addr, .size = s->seg_size, .free = s->seg_free};
        for (size_t i = 0; i < s->nb; i++) {
            unsigned j = 0;
            while (j < p->n && p->site[j] != s->blks[i].site)
                j++;
            if (j == p->n && p->n < PIN_SITES)
                p->site[p->n++] = s->blks[i].site;
            p->bytes[j < PIN_SITES ? j : PIN_SITES - 1] += s->blks[i].size;
        }
        for (; k > 0 && r->pins[k].free > r->pins[k - 1].free; k--) { /* keep them sorted */
            pin t = r->pins[k];
            r->pins[k] = r->pins[k - 1];
            r->pins[k - 1] = t;
        }
    }
out:
    s->seg_run = -1;
    s->nb = 0;
    s->seg_free = 0;
}

void as_siterep_walk(as_siterep *s, unsigned run, uint64_t event, uint64_t alloc, const char *why,
                     const as_walk_item *it)
{
    (void)alloc;
    int oom = strcmp(why, "oom") == 0;
    if (s->err || run >= s->ng)
        return;
    run_sites *r = &s->g[run];
    if (!oom && event != r->peak_ev) { /* a later peak: the run's rows start again */
        flush_segment(s);
        memset(r->peak, 0, (s->nsites + 2) * sizeof *r->peak);
        r->peak_ev = event;
    }
    if (it->kind == AS_WALK_SEGMENT || (int)run != s->seg_run || oom != s->seg_oom) {
        flush_segment(s);
        if (it->kind != AS_WALK_SEGMENT)
            return; /* a block outside any segment: the walk's contract broken */
        s->seg_run = (int)run;
        s->seg_oom = oom;
        s->seg_addr = it->addr;
        s->seg_size = it->size;
        return;
    }
    if (it->state == AS_BLOCK_FREE) {
        s->seg_free += it->size;
        return;
    }
    if (it->state == AS_BLOCK_UNMAPPED || it->id == UINT64_MAX || it->id >= s->nalloc)
        return;
    if (as_grow((void **)&s->blks, &s->capb, s->nb + 1, sizeof *s->blks, 256) < 0) {
        s->err = AS_ENOMEM;
        return;
    }
    uint64_t req = s->req_of[it->id] < it->size ? s->req_of[it->id] : it->size;
    uint32_t site = s->site_of[it->id] <= s->nsites ? s->site_of[it->id] : 0; /* rows' bound */
    s->blks[s->nb++] = (blk){.site = site, .size = it->size, .req = req};
}

void as_siterep_events(as_siterep *s, const as_event *ev, size_t n)
{
    if (s->err)
        return;
    if (as_grow((void **)&s->site_of, &s->capsite, s->nalloc + n, sizeof *s->site_of, 4096) < 0 ||
        as_grow((void **)&s->req_of, &s->capreq, s->nalloc + n, sizeof *s->req_of, 4096) < 0) {
        s->err = AS_ENOMEM;
        return;
    }
    uint32_t *site = s->site_of;
    uint64_t *req = s->req_of;
    size_t k = s->nalloc;
    for (size_t i = 0; i < n; i++) {
        site[k] = ev[i].site; /* written always, kept when it is an ALLOC's */
        req[k] = ev[i].size;
        k += ev[i].op == AS_OP_ALLOC;
    }
    s->nalloc = k;
}

int as_siterep_group(as_siterep *s, const as_trace_reader *rd, size_t n)
{
    free_runs(s->g, s->ng); /* a group that did not make it into the report */
    s->g = NULL;
    s->ng = 0;
    s->nalloc = 0;
    s->nb = 0;
    s->seg_run = -1;
    s->seg_free = 0;
    s->err = 0;
    s->nsites = as_sites_count(as_trace_reader_sites(rd));
    if (!s->nsites)
        return 0;
    if (!(s->g = calloc(n, sizeof *s->g)))
        return AS_ENOMEM;
    for (s->ng = 0; s->ng < n; s->ng++) {
        run_sites *r = &s->g[s->ng];
        r->peak_ev = AS_NONE;
        r->peak = calloc(s->nsites + 2, sizeof *r->peak);
        r->oom = calloc(s->nsites + 2, sizeof *r->oom);
        if (!r->peak || !r->oom) {
            s->ng++;
            return AS_ENOMEM;
        }
    }
    return 1;
}

/* Trace t's entry: the last one, or a new one (its sites copied from rd). */
static trace_sites *trace_entry(as_siterep *s, const as_report *rep, unsigned t,
                                const as_trace_reader *rd)
{
    if (s->ntr && s->tr[s->ntr - 1].t == t)
        return &s->tr[s->ntr - 1];
    if (as_grow((void **)&s->tr, &s->captr, s->ntr + 1, sizeof *s->tr, 8) < 0)
        return NULL;
    trace_sites *ts = &s->tr[s->ntr++];
    memset(ts, 0, sizeof *ts);
    ts->t = t;
    const char *src = as_meta_get(as_report_trace_meta(rep, t), "source");
    ts->nsites = as_sites_count(as_trace_reader_sites(rd));
    ts->no_frames_snapshot = !ts->nsites && src && strcmp(src, "torch-snapshot") == 0;
    if (ts->nsites &&
        (as_sites_new(&ts->sites) < 0 || as_sites_copy(ts->sites, as_trace_reader_sites(rd)) < 0))
        return NULL;
    return ts;
}

int as_siterep_keep(as_siterep *s, const as_report *rep, unsigned t, const as_trace_reader *rd,
                    const as_engine *e, unsigned base)
{
    flush_segment(s);
    trace_sites *ts = trace_entry(s, rep, t, rd);
    if (s->err || !ts)
        return s->err ? s->err : AS_ENOMEM;
    if (!s->ng)
        return 0;
    if (as_grow((void **)&ts->runs, &ts->capruns, ts->nruns + s->ng, sizeof *ts->runs, 1) < 0)
        return AS_ENOMEM;
    for (size_t j = 0; j < s->ng; j++) {
        run_sites *r = &s->g[j];
        const as_run_result *x = as_engine_result(e, (unsigned)j);
        r->rep_run = base + (unsigned)j;
        /* The last peak walk is the peak's, unless that one had nothing to walk. */
        if (x->peak_reserved_event == AS_NONE || r->peak_ev != x->peak_reserved_event)
            memset(r->peak, 0, (s->nsites + 2) * sizeof *r->peak);
        if (x->oom_alloc != AS_NONE && x->oom_alloc < s->nalloc) {
            r->has_oom = 1;
            r->req_site = s->site_of[x->oom_alloc] <= s->nsites ? s->site_of[x->oom_alloc] : 0;
            r->req_size = x->oom_size;
        }
        ts->runs[ts->nruns++] = *r;
    }
    free(s->g);
    s->g = NULL;
    s->ng = 0;
    return 0;
}

/* ---- output --------------------------------------------------------------------------- */

/* The indices of the top rows of a by measure (0: live, 1: waste), largest first. */
static unsigned top_rows(const acc *a, uint32_t nrows, int by, unsigned top, uint32_t *idx)
{
    unsigned n = 0;
    for (uint32_t i = 0; i < nrows; i++) {
        uint64_t v = by ? a[i].waste : a[i].live;
        if (!v)
            continue;
        unsigned k = n; /* insertion point in idx[0..n), largest first; ties keep order */
        while (k > 0 && (by ? a[idx[k - 1]].waste : a[idx[k - 1]].live) < v)
            k--;
        if (k >= top)
            continue;
        unsigned end = n < top ? n : top - 1;
        memmove(idx + k + 1, idx + k, (end - k) * sizeof *idx);
        idx[k] = i;
        n = n < top ? n + 1 : top;
    }
    return n;
}

static void row_label(const trace_sites *ts, uint32_t row, char *buf, size_t n)
{
    char l[400];
    if (row == ts->nsites + 1) {
        snprintf(buf, n, "(cached: free segments)");
        return;
    }
    as_site_label(ts->sites, row, l, sizeof l);
    if (row)
        snprintf(buf, n, "#%u %s", row, l);
    else
        snprintf(buf, n, "%s", l);
}

static void run_name(const as_report *rep, const run_sites *r, char *buf, size_t n)
{
    const as_run_result *x = run_of(rep, r->rep_run);
    char cap[32];
    as_fmt_capacity(cap, sizeof cap, x->capacity); /* as the table shows it */
    snprintf(buf, n, "%s @ %s", x->policy, cap);
}

static void write_tops(FILE *f, const trace_sites *ts, const acc *a, unsigned top, uint32_t *idx)
{
    static const char *const what[] = {"live ", "waste"};
    for (int by = 0; by < 2; by++) {
        unsigned n = top_rows(a, ts->nsites + 2, by, top, idx);
        for (unsigned i = 0; i < n; i++) {
            char b[32], l[512];
            as_fmt_bytes(b, sizeof b, by ? a[idx[i]].waste : a[idx[i]].live);
            row_label(ts, idx[i], l, sizeof l);
            fprintf(f, "    %s %10s  %s\n", i ? "     " : what[by], b, l);
        }
    }
}

static void write_oom(FILE *f, const as_report *rep, const trace_sites *ts, const run_sites *r)
{
    char name[128], b[32], l[512];
    run_name(rep, r, name, sizeof name);
    as_fmt_bytes(b, sizeof b, r->req_size);
    row_label(ts, r->req_site, l, sizeof l);
    fprintf(f, "  %s: OOM asking %s from %s\n", name, b, l);
    for (unsigned k = 0; k < r->npin; k++) {
        pin sorted = r->pins[k], *p = &sorted;
        for (unsigned a = 1; a < p->n; a++) /* by bytes, largest first */
            for (unsigned c = a; c > 0 && p->bytes[c] > p->bytes[c - 1]; c--) {
                uint64_t tb = p->bytes[c];
                uint32_t ts2 = p->site[c];
                p->bytes[c] = p->bytes[c - 1], p->site[c] = p->site[c - 1];
                p->bytes[c - 1] = tb, p->site[c - 1] = ts2;
            }
        char fb[32], sb[32];
        as_fmt_bytes(fb, sizeof fb, p->free);
        as_fmt_bytes(sb, sizeof sb, p->size);
        fprintf(f, "    segment %s with %s free, pinned by", sb, fb);
        for (unsigned j = 0; j < p->n && j < 3; j++) {
            as_fmt_bytes(b, sizeof b, p->bytes[j]);
            row_label(ts, p->site[j], l, sizeof l);
            fprintf(f, "%s %s (%s)", j ? "," : "", l, b);
        }
        fprintf(f, "%s\n", p->n > 3 ? ", ..." : "");
    }
}

int as_siterep_write_text(const as_siterep *s, const as_report *rep, FILE *f, int full,
                          unsigned top)
{
    uint32_t idx[64];
    top = top < 1 ? 1 : top > 64 ? 64 : top;
    for (size_t i = 0; i < s->ntr; i++) {
        const trace_sites *ts = &s->tr[i];
        const char *path;
        as_report_trace(rep, ts->t, &path);
        if (ts->no_frames_snapshot && full)
            fprintf(f,
                    "\n%s: no call sites: the snapshot was recorded without stacks (record "
                    "them with torch.cuda.memory._record_memory_history(enabled=\"all\", "
                    "context=\"all\", stacks=\"python\"))\n",
                    path);
        int any_oom = 0;
        for (size_t j = 0; j < ts->nruns; j++)
            any_oom |= ts->runs[j].has_oom;
        if (!ts->nsites || (!full && !any_oom))
            continue;
        fprintf(f, "\n%s: %u call sites, each named by its innermost frame outside PyTorch\n", path,
                ts->nsites);
        for (size_t j = 0; j < ts->nruns; j++) {
            const run_sites *r = &ts->runs[j];
            if (r->has_oom)
                write_oom(f, rep, ts, r);
            if (!full)
                continue;
            char name[128], b[32];
            run_name(rep, r, name, sizeof name);
            as_fmt_bytes(b, sizeof b, run_of(rep, r->rep_run)->peak_reserved);
            fprintf(f, "  %s, at its peak reserved (%s):\n", name, b);
            write_tops(f, ts, r->peak, top, idx);
        }
    }
    return ferror(f) ? AS_EIO : 0;
}

/* One row of the sites table (sim/REPORT.md, "Call sites"): a CSV line, or a JSON object
 * after the previous one's ", " (*n counts the rows written). site -1 is the cache's row. */
static void put_row(FILE *f, int json, unsigned *n, unsigned run, const char *when, const char *by,
                    unsigned rank, int64_t site, uint64_t bytes, uint64_t blocks, const char *frame)
{
    if (!json) {
        fprintf(f, "%u,%s,%s,%u,%" PRId64 ",%" PRIu64 ",%" PRIu64 ",", run, when, by, rank, site,
                bytes, blocks);
        as_report_csv_str(f, frame);
        fputc('\n', f);
    } else {
        fprintf(f, "%s{\"run\": %u, \"when\": \"%s\", \"by\": \"%s\", \"rank\": %u, \"site\": ",
                *n ? ",\n  " : "\n  ", run, when, by, rank);
        as_report_json_u64(f, site >= 0, (uint64_t)site);
        fprintf(f, ", \"bytes\": %" PRIu64 ", \"blocks\": %" PRIu64 ", \"frame\": ", bytes, blocks);
        as_report_json_str(f, frame);
        fputc('}', f);
    }
    (*n)++;
}

static void top_rows_put(FILE *f, int json, unsigned *nrow, const trace_sites *ts,
                         const run_sites *r, const char *when, const acc *a, unsigned top,
                         uint32_t *idx)
{
    for (int by = 0; by < 2; by++) {
        unsigned n = top_rows(a, ts->nsites + 2, by, top, idx);
        for (unsigned i = 0; i < n; i++) {
            char l[512];
            if (idx[i] == ts->nsites + 1)
                snprintf(l, sizeof l, "(cached: free segments)");
            else
                as_site_label(ts->sites, idx[i], l, sizeof l);
            put_row(f, json, nrow, r->rep_run, when, by ? "waste" : "live", i + 1,
                    idx[i] == ts->nsites + 1 ? (int64_t)-1 : (int64_t)idx[i],
                    by ? a[idx[i]].waste : a[idx[i]].live, a[idx[i]].blocks, l);
        }
    }
}

/* An OOM's rows: its request, the top sites live and by waste then, and the sites that pin
 * its fragmented segments (block bytes summed over them). */
static void oom_rows_put(FILE *f, int json, unsigned *nrow, const trace_sites *ts,
                         const run_sites *r, unsigned top, uint32_t *idx)
{
    char l[512];
    as_site_label(ts->sites, r->req_site, l, sizeof l);
    put_row(f, json, nrow, r->rep_run, "oom", "request", 1, r->req_site, r->req_size, 1, l);
    top_rows_put(f, json, nrow, ts, r, "oom", r->oom, top, idx);
    acc pinned[NPIN * PIN_SITES];
    uint32_t site[NPIN * PIN_SITES];
    unsigned np = 0;
    for (unsigned k = 0; k < r->npin; k++)
        for (unsigned q = 0; q < r->pins[k].n; q++) {
            unsigned x = 0;
            while (x < np && site[x] != r->pins[k].site[q])
                x++;
            if (x == np)
                site[np] = r->pins[k].site[q], pinned[np++] = (acc){0};
            pinned[x].live += r->pins[k].bytes[q];
            pinned[x].blocks++;
        }
    unsigned n = top_rows(pinned, np, 0, top, idx);
    for (unsigned q = 0; q < n; q++) {
        as_site_label(ts->sites, site[idx[q]], l, sizeof l);
        put_row(f, json, nrow, r->rep_run, "oom", "pin", q + 1, site[idx[q]], pinned[idx[q]].live,
                pinned[idx[q]].blocks, l);
    }
}

static int write_rows(const as_siterep *s, FILE *f, unsigned top, int json)
{
    uint32_t idx[64];
    unsigned nrow = 0;
    top = top < 1 ? 1 : top > 64 ? 64 : top;
    fputs(json ? "[" : "run,when,by,rank,site,bytes,blocks,frame\n", f);
    for (size_t i = 0; i < s->ntr; i++) {
        const trace_sites *ts = &s->tr[i];
        for (size_t j = 0; j < ts->nruns; j++) {
            const run_sites *r = &ts->runs[j];
            top_rows_put(f, json, &nrow, ts, r, "peak", r->peak, top, idx);
            if (r->has_oom)
                oom_rows_put(f, json, &nrow, ts, r, top, idx);
        }
    }
    if (json)
        fputc(']', f);
    return ferror(f) ? AS_EIO : 0;
}

int as_siterep_write_csv(const as_siterep *s, const as_report *rep, FILE *f, unsigned top)
{
    (void)rep;
    return write_rows(s, f, top, 0);
}

int as_siterep_write_json(const as_siterep *s, FILE *f, unsigned top)
{
    return write_rows(s, f, top, 1);
}

/* ---- info ----------------------------------------------------------------------------- */

/* Requested bytes live by site at the trace's peak requested, in one decode: each site's
 * bytes now, and what changed since the last new peak (undone at the end); a new peak
 * clears only the sites touched since the one before, so the work is O(1) an event. */
struct as_site_peak {
    uint32_t nsites;
    uint64_t cur, peak;    /* requested bytes live (FREE_REQ does not count), their maximum */
    uint64_t *now, *since; /* per site 0..nsites */
    uint32_t *touched;     /* sites with since != 0 possible, each once (mark: in_since) */
    uint8_t *in_since;
    size_t ntouched;
    uint32_t *site_of; /* by allocation ordinal */
    size_t capsite;
};

int as_site_peak_create(uint32_t nsites, as_site_peak **out)
{
    as_site_peak *p = calloc(1, sizeof *p);
    *out = p;
    if (!p)
        return AS_ENOMEM;
    p->nsites = nsites;
    p->now = calloc((size_t)nsites + 1, sizeof *p->now);
    p->since = calloc((size_t)nsites + 1, sizeof *p->since);
    p->touched = calloc((size_t)nsites + 1, sizeof *p->touched);
    p->in_since = calloc((size_t)nsites + 1, 1);
    return p->now && p->since && p->touched && p->in_since ? 0 : AS_ENOMEM;
}

void as_site_peak_destroy(as_site_peak *p)
{
    if (!p)
        return;
    free(p->now);
    free(p->since);
    free(p->touched);
    free(p->in_since);
    free(p->site_of);
    free(p);
}

static inline void site_add(as_site_peak *p, uint32_t site, uint64_t delta)
{
    p->now[site] += delta;
    p->since[site] += delta;
    if (!p->in_since[site]) {
        p->in_since[site] = 1;
        p->touched[p->ntouched++] = site;
    }
}

int as_site_peak_feed(as_site_peak *p, const as_event *ev, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const as_event *x = &ev[i];
        if (x->op == AS_OP_ALLOC) {
            if (as_grow((void **)&p->site_of, &p->capsite, x->id + 1, sizeof *p->site_of, 4096))
                return AS_ENOMEM;
            uint32_t site = x->site <= p->nsites ? x->site : 0;
            p->site_of[x->id] = site;
            site_add(p, site, x->size);
            p->cur += x->size;
        } else if (x->op == AS_OP_FREE) {
            if (x->id < p->capsite)
                site_add(p, p->site_of[x->id], 0 - x->size);
            p->cur -= x->size;
        } else {
            continue;
        }
        if (p->cur > p->peak) { /* the state now is the peak's: nothing since */
            p->peak = p->cur;
            for (size_t k = 0; k < p->ntouched; k++) {
                p->since[p->touched[k]] = 0;
                p->in_since[p->touched[k]] = 0;
            }
            p->ntouched = 0;
        }
    }
    return 0;
}

int as_site_peak_top(const as_site_peak *p, const as_sites *sites, unsigned top,
                     char (*labels)[AS_SITE_LABEL], uint64_t *bytes, uint32_t *ids, unsigned *n)
{
    uint32_t idx[64];
    acc *a = calloc((size_t)p->nsites + 1, sizeof *a);
    *n = 0;
    if (!a)
        return AS_ENOMEM;
    for (uint32_t i = 0; i <= p->nsites; i++)
        a[i].live = p->now[i] - p->since[i];
    top = top < 1 ? 1 : top > 64 ? 64 : top;
    *n = top_rows(a, p->nsites + 1, 0, top, idx);
    for (unsigned i = 0; i < *n; i++) {
        as_site_label(sites, idx[i], labels[i], AS_SITE_LABEL);
        bytes[i] = a[idx[i]].live;
        if (ids)
            ids[i] = idx[i];
    }
    free(a);
    return 0;
}
