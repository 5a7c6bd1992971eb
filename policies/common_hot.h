/*
 * common_hot.h - the per-event paths of common.h's heap and binned index, written inline
 * (included by common.h; only policies/ includes either).
 *
 * as_heap_take_ix and as_heap_free_ix take the index's ops as a parameter: a policy that
 * passes its own `static const as_index_ops` gets its insert and remove inlined as direct
 * calls, where the generic as_heap_take and as_heap_free (common.c, for callers without
 * ops of their own) go through h->ix. Both give the same results: one body.
 * Invariant: as common.h's.
 */
#ifndef AS_POLICIES_COMMON_HOT_H
#define AS_POLICIES_COMMON_HOT_H

#define AS_HOT static inline __attribute__((always_inline))

/* A free block node, not indexed: the recycled list inline, the arena's growth
 * (as_heap_blk_grow) not. Its caller sets addr, size, prev, next and seg; the index sets
 * its links. AS_NIL on host OOM. */
uint32_t as_heap_blk_grow(as_heap *h);

AS_HOT uint32_t as_heap_blk_new(as_heap *h)
{
    uint32_t i = h->free_b;
    if (__builtin_expect(!i, 0))
        return as_heap_blk_grow(h);
    as_blk *x = &h->b[i];
    h->free_b = x->l;
    x->state = AS_BLOCK_FREE;
    x->indexed = 0;
    return i;
}

AS_HOT void as_heap_blk_put(as_heap *h, uint32_t i)
{
    h->b[i].state = AS_BLK_DEAD;
    h->b[i].gen++;
    h->b[i].l = h->free_b;
    h->free_b = i;
}

AS_HOT void as_heap_empty_push(as_heap *h, uint32_t si)
{
    as_seg *s = &h->s[si];
    s->in_empty = 1;
    s->eprev = AS_NIL;
    s->enext = h->empty;
    if (h->empty)
        h->s[h->empty].eprev = si;
    h->empty = si;
}

AS_HOT void as_heap_empty_remove(as_heap *h, uint32_t si)
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

AS_HOT void as_heap_index_ix(as_heap *h, const as_index_ops *ix, uint32_t b)
{
    if (ix) {
        ix->insert(h, b);
        h->b[b].indexed = 1;
    }
}

AS_HOT void as_heap_unindex_ix(as_heap *h, const as_index_ops *ix, uint32_t b)
{
    if (ix && h->b[b].indexed) {
        ix->remove(h, b);
        h->b[b].indexed = 0;
    }
}

AS_HOT int as_heap_split_(as_heap *h, uint32_t b, uint64_t size, uint32_t *tail)
{
    uint32_t t = as_heap_blk_new(h);
    if (!t)
        return AS_ENOMEM;
    as_blk *x = &h->b[b], *y = &h->b[t];
    y->addr = x->addr + size;
    y->size = x->size - size;
    y->prev = b;
    y->next = x->next;
    y->seg = x->seg;
    h->b[x->next].prev = t; /* at the end the nil sentinel's: scratch (common.h) */
    x->next = t;
    x->size = size;
    h->nfree++;
    *tail = t;
    return 0;
}

AS_HOT void as_heap_merge_next_(as_heap *h, uint32_t b)
{
    as_blk *x = &h->b[b];
    uint32_t n = x->next;
    as_blk *y = &h->b[n];
    x->size += y->size;
    x->next = y->next;
    h->b[y->next].prev = b; /* at the end the nil sentinel's: scratch (common.h) */
    as_heap_blk_put(h, n);
    h->nfree--;
}

/* n absorbs its free, unindexed predecessor (the survivor is n, now starting lower). */
AS_HOT void as_heap_absorb_prev(as_heap *h, uint32_t n)
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
    as_heap_blk_put(h, b);
    h->nfree--;
}

/* as_heap_take with the index ops ix (h->ix, or the policy's own const ops). */
AS_HOT int as_heap_take_ix(as_heap *h, const as_index_ops *ix, uint32_t b, uint64_t size, int split,
                           const as_request *req, as_block *out)
{
    uint32_t tail = AS_NIL;
    int cut = split && size < h->b[b].size;
    if (cut && ix && ix->replace && h->b[b].indexed) {
        /* The tail takes the block's place in an address-ordered index. */
        uint64_t old = h->b[b].size;
        int rc = as_heap_split_(h, b, size, &tail);
        if (rc)
            return rc;
        ix->replace(h, b, tail, old);
        h->b[b].indexed = 0;
        h->b[tail].indexed = 1;
    } else {
        as_heap_unindex_ix(h, ix, b);
        if (cut) {
            int rc = as_heap_split_(h, b, size, &tail);
            if (rc) {
                as_heap_index_ix(h, ix, b);
                return rc;
            }
            as_heap_index_ix(h, ix, tail);
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
        as_heap_empty_remove(h, x->seg);
    out->addr = x->addr;
    out->size = x->size;
    out->handle = (uint64_t)x->gen << 32 | b;
    return 0;
}

AS_HOT uint32_t as_heap_lookup_(const as_heap *h, uint64_t handle)
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

/* Coalescing into an address-ordered index (ix->replace set): merged blocks keep their
 * neighbour's place. 1 with *got set when b merged, else 0 (b is still to be indexed). */
AS_HOT int as_heap_merge_in_place(as_heap *h, const as_index_ops *ix, uint32_t b, uint32_t *got)
{
    uint32_t p = h->b[b].prev, n = h->b[b].next;
    /* The nil sentinel is never free (common.h): no test for the chain's ends. */
    int pf = h->b[p].state == AS_BLOCK_FREE, nf = h->b[n].state == AS_BLOCK_FREE;
    if (pf) {
        uint64_t old = h->b[p].size;
        if (nf)
            as_heap_unindex_ix(h, ix, n);
        as_heap_merge_next_(h, p);
        if (nf)
            as_heap_merge_next_(h, p);
        ix->resized(h, p, old);
        *got = p;
        return 1;
    }
    if (nf) {
        /* n absorbs b: it keeps its place in the order, only growing downwards. */
        uint64_t old = h->b[n].size;
        as_heap_absorb_prev(h, n);
        ix->resized(h, n, old);
        *got = n;
        return 1;
    }
    return 0;
}

/* The first half of a free: the handle's block becomes free (accounting, its segment's use
 * count), neither merged nor indexed, *got = it; or it is marked pending (*got = AS_NIL).
 * For a policy that merges by its own rule (buddy) before it indexes the result once. */
AS_HOT int as_heap_free_mark(as_heap *h, uint64_t handle, unsigned flags, uint32_t *got)
{
    uint32_t b = as_heap_lookup_(h, handle);
    *got = AS_NIL;
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
        as_heap_empty_push(h, x->seg);
    *got = b;
    return 0;
}

/* as_heap_free with the index ops ix (h->ix, or the policy's own const ops). */
AS_HOT int as_heap_free_ix(as_heap *h, const as_index_ops *ix, uint64_t handle, unsigned flags,
                           int coalesce, uint32_t *got)
{
    uint32_t b;
    int rc = as_heap_free_mark(h, handle, flags, &b);
    *got = AS_NIL;
    if (rc || !b)
        return rc;
    if (coalesce && ix && ix->replace) {
        if (as_heap_merge_in_place(h, ix, b, got))
            return 0;
    } else if (coalesce) {
        uint32_t p = h->b[b].prev;
        if (p && h->b[p].state == AS_BLOCK_FREE) {
            as_heap_unindex_ix(h, ix, p);
            as_heap_merge_next_(h, p);
            b = p;
        }
        uint32_t n = h->b[b].next;
        if (n && h->b[n].state == AS_BLOCK_FREE) {
            as_heap_unindex_ix(h, ix, n);
            as_heap_merge_next_(h, b);
        }
    }
    as_heap_index_ix(h, ix, b);
    *got = b;
    return 0;
}

/* ---- pairing heaps: the insertion (common.h) -------------------------------------------- */

/* Melds two roots (neither has siblings); the smaller becomes the larger's first child. */
AS_HOT uint32_t as_ph_link(as_blk *B, uint32_t a, uint32_t b)
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

AS_HOT void as_pheap_insert(as_heap *h, uint32_t *root, uint32_t b)
{
    as_blk *B = h->b;
    B[b].hprev = B[b].hnext = B[b].hchild = AS_NIL;
    *root = *root ? as_ph_link(B, *root, b) : b;
}

/* ---- the binned size index's updates and search ----------------------------------------- */

#define OSET_NODE as_blk
#define OSET(name) ob_##name
#include "oset.h"

/* The bin of a size, fl << AS_BINS_SL | sl (as_tlsf_class's, without its branches for
 * search and the shifts' two directions on the common path). */
AS_HOT unsigned as_bins_class(uint64_t size)
{
    unsigned f = as_log2_floor(size);
    if (__builtin_expect(f >= AS_BINS_SL, 1)) /* size >> (f - SL) is 2^SL + sl */
        return (f << AS_BINS_SL) + (unsigned)(size >> (f - AS_BINS_SL)) - (1u << AS_BINS_SL);
    return f << AS_BINS_SL | ((unsigned)(size << (AS_BINS_SL - f)) & ((1u << AS_BINS_SL) - 1));
}

#define AS_BINS_ROOT(bins, c) (&(bins)->root[(c) >> AS_BINS_SL][(c) & ((1u << AS_BINS_SL) - 1)])
#define AS_BINS_CNT(bins, c) (&(bins)->cnt[(c) >> AS_BINS_SL][(c) & ((1u << AS_BINS_SL) - 1)])
#define AS_BINS_TREAP(bins, c) ((bins)->treap[(c) >> AS_BINS_SL] >> ((c)&31u) & 1)

/* b into bin c, which must be its size's (as_bins_class). */
AS_HOT void as_bins_insert_in(as_heap *h, as_bins *bins, uint32_t b, unsigned c)
{
    unsigned fl = c >> AS_BINS_SL, sl = c & 31u;
    h->b[b].bin = (uint16_t)c;
    int treap = bins->treap[fl] >> sl & 1;
    uint32_t *cnt = AS_BINS_CNT(bins, c);
    if (__builtin_expect(ob_bin_insert(h->b, AS_BINS_ROOT(bins, c), *cnt, treap, b) != treap, 0))
        bins->treap[fl] ^= 1u << sl;
    ++*cnt;
    bins->slmap[fl] |= 1u << sl;
    bins->flmap |= 1ull << fl;
    bins->n++;
}

AS_HOT void as_bins_insert(as_heap *h, as_bins *bins, uint32_t b)
{
    as_bins_insert_in(h, bins, b, as_bins_class(h->b[b].size));
}

AS_HOT void as_bins_remove(as_heap *h, as_bins *bins, uint32_t b)
{
    unsigned c = h->b[b].bin, fl = c >> AS_BINS_SL, sl = c & 31u;
    uint32_t *root = AS_BINS_ROOT(bins, c), *cnt = AS_BINS_CNT(bins, c);
    int treap = bins->treap[fl] >> sl & 1;
    if (__builtin_expect(ob_bin_erase(h->b, root, *cnt, treap, b) != treap, 0))
        bins->treap[fl] ^= 1u << sl;
    --*cnt;
    bins->n--;
    /* The bitmaps without branches: whether the bin emptied follows no pattern. */
    uint32_t m = bins->slmap[fl] & ~((uint32_t)(*root == 0) << sl);
    bins->slmap[fl] = m;
    bins->flmap &= ~((uint64_t)(m == 0) << fl);
}

/* Would a block of key (size, addr) in place of x, in x's list bin `head`, keep the list
 * in order? (Its neighbours are x's l and r; the head is the smallest, the last's r the
 * head.) */
AS_HOT int as_bins_fits_at(const as_blk *B, uint32_t head, uint32_t x, uint64_t size, uint64_t addr)
{
    uint32_t l = B[x].l, r = B[x].r;
    if (x != head && (B[l].size > size || (B[l].size == size && B[l].addr >= addr)))
        return 0;
    return r == head || size < B[r].size || (size == B[r].size && addr < B[r].addr);
}

/* The split tail nw (not indexed) replaces old (indexed): in old's place in its list when
 * nw's key is of the same bin and orders there, else old out and nw in. */
AS_HOT void as_bins_replace(as_heap *h, as_bins *bins, uint32_t old, uint32_t nw)
{
    as_blk *B = h->b;
    unsigned c = B[old].bin, nc = as_bins_class(B[nw].size);
    uint32_t *root = AS_BINS_ROOT(bins, c);
    if (nc == c && !AS_BINS_TREAP(bins, c) &&
        as_bins_fits_at(B, *root, old, B[nw].size, B[nw].addr)) {
        uint32_t l = B[old].l, r = B[old].r;
        if (r == old) {
            l = r = nw;
        } else {
            B[l].r = nw;
            B[r].l = nw;
        }
        B[nw].l = l;
        B[nw].r = r;
        B[nw].bin = (uint16_t)c;
        B[old].l = B[old].r = 0;
        if (*root == old)
            *root = nw;
        return;
    }
    as_bins_remove(h, bins, old);
    as_bins_insert_in(h, bins, nw, nc);
}

/* b's key (size, addr) changed while it was indexed: it stays where it is when the new key
 * is of the same bin and orders there, else it is filed again. */
AS_HOT void as_bins_rekey(as_heap *h, as_bins *bins, uint32_t b)
{
    as_blk *B = h->b;
    unsigned c = B[b].bin, nc = as_bins_class(B[b].size);
    if (nc == c && !AS_BINS_TREAP(bins, c) &&
        as_bins_fits_at(B, *AS_BINS_ROOT(bins, c), b, B[b].size, B[b].addr))
        return;
    as_bins_remove(h, bins, b);
    as_bins_insert_in(h, bins, b, nc);
}

AS_HOT uint32_t as_bins_find(const as_heap *h, const as_bins *bins, uint64_t want)
{
    unsigned c = as_bins_class(want ? want : 1), fl = c >> AS_BINS_SL, sl = c & 31u;
    if (bins->slmap[fl] >> sl & 1) {
        uint32_t b = ob_bin_lower_bound(h->b, bins->root[fl][sl], bins->treap[fl] >> sl & 1, want);
        if (b)
            return b;
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
    sl = (unsigned)__builtin_ctz(m);
    return ob_bin_min(h->b, bins->root[fl][sl], bins->treap[fl] >> sl & 1);
}

/* The index ops of a policy whose whole free index is one as_bins, member `field` of its
 * state `type` (which starts with its as_heap): a `static const as_index_ops name` whose
 * four entries are direct calls, so as_heap_take_ix and as_heap_free_ix inline them. A
 * split's tail and a merged block keep their place in their bin's list when they can. */
#define AS_BINS_INDEX_OPS(name, type, field)                                                  \
    AS_HOT void name##_insert(as_heap *h, uint32_t b)                                          \
    {                                                                                          \
        as_bins_insert(h, &((type *)h)->field, b);                                             \
    }                                                                                          \
    AS_HOT void name##_remove(as_heap *h, uint32_t b)                                          \
    {                                                                                          \
        as_bins_remove(h, &((type *)h)->field, b);                                             \
    }                                                                                          \
    AS_HOT void name##_replace(as_heap *h, uint32_t old, uint32_t nw, uint64_t old_size)       \
    {                                                                                          \
        (void)old_size;                                                                        \
        as_bins_replace(h, &((type *)h)->field, old, nw);                                      \
    }                                                                                          \
    AS_HOT void name##_resized(as_heap *h, uint32_t b, uint64_t old_size)                      \
    {                                                                                          \
        (void)old_size;                                                                        \
        as_bins_rekey(h, &((type *)h)->field, b);                                              \
    }                                                                                          \
    static const as_index_ops name = {                                                         \
        .insert = name##_insert,                                                               \
        .remove = name##_remove,                                                               \
        .replace = name##_replace,                                                             \
        .resized = name##_resized,                                                             \
    }

#endif
