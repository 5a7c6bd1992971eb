/*
 * simdev.c - the simulated device (see simdev.h).
 *
 * Address space is managed by two treaps keyed by address: `live` holds the ranges handed
 * out, `holes` the free ranges, each node carrying the largest hole in its subtree so that
 * the lowest-address first fit is O(log n). Invariant: holes never touch (adjacent holes
 * are merged) and no live range overlaps a hole or another live range.
 *
 * Cost model defaults (ns = fixed + per MiB * size): measured on an NVIDIA H200 with
 * CUDA 13 (replay/RESULTS.md, "Calibration"). Until that calibration they are the
 * orders of magnitude commonly reported: cudaMalloc ~ tens of us, cudaFree ~ tens of us
 * plus an implicit synchronisation, cuMemMap+cuMemCreate per 2 MiB page ~ 10 us.
 */
#include "simdev.h"

#include <stdlib.h>
#include <string.h>

typedef struct node {
    uint64_t addr, len, maxlen;
    uint64_t aux;               /* chunks: creation number; chunk_seq: chunk address */
    uint32_t prio, left, right; /* child indices, 0 = none (slot 0 is unused) */
} node;

typedef struct treap {
    node *n;
    uint32_t cap, used, free_head, root;
    uint32_t rng;
} treap;

struct as_simdev {
    as_device dev;
    as_simdev_params p;
    treap live, holes;           /* physical (cudaMalloc) address space */
    treap chunks;                /* AS_PLACE_CHUNKED: the heap's chunks, by address (len = size) */
    treap chunk_seq;             /* AS_PLACE_CHUNKED: the chunks by creation number (len = largest
                                    free range inside, aux = address) */
    uint64_t chunk_clock;        /* AS_PLACE_CHUNKED: chunks made so far */
    treap chunk_gaps;            /* AS_PLACE_CHUNKED: free address space outside the chunks */
    uint64_t chunk_edge;         /* AS_PLACE_CHUNKED: lowest address any chunk ever had */
    treap va_live, va_holes;     /* virtual-only (cuMemAddressReserve) space */
    uint64_t next_addr, va_next; /* first address never handed out */
    as_simdev_counters c;
    as_dev_log_fn log;
    void *log_user;
};

/* ---- treap ---------------------------------------------------------------------------- */

static uint32_t tr_rand(treap *t)
{
    t->rng ^= t->rng << 13;
    t->rng ^= t->rng >> 17;
    t->rng ^= t->rng << 5;
    return t->rng;
}

static uint32_t tr_new(treap *t, uint64_t addr, uint64_t len)
{
    uint32_t i;
    if (t->free_head) {
        i = t->free_head;
        t->free_head = t->n[i].left;
    } else {
        if (t->used + 1 >= t->cap) {
            uint32_t nc = t->cap ? t->cap * 2 : 64;
            node *nn = realloc(t->n, nc * sizeof *nn);
            if (!nn)
                return 0;
            t->n = nn;
            t->cap = nc;
        }
        i = ++t->used;
    }
    t->n[i] = (node){.addr = addr, .len = len, .maxlen = len, .prio = tr_rand(t)};
    return i;
}

static void tr_release_node(treap *t, uint32_t i)
{
    t->n[i].left = t->free_head;
    t->free_head = i;
}

static void tr_fix(treap *t, uint32_t i)
{
    node *x = &t->n[i];
    uint64_t m = x->len;
    if (x->left && t->n[x->left].maxlen > m)
        m = t->n[x->left].maxlen;
    if (x->right && t->n[x->right].maxlen > m)
        m = t->n[x->right].maxlen;
    x->maxlen = m;
}

/* Splits the tree at key: left gets addr < key, right addr >= key. */
static void tr_split(treap *t, uint32_t root, uint64_t key, uint32_t *l, uint32_t *r)
{
    if (!root) {
        *l = *r = 0;
        return;
    }
    if (t->n[root].addr < key) {
        tr_split(t, t->n[root].right, key, &t->n[root].right, r);
        *l = root;
    } else {
        tr_split(t, t->n[root].left, key, l, &t->n[root].left);
        *r = root;
    }
    tr_fix(t, root);
}

static uint32_t tr_merge(treap *t, uint32_t a, uint32_t b)
{
    if (!a || !b)
        return a ? a : b;
    if (t->n[a].prio > t->n[b].prio) {
        t->n[a].right = tr_merge(t, t->n[a].right, b);
        tr_fix(t, a);
        return a;
    }
    t->n[b].left = tr_merge(t, a, t->n[b].left);
    tr_fix(t, b);
    return b;
}

static int tr_insert(treap *t, uint64_t addr, uint64_t len)
{
    uint32_t i = tr_new(t, addr, len), l, r;
    if (!i)
        return -1;
    tr_split(t, t->root, addr, &l, &r);
    t->root = tr_merge(t, tr_merge(t, l, i), r);
    return 0;
}

/* Removes the node with exactly this address; returns its length, or 0 if absent. */
static uint64_t tr_remove(treap *t, uint64_t addr)
{
    uint32_t l, m, r;
    tr_split(t, t->root, addr, &l, &m);
    tr_split(t, m, addr + 1, &m, &r);
    uint64_t len = 0;
    if (m) {
        len = t->n[m].len;
        tr_release_node(t, m);
    }
    t->root = tr_merge(t, l, r);
    return len;
}

/* Lowest-address node with len >= want, or 0. */
static uint32_t tr_first_fit(const treap *t, uint64_t want)
{
    uint32_t i = t->root;
    while (i) {
        const node *x = &t->n[i];
        if (x->left && t->n[x->left].maxlen >= want)
            i = x->left;
        else if (x->len >= want)
            return i;
        else if (x->right && t->n[x->right].maxlen >= want)
            i = x->right;
        else
            return 0;
    }
    return 0;
}

/* Highest-address node with len >= want, or 0. */
static uint32_t tr_last_fit(const treap *t, uint64_t want)
{
    uint32_t i = t->root;
    while (i) {
        const node *x = &t->n[i];
        if (x->right && t->n[x->right].maxlen >= want)
            i = x->right;
        else if (x->len >= want)
            return i;
        else if (x->left && t->n[x->left].maxlen >= want)
            i = x->left;
        else
            return 0;
    }
    return 0;
}

/* Node with the greatest addr < key, or 0. */
static uint32_t tr_pred(const treap *t, uint64_t key)
{
    uint32_t i = t->root, best = 0;
    while (i) {
        if (t->n[i].addr < key) {
            best = i;
            i = t->n[i].right;
        } else {
            i = t->n[i].left;
        }
    }
    return best;
}

static uint32_t tr_find(const treap *t, uint64_t key)
{
    uint32_t i = t->root;
    while (i && t->n[i].addr != key)
        i = key < t->n[i].addr ? t->n[i].left : t->n[i].right;
    return i;
}

static void tr_free(treap *t)
{
    free(t->n);
    memset(t, 0, sizeof *t);
}

/* ---- address spaces --------------------------------------------------------------------- */

/* Takes size bytes: from the lowest hole that fits (down == 0, the space grows upward
 * from *edge) or from the top of the highest hole that fits (down == 1, the space grows
 * downward from *edge, as the CUDA driver's top-down VA heap does). */
static int space_take(treap *live, treap *holes, uint64_t *edge, int down, uint64_t size,
                      uint64_t need, uint64_t *addr)
{
    uint32_t h = down ? tr_last_fit(holes, need) : tr_first_fit(holes, need);
    uint64_t a;
    if (h) {
        uint64_t ha = holes->n[h].addr, len = holes->n[h].len;
        tr_remove(holes, ha);
        if (down) {
            a = ha + len - size;
            if (len > size && tr_insert(holes, ha, len - size))
                return AS_DEV_EFAULT;
        } else {
            a = ha;
            if (len > size && tr_insert(holes, ha + size, len - size))
                return AS_DEV_EFAULT;
        }
    } else if (down) {
        *edge -= size;
        a = *edge;
    } else {
        a = *edge;
        *edge += size;
    }
    if (tr_insert(live, a, size))
        return AS_DEV_EFAULT;
    *addr = a;
    return AS_DEV_OK;
}

static int space_give(treap *live, treap *holes, uint64_t *edge, int down, uint64_t addr,
                      uint64_t size)
{
    uint32_t i = tr_find(live, addr);
    if (!i || live->n[i].len != size)
        return AS_DEV_EINVAL;
    tr_remove(live, addr);
    uint64_t a = addr, len = size;
    uint32_t p = tr_pred(holes, addr);
    if (p && holes->n[p].addr + holes->n[p].len == addr) {
        a = holes->n[p].addr;
        len += holes->n[p].len;
        tr_remove(holes, a);
    }
    uint32_t s = tr_find(holes, addr + size);
    if (s) {
        len += holes->n[s].len;
        tr_remove(holes, addr + size);
    }
    if (!down && a + len == *edge) { /* the top of the space shrinks back */
        *edge = a;
        return AS_DEV_OK;
    }
    if (down && a == *edge) { /* the bottom of the space rises back */
        *edge = a + len;
        return AS_DEV_OK;
    }
    return tr_insert(holes, a, len) ? AS_DEV_EFAULT : AS_DEV_OK;
}

/* AS_PLACE_CHUNKED (see simdev.h). `holes` holds the free space inside chunks and never
 * merges across a chunk boundary; `chunks` the chunks by address, `chunk_seq` by creation
 * (each with its largest free range, so the most recent chunk that fits is one descent);
 * the chunks' address space is managed top-down in `chunk_gaps` (chunk_edge its bottom). */

/* Largest len among nodes with lo <= addr < hi (subtree i). */
static uint64_t range_max(const treap *t, uint32_t i, uint64_t lo, uint64_t hi, int lo_ok,
                          int hi_ok)
{
    uint64_t m = 0;
    while (i) {
        const node *x = &t->n[i];
        if (!lo_ok && x->addr < lo) {
            i = x->right;
            continue;
        }
        if (!hi_ok && x->addr >= hi) {
            i = x->left;
            continue;
        }
        if (lo_ok && hi_ok)
            return x->maxlen > m ? x->maxlen : m;
        /* x is inside: its one-sided subtrees are wholly inside on one bound */
        if (x->len > m)
            m = x->len;
        uint64_t l = range_max(t, x->left, lo, hi, lo_ok, 1);
        uint64_t r = range_max(t, x->right, lo, hi, 1, hi_ok);
        m = l > m ? l : m;
        return r > m ? r : m;
    }
    return m;
}

/* Lowest-address node with lo <= addr < hi and len >= want (subtree i), or 0. */
static uint32_t first_fit_in(const treap *t, uint32_t i, uint64_t lo, uint64_t hi, uint64_t want)
{
    while (i && t->n[i].maxlen >= want) {
        const node *x = &t->n[i];
        if (x->addr < lo) {
            i = x->right;
        } else if (x->addr >= hi) {
            i = x->left;
        } else {
            uint32_t r = first_fit_in(t, x->left, lo, hi, want);
            if (r)
                return r;
            if (x->len >= want)
                return i;
            i = x->right;
        }
    }
    return 0;
}

/* Re-files chunk (at addr, number seq) in chunk_seq with its current largest free range. */
static int chunk_refile(as_simdev *d, uint64_t addr, uint64_t len, uint64_t seq)
{
    tr_remove(&d->chunk_seq, seq);
    uint64_t m = range_max(&d->holes, d->holes.root, addr, addr + len, 0, 0);
    if (tr_insert(&d->chunk_seq, seq, m))
        return AS_DEV_EFAULT;
    d->chunk_seq.n[tr_find(&d->chunk_seq, seq)].aux = addr;
    return AS_DEV_OK;
}

static int chunk_take(as_simdev *d, uint64_t size, uint64_t *addr)
{
    uint64_t a, caddr, clen, seq;
    uint32_t c = tr_last_fit(&d->chunk_seq, size); /* the most recent chunk with room */
    if (c) {
        seq = d->chunk_seq.n[c].addr;
        caddr = d->chunk_seq.n[c].aux;
        clen = d->chunks.n[tr_find(&d->chunks, caddr)].len;
        uint32_t h = first_fit_in(&d->holes, d->holes.root, caddr, caddr + clen, size);
        if (!h)
            return AS_DEV_EFAULT; /* chunk_seq said there was room */
        uint64_t ha = d->holes.n[h].addr, len = d->holes.n[h].len;
        tr_remove(&d->holes, ha);
        a = ha;
        if (len > size && tr_insert(&d->holes, ha + size, len - size))
            return AS_DEV_EFAULT;
    } else {
        clen = (size + AS_SIMDEV_CHUNK - 1) / AS_SIMDEV_CHUNK * AS_SIMDEV_CHUNK;
        /* chunks are tracked in `chunks` itself, so the gap space needs no live tree of its
         * own: pass `chunks` as the live set (space_take records the new chunk there). */
        /* The driver reserves a chunk's address range 32 MiB aligned, as one asks mmap for
         * an aligned range: map the size plus the alignment less a page, keep the aligned
         * part. So a gap needs clen + 32 MiB - 4 KiB; the chunk lands at its top (the
         * gaps are multiples of 32 MiB here: a gap must be larger than the chunk). */
        int rc = space_take(&d->chunks, &d->chunk_gaps, &d->chunk_edge, 1, clen,
                            clen + AS_SIMDEV_CHUNK - 4096, &a);
        if (rc)
            return rc;
        caddr = a;
        seq = ++d->chunk_clock;
        d->chunks.n[tr_find(&d->chunks, a)].aux = seq;
        if (clen > size && tr_insert(&d->holes, a + size, clen - size))
            return AS_DEV_EFAULT;
    }
    if (tr_insert(&d->live, a, size) || chunk_refile(d, caddr, clen, seq))
        return AS_DEV_EFAULT;
    *addr = a;
    return AS_DEV_OK;
}

static int chunk_give(as_simdev *d, uint64_t addr, uint64_t size)
{
    uint32_t i = tr_find(&d->live, addr);
    if (!i || d->live.n[i].len != size)
        return AS_DEV_EINVAL;
    tr_remove(&d->live, addr);
    uint64_t a = addr, len = size;
    uint32_t p = tr_pred(&d->holes, addr);
    if (p && d->holes.n[p].addr + d->holes.n[p].len == addr && !tr_find(&d->chunks, addr)) {
        a = d->holes.n[p].addr;
        len += d->holes.n[p].len;
        tr_remove(&d->holes, a);
    }
    uint32_t s = tr_find(&d->holes, addr + size);
    if (s && !tr_find(&d->chunks, addr + size)) {
        len += d->holes.n[s].len;
        tr_remove(&d->holes, addr + size);
    }
    uint32_t c = tr_pred(&d->chunks, a + 1);
    uint64_t caddr = d->chunks.n[c].addr, clen = d->chunks.n[c].len, seq = d->chunks.n[c].aux;
    if (caddr == a && clen == len) { /* the chunk is empty: its address space goes back */
        tr_remove(&d->chunk_seq, seq);
        return space_give(&d->chunks, &d->chunk_gaps, &d->chunk_edge, 1, a, len);
    }
    if (tr_insert(&d->holes, a, len))
        return AS_DEV_EFAULT;
    return chunk_refile(d, caddr, clen, seq);
}

/* The CUDA context's own chunks, there before the first cudaMalloc (replay/PLACEMENT.md
 * section 6, measured in replay/data/calib-h200 and the same in all 15 key-replay
 * processes): above the heap's top T, a chunk [T+480, T+512) MiB made first with its first
 * 8 MiB in use, and a chunk [T+384, T+416) MiB made next with all but its last 2 MiB in use.
 * The space from T up is otherwise taken, so the heap still grows down from T. The first
 * 2 MiB segments of a process land in them: T+414, then T+488, T+490, ... */
static const struct {
    uint64_t off, used; /* chunk offset above AS_SIMDEV_TOP, bytes in use from its bottom */
} ctx_chunks[] = {
    {480ull << 20, 8ull << 20},
    {384ull << 20, 30ull << 20},
};

static int chunk_context(as_simdev *d)
{
    for (size_t i = 0; i < sizeof ctx_chunks / sizeof ctx_chunks[0]; i++) {
        uint64_t a = AS_SIMDEV_TOP + ctx_chunks[i].off, seq = ++d->chunk_clock;
        if (tr_insert(&d->chunks, a, AS_SIMDEV_CHUNK))
            return AS_DEV_EFAULT;
        d->chunks.n[tr_find(&d->chunks, a)].aux = seq;
        if (tr_insert(&d->holes, a + ctx_chunks[i].used, AS_SIMDEV_CHUNK - ctx_chunks[i].used) ||
            chunk_refile(d, a, AS_SIMDEV_CHUNK, seq))
            return AS_DEV_EFAULT;
    }
    return AS_DEV_OK;
}

/* ---- device calls ------------------------------------------------------------------------ */

static double cost(const as_cost *c, uint64_t size)
{
    return c->fixed_ns + c->ns_per_mib * (double)size / (double)(1 << 20);
}

static void emit(as_simdev *d, as_dev_action a, uint64_t addr, uint64_t size, double ns)
{
    d->c.time_ns += ns;
    if (d->log) {
        as_dev_event ev = {.action = a, .addr = addr, .size = size, .cost_ns = ns};
        d->log(d->log_user, &ev);
    }
}

static void held_add(as_simdev *d, uint64_t size)
{
    d->c.reserved += size;
    if (d->c.reserved > d->c.peak_reserved)
        d->c.peak_reserved = d->c.reserved;
}

static int over_capacity(const as_simdev *d, uint64_t size)
{
    return d->p.capacity != AS_CAPACITY_NONE &&
           (size > d->p.capacity || d->c.reserved > d->p.capacity - size);
}

static int bad_size(const as_simdev *d, uint64_t size)
{
    return size == 0 || size % d->p.granularity != 0;
}

static int dev_reserve(void *ctx, uint64_t size, uint64_t *addr)
{
    as_simdev *d = ctx;
    if (bad_size(d, size))
        return AS_DEV_EINVAL;
    if (over_capacity(d, size)) {
        d->c.refusals++;
        d->c.time_ns += cost(&d->p.reserve, 0);
        return AS_DEV_OOM;
    }
    int rc = d->p.placement == AS_PLACE_CHUNKED
                 ? chunk_take(d, size, addr)
                 : space_take(&d->live, &d->holes, &d->next_addr,
                              d->p.placement == AS_PLACE_TOP_DOWN, size, size, addr);
    if (rc)
        return rc;
    held_add(d, size);
    d->c.reserves++;
    emit(d, AS_DEV_SEGMENT_ALLOC, *addr, size, cost(&d->p.reserve, size));
    return AS_DEV_OK;
}

static int dev_release(void *ctx, uint64_t addr, uint64_t size)
{
    as_simdev *d = ctx;
    int rc = d->p.placement == AS_PLACE_CHUNKED
                 ? chunk_give(d, addr, size)
                 : space_give(&d->live, &d->holes, &d->next_addr,
                              d->p.placement == AS_PLACE_TOP_DOWN, addr, size);
    if (rc)
        return rc;
    d->c.reserved -= size;
    d->c.releases++;
    emit(d, AS_DEV_SEGMENT_FREE, addr, size, cost(&d->p.release, size));
    return AS_DEV_OK;
}

static int dev_va_reserve(void *ctx, uint64_t size, uint64_t *addr)
{
    as_simdev *d = ctx;
    if (bad_size(d, size))
        return AS_DEV_EINVAL;
    return space_take(&d->va_live, &d->va_holes, &d->va_next, 0, size, size, addr);
}

static int dev_va_release(void *ctx, uint64_t addr, uint64_t size)
{
    as_simdev *d = ctx;
    return space_give(&d->va_live, &d->va_holes, &d->va_next, 0, addr, size);
}

/* The range must lie inside one virtual reservation. Whether pages are already mapped is
 * the policy's to know; check() of the policy verifies its own page accounting. */
static int in_va(const as_simdev *d, uint64_t addr, uint64_t size)
{
    uint32_t p = tr_pred(&d->va_live, addr + 1);
    return p && addr + size <= d->va_live.n[p].addr + d->va_live.n[p].len;
}

static int dev_map(void *ctx, uint64_t addr, uint64_t size)
{
    as_simdev *d = ctx;
    if (bad_size(d, size) || addr % d->p.granularity || !in_va(d, addr, size))
        return AS_DEV_EINVAL;
    if (over_capacity(d, size)) {
        d->c.refusals++;
        d->c.time_ns += cost(&d->p.map, 0);
        return AS_DEV_OOM;
    }
    held_add(d, size);
    d->c.maps++;
    emit(d, AS_DEV_SEGMENT_MAP, addr, size, cost(&d->p.map, size));
    return AS_DEV_OK;
}

static int dev_unmap(void *ctx, uint64_t addr, uint64_t size)
{
    as_simdev *d = ctx;
    if (bad_size(d, size) || addr % d->p.granularity || !in_va(d, addr, size) ||
        size > d->c.reserved)
        return AS_DEV_EINVAL;
    d->c.reserved -= size;
    d->c.unmaps++;
    emit(d, AS_DEV_SEGMENT_UNMAP, addr, size, cost(&d->p.unmap, size));
    return AS_DEV_OK;
}

static uint64_t dev_capacity(void *ctx)
{
    const as_simdev *d = ctx;
    return d->p.limit ? d->p.limit : d->p.capacity;
}
static uint64_t dev_reserved(void *ctx)
{
    return ((as_simdev *)ctx)->c.reserved;
}

static const as_device_ops simdev_ops = {
    .reserve = dev_reserve,
    .release = dev_release,
    .va_reserve = dev_va_reserve,
    .va_release = dev_va_release,
    .map = dev_map,
    .unmap = dev_unmap,
    .capacity = dev_capacity,
    .reserved = dev_reserved,
};

/* ---- public ---------------------------------------------------------------------------- */

const char *as_dev_action_name(as_dev_action a)
{
    static const char *const names[] = {
        [AS_DEV_SEGMENT_ALLOC] = "segment_alloc",
        [AS_DEV_SEGMENT_FREE] = "segment_free",
        [AS_DEV_SEGMENT_MAP] = "segment_map",
        [AS_DEV_SEGMENT_UNMAP] = "segment_unmap",
    };
    return (unsigned)a < 4 ? names[a] : "?";
}

void as_simdev_default_params(as_simdev_params *p)
{
    *p = (as_simdev_params){
        .capacity = AS_CAPACITY_NONE,
        .granularity = AS_DEV_GRANULARITY,
        /* H200, driver 580.159.04, CUDA 13.0, fitted on 190k calls of real replays
         * (replay/fit_replay_latency.py, replay/RESULTS.md "Calibration") */
        .reserve = {.fixed_ns = 69365, .ns_per_mib = 96.7},  /* cudaMalloc */
        .release = {.fixed_ns = 38740, .ns_per_mib = 496.3}, /* cudaFree */
        .map = {.fixed_ns = 14541, .ns_per_mib = 26368.4},   /* cuMemCreate+Map, 2 MiB pages */
        .unmap = {.fixed_ns = 32351, .ns_per_mib = 14730.8}, /* cuMemUnmap+Release */
        .placement = AS_PLACE_CHUNKED,
    };
}

void as_simdev_set_capacity(as_simdev_params *p, uint64_t capacity, unsigned policy_flags)
{
    if (policy_flags & AS_POLICY_F_LIMITS_ITSELF) {
        p->capacity = AS_CAPACITY_NONE;
        p->limit = capacity == AS_CAPACITY_NONE ? 0 : capacity;
    } else {
        p->capacity = capacity;
        p->limit = 0;
    }
}

int as_simdev_create(const as_simdev_params *p, as_simdev **out)
{
    as_simdev *d = calloc(1, sizeof *d);
    *out = NULL;
    if (!d)
        return AS_DEV_EFAULT;
    if (p)
        d->p = *p;
    else
        as_simdev_default_params(&d->p);
    if (d->p.granularity == 0)
        d->p.granularity = AS_DEV_GRANULARITY;
    d->next_addr = d->p.placement == AS_PLACE_LOW_FIRST_FIT ? AS_SIMDEV_BASE : AS_SIMDEV_TOP;
    d->chunk_edge = AS_SIMDEV_TOP;
    d->va_next = AS_SIMDEV_VA_BASE;
    d->live.rng = d->holes.rng = d->va_live.rng = d->va_holes.rng = 0x9e3779b9u;
    d->chunks.rng = d->chunk_gaps.rng = d->chunk_seq.rng = 0x9e3779b9u;
    d->dev.ops = &simdev_ops;
    d->dev.ctx = d;
    if (d->p.placement == AS_PLACE_CHUNKED && chunk_context(d)) {
        as_simdev_destroy(d);
        return AS_DEV_EFAULT;
    }
    *out = d;
    return AS_DEV_OK;
}

void as_simdev_destroy(as_simdev *d)
{
    if (!d)
        return;
    tr_free(&d->live);
    tr_free(&d->holes);
    tr_free(&d->chunks);
    tr_free(&d->chunk_seq);
    tr_free(&d->chunk_gaps);
    tr_free(&d->va_live);
    tr_free(&d->va_holes);
    free(d);
}

const as_device *as_simdev_device(as_simdev *d)
{
    return &d->dev;
}

void as_simdev_set_log(as_simdev *d, as_dev_log_fn fn, void *user)
{
    d->log = fn;
    d->log_user = user;
}

void as_simdev_counters_get(const as_simdev *d, as_simdev_counters *out)
{
    *out = d->c;
}
