/*
 * gen_impl.h - internals shared by the generator kinds (gen_*.c) and gen.c: the knob
 * tables, the event queue each kind fills one phase at a time, and a seeded PRNG.
 *
 * Invariant: ids are handed out by gen_alloc in order, so they are the ALLOC ordinals the
 * event model requires; a kind never invents an id itself.
 */
#ifndef AS_TRACES_GEN_IMPL_H
#define AS_TRACES_GEN_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "gen.h"

typedef enum gen_ktype {
    GEN_U64,  /* count, integer */
    GEN_SIZE, /* bytes, with units */
    GEN_F64,  /* real number */
    GEN_BOOL, /* 0/1, true/false, on/off, yes/no */
    GEN_ENUM, /* one of choices "a|b|c": the index */
    GEN_STR,  /* free text, parsed by the kind */
} gen_ktype;

typedef struct gen_knob {
    const char *name;
    gen_ktype type;
    const char *def;     /* default, as text */
    const char *unit;    /* shown in help */
    const char *choices; /* GEN_ENUM */
    double min, max;     /* numeric range, inclusive (GEN_U64/SIZE/F64) */
    const char *help;
} gen_knob;

typedef union gen_val {
    uint64_t u;    /* U64, SIZE, BOOL, ENUM */
    double d;      /* F64 */
    const char *s; /* STR: owned by the as_gen */
} gen_val;

typedef struct gen_tensor {
    uint64_t id, size;
} gen_tensor;

typedef struct gen_kind {
    const char *name;
    const char *summary; /* one line */
    const char *text;    /* what it models, the formula: shown before the knobs */
    const gen_knob *knobs;
    size_t nknobs;
    size_t state_size;
    /* v[i] holds knobs[i]. Returns 0 or < 0 with err filled (AS_EUSAGE for knobs
     * that contradict each other). */
    int (*init)(as_gen *g, void *st, const gen_val *v, as_trace_error *err);
    /* Queues the next phase's events: 0, AS_TRACE_EOF when done, or < 0. */
    int (*refill)(as_gen *g, void *st);
    void (*fini)(void *st);
} gen_kind;

extern const gen_kind as_gen_random, as_gen_transformer, as_gen_kvcache, as_gen_cnn,
    as_gen_robson;

/* Queueing. gen_alloc returns the new id (its ordinal). Errors (host memory) are sticky
 * and reported by the next as_gen_next. */
uint64_t gen_alloc(as_gen *g, uint64_t size, uint64_t stream);
void gen_free(as_gen *g, uint64_t id, uint64_t size, uint64_t stream);
void gen_free_req(as_gen *g, uint64_t id, uint64_t size, uint64_t stream);
void gen_empty_cache(as_gen *g);
void gen_mark(as_gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gen_set_time(as_gen *g, int64_t time_us); /* stamps the events queued after it */
void gen_fail(as_gen *g, int code);            /* sticky error from a kind */

static inline gen_tensor gen_t(as_gen *g, uint64_t size)
{
    gen_tensor t = {gen_alloc(g, size, 0), size};
    return t;
}
static inline void gen_tfree(as_gen *g, gen_tensor *t)
{
    if (t->size) {
        gen_free(g, t->id, t->size, 0);
        t->size = 0;
    }
}

/* xoshiro256** seeded through splitmix64: fast, and the same stream on every platform. */
typedef struct gen_rng {
    uint64_t s[4];
} gen_rng;

void gen_rng_seed(gen_rng *r, uint64_t seed);
uint64_t gen_rng_u64(gen_rng *r);
double gen_rng_unit(gen_rng *r);                /* [0, 1) with 53 bits */
uint64_t gen_rng_below(gen_rng *r, uint64_t n); /* [0, n), unbiased; n > 0 */
double gen_rng_exp(gen_rng *r, double mean);    /* exponential */
uint64_t gen_rng_poisson(gen_rng *r, double lambda);

#endif
