/*
 * rmm.c - import of RAPIDS RMM memory logs: the logging_resource_adaptor CSV
 * (`Thread,Time,Action,Pointer,Size,Stream`, rows `%t,%H:%M:%S.%f,%v`) and the older
 * cnmem-era CSV (`Event Type,Device ID,Address,Stream,Size (bytes),...,Start,...`).
 *
 * Columns are found by name, in any order, extra ones ignored. Device pointers become
 * allocation ordinals through a table of the live pointers, so memory is proportional to
 * the live allocations. `allocate failure` rows (a null pointer: the real allocator ran
 * out) are not allocations: each becomes a MARK "rmm: allocate failure ..." at its place,
 * and is counted in the reader's metadata (rmm.allocate_failures, present once one is
 * seen, final once the trace is read; a converted file keeps the MARKs).
 * Invariant: a row is consumed only once parsed, so every error names its line and the
 * byte offset of the offending field; with opts->lenient bad rows are counted and skipped.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live.h"
#include "trace_internal.h"

#define RMM_MAX_LINE (64u << 10)
#define RMM_MAX_FIELDS 64
#define DAY_US 86400000000ll

enum { C_ACTION, C_POINTER, C_SIZE, C_STREAM, C_TIME, C_THREAD, C_DEVICE, C_NCOLS };

typedef struct field {
    const char *b, *e; /* trimmed, unquoted */
} field;

typedef struct rmm_st {
    as_instream *in;
    as_meta *meta; /* the reader's: counts are updated as rows are read */
    int lenient, cnmem;
    int col[C_NCOLS]; /* field index of each column, or -1 */
    int ncols;        /* fields in the header */
    uint64_t line;
    as_inline ln; /* the current line (peeked, not yet consumed) */
    as_live ptrs; /* key: pointer; out_id: ordinal, size, stream */
    uint64_t next_id;
    uint64_t warnings, failures, null_rows, rows;
    int64_t last_time, day;
    int64_t cnmem_device; /* the one device a cnmem log may hold, -1 before the first row */
    /* A row that yields two events (lenient re-allocation of a live pointer) parks the
     * second here. */
    int have_pending;
    as_event pending;
    char label[AS_MAX_LABEL + 1];
} rmm_st;

/* ---- lines and fields ------------------------------------------------------------- */

static int fail_at(rmm_st *s, as_trace_error *err, int code, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail_at(rmm_st *s, as_trace_error *err, int code, const char *at, const char *fmt, ...)
{
    const as_trace_error *se = as_instream_error(s->in);
    if (se) {
        if (err)
            *err = *se;
        return se->code;
    }
    uint64_t off = s->ln.off + (at && s->ln.p ? (uint64_t)(at - s->ln.p) : 0);
    char m[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    return as_trace_set_error(err, code, as_instream_path(s->in), off, s->line, "line %llu: %s",
                              (unsigned long long)s->line, m);
}

static int peek_line(rmm_st *s, as_trace_error *err)
{
    int rc = as_instream_next_line(s->in, RMM_MAX_LINE, 1, &s->ln, &s->line, err);
    if (rc == AS_INLINE_TOO_LONG)
        return fail_at(s, err, AS_ECORRUPT, NULL, "line longer than %u bytes", RMM_MAX_LINE);
    if (rc == AS_INLINE_NUL)
        return fail_at(s, err, AS_ECORRUPT, s->ln.nul, "NUL byte in a CSV log");
    return rc;
}

static void consume_line(rmm_st *s)
{
    as_instream_skip(s->in, s->ln.consume);
}

/* Splits b..e at commas (RMM never quotes; a field wrapped in double quotes, as
 * spreadsheet exports write them, is unwrapped). Returns the field count, or -1 when
 * there are more than max. */
static int split(const char *b, const char *e, field *f, int max)
{
    int n = 0;
    const char *p = b;
    for (;;) {
        const char *q = memchr(p, ',', (size_t)(e - p));
        const char *fe = q ? q : e, *fb = p;
        while (fb < fe && isspace((unsigned char)*fb))
            fb++;
        while (fe > fb && isspace((unsigned char)fe[-1]))
            fe--;
        if (fe - fb >= 2 && *fb == '"' && fe[-1] == '"')
            fb++, fe--;
        if (n == max)
            return -1;
        f[n].b = fb;
        f[n].e = fe;
        n++;
        if (!q)
            return n;
        p = q + 1;
    }
}

/* Fields of a line, however many (split stops at its array's size). */
static size_t count_fields(const char *b, const char *e)
{
    size_t n = 1;
    for (const char *p = b; (p = memchr(p, ',', (size_t)(e - p))) != NULL; p++)
        n++;
    return n;
}

static int field_is(const field *f, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(f->e - f->b) == n && strncasecmp(f->b, word, n) == 0;
}

/* ---- header ----------------------------------------------------------------------- */

typedef struct colname {
    const char *name;
    int col;
} colname;

static const colname rmm_cols[] = {
    {"Action", C_ACTION}, {"Pointer", C_POINTER}, {"Size", C_SIZE},
    {"Stream", C_STREAM}, {"Time", C_TIME},       {"Thread", C_THREAD},
};

static const colname cnmem_cols[] = {
    {"Event Type", C_ACTION}, {"Address", C_POINTER}, {"Size (bytes)", C_SIZE},
    {"Stream", C_STREAM},     {"Start", C_TIME},      {"Device ID", C_DEVICE},
};

/* Which header this is: 1 = logging_resource_adaptor, 2 = cnmem era, 0 = neither. */
static int header_kind(const field *f, int n)
{
    int seen_rmm = 0, seen_cnmem = 0;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) {
            seen_rmm |= field_is(&f[i], rmm_cols[c].name) << c;
            seen_cnmem |= field_is(&f[i], cnmem_cols[c].name) << c;
        }
    return seen_rmm == 7 ? 1 : seen_cnmem == 7 ? 2 : 0;
}

static int rmm_probe(const uint8_t *head, size_t n)
{
    const char *b = (const char *)head, *e = b + n;
    if (n >= 3 && memcmp(b, "\xEF\xBB\xBF", 3) == 0) /* a UTF-8 BOM from an editor */
        b += 3;
    const char *nl = memchr(b, '\n', (size_t)(e - b));
    if (!nl)
        return 0; /* the header is short: it always ends within the probe window */
    field f[RMM_MAX_FIELDS];
    int k = split(b, nl, f, RMM_MAX_FIELDS);
    return k > 0 && header_kind(f, k) != 0;
}

static int rmm_open(as_instream *in, const as_reader_opts *opts, as_meta *meta, void **stp,
                    as_trace_error *err)
{
    *stp = NULL;
    rmm_st *s = calloc(1, sizeof *s);
    if (!s)
        return as_instream_fail(in, err, AS_ENOMEM, "out of memory");
    s->in = in;
    s->meta = meta;
    s->lenient = opts && opts->lenient;
    s->cnmem_device = -1;
    s->last_time = AS_TIME_NONE;
    int rc = peek_line(s, err);
    if (rc) {
        if (rc == AS_TRACE_EOF)
            rc = fail_at(s, err, AS_EFORMAT, NULL, "empty RMM log");
        goto bad;
    }
    const char *b = s->ln.p, *e = s->ln.p + s->ln.len;
    if (e - b >= 3 && memcmp(b, "\xEF\xBB\xBF", 3) == 0)
        b += 3;
    field f[RMM_MAX_FIELDS];
    int n = split(b, e, f, RMM_MAX_FIELDS);
    int kind = n > 0 ? header_kind(f, n) : 0;
    if (n < 0) {
        rc = fail_at(s, err, AS_EFORMAT, b, "RMM log header with %zu fields (at most %d)",
                     count_fields(b, e), RMM_MAX_FIELDS);
        goto bad;
    }
    if (!kind) {
        rc = fail_at(s, err, AS_EFORMAT, b,
                     "not an RMM log header (want Thread,Time,Action,Pointer,Size,Stream)");
        goto bad;
    }
    s->cnmem = kind == 2;
    const colname *names = s->cnmem ? cnmem_cols : rmm_cols;
    size_t nnames =
        s->cnmem ? sizeof cnmem_cols / sizeof cnmem_cols[0] : sizeof rmm_cols / sizeof rmm_cols[0];
    for (int c = 0; c < C_NCOLS; c++)
        s->col[c] = -1;
    for (int i = 0; i < n; i++)
        for (size_t c = 0; c < nnames; c++) {
            if (!field_is(&f[i], names[c].name))
                continue;
            if (s->col[names[c].col] >= 0) {
                rc =
                    fail_at(s, err, AS_EFORMAT, f[i].b, "column '%s' appears twice", names[c].name);
                goto bad;
            }
            s->col[names[c].col] = i;
        }
    s->ncols = n;
    consume_line(s);
    /* The counts (rmm.allocate_failures, ...) are added when they first happen: written
     * here as 0 they would be copied into a converted file's header as if final. */
    if (as_meta_set(meta, "source", s->cnmem ? "rmm-cnmem-csv" : "rmm-csv") < 0) {
        rc = fail_at(s, err, AS_ENOMEM, NULL, "out of memory");
        goto bad;
    }
    *stp = s;
    return 0;
bad:
    free(s);
    return rc < 0 ? rc : AS_EFORMAT;
}

/* ---- fields ------------------------------------------------------------------------ */

static int parse_dec(const field *f, uint64_t *v)
{
    uint64_t x = 0;
    if (f->b == f->e)
        return -1;
    for (const char *p = f->b; p < f->e; p++) {
        if (*p < '0' || *p > '9' || x > (UINT64_MAX - 9) / 10)
            return -1;
        x = x * 10 + (uint64_t)(*p - '0');
    }
    *v = x;
    return 0;
}

/* A %p pointer: 0x-prefixed hex (glibc), bare hex (MSVC), or null as (nil)/nullptr/0. */
static int parse_ptr(const field *f, uint64_t *v)
{
    if (field_is(f, "(nil)") || field_is(f, "nullptr") || field_is(f, "null") || field_is(f, "0") ||
        f->b == f->e) {
        *v = 0;
        return 0;
    }
    const char *p = f->b;
    if (f->e - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        p += 2;
    if (f->e - p > 16)
        return -1;
    uint64_t x = 0;
    for (; p < f->e; p++) {
        int d = isdigit((unsigned char)*p) ? *p - '0'
                : (*p >= 'a' && *p <= 'f') ? *p - 'a' + 10
                : (*p >= 'A' && *p <= 'F') ? *p - 'A' + 10
                                           : -1;
        if (d < 0)
            return -1;
        x = x << 4 | (uint64_t)d;
    }
    *v = x;
    return 0;
}

/* HH:MM:SS[.ffffff] -> microseconds within the day (more than 6 digits are truncated). */
static int parse_hms(const field *f, int64_t *us)
{
    unsigned hh, mm, ss;
    int n = 0;
    char buf[40];
    size_t len = (size_t)(f->e - f->b);
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, f->b, len);
    buf[len] = 0;
    if (sscanf(buf, "%2u:%2u:%2u%n", &hh, &mm, &ss, &n) != 3 || hh > 23 || mm > 59 || ss > 60)
        return -1;
    int64_t frac = 0;
    const char *p = buf + n;
    if (*p == '.') {
        int digits = 0;
        for (p++; isdigit((unsigned char)*p); p++, digits++)
            if (digits < 6)
                frac = frac * 10 + (*p - '0');
        if (digits == 0)
            return -1;
        for (; digits < 6; digits++)
            frac *= 10;
    }
    if (*p)
        return -1;
    *us = ((int64_t)hh * 3600 + mm * 60 + ss) * 1000000 + frac;
    return 0;
}

/* cnmem's Start: seconds as a decimal number (since the process started). */
static int parse_secs(const field *f, int64_t *us)
{
    char buf[40], *end;
    size_t len = (size_t)(f->e - f->b);
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, f->b, len);
    buf[len] = 0;
    double x = strtod(buf, &end);
    if (*end || !(x >= 0) || x > 9e12)
        return -1;
    *us = (int64_t)(x * 1e6 + 0.5);
    return 0;
}

static void set_count(rmm_st *s, const char *key, uint64_t v)
{
    char num[24];
    snprintf(num, sizeof num, "%" PRIu64, v);
    (void)as_meta_set(s->meta, key, num); /* out of memory here only loses a statistic */
}

/* A bad row: an error, or with lenient a counted skip (the first reason is kept in the
 * metadata, so a user sees why rows went missing). Returns < 0, or 1 for "skipped". */
static int bad_row(rmm_st *s, as_trace_error *err, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad_row(rmm_st *s, as_trace_error *err, const char *at, const char *fmt, ...)
{
    char m[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    if (!s->lenient)
        return fail_at(s, err, AS_EINVAL, at, "%s", m);
    if (s->warnings++ == 0) {
        char first[256];
        snprintf(first, sizeof first, "line %llu: %s", (unsigned long long)s->line, m);
        (void)as_meta_set(s->meta, "rmm.first_bad_row", first);
    }
    set_count(s, "rmm.bad_rows", s->warnings);
    return 1;
}

#define FIELD_TEXT(f) (int)((f)->e - (f)->b > 40 ? 40 : (f)->e - (f)->b), (f)->b

/* The row's time (time of day with midnight wraps, or cnmem's seconds) into *tp, and
 * cnmem's device, which must stay the same. 0 or < 0 (bad_row/fail_at). */
static int row_time(rmm_st *s, const field *f, int64_t *tp, as_trace_error *err)
{
    int64_t t = AS_TIME_NONE;
    if (s->col[C_TIME] >= 0) {
        const field *ft = &f[s->col[C_TIME]];
        int64_t us = 0; /* set by the parser on success (gcc -Og cannot see it) */
        if ((s->cnmem ? parse_secs(ft, &us) : parse_hms(ft, &us)) < 0)
            return bad_row(s, err, ft->b,
                           s->cnmem ? "bad time '%.*s' (expected seconds)"
                                    : "bad time '%.*s' (expected HH:MM:SS.ffffff)",
                           FIELD_TEXT(ft));
        if (!s->cnmem) {
            /* Wall-clock time of day: a jump back by more than 12 h is midnight. */
            if (s->last_time != AS_TIME_NONE && us + s->day * DAY_US < s->last_time - DAY_US / 2)
                s->day++;
            t = us + s->day * DAY_US;
        } else {
            t = us;
        }
        s->last_time = t;
    }
    if (s->cnmem && s->col[C_DEVICE] >= 0) {
        uint64_t dev;
        const field *fd = &f[s->col[C_DEVICE]];
        if (parse_dec(fd, &dev) < 0)
            return bad_row(s, err, fd->b, "bad device id '%.*s'", FIELD_TEXT(fd));
        if (s->cnmem_device < 0)
            s->cnmem_device = (int64_t)dev;
        else if ((uint64_t)s->cnmem_device != dev)
            return fail_at(s, err, AS_EINVAL, fd->b,
                           "device %llu after device %lld: one trace is one device (split the "
                           "log by Device ID)",
                           (unsigned long long)dev, (long long)s->cnmem_device);
    }
    *tp = t;
    return 0;
}

/* An allocate row at ptr (le: the live block already there, if any). 0 with ev filled, or
 * < 0. */
static int row_alloc(rmm_st *s, as_live_ent *le, uint64_t ptr, uint64_t size, uint64_t stream,
                     int64_t t, const field *fp, const field *fs, as_event *ev, as_trace_error *err)
{
    if (size == 0 || size > AS_MAX_ALLOC_SIZE)
        return bad_row(s, err, fs->b, "allocate of %" PRIu64 " bytes at 0x%" PRIx64, size, ptr);
    if (le) {
        int r = bad_row(s, err, fp->b,
                        "allocate at 0x%" PRIx64 ", which is still allocated (since an "
                        "earlier row; missing free?)",
                        ptr);
        if (r < 0)
            return r;
        /* lenient: the old block must have been freed without a log line */
        ev->op = AS_OP_FREE;
        ev->id = le->out_id;
        as_live_del(&s->ptrs, le);
        s->have_pending = 1;
        s->pending = (as_event){
            .op = AS_OP_ALLOC, .id = s->next_id++, .size = size, .stream = stream, .time_us = t};
        le = as_live_add(&s->ptrs, ptr);
        if (!le)
            return fail_at(s, err, AS_ENOMEM, NULL, "out of memory");
        le->out_id = s->pending.id;
        le->size = size;
        le->stream = stream;
        return 0;
    }
    le = as_live_add(&s->ptrs, ptr);
    if (!le)
        return fail_at(s, err, AS_ENOMEM, NULL, "out of memory");
    le->out_id = s->next_id;
    le->size = size;
    le->stream = stream;
    ev->op = AS_OP_ALLOC;
    ev->id = s->next_id++;
    ev->size = size;
    ev->stream = stream;
    return 0;
}

/* Parses the current row into ev. 0 = an event, 1 = nothing to emit (skipped), < 0. */
static int parse_row(rmm_st *s, as_event *ev, as_trace_error *err)
{
    field f[RMM_MAX_FIELDS];
    const char *b = s->ln.p, *e = s->ln.p + s->ln.len;
    int n = split(b, e, f, RMM_MAX_FIELDS);
    if (n < 0) /* more fields than split keeps: count the commas for the message */
        return bad_row(s, err, b, "%zu fields, the header has %d", count_fields(b, e), s->ncols);
    if (n < s->ncols)
        return bad_row(s, err, e, "%d fields, the header has %d", n, s->ncols);
    if (n > s->ncols)
        return bad_row(s, err, f[s->ncols].b, "%d fields, the header has %d", n, s->ncols);
    const field *fa = &f[s->col[C_ACTION]], *fp = &f[s->col[C_POINTER]];
    const field *fs = &f[s->col[C_SIZE]];
    enum { ALLOCATE, FAILURE, FREE } act;
    if (field_is(fa, "allocate") || (s->cnmem && field_is(fa, "Alloc")))
        act = ALLOCATE;
    else if (field_is(fa, "allocate failure"))
        act = FAILURE;
    else if (field_is(fa, "free") || field_is(fa, "deallocate") ||
             (s->cnmem && field_is(fa, "Free")))
        act = FREE;
    else
        return bad_row(s, err, fa->b,
                       "unknown action '%.*s' (expected allocate, allocate failure or free)",
                       FIELD_TEXT(fa));
    uint64_t ptr, size, stream = 0;
    if (parse_ptr(fp, &ptr) < 0 || ptr == UINT64_MAX)
        return bad_row(s, err, fp->b, "bad pointer '%.*s' (expected hex like 0x7f00a0000000)",
                       FIELD_TEXT(fp));
    if (parse_dec(fs, &size) < 0)
        return bad_row(s, err, fs->b, "bad size '%.*s' (expected decimal bytes)", FIELD_TEXT(fs));
    if (s->col[C_STREAM] >= 0) {
        const field *fst = &f[s->col[C_STREAM]];
        if (parse_ptr(fst, &stream) < 0)
            return bad_row(s, err, fst->b, "bad stream '%.*s' (expected a pointer like 0x0)",
                           FIELD_TEXT(fst));
    }
    int64_t t = AS_TIME_NONE;
    int rc = row_time(s, f, &t, err);
    if (rc)
        return rc;
    ev->time_us = t;
    if (act == FAILURE || (act == ALLOCATE && ptr == 0 && size > 0)) {
        /* The real allocator could not serve this request: keep where it happened. */
        s->failures++;
        set_count(s, "rmm.allocate_failures", s->failures);
        ev->op = AS_OP_MARK;
        snprintf(s->label, sizeof s->label,
                 "rmm: allocate failure size=%" PRIu64 " stream=0x%" PRIx64, size, stream);
        ev->label = s->label;
        return 0;
    }
    if (ptr == 0) { /* allocate(0) and free(nullptr): legal no-ops */
        s->null_rows++;
        set_count(s, "rmm.null_pointer_rows", s->null_rows);
        return 1;
    }
    as_live_ent *le = as_live_get(&s->ptrs, ptr);
    if (act == ALLOCATE)
        return row_alloc(s, le, ptr, size, stream, t, fp, fs, ev, err);
    /* free */
    if (!le)
        return bad_row(s, err, fp->b, "free of 0x%" PRIx64 ", which is not allocated", ptr);
    /* cnmem wrote 0 as the size of a free; RMM writes the size given to deallocate, which
     * must be the allocation's */
    if (size != le->size && !(s->cnmem && size == 0)) {
        int r = bad_row(s, err, fs->b,
                        "free of 0x%" PRIx64 " with size %" PRIu64 ", allocated with %" PRIu64, ptr,
                        size, le->size);
        if (r < 0)
            return r;
    }
    ev->op = AS_OP_FREE;
    ev->id = le->out_id;
    as_live_del(&s->ptrs, le);
    return 0;
}

static int rmm_next(void *stp, as_event *ev, as_trace_error *err)
{
    rmm_st *s = stp;
    if (s->have_pending) {
        s->have_pending = 0;
        *ev = s->pending;
        return 0;
    }
    for (;;) {
        int rc = peek_line(s, err);
        if (rc)
            return rc;
        const char *p = s->ln.p, *e = s->ln.p + s->ln.len;
        while (p < e && isspace((unsigned char)*p))
            p++;
        if (p == e) { /* blank line */
            consume_line(s);
            continue;
        }
        as_instream_mark_event(s->in, s->ln.off, s->line);
        memset(ev, 0, sizeof *ev);
        ev->time_us = AS_TIME_NONE;
        rc = parse_row(s, ev, err);
        if (rc < 0)
            return rc;
        s->rows++;
        consume_line(s);
        if (rc == 0)
            return 0;
    }
}

static uint64_t rmm_warnings(const void *st)
{
    return ((const rmm_st *)st)->warnings;
}

static void rmm_close(void *stp)
{
    rmm_st *s = stp;
    if (!s)
        return;
    as_live_free(&s->ptrs);
    free(s);
}

const as_source_ops as_src_rmm = {
    .name = "rmm",
    .fmt = AS_FMT_RMM_CSV,
    .probe = rmm_probe,
    .open = rmm_open,
    .next = rmm_next,
    .warnings = rmm_warnings,
    .close = rmm_close,
};
