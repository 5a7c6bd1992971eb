/*
 * test_gmlake.c - GMLake's rules on hand-built sequences: PyTorch 2.0's sizes over 2 MiB
 * chunks, stitching of free blocks that are not contiguous without physical memory, the
 * reuse of a cached stitched block (whole only, within reuseLimit), its fragmented state
 * while another block uses one of its chunks, fragLimit, the paper's S4 (reAlloc) and
 * empty_cache. Every figure follows from those rules (policies/gmlake.c's comment).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/policy_harness.h"
#include "util.h"

#define MIB PH_MIB

/* One 60 MiB segment cut into A, B, C of 20 MiB; A and C freed: 40 MiB free in two
 * pieces that no single block covers. Returns B's address (its id in *b). */
static uint64_t two_holes(ph *t, uint64_t *a, uint64_t *b, uint64_t *c)
{
    uint64_t x;
    CU_ASSERT_NOT_EQUAL_FATAL(ph_alloc(t, 60 * MIB, &x), 0);
    CU_ASSERT_EQUAL(ph_free(t, x, 0), 0);
    uint64_t pa = ph_alloc(t, 20 * MIB, a), pb = ph_alloc(t, 20 * MIB, b);
    uint64_t pc = ph_alloc(t, 20 * MIB, c);
    CU_ASSERT(pa && pb == pa + 20 * MIB && pc == pb + 20 * MIB); /* split in address order */
    CU_ASSERT_EQUAL(ph_free(t, *a, 0), 0);
    CU_ASSERT_EQUAL(ph_free(t, *c, 0), 0);
    CU_ASSERT_EQUAL(ph_stats(t).reserved, 60 * MIB);
    return pb;
}

static void gm_sizes(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "gmlake", AS_CAPACITY_NONE) == 0);
    uint64_t i;
    as_block b;
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 1, 0, &i, &b), 0);
    CU_ASSERT_EQUAL(b.size, 512); /* small pool: 512 B blocks of a 2 MiB cudaMalloc */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 2 * MIB);
    CU_ASSERT_EQUAL(ph_dev(&t).reserves, 1);
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 5 * MIB, 0, &i, &b), 0);
    CU_ASSERT_EQUAL(b.size, 6 * MIB); /* large: rounded to 2 MiB, from a 20 MiB segment */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 22 * MIB);
    CU_ASSERT_EQUAL(ph_dev(&t).maps, 1); /* pBlocks are mapped chunks, not cudaMalloc */
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 11 * MIB + 1, 0, &i, &b), 0);
    CU_ASSERT_EQUAL(b.size, 12 * MIB); /* the 14 MiB left of the segment */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 22 * MIB);
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 15 * MIB + 1, 0, &i, &b), 0);
    CU_ASSERT_EQUAL(b.size, 16 * MIB); /* 10 MiB and up: a segment of the rounded size */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 38 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* The 40 MiB request at a 60 MiB capacity: stitched from A and C, no new memory. Without
 * stitching (or below fragLimit) the split segment cannot be given back: OOM. */
static void gm_stitch_without_memory(void)
{
    const char *specs[] = {"gmlake,fraglimit=40M", "gmlake,stitch=false", "gmlake"};
    for (int k = 0; k < 3; k++) {
        ph t;
        CU_ASSERT_FATAL(ph_open(&t, specs[k], 60 * MIB) == 0);
        uint64_t a, b, c, d;
        uint64_t pb = two_holes(&t, &a, &b, &c);
        uint64_t pd = ph_alloc(&t, 40 * MIB, &d);
        as_policy_stats s = ph_stats(&t);
        if (k == 0) {
            CU_ASSERT(pd != 0 && (pd + 40 * MIB <= pb - 20 * MIB || pd >= pb + 40 * MIB));
            CU_ASSERT_EQUAL(s.reserved, 60 * MIB);
            CU_ASSERT_EQUAL(s.allocated, 60 * MIB);
            CU_ASSERT_EQUAL(s.free_bytes, 0);
            CU_ASSERT_EQUAL(ph_dev(&t).maps, 1);    /* the stitched range maps no new page */
            CU_ASSERT_EQUAL(ph_dev(&t).aliases, 2); /* it maps C's chunks, then A's, again */
        } else {
            CU_ASSERT_EQUAL(pd, 0); /* OOM */
            CU_ASSERT_EQUAL(s.reserved, 60 * MIB);
        }
        CU_ASSERT_EQUAL(ph_check(&t), 0);
        ph_close(&t);
    }
}

/* A freed stitched block stays cached whole and serves the next request of its size at
 * the same address; once another block uses one of its chunks it is fragmented and
 * serves nothing until that block is freed. */
static void gm_reuse_and_fragmented(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "gmlake,fraglimit=40M", 60 * MIB) == 0);
    uint64_t a, b, c, d, e, f, g;
    uint64_t pb = two_holes(&t, &a, &b, &c);
    uint64_t pd = ph_alloc(&t, 40 * MIB, &d);
    CU_ASSERT_EQUAL(ph_free(&t, d, 0), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).allocated, 20 * MIB);
    CU_ASSERT_EQUAL(ph_alloc(&t, 40 * MIB, &e), pd); /* the cached sBlock */
    CU_ASSERT_EQUAL(ph_free(&t, e, 0), 0);
    CU_ASSERT_EQUAL(ph_alloc(&t, 20 * MIB, &f), pb - 20 * MIB); /* best fit: A's chunks */
    CU_ASSERT_EQUAL(ph_alloc(&t, 40 * MIB, &g), 0); /* fragmented, and C alone is 20 MiB */
    CU_ASSERT_EQUAL(ph_free(&t, f, 0), 0);          /* A's chunks free again: cached whole */
    CU_ASSERT_EQUAL(ph_alloc(&t, 40 * MIB, &g), pd);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 60 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* A cached sBlock serves a smaller request with its first chunks (C's, then A's, as it
 * stitched them: the largest block first, the higher address among equals); the free
 * rest of A is a block of its own that serves others. */
static void gm_partial_reuse(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "gmlake,fraglimit=40M", 60 * MIB) == 0);
    uint64_t a, b, c, d, e, h, i;
    uint64_t pb = two_holes(&t, &a, &b, &c);
    uint64_t pd = ph_alloc(&t, 40 * MIB, &d);
    CU_ASSERT_EQUAL(ph_free(&t, d, 0), 0);
    as_block be;
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 30 * MIB, 0, &e, &be), 0);
    CU_ASSERT_EQUAL(be.addr, pd);
    CU_ASSERT_EQUAL(be.size, 30 * MIB); /* 10 chunks of C, 5 of A */
    CU_ASSERT_EQUAL(ph_stats(&t).largest_free, 10 * MIB);
    CU_ASSERT_EQUAL(ph_alloc(&t, 10 * MIB, &h), pb - 10 * MIB); /* A's last 10 MiB */
    CU_ASSERT_EQUAL(ph_stats(&t).free_bytes, 0);
    CU_ASSERT_EQUAL(ph_free(&t, e, 0), 0);
    CU_ASSERT_EQUAL(ph_alloc(&t, 20 * MIB, &i), pb + 20 * MIB); /* C is a block again */
    CU_ASSERT_EQUAL(ph_free(&t, i, 0), 0);
    CU_ASSERT_EQUAL(ph_free(&t, h, 0), 0); /* A's halves merge */
    CU_ASSERT_EQUAL(ph_alloc(&t, 20 * MIB, &i), pb - 20 * MIB);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 60 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* reuseLimit 1: the cached 40 MiB sBlock does not serve 30 MiB; a new segment does. */
static void gm_reuse_limit(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "gmlake,fraglimit=40M,reuselimit=1", AS_CAPACITY_NONE) == 0);
    uint64_t a, b, c, d, e;
    two_holes(&t, &a, &b, &c);
    uint64_t pd = ph_alloc(&t, 40 * MIB, &d);
    CU_ASSERT_EQUAL(ph_free(&t, d, 0), 0);
    uint64_t pe = ph_alloc(&t, 30 * MIB, &e);
    CU_ASSERT(pe != 0 && pe != pd);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 90 * MIB);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* reAlloc (the paper's S4): 60 MiB with 40 MiB free at an 80 MiB capacity: a new 20 MiB
 * block stitched with the two holes; without it the 60 MiB segment does not fit. */
static void gm_realloc(void)
{
    const char *specs[] = {"gmlake,fraglimit=40M,realloc=true", "gmlake,fraglimit=40M"};
    for (int k = 0; k < 2; k++) {
        ph t;
        CU_ASSERT_FATAL(ph_open(&t, specs[k], 80 * MIB) == 0);
        uint64_t a, b, c, d;
        two_holes(&t, &a, &b, &c);
        uint64_t pd = ph_alloc(&t, 60 * MIB, &d);
        CU_ASSERT_EQUAL(pd != 0, k == 0);
        CU_ASSERT_EQUAL(ph_stats(&t).reserved, k == 0 ? 80 * MIB : 60 * MIB);
        CU_ASSERT_EQUAL(ph_check(&t), 0);
        ph_close(&t);
    }
}

/* empty_cache gives back whole free segments and drops cached sBlocks' ranges. */
static void gm_empty_cache(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "gmlake,fraglimit=40M", AS_CAPACITY_NONE) == 0);
    uint64_t a, b, c, d;
    two_holes(&t, &a, &b, &c);
    ph_alloc(&t, 40 * MIB, &d);
    CU_ASSERT_EQUAL(ph_free(&t, d, 0), 0);
    CU_ASSERT_EQUAL(ph_dev(&t).unaliases, 0); /* cached with its mapping */
    CU_ASSERT_EQUAL(t.p->empty_cache(t.st), 0);
    CU_ASSERT_EQUAL(ph_dev(&t).unaliases, 1);         /* dropped: its range unmapped at once */
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 60 * MIB); /* B pins the segment */
    CU_ASSERT_EQUAL(ph_free(&t, b, 0), 0);
    CU_ASSERT_EQUAL(t.p->empty_cache(t.st), 0);
    CU_ASSERT_EQUAL(ph_stats(&t).reserved, 0);
    CU_ASSERT_EQUAL(ph_dev(&t).unmaps, 1);
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* ---- the device contract, page by page ------------------------------------------------- */

/* A device over the simulated one that knows every page of every reservation: unmapped,
 * its own (map) or an alias of another's (alias), and how many aliases an own page has.
 * It refuses, and counts, every call the contract (device.h) forbids, as the CUDA device
 * does: a map over mapped pages, an alias of pages that are not own or onto mapped ones,
 * an unmap of an alias or of a page an alias still maps, an unalias of pages that are not
 * aliases, a va_release with pages mapped. */
#define PD_RANGES 4096

typedef struct pd_range {
    uint64_t addr, n; /* n pages of 2 MiB */
    uint8_t *kind;    /* 0 unmapped, 1 own, 2 alias */
    uint64_t *src;    /* alias: the page it maps */
    uint32_t *nalias; /* own: its aliases */
} pd_range;

typedef struct pagedev {
    as_device dev, inner;
    pd_range r[PD_RANGES];
    size_t nr;
    unsigned bad, aliases, unaliases, single_unaliases;
    unsigned refuse_every, calls, refused; /* alias: AS_DEV_OOM every refuse_every-th call */
} pagedev;

#define PD_PAGE AS_DEV_GRANULARITY

/* The range holding [addr, addr+size) and its first page, or NULL. */
static pd_range *pd_find(pagedev *d, uint64_t addr, uint64_t size, uint64_t *first)
{
    for (size_t i = 0; i < d->nr; i++) {
        pd_range *r = &d->r[i];
        if (addr >= r->addr && addr + size <= r->addr + r->n * PD_PAGE && addr % PD_PAGE == 0 &&
            size % PD_PAGE == 0 && size) {
            *first = (addr - r->addr) / PD_PAGE;
            return r;
        }
    }
    return NULL;
}

static int pd_bad(pagedev *d)
{
    d->bad++;
    return AS_EINVAL;
}

static int pd_reserve(void *c, uint64_t size, uint64_t *addr)
{
    pagedev *d = c;
    return d->inner.ops->reserve(d->inner.ctx, size, addr);
}

static int pd_release(void *c, uint64_t addr, uint64_t size)
{
    pagedev *d = c;
    return d->inner.ops->release(d->inner.ctx, addr, size);
}

static int pd_va_reserve(void *c, uint64_t size, uint64_t *addr)
{
    pagedev *d = c;
    int rc = d->inner.ops->va_reserve(d->inner.ctx, size, addr);
    if (rc || d->nr == PD_RANGES)
        return rc ? rc : pd_bad(d);
    pd_range *r = &d->r[d->nr++];
    *r = (pd_range){.addr = *addr, .n = size / PD_PAGE};
    r->kind = calloc(r->n, 1);
    r->src = calloc(r->n, sizeof *r->src);
    r->nalias = calloc(r->n, sizeof *r->nalias);
    return r->kind && r->src && r->nalias ? 0 : AS_ENOMEM;
}

static int pd_va_release(void *c, uint64_t addr, uint64_t size)
{
    pagedev *d = c;
    uint64_t f;
    pd_range *r = pd_find(d, addr, size, &f);
    if (!r || r->addr != addr || r->n * PD_PAGE != size)
        return pd_bad(d);
    for (uint64_t i = 0; i < r->n; i++)
        if (r->kind[i])
            return pd_bad(d);
    free(r->kind);
    free(r->src);
    free(r->nalias);
    *r = d->r[--d->nr];
    return d->inner.ops->va_release(d->inner.ctx, addr, size);
}

static int pd_map(void *c, uint64_t addr, uint64_t size)
{
    pagedev *d = c;
    uint64_t f;
    pd_range *r = pd_find(d, addr, size, &f);
    for (uint64_t i = 0; r && i < size / PD_PAGE; i++)
        if (r->kind[f + i])
            r = NULL;
    if (!r)
        return pd_bad(d);
    int rc = d->inner.ops->map(d->inner.ctx, addr, size);
    if (!rc)
        memset(r->kind + f, 1, size / PD_PAGE);
    return rc;
}

static int pd_unmap(void *c, uint64_t addr, uint64_t size)
{
    pagedev *d = c;
    uint64_t f;
    pd_range *r = pd_find(d, addr, size, &f);
    for (uint64_t i = 0; r && i < size / PD_PAGE; i++)
        if (r->kind[f + i] != 1 || r->nalias[f + i])
            r = NULL;
    if (!r)
        return pd_bad(d);
    memset(r->kind + f, 0, size / PD_PAGE);
    return d->inner.ops->unmap(d->inner.ctx, addr, size);
}

static int pd_alias(void *c, uint64_t dst, uint64_t src, uint64_t size)
{
    pagedev *d = c;
    uint64_t df, sf;
    pd_range *dr = pd_find(d, dst, size, &df), *sr = pd_find(d, src, size, &sf);
    for (uint64_t i = 0; dr && sr && i < size / PD_PAGE; i++)
        if (dr->kind[df + i] || sr->kind[sf + i] != 1)
            dr = NULL;
    if (!dr || !sr || dr == sr)
        return pd_bad(d);
    if (d->refuse_every && ++d->calls % d->refuse_every == 0) { /* the driver's refusal */
        d->refused++;
        return AS_DEV_OOM;
    }
    for (uint64_t i = 0; i < size / PD_PAGE; i++) {
        dr->kind[df + i] = 2;
        dr->src[df + i] = src + i * PD_PAGE;
        sr->nalias[sf + i]++;
    }
    d->aliases++;
    return d->inner.ops->alias(d->inner.ctx, dst, src, size);
}

static int pd_unalias(void *c, uint64_t addr, uint64_t size)
{
    pagedev *d = c;
    uint64_t f, sf;
    pd_range *r = pd_find(d, addr, size, &f);
    for (uint64_t i = 0; r && i < size / PD_PAGE; i++)
        if (r->kind[f + i] != 2)
            r = NULL;
    if (!r)
        return pd_bad(d);
    for (uint64_t i = 0; i < size / PD_PAGE; i++) {
        pd_range *s = pd_find(d, r->src[f + i], PD_PAGE, &sf);
        if (!s || !s->nalias[sf])
            return pd_bad(d);
        s->nalias[sf]--;
        r->kind[f + i] = 0;
    }
    d->unaliases++;
    d->single_unaliases += size == PD_PAGE;
    return d->inner.ops->unalias(d->inner.ctx, addr, size);
}

static uint64_t pd_capacity(void *c)
{
    pagedev *d = c;
    return d->inner.ops->capacity(d->inner.ctx);
}

static uint64_t pd_reserved(void *c)
{
    pagedev *d = c;
    return d->inner.ops->reserved(d->inner.ctx);
}

static int pd_cap_test(void *c, as_cap_pred pred, const void *arg, int *yes)
{
    pagedev *d = c;
    return d->inner.ops->cap_test(d->inner.ctx, pred, arg, yes);
}

static const as_device_ops pd_ops = {
    .abi = AS_DEVICE_ABI,
    .reserve = pd_reserve,
    .release = pd_release,
    .va_reserve = pd_va_reserve,
    .va_release = pd_va_release,
    .map = pd_map,
    .unmap = pd_unmap,
    .alias = pd_alias,
    .unalias = pd_unalias,
    .capacity = pd_capacity,
    .reserved = pd_reserved,
    .cap_test = pd_cap_test,
};

/* ph_open with the policy over d, itself over the simulated device ph_open made. */
static int pd_open(ph *t, pagedev *d, const char *spec, uint64_t capacity)
{
    if (ph_open(t, spec, capacity))
        return -1;
    t->p->fini(t->st);
    memset(t->st, 0, t->p->state_size);
    memset(d, 0, sizeof *d);
    d->inner = *as_simdev_device(t->dev);
    d->dev = (as_device){.ops = &pd_ops, .ctx = d};
    return t->p->init(t->st, t->spec.values, &d->dev);
}

/* Random lives under pressure, with empty_cache now and then: GMLake stitches, reuses and
 * drops sBlocks, and releases segments some of whose chunks an active sBlock maps past
 * what it serves. No call breaks the contract, and after fini nothing is left. The last
 * run's device refuses every third alias (the driver's AS_DEV_OOM): the stitch is undone
 * and the ladder goes on, every invariant holding. */
static void gm_device_contract(void)
{
    static const char *const specs[] = {"gmlake,fraglimit=2M", "gmlake,fraglimit=2M,realloc=true",
                                        "gmlake,fraglimit=2M,maxsplit=64",
                                        "gmlake,fraglimit=2M,autogc=0", "gmlake,fraglimit=2M"};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        ph t;
        pagedev *d = malloc(sizeof *d);
        CU_ASSERT_FATAL(d && pd_open(&t, d, specs[k], 1024 * MIB) == 0);
        d->refuse_every = k == 4 ? 3 : 0;
        uint64_t live[64] = {0}, x = 88172645463325252ull + k;
        unsigned ooms = 0;
        for (int step = 0; step < 4000; step++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
            size_t i = (size_t)(x % 64);
            if (live[i]) {
                CU_ASSERT_EQUAL(ph_free(&t, live[i] - 1, 0), 0);
                live[i] = 0;
            } else {
                uint64_t id, size = (x >> 8) % (x >> 40 & 1 ? 160 * MIB : 24 * MIB) + 1;
                as_block b;
                int rc = ph_alloc_id(&t, size, 0, &id, &b);
                CU_ASSERT(rc == 0 || rc == AS_POLICY_OOM);
                live[i] = rc == 0 ? id + 1 : 0;
                ooms += rc == AS_POLICY_OOM;
            }
            if (step % 500 == 499)
                CU_ASSERT_EQUAL(t.p->empty_cache(t.st), 0);
            if (step % 200 == 0)
                CU_ASSERT_EQUAL(ph_check(&t), 0);
        }
        CU_ASSERT(ooms > 0);        /* under pressure */
        CU_ASSERT(d->aliases > 10); /* it stitched */
        CU_ASSERT_EQUAL(d->bad, 0);
        t.p->fini(t.st);
        CU_ASSERT_EQUAL(d->bad, 0);
        CU_ASSERT_EQUAL(d->nr, 0); /* every reservation back */
        CU_ASSERT(d->unaliases > 0);
        CU_ASSERT_EQUAL(d->refused > 0, k == 4);
        fprintf(stderr, "\n  %s: %u aliases, %u unaliases (%u of one page), %u refused, %u OOMs",
                specs[k], d->aliases, d->unaliases, d->single_unaliases, d->refused, ooms);
        free(t.st);
        t.st = NULL;
        as_simdev_destroy(t.dev);
        as_policy_spec_free(&t.spec);
        free(t.blk);
        free(d);
    }
}

CU_TestInfo test_gmlake[] = {
    {"sizes", gm_sizes},
    {"stitch_without_memory", gm_stitch_without_memory},
    {"reuse_and_fragmented", gm_reuse_and_fragmented},
    {"partial_reuse", gm_partial_reuse},
    {"reuse_limit", gm_reuse_limit},
    {"realloc", gm_realloc},
    {"empty_cache", gm_empty_cache},
    {"device_contract", gm_device_contract},
    CU_TEST_INFO_NULL,
};
