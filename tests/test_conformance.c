/*
 * test_conformance.c - one conformance suite for every registered policy (the registry
 * is walked, so a newly registered policy joins automatically), each under several knob
 * settings and capacities, driven directly over the simulated device (no engine).
 *
 * Runs alternate between the device's two address placements (low first fit, top down).
 * Each run replays a seeded random trace (tu_seed) of ALLOC, FREE, FREE_REQ+FREE pairs
 * and EMPTY_CACHE, with a capacity that forces OOMs (skipped, as with keep_going), and
 * after every event asserts: check() passes; walk() visits segments in address order,
 * none overlapping, every block inside its segment and no two blocks overlapping; the
 * allocated/pending blocks it reports are exactly the live ones of an independent
 * reference model (same id, address, size, state); stats agree with the model and the
 * device (allocated, reserved, free bytes, segments, device calls) and reserved >=
 * allocated >= requested. At the end everything is freed, empty_cache gives all memory
 * back, fini leaves the device empty, and a second run of the same trace gives the same
 * results bit for bit (determinism). The model and these checks live in policy_model.h,
 * which fuzz/fuzz_policy.c shares.
 */
#include <CUnit/CUnit.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/policy_model.h"
#include "knobs.h"
#include "util.h"

#define MIB PH_MIB

/* ---- settings per policy ------------------------------------------------------------- */

/* Settings named for known policies; any policy also gets its defaults and one variant
 * per shared knob it has (knobs.h), so a new policy is covered without editing this. */
static const char *const named_settings[] = {
    "bestfit,round=4K,segment=8",
    "firstfit,maxsplit=32,release=always",
    "segfit,classes=pow2",
    "segfit,sl=2,split=false",
    "segfit,coalesce=false,release=none",
    "buddy,min_order=12,max_order=26",
    "buddy,min_order=8,max_order=22,release=always",
    "bfc,allow_growth=false,fraction=0.75",
    "bfc,gc=false",
    "bfc,max_internal_fragmentation=1M",
    "torch,expandable=true",
    "torch,maxsplit=64,roundup=4,gc=0.5",
    "torch,expandable=true,maxsplit=64",
    "gmlake,fraglimit=1",
    "gmlake,fraglimit=2M,reuselimit=1,maxsplit=40",
    "gmlake,fraglimit=4M,autogc=0",
    "gmlake,fraglimit=1,realloc=true",
    "gmlake,fraglimit=2M,defraglevel=1,reuselimit=100",
    "planned,order=size",
    "planned,order=length",
    "planned,order=breadth,round=1",
};

static int has_knob(const as_policy *p, const char *name)
{
    for (size_t i = 0; i < p->n_knobs; i++)
        if (strcmp(p->knobs[i].name, name) == 0)
            return 1;
    return 0;
}

/* Fills out[] with spec texts for policy p; returns the count. */
static size_t settings_for(const as_policy *p, const char *name, char out[][128], size_t cap)
{
    size_t n = 0;
    snprintf(out[n++], 128, "%s", name);
    static const struct {
        const char *knob, *value;
    } shared[] = {
        {"maxsplit", "40"},    {"roundup", "[1:1,2:2,>:4]"},
        {"release", "always"}, {"release", "none"},
        {"round", "64K"},
    };
    for (size_t i = 0; i < sizeof shared / sizeof shared[0] && n < cap; i++)
        if (has_knob(p, shared[i].knob))
            snprintf(out[n++], 128, "%s,%s=%s", name, shared[i].knob, shared[i].value);
    size_t len = strcmp(name, p->name) == 0 ? strlen(p->name) : 0; /* plug-ins: none */
    for (size_t k = 0; !len && k < p->n_knobs && n + 2 <= cap; k++) {
        /* A plug-in's own knobs at the ends of their ranges (bool: the other value). */
        const as_knob *kn = &p->knobs[k];
        if (kn->type == AS_KNOB_BOOL) {
            snprintf(out[n++], 128, "%s,%s=%s", name, kn->name, kn->def ? "false" : "true");
        } else if (kn->type == AS_KNOB_INT || kn->type == AS_KNOB_SIZE) {
            snprintf(out[n++], 128, "%s,%s=%" PRId64, name, kn->name, kn->min);
            if (kn->max <= (1ll << 40))
                snprintf(out[n++], 128, "%s,%s=%" PRId64, name, kn->name, kn->max);
        }
    }
    for (size_t i = 0; i < sizeof named_settings / sizeof named_settings[0] && n < cap; i++)
        if (len && strncmp(named_settings[i], p->name, len) == 0 && named_settings[i][len] == ',')
            snprintf(out[n++], 128, "%s", named_settings[i]);
    return n;
}

/* The policies under test, each with the name its specs start with: every registered one,
 * or, when $AS_CHECK_PLUGIN holds a spec (`make check-policy PLUGIN=...`), that plug-in
 * alone, loaded through the spec parser as `-p` loads it. Returns the count (0: the plug-in
 * did not load, a failure). */
typedef struct under_test {
    const as_policy *p;
    char name[128];
} under_test;

static size_t policies_under_test(under_test *out, size_t cap)
{
    const char *plug = getenv("AS_CHECK_PLUGIN");
    if (plug && *plug) {
        as_policy_spec sp;
        char why[320];
        if (as_policy_spec_parse(plug, &sp, why, sizeof why)) {
            fprintf(stderr, "\n  AS_CHECK_PLUGIN=%s: %s\n", plug, why);
            CU_FAIL("the plug-in did not load");
            return 0;
        }
        out[0].p = sp.policy;
        snprintf(out[0].name, sizeof out[0].name, "%s", sp.text);
        as_policy_spec_free(&sp);
        return 1;
    }
    size_t np;
    const as_policy *const *pl = as_policy_list(&np);
    for (size_t i = 0; i < np && i < cap; i++) {
        out[i].p = pl[i];
        snprintf(out[i].name, sizeof out[i].name, "%s", pl[i]->name);
    }
    return np < cap ? np : cap;
}

/* ---- the reference model and the checks (policy_model.h, shared with fuzz_policy) ---- */

typedef struct run {
    pm pm;
    uint64_t events;
    int failed;
} run;

/* Reports r->pm.err once per run when a step returned -1. */
static void report(run *r, int rc)
{
    if (rc == 0 || r->failed)
        return;
    fprintf(stderr, "\n  [%s] event %" PRIu64 ": %s\n", r->pm.t.spec.text, r->events, r->pm.err);
    r->failed = 1;
    CU_FAIL("policy invariant (message above)");
}

static void verify(run *r)
{
    report(r, pm_verify(&r->pm));
}

/* ---- events ---------------------------------------------------------------------------- */

static void ev_alloc(run *r, uint64_t size, uint64_t stream)
{
    report(r, pm_alloc(&r->pm, size, stream, NULL));
}

/* Frees the k-th live id: with pending_first, a live block first gets its FREE_REQ. */
static void ev_free(run *r, size_t k, int pending_first)
{
    uint64_t id = r->pm.ids[k];
    unsigned flags =
        pending_first && r->pm.m[id].state == PM_LIVE ? AS_FREE_PENDING : AS_FREE_COMPLETE;
    report(r, pm_free_id(&r->pm, id, flags));
}

/* Log-uniform sizes over three regimes: small (<= 1 MiB), medium, large (up to 160 MiB). */
static uint64_t rand_size(uint64_t *rng)
{
    uint64_t u = tu_rand(rng);
    unsigned regime = (unsigned)(u % 10);
    unsigned lo, hi;
    if (regime < 6)
        lo = 0, hi = 20;
    else if (regime < 9)
        lo = 20, hi = 24;
    else
        lo = 24, hi = 27;
    unsigned bits = lo + (unsigned)(tu_rand(rng) % (hi - lo + 1));
    uint64_t top = 1ull << bits;
    uint64_t s = top / 2 + tu_rand(rng) % (top / 2 + 1);
    return s ? s : 1;
}

/* One random event of the suite's mix, drawn with the generator in the same order for every
 * policy: an alloc, a free of the k-th live id (a FREE_REQ first when pend), a burst of
 * five frees and an EMPTY_CACHE, or an EMPTY_CACHE. nlive is the number of live ids. */
typedef struct draw {
    enum { D_ALLOC, D_FREE, D_BURST, D_EMPTY } kind;
    uint64_t size, stream;
    size_t k[5];
    int pend;
} draw;

static draw draw_event(uint64_t *rng, size_t nlive)
{
    draw d = {.kind = D_EMPTY};
    uint64_t u = tu_rand(rng) % 100;
    if (u < 52 || nlive == 0) {
        d.kind = D_ALLOC;
        d.size = rand_size(rng);
        d.stream = tu_rand(rng) % 3;
    } else if (u < 97) {
        d.kind = D_FREE;
        d.k[0] = (size_t)(tu_rand(rng) % nlive);
        d.pend = u >= 85;
    } else if (u < 99) {
        d.kind = D_BURST;
    }
    return d;
}

/* Every random event, through the online policy as it comes. */
static void play_online(run *r, uint64_t seed, unsigned nev)
{
    uint64_t rng = seed;
    for (unsigned e = 0; e < nev && !r->failed; e++) {
        r->events = e;
        draw d = draw_event(&rng, r->pm.nids);
        if (d.kind == D_ALLOC) {
            ev_alloc(r, d.size, d.stream);
        } else if (d.kind == D_FREE) {
            ev_free(r, d.k[0], d.pend);
        } else if (d.kind == D_BURST) {
            /* A burst of frees, then the program calls empty_cache(). */
            for (int i = 0; i < 5 && r->pm.nids; i++)
                ev_free(r, (size_t)(tu_rand(&rng) % r->pm.nids), 0);
        } else {
            report(r, pm_empty_cache(&r->pm));
        }
        if (!r->failed)
            verify(r);
    }
}

/* An offline policy needs the whole trace first: the same mix is drawn into a trace over a
 * model in which every allocation succeeds, planned, then replayed; an allocation the
 * policy refuses is dead, and its frees are ignored (pm_free_id), as in the engine. */
static void play_offline(run *r, uint64_t seed, unsigned nev)
{
    as_event *ev = calloc(nev * 6 + 1, sizeof *ev);
    uint64_t *live = calloc(nev + 1, sizeof *live), rng = seed, next = 0;
    unsigned char *pend = calloc(nev + 1, 1);
    size_t n = 0, nl = 0;
    CU_ASSERT_FATAL(ev && live && pend);
    for (unsigned e = 0; e < nev; e++) {
        draw d = draw_event(&rng, nl);
        size_t nk = d.kind == D_FREE ? 1 : 0;
        if (d.kind == D_ALLOC) {
            ev[n++] = (as_event){.op = AS_OP_ALLOC, .id = next, .size = d.size, .stream = d.stream};
            live[nl++] = next++;
        }
        if (d.kind == D_BURST)
            for (; nk < 5 && nk < nl; nk++)
                d.k[nk] = (size_t)(tu_rand(&rng) % (nl - nk));
        for (size_t i = 0; i < nk; i++) {
            uint64_t id = live[d.k[i]];
            if (d.pend && !pend[id]) { /* the FREE_REQ now, its FREE on a later draw */
                ev[n++] = (as_event){.op = AS_OP_FREE_REQ, .id = id};
                pend[id] = 1;
                continue;
            }
            ev[n++] = (as_event){.op = AS_OP_FREE, .id = id};
            live[d.k[i]] = live[--nl];
        }
        if (d.kind == D_BURST || d.kind == D_EMPTY)
            ev[n++] = (as_event){.op = AS_OP_EMPTY_CACHE};
    }
    CU_ASSERT_EQUAL(ph_plan(&r->pm.t, ev, n), 0);
    for (size_t i = 0; i < n && !r->failed; i++) {
        r->events = i;
        if (ev[i].op == AS_OP_ALLOC)
            ev_alloc(r, ev[i].size, ev[i].stream);
        else if (ev[i].op == AS_OP_EMPTY_CACHE)
            report(r, pm_empty_cache(&r->pm));
        else
            report(r, pm_free_id(&r->pm, ev[i].id,
                                 ev[i].op == AS_OP_FREE ? AS_FREE_COMPLETE : AS_FREE_PENDING));
        if (!r->failed)
            verify(r);
    }
    free(ev);
    free(live);
    free(pend);
}

static int play(run *r, const char *spec, uint64_t capacity, int placement, uint64_t seed,
                unsigned nev)
{
    memset(r, 0, sizeof *r);
    if (pm_open(&r->pm, spec, capacity, placement)) {
        CU_FAIL("cannot open policy");
        return -1;
    }
    if (as_policy_offline(r->pm.t.p))
        play_offline(r, seed, nev);
    else
        play_online(r, seed, nev);
    as_policy_stats s = ph_stats(&r->pm.t);
    pm_mix(&r->pm.hash, s.reserved);
    pm_mix(&r->pm.hash, s.device_reserves);
    pm_mix(&r->pm.hash, s.device_releases);
    /* Drain: free everything (pending ones complete), give the cache back. */
    while (r->pm.nids && !r->failed)
        ev_free(r, r->pm.nids - 1, 0);
    if (!r->failed && r->pm.t.p->empty_cache) {
        CU_ASSERT_EQUAL(r->pm.t.p->empty_cache(r->pm.t.st), 0);
        verify(r);
        s = ph_stats(&r->pm.t);
        if (s.reserved != 0) {
            fprintf(stderr, "\n  [%s] empty_cache with nothing live left %" PRIu64 " B reserved\n",
                    r->pm.t.spec.text, s.reserved);
            CU_FAIL("empty_cache did not give everything back");
        }
    }
    return r->failed ? -1 : 0;
}

static void close_run(run *r)
{
    /* fini must give back whatever is still held. */
    CU_ASSERT_EQUAL(pm_close(&r->pm), 0);
    memset(r, 0, sizeof *r);
}

static void conformance_all_policies(void)
{
    uint64_t seed = tu_seed("conformance_all_policies");
    under_test pl[32];
    size_t np = policies_under_test(pl, 32);
    CU_ASSERT_FATAL(np >= 1);
    static const uint64_t caps[] = {AS_CAPACITY_NONE, 600 * MIB, 256 * MIB};
    unsigned total_runs = 0;
    /* AS_CONF_EVENTS lengthens every run for a soak test outside `make test`. */
    const char *ev = getenv("AS_CONF_EVENTS");
    unsigned nev = ev ? (unsigned)strtoul(ev, NULL, 10) : 1500;
    if (nev < 10)
        nev = 10;
    for (size_t i = 0; i < np; i++) {
        char specs[16][128];
        size_t ns = settings_for(pl[i].p, pl[i].name, specs, 16);
        for (size_t j = 0; j < ns; j++) {
            for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
                uint64_t s = seed + 1000003ull * i + 7919ull * j + c;
                run a, b;
                /* Both address placements of the simulated device, alternating. */
                int place = (int)((j + c) & 1) ? AS_PLACE_TOP_DOWN : AS_PLACE_LOW_FIRST_FIT;
                int ra = play(&a, specs[j], caps[c], place, s, nev);
                int rb = ra ? -1 : play(&b, specs[j], caps[c], place, s, nev);
                if (ra == 0 && rb == 0) {
                    CU_ASSERT_EQUAL(a.pm.hash, b.pm.hash);
                    CU_ASSERT_EQUAL(a.pm.ooms, b.pm.ooms);
                    if (a.pm.hash != b.pm.hash)
                        fprintf(stderr, "\n  [%s] not deterministic\n", specs[j]);
                }
                if (caps[c] == 256 * MIB && ra == 0 && a.pm.ooms == 0)
                    fprintf(stderr, "\n  [%s] note: no OOM at 256 MiB\n", specs[j]);
                if (getenv("AS_CONF_VERBOSE"))
                    fprintf(stderr, "\n  %-48s cap %-20" PRIu64 " ooms %" PRIu64 " live-at-end %zu",
                            specs[j], caps[c], a.pm.ooms, a.pm.nids);
                close_run(&a);
                if (ra == 0)
                    close_run(&b);
                total_runs++;
            }
        }
    }
    CU_ASSERT(total_runs >= 3 * np);
}

/* Every knob table entry is well formed, so `allocsim policies` and the parser can rely
 * on it, and every policy parses with its defaults and initialises. */
static void conformance_tables(void)
{
    under_test pl[32];
    size_t np = policies_under_test(pl, 32);
    for (size_t i = 0; i < np; i++) {
        const as_policy *p = pl[i].p;
        CU_ASSERT_EQUAL(p->abi, AS_POLICY_ABI);
        CU_ASSERT_PTR_NOT_NULL(p->summary);
        /* The ABI lets empty_cache and plan be NULL; the suite needs check and walk too. */
        CU_ASSERT(p->init && p->alloc && p->free && p->stats && p->check && p->walk && p->fini);
        if (strcmp(pl[i].name, p->name) == 0)
            CU_ASSERT_PTR_EQUAL(as_policy_find(p->name), p);
        for (size_t k = 0; k < p->n_knobs; k++) {
            const as_knob *kn = &p->knobs[k];
            CU_ASSERT_PTR_NOT_NULL(kn->name);
            CU_ASSERT_PTR_NOT_NULL(kn->help);
            int ok = kn->type == AS_KNOB_FLOAT ? kn->fmin <= kn->fdef && kn->fdef <= kn->fmax
                                               : kn->min <= kn->def && kn->def <= kn->max;
            CU_ASSERT(ok);
            if (kn->type == AS_KNOB_ENUM)
                CU_ASSERT_PTR_NOT_NULL(kn->choices);
            for (size_t q = 0; q < k; q++)
                CU_ASSERT(strcmp(p->knobs[q].name, kn->name) != 0);
        }
        ph t;
        CU_ASSERT(ph_open(&t, pl[i].name, AS_CAPACITY_NONE) == 0);
        ph_close(&t);
    }
}

/* The same for an offline policy, which is told the requests first: the huge ones and a
 * byte, all live to the end (the byte is served); then alone a 64 TiB one (an OOM). */
static void extreme_offline(ph *t, const uint64_t *huge, size_t nh)
{
    as_event ev[8];
    size_t n = 0;
    for (size_t k = 0; k < nh; k++)
        ev[n] = (as_event){.op = AS_OP_ALLOC, .id = n, .size = huge[k]}, n++;
    ev[n] = (as_event){.op = AS_OP_ALLOC, .id = n, .size = 1}, n++;
    CU_ASSERT_EQUAL_FATAL(ph_plan(t, ev, n), 0);
    as_block b;
    uint64_t id;
    for (size_t k = 0; k < nh; k++)
        CU_ASSERT_EQUAL(ph_alloc_id(t, huge[k], 0, &id, &b), AS_POLICY_OOM);
    CU_ASSERT_EQUAL(ph_alloc_id(t, 1, 0, &id, &b), 0);
    CU_ASSERT(b.size >= 1);
    CU_ASSERT_EQUAL(ph_check(t), 0);
    char spec[128];
    snprintf(spec, sizeof spec, "%s", t->spec.text);
    ph_close(t);
    CU_ASSERT_FATAL(ph_open(t, spec, 80ull << 30) == 0);
    ev[0] = (as_event){.op = AS_OP_ALLOC, .id = 0, .size = 1ull << 46};
    CU_ASSERT_EQUAL_FATAL(ph_plan(t, ev, 1), 0);
    CU_ASSERT_EQUAL(ph_alloc_id(t, 1ull << 46, 0, &id, &b), AS_POLICY_OOM);
    CU_ASSERT_EQUAL(ph_check(t), 0);
    ph_close(t);
}

/* Requests no device can hold are an OOM, never an overflow or an error: above 1 PiB at
 * any capacity, and 64 TiB on an 80 GiB device. Size 1 works everywhere. */
static void conformance_extreme_sizes(void)
{
    under_test pl[32];
    size_t np = policies_under_test(pl, 32);
    static const uint64_t huge[] = {UINT64_MAX, UINT64_MAX - 4096, (1ull << 50) + 1};
    for (size_t i = 0; i < np; i++) {
        ph t;
        CU_ASSERT_FATAL(ph_open(&t, pl[i].name, 80ull << 30) == 0);
        as_block b;
        uint64_t id;
        if (as_policy_offline(pl[i].p)) {
            extreme_offline(&t, huge, sizeof huge / sizeof huge[0]);
            continue;
        }
        for (size_t k = 0; k < sizeof huge / sizeof huge[0]; k++) {
            int rc = ph_alloc_id(&t, huge[k], 0, &id, &b);
            CU_ASSERT_EQUAL(rc, AS_POLICY_OOM);
            if (rc != AS_POLICY_OOM)
                fprintf(stderr, "\n  %s: alloc(%llu) = %d\n", pl[i].name,
                        (unsigned long long)huge[k], rc);
        }
        CU_ASSERT_EQUAL(ph_alloc_id(&t, 1ull << 46, 0, &id, &b), AS_POLICY_OOM);
        CU_ASSERT_EQUAL(ph_alloc_id(&t, 1, 0, &id, &b), 0);
        CU_ASSERT(b.size >= 1);
        CU_ASSERT_EQUAL(ph_check(&t), 0);
        ph_close(&t);
    }
}

/* ---- placement oracles: the rule that makes a policy itself, checked on every alloc ----- */

typedef struct fblocks {
    uint64_t *addr, *size;
    size_t n, cap;
} fblocks;

static int collect_free(void *user, const as_walk_item *it)
{
    fblocks *f = user;
    if (it->kind != AS_WALK_BLOCK || it->state != AS_BLOCK_FREE)
        return 0;
    if (f->n == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 256;
        uint64_t *a = realloc(f->addr, nc * sizeof *a), *z;
        if (!a)
            return 1;
        f->addr = a;
        z = realloc(f->size, nc * sizeof *z);
        if (!z)
            return 1;
        f->size = z;
        f->cap = nc;
    }
    f->addr[f->n] = it->addr;
    f->size[f->n++] = it->size;
    return 0;
}

enum { ORACLE_BEST, ORACLE_FIRST };

/* Replays a random trace through `spec` and, before every alloc, computes from walk() the
 * free block the rule must pick (best: smallest size, then lowest address; first: lowest
 * address) among those >= the rounded request; the policy must return that address, or
 * take a new segment when there is none. A naive linear search: the oracle, not the
 * policy. */
static void oracle_run(const char *spec, int rule, uint64_t round, uint64_t seed)
{
    ph t;
    CU_ASSERT_FATAL(ph_open_placed(&t, spec, AS_CAPACITY_NONE, (int)(seed & 1)) == 0);
    uint64_t rng = seed, *ids = calloc(4000, sizeof *ids);
    size_t nl = 0;
    fblocks f = {0};
    int bad = 0;
    for (int e = 0; e < 4000 && !bad; e++) {
        if (nl && tu_rand(&rng) % 100 < 45) {
            size_t k = (size_t)(tu_rand(&rng) % nl);
            CU_ASSERT_EQUAL(ph_free(&t, ids[k], 0), 0);
            ids[k] = ids[--nl];
            continue;
        }
        uint64_t size = rand_size(&rng) / 4 + 1;
        uint64_t rounded = as_round_size(size, round, NULL);
        f.n = 0;
        CU_ASSERT_FATAL(t.p->walk(t.st, collect_free, &f) == 0);
        size_t want = SIZE_MAX;
        for (size_t i = 0; i < f.n; i++) {
            if (f.size[i] < rounded)
                continue;
            if (want == SIZE_MAX)
                want = i;
            else if (rule == ORACLE_FIRST
                         ? f.addr[i] < f.addr[want]
                         : f.size[i] < f.size[want] ||
                               (f.size[i] == f.size[want] && f.addr[i] < f.addr[want]))
                want = i;
        }
        uint64_t segs = ph_stats(&t).segments, id;
        as_block b = {0};
        CU_ASSERT_EQUAL_FATAL(ph_alloc_id(&t, size, 0, &id, &b), 0);
        ids[nl++] = id;
        if (want != SIZE_MAX && b.addr != f.addr[want]) {
            fprintf(stderr,
                    "\n  [%s] alloc %llu (rounded %llu): got %#llx, the rule picks "
                    "%#llx+%llu\n",
                    spec, (unsigned long long)size, (unsigned long long)rounded,
                    (unsigned long long)b.addr, (unsigned long long)f.addr[want],
                    (unsigned long long)f.size[want]);
            bad = 1;
        } else if (want == SIZE_MAX && ph_stats(&t).segments != segs + 1) {
            fprintf(stderr, "\n  [%s] alloc %llu fits no free block but took no new segment\n",
                    spec, (unsigned long long)size);
            bad = 1;
        }
        CU_ASSERT(!bad);
    }
    free(f.addr);
    free(f.size);
    free(ids);
    ph_close(&t);
}

static void conformance_placement_oracles(void)
{
    if (getenv("AS_CHECK_PLUGIN"))
        return; /* the rules of the registered policies, not the plug-in's */
    uint64_t seed = tu_seed("conformance_placement_oracles");
    oracle_run("bestfit", ORACLE_BEST, 512, seed);
    oracle_run("bestfit,round=4K,segment=64", ORACLE_BEST, 4096, seed + 1);
    oracle_run("firstfit", ORACLE_FIRST, 512, seed + 2);
    oracle_run("firstfit,segment=8", ORACLE_FIRST, 512, seed + 3);
    oracle_run("bfc", ORACLE_BEST, 256, seed + 4);
}

CU_TestInfo test_conformance[] = {
    {"placement_oracles", conformance_placement_oracles},
    {"extreme_sizes", conformance_extreme_sizes},
    {"tables", conformance_tables},
    {"all_policies", conformance_all_policies},
    CU_TEST_INFO_NULL,
};
