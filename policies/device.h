/*
 * device.h - the device interface: the only way a policy gets or returns device memory,
 * and the types every device shares (its event log and its counters).
 *
 * The same policy code runs over the simulated device (sim/simdev.h) and over a real GPU
 * (replay/cuda_device.h). A refusal for lack of memory is a result (AS_DEV_OOM), never an
 * error. Physical memory counted against the capacity is what reserve() and map() hand
 * out; va_reserve() only claims address space (expandable segments) and costs no capacity,
 * and alias() maps pages that map() made a second time (GMLake's stitched blocks) without
 * new physical memory.
 *
 * Rule for the slots: a device fills every slot of as_device_ops, so a caller never tests
 * one for NULL. A device that cannot do a call (no virtual memory management) still has
 * the slot and returns AS_ENOSYS from it. ops->abi is AS_DEVICE_ABI; the engine refuses a
 * device with another.
 *
 * This header depends on nothing else in the project but sim/base (error.h, units.h).
 */
#ifndef AS_POLICIES_DEVICE_H
#define AS_POLICIES_DEVICE_H

#include <stdint.h>

#include "error.h"
#include "units.h" /* AS_CAPACITY_NONE */

/* The version of as_device_ops and of the types below; raised when either changes. */
#define AS_DEVICE_ABI 4 /* 2: cap_test; 3: alias, unalias and their counters; 4: streams */

/* A call returns 0, AS_DEV_OOM (not enough device memory: a result), or a negative code of
 * the one error space (error.h): AS_EINVAL (bad address or size: a policy bug), AS_ENOSYS
 * (this device cannot do the call: no VMM support), AS_EDEVICE (the real device failed in
 * another way). */
enum {
    AS_DEV_OK = 0,
    AS_DEV_OOM = 1,
};

#define AS_DEV_GRANULARITY (2ull << 20) /* 2 MiB: cudaMalloc and cuMem page granularity */

/* A question about the capacity, for cap_test: 1 or 0 at `capacity` (AS_CAPACITY_NONE, the
 * largest value, when unlimited). It must be monotone: once true at a capacity, true at
 * every larger one. It must not change anything (a device may ask it several times). */
typedef int (*as_cap_pred)(const void *arg, uint64_t capacity);

typedef struct as_device_ops {
    int abi; /* AS_DEVICE_ABI */
    /* cudaMalloc: size is a multiple of the granularity. *addr is granularity aligned. */
    int (*reserve)(void *ctx, uint64_t size, uint64_t *addr);
    /* cudaFree of a whole earlier reservation. */
    int (*release)(void *ctx, uint64_t addr, uint64_t size);
    /* cuMemAddressReserve: address space only, never AS_DEV_OOM for capacity. AS_ENOSYS on
     * a device without virtual memory management, as are the five below. */
    int (*va_reserve)(void *ctx, uint64_t size, uint64_t *addr);
    int (*va_release)(void *ctx, uint64_t addr, uint64_t size);
    /* cuMemCreate + cuMemMap of [addr, addr+size) inside a va_reserve'd range; size and
     * addr are granularity multiples. Counts against the capacity. */
    int (*map)(void *ctx, uint64_t addr, uint64_t size);
    int (*unmap)(void *ctx, uint64_t addr, uint64_t size);
    /* cuMemMap of the handles already backing [src, src+size) (pages map() made, in one
     * va_reserve'd range) a second time at [dst, dst+size) (unmapped pages of a va_reserve'd
     * range), then cuMemSetAccess: both addresses reach the same memory. No physical memory:
     * reserved() does not change; AS_DEV_OOM only where the driver itself refuses a mapping
     * for lack of memory (the simulated device never does). The pages' own range may be unmap()ped
     * only after every alias of them is unalias()ed, so physical memory is always what
     * reserved() says. Not a segment event (GMLake records none for a stitched block). */
    int (*alias)(void *ctx, uint64_t dst, uint64_t src, uint64_t size);
    /* cuMemUnmap of [addr, addr+size), every page of it an alias. */
    int (*unalias)(void *ctx, uint64_t addr, uint64_t size);
    /* The capacity the device enforces (AS_CAPACITY_NONE when unlimited). Allocators that
     * check a limit themselves (PyTorch's memory fraction) read it here. */
    uint64_t (*capacity)(void *ctx);
    /* Bytes held now: reserve()d plus map()ped. */
    uint64_t (*reserved)(void *ctx);
    /* *yes = pred(arg, the capacity capacity() reports). Every decision that depends on the
     * capacity only through a monotone question asks it here instead of comparing
     * capacity() itself: a device that carries a whole range of capacities at once (sim's
     * curve mode, sim/curve.h) answers for all of them and splits the range only where
     * the answer changes, while a capacity() read pins one value. Returns 0 or < 0. */
    int (*cap_test)(void *ctx, as_cap_pred pred, const void *arg, int *yes);
    /* The process has now made n CUDA streams in all (never fewer than it said before:
     * streams are not given back). The engine calls it, never a policy: right before the
     * allocation that needed the streams (as_engine_opts.streams). The driver's memory for
     * streams is the device's own, counted against the capacity and not in reserved(), and
     * on a GPU it takes room in cudaMalloc's heap (replay/PLACEMENT.md section 10). Returns
     * 0, or AS_ENOSYS from a device that does not model streams (a real one: the process
     * makes its own). */
    int (*streams)(void *ctx, uint32_t n);
} as_device_ops;

typedef struct as_device {
    const as_device_ops *ops;
    void *ctx;
} as_device;

static inline int as_dev_pred_at_least(const void *need, uint64_t capacity)
{
    return capacity >= *(const uint64_t *)need;
}

/* *yes = (capacity >= need), asked through cap_test. */
static inline int as_dev_cap_at_least(const as_device *d, uint64_t need, int *yes)
{
    return d->ops->cap_test(d->ctx, as_dev_pred_at_least, &need, yes);
}

/* ---- what a device reports (the same for the simulated and the CUDA device) ---------- */

typedef enum as_dev_action {
    AS_DEV_SEGMENT_ALLOC, /* reserve() */
    AS_DEV_SEGMENT_FREE,  /* release() */
    AS_DEV_SEGMENT_MAP,   /* map() */
    AS_DEV_SEGMENT_UNMAP, /* unmap() */
} as_dev_action;

/* "segment_alloc", "segment_free", "segment_map", "segment_unmap" (the --segments CSV and
 * the PyTorch key's words), "?" for anything else. */
static inline const char *as_dev_action_name(as_dev_action a)
{
    static const char *const names[] = {
        [AS_DEV_SEGMENT_ALLOC] = "segment_alloc",
        [AS_DEV_SEGMENT_FREE] = "segment_free",
        [AS_DEV_SEGMENT_MAP] = "segment_map",
        [AS_DEV_SEGMENT_UNMAP] = "segment_unmap",
    };
    return (unsigned)a < sizeof names / sizeof names[0] ? names[a] : "?";
}

/* One successful device-level call, as written to --segments and compared with the
 * PyTorch key; cost_ns is modelled (simulated device) or measured (CUDA device). */
typedef struct as_dev_event {
    as_dev_action action;
    uint64_t addr, size;
    double cost_ns;
} as_dev_event;

typedef void (*as_dev_log_fn)(void *user, const as_dev_event *ev);

/* A device's counters over its life. */
typedef struct as_dev_counters {
    uint64_t reserved, peak_reserved;
    uint64_t reserves, releases, maps, unmaps, refusals;
    double time_ns; /* modelled or measured time of every successful and refused call */
    uint64_t aliases, unaliases; /* successful alias() and unalias() calls */
} as_dev_counters;

#endif
