/*
 * calib_main.c - allocsim-calib: measures what the simulated device assumes, on a real GPU.
 *
 *   allocsim-calib OUTDIR
 *
 * Writes, in a fresh process (placement first, before anything else touched the GPU):
 *   info.txt        device, driver, memory, VMM granularity (minimum and recommended)
 *   placement.csv   step,op,tag,size,addr: cudaMalloc addresses for a scripted pattern of
 *                   mixed sizes and frees, then a seeded random sequence (for the
 *                   placement model, replay/PLACEMENT.md)
 *   capacity.txt    whether the free memory left beside a ballast is exactly allocatable
 *   latency.csv     call,size,rep,ns: cudaMalloc, cudaFree, map, unmap (through the CUDA
 *                   device, 2 MiB handles), raw cuMemCreate+cuMemMap with one handle,
 *                   cudaMallocAsync/cudaFreeAsync under release threshold 0 and max
 * Times are CLOCK_MONOTONIC around the call, after a cudaDeviceSynchronize.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cuda_common.h"
#include "cuda_device.h"
#include "cuda_driver.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)

static const char *outdir;

static FILE *open_out(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "allocsim-calib: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    return f;
}

#define CK(call)                                                                            \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess) {                                                            \
            fprintf(stderr, "allocsim-calib: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,   \
                    cudaGetErrorString(e_));                                                \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

#define CKD(call)                                                                                  \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            const char *s_ = "?";                                                                  \
            as_cu.cuGetErrorString(r_, &s_);                                                       \
            fprintf(stderr, "allocsim-calib: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, s_);     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* ---- placement --------------------------------------------------------------------------- */

static FILE *pf;
static int step;

static uint64_t pm(const char *tag, uint64_t size)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, size);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        fprintf(pf, "%d,malloc_fail,%s,%" PRIu64 ",0\n", step++, tag, size);
        return 0;
    }
    fprintf(pf, "%d,malloc,%s,%" PRIu64 ",%" PRIu64 "\n", step++, tag, size,
            (uint64_t)(uintptr_t)p);
    return (uint64_t)(uintptr_t)p;
}

static void pfree(const char *tag, uint64_t addr, uint64_t size)
{
    if (!addr)
        return;
    CK(cudaFree((void *)(uintptr_t)addr));
    fprintf(pf, "%d,free,%s,%" PRIu64 ",%" PRIu64 "\n", step++, tag, size, addr);
}

static uint64_t rng_state = 0x1234567887654321ull;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void placement(void)
{
    pf = open_out("placement.csv");
    fprintf(pf, "step,op,tag,size,addr\n");
    /* P1: a run of mixed sizes, as PyTorch segments come (2 MiB small, 20 MiB large,
     * 2 MiB-rounded big ones such as 205520896 = 196 MiB). */
    static const uint64_t s1[] = { 2 * MIB, 2 * MIB, 20 * MIB, 20 * MIB, 205520896,
                                   2 * MIB, 1 * GIB, 20 * MIB, 205520896, 2 * MIB };
    enum { N1 = sizeof s1 / sizeof s1[0] };
    uint64_t a[N1];
    char tag[32];
    for (int i = 0; i < N1; i++) {
        snprintf(tag, sizeof tag, "p1_%d", i);
        a[i] = pm(tag, s1[i]);
    }
    /* P2: holes of 2, 20 and 196 MiB; P3: does a fit reuse the lowest hole, first fit? */
    pfree("p2_1", a[1], s1[1]);
    pfree("p2_3", a[3], s1[3]);
    pfree("p2_4", a[4], s1[4]);
    uint64_t b0 = pm("p3_2M", 2 * MIB), b1 = pm("p3_20M", 20 * MIB);
    uint64_t b2 = pm("p3_100M", 100 * MIB), b3 = pm("p3_20M_b", 20 * MIB);
    uint64_t b4 = pm("p3_2M_b", 2 * MIB), b5 = pm("p3_96M", 96 * MIB);
    /* P4: free three neighbours (2 MiB, 1 GiB, 20 MiB): do freed ranges merge? */
    pfree("p4_5", a[5], s1[5]);
    pfree("p4_6", a[6], s1[6]);
    pfree("p4_7", a[7], s1[7]);
    uint64_t c0 = pm("p4_1G22M", 1 * GIB + 22 * MIB);
    /* P5: odd and sub-granularity sizes. */
    uint64_t d0 = pm("p5_1B", 1), d1 = pm("p5_512K", 512 * 1024), d2 = pm("p5_3M+1", 3 * MIB + 1);
    uint64_t d3 = pm("p5_205520897", 205520897), d4 = pm("p5_2M", 2 * MIB);
    /* P6: big ones. */
    uint64_t e0 = pm("p6_10G", 10 * GIB), e1 = pm("p6_30G", 30 * GIB), e2 = pm("p6_2M", 2 * MIB);
    /* free all, then the P1 pattern again: are addresses reused from the bottom? */
    pfree("x", e2, 2 * MIB);
    pfree("x", e1, 30 * GIB);
    pfree("x", e0, 10 * GIB);
    pfree("x", d4, 2 * MIB);
    pfree("x", d3, 205520897);
    pfree("x", d2, 3 * MIB + 1);
    pfree("x", d1, 512 * 1024);
    pfree("x", d0, 1);
    pfree("x", c0, 1 * GIB + 22 * MIB);
    pfree("x", b5, 96 * MIB);
    pfree("x", b4, 2 * MIB);
    pfree("x", b3, 20 * MIB);
    pfree("x", b2, 100 * MIB);
    pfree("x", b1, 20 * MIB);
    pfree("x", b0, 2 * MIB);
    for (int i = 0; i < N1; i++)
        if (i != 1 && i != 3 && i != 4 && i != 5 && i != 6 && i != 7)
            pfree("x", a[i], s1[i]);
    for (int i = 0; i < N1; i++) {
        snprintf(tag, sizeof tag, "p7_%d", i);
        a[i] = pm(tag, s1[i]);
    }
    for (int i = 0; i < N1; i++)
        pfree("x", a[i], s1[i]);
    /* P8: a seeded random sequence of 400 steps over sizes PyTorch would ask for. */
    enum { LIVE = 64 };
    uint64_t la[LIVE] = { 0 }, ls[LIVE] = { 0 };
    static const uint64_t menu[] = { 2 * MIB, 20 * MIB, 20 * MIB, 2 * MIB, 40 * MIB,
                                     205520896, 64 * MIB, 512 * MIB, 6 * MIB, 1 * GIB };
    for (int k = 0; k < 400; k++) {
        int slot = (int)(rnd() % LIVE);
        if (la[slot]) {
            pfree("p8", la[slot], ls[slot]);
            la[slot] = 0;
        } else {
            uint64_t sz = menu[rnd() % (sizeof menu / sizeof menu[0])];
            if (rnd() % 4 == 0)
                sz = (1 + rnd() % 300) * 2 * MIB;
            la[slot] = pm("p8", sz);
            ls[slot] = sz;
        }
    }
    for (int i = 0; i < LIVE; i++)
        pfree("p8_end", la[i], ls[i]);
    fclose(pf);
}

/* ---- capacity ------------------------------------------------------------------------- */

static void capacity(void)
{
    FILE *f = open_out("capacity.txt");
    static const uint64_t caps[] = { 8 * GIB, 8 * GIB + 7 * MIB + 3, 20 * GIB + 100 * MIB };
    for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
        as_cudadev_params p = { .capacity = caps[k] };
        as_cudadev *d;
        char why[256];
        int rc = as_cudadev_create(&p, &d, why, sizeof why);
        if (rc) {
            fprintf(f, "capacity %" PRIu64 ": create failed: %s\n", caps[k], why);
            continue;
        }
        uint64_t eff = as_cudadev_effective_capacity(d), fb, tot;
        as_cudadev_meminfo(d, &fb, &tot);
        const as_device *dv = as_cudadev_device(d);
        /* One reservation of all that is left, rounded down to 2 MiB, then one more page. */
        uint64_t whole = eff / (2 * MIB) * (2 * MIB), addr = 0, addr2 = 0;
        int r1 = dv->ops->reserve(dv->ctx, whole, &addr);
        int r1b = dv->ops->reserve(dv->ctx, 2 * MIB, &addr2);
        if (r1b == 0)
            dv->ops->release(dv->ctx, addr2, 2 * MIB);
        if (r1 == 0)
            dv->ops->release(dv->ctx, addr, whole);
        /* Then in 2 MiB pages until the driver refuses. */
        uint64_t n = 0, *pages = malloc(sizeof *pages * (size_t)(eff / (2 * MIB) + 64));
        while (n < eff / (2 * MIB) + 64 && dv->ops->reserve(dv->ctx, 2 * MIB, &pages[n]) == 0)
            n++;
        for (uint64_t i = 0; i < n; i++)
            dv->ops->release(dv->ctx, pages[i], 2 * MIB);
        free(pages);
        /* And through VMM pages. */
        uint64_t va = 0, mapped = 0;
        if (as_cudadev_vmm_granularity(d) &&
            dv->ops->va_reserve(dv->ctx, (eff / (2 * MIB) + 64) * 2 * MIB, &va) == 0) {
            while (mapped < eff + 64 * MIB && dv->ops->map(dv->ctx, va + mapped, 2 * MIB) == 0)
                mapped += 2 * MIB;
            if (mapped)
                dv->ops->unmap(dv->ctx, va, mapped);
            dv->ops->va_release(dv->ctx, va, (eff / (2 * MIB) + 64) * 2 * MIB);
        }
        fprintf(f,
                "capacity %" PRIu64 ": total %" PRIu64 " free_before %" PRIu64
                " effective_free %" PRIu64 " (effective - capacity = %" PRId64 ") probed %" PRIu64 "\n"
                "  one cudaMalloc(%" PRIu64 ") rc=%d, then +2MiB rc=%d\n"
                "  2 MiB cudaMallocs that succeeded: %" PRIu64 " = %" PRIu64 " bytes\n"
                "  2 MiB cuMemCreate+Map pages that succeeded: %" PRIu64 " bytes\n",
                caps[k], tot, fb, eff, (int64_t)(eff - caps[k]), as_cudadev_probed_capacity(d), whole, r1, r1b, (uint64_t)n,
                (uint64_t)(n * 2 * MIB), mapped);
        as_cudadev_destroy(d);
    }
    fclose(f);
}

/* ---- latency -------------------------------------------------------------------------- */

static FILE *lf;

static void lat(const char *call, uint64_t size, int rep, double ns)
{
    fprintf(lf, "%s,%" PRIu64 ",%d,%.0f\n", call, size, rep, ns);
}

static void latency_malloc(void)
{
    static const uint64_t sizes[] = { 2 * MIB,   4 * MIB,   8 * MIB,   20 * MIB, 64 * MIB,
                                      205520896, 512 * MIB, 1 * GIB,   2 * GIB,  4 * GIB,
                                      8 * GIB,   16 * GIB,  32 * GIB };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int reps = sizes[k] >= 8 * GIB ? 4 : 12;
        for (int r = -1; r < reps; r++) { /* rep -1 is a warm-up, kept but marked */
            void *p = NULL;
            CK(cudaDeviceSynchronize());
            double t0 = as_cuda_now_ns();
            CK(cudaMalloc(&p, sizes[k]));
            double t1 = as_cuda_now_ns();
            CK(cudaDeviceSynchronize());
            double t2 = as_cuda_now_ns();
            CK(cudaFree(p));
            double t3 = as_cuda_now_ns();
            lat("cudaMalloc", sizes[k], r, t1 - t0);
            lat("cudaFree", sizes[k], r, t3 - t2);
        }
    }
    /* Many live at once: cost of one call while 500 segments are held. */
    enum { MANY = 500 };
    void *ps[MANY];
    for (int i = 0; i < MANY; i++) {
        CK(cudaDeviceSynchronize());
        double t0 = as_cuda_now_ns();
        CK(cudaMalloc(&ps[i], 20 * MIB));
        lat("cudaMalloc_many", 20 * MIB, i, as_cuda_now_ns() - t0);
    }
    for (int i = 0; i < MANY; i++) {
        CK(cudaDeviceSynchronize());
        double t0 = as_cuda_now_ns();
        CK(cudaFree(ps[i]));
        lat("cudaFree_many", 20 * MIB, i, as_cuda_now_ns() - t0);
    }
}

static void call_to_lat(void *user, const as_cudadev_call *c)
{
    int *rep = user;
    if (c->rc == 0 && strncmp(c->kind, "segment_", 8) == 0)
        lat(strcmp(c->kind, "segment_map") == 0 ? "map2M" : "unmap2M", c->size, *rep, c->ns);
}

static void latency_vmm(void)
{
    as_cudadev_params p = { .capacity = AS_CAPACITY_NONE };
    as_cudadev *d;
    char why[256];
    if (as_cudadev_create(&p, &d, why, sizeof why)) {
        fprintf(stderr, "allocsim-calib: vmm: %s\n", why);
        return;
    }
    int rep = 0;
    as_cudadev_set_call_log(d, call_to_lat, &rep);
    const as_device *dv = as_cudadev_device(d);
    static const uint64_t sizes[] = { 2 * MIB,   4 * MIB, 20 * MIB, 64 * MIB, 200 * MIB,
                                      512 * MIB, 1 * GIB, 4 * GIB,  16 * GIB };
    uint64_t va = 0;
    if (dv->ops->va_reserve(dv->ctx, 16 * GIB, &va)) {
        fprintf(stderr, "allocsim-calib: va_reserve: %s\n", as_cudadev_errmsg(d));
        as_cudadev_destroy(d);
        return;
    }
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int reps = sizes[k] >= 4 * GIB ? 3 : 10;
        for (rep = -1; rep < reps; rep++) {
            if (dv->ops->map(dv->ctx, va, sizes[k]) ||
                dv->ops->unmap(dv->ctx, va, sizes[k])) {
                fprintf(stderr, "allocsim-calib: map: %s\n", as_cudadev_errmsg(d));
                break;
            }
        }
    }
    dv->ops->va_release(dv->ctx, va, 16 * GIB);
    as_cudadev_destroy(d);

    /* One handle per mapping (PyTorch's 20 MiB pages are one handle each). */
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    CUmemAccessDesc acc = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CUdeviceptr base;
    CKD(as_cu.cuMemAddressReserve(&base, 16 * GIB, 0, 0, 0));
    static const uint64_t hs[] = { 2 * MIB, 20 * MIB, 200 * MIB, 1 * GIB, 4 * GIB };
    for (size_t k = 0; k < sizeof hs / sizeof hs[0]; k++) {
        for (int r = -1; r < 8; r++) {
            CUmemGenericAllocationHandle h;
            CK(cudaDeviceSynchronize());
            double t0 = as_cuda_now_ns();
            CKD(as_cu.cuMemCreate(&h, hs[k], &prop, 0));
            double t1 = as_cuda_now_ns();
            CKD(as_cu.cuMemMap(base, hs[k], 0, h, 0));
            CKD(as_cu.cuMemSetAccess(base, hs[k], &acc, 1));
            double t2 = as_cuda_now_ns();
            CKD(as_cu.cuMemUnmap(base, hs[k]));
            double t3 = as_cuda_now_ns();
            CKD(as_cu.cuMemRelease(h));
            double t4 = as_cuda_now_ns();
            lat("cuMemCreate1", hs[k], r, t1 - t0);
            lat("cuMemMapAccess1", hs[k], r, t2 - t1);
            lat("cuMemUnmap1", hs[k], r, t3 - t2);
            lat("cuMemRelease1", hs[k], r, t4 - t3);
        }
    }
    CKD(as_cu.cuMemAddressFree(base, 16 * GIB));
}

static void latency_async(void)
{
    cudaMemPool_t pool;
    CK(cudaDeviceGetDefaultMemPool(&pool, 0));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    static const uint64_t sizes[] = { 2 * MIB, 20 * MIB, 205520896, 1 * GIB, 8 * GIB };
    for (int mode = 0; mode < 2; mode++) {
        uint64_t thr = mode ? UINT64_MAX : 0;
        CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr));
        CK(cudaMemPoolTrimTo(pool, 0));
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            for (int r = -1; r < 8; r++) {
                void *p;
                double t0 = as_cuda_now_ns();
                CK(cudaMallocAsync(&p, sizes[k], s));
                CK(cudaStreamSynchronize(s));
                double t1 = as_cuda_now_ns();
                uint64_t res = 0;
                CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &res));
                CK(cudaFreeAsync(p, s));
                CK(cudaStreamSynchronize(s));
                double t2 = as_cuda_now_ns();
                lat(mode ? "mallocAsync_keep" : "mallocAsync_thr0", sizes[k], r, t1 - t0);
                lat(mode ? "freeAsync_keep" : "freeAsync_thr0", sizes[k], r, t2 - t1);
                lat(mode ? "poolReserved_keep" : "poolReserved_thr0", sizes[k], r, (double)res);
            }
        }
    }
    CK(cudaMemPoolTrimTo(pool, 0));
    CK(cudaStreamDestroy(s));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: allocsim-calib OUTDIR\n");
        return 2;
    }
    outdir = argv[1];
    char why[512];
    if (as_cu_load(why, sizeof why)) {
        fprintf(stderr, "allocsim-calib: cannot load the NVIDIA CUDA driver: %s\n", why);
        return 1;
    }
    mkdir(outdir, 0755);
    CK(cudaFree(NULL));
    placement(); /* first: a fresh address space */

    FILE *f = open_out("info.txt");
    struct cudaDeviceProp prop;
    int drv = 0, rt = 0;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    size_t fr, tot;
    CK(cudaMemGetInfo(&fr, &tot));
    CUmemAllocationProp vp = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                               .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    size_t gmin = 0, grec = 0;
    CKD(as_cu.cuMemGetAllocationGranularity(&gmin, &vp, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CKD(as_cu.cuMemGetAllocationGranularity(&grec, &vp, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    fprintf(f,
            "device %s cc %d.%d totalGlobalMem %zu\ndriver %d runtime %d\n"
            "cudaMemGetInfo free %zu total %zu\nvmm granularity minimum %zu recommended %zu\n",
            prop.name, prop.major, prop.minor, prop.totalGlobalMem, drv, rt, fr, tot, gmin,
            grec);
    fclose(f);

    capacity();
    lf = open_out("latency.csv");
    fprintf(lf, "call,size,rep,ns\n");
    latency_malloc();
    latency_vmm();
    latency_async();
    fclose(lf);
    printf("allocsim-calib: wrote %s/{info.txt,placement.csv,capacity.txt,latency.csv}\n",
           outdir);
    return 0;
}
