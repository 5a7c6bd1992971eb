/*
 * fuzz_policy.c - every registered policy, under random knobs and capacities, driven by
 * alloc, free, free-request and empty-cache operations, with every invariant checked after
 * every step.
 *
 * The input is an allocsim trace (any format the reader takes; the mutator writes text)
 * whose metadata names the run: `fuzz.policy=SPEC` (default bestfit) and
 * `fuzz.capacity=BYTES|none` (default none). So any crash file replays with
 *   allocsim -p "$(SPEC)" -c BYTES --keep-going --check FILE
 * and shows the same results ($AS_FUZZ_POLICY=SPEC overrides every input's policy: `make
 * check-policy PLUGIN=...` runs the corpus against a plug-in). After each event the reference model of
 * fuzz/policy_model.h (shared with the conformance suite) checks: check() passes, no two
 * blocks overlap and every block lies inside a walked segment, the live blocks are exactly
 * the model's, stats match the model and the device, reserved >= allocated >= requested.
 * At the end everything is freed, empty_cache must return all memory and fini leaves the
 * device empty. The whole run is done twice and must give the same hash (determinism), and
 * once through the engine (keep_going, check), which must agree on peaks and OOM count.
 * Spec and init refusals are fine outcomes; only a broken oracle aborts.
 */
#include "fuzz/fuzz.h"

#include <string.h>

#include "engine.h"
#include "fuzz/fuzz_ops.h"
#include "fuzz/policy_model.h"

#define MAX_EVENTS 20000u

/* Knob values worth trying, per policy (a policy not listed runs with its defaults and
 * whatever its spec text says). Torch combines maxsplit, roundup, gc and expandable. */
typedef struct knob_choice {
    const char *policy, *knob;
    const char *values[8];
} knob_choice;

static const knob_choice choices[] = {
    { "torch", "maxsplit", { "0", "2", "20", "40", "64", "128", NULL } },
    { "torch", "roundup", { "0", "2", "4", "8", "[1:1,2:2,>:4]", "[256:1,>:8]", NULL } },
    { "torch", "expandable", { "true", "false", NULL } },
    { "torch", "gc", { "0.5", "0.8", "0.99", NULL } },
    { "torch", "large_segment", { "12", "20", "64", NULL } },
    { "torch", "max_non_split_rounding", { "20", "40", "100", NULL } },
    { "torch", "sync_frees", { "true", "false", NULL } },
    { "bestfit", "round", { "1", "256", "512", "4K", "64K", "2M", NULL } },
    { "bestfit", "roundup", { "0", "4", "[1:1,2:2,>:4]", NULL } },
    { "bestfit", "maxsplit", { "0", "4", "40", NULL } },
    { "bestfit", "segment", { "2", "8", "20", "64", NULL } },
    { "bestfit", "release", { "none", "oom", "always", NULL } },
    { "firstfit", "round", { "1", "512", "64K", NULL } },
    { "firstfit", "roundup", { "0", "4", NULL } },
    { "firstfit", "maxsplit", { "0", "4", "40", NULL } },
    { "firstfit", "segment", { "2", "20", "64", NULL } },
    { "firstfit", "release", { "none", "oom", "always", NULL } },
    { "segfit", "round", { "1", "512", "64K", NULL } },
    { "segfit", "classes", { "tlsf", "pow2", NULL } },
    { "segfit", "sl", { "0", "2", "4", "6", NULL } },
    { "segfit", "split", { "true", "false", NULL } },
    { "segfit", "coalesce", { "true", "false", NULL } },
    { "segfit", "segment", { "2", "20", "64", NULL } },
    { "segfit", "release", { "none", "oom", "always", NULL } },
    { "buddy", "min_order", { "8", "9", "12", "20", NULL } },
    { "buddy", "max_order", { "21", "22", "26", "30", NULL } },
    { "buddy", "release", { "none", "oom", "always", NULL } },
    { "bfc", "allow_growth", { "true", "false", NULL } },
    { "bfc", "fraction", { "0.001", "0.5", "0.75", "1", NULL } },
    { "bfc", "limit", { "0", "64M", "300M", NULL } },
    { "bfc", "gc", { "true", "false", NULL } },
    { "bfc", "max_internal_fragmentation", { "0", "1M", "128M", NULL } },
    { "gmlake", "stitch", { "true", "false", NULL } },
    { "gmlake", "fraglimit", { "1", "2M", "8M", "64M", "512M", NULL } },
    { "gmlake", "reuselimit", { "1", "1.5", "10", "1000", NULL } },
    { "gmlake", "defraglevel", { "0", "1", "2", "3", NULL } },
    { "gmlake", "autogc", { "0", "1", "1000", NULL } },
    { "gmlake", "realloc", { "true", "false", NULL } },
    { "gmlake", "maxsplit", { "0", "4", "40", NULL } },
};

static const char *const capacities[] = { "none", "67108864", "268435456", "629145600",
                                          "2147483648", "23068672" };

/* ---- the harness -------------------------------------------------------------------------- */

typedef struct trace_buf {
    as_event *ev;
    size_t n;
} trace_buf;

typedef struct outcome {
    uint64_t hash, ooms, peak_reserved, peak_requested, events;
} outcome;

static void die(const char *spec, uint64_t cap, uint64_t event, const char *what)
{
    fprintf(stderr, "fuzz_policy: [%s, capacity %llu] event %llu: %s\n"
            "  replay: allocsim -p '%s' -c %llu --keep-going --check CRASH_FILE\n",
            spec, (unsigned long long)cap, (unsigned long long)event, what, spec,
            (unsigned long long)cap);
    abort();
}

static void play(const trace_buf *t, const char *spec, uint64_t cap, outcome *o)
{
    pm r;
    memset(o, 0, sizeof *o);
    /* The placement allocsim uses (as_simdev_default_params). */
    as_simdev_params dp;
    as_simdev_default_params(&dp);
    if (pm_open(&r, spec, cap, (int)dp.placement))
        die(spec, cap, 0, "init refused a spec that the parser accepted (printed above)");
    if (ph_plan(&r.t, t->ev, t->n))
        die(spec, cap, 0, "an offline policy refused the plan of a valid trace");
    uint64_t requested = 0; /* as the engine counts it: a FREE_REQ ends the request */
    for (size_t i = 0; i < t->n; i++) {
        const as_event *e = &t->ev[i];
        int rc = 0;
        switch (e->op) {
        case AS_OP_ALLOC: {
            FUZZ_ASSERT(e->id == r.t.next_id);
            int served = 0;
            rc = pm_alloc(&r, e->size, e->stream, &served);
            if (served)
                requested += e->size;
            break;
        }
        case AS_OP_FREE_REQ:
        case AS_OP_FREE:
            if (e->id < r.t.next_id && r.m[e->id].state == PM_LIVE)
                requested -= r.m[e->id].req;
            rc = pm_free_id(&r, e->id, e->op == AS_OP_FREE ? AS_FREE_COMPLETE : AS_FREE_PENDING);
            break;
        case AS_OP_EMPTY_CACHE:
            rc = pm_empty_cache(&r);
            break;
        default:
            break;
        }
        if (rc == 0)
            rc = pm_verify(&r);
        if (rc)
            die(spec, cap, i, r.err);
        uint64_t res = ph_dev(&r.t).reserved;
        if (res > o->peak_reserved)
            o->peak_reserved = res;
        if (requested > o->peak_requested)
            o->peak_requested = requested;
        pm_mix(&r.hash, res);
    }
    o->ooms = r.ooms;
    o->events = t->n;
    /* Drain: every block back, then empty_cache must return all memory. */
    while (r.nids)
        if (pm_free_id(&r, r.ids[r.nids - 1], AS_FREE_COMPLETE) || pm_verify(&r))
            die(spec, cap, t->n, r.err);
    if (r.t.p->empty_cache) {
        if (pm_empty_cache(&r) || pm_verify(&r))
            die(spec, cap, t->n, r.err);
        if (ph_dev(&r.t).reserved != 0)
            die(spec, cap, t->n, "empty_cache with nothing live left memory reserved");
    }
    o->hash = r.hash;
    if (pm_close(&r) != 0)
        die(spec, cap, t->n, "fini left device memory reserved");
}

/* The same input through the engine, as allocsim replays it. */
static void engine_agrees(const uint8_t *data, size_t size, const as_policy_spec *sp, uint64_t cap,
                          const outcome *o)
{
    as_engine_opts eo = { .threads = 1, .keep_going = 1, .check = 1 };
    as_engine *e = NULL;
    FUZZ_ASSERT(as_engine_create(&eo, &e) == 0);
    FUZZ_ASSERT(as_engine_add_run(e, sp, cap) >= 0);
    as_trace_reader *r = NULL;
    FUZZ_ASSERT(as_trace_open_mem(data, size, "fuzz-policy", NULL, &r, NULL) == 0);
    as_trace_error err;
    int rc = as_engine_run(e, r, &err);
    if (rc)
        die(sp->text, cap, 0, as_engine_errmsg(e));
    const as_run_result *res = as_engine_result(e, 0);
    char msg[256];
    snprintf(msg, sizeof msg,
             "engine and harness differ: peak reserved %llu/%llu, requested %llu/%llu, "
             "ooms %llu/%llu",
             (unsigned long long)res->peak_reserved, (unsigned long long)o->peak_reserved,
             (unsigned long long)res->peak_requested, (unsigned long long)o->peak_requested,
             (unsigned long long)res->ooms, (unsigned long long)o->ooms);
    if (res->peak_reserved != o->peak_reserved || res->peak_requested != o->peak_requested ||
        res->ooms != o->ooms)
        die(sp->text, cap, o->events, msg);
    as_trace_close(r);
    as_engine_destroy(e);
}

int as_fuzz_policy(const uint8_t *data, size_t size)
{
    as_trace_reader *r = NULL;
    if (as_trace_open_mem(data, size, "fuzz-policy", NULL, &r, NULL) < 0)
        return 0;
    const as_meta *m = as_trace_reader_meta(r);
    /* $AS_FUZZ_POLICY (`make check-policy PLUGIN=...`) puts one spec, a plug-in's, in
     * place of every input's own: the corpus then drives that policy. */
    const char *spec = getenv("AS_FUZZ_POLICY");
    if (!spec || !*spec)
        spec = as_meta_get(m, "fuzz.policy");
    const char *captext = as_meta_get(m, "fuzz.capacity");
    as_policy_spec sp;
    char why[256];
    trace_buf t = { 0 };
    uint64_t cap = AS_CAPACITY_NONE;
    if (captext && strcmp(captext, "none") != 0) {
        char *end;
        cap = strtoull(captext, &end, 10);
        if (*end || cap == 0 || cap == AS_CAPACITY_NONE) {
            as_trace_close(r);
            return 0;
        }
    }
    if (as_policy_spec_parse(spec ? spec : "bestfit", &sp, why, sizeof why)) {
        as_trace_close(r);
        return 0;
    }
    t.ev = malloc(MAX_EVENTS * sizeof *t.ev);
    FUZZ_ASSERT(t.ev);
    as_event e;
    int rc = 0;
    while (t.n < MAX_EVENTS && (rc = as_trace_next(r, &e)) == 0)
        if (e.op != AS_OP_MARK)
            t.ev[t.n++] = e;
    as_trace_close(r);
    if (t.n == MAX_EVENTS || rc < 0)
        goto out; /* refused or too long: the engine would stop at the error */
    outcome a, b;
    play(&t, sp.text, cap, &a);
    play(&t, sp.text, cap, &b);
    if (memcmp(&a, &b, sizeof a) != 0)
        die(sp.text, cap, t.n, "two runs of the same input differ (not deterministic)");
    engine_agrees(data, size, &sp, cap, &a);
out:
    free(t.ev);
    as_policy_spec_free(&sp);
    return 0;
}

/* ---- the mutator ------------------------------------------------------------------------ */

static const fz_params policy_params = { .max_log2 = 28, .max_ops = 4000, .streams = 1,
                                         .extras = 1 };

static void random_spec(uint64_t *rng, char *out, size_t cap)
{
    size_t np;
    const as_policy *const *pl = as_policy_list(&np);
    const char *name = pl[fz_rand(rng) % np]->name;
    /* torch is the most intricate: give it a larger share. */
    if (fz_rand(rng) % 3 == 0 && as_policy_find("torch"))
        name = "torch";
    size_t len = (size_t)snprintf(out, cap, "%s", name);
    for (size_t i = 0; i < sizeof choices / sizeof choices[0]; i++) {
        if (strcmp(choices[i].policy, name) || fz_rand(rng) % 2)
            continue;
        size_t nv = 0;
        while (nv < 8 && choices[i].values[nv])
            nv++;
        len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, ",%s=%s", choices[i].knob,
                                choices[i].values[fz_rand(rng) % nv]);
    }
}

size_t as_fuzz_policy_mutate(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + size;
    fz_trace t;
    if (fz_parse(data, size, &t) != 0) {
        memset(&t, 0, sizeof t);
        fz_random(&t, &rng, &policy_params, 20 + fz_rand(&rng) % 200);
    }
    char spec[512];
    const char *cur = as_meta_get(&t.meta, "fuzz.policy");
    as_policy_spec sp;
    char why[128];
    int spec_ok = cur && as_policy_spec_parse(cur, &sp, why, sizeof why) == 0;
    if (spec_ok)
        as_policy_spec_free(&sp);
    if (!spec_ok || fz_rand(&rng) % 10 == 0) {
        random_spec(&rng, spec, sizeof spec);
        as_meta_set(&t.meta, "fuzz.policy", spec);
    }
    if (!as_meta_get(&t.meta, "fuzz.capacity") || fz_rand(&rng) % 16 == 0)
        as_meta_set(&t.meta, "fuzz.capacity",
                    capacities[fz_rand(&rng) % (sizeof capacities / sizeof capacities[0])]);
    fz_mutate(&t, &rng, &policy_params);
    size_t n = fz_write_out(&t, data, size, max_size);
    fz_free(&t);
    return n;
}
