/*
 * idmap.h - the id map of the engine (id -> policy handle, block size) and of `allocsim
 * info` (id -> ALLOC event): idmap_impl.h's map and ring over an entry of two 64-bit
 * words. as_idmap is the hash map alone (the engine's per-trace maps, info's), as_idring
 * the ring of recent ids in front of it (the engine's live table, where ids are ordinals).
 * Static inline on purpose, so the engine's per-event path has no call. Part of sim/base/
 * (uses nothing else in the project); the trace validator's table (traces/live.h) is the
 * same implementation over its own entry.
 */
#ifndef AS_BASE_IDMAP_H
#define AS_BASE_IDMAP_H

#include <stdint.h>

typedef struct as_idmap_ent {
    uint64_t key; /* id + 1; 0 marks an empty slot */
    uint64_t a, b;
} as_idmap_ent; /* 24 bytes */

#define AS_IDMAP_ENT as_idmap_ent
#define AS_IDMAP_MAP as_idmap
#define AS_IDMAP_RING as_idring
#include "idmap_impl.h"

/* Inserts id (which must be absent) with its two words. Returns 0, or -1 when out of host
 * memory. */
static inline int as_idmap_put(as_idmap *m, uint64_t id, uint64_t a, uint64_t b)
{
    as_idmap_ent *e = as_idmap_add(m, id);
    if (!e)
        return -1;
    e->a = a;
    e->b = b;
    return 0;
}

static inline int as_idring_put(as_idring *m, uint64_t id, uint64_t a, uint64_t b)
{
    as_idmap_ent *e = as_idring_add(m, id);
    if (!e)
        return -1;
    e->a = a;
    e->b = b;
    return 0;
}

#endif
