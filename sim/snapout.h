/*
 * snapout.h - one simulated run written back as a torch.cuda.memory._dump_snapshot() pickle
 * (`allocsim run --snapshot-out`), for pytorch.org/memory_viz and torch.cuda._memory_viz.
 *
 * The engine's device events (on_segment) and blocks (on_block) of the one run are kept
 * here while it runs; as_snapout_write then reads the trace a second time and writes, in
 * trace order, `device_traces[0]`: each ALLOC as `alloc` at its simulated block address
 * (after the segment_alloc/segment_map it caused), each free as `free_requested` and
 * `free_completed`, the segment events a free or an empty_cache() caused after it, and an
 * `oom` where the run failed a request; `segments`: the segments alive when the run ended,
 * with their blocks (live allocations, and the gaps between them as inactive blocks);
 * `allocator_settings` when the policy is torch. Frames come from the trace's site table.
 * Invariant: every address of an entry is the simulated one, so importing the file gives
 * the trace's events (empty_cache() calls and marks aside: a snapshot has no entry for
 * them) and `allocsim check` finds the run's own segment events.
 */
#ifndef AS_SIM_SNAPOUT_H
#define AS_SIM_SNAPOUT_H

#include <stdio.h>

#include "engine.h"
#include "policy.h"
#include "trace.h"

typedef struct as_snapout as_snapout;

int as_snapout_create(as_snapout **out);
void as_snapout_free(as_snapout *s);
/* The run's records, as the engine hands them over (one run; run numbers are ignored). A
 * failure (host memory) is kept and returned by as_snapout_write. */
void as_snapout_segment(as_snapout *s, const as_seg_record *r);
void as_snapout_block(as_snapout *s, const as_block_record *r);
/* Writes the pickle of the run `res` (under spec) of trace `path` (read again with opts;
 * not stdin) to f. 0, or < 0 with a one-line reason in why (a trace error names the file,
 * byte and event). */
int as_snapout_write(as_snapout *s, const char *path, const as_reader_opts *opts,
                     const as_policy_spec *spec, const as_run_result *res, FILE *f, char *why,
                     size_t why_len);

#endif
