/*
 * live.c - the live-allocation table's out-of-line parts (growth, the ring, eviction into
 * the hash map) and the full validator, which judges every event the inline fast path of
 * live.h declines and words the error. Used by the reader and the writer alike.
 *
 * Invariant: as live.h: the table holds exactly the live allocations.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live.h"

/* ---- live table ------------------------------------------------------------------ */

int as_live_rehash(as_live *t, size_t ncap)
{
    as_live_ent *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return -1;
    as_live_ent *old = t->slot;
    size_t ocap = t->cap;
    unsigned bits = 0;
    while (((size_t)1 << bits) < ncap)
        bits++;
    t->slot = ns;
    t->cap = ncap;
    t->shift = 64 - bits;
    size_t mask = ncap - 1;
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i].key)
            continue;
        size_t j = live_home(t, old[i].key);
        while (ns[j].key)
            j = (j + 1) & mask;
        ns[j] = old[i];
    }
    free(old);
    return 0;
}

as_live_ent *as_live_find(as_live *t, uint64_t id)
{
    return live_find(t, id);
}
as_live_ent *as_live_insert(as_live *t, uint64_t id)
{
    return live_insert(t, id);
}
void as_live_remove(as_live *t, as_live_ent *e)
{
    live_remove(t, e);
}

int as_live_ring_init(as_live *t)
{
    t->ring = calloc(AS_LIVE_RING, sizeof *t->ring);
    return t->ring ? 0 : -1;
}

int as_live_evict(as_live *t, const as_live_ent *e)
{
    as_live_ent *h = hash_insert(t, e->key - 1);
    if (!h)
        return -1;
    *h = *e;
    return 0;
}

void as_live_free(as_live *t)
{
    free(t->slot);
    free(t->ring);
    memset(t, 0, sizeof *t);
}

size_t as_live_bytes(const as_live *t)
{
    return (t->cap + (t->ring ? AS_LIVE_RING : 0)) * sizeof(as_live_ent);
}

size_t as_live_count(const as_live *t)
{
    return t->n + t->ring_n;
}

/* ---- validation ------------------------------------------------------------------ */

int as_validate(as_validator *v, as_event *ev, char *msg, size_t cap)
{
    as_live_ent *e;
    switch (ev->op) {
    case AS_OP_ALLOC: {
        uint64_t ord = v->allocs_in++;
        if (ev->size == 0 || ev->size > AS_MAX_ALLOC_SIZE) {
            snprintf(msg, cap, "ALLOC %llu: %s size %llu (allowed 1..%llu bytes)",
                     (unsigned long long)ev->id, ev->size ? "absurd" : "zero",
                     (unsigned long long)ev->size, (unsigned long long)AS_MAX_ALLOC_SIZE);
            goto bad;
        }
        if (ev->id != ord) {
            snprintf(msg, cap, "ALLOC id %llu is not the allocation ordinal %llu",
                     (unsigned long long)ev->id, (unsigned long long)ord);
            if (!v->lenient || as_live_find(&v->live, ev->id))
                goto bad;
            v->warnings++; /* lenient: keep it, keyed by the id the frees will use */
        }
        e = live_insert(&v->live, ev->id);
        if (!e) {
            snprintf(msg, cap, "out of memory for the live-allocation table");
            return AS_ENOMEM;
        }
        e->size = ev->size;
        e->stream = ev->stream;
        e->out_id = v->allocs_out++;
        ev->id = e->out_id;
        break;
    }
    case AS_OP_FREE:
    case AS_OP_FREE_REQ: {
        const char *what = ev->op == AS_OP_FREE ? "FREE" : "FREE_REQ";
        e = live_find(&v->live, ev->id);
        if (!e) {
            if (ev->id < v->allocs_in)
                snprintf(msg, cap, "%s %llu: double free (allocation %llu was already freed)", what,
                         (unsigned long long)ev->id, (unsigned long long)ev->id);
            else if (v->allocs_in == 0)
                snprintf(msg, cap, "%s %llu: unknown id (no allocation yet)", what,
                         (unsigned long long)ev->id);
            else
                snprintf(msg, cap, "%s %llu: unknown id (the ids so far are 0..%llu)", what,
                         (unsigned long long)ev->id, (unsigned long long)v->allocs_in - 1);
            goto bad;
        }
        if (ev->op == AS_OP_FREE_REQ) {
            if (e->out_id & AS_LIVE_FREEREQ) {
                snprintf(msg, cap, "FREE_REQ %llu: requested twice (no FREE in between)",
                         (unsigned long long)ev->id);
                goto bad;
            }
            e->out_id |= AS_LIVE_FREEREQ;
        }
        ev->id = AS_LIVE_ID(e);
        ev->size = e->size;
        ev->stream = e->stream;
        if (ev->op == AS_OP_FREE)
            live_remove(&v->live, e);
        break;
    }
    case AS_OP_EMPTY_CACHE:
        ev->id = ev->size = ev->stream = 0;
        break;
    case AS_OP_MARK:
        if (!ev->label) {
            snprintf(msg, cap, "MARK without a label");
            goto bad;
        }
        if (strnlen(ev->label, AS_MAX_LABEL + 1) > AS_MAX_LABEL) {
            snprintf(msg, cap, "MARK label longer than %d bytes", AS_MAX_LABEL);
            goto bad;
        }
        ev->id = ev->size = ev->stream = 0;
        break;
    default:
        snprintf(msg, cap, "unknown event op %d", (int)ev->op);
        return AS_EINVAL;
    }
    v->events++;
    return 0;
bad:
    if (v->lenient) {
        v->warnings++;
        return 1;
    }
    return AS_EINVAL;
}
