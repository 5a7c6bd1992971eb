/*
 * segmap.h - the segment map CSV (`allocsim run --segment-map F`): each run's address
 * space at its reserved peak and at its OOM, one row per block, for plots/segments.gp.
 *
 *   run,when,segment,seg_addr,seg_size,block_addr,block_size,state,stream,pool,event,alloc,id
 *
 * `when` is "peak" (right after the event at which the run first reached its peak
 * reserved) or "oom" (at the first OOM, after the policy's own recovery attempts);
 * `segment` numbers the run's segments 0.. in address order within one map; `state` is
 * allocated, free, pending (freed by the program, a stream still uses it) or unmapped
 * (expandable segments); `id` is the allocation ordinal of an allocated or pending block.
 *
 * The peak is only known once a run has ended, so the map comes from a second decode of
 * the trace in which the same runs stop to walk their policy at that event: exact, and
 * as cheap as the first pass, where walking at every new peak would not be.
 */
#ifndef AS_SIM_SEGMAP_H
#define AS_SIM_SEGMAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine.h"
#include "policy.h"
#include "trace.h"

typedef struct as_segmap as_segmap;

/* A map written to f, a stream the caller owns (close flushes and checks it but does not
 * close it). Rows are kept per run and written in run order on close. Returns 0 or
 * AS_ENOMEM. */
int as_segmap_open_stream(FILE *f, as_segmap **out);
/* Forgets the rows of report runs >= first (a pass that was interrupted). */
void as_segmap_drop_from(as_segmap *m, unsigned first);

/* The second pass for runs [r0, r0 + n) of one trace, which engine `first` ran as its runs
 * 0..n-1. Run i is specs[i / ncap] at caps[i % ncap] (spec-major, as `allocsim run` adds
 * them); rd is a fresh reader over the same trace; base supplies threads and keep_going;
 * run_base is the report's index of the engine's run 0. Returns 0, a trace error (< 0, err
 * filled) or an engine error (< 0, why filled). */
int as_segmap_pass(as_segmap *m, const as_engine *first, as_trace_reader *rd,
                   const as_engine_opts *base, const as_policy_spec *specs, const uint64_t *caps,
                   size_t ncap, size_t r0, size_t n, unsigned run_base, as_trace_error *err,
                   char *why, size_t why_len);

/* Writes the header and every run's rows and frees m. Returns 0, the first failure of a
 * pass (AS_ENOMEM, AS_EINVAL) or AS_EIO; why (unless NULL) words it ("write failed: ..."),
 * for the caller to put after the file's name. */
int as_segmap_close(as_segmap *m, char *why, size_t why_len);

#endif
