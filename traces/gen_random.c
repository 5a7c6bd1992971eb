/*
 * gen_random.c - the classic synthetic baseline (Wilson et al. '95 style): sizes drawn
 * from a log-uniform range or a histogram, lifetimes from an exponential, uniform or fixed
 * distribution measured in events, and an optional cap on live bytes.
 *
 * Invariant: the only state is a min-heap of the live allocations keyed by (death, id),
 * so memory is proportional to the live set, and each event costs O(log live).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_impl.h"

enum {
    K_ALLOCS,
    K_MIN,
    K_MAX,
    K_SIZES,
    K_ALIGN,
    K_LIFE,
    K_LIFE_MEAN,
    K_CAP,
    K_STREAMS,
    K_MARK,
    K_EMPTY,
    K_DRAIN,
    K_DEFER,
    K_DEFER_EV,
    K_SEED,
    K_N
};
enum { LIFE_EXP, LIFE_UNIFORM, LIFE_FIXED };

static const gen_knob knobs[K_N] = {
    [K_ALLOCS] = {"allocs", GEN_U64, "1000000", "allocations", NULL, 0, 1e15,
                  "ALLOC events to emit (with drain=1 the trace has 2x this many events)"},
    [K_MIN] = {"min", GEN_SIZE, "512", "bytes", NULL, 1, 281474976710656.0,
               "smallest size of the log-uniform distribution"},
    [K_MAX] = {"max", GEN_SIZE, "64M", "bytes", NULL, 1, 281474976710656.0,
               "largest size of the log-uniform distribution"},
    [K_SIZES] = {"sizes", GEN_STR, "", "SIZE:WEIGHT,...", NULL, 0, 0,
                 "histogram instead of log-uniform, e.g. 4096:0.5,1M:0.3,64M:0.2 "
                 "(weights need not sum to 1)"},
    [K_ALIGN] = {"align", GEN_SIZE, "1", "bytes", NULL, 1, 1073741824.0,
                 "round every drawn size up to a multiple of this (1 = unrounded)"},
    [K_LIFE] = {"life", GEN_ENUM, "exp", "", "exp|uniform|fixed", 0, 0,
                "lifetime distribution: exponential with mean life_mean, uniform on "
                "[1, 2*life_mean-1], or exactly life_mean"},
    [K_LIFE_MEAN] = {"life_mean", GEN_F64, "1000", "events", NULL, 1, 1e15,
                     "mean lifetime: events (allocs and frees) between an ALLOC and its FREE"},
    [K_CAP] = {"cap", GEN_SIZE, "0", "bytes", NULL, 0, 1e18,
               "live-bytes cap: before an ALLOC that would exceed it, the allocations due "
               "to die first are freed early; 0 = no cap"},
    [K_STREAMS] = {"streams", GEN_U64, "1", "streams", NULL, 1, 1024,
                   "allocations go to streams 0..N-1, uniformly"},
    [K_MARK] = {"mark_every", GEN_U64, "0", "allocs", NULL, 0, 1e15,
                "a MARK every N allocations; 0 = none"},
    [K_EMPTY] = {"empty_cache_every", GEN_U64, "0", "allocs", NULL, 0, 1e15,
                 "an EMPTY_CACHE every N allocations; 0 = never"},
    [K_DRAIN] = {"drain", GEN_BOOL, "1", "", NULL, 0, 0,
                 "after the last ALLOC, free what is still live (in order of death)"},
    [K_DEFER] = {"deferred", GEN_F64, "0", "fraction", NULL, 0, 1,
                 "share of frees of allocations on streams other than 0 that are deferred: "
                 "FREE_REQ when the program lets go, FREE when the stream is done with it "
                 "(record_stream)"},
    [K_DEFER_EV] = {"defer_events", GEN_F64, "50", "events", NULL, 1, 1e15,
                    "mean delay (exponential) from FREE_REQ to FREE"},
    [K_SEED] = {"seed", GEN_U64, "1", "", NULL, 0, 18446744073709551615.0,
                "PRNG seed: the same knobs and seed give the same trace"},
};

typedef struct node {
    uint64_t death, id, size, stream;
    int requested; /* FREE_REQ emitted: the next pop is its FREE */
} node;

typedef struct hist {
    uint64_t size;
    double cum; /* cumulative weight, normalised to 1 at the end */
} hist;

typedef struct rnd {
    gen_rng rng;
    uint64_t allocs, emitted_allocs, clock, live_bytes, cap, align, streams;
    uint64_t mark_every, empty_every;
    double lmin, lspan, life_mean, deferred, defer_ev;
    int life, drain;
    hist *h;
    size_t nh;
    node *heap;
    size_t n, capn;
} rnd;

static int heap_less(const node *a, const node *b)
{
    return a->death < b->death || (a->death == b->death && a->id < b->id);
}

static int heap_push(rnd *r, node x)
{
    if (r->n == r->capn) {
        size_t nc = r->capn ? r->capn * 2 : 1024;
        node *nh = realloc(r->heap, nc * sizeof *nh);
        if (!nh)
            return AS_ENOMEM;
        r->heap = nh;
        r->capn = nc;
    }
    size_t i = r->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&x, &r->heap[p]))
            break;
        r->heap[i] = r->heap[p];
        i = p;
    }
    r->heap[i] = x;
    return 0;
}

static node heap_pop(rnd *r)
{
    node top = r->heap[0], x = r->heap[--r->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= r->n)
            break;
        if (c + 1 < r->n && heap_less(&r->heap[c + 1], &r->heap[c]))
            c++;
        if (!heap_less(&r->heap[c], &x))
            break;
        r->heap[i] = r->heap[c];
        i = c;
    }
    if (r->n)
        r->heap[i] = x;
    return top;
}

static int parse_hist(rnd *r, const char *spec, uint64_t cap, as_trace_error *err)
{
    size_t n = 1;
    for (const char *p = spec; *p; p++)
        n += *p == ',';
    r->h = calloc(n, sizeof *r->h);
    char *copy = strdup(spec);
    if (!r->h || !copy) {
        free(copy);
        return AS_ENOMEM;
    }
    int rc = 0;
    double total = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':'), *end;
        double w = 1;
        if (colon) {
            *colon = 0;
            w = strtod(colon + 1, &end);
            if (end == colon + 1 || *end || !(w >= 0) || !isfinite(w))
                goto bad;
        }
        uint64_t s;
        if (as_parse_size(tok, strlen(tok), &s) < 0 || s == 0 || s > AS_MAX_ALLOC_SIZE)
            goto bad;
        if (cap && s > cap) {
            snprintf(err->msg, sizeof err->msg, "random: sizes: %s is larger than cap", tok);
            rc = AS_EUSAGE;
            goto out;
        }
        if (w == 0)
            continue;
        total += w;
        r->h[r->nh].size = s;
        r->h[r->nh++].cum = total;
    }
    if (r->nh == 0 || total <= 0)
        goto bad;
    for (size_t i = 0; i < r->nh; i++)
        r->h[i].cum /= total;
    r->h[r->nh - 1].cum = 1.0;
    goto out;
bad:
    snprintf(err->msg, sizeof err->msg,
             "random: sizes=%s: expected SIZE:WEIGHT,... with sizes > 0 and weights >= 0", spec);
    rc = AS_EUSAGE;
out:
    free(copy);
    return rc;
}

static int rnd_init(as_gen *g, void *st, const gen_val *v, as_trace_error *err)
{
    (void)g;
    rnd *r = st;
    gen_rng_seed(&r->rng, v[K_SEED].u);
    r->allocs = v[K_ALLOCS].u;
    r->align = v[K_ALIGN].u;
    r->cap = v[K_CAP].u;
    r->streams = v[K_STREAMS].u;
    r->mark_every = v[K_MARK].u;
    r->empty_every = v[K_EMPTY].u;
    r->life = (int)v[K_LIFE].u;
    r->life_mean = v[K_LIFE_MEAN].d;
    r->drain = (int)v[K_DRAIN].u;
    r->deferred = v[K_DEFER].d;
    r->defer_ev = v[K_DEFER_EV].d;
    int rc = 0;
    if (v[K_SIZES].s && *v[K_SIZES].s) {
        rc = parse_hist(r, v[K_SIZES].s, r->cap, err);
    } else {
        uint64_t lo = v[K_MIN].u, hi = v[K_MAX].u;
        if (lo > hi || hi > AS_MAX_ALLOC_SIZE) {
            snprintf(err->msg, sizeof err->msg, "random: need 1 <= min <= max <= 256 TiB");
            rc = AS_EUSAGE;
        } else if (r->cap && hi > r->cap) {
            snprintf(err->msg, sizeof err->msg, "random: max is larger than cap");
            rc = AS_EUSAGE;
        }
        r->lmin = log((double)lo);
        r->lspan = log((double)hi) - r->lmin;
    }
    if (rc == AS_EUSAGE)
        err->code = rc;
    return rc;
}

static uint64_t draw_size(rnd *r)
{
    uint64_t s;
    if (r->nh) {
        double u = gen_rng_unit(&r->rng);
        size_t lo = 0, hi = r->nh - 1;
        while (lo < hi) { /* first bucket with cum > u */
            size_t m = (lo + hi) / 2;
            if (r->h[m].cum > u)
                hi = m;
            else
                lo = m + 1;
        }
        s = r->h[lo].size;
    } else {
        s = (uint64_t)llround(exp(r->lmin + r->lspan * gen_rng_unit(&r->rng)));
        if (s == 0)
            s = 1;
    }
    if (r->align > 1) {
        s = (s + r->align - 1) / r->align * r->align;
        if (s > AS_MAX_ALLOC_SIZE) /* max near the limit: round down instead */
            s -= r->align;
    }
    if (r->cap && s > r->cap) { /* alignment pushed it over: stay within the cap */
        uint64_t down = r->cap / r->align * r->align;
        s = down ? down : r->cap;
    }
    return s;
}

static uint64_t draw_life(rnd *r)
{
    double l;
    switch (r->life) {
    case LIFE_UNIFORM:
        l = 1 + (double)gen_rng_below(
                    &r->rng, (uint64_t)(2 * r->life_mean - 1 > 1 ? 2 * r->life_mean - 1 : 1));
        break;
    case LIFE_FIXED:
        l = r->life_mean;
        break;
    default:
        l = gen_rng_exp(&r->rng, r->life_mean);
        break;
    }
    l = floor(l + 0.5);
    return l < 1 ? 1 : l > 1e18 ? (uint64_t)1e18 : (uint64_t)l;
}

/* The allocation due next goes: a FREE, or (deferred, on a side stream, not forced by the
 * cap or the drain) a FREE_REQ now and its FREE later. The bytes stay live until FREE. */
static int emit_free(as_gen *g, rnd *r, int may_defer)
{
    node x = heap_pop(r);
    r->clock++;
    if (may_defer && !x.requested && x.stream != 0 && r->deferred > 0 &&
        gen_rng_unit(&r->rng) < r->deferred) {
        gen_free_req(g, x.id, x.size, x.stream);
        double d = floor(gen_rng_exp(&r->rng, r->defer_ev) + 0.5);
        x.death = r->clock + (d < 1 ? 1 : (uint64_t)d);
        x.requested = 1;
        return heap_push(r, x);
    }
    gen_free(g, x.id, x.size, x.stream);
    r->live_bytes -= x.size;
    return 0;
}

static int rnd_refill(as_gen *g, void *st)
{
    rnd *r = st;
    for (int budget = 4096; budget > 0; budget--) {
        int rc;
        if (r->n && r->heap[0].death <= r->clock) {
            if ((rc = emit_free(g, r, 1)) != 0)
                return rc;
            continue;
        }
        if (r->emitted_allocs == r->allocs) {
            if (!r->drain || r->n == 0)
                return AS_TRACE_EOF;
            if ((rc = emit_free(g, r, 0)) != 0)
                return rc;
            continue;
        }
        uint64_t k = r->emitted_allocs;
        if (r->mark_every && k % r->mark_every == 0)
            gen_mark(g, "allocs=%llu", (unsigned long long)k);
        if (r->empty_every && k && k % r->empty_every == 0)
            gen_empty_cache(g);
        uint64_t size = draw_size(r);
        while (r->cap && r->live_bytes + size > r->cap && r->n)
            if ((rc = emit_free(g, r, 0)) != 0)
                return rc;
        uint64_t stream = r->streams > 1 ? gen_rng_below(&r->rng, r->streams) : 0;
        node x = {r->clock + draw_life(r), 0, size, stream, 0};
        x.id = gen_alloc(g, size, stream);
        rc = heap_push(r, x);
        if (rc)
            return rc;
        r->live_bytes += size;
        r->emitted_allocs++;
        r->clock++;
    }
    return 0;
}

static void rnd_fini(void *st)
{
    rnd *r = st;
    free(r->heap);
    free(r->h);
}

const gen_kind as_gen_random = {
    .name = "random",
    .summary = "synthetic baseline: log-uniform or histogram sizes, random lifetimes",
    .text = "Each step frees the allocation whose death is due, else allocates: a size from\n"
            "log-uniform [min,max] (or the `sizes` histogram), a lifetime in events from\n"
            "the `life` distribution. With life_mean = m the live set settles near m/2\n"
            "allocations. Memory and time per event are O(log live), so it is the\n"
            "generator for long benchmark traces.\n",
    .knobs = knobs,
    .nknobs = K_N,
    .state_size = sizeof(rnd),
    .init = rnd_init,
    .refill = rnd_refill,
    .fini = rnd_fini,
};
