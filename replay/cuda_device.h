/*
 * cuda_device.h - the device interface (policies/device.h) over a real CUDA GPU.
 *
 * reserve/release are cudaMalloc/cudaFree; va_reserve/map/unmap are the driver's virtual
 * memory calls (cuMemAddressReserve, cuMemCreate + cuMemMap + cuMemSetAccess per 2 MiB
 * page, cuMemUnmap + cuMemRelease); alias/unalias map a page's existing handle a second
 * time (cuMemMap + cuMemSetAccess per page) and cuMemUnmap it. The capacity is enforced by
 * the driver itself: at
 * creation the device fills the GPU's free memory beyond the capacity with ballast
 * allocations, so an OOM is the driver's own refusal, never a software check.
 *
 * Every call is timed with CLOCK_MONOTONIC around the CUDA call only. No kernels run during
 * a replay, so the GPU is idle and the times are the driver's own cost; a
 * cudaDeviceSynchronize (outside the timed region) before each call makes sure nothing
 * queued earlier is billed to it. Only one as_cudadev may exist per process at a time:
 * the ballast of two would overlap.
 */
#ifndef AS_REPLAY_CUDA_DEVICE_H
#define AS_REPLAY_CUDA_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"

typedef struct as_cudadev_params {
    uint64_t capacity; /* AS_CAPACITY_NONE: whatever the GPU has free */
    int device;        /* CUDA device ordinal */
    int no_sync;       /* skip the cudaDeviceSynchronize before each call */
    /* A policy that applies its limit itself (AS_POLICY_F_LIMITS_ITSELF, PyTorch's memory
     * fraction) runs on the whole GPU, as PyTorch does: no ballast, and capacity() reports
     * this limit. 0: capacity() reports `capacity`, which the ballast enforces. */
    uint64_t limit;
} as_cudadev_params;

/* One device call as measured, successful or not (also those that log no as_dev_event:
 * "va_reserve", "va_release", "alias", "unalias"). An alias call is preceded by two records
 * of its parts, "alias.map" (its cuMemMap calls) and "alias.access" (its cuMemSetAccess
 * calls), whose times sum to its own; an unalias the driver refused in one call and
 * did page by page, by "unalias.pagewise". */
typedef struct as_cudadev_call {
    const char *kind; /* segment_alloc, segment_free, segment_map, segment_unmap, va_...,
                         alias, unalias and the parts above */
    int rc;           /* AS_DEV_OK, AS_DEV_OOM, or < 0 */
    uint64_t addr, size;
    double ns;        /* wall time of the CUDA calls */
} as_cudadev_call;

typedef void (*as_cudadev_call_fn)(void *user, const as_cudadev_call *c);

typedef struct as_cudadev as_cudadev;

/* Creates the device and its ballast. Returns 0, AS_DEV_OOM when the GPU has less free
 * memory than the capacity, or AS_EDEVICE; why gets a one-line reason on failure. */
int as_cudadev_create(const as_cudadev_params *p, as_cudadev **out, char *why, size_t why_len);
/* Releases everything still held (segments, mappings, address ranges) and the ballast. */
void as_cudadev_destroy(as_cudadev *d);
const as_device *as_cudadev_device(as_cudadev *d);
/* Successful reserve/release/map/unmap, as the simulated device logs them; cost_ns is the
 * measured time. */
void as_cudadev_set_log(as_cudadev *d, as_dev_log_fn fn, void *user);
/* Every call, refusals included, with its measured time. */
void as_cudadev_set_call_log(as_cudadev *d, as_cudadev_call_fn fn, void *user);
/* reserved/peak_reserved, call counts, refusals, and the measured time of every call. */
void as_cudadev_counters_get(const as_cudadev *d, as_dev_counters *out);
/* Bytes cudaMemGetInfo reported free once the ballast was in place (about 3 MiB more
 * than can be allocated, replay/PLACEMENT.md). */
uint64_t as_cudadev_effective_capacity(const as_cudadev *d);
/* The capacity the ballast probe confirmed: the largest single cudaMalloc that succeeded
 * (capacity rounded down to 2 MiB), with 2 MiB more refused; 0 if it could not be set. */
uint64_t as_cudadev_probed_capacity(const as_cudadev *d);
/* Free bytes the GPU reported before the ballast, and its total. */
void as_cudadev_meminfo(const as_cudadev *d, uint64_t *free_before, uint64_t *total);
/* The CUDA error behind the last AS_EDEVICE ("cudaMalloc(2097152): invalid argument"). */
const char *as_cudadev_errmsg(const as_cudadev *d);
/* The VMM allocation granularity the driver reported (minimum), or 0 without VMM. */
uint64_t as_cudadev_vmm_granularity(const as_cudadev *d);

#endif
