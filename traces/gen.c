/*
 * gen.c - the generator framework: kind registry, knob parsing and help, the event queue
 * the kinds fill one phase at a time, the PRNG, and the wrapping into a trace reader.
 *
 * Invariant: the queue only ever holds one phase (one refill) of events, so memory is
 * bounded by what a kind queues per phase, never by the trace length.
 */
#include "gen.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_impl.h"
#include "grow.h"
#include "source.h"

static const gen_kind *const kinds[] = {
    &as_gen_transformer,
    &as_gen_kvcache,
    &as_gen_cnn,
    &as_gen_random,
    &as_gen_robson,
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

/* A queued event; labels live in the arena as offsets, because it may move. */
typedef struct qev {
    as_event ev;
    size_t label; /* offset into lab, or SIZE_MAX */
} qev;

struct as_gen {
    const gen_kind *kind;
    void *st;
    gen_val *vals;
    char **strs; /* owned copies of GEN_STR values */
    as_meta meta;
    qev *q;
    size_t qn, qcap, qhead;
    char *lab;
    size_t labn, labcap;
    uint64_t nalloc; /* ids handed out */
    uint64_t live;
    int64_t time_us;
    int err;  /* sticky */
    int done; /* refill said EOF */
};

/* ---- PRNG ------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void gen_rng_seed(gen_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t gen_rng_u64(gen_rng *r)
{
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

double gen_rng_unit(gen_rng *r)
{
    return (double)(gen_rng_u64(r) >> 11) * 0x1.0p-53;
}

uint64_t gen_rng_below(gen_rng *r, uint64_t n)
{
    uint64_t lim = -n % n; /* reject the short top range (2^64 mod n) */
    for (;;) {
        uint64_t x = gen_rng_u64(r);
        if (x >= lim)
            return x % n;
    }
}

double gen_rng_exp(gen_rng *r, double mean)
{
    return -mean * log1p(-gen_rng_unit(r));
}

uint64_t gen_rng_poisson(gen_rng *r, double lambda)
{
    if (lambda <= 0)
        return 0;
    if (lambda > 60) { /* normal approximation: exact enough for arrivals, and O(1) */
        double u1 = gen_rng_unit(r), u2 = gen_rng_unit(r);
        double z = sqrt(-2 * log1p(-u1)) * cos(6.283185307179586 * u2);
        double x = floor(lambda + sqrt(lambda) * z + 0.5);
        return x < 0 ? 0 : (uint64_t)x;
    }
    double l = exp(-lambda), p = 1;
    uint64_t k = 0;
    do {
        k++;
        p *= gen_rng_unit(r);
    } while (p > l);
    return k - 1;
}

/* ---- Queue ------------------------------------------------------------------------ */

void gen_fail(as_gen *g, int code)
{
    if (!g->err)
        g->err = code;
}

static qev *push(as_gen *g)
{
    if (as_grow((void **)&g->q, &g->qcap, g->qn + 1, sizeof *g->q, 1024) < 0) {
        gen_fail(g, AS_ENOMEM);
        return NULL;
    }
    qev *e = &g->q[g->qn++];
    memset(e, 0, sizeof *e);
    e->ev.time_us = g->time_us;
    e->label = SIZE_MAX;
    return e;
}

uint64_t gen_alloc(as_gen *g, uint64_t size, uint64_t stream)
{
    qev *e = push(g);
    uint64_t id = g->nalloc++;
    if (e) {
        e->ev.op = AS_OP_ALLOC;
        e->ev.id = id;
        e->ev.size = size ? size : 1;
        e->ev.stream = stream;
    }
    g->live++;
    return id;
}

static void push_free(as_gen *g, as_op op, uint64_t id, uint64_t size, uint64_t stream)
{
    qev *e = push(g);
    if (e) {
        e->ev.op = op;
        e->ev.id = id;
        e->ev.size = size ? size : 1;
        e->ev.stream = stream;
    }
}

void gen_free(as_gen *g, uint64_t id, uint64_t size, uint64_t stream)
{
    push_free(g, AS_OP_FREE, id, size, stream);
    g->live--;
}

void gen_free_req(as_gen *g, uint64_t id, uint64_t size, uint64_t stream)
{
    push_free(g, AS_OP_FREE_REQ, id, size, stream);
}

void gen_empty_cache(as_gen *g)
{
    qev *e = push(g);
    if (e)
        e->ev.op = AS_OP_EMPTY_CACHE;
}

void gen_set_time(as_gen *g, int64_t t)
{
    g->time_us = t;
}

void gen_mark(as_gen *g, const char *fmt, ...)
{
    char buf[AS_MAX_LABEL + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t n = strlen(buf) + 1;
    if (g->labn + n > g->labcap) {
        size_t nc = g->labcap ? g->labcap * 2 : 4096;
        while (nc < g->labn + n)
            nc *= 2;
        char *nl = realloc(g->lab, nc);
        if (!nl) {
            gen_fail(g, AS_ENOMEM);
            return;
        }
        g->lab = nl;
        g->labcap = nc;
    }
    qev *e = push(g);
    if (!e)
        return;
    memcpy(g->lab + g->labn, buf, n);
    e->ev.op = AS_OP_MARK;
    e->label = g->labn;
    g->labn += n;
}

int as_gen_next(as_gen *g, as_event *ev)
{
    while (g->qhead == g->qn) {
        if (g->err)
            return g->err;
        if (g->done)
            return AS_TRACE_EOF;
        g->qhead = g->qn = 0;
        g->labn = 0;
        int rc = g->kind->refill(g, g->st);
        if (g->err)
            return g->err;
        if (rc < 0) {
            g->err = rc;
            return rc;
        }
        if (rc == AS_TRACE_EOF)
            g->done = 1;
    }
    qev *e = &g->q[g->qhead++];
    *ev = e->ev;
    ev->label = e->label == SIZE_MAX ? NULL : g->lab + e->label;
    return 0;
}

/* ---- Knobs ------------------------------------------------------------------------ */

/* A count: an integer, possibly written 1e6, or with K/M/G (10^3, 10^6, 10^9). */
static int parse_count(const char *s, uint64_t *out)
{
    char *end;
    if (!s || !*s || isspace((unsigned char)*s) || *s == '-')
        return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0))
        return -1;
    double m = 1;
    if (*end == 'K' || *end == 'k')
        m = 1e3, end++;
    else if (*end == 'M')
        m = 1e6, end++;
    else if (*end == 'G')
        m = 1e9, end++;
    v *= m;
    if (*end || v >= 18446744073709551615.0 || v != floor(v))
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static int parse_bool(const char *s, uint64_t *out)
{
    static const char *t[] = {"1", "true", "on", "yes"}, *f[] = {"0", "false", "off", "no"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, t[i]) == 0)
            return *out = 1, 0;
        if (strcmp(s, f[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

static int parse_enum(const char *choices, const char *s, uint64_t *out)
{
    size_t n = strlen(s);
    uint64_t idx = 0;
    for (const char *p = choices; *p; idx++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, s, n) == 0)
            return *out = idx, 0;
        if (!bar)
            break;
        p = bar + 1;
    }
    return -1;
}

static int usage(as_trace_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage(as_trace_error *err, const char *fmt, ...)
{
    if (err) {
        memset(err, 0, sizeof *err);
        err->code = AS_EUSAGE;
        snprintf(err->path, sizeof err->path, "gen");
        err->offset = UINT64_MAX;
        err->event = UINT64_MAX;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return AS_EUSAGE;
}

static int set_knob(as_gen *g, size_t i, const char *text, as_trace_error *err)
{
    const gen_knob *k = &g->kind->knobs[i];
    gen_val *v = &g->vals[i];
    char *end;
    switch (k->type) {
    case GEN_U64: {
        uint64_t x;
        if (parse_count(text, &x) < 0)
            return usage(err, "%s: %s=%s: expected a non-negative integer (1e6, 10K, 2M allowed)",
                         g->kind->name, k->name, text);
        if ((double)x < k->min || (double)x > k->max)
            return usage(err, "%s: %s=%s: out of range [%.0f, %.0f]", g->kind->name, k->name, text,
                         k->min, k->max);
        v->u = x;
        break;
    }
    case GEN_SIZE: {
        uint64_t x;
        if (as_parse_size(text, strlen(text), &x) < 0)
            return usage(err, "%s: %s=%s: expected a size in bytes (units K M G T, KiB, MB...)",
                         g->kind->name, k->name, text);
        if ((double)x < k->min || (double)x > k->max)
            return usage(err, "%s: %s=%s: out of range [%.0f, %.0f] bytes", g->kind->name, k->name,
                         text, k->min, k->max);
        v->u = x;
        break;
    }
    case GEN_F64: {
        errno = 0;
        double x = strtod(text, &end);
        if (errno || end == text || *end || !isfinite(x))
            return usage(err, "%s: %s=%s: expected a number", g->kind->name, k->name, text);
        if (x < k->min || x > k->max)
            return usage(err, "%s: %s=%s: out of range [%g, %g]", g->kind->name, k->name, text,
                         k->min, k->max);
        v->d = x;
        break;
    }
    case GEN_BOOL:
        if (parse_bool(text, &v->u) < 0)
            return usage(err, "%s: %s=%s: expected 0/1, true/false, on/off", g->kind->name, k->name,
                         text);
        break;
    case GEN_ENUM:
        if (parse_enum(k->choices, text, &v->u) < 0)
            return usage(err, "%s: %s=%s: expected one of %s", g->kind->name, k->name, text,
                         k->choices);
        break;
    case GEN_STR: {
        char *c = strdup(text);
        if (!c)
            return AS_ENOMEM;
        free(g->strs[i]);
        g->strs[i] = c;
        v->s = c;
        break;
    }
    }
    return 0;
}

static const gen_kind *find_kind(const char *name)
{
    for (size_t i = 0; name && i < NKINDS; i++)
        if (strcmp(kinds[i]->name, name) == 0)
            return kinds[i];
    return NULL;
}

void as_gen_destroy(as_gen *g)
{
    if (!g)
        return;
    if (g->st && g->kind->fini)
        g->kind->fini(g->st);
    free(g->st);
    if (g->strs)
        for (size_t i = 0; i < g->kind->nknobs; i++)
            free(g->strs[i]);
    free(g->strs);
    free(g->vals);
    as_meta_free(&g->meta);
    free(g->q);
    free(g->lab);
    free(g);
}

int as_gen_create(const char *kind, int nkv, char *const kv[], as_gen **out, as_trace_error *err)
{
    int rc;
    as_trace_error local;
    if (!err)
        err = &local;
    memset(err, 0, sizeof *err);
    *out = NULL;
    const gen_kind *k = find_kind(kind);
    if (!k)
        return usage(err, "unknown generator '%s' (try: transformer kvcache cnn random)",
                     kind ? kind : "(null)");
    as_gen *g = calloc(1, sizeof *g);
    if (!g)
        return AS_ENOMEM;
    g->kind = k;
    g->time_us = AS_TIME_NONE;
    g->vals = calloc(k->nknobs, sizeof *g->vals);
    g->strs = calloc(k->nknobs, sizeof *g->strs);
    g->st = calloc(1, k->state_size ? k->state_size : 1);
    rc = AS_ENOMEM;
    if (!g->vals || !g->strs || !g->st)
        goto fail;
    const char **text = calloc(k->nknobs, sizeof *text);
    if (!text)
        goto fail;
    for (size_t i = 0; i < k->nknobs; i++)
        text[i] = k->knobs[i].def;
    for (int j = 0; j < nkv; j++) {
        const char *eq = kv[j] ? strchr(kv[j], '=') : NULL;
        if (!eq) {
            rc = usage(err, "%s: '%s': expected name=value", k->name, kv[j] ? kv[j] : "");
            free(text);
            goto fail;
        }
        size_t nl = (size_t)(eq - kv[j]), i;
        for (i = 0; i < k->nknobs; i++)
            if (strlen(k->knobs[i].name) == nl && strncmp(k->knobs[i].name, kv[j], nl) == 0)
                break;
        if (i == k->nknobs) {
            rc = usage(err, "%s: unknown knob '%.*s' (see allocsim gen --help %s)", k->name,
                       (int)nl, kv[j], k->name);
            free(text);
            goto fail;
        }
        text[i] = eq + 1;
    }
    /* meta.c's setter: the keys below are all distinct and valid (knob names are) */
    rc = as_meta_set(&g->meta, "source", "gen");
    if (!rc)
        rc = as_meta_set(&g->meta, "generator", k->name);
    for (size_t i = 0; i < k->nknobs && !rc; i++) {
        rc = set_knob(g, i, text[i], err);
        if (!rc) {
            char key[96];
            snprintf(key, sizeof key, "gen.%s", k->knobs[i].name);
            rc = as_meta_set(&g->meta, key, text[i]);
        }
    }
    free(text);
    if (rc)
        goto fail;
    rc = k->init(g, g->st, g->vals, err);
    if (rc) {
        if (rc == AS_EUSAGE) { /* the kind wrote only the message */
            char msg[sizeof err->msg];
            memcpy(msg, err->msg, sizeof msg);
            usage(err, "%s", msg);
        }
        goto fail;
    }
    *out = g;
    return 0;
fail:
    if (rc == AS_ENOMEM) {
        usage(err, "%s: out of host memory", k->name);
        err->code = AS_ENOMEM;
    }
    as_gen_destroy(g);
    return rc;
}

const as_meta *as_gen_meta(const as_gen *g)
{
    return &g->meta;
}
uint64_t as_gen_live(const as_gen *g)
{
    return g->live;
}

/* ---- As a trace source ------------------------------------------------------------ */

static int src_next(void *st, as_event *ev, as_trace_error *err)
{
    as_gen *g = st;
    int rc = as_gen_next(g, ev);
    if (rc < 0 && err) {
        usage(err, "gen %s: %s", g->kind->name,
              rc == AS_ENOMEM ? "out of host memory" : "generator failed");
        err->code = rc;
    }
    return rc;
}

static void src_close(void *st)
{
    as_gen_destroy(st);
}

static const as_source_ops gen_source = {
    .name = "gen",
    .fmt = AS_FMT_UNKNOWN,
    .next = src_next,
    .close = src_close,
};

int as_gen_open(const char *kind, int nkv, char *const kv[], as_trace_reader **out,
                as_trace_error *err)
{
    as_gen *g;
    *out = NULL;
    int rc = as_gen_create(kind, nkv, kv, &g, err);
    if (rc)
        return rc;
    char name[64];
    snprintf(name, sizeof name, "gen:%s", kind);
    rc = as_trace_reader_from_source(&gen_source, g, &g->meta, name, out);
    if (rc) { /* from_source has closed g */
        usage(err, "gen %s: cannot create the reader", kind);
        if (err)
            err->code = rc;
    }
    return rc;
}

/* ---- Help ------------------------------------------------------------------------- */

static char *help_text[NKINDS + 1];
static pthread_once_t help_once = PTHREAD_ONCE_INIT;

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0)
        return;
    if (b->n + (size_t)need + 1 > b->cap) {
        size_t nc = (b->cap ? b->cap * 2 : 4096) + (size_t)need;
        char *np = realloc(b->p, nc);
        if (!np)
            return;
        b->p = np;
        b->cap = nc;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)need;
}

static void build_help(void)
{
    sbuf all = {0};
    sb_printf(&all, "generators (allocsim gen KIND [knob=value ...] -o OUT):\n");
    for (size_t i = 0; i < NKINDS; i++) {
        const gen_kind *k = kinds[i];
        sb_printf(&all, "  %-12s %s\n", k->name, k->summary);
        sbuf b = {0};
        sb_printf(&b, "%s - %s\n\n%s\nknobs (name=value; default, unit):\n", k->name, k->summary,
                  k->text);
        for (size_t j = 0; j < k->nknobs; j++) {
            const gen_knob *kn = &k->knobs[j];
            sb_printf(&b, "  %-16s default %s%s%s%s%s\n      %s\n", kn->name, kn->def,
                      kn->unit && *kn->unit ? " " : "", kn->unit ? kn->unit : "",
                      kn->choices ? "; one of " : "", kn->choices ? kn->choices : "", kn->help);
        }
        sb_printf(&b, "\nSizes in bytes take K/M/G/T (binary: KiB...; KB/MB/GB are decimal);\n"
                      "counts may be written 1e6 or 10K/2M/1G (decimal). The same knobs (seed\n"
                      "included) always give the same trace.\n");
        help_text[i] = b.p;
    }
    sb_printf(&all, "allocsim gen --help KIND shows each one's knobs.\n");
    help_text[NKINDS] = all.p;
}

const char *as_gen_help(const char *kind)
{
    pthread_once(&help_once, build_help);
    if (!kind)
        return help_text[NKINDS];
    for (size_t i = 0; i < NKINDS; i++)
        if (strcmp(kinds[i]->name, kind) == 0)
            return help_text[i];
    return NULL;
}
