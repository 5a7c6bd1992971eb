/*
 * snap_events.c - the snapshot importer's event log: a trace's events as compact records
 * (a header byte and prefix varints, each field a delta from the last event's where that
 * is small: an ALLOC's id is the count of ALLOCs before it, a FREE's the distance back to
 * its ALLOC, the time a difference, the stream a bit when unchanged), 6-14 bytes an event
 * on real snapshots instead of the 56 of a snap_ev. Up to one chunk stays in memory; past
 * it the chunks go to a temporary file, created and unlinked at once in $TMPDIR (else
 * /tmp), so the importer's memory does not follow the trace's length and nothing is left
 * behind. Without a temporary file (none allowed, or none could be made) the log grows in
 * memory. Invariant: as_evlog_get returns the sequence put, whatever its values (a record
 * that breaks a delta's assumption is written whole), with each event's fields that its op
 * uses: op, id, pre, size, stream, time, site; an ALLOC's address (another op's reads back
 * 0, and pool always does: it is set when handed out).
 */
#include "snap_events.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "trace.h"

#define EV_CHUNK (1u << 20)  /* bytes kept in memory before the log spills */
#define EV_FIRST (16u << 10) /* the buffer's first size, doubled up to EV_CHUNK */
#define EV_MAX_REC 96        /* a record's most bytes (3 and 6 varints of 9) and a store's 8 */

/* Header byte: the op in bits 0-2 (EV_WHOLE: every field follows as it is), then flags. */
enum { EV_WHOLE = 7 };
enum { EVF_PRE = 8, EVF_SAME_STREAM = 16, EVF_NO_TIME = 32 };

struct as_evlog {
    uint8_t *buf;
    size_t n, cap;              /* writing: bytes in buf; reading: bytes valid in buf */
    size_t pos;                 /* reading: next byte of buf */
    int spill, fd;              /* fd: the temporary file, -1 before the first spill */
    uint64_t count, got, filed; /* events put, events read, bytes in the file */
    uint64_t read_off;          /* reading: bytes of the file read into buf */
    int reading;
    /* the running state both sides keep (the last event's fields) */
    uint64_t allocs, stream, addr;
    int64_t time;
};

int as_evlog_new(int spill, as_evlog **out)
{
    as_evlog *g = calloc(1, sizeof *g);
    *out = NULL;
    if (!g || !(g->buf = malloc(EV_FIRST))) {
        free(g);
        return AS_ENOMEM;
    }
    g->cap = EV_FIRST;
    g->spill = spill;
    g->fd = -1;
    *out = g;
    return 0;
}

/* A number as a prefix varint: the trailing one bits of the first byte count the bytes
 * that follow (t of them: 7 * (t + 1) bits of value, little-endian, above the t + 1 bits
 * of length), and 0xFF starts 8 raw bytes. Written and read with one 8-byte store or load
 * (the buffer keeps EV_MAX_REC bytes of room). */
static inline uint8_t *put_v(uint8_t *p, uint64_t v)
{
    unsigned bits = 64 - (unsigned)__builtin_clzll(v | 1);
    if (bits > 56) {
        *p = 0xff;
        memcpy(p + 1, &v, 8);
        return p + 9;
    }
    unsigned t = (bits - 1) / 7;
    uint64_t u = v << (t + 1) | ((1ull << t) - 1);
    memcpy(p, &u, 8);
    return p + t + 1;
}

static uint64_t zz(uint64_t d) /* a difference taken mod 2^64, as a small unsigned number */
{
    return (d << 1) ^ (uint64_t) - (int64_t)(d >> 63);
}

static uint64_t unzz(uint64_t z)
{
    return (z >> 1) ^ (uint64_t) - (int64_t)(z & 1);
}

static int grow_buf(as_evlog *g)
{
    size_t cap = g->cap * 2;
    uint8_t *nb = cap > g->cap ? realloc(g->buf, cap) : NULL;
    if (!nb)
        return AS_ENOMEM;
    g->buf = nb, g->cap = cap;
    return 0;
}

/* The temporary file, unlinked as soon as it exists. 0, or -1 (no spill then). */
static int open_spill(as_evlog *g)
{
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/allocsim-events-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    unlink(path);
    g->fd = fd;
    return 0;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return AS_EIO;
        p += w, n -= (size_t)w;
    }
    return 0;
}

/* Room for one more record: a larger buffer up to a chunk, then the chunk to the file, or
 * (no file) a larger buffer. */
static int make_room(as_evlog *g)
{
    if (g->cap < EV_CHUNK || !g->spill)
        return grow_buf(g);
    if (g->fd < 0 && open_spill(g))
        g->spill = 0; /* no temporary file here: memory, as before */
    if (g->spill) {
        if (write_all(g->fd, g->buf, g->n))
            return AS_EIO;
        g->filed += g->n;
        g->n = 0;
        return 0;
    }
    return grow_buf(g);
}

int as_evlog_put(as_evlog *g, const snap_ev *e)
{
    int rc;
    if (g->reading)
        return AS_EINVAL;
    if (g->cap - g->n < EV_MAX_REC && (rc = make_room(g)))
        return rc;
    uint8_t *p = g->buf + g->n, *h = p++;
    int mem = e->op == AS_OP_ALLOC || e->op == AS_OP_FREE || e->op == AS_OP_FREE_REQ;
    int whole = e->op > AS_OP_MARK || (e->op == AS_OP_ALLOC && (e->pre || e->id != g->allocs)) ||
                (e->op != AS_OP_ALLOC && e->site) ||
                (e->op == AS_OP_FREE && !e->pre && e->id >= g->allocs) ||
                (e->op == AS_OP_FREE_REQ && !e->pre && e->id >= g->allocs) ||
                (e->op == AS_OP_EMPTY_CACHE && e->time_us != AS_TIME_NONE) ||
                (!mem && (e->size || e->stream || e->site || e->addr || e->pre));
    if (whole) {
        *h = EV_WHOLE;
        *p++ = e->op;
        *p++ = e->pre;
        p = put_v(p, e->id);
        p = put_v(p, e->size);
        p = put_v(p, e->stream);
        p = put_v(p, (uint64_t)e->time_us);
        p = put_v(p, e->site);
        p = put_v(p, e->addr);
        g->n = (size_t)(p - g->buf);
        g->count++;
        return 0; /* the running state is left as it was: the reader does the same */
    }
    uint8_t f = e->op;
    if (e->op == AS_OP_EMPTY_CACHE) {
        p = put_v(p, e->id);
    } else {
        if (e->op == AS_OP_MARK)
            p = put_v(p, e->id);
        else if (e->op != AS_OP_ALLOC)
            p = put_v(p, e->pre ? e->id : g->allocs - 1 - e->id);
        if (e->time_us == AS_TIME_NONE)
            f |= EVF_NO_TIME;
        else
            p = put_v(p, zz((uint64_t)e->time_us - (uint64_t)g->time)), g->time = e->time_us;
    }
    if (mem) {
        f |= e->pre ? EVF_PRE : 0;
        p = put_v(p, e->size);
        if (e->stream == g->stream)
            f |= EVF_SAME_STREAM;
        else
            p = put_v(p, e->stream), g->stream = e->stream;
    }
    if (e->op == AS_OP_ALLOC) {
        p = put_v(p, e->site);
        p = put_v(p, zz(e->addr - g->addr));
        g->addr = e->addr;
        g->allocs++;
    }
    *h = f;
    g->n = (size_t)(p - g->buf);
    g->count++;
    return 0;
}

uint64_t as_evlog_count(const as_evlog *g)
{
    return g->count;
}

uint64_t as_evlog_bytes(const as_evlog *g)
{
    return g->filed + (g->reading && g->fd >= 0 ? 0 : g->n);
}

int as_evlog_spilled(const as_evlog *g)
{
    return g->fd >= 0;
}

/* Reading a spilled log: at least EV_MAX_REC unread bytes in buf, unless the file ends. */
static int refill(as_evlog *g)
{
    memmove(g->buf, g->buf + g->pos, g->n - g->pos);
    g->n -= g->pos;
    g->pos = 0;
    while (g->n < g->cap && g->read_off < g->filed) {
        size_t want = g->cap - g->n;
        if (want > g->filed - g->read_off)
            want = (size_t)(g->filed - g->read_off);
        ssize_t r = pread(g->fd, g->buf + g->n, want, (off_t)g->read_off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return AS_EIO;
        g->n += (size_t)r;
        g->read_off += (uint64_t)r;
    }
    return 0;
}

int as_evlog_rewind(as_evlog *g)
{
    if (!g->reading && g->fd >= 0 && g->n) { /* the last chunk goes to the file too */
        if (write_all(g->fd, g->buf, g->n))
            return AS_EIO;
        g->filed += g->n;
        g->n = 0;
    }
    g->reading = 1;
    g->pos = 0;
    g->got = 0;
    g->allocs = g->stream = g->addr = 0;
    g->time = 0;
    if (g->fd >= 0) {
        g->n = 0;
        g->read_off = 0;
        return refill(g);
    }
    return 0;
}

/* A prefix varint at *pp (put_v; the caller made sure 9 bytes are readable). */
static inline uint64_t get_v(const uint8_t **pp)
{
    uint64_t u;
    memcpy(&u, *pp, 8);
    unsigned t = (unsigned)__builtin_ctzll(~u | 0x100); /* 8: 0xFF, raw bytes follow */
    if (t == 8) {
        memcpy(&u, *pp + 1, 8);
        *pp += 9;
        return u;
    }
    *pp += t + 1;
    return (u << (56 - 8 * t)) >> (57 - 7 * t); /* bits t + 1 .. 8 (t + 1) of u */
}

/* One record at p (EV_MAX_REC bytes readable) into *e: the bytes it took. */
static size_t decode(as_evlog *g, const uint8_t *p, snap_ev *e)
{
    const uint8_t *start = p;
    uint8_t f = *p++;
    *e = (snap_ev){.op = f & 7, .time_us = AS_TIME_NONE};
    if ((f & 7) == EV_WHOLE) {
        e->op = *p++;
        e->pre = *p++;
        e->id = get_v(&p), e->size = get_v(&p), e->stream = get_v(&p);
        e->time_us = (int64_t)get_v(&p);
        e->site = (uint32_t)get_v(&p), e->addr = get_v(&p);
        return (size_t)(p - start);
    }
    if (e->op == AS_OP_EMPTY_CACHE) {
        e->id = get_v(&p);
        return (size_t)(p - start);
    }
    if (e->op != AS_OP_ALLOC) {
        uint64_t v = get_v(&p);
        e->pre = (f & EVF_PRE) != 0;
        e->id = e->op == AS_OP_MARK || e->pre ? v : g->allocs - 1 - v;
    }
    if (!(f & EVF_NO_TIME))
        g->time = e->time_us = (int64_t)((uint64_t)g->time + unzz(get_v(&p)));
    if (e->op == AS_OP_MARK)
        return (size_t)(p - start);
    e->size = get_v(&p);
    g->stream = e->stream = f & EVF_SAME_STREAM ? g->stream : get_v(&p);
    if (e->op == AS_OP_ALLOC) {
        e->site = (uint32_t)get_v(&p);
        g->addr = e->addr = g->addr + unzz(get_v(&p));
        e->id = g->allocs++;
    }
    return (size_t)(p - start);
}

int as_evlog_get(as_evlog *g, snap_ev *e)
{
    if (g->got >= g->count)
        return 0;
    if (g->fd >= 0 && g->n - g->pos < EV_MAX_REC && refill(g))
        return AS_EIO;
    size_t left = g->n - g->pos, k;
    if (left >= EV_MAX_REC) {
        k = decode(g, g->buf + g->pos, e);
    } else { /* the log's last bytes: decoded from a zero-padded copy, never past them */
        uint8_t tail[EV_MAX_REC + 16] = {0};
        memcpy(tail, g->buf + g->pos, left);
        if ((k = decode(g, tail, e)) > left)
            return AS_ECORRUPT;
    }
    g->pos += k;
    g->got++;
    return 1;
}

void as_evlog_free(as_evlog *g)
{
    if (!g)
        return;
    if (g->fd >= 0)
        close(g->fd);
    free(g->buf);
    free(g);
}
