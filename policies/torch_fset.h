/*
 * torch_fset.h - the torch policy's block node and its free sets: PyTorch's
 * std::set<Block*> ordered by (stream, size, addr) (BlockComparatorSize), and the
 * per-stream address-ordered sets of unmapped expandable ranges. Only torch.c and
 * torch_fset.c include it.
 *
 * A pool's free set has one slot per stream seen (slots are stable; a hash finds a
 * stream's slot, and `ord` lists the slots by stream value for whole-set walks). A slot
 * cuts sizes into NBINS bins, 16 per power of two and monotone in size; two bitmap levels
 * find the next non-empty bin in O(1). A bin is an oset.h bin: a circular list sorted by
 * (size, addr) while it holds up to OSET_LIST_MAX blocks (real size mixes keep almost
 * every bin there: a lookup is a bitmap test, a look at the bin's last block and a short
 * scan), a treap beyond that (crowded bins stay O(log n)). The unmapped ranges of a
 * stream are an oset.h address treap. Bin heads live
 * in 64-bin chunks that a slot takes on first use, so a stream costs 200 bytes until its
 * blocks need more. Each slot keeps the size of its largest free block, and a max tree
 * over the slots gives the pool's largest free block in O(1) (statistics never walk the
 * streams).
 *
 * Invariant (checked by as_tfs_check): in-order traversal of the slots by stream, their
 * bins and each bin's list or treap is exactly the comparator's order; a bin's bitmap bit
 * is set iff it holds a block; counts, slot maxima and the tree match the blocks.
 */
#ifndef AS_POLICIES_TORCH_FSET_H
#define AS_POLICIES_TORCH_FSET_H

#include <stdint.h>

#include "policy.h"

enum { B_FREE = 0, B_ALLOC = 1, B_PENDING = 2 };
enum { IN_NONE = 0, IN_BLOCKS = 1, IN_UNMAPPED = 2 };

typedef struct blk {
    uint64_t addr, size;
    union {
        uint64_t gc_base; /* free: the pool's call count when it was last inserted */
        uint64_t id;      /* allocated or pending: the allocation id */
    };
    uint32_t prev, next; /* segment chain; 0 = none */
    uint32_t l, r;       /* in a set: list neighbours, or treap children */
    union {
        uint32_t up;   /* in a treap: the parent */
        uint32_t pidx; /* pending: index in the pending list */
    };
    uint32_t seg; /* segment index (its stream is the segment's) */
    uint32_t sx;  /* its stream's slot in its pool's free set */
    uint32_t gen; /* bumped on every hand-out: handles carry it */
    uint8_t state, mapped, in;
    uint8_t small, exp; /* copies of its segment's pool and expandable flags */
    uint16_t bin;       /* in the free set: the bin it is filed in */
} blk;                  /* 64 bytes */

_Static_assert(sizeof(blk) == 64, "a block node is one cache line");

#define NBINS 1024
#define NWORDS (NBINS / 64)

#define OSET_NODE blk
#define OSET(name) tfs_##name
#include "oset.h"

typedef struct bchunk {
    uint32_t head[64]; /* list: the smallest block; treap: the root; 0 = empty */
    uint16_t cnt[64];
    uint64_t treap; /* bit k: bin k is a treap */
} bchunk;

typedef struct sidx {
    uint64_t stream;
    uint64_t max;     /* size of the largest free block of the slot; 0 when none */
    uint64_t summary; /* bit w: words[w] != 0 */
    uint64_t words[NWORDS];
    uint32_t chunk[NWORDS]; /* chunk of bins 64w..64w+63; 0 until first used */
    uint32_t unmapped;      /* treap root: unmapped ranges of the stream, by address */
} sidx;

typedef struct fset {
    sidx *s; /* slots */
    uint32_t n, cap;
    uint32_t last;   /* slot of the last stream looked up */
    uint32_t *hslot; /* stream hash: slot + 1, 0 = empty; hcap entries */
    uint32_t hcap;
    uint32_t *ord, *pos; /* slots by stream value, and each slot's place in ord */
    uint32_t nord;       /* slots ord covers; the rest are new since the last sort */
    bchunk *c;           /* chunk 0 unused */
    uint32_t nc, ccap;
    uint64_t *tree; /* max over slots: tree[1] the root, leaves at tcap + slot */
    uint32_t tcap;
} fset;

/* ---- out of line (torch_fset.c) -------------------------------------------------------- */

void as_tfs_fini(fset *f);
/* The slot of `stream`, made if new; -1 on host OOM. */
int64_t as_tfs_slot(fset *f, uint64_t stream);
int64_t as_tfs_find_slow(fset *f, uint64_t stream);
/* A chunk for word w of slot k: 0 or AS_ENOMEM. */
int as_tfs_chunk(fset *f, uint32_t k, unsigned w);
void as_tfs_max_changed(const blk *b, fset *f, uint32_t k);
void as_tfs_max_changed_to(fset *f, uint32_t k, uint64_t m);
int as_tfs_insert_slow(blk *b, fset *f, uint32_t x);
/* as_tfs_replace through an erase and an insert (treap bins, a full list, a new chunk);
 * as_tfs_insert out of line, for paths that seldom run. */
int as_tfs_replace_slow(blk *b, fset *f, uint32_t old, uint64_t old_size, uint32_t nw);
int as_tfs_insert_cold(blk *b, fset *f, uint32_t x);
void as_tfs_erase_slow(blk *b, fset *f, uint32_t x, uint64_t size);
/* Sorts the slots by stream when new ones came since the last walk. */
void as_tfs_order(fset *f);
uint32_t as_tfs_first(const blk *b, const fset *f);
uint32_t as_tfs_next_all(const blk *b, const fset *f, uint32_t x);
uint32_t as_tfs_first_of(const blk *b, const fset *f, uint32_t k);
uint32_t as_tfs_last_of(const blk *b, const fset *f, uint32_t k);
uint32_t as_tfs_next_bin(const blk *b, const fset *f, uint32_t x);
uint32_t as_tfs_prev_bin(const blk *b, const fset *f, uint32_t x);
/* Structure, order, bitmaps, counts and maxima (nb: one past the last node; small: the
 * pool's flag, which each block must carry); adds the blocks it holds to *n. */
int as_tfs_check(const blk *b, const fset *f, uint32_t nb, uint8_t small, int64_t *n,
                 as_check_failure *out);

/* ---- inline fast paths ----------------------------------------------------------------- */

#define TFS_HOT OSET_HOT

/* A size's bin: 16 per power of two. Block sizes are multiples of 512 (kMinBlockSize),
 * so the 4 bits below the leading one always exist. */
TFS_HOT unsigned as_tfs_bin(uint64_t size)
{
    unsigned fl = 63u - (unsigned)__builtin_clzll(size);
    return fl * 16u + (unsigned)((size >> (fl - 4)) & 15u);
}

/* The slot of `stream`, or -1. */
static inline int64_t as_tfs_find(fset *f, uint64_t stream)
{
    if (f->n && f->s[f->last].stream == stream)
        return f->last;
    return as_tfs_find_slow(f, stream);
}

static inline bchunk *tfs_chunk(const fset *f, const sidx *ix, unsigned bin)
{
    return &f->c[ix->chunk[bin >> 6]];
}

/* The pool's max tree gets slot k's new maximum m (one slot: the root is its leaf). */
TFS_HOT void tfs_push_max(fset *f, uint32_t k, uint64_t m)
{
    f->s[k].max = m;
    if (f->tcap == 1)
        f->tree[1] = m;
    else
        as_tfs_max_changed_to(f, k, m);
}

/* Puts free block x into the set (its slot b[x].sx exists): 0 or AS_ENOMEM. A bin
 * chunk's first use is as_tfs_insert_slow's. */
TFS_HOT int as_tfs_insert(blk *b, fset *f, uint32_t x)
{
    uint32_t k = b[x].sx;
    sidx *ix = &f->s[k];
    unsigned bin = as_tfs_bin(b[x].size), w = bin >> 6, j = bin & 63;
    uint32_t ci = ix->chunk[w];
    if (__builtin_expect(!ci, 0))
        return as_tfs_insert_slow(b, f, x);
    bchunk *c = &f->c[ci];
    b[x].bin = (uint16_t)bin;
    if (__builtin_expect((c->treap >> j & 1) || c->cnt[j] == OSET_LIST_MAX, 0)) {
        tfs_bin_insert_treap(b, &c->head[j], c->treap >> j & 1, x);
        c->treap |= 1ull << j;
    } else {
        c->head[j] = tfs_list_insert(b, c->head[j], x);
    }
    c->cnt[j]++;
    ix->words[w] |= 1ull << j;
    ix->summary |= 1ull << w;
    if (b[x].size > ix->max)
        tfs_push_max(f, k, b[x].size);
    return 0;
}

/* Takes x out of the set; size: its size when it went in (in its bin b[x].bin). */
TFS_HOT void as_tfs_erase_at(blk *b, fset *f, uint32_t x, uint64_t size)
{
    uint32_t k = b[x].sx;
    sidx *ix = &f->s[k];
    unsigned bin = b[x].bin, w = bin >> 6, j = bin & 63;
    bchunk *c = &f->c[ix->chunk[w]];
    if (__builtin_expect(c->treap >> j & 1, 0)) {
        if (!tfs_bin_erase_treap(b, &c->head[j], c->cnt[j], x))
            c->treap &= ~(1ull << j);
    } else {
        c->head[j] = tfs_list_erase(b, c->head[j], x);
    }
    c->cnt[j]--;
    b[x].up = 0;
    if (!c->head[j]) {
        ix->words[w] &= ~(1ull << j);
        if (!ix->words[w])
            ix->summary &= ~(1ull << w);
    }
    if (size == ix->max)
        as_tfs_max_changed(b, f, k);
}

TFS_HOT void as_tfs_erase(blk *b, fset *f, uint32_t x)
{
    as_tfs_erase_at(b, f, x, b[x].size);
}

/* nw (free, not in the set, of old's stream) takes the place of old, which is filed
 * under old_size (a split's remainder, a merge's survivor; nw may be old itself, re-keyed
 * after a change of size or address): one unlink and one sorted insert, with the slot,
 * both bins and their chunks looked up once. Treap bins, a full list and a chunk's first
 * use go through erase and insert. 0 or AS_ENOMEM. */
TFS_HOT int as_tfs_replace(blk *b, fset *f, uint32_t old, uint64_t old_size, uint32_t nw)
{
    uint32_t k = b[old].sx;
    sidx *ix = &f->s[k];
    unsigned ob = b[old].bin, nb = as_tfs_bin(b[nw].size);
    unsigned ow = ob >> 6, oj = ob & 63, nwd = nb >> 6, nj = nb & 63;
    uint32_t nci = ix->chunk[nwd];
    bchunk *oc = &f->c[ix->chunk[ow]], *nc = &f->c[nci];
    if (__builtin_expect(!nci || ((oc->treap >> oj | nc->treap >> nj) & 1) ||
                             (ob != nb && nc->cnt[nj] == OSET_LIST_MAX),
                         0)) {
        return as_tfs_replace_slow(b, f, old, old_size, nw);
    }
    uint32_t h = tfs_list_erase(b, oc->head[oj], old);
    b[old].up = 0;
    if (ob != nb) {
        oc->head[oj] = h;
        oc->cnt[oj]--;
        if (!h) {
            ix->words[ow] &= ~(1ull << oj);
            if (!ix->words[ow])
                ix->summary &= ~(1ull << ow);
        }
        h = nc->head[nj];
        nc->cnt[nj]++;
        ix->words[nwd] |= 1ull << nj;
        ix->summary |= 1ull << nwd;
    }
    b[nw].bin = (uint16_t)nb;
    nc->head[nj] = tfs_list_insert(b, h, nw);
    if (b[nw].size > ix->max)
        tfs_push_max(f, k, b[nw].size);
    else if (old_size == ix->max && b[nw].size != old_size)
        as_tfs_max_changed(b, f, k);
    return 0;
}

/* First non-empty bin >= from of slot ix, or NBINS. */
static inline unsigned as_tfs_bin_next(const sidx *ix, unsigned from)
{
    if (from >= NBINS)
        return NBINS;
    unsigned w = from >> 6;
    uint64_t m = ix->words[w] & (~0ull << (from & 63));
    if (m)
        return (w << 6) | (unsigned)__builtin_ctzll(m);
    uint64_t sm = w + 1 < NWORDS ? ix->summary & (~0ull << (w + 1)) : 0;
    if (!sm)
        return NBINS;
    w = (unsigned)__builtin_ctzll(sm);
    return (w << 6) | (unsigned)__builtin_ctzll(ix->words[w]);
}

static inline uint32_t tfs_chunk_min(const blk *b, const bchunk *c, unsigned j)
{
    return tfs_bin_min(b, c->head[j], c->treap >> j & 1);
}

static inline uint32_t tfs_chunk_max(const blk *b, const bchunk *c, unsigned j)
{
    return tfs_bin_max(b, c->head[j], c->treap >> j & 1);
}

/* The smallest block of the stream with size >= size (lowest address among equals), or
 * 0: what std::set::lower_bound gives for (stream, size, null address). */
TFS_HOT uint32_t as_tfs_lower_bound(const blk *b, fset *f, uint64_t stream, uint64_t size)
{
    int64_t k = as_tfs_find(f, stream);
    if (k < 0)
        return 0;
    const sidx *ix = &f->s[k];
    unsigned bin = as_tfs_bin(size), j = bin & 63;
    if (ix->words[bin >> 6] >> j & 1) {
        const bchunk *c = tfs_chunk(f, ix, bin);
        uint32_t x = tfs_bin_lower_bound(b, c->head[j], c->treap >> j & 1, size);
        if (x)
            return x;
    }
    bin = as_tfs_bin_next(ix, bin + 1);
    return bin < NBINS ? tfs_chunk_min(b, tfs_chunk(f, ix, bin), bin & 63) : 0;
}

/* The next block of the same stream in (size, addr) order, or 0. */
TFS_HOT uint32_t as_tfs_next(const blk *b, const fset *f, uint32_t x)
{
    const sidx *ix = &f->s[b[x].sx];
    unsigned bin = b[x].bin, j = bin & 63;
    const bchunk *c = tfs_chunk(f, ix, bin);
    if (!(c->treap >> j & 1) && b[x].r != c->head[j])
        return b[x].r;
    return as_tfs_next_bin(b, f, x);
}

static inline uint32_t as_tfs_prev(const blk *b, const fset *f, uint32_t x)
{
    const sidx *ix = &f->s[b[x].sx];
    unsigned bin = b[x].bin, j = bin & 63;
    const bchunk *c = tfs_chunk(f, ix, bin);
    if (!(c->treap >> j & 1) && x != c->head[j])
        return b[x].l;
    return as_tfs_prev_bin(b, f, x);
}

/* The pool's largest free block's size, 0 when none. */
static inline uint64_t as_tfs_largest(const fset *f)
{
    return f->n ? f->tree[1] : 0;
}

#endif
