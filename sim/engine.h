/*
 * engine.h - the discrete-event engine: one trace, decoded once, feeds every run.
 *
 * A run is one (policy spec, capacity) pair with its own policy state and device. The
 * engine reads the trace in batches and hands each batch to every run (runs may go to
 * worker threads; results do not depend on how many). Every metric of sim/REPORT.md is
 * computed per run: requested/allocated/reserved now and at peak, fragmentation, waste,
 * the OOM point, device call counts and modelled device time.
 *
 * Indices: `event` is the 0-based position in the trace, `alloc` the 0-based ordinal
 * among ALLOC events. A device-level event is keyed by the alloc ordinal of the request
 * being served; one outside any ALLOC (EMPTY_CACHE) carries the ordinal of the next ALLOC.
 */
#ifndef AS_SIM_ENGINE_H
#define AS_SIM_ENGINE_H

#include <signal.h>
#include <stdint.h>

#include "error.h"
#include "policy.h"
#include "simdev.h"
#include "trace.h"

/* Errors are codes of the one error space (error.h): AS_EPOLICY (a policy returned an
 * error, not an OOM: a bug), AS_ECHECK (check() failed in a checked run), AS_EDEVICE (the
 * device factory failed), AS_ENOMEM (host memory ran out), AS_EUSAGE (API misuse: no runs,
 * run called twice, bad spec), AS_ELIMIT (more allocations live at once than opts.max_live
 * allows), or the trace's own code. */

/* Host memory of one run, for memory budgets (as_engine_run_bytes): measured with
 * /usr/bin/time -v over 2,000 runs of a 10-allocation trace (segfit 85 KB a run, the others
 * 52-64 KB: policy arena and device tables at their first capacity, the live table, the
 * result) and over 11 runs of a trace with 94,964 allocations live at its peak (130 to 224
 * bytes per live allocation: the live table, the policy's blocks and segments; nocache the
 * most); --segments/--timeline buffer up to a batch of rows per run. */
#define AS_ENGINE_RUN_BASE (96u << 10)
#define AS_ENGINE_RUN_PER_LIVE 256u
#define AS_ENGINE_RUN_LOGS (512u << 10)
/* Each stream past the first: torch and gmlake keep pools per stream. Measured with
 * /usr/bin/time over 1 and 5 runs of a trace with 30,000 streams and one allocation live on
 * each: 1,197 (torch) and 1,211 (gmlake) bytes a run per stream and its allocation, 124 for
 * bestfit; without this term a 1 MB trace of fresh streams took 2 GB under a 256 MB
 * --memory. The budget's limit counts a stream as AS_ENGINE_STREAM_LIVES allocations. */
#define AS_ENGINE_RUN_PER_STREAM 1024u
#define AS_ENGINE_STREAM_LIVES (AS_ENGINE_RUN_PER_STREAM / AS_ENGINE_RUN_PER_LIVE)

#define AS_NONE UINT64_MAX /* oom_event/oom_alloc when no OOM */

typedef struct as_run_result {
    const char *policy;            /* canonical spec text */
    uint64_t capacity;             /* AS_CAPACITY_NONE when unlimited */
    int completed;                 /* 1 when every event ran and every ALLOC was served (no OOM) */
    uint64_t oom_event, oom_alloc; /* AS_NONE when no OOM */
    uint64_t oom_size;             /* the request that failed */
    uint64_t oom_reserved, oom_allocated, oom_requested; /* at the OOM */
    uint64_t ooms;                                       /* > 1 only with keep_going */
    uint64_t events, allocs; /* handled by this run; at a stopping OOM = oom_event/_alloc */
    uint64_t peak_requested, peak_allocated, peak_reserved;
    uint64_t final_reserved;
    double fragmentation; /* 1 - peak_allocated / peak_reserved (0 when nothing reserved) */
    uint64_t waste;       /* peak_reserved - peak_requested (0 if negative) */
    double max_ext_frag;  /* max over sampled instants of 1 - largest_free/free_in_reserved:
                             each new peak of reserved, the first OOM, every 65536 events */
    uint64_t device_reserves, device_releases; /* reserve+map, release+unmap calls */
    uint64_t device_refusals;
    double device_time_s;     /* modelled by the device cost model */
    double wall_s;            /* host wall-clock time spent in this run's policy loop */
    double events_per_second; /* events / cpu_s: CPU based, steady on a loaded machine */
    uint64_t retries;         /* policy-specific retries (PyTorch num_alloc_retries) */
    /* Additions (after the original fields, so older initialisers still work): */
    uint64_t oom_free_bytes;      /* free bytes inside reserved memory at the OOM */
    uint64_t oom_largest_free;    /* the largest free block at the OOM */
    uint64_t peak_reserved_event; /* first event after which peak_reserved was reached */
    uint64_t final_allocated, final_requested; /* after the last event this run handled */
    uint64_t peak_pending; /* block bytes freed by FREE_REQ and awaiting their FREE, max */
    uint64_t oom_pending;  /* the same at the OOM */
    double cpu_s;          /* CPU time (of whichever thread ran it) of this run's policy loop: the
                              engine's per-event work and the policy; decoding is not in it */
    const char *spec;      /* the spec as the user typed it (policy is its canonical form) */
    int finished;          /* the run ended (its last event, a stopping OOM); 0 only for a run
                              still going when as_engine_run returned AS_ENGINE_STOPPED */
    int offline;           /* its policy planned from the whole trace (as_policy.plan): the
                              report's yardstick (sim/REPORT.md, the table) */
    /* OOMs the program survives (sim/caught.h): refused cuDNN workspace requests treated as
     * caught (not in ooms: the run goes on), and later workspace requests that got the
     * cached fallback engine at once (no allocation). */
    uint64_t caught_ooms, caught_fallbacks;
    int no_caught_ooms; /* the model was off (opts.no_caught_ooms): for passes that rerun it */
    uint32_t streams;   /* opts.streams, likewise */
    /* opts.walk_at_peak: the run's last new peak got no walk, as its peak walks had used
     * up their budget (AS_ENGINE_PEAK_WALK_BUDGET): a report that needs the peak's walk
     * walks it in a pass of its own (as_engine_walk_after at peak_reserved_event). */
    int peak_walk_missed;
} as_run_result;

/* as_engine_run's and as_engine_scan's result (not an error) when *opts.stop was set:
 * the runs whose result says `finished` are whole. */
#define AS_ENGINE_STOPPED 1

/* Where the runs of an engine are, for a progress display (opts.on_runs). */
typedef struct as_engine_progress {
    uint64_t events;                  /* events handed to the runs so far */
    uint64_t decoded;                 /* events decoded so far (a batch ahead) */
    uint64_t bytes_done, bytes_total; /* input consumed, and its size (0 when unknown) */
    unsigned runs, runs_done;         /* runs, and those that have ended (a stopping OOM) */
    uint64_t run_events;              /* events handled, summed over the runs */
} as_engine_progress;

/* A device-level event with its position, for --segments. */
typedef struct as_seg_record {
    unsigned run;
    uint64_t alloc, event;
    as_dev_event dev;
} as_seg_record;

/* A block the policy handed out, for --snapshot-out (sim/snapout.h): allocation `alloc`
 * (its ordinal, the ALLOC's id) got [addr, addr + size) while handling event `event`. */
typedef struct as_block_record {
    unsigned run;
    uint64_t event, alloc;
    uint64_t addr, size;
} as_block_record;

/* A timeline sample, for --timeline: taken every `timeline_every` events and at every
 * new peak of reserved, and at the OOM. */
typedef struct as_timeline_sample {
    unsigned run;
    uint64_t event, alloc;
    int64_t time_us; /* since the trace's first timed event; AS_TIME_NONE when untimed */
    uint64_t requested, allocated, reserved;
} as_timeline_sample;

/* Makes the device for one run. The default (NULL) is a simulated device with the given
 * capacity and default costs. The replay build passes a CUDA device here. */
typedef struct as_device_factory {
    int (*create)(void *user, uint64_t capacity, as_device *out, void **handle);
    void (*destroy)(void *user, void *handle);
    /* Fills counters at the end of a run (reserved peak, calls, time). */
    void (*counters)(void *user, void *handle, as_dev_counters *out);
    /* Routes device events to the engine's log. */
    void (*set_log)(void *user, void *handle, as_dev_log_fn fn, void *log_user);
    void *user;
} as_device_factory;

typedef struct as_engine_opts {
    unsigned threads;        /* 0 = one per run, up to the cores */
    int keep_going;          /* after an OOM, skip the failed request and go on */
    int check;               /* call policy check() after every event (slow; tests, fuzz) */
    uint64_t timeline_every; /* 0 = no timeline */
    void (*on_segment)(void *user, const as_seg_record *r);     /* NULL = no log */
    void (*on_sample)(void *user, const as_timeline_sample *s); /* NULL = none */
    /* Called from the reading thread about every 2^20 events (progress display). */
    void (*on_progress)(void *user, uint64_t events, uint64_t bytes_done, uint64_t bytes_total);
    void *user;
    const as_simdev_params *dev_params; /* NULL = defaults (capacity comes per run) */
    const as_device_factory *factory;   /* NULL = simulated device */
    /* Segment map hook (additions): walk the policy at each run's first OOM (walk_at_oom)
     * and right after the event set with as_engine_walk_after(). Like the other records,
     * the items are buffered per run and handed over by the reading thread after each
     * batch, in run order. `why` is "oom" or "event"; item->pool must be a static string. */
    void (*on_walk)(void *user, unsigned run, uint64_t event, uint64_t alloc, const char *why,
                    const as_walk_item *item);
    int walk_at_oom;
    /* Memory budget (addition): 0 = none; else as_engine_run stops with AS_ELIMIT,
     * before the runs see it, at the first batch in which the trace has more allocations
     * live at once, each stream past the first counted as AS_ENGINE_STREAM_LIVES of them
     * (as_engine_live_weight). The runs' results are then void (the callbacks saw the batches before). */
    uint64_t max_live;
    /* Stop and progress (additions). When *stop is nonzero after a batch (a signal handler
     * may set it), as_engine_run stops with AS_ENGINE_STOPPED; every result is filled and
     * `finished` says which runs are whole. on_runs is called by the reading thread after
     * every batch, while no worker runs (the command layer limits how often it prints). */
    const volatile sig_atomic_t *stop;
    void (*on_runs)(void *user, const as_engine_progress *p);
    /* Every block handed out (addition), buffered and handed over like on_segment: a run's
     * records come after its device events of the same batch. NULL = none. */
    void (*on_block)(void *user, const as_block_record *r);
    /* OOMs the program survives (additions, sim/caught.h): a refused workspace request (its
     * site names cuDNN's workspace allocation) is caught and the run goes on, unless
     * no_caught_ooms is set (every OOM then counts as before). The sites come from the
     * reader; `sites` gives them to as_engine_run_events (NULL: none recognised). */
    int no_caught_ooms;
    const as_sites *sites;
    /* The CUDA streams the process makes (addition), told to the device (its streams()
     * slot) right before the allocation that needed them: 0, none (allocsim-replay's
     * cudaMalloc replay makes none); AS_ENGINE_STREAMS_EACH, one per distinct trace
     * stream, made at its first allocation (allocsim-replay --async); n, n streams made
     * before the first allocation on a stream other than the first allocation's (PyTorch:
     * its pool, AS_ENGINE_STREAMS_PYTORCH, at the first torch.cuda.Stream()). EACH counts
     * up to AS_ENGINE_STREAM_IDS streams. */
    uint32_t streams;
    /* Walks at every new peak (addition, for a report that needs the run's state at its
     * peak in the same pass): with walk_at_peak, on_walk also gets a walk with `why` "peak"
     * right after each event at which the run reaches a new peak of reserved (the last one
     * of a run is its peak_reserved_event); a peak walk still buffered whole when the next
     * one starts is dropped, so a batch hands over only the last peak walk it holds. Costs
     * a walk per new peak of reserved (nothing per event), within a budget: a run whose
     * peak walks have visited more than AS_ENGINE_PEAK_WALK_BUDGET items per event so far
     * (plus 2^16) skips the walk of a new peak and says so in peak_walk_missed, so a trace
     * whose reserved memory grows with every allocation (nocache, a growing KV cache)
     * costs a second pass, not a walk of every live block at every allocation. 2: every
     * new peak is walked, whatever it costs (an input that cannot be read twice). */
    int walk_at_peak;
    /* Every decoded batch of events (addition), in order, on the reading thread, before
     * the runs' records of that batch are handed over (so a record's allocation ordinal
     * is one the callback has seen). NULL = none. */
    void (*on_events)(void *user, const as_event *ev, size_t n);
} as_engine_opts;

#define AS_ENGINE_STREAMS_EACH UINT32_MAX
#define AS_ENGINE_PEAK_WALK_BUDGET 4u
/* 32 per priority level, for min(the device's levels, 4) levels (c10/cuda/CUDAStream.cpp):
 * 128 on an H100 or H200 (six levels), 64 on a device with two. */
#define AS_ENGINE_STREAMS_PYTORCH 128u
#define AS_ENGINE_STREAM_IDS 64u

/* Trace-wide facts gathered while the runs execute. */
typedef struct as_trace_summary {
    uint64_t events, allocs, frees, free_reqs, empty_caches, marks;
    uint64_t peak_requested; /* sum of live unrounded sizes, max over events */
    uint64_t streams;        /* distinct streams */
    uint64_t live_at_end;
    uint64_t peak_live;   /* most allocations live at once (a FREE_REQ'd one until its FREE) */
    uint64_t min_request; /* smallest ALLOC size above 0; 0 when there is none */
} as_trace_summary;

typedef struct as_engine as_engine;

int as_engine_create(const as_engine_opts *opts, as_engine **out);
/* The spec is borrowed and must outlive the engine. Returns the run index or < 0. */
int as_engine_add_run(as_engine *e, const as_policy_spec *spec, uint64_t capacity);
/* Runs the whole trace. Returns 0 or < 0. When the trace failed, *err holds the reader's
 * error (err->code < 0, with file, offset and message); when the engine or a run failed,
 * err->code is 0 and as_engine_errmsg() names the run, event and cause. err may be NULL.
 * A run that hits an OOM stops (unless keep_going) while the others go on. Returns
 * AS_ENGINE_STOPPED (> 0, a result) when *opts.stop was set. */
int as_engine_run(as_engine *e, as_trace_reader *r, as_trace_error *err);
/* As as_engine_run, over events already decoded into memory (evs[0..n), borrowed): no
 * reader, no progress callbacks (on_progress, on_runs). Its state lives in the process's
 * memory alone, so a run may fork (sim/curve.h). */
int as_engine_run_events(as_engine *e, const as_event *evs, size_t n, as_trace_error *err);
/* As as_engine_run_events, over events whose live slots are already numbered as a reader
 * numbers them (events from as_trace_next_batch, or as_engine_number_slots): the runs read
 * evs in place, with no copy or renumbering per batch, and the summary counts the events
 * alone (a curve's processes, sim/curve.h, read one array without touching its pages). */
int as_engine_run_slotted(as_engine *e, const as_event *evs, size_t n, as_trace_error *err);
/* Numbers the live slots of evs[0..n) as the reader's validator does (trace.h). Returns 0
 * or AS_ENOMEM. */
int as_engine_number_slots(as_event *evs, size_t n);
/* Decodes the whole trace for the summary alone, no runs (for sizing groups of runs by
 * peak_live before running them). Returns 0, a trace error (err filled) or
 * AS_ENGINE_STOPPED. */
int as_engine_scan(as_engine *e, as_trace_reader *r, as_trace_error *err);
/* The host memory one run of a trace with peak_live allocations live at once on `streams`
 * streams is budgeted (the constants above; logs: --segments or --timeline on). */
uint64_t as_engine_run_bytes(uint64_t peak_live, uint64_t streams, int logs);
/* What opts.max_live is compared with: peak_live, plus AS_ENGINE_STREAM_LIVES for each
 * stream past the first. */
uint64_t as_engine_live_weight(const as_trace_summary *s);
/* Walk run's policy (opts.on_walk) right after event `event` is handled (addition). */
int as_engine_walk_after(as_engine *e, unsigned run, uint64_t event);
unsigned as_engine_nruns(const as_engine *e);
const as_run_result *as_engine_result(const as_engine *e, unsigned run);
const as_trace_summary *as_engine_summary(const as_engine *e);
/* Message for a failed as_engine_run: which run, event and what went wrong. */
const char *as_engine_errmsg(const as_engine *e);
void as_engine_destroy(as_engine *e);

#endif
