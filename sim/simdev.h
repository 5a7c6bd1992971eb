/*
 * simdev.h - the simulated device: capacity, 2 MiB granularity, address placement,
 * counters, a per-call cost model, and a log of device-level events.
 *
 * Placement (as_placement) matters to policies that break ties on address (PyTorch).
 * The default, AS_PLACE_CHUNKED, is the CUDA driver's cudaMalloc address heap as the H200
 * recordings in tests/data show it: the driver reserves address space in chunks (the
 * request rounded up to 32 MiB), mmap-style top-down (at the top of the highest gap larger
 * than the chunk: an aligned mmap asks for the size plus the alignment less a page), puts
 * the range at the chunk's bottom and later fits other ranges into free space of the most
 * recently made chunk that has room, in its smallest free range that holds them (the
 * lowest of equals); a chunk whose ranges are all freed is given back. The CUDA context's
 * own two chunks sit above AS_SIMDEV_TOP with 2 MiB free at AS_SIMDEV_TOP + 414 MiB and
 * 24 MiB at + 488 MiB, where a process's first small segments land (replay/PLACEMENT.md
 * measures these rules).
 * Even with no capacity it refuses (AS_DEV_OOM) a range of 2^26 pages or more (128 TiB
 * at 2 MiB), and a chunk for which no gap in [AS_SIMDEV_VA_LOW, AS_SIMDEV_TOP) has room.
 * va_reserve() ranges (cuMemAddressReserve) share that heap's chunks: a reservation takes
 * free space in a cudaMalloc chunk and a cudaMalloc the free tail of a reservation's
 * chunk; a reservation that fits no chunk opens one at the bottom of the lowest gap from
 * AS_SIMDEV_VA_LOW up, where the H200's driver puts them (replay/PLACEMENT.md section 9).
 * AS_PLACE_TOP_DOWN (highest hole, growing down from AS_SIMDEV_TOP) and
 * AS_PLACE_LOW_FIRST_FIT (lowest hole, growing up from AS_SIMDEV_BASE) are the simple
 * rules; with them va_reserve() ranges come from a separate region, first fit from
 * AS_SIMDEV_VA_BASE. The cost model charges each call fixed + per_byte * size nanoseconds
 * (parameters documented in simdev.c and calibrated on an H200, see replay/RESULTS.md).
 * Streams (the streams() slot: the process has made n) take floor((n + 2) / 4) 2 MiB pages
 * of the heap, each placed as a reserve() of 2 MiB then, never given back, and
 * floor((n + 7) / 43) more pages of memory outside it; both count against the capacity and
 * neither in reserved (an H200's driver, PLACEMENT.md section 10).
 */
#ifndef AS_SIM_SIMDEV_H
#define AS_SIM_SIMDEV_H

#include <stdint.h>

#include "device.h"
#include "policy.h"

#define AS_SIMDEV_BASE 0x7f0000000000ull
#define AS_SIMDEV_VA_BASE 0x7e0000000000ull /* the simple rules' va_reserve() region */
#define AS_SIMDEV_VA_LOW 0x302000000ull /* the chunked heap's bottom: reservations' first chunk */
#define AS_SIMDEV_TOP 0x7fff00000000ull /* where a top-down space starts (and grows down) */
#define AS_SIMDEV_CHUNK (32ull << 20)   /* AS_PLACE_CHUNKED: chunks are multiples of this */

/* Address placement rule for reserve(). */
typedef enum as_placement {
    AS_PLACE_LOW_FIRST_FIT = 0, /* lowest hole that fits; the space grows upward */
    AS_PLACE_TOP_DOWN = 1,      /* top of the highest hole that fits; grows downward */
    AS_PLACE_CHUNKED = 2,       /* the CUDA driver's chunked heap (the default) */
} as_placement;

/* Cost of one call in ns: fixed_ns + ns_per_mib * size / MiB. */
typedef struct as_cost {
    double fixed_ns, ns_per_mib;
} as_cost;

typedef struct as_simdev_params {
    uint64_t capacity;    /* AS_CAPACITY_NONE or bytes; reserve/map refuse past it */
    uint64_t granularity; /* AS_DEV_GRANULARITY unless testing; a power of two (that
                             divides 2 MiB with AS_PLACE_CHUNKED), else create fails */
    as_cost reserve, release, map, unmap;
    as_cost alias, unalias; /* a second mapping of existing pages, and its removal */
    as_placement placement; /* as_simdev_default_params: AS_PLACE_CHUNKED */
    /* An allocator-level limit reported by capacity() but not enforced by the device
     * (PyTorch's memory fraction on a bigger GPU). 0 (unset): capacity() reports
     * `capacity`. */
    uint64_t limit;
} as_simdev_params;

/* The defaults: unlimited capacity, 2 MiB granularity, the H200-calibrated costs. */
void as_simdev_default_params(as_simdev_params *p);

/* Sets a run's capacity the way the policy takes it: a device of that size, or, for a
 * policy with AS_POLICY_F_LIMITS_ITSELF, an unlimited device reporting it as the limit.
 * Every place that builds a device for a policy goes through this. */
void as_simdev_set_capacity(as_simdev_params *p, uint64_t capacity, unsigned policy_flags);

/* Its counters are the seam's (device.h); the older name is kept while engine.c is being
 * edited. */
typedef as_dev_counters as_simdev_counters;

typedef struct as_simdev as_simdev;

int as_simdev_create(const as_simdev_params *p, as_simdev **out);
void as_simdev_destroy(as_simdev *d);
/* The as_device view handed to policies; valid while d lives. */
const as_device *as_simdev_device(as_simdev *d);
/* Sets the params' limit (capacity() reports it, the device does not enforce it;
 * AS_CAPACITY_NONE: none) on a device that lives on across runs, so that one address space
 * serves runs at several memory fractions. */
void as_simdev_set_limit(as_simdev *d, uint64_t limit);
void as_simdev_set_log(as_simdev *d, as_dev_log_fn fn, void *user);
/* Curve mode (sim/curve.h): the device carries a range of capacities. Every question
 * about the capacity (its own refusals when it enforces one, cap_test) goes to ask(),
 * which answers for the whole range (splitting it where the answer changes); a
 * capacity() read calls pin(), which narrows the range to one capacity and writes it.
 * The params still say which way the capacity is taken (enforced, or a reported limit:
 * as_simdev_set_capacity). NULL: back to the params' own capacity. */
typedef struct as_cap_oracle {
    int (*ask)(void *user, as_cap_pred pred, const void *arg, int *yes);
    void (*pin)(void *user, uint64_t *capacity);
    void *user;
} as_cap_oracle;
void as_simdev_set_oracle(as_simdev *d, const as_cap_oracle *o);
void as_simdev_counters_get(const as_simdev *d, as_dev_counters *out);
/* The driver's memory for the streams the process made (the streams() slot): counted
 * against the capacity, not in the counters' reserved. */
uint64_t as_simdev_stream_bytes(const as_simdev *d);
/* What n streams take on a device of 2 MiB pages (the same rule). */
uint64_t as_simdev_stream_memory(uint32_t n);

#endif
