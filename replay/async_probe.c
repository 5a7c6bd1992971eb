/*
 * async_probe.c - allocsim-asyncprobe: how CUDA's stream-ordered pool grows, merges, trims
 * and reuses, op by op, for the cudamallocasync model (replay/data/async-probe-h200/).
 *
 * Reads a script on stdin, one op a line ('#' starts a comment), and writes one CSV row per
 * op to stdout: pool,step,op,id,size,stream,rc,addr,reserved,used, with the pool's
 * ReservedMemCurrent and UsedMemCurrent read right after the op (no implicit sync).
 *
 *   pool NAME THRESHOLD [OPP FOLLOW INTERNAL]  a fresh pool (the last one's live blocks are
 *                               freed and it is destroyed); THRESHOLD bytes or max; the three
 *                               reuse flags 0/1 (default 1 1 1, CUDA's defaults)
 *   a ID SIZE [S]   cudaMallocFromPoolAsync on stream S (0..7, default 0); addr 0 if refused
 *   f ID [S]        cudaFreeAsync on S (default: the stream it was allocated on)
 *   s [S]           cudaStreamSynchronize(S), or every stream
 *   t BYTES         cudaMemPoolTrimTo
 *   h S MS          a host function on S that sleeps MS ms (holds the stream's later work)
 *   e E S / w E S   cudaEventRecord(E, S) / cudaStreamWaitEvent(S, E)  (E 0..7)
 *   c               create one more stream (unused: what a stream costs the device)
 *   m               cudaMemGetInfo: size is the device's free bytes
 *
 * rc is the CUDA error code of the op (2 = out of memory). Invariant: every op's row is
 * written, and a failed CUDA call other than an allocation's refusal stops the program
 * (exit 1) after naming the line.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_IDS 65536
#define NSTREAM 8

typedef struct live {
    void *ptr;
    uint64_t size;
    int stream;
} live;

static cudaStream_t streams[NSTREAM];
static cudaEvent_t events[NSTREAM];
static live ids[MAX_IDS];
static cudaStream_t extra[64];
static int nextra;
static cudaMemPool_t pool;
static int have_pool;
static char pool_name[64];
static unsigned step;

static void CUDART_CB sleep_ms(void *arg)
{
    long ms = (long)(intptr_t)arg;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int fail(unsigned line, const char *what, cudaError_t e)
{
    fprintf(stderr, "allocsim-asyncprobe: line %u: %s: %s\n", line, what, cudaGetErrorString(e));
    return 1;
}

static void row(const char *op, long id, uint64_t size, int s, int rc, void *addr)
{
    uint64_t res = 0, used = 0;
    if (have_pool) {
        (void)cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &res);
        (void)cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
    }
    printf("%s,%u,%s,%ld,%llu,%d,%d,%llu,%llu,%llu\n", pool_name, step++, op, id,
           (unsigned long long)size, s, rc, (unsigned long long)(uintptr_t)addr,
           (unsigned long long)res, (unsigned long long)used);
}

static int drop_pool(void)
{
    if (!have_pool)
        return 0;
    for (int i = 0; i < MAX_IDS; i++)
        if (ids[i].ptr) {
            (void)cudaFreeAsync(ids[i].ptr, streams[ids[i].stream]);
            ids[i].ptr = NULL;
        }
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess)
        e = cudaMemPoolDestroy(pool);
    have_pool = 0;
    return e == cudaSuccess ? 0 : fail(0, "destroying the pool", e);
}

static int new_pool(unsigned line, const char *name, const char *thr, int opp, int fol, int in)
{
    if (drop_pool())
        return 1;
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaError_t e = cudaMemPoolCreate(&pool, &props);
    if (e != cudaSuccess)
        return fail(line, "cudaMemPoolCreate", e);
    have_pool = 1;
    uint64_t t = strcmp(thr, "max") ? strtoull(thr, NULL, 0) : UINT64_MAX;
    int f[3] = {fol, opp, in};
    enum cudaMemPoolAttr a[3] = {cudaMemPoolReuseFollowEventDependencies,
                                 cudaMemPoolReuseAllowOpportunistic,
                                 cudaMemPoolReuseAllowInternalDependencies};
    if ((e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &t)))
        return fail(line, "ReleaseThreshold", e);
    for (int i = 0; i < 3; i++)
        if ((e = cudaMemPoolSetAttribute(pool, a[i], &f[i])))
            return fail(line, "reuse flag", e);
    snprintf(pool_name, sizeof pool_name, "%s", name);
    step = 0;
    row("pool", -1, t, 0, 0, NULL);
    return 0;
}

static int bad(unsigned line, const char *text)
{
    fprintf(stderr, "allocsim-asyncprobe: line %u: cannot read '%s'\n", line, text);
    return 1;
}

/* One op; 0 or 1 (stop). */
static int op(unsigned line, char *buf)
{
    char w[16], n[64], t[32];
    long id = 0, x = -1, y = -1, z = -1;
    unsigned long long size = 0;
    cudaError_t e = cudaSuccess;
    int k = sscanf(buf, "%15s", w);
    if (k != 1)
        return 0;
    if (!strcmp(w, "pool")) {
        k = sscanf(buf, "%*s %63s %31s %ld %ld %ld", n, t, &x, &y, &z);
        return k < 2 ? bad(line, buf)
                     : new_pool(line, n, t, k > 2 ? (int)x : 1, k > 3 ? (int)y : 1,
                                k > 4 ? (int)z : 1);
    }
    if (!have_pool)
        return bad(line, buf);
    if (!strcmp(w, "a")) {
        if (sscanf(buf, "%*s %ld %llu %ld", &id, &size, &x) < 2 || id < 0 || id >= MAX_IDS ||
            ids[id].ptr)
            return bad(line, buf);
        int s = x < 0 ? 0 : (int)(x % NSTREAM);
        void *p = NULL;
        e = cudaMallocFromPoolAsync(&p, size, pool, streams[s]);
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            row("a", id, size, s, (int)e, NULL);
            return 0;
        }
        if (e)
            return fail(line, "cudaMallocFromPoolAsync", e);
        ids[id] = (live){.ptr = p, .size = size, .stream = s};
        row("a", id, size, s, 0, p);
        return 0;
    }
    if (!strcmp(w, "f")) {
        if (sscanf(buf, "%*s %ld %ld", &id, &x) < 1 || id < 0 || id >= MAX_IDS || !ids[id].ptr)
            return bad(line, buf);
        int s = x < 0 ? ids[id].stream : (int)(x % NSTREAM);
        void *p = ids[id].ptr;
        if ((e = cudaFreeAsync(p, streams[s])))
            return fail(line, "cudaFreeAsync", e);
        ids[id].ptr = NULL;
        row("f", id, ids[id].size, s, 0, p);
        return 0;
    }
    if (!strcmp(w, "s")) {
        if (sscanf(buf, "%*s %ld", &x) == 1)
            e = cudaStreamSynchronize(streams[x % NSTREAM]);
        else
            for (int i = 0; i < NSTREAM && !e; i++)
                e = cudaStreamSynchronize(streams[i]);
        if (e)
            return fail(line, "sync", e);
        row("s", -1, 0, (int)x, 0, NULL);
        return 0;
    }
    if (!strcmp(w, "t")) {
        if (sscanf(buf, "%*s %llu", &size) != 1)
            return bad(line, buf);
        if ((e = cudaMemPoolTrimTo(pool, size)))
            return fail(line, "cudaMemPoolTrimTo", e);
        row("t", -1, size, -1, 0, NULL);
        return 0;
    }
    if (!strcmp(w, "c") || !strcmp(w, "m")) {
        size_t fr = 0, tot = 0;
        if (w[0] == 'c' && nextra < 64)
            e = cudaStreamCreateWithFlags(&extra[nextra++], cudaStreamNonBlocking);
        else if (w[0] == 'm')
            e = cudaMemGetInfo(&fr, &tot);
        if (e)
            return fail(line, w, e);
        row(w, -1, fr, -1, 0, NULL);
        return 0;
    }
    if (!strcmp(w, "h") || !strcmp(w, "e") || !strcmp(w, "w")) {
        if (sscanf(buf, "%*s %ld %ld", &x, &y) != 2 || x < 0 || y < 0)
            return bad(line, buf);
        if (w[0] == 'h')
            e = cudaLaunchHostFunc(streams[x % NSTREAM], sleep_ms, (void *)(intptr_t)y);
        else if (w[0] == 'e')
            e = cudaEventRecord(events[x % NSTREAM], streams[y % NSTREAM]);
        else
            e = cudaStreamWaitEvent(streams[y % NSTREAM], events[x % NSTREAM], 0);
        if (e)
            return fail(line, w, e);
        if (w[0] == 'h')
            row(w, -1, (uint64_t)y, (int)x, 0, NULL); /* size: the ms slept */
        else
            row(w, x, 0, (int)y, 0, NULL);
        return 0;
    }
    return bad(line, buf);
}

int main(void)
{
    cudaError_t e = cudaFree(NULL);
    if (e)
        return fail(0, "no usable GPU", e);
    for (int i = 0; i < NSTREAM; i++) {
        if ((e = cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking)) ||
            (e = cudaEventCreateWithFlags(&events[i], cudaEventDisableTiming)))
            return fail(0, "streams", e);
    }
    printf("pool,step,op,id,size,stream,rc,addr,reserved,used\n");
    char buf[256];
    unsigned line = 0;
    int rc = 0;
    while (!rc && fgets(buf, sizeof buf, stdin)) {
        line++;
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = 0;
        rc = op(line, buf);
    }
    if (!rc)
        rc = drop_pool();
    if (fflush(stdout) || ferror(stdout))
        rc = 1;
    return rc;
}
