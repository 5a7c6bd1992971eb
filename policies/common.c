/*
 * common.c - the heap (block arena, segments, chains, accounting), the free-block indexes
 * (binned size index, B+ tree, pairing heaps) and the shared rules of common.h.
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

uint32_t as_heap_blk_grow(as_heap *h)
{
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
    uint32_t i = h->nb++;
    h->b[i] = (as_blk){.gen = 0, .state = AS_BLOCK_FREE};
    return i;
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

void as_heap_index(as_heap *h, uint32_t b)
{
    as_heap_index_ix(h, h->ix, b);
}

void as_heap_unindex(as_heap *h, uint32_t b)
{
    as_heap_unindex_ix(h, h->ix, b);
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
    uint32_t bi = as_heap_blk_new(h);
    if (!bi)
        return AS_ENOMEM;
    uint32_t si = seg_new(h);
    if (!si) {
        as_heap_blk_put(h, bi);
        return AS_ENOMEM;
    }
    uint64_t addr = 0;
    int rc = h->dev->ops->reserve(h->dev->ctx, size, &addr);
    if (rc != AS_DEV_OK) {
        as_heap_blk_put(h, bi);
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
    as_heap_empty_push(h, si);
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
    return as_heap_split_(h, b, size, tail);
}

void as_heap_merge_next(as_heap *h, uint32_t b)
{
    as_heap_merge_next_(h, b);
}

int as_heap_take(as_heap *h, uint32_t b, uint64_t size, int split, const as_request *req,
                 as_block *out)
{
    return as_heap_take_ix(h, h->ix, b, size, split, req, out);
}

uint32_t as_heap_lookup(const as_heap *h, uint64_t handle)
{
    return as_heap_lookup_(h, handle);
}

int as_heap_free(as_heap *h, uint64_t handle, unsigned flags, int coalesce, uint32_t *blk)
{
    return as_heap_free_ix(h, h->ix, handle, flags, coalesce, blk);
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
        as_heap_blk_put(h, b);
        b = n;
    }
    as_heap_empty_remove(h, si);
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

/* Moves v[r] down the max-heap v[0..n) (by address) to where it belongs. */
static void sift_down(const as_seg *s, uint32_t *v, size_t r, size_t n)
{
    for (;;) {
        size_t c = 2 * r + 1;
        if (c >= n)
            return;
        if (c + 1 < n && seg_cmp_ctx(s, v[c], v[c + 1]) < 0)
            c++;
        if (seg_cmp_ctx(s, v[r], v[c]) >= 0)
            return;
        uint32_t t = v[r];
        v[r] = v[c];
        v[c] = t;
        r = c;
    }
}

/* Sorts segment indices by address: a heap sort, so no global context is needed. */
static void sort_segs(const as_seg *s, uint32_t *v, size_t n)
{
    for (size_t start = n / 2; start-- > 0;)
        sift_down(s, v, start, n);
    for (size_t end = n; end-- > 1;) {
        uint32_t t = v[0];
        v[0] = v[end];
        v[end] = t;
        sift_down(s, v, 0, end);
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

/* ---- binned size index ------------------------------------------------------------------ */

void as_bins_init(as_bins *bins)
{
    memset(bins, 0, sizeof *bins);
}

uint64_t as_bins_max(const as_heap *h, const as_bins *bins)
{
    if (!bins->flmap)
        return 0;
    unsigned fl = as_log2_floor(bins->flmap);
    unsigned sl = as_log2_floor(bins->slmap[fl]);
    return h->b[ob_bin_max(h->b, bins->root[fl][sl], bins->treap[fl] >> sl & 1)].size;
}

/* One non-empty bin: its structure, membership, class and count. */
static int check_bin(const as_heap *h, const as_bins *bins, unsigned fl, unsigned sl,
                     as_check_failure *f)
{
    const as_blk *B = h->b;
    uint32_t root = bins->root[fl][sl];
    int treap = bins->treap[fl] >> sl & 1;
    uint64_t c = 0;
    const char *why = ob_bin_check(B, h->nb, root, treap, &c);
    if (why)
        return as_check_fail(f, "free index: bin (%u,%u): %s", fl, sl, why);
    for (uint32_t x = ob_bin_min(B, root, treap); x; x = ob_bin_next(B, root, treap, x)) {
        unsigned cf, cs;
        as_tlsf_class(B[x].size, AS_BINS_SL, 0, &cf, &cs);
        if (B[x].state != AS_BLOCK_FREE || !B[x].indexed)
            return as_check_fail(f, "free index holds block %#llx which is not free",
                                 (unsigned long long)B[x].addr);
        if (cf != fl || cs != sl || B[x].bin != (fl << AS_BINS_SL | sl))
            return as_check_fail(f, "bin (%u,%u) holds a block of another class", fl, sl);
    }
    if (c != bins->cnt[fl][sl] || (treap ? c <= OSET_LIST_BACK : c > OSET_LIST_MAX))
        return as_check_fail(f, "bin (%u,%u) holds %llu blocks, counts %u (%s)", fl, sl,
                             (unsigned long long)c, bins->cnt[fl][sl], treap ? "treap" : "list");
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
    t->nd[i].mx = 0;
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
    /* Two at a time into two maxima: half the loop's tests and branches. */
    uint64_t m = 0, m2 = 0;
    unsigned i = 0;
    for (; i + 1 < x->n; i += 2) {
        m = x->e[i].max > m ? x->e[i].max : m;
        m2 = x->e[i + 1].max > m2 ? x->e[i + 1].max : m2;
    }
    if (i < x->n)
        m = x->e[i].max > m ? x->e[i].max : m;
    return m > m2 ? m : m2;
}

/* The slot of child c: `hint` when it holds c (entries beyond n are stale copies, so the
 * hint must be below n), else a scan. */
static inline unsigned bt_slot(const as_btnode *x, uint32_t c, unsigned hint)
{
    if (hint < x->n && x->e[hint].child == c)
        return hint;
    /* An insertion or removal in front of it moves it by one. */
    if (hint + 1 < x->n && x->e[hint + 1].child == c)
        return hint + 1;
    if (hint - 1 < x->n && x->e[hint - 1].child == c)
        return hint - 1;
    unsigned i = 0;
    while (x->e[i].child != c)
        i++;
    return i;
}

/* In node i, an entry whose size (or child's largest size) was o is now v (0: it was
 * removed), and when kc the node's lowest address (e[0].key) may have changed: carry both
 * up while they change. A node's largest size is recomputed only when its largest entry
 * shrank; otherwise it is the larger of v and the node's own copy, so a change that moves
 * neither stops here, without a look at the parent. */
static inline void bt_changed(as_btree *t, uint32_t i, uint64_t o, uint64_t v, int kc)
{
    for (;;) {
        as_btnode *x = &t->nd[i];
        uint64_t was = x->mx;
        uint64_t m = v >= was ? v : o < was ? was : bt_max(x);
        if (m == was && !kc)
            return;
        x->mx = m;
        uint32_t p = x->parent;
        if (!p)
            return;
        as_btnode *y = &t->nd[p];
        unsigned s = x->pslot;
        uint64_t k = x->e[0].key;
        kc = s == 0 && y->e[0].key != k;
        y->e[s].key = k;
        y->e[s].max = m;
        o = was;
        v = m;
        i = p;
    }
}

/* Moves the upper half of full child c of p (at slot s) into a new node at slot s + 1. */
static void bt_split(as_heap *h, as_btree *t, uint32_t p, unsigned s)
{
    uint32_t c = t->nd[p].e[s].child;
    uint32_t d = bt_new(t, t->nd[c].leaf);
    as_btnode *x = &t->nd[c], *y = &t->nd[d], *z = &t->nd[p];
    unsigned half = AS_BT_FAN / 2;
    memcpy(y->e, x->e + half, half * sizeof *y->e);
    y->n = (uint16_t)half;
    x->n = (uint16_t)half;
    y->parent = p;
    for (unsigned i = 0; i < half; i++) {
        if (y->leaf) {
            h->b[y->e[i].child].up = d;
            h->b[y->e[i].child].bslot = i;
        } else {
            t->nd[y->e[i].child].parent = d;
            t->nd[y->e[i].child].pslot = (uint16_t)i;
        }
    }
    memmove(z->e + s + 2, z->e + s + 1, (z->n - s - 1) * sizeof *z->e);
    for (unsigned j = s + 2; j < z->n + 1u; j++)
        t->nd[z->e[j].child].pslot = (uint16_t)j;
    y->pslot = (uint16_t)(s + 1);
    y->mx = bt_max(y);
    x->mx = bt_max(x);
    z->e[s + 1] = (as_btent){.key = y->e[0].key, .max = y->mx, .child = d};
    z->e[s].max = x->mx;
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
        x->e[0] = (as_btent){.key = t->nd[old].e[0].key, .max = t->nd[old].mx, .child = old};
        x->mx = t->nd[old].mx;
        t->nd[old].parent = r;
        t->nd[old].pslot = 0;
        t->root = r;
        t->depth++;
        bt_split(h, t, r, 0);
    }
    uint32_t i = t->root;
    while (!t->nd[i].leaf) {
        as_btnode *x = &t->nd[i];
        unsigned s = 0;
        while (s + 1 < x->n && x->e[s + 1].key <= addr)
            s++;
        if (t->nd[x->e[s].child].n == AS_BT_FAN) {
            bt_split(h, t, i, s);
            if (x->e[s + 1].key <= addr)
                s++;
        }
        as_btent *e = &x->e[s];
        if (e->key > addr)
            e->key = addr; /* only ever at slot 0 */
        if (e->max < size)
            e->max = size;
        if (x->mx < size)
            x->mx = size;
        i = e->child;
    }
    as_btnode *x = &t->nd[i];
    unsigned s = 0;
    while (s < x->n && x->e[s].key < addr)
        s++;
    memmove(x->e + s + 1, x->e + s, (x->n - s) * sizeof *x->e);
    x->e[s] = (as_btent){.key = addr, .max = size, .child = b};
    x->n++;
    if (x->mx < size)
        x->mx = size;
    h->b[b].up = i;
    h->b[b].bslot = s;
}

/* b, at slot s of its leaf, leaves the tree. */
static inline void bt_remove_at(as_heap *h, as_btree *t, uint32_t b, unsigned s)
{
    uint32_t i = h->b[b].up;
    h->b[b].up = AS_NIL;
    t->n--;
    uint64_t gone;
    for (;;) {
        as_btnode *x = &t->nd[i];
        gone = x->e[s].max;
        x->n--;
        memmove(x->e + s, x->e + s + 1, (x->n - s) * sizeof *x->e);
        if (!x->leaf)
            for (unsigned j = s; j < x->n; j++)
                t->nd[x->e[j].child].pslot = (uint16_t)j;
        if (x->n || !x->parent)
            break;
        /* An emptied node leaves its parent. */
        uint32_t c = i;
        i = x->parent;
        s = x->pslot;
        bt_put(t, c);
    }
    if (!t->nd[i].n) { /* the root emptied: the tree is empty */
        bt_put(t, i);
        t->root = AS_NIL;
        t->depth = 0;
        return;
    }
    bt_changed(t, i, gone, 0, s == 0);
    while (!t->nd[t->root].leaf && t->nd[t->root].n == 1) {
        uint32_t r = t->root;
        t->root = t->nd[r].e[0].child;
        t->nd[t->root].parent = AS_NIL;
        t->depth--;
        bt_put(t, r);
    }
}

void as_btree_remove(as_heap *h, as_btree *t, uint32_t b)
{
    bt_remove_at(h, t, b, bt_slot(&t->nd[h->b[b].up], b, h->b[b].bslot));
}

void as_btree_remove_found(as_heap *h, as_btree *t, uint32_t b)
{
    bt_remove_at(h, t, b, h->b[b].bslot);
}

/* nw takes the place of old, at slot s of its leaf. */
static inline void bt_replace_at(as_heap *h, as_btree *t, uint32_t old, uint32_t nw, unsigned s)
{
    uint32_t i = h->b[old].up;
    as_btnode *x = &t->nd[i];
    uint64_t was = x->e[s].max, v = h->b[nw].size;
    x->e[s] = (as_btent){.key = h->b[nw].addr, .max = v, .child = nw};
    h->b[nw].up = i;
    h->b[nw].bslot = s;
    h->b[old].up = AS_NIL;
    bt_changed(t, i, was, v, s == 0);
}

void as_btree_replace(as_heap *h, as_btree *t, uint32_t old, uint32_t nw)
{
    bt_replace_at(h, t, old, nw, bt_slot(&t->nd[h->b[old].up], old, h->b[old].bslot));
}

void as_btree_replace_found(as_heap *h, as_btree *t, uint32_t old, uint32_t nw)
{
    bt_replace_at(h, t, old, nw, h->b[old].bslot);
}

void as_btree_resized(as_heap *h, as_btree *t, uint32_t b)
{
    uint32_t i = h->b[b].up;
    as_btnode *x = &t->nd[i];
    unsigned s = bt_slot(x, b, h->b[b].bslot);
    uint64_t was = x->e[s].max, v = h->b[b].size;
    int kc = s == 0 && x->e[0].key != h->b[b].addr;
    x->e[s].key = h->b[b].addr;
    x->e[s].max = v;
    bt_changed(t, i, was, v, kc);
}

uint32_t as_btree_find(as_heap *h, const as_btree *t, uint64_t want)
{
    uint32_t i = t->root;
    if (!i)
        return AS_NIL;
    const as_btnode *x = &t->nd[i];
    unsigned s = 0;
    while (s < x->n && x->e[s].max < want) /* the root's scan tells whether any fits */
        s++;
    if (s == x->n)
        return AS_NIL;
    while (!x->leaf) {
        x = &t->nd[x->e[s].child];
        s = 0;
        while (x->e[s].max < want) /* the summaries say one fits */
            s++;
    }
    uint32_t b = x->e[s].child;
    h->b[b].bslot = s;
    return b;
}

uint64_t as_btree_max(const as_btree *t)
{
    return t->root ? t->nd[t->root].mx : 0;
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
    if (x->mx != bt_max(x))
        return as_check_fail(f, "free index: B+ tree node %u's own largest size is stale", i);
    if (x->leaf != (depth == t->depth))
        return as_check_fail(f, "free index: B+ tree leaves are not all at depth %u", t->depth);
    for (unsigned s = 0; s < x->n; s++) {
        uint32_t c = x->e[s].child;
        if (x->leaf) {
            if (c == AS_NIL || c >= h->nb)
                return as_check_fail(f, "free index: bad block %u in B+ tree leaf %u", c, i);
            const as_blk *y = &h->b[c];
            if (y->state != AS_BLOCK_FREE || !y->indexed || y->up != i)
                return as_check_fail(f, "free index holds block %#llx which is not free here",
                                     (unsigned long long)y->addr);
            if (x->e[s].key != y->addr || x->e[s].max != y->size)
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
            if (y->n == 0 || x->e[s].key != y->e[0].key || x->e[s].max != bt_max(y) ||
                y->pslot != s)
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
        uint32_t c = as_ph_link(B, a, b);
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
        root = as_ph_link(B, root, stack);
        stack = n;
    }
    B[root].hprev = AS_NIL;
    return root;
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
            *root = as_ph_link(B, *root, sub);
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
