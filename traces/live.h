/*
 * live.h - the live-allocation table and event validation, shared by the reader, the
 * writer, the native decoder's fused decode-and-validate loop and the RMM importer's
 * pointer map. The fast paths are static inline, so the hot loops run them without calls;
 * the full validator, which words the errors, is in live.c. It uses trace.h and sim/base's
 * id map only: no decoder, no reader, no writer.
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
 * the ring's constant 32 KiB plus the hash, which follows the number of live allocations.
 * The RMM importer keys the same table by pointer (its ring then only spreads the ids). */
typedef struct as_live_ent {
    uint64_t key; /* id + 1; 0 marks an empty slot */
    uint64_t size;
    uint64_t stream;
    uint64_t out_id; /* the id handed out (differs from the input id only after lenient
                        skips of bad ALLOCs); bit 63 is AS_LIVE_FREEREQ */
} as_live_ent;       /* 32 bytes: two per cache line */

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
    uint64_t allocs_in;  /* ALLOC events seen (input ordinals) */
    uint64_t allocs_out; /* ALLOC events accepted */
    uint64_t events;     /* events accepted */
    uint64_t warnings;   /* lenient skips */
    int lenient;
} as_validator;

/* Validates ev in place (fills FREE size/stream, renumbers after lenient skips).
 * Returns 0 (accept), 1 (skipped, lenient; counted in warnings) or < 0 with msg filled. */
int as_validate(as_validator *v, as_event *ev, char *msg, size_t msg_cap);

#define AS_HOT static inline __attribute__((always_inline))

/* The common cases, inlined into the hot loops. Each returns 0 when the event is valid
 * (and fills or renumbers it), -1 with nothing changed when as_validate must judge it. */
AS_HOT int validate_alloc(as_validator *v, as_event *ev)
{
    if (ev->id != v->allocs_in || ev->size - 1 >= AS_MAX_ALLOC_SIZE)
        return -1;
    as_live_ent *e = as_live_add(&v->live, ev->id);
    if (!e)
        return -1;
    v->allocs_in++;
    e->size = ev->size;
    e->stream = ev->stream;
    e->out_id = v->allocs_out++;
    ev->id = e->out_id;
    v->events++;
    return 0;
}

AS_HOT int validate_free(as_validator *v, as_event *ev)
{
    as_live_ent *e = as_live_get(&v->live, ev->id);
    if (!e)
        return -1;
    ev->id = AS_LIVE_ID(e);
    ev->size = e->size;
    ev->stream = e->stream;
    as_live_del(&v->live, e);
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
        break;
    case AS_OP_MARK:
        if (!ev->label || strnlen(ev->label, AS_MAX_LABEL + 1) > AS_MAX_LABEL)
            return -1;
        ev->id = ev->size = ev->stream = 0;
        break;
    default:
        return -1;
    }
    v->events++;
    return 0;
}

#endif
