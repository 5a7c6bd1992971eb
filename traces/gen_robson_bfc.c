/*
 * gen_robson_bfc.c - `gen robson target=bfc`: the adversary for TensorFlow's BFC allocator
 * (policies/bfc.c at its default knobs, no capacity), in Robson's setting (live <= M
 * units, requests 1..n units).
 *
 * BFC's rules that it uses: regions grow by doubling from 2 MiB (a request larger than the
 * region size doubles it until it fits and the next region is that size again; otherwise
 * the next region is twice this one), best fit by (size, address) over every free chunk,
 * a chunk is given whole when it is less than twice the request (and the rest under
 * 128 MiB), frees coalesce at once, and regions never merge. Three stages:
 *
 * 1. Prelude: requests of curr+1 units (3, 5, 9 at unit 1 MiB) while they are at most n,
 *    each larger than every free chunk and than the region size, so the regions are 4, 8
 *    and 16 MiB instead of 2, 4 and 8, and the 16 MiB request size is reached at once.
 * 2. Doubling phases T = 1, 2, 4, ... up to n/2 (Robson's adversary, with BFC's no-split
 *    waste in place of the buddy's rounding): every hole is under T at a phase's start, so
 *    a request of T or more lands in fresh memory or in a hole made for it. A phase lays
 *    c = min(2T - 1, n) units, frees the previous c, and puts T units into that hole: the
 *    chunk is under 2T, so BFC gives it whole, c units held for T requested. It goes on
 *    while the live bound allows, then every live block whose freeing leaves a hole under
 *    the next phase's T is freed (left to right), which gives back most of the budget.
 * 3. Fillers of n units while they fit under M; every hole is under n, so each takes
 *    fresh memory.
 *
 * The ratio it reaches. BFC's reserved total is quantised by the doubling: after the
 * prelude the regions are 4, 8, 16, then 16·2^k, so reaching the region of 2^j·16 MiB
 * gives 28 + 16·(2^(j+1) - 1) MiB. At M = 256 MiB, n = 16 MiB, unit 1 MiB the phases
 * take fresh memory of about 256 (T=1: every unit a pin), + 128·3/2 (T=2, after thinning
 * to holes of 1 unit), + ..., 857 MiB in all by the model below: more than the 524 MiB of
 * the regions up to 256 MiB, so the 512 MiB region is made, and less than the 1036 MiB
 * that would force a 1024 MiB one: peak reserved 1036 MiB, 4.047 x M. (Without the
 * prelude the same phases give 1022 MiB, 3.99 x M; the search's best was 1030.) The next
 * level, 2060 MiB, needs all 1036 MiB taken with every hole under n by 240 live units
 * (4.3 MiB of memory per live MiB); no schedule of these phases (thresholds from 1 to 15,
 * chunks of T or 2T-1, with or without holes laid per phase: 5,000 tried offline) took
 * more than 883.
 *
 * It is adaptive: it plays every request against its own model of BFC's placement (at
 * unit granularity, the device's lower address for a newer region breaking ties), so a
 * thinning frees exactly the blocks whose holes stay small. Invariant: the model's chunks
 * tile its regions, sorted by (region, offset); live units never exceed M.
 */
#include <stdlib.h>
#include <string.h>

#include "gen_robson_bfc.h"

enum { ST_PRELUDE, ST_PHASE, ST_FILL };

typedef struct chunk {
    uint64_t off, size, req, id; /* req 0: free */
    uint32_t reg;
} chunk;

struct robson_bfc {
    uint64_t m, n, unit, live;
    uint64_t curr;     /* curr_region_allocation_bytes_, in units */
    uint64_t max_frag; /* max_internal_fragmentation_bytes, in units */
    uint64_t t, pend;  /* the phase's T; the chunk waiting for its T (UINT64_MAX: none) */
    uint32_t nreg;
    int stage;
    chunk *c;
    size_t nc, cap;
};

int gen_robson_bfc_create(uint64_t m, uint64_t n, uint64_t unit, robson_bfc **out)
{
    robson_bfc *a = calloc(1, sizeof *a);
    if (!a)
        return AS_ENOMEM;
    a->m = m, a->n = n, a->unit = unit;
    a->curr = (2u << 20) / unit;
    a->max_frag = (128u << 20) / unit;
    a->pend = UINT64_MAX;
    a->t = 1;
    /* Free chunks lie between live ones or at a region's end, so chunks <= 2 x live
     * blocks + regions; live blocks <= m, regions < 128 (each doubles, bar the prelude's). */
    a->cap = 2 * m + 128;
    a->c = calloc(a->cap, sizeof *a->c);
    if (!a->c) {
        free(a);
        return AS_ENOMEM;
    }
    *out = a;
    return 0;
}

void gen_robson_bfc_free(robson_bfc *a)
{
    if (a)
        free(a->c);
    free(a);
}

/* The smallest free chunk of at least r units, the lowest address among equals (a newer
 * region lies lower); nc when none. */
static size_t find(const robson_bfc *a, uint64_t r)
{
    size_t best = a->nc;
    for (size_t i = 0; i < a->nc; i++) {
        const chunk *x = &a->c[i], *b = &a->c[best];
        if (x->req || x->size < r)
            continue;
        if (best == a->nc || x->size < b->size || (x->size == b->size && x->reg > b->reg))
            best = i;
    }
    return best;
}

/* Extend(): the region BFC adds when nothing holds r units. */
static void extend(robson_bfc *a, uint64_t r)
{
    int increased = 0;
    while (r > a->curr)
        a->curr *= 2, increased = 1;
    a->c[a->nc++] = (chunk){.size = a->curr, .reg = a->nreg++};
    if (!increased)
        a->curr *= 2;
}

/* Index of the chunk now holding the new r-unit block (its id from the generator). */
static size_t take(as_gen *g, robson_bfc *a, uint64_t r)
{
    size_t i = find(a, r);
    if (i == a->nc) {
        extend(a, r);
        i = find(a, r);
    }
    chunk *x = &a->c[i];
    if (x->size >= 2 * r || x->size - r >= a->max_frag) {
        memmove(&a->c[i + 2], &a->c[i + 1], (a->nc - i - 1) * sizeof *a->c);
        a->nc++;
        a->c[i + 1] = (chunk){.off = x->off + r, .size = x->size - r, .reg = x->reg};
        x->size = r;
    }
    x->req = r;
    x->id = gen_alloc(g, r * a->unit, 0);
    a->live += r;
    return i;
}

static void drop(robson_bfc *a, size_t i)
{
    memmove(&a->c[i], &a->c[i + 1], (a->nc - i - 1) * sizeof *a->c);
    a->nc--;
}

/* Frees chunk i and coalesces it; returns the index of the free chunk it became. */
static size_t release(as_gen *g, robson_bfc *a, size_t i)
{
    chunk *x = &a->c[i];
    gen_free(g, x->id, x->req * a->unit, 0);
    a->live -= x->req;
    x->req = 0;
    if (i + 1 < a->nc && !a->c[i + 1].req && a->c[i + 1].reg == x->reg) {
        x->size += a->c[i + 1].size;
        drop(a, i + 1);
    }
    if (i > 0 && !a->c[i - 1].req && a->c[i - 1].reg == x->reg) {
        a->c[i - 1].size += x->size;
        drop(a, i);
        i--;
    }
    return i;
}

static size_t index_of(const robson_bfc *a, uint64_t id)
{
    size_t i = 0;
    while (i < a->nc && !(a->c[i].req && a->c[i].id == id))
        i++;
    return i;
}

/* Frees, left to right, every live block whose hole would stay at most h units. */
static void thin(as_gen *g, robson_bfc *a, uint64_t h)
{
    for (size_t i = 0; i < a->nc; i++) {
        const chunk *x = &a->c[i];
        if (!x->req)
            continue;
        uint64_t hole = x->size;
        if (i > 0 && !a->c[i - 1].req && a->c[i - 1].reg == x->reg)
            hole += a->c[i - 1].size;
        if (i + 1 < a->nc && !a->c[i + 1].req && a->c[i + 1].reg == x->reg)
            hole += a->c[i + 1].size;
        if (hole <= h)
            i = release(g, a, i);
    }
}

/* One step of a phase: c units in fresh memory, and the previous c swapped for T. */
static int phase_step(as_gen *g, robson_bfc *a)
{
    uint64_t t = a->t, c = 2 * t - 1 < a->n ? 2 * t - 1 : a->n;
    if (a->live + c <= a->m) {
        uint64_t next = a->c[take(g, a, c)].id;
        if (c == t)
            return 0;
        if (a->pend != UINT64_MAX) {
            release(g, a, index_of(a, a->pend));
            take(g, a, t); /* into that hole, under 2T: given whole */
        }
        a->pend = next;
        return 0;
    }
    a->pend = UINT64_MAX; /* the last c stays as it is */
    uint64_t nt = 4 * t <= a->n ? 2 * t : a->n;
    thin(g, a, nt - 1);
    if (nt == a->n)
        a->stage = ST_FILL;
    a->t = nt;
    return 0;
}

int gen_robson_bfc_refill(as_gen *g, robson_bfc *a)
{
    switch (a->stage) {
    case ST_PRELUDE:
        if (a->curr + 1 <= a->n && a->live + a->curr + 1 <= a->m) {
            take(g, a, a->curr + 1); /* fits nowhere: a region of twice curr */
            return 0;
        }
        a->stage = ST_PHASE;
        return 0;
    case ST_PHASE:
        return phase_step(g, a);
    default:
        if (a->live + a->n > a->m)
            return AS_TRACE_EOF;
        take(g, a, a->n);
        return 0;
    }
}
