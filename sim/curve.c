/*
 * curve.c - curve mode (curve.h): a run over an interval of grid capacities that forks
 * where a capacity question splits the interval.
 *
 * Each process owns [lo, hi] of the grid. Its simulated device answers capacity questions
 * through the oracle below: the answer at grid[lo] and at grid[hi]; equal answers hold for
 * the whole interval (the questions are monotone), different ones split it at the first
 * capacity where the answer is yes (binary search with the same question) and fork: the
 * child takes the yes side, the parent keeps the no side. Tokens (a process-shared
 * semaphore) bound the processes running at once; a process that finds none hands its own
 * to the child and waits for it. Every process gives its token back when its run ends and
 * reaps its children before it exits, so when the first process has reaped its own, every
 * leaf has written its results.
 */
#include "curve.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "grow.h"

/* Shared by every process of one curve (MAP_SHARED | MAP_ANONYMOUS, made before the first
 * fork); the results and their flags follow it. */
typedef struct shared {
    sem_t tokens;
    atomic_int failed, stopped;
    int code;
    char msg[300];
} shared;

typedef struct curve {
    const as_policy_spec *spec;
    const as_simdev_params *dev_params;
    const uint64_t *grid;
    size_t lo, hi;
    shared *sh;
    as_run_result *res;
    unsigned char *done;
    int child;
    int split_once; /* this curve has split: a later pin still shares a prefix */
    int pin, pinned;
    int err; /* a split that failed inside pin (capacity() cannot return an error) */
    pid_t *kids;
    size_t nkids, capkids;
} curve;

static void fail(curve *c, int code, const char *msg)
{
    int no = 0;
    if (!atomic_compare_exchange_strong(&c->sh->failed, &no, 1))
        return;
    c->sh->code = code;
    snprintf(c->sh->msg, sizeof c->sh->msg, "%s", msg);
}

static void token_take(shared *sh)
{
    while (sem_wait(&sh->tokens) && errno == EINTR)
        ;
}

/* Waits for pid; 0 when it exited with status 0. */
static int reap(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void reap_kids(curve *c)
{
    for (size_t i = 0; i < c->nkids; i++)
        if (reap(c->kids[i]))
            fail(c, AS_EDEVICE, "a process of the curve failed");
    c->nkids = 0;
}

/* Forks: the child goes on with [k, hi], the parent with [lo, k-1]. Returns 0 in both, or
 * AS_ENOMEM when no process can be made (the interval is then unchanged). */
static int split(curve *c, size_t k)
{
    int token = sem_trywait(&c->sh->tokens) == 0;
    int keep = token && (c->nkids < c->capkids || !as_grow((void **)&c->kids, &c->capkids,
                                                           c->nkids + 1, sizeof *c->kids, 16));
    c->split_once = 1;
    /* Output the caller buffered (the start of a JSON report) would otherwise be in the
     * child's copy of the buffer too and could come out twice: ThreadSanitizer's _exit
     * flushes it. */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        if (token)
            sem_post(&c->sh->tokens);
        return AS_ENOMEM;
    }
    if (pid == 0) {
        c->child = 1;
        c->nkids = 0;
        c->lo = k;
        return 0;
    }
    c->hi = k - 1;
    if (keep) {
        c->kids[c->nkids++] = pid;
        return 0;
    }
    if (token) /* no room to remember it: run it as if there were no token */
        sem_post(&c->sh->tokens);
    /* the child runs on this process's token; this one waits and then takes one again */
    if (reap(pid))
        fail(c, AS_EDEVICE, "a process of the curve failed");
    token_take(c->sh);
    return 0;
}

static int oracle_ask(void *user, as_cap_pred pred, const void *arg, int *yes)
{
    curve *c = user;
    if (c->pinned) /* the run is given up: end it soon */
        return AS_EUSAGE;
    int a = pred(arg, c->grid[c->lo]) != 0;
    if (c->lo == c->hi || a == (pred(arg, c->grid[c->hi]) != 0)) {
        *yes = a;
        return 0;
    }
    if (a) /* yes below, no above: not a monotone question */
        return AS_EINVAL;
    size_t no = c->lo, is = c->hi; /* pred(grid[no]) == 0, pred(grid[is]) == 1 */
    while (is - no > 1) {
        size_t m = no + (is - no) / 2;
        if (pred(arg, c->grid[m]))
            is = m;
        else
            no = m;
    }
    int rc = split(c, is);
    if (rc)
        return rc;
    *yes = c->lo >= is;
    return 0;
}

/* The number itself: one child per other capacity of the interval, this process keeps lo. */
static void oracle_pin(void *user, uint64_t *capacity)
{
    curve *c = user;
    if (c->lo < c->hi && !c->split_once && !c->pin)
        c->pinned = 1;
    while (c->lo < c->hi && !c->err && !c->pinned)
        c->err = split(c, c->hi);
    *capacity = c->grid[c->lo];
}

/* ---- the device factory: a simulated device carrying the interval --------------------- */

static int dev_create(void *user, uint64_t capacity, as_device *out, void **handle)
{
    curve *c = user;
    as_simdev_params p;
    if (c->dev_params)
        p = *c->dev_params;
    else
        as_simdev_default_params(&p);
    as_simdev_set_capacity(&p, capacity, c->spec->policy->flags);
    as_simdev *d;
    int rc = as_simdev_create(&p, &d);
    if (rc)
        return rc;
    as_cap_oracle o = {.ask = oracle_ask, .pin = oracle_pin, .user = c};
    as_simdev_set_oracle(d, &o);
    *out = *as_simdev_device(d);
    *handle = d;
    return 0;
}

static void dev_destroy(void *user, void *handle)
{
    (void)user;
    as_simdev_destroy(handle);
}

static void dev_counters(void *user, void *handle, as_dev_counters *out)
{
    (void)user;
    as_simdev_counters_get(handle, out);
}

static void dev_set_log(void *user, void *handle, as_dev_log_fn fn, void *log_user)
{
    (void)user;
    as_simdev_set_log(handle, fn, log_user);
}

/* ---- one process's end ------------------------------------------------------------------ */

/* Writes this process's results (or its failure), gives its token back, reaps its
 * children. */
static void finish(curve *c, as_engine *e, int rc)
{
    if (c->pinned) { /* only the first process can pin before any split */
        sem_post(&c->sh->tokens);
        return;
    }
    if (rc == 0 && c->err)
        rc = c->err;
    if (rc == 0) {
        const as_run_result *r = as_engine_result(e, 0);
        for (size_t i = c->lo; i <= c->hi; i++) {
            c->res[i] = *r;
            c->res[i].capacity = c->grid[i];
            c->res[i].wall_s = c->res[i].cpu_s = c->res[i].events_per_second = 0;
            c->done[i] = 1;
        }
    } else if (rc == AS_ENGINE_STOPPED) {
        atomic_store(&c->sh->stopped, 1);
    } else {
        fail(c, rc,
             rc == AS_ENOMEM && c->err ? "cannot fork a process of the curve"
                                       : as_engine_errmsg(e));
    }
    sem_post(&c->sh->tokens);
    reap_kids(c);
}

int as_curve_run(const as_policy_spec *spec, const uint64_t *grid, size_t n, const as_event *evs,
                 size_t nev, const as_curve_opts *opts, as_run_result *out, char *why,
                 size_t why_len)
{
    static const as_curve_opts defaults = {0};
    const as_curve_opts *o = opts ? opts : &defaults;
    if (n == 0)
        return 0;
    size_t bytes = sizeof(shared) + n * sizeof(as_run_result) + n;
    void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        snprintf(why, why_len, "cannot map %zu bytes shared by the curve's processes", bytes);
        return AS_ENOMEM;
    }
    curve c = {.spec = spec,
               .dev_params = o->dev_params,
               .grid = grid,
               .pin = o->pin,
               .lo = 0,
               .hi = n - 1,
               .sh = map,
               .res = (as_run_result *)((char *)map + sizeof(shared)),
               .done = (unsigned char *)map + sizeof(shared) + n * sizeof(as_run_result)};
    if (sem_init(&c.sh->tokens, 1, (o->procs ? o->procs : 1) - 1)) {
        munmap(map, bytes);
        snprintf(why, why_len, "cannot make the curve's process semaphore");
        return AS_ENOMEM;
    }
#ifdef __GLIBC__
    /* every fork copies the page tables of what the heap still maps: tune's process after
     * its 252 runs made each fork several times dearer (23 s of system time, 5 s with it) */
    malloc_trim(0);
#endif
    as_device_factory f = {.create = dev_create,
                           .destroy = dev_destroy,
                           .counters = dev_counters,
                           .set_log = dev_set_log,
                           .user = &c};
    as_engine_opts eo = {.threads = 1,
                         .factory = &f,
                         .stop = o->stop,
                         .sites = o->sites,
                         .no_caught_ooms = o->no_caught_ooms,
                         .streams = o->streams};
    as_engine *e = NULL;
    as_trace_error terr;
    int rc = as_engine_create(&eo, &e);
    if (rc == 0) {
        rc = as_engine_add_run(e, spec, grid[0]);
        if (rc >= 0)
            rc = as_engine_run_slotted(e, evs, nev, &terr);
    }
    if (!e) {
        snprintf(why, why_len, "cannot create the engine");
        sem_destroy(&c.sh->tokens);
        munmap(map, bytes);
        return rc;
    }
    finish(&c, e, rc);
    if (c.child) /* a leaf's work is in the shared map; nothing else of it matters */
        _exit(atomic_load(&c.sh->failed) ? 1 : 0);
    as_engine_destroy(e);
    free(c.kids);
    rc = 0;
    if (c.pinned) {
        rc = AS_CURVE_PINNED;
    } else if (atomic_load(&c.sh->failed)) {
        rc = c.sh->code < 0 ? c.sh->code : AS_EDEVICE;
        snprintf(why, why_len, "%s", c.sh->msg);
    } else if (atomic_load(&c.sh->stopped)) {
        rc = AS_ENGINE_STOPPED;
    } else {
        for (size_t i = 0; i < n; i++)
            if (!c.done[i]) {
                rc = AS_EDEVICE;
                snprintf(why, why_len, "the curve left capacity %zu of %zu without a result", i, n);
                break;
            }
        if (rc == 0)
            memcpy(out, c.res, n * sizeof *out);
    }
    sem_destroy(&c.sh->tokens);
    munmap(map, bytes);
    return rc;
}
