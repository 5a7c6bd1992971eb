/*
 * device.h - the device interface: the only way a policy gets or returns device memory.
 *
 * The same policy code runs over the simulated device (sim/) and over a real GPU
 * (replay/). A refusal for lack of memory is a result (AS_DEV_OOM), never an error.
 * Physical memory counted against the capacity is what reserve() and map() hand out;
 * va_reserve() only claims address space (expandable segments) and costs no capacity.
 *
 * This header depends on nothing else in the project but sim/base/error.h.
 */
#ifndef AS_POLICIES_DEVICE_H
#define AS_POLICIES_DEVICE_H

#include <stdint.h>

#include "error.h"

/* A call returns 0, AS_DEV_OOM (not enough device memory: a result), or a negative code of
 * the one error space (error.h): AS_EINVAL (bad address or size: a policy bug), AS_ENOSYS
 * (this device cannot do the call: no VMM support), AS_EDEVICE (the real device failed in
 * another way). */
enum {
    AS_DEV_OK = 0,
    AS_DEV_OOM = 1,
    AS_DEV_EINVAL = AS_EINVAL, /* older name, kept while policies/torch.c is being edited */
};

#define AS_CAPACITY_NONE UINT64_MAX
#define AS_DEV_GRANULARITY (2ull << 20) /* 2 MiB: cudaMalloc and cuMem page granularity */

typedef struct as_device_ops {
    /* cudaMalloc: size is a multiple of the granularity. *addr is granularity aligned. */
    int (*reserve)(void *ctx, uint64_t size, uint64_t *addr);
    /* cudaFree of a whole earlier reservation. */
    int (*release)(void *ctx, uint64_t addr, uint64_t size);
    /* cuMemAddressReserve: address space only, never AS_DEV_OOM for capacity. */
    int (*va_reserve)(void *ctx, uint64_t size, uint64_t *addr);
    int (*va_release)(void *ctx, uint64_t addr, uint64_t size);
    /* cuMemCreate + cuMemMap of [addr, addr+size) inside a va_reserve'd range; size and
     * addr are granularity multiples. Counts against the capacity. */
    int (*map)(void *ctx, uint64_t addr, uint64_t size);
    int (*unmap)(void *ctx, uint64_t addr, uint64_t size);
    /* The capacity the device enforces (AS_CAPACITY_NONE when unlimited). Allocators that
     * check a limit themselves (PyTorch's memory fraction) read it here. */
    uint64_t (*capacity)(void *ctx);
    /* Bytes held now: reserve()d plus map()ped. */
    uint64_t (*reserved)(void *ctx);
} as_device_ops;

typedef struct as_device {
    const as_device_ops *ops;
    void *ctx;
} as_device;

#endif
