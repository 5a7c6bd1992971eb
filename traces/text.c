/*
 * text.c - the allocsim text format: one event per line, easy to write by hand, carrying
 * everything the native format does (lossless both ways). Syntax in traces/FORMAT.md:
 *
 *   allocsim-text 1
 *   meta KEY=VALUE
 *   alloc ID SIZE [s=STREAM] [t=TIME_US]
 *   free ID [t=TIME_US]       free_req ID [t=TIME_US]       empty_cache [t=TIME_US]
 *   mark LABEL TEXT TO END OF LINE
 *
 * A '#' at the start of a line or after a blank starts a comment. Meta values and labels
 * use backslash escapes (\\ \# \n \r \t \xHH), so any byte string survives a round trip.
 * Invariant: the decoder consumes a line only once it has parsed it, so every error names
 * the line and the byte offset of the offending token.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_internal.h"

#define TEXT_MAGIC "allocsim-text"
#define TEXT_VERSION 2 /* readable: 1, 2; written: 2 when there are sites, else 1 */
#define TEXT_MAX_LINE (64u << 10)

typedef struct text_st {
    as_instream *in;
    uint64_t line; /* 1-based number of the line being parsed */
    int seen_event;
    char label[AS_MAX_LABEL + 1];
    as_inline ln; /* the current line (peeked, not yet consumed) */
    unsigned version;
    as_sites *sites; /* version 2: the frame and site lines of the header */
    uint32_t npools; /* the metadata's `pools`: an ALLOC's pool= is 0..npools */
} text_st;

/* ---- lexing ----------------------------------------------------------------------- */

static int fail_at(text_st *s, as_trace_error *err, int code, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int fail_at(text_st *s, as_trace_error *err, int code, const char *at, const char *fmt, ...)
{
    const as_trace_error *se = as_instream_error(s->in);
    if (se) {
        if (err)
            *err = *se;
        return se->code;
    }
    uint64_t off = s->ln.off + (at ? (uint64_t)(at - s->ln.p) : 0);
    char m[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    return as_trace_set_error(err, code, as_instream_path(s->in), off, s->line, "%s", m);
}

/* Peeks the next line (without consuming it). 0, AS_TRACE_EOF, or < 0. */
static int peek_line(text_st *s, as_trace_error *err)
{
    int rc = as_instream_next_line(s->in, TEXT_MAX_LINE, 0, &s->ln, &s->line, err);
    if (rc == AS_INLINE_TOO_LONG)
        return fail_at(s, err, AS_ECORRUPT, NULL, "line longer than %u bytes", TEXT_MAX_LINE);
    if (rc == AS_INLINE_NUL)
        return fail_at(s, err, AS_ECORRUPT, s->ln.nul, "NUL byte in a text trace");
    return rc;
}

static void consume_line(text_st *s)
{
    as_instream_skip(s->in, s->ln.consume);
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The meaningful part of the current line: comment stripped, blanks trimmed. */
static void line_body(const text_st *s, const char **b, const char **e)
{
    const char *p = s->ln.p, *end = s->ln.p + s->ln.len;
    for (const char *q = p; q < end; q++) {
        if (*q == '\\' && q + 1 < end) {
            q++;
            continue;
        }
        if (*q == '#' && (q == p || is_blank(q[-1]))) {
            end = q;
            break;
        }
    }
    while (p < end && is_blank(*p))
        p++;
    while (end > p && (is_blank(end[-1]) || end[-1] == '\r'))
        end--;
    *b = p;
    *e = end;
}

/* Next blank-separated token in [*p, e). */
static int next_tok(const char **p, const char *e, const char **tb, const char **te)
{
    const char *q = *p;
    while (q < e && is_blank(*q))
        q++;
    if (q == e)
        return 0;
    *tb = q;
    while (q < e && !is_blank(*q))
        q++;
    *te = q;
    *p = q;
    return 1;
}

static int tok_is(const char *b, const char *e, const char *word)
{
    size_t n = strlen(word);
    return (size_t)(e - b) == n && memcmp(b, word, n) == 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Unsigned integer, decimal or (hex_ok) 0x hex. Returns 0 or -1; *end is the first byte
 * not used. */
static int parse_u64(const char *b, const char *e, int hex_ok, uint64_t *v, const char **end)
{
    uint64_t x = 0;
    const char *p = b;
    if (hex_ok && e - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        p += 2;
        const char *d0 = p;
        for (; p < e && hexval(*p) >= 0; p++) {
            if (x >> 60)
                return -1;
            x = x << 4 | (uint64_t)hexval(*p);
        }
        if (p == d0)
            return -1;
    } else {
        const char *d0 = p;
        for (; p < e && *p >= '0' && *p <= '9'; p++) {
            uint64_t d = (uint64_t)(*p - '0');
            if (x > (UINT64_MAX - d) / 10)
                return -1;
            x = x * 10 + d;
        }
        if (p == d0)
            return -1;
    }
    *v = x;
    *end = p;
    return 0;
}

static int parse_exact_u64(const char *b, const char *e, int hex_ok, uint64_t *v)
{
    const char *end = NULL;
    return parse_u64(b, e, hex_ok, v, &end) == 0 && end == e ? 0 : -1;
}

static int parse_i64(const char *b, const char *e, int64_t *v)
{
    int neg = b < e && *b == '-';
    uint64_t x;
    if (parse_exact_u64(b + neg, e, 0, &x) < 0)
        return -1;
    if (neg ? x > (uint64_t)INT64_MAX + 1 : x > (uint64_t)INT64_MAX)
        return -1;
    *v = neg ? (int64_t)(0 - x) : (int64_t)x;
    return 0;
}

/* SIZE: bytes, or with a unit (as_parse_size: 2M = 2 MiB, 2MB = 2,000,000). 0 or -1. */
static int parse_size(const char *b, const char *e, uint64_t *v)
{
    return as_parse_size(b, (size_t)(e - b), v);
}

/* Undoes the writer's escapes into dst (cap bytes incl. NUL). Returns the length, or -1
 * with *bad at the offending byte (or -2 when too long). */
static long unescape(const char *b, const char *e, char *dst, size_t cap, const char **bad)
{
    size_t n = 0;
    for (const char *p = b; p < e; p++) {
        char c = *p;
        if (c == '\\') {
            *bad = p;
            if (++p == e)
                return -1;
            switch (*p) {
            case '\\':
            case '#':
                c = *p;
                break;
            case 'n':
                c = '\n';
                break;
            case 'r':
                c = '\r';
                break;
            case 't':
                c = '\t';
                break;
            case '-': /* the empty string, written as a token of its own */
                *bad = NULL;
                continue;
            case 'x': {
                if (e - p < 3 || hexval(p[1]) < 0 || hexval(p[2]) < 0)
                    return -1;
                c = (char)(hexval(p[1]) << 4 | hexval(p[2]));
                if (!c)
                    return -1;
                p += 2;
                break;
            }
            default:
                return -1;
            }
        }
        if (n + 1 >= cap) {
            *bad = p;
            return -2;
        }
        dst[n++] = c;
    }
    dst[n] = 0;
    return (long)n;
}

/* ---- decoding --------------------------------------------------------------------- */

/* A UTF-8 byte order mark, which some editors put at the start of a file: skipped. */
static size_t bom_len(const void *p, size_t n)
{
    return n >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
}

static int text_probe(const uint8_t *head, size_t n)
{
    size_t m = sizeof TEXT_MAGIC - 1, b = bom_len(head, n);
    return n > b + m && memcmp(head + b, TEXT_MAGIC, m) == 0 && is_blank((char)head[b + m]);
}

static int parse_meta(text_st *s, as_meta *meta, const char *p, const char *e, as_trace_error *err)
{
    while (p < e && is_blank(*p))
        p++;
    const char *eq = memchr(p, '=', (size_t)(e - p));
    if (!eq)
        return fail_at(s, err, AS_ECORRUPT, p, "meta needs KEY=VALUE");
    char key[128];
    if ((size_t)(eq - p) >= sizeof key)
        return fail_at(s, err, AS_ECORRUPT, p, "meta key too long");
    memcpy(key, p, (size_t)(eq - p));
    key[eq - p] = 0;
    if (!as_meta_key_ok(key))
        return fail_at(s, err, AS_ECORRUPT, p,
                       "bad meta key '%s' (allowed: letters, digits, _ . -)", key);
    if (meta->n >= 4096 && !as_meta_get(meta, key))
        return fail_at(s, err, AS_ECORRUPT, p, "more than 4096 metadata keys");
    size_t cap = (size_t)(e - eq);
    char *val = malloc(cap);
    if (!val)
        return fail_at(s, err, AS_ENOMEM, p, "out of memory");
    const char *bad = NULL;
    int rc = 0;
    if (unescape(eq + 1, e, val, cap, &bad) < 0)
        rc = fail_at(s, err, AS_ECORRUPT, bad, "bad escape in meta value");
    else if (as_meta_set(meta, key, val) < 0)
        rc = fail_at(s, err, AS_ENOMEM, p, "out of memory");
    free(val);
    return rc;
}

/* One escaped token into dst (cap bytes): 0, or < 0 with err filled. */
static int token_str(text_st *s, const char *tb, const char *te, char *dst, size_t cap,
                     const char *what, as_trace_error *err)
{
    const char *bad = NULL;
    long n = unescape(tb, te, dst, cap, &bad);
    if (n == -2)
        return fail_at(s, err, AS_ECORRUPT, bad, "%s longer than %d bytes", what,
                       (int)cap - 1);
    if (n < 0)
        return fail_at(s, err, AS_ECORRUPT, bad, "bad escape in %s", what);
    return 0;
}

/* frame ID LINE FILE NAME: frame ID (0, 1, ... in order) of the site table. */
static int parse_frame(text_st *s, const char *p, const char *e, as_trace_error *err)
{
    const char *tb, *te, *ib;
    uint64_t id, line;
    char file[AS_MAX_FRAME_STR + 1], name[AS_MAX_FRAME_STR + 1];
    int rc;
    if (!next_tok(&p, e, &tb, &te) || parse_exact_u64(tb, te, 0, &id) < 0)
        return fail_at(s, err, AS_ECORRUPT, p, "frame needs an id (decimal)");
    ib = tb;
    if (id != as_sites_nframes(s->sites))
        return fail_at(s, err, AS_ECORRUPT, ib, "frame %llu out of order (expected %u)",
                       (unsigned long long)id, as_sites_nframes(s->sites));
    if (!next_tok(&p, e, &tb, &te) || parse_exact_u64(tb, te, 0, &line) < 0 || line > UINT32_MAX)
        return fail_at(s, err, AS_ECORRUPT, p, "frame needs a line number (decimal)");
    if (!next_tok(&p, e, &tb, &te))
        return fail_at(s, err, AS_ECORRUPT, p, "frame needs a file name");
    if ((rc = token_str(s, tb, te, file, sizeof file, "frame file name", err)) < 0)
        return rc;
    if (!next_tok(&p, e, &tb, &te))
        return fail_at(s, err, AS_ECORRUPT, p, "frame needs a function name");
    if ((rc = token_str(s, tb, te, name, sizeof name, "frame function name", err)) < 0)
        return rc;
    if (next_tok(&p, e, &tb, &te))
        return fail_at(s, err, AS_ECORRUPT, tb, "unexpected text after the frame");
    uint32_t fid;
    if (as_sites_intern_frame(s->sites, &(as_frame){file, name, (uint32_t)line}, &fid) < 0)
        return fail_at(s, err, AS_ENOMEM, ib, "out of memory for the site table");
    if (fid != id)
        return fail_at(s, err, AS_ECORRUPT, ib, "frame %llu repeats frame %u",
                       (unsigned long long)id, fid);
    return 0;
}

/* site ID FRAME...: site ID (1, 2, ... in order), its frames innermost first. */
static int parse_site(text_st *s, const char *p, const char *e, as_trace_error *err)
{
    const char *tb, *te, *ib;
    uint64_t id, f;
    uint32_t ids[AS_MAX_STACK], got;
    size_t n = 0;
    if (!next_tok(&p, e, &tb, &te) || parse_exact_u64(tb, te, 0, &id) < 0)
        return fail_at(s, err, AS_ECORRUPT, p, "site needs an id (decimal)");
    ib = tb;
    if (id != (uint64_t)as_sites_count(s->sites) + 1)
        return fail_at(s, err, AS_ECORRUPT, ib, "site %llu out of order (expected %u)",
                       (unsigned long long)id, as_sites_count(s->sites) + 1);
    while (next_tok(&p, e, &tb, &te)) {
        if (parse_exact_u64(tb, te, 0, &f) < 0 || f >= as_sites_nframes(s->sites))
            return fail_at(s, err, AS_ECORRUPT, tb, "not a frame id defined above");
        if (n == AS_MAX_STACK)
            return fail_at(s, err, AS_ECORRUPT, tb, "more than %d frames in a site",
                           AS_MAX_STACK);
        ids[n++] = (uint32_t)f;
    }
    if (!n)
        return fail_at(s, err, AS_ECORRUPT, p, "site needs at least one frame id");
    if (as_sites_intern_ids(s->sites, ids, n, &got) < 0)
        return fail_at(s, err, AS_ENOMEM, ib, "out of memory for the site table");
    if (got != id)
        return fail_at(s, err, AS_ECORRUPT, ib, "site %llu repeats site %u",
                       (unsigned long long)id, got);
    return 0;
}

static int text_open(as_instream *in, const as_reader_opts *opts, as_meta *meta, void **stp,
                     as_trace_error *err)
{
    (void)opts;
    *stp = NULL;
    text_st *s = calloc(1, sizeof *s);
    if (!s)
        return as_instream_fail(in, err, AS_ENOMEM, "out of memory");
    s->in = in;
    int rc = peek_line(s, err);
    if (rc)
        goto bad;
    const char *p, *e, *tb, *te;
    line_body(s, &p, &e);
    p += bom_len(p, (size_t)(e - p));
    if (!next_tok(&p, e, &tb, &te) || !tok_is(tb, te, TEXT_MAGIC)) {
        rc = fail_at(s, err, AS_EFORMAT, tb, "not an allocsim text trace");
        goto bad;
    }
    uint64_t ver = 0;
    if (!next_tok(&p, e, &tb, &te)) {
        rc = fail_at(s, err, AS_EFORMAT, tb, "missing version after '%s'", TEXT_MAGIC);
        goto bad;
    }
    if (parse_exact_u64(tb, te, 0, &ver) < 0) {
        const char *d = tb;
        while (d < te && *d >= '0' && *d <= '9')
            d++;
        if (d == te) /* all digits: too many of them */
            rc = fail_at(s, err, AS_EFORMAT, tb,
                         "text format version %.*s%s is out of range (this build reads %d)",
                         (int)(te - tb > 24 ? 24 : te - tb), tb, te - tb > 24 ? "..." : "",
                         TEXT_VERSION);
        else
            rc = fail_at(s, err, AS_EFORMAT, tb,
                         "the text format version after '%s' is not a number", TEXT_MAGIC);
        goto bad;
    }
    if (ver != 1 && ver != TEXT_VERSION) {
        rc = fail_at(s, err, AS_EFORMAT, tb,
                     "unsupported text format version %llu (this build reads 1 and %d)",
                     (unsigned long long)ver, TEXT_VERSION);
        goto bad;
    }
    s->version = (unsigned)ver;
    if (as_sites_new(&s->sites) < 0) {
        rc = fail_at(s, err, AS_ENOMEM, tb, "out of memory");
        goto bad;
    }
    if (next_tok(&p, e, &tb, &te)) {
        rc = fail_at(s, err, AS_EFORMAT, tb, "unexpected text after the version");
        goto bad;
    }
    consume_line(s);
    /* Header metadata: every meta line before the first event. */
    for (;;) {
        rc = peek_line(s, err);
        if (rc == AS_TRACE_EOF)
            break;
        if (rc < 0)
            goto bad;
        line_body(s, &p, &e);
        if (!next_tok(&p, e, &tb, &te)) {
            consume_line(s);
            continue;
        }
        int fr = tok_is(tb, te, "frame"), si = tok_is(tb, te, "site");
        if (!tok_is(tb, te, "meta") && !((fr || si) && s->version >= 2)) {
            s->line--; /* next() peeks this line again */
            break;
        }
        rc = fr   ? parse_frame(s, p, e, err)
             : si ? parse_site(s, p, e, err)
                  : parse_meta(s, meta, p, e, err);
        if (rc < 0)
            goto bad;
        consume_line(s);
    }
    const char *np = as_meta_get(meta, "pools");
    if (np) {
        char *end;
        unsigned long long v = strtoull(np, &end, 10);
        if (*np < '0' || *np > '9' || *end || v > 65535) {
            rc = fail_at(s, err, AS_ECORRUPT, NULL, "meta pools=%s is not a pool count (0..65535)",
                         np);
            goto bad;
        }
        s->npools = (uint32_t)v;
    }
    *stp = s;
    return 0;
bad:
    as_sites_free(s->sites);
    free(s);
    return rc < 0 ? rc : AS_EFORMAT;
}

/* Optional trailing "s=STREAM" / "t=TIME_US" parameters; allow_stream 1 (an alloc) takes
 * s=, site= and pool= too, 2 (an empty_cache) pool= alone. */
static int parse_params(text_st *s, const char *p, const char *e, int allow_stream, as_event *ev,
                        as_trace_error *err)
{
    const char *tb, *te;
    int seen_s = 0, seen_t = 0, seen_k = 0, seen_p = 0, allow_pool = allow_stream != 0;
    allow_stream = allow_stream == 1;
    while (next_tok(&p, e, &tb, &te)) {
        if (te - tb > 5 && memcmp(tb, "pool=", 5) == 0 && allow_pool && !seen_p) {
            uint64_t k;
            if (parse_exact_u64(tb + 5, te, 0, &k) < 0 || k > s->npools)
                return fail_at(s, err, AS_ECORRUPT, tb + 5,
                               "pool %.*s is not in the pool table (meta pools=%u)",
                               (int)(te - tb - 5 > 20 ? 20 : te - tb - 5), tb + 5, s->npools);
            ev->pool = (uint32_t)k;
            seen_p = 1;
            continue;
        }
        if (te - tb > 5 && memcmp(tb, "site=", 5) == 0 && allow_stream && !seen_k) {
            uint64_t k;
            if (parse_exact_u64(tb + 5, te, 0, &k) < 0 || k > as_sites_count(s->sites))
                return fail_at(s, err, AS_ECORRUPT, tb + 5,
                               "site %.*s is not in the site table (%u sites)",
                               (int)(te - tb - 5 > 20 ? 20 : te - tb - 5), tb + 5,
                               as_sites_count(s->sites));
            ev->site = (uint32_t)k;
            seen_k = 1;
        } else if (te - tb > 2 && tb[0] == 's' && tb[1] == '=' && allow_stream && !seen_s) {
            if (parse_exact_u64(tb + 2, te, 1, &ev->stream) < 0)
                return fail_at(s, err, AS_ECORRUPT, tb + 2, "bad stream (decimal or 0x hex)");
            seen_s = 1;
        } else if (te - tb > 2 && tb[0] == 't' && tb[1] == '=' && !seen_t) {
            if (parse_i64(tb + 2, te, &ev->time_us) < 0 || ev->time_us == AS_TIME_NONE)
                return fail_at(s, err, AS_ECORRUPT, tb + 2,
                               "bad time (signed decimal microseconds)");
            seen_t = 1;
        } else {
            return fail_at(s, err, AS_ECORRUPT, tb, "unexpected '%.*s'",
                           (int)(te - tb > 40 ? 40 : te - tb), tb);
        }
    }
    return 0;
}

static int text_next(void *stp, as_event *ev, as_trace_error *err)
{
    text_st *s = stp;
    const char *p, *e, *tb, *te;
    for (;;) {
        int rc = peek_line(s, err);
        if (rc)
            return rc;
        line_body(s, &p, &e);
        if (next_tok(&p, e, &tb, &te))
            break;
        consume_line(s);
    }
    as_instream_mark_event(s->in, s->ln.off + (uint64_t)(tb - s->ln.p), s->line);
    ev->id = ev->size = ev->stream = 0;
    ev->site = 0;
    ev->time_us = AS_TIME_NONE;
    ev->label = NULL;
    const char *kw = tb;
    int rc;
    if (tok_is(tb, te, "alloc")) {
        ev->op = AS_OP_ALLOC;
        if (!next_tok(&p, e, &tb, &te) || parse_exact_u64(tb, te, 0, &ev->id) < 0)
            return fail_at(s, err, AS_ECORRUPT, tb == kw ? te : tb, "alloc needs an id (decimal)");
        if (!next_tok(&p, e, &tb, &te) || parse_size(tb, te, &ev->size) < 0)
            return fail_at(s, err, AS_ECORRUPT, tb,
                           "alloc needs a size (bytes, or with K/M/G/T or KiB/MiB/GiB/TiB)");
        rc = parse_params(s, p, e, 1, ev, err);
    } else if (tok_is(tb, te, "free") || tok_is(tb, te, "free_req")) {
        ev->op = te - tb == 4 ? AS_OP_FREE : AS_OP_FREE_REQ;
        if (!next_tok(&p, e, &tb, &te) || parse_exact_u64(tb, te, 0, &ev->id) < 0)
            return fail_at(s, err, AS_ECORRUPT, tb == kw ? te : tb, "%s needs an id (decimal)",
                           ev->op == AS_OP_FREE ? "free" : "free_req");
        rc = parse_params(s, p, e, 0, ev, err);
    } else if (tok_is(tb, te, "empty_cache")) {
        ev->op = AS_OP_EMPTY_CACHE;
        rc = parse_params(s, p, e, 2, ev, err);
    } else if (tok_is(tb, te, "mark")) {
        ev->op = AS_OP_MARK;
        /* A trailing " t=TIME" is the mark's time; the writer escapes the blank of a label
         * that happens to end that way, so this is unambiguous. */
        const char *q = e;
        while (q > p && !is_blank(q[-1]))
            q--;
        if (q > p && e - q > 2 && q[0] == 't' && q[1] == '=' &&
            parse_i64(q + 2, e, &ev->time_us) == 0) {
            if (ev->time_us == AS_TIME_NONE)
                return fail_at(s, err, AS_ECORRUPT, q + 2, "bad time");
            e = q;
            while (e > p && is_blank(e[-1]))
                e--;
        }
        while (p < e && is_blank(*p))
            p++; /* blanks that belong to the label are escaped by the writer */
        const char *bad = NULL;
        long n = unescape(p, e, s->label, sizeof s->label, &bad);
        if (n == -2)
            return fail_at(s, err, AS_ECORRUPT, bad, "mark label longer than %d bytes",
                           AS_MAX_LABEL);
        if (n < 0)
            return fail_at(s, err, AS_ECORRUPT, bad, "bad escape in mark label");
        ev->label = s->label;
        rc = 0;
    } else if (tok_is(tb, te, "meta") || tok_is(tb, te, "frame") || tok_is(tb, te, "site")) {
        if (s->version < 2 && *tb != 'm')
            return fail_at(s, err, AS_ECORRUPT, tb,
                           "frame and site lines need text format version 2");
        return fail_at(s, err, AS_ECORRUPT, tb,
                       "%.*s after the first event (it belongs in the header)", (int)(te - tb), tb);
    } else {
        return fail_at(s, err, AS_ECORRUPT, tb,
                       "unknown record '%.*s' (expected alloc, free, free_req, empty_cache, "
                       "mark or meta)",
                       (int)(te - tb > 32 ? 32 : te - tb), tb);
    }
    if (rc < 0)
        return rc;
    s->seen_event = 1;
    consume_line(s);
    return 0;
}

static void text_close(void *st)
{
    text_st *s = st;
    if (s)
        as_sites_free(s->sites);
    free(s);
}

static const as_sites *text_sites(const void *st)
{
    return ((const text_st *)st)->sites;
}

const as_source_ops as_src_text = {
    .name = "text",
    .fmt = AS_FMT_TEXT,
    .probe = text_probe,
    .open = text_open,
    .next = text_next,
    .warnings = NULL,
    .close = text_close,
    .sites = text_sites,
};

/* ---- writing ---------------------------------------------------------------------- */

typedef struct text_w {
    as_outfile *o;
    char buf[64];
} text_w;

static char *put_u64(char *p, uint64_t v)
{
    char t[24];
    int n = 0;
    do {
        t[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = t[--n];
    return p;
}

static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

/* Escapes s so that the reader gives it back byte for byte; the byte at force (if any) is
 * written as \xHH. dst must hold 4*len+1. */
static size_t escape(const char *s, char *dst, size_t force)
{
    static const char hx[] = "0123456789abcdef";
    size_t n = strlen(s), k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int edge_blank = ((c == ' ' || c == '\t') && (i == 0 || i + 1 == n)) || i == force;
        if (c == '\\' || c == '#') {
            dst[k++] = '\\';
            dst[k++] = (char)c;
        } else if (c == '\n') {
            dst[k++] = '\\';
            dst[k++] = 'n';
        } else if (c == '\r') {
            dst[k++] = '\\';
            dst[k++] = 'r';
        } else if (c < 0x20 || c == 0x7f || edge_blank) {
            dst[k++] = '\\';
            dst[k++] = 'x';
            dst[k++] = hx[c >> 4];
            dst[k++] = hx[c & 15];
        } else {
            dst[k++] = (char)c;
        }
    }
    dst[k] = 0;
    return k;
}

/* A frame's string as one token: escaped, blanks included; the empty string as \-. */
static char *put_token(char *p, const char *str)
{
    if (!*str)
        return put_str(p, "\\-");
    char *q = p;
    p += escape(str, p, SIZE_MAX);
    for (char *r = q; r < p; r++) /* inner blanks too: a token has none */
        if (*r == ' ' || *r == '\t') {
            char c = *r;
            memmove(r + 4, r + 1, (size_t)(p - r - 1));
            memcpy(r, c == ' ' ? "\\x20" : "\\x09", 4);
            p += 3;
            r += 3;
        }
    return p;
}

/* Version 2's header lines: every frame, then every site (FORMAT.md). */
static int put_sites(as_outfile *o, const as_sites *sites, as_trace_error *err)
{
    char *line = malloc(64 + 2 * 4 * (size_t)(AS_MAX_FRAME_STR + 1) * 2);
    int rc = 0;
    if (!line)
        return as_trace_set_error(err, AS_ENOMEM, o->path, UINT64_MAX, 0, "out of memory");
    for (uint32_t f = 0; rc == 0 && f < as_sites_nframes(sites); f++) {
        as_frame fr;
        as_sites_frame(sites, f, &fr);
        char *p = put_str(line, "frame ");
        p = put_u64(p, f);
        *p++ = ' ';
        p = put_u64(p, fr.line);
        *p++ = ' ';
        p = put_token(p, fr.filename);
        *p++ = ' ';
        p = put_token(p, fr.name);
        *p++ = '\n';
        rc = as_outfile_write(o, line, (size_t)(p - line), err);
    }
    for (uint32_t k = 1; rc == 0 && k <= as_sites_count(sites); k++) {
        const uint32_t *ids;
        size_t n = as_sites_stack(sites, k, &ids);
        char head[40];
        int hl = snprintf(head, sizeof head, "site %u", k);
        rc = as_outfile_write(o, head, (size_t)hl, err);
        for (size_t i = 0; rc == 0 && i < n; i++) {
            char t[16];
            t[0] = ' ';
            char *e = put_u64(t + 1, ids[i]);
            rc = as_outfile_write(o, t, (size_t)(e - t), err);
        }
        if (rc == 0)
            rc = as_outfile_write(o, "\n", 1, err);
    }
    free(line);
    return rc;
}

static int text_w_open(as_outfile *o, const as_meta *meta, const as_sites *sites, void **stp,
                       as_trace_error *err)
{
    *stp = NULL;
    text_w *w = calloc(1, sizeof *w);
    if (!w)
        return as_trace_set_error(err, AS_ENOMEM, o->path, UINT64_MAX, 0, "out of memory");
    w->o = o;
    /* Version 1 when there is no site table: such a file reads in older builds too. */
    int v2 = as_sites_count(sites) > 0;
    const char *head = v2 ? TEXT_MAGIC " 2\n" : TEXT_MAGIC " 1\n";
    int rc = as_outfile_write(o, head, strlen(head), err);
    for (size_t i = 0; rc == 0 && meta && i < meta->n; i++) {
        const char *v = meta->kv[i].value;
        size_t klen = strlen(meta->kv[i].key);
        char *line = malloc(klen + 4 * strlen(v) + 8);
        if (!line) {
            rc = as_trace_set_error(err, AS_ENOMEM, o->path, UINT64_MAX, 0, "out of memory");
            break;
        }
        char *p = put_str(line, "meta ");
        p = put_str(p, meta->kv[i].key);
        *p++ = '=';
        p += escape(v, p, SIZE_MAX);
        *p++ = '\n';
        rc = as_outfile_write(o, line, (size_t)(p - line), err);
        free(line);
    }
    if (rc == 0 && v2)
        rc = put_sites(o, sites, err);
    if (rc < 0) {
        free(w);
        return rc;
    }
    *stp = w;
    return 0;
}

static char *put_time(char *p, int64_t t)
{
    if (t == AS_TIME_NONE)
        return p;
    p = put_str(p, " t=");
    if (t < 0) {
        *p++ = '-';
        return put_u64(p, 0 - (uint64_t)t);
    }
    return put_u64(p, (uint64_t)t);
}

/* Where a label ends in "<blank>t=<integer>", the index of that blank (which the writer
 * escapes so the reader does not take it for the mark's time), else SIZE_MAX. */
static size_t label_time_blank(const char *l)
{
    size_t n = strlen(l), i = n;
    while (i > 0 && l[i - 1] >= '0' && l[i - 1] <= '9')
        i--;
    if (i == n)
        return SIZE_MAX;
    if (i > 0 && l[i - 1] == '-')
        i--;
    if (i < 2 || l[i - 1] != '=' || l[i - 2] != 't')
        return SIZE_MAX;
    if (i == 2)
        return 0; /* the whole label is "t=N": escape its 't' */
    if (l[i - 3] == ' ' || l[i - 3] == '\t')
        return i - 3;
    return SIZE_MAX;
}

static int text_w_write(void *stp, const as_event *ev, as_trace_error *err)
{
    text_w *w = stp;
    char line[32 + 4 * AS_MAX_LABEL + 96];
    char *p = line;
    switch (ev->op) {
    case AS_OP_ALLOC:
        p = put_str(p, "alloc ");
        p = put_u64(p, ev->id);
        *p++ = ' ';
        p = put_u64(p, ev->size);
        if (ev->stream)
            p += sprintf(p, " s=0x%llx", (unsigned long long)ev->stream);
        if (ev->site) {
            p = put_str(p, " site=");
            p = put_u64(p, ev->site);
        }
        if (ev->pool) {
            p = put_str(p, " pool=");
            p = put_u64(p, ev->pool);
        }
        break;
    case AS_OP_FREE:
    case AS_OP_FREE_REQ:
        p = put_str(p, ev->op == AS_OP_FREE ? "free " : "free_req ");
        p = put_u64(p, ev->id);
        break;
    case AS_OP_EMPTY_CACHE:
        p = put_str(p, "empty_cache");
        if (ev->pool) {
            p = put_str(p, " pool=");
            p = put_u64(p, ev->pool);
        }
        break;
    case AS_OP_MARK:
        p = put_str(p, "mark ");
        p += escape(ev->label, p, label_time_blank(ev->label));
        break;
    }
    p = put_time(p, ev->time_us);
    *p++ = '\n';
    return as_outfile_write(w->o, line, (size_t)(p - line), err);
}

static int text_w_close(void *st, as_trace_error *err)
{
    (void)err;
    free(st);
    return 0;
}

const as_format_writer as_text_writer = {
    .open = text_w_open,
    .write = text_w_write,
    .close = text_w_close,
};
