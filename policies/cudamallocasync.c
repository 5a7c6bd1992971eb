/*
 * cudamallocasync.c - a calibrated model of CUDA's stream-ordered pool (cudaMallocAsync,
 * PyTorch's backend:cudaMallocAsync). It is not the driver's code, which is closed: its
 * rules are the ones the H200 shows in replay/data/async-probe-h200/ (RESULTS.md, "The
 * simulated model", has the evidence and where the model still misses):
 *
 * - The pool is one range of address space (va_reserve) whose physical memory is `grow`
 *   (32 MiB) chunks on a grid from its base, mapped and unmapped one chunk at a time.
 * - Free memory is address space: a freed block merges with its free neighbours whether
 *   their chunks are mapped or not. A request, rounded to `round` (512 B), is carved at
 *   the start of the smallest free range that holds it, looked for first among the ranges
 *   all of whose chunks are mapped, then among those with an unmapped chunk; among equal
 *   sizes, the range that became free first (a sequence number given at every insertion).
 *   Above the highest allocation the free space is unbounded (the tail), taken only when
 *   no range fits.
 * - The chunks a new block covers that are not mapped are mapped: first with chunks that
 *   hold no live byte taken from elsewhere in the pool (highest address first), then with
 *   new memory from the device; the request fails (the pool unchanged) when that is more
 *   than the capacity leaves.
 * - The replay synchronises after every free, so a free is a synchronisation: while the
 *   pool holds more than the release threshold, chunks with no live byte are unmapped,
 *   highest address first (0 = CUDA's default: all of them; max = PyTorch's: none).
 *   empty_cache (cudaMemPoolTrimTo(0)) unmaps every one.
 * Streams are not modelled: after the replay's synchronisation any stream may reuse a
 * freed block, as the H200 does.
 *
 * Invariant (ca_check): the free ranges and the live blocks, linked in address order,
 * tile the address space from the base to the tail; the two size indexes (by class: all
 * chunks mapped, or not) hold exactly the free ranges, none adjacent to another or to the
 * tail; a range filed under class 1 has an unmapped chunk (one under class 0 may have
 * lost a chunk since: find_mapped looks before it answers); each chunk's live count is
 * the number of live blocks over it; the idle bitmap is the mapped chunks with count 0,
 * none in a word above idle_top; mapped chunks x grow = reserved.
 */
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "common.h"
#include "grow.h"

/* A free range in a size index: key (size, seq), the seq in the addr slot oset.h orders
 * by; bin: the (fl, sl) class it is filed under, fl * 32 + sl, so an erase reads it. */
typedef struct snode {
    uint64_t addr, size; /* addr: the sequence number */
    uint32_t l, r, up, bin;
} snode;
#define OSET_NODE snode
#define OSET(name) cas_##name
#include "oset.h"

/* A size index (one per class): common.h's binned index over snodes, TLSF classes of
 * short (size, seq) lists, a treap for a crowded one, so that "the smallest range that
 * holds size, free first among equals" is a bitmap test and a short scan, where one
 * treap of every range took a dozen levels and rotations per update. */
#define SB_SL 5
typedef struct sbins {
    uint64_t flmap;
    uint32_t slmap[64];
    /* Bin (fl, sl): its head and, in one word, its count << 1 | whether it is a treap, side
     * by side (one cache line, one load for both the count and the kind). */
    struct sbin {
        uint32_t root, cnt;
    } bin[64][1u << SB_SL];
} sbins;

_Static_assert(SB_SL == AS_BINS_SL, "the bins' classes are as_bins_class's");

OSET_HOT void sb_insert(snode *b, sbins *x, uint32_t n)
{
    unsigned c = as_bins_class(b[n].size), fl = c >> SB_SL, sl = c & 31u;
    b[n].bin = c;
    struct sbin *y = &x->bin[fl][sl];
    uint32_t v = y->cnt;
    y->cnt = (v + 2) & ~1u;
    y->cnt |= (uint32_t)cas_bin_insert(b, &y->root, v >> 1, (int)(v & 1), n);
    x->slmap[fl] |= 1u << sl;
    x->flmap |= 1ull << fl;
}

OSET_HOT void sb_erase(snode *b, sbins *x, uint32_t n)
{
    unsigned fl = b[n].bin >> SB_SL, sl = b[n].bin & 31u;
    struct sbin *y = &x->bin[fl][sl];
    uint32_t v = y->cnt;
    y->cnt = (v - 2) & ~1u;
    y->cnt |= (uint32_t)cas_bin_erase(b, &y->root, v >> 1, (int)(v & 1), n);
    /* The bitmaps without branches: whether the bin emptied follows no pattern. */
    uint32_t m = x->slmap[fl] & ~((uint32_t)(v < 4) << sl);
    x->slmap[fl] = m;
    x->flmap &= ~((uint64_t)(m == 0) << fl);
}

/* The smallest (size, seq) with size >= want, or 0 (as_bins_find). */
OSET_HOT uint32_t sb_find(const snode *b, const sbins *x, uint64_t want)
{
    unsigned c = as_bins_class(want ? want : 1), fl = c >> SB_SL, sl = c & 31u;
    if (x->slmap[fl] >> sl & 1) {
        const struct sbin *y = &x->bin[fl][sl];
        uint32_t n = cas_bin_lower_bound(b, y->root, (int)(y->cnt & 1), want);
        if (n)
            return n;
    }
    uint32_t m = sl + 1 < 32 ? x->slmap[fl] & (~0u << (sl + 1)) : 0;
    if (!m) {
        uint64_t fm = fl + 1 < 64 ? x->flmap & (~0ull << (fl + 1)) : 0;
        if (!fm)
            return 0;
        fl = (unsigned)__builtin_ctzll(fm);
        m = x->slmap[fl];
    }
    sl = (unsigned)__builtin_ctz(m); /* every range of a higher bin holds it */
    return cas_bin_min(b, x->bin[fl][sl].root, (int)(x->bin[fl][sl].cnt & 1));
}

static uint64_t sb_max(const snode *b, const sbins *x)
{
    if (!x->flmap)
        return 0;
    unsigned fl = 63u ^ (unsigned)__builtin_clzll(x->flmap);
    unsigned sl = 31u ^ (unsigned)__builtin_clz(x->slmap[fl]);
    return b[cas_bin_max(b, x->bin[fl][sl].root, (int)(x->bin[fl][sl].cnt & 1))].size;
}

/* Each bin's structure, count, maps and class (node bin fields too); *count: the ranges
 * it holds. */
static const char *sb_check(const snode *b, uint32_t nb, const sbins *x, uint64_t *count)
{
    *count = 0;
    for (unsigned fl = 0; fl < 64; fl++)
        for (unsigned sl = 0; sl < 32; sl++) {
            uint32_t head = x->bin[fl][sl].root;
            int treap = (int)(x->bin[fl][sl].cnt & 1);
            uint64_t c;
            const char *why = cas_bin_check(b, nb, head, treap, &c);
            if (why)
                return why;
            if (c != x->bin[fl][sl].cnt >> 1 || !c != !(x->slmap[fl] >> sl & 1) ||
                !x->slmap[fl] != !(x->flmap >> fl & 1) || (treap && !c))
                return "a size bin's count or maps disagree with it";
            for (uint32_t n = cas_bin_min(b, head, treap); n; n = cas_bin_next(b, head, treap, n)) {
                unsigned f, l;
                as_tlsf_class(b[n].size, SB_SL, 0, &f, &l);
                if (f != fl || l != sl || b[n].bin != (f << SB_SL | l))
                    return "a range is in the wrong size bin";
            }
            *count += c;
        }
    return NULL;
}

/* A block of the address space below the tail: a free range (in the size index of its
 * class) or a live block. prev and next are its neighbours in address order, which tile
 * [0, tail) (0: none, the base before, the tail after), so a freed block finds what it
 * merges with in two loads; a dead node's next is the free-node list. */
enum { T_DEAD, T_RANGE, T_ALLOC, T_PENDING };

typedef struct tnode {
    uint64_t off, size;  /* offset from the base, rounded size */
    uint64_t id, stream; /* a live block's */
    uint32_t prev, next;
    uint32_t gen; /* bumped each time the node goes live: the handle's high half */
    uint8_t state;
    uint8_t cls; /* a range's class: 1 has an unmapped chunk; 0 had none when last looked at */
} tnode;

typedef struct cmasync {
    const as_device *dev;
    uint64_t round, grow, keep;   /* keep: the release threshold in whole chunks */
    unsigned gshift;              /* log2 of grow when a power of two, else 0 */
    uint64_t base, va_size, tail; /* tail: offset where the unbounded free space starts */
    uint32_t nchunk, idle_top;    /* idle_top: no idle chunk lies in a word above it */
    uint32_t *chunk_live;
    uint64_t *mapped, *idle; /* bitmaps over the chunks */
    uint64_t nmapped, nidle;
    tnode *t;
    snode *fs; /* the same indices as t: a range's size-index node */
    size_t ncap;
    uint32_t nn, node_free, first, last; /* first, last: the lowest and highest blocks */
    sbins sz[2];                         /* the size index of each class */
    uint64_t nfree, seq, allocated, maps, unmaps;
    int have_va;
} cmasync;

#define VA_SIZE (1ull << 40) /* 1 TiB of address space: more than any card */

enum { K_THRESHOLD, K_ROUND, K_GROW, K_N };

static const as_knob knobs[K_N] = {
    [K_THRESHOLD] = {.name = "release_threshold",
                     .type = AS_KNOB_SIZE,
                     .unit = "bytes",
                     .def = 0,
                     .min = 0,
                     .max = INT64_MAX,
                     .help = "cudaMemPoolAttrReleaseThreshold: free chunks above it go back "
                             "at a synchronisation (0 = CUDA's default; max = PyTorch's)"},
    [K_ROUND] = AS_KNOB_ROUND(512),
    [K_GROW] = {.name = "grow",
                .type = AS_KNOB_INT,
                .unit = "MiB",
                .def = 32,
                .min = 2,
                .max = 1 << 16,
                .multiple = 2, /* mapped in the device's 2 MiB pages */
                .help = "the pool's physical chunk (measured on the H200: 32)"},
};

static int bit(const uint64_t *m, uint32_t c)
{
    return (int)(m[c >> 6] >> (c & 63) & 1);
}
static void set_bit(uint64_t *m, uint32_t c)
{
    m[c >> 6] |= 1ull << (c & 63);
}
static void clr_bit(uint64_t *m, uint32_t c)
{
    m[c >> 6] &= ~(1ull << (c & 63));
}

/* ---- free ranges ------------------------------------------------------------------------ */

OSET_HOT uint32_t chunk_of(const cmasync *s, uint64_t off)
{
    /* A 64-bit division is tens of cycles, several per event: a shift for the power-of-two
     * chunks of every measured setting. */
    return (uint32_t)(s->gshift ? off >> s->gshift : off / s->grow);
}

/* 0 when every chunk under [off, off+size) is mapped, else 1: a word at a time. */
OSET_HOT uint32_t range_class(const cmasync *s, uint64_t off, uint64_t size)
{
    uint32_t c0 = chunk_of(s, off), c1 = chunk_of(s, off + size - 1), w0 = c0 >> 6, w1 = c1 >> 6;
    uint64_t lo = ~0ull << (c0 & 63), hi = ~0ull >> (63 - (c1 & 63));
    if (w0 == w1)
        return (~s->mapped[w0] & lo & hi) != 0;
    if (~s->mapped[w0] & lo)
        return 1;
    for (uint32_t w = w0 + 1; w < w1; w++)
        if (~s->mapped[w])
            return 1;
    return (~s->mapped[w1] & hi) != 0;
}

/* A node for a new block, taken from the recycled list; node_reserve made sure of one. */
static uint32_t node_take(cmasync *s)
{
    uint32_t n = s->node_free;
    s->node_free = s->t[n].next;
    return n;
}

/* One recycled node at hand (the arrays grown when none is): AS_ENOMEM, else 0. */
static int node_reserve(cmasync *s)
{
    if (__builtin_expect(s->node_free != 0, 1))
        return 0;
    size_t need = (size_t)s->nn + 2, cap = s->ncap;
    if (as_grow((void **)&s->t, &s->ncap, need, sizeof *s->t, 256) ||
        as_grow((void **)&s->fs, &cap, need, sizeof *s->fs, 256))
        return AS_ENOMEM;
    if (cap != s->ncap) /* both arrays keep one capacity */
        return AS_ENOMEM;
    if (!s->nn) /* node 0, no block's: dead, so a neighbour test needs no test of 0 */
        s->t[0] = (tnode){.state = T_DEAD};
    uint32_t n = ++s->nn;
    s->t[n] = (tnode){.state = T_DEAD};
    s->node_free = n;
    return 0;
}

static void node_put(cmasync *s, uint32_t n)
{
    s->t[n].state = T_DEAD;
    s->t[n].next = s->node_free;
    s->node_free = n;
}

/* Node n becomes the free range [off, off+size) under class cls, filed as a new range
 * would be (a new sequence number); its place in address order is the caller's. */
/* Node n's place and key as a range of [off, off+size): a new sequence number. */
OSET_HOT void range_key(cmasync *s, uint32_t n, uint64_t off, uint64_t size)
{
    s->t[n].off = off;
    s->t[n].size = size;
    s->fs[n].addr = ++s->seq;
    s->fs[n].size = size;
}

OSET_HOT void range_add(cmasync *s, uint32_t n, uint64_t off, uint64_t size, uint32_t cls)
{
    range_key(s, n, off, size);
    s->t[n].state = T_RANGE;
    s->t[n].cls = (uint8_t)cls;
    sb_insert(s->fs, &s->sz[cls], n);
    s->nfree++;
}

OSET_HOT void range_remove(cmasync *s, uint32_t n)
{
    sb_erase(s->fs, &s->sz[s->t[n].cls], n);
    s->nfree--;
}

/* Range n becomes [off, off+size) under class cls, as a new range would (a new sequence
 * number); no other block lies between its old and new places. */
OSET_HOT void range_rekey(cmasync *s, uint32_t n, uint64_t off, uint64_t size, uint32_t cls)
{
    unsigned c = as_bins_class(size);
    struct sbin *y = &s->sz[cls].bin[c >> SB_SL][c & 31u];
    if (cls == s->t[n].cls && c == s->fs[n].bin && !(y->cnt & 1)) {
        /* Into the list bin it is in (a split or merge that keeps the range's class, the
         * common case): unlinked and linked again at its new key, the bin's count and the
         * maps as they were, the list that an erase and an insert would leave. */
        range_key(s, n, off, size);
        y->root = cas_list_erase(s->fs, y->root, n);
        y->root = cas_list_insert(s->fs, y->root, n);
        return;
    }
    range_remove(s, n);
    range_add(s, n, off, size, cls);
}

/* The smallest range (free first among equals) all of whose chunks are mapped that holds
 * size, or 0. A chunk unmapped under a range leaves it filed as mapped (finding the
 * range would take an address search at every unmap); this look at its chunks refiles
 * it under class 1, with its sequence number, before the next is tried: the answer is the
 * one the classes kept exact would give. */
static uint32_t find_mapped(cmasync *s, uint64_t size)
{
    for (;;) {
        uint32_t n = sb_find(s->fs, &s->sz[0], size);
        if (!n || !range_class(s, s->t[n].off, s->t[n].size))
            return n;
        sb_erase(s->fs, &s->sz[0], n);
        s->t[n].cls = 1;
        sb_insert(s->fs, &s->sz[1], n);
    }
}

/* ---- chunks ----------------------------------------------------------------------------- */

static int chunk_unmap(cmasync *s, uint32_t c)
{
    int rc = s->dev->ops->unmap(s->dev->ctx, s->base + (uint64_t)c * s->grow, s->grow);
    if (rc)
        return rc == AS_DEV_OOM ? AS_EDEVICE : rc;
    clr_bit(s->mapped, c);
    clr_bit(s->idle, c);
    s->nmapped--;
    s->nidle--;
    s->unmaps++;
    return 0; /* the range over it keeps its class until find_mapped looks */
}

/* The highest idle chunk outside [lo, hi], or UINT32_MAX. Only the words up to idle_top
 * can hold an idle bit (the 1 TiB range has 512 words, a pool uses a few); empty ones at
 * the top lower it. */
static uint32_t idle_chunk(cmasync *s, uint32_t lo, uint32_t hi)
{
    while (s->idle_top && !s->idle[s->idle_top])
        s->idle_top--;
    for (uint32_t w = s->idle_top + 1; w-- > 0;) {
        uint64_t m = s->idle[w];
        while (m) {
            int b = 63 - __builtin_clzll(m);
            uint32_t c = w * 64 + (uint32_t)b;
            if (c < lo || c > hi)
                return c;
            m &= ~(1ull << b);
        }
    }
    return UINT32_MAX;
}

/* While the pool holds more than keep chunks, unmap idle chunks, highest first. */
static int trim_to(cmasync *s, uint64_t keep)
{
    while (s->nidle && s->nmapped > keep) {
        int rc = chunk_unmap(s, idle_chunk(s, 1, 0));
        if (rc)
            return rc;
    }
    return 0;
}

/* Maps the unmapped chunks of [c0, c1]: idle chunks from elsewhere first, then the device.
 * AS_POLICY_OOM (nothing changed) when the capacity cannot take the new ones. */
static int map_span(cmasync *s, uint32_t c0, uint32_t c1)
{
    uint64_t need = 0, idle_in = 0;
    for (uint32_t c = c0; c <= c1; c++)
        need += !bit(s->mapped, c);
    if (!need) /* the common case: every chunk is mapped already */
        return 0;
    for (uint32_t c = c0; c <= c1; c++)
        idle_in += bit(s->idle, c);
    uint64_t moved = need < s->nidle - idle_in ? need : s->nidle - idle_in;
    uint64_t want = s->dev->ops->reserved(s->dev->ctx) + (need - moved) * s->grow;
    int fits, rc = as_dev_cap_at_least(s->dev, want, &fits);
    if (rc)
        return rc;
    if (!fits)
        return AS_POLICY_OOM;
    for (uint64_t i = 0; i < moved; i++)
        if ((rc = chunk_unmap(s, idle_chunk(s, c0, c1))))
            return rc;
    for (uint32_t c = c0; c <= c1; c++) {
        if (bit(s->mapped, c))
            continue;
        uint32_t e = c;
        while (e < c1 && !bit(s->mapped, e + 1))
            e++;
        rc = s->dev->ops->map(s->dev->ctx, s->base + (uint64_t)c * s->grow,
                              (uint64_t)(e - c + 1) * s->grow);
        if (rc) /* the capacity was asked first: a refusal now is the device's fault */
            return rc == AS_DEV_OOM ? AS_EDEVICE : rc;
        if (e >> 6 > s->idle_top)
            s->idle_top = e >> 6;
        for (uint32_t x = c; x <= e; x++) {
            set_bit(s->mapped, x);
            set_bit(s->idle, x); /* until the block is counted in, below */
            s->nidle++;
        }
        s->nmapped += e - c + 1;
        s->maps++;
        c = e;
    }
    return 0;
}

/* The block on chunks [c, e] goes live (delta 1) or free (-1) in their counts; its
 * chunks are mapped (map_span maps them before a block goes live, and only idle chunks
 * are unmapped), so a chunk is idle exactly while its count is 0. */
static void count_span(cmasync *s, uint32_t c, uint32_t e, int delta)
{
    if (delta > 0) {
        for (; c <= e; c++)
            if (s->chunk_live[c]++ == 0) {
                clr_bit(s->idle, c);
                s->nidle--;
            }
        return;
    }
    for (; c <= e; c++)
        if (--s->chunk_live[c] == 0) {
            set_bit(s->idle, c);
            s->nidle++;
            if (c >> 6 > s->idle_top)
                s->idle_top = c >> 6;
        }
}

/* ---- the policy ------------------------------------------------------------------------- */

static int ca_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    cmasync *s = st;
    uint64_t round = (uint64_t)cfg[K_ROUND].i;
    if (round & (round - 1))
        return AS_EINVAL;
    s->dev = dev;
    s->round = round;
    s->grow = (uint64_t)cfg[K_GROW].i * AS_MIB;
    s->gshift = s->grow & (s->grow - 1) ? 0 : (unsigned)__builtin_ctzll(s->grow);
    /* nmapped * grow > threshold exactly when nmapped > keep: a compare, no multiply */
    s->keep = (uint64_t)cfg[K_THRESHOLD].i / s->grow;
    s->va_size = VA_SIZE / s->grow * s->grow;
    s->nchunk = (uint32_t)(s->va_size / s->grow);
    size_t words = (s->nchunk + 63) / 64;
    s->chunk_live = calloc(s->nchunk, sizeof *s->chunk_live);
    s->mapped = calloc(words, sizeof *s->mapped);
    s->idle = calloc(words, sizeof *s->idle);
    if (!s->chunk_live || !s->mapped || !s->idle)
        return AS_ENOMEM;
    int rc = dev->ops->va_reserve(dev->ctx, s->va_size, &s->base);
    if (rc == AS_DEV_OOM)
        return AS_EDEVICE;
    s->have_va = !rc;
    return rc;
}

/* Node k goes into address order just before n (0: at the top, below the tail). */
static void link_before(cmasync *s, uint32_t k, uint32_t n)
{
    uint32_t p = n ? s->t[n].prev : s->last;
    s->t[k].prev = p;
    s->t[k].next = n;
    if (p)
        s->t[p].next = k;
    else
        s->first = k;
    if (n)
        s->t[n].prev = k;
    else
        s->last = k;
}

/* Nodes a..b (in address order) leave it. */
static void unlink_span(cmasync *s, uint32_t a, uint32_t b)
{
    uint32_t p = s->t[a].prev, q = s->t[b].next;
    if (p)
        s->t[p].next = q;
    else
        s->first = q;
    if (q)
        s->t[q].prev = p;
    else
        s->last = p;
}

static int ca_alloc(void *st, const as_request *req, as_block *out)
{
    cmasync *s = st;
    if (req->size > AS_REQUEST_MAX)
        return AS_POLICY_OOM;
    uint64_t size = as_align_up(req->size, s->round);
    uint32_t n = find_mapped(s, size), k;
    int from_mapped = n != 0;
    if (!n)
        n = sb_find(s->fs, &s->sz[1], size);
    uint64_t off = n ? s->t[n].off : s->tail;
    if (!n && size > s->va_size - s->tail)
        return AS_POLICY_OOM; /* past the pool's address space */
    int rc = node_reserve(s);
    uint32_t c0 = chunk_of(s, off), c1 = chunk_of(s, off + size - 1);
    /* a range find_mapped answered has every chunk mapped: it has just looked */
    if (rc || (!from_mapped && (rc = map_span(s, c0, c1))))
        return rc;
    if (!n) {
        k = node_take(s);
        link_before(s, k, 0);
        s->tail += size;
    } else if (s->t[n].size > size) {
        uint64_t left = s->t[n].size - size;
        k = node_take(s);
        link_before(s, k, n);
        /* a part of a range all mapped is all mapped */
        range_rekey(s, n, off + size, left, s->t[n].cls ? range_class(s, off + size, left) : 0);
    } else {
        k = n;
        range_remove(s, n);
    }
    count_span(s, c0, c1, 1);
    tnode *l = &s->t[k];
    l->off = off;
    l->size = size;
    l->id = req->id;
    l->stream = req->stream;
    l->gen++;
    l->state = T_ALLOC;
    s->allocated += size;
    *out = (as_block){.addr = s->base + off, .size = size, .handle = (uint64_t)l->gen << 32 | k};
    return 0;
}

/* The freed block k joins its free neighbours (and the tail): they are its address
 * neighbours, since the blocks tile the space below the tail. */
static void merge_free(cmasync *s, uint32_t k)
{
    uint32_t p = s->t[k].prev, q = s->t[k].next;
    int pf = s->t[p].state == T_RANGE, qf = s->t[q].state == T_RANGE; /* t[0] is dead */
    if (!q) { /* k is the top block: it and a free range below it go to the tail */
        uint32_t a = pf ? p : k;
        s->tail = s->t[a].off;
        unlink_span(s, a, k);
        if (pf) {
            range_remove(s, p);
            node_put(s, p);
        }
        node_put(s, k);
        return;
    }
    if (pf) { /* the merged range takes the lower range's node (and sequence number anew) */
        uint64_t size = s->t[p].size + s->t[k].size;
        uint32_t cls = s->t[p].cls, b = qf ? q : k;
        if (qf) {
            size += s->t[q].size;
            cls |= s->t[q].cls;
            range_remove(s, q);
        }
        unlink_span(s, k, b);
        range_rekey(s, p, s->t[p].off, size, cls); /* cls: the block itself is mapped */
        node_put(s, k);
        if (qf)
            node_put(s, q);
        return;
    }
    if (qf) {
        unlink_span(s, k, k);
        range_rekey(s, q, s->t[k].off, s->t[k].size + s->t[q].size, s->t[q].cls);
        node_put(s, k);
        return;
    }
    range_add(s, k, s->t[k].off, s->t[k].size, 0);
}

static int ca_free(void *st, uint64_t handle, unsigned flags)
{
    cmasync *s = st;
    uint32_t k = (uint32_t)handle;
    if (k - 1u >= s->nn || s->t[k].gen != (uint32_t)(handle >> 32) || s->t[k].state < T_ALLOC)
        return AS_EINVAL;
    tnode *l = &s->t[k];
    if (flags & AS_FREE_PENDING) {
        if (l->state == T_PENDING)
            return AS_EINVAL;
        l->state = T_PENDING; /* not reusable before its FREE */
        return 0;
    }
    count_span(s, chunk_of(s, l->off), chunk_of(s, l->off + l->size - 1), -1);
    s->allocated -= l->size;
    merge_free(s, k);
    if (s->nmapped > s->keep)
        return trim_to(s, s->keep);
    return 0;
}

static int ca_empty_cache(void *st)
{
    return trim_to(st, 0);
}

static void ca_stats(const void *st, as_policy_stats *out)
{
    const cmasync *s = st;
    uint64_t reserved = s->nmapped * s->grow, fb = reserved - s->allocated;
    uint64_t largest = 0;
    for (int c = 0; c < 2; c++)
        if (sb_max(s->fs, &s->sz[c]) > largest)
            largest = sb_max(s->fs, &s->sz[c]);
    *out = (as_policy_stats){.allocated = s->allocated,
                             .reserved = reserved,
                             .free_bytes = fb,
                             .largest_free = largest < fb ? largest : fb,
                             .segments = s->nmapped,
                             .device_reserves = s->maps,
                             .device_releases = s->unmaps};
}

/* Every node in class c's size index is a range of that class, filed once (seen). */
static const char *ca_check_filed(const cmasync *s, unsigned c, uint8_t *seen)
{
    const sbins *x = &s->sz[c];
    for (unsigned fl = 0; fl < 64; fl++)
        for (unsigned sl = 0; sl < 32; sl++) {
            uint32_t head = x->bin[fl][sl].root;
            int treap = (int)(x->bin[fl][sl].cnt & 1);
            for (uint32_t n = cas_bin_min(s->fs, head, treap); n;
                 n = cas_bin_next(s->fs, head, treap, n)) {
                if (seen[n] || s->t[n].state != T_RANGE || s->t[n].cls != c ||
                    s->fs[n].size != s->t[n].size)
                    return "a size index holds a node that is not a range of its class";
                seen[n] = 1;
            }
        }
    return NULL;
}

/* The blocks tile [0, tail) in address order, both links agreeing; no two ranges are
 * adjacent and none reaches the tail; the size indexes hold exactly the ranges. */
static int ca_check_ranges(const cmasync *s, as_check_failure *f)
{
    uint64_t ns = 0, ns1 = 0, nr = 0, live = 0, pos = 0, steps = 0;
    uint8_t *seen = calloc((size_t)s->nn + 1, 1);
    if (!seen)
        return AS_ENOMEM;
    const char *why = sb_check(s->fs, s->nn + 1, &s->sz[0], &ns);
    if (!why)
        why = sb_check(s->fs, s->nn + 1, &s->sz[1], &ns1);
    if (!why)
        why = ca_check_filed(s, 0, seen);
    if (!why)
        why = ca_check_filed(s, 1, seen);
    int rc = why ? as_check_fail(f, "free ranges: %s", why) : 0;
    uint32_t prev = 0, n = s->first;
    for (; n && !rc; prev = n, n = s->t[n].next) {
        const tnode *b = &s->t[n];
        if (n > s->nn || ++steps > s->nn || b->prev != prev || b->off != pos ||
            b->state == T_DEAD || !b->size) {
            rc = as_check_fail(f, "the blocks' address order is broken at %llu",
                               (unsigned long long)pos);
            break;
        }
        if (b->state == T_RANGE) {
            why = !seen[n]                                     ? "is in no size index"
                  : prev && s->t[prev].state == T_RANGE        ? "is next to another"
                  : !b->next                                   ? "reaches the tail"
                  : b->cls && !range_class(s, b->off, b->size) ? "is filed as over an unmapped "
                                                                 "chunk, and all are mapped"
                                                               : NULL;
            if (why)
                rc = as_check_fail(f, "free range at %llu %s", (unsigned long long)b->off, why);
            nr++;
        } else {
            live += b->size;
        }
        pos += b->size;
    }
    free(seen);
    if (!rc && (prev != s->last || pos != s->tail || live != s->allocated || nr != s->nfree ||
                ns + ns1 != s->nfree))
        rc = as_check_fail(f,
                           "the blocks end at %llu below a tail at %llu with %llu live "
                           "bytes of %llu, %llu ranges of %llu, %llu indexed",
                           (unsigned long long)pos, (unsigned long long)s->tail,
                           (unsigned long long)live, (unsigned long long)s->allocated,
                           (unsigned long long)nr, (unsigned long long)s->nfree,
                           (unsigned long long)(ns + ns1));
    return rc;
}

/* The live blocks on the 64 chunks of word w (chunks 64w..64w+63): their counts and a
 * bit for each chunk that has one, from the address-ordered list at *k, which is left at
 * the first block reaching past the word (ca_check_ranges has checked the order). */
static uint64_t word_counts(const cmasync *s, uint32_t w, uint32_t *k, uint32_t cnt[64])
{
    uint64_t lo = (uint64_t)w << 6, hi = lo + 64, busy = 0;
    memset(cnt, 0, 64 * sizeof *cnt);
    for (; *k; *k = s->t[*k].next) {
        const tnode *l = &s->t[*k];
        if (l->state == T_RANGE)
            continue;
        uint64_t c0 = chunk_of(s, l->off), c1 = chunk_of(s, l->off + l->size - 1);
        if (c0 >= hi)
            break;
        for (uint64_t c = c0 < lo ? lo : c0; c <= c1 && c < hi; c++) {
            cnt[c - lo]++;
            busy |= 1ull << (c - lo);
        }
        if (c1 >= hi)
            break;
    }
    return busy;
}

/* One word's chunks: a chunk holding blocks is mapped, not idle, and counts them; a mapped
 * one without blocks is idle with a count of 0; no idle chunk lies above idle_top. */
static int check_word(const cmasync *s, uint32_t w, uint64_t busy, const uint32_t cnt[64],
                      as_check_failure *f)
{
    uint64_t m = s->mapped[w], idle = s->idle[w], bad = (busy & ~m) | (idle ^ (m & ~busy));
    if (idle && w > s->idle_top)
        bad |= idle;
    for (uint64_t todo = m | busy; todo; todo &= todo - 1) {
        int b = __builtin_ctzll(todo);
        uint32_t c = (w << 6) + (uint32_t)b;
        if (s->chunk_live[c] != cnt[b] || (bad >> b & 1))
            return as_check_fail(f, "chunk %u: %u live blocks counted %u, idle bit %d%s", c, cnt[b],
                                 s->chunk_live[c], bit(s->idle, c),
                                 bit(s->mapped, c) ? "" : ", not mapped");
    }
    if (bad) /* idle and not mapped */
        return as_check_fail(f, "chunk %u: idle bit %d, not mapped",
                             (w << 6) + (uint32_t)__builtin_ctzll(bad), 1);
    return 0;
}

/* The chunks' counts and bits against the blocks, a word of 64 chunks at a time: only the
 * words holding blocks are looked at chunk by chunk (the VA is 2^19 chunks of 2 MiB, and
 * a count of every chunk at each check made --check 180 times slower than the run). An
 * unmapped chunk's count is not read unless a block lies on it: a count left on one would
 * have kept the chunk from going idle, and only idle chunks are unmapped. */
static int ca_check(const void *st, as_check_failure *f)
{
    const cmasync *s = st;
    int rc = ca_check_ranges(s, f);
    uint64_t nm = 0, ni = 0;
    uint32_t k = s->first, cnt[64], words = (s->nchunk + 63) / 64;
    for (uint32_t w = 0; w < words && !rc; w++) {
        uint64_t busy = 0;
        while (k && s->t[k].state == T_RANGE)
            k = s->t[k].next;
        if (k && chunk_of(s, s->t[k].off) >> 6 <= w)
            busy = word_counts(s, w, &k, cnt);
        else if (!s->mapped[w] && !s->idle[w])
            continue;
        else
            memset(cnt, 0, sizeof cnt);
        nm += (uint64_t)__builtin_popcountll(s->mapped[w]);
        ni += (uint64_t)__builtin_popcountll(s->idle[w]);
        rc = check_word(s, w, busy, cnt, f);
    }
    if (!rc &&
        (nm != s->nmapped || ni != s->nidle || nm * s->grow != s->dev->ops->reserved(s->dev->ctx)))
        rc = as_check_fail(f, "counts: mapped %llu/%llu, idle %llu/%llu", (unsigned long long)nm,
                           (unsigned long long)s->nmapped, (unsigned long long)ni,
                           (unsigned long long)s->nidle);
    return rc;
}

/* One run of mapped chunks [lo, hi) as a segment, then its blocks in address order from
 * *k on (live ones as they are, the free space between them as one free block). */
static int walk_run(const cmasync *s, uint64_t lo, uint64_t hi, uint32_t *k, as_walk_fn fn,
                    void *user)
{
    as_walk_item it = {
        .kind = AS_WALK_SEGMENT, .addr = s->base + lo, .size = hi - lo, .id = UINT64_MAX};
    int rc = fn(user, &it);
    for (uint64_t pos = lo; !rc && pos < hi;) {
        while (*k && (s->t[*k].state == T_RANGE || s->t[*k].off < pos))
            *k = s->t[*k].next;
        const tnode *l = *k ? &s->t[*k] : NULL;
        if (l && l->off == pos) {
            it = (as_walk_item){.kind = AS_WALK_BLOCK,
                                .addr = s->base + pos,
                                .size = l->size,
                                .stream = l->stream,
                                .id = l->id,
                                .state =
                                    l->state == T_PENDING ? AS_BLOCK_PENDING : AS_BLOCK_ALLOCATED};
            pos += l->size;
        } else {
            uint64_t end = l && l->off < hi ? l->off : hi;
            it = (as_walk_item){.kind = AS_WALK_BLOCK,
                                .addr = s->base + pos,
                                .size = end - pos,
                                .state = AS_BLOCK_FREE,
                                .id = UINT64_MAX};
            pos = end;
        }
        rc = fn(user, &it);
    }
    return rc;
}

static int ca_walk(const void *st, as_walk_fn fn, void *user)
{
    const cmasync *s = st;
    uint32_t k = s->first;
    int rc = 0;
    for (uint32_t c = 0; c < s->nchunk && !rc; c++) {
        if (!bit(s->mapped, c))
            continue;
        uint32_t e = c;
        while (e + 1 < s->nchunk && bit(s->mapped, e + 1))
            e++;
        rc = walk_run(s, (uint64_t)c * s->grow, (uint64_t)(e + 1) * s->grow, &k, fn, user);
        c = e;
    }
    return rc;
}

static void ca_fini(void *st)
{
    cmasync *s = st;
    for (uint32_t c = 0; s->mapped && c < s->nchunk; c++)
        if (bit(s->mapped, c))
            (void)s->dev->ops->unmap(s->dev->ctx, s->base + (uint64_t)c * s->grow, s->grow);
    if (s->have_va)
        (void)s->dev->ops->va_release(s->dev->ctx, s->base, s->va_size);
    free(s->chunk_live);
    free(s->mapped);
    free(s->idle);
    free(s->t);
    free(s->fs);
}
AS_BUILTIN_ENTRIES(cudamallocasync, ca_alloc, ca_free)

const as_policy as_policy_cudamallocasync = {
    .name = "cudamallocasync",
    .summary = "calibrated model of CUDA's stream-ordered pool (not the driver's code): "
               "32 MiB chunks under one address range, best fit, trims above the threshold",
    .abi = AS_POLICY_ABI,
    .knobs = knobs,
    .n_knobs = K_N,
    .state_size = sizeof(cmasync),
    .init = ca_init,
    .alloc = ca_alloc,
    .free = ca_free,
    .empty_cache = ca_empty_cache,
    .stats = ca_stats,
    .check = ca_check,
    .walk = ca_walk,
    .fini = ca_fini,
};
