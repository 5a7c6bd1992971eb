/*
 * driver.h - the run driver: every policy spec crossed with every capacity over each trace,
 * into one report. `allocsim run` and `allocsim-replay` are both this driver; only the
 * device differs (the engine's factory: NULL for the simulated device, the CUDA device for
 * the replay).
 *
 * The runs of a trace are spec-major (run i is specs[i / ncap] at caps[i % ncap]) and go in
 * groups, each group one engine over one decode of the trace: as many runs as the host
 * memory budget allows (sized by one decode when they do not all fit), at most max_group.
 * A group counts whole or not at all: a failed or interrupted group adds nothing to the
 * report and its log rows are dropped. Results do not depend on the grouping.
 *
 * The driver prints nothing and never exits: every failure goes to on_fail once, with a
 * message naming the file and what was wrong, before the driver returns its code; notes
 * (a trace's skipped records) go to on_note. The command layer prints both.
 */
#ifndef AS_SIM_DRIVER_H
#define AS_SIM_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "policy.h"
#include "report.h"
#include "segmap.h"

/* The default host memory for the runs in flight of `run`, `mincap` and `tune` (--memory):
 * runs that do not fit at once are fed in groups (engine.h's AS_ENGINE_RUN_* say what a
 * run costs). */
#define AS_DRIVER_MEMORY_DEFAULT (2ull << 30)
/* Runs per group with --segments or --timeline: each run in flight spools its rows to a
 * temporary file of its own. */
#define AS_DRIVER_LOG_GROUP 256

/* A report gathered in the runs' own pass (`run`'s call sites and check lines), its hooks
 * on the reading thread, each may be NULL. begin: a group of the trace's runs [r0, r0 + n)
 * at path, read by rd (nothing read yet), is about to run as one engine's runs 0..n-1; it
 * returns what that engine is to hand over, AS_DRIVER_EVENTS (every decoded batch to
 * events), AS_DRIVER_WALKS (each run's walk at its first OOM to walk) and AS_DRIVER_PEAKS
 * (with WALKS: at each new peak of reserved too), or < 0 (a failure: AS_ENOMEM). keep: the
 * group is in the report, trace t's runs from report run base on, engine e's results, rd
 * read to its end; nonzero fails the run. A group that is not kept (a failure, the budget,
 * an interrupt) gets no keep: the next begin follows. */
typedef struct as_driver_pass {
    int (*begin)(void *user, const char *path, const as_trace_reader *rd, size_t r0, size_t n);
    void (*events)(void *user, const as_event *ev, size_t n);
    void (*walk)(void *user, unsigned run, uint64_t event, uint64_t alloc, const char *why,
                 const as_walk_item *it);
    int (*keep)(void *user, const as_report *rep, unsigned t, as_trace_reader *rd,
                const as_engine *e, unsigned base);
    void *user;
} as_driver_pass;

#define AS_DRIVER_EVENTS 1
#define AS_DRIVER_WALKS 2
#define AS_DRIVER_PEAKS 4

/* A failure, handed to on_fail before the driver returns code. */
typedef struct as_driver_fail {
    int code;         /* the code the driver returns: AS_E* of error.h */
    int usage;        /* a usage error: the runs of standard input cannot go in one group */
    const char *path; /* the trace (or the log that could not be written); may be NULL */
    char msg[1024];   /* the whole message: "FILE: byte B (line L, event E): MESSAGE" */
} as_driver_fail;

/* Where the runs are, for a progress line; clear: erase it (a message may follow). */
typedef struct as_driver_progress {
    int clear;
    const char *label;    /* the trace running */
    uint64_t done, total; /* runs over every trace */
    double frac;          /* of all the work, in [0, 1] */
} as_driver_progress;

/* One group of a trace's runs, for the device hooks. */
typedef struct as_driver_group {
    const char *path;           /* the trace */
    size_t r0, n;               /* the trace's runs [r0, r0 + n) */
    const as_policy_spec *spec; /* run r0's spec and capacity */
    uint64_t cap;
    unsigned report_base; /* the report index of run r0 */
} as_driver_group;

typedef struct as_driver_opts {
    const as_policy_spec *specs;
    size_t nspec;
    const uint64_t *caps;
    size_t ncap;
    const as_reader_opts *reader; /* every trace is opened with these (NULL: defaults) */
    /* threads, keep_going, check, timeline_every, dev_params, factory, stop: as the engine
     * takes them. Its callbacks, user and max_live are the driver's (the hooks below). */
    as_engine_opts engine;
    uint64_t budget;  /* host memory for the runs in flight; 0 = AS_DRIVER_MEMORY_DEFAULT */
    size_t max_group; /* runs per engine at most; 0 = no limit (1: a device of which one
                         alone may exist, as the GPU's ballast) */
    as_runlog *segs, *timeline;     /* borrowed, NULL = none; rows go in as groups complete */
    const char *seg_name, *tl_name; /* their names, for a write failure */
    as_segmap *segmap;              /* borrowed, NULL = none: a second pass per group */
    const as_driver_pass *pass;     /* borrowed, NULL = none: see as_driver_pass */
    /* Several traces: skip_bad names each one that cannot be read (on_fail) and goes on;
     * without it every trace is decoded before any run and the first bad one stops. */
    int skip_bad;
    unsigned shard, nshards; /* only the traces at k with k % nshards == shard (0: all) */
    void *user;
    /* Hooks, each may be NULL. on_group runs before a group's engine runs (a device that
     * needs the run's spec); nonzero fails the group with that code (on_fail names it).
     * on_group_done runs once the group is in the report. */
    int (*on_group)(void *user, const as_driver_group *g);
    void (*on_group_done)(void *user, const as_driver_group *g, const as_engine *e);
    void (*on_segment)(void *user, const as_seg_record *r); /* after the segs log */
    void (*on_block)(void *user, const as_block_record *r); /* the engine's on_block */
    void (*on_progress)(void *user, const as_driver_progress *p);
    void (*on_fail)(void *user, const as_driver_fail *f);
    void (*on_note)(void *user, const char *msg);
} as_driver_opts;

typedef struct as_driver_result {
    uint64_t runs_total; /* of the shard's traces */
    unsigned nbad;       /* traces that could not be read (skip_bad) */
    unsigned *units;     /* per trace of the report, its position among the paths (jsonl);
                            the caller's array of n entries */
    unsigned nunits;
} as_driver_result;

/* Runs every spec at every capacity over paths[0..n) ('-' is stdin) into rep. Returns 0,
 * AS_ENGINE_STOPPED when *engine.stop was set (the groups that finished are in the
 * report), or the negative code of the failure that stopped it (on_fail had it). res->units
 * must hold n entries. */
int as_driver_run(const as_driver_opts *o, char *const *paths, unsigned n, as_report *rep,
                  as_driver_result *res);

/* The warning for trace t of rep when runs have a capacity below its smallest request
 * (each fails at its first allocation): 1 with msg filled, else 0. */
int as_driver_small_caps(const as_report *rep, unsigned t, char *msg, size_t n);

/* The fraction of one engine's work done: each finished run counts what it handled, each
 * run still going the whole trace, whose length comes from `events_total` when known
 * (nonzero) or else from the bytes read of the input. 0 when nothing can be estimated. */
double as_driver_engine_frac(const as_engine_progress *e, uint64_t events_total);

#endif
