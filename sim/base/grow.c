/*
 * grow.c - as_grow (grow.h). Invariant: *cap only ever doubles from `first`, and nc * elem
 * never overflows size_t (checked before each doubling).
 */
#include "grow.h"

#include <stdint.h>
#include <stdlib.h>

int as_grow(void **arr, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : first;
    if (nc == 0 || nc > SIZE_MAX / elem)
        return -1;
    while (nc < need) {
        if (nc > SIZE_MAX / 2 / elem)
            return -1;
        nc *= 2;
    }
    void *p = realloc(*arr, nc * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

int as_grow32(void **arr, uint32_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap;
    if (need > UINT32_MAX || as_grow(arr, &c, need, elem, first) < 0)
        return -1;
    *cap = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c; /* the rest of the array goes unused */
    return 0;
}
