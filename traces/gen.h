/*
 * gen.h - synthetic workload generators: transformer training, LLM KV-cache serving,
 * CNN training with a varying batch, and the classic random baseline.
 *
 * A generator is a stream: its state is proportional to the allocations it keeps live
 * (plus, for the model generators, one step's schedule), never to the number of events it
 * has produced, so a 100 M event trace costs no more memory than a small one. The output
 * is a pure function of the kind and the knobs (`seed` included).
 *
 * Knobs are `name=value` strings. Sizes take a unit: K/M/G/T and KiB/MiB/GiB/TiB are
 * binary, KB/MB/GB/TB decimal (as in the text format); plain numbers are bytes and may be
 * written 1e6. Counts (allocs=, steps=) may be written 1e6 or with K/M/G = 10^3/6/9.
 */
#ifndef AS_TRACES_GEN_H
#define AS_TRACES_GEN_H

#include <stdint.h>

#include "trace.h"

/* Opens a generator as an ordinary trace reader (the same validation as a file), so the
 * engine can run on it directly and `allocsim gen` can write it. kv[i] is "name=value".
 * An unknown kind or knob, or a bad value, is AS_EUSAGE with err->msg naming it. */
int as_gen_open(const char *kind, int nkv, char *const kv[], as_trace_reader **out,
                as_trace_error *err);

/* Help text for one kind: what it models, every knob with its default and unit, and for
 * the model generators the closed-form peak of requested memory. With kind NULL: the list
 * of kinds with one line each. NULL for an unknown kind. The text is static. */
const char *as_gen_help(const char *kind);

/* ---- Lower level: the raw event stream, without a reader around it ---------------------
 * For the bench and the fuzzer, which want events as fast as they come. Events are valid
 * by construction (ids are ordinals, FREE* carry the allocation's size and stream). */
typedef struct as_gen as_gen;

int as_gen_create(const char *kind, int nkv, char *const kv[], as_gen **out, as_trace_error *err);
/* 0 with *ev filled (a MARK label is valid until the next call), AS_TRACE_EOF, or < 0. */
int as_gen_next(as_gen *g, as_event *ev);
/* source=gen, generator=KIND and gen.KNOB=VALUE for every knob, defaults included. */
const as_meta *as_gen_meta(const as_gen *g);
/* Allocations the generator holds live right now (its state is proportional to this). */
uint64_t as_gen_live(const as_gen *g);
void as_gen_destroy(as_gen *g);

#endif
