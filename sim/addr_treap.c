/*
 * addr_treap.c - the simulated device's address treap (addr_treap.h): nodes in one array
 * (index 0 is "none"), a free list of released slots, xorshift priorities. Invariant: every
 * node's maxlen is the largest len in its subtree, restored on the way up of every split
 * and merge.
 */
#include "addr_treap.h"

#include <stdlib.h>
#include <string.h>

void as_atreap_init(as_atreap *t)
{
    memset(t, 0, sizeof *t);
    t->rng = 0x9e3779b9u;
}

static uint32_t tr_rand(as_atreap *t)
{
    t->rng ^= t->rng << 13;
    t->rng ^= t->rng >> 17;
    t->rng ^= t->rng << 5;
    return t->rng;
}

static uint32_t tr_new(as_atreap *t, uint64_t addr, uint64_t len)
{
    uint32_t i;
    if (t->free_head) {
        i = t->free_head;
        t->free_head = t->n[i].left;
    } else {
        if (t->used + 1 >= t->cap) {
            uint32_t nc = t->cap ? t->cap * 2 : 64;
            as_atreap_node *nn = realloc(t->n, nc * sizeof *nn);
            if (!nn)
                return 0;
            t->n = nn;
            t->cap = nc;
        }
        i = ++t->used;
    }
    t->n[i] = (as_atreap_node){.addr = addr, .len = len, .maxlen = len, .prio = tr_rand(t)};
    return i;
}

static void tr_release_node(as_atreap *t, uint32_t i)
{
    t->n[i].left = t->free_head;
    t->free_head = i;
}

static void tr_fix(as_atreap *t, uint32_t i)
{
    as_atreap_node *x = &t->n[i];
    uint64_t m = x->len;
    if (x->left && t->n[x->left].maxlen > m)
        m = t->n[x->left].maxlen;
    if (x->right && t->n[x->right].maxlen > m)
        m = t->n[x->right].maxlen;
    x->maxlen = m;
}

/* Splits the tree at key: left gets addr < key, right addr >= key. */
static void tr_split(as_atreap *t, uint32_t root, uint64_t key, uint32_t *l, uint32_t *r)
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

static uint32_t tr_merge(as_atreap *t, uint32_t a, uint32_t b)
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

int as_atreap_insert(as_atreap *t, uint64_t addr, uint64_t len)
{
    uint32_t i = tr_new(t, addr, len), l, r;
    if (!i)
        return -1;
    tr_split(t, t->root, addr, &l, &r);
    t->root = tr_merge(t, tr_merge(t, l, i), r);
    return 0;
}

/* Removes the as_atreap_node with exactly this address; returns its length, or 0 if absent. */
uint64_t as_atreap_remove(as_atreap *t, uint64_t addr)
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

/* Lowest-address as_atreap_node with len >= want, or 0. */
uint32_t as_atreap_first_fit(const as_atreap *t, uint64_t want)
{
    uint32_t i = t->root;
    while (i) {
        const as_atreap_node *x = &t->n[i];
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

/* Highest-address as_atreap_node with len >= want, or 0. */
uint32_t as_atreap_last_fit(const as_atreap *t, uint64_t want)
{
    uint32_t i = t->root;
    while (i) {
        const as_atreap_node *x = &t->n[i];
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

uint32_t as_atreap_pred(const as_atreap *t, uint64_t key)
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

uint32_t as_atreap_find(const as_atreap *t, uint64_t key)
{
    uint32_t i = t->root;
    while (i && t->n[i].addr != key)
        i = key < t->n[i].addr ? t->n[i].left : t->n[i].right;
    return i;
}

void as_atreap_free(as_atreap *t)
{
    free(t->n);
    memset(t, 0, sizeof *t);
}
