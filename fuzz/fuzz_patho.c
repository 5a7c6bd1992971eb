/*
 * fuzz_patho.c - search for request sequences that make a policy waste memory: maximise
 * peak_reserved / M over traces whose live bytes never exceed M and whose sizes are
 * unit * [1, n] (Robson's setting, see fuzz/README.md for the known bounds).
 *
 * The input is an allocsim text trace. The setting comes from the environment in a
 * campaign ($AS_PATHO_POLICY, $AS_PATHO_M, $AS_PATHO_N, $AS_PATHO_UNIT), else from the
 * trace's metadata (patho.policy, patho.M, patho.n, patho.unit), else bestfit, 256, 16,
 * 1 MiB; M and n count units. Events
 * outside the setting are dropped (an ALLOC over n units or past M live, frees of dropped
 * allocations, FREE_REQ, EMPTY_CACHE), and what is left is replayed over the simulated
 * device as allocsim does (its default placement, no capacity). The score is
 * peak_reserved / M; peak_reserved / peak_requested, what allocsim reports, equals it
 * once the trace reaches M live bytes, which the best traces do.
 *
 * Feedback: libFuzzer's extra counters are a max reducer on the score (FuzzFactory's
 * waypoints): an input scoring in bucket b (1/32 wide) sets the bits of buckets 0..b, so it
 * brings a new feature only when it beats the best score so far, and
 * LLVMFuzzerCustomMutator edits the operation list (fuzz_ops.c, with the phase-shifting
 * edits on). Whenever the process beats its best score and $AS_PATHO_OUT is set, the
 * filtered trace is written there as best.txt and as a native trace best.zst whose
 * metadata records the setting and the peaks, for traces/samples/pathological/ and
 * tests/test_patho.c.
 *
 * The minimiser (as_patho_minimise, patho.h) is delta debugging over the operation list
 * with the same filter and replay as the objective.
 */
#include "fuzz/fuzz.h"

#include <string.h>

#include "fuzz/fuzz_ops.h"
#include "fuzz/patho.h"
#include "fuzz/policy_harness.h"

#define NBUCKETS 1024 /* score * 32, so ratios up to 32 */

__attribute__((section("__libfuzzer_extra_counters"))) static uint8_t score_counters[NBUCKETS];

typedef as_patho_setting patho_cfg;

static uint64_t env_u64(const char *name, uint64_t def)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v)
        return def;
    uint64_t x = strtoull(v, &end, 10);
    return *end || x == 0 ? def : x;
}

static void cfg_default(patho_cfg *c)
{
    const char *p = getenv("AS_PATHO_POLICY");
    snprintf(c->policy, sizeof c->policy, "%s", p && *p ? p : "bestfit");
    c->m_units = env_u64("AS_PATHO_M", 256);
    c->n = env_u64("AS_PATHO_N", 16);
    c->unit = env_u64("AS_PATHO_UNIT", 1ull << 20);
}

int as_patho_setting_of(const as_meta *m, as_patho_setting *c)
{
    cfg_default(c);
    if (getenv("AS_PATHO_POLICY"))
        return 0; /* a campaign: its setting wins over the corpus files' */
    const char *p = as_meta_get(m, "patho.policy");
    if (p)
        snprintf(c->policy, sizeof c->policy, "%s", p);
    const char *keys[3] = {"patho.M", "patho.n", "patho.unit"};
    uint64_t *dst[3] = {&c->m_units, &c->n, &c->unit};
    for (int i = 0; i < 3; i++) {
        const char *v = as_meta_get(m, keys[i]);
        if (!v)
            continue;
        char *end;
        uint64_t x = strtoull(v, &end, 10);
        if (*end || x == 0 || x > (1ull << 40))
            return -1;
        *dst[i] = x;
    }
    if (c->unit > (1ull << 30) || c->n > (1u << 20) || c->m_units > (1u << 24))
        return -1;
    return 0;
}

static void cfg_to_meta(const patho_cfg *c, as_meta *m)
{
    char b[32];
    as_meta_set(m, "patho.policy", c->policy);
    snprintf(b, sizeof b, "%llu", (unsigned long long)c->m_units);
    as_meta_set(m, "patho.M", b);
    snprintf(b, sizeof b, "%llu", (unsigned long long)c->n);
    as_meta_set(m, "patho.n", b);
    snprintf(b, sizeof b, "%llu", (unsigned long long)c->unit);
    as_meta_set(m, "patho.unit", b);
}

/* Drops what the setting does not allow (see the header); leaves a valid trace. */
static void filter(fz_trace *t, const patho_cfg *c)
{
    uint8_t *live = calloc(t->next_tag + 1, 1);
    uint64_t *sz = calloc(t->next_tag + 1, sizeof *sz);
    FUZZ_ASSERT(live && sz);
    uint64_t now = 0, m = c->m_units * c->unit;
    size_t w = 0;
    for (size_t i = 0; i < t->n; i++) {
        fz_op o = t->ops[i];
        int keep = 0;
        if (o.op == AS_OP_ALLOC) {
            if (o.size % c->unit || o.size > c->n * c->unit)
                o.size = c->unit * (1 + (o.size / c->unit) % c->n);
            o.stream = 0;
            keep = !live[o.tag] && sz[o.tag] == 0 && now + o.size <= m;
            if (keep) {
                live[o.tag] = 1;
                sz[o.tag] = o.size;
                now += o.size;
            }
        } else if (o.op == AS_OP_FREE && o.tag < t->next_tag && live[o.tag]) {
            keep = 1;
            live[o.tag] = 0;
            now -= sz[o.tag];
        }
        if (keep)
            t->ops[w++] = o;
    }
    t->n = w;
    free(live);
    free(sz);
}

typedef as_patho_result patho_result;

/* Replays the filtered trace over the default simulated device, as allocsim does. */
static int evaluate(const fz_trace *t, const patho_cfg *c, patho_result *res)
{
    as_policy_spec sp;
    char why[256];
    memset(res, 0, sizeof *res);
    if (as_policy_spec_parse(c->policy, &sp, why, sizeof why))
        return -1;
    as_policy_spec_free(&sp);
    ph h;
    as_simdev_params dp;
    as_simdev_default_params(&dp); /* allocsim's placement */
    if (ph_open_placed(&h, c->policy, AS_CAPACITY_NONE, (int)dp.placement))
        return -1;
    uint64_t *ids = calloc(t->next_tag + 1, sizeof *ids);
    uint64_t *req = calloc(t->next_tag + 1, sizeof *req);
    FUZZ_ASSERT(ids && req);
    uint64_t requested = 0;
    for (size_t i = 0; i < t->n; i++) {
        const fz_op *o = &t->ops[i];
        int rc;
        if (o->op == AS_OP_ALLOC) {
            rc = ph_alloc_id(&h, o->size, 0, &ids[o->tag], NULL);
            FUZZ_ASSERT_MSG(rc == 0, "%s: alloc(%llu) returned %d with no capacity", c->policy,
                            (unsigned long long)o->size, rc);
            req[o->tag] = o->size;
            requested += o->size;
        } else {
            rc = ph_free(&h, ids[o->tag], AS_FREE_COMPLETE);
            FUZZ_ASSERT_MSG(rc == 0, "%s: free returned %d", c->policy, rc);
            requested -= req[o->tag];
        }
        uint64_t r = ph_dev(&h).reserved;
        if (r > res->peak_reserved)
            res->peak_reserved = r;
        if (requested > res->peak_requested)
            res->peak_requested = requested;
    }
    free(ids);
    free(req);
    ph_close(&h);
    res->ops = t->n;
    return 0;
}

/* The setting and the result, as patho.* keys (fuzz/README.md). */
static void result_meta(const patho_cfg *c, const patho_result *r, as_meta *meta)
{
    char b[64];
    cfg_to_meta(c, meta);
    snprintf(b, sizeof b, "%llu", (unsigned long long)r->peak_reserved);
    as_meta_set(meta, "patho.peak_reserved", b);
    snprintf(b, sizeof b, "%llu", (unsigned long long)r->peak_requested);
    as_meta_set(meta, "patho.peak_requested", b);
    snprintf(b, sizeof b, "%.6f", (double)r->peak_reserved / (double)r->peak_requested);
    as_meta_set(meta, "patho.ratio", b);
    snprintf(b, sizeof b, "%.6f", (double)r->peak_reserved / (double)(c->m_units * c->unit));
    as_meta_set(meta, "patho.bound_ratio", b);
}

static double best_score;

/* Writes the filtered trace as $AS_PATHO_OUT/best.txt and best.zst. */
static void save_best(fz_trace *t, const patho_cfg *c, const patho_result *r, double score)
{
    const char *dir = getenv("AS_PATHO_OUT");
    fprintf(stderr,
            "patho: %s M=%llu n=%llu unit=%llu: best peak_reserved/M %.4f "
            "(reserved %llu, requested %llu, %zu ops)\n",
            c->policy, (unsigned long long)c->m_units, (unsigned long long)c->n,
            (unsigned long long)c->unit, score, (unsigned long long)r->peak_reserved,
            (unsigned long long)r->peak_requested, t->n);
    if (!dir)
        return;
    as_meta meta = {0};
    as_meta_set(&meta, "source", "fuzz_patho");
    result_meta(c, r, &meta);
    as_meta_free(&t->meta);
    t->meta = meta;
    char path[4096];
    size_t cap = 64u << 20;
    uint8_t *txt = malloc(cap);
    size_t n = txt ? fz_write_text(t, txt, cap) : 0;
    snprintf(path, sizeof path, "%s/best.txt", dir);
    FILE *f = n ? fopen(path, "wb") : NULL;
    if (f) {
        fwrite(txt, 1, n, f);
        fclose(f);
    }
    /* The native copy, through the project's converter. */
    char zpath[4096];
    snprintf(zpath, sizeof zpath, "%s/best.zst", dir);
    as_trace_error err;
    if (f && as_trace_convert(path, zpath, AS_FMT_NATIVE, NULL, NULL, NULL, &err))
        fprintf(stderr, "patho: %s: %s\n", zpath, err.msg);
    free(txt);
}

int as_fuzz_patho(const uint8_t *data, size_t size)
{
    fz_trace t;
    if (fz_parse(data, size, &t) != 0)
        return 0;
    as_patho_setting c;
    if (as_patho_setting_of(&t.meta, &c) != 0)
        goto out;
    filter(&t, &c);
    patho_result r;
    if (evaluate(&t, &c, &r) != 0 || r.peak_requested == 0)
        goto out;
    double score = (double)r.peak_reserved / (double)(c.m_units * c.unit);
    /* The same trace must give the same result (the policy is deterministic). */
    patho_result r2;
    FUZZ_ASSERT(evaluate(&t, &c, &r2) == 0 && memcmp(&r, &r2, sizeof r) == 0);
    size_t b = (size_t)(score * 32.0);
    memset(score_counters, 1, b < NBUCKETS ? b + 1 : NBUCKETS); /* the max reducer */
    if (score > best_score && getenv("AS_PATHO_OUT")) {
        best_score = score;
        save_best(&t, &c, &r, score);
    }
out:
    fz_free(&t);
    return 0;
}

size_t as_fuzz_patho_mutate(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    uint64_t rng = seed * 0x9E3779B97F4A7C15ull + size;
    patho_cfg c;
    cfg_default(&c);
    fz_params p = {.unit = c.unit, .nmax = c.n, .max_ops = 6000, .phases = 1};
    fz_trace t;
    if (fz_parse(data, size, &t) != 0) {
        memset(&t, 0, sizeof t);
        fz_random(&t, &rng, &p, 50 + fz_rand(&rng) % 400);
    } else {
        fz_mutate(&t, &rng, &p);
    }
    /* The campaign's setting wins over whatever the input carried. */
    cfg_to_meta(&c, &t.meta);
    filter(&t, &c);
    size_t n = fz_write_out(&t, data, size, max_size);
    fz_free(&t);
    return n;
}

/* ---- the minimiser ------------------------------------------------------------------- */

__extension__ typedef unsigned __int128 u128;

typedef struct mctx {
    const patho_cfg *c;
    patho_result base;
    uint64_t evals, max_evals;
} mctx;

/* At least the base's reserved / requested and reserved / M (M is fixed). */
static int at_least(const patho_result *r, const patho_result *base)
{
    return r->peak_requested && r->peak_reserved >= base->peak_reserved &&
           (u128)r->peak_reserved * base->peak_requested >=
               (u128)base->peak_reserved * r->peak_requested;
}

/* cand = cur without ops [lo, hi), filtered; 1 when it keeps the base's ratios. */
static int try_without(mctx *m, const fz_trace *cur, size_t lo, size_t hi, fz_trace *cand)
{
    cand->n = 0;
    for (size_t i = 0; i < cur->n; i++)
        if (i < lo || i >= hi)
            cand->ops[cand->n++] = cur->ops[i];
    cand->next_tag = cur->next_tag;
    filter(cand, m->c);
    patho_result r;
    m->evals++;
    return cand->n && evaluate(cand, m->c, &r) == 0 && at_least(&r, &m->base);
}

/* ddmin (Zeller and Hildebrandt 2002), complements only: remove one of g chunks while
 * that keeps the ratios, else split finer, down to single operations. */
static void ddmin(mctx *m, fz_trace *cur, fz_trace *cand)
{
    size_t g = 2;
    while (cur->n >= 2 && (!m->max_evals || m->evals < m->max_evals)) {
        size_t chunk = (cur->n + g - 1) / g, i;
        int cut = 0;
        for (i = 0; i * chunk < cur->n && !cut; i++) {
            if (m->max_evals && m->evals >= m->max_evals)
                break;
            size_t hi = (i + 1) * chunk < cur->n ? (i + 1) * chunk : cur->n;
            cut = try_without(m, cur, i * chunk, hi, cand);
        }
        if (cut) {
            fz_op *o = cur->ops; /* the candidate becomes the current list */
            cur->ops = cand->ops;
            cand->ops = o;
            cur->n = cand->n;
            g = g > 2 ? g - 1 : 2;
        } else if (g >= cur->n) {
            break;
        } else {
            g = g * 2 < cur->n ? g * 2 : cur->n;
        }
    }
}

int as_patho_minimise(const uint8_t *data, size_t size, const as_patho_setting *s,
                      uint64_t max_evals, uint8_t **out, size_t *out_len, as_patho_result *before,
                      as_patho_result *after)
{
    fz_trace cur, cand = {0};
    *out = NULL;
    *out_len = 0;
    if (fz_parse(data, size, &cur) != 0)
        return -1;
    patho_cfg c;
    int rc = -1;
    if (s)
        c = *s;
    else if (as_patho_setting_of(&cur.meta, &c) != 0)
        goto out;
    filter(&cur, &c);
    mctx m = {.c = &c, .max_evals = max_evals};
    if (!cur.n || evaluate(&cur, &c, &m.base) != 0 || !m.base.peak_requested)
        goto out;
    *before = m.base;
    cand.ops = malloc((cur.n + 1) * sizeof *cand.ops);
    if (!cand.ops)
        goto out;
    cand.cap = cur.n + 1;
    ddmin(&m, &cur, &cand);
    FUZZ_ASSERT(evaluate(&cur, &c, after) == 0 && at_least(after, &m.base));
    char src[256];
    snprintf(src, sizeof src, "%s",
             as_meta_get(&cur.meta, "source") ? as_meta_get(&cur.meta, "source") : "");
    if (*src && strcmp(src, "patho-min"))
        as_meta_set(&cur.meta, "patho.origin", src); /* a copy: the next set replaces it */
    as_meta_set(&cur.meta, "source", "patho-min");
    result_meta(&c, after, &cur.meta);
    char b[32];
    snprintf(b, sizeof b, "%zu", before->ops);
    as_meta_set(&cur.meta, "patho.ops_before_minimising", b);
    size_t cap = 4096 + cur.n * 48 + 64 * cur.meta.n;
    for (size_t i = 0; i < cur.meta.n; i++)
        cap += 4 * strlen(cur.meta.kv[i].value) + strlen(cur.meta.kv[i].key);
    *out = malloc(cap);
    *out_len = *out ? fz_write_text(&cur, *out, cap) : 0;
    rc = *out_len ? 0 : -1;
    if (rc) {
        free(*out);
        *out = NULL;
    }
out:
    free(cand.ops);
    fz_free(&cur);
    return rc;
}
