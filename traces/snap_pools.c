/*
 * snap_pools.c - which pool served each allocation of a torch snapshot, and what each run
 * of segment_free entries did (issue 16).
 *
 * A snapshot's trace entries carry no pool; only its `segments` (those alive at the dump)
 * carry `segment_pool_id`. From the record (as_snapshot_record) this builds every
 * segment's life over the ALLOC ordinals, [from, to) (an expandable segment's from its
 * segment_map and segment_unmap entries: build_expandable), and reads its pool, first found
 * wins:
 *  1. recorded: alive at the dump, its segment_pool_id;
 *  2. frames: the frames of the request that made it (the segment_alloc entry carries the
 *     malloc's) run through cudagraph trees (a tree's warm-up or record: its private pool)
 *     or through CUDAGraph.capture_begin (the RNG-state tensors a capture makes on its
 *     stream before entering its pool: the default pool); any other segment of a stream
 *     with such a capture_begin segment: the graph's private pool;
 *  3. release order: release_cached_blocks frees the default pool's whole free segments
 *     (large, then small, each in (stream, size, address) order), then each freeable
 *     private pool's (small, then large); in a run of segment_free entries, a group after
 *     the first large and the first small group (a break in that order, or a large group
 *     after a small one) is a private pool's, and a run whose frames name a MemPool's
 *     destructor frees that pool alone; the first groups are read as the default pool's;
 *     a capture stream's segments (rule 2's) that one call frees out of that order are
 *     another graph's pool each (capture_group: graphs may share a capture stream);
 *  4. by stream: its stream's pool when every segment of that stream whose pool is
 *     recorded is in one pool (a graph captures on its own stream);
 *  5. else ambiguous (simulated in the default pool), and counted.
 * A private segment found by 2 or 3 takes its stream's recorded private pool when there is
 * one, else a pool inferred for its stream (or for the MemPool's run), numbered after the
 * recorded ones. An allocation belongs to the segment whose range holds its address while
 * it lives.
 * (For expandable segments rule 3 reads only a MemPool destructor's run: by_release_unmaps.)
 * Each run of segment_free entries becomes EMPTY_CACHE events: none when its frames are
 * those of the segment_alloc that follows (an OOM retry inside one malloc: PyTorch records
 * both under the malloc's context), unless each free has the frames its segment was made
 * with (empty_cache() recorded with context="alloc" writes those); else empty_cache() (pool 0) when
 * it frees a default segment, then one EMPTY_CACHE of each private pool it is the first to free
 * (that pool released there: the trace does not show the release itself, only that its segments
 * went back); a call that frees no default segment (empty_cache() while a capture or
 * use_mem_pool is underway keeps the default pool) gives each pool it frees its EMPTY_CACHE.
 * A run of segment_unmap entries gives empty_cache() unless it unmaps a private pool's
 * segment; then the same events (unmap_events).
 *
 * Key invariant: lookups never scan more than SCAN_MAX segments, so a crafted record
 * costs time in proportion to its size; a lookup past that bound is counted ambiguous.
 * A lookup first tries the segment that answered the last one in its 2 MiB of addresses
 * (the cache), but only where that cannot change an answer: no two segments hold one
 * address at one ALLOC ordinal, and no search can reach SCAN_MAX (exact, checked at build).
 */
#include <stdlib.h>
#include <string.h>

#include "trace_internal.h"

#define SCAN_MAX 4096
#define CACHE_BITS 8          /* the cache's slots: 2^8, by hashed 2 MiB granule */
#define CACHE_GRANULE 21
#define EXACT_WORK (1u << 22) /* pairs of segments compared for exact, at most */
#define SMALL_SEGMENT (2u << 20) /* kSmallBuffer: a small-pool segment; large ones differ */

typedef struct pseg {
    uint64_t addr, end, from, to, stream;
    size_t freed;  /* the segev index of its segment_free, SIZE_MAX when none */
    uint64_t made; /* the frames hash of its segment_alloc (0: none, or made before) */
    uint32_t pool;
    uint8_t how;  /* AS_POOL_* */
    uint32_t priv; /* found private by frames or release order (1), or in the release of
                      one pool alone (2 + its run): the pool is named by stream (by_stream) */
    uint8_t fcls; /* AS_SNAP_FR_* of the request that made it */
} pseg;

struct as_snap_pools {
    pseg *s;
    size_t n;
    uint64_t max_len;
    int64_t (*pairs)[2]; /* private pool k (1..) is pairs[k - 1] */
    uint32_t npairs, nrecorded;
    uint32_t *emit; /* run r's events: emit[roff[r - 1] .. roff[r]) */
    size_t *roff;
    uint32_t nruns, maxrun;
    uint64_t retries;
    int exact;                       /* the cache may answer (build_exact) */
    uint32_t cache[1u << CACHE_BITS]; /* 1 + the index of a granule's last answer; 0: none */
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
    const int64_t(*hit)[2] = bsearch(pair, p->pairs, p->nrecorded, sizeof *p->pairs, cmp_pair);
    return hit ? (uint32_t)(hit - p->pairs) + 1 : 0;
}

/* The recorded pairs, sorted and distinct; room for as many inferred pools as segments. */
static int build_pairs(as_snap_pools *p, const as_snapshot_record *rec, size_t nseg)
{
    p->pairs = malloc((rec->nsegs + nseg + 1) * sizeof *p->pairs);
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
    p->npairs = p->nrecorded = k;
    return 0;
}

/* A new inferred pool: (0, N) with N past every recorded pair's second. */
static uint32_t new_pool(as_snap_pools *p)
{
    int64_t n = 0;
    for (uint32_t i = 0; i < p->npairs; i++)
        if (p->pairs[i][0] == 0 && p->pairs[i][1] > n)
            n = p->pairs[i][1];
    p->pairs[p->npairs][0] = 0;
    p->pairs[p->npairs][1] = n + 1;
    return ++p->npairs;
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

/* The index of the dump's first segment at addr or above (rec->segs is in address order). */
static size_t dump_lower(const as_snapshot_record *rec, uint64_t addr)
{
    size_t lo = 0, hi = rec->nsegs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rec->segs[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The dump's segment starting at addr, or NULL. */
static const as_snap_seg *dump_seg(const as_snapshot_record *rec, uint64_t addr)
{
    size_t lo = dump_lower(rec, addr);
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
                  .freed = SIZE_MAX,
                  .how = AS_POOL_AMBIGUOUS};
        if (e->action == AS_SNAP_SEG_FREE) { /* made before the trace */
            s.to = e->alloc;
            s.freed = ix[k].i;
        } else {
            s.from = e->alloc;
            s.to = UINT64_MAX;
            s.fcls = e->fcls;
            s.made = e->fhash;
            const as_snap_segev *f = k + 1 < m ? &rec->segev[ix[k + 1].i] : NULL;
            if (f && f->addr == e->addr && f->action == AS_SNAP_SEG_FREE) {
                s.to = f->alloc;
                s.freed = ix[++k].i;
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

/* Expandable segments (segment_map/segment_unmap): PyTorch 2.11's find_expandable_block
 * makes an ExpandableSegment for one (stream, pool) when none of that pool's unmapped ranges
 * on the stream fits, reserving a virtual range of 1.125 times the device's memory, and maps
 * its pages from the range's start on; release_blocks frees the range
 * (release_expandable_segment) once every page is unmapped. So a map that starts no mapped
 * or unmapped range of a live segment of its stream (base <= addr <= its end) starts a new
 * one there, whose pool every later map and unmap in it shares; the segment's life ends at
 * the unmap that leaves none of its bytes mapped, after which its range may be reserved
 * again. Each such life is one segment here, [base, the highest end mapped), made by its
 * first map's request (its frames); of_free[i] is the segment of unmap entry i. An unmap
 * of a range no map of the trace made (a segment reserved before it) is left out. Live
 * ones at the dump take the pool of the dump's segments inside them, which the dump no
 * longer adds alone (used). */
static int build_expandable(as_snap_pools *p, const as_snapshot_record *rec, uint8_t *used,
                            size_t *of_free)
{
    size_t *live = malloc((rec->nsegev + 1) * sizeof *live), nlive = 0;
    uint64_t *mapped = malloc((rec->nsegev + 1) * sizeof *mapped);
    int rc = AS_ENOMEM;
    if (!live || !mapped)
        goto out;
    for (size_t i = 0; i < rec->nsegev; i++) {
        const as_snap_segev *e = &rec->segev[i];
        int map = e->action == AS_SNAP_SEG_MAP;
        if (!map && e->action != AS_SNAP_SEG_UNMAP)
            continue;
        size_t k = nlive, seen = 0;
        while (k-- > 0 && seen++ < SCAN_MAX) {
            const pseg *s = &p->s[live[k]];
            if (s->stream == e->stream && s->addr <= e->addr &&
                (e->addr < s->end || (map && e->addr == s->end)))
                break;
        }
        if (k == SIZE_MAX || seen > SCAN_MAX) {
            if (!map)
                continue;
            mapped[nlive] = 0;
            live[nlive++] = p->n;
            k = nlive - 1;
            add(p, (pseg){.addr = e->addr,
                          .end = e->addr + e->size,
                          .from = e->alloc,
                          .to = UINT64_MAX,
                          .stream = e->stream,
                          .freed = SIZE_MAX,
                          .made = e->fhash,
                          .how = AS_POOL_AMBIGUOUS,
                          .fcls = e->fcls});
        }
        pseg *s = &p->s[live[k]];
        of_free[i] = live[k];
        if (map) {
            mapped[k] += e->size;
            if (e->addr + e->size > s->end)
                s->end = e->addr + e->size;
            if (s->end - s->addr > p->max_len)
                p->max_len = s->end - s->addr;
        } else if ((mapped[k] = e->size < mapped[k] ? mapped[k] - e->size : 0) == 0) {
            s->to = e->alloc; /* released: its range may be reserved again */
            live[k] = live[--nlive], mapped[k] = mapped[nlive];
        }
    }
    for (size_t k = 0; k < nlive; k++) { /* alive at the dump: its dump segments' pool */
        pseg *s = &p->s[live[k]];
        size_t lo = dump_lower(rec, s->addr);
        for (size_t j = lo; j < rec->nsegs && j - lo < SCAN_MAX && rec->segs[j].addr < s->end; j++)
            if (rec->segs[j].expandable && rec->segs[j].stream == s->stream) {
                if (s->how == AS_POOL_AMBIGUOUS)
                    s->pool = pool_number(p, rec->segs[j].pool), s->how = AS_POOL_RECORDED;
                used[j] = 1;
            }
    }
    rc = 0;
out:
    free(live);
    free(mapped);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Rule 2: the frames of the request that made the segment. A stream on which
 * CUDAGraph.capture_begin made a segment (its RNG-state tensors) is a capture stream: its
 * other segments were made by a capture, in the graph's pool (torch.cuda.graph captures on
 * its own stream; the 8-byte RNG tensors are the default pool's requests there). */
static int by_frames(as_snap_pools *p)
{
    uint64_t *cap = malloc((p->n + 1) * sizeof *cap);
    size_t nc = 0;
    if (!cap)
        return AS_ENOMEM;
    for (size_t i = 0; i < p->n; i++)
        if (p->s[i].fcls & AS_SNAP_FR_CAPBEGIN)
            cap[nc++] = p->s[i].stream;
    qsort(cap, nc, sizeof *cap, cmp_u64);
    for (size_t i = 0; i < p->n; i++) {
        pseg *s = &p->s[i];
        if (s->how != AS_POOL_AMBIGUOUS)
            continue;
        if (s->fcls & AS_SNAP_FR_CAPBEGIN)
            s->pool = 0, s->how = AS_POOL_FRAMES;
        else if ((s->fcls & AS_SNAP_FR_TREES) ||
                 (s->made != 0 && bsearch(&s->stream, cap, nc, sizeof *cap, cmp_u64)))
            s->priv = 1, s->how = AS_POOL_FRAMES;
    }
    free(cap);
    return 0;
}

/* (stream, size, address) order: 1 when e may follow prev in one pool's release_blocks of
 * one kind (large or small), else 0. */
static int in_order(const as_snap_segev *prev, const as_snap_segev *e)
{
    if (e->stream != prev->stream)
        return e->stream > prev->stream;
    return e->size > prev->size || (e->size == prev->size && e->addr > prev->addr);
}

/* The pools of a capture stream's segments (rule 2's, several graphs may capture on one
 * stream: torch.cuda.graph's default capture stream is one for all), told apart by
 * release order: release_cached_blocks frees each freeable private pool in turn, a pool's
 * blocks of one kind in its BlockPool's (stream, size, address) order, so in one call's
 * frees a capture stream's segment that does not follow the previous one of the same kind
 * in that order is another pool's: a new group (priv 2 + nsegev + i, past every MemPool run's).
 * The first group keeps the stream's (priv 1); segments no release tells apart stay there.
 * Returns the group of entry i's segment (si); *cprev: the previous such entry. */
static uint32_t capture_group(as_snap_pools *p, const as_snapshot_record *rec, size_t i,
                              size_t si, const as_snap_segev **cprev, uint32_t group)
{
    if (si == SIZE_MAX || p->s[si].how != AS_POOL_FRAMES || !p->s[si].priv)
        return group;
    const as_snap_segev *e = &rec->segev[i], *q = *cprev;
    if (q && (q->size == SMALL_SEGMENT) == (e->size == SMALL_SEGMENT) && !in_order(q, e))
        group = (uint32_t)(2 + rec->nsegev + i);
    *cprev = e;
    p->s[si].priv = group;
    return group;
}

/* Rule 3 over run [a, b) of segev (segment_free entries); of_free maps a segev index to
 * its segment. Groups break where the (stream, size, address) order does or the kind
 * changes; stage 1 is the default pool's large group, 2 its small one, 3 private pools'.
 * A MemPool's run: one inferred pool for all of it. */
static void by_release(as_snap_pools *p, const as_snapshot_record *rec, size_t a, size_t b,
                       const size_t *of_free)
{
    int mempool = 0;
    for (size_t i = a; i < b; i++)
        mempool |= (rec->segev[i].fcls & AS_SNAP_FR_MEMPOOL) != 0;
    int stage = 0;
    const as_snap_segev *prev = NULL, *cprev = NULL;
    uint32_t cgroup = 1;
    for (size_t i = a; i < b; i++) {
        const as_snap_segev *e = &rec->segev[i];
        cgroup = capture_group(p, rec, i, of_free[i], &cprev, cgroup);
        int small = e->size == SMALL_SEGMENT;
        int brk = !prev || small != (prev->size == SMALL_SEGMENT) || !in_order(prev, e);
        if (brk)
            stage = stage == 0 ? (small ? 2 : 1) : stage == 1 ? (small ? 2 : 3) : 3;
        prev = e;
        size_t si = of_free[i];
        if (si == SIZE_MAX || p->s[si].how != AS_POOL_AMBIGUOUS)
            continue;
        pseg *s = &p->s[si];
        s->how = AS_POOL_RELEASE;
        if (mempool)
            s->priv = 2 + e->run;
        else if (stage < 3)
            s->pool = 0;
        else
            s->priv = 1;
    }
}

static int cmp_stream(const void *a, const void *b)
{
    const pseg *x = *(pseg *const *)a, *y = *(pseg *const *)b;
    return x->stream < y->stream ? -1 : x->stream > y->stream;
}

/* Rule 4, and the naming of rule 2 and 3's private segments: a stream's recorded private
 * pool when its recorded segments agree on one, else one pool inferred for the stream (and
 * one for each release of a pool alone on it). */
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
        uint32_t pool = 0, group[16], named[16], ng = 0;
        for (; j < p->n && v[j]->stream == v[i]->stream; j++)
            if (v[j]->how == AS_POOL_RECORDED) {
                agree &= !known || v[j]->pool == pool;
                pool = v[j]->pool, known = 1;
            }
        for (size_t k = i; k < j; k++) {
            if (v[k]->priv) { /* one pool per group of the stream (the 16th takes the rest) */
                uint32_t g = 0;
                while (g < ng && group[g] != v[k]->priv && g + 1 < 16)
                    g++;
                if (g == ng) {
                    group[ng] = v[k]->priv;
                    named[ng++] = known && agree && pool ? pool : new_pool(p);
                }
                v[k]->pool = named[g];
            } else if (v[k]->how == AS_POOL_AMBIGUOUS && known && agree) {
                v[k]->pool = pool, v[k]->how = AS_POOL_BY_STREAM;
            }
        }
        i = j;
    }
    free(v);
    return 0;
}

/* The events of one call that freed or unmapped segev [a, b), appended to the current run's
 * (room for b - a + 1); released[k] marks the pools released so far; has0: the call's
 * empty_cache() is already in the run (its frees, before these unmaps). */
static void pool_events(as_snap_pools *p, size_t a, size_t b, const size_t *of_free,
                        uint8_t *released, int has0)
{
    /* empty_cache() releases the default pool only while no capture or use_mem_pool is
     * underway (release_cached_blocks: captures_underway.empty()), the freeable private
     * pools always: a call that freed no default segment gets each pool's EMPTY_CACHE
     * alone. (Had the default pool a whole free segment, a capture was underway; had it
     * none, pool 0's event would free nothing there.) */
    size_t at = p->roff[p->nruns], start = at;
    int need0 = has0;
    for (size_t i = a; i < b; i++)
        need0 |= of_free[i] == SIZE_MAX || p->s[of_free[i]].pool == 0;
    if (need0 && !has0)
        p->emit[at++] = 0;
    for (size_t i = a; i < b; i++) {
        uint32_t k = of_free[i] == SIZE_MAX ? 0 : p->s[of_free[i]].pool;
        if (k && (!need0 || !released[k]) && released[k] != 2) {
            released[k] = 2; /* released (again, by this call alone) here */
            p->emit[at++] = k;
        }
    }
    for (size_t i = a; i < b; i++) /* 1: released before this call */
        if (of_free[i] != SIZE_MAX && p->s[of_free[i]].pool)
            released[p->s[of_free[i]].pool] = 1;
    if (at == start && !has0) /* nothing read: empty_cache() */
        p->emit[at++] = 0;
    p->roff[p->nruns] = at;
}

/* The EMPTY_CACHE events of one call's frees, segev [a, b), appended to the current run's
 * (room for b - a + 1); released[k] marks the pools released so far. */
static void run_events(as_snap_pools *p, const as_snapshot_record *rec, size_t a, size_t b,
                       const size_t *of_free, uint8_t *released)
{
    const as_snap_segev *nx = b < rec->nsegev ? &rec->segev[b] : NULL;
    int retry =
            nx && nx->action == AS_SNAP_SEG_ALLOC && nx->fhash && nx->alloc == rec->segev[a].alloc,
        own = 1;
    for (size_t i = a; i < b && retry; i++) {
        retry = rec->segev[i].fhash == nx->fhash;
        own &= of_free[i] != SIZE_MAX && p->s[of_free[i]].made == rec->segev[i].fhash;
    }
    /* recorded with context="alloc", empty_cache()'s frees carry each segment's own
     * frames: a run whose every free has its segment's frames is that, not a retry */
    retry &= !own;
    if (retry) {
        p->retries++;
        return;
    }
    pool_events(p, a, b, of_free, released, 0);
}

/* Rule 3 for the expandable segments that unmap group [a, b) of segev unmapped: a call whose
 * frames name a MemPool's destructor unmaps that pool's segments alone (one inferred pool
 * for the run, as by_release). Other calls name no pool: an unmap covers the whole pages
 * inside a free block, not the block that release_blocks' (stream, size, address) order
 * sorts, and one segment's blocks may be unmapped piece by piece. */
static void by_release_unmaps(as_snap_pools *p, const as_snapshot_record *rec, size_t a, size_t b,
                              const size_t *of_free)
{
    int mempool = 0;
    for (size_t i = a; i < b; i++)
        mempool |= (rec->segev[i].fcls & AS_SNAP_FR_MEMPOOL) != 0;
    for (size_t i = a; i < b && mempool; i++) {
        size_t si = of_free[i];
        if (si != SIZE_MAX && p->s[si].how == AS_POOL_AMBIGUOUS)
            p->s[si].how = AS_POOL_RELEASE, p->s[si].priv = 2 + rec->segev[i].run;
    }
}

/* Run r's events start here (the runs before it that freed nothing read: empty_cache()). */
static void open_run(as_snap_pools *p, uint32_t r)
{
    while (p->nruns + 1 < r) /* runs of unmaps alone: empty_cache() */
        p->emit[p->roff[p->nruns]] = 0, p->roff[p->nruns + 1] = p->roff[p->nruns] + 1, p->nruns++;
    if (p->nruns < r)
        p->roff[r] = p->roff[r - 1], p->nruns = r;
}

/* The events of unmap group [a, b) of run r. One that unmaps no private pool's segment
 * gives none of its own: a run of the default pool's unmaps reads as empty_cache() (open_run,
 * as_snap_pools_run), and a call's unmaps after its frees add nothing to the frees' events.
 * Else they are a call's as run_events gives them (never read as an OOM retry, as no run of
 * unmaps is), appended to the frees of the same call (the entry before, in run r with the
 * same frames) unless those were read as a retry. */
static void unmap_events(as_snap_pools *p, const as_snapshot_record *rec, size_t a, size_t b,
                         const size_t *of_free, uint8_t *released)
{
    uint32_t r = rec->segev[a].run;
    int priv = 0;
    for (size_t i = a; i < b; i++)
        priv |= of_free[i] != SIZE_MAX && p->s[of_free[i]].pool != 0;
    if (!priv || r > p->maxrun || r < p->nruns)
        return;
    const as_snap_segev *pe = a ? &rec->segev[a - 1] : NULL;
    int same =
        pe && pe->action == AS_SNAP_SEG_FREE && pe->run == r && pe->fhash == rec->segev[a].fhash;
    open_run(p, r);
    int has0 = 0;
    for (size_t i = p->roff[r - 1]; same && i < p->roff[r]; i++)
        has0 |= p->emit[i] == 0;
    if (same && p->roff[r] == p->roff[r - 1])
        return; /* the call's frees were an OOM retry's */
    pool_events(p, a, b, of_free, released, has0);
}

/* Every run of segment_free entries, and of segment_unmap ones, split where the frames change
 * (one call's frees have its context's): rule 3 (when `events` is 0) or the run's events (1). */
static int runs(as_snap_pools *p, const as_snapshot_record *rec, const size_t *of_free, int events)
{
    uint8_t *released = events ? calloc(p->npairs + 1, 1) : NULL;
    if (events && !released)
        return AS_ENOMEM;
    for (size_t a = 0; a < rec->nsegev;) {
        size_t b = a;
        uint32_t r = rec->segev[a].run;
        uint8_t act = rec->segev[a].action;
        while (b < rec->nsegev && (act == AS_SNAP_SEG_FREE || act == AS_SNAP_SEG_UNMAP) &&
               rec->segev[b].action == act && rec->segev[b].run == r &&
               rec->segev[b].fhash == rec->segev[a].fhash)
            b++;
        if (b == a) {
            a++;
            continue;
        }
        if (act == AS_SNAP_SEG_UNMAP) {
            if (!events)
                by_release_unmaps(p, rec, a, b, of_free);
            else
                unmap_events(p, rec, a, b, of_free, released);
        } else if (!events) {
            by_release(p, rec, a, b, of_free);
        } else if (r <= p->maxrun && r >= p->nruns) {
            open_run(p, r);
            run_events(p, rec, a, b, of_free, released); /* appended to run r's */
        }
        a = b;
    }
    free(released);
    return 0;
}

/* of_free[i]: the segment whose segment_free is segev entry i (p->s in its final order). */
static size_t *free_map(const as_snap_pools *p, const as_snapshot_record *rec)
{
    size_t *m = malloc((rec->nsegev + 1) * sizeof *m);
    if (!m)
        return NULL;
    for (size_t i = 0; i < rec->nsegev; i++)
        m[i] = SIZE_MAX;
    for (size_t i = 0; i < p->n; i++)
        if (p->s[i].freed != SIZE_MAX)
            m[p->s[i].freed] = i;
    return m;
}

static int build_runs(as_snap_pools *p, const as_snapshot_record *rec, const size_t *of_free)
{
    uint32_t maxrun = 0;
    for (size_t i = 0; i < rec->nsegev; i++)
        if (rec->segev[i].run > maxrun)
            maxrun = rec->segev[i].run;
    if (maxrun > rec->nsegev) /* runs are numbered by the entries that start them */
        maxrun = (uint32_t)rec->nsegev;
    p->maxrun = maxrun;
    p->roff = calloc((size_t)maxrun + 2, sizeof *p->roff);
    p->emit = malloc((2 * rec->nsegev + maxrun + 1) * sizeof *p->emit);
    if (!p->roff || !p->emit)
        return AS_ENOMEM;
    return runs(p, rec, of_free, 1);
}

/* 1 when every (address, ALLOC ordinal) is in at most one segment and a search never
 * meets SCAN_MAX, so that the one segment found is the search's answer wherever it holds
 * the lookup (as_snap_pools_of's cache). Segments sorted by address; a record that would
 * take more than EXACT_WORK comparisons to tell (crafted) gets 0: no cache, same answers. */
static int build_exact(const as_snap_pools *p)
{
    if (p->n > SCAN_MAX)
        return 0;
    size_t work = 0;
    for (size_t i = 0; i < p->n; i++)
        for (size_t j = i + 1; j < p->n && p->s[j].addr < p->s[i].end; j++) {
            const pseg *a = &p->s[i], *b = &p->s[j];
            if (++work > EXACT_WORK ||
                (a->from < a->to && b->from < b->to && a->from < b->to && b->from < a->to))
                return 0;
        }
    return 1;
}

int as_snap_pools_build(const as_snapshot_record *rec, as_snap_pools **out)
{
    *out = NULL;
    as_snap_pools *p = calloc(1, sizeof *p);
    uint8_t *used = calloc(rec->nsegs + 1, 1);
    size_t *of_free = NULL;
    int rc = AS_ENOMEM;
    if (!p || !used || (rc = build_pairs(p, rec, rec->nsegev + rec->nsegs)))
        goto fail;
    rc = AS_ENOMEM;
    if (!(p->s = malloc((rec->nsegev + rec->nsegs + 1) * sizeof *p->s)))
        goto fail;
    if ((rc = build_lives(p, rec, used)))
        goto fail;
    rc = AS_ENOMEM;
    if (!(of_free = free_map(p, rec)) || (rc = build_expandable(p, rec, used, of_free)))
        goto fail;
    for (size_t i = 0; i < rec->nsegs; i++) /* at the dump, and older than the trace */
        if (!used[i])
            add(p, (pseg){.addr = rec->segs[i].addr,
                          .end = rec->segs[i].addr + rec->segs[i].size,
                          .to = UINT64_MAX,
                          .stream = rec->segs[i].stream,
                          .freed = SIZE_MAX,
                          .pool = pool_number(p, rec->segs[i].pool),
                          .how = AS_POOL_RECORDED});
    if ((rc = by_frames(p)))
        goto fail;
    if ((rc = runs(p, rec, of_free, 0)) || (rc = by_stream(p)) ||
        (rc = build_runs(p, rec, of_free)))
        goto fail;
    qsort(p->s, p->n, sizeof *p->s, cmp_pseg);
    p->exact = build_exact(p);
    free(of_free);
    free(used);
    *out = p;
    return 0;
fail:
    free(of_free);
    free(used);
    as_snap_pools_free(p);
    return rc;
}

static uint32_t seg_pool(const pseg *s, int *how)
{
    *how = s->how;
    return s->how == AS_POOL_AMBIGUOUS ? 0 : s->pool;
}

uint32_t as_snap_pools_of(as_snap_pools *p, uint64_t addr, uint64_t alloc, int *how)
{
    uint32_t *c = NULL;
    if (p->exact) {
        c = &p->cache[((addr >> CACHE_GRANULE) * 0x9E3779B97F4A7C15ull) >> (64 - CACHE_BITS)];
        const pseg *s = &p->s[*c ? *c - 1 : 0];
        if (*c && s->addr <= addr && addr < s->end && s->from <= alloc && alloc < s->to)
            return seg_pool(s, how);
    }
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
            if (c)
                *c = (uint32_t)k + 1;
            return seg_pool(s, how);
        }
    }
    *how = AS_POOL_AMBIGUOUS; /* in no segment the record knows of */
    return 0;
}

uint32_t as_snap_pools_count(const as_snap_pools *p)
{
    return p ? p->npairs : 0;
}

uint32_t as_snap_pools_inferred(const as_snap_pools *p)
{
    return p ? p->npairs - p->nrecorded : 0;
}

void as_snap_pools_pair(const as_snap_pools *p, uint32_t k, int64_t pair[2])
{
    pair[0] = p->pairs[k - 1][0];
    pair[1] = p->pairs[k - 1][1];
}

size_t as_snap_pools_run(const as_snap_pools *p, uint64_t run, const uint32_t **pools)
{
    static const uint32_t empty_cache = 0;
    if (!p || run == 0 || run > p->nruns) {
        *pools = &empty_cache;
        return 1;
    }
    *pools = p->emit + p->roff[run - 1];
    return p->roff[run] - p->roff[run - 1];
}

uint64_t as_snap_pools_retries(const as_snap_pools *p)
{
    return p ? p->retries : 0;
}

void as_snap_pools_free(as_snap_pools *p)
{
    if (!p)
        return;
    free(p->s);
    free(p->pairs);
    free(p->emit);
    free(p->roff);
    free(p);
}
