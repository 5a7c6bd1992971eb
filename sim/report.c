/*
 * report.c - table, CSV and JSON reports, the per-run CSV logs, and byte quantities
 * (report.h). The CSV column set and the JSON names are a contract with plots/ and with
 * users' scripts: add columns at the end, never rename or reorder.
 */
#include "report.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct rep_trace {
    char *path, *format;
    as_trace_summary sum;
    as_meta meta;
} rep_trace;

typedef struct rep_run {
    unsigned trace;
    as_run_result res;
    char *policy;
} rep_run;

struct as_report {
    rep_trace *t;
    unsigned nt, capt;
    rep_run *r;
    unsigned nr, capr;
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
    else
        return -1;
    return 0;
}

int as_report_create(as_report **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : -ENOMEM;
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
    for (unsigned i = 0; i < r->nr; i++)
        free(r->r[i].policy);
    free(r->t);
    free(r->r);
    free(r);
}

int as_report_add_trace(as_report *r, const char *path, const char *format,
                        const as_trace_summary *sum, const as_meta *meta)
{
    if (r->nt == r->capt) {
        unsigned nc = r->capt ? r->capt * 2 : 4;
        rep_trace *n = realloc(r->t, nc * sizeof *n);
        if (!n)
            return -ENOMEM;
        r->t = n;
        r->capt = nc;
    }
    rep_trace *t = &r->t[r->nt];
    memset(t, 0, sizeof *t);
    t->path = dupstr(path ? path : "-");
    t->format = dupstr(format);
    if (sum)
        t->sum = *sum;
    if (!t->path || (format && !t->format) || (meta && as_meta_copy(&t->meta, meta))) {
        free(t->path);
        free(t->format);
        return -ENOMEM;
    }
    return (int)r->nt++;
}

int as_report_add_run(as_report *r, unsigned trace, const as_run_result *res)
{
    if (trace >= r->nt)
        return -EINVAL;
    if (r->nr == r->capr) {
        unsigned nc = r->capr ? r->capr * 2 : 8;
        rep_run *n = realloc(r->r, nc * sizeof *n);
        if (!n)
            return -ENOMEM;
        r->r = n;
        r->capr = nc;
    }
    rep_run *x = &r->r[r->nr];
    x->trace = trace;
    x->res = *res;
    x->policy = dupstr(res->policy ? res->policy : "?");
    if (!x->policy)
        return -ENOMEM;
    x->res.policy = x->policy;
    return (int)r->nr++;
}

int as_report_add_engine(as_report *r, int *trace, const char *path, const as_trace_reader *rd,
                         const as_engine *e)
{
    if (*trace < 0) {
        *trace = as_report_add_trace(r, path, as_trace_fmt_name(as_trace_reader_format(rd)),
                                     as_engine_summary(e), as_trace_reader_meta(rd));
        if (*trace < 0)
            return -ENOMEM;
    }
    for (unsigned i = 0; i < as_engine_nruns(e); i++)
        if (as_report_add_run(r, (unsigned)*trace, as_engine_result(e, i)) < 0)
            return -ENOMEM;
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

/* ---- quantities ------------------------------------------------------------------------ */

int as_parse_bytes(const char *s, uint64_t *out)
{
    /* The one unit rule (traces/units.c): 80G = 80 GiB, 80GB = 80e9, 141e9. */
    return s && as_parse_size(s, strlen(s), out) == 0 && *out ? 0 : -1;
}

int as_parse_capacity(const char *s, uint64_t *out)
{
    if (s && (strcmp(s, "none") == 0 || strcmp(s, "unlimited") == 0)) {
        *out = AS_CAPACITY_NONE;
        return 0;
    }
    return as_parse_bytes(s, out);
}

void as_fmt_bytes(char *buf, size_t n, uint64_t b)
{
    if (b < 1024)
        snprintf(buf, n, "%llu B", (unsigned long long)b);
    else if (b < (1ull << 20))
        snprintf(buf, n, "%.1f KiB", (double)b / 1024);
    else if (b < (1ull << 30))
        snprintf(buf, n, "%.1f MiB", (double)b / (1 << 20));
    else
        snprintf(buf, n, "%.2f GiB", (double)b / (1 << 30));
}

void as_fmt_capacity(char *buf, size_t n, uint64_t cap)
{
    if (cap == AS_CAPACITY_NONE)
        snprintf(buf, n, "none");
    else if (cap % (1ull << 30) == 0)
        snprintf(buf, n, "%lluGiB", (unsigned long long)(cap >> 30));
    else if (cap % 1000000000ull == 0)
        snprintf(buf, n, "%lluGB", (unsigned long long)(cap / 1000000000ull));
    else if (cap % (1ull << 20) == 0)
        snprintf(buf, n, "%lluMiB", (unsigned long long)(cap >> 20));
    else if (cap >= (1ull << 30))
        snprintf(buf, n, "~%.2fGiB", (double)cap / (1ull << 30)); /* exact in CSV/JSON */
    else
        snprintf(buf, n, "%llu", (unsigned long long)cap);
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
    T_RATE,
    T_NCOL
};

static const char *const t_head[T_NCOL] = {
    "policy", "capacity", "result",    "peak req", "peak alloc", "peak reserved",
    "frag",   "waste",    "dev calls", "dev time", "events/s",
};

typedef char cell[96];

static void fmt_seconds(char *b, size_t n, double s)
{
    if (s == 0)
        snprintf(b, n, "0");
    else if (s < 1e-3)
        snprintf(b, n, "%.1f us", s * 1e6);
    else if (s < 1)
        snprintf(b, n, "%.2f ms", s * 1e3);
    else
        snprintf(b, n, "%.2f s", s);
}

static void fmt_rate(char *b, size_t n, double r)
{
    if (r >= 1e6)
        snprintf(b, n, "%.1f M", r / 1e6);
    else if (r >= 1e3)
        snprintf(b, n, "%.1f k", r / 1e3);
    else
        snprintf(b, n, "%.0f", r);
}

static void table_row(cell *c, const as_run_result *x)
{
    snprintf(c[T_POLICY], sizeof c[0], "%s", x->policy);
    as_fmt_capacity(c[T_CAP], sizeof c[0], x->capacity);
    if (x->oom_event == AS_NONE)
        snprintf(c[T_RESULT], sizeof c[0], "%s", x->completed ? "ok" : "stopped");
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
    snprintf(c[T_FRAG], sizeof c[0], "%.1f%%", 100 * x->fragmentation);
    as_fmt_bytes(c[T_WASTE], sizeof c[0], x->waste);
    snprintf(c[T_CALLS], sizeof c[0], "%llu/%llu", (unsigned long long)x->device_reserves,
             (unsigned long long)x->device_releases);
    fmt_seconds(c[T_TIME], sizeof c[0], x->device_time_s);
    fmt_rate(c[T_RATE], sizeof c[0], x->events_per_second);
}

static void table_print(FILE *f, cell (*rows)[T_NCOL], unsigned n)
{
    size_t w[T_NCOL];
    for (int c = 0; c < T_NCOL; c++) {
        w[c] = strlen(t_head[c]);
        for (unsigned i = 0; i < n; i++)
            if (strlen(rows[i][c]) > w[c])
                w[c] = strlen(rows[i][c]);
    }
    for (unsigned i = 0; i <= n; i++) {
        fputs("  ", f);
        for (int c = 0; c < T_NCOL; c++) {
            const char *s = i == 0 ? t_head[c] : rows[i - 1][c];
            int left = c <= T_RESULT;
            if (c + 1 == T_NCOL && left)
                fputs(s, f);
            else
                fprintf(f, left ? "%-*s%s" : "%*s%s", (int)w[c], s, c + 1 == T_NCOL ? "" : "  ");
        }
        fputc('\n', f);
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

static void write_table(const as_report *r, FILE *f)
{
    cell(*rows)[T_NCOL] = calloc(r->nr ? r->nr : 1, sizeof *rows);
    if (!rows)
        return;
    for (unsigned t = 0; t < r->nt; t++) {
        const rep_trace *tr = &r->t[t];
        char pk[32];
        as_fmt_bytes(pk, sizeof pk, tr->sum.peak_requested);
        fprintf(f, "%s%s: %llu events, %llu allocs, peak requested %s, %llu stream%s%s%s\n",
                t ? "\n" : "", tr->path, (unsigned long long)tr->sum.events,
                (unsigned long long)tr->sum.allocs, pk, (unsigned long long)tr->sum.streams,
                tr->sum.streams == 1 ? "" : "s", tr->format ? ", " : "",
                tr->format ? tr->format : "");
        unsigned n = 0;
        for (unsigned i = 0; i < r->nr; i++)
            if (r->r[i].trace == t)
                table_row(rows[n++], &r->r[i].res);
        if (n)
            table_print(f, rows, n);
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
    }
    free(rows);
    if (r->nt > 1)
        table_across(r, f);
}

/* ---- CSV -------------------------------------------------------------------------------- */

static const char csv_head[] =
    "trace,policy,capacity,completed,oom_event,oom_alloc,oom_size,oom_reserved,oom_allocated,"
    "oom_requested,ooms,events,allocs,peak_requested,peak_allocated,peak_reserved,"
    "peak_reserved_event,final_reserved,fragmentation,waste,max_ext_frag,device_reserves,"
    "device_releases,device_refusals,device_time_s,wall_s,events_per_second,retries,"
    "oom_free_bytes,oom_largest_free,peak_pending,oom_pending\n";

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

static void csv_opt(FILE *f, int have, uint64_t v)
{
    if (have)
        fprintf(f, "%llu", (unsigned long long)v);
    fputc(',', f);
}

static void write_csv(const as_report *r, FILE *f)
{
    fputs(csv_head, f);
    for (unsigned i = 0; i < r->nr; i++) {
        const as_run_result *x = &r->r[i].res;
        int oom = x->oom_event != AS_NONE;
        as_report_csv_str(f, r->t[r->r[i].trace].path);
        fputc(',', f);
        as_report_csv_str(f, x->policy);
        fputc(',', f);
        csv_opt(f, x->capacity != AS_CAPACITY_NONE, x->capacity);
        fprintf(f, "%d,", x->completed);
        csv_opt(f, oom, x->oom_event);
        csv_opt(f, oom, x->oom_alloc);
        csv_opt(f, oom, x->oom_size);
        csv_opt(f, oom, x->oom_reserved);
        csv_opt(f, oom, x->oom_allocated);
        csv_opt(f, oom, x->oom_requested);
        fprintf(f, "%llu,%llu,%llu,%llu,%llu,%llu,", (unsigned long long)x->ooms,
                (unsigned long long)x->events, (unsigned long long)x->allocs,
                (unsigned long long)x->peak_requested, (unsigned long long)x->peak_allocated,
                (unsigned long long)x->peak_reserved);
        csv_opt(f, x->peak_reserved_event != AS_NONE, x->peak_reserved_event);
        fprintf(f, "%llu,%.6f,%llu,%.6f,%llu,%llu,%llu,%.9f,%.6f,%.0f,%llu,",
                (unsigned long long)x->final_reserved, x->fragmentation,
                (unsigned long long)x->waste, x->max_ext_frag,
                (unsigned long long)x->device_reserves, (unsigned long long)x->device_releases,
                (unsigned long long)x->device_refusals, x->device_time_s, x->wall_s,
                x->events_per_second, (unsigned long long)x->retries);
        csv_opt(f, oom, x->oom_free_bytes);
        csv_opt(f, oom, x->oom_largest_free);
        fprintf(f, "%llu,", (unsigned long long)x->peak_pending);
        if (oom)
            fprintf(f, "%llu", (unsigned long long)x->oom_pending);
        fputc('\n', f);
    }
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

static void json_u64(FILE *f, const char *k, int have, uint64_t v, int last)
{
    fprintf(f, "\"%s\": ", k);
    if (have)
        fprintf(f, "%llu", (unsigned long long)v);
    else
        fputs("null", f);
    fputs(last ? "" : ", ", f);
}

static void json_dbl(FILE *f, const char *k, double v, int last)
{
    fprintf(f, "\"%s\": ", k);
    if (isfinite(v))
        fprintf(f, "%.10g", v);
    else
        fputs("null", f);
    fputs(last ? "" : ", ", f);
}

static void json_trace(FILE *f, const rep_trace *t)
{
    const as_trace_summary *s = &t->sum;
    fputs("{\"file\": ", f);
    as_report_json_str(f, t->path);
    fputs(", \"format\": ", f);
    if (t->format)
        as_report_json_str(f, t->format);
    else
        fputs("null", f);
    fputs(", ", f);
    json_u64(f, "events", 1, s->events, 0);
    json_u64(f, "allocs", 1, s->allocs, 0);
    json_u64(f, "frees", 1, s->frees, 0);
    json_u64(f, "free_reqs", 1, s->free_reqs, 0);
    json_u64(f, "empty_caches", 1, s->empty_caches, 0);
    json_u64(f, "marks", 1, s->marks, 0);
    json_u64(f, "peak_requested", 1, s->peak_requested, 0);
    json_u64(f, "streams", 1, s->streams, 0);
    json_u64(f, "live_at_end", 1, s->live_at_end, 0);
    fputs("\"meta\": {", f);
    for (size_t i = 0; i < t->meta.n; i++) {
        if (i)
            fputs(", ", f);
        as_report_json_str(f, t->meta.kv[i].key);
        fputs(": ", f);
        as_report_json_str(f, t->meta.kv[i].value);
    }
    fputs("}}", f);
}

static void json_run(FILE *f, const rep_run *rr, const char *file)
{
    const as_run_result *x = &rr->res;
    int oom = x->oom_event != AS_NONE;
    fprintf(f, "{\"trace\": %u, \"file\": ", rr->trace);
    as_report_json_str(f, file);
    fputs(", \"policy\": ", f);
    as_report_json_str(f, x->policy);
    fputs(", ", f);
    json_u64(f, "capacity", x->capacity != AS_CAPACITY_NONE, x->capacity, 0);
    fprintf(f, "\"completed\": %s, ", x->completed ? "true" : "false");
    json_u64(f, "oom_event", oom, x->oom_event, 0);
    json_u64(f, "oom_alloc", oom, x->oom_alloc, 0);
    json_u64(f, "oom_size", oom, x->oom_size, 0);
    json_u64(f, "oom_reserved", oom, x->oom_reserved, 0);
    json_u64(f, "oom_allocated", oom, x->oom_allocated, 0);
    json_u64(f, "oom_requested", oom, x->oom_requested, 0);
    json_u64(f, "oom_free_bytes", oom, x->oom_free_bytes, 0);
    json_u64(f, "oom_largest_free", oom, x->oom_largest_free, 0);
    json_u64(f, "ooms", 1, x->ooms, 0);
    json_u64(f, "events", 1, x->events, 0);
    json_u64(f, "allocs", 1, x->allocs, 0);
    json_u64(f, "peak_requested", 1, x->peak_requested, 0);
    json_u64(f, "peak_allocated", 1, x->peak_allocated, 0);
    json_u64(f, "peak_reserved", 1, x->peak_reserved, 0);
    json_u64(f, "peak_reserved_event", x->peak_reserved_event != AS_NONE, x->peak_reserved_event,
             0);
    json_u64(f, "final_reserved", 1, x->final_reserved, 0);
    json_dbl(f, "fragmentation", x->fragmentation, 0);
    json_u64(f, "waste", 1, x->waste, 0);
    json_dbl(f, "max_ext_frag", x->max_ext_frag, 0);
    json_u64(f, "device_reserves", 1, x->device_reserves, 0);
    json_u64(f, "device_releases", 1, x->device_releases, 0);
    json_u64(f, "device_refusals", 1, x->device_refusals, 0);
    json_dbl(f, "device_time_s", x->device_time_s, 0);
    json_dbl(f, "wall_s", x->wall_s, 0);
    json_dbl(f, "cpu_s", x->cpu_s, 0);
    json_dbl(f, "events_per_second", x->events_per_second, 0);
    json_u64(f, "retries", 1, x->retries, 0);
    json_u64(f, "peak_pending", 1, x->peak_pending, 0);
    json_u64(f, "oom_pending", oom, x->oom_pending, 1);
    fputc('}', f);
}

static void write_json(const as_report *r, FILE *f)
{
    fputs("{\"allocsim\": \"" AS_VERSION "\",\n \"trace\": ", f);
    if (r->nt)
        json_trace(f, &r->t[0]);
    else
        fputs("null", f);
    fputs(",\n \"traces\": [", f);
    for (unsigned i = 0; i < r->nt; i++) {
        fputs(i ? ",\n  " : "\n  ", f);
        json_trace(f, &r->t[i]);
    }
    fputs("],\n \"runs\": [", f);
    for (unsigned i = 0; i < r->nr; i++) {
        fputs(i ? ",\n  " : "\n  ", f);
        json_run(f, &r->r[i], r->t[r->r[i].trace].path);
    }
    fputs("]}\n", f);
}

int as_report_write(const as_report *r, FILE *f, as_report_fmt fmt)
{
    switch (fmt) {
    case AS_REPORT_CSV:
        write_csv(r, f);
        break;
    case AS_REPORT_JSON:
        write_json(r, f);
        break;
    default:
        write_table(r, f);
        break;
    }
    if (fflush(f) || ferror(f))
        return -(errno ? errno : EIO);
    return 0;
}

/* ---- per-run CSV logs ------------------------------------------------------------------- */

struct as_runlog {
    FILE *out;
    as_runlog_kind kind;
    unsigned base;
    FILE **spool; /* one temporary file per report run, created on first row */
    unsigned nspool;
    int err;
};

int as_runlog_open(const char *path, as_runlog_kind kind, as_runlog **out)
{
    *out = NULL;
    as_runlog *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    l->out = fopen(path, "w");
    if (!l->out) {
        int e = errno;
        free(l);
        return -e;
    }
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
        unsigned nc = run + 8;
        FILE **n = realloc(l->spool, nc * sizeof *n);
        if (!n) {
            l->err = ENOMEM;
            return NULL;
        }
        memset(n + l->nspool, 0, (nc - l->nspool) * sizeof *n);
        l->spool = n;
        l->nspool = nc;
    }
    if (!l->spool[run] && !(l->spool[run] = tmpfile())) {
        l->err = errno ? errno : EIO;
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
    fprintf(f, "%u,%llu,%llu,", run, (unsigned long long)s->event, (unsigned long long)s->alloc);
    if (s->time_us != AS_TIME_NONE)
        fprintf(f, "%lld", (long long)s->time_us);
    fprintf(f, ",%llu,%llu,%llu\n", (unsigned long long)s->requested,
            (unsigned long long)s->allocated, (unsigned long long)s->reserved);
}

int as_runlog_close(as_runlog *l)
{
    if (!l)
        return 0;
    int err = l->err;
    fputs(l->kind == AS_RUNLOG_SEGMENTS ? "run,alloc,event,action,addr,size\n"
                                        : "run,event,alloc,time_us,requested,allocated,reserved\n",
          l->out);
    char buf[65536];
    for (unsigned i = 0; i < l->nspool; i++) {
        FILE *s = l->spool[i];
        if (!s)
            continue;
        if (!err) {
            if (fflush(s) || fseek(s, 0, SEEK_SET))
                err = errno ? errno : EIO;
            size_t n;
            while (!err && (n = fread(buf, 1, sizeof buf, s)) > 0)
                if (fwrite(buf, 1, n, l->out) != n)
                    err = errno ? errno : EIO;
            if (!err && ferror(s))
                err = EIO;
        }
        fclose(s);
    }
    if (fclose(l->out) && !err)
        err = errno ? errno : EIO;
    free(l->spool);
    free(l);
    return -err;
}
