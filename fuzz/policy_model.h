/*
 * policy_model.h - an independent reference model of one policy instance, and the
 * invariant checks run after every step. Shared by the conformance suite
 * (tests/test_conformance.c) and the policy fuzzer (fuzz/fuzz_policy.c); static inline,
 * like policy_harness.h, so that it needs no build rule and no test framework.
 *
 * The model knows, for each allocation id, the block the policy handed out, the bytes
 * requested and whether the program freed it (pending) - nothing about the policy's
 * internals. pm_verify then asserts: check() passes; walk() visits segments in address
 * order, none overlapping, every block inside its segment and no two blocks overlapping;
 * the allocated/pending blocks it reports are exactly the model's live ones (same id,
 * address, size, state); stats agree with the model and the device (allocated, reserved,
 * free bytes, segments, device calls) and reserved >= allocated >= requested. A broken
 * invariant returns -1 with a one-line reason in pm->err; nothing here aborts.
 */
#ifndef AS_FUZZ_POLICY_MODEL_H
#define AS_FUZZ_POLICY_MODEL_H

#include <inttypes.h>
#include <stdarg.h>

#include "fuzz/policy_harness.h"

/* PM_SYNCED: a pending block that the policy completed by itself (torch's sync_frees:
 * empty_cache and the last OOM retry wait for pending frees). It is gone from the walk
 * and the stats; the trace's later FREE must still be accepted. */
enum { PM_NONE, PM_LIVE, PM_PENDING, PM_SYNCED };

typedef struct pm_live {
    uint64_t addr, size, req, stream;
    uint64_t seen; /* pm.gen of the last walk that reported it */
    size_t pos;    /* index in pm.ids while live */
    int state;
} pm_live;

typedef struct pm {
    ph t;
    pm_live *m;    /* by allocation id */
    size_t mcap;
    uint64_t *ids; /* live ids (pending included), for picking one to free */
    size_t nids;
    uint64_t requested, allocated; /* of the model; pending blocks count in both */
    uint64_t hash;                 /* of every result, for determinism */
    uint64_t ooms;
    uint64_t gen;            /* walks so far */
    int pending_may_complete; /* the policy may complete pending frees (sync_frees=true) */
    uint64_t align;           /* blocks are aligned to this: 256, or a smaller `round` */
    char err[320];
} pm;

static inline void pm_mix(uint64_t *h, uint64_t v)
{
    *h ^= v + 0x9E3779B97F4A7C15ull + (*h << 6) + (*h >> 2);
}

__attribute__((format(printf, 2, 3))) static inline int pm_fail(pm *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    return -1;
}

/* Opens spec over a simulated device with this capacity and address placement. Returns 0
 * or -1 (bad spec or init refused: printed by ph_open_placed). */
static inline int pm_open(pm *r, const char *spec, uint64_t capacity, int placement)
{
    memset(r, 0, sizeof *r);
    int rc = ph_open_placed(&r->t, spec, capacity, placement);
    r->align = 256;
    for (size_t k = 0; rc == 0 && k < r->t.p->n_knobs; k++) {
        const char *name = r->t.p->knobs[k].name;
        int64_t v = r->t.spec.values[k].i;
        if (strcmp(name, "sync_frees") == 0 && v)
            r->pending_may_complete = 1;
        if (strcmp(name, "round") == 0 && v > 0 && (uint64_t)v < r->align)
            r->align = (uint64_t)v;
    }
    return rc;
}

/* fini (which must give back all device memory), then frees everything. Returns the
 * bytes the device still held after fini (0 when the policy is correct). */
static inline uint64_t pm_close(pm *r)
{
    uint64_t left = 0;
    if (r->t.p) {
        if (r->t.p->fini)
            r->t.p->fini(r->t.st);
        left = ph_dev(&r->t).reserved;
        free(r->t.st);
        free(r->t.blk);
        as_simdev_destroy(r->t.dev);
        as_policy_spec_free(&r->t.spec);
    }
    free(r->m);
    free(r->ids);
    memset(r, 0, sizeof *r);
    return left;
}

/* ---- walk verification ------------------------------------------------------------------ */

typedef struct pm_walk {
    pm *r;
    uint64_t seg_lo, seg_hi; /* current segment */
    uint64_t prev_seg_end;
    uint64_t prev_blk_end;
    int in_seg;
    uint64_t segs, seg_bytes, live_bytes, live_count, free_bytes;
    char err[200];
} pm_walk;

static inline int pm_walk_fn(void *user, const as_walk_item *it)
{
    pm_walk *w = user;
    pm *r = w->r;
    if (it->kind == AS_WALK_SEGMENT) {
        if (w->segs && it->addr < w->prev_seg_end) {
            snprintf(w->err, sizeof w->err, "segment %#" PRIx64 " overlaps or is out of order",
                     it->addr);
            return 1;
        }
        w->segs++;
        w->seg_bytes += it->size;
        w->seg_lo = it->addr;
        w->seg_hi = it->addr + it->size;
        w->prev_seg_end = w->seg_hi;
        w->prev_blk_end = it->addr;
        w->in_seg = 1;
        return 0;
    }
    if (!w->in_seg || it->addr < w->prev_blk_end || it->addr + it->size > w->seg_hi ||
        it->size == 0) {
        snprintf(w->err, sizeof w->err,
                 "block %#" PRIx64 "+%" PRIu64 " outside its segment [%#" PRIx64 ",%#" PRIx64
                 ") or overlapping the previous block",
                 it->addr, it->size, w->seg_lo, w->seg_hi);
        return 1;
    }
    w->prev_blk_end = it->addr + it->size;
    if (it->state == AS_BLOCK_FREE) {
        w->free_bytes += it->size;
        return 0;
    }
    if (it->state == AS_BLOCK_UNMAPPED)
        return 0;
    uint64_t id = it->id;
    if (id >= r->t.next_id || r->m[id].state == PM_NONE || r->m[id].state == PM_SYNCED) {
        snprintf(w->err, sizeof w->err,
                 "walk reports block %#" PRIx64 " id %" PRIu64 " which is not live", it->addr,
                 id);
        return 1;
    }
    const pm_live *l = &r->m[id];
    int want = l->state == PM_PENDING ? AS_BLOCK_PENDING : AS_BLOCK_ALLOCATED;
    if (l->addr != it->addr || l->size != it->size || (int)it->state != want) {
        snprintf(w->err, sizeof w->err,
                 "id %" PRIu64 ": walk has %#" PRIx64 "+%" PRIu64 " state %d, model %#" PRIx64
                 "+%" PRIu64 " state %d",
                 id, it->addr, it->size, it->state, l->addr, l->size, want);
        return 1;
    }
    r->m[id].seen = r->gen;
    w->live_count++;
    w->live_bytes += it->size;
    return 0;
}

/* Pending blocks the walk no longer reports were completed by the policy (allowed only
 * with pending_may_complete): they leave the live set. */
static inline void pm_sync_pending(pm *r)
{
    for (size_t k = 0; k < r->nids;) {
        uint64_t id = r->ids[k];
        pm_live *l = &r->m[id];
        if (l->state != PM_PENDING || l->seen == r->gen) {
            k++;
            continue;
        }
        l->state = PM_SYNCED;
        r->requested -= l->req;
        r->allocated -= l->size;
        uint64_t last = r->ids[--r->nids];
        r->ids[k] = last;
        r->m[last].pos = k;
    }
}

/* Every invariant after a step; 0, or -1 with r->err. */
static inline int pm_verify(pm *r)
{
    as_check_failure f = { { 0 } };
    if (r->t.p->check && r->t.p->check(r->t.st, &f))
        return pm_fail(r, "check() failed: %s", f.msg);
    if (!r->t.p->walk) /* the ABI allows it; the conformance suite does not (tables) */
        return pm_fail(r, "the policy has no walk(): its blocks cannot be checked");
    pm_walk w = { .r = r };
    r->gen++;
    if (r->t.p->walk(r->t.st, pm_walk_fn, &w))
        return pm_fail(r, "walk: %s", w.err[0] ? w.err : "returned an error");
    if (r->pending_may_complete)
        pm_sync_pending(r);
    if (w.live_count != r->nids)
        return pm_fail(r, "walk saw %" PRIu64 " live blocks, model has %zu", w.live_count,
                       r->nids);
    as_policy_stats s = ph_stats(&r->t);
    as_dev_counters c = ph_dev(&r->t);
    if (s.allocated != r->allocated || w.live_bytes != r->allocated)
        return pm_fail(r, "allocated: stats %" PRIu64 ", walk %" PRIu64 ", model %" PRIu64,
                       s.allocated, w.live_bytes, r->allocated);
    if (s.reserved != c.reserved)
        return pm_fail(r, "reserved: stats %" PRIu64 ", device %" PRIu64, s.reserved,
                       c.reserved);
    if (!(s.reserved >= s.allocated && s.allocated >= r->requested))
        return pm_fail(r, "reserved %" PRIu64 " >= allocated %" PRIu64 " >= requested %" PRIu64
                       " fails", s.reserved, s.allocated, r->requested);
    if (s.allocated + s.free_bytes != s.reserved)
        return pm_fail(r, "allocated %" PRIu64 " + free %" PRIu64 " != reserved %" PRIu64,
                       s.allocated, s.free_bytes, s.reserved);
    if (w.free_bytes != s.free_bytes)
        return pm_fail(r, "free bytes: walk %" PRIu64 ", stats %" PRIu64, w.free_bytes,
                       s.free_bytes);
    if (s.largest_free > s.free_bytes)
        return pm_fail(r, "largest free %" PRIu64 " > free %" PRIu64, s.largest_free,
                       s.free_bytes);
    if (s.device_reserves != c.reserves + c.maps || s.device_releases != c.releases + c.unmaps)
        return pm_fail(r, "device calls: stats %" PRIu64 "/%" PRIu64 ", device %" PRIu64
                       "/%" PRIu64, s.device_reserves, s.device_releases, c.reserves + c.maps,
                       c.releases + c.unmaps);
    /* Every reserved byte is in a walked segment unless mapped into a VA range. */
    if (c.maps == 0 && w.seg_bytes != s.reserved)
        return pm_fail(r, "segments walked %" PRIu64 " B, reserved %" PRIu64, w.seg_bytes,
                       s.reserved);
    return 0;
}

/* ---- steps -------------------------------------------------------------------------------- */

static inline int pm_grow(pm *r, uint64_t id)
{
    if (id < r->mcap)
        return 0;
    size_t nc = r->mcap ? r->mcap : 256;
    while (nc <= id)
        nc *= 2;
    pm_live *nm = realloc(r->m, nc * sizeof *nm);
    uint64_t *ni = nm ? realloc(r->ids, nc * sizeof *ni) : NULL;
    if (nm)
        r->m = nm;
    if (!ni)
        return pm_fail(r, "host memory");
    memset(r->m + r->mcap, 0, (nc - r->mcap) * sizeof *r->m);
    r->ids = ni;
    r->mcap = nc;
    return 0;
}

/* Allocates the next id. *served (may be NULL) is 1, or 0 on an OOM (a result: the id is
 * used up and stays dead, as in the engine with keep_going). -1 on a violation. */
static inline int pm_alloc(pm *r, uint64_t size, uint64_t stream, int *served)
{
    uint64_t id;
    as_block b = {0};
    if (pm_grow(r, r->t.next_id))
        return -1;
    int rc = ph_alloc_id(&r->t, size, stream, &id, &b);
    pm_mix(&r->hash, (uint64_t)(rc + 7));
    if (served)
        *served = rc == 0;
    if (rc == AS_POLICY_OOM) {
        r->ooms++;
        return 0;
    }
    if (rc != 0)
        return pm_fail(r, "alloc(%" PRIu64 ") returned error %d", size, rc);
    if (b.size < size)
        return pm_fail(r, "block of %" PRIu64 " for a request of %" PRIu64, b.size, size);
    if (b.addr % r->align != 0)
        return pm_fail(r, "block address %#" PRIx64 " not %" PRIu64 "-aligned", b.addr,
                       r->align);
    pm_mix(&r->hash, b.addr);
    pm_mix(&r->hash, b.size);
    r->m[id] = (pm_live){ .addr = b.addr, .size = b.size, .req = size, .stream = stream,
                          .pos = r->nids, .state = PM_LIVE };
    r->ids[r->nids++] = id;
    r->requested += size;
    r->allocated += b.size;
    return 0;
}

/* Frees id: AS_FREE_PENDING turns a live block pending (the program let go, FREE_REQ);
 * AS_FREE_COMPLETE completes it (FREE, with or without a request before). A free of an
 * id that is not live (its allocation hit an OOM) is ignored, as the engine does. */
static inline int pm_free_id(pm *r, uint64_t id, unsigned flags)
{
    if (id >= r->t.next_id || r->m[id].state == PM_NONE)
        return 0;
    pm_live *l = &r->m[id];
    if (l->state == PM_SYNCED) {
        if (flags == AS_FREE_PENDING)
            return 0;
        int rc = ph_free(&r->t, id, AS_FREE_COMPLETE);
        if (rc != 0)
            return pm_fail(r, "free(id %" PRIu64 ") after the policy completed it returned %d",
                           id, rc);
        l->state = PM_NONE;
        return 0;
    }
    if (flags == AS_FREE_PENDING) {
        if (l->state != PM_LIVE)
            return 0;
        int rc = ph_free(&r->t, id, AS_FREE_PENDING);
        if (rc != 0)
            return pm_fail(r, "free(id %" PRIu64 ", PENDING) returned %d", id, rc);
        l->state = PM_PENDING;
        return 0;
    }
    int rc = ph_free(&r->t, id, AS_FREE_COMPLETE);
    if (rc != 0)
        return pm_fail(r, "free(id %" PRIu64 ") returned %d", id, rc);
    r->requested -= l->req;
    r->allocated -= l->size;
    l->state = PM_NONE;
    uint64_t last = r->ids[--r->nids];
    r->ids[l->pos] = last;
    r->m[last].pos = l->pos;
    return 0;
}

static inline int pm_empty_cache(pm *r)
{
    if (!r->t.p->empty_cache)
        return 0;
    int rc = r->t.p->empty_cache(r->t.st);
    pm_mix(&r->hash, (uint64_t)rc);
    return rc ? pm_fail(r, "empty_cache returned %d", rc) : 0;
}

#endif
