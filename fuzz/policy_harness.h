/*
 * policy_harness.h - drives one policy instance directly over a simulated device, with
 * no engine: open from a spec text and a capacity, alloc/free by allocation id, stats,
 * check (printing the violation), close. Shared by the policy suites; static inline so
 * that it needs no build rule.
 */
#ifndef AS_FUZZ_POLICY_HARNESS_H
#define AS_FUZZ_POLICY_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lifetimes.h"
#include "policy.h"
#include "simdev.h"

#define PH_MIB (1ull << 20)

typedef struct ph {
    as_simdev *dev;
    as_policy_spec spec;
    const as_policy *p;
    void *st;
    as_block *blk; /* by allocation id */
    size_t nblk;
    uint64_t next_id;
} ph;

/* Opens over a device with the given placement rule (as_placement). */
static inline int ph_open_placed(ph *t, const char *spec, uint64_t capacity, int placement)
{
    char why[256];
    memset(t, 0, sizeof *t);
    if (as_policy_spec_parse(spec, &t->spec, why, sizeof why)) {
        fprintf(stderr, "\n  spec '%s': %s\n", spec, why);
        return -1;
    }
    t->p = t->spec.policy;
    as_simdev_params p;
    as_simdev_default_params(&p);
    as_simdev_set_capacity(&p, capacity, t->p->flags);
    p.placement = (as_placement)placement;
    if (as_simdev_create(&p, &t->dev)) {
        as_policy_spec_free(&t->spec);
        return -1;
    }
    t->st = calloc(1, t->p->state_size ? t->p->state_size : 1);
    int rc = t->st ? t->p->init(t->st, t->spec.values, as_simdev_device(t->dev)) : -1;
    if (rc) {
        fprintf(stderr, "\n  init '%s': %d\n", spec, rc);
        free(t->st);
        as_simdev_destroy(t->dev);
        as_policy_spec_free(&t->spec);
        return -1;
    }
    return 0;
}

/* An offline policy (as_policy_offline) is given the lifetimes of evs[0..n), the events
 * the caller then replays, as the engine gives them; an online one is left alone. Returns
 * 0, or the plan's or the host's error. */
static inline int ph_plan(ph *t, const as_event *evs, size_t n)
{
    if (!as_policy_offline(t->p))
        return 0;
    as_lifetime *lt;
    size_t nl;
    int rc = as_lifetimes_of(evs, n, &lt, &nl);
    if (rc == 0)
        rc = t->p->plan(t->st, lt, nl);
    free(lt);
    return rc;
}

/* Low first-fit placement: tests work addresses out upward from AS_SIMDEV_BASE. */
static inline int ph_open(ph *t, const char *spec, uint64_t capacity)
{
    return ph_open_placed(t, spec, capacity, AS_PLACE_LOW_FIRST_FIT);
}

static inline void ph_close(ph *t)
{
    if (!t->p)
        return;
    if (t->p->fini)
        t->p->fini(t->st);
    free(t->st);
    free(t->blk);
    as_simdev_destroy(t->dev);
    as_policy_spec_free(&t->spec);
    memset(t, 0, sizeof *t);
}

/* Allocates `size` as the next id (returned in *id); the block is remembered by id. */
static inline int ph_alloc_id(ph *t, uint64_t size, uint64_t stream, uint64_t *id, as_block *out)
{
    uint64_t i = t->next_id++;
    if (id)
        *id = i;
    if (i >= t->nblk) {
        size_t nc = t->nblk ? t->nblk * 2 : 64;
        as_block *nb = realloc(t->blk, nc * sizeof *nb);
        if (!nb)
            return -100;
        memset(nb + t->nblk, 0, (nc - t->nblk) * sizeof *nb);
        t->blk = nb;
        t->nblk = nc;
    }
    as_request r = {.id = i, .size = size, .stream = stream};
    as_block b = {0};
    int rc = t->p->alloc(t->st, &r, &b);
    if (rc == 0)
        t->blk[i] = b;
    if (out)
        *out = b;
    return rc;
}

/* The address of a fresh allocation of `size`, or 0 on OOM/error. */
static inline uint64_t ph_alloc(ph *t, uint64_t size, uint64_t *id)
{
    as_block b;
    return ph_alloc_id(t, size, 0, id, &b) == 0 ? b.addr : 0;
}

static inline int ph_free(ph *t, uint64_t id, unsigned flags)
{
    return t->p->free(t->st, t->blk[id].handle, flags);
}

static inline as_policy_stats ph_stats(ph *t)
{
    as_policy_stats s;
    t->p->stats(t->st, &s);
    return s;
}

static inline as_dev_counters ph_dev(ph *t)
{
    as_dev_counters c;
    as_simdev_counters_get(t->dev, &c);
    return c;
}

static inline int ph_check(ph *t)
{
    as_check_failure f = {{0}};
    int rc = t->p->check ? t->p->check(t->st, &f) : 0;
    if (rc)
        fprintf(stderr, "\n  check(%s): %s\n", t->spec.text, f.msg);
    return rc;
}

#endif
