/*
 * tune.h - `allocsim tune`'s engine: the PYTORCH_CUDA_ALLOC_CONF settings users actually
 * set, each run at one capacity (the card's usable memory) from one decode of the trace,
 * ranked, and the capacity curves (sim/mincap.c, capped at the card) of the best.
 *
 * The search space (as_tune_space): expandable_segments False/True x max_split_size_mb
 * off, 32, 64, 128, 256, 512, 1024 x roundup_power2_divisions off, 2, 4, 8, 16,
 * [256:1,512:2,1024:4,>:8] x garbage_collection_threshold off, 0.6, 0.8: 252 settings,
 * the default first. Each is a PYTORCH_CUDA_ALLOC_CONF string in PyTorch's own syntax
 * ("" for the default), which the spec parser reads verbatim.
 *
 * Ranking (as_tune_rank), the contract tests/test_tune.c checks on crafted traces:
 *   1. a setting that fits (the whole trace runs at the capacity) before one that does not;
 *   2. among those that fit: lower peak reserved first (more headroom on the card); among
 *      those that do not: the one that got further (later OOM allocation) first, then the
 *      lower peak reserved;
 *   3. ties: the default first, then the simpler setting (fewer knobs set), then less
 *      modelled device time, then the text.
 * Curves (as_tune_curves) then run for the `curves` best settings that fit and behave
 * differently at the card (distinct outcome); those are re-ordered among themselves by
 * the smallest capacity from which every capacity up to the card fits (the room the
 * setting really has), ties as in 3; and room within AS_TUNE_ROOM_TIE of the most is a
 * tie too: of those, the default, then the simpler, then the cheaper in device time
 * leads. The recommendation is the first setting. When none fits at the card, the first
 * one's curve without the card's cap says how far it misses (min_capacity; max_points caps
 * that grid, and past it the miss stays unknown).
 *
 * Streams (opts.streams, engine.h's encoding): the CUDA streams the process makes take 2 MiB
 * pages of the card (as_simdev_stream_memory) that PyTorch's own limit, which the torch
 * runs model the card's capacity with, does not count. So the settings run at the card's
 * capacity less those pages (result.capacity), the engine places the pages in the heap as
 * the process makes them, and every curve capacity reported is the card's: the allocator's
 * plus the pages. One scan of the trace first counts its streams (a trace of one stream
 * makes none, except under EACH's one per stream: none of memory either).
 *
 * A garbage_collection_threshold setting whose twin without it never reserved more than the
 * threshold at the capacity is the same run as the twin (no collection can start): it takes
 * the twin's results instead of a run of its own (tune.c, "twins"; result.runs counts the
 * runs made).
 *
 * Invariant: nothing here prints; results are exact engine runs (or a twin's, proven equal).
 */
#ifndef AS_SIM_TUNE_H
#define AS_SIM_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "mincap.h"

/* Rooms closer than this tie: 64 MiB, half of how much the memory outside the allocator
 * moved over one real training process's life on the H200 (651 to 788 MB, sim/CARDS.md),
 * so a difference below it is within what the card model cannot promise. */
#define AS_TUNE_ROOM_TIE (64ull << 20)

typedef struct as_tune_item {
    char *conf;     /* PYTORCH_CUDA_ALLOC_CONF text, "" = the default (owned) */
    unsigned knobs; /* how many knobs it sets: the simplicity of 3 */
    unsigned index; /* its place in the search space (shards keep it) */
    /* at the capacity: */
    int completed;
    uint64_t oom_event, oom_alloc, oom_size; /* AS_NONE when completed */
    uint64_t peak_requested, peak_reserved;
    uint64_t device_reserves, device_releases;
    double device_time_s;
    /* the curve, when has_curve: */
    int has_curve;
    uint64_t min_capacity, fits_from; /* AS_NONE when none */
    as_cap_range *gaps;               /* failing ranges above min_capacity (owned) */
    size_t ngaps;
    uint64_t curve_lo, curve_hi, curve_points;
} as_tune_item;

typedef struct as_tune_opts {
    uint64_t capacity;       /* the card's usable bytes */
    unsigned threads;        /* engine threads; 0 = default */
    uint64_t memory;         /* host memory for the runs in flight; 0 = no limit */
    unsigned curves;         /* settings whose curves are run (default set by the caller) */
    uint64_t curve_max;      /* top of the curves; 0 = capacity */
    unsigned shard, nshards; /* run only items with index % nshards == shard (0-based) */
    uint64_t max_points;     /* most capacities of the nothing-fits curve; 0 = no limit */
    int no_caught_ooms;      /* engine.h: OOMs at workspace requests stop runs */
    uint32_t streams;        /* engine.h: the CUDA streams the process makes; 0 = none */
    /* 1: every setting runs; 0: a garbage_collection_threshold setting whose twin without
     * it provably behaves the same takes the twin's results (tune.c, "twins") */
    int every_setting;
    void (*on_progress)(void *user, const char *what, uint64_t done, uint64_t total);
    void *user;
} as_tune_opts;

typedef struct as_tune_result {
    as_tune_item *items; /* ranked */
    size_t n;
    uint64_t events, allocs, peak_requested; /* of the trace */
    uint64_t decodes;
    uint64_t runs; /* settings run at the capacity (the others took a twin's results) */
    /* with opts.streams: the trace's streams, the streams the process makes for them and
     * the bytes their pages take of the card; capacity is what that leaves the allocator */
    uint64_t trace_streams;
    uint32_t streams;
    uint64_t stream_bytes, capacity;
} as_tune_result;

/* The search space, default first: *confs (n strings, malloc'd, free with
 * as_tune_space_free). Returns 0 or AS_ENOMEM. */
int as_tune_space(char ***confs, size_t *n);
void as_tune_space_free(char **confs, size_t n);
/* Knobs a PYTORCH_CUDA_ALLOC_CONF text sets (its comma-separated key:value pairs outside
 * brackets). */
unsigned as_tune_knobs(const char *conf);

/* Runs every setting of the space (or confs[0..n) when confs is given) at opts->capacity,
 * ranks them (1-3 above), runs the curves and ranks again. Returns 0, or < 0 with err (a
 * trace error) or why (an engine or spec error) filled. */
int as_tune(as_trace_open_fn open, void *open_user, char **confs, size_t nconfs,
            const as_tune_opts *opts, as_tune_result *out, as_trace_error *err, char *why,
            size_t why_len);
/* Sorts items by rules 1-3 (curves ignored). */
void as_tune_rank(as_tune_item *items, size_t n);
/* Sorts the leading items that have curves by rule "curves" above, the rest untouched. */
void as_tune_rank_curves(as_tune_item *items, size_t n);
void as_tune_result_free(as_tune_result *r);

#endif
