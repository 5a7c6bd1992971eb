/*
 * cuda_common.h - what the CUDA-side files share (defined in cuda_device.c): the clock every
 * device call is timed with, and the one rule for a CUDA runtime error (out of memory is a
 * result, anything else a fault whose message is kept).
 */
#ifndef AS_REPLAY_CUDA_COMMON_H
#define AS_REPLAY_CUDA_COMMON_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
double as_cuda_now_ns(void);
/* AS_DEV_OK for cudaSuccess; AS_DEV_OOM for cudaErrorMemoryAllocation; otherwise
 * AS_EDEVICE with "WHAT(SIZE): NAME: STRING" in err. The runtime's sticky last error
 * is cleared, so the next call starts clean. */
int as_cuda_rt_rc(cudaError_t e, const char *what, uint64_t size, char *err, size_t err_len);

#endif
