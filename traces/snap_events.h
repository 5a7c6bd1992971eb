/*
 * snap_events.h - the snapshot importer's event log (snap_events.c): the events of a
 * snapshot's first pass, kept until the prehistoric blocks and the metadata (known only at
 * the end) let them be handed out. Internal to traces/. Invariant: what is read back is
 * what was put, in order (an ALLOC's address kept, another op's not, no pool); memory holds
 * one chunk, the rest is in an unlinked temporary file.
 */
#ifndef AS_TRACES_SNAP_EVENTS_H
#define AS_TRACES_SNAP_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "trace.h"

/* An event of the snapshot's trace; ids are fixed up once the prehistoric blocks are known. */
typedef struct snap_ev {
    uint64_t id, size, stream; /* MARK: id is the label's offset in the user-mark pool */
    int64_t time_us;
    uint8_t op;
    uint8_t pre;   /* id is an index into the prehistoric table, not a trace ordinal */
    uint32_t site; /* ALLOC: its call site */
    uint32_t pool; /* ALLOC: its private pool (snap_pools.c), set when handed out */
    uint64_t addr; /* ALLOC: the block's address, which names its pool */
} snap_ev;

typedef struct as_evlog as_evlog;

/* A record of the log (snap_events.c has the format). a: an ALLOC's address, another op's
 * id. */
typedef struct as_ev_rec {
    uint64_t a, size;
    int64_t time;
    uint32_t site;
    uint16_t stream; /* its index in the stream table (with AS_EVF_EXT: unused) */
    uint8_t op, flags;
} as_ev_rec;
enum { AS_EVF_PRE = 1, AS_EVF_EXT = 2 };

/* The writing end of a log, in the log's first bytes (the rest is snap_events.c's own), so
 * that the common put is written inline by the importer, straight from its address slot:
 * a call, a snap_ev built and read again, cost about as much as the record. */
typedef struct as_evlog_w {
    uint8_t *buf;
    size_t n;        /* bytes in buf */
    size_t fast_n;   /* while n < fast_n a record fits and sval[slast] is a stream put (0
                        before the first put and once reading: then as_evlog_put decides) */
    uint64_t count;  /* events put */
    uint64_t allocs; /* ALLOCs of implicit id so far */
    uint64_t *sval;  /* the distinct streams put, by index */
    uint32_t nstream, slast;
    /* reading (as_evlog_peek_plain): the next byte of buf, the end of the records that may
     * be read in place (a spilled log keeps its last EV_MAX_REC bytes for a refill), and
     * the events read */
    size_t pos, stop;
    uint64_t got;
} as_evlog_w;

/* A new, empty log; spill: whether it may use a temporary file (else it grows in memory). */
int as_evlog_new(int spill, as_evlog **out);
/* Appends e: 0, or AS_ENOMEM / AS_EIO (the temporary file could not be written). */
int as_evlog_put(as_evlog *g, const snap_ev *e);
/* as_evlog_put of the event with these fields, its common case inline (the stream the last
 * one put and, for an ALLOC, the next implicit id, not prehistoric): a record of a few
 * stores, where a call and a snap_ev built to be read again cost about as much again. */
static inline int as_evlog_put_fields(as_evlog *g, uint8_t op, uint64_t id, uint8_t pre,
                                      uint64_t size, uint64_t stream, int64_t time_us,
                                      uint32_t site, uint64_t addr)
{
    as_evlog_w *w = (as_evlog_w *)g;
    int alloc = op == AS_OP_ALLOC;
    if (__builtin_expect(w->n >= w->fast_n || w->sval[w->slast] != stream ||
                             (alloc && (pre || id != w->allocs)),
                         0)) {
        snap_ev e = {.op = op,
                     .id = id,
                     .size = size,
                     .stream = stream,
                     .time_us = time_us,
                     .pre = pre,
                     .site = site,
                     .addr = addr};
        return as_evlog_put(g, &e);
    }
    as_ev_rec r = {.a = alloc ? addr : id,
                   .size = size,
                   .time = time_us,
                   .site = site,
                   .stream = (uint16_t)w->slast,
                   .op = op,
                   .flags = (uint8_t)(pre ? AS_EVF_PRE : 0)};
    memcpy(w->buf + w->n, &r, sizeof r);
    w->n += sizeof r;
    w->allocs += (uint64_t)alloc;
    w->count++;
    return 0;
}
/* Reading, the next event when it is a plain record in memory (no extension, a stream of
 * the table): 1 with a copy in *r, nothing consumed; else 0 (as_evlog_get_many reads it).
 * With as_evlog_take_plain, the importer's hand-out writes its event from the record, where
 * a queue of snap_ev cost a copy more. */
static inline int as_evlog_peek_plain(const as_evlog *g, as_ev_rec *r)
{
    const as_evlog_w *w = (const as_evlog_w *)g;
    if (w->pos + sizeof *r > w->stop || w->got >= w->count)
        return 0;
    memcpy(r, w->buf + w->pos, sizeof *r);
    return !(r->flags & AS_EVF_EXT) && r->stream < w->nstream;
}

/* Consumes the record r that as_evlog_peek_plain returned: its id (an ALLOC's, the count of
 * ALLOCs before it), its stream into *stream. */
static inline uint64_t as_evlog_take_plain(as_evlog *g, const as_ev_rec *r, uint64_t *stream)
{
    as_evlog_w *w = (as_evlog_w *)g;
    int alloc = r->op == AS_OP_ALLOC;
    uint64_t id = alloc ? w->allocs : r->a;
    *stream = w->sval[r->stream];
    w->allocs += (uint64_t)alloc;
    w->pos += sizeof *r;
    w->got++;
    return id;
}

/* Events put so far. */
uint64_t as_evlog_count(const as_evlog *g);
/* Starts (or restarts) reading from the first event: 0 or AS_EIO. No put after it. */
int as_evlog_rewind(as_evlog *g);
/* The next event into *e: 1, 0 at the end, or AS_EIO / AS_ECORRUPT (the file changed). */
int as_evlog_get(as_evlog *g, snap_ev *e);
/* The next events, up to cap, into e[0..*n) (*n < cap only at the end or on an error): 0, or
 * AS_EIO / AS_ECORRUPT with the events before the fault in e[0..*n). One call a queue: the
 * hand-out's, where a call an event cost about as much as the record's read. */
int as_evlog_get_many(as_evlog *g, snap_ev *e, size_t cap, size_t *n);
/* Bytes the log holds (memory and file), for the bench and the tests. */
uint64_t as_evlog_bytes(const as_evlog *g);
/* Whether it spilled to a temporary file. */
int as_evlog_spilled(const as_evlog *g);
void as_evlog_free(as_evlog *g);

#endif
