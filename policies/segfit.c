/*
 * segfit.c - segregated fits in the style of TLSF: O(1) allocation and free.
 *
 * Free blocks sit in LIFO lists by size class. With classes=tlsf a class is (fl, sl): fl =
 * floor(log2 size), and each power-of-two range is cut into 2^sl equal classes; with
 * classes=pow2 each power of two is one class. A first-level bitmap says which fl have a
 * non-empty class and one second-level bitmap per fl which of its classes are non-empty,
 * so the search is two find-first-set instructions. The request is rounded up to the next
 * class start ("good fit"), so the head of the first non-empty class at or above it always
 * fits. Optional split (tail back to its class) and immediate coalescing; segments and
 * release as in bestfit. Beside each class's list, a pairing heap by size (common.h) gives
 * stats() the largest free block in O(1): the root of the top non-empty class (sizes inside
 * a class differ, and the lists are in LIFO order). Invariant: each free block is in the
 * list and the heap of its own class, and a bitmap bit is set iff its list is non-empty.
 */
#include <string.h>

#include "builtin.h"
#include "common.h"

#define FL_MAX 64
#define SL_MAX 64

typedef struct segfit {
    as_heap h;
    unsigned sl; /* log2 of the second-level subdivisions (0 for pow2) */
    int split, coalesce;
    uint64_t round, segment;
    uint32_t div[AS_DIV_INTERVALS];
    int divs; /* some division is on (as_round_req) */
    int64_t release;
    uint64_t flmap;
    uint64_t slmap[FL_MAX];
    uint32_t head[FL_MAX][SL_MAX];
    uint32_t top[FL_MAX][SL_MAX]; /* each class's pairing heap by size */
} segfit;

enum { K_ROUND, K_ROUNDUP, K_CLASSES, K_SL, K_SPLIT, K_COALESCE, K_SEGMENT, K_RELEASE, K_N };
enum { CLASSES_TLSF, CLASSES_POW2 };

static const as_knob knobs[K_N] = {
    [K_ROUND] = AS_KNOB_ROUND(512),
    [K_ROUNDUP] = AS_KNOB_ROUNDUP,
    [K_CLASSES] = {.name = "classes",
                   .type = AS_KNOB_ENUM,
                   .unit = "",
                   .def = CLASSES_TLSF,
                   .min = 0,
                   .max = 1,
                   .choices = "tlsf|pow2",
                   .help = "size classes: TLSF two-level (2^sl per power of 2), or one "
                           "class per power of 2"},
    [K_SL] = {.name = "sl",
              .type = AS_KNOB_INT,
              .unit = "log2",
              .def = 4,
              .min = 0,
              .max = 6,
              .help = "log2 of the second-level subdivisions of each power of 2 (tlsf)"},
    [K_SPLIT] = {.name = "split",
                 .type = AS_KNOB_BOOL,
                 .unit = "",
                 .def = 1,
                 .min = 0,
                 .max = 1,
                 .help =
                     "split off the unused tail of a block as a free block; false hands out whole "
                     "blocks, fresh segments included"},
    [K_COALESCE] = {.name = "coalesce",
                    .type = AS_KNOB_BOOL,
                    .unit = "",
                    .def = 1,
                    .min = 0,
                    .max = 1,
                    .help = "merge a freed block with its free neighbours"},
    [K_SEGMENT] = AS_KNOB_SEGMENT(20),
    [K_RELEASE] = AS_KNOB_RELEASE(AS_RELEASE_OOM),
};

AS_HOT void ix_insert(as_heap *h, uint32_t b)
{
    segfit *s = (segfit *)h;
    unsigned fl, sl;
    as_tlsf_class(h->b[b].size, s->sl, 0, &fl, &sl);
    as_blk *x = &h->b[b];
    x->bin = (uint16_t)(fl << 6 | sl); /* its class, for ix_remove */
    uint32_t n = s->head[fl][sl];
    x->l = AS_NIL;
    x->r = n;
    if (n)
        h->b[n].l = b;
    s->head[fl][sl] = b;
    s->slmap[fl] |= 1ull << sl;
    s->flmap |= 1ull << fl;
    as_pheap_insert(h, &s->top[fl][sl], b);
}

AS_HOT void ix_remove(as_heap *h, uint32_t b)
{
    segfit *s = (segfit *)h;
    as_blk *x = &h->b[b];
    unsigned fl = x->bin >> 6, sl = x->bin & 63u;
    as_pheap_remove(h, &s->top[fl][sl], b);
    if (x->r)
        h->b[x->r].l = x->l;
    if (x->l) {
        h->b[x->l].r = x->r;
        return;
    }
    s->head[fl][sl] = x->r;
    if (!x->r) {
        s->slmap[fl] &= ~(1ull << sl);
        if (!s->slmap[fl])
            s->flmap &= ~(1ull << fl);
    }
}

static const as_index_ops index_ops = {.insert = ix_insert, .remove = ix_remove};

static int sf_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    segfit *s = st;
    uint64_t round = (uint64_t)cfg[K_ROUND].i;
    if (round & (round - 1))
        return AS_EINVAL;
    int rc = as_heap_init(&s->h, dev, &index_ops);
    if (rc)
        return rc;
    memset(s->top, 0, sizeof s->top);
    s->sl = cfg[K_CLASSES].i == CLASSES_POW2 ? 0 : (unsigned)cfg[K_SL].i;
    s->split = (int)cfg[K_SPLIT].i;
    s->coalesce = (int)cfg[K_COALESCE].i;
    for (int i = 0; i < AS_DIV_INTERVALS; i++)
        s->div[i] = cfg[K_ROUNDUP].div[i];
    s->divs = as_divs_on(s->div);
    s->round = round;
    s->segment = (uint64_t)cfg[K_SEGMENT].i * AS_MIB;
    s->release = cfg[K_RELEASE].i;
    return 0;
}

/* The smallest class start >= size: what a search for size looks for. */
static uint64_t class_ceil(const segfit *s, uint64_t size)
{
    unsigned fl = as_log2_floor(size);
    if (fl < s->sl)
        return size;
    uint64_t step = 1ull << (fl - s->sl);
    return as_align_up(size, step);
}

/* The head of the first non-empty class at or above the good-fit class of size. */
static uint32_t find(const segfit *s, uint64_t size)
{
    unsigned fl, sl;
    as_tlsf_class(size, s->sl, 1, &fl, &sl);
    if (fl >= FL_MAX)
        return AS_NIL;
    uint64_t m = s->slmap[fl] & (~0ull << sl);
    if (!m) {
        uint64_t fm = fl + 1 < FL_MAX ? s->flmap & (~0ull << (fl + 1)) : 0;
        if (!fm)
            return AS_NIL;
        fl = (unsigned)__builtin_ctzll(fm);
        m = s->slmap[fl];
    }
    return s->head[fl][__builtin_ctzll(m)];
}

static int sf_alloc(void *st, const as_request *req, as_block *out)
{
    segfit *s = st;
    if (req->size > AS_REQUEST_MAX)
        return AS_POLICY_OOM;
    uint64_t size = as_round_req(req->size, s->round, s->div, s->divs);
    uint32_t b = find(s, size);
    if (!b) {
        /* Size the segment to the start of the request's good-fit class, so that once it
         * is free again the same request finds it (a segment of exactly the request's size
         * sits in a class its own search skips, and identical requests would each take a
         * new segment: TLSF's large-block fragmentation, unbounded here). */
        int rc = as_heap_grow_or_release(&s->h, as_segment_size(class_ceil(s, size), s->segment),
                                         s->release, &b);
        if (rc)
            return rc;
    }
    return as_heap_take_ix(&s->h, &index_ops, b, size, s->split, req, out);
}

static int sf_free(void *st, uint64_t handle, unsigned flags)
{
    segfit *s = st;
    uint32_t b;
    int rc = as_heap_free_ix(&s->h, &index_ops, handle, flags, s->coalesce, &b);
    if (rc)
        return rc;
    return as_heap_after_free(&s->h, b, s->release);
}

static int sf_empty_cache(void *st)
{
    return as_heap_release_empty(&((segfit *)st)->h, NULL);
}

static void sf_stats(const void *st, as_policy_stats *out)
{
    const segfit *s = st;
    as_heap_stats(&s->h, out);
    out->largest_free = 0;
    if (s->flmap) {
        unsigned fl = as_log2_floor(s->flmap);
        out->largest_free = s->h.b[s->top[fl][as_log2_floor(s->slmap[fl])]].size;
    }
}

static int sf_check(const void *st, as_check_failure *f)
{
    const segfit *s = st;
    int rc = as_heap_check(&s->h, s->coalesce, f);
    if (rc)
        return rc;
    uint64_t n = 0;
    for (unsigned fl = 0; fl < FL_MAX; fl++) {
        if (!!(s->flmap >> fl & 1) != (s->slmap[fl] != 0))
            return as_check_fail(f, "first-level bit %u disagrees with its second level", fl);
        for (unsigned sl = 0; sl < SL_MAX; sl++) {
            uint32_t hd = s->head[fl][sl];
            if (!!(s->slmap[fl] >> sl & 1) != (hd != AS_NIL))
                return as_check_fail(f, "bitmap bit (%u,%u) disagrees with its list", fl, sl);
            uint32_t prev = AS_NIL;
            uint64_t in_class = 0, largest = 0;
            for (uint32_t b = hd; b; b = s->h.b[b].r) {
                const as_blk *x = &s->h.b[b];
                in_class++;
                largest = x->size > largest ? x->size : largest;
                if (++n > s->h.nfree)
                    return as_check_fail(f, "class lists hold more blocks than are free");
                unsigned cf, cs;
                as_tlsf_class(x->size, s->sl, 0, &cf, &cs);
                if (x->state != AS_BLOCK_FREE || cf != fl || cs != sl || x->l != prev ||
                    x->bin != (fl << 6 | sl))
                    return as_check_fail(f, "block %#llx+%llu is wrongly in class (%u,%u)",
                                         (unsigned long long)x->addr, (unsigned long long)x->size,
                                         fl, sl);
                prev = b;
            }
            rc = as_pheap_check(&s->h, s->top[fl][sl], in_class, f);
            if (rc)
                return rc;
            if (in_class && s->h.b[s->top[fl][sl]].size != largest)
                return as_check_fail(f, "class (%u,%u): its heap's top is not its largest", fl, sl);
        }
    }
    if (n != s->h.nfree)
        return as_check_fail(f, "class lists hold %llu blocks, %llu are free",
                             (unsigned long long)n, (unsigned long long)s->h.nfree);
    if (s->release == AS_RELEASE_ALWAYS && s->h.empty)
        return as_check_fail(f, "release=always but an empty segment is still held");
    return 0;
}

static int sf_walk(const void *st, as_walk_fn fn, void *user)
{
    return as_heap_walk(&((const segfit *)st)->h, fn, user);
}

static void sf_fini(void *st)
{
    as_heap_fini(&((segfit *)st)->h);
}

AS_BUILTIN_ENTRIES(segfit, sf_alloc, sf_free)

const as_policy as_policy_segfit = {
    .name = "segfit",
    .summary = "segregated size classes with O(1) two-level bitmap search (TLSF style)",
    .abi = AS_POLICY_ABI,
    .knobs = knobs,
    .n_knobs = K_N,
    .state_size = sizeof(segfit),
    .init = sf_init,
    .alloc = sf_alloc,
    .free = sf_free,
    .empty_cache = sf_empty_cache,
    .stats = sf_stats,
    .check = sf_check,
    .walk = sf_walk,
    .fini = sf_fini,
};
