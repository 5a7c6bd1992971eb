/*
 * async_pool.c - cudaMallocAsync replay (see async_pool.h).
 *
 * Invariants: `slot` holds exactly the pool allocations handed out and not yet given to
 * cudaFreeAsync (a FREE_REQ only marks its slot pending); `reserved` is the pool's
 * ReservedMemCurrent as last read, and every change of it was logged, so the engine's
 * reserved (the sum of the logged steps from an empty fresh pool) equals it.
 * Every CUDA return code is checked: an out-of-memory refusal is a result, anything else
 * an error that stops the run with the CUDA message.
 */
#include "async_pool.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.h"
#include "cuda_device.h"

#define POOL_MAGIC 0x61706f6fu /* "apoo": init refuses any other device */

typedef struct pool_slot {
    void *ptr;         /* NULL: free slot, next_free links it */
    uint64_t size, id; /* id: the allocation's ordinal */
    uint32_t stream;   /* index into streams[] */
    uint32_t next_free;
    int pending; /* FREE_REQ seen, FREE not yet */
} pool_slot;

struct as_asyncpool {
    uint32_t magic;
    as_device dev;
    as_asyncpool_params p;
    as_cudadev *cd; /* context and ballast */
    cudaMemPool_t pool;
    int have_pool;
    cudaStream_t streams[AS_ASYNC_MAX_STREAMS];
    uint64_t stream_val[AS_ASYNC_MAX_STREAMS];
    uint32_t nstreams;
    pool_slot *slot;
    uint32_t nslot, capslot, free_head; /* free_head UINT32_MAX: none */
    uint64_t reserved, allocated;
    as_dev_counters c;
    as_asyncpool_stats s;
    as_dev_log_fn log;
    void *log_user;
    as_asyncpool_op_fn op_log;
    void *op_user;
    char err[256];
};

static void set_err(as_asyncpool *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(as_asyncpool *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->err, sizeof a->err, fmt, ap);
    va_end(ap);
}

/* 0, AS_DEV_OOM for cudaErrorMemoryAllocation, AS_EDEVICE (message kept) otherwise. */
static int rt_rc(as_asyncpool *a, cudaError_t e, const char *what, uint64_t size)
{
    return as_cuda_rt_rc(e, what, size, a->err, sizeof a->err);
}

/* Reads ReservedMemCurrent and logs the step since the last read. addr: the allocation
 * that made the pool grow (0 on a trim); ns: the time of the call that caused it. */
static int note_reserved(as_asyncpool *a, uint64_t addr, double ns)
{
    uint64_t cur = 0;
    int rc = rt_rc(a, cudaMemPoolGetAttribute(a->pool, cudaMemPoolAttrReservedMemCurrent, &cur),
                   "cudaMemPoolGetAttribute(ReservedMemCurrent)", 0);
    if (rc)
        return rc;
    if (cur == a->reserved)
        return 0;
    as_dev_event ev = {.action = cur > a->reserved ? AS_DEV_SEGMENT_ALLOC : AS_DEV_SEGMENT_FREE,
                       .addr = cur > a->reserved ? addr : 0,
                       .size = cur > a->reserved ? cur - a->reserved : a->reserved - cur,
                       .cost_ns = ns};
    if (cur > a->reserved) {
        a->s.grows++;
        a->c.reserves++;
    } else {
        a->s.trims++;
        a->c.releases++;
    }
    a->reserved = cur;
    a->c.reserved = cur;
    if (cur > a->c.peak_reserved)
        a->c.peak_reserved = cur;
    if (a->log)
        a->log(a->log_user, &ev);
    return 0;
}

/* The block log's row for one op, with the pool's counters read now. */
static int note_op(as_asyncpool *a, const pool_slot *s, int is_free)
{
    if (!a->op_log)
        return 0;
    as_asyncpool_op op = {.id = s->id,
                          .addr = (uint64_t)(uintptr_t)s->ptr,
                          .size = s->size,
                          .reserved = a->reserved,
                          .stream = s->stream,
                          .is_free = is_free};
    int rc = rt_rc(a, cudaMemPoolGetAttribute(a->pool, cudaMemPoolAttrUsedMemCurrent, &op.used),
                   "cudaMemPoolGetAttribute(UsedMemCurrent)", 0);
    if (!rc)
        a->op_log(a->op_user, &op);
    return rc;
}

/* The real stream for a trace stream value, created on first use. */
static int stream_for(as_asyncpool *a, uint64_t val, uint32_t *idx)
{
    for (uint32_t i = 0; i < a->nstreams; i++)
        if (a->stream_val[i] == val) {
            *idx = i;
            return 0;
        }
    if (a->nstreams == AS_ASYNC_MAX_STREAMS) {
        set_err(a, "the trace has more than %d streams", AS_ASYNC_MAX_STREAMS);
        return AS_EDEVICE;
    }
    int rc = rt_rc(a, cudaStreamCreateWithFlags(&a->streams[a->nstreams], cudaStreamNonBlocking),
                   "cudaStreamCreateWithFlags", val);
    if (rc)
        return rc;
    a->stream_val[a->nstreams] = val;
    *idx = a->nstreams++;
    a->s.streams = a->nstreams;
    return 0;
}

static int sync_streams(as_asyncpool *a)
{
    for (uint32_t i = 0; i < a->nstreams; i++) {
        int rc = rt_rc(a, cudaStreamSynchronize(a->streams[i]), "cudaStreamSynchronize", i);
        if (rc)
            return rc;
    }
    return 0;
}

static int slot_new(as_asyncpool *a, uint32_t *out)
{
    if (a->free_head != UINT32_MAX) {
        *out = a->free_head;
        a->free_head = a->slot[*out].next_free;
        return 0;
    }
    if (a->nslot == a->capslot) {
        uint32_t nc = a->capslot ? a->capslot * 2 : 1024;
        pool_slot *n = nc > a->capslot ? realloc(a->slot, (size_t)nc * sizeof *n) : NULL;
        if (!n) {
            set_err(a, "out of host memory");
            return AS_EDEVICE;
        }
        a->slot = n;
        a->capslot = nc;
    }
    *out = a->nslot++;
    return 0;
}

/* ---- the device: only capacity and reserved; the pool does the rest ------------------- */

static int no_reserve(void *ctx, uint64_t size, uint64_t *addr)
{
    (void)ctx, (void)size, (void)addr;
    return AS_ENOSYS;
}
static int no_range(void *ctx, uint64_t addr, uint64_t size)
{
    (void)ctx, (void)addr, (void)size;
    return AS_ENOSYS;
}
static int no_alias(void *ctx, uint64_t dst, uint64_t src, uint64_t size)
{
    (void)ctx, (void)dst, (void)src, (void)size;
    return AS_ENOSYS;
}
static uint64_t pool_capacity(void *ctx)
{
    return ((as_asyncpool *)ctx)->p.capacity;
}
static uint64_t pool_reserved(void *ctx)
{
    return ((as_asyncpool *)ctx)->reserved;
}

static int pool_cap_test(void *ctx, as_cap_pred pred, const void *arg, int *yes)
{
    *yes = pred(arg, pool_capacity(ctx));
    return 0;
}

/* The pool makes a real stream per trace stream itself (stream_for). */
static int pool_streams(void *ctx, uint32_t n)
{
    (void)ctx;
    (void)n;
    return AS_ENOSYS;
}

static const as_device_ops pool_ops = {
    .abi = AS_DEVICE_ABI,
    .reserve = no_reserve,
    .release = no_range,
    .va_reserve = no_reserve,
    .va_release = no_range,
    .map = no_range,
    .unmap = no_range,
    .alias = no_alias,
    .unalias = no_range,
    .capacity = pool_capacity,
    .cap_test = pool_cap_test,
    .streams = pool_streams,
    .reserved = pool_reserved,
};

int as_asyncpool_create(const as_asyncpool_params *p, as_asyncpool **out, char *why, size_t why_len)
{
    *out = NULL;
    as_asyncpool *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(why, why_len, "out of host memory");
        return AS_EDEVICE;
    }
    a->magic = POOL_MAGIC;
    a->p = *p;
    a->dev.ops = &pool_ops;
    a->dev.ctx = a;
    a->free_head = UINT32_MAX;
    /* the ballast first, so the pool can only ever get the capacity */
    as_cudadev_params cp = {.capacity = p->capacity, .device = p->device, .no_sync = 1};
    int rc = as_cudadev_create(&cp, &a->cd, why, why_len);
    if (rc) {
        free(a);
        return rc;
    }
    a->s.probed = as_cudadev_probed_capacity(a->cd);
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = p->device;
    rc = rt_rc(a, cudaMemPoolCreate(&a->pool, &props), "cudaMemPoolCreate", 0);
    if (!rc) {
        a->have_pool = 1;
        uint64_t thr = p->release_threshold;
        rc = rt_rc(a, cudaMemPoolSetAttribute(a->pool, cudaMemPoolAttrReleaseThreshold, &thr),
                   "cudaMemPoolSetAttribute(ReleaseThreshold)", thr);
    }
    if (rc) {
        if (rc == AS_DEV_OOM) {
            set_err(a, "no memory for the pool itself");
            rc = AS_EDEVICE;
        }
        snprintf(why, why_len, "%s", a->err);
        as_asyncpool_destroy(a);
        return rc;
    }
    *out = a;
    return AS_DEV_OK;
}

void as_asyncpool_destroy(as_asyncpool *a)
{
    if (!a)
        return;
    for (uint32_t i = 0; i < a->nslot; i++)
        if (a->slot[i].ptr)
            (void)cudaFreeAsync(a->slot[i].ptr, a->streams[a->slot[i].stream]);
    (void)cudaDeviceSynchronize();
    for (uint32_t i = 0; i < a->nstreams; i++)
        (void)cudaStreamDestroy(a->streams[i]);
    if (a->have_pool)
        (void)cudaMemPoolDestroy(a->pool);
    (void)cudaGetLastError();
    as_cudadev_destroy(a->cd); /* the ballast goes last */
    free(a->slot);
    free(a);
}

const as_device *as_asyncpool_device(as_asyncpool *a)
{
    return &a->dev;
}

void as_asyncpool_set_log(as_asyncpool *a, as_dev_log_fn fn, void *user)
{
    a->log = fn;
    a->log_user = user;
}

void as_asyncpool_set_op_log(as_asyncpool *a, as_asyncpool_op_fn fn, void *user)
{
    a->op_log = fn;
    a->op_user = user;
}

void as_asyncpool_counters_get(const as_asyncpool *a, as_dev_counters *out)
{
    *out = a->c;
}

void as_asyncpool_stats_get(as_asyncpool *a, as_asyncpool_stats *out)
{
    uint64_t v = 0;
    a->s.reserved_end = a->reserved;
    if (a->have_pool &&
        !rt_rc(a, cudaMemPoolGetAttribute(a->pool, cudaMemPoolAttrReservedMemHigh, &v),
               "cudaMemPoolGetAttribute(ReservedMemHigh)", 0))
        a->s.reserved_high = v;
    if (a->have_pool && !rt_rc(a, cudaMemPoolGetAttribute(a->pool, cudaMemPoolAttrUsedMemHigh, &v),
                               "cudaMemPoolGetAttribute(UsedMemHigh)", 0))
        a->s.used_high = v;
    *out = a->s;
}

const char *as_asyncpool_errmsg(const as_asyncpool *a)
{
    return a->err;
}

/* ---- the adapter policy --------------------------------------------------------------- */

typedef struct pstate {
    as_asyncpool *a;
} pstate;

static int p_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    (void)cfg;
    pstate *s = st;
    if (!dev || dev->ops != &pool_ops || ((as_asyncpool *)dev->ctx)->magic != POOL_MAGIC)
        return AS_EINVAL; /* only meaningful over the real pool */
    s->a = dev->ctx;
    return AS_POLICY_OK;
}

static int dev_to_policy(int rc)
{
    return rc == AS_DEV_OK ? AS_POLICY_OK : rc == AS_DEV_OOM ? AS_POLICY_OOM : AS_EDEVICE;
}

static int p_alloc(void *st, const as_request *req, as_block *out)
{
    as_asyncpool *a = ((pstate *)st)->a;
    uint32_t si, k;
    int rc = stream_for(a, req->stream, &si);
    if (rc)
        return dev_to_policy(rc);
    void *ptr = NULL;
    double t0 = as_cuda_now_ns();
    rc = rt_rc(a, cudaMallocFromPoolAsync(&ptr, req->size, a->pool, a->streams[si]),
               "cudaMallocFromPoolAsync", req->size);
    if (rc == AS_DEV_OOM) {
        /* as PyTorch's cudaMallocAsync backend: wait for the streams' frees, try once more */
        a->s.oom_retries++;
        a->c.refusals++;
        if (!(rc = sync_streams(a)))
            rc = rt_rc(a, cudaMallocFromPoolAsync(&ptr, req->size, a->pool, a->streams[si]),
                       "cudaMallocFromPoolAsync", req->size);
    }
    double ns = as_cuda_now_ns() - t0;
    a->c.time_ns += ns;
    if (rc == AS_DEV_OOM) {
        a->c.refusals++;
        int r2 = note_reserved(a, 0, ns); /* a refused grow may still have trimmed */
        pool_slot refused = {.size = req->size, .id = req->id, .stream = si};
        if (!r2)
            r2 = note_op(a, &refused, 0);
        return r2 ? dev_to_policy(r2) : AS_POLICY_OOM;
    }
    if (rc)
        return dev_to_policy(rc);
    if ((rc = slot_new(a, &k))) {
        (void)cudaFreeAsync(ptr, a->streams[si]);
        return dev_to_policy(rc);
    }
    a->slot[k] = (pool_slot){.ptr = ptr, .size = req->size, .id = req->id, .stream = si};
    a->allocated += req->size;
    *out = (as_block){.addr = (uint64_t)(uintptr_t)ptr, .size = req->size, .handle = k};
    if (!(rc = note_reserved(a, out->addr, ns)))
        rc = note_op(a, &a->slot[k], 0);
    return dev_to_policy(rc);
}

static int p_free(void *st, uint64_t handle, unsigned flags)
{
    as_asyncpool *a = ((pstate *)st)->a;
    if (handle >= a->nslot || !a->slot[handle].ptr)
        return AS_EINVAL;
    pool_slot *s = &a->slot[handle];
    if (flags & AS_FREE_PENDING) {
        if (s->pending)
            return AS_EINVAL;
        s->pending = 1; /* the program may not reuse it yet: the pool must not either */
        return AS_POLICY_OK;
    }
    cudaStream_t str = a->streams[s->stream];
    double t0 = as_cuda_now_ns();
    int rc = rt_rc(a, cudaFreeAsync(s->ptr, str), "cudaFreeAsync", s->size);
    double ns = as_cuda_now_ns() - t0;
    a->c.time_ns += ns;
    if (rc)
        return dev_to_policy(rc == AS_DEV_OOM ? AS_EDEVICE : rc);
    a->allocated -= s->size;
    pool_slot done = *s;
    s->ptr = NULL;
    s->pending = 0;
    s->next_free = a->free_head;
    a->free_head = (uint32_t)handle;
    /* The pool releases memory above its threshold at synchronisation points only. */
    if (!a->p.no_sync && (rc = rt_rc(a, cudaStreamSynchronize(str), "cudaStreamSynchronize", 0)))
        return dev_to_policy(rc);
    if (!(rc = note_reserved(a, 0, ns)))
        rc = note_op(a, &done, 1);
    return dev_to_policy(rc);
}

/* PyTorch's emptyCache for this backend: synchronise, then trim the pool to nothing. */
static int p_empty_cache(void *st)
{
    as_asyncpool *a = ((pstate *)st)->a;
    int rc = rt_rc(a, cudaDeviceSynchronize(), "cudaDeviceSynchronize", 0);
    if (!rc)
        rc = rt_rc(a, cudaMemPoolTrimTo(a->pool, 0), "cudaMemPoolTrimTo", 0);
    if (!rc)
        rc = note_reserved(a, 0, 0);
    return dev_to_policy(rc == AS_DEV_OOM ? AS_EDEVICE : rc);
}

static void p_stats(const void *st, as_policy_stats *out)
{
    const as_asyncpool *a = ((const pstate *)st)->a;
    *out =
        (as_policy_stats){.allocated = a->allocated,
                          .reserved = a->reserved,
                          .free_bytes = a->reserved > a->allocated ? a->reserved - a->allocated : 0,
                          .device_reserves = a->s.grows,
                          .device_releases = a->s.trims,
                          .retries = a->s.oom_retries};
    /* largest_free is unknown inside the pool: left 0, so no external fragmentation */
}

const as_policy as_asyncpool_policy = {
    .name = "cudaMallocAsync",
    .summary = "the CUDA stream-ordered pool itself (allocsim-replay --async only)",
    .abi = AS_POLICY_ABI,
    .state_size = sizeof(pstate),
    .init = p_init,
    .alloc = p_alloc,
    .free = p_free,
    .empty_cache = p_empty_cache,
    .stats = p_stats,
};

int as_asyncpool_spec(uint64_t release_threshold, as_policy_spec *out)
{
    char buf[96];
    if (release_threshold == UINT64_MAX)
        snprintf(buf, sizeof buf, "cudaMallocAsync,release_threshold=max");
    else
        snprintf(buf, sizeof buf, "cudaMallocAsync,release_threshold=%llu",
                 (unsigned long long)release_threshold);
    memset(out, 0, sizeof *out);
    out->policy = &as_asyncpool_policy;
    if (!(out->text = strdup(buf)))
        return -ENOMEM;
    return 0;
}
