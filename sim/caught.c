/*
 * caught.c - recognising cuDNN workspace requests by their frames, and a run's cached
 * fallbacks (caught.h).
 *
 * A workspace site is decided once per site of the trace's table, never per event: the
 * engine looks a flag up for each ALLOC of a trace that has such sites, and consults the
 * fallback set only at workspace requests.
 */
#include "caught.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

struct as_caught {
    uint32_t nsites, nws; /* the table's sites, the workspace ones among them */
    uint8_t *ws;          /* ws[site] for site 0..nsites */
};

/* Conv_v8.cpp's workspace allocations whose OutOfMemoryError is caught. The benchmark
 * search's (generate_and_filter_plans) halves its request instead, which this model does
 * not reproduce, so it is left out. */
static int workspace_frame(const char *name)
{
    static const char *const fns[] = {
        "at::native::run_conv_plan(",
        "at::native::run_conv_plan_fused(",
    };
    for (size_t i = 0; i < sizeof fns / sizeof *fns; i++)
        if (!strncmp(name, fns[i], strlen(fns[i])))
            return 1;
    return 0;
}

int as_caught_is_workspace(const as_sites *s, uint32_t site)
{
    const uint32_t *fids;
    size_t n = as_sites_stack(s, site, &fids);
    for (size_t i = 0; i < n; i++) {
        as_frame f;
        if (as_sites_frame(s, fids[i], &f) < 0 || !f.name)
            return 0;
        if (!as_frame_is_recorder(f.name))
            return workspace_frame(f.name);
    }
    return 0;
}

int as_caught_create(const as_sites *s, as_caught **out)
{
    *out = NULL;
    uint32_t n = as_sites_count(s);
    if (!n)
        return 0;
    as_caught *c = calloc(1, sizeof *c);
    if (!c || !(c->ws = calloc((size_t)n + 1, 1))) {
        free(c);
        return AS_ENOMEM;
    }
    c->nsites = n;
    for (uint32_t k = 1; k <= n; k++)
        if ((c->ws[k] = (uint8_t)as_caught_is_workspace(s, k)))
            c->nws++;
    if (!c->nws) {
        as_caught_destroy(c);
        return 0;
    }
    *out = c;
    return 0;
}

void as_caught_destroy(as_caught *c)
{
    if (c)
        free(c->ws);
    free(c);
}

int as_caught_site(const as_caught *c, uint32_t site)
{
    return c && site <= c->nsites && c->ws[site];
}

uint32_t as_caught_nsites(const as_caught *c)
{
    return c ? c->nws : 0;
}

/* ---- a run's fallbacks ---- */

static size_t slot_of(const as_caught_key *slot, size_t cap, uint32_t site, uint64_t size)
{
    uint64_t h = (size ^ ((uint64_t)site << 32 | site)) * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 17) & (cap - 1);
    while (slot[i].size && (slot[i].size != size || slot[i].site != site))
        i = (i + 1) & (cap - 1);
    return i;
}

int as_caught_fallen(const as_caught_run *r, uint32_t site, uint64_t size)
{
    return r->cap && r->slot[slot_of(r->slot, r->cap, site, size)].size != 0;
}

/* Doubles the table (first 64 slots), rehashing the keys: load stays at most 1/2. */
static int grow(as_caught_run *r)
{
    size_t cap = r->cap ? r->cap * 2 : 64;
    as_caught_key *s = calloc(cap, sizeof *s);
    if (!s)
        return AS_ENOMEM;
    for (size_t i = 0; i < r->cap; i++)
        if (r->slot[i].size)
            s[slot_of(s, cap, r->slot[i].site, r->slot[i].size)] = r->slot[i];
    free(r->slot);
    r->slot = s;
    r->cap = cap;
    return 0;
}

int as_caught_add(as_caught_run *r, uint32_t site, uint64_t size)
{
    if (!size || as_caught_fallen(r, site, size))
        return 0;
    if (2 * (r->n + 1) > r->cap && grow(r))
        return AS_ENOMEM;
    r->slot[slot_of(r->slot, r->cap, site, size)] = (as_caught_key){.size = size, .site = site};
    r->n++;
    return 0;
}

void as_caught_run_free(as_caught_run *r)
{
    free(r->slot);
    *r = (as_caught_run){0};
}
