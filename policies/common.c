/*
 * common.c - the heap (block arena, segments, chains, accounting), the free-block treap
 * and the shared rules of common.h.
 *
 * Block and segment nodes live in growable arrays indexed by uint32 (0 = nil) so that a
 * node costs no host allocation per event once the arrays have grown; recycled nodes go
 * on a free list. A handle is (generation << 32 | index): a stale or forged handle is
 * refused instead of corrupting the heap.
 */
#include "common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int as_check_fail(as_check_failure *f, const char *fmt, ...)
{
    if (f) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(f->msg, sizeof f->msg, fmt, ap);
        va_end(ap);
    }
    return AS_ECHECK;
}

uint64_t as_segment_size(uint64_t rounded, uint64_t segment)
{
    if (rounded < segment)
        return as_align_up(segment, AS_DEV_GRANULARITY);
    return as_align_up(rounded, AS_DEV_GRANULARITY);
}

_Static_assert(sizeof(as_blk) == 64, "as_blk is one cache line");

/* ---- nodes ---------------------------------------------------------------------------- */

static uint32_t blk_new(as_heap *h)
{
    uint32_t i;
    if (h->free_b) {
        i = h->free_b;
        h->free_b = h->b[i].l;
    } else {
        if (h->nb == h->cap_b) {
            uint32_t nc = h->cap_b ? h->cap_b * 2 : 256;
            if (nc <= h->cap_b)
                return AS_NIL;
            as_blk *nb = aligned_alloc(64, (size_t)nc * sizeof *nb);
            if (!nb)
                return AS_NIL;
            memcpy(nb, h->b, (size_t)h->nb * sizeof *nb);
            free(h->b);
            h->b = nb;
            h->cap_b = nc;
        }
        i = h->nb++;
        h->b[i].gen = 0;
    }
    uint32_t gen = h->b[i].gen;
    h->b[i] = (as_blk){.gen = gen, .state = AS_BLOCK_FREE};
    return i;
}

static void blk_put(as_heap *h, uint32_t i)
{
    h->b[i].state = AS_BLK_DEAD;
    h->b[i].gen++;
    h->b[i].l = h->free_b;
    h->free_b = i;
}

static uint32_t seg_new(as_heap *h)
{
    uint32_t i;
    if (h->free_s) {
        i = h->free_s;
        h->free_s = h->s[i].enext;
    } else {
        if (h->ns == h->cap_s) {
            uint32_t nc = h->cap_s ? h->cap_s * 2 : 64;
            if (nc <= h->cap_s)
                return AS_NIL;
            as_seg *ns = realloc(h->s, (size_t)nc * sizeof *ns);
            if (!ns)
                return AS_NIL;
            h->s = ns;
            h->cap_s = nc;
        }
        i = h->ns++;
    }
    h->s[i] = (as_seg){0};
    return i;
}

static void seg_put(as_heap *h, uint32_t i)
{
    h->s[i] = (as_seg){.enext = h->free_s};
    h->free_s = i;
}

static void empty_push(as_heap *h, uint32_t si)
{
    as_seg *s = &h->s[si];
    s->in_empty = 1;
    s->eprev = AS_NIL;
    s->enext = h->empty;
    if (h->empty)
        h->s[h->empty].eprev = si;
    h->empty = si;
}

static void empty_remove(as_heap *h, uint32_t si)
{
    as_seg *s = &h->s[si];
    if (!s->in_empty)
        return;
    if (s->eprev)
        h->s[s->eprev].enext = s->enext;
    else
        h->empty = s->enext;
    if (s->enext)
        h->s[s->enext].eprev = s->eprev;
    s->in_empty = 0;
    s->eprev = s->enext = AS_NIL;
}

void as_heap_index(as_heap *h, uint32_t b)
{
    if (h->ix) {
        h->ix->insert(h, b);
        h->b[b].indexed = 1;
    }
}

void as_heap_unindex(as_heap *h, uint32_t b)
{
    if (h->ix && h->b[b].indexed) {
        h->ix->remove(h, b);
        h->b[b].indexed = 0;
    }
}

/* ---- heap ----------------------------------------------------------------------------- */

int as_heap_init(as_heap *h, const as_device *dev, const as_index_ops *ix)
{
    memset(h, 0, sizeof *h);
    h->dev = dev;
    h->ix = ix;
    h->cap_b = 256;
    h->cap_s = 64;
    h->b = aligned_alloc(64, h->cap_b * sizeof *h->b);
    h->s = malloc(h->cap_s * sizeof *h->s);
    if (!h->b || !h->s) {
        free(h->b);
        free(h->s);
        memset(h, 0, sizeof *h);
        return AS_ENOMEM;
    }
    /* Slot 0 of each arena is the nil sentinel. */
    h->b[0] = (as_blk){.state = AS_BLK_DEAD};
    h->s[0] = (as_seg){0};
    h->nb = 1;
    h->ns = 1;
    return 0;
}

void as_heap_fini(as_heap *h)
{
    if (h->s && h->dev) {
        for (uint32_t i = 1; i < h->ns; i++)
            if (h->s[i].head != AS_NIL)
                h->dev->ops->release(h->dev->ctx, h->s[i].addr, h->s[i].size);
    }
    free(h->b);
    free(h->s);
    memset(h, 0, sizeof *h);
}

int as_heap_grow(as_heap *h, uint64_t size, uint32_t *blk)
{
    /* Host nodes first, so that a failure never leaves device memory unaccounted. */
    uint32_t bi = blk_new(h);
    if (!bi)
        return AS_ENOMEM;
    uint32_t si = seg_new(h);
    if (!si) {
        blk_put(h, bi);
        return AS_ENOMEM;
    }
    uint64_t addr = 0;
    int rc = h->dev->ops->reserve(h->dev->ctx, size, &addr);
    if (rc != AS_DEV_OK) {
        blk_put(h, bi);
        seg_put(h, si);
        return rc == AS_DEV_OOM ? AS_POLICY_OOM : AS_EDEVICE;
    }
    h->dev_reserves++;
    h->reserved += size;
    h->nsegs++;
    as_seg *s = &h->s[si];
    s->addr = addr;
    s->size = size;
    s->head = bi;
    s->nused = 0;
    empty_push(h, si);
    as_blk *x = &h->b[bi];
    x->addr = addr;
    x->size = size;
    x->seg = si;
    x->prev = x->next = AS_NIL;
    h->free_bytes += size;
    h->nfree++;
    as_heap_index(h, bi);
    *blk = bi;
    return 0;
}

int as_heap_split(as_heap *h, uint32_t b, uint64_t size, uint32_t *tail)
{
    uint32_t t = blk_new(h);
    if (!t)
        return AS_ENOMEM;
    as_blk *x = &h->b[b], *y = &h->b[t];
    y->addr = x->addr + size;
    y->size = x->size - size;
    y->prev = b;
    y->next = x->next;
    y->seg = x->seg;
    if (x->next)
        h->b[x->next].prev = t;
    x->next = t;
    x->size = size;
    h->nfree++;
    *tail = t;
    return 0;
}

void as_heap_merge_next(as_heap *h, uint32_t b)
{
    as_blk *x = &h->b[b];
    uint32_t n = x->next;
    as_blk *y = &h->b[n];
    x->size += y->size;
    x->next = y->next;
    if (y->next)
        h->b[y->next].prev = b;
    blk_put(h, n);
    h->nfree--;
}

/* n absorbs its free, unindexed predecessor (the survivor is n, now starting lower). */
static void absorb_prev(as_heap *h, uint32_t n)
{
    as_blk *y = &h->b[n];
    uint32_t b = y->prev;
    as_blk *x = &h->b[b];
    y->addr = x->addr;
    y->size += x->size;
    y->prev = x->prev;
    if (x->prev)
        h->b[x->prev].next = n;
    else
        h->s[y->seg].head = n;
    blk_put(h, b);
    h->nfree--;
}

int as_heap_take(as_heap *h, uint32_t b, uint64_t size, int split, const as_request *req,
                 as_block *out)
{
    uint32_t tail = AS_NIL;
    int cut = split && size < h->b[b].size;
    if (cut && h->ix && h->ix->replace && h->b[b].indexed) {
        /* The tail takes the block's place in an address-ordered index. */
        uint64_t old = h->b[b].size;
        int rc = as_heap_split(h, b, size, &tail);
        if (rc)
            return rc;
        h->ix->replace(h, b, tail, old);
        h->b[b].indexed = 0;
        h->b[tail].indexed = 1;
    } else {
        as_heap_unindex(h, b);
        if (cut) {
            int rc = as_heap_split(h, b, size, &tail);
            if (rc) {
                as_heap_index(h, b);
                return rc;
            }
            as_heap_index(h, tail);
        }
    }
    as_blk *x = &h->b[b];
    x->state = AS_BLOCK_ALLOCATED;
    x->gen++;
    x->id = req->id;
    x->stream = req->stream;
    h->free_bytes -= x->size;
    h->allocated += x->size;
    h->nfree--;
    as_seg *s = &h->s[x->seg];
    if (s->nused++ == 0)
        empty_remove(h, x->seg);
    out->addr = x->addr;
    out->size = x->size;
    out->handle = (uint64_t)x->gen << 32 | b;
    return 0;
}

uint32_t as_heap_lookup(const as_heap *h, uint64_t handle)
{
    uint32_t i = (uint32_t)handle;
    uint32_t gen = (uint32_t)(handle >> 32);
    if (i == AS_NIL || i >= h->nb)
        return AS_NIL;
    const as_blk *x = &h->b[i];
    if (x->gen != gen || (x->state != AS_BLOCK_ALLOCATED && x->state != AS_BLOCK_PENDING))
        return AS_NIL;
    return i;
}

int as_heap_free(as_heap *h, uint64_t handle, unsigned flags, int coalesce, uint32_t *blk)
{
    uint32_t b = as_heap_lookup(h, handle);
    *blk = AS_NIL;
    if (!b)
        return AS_EINVAL;
    as_blk *x = &h->b[b];
    if (flags & AS_FREE_PENDING) {
        if (x->state != AS_BLOCK_ALLOCATED)
            return AS_EINVAL;
        x->state = AS_BLOCK_PENDING;
        return 0;
    }
    x->state = AS_BLOCK_FREE;
    h->allocated -= x->size;
    h->free_bytes += x->size;
    h->nfree++;
    as_seg *s = &h->s[x->seg];
    if (--s->nused == 0)
        empty_push(h, x->seg);
    if (coalesce && h->ix && h->ix->replace) {
        /* Address-ordered index: merged blocks keep their neighbour's place. */
        uint32_t p = x->prev, n = x->next;
        int pf = p && h->b[p].state == AS_BLOCK_FREE, nf = n && h->b[n].state == AS_BLOCK_FREE;
        if (pf) {
            uint64_t old = h->b[p].size;
            if (nf)
                as_heap_unindex(h, n);
            as_heap_merge_next(h, p);
            if (nf)
                as_heap_merge_next(h, p);
            h->ix->resized(h, p, old);
            *blk = p;
            return 0;
        }
        if (nf) {
            /* n absorbs b: it keeps its place in the order, only growing downwards. */
            uint64_t old = h->b[n].size;
            absorb_prev(h, n);
            h->ix->resized(h, n, old);
            *blk = n;
            return 0;
        }
    } else if (coalesce) {
        uint32_t p = x->prev;
        if (p && h->b[p].state == AS_BLOCK_FREE) {
            as_heap_unindex(h, p);
            as_heap_merge_next(h, p);
            b = p;
        }
        uint32_t n = h->b[b].next;
        if (n && h->b[n].state == AS_BLOCK_FREE) {
            as_heap_unindex(h, n);
            as_heap_merge_next(h, b);
        }
    }
    as_heap_index(h, b);
    *blk = b;
    return 0;
}

int as_heap_release_seg(as_heap *h, uint32_t si)
{
    as_seg *s = &h->s[si];
    if (s->head == AS_NIL || s->nused)
        return AS_EINVAL;
    int rc = h->dev->ops->release(h->dev->ctx, s->addr, s->size);
    if (rc != AS_DEV_OK)
        return AS_EDEVICE;
    h->dev_releases++;
    h->reserved -= s->size;
    for (uint32_t b = s->head; b;) {
        uint32_t n = h->b[b].next;
        as_heap_unindex(h, b);
        h->free_bytes -= h->b[b].size;
        h->nfree--;
        blk_put(h, b);
        b = n;
    }
    empty_remove(h, si);
    h->nsegs--;
    seg_put(h, si);
    return 0;
}

int as_heap_release_empty(as_heap *h, uint64_t *bytes)
{
    uint64_t total = 0;
    while (h->empty) {
        uint32_t si = h->empty;
        uint64_t sz = h->s[si].size;
        int rc = as_heap_release_seg(h, si);
        if (rc)
            return rc;
        total += sz;
    }
    if (bytes)
        *bytes = total;
    return 0;
}

int as_heap_after_free(as_heap *h, uint32_t blk, int64_t release)
{
    if (release != AS_RELEASE_ALWAYS || !blk)
        return 0;
    uint32_t si = h->b[blk].seg;
    if (h->s[si].nused == 0)
        return as_heap_release_seg(h, si);
    return 0;
}

int as_heap_grow_or_release(as_heap *h, uint64_t size, int64_t release, uint32_t *blk)
{
    int rc = as_heap_grow(h, size, blk);
    if (rc == AS_POLICY_OOM && release != AS_RELEASE_NONE && h->empty) {
        h->retries++;
        rc = as_heap_release_empty(h, NULL);
        if (rc)
            return rc;
        rc = as_heap_grow(h, size, blk);
    }
    return rc;
}

void as_heap_stats(const as_heap *h, as_policy_stats *out)
{
    memset(out, 0, sizeof *out);
    out->allocated = h->allocated;
    out->reserved = h->reserved;
    out->free_bytes = h->free_bytes;
    out->segments = h->nsegs;
    out->device_reserves = h->dev_reserves;
    out->device_releases = h->dev_releases;
    out->retries = h->retries;
}

int as_heap_check(const as_heap *h, int coalesced, as_check_failure *f)
{
    uint64_t alloc = 0, freeb = 0, resv = 0, nfree = 0, segs = 0, empties = 0;
    for (uint32_t si = 1; si < h->ns; si++) {
        const as_seg *s = &h->s[si];
        if (s->head == AS_NIL)
            continue;
        segs++;
        resv += s->size;
        uint64_t at = s->addr, used = 0, guard = 0;
        uint32_t prev = AS_NIL;
        for (uint32_t b = s->head; b; b = h->b[b].next) {
            if (b >= h->nb || ++guard > h->nb)
                return as_check_fail(f, "segment %#llx: block chain is broken or cyclic",
                                     (unsigned long long)s->addr);
            const as_blk *x = &h->b[b];
            if (x->state != AS_BLOCK_FREE && x->state != AS_BLOCK_ALLOCATED &&
                x->state != AS_BLOCK_PENDING)
                return as_check_fail(f, "block %u in segment %#llx has bad state %u", b,
                                     (unsigned long long)s->addr, x->state);
            if (x->seg != si || x->prev != prev)
                return as_check_fail(f, "block %#llx: wrong segment or prev link",
                                     (unsigned long long)x->addr);
            if (x->addr != at || x->size == 0)
                return as_check_fail(f, "block %#llx+%llu does not continue segment %#llx at %#llx",
                                     (unsigned long long)x->addr, (unsigned long long)x->size,
                                     (unsigned long long)s->addr, (unsigned long long)at);
            if (x->state == AS_BLOCK_FREE) {
                freeb += x->size;
                nfree++;
                if (h->ix && !x->indexed)
                    return as_check_fail(f, "free block %#llx is not in the free index",
                                         (unsigned long long)x->addr);
                if (coalesced && prev && h->b[prev].state == AS_BLOCK_FREE)
                    return as_check_fail(f, "free blocks %#llx and %#llx were not coalesced",
                                         (unsigned long long)h->b[prev].addr,
                                         (unsigned long long)x->addr);
            } else {
                alloc += x->size;
                used++;
                if (x->indexed)
                    return as_check_fail(f, "block %#llx in use but in the free index",
                                         (unsigned long long)x->addr);
            }
            at += x->size;
            prev = b;
        }
        if (at != s->addr + s->size)
            return as_check_fail(f, "blocks of segment %#llx+%llu end at %#llx",
                                 (unsigned long long)s->addr, (unsigned long long)s->size,
                                 (unsigned long long)at);
        if (used != s->nused)
            return as_check_fail(f, "segment %#llx counts %u blocks in use, has %llu",
                                 (unsigned long long)s->addr, s->nused, (unsigned long long)used);
        if ((s->nused == 0) != (s->in_empty != 0))
            return as_check_fail(f, "segment %#llx: empty-list membership is wrong",
                                 (unsigned long long)s->addr);
        empties += s->nused == 0;
    }
    uint64_t listed = 0;
    for (uint32_t si = h->empty; si; si = h->s[si].enext)
        if (++listed > segs)
            break;
    if (listed != empties)
        return as_check_fail(f, "empty-segment list holds %llu, %llu segments are empty",
                             (unsigned long long)listed, (unsigned long long)empties);
    if (segs != h->nsegs || resv != h->reserved)
        return as_check_fail(f, "segments: %llu (%llu B) counted, %llu (%llu B) found",
                             (unsigned long long)h->nsegs, (unsigned long long)h->reserved,
                             (unsigned long long)segs, (unsigned long long)resv);
    if (alloc != h->allocated || freeb != h->free_bytes || nfree != h->nfree)
        return as_check_fail(f,
                             "accounting: allocated %llu/%llu, free %llu/%llu, free blocks "
                             "%llu/%llu (counted/found)",
                             (unsigned long long)h->allocated, (unsigned long long)alloc,
                             (unsigned long long)h->free_bytes, (unsigned long long)freeb,
                             (unsigned long long)h->nfree, (unsigned long long)nfree);
    if (h->dev && h->dev->ops->reserved) {
        uint64_t d = h->dev->ops->reserved(h->dev->ctx);
        if (d != h->reserved)
            return as_check_fail(f, "policy holds %llu B but the device counts %llu B",
                                 (unsigned long long)h->reserved, (unsigned long long)d);
    }
    return 0;
}

static int seg_cmp_ctx(const as_seg *s, uint32_t a, uint32_t b)
{
    return s[a].addr < s[b].addr ? -1 : s[a].addr > s[b].addr;
}

/* Sorts segment indices by address: a heap sort, so no global context is needed. */
static void sort_segs(const as_seg *s, uint32_t *v, size_t n)
{
    for (size_t start = n / 2; start-- > 0;) {
        for (size_t r = start;;) {
            size_t c = 2 * r + 1;
            if (c >= n)
                break;
            if (c + 1 < n && seg_cmp_ctx(s, v[c], v[c + 1]) < 0)
                c++;
            if (seg_cmp_ctx(s, v[r], v[c]) >= 0)
                break;
            uint32_t t = v[r];
            v[r] = v[c];
            v[c] = t;
            r = c;
        }
    }
    for (size_t end = n; end-- > 1;) {
        uint32_t t = v[0];
        v[0] = v[end];
        v[end] = t;
        for (size_t r = 0;;) {
            size_t c = 2 * r + 1;
            if (c >= end)
                break;
            if (c + 1 < end && seg_cmp_ctx(s, v[c], v[c + 1]) < 0)
                c++;
            if (seg_cmp_ctx(s, v[r], v[c]) >= 0)
                break;
            uint32_t u = v[r];
            v[r] = v[c];
            v[c] = u;
            r = c;
        }
    }
}

int as_heap_walk(const as_heap *h, as_walk_fn fn, void *user)
{
    uint32_t *v = malloc(((size_t)h->nsegs + 1) * sizeof *v);
    if (!v)
        return AS_ENOMEM;
    size_t n = 0;
    for (uint32_t si = 1; si < h->ns; si++)
        if (h->s[si].head != AS_NIL)
            v[n++] = si;
    sort_segs(h->s, v, n);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const as_seg *s = &h->s[v[i]];
        as_walk_item it = {.kind = AS_WALK_SEGMENT,
                           .addr = s->addr,
                           .size = s->size,
                           .stream = 0,
                           .id = UINT64_MAX};
        rc = fn(user, &it);
        for (uint32_t b = s->head; b && !rc; b = h->b[b].next) {
            const as_blk *x = &h->b[b];
            as_walk_item bi = {.kind = AS_WALK_BLOCK,
                               .addr = x->addr,
                               .size = x->size,
                               .stream = x->state == AS_BLOCK_FREE ? 0 : x->stream,
                               .state = (as_block_state)x->state,
                               .id = x->state == AS_BLOCK_FREE ? UINT64_MAX : x->id};
            rc = fn(user, &bi);
        }
    }
    free(v);
    return rc;
}

/* ---- treap ---------------------------------------------------------------------------- */

/* Each operation is written once as an always-inlined body taking the mode, and the public
 * functions pick the body once: each mode gets its own copy with the key test and the
 * subtree-max upkeep resolved at compile time (the treaps are the policies' hot path). */
#define AS_HOT static inline __attribute__((always_inline))

static inline uint32_t prio_of(uint32_t i)
{
    /* A fixed hash of the node index: deterministic, and random enough for balance. */
    i ^= i >> 16;
    i *= 0x7feb352dU;
    i ^= i >> 15;
    i *= 0x846ca68bU;
    i ^= i >> 16;
    return i;
}

#define PRIO(B, i) ((B)[i].prio)

static inline int key_less(const as_blk *B, as_treap_mode m, uint32_t a, uint32_t b)
{
    if (m == AS_TREAP_SIZE && B[a].size != B[b].size)
        return B[a].size < B[b].size;
    return B[a].addr < B[b].addr;
}

/* Is the key (size, addr) below node n's key? */
AS_HOT int key_below(const as_blk *B, as_treap_mode m, uint64_t size, uint64_t addr, uint32_t n)
{
    if (m == AS_TREAP_SIZE && size != B[n].size)
        return size < B[n].size;
    return addr < B[n].addr;
}

/* The subtree max of t from its own size and its children's maxima. */
static inline uint64_t aug_of(const as_blk *B, uint32_t t)
{
    uint64_t mx = B[t].size;
    uint32_t l = B[t].l, r = B[t].r;
    if (l && B[l].aug > mx)
        mx = B[l].aug;
    if (r && B[r].aug > mx)
        mx = B[r].aug;
    return mx;
}

/* Recomputes t's subtree max; returns whether it changed. */
static inline int upd(as_blk *B, uint32_t t)
{
    uint64_t mx = aug_of(B, t);
    int changed = B[t].aug != mx;
    B[t].aug = mx;
    return changed;
}

/* Points the link that held `old` (in its parent, or the root) at `nw`. */
static inline void relink(as_blk *B, as_treap *t, uint32_t parent, uint32_t old, uint32_t nw)
{
    if (!parent)
        t->root = nw;
    else if (B[parent].l == old)
        B[parent].l = nw;
    else
        B[parent].r = nw;
    if (nw)
        B[nw].up = parent;
}

/* Lifts x above its parent p. In address trees x takes over p's subtree, so it inherits
 * p's maximum, and only p's is recomputed. */
AS_HOT void rotate_up(as_blk *B, as_treap *t, as_treap_mode m, uint32_t x)
{
    uint32_t p = B[x].up, g = B[p].up;
    if (B[p].l == x) {
        uint32_t c = B[x].r;
        B[p].l = c;
        if (c)
            B[c].up = p;
        B[x].r = p;
    } else {
        uint32_t c = B[x].l;
        B[p].r = c;
        if (c)
            B[c].up = p;
        B[x].l = p;
    }
    B[p].up = x;
    relink(B, t, g, p, x);
    if (m == AS_TREAP_ADDR) {
        B[x].aug = B[p].aug;
        B[p].aug = aug_of(B, p);
    }
}

/* Walks from n to the root recomputing subtree maxima, stopping once one is unchanged (then
 * every maximum above it is unchanged too). */
static void fix_up(as_blk *B, uint32_t n)
{
    for (; n; n = B[n].up)
        if (!upd(B, n))
            break;
}

AS_HOT void insert_m(as_heap *h, as_treap *t, as_treap_mode m, uint32_t b)
{
    as_blk *B = h->b;
    uint64_t size = B[b].size, addr = B[b].addr;
    uint32_t prio = prio_of(b);
    B[b].l = B[b].r = AS_NIL;
    B[b].aug = size;
    B[b].prio = prio;
    t->n++;
    uint32_t n = t->root, parent = AS_NIL;
    int left = 0;
    while (n) {
        /* Every node passed gains b in its subtree: raise the maxima on the way down, so
         * that nothing above b's final place needs fixing afterwards (rotations keep it). */
        if (m == AS_TREAP_ADDR)
            B[n].aug = B[n].aug < size ? size : B[n].aug;
        parent = n;
        uint32_t l = B[n].l, r = B[n].r;
        left = key_below(B, m, size, addr, n);
        n = left ? l : r;
    }
    B[b].up = parent;
    if (!parent)
        t->root = b;
    else if (left)
        B[parent].l = b;
    else
        B[parent].r = b;
    while (B[b].up && prio > PRIO(B, B[b].up))
        rotate_up(B, t, m, b);
}

AS_HOT void remove_m(as_heap *h, as_treap *t, as_treap_mode m, uint32_t b)
{
    as_blk *B = h->b;
    /* Rotate b down (its higher-priority child up) until it has at most one child; each
     * child lifted takes over b's subtree, b still in it, so every maximum stays correct for
     * the tree with b until b is cut out. */
    for (;;) {
        uint32_t l = B[b].l, r = B[b].r;
        if (!l || !r)
            break;
        uint32_t c = PRIO(B, l) > PRIO(B, r) ? l : r;
        if (m == AS_TREAP_ADDR) {
            uint64_t a = B[b].aug;
            rotate_up(B, t, AS_TREAP_SIZE, c); /* the links only */
            B[c].aug = a;
            B[b].aug = aug_of(B, b);
        } else {
            rotate_up(B, t, m, c);
        }
    }
    uint32_t c = B[b].l ? B[b].l : B[b].r, parent = B[b].up;
    relink(B, t, parent, b, c);
    B[b].l = B[b].r = B[b].up = AS_NIL;
    t->n--;
    if (m == AS_TREAP_ADDR)
        fix_up(B, parent);
}

void as_treap_insert(as_heap *h, as_treap *t, uint32_t b)
{
    if (t->mode == AS_TREAP_ADDR)
        insert_m(h, t, AS_TREAP_ADDR, b);
    else
        insert_m(h, t, AS_TREAP_SIZE, b);
}

void as_treap_remove(as_heap *h, as_treap *t, uint32_t b)
{
    if (t->mode == AS_TREAP_ADDR)
        remove_m(h, t, AS_TREAP_ADDR, b);
    else
        remove_m(h, t, AS_TREAP_SIZE, b);
}

void as_treap_replace(as_heap *h, as_treap *t, uint32_t old, uint32_t nw)
{
    as_blk *B = h->b;
    uint32_t l = B[old].l, r = B[old].r;
    B[nw].l = l;
    B[nw].r = r;
    B[nw].prio = B[old].prio;
    if (l)
        B[l].up = nw;
    if (r)
        B[r].up = nw;
    relink(B, t, B[old].up, old, nw);
    B[old].l = B[old].r = B[old].up = AS_NIL;
    if (t->mode == AS_TREAP_ADDR) {
        uint64_t was = B[old].aug;
        B[nw].aug = aug_of(B, nw);
        if (B[nw].aug != was)
            fix_up(B, B[nw].up);
    }
}

void as_treap_resized(as_heap *h, as_treap *t, uint32_t b)
{
    if (t->mode == AS_TREAP_ADDR) {
        upd(h->b, b);
        fix_up(h->b, h->b[b].up);
    }
}

void as_treap_grown(as_heap *h, as_treap *t, uint32_t b)
{
    if (t->mode != AS_TREAP_ADDR)
        return;
    uint64_t size = h->b[b].size;
    for (uint32_t n = b; n && h->b[n].aug < size; n = h->b[n].up)
        h->b[n].aug = size;
}

uint32_t as_treap_find(const as_heap *h, const as_treap *t, uint64_t want)
{
    /* Written so that the direction at each level is a conditional move, not a branch: the
     * directions are data, and mispredicting half of them cost more than the rest. */
    const as_blk *B = h->b;
    uint32_t n = t->root;
    if (t->mode == AS_TREAP_SIZE) {
        uint32_t best = AS_NIL;
        while (n) {
            uint32_t l = B[n].l, r = B[n].r;
            uint32_t ge = -(uint32_t)(B[n].size >= want);
            best = (n & ge) | (best & ~ge);
            n = (l & ge) | (r & ~ge);
        }
        return best;
    }
    if (!n || B[n].aug < want)
        return AS_NIL;
    for (;;) {
        /* The subtree at n holds a fit: in its left subtree if that one's max fits, else n
         * itself if it fits, else in its right subtree. */
        uint32_t l = B[n].l, r = B[n].r;
        if (l && B[l].aug >= want)
            n = l;
        else if (B[n].size >= want)
            return n;
        else
            n = r;
    }
}

uint64_t as_treap_max(const as_heap *h, const as_treap *t)
{
    uint32_t n = t->root;
    if (!n)
        return 0;
    if (t->mode == AS_TREAP_ADDR)
        return h->b[n].aug;
    while (h->b[n].r)
        n = h->b[n].r;
    return h->b[n].size;
}

static int tcheck(const as_heap *h, const as_treap *t, uint32_t n, uint32_t lo, uint32_t hi,
                  uint64_t *count, uint64_t *mx, as_check_failure *f)
{
    const as_blk *B = h->b;
    if (!n) {
        *mx = 0;
        return 0;
    }
    if (n >= h->nb || ++*count > h->nb)
        return as_check_fail(f, "free index: bad or cyclic node %u", n);
    if (B[n].state != AS_BLOCK_FREE || !B[n].indexed)
        return as_check_fail(f, "free index holds block %#llx which is not free",
                             (unsigned long long)B[n].addr);
    if ((lo && !key_less(B, t->mode, lo, n)) || (hi && !key_less(B, t->mode, n, hi)))
        return as_check_fail(f, "free index out of order at block %#llx",
                             (unsigned long long)B[n].addr);
    uint32_t l = B[n].l, r = B[n].r;
    if ((l && PRIO(B, l) > PRIO(B, n)) || (r && PRIO(B, r) > PRIO(B, n)))
        return as_check_fail(f, "free index heap order broken at block %#llx",
                             (unsigned long long)B[n].addr);
    if ((l && B[l].up != n) || (r && B[r].up != n))
        return as_check_fail(f, "free index parent link broken at block %#llx",
                             (unsigned long long)B[n].addr);
    uint64_t ml, mr;
    int rc = tcheck(h, t, l, lo, n, count, &ml, f);
    if (!rc)
        rc = tcheck(h, t, r, n, hi, count, &mr, f);
    if (rc)
        return rc;
    uint64_t m = B[n].size;
    if (ml > m)
        m = ml;
    if (mr > m)
        m = mr;
    if (t->mode == AS_TREAP_ADDR && B[n].aug != m)
        return as_check_fail(f, "free index subtree max wrong at block %#llx",
                             (unsigned long long)B[n].addr);
    *mx = m;
    return 0;
}

int as_treap_check(const as_heap *h, const as_treap *t, as_check_failure *f)
{
    uint64_t count = 0, mx;
    if (t->root && h->b[t->root].up != AS_NIL)
        return as_check_fail(f, "free index root has a parent");
    int rc = tcheck(h, t, t->root, AS_NIL, AS_NIL, &count, &mx, f);
    if (rc)
        return rc;
    if (count != t->n)
        return as_check_fail(f, "free index holds %llu blocks, counts %llu",
                             (unsigned long long)count, (unsigned long long)t->n);
    return 0;
}

/* ---- binned size index ------------------------------------------------------------------ */

void as_bins_init(as_bins *bins)
{
    memset(bins, 0, sizeof *bins);
}

/* A bin as a treap: bins keep only the root, for a small cache footprint. */
static inline as_treap bin_view(uint32_t root)
{
    return (as_treap){.root = root, .mode = AS_TREAP_SIZE, .n = 1};
}

static inline int size_addr_lt(const as_blk *B, uint32_t x, uint32_t y)
{
    return B[x].size < B[y].size || (B[x].size == B[y].size && B[x].addr < B[y].addr);
}

/* x into the circular (size, addr) list at head (l: previous, r: next); the new head. */
AS_HOT uint32_t bl_insert(as_blk *B, uint32_t head, uint32_t x)
{
    if (!head) {
        B[x].l = B[x].r = x;
        return x;
    }
    uint32_t before = head;
    if (size_addr_lt(B, x, B[head].l)) /* else it goes last, the common case */
        while (!size_addr_lt(B, x, before))
            before = B[before].r;
    uint32_t p = B[before].l;
    B[x].l = p;
    B[x].r = before;
    B[p].r = x;
    B[before].l = x;
    return before == head && size_addr_lt(B, x, head) ? x : head;
}

AS_HOT uint32_t bl_erase(as_blk *B, uint32_t head, uint32_t x)
{
    uint32_t l = B[x].l, r = B[x].r;
    B[x].l = B[x].r = AS_NIL;
    if (r == x)
        return AS_NIL;
    B[l].r = r;
    B[r].l = l;
    return head == x ? r : head;
}

/* A list bin over its limit becomes a treap, a treap at AS_BIN_BACK a list again. */
static void bin_to_treap(as_heap *h, as_bins *bins, unsigned fl, unsigned sl)
{
    as_blk *B = h->b;
    uint32_t head = bins->root[fl][sl], x = head;
    as_treap t = {.mode = AS_TREAP_SIZE};
    do {
        uint32_t nx = B[x].r;
        insert_m(h, &t, AS_TREAP_SIZE, x);
        x = nx;
    } while (x != head);
    bins->root[fl][sl] = t.root;
    bins->treap[fl] |= 1u << sl;
}

static void bin_to_list(as_heap *h, as_bins *bins, unsigned fl, unsigned sl)
{
    as_blk *B = h->b;
    uint32_t v[AS_BIN_BACK + 1], n = 0;
    uint32_t x = bins->root[fl][sl];
    /* In order, without parent links: push left spines on a stack (the treap is small). */
    uint32_t stack[64], sp = 0;
    while ((x || sp) && n < AS_BIN_BACK + 1) {
        while (x && sp < 64) {
            stack[sp++] = x;
            x = B[x].l;
        }
        x = stack[--sp];
        v[n++] = x;
        x = B[x].r;
    }
    for (uint32_t i = 0; i < n; i++) {
        B[v[i]].l = v[(i + n - 1) % n];
        B[v[i]].r = v[(i + 1) % n];
        B[v[i]].up = AS_NIL;
    }
    bins->root[fl][sl] = n ? v[0] : AS_NIL;
    bins->treap[fl] &= ~(1u << sl);
}

void as_bins_insert(as_heap *h, as_bins *bins, uint32_t b)
{
    unsigned fl, sl;
    as_tlsf_class(h->b[b].size, AS_BINS_SL, 0, &fl, &sl);
    uint32_t *root = &bins->root[fl][sl];
    if (__builtin_expect(bins->treap[fl] >> sl & 1, 0)) {
        as_treap t = bin_view(*root);
        insert_m(h, &t, AS_TREAP_SIZE, b);
        *root = t.root;
    } else {
        *root = bl_insert(h->b, *root, b);
        if (__builtin_expect(bins->cnt[fl][sl] == AS_BIN_LIST, 0))
            bin_to_treap(h, bins, fl, sl);
    }
    bins->cnt[fl][sl]++;
    bins->slmap[fl] |= 1u << sl;
    bins->flmap |= 1ull << fl;
    bins->n++;
}

void as_bins_remove(as_heap *h, as_bins *bins, uint32_t b)
{
    unsigned fl, sl;
    as_tlsf_class(h->b[b].size, AS_BINS_SL, 0, &fl, &sl);
    uint32_t *root = &bins->root[fl][sl];
    if (__builtin_expect(bins->treap[fl] >> sl & 1, 0)) {
        as_treap t = bin_view(*root);
        remove_m(h, &t, AS_TREAP_SIZE, b);
        *root = t.root;
        if (bins->cnt[fl][sl] == AS_BIN_BACK + 1)
            bin_to_list(h, bins, fl, sl);
    } else {
        *root = bl_erase(h->b, *root, b);
    }
    bins->cnt[fl][sl]--;
    bins->n--;
    if (!*root) {
        bins->slmap[fl] &= ~(1u << sl);
        if (!bins->slmap[fl])
            bins->flmap &= ~(1ull << fl);
    }
}

/* The smallest (size, addr) of bin (fl, sl), and its largest. */
static inline uint32_t bin_min(const as_heap *h, const as_bins *bins, unsigned fl, unsigned sl)
{
    uint32_t n = bins->root[fl][sl];
    if (bins->treap[fl] >> sl & 1)
        while (h->b[n].l)
            n = h->b[n].l;
    return n;
}

static inline uint32_t bin_max(const as_heap *h, const as_bins *bins, unsigned fl, unsigned sl)
{
    uint32_t n = bins->root[fl][sl];
    if (!(bins->treap[fl] >> sl & 1))
        return h->b[n].l;
    while (h->b[n].r)
        n = h->b[n].r;
    return n;
}

uint32_t as_bins_find(const as_heap *h, const as_bins *bins, uint64_t want)
{
    unsigned fl, sl;
    as_tlsf_class(want ? want : 1, AS_BINS_SL, 0, &fl, &sl);
    if (bins->slmap[fl] >> sl & 1) {
        uint32_t n = bins->root[fl][sl];
        if (__builtin_expect(bins->treap[fl] >> sl & 1, 0)) {
            as_treap t = bin_view(n);
            uint32_t b = as_treap_find(h, &t, want);
            if (b)
                return b;
        } else if (h->b[h->b[n].l].size >= want) { /* the bin's largest fits: scan */
            while (h->b[n].size < want)
                n = h->b[n].r;
            return n;
        }
    }
    uint32_t m = sl + 1 < 32 ? bins->slmap[fl] & (~0u << (sl + 1)) : 0;
    if (!m) {
        uint64_t fm = fl + 1 < AS_BINS_FL ? bins->flmap & (~0ull << (fl + 1)) : 0;
        if (!fm)
            return AS_NIL;
        fl = (unsigned)__builtin_ctzll(fm);
        m = bins->slmap[fl];
    }
    /* Every block of a higher bin fits: take that bin's smallest. */
    return bin_min(h, bins, fl, (unsigned)__builtin_ctz(m));
}

uint64_t as_bins_max(const as_heap *h, const as_bins *bins)
{
    if (!bins->flmap)
        return 0;
    unsigned fl = as_log2_floor(bins->flmap);
    unsigned sl = as_log2_floor(bins->slmap[fl]);
    return h->b[bin_max(h, bins, fl, sl)].size;
}

static uint64_t tcount(const as_heap *h, uint32_t n, uint64_t limit)
{
    uint64_t c = 0;
    /* Bounded so that a cyclic (broken) tree cannot hang check(). */
    while (n && c <= limit) {
        c += 1 + tcount(h, h->b[n].l, limit);
        n = h->b[n].r;
    }
    return c;
}

/* A list bin: links, (size, addr) order, membership; its length in *n. */
static int check_list(const as_heap *h, uint32_t head, uint64_t *n, as_check_failure *f)
{
    const as_blk *B = h->b;
    uint64_t c = 0;
    uint32_t x = head;
    do {
        if (x == AS_NIL || x >= h->nb || ++c > h->nb)
            return as_check_fail(f, "free index: a bin's list is broken or cyclic");
        if (B[x].state != AS_BLOCK_FREE || !B[x].indexed)
            return as_check_fail(f, "free index holds block %#llx which is not free",
                                 (unsigned long long)B[x].addr);
        if (B[B[x].r].l != x || (B[x].r != head && !size_addr_lt(B, x, B[x].r)))
            return as_check_fail(f, "free index: bin list out of order or mislinked at %#llx",
                                 (unsigned long long)B[x].addr);
        x = B[x].r;
    } while (x != head);
    *n = c;
    return 0;
}

static int check_bin(const as_heap *h, const as_bins *bins, unsigned fl, unsigned sl,
                     as_check_failure *f)
{
    uint32_t root = bins->root[fl][sl];
    int treap = bins->treap[fl] >> sl & 1;
    uint64_t c = 0;
    if (treap) {
        as_treap t = bin_view(root);
        t.n = c = tcount(h, root, h->nb);
        int rc = as_treap_check(h, &t, f);
        if (rc)
            return rc;
    } else {
        int rc = check_list(h, root, &c, f);
        if (rc)
            return rc;
    }
    if (c != bins->cnt[fl][sl] || (treap ? c <= AS_BIN_BACK : c > AS_BIN_LIST))
        return as_check_fail(f, "bin (%u,%u) holds %llu blocks, counts %u (%s)", fl, sl,
                             (unsigned long long)c, bins->cnt[fl][sl], treap ? "treap" : "list");
    unsigned cf, cs, hf, hs;
    as_tlsf_class(h->b[bin_min(h, bins, fl, sl)].size, AS_BINS_SL, 0, &cf, &cs);
    as_tlsf_class(h->b[bin_max(h, bins, fl, sl)].size, AS_BINS_SL, 0, &hf, &hs);
    if (cf != fl || cs != sl || hf != fl || hs != sl)
        return as_check_fail(f, "bin (%u,%u) holds a block of another class", fl, sl);
    return 0;
}

int as_bins_check(const as_heap *h, const as_bins *bins, as_check_failure *f)
{
    uint64_t n = 0;
    for (unsigned fl = 0; fl < AS_BINS_FL; fl++) {
        if (!!(bins->flmap >> fl & 1) != (bins->slmap[fl] != 0))
            return as_check_fail(f, "bin bitmap: level-1 bit %u disagrees with level 2", fl);
        for (unsigned sl = 0; sl < 1u << AS_BINS_SL; sl++) {
            uint32_t root = bins->root[fl][sl];
            if (!!(bins->slmap[fl] >> sl & 1) != (root != AS_NIL))
                return as_check_fail(f, "bin bitmap bit (%u,%u) disagrees with its bin", fl, sl);
            if (!root) {
                if (bins->cnt[fl][sl] || (bins->treap[fl] >> sl & 1))
                    return as_check_fail(f, "empty bin (%u,%u) counts blocks", fl, sl);
                continue;
            }
            int rc = check_bin(h, bins, fl, sl, f);
            if (rc)
                return rc;
            n += bins->cnt[fl][sl];
        }
    }
    if (n != bins->n)
        return as_check_fail(f, "bins hold %llu blocks, count %llu", (unsigned long long)n,
                             (unsigned long long)bins->n);
    return 0;
}

/* ---- address-ordered B+ tree ------------------------------------------------------------- */

void as_btree_init(as_btree *t)
{
    memset(t, 0, sizeof *t);
}

void as_btree_fini(as_btree *t)
{
    free(t->nd);
    memset(t, 0, sizeof *t);
}

int as_btree_grow_reserve(as_btree *t, unsigned inserts)
{
    uint64_t need = (uint64_t)inserts * (t->depth + 2);
    if (t->nfree >= need)
        return 0;
    uint64_t want = (uint64_t)t->nn + need;
    if (want > UINT32_MAX)
        return AS_ENOMEM;
    if (want > t->cap) {
        uint64_t nc = t->cap ? (uint64_t)t->cap * 2 : 16;
        while (nc < want)
            nc *= 2;
        if (nc > UINT32_MAX)
            nc = UINT32_MAX;
        as_btnode *nd = realloc(t->nd, (size_t)nc * sizeof *nd);
        if (!nd)
            return AS_ENOMEM;
        t->nd = nd;
        t->cap = (uint32_t)nc;
    }
    if (t->nn == 0)
        t->nn = 1; /* node 0 is nil */
    while (t->nfree < need) {
        uint32_t i = t->nn++;
        t->nd[i].parent = t->free;
        t->free = i;
        t->nfree++;
    }
    return 0;
}

static uint32_t bt_new(as_btree *t, int leaf)
{
    uint32_t i = t->free; /* reserved beforehand: never nil */
    t->free = t->nd[i].parent;
    t->nfree--;
    t->nd[i].n = 0;
    t->nd[i].leaf = (uint8_t)leaf;
    t->nd[i].parent = AS_NIL;
    return i;
}

static void bt_put(as_btree *t, uint32_t i)
{
    t->nd[i].parent = t->free;
    t->free = i;
    t->nfree++;
}

static inline uint64_t bt_max(const as_btnode *x)
{
    uint64_t m = 0;
    for (unsigned i = 0; i < x->n; i++)
        m = x->max[i] > m ? x->max[i] : m;
    return m;
}

static inline unsigned bt_slot(const as_btnode *x, uint32_t c)
{
    unsigned i = 0;
    while (x->child[i] != c)
        i++;
    return i;
}

/* Node i's lowest address or largest size changed: carry it up while the parent's copy
 * differs. */
static void bt_fix_up(as_btree *t, uint32_t i)
{
    for (uint32_t p = t->nd[i].parent; p; i = p, p = t->nd[p].parent) {
        as_btnode *x = &t->nd[i], *y = &t->nd[p];
        unsigned s = bt_slot(y, i);
        uint64_t k = x->key[0], m = bt_max(x);
        if (y->key[s] == k && y->max[s] == m)
            break;
        y->key[s] = k;
        y->max[s] = m;
    }
}

/* Moves the upper half of full child c of p (at slot s) into a new node at slot s + 1. */
static void bt_split(as_heap *h, as_btree *t, uint32_t p, unsigned s)
{
    uint32_t c = t->nd[p].child[s];
    uint32_t d = bt_new(t, t->nd[c].leaf);
    as_btnode *x = &t->nd[c], *y = &t->nd[d], *z = &t->nd[p];
    unsigned half = AS_BT_FAN / 2;
    memcpy(y->key, x->key + half, half * sizeof *y->key);
    memcpy(y->max, x->max + half, half * sizeof *y->max);
    memcpy(y->child, x->child + half, half * sizeof *y->child);
    y->n = (uint16_t)half;
    x->n = (uint16_t)half;
    y->parent = p;
    for (unsigned i = 0; i < half; i++) {
        if (y->leaf)
            h->b[y->child[i]].up = d;
        else
            t->nd[y->child[i]].parent = d;
    }
    unsigned m = z->n - s - 1;
    memmove(z->key + s + 2, z->key + s + 1, m * sizeof *z->key);
    memmove(z->max + s + 2, z->max + s + 1, m * sizeof *z->max);
    memmove(z->child + s + 2, z->child + s + 1, m * sizeof *z->child);
    z->key[s + 1] = y->key[0];
    z->max[s + 1] = bt_max(y);
    z->child[s + 1] = d;
    z->max[s] = bt_max(x);
    z->n++;
}

void as_btree_insert(as_heap *h, as_btree *t, uint32_t b)
{
    uint64_t addr = h->b[b].addr, size = h->b[b].size;
    t->n++;
    if (!t->root) {
        t->root = bt_new(t, 1);
        t->depth = 1;
    }
    if (t->nd[t->root].n == AS_BT_FAN) {
        uint32_t r = bt_new(t, 0), old = t->root;
        as_btnode *x = &t->nd[r];
        x->n = 1;
        x->child[0] = old;
        x->key[0] = t->nd[old].key[0];
        x->max[0] = bt_max(&t->nd[old]);
        t->nd[old].parent = r;
        t->root = r;
        t->depth++;
        bt_split(h, t, r, 0);
    }
    uint32_t i = t->root;
    while (!t->nd[i].leaf) {
        as_btnode *x = &t->nd[i];
        unsigned s = 0;
        while (s + 1 < x->n && x->key[s + 1] <= addr)
            s++;
        if (t->nd[x->child[s]].n == AS_BT_FAN) {
            bt_split(h, t, i, s);
            if (x->key[s + 1] <= addr)
                s++;
        }
        if (x->key[s] > addr)
            x->key[s] = addr; /* only ever at slot 0 */
        if (x->max[s] < size)
            x->max[s] = size;
        i = x->child[s];
    }
    as_btnode *x = &t->nd[i];
    unsigned s = 0;
    while (s < x->n && x->key[s] < addr)
        s++;
    unsigned m = x->n - s;
    memmove(x->key + s + 1, x->key + s, m * sizeof *x->key);
    memmove(x->max + s + 1, x->max + s, m * sizeof *x->max);
    memmove(x->child + s + 1, x->child + s, m * sizeof *x->child);
    x->key[s] = addr;
    x->max[s] = size;
    x->child[s] = b;
    x->n++;
    h->b[b].up = i;
}

void as_btree_remove(as_heap *h, as_btree *t, uint32_t b)
{
    uint32_t i = h->b[b].up;
    h->b[b].up = AS_NIL;
    t->n--;
    uint32_t c = b;
    for (;;) {
        as_btnode *x = &t->nd[i];
        unsigned s = bt_slot(x, c);
        unsigned m = x->n - s - 1;
        memmove(x->key + s, x->key + s + 1, m * sizeof *x->key);
        memmove(x->max + s, x->max + s + 1, m * sizeof *x->max);
        memmove(x->child + s, x->child + s + 1, m * sizeof *x->child);
        x->n--;
        if (x->n || !x->parent)
            break;
        /* An emptied node leaves its parent. */
        c = i;
        i = x->parent;
        bt_put(t, c);
    }
    if (!t->nd[i].n) { /* the root emptied: the tree is empty */
        bt_put(t, i);
        t->root = AS_NIL;
        t->depth = 0;
        return;
    }
    bt_fix_up(t, i);
    while (!t->nd[t->root].leaf && t->nd[t->root].n == 1) {
        uint32_t r = t->root;
        t->root = t->nd[r].child[0];
        t->nd[t->root].parent = AS_NIL;
        t->depth--;
        bt_put(t, r);
    }
}

void as_btree_replace(as_heap *h, as_btree *t, uint32_t old, uint32_t nw)
{
    uint32_t i = h->b[old].up;
    as_btnode *x = &t->nd[i];
    unsigned s = bt_slot(x, old);
    x->child[s] = nw;
    x->key[s] = h->b[nw].addr;
    x->max[s] = h->b[nw].size;
    h->b[nw].up = i;
    h->b[old].up = AS_NIL;
    bt_fix_up(t, i);
}

void as_btree_resized(as_heap *h, as_btree *t, uint32_t b)
{
    uint32_t i = h->b[b].up;
    as_btnode *x = &t->nd[i];
    unsigned s = bt_slot(x, b);
    x->key[s] = h->b[b].addr;
    x->max[s] = h->b[b].size;
    bt_fix_up(t, i);
}

uint32_t as_btree_find(const as_heap *h, const as_btree *t, uint64_t want)
{
    (void)h;
    uint32_t i = t->root;
    if (!i || as_btree_max(t) < want)
        return AS_NIL;
    for (;;) {
        const as_btnode *x = &t->nd[i];
        unsigned s = 0;
        while (x->max[s] < want) /* the summaries say one fits */
            s++;
        if (x->leaf)
            return x->child[s];
        i = x->child[s];
    }
}

uint64_t as_btree_max(const as_btree *t)
{
    return t->root ? bt_max(&t->nd[t->root]) : 0;
}

static int bt_check_node(const as_heap *h, const as_btree *t, uint32_t i, uint32_t parent,
                         unsigned depth, uint64_t *last, int *seen, uint64_t *count,
                         uint64_t *entries, as_check_failure *f)
{
    if (!i || i >= t->nn || ++*count > (uint64_t)t->nn + h->nb)
        return as_check_fail(f, "free index: bad or cyclic B+ tree node %u", i);
    const as_btnode *x = &t->nd[i];
    if (x->parent != parent || x->n == 0 || x->n > AS_BT_FAN)
        return as_check_fail(f, "free index: B+ tree node %u has a bad parent or count", i);
    if (x->leaf != (depth == t->depth))
        return as_check_fail(f, "free index: B+ tree leaves are not all at depth %u", t->depth);
    for (unsigned s = 0; s < x->n; s++) {
        uint32_t c = x->child[s];
        if (x->leaf) {
            if (c == AS_NIL || c >= h->nb)
                return as_check_fail(f, "free index: bad block %u in B+ tree leaf %u", c, i);
            const as_blk *y = &h->b[c];
            if (y->state != AS_BLOCK_FREE || !y->indexed || y->up != i)
                return as_check_fail(f, "free index holds block %#llx which is not free here",
                                     (unsigned long long)y->addr);
            if (x->key[s] != y->addr || x->max[s] != y->size)
                return as_check_fail(f, "free index: stale copy of block %#llx",
                                     (unsigned long long)y->addr);
            if (*seen && y->addr <= *last)
                return as_check_fail(f, "free index out of order at block %#llx",
                                     (unsigned long long)y->addr);
            *last = y->addr;
            *seen = 1;
            if (++*count > (uint64_t)t->nn + h->nb)
                return as_check_fail(f, "free index: too many entries");
            ++*entries;
        } else {
            if (c == AS_NIL || c >= t->nn)
                return as_check_fail(f, "free index: bad child %u of B+ tree node %u", c, i);
            const as_btnode *y = &t->nd[c];
            if (y->n == 0 || x->key[s] != y->key[0] || x->max[s] != bt_max(y))
                return as_check_fail(f, "free index: B+ tree node %u's summary of slot %u", i, s);
            int rc = bt_check_node(h, t, c, i, depth + 1, last, seen, count, entries, f);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int as_btree_check(const as_heap *h, const as_btree *t, as_check_failure *f)
{
    if (!t->root) {
        if (t->n || t->depth)
            return as_check_fail(f, "free index: empty B+ tree counts %llu blocks",
                                 (unsigned long long)t->n);
        return 0;
    }
    uint64_t last = 0, count = 0, entries = 0;
    int seen = 0;
    int rc = bt_check_node(h, t, t->root, AS_NIL, 1, &last, &seen, &count, &entries, f);
    if (rc)
        return rc;
    if (entries != t->n)
        return as_check_fail(f, "free index holds %llu blocks, counts %llu",
                             (unsigned long long)entries, (unsigned long long)t->n);
    if (!t->nd[t->root].leaf && t->nd[t->root].n < 2)
        return as_check_fail(f, "free index: B+ tree root has a single child");
    return 0;
}

/* ---- pairing heaps by size ----------------------------------------------------------------- */

/* Melds two roots (neither has siblings); the smaller becomes the larger's first child. */
static uint32_t ph_link(as_blk *B, uint32_t a, uint32_t b)
{
    if (B[a].size < B[b].size) {
        uint32_t t = a;
        a = b;
        b = t;
    }
    uint32_t c = B[a].hchild;
    B[b].hnext = c;
    if (c)
        B[c].hprev = b;
    B[b].hprev = a;
    B[a].hchild = b;
    return a;
}

/* The two-pass meld of a sibling list starting at `first`: one root, no siblings. */
static uint32_t ph_merge_pairs(as_blk *B, uint32_t first)
{
    if (!first)
        return AS_NIL;
    /* Pass 1, left to right: meld pairs, stacking the results through hnext. */
    uint32_t stack = AS_NIL;
    while (first) {
        uint32_t a = first, b = B[a].hnext;
        if (!b) {
            B[a].hprev = AS_NIL;
            B[a].hnext = stack;
            stack = a;
            break;
        }
        first = B[b].hnext;
        B[a].hprev = B[a].hnext = B[b].hprev = B[b].hnext = AS_NIL;
        uint32_t c = ph_link(B, a, b);
        B[c].hnext = stack;
        stack = c;
    }
    /* Pass 2, right to left: meld the stack into one. */
    uint32_t root = stack;
    stack = B[root].hnext;
    B[root].hnext = AS_NIL;
    while (stack) {
        uint32_t n = B[stack].hnext;
        B[stack].hnext = AS_NIL;
        root = ph_link(B, root, stack);
        stack = n;
    }
    B[root].hprev = AS_NIL;
    return root;
}

void as_pheap_insert(as_heap *h, uint32_t *root, uint32_t b)
{
    as_blk *B = h->b;
    B[b].hprev = B[b].hnext = B[b].hchild = AS_NIL;
    *root = *root ? ph_link(B, *root, b) : b;
}

void as_pheap_remove(as_heap *h, uint32_t *root, uint32_t b)
{
    as_blk *B = h->b;
    if (b == *root) {
        *root = ph_merge_pairs(B, B[b].hchild);
    } else {
        uint32_t p = B[b].hprev, n = B[b].hnext;
        if (B[p].hchild == b)
            B[p].hchild = n;
        else
            B[p].hnext = n;
        if (n)
            B[n].hprev = p;
        uint32_t sub = ph_merge_pairs(B, B[b].hchild);
        if (sub)
            *root = ph_link(B, *root, sub);
    }
    B[b].hprev = B[b].hnext = B[b].hchild = AS_NIL;
}

int as_pheap_check(const as_heap *h, uint32_t root, uint64_t n, as_check_failure *f)
{
    const as_blk *B = h->b;
    if (!root)
        return n ? as_check_fail(f, "size heap is empty, should hold %llu", (unsigned long long)n)
                 : 0;
    if (root >= h->nb || B[root].hprev || B[root].hnext)
        return as_check_fail(f, "size heap: bad root %u", root);
    /* Depth-first along child and sibling links, without recursion or host memory: from
     * a node go to its child, else its sibling, else up through parents to a sibling. */
    uint64_t count = 0;
    uint32_t x = root;
    while (x) {
        if (x >= h->nb || ++count > n)
            return as_check_fail(f, "size heap holds more than its %llu blocks or a bad node",
                                 (unsigned long long)n);
        if (B[x].state != AS_BLOCK_FREE || !B[x].indexed)
            return as_check_fail(f, "size heap holds block %#llx which is not free",
                                 (unsigned long long)B[x].addr);
        /* x's children: links and heap order, once per list (so all of it is O(n)). */
        uint32_t prev = x, guard = 0;
        for (uint32_t c = B[x].hchild; c; prev = c, c = B[c].hnext) {
            if (c >= h->nb || ++guard > n || B[c].hprev != prev || B[c].size > B[x].size)
                return as_check_fail(f, "size heap: a child of block %#llx is wrong",
                                     (unsigned long long)B[x].addr);
        }
        if (B[x].hchild) {
            x = B[x].hchild;
            continue;
        }
        /* Up to the nearest sibling; the parent of a sibling list is its first's hprev. */
        while (x != root && !B[x].hnext) {
            while (B[B[x].hprev].hchild != x) /* back to the first of the siblings */
                x = B[x].hprev;
            x = B[x].hprev;
        }
        if (x == root)
            break;
        x = B[x].hnext;
    }
    if (count != n)
        return as_check_fail(f, "size heap holds %llu blocks, should hold %llu",
                             (unsigned long long)count, (unsigned long long)n);
    return 0;
}
