/*
 * mincap.h - the minimum capacity of a trace under one policy, and capacity sweeps.
 *
 * Minimum capacity (sim/REPORT.md "Metrics"): the smallest capacity, in steps of the device
 * granularity (2 MiB), at which the whole trace runs. Fitting is not monotone in the
 * capacity (a larger device can fail where a smaller one fits: PyTorch frees its cache
 * only when a reserve would pass the limit, so a smaller limit can leave a better
 * layout), so the search also says whether every capacity from the minimum up to the
 * uncapped peak reserved fits, and lists the ones that do not.
 *
 * Method, exact by construction: when the device enforces the capacity, no capacity below
 * peak_requested rounded up to the granularity can fit (reserved memory holds every live
 * request, is a multiple of the granularity and never passes the capacity), and the
 * uncapped peak reserved P fits for any policy that does not read the capacity. A policy
 * that enforces the capacity itself (AS_POLICY_F_LIMITS_ITSELF: PyTorch's memory
 * fraction) may hold somewhat more than it (expandable segments map whole 20 MiB pages
 * after checking the 2 MiB-rounded size), so a run can fit below peak requested: for such a
 * policy the sweep goes on downwards until every capacity from `below` (default
 * AS_MINCAP_BELOW) under the lowest fitting one has been run and failed; the answer is
 * exact as long as the policy never passes its limit by more than that. Every grid capacity in
 * between is run, batched into passes of many runs over one decode of the trace. Bisection alone
 * would find *a* fit/fail boundary, not the smallest fitting capacity nor the failures above it,
 * and no cheaper rule is exact for every policy: a run's path depends on the capacity through every
 * refused reserve, and some policies (PyTorch's garbage_collection_threshold) read the capacity on
 * every allocation.
 */
#ifndef AS_SIM_MINCAP_H
#define AS_SIM_MINCAP_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

/* How far below the lowest fitting capacity a self-limiting policy is probed: three of
 * PyTorch's 20 MiB expandable pages, more than it can pass its limit by. */
#define AS_MINCAP_BELOW (64ull << 20)
#include "policy.h"
#include "trace.h"

/* Opens a fresh reader over the same trace for each pass. Returns 0 or < 0 (err filled). */
typedef int (*as_trace_open_fn)(void *user, as_trace_reader **out, as_trace_error *err);

typedef struct as_mincap_opts {
    unsigned batch; /* capacities per pass (one decode each); 0 = 64 */
    /* Host memory for one pass's runs; 0 = no limit. The batch shrinks to fit it, by the
     * trace's peak live allocations (as_engine_run_bytes). */
    uint64_t memory;
    uint64_t max_points; /* most grid capacities (probes below included); 0 = no limit */
    unsigned threads;    /* engine threads; 0 = the engine's default */
    uint64_t step;       /* grid step; 0 = AS_DEV_GRANULARITY. Coarser steps are not exact. */
    uint64_t below;      /* self-limiting policies: 0 = AS_MINCAP_BELOW (see above) */
    /* The highest capacity swept (a card's usable memory: fitting above it does not
     * matter), rounded down to the step; 0 = the uncapped peak reserved. */
    uint64_t max;
    /* Called before the grid and after each pass with the capacities done and the total. */
    void (*on_progress)(void *user, uint64_t done, uint64_t total);
    void *user;
    /* Passed to each pass's engine (engine.h): a stop flag (as_mincap then returns
     * AS_ENGINE_STOPPED) and the progress within a pass (user as above). */
    const volatile sig_atomic_t *stop;
    void (*on_runs)(void *user, const as_engine_progress *p);
    /* 1: one run per capacity, `batch` runs per decode (the method above); 0: curve mode
     * (curve.h) when the trace's events fit in a quarter of `memory`: the trace is
     * decoded into memory once and the grid's runs share their common prefix, forking
     * where a capacity decision splits them; the results are the same. */
    int exact_passes;
    int no_caught_ooms; /* every engine's (engine.h): OOMs at workspace requests stop runs */
    uint32_t streams;   /* every engine's (engine.h): the CUDA streams the process makes */
} as_mincap_opts;

/* The outcome at one capacity of the sweep. */
typedef struct as_mincap_point {
    uint64_t capacity;
    int completed;
    uint64_t oom_event, oom_alloc; /* AS_NONE when completed */
    uint64_t allocs;               /* allocations served (all of them when completed) */
    uint64_t peak_requested, peak_reserved;
} as_mincap_point;

/* Consecutive capacities of the grid that fail, above the minimum. */
typedef struct as_cap_range {
    uint64_t lo, hi; /* inclusive */
    uint64_t count;  /* grid capacities in [lo, hi] */
    uint64_t oom_alloc_min, oom_alloc_max;
} as_cap_range;

typedef struct as_mincap_result {
    uint64_t events, allocs; /* of the trace */
    uint64_t peak_requested; /* of the trace */
    uint64_t peak_reserved;  /* of the uncapped run */
    uint64_t step, lo, hi;   /* the grid swept: lo, lo + step, ..., hi */
    uint64_t min_capacity;   /* smallest grid capacity that fits; AS_NONE if none */
    int monotone;            /* 1 when every grid capacity in [min_capacity, hi] fits */
    uint64_t fits_from;      /* smallest c with every grid capacity in [c, hi] fitting;
                                AS_NONE when hi itself fails */
    as_cap_range *gaps;      /* failing ranges above min_capacity, ascending */
    size_t ngaps;
    as_mincap_point *points; /* every grid capacity, ascending */
    size_t npoints;
    uint64_t passes;  /* decodes of the trace, the uncapped one included */
    int self_limited; /* the policy enforces the capacity itself: probed below (see above) */
    uint64_t below;   /* self_limited: the lowest capacity run, else 0 */
} as_mincap_result;

/* Runs the search for one policy spec. Returns 0, a trace error (< 0, err filled), an
 * engine error (< 0, why filled with the engine's message) or AS_ELIMIT: the grid is larger
 * than opts.max_points (why says how large, and a step that would fit; the engine runs set
 * no max_live, so AS_ELIMIT means only this). */
int as_mincap(as_trace_open_fn open, void *open_user, const as_policy_spec *spec,
              const as_mincap_opts *opts, as_mincap_result *out, as_trace_error *err, char *why,
              size_t why_len);
void as_mincap_result_free(as_mincap_result *r);

/* Parses a sweep "LO:HI:STEP" or "LO..HI/STEP" (byte quantities with units, as -c) into
 * the capacities LO, LO+STEP, ..., <= HI. Returns 0, or -1 with a reason in why. At most
 * max_count capacities (a guard against "0:80G:1"). *caps is malloc'd. */
int as_sweep_parse(const char *text, uint64_t max_count, uint64_t **caps, size_t *n, char *why,
                   size_t why_len);

#endif
