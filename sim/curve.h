/*
 * curve.h - curve mode: one policy spec at every capacity of a grid, sharing the work the
 * runs have in common, with results bit-identical to one run per capacity.
 *
 * Runs at different capacities behave identically until the first decision that depends
 * on the capacity, and every such decision is a monotone question to the device
 * (device.h cap_test; the simulated device's own refusals). One run carries an interval
 * of the grid; where a question's answer differs inside it, the interval is split at the
 * boundary (a binary search with the exact question) and the run forks (fork(2): the
 * copy-on-write copy of the process duplicates the policy, device, placement and engine
 * state exactly, with no per-policy clone code). A capacity() read (a policy needing the
 * number) splits the interval into single capacities. Each leaf writes the result of its
 * capacities into an array shared by every process of the curve.
 *
 * Invariant: a process's interval is the set of grid capacities whose one-capacity runs
 * would have taken exactly the path it took so far, so its result is theirs.
 *
 * At most `procs` processes run at once (a process-shared semaphore of tokens; a process
 * that cannot get one for a child hands it its own and waits: depth first). Each process
 * runs its engine single-threaded over events decoded into memory beforehand (a reader's
 * file offset would be shared across fork), read in place (as_engine_run_slotted: the
 * pages of the array stay shared by every process). No side outputs (segments, timeline). The
 * host timings of a result (wall_s, cpu_s, events_per_second) are not per run in a
 * curve: they are 0. POSIX (fork, process-shared semaphores, MAP_ANONYMOUS); Linux tested.
 */
#ifndef AS_SIM_CURVE_H
#define AS_SIM_CURVE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "policy.h"
#include "simdev.h"
#include "trace.h"

typedef struct as_curve_opts {
    unsigned procs;                     /* processes running at once; 0 = 1 */
    const as_simdev_params *dev_params; /* NULL = defaults (the capacity comes per run) */
    const volatile sig_atomic_t *stop;  /* as engine.h: then AS_ENGINE_STOPPED */
    /* A capacity() read before the curve has split even once (bfc's limit from the
     * fraction at init; torch above an H200) leaves nothing to share: 0 = give up with
     * AS_CURVE_PINNED (the caller runs one pass per capacity instead), 1 = fork one
     * process per capacity there. */
    int pin;
    /* OOMs the program survives (engine.h): the trace's call sites, NULL for none, and the
     * switch that turns the model off. */
    const as_sites *sites;
    int no_caught_ooms;
    uint32_t streams; /* the CUDA streams the process makes (engine.h) */
} as_curve_opts;

/* as_curve_run's result when opts.pin is 0 and the policy read the capacity itself. */
#define AS_CURVE_PINNED 2

/* Runs spec at grid[0..n) (ascending, finite capacities) over evs[0..nev), whose live slots
 * are a reader's (as_trace_next_batch's, or as_engine_number_slots' for events made by
 * hand: every process reads them in place); out[i] is the
 * result at grid[i], as as_engine_result would give it for a run at that capacity alone
 * (timings 0; policy and spec point into spec). Returns 0, AS_ENGINE_STOPPED,
 * AS_CURVE_PINNED, or < 0 with
 * a message in why (an engine error, a trace error in the events, or fork/shared memory
 * failing: AS_ENOMEM). */
int as_curve_run(const as_policy_spec *spec, const uint64_t *grid, size_t n, const as_event *evs,
                 size_t nev, const as_curve_opts *opts, as_run_result *out, char *why,
                 size_t why_len);

#endif
