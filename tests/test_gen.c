/*
 * test_gen.c - the workload generators: knob parsing, determinism, streaming memory, the
 * statistics of the random baseline, and the closed-form peaks of the model generators
 * (computed here from the formulas in the generators' header comments, not from their
 * code).
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "util.h"

/* Everything a test wants to know about one generated stream. */
typedef struct gstats {
    uint64_t events, allocs, frees, marks, empties;
    uint64_t live, peak, peak_event, end_live_bytes, max_gen_live;
    uint64_t hash; /* FNV-1a over the event fields */
    int rc, bad;   /* bad: an id that is not an ordinal, or a free of a dead id */
} gstats;

static uint64_t fnv(uint64_t h, uint64_t x)
{
    for (int i = 0; i < 8; i++) {
        h ^= (x >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Per-id sizes to check frees; ids are ordinals so a flat array does (small traces). */
static gstats run_gen(const char *kind, int n, char **kv, uint64_t max_events)
{
    gstats s = {0};
    s.hash = 0xcbf29ce484222325ull;
    as_gen *g = NULL;
    as_trace_error err;
    s.rc = as_gen_create(kind, n, kv, &g, &err);
    if (s.rc) {
        fprintf(stderr, "  gen %s: %s\n", kind, err.msg);
        return s;
    }
    size_t cap = 1 << 16;
    uint64_t *sz = calloc(cap, sizeof *sz);
    as_event ev;
    while ((s.rc = as_gen_next(g, &ev)) == 0 && s.events < max_events) {
        s.events++;
        s.hash = fnv(fnv(fnv(fnv(s.hash, ev.op), ev.id), ev.size), ev.stream);
        if (as_gen_live(g) > s.max_gen_live)
            s.max_gen_live = as_gen_live(g);
        switch (ev.op) {
        case AS_OP_ALLOC:
            if (ev.id != s.allocs)
                s.bad = 1;
            if (ev.id >= cap) {
                size_t nc = cap * 2;
                uint64_t *nsz = realloc(sz, nc * sizeof *nsz);
                CU_ASSERT_PTR_NOT_NULL_FATAL(nsz);
                memset(nsz + cap, 0, (nc - cap) * sizeof *nsz);
                sz = nsz, cap = nc;
            }
            sz[ev.id] = ev.size;
            s.allocs++;
            s.live += ev.size;
            if (s.live > s.peak) {
                s.peak = s.live;
                s.peak_event = s.events - 1;
            }
            break;
        case AS_OP_FREE:
            if (ev.id >= s.allocs || sz[ev.id] == 0 || sz[ev.id] != ev.size)
                s.bad = 1;
            else
                s.live -= sz[ev.id], sz[ev.id] = 0;
            s.frees++;
            break;
        case AS_OP_MARK:
            s.marks++;
            s.hash = fnv(s.hash, strlen(ev.label));
            break;
        case AS_OP_EMPTY_CACHE:
            s.empties++;
            break;
        default:
            break;
        }
    }
    s.end_live_bytes = s.live;
    free(sz);
    as_gen_destroy(g);
    return s;
}

#define KV(...) ((char *[]){__VA_ARGS__}), (int)(sizeof((char *[]){__VA_ARGS__}) / sizeof(char *))

static gstats gen_kv(const char *kind, char **kv, int n)
{
    return run_gen(kind, n, kv, UINT64_MAX);
}

/* ---- knobs and framework ------------------------------------------------------------ */

static void gen_knob_errors(void)
{
    as_gen *g = (as_gen *)1;
    as_trace_error err;
    CU_ASSERT_EQUAL(as_gen_create("nosuch", 0, NULL, &g, &err), AS_EUSAGE);
    CU_ASSERT_PTR_NULL(g);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "nosuch"));
    char *bad1[] = {"bogus=1"};
    CU_ASSERT_EQUAL(as_gen_create("random", 1, bad1, &g, &err), AS_EUSAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bogus"));
    char *bad2[] = {"max=12Q"};
    CU_ASSERT_EQUAL(as_gen_create("random", 1, bad2, &g, &err), AS_EUSAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "max=12Q"));
    char *bad3[] = {"life=weird"};
    CU_ASSERT_EQUAL(as_gen_create("random", 1, bad3, &g, &err), AS_EUSAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "exp|uniform|fixed"));
    char *bad4[] = {"min=2M", "max=1M"};
    CU_ASSERT_EQUAL(as_gen_create("random", 2, bad4, &g, &err), AS_EUSAGE);
    char *bad5[] = {"sizes=4096:x"};
    CU_ASSERT_EQUAL(as_gen_create("random", 1, bad5, &g, &err), AS_EUSAGE);
    char *bad6[] = {"noequals"};
    CU_ASSERT_EQUAL(as_gen_create("random", 1, bad6, &g, &err), AS_EUSAGE);
    char *bad7[] = {"sizes=1G:1", "cap=512M"};
    CU_ASSERT_EQUAL(as_gen_create("random", 2, bad7, &g, &err), AS_EUSAGE);
}

/* Counts are decimal (allocs=2K is 2,000), sizes binary (max=2K is 2,048); absurd
 * shapes are refused up front instead of overflowing a size. */
static void gen_units_and_limits(void)
{
    gstats s = gen_kv("random", KV("allocs=2K", "sizes=2K", "drain=0", "life_mean=1e9"));
    CU_ASSERT_EQUAL(s.allocs, 2000);
    CU_ASSERT_EQUAL(s.peak, 2000ull * 2048);
    as_gen *g;
    as_trace_error err;
    char *t1[] = {"batch=1048576", "seq=4194304", "hidden=1048576"};
    CU_ASSERT_EQUAL(as_gen_create("transformer", 3, t1, &g, &err), AS_EUSAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "256 TiB"));
    char *k1[] = {"max_batch=1048576", "prompt_max=4000000000"};
    CU_ASSERT_EQUAL(as_gen_create("kvcache", 2, k1, &g, &err), AS_EUSAGE);
    char *c1[] = {"batch=1048576", "image=16384"};
    CU_ASSERT_EQUAL(as_gen_create("cnn", 2, c1, &g, &err), AS_EUSAGE);
    char *c2[] = {"batch=8", "batch_min=9"};
    CU_ASSERT_EQUAL(as_gen_create("cnn", 2, c2, &g, &err), AS_EUSAGE);
    char *t2[] = {"seq_dist=uniform", "seq=64", "seq_min=128"};
    CU_ASSERT_EQUAL(as_gen_create("transformer", 3, t2, &g, &err), AS_EUSAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "seq_min"));
}

static void gen_help_lists_every_knob(void)
{
    const char *all = as_gen_help(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(all);
    CU_ASSERT_PTR_NOT_NULL(strstr(all, "random"));
    CU_ASSERT_PTR_NULL(as_gen_help("nosuch"));
    const char *h = as_gen_help("random");
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    const char *names[] = {"allocs",
                           "min",
                           "max",
                           "sizes",
                           "align",
                           "life",
                           "life_mean",
                           "cap",
                           "streams",
                           "mark_every",
                           "empty_cache_every",
                           "drain",
                           "seed"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char pat[64];
        snprintf(pat, sizeof pat, "\n  %s ", names[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(h, pat));
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "default 64M bytes"));
}

static void gen_meta_has_knobs(void)
{
    as_gen *g;
    char *kv[] = {"allocs=10", "seed=7"};
    CU_ASSERT_EQUAL_FATAL(as_gen_create("random", 2, kv, &g, NULL), 0);
    const as_meta *m = as_gen_meta(g);
    int seen_seed = 0, seen_min = 0, seen_src = 0;
    for (size_t i = 0; i < m->n; i++) {
        seen_seed |= !strcmp(m->kv[i].key, "gen.seed") && !strcmp(m->kv[i].value, "7");
        seen_min |= !strcmp(m->kv[i].key, "gen.min") && !strcmp(m->kv[i].value, "512");
        seen_src |= !strcmp(m->kv[i].key, "source") && !strcmp(m->kv[i].value, "gen");
    }
    CU_ASSERT(seen_seed && seen_min && seen_src);
    as_gen_destroy(g);
}

/* ---- random --------------------------------------------------------------------------- */

static void gen_random_deterministic(void)
{
    uint64_t seed = tu_seed("gen_random_deterministic");
    char sd[64], sd2[64];
    snprintf(sd, sizeof sd, "seed=%llu", (unsigned long long)seed);
    snprintf(sd2, sizeof sd2, "seed=%llu", (unsigned long long)(seed + 1));
    gstats a = gen_kv("random", KV("allocs=20000", "streams=3", "mark_every=1000", sd));
    gstats b = gen_kv("random", KV("allocs=20000", "streams=3", "mark_every=1000", sd));
    gstats c = gen_kv("random", KV("allocs=20000", "streams=3", "mark_every=1000", sd2));
    CU_ASSERT_EQUAL(a.rc, AS_TRACE_EOF);
    CU_ASSERT_EQUAL(a.bad, 0);
    CU_ASSERT_EQUAL(a.hash, b.hash);
    CU_ASSERT_EQUAL(a.events, b.events);
    CU_ASSERT_NOT_EQUAL(a.hash, c.hash);
    /* drain=1: every allocation is freed, so events = 2 * allocs + marks */
    CU_ASSERT_EQUAL(a.allocs, 20000);
    CU_ASSERT_EQUAL(a.frees, 20000);
    CU_ASSERT_EQUAL(a.marks, 20);
    CU_ASSERT_EQUAL(a.events, 40020);
    CU_ASSERT_EQUAL(a.end_live_bytes, 0);
}

/* Fixed lifetimes of L events: the allocation made at event t dies at event t + L. The
 * first L events are allocations (nothing is due), the next L are their frees in order,
 * and so on: the live set saws between 0 and L, so with one size S the peak is L * S
 * (and the mean, by Little's law, L/2 * S). */
static void gen_random_fixed_life(void)
{
    gstats s = gen_kv("random", KV("allocs=10000", "sizes=1M", "life=fixed", "life_mean=100"));
    CU_ASSERT_EQUAL(s.bad, 0);
    CU_ASSERT_EQUAL(s.peak, 100ull << 20);
    CU_ASSERT_EQUAL(s.frees, 10000);
}

/* Histogram proportions within 4 standard deviations of the binomial expectation; with
 * an exponential life of mean m the average live count is about m/2. */
static void gen_random_histogram(void)
{
    uint64_t seed = tu_seed("gen_random_histogram");
    char sd[64];
    snprintf(sd, sizeof sd, "seed=%llu", (unsigned long long)seed);
    as_gen *g;
    char *kv[] = {"allocs=40000", "sizes=4096:0.5,1M:0.3,64M:0.2", "life_mean=200", sd};
    CU_ASSERT_EQUAL_FATAL(as_gen_create("random", 4, kv, &g, NULL), 0);
    as_event ev;
    uint64_t n4k = 0, n1m = 0, n64m = 0, other = 0, live = 0, live_sum = 0, samples = 0;
    while (as_gen_next(g, &ev) == 0) {
        if (ev.op == AS_OP_ALLOC) {
            n4k += ev.size == 4096;
            n1m += ev.size == (1u << 20);
            n64m += ev.size == (64u << 20);
            other += ev.size != 4096 && ev.size != (1u << 20) && ev.size != (64u << 20);
            live++;
            if (ev.id > 5000 && ev.id < 35000)
                live_sum += live, samples++;
        } else if (ev.op == AS_OP_FREE) {
            live--;
        }
    }
    as_gen_destroy(g);
    double n = 40000;
    CU_ASSERT_EQUAL(other, 0);
    CU_ASSERT(fabs(n4k - 0.5 * n) < 4 * sqrt(n * 0.25));
    CU_ASSERT(fabs(n1m - 0.3 * n) < 4 * sqrt(n * 0.21));
    CU_ASSERT(fabs(n64m - 0.2 * n) < 4 * sqrt(n * 0.16));
    double mean_live = (double)live_sum / (double)samples;
    CU_ASSERT(mean_live > 85 && mean_live < 115);
}

static void gen_random_loguniform_and_cap(void)
{
    as_gen *g;
    char *kv[] = {"allocs=50000", "min=1K", "max=1M", "cap=64M", "life_mean=5000", "align=256"};
    CU_ASSERT_EQUAL_FATAL(as_gen_create("random", 6, kv, &g, NULL), 0);
    as_event ev;
    uint64_t live = 0, peak = 0, below32k = 0, n = 0;
    int ok = 1;
    while (as_gen_next(g, &ev) == 0) {
        if (ev.op == AS_OP_ALLOC) {
            ok &= ev.size >= 1024 && ev.size <= (1u << 20) && ev.size % 256 == 0;
            below32k += ev.size <= 32768;
            n++;
            live += ev.size;
            if (live > peak)
                peak = live;
        } else if (ev.op == AS_OP_FREE) {
            live -= ev.size;
        }
    }
    as_gen_destroy(g);
    CU_ASSERT(ok);
    CU_ASSERT(peak <= (64u << 20));
    CU_ASSERT(peak > (60u << 20)); /* 2500 live of mean ~100 KiB would be ~250 MiB */
    /* log-uniform on [2^10, 2^20]: P(size <= 2^15) = 1/2 */
    CU_ASSERT(fabs((double)below32k / n - 0.5) < 0.02);
}

/* Deferred frees: on side streams only, each FREE_REQ followed by its FREE, and the
 * reader (which checks FREE_REQ/FREE pairing) accepts the stream. */
static void gen_random_deferred(void)
{
    char *kv[] = {"allocs=20000", "streams=4", "deferred=0.5", "defer_events=30"};
    as_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(as_gen_open("random", 4, kv, &r, NULL), 0);
    as_event ev;
    uint8_t *state = calloc(20000, 1); /* 1 live, 2 free requested, 3 freed */
    uint64_t reqs = 0, side_frees = 0, bad = 0;
    int rc;
    while ((rc = as_trace_next(r, &ev)) == 0) {
        if (ev.op == AS_OP_ALLOC) {
            state[ev.id] = 1;
        } else if (ev.op == AS_OP_FREE_REQ) {
            reqs++;
            bad += ev.stream == 0 || state[ev.id] != 1;
            state[ev.id] = 2;
        } else if (ev.op == AS_OP_FREE) {
            side_frees += ev.stream != 0;
            bad += state[ev.id] != 1 && state[ev.id] != 2;
            state[ev.id] = 3;
        }
    }
    CU_ASSERT_EQUAL(rc, AS_TRACE_EOF);
    CU_ASSERT_EQUAL(bad, 0);
    uint64_t unfreed = 0;
    for (int i = 0; i < 20000; i++)
        unfreed += state[i] != 3;
    CU_ASSERT_EQUAL(unfreed, 0);
    /* 3/4 of allocations are on side streams, half of their (undrained) frees deferred */
    CU_ASSERT(reqs > 0.3 * side_frees && reqs < 0.6 * side_frees);
    free(state);
    as_trace_close(r);
}

/* Streaming: 2 M events with a live set of ~50 must not keep more than the live set. */
static void gen_random_streaming(void)
{
    gstats s = run_gen("random", 2, (char *[]){"allocs=1000000", "life_mean=100"}, UINT64_MAX);
    CU_ASSERT_EQUAL(s.events, 2000000);
    CU_ASSERT(s.max_gen_live < 2000);
    CU_ASSERT_EQUAL(s.bad, 0);
}

/* ---- transformer: the closed form ---------------------------------------------------
 * tf_predict() evaluates the candidate points written in gen_transformer.c's header, from
 * the knobs alone; the generator's events are then summed and compared. */

typedef struct tfk {
    uint64_t L, h, a, f, V, S, b, k, steps;
    int retain, ckpt, flash, dropout, fp32, opt, pos; /* opt: 0 adam, 1 sgd, 2 none */
    uint64_t bucket;
} tfk;

static const tfk tf_small = {
    .L = 4, .h = 256, .a = 4, .f = 4, .V = 1000, .S = 128, .b = 4, .k = 1, .steps = 3, .pos = 1};

static int tf_args(const tfk *c, char buf[20][48], char **kv)
{
    int n = 0;
#define A(...) (snprintf(buf[n], 48, __VA_ARGS__), kv[n] = buf[n], n++)
    A("layers=%llu", (unsigned long long)c->L);
    A("hidden=%llu", (unsigned long long)c->h);
    A("heads=%llu", (unsigned long long)c->a);
    A("ffn=%llu", (unsigned long long)c->f);
    A("vocab=%llu", (unsigned long long)c->V);
    A("seq=%llu", (unsigned long long)c->S);
    A("batch=%llu", (unsigned long long)c->b);
    A("accum=%llu", (unsigned long long)c->k);
    A("steps=%llu", (unsigned long long)c->steps);
    A("graph=%s", c->retain ? "retain" : "release");
    A("ckpt=%d", c->ckpt);
    A("flash=%d", c->flash);
    A("dropout=%d", c->dropout);
    A("precision=%s", c->fp32 ? "fp32" : "bf16");
    A("optimizer=%s", c->opt == 0 ? "adam" : c->opt == 1 ? "sgd" : "none");
    A("pos_emb=%d", c->pos);
    A("bucket=%llu", (unsigned long long)c->bucket);
#undef A
    return n;
}

static double dmax(double a, double b)
{
    return a > b ? a : b;
}

/* Peak of one step at sequence length s with R0 bytes static at its start. DDP buckets
 * (last micro-batch only) hold at most G, none before the first gradient, all of G at the
 * embedding point: all_points = 0 adds them there only (a lower bound), 1 at every point
 * from the head's gradients on (an upper bound, and exact with one bucket >= G, which the
 * first gradient opens). */
static double tf_step_peak(const tfk *c, double s, double R0, int all_points)
{
    double L = c->L, h = c->h, a = c->a, f = c->f, V = c->V, b = c->b;
    double e = c->fp32 ? 4 : 2, T = b * s;
    double Pa = 4 * h * h + 6 * h, Pm = 2 * f * h * h + (f + 3) * h, Pl = Pa + Pm;
    double Ph = V * h + 2 * h, Pp = c->pos ? c->S * h : 0, P = L * Pl + Ph + Pp;
    double G = e * P, Gh = e * Ph, Gl = e * Pl, Gm = e * Pm;
    double X = e * T * h;
    double Z = c->flash ? 4 * a * b * s : e * a * b * s * s;
    double D = c->dropout ? 2 * T * h + (c->flash ? 0 : (1 + e) * a * b * s * s) : 0;
    double Am = (1 + 2 * f) * X + (c->dropout ? T * h : 0);
    double A = (7 + 2 * f) * X + Z + D;
    double I = 16 * T, Lg = e * T * V;
    double Ah = I + (L + 1) * X + (c->ckpt ? 0 : L * A) + X + Lg + 4;
    double Zb = c->flash ? 4 * a * b * s : e * a * b * s * s;
    int rel = !c->retain, ck = c->ckpt;
    double peak = 0, R = R0;
    for (uint64_t j = 0; j < c->k; j++) {
        double F = j == 0;
        double bk = c->bucket && j == c->k - 1 ? G : 0, bka = all_points ? bk : 0;
        peak = dmax(peak, R + Ah);
        if (ck)
            peak = dmax(peak, R + I + (L + 1) * X + A + X);
        peak = dmax(peak, R + Ah + Lg);
        peak = dmax(peak, R + Ah + Lg - rel * (Lg + 4) + F * Gh + X + bka);
        peak = dmax(peak, R + Ah - rel * (Lg + 4 + X) + F * Gh + 2 * X + bka);
        for (int end = 0; end < 2; end++) {
            double l = end ? L - 1 : 0;
            double B = R + F * (Gh + (L - 1 - l) * Gl) + X +
                       (rel ? I + (l + 1) * (X + (1 - ck) * A) : Ah) + bka;
            if (ck)
                peak = dmax(peak, B + A + 2 * X);
            peak = dmax(peak, B + ck * A + F * Gm + (2 * f + 1) * X);
            peak = dmax(peak, B + ck * A - ((rel || ck) ? Am : 0) + F * Gl + 5 * X + Zb);
        }
        peak = dmax(peak, R + F * G + X + (rel ? I : Ah) + bk);
        R += F * G + (rel ? 0 : Ah);
    }
    return peak;
}

/* Whole trace: static W + M, O from the second step, the optimizer point W + M + G + O. */
static double tf_predict(const tfk *c, const uint64_t *seqs, double *upper)
{
    double h = c->h, f = c->f, L = c->L;
    double e = c->fp32 ? 4 : 2;
    double P = L * (4 * h * h + 6 * h + 2 * f * h * h + (f + 3) * h) + c->V * h + 2 * h +
               (c->pos ? c->S * h : 0);
    double W = e * P, M = c->fp32 ? 0 : 4 * P, G = e * P;
    double O = c->opt == 0 ? 8 * P : c->opt == 1 ? 4 * P : 0;
    double peak = W + M + G + O, up = peak;
    for (uint64_t t = 0; t < c->steps; t++) {
        double R = W + M + (t ? O : 0);
        peak = dmax(peak, tf_step_peak(c, (double)seqs[t], R, 0));
        up = dmax(up, tf_step_peak(c, (double)seqs[t], R, 1));
    }
    if (upper)
        *upper = up;
    return peak;
}

/* Runs the generator, returns its peak and the sequence length of each step (MARKs). */
static double tf_measure(const tfk *c, char *extra1, char *extra2, uint64_t *seqs, uint64_t *nsteps,
                         uint64_t *hash)
{
    char buf[20][48], *kv[22];
    int n = tf_args(c, buf, kv);
    if (extra1)
        kv[n++] = extra1;
    if (extra2)
        kv[n++] = extra2;
    as_gen *g;
    as_trace_error err;
    if (as_gen_create("transformer", n, kv, &g, &err) != 0) {
        fprintf(stderr, "  transformer: %s\n", err.msg);
        return -1;
    }
    as_event ev;
    double live = 0, peak = 0;
    uint64_t ns = 0, h = 0xcbf29ce484222325ull;
    int rc;
    while ((rc = as_gen_next(g, &ev)) == 0) {
        h = fnv(fnv(fnv(h, ev.op), ev.id), ev.size);
        if (ev.op == AS_OP_ALLOC)
            live += (double)ev.size, peak = dmax(peak, live);
        else if (ev.op == AS_OP_FREE)
            live -= (double)ev.size;
        else if (ev.op == AS_OP_MARK && strncmp(ev.label, "step=", 5) == 0) {
            unsigned long long st, sq;
            if (sscanf(ev.label, "step=%llu seq=%llu", &st, &sq) == 2 && ns < 64)
                seqs[ns++] = sq;
        }
    }
    as_gen_destroy(g);
    if (rc != AS_TRACE_EOF)
        return -1;
    if (nsteps)
        *nsteps = ns;
    if (hash)
        *hash = h;
    return peak;
}

static double tf_fixed_peak(const tfk *c)
{
    uint64_t seqs[64];
    for (int i = 0; i < 64; i++)
        seqs[i] = c->S;
    return tf_predict(c, seqs, NULL);
}

static void gen_transformer_gpt2_small(void)
{
    /* GPT-2 small (the defaults): P = 124,439,808 parameters, the published count. With
     * bf16 + Adam: W + M + O = 14 P = 1,742,157,312 bytes live between steps. Steady
     * peak at the head backward, T = 8192:
     *   1,742,157,312 + I 131,072 + 14 X 176,160,768 + 12 A 4,680,843,264
     *   + 2 Lg 1,646,821,376 + 4 = 8,246,113,796 bytes. */
    uint64_t seqs[64], n;
    char *none[] = {"steps=3"};
    gstats s = gen_kv("transformer", none, 1);
    CU_ASSERT_EQUAL(s.rc, AS_TRACE_EOF);
    CU_ASSERT_EQUAL(s.bad, 0);
    CU_ASSERT_EQUAL(s.peak, 8246113796ull);
    CU_ASSERT_EQUAL(s.end_live_bytes, 1742157312ull);
    tfk gpt2 = {.L = 12,
                .h = 768,
                .a = 12,
                .f = 4,
                .V = 50257,
                .S = 1024,
                .b = 8,
                .k = 1,
                .steps = 3,
                .pos = 1};
    CU_ASSERT_EQUAL(tf_measure(&gpt2, NULL, NULL, seqs, &n, NULL), tf_fixed_peak(&gpt2));
    CU_ASSERT_EQUAL(n, 3);
}

/* Every combination of the switches, on a small model: the generator's peak equals the
 * closed form exactly (sizes are integers, there is no rounding to absorb). */
static void gen_transformer_formula_grid(void)
{
    int fails = 0, runs = 0;
    for (int m = 0; m < 192; m++) {
        tfk c = tf_small;
        c.fp32 = m & 1;
        c.flash = (m >> 1) & 1;
        c.dropout = (m >> 2) & 1;
        c.ckpt = (m >> 3) & 1;
        c.retain = (m >> 4) & 1;
        c.k = (m >> 5) & 1 ? 3 : 1;
        c.opt = (m >> 6) % 3;
        if ((m >> 6) >= 3)
            continue;
        for (int shape = 0; shape < 3; shape++) {
            tfk d = c;
            if (shape == 1) { /* vocab below hidden: the dy point of the head matters */
                d.V = 100;
                d.h = 512;
                d.b = 1;
            } else if (shape == 2) { /* grads dominate: the end of backward wins */
                d.S = 16;
                d.b = 1;
                d.pos = 0;
                d.L = 2;
            }
            uint64_t seqs[64], n;
            double got = tf_measure(&d, NULL, NULL, seqs, &n, NULL), want = tf_fixed_peak(&d);
            runs++;
            if (got != want) {
                fails++;
                fprintf(stderr, "  mismatch m=%d shape=%d: generated %.0f, formula %.0f\n", m,
                        shape, got, want);
            }
        }
    }
    CU_ASSERT_EQUAL(fails, 0);
    CU_ASSERT_EQUAL(runs, 3 * 192);
}

/* The knobs move the peak by what the formula says, in the direction it says. */
static void gen_transformer_knob_effects(void)
{
    uint64_t seqs[64], n;
    tfk base = tf_small;
    base.k = 1;
    double p0 = tf_measure(&base, NULL, NULL, seqs, &n, NULL);
    CU_ASSERT_EQUAL(p0, tf_fixed_peak(&base));

    /* accumulation, graph released: later micro-batches start with all of G live, so the
     * head point grows by G minus what the first micro-batch had of it there (F Gh) */
    tfk acc = base;
    acc.k = 4;
    double pa = tf_measure(&acc, NULL, NULL, seqs, &n, NULL);
    double e = 2, h = base.h, f = base.f, L = base.L;
    double P =
        L * (4 * h * h + 6 * h + 2 * f * h * h + (f + 3) * h) + base.V * h + 2 * h + base.S * h;
    CU_ASSERT(pa > p0);
    CU_ASSERT_EQUAL(pa - p0, tf_fixed_peak(&acc) - tf_fixed_peak(&base));
    /* here the top layer's MLP backward is the max; at k = 1 it already held the head's
     * and that MLP's gradients, so the growth is exactly the rest of G */
    double Gh = e * (base.V * h + 2 * h), Gm = e * (2 * f * h * h + (f + 3) * h);
    CU_ASSERT_EQUAL(pa - p0, e * P - Gh - Gm);

    /* retaining the graph keeps k - 1 more micro-batches of saved activations */
    tfk ret = acc;
    ret.retain = 1;
    double pr = tf_measure(&ret, NULL, NULL, seqs, &n, NULL);
    double T = base.b * base.S, X = e * T * h, Z = e * base.a * base.b * (double)base.S * base.S;
    double A = (7 + 2 * f) * X + Z, Ah = 16 * T + (L + 1) * X + L * A + X + e * T * base.V + 4;
    CU_ASSERT(pr > pa);
    CU_ASSERT_EQUAL(pr, tf_fixed_peak(&ret));
    CU_ASSERT(pr - pa >= 3 * Ah); /* at least the three earlier graphs */

    /* checkpointing: saves only layer inputs, so the peak drops by about (L - 1) A */
    tfk ck = base;
    ck.ckpt = 1;
    double pc = tf_measure(&ck, NULL, NULL, seqs, &n, NULL);
    CU_ASSERT(pc < p0);
    CU_ASSERT_EQUAL(pc, tf_fixed_peak(&ck));
    CU_ASSERT(p0 - pc > (L - 2) * A);

    /* doubling the sequence (same peak point, top layer's MLP backward): what depends on
     * s doubles, except the scores, which quadruple, so the growth beyond double is
     * 2 L Z(128); flash attention removes the s^2 term and the growth is exactly double.
     * The s-independent part is W + M + O + the head's and that MLP's gradients. */
    tfk lng = base;
    lng.S = 256;
    double pl = tf_measure(&lng, NULL, NULL, seqs, &n, NULL);
    CU_ASSERT_EQUAL(pl, tf_fixed_peak(&lng));
    tfk fl = base, fll = lng;
    fl.flash = fll.flash = 1;
    double pf = tf_measure(&fl, NULL, NULL, seqs, &n, NULL);
    double pfl = tf_measure(&fll, NULL, NULL, seqs, &n, NULL);
    CU_ASSERT(pf < p0);
    CU_ASSERT(pl > p0);
    double Gm2 = e * (2 * f * h * h + (f + 3) * h);
    double P256 = P + (256 - 128) * h;
    double fix128 = 14 * P + e * (base.V * h + 2 * h) + Gm2;
    double fix256 = 14 * P256 + e * (base.V * h + 2 * h) + Gm2;
    CU_ASSERT_EQUAL((pl - fix256) - 2 * (p0 - fix128), 2 * L * Z);
    CU_ASSERT_EQUAL(pfl - fix256, 2 * (pf - fix128));

    /* fp32 doubles activations and drops the master copy: 16 P of state either way */
    tfk f32 = base;
    f32.fp32 = 1;
    double p32 = tf_measure(&f32, NULL, NULL, seqs, &n, NULL);
    CU_ASSERT_EQUAL(p32, tf_fixed_peak(&f32));
    CU_ASSERT(p32 - 16 * P > 1.99 * (p0 - 16 * P));
}

static void gen_transformer_buckets(void)
{
    uint64_t seqs[64], n;
    for (int i = 0; i < 64; i++)
        seqs[i] = 16;
    tfk c = tf_small;
    c.S = 16, c.b = 1, c.pos = 0;
    double p0 = tf_measure(&c, NULL, NULL, seqs, &n, NULL);
    double e = 2, h = c.h, f = c.f, L = c.L;
    double G = e * (L * (4 * h * h + 6 * h + 2 * f * h * h + (f + 3) * h) + c.V * h + 2 * h);
    /* one bucket of everything: opened by the first gradient, so + G from there on */
    c.bucket = 1ull << 30;
    double up, lo = tf_predict(&c, seqs, &up);
    double p1 = tf_measure(&c, NULL, NULL, seqs, &n, NULL);
    CU_ASSERT_EQUAL(p1, up);
    CU_ASSERT(p1 > p0 && p1 - p0 <= G);
    /* DDP-sized buckets (1 MiB here): between the two bounds, above the bucket-free peak */
    c.bucket = 1 << 20;
    lo = tf_predict(&c, seqs, &up);
    double p2 = tf_measure(&c, NULL, NULL, seqs, &n, NULL);
    CU_ASSERT(p2 >= lo && p2 <= up);
    CU_ASSERT(p2 > p0 && p2 <= p1);
    tfk d = tf_small;
    for (int i = 0; i < 64; i++)
        seqs[i] = d.S;
    double q0 = tf_measure(&d, NULL, NULL, seqs, &n, NULL);
    d.bucket = 1 << 20;
    lo = tf_predict(&d, seqs, &up);
    double q1 = tf_measure(&d, NULL, NULL, seqs, &n, NULL);
    CU_ASSERT(q1 >= lo && q1 <= up && q1 >= q0);
}

/* Varying sequence lengths: each step's length is in its MARK; the formula over those
 * lengths matches, the seed decides them, and they stay in range. */
static void gen_transformer_varying_seq(void)
{
    uint64_t seed = tu_seed("gen_transformer_varying_seq");
    char sd[64], sd2[64];
    snprintf(sd, sizeof sd, "seed=%llu", (unsigned long long)seed);
    snprintf(sd2, sizeof sd2, "seed=%llu", (unsigned long long)seed + 1);
    tfk c = tf_small;
    c.S = 512, c.steps = 12, c.k = 2;
    uint64_t s1[64], s2[64], s3[64], n1, n2, n3, h1, h2, h3;
    double p1 = tf_measure(&c, "seq_dist=uniform", sd, s1, &n1, &h1);
    double p2 = tf_measure(&c, "seq_dist=uniform", sd, s2, &n2, &h2);
    double p3 = tf_measure(&c, "seq_dist=uniform", sd2, s3, &n3, &h3);
    CU_ASSERT_EQUAL_FATAL(n1, 12);
    CU_ASSERT_EQUAL(p1, p2);
    CU_ASSERT_EQUAL(h1, h2);
    CU_ASSERT_NOT_EQUAL(h1, h3);
    int distinct = 0;
    for (int i = 0; i < 12; i++) {
        CU_ASSERT(s1[i] >= 128 && s1[i] <= 512 && s1[i] % 64 == 0);
        distinct += i && s1[i] != s1[0];
    }
    CU_ASSERT(distinct > 0);
    CU_ASSERT_EQUAL(p1, tf_predict(&c, s1, NULL));
    CU_ASSERT_EQUAL(p3, tf_predict(&c, s3, NULL));
}

static void gen_transformer_streaming(void)
{
    /* 5,000 steps of a 2-layer model, ~1.2 M events: the generator holds only one
     * step's tensors, the same count after 10 steps as after 5,000. */
    char *kv[] = {"layers=2", "hidden=64", "vocab=100", "seq=32", "steps=5000", "accum=2"};
    char *kv10[] = {"layers=2", "hidden=64", "vocab=100", "seq=32", "steps=10", "accum=2"};
    gstats big = run_gen("transformer", 6, kv, UINT64_MAX);
    gstats small = run_gen("transformer", 6, kv10, UINT64_MAX);
    CU_ASSERT_EQUAL(big.rc, AS_TRACE_EOF);
    CU_ASSERT(big.events > 1000000);
    CU_ASSERT_EQUAL(big.bad, 0);
    CU_ASSERT_EQUAL(big.max_gen_live, small.max_gen_live);
    CU_ASSERT_EQUAL(big.peak, small.peak);
}

/* ---- kvcache -------------------------------------------------------------------------- */

/* One request, fixed lengths: prompt P = 100, output O = 50, L = 2 layers, kv = 2 heads *
 * 64 * 2 B = 256 B per token per layer for K (and V), h = 256, f = 512, V = 1000, e = 2.
 * The prefill step holds, at once, the workspace 100 tokens * 2(h + f) * e = 307,200,
 * the cache and the logits 1 * V * 4 = 4,000:
 *   concat: 2L * 100 * 256 = 102,400          -> 413,600
 *   paged:  ceil(100/16) = 7 blocks * 16 * 2L * 256 = 114,688 -> 425,888
 * The last decode step (149 tokens, 1-token workspace 3,072) stays below: concat at most
 * 2L*149*256 + 148*256 + 3,072 = 193,536 (one old tensor alive during its copy). */
static void gen_kvcache_one_request(void)
{
    char *common[] = {"layers=2",        "kv_heads=2",        "head_dim=64",    "hidden=256",
                      "ffn=512",         "vocab=1000",        "requests=1",     "prompt_dist=fixed",
                      "prompt_mean=100", "output_dist=fixed", "output_mean=50", "cache=concat"};
    gstats c = run_gen("kvcache", 12, common, UINT64_MAX);
    CU_ASSERT_EQUAL(c.rc, AS_TRACE_EOF);
    CU_ASSERT_EQUAL(c.bad, 0);
    CU_ASSERT_EQUAL(c.peak, 413600);
    /* 50 steps, each: 2 workspace tensors, logits, and 2L = 4 cache tensors */
    CU_ASSERT_EQUAL(c.allocs, 50 * (3 + 4));
    CU_ASSERT_EQUAL(c.end_live_bytes, 0);
    common[11] = "cache=paged";
    gstats p = run_gen("kvcache", 12, common, UINT64_MAX);
    CU_ASSERT_EQUAL(p.bad, 0);
    CU_ASSERT_EQUAL(p.peak, 425888);
    /* blocks: ceil(149 / 16) = 10 */
    CU_ASSERT_EQUAL(p.allocs, 50 * 3 + 10);
    CU_ASSERT_EQUAL(p.end_live_bytes, 0);
}

static void gen_kvcache_serving(void)
{
    uint64_t seed = tu_seed("gen_kvcache_serving");
    char sd[64], sd2[64];
    snprintf(sd, sizeof sd, "seed=%llu", (unsigned long long)seed);
    snprintf(sd2, sizeof sd2, "seed=%llu", (unsigned long long)seed + 1);
    char *kv[] = {"layers=4",       "requests=80",    "rate=2", "max_batch=8",
                  "prompt_mean=64", "output_mean=32", sd};
    gstats a = run_gen("kvcache", 7, kv, UINT64_MAX), b = run_gen("kvcache", 7, kv, UINT64_MAX);
    kv[6] = sd2;
    gstats c = run_gen("kvcache", 7, kv, UINT64_MAX);
    CU_ASSERT_EQUAL(a.rc, AS_TRACE_EOF);
    CU_ASSERT_EQUAL(a.bad, 0);
    CU_ASSERT_EQUAL(a.hash, b.hash);
    CU_ASSERT_NOT_EQUAL(a.hash, c.hash);
    CU_ASSERT_EQUAL(a.end_live_bytes, 0); /* every request finished and freed its cache */
    /* at most 8 running requests of 2L = 8 tensors, plus a copy and the step's 3 tensors */
    CU_ASSERT(a.max_gen_live <= 8 * 8 + 1 + 3);
    /* paged with the same seed: the same requests, far fewer allocations */
    char *kp[] = {"layers=4",       "requests=80",    "rate=2", "max_batch=8",
                  "prompt_mean=64", "output_mean=32", sd,       "cache=paged"};
    gstats p = run_gen("kvcache", 8, kp, UINT64_MAX);
    CU_ASSERT_EQUAL(p.bad, 0);
    CU_ASSERT(p.allocs * 2 < a.allocs);
}

/* ---- cnn ------------------------------------------------------------------------------ */

/* Parameters: torchvision's published counts, ResNet-50 25,557,032 and ResNet-18
 * 11,689,512 (conv, BN weight and bias, fc), plus the BN running mean and variance
 * (53,120 and 9,600 floats: 2 per BN channel, 26,560 and 4,800 channels), all fp32: that
 * is what is live after the init MARK. SGD momentum then adds 4 bytes per parameter. */
static void gen_cnn_parameter_counts(void)
{
    static const struct {
        const char *depth;
        uint64_t params, bn_buffers;
    } nets[] = {{"depth=50", 25557032, 53120}, {"depth=18", 11689512, 9600}};
    for (int i = 0; i < 2; i++) {
        as_gen *g;
        char depth[16];
        snprintf(depth, sizeof depth, "%s", nets[i].depth);
        char *kv[] = {depth, "steps=2", "batch=8", "batch_dist=fixed"};
        CU_ASSERT_EQUAL_FATAL(as_gen_create("cnn", 4, kv, &g, NULL), 0);
        as_event ev;
        uint64_t live = 0, at_step0 = 0;
        while (as_gen_next(g, &ev) == 0) {
            if (ev.op == AS_OP_ALLOC)
                live += ev.size;
            else if (ev.op == AS_OP_FREE)
                live -= ev.size;
            else if (ev.op == AS_OP_MARK && strcmp(ev.label, "step=0 batch=8") == 0)
                at_step0 = live;
        }
        as_gen_destroy(g);
        CU_ASSERT_EQUAL(at_step0, 4 * (nets[i].params + nets[i].bn_buffers));
        CU_ASSERT_EQUAL(live, 4 * (2 * nets[i].params + nets[i].bn_buffers));
    }
}

/* Saved maps are linear in the batch and the rest does not depend on it, so once the
 * peak sits at the same point (the start of backward, which it does for ResNet-18 at 224
 * pixels from a batch of about 200 up; below, the batch-independent weight gradients
 * move it later) the peaks at 256, 512, 1024 are S + 256a, S + 512a, S + 1024a. */
static void gen_cnn_linear_in_batch(void)
{
    uint64_t pk[3];
    for (int i = 0; i < 3; i++) {
        char b[32];
        snprintf(b, sizeof b, "batch=%d", 256 << i);
        char *kv[] = {"depth=18", "batch_dist=fixed", "steps=2", b};
        gstats s = run_gen("cnn", 4, kv, UINT64_MAX);
        CU_ASSERT_EQUAL(s.bad, 0);
        pk[i] = s.peak;
    }
    CU_ASSERT(pk[0] < pk[1] && pk[1] < pk[2]);
    CU_ASSERT_EQUAL(pk[2] - pk[1], 2 * (pk[1] - pk[0]));
}

static void gen_cnn_batch_varies(void)
{
    uint64_t seed = tu_seed("gen_cnn_batch_varies");
    char sd[64];
    snprintf(sd, sizeof sd, "seed=%llu", (unsigned long long)seed);
    as_gen *g;
    char *kv[] = {"depth=18", "steps=30", "batch=128", "batch_min=16", sd};
    CU_ASSERT_EQUAL_FATAL(as_gen_create("cnn", 5, kv, &g, NULL), 0);
    as_event ev;
    int n = 0, in_range = 1, distinct = 0;
    unsigned first = 0;
    while (as_gen_next(g, &ev) == 0) {
        unsigned st, b;
        if (ev.op == AS_OP_MARK && sscanf(ev.label, "step=%u batch=%u", &st, &b) == 2) {
            in_range &= b >= 16 && b <= 128;
            if (n++ == 0)
                first = b;
            distinct += b != first;
        }
    }
    as_gen_destroy(g);
    CU_ASSERT_EQUAL(n, 30);
    CU_ASSERT(in_range);
    CU_ASSERT(distinct > 0);
}

/* ---- through the reader ------------------------------------------------------------ */

/* 5 M events of the random generator through as_gen_open: the reader validates every
 * one, and its live table stays the size of the live set. */
static void gen_reader_streaming(void)
{
    char *kv[] = {"allocs=2500000", "life_mean=200"};
    as_trace_reader *r;
    as_trace_error err;
    CU_ASSERT_EQUAL_FATAL(as_gen_open("random", 2, kv, &r, &err), 0);
    as_event evs[1024];
    size_t n;
    uint64_t total = 0, live;
    size_t table = 0, max_table = 0;
    int rc;
    while ((rc = as_trace_next_batch(r, evs, 1024, &n)) == 0) {
        total += n;
        as_trace_reader_live(r, &live, &table);
        max_table = table > max_table ? table : max_table;
    }
    CU_ASSERT_EQUAL(rc, AS_TRACE_EOF);
    CU_ASSERT_EQUAL(total, 5000000);
    CU_ASSERT(max_table < 256 * 1024);
    CU_ASSERT_STRING_EQUAL(as_meta_get(as_trace_reader_meta(r), "generator"), "random");
    as_trace_close(r);
    CU_ASSERT_EQUAL(as_gen_open("nosuch", 0, NULL, &r, &err), AS_EUSAGE);
    CU_ASSERT_PTR_NULL(r);
}

/* The committed generated samples are what the generator makes from their metadata, and
 * writing a generator to native and reading it back is lossless. */
static void gen_samples_reproducible(void)
{
    const char *samples[] = {"traces/samples/transformer_gpt2.zst",
                             "traces/samples/kvcache_concat.zst"};
    for (int i = 0; i < 2; i++) {
        as_trace_reader *f, *g;
        CU_ASSERT_EQUAL_FATAL(as_trace_open(tu_path(samples[i]), NULL, &f, NULL), 0);
        const as_meta *m = as_trace_reader_meta(f);
        const char *kind = as_meta_get(m, "generator");
        CU_ASSERT_PTR_NOT_NULL_FATAL(kind);
        char *kv[64], buf[64][128];
        int n = 0;
        for (size_t j = 0; j < m->n && n < 64; j++)
            if (strncmp(m->kv[j].key, "gen.", 4) == 0) {
                snprintf(buf[n], sizeof buf[n], "%s=%s", m->kv[j].key + 4, m->kv[j].value);
                kv[n] = buf[n];
                n++;
            }
        CU_ASSERT_EQUAL_FATAL(as_gen_open(kind, n, kv, &g, NULL), 0);
        as_event a, b;
        int ra, rb, same = 1;
        uint64_t k = 0;
        do {
            ra = as_trace_next(f, &a);
            rb = as_trace_next(g, &b);
            if (ra != rb || (ra == 0 && (a.op != b.op || a.id != b.id || a.size != b.size ||
                                         a.stream != b.stream || a.time_us != b.time_us ||
                                         (a.op == AS_OP_MARK && strcmp(a.label, b.label))))) {
                same = 0;
                fprintf(stderr, "  %s: event %llu differs: regenerate it (README)\n", samples[i],
                        (unsigned long long)k);
                break;
            }
            k++;
        } while (ra == 0);
        CU_ASSERT(same);
        CU_ASSERT_EQUAL(ra, AS_TRACE_EOF);
        CU_ASSERT(k > 10000);
        as_trace_close(f);
        as_trace_close(g);
    }
}

CU_TestInfo test_gen[] = {
    {"knob_errors", gen_knob_errors},
    {"units_and_limits", gen_units_and_limits},
    {"help_lists_every_knob", gen_help_lists_every_knob},
    {"meta_has_knobs", gen_meta_has_knobs},
    {"random_deterministic", gen_random_deterministic},
    {"random_fixed_life", gen_random_fixed_life},
    {"random_histogram", gen_random_histogram},
    {"random_loguniform_and_cap", gen_random_loguniform_and_cap},
    {"random_streaming", gen_random_streaming},
    {"random_deferred", gen_random_deferred},
    {"transformer_gpt2_small", gen_transformer_gpt2_small},
    {"transformer_formula_grid", gen_transformer_formula_grid},
    {"transformer_knob_effects", gen_transformer_knob_effects},
    {"transformer_buckets", gen_transformer_buckets},
    {"transformer_varying_seq", gen_transformer_varying_seq},
    {"transformer_streaming", gen_transformer_streaming},
    {"kvcache_one_request", gen_kvcache_one_request},
    {"kvcache_serving", gen_kvcache_serving},
    {"cnn_parameter_counts", gen_cnn_parameter_counts},
    {"cnn_linear_in_batch", gen_cnn_linear_in_batch},
    {"cnn_batch_varies", gen_cnn_batch_varies},
    {"reader_streaming", gen_reader_streaming},
    {"samples_reproducible", gen_samples_reproducible},
    CU_TEST_INFO_NULL,
};
