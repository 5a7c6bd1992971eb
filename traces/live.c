/*
 * live.c - the full validator, which judges every event the inline fast path of live.h
 * declines and words the error. Used by the reader and the writer alike.
 *
 * Invariant: as live.h: the table holds exactly the live allocations.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "live.h"

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
            if (!v->lenient || as_live_get(&v->live, ev->id))
                goto bad;
            v->warnings++; /* lenient: keep it, keyed by the id the frees will use */
        }
        if (!v->nfree && v->nslots == v->slot_cap &&
            as_grow32((void **)&v->slot_free, &v->slot_cap, (size_t)v->nslots + 1,
                      sizeof *v->slot_free, 1024) < 0) {
            snprintf(msg, cap, "out of memory for the live-allocation table");
            return AS_ENOMEM;
        }
        e = as_live_add(&v->live, ev->id);
        if (!e) {
            snprintf(msg, cap, "out of memory for the live-allocation table");
            return AS_ENOMEM;
        }
        e->size = ev->size;
        e->stream = ev->stream;
        e->out_id = v->allocs_out++;
        e->slot = ev->slot = v->nfree ? v->slot_free[--v->nfree] : v->nslots++;
        ev->id = e->out_id;
        break;
    }
    case AS_OP_FREE:
    case AS_OP_FREE_REQ: {
        const char *what = ev->op == AS_OP_FREE ? "FREE" : "FREE_REQ";
        e = as_live_get(&v->live, ev->id);
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
        ev->slot = e->slot;
        if (ev->op == AS_OP_FREE) {
            v->slot_free[v->nfree++] = e->slot;
            as_live_del(&v->live, e);
        }
        break;
    }
    case AS_OP_EMPTY_CACHE:
        ev->id = ev->size = ev->stream = 0;
        ev->slot = 0;
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

void as_validator_free(as_validator *v)
{
    as_live_free(&v->live);
    free(v->slot_free);
    v->slot_free = NULL;
    v->nfree = v->nslots = v->slot_cap = 0;
}
