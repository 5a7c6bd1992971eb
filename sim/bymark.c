/*
 * bymark.c - a report broken down between marks (bymark.h).
 *
 * Invariant: interval k covers events [start[k], start[k + 1]); a run's reserved bytes are
 * followed from its device events in order (segment alloc/map add, free/unmap subtract),
 * so each interval's peak is the level it began at or a level right after one of its calls.
 */
#include "bymark.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "text.h"
#include "units.h"

typedef struct iv {
    uint64_t start, allocs, peak_req;
    char label[AS_MAX_LABEL + 1];
} iv;

typedef struct iv_run {
    uint64_t peak, reserves, releases;
} iv_run;

struct as_bymark {
    unsigned t;
    char match[AS_MAX_LABEL + 1];
    iv *iv;
    size_t niv, cap;
    unsigned nruns;
    unsigned *rep_run;  /* report index of each run */
    uint64_t *reserved; /* per run, now */
    size_t *last;       /* per run, the last interval its levels reached */
    iv_run *cell;       /* niv x nruns */
};

void as_bymark_destroy(as_bymark *b)
{
    if (!b)
        return;
    free(b->iv);
    free(b->rep_run);
    free(b->reserved);
    free(b->last);
    free(b->cell);
    free(b);
}

/* Interval k of event e: the last k with start[k] <= e. */
static size_t iv_of(const as_bymark *b, uint64_t e)
{
    size_t lo = 0, hi = b->niv;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (b->iv[mid].start <= e)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* The intervals and their requested peaks: one decode of the trace. */
static int scan(as_bymark *b, as_trace_reader *rd)
{
    as_event ev;
    uint64_t k = 0, cur = 0;
    int rc;
    if (as_grow((void **)&b->iv, &b->cap, 1, sizeof *b->iv, 64) < 0)
        return AS_ENOMEM;
    b->niv = 1;
    memset(&b->iv[0], 0, sizeof b->iv[0]);
    snprintf(b->iv[0].label, sizeof b->iv[0].label, "(before the first mark)");
    while ((rc = as_trace_next(rd, &ev)) == 0) {
        if (ev.op == AS_OP_MARK && (!b->match[0] || strstr(ev.label, b->match))) {
            if (as_grow((void **)&b->iv, &b->cap, b->niv + 1, sizeof *b->iv, 64) < 0)
                return AS_ENOMEM;
            iv *x = &b->iv[b->niv++];
            *x = (iv){.start = k, .peak_req = cur};
            snprintf(x->label, sizeof x->label, "%s", ev.label);
        }
        iv *x = &b->iv[b->niv - 1];
        if (ev.op == AS_OP_ALLOC) {
            cur += ev.size;
            x->allocs++;
        } else if (ev.op == AS_OP_FREE) {
            cur -= ev.size;
        }
        if (cur > x->peak_req)
            x->peak_req = cur;
        k++;
    }
    return rc == AS_TRACE_EOF ? 0 : rc;
}

static void fill_levels(as_bymark *b, unsigned run, size_t upto);

static void on_segment(void *user, const as_seg_record *r)
{
    as_bymark *b = user;
    if (r->run >= b->nruns)
        return;
    uint64_t *res = &b->reserved[r->run];
    size_t k = iv_of(b, r->event);
    fill_levels(b, r->run, k); /* the intervals before k start at the level before this */
    iv_run *c = &b->cell[k * b->nruns + r->run];
    if (r->dev.action == AS_DEV_SEGMENT_ALLOC || r->dev.action == AS_DEV_SEGMENT_MAP) {
        *res += r->dev.size;
        c->reserves++;
    } else {
        *res -= r->dev.size < *res ? r->dev.size : *res;
        c->releases++;
    }
    if (*res > c->peak)
        c->peak = *res;
}

/* The runs of trace t again, with the device-event hook. */
static int replay(as_bymark *b, const as_report *rep, as_trace_reader *rd,
                  const as_policy_spec *specs, size_t nspec, size_t ncap, as_trace_error *err,
                  char *why, size_t why_len)
{
    as_engine *e = NULL;
    as_engine_opts o = {.on_segment = on_segment, .user = b};
    unsigned tr0;
    if (b->nruns) { /* the runs as the report made them: caught OOMs or not, streams */
        o.no_caught_ooms = as_report_run(rep, b->rep_run[0], &tr0)->no_caught_ooms;
        o.streams = as_report_run(rep, b->rep_run[0], &tr0)->streams;
    }
    int rc = as_engine_create(&o, &e);
    for (unsigned j = 0; rc == 0 && j < b->nruns; j++) {
        unsigned tr;
        const as_run_result *r = as_report_run(rep, b->rep_run[j], &tr);
        if (j / ncap >= nspec)
            rc = AS_EUSAGE;
        else if ((rc = as_engine_add_run(e, &specs[j / ncap], r->capacity)) >= 0)
            rc = 0;
    }
    if (rc == 0)
        rc = as_engine_run(e, rd, err);
    if (rc && (!err || err->code == 0) && why && why_len)
        snprintf(why, why_len, "by mark: %s", e ? as_engine_errmsg(e) : "no engine");
    as_engine_destroy(e);
    return rc;
}

/* The intervals a run's calls never reached start (and stay) at its level then. */
static void fill_levels(as_bymark *b, unsigned run, size_t upto)
{
    while (b->last[run] < upto) {
        iv_run *c = &b->cell[++b->last[run] * b->nruns + run];
        if (c->peak < b->reserved[run])
            c->peak = b->reserved[run];
    }
}

int as_bymark_trace(const as_report *rep, unsigned t, const char *path, const as_reader_opts *ro,
                    const as_policy_spec *specs, size_t nspec, size_t ncap, const char *match,
                    as_bymark **out, as_trace_error *err, char *why, size_t why_len)
{
    as_bymark *b = calloc(1, sizeof *b);
    as_trace_reader *rd = NULL;
    *out = NULL;
    if (why && why_len)
        why[0] = 0;
    if (!b)
        return AS_ENOMEM;
    b->t = t;
    snprintf(b->match, sizeof b->match, "%s", match ? match : "");
    int rc = as_trace_open(path, ro, &rd, err);
    if (rc == 0 && (rc = scan(b, rd)) < 0 && err && as_trace_reader_error(rd))
        *err = *as_trace_reader_error(rd);
    as_trace_close(rd);
    rd = NULL;
    for (unsigned i = 0; rc == 0 && i < as_report_nruns(rep); i++) {
        unsigned tr;
        as_report_run(rep, i, &tr);
        size_t cap = b->nruns;
        if (tr == t &&
            as_grow((void **)&b->rep_run, &cap, b->nruns + 1, sizeof *b->rep_run, b->nruns + 1) < 0)
            rc = AS_ENOMEM;
        else if (tr == t)
            b->rep_run[b->nruns++] = i;
    }
    if (rc == 0 && b->nruns &&
        (!(b->reserved = calloc(b->nruns, sizeof *b->reserved)) ||
         !(b->last = calloc(b->nruns, sizeof *b->last)) ||
         !(b->cell = calloc(b->niv * b->nruns, sizeof *b->cell))))
        rc = AS_ENOMEM;
    if (rc == 0 && b->nruns && (rc = as_trace_open(path, ro, &rd, err)) == 0)
        rc = replay(b, rep, rd, specs, nspec, ncap ? ncap : 1, err, why, why_len);
    as_trace_close(rd);
    if (rc < 0) {
        as_bymark_destroy(b);
        return rc;
    }
    for (unsigned j = 0; j < b->nruns; j++)
        fill_levels(b, j, b->niv - 1);
    *out = b;
    return 0;
}

int as_bymark_write_json(const as_bymark *b, const as_report *rep, FILE *f, unsigned *n)
{
    for (unsigned j = 0; j < b->nruns; j++) {
        unsigned tr;
        const as_run_result *r = as_report_run(rep, b->rep_run[j], &tr);
        size_t oom_iv = r->oom_event != AS_NONE ? iv_of(b, r->oom_event) : (size_t)-1;
        for (size_t k = 0; k < b->niv; k++) {
            const iv_run *c = &b->cell[k * b->nruns + j];
            fprintf(f,
                    "%s{\"run\": %u, \"trace\": %u, \"interval\": %zu, \"first_event\": %llu, "
                    "\"mark\": ",
                    *n ? ",\n  " : "\n  ", b->rep_run[j], b->t, k,
                    (unsigned long long)b->iv[k].start);
            if (k)
                as_report_json_str(f, b->iv[k].label);
            else
                fputs("null", f);
            fprintf(f,
                    ", \"allocs\": %llu, \"peak_requested\": %llu, \"peak_reserved\": %llu, "
                    "\"device_reserves\": %llu, \"device_releases\": %llu, \"oom\": %s}",
                    (unsigned long long)b->iv[k].allocs, (unsigned long long)b->iv[k].peak_req,
                    (unsigned long long)c->peak, (unsigned long long)c->reserves,
                    (unsigned long long)c->releases, k == oom_iv ? "true" : "false");
            (*n)++;
            if (k == oom_iv)
                break; /* the run stopped there */
        }
    }
    return ferror(f) ? AS_EIO : 0;
}

int as_bymark_write_text(const as_bymark *b, const as_report *rep, FILE *f)
{
    const char *path;
    as_report_trace(rep, b->t, &path);
    /* the path, the match and the labels are the user's and the input's: escaped */
    fputc('\n', f);
    as_put_safe(f, path);
    fputs(": by mark", f);
    if (b->match[0]) {
        fputs(" \"", f);
        as_put_safe(f, b->match);
        fputc('"', f);
    }
    fprintf(f, ": %zu marks, %zu intervals\n", b->niv - 1, b->niv);
    for (unsigned j = 0; j < b->nruns; j++) {
        unsigned tr;
        const as_run_result *r = as_report_run(rep, b->rep_run[j], &tr);
        char cap[32];
        as_fmt_capacity(cap, sizeof cap, r->capacity);
        fprintf(f,
                "  %s @ %s\n    interval  first event  allocs   peak req  peak reserved  dev calls"
                "  mark\n",
                r->policy, cap);
        size_t oom_iv = r->oom_event != AS_NONE ? iv_of(b, r->oom_event) : (size_t)-1;
        for (size_t k = 0; k < b->niv; k++) {
            const iv_run *c = &b->cell[k * b->nruns + j];
            char rq[32], rs[32], calls[48];
            as_fmt_bytes(rq, sizeof rq, b->iv[k].peak_req);
            as_fmt_bytes(rs, sizeof rs, c->peak);
            snprintf(calls, sizeof calls, "%llu/%llu", (unsigned long long)c->reserves,
                     (unsigned long long)c->releases);
            fprintf(f, "    %8zu  %11llu  %6llu  %9s  %13s  %9s  ", k,
                    (unsigned long long)b->iv[k].start, (unsigned long long)b->iv[k].allocs, rq, rs,
                    calls);
            as_put_safe(f, b->iv[k].label);
            fputs(k == oom_iv ? "  [OOM here]\n" : "\n", f);
            if (k == oom_iv)
                break; /* the run stopped there */
        }
    }
    return ferror(f) ? AS_EIO : 0;
}
