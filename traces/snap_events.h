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

/* A new, empty log; spill: whether it may use a temporary file (else it grows in memory). */
int as_evlog_new(int spill, as_evlog **out);
/* Appends e: 0, or AS_ENOMEM / AS_EIO (the temporary file could not be written). */
int as_evlog_put(as_evlog *g, const snap_ev *e);
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
