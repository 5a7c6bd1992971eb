/*
 * heap_replay.c - build/heap-replay (`make heap-replay`): the chunked heap alone
 * (sim/placement_chunked.c, the simulated device's cudaMalloc placement) replayed over the
 * device log of `allocsim run --segments`, every address checked. The heap's share of a
 * whole run is a few tens of ns an event among the decode, the engine and the policy, so a
 * change of a few percent to it is lost in a loaded machine's noise; replayed alone, in
 * memory and many times over, its CPU time per call is. Invariant: each run of the log
 * is replayed on a fresh heap, and a take that gets another address than the log's, or a
 * give the heap refuses, is counted wrong (the exit status is 1).
 *
 * usage: heap-replay [--reps N] LOG   (LOG: the CSV of --segments, '-' for stdin)
 * Only logs of policies that make no virtual reservations: a map or unmap in the log
 * means reservations the log does not show, which shared the heap.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grow.h"
#include "placement.h"

typedef struct call {
    uint64_t addr, size;
    uint32_t run; /* the log's run */
    int take;     /* segment_alloc, else segment_free */
} call;

typedef struct log_calls {
    call *c;
    size_t n, cap;
} log_calls;

/* The calls of the CSV in f, header first. 0, or -1 with a message on stderr. */
static int log_read(FILE *f, const char *name, log_calls *out)
{
    char line[256], act[32];
    size_t no = 1;
    if (!fgets(line, sizeof line, f) || strncmp(line, "run,alloc,event,action,addr,size", 32)) {
        fprintf(stderr, "heap-replay: %s: not the CSV of allocsim run --segments\n", name);
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        unsigned long long run, addr, size;
        no++;
        if (sscanf(line, "%llu,%*[^,],%*[^,],%31[^,],%llu,%llu", &run, act, &addr, &size) != 4) {
            fprintf(stderr, "heap-replay: %s:%zu: not a device event\n", name, no);
            return -1;
        }
        int take = !strcmp(act, "segment_alloc");
        if (!take && strcmp(act, "segment_free")) {
            fprintf(stderr, "heap-replay: %s:%zu: %s: the log of a policy that maps pages into "
                            "reservations it does not show\n", name, no, act);
            return -1;
        }
        if (as_grow((void **)&out->c, &out->cap, out->n + 1, sizeof *out->c, 4096)) {
            fprintf(stderr, "heap-replay: out of memory\n");
            return -1;
        }
        out->c[out->n++] = (call){.addr = addr, .size = size, .run = (uint32_t)run, .take = take};
    }
    return 0;
}

/* One replay of every call; the count of wrong ones (the first few on stderr), or -1 when
 * the heap ran out of host memory. */
static long replay(const log_calls *lg, int quiet)
{
    as_chunked *h = NULL;
    long wrong = 0;
    for (size_t i = 0; i < lg->n; i++) {
        const call *c = &lg->c[i];
        if (!h || (i && c->run != lg->c[i - 1].run)) {
            as_chunked_destroy(h);
            if (as_chunked_create(2ull << 20, &h))
                return -1;
        }
        uint64_t a = 0;
        int rc = c->take ? as_chunked_take(h, c->size, 0, &a) : as_chunked_give(h, c->addr, c->size, 0);
        if (!rc && (!c->take || a == c->addr))
            continue;
        if (!quiet && wrong < 5)
            fprintf(stderr, "heap-replay: call %zu (run %u): %s of %llu bytes: rc %d, address %#llx, "
                            "the log's %#llx\n", i, c->run, c->take ? "take" : "give",
                    (unsigned long long)c->size, rc, (unsigned long long)a,
                    (unsigned long long)c->addr);
        wrong++;
    }
    as_chunked_destroy(h);
    return wrong;
}

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    int reps = 1;
    if (argc == 4 && !strcmp(argv[1], "--reps"))
        reps = atoi(argv[2]);
    if ((argc != 2 && argc != 4) || reps < 1) {
        fprintf(stderr, "usage: heap-replay [--reps N] LOG   (LOG: allocsim run --segments's "
                        "CSV, '-' for stdin)\n");
        return 2;
    }
    const char *name = argv[argc - 1];
    FILE *f = strcmp(name, "-") ? fopen(name, "r") : stdin;
    if (!f) {
        perror(name);
        return 2;
    }
    log_calls lg = {0};
    int rc = log_read(f, name, &lg);
    if (f != stdin)
        fclose(f);
    if (rc) {
        free(lg.c);
        return 2;
    }
    long wrong = 0;
    double best = 0;
    for (int r = 0; r < reps && wrong >= 0; r++) {
        double t0 = cpu_now();
        wrong = replay(&lg, r > 0);
        double t = cpu_now() - t0;
        best = !r || t < best ? t : best;
    }
    if (wrong < 0)
        fprintf(stderr, "heap-replay: out of memory\n");
    else
        printf("%zu calls: %ld not as logged; best of %d: %.1f ns a call (CPU)\n", lg.n, wrong,
               reps, lg.n ? best * 1e9 / (double)lg.n : 0.0);
    free(lg.c);
    return wrong ? 1 : 0;
}
