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
    int rc;
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
        if ((ev->stream != v->s_last || !v->s_any) &&
            (rc = as_validator_stream(v, ev->stream, msg, cap)) < 0)
            return rc;
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
        as_tally_alloc(v, ev->size);
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
            v->free_reqs++;
            v->requested -= e->size;
        } else if (!(e->out_id & AS_LIVE_FREEREQ)) {
            v->requested -= e->size;
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
        v->empty_caches++;
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
        v->marks++;
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

int as_live_evict(as_live *l, as_live_ent *s)
{
    as_live_ent *f = as_live_hash_add(&l->far, s->key - 1);
    if (!f)
        return -1;
    *f = *s;
    s->key = 0;
    return 0;
}

/* ---- streams and the tally ------------------------------------------------------- */

/* Adds stream to the set (sized for load 1/2). 0, or AS_ENOMEM with msg filled. */
static int stream_add(as_validator *v, uint64_t stream, char *msg, size_t cap)
{
    if (v->scap == 0 || (v->sn + 1) * 2 > v->scap) {
        size_t nc = v->scap ? v->scap * 2 : 64;
        uint64_t *ns = calloc(nc, sizeof *ns); /* value + 1; 0 = empty */
        if (!ns) {
            snprintf(msg, cap, "out of memory for the stream table");
            return AS_ENOMEM;
        }
        for (size_t i = 0; i < v->scap; i++) {
            if (!v->sset[i])
                continue;
            size_t j = (size_t)((v->sset[i] * 0x9E3779B97F4A7C15ull) >> 32) & (nc - 1);
            while (ns[j])
                j = (j + 1) & (nc - 1);
            ns[j] = v->sset[i];
        }
        free(v->sset);
        v->sset = ns;
        v->scap = nc;
        if (v->sn == 0) /* the default stream always counts */
            v->sset[(size_t)((1 * 0x9E3779B97F4A7C15ull) >> 32) & (nc - 1)] = 1, v->sn = 1;
    }
    if (stream == UINT64_MAX) { /* its key would be the empty mark: a flag instead */
        if (!v->smax && v->sn >= AS_MAX_STREAMS)
            goto full;
        v->sn += !v->smax;
        v->smax = 1;
        return 0;
    }
    uint64_t key = stream + 1;
    size_t j = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (v->scap - 1);
    while (v->sset[j]) {
        if (v->sset[j] == key)
            return 0;
        j = (j + 1) & (v->scap - 1);
    }
    if (v->sn < AS_MAX_STREAMS) {
        v->sset[j] = key;
        v->sn++;
        return 0;
    }
full:
    snprintf(msg, cap,
             "ALLOC on stream 0x%llx: more than %d distinct streams (the limit of every "
             "trace format, the default stream 0 included)",
             (unsigned long long)stream, AS_MAX_STREAMS);
    return AS_ENOMEM;
}

int as_validator_stream(as_validator *v, uint64_t stream, char *msg, size_t cap)
{
    int rc = stream_add(v, stream, msg, cap);
    if (rc == 0) {
        v->s_last = stream;
        v->s_any = 1;
        v->s_zero |= stream == 0;
    }
    return rc;
}

void as_validator_tally(const as_validator *v, as_trace_tally *out)
{
    uint64_t live = as_live_count(&v->live);
    *out = (as_trace_tally){
        .events = v->events,
        .allocs = v->allocs_out,
        .frees = v->allocs_out - live,
        .free_reqs = v->free_reqs,
        .empty_caches = v->empty_caches,
        .marks = v->marks,
        .requested = v->requested,
        .peak_requested = v->peak_requested,
        .min_request = v->min_request,
        /* the set holds stream 0 from the first ALLOC on, used or not */
        .streams = v->sn - (v->sn && !v->s_zero),
        .live = live,
        .peak_live = v->nslots,
    };
}

void as_validator_free(as_validator *v)
{
    as_live_free(&v->live);
    free(v->slot_free);
    free(v->sset);
    v->slot_free = NULL;
    v->sset = NULL;
    v->sn = v->scap = 0;
    v->nfree = v->nslots = v->slot_cap = 0;
}
