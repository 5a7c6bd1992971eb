/*
 * torch_fset.c - the slow paths of torch's free sets (torch_fset.h): slots and their
 * stream hash, chunks, the max tree over the slots, whole-set walks in (stream, size, addr)
 * order, and the check.
 *
 * Invariant: as in torch_fset.h; everything here is either amortised O(1) per event
 * (conversions, chunks, a slot's new maximum: O(log slots)) or a walk that the policy
 * does only where PyTorch walks its set (garbage collection, empty_cache).
 */
#include "torch_fset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* ---- slots -------------------------------------------------------------------------- */

static inline uint32_t hash_stream(uint64_t s, uint32_t mask)
{
    s ^= s >> 33;
    s *= 0xff51afd7ed558ccdull;
    s ^= s >> 33;
    return (uint32_t)s & mask;
}

static int64_t hash_find(const fset *f, uint64_t stream, uint64_t *steps)
{
    if (!f->hcap)
        return -1;
    uint32_t mask = f->hcap - 1;
    for (uint32_t h = hash_stream(stream, mask);; h = (h + 1) & mask) {
        uint32_t v = f->hslot[h];
        ++*steps;
        if (!v)
            return -1;
        if (f->s[v - 1].stream == stream)
            return v - 1;
    }
}

int64_t as_tfs_find_slow(fset *f, uint64_t stream)
{
    int64_t k = hash_find(f, stream, &f->steps);
    if (k >= 0)
        f->last = (uint32_t)k;
    return k;
}

static int hash_grow(fset *f)
{
    uint32_t nc = f->hcap ? f->hcap * 2 : 16;
    uint32_t *nh = calloc(nc, sizeof *nh);
    if (!nh)
        return -1;
    for (uint32_t k = 0; k < f->n; k++) {
        uint32_t h = hash_stream(f->s[k].stream, nc - 1);
        for (f->steps++; nh[h]; f->steps++)
            h = (h + 1) & (nc - 1);
        nh[h] = k + 1;
    }
    free(f->hslot);
    f->hslot = nh;
    f->hcap = nc;
    return 0;
}

/* The max tree over tcap >= n leaves, rebuilt from the slots' maxima. */
static int tree_build(fset *f, uint32_t tcap)
{
    uint64_t *t = calloc((size_t)tcap * 2, sizeof *t);
    if (!t)
        return -1;
    for (uint32_t k = 0; k < f->n; k++)
        t[tcap + k] = f->s[k].max;
    for (uint32_t i = tcap - 1; i >= 1; i--)
        t[i] = t[2 * i] > t[2 * i + 1] ? t[2 * i] : t[2 * i + 1];
    f->steps += (uint64_t)tcap * 2;
    free(f->tree);
    f->tree = t;
    f->tcap = tcap;
    return 0;
}

static int slot_arrays_grow(fset *f)
{
    uint32_t nc = f->cap ? f->cap * 2 : 2;
    sidx *ns = realloc(f->s, (size_t)nc * sizeof *ns);
    if (!ns)
        return -1;
    f->s = ns;
    uint32_t *no = realloc(f->ord, (size_t)nc * sizeof *no);
    if (!no)
        return -1;
    f->ord = no;
    uint32_t *np = realloc(f->pos, (size_t)nc * sizeof *np);
    if (!np)
        return -1;
    f->pos = np;
    f->cap = nc;
    return 0;
}

int64_t as_tfs_slot(fset *f, uint64_t stream)
{
    int64_t k = as_tfs_find(f, stream);
    if (k >= 0)
        return k;
    if (f->n == f->cap && slot_arrays_grow(f))
        return -1;
    if ((f->n + 1) * 2 > f->hcap && hash_grow(f))
        return -1;
    if (f->n + 1 > f->tcap && tree_build(f, f->tcap ? f->tcap * 2 : 1))
        return -1;
    uint32_t id = f->n++;
    memset(&f->s[id], 0, sizeof f->s[id]);
    f->s[id].stream = stream;
    f->ord[id] = id; /* sorted into place by the next whole-set walk */
    uint32_t mask = f->hcap - 1, h = hash_stream(stream, mask);
    for (f->steps++; f->hslot[h]; f->steps++)
        h = (h + 1) & mask;
    f->hslot[h] = id + 1;
    return f->last = id;
}

int as_tfs_chunk(fset *f, uint32_t k, unsigned w)
{
    if (f->nc + 1 >= f->ccap) {
        uint32_t nc = f->ccap ? f->ccap * 2 : 4;
        tbin *c = realloc(f->bins, (size_t)nc * TFS_CHUNK * sizeof *c);
        if (!c)
            return AS_ENOMEM;
        f->bins = c;
        f->ccap = nc;
        if (!f->nc)
            f->nc = 1; /* chunk 0 is none */
    }
    uint32_t i = f->nc++;
    memset(&f->bins[(size_t)i * TFS_CHUNK], 0, TFS_CHUNK * sizeof *f->bins);
    f->s[k].chunk[w] = i * TFS_CHUNK;
    return 0;
}

/* Slot k's largest block is now m: carry it up the tree until a node is unchanged. */
void as_tfs_max_changed_to(fset *f, uint32_t k, uint64_t m)
{
    f->s[k].max = m;
    uint32_t i = f->tcap + k; /* with one leaf, the leaf is the root */
    f->tree[i] = m;
    for (i >>= 1; i >= 1; i >>= 1) {
        f->steps++;
        uint64_t v = f->tree[2 * i] > f->tree[2 * i + 1] ? f->tree[2 * i] : f->tree[2 * i + 1];
        if (f->tree[i] == v)
            break;
        f->tree[i] = v;
    }
}

/* Slot k's largest block may have changed: recompute it from the top bin. */
void as_tfs_max_changed(const blk *b, fset *f, uint32_t k)
{
    uint32_t x = as_tfs_last_of(b, f, k);
    as_tfs_max_changed_to(f, k, x ? b[x].size : 0);
}

int as_tfs_max_fell(const blk *b, fset *f, uint32_t k)
{
    as_tfs_max_changed(b, f, k);
    return 0;
}

/* as_tfs_insert's rare cases: a slot's first block in a word of bins (its chunk), a full
 * list (it becomes a treap) or a treap bin. */
int as_tfs_insert_slow(blk *b, fset *f, uint32_t x)
{
    uint32_t k = b[x].sx;
    uint64_t size = b[x].size;
    unsigned bin = as_tfs_bin(size);
    if (!f->s[k].chunk[bin >> 6]) {
        int rc = as_tfs_chunk(f, k, bin >> 6);
        if (rc)
            return rc;
    }
    sidx *ix = &f->s[k];
    tbin *tb = tfs_binp(f, ix, bin);
    uint32_t cnt = tb->cnt;
    if (cnt < OSET_LIST_MAX) {
        tfs_list_put(b, ix, tb, bin, x, size, b[x].addr);
    } else {
        b[x].bin = (uint16_t)bin;
        tfs_bin_insert_treap(b, &tb->head, cnt & TFS_TREAP, x);
        tb->cnt = (cnt | TFS_TREAP) + 1;
        tfs_mark(ix, bin);
    }
    if (size > ix->max)
        tfs_push_max(f, k, size);
    return 0;
}

int as_tfs_replace_slow(blk *b, fset *f, uint32_t old, uint64_t old_size, uint32_t nw)
{
    as_tfs_erase_at(b, f, old, old_size);
    return as_tfs_insert(b, f, nw);
}

int as_tfs_insert_cold(blk *b, fset *f, uint32_t x)
{
    return as_tfs_insert(b, f, x);
}

void as_tfs_fini(fset *f)
{
    free(f->s);
    free(f->hslot);
    free(f->ord);
    free(f->pos);
    free(f->bins);
    free(f->tree);
    memset(f, 0, sizeof *f);
}

/* ---- walks in (stream, size, addr) order -------------------------------------------------- */

static int ord_less(const fset *f, uint32_t a, uint32_t b)
{
    return f->s[a].stream < f->s[b].stream;
}

/* Returns the levels it went down. */
static uint64_t sift(const fset *f, uint32_t *v, size_t r, size_t n)
{
    for (uint64_t d = 0;; d++) {
        size_t c = 2 * r + 1;
        if (c >= n)
            return d;
        if (c + 1 < n && ord_less(f, v[c], v[c + 1]))
            c++;
        if (!ord_less(f, v[r], v[c]))
            return d;
        uint32_t x = v[r];
        v[r] = v[c];
        v[c] = x;
        r = c;
    }
}

void as_tfs_order(fset *f)
{
    f->steps += f->n; /* the whole-set walk that follows visits every slot */
    if (f->nord == f->n)
        return;
    uint32_t *v = f->ord;
    size_t n = f->n;
    for (size_t s = n / 2; s-- > 0;)
        f->steps += sift(f, v, s, n);
    for (size_t e = n; e-- > 1;) {
        uint32_t x = v[0];
        v[0] = v[e];
        v[e] = x;
        f->steps += sift(f, v, 0, e);
    }
    for (uint32_t i = 0; i < f->n; i++)
        f->pos[v[i]] = i;
    f->nord = f->n;
}

uint32_t as_tfs_first_of(const blk *b, const fset *f, uint32_t k)
{
    const sidx *ix = &f->s[k];
    unsigned bin = as_tfs_bin_next(ix, 0);
    return bin < NBINS ? tfs_tbin_min(b, tfs_binp(f, ix, bin)) : 0;
}

uint32_t as_tfs_last_of(const blk *b, const fset *f, uint32_t k)
{
    const sidx *ix = &f->s[k];
    for (uint64_t sm = ix->summary; sm; sm &= ~(1ull << (63 - __builtin_clzll(sm)))) {
        unsigned w = 63u - (unsigned)__builtin_clzll(sm);
        if (ix->words[w]) {
            unsigned j = 63u - (unsigned)__builtin_clzll(ix->words[w]);
            return tfs_tbin_max(b, &f->bins[ix->chunk[w] + j]);
        }
    }
    return 0;
}

/* After x, the rest of x's treap bin, else the next non-empty bin's smallest. */
uint32_t as_tfs_next_bin(const blk *b, const fset *f, uint32_t x)
{
    const sidx *ix = &f->s[b[x].sx];
    unsigned bin = b[x].bin;
    if (tfs_binp(f, ix, bin)->cnt & TFS_TREAP) {
        uint32_t n = tfs_treap_next(b, x);
        if (n)
            return n;
    }
    bin = as_tfs_bin_next(ix, bin + 1);
    return bin < NBINS ? tfs_tbin_min(b, tfs_binp(f, ix, bin)) : 0;
}

/* Last non-empty bin <= from (from < NBINS), or NBINS when none. */
static unsigned bin_prev(const sidx *x, unsigned from)
{
    unsigned w = from >> 6;
    uint64_t m = x->words[w] & (~0ull >> (63 - (from & 63)));
    if (m)
        return (w << 6) | (63u - (unsigned)__builtin_clzll(m));
    for (uint64_t sm = w ? x->summary & (~0ull >> (64 - w)) : 0; sm;
         sm &= ~(1ull << (63 - __builtin_clzll(sm)))) {
        w = 63u - (unsigned)__builtin_clzll(sm);
        if (x->words[w])
            return (w << 6) | (63u - (unsigned)__builtin_clzll(x->words[w]));
    }
    return NBINS;
}

uint32_t as_tfs_prev_bin(const blk *b, const fset *f, uint32_t x)
{
    const sidx *ix = &f->s[b[x].sx];
    unsigned bin = b[x].bin;
    if (tfs_binp(f, ix, bin)->cnt & TFS_TREAP) {
        uint32_t n = tfs_treap_prev(b, x);
        if (n)
            return n;
    }
    bin = bin ? bin_prev(ix, bin - 1) : NBINS;
    return bin < NBINS ? tfs_tbin_max(b, tfs_binp(f, ix, bin)) : 0;
}

/* Whole-set order (call as_tfs_order first): the first block, and the one after x. */
uint32_t as_tfs_first(const blk *b, const fset *f)
{
    for (uint32_t j = 0; j < f->n; j++) {
        uint32_t x = as_tfs_first_of(b, f, f->ord[j]);
        if (x)
            return x;
    }
    return 0;
}

uint32_t as_tfs_next_all(const blk *b, const fset *f, uint32_t x)
{
    uint32_t n = as_tfs_next(b, f, x);
    if (n)
        return n;
    for (uint32_t j = f->pos[b[x].sx] + 1; j < f->n; j++) {
        n = as_tfs_first_of(b, f, f->ord[j]);
        if (n)
            return n;
    }
    return 0;
}

/* From ord position j on, the first block of size >= size: a slot whose largest block is
 * smaller is passed over on its maximum, without a look at its bins. */
static uint32_t first_from_slot(const blk *b, const fset *f, uint32_t j, uint64_t size)
{
    for (; j < f->n; j++) {
        uint32_t k = f->ord[j];
        if (f->s[k].max < size)
            continue;
        uint32_t x = as_tfs_lower_bound_in(b, f, k, size);
        if (x)
            return x;
    }
    return 0;
}

uint32_t as_tfs_first_from(const blk *b, const fset *f, uint64_t size)
{
    return first_from_slot(b, f, 0, size);
}

uint32_t as_tfs_next_from(const blk *b, const fset *f, uint32_t x, uint64_t size)
{
    /* the rest of x's slot is no smaller than x, so at least size */
    uint32_t n = as_tfs_next(b, f, x);
    return n ? n : first_from_slot(b, f, f->pos[b[x].sx] + 1, size);
}

/* ---- check -------------------------------------------------------------------------- */

/* One bin: its structure (oset.h), then every block of this bin, slot and set. */
static int check_bin(const blk *b, const tbin *tb, unsigned bin, uint32_t k, uint32_t nb,
                     uint8_t small, int64_t *n, as_check_failure *out)
{
    int treap = (tb->cnt & TFS_TREAP) != 0;
    uint32_t h = tb->head, tcnt = tb->cnt & ~TFS_TREAP;
    uint64_t cnt = 0;
    const char *why = tfs_bin_check(b, nb, h, treap, &cnt);
    if (why)
        return as_check_fail(out, "free set: bin %u: %s", bin, why);
    for (uint32_t x = tfs_bin_min(b, h, treap); x; x = tfs_bin_next(b, h, treap, x)) {
        if (b[x].in != IN_BLOCKS || b[x].state != B_FREE || !b[x].mapped || b[x].small != small ||
            as_tfs_bin(b[x].size) != bin || b[x].bin != bin || b[x].sx != k)
            return as_check_fail(out, "block 0x%llx filed under the wrong bin, stream or set",
                                 (unsigned long long)b[x].addr);
    }
    if (cnt != tcnt || (treap && cnt <= OSET_LIST_BACK) || (!treap && cnt > OSET_LIST_MAX))
        return as_check_fail(out, "free set: bin %u holds %llu blocks, counts %u (%s)", bin,
                             (unsigned long long)cnt, tcnt, treap ? "treap" : "list");
    *n += (int64_t)cnt;
    return 0;
}

static int check_slot(const blk *b, const fset *f, uint32_t k, uint32_t nb, uint8_t small,
                      int64_t *n, as_check_failure *out)
{
    const sidx *ix = &f->s[k];
    for (unsigned w = 0; w < NWORDS; w++) {
        if (ix->words[w] && !((ix->summary >> w) & 1))
            return as_check_fail(out, "free-set summary bitmap misses non-empty word %u", w);
        if (!ix->chunk[w]) {
            if (ix->words[w])
                return as_check_fail(out, "free set: word %u has blocks and no chunk", w);
            continue;
        }
        if (ix->chunk[w] % TFS_CHUNK || ix->chunk[w] / TFS_CHUNK >= f->nc)
            return as_check_fail(out, "free set: bad chunk %u", ix->chunk[w]);
        const tbin *c = &f->bins[ix->chunk[w]];
        for (unsigned j = 0; j < 64; j++) {
            const tbin *tb = &c[j];
            if (((ix->words[w] >> j) & 1) != (tb->head != 0))
                return as_check_fail(out, "free-set bitmap wrong at bin %u", w * 64 + j);
            if (tb->head) {
                int rc = check_bin(b, tb, w * 64 + j, k, nb, small, n, out);
                if (rc)
                    return rc;
            } else if (tb->cnt) {
                return as_check_fail(out, "free set: empty bin %u counts blocks", w * 64 + j);
            }
        }
    }
    uint32_t last = as_tfs_last_of(b, f, k);
    if (ix->max != (last ? b[last].size : 0) || f->tree[f->tcap + k] != ix->max)
        return as_check_fail(out,
                             "free set: stream 0x%llx's largest block is not its recorded maximum",
                             (unsigned long long)ix->stream);
    return 0;
}

int as_tfs_check(const blk *b, const fset *f, uint32_t nb, uint8_t small, int64_t *n,
                 as_check_failure *out)
{
    uint64_t m = 0, probes = 0; /* a check's probes are not the policy's work */
    for (uint32_t k = 0; k < f->n; k++) {
        if (hash_find(f, f->s[k].stream, &probes) != (int64_t)k)
            return as_check_fail(out, "free set: stream 0x%llx does not hash to its slot",
                                 (unsigned long long)f->s[k].stream);
        int rc = check_slot(b, f, k, nb, small, n, out);
        if (rc)
            return rc;
        m = f->s[k].max > m ? f->s[k].max : m;
    }
    for (uint32_t i = 0; i + 1 < f->nord; i++)
        if (f->s[f->ord[i]].stream >= f->s[f->ord[i + 1]].stream || f->pos[f->ord[i]] != i)
            return as_check_fail(out, "free-set streams out of order");
    if (as_tfs_largest(f) != m)
        return as_check_fail(out, "free set: the largest block is %llu, the tree says %llu",
                             (unsigned long long)m, (unsigned long long)as_tfs_largest(f));
    return 0;
}
