/*
 * cuda_device.c - the device interface over a real GPU (see cuda_device.h).
 *
 * Invariants: `live` holds exactly the cudaMalloc ranges handed out and not yet freed;
 * every page of a va range is either unmapped (handle 0), backed by its own 2 MiB
 * cuMemCreate handle (map), or an alias of such a page of another range (alias: src[]
 * names the page, whose aliased[] counts it), mapped and accessible. A page with aliases
 * is never unmapped, so its handle outlives them. reserved = sum(live) + own pages. The
 * ballast is allocated before any segment and freed after all of them; with VMM it holds
 * physical memory only, so it never takes cudaMalloc's address space.
 */
#include "cuda_device.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_common.h"
#include "cuda_driver.h"

#define BALLAST_CHUNK (4ull << 30)

typedef struct va_range {
    uint64_t addr, size;
    CUmemGenericAllocationHandle *page; /* size / page_size handles, 0 = unmapped */
    uint64_t *src;                      /* per page: the page it aliases, 0; NULL: none yet */
    uint32_t *aliased;                  /* per page: its aliases elsewhere; NULL: none yet */
} va_range;

typedef struct live_slot {
    uint64_t addr, size; /* addr 0 = empty */
} live_slot;

struct as_cudadev {
    as_device dev;
    as_cudadev_params p;
    CUcontext ctx;
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    uint64_t page; /* VMM granularity; 0 when the GPU has no VMM */
    struct ballast {
        void *p;                        /* cudaMalloc'd (no VMM), or */
        CUmemGenericAllocationHandle h; /* physical memory only, never mapped */
        uint64_t size;
    } *ballast;
    size_t nballast;
    uint64_t probed; /* capacity the probe confirmed (largest single cudaMalloc), or 0 */
    uint64_t free_before, total, effective;
    live_slot *live; /* open addressing, linear probing, power-of-2 capacity */
    size_t live_cap, live_n;
    va_range *va;
    size_t nva, va_cap;
    as_dev_counters c;
    as_dev_log_fn log;
    void *log_user;
    as_cudadev_call_fn call_log;
    void *call_user;
    char err[256];
};

/* ---- small helpers ------------------------------------------------------------------------ */

double as_cuda_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void set_err(as_cudadev *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(as_cudadev *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err, sizeof d->err, fmt, ap);
    va_end(ap);
}

int as_cuda_rt_rc(cudaError_t e, const char *what, uint64_t size, char *err, size_t err_len)
{
    if (e == cudaSuccess)
        return AS_DEV_OK;
    (void)cudaGetLastError();
    if (e == cudaErrorMemoryAllocation)
        return AS_DEV_OOM;
    snprintf(err, err_len, "%s(%llu): %s: %s", what, (unsigned long long)size,
             cudaGetErrorName(e), cudaGetErrorString(e));
    return AS_EDEVICE;
}

static int rt_rc(as_cudadev *d, cudaError_t e, const char *what, uint64_t size)
{
    return as_cuda_rt_rc(e, what, size, d->err, sizeof d->err);
}

static int drv_rc(as_cudadev *d, CUresult r, const char *what, uint64_t size)
{
    if (r == CUDA_SUCCESS)
        return AS_DEV_OK;
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return AS_DEV_OOM;
    const char *name = NULL, *str = NULL;
    as_cu.cuGetErrorName(r, &name);
    as_cu.cuGetErrorString(r, &str);
    set_err(d, "%s(%llu): %s: %s", what, (unsigned long long)size, name ? name : "?",
            str ? str : "?");
    return AS_EDEVICE;
}

static void quiesce(as_cudadev *d)
{
    if (!d->p.no_sync)
        (void)cudaDeviceSynchronize();
}

static void record(as_cudadev *d, const char *kind, as_dev_action a, int logged, int rc,
                   uint64_t addr, uint64_t size, double ns)
{
    d->c.time_ns += ns;
    if (rc == AS_DEV_OOM)
        d->c.refusals++;
    if (d->call_log) {
        as_cudadev_call c = { .kind = kind, .rc = rc, .addr = addr, .size = size, .ns = ns };
        d->call_log(d->call_user, &c);
    }
    if (rc == AS_DEV_OK && logged && d->log) {
        as_dev_event ev = { .action = a, .addr = addr, .size = size, .cost_ns = ns };
        d->log(d->log_user, &ev);
    }
}

static void held_add(as_cudadev *d, uint64_t size)
{
    d->c.reserved += size;
    if (d->c.reserved > d->c.peak_reserved)
        d->c.peak_reserved = d->c.reserved;
}

/* ---- live cudaMalloc ranges: addr -> size ---------------------------------------------------- */

static size_t slot_of(uint64_t addr, size_t cap)
{
    uint64_t h = addr * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (cap - 1);
}

static int live_grow(as_cudadev *d)
{
    size_t nc = d->live_cap ? d->live_cap * 2 : 256;
    live_slot *n = calloc(nc, sizeof *n);
    if (!n)
        return -1;
    for (size_t i = 0; i < d->live_cap; i++) {
        if (!d->live[i].addr)
            continue;
        size_t j = slot_of(d->live[i].addr, nc);
        while (n[j].addr)
            j = (j + 1) & (nc - 1);
        n[j] = d->live[i];
    }
    free(d->live);
    d->live = n;
    d->live_cap = nc;
    return 0;
}

static int live_put(as_cudadev *d, uint64_t addr, uint64_t size)
{
    if ((d->live_n + 1) * 2 > d->live_cap && live_grow(d))
        return -1;
    size_t j = slot_of(addr, d->live_cap);
    while (d->live[j].addr)
        j = (j + 1) & (d->live_cap - 1);
    d->live[j] = (live_slot){ addr, size };
    d->live_n++;
    return 0;
}

static live_slot *live_get(as_cudadev *d, uint64_t addr)
{
    if (!d->live_cap || !addr)
        return NULL;
    size_t j = slot_of(addr, d->live_cap);
    while (d->live[j].addr) {
        if (d->live[j].addr == addr)
            return &d->live[j];
        j = (j + 1) & (d->live_cap - 1);
    }
    return NULL;
}

/* Backward-shift deletion keeps every probe chain unbroken without tombstones. */
static void live_del(as_cudadev *d, live_slot *s)
{
    size_t cap = d->live_cap, i = (size_t)(s - d->live), j = i;
    d->live[i].addr = 0;
    for (;;) {
        j = (j + 1) & (cap - 1);
        if (!d->live[j].addr)
            break;
        size_t k = slot_of(d->live[j].addr, cap);
        /* move j back to i when its home k is not cyclically in (i, j] */
        if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
            d->live[i] = d->live[j];
            d->live[j].addr = 0;
            i = j;
        }
    }
    d->live_n--;
}

/* ---- cudaMalloc / cudaFree ----------------------------------------------------------------- */

static int dev_reserve(void *ctx, uint64_t size, uint64_t *addr)
{
    as_cudadev *d = ctx;
    if (size == 0 || size % AS_DEV_GRANULARITY)
        return AS_EINVAL;
    void *ptr = NULL;
    quiesce(d);
    double t0 = as_cuda_now_ns();
    cudaError_t e = cudaMalloc(&ptr, size);
    double ns = as_cuda_now_ns() - t0;
    int rc = rt_rc(d, e, "cudaMalloc", size);
    if (rc == AS_DEV_OK) {
        *addr = (uint64_t)(uintptr_t)ptr;
        if (live_put(d, *addr, size)) {
            cudaFree(ptr);
            set_err(d, "out of host memory");
            return AS_EDEVICE;
        }
        held_add(d, size);
        d->c.reserves++;
    }
    record(d, "segment_alloc", AS_DEV_SEGMENT_ALLOC, 1, rc, rc ? 0 : *addr, size, ns);
    return rc;
}

static int dev_release(void *ctx, uint64_t addr, uint64_t size)
{
    as_cudadev *d = ctx;
    live_slot *s = live_get(d, addr);
    if (!s || s->size != size)
        return AS_EINVAL;
    quiesce(d);
    double t0 = as_cuda_now_ns();
    cudaError_t e = cudaFree((void *)(uintptr_t)addr);
    double ns = as_cuda_now_ns() - t0;
    int rc = rt_rc(d, e, "cudaFree", size);
    if (rc == AS_DEV_OK) {
        live_del(d, s);
        d->c.reserved -= size;
        d->c.releases++;
    }
    record(d, "segment_free", AS_DEV_SEGMENT_FREE, 1, rc, addr, size, ns);
    return rc;
}

/* ---- virtual memory ---------------------------------------------------------------------- */

static int need_vmm(as_cudadev *d)
{
    if (!d->page) {
        set_err(d, "this GPU has no virtual memory management support");
        return AS_ENOSYS;
    }
    CUresult r = as_cu.cuCtxSetCurrent(d->ctx); /* the engine may call from a worker thread */
    return drv_rc(d, r, "cuCtxSetCurrent", 0);
}

static int dev_va_reserve(void *ctx, uint64_t size, uint64_t *addr)
{
    as_cudadev *d = ctx;
    int rc = need_vmm(d);
    if (rc)
        return rc;
    if (size == 0 || size % d->page || size % AS_DEV_GRANULARITY)
        return AS_EINVAL;
    if (d->nva == d->va_cap) {
        size_t nc = d->va_cap ? d->va_cap * 2 : 8;
        va_range *n = realloc(d->va, nc * sizeof *n);
        if (!n) {
            set_err(d, "out of host memory");
            return AS_EDEVICE;
        }
        d->va = n;
        d->va_cap = nc;
    }
    CUmemGenericAllocationHandle *pages = calloc(size / d->page, sizeof *pages);
    if (!pages) {
        set_err(d, "out of host memory");
        return AS_EDEVICE;
    }
    CUdeviceptr p = 0;
    double t0 = as_cuda_now_ns();
    CUresult r = as_cu.cuMemAddressReserve(&p, size, 0, 0, 0);
    double ns = as_cuda_now_ns() - t0;
    rc = drv_rc(d, r, "cuMemAddressReserve", size);
    if (rc == AS_DEV_OOM) { /* address space, not memory: never a capacity result */
        set_err(d, "cuMemAddressReserve(%llu): out of address space", (unsigned long long)size);
        rc = AS_EDEVICE;
    }
    if (rc) {
        free(pages);
    } else {
        d->va[d->nva++] = (va_range){ .addr = (uint64_t)p, .size = size, .page = pages };
        *addr = (uint64_t)p;
    }
    record(d, "va_reserve", AS_DEV_SEGMENT_MAP, 0, rc, rc ? 0 : (uint64_t)p, size, ns);
    return rc;
}

static va_range *va_find(as_cudadev *d, uint64_t addr, uint64_t size)
{
    for (size_t i = 0; i < d->nva; i++) {
        va_range *v = &d->va[i];
        if (addr >= v->addr && size <= v->size && addr - v->addr <= v->size - size)
            return v;
    }
    return NULL;
}

/* The pages [*first, *first + *n) of a reserved range that addr..addr+size covers exactly,
 * every one of them mapped (mapped = 1) or every one unmapped (mapped = 0), as map and
 * unmap require. 0 or an AS_DEV_* error. */
static int page_span(as_cudadev *d, uint64_t addr, uint64_t size, int mapped, va_range **vp,
                     uint64_t *first, uint64_t *n)
{
    int rc = need_vmm(d);
    if (rc)
        return rc;
    va_range *v = va_find(d, addr, size);
    if (!v || size == 0 || size % d->page || (addr - v->addr) % d->page)
        return AS_EINVAL;
    *first = (addr - v->addr) / d->page;
    *n = size / d->page;
    for (uint64_t i = *first; i < *first + *n; i++)
        if ((v->page[i] != 0) != mapped)
            return AS_EINVAL; /* map: already mapped; unmap: not mapped */
    *vp = v;
    return AS_DEV_OK;
}

/* Page i of v is an alias: it forgets its source, whose alias count goes down. */
static void alias_drop(as_cudadev *d, va_range *v, uint64_t i)
{
    va_range *s = va_find(d, v->src[i], d->page);
    if (s && s->aliased)
        s->aliased[(v->src[i] - s->addr) / d->page]--;
    v->src[i] = 0;
    v->page[i] = 0;
}

static int is_alias(const va_range *v, uint64_t i)
{
    return v->src && v->src[i];
}

/* Unmaps pages [first, first+n) of v, releasing own handles (an alias's belongs to its
 * source); returns the first error. */
static int unmap_pages(as_cudadev *d, va_range *v, uint64_t first, uint64_t n)
{
    int rc = AS_DEV_OK;
    for (uint64_t i = first; i < first + n; i++) {
        if (!v->page[i])
            continue;
        int r1 = drv_rc(d, as_cu.cuMemUnmap(v->addr + i * d->page, d->page), "cuMemUnmap", d->page);
        int r2 = AS_DEV_OK;
        if (is_alias(v, i))
            alias_drop(d, v, i);
        else
            r2 = drv_rc(d, as_cu.cuMemRelease(v->page[i]), "cuMemRelease", d->page);
        v->page[i] = 0;
        if (!rc)
            rc = r1 ? r1 : r2;
    }
    return rc;
}

static int dev_va_release(void *ctx, uint64_t addr, uint64_t size)
{
    as_cudadev *d = ctx;
    int rc = need_vmm(d);
    if (rc)
        return rc;
    size_t i;
    for (i = 0; i < d->nva; i++)
        if (d->va[i].addr == addr && d->va[i].size == size)
            break;
    if (i == d->nva)
        return AS_EINVAL;
    va_range *v = &d->va[i];
    for (uint64_t k = 0; k < size / d->page; k++)
        if (v->page[k])
            return AS_EINVAL; /* still mapped: the policy must unmap first */
    double t0 = as_cuda_now_ns();
    rc = drv_rc(d, as_cu.cuMemAddressFree(addr, size), "cuMemAddressFree", size);
    double ns = as_cuda_now_ns() - t0;
    if (rc == AS_DEV_OK) {
        free(v->page);
        free(v->src);
        free(v->aliased);
        d->va[i] = d->va[--d->nva];
    }
    record(d, "va_release", AS_DEV_SEGMENT_UNMAP, 0, rc, addr, size, ns);
    return rc;
}

static int dev_map(void *ctx, uint64_t addr, uint64_t size)
{
    as_cudadev *d = ctx;
    va_range *v;
    uint64_t first, n, done = 0;
    int rc = page_span(d, addr, size, 0, &v, &first, &n);
    if (rc)
        return rc;
    quiesce(d);
    double t0 = as_cuda_now_ns();
    for (; done < n; done++) {
        CUmemGenericAllocationHandle h = 0;
        rc = drv_rc(d, as_cu.cuMemCreate(&h, d->page, &d->prop, 0), "cuMemCreate", d->page);
        if (rc)
            break;
        uint64_t pa = v->addr + (first + done) * d->page;
        rc = drv_rc(d, as_cu.cuMemMap(pa, d->page, 0, h, 0), "cuMemMap", d->page);
        if (rc) {
            as_cu.cuMemRelease(h);
            break;
        }
        v->page[first + done] = h;
    }
    if (!rc)
        rc = drv_rc(d, as_cu.cuMemSetAccess(addr, size, &d->access, 1), "cuMemSetAccess", size);
    double ns = as_cuda_now_ns() - t0;
    if (rc) { /* a map is all or nothing, as PyTorch's map_block is */
        int u = unmap_pages(d, v, first, n);
        if (u < 0 && rc == AS_DEV_OOM)
            rc = u;
    } else {
        held_add(d, size);
        d->c.maps++;
    }
    record(d, "segment_map", AS_DEV_SEGMENT_MAP, 1, rc, addr, size, ns);
    return rc;
}

static int dev_unmap(void *ctx, uint64_t addr, uint64_t size)
{
    as_cudadev *d = ctx;
    va_range *v;
    uint64_t first, n;
    int rc = page_span(d, addr, size, 1, &v, &first, &n);
    if (rc)
        return rc;
    for (uint64_t i = first; i < first + n; i++)
        if (is_alias(v, i) || (v->aliased && v->aliased[i]))
            return AS_EINVAL; /* an alias (unalias it), or a page an alias still maps */
    quiesce(d);
    double t0 = as_cuda_now_ns();
    rc = unmap_pages(d, v, first, n);
    double ns = as_cuda_now_ns() - t0;
    /* Pages are gone from our table even when the driver complained: never double-free. */
    d->c.reserved -= size;
    if (rc == AS_DEV_OK)
        d->c.unmaps++;
    record(d, "segment_unmap", AS_DEV_SEGMENT_UNMAP, 1, rc, addr, size, ns);
    return rc;
}

/* A part of a call's time, for the call log alone (record() bills the whole call). */
static void note(as_cudadev *d, const char *kind, int rc, uint64_t addr, uint64_t size, double ns)
{
    if (d->call_log) {
        as_cudadev_call c = { .kind = kind, .rc = rc, .addr = addr, .size = size, .ns = ns };
        d->call_log(d->call_user, &c);
    }
}

/* The per-page tables alias() needs, made the first time a range takes part in one. */
static int alias_tables(as_cudadev *d, va_range *dv, va_range *sv)
{
    uint64_t n = dv->size / d->page, m = sv->size / d->page;
    if ((!dv->src && !(dv->src = calloc(n, sizeof *dv->src))) ||
        (!sv->aliased && !(sv->aliased = calloc(m, sizeof *sv->aliased)))) {
        set_err(d, "out of host memory");
        return AS_EDEVICE;
    }
    return AS_DEV_OK;
}

/* As GMLake's VirBlock: per page, cuMemMap of the source page's own handle, then
 * cuMemSetAccess of that page. The call log also gets the two sums apart. */
static int dev_alias(void *ctx, uint64_t dst, uint64_t src, uint64_t size)
{
    as_cudadev *d = ctx;
    va_range *dv, *sv;
    uint64_t df, sf, n, done = 0;
    int rc = page_span(d, dst, size, 0, &dv, &df, &n);
    if (!rc)
        rc = page_span(d, src, size, 1, &sv, &sf, &n);
    if (rc)
        return rc;
    for (uint64_t i = sf; i < sf + n; i++)
        if (sv == dv || is_alias(sv, i))
            return AS_EINVAL; /* alias the pages themselves, not an alias of them */
    if ((rc = alias_tables(d, dv, sv)))
        return rc;
    quiesce(d);
    double map_ns = 0, access_ns = 0;
    for (; done < n && !rc; done++) {
        uint64_t pa = dst + done * d->page;
        double t0 = as_cuda_now_ns();
        rc = drv_rc(d, as_cu.cuMemMap(pa, d->page, 0, sv->page[sf + done], 0), "cuMemMap", d->page);
        double t1 = as_cuda_now_ns();
        map_ns += t1 - t0;
        if (rc)
            break;
        dv->page[df + done] = sv->page[sf + done];
        dv->src[df + done] = src + done * d->page;
        sv->aliased[sf + done]++;
        rc = drv_rc(d, as_cu.cuMemSetAccess(pa, d->page, &d->access, 1), "cuMemSetAccess", d->page);
        access_ns += as_cuda_now_ns() - t1;
    }
    if (rc) { /* all or nothing, as a map; the driver's OOM stays a refusal */
        int u = unmap_pages(d, dv, df, done);
        rc = u < 0 && rc == AS_DEV_OOM ? u : rc;
    } else {
        d->c.aliases++;
    }
    note(d, "alias.map", rc, dst, size, map_ns);
    note(d, "alias.access", rc, dst, size, access_ns);
    record(d, "alias", AS_DEV_SEGMENT_MAP, 0, rc, dst, size, map_ns + access_ns);
    return rc;
}

/* One cuMemUnmap over the range, as GMLake's VirDevPtr unmaps a stitched range; page by
 * page (logged as unalias.pagewise) if the driver refuses that. */
static int dev_unalias(void *ctx, uint64_t addr, uint64_t size)
{
    as_cudadev *d = ctx;
    va_range *v;
    uint64_t first, n;
    int rc = page_span(d, addr, size, 1, &v, &first, &n);
    if (rc)
        return rc;
    for (uint64_t i = first; i < first + n; i++)
        if (!is_alias(v, i))
            return AS_EINVAL;
    quiesce(d);
    double t0 = as_cuda_now_ns();
    rc = drv_rc(d, as_cu.cuMemUnmap(addr, size), "cuMemUnmap", size);
    double ns = as_cuda_now_ns() - t0;
    if (rc) {
        t0 = as_cuda_now_ns();
        rc = unmap_pages(d, v, first, n);
        double pw = as_cuda_now_ns() - t0;
        note(d, "unalias.pagewise", rc, addr, size, pw);
        ns += pw;
    } else {
        for (uint64_t i = first; i < first + n; i++)
            alias_drop(d, v, i);
    }
    if (rc == AS_DEV_OK)
        d->c.unaliases++;
    record(d, "unalias", AS_DEV_SEGMENT_UNMAP, 0, rc, addr, size, ns);
    return rc;
}

static uint64_t dev_capacity(void *ctx)
{
    const as_cudadev *d = ctx;
    return d->p.limit ? d->p.limit : d->p.capacity;
}
static uint64_t dev_reserved(void *ctx) { return ((as_cudadev *)ctx)->c.reserved; }

static int dev_cap_test(void *ctx, as_cap_pred pred, const void *arg, int *yes)
{
    *yes = pred(arg, dev_capacity(ctx));
    return 0;
}

/* A real process: the replay makes no stream for cudaMalloc policies (PLACEMENT.md
 * section 10 measures what streams would do to its heap). */
static int dev_streams(void *ctx, uint32_t n)
{
    (void)ctx;
    (void)n;
    return AS_ENOSYS;
}

static const as_device_ops cudadev_ops = {
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
    .cap_test = dev_cap_test,
    .streams = dev_streams,
    .reserved = dev_reserved,
};

/* ---- ballast --------------------------------------------------------------------------- */

/* With VMM the ballast is physical memory alone (cuMemCreate, never mapped), so it takes
 * no address space and cudaMalloc's heap starts every run where a fresh process's does, as
 * the simulated device's does. A cudaMalloc'd ballast sat at the top of that heap, and the
 * tail of its last piece's chunk (its size rounded up to 32 MiB) took a run's first
 * segments whenever they fitted there (replay/PLACEMENT.md section 7). */
static void ballast_free(struct ballast *b)
{
    if (b->h)
        as_cu.cuMemRelease(b->h);
    else if (b->p)
        cudaFree(b->p);
}

static int ballast_add(as_cudadev *d, uint64_t bytes)
{
    while (bytes >= AS_DEV_GRANULARITY) {
        uint64_t n = bytes < BALLAST_CHUNK ? bytes / AS_DEV_GRANULARITY * AS_DEV_GRANULARITY
                                           : BALLAST_CHUNK;
        struct ballast *nb = realloc(d->ballast, (d->nballast + 1) * sizeof *nb);
        if (!nb) {
            set_err(d, "out of host memory");
            return AS_EDEVICE;
        }
        d->ballast = nb;
        struct ballast *b = &d->ballast[d->nballast];
        *b = (struct ballast){.size = n};
        int rc = d->page ? drv_rc(d, as_cu.cuMemCreate(&b->h, n, &d->prop, 0), "cuMemCreate", n)
                         : rt_rc(d, cudaMalloc(&b->p, n), "cudaMalloc(ballast)", n);
        if (rc == AS_DEV_OOM && n > AS_DEV_GRANULARITY) {
            /* the driver keeps a little back: take what it gives in smaller steps */
            bytes = n / 2 / AS_DEV_GRANULARITY * AS_DEV_GRANULARITY;
            continue;
        }
        if (rc)
            return rc;
        d->nballast++;
        bytes -= n;
    }
    return AS_DEV_OK;
}

/* The driver keeps about 3.125 MiB of what cudaMemGetInfo reports free for itself
 * (replay/PLACEMENT.md, section 5), so the free count is only the starting point: the
 * ballast first leaves capacity + 3.125 MiB free, then 2 MiB steps are added or removed
 * until the largest single cudaMalloc that succeeds is the capacity (rounded down to
 * 2 MiB) and 2 MiB more fails. */
#define DRIVER_RESERVE (3ull * AS_DEV_GRANULARITY / 2 + (1ull << 17))

static int probe(uint64_t size)
{
    void *p = NULL;
    if (cudaMalloc(&p, size) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    cudaFree(p);
    return 1;
}

static int ballast_fill(as_cudadev *d, uint64_t capacity)
{
    size_t fr = 0, tot = 0;
    int rc = rt_rc(d, cudaMemGetInfo(&fr, &tot), "cudaMemGetInfo", 0);
    if (rc)
        return rc;
    if (fr > capacity + DRIVER_RESERVE && (rc = ballast_add(d, fr - capacity - DRIVER_RESERVE)))
        return rc;
    uint64_t c2 = capacity / AS_DEV_GRANULARITY * AS_DEV_GRANULARITY;
    for (int step = 0; step < 64 && c2; step++) {
        if (probe(c2 + AS_DEV_GRANULARITY)) { /* too much room: hold back 2 MiB more */
            if ((rc = ballast_add(d, AS_DEV_GRANULARITY)))
                return rc;
            continue;
        }
        if (probe(c2) || d->nballast == 0)
            break;
        /* too little: give back the last piece, keeping all of it but 2 MiB */
        struct ballast last = d->ballast[--d->nballast];
        ballast_free(&last);
        if (last.size > AS_DEV_GRANULARITY &&
            (rc = ballast_add(d, last.size - AS_DEV_GRANULARITY)))
            return rc;
    }
    rc = rt_rc(d, cudaMemGetInfo(&fr, &tot), "cudaMemGetInfo", 0);
    d->effective = fr;
    d->probed = c2 && probe(c2) && !probe(c2 + AS_DEV_GRANULARITY) ? c2 : 0;
    return rc;
}

/* ---- public --------------------------------------------------------------------------- */

int as_cudadev_create(const as_cudadev_params *p, as_cudadev **out, char *why, size_t why_len)
{
    *out = NULL;
    as_cudadev *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(why, why_len, "out of host memory");
        return AS_EDEVICE;
    }
    d->p = *p;
    d->dev.ops = &cudadev_ops;
    d->dev.ctx = d;
    int rc = rt_rc(d, cudaSetDevice(p->device), "cudaSetDevice", (uint64_t)p->device);
    if (!rc)
        rc = rt_rc(d, cudaFree(NULL), "cudaFree(context init)", 0);
    CUdevice cu = 0;
    if (!rc)
        rc = drv_rc(d, as_cu.cuDeviceGet(&cu, p->device), "cuDeviceGet", (uint64_t)p->device);
    if (!rc)
        rc = drv_rc(d, as_cu.cuCtxGetCurrent(&d->ctx), "cuCtxGetCurrent", 0);
    if (rc)
        goto out;
    int vmm = 0;
    as_cu.cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cu);
    if (vmm) {
        d->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        d->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        d->prop.location.id = p->device;
        d->access.location = d->prop.location;
        d->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        size_t g = 0;
        rc = drv_rc(
            d, as_cu.cuMemGetAllocationGranularity(&g, &d->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            "cuMemGetAllocationGranularity", 0);
        if (rc)
            goto out;
        if (g == 0 || AS_DEV_GRANULARITY % g) {
            set_err(d, "VMM granularity %zu does not divide 2 MiB", g);
            rc = AS_EDEVICE;
            goto out;
        }
        d->page = AS_DEV_GRANULARITY; /* one handle per 2 MiB page, so any page unmaps */
    }
    size_t fr = 0, tot = 0;
    if ((rc = rt_rc(d, cudaMemGetInfo(&fr, &tot), "cudaMemGetInfo", 0)))
        goto out;
    d->free_before = fr;
    d->total = tot;
    d->effective = fr;
    if (p->capacity != AS_CAPACITY_NONE) {
        if (fr < p->capacity) {
            set_err(d, "the GPU has %zu bytes free, less than the capacity %llu", fr,
                    (unsigned long long)p->capacity);
            rc = AS_DEV_OOM;
            goto out;
        }
        rc = ballast_fill(d, p->capacity);
    }
out:
    if (rc) {
        snprintf(why, why_len, "%s", d->err[0] ? d->err : "CUDA device setup failed");
        as_cudadev_destroy(d);
        return rc;
    }
    *out = d;
    return AS_DEV_OK;
}

void as_cudadev_destroy(as_cudadev *d)
{
    if (!d)
        return;
    (void)cudaDeviceSynchronize();
    for (size_t i = 0; i < d->live_cap; i++)
        if (d->live[i].addr)
            cudaFree((void *)(uintptr_t)d->live[i].addr);
    if (d->ctx && d->nva)
        as_cu.cuCtxSetCurrent(d->ctx);
    for (size_t i = 0; i < d->nva; i++) /* aliases first: their sources are still there */
        for (uint64_t k = 0; d->va[i].src && k < d->va[i].size / d->page; k++)
            if (is_alias(&d->va[i], k))
                unmap_pages(d, &d->va[i], k, 1);
    for (size_t i = 0; i < d->nva; i++) {
        va_range *v = &d->va[i];
        unmap_pages(d, v, 0, v->size / d->page);
        as_cu.cuMemAddressFree(v->addr, v->size);
        free(v->page);
        free(v->src);
        free(v->aliased);
    }
    for (size_t i = 0; i < d->nballast; i++)
        ballast_free(&d->ballast[i]);
    (void)cudaGetLastError();
    free(d->ballast);
    free(d->live);
    free(d->va);
    free(d);
}

const as_device *as_cudadev_device(as_cudadev *d) { return &d->dev; }

void as_cudadev_set_log(as_cudadev *d, as_dev_log_fn fn, void *user)
{
    d->log = fn;
    d->log_user = user;
}

void as_cudadev_set_call_log(as_cudadev *d, as_cudadev_call_fn fn, void *user)
{
    d->call_log = fn;
    d->call_user = user;
}

void as_cudadev_counters_get(const as_cudadev *d, as_dev_counters *out) { *out = d->c; }
uint64_t as_cudadev_effective_capacity(const as_cudadev *d) { return d->effective; }
uint64_t as_cudadev_probed_capacity(const as_cudadev *d) { return d->probed; }

void as_cudadev_meminfo(const as_cudadev *d, uint64_t *free_before, uint64_t *total)
{
    *free_before = d->free_before;
    *total = d->total;
}

const char *as_cudadev_errmsg(const as_cudadev *d) { return d->err; }
uint64_t as_cudadev_vmm_granularity(const as_cudadev *d) { return d->page; }
