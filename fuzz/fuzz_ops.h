/*
 * fuzz_ops.h - a trace as an editable list of operations, for the structure-aware mutators
 * of fuzz_policy and fuzz_patho.
 *
 * Inputs of those harnesses are allocsim text traces, so every corpus file and every crash
 * is a trace that `allocsim` replays. The mutators parse the input with the project's
 * reader, edit the list (insert, delete, resize, move, duplicate), and write it back as
 * text. A free names its allocation by a tag that survives edits; fz_normalize drops the
 * frees that an edit made invalid (of a removed or not yet made allocation, twice), so
 * every written trace is valid and ids come out as ordinals again.
 */
#ifndef AS_FUZZ_FUZZ_OPS_H
#define AS_FUZZ_FUZZ_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

typedef struct fz_op {
    uint8_t op;      /* as_op; MARKs are dropped */
    uint32_t tag;    /* ALLOC: its tag; FREE/FREE_REQ: the tag of the allocation */
    uint64_t size;   /* ALLOC */
    uint64_t stream; /* ALLOC */
} fz_op;

typedef struct fz_trace {
    fz_op *ops;
    size_t n, cap;
    uint32_t next_tag;
    as_meta meta;
} fz_trace;

/* What the mutator may generate. Sizes are unit * [1, nmax] when unit > 0, else bytes
 * drawn log-uniformly from 1 B to 2^max_log2 B with a bias to round numbers and 2 MiB
 * boundaries. */
typedef struct fz_params {
    uint64_t unit, nmax;
    unsigned max_log2;
    size_t max_ops;
    int streams; /* vary the stream (0..3) */
    int extras;  /* FREE_REQ and EMPTY_CACHE */
    int phases;  /* also the phase-shifting edits (fuzz_patho): a whole size class
                    resized by a step, an operation moved a few places */
} fz_params;

/* Parses any trace the reader accepts (0), or returns its error (< 0). */
int fz_parse(const uint8_t *data, size_t size, fz_trace *t);
void fz_free(fz_trace *t);
int fz_push(fz_trace *t, fz_op op);
/* Drops frees of allocations that are not live at that point, and FREE_REQ twice. */
void fz_normalize(fz_trace *t);
/* Writes t as an allocsim text trace (ids as ordinals). Returns the length, or 0 when it
 * does not fit in cap. */
size_t fz_write_text(const fz_trace *t, uint8_t *out, size_t cap);
/* The mutators' output step: writes t into data (max_size bytes), cutting operations from
 * the end until it fits; if nothing fits, leaves data as it was. Returns the new size,
 * never 0 for a non-empty input (libFuzzer mishandles an empty unit replacing another). */
size_t fz_write_out(fz_trace *t, uint8_t *data, size_t size, size_t max_size);
/* One to a few random edits; normalises. */
void fz_mutate(fz_trace *t, uint64_t *rng, const fz_params *p);
/* A fresh random trace of about n operations. */
void fz_random(fz_trace *t, uint64_t *rng, const fz_params *p, size_t n);
uint64_t fz_rand(uint64_t *rng);
uint64_t fz_size(uint64_t *rng, const fz_params *p);

#endif
