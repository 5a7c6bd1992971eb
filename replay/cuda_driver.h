/*
 * cuda_driver.h - the CUDA driver API calls of allocsim-replay and allocsim-calib, loaded at
 * run time from libcuda.so.1 instead of linked. The static CUDA runtime loads the driver by
 * itself, so with these pointers the programs have no link-time need for libcuda: on a
 * machine without the NVIDIA driver they start, and say so, instead of failing to load.
 *
 * Invariant: as_cu_load() returned 0 before any as_cu.* pointer or any CUDA runtime call
 * is used; each pointer is the entry point cuGetProcAddress gives for the CUDA version the
 * programs were compiled against, so its ABI is the one cuda.h declares.
 */
#ifndef AS_REPLAY_CUDA_DRIVER_H
#define AS_REPLAY_CUDA_DRIVER_H

#include <cuda.h>
#include <stddef.h>

/* Every driver call the programs make. */
#define AS_CU_FUNCS(X)                                                                             \
    X(cuCtxGetCurrent)                                                                             \
    X(cuCtxSetCurrent)                                                                             \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetAttribute)                                                                        \
    X(cuGetErrorName)                                                                              \
    X(cuGetErrorString)                                                                            \
    X(cuMemAddressFree)                                                                            \
    X(cuMemAddressReserve)                                                                         \
    X(cuMemCreate)                                                                                 \
    X(cuMemGetAllocationGranularity)                                                               \
    X(cuMemMap)                                                                                    \
    X(cuMemRelease)                                                                                \
    X(cuMemSetAccess)                                                                              \
    X(cuMemUnmap)

typedef struct as_cu_api {
#define AS_CU_FIELD(fn) __typeof__(fn) *fn;
    AS_CU_FUNCS(AS_CU_FIELD)
#undef AS_CU_FIELD
} as_cu_api;

/* Filled by as_cu_load. */
extern as_cu_api as_cu;

/* The shared object the driver is loaded from. */
#define AS_CU_LIBRARY "libcuda.so.1"

/* Loads the driver and every entry point above (once; later calls return the first
 * result). Returns 0, or -1 with a one-line reason in why: the library cannot be opened
 * (dlerror's text), it is too old for cuGetProcAddress, or an entry point is missing. */
int as_cu_load(char *why, size_t why_len);

#endif
