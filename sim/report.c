/*
 * report.c - table, CSV and JSON reports, the per-run CSV logs, and byte quantities
 * (report.h). The CSV columns and JSON names are the contract in sim/REPORT.md, with
 * plots/, replay/ and users' scripts: a change there bumps AS_REPORT_SCHEMA and the
 * document, and tests/test_report_docs.c holds the three to each other.
 */
#include "report.h"
#include "grow.h"
#include "text.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct rep_trace {
    char *path, *format;
    as_trace_summary sum;
    as_meta meta;
    int64_t nsites; /* the reader's call sites; -1: added without its reader */
} rep_trace;

typedef struct rep_run {
    unsigned trace;
    as_run_result res;
    char *policy, *spec;
} rep_run;

struct as_report {
    rep_trace *t;
    unsigned nt;
    uint32_t capt;
    rep_run *r;
    unsigned nr;
    uint32_t capr;
};

static char *dupstr(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int as_report_fmt_parse(const char *s, as_report_fmt *out)
{
    if (strcmp(s, "table") == 0)
        *out = AS_REPORT_TABLE;
    else if (strcmp(s, "csv") == 0)
        *out = AS_REPORT_CSV;
    else if (strcmp(s, "json") == 0)
        *out = AS_REPORT_JSON;
    else if (strcmp(s, "jsonl") == 0)
        *out = AS_REPORT_JSONL;
    else
        return -1;
    return 0;
}

int as_report_create(as_report **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : AS_ENOMEM;
}

void as_report_destroy(as_report *r)
{
    if (!r)
        return;
    for (unsigned i = 0; i < r->nt; i++) {
        free(r->t[i].path);
        free(r->t[i].format);
        as_meta_free(&r->t[i].meta);
    }
    for (unsigned i = 0; i < r->nr; i++) {
        free(r->r[i].policy);
        free(r->r[i].spec);
    }
    free(r->t);
    free(r->r);
    free(r);
}

int as_report_add_trace(as_report *r, const char *path, const char *format,
                        const as_trace_summary *sum, const as_meta *meta)
{
    if (as_grow32((void **)&r->t, &r->capt, (size_t)r->nt + 1, sizeof *r->t, 4) < 0)
        return AS_ENOMEM;
    rep_trace *t = &r->t[r->nt];
    memset(t, 0, sizeof *t);
    t->path = dupstr(path ? path : "-");
    t->format = dupstr(format);
    t->nsites = -1;
    if (sum)
        t->sum = *sum;
    if (!t->path || (format && !t->format) || (meta && as_meta_copy(&t->meta, meta))) {
        free(t->path);
        free(t->format);
        return AS_ENOMEM;
    }
    return (int)r->nt++;
}

int as_report_add_run(as_report *r, unsigned trace, const as_run_result *res)
{
    if (trace >= r->nt)
        return AS_EINVAL;
    if (as_grow32((void **)&r->r, &r->capr, (size_t)r->nr + 1, sizeof *r->r, 8) < 0)
        return AS_ENOMEM;
    rep_run *x = &r->r[r->nr];
    x->trace = trace;
    x->res = *res;
    x->policy = dupstr(res->policy ? res->policy : "?");
    x->spec = dupstr(res->spec ? res->spec : x->policy ? x->policy : "?");
    if (!x->policy || !x->spec) {
        free(x->policy);
        free(x->spec);
        return AS_ENOMEM;
    }
    x->res.policy = x->policy;
    x->res.spec = x->spec;
    return (int)r->nr++;
}

int as_report_add_engine(as_report *r, int *trace, const char *path, const as_trace_reader *rd,
                         const as_engine *e)
{
    if (*trace < 0) {
        *trace = as_report_add_trace(r, path, as_trace_fmt_name(as_trace_reader_format(rd)),
                                     as_engine_summary(e), as_trace_reader_meta(rd));
        if (*trace < 0)
            return AS_ENOMEM;
        r->t[*trace].nsites = as_sites_count(as_trace_reader_sites(rd));
    }
    for (unsigned i = 0; i < as_engine_nruns(e); i++)
        if (as_report_add_run(r, (unsigned)*trace, as_engine_result(e, i)) < 0)
            return AS_ENOMEM;
    return 0;
}

unsigned as_report_nruns(const as_report *r)
{
    return r->nr;
}
unsigned as_report_ntraces(const as_report *r)
{
    return r->nt;
}
const as_run_result *as_report_run(const as_report *r, unsigned i, unsigned *trace)
{
    *trace = r->r[i].trace;
    return &r->r[i].res;
}
const as_trace_summary *as_report_trace(const as_report *r, unsigned t, const char **path)
{
    *path = r->t[t].path;
    return &r->t[t].sum;
}
const char *as_report_trace_format(const as_report *r, unsigned t)
{
    return r->t[t].format;
}
const as_meta *as_report_trace_meta(const as_report *r, unsigned t)
{
    return &r->t[t].meta;
}
int64_t as_report_trace_sites(const as_report *r, unsigned t)
{
    return r->t[t].nsites;
}

/* ---- table ----------------------------------------------------------------------------- */

enum {
    T_POLICY,
    T_CAP,
    T_RESULT,
    T_REQ,
    T_ALLOC,
    T_RES,
    T_FRAG,
    T_WASTE,
    T_CALLS,
    T_TIME,
    T_BASE, /* the columns of every table; the two below only beside a planned run */
    T_VS_PLAN = T_BASE,
    T_VS_REQ,
    T_NCOL
};

static const char *const t_head[T_NCOL] = {
    "policy", "capacity", "result",    "peak req", "peak alloc", "peak reserved",
    "frag",   "waste",    "dev calls", "dev time", "vs planned", "vs requested",
};

typedef char cell[96];

static void fmt_seconds(char *b, size_t n, double s)
{
    if (s == 0)
        snprintf(b, n, "0");
    else if (s < 1e-3)
        as_fmt_fixed(b, n, s * 1e6, 1, " us");
    else if (s < 1)
        as_fmt_fixed(b, n, s * 1e3, 2, " ms");
    else
        as_fmt_fixed(b, n, s, 2, " s");
}

/* A cell of text: as snprintf's "%s" would write it (cut to the cell). */
static void cell_text(char *c, const char *s)
{
    size_t l = strlen(s), k = l < sizeof(cell) - 1 ? l : sizeof(cell) - 1;
    memcpy(c, s, k);
    c[k] = 0;
}

/* The offline yardstick of every trace (nt entries, malloc'd; NULL when out of memory): the
 * least peak reserved of a completed offline run (`planned`) of it in the report, AS_NONE
 * when there is none. */
static uint64_t *yardsticks(const as_report *r)
{
    uint64_t *y = malloc((r->nt ? r->nt : 1) * sizeof *y);
    if (!y)
        return NULL;
    for (unsigned t = 0; t < r->nt; t++)
        y[t] = AS_NONE;
    for (unsigned i = 0; i < r->nr; i++) {
        const as_run_result *x = &r->r[i].res;
        if (x->offline && x->completed && x->peak_reserved < y[r->r[i].trace])
            y[r->r[i].trace] = x->peak_reserved;
    }
    return y;
}

static void table_row(cell *c, const as_run_result *x, uint64_t plan)
{
    cell_text(c[T_POLICY], x->policy);
    as_fmt_capacity(c[T_CAP], sizeof c[0], x->capacity);
    if (x->oom_event == AS_NONE)
        cell_text(c[T_RESULT], x->completed ? "ok" : "stopped");
    else if (x->ooms > 1)
        snprintf(c[T_RESULT], sizeof c[0], "OOM at event %llu (alloc %llu) +%llu more",
                 (unsigned long long)x->oom_event, (unsigned long long)x->oom_alloc,
                 (unsigned long long)(x->ooms - 1));
    else
        snprintf(c[T_RESULT], sizeof c[0], "OOM at event %llu (alloc %llu)",
                 (unsigned long long)x->oom_event, (unsigned long long)x->oom_alloc);
    as_fmt_bytes(c[T_REQ], sizeof c[0], x->peak_requested);
    as_fmt_bytes(c[T_ALLOC], sizeof c[0], x->peak_allocated);
    as_fmt_bytes(c[T_RES], sizeof c[0], x->peak_reserved);
    as_fmt_fixed(c[T_FRAG], sizeof c[0], 100 * x->fragmentation, 1, "%");
    as_fmt_bytes(c[T_WASTE], sizeof c[0], x->waste);
    size_t k = as_fmt_u64(c[T_CALLS], x->device_reserves); /* 41 bytes at most */
    c[T_CALLS][k++] = '/';
    c[T_CALLS][k + as_fmt_u64(c[T_CALLS] + k, x->device_releases)] = 0;
    fmt_seconds(c[T_TIME], sizeof c[0], x->device_time_s);
    /* Peak reserved over the yardstick and over the trace's bound, for completed runs. */
    cell_text(c[T_VS_PLAN], "-");
    cell_text(c[T_VS_REQ], "-");
    if (x->completed && plan != AS_NONE && plan)
        snprintf(c[T_VS_PLAN], sizeof c[0], "%+.1f%%",
                 100.0 * ((double)x->peak_reserved / (double)plan - 1));
    if (x->completed && x->peak_requested)
        snprintf(c[T_VS_REQ], sizeof c[0], "%+.1f%%",
                 100.0 * ((double)x->peak_reserved / (double)x->peak_requested - 1));
}

/* The rows under their heads, each column as wide as its widest cell: left-aligned up to
 * the result, right-aligned after it, two spaces between (none after the last). A line is
 * put together in a buffer and written at once (the cells are under 96 bytes, so a line of
 * T_NCOL of them fits): the table's cost per run is its formatting, not stdio's. */
static void table_print(FILE *f, cell (*rows)[T_NCOL], unsigned n, int ncol)
{
    size_t w[T_NCOL];
    char line[T_NCOL * (sizeof(cell) + 2) + 4];
    for (int c = 0; c < ncol; c++)
        w[c] = strlen(t_head[c]);
    for (unsigned i = 0; i < n; i++)
        for (int c = 0; c < ncol; c++) {
            size_t l = strlen(rows[i][c]);
            w[c] = l > w[c] ? l : w[c];
        }
    for (unsigned i = 0; i <= n; i++) {
        char *p = line;
        *p++ = ' ';
        *p++ = ' ';
        for (int c = 0; c < ncol; c++) {
            const char *s = i == 0 ? t_head[c] : rows[i - 1][c];
            size_t l = strlen(s), pad = w[c] - l;
            int left = c <= T_RESULT, last = c + 1 == ncol;
            if (!left) {
                memset(p, ' ', pad);
                p += pad;
            }
            memcpy(p, s, l);
            p += l;
            if (left && !last) {
                memset(p, ' ', pad);
                p += pad;
            }
            if (!last) {
                *p++ = ' ';
                *p++ = ' ';
            }
        }
        *p++ = '\n';
        fwrite(line, 1, (size_t)(p - line), f);
    }
}

/* With several traces, one line per (policy, capacity) across all of them: what a design
 * review compares. Runs are matched by their policy text and capacity. */
static void table_across(const as_report *r, FILE *f)
{
    unsigned *seen = calloc(r->nr ? r->nr : 1, sizeof *seen);
    if (!seen)
        return;
    size_t w = strlen("policy");
    for (unsigned i = 0; i < r->nr; i++)
        if (strlen(r->r[i].res.policy) > w)
            w = strlen(r->r[i].res.policy);
    fprintf(f, "\nacross %u traces:\n  %-*s  %-10s  %6s  %10s  %10s  %12s\n", r->nt, (int)w,
            "policy", "capacity", "fit", "mean frag", "worst frag", "mean waste");
    for (unsigned i = 0; i < r->nr; i++) {
        if (seen[i])
            continue;
        const as_run_result *a = &r->r[i].res;
        unsigned n = 0, fit = 0;
        double frag = 0, worst = 0, waste = 0;
        for (unsigned j = i; j < r->nr; j++) {
            const as_run_result *b = &r->r[j].res;
            if (seen[j] || b->capacity != a->capacity || strcmp(b->policy, a->policy) != 0)
                continue;
            seen[j] = 1;
            n++;
            fit += b->completed;
            frag += b->fragmentation;
            worst = b->fragmentation > worst ? b->fragmentation : worst;
            waste += (double)b->waste;
        }
        char cap[32], fits[32], wb[32];
        as_fmt_capacity(cap, sizeof cap, a->capacity);
        snprintf(fits, sizeof fits, "%u/%u", fit, n);
        as_fmt_bytes(wb, sizeof wb, (uint64_t)(waste / n));
        fprintf(f, "  %-*s  %-10s  %6s  %9.1f%%  %9.1f%%  %12s\n", (int)w, a->policy, cap, fits,
                100 * frag / n, 100 * worst, wb);
    }
    free(seen);
}

/* The OOMs the program survives (sim/caught.h), per run of trace t that had any. */
static void caught_lines(const as_report *r, unsigned t, FILE *f)
{
    for (unsigned i = 0; i < r->nr; i++) {
        const as_run_result *x = &r->r[i].res;
        if (r->r[i].trace != t || (!x->caught_ooms && !x->caught_fallbacks))
            continue;
        char cap[32], again[80] = "";
        as_fmt_capacity(cap, sizeof cap, x->capacity);
        if (x->caught_fallbacks)
            snprintf(again, sizeof again, "; %llu later requests reused it",
                     (unsigned long long)x->caught_fallbacks);
        fprintf(f,
                "  %s @ %s: OOMs treated as caught: %llu (cuDNN workspace requests, dropped for "
                "a fallback engine taken to need none%s)\n",
                x->policy, cap, (unsigned long long)x->caught_ooms, again);
    }
}

static int write_table(const as_report *r, FILE *f)
{
    cell(*rows)[T_NCOL] = calloc(r->nr ? r->nr : 1, sizeof *rows);
    uint64_t *plans = yardsticks(r);
    if (!rows || !plans) {
        free(rows);
        free(plans);
        return AS_ENOMEM;
    }
    for (unsigned t = 0; t < r->nt; t++) {
        const rep_trace *tr = &r->t[t];
        char pk[32];
        as_fmt_bytes(pk, sizeof pk, tr->sum.peak_requested);
        /* The path is the user's, the format name the input's: both may hold controls. */
        fputs(t ? "\n" : "", f);
        as_put_safe(f, tr->path);
        fprintf(f, ": %llu events, %llu allocs, peak requested %s, %llu stream%s%s",
                (unsigned long long)tr->sum.events, (unsigned long long)tr->sum.allocs, pk,
                (unsigned long long)tr->sum.streams, tr->sum.streams == 1 ? "" : "s",
                tr->format ? ", " : "");
        as_put_safe(f, tr->format ? tr->format : "");
        fputc('\n', f);
        unsigned n = 0;
        uint64_t plan = plans[t];
        for (unsigned i = 0; i < r->nr; i++)
            if (r->r[i].trace == t)
                table_row(rows[n++], &r->r[i].res, plan);
        if (n)
            table_print(f, rows, n, plan != AS_NONE ? T_NCOL : T_BASE);
        /* The OOMs, spelled out: what a user with "reserved but unallocated" needs. */
        for (unsigned i = 0; i < r->nr; i++) {
            const as_run_result *x = &r->r[i].res;
            if (r->r[i].trace != t || x->oom_event == AS_NONE)
                continue;
            char cap[32], sz[32], res[32], al[32], un[32], lf[32], dv[160] = "";
            as_fmt_capacity(cap, sizeof cap, x->capacity);
            as_fmt_bytes(sz, sizeof sz, x->oom_size);
            as_fmt_bytes(res, sizeof res, x->oom_reserved);
            as_fmt_bytes(al, sizeof al, x->oom_allocated);
            as_fmt_bytes(un, sizeof un,
                         x->oom_reserved > x->oom_allocated ? x->oom_reserved - x->oom_allocated
                                                            : 0);
            as_fmt_bytes(lf, sizeof lf, x->oom_largest_free);
            if (x->oom_pending) {
                char pb[32];
                size_t k = strlen(dv);
                as_fmt_bytes(pb, sizeof pb, x->oom_pending);
                snprintf(dv + k, sizeof dv - k, ", %s in blocks awaiting their FREE", pb);
            }
            if (x->capacity != AS_CAPACITY_NONE) {
                char d[32];
                as_fmt_bytes(d, sizeof d,
                             x->capacity > x->oom_reserved ? x->capacity - x->oom_reserved : 0);
                size_t k = strlen(dv);
                snprintf(dv + k, sizeof dv - k, ", %s left on the device", d);
            }
            fprintf(f,
                    "  %s @ %s: OOM at alloc %llu (event %llu) asking %s: reserved %s, "
                    "allocated %s, %s reserved but unallocated, largest free block %s%s\n",
                    x->policy, cap, (unsigned long long)x->oom_alloc,
                    (unsigned long long)x->oom_event, sz, res, al, un, lf, dv);
        }
        caught_lines(r, t, f);
    }
    free(rows);
    free(plans);
    if (r->nt > 1)
        table_across(r, f);
    return 0;
}

/* ---- the run fields, shared by CSV and JSON ----------------------------------------------
 * One table drives both formats, so the two carry the same fields in the same order under
 * the same names (sim/REPORT.md documents each). Integers that do not apply are null in
 * JSON and -1 in CSV: a CSV integer column is never blank, so every reader types it as an
 * integer. The yardstick fields come from the trace's other runs (its completed offline
 * run), not from the run's result. The host timings (wall_s, events_per_second) come last:
 * they are the only fields that change from one run of the same command to the next. */

typedef enum fkind { F_U64, F_OPT, F_BOOL, F_DBL, F_PLAN, F_VS_PLAN, F_VS_REQ } fkind;

typedef struct run_field {
    const char *name;
    fkind kind;
    size_t off;   /* offset in as_run_result */
    int need_oom; /* F_OPT: present only when the run hit an OOM */
    int prec;     /* F_DBL: digits after the point in CSV (always some: a real column) */
} run_field;

#define RF(n, k, o)                                                                                \
    {                                                                                              \
        .name = #n, .kind = k, .off = offsetof(as_run_result, n), .need_oom = o                    \
    }
#define RD(n, p)                                                                                   \
    {                                                                                              \
        .name = #n, .kind = F_DBL, .off = offsetof(as_run_result, n), .prec = p                    \
    }
static const run_field run_fields[] = {
    RF(capacity, F_OPT, 0),
    RF(completed, F_BOOL, 0),
    {.name = "oom", .kind = F_BOOL, .off = SIZE_MAX},
    RF(oom_event, F_OPT, 1),
    RF(oom_alloc, F_OPT, 1),
    RF(oom_size, F_OPT, 1),
    RF(oom_requested, F_OPT, 1),
    RF(oom_allocated, F_OPT, 1),
    RF(oom_reserved, F_OPT, 1),
    RF(oom_free_bytes, F_OPT, 1),
    RF(oom_largest_free, F_OPT, 1),
    RF(oom_pending, F_OPT, 1),
    RF(ooms, F_U64, 0),
    RF(events, F_U64, 0),
    RF(allocs, F_U64, 0),
    RF(peak_requested, F_U64, 0),
    RF(peak_allocated, F_U64, 0),
    RF(peak_reserved, F_U64, 0),
    RF(peak_reserved_event, F_OPT, 0),
    RF(peak_pending, F_U64, 0),
    RF(final_requested, F_U64, 0),
    RF(final_allocated, F_U64, 0),
    RF(final_reserved, F_U64, 0),
    RD(fragmentation, 6),
    RF(waste, F_U64, 0),
    RD(max_ext_frag, 6),
    RF(device_reserves, F_U64, 0),
    RF(device_releases, F_U64, 0),
    RF(device_refusals, F_U64, 0),
    RD(device_time_s, 9),
    RF(retries, F_U64, 0),
    {.name = "planned_peak_reserved", .kind = F_PLAN, .off = SIZE_MAX},
    {.name = "vs_planned", .kind = F_VS_PLAN, .off = SIZE_MAX, .prec = 6},
    {.name = "vs_requested", .kind = F_VS_REQ, .off = SIZE_MAX, .prec = 6},
    RF(caught_ooms, F_U64, 0),
    RF(caught_fallbacks, F_U64, 0),
    RD(wall_s, 6),
    RD(cpu_s, 6),
    RD(events_per_second, 1),
};
#undef RF
#undef RD
#define N_RUN_FIELDS (sizeof run_fields / sizeof run_fields[0])

/* The value of field fd of run x, whose trace's yardstick is plan (AS_NONE: none): 0
 * absent, 1 integer (*u), 2 boolean (*u), 3 real (*d), 4 absent real. */
static int field_value(const as_run_result *x, uint64_t plan, const run_field *fd, uint64_t *u,
                       double *d)
{
    int oom = x->oom_event != AS_NONE;
    switch (fd->kind) { /* the fields that are not the result's own */
    case F_PLAN:
        *u = plan;
        return plan == AS_NONE ? 0 : 1;
    case F_VS_PLAN: /* as the table's `vs planned`: completed runs only */
        if (!x->completed || plan == AS_NONE || plan == 0)
            return 4;
        *d = (double)x->peak_reserved / (double)plan - 1;
        return 3;
    case F_VS_REQ:
        if (!x->completed || x->peak_requested == 0)
            return 4;
        *d = (double)x->peak_reserved / (double)x->peak_requested - 1;
        return 3;
    default:
        break;
    }
    if (fd->off == SIZE_MAX) { /* "oom" */
        *u = (uint64_t)oom;
        return 2;
    }
    const char *p = (const char *)x + fd->off;
    switch (fd->kind) {
    case F_BOOL:
        *u = (uint64_t)(*(const int *)p != 0);
        return 2;
    case F_DBL:
        *d = *(const double *)p;
        return 3;
    case F_OPT:
        memcpy(u, p, sizeof *u);
        return (fd->need_oom && !oom) || *u == AS_NONE ? 0 : 1;
    default:
        memcpy(u, p, sizeof *u);
        return 1;
    }
}

/* ---- CSV -------------------------------------------------------------------------------- */

/* RFC 4180 quoting when needed (policy specs contain commas). */
void as_report_csv_str(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void as_report_csv_u64(FILE *f, int have, uint64_t v)
{
    if (have && v != AS_NONE)
        fprintf(f, "%llu", (unsigned long long)v);
    else
        fputs("-1", f);
}

static int write_csv(const as_report *r, FILE *f)
{
    uint64_t *plans = yardsticks(r);
    if (!plans)
        return AS_ENOMEM;
    fputs("run,trace,file,spec,policy", f);
    for (size_t k = 0; k < N_RUN_FIELDS; k++)
        fprintf(f, ",%s", run_fields[k].name);
    fputc('\n', f);
    for (unsigned i = 0; i < r->nr; i++) {
        const as_run_result *x = &r->r[i].res;
        uint64_t plan = plans[r->r[i].trace];
        fprintf(f, "%u,%u,", i, r->r[i].trace);
        as_report_csv_str(f, r->t[r->r[i].trace].path);
        fputc(',', f);
        as_report_csv_str(f, x->spec);
        fputc(',', f);
        as_report_csv_str(f, x->policy);
        for (size_t k = 0; k < N_RUN_FIELDS; k++) {
            uint64_t u = 0;
            double d = 0;
            fputc(',', f);
            switch (field_value(x, plan, &run_fields[k], &u, &d)) {
            case 0:
                fputs("-1", f);
                break;
            case 4: /* a real that does not apply */
                fputs("nan", f);
                break;
            case 3:
                fprintf(f, "%.*f", run_fields[k].prec, isfinite(d) ? d : 0.0);
                break;
            default:
                fprintf(f, "%llu", (unsigned long long)u);
            }
        }
        fputc('\n', f);
    }
    free(plans);
    return 0;
}

/* ---- JSON ------------------------------------------------------------------------------- */

void as_report_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void as_report_json_u64(FILE *f, int have, uint64_t v)
{
    if (have && v != AS_NONE)
        fprintf(f, "%llu", (unsigned long long)v);
    else
        fputs("null", f);
}

void as_report_json_real(FILE *f, double d)
{
    char b[40];
    if (!isfinite(d)) {
        fputs("null", f);
        return;
    }
    snprintf(b, sizeof b, "%.10g", d);
    fputs(b, f);
    if (!strpbrk(b, ".eE")) /* 0 -> 0.0: a real field always reads back as a real */
        fputs(".0", f);
}

void as_report_json_head(FILE *f)
{
    fprintf(f, "{\"allocsim\": \"%s\", \"schema\": %d", AS_VERSION, AS_REPORT_SCHEMA);
}

void as_report_json_trace_open(FILE *f, unsigned index, const char *file, const char *format,
                               const as_trace_summary *s, const as_meta *meta)
{
    fprintf(f, "{\"trace\": %u, \"file\": ", index);
    as_report_json_str(f, file ? file : "-");
    fputs(", \"format\": ", f);
    if (format)
        as_report_json_str(f, format);
    else
        fputs("null", f);
    if (s)
        fprintf(f,
                ", \"events\": %llu, \"allocs\": %llu, \"frees\": %llu, \"free_reqs\": %llu, "
                "\"empty_caches\": %llu, \"marks\": %llu, \"peak_requested\": %llu, "
                "\"streams\": %llu, \"live_at_end\": %llu",
                (unsigned long long)s->events, (unsigned long long)s->allocs,
                (unsigned long long)s->frees, (unsigned long long)s->free_reqs,
                (unsigned long long)s->empty_caches, (unsigned long long)s->marks,
                (unsigned long long)s->peak_requested, (unsigned long long)s->streams,
                (unsigned long long)s->live_at_end);
    fputs(", \"meta\": {", f);
    for (size_t i = 0; meta && i < meta->n; i++) {
        if (i)
            fputs(", ", f);
        as_report_json_str(f, meta->kv[i].key);
        fputs(": ", f);
        as_report_json_str(f, meta->kv[i].value);
    }
    fputc('}', f);
}

static void json_run(FILE *f, unsigned index, unsigned trace, const rep_run *rr, const char *file,
                     uint64_t plan)
{
    const as_run_result *x = &rr->res;
    fprintf(f, "{\"run\": %u, \"trace\": %u, \"file\": ", index, trace);
    as_report_json_str(f, file);
    fputs(", \"spec\": ", f);
    as_report_json_str(f, x->spec);
    fputs(", \"policy\": ", f);
    as_report_json_str(f, x->policy);
    for (size_t k = 0; k < N_RUN_FIELDS; k++) {
        uint64_t u = 0;
        double d = 0;
        fprintf(f, ", \"%s\": ", run_fields[k].name);
        switch (field_value(x, plan, &run_fields[k], &u, &d)) {
        case 0:
        case 4:
            fputs("null", f);
            break;
        case 2:
            fputs(u ? "true" : "false", f);
            break;
        case 3:
            as_report_json_real(f, d);
            break;
        default:
            fprintf(f, "%llu", (unsigned long long)u);
        }
    }
    fputc('}', f);
}

/* The JSON report, its object left open after "runs" for members of the caller's. */
static int write_json(const as_report *r, FILE *f)
{
    uint64_t *plans = yardsticks(r);
    if (!plans)
        return AS_ENOMEM;
    as_report_json_head(f);
    fputs(",\n \"traces\": [", f);
    for (unsigned i = 0; i < r->nt; i++) {
        fputs(i ? ",\n  " : "\n  ", f);
        as_report_json_trace_open(f, i, r->t[i].path, r->t[i].format, &r->t[i].sum, &r->t[i].meta);
        fputc('}', f);
    }
    fputs("],\n \"runs\": [", f);
    for (unsigned i = 0; i < r->nr; i++) {
        fputs(i ? ",\n  " : "\n  ", f);
        json_run(f, i, r->r[i].trace, &r->r[i], r->t[r->r[i].trace].path, plans[r->r[i].trace]);
    }
    fputs("]", f);
    free(plans);
    return 0;
}

/* The end of a report: what reached f is written, or AS_EIO with errno's words in why. */
static int report_flush(FILE *f, char *why, size_t why_len)
{
    if (fflush(f) || ferror(f))
        return as_errno_error(errno ? errno : EIO, "write failed", why, why_len);
    return 0;
}

/* JSON Lines: one object per trace, its runs numbered within it, so that a shard's lines
 * are the unsharded run's lines (sim/REPORT.md, "Shards"). */
int as_report_write_jsonl(const as_report *r, FILE *f, const unsigned *units, unsigned of,
                          char *why, size_t why_len)
{
    uint64_t *plans = yardsticks(r);
    if (!plans)
        return AS_ENOMEM;
    for (unsigned i = 0; i < r->nt; i++) {
        unsigned u = units ? units[i] : i, k = 0;
        as_report_json_head(f);
        fprintf(f, ", \"command\": \"run\", \"unit\": %u, \"of\": %u, \"trace\": ", u, of);
        as_report_json_trace_open(f, u, r->t[i].path, r->t[i].format, &r->t[i].sum, &r->t[i].meta);
        fputs("}, \"runs\": [", f);
        for (unsigned j = 0; j < r->nr; j++) {
            if (r->r[j].trace != i)
                continue;
            if (k)
                fputs(", ", f);
            json_run(f, k++, u, &r->r[j], r->t[i].path, plans[i]);
        }
        fputs("]}\n", f);
    }
    free(plans);
    return report_flush(f, why, why_len);
}

int as_report_write_json_open(const as_report *r, FILE *f)
{
    return write_json(r, f);
}

int as_report_write(const as_report *r, FILE *f, as_report_fmt fmt, char *why, size_t why_len)
{
    int rc;
    switch (fmt) {
    case AS_REPORT_CSV:
        rc = write_csv(r, f);
        break;
    case AS_REPORT_JSON:
        if ((rc = write_json(r, f)) == 0)
            fputs("}\n", f);
        break;
    case AS_REPORT_JSONL:
        return as_report_write_jsonl(r, f, NULL, r->nt, why, why_len);
    default:
        rc = write_table(r, f);
        break;
    }
    if (rc) {
        snprintf(why, why_len, "out of host memory");
        return rc;
    }
    return report_flush(f, why, why_len);
}

/* ---- per-run CSV logs ------------------------------------------------------------------- */

struct as_runlog {
    FILE *out;
    int own; /* out is ours to close */
    as_runlog_kind kind;
    unsigned base;
    FILE **spool; /* one temporary file per report run, created on first row */
    unsigned nspool;
    unsigned flushed; /* runs below are in out (as_runlog_flush) */
    int header;       /* the header line is in out */
    int err;          /* the first failure's errno, 0 = none */
    const char *what; /* and what failed */
};

/* Records the first failure (errno now, or EIO when errno says nothing). */
static void log_fail(as_runlog *l, const char *what)
{
    if (!l->err) {
        l->err = errno ? errno : EIO;
        l->what = what;
    }
}

int as_runlog_open(const char *path, as_runlog_kind kind, as_runlog **out, char *why,
                   size_t why_len)
{
    *out = NULL;
    FILE *f = fopen(path, "w");
    if (!f)
        return as_errno_error(errno, "cannot create", why, why_len);
    int rc = as_runlog_open_stream(f, kind, out);
    if (rc)
        fclose(f);
    else
        (*out)->own = 1;
    return rc;
}

int as_runlog_open_stream(FILE *f, as_runlog_kind kind, as_runlog **out)
{
    *out = NULL;
    as_runlog *l = calloc(1, sizeof *l);
    if (!l)
        return AS_ENOMEM;
    l->out = f;
    l->kind = kind;
    *out = l;
    return 0;
}

void as_runlog_set_base(as_runlog *l, unsigned run_base)
{
    l->base = run_base;
}

static FILE *spool_for(as_runlog *l, unsigned run)
{
    if (l->err)
        return NULL;
    if (run >= l->nspool) {
        unsigned nc = run + 8 > 2 * l->nspool ? run + 8 : 2 * l->nspool;
        FILE **n = realloc(l->spool, nc * sizeof *n);
        if (!n) {
            l->err = ENOMEM;
            l->what = "out of host memory";
            return NULL;
        }
        memset(n + l->nspool, 0, (nc - l->nspool) * sizeof *n);
        l->spool = n;
        l->nspool = nc;
    }
    if (!l->spool[run] && !(l->spool[run] = tmpfile())) {
        log_fail(l, "cannot create a temporary file");
        return NULL;
    }
    return l->spool[run];
}

void as_runlog_segment(void *user, const as_seg_record *rec)
{
    as_runlog *l = user;
    unsigned run = l->base + rec->run;
    FILE *f = spool_for(l, run);
    if (f)
        fprintf(f, "%u,%llu,%llu,%s,%llu,%llu\n", run, (unsigned long long)rec->alloc,
                (unsigned long long)rec->event, as_dev_action_name(rec->dev.action),
                (unsigned long long)rec->dev.addr, (unsigned long long)rec->dev.size);
}

void as_runlog_sample(void *user, const as_timeline_sample *s)
{
    as_runlog *l = user;
    unsigned run = l->base + s->run;
    FILE *f = spool_for(l, run);
    if (!f)
        return;
    /* time_us counts from the trace's first timed event; -1 when the trace has no times. */
    fprintf(f, "%u,%llu,%llu,%lld,%llu,%llu,%llu\n", run, (unsigned long long)s->event,
            (unsigned long long)s->alloc, s->time_us == AS_TIME_NONE ? -1LL : (long long)s->time_us,
            (unsigned long long)s->requested, (unsigned long long)s->allocated,
            (unsigned long long)s->reserved);
}

/* Appends spool i to the output and closes it; a failure is recorded in l. */
static void spool_out(as_runlog *l, unsigned i)
{
    FILE *s = l->spool[i];
    char buf[65536];
    l->spool[i] = NULL;
    if (!s)
        return;
    if (fflush(s) || fseek(s, 0, SEEK_SET))
        log_fail(l, "temporary file failed");
    size_t n;
    while (!l->err && (n = fread(buf, 1, sizeof buf, s)) > 0)
        if (fwrite(buf, 1, n, l->out) != n)
            log_fail(l, "write failed");
    if (!l->err && ferror(s)) {
        errno = EIO;
        log_fail(l, "temporary file failed");
    }
    fclose(s);
}

/* l's first failure as a code of the one error space, worded into why. */
static int log_error(const as_runlog *l, char *why, size_t why_len)
{
    return l->err ? as_errno_error(l->err, l->what, why, why_len) : 0;
}

int as_runlog_flush(as_runlog *l, unsigned upto, char *why, size_t why_len)
{
    if (!l->err && !l->header &&
        fputs(l->kind == AS_RUNLOG_SEGMENTS
                  ? "run,alloc,event,action,addr,size\n"
                  : "run,event,alloc,time_us,requested,allocated,reserved\n",
              l->out) < 0)
        log_fail(l, "write failed");
    l->header = 1;
    for (; l->flushed < upto && l->flushed < l->nspool; l->flushed++) {
        unsigned i = l->flushed;
        if (!l->err) {
            spool_out(l, i);
        } else if (l->spool[i]) {
            fclose(l->spool[i]);
            l->spool[i] = NULL;
        }
    }
    if (l->flushed < upto)
        l->flushed = upto;
    return log_error(l, why, why_len);
}

void as_runlog_discard(as_runlog *l, unsigned from)
{
    for (unsigned i = from; i < l->nspool; i++) {
        if (l->spool[i])
            fclose(l->spool[i]);
        l->spool[i] = NULL;
    }
}

int as_runlog_close(as_runlog *l, char *why, size_t why_len)
{
    if (!l)
        return 0;
    as_runlog_flush(l, l->nspool, NULL, 0);
    if (fflush(l->out) || ferror(l->out))
        log_fail(l, "write failed");
    if (l->own && fclose(l->out))
        log_fail(l, "close failed");
    int rc = log_error(l, why, why_len);
    free(l->spool);
    free(l);
    return rc;
}
