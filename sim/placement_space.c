/*
 * placement_space.c - the simple placement rules of the simulated device (placement.h):
 * an address space of live ranges and holes, two address treaps (addr_treap.h), and an
 * edge past which nothing was ever handed out. Lowest hole first (growing up from the edge)
 * or top of the highest hole (growing down, as the CUDA driver's top-down VA heap does).
 * Invariant: holes never touch (adjacent holes are merged), no live range overlaps a hole
 * or another live range, and a hole that reaches the edge is given back to it.
 */
#include "placement.h"

#include <stdlib.h>

#include "addr_treap.h"
#include "device.h"

struct as_space {
    as_atreap live, holes;
    uint64_t edge; /* first address never handed out (down: the lowest handed out) */
    int down;
};

int as_space_create(uint64_t edge, int down, as_space **out)
{
    as_space *sp = calloc(1, sizeof *sp);
    if (!(*out = sp))
        return AS_EDEVICE;
    as_atreap_init(&sp->live);
    as_atreap_init(&sp->holes);
    sp->edge = edge;
    sp->down = down;
    return AS_DEV_OK;
}

void as_space_destroy(as_space *sp)
{
    if (!sp)
        return;
    as_atreap_free(&sp->live);
    as_atreap_free(&sp->holes);
    free(sp);
}

int as_space_take(as_space *sp, uint64_t size, uint64_t *addr)
{
    as_atreap *live = &sp->live, *holes = &sp->holes;
    uint64_t *edge = &sp->edge;
    int down = sp->down;
    uint32_t h = down ? as_atreap_last_fit(holes, size) : as_atreap_first_fit(holes, size);
    uint64_t a;
    if (h) {
        uint64_t ha = holes->n[h].addr, len = holes->n[h].len;
        as_atreap_remove(holes, ha);
        if (down) {
            a = ha + len - size;
            if (len > size && as_atreap_insert(holes, ha, len - size))
                return AS_EDEVICE;
        } else {
            a = ha;
            if (len > size && as_atreap_insert(holes, ha + size, len - size))
                return AS_EDEVICE;
        }
    } else if (down) {
        *edge -= size;
        a = *edge;
    } else {
        a = *edge;
        *edge += size;
    }
    if (as_atreap_insert(live, a, size))
        return AS_EDEVICE;
    *addr = a;
    return AS_DEV_OK;
}

int as_space_give(as_space *sp, uint64_t addr, uint64_t size)
{
    as_atreap *live = &sp->live, *holes = &sp->holes;
    uint64_t *edge = &sp->edge;
    int down = sp->down;
    uint32_t i = as_atreap_find(live, addr);
    if (!i || live->n[i].len != size)
        return AS_EINVAL;
    as_atreap_remove(live, addr);
    uint64_t a = addr, len = size;
    uint32_t p = as_atreap_pred(holes, addr);
    if (p && holes->n[p].addr + holes->n[p].len == addr) {
        a = holes->n[p].addr;
        len += holes->n[p].len;
        as_atreap_remove(holes, a);
    }
    uint32_t s = as_atreap_find(holes, addr + size);
    if (s) {
        len += holes->n[s].len;
        as_atreap_remove(holes, addr + size);
    }
    if (!down && a + len == *edge) { /* the top of the space shrinks back */
        *edge = a;
        return AS_DEV_OK;
    }
    if (down && a == *edge) { /* the bottom of the space rises back */
        *edge = a + len;
        return AS_DEV_OK;
    }
    return as_atreap_insert(holes, a, len) ? AS_EDEVICE : AS_DEV_OK;
}

int as_space_holds(const as_space *sp, uint64_t addr, uint64_t size)
{
    uint32_t p = as_atreap_pred(&sp->live, addr + 1);
    return p && addr + size <= sp->live.n[p].addr + sp->live.n[p].len;
}
