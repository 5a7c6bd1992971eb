/*
 * common.h - the machinery the split/coalesce policies share, written once: a block
 * arena with generation-checked handles, the segment table (device reservations), the
 * physical block chains with split and merge, byte accounting, the free-block indexes (a
 * binned (size, addr) index for best fit over oset.h's bins, an address-ordered B+ tree for
 * first fit, pairing heaps by size), the segment-size, maxsplit and release-on-OOM rules,
 * and generic check() and walk().
 *
 * Invariant (checked by as_heap_check): the blocks of each live segment tile it exactly,
 * in address order along next/prev; every free block is in the policy's free index and no
 * other block is; allocated + free_bytes == reserved; a segment is on the empty list iff it
 * has no allocated or pending block. Index 0 of the arenas is the nil sentinel; the block
 * sentinel's prev and next are scratch, written without a test at a chain's end and never
 * read, and its state is AS_BLK_DEAD, never free, so that a test of a neighbour for a free
 * block needs no test for the chain's end.
 *
 * Not part of the policy contract: only policies/ includes this.
 */
#ifndef AS_POLICIES_COMMON_H
#define AS_POLICIES_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "knobs.h"
#include "policy.h"

#define AS_NIL 0u
#define AS_BLK_DEAD 0xffu /* state of a recycled block node */

typedef struct as_blk {
    uint64_t addr, size;
    union {
        struct {           /* while free: the index's links */
            uint32_t l, r; /* bin list neighbours or treap children (oset.h) */
            uint32_t up;   /* treap parent, or B+ tree leaf */
            union {
                /* beside l and r, a pairing heap (as_pheap): left sibling, or the parent
                 * for a first child */
                uint32_t hprev;
                uint32_t bslot; /* in a B+ tree: its leaf slot when last placed (a hint) */
            };
            uint32_t hnext;  /* the pairing heap's right sibling */
            uint32_t hchild; /* the pairing heap's leftmost child */
        };
        struct { /* while allocated or pending: for walk() */
            uint64_t id, stream;
        };
    };
    uint32_t prev, next; /* physical neighbours inside the segment, AS_NIL at the ends */
    uint32_t seg;
    uint32_t gen;    /* bumped at every hand-out; half of the handle */
    uint8_t state;   /* as_block_state, or AS_BLK_DEAD */
    uint8_t indexed; /* 1 while in the free index */
    uint16_t bin;    /* while in an as_bins index: its bin, fl << AS_BINS_SL | sl */
} as_blk;            /* 64 bytes: one cache line when the arena is aligned */

typedef struct as_seg {
    uint64_t addr, size;
    uint32_t head;         /* lowest-address block; AS_NIL when the slot is unused */
    uint32_t nused;        /* allocated + pending blocks */
    uint32_t eprev, enext; /* the list of segments with nused == 0 */
    uint8_t in_empty;
} as_seg;

typedef struct as_heap as_heap;

/* The policy's free index. The heap calls insert when a block becomes free (or a free
 * block changes size) and remove before it stops being free or is resized. */
typedef struct as_index_ops {
    void (*insert)(as_heap *h, uint32_t b);
    void (*remove)(as_heap *h, uint32_t b);
    /* Optional, together, for indexes that can often skip a remove + insert (they must then
     * give the same answers as remove + insert would):
     * replace: nw (a free block not indexed, a split's tail) takes the place of old
     * (indexed), which leaves the index; nw lies right above old, so in address order it
     * orders exactly where old did (no other free block lies between them);
     * resized: b's size grew from old_size by a merge, with b still indexed (its address
     * may have moved down over a merged predecessor: no other free block lies between its
     * old and new address). old_size is the size the block had when it was indexed (old's
     * own size may have changed already). */
    void (*replace)(as_heap *h, uint32_t old, uint32_t nw, uint64_t old_size);
    void (*resized)(as_heap *h, uint32_t b, uint64_t old_size);
} as_index_ops;

struct as_heap {
    const as_device *dev;
    const as_index_ops *ix; /* NULL: free blocks are not indexed (nocache) */
    as_blk *b;
    uint32_t nb, cap_b, free_b; /* used slots (incl. nil), capacity, recycled list */
    as_seg *s;
    uint32_t ns, cap_s, free_s;
    uint32_t nsegs; /* live segments */
    uint32_t empty; /* head of the empty-segment list */
    uint64_t allocated, reserved, free_bytes;
    uint64_t nfree; /* free blocks */
    uint64_t dev_reserves, dev_releases, retries;
};

/* ---- the heap ------------------------------------------------------------------------ */

int as_heap_init(as_heap *h, const as_device *dev, const as_index_ops *ix);
/* Releases every live segment through the device, then the host memory. */
void as_heap_fini(as_heap *h);

/* Reserves a segment of `size` (a granularity multiple) and makes one free, indexed block
 * spanning it. 0, AS_POLICY_OOM, AS_ENOMEM or AS_EDEVICE. */
int as_heap_grow(as_heap *h, uint64_t size, uint32_t *blk);
/* The per-event functions (take, lookup, free, split, merge_next, index, unindex) are
 * written once, inline, in common_hot.h; the ones here go through h->ix, and a policy's
 * hot path calls as_heap_take_ix / as_heap_free_ix with its own const ops instead, which
 * inlines its index into it.
 * Hands out the free block b for req: takes it out of the index, splits off the tail
 * beyond `size` as a new free block when `split` (and size < b's size), and fills out. */
int as_heap_take(as_heap *h, uint32_t b, uint64_t size, int split, const as_request *req,
                 as_block *out);
/* The block behind a handle when it is allocated or pending, else AS_NIL. */
uint32_t as_heap_lookup(const as_heap *h, uint64_t handle);
/* Frees a handle per the contract's flags: AS_FREE_PENDING marks it pending (kept out of
 * reuse); otherwise it becomes free, merged with free neighbours when `coalesce`, and
 * indexed. *blk gets the resulting free block (AS_NIL for a pending mark). */
int as_heap_free(as_heap *h, uint64_t handle, unsigned flags, int coalesce, uint32_t *blk);
/* Gives an empty segment back to the device (its free blocks leave the index). */
int as_heap_release_seg(as_heap *h, uint32_t seg);
/* Gives back every empty segment; *bytes (may be NULL) gets the total released. */
int as_heap_release_empty(as_heap *h, uint64_t *bytes);
/* The release knob's rule after a free that produced the free block blk: with
 * release=always, its segment goes back to the device once nothing in it is in use. */
static inline int as_heap_after_free(as_heap *h, uint32_t b, int64_t release)
{
    if (release != AS_RELEASE_ALWAYS || !b || h->s[h->b[b].seg].nused)
        return 0;
    return as_heap_release_seg(h, h->b[b].seg);
}
/* Reserves a segment, and when the device refuses and release != none gives back every
 * empty segment and tries once more (counted in retries). */
int as_heap_grow_or_release(as_heap *h, uint64_t size, int64_t release, uint32_t *blk);

/* Puts a free block into the policy's index / takes it out (no-op when not indexed). */
void as_heap_index(as_heap *h, uint32_t b);
void as_heap_unindex(as_heap *h, uint32_t b);
/* Block node helpers for policies that split by themselves (buddy). as_heap_split cuts b
 * at `size`; the tail is a new free block, not indexed. */
int as_heap_split(as_heap *h, uint32_t b, uint64_t size, uint32_t *tail);
void as_heap_merge_next(as_heap *h, uint32_t b); /* b absorbs b->next; both out of index */

void as_heap_stats(const as_heap *h, as_policy_stats *out); /* all but largest_free */
/* Structural invariants; `coalesced`: no two neighbouring free blocks. */
int as_heap_check(const as_heap *h, int coalesced, as_check_failure *f);
int as_heap_walk(const as_heap *h, as_walk_fn fn, void *user);

static inline as_blk *as_heap_blk(const as_heap *h, uint32_t i)
{
    return &h->b[i];
}

/* ---- shared rules ---------------------------------------------------------------------- */

/* Requests above this (1 PiB) are refused as OOM before any arithmetic on them, so that
 * rounding can never overflow: no device holds that much. */
#define AS_REQUEST_MAX (1ull << 50)

/* The segment for a rounded request: `segment` bytes when the request is smaller, else the
 * request rounded up to the device granularity. */
uint64_t as_segment_size(uint64_t rounded, uint64_t segment);
/* maxsplit (bytes, 0 = off): may a free block of cand bytes serve a request of req bytes?
 * Requests below maxsplit never take oversize blocks; oversize requests take blocks up to
 * req + tolerance (PyTorch's max_non_split_rounding, the segment size here). */
static inline int as_maxsplit_fits(uint64_t cand, uint64_t req, uint64_t maxsplit,
                                   uint64_t tolerance)
{
    if (!maxsplit)
        return 1;
    if (req < maxsplit)
        return cand < maxsplit;
    return cand < req + tolerance;
}
/* as_round_size with `round` a power of two, for a policy that knows whether any of its
 * divisions is on (divs: some div[i] > 1): the common case inline, the same result. */
static inline uint64_t as_round_req(uint64_t size, uint64_t round, const uint32_t *div, int divs)
{
    if (__builtin_expect(!divs, 1))
        return size < round ? round : (size + round - 1) & ~(round - 1);
    return as_round_size(size, round, div);
}
static inline int as_divs_on(const uint32_t *div)
{
    for (int i = 0; i < AS_DIV_INTERVALS; i++)
        if (div[i] > 1)
            return 1;
    return 0;
}
/* Blocks of at least maxsplit bytes are handed out whole. */
static inline int as_maxsplit_may_split(uint64_t size, uint64_t maxsplit)
{
    return !maxsplit || size < maxsplit;
}

/* ---- an address-ordered B+ tree over free blocks: first fit -------------------------------
 * Leaves hold up to AS_BT_FAN free blocks in address order, with a copy of each one's
 * address and size; an inner node holds, per child, the lowest address and the largest
 * size below it. "The lowest address with size >= want" descends into the first child whose
 * largest size fits: a scan of a few sizes per level, two or three levels for hundreds of
 * blocks, where a binary tree takes a mispredicted branch at each of ten or more levels.
 * A free block's `up` is its leaf. Full nodes split on the way down; a node left empty goes
 * away, and a root with one child hands over to it. Nodes never merge, so the depth is at
 * most 1 + log_(AS_BT_FAN/2) of the most blocks the tree ever held. */

/* 32: of 16, 24, 32 and 64, the fewest instructions per event for firstfit over the real
 * traces of the bench (callgrind): fewer levels to search and carry changes up through,
 * against longer scans (64 is past the balance). */
#define AS_BT_FAN 32

/* A node's entries are records, so that an insertion or a removal shifts them with one
 * move, not one per field. */
typedef struct as_btent {
    uint64_t key;   /* leaf: the block's address; inner: the child's lowest */
    uint64_t max;   /* leaf: the block's size; inner: the child's largest */
    uint32_t child; /* leaf: a block index; inner: a node index */
} as_btent;

typedef struct as_btnode {
    as_btent e[AS_BT_FAN];
    uint64_t mx;     /* the largest of e[0..n).max: the parent's copy, kept here so that a
                      * change that leaves it be stops without the parent */
    uint32_t parent; /* AS_NIL at the root; next free node when recycled */
    uint16_t n;
    uint16_t pslot; /* its slot in its parent (not at the root) */
    uint8_t leaf;
} as_btnode;

typedef struct as_btree {
    as_btnode *nd; /* node 0 is unused (nil) */
    uint32_t nn, cap, free, nfree, root, depth;
    uint64_t n;
} as_btree;

void as_btree_init(as_btree *t);
void as_btree_fini(as_btree *t);
/* Makes sure the next `inserts` insertions need no host memory (the index callbacks cannot
 * fail): 0 or AS_ENOMEM. */
int as_btree_grow_reserve(as_btree *t, unsigned inserts);
static inline int as_btree_reserve(as_btree *t, unsigned inserts)
{
    /* One insertion splits at most every node on its path and adds a root. */
    if (t->nfree >= (uint64_t)inserts * (t->depth + 2))
        return 0;
    return as_btree_grow_reserve(t, inserts);
}
/* Puts free block b in (its address and size as now), within the reservation. */
void as_btree_insert(as_heap *h, as_btree *t, uint32_t b);
void as_btree_remove(as_heap *h, as_btree *t, uint32_t b);
/* nw (not in the tree) takes old's place; nw's address must order where old's did. */
void as_btree_replace(as_heap *h, as_btree *t, uint32_t old, uint32_t nw);
/* b's address or size changed, not its place in the order. */
void as_btree_resized(as_heap *h, as_btree *t, uint32_t b);
/* as_btree_remove and as_btree_replace of a block whose bslot is exact: the answer of the
 * last find, or the block the last insertion placed, with no change to the tree since (a
 * take right after its search). They do not check it. */
void as_btree_remove_found(as_heap *h, as_btree *t, uint32_t b);
void as_btree_replace_found(as_heap *h, as_btree *t, uint32_t old, uint32_t nw);
/* The lowest address with size >= want; AS_NIL when none. The answer's bslot gets its leaf
 * slot, so that the take or split that follows needs no scan of the leaf. A block's bslot
 * is set wherever it is placed (insert, replace, node split, find) and goes stale when
 * entries shift past it; remove, replace and resized check it against the leaf and scan
 * the leaf only when it is stale. */
uint32_t as_btree_find(as_heap *h, const as_btree *t, uint64_t want);
uint64_t as_btree_max(const as_btree *t); /* 0 when empty */
/* Order, summaries, links and copies, and that it holds exactly n indexed free blocks. */
int as_btree_check(const as_heap *h, const as_btree *t, as_check_failure *f);

/* ---- pairing heaps by size: the largest of a set of free blocks in O(1) ---------------------
 * For indexes whose order says nothing about the largest block (segfit's LIFO class lists,
 * whose l and r links the heap leaves alone). A heap is a root index; insertion is O(1),
 * removal O(log n) amortised (Fredman, Sedgewick, Sleator and Tarjan 1986): removing a
 * node that is not the root cuts it out and melds its children, two-pass, back in. */

/* as_pheap_insert(h, root, b) is inline, in common_hot.h. */
void as_pheap_remove(as_heap *h, uint32_t *root, uint32_t b);
/* Heap order, links and the node count; n: how many nodes it should hold. */
int as_pheap_check(const as_heap *h, uint32_t root, uint64_t n, as_check_failure *f);

/* ---- a binned size index: exact best fit over short sorted bins -------------------------
 * Free blocks are binned by their TLSF class (32 classes per power of two), and bitmaps say
 * which bins are non-empty. Each bin is an oset.h bin (a short sorted list, a treap when
 * crowded): a search is a bitmap test, a look at the bin's largest block and a short scan.
 * Because bins partition the sizes in order, "the lowest bin at or above the request's
 * bin, lower bound inside it" is the global smallest (size, addr) that fits: the same
 * answer as one big tree. */

#define AS_BINS_SL 5
#define AS_BINS_FL 64

typedef struct as_bins {
    uint64_t flmap;
    uint32_t slmap[AS_BINS_FL];
    uint32_t treap[AS_BINS_FL];                  /* bit sl: bin (fl, sl) is a treap */
    uint32_t root[AS_BINS_FL][1u << AS_BINS_SL]; /* list: the smallest; treap: the root */
    uint32_t cnt[AS_BINS_FL][1u << AS_BINS_SL];  /* a bin can hold every block of the heap */
    uint64_t n;
} as_bins;

void as_bins_init(as_bins *bins);
/* Inline, in common_hot.h: as_bins_insert(h, bins, b); as_bins_remove(h, bins, b) (out of
 * the bin b was filed in, b->bin, whatever its size is now); as_bins_replace(h, bins, old,
 * nw) and as_bins_rekey(h, bins, b), the index ops' replace and resized, which keep a block
 * where it stands in its bin's list when its new key still orders there;
 * as_bins_find(h, bins, want): the smallest (size, addr) with size >= want, AS_NIL when
 * none. */
uint64_t as_bins_max(const as_heap *h, const as_bins *bins); /* largest size, 0 when empty */
int as_bins_check(const as_heap *h, const as_bins *bins, as_check_failure *f);

/* ---- misc -------------------------------------------------------------------------------- */

int as_check_fail(as_check_failure *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline unsigned as_log2_floor(uint64_t x)
{
    return 63u ^ (unsigned)__builtin_clzll(x); /* = 63 - clz for x > 0: one bsr, no subtraction */
}
static inline unsigned as_log2_ceil(uint64_t x)
{
    return x <= 1 ? 0 : as_log2_floor(x - 1) + 1;
}

/* TLSF's two-level class of a size (Masmano et al. 2004): fl = floor(log2 size), and sl
 * the top sl_log2 bits below the leading one, so [2^fl, 2^(fl+1)) is cut into 2^sl_log2
 * equal classes. `search` rounds the size up to the next class start first ("good fit"),
 * so that every block in the class found, or any higher one, fits. */
static inline void as_tlsf_class(uint64_t size, unsigned sl_log2, int search, unsigned *fl,
                                 unsigned *sl)
{
    unsigned f = as_log2_floor(size);
    if (search && f >= sl_log2) {
        uint64_t step = 1ull << (f - sl_log2);
        if (size > UINT64_MAX - (step - 1)) {
            *fl = 64;
            *sl = 0;
            return;
        }
        size += step - 1;
        f = as_log2_floor(size);
    }
    *fl = f;
    uint64_t mask = (1ull << sl_log2) - 1;
    *sl =
        (unsigned)(f >= sl_log2 ? (size >> (f - sl_log2)) & mask : (size << (sl_log2 - f)) & mask);
}

#include "common_hot.h"

#endif
