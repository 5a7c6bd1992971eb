/*
 * oset.h - the ordered sets of free blocks that the policies share, written once for any
 * block node: a treap with parent links keyed by (size, addr) (best fit) or by addr
 * (torch's unmapped ranges), and a bin, the unit of the binned size indexes (as_bins in
 * common.c for bestfit, bfc and firstfit's oversize blocks; torch's per-stream free sets in
 * torch_fset.h): a circular list sorted by (size, addr) while it holds up to OSET_LIST_MAX
 * blocks, a (size, addr) treap beyond that until it is down to OSET_LIST_BACK. Real size
 * mixes keep nearly every bin a list, so the common operation is a few loads and stores
 * on one or two cache lines; crowded bins stay O(log n).
 *
 * A template: define OSET_NODE (a struct with uint64_t addr, size and uint32_t l, r, up;
 * index 0 of the node array is nil) and OSET(name) (the prefix of the functions it
 * makes), then include this file. The caller keeps each bin's head (list: its smallest
 * block; treap: the root), count and kind.
 *
 * Invariant (OSET(bin_check)): a list's r runs once around the bin in strictly increasing
 * (size, addr) order, l is its inverse, the head is the smallest; a treap's in-order walk
 * is strictly increasing by its key, each node's priority (a fixed hash of its index, so
 * no field holds it) is at most its parent's, and up links each child to its parent.
 */
#include <stdint.h>

#if !defined(OSET_NODE) || !defined(OSET)
#error "define OSET_NODE and OSET(name) before including oset.h"
#endif

/* A list bin becomes a treap when a block more would exceed OSET_LIST_MAX, and a treap
 * bin a list again when it is down to OSET_LIST_BACK; an includer may set its own (one
 * pair per translation unit). */
#ifndef OSET_LIST_MAX
#define OSET_LIST_MAX 32
#define OSET_LIST_BACK 16
#endif

#ifndef OSET_COMMON_DEFS
#define OSET_COMMON_DEFS
/* Forced: at -O2 gcc keeps some of these out of line, and their calls cost more than
 * their work. */
#define OSET_HOT static inline __attribute__((always_inline))
#define OSET_COLD static __attribute__((noinline, cold, unused))

/* The treap priority of node i: a fixed hash, deterministic and random enough. */
static inline uint32_t oset_prio(uint32_t i)
{
    i ^= i >> 16;
    i *= 0x7feb352dU;
    i ^= i >> 15;
    i *= 0x846ca68bU;
    i ^= i >> 16;
    return i;
}
#endif

/* Is the key (size, addr) below node n's? by_addr: the key is addr alone. */
OSET_HOT int OSET(below)(const OSET_NODE *b, int by_addr, uint64_t size, uint64_t addr, uint32_t n)
{
    if (!by_addr && size != b[n].size)
        return size < b[n].size;
    return addr < b[n].addr;
}

OSET_HOT int OSET(lt)(const OSET_NODE *b, uint32_t x, uint32_t y)
{
    return b[x].size < b[y].size || (b[x].size == b[y].size && b[x].addr < b[y].addr);
}

/* ---- treaps ---------------------------------------------------------------------------- */

static inline uint32_t OSET(treap_min)(const OSET_NODE *b, uint32_t i)
{
    while (i && b[i].l)
        i = b[i].l;
    return i;
}

static inline uint32_t OSET(treap_max)(const OSET_NODE *b, uint32_t i)
{
    while (i && b[i].r)
        i = b[i].r;
    return i;
}

static inline uint32_t OSET(treap_next)(const OSET_NODE *b, uint32_t i)
{
    if (b[i].r)
        return OSET(treap_min)(b, b[i].r);
    uint32_t p = b[i].up;
    while (p && b[p].r == i) {
        i = p;
        p = b[p].up;
    }
    return p;
}

static inline uint32_t OSET(treap_prev)(const OSET_NODE *b, uint32_t i)
{
    if (b[i].l)
        return OSET(treap_max)(b, b[i].l);
    uint32_t p = b[i].up;
    while (p && b[p].l == i) {
        i = p;
        p = b[p].up;
    }
    return p;
}

/* Points the link that held old (in parent, or the root) at nw. */
OSET_HOT void OSET(relink)(OSET_NODE *b, uint32_t *root, uint32_t parent, uint32_t old, uint32_t nw)
{
    if (!parent)
        *root = nw;
    else if (b[parent].l == old)
        b[parent].l = nw;
    else
        b[parent].r = nw;
    if (nw)
        b[nw].up = parent;
}

static inline void OSET(rotate_up)(OSET_NODE *b, uint32_t *root, uint32_t x)
{
    uint32_t p = b[x].up, g = b[p].up;
    if (b[p].l == x) {
        b[p].l = b[x].r;
        if (b[x].r)
            b[b[x].r].up = p;
        b[x].r = p;
    } else {
        b[p].r = b[x].l;
        if (b[x].l)
            b[b[x].l].up = p;
        b[x].l = p;
    }
    b[p].up = x;
    OSET(relink)(b, root, g, p, x);
}

static inline void OSET(treap_insert)(OSET_NODE *b, uint32_t *root, int by_addr, uint32_t x)
{
    uint32_t y = 0, cur = *root;
    int left = 0;
    while (cur) {
        y = cur;
        left = OSET(below)(b, by_addr, b[x].size, b[x].addr, cur);
        cur = left ? b[cur].l : b[cur].r;
    }
    b[x].l = b[x].r = 0;
    b[x].up = y;
    if (!y)
        *root = x;
    else if (left)
        b[y].l = x;
    else
        b[y].r = x;
    uint32_t px = oset_prio(x);
    while (b[x].up && oset_prio(b[x].up) < px)
        OSET(rotate_up)(b, root, x);
}

static inline void OSET(treap_erase)(OSET_NODE *b, uint32_t *root, uint32_t x)
{
    while (b[x].l && b[x].r)
        OSET(rotate_up)(b, root, oset_prio(b[x].l) > oset_prio(b[x].r) ? b[x].l : b[x].r);
    OSET(relink)(b, root, b[x].up, x, b[x].l ? b[x].l : b[x].r);
    b[x].l = b[x].r = b[x].up = 0;
}

/* The first node whose key is >= (size, addr) (by_addr: addr alone), or 0. */
static inline uint32_t OSET(treap_lower_bound)(const OSET_NODE *b, uint32_t root, int by_addr,
                                               uint64_t size, uint64_t addr)
{
    uint32_t i = root, best = 0;
    while (i) {
        int lt = by_addr || b[i].size == size ? b[i].addr < addr : b[i].size < size;
        if (lt) {
            i = b[i].r;
        } else {
            best = i;
            i = b[i].l;
        }
    }
    return best;
}

/* ---- bins ------------------------------------------------------------------------------ */

/* x into the circular list at head; returns the new head. */
OSET_HOT uint32_t OSET(list_insert)(OSET_NODE *b, uint32_t head, uint32_t x)
{
    if (!head) {
        b[x].l = b[x].r = x;
        return x;
    }
    uint32_t before = head;
    if (OSET(lt)(b, x, b[head].l)) /* else it goes last: a growing bin's common case */
        while (!OSET(lt)(b, x, before))
            before = b[before].r;
    uint32_t p = b[before].l;
    b[x].l = p;
    b[x].r = before;
    b[p].r = x;
    b[before].l = x;
    return before == head && OSET(lt)(b, x, head) ? x : head;
}

OSET_HOT uint32_t OSET(list_erase)(OSET_NODE *b, uint32_t head, uint32_t x)
{
    uint32_t l = b[x].l, r = b[x].r;
    b[x].l = b[x].r = 0;
    if (r == x)
        return 0;
    b[l].r = r;
    b[r].l = l;
    return head == x ? r : head;
}

OSET_COLD void OSET(to_treap)(OSET_NODE *b, uint32_t *head)
{
    uint32_t h = *head, x = h, root = 0;
    do {
        uint32_t nx = b[x].r;
        OSET(treap_insert)(b, &root, 0, x);
        x = nx;
    } while (x != h);
    *head = root;
}

OSET_COLD void OSET(to_list)(OSET_NODE *b, uint32_t *head)
{
    uint32_t v[OSET_LIST_BACK + 1], n = 0;
    for (uint32_t x = OSET(treap_min)(b, *head); x && n < OSET_LIST_BACK + 1;
         x = OSET(treap_next)(b, x))
        v[n++] = x;
    for (uint32_t i = 0; i < n; i++) {
        b[v[i]].l = v[(i + n - 1) % n];
        b[v[i]].r = v[(i + 1) % n];
        b[v[i]].up = 0;
    }
    *head = n ? v[0] : 0;
}

/* The treap side of bin_insert and bin_erase, out of line: crowded bins are rare. */
OSET_COLD int OSET(bin_insert_treap)(OSET_NODE *b, uint32_t *head, int treap, uint32_t x)
{
    if (!treap)
        OSET(to_treap)(b, head);
    OSET(treap_insert)(b, head, 0, x);
    return 1;
}

OSET_COLD int OSET(bin_erase_treap)(OSET_NODE *b, uint32_t *head, unsigned n, uint32_t x)
{
    OSET(treap_erase)(b, head, x);
    if (n - 1 > OSET_LIST_BACK)
        return 1;
    OSET(to_list)(b, head);
    return 0;
}

/* x into a bin of n blocks (a treap if `treap`); returns whether the bin is a treap now. */
OSET_HOT int OSET(bin_insert)(OSET_NODE *b, uint32_t *head, unsigned n, int treap, uint32_t x)
{
    if (__builtin_expect(!treap && n < OSET_LIST_MAX, 1)) {
        *head = OSET(list_insert)(b, *head, x);
        return 0;
    }
    return OSET(bin_insert_treap)(b, head, treap, x);
}

/* x out of its bin of n blocks; returns whether the bin is a treap now. */
OSET_HOT int OSET(bin_erase)(OSET_NODE *b, uint32_t *head, unsigned n, int treap, uint32_t x)
{
    if (__builtin_expect(!treap, 1)) {
        *head = OSET(list_erase)(b, *head, x);
        return 0;
    }
    return OSET(bin_erase_treap)(b, head, n, x);
}

static inline uint32_t OSET(bin_min)(const OSET_NODE *b, uint32_t head, int treap)
{
    return treap ? OSET(treap_min)(b, head) : head;
}

static inline uint32_t OSET(bin_max)(const OSET_NODE *b, uint32_t head, int treap)
{
    return treap ? OSET(treap_max)(b, head) : head ? b[head].l : 0;
}

/* The smallest block of a non-empty bin with size >= size (lowest address among equals),
 * or 0 when none fits. */
OSET_HOT uint32_t OSET(bin_lower_bound)(const OSET_NODE *b, uint32_t head, int treap, uint64_t size)
{
    if (__builtin_expect(treap, 0))
        return OSET(treap_lower_bound)(b, head, 0, size, 0);
    if (b[b[head].l].size < size) /* the bin's largest does not fit */
        return 0;
    while (b[head].size < size)
        head = b[head].r;
    return head;
}

/* The block after x in its bin, or 0 after the last. */
static inline uint32_t OSET(bin_next)(const OSET_NODE *b, uint32_t head, int treap, uint32_t x)
{
    if (treap)
        return OSET(treap_next)(b, x);
    return b[x].r == head ? 0 : b[x].r;
}

static inline uint32_t OSET(bin_prev)(const OSET_NODE *b, uint32_t head, int treap, uint32_t x)
{
    if (treap)
        return OSET(treap_prev)(b, x);
    return x == head ? 0 : b[x].l;
}

/* A bin's or an address treap's structure (kind: 0 list, 1 (size, addr) treap, 2 address
 * treap): links, order and heap order, at most nb nodes (indices < nb). NULL when sound,
 * with the node count in *count; else what is wrong. The caller checks each node's
 * membership along OSET(bin_min) / OSET(bin_next) once this has passed. */
static inline const char *OSET(bin_check)(const OSET_NODE *b, uint32_t nb, uint32_t head, int kind,
                                          uint64_t *count)
{
    uint64_t c = 0;
    *count = 0;
    if (!head)
        return NULL;
    if (head >= nb)
        return "a bin's head is out of range";
    if (kind && b[head].up)
        return "a treap's root has a parent";
    uint32_t prev = 0;
    for (uint32_t x = OSET(bin_min)(b, head, kind != 0); x;
         x = kind ? OSET(treap_next)(b, x) : (b[x].r == head ? 0 : b[x].r)) {
        if (x >= nb || ++c > nb)
            return "a bin's links are broken or cyclic";
        if (prev && (kind == 2 ? b[prev].addr >= b[x].addr : !OSET(lt)(b, prev, x)))
            return "a bin is out of order";
        if (!kind && (b[x].r >= nb || b[x].l >= nb || b[b[x].r].l != x || b[b[x].l].r != x))
            return "a bin's list links are broken";
        for (int side = 0; kind && side < 2; side++) {
            uint32_t ch = side ? b[x].r : b[x].l;
            if (ch && (ch >= nb || b[ch].up != x || oset_prio(ch) > oset_prio(x)))
                return "a treap's heap order or parent links are broken";
        }
        prev = x;
    }
    *count = c;
    return NULL;
}

#undef OSET_NODE
#undef OSET
