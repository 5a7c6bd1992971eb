/*
 * live.h - the live-allocation table and event validation, shared by the reader, the
 * writer, the native decoder's fused decode-and-validate loop and the RMM importer's
 * pointer map. The fast paths are static inline, so the hot loops run them without calls;
 * the full validator, which words the errors, is in live.c. It uses trace.h and sim/base's
 * id map only: no decoder, no reader, no writer.
 *
 * The validator also keeps the tally of what it accepts (as_trace_tally: counts, the
 * requested bytes and their peak, the distinct streams), so that no caller needs a pass of
 * its own over the events.
 *
 * Invariant: the table holds exactly the live allocations, each in one place, so its
 * memory follows the live count, never the trace length (idmap_impl.h says how).
 */
#ifndef AS_TRACES_LIVE_H
#define AS_TRACES_LIVE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "trace.h"

/* The live allocations, keyed by id: sim/base's id map (idmap_impl.h) over a 32-byte
 * entry, a hash map with a direct-mapped ring in front of it. Ids are ordinals, so the
 * ring slot of id is id mod AS_IDRING: a fresh allocation goes there, and the one it
 * displaces (allocated AS_IDRING allocations earlier and still live) moves into the hash
 * map. Most blocks die young, so most frees hit the ring and never touch the hash. Memory:
 * the ring's constant 40 KiB plus the hash, which follows the number of live allocations.
 * The RMM importer keys the same table by pointer (its ring then only spreads the ids). */
typedef struct as_live_ent {
    uint64_t key; /* id + 1; 0 marks an empty slot */
    uint64_t size;
    uint64_t stream;
    uint64_t out_id; /* the id handed out (differs from the input id only after lenient
                        skips of bad ALLOCs); bit 63 is AS_LIVE_FREEREQ */
    uint32_t slot;   /* its live slot (as_event.slot); the RMM importer's map leaves it 0 */
    uint32_t pad;
} as_live_ent; /* 40 bytes */

#define AS_LIVE_FREEREQ (1ull << 63) /* in out_id: a FREE_REQ was seen */
#define AS_LIVE_ID(e) ((e)->out_id & ~AS_LIVE_FREEREQ)

/* as_live, the table (as_live_add, _get, _del, _count, _bytes, _free), and as_live_hash,
 * its map. */
#define AS_IDMAP_ENT as_live_ent
#define AS_IDMAP_MAP as_live_hash
#define AS_IDMAP_RING as_live
#include "idmap_impl.h"

/* Validation state shared by the reader and the writer. */
typedef struct as_validator {
    as_live live;
    /* Live slots (as_event.slot): 0..nslots-1 handed out so far, the free ones stacked in
     * slot_free (its capacity is at least nslots, so a FREE's push never fails); the most
     * recently freed is reused first. */
    uint32_t *slot_free;
    uint32_t nfree, nslots, slot_cap;
    uint64_t allocs_in;  /* ALLOC events seen (input ordinals) */
    uint64_t allocs_out; /* ALLOC events accepted */
    uint64_t events;     /* events accepted */
    uint64_t warnings;   /* lenient skips */
    int lenient;
    /* The tally of the accepted events (as_trace_tally; allocs_out, events and the live
     * table give the rest): */
    uint64_t requested, peak_requested, min_request;
    uint64_t free_reqs, empty_caches, marks;
    /* The distinct ALLOC streams (as_validator_stream): an open-addressing set of value + 1
     * (0: empty) that always holds the default stream 0 (every format's stream table has
     * it), UINT64_MAX a flag; s_zero: an ALLOC was on stream 0; s_last: the last accepted
     * ALLOC's stream once s_any, which the fast paths compare with. */
    uint64_t *sset;
    size_t sn, scap;
    int smax, s_zero, s_any;
    uint64_t s_last;
} as_validator;

/* Counts an accepted ALLOC's stream when it is not the last one's (s_last). 0, or AS_ENOMEM
 * with msg filled (msg may be NULL when msg_cap is 0): out of host memory, or more than
 * AS_MAX_STREAMS distinct streams, which no trace format holds, so a trace that has more is refused
 * whatever its format. */
int as_validator_stream(as_validator *v, uint64_t stream, char *msg, size_t msg_cap);
/* The tally of the events accepted so far. */
void as_validator_tally(const as_validator *v, as_trace_tally *out);

/* The tally's sums for an accepted ALLOC of size bytes; a FREE_REQ or FREE subtracts its
 * size from `requested` once (at the FREE_REQ when there is one). */
static inline void as_tally_alloc(as_validator *v, uint64_t size)
{
    const uint64_t req = v->requested + size;
    v->requested = req;
    v->peak_requested = req > v->peak_requested ? req : v->peak_requested;
    /* the smallest size: 0 - 1 wraps above every size */
    v->min_request = size - 1 < v->min_request - 1 ? size : v->min_request;
}

/* Moves the live entry at ring slot s to the map, so that a new id can take the slot (the
 * native decoder's fast loop, which adds to the ring in place). 0, or -1 when out of host
 * memory (nothing moved). */
int as_live_evict(as_live *l, as_live_ent *s);

/* Validates ev in place (fills FREE size/stream, renumbers after lenient skips).
 * Returns 0 (accept), 1 (skipped, lenient; counted in warnings) or < 0 with msg filled. */
int as_validate(as_validator *v, as_event *ev, char *msg, size_t msg_cap);
void as_validator_free(as_validator *v);

#define AS_HOT static inline __attribute__((always_inline))

/* The common cases, inlined into the hot loops. Each returns 0 when the event is valid
 * (and fills or renumbers it), -1 with nothing changed when as_validate must judge it.
 * The as_live_*_fast pair is the same for a decoder that builds the event afterwards
 * (traces/native.c's fast loop): they leave v->events to the caller. */
AS_HOT int as_live_alloc_fast(as_validator *v, uint64_t id, uint64_t size, uint64_t stream,
                              uint64_t *out_id, uint32_t *out_slot)
{
    const uint32_t nfree = v->nfree, nslots = v->nslots;
    /* a new slot with no room to stack it when freed: as_validate grows the stack; a
     * stream that is not the last one's is counted (as_validate words a failure) */
    if (id != v->allocs_in || size - 1 >= AS_MAX_ALLOC_SIZE || (!nfree && nslots == v->slot_cap) ||
        ((stream != v->s_last || !v->s_any) && as_validator_stream(v, stream, NULL, 0)))
        return -1;
    as_live_ent *e = as_live_add(&v->live, id);
    if (!e)
        return -1;
    uint32_t slot;
    if (nfree) {
        slot = v->slot_free[nfree - 1];
        v->nfree = nfree - 1;
    } else {
        slot = nslots;
        v->nslots = nslots + 1;
    }
    const uint64_t out = v->allocs_out;
    v->allocs_in = id + 1;
    v->allocs_out = out + 1;
    e->size = size;
    e->stream = stream;
    e->out_id = out;
    e->slot = slot;
    *out_id = out;
    *out_slot = slot;
    as_tally_alloc(v, size);
    return 0;
}

/* A FREE of id: its output id, size, stream and slot. */
AS_HOT int as_live_free_fast(as_validator *v, uint64_t id, uint64_t *out_id, uint64_t *size,
                             uint64_t *stream, uint32_t *out_slot)
{
    as_live_ent *e = as_live_get(&v->live, id);
    if (!e)
        return -1;
    const uint32_t slot = e->slot, nfree = v->nfree;
    *out_id = AS_LIVE_ID(e);
    *size = e->size;
    *stream = e->stream;
    *out_slot = slot;
    v->requested -= e->out_id & AS_LIVE_FREEREQ ? 0 : e->size;
    v->slot_free[nfree] = slot;
    v->nfree = nfree + 1;
    as_live_del(&v->live, e);
    return 0;
}

AS_HOT int validate_alloc(as_validator *v, as_event *ev)
{
    uint64_t out;
    uint32_t slot;
    if (as_live_alloc_fast(v, ev->id, ev->size, ev->stream, &out, &slot))
        return -1;
    ev->id = out;
    ev->slot = slot;
    v->events++;
    return 0;
}

AS_HOT int validate_free(as_validator *v, as_event *ev)
{
    uint64_t out, size, stream;
    uint32_t slot;
    if (as_live_free_fast(v, ev->id, &out, &size, &stream, &slot))
        return -1;
    ev->id = out;
    ev->size = size;
    ev->stream = stream;
    ev->slot = slot;
    v->events++;
    return 0;
}

AS_HOT int validate_free_req(as_validator *v, as_event *ev)
{
    as_live_ent *e = as_live_get(&v->live, ev->id);
    if (!e || (e->out_id & AS_LIVE_FREEREQ))
        return -1;
    e->out_id |= AS_LIVE_FREEREQ;
    ev->id = AS_LIVE_ID(e);
    ev->size = e->size;
    ev->stream = e->stream;
    ev->slot = e->slot;
    v->requested -= e->size;
    v->free_reqs++;
    v->events++;
    return 0;
}

static inline int validate_fast(as_validator *v, as_event *ev)
{
    switch (ev->op) {
    case AS_OP_ALLOC:
        return validate_alloc(v, ev);
    case AS_OP_FREE:
        return validate_free(v, ev);
    case AS_OP_FREE_REQ:
        return validate_free_req(v, ev);
    case AS_OP_EMPTY_CACHE:
        ev->id = ev->size = ev->stream = 0;
        ev->slot = 0;
        v->empty_caches++;
        break;
    case AS_OP_MARK:
        if (!ev->label || strnlen(ev->label, AS_MAX_LABEL + 1) > AS_MAX_LABEL)
            return -1;
        ev->id = ev->size = ev->stream = 0;
        v->marks++;
        break;
    default:
        return -1;
    }
    v->events++;
    return 0;
}

#endif
