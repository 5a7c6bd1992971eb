/*
 * idmap.h - an open-addressing hash map from allocation id to two 64-bit words, used by
 * the engine (id -> policy handle, block size) and by `allocsim info` (id -> ALLOC event).
 *
 * Linear probing with backward-shift deletion (no tombstones), Fibonacci hashing: ids are
 * ordinals and long-lived ones (parameters) come in long consecutive runs, which an
 * identity-like hash would turn into one long cluster that every later window of ids runs
 * into. The table grows at load 1/2 and shrinks at load 1/16, so its memory follows the
 * number of live allocations, never the trace length. Static inline on purpose, so the
 * engine's per-event path has no call. Part of sim/base/ (uses nothing else in the
 * project), so that the trace validator's table (traces/live_internal.h) can become this
 * one structure.
 */
#ifndef AS_BASE_IDMAP_H
#define AS_BASE_IDMAP_H

#include <stdint.h>
#include <stdlib.h>

typedef struct as_idmap_ent {
    uint64_t key; /* id + 1; 0 marks an empty slot */
    uint64_t a, b;
} as_idmap_ent;

typedef struct as_idmap {
    as_idmap_ent *slot;
    uint64_t mask;  /* cap - 1, cap a power of two (0 before first use) */
    uint64_t n;     /* live entries */
    unsigned shift; /* 64 - log2(cap) */
} as_idmap;

#define AS_IDMAP_MIN_CAP 64u

static inline uint64_t as_idmap_home(const as_idmap *m, uint64_t key)
{
    return (key * 0x9E3779B97F4A7C15ull) >> m->shift;
}

static inline int as_idmap_resize(as_idmap *m, uint64_t cap)
{
    as_idmap_ent *ns = calloc(cap, sizeof *ns);
    if (!ns)
        return -1;
    as_idmap old = *m;
    unsigned lg = 0;
    while ((1ull << lg) < cap)
        lg++;
    m->slot = ns;
    m->mask = cap - 1;
    m->shift = 64 - lg;
    if (old.slot) {
        for (uint64_t i = 0; i <= old.mask; i++) {
            if (!old.slot[i].key)
                continue;
            uint64_t j = as_idmap_home(m, old.slot[i].key);
            while (ns[j].key)
                j = (j + 1) & m->mask;
            ns[j] = old.slot[i];
        }
        free(old.slot);
    }
    return 0;
}

/* Inserts id (which must be absent). Returns 0, or -1 when out of host memory. */
static inline int as_idmap_put(as_idmap *m, uint64_t id, uint64_t a, uint64_t b)
{
    if (!m->slot || (m->n + 1) * 2 > m->mask + 1) {
        if (as_idmap_resize(m, m->slot ? (m->mask + 1) * 2 : AS_IDMAP_MIN_CAP))
            return -1;
    }
    uint64_t key = id + 1, j = as_idmap_home(m, key);
    while (m->slot[j].key)
        j = (j + 1) & m->mask;
    m->slot[j] = (as_idmap_ent){.key = key, .a = a, .b = b};
    m->n++;
    return 0;
}

/* The entry for id, or NULL. The pointer is valid until the next put or del. */
static inline as_idmap_ent *as_idmap_get(const as_idmap *m, uint64_t id)
{
    if (!m->slot)
        return NULL;
    uint64_t key = id + 1, j = as_idmap_home(m, key);
    for (;;) {
        as_idmap_ent *e = &m->slot[j];
        if (e->key == key)
            return e;
        if (!e->key)
            return NULL;
        j = (j + 1) & m->mask;
    }
}

/* Removes an entry returned by as_idmap_get. Backward shift keeps every remaining key
 * reachable from its home slot without tombstones. */
static inline void as_idmap_del(as_idmap *m, as_idmap_ent *e)
{
    uint64_t i = (uint64_t)(e - m->slot), j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        if (!m->slot[j].key)
            break;
        uint64_t h = as_idmap_home(m, m->slot[j].key);
        /* Slot j's entry may move to the hole at i only if its home is not in (i, j]. */
        if (((j - h) & m->mask) >= ((j - i) & m->mask)) {
            m->slot[i] = m->slot[j];
            i = j;
        }
    }
    m->slot[i].key = 0;
    m->n--;
    /* Shrinking never fails the caller: on no memory the table just stays large. */
    if (m->mask + 1 > AS_IDMAP_MIN_CAP && m->n * 16 < m->mask + 1) {
        uint64_t cap = (m->mask + 1) / 4;
        (void)as_idmap_resize(m, cap < AS_IDMAP_MIN_CAP ? AS_IDMAP_MIN_CAP : cap);
    }
}

static inline void as_idmap_free(as_idmap *m)
{
    free(m->slot);
    *m = (as_idmap){0};
}

/* ---- as_idring: the engine's map, tuned for ordinal ids -----------------------------------
 * Most allocations die young, and ids are handed out in order, so the recent ids live in a
 * direct-mapped ring (slot id mod AS_IDRING, no hashing, no probing, written in sequence).
 * An id still live when a newer one needs its slot moves to the hash map, where the few
 * long-lived allocations (parameters, caches) end up. Memory: the ring (fixed) plus a hash
 * map proportional to the long-lived allocations. */

#define AS_IDRING 1024u

typedef struct as_idring {
    as_idmap_ent *ring; /* AS_IDRING slots, allocated on first put */
    as_idmap far;
    uint64_t n; /* live entries, ring and map */
} as_idring;

static inline int as_idring_put(as_idring *m, uint64_t id, uint64_t a, uint64_t b)
{
    if (!m->ring && !(m->ring = calloc(AS_IDRING, sizeof *m->ring)))
        return -1;
    as_idmap_ent *s = &m->ring[id & (AS_IDRING - 1)];
    if (s->key && as_idmap_put(&m->far, s->key - 1, s->a, s->b))
        return -1;
    s->key = id + 1;
    s->a = a;
    s->b = b;
    m->n++;
    return 0;
}

/* The entry for id, or NULL; valid until the next put or del. */
static inline as_idmap_ent *as_idring_get(const as_idring *m, uint64_t id)
{
    if (m->ring) {
        as_idmap_ent *s = &m->ring[id & (AS_IDRING - 1)];
        if (s->key == id + 1)
            return s;
    }
    return m->far.n ? as_idmap_get(&m->far, id) : NULL;
}

static inline void as_idring_del(as_idring *m, as_idmap_ent *e)
{
    m->n--;
    if (e >= m->ring && e < m->ring + AS_IDRING)
        e->key = 0;
    else
        as_idmap_del(&m->far, e);
}

static inline void as_idring_free(as_idring *m)
{
    free(m->ring);
    as_idmap_free(&m->far);
    *m = (as_idring){0};
}

#endif
