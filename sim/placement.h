/*
 * placement.h - where the simulated device puts a range: its placement engines, behind
 * one small interface (internal to sim/; simdev.c is the only user).
 *
 * An engine hands out and takes back ranges of address space; it knows nothing of
 * capacity, counters, costs or the log, which are the device's (simdev.c). take() returns
 * AS_DEV_OK with *addr, AS_DEV_OOM when the address space has no room (a result), or
 * AS_EDEVICE when host memory ran out; give() returns AS_DEV_OK, AS_EINVAL when
 * [addr, addr + size) is not a range it handed out, or AS_EDEVICE.
 *
 * - as_space: the simple rules, AS_PLACE_LOW_FIRST_FIT (lowest hole, the space grows up
 *   from its edge) and AS_PLACE_TOP_DOWN (top of the highest hole, grows down), and with
 *   them the virtual-only region of va_reserve() (placement_space.c).
 * - as_chunked: AS_PLACE_CHUNKED, the CUDA driver's chunked heap (placement_chunked.c),
 *   for cudaMalloc's ranges and cuMemAddressReserve's alike.
 */
#ifndef AS_SIM_PLACEMENT_H
#define AS_SIM_PLACEMENT_H

#include <stdint.h>

typedef struct as_space as_space;

/* A space whose first range goes at edge (down: ends at edge). */
int as_space_create(uint64_t edge, int down, as_space **out);
int as_space_take(as_space *sp, uint64_t size, uint64_t *addr);
int as_space_give(as_space *sp, uint64_t addr, uint64_t size);
/* 1 when [addr, addr + size) lies inside one range handed out. */
int as_space_holds(const as_space *sp, uint64_t addr, uint64_t size);
void as_space_destroy(as_space *sp);

typedef struct as_chunked as_chunked;

/* granularity is the page: a power of two dividing 2 MiB, else AS_EINVAL. va: a
 * cuMemAddressReserve range rather than a cudaMalloc one; the two share the chunks and
 * differ only in where a new chunk opens. give() refuses a range of the other kind. */
int as_chunked_create(uint64_t granularity, as_chunked **out);
int as_chunked_take(as_chunked *h, uint64_t size, int va, uint64_t *addr);
int as_chunked_give(as_chunked *h, uint64_t addr, uint64_t size, int va);
void as_chunked_destroy(as_chunked *h);

#endif
