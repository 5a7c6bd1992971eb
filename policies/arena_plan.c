/*
 * arena_plan.c - greedy offline placement in one arena (arena_plan.h).
 *
 * One pass per order: the blocks are taken in that order, and each is put into the best
 * gap between the placed blocks that overlap it in time. Those are found without looking
 * at any other block: items are indexed by ALLOC ordinal, which is also start order, so
 * the blocks overlapping item i are the placed j <= hi(i) (the last ordinal starting
 * before i ends) with end_j > start_i. A max tree over ordinals holds end_j for placed
 * blocks (0 for the others), and a descent reports exactly those j, O(log n) each.
 *
 * Invariant after each step of a pass: no two placed blocks overlap both in time and in
 * the arena, and *arena is the largest end offset among them.
 */
#include "arena_plan.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

typedef struct key {
    uint64_t k1, k2, k3;
    size_t id;
} key;

typedef struct span {
    uint64_t lo, hi;
} span;

typedef struct node {
    size_t v, lo, w; /* tree index, first leaf and number of leaves below it */
} node;

typedef struct pass {
    const as_plan_item *it;
    size_t n, leaves;
    uint64_t *tree; /* max end over placed blocks, heap order, 2 * leaves entries */
    span *near;     /* placed blocks overlapping the one being placed, by offset */
    size_t nnear, capnear;
    node *stack; /* descent stack: a pending right child per level, log2(leaves) + 2 */
} pass;

static int key_cmp(const void *a, const void *b)
{
    const key *x = a, *y = b;
    if (x->k1 != y->k1)
        return x->k1 > y->k1 ? -1 : 1; /* decreasing */
    if (x->k2 != y->k2)
        return x->k2 > y->k2 ? -1 : 1;
    if (x->k3 != y->k3)
        return x->k3 < y->k3 ? -1 : 1; /* increasing start: earlier first */
    return 0;
}

/* Sorts v[0..n) by lo: typed quicksort (median of three, the smaller side recursed) with
 * insertion sort below 16; a library qsort's indirect compare was 70 % of a plan. */
static void sort_spans(span *v, size_t n)
{
    while (n > 16) {
        span *a = &v[0], *b = &v[n / 2], *c = &v[n - 1], t;
        uint64_t piv = a->lo < b->lo ? (b->lo < c->lo ? b->lo : (a->lo < c->lo ? c->lo : a->lo))
                                     : (a->lo < c->lo ? a->lo : (b->lo < c->lo ? c->lo : b->lo));
        size_t i = 0, j = n - 1;
        for (;;) {
            while (v[i].lo < piv)
                i++;
            while (v[j].lo > piv)
                j--;
            if (i >= j)
                break;
            t = v[i], v[i] = v[j], v[j] = t;
            i++, j--;
        }
        size_t left = j + 1; /* [0, j] <= piv <= [j + 1, n) */
        if (left < n - left) {
            sort_spans(v, left);
            v += left, n -= left;
        } else {
            sort_spans(v + left, n - left);
            n = left;
        }
    }
    for (size_t i = 1; i < n; i++) {
        span x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1].lo > x.lo; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* The last ordinal whose block starts before `end` (items are in start order). */
static size_t last_before(const as_plan_item *it, size_t n, uint64_t end)
{
    size_t lo = 0, hi = n; /* answer in [lo, hi): it[lo].start < end holds for the caller */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (it[mid].start < end)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* ---- breadth: the most bytes live at any instant of each block's lifetime -------------- */

static int end_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b; /* lo = end, hi = size */
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* br[i] = max over ALLOCs k in [i, hi(i)] of the bytes live right after ALLOC k. */
static int breadth(const as_plan_item *it, size_t n, size_t leaves, uint64_t *br)
{
    span *ends = malloc(n * sizeof *ends);
    uint64_t *t = calloc(2 * leaves, sizeof *t);
    if (!ends || !t) {
        free(ends);
        free(t);
        return AS_ENOMEM;
    }
    for (size_t k = 0; k < n; k++)
        ends[k] = (span){it[k].end, it[k].size};
    qsort(ends, n, sizeof *ends, end_cmp);
    uint64_t live = 0;
    size_t e = 0;
    for (size_t k = 0; k < n; k++) {
        while (e < n && ends[e].lo <= it[k].start)
            live -= ends[e++].hi;
        live += it[k].size;
        t[leaves + k] = live;
    }
    for (size_t v = leaves - 1; v >= 1; v--)
        t[v] = t[2 * v] > t[2 * v + 1] ? t[2 * v] : t[2 * v + 1];
    for (size_t i = 0; i < n; i++) {
        size_t lo = i + leaves, hi = last_before(it, n, it[i].end) + leaves + 1;
        uint64_t m = 0;
        for (; lo < hi; lo /= 2, hi /= 2) { /* max over leaves [lo, hi) */
            if (lo & 1)
                m = t[lo] > m ? t[lo] : m, lo++;
            if (hi & 1)
                hi--, m = t[hi] > m ? t[hi] : m;
        }
        br[i] = m;
    }
    free(ends);
    free(t);
    return 0;
}

/* The processing order of one heuristic: ids of the items to place (size > 0). */
static int order_of(const as_plan_item *it, size_t n, size_t leaves, as_plan_order o, size_t *ids,
                    size_t *nids)
{
    key *k = malloc((n ? n : 1) * sizeof *k);
    uint64_t *br = o == AS_PLAN_BREADTH ? malloc((n ? n : 1) * sizeof *br) : NULL;
    if (!k || (o == AS_PLAN_BREADTH && !br)) {
        free(k);
        free(br);
        return AS_ENOMEM;
    }
    if (br && breadth(it, n, leaves, br)) {
        free(k);
        free(br);
        return AS_ENOMEM;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!it[i].size)
            continue;
        uint64_t len = it[i].end - it[i].start;
        if (o == AS_PLAN_SIZE)
            k[m] = (key){it[i].size, len, it[i].start, i};
        else if (o == AS_PLAN_LENGTH)
            k[m] = (key){len, it[i].size, it[i].start, i};
        else
            k[m] = (key){br[i], it[i].size, it[i].start, i};
        m++;
    }
    qsort(k, m, sizeof *k, key_cmp);
    for (size_t i = 0; i < m; i++)
        ids[i] = k[i].id;
    *nids = m;
    free(k);
    free(br);
    return 0;
}

/* ---- one pass ---------------------------------------------------------------------------- */

/* p->near = the placed blocks j <= hi with end_j > start (their arena spans). */
static int overlapping(pass *p, size_t hi, uint64_t start, const uint64_t *off)
{
    size_t sp = 0;
    p->nnear = 0;
    p->stack[sp++] = (node){1, 0, p->leaves};
    while (sp) {
        node v = p->stack[--sp];
        if (v.lo > hi || p->tree[v.v] <= start)
            continue;
        if (v.w == 1) {
            size_t j = v.lo;
            if (p->nnear == p->capnear) {
                size_t nc = p->capnear ? 2 * p->capnear : 64;
                span *ns = realloc(p->near, nc * sizeof *ns);
                if (!ns)
                    return AS_ENOMEM;
                p->near = ns;
                p->capnear = nc;
            }
            p->near[p->nnear++] = (span){off[j], off[j] + p->it[j].size};
            continue;
        }
        p->stack[sp++] = (node){2 * v.v + 1, v.lo + v.w / 2, v.w / 2};
        p->stack[sp++] = (node){2 * v.v, v.lo, v.w / 2};
    }
    return 0;
}

/* The best gap for a block of `size` among p->near: the smallest that holds it, lowest
 * offset among equals; on top of them when none does. */
static uint64_t best_gap(pass *p, uint64_t size)
{
    sort_spans(p->near, p->nnear);
    uint64_t top = 0, best = AS_PLAN_NONE, best_len = UINT64_MAX;
    for (size_t k = 0; k < p->nnear; k++) {
        if (p->near[k].lo > top) {
            uint64_t gap = p->near[k].lo - top;
            if (gap >= size && gap < best_len) {
                best = top;
                best_len = gap;
            }
        }
        if (p->near[k].hi > top)
            top = p->near[k].hi;
    }
    return best != AS_PLAN_NONE ? best : top;
}

static int place_all(pass *p, const size_t *ids, size_t nids, uint64_t *off, uint64_t *arena)
{
    memset(p->tree, 0, 2 * p->leaves * sizeof *p->tree);
    *arena = 0;
    for (size_t k = 0; k < nids; k++) {
        size_t i = ids[k];
        const as_plan_item *x = &p->it[i];
        int rc = overlapping(p, last_before(p->it, p->n, x->end), x->start, off);
        if (rc)
            return rc;
        uint64_t o = best_gap(p, x->size);
        if (o > UINT64_MAX - x->size)
            return AS_EINVAL;
        off[i] = o;
        if (o + x->size > *arena)
            *arena = o + x->size;
        for (size_t v = i + p->leaves; v >= 1 && p->tree[v] < x->end; v /= 2)
            p->tree[v] = x->end;
    }
    return 0;
}

static int valid(const as_plan_item *it, size_t n)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (it[i].end <= it[i].start || (i && it[i].start <= it[i - 1].start))
            return 0;
        if (it[i].size > UINT64_MAX - sum)
            return 0;
        sum += it[i].size;
    }
    return 1;
}

int as_arena_plan(const as_plan_item *items, size_t n, as_plan_order order, uint64_t *off,
                  uint64_t *arena, as_plan_order *used)
{
    *arena = 0;
    if (!valid(items, n))
        return AS_EINVAL;
    pass p = {.it = items, .n = n, .leaves = 1};
    while (p.leaves < n)
        p.leaves *= 2;
    size_t depth = 1;
    for (size_t l = p.leaves; l > 1; l /= 2)
        depth++;
    size_t *ids = malloc((n ? n : 1) * sizeof *ids);
    uint64_t *tmp = malloc((n ? n : 1) * sizeof *tmp);
    p.tree = malloc(2 * p.leaves * sizeof *p.tree);
    p.stack = malloc((2 * depth + 2) * sizeof *p.stack);
    int rc = ids && tmp && p.tree && p.stack ? 0 : AS_ENOMEM;
    as_plan_order first = order == AS_PLAN_BEST ? AS_PLAN_SIZE : order;
    as_plan_order last = order == AS_PLAN_BEST ? AS_PLAN_LENGTH : order;
    uint64_t best = UINT64_MAX;
    for (as_plan_order o = first; rc == 0 && o <= last; o++) {
        size_t nids = 0;
        uint64_t a = 0;
        for (size_t i = 0; i < n; i++)
            tmp[i] = AS_PLAN_NONE;
        if ((rc = order_of(items, n, p.leaves, o, ids, &nids)) ||
            (rc = place_all(&p, ids, nids, tmp, &a)))
            break;
        if (a < best) { /* the first order wins ties */
            best = a;
            memcpy(off, tmp, n * sizeof *off);
            if (used)
                *used = o;
        }
    }
    if (rc == 0)
        *arena = best == UINT64_MAX ? 0 : best;
    free(ids);
    free(tmp);
    free(p.tree);
    free(p.stack);
    free(p.near);
    return rc;
}
