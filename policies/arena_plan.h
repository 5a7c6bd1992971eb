/*
 * arena_plan.h - offline placement of blocks with known lifetimes in one arena (dynamic
 * storage allocation), for the `planned` policy: every block gets an offset such that two
 * blocks whose lifetimes overlap never overlap in the arena, and the arena (the largest end
 * offset) is as small as the greedy heuristics of the literature make it.
 *
 * The heuristics (each a processing order; a block then goes into the smallest gap left
 * between the already placed blocks that overlap it in time, lowest offset among equal
 * gaps, or on top of them when no gap holds it):
 *   size     decreasing size, then longer lifetime (TensorFlow Lite's greedy by size for
 *            offset calculation, Pisarchyk & Lee 2020; XLA's heap simulator, kSpatial)
 *   breadth  decreasing breadth, the most bytes live at any instant of the block's
 *            lifetime, then size (Pisarchyk & Lee's greedy by breadth, with the trace's
 *            instants in place of a graph's operators)
 *   length   decreasing lifetime, then size (XLA's kTemporal)
 *   best     all three, keeping the smallest arena (XLA's ChooseBestHeapAlgorithm)
 *
 * Cost: O(n log n) for the orders, and for the placement O(log n) per pair of blocks that
 * overlap in time and are both placed, which is at most 2 n x peak_live pairs; memory
 * O(n). Only policies/ includes this.
 */
#ifndef AS_POLICIES_ARENA_PLAN_H
#define AS_POLICIES_ARENA_PLAN_H

#include <stddef.h>
#include <stdint.h>

#define AS_PLAN_NONE UINT64_MAX /* offset of a block the plan leaves out (size 0) */

/* One block: occupied over [start, end); items come in increasing start (ALLOC order),
 * no two with the same start, end > start (AS_LIFETIME_OPEN, UINT64_MAX, for never). */
typedef struct as_plan_item {
    uint64_t size; /* bytes the block takes in the arena (0: left out of the plan) */
    uint64_t start, end;
} as_plan_item;

typedef enum as_plan_order {
    AS_PLAN_BEST,
    AS_PLAN_SIZE,
    AS_PLAN_BREADTH,
    AS_PLAN_LENGTH,
} as_plan_order;

/* Fills off[k] for every item (AS_PLAN_NONE for size 0) and *arena with the largest end
 * offset; *used (may be NULL) with the order that made it (not AS_PLAN_BEST). Offsets are
 * multiples of `align` when every size is. Returns 0, AS_EINVAL (items not in increasing
 * start, or an end not after its start, or a size sum that overflows) or AS_ENOMEM. */
int as_arena_plan(const as_plan_item *items, size_t n, as_plan_order order, uint64_t *off,
                  uint64_t *arena, as_plan_order *used);

#endif
