/*
 * simdev.c - the simulated device (see simdev.h).
 *
 * The default placement, the CUDA driver's chunked heap, has its own structure (`heap`,
 * described where it is defined), built for a device call per event. The simple rules and
 * the virtual-only space use two treaps keyed by address: `live` holds the ranges handed
 * out, `holes` the free ranges, each node carrying the largest hole in its subtree so that
 * the lowest-address first fit is O(log n). Invariant: holes never touch (adjacent holes
 * are merged) and no live range overlaps a hole or another live range.
 *
 * Cost model defaults (ns = fixed + per MiB * size): measured on an NVIDIA H200 with
 * CUDA 13 (replay/RESULTS.md, "Calibration"). Until that calibration they are the
 * orders of magnitude commonly reported: cudaMalloc ~ tens of us, cudaFree ~ tens of us
 * plus an implicit synchronisation, cuMemMap+cuMemCreate per 2 MiB page ~ 10 us.
 */
#include "simdev.h"

#include <stdlib.h>
#include <string.h>

typedef struct node {
    uint64_t addr, len, maxlen;
    uint32_t prio, left, right; /* child indices, 0 = none (slot 0 is unused) */
} node;

typedef struct treap {
    node *n;
    uint32_t cap, used, free_head, root;
    uint32_t rng;
} treap;

typedef struct chunk {
    uint64_t base;
    uint32_t npages; /* length in pages */
    uint32_t slot;   /* leaf in the creation order; the free-list link while unused */
    uint32_t bound;  /* at least its longest free run, pages (see heap_take) */
    uint64_t inl;    /* the bitmap when npages <= 64 */
    uint64_t *ext;   /* otherwise */
} chunk;

typedef struct lent {
    uint64_t addr;  /* 0: empty slot */
    uint32_t pages; /* its size */
    uint32_t chunk;
} lent;

typedef struct gap {
    uint64_t base, len;
} gap;

typedef struct heap {
    unsigned shift; /* log2 of the page (the granularity) */
    chunk *ch;
    uint32_t nch, chcap, ch_free;       /* ch_free: head of unused entries + 1 (0: none) */
    uint32_t *mx;                       /* max tree over the slots' bounds (mx_update) */
    uint32_t *slot_ch;                  /* chunk per slot, UINT32_MAX when dead */
    uint32_t scap, nslots, ndead, mtop; /* mtop: the root's index in mx */
    lent *lt;
    uint32_t ltmask, nlent;
    unsigned ltshift; /* 64 - log2 of the table's size: a Fibonacci hash takes the top bits */
    gap *g;
    uint32_t ng, gcap;
    uint64_t edge; /* everything below is free; no chunk was ever lower than it is now */
} heap;

struct as_simdev {
    as_device dev;
    as_simdev_params p;
    treap live, holes;           /* physical (cudaMalloc) address space, simple rules */
    heap heap;                   /* physical address space, AS_PLACE_CHUNKED */
    treap va_live, va_holes;     /* virtual-only (cuMemAddressReserve) space */
    uint64_t next_addr, va_next; /* first address never handed out */
    as_dev_counters c;
    as_dev_log_fn log;
    void *log_user;
};

/* ---- treap ---------------------------------------------------------------------------- */

static uint32_t tr_rand(treap *t)
{
    t->rng ^= t->rng << 13;
    t->rng ^= t->rng >> 17;
    t->rng ^= t->rng << 5;
    return t->rng;
}

static uint32_t tr_new(treap *t, uint64_t addr, uint64_t len)
{
    uint32_t i;
    if (t->free_head) {
        i = t->free_head;
        t->free_head = t->n[i].left;
    } else {
        if (t->used + 1 >= t->cap) {
            uint32_t nc = t->cap ? t->cap * 2 : 64;
            node *nn = realloc(t->n, nc * sizeof *nn);
            if (!nn)
                return 0;
            t->n = nn;
            t->cap = nc;
        }
        i = ++t->used;
    }
    t->n[i] = (node){.addr = addr, .len = len, .maxlen = len, .prio = tr_rand(t)};
    return i;
}

static void tr_release_node(treap *t, uint32_t i)
{
    t->n[i].left = t->free_head;
    t->free_head = i;
}

static void tr_fix(treap *t, uint32_t i)
{
    node *x = &t->n[i];
    uint64_t m = x->len;
    if (x->left && t->n[x->left].maxlen > m)
        m = t->n[x->left].maxlen;
    if (x->right && t->n[x->right].maxlen > m)
        m = t->n[x->right].maxlen;
    x->maxlen = m;
}

/* Splits the tree at key: left gets addr < key, right addr >= key. */
static void tr_split(treap *t, uint32_t root, uint64_t key, uint32_t *l, uint32_t *r)
{
    if (!root) {
        *l = *r = 0;
        return;
    }
    if (t->n[root].addr < key) {
        tr_split(t, t->n[root].right, key, &t->n[root].right, r);
        *l = root;
    } else {
        tr_split(t, t->n[root].left, key, l, &t->n[root].left);
        *r = root;
    }
    tr_fix(t, root);
}

static uint32_t tr_merge(treap *t, uint32_t a, uint32_t b)
{
    if (!a || !b)
        return a ? a : b;
    if (t->n[a].prio > t->n[b].prio) {
        t->n[a].right = tr_merge(t, t->n[a].right, b);
        tr_fix(t, a);
        return a;
    }
    t->n[b].left = tr_merge(t, a, t->n[b].left);
    tr_fix(t, b);
    return b;
}

static int tr_insert(treap *t, uint64_t addr, uint64_t len)
{
    uint32_t i = tr_new(t, addr, len), l, r;
    if (!i)
        return -1;
    tr_split(t, t->root, addr, &l, &r);
    t->root = tr_merge(t, tr_merge(t, l, i), r);
    return 0;
}

/* Removes the node with exactly this address; returns its length, or 0 if absent. */
static uint64_t tr_remove(treap *t, uint64_t addr)
{
    uint32_t l, m, r;
    tr_split(t, t->root, addr, &l, &m);
    tr_split(t, m, addr + 1, &m, &r);
    uint64_t len = 0;
    if (m) {
        len = t->n[m].len;
        tr_release_node(t, m);
    }
    t->root = tr_merge(t, l, r);
    return len;
}

/* Lowest-address node with len >= want, or 0. */
static uint32_t tr_first_fit(const treap *t, uint64_t want)
{
    uint32_t i = t->root;
    while (i) {
        const node *x = &t->n[i];
        if (x->left && t->n[x->left].maxlen >= want)
            i = x->left;
        else if (x->len >= want)
            return i;
        else if (x->right && t->n[x->right].maxlen >= want)
            i = x->right;
        else
            return 0;
    }
    return 0;
}

/* Highest-address node with len >= want, or 0. */
static uint32_t tr_last_fit(const treap *t, uint64_t want)
{
    uint32_t i = t->root;
    while (i) {
        const node *x = &t->n[i];
        if (x->right && t->n[x->right].maxlen >= want)
            i = x->right;
        else if (x->len >= want)
            return i;
        else if (x->left && t->n[x->left].maxlen >= want)
            i = x->left;
        else
            return 0;
    }
    return 0;
}

/* Node with the greatest addr < key, or 0. */
static uint32_t tr_pred(const treap *t, uint64_t key)
{
    uint32_t i = t->root, best = 0;
    while (i) {
        if (t->n[i].addr < key) {
            best = i;
            i = t->n[i].right;
        } else {
            i = t->n[i].left;
        }
    }
    return best;
}

static uint32_t tr_find(const treap *t, uint64_t key)
{
    uint32_t i = t->root;
    while (i && t->n[i].addr != key)
        i = key < t->n[i].addr ? t->n[i].left : t->n[i].right;
    return i;
}

static void tr_free(treap *t)
{
    free(t->n);
    memset(t, 0, sizeof *t);
}

/* ---- address spaces --------------------------------------------------------------------- */

/* Takes size bytes: from the lowest hole that fits (down == 0, the space grows upward
 * from *edge) or from the top of the highest hole that fits (down == 1, the space grows
 * downward from *edge, as the CUDA driver's top-down VA heap does). */
static int space_take(treap *live, treap *holes, uint64_t *edge, int down, uint64_t size,
                      uint64_t need, uint64_t *addr)
{
    uint32_t h = down ? tr_last_fit(holes, need) : tr_first_fit(holes, need);
    uint64_t a;
    if (h) {
        uint64_t ha = holes->n[h].addr, len = holes->n[h].len;
        tr_remove(holes, ha);
        if (down) {
            a = ha + len - size;
            if (len > size && tr_insert(holes, ha, len - size))
                return AS_EDEVICE;
        } else {
            a = ha;
            if (len > size && tr_insert(holes, ha + size, len - size))
                return AS_EDEVICE;
        }
    } else if (down) {
        *edge -= size;
        a = *edge;
    } else {
        a = *edge;
        *edge += size;
    }
    if (tr_insert(live, a, size))
        return AS_EDEVICE;
    *addr = a;
    return AS_DEV_OK;
}

static int space_give(treap *live, treap *holes, uint64_t *edge, int down, uint64_t addr,
                      uint64_t size)
{
    uint32_t i = tr_find(live, addr);
    if (!i || live->n[i].len != size)
        return AS_EINVAL;
    tr_remove(live, addr);
    uint64_t a = addr, len = size;
    uint32_t p = tr_pred(holes, addr);
    if (p && holes->n[p].addr + holes->n[p].len == addr) {
        a = holes->n[p].addr;
        len += holes->n[p].len;
        tr_remove(holes, a);
    }
    uint32_t s = tr_find(holes, addr + size);
    if (s) {
        len += holes->n[s].len;
        tr_remove(holes, addr + size);
    }
    if (!down && a + len == *edge) { /* the top of the space shrinks back */
        *edge = a;
        return AS_DEV_OK;
    }
    if (down && a == *edge) { /* the bottom of the space rises back */
        *edge = a + len;
        return AS_DEV_OK;
    }
    return tr_insert(holes, a, len) ? AS_EDEVICE : AS_DEV_OK;
}

/* AS_PLACE_CHUNKED (see simdev.h), built for one device call per event (nocache):
 * - each chunk keeps a bitmap of its pages (the granularity), 1 = in use, bits past its end
 *   set; its free ranges are the bitmap's runs of zeros, so neighbours merge by themselves;
 * - the chunks sit in creation order in the leaves of a 4-ary max tree holding a bound of
 *   each one's longest free run (lowered lazily, heap_take): "the most recent chunk with
 *   room" is a search for the rightmost leaf with a run long enough, from the newest
 *   (dead leaves hold 0; the order is compacted when it fills); inside that chunk, the
 *   smallest free run that holds the range (run_best);
 * - the ranges handed out are in a hash table (address -> size, chunk);
 * - the free address space under the top, outside the chunks, is a sorted array of gaps
 *   and an edge below which everything is free. Gaps lie between chunks, so there are at
 *   most as many as chunks; the highest one that fits is found by a scan from the top,
 *   done only when a chunk is made. */

static inline uint64_t *cbits(chunk *c)
{
    return c->npages <= 64 ? &c->inl : c->ext;
}

/* First index >= from whose bit is `val`, or n. */
static uint32_t next_bit(const uint64_t *b, uint32_t n, uint32_t from, int val)
{
    while (from < n) {
        uint32_t w = from >> 6;
        uint64_t x = (val ? b[w] : ~b[w]) & (~0ull << (from & 63));
        if (x) {
            uint32_t r = (w << 6) + (uint32_t)__builtin_ctzll(x);
            return r < n ? r : n;
        }
        from = (w + 1) << 6;
    }
    return n;
}

/* Highest index < from whose bit is set (in use), or -1. */
static int64_t prev_used(const uint64_t *b, uint32_t from)
{
    while (from) {
        uint32_t w = (from - 1) >> 6;
        uint64_t x = b[w] & (~0ull >> (63 - ((from - 1) & 63)));
        if (x)
            return (int64_t)(w << 6) + 63 - __builtin_clzll(x);
        from = w << 6;
    }
    return -1;
}

/* Start of the smallest free run of >= k pages, the lowest of equals (best fit inside the
 * chunk, PLACEMENT.md section 6), or UINT32_MAX. */
static uint32_t run_best(chunk *c, uint32_t k)
{
    uint32_t best = UINT32_MAX, blen = UINT32_MAX;
    if (c->npages <= 64) {
        uint64_t u = c->inl;
        for (uint32_t p = 0; p < 64;) {
            uint64_t f = ~u & (~0ull << p);
            if (!f)
                break;
            uint32_t s = (uint32_t)__builtin_ctzll(f);
            uint64_t x = u & (~0ull << s);
            uint32_t e = x ? (uint32_t)__builtin_ctzll(x) : 64;
            if (e - s >= k && e - s < blen) {
                best = s;
                blen = e - s;
                if (blen == k)
                    break;
            }
            p = e;
        }
        return best;
    }
    for (uint32_t p = 0;;) {
        uint32_t s = next_bit(c->ext, c->npages, p, 0);
        if (s >= c->npages)
            return best;
        uint32_t e = next_bit(c->ext, c->npages, s, 1);
        if (e - s >= k && e - s < blen) {
            best = s;
            blen = e - s;
            if (blen == k)
                return best;
        }
        p = e;
    }
}

static uint32_t run_max(chunk *c)
{
    uint32_t best = 0;
    if (c->npages <= 64) {
        for (uint64_t m = ~c->inl; m; m &= m >> 1)
            best++;
        return best;
    }
    for (uint32_t p = 0;;) {
        uint32_t s = next_bit(c->ext, c->npages, p, 0);
        if (s >= c->npages)
            return best;
        uint32_t e = next_bit(c->ext, c->npages, s, 1);
        best = e - s > best ? e - s : best;
        p = e;
    }
}

/* Pages [p, p+k) of a one-word chunk, as a mask. */
static inline uint64_t word_mask(uint32_t p, uint32_t k)
{
    return (k == 64 ? ~0ull : ((1ull << k) - 1)) << p;
}

static inline void bits_set(chunk *c, uint32_t p, uint32_t k, int used)
{
    if (c->npages <= 64) {
        c->inl = used ? c->inl | word_mask(p, k) : c->inl & ~word_mask(p, k);
        return;
    }
    uint64_t *b = c->ext;
    while (k) {
        uint32_t o = p & 63, n = 64 - o < k ? 64 - o : k;
        uint64_t m = (n == 64 ? ~0ull : ((1ull << n) - 1)) << o;
        if (used)
            b[p >> 6] |= m;
        else
            b[p >> 6] &= ~m;
        p += n;
        k -= n;
    }
}

/* -- the creation order -- */

/* A 4-ary max tree, stored level by level: the scap leaves (a power of 4) from mx[0], each
 * level above a quarter of the one below, the root last. */
static inline uint32_t max4(const uint32_t *x)
{
    uint32_t a = x[0] > x[1] ? x[0] : x[1], b = x[2] > x[3] ? x[2] : x[3];
    return a > b ? a : b;
}

static void mx_build(uint32_t *mx, uint32_t cap)
{
    for (uint32_t off = 0, n = cap; n > 1; off += n, n /= 4)
        for (uint32_t i = 0; i < n / 4; i++)
            mx[off + n + i] = max4(&mx[off + 4 * i]);
}

static void mx_update(heap *h, uint32_t slot, uint32_t v)
{
    uint32_t *mx = h->mx, i = slot, off = 0, n = h->scap;
    mx[i] = v;
    while (n > 1) {
        uint32_t m = max4(&mx[off + (i & ~3u)]);
        off += n;
        n /= 4;
        i /= 4;
        if (mx[off + i] == m)
            break; /* nothing above changes */
        mx[off + i] = m;
    }
}

/* Rightmost live slot whose chunk has a free run >= k, or UINT32_MAX. The answer is
 * mostly one of the newest chunks, so the search starts at the newest leaf and moves left
 * and up only as far as it must, then down the rightmost branch that holds k. */
static uint32_t mx_rightmost(const heap *h, uint32_t k)
{
    const uint32_t *mx = h->mx;
    uint32_t top = h->mtop; /* the root's index */
    if (mx[top] < k || !h->nslots)
        return UINT32_MAX;
    uint32_t i = h->nslots - 1, off = 0, n = h->scap;
    while (mx[off + i] < k) {
        while (!(i & 3)) { /* a first child: its left neighbours are its parent's */
            off += n;
            n /= 4;
            i /= 4; /* the root holds >= k, so a first child at the top is never reached */
        }
        i--;
    }
    while (off) { /* down: the rightmost child that holds k */
        n *= 4;
        off -= n;
        i = 4 * i + 3;
        while (mx[off + i] < k)
            i--;
    }
    return i;
}

/* Makes room for one more slot: drops the dead ones (keeping the order) or grows. */
static int order_grow(heap *h)
{
    uint32_t live = h->nslots - h->ndead, cap = h->scap;
    if (live + 1 > cap / 2)
        cap *= 4;
    uint32_t *mx = calloc((4 * (size_t)cap - 1) / 3, sizeof *mx), *sc = malloc(cap * sizeof *sc);
    if (!mx || !sc) {
        free(mx);
        free(sc);
        return AS_EDEVICE;
    }
    uint32_t n = 0;
    for (uint32_t s = 0; s < h->nslots; s++) {
        uint32_t c = h->slot_ch[s];
        if (c == UINT32_MAX)
            continue;
        h->ch[c].slot = n;
        sc[n] = c;
        mx[n++] = h->ch[c].bound;
    }
    mx_build(mx, cap);
    free(h->mx);
    free(h->slot_ch);
    h->mx = mx;
    h->slot_ch = sc;
    h->scap = cap;
    h->mtop = (4 * cap - 1) / 3 - 1;
    h->nslots = n;
    h->ndead = 0;
    return AS_DEV_OK;
}

/* -- the ranges handed out -- */

static inline uint32_t lt_hash(const heap *h, uint64_t addr)
{
    return (uint32_t)(((addr >> h->shift) * 0x9e3779b97f4a7c15ull) >> h->ltshift);
}

static lent *lt_find(heap *h, uint64_t addr)
{
    for (uint32_t i = lt_hash(h, addr);; i = (i + 1) & h->ltmask) {
        if (h->lt[i].addr == addr)
            return &h->lt[i];
        if (!h->lt[i].addr)
            return NULL;
    }
}

static int lt_put(heap *h, uint64_t addr, uint64_t size, uint32_t c)
{
    if (2 * (h->nlent + 1) > h->ltmask + 1) {
        uint32_t n = 2 * (h->ltmask + 1);
        lent *old = h->lt, *nt = calloc(n, sizeof *nt);
        if (!nt)
            return AS_EDEVICE;
        uint32_t om = h->ltmask;
        h->lt = nt;
        h->ltmask = n - 1;
        h->ltshift--;
        for (uint32_t i = 0; i <= om; i++)
            if (old[i].addr) {
                uint32_t j = lt_hash(h, old[i].addr);
                while (nt[j].addr)
                    j = (j + 1) & h->ltmask;
                nt[j] = old[i];
            }
        free(old);
    }
    uint32_t i = lt_hash(h, addr);
    while (h->lt[i].addr)
        i = (i + 1) & h->ltmask;
    h->lt[i] = (lent){addr, (uint32_t)(size >> h->shift), c};
    h->nlent++;
    return AS_DEV_OK;
}

/* Linear probing's deletion: pull later entries of the cluster back into the hole. */
static void lt_del(heap *h, lent *e)
{
    uint32_t i = (uint32_t)(e - h->lt), j = i;
    for (;;) {
        j = (j + 1) & h->ltmask;
        if (!h->lt[j].addr)
            break;
        uint32_t k = lt_hash(h, h->lt[j].addr);
        /* move j to i unless its home k lies cyclically in (i, j] */
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
            continue;
        h->lt[i] = h->lt[j];
        i = j;
    }
    h->lt[i].addr = 0;
    h->nlent--;
}

/* -- chunks and the gaps between them -- */

static int chunk_new(heap *h, uint64_t base, uint64_t len, uint32_t *out)
{
    uint32_t c;
    if (h->nslots == h->scap && order_grow(h))
        return AS_EDEVICE;
    if (h->ch_free) {
        c = h->ch_free - 1;
        h->ch_free = h->ch[c].slot;
    } else {
        if (h->nch == h->chcap) {
            uint32_t n = h->chcap ? 2 * h->chcap : 64;
            chunk *nc = realloc(h->ch, n * sizeof *nc);
            if (!nc)
                return AS_EDEVICE;
            h->ch = nc;
            h->chcap = n;
        }
        c = h->nch++;
    }
    chunk *k = &h->ch[c];
    uint32_t np = (uint32_t)(len >> h->shift);
    *k = (chunk){.base = base, .npages = np, .bound = np};
    if (np > 64) {
        k->ext = calloc((np + 63) / 64, sizeof *k->ext);
        if (!k->ext) {
            k->slot = h->ch_free;
            h->ch_free = c + 1;
            return AS_EDEVICE;
        }
    }
    if (np & 63) /* the bits past the end are "in use", so no run crosses the end */
        cbits(k)[np >> 6] |= ~0ull << (np & 63);
    k->slot = h->nslots++;
    h->slot_ch[k->slot] = c;
    mx_update(h, k->slot, np);
    *out = c;
    return AS_DEV_OK;
}

static void chunk_drop(heap *h, uint32_t c)
{
    chunk *k = &h->ch[c];
    mx_update(h, k->slot, 0);
    h->slot_ch[k->slot] = UINT32_MAX;
    h->ndead++;
    free(k->ext);
    k->ext = NULL;
    k->slot = h->ch_free;
    h->ch_free = c + 1;
}

/* Index of the first gap with base >= a. */
static uint32_t gap_index(const heap *h, uint64_t a)
{
    uint32_t lo = 0, hi = h->ng;
    while (lo < hi) {
        uint32_t m = (lo + hi) / 2;
        if (h->g[m].base < a)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

/* A new chunk of len bytes: the top of the highest gap that holds len + 32 MiB - 4 KiB
 * (an aligned mmap maps the size plus the alignment less a page; gaps are multiples of
 * 32 MiB here, so the gap must be larger than the chunk), else right under the edge. */
static int gap_take(heap *h, uint64_t len, uint64_t *base)
{
    uint64_t need = len + AS_SIMDEV_CHUNK - 4096;
    for (uint32_t i = h->ng; i--;)
        if (h->g[i].len >= need) {
            h->g[i].len -= len; /* stays >= 32 MiB - 4 KiB: never empty */
            *base = h->g[i].base + h->g[i].len;
            return AS_DEV_OK;
        }
    if (h->edge - AS_SIMDEV_VA_BASE < len) /* the heap ends where the virtual region starts */
        return AS_DEV_OOM;
    h->edge -= len;
    *base = h->edge;
    return AS_DEV_OK;
}

static int gap_give(heap *h, uint64_t a, uint64_t len)
{
    uint32_t i = gap_index(h, a); /* gaps [0, i) lie below a, [i, ng) above */
    int below = i > 0 && h->g[i - 1].base + h->g[i - 1].len == a;
    int above = i < h->ng && h->g[i].base == a + len;
    if (above) {
        len += h->g[i].len;
        memmove(&h->g[i], &h->g[i + 1], (h->ng - i - 1) * sizeof *h->g);
        h->ng--;
    }
    if (below) {
        h->g[i - 1].len += len;
        return AS_DEV_OK;
    }
    if (a == h->edge) { /* the bottom of the heap rises back */
        h->edge = a + len;
        return AS_DEV_OK;
    }
    if (h->ng == h->gcap) {
        uint32_t n = h->gcap ? 2 * h->gcap : 64;
        gap *ng = realloc(h->g, n * sizeof *ng);
        if (!ng)
            return AS_EDEVICE;
        h->g = ng;
        h->gcap = n;
    }
    memmove(&h->g[i + 1], &h->g[i], (h->ng - i) * sizeof *h->g);
    h->g[i] = (gap){a, len};
    h->ng++;
    return AS_DEV_OK;
}

static int heap_take(heap *h, uint64_t size, uint64_t *addr)
{
    uint32_t k = (uint32_t)(size >> h->shift), c, p, s;
    /* The most recent chunk with room. The order holds an upper bound of each chunk's
     * longest free run, lowered only when a search finds it too high: taking a range
     * costs no update, and a chunk that has no room for k is found once per k. */
    while ((s = mx_rightmost(h, k)) != UINT32_MAX) {
        c = h->slot_ch[s];
        if ((p = run_best(&h->ch[c], k)) != UINT32_MAX)
            break;
        h->ch[c].bound = run_max(&h->ch[c]);
        mx_update(h, s, h->ch[c].bound);
    }
    if (s == UINT32_MAX) {
        uint64_t len = (size + AS_SIMDEV_CHUNK - 1) / AS_SIMDEV_CHUNK * AS_SIMDEV_CHUNK;
        uint64_t base;
        int rc = gap_take(h, len, &base);
        if (rc)
            return rc;
        if (chunk_new(h, base, len, &c)) {
            gap_give(h, base, len);
            return AS_EDEVICE;
        }
        p = 0;
    }
    chunk *ck = &h->ch[c];
    uint64_t a = ck->base + ((uint64_t)p << h->shift);
    if (lt_put(h, a, size, c))
        return AS_EDEVICE;
    bits_set(ck, p, k, 1);
    *addr = a;
    return AS_DEV_OK;
}

static int heap_give(heap *h, uint64_t addr, uint64_t size)
{
    lent *e = lt_find(h, addr);
    if (!e || (uint64_t)e->pages << h->shift != size)
        return AS_EINVAL;
    uint32_t c = e->chunk;
    lt_del(h, e);
    chunk *ck = &h->ch[c];
    uint32_t p = (uint32_t)((addr - ck->base) >> h->shift), k = (uint32_t)(size >> h->shift);
    uint32_t run; /* the free run the range joins: the bound rises to it if it is longer */
    bits_set(ck, p, k, 0);
    if (ck->npages <= 64) {
        uint64_t below = ck->inl & (p ? ~0ull >> (64 - p) : 0);
        uint64_t above = ck->inl & (p + k < 64 ? ~0ull << (p + k) : 0);
        run = (above ? (uint32_t)__builtin_ctzll(above) : 64) -
              (below ? 64 - (uint32_t)__builtin_clzll(below) : 0);
    } else {
        run = next_bit(ck->ext, ck->npages, p + k, 1) - (uint32_t)(prev_used(ck->ext, p) + 1);
    }
    if (run == ck->npages) { /* empty: its address space goes back */
        uint64_t base = ck->base, len = (uint64_t)ck->npages << h->shift;
        chunk_drop(h, c);
        return gap_give(h, base, len);
    }
    if (run > ck->bound) {
        ck->bound = run;
        mx_update(h, ck->slot, run);
    }
    return AS_DEV_OK;
}

/* The CUDA context's own chunks, there before the first cudaMalloc (replay/PLACEMENT.md
 * section 6, measured in replay/data/calib-h200 and the same in all 15 key-replay
 * processes): above the heap's top T, a chunk [T+480, T+512) MiB made first with its first
 * 8 MiB in use, and a chunk [T+384, T+416) MiB made next with all but its last 2 MiB in use.
 * The space from T up is otherwise taken, so the heap still grows down from T. The first
 * 2 MiB segments of a process land in them: T+414, then T+488, T+490, ... */
static const struct {
    uint64_t off, used; /* chunk offset above AS_SIMDEV_TOP, bytes in use from its bottom */
} ctx_chunks[] = {
    {480ull << 20, 8ull << 20},
    {384ull << 20, 30ull << 20},
};

static int heap_init(heap *h, uint64_t granularity)
{
    memset(h, 0, sizeof *h);
    /* pages are the granularity, which must divide 2 MiB (the context's layout) */
    if (granularity & (granularity - 1) || (2ull << 20) % granularity)
        return AS_EINVAL;
    h->shift = (unsigned)__builtin_ctzll(granularity);
    h->edge = AS_SIMDEV_TOP;
    h->scap = 64;
    h->mtop = (4 * h->scap - 1) / 3 - 1;
    h->mx = calloc(h->mtop + 1, sizeof *h->mx);
    h->slot_ch = malloc(h->scap * sizeof *h->slot_ch);
    h->ltmask = 1023;
    h->ltshift = 64 - 10;
    h->lt = calloc(h->ltmask + 1, sizeof *h->lt);
    if (!h->mx || !h->slot_ch || !h->lt)
        return AS_EDEVICE;
    for (size_t i = 0; i < sizeof ctx_chunks / sizeof ctx_chunks[0]; i++) {
        uint32_t c;
        if (chunk_new(h, AS_SIMDEV_TOP + ctx_chunks[i].off, AS_SIMDEV_CHUNK, &c))
            return AS_EDEVICE;
        chunk *ck = &h->ch[c];
        bits_set(ck, 0, (uint32_t)(ctx_chunks[i].used >> h->shift), 1);
        ck->bound = run_max(ck);
        mx_update(h, ck->slot, ck->bound);
    }
    return AS_DEV_OK;
}

static void heap_free(heap *h)
{
    for (uint32_t c = 0; c < h->nch; c++)
        if (h->ch[c].npages > 64)
            free(h->ch[c].ext); /* NULL once dropped */
    free(h->ch);
    free(h->mx);
    free(h->slot_ch);
    free(h->lt);
    free(h->g);
}

/* ---- device calls ------------------------------------------------------------------------ */

static double cost(const as_cost *c, uint64_t size)
{
    return c->fixed_ns + c->ns_per_mib * (double)size / (double)(1 << 20);
}

static void emit(as_simdev *d, as_dev_action a, uint64_t addr, uint64_t size, double ns)
{
    d->c.time_ns += ns;
    if (d->log) {
        as_dev_event ev = {.action = a, .addr = addr, .size = size, .cost_ns = ns};
        d->log(d->log_user, &ev);
    }
}

static void held_add(as_simdev *d, uint64_t size)
{
    d->c.reserved += size;
    if (d->c.reserved > d->c.peak_reserved)
        d->c.peak_reserved = d->c.reserved;
}

static int over_capacity(const as_simdev *d, uint64_t size)
{
    return d->p.capacity != AS_CAPACITY_NONE &&
           (size > d->p.capacity || d->c.reserved > d->p.capacity - size);
}

static int bad_size(const as_simdev *d, uint64_t size)
{
    return size == 0 || (size & (d->p.granularity - 1)) != 0; /* a power of two */
}

static int dev_reserve(void *ctx, uint64_t size, uint64_t *addr)
{
    as_simdev *d = ctx;
    if (bad_size(d, size))
        return AS_EINVAL;
    /* past any capacity, or, on the chunked heap, 2^26 pages (128 TiB at 2 MiB), more than
     * any GPU: its chunks keep a bit per page, so a bound keeps a bitmap under 8 MiB */
    int rc = over_capacity(d, size) || (d->p.placement == AS_PLACE_CHUNKED &&
                                        size >> 26 >> __builtin_ctzll(d->p.granularity))
                 ? AS_DEV_OOM
             : d->p.placement == AS_PLACE_CHUNKED
                 ? heap_take(&d->heap, size, addr)
                 : space_take(&d->live, &d->holes, &d->next_addr,
                              d->p.placement == AS_PLACE_TOP_DOWN, size, size, addr);
    if (rc == AS_DEV_OOM) { /* a refusal, also when the heap's address space runs out */
        d->c.refusals++;
        d->c.time_ns += cost(&d->p.reserve, 0);
    }
    if (rc)
        return rc;
    held_add(d, size);
    d->c.reserves++;
    emit(d, AS_DEV_SEGMENT_ALLOC, *addr, size, cost(&d->p.reserve, size));
    return AS_DEV_OK;
}

static int dev_release(void *ctx, uint64_t addr, uint64_t size)
{
    as_simdev *d = ctx;
    int rc = d->p.placement == AS_PLACE_CHUNKED
                 ? heap_give(&d->heap, addr, size)
                 : space_give(&d->live, &d->holes, &d->next_addr,
                              d->p.placement == AS_PLACE_TOP_DOWN, addr, size);
    if (rc)
        return rc;
    d->c.reserved -= size;
    d->c.releases++;
    emit(d, AS_DEV_SEGMENT_FREE, addr, size, cost(&d->p.release, size));
    return AS_DEV_OK;
}

static int dev_va_reserve(void *ctx, uint64_t size, uint64_t *addr)
{
    as_simdev *d = ctx;
    if (bad_size(d, size))
        return AS_EINVAL;
    return space_take(&d->va_live, &d->va_holes, &d->va_next, 0, size, size, addr);
}

static int dev_va_release(void *ctx, uint64_t addr, uint64_t size)
{
    as_simdev *d = ctx;
    return space_give(&d->va_live, &d->va_holes, &d->va_next, 0, addr, size);
}

/* The range must lie inside one virtual reservation. Whether pages are already mapped is
 * the policy's to know; check() of the policy verifies its own page accounting. */
static int in_va(const as_simdev *d, uint64_t addr, uint64_t size)
{
    uint32_t p = tr_pred(&d->va_live, addr + 1);
    return p && addr + size <= d->va_live.n[p].addr + d->va_live.n[p].len;
}

static int dev_map(void *ctx, uint64_t addr, uint64_t size)
{
    as_simdev *d = ctx;
    if (bad_size(d, size) || addr % d->p.granularity || !in_va(d, addr, size))
        return AS_EINVAL;
    if (over_capacity(d, size)) {
        d->c.refusals++;
        d->c.time_ns += cost(&d->p.map, 0);
        return AS_DEV_OOM;
    }
    held_add(d, size);
    d->c.maps++;
    emit(d, AS_DEV_SEGMENT_MAP, addr, size, cost(&d->p.map, size));
    return AS_DEV_OK;
}

static int dev_unmap(void *ctx, uint64_t addr, uint64_t size)
{
    as_simdev *d = ctx;
    if (bad_size(d, size) || addr % d->p.granularity || !in_va(d, addr, size) ||
        size > d->c.reserved)
        return AS_EINVAL;
    d->c.reserved -= size;
    d->c.unmaps++;
    emit(d, AS_DEV_SEGMENT_UNMAP, addr, size, cost(&d->p.unmap, size));
    return AS_DEV_OK;
}

static uint64_t dev_capacity(void *ctx)
{
    const as_simdev *d = ctx;
    return d->p.limit ? d->p.limit : d->p.capacity;
}
static uint64_t dev_reserved(void *ctx)
{
    return ((as_simdev *)ctx)->c.reserved;
}

static const as_device_ops simdev_ops = {
    .abi = AS_DEVICE_ABI,
    .reserve = dev_reserve,
    .release = dev_release,
    .va_reserve = dev_va_reserve,
    .va_release = dev_va_release,
    .map = dev_map,
    .unmap = dev_unmap,
    .capacity = dev_capacity,
    .reserved = dev_reserved,
};

/* ---- public ---------------------------------------------------------------------------- */

void as_simdev_default_params(as_simdev_params *p)
{
    *p = (as_simdev_params){
        .capacity = AS_CAPACITY_NONE,
        .granularity = AS_DEV_GRANULARITY,
        /* H200, driver 580.159.04, CUDA 13.0, fitted on 190k calls of real replays
         * (replay/fit_replay_latency.py, replay/RESULTS.md "Calibration") */
        .reserve = {.fixed_ns = 69365, .ns_per_mib = 96.7},  /* cudaMalloc */
        .release = {.fixed_ns = 38740, .ns_per_mib = 496.3}, /* cudaFree */
        .map = {.fixed_ns = 14541, .ns_per_mib = 26368.4},   /* cuMemCreate+Map, 2 MiB pages */
        .unmap = {.fixed_ns = 32351, .ns_per_mib = 14730.8}, /* cuMemUnmap+Release */
        .placement = AS_PLACE_CHUNKED,
    };
}

void as_simdev_set_capacity(as_simdev_params *p, uint64_t capacity, unsigned policy_flags)
{
    if (policy_flags & AS_POLICY_F_LIMITS_ITSELF) {
        p->capacity = AS_CAPACITY_NONE;
        p->limit = capacity == AS_CAPACITY_NONE ? 0 : capacity;
    } else {
        p->capacity = capacity;
        p->limit = 0;
    }
}

int as_simdev_create(const as_simdev_params *p, as_simdev **out)
{
    as_simdev *d = calloc(1, sizeof *d);
    *out = NULL;
    if (!d)
        return AS_EDEVICE;
    if (p)
        d->p = *p;
    else
        as_simdev_default_params(&d->p);
    if (d->p.granularity == 0)
        d->p.granularity = AS_DEV_GRANULARITY;
    if (d->p.granularity & (d->p.granularity - 1)) { /* bad_size masks */
        free(d);
        return AS_EINVAL;
    }
    d->next_addr = d->p.placement == AS_PLACE_LOW_FIRST_FIT ? AS_SIMDEV_BASE : AS_SIMDEV_TOP;
    d->va_next = AS_SIMDEV_VA_BASE;
    d->live.rng = d->holes.rng = d->va_live.rng = d->va_holes.rng = 0x9e3779b9u;
    d->dev.ops = &simdev_ops;
    d->dev.ctx = d;
    int rc = d->p.placement == AS_PLACE_CHUNKED ? heap_init(&d->heap, d->p.granularity) : 0;
    if (rc) {
        as_simdev_destroy(d);
        return rc;
    }
    *out = d;
    return AS_DEV_OK;
}

void as_simdev_destroy(as_simdev *d)
{
    if (!d)
        return;
    tr_free(&d->live);
    tr_free(&d->holes);
    heap_free(&d->heap);
    tr_free(&d->va_live);
    tr_free(&d->va_holes);
    free(d);
}

const as_device *as_simdev_device(as_simdev *d)
{
    return &d->dev;
}

void as_simdev_set_log(as_simdev *d, as_dev_log_fn fn, void *user)
{
    d->log = fn;
    d->log_user = user;
}

void as_simdev_counters_get(const as_simdev *d, as_dev_counters *out)
{
    *out = d->c;
}
