/*
 * gmlake.c - GMLake (Guo et al., "GMLake: Efficient and Transparent GPU Memory
 * Defragmentation for Large-scale DNN Training with Virtual Memory Stitching", ASPLOS
 * 2024), as its public code defines it: intelligent-machine-learning/glake, GMLake/ (a
 * patched PyTorch 2.0 CUDACachingAllocator.cpp and include/cuda_vmm_allocator.h). Our own
 * code, written from these facts (function names are glake's):
 *
 * - Requests of at most 1 MiB are PyTorch 2.0's small pool: 512 B rounding, 2 MiB
 *   cudaMalloc segments, split and merge (vmmDefragment never applies to it: malloc,
 *   realloc_block). Larger requests are rounded up to 2 MiB (round_size) and served from
 *   primitive blocks (pBlocks): a new segment is `alloc_size` bytes (20 MiB below 10 MiB,
 *   else the request; get_allocation_size) of 2 MiB physical chunks, one cuMemCreate each
 *   (PhyBlock), mapped into one cuMemAddressReserve range (VmmSegment, mapVirAddr).
 *   pBlocks split at chunk boundaries (VmmSegment::split; should_split: a remainder of at
 *   least 2 MiB, a request below max_split_size) and merge with free neighbours
 *   (try_merge_blocks, VmmSegment::remerge).
 * - A stitched block (sBlock) maps chunks of several free pBlocks, in any order, into a
 *   new virtual range of its own (get_fused_fragmented_blocks: the stream's free pBlocks
 *   from the largest down until they cover the request, the last one split to fit). It
 *   takes no physical memory: a chunk is used by one block at a time, its pBlock's or
 *   one sBlock's (PhyBlock::free, mapped_blocks). A freed sBlock stays cached with its
 *   mapping: whole (free_fused_blocks) while all its chunks are free, fragmented
 *   (fragmented_free_fused_blocks) once some chunk is used by another block; it returns
 *   to the cache only when its chunks are all free again through a block of its stream
 *   (update_block).
 * - The alloc path (malloc): (1) best fit (stream, size, addr) over free pBlocks, with
 *   PyTorch's max_split_size rules, an exact fit being the smallest one (get_free_block);
 *   only when the stream has no free pBlock that large, the smallest cached sBlock that
 *   fits and is at most reuseLimit x the request, whose first request/2 MiB chunks it
 *   uses (the pBlocks they belong to split into used and free runs); (2) stitching, for
 *   requests of at least fragLimit, at ladder step >= defragLevel; (3) a new pBlock
 *   (realloc_block; with reAlloc only the part the free pBlocks do not cover, then
 *   stitched: the paper's S4, off in the code); (4) release_available_cached_blocks and
 *   a new pBlock; (5) stitching (step 1); (6) release_cached_blocks (whole free segments
 *   only, and every cached sBlock that maps one of their chunks) and a new pBlock; (7)
 *   stitching (step 2); else OOM.
 * - garbage_collect_fused_blocks drops cached sBlocks (their virtual ranges; never a
 *   chunk): when the stitched ranges made so far exceed autoGC GiB (the counter GMLake
 *   keeps: stitches add, collections subtract), and at empty_cache.
 *
 * The device: pBlock segments are va_reserve + one map (the device's map is cuMemCreate +
 * cuMemMap per 2 MiB page: one PhyBlock each), released by unmap + va_release; small
 * segments reserve/release; an sBlock is a va_reserve and one alias per run of chunks
 * that lie in a row in one segment (cuMemMap of the chunks' own handles + cuMemSetAccess,
 * page by page: VirBlock), kept mapped while it is cached, whole or fragmented, and
 * unaliased (one cuMemUnmap per mapped run) + va_release'd when it is dropped. Capacity
 * counts each chunk once, as on the GPU. One difference from glake: when a release takes
 * a segment whose chunk an active sBlock maps past what it serves, glake drops its
 * references but leaves the page mapped until the sBlock goes, so the driver keeps the
 * page's memory after the allocator stopped counting it; here that page is unaliased at
 * the release, so the memory goes when the allocator says it does.
 * Not modelled: CUDA graph pools (all requests share the default pool),
 * events (a FREE_REQ'd block waits for its FREE), garbage_collection_threshold, and the
 * retries after a failed cuMemAddressReserve (the simulated address space never fails).
 * Where PyTorch 2.0 would release a piece of a split segment (release_available_cached_
 * blocks on a block the stitching split), only whole segments are released.
 *
 * Invariant (gm_check): blocks tile their segments in address order, no two free blocks
 * are neighbours, each pool holds exactly its free blocks in (stream, size, addr) order;
 * every chunk is used by at most one block: an allocated pBlock (all its chunks) or the
 * used prefix of one live sBlock; a pBlock's busy count, an sBlock's busy count and the
 * chunk-to-sBlock maps agree; the counters match the device.
 */
#include <stdlib.h>
#include <string.h>

/* The pools' classes stay lists up to 64 blocks (oset.h's default is 32; defined before
 * common.h includes oset.h, the pair holds for the whole file, whose as_bins copies it does
 * not use): on streams2_default and moe_like some small-pool classes pass 32 blocks, and
 * their treap inserts, rotations and conversions were about 3 % of a run's instructions. */
#define OSET_LIST_MAX 64
#define OSET_LIST_BACK 32

#include "builtin.h"
#include "common.h"
#include "grow.h"
#include "knobs.h"

#define CHUNK AS_DEV_GRANULARITY      /* granularitySize: one PhyBlock */
#define SMALL_SIZE (1ull << 20)       /* kSmallSize: the small pool's largest request */
#define SMALL_BUFFER (2ull << 20)     /* kSmallBuffer */
#define LARGE_BUFFER (20ull << 20)    /* kLargeBuffer */
#define MIN_LARGE_ALLOC (10ull << 20) /* kMinLargeAlloc */
#define MIN_BLOCK 512ull              /* kMinBlockSize */
#define DEAD UINT64_MAX               /* an sBlock's chunk that a release took away */
#define GIB (1ull << 30)

enum { B_UNUSED, B_FREE, B_ALLOC, B_HELD };  /* pBlock or small block */
enum { S_UNUSED, S_ACTIVE, S_FREE, S_FRAG }; /* sBlock */
enum { A_BLOCK, A_SBLK };                    /* what an allocation is (a handle's bit 0) */

typedef struct chunk {
    uint32_t *map; /* sBlocks mapping this chunk, in the order they map it */
    uint32_t nmap, cap;
    uint8_t used; /* used by an sBlock (it lies in a held pBlock); an allocated pBlock's
                   * chunks are used without it */
} chunk;

/* Chunks [lo, hi) of a segment that sBlock sb maps (a run of its range in a row). */
typedef struct srun {
    uint32_t sb, lo, hi;
} srun;

typedef struct seg {
    uint64_t addr, size;
    uint32_t head; /* lowest block; 0: the slot is unused */
    uint8_t small;
    chunk *ch; /* large: size / CHUNK */
    srun *run; /* the sBlocks' runs over its chunks, in no order */
    size_t nrun, crun;
    uint64_t pad; /* to 64 bytes: a block's segment is found by a shift */
} seg;
_Static_assert(sizeof(seg) == 64, "a segment is one cache line");

typedef struct blk {
    uint64_t addr, size, stream;
    union {
        struct {
            uint32_t l, r, up; /* free: its bin's links (oset.h) */
            uint32_t bin;      /* free: its pool class, row << FP_SL | class, so that
                                * fp_remove and fp_prev compute nothing */
        };
        struct {
            uint64_t id;     /* B_ALLOC: the allocation's (walks) */
            uint8_t pending; /* B_ALLOC: its FREE_REQ came */
        };
    };
    uint32_t seg, prev, next;
    uint32_t busy; /* pBlock: its chunks in use */
    uint32_t gen;  /* bumped at each hand-out: a handle carries it (kept across reuse) */
    uint8_t state;
    uint8_t small; /* its segment's: the pool it belongs to, without the segment's line */
} blk;
_Static_assert(sizeof(blk) == 64, "a block is one cache line");

#define OSET_NODE blk
#define OSET(name) gb_##name
#include "oset.h"

/* A free pool: PyTorch's std::set of free blocks ordered by (stream, size, addr), as one
 * slot per stream (found by a binary search of the slots sorted by stream, after a look
 * at the last one found), each cutting sizes into TLSF classes of 32 per power of two. A
 * class is an oset.h bin (a short (size, addr)-sorted list, a treap when crowded), and
 * two bitmap levels find the next non-empty one: the lookups, inserts and erases of an
 * alloc/free pair are a class computation, a bitmap test and a short list walk, where a
 * binary search and a memmove of a sorted array were. A slot's classes come in rows of
 * one power of two, made on first use. A class is one 8-byte (head, count) pair in a flat
 * array, a row's 32 in a row of it, so that a free block's class index (blk.bin) finds its
 * bin with one shift, its row (bitmap, slot and power of two, 16 bytes) with another: a
 * stream costs 272 bytes and a row 272. */
#define FP_SL 5
#define FP_TREAP 0x80000000u             /* a bin's count bit: the bin is a treap */
#define FP_ROWS_MAX (1u << (32 - FP_SL)) /* a block's bin holds a row index */

typedef struct fpbin {
    uint32_t head, cnt; /* oset.h's head; the blocks, | FP_TREAP when a treap */
} fpbin;

typedef struct fprow {
    uint32_t slmap;     /* bit sl: class sl holds blocks */
    uint32_t owner, fl; /* its slot and power of two */
    uint32_t pad;
} fprow;

typedef struct fpool {
    uint64_t *stream, *flmap; /* by slot: its stream; bit fl: row fl holds blocks */
    uint32_t *row;            /* by slot, 64 each: row fl's index; 0: none yet */
    uint32_t *ord;            /* slots by stream */
    fprow *rows;              /* row 0 unused */
    fpbin *bins;              /* row i's classes from i << FP_SL */
    size_t ns, cstream, cflmap, crow, cord, nrows, crows, cbins;
    uint64_t last_stream; /* its stream (when ns > 0), so that a hit is one compare */
    uint32_t last;        /* the slot found last */
} fpool;

typedef struct sblk {
    uint64_t addr, size, stream;
    uint64_t *ref; /* chunk refs (seg << 32 | index), in the range's order; DEAD */
    uint32_t n, used, busy;
    uint32_t gen;               /* as a block's */
    uint8_t state, gc, pending; /* gc: lost a chunk while active, dropped when freed */
    uint8_t pad[5];             /* to 64 bytes: the chunk maps' walks index sBlocks by a shift */
    uint64_t id;                /* S_ACTIVE: the allocation's */
} sblk;
_Static_assert(sizeof(sblk) == 64, "an sBlock is one cache line");

/* A handle: the node's gen << 32 | its index << 1 | A_SBLK for an sBlock, so that a free
 * reads the node itself and no table of allocations is kept (a stale or repeated handle
 * finds the node's state or gen changed). Node indexes stay below 2^31. */
#define NODE_MAX (1u << 31)

typedef struct ids {
    uint32_t *v;
    size_t n, cap;
} ids;

typedef struct gm {
    const as_device *dev;
    uint64_t maxsplit, fraglimit, autogc;
    double reuselimit;
    int stitch, defraglevel, realloc;
    seg *s;
    blk *b;
    sblk *sb;
    size_t ns, cs, nb, cb, nsb, csb;
    ids free_s, free_b, free_sb; /* recycled node indexes */
    fpool small, large;          /* free blocks */
    ids cached;                  /* cached whole sBlocks, sorted */
    ids work;                    /* scratch: blocks to free or split */
    uint64_t allocated, reserved, fused_total;
    uint64_t nsegs, reserves, releases, retries;
} gm;

enum { K_STITCH, K_FRAGLIMIT, K_REUSELIMIT, K_DEFRAGLEVEL, K_AUTOGC, K_REALLOC, K_MAXSPLIT, K_N };

static const as_knob knobs[K_N] = {
    [K_STITCH] = {.name = "stitch",
                  .alias = "vmmDefragment",
                  .type = AS_KNOB_BOOL,
                  .unit = "",
                  .def = 1,
                  .min = 0,
                  .max = 1,
                  .help = "stitch free blocks into one virtual range (false: PyTorch 2.0 over "
                          "2 MiB chunks)"},
    [K_FRAGLIMIT] = {.name = "fraglimit",
                     .alias = "fragLimit",
                     .type = AS_KNOB_SIZE,
                     .unit = "bytes",
                     .def = 512ll << 20,
                     .min = 1,
                     .max = 1ll << 50,
                     .help = "only requests of at least this size are stitched"},
    [K_REUSELIMIT] = {.name = "reuselimit",
                      .alias = "reuseLimit",
                      .type = AS_KNOB_FLOAT,
                      .unit = "x request",
                      .fdef = 10.0,
                      .fmin = 1.0,
                      .fmax = 1e9,
                      .help = "a cached stitched block serves a request at most this many "
                              "times smaller"},
    [K_DEFRAGLEVEL] = {.name = "defraglevel",
                       .alias = "defragLevel",
                       .type = AS_KNOB_INT,
                       .unit = "",
                       .def = 0,
                       .min = 0,
                       .max = 3,
                       .help = "stitch from this step of the alloc path on: 0 before a new "
                               "block, 1 after the device refused one, 2 after the cache "
                               "was released, 3 never"},
    [K_AUTOGC] = {.name = "autogc",
                  .alias = "autoGC",
                  .type = AS_KNOB_INT,
                  .unit = "GiB",
                  .def = 1000,
                  .min = 0,
                  .max = 1 << 30,
                  .help = "drop the cached stitched blocks once the ranges stitched exceed "
                          "this"},
    [K_REALLOC] = {.name = "realloc",
                   .alias = "reAlloc",
                   .type = AS_KNOB_BOOL,
                   .unit = "",
                   .def = 0,
                   .min = 0,
                   .max = 1,
                   .help = "a new block covers only what the free blocks do not, and is "
                           "stitched with them (the paper's S4)"},
    [K_MAXSPLIT] = AS_KNOB_MAXSPLIT,
};

/* ---- small containers ------------------------------------------------------------------- */

static inline int ids_push(ids *v, uint32_t x)
{
    if (__builtin_expect(v->n >= v->cap, 0) &&
        as_grow((void **)&v->v, &v->cap, v->n + 1, sizeof *v->v, 16))
        return AS_ENOMEM;
    v->v[v->n++] = x;
    return 0;
}

/* ---- the free pools -------------------------------------------------------------------- */

/* The slot of stream (its index), or -1 when it has none. *at: where it goes in ord. */
static inline int64_t fp_lookup(const fpool *p, uint64_t stream, size_t *at)
{
    if (__builtin_expect(p->last_stream == stream && p->ns, 1))
        return p->last;
    size_t lo = 0, hi = p->ns;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->stream[p->ord[mid]] < stream)
            lo = mid + 1;
        else
            hi = mid;
    }
    *at = lo;
    if (lo == p->ns || p->stream[p->ord[lo]] != stream)
        return -1;
    return p->ord[lo];
}

/* fp_slot past a miss of the last slot found: the search, remembered. */
static __attribute__((noinline)) int64_t fp_slot_search(fpool *p, uint64_t stream, size_t *at)
{
    int64_t k = fp_lookup(p, stream, at);
    if (k >= 0) {
        p->last = (uint32_t)k;
        p->last_stream = stream;
    }
    return k;
}

/* fp_lookup, which the next lookup of the same stream finds at once. *at as fp_lookup's
 * when the stream has no slot. */
static inline int64_t fp_slot(fpool *p, uint64_t stream, size_t *at)
{
    if (__builtin_expect(p->last_stream == stream && p->ns, 1))
        return p->last;
    return fp_slot_search(p, stream, at);
}

/* The slot of stream, made if new: its index, or -1 on host OOM. */
static __attribute__((noinline)) int64_t fp_slot_new(fpool *p, uint64_t stream)
{
    size_t at = 0;
    int64_t k = fp_slot(p, stream, &at);
    if (k >= 0)
        return k;
    size_t n = p->ns;
    if (n >= UINT32_MAX || as_grow((void **)&p->stream, &p->cstream, n + 1, sizeof *p->stream, 4) ||
        as_grow((void **)&p->flmap, &p->cflmap, n + 1, sizeof *p->flmap, 4) ||
        as_grow((void **)&p->row, &p->crow, (n + 1) * 64, sizeof *p->row, 256) ||
        as_grow((void **)&p->ord, &p->cord, n + 1, sizeof *p->ord, 4))
        return -1;
    p->stream[n] = stream;
    p->flmap[n] = 0;
    memset(p->row + n * 64, 0, 64 * sizeof *p->row);
    memmove(p->ord + at + 1, p->ord + at, (n - at) * sizeof *p->ord);
    p->ord[at] = (uint32_t)n;
    p->last = (uint32_t)n;
    p->last_stream = stream;
    p->ns = n + 1;
    return (int64_t)n;
}

/* as_tlsf_class(size, FP_SL, 0, ...) for a size of 2^FP_SL bytes or more, as every block
 * and request here is (MIN_BLOCK): without its branch for smaller ones. */
static inline void fp_class(uint64_t size, unsigned *fl, unsigned *sl)
{
    unsigned f = as_log2_floor(size);
    *fl = f;
    *sl = (unsigned)(size >> (f - FP_SL)) & ((1u << FP_SL) - 1);
}
_Static_assert(MIN_BLOCK >= 1u << FP_SL, "fp_class takes sizes of 2^FP_SL and more");

/* Row fl of slot k, made: its index, or 0 on host OOM. */
static __attribute__((noinline)) uint32_t fp_row_new(fpool *p, uint32_t k, unsigned fl)
{
    size_t n = p->nrows ? p->nrows : 1;
    if (n + 1 >= FP_ROWS_MAX || as_grow((void **)&p->rows, &p->crows, n + 1, sizeof *p->rows, 4) ||
        as_grow((void **)&p->bins, &p->cbins, (n + 1) << FP_SL, sizeof *p->bins, 4u << FP_SL))
        return 0;
    p->rows[n] = (fprow){.owner = k, .fl = fl};
    memset(p->bins + (n << FP_SL), 0, sizeof *p->bins << FP_SL);
    p->row[(size_t)k << 6 | fl] = (uint32_t)n;
    p->nrows = n + 1;
    return (uint32_t)n;
}

/* Free block x into the pool: 0 or AS_ENOMEM. */
OSET_HOT int fp_insert(blk *b, fpool *p, uint32_t x)
{
    size_t at;
    int64_t k = fp_slot(p, b[x].stream, &at);
    if (__builtin_expect(k < 0, 0) && (k = fp_slot_new(p, b[x].stream)) < 0)
        return AS_ENOMEM;
    unsigned f, c;
    fp_class(b[x].size, &f, &c);
    uint32_t ri = p->row[(size_t)k << 6 | f];
    if (__builtin_expect(!ri, 0) && !(ri = fp_row_new(p, (uint32_t)k, f)))
        return AS_ENOMEM;
    uint32_t bi = ri << FP_SL | c;
    fpbin *bn = &p->bins[bi];
    uint32_t cnt = bn->cnt;
    b[x].bin = bi;
    if (cnt == 0) { /* most: the bitmaps' bits are set only here */
        b[x].l = b[x].r = x;
        bn->head = x;
        bn->cnt = 1;
        p->rows[ri].slmap |= 1u << c;
        p->flmap[k] |= 1ull << f;
        return 0;
    }
    if (__builtin_expect(cnt < OSET_LIST_MAX, 1)) { /* a list with room */
        bn->head = gb_list_insert(b, bn->head, x);
    } else {
        gb_bin_insert_treap(b, &bn->head, cnt >= FP_TREAP, x);
        cnt |= FP_TREAP;
    }
    bn->cnt = cnt + 1;
    return 0;
}

/* Free block x (in the pool) out of it. */
OSET_HOT void fp_remove(blk *b, fpool *p, uint32_t x)
{
    uint32_t bi = b[x].bin;
    fpbin *bn = &p->bins[bi];
    uint32_t cnt = bn->cnt;
    if (__builtin_expect(cnt < FP_TREAP, 1))
        bn->head = gb_list_erase(b, bn->head, x);
    else if (!gb_bin_erase_treap(b, &bn->head, cnt - FP_TREAP, x))
        cnt -= FP_TREAP; /* a list again */
    bn->cnt = --cnt;
    if (cnt == 0) {
        fprow *r = &p->rows[bi >> FP_SL];
        r->slmap &= ~(1u << (bi & ((1u << FP_SL) - 1)));
        if (!r->slmap)
            p->flmap[r->owner] &= ~(1ull << r->fl);
    }
}

static inline int fp_is_treap(const fpool *p, uint32_t bi)
{
    return p->bins[bi].cnt >= FP_TREAP;
}

/* The treap side of a bin's lookups, out of line (crowded bins are rare): inlined into the
 * engine's loop, their loops cost the common path spilled registers. */
static __attribute__((noinline)) uint32_t fp_treap_lower_bound(const blk *b, uint32_t root,
                                                               uint64_t want)
{
    return gb_treap_lower_bound(b, root, 0, want, 0);
}

static __attribute__((noinline)) uint32_t fp_treap_min(const blk *b, uint32_t root)
{
    return gb_treap_min(b, root);
}

/* The smallest (size, addr) of stream with size >= want, or 0 (lower_bound). */
OSET_HOT uint32_t fp_find(const blk *b, fpool *p, uint64_t stream, uint64_t want)
{
    size_t at;
    int64_t k = fp_slot(p, stream, &at);
    if (k < 0 || !p->flmap[k])
        return 0;
    const uint32_t *row = &p->row[(size_t)k << 6];
    unsigned f, c;
    fp_class(want, &f, &c);
    uint32_t m = 0;
    if (row[f]) {
        uint32_t slm = p->rows[row[f]].slmap;
        if (slm >> c & 1) {
            uint32_t bi = row[f] << FP_SL | c;
            uint32_t x = fp_is_treap(p, bi) ? fp_treap_lower_bound(b, p->bins[bi].head, want)
                                            : gb_bin_lower_bound(b, p->bins[bi].head, 0, want);
            if (x)
                return x;
        }
        m = c + 1 < 32 ? slm & (~0u << (c + 1)) : 0;
    }
    if (!m) {
        uint64_t fm = f + 1 < 64 ? p->flmap[k] & (~0ull << (f + 1)) : 0;
        if (!fm)
            return 0;
        f = (unsigned)__builtin_ctzll(fm);
        m = p->rows[row[f]].slmap;
    }
    c = (unsigned)__builtin_ctz(m); /* every block of a higher class holds want */
    uint32_t bi = row[f] << FP_SL | c;
    return fp_is_treap(p, bi) ? fp_treap_min(b, p->bins[bi].head) : p->bins[bi].head;
}

/* The largest block of slot k in the classes at or below (f, c), or 0. */
static uint32_t fp_last_below(const blk *b, const fpool *p, size_t k, unsigned f, unsigned c)
{
    uint64_t fm = p->flmap[k] & (f >= 63 ? ~0ull : (2ull << f) - 1);
    while (fm) {
        f = 63u ^ (unsigned)__builtin_clzll(fm);
        uint32_t ri = p->row[k << 6 | f];
        uint32_t m = p->rows[ri].slmap & (c >= 31 ? ~0u : (2u << c) - 1);
        if (m) {
            c = 31u ^ (unsigned)__builtin_clz(m);
            uint32_t bi = ri << FP_SL | c;
            return gb_bin_max(b, p->bins[bi].head, fp_is_treap(p, bi));
        }
        fm &= ~(1ull << f);
        c = 31;
    }
    return 0;
}

/* The largest block of stream, or 0. */
static uint32_t fp_last(const blk *b, const fpool *p, uint64_t stream)
{
    size_t at;
    int64_t k = fp_lookup(p, stream, &at);
    return k < 0 ? 0 : fp_last_below(b, p, (size_t)k, 63, 31);
}

/* The block before x (in the pool) in its stream's (size, addr) order, or 0. */
static uint32_t fp_prev(const blk *b, const fpool *p, uint32_t x)
{
    uint32_t bi = b[x].bin;
    const fprow *r = &p->rows[bi >> FP_SL];
    unsigned f = r->fl, c = bi & ((1u << FP_SL) - 1);
    uint32_t y = gb_bin_prev(b, p->bins[bi].head, fp_is_treap(p, bi), x);
    if (y || (!f && !c))
        return y;
    return c ? fp_last_below(b, p, r->owner, f, c - 1) : fp_last_below(b, p, r->owner, f - 1, 31);
}

/* Does stream have two free blocks or more? */
static int fp_two(const fpool *p, uint64_t stream)
{
    size_t at;
    int64_t k = fp_lookup(p, stream, &at);
    if (k < 0 || !p->flmap[k])
        return 0;
    uint64_t fm = p->flmap[k];
    if (fm & (fm - 1))
        return 1;
    uint32_t ri = p->row[(size_t)k << 6 | (unsigned)__builtin_ctzll(fm)];
    uint32_t m = p->rows[ri].slmap;
    if (m & (m - 1))
        return 1;
    return (p->bins[ri << FP_SL | (unsigned)__builtin_ctz(m)].cnt & ~FP_TREAP) >= 2;
}

/* The largest free block of any stream. */
static uint64_t fp_max(const blk *b, const fpool *p)
{
    uint64_t m = 0;
    for (size_t k = 0; k < p->ns; k++) {
        uint32_t x = fp_last_below(b, p, k, 63, 31);
        m = x && b[x].size > m ? b[x].size : m;
    }
    return m;
}

static void fp_free(fpool *p)
{
    free(p->stream);
    free(p->flmap);
    free(p->row);
    free(p->ord);
    free(p->rows);
    free(p->bins);
}

/* ---- the cache of whole sBlocks --------------------------------------------------------- */

/* Is sBlock x below (stream, size, addr)? */
static inline int sb_below(const sblk *x, uint64_t stream, uint64_t size, uint64_t addr)
{
    if (x->stream != stream)
        return x->stream < stream;
    return x->size != size ? x->size < size : x->addr < addr;
}

/* The first position of the cache not below (stream, size, addr). */
static size_t cache_lower_bound(const gm *g, uint64_t stream, uint64_t size, uint64_t addr)
{
    size_t lo = 0, hi = g->cached.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sb_below(&g->sb[g->cached.v[mid]], stream, size, addr))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static __attribute__((noinline)) int cache_insert(gm *g, uint32_t s)
{
    ids *c = &g->cached;
    if (as_grow((void **)&c->v, &c->cap, c->n + 1, sizeof *c->v, 16))
        return AS_ENOMEM;
    size_t at = cache_lower_bound(g, g->sb[s].stream, g->sb[s].size, g->sb[s].addr);
    memmove(c->v + at + 1, c->v + at, (c->n - at) * sizeof *c->v);
    c->v[at] = s;
    c->n++;
    return 0;
}

static __attribute__((noinline)) void cache_remove(gm *g, uint32_t s)
{
    ids *c = &g->cached;
    size_t at = cache_lower_bound(g, g->sb[s].stream, g->sb[s].size, g->sb[s].addr);
    if (at < c->n && c->v[at] == s) {
        memmove(c->v + at, c->v + at + 1, (c->n - at - 1) * sizeof *c->v);
        c->n--;
    }
}

/* A node index from the recycled ones or a new one at the end (index 0 is nil). */
static int node_new(void **arr, size_t *n, size_t *cap, size_t elem, ids *recycled, uint32_t *out)
{
    if (recycled->n) {
        *out = recycled->v[--recycled->n];
    } else {
        size_t at = *n ? *n : 1;
        if (at >= NODE_MAX || as_grow(arr, cap, at + 1, elem, 64))
            return AS_ENOMEM;
        *n = at + 1;
        *out = (uint32_t)at;
    }
    memset((char *)*arr + (size_t)*out * elem, 0, elem);
    return 0;
}

/* A block node, not zeroed: both callers (split_at, seg_new) write the whole node but its
 * gen. */
static __attribute__((noinline)) int blk_grow(gm *g, uint32_t *out)
{
    size_t at = g->nb ? g->nb : 1;
    if (at >= NODE_MAX || as_grow((void **)&g->b, &g->cb, at + 1, sizeof *g->b, 64))
        return AS_ENOMEM;
    g->nb = at + 1;
    g->b[at].state = B_UNUSED;
    g->b[at].gen = 0;
    *out = (uint32_t)at;
    return 0;
}

static inline int blk_new(gm *g, uint32_t *out)
{
    if (__builtin_expect(g->free_b.n != 0, 1)) {
        *out = g->free_b.v[--g->free_b.n];
        return 0;
    }
    return blk_grow(g, out);
}

static int blk_drop(gm *g, uint32_t x)
{
    g->b[x].state = B_UNUSED;
    return ids_push(&g->free_b, x);
}

static chunk *chunk_at(gm *g, uint64_t ref)
{
    return &g->s[ref >> 32].ch[(uint32_t)ref];
}

static uint64_t ref_of(const gm *g, uint32_t b, uint64_t i)
{
    return (uint64_t)g->b[b].seg << 32 | ((g->b[b].addr - g->s[g->b[b].seg].addr) / CHUNK + i);
}

static uint64_t nchunks(const blk *x)
{
    return x->size / CHUNK;
}

static fpool *pool_of(gm *g, uint32_t b)
{
    return g->b[b].small ? &g->small : &g->large;
}

/* ---- chunks: who uses them ------------------------------------------------------------- */

/* Chunks [lo, hi) of segment sg go used: each sBlock other than self mapping some of them
 * counts them busy, and a whole cached one becomes fragmented (get_free_block,
 * get_fused_fragmented_blocks). A segment's runs are few (an sBlock maps a pBlock's chunks
 * in a row), so this is a walk of a short array where a walk of each chunk's maps was
 * one of several per chunk. */
static inline __attribute__((always_inline)) void runs_use(gm *g, const seg *sg, uint64_t lo,
                                                           uint64_t hi, uint32_t self)
{
    for (size_t k = 0, nr = sg->nrun; k < nr; k++) {
        const srun *r = &sg->run[k];
        if (r->lo >= hi || r->hi <= lo || r->sb == self) /* most miss [lo, hi) */
            continue;
        uint64_t a = r->lo > lo ? r->lo : lo, e = r->hi < hi ? r->hi : hi;
        sblk *t = &g->sb[r->sb];
        if (t->state == S_FREE) {
            cache_remove(g, r->sb);
            t->state = S_FRAG;
        }
        t->busy += (uint32_t)(e - a);
    }
}

/* Chunks [lo, hi) of segment sg are free again: an sBlock whose chunks are now all free
 * goes back to the cache only when the block freeing it is of the sBlock's stream
 * (update_block). */
static inline __attribute__((always_inline)) int
runs_release(gm *g, const seg *sg, uint64_t lo, uint64_t hi, uint32_t self, uint64_t stream)
{
    for (size_t k = 0, nr = sg->nrun; k < nr; k++) {
        const srun *r = &sg->run[k];
        if (r->lo >= hi || r->hi <= lo || r->sb == self) /* most miss [lo, hi) */
            continue;
        uint64_t a = r->lo > lo ? r->lo : lo, e = r->hi < hi ? r->hi : hi;
        sblk *t = &g->sb[r->sb];
        t->busy -= (uint32_t)(e - a);
        if (t->busy == 0 && t->state == S_FRAG && t->stream == stream) {
            t->state = S_FREE;
            int rc = cache_insert(g, r->sb);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* Chunks [from, from+n) of pBlock b go used or free as the block does; only the sBlocks
 * mapping them follow (a chunk's own flag is an sBlock's, see chunk). Most segments are
 * mapped by no sBlock: that test comes first, inline. */
static inline int chunks_set(gm *g, uint32_t b, uint64_t from, uint64_t n, int used,
                             uint64_t stream)
{
    const seg *sg = &g->s[g->b[b].seg];
    if (!sg->nrun)
        return 0;
    uint64_t lo = (g->b[b].addr - sg->addr) / CHUNK + from;
    if (used) {
        runs_use(g, sg, lo, lo + n, 0);
        return 0;
    }
    return runs_release(g, sg, lo, lo + n, 0, stream);
}

/* take_block's split of pBlock b (nc chunks, in a segment some sBlock maps) after its
 * first keep chunks: the whole block goes used, then its tail free again, in one walk of
 * the runs: chunks_set(used) over the block and chunks_set(free) over the tail leave each
 * sBlock as this does. An sBlock over the head counts its chunks there busy and, whole
 * before, goes fragmented. One over the tail alone keeps its count; whole, it stays so if
 * of the block's stream (out of the cache and in again: the same sorted set), else goes
 * fragmented; fragmented with nothing busy, it goes whole if of the stream. An sBlock with
 * several runs there ends as in the two walks: busy at all after them, it is fragmented,
 * which any run over the head makes it. */
static inline int runs_split(gm *g, uint32_t b, uint64_t keep, uint64_t nc, uint64_t stream)
{
    const seg *sg = &g->s[g->b[b].seg];
    uint64_t lo = (g->b[b].addr - sg->addr) / CHUNK, mid = lo + keep, hi = lo + nc;
    for (size_t k = 0, nr = sg->nrun; k < nr; k++) {
        const srun *r = &sg->run[k];
        if (r->lo >= hi || r->hi <= lo)
            continue;
        sblk *t = &g->sb[r->sb];
        uint64_t he = r->hi < mid ? r->hi : mid, ha = r->lo > lo ? r->lo : lo;
        if (ha < he) { /* over the head */
            if (t->state == S_FREE) {
                cache_remove(g, r->sb);
                t->state = S_FRAG;
            }
            t->busy += (uint32_t)(he - ha);
        } else if (t->state == S_FREE && t->stream != stream) {
            cache_remove(g, r->sb);
            t->state = S_FRAG;
        } else if (t->state == S_FRAG && t->busy == 0 && t->stream == stream) {
            t->state = S_FREE;
            int rc = cache_insert(g, r->sb);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* The first chunk of block b in its segment. */
static uint64_t first_chunk(const gm *g, uint32_t b)
{
    return (g->b[b].addr - g->s[g->b[b].seg].addr) / CHUNK;
}

/* The block of segment si holding chunk i. */
static uint32_t block_at(const gm *g, uint32_t si, uint64_t i)
{
    uint64_t at = g->s[si].addr + i * CHUNK;
    uint32_t b = g->s[si].head;
    while (g->b[b].addr + g->b[b].size <= at)
        b = g->b[b].next;
    return b;
}

/* The end of the run of sBlock x's refs from i on that lie in a row in one segment,
 * at most lim. */
static uint32_t ref_run(const sblk *x, uint32_t i, uint32_t lim)
{
    uint32_t j = i + 1;
    while (j < lim && x->ref[j] == x->ref[j - 1] + 1)
        j++;
    return j;
}

/* ---- blocks: split and merge ------------------------------------------------------------ */

/* Cuts block b at `size`: b keeps the head, the tail becomes a new block (state as given,
 * not in any pool) right after it. */
static int split_at(gm *g, uint32_t b, uint64_t size, uint8_t tail_state, uint32_t *tail)
{
    uint32_t r;
    int rc = blk_new(g, &r);
    if (rc)
        return rc;
    blk *x = &g->b[b], *t = &g->b[r];
    *t = (blk){.addr = x->addr + size,
               .size = x->size - size,
               .stream = x->stream,
               .seg = x->seg,
               .prev = b,
               .next = x->next,
               .gen = t->gen,
               .state = tail_state,
               .small = x->small};
    if (x->next)
        g->b[x->next].prev = r;
    x->next = r;
    x->size = size;
    *tail = r;
    return 0;
}

/* Absorbs the free neighbour n into b (try_merge_blocks: only a block no one holds). */
static int merge_into(gm *g, uint32_t b, uint32_t n)
{
    blk *x = &g->b[b], *y = &g->b[n];
    fp_remove(g->b, pool_of(g, n), n);
    if (y->addr < x->addr) {
        x->addr = y->addr;
        x->prev = y->prev;
        if (y->prev)
            g->b[y->prev].next = b;
        else
            g->s[x->seg].head = b;
    } else {
        x->next = y->next;
        if (y->next)
            g->b[y->next].prev = b;
    }
    x->size += y->size;
    return blk_drop(g, n);
}

/* free_block: b is free; it merges with free neighbours and joins its pool. */
static int block_to_pool(gm *g, uint32_t b)
{
    uint32_t prev = g->b[b].prev, next = g->b[b].next;
    int rc = 0;
    if (prev && g->b[prev].state == B_FREE)
        rc = merge_into(g, b, prev);
    if (!rc && next && g->b[next].state == B_FREE)
        rc = merge_into(g, b, next);
    if (rc)
        return rc;
    g->b[b].state = B_FREE;
    g->b[b].busy = 0;
    return fp_insert(g->b, pool_of(g, b), b);
}

/* A free pBlock that an sBlock reuse partly took: runs of used chunks become held blocks,
 * runs of free chunks free blocks in the pool (the split in get_free_block). */
static int split_runs(gm *g, uint32_t b)
{
    uint32_t cur = b;
    for (;;) {
        blk *x = &g->b[cur];
        uint64_t n = nchunks(x), run = 1;
        int used = chunk_at(g, ref_of(g, cur, 0))->used;
        while (run < n && chunk_at(g, ref_of(g, cur, run))->used == used)
            run++;
        uint32_t tail = 0;
        if (run < n) {
            int rc = split_at(g, cur, run * CHUNK, B_HELD, &tail);
            if (rc)
                return rc;
        }
        x = &g->b[cur];
        x->state = used ? B_HELD : B_FREE;
        x->busy = used ? (uint32_t)run : 0;
        if (!used) {
            int rc = fp_insert(g->b, &g->large, cur);
            if (rc)
                return rc;
        }
        if (!tail)
            return 0;
        cur = tail;
    }
}

/* ---- sBlocks ---------------------------------------------------------------------------- */

static void map_remove(chunk *c, uint32_t s)
{
    for (uint32_t k = 0; k < c->nmap; k++)
        if (c->map[k] == s) {
            c->map[k] = c->map[--c->nmap];
            return;
        }
}

/* The second mappings of sBlock x's chunks: one alias() per run of its range whose chunks
 * lie in a row in one segment (a pBlock's, mostly), as GMLake maps a VmmSegment of
 * PhyBlocks (mapVirAddr). *done: the chunks mapped, also when one fails. */
static int sblk_alias(gm *g, const sblk *x, uint32_t *done)
{
    const as_device_ops *o = g->dev->ops;
    int rc = 0;
    for (*done = 0; !rc && *done < x->n;) {
        uint32_t i = *done, j = i + 1;
        while (j < x->n && x->ref[j] == x->ref[j - 1] + 1)
            j++;
        uint64_t src = g->s[x->ref[i] >> 32].addr + (uint64_t)(uint32_t)x->ref[i] * CHUNK;
        rc = o->alias(g->dev->ctx, x->addr + (uint64_t)i * CHUNK, src, (uint64_t)(j - i) * CHUNK);
        if (!rc)
            *done = j;
    }
    return rc;
}

/* Unmaps chunks [0, n) of sBlock x's range: one unalias() per run of chunks a release did
 * not take already (GMLake's VirDevPtr unmaps the whole range at once). */
static int sblk_unalias(gm *g, const sblk *x, uint32_t n)
{
    int rc = 0;
    for (uint32_t i = 0; i < n;) {
        if (x->ref[i] == DEAD) {
            i++;
            continue;
        }
        uint32_t j = i + 1;
        while (j < n && x->ref[j] != DEAD)
            j++;
        int r = g->dev->ops->unalias(g->dev->ctx, x->addr + (uint64_t)i * CHUNK,
                                     (uint64_t)(j - i) * CHUNK);
        rc = rc ? rc : r;
        i = j;
    }
    return rc;
}

/* The runs of sBlock s leave the segments its refs (those a release left) lie in. */
static void runs_drop(gm *g, uint32_t s)
{
    const sblk *x = &g->sb[s];
    for (uint32_t i = 0, j; i < x->n; i = j) {
        j = i + 1;
        if (x->ref[i] == DEAD)
            continue;
        j = ref_run(x, i, x->n);
        seg *sg = &g->s[x->ref[i] >> 32];
        for (size_t k = 0; k < sg->nrun;)
            if (sg->run[k].sb == s)
                sg->run[k] = sg->run[--sg->nrun];
            else
                k++;
    }
}

/* sBlock s's range, run by run, into its segments' runs. */
static int runs_add(gm *g, uint32_t s)
{
    const sblk *x = &g->sb[s];
    for (uint32_t i = 0, j; i < x->n; i = j) {
        j = ref_run(x, i, x->n);
        seg *sg = &g->s[x->ref[i] >> 32];
        if (as_grow((void **)&sg->run, &sg->crun, sg->nrun + 1, sizeof *sg->run, 4))
            return AS_ENOMEM;
        uint32_t lo = (uint32_t)x->ref[i];
        sg->run[sg->nrun++] = (srun){.sb = s, .lo = lo, .hi = lo + (j - i)};
    }
    return 0;
}

/* Drops sBlock s: its range goes back, its chunks forget it (garbage_collect_fused_blocks). */
static int sblk_delete(gm *g, uint32_t s)
{
    sblk *x = &g->sb[s];
    runs_drop(g, s);
    for (uint32_t i = 0; i < x->n; i++)
        if (x->ref[i] != DEAD)
            map_remove(chunk_at(g, x->ref[i]), s);
    if (x->state == S_FREE)
        cache_remove(g, s);
    int rc = sblk_unalias(g, x, x->n);
    int r1 = g->dev->ops->va_release(g->dev->ctx, x->addr, x->size);
    rc = rc ? rc : r1;
    free(x->ref);
    uint32_t gen = x->gen;
    memset(x, 0, sizeof *x);
    x->gen = gen;
    int r2 = ids_push(&g->free_sb, s);
    return rc ? rc : r2;
}

/* Every cached sBlock goes (fragmented ones; with all: whole ones too). *bytes: their
 * stitched size, which the autoGC counter loses. */
static int collect(gm *g, int all, uint64_t *bytes)
{
    *bytes = 0;
    for (uint32_t s = 1; s < g->nsb; s++) {
        uint8_t st = g->sb[s].state;
        if (st == S_FRAG || (all && st == S_FREE)) {
            *bytes += g->sb[s].size;
            int rc = sblk_delete(g, s);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int collect_counted(gm *g)
{
    uint64_t bytes;
    int rc = collect(g, 1, &bytes);
    g->fused_total = g->fused_total > bytes ? g->fused_total - bytes : 0;
    return rc;
}

static int map_add(chunk *c, uint32_t s)
{
    size_t cap = c->cap;
    if (as_grow((void **)&c->map, &cap, (size_t)c->nmap + 1, sizeof *c->map, 2) || cap > UINT32_MAX)
        return AS_ENOMEM;
    c->cap = (uint32_t)cap;
    c->map[c->nmap++] = s;
    return 0;
}

/* A new active sBlock over the chunks refs[0..n) (already used), its range reserved. */
static int sblk_make(gm *g, const uint64_t *refs, uint32_t n, uint64_t stream, uint32_t *out)
{
    uint32_t s, gen = g->free_sb.n ? g->sb[g->free_sb.v[g->free_sb.n - 1]].gen : 0;
    int rc = node_new((void **)&g->sb, &g->nsb, &g->csb, sizeof *g->sb, &g->free_sb, &s);
    if (rc)
        return rc;
    sblk *x = &g->sb[s];
    x->gen = gen; /* node_new took the last recycled one, or a new one */
    x->ref = malloc((size_t)n * sizeof *x->ref);
    if (!x->ref) {
        ids_push(&g->free_sb, s);
        return AS_ENOMEM;
    }
    memcpy(x->ref, refs, (size_t)n * sizeof *refs);
    x->n = x->used = x->busy = n;
    x->size = (uint64_t)n * CHUNK;
    x->stream = stream;
    x->state = S_ACTIVE;
    uint32_t mapped = 0;
    rc = g->dev->ops->va_reserve(g->dev->ctx, x->size, &x->addr);
    if (!rc)
        rc = sblk_alias(g, x, &mapped);
    for (uint32_t i = 0; !rc && i < n; i++)
        rc = map_add(chunk_at(g, refs[i]), s);
    if (!rc)
        rc = runs_add(g, s);
    if (rc) {
        runs_drop(g, s);
        for (uint32_t i = 0; i < n; i++)
            map_remove(chunk_at(g, refs[i]), s);
        sblk_unalias(g, x, mapped);
        if (x->addr)
            g->dev->ops->va_release(g->dev->ctx, x->addr, x->size);
        free(x->ref);
        memset(x, 0, sizeof *x);
        x->gen = gen;
        ids_push(&g->free_sb, s);
        return rc < 0 || rc == AS_DEV_OOM ? rc : AS_EDEVICE;
    }
    *out = s;
    return 0;
}

/* get_free_block's second half: the cached sBlock s serves `size`: its first size/CHUNK
 * chunks become used, and the free pBlocks they lie in split into used and free runs. */
static int sblk_reuse(gm *g, uint32_t s, uint64_t size)
{
    sblk *x = &g->sb[s];
    uint32_t keep = (uint32_t)(size / CHUNK);
    g->work.n = 0;
    cache_remove(g, s);
    for (uint32_t i = 0, j; i < keep; i = j) { /* a run of chunks in a row at a time */
        j = ref_run(x, i, keep);
        uint32_t si = (uint32_t)(x->ref[i] >> 32);
        uint64_t lo = (uint32_t)x->ref[i], hi = lo + (j - i);
        for (uint64_t c = lo; c < hi; c++)
            g->s[si].ch[c].used = 1;
        runs_use(g, &g->s[si], lo, hi, s);
        for (uint32_t b = block_at(g, si, lo); b && first_chunk(g, b) < hi; b = g->b[b].next) {
            blk *o = &g->b[b];
            uint64_t b0 = first_chunk(g, b), b1 = b0 + nchunks(o);
            if (o->state == B_FREE) {
                fp_remove(g->b, &g->large, b);
                o->state = B_HELD;
                int rc = ids_push(&g->work, b);
                if (rc)
                    return rc;
            }
            o->busy += (uint32_t)((b1 < hi ? b1 : hi) - (b0 > lo ? b0 : lo));
        }
    }
    x->state = S_ACTIVE;
    x->used = x->busy = keep;
    for (size_t k = 0; k < g->work.n; k++) {
        uint32_t b = g->work.v[k];
        if (g->b[b].busy < nchunks(&g->b[b])) {
            int rc = split_runs(g, b);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* ---- the alloc path ---------------------------------------------------------------------- */

typedef struct found {
    uint8_t kind;    /* A_BLOCK or A_SBLK */
    uint8_t in_pool; /* A_BLOCK: still in its pool */
    uint32_t node;
} found;

static uint64_t round_size(uint64_t size)
{
    if (size < MIN_BLOCK)
        return MIN_BLOCK;
    uint64_t r = as_align_up(size, MIN_BLOCK);
    return r > SMALL_SIZE ? as_align_up(size, CHUNK) : r;
}

static uint64_t alloc_size(uint64_t size)
{
    if (size <= SMALL_SIZE)
        return SMALL_BUFFER;
    return size < MIN_LARGE_ALLOC ? LARGE_BUFFER : as_align_up(size, CHUNK);
}

/* get_free_block's sBlock half, when the stream has no free pBlock that large: 1 with *f,
 * 0 when no cached sBlock serves the request. Out of line, as the rest of the ladder: the
 * common alloc is a free pBlock, and the code of the rare steps inlined into the engine's
 * loop made its hot path spill registers. */
static __attribute__((noinline)) int get_cached(gm *g, uint64_t size, uint64_t stream, found *f)
{
    size_t c = cache_lower_bound(g, stream, size, 0);
    if (c == g->cached.n)
        return 0;
    const sblk *x = &g->sb[g->cached.v[c]];
    if (x->stream != stream || (double)x->size > (double)size * g->reuselimit)
        return 0;
    *f = (found){.kind = A_SBLK, .node = g->cached.v[c]};
    int rc = sblk_reuse(g, f->node, size);
    return rc ? rc : 1;
}

/* get_free_block: 1 with *f, 0 when nothing cached serves the request. */
static inline int get_free(gm *g, int small, uint64_t size, uint64_t stream, found *f)
{
    uint32_t b = fp_find(g->b, small ? &g->small : &g->large, stream, size);
    if (!b)
        return small || !g->stitch ? 0 : get_cached(g, size, stream, f);
    uint64_t bs = g->b[b].size;
    if (__builtin_expect(g->maxsplit != UINT64_MAX, 0)) { /* else no block is oversize */
        if (size < g->maxsplit && bs >= g->maxsplit)
            return 0; /* no oversize block for a smaller request */
        if (size >= g->maxsplit && bs >= size + LARGE_BUFFER)
            return 0; /* an oversize block rounds a request up, within a limit */
    }
    *f = (found){.kind = A_BLOCK, .in_pool = 1, .node = b};
    return 1;
}

/* Takes the stream's free pBlocks from the largest down until they cover size; the last
 * one is split to fit. 1 with *out (their chunk refs in *refs), 0 when they do not. */
static int stitch_pick(gm *g, uint64_t size, uint64_t stream, uint64_t **refs, uint32_t *n)
{
    if (!fp_two(&g->large, stream))
        return 0; /* one free block or none: nothing to stitch */
    uint64_t fuse = 0;
    g->work.n = 0;
    for (uint32_t b = fp_last(g->b, &g->large, stream); b && fuse < size;
         b = fp_prev(g->b, &g->large, b)) {
        fuse += g->b[b].size;
        if (ids_push(&g->work, b))
            return AS_ENOMEM;
    }
    if (fuse < size)
        return 0;
    uint32_t last = g->work.v[g->work.n - 1], tail;
    for (size_t i = 0; i < g->work.n; i++)
        fp_remove(g->b, &g->large, g->work.v[i]);
    if (fuse - size >= CHUNK) {
        int rc = split_at(g, last, g->b[last].size - (fuse - size), B_FREE, &tail);
        if (!rc)
            rc = fp_insert(g->b, &g->large, tail);
        if (rc)
            return rc;
    }
    *n = (uint32_t)(size / CHUNK);
    *refs = malloc((size_t)*n * sizeof **refs);
    if (!*refs)
        return AS_ENOMEM;
    uint32_t at = 0;
    for (size_t i = 0; i < g->work.n; i++) {
        uint32_t b = g->work.v[i];
        g->b[b].state = B_HELD;
        g->b[b].busy = (uint32_t)nchunks(&g->b[b]);
        for (uint64_t c = 0; c < nchunks(&g->b[b]); c++) {
            (*refs)[at++] = ref_of(g, b, c);
            chunk_at(g, ref_of(g, b, c))->used = 1;
        }
        int rc = chunks_set(g, b, 0, nchunks(&g->b[b]), 1, stream);
        if (rc)
            return rc;
    }
    return 1;
}

static int free_block(gm *g, uint32_t b);

/* The blocks stitch_pick took (g->work) go back to the pool, the last one's split tail
 * merged again: as before the pick. */
static int stitch_undo(gm *g)
{
    int rc = 0;
    for (size_t k = 0; !rc && k < g->work.n; k++)
        rc = free_block(g, g->work.v[k]);
    return rc;
}

/* get_fused_fragmented_blocks at ladder step `step`. A mapping the driver refuses for lack
 * of memory (alias's AS_DEV_OOM) fails the stitch and the ladder goes on, as a failed
 * mapVirAddr does in glake. */
static int stitch(gm *g, int small, uint64_t size, uint64_t stream, int step, found *f)
{
    if (!g->stitch || step < g->defraglevel || small || size < g->fraglimit)
        return 0;
    uint64_t *refs = NULL;
    uint32_t n = 0, s = 0;
    int rc = stitch_pick(g, size, stream, &refs, &n);
    if (rc == 1)
        rc = sblk_make(g, refs, n, stream, &s);
    else
        n = 0;
    if (rc == AS_DEV_OOM) {
        rc = stitch_undo(g);
        n = 0;
    }
    free(refs);
    if (rc < 0 || !n)
        return rc;
    *f = (found){.kind = A_SBLK, .node = s};
    g->fused_total += size;
    if (g->fused_total > g->autogc * GIB)
        rc = collect_counted(g);
    return rc ? rc : 1;
}

static int seg_new(gm *g, uint64_t addr, uint64_t size, int small, uint32_t *blkout)
{
    uint32_t si, b;
    int rc = node_new((void **)&g->s, &g->ns, &g->cs, sizeof *g->s, &g->free_s, &si);
    if (!rc)
        rc = blk_new(g, &b);
    if (rc)
        return rc;
    seg *s = &g->s[si];
    *s = (seg){.addr = addr, .size = size, .head = b, .small = (uint8_t)small};
    if (!small && !(s->ch = calloc(size / CHUNK, sizeof *s->ch)))
        return AS_ENOMEM;
    g->b[b] = (blk){.addr = addr,
                    .size = size,
                    .stream = 0,
                    .seg = si,
                    .gen = g->b[b].gen,
                    .state = B_FREE,
                    .small = (uint8_t)small};
    g->nsegs++;
    g->reserves++;
    g->reserved += size;
    *blkout = b;
    return 0;
}

/* The bytes a new pBlock needs with reAlloc: what the stream's free pBlocks leave. */
static uint64_t realloc_need(const gm *g, uint64_t size, uint64_t stream)
{
    uint64_t freeb = 0;
    for (uint32_t b = fp_last(g->b, &g->large, stream); b; b = fp_prev(g->b, &g->large, b))
        freeb += g->b[b].size;
    return freeb >= size ? 0 : size - freeb;
}

/* realloc_block: a new segment. 1 with *f, 0 when the device refuses it. */
static int grow_pool(gm *g, int small, uint64_t size, uint64_t stream, found *f)
{
    const as_device_ops *o = g->dev->ops;
    uint64_t need = size, addr = 0;
    if (!small && g->realloc && g->stitch && !(need = realloc_need(g, size, stream)))
        return 0; /* the free blocks cover it: stitching's to do (GMLake's "weird" case) */
    uint64_t bytes = alloc_size(need);
    int rc;
    if (small) {
        rc = o->reserve(g->dev->ctx, bytes, &addr);
    } else {
        rc = o->va_reserve(g->dev->ctx, bytes, &addr);
        if (rc == AS_DEV_OOM)
            rc = AS_EDEVICE;
        if (!rc && (rc = o->map(g->dev->ctx, addr, bytes)) != 0)
            o->va_release(g->dev->ctx, addr, bytes);
    }
    if (rc)
        return rc == AS_DEV_OOM ? 0 : rc;
    uint32_t b;
    if ((rc = seg_new(g, addr, bytes, small, &b)) != 0)
        return rc;
    g->b[b].stream = stream;
    if (bytes >= size) {
        *f = (found){.kind = A_BLOCK, .node = b};
        return 1;
    }
    if ((rc = fp_insert(g->b, &g->large, b)) != 0)
        return rc;
    return stitch(g, 0, size, stream, 4, f);
}

static int seg_release(gm *g, uint32_t si);

/* release_available_cached_blocks (max_split_size set): whole oversize free segments of
 * the stream, the smallest that covers the request, else the largest down until they do.
 * 1 when it released enough. */
static int release_oversize(gm *g, int small, uint64_t size, uint64_t stream)
{
    fpool *pool = small ? &g->small : &g->large;
    uint64_t want = size < g->maxsplit ? g->maxsplit : size, got = 0;
    if (g->maxsplit == UINT64_MAX)
        return 0;
    uint32_t b = fp_find(g->b, pool, stream, want);
    if (b) {
        const blk *x = &g->b[b];
        if (x->prev || x->next)
            return 0; /* a piece of a split segment: never given back */
        int rc = seg_release(g, x->seg);
        return rc ? rc : 1;
    }
    /* None that large: the largest down (a release takes only the block it releases). */
    for (b = fp_last(g->b, pool, stream); b && got < want;) {
        const blk *x = &g->b[b];
        uint32_t before = fp_prev(g->b, pool, b);
        if (x->size < g->maxsplit)
            break;
        if (!x->prev && !x->next) {
            got += x->size;
            int rc = seg_release(g, x->seg);
            if (rc)
                return rc;
        }
        b = before;
    }
    return got >= want;
}

/* release_cached_blocks: every whole free segment goes back to the device. */
static int release_cached(gm *g)
{
    for (uint32_t si = 1; si < g->ns; si++) {
        const seg *s = &g->s[si];
        if (s->head && g->b[s->head].state == B_FREE && !g->b[s->head].next) {
            int rc = seg_release(g, si);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* The ladder of malloc after get_free_block found nothing: 1 with *f, 0 for an OOM. */
static __attribute__((noinline)) int ladder_rest(gm *g, int small, uint64_t size, uint64_t stream,
                                                 found *f)
{
    int rc = stitch(g, small, size, stream, 0, f);
    if (!rc)
        rc = grow_pool(g, small, size, stream, f);
    if (!rc && g->maxsplit != UINT64_MAX) {
        rc = release_oversize(g, small, size, stream);
        if (rc == 1)
            rc = grow_pool(g, small, size, stream, f);
    }
    if (!rc)
        rc = stitch(g, small, size, stream, 1, f);
    if (!rc) {
        g->retries++;
        rc = release_cached(g);
        if (!rc)
            rc = grow_pool(g, small, size, stream, f);
    }
    if (!rc)
        rc = stitch(g, small, size, stream, 2, f);
    return rc;
}

/* The ladder of malloc: get_free_block, then the rest. 1 with *f, 0 for an OOM. */
static inline int ladder(gm *g, int small, uint64_t size, uint64_t stream, found *f)
{
    int rc = get_free(g, small, size, stream, f);
    return rc ? rc : ladder_rest(g, small, size, stream, f);
}

/* The found pBlock or small block serves size: its chunks become used, and its tail is
 * split off when should_split allows. */
static int take_block(gm *g, const found *f, uint64_t size, uint64_t stream)
{
    uint32_t b = f->node;
    int small = g->b[b].small;
    if (f->in_pool)
        fp_remove(g->b, pool_of(g, b), b);
    g->b[b].state = B_ALLOC;
    g->b[b].stream = stream;
    uint64_t rest = g->b[b].size - size;
    int split = small ? rest >= MIN_BLOCK : size < g->maxsplit && rest >= CHUNK;
    int rc = 0;
    if (!small && g->s[g->b[b].seg].nrun)
        rc = split ? runs_split(g, b, size / CHUNK, nchunks(&g->b[b]), stream)
                   : chunks_set(g, b, 0, nchunks(&g->b[b]), 1, stream);
    if (!rc && split) {
        uint32_t tail;
        rc = split_at(g, b, size, B_FREE, &tail);
        if (!rc)
            rc = fp_insert(g->b, small ? &g->small : &g->large, tail);
    }
    g->b[b].busy = small ? 0 : (uint32_t)nchunks(&g->b[b]);
    return rc;
}

static int gm_alloc(void *st, const as_request *req, as_block *out)
{
    gm *g = st;
    if (req->size > AS_REQUEST_MAX)
        return AS_POLICY_OOM;
    uint64_t size = round_size(req->size);
    int small = size <= SMALL_SIZE;
    found f = {0};
    int rc = ladder(g, small, size, req->stream, &f);
    if (rc <= 0)
        return rc < 0 ? rc : AS_POLICY_OOM;
    if (f.kind == A_BLOCK) {
        if ((rc = take_block(g, &f, size, req->stream)) != 0)
            return rc;
        blk *x = &g->b[f.node];
        x->id = req->id;
        x->pending = 0;
        out->addr = x->addr;
        out->size = x->size;
        out->handle = (uint64_t)++x->gen << 32 | f.node << 1 | A_BLOCK;
    } else {
        sblk *x = &g->sb[f.node];
        x->id = req->id;
        x->pending = 0;
        out->addr = x->addr;
        out->size = (uint64_t)x->used * CHUNK;
        out->handle = (uint64_t)++x->gen << 32 | f.node << 1 | A_SBLK;
    }
    g->allocated += out->size;
    return 0;
}

/* ---- free --------------------------------------------------------------------------------- */

/* update_block for an sBlock: its used chunks go free; pBlocks whose chunks are all free
 * again go to the pool (merged), the sBlock to the cache (whole or fragmented), or away
 * when a release took one of its chunks meanwhile. */
static __attribute__((noinline)) int free_sblk(gm *g, uint32_t s)
{
    sblk *x = &g->sb[s];
    g->work.n = 0;
    for (uint32_t i = 0, j; i < x->used; i = j) { /* a run of chunks in a row at a time */
        j = ref_run(x, i, x->used);
        uint32_t si = (uint32_t)(x->ref[i] >> 32);
        uint64_t lo = (uint32_t)x->ref[i], hi = lo + (j - i);
        for (uint64_t c = lo; c < hi; c++)
            g->s[si].ch[c].used = 0;
        int rc = runs_release(g, &g->s[si], lo, hi, s, x->stream);
        for (uint32_t b = block_at(g, si, lo); !rc && b && first_chunk(g, b) < hi;
             b = g->b[b].next) {
            blk *o = &g->b[b];
            uint64_t b0 = first_chunk(g, b), b1 = b0 + nchunks(o);
            o->busy -= (uint32_t)((b1 < hi ? b1 : hi) - (b0 > lo ? b0 : lo));
            if (o->busy == 0)
                rc = ids_push(&g->work, b);
        }
        if (rc)
            return rc;
    }
    x->busy -= x->used;
    x->used = 0;
    int rc = 0;
    if (x->gc) {
        rc = sblk_delete(g, s);
    } else if (x->busy == 0) {
        x->state = S_FREE;
        rc = cache_insert(g, s);
    } else {
        x->state = S_FRAG;
    }
    for (size_t k = 0; !rc && k < g->work.n; k++)
        rc = block_to_pool(g, g->work.v[k]);
    return rc;
}

static int free_block(gm *g, uint32_t b)
{
    if (!g->b[b].small) {
        if (g->b[b].state == B_HELD) /* a stitch undone: its chunks were the sBlock's */
            for (chunk *c = chunk_at(g, ref_of(g, b, 0)), *e = c + nchunks(&g->b[b]); c < e; c++)
                c->used = 0;
        int rc = chunks_set(g, b, 0, nchunks(&g->b[b]), 0, g->b[b].stream);
        if (rc)
            return rc;
    }
    return block_to_pool(g, b);
}

static int gm_free(void *st, uint64_t handle, unsigned flags)
{
    gm *g = st;
    uint32_t node = (uint32_t)handle >> 1, gen = (uint32_t)(handle >> 32);
    uint8_t *pending;
    if (!(handle & A_SBLK)) {
        if (node == 0 || node >= g->nb || g->b[node].state != B_ALLOC || g->b[node].gen != gen)
            return AS_EINVAL;
        pending = &g->b[node].pending;
    } else {
        if (node == 0 || node >= g->nsb || g->sb[node].state != S_ACTIVE || g->sb[node].gen != gen)
            return AS_EINVAL;
        pending = &g->sb[node].pending;
    }
    if (flags & AS_FREE_PENDING) {
        if (*pending)
            return AS_EINVAL;
        *pending = 1;
        return 0;
    }
    if (!(handle & A_SBLK)) {
        g->allocated -= g->b[node].size;
        return free_block(g, node);
    }
    g->allocated -= (uint64_t)g->sb[node].used * CHUNK;
    return free_sblk(g, node);
}

/* ---- release ------------------------------------------------------------------------------ */

/* release_block of a whole free segment: cached sBlocks mapping its chunks go; an active
 * one loses the chunk (it lies past what it serves) and goes when freed. */
static int seg_release(gm *g, uint32_t si)
{
    seg *s = &g->s[si];
    int rc = 0;
    for (uint64_t i = 0; !s->small && i < s->size / CHUNK; i++) {
        chunk *c = &g->s[si].ch[i];
        while (!rc && c->nmap) {
            uint32_t t = c->map[c->nmap - 1];
            if (g->sb[t].state == S_ACTIVE) {
                sblk *x = &g->sb[t];
                for (uint32_t k = 0; k < x->n; k++)
                    if (x->ref[k] == ((uint64_t)si << 32 | i)) {
                        int r =
                            g->dev->ops->unalias(g->dev->ctx, x->addr + (uint64_t)k * CHUNK, CHUNK);
                        rc = rc ? rc : r;
                        x->ref[k] = DEAD;
                    }
                x->gc = 1;
                c->nmap--;
            } else {
                rc = sblk_delete(g, t);
            }
        }
        free(c->map);
    }
    s = &g->s[si];
    uint32_t b = s->head;
    fp_remove(g->b, pool_of(g, b), b);
    const as_device_ops *o = g->dev->ops;
    int r2 = s->small ? o->release(g->dev->ctx, s->addr, s->size)
                      : o->unmap(g->dev->ctx, s->addr, s->size);
    if (!r2 && !s->small)
        r2 = o->va_release(g->dev->ctx, s->addr, s->size);
    g->reserved -= s->size;
    g->releases++;
    g->nsegs--;
    free(s->ch);
    free(s->run);
    memset(s, 0, sizeof *s);
    int r3 = blk_drop(g, b);
    int r4 = ids_push(&g->free_s, si);
    return rc ? rc : r2 ? r2 : r3 ? r3 : r4;
}

/* emptyCache: release_cached_blocks, then every cached sBlock goes. */
static int gm_empty_cache(void *st)
{
    gm *g = st;
    int rc = release_cached(g);
    return rc ? rc : collect_counted(g);
}

/* ---- the rest of the contract --------------------------------------------------------- */

static int gm_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    gm *g = st;
    g->dev = dev;
    g->stitch = cfg[K_STITCH].i != 0;
    g->fraglimit = (uint64_t)cfg[K_FRAGLIMIT].i;
    g->reuselimit = cfg[K_REUSELIMIT].f;
    g->defraglevel = (int)cfg[K_DEFRAGLEVEL].i;
    g->autogc = (uint64_t)cfg[K_AUTOGC].i;
    g->realloc = cfg[K_REALLOC].i != 0;
    g->maxsplit = cfg[K_MAXSPLIT].i ? (uint64_t)cfg[K_MAXSPLIT].i * AS_MIB : UINT64_MAX;
    return 0;
}

static uint64_t cache_max(const gm *g)
{
    uint64_t m = 0;
    for (size_t i = 0; i < g->cached.n; i++)
        m = g->sb[g->cached.v[i]].size > m ? g->sb[g->cached.v[i]].size : m;
    return m;
}

static void gm_stats(const void *st, as_policy_stats *out)
{
    const gm *g = st;
    memset(out, 0, sizeof *out);
    out->allocated = g->allocated;
    out->reserved = g->reserved;
    out->free_bytes = g->reserved - g->allocated;
    uint64_t a = fp_max(g->b, &g->small), b = fp_max(g->b, &g->large), c = cache_max(g);
    out->largest_free = a > b ? (a > c ? a : c) : (b > c ? b : c);
    out->segments = g->nsegs;
    out->device_reserves = g->reserves;
    out->device_releases = g->releases;
    out->retries = g->retries;
}

/* One segment's blocks: tiling, no free neighbours, chunk flags and busy counts. *used:
 * the chunks used in it, *alloc the bytes of its allocated blocks. */
static int check_seg(const gm *g, uint32_t si, uint64_t *used, uint64_t *alloc, as_check_failure *f)
{
    const seg *s = &g->s[si];
    uint64_t at = s->addr;
    uint32_t prev = 0;
    for (uint32_t b = s->head; b; prev = b, b = g->b[b].next) {
        const blk *x = &g->b[b];
        if (x->addr != at || x->prev != prev || x->seg != si || x->size == 0 ||
            x->state == B_UNUSED || x->small != s->small)
            return as_check_fail(f, "segment %#llx: block %u does not tile it",
                                 (unsigned long long)s->addr, b);
        if (x->state == B_FREE && prev && g->b[prev].state == B_FREE)
            return as_check_fail(f, "free blocks %u and %u are neighbours", prev, b);
        if (x->state == B_ALLOC)
            *alloc += x->size;
        uint32_t busy = 0;
        for (uint64_t i = 0; !s->small && i < nchunks(x); i++)
            busy += s->ch[(x->addr - s->addr) / CHUNK + i].used;
        if (busy && x->state != B_HELD)
            return as_check_fail(f, "block %u (state %d) has chunks an sBlock uses", b, x->state);
        if (!s->small && x->state == B_ALLOC)
            busy = (uint32_t)nchunks(x);
        *used += busy;
        int ok = s->small || (x->state == B_FREE    ? busy == 0
                              : x->state == B_ALLOC ? busy == nchunks(x)
                                                    : busy > 0);
        if (!ok || (!s->small && x->state != B_FREE && x->busy != busy))
            return as_check_fail(f, "block %u (state %d) counts %u busy chunks, has %u", b,
                                 x->state, x->busy, busy);
        at += x->size;
    }
    if (at != s->addr + s->size)
        return as_check_fail(f, "segment %#llx: blocks end at %#llx", (unsigned long long)s->addr,
                             (unsigned long long)at);
    return 0;
}

/* The cache holds exactly the whole cached sBlocks, in (stream, size, addr) order. */
static int check_cache(const gm *g, uint64_t want, as_check_failure *f)
{
    const ids *c = &g->cached;
    for (size_t i = 0; i < c->n; i++) {
        const sblk *x = &g->sb[c->v[i]];
        if (i && !sb_below(&g->sb[c->v[i - 1]], x->stream, x->size, x->addr))
            return as_check_fail(f, "stitched pool out of order at %zu", i);
        if (x->state != S_FREE)
            return as_check_fail(f, "stitched pool holds %u, which is not free", c->v[i]);
    }
    if (c->n != want)
        return as_check_fail(f, "stitched pool holds %zu, %llu are free", c->n,
                             (unsigned long long)want);
    return 0;
}

/* Row f of slot k: each class's bin sound, under its bit, its blocks free blocks of the
 * slot's stream and this pool, in their class. *n: the blocks. */
static const char *check_row(const gm *g, const fpool *p, size_t k, unsigned f, int small,
                             uint64_t *n)
{
    uint32_t ri = p->row[k << 6 | f];
    const fprow *r = &p->rows[ri];
    if (r->owner != k || r->fl != f)
        return "a row's slot or power of two is wrong";
    for (unsigned c = 0; c < 32; c++) {
        uint32_t bi = ri << FP_SL | c;
        int treap = fp_is_treap(p, bi);
        uint32_t head = p->bins[bi].head, want = p->bins[bi].cnt & ~FP_TREAP;
        uint64_t cnt;
        const char *why = gb_bin_check(g->b, (uint32_t)g->nb, head, treap, &cnt);
        if (why)
            return why;
        if (cnt != want || !cnt != !(r->slmap >> c & 1) || (!cnt && treap))
            return "a class's count or bits disagree with its bin";
        for (uint32_t x = gb_bin_min(g->b, head, treap); x; x = gb_bin_next(g->b, head, treap, x)) {
            unsigned xf, xc;
            fp_class(g->b[x].size, &xf, &xc);
            if (xf != f || xc != c || g->b[x].stream != p->stream[k] || g->b[x].state != B_FREE ||
                g->s[g->b[x].seg].small != small || g->b[x].small != small || g->b[x].bin != bi)
                return "a pool holds a block that is not its own free block there";
        }
        *n += cnt;
    }
    return NULL;
}

/* The pool holds exactly the free blocks of its kind, by stream, in (size, addr) order. */
static int check_pool(const gm *g, const fpool *p, uint64_t want, int small, as_check_failure *f)
{
    const char *why = NULL, *name = small ? "small" : "large";
    uint64_t total = 0;
    for (size_t i = 0; !why && i < p->ns; i++) {
        size_t k = p->ord[i];
        if (k >= p->ns || (i && p->stream[p->ord[i - 1]] >= p->stream[k])) {
            why = "its streams are out of order";
            break;
        }
        for (unsigned fl = 0; !why && fl < 64; fl++) {
            uint32_t ri = p->row[k << 6 | fl];
            if (!ri) {
                why = p->flmap[k] >> fl & 1 ? "a row's bit is set without the row" : NULL;
                continue;
            }
            if (ri >= p->nrows || !(p->flmap[k] >> fl & 1) != !p->rows[ri].slmap)
                why = "a row is out of range or its bit is wrong";
            else
                why = check_row(g, p, k, fl, small, &total);
        }
    }
    if (why)
        return as_check_fail(f, "%s pool: %s", name, why);
    if (total != want)
        return as_check_fail(f, "%s pool holds %llu, %llu are free", name,
                             (unsigned long long)total, (unsigned long long)want);
    return 0;
}

/* Is chunk i of segment si mapped by sBlock s? */
static int mapped_by(const gm *g, uint32_t si, uint64_t i, uint32_t s)
{
    const chunk *c = &g->s[si].ch[i];
    uint32_t k = 0;
    while (k < c->nmap && c->map[k] != s)
        k++;
    return k < c->nmap;
}

/* sBlock s: busy count, maps both ways. *used: its used prefix. */
static int check_sblk(const gm *g, uint32_t s, uint64_t *used, as_check_failure *f)
{
    const sblk *x = &g->sb[s];
    uint32_t busy = 0;
    for (uint32_t i = 0; i < x->n; i++) {
        if (x->ref[i] == DEAD)
            continue;
        uint32_t si = (uint32_t)(x->ref[i] >> 32);
        uint64_t ci = (uint32_t)x->ref[i];
        int inuse = g->s[si].ch[ci].used || g->b[block_at(g, si, ci)].state == B_ALLOC;
        if (!mapped_by(g, si, ci, s) || (i < x->used && !g->s[si].ch[ci].used))
            return as_check_fail(f, "sBlock %u: chunk %u is not mapped or not used", s, i);
        busy += (uint32_t)inuse;
    }
    if (busy != x->busy || (x->state == S_FREE && busy) || (x->state != S_ACTIVE && x->used) ||
        (x->gc && x->state != S_ACTIVE))
        return as_check_fail(f, "sBlock %u (state %d): busy %u, counted %u", s, x->state, x->busy,
                             busy);
    *used += x->used;
    return 0;
}

/* Each segment's runs: in range, over chunks their sBlock maps, and as many chunks per
 * sBlock as it maps outside released segments. */
static int check_runs(const gm *g, as_check_failure *f)
{
    uint64_t *cnt = calloc(g->nsb + 1, sizeof *cnt);
    int rc = cnt ? 0 : AS_ENOMEM;
    for (uint32_t si = 1; !rc && si < g->ns; si++) {
        const seg *sg = &g->s[si];
        for (size_t k = 0; sg->head && !rc && k < sg->nrun; k++) {
            const srun *r = &sg->run[k];
            int ok = !sg->small && r->lo < r->hi && r->hi <= sg->size / CHUNK && r->sb &&
                     r->sb < g->nsb && g->sb[r->sb].state != S_UNUSED;
            for (uint64_t i = r->lo; ok && i < r->hi; i++)
                ok = mapped_by(g, si, i, r->sb);
            if (!ok)
                rc = as_check_fail(f, "segment %u: a run of sBlock %u is not its own", si, r->sb);
            else
                cnt[r->sb] += r->hi - r->lo;
        }
    }
    for (uint32_t s = 1; !rc && s < g->nsb; s++) {
        uint64_t live = 0;
        for (uint32_t i = 0; g->sb[s].state != S_UNUSED && i < g->sb[s].n; i++)
            live += g->sb[s].ref[i] != DEAD;
        if (live != cnt[s])
            rc = as_check_fail(f, "sBlock %u maps %llu chunks, its runs cover %llu", s,
                               (unsigned long long)live, (unsigned long long)cnt[s]);
    }
    free(cnt);
    return rc;
}

static int gm_check(const void *st, as_check_failure *f)
{
    const gm *g = st;
    uint64_t used = 0, alloc = 0, resv = 0, segs = 0, nfree[2] = {0, 0}, cached = 0, prefix = 0;
    for (uint32_t si = 1; si < g->ns; si++) {
        if (!g->s[si].head)
            continue;
        int rc = check_seg(g, si, &used, &alloc, f);
        if (rc)
            return rc;
        resv += g->s[si].size;
        segs++;
        for (uint32_t b = g->s[si].head; b; b = g->b[b].next)
            nfree[g->s[si].small] += g->b[b].state == B_FREE;
    }
    for (uint32_t s = 1; s < g->nsb; s++) {
        if (g->sb[s].state == S_UNUSED)
            continue;
        int rc = check_sblk(g, s, &prefix, f);
        if (rc)
            return rc;
        cached += g->sb[s].state == S_FREE;
        if (g->sb[s].state == S_ACTIVE)
            alloc += (uint64_t)g->sb[s].used * CHUNK;
    }
    int rc = check_runs(g, f);
    if (!rc)
        rc = check_pool(g, &g->large, nfree[0], 0, f);
    if (!rc)
        rc = check_pool(g, &g->small, nfree[1], 1, f);
    if (!rc)
        rc = check_cache(g, cached, f);
    if (rc)
        return rc;
    uint64_t direct = 0;
    for (uint32_t b = 1; b < g->nb; b++)
        if (g->b[b].state == B_ALLOC && !g->s[g->b[b].seg].small)
            direct += nchunks(&g->b[b]);
    if (used != direct + prefix)
        return as_check_fail(f, "%llu chunks used, blocks and sBlocks hold %llu",
                             (unsigned long long)used, (unsigned long long)(direct + prefix));
    if (alloc != g->allocated || resv != g->reserved || segs != g->nsegs ||
        resv != g->dev->ops->reserved(g->dev->ctx))
        return as_check_fail(f, "allocated %llu/%llu, reserved %llu/%llu, segments %llu/%llu",
                             (unsigned long long)alloc, (unsigned long long)g->allocated,
                             (unsigned long long)resv, (unsigned long long)g->reserved,
                             (unsigned long long)segs, (unsigned long long)g->nsegs);
    return 0;
}

typedef struct wseg {
    uint64_t addr;
    uint32_t node;
    uint8_t sblk;
} wseg;

static int wseg_cmp(const void *a, const void *b)
{
    const wseg *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int walk_alloc(uint64_t id, int pending, uint64_t addr, uint64_t size, uint64_t stream,
                      as_walk_fn fn, void *user)
{
    as_walk_item it = {.kind = AS_WALK_BLOCK,
                       .addr = addr,
                       .size = size,
                       .stream = stream,
                       .state = pending ? AS_BLOCK_PENDING : AS_BLOCK_ALLOCATED,
                       .id = id};
    return fn(user, &it);
}

/* A segment's blocks; a held pBlock shows its free chunks (its used ones are served at
 * their sBlock's address). */
static int walk_blocks(const gm *g, const seg *s, as_walk_fn fn, void *user)
{
    for (uint32_t b = s->head; b; b = g->b[b].next) {
        const blk *x = &g->b[b];
        as_walk_item it = {
            .kind = AS_WALK_BLOCK, .stream = x->stream, .state = AS_BLOCK_FREE, .id = UINT64_MAX};
        int rc = 0;
        if (x->state == B_ALLOC) {
            rc = walk_alloc(x->id, x->pending, x->addr, x->size, x->stream, fn, user);
        } else if (x->state == B_FREE) {
            it.addr = x->addr;
            it.size = x->size;
            rc = fn(user, &it);
        } else {
            uint64_t first = (x->addr - s->addr) / CHUNK, n = nchunks(x);
            for (uint64_t i = 0; !rc && i < n; i++) {
                if (s->ch[first + i].used)
                    continue;
                uint64_t j = i;
                while (j < n && !s->ch[first + j].used)
                    j++;
                it.addr = x->addr + i * CHUNK;
                it.size = (j - i) * CHUNK;
                rc = fn(user, &it);
                i = j;
            }
        }
        if (rc)
            return rc;
    }
    return 0;
}

static int gm_walk(const void *st, as_walk_fn fn, void *user)
{
    const gm *g = st;
    size_t n = 0;
    wseg *w = malloc((g->ns + g->nsb + 1) * sizeof *w);
    if (!w)
        return AS_ENOMEM;
    for (uint32_t si = 1; si < g->ns; si++)
        if (g->s[si].head)
            w[n++] = (wseg){.addr = g->s[si].addr, .node = si};
    for (uint32_t s = 1; s < g->nsb; s++)
        if (g->sb[s].state == S_ACTIVE)
            w[n++] = (wseg){.addr = g->sb[s].addr, .node = s, .sblk = 1};
    if (n > 1)
        qsort(w, n, sizeof *w, wseg_cmp);
    int rc = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        as_walk_item it = {.kind = AS_WALK_SEGMENT, .id = UINT64_MAX};
        if (w[i].sblk) {
            const sblk *x = &g->sb[w[i].node];
            it.addr = x->addr;
            it.size = x->size;
            it.stream = x->stream;
            it.pool = "large";
            rc = fn(user, &it);
            if (!rc)
                rc = walk_alloc(x->id, x->pending, x->addr, (uint64_t)x->used * CHUNK, x->stream,
                                fn, user);
        } else {
            const seg *s = &g->s[w[i].node];
            it.addr = s->addr;
            it.size = s->size;
            it.stream = g->b[s->head].stream;
            it.pool = s->small ? "small" : "large";
            rc = fn(user, &it);
            if (!rc)
                rc = walk_blocks(g, s, fn, user);
        }
    }
    free(w);
    return rc;
}

/* Everything back to the device, then the host memory. */
static void gm_fini(void *st)
{
    gm *g = st;
    const as_device_ops *o = g->dev->ops;
    for (uint32_t s = 1; s < g->nsb; s++)
        if (g->sb[s].state != S_UNUSED) {
            sblk_unalias(g, &g->sb[s], g->sb[s].n);
            o->va_release(g->dev->ctx, g->sb[s].addr, g->sb[s].size);
            free(g->sb[s].ref);
        }
    for (uint32_t si = 1; si < g->ns; si++) {
        seg *s = &g->s[si];
        if (!s->head)
            continue;
        if (s->small) {
            o->release(g->dev->ctx, s->addr, s->size);
        } else {
            o->unmap(g->dev->ctx, s->addr, s->size);
            o->va_release(g->dev->ctx, s->addr, s->size);
            for (uint64_t i = 0; i < s->size / CHUNK; i++)
                free(s->ch[i].map);
            free(s->ch);
            free(s->run);
        }
    }
    free(g->s);
    free(g->b);
    free(g->sb);
    fp_free(&g->small);
    fp_free(&g->large);
    ids *all[] = {&g->free_s, &g->free_b, &g->free_sb, &g->cached, &g->work};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]->v);
    memset(g, 0, sizeof *g);
}

AS_BUILTIN_ENTRIES(gmlake, gm_alloc, gm_free)

const as_policy as_policy_gmlake = {
    .name = "gmlake",
    .summary = "GMLake (ASPLOS 2024): PyTorch 2.0's allocator over 2 MiB chunks, free blocks "
               "stitched into one virtual range",
    .abi = AS_POLICY_ABI,
    .knobs = knobs,
    .n_knobs = K_N,
    .state_size = sizeof(gm),
    .init = gm_init,
    .alloc = gm_alloc,
    .free = gm_free,
    .empty_cache = gm_empty_cache,
    .stats = gm_stats,
    .check = gm_check,
    .walk = gm_walk,
    .fini = gm_fini,
};
