/*
 * live.h - the live-allocation table and event validation, shared by the reader, the
 * writer, the native decoder's fused decode-and-validate loop and the RMM importer's
 * pointer map. The fast paths are static inline, so the hot loops run them without calls;
 * the slow paths and the table's growth are in live.c. It uses trace.h only: no decoder,
 * no reader, no writer.
 *
 * Invariant: the ring and the hash map together hold exactly the live allocations, each
 * in one place, so the table's memory follows the live count, never the trace length; the
 * hash runs at load <= 1/2 with no tombstones (backward-shift deletion), so a lookup probes
 * a short run of slots.
 */
#ifndef AS_TRACES_LIVE_H
#define AS_TRACES_LIVE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "trace.h"

/* The live allocations, keyed by id: a hash map (open addressing), with a small
 * direct-mapped ring in front of it. Ids are ordinals, so the ring slot of id is
 * id mod AS_LIVE_RING: a fresh allocation goes there, and the one it displaces (allocated
 * AS_LIVE_RING allocations earlier and still live) moves into the hash map. Most blocks
 * die young, so most frees hit the ring and never touch the hash. Memory: the ring's
 * constant 32 KiB plus the hash, which follows the number of live allocations. */
#define AS_LIVE_RING 1024

typedef struct as_live_ent {
    uint64_t key; /* id + 1; 0 marks an empty slot */
    uint64_t size;
    uint64_t stream;
    uint64_t out_id; /* the id handed out (differs from the input id only after lenient
                        skips of bad ALLOCs); bit 63 is AS_LIVE_FREEREQ */
} as_live_ent;       /* 32 bytes: two per cache line */

#define AS_LIVE_FREEREQ (1ull << 63) /* in out_id: a FREE_REQ was seen */
#define AS_LIVE_ID(e) ((e)->out_id & ~AS_LIVE_FREEREQ)

typedef struct as_live {
    as_live_ent *slot; /* the hash map */
    size_t cap;        /* power of two, or 0 before first use */
    size_t n;          /* live entries in the hash map */
    unsigned shift;
    as_live_ent *ring; /* AS_LIVE_RING slots, allocated with the first insert */
    size_t ring_n;     /* live entries in the ring */
} as_live;

as_live_ent *as_live_find(as_live *t, uint64_t id);
/* Inserts id (must be absent); returns the entry (only its key set: the caller fills size,
 * stream and out_id) or NULL when out of memory. */
as_live_ent *as_live_insert(as_live *t, uint64_t id);
void as_live_remove(as_live *t, as_live_ent *e);
void as_live_free(as_live *t);
/* Bytes the table holds (ring and hash slots): what "bounded memory" tests measure. */
size_t as_live_bytes(const as_live *t);
/* Live allocations in the table. */
size_t as_live_count(const as_live *t);

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

#define AS_LIVE_MIN_CAP 64

/* Rebuilds t's hash with ncap slots (a power of two). 0, or -1 when out of memory (t
 * intact). */
int as_live_rehash(as_live *t, size_t ncap);
/* Allocates the ring. 0, or -1 when out of memory. */
int as_live_ring_init(as_live *t);
/* Moves the ring entry e into the hash map (out of line: the uncommon path). */
int as_live_evict(as_live *t, const as_live_ent *e);

#define AS_HOT static inline __attribute__((always_inline))

static inline size_t live_home(const as_live *t, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> t->shift);
}

AS_HOT as_live_ent *hash_find(as_live *t, uint64_t id)
{
    if (!t->n)
        return NULL;
    uint64_t key = id + 1;
    size_t mask = t->cap - 1;
    for (size_t j = live_home(t, key);; j = (j + 1) & mask) {
        if (t->slot[j].key == key)
            return &t->slot[j];
        if (!t->slot[j].key)
            return NULL;
    }
}

static inline as_live_ent *hash_insert(as_live *t, uint64_t id)
{
    /* Load factor at most 1/2: short probe runs matter more than the bytes. */
    if ((t->n + 1) * 2 > t->cap && as_live_rehash(t, t->cap ? t->cap * 2 : AS_LIVE_MIN_CAP) < 0)
        return NULL;
    uint64_t key = id + 1;
    size_t mask = t->cap - 1, j = live_home(t, key);
    while (t->slot[j].key)
        j = (j + 1) & mask;
    as_live_ent *e = &t->slot[j];
    e->key = key; /* the caller sets every other field */
    t->n++;
    return e;
}

static inline void hash_remove(as_live *t, as_live_ent *e)
{
    /* Backward-shift deletion: no tombstones, so probe runs never degrade. */
    size_t mask = t->cap - 1, i = (size_t)(e - t->slot), j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!t->slot[j].key)
            break;
        size_t k = live_home(t, t->slot[j].key);
        if (((j - k) & mask) >= ((j - i) & mask)) {
            t->slot[i] = t->slot[j];
            i = j;
        }
    }
    t->slot[i].key = 0;
    t->n--;
    /* Shrink after a spike of live allocations, with hysteresis (grow at 1/2, shrink at
     * 1/16), so memory follows the live count down as well as up. */
    if (t->cap > AS_LIVE_MIN_CAP * 4 && t->n * 16 < t->cap)
        (void)as_live_rehash(t, t->cap / 4); /* on failure the bigger table stays valid */
}

static inline int live_in_ring(const as_live *t, const as_live_ent *e)
{
    /* compared as integers: e may point into the hash array instead */
    uintptr_t p = (uintptr_t)e, r = (uintptr_t)t->ring;
    return p >= r && p < r + AS_LIVE_RING * sizeof *e;
}

AS_HOT as_live_ent *live_find(as_live *t, uint64_t id)
{
    if (t->ring) {
        as_live_ent *e = &t->ring[id & (AS_LIVE_RING - 1)];
        if (e->key == id + 1)
            return e;
    }
    return hash_find(t, id);
}

/* Inserts id (absent from the table); returns its entry, only the key set. */
AS_HOT as_live_ent *live_insert(as_live *t, uint64_t id)
{
    if (!t->ring && as_live_ring_init(t) < 0)
        return NULL;
    as_live_ent *e = &t->ring[id & (AS_LIVE_RING - 1)];
    if (e->key) {
        /* still live from AS_LIVE_RING allocations ago: it moves to the hash map */
        if (as_live_evict(t, e) < 0)
            return NULL;
    } else {
        t->ring_n++;
    }
    e->key = id + 1;
    return e;
}

AS_HOT void live_remove(as_live *t, as_live_ent *e)
{
    if (live_in_ring(t, e)) {
        e->key = 0;
        t->ring_n--;
    } else {
        hash_remove(t, e);
    }
}

/* The common cases, inlined into the hot loops. Each returns 0 when the event is valid
 * (and fills or renumbers it), -1 with nothing changed when as_validate must judge it. */
AS_HOT int validate_alloc(as_validator *v, as_event *ev)
{
    if (ev->id != v->allocs_in || ev->size - 1 >= AS_MAX_ALLOC_SIZE)
        return -1;
    as_live_ent *e = live_insert(&v->live, ev->id);
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
    as_live_ent *e = live_find(&v->live, ev->id);
    if (!e)
        return -1;
    ev->id = AS_LIVE_ID(e);
    ev->size = e->size;
    ev->stream = e->stream;
    live_remove(&v->live, e);
    v->events++;
    return 0;
}

AS_HOT int validate_free_req(as_validator *v, as_event *ev)
{
    as_live_ent *e = live_find(&v->live, ev->id);
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
