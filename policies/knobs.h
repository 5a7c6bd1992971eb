/*
 * knobs.h - the knobs shared by several policies, written once.
 *
 * A knob means the same thing in every policy that has it: `round` (granularity, bytes),
 * `roundup` (power-of-two divisions, PyTorch's rule), `maxsplit` (MiB; blocks at least
 * this big are neither split nor handed to smaller requests), `segment` (MiB), `release`
 * (give whole free segments back: none, oom, always). Policies put these entries in
 * their knob tables and call the helpers below rather than re-deriving the rules.
 */
#ifndef AS_POLICIES_KNOBS_H
#define AS_POLICIES_KNOBS_H

#include <stdint.h>

#include "policy.h"

#define AS_MIB (1ull << 20)

/* Table entries. DEF is the policy's own default. */
#define AS_KNOB_ROUND(DEF)                                                                  \
    { .name = "round", .type = AS_KNOB_SIZE, .unit = "bytes", .def = (DEF), .min = 1,       \
      .max = 1ll << 30, .help = "round every request up to a multiple of this (power of 2)" }
#define AS_KNOB_ROUNDUP                                                                     \
    { .name = "roundup", .alias = "roundup_power2_divisions", .type = AS_KNOB_DIVS,         \
      .unit = "divisions", .def = 0, .min = 0, .max = 1 << 16,                              \
      .help = "split each power-of-2 interval into N steps and round up to a step; "        \
              "int or [MiB:N,...,>:N]; 0/1 = off" }
#define AS_KNOB_MAXSPLIT                                                                    \
    { .name = "maxsplit", .alias = "max_split_size_mb", .type = AS_KNOB_INT, .unit = "MiB", \
      .def = 0, .min = 0, .max = INT64_MAX / (1 << 20),                                     \
      .help = "blocks of at least this many MiB are never split nor given to smaller "      \
              "requests; 0 = off" }
#define AS_KNOB_SEGMENT(DEF)                                                                \
    { .name = "segment", .type = AS_KNOB_INT, .unit = "MiB", .def = (DEF), .min = 2,        \
      .max = 1 << 20, .help = "size of a new device segment (rounded up to fit a request)" }
#define AS_KNOB_RELEASE(DEF)                                                                \
    { .name = "release", .type = AS_KNOB_ENUM, .unit = "", .def = (DEF), .min = 0, .max = 2, \
      .choices = "none|oom|always",                                                         \
      .help = "return whole free segments to the device: never, when an allocation would "  \
              "fail, or as soon as they empty" }

enum { AS_RELEASE_NONE = 0, AS_RELEASE_OOM = 1, AS_RELEASE_ALWAYS = 2 };

/* PyTorch's round_size() generalised: sizes below `round` become `round`; with
 * d = div[interval(size)] > 1 and size > round * d, round up to the next 1/d step of the
 * enclosing power of two (powers of two unchanged); otherwise round up to a multiple of
 * `round`. `round` is a power of two. div may be NULL (no divisions). */
uint64_t as_round_size(uint64_t size, uint64_t round, const uint32_t *div);

/* The interval index PyTorch uses for roundup_power2_divisions: max(0, floor(log2 s) - 20)
 * clamped to AS_DIV_INTERVALS - 1. */
unsigned as_div_interval(uint64_t size);

static inline uint64_t as_align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

#endif
