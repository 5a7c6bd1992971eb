/*
 * torch.c - PyTorch 2.11's CUDACachingAllocator (DeviceCachingAllocator, native backend),
 * reproduced decision for decision (c10/cuda/CUDACachingAllocator.cpp: round_size,
 * get_allocation_size, get_free_block, should_split, the malloc retry ladder, GC, release,
 * expandable segments, empty_cache).
 *
 * Blocks live in one node array; each segment's blocks form an address-ordered chain
 * (prev/next). Free mapped blocks sit in their pool's free set, ordered by
 * (stream, size, addr) as PyTorch's BlockComparatorSize orders its std::set (per-stream
 * size bins of short sorted lists, torch_fset.h); unmapped ranges of expandable segments
 * sit in their stream's address-ordered treap, the order of PyTorch's (stream, addr)
 * `unmapped` set within one stream. Invariants: a block is in a free set
 * iff it is free (mapped -> blocks, unmapped -> unmapped); no two adjacent
 * blocks of a chain are both free with the same mapped state; a segment's first node never
 * changes (merges keep the lower-address node, splits keep the front node), so seg.head is
 * stable. Block identity never affects a decision in PyTorch 2.11 (its registration counter
 * is not part of the comparator), so which node survives a merge is ours to choose.
 *
 * Equal-size free blocks tie on the lower address, so decisions depend on where the device
 * put each segment: over the simulated device's default placement (the CUDA driver's
 * chunked heap, sim/simdev.h) this reproduces all 126 capped/uncapped H200 runs of the key
 * and both multi-stream runs event for event (tests/test_torch_fidelity.c); given the
 * recorded cudaMalloc addresses, it reproduces every segment event and address of the 90
 * recorded key replays (replay/data/torch-key-replay).
 * Where the policy reads the device capacity, it is PyTorch's memory fraction. Its
 * decisions on it are questions to the device (cap_test: the fraction check, the
 * garbage-collection threshold, whether a limit is set), each evaluated exactly as PyTorch
 * computes it, so a device carrying many capacities at once splits them only where the
 * answer differs; only total_mem above an H200's reads the number itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "common.h"
#include "grow.h"
#include "knobs.h"
#include "policy.h"
#include "torch_fset.h"

#define MIN_BLOCK 512ull                  /* kMinBlockSize */
#define SMALL_SIZE (1ull << 20)           /* kSmallSize: largest small request */
#define SMALL_BUFFER (2ull << 20)         /* kSmallBuffer: small segment / page */
#define MIN_LARGE_ALLOC (10ull << 20)     /* kMinLargeAlloc */
#define ROUND_LARGE (2ull << 20)          /* kRoundLarge */
#define DEFAULT_TOTAL_MEM 150109880320ull /* H200 totalGlobalMem, when no capacity is set */

enum {
    K_MAXSPLIT,
    K_ROUNDUP,
    K_EXPANDABLE,
    K_GC,
    K_LARGE_SEGMENT,
    K_MAX_NON_SPLIT,
    K_SYNC_FREES,
    K_COUNT
};

static const as_knob torch_knobs[K_COUNT] = {
    [K_MAXSPLIT] = AS_KNOB_MAXSPLIT,
    [K_ROUNDUP] = AS_KNOB_ROUNDUP,
    [K_EXPANDABLE] = {.name = "expandable",
                      .alias = "expandable_segments",
                      .type = AS_KNOB_BOOL,
                      .unit = "",
                      .def = 0,
                      .min = 0,
                      .max = 1,
                      .help = "grow one segment per stream and pool by mapping pages "
                              "(2 MiB small, large_segment MiB large)"},
    [K_GC] = {.name = "gc",
              .alias = "garbage_collection_threshold",
              .type = AS_KNOB_FLOAT,
              .unit = "fraction",
              .fdef = 0.0,
              .fmin = 0.0,
              .fmax = 1.0,
              .fmax_open = 1,
              .help = "free old cached blocks once reserved exceeds this fraction of the "
                      "capacity (needs a capacity); 0 = off"},
    [K_LARGE_SEGMENT] = {.name = "large_segment",
                         .alias = "large_segment_size_mb",
                         .type = AS_KNOB_INT,
                         .unit = "MiB",
                         .def = 20,
                         .min = 12, /* PyTorch: > 10; here whole 2 MiB pages */
                         .max = 1 << 20,
                         .multiple = 2,
                         .help = "segment for 1-10 MiB requests and large expandable page"},
    [K_MAX_NON_SPLIT] = {.name = "max_non_split_rounding",
                         .alias = "max_non_split_rounding_mb",
                         .type = AS_KNOB_INT,
                         .unit = "MiB",
                         .def = 20,
                         .min = 0,
                         .max = INT64_MAX / (1 << 20),
                         .help = "an oversize request may take an unsplit free block up to "
                                 "this much bigger"},
    /* A trace records when each deferred free completed, so by default a FREE_REQ'd block
     * waits for its FREE (the policy contract). PyTorch itself completes them all when
     * empty_cache() or the last OOM retry synchronises events: this knob models that. */
    [K_SYNC_FREES] = {.name = "sync_frees",
                      .type = AS_KNOB_BOOL,
                      .unit = "",
                      .def = 0,
                      .min = 0,
                      .max = 1,
                      .help = "empty_cache and the last OOM retry complete pending frees (the "
                              "trace's later FREE is then accepted as done)"},
};

/* ---- state -------------------------------------------------------------------------- */

typedef struct seg {
    uint64_t addr, size; /* cudaMalloc range, or the whole VA range if expandable */
    uint64_t stream;
    uint64_t page;   /* expandable: page size; else 0 */
    uint64_t mapped; /* expandable: bytes mapped now */
    uint32_t head;   /* node at addr; stable for the segment's life */
    uint32_t next_free;
    uint16_t pool; /* its private pool (as_request.pool), 0 = the default pool */
    uint8_t live, small, expandable;
} seg;

typedef union pool {
    struct {
        fset blocks;    /* free mapped blocks; per stream, the unmapped ranges too */
        uint64_t calls; /* get_free_blocks_call_count */
        /* The smallest segment ever made in the pool (UINT64_MAX before the first): a free
         * block that is a whole segment is no smaller, so the walks that look for whole
         * segments (garbage_collect, release_blocks) start there. It never rises. */
        uint64_t whole_min;
        uint8_t small;
    };
    uint8_t size[128]; /* a pool's address is a shift of its index */
} pool;

_Static_assert(sizeof(pool) == 128, "a pool is 128 bytes");

typedef struct torch_state {
    const as_device *dev;
    /* configuration */
    uint64_t max_split;              /* UINT64_MAX when off */
    uint64_t max_non_split;          /* bytes */
    uint64_t large_seg;              /* bytes */
    uint8_t divlg[AS_DIV_INTERVALS]; /* log2 of roundup_power2_divisions per interval, 0 none */
    int use_div, expandable, sync_frees;
    double gc;
    int limited;   /* a memory-fraction limit is set (the device's capacity, via cap_test) */
    int gc_on;     /* gc_active(): limited and a positive threshold */
    unsigned feat; /* the F_ bits of the settings: which copy of alloc_cached runs */
    uint64_t total_mem;
    /* nodes and segments */
    blk *b;
    uint32_t nb, bcap, bfree;
    seg *s;
    uint32_t ns, scap, sfree;
    pool pools[2]; /* 0 large, 1 small */
    uint32_t *pending;
    uint32_t npending, pcap;
    uint32_t *scratch;
    uint32_t nscratch, scratch_cap;
    uint8_t *released; /* released[k]: private pool k is freeable (empty_pool); k < nreleased */
    uint32_t nreleased;
    /* accounting */
    /* allocated: PyTorch's active bytes too (a pending block is both until its FREE) */
    uint64_t reserved, allocated;
    uint64_t nsegments, nexp_live;
    uint64_t dev_reserves, dev_releases, retries, ooms;
    uint64_t early_done; /* frees completed by an event sync before their FREE arrived */
} torch_state;

/* ---- node and segment storage ------------------------------------------------------ */

/* A node index for a new block (its slot's generation kept, the rest for the caller to
 * fill); 0 on host OOM. The recycled list is the common case, inline. */
static uint32_t node_grow(torch_state *t);

static inline uint32_t node_take(torch_state *t)
{
    uint32_t i = t->bfree;
    if (__builtin_expect(!i, 0))
        return node_grow(t);
    t->bfree = t->b[i].next;
    return i;
}

static uint32_t node_grow(torch_state *t)
{
    if (t->nb + 1 >= t->bcap) { /* the call only when it grows: this is the hot path */
        int first = !t->b;
        /* 16 nodes to start (1 KiB): a run's first page is shared with the rest of its
         * state, where 256 took 16 KiB (sim/README.md, Performance: each extra run) */
        if (as_grow32((void **)&t->b, &t->bcap, (size_t)t->nb + 2, sizeof *t->b, 16) < 0)
            return 0;
        if (first)
            t->b[0] = (blk){0}; /* index 0 means none */
    }
    uint32_t i = ++t->nb;
    t->b[i].gen = 0;
    return i;
}

static uint32_t node_new(torch_state *t)
{
    uint32_t i = node_take(t);
    if (i)
        t->b[i] = (blk){.gen = t->b[i].gen};
    return i;
}

static void node_del(torch_state *t, uint32_t i)
{
    t->b[i].state = B_FREE;
    t->b[i].in = IN_NONE;
    t->b[i].size = 0;
    t->b[i].next = t->bfree;
    t->b[i].gen++;
    t->bfree = i;
}

static uint32_t seg_new(torch_state *t)
{
    uint32_t i;
    if (t->sfree) {
        i = t->sfree;
        t->sfree = t->s[i].next_free;
    } else {
        if (t->ns + 1 >= t->scap) {
            int first = !t->s;
            if (as_grow32((void **)&t->s, &t->scap, (size_t)t->ns + 2, sizeof *t->s, 8) < 0)
                return 0;
            if (first)
                t->s[0] = (seg){0};
        }
        i = ++t->ns;
    }
    t->s[i] = (seg){.live = 1};
    return i;
}

static void seg_del(torch_state *t, uint32_t i)
{
    t->s[i].live = 0;
    t->s[i].next_free = t->sfree;
    t->sfree = i;
}

/* ---- helpers ------------------------------------------------------------------------ */

static inline pool *pool_of(torch_state *t, uint32_t i)
{
    return &t->pools[t->b[i].small];
}

static inline int is_exp(const torch_state *t, uint32_t i)
{
    return t->b[i].exp;
}

/* A block's state and mapped bytes as one number (they are adjacent in blk). */
static inline unsigned state_mapped(const blk *x)
{
    uint16_t v;
    memcpy(&v, &x->state, sizeof v);
    return v;
}

/* state_mapped of a free mapped block (a constant once inlined) */
static inline unsigned free_mapped(void)
{
    const blk x = {.state = B_FREE, .mapped = 1};
    return state_mapped(&x);
}
#define FREE_MAPPED free_mapped()

static inline int is_split(const blk *b, uint32_t i)
{
    return b[i].prev || b[i].next;
}

/* ---- private pools -------------------------------------------------------------------
 * A private pool (a CUDA graph's, a MemPool's) has its own large and small BlockPools in
 * PyTorch: its blocks never serve another pool's requests, nor the default pool's its.
 * Here its blocks sit in the same free sets under their own keys, stream_key(stream,
 * pool): a lookup never leaves its key's slot, so the search is PyTorch's within the
 * pool. A private pool is live (use_count > 0) until the trace releases it (an
 * EMPTY_CACHE of the pool: torch_empty_pool); release_cached_blocks (empty_cache, the OOM
 * retry) gives back the default pools' free segments, then each released pool's (small,
 * then large, as PyTorch walks graph_pools_freeable), and the garbage collector takes the
 * default large pool alone. A private pool's request comes while its capture or
 * use_mem_pool is underway, so its OOM retry releases nothing (alloc_new). */
#define POOL_SHIFT 48
#define POOL_MASK ((1ull << POOL_SHIFT) - 1)

static inline int in_private(const torch_state *t, uint32_t i)
{
    return t->s[t->b[i].seg].pool != 0;
}

static inline uint32_t pool_number(const torch_state *t, uint32_t i)
{
    return t->s[t->b[i].seg].pool;
}

/* The free-set key of a request: the stream itself in the default pool (so a trace
 * without pools runs exactly as before), else the pool in the top 16 bits. -1 for a
 * stream value that cannot share the key with a pool (at or above 2^48: cudaStream_t
 * values are user-space pointers, below 2^47) or a pool number of 2^16 and up. */
static inline int stream_key(const as_request *req, uint64_t *key)
{
    if (!req->pool) {
        *key = req->stream;
        return 0;
    }
    if (req->stream >> POOL_SHIFT || req->pool >> 16)
        return -1;
    *key = req->stream | (uint64_t)req->pool << POOL_SHIFT;
    return 0;
}

static inline int gc_active(const torch_state *t)
{
    return t->limited && t->gc > 0.0;
}

/* insert_into_blocks. The stream's slot exists (torch_alloc makes it before any block of
 * the stream can be freed); only a bin chunk's first use can fail (host OOM). */
static inline int insert_free(torch_state *t, uint32_t i)
{
    pool *pl = pool_of(t, i);
    t->b[i].gc_base = pl->calls;
    t->b[i].in = IN_BLOCKS;
    return as_tfs_insert(t->b, &pl->blocks, i);
}

static void insert_unmapped(torch_state *t, uint32_t i)
{
    tfs_treap_insert(t->b, &pool_of(t, i)->blocks.s[t->b[i].sx].unmapped, 1, i);
    t->b[i].in = IN_UNMAPPED;
}

static inline void erase_any(torch_state *t, uint32_t i)
{
    pool *pl = pool_of(t, i);
    if (t->b[i].in == IN_BLOCKS)
        as_tfs_erase(t->b, &pl->blocks, i);
    else if (t->b[i].in == IN_UNMAPPED)
        tfs_treap_erase(t->b, &pl->blocks.s[t->b[i].sx].unmapped, i);
    t->b[i].in = IN_NONE;
}

/* PyTorch's round_size (as_round_size's rule, inline and without divisions). size >= 1:
 * sizes below MIN_BLOCK round up to it too. */
static inline uint64_t round_size(const torch_state *t, uint64_t size)
{
    uint64_t r = (size + MIN_BLOCK - 1) & ~(MIN_BLOCK - 1);
    if (!t->use_div)
        return r;
    /* roundup_power2_divisions: interval k = clamp(floor(log2 size) - 20, 0, 15), and a
     * size above MIN_BLOCK * d goes up to the next of d steps of its power of two */
    unsigned lg = 63u - (unsigned)__builtin_clzll(size);
    unsigned k = lg < 21 ? 0 : lg - 20 >= AS_DIV_INTERVALS ? AS_DIV_INTERVALS - 1 : lg - 20;
    unsigned dl = t->divlg[k];
    if (!dl || size <= MIN_BLOCK << dl)
        return r;
    if (!(size & (size - 1)))
        return size;
    uint64_t step = (1ull << lg) >> dl;
    if (!step)
        return 2ull << lg;
    return (size + step - 1) & ~(step - 1);
}

static uint64_t allocation_size(const torch_state *t, uint64_t size)
{
    if (size <= SMALL_SIZE)
        return SMALL_BUFFER;
    if (size < MIN_LARGE_ALLOC)
        return t->large_seg;
    return as_align_up(size, ROUND_LARGE);
}

/* try_merge_blocks: a and b adjacent (a before b), one of them the block being placed,
 * which is in no treap. Merges when the other one is free with the same mapped state.
 * Returns the surviving node (always the lower one, a). */
static uint32_t merge_pair(torch_state *t, uint32_t a, uint32_t bb, uint32_t other)
{
    blk *b = t->b;
    if (!other || b[other].state != B_FREE || b[a].mapped != b[bb].mapped)
        return 0;
    erase_any(t, other);
    b[a].size += b[bb].size;
    b[a].next = b[bb].next;
    if (b[a].next)
        b[b[a].next].prev = a;
    node_del(t, bb);
    return a;
}

/* Merge block x (in no treap) with its free neighbours; returns the survivor. */
static uint32_t merge_neighbours(torch_state *t, uint32_t x)
{
    uint32_t p = t->b[x].prev;
    if (p && merge_pair(t, p, x, p))
        x = p;
    uint32_t n = t->b[x].next;
    if (n)
        merge_pair(t, x, n, n);
    return x;
}

/* Splits node i at offset `size`: i keeps the front, a new node gets the rest (same
 * segment, stream and mapped state, free). Returns the new node or 0 on host OOM. */
static inline __attribute__((always_inline)) uint32_t split_after(torch_state *t, uint32_t i,
                                                                  uint64_t size)
{
    uint32_t r = node_take(t);
    if (!r)
        return 0;
    blk *b = t->b, *n = &b[r];
    uint32_t nx = b[i].next;
    /* Field by field, not a compound literal: inline, the caller's own stores to the new
     * node (its set membership) replace these instead of following a 64-byte clear. */
    n->addr = b[i].addr + size;
    n->size = b[i].size - size;
    n->id = 0;
    n->prev = i;
    n->next = nx;
    n->seg = b[i].seg; /* l, r, up and bin: set as it goes into a set */
    n->sx = b[i].sx;
    n->state = B_FREE;
    n->mapped = b[i].mapped;
    n->in = IN_NONE;
    n->small = b[i].small;
    n->exp = b[i].exp;
    b[nx].prev = r; /* node 0 too when there is none: its prev is never read */
    b[i].next = r;
    b[i].size = size;
    return r;
}

/* The (state, mapped, in, small, exp, bin) bytes of a node as one word. */
static inline uint64_t flag_word(const blk *x)
{
    uint64_t v;
    memcpy(&v, (const char *)x + offsetof(blk, state), sizeof v);
    return v;
}

static inline void set_flag_word(blk *x, uint64_t v)
{
    memcpy((char *)x + offsetof(blk, state), &v, sizeof v);
}

/* The bytes of flag_word that a split's remainder inherits: mapped, small, exp. */
#define FLAG_INHERIT (0xffull << 8 | 0xffffull << 24)
#define FLAG_IN_BLOCKS ((uint64_t)IN_BLOCKS << 16)

/* split_after for torch_alloc's hot path: node i (had bytes, free or just handed out),
 * keeps `size`, node r (taken by the caller) gets the rest as a free block bound for the
 * free set (in = IN_BLOCKS; its links, bin and gc_base are the caller's). Returns r's
 * address. */
static inline __attribute__((always_inline)) uint64_t split_free(blk *b, uint32_t i, uint32_t r,
                                                                 uint64_t size, uint64_t had)
{
    blk *n = &b[r];
    uint32_t nx = b[i].next;
    uint64_t addr = b[i].addr + size;
    n->addr = addr;
    n->size = had - size;
    n->prev = i;
    n->next = nx;
    n->seg = b[i].seg;
    n->sx = b[i].sx;
    set_flag_word(n, (flag_word(&b[i]) & FLAG_INHERIT) | FLAG_IN_BLOCKS);
    b[nx].prev = r; /* node 0 too when there is none: its prev is never read */
    b[i].next = r;
    b[i].size = size;
    return addr;
}

static int scratch_push(torch_state *t, uint32_t v)
{
    if (t->nscratch == t->scratch_cap &&
        as_grow32((void **)&t->scratch, &t->scratch_cap, (size_t)t->nscratch + 1,
                  sizeof *t->scratch, 64) < 0)
        return AS_ENOMEM;
    t->scratch[t->nscratch++] = v;
    return 0;
}

/* ---- device-facing steps ------------------------------------------------------------ */

static int dev_err(int rc)
{
    return rc == AS_EINVAL ? AS_EINVAL : AS_EDEVICE;
}

/* release_block: cudaFree of a whole free non-expandable segment. */
static int release_block(torch_state *t, uint32_t i)
{
    seg *s = &t->s[t->b[i].seg];
    int rc = t->dev->ops->release(t->dev->ctx, s->addr, s->size);
    if (rc)
        return dev_err(rc);
    erase_any(t, i);
    t->reserved -= s->size;
    t->nsegments--;
    t->dev_releases++;
    seg_del(t, t->b[i].seg);
    node_del(t, i);
    return 0;
}

/* map_block: maps whole pages covering [addr, addr+size) of unmapped node i. Returns the
 * merged free node (> 0), 0 when the device refused, < 0 on error. */
static int64_t map_block(torch_state *t, uint32_t i, uint64_t size)
{
    blk *b = t->b;
    seg *s = &t->s[b[i].seg];
    uint64_t off = b[i].addr - s->addr;
    uint64_t end = as_align_up(off + size, s->page);
    uint64_t len = end - off;
    if (size == 0 || len == 0)
        return 0;
    int rc = t->dev->ops->map(t->dev->ctx, b[i].addr, len);
    if (rc == AS_DEV_OOM)
        return 0;
    if (rc)
        return dev_err(rc);
    erase_any(t, i);
    b[i].mapped = 1;
    if (len < b[i].size) {
        uint32_t r = split_after(t, i, len);
        if (!r)
            return AS_ENOMEM;
        b = t->b;
        b[r].mapped = 0;
        insert_unmapped(t, r);
    }
    uint32_t x = merge_neighbours(t, i);
    if (insert_free(t, x))
        return AS_ENOMEM;
    t->reserved += len;
    t->s[t->b[x].seg].mapped += len;
    t->dev_reserves++;
    return x;
}

/* unmap_block: unmaps the pages lying wholly inside free mapped node i. Returns the node
 * that now holds the unmapped range (> 0), or 0 when no whole page was inside. */
static int64_t unmap_block(torch_state *t, uint32_t i)
{
    blk *b = t->b;
    seg *s = &t->s[b[i].seg];
    uint64_t off = b[i].addr - s->addr;
    uint64_t ub = as_align_up(off, s->page);
    uint64_t ue = (off + b[i].size) / s->page * s->page;
    if (ub >= ue)
        return 0;
    uint64_t uaddr = s->addr + ub, ulen = ue - ub;
    int rc = t->dev->ops->unmap(t->dev->ctx, uaddr, ulen);
    if (rc)
        return dev_err(rc);
    erase_any(t, i);
    uint64_t before = uaddr - b[i].addr;
    uint64_t after = b[i].size - before - ulen;
    uint32_t u = i;
    if (before) {
        u = split_after(t, i, before);
        if (!u || insert_free(t, i))
            return AS_ENOMEM;
    }
    if (after) {
        uint32_t a = split_after(t, u, ulen);
        if (!a || insert_free(t, a))
            return AS_ENOMEM;
    }
    b = t->b;
    b[u].mapped = 0;
    u = merge_neighbours(t, u);
    insert_unmapped(t, u);
    t->reserved -= ulen;
    t->s[t->b[u].seg].mapped -= ulen;
    t->dev_releases++;
    return u;
}

static int release_expandable_segment(torch_state *t, uint32_t u)
{
    uint32_t si = t->b[u].seg;
    seg *s = &t->s[si];
    int rc = t->dev->ops->va_release(t->dev->ctx, s->addr, s->size);
    if (rc)
        return dev_err(rc);
    erase_any(t, u);
    node_del(t, u);
    seg_del(t, si);
    t->nexp_live--;
    return 0;
}

static inline int allocatable(const blk *b, uint32_t i)
{
    return i && b[i].state == B_FREE;
}

/* find_expandable_block: the lowest place where free-then-unmapped space of this stream
 * adds up to size, else a new segment. Returns a node (> 0), 0 if no VA, < 0 error. */
static int64_t find_expandable_block(torch_state *t, pool *pl, uint64_t stream, uint64_t size)
{
    blk *b = t->b;
    int64_t k = as_tfs_find(&pl->blocks, stream);
    for (uint32_t it = tfs_treap_min(b, pl->blocks.s[k].unmapped); it; it = tfs_treap_next(b, it)) {
        uint32_t c = it;
        if (allocatable(b, b[c].prev))
            c = b[c].prev;
        uint64_t bytes = 0;
        for (uint32_t x = c; bytes < size && allocatable(b, x); x = b[x].next)
            bytes += b[x].size;
        if (bytes >= size)
            return c;
    }
    uint64_t page = pl->small ? SMALL_BUFFER : t->large_seg;
    uint64_t want = t->total_mem + t->total_mem / 8;
    uint64_t vsize = page * ((want + page - 1) / page);
    uint64_t addr;
    int rc = t->dev->ops->va_reserve(t->dev->ctx, vsize, &addr);
    if (rc == AS_DEV_OOM)
        return 0;
    if (rc)
        return dev_err(rc);
    uint32_t si = seg_new(t);
    uint32_t n = si ? node_new(t) : 0;
    if (!n)
        return AS_ENOMEM;
    t->s[si].addr = addr;
    t->s[si].size = vsize;
    t->s[si].stream = stream;
    t->s[si].page = page;
    t->s[si].small = pl->small;
    t->s[si].expandable = 1;
    t->s[si].head = n;
    t->nexp_live++;
    if (vsize < pl->whole_min)
        pl->whole_min = vsize;
    blk *nb = &t->b[n];
    nb->addr = addr;
    nb->size = vsize;
    nb->seg = si;
    nb->sx = (uint32_t)k;
    nb->small = pl->small;
    nb->exp = 1;
    nb->mapped = 0;
    nb->state = B_FREE;
    insert_unmapped(t, n);
    return n;
}

static int64_t try_allocate_expandable_block(torch_state *t, pool *pl, uint64_t stream,
                                             uint64_t size)
{
    int64_t c = find_expandable_block(t, pl, stream, size);
    if (c <= 0)
        return c;
    if (!t->b[c].mapped) {
        uint64_t m = t->b[c].size < size ? t->b[c].size : size;
        c = map_block(t, (uint32_t)c, m);
        if (c <= 0)
            return c;
    }
    while (t->b[c].size < size) {
        uint32_t nx = t->b[c].next;
        if (!nx) /* larger than a whole expandable segment: no mapping can hold it */
            return 0;
        uint64_t rem = size - t->b[c].size;
        c = map_block(t, nx, rem < t->b[nx].size ? rem : t->b[nx].size);
        if (c <= 0)
            return c;
    }
    erase_any(t, (uint32_t)c);
    return c;
}

typedef struct params {
    uint64_t stream, size, alloc_size; /* stream: the free-set key, stream_key() */
    pool *pl;
    uint16_t priv; /* the request's private pool, 0 = default */
    uint32_t k;    /* the key's slot in pl's free set */
    uint32_t block;
} params;

/* alloc_block: 1 with p->block set, 0 when refused, < 0 on error. */
static int alloc_block(torch_state *t, params *p, int retry)
{
    if (retry)
        t->retries++;
    if (t->limited) { /* reserved + alloc_size > allowed refuses */
        int fits;
        int rc = as_dev_cap_at_least(t->dev, t->reserved + p->alloc_size, &fits);
        if (rc)
            return dev_err(rc);
        if (!fits)
            return 0;
    }
    if (t->expandable) {
        int64_t c = try_allocate_expandable_block(t, p->pl, p->stream, p->size);
        if (c < 0)
            return (int)c;
        if (c > 0) /* the segment is the key's, so of this pool */
            t->s[t->b[c].seg].pool = p->priv;
        p->block = (uint32_t)c;
        return c > 0;
    }
    uint64_t addr;
    int rc = t->dev->ops->reserve(t->dev->ctx, p->alloc_size, &addr);
    if (rc == AS_DEV_OOM)
        return 0;
    if (rc)
        return dev_err(rc);
    uint32_t si = seg_new(t);
    uint32_t n = si ? node_new(t) : 0;
    if (!n)
        return AS_ENOMEM;
    t->s[si].addr = addr;
    t->s[si].size = p->alloc_size;
    t->s[si].stream = p->stream;
    t->s[si].pool = p->priv;
    t->s[si].small = p->pl->small;
    t->s[si].head = n;
    if (p->alloc_size < p->pl->whole_min)
        p->pl->whole_min = p->alloc_size;
    blk *nb = &t->b[n];
    nb->addr = addr;
    nb->size = p->alloc_size;
    nb->seg = si;
    nb->sx = p->k;
    nb->small = p->pl->small;
    nb->exp = 0;
    nb->mapped = 1;
    nb->state = B_FREE;
    t->reserved += p->alloc_size;
    t->nsegments++;
    t->dev_reserves++;
    p->block = n;
    return 1;
}

/* get_free_block's walk from `it`, the first fit, over expandable blocks: with expandable
 * segments on, the one of the least size counting its unmapped tail (PyTorch compares
 * them so); without, the first block that is not expandable. The block or 0. */
static __attribute__((noinline)) uint32_t exp_fit(const torch_state *t, const fset *f, uint32_t it)
{
    const blk *b = t->b;
    if (t->expandable) {
#define EXP_SIZE(i) (b[i].size + (b[i].next && !b[b[i].next].mapped ? b[b[i].next].size : 0))
        /* A later block is no smaller, so it can beat `it` only when `it` has an unmapped
         * tail: without one the walk ends before it looks at the next block. */
        while (is_exp(t, it)) {
            uint64_t cur = EXP_SIZE(it);
            if (cur == b[it].size)
                break;
            uint32_t nx = as_tfs_next(b, f, it);
            if (!nx || EXP_SIZE(nx) >= cur)
                break;
            it = nx;
        }
#undef EXP_SIZE
        return it;
    }
    do
        it = as_tfs_next(b, f, it);
    while (it && is_exp(t, it));
    return it;
}

/* The settings that torch_alloc's path depends on, one bit each (torch_state.feat):
 * roundup divisions, garbage collection (a call count to keep), expandable segments,
 * max_split. alloc_cached has a copy for no setting and for each one alone, where the
 * bits are constants and the other settings' tests go, and a copy with F_ANY that reads
 * them all from the state (several settings at once, a private pool's request). */
enum { F_DIV = 1, F_GC = 2, F_EXP = 4, F_SPLIT = 8, F_ANY = 16 };

/* Is setting `bit` on, in the copy for F: the constant, or with F_ANY the state's `rt`. */
#define FEAT(F, bit, rt) ((F_ANY & (F)) ? (rt) : ((bit) & (F)) != 0)

/* get_free_block: best fit on (stream, size, addr) in slot k of pl's free set, with
 * PyTorch's expandable and oversize rules. The block (still in the free set, in bin *tbp:
 * the caller takes it out, or puts the split's remainder in its place), else 0. F: as
 * alloc_cached's (without F_EXP or F_ANY no block is expandable). */
static inline __attribute__((always_inline)) uint32_t
get_free_block(torch_state *t, pool *pl, uint32_t k, uint64_t size, tbin **tbp, unsigned F)
{
    blk *b = t->b;
    if (FEAT(F, F_GC, t->gc_on))
        pl->calls++;
    uint32_t it = as_tfs_lower_bound_at(b, &pl->blocks, k, size, tbp);
    if (!it)
        return 0;
    if ((F & (F_EXP | F_ANY)) && __builtin_expect(is_exp(t, it), 0)) {
        uint32_t nx = b[it].next;
        /* With expandable segments on, a block without an unmapped tail stands (exp_fit's
         * first test, inline: the common case there). */
        if (!FEAT(F, F_EXP, t->expandable) || (nx && !b[nx].mapped)) {
            if (!(it = exp_fit(t, &pl->blocks, it)))
                return 0;
            *tbp = tfs_binp(&pl->blocks, &pl->blocks.s[k], b[it].bin);
        }
    }
    if (FEAT(F, F_SPLIT, 1)) { /* with max_split off (UINT64_MAX) neither test holds */
        if (size < t->max_split && b[it].size >= t->max_split)
            return 0;
        if (size >= t->max_split && b[it].size >= size + t->max_non_split)
            return 0;
    }
    return it;
}

typedef struct gc_q {
    double gc;
    uint64_t need;
} gc_q;

/* PyTorch's threshold, (size_t)(gc * allowed), at capacity `allowed`, is at least need:
 * monotone in the capacity (a product with a positive factor, then truncation). */
static int gc_pred(const void *arg, uint64_t allowed)
{
    const gc_q *q = arg;
    return (uint64_t)(q->gc * (double)allowed) >= q->need;
}

/* *yes = threshold >= need, asked of the device. */
static int gc_threshold_at_least(torch_state *t, uint64_t need, int *yes)
{
    gc_q q = {.gc = t->gc, .need = need};
    int rc = t->dev->ops->cap_test(t->dev->ctx, gc_pred, &q, yes);
    return rc ? dev_err(rc) : 0;
}

/* PyTorch: target = reserved - threshold when reserved > threshold, then blocks are freed
 * while reclaimed < target. With r0 the reserved bytes on entry both tests are questions
 * on the threshold: reserved <= threshold, and reclaimed < r0 - threshold, which is
 * threshold < r0 - reclaimed (threshold < r0 and reclaimed <= r0: no wrap). */
static int garbage_collect(torch_state *t)
{
    pool *pl = &t->pools[0];
    blk *b = t->b;
    const uint64_t r0 = t->reserved;
    /* Every walk below looks at whole segments only (non-split blocks), so it visits the
     * blocks of whole_min bytes and up alone, in the same order: the ones it leaves out
     * are split (PyTorch's passes over them do nothing). */
    const uint64_t from = pl->whole_min;
    /* Only a free whole segment of the default pool, not expandable, can be released: with
     * none, both answers to the threshold question leave the state as it is, so it is not
     * asked (a curve would fork on it for nothing: sim/curve.h). */
    uint32_t any = 0;
    as_tfs_order(&pl->blocks);
    for (uint32_t i = as_tfs_first_from(b, &pl->blocks, from); i && !any;
         i = as_tfs_next_from(b, &pl->blocks, i, from))
        any = !is_split(b, i) && !is_exp(t, i) && !in_private(t, i);
    if (!any)
        return 0;
    int enough, rc = gc_threshold_at_least(t, r0, &enough);
    if (rc || enough)
        return rc;
    uint64_t reclaimed = 0, total_age = 0;
    int64_t count = 0;
    as_tfs_order(&pl->blocks);
    for (uint32_t i = as_tfs_first_from(b, &pl->blocks, from); i;
         i = as_tfs_next_from(b, &pl->blocks, i, from))
        if (!is_split(b, i) && !in_private(t, i)) {
            total_age += pl->calls - b[i].gc_base;
            count++;
        }
    if (count == 0)
        return 0;
    int freed = 1;
    for (;;) {
        if (!freed || count <= 0)
            break;
        if ((rc = gc_threshold_at_least(t, r0 - reclaimed, &enough)))
            return rc;
        if (enough) /* reclaimed >= target */
            break;
        double thr = (double)total_age / (double)count;
        freed = 0;
        uint32_t i = as_tfs_first_from(t->b, &pl->blocks, from);
        while (i) {
            uint32_t nx = as_tfs_next_from(t->b, &pl->blocks, i, from);
            uint64_t age = pl->calls - t->b[i].gc_base;
            if (!is_split(t->b, i) && !is_exp(t, i) && !in_private(t, i) && (double)age >= thr) {
                freed = 1;
                reclaimed += t->b[i].size;
                total_age -= age;
                count--;
                if ((rc = release_block(t, i)))
                    return rc;
            }
            i = nx;
        }
    }
    return 0;
}

/* release_available_cached_blocks: frees oversize blocks of the stream until the request
 * could fit; returns 1 on success, 0 otherwise (released blocks stay released). */
static int release_available(torch_state *t, params *p)
{
    if (t->max_split == UINT64_MAX)
        return 0;
    fset *f = &p->pl->blocks;
    uint64_t key = p->size < t->max_split ? t->max_split : p->size;
    uint32_t it = as_tfs_lower_bound(t->b, f, p->stream, key);
    if (it && !is_exp(t, it)) {
        int rc = release_block(t, it);
        return rc ? rc : 1;
    }
    /* No single block is big enough: free oversize blocks of the stream from the largest
     * down. (In PyTorch's one set the step back may land on another stream's block or
     * hit begin(); either ends the walk at once, as running out of this stream does.) */
    int64_t k = as_tfs_find(f, p->stream);
    if (k < 0)
        return 0;
    it = it ? as_tfs_prev(t->b, f, it) : as_tfs_last_of(t->b, f, (uint32_t)k);
    uint64_t released = 0;
    while (it && released < key && t->b[it].size >= t->max_split) {
        uint32_t cur = it;
        it = as_tfs_prev(t->b, f, it);
        if (!is_exp(t, cur)) {
            released += t->b[cur].size;
            int rc = release_block(t, cur);
            if (rc)
                return rc;
        }
    }
    return released >= key;
}

static inline int free_block(torch_state *t, uint32_t i);

/* Pending block i (already off the pending list) completes its free now, before the
 * trace's FREE: counted as done early, and freed into its pool. */
static int complete_early(torch_state *t, uint32_t i)
{
    t->early_done++;
    t->allocated -= t->b[i].size;
    return free_block(t, i);
}

/* synchronize_and_free_events: every pending free completes now. */
static int complete_pending(torch_state *t)
{
    while (t->npending) {
        int rc = complete_early(t, t->pending[--t->npending]);
        if (rc)
            return rc;
    }
    return 0;
}

/* release_blocks of the BlockPool pl of pool `which` (0 = the default pool, k = private
 * pool k): its free set in comparator order, the other pools' blocks passed over. */
static int release_blocks(torch_state *t, pool *pl, uint32_t which)
{
    t->nscratch = 0;
    /* Without expandable segments only whole segments are released: the walk visits the
     * blocks of whole_min bytes and up (the rest are split), in the same order. With them
     * every expandable block of the pool is unmapped, whatever its size. */
    const uint64_t from = t->nexp_live ? MIN_BLOCK : pl->whole_min;
    as_tfs_order(&pl->blocks);
    uint32_t i = as_tfs_first_from(t->b, &pl->blocks, from);
    while (i) {
        uint32_t nx = as_tfs_next_from(t->b, &pl->blocks, i, from);
        if (pool_number(t, i) != which) {
            /* another pool's (a live private pool keeps its cache) */
        } else if (is_exp(t, i)) {
            int rc = scratch_push(t, i);
            if (rc)
                return rc;
        } else if (!is_split(t->b, i)) {
            int rc = release_block(t, i);
            if (rc)
                return rc;
        }
        i = nx;
    }
    for (uint32_t k = 0; k < t->nscratch; k++) {
        int64_t u = unmap_block(t, t->scratch[k]);
        if (u < 0)
            return (int)u;
        if (u > 0 && !is_split(t->b, (uint32_t)u)) {
            int rc = release_expandable_segment(t, (uint32_t)u);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* synchronize_and_free_events(context, pool k), what emptyCache(k) does before releasing
 * the pool: pool k's pending frees complete now, the other pools' stay pending. The list
 * is walked from its end, so a swapped-in entry has been looked at. */
static int complete_pending_pool(torch_state *t, uint32_t k)
{
    for (uint32_t j = t->npending; j-- > 0;) {
        uint32_t i = t->pending[j];
        if (pool_number(t, i) != k)
            continue;
        uint32_t last = t->pending[--t->npending];
        t->pending[j] = last;
        t->b[last].pidx = j;
        int rc = complete_early(t, i);
        if (rc)
            return rc;
    }
    return 0;
}

/* A released private pool's free segments: small, then large. */
static int release_pool(torch_state *t, uint32_t k)
{
    int rc = release_blocks(t, &t->pools[1], k);
    return rc ? rc : release_blocks(t, &t->pools[0], k);
}

static int release_cached(torch_state *t)
{
    int rc = t->sync_frees ? complete_pending(t) : 0;
    if (!rc)
        rc = release_blocks(t, &t->pools[0], 0);
    if (!rc)
        rc = release_blocks(t, &t->pools[1], 0);
    for (uint32_t k = 1; k < t->nreleased && !rc; k++)
        if (t->released[k])
            rc = release_pool(t, k);
    return rc;
}

/* free_block's merges with a free mapped previous block p (and with n too when nf): p
 * absorbs them and is re-keyed in place (the lower node survives, as merge_neighbours
 * does). Out of line: one free in eight merges backwards on real traces. */
static __attribute__((noinline)) int free_merge_prev(torch_state *t, uint32_t i, uint32_t p,
                                                     uint32_t n, int nf)
{
    blk *b = t->b;
    pool *pl = pool_of(t, i);
    fset *f = &pl->blocks;
    uint64_t old_size = b[p].size;
    if (nf) {
        as_tfs_erase(b, f, n);
        b[p].size = old_size + b[i].size + b[n].size;
        b[p].next = b[n].next;
        b[b[n].next].prev = p; /* node 0's prev is never read */
        node_del(t, n);
    } else {
        b[p].size = old_size + b[i].size;
        b[p].next = n;
        b[n].prev = p;
    }
    node_del(t, i);
    b[p].gc_base = pl->calls;
    return as_tfs_regrow(b, f, p, old_size, p);
}

/* free_block: the block returns to its pool, merged with free neighbours. A free
 * neighbour of a mapped block is in the free set: the survivor is re-keyed in place
 * there. */
static inline __attribute__((always_inline)) int free_block(torch_state *t, uint32_t i)
{
    blk *b = t->b;
    b[i].state = B_FREE;
    uint32_t p = b[i].prev, n = b[i].next;
    /* i is mapped (an allocated block always is). A neighbour merges when it is free and
     * mapped: its (state, mapped) pair, one 16-bit load, is FREE_MAPPED. Node 0 (none)
     * stays all zero, so it never does: no test of p or n. */
    int pf = state_mapped(&b[p]) == FREE_MAPPED;
    int nf = state_mapped(&b[n]) == FREE_MAPPED;
    if (__builtin_expect(pf, 0))
        return free_merge_prev(t, i, p, n, nf);
    pool *pl = pool_of(t, i);
    fset *f = &pl->blocks;
    b[i].gc_base = pl->calls;
    b[i].in = IN_BLOCKS;
    if (!nf) /* insert_free, inline */
        return as_tfs_insert(b, f, i);
    /* i absorbs n and takes its place in the free set. */
    uint64_t old_size = b[n].size;
    uint32_t nn = b[n].next;
    b[i].size += old_size;
    b[i].next = nn;
    b[nn].prev = i; /* node 0's prev is never read */
    int rc = as_tfs_regrow(b, f, n, old_size, i);
    node_del(t, n);
    return rc;
}

/* ---- slots -------------------------------------------------------------------------- */

static int torch_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    torch_state *t = st;
    memset(t, 0, sizeof *t);
    t->dev = dev;
    int64_t ms = cfg[K_MAXSPLIT].i, ls = cfg[K_LARGE_SEGMENT].i;
    if (ls <= 10 || ms < 0 || cfg[K_MAX_NON_SPLIT].i < 0)
        return AS_EINVAL;
    t->large_seg = (uint64_t)ls * AS_MIB;
    /* PyTorch refuses max_split_size_mb below large_segment_size (20 MiB). */
    if (ms > 0 && ms < ls)
        return AS_EINVAL;
    t->max_split =
        ms > 0 && (uint64_t)ms < UINT64_MAX / AS_MIB ? (uint64_t)ms * AS_MIB : UINT64_MAX;
    t->max_non_split = (uint64_t)cfg[K_MAX_NON_SPLIT].i * AS_MIB;
    for (int k = 0; k < AS_DIV_INTERVALS; k++) {
        uint32_t d = cfg[K_ROUNDUP].div[k];
        if (d & (d - 1))
            return AS_EINVAL; /* 0 or a power of two */
        t->divlg[k] = d > 1 ? (uint8_t)__builtin_ctz(d) : 0;
        if (d > 1)
            t->use_div = 1;
    }
    t->expandable = cfg[K_EXPANDABLE].i != 0;
    /* Large segments and expandable pages are whole device pages. */
    if (t->large_seg % AS_DEV_GRANULARITY)
        return AS_EINVAL;
    t->sync_frees = cfg[K_SYNC_FREES].i != 0;
    t->gc = cfg[K_GC].f;
    if (!(t->gc >= 0.0 && t->gc < 1.0))
        return AS_EINVAL;
    int unlimited, bigger;
    if (as_dev_cap_at_least(dev, AS_CAPACITY_NONE, &unlimited) ||
        as_dev_cap_at_least(dev, DEFAULT_TOTAL_MEM + 1, &bigger))
        return AS_EDEVICE;
    t->limited = !unlimited;
    t->gc_on = gc_active(t);
    t->feat = (t->use_div ? F_DIV : 0) | (t->gc_on ? F_GC : 0) | (t->expandable ? F_EXP : 0) |
              (t->max_split != UINT64_MAX ? F_SPLIT : 0);
    /* Total device memory sizes each expandable segment's VA range (1.125x), and the size
     * of the unmapped tail enters get_free_block's expandable best fit. A capacity below
     * an H200's is read as a memory fraction of one (as in the ground truth); a larger one
     * as a bigger device (the one read of the number). */
    t->total_mem = t->limited && bigger ? dev->ops->capacity(dev->ctx) : DEFAULT_TOTAL_MEM;
    t->pools[0].small = 0;
    t->pools[1].small = 1;
    t->pools[0].whole_min = t->pools[1].whole_min = UINT64_MAX;
    return 0;
}

/* No cached block fits: the malloc ladder of a new segment (garbage collection first,
 * then releasing cached blocks and retrying). Out of line, so that the common path of
 * torch_alloc keeps its registers. 0 with p->block, AS_POLICY_OOM, or an error. */
static __attribute__((noinline)) int alloc_new(torch_state *t, params *p)
{
    int rc;
    p->alloc_size = allocation_size(t, p->size);
    if (gc_active(t) && (rc = garbage_collect(t)))
        return rc;
    int found = alloc_block(t, p, 0);
    if (found == 0) {
        found = release_available(t, p);
        if (found > 0)
            found = alloc_block(t, p, 0);
    }
    /* release_cached_blocks only while no capture or use_mem_pool is underway
     * (captures_underway.empty()): a private pool's request is made inside one */
    if (found == 0 && !p->priv) {
        found = release_cached(t);
        if (found == 0)
            found = alloc_block(t, p, 1);
    }
    if (found < 0)
        return found;
    if (!found) {
        t->ooms++;
        return AS_POLICY_OOM;
    }
    return 0;
}

/* should_split: the remainder of a block of `had` bytes handed out for `size`, its two
 * thresholds a select. F as in alloc_cached (F_ANY: the settings as they are). */
static inline __attribute__((always_inline)) int
should_split(const torch_state *t, int small, uint64_t size, uint64_t had, unsigned F)
{
    int fine = small || FEAT(F, F_EXP, t->expandable);
    int split = had - size > (fine ? MIN_BLOCK - 1 : SMALL_SIZE);
    if (FEAT(F, F_SPLIT, 1))
        split = split && (fine || size < t->max_split);
    return split;
}

/* Block i, of `size` bytes once split, is the request's: its state, the accounting and
 * the answer (its place in the free set, if any, is left to the caller). */
static inline void hand_out_sized(torch_state *t, blk *b, uint32_t i, uint64_t size,
                                  const as_request *req, as_block *out)
{
    uint32_t gen = ++b[i].gen;
    b[i].in = IN_NONE;
    b[i].state = B_ALLOC;
    b[i].id = req->id;
    t->allocated += size;
    out->addr = b[i].addr;
    out->size = size;
    out->handle = (uint64_t)gen << 32 | i;
}

/* Block i, split already, is the request's: its state, the accounting and the answer. */
static inline int hand_out(torch_state *t, blk *b, uint32_t i, const as_request *req, as_block *out)
{
    hand_out_sized(t, b, i, b[i].size, req, out);
    return 0;
}

/* No cached block fits: a new segment (alloc_new), split when PyTorch splits it, the
 * remainder into the free set. Out of line, so that the common path of torch_alloc keeps
 * its registers. */
static __attribute__((noinline)) int alloc_fresh(torch_state *t, const as_request *req,
                                                 as_block *out, pool *pl, uint64_t key, uint32_t k,
                                                 uint64_t size)
{
    params p = {.stream = key, .size = size, .pl = pl, .priv = (uint16_t)req->pool, .k = k};
    int rc = alloc_new(t, &p);
    if (rc)
        return rc;
    uint32_t i = p.block;
    if (should_split(t, pl->small, size, t->b[i].size, F_ANY)) {
        uint32_t r = split_after(t, i, size);
        if (!r)
            return AS_ENOMEM;
        t->b[r].gc_base = pl->calls;
        t->b[r].in = IN_BLOCKS;
        if (as_tfs_insert_cold(t->b, &pl->blocks, r))
            return AS_ENOMEM;
    }
    return hand_out(t, t->b, i, req, out);
}

/* torch_alloc's path to a cached block. F (a constant in each copy, see F_DIV): the
 * settings on, or F_ANY. Without F_ANY the request is of the default pool. */
static inline __attribute__((always_inline)) int alloc_cached(torch_state *t, const as_request *req,
                                                              as_block *out, unsigned F)
{
    uint64_t key, size;
    if (F & F_ANY) {
        if (stream_key(req, &key))
            return AS_EINVAL;
    } else {
        key = req->stream;
    }
    if (F & (F_DIV | F_ANY))
        size = round_size(t, req->size);
    else
        size = (req->size + MIN_BLOCK - 1) & ~(MIN_BLOCK - 1);
    int small = size <= SMALL_SIZE; /* pools[small].small, known here */
    pool *pl = &t->pools[small];
    fset *fs = &pl->blocks;
    int64_t k = fs->n && fs->s[fs->last].stream == key ? fs->last : as_tfs_slot(fs, key);
    if (k < 0)
        return AS_ENOMEM; /* insert_free relies on the slot */

    tbin *tb;
    uint32_t i = get_free_block(t, pl, (uint32_t)k, size, &tb, F);
    if (!i)
        return alloc_fresh(t, req, out, pl, key, (uint32_t)k, size);
    blk *b = t->b;
    uint64_t had = b[i].size;
    if (!should_split(t, small, size, had, F)) {
        hand_out_sized(t, b, i, had, req, out);
        as_tfs_take(b, fs, (uint32_t)k, tb, i, had);
        return 0;
    }
    uint32_t r = node_take(t);
    if (!r)
        return AS_ENOMEM;
    b = t->b;
    /* The answer first: req and out are then dead through the split's work. */
    hand_out_sized(t, b, i, size, req, out);
    uint64_t raddr = split_free(b, i, r, size, had);
    if (FEAT(F, F_GC, 1)) /* without garbage collection nothing reads gc_base */
        b[r].gc_base = pl->calls;
    /* The remainder takes the block's place in the free set. */
    return as_tfs_split_move(b, fs, (uint32_t)k, tb, i, had, r, had - size, raddr);
}

/* The copies for one setting, each its own function (its own registers); torch_alloc
 * jumps to one. */
#define ALLOC_COPY(name, F)                                                                        \
    static __attribute__((noinline)) int name(torch_state *t, const as_request *req,               \
                                              as_block *out)                                       \
    {                                                                                              \
        return alloc_cached(t, req, out, F);                                                       \
    }
ALLOC_COPY(alloc_plain, 0)
ALLOC_COPY(alloc_div, F_DIV)
ALLOC_COPY(alloc_gc, F_GC)
ALLOC_COPY(alloc_exp, F_EXP)
ALLOC_COPY(alloc_split, F_SPLIT)
ALLOC_COPY(alloc_any, F_ANY)
#undef ALLOC_COPY

/* torch_alloc's common path as a leaf: a request of the default pool served from a
 * cached block, with no call that returns here (a call needs a stack frame and the
 * callee-saved registers for what lives across it: about 18 instructions an allocation on
 * llama_accum_ckpt, sim/README.md).
 * What the common case does not cover (the stream is not the last one looked up, the
 * lookup's rare cases, an expandable block with an unmapped tail, max_split's refusals, a
 * split without a recycled node or whose remainder's bin is not a list with room) is
 * found before the state changes and goes to `full`, the copy of alloc_cached for the
 * same F, which serves the same request from the start; after a change only a tail call
 * remains (the slot's maximum recomputed). alloc_cached's steps in its order, so the
 * same answers. F: one setting alone, or none (not F_ANY). */
static inline __attribute__((always_inline)) int
alloc_leaf(torch_state *t, const as_request *req, as_block *out, const unsigned F,
           int (*full)(torch_state *, const as_request *, as_block *))
{
    const uint64_t key = req->stream;
    const uint64_t size =
        F & F_DIV ? round_size(t, req->size) : (req->size + MIN_BLOCK - 1) & ~(MIN_BLOCK - 1);
    const int small = size <= SMALL_SIZE;
    pool *pl = &t->pools[small];
    fset *fs = &pl->blocks;
    if (__builtin_expect(!fs->n || fs->s[fs->last].stream != key, 0))
        return full(t, req, out);
    const uint32_t k = fs->last;
    sidx *ix = &fs->s[k];
    blk *b = t->b;
    tbin *tb;
    unsigned at;
    const uint32_t i = tfs_lower_bound_fast(b, fs, ix, as_tfs_bin(size), size, &tb, &at);
    if (__builtin_expect(!i, 0))
        return full(t, req, out);
    const uint64_t had = b[i].size;
    /* get_free_block's tests */
    if ((F & F_EXP) && b[i].exp && b[i].next && !b[b[i].next].mapped)
        return full(t, req, out); /* exp_fit's walk */
    if ((F & F_SPLIT) &&
        (size < t->max_split ? had >= t->max_split : had >= size + t->max_non_split))
        return full(t, req, out);
    /* with garbage collection the call is counted (get_free_block's first step) once the
     * leaf is sure to serve it; nothing reads the count before */
    if (!should_split(t, small, size, had, F)) {
        if (F & F_GC)
            pl->calls++;
        hand_out_sized(t, b, i, had, req, out);
        tfs_list_take(b, ix, tb, at, i);
        return had == ix->max ? as_tfs_max_fell(b, fs, k) : 0;
    }
    const uint32_t r = t->bfree;
    unsigned nb;
    tbin *nt = tfs_split_bin(fs, ix, had - size, &nb); /* tb is a list: the lookup's */
    if (__builtin_expect(!r || !nt, 0))
        return full(t, req, out);
    if (F & F_GC)
        pl->calls++;
    t->bfree = b[r].next; /* node_take's common case */
    hand_out_sized(t, b, i, size, req, out);
    uint64_t raddr = split_free(b, i, r, size, had);
    if (F & F_GC)
        b[r].gc_base = pl->calls;
    /* as_tfs_split_move's common case */
    tfs_list_take(b, ix, tb, at, i);
    tfs_list_put(b, ix, nt, nb, r, had - size, raddr);
    return had == ix->max ? as_tfs_max_fell(b, fs, k) : 0;
}

/* The leaves of the single settings; the defaults' is torch_alloc itself, whose prologue
 * then comes after the dispatch's tests. Inline (into torch_alloc, so into the engine's
 * loop copy for torch, policies/builtin.h): out of line, a setting's allocation paid a
 * call and its saves, 14-16 instructions an event on llama_accum_ckpt, for 1.4 that the
 * defaults pay in the loop's registers. */
#define LEAF_COPY(name, F, full)                                                                   \
    static inline int name(torch_state *t, const as_request *req, as_block *out)                   \
    {                                                                                              \
        return alloc_leaf(t, req, out, F, full);                                                   \
    }
LEAF_COPY(leaf_div, F_DIV, alloc_div)
LEAF_COPY(leaf_gc, F_GC, alloc_gc)
LEAF_COPY(leaf_exp, F_EXP, alloc_exp)
LEAF_COPY(leaf_split, F_SPLIT, alloc_split)
#undef LEAF_COPY

static int torch_alloc(void *st, const as_request *req, as_block *out)
{
    torch_state *t = st;
    uint64_t rs = req->size;
    /* 0, or no device holds 1 PiB (which keeps round_size from overflowing) */
    if (__builtin_expect(rs - 1 >= (1ull << 50), 0))
        return rs ? AS_POLICY_OOM : AS_EINVAL;
    unsigned f = req->pool ? F_ANY : t->feat;
    if (__builtin_expect(!f, 1)) /* the defaults */
        return alloc_leaf(t, req, out, 0, alloc_plain);
    switch (f) {
    case F_DIV:
        return leaf_div(t, req, out);
    case F_GC:
        return leaf_gc(t, req, out);
    case F_EXP:
        return leaf_exp(t, req, out);
    case F_SPLIT:
        return leaf_split(t, req, out);
    default:
        return alloc_any(t, req, out);
    }
}

static int torch_free(void *st, uint64_t handle, unsigned flags)
{
    torch_state *t = st;
    uint32_t i = (uint32_t)handle, gen = (uint32_t)(handle >> 32);
    /* i in 1..nb (0 wraps), and the block allocated or pending (B_ALLOC, B_PENDING = 1, 2) */
    if (__builtin_expect(i - 1u < t->nb && t->b[i].gen == gen && t->b[i].state == B_ALLOC &&
                             !(flags & AS_FREE_PENDING),
                         1)) { /* the common case: a FREE of an allocated block */
        t->allocated -= t->b[i].size;
        return free_block(t, i);
    }
    if (i - 1u >= t->nb || t->b[i].gen != gen || (unsigned)t->b[i].state - B_ALLOC > 1u) {
        /* A FREE whose pending free was already completed by an event sync. */
        if (!(flags & AS_FREE_PENDING) && t->early_done) {
            t->early_done--;
            return 0;
        }
        return AS_EINVAL;
    }
    blk *b = &t->b[i];
    if (flags & AS_FREE_PENDING) {
        if (b->state != B_ALLOC)
            return AS_EINVAL;
        if (t->npending == t->pcap &&
            as_grow32((void **)&t->pending, &t->pcap, (size_t)t->npending + 1, sizeof *t->pending,
                      64) < 0)
            return AS_ENOMEM;
        /* PyTorch's allocated_bytes drops here; the contract's `allocated` keeps pending
         * blocks until their FREE, so only the state changes. */
        b->state = B_PENDING;
        b->pidx = t->npending;
        t->pending[t->npending++] = i;
        return 0;
    }
    if (b->state == B_PENDING) {
        uint32_t last = t->pending[--t->npending];
        t->pending[b->pidx] = last;
        t->b[last].pidx = b->pidx;
    }
    t->allocated -= b->size;
    return free_block(t, i);
}

static int torch_empty_cache(void *st)
{
    return release_cached(st);
}

/* releasePool(k), then emptyCache(k): pool k is freeable from now on, and its free
 * segments go back. emptyCache(k) first syncs pool k's own events (a MemPool's destructor:
 * replay/data/h200-pool-xstream mp_teardown, the pending block's free_completed under
 * ~MemPool's frames just before the pool's segment_free entries); with sync_frees its
 * pending frees complete here, else at the trace's FREE. */
static int torch_empty_pool(void *st, uint32_t k)
{
    torch_state *t = st;
    if (k >> 16) /* no block can be in it (stream_key) */
        return 0;
    if (k >= t->nreleased) {
        uint32_t n = k + 1 > 2 * t->nreleased ? k + 1 : 2 * t->nreleased;
        uint8_t *r = realloc(t->released, n);
        if (!r)
            return AS_ENOMEM;
        memset(r + t->nreleased, 0, n - t->nreleased);
        t->released = r;
        t->nreleased = n;
    }
    t->released[k] = 1;
    int rc = t->sync_frees ? complete_pending_pool(t, k) : 0;
    return rc ? rc : release_pool(t, k);
}

uint64_t as_torch_fset_steps(const void *st)
{
    const torch_state *t = st;
    return t->pools[0].blocks.steps + t->pools[1].blocks.steps;
}

static void torch_stats(const void *st, as_policy_stats *out)
{
    const torch_state *t = st;
    uint64_t l0 = as_tfs_largest(&t->pools[0].blocks), l1 = as_tfs_largest(&t->pools[1].blocks);
    uint64_t largest = l0 > l1 ? l0 : l1;
    *out = (as_policy_stats){
        .allocated = t->allocated,
        .reserved = t->reserved,
        .free_bytes = t->reserved - t->allocated,
        .largest_free = largest,
        .segments = t->nsegments + t->nexp_live,
        .device_reserves = t->dev_reserves,
        .device_releases = t->dev_releases,
        .retries = t->retries,
    };
}

/* ---- check and walk ----------------------------------------------------------------- */

/* Verifies one stream's unmapped set: its structure (an oset.h address treap), then
 * membership. Adds its node count to *n. */
static int check_unmapped(const torch_state *t, const fset *f, uint8_t small, int64_t *n,
                          as_check_failure *out)
{
    const blk *b = t->b;
    for (uint32_t k = 0; k < f->n; k++) {
        uint32_t root = f->s[k].unmapped;
        uint64_t c = 0;
        const char *why = tfs_bin_check(b, t->nb + 1, root, 2, &c);
        if (why)
            return as_check_fail(out, "unmapped set: %s", why);
        for (uint32_t i = tfs_treap_min(b, root); i; i = tfs_treap_next(b, i)) {
            if (b[i].in != IN_UNMAPPED || b[i].state != B_FREE || b[i].mapped || b[i].sx != k ||
                t->s[b[i].seg].small != small || !t->s[b[i].seg].live)
                return as_check_fail(out,
                                     "block 0x%llx is in an unmapped set it does not belong to",
                                     (unsigned long long)b[i].addr);
        }
        *n += (int64_t)c;
    }
    return 0;
}

static int cmp_seg_addr(const void *a, const void *b, void *ctx)
{
    const seg *s = ctx;
    uint64_t x = s[*(const uint32_t *)a].addr, y = s[*(const uint32_t *)b].addr;
    return x < y ? -1 : x > y;
}

/* Live segment indices sorted by address (caller frees). */
static uint32_t *sorted_segments(const torch_state *t, uint32_t *n)
{
    uint32_t *v = malloc(((size_t)t->ns + 1) * sizeof *v), k = 0;
    if (!v)
        return NULL;
    for (uint32_t i = 1; i <= t->ns; i++)
        if (t->s[i].live)
            v[k++] = i;
    /* insertion sort keeps this dependency-free and stable; segments are few */
    for (uint32_t a = 1; a < k; a++) {
        uint32_t x = v[a], j = a;
        while (j > 0 && cmp_seg_addr(&v[j - 1], &x, t->s) > 0) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
    *n = k;
    return v;
}

static int check_segment(const torch_state *t, uint32_t si, uint64_t *acc, as_check_failure *out)
{
    const blk *b = t->b;
    const seg *s = &t->s[si];
    uint64_t at = s->addr, mapped = 0;
    uint32_t last = 0;
    for (uint32_t i = s->head; i; i = b[i].next) {
        const char *why = NULL;
        if (b[i].seg != si)
            why = "block in the wrong segment";
        else if (b[i].addr != at)
            why = "chain not contiguous";
        else if (b[i].prev != last)
            why = "prev link broken";
        else if (b[i].small != s->small || b[i].exp != s->expandable ||
                 b[i].sx >= t->pools[s->small].blocks.n ||
                 t->pools[s->small].blocks.s[b[i].sx].stream != s->stream)
            why = "block's cached pool, expandable or stream-slot fields are stale";
        else if (b[i].size == 0 || (b[i].addr - s->addr) % MIN_BLOCK)
            why = "block empty or misaligned";
        else if (b[i].state == B_FREE && b[i].in != (b[i].mapped ? IN_BLOCKS : IN_UNMAPPED))
            why = "free block not in its free set";
        else if (b[i].state != B_FREE && b[i].in != IN_NONE)
            why = "used block in a free set";
        else if (!b[i].mapped && (b[i].state != B_FREE || !s->expandable))
            why = "unmapped block in use or outside an expandable segment";
        else if (last && b[last].state == B_FREE && b[i].state == B_FREE &&
                 b[last].mapped == b[i].mapped)
            why = "adjacent free blocks not merged";
        else if (at + b[i].size > s->addr + s->size)
            why = "block runs past its segment";
        if (why)
            return as_check_fail(out, "%s at 0x%llx", why, (unsigned long long)b[i].addr);
        acc[0] += b[i].state == B_FREE;
        acc[1] += b[i].state != B_FREE ? b[i].size : 0;
        acc[2] += b[i].state == B_PENDING;
        mapped += b[i].mapped ? b[i].size : 0;
        at += b[i].size;
        last = i;
    }
    if (at != s->addr + s->size)
        return as_check_fail(out, "blocks of segment 0x%llx sum to %llu, not %llu",
                             (unsigned long long)s->addr, (unsigned long long)(at - s->addr),
                             (unsigned long long)s->size);
    if (s->expandable && mapped != s->mapped)
        return as_check_fail(out, "expandable segment 0x%llx maps %llu but its blocks cover %llu",
                             (unsigned long long)s->addr, (unsigned long long)s->mapped,
                             (unsigned long long)mapped);
    acc[3] += s->expandable ? mapped : s->size;
    return 0;
}

static int torch_check(const void *st, as_check_failure *out)
{
    const torch_state *t = st;
    int64_t in_trees = 0;
    if (t->b && state_mapped(&t->b[0]) == FREE_MAPPED) /* free_block reads node 0 */
        return as_check_fail(out, "node 0 (none) reads as a free mapped block");
    for (int k = 0; k < 2; k++) {
        const fset *f = &t->pools[k].blocks;
        int rc = as_tfs_check(t->b, f, t->nb + 1, t->pools[k].small, &in_trees, out);
        if (!rc)
            rc = check_unmapped(t, f, t->pools[k].small, &in_trees, out);
        if (rc)
            return rc;
    }
    uint32_t ns;
    uint32_t *v = sorted_segments(t, &ns);
    if (!v)
        return as_check_fail(out, "no host memory for the check");
    /* free blocks, allocated (and active) bytes, pending blocks, reserved bytes */
    uint64_t acc[4] = {0}, prev_end = 0, nseg = 0, nexp = 0;
    int rc = 0;
    for (uint32_t k = 0; k < ns && !rc; k++) {
        const seg *s = &t->s[v[k]];
        if (s->addr < prev_end)
            rc = as_check_fail(out, "segment 0x%llx overlaps the one before",
                               (unsigned long long)s->addr);
        else
            rc = check_segment(t, v[k], acc, out);
        prev_end = s->addr + s->size;
        nexp += s->expandable;
        nseg += !s->expandable;
    }
    free(v);
    if (rc)
        return rc;
    if ((int64_t)acc[0] != in_trees)
        return as_check_fail(out, "free sets hold %lld blocks, the chains %llu free ones",
                             (long long)in_trees, (unsigned long long)acc[0]);
    if (acc[3] != t->reserved)
        return as_check_fail(out, "segments hold %llu bytes, accounting says %llu",
                             (unsigned long long)acc[3], (unsigned long long)t->reserved);
    if (t->dev->ops->reserved && t->dev->ops->reserved(t->dev->ctx) != acc[3])
        return as_check_fail(out, "the device holds %llu bytes, the segments %llu",
                             (unsigned long long)t->dev->ops->reserved(t->dev->ctx),
                             (unsigned long long)acc[3]);
    if (acc[1] != t->allocated)
        return as_check_fail(out, "allocated bytes %llu, accounting %llu",
                             (unsigned long long)acc[1], (unsigned long long)t->allocated);
    if (acc[2] != t->npending || nseg != t->nsegments || nexp != t->nexp_live)
        return as_check_fail(out, "pending or segment counts disagree with the chains");
    for (uint32_t k = 0; k < t->npending; k++)
        if (t->b[t->pending[k]].state != B_PENDING || t->b[t->pending[k]].pidx != k)
            return as_check_fail(out, "pending list broken at %u", k);
    return 0;
}

static int torch_walk(const void *st, as_walk_fn fn, void *user)
{
    const torch_state *t = st;
    const blk *b = t->b;
    uint32_t ns;
    uint32_t *v = sorted_segments(t, &ns);
    if (!v)
        return AS_ENOMEM;
    int rc = 0;
    for (uint32_t k = 0; k < ns && !rc; k++) {
        const seg *s = &t->s[v[k]];
        const char *pname = s->small ? "small" : "large";
        uint32_t i = s->head;
        while (i && !rc) {
            /* One segment per contiguous mapped range, as PyTorch's snapshot reports. */
            if (!b[i].mapped) {
                i = b[i].next;
                continue;
            }
            uint64_t len = 0;
            for (uint32_t j = i; j && b[j].mapped; j = b[j].next)
                len += b[j].size;
            as_walk_item it = {.kind = AS_WALK_SEGMENT,
                               .addr = b[i].addr,
                               .size = len,
                               .stream = s->pool ? s->stream & POOL_MASK : s->stream,
                               .id = UINT64_MAX,
                               .pool = pname};
            rc = fn(user, &it);
            for (; i && b[i].mapped && !rc; i = b[i].next) {
                as_walk_item bi = {
                    .kind = AS_WALK_BLOCK,
                    .addr = b[i].addr,
                    .size = b[i].size,
                    .stream = s->pool ? s->stream & POOL_MASK : s->stream,
                    .pool = pname,
                    .state = b[i].state == B_ALLOC     ? AS_BLOCK_ALLOCATED
                             : b[i].state == B_PENDING ? AS_BLOCK_PENDING
                                                       : AS_BLOCK_FREE,
                    .id = b[i].state == B_FREE ? UINT64_MAX : b[i].id,
                };
                rc = fn(user, &bi);
            }
        }
    }
    free(v);
    return rc;
}

static void torch_fini(void *st)
{
    torch_state *t = st;
    for (uint32_t si = 1; t->dev && si <= t->ns; si++) {
        seg *s = &t->s[si];
        if (!s->live)
            continue;
        if (!s->expandable) {
            t->dev->ops->release(t->dev->ctx, s->addr, s->size);
            continue;
        }
        /* Mapped runs start and end on page boundaries: unmap each, then free the VA. */
        uint32_t i = s->head;
        while (i) {
            if (!t->b[i].mapped) {
                i = t->b[i].next;
                continue;
            }
            uint64_t start = t->b[i].addr, len = 0;
            for (; i && t->b[i].mapped; i = t->b[i].next)
                len += t->b[i].size;
            t->dev->ops->unmap(t->dev->ctx, start, len);
        }
        t->dev->ops->va_release(t->dev->ctx, s->addr, s->size);
    }
    for (int k = 0; k < 2; k++)
        as_tfs_fini(&t->pools[k].blocks);
    free(t->b);
    free(t->s);
    free(t->pending);
    free(t->scratch);
    free(t->released);
    memset(t, 0, sizeof *t);
}

AS_BUILTIN_ENTRIES(torch, torch_alloc, torch_free)

const as_policy as_policy_torch = {
    .name = "torch",
    .summary = "PyTorch 2.11 CUDACachingAllocator, reproduced exactly",
    .abi = AS_POLICY_ABI,
    .knobs = torch_knobs,
    .n_knobs = K_COUNT,
    .state_size = sizeof(torch_state),
    .flags = AS_POLICY_F_LIMITS_ITSELF,
    .init = torch_init,
    .alloc = torch_alloc,
    .free = torch_free,
    .empty_cache = torch_empty_cache,
    .empty_pool = torch_empty_pool,
    .stats = torch_stats,
    .check = torch_check,
    .walk = torch_walk,
    .fini = torch_fini,
};
