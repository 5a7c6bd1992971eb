/*
 * native.c - the allocsim native trace format (layout byte by byte in traces/FORMAT.md):
 * a zstd stream holding a header (magic, version, metadata) and blocks of events, each
 * block split into a structure column (one tag byte per event, varints) and a time column
 * (delta-coded), so that zstd finds the repeats of a training loop in the first and
 * entropy-codes the jitter of the second.
 *
 * Invariants: ids are never stored (an ALLOC's id is its ordinal; a free stores the
 * distance back, alloc_count - id); decoding holds one block in the input window and a
 * stream table, nothing proportional to the trace length. Every version ever written
 * stays readable: the header's version selects the block decoder.
 */
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "live.h"
#include "trace_internal.h"

static const uint8_t native_magic[8] = {0x8A, 'A', 'S', 'T', 0x0D, 0x0A, 0x1A, 0x0A};
#define NATIVE_VERSION 2 /* written; readable: 1, 2 */
/* Version 2's per-allocation columns (FORMAT.md): declared once in the header, then one
 * length per declared column in every block header. */
enum { COL_SITE = 1, COL_POOL = 2 };
#define MAX_POOLS 65535 /* private pools in a trace's pool table */
#define MAX_COLUMNS 16

/* Structure column tags: kind in the low 2 bits, argument v in the high 6. */
enum { K_ALLOC = 0, K_FREE = 1, K_FREE_REQ = 2, K_SPECIAL = 3 };
#define SIZE_SLOTS 60     /* ALLOC v < 60: size from the size cache slot v */
#define V_SIZE_LITERAL 60 /* ALLOC v = 60: varint size follows, cached at slot hash(size) */
#define V_FREE_FAR 63     /* FREE*: v < 63 means distance v + 1; 63: varint (d - 64) follows */
enum { S_EMPTY_CACHE = 0, S_MARK = 1, S_SET_STREAM = 2, S_NEW_STREAM = 3, S_POOL_EMPTY = 4 };
/* Time column: varint u per event (only in blocks where some event has a time). */
enum { T_NONE = 0, T_ABS = 1, T_DELTA0 = 2 };

#define BLOCK_EVENTS 16384          /* writer: events per block */
#define BLOCK_MAX_EVENTS (1u << 20) /* reader: limits against corrupt headers */
#define BLOCK_MAX_BYTES (32u << 20)
#define MAX_STREAMS AS_MAX_STREAMS /* trace.h: the same limit for every reader */
#define BATCH_MAX 4096
#define STACK_AHEAD 256 /* fast loop: room kept for new live slots in the validator's stack */
#define ZSTD_LEVEL 9
/* The fast loop's layout: the common case falls through, the rare ones are out of line. */
#define AS_LIKELY(x) __builtin_expect(!!(x), 1)
#define AS_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Slot of a size: the top 32 bits of a Fibonacci hash, scaled to 0..59 (a multiply and a
 * shift, no division). */
static inline unsigned size_slot(uint64_t size)
{
    return (unsigned)((((size * 0x9E3779B97F4A7C15ull) >> 32) * SIZE_SLOTS) >> 32);
}

static inline uint64_t zz_enc(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static inline int64_t zz_dec(uint64_t u)
{
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* ---- decoding --------------------------------------------------------------------- */

typedef struct native_st {
    as_instream *in;
    unsigned version;
    /* coding state, carried across blocks; slots 60..63 stay 0, so the fast loop reads the
     * slot of any ALLOC tag's argument without a test (60: a literal; 61..63: bad tags) */
    uint64_t size_cache[64];
    uint64_t *streams;
    size_t nstreams, streams_cap;
    uint64_t cur_stream;
    uint64_t nalloc, nevents;
    int64_t prev_time;
    /* current block: offsets into the input window, which stays put until we skip it */
    int in_block, ended;
    uint64_t block_off; /* stream offset of the block's first byte (its header) */
    size_t hdr_len, s_len, t_len, s_pos, t_pos;
    uint32_t nev, done;
    char label[AS_MAX_LABEL + 1];
    uint64_t last_off; /* offset of the last event decoded */
    /* version 2: the site table, the declared per-allocation columns, and the current
     * block's site column (COL_SITE) */
    as_sites *sites;
    unsigned ncols;
    int site_col; /* index of COL_SITE among the declared columns, or -1 */
    size_t col_len[MAX_COLUMNS], k_off, k_len, k_pos; /* k_off: from the block's S start */
    int pool_col; /* index of COL_POOL, or -1; its table is npools private pools */
    uint32_t npools;
    size_t p_off, p_len, p_pos;
} native_st;

static int native_probe(const uint8_t *head, size_t n)
{
    return n >= sizeof native_magic && memcmp(head, native_magic, sizeof native_magic) == 0;
}

/* Varint (LEB128, at most 10 bytes, no overlong forms). Returns bytes used or 0 when
 * malformed or cut short. */
static size_t varint_slow(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (size_t i = 0; i < 10 && p + i < end; i++) {
        uint64_t b = p[i];
        if (i == 9 && b > 1)
            return 0;
        x |= (b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            if (i > 0 && b == 0)
                return 0; /* overlong */
            *v = x;
            return i + 1;
        }
    }
    return 0;
}

/* The same when at least 10 bytes are readable: no bounds test per byte. */
static inline size_t varint_unbounded(const uint8_t *p, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < 10; i++) {
        uint64_t b = p[i];
        x |= (b & 0x7F) << (7 * i);
        if (b < 0x80) {
            if ((i > 0 && b == 0) || (i == 9 && b > 1))
                return 0;
            *v = x;
            return i + 1;
        }
    }
    return 0;
}

/* The same of at most 8 bytes, with 8 readable, without a branch on its length (a literal
 * size's, 3 to 7 bytes on real traces, in the fast loop): the first byte below 0x80 ends
 * it, its 7-bit groups are gathered by shifts. 0 when longer (varint_unbounded's). */
static inline size_t varint8(const uint8_t *p, uint64_t *v)
{
    uint64_t w;
    memcpy(&w, p, 8);
    w = le64toh(w);
    const uint64_t stop = ~w & 0x8080808080808080ull; /* the high bit of each last byte */
    if (!stop)
        return varint_unbounded(p, v);
    const unsigned len = ((unsigned)__builtin_ctzll(stop) >> 3) + 1;
    const uint64_t x = w & (stop ^ (stop - 1)); /* the bytes up to the first stop */
    /* canonical: a last byte of 0 after the first is an overlong form */
    if (len > 1 && !(x >> (8 * (len - 1))))
        return 0;
    *v = (x & 0x7F) | (x >> 1 & 0x3F80) | (x >> 2 & 0x1FC000) | (x >> 3 & 0xFE00000) |
         (x >> 4 & 0x7F0000000ull) | (x >> 5 & 0x3F800000000ull) | (x >> 6 & 0x1FC0000000000ull) |
         (x >> 7 & 0xFE000000000000ull);
    return len;
}

static inline size_t varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    if (end - p >= 10) {
        if (p[0] < 0x80) {
            *v = p[0];
            return 1;
        }
        return varint_unbounded(p, v);
    }
    return varint_slow(p, end, v);
}

static int nfail(native_st *s, as_trace_error *err, int code, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int nfail(native_st *s, as_trace_error *err, int code, uint64_t off, const char *fmt, ...)
{
    const as_trace_error *se = as_instream_error(s->in);
    if (se) {
        if (err)
            *err = *se;
        return se->code;
    }
    char m[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    return as_trace_set_error(err, code, as_instream_path(s->in), off, 0, "%s", m);
}

/* Reads a varint from the stream (header fields). */
static int rd_varint(native_st *s, uint64_t *v, const char *what, as_trace_error *err)
{
    const void *p;
    long n = as_instream_peek(s->in, &p, 10);
    if (n < 0)
        return nfail(s, err, (int)n, as_instream_offset(s->in), "read failed");
    size_t k = varint_slow(p, (const uint8_t *)p + n, v);
    if (!k)
        return nfail(s, err, AS_ECORRUPT, as_instream_offset(s->in),
                     n < 10 && (n == 0 || ((const uint8_t *)p)[n - 1] & 0x80)
                         ? "truncated: input ends inside the %s"
                         : "corrupt varint in the %s",
                     what);
    as_instream_skip(s->in, k);
    return 0;
}

static int rd_string(native_st *s, char **out, uint64_t max, const char *what, as_trace_error *err)
{
    uint64_t len;
    int rc = rd_varint(s, &len, what, err);
    if (rc < 0)
        return rc;
    uint64_t off = as_instream_offset(s->in);
    if (len > max)
        return nfail(s, err, AS_ECORRUPT, off, "%s of %llu bytes is too long", what,
                     (unsigned long long)len);
    char *b = malloc(len + 1);
    if (!b)
        return nfail(s, err, AS_ENOMEM, off, "out of memory");
    long n = as_instream_read(s->in, b, len);
    if (n < 0 || (uint64_t)n != len) {
        free(b);
        return nfail(s, err, n < 0 ? (int)n : AS_ECORRUPT, off,
                     "truncated: input ends inside the %s", what);
    }
    b[len] = 0;
    if (strlen(b) != len) {
        free(b);
        return nfail(s, err, AS_ECORRUPT, off, "NUL byte inside the %s", what);
    }
    *out = b;
    return 0;
}

/* Version 2's site table: F frames (line, file, name), then K sites (stacks of frame
 * numbers). Interned in order, so site k of the file is site k of the table; a repeated
 * stack would shift the numbering and is refused. Memory follows the bytes read. */
static int rd_frames(native_st *s, uint32_t *nframes, as_trace_error *err)
{
    uint64_t nf;
    int rc = rd_varint(s, &nf, "frame count", err);
    if (rc < 0)
        return rc;
    if (nf > AS_MAX_SITES)
        return nfail(s, err, AS_ECORRUPT, as_instream_offset(s->in), "absurd frame count %llu",
                     (unsigned long long)nf);
    for (uint64_t i = 0; i < nf; i++) {
        uint64_t off = as_instream_offset(s->in), line;
        char *file = NULL, *name = NULL;
        uint32_t fid;
        if ((rc = rd_varint(s, &line, "frame line", err)) < 0 ||
            (rc = rd_string(s, &file, AS_MAX_FRAME_STR, "frame file name", err)) < 0 ||
            (rc = rd_string(s, &name, AS_MAX_FRAME_STR, "frame function name", err)) < 0) {
            free(file);
            return rc;
        }
        if (line > UINT32_MAX)
            rc = nfail(s, err, AS_ECORRUPT, off, "frame %llu: line %llu out of range",
                       (unsigned long long)i, (unsigned long long)line);
        else if (as_sites_intern_frame(s->sites, &(as_frame){file, name, (uint32_t)line}, &fid) < 0)
            rc = nfail(s, err, AS_ENOMEM, off, "out of memory for the site table");
        else if (fid != i)
            rc = nfail(s, err, AS_ECORRUPT, off, "frame %llu repeats frame %u",
                       (unsigned long long)i, fid);
        free(file);
        free(name);
        if (rc < 0)
            return rc;
    }
    *nframes = (uint32_t)nf;
    return 0;
}

static int rd_sites(native_st *s, as_trace_error *err)
{
    uint32_t nf = 0, ids[AS_MAX_STACK];
    uint64_t nk, n;
    int rc;
    if ((rc = rd_frames(s, &nf, err)) < 0 || (rc = rd_varint(s, &nk, "site count", err)) < 0)
        return rc;
    if (nk > AS_MAX_SITES)
        return nfail(s, err, AS_ECORRUPT, as_instream_offset(s->in), "absurd site count %llu",
                     (unsigned long long)nk);
    for (uint64_t k = 1; k <= nk; k++) {
        uint64_t off = as_instream_offset(s->in);
        if ((rc = rd_varint(s, &n, "site stack length", err)) < 0)
            return rc;
        if (n == 0 || n > AS_MAX_STACK)
            return nfail(s, err, AS_ECORRUPT, off, "site %llu has %llu frames (1..%d)",
                         (unsigned long long)k, (unsigned long long)n, AS_MAX_STACK);
        for (uint64_t i = 0; i < n; i++) {
            uint64_t f;
            if ((rc = rd_varint(s, &f, "site frame number", err)) < 0)
                return rc;
            if (f >= nf)
                return nfail(s, err, AS_ECORRUPT, off, "site %llu names frame %llu of %u",
                             (unsigned long long)k, (unsigned long long)f, nf);
            ids[i] = (uint32_t)f;
        }
        uint32_t got;
        if (as_sites_intern_ids(s->sites, ids, (size_t)n, &got) < 0)
            return nfail(s, err, AS_ENOMEM, off, "out of memory for the site table");
        if (got != k)
            return nfail(s, err, AS_ECORRUPT, off, "site %llu repeats site %u",
                         (unsigned long long)k, got);
    }
    return 0;
}

/* Version 2's per-allocation columns: their ids, each known to this build and given once. */
static int rd_columns(native_st *s, as_trace_error *err)
{
    uint64_t nc, id;
    uint64_t off = as_instream_offset(s->in);
    int rc = rd_varint(s, &nc, "column count", err);
    if (rc < 0)
        return rc;
    if (nc > MAX_COLUMNS)
        return nfail(s, err, AS_ECORRUPT, off, "%llu per-allocation columns (at most %d)",
                     (unsigned long long)nc, MAX_COLUMNS);
    for (unsigned i = 0; i < nc; i++) {
        off = as_instream_offset(s->in);
        if ((rc = rd_varint(s, &id, "column id", err)) < 0)
            return rc;
        if (id != COL_SITE && id != COL_POOL)
            return nfail(s, err, AS_EFORMAT, off,
                         "per-allocation column %llu is unknown to this build (a newer allocsim "
                         "wrote it)",
                         (unsigned long long)id);
        int *col = id == COL_SITE ? &s->site_col : &s->pool_col;
        if (*col >= 0)
            return nfail(s, err, AS_ECORRUPT, off, "the %s column is declared twice",
                         id == COL_SITE ? "site" : "pool");
        *col = (int)i;
    }
    s->ncols = (unsigned)nc;
    if (s->pool_col >= 0) { /* the pool table: its size (pools 1..P) */
        uint64_t np;
        off = as_instream_offset(s->in);
        if ((rc = rd_varint(s, &np, "pool count", err)) < 0)
            return rc;
        if (np < 1 || np > MAX_POOLS)
            return nfail(s, err, AS_ECORRUPT, off, "%llu private pools (1..%d)",
                         (unsigned long long)np, MAX_POOLS);
        s->npools = (uint32_t)np;
    }
    return 0;
}

/* The metadata's `pools` is the pool table's size P, as the writer derives the one from
 * the other (absent: no pool column); a file where they differ would read here and then
 * not convert (the text reader checks pool=K against `meta pools`). pools_off: the byte
 * offset of the `pools` key, or UINT64_MAX when there is none. */
static int check_pools_meta(native_st *s, const as_meta *meta, uint64_t pools_off,
                            uint64_t cols_end, as_trace_error *err)
{
    const char *np = as_meta_get(meta, "pools");
    char *end = NULL;
    unsigned long long v = np ? strtoull(np, &end, 10) : 0;
    if (np && (*np < '0' || *np > '9' || *end || v > MAX_POOLS))
        return nfail(s, err, AS_ECORRUPT, pools_off,
                     "metadata pools=\"%.20s\" is not a pool count (0..%d)", np, MAX_POOLS);
    if (!np && s->npools)
        return nfail(s, err, AS_ECORRUPT, cols_end,
                     "the pool table has %u private pools but the metadata has no pools key",
                     s->npools);
    if (v != s->npools)
        return nfail(s, err, AS_ECORRUPT, pools_off,
                     "metadata pools=%llu but the pool table has %u private pools", v, s->npools);
    return 0;
}

static int native_open(as_instream *in, const as_reader_opts *opts, as_meta *meta, void **stp,
                       as_trace_error *err)
{
    (void)opts;
    *stp = NULL;
    native_st *s = calloc(1, sizeof *s);
    if (!s)
        return as_instream_fail(in, err, AS_ENOMEM, "out of memory");
    s->in = in;
    int rc;
    uint8_t magic[8];
    if (as_instream_read(in, magic, 8) != 8 || memcmp(magic, native_magic, 8) != 0) {
        rc = nfail(s, err, AS_EFORMAT, 0, "bad magic: not an allocsim native trace");
        goto bad;
    }
    uint64_t ver, flags, nmeta;
    uint64_t voff = as_instream_offset(in);
    if ((rc = rd_varint(s, &ver, "header version", err)) < 0)
        goto bad;
    if (ver != 1 && ver != 2) {
        rc = nfail(s, err, AS_EFORMAT, voff,
                   "unsupported native format version %llu (this build reads 1 and 2)",
                   (unsigned long long)ver);
        goto bad;
    }
    s->version = (unsigned)ver;
    uint64_t foff = as_instream_offset(in);
    if ((rc = rd_varint(s, &flags, "header flags", err)) < 0)
        goto bad;
    if (flags != 0) {
        rc = nfail(s, err, AS_EFORMAT, foff, "unknown header flags 0x%llx",
                   (unsigned long long)flags);
        goto bad;
    }
    if ((rc = rd_varint(s, &nmeta, "metadata count", err)) < 0)
        goto bad;
    if (nmeta > 4096) {
        rc = nfail(s, err, AS_ECORRUPT, foff, "absurd metadata count %llu",
                   (unsigned long long)nmeta);
        goto bad;
    }
    uint64_t meta_bytes = 0, pools_off = UINT64_MAX; /* a header is never a memory bomb */
    for (uint64_t i = 0; i < nmeta; i++) {
        char *k = NULL, *v = NULL;
        uint64_t koff = as_instream_offset(in);
        if (meta_bytes > (16u << 20)) {
            rc = nfail(s, err, AS_ECORRUPT, koff, "more than 16 MiB of metadata");
            goto bad;
        }
        if ((rc = rd_string(s, &k, 255, "metadata key", err)) < 0)
            goto bad;
        if ((rc = rd_string(s, &v, 1u << 20, "metadata value", err)) < 0) {
            free(k);
            goto bad;
        }
        meta_bytes += strlen(k) + strlen(v);
        if (!strcmp(k, "pools"))
            pools_off = koff;
        if (!as_meta_key_ok(k))
            rc = nfail(s, err, AS_ECORRUPT, koff, "bad metadata key");
        else if (as_meta_set(meta, k, v) < 0)
            rc = nfail(s, err, AS_ENOMEM, koff, "out of memory");
        free(k);
        free(v);
        if (rc < 0)
            goto bad;
    }
    s->site_col = s->pool_col = -1;
    if (as_sites_new(&s->sites) < 0) {
        rc = nfail(s, err, AS_ENOMEM, 0, "out of memory");
        goto bad;
    }
    if (s->version >= 2 && ((rc = rd_sites(s, err)) < 0 || (rc = rd_columns(s, err)) < 0))
        goto bad;
    if ((rc = check_pools_meta(s, meta, pools_off, as_instream_offset(in), err)) < 0)
        goto bad;
    s->streams_cap = 16;
    s->streams = calloc(s->streams_cap, sizeof *s->streams);
    if (!s->streams) {
        rc = nfail(s, err, AS_ENOMEM, 0, "out of memory");
        goto bad;
    }
    s->nstreams = 1; /* index 0 is the default stream, value 0, never written */
    *stp = s;
    return 0;
bad:
    as_sites_free(s->sites);
    free(s);
    return rc;
}

/* Reads the next block header; sets in_block, or ended at the end record. */
static int block_begin(native_st *s, as_trace_error *err)
{
    const void *pv;
    s->block_off = as_instream_offset(s->in);
    long n = as_instream_peek(s->in, &pv, 30 + 10 * MAX_COLUMNS);
    if (n < 0)
        return nfail(s, err, (int)n, s->block_off, "read failed");
    if (n == 0)
        return nfail(s, err, AS_ECORRUPT, s->block_off,
                     "truncated: the trace ends without its end record (after %llu events)",
                     (unsigned long long)s->nevents);
    const uint8_t *p = pv, *end = p + n;
    uint64_t nev, sl, tl;
    size_t k1 = varint_slow(p, end, &nev);
    if (!k1)
        goto badhdr;
    if (nev == 0) {
        /* End record: totals, then nothing. */
        uint64_t te, ta;
        size_t k2 = varint_slow(p + k1, end, &te), k3 = k2 ? varint_slow(p + k1 + k2, end, &ta) : 0;
        if (!k3)
            goto badhdr;
        if (te != s->nevents || ta != s->nalloc)
            return nfail(s, err, AS_ECORRUPT, s->block_off,
                         "end record says %llu events and %llu allocations, the blocks held "
                         "%llu and %llu",
                         (unsigned long long)te, (unsigned long long)ta,
                         (unsigned long long)s->nevents, (unsigned long long)s->nalloc);
        as_instream_skip(s->in, k1 + k2 + k3);
        const void *q;
        long m = as_instream_peek(s->in, &q, 1);
        if (m < 0)
            return nfail(s, err, (int)m, as_instream_offset(s->in), "read failed");
        if (m > 0)
            return nfail(s, err, AS_ECORRUPT, as_instream_offset(s->in),
                         "trailing data after the end record");
        s->ended = 1;
        return 0;
    }
    size_t k2 = varint_slow(p + k1, end, &sl);
    size_t k3 = k2 ? varint_slow(p + k1 + k2, end, &tl) : 0;
    if (!k2 || !k3)
        goto badhdr;
    if (nev > BLOCK_MAX_EVENTS || sl > BLOCK_MAX_BYTES || tl > BLOCK_MAX_BYTES || sl < nev)
        return nfail(s, err, AS_ECORRUPT, s->block_off,
                     "corrupt block header (%llu events, %llu + %llu bytes)",
                     (unsigned long long)nev, (unsigned long long)sl, (unsigned long long)tl);
    s->hdr_len = k1 + k2 + k3;
    s->s_len = (size_t)sl;
    s->t_len = (size_t)tl;
    size_t cols = 0;
    for (unsigned i = 0; i < s->ncols; i++) { /* version 2: the columns' lengths */
        uint64_t cl;
        size_t kc = varint_slow(p + s->hdr_len, end, &cl);
        if (!kc)
            goto badhdr;
        if (cl > BLOCK_MAX_BYTES)
            return nfail(s, err, AS_ECORRUPT, s->block_off,
                         "corrupt block header (column %u of %llu bytes)", i,
                         (unsigned long long)cl);
        s->hdr_len += kc;
        s->col_len[i] = (size_t)cl;
        if ((int)i == s->site_col)
            s->k_off = s->s_len + s->t_len + cols, s->k_len = (size_t)cl;
        if ((int)i == s->pool_col)
            s->p_off = s->s_len + s->t_len + cols, s->p_len = (size_t)cl;
        cols += (size_t)cl;
    }
    s->k_pos = s->p_pos = 0;
    s->nev = (uint32_t)nev;
    s->done = 0;
    s->s_pos = s->t_pos = 0;
    size_t total = s->hdr_len + s->s_len + s->t_len + cols;
    n = as_instream_peek(s->in, &pv, total);
    if (n < 0)
        return nfail(s, err, (int)n, s->block_off, "read failed");
    if ((size_t)n < total)
        return nfail(s, err, AS_ECORRUPT, s->block_off + (uint64_t)n,
                     "truncated: block of %llu events at offset %llu needs %zu bytes, %ld left",
                     (unsigned long long)nev, (unsigned long long)s->block_off, total, n);
    s->in_block = 1;
    return 0;
badhdr:
    return nfail(s, err, AS_ECORRUPT, s->block_off,
                 n < 30 + 10 * MAX_COLUMNS ? "truncated or corrupt block header"
                                           : "corrupt varint in a block header");
}

/* The block's bytes after its header: columns S and T, then the per-allocation ones. */
static size_t block_body(const native_st *s)
{
    size_t n = s->s_len + s->t_len;
    for (unsigned i = 0; i < s->ncols; i++)
        n += s->col_len[i];
    return n;
}

static int block_end(native_st *s, as_trace_error *err)
{
    if (s->s_pos != s->s_len || s->t_pos != s->t_len)
        return nfail(s, err, AS_ECORRUPT, s->block_off + s->hdr_len + s->s_pos,
                     "block has %zu stray bytes after its %u events",
                     (s->s_len - s->s_pos) + (s->t_len - s->t_pos), s->nev);
    if (s->k_pos != s->k_len)
        return nfail(s, err, AS_ECORRUPT, s->block_off + s->hdr_len + s->k_off + s->k_pos,
                     "site column has %zu stray bytes after the block's allocations",
                     s->k_len - s->k_pos);
    if (s->p_pos != s->p_len)
        return nfail(s, err, AS_ECORRUPT, s->block_off + s->hdr_len + s->p_off + s->p_pos,
                     "pool column has %zu stray bytes after the block's allocations",
                     s->p_len - s->p_pos);
    as_instream_skip(s->in, s->hdr_len + block_body(s));
    s->in_block = 0;
    return 0;
}

/* The decoder's position in the current block, held in locals while a batch decodes (the
 * helpers below are inlined, so it stays in registers). */
typedef struct ncur {
    const uint8_t *sb, *se, *sp; /* structure column: begin, end, position */
    const uint8_t *tb, *te, *tp; /* time column */
    const uint8_t *kb, *ke, *kp; /* site column (kb == NULL: none) */
    const uint8_t *pb, *pe, *pp; /* pool column (pb == NULL: none) */
    uint64_t base;               /* stream offset of sb */
    uint64_t nalloc, cur_stream;
    int64_t prev_time;
    int has_time;
} ncur;

/* A record that runs past the structure column (truncated) or a bad varint at c->sp. */
static int struct_fail(native_st *s, const ncur *c, int truncated, as_trace_error *err)
{
    uint64_t off = c->base + (uint64_t)(c->sp - c->sb);
    if (truncated)
        return nfail(s, err, AS_ECORRUPT, off, "block structure column shorter than its %u events",
                     s->nev);
    return nfail(s, err, AS_ECORRUPT, off,
                 c->sp >= c->se ? "block structure column ends inside a record" : "corrupt varint");
}

static int bad_tag(native_st *s, const ncur *c, const uint8_t *ev_start, as_trace_error *err)
{
    return nfail(s, err, AS_ECORRUPT, c->base + (uint64_t)(ev_start - c->sb),
                 "unknown record tag 0x%02x", *ev_start);
}

/* An ALLOC's site from the site column (version 2 files with frames). */
static int decode_site(native_st *s, ncur *c, as_event *ev, as_trace_error *err)
{
    uint64_t v;
    uint64_t off = s->block_off + s->hdr_len + s->k_off + (uint64_t)(c->kp - c->kb);
    size_t used = varint(c->kp, c->ke, &v);
    if (!used)
        return nfail(s, err, AS_ECORRUPT, off,
                     c->kp >= c->ke ? "site column shorter than the block's allocations"
                                    : "corrupt varint in the site column");
    if (v > as_sites_count(s->sites))
        return nfail(s, err, AS_ECORRUPT, off, "site %llu past the site table (%u sites)",
                     (unsigned long long)v, as_sites_count(s->sites));
    c->kp += used;
    ev->site = (uint32_t)v;
    return 0;
}

/* An ALLOC's private pool from the pool column. */
static int decode_pool(native_st *s, ncur *c, as_event *ev, as_trace_error *err)
{
    uint64_t v;
    uint64_t off = s->block_off + s->hdr_len + s->p_off + (uint64_t)(c->pp - c->pb);
    size_t used = varint(c->pp, c->pe, &v);
    if (!used)
        return nfail(s, err, AS_ECORRUPT, off,
                     c->pp >= c->pe ? "pool column shorter than the block's allocations"
                                    : "corrupt varint in the pool column");
    if (v > s->npools)
        return nfail(s, err, AS_ECORRUPT, off, "pool %llu past the pool table (%u pools)",
                     (unsigned long long)v, s->npools);
    c->pp += used;
    ev->pool = (uint32_t)v;
    return 0;
}

AS_HOT int decode_alloc(native_st *s, ncur *c, as_event *ev, unsigned arg, const uint8_t *ev_start,
                        as_trace_error *err)
{
    ev->op = AS_OP_ALLOC;
    ev->id = c->nalloc++;
    ev->stream = c->cur_stream;
    int krc;
    if (c->kb && (krc = decode_site(s, c, ev, err)) < 0)
        return krc;
    if (c->pb && (krc = decode_pool(s, c, ev, err)) < 0)
        return krc;
    if (arg < SIZE_SLOTS) {
        ev->size = s->size_cache[arg];
        if (!ev->size)
            return nfail(s, err, AS_ECORRUPT, c->base + (uint64_t)(ev_start - c->sb),
                         "ALLOC uses size-cache slot %u before it was filled", arg);
        return 0;
    }
    if (arg != V_SIZE_LITERAL)
        return bad_tag(s, c, ev_start, err);
    uint64_t v;
    size_t used = varint(c->sp, c->se, &v);
    if (!used)
        return struct_fail(s, c, 0, err);
    c->sp += used;
    ev->size = v;
    s->size_cache[size_slot(v)] = v;
    return 0;
}

AS_HOT int decode_free(native_st *s, ncur *c, as_event *ev, unsigned tag, const uint8_t *ev_start,
                       as_trace_error *err)
{
    unsigned arg = tag >> 2;
    uint64_t v;
    ev->op = (tag & 3) == K_FREE ? AS_OP_FREE : AS_OP_FREE_REQ;
    if (arg < V_FREE_FAR) {
        v = arg + 1;
    } else {
        size_t used = varint(c->sp, c->se, &v);
        if (!used)
            return struct_fail(s, c, 0, err);
        c->sp += used;
        v += 64;
        if (v < 64)
            v = UINT64_MAX; /* wrapped: certainly too far */
    }
    if (v > c->nalloc)
        return nfail(s, err, AS_ECORRUPT, c->base + (uint64_t)(ev_start - c->sb),
                     "free refers %llu allocations back, only %llu so far", (unsigned long long)v,
                     (unsigned long long)c->nalloc);
    ev->id = c->nalloc - v;
    ev->size = ev->stream = 0;
    return 0;
}

enum { SPECIAL_EVENT = 0, SPECIAL_NOT_EVENT = 1, SPECIAL_MARK = 2 };

/* A stream record: S_SET_STREAM selects a defined stream, S_NEW_STREAM defines one. */
static int decode_stream(native_st *s, ncur *c, unsigned arg, const uint8_t *ev_start,
                         as_trace_error *err)
{
    uint64_t off = c->base + (uint64_t)(ev_start - c->sb), v;
    if (arg == S_SET_STREAM) {
        size_t used = varint(c->sp, c->se, &v);
        if (!used)
            return struct_fail(s, c, 0, err);
        c->sp += used;
        if (v >= s->nstreams)
            return nfail(s, err, AS_ECORRUPT, off,
                         "stream index %llu not defined (%zu streams so far)",
                         (unsigned long long)v, s->nstreams);
        c->cur_stream = s->streams[v];
        return SPECIAL_NOT_EVENT;
    }
    if (c->se - c->sp < 8)
        return struct_fail(s, c, 1, err);
    uint64_t val = 0;
    for (int i = 7; i >= 0; i--)
        val = val << 8 | c->sp[i];
    c->sp += 8;
    if (s->nstreams == MAX_STREAMS)
        return nfail(s, err, AS_ENOMEM, off, "more than %d distinct streams", MAX_STREAMS);
    if (as_grow((void **)&s->streams, &s->streams_cap, s->nstreams + 1, sizeof *s->streams, 16) < 0)
        return nfail(s, err, AS_ENOMEM, 0, "out of memory");
    s->streams[s->nstreams++] = val;
    c->cur_stream = val;
    return SPECIAL_NOT_EVENT;
}

/* A K_SPECIAL record. Returns SPECIAL_EVENT (ev filled), SPECIAL_MARK (ev filled: the
 * batch ends with it), SPECIAL_NOT_EVENT (a stream record) or < 0. */
static int decode_special(native_st *s, ncur *c, as_event *ev, unsigned arg,
                          const uint8_t *ev_start, as_trace_error *err)
{
    uint64_t v;
    switch (arg) {
    case S_EMPTY_CACHE:
        ev->op = AS_OP_EMPTY_CACHE;
        ev->id = ev->size = ev->stream = 0;
        ev->pool = 0;
        return SPECIAL_EVENT;
    case S_POOL_EMPTY: { /* an EMPTY_CACHE of private pool k (1..npools): varint k */
        size_t used = varint(c->sp, c->se, &v);
        if (!used)
            return struct_fail(s, c, 0, err);
        if (v == 0 || v > s->npools)
            return nfail(s, err, AS_ECORRUPT, c->base + (uint64_t)(ev_start - c->sb),
                         "empty_cache of pool %llu, past the pool table (%u pools)",
                         (unsigned long long)v, s->npools);
        c->sp += used;
        ev->op = AS_OP_EMPTY_CACHE;
        ev->id = ev->size = ev->stream = 0;
        ev->pool = (uint32_t)v;
        return SPECIAL_EVENT;
    }
    case S_MARK: {
        size_t used = varint(c->sp, c->se, &v);
        if (!used)
            return struct_fail(s, c, 0, err);
        c->sp += used;
        if (v > AS_MAX_LABEL || (uint64_t)(c->se - c->sp) < v || memchr(c->sp, 0, (size_t)v))
            return nfail(s, err, AS_ECORRUPT, c->base + (uint64_t)(ev_start - c->sb),
                         "corrupt MARK label (length %llu)", (unsigned long long)v);
        memcpy(s->label, c->sp, (size_t)v);
        s->label[v] = 0;
        c->sp += v;
        ev->op = AS_OP_MARK;
        ev->id = ev->size = ev->stream = 0;
        ev->label = s->label;
        return SPECIAL_MARK;
    }
    case S_SET_STREAM:
    case S_NEW_STREAM:
        return decode_stream(s, c, arg, ev_start, err);
    default:
        return bad_tag(s, c, ev_start, err);
    }
}

static int time_fail(native_st *s, const ncur *c, const char *what, as_trace_error *err)
{
    return nfail(s, err, AS_ECORRUPT, c->base + s->s_len + (uint64_t)(c->tp - c->tb), "%s", what);
}

/* A time that is not a one-byte delta: none, absolute, or a longer delta. */
static int decode_time_slow(native_st *s, ncur *c, as_event *ev, as_trace_error *err)
{
    uint64_t v;
    size_t used = varint(c->tp, c->te, &v);
    if (!used)
        return time_fail(s, c,
                         c->tp >= c->te ? "time column shorter than its block"
                                        : "corrupt varint in the time column",
                         err);
    c->tp += used;
    if (v == T_NONE) {
        ev->time_us = AS_TIME_NONE;
        return 0;
    }
    if (v == T_ABS) {
        if (!(used = varint(c->tp, c->te, &v)))
            return time_fail(s, c, "corrupt absolute time", err);
        c->tp += used;
        c->prev_time = zz_dec(v);
    } else {
        c->prev_time = (int64_t)((uint64_t)c->prev_time + (uint64_t)zz_dec(v - T_DELTA0));
    }
    if (c->prev_time == AS_TIME_NONE)
        return time_fail(s, c, "time out of range", err);
    ev->time_us = c->prev_time;
    return 0;
}

AS_HOT int decode_time(native_st *s, ncur *c, as_event *ev, as_trace_error *err)
{
    if (!c->has_time) {
        ev->time_us = AS_TIME_NONE;
        return 0;
    }
    if (c->tp < c->te && (unsigned)(*c->tp - T_DELTA0) < 0x80 - T_DELTA0) {
        /* the common case: a one-byte delta */
        c->prev_time = (int64_t)((uint64_t)c->prev_time + (uint64_t)zz_dec(*c->tp++ - T_DELTA0));
        if (c->prev_time == AS_TIME_NONE)
            return time_fail(s, c, "time out of range", err);
        ev->time_us = c->prev_time;
        return 0;
    }
    return decode_time_slow(s, c, ev, err);
}

/* The records the fast loop may take from here without a bound test (see fast_records):
 * at most n and room, 3 per byte of the structure column and of the time column (tb, -1
 * when the block has none), none within 2^21 us a record of either end of int64_t. */
AS_HOT size_t stretch(size_t n, size_t room, ptrdiff_t sb, ptrdiff_t tb, int64_t now)
{
    size_t m = (size_t)sb / 3;
    m = n < m ? n : m;
    m = room < m ? room : m;
    if (tb >= 0) {
        size_t mt = (size_t)tb / 3;
        m = mt < m ? mt : m;
        /* m <= 2^20 (a block's events), so 2^21 m cannot overflow */
        const int64_t reach = (int64_t)m << 21;
        if (now <= INT64_MIN + reach || now >= INT64_MAX - reach)
            m = 0; /* near either end: the general loop's checks */
    }
    return m;
}

/* An ALLOC's site from the site column at kp (before ke): a varint of one or two bytes
 * naming a site of the table (0..nsites). Its length, 0 when not such a one. */
AS_HOT unsigned fast_site(const uint8_t *kp, const uint8_t *ke, uint64_t nsites, uint64_t *site)
{
    unsigned used;
    if (ke - kp >= 1 && kp[0] < 0x80) {
        *site = kp[0];
        used = 1;
    } else if (ke - kp >= 2 && kp[1] && kp[1] < 0x80) {
        *site = (uint64_t)(kp[0] & 0x7F) | (uint64_t)kp[1] << 7;
        used = 2;
    } else {
        return 0;
    }
    return *site > nsites ? 0 : used;
}

/* The time a one-byte delta moves by: byte b (T_DELTA0..0x7F) codes zz_enc(delta) +
 * T_DELTA0, so delta1[b] = zz_dec(b - T_DELTA0) (-63..62), a load where the decoding was
 * five operations a record; every other byte (T_NONE, T_ABS, the first of a longer
 * varint) reads DELTA_LONG, so one compare of the loaded value tells the two apart. */
#define DELTA_LONG INT8_MIN
#define ZZ1(v) ((v)&1 ? -(((v) + 1) / 2) : (v) / 2)
#define D1(b) ((b) < T_DELTA0 || (b) >= 0x80 ? DELTA_LONG : ZZ1((b)-T_DELTA0))
#define D4(b) D1(b), D1(b + 1), D1(b + 2), D1(b + 3)
#define D16(b) D4(b), D4(b + 4), D4(b + 8), D4(b + 12)
#define D64(b) D16(b), D16(b + 16), D16(b + 32), D16(b + 48)
static const int8_t delta1[256] = {D64(0), D64(64), D64(128), D64(192)};

/* The time after a delta (>= T_DELTA0) in a canonical varint of 1-3 bytes at *tp: *now
 * moved by it and *tp past it; 0, with neither changed, when it is not such a one. Most
 * deltas are one byte. */
AS_HOT int fast_time(const uint8_t **tpp, int64_t *now)
{
    const uint8_t *tp = *tpp;
    uint64_t x = tp[0];
    const int d1 = delta1[x];
    if (AS_LIKELY(d1 != DELTA_LONG)) {
        *now += d1;
        *tpp = tp + 1;
        return 1;
    }
    if (x < 0x80)
        return 0; /* T_NONE or T_ABS */
    if (tp[1] && tp[1] < 0x80) {
        x = (x & 0x7F) | (uint64_t)tp[1] << 7;
        *tpp = tp + 2;
    } else if (tp[1] >= 0x80 && tp[2] && tp[2] < 0x80) {
        x = (x & 0x7F) | (uint64_t)(tp[1] & 0x7F) << 7 | (uint64_t)tp[2] << 14;
        *tpp = tp + 3;
    } else {
        return 0;
    }
    *now += zz_dec(x - T_DELTA0);
    return 1;
}

/* A FREE's distance back from its tag at sp: v < 63 is distance v + 1; 63 a varint of one
 * or two bytes (then + 64) follows. The record's length, 0 when it is not such a one. */
AS_HOT unsigned fast_distance(const uint8_t *sp, uint64_t *d)
{
    uint64_t v = (uint64_t)(sp[0] >> 2) + 1;
    unsigned len = 1;
    if (v == V_FREE_FAR + 1) {
        if (sp[1] < 0x80) {
            v = (uint64_t)sp[1] + 64;
            len = 2;
        } else if (sp[2] && sp[2] < 0x80) {
            v = ((uint64_t)(sp[1] & 0x7F) | (uint64_t)sp[2] << 7) + 64;
            len = 3;
        } else {
            return 0;
        }
    }
    *d = v;
    return len;
}

/* Every field of an ALLOC or FREE event, each stored once. */
AS_HOT void put_event(as_event *ev, as_op op, uint64_t site, uint64_t id, uint64_t size,
                      uint64_t stream, int64_t t, uint32_t slot)
{
    ev->op = op;
    ev->site = (uint32_t)site;
    ev->id = id;
    ev->size = size;
    ev->stream = stream;
    ev->time_us = t;
    ev->pool = 0;
    ev->slot = slot;
}

/* A FREE of live entry e at time t: the event, e's slot back on the stack; returns what
 * it takes from the tally's requested bytes (nothing after a FREE_REQ took it). */
AS_HOT uint64_t put_free(as_event *ev, const as_live_ent *e, int64_t t, uint32_t *sfree,
                         uint32_t *nfree)
{
    put_event(ev, AS_OP_FREE, 0, AS_LIVE_ID(e), e->size, e->stream, t, e->slot);
    sfree[(*nfree)++] = e->slot; /* the stack holds every slot */
    return e->out_id & AS_LIVE_FREEREQ ? 0 : e->size;
}

/* A FREE_REQ record at sp, as validate_free_req takes it: its entry from the ring or the
 * map, marked (refused when a FREE_REQ marked it already), its size off the tally's
 * requested bytes, the event at the time after it (has_time: the delta at *tp moves *now).
 * The record's length, 0 (nothing changed) when the general loop must take it. */
AS_HOT unsigned fast_free_req(as_validator *vd, as_event *ev, const uint8_t *sp, uint64_t nalloc,
                              const uint8_t **tp, int64_t *now, const int has_time,
                              uint64_t *req)
{
    uint64_t d;
    const unsigned len = fast_distance(sp, &d);
    if (!len || d > nalloc)
        return 0;
    const uint64_t in_id = nalloc - d;
    as_live_ent *e = &vd->live.ring[in_id & (AS_IDRING - 1)];
    if ((e->key != in_id + 1 && !(e = as_live_hash_get(&vd->live.far, in_id))) ||
        (e->out_id & AS_LIVE_FREEREQ) || (has_time && !fast_time(tp, now)))
        return 0;
    e->out_id |= AS_LIVE_FREEREQ;
    put_event(ev, AS_OP_FREE_REQ, 0, AS_LIVE_ID(e), e->size, e->stream,
              has_time ? *now : AS_TIME_NONE, e->slot);
    *req -= e->size;
    vd->free_reqs++;
    vd->live.n++; /* fast_records counts it as an event that took an entry */
    return len;
}

/* The common records with the cursor and the validator's state in registers (the general
 * loop's cursor is a struct whose address its error paths take, so the compiler reloads
 * it after every store to an event): an ALLOC of a size from a filled size-cache slot or a
 * literal one (its site, if the block has a site column, a varint of one or two bytes
 * naming a site of the table) and a FREE at most 2^14 + 63 allocations back (a FREE_REQ
 * too, in the copies without a site column: in those with one its path took the common
 * records' registers, resnet x16 +1.7 % instructions), each with a time delta of one to
 * three bytes (or no time column), in a block without a pool column.
 * Decodes from evs[kk] until lim or the first other record, which the general loop then
 * reads from the same place; returns the new kk. The events, the validator's state and
 * its tally are exactly what the general loop and the validator's fast path make of them.
 *
 * The validation is folded in: an ALLOC's id is the ordinal the validator expects (its
 * count equals the decoder's at entry), so it is not compared, and its stream is the
 * validator's last one (else the general loop takes the records from here, and its
 * validator counts the stream); the live table's ring is used in place (an id it misses,
 * or a slot held by a live one, takes the table's own functions); the slot stack, the
 * ordinals, the tally and the live count go back to the validator once, at the end. The
 * tally's smallest request is taken from the literal sizes alone: a size-cache slot holds
 * a size some literal ALLOC had, and in this format a literal of a valid size is accepted
 * or ends the trace with an error (its id is the ordinal; no lenient skip applies to it),
 * so that ALLOC counted it already.
 *
 * It runs in stretches in which no bound can be crossed: a record takes at most 3 bytes
 * of the structure column (a literal size more: the stretch is shortened by what it took
 * past 3) and of the time column, and such a delta moves the time by at most 2^20 us, so
 * a stretch of m records starting with at least 3m bytes in each column and a time more
 * than 2^21 m from either end of int64_t tests none of those per record. has_time and
 * has_site are constants in each of the four copies, each a function of its own (inlined
 * into the block's loop, the copies shared its registers and spilled the loop's state).
 * Only what every record uses is held in locals; what the rare cases use (the slot count,
 * the smallest request, the column ends) stays in vd and c. */
AS_HOT size_t fast_records(native_st *s, as_validator *vd, ncur *c, as_event *restrict evs,
                           size_t kk, size_t lim, const int has_time, const int has_site)
{
    const uint64_t stream = c->cur_stream;
    if (!vd->live.ring || vd->allocs_in != c->nalloc || !vd->s_any || stream != vd->s_last)
        return kk; /* the general loop's first ALLOC sets the ring up, or counts the stream */
    const uint8_t *sp = c->sp, *tp = c->tp, *kp = c->kp;
    const uint64_t nsites = has_site ? as_sites_count(s->sites) : 0;
    uint64_t *const cache = s->size_cache;
    as_live_ent *const ring = vd->live.ring;
    /* the stack's room for new slots: a stretch takes at most room records (below); grown
     * ahead, by the validator's doubling, so that stretches stay long near the cap */
    if (vd->slot_cap - vd->nslots < STACK_AHEAD &&
        as_grow32((void **)&vd->slot_free, &vd->slot_cap, (size_t)vd->nslots + STACK_AHEAD,
                  sizeof *vd->slot_free, 1024) < 0)
        return kk; /* the general loop says it is out of memory, when it is */
    uint32_t *const sfree = vd->slot_free;
    uint32_t nfree = vd->nfree;
    const uint64_t doff = vd->allocs_out - c->nalloc; /* output id - input id */
    uint64_t req = vd->requested, peak_req = vd->peak_requested;
    const uint64_t nalloc0 = c->nalloc;
    uint64_t nalloc = nalloc0;
    int64_t now = c->prev_time;
    as_event *ev = evs + kk, *const ev0 = ev;
    size_t m;
    /* A stretch's new slots: none while the stack holds some, so at most m - nfree of m
     * records; m at most scap - nslots + nfree leaves room for them in the stack. */
    while ((m = stretch(lim - (size_t)(ev - evs), vd->slot_cap - vd->nslots + nfree, c->se - sp,
                        has_time ? c->te - tp : -1, now)) > 0) {
        for (as_event *ee = ev + m; ev < ee; ev++) {
            /* Every test that can send the record to the general loop comes before it
             * changes anything but the ring's layout (an eviction, which the general loop
             * would make too), the time last: sp, tp and now then move on together. */
            const unsigned tag = sp[0];
            unsigned slen = 1; /* the record's bytes in the structure column */
            if ((tag & 3) == K_ALLOC) {
                as_live_ent *e = &ring[nalloc & (AS_IDRING - 1)];
                if (AS_UNLIKELY(e->key) && as_live_evict(&vd->live, e))
                    goto out; /* out of memory: the validator says so */
                uint64_t size = cache[tag >> 2], site = 0; /* 0: a literal, or a bad tag */
                unsigned kused = 0;
                if (has_site && AS_UNLIKELY(!(kused = fast_site(kp, c->ke, nsites, &site))))
                    goto out;
                if (AS_UNLIKELY(size - 1 >= AS_MAX_ALLOC_SIZE)) { /* 0 too */
                    /* a literal: the tag and a varint of at most 10 bytes */
                    size_t k;
                    if (size || tag >> 2 != V_SIZE_LITERAL || c->se - sp < 11 ||
                        !(k = varint8(sp + 1, &size)) || size - 1 >= AS_MAX_ALLOC_SIZE ||
                        (has_time && !fast_time(&tp, &now)))
                        goto out;
                    slen = 1 + (unsigned)k;
                    /* it took k - 2 bytes past the stretch's 3: the records after it have
                     * 3 each if there are k / 3 fewer of them */
                    const size_t after = (size_t)(ee - ev) - 1;
                    ee = ev + 1 + (after > k / 3 ? after - k / 3 : 0);
                    /* the smallest request is one of the literals */
                    cache[size_slot(size)] = size;
                    if (size - 1 < vd->min_request - 1)
                        vd->min_request = size;
                } else if (has_time && AS_UNLIKELY(!fast_time(&tp, &now))) {
                    goto out;
                }
                const uint32_t slot = AS_LIKELY(nfree) ? sfree[--nfree] : vd->nslots++;
                e->key = nalloc + 1;
                e->size = size;
                e->stream = stream;
                e->out_id = nalloc + doff;
                e->slot = slot;
                put_event(ev, AS_OP_ALLOC, site, nalloc + doff, size, stream,
                          has_time ? now : AS_TIME_NONE, slot);
                nalloc++;
                req += size; /* the tally, as as_tally_alloc */
                peak_req = req > peak_req ? req : peak_req;
                if (has_site) /* kp is NULL without a site column: no NULL + 0 */
                    kp += kused;
            } else if (AS_LIKELY((tag & 3) == K_FREE)) {
                uint64_t d;
                if (AS_UNLIKELY(!(slen = fast_distance(sp, &d)) || d > nalloc))
                    goto out;
                const uint64_t in_id = nalloc - d;
                as_live_ent *e = &ring[in_id & (AS_IDRING - 1)];
                if (AS_LIKELY(e->key == in_id + 1)) {
                    if (has_time && AS_UNLIKELY(!fast_time(&tp, &now)))
                        goto out;
                    req -= put_free(ev, e, has_time ? now : AS_TIME_NONE, sfree, &nfree);
                    e->key = 0;
                } else { /* in the map, or not live */
                    if (!(e = as_live_hash_get(&vd->live.far, in_id)) ||
                        (has_time && !fast_time(&tp, &now)))
                        goto out;
                    req -= put_free(ev, e, has_time ? now : AS_TIME_NONE, sfree, &nfree);
                    as_live_hash_del(&vd->live.far, e);
                }
            } else if (!has_site && (tag & 3) == K_FREE_REQ) {
                if (!(slen = fast_free_req(vd, ev, sp, nalloc, &tp, &now, has_time, &req)))
                    goto out;
            } else {
                goto out;
            }
            sp += slen;
        }
    }
out:
    vd->events += (uint64_t)(ev - ev0);
    vd->nfree = nfree;
    vd->allocs_in = nalloc;
    vd->allocs_out = nalloc + doff;
    vd->requested = req;
    vd->peak_requested = peak_req;
    /* each ALLOC added a live entry, each FREE took one (fast_free_req gave its one back) */
    vd->live.n += 2 * (nalloc - nalloc0) - (uint64_t)(ev - ev0);
    c->sp = sp;
    c->tp = tp;
    c->kp = kp;
    c->nalloc = nalloc;
    c->prev_time = now;
    return (size_t)(ev - evs);
}

#define FAST_COPY(name, has_time, has_site)                                                    \
    static __attribute__((noinline)) size_t name(native_st *s, as_validator *vd, ncur *c,      \
                                                 as_event *restrict evs, size_t kk, size_t lim) \
    {                                                                                          \
        return fast_records(s, vd, c, evs, kk, lim, has_time, has_site);                       \
    }
FAST_COPY(fast_t0_k0, 0, 0)
FAST_COPY(fast_t1_k0, 1, 0)
FAST_COPY(fast_t0_k1, 0, 1)
FAST_COPY(fast_t1_k1, 1, 1)

static size_t decode_fast(native_st *s, as_validator *vd, ncur *c, as_event *restrict evs,
                          size_t kk, size_t lim)
{
    if (c->pb || !vd)
        return kk;
    if (c->kb)
        return c->has_time ? fast_t1_k1(s, vd, c, evs, kk, lim) : fast_t0_k1(s, vd, c, evs, kk, lim);
    return c->has_time ? fast_t1_k0(s, vd, c, evs, kk, lim) : fast_t0_k0(s, vd, c, evs, kk, lim);
}

/* Decodes events of the current block into evs[*k..cap), each through the validator's
 * fast path when vd, until the block's end, cap, a MARK, an event the fast path declines
 * (both set *stop; the second also *unchecked) or an error (< 0). The position goes back
 * into s, so the next call resumes. */
static int decode_block(native_st *s, as_validator *vd, as_event *restrict evs, size_t cap,
                        size_t *k, int *stop, int *unchecked, as_trace_error *err)
{
    const void *pv;
    size_t total = s->hdr_len + block_body(s);
    /* The window still holds the block (nothing else reads the stream); peek again for its
     * address, which a compaction may have moved. */
    if (as_instream_peek(s->in, &pv, total) < (long)total)
        return nfail(s, err, AS_ECORRUPT, s->block_off, "block vanished");
    ncur c;
    c.sb = (const uint8_t *)pv + s->hdr_len;
    c.se = c.sb + s->s_len;
    c.tb = c.se;
    c.te = c.tb + s->t_len;
    c.sp = c.sb + s->s_pos;
    c.tp = c.tb + s->t_pos;
    c.base = s->block_off + s->hdr_len;
    c.nalloc = s->nalloc;
    c.cur_stream = s->cur_stream;
    c.prev_time = s->prev_time;
    c.has_time = s->t_len > 0;
    c.kb = s->site_col >= 0 ? c.sb + s->k_off : NULL;
    c.ke = c.kb ? c.kb + s->k_len : NULL;
    c.kp = c.kb ? c.kb + s->k_pos : NULL;
    c.pb = s->pool_col >= 0 ? c.sb + s->p_off : NULL;
    c.pe = c.pb ? c.pb + s->p_len : NULL;
    c.pp = c.pb ? c.pb + s->p_pos : NULL;
    uint32_t done = s->done;
    size_t kk = *k, lim = kk + (cap - kk < s->nev - done ? cap - kk : s->nev - done);
    int rc = 0;
    while (kk < lim) {
        size_t f = decode_fast(s, vd, &c, evs, kk, lim);
        done += (uint32_t)(f - kk);
        kk = f;
        if (kk == lim)
            break;
        as_event *ev = &evs[kk];
        const uint8_t *ev_start = c.sp;
        if (c.sp >= c.se) {
            rc = struct_fail(s, &c, 1, err);
            break;
        }
        unsigned tag = *c.sp++;
        ev->label = NULL;
        ev->site = 0;
        ev->pool = 0;
        if ((tag & 3) == K_ALLOC)
            rc = decode_alloc(s, &c, ev, tag >> 2, ev_start, err);
        else if ((tag & 3) != K_SPECIAL)
            rc = decode_free(s, &c, ev, tag, ev_start, err);
        else
            rc = decode_special(s, &c, ev, tag >> 2, ev_start, err);
        if (rc == SPECIAL_NOT_EVENT) {
            rc = 0;
            continue;
        }
        int last = rc == SPECIAL_MARK;
        if (rc < 0 || (rc = decode_time(s, &c, ev, err)) < 0)
            break;
        if (vd) {
            int ok = ev->op == AS_OP_ALLOC  ? validate_alloc(vd, ev)
                     : ev->op == AS_OP_FREE ? validate_free(vd, ev)
                                            : validate_fast(vd, ev);
            if (ok != 0)
                *unchecked = last = 1; /* the reader judges it, with the slow path */
        }
        if (last || !vd)
            s->last_off = c.base + (uint64_t)(ev_start - c.sb);
        kk++;
        done++;
        if (last) {
            *stop = 1;
            break;
        }
    }
    s->s_pos = (size_t)(c.sp - c.sb);
    s->t_pos = (size_t)(c.tp - c.tb);
    if (c.kb)
        s->k_pos = (size_t)(c.kp - c.kb);
    if (c.pb)
        s->p_pos = (size_t)(c.pp - c.pb);
    s->nevents += done - s->done;
    s->done = done;
    s->nalloc = c.nalloc;
    s->cur_stream = c.cur_stream;
    s->prev_time = c.prev_time;
    *k = kk;
    return rc;
}

/* as_source_ops.next_batch (source.h): blocks begin and end here, their events are
 * decoded by decode_block. */
static int native_next_batch(void *stp, as_validator *vd, as_event *evs, size_t cap, size_t *n,
                             size_t *checked, as_trace_error *err)
{
    native_st *s = stp;
    size_t k = 0;
    int rc = 0, unchecked = 0, stop = 0;
    *n = 0;
    if (cap > BATCH_MAX)
        cap = BATCH_MAX;
    while (k < cap && !stop) {
        if (!s->in_block) {
            if (s->ended) {
                rc = AS_TRACE_EOF;
                break;
            }
            if ((rc = block_begin(s, err)) < 0)
                break;
            if (s->ended)
                continue;
        }
        if ((rc = decode_block(s, vd, evs, cap, &k, &stop, &unchecked, err)) < 0)
            break;
        if (s->done == s->nev && (rc = block_end(s, err)) < 0)
            break;
    }
    *n = k;
    if (checked)
        *checked = k - (size_t)unchecked;
    if (rc == AS_TRACE_EOF && k > 0)
        rc = 0; /* the events first; EOF again on the next call */
    return rc;
}

static uint64_t native_last_offset(const void *st)
{
    const native_st *s = st;
    return s->last_off;
}

/* One event, for callers of the generic seam (the reader itself uses the batch). */
static int native_next(void *st, as_event *ev, as_trace_error *err)
{
    size_t n;
    int rc = native_next_batch(st, NULL, ev, 1, &n, NULL, err);
    if (rc == 0 && n == 1)
        as_instream_mark_event(((native_st *)st)->in, native_last_offset(st), 0);
    return rc;
}

static void native_close(void *st)
{
    native_st *s = st;
    if (!s)
        return;
    free(s->streams);
    as_sites_free(s->sites);
    free(s);
}

static const as_sites *native_sites(const void *st)
{
    return ((const native_st *)st)->sites;
}

const as_source_ops as_src_native = {
    .name = "native",
    .fmt = AS_FMT_NATIVE,
    .probe = native_probe,
    .open = native_open,
    .next = native_next,
    .warnings = NULL,
    .next_batch = native_next_batch,
    .last_offset = native_last_offset,
    .close = native_close,
    .sites = native_sites,
};

/* ---- encoding --------------------------------------------------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
} buf;

static int buf_reserve(buf *b, size_t more)
{
    if (more > SIZE_MAX - b->len)
        return -1;
    return as_grow((void **)&b->p, &b->cap, b->len + more, 1, 4096);
}

static inline void put_varint(buf *b, uint64_t v)
{
    while (v >= 0x80) {
        b->p[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->p[b->len++] = (uint8_t)v;
}

typedef struct native_w {
    as_outfile *o;
    ZSTD_CCtx *cc;
    buf zout;      /* compressed bytes on their way to the file */
    buf hdr, s, t; /* block header, structure and time columns */
    buf k;         /* the site column (has_sites: the trace has a site table) */
    int has_sites;
    buf pc; /* the pool column (npools > 0: the metadata's `pools`) */
    uint32_t npools;
    uint32_t nev;
    int any_time;
    uint64_t size_cache[SIZE_SLOTS];
    /* stream value -> index: open addressing, index + 1 stored (0 = empty) */
    uint64_t *skeys;
    uint32_t *sidx;
    size_t scap, nstreams;
    uint64_t cur_stream;
    uint64_t nalloc, nevents;
    int64_t prev_time;
} native_w;

static int zwrite(native_w *w, const void *p, size_t n, ZSTD_EndDirective mode, as_trace_error *err)
{
    ZSTD_inBuffer ib = {p, n, 0};
    for (;;) {
        ZSTD_outBuffer ob = {w->zout.p, w->zout.cap, 0};
        size_t r = ZSTD_compressStream2(w->cc, &ob, &ib, mode);
        if (ZSTD_isError(r))
            return as_trace_set_error(err, AS_EIO, w->o->path, w->o->written, 0,
                                      "zstd compression failed: %s", ZSTD_getErrorName(r));
        if (ob.pos) {
            int rc = as_outfile_write(w->o, w->zout.p, ob.pos, err);
            if (rc < 0)
                return rc;
        }
        if (mode == ZSTD_e_continue ? ib.pos == ib.size : r == 0)
            return 0;
    }
}

static int nw_oom(native_w *w, as_trace_error *err)
{
    return as_trace_set_error(err, AS_ENOMEM, w->o->path, UINT64_MAX, 0, "out of memory");
}

static int flush_block(native_w *w, as_trace_error *err)
{
    if (!w->nev)
        return 0;
    w->hdr.len = 0;
    if (buf_reserve(&w->hdr, 30) < 0)
        return nw_oom(w, err);
    put_varint(&w->hdr, w->nev);
    put_varint(&w->hdr, w->s.len);
    put_varint(&w->hdr, w->any_time ? w->t.len : 0);
    if (w->has_sites)
        put_varint(&w->hdr, w->k.len);
    if (w->npools)
        put_varint(&w->hdr, w->pc.len);
    int rc = zwrite(w, w->hdr.p, w->hdr.len, ZSTD_e_continue, err);
    if (!rc)
        rc = zwrite(w, w->s.p, w->s.len, ZSTD_e_continue, err);
    if (!rc && w->any_time)
        rc = zwrite(w, w->t.p, w->t.len, ZSTD_e_continue, err);
    if (!rc && w->has_sites && w->k.len)
        rc = zwrite(w, w->k.p, w->k.len, ZSTD_e_continue, err);
    if (!rc && w->npools && w->pc.len)
        rc = zwrite(w, w->pc.p, w->pc.len, ZSTD_e_continue, err);
    w->nev = 0;
    w->s.len = w->t.len = w->k.len = w->pc.len = 0;
    w->any_time = 0;
    return rc;
}

/* Index of a stream value, adding it (and writing its value once) when new. */
static int stream_index(native_w *w, uint64_t val, uint32_t *idx, int *fresh)
{
    if ((w->nstreams + 1) * 2 > w->scap) {
        size_t nc = w->scap ? w->scap * 2 : 16;
        uint64_t *nk = calloc(nc, sizeof *nk);
        uint32_t *ni = calloc(nc, sizeof *ni);
        if (!nk || !ni) {
            free(nk);
            free(ni);
            return -1;
        }
        for (size_t i = 0; i < w->scap; i++) {
            if (!w->sidx[i])
                continue;
            size_t j = (size_t)((w->skeys[i] * 0x9E3779B97F4A7C15ull) >> 32) & (nc - 1);
            while (ni[j])
                j = (j + 1) & (nc - 1);
            nk[j] = w->skeys[i];
            ni[j] = w->sidx[i];
        }
        free(w->skeys);
        free(w->sidx);
        w->skeys = nk;
        w->sidx = ni;
        w->scap = nc;
    }
    size_t j = (size_t)((val * 0x9E3779B97F4A7C15ull) >> 32) & (w->scap - 1);
    while (w->sidx[j]) {
        if (w->skeys[j] == val) {
            *idx = w->sidx[j] - 1;
            *fresh = 0;
            return 0;
        }
        j = (j + 1) & (w->scap - 1);
    }
    w->skeys[j] = val;
    w->sidx[j] = (uint32_t)(w->nstreams + 1);
    *idx = (uint32_t)w->nstreams++;
    *fresh = 1;
    return 0;
}

static int nw_write(void *st, const as_event *ev, as_trace_error *err)
{
    native_w *w = st;
    /* worst case: stream record (9) + tag + varint (11) or MARK (1 + 2 + 255) */
    if (buf_reserve(&w->s, 300) < 0 || buf_reserve(&w->t, 24) < 0)
        return nw_oom(w, err);
    buf *s = &w->s;
    switch (ev->op) {
    case AS_OP_ALLOC: {
        if (ev->stream != w->cur_stream) {
            uint32_t idx;
            int fresh;
            if (stream_index(w, ev->stream, &idx, &fresh) < 0)
                return nw_oom(w, err);
            if (fresh && w->nstreams > MAX_STREAMS)
                return as_trace_set_error(err, AS_ENOMEM, w->o->path, UINT64_MAX, 0,
                                          "more than %d distinct streams", MAX_STREAMS);
            if (fresh) {
                s->p[s->len++] = (uint8_t)(K_SPECIAL | S_NEW_STREAM << 2);
                for (int i = 0; i < 8; i++)
                    s->p[s->len++] = (uint8_t)(ev->stream >> (8 * i));
            } else {
                s->p[s->len++] = (uint8_t)(K_SPECIAL | S_SET_STREAM << 2);
                put_varint(s, idx);
            }
            w->cur_stream = ev->stream;
        }
        unsigned slot = size_slot(ev->size);
        if (w->size_cache[slot] == ev->size) {
            s->p[s->len++] = (uint8_t)(K_ALLOC | slot << 2);
        } else {
            s->p[s->len++] = (uint8_t)(K_ALLOC | V_SIZE_LITERAL << 2);
            put_varint(s, ev->size);
            w->size_cache[slot] = ev->size;
        }
        if (w->has_sites) {
            if (buf_reserve(&w->k, 10) < 0)
                return nw_oom(w, err);
            put_varint(&w->k, ev->site);
        }
        if (ev->pool > w->npools)
            return as_trace_set_error(err, AS_EINVAL, w->o->path, UINT64_MAX, 0,
                                      "allocation %llu names pool %u, past the %u of the "
                                      "metadata's `pools`",
                                      (unsigned long long)ev->id, ev->pool, w->npools);
        if (w->npools) {
            if (buf_reserve(&w->pc, 10) < 0)
                return nw_oom(w, err);
            put_varint(&w->pc, ev->pool);
        }
        w->nalloc++;
        break;
    }
    case AS_OP_FREE:
    case AS_OP_FREE_REQ: {
        unsigned kind = ev->op == AS_OP_FREE ? K_FREE : K_FREE_REQ;
        uint64_t d = w->nalloc - ev->id; /* >= 1: the writer validated the id */
        if (d <= V_FREE_FAR) {
            s->p[s->len++] = (uint8_t)(kind | (unsigned)(d - 1) << 2);
        } else {
            s->p[s->len++] = (uint8_t)(kind | V_FREE_FAR << 2);
            put_varint(s, d - 64);
        }
        break;
    }
    case AS_OP_EMPTY_CACHE:
        if (ev->pool > w->npools)
            return as_trace_set_error(err, AS_EINVAL, w->o->path, UINT64_MAX, 0,
                                      "empty_cache of pool %u, past the %u of the metadata's "
                                      "`pools`",
                                      ev->pool, w->npools);
        s->p[s->len++] = (uint8_t)(K_SPECIAL | (ev->pool ? S_POOL_EMPTY : S_EMPTY_CACHE) << 2);
        if (ev->pool)
            put_varint(s, ev->pool);
        break;
    case AS_OP_MARK: {
        size_t n = strlen(ev->label);
        s->p[s->len++] = (uint8_t)(K_SPECIAL | S_MARK << 2);
        put_varint(s, n);
        memcpy(s->p + s->len, ev->label, n);
        s->len += n;
        break;
    }
    }
    if (ev->time_us != AS_TIME_NONE && !w->any_time) {
        /* First timed event of the block: the earlier ones had none. */
        if (buf_reserve(&w->t, w->nev + 24) < 0)
            return nw_oom(w, err);
        memset(w->t.p, T_NONE, w->nev);
        w->t.len = w->nev;
        w->any_time = 1;
    }
    if (w->any_time) {
        if (ev->time_us == AS_TIME_NONE) {
            w->t.p[w->t.len++] = T_NONE;
        } else {
            int64_t d = (int64_t)((uint64_t)ev->time_us - (uint64_t)w->prev_time);
            uint64_t z = zz_enc(d);
            if (z <= UINT64_MAX - T_DELTA0) {
                put_varint(&w->t, z + T_DELTA0);
            } else {
                put_varint(&w->t, T_ABS);
                put_varint(&w->t, zz_enc(ev->time_us));
            }
            w->prev_time = ev->time_us;
        }
    }
    w->nev++;
    w->nevents++;
    if (w->nev == BLOCK_EVENTS || w->s.len > (1u << 20))
        return flush_block(w, err);
    return 0;
}

static void nw_free(native_w *w)
{
    ZSTD_freeCCtx(w->cc);
    free(w->zout.p);
    free(w->hdr.p);
    free(w->s.p);
    free(w->t.p);
    free(w->k.p);
    free(w->pc.p);
    free(w->skeys);
    free(w->sidx);
    free(w);
}

/* Version 2's site table and column list, after the metadata (FORMAT.md); npools > 0
 * adds the pool column and its table. */
static int put_sites(buf *h, const as_sites *sites, uint32_t npools)
{
    uint32_t nf = as_sites_nframes(sites), nk = as_sites_count(sites);
    if (buf_reserve(h, 40) < 0)
        return -1;
    put_varint(h, nf);
    for (uint32_t f = 0; f < nf; f++) {
        as_frame fr;
        as_sites_frame(sites, f, &fr);
        size_t fl = strlen(fr.filename), nl = strlen(fr.name);
        if (buf_reserve(h, 40 + fl + nl) < 0)
            return -1;
        put_varint(h, fr.line);
        put_varint(h, fl);
        memcpy(h->p + h->len, fr.filename, fl);
        h->len += fl;
        put_varint(h, nl);
        memcpy(h->p + h->len, fr.name, nl);
        h->len += nl;
    }
    if (buf_reserve(h, 10) < 0)
        return -1;
    put_varint(h, nk);
    for (uint32_t k = 1; k <= nk; k++) {
        const uint32_t *ids;
        size_t n = as_sites_stack(sites, k, &ids);
        if (buf_reserve(h, 10 + 5 * n) < 0)
            return -1;
        put_varint(h, n);
        for (size_t i = 0; i < n; i++)
            put_varint(h, ids[i]);
    }
    if (buf_reserve(h, 20) < 0)
        return -1;
    put_varint(h, (nk ? 1 : 0) + (npools ? 1 : 0)); /* per-allocation columns */
    if (nk)
        put_varint(h, COL_SITE);
    if (npools) { /* the pool column, and its table: the number of private pools */
        put_varint(h, COL_POOL);
        put_varint(h, npools);
    }
    return 0;
}

static int nw_open(as_outfile *o, const as_meta *meta, const as_sites *sites, void **stp,
                   as_trace_error *err)
{
    *stp = NULL;
    native_w *w = calloc(1, sizeof *w);
    if (!w)
        return as_trace_set_error(err, AS_ENOMEM, o->path, UINT64_MAX, 0, "out of memory");
    w->o = o;
    int rc;
    w->cc = ZSTD_createCCtx();
    w->zout.cap = ZSTD_CStreamOutSize();
    w->zout.p = malloc(w->zout.cap);
    uint32_t idx;
    int fresh;
    if (!w->cc || !w->zout.p || stream_index(w, 0, &idx, &fresh) < 0) {
        rc = nw_oom(w, err);
        goto bad;
    }
    ZSTD_CCtx_setParameter(w->cc, ZSTD_c_compressionLevel, ZSTD_LEVEL);
    ZSTD_CCtx_setParameter(w->cc, ZSTD_c_checksumFlag, 1);
    buf *h = &w->hdr;
    size_t need = 8 + 30;
    for (size_t i = 0; meta && i < meta->n; i++)
        need += 20 + strlen(meta->kv[i].key) + strlen(meta->kv[i].value);
    if (buf_reserve(h, need) < 0) {
        rc = nw_oom(w, err);
        goto bad;
    }
    memcpy(h->p, native_magic, 8);
    h->len = 8;
    put_varint(h, NATIVE_VERSION);
    put_varint(h, 0); /* flags */
    put_varint(h, meta ? meta->n : 0);
    for (size_t i = 0; meta && i < meta->n; i++) {
        size_t kl = strlen(meta->kv[i].key), vl = strlen(meta->kv[i].value);
        put_varint(h, kl);
        memcpy(h->p + h->len, meta->kv[i].key, kl);
        h->len += kl;
        put_varint(h, vl);
        memcpy(h->p + h->len, meta->kv[i].value, vl);
        h->len += vl;
    }
    const char *np = meta ? as_meta_get(meta, "pools") : NULL;
    char *end = NULL;
    unsigned long long npl = np ? strtoull(np, &end, 10) : 0;
    if (np && (*np < '0' || *np > '9' || *end || npl > MAX_POOLS)) {
        rc = as_trace_set_error(err, AS_EINVAL, o->path, UINT64_MAX, 0,
                                "metadata `pools` is \"%s\", not a pool count (0..%d)", np,
                                MAX_POOLS);
        goto bad;
    }
    w->npools = (uint32_t)npl;
    if (put_sites(h, sites, w->npools) < 0) {
        rc = nw_oom(w, err);
        goto bad;
    }
    w->has_sites = as_sites_count(sites) > 0;
    if ((rc = zwrite(w, h->p, h->len, ZSTD_e_continue, err)) < 0)
        goto bad;
    *stp = w;
    return 0;
bad:
    nw_free(w);
    return rc;
}

static int nw_close(void *st, as_trace_error *err)
{
    native_w *w = st;
    int rc = flush_block(w, err);
    if (!rc) {
        w->hdr.len = 0;
        if (buf_reserve(&w->hdr, 30) < 0) {
            rc = nw_oom(w, err);
        } else {
            put_varint(&w->hdr, 0);
            put_varint(&w->hdr, w->nevents);
            put_varint(&w->hdr, w->nalloc);
            rc = zwrite(w, w->hdr.p, w->hdr.len, ZSTD_e_end, err);
        }
    }
    nw_free(w);
    return rc;
}

const as_format_writer as_native_writer = {
    .open = nw_open,
    .write = nw_write,
    .close = nw_close,
};
