/*
 * addr_treap.h - ranges [addr, addr + len) in a treap keyed by address, each node carrying
 * the largest len in its subtree, so that the lowest (or highest) range of at least a
 * length is found in O(log n). The simulated device's address spaces (placement_space.c)
 * keep their live ranges and their holes in two of these. Internal to sim/.
 *
 * Nodes are addressed by index into t->n; 0 means none. An index is valid until the next
 * insert or remove.
 */
#ifndef AS_SIM_ADDR_TREAP_H
#define AS_SIM_ADDR_TREAP_H

#include <stdint.h>

typedef struct as_atreap_node {
    uint64_t addr, len, maxlen;
    uint32_t prio, left, right; /* child indices, 0 = none (slot 0 is unused) */
} as_atreap_node;

typedef struct as_atreap {
    as_atreap_node *n;
    uint32_t cap, used, free_head, root;
    uint32_t rng;
} as_atreap;

void as_atreap_init(as_atreap *t);
/* Adds [addr, addr + len) (addr not present). 0, or -1 when out of host memory. */
int as_atreap_insert(as_atreap *t, uint64_t addr, uint64_t len);
/* Removes the node with exactly this address; returns its length, or 0 if absent. */
uint64_t as_atreap_remove(as_atreap *t, uint64_t addr);
/* Lowest-address node with len >= want, or 0. */
uint32_t as_atreap_first_fit(const as_atreap *t, uint64_t want);
/* Highest-address node with len >= want, or 0. */
uint32_t as_atreap_last_fit(const as_atreap *t, uint64_t want);
/* Node with the greatest addr < key, or 0. */
uint32_t as_atreap_pred(const as_atreap *t, uint64_t key);
/* Node with addr == key, or 0. */
uint32_t as_atreap_find(const as_atreap *t, uint64_t key);
void as_atreap_free(as_atreap *t);

#endif
