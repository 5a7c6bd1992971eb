/*
 * grow.h - amortised growth of arrays: the one overflow-checked doubling every part uses
 * for its append-only buffers.
 *
 * Part of sim/base/: uses nothing else in the project.
 */
#ifndef AS_BASE_GROW_H
#define AS_BASE_GROW_H

#include <stddef.h>
#include <stdint.h>

/* Grows *arr (elem-byte items, capacity *cap) to hold at least need: the capacity starts at
 * first and doubles (amortised O(1) appends); the multiplication is overflow-checked.
 * Returns 0 or -1 (overflow or out of memory; *arr and *cap are then unchanged). */
int as_grow(void **arr, size_t *cap, size_t need, size_t elem, size_t first);

/* as_grow for a table indexed by uint32_t (its capacity kept in one): a need above
 * UINT32_MAX is refused, so an index never wraps. Returns 0 or -1, as as_grow. */
int as_grow32(void **arr, uint32_t *cap, size_t need, size_t elem, size_t first);

#endif
