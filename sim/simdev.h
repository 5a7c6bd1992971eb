/*
 * simdev.h - the simulated device: capacity, 2 MiB granularity, address placement,
 * counters, a per-call cost model, and a log of device-level events.
 *
 * Placement: reserve() takes the lowest free address range that fits in a flat virtual
 * space starting at AS_SIMDEV_BASE (first fit, freed ranges reused), which is how the
 * CUDA driver hands out cudaMalloc ranges once it has warmed up; va_reserve() ranges come
 * from a separate region high above it. The cost model charges each call
 * fixed + per_byte * size nanoseconds (parameters documented in simdev.c and calibrated
 * on an H200, see replay/RESULTS.md).
 */
#ifndef AS_SIM_SIMDEV_H
#define AS_SIM_SIMDEV_H

#include <stdint.h>

#include "device.h"

#define AS_SIMDEV_BASE 0x7f0000000000ull
#define AS_SIMDEV_VA_BASE 0x7e0000000000ull

typedef enum as_dev_action {
    AS_DEV_SEGMENT_ALLOC, /* reserve() */
    AS_DEV_SEGMENT_FREE,  /* release() */
    AS_DEV_SEGMENT_MAP,   /* map() */
    AS_DEV_SEGMENT_UNMAP, /* unmap() */
} as_dev_action;

const char *as_dev_action_name(as_dev_action a); /* "segment_alloc", ... */

/* Cost of one call in ns: fixed_ns + ns_per_mib * size / MiB. */
typedef struct as_cost {
    double fixed_ns, ns_per_mib;
} as_cost;

typedef struct as_simdev_params {
    uint64_t capacity;    /* AS_CAPACITY_NONE or bytes; reserve/map refuse past it */
    uint64_t granularity; /* AS_DEV_GRANULARITY unless testing */
    as_cost reserve, release, map, unmap;
} as_simdev_params;

/* The defaults: unlimited capacity, 2 MiB granularity, the H200-calibrated costs. */
void as_simdev_default_params(as_simdev_params *p);

/* One device-level event, as written to --segments and compared with the PyTorch key. */
typedef struct as_dev_event {
    as_dev_action action;
    uint64_t addr, size;
    double cost_ns;
} as_dev_event;

typedef void (*as_dev_log_fn)(void *user, const as_dev_event *ev);

typedef struct as_simdev_counters {
    uint64_t reserved, peak_reserved;
    uint64_t reserves, releases, maps, unmaps, refusals;
    double time_ns; /* modelled time of every successful and refused call */
} as_simdev_counters;

typedef struct as_simdev as_simdev;

int as_simdev_create(const as_simdev_params *p, as_simdev **out);
void as_simdev_destroy(as_simdev *d);
/* The as_device view handed to policies; valid while d lives. */
const as_device *as_simdev_device(as_simdev *d);
void as_simdev_set_log(as_simdev *d, as_dev_log_fn fn, void *user);
void as_simdev_counters_get(const as_simdev *d, as_simdev_counters *out);

#endif
