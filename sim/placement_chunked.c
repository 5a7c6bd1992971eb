/*
 * placement_chunked.c - AS_PLACE_CHUNKED, the simulated device's default placement
 * (placement.h): the CUDA driver's cudaMalloc address heap as the H200 recordings show it
 * (simdev.h states the rules, replay/PLACEMENT.md measures them).
 * Invariant: a chunk's bitmap marks exactly the pages handed out (and those past its end),
 * except a large chunk's while they are a prefix [0, fill) (then its bitmap is not kept);
 * a chunk of more than 64 pages keeps the key of each run of free pages, sorted; every
 * chunk's bound is at least its longest free run; every leaf right of the last take's
 * slot holds at most rmax.
 */
#include "placement.h"

#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "grow.h"
#include "simdev.h"

typedef struct chunk {
    uint64_t base;
    uint32_t npages; /* length in pages */
    uint32_t slot;   /* leaf in the creation order; the free-list link while unused */
    uint32_t bound;  /* at least its longest free run, pages (see as_chunked_take) */
    uint32_t fill;   /* a large one while its pages in use are [0, fill): ext not kept */
    uint64_t inl;    /* the bitmap when npages <= 64 */
    uint64_t *ext;   /* otherwise, with: */
    uint64_t *runs;  /* its free runs' keys run_key(length, start), ascending */
    uint32_t nruns, rcap;
    uint32_t ecap; /* ext's words: ext and runs outlive the chunk, for the next in its entry */
} chunk;

typedef struct gap {
    uint64_t base, len;
} gap;

typedef struct lent {
    uint64_t addr;  /* 0: empty slot */
    uint32_t pages; /* its size, and LENT_VA for a cuMemAddressReserve range */
    uint32_t chunk;
} lent;

#define LENT_VA 0x80000000u /* pages stay under 2^26 (simdev.c bounds a range) */
#define FILL_KEPT UINT32_MAX /* chunk.fill of a large chunk that keeps its bitmap */

struct as_chunked {
    unsigned shift; /* log2 of the page (the granularity) */
    chunk *ch;
    uint32_t nch, chcap, ch_free;       /* ch_free: head of unused entries + 1 (0: none) */
    uint32_t *mx;                       /* max tree over the slots' bounds (mx_update) */
    uint32_t *slot_ch;                  /* chunk per slot, UINT32_MAX when dead */
    uint32_t scap, nslots, ndead, mtop; /* mtop: the root's index in mx */
    uint32_t last, rmax; /* the slot of the last take and a bound of the leaves right of it */
    lent *lt;
    uint32_t ltmask, nlent;
    unsigned ltshift; /* 64 - log2 of the table's size: a Fibonacci hash takes the top bits */
    gap *g;           /* the free space outside the chunks in [AS_SIMDEV_VA_LOW, AS_SIMDEV_TOP) */
    uint32_t ng, gcap;
};

/* AS_PLACE_CHUNKED (see simdev.h), built for one device call per event (nocache):
 * - each chunk keeps a bitmap of its pages (the granularity), 1 = in use, bits past its end
 *   set; its free ranges are the bitmap's runs of zeros, so neighbours merge by themselves;
 * - the chunks sit in creation order in the leaves of a 4-ary max tree holding a bound of
 *   each one's longest free run (lowered lazily, as_chunked_take): "the most recent chunk with
 *   room" is a search for the rightmost leaf with a run long enough, from the newest or,
 *   when none right of it can hold the range, from the last take's chunk (dead leaves
 *   hold 0; the order is compacted when it fills); inside that chunk, the
 *   smallest free run that holds the range, or for a reservation the lowest;
 * - in a chunk of one word (up to 64 pages: 128 MiB at 2 MiB) the runs are found with a
 *   few bit operations (word_fit). A larger chunk also keeps its free runs' keys
 *   run_key(length, start) in a sorted array: cudaMalloc's smallest run that holds the
 *   range, the lowest of equals, is a binary search, and a freed range's run grows in
 *   place; its longest run is the last key. A reservation's lowest run comes from the
 *   bitmap (the first that fits ends the walk). On the real traces most ranges land in
 *   such chunks, with tens of runs each (llama: 22 on average), where a walk over every
 *   run was the cost (a crafted chunk of 8,000 runs: 64,000 events took 1.5 s, now 0.02 s;
 *   a key that moves still shifts those between, a memmove of 8 bytes per run);
 * - a large chunk's bitmap is written only once it is needed: while the pages in use are
 *   a prefix [0, fill) (a new chunk's takes each cut the front of its one run, and a range
 *   at the prefix's end can come back), the run is [fill, npages) and neighbours are known
 *   without it. The first range that comes back from inside the prefix writes it
 *   (bits_make). A range of 115 GiB at 2 MiB pages has a bitmap of 7.4 KiB, which was
 *   zeroed, set and cleared again for a chunk that only ever held it (native_v1's ten of
 *   them: 221,000 of a run's 460,000 instructions and 18 page faults);
 * - the ranges handed out are in a hash table (address -> size, chunk), at most an eighth
 *   full: at a quarter, whether the slot after a probe was taken (linear probing's insert,
 *   find and delete each ask) followed no pattern often enough to be 8 % of the heap's
 *   mispredicted branches under nocache (streams2: 68,000 of 850,000);
 * - the free address space under the top, outside the chunks, is a sorted array of gaps
 *   (at first one, from AS_SIMDEV_VA_LOW to the top). Gaps lie between chunks, so there
 *   are at most one more than chunks; a cudaMalloc's new chunk takes the highest one that
 *   fits (a scan from the top), a reservation's the lowest (a scan from the bottom), done
 *   only when a chunk is made. Both kinds of range share the chunks (PLACEMENT.md
 *   section 9): only where a new chunk opens depends on the kind. */

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

/* In a one-word chunk (bitmap u), the start of the smallest free run of >= k pages, the
 * lowest of equals (best fit inside the chunk, PLACEMENT.md section 6c: cudaMalloc), or
 * with `first` the lowest run of >= k pages (first fit: a reservation, section 9), or
 * UINT32_MAX. */
static inline uint32_t word_fit(uint64_t u, uint32_t k, int first)
{
    uint32_t best = UINT32_MAX, blen = UINT32_MAX;
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
            if (blen == k || first)
                break;
        }
        p = e;
    }
    return best;
}

/* In a large chunk, the start of the lowest free run of >= k pages (one exists). */
static uint32_t low_run(const chunk *c, uint32_t k)
{
    for (uint32_t p = 0;;) {
        uint32_t s = next_bit(c->ext, c->npages, p, 0);
        uint32_t e = next_bit(c->ext, c->npages, s, 1);
        if (e - s >= k)
            return s;
        p = e;
    }
}

static uint32_t run_max(chunk *c)
{
    uint32_t best = 0;
    if (c->npages > 64) /* its longest run's key is the last */
        return c->nruns ? (uint32_t)(c->runs[c->nruns - 1] >> 32) : 0;
    for (uint64_t m = ~c->inl; m; m &= m >> 1)
        best++;
    return best;
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
    uint64_t *b = c->ext, lo = ~0ull << (p & 63), hi = ~0ull >> (63 - ((p + k - 1) & 63));
    uint32_t w = p >> 6, we = (p + k - 1) >> 6;
    if (w == we) /* mostly: the range is within one word */
        lo &= hi;
    b[w] = used ? b[w] | lo : b[w] & ~lo;
    if (w == we)
        return;
    for (uint32_t i = w + 1; i < we; i++)
        b[i] = used ? ~0ull : 0;
    b[we] = used ? b[we] | hi : b[we] & ~hi;
}

/* Large chunk c, its pages in use [0, c->fill), keeps its bitmap from now on: ext holds
 * them, and the bits past the end. */
static int bits_make(chunk *c)
{
    uint32_t words = (c->npages + 63) / 64, full = c->fill / 64;
    if (words > c->ecap) {
        free(c->ext);
        c->ecap = 0;
        if (!(c->ext = malloc(words * sizeof *c->ext)))
            return AS_EDEVICE;
        c->ecap = words;
    }
    memset(c->ext, 0xff, full * sizeof *c->ext);
    memset(c->ext + full, 0, (words - full) * sizeof *c->ext);
    if (c->fill & 63)
        c->ext[full] = ~0ull >> (64 - (c->fill & 63));
    if (c->npages & 63) /* the bits past the end are "in use", so no run crosses the end */
        c->ext[words - 1] |= ~0ull << (c->npages & 63);
    c->fill = FILL_KEPT;
    return AS_DEV_OK;
}

/* -- a large chunk's free runs, by length -- */

static inline uint64_t run_key(uint32_t len, uint32_t start)
{
    return (uint64_t)len << 32 | start;
}

/* Index of the first key >= want among the keys [lo, hi). Without a branch on the keys
 * (a conditional move per halving): which way a search goes follows no pattern, and its
 * mispredictions were a third of nocache's on the real traces. */
static inline uint32_t runs_lb(const chunk *c, uint32_t lo, uint32_t hi, uint64_t want)
{
    if (lo >= hi)
        return lo;
    const uint64_t *base = c->runs + lo;
    for (uint32_t n = hi - lo; n > 1;) {
        uint32_t half = n / 2;
        base = base[half] < want ? base + half : base;
        n -= half;
    }
    return (uint32_t)(base - c->runs) + (*base < want);
}

/* Room for one more key, so runs_add cannot fail. */
static int runs_room(chunk *c)
{
    if (c->nruns < c->rcap)
        return AS_DEV_OK;
    void *r = c->runs;
    if (as_grow32(&r, &c->rcap, (size_t)c->nruns + 1, sizeof *c->runs, 8))
        return AS_EDEVICE;
    c->runs = r;
    return AS_DEV_OK;
}

static void runs_add(chunk *c, uint64_t key)
{
    uint32_t i = runs_lb(c, 0, c->nruns, key);
    memmove(&c->runs[i + 1], &c->runs[i], (c->nruns - i) * sizeof *c->runs);
    c->runs[i] = key;
    c->nruns++;
}

static void runs_del_at(chunk *c, uint32_t i)
{
    memmove(&c->runs[i], &c->runs[i + 1], (c->nruns - i - 1) * sizeof *c->runs);
    c->nruns--;
}

/* The key at i becomes a smaller one: the keys between move up by one. */
static void runs_lower(chunk *c, uint32_t i, uint64_t key)
{
    if (!i || c->runs[i - 1] < key) { /* mostly: no key between, it stays */
        c->runs[i] = key;
        return;
    }
    uint32_t j = runs_lb(c, 0, i, key);
    memmove(&c->runs[j + 1], &c->runs[j], (i - j) * sizeof *c->runs);
    c->runs[j] = key;
}

/* The key at i becomes a larger one: the keys between move down by one. */
static void runs_raise(chunk *c, uint32_t i, uint64_t key)
{
    if (i + 1 == c->nruns || c->runs[i + 1] > key) {
        c->runs[i] = key;
        return;
    }
    uint32_t lo = runs_lb(c, i + 1, c->nruns, key);
    memmove(&c->runs[i], &c->runs[i + 1], (lo - i - 1) * sizeof *c->runs);
    c->runs[lo - 1] = key;
}

/* Where k pages go in large chunk c: its smallest run that holds them (the lowest of
 * equals), or for a reservation its lowest; *i is that run's key, *len its length. Or
 * UINT32_MAX. */
static uint32_t runs_fit(chunk *c, uint32_t k, int va, uint32_t *i, uint32_t *len)
{
    uint32_t p;
    if (!c->nruns || c->runs[c->nruns - 1] >> 32 < k)
        return UINT32_MAX;
    if (va && c->nruns > 1) { /* one run: the lowest is the smallest (and no bitmap kept) */
        p = low_run(c, k);
        *len = next_bit(c->ext, c->npages, p, 1) - p;
        *i = runs_lb(c, 0, c->nruns, run_key(*len, p));
    } else {
        *i = runs_lb(c, 0, c->nruns, run_key(k, 0));
        p = (uint32_t)c->runs[*i];
        *len = (uint32_t)(c->runs[*i] >> 32);
    }
    return p;
}

/* The range takes the first k pages of the run at key i (start p, len pages). */
static void runs_cut(chunk *c, uint32_t i, uint32_t p, uint32_t len, uint32_t k)
{
    if (len == k)
        runs_del_at(c, i);
    else
        runs_lower(c, i, run_key(len - k, p + k));
}

/* A range takes pages [p, p + k) of chunk c: for a large one the first k of its free run
 * at key i, of len pages (while its bitmap is not kept, the run [fill, npages)). */
static inline void chunk_take_at(chunk *c, uint32_t i, uint32_t p, uint32_t len, uint32_t k)
{
    if (c->npages > 64) {
        runs_cut(c, i, p, len, k);
        if (c->fill != FILL_KEPT) {
            c->fill = p + k;
            return;
        }
    }
    bits_set(c, p, k, 1);
}

/* Pages [p, p + k) of large chunk c are free again: the runs beside them join theirs.
 * Returns the run's length (the whole chunk: its keys no longer matter). */
static uint32_t runs_give(chunk *c, uint32_t p, uint32_t k)
{
    uint32_t s = (uint32_t)(prev_used(c->ext, p) + 1), e = next_bit(c->ext, c->npages, p + k, 1);
    if (e - s == c->npages)
        return e - s;
    if (s == p && e == p + k) { /* a run of its own */
        runs_add(c, run_key(k, p));
        return k;
    }
    /* a run beside it grows into the joined one (the one above goes if both are) */
    uint32_t i = s < p ? runs_lb(c, 0, c->nruns, run_key(p - s, s)) : UINT32_MAX;
    if (e > p + k) {
        uint32_t j = runs_lb(c, 0, c->nruns, run_key(e - p - k, p + k));
        if (i == UINT32_MAX)
            i = j;
        else {
            runs_del_at(c, j);
            i -= j < i;
        }
    }
    runs_raise(c, i, run_key(e - s, s));
    return e - s;
}

/* The prefix's last range, from page p, is free again in large chunk c (no bitmap kept):
 * its run is [p, npages), the one key. Returns the run's length, as runs_give. */
static uint32_t fill_give(chunk *c, uint32_t p)
{
    c->fill = p;
    c->runs[0] = run_key(c->npages - p, p);
    c->nruns = 1;
    return c->npages - p;
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

/* A leaf's new value, up to the root: a rise makes itself the maximum of every node above
 * that held less, a fall takes each node's maximum of its four again. Every level, with no
 * test of the values: stopping at the first node that did not change saved instructions,
 * but where that happened followed no pattern, and its exit was mispredicted (resnet: the
 * heap's calls 18 % slower). */
static void mx_update(as_chunked *h, uint32_t slot, uint32_t v)
{
    uint32_t *mx = h->mx, i = slot, off = 0, n = h->scap, old = mx[i];
    mx[i] = v;
    if (v > old) {
        for (; n > 1; off += n, n /= 4, i /= 4) {
            uint32_t *up = &mx[off + n + i / 4];
            *up = *up < v ? v : *up;
        }
        return;
    }
    for (; n > 1; off += n, n /= 4, i /= 4)
        mx[off + n + i / 4] = max4(&mx[off + (i & ~3u)]);
}

/* Which of the four nodes x[0..3] hold >= k, as bits 0..3. */
static inline unsigned ge4(const uint32_t *x, uint32_t k)
{
    return (unsigned)(x[0] >= k) | (unsigned)(x[1] >= k) << 1 | (unsigned)(x[2] >= k) << 2 |
           (unsigned)(x[3] >= k) << 3;
}

/* Rightmost slot at or left of `from` whose leaf holds >= k, or UINT32_MAX. The answer is
 * mostly `from` itself (as_chunked_take starts at the last take's slot) or near it, so the
 * search moves up only as far as it must, then down the rightmost branch that holds k: a
 * level is one test of four siblings together, with no branch on each (which of them holds
 * k follows no pattern, and a branch per node was most of the search's mispredictions). */
static uint32_t mx_rightmost(const as_chunked *h, uint32_t from, uint32_t k)
{
    const uint32_t *mx = h->mx;
    if (mx[from] >= k)
        return from;
    if (mx[h->mtop] < k)
        return UINT32_MAX;
    uint32_t i = from, off = 0, n = h->scap;
    unsigned m;
    while (!(m = ge4(&mx[off + (i & ~3u)], k) & ((1u << (i & 3)) - 1))) { /* left siblings */
        if (n == 4)
            return UINT32_MAX; /* the level under the root: nothing left of from */
        off += n; /* up: the parent, whose own subtree failed */
        n /= 4;
        i /= 4;
    }
    i = (i & ~3u) + 31 - (uint32_t)__builtin_clz(m);
    while (off) { /* down: the rightmost child that holds k */
        n *= 4;
        off -= n;
        i = 4 * i + 31 - (uint32_t)__builtin_clz(ge4(&mx[off + 4 * i], k));
    }
    return i;
}

/* Makes room for one more slot: drops the dead ones (keeping the order) or, past three
 * quarters live, grows: so a compaction frees at least a quarter of the slots, and
 * the tree keeps fewer levels to climb and update (moe: 256 leaves for its 125 live
 * chunks, where growing past half kept 1,024). */
static int order_grow(as_chunked *h)
{
    uint32_t live = h->nslots - h->ndead, cap = h->scap;
    if (4 * ((uint64_t)live + 1) > 3 * (uint64_t)cap)
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

static inline uint32_t lt_hash(const as_chunked *h, uint64_t addr)
{
    return (uint32_t)(((addr >> h->shift) * 0x9e3779b97f4a7c15ull) >> h->ltshift);
}

static lent *lt_find(as_chunked *h, uint64_t addr)
{
    for (uint32_t i = lt_hash(h, addr);; i = (i + 1) & h->ltmask) {
        if (h->lt[i].addr == addr)
            return &h->lt[i];
        if (!h->lt[i].addr)
            return NULL;
    }
}

static int lt_put(as_chunked *h, uint64_t addr, uint64_t size, int va, uint32_t c)
{
    if (8 * (h->nlent + 1) > h->ltmask + 1) {
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
    h->lt[i] = (lent){addr, (uint32_t)(size >> h->shift) | (va ? LENT_VA : 0), c};
    h->nlent++;
    return AS_DEV_OK;
}

/* Linear probing's deletion: pull later entries of the cluster back into the hole. */
static void lt_del(as_chunked *h, lent *e)
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

static int chunk_new(as_chunked *h, uint64_t base, uint64_t len, uint32_t *out)
{
    uint32_t c;
    if (h->nslots == h->scap && order_grow(h))
        return AS_EDEVICE;
    if (h->ch_free) {
        c = h->ch_free - 1;
        h->ch_free = h->ch[c].slot;
    } else {
        if (h->nch == h->chcap) {
            uint32_t n = h->chcap ? 2 * h->chcap : 8; /* the context's two, and a few */
            chunk *nc = realloc(h->ch, n * sizeof *nc);
            if (!nc)
                return AS_EDEVICE;
            memset(&nc[h->chcap], 0, (n - h->chcap) * sizeof *nc);
            h->ch = nc;
            h->chcap = n;
        }
        c = h->nch++;
    }
    chunk *k = &h->ch[c];
    uint32_t np = (uint32_t)(len >> h->shift);
    *k = (chunk){.base = base,
                 .npages = np,
                 .bound = np,
                 .ext = k->ext,
                 .runs = k->runs,
                 .rcap = k->rcap,
                 .ecap = k->ecap};
    if (np > 64 && runs_room(k)) {
        k->slot = h->ch_free;
        h->ch_free = c + 1;
        return AS_EDEVICE;
    }
    if (np > 64) { /* no page in use: no bitmap yet (bits_make) */
        k->fill = 0;
        k->runs[k->nruns++] = run_key(np, 0);
    } else if (np & 63) { /* the bits past the end are "in use", so no run crosses the end */
        k->inl = ~0ull << np;
    }
    k->slot = h->nslots++;
    h->slot_ch[k->slot] = c;
    mx_update(h, k->slot, np);
    h->last = k->slot; /* the newest: no leaf right of it */
    h->rmax = 0;
    *out = c;
    return AS_DEV_OK;
}

static void chunk_drop(as_chunked *h, uint32_t c)
{
    chunk *k = &h->ch[c];
    mx_update(h, k->slot, 0);
    h->slot_ch[k->slot] = UINT32_MAX;
    h->ndead++;
    k->slot = h->ch_free;
    h->ch_free = c + 1;
}

/* Index of the first gap with base >= a. */
static uint32_t gap_index(const as_chunked *h, uint64_t a)
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

static void gap_remove(as_chunked *h, uint32_t i)
{
    memmove(&h->g[i], &h->g[i + 1], (h->ng - i - 1) * sizeof *h->g);
    h->ng--;
}

/* A new cudaMalloc chunk of len bytes: the top of the highest gap that holds len + 32 MiB
 * - 4 KiB (an aligned mmap maps the size plus the alignment less a page; gaps are
 * multiples of 32 MiB here, so the gap must be larger than the chunk). The gap keeps at
 * least 32 MiB - 4 KiB: never empty. */
static int gap_take_top(as_chunked *h, uint64_t len, uint64_t *base)
{
    uint64_t need = len + AS_SIMDEV_CHUNK - 4096;
    for (uint32_t i = h->ng; i--;)
        if (h->g[i].len >= need) {
            h->g[i].len -= len;
            *base = h->g[i].base + h->g[i].len;
            return AS_DEV_OK;
        }
    return AS_DEV_OOM;
}

/* A new reservation chunk: the bottom of the lowest gap that holds it (PLACEMENT.md
 * section 9: from AS_SIMDEV_VA_LOW up, an exact fit taken). */
static int gap_take_low(as_chunked *h, uint64_t len, uint64_t *base)
{
    for (uint32_t i = 0; i < h->ng; i++)
        if (h->g[i].len >= len) {
            *base = h->g[i].base;
            h->g[i].base += len;
            h->g[i].len -= len;
            if (!h->g[i].len)
                gap_remove(h, i);
            return AS_DEV_OK;
        }
    return AS_DEV_OOM;
}

static int gap_give(as_chunked *h, uint64_t a, uint64_t len)
{
    uint32_t i = gap_index(h, a); /* gaps [0, i) lie below a, [i, ng) above */
    int below = i > 0 && h->g[i - 1].base + h->g[i - 1].len == a;
    int above = i < h->ng && h->g[i].base == a + len;
    if (above) {
        len += h->g[i].len;
        gap_remove(h, i);
    }
    if (below) {
        h->g[i - 1].len += len;
        return AS_DEV_OK;
    }
    if (h->ng == h->gcap) {
        void *g = h->g;
        if (as_grow32(&g, &h->gcap, (size_t)h->ng + 1, sizeof *h->g, 64))
            return AS_EDEVICE;
        h->g = g;
    }
    memmove(&h->g[i + 1], &h->g[i], (h->ng - i) * sizeof *h->g);
    h->g[i] = (gap){a, len};
    h->ng++;
    return AS_DEV_OK;
}

int as_chunked_take(as_chunked *h, uint64_t size, int va, uint64_t *addr)
{
    uint32_t k = (uint32_t)(size >> h->shift), c = 0, p = 0, s, ri = 0, rlen = 0;
    /* The most recent chunk with room. The order holds an upper bound of each chunk's
     * longest free run, lowered only when a search finds it too high: taking a range
     * costs no update, and a chunk that has no room for k is found once per k. The search
     * starts at the last take's slot when no leaf right of it can hold k (mostly: a chunk
     * fills range by range), else at the newest; a failed chunk's left. */
    uint32_t from = k > h->rmax ? h->last : h->nslots - 1;
    for (s = from; (s = mx_rightmost(h, s, k)) != UINT32_MAX;) {
        c = h->slot_ch[s];
        if ((p = h->ch[c].npages > 64 ? runs_fit(&h->ch[c], k, va, &ri, &rlen)
                                      : word_fit(h->ch[c].inl, k, va)) != UINT32_MAX)
            break;
        h->ch[c].bound = run_max(&h->ch[c]);
        mx_update(h, s, h->ch[c].bound);
    }
    if (s != UINT32_MAX && (s != h->last || from != h->last)) {
        h->last = s; /* the leaves right of it hold less than k */
        h->rmax = k - 1;
    }
    if (s == UINT32_MAX) {
        uint64_t len = (size + AS_SIMDEV_CHUNK - 1) / AS_SIMDEV_CHUNK * AS_SIMDEV_CHUNK;
        uint64_t base;
        int rc = va ? gap_take_low(h, len, &base) : gap_take_top(h, len, &base);
        if (rc)
            return rc;
        if (chunk_new(h, base, len, &c)) {
            gap_give(h, base, len);
            return AS_EDEVICE;
        }
        p = 0;
        rlen = h->ch[c].npages; /* a large one's key 0 */
    }
    chunk *ck = &h->ch[c];
    uint64_t a = ck->base + ((uint64_t)p << h->shift);
    if (lt_put(h, a, size, va, c))
        return AS_EDEVICE;
    chunk_take_at(ck, ri, p, rlen, k);
    *addr = a;
    return AS_DEV_OK;
}

int as_chunked_give(as_chunked *h, uint64_t addr, uint64_t size, int va)
{
    lent *e = lt_find(h, addr);
    if (!e || (uint64_t)(e->pages & ~LENT_VA) << h->shift != size || !(e->pages & LENT_VA) != !va)
        return AS_EINVAL; /* not handed out, another size, or the other kind */
    uint32_t c = e->chunk;
    chunk *ck = &h->ch[c];
    uint32_t p = (uint32_t)((addr - ck->base) >> h->shift), k = (uint32_t)(size >> h->shift);
    /* the freed run may be a key more; a range from inside the prefix needs the bitmap */
    if (ck->npages > 64 &&
        (runs_room(ck) || (ck->fill != FILL_KEPT && p + k != ck->fill && bits_make(ck))))
        return AS_EDEVICE;
    lt_del(h, e);
    uint32_t run; /* the free run the range joins: the bound rises to it if it is longer */
    if (ck->npages <= 64) {
        bits_set(ck, p, k, 0);
        uint64_t below = ck->inl & (p ? ~0ull >> (64 - p) : 0);
        uint64_t above = ck->inl & (p + k < 64 ? ~0ull << (p + k) : 0);
        run = (above ? (uint32_t)__builtin_ctzll(above) : 64) -
              (below ? 64 - (uint32_t)__builtin_clzll(below) : 0);
    } else if (ck->fill != FILL_KEPT) {
        run = fill_give(ck, p);
    } else {
        bits_set(ck, p, k, 0);
        run = runs_give(ck, p, k);
    }
    if (run == ck->npages) { /* empty: its address space goes back */
        uint64_t base = ck->base, len = (uint64_t)ck->npages << h->shift;
        chunk_drop(h, c);
        return gap_give(h, base, len);
    }
    if (run > ck->bound) {
        ck->bound = run;
        mx_update(h, ck->slot, run);
        if (ck->slot > h->last && run > h->rmax)
            h->rmax = run;
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

static int chunked_init(as_chunked *h, uint64_t granularity)
{
    /* pages are the granularity, which must divide 2 MiB (the context's layout) */
    if (granularity & (granularity - 1) || (2ull << 20) % granularity)
        return AS_EINVAL;
    h->shift = (unsigned)__builtin_ctzll(granularity);
    h->gcap = 64;
    h->g = malloc(h->gcap * sizeof *h->g);
    if (h->g)
        h->g[h->ng++] = (gap){AS_SIMDEV_VA_LOW, AS_SIMDEV_TOP - AS_SIMDEV_VA_LOW};
    h->scap = 64;
    h->mtop = (4 * h->scap - 1) / 3 - 1;
    h->mx = calloc(h->mtop + 1, sizeof *h->mx);
    h->slot_ch = malloc(h->scap * sizeof *h->slot_ch);
    /* 128 entries to start (lt_put doubles them at an eighth full: linear probing's
     * clusters stay short, their probes predictable), so that a run of up to 16 ranges
     * live never grows them: each run's device zeroes 2 KiB here, where 1,024 entries
     * took 16 KiB (4 pages to fault in) */
    h->ltmask = 127;
    h->ltshift = 64 - 7;
    h->lt = calloc(h->ltmask + 1, sizeof *h->lt);
    if (!h->mx || !h->slot_ch || !h->lt || !h->g)
        return AS_EDEVICE;
    for (size_t i = 0; i < sizeof ctx_chunks / sizeof ctx_chunks[0]; i++) {
        uint32_t c;
        if (chunk_new(h, AS_SIMDEV_TOP + ctx_chunks[i].off, AS_SIMDEV_CHUNK, &c))
            return AS_EDEVICE;
        chunk *ck = &h->ch[c];
        uint32_t used = (uint32_t)(ctx_chunks[i].used >> h->shift);
        chunk_take_at(ck, 0, 0, ck->npages, used); /* large: pages under 512 KiB */
        ck->bound = run_max(ck);
        mx_update(h, ck->slot, ck->bound);
    }
    return AS_DEV_OK;
}

int as_chunked_create(uint64_t granularity, as_chunked **out)
{
    as_chunked *h = calloc(1, sizeof *h);
    int rc = h ? chunked_init(h, granularity) : AS_EDEVICE;
    if (rc) {
        as_chunked_destroy(h);
        h = NULL;
    }
    *out = h;
    return rc;
}

void as_chunked_destroy(as_chunked *h)
{
    if (!h)
        return;
    for (uint32_t c = 0; c < h->nch; c++) {
        free(h->ch[c].ext);
        free(h->ch[c].runs);
    }
    free(h->ch);
    free(h->mx);
    free(h->slot_ch);
    free(h->lt);
    free(h->g);
    free(h);
}
