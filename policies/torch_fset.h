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
 * stream are an oset.h address treap. A bin is one 8-byte word pair (head, count with
 * the treap flag in its top bit); bins live in 64-bin chunks of 512 bytes that a slot
 * takes on first use, so a stream costs 256 bytes until its blocks need more. Each slot
 * keeps the size of its largest free block, and a max tree over the slots gives the pool's
 * largest free block in O(1) (statistics never walk the streams).
 *
 * Invariant (checked by as_tfs_check): in-order traversal of the slots by stream, their
 * bins and each bin's list or treap is exactly the comparator's order; a bin's bitmap bit
 * is set iff it holds a block; counts, treap flags, slot maxima and the tree match the
 * blocks.
 */
#ifndef AS_POLICIES_TORCH_FSET_H
#define AS_POLICIES_TORCH_FSET_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"

enum { B_FREE = 0, B_ALLOC = 1, B_PENDING = 2 }; /* torch_free tests the last two as one range */
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
_Static_assert(offsetof(blk, mapped) == offsetof(blk, state) + 1,
               "state and mapped are read as one 16-bit pair (torch.c, state_mapped)");

#define NBINS 1024
#define NWORDS (NBINS / 64)

/* A bin stays a list up to 64 blocks (a treap above, a list again at 32), as gmlake's:
 * with oset.h's 32 and 16 crowded bins of moe_like went back and forth between the two
 * (6,144 blocks moved into treaps in 297 k events). common.h's bins, included before in
 * torch.c, keep theirs: their functions are defined by then. */
#undef OSET_LIST_MAX
#undef OSET_LIST_BACK
#define OSET_LIST_MAX 64
#define OSET_LIST_BACK 32
#define OSET_NODE blk
#define OSET(name) tfs_##name
#include "oset.h"

/* A bin: its head (list: the smallest block; treap: the root; 0 = empty) and its count,
 * whose top bit says the bin is a treap, so that one load of one word decides the fast
 * path: a list with room has cnt < OSET_LIST_MAX. */
typedef struct tbin {
    uint32_t head;
    uint32_t cnt;
} tbin;

#define TFS_TREAP 0x80000000u

/* A chunk is 64 bins (512 bytes), bins 64w..64w+63 of one slot; ix->chunk[w] is the
 * index in f->bins of its first bin, so that a bin's address is one add from it. */
#define TFS_CHUNK 64

typedef struct sidx {
    uint64_t stream;
    uint64_t max;               /* size of the largest free block of the slot; 0 when none */
    uint64_t summary;           /* bit w set when words[w] != 0 (and maybe after it empties) */
    uint64_t words[NWORDS + 1]; /* words[NWORDS] is always 0: the lookup's "none" */
    uint32_t chunk[NWORDS];     /* f->bins index of bin 64w's chunk; 0 until first used */
    uint32_t unmapped;          /* treap root: unmapped ranges of the stream, by address */
    uint32_t pad[7];            /* 256 bytes: a slot's address is a shift of its index */
} sidx;

_Static_assert(sizeof(sidx) == 256, "a slot is 256 bytes");

typedef struct fset {
    sidx *s; /* slots */
    uint32_t n, cap;
    uint32_t last;   /* slot of the last stream looked up */
    uint32_t *hslot; /* stream hash: slot + 1, 0 = empty; hcap entries */
    uint32_t hcap;
    uint32_t *ord, *pos; /* slots by stream value, and each slot's place in ord */
    uint32_t nord;       /* slots ord covers; the rest are new since the last sort */
    tbin *bins;          /* the chunks, TFS_CHUNK bins each; chunk 0 unused */
    uint32_t nc, ccap;   /* chunks */
    uint64_t *tree;      /* max over slots: tree[1] the root, leaves at tcap + slot */
    uint32_t tcap;
    uint64_t steps; /* slots probed or visited out of line (hash, max tree, whole-set order):
                       the work that must not grow with the streams (as_torch_fset_steps) */
} fset;

/* ---- out of line (torch_fset.c) -------------------------------------------------------- */

/* torch.c's pools' fset.steps summed, for tests (test_torch many_streams): st is a torch
 * policy state. */
uint64_t as_torch_fset_steps(const void *st);

void as_tfs_fini(fset *f);
/* The slot of `stream`, made if new; -1 on host OOM. */
int64_t as_tfs_slot(fset *f, uint64_t stream);
int64_t as_tfs_find_slow(fset *f, uint64_t stream);
/* A chunk for word w of slot k: 0 or AS_ENOMEM. */
int as_tfs_chunk(fset *f, uint32_t k, unsigned w);
void as_tfs_max_changed(const blk *b, fset *f, uint32_t k);
/* as_tfs_max_changed, then 0: a tail call for a caller that returns 0 after it. */
int as_tfs_max_fell(const blk *b, fset *f, uint32_t k);
void as_tfs_max_changed_to(fset *f, uint32_t k, uint64_t m);
int as_tfs_insert_slow(blk *b, fset *f, uint32_t x);
/* as_tfs_regrow and as_tfs_split_move through an erase and an insert (treap bins, a full
 * list, a new chunk);
 * as_tfs_insert out of line, for paths that seldom run. */
int as_tfs_replace_slow(blk *b, fset *f, uint32_t old, uint64_t old_size, uint32_t nw);
int as_tfs_insert_cold(blk *b, fset *f, uint32_t x);
void as_tfs_erase_slow(blk *b, fset *f, uint32_t x, uint64_t size);
/* Sorts the slots by stream when new ones came since the last walk. */
void as_tfs_order(fset *f);
uint32_t as_tfs_first(const blk *b, const fset *f);
uint32_t as_tfs_next_all(const blk *b, const fset *f, uint32_t x);
uint32_t as_tfs_first_of(const blk *b, const fset *f, uint32_t k);
/* The same walk over the blocks of size >= size only (x among them): the comparator's
 * order with the smaller blocks left out, each slot entered at its lower bound. */
uint32_t as_tfs_first_from(const blk *b, const fset *f, uint64_t size);
uint32_t as_tfs_next_from(const blk *b, const fset *f, uint32_t x, uint64_t size);
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
    /* fl * 16 + the 4 bits below the leading one, which with it make 16..31 */
    unsigned fl = 63u ^ (unsigned)__builtin_clzll(size);
    return (unsigned)(size >> (fl - 4)) + fl * 16u - 16u;
}

/* The slot of `stream`, or -1. */
static inline int64_t as_tfs_find(fset *f, uint64_t stream)
{
    if (f->n && f->s[f->last].stream == stream)
        return f->last;
    return as_tfs_find_slow(f, stream);
}

/* Bin `bin` of slot ix (its chunk exists). */
static inline tbin *tfs_binp(const fset *f, const sidx *ix, unsigned bin)
{
    return &f->bins[ix->chunk[bin >> 6] + (bin & 63)];
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

TFS_HOT void tfs_mark(sidx *ix, unsigned bin)
{
    ix->words[bin >> 6] |= 1ull << (bin & 63);
    ix->summary |= 1ull << (bin >> 6);
}

TFS_HOT void tfs_unmark(sidx *ix, unsigned bin)
{
    uint64_t w = ix->words[bin >> 6] & ~(1ull << (bin & 63));
    ix->words[bin >> 6] = w;
    if (!w)
        ix->summary &= ~(1ull << (bin >> 6));
}

/* Is the key (xs, xa) below block y's in (size, addr) order? One 128-bit compare (a
 * compare and a subtract with borrow), so one branch where the caller tests it. */
TFS_HOT int tfs_key_below(const blk *b, uint64_t xs, uint64_t xa, uint32_t y)
{
    unsigned __int128 k = (unsigned __int128)xs << 64 | xa;
    return k < ((unsigned __int128)b[y].size << 64 | b[y].addr);
}

/* x (size xs, address xa) into list bin tb (no treap, fewer than OSET_LIST_MAX blocks)
 * at `bin` of slot ix. Real size mixes keep most bins empty or nearly: an empty bin is
 * x alone, else x goes last unless it is below the tail, and only then scans. */
TFS_HOT void tfs_list_put(blk *b, sidx *ix, tbin *tb, unsigned bin, uint32_t x, uint64_t xs,
                          uint64_t xa)
{
    uint32_t h = tb->head;
    tb->cnt++;
    b[x].bin = (uint16_t)bin;
    tfs_mark(ix, bin);
    if (!h) {
        tb->head = x;
        b[x].l = x;
        b[x].r = x;
        return;
    }
    uint32_t before = h; /* the first block above x; the head again when x goes last */
    if (tfs_key_below(b, xs, xa, b[h].l)) {
        while (!tfs_key_below(b, xs, xa, before))
            before = b[before].r;
        if (before == h)
            tb->head = x;
    }
    uint32_t p = b[before].l;
    b[x].l = p;
    b[x].r = before;
    b[p].r = x;
    b[before].l = x;
}

/* x out of list bin tb (no treap) at `bin` of slot ix; without branches on whether the
 * bin empties (x alone is its own neighbours: the relinking stores are then x's own). */
TFS_HOT void tfs_list_take(blk *b, sidx *ix, tbin *tb, unsigned bin, uint32_t x)
{
    uint32_t l = b[x].l, r = b[x].r;
    tb->cnt--;
    b[l].r = r;
    b[r].l = l;
    uint32_t h = tb->head;
    uint32_t alone = r == x;
    tb->head = h == x ? (alone ? 0 : r) : h;
    ix->words[bin >> 6] &= ~((uint64_t)alone << (bin & 63)); /* the summary bit stays */
}

/* Puts free block x into the set (its slot b[x].sx exists): 0 or AS_ENOMEM. A bin
 * chunk's first use, a full list and a treap are as_tfs_insert_slow's. */
TFS_HOT int as_tfs_insert(blk *b, fset *f, uint32_t x)
{
    uint32_t k = b[x].sx;
    sidx *ix = &f->s[k];
    uint64_t size = b[x].size;
    unsigned bin = as_tfs_bin(size);
    uint32_t ci = ix->chunk[bin >> 6];
    if (__builtin_expect(!ci, 0)) /* before a pool's first chunk f->bins is NULL */
        return as_tfs_insert_slow(b, f, x);
    tbin *tb = &f->bins[ci + (bin & 63)];
    if (__builtin_expect(tb->cnt >= OSET_LIST_MAX, 0))
        return as_tfs_insert_slow(b, f, x);
    tfs_list_put(b, ix, tb, bin, x, size, b[x].addr);
    if (size > ix->max)
        tfs_push_max(f, k, size);
    return 0;
}

/* Takes x out of bin tb of its slot ix, filed at `bin`. */
TFS_HOT void tfs_bin_take(blk *b, sidx *ix, tbin *tb, unsigned bin, uint32_t x)
{
    uint32_t cnt = tb->cnt;
    if (__builtin_expect(cnt & TFS_TREAP, 0)) {
        cnt &= ~TFS_TREAP;
        if (tfs_bin_erase_treap(b, &tb->head, cnt, x))
            cnt |= TFS_TREAP;
        tb->cnt = cnt - 1;
        b[x].up = 0;
        if (!tb->head)
            tfs_unmark(ix, bin);
        return;
    }
    tfs_list_take(b, ix, tb, bin, x);
}

/* Takes x out of the set; size: its size when it went in (in its bin b[x].bin). */
TFS_HOT void as_tfs_erase_at(blk *b, fset *f, uint32_t x, uint64_t size)
{
    uint32_t k = b[x].sx;
    sidx *ix = &f->s[k];
    unsigned bin = b[x].bin;
    tfs_bin_take(b, ix, tfs_binp(f, ix, bin), bin, x);
    if (size == ix->max)
        as_tfs_max_changed(b, f, k);
}

TFS_HOT void as_tfs_erase(blk *b, fset *f, uint32_t x)
{
    as_tfs_erase_at(b, f, x, b[x].size);
}

/* A merge's survivor nw (free, not in the set, of old's stream: old itself re-keyed
 * after it grew, or its lower neighbour) takes the place of old, which is filed under
 * old_size and is smaller than nw: one unlink and one sorted insert, with the slot, both
 * bins and their chunks looked up once, and the slot's maximum can only rise. Treap
 * bins, a full list and a chunk's first use go through erase and insert. 0 or
 * AS_ENOMEM. */
TFS_HOT int as_tfs_regrow(blk *b, fset *f, uint32_t old, uint64_t old_size, uint32_t nw)
{
    uint32_t k = b[old].sx;
    sidx *ix = &f->s[k];
    uint64_t size = b[nw].size;
    unsigned ob = b[old].bin, nb = as_tfs_bin(size);
    tbin *c = f->bins;
    uint32_t nci = ix->chunk[nb >> 6];
    tbin *ot = &c[ix->chunk[ob >> 6] + (ob & 63)], *nt = &c[nci + (nb & 63)];
    if (__builtin_expect(!nci || ((ot->cnt | nt->cnt) & TFS_TREAP) || nt->cnt >= OSET_LIST_MAX, 0))
        return as_tfs_replace_slow(b, f, old, old_size, nw);
    tfs_list_take(b, ix, ot, ob, old);
    tfs_list_put(b, ix, nt, nb, nw, size, b[nw].addr);
    if (size > ix->max)
        tfs_push_max(f, k, size);
    return 0;
}

/* First non-empty bin >= from of slot ix, or NBINS. The summary's bits are a superset
 * (a word that empties keeps its bit until a lookup passes it): empty words are skipped,
 * and their bits cleared in *clear when the caller may write (the lookup), else NULL. */
TFS_HOT unsigned tfs_bin_scan(const sidx *ix, unsigned from, uint64_t *clear)
{
    if (from >= NBINS)
        return NBINS;
    unsigned w = from >> 6;
    uint64_t m = ix->words[w] & (~0ull << (from & 63));
    if (m)
        return (w << 6) | (unsigned)__builtin_ctzll(m);
    for (uint64_t sm = w + 1 < NWORDS ? ix->summary & (~0ull << (w + 1)) : 0; sm; sm &= sm - 1) {
        w = (unsigned)__builtin_ctzll(sm);
        if (__builtin_expect(ix->words[w] != 0, 1))
            return (w << 6) | (unsigned)__builtin_ctzll(ix->words[w]);
        if (clear)
            *clear &= ~(1ull << w);
    }
    return NBINS;
}

static inline unsigned as_tfs_bin_next(const sidx *ix, unsigned from)
{
    return tfs_bin_scan(ix, from, NULL);
}

TFS_HOT unsigned tfs_bin_next_clean(sidx *ix, unsigned from)
{
    return tfs_bin_scan(ix, from, &ix->summary);
}

static inline uint32_t tfs_tbin_min(const blk *b, const tbin *tb)
{
    return tfs_bin_min(b, tb->head, (tb->cnt & TFS_TREAP) != 0);
}

static inline uint32_t tfs_tbin_max(const blk *b, const tbin *tb)
{
    return tfs_bin_max(b, tb->head, (tb->cnt & TFS_TREAP) != 0);
}

/* The smallest block of slot k with size >= size (lowest address among equals), or 0:
 * what std::set::lower_bound gives for (stream, size, null address). */
TFS_HOT uint32_t as_tfs_lower_bound_in(const blk *b, const fset *f, uint32_t k, uint64_t size)
{
    const sidx *ix = &f->s[k];
    unsigned bin = as_tfs_bin(size);
    if (ix->words[bin >> 6] >> (bin & 63) & 1) {
        const tbin *tb = tfs_binp(f, ix, bin);
        uint32_t x = tfs_bin_lower_bound(b, tb->head, (tb->cnt & TFS_TREAP) != 0, size);
        if (x)
            return x;
    }
    bin = as_tfs_bin_next(ix, bin + 1);
    return bin < NBINS ? tfs_tbin_min(b, tfs_binp(f, ix, bin)) : 0;
}

/* as_tfs_lower_bound_at's rare cases: the first non-empty bin at or above the size's
 * (`at`, found by the caller) is a treap, or it is the size's own and its smallest block
 * is too small; a stale summary bit (m2 == 0 with a non-empty word further up). */
static __attribute__((noinline)) uint32_t
tfs_lower_bound_rest(const blk *b, fset *f, sidx *ix, unsigned bin, uint64_t size, tbin **tbp)
{
    unsigned at = tfs_bin_next_clean(ix, bin);
    if (at == bin) {
        tbin *tb = tfs_binp(f, ix, bin);
        uint32_t x = tfs_bin_lower_bound(b, tb->head, (tb->cnt & TFS_TREAP) != 0, size);
        if (x) {
            *tbp = tb;
            return x;
        }
        at = tfs_bin_next_clean(ix, bin + 1);
    }
    if (at >= NBINS)
        return 0;
    tbin *tb = tfs_binp(f, ix, at);
    *tbp = tb;
    return tfs_tbin_min(b, tb);
}

/* tfs_lower_bound_fast's case of a list bin whose smallest block h is too small for
 * `size`: the bin is then the size's own (`at`; bins are monotone in size, so a block of
 * any bin above fits). The first block of the bin that fits when its largest does (the
 * list is sorted by size, then address: the lowest address of the least size, lower_bound's
 * answer), else the smallest block of the next non-empty bin when that bin is a list (with
 * *tbp and *atp), else 0 (a treap, none: tfs_lower_bound_rest's cases). Reads the set only.
 * Out of line, as it is seldom: 0.7 % of the lookups on streams2_default, 10.6 % on
 * resnet_varbatch, which went through the full copy of the allocation and a second
 * lookup before. */
static __attribute__((noinline)) uint32_t tfs_lower_bound_list(const blk *b, const fset *f,
                                                               const sidx *ix, uint32_t h,
                                                               unsigned at, uint64_t size,
                                                               tbin **tbp, unsigned *atp)
{
    uint32_t x = tfs_bin_lower_bound(b, h, 0, size);
    if (x)
        return x;
    unsigned nb = tfs_bin_scan(ix, at + 1, NULL);
    if (nb >= NBINS)
        return 0;
    tbin *tb = tfs_binp(f, ix, nb);
    if (tb->cnt & TFS_TREAP)
        return 0;
    *tbp = tb;
    *atp = nb;
    return tb->head;
}

/* as_tfs_lower_bound_at's common case: the first non-empty bin at or above the size's
 * comes from the size's word, else from the first word that the summary says is non-empty
 * (words[NWORDS] stands for none), and its smallest block fits whenever that bin is above
 * the size's and mostly when it is the size's own (else tfs_lower_bound_list). The block
 * and its bin (*tbp, *atp), or 0 when the common case does not decide (nothing found, a
 * stale summary bit, a treap bin, a bin too small whose next is a treap):
 * tfs_lower_bound_rest's cases. Reads the set only. */
TFS_HOT uint32_t tfs_lower_bound_fast(const blk *b, const fset *f, const sidx *ix, unsigned bin,
                                      uint64_t size, tbin **tbp, unsigned *atp)
{
    unsigned w = bin >> 6;
    uint64_t m = ix->words[w] & (~0ull << (bin & 63));
    unsigned up = (unsigned)__builtin_ctzll((ix->summary & (~1ull << w)) | 1ull << NWORDS);
    unsigned w2 = m ? w : up;
    uint64_t m2 = m ? m : ix->words[up];
    if (__builtin_expect(!m2, 0)) /* nothing, or a stale summary bit */
        return 0;
    unsigned at = w2 << 6 | (unsigned)__builtin_ctzll(m2);
    tbin *tb = tfs_binp(f, ix, at);
    uint32_t x = tb->head;
    if (__builtin_expect(tb->cnt & TFS_TREAP, 0))
        return 0;
    *tbp = tb;
    *atp = at;
    if (__builtin_expect(b[x].size < size, 0))
        return tfs_lower_bound_list(b, f, ix, x, at, size, tbp, atp);
    return x;
}

/* as_tfs_lower_bound_in, with the bin the block is filed in (*tbp) when there is one. */
TFS_HOT uint32_t as_tfs_lower_bound_at(const blk *b, fset *f, uint32_t k, uint64_t size, tbin **tbp)
{
    sidx *ix = &f->s[k];
    unsigned bin = as_tfs_bin(size), at;
    uint32_t x = tfs_lower_bound_fast(b, f, ix, bin, size, tbp, &at);
    return x ? x : tfs_lower_bound_rest(b, f, ix, bin, size, tbp);
}

/* Takes x, filed under `size` in bin tb of slot k, out of the set (a block handed out
 * whole). */
TFS_HOT void as_tfs_take(blk *b, fset *f, uint32_t k, tbin *tb, uint32_t x, uint64_t size)
{
    sidx *ix = &f->s[k];
    tfs_bin_take(b, ix, tb, b[x].bin, x);
    if (size == ix->max)
        as_tfs_max_changed(b, f, k);
}

/* The bin that a split's remainder of nsize bytes goes into, in slot ix, when the common
 * case applies: its chunk exists and it is a list with room (the block's own bin must be
 * a list too: the caller's test). NULL otherwise (as_tfs_replace_slow's cases). */
TFS_HOT tbin *tfs_split_bin(const fset *f, const sidx *ix, uint64_t nsize, unsigned *nbp)
{
    unsigned nb = as_tfs_bin(nsize);
    uint32_t nci = ix->chunk[nb >> 6];
    tbin *nt = &f->bins[nci + (nb & 63)];
    if (__builtin_expect(!nci || nt->cnt >= OSET_LIST_MAX, 0)) /* a treap's count is above */
        return NULL;
    *nbp = nb;
    return nt;
}

/* A split's remainder nw (smaller than old: nsize bytes at naddr) takes the place of old,
 * filed under old_size in bin ot of slot k: old leaves its bin, nw goes into its own. 0 or
 * AS_ENOMEM. */
TFS_HOT int as_tfs_split_move(blk *b, fset *f, uint32_t k, tbin *ot, uint32_t old,
                              uint64_t old_size, uint32_t nw, uint64_t nsize, uint64_t naddr)
{
    sidx *ix = &f->s[k];
    unsigned nb;
    tbin *nt = ot->cnt & TFS_TREAP ? NULL : tfs_split_bin(f, ix, nsize, &nb);
    if (!nt)
        return as_tfs_replace_slow(b, f, old, old_size, nw);
    tfs_list_take(b, ix, ot, b[old].bin, old);
    tfs_list_put(b, ix, nt, nb, nw, nsize, naddr);
    if (old_size == ix->max) /* nw is smaller: the maximum can only fall */
        as_tfs_max_changed(b, f, k);
    return 0;
}

/* The same for a stream's key (0 when the stream has no slot). */
TFS_HOT uint32_t as_tfs_lower_bound(const blk *b, fset *f, uint64_t stream, uint64_t size)
{
    int64_t k = as_tfs_find(f, stream);
    return k < 0 ? 0 : as_tfs_lower_bound_in(b, f, (uint32_t)k, size);
}

/* The next block of the same stream in (size, addr) order, or 0. */
TFS_HOT uint32_t as_tfs_next(const blk *b, const fset *f, uint32_t x)
{
    const tbin *tb = tfs_binp(f, &f->s[b[x].sx], b[x].bin);
    if (!(tb->cnt & TFS_TREAP) && b[x].r != tb->head)
        return b[x].r;
    return as_tfs_next_bin(b, f, x);
}

static inline uint32_t as_tfs_prev(const blk *b, const fset *f, uint32_t x)
{
    const tbin *tb = tfs_binp(f, &f->s[b[x].sx], b[x].bin);
    if (!(tb->cnt & TFS_TREAP) && x != tb->head)
        return b[x].l;
    return as_tfs_prev_bin(b, f, x);
}

/* The pool's largest free block's size, 0 when none. */
static inline uint64_t as_tfs_largest(const fset *f)
{
    return f->n ? f->tree[1] : 0;
}

#endif
