/*
 * snap_events.c - the snapshot importer's event log: a trace's events as fixed 32-byte
 * records (an ALLOC's id is the count of ALLOCs before it, its stream an index into the
 * log's table of distinct streams), 64 for the rare event those do not fit (an ALLOC out of
 * order, a stream beyond the table): the second half holds its id and stream whole. A
 * record is written and read with a few stores and loads, where the varints of the
 * compact form cost about 300 instructions an event (sim/README.md, Performance). Up to one
 * chunk stays in memory; past it the chunks go to a temporary file, created and unlinked
 * at once in $TMPDIR (else /tmp), so the importer's memory does not follow the trace's
 * length and nothing is left behind. Without a temporary file (none allowed, or none could
 * be made) the log grows in memory. The common record is written by as_evlog_put_fields,
 * inline in the importer (snap_events.h: the writing end, as_evlog_w, leads the log's
 * struct); the rest by as_evlog_put. Invariant: as_evlog_get returns the sequence put,
 * whatever its values, with each event's op, id, pre, size, stream, time and site as put,
 * an ALLOC's address (another op's reads back 0), and pool 0 (it is set when handed out).
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
#define EV_MAX_REC 64        /* a record's most bytes (one with its extension) */
#define EV_STREAMS 4096u     /* distinct streams the table names (more: extensions) */
#define EV_STREAMS_FIRST 16u /* the table's first room, doubled up to EV_STREAMS */

typedef as_ev_rec ev_rec;

/* The second half of a record with EVF_EXT. */
typedef struct ev_ext {
    uint64_t id, stream, pad[2];
} ev_ext;

_Static_assert(sizeof(ev_rec) == 32 && sizeof(ev_ext) == 32, "records are 32 bytes");

enum { EVF_PRE = AS_EVF_PRE, EVF_EXT = AS_EVF_EXT };

struct as_evlog {
    /* first (as_evlog_put_fields reads it): buf; n, writing: bytes in buf, reading: bytes
     * valid in buf; fast_n; count, events put; allocs, ALLOCs of implicit id so far (both
     * sides count them); sval, the distinct streams put by index; nstream; slast; reading:
     * pos, stop, got (the events read) */
    as_evlog_w w;
    size_t cap;
    int spill, fd;   /* fd: the temporary file, -1 before the first spill */
    uint64_t filed;  /* bytes in the file */
    uint64_t read_off;   /* reading: bytes of the file read into buf */
    int reading;
    uint16_t *shash; /* an open-addressing set of stream index + 1, 2 * scap, 2^sbits */
    uint32_t scap;
    unsigned sbits;
};

int as_evlog_new(int spill, as_evlog **out)
{
    as_evlog *g = calloc(1, sizeof *g);
    *out = NULL;
    if (!g || !(g->w.buf = malloc(EV_FIRST)) ||
        !(g->w.sval = malloc(EV_STREAMS_FIRST * sizeof *g->w.sval)) ||
        !(g->shash = calloc(2 * EV_STREAMS_FIRST, sizeof *g->shash))) {
        if (g) {
            free(g->w.buf);
            free(g->w.sval);
        }
        free(g);
        return AS_ENOMEM;
    }
    g->cap = EV_FIRST;
    g->scap = EV_STREAMS_FIRST;
    g->sbits = 5; /* 2 * EV_STREAMS_FIRST slots */
    g->spill = spill;
    g->fd = -1;
    *out = g;
    return 0;
}

/* Stream v's home slot in a hash set of 2^bits slots (the product's top bits). */
static size_t stream_home(uint64_t v, unsigned bits)
{
    return (size_t)((v * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

/* The table with twice the room (a trace has a few streams: it starts at
 * EV_STREAMS_FIRST, 384 bytes, where 48 KiB were allocated and 16 KiB zeroed): 0, or -1
 * when the host has no memory for it (the caller writes the stream whole). */
static int stream_grow(as_evlog *g)
{
    uint32_t nc = g->scap * 2;
    uint64_t *nv = realloc(g->w.sval, nc * sizeof *nv);
    if (!nv)
        return -1;
    g->w.sval = nv;
    uint16_t *nh = calloc(2 * (size_t)nc, sizeof *nh);
    if (!nh)
        return -1;
    size_t mask = 2 * (size_t)nc - 1;
    for (uint32_t i = 0; i < g->w.nstream; i++) {
        size_t j = stream_home(g->w.sval[i], g->sbits + 1);
        while (nh[j])
            j = (j + 1) & mask;
        nh[j] = (uint16_t)(i + 1);
    }
    free(g->shash);
    g->shash = nh;
    g->scap = nc;
    g->sbits++;
    return 0;
}

/* stream_index past the last stream: its hash set. */
static __attribute__((noinline)) uint32_t stream_find(as_evlog *g, uint64_t v)
{
    size_t mask = ((size_t)1 << g->sbits) - 1;
    for (size_t j = stream_home(v, g->sbits);; j = (j + 1) & mask) {
        uint32_t k = g->shash[j];
        if (k && g->w.sval[k - 1] == v)
            return g->w.slast = k - 1;
        if (!k) {
            if (g->w.nstream >= g->scap) {
                if (g->scap >= EV_STREAMS || stream_grow(g))
                    return EV_STREAMS;
                return stream_find(g, v); /* (once: the grown table has room) */
            }
            g->w.sval[g->w.nstream] = v;
            g->shash[j] = (uint16_t)(g->w.nstream + 1);
            return g->w.slast = g->w.nstream++;
        }
    }
}

/* The table index of stream v, added when new: EV_STREAMS when the table is full. */
static inline uint32_t stream_index(as_evlog *g, uint64_t v)
{
    if (g->w.nstream && g->w.sval[g->w.slast] == v)
        return g->w.slast;
    return stream_find(g, v);
}

static int grow_buf(as_evlog *g)
{
    size_t cap = g->cap * 2;
    uint8_t *nb = cap > g->cap ? realloc(g->w.buf, cap) : NULL;
    if (!nb)
        return AS_ENOMEM;
    g->w.buf = nb, g->cap = cap;
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
static __attribute__((noinline)) int make_room(as_evlog *g)
{
    if (g->cap < EV_CHUNK || !g->spill)
        return grow_buf(g);
    if (g->fd < 0 && open_spill(g))
        g->spill = 0; /* no temporary file here: memory, as before */
    if (g->spill) {
        if (write_all(g->fd, g->w.buf, g->w.n))
            return AS_EIO;
        g->filed += g->w.n;
        g->w.n = 0;
        return 0;
    }
    return grow_buf(g);
}

int as_evlog_put(as_evlog *g, const snap_ev *e)
{
    int rc;
    if (g->reading)
        return AS_EINVAL;
    if (g->cap - g->w.n < EV_MAX_REC && (rc = make_room(g)))
        return rc;
    int alloc = e->op == AS_OP_ALLOC;
    uint32_t si = stream_index(g, e->stream);
    int ext = si == EV_STREAMS || (alloc && (e->pre || e->id != g->w.allocs));
    ev_rec r = {.a = alloc ? e->addr : e->id,
                .size = e->size,
                .time = e->time_us,
                .site = e->site,
                .stream = (uint16_t)(ext ? 0 : si),
                .op = e->op,
                .flags = (uint8_t)((e->pre ? EVF_PRE : 0) | (ext ? EVF_EXT : 0))};
    memcpy(g->w.buf + g->w.n, &r, sizeof r);
    g->w.n += sizeof r;
    if (ext) {
        ev_ext x = {.id = e->id, .stream = e->stream};
        memcpy(g->w.buf + g->w.n, &x, sizeof x);
        g->w.n += sizeof x;
    } else if (alloc) {
        g->w.allocs++;
    }
    g->w.count++;
    g->w.fast_n = g->w.nstream ? g->cap - EV_MAX_REC + 1 : 0;
    return 0;
}

uint64_t as_evlog_count(const as_evlog *g)
{
    return g->w.count;
}

uint64_t as_evlog_bytes(const as_evlog *g)
{
    return g->filed + (g->reading && g->fd >= 0 ? 0 : g->w.n);
}

int as_evlog_spilled(const as_evlog *g)
{
    return g->fd >= 0;
}

/* Reading: the end of the records of buf that may be read in place (up to the last
 * EV_MAX_REC bytes of a spilled buffer, which a refill keeps). */
static size_t read_stop(const as_evlog *g)
{
    size_t end = g->w.n;
    return g->fd >= 0 && g->read_off < g->filed ? (end > EV_MAX_REC ? end - EV_MAX_REC : 0) : end;
}

/* Reading a spilled log: at least EV_MAX_REC unread bytes in buf, unless the file ends. */
static int refill(as_evlog *g)
{
    memmove(g->w.buf, g->w.buf + g->w.pos, g->w.n - g->w.pos);
    g->w.n -= g->w.pos;
    g->w.pos = 0;
    while (g->w.n < g->cap && g->read_off < g->filed) {
        size_t want = g->cap - g->w.n;
        if (want > g->filed - g->read_off)
            want = (size_t)(g->filed - g->read_off);
        ssize_t r = pread(g->fd, g->w.buf + g->w.n, want, (off_t)g->read_off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return AS_EIO;
        g->w.n += (size_t)r;
        g->read_off += (uint64_t)r;
    }
    g->w.stop = read_stop(g);
    return 0;
}

int as_evlog_rewind(as_evlog *g)
{
    if (!g->reading && g->fd >= 0 && g->w.n) { /* the last chunk goes to the file too */
        if (write_all(g->fd, g->w.buf, g->w.n))
            return AS_EIO;
        g->filed += g->w.n;
        g->w.n = 0;
    }
    g->reading = 1;
    g->w.fast_n = 0;
    g->w.pos = 0;
    g->w.got = 0;
    g->w.allocs = 0;
    if (g->fd >= 0) {
        g->w.n = 0;
        g->read_off = 0;
        return refill(g);
    }
    g->w.stop = read_stop(g);
    return 0;
}

int as_evlog_get_many(as_evlog *g, snap_ev *e, size_t cap, size_t *n)
{
    size_t k = 0;
    int rc = 0;
    if (cap > g->w.count - g->w.got)
        cap = (size_t)(g->w.count - g->w.got);
    while (k < cap && !rc) {
        if (g->fd >= 0 && g->w.n - g->w.pos < EV_MAX_REC && refill(g)) {
            rc = AS_EIO;
            break;
        }
        /* in locals (the stores to e[] could alias the log's fields): the records of buf, up
         * to the last EV_MAX_REC bytes of a spilled buffer, which a refill keeps */
        const uint8_t *buf = g->w.buf;
        const uint64_t *sval = g->w.sval;
        size_t pos = g->w.pos, end = g->w.n, stop = read_stop(g);
        uint64_t allocs = g->w.allocs;
        const uint32_t nstream = g->w.nstream;
        do {
            ev_rec r;
            ev_ext x = {0};
            if (end - pos < sizeof r) {
                rc = AS_ECORRUPT;
                break;
            }
            memcpy(&r, buf + pos, sizeof r);
            int alloc = r.op == AS_OP_ALLOC, ext = (r.flags & EVF_EXT) != 0;
            if (ext) {
                if (end - pos < sizeof r + sizeof x) {
                    rc = AS_ECORRUPT;
                    break;
                }
                memcpy(&x, buf + pos + sizeof r, sizeof x);
            } else if (r.stream >= nstream) {
                rc = AS_ECORRUPT;
                break;
            }
            pos += ext ? sizeof r + sizeof x : sizeof r;
            e[k++] = (snap_ev){.op = r.op,
                               .pre = (r.flags & EVF_PRE) != 0,
                               .id = !alloc ? r.a
                                     : ext  ? x.id
                                            : allocs++,
                               .size = r.size,
                               .stream = ext ? x.stream : sval[r.stream],
                               .time_us = r.time,
                               .site = r.site,
                               .addr = alloc ? r.a : 0};
        } while (k < cap && pos < stop);
        g->w.pos = pos;
        g->w.allocs = allocs;
    }
    g->w.got += k;
    *n = k;
    return rc;
}

int as_evlog_get(as_evlog *g, snap_ev *e)
{
    size_t n;
    int rc = as_evlog_get_many(g, e, 1, &n);
    return rc ? rc : (int)n;
}

void as_evlog_free(as_evlog *g)
{
    if (!g)
        return;
    if (g->fd >= 0)
        close(g->fd);
    free(g->w.buf);
    free(g->w.sval);
    free(g->shash);
    free(g);
}
