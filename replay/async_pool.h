/*
 * async_pool.h - the stream-ordered allocator (cudaMallocAsync) as an allocsim run.
 *
 * Here the allocator is the driver's own memory pool, so the "policy" is a thin adapter:
 * each ALLOC is cudaMallocFromPoolAsync on a stream, each FREE cudaFreeAsync on the stream
 * it was allocated on, and the reserved bytes are the pool's ReservedMemCurrent, read after
 * every event and logged to the engine as growth (segment_alloc) and trim (segment_free)
 * steps. The device (as_asyncpool) owns a fresh pool per run, the run's streams and, for a
 * capacity, an as_cudadev whose ballast makes the capacity real as in the other modes.
 * Key invariant: the engine's reserved equals ReservedMemCurrent after every event.
 */
#ifndef AS_REPLAY_ASYNC_POOL_H
#define AS_REPLAY_ASYNC_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "policy.h"

#define AS_ASYNC_MAX_STREAMS 64

typedef struct as_asyncpool_params {
    uint64_t capacity;          /* AS_CAPACITY_NONE: the whole free GPU */
    uint64_t release_threshold; /* cudaMemPoolAttrReleaseThreshold; UINT64_MAX keeps all */
    int device;
    int no_sync; /* no cudaStreamSynchronize after each free (the pool trims only at syncs) */
} as_asyncpool_params;

/* What the pool did over the run, from cudaMemPoolGetAttribute and our own counts. */
typedef struct as_asyncpool_stats {
    uint64_t reserved_high, used_high; /* cudaMemPoolAttr{Reserved,Used}MemHigh */
    uint64_t reserved_end;
    uint64_t grows, trims; /* steps of ReservedMemCurrent up / down */
    uint64_t oom_retries;  /* refused allocations retried after synchronising the streams */
    uint64_t streams;      /* real streams the trace's streams mapped to */
    uint64_t probed;       /* capacity the ballast probe confirmed (0 = none / unset) */
} as_asyncpool_stats;

typedef struct as_asyncpool as_asyncpool;

/* One allocation or free as the pool did it, for the block log (--blocks): the pool's
 * ReservedMemCurrent and UsedMemCurrent right after it (after the free's stream sync). */
typedef struct as_asyncpool_op {
    uint64_t id;             /* the allocation's ordinal in the trace */
    uint64_t addr, size;     /* addr 0: refused */
    uint64_t reserved, used; /* cudaMemPoolAttr{Reserved,Used}MemCurrent */
    uint32_t stream;         /* index of the real stream */
    int is_free;
} as_asyncpool_op;
typedef void (*as_asyncpool_op_fn)(void *user, const as_asyncpool_op *op);

/* Returns 0, AS_DEV_OOM when the GPU has less free memory than the capacity, or
 * AS_EDEVICE with a reason in why. */
int as_asyncpool_create(const as_asyncpool_params *p, as_asyncpool **out, char *why,
                        size_t why_len);
/* Frees every allocation still live, destroys the pool and streams, then the ballast. */
void as_asyncpool_destroy(as_asyncpool *a);
const as_device *as_asyncpool_device(as_asyncpool *a);
void as_asyncpool_set_log(as_asyncpool *a, as_dev_log_fn fn, void *user);
/* Every allocation and free from now on goes to fn (NULL: none). */
void as_asyncpool_set_op_log(as_asyncpool *a, as_asyncpool_op_fn fn, void *user);
void as_asyncpool_counters_get(const as_asyncpool *a, as_dev_counters *out);
void as_asyncpool_stats_get(as_asyncpool *a, as_asyncpool_stats *out);
const char *as_asyncpool_errmsg(const as_asyncpool *a);

/* The adapter policy; it works only over an as_asyncpool's device (init checks). */
extern const as_policy as_asyncpool_policy;

/* A spec for the adapter: text "cudaMallocAsync,release_threshold=N" (N = "max" for
 * UINT64_MAX). Free it with as_policy_spec_free. Returns 0 or -ENOMEM. */
int as_asyncpool_spec(uint64_t release_threshold, as_policy_spec *out);

#endif
