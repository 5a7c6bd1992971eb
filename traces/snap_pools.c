/*
 * snap_pools.c - which pool served each allocation of a torch snapshot (issue 16).
 *
 * A snapshot's trace entries carry no pool; only its `segments` (those alive at the dump)
 * carry `segment_pool_id`. From the record (as_snapshot_record) this builds every
 * segment's life over the ALLOC ordinals, [from, to): the trace's segment_alloc and
 * segment_free of each address, and the segments alive at the trace's start (freed by the
 * trace without being made by it, or at the dump and never made by it). A segment alive
 * at the dump has its recorded pool; one the trace frees has none recorded, and takes the
 * pool of its stream when every segment of that stream whose pool is recorded is in one
 * pool (a graph captures on its own stream); else it is ambiguous, and counted. An
 * allocation belongs to the segment whose range holds its address while it lives.
 *
 * Key invariant: lookups never scan more than SCAN_MAX segments, so a crafted record
 * costs time in proportion to its size; a lookup past that bound is counted ambiguous.
 */
#include <stdlib.h>
#include <string.h>

#include "trace_internal.h"

#define SCAN_MAX 4096

typedef struct pseg {
    uint64_t addr, end, from, to, stream;
    uint32_t pool;
    uint8_t how; /* AS_POOL_* */
} pseg;

struct as_snap_pools {
    pseg *s;
    size_t n;
    uint64_t max_len;
    int64_t (*pairs)[2]; /* private pool k (1..) is pairs[k - 1] */
    uint32_t npairs;
};

static int cmp_pair(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Private pool number of a segment_pool_id pair: 0 for (0, 0), else 1.. (sorted table). */
static uint32_t pool_number(const as_snap_pools *p, const int64_t pair[2])
{
    if (!pair[0] && !pair[1])
        return 0;
    const int64_t(*hit)[2] = bsearch(pair, p->pairs, p->npairs, sizeof *p->pairs, cmp_pair);
    return hit ? (uint32_t)(hit - p->pairs) + 1 : 0;
}

static int build_pairs(as_snap_pools *p, const as_snapshot_record *rec)
{
    if (!rec->nsegs)
        return 0;
    p->pairs = malloc(rec->nsegs * sizeof *p->pairs);
    if (!p->pairs)
        return AS_ENOMEM;
    for (size_t i = 0; i < rec->nsegs; i++)
        if (rec->segs[i].pool[0] || rec->segs[i].pool[1])
            memcpy(p->pairs[p->npairs++], rec->segs[i].pool, sizeof *p->pairs);
    qsort(p->pairs, p->npairs, sizeof *p->pairs, cmp_pair);
    uint32_t k = 0;
    for (uint32_t i = 0; i < p->npairs; i++)
        if (!k || cmp_pair(p->pairs[k - 1], p->pairs[i]))
            memcpy(p->pairs[k++], p->pairs[i], sizeof *p->pairs);
    p->npairs = k;
    return 0;
}

typedef struct segix {
    uint64_t addr;
    size_t i; /* the entry's index in rec->segev */
} segix;

static int cmp_segev(const void *a, const void *b)
{
    const segix *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int cmp_pseg(const void *a, const void *b)
{
    const pseg *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->from < y->from ? -1 : x->from > y->from;
}

/* The dump's segment starting at addr, or NULL (rec->segs is in address order). */
static const as_snap_seg *dump_seg(const as_snapshot_record *rec, uint64_t addr)
{
    size_t lo = 0, hi = rec->nsegs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rec->segs[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < rec->nsegs && rec->segs[lo].addr == addr ? &rec->segs[lo] : NULL;
}

static void add(as_snap_pools *p, pseg s)
{
    p->s[p->n++] = s;
    if (s.end - s.addr > p->max_len)
        p->max_len = s.end - s.addr;
}

/* The trace's segment_alloc/segment_free pairs by address, and the segments alive at the
 * start (freed first) or at the dump; used marks the dump segments the trace made. */
static int build_lives(as_snap_pools *p, const as_snapshot_record *rec, uint8_t *used)
{
    segix *ix = malloc((rec->nsegev + 1) * sizeof *ix);
    size_t m = 0;
    if (!ix)
        return AS_ENOMEM;
    for (size_t i = 0; i < rec->nsegev; i++)
        if (rec->segev[i].action == AS_SNAP_SEG_ALLOC || rec->segev[i].action == AS_SNAP_SEG_FREE)
            ix[m++] = (segix){rec->segev[i].addr, i};
    qsort(ix, m, sizeof *ix, cmp_segev);
    for (size_t k = 0; k < m; k++) {
        const as_snap_segev *e = &rec->segev[ix[k].i];
        pseg s = {.addr = e->addr,
                  .end = e->addr + e->size,
                  .stream = e->stream,
                  .how = AS_POOL_AMBIGUOUS};
        if (e->action == AS_SNAP_SEG_FREE) { /* made before the trace */
            s.to = e->alloc;
        } else {
            s.from = e->alloc;
            s.to = UINT64_MAX;
            const as_snap_segev *f = k + 1 < m ? &rec->segev[ix[k + 1].i] : NULL;
            if (f && f->addr == e->addr && f->action == AS_SNAP_SEG_FREE) {
                s.to = f->alloc;
                k++;
            } else {
                const as_snap_seg *d = dump_seg(rec, e->addr);
                if (d && d->size == e->size) {
                    used[d - rec->segs] = 1;
                    s.pool = pool_number(p, d->pool);
                    s.how = AS_POOL_RECORDED;
                }
            }
        }
        add(p, s);
    }
    free(ix);
    return 0;
}

static int cmp_stream(const void *a, const void *b)
{
    const pseg *x = *(pseg *const *)a, *y = *(pseg *const *)b;
    return x->stream < y->stream ? -1 : x->stream > y->stream;
}

/* A segment without a recorded pool takes its stream's, when the stream's recorded
 * segments all agree on one. */
static int by_stream(as_snap_pools *p)
{
    pseg **v = malloc((p->n + 1) * sizeof *v);
    if (!v)
        return AS_ENOMEM;
    for (size_t i = 0; i < p->n; i++)
        v[i] = &p->s[i];
    qsort(v, p->n, sizeof *v, cmp_stream);
    for (size_t i = 0; i < p->n;) {
        size_t j = i;
        int agree = 1, known = 0;
        uint32_t pool = 0;
        for (; j < p->n && v[j]->stream == v[i]->stream; j++)
            if (v[j]->how == AS_POOL_RECORDED) {
                agree &= !known || v[j]->pool == pool;
                pool = v[j]->pool, known = 1;
            }
        for (size_t k = i; k < j && known && agree; k++)
            if (v[k]->how == AS_POOL_AMBIGUOUS)
                v[k]->pool = pool, v[k]->how = AS_POOL_BY_STREAM;
        i = j;
    }
    free(v);
    return 0;
}

int as_snap_pools_build(const as_snapshot_record *rec, as_snap_pools **out)
{
    *out = NULL;
    as_snap_pools *p = calloc(1, sizeof *p);
    uint8_t *used = calloc(rec->nsegs + 1, 1);
    int rc = AS_ENOMEM;
    if (!p || !used || (rc = build_pairs(p, rec)))
        goto fail;
    rc = AS_ENOMEM;
    if (!(p->s = malloc((rec->nsegev + rec->nsegs + 1) * sizeof *p->s)))
        goto fail;
    if ((rc = build_lives(p, rec, used)))
        goto fail;
    for (size_t i = 0; i < rec->nsegs; i++) /* at the dump, and older than the trace */
        if (!used[i])
            add(p, (pseg){.addr = rec->segs[i].addr,
                          .end = rec->segs[i].addr + rec->segs[i].size,
                          .to = UINT64_MAX,
                          .stream = rec->segs[i].stream,
                          .pool = pool_number(p, rec->segs[i].pool),
                          .how = AS_POOL_RECORDED});
    if ((rc = by_stream(p)))
        goto fail;
    qsort(p->s, p->n, sizeof *p->s, cmp_pseg);
    free(used);
    *out = p;
    return 0;
fail:
    free(used);
    as_snap_pools_free(p);
    return rc;
}

uint32_t as_snap_pools_of(const as_snap_pools *p, uint64_t addr, uint64_t alloc, int *how)
{
    size_t lo = 0, hi = p->n;
    while (lo < hi) { /* the first segment starting above addr */
        size_t mid = lo + (hi - lo) / 2;
        if (p->s[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t k = lo, seen = 0; k-- > 0 && seen < SCAN_MAX; seen++) {
        const pseg *s = &p->s[k];
        if (addr - s->addr >= p->max_len)
            break;
        if (addr < s->end && s->from <= alloc && alloc < s->to) {
            *how = s->how;
            return s->how == AS_POOL_AMBIGUOUS ? 0 : s->pool;
        }
    }
    *how = AS_POOL_AMBIGUOUS; /* in no segment the record knows of */
    return 0;
}

uint32_t as_snap_pools_count(const as_snap_pools *p)
{
    return p ? p->npairs : 0;
}

void as_snap_pools_pair(const as_snap_pools *p, uint32_t k, int64_t pair[2])
{
    pair[0] = p->pairs[k - 1][0];
    pair[1] = p->pairs[k - 1][1];
}

void as_snap_pools_free(as_snap_pools *p)
{
    if (!p)
        return;
    free(p->s);
    free(p->pairs);
    free(p);
}
