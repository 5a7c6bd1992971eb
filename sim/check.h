/*
 * check.h - does the simulation reproduce a recorded run? (`allocsim check`, and the line
 * `run` prints for snapshots).
 *
 * A torch snapshot holds its own ground truth: the segment_alloc/segment_free (and, with
 * expandable segments, segment_map/unmap) entries the real allocator made. as_check runs
 * the trace through `torch` under the setting the snapshot records (allocator_settings),
 * on a device that hands out the recorded segment addresses (PyTorch breaks best-fit ties
 * on the address, so placement must not be a second source of difference), starting from
 * the pool as it was when recording began, and compares its device-level events with the
 * recorded ones, action, address and size, keyed by the allocation being served.
 *
 * The pool at the start (as_check_start): the segments alive at the dump, plus those the
 * trace frees, minus those it creates; in them the blocks live at the start (those freed
 * by the trace without being allocated in it, at their addresses, and those live at the
 * dump that the trace never touched), and free space around them. Blocks of large
 * segments are never 1 MiB or smaller (a split leaves more than 1 MiB), so a gap of at
 * most 1 MiB after a live block is that block's unsplit remainder (not so with expandable
 * segments, which split at 512 B). An expandable segment at the start is the dump's mapped
 * range less what the trace mapped at its end; one the trace unmapped from, or a stream's
 * pool in several ranges, is not rebuilt.
 */
#ifndef AS_SIM_CHECK_H
#define AS_SIM_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"
#include "recdev.h"
#include "trace.h"

/* The setting a snapshot's allocator_settings records, normalised to a spec the policy
 * parser reads (a PYTORCH_CUDA_ALLOC_CONF string, "torch" when every knob is at its
 * default), from its parsed keys (torch.max_split_size, torch.expandable_segments,
 * torch.garbage_collection_threshold, torch.roundup_power2_divisions) and, for the keys
 * the snapshot does not parse, its PYTORCH_CUDA_ALLOC_CONF string (large_segment_size_mb,
 * max_non_split_rounding_mb). *fraction is its per_process_memory_fraction (0 when not
 * set or 1). Returns 0, or AS_EINVAL with why (no allocator_settings: the snapshot is
 * older than PyTorch 2.4 or not one; backend:cudaMallocAsync). */
int as_recorded_setting(const as_meta *m, char *spec, size_t n, double *fraction, char *why,
                        size_t why_len);

/* The reconstruction's summary (info and check print it). */
typedef struct as_check_start {
    int possible;                   /* the trace begins with state it did not create */
    int reconstructed;              /* and it was rebuilt (else why says why not) */
    uint64_t segments, reserved;    /* segments alive at the start, their bytes */
    uint64_t live, live_bytes;      /* blocks live at the start, their bytes */
    uint64_t from_frees, from_dump; /* of those: freed in the trace; live at the dump */
    uint64_t sizes_inferred;        /* block sizes taken from the request (freed blocks) */
    char why[160];
} as_check_start;

typedef as_recdev_ev as_check_ev; /* action: an as_dev_action */

typedef struct as_check_result {
    char spec[300]; /* the recorded setting as run */
    as_check_start start;
    size_t recorded, simulated; /* segment events */
    size_t first_diff;          /* index of the first difference, or SIZE_MAX */
    int have_rec, have_sim;     /* at first_diff */
    as_check_ev rec, sim;
    uint64_t rec_peak, sim_peak; /* reserved, the start's included */
    uint64_t oom_alloc;          /* the simulation ran out at this ALLOC (UINT64_MAX: no) */
    int reproduced;
    char why[240]; /* a difference: the likely cause, from what the snapshot holds */
} as_check_result;

/* Checks the snapshot at path (read with opts). Returns 0 with *out filled (reproduced or
 * not), or < 0: a trace error in *err (path, offset, message), or AS_EINVAL with
 * err->msg saying why the trace cannot be checked (not a snapshot, no device-level
 * entries, no recorded setting). */
int as_check(const char *path, const as_reader_opts *opts, as_check_result *out,
             as_trace_error *err);
/* The same on a reader that a pass has read to its end (its snapshot record and metadata
 * are the check's), with the events it read, ev[0..n) in order without the MARKs (borrowed),
 * so that the trace is not read again; path names it. */
int as_check_events(as_trace_reader *rd, const char *path, const as_event *ev, size_t n,
                    as_check_result *out, as_trace_error *err);

/* The pool at the start of an open snapshot reader's trace, summarised (no simulation). */
void as_check_start_of(const as_trace_reader *r, as_check_start *out);

/* The segment map at the dump (a state-only snapshot has nothing else), split as
 * memory_viz's segment summary (torch.cuda._memory_viz segsum) splits it: internal free
 * is what allocated blocks hold beyond their request, external free the inactive blocks
 * inside segments. */
typedef struct as_dump_state {
    uint64_t segments, small_segments, reserved;
    uint64_t allocated, allocated_blocks, requested; /* active_allocated blocks */
    uint64_t pending, pending_blocks;                /* active_pending_free */
    uint64_t free_bytes, free_blocks, largest_free;  /* inactive */
    uint64_t internal, external;
    uint64_t entries; /* the device's trace entries */
    int state_only;   /* no history: at most one trace entry (enabled="state", or none) */
} as_dump_state;
void as_dump_state_of(const as_snapshot_record *rec, as_dump_state *out);

/* The one line that says it: "reproduced: ..." or "differs at segment event ...". */
void as_check_line(const as_check_result *r, char *buf, size_t n);

#endif
