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
 * Invariant (ca_check): the free ranges, the live blocks and the tail tile the address
 * space from the base; the address index and the two size indexes (by class: all chunks
 * mapped, or not) hold exactly the free ranges, none adjacent to another or to the tail,
 * each under its class; each chunk's live count is the number of live blocks over it; the idle
 * bitmap is the mapped chunks with count 0; mapped chunks x grow = reserved.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "grow.h"

/* A free range in the address index (by addr) and, same index, the size index (key
 * (size, seq): the seq sits in the addr slot oset.h orders by). */
typedef struct fnode {
    uint64_t addr, size;
    uint32_t l, r, up;
    uint32_t cls; /* 0: every chunk under it mapped; 1: one is not */
} fnode;
#define OSET_NODE fnode
#define OSET(name) caa_##name
#include "oset.h"
typedef struct snode {
    uint64_t addr, size; /* addr: the sequence number */
    uint32_t l, r, up;
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
    uint32_t slmap[64], treap[64]; /* treap: bit sl set when bin (fl, sl) is one */
    uint32_t root[64][1u << SB_SL];
    uint32_t cnt[64][1u << SB_SL];
} sbins;

OSET_HOT void sb_insert(snode *b, sbins *x, uint32_t n)
{
    unsigned fl, sl;
    as_tlsf_class(b[n].size, SB_SL, 0, &fl, &sl);
    int treap = x->treap[fl] >> sl & 1;
    if (cas_bin_insert(b, &x->root[fl][sl], x->cnt[fl][sl], treap, n) != treap)
        x->treap[fl] ^= 1u << sl;
    x->cnt[fl][sl]++;
    x->slmap[fl] |= 1u << sl;
    x->flmap |= 1ull << fl;
}

OSET_HOT void sb_erase(snode *b, sbins *x, uint32_t n)
{
    unsigned fl, sl;
    as_tlsf_class(b[n].size, SB_SL, 0, &fl, &sl);
    int treap = x->treap[fl] >> sl & 1;
    if (cas_bin_erase(b, &x->root[fl][sl], x->cnt[fl][sl], treap, n) != treap)
        x->treap[fl] ^= 1u << sl;
    if (--x->cnt[fl][sl] == 0) {
        x->slmap[fl] &= ~(1u << sl);
        if (!x->slmap[fl])
            x->flmap &= ~(1ull << fl);
    }
}

/* The smallest (size, seq) with size >= want, or 0 (as_bins_find). */
OSET_HOT uint32_t sb_find(const snode *b, const sbins *x, uint64_t want)
{
    unsigned fl, sl;
    as_tlsf_class(want ? want : 1, SB_SL, 0, &fl, &sl);
    if (x->slmap[fl] >> sl & 1) {
        uint32_t n = cas_bin_lower_bound(b, x->root[fl][sl], x->treap[fl] >> sl & 1, want);
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
    return cas_bin_min(b, x->root[fl][sl], x->treap[fl] >> sl & 1);
}

static uint64_t sb_max(const snode *b, const sbins *x)
{
    if (!x->flmap)
        return 0;
    unsigned fl = 63u ^ (unsigned)__builtin_clzll(x->flmap);
    unsigned sl = 31u ^ (unsigned)__builtin_clz(x->slmap[fl]);
    return b[cas_bin_max(b, x->root[fl][sl], x->treap[fl] >> sl & 1)].size;
}

/* Each bin's structure, count, maps and class; *count: the ranges it holds. */
static const char *sb_check(const snode *b, uint32_t nb, const sbins *x, uint64_t *count)
{
    *count = 0;
    for (unsigned fl = 0; fl < 64; fl++)
        for (unsigned sl = 0; sl < 32; sl++) {
            uint32_t head = x->root[fl][sl];
            int treap = x->treap[fl] >> sl & 1;
            uint64_t c;
            const char *why = cas_bin_check(b, nb, head, treap, &c);
            if (why)
                return why;
            if (c != x->cnt[fl][sl] || !c != !(x->slmap[fl] >> sl & 1) ||
                !x->slmap[fl] != !(x->flmap >> fl & 1) || (treap && !c))
                return "a size bin's count or maps disagree with it";
            for (uint32_t n = cas_bin_min(b, head, treap); n; n = cas_bin_next(b, head, treap, n)) {
                unsigned f, l;
                as_tlsf_class(b[n].size, SB_SL, 0, &f, &l);
                if (f != fl || l != sl)
                    return "a range is in the wrong size bin";
            }
            *count += c;
        }
    return NULL;
}

enum { LIVE_FREE, LIVE_ALLOC, LIVE_PENDING };

typedef struct live_rec {
    uint64_t off, size; /* offset from the base, rounded size */
    uint64_t id, stream;
    uint32_t gen, next; /* next: the free-slot list */
    uint8_t state;
} live_rec;

typedef struct cmasync {
    const as_device *dev;
    uint64_t round, grow, threshold;
    unsigned gshift;              /* log2 of grow when a power of two, else 0 */
    uint64_t base, va_size, tail; /* tail: offset where the unbounded free space starts */
    uint32_t nchunk, top_word;    /* top_word: that of the highest chunk ever mapped */
    uint32_t *chunk_live;
    uint64_t *mapped, *idle; /* bitmaps over the chunks */
    uint64_t nmapped, nidle;
    fnode *fa;
    snode *fs;
    size_t ncap;
    uint32_t nn, node_free, root_a;
    sbins sz[2]; /* the size index of each class */
    uint64_t nfree, seq;
    live_rec *lv;
    size_t lcap;
    uint32_t nl, live_free;
    uint64_t allocated, maps, unmaps;
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

static uint32_t chunk_of(const cmasync *s, uint64_t off)
{
    /* A 64-bit division is tens of cycles, several per event: a shift for the power-of-two
     * chunks of every measured setting. */
    return (uint32_t)(s->gshift ? off >> s->gshift : off / s->grow);
}

/* 0 when every chunk under [off, off+size) is mapped, else 1. */
static uint32_t range_class(const cmasync *s, uint64_t off, uint64_t size)
{
    for (uint32_t c = chunk_of(s, off); c <= chunk_of(s, off + size - 1); c++)
        if (!bit(s->mapped, c))
            return 1;
    return 0;
}

/* Files range n under class cls (its sequence number kept). */
static void set_class(cmasync *s, uint32_t n, uint32_t cls)
{
    if (s->fa[n].cls == cls)
        return;
    sb_erase(s->fs, &s->sz[s->fa[n].cls], n);
    s->fa[n].cls = cls;
    sb_insert(s->fs, &s->sz[cls], n);
}

static int node_new(cmasync *s, uint64_t off, uint64_t size, uint32_t cls, uint32_t *out)
{
    uint32_t n = s->node_free;
    if (n) {
        s->node_free = s->fa[n].l;
    } else {
        size_t need = (size_t)s->nn + 2, cap = s->ncap;
        if (as_grow((void **)&s->fa, &s->ncap, need, sizeof *s->fa, 256) ||
            as_grow((void **)&s->fs, &cap, need, sizeof *s->fs, 256))
            return AS_ENOMEM;
        if (cap != s->ncap) /* both arrays keep one capacity */
            return AS_ENOMEM;
        n = ++s->nn;
    }
    s->fa[n] = (fnode){.addr = off, .size = size, .cls = cls};
    s->fs[n] = (snode){.addr = ++s->seq, .size = size};
    caa_treap_insert(s->fa, &s->root_a, 1, n);
    sb_insert(s->fs, &s->sz[cls], n);
    s->nfree++;
    *out = n;
    return 0;
}

/* Range n becomes [off, off+size) under class cls, as a new range would (a new sequence
 * number), where no other free range lies between its old and new addresses: its place in
 * the address index holds, only the size index files it again. */
static void node_rekey(cmasync *s, uint32_t n, uint64_t off, uint64_t size, uint32_t cls)
{
    sb_erase(s->fs, &s->sz[s->fa[n].cls], n);
    s->fa[n].addr = off;
    s->fa[n].size = size;
    s->fa[n].cls = cls;
    s->fs[n].addr = ++s->seq;
    s->fs[n].size = size;
    sb_insert(s->fs, &s->sz[cls], n);
}

static void node_del(cmasync *s, uint32_t n)
{
    caa_treap_erase(s->fa, &s->root_a, n);
    sb_erase(s->fs, &s->sz[s->fa[n].cls], n);
    s->fa[n].l = s->node_free;
    s->node_free = n;
    s->nfree--;
}

/* The free range holding off (0: none, or the tail): the last one starting at or below
 * it, in one descent. */
static uint32_t range_holding(const cmasync *s, uint64_t off)
{
    uint32_t n = 0;
    for (uint32_t i = s->root_a; i;)
        if (s->fa[i].addr <= off) {
            n = i;
            i = s->fa[i].r;
        } else {
            i = s->fa[i].l;
        }
    return n && s->fa[n].addr + s->fa[n].size > off ? n : 0;
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
    uint32_t n = range_holding(s, (uint64_t)c * s->grow); /* an idle chunk is all free */
    if (n)
        set_class(s, n, 1);
    return 0;
}

/* The highest idle chunk outside [lo, hi], or UINT32_MAX. Only the words up to the
 * highest chunk ever mapped can hold an idle bit: the 1 TiB range has 512 words, a pool
 * uses a few. */
static uint32_t idle_chunk(const cmasync *s, uint32_t lo, uint32_t hi)
{
    for (uint32_t w = s->top_word + 1; w-- > 0;) {
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

/* While the pool holds more than keep, unmap idle chunks, highest first. */
static int trim_to(cmasync *s, uint64_t keep)
{
    while (s->nidle && s->nmapped * s->grow > keep) {
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
        if (e >> 6 > s->top_word)
            s->top_word = e >> 6;
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

/* The block [off, off+size) goes live (delta 1) or free (-1) in its chunks' counts; its
 * chunks are mapped (map_span maps them before a block goes live, and only idle chunks
 * are unmapped), so a chunk is idle exactly while its count is 0. */
static void count_span(cmasync *s, uint64_t off, uint64_t size, int delta)
{
    uint32_t c = chunk_of(s, off), e = chunk_of(s, off + size - 1);
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
    s->threshold = (uint64_t)cfg[K_THRESHOLD].i;
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

static int live_new(cmasync *s, uint32_t *out)
{
    if (s->live_free) {
        *out = s->live_free;
        s->live_free = s->lv[*out].next;
        return 0;
    }
    if (as_grow((void **)&s->lv, &s->lcap, (size_t)s->nl + 2, sizeof *s->lv, 1024))
        return AS_ENOMEM;
    *out = ++s->nl;
    s->lv[*out].gen = 0;
    return 0;
}

static int ca_alloc(void *st, const as_request *req, as_block *out)
{
    cmasync *s = st;
    if (req->size > AS_REQUEST_MAX)
        return AS_POLICY_OOM;
    uint64_t size = as_align_up(req->size, s->round);
    uint32_t n = sb_find(s->fs, &s->sz[0], size), k;
    if (!n)
        n = sb_find(s->fs, &s->sz[1], size);
    uint64_t off = n ? s->fa[n].addr : s->tail;
    if (!n && size > s->va_size - s->tail)
        return AS_POLICY_OOM; /* past the pool's address space */
    int rc = map_span(s, chunk_of(s, off), chunk_of(s, off + size - 1));
    if (rc || (rc = live_new(s, &k)))
        return rc;
    if (!n) {
        s->tail += size;
    } else {
        uint64_t left = s->fa[n].size - size;
        if (left) /* a part of a range all mapped is all mapped */
            node_rekey(s, n, off + size, left, s->fa[n].cls ? range_class(s, off + size, left) : 0);
        else
            node_del(s, n);
    }
    count_span(s, off, size, 1);
    live_rec *l = &s->lv[k];
    *l = (live_rec){.off = off,
                    .size = size,
                    .id = req->id,
                    .stream = req->stream,
                    .gen = l->gen + 1,
                    .state = LIVE_ALLOC};
    s->allocated += size;
    *out = (as_block){.addr = s->base + off, .size = size, .handle = (uint64_t)l->gen << 32 | k};
    return 0;
}

/* The freed block [off, off+size) joins its free neighbours (and the tail). */
static int merge_free(cmasync *s, uint64_t off, uint64_t size)
{
    /* No free range starts inside the live block: one descent finds the last range
     * below it (the only one that can end at its start) and the first above it. */
    uint32_t next = 0, prev = 0, cls = 0;
    for (uint32_t i = s->root_a; i;)
        if (s->fa[i].addr < off) {
            prev = i;
            i = s->fa[i].r;
        } else {
            next = i;
            i = s->fa[i].l;
        }
    if (prev && s->fa[prev].addr + s->fa[prev].size != off)
        prev = 0;
    if (next && s->fa[next].addr != off + size)
        next = 0; /* cls 0: the block itself is mapped */
    if (prev) {
        off = s->fa[prev].addr;
        size += s->fa[prev].size;
        cls |= s->fa[prev].cls;
    }
    if (next) {
        size += s->fa[next].size;
        cls |= s->fa[next].cls;
    }
    if (off + size == s->tail) {
        if (prev)
            node_del(s, prev);
        if (next)
            node_del(s, next);
        s->tail = off;
        return 0;
    }
    if (prev && next)
        node_del(s, next);
    uint32_t n = prev ? prev : next;
    if (n) { /* the merged range takes a neighbour's place in the address index */
        node_rekey(s, n, off, size, cls);
        return 0;
    }
    return node_new(s, off, size, cls, &n);
}

static int ca_free(void *st, uint64_t handle, unsigned flags)
{
    cmasync *s = st;
    uint32_t k = (uint32_t)handle;
    if (!k || k > s->nl || s->lv[k].gen != (uint32_t)(handle >> 32) || s->lv[k].state == LIVE_FREE)
        return AS_EINVAL;
    live_rec *l = &s->lv[k];
    if (flags & AS_FREE_PENDING) {
        if (l->state == LIVE_PENDING)
            return AS_EINVAL;
        l->state = LIVE_PENDING; /* not reusable before its FREE */
        return 0;
    }
    count_span(s, l->off, l->size, -1);
    s->allocated -= l->size;
    int rc = merge_free(s, l->off, l->size);
    l->state = LIVE_FREE;
    l->next = s->live_free;
    s->live_free = k;
    if (!rc && s->nmapped * s->grow > s->threshold)
        rc = trim_to(s, s->threshold);
    return rc;
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

static int ca_check_ranges(const cmasync *s, as_check_failure *f)
{
    uint64_t na = 0, ns = 0, ns1 = 0, bytes = 0, end = 0;
    const char *why = caa_bin_check(s->fa, s->nn + 1, s->root_a, 2, &na);
    if (!why)
        why = sb_check(s->fs, s->nn + 1, &s->sz[0], &ns);
    if (!why)
        why = sb_check(s->fs, s->nn + 1, &s->sz[1], &ns1);
    if (why)
        return as_check_fail(f, "free ranges: %s", why);
    ns += ns1;
    if (na != s->nfree || ns != s->nfree)
        return as_check_fail(f, "the indexes hold %llu and %llu ranges, %llu are free",
                             (unsigned long long)na, (unsigned long long)ns,
                             (unsigned long long)s->nfree);
    for (uint32_t n = caa_treap_min(s->fa, s->root_a); n; n = caa_treap_next(s->fa, n)) {
        if (!s->fa[n].size || (end && s->fa[n].addr <= end) || s->fs[n].size != s->fa[n].size ||
            s->fa[n].cls != range_class(s, s->fa[n].addr, s->fa[n].size))
            return as_check_fail(f, "free range at %llu is empty, unmerged or misfiled",
                                 (unsigned long long)s->fa[n].addr);
        end = s->fa[n].addr + s->fa[n].size;
        bytes += s->fa[n].size;
    }
    if (end >= s->tail && s->nfree)
        return as_check_fail(f, "a free range reaches the tail at %llu",
                             (unsigned long long)s->tail);
    if (bytes + s->allocated != s->tail)
        return as_check_fail(f, "free %llu + live %llu bytes do not tile the %llu below the tail",
                             (unsigned long long)bytes, (unsigned long long)s->allocated,
                             (unsigned long long)s->tail);
    return 0;
}

static int ca_check(const void *st, as_check_failure *f)
{
    const cmasync *s = st;
    int rc = ca_check_ranges(s, f);
    uint32_t *cnt = rc ? NULL : calloc(s->nchunk, sizeof *cnt);
    if (rc || !cnt)
        return rc ? rc : AS_ENOMEM;
    uint64_t live = 0, nm = 0, ni = 0;
    for (uint32_t k = 1; k <= s->nl && !rc; k++) {
        const live_rec *l = &s->lv[k];
        if (l->state == LIVE_FREE)
            continue;
        live += l->size;
        for (uint32_t c = chunk_of(s, l->off); c <= chunk_of(s, l->off + l->size - 1); c++) {
            cnt[c]++;
            if (!bit(s->mapped, c))
                rc = as_check_fail(f, "block at %llu is on unmapped chunk %u",
                                   (unsigned long long)l->off, c);
        }
    }
    for (uint32_t c = 0; c < s->nchunk && !rc; c++) {
        nm += bit(s->mapped, c);
        ni += bit(s->idle, c);
        if (cnt[c] != s->chunk_live[c] || bit(s->idle, c) != (bit(s->mapped, c) && !cnt[c]))
            rc = as_check_fail(f, "chunk %u: %u live blocks counted %u, idle bit %d", c, cnt[c],
                               s->chunk_live[c], bit(s->idle, c));
    }
    free(cnt);
    if (!rc && (live != s->allocated || nm != s->nmapped || ni != s->nidle ||
                nm * s->grow != s->dev->ops->reserved(s->dev->ctx)))
        rc = as_check_fail(f, "counts: live %llu/%llu B, mapped %llu/%llu, idle %llu/%llu",
                           (unsigned long long)live, (unsigned long long)s->allocated,
                           (unsigned long long)nm, (unsigned long long)s->nmapped,
                           (unsigned long long)ni, (unsigned long long)s->nidle);
    return rc;
}

typedef struct by_off {
    uint64_t off;
    uint32_t k;
} by_off;

static int cmp_off(const void *a, const void *b)
{
    uint64_t x = ((const by_off *)a)->off, y = ((const by_off *)b)->off;
    return (x > y) - (x < y);
}

/* One run of mapped chunks [lo, hi) as a segment, then its blocks in address order:
 * live ones from ord[*i], free space in between. */
static int walk_run(const cmasync *s, uint64_t lo, uint64_t hi, const by_off *ord, uint32_t nord,
                    uint32_t *i, as_walk_fn fn, void *user)
{
    as_walk_item it = {
        .kind = AS_WALK_SEGMENT, .addr = s->base + lo, .size = hi - lo, .id = UINT64_MAX};
    int rc = fn(user, &it);
    for (uint64_t pos = lo; !rc && pos < hi;) {
        while (*i < nord && ord[*i].off < pos)
            (*i)++;
        const live_rec *l = *i < nord ? &s->lv[ord[*i].k] : NULL;
        if (l && l->off == pos) {
            it = (as_walk_item){.kind = AS_WALK_BLOCK,
                                .addr = s->base + pos,
                                .size = l->size,
                                .stream = l->stream,
                                .id = l->id,
                                .state = l->state == LIVE_PENDING ? AS_BLOCK_PENDING
                                                                  : AS_BLOCK_ALLOCATED};
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
    by_off *ord = malloc(((size_t)s->nl + 1) * sizeof *ord);
    uint32_t nord = 0, i = 0;
    if (!ord)
        return AS_ENOMEM;
    for (uint32_t k = 1; k <= s->nl; k++)
        if (s->lv[k].state != LIVE_FREE)
            ord[nord++] = (by_off){.off = s->lv[k].off, .k = k};
    if (nord > 1)
        qsort(ord, nord, sizeof *ord, cmp_off);
    int rc = 0;
    for (uint32_t c = 0; c < s->nchunk && !rc; c++) {
        if (!bit(s->mapped, c))
            continue;
        uint32_t e = c;
        while (e + 1 < s->nchunk && bit(s->mapped, e + 1))
            e++;
        rc = walk_run(s, (uint64_t)c * s->grow, (uint64_t)(e + 1) * s->grow, ord, nord, &i, fn,
                      user);
        c = e;
    }
    free(ord);
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
    free(s->fa);
    free(s->fs);
    free(s->lv);
}

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
