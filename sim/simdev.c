/*
 * simdev.c - the simulated device (see simdev.h): capacity, counters, the cost model and
 * the event log. Where a range goes is its placement engine's (placement.h): the chunked
 * heap (placement_chunked.c), which places va_reserve()'s ranges too, or an address space
 * of the simple rules beside a virtual-only region for them (placement_space.c).
 * Invariant: c.reserved is the bytes reserve()d plus map()ped and never exceeds a
 * capacity; a refused call changes nothing but the refusal count and its cost; vlive holds
 * exactly the va_reserve() ranges live in the chunked heap. alias() and unalias() cost
 * time and no memory, and log no segment event (device.h); which pages are mapped where is
 * the policy's to know, as for map().
 * Streams the process makes (dev_streams) hold pages of their own: s_bytes, counted
 * against the capacity beside c.reserved, never in it.
 *
 * Cost model defaults (ns = fixed + per MiB * size): measured on an NVIDIA H200 with
 * CUDA 13 (replay/RESULTS.md, "Calibration"). Until that calibration they are the
 * orders of magnitude commonly reported: cudaMalloc ~ tens of us, cudaFree ~ tens of us
 * plus an implicit synchronisation, cuMemMap+cuMemCreate per 2 MiB page ~ 10 us.
 */
#include "simdev.h"

#include <stdlib.h>
#include <string.h>

#include "addr_treap.h"
#include "placement.h"

struct as_simdev {
    as_device dev;
    as_simdev_params p;
    as_chunked *heap;  /* physical (cudaMalloc) address space, AS_PLACE_CHUNKED */
    as_space *phys;    /* physical address space, the simple rules */
    as_space *va;      /* virtual-only (cuMemAddressReserve) space, the simple rules */
    as_atreap vlive;   /* the heap's cuMemAddressReserve ranges, for map()'s check */
    uint64_t vlo, vhi; /* the last of them that held a checked range (vhi 0: none) */
    as_dev_counters c;
    as_dev_log_fn log;
    void *log_user;
    as_cap_oracle oracle; /* curve mode: answers for the capacities it carries */
    uint32_t nstreams;    /* streams the process has made (dev_streams) */
    uint64_t s_bytes;     /* the driver's memory for them */
};

/* ---- device calls ------------------------------------------------------------------------ */

static double cost(const as_cost *c, uint64_t size)
{
    return c->fixed_ns + c->ns_per_mib * (double)size / (double)(1 << 20);
}

static void emit(as_simdev *d, as_dev_action a, uint64_t addr, uint64_t size, double ns)
{
    d->c.time_ns += ns;
    if (d->log) {
        as_dev_event ev = {.action = a, .addr = addr, .size = size, .cost_ns = ns};
        d->log(d->log_user, &ev);
    }
}

static void held_add(as_simdev *d, uint64_t size)
{
    d->c.reserved += size;
    if (d->c.reserved > d->c.peak_reserved)
        d->c.peak_reserved = d->c.reserved;
}

typedef struct room_q {
    uint64_t reserved, size;
} room_q;

/* Whether reserved + size fit in the capacity (monotone: a larger one holds them too). */
static int room_pred(const void *arg, uint64_t cap)
{
    const room_q *q = arg;
    return q->size <= cap && q->reserved <= cap - q->size;
}

/* *over = 1 when size more bytes would pass an enforced capacity; asked of the oracle in
 * curve mode. Returns 0 or < 0 (the oracle failed). Inline: with the chunked heap inlined
 * into dev_reserve (the Makefile's HOT_LTO) gcc kept it a call: 0.9% of nocache. */
static inline int over_capacity(const as_simdev *d, uint64_t size, int *over)
{
    *over = 0;
    if (d->p.capacity == AS_CAPACITY_NONE)
        return 0;
    room_q q = {.reserved = d->c.reserved + d->s_bytes, .size = size};
    int fits = room_pred(&q, d->p.capacity);
    if (d->oracle.ask) {
        int rc = d->oracle.ask(d->oracle.user, room_pred, &q, &fits);
        if (rc)
            return rc;
    }
    *over = !fits;
    return 0;
}

static int bad_size(const as_simdev *d, uint64_t size)
{
    return size == 0 || (size & (d->p.granularity - 1)) != 0; /* a power of two */
}

/* On the chunked heap, 2^26 pages (128 TiB at 2 MiB) or more, beyond any GPU and the
 * heap's whole address space: its chunks keep a bit per page, so a bound keeps a bitmap
 * under 8 MiB. */
static int too_many_pages(const as_simdev *d, uint64_t size)
{
    return d->heap && size >> 26 >> __builtin_ctzll(d->p.granularity);
}

static int dev_reserve(void *ctx, uint64_t size, uint64_t *addr)
{
    as_simdev *d = ctx;
    if (bad_size(d, size))
        return AS_EINVAL;
    int over;
    int rc = over_capacity(d, size, &over);
    if (rc)
        return rc;
    /* past any capacity, or too large a range for the chunked heap (too_many_pages) */
    rc = over || too_many_pages(d, size) ? AS_DEV_OOM
         : d->heap                       ? as_chunked_take(d->heap, size, 0, addr)
                                         : as_space_take(d->phys, size, addr);
    if (rc == AS_DEV_OOM) { /* a refusal, also when the heap's address space runs out */
        d->c.refusals++;
        d->c.time_ns += cost(&d->p.reserve, 0);
    }
    if (rc)
        return rc;
    held_add(d, size);
    d->c.reserves++;
    emit(d, AS_DEV_SEGMENT_ALLOC, *addr, size, cost(&d->p.reserve, size));
    return AS_DEV_OK;
}

static int dev_release(void *ctx, uint64_t addr, uint64_t size)
{
    as_simdev *d = ctx;
    int rc = d->heap ? as_chunked_give(d->heap, addr, size, 0) : as_space_give(d->phys, addr, size);
    if (rc)
        return rc;
    d->c.reserved -= size;
    d->c.releases++;
    emit(d, AS_DEV_SEGMENT_FREE, addr, size, cost(&d->p.release, size));
    return AS_DEV_OK;
}

/* Address space only: no capacity, counter or cost. On the chunked heap a reservation
 * takes a chunk's free space as a cudaMalloc does (simdev.h); the heap refuses one only
 * when its address space has no room (AS_DEV_OOM, as cuMemAddressReserve fails). */
static int dev_va_reserve(void *ctx, uint64_t size, uint64_t *addr)
{
    as_simdev *d = ctx;
    if (bad_size(d, size))
        return AS_EINVAL;
    if (!d->heap)
        return as_space_take(d->va, size, addr);
    if (too_many_pages(d, size))
        return AS_DEV_OOM;
    int rc = as_chunked_take(d->heap, size, 1, addr);
    if (!rc && as_atreap_insert(&d->vlive, *addr, size)) {
        as_chunked_give(d->heap, *addr, size, 1);
        rc = AS_EDEVICE;
    }
    return rc;
}

static int dev_va_release(void *ctx, uint64_t addr, uint64_t size)
{
    as_simdev *d = ctx;
    if (!d->heap)
        return as_space_give(d->va, addr, size);
    int rc = as_chunked_give(d->heap, addr, size, 1);
    if (!rc) {
        as_atreap_remove(&d->vlive, addr);
        d->vlo = d->vhi = 0;
    }
    return rc;
}

/* The range must lie inside one virtual reservation. Whether pages are already mapped is
 * the policy's to know; check() of the policy verifies its own page accounting. */
static int in_va(as_simdev *d, uint64_t addr, uint64_t size)
{
    if (!d->heap)
        return as_space_holds(d->va, addr, size);
    /* A pool maps and unmaps chunk after chunk of one reservation: the last one first. */
    if (addr >= d->vlo && addr < d->vhi && size <= d->vhi - addr)
        return 1;
    uint32_t p = as_atreap_pred(&d->vlive, addr + 1);
    if (!p || addr + size > d->vlive.n[p].addr + d->vlive.n[p].len)
        return 0;
    d->vlo = d->vlive.n[p].addr;
    d->vhi = d->vlo + d->vlive.n[p].len;
    return 1;
}

static int dev_map(void *ctx, uint64_t addr, uint64_t size)
{
    as_simdev *d = ctx;
    if (bad_size(d, size) || addr % d->p.granularity || !in_va(d, addr, size))
        return AS_EINVAL;
    int over, rc = over_capacity(d, size, &over);
    if (rc)
        return rc;
    if (over) {
        d->c.refusals++;
        d->c.time_ns += cost(&d->p.map, 0);
        return AS_DEV_OOM;
    }
    held_add(d, size);
    d->c.maps++;
    emit(d, AS_DEV_SEGMENT_MAP, addr, size, cost(&d->p.map, size));
    return AS_DEV_OK;
}

static int dev_unmap(void *ctx, uint64_t addr, uint64_t size)
{
    as_simdev *d = ctx;
    if (bad_size(d, size) || addr % d->p.granularity || !in_va(d, addr, size) ||
        size > d->c.reserved)
        return AS_EINVAL;
    d->c.reserved -= size;
    d->c.unmaps++;
    emit(d, AS_DEV_SEGMENT_UNMAP, addr, size, cost(&d->p.unmap, size));
    return AS_DEV_OK;
}

/* Both ranges inside virtual reservations; that src's pages are mapped and dst's are not
 * is the policy's to know (its check()), as for map(). */
static int dev_alias(void *ctx, uint64_t dst, uint64_t src, uint64_t size)
{
    as_simdev *d = ctx;
    if (bad_size(d, size) || (dst | src) % d->p.granularity || !in_va(d, dst, size) ||
        !in_va(d, src, size))
        return AS_EINVAL;
    d->c.aliases++;
    d->c.time_ns += cost(&d->p.alias, size);
    return AS_DEV_OK;
}

static int dev_unalias(void *ctx, uint64_t addr, uint64_t size)
{
    as_simdev *d = ctx;
    if (bad_size(d, size) || addr % d->p.granularity || !in_va(d, addr, size))
        return AS_EINVAL;
    d->c.unaliases++;
    d->c.time_ns += cost(&d->p.unalias, size);
    return AS_DEV_OK;
}

/* What an enforced capacity leaves the policy once the streams took their pages (a limit
 * the policy checks itself, PyTorch's memory fraction, is not lowered by them). */
static uint64_t less_streams(const as_simdev *d, uint64_t cap)
{
    if (d->p.limit || cap == AS_CAPACITY_NONE)
        return cap;
    return cap > d->s_bytes ? cap - d->s_bytes : 0;
}

static uint64_t dev_capacity(void *ctx)
{
    const as_simdev *d = ctx;
    uint64_t cap = d->p.limit ? d->p.limit : d->p.capacity;
    if (d->oracle.pin) /* a number: the oracle keeps one capacity of its range */
        d->oracle.pin(d->oracle.user, &cap);
    return less_streams(d, cap);
}

typedef struct streams_q {
    const as_simdev *d;
    as_cap_pred pred;
    const void *arg;
} streams_q;

static int streams_pred(const void *arg, uint64_t cap)
{
    const streams_q *q = arg;
    return q->pred(q->arg, less_streams(q->d, cap));
}

static int dev_cap_test(void *ctx, as_cap_pred pred, const void *arg, int *yes)
{
    const as_simdev *d = ctx;
    streams_q q = {.d = d, .pred = pred, .arg = arg};
    if (d->s_bytes) { /* the question asked at the capacity the streams leave */
        pred = streams_pred;
        arg = &q;
    }
    if (d->oracle.ask)
        return d->oracle.ask(d->oracle.user, pred, arg, yes);
    *yes = pred(arg, d->p.limit ? d->p.limit : d->p.capacity);
    return 0;
}
static uint64_t dev_reserved(void *ctx)
{
    return ((as_simdev *)ctx)->c.reserved;
}

/* Pages a process that has made n streams holds for them in cudaMalloc's heap, and outside
 * it (H200, replay/PLACEMENT.md section 10: measured at every n from 0 to 130). */
static uint32_t stream_heap_pages(uint32_t n)
{
    return (uint32_t)(((uint64_t)n + 2) / 4);
}

static uint32_t stream_other_pages(uint32_t n)
{
    return (uint32_t)(((uint64_t)n + 7) / 43);
}

/* Each new heap page is placed as a cudaMalloc(2 MiB) would be now and never given back; a
 * capacity does not refuse them (cudaStreamCreate is not an allocation the policy sees):
 * what they take is gone from every later request's room. */
static int dev_streams(void *ctx, uint32_t n)
{
    as_simdev *d = ctx;
    if (n <= d->nstreams)
        return AS_DEV_OK;
    uint64_t page = AS_DEV_GRANULARITY > d->p.granularity ? AS_DEV_GRANULARITY : d->p.granularity;
    for (uint32_t k = stream_heap_pages(d->nstreams); k < stream_heap_pages(n); k++) {
        uint64_t addr;
        int rc = d->heap ? as_chunked_take(d->heap, page, 0, &addr)
                         : as_space_take(d->phys, page, &addr);
        if (rc < 0)
            return rc;
        /* AS_DEV_OOM: no address space left, the page is memory alone */
        d->s_bytes += page;
    }
    d->s_bytes += (uint64_t)(stream_other_pages(n) - stream_other_pages(d->nstreams)) * page;
    d->nstreams = n;
    return AS_DEV_OK;
}

static const as_device_ops simdev_ops = {
    .abi = AS_DEVICE_ABI,
    .reserve = dev_reserve,
    .release = dev_release,
    .va_reserve = dev_va_reserve,
    .va_release = dev_va_release,
    .map = dev_map,
    .unmap = dev_unmap,
    .alias = dev_alias,
    .unalias = dev_unalias,
    .capacity = dev_capacity,
    .reserved = dev_reserved,
    .cap_test = dev_cap_test,
    .streams = dev_streams,
};

/* ---- public ---------------------------------------------------------------------------- */

void as_simdev_default_params(as_simdev_params *p)
{
    *p = (as_simdev_params){
        .capacity = AS_CAPACITY_NONE,
        .granularity = AS_DEV_GRANULARITY,
        /* H200, driver 580.159.04, CUDA 13.0, fitted on 190k calls of real replays
         * (replay/fit_replay_latency.py, replay/RESULTS.md "Calibration") */
        .reserve = {.fixed_ns = 69365, .ns_per_mib = 96.7},  /* cudaMalloc */
        .release = {.fixed_ns = 38740, .ns_per_mib = 496.3}, /* cudaFree */
        .map = {.fixed_ns = 14541, .ns_per_mib = 26368.4},   /* cuMemCreate+Map, 2 MiB pages */
        .unmap = {.fixed_ns = 32351, .ns_per_mib = 14730.8}, /* cuMemUnmap+Release */
        /* GMLake's stitching on the H200: cuMemMap of existing handles + cuMemSetAccess
         * per 2 MiB page, one cuMemUnmap per range; fitted on 8,853 and 2,813 calls
         * (replay/stitch_cost.py --fit, replay/RESULTS.md "GMLake") */
        .alias = {.fixed_ns = 11055, .ns_per_mib = 17272.2},
        .unalias = {.fixed_ns = 42044, .ns_per_mib = 10990.6},
        .placement = AS_PLACE_CHUNKED,
    };
}

void as_simdev_set_capacity(as_simdev_params *p, uint64_t capacity, unsigned policy_flags)
{
    if (policy_flags & AS_POLICY_F_LIMITS_ITSELF) {
        p->capacity = AS_CAPACITY_NONE;
        p->limit = capacity == AS_CAPACITY_NONE ? 0 : capacity;
    } else {
        p->capacity = capacity;
        p->limit = 0;
    }
}

int as_simdev_create(const as_simdev_params *p, as_simdev **out)
{
    as_simdev *d = calloc(1, sizeof *d);
    *out = NULL;
    if (!d)
        return AS_EDEVICE;
    if (p)
        d->p = *p;
    else
        as_simdev_default_params(&d->p);
    if (d->p.granularity == 0)
        d->p.granularity = AS_DEV_GRANULARITY;
    if (d->p.granularity & (d->p.granularity - 1)) { /* bad_size masks */
        free(d);
        return AS_EINVAL;
    }
    d->dev.ops = &simdev_ops;
    d->dev.ctx = d;
    as_atreap_init(&d->vlive);
    int rc;
    if (d->p.placement == AS_PLACE_CHUNKED)
        rc = as_chunked_create(d->p.granularity, &d->heap);
    else if (!(rc = as_space_create(AS_SIMDEV_VA_BASE, 0, &d->va)))
        rc = as_space_create(d->p.placement == AS_PLACE_LOW_FIRST_FIT ? AS_SIMDEV_BASE
                                                                      : AS_SIMDEV_TOP,
                             d->p.placement == AS_PLACE_TOP_DOWN, &d->phys);
    if (rc) {
        as_simdev_destroy(d);
        return rc;
    }
    *out = d;
    return AS_DEV_OK;
}

void as_simdev_destroy(as_simdev *d)
{
    if (!d)
        return;
    as_chunked_destroy(d->heap);
    as_space_destroy(d->phys);
    as_space_destroy(d->va);
    as_atreap_free(&d->vlive);
    free(d);
}

const as_device *as_simdev_device(as_simdev *d)
{
    return &d->dev;
}

void as_simdev_set_limit(as_simdev *d, uint64_t limit)
{
    d->p.limit = limit == AS_CAPACITY_NONE ? 0 : limit;
}

void as_simdev_set_log(as_simdev *d, as_dev_log_fn fn, void *user)
{
    d->log = fn;
    d->log_user = user;
}

void as_simdev_set_oracle(as_simdev *d, const as_cap_oracle *o)
{
    d->oracle = o ? *o : (as_cap_oracle){0};
}

void as_simdev_counters_get(const as_simdev *d, as_dev_counters *out)
{
    *out = d->c;
}

uint64_t as_simdev_stream_bytes(const as_simdev *d)
{
    return d->s_bytes;
}

uint64_t as_simdev_stream_memory(uint32_t n)
{
    return (uint64_t)(stream_heap_pages(n) + stream_other_pages(n)) * AS_DEV_GRANULARITY;
}
