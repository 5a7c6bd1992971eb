/*
 * idmap_impl.h - the one id map, written once for any entry type: an open-addressing hash
 * from a 64-bit id to an entry, and the direct-mapped ring of recent ids in front of it.
 * Included by idmap.h (the engine's and `allocsim info`'s two-word entry, 24 bytes) and by
 * traces/live.h (the trace validator's 32-byte entry), each after defining:
 *
 *   AS_IDMAP_ENT   the entry type; its first member is `uint64_t key` (id + 1, 0 = empty)
 *   AS_IDMAP_MAP   the name of the hash map type and the prefix of its functions
 *   AS_IDMAP_RING  the name of the ring type and the prefix of its functions
 *
 * The hash: linear probing with backward-shift deletion (no tombstones), Fibonacci
 * hashing: ids are ordinals and long-lived ones (parameters) come in long consecutive
 * runs, which an identity-like hash would turn into one long cluster that every later
 * window of ids runs into. It grows at load 1/2 and shrinks at load 1/16, so its memory
 * follows the number of live entries, never the trace length.
 *
 * The ring: most allocations die young and ids are handed out in order, so the recent ids
 * live in AS_IDRING slots (slot id mod AS_IDRING: no hashing, no probing, written in
 * sequence). An id still live when a newer one needs its slot moves to the hash map, where
 * the few long-lived allocations end up. Invariant: ring and map together hold exactly the
 * live entries, each in one place. The ring's slots are an anonymous mapping of their own,
 * not calloc's: its pages are zero when mapped and come in as they are touched, where
 * calloc of a recycled heap block writes all of them (a short trace's reader faulted in
 * the 40 KiB of its ring, 10 pages, for its first few ids). Every slot is there from the
 * first add, so a loop may index the ring directly.
 *
 * The hot paths are inline, so the engine's and the decoder's per-event loops make no
 * call; only the rebuild of the table is out of line. Part of sim/base/: uses nothing else
 * in the project. No include guard: it is included once per entry type.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define AS_IDMAP_CAT_(a, b) a##_##b
#define AS_IDMAP_CAT(a, b) AS_IDMAP_CAT_(a, b)
#define AS_IDMAP_FN(name) AS_IDMAP_CAT(AS_IDMAP_MAP, name)
#define AS_IDRING_FN(name) AS_IDMAP_CAT(AS_IDMAP_RING, name)
#define AS_IDMAP_HOT static inline __attribute__((always_inline))

#ifndef AS_IDMAP_MIN_CAP
#define AS_IDMAP_MIN_CAP 64u
#define AS_IDRING 1024u
#endif

typedef struct AS_IDMAP_MAP {
    AS_IDMAP_ENT *slot;
    uint64_t mask;  /* cap - 1, cap a power of two (0 before first use) */
    uint64_t n;     /* live entries */
    unsigned shift; /* 64 - log2(cap) */
} AS_IDMAP_MAP;

typedef struct AS_IDMAP_RING {
    AS_IDMAP_ENT *ring; /* AS_IDRING slots, allocated on the first add */
    AS_IDMAP_MAP far;   /* the ids evicted from the ring while still live */
    uint64_t n;         /* live entries, ring and map */
} AS_IDMAP_RING;

AS_IDMAP_HOT uint64_t AS_IDMAP_FN(home)(const AS_IDMAP_MAP *m, uint64_t key)
{
    return (key * 0x9E3779B97F4A7C15ull) >> m->shift;
}

/* Rebuilds m with cap slots (a power of two). 0, or -1 when out of memory (m intact). */
static __attribute__((noinline, unused)) int AS_IDMAP_FN(resize)(AS_IDMAP_MAP *m, uint64_t cap)
{
    AS_IDMAP_ENT *ns = calloc(cap, sizeof *ns);
    if (!ns)
        return -1;
    AS_IDMAP_MAP old = *m;
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
            uint64_t j = AS_IDMAP_FN(home)(m, old.slot[i].key);
            while (ns[j].key)
                j = (j + 1) & m->mask;
            ns[j] = old.slot[i];
        }
        free(old.slot);
    }
    return 0;
}

/* Adds id (which must be absent) and returns its entry with only the key set, or NULL
 * when out of host memory. The pointer is valid until the next add or del. */
static inline AS_IDMAP_ENT *AS_IDMAP_FN(add)(AS_IDMAP_MAP *m, uint64_t id)
{
    if (!m->slot || (m->n + 1) * 2 > m->mask + 1) {
        if (AS_IDMAP_FN(resize)(m, m->slot ? (m->mask + 1) * 2 : AS_IDMAP_MIN_CAP))
            return NULL;
    }
    uint64_t key = id + 1, j = AS_IDMAP_FN(home)(m, key);
    while (m->slot[j].key)
        j = (j + 1) & m->mask;
    m->slot[j].key = key;
    m->n++;
    return &m->slot[j];
}

/* The entry for id, or NULL. The pointer is valid until the next add or del. */
AS_IDMAP_HOT AS_IDMAP_ENT *AS_IDMAP_FN(get)(const AS_IDMAP_MAP *m, uint64_t id)
{
    if (!m->n)
        return NULL;
    uint64_t key = id + 1, j = AS_IDMAP_FN(home)(m, key);
    for (;;) {
        AS_IDMAP_ENT *e = &m->slot[j];
        if (e->key == key)
            return e;
        if (!e->key)
            return NULL;
        j = (j + 1) & m->mask;
    }
}

/* Removes an entry returned by get. Backward shift keeps every remaining key reachable
 * from its home slot without tombstones. */
static inline void AS_IDMAP_FN(del)(AS_IDMAP_MAP *m, AS_IDMAP_ENT *e)
{
    uint64_t i = (uint64_t)(e - m->slot), j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        if (!m->slot[j].key)
            break;
        uint64_t h = AS_IDMAP_FN(home)(m, m->slot[j].key);
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
        (void)AS_IDMAP_FN(resize)(m, cap < AS_IDMAP_MIN_CAP ? AS_IDMAP_MIN_CAP : cap);
    }
}

static inline void AS_IDMAP_FN(free)(AS_IDMAP_MAP *m)
{
    free(m->slot);
    *m = (AS_IDMAP_MAP){0};
}

/* ---- the ring in front of the map ----------------------------------------------------- */

/* The ring's AS_IDRING zeroed slots (see the top), or NULL when out of memory. */
static __attribute__((noinline, unused)) AS_IDMAP_ENT *AS_IDRING_FN(slots)(void)
{
    void *p = mmap(NULL, AS_IDRING * sizeof(AS_IDMAP_ENT), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : (AS_IDMAP_ENT *)p;
}

/* Adds id (which must be absent) and returns its entry with only the key set, or NULL
 * when out of host memory; the live entry whose ring slot it takes moves to the map. */
AS_IDMAP_HOT AS_IDMAP_ENT *AS_IDRING_FN(add)(AS_IDMAP_RING *r, uint64_t id)
{
    if (!r->ring && !(r->ring = AS_IDRING_FN(slots)()))
        return NULL;
    AS_IDMAP_ENT *s = &r->ring[id & (AS_IDRING - 1)];
    if (s->key) {
        AS_IDMAP_ENT *f = AS_IDMAP_FN(add)(&r->far, s->key - 1);
        if (!f)
            return NULL;
        *f = *s;
    }
    s->key = id + 1;
    r->n++;
    return s;
}

/* The entry for id, or NULL; valid until the next add or del. */
AS_IDMAP_HOT AS_IDMAP_ENT *AS_IDRING_FN(get)(const AS_IDMAP_RING *r, uint64_t id)
{
    if (r->ring) {
        AS_IDMAP_ENT *s = &r->ring[id & (AS_IDRING - 1)];
        if (s->key == id + 1)
            return s;
    }
    return AS_IDMAP_FN(get)(&r->far, id);
}

/* Removes an entry returned by get. */
AS_IDMAP_HOT void AS_IDRING_FN(del)(AS_IDMAP_RING *r, AS_IDMAP_ENT *e)
{
    r->n--;
    /* compared as integers: e may point into the map's array instead */
    uintptr_t p = (uintptr_t)e, q = (uintptr_t)r->ring;
    if (p >= q && p < q + AS_IDRING * sizeof *e)
        e->key = 0;
    else
        AS_IDMAP_FN(del)(&r->far, e);
}

/* Live entries, ring and map. */
static inline uint64_t AS_IDRING_FN(count)(const AS_IDMAP_RING *r)
{
    return r->n;
}

/* Bytes the ring and the map hold: what "bounded memory" tests measure. */
static inline uint64_t AS_IDRING_FN(bytes)(const AS_IDMAP_RING *r)
{
    return ((r->far.slot ? r->far.mask + 1 : 0) + (r->ring ? AS_IDRING : 0)) * sizeof *r->ring;
}

static inline void AS_IDRING_FN(free)(AS_IDMAP_RING *r)
{
    if (r->ring)
        munmap(r->ring, AS_IDRING * sizeof *r->ring);
    AS_IDMAP_FN(free)(&r->far);
    *r = (AS_IDMAP_RING){0};
}

#undef AS_IDMAP_FN
#undef AS_IDRING_FN
#undef AS_IDMAP_ENT
#undef AS_IDMAP_MAP
#undef AS_IDMAP_RING
