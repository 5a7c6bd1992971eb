/*
 * engine.c - decodes a trace once and feeds every run from that one stream (engine.h).
 *
 * The reading thread decodes batches into a compact array, double-buffered: while the
 * runs process batch k (on worker threads, the reader helping once it has decoded batch
 * k+1), the next batch is decoded. A run touches only its own state, and everything a run
 * reports (segment records, timeline samples, walk items) is buffered per run and handed
 * to the callbacks by the reading thread after each batch, in run order, so the output
 * does not depend on the number of threads.
 *
 * The trace summary is the reader's tally (its validator counts as it accepts each
 * event); only events handed in memory, or a reader read from before, are summed here.
 *
 * Per-run invariant: `requested`/`allocated` are the sums over live ids that are not
 * pending (FREE_REQ seen, FREE not yet); `pending` is the block bytes of the pending ones;
 * `reserved` is the device's held bytes, kept from the device's event log (reserve/map
 * add, release/unmap subtract), so no per-event call is needed to read it.
 */
#include "engine.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "builtin.h"
#include "caught.h"
#include "grow.h"
#include "idmap.h"
#include "lifetimes.h"

/* Events per batch: 160 KiB per buffer. It fixes the order of the --segments and
 * --timeline rows (flushed per batch, in run order), so a build with another size (for
 * measuring, sim/README.md) writes those files in another order. */
#ifndef AS_ENGINE_BATCH
#define AS_ENGINE_BATCH 4096u
#endif
#define BATCH AS_ENGINE_BATCH
#define STATS_EVERY 65536u       /* external fragmentation sampled this often (events) */
#define PENDING_BIT (1ull << 63) /* in a live slot's block-size word */
#define LIVE_BIT (1ull << 62)    /* in a live slot's block-size word: the slot holds a block */

/* A run's state of one live allocation, at its live slot (as_event.slot). */
typedef struct live_slot {
    uint64_t handle; /* the policy's */
    uint64_t b;      /* block size | LIVE_BIT | PENDING_BIT; 0: no block (a failed ALLOC) */
} live_slot;

/* The runs read the reader's events in place (labels are not needed by any run). */
typedef as_event eng_ev;

typedef struct walk_rec {
    uint64_t event, alloc;
    const char *why;
    as_walk_item item;
} walk_rec;

typedef struct run {
    as_engine *e;
    unsigned index;
    const as_policy_spec *spec;
    const as_policy *pol;
    void *st;
    void (*hot)(struct run *, const eng_ev *, size_t); /* builtin_loop(pol) */
    int inited;
    as_simdev *sim; /* default device */
    void *fdev;     /* factory device handle */
    as_device dev;  /* what the policy sees; stable address (runs are not moved) */
    int log_ok;     /* reserved is tracked from the device log */
    uint64_t capacity;

    live_slot *live;      /* by live slot: the reader numbers them densely, so this is an
                             array of at most the trace's peak live count */
    size_t nlive;         /* slots the array covers (the rest are zero) */
    as_caught_run fallen; /* workspace requests whose OOM was caught (caught.h) */
    uint64_t requested, allocated, reserved, pending;
    uint64_t events, allocs; /* handled so far: the index of the event in progress */
    int stopped;

    uint64_t next_slow;   /* event index at which slow_path() is next due */
    uint64_t next_sample; /* next periodic timeline sample */
    uint64_t next_stats;  /* next external-fragmentation sample */
    uint64_t last_sample; /* event of the last timeline sample, AS_NONE if none */
    uint64_t walk_event;  /* AS_NONE if no walk is asked */

    /* opts.streams: the trace streams seen so far (at most AS_ENGINE_STREAM_IDS), watched
     * while s_watch; s_last is the last allocation's */
    int s_watch;
    uint32_t s_n;
    uint64_t s_last, s_ids[AS_ENGINE_STREAM_IDS];

    as_run_result res;
    as_seg_record *segs;
    size_t nseg, capseg;
    as_block_record *blks; /* on_block */
    size_t nblk, capblk;
    as_timeline_sample *smp;
    size_t nsmp, capsmp;
    walk_rec *walks;
    size_t nwalk, capwalk;
    size_t peak_walk_at, peak_walk_end; /* the last peak walk buffered: walks[at, end) */
    uint64_t peak_walked;               /* items its peak walks have visited */
    int64_t last_time;                  /* time of the last event handled */
    const char *walk_why;               /* set while walking */
    uint64_t walk_ev;

    int err; /* first engine error of this run, 0 if none */
    char msg[300];
    double wall, cpu;
} run;

struct as_engine {
    as_engine_opts o;
    run **runs;
    unsigned nruns, capruns;
    int ran;
    char msg[400];

    as_trace_summary sum;
    as_caught *caught;    /* the trace's workspace sites; NULL: none, or the model is off */
    as_idmap sum_pending; /* FREE_REQ'd ids whose FREE has not come: no double subtract */
    as_idmap sum_streams;
    uint64_t sum_requested, last_stream, sum_live;
    int have_last_stream, saw_max_stream;
    /* The first event time of the trace, set by the reading thread before the batch that
     * holds it reaches a worker; timeline times are relative to it. */
    int64_t t0;
    int have_t0;
    /* The summary is the reader's tally (as_trace_reader_tally), which its validator keeps
     * as it accepts the events: set for a reader that has handed out none before the
     * engine's first batch. Otherwise (in-memory events, a reader read before) the
     * engine sums the events itself (summarise). */
    int tally;
    uint32_t cur_slots; /* the live slots of the batch being run are below it (the tally's
                           peak live count when the summary is the tally); 0: unknown */

    /* The batch being processed, shared with the workers. */
    const eng_ev *cur;
    size_t cur_n;
    atomic_uint next_run;
    unsigned *order; /* the runs in the order the threads take them: costliest so far first */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    unsigned busy;
    int quit;
    pthread_t *th;
    unsigned nth;
    uint64_t fed; /* events handed to the runs (on_runs) */
    /* as_engine_run_events: the events come from this array instead of a reader */
    const as_event *mem;
    size_t mem_n, mem_pos;
    /* their live slots, numbered here as the reader's validator numbers them (trace.h) */
    as_idmap mem_live; /* id -> slot */
    uint32_t *mem_free, mem_nfree, mem_nslots, mem_fcap;
    /* Offline runs (a policy with plan) need the whole trace before the first event: the
     * reader's events are read into own first and fed from there; mem_rc is the reader's
     * error after the last of them (0: the trace ended). */
    as_event *own;
    int mem_rc;
    /* as_engine_run_slotted: the runs read mem in place, its slots the reader's */
    int mem_inplace;
};

/* In-memory events are the caller's, made by hand or kept from a reader: their live slots
 * are numbered again here, as the validator numbers them (a FREE of an id not live gets
 * UINT32_MAX, which no run holds). 0, or -1 when out of host memory. */
static int mem_slots(as_engine *e, as_event *ev, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        as_event *x = &ev[i];
        if (x->op != AS_OP_ALLOC && x->op != AS_OP_FREE && x->op != AS_OP_FREE_REQ)
            continue;
        as_idmap_ent *m = as_idmap_get(&e->mem_live, x->id);
        if (x->op != AS_OP_ALLOC || m) { /* an ALLOC of a live id keeps its slot */
            x->slot = m ? (uint32_t)m->a : UINT32_MAX;
            if (m && x->op == AS_OP_FREE) {
                e->mem_free[e->mem_nfree++] = x->slot;
                as_idmap_del(&e->mem_live, m);
            }
            continue;
        }
        if (!e->mem_nfree && as_grow32((void **)&e->mem_free, &e->mem_fcap,
                                       (size_t)e->mem_nslots + 1, sizeof *e->mem_free, 1024))
            return -1;
        x->slot = e->mem_nfree ? e->mem_free[--e->mem_nfree] : e->mem_nslots++;
        if (as_idmap_put(&e->mem_live, x->id, x->slot, 0))
            return -1;
    }
    return 0;
}

/* The next events from the reader, or from the in-memory array (as_trace_next_batch's
 * contract: AS_TRACE_EOF once the last one has been handed out). */
static int next_batch(as_engine *e, as_trace_reader *rd, as_event *buf, size_t cap, size_t *got)
{
    if (!e->mem)
        return as_trace_next_batch(rd, buf, cap, got);
    size_t k = e->mem_n - e->mem_pos < cap ? e->mem_n - e->mem_pos : cap;
    memcpy(buf, e->mem + e->mem_pos, k * sizeof *buf);
    *got = 0;
    if (mem_slots(e, buf, k))
        return AS_ENOMEM;
    e->mem_pos += k;
    *got = k;
    if (e->mem_pos < e->mem_n)
        return 0;
    return e->mem_rc ? e->mem_rc : AS_TRACE_EOF;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void run_fail(run *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void run_fail(run *r, int code, const char *fmt, ...)
{
    if (r->err)
        return;
    r->err = code;
    r->stopped = 1;
    int k = snprintf(r->msg, sizeof r->msg, "run %u (%s), event %llu (alloc %llu): ", r->index,
                     r->spec->text ? r->spec->text : r->pol->name, (unsigned long long)r->events,
                     (unsigned long long)r->allocs);
    if (k < 0 || (size_t)k >= sizeof r->msg)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg + k, sizeof r->msg - (size_t)k, fmt, ap);
    va_end(ap);
}

/* Amortised growth of a per-run buffer (as_grow, from 64 items). Returns 0 or -1. */
static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    return as_grow(p, cap, need, elem, 64);
}

/* ---- device log --------------------------------------------------------------------- */

static void on_dev(void *user, const as_dev_event *ev)
{
    run *r = user;
    if (ev->action == AS_DEV_SEGMENT_ALLOC || ev->action == AS_DEV_SEGMENT_MAP)
        r->reserved += ev->size;
    else
        r->reserved -= ev->size;
    if (!r->e->o.on_segment)
        return;
    if (grow((void **)&r->segs, &r->capseg, r->nseg + 1, sizeof *r->segs)) {
        run_fail(r, AS_ENOMEM, "out of host memory for the segment log");
        return;
    }
    r->segs[r->nseg++] =
        (as_seg_record){.run = r->index, .alloc = r->allocs, .event = r->events, .dev = *ev};
}

/* Buffers a block for on_block. 0, or -1 when the run failed (out of host memory). */
static int log_block(run *r, uint64_t event, uint64_t id, const as_block *b)
{
    if (grow((void **)&r->blks, &r->capblk, r->nblk + 1, sizeof *r->blks)) {
        run_fail(r, AS_ENOMEM, "out of host memory for the block log");
        return -1;
    }
    r->blks[r->nblk++] = (as_block_record){
        .run = r->index, .event = event, .alloc = id, .addr = b->addr, .size = b->size};
    return 0;
}

/* ---- sampling ----------------------------------------------------------------------- */

static void sample(run *r, uint64_t event, int64_t time_us)
{
    if (!r->e->o.on_sample || r->last_sample == event)
        return;
    if (grow((void **)&r->smp, &r->capsmp, r->nsmp + 1, sizeof *r->smp)) {
        run_fail(r, AS_ENOMEM, "out of host memory for the timeline");
        return;
    }
    r->smp[r->nsmp++] = (as_timeline_sample){
        .run = r->index,
        .event = event,
        .alloc = r->allocs,
        .time_us = time_us == AS_TIME_NONE ? AS_TIME_NONE : time_us - r->e->t0,
        .requested = r->requested,
        .allocated = r->allocated,
        .reserved = r->reserved,
    };
    r->last_sample = event;
}

static void ext_frag(run *r, as_policy_stats *s)
{
    *s = (as_policy_stats){0};
    r->pol->stats(r->st, s);
    if (s->free_bytes > 0 && s->largest_free <= s->free_bytes) {
        double f = 1.0 - (double)s->largest_free / (double)s->free_bytes;
        if (f > r->res.max_ext_frag)
            r->res.max_ext_frag = f;
    }
}

static int walk_item(void *user, const as_walk_item *it)
{
    run *r = user;
    if (grow((void **)&r->walks, &r->capwalk, r->nwalk + 1, sizeof *r->walks)) {
        run_fail(r, AS_ENOMEM, "out of host memory for the segment map");
        return 1;
    }
    r->walks[r->nwalk++] =
        (walk_rec){.event = r->walk_ev, .alloc = r->allocs, .why = r->walk_why, .item = *it};
    return 0;
}

static void do_walk(run *r, uint64_t event, const char *why)
{
    if (!r->e->o.on_walk || !r->pol->walk)
        return;
    r->walk_why = why;
    r->walk_ev = event;
    r->pol->walk(r->st, walk_item, r);
}

/* opts.walk_at_peak: the walk of a new peak replaces the previous peak's when that is
 * still the last one buffered (only a run's last new peak is its peak). */
static void peak_walk(run *r, uint64_t event)
{
    if (r->peak_walk_at < r->nwalk && r->peak_walk_end == r->nwalk)
        r->nwalk = r->peak_walk_at;
    r->peak_walk_at = r->nwalk;
    /* Over budget, the walk waits for the events to catch up: the sum of the walks stays
     * linear in the trace, and a missed last peak is walked by a pass of its own. */
    if (r->e->o.walk_at_peak == 1 &&
        r->peak_walked > AS_ENGINE_PEAK_WALK_BUDGET * (event + 1) + (1u << 16)) {
        r->res.peak_walk_missed = 1;
        r->peak_walk_end = r->nwalk;
        return;
    }
    do_walk(r, event, "peak");
    r->peak_walk_end = r->nwalk;
    r->peak_walked += r->peak_walk_end - r->peak_walk_at;
    r->res.peak_walk_missed = 0;
}

static void check_now(run *r)
{
    as_check_failure f = {{0}};
    if (r->pol->check && r->pol->check(r->st, &f)) {
        f.msg[sizeof f.msg - 1] = 0;
        run_fail(r, AS_ECHECK, "check failed: %s", f.msg[0] ? f.msg : "(no message)");
        return;
    }
    as_policy_stats s = {0};
    r->pol->stats(r->st, &s);
    /* A policy may complete pending frees by itself (torch's sync_frees: empty_cache and
     * the last OOM retry wait for them), so the pending bytes are an upper bound. */
    if (s.allocated < r->allocated || s.allocated > r->allocated + r->pending)
        run_fail(r, AS_ECHECK, "policy reports %llu bytes allocated, its blocks add up to %llu",
                 (unsigned long long)s.allocated, (unsigned long long)(r->allocated + r->pending));
    else if (r->log_ok && s.reserved != r->reserved)
        run_fail(r, AS_ECHECK, "policy reports %llu bytes reserved, the device holds %llu",
                 (unsigned long long)s.reserved, (unsigned long long)r->reserved);
}

static void schedule(run *r)
{
    uint64_t n = r->e->o.check ? r->events + 1 : r->next_stats;
    if (r->next_sample < n)
        n = r->next_sample;
    if (r->walk_event < n)
        n = r->walk_event;
    r->next_slow = n;
}

/* Everything that is due only now and then, after event `idx` was handled. */
static void slow_path(run *r, uint64_t idx, const eng_ev *x)
{
    uint64_t every = r->e->o.timeline_every;
    if (idx >= r->next_sample) {
        sample(r, idx, x->time_us);
        r->next_sample = (idx / every + 1) * every;
    }
    if (idx >= r->next_stats) {
        as_policy_stats s;
        ext_frag(r, &s);
        r->next_stats = idx + STATS_EVERY;
    }
    if (idx == r->walk_event) {
        do_walk(r, idx, "event");
        r->walk_event = AS_NONE;
    }
    if (r->e->o.check)
        check_now(r);
}

static void new_peak(run *r, uint64_t idx, const eng_ev *x)
{
    r->res.peak_reserved = r->reserved;
    r->res.peak_reserved_event = idx;
    as_policy_stats s;
    ext_frag(r, &s);
    sample(r, idx, x->time_us);
    if (r->e->o.walk_at_peak)
        peak_walk(r, idx);
}

static void on_oom(run *r, uint64_t idx, const eng_ev *x)
{
    if (r->res.ooms++ == 0) {
        as_policy_stats s;
        r->res.oom_event = idx;
        r->res.oom_alloc = x->id;
        r->res.oom_size = x->size;
        r->res.oom_reserved = r->reserved;
        r->res.oom_allocated = r->allocated;
        r->res.oom_requested = r->requested;
        r->res.oom_pending = r->pending;
        ext_frag(r, &s);
        r->res.oom_free_bytes = s.free_bytes;
        r->res.oom_largest_free = s.largest_free;
        sample(r, idx, x->time_us);
        if (r->e->o.walk_at_oom)
            do_walk(r, idx, "oom");
    }
    if (r->e->o.check)
        check_now(r);
    if (!r->e->o.keep_going)
        r->stopped = 1;
}

/* ---- the per-event loop ------------------------------------------------------------- */

/* Live slots up to `slot` (the reader's numbering stays below the peak live count, so the
 * array follows it), the new ones empty. 0, or -1 when out of host memory. */
static __attribute__((noinline)) int live_grow(run *r, uint32_t slot)
{
    size_t cap = r->nlive;
    if (as_grow((void **)&r->live, &cap, (size_t)slot + 1, sizeof *r->live, 64))
        return -1;
    memset(r->live + r->nlive, 0, (cap - r->nlive) * sizeof *r->live);
    r->nlive = cap;
    return 0;
}

/* An allocation on another stream than the last one's, with opts.streams set: tells the
 * device when the process makes its streams (engine.h). 0, or the run failed. */
static int note_stream(run *r, uint64_t stream)
{
    uint32_t mode = r->e->o.streams;
    r->s_last = stream;
    for (uint32_t i = 0; i < r->s_n; i++)
        if (r->s_ids[i] == stream)
            return 0;
    r->s_ids[r->s_n++] = stream;
    if (mode != AS_ENGINE_STREAMS_EACH && r->s_n < 2)
        return 0; /* the first stream is the default one: no stream made for it */
    uint32_t n = mode == AS_ENGINE_STREAMS_EACH ? r->s_n : mode;
    r->s_watch = mode == AS_ENGINE_STREAMS_EACH && r->s_n < AS_ENGINE_STREAM_IDS;
    int rc = r->dev.ops->streams(r->dev.ctx, n);
    if (rc == AS_ENOSYS) { /* a device that does not model them */
        r->s_watch = 0;
        return 0;
    }
    if (rc)
        run_fail(r, AS_EDEVICE, "the device failed (%d) when the process made %u streams", rc, n);
    return rc;
}

/* A run's counters while its loop runs, in locals across the events (registers where the
 * compiler has them): loop_put writes them back to the run before anything outside the
 * loop may read them (a failure's message, a sample, the OOM record, check()) and at the
 * end; loop_get reads the run's. */
typedef struct loop {
    live_slot *live;
    size_t nlive;
    uint64_t requested, allocated, pending;
    uint64_t peak_req, peak_alloc, peak_pend, peak_res;
    uint64_t idx, allocs, next_slow;
} loop;

#define ENG_HOT static inline __attribute__((always_inline))

ENG_HOT void loop_get(const run *r, loop *L)
{
    *L = (loop){.live = r->live,
                .nlive = r->nlive,
                .requested = r->requested,
                .allocated = r->allocated,
                .pending = r->pending,
                .peak_req = r->res.peak_requested,
                .peak_alloc = r->res.peak_allocated,
                .peak_pend = r->res.peak_pending,
                .peak_res = r->res.peak_reserved,
                .idx = r->events,
                .allocs = r->allocs,
                .next_slow = r->next_slow};
}

ENG_HOT void loop_put(run *r, const loop *L)
{
    r->requested = L->requested;
    r->allocated = L->allocated;
    r->pending = L->pending;
    r->res.peak_requested = L->peak_req;
    r->res.peak_allocated = L->peak_alloc;
    r->res.peak_pending = L->peak_pend;
    r->events = L->idx;
    r->allocs = L->allocs;
}

/* Whether the run goes on to event x while the stream watch is on: an allocation on
 * another stream than the last one's first tells the device (note_stream; 0 when that
 * failed). */
ENG_HOT int streams_ok(run *r, const eng_ev *x, const loop *L)
{
    if (x->op != AS_OP_ALLOC || (x->stream == r->s_last && r->s_n))
        return 1;
    loop_put(r, L);
    return !note_stream(r, x->stream);
}

/* The loop's options. LEAN: none of those that cost a test per event is on (check(),
 * on_block, on_segment, the caught-OOM model, the stream watch, a device without a log),
 * so the copy of the loop made for it has no such test; run_batch picks the copy per
 * batch. The policy's entry points are read once per batch. */
typedef struct loop_ops {
    void *st;
    int (*alloc)(void *, const as_request *, as_block *);
    int (*free)(void *, uint64_t, unsigned);
} loop_ops;

enum { EV_ON = 0, EV_STOP = 1 }; /* after an event: go on, or the run stopped (r is whole) */

/* Before a policy call of the general loop: the device log's records read the run's
 * position (on_dev). */
ENG_HOT void at_call(run *r, const loop *L, const int lean)
{
    if (!lean) {
        r->events = L->idx;
        r->allocs = L->allocs;
    }
}

static __attribute__((noinline)) int policy_fail(run *r, const loop *L, int rc, const eng_ev *x)
{
    loop_put(r, L);
    run_fail(r, AS_EPOLICY, "policy %s returned %d on %s of id %llu", r->pol->name, rc,
             x->op == AS_OP_ALLOC         ? "alloc"
             : x->op == AS_OP_EMPTY_CACHE ? "empty_cache"
                                          : "free",
             (unsigned long long)x->id);
    return EV_STOP;
}

static __attribute__((noinline)) int loop_fail(run *r, const loop *L, int code, const char *what)
{
    loop_put(r, L);
    run_fail(r, code, "%s", what);
    return EV_STOP;
}

/* An ALLOC the policy could not serve: a caught workspace OOM, or the run's OOM. */
static __attribute__((noinline)) int alloc_oom(run *r, const loop *L, const eng_ev *x)
{
    const as_caught *cw = r->e->caught;
    if (cw && as_caught_site(cw, x->site)) {
        r->res.caught_ooms++; /* PyTorch catches it and runs the fallback engine */
        if (as_caught_add(&r->fallen, x->site, x->size))
            return loop_fail(r, L, AS_ENOMEM, "out of host memory for the caught OOMs");
        return EV_ON;
    }
    loop_put(r, L);
    on_oom(r, L->idx, x);
    return r->stopped ? EV_STOP : EV_ON;
}

ENG_HOT int ev_alloc(run *r, loop *L, const loop_ops *p, const eng_ev *x, const int lean,
                     const int bounded)
{
    const as_caught *cw = lean ? NULL : r->e->caught;
    if (cw && as_caught_site(cw, x->site) && as_caught_fallen(&r->fallen, x->site, x->size)) {
        r->res.caught_fallbacks++; /* the cached fallback engine: no workspace */
        return EV_ON;
    }
    as_request rq = {.id = x->id, .size = x->size, .stream = x->stream, .pool = x->pool};
    as_block b;
    at_call(r, L, lean);
    int rc = p->alloc(p->st, &rq, &b);
    if (rc == AS_POLICY_OOM)
        return alloc_oom(r, L, x);
    if (rc != AS_POLICY_OK)
        return policy_fail(r, L, rc, x);
    if (!lean && r->e->o.check && b.size < x->size) {
        loop_put(r, L);
        run_fail(r, AS_ECHECK, "block of %llu bytes for a %llu-byte request",
                 (unsigned long long)b.size, (unsigned long long)x->size);
        return EV_STOP;
    }
    if (!bounded && x->slot >= L->nlive) {
        if (live_grow(r, x->slot))
            return loop_fail(r, L, AS_ENOMEM, "out of host memory for the live table");
        L->live = r->live;
        L->nlive = r->nlive;
    }
    L->live[x->slot] = (live_slot){b.handle, b.size | LIVE_BIT};
    if (!lean && r->e->o.on_block && log_block(r, L->idx, x->id, &b))
        return EV_STOP;
    L->requested += x->size;
    L->allocated += b.size;
    L->peak_req = L->requested > L->peak_req ? L->requested : L->peak_req;
    L->peak_alloc = L->allocated > L->peak_alloc ? L->allocated : L->peak_alloc;
    return EV_ON;
}

ENG_HOT int ev_free_req(run *r, loop *L, const loop_ops *p, const eng_ev *x, const int lean,
                        const int bounded)
{
    /* none: an allocation that failed (keep_going) */
    if ((!bounded && x->slot >= L->nlive) ||
        (L->live[x->slot].b & (LIVE_BIT | PENDING_BIT)) != LIVE_BIT)
        return EV_ON;
    live_slot *m = &L->live[x->slot];
    at_call(r, L, lean);
    int rc = p->free(p->st, m->handle, AS_FREE_PENDING);
    m->b |= PENDING_BIT;
    uint64_t blk = m->b & ~(PENDING_BIT | LIVE_BIT);
    L->requested -= x->size;
    L->allocated -= blk;
    L->pending += blk;
    L->peak_pend = L->pending > L->peak_pend ? L->pending : L->peak_pend;
    return rc ? policy_fail(r, L, rc, x) : EV_ON;
}

ENG_HOT int ev_free(run *r, loop *L, const loop_ops *p, const eng_ev *x, const int lean,
                    const int bounded)
{
    if ((!bounded && x->slot >= L->nlive) || !L->live[x->slot].b)
        return EV_ON;
    live_slot *m = &L->live[x->slot];
    uint64_t blk = m->b & ~(PENDING_BIT | LIVE_BIT);
    at_call(r, L, lean);
    int rc = p->free(p->st, m->handle, AS_FREE_COMPLETE);
    if (m->b & PENDING_BIT) {
        L->pending -= blk;
    } else {
        L->requested -= x->size;
        L->allocated -= blk;
    }
    m->b = 0;
    return rc ? policy_fail(r, L, rc, x) : EV_ON;
}

/* EMPTY_CACHE (pool k: that private pool released and emptied) and MARK. */
static __attribute__((noinline)) int ev_other(run *r, const loop *L, const eng_ev *x)
{
    const as_policy *pol = r->pol;
    if (x->op != AS_OP_EMPTY_CACHE || (x->pool ? !pol->empty_pool : !pol->empty_cache))
        return EV_ON;
    loop_put(r, L);
    int rc = x->pool ? pol->empty_pool(r->st, x->pool) : pol->empty_cache(r->st);
    return rc ? policy_fail(r, L, rc, x) : EV_ON;
}

/* After event x: a new peak of reserved, the slow path's work when due. 1 when one of
 * them stopped the run (a failed sample). */
static __attribute__((noinline)) int after_rare(run *r, loop *L, const eng_ev *x)
{
    loop_put(r, L);
    if (r->reserved > L->peak_res) {
        new_peak(r, L->idx, x);
        L->peak_res = r->reserved;
    }
    if (L->idx >= L->next_slow) {
        slow_path(r, L->idx, x);
        schedule(r);
        L->next_slow = r->next_slow;
    }
    return r->stopped;
}

/* After one event of the loop: go on, stop before it (it is not the run's), return at once
 * (the run is whole), or stop after it. */
enum { STEP_ON, STEP_BREAK, STEP_RETURN, STEP_STOP };

/* After event x of step (s: its ev_* answer; alloc: x is an ALLOC, a constant in each of
 * step's branches, so that the allocation count costs the FREEs nothing). */
ENG_HOT int step_end(run *r, loop *L, const eng_ev *x, int s, const int lean, const int due,
                     const int alloc)
{
    if (s == EV_STOP)
        return STEP_RETURN;
    if (!lean && !r->log_ok)
        r->reserved = r->dev.ops->reserved(r->dev.ctx);
    int stop = 0;
    if (r->reserved > L->peak_res || (due && L->idx >= L->next_slow))
        stop = after_rare(r, L, x);
    if (alloc)
        L->allocs++;
    L->idx++;
    return stop ? STEP_STOP : STEP_ON;
}

/* Event x through one run. `due`: the slow path may be due at it (else the caller knows
 * that x comes before the event at which it is next due, so only the peak is tested). */
ENG_HOT int step(run *r, loop *L, const loop_ops *p, const eng_ev *x, const int lean,
                 const int bounded, const int due)
{
    if (!lean && (r->stopped || (r->s_watch && !streams_ok(r, x, L))))
        return STEP_BREAK;
    if (x->op == AS_OP_ALLOC)
        return step_end(r, L, x, ev_alloc(r, L, p, x, lean, bounded), lean, due, 1);
    int s;
    if (x->op == AS_OP_FREE)
        s = ev_free(r, L, p, x, lean, bounded);
    else if (x->op == AS_OP_FREE_REQ)
        s = ev_free_req(r, L, p, x, lean, bounded);
    else
        s = ev_other(r, L, x);
    return step_end(r, L, x, s, lean, due, 0);
}

/* The events ev[0..n) through one run; a run_fail (from here or a callback) or a stopping
 * OOM ends it, with the run's state as it was at that event. `bounded`: every live slot of
 * the batch is below the run's live table's length, so no slot is tested against it. The
 * events before the one at which the slow path is next due run without its test, in
 * stretches (only after_rare moves next_slow, and only at or past it). `hot`: the run's
 * policy's entry points by name (policies/builtin.h), a constant in a built-in's copy of the
 * loop; NULL: the table's. */
ENG_HOT void run_events(run *r, const eng_ev *ev, size_t n, const int lean, const int bounded,
                        const loop_ops *hot)
{
    const loop_ops p = {r->st, hot ? hot->alloc : r->pol->alloc, hot ? hot->free : r->pol->free};
    loop L;
    loop_get(r, &L);
    const eng_ev *x = ev, *const end = ev + n;
    int st = STEP_ON;
    while (x < end) {
        const uint64_t ahead = L.next_slow > L.idx ? L.next_slow - L.idx : 0;
        const eng_ev *const cut = ahead < (uint64_t)(end - x) ? x + ahead : end;
        while (x < cut && (st = step(r, &L, &p, x, lean, bounded, 0)) == STEP_ON)
            x++;
        if (st == STEP_ON && x < end)
            st = step(r, &L, &p, x, lean, bounded, 1);
        if (st == STEP_RETURN)
            return;
        if (st == STEP_BREAK)
            break;
        if (x < end)
            x++;
        if (st == STEP_STOP)
            break;
    }
    loop_put(r, &L);
    /* The last event's time, for run_finish's closing sample (which a stopped run skips). */
    if (x == end && n)
        r->last_time = ev[n - 1].time_us;
}

/* A copy of the lean, bounded loop for each built-in policy of AS_BUILTIN_HOT, calling its
 * entry points by name: the release build optimises this object and theirs together
 * (HOT_LTO in the Makefile), and flatten inlines the policy's alloc and free (with
 * everything they inline) into the loop, so an event makes no call but the policy's own
 * slow paths (sim/README.md, Session 8). The same loop, the same calls: the same results. */
#define ENG_BUILTIN_LOOP(name)                                                                     \
    static __attribute__((noinline, flatten)) void run_##name(run *r, const eng_ev *ev, size_t n)  \
    {                                                                                              \
        const loop_ops hot = {NULL, as_##name##_alloc, as_##name##_free};                          \
        run_events(r, ev, n, 1, 1, &hot);                                                          \
    }
AS_BUILTIN_HOT(ENG_BUILTIN_LOOP)
#undef ENG_BUILTIN_LOOP

/* The built-in loop copy of the run's policy, or NULL (another policy: a plug-in, or one
 * without a copy). */
static void (*builtin_loop(const as_policy *pol))(run *, const eng_ev *, size_t)
{
#define ENG_BUILTIN_PICK(name)                                                                     \
    if (pol == &as_policy_##name)                                                                  \
        return run_##name;
    AS_BUILTIN_HOT(ENG_BUILTIN_PICK)
#undef ENG_BUILTIN_PICK
    return NULL;
}

/* Picks the loop's copy for a batch: lean when no per-event option is on, bounded when the
 * engine knows the batch's live slots (e->cur_slots, from the reader's tally) and the live
 * table covers them, and a built-in policy's own copy when it has one. */
static void run_batch(run *r, const eng_ev *ev, size_t n)
{
    const as_engine *e = r->e;
    const as_engine_opts *o = &e->o;
    const uint32_t slots = e->cur_slots;
    if (slots > r->nlive && live_grow(r, slots - 1)) {
        run_fail(r, AS_ENOMEM, "out of host memory for the live table");
        return;
    }
    if (o->check || o->on_block || o->on_segment || e->caught || r->s_watch || !r->log_ok)
        run_events(r, ev, n, 0, 0, NULL);
    else if (slots && r->hot)
        r->hot(r, ev, n);
    else if (slots)
        run_events(r, ev, n, 1, 1, NULL);
    else
        run_events(r, ev, n, 1, 0, NULL);
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wall and CPU time of one batch: both read on the thread that runs it. */
static void run_timed(run *r, const eng_ev *ev, size_t n)
{
    if (r->stopped)
        return;
    double t0 = now_s(), c0 = thread_cpu_s();
    run_batch(r, ev, n);
    r->cpu += thread_cpu_s() - c0;
    r->wall += now_s() - t0;
}

/* ---- runs: start and finish ----------------------------------------------------------- */

static int run_start(run *r)
{
    as_engine *e = r->e;
    const as_engine_opts *o = &e->o;
    if (o->factory) {
        if (o->factory->create(o->factory->user, r->capacity, &r->dev, &r->fdev) || !r->dev.ops ||
            r->dev.ops->abi != AS_DEVICE_ABI) {
            run_fail(r, AS_EDEVICE, "the device factory failed");
            return r->err;
        }
        if (o->factory->set_log) {
            o->factory->set_log(o->factory->user, r->fdev, on_dev, r);
            r->log_ok = 1;
        }
    } else {
        as_simdev_params p;
        if (o->dev_params)
            p = *o->dev_params;
        else
            as_simdev_default_params(&p);
        as_simdev_set_capacity(&p, r->capacity, r->pol->flags);
        if (as_simdev_create(&p, &r->sim)) {
            run_fail(r, AS_EDEVICE, "cannot create the simulated device");
            return r->err;
        }
        r->dev = *as_simdev_device(r->sim);
        as_simdev_set_log(r->sim, on_dev, r);
        r->log_ok = 1;
    }
    r->st = calloc(1, r->pol->state_size ? r->pol->state_size : 1);
    if (!r->st) {
        run_fail(r, AS_ENOMEM, "out of host memory for the policy state");
        return r->err;
    }
    int rc = r->pol->init(r->st, r->spec->values, &r->dev);
    if (rc) {
        run_fail(r, AS_EPOLICY, "policy %s: init returned %d", r->pol->name, rc);
        return r->err;
    }
    r->inited = 1;
    r->s_watch = o->streams != 0;
    if (!r->log_ok)
        r->reserved = r->dev.ops->reserved(r->dev.ctx);
    r->res.peak_reserved = r->reserved;
    r->last_sample = AS_NONE;
    r->next_sample = o->timeline_every && o->on_sample ? 0 : AS_NONE;
    r->next_stats = STATS_EVERY - 1;
    schedule(r);
    return 0;
}

static void run_finish(run *r)
{
    as_run_result *res = &r->res;
    const as_engine_opts *o = &r->e->o;
    res->events = r->events;
    res->allocs = r->allocs;
    res->completed = !r->stopped && res->ooms == 0 && !r->err;
    res->no_caught_ooms = o->no_caught_ooms;
    res->streams = o->streams;
    res->final_reserved = r->reserved;
    res->final_allocated = r->allocated;
    res->final_requested = r->requested;
    res->fragmentation =
        res->peak_reserved ? 1.0 - (double)res->peak_allocated / (double)res->peak_reserved : 0;
    res->waste =
        res->peak_reserved > res->peak_requested ? res->peak_reserved - res->peak_requested : 0;
    res->wall_s = r->wall;
    res->cpu_s = r->cpu;
    res->events_per_second = r->cpu > 0 ? (double)r->events / r->cpu : 0;
    if (r->inited) {
        as_policy_stats s = {0};
        r->pol->stats(r->st, &s);
        res->retries = s.retries;
        if (!r->stopped && r->events)
            sample(r, r->events - 1, r->last_time);
    }
    as_simdev_counters c = {0};
    if (r->sim)
        as_simdev_counters_get(r->sim, &c);
    else if (o->factory && o->factory->counters && r->fdev)
        o->factory->counters(o->factory->user, r->fdev, &c);
    res->device_reserves = c.reserves + c.maps;
    res->device_releases = c.releases + c.unmaps;
    res->device_refusals = c.refusals;
    res->device_time_s = c.time_ns * 1e-9;
}

/* Hands a run's buffered records to the callbacks (reading thread, run order). */
static void run_flush(as_engine *e, run *r)
{
    for (size_t i = 0; i < r->nseg; i++)
        e->o.on_segment(e->o.user, &r->segs[i]);
    r->nseg = 0;
    for (size_t i = 0; i < r->nblk; i++)
        e->o.on_block(e->o.user, &r->blks[i]);
    r->nblk = 0;
    for (size_t i = 0; i < r->nsmp; i++)
        e->o.on_sample(e->o.user, &r->smp[i]);
    r->nsmp = 0;
    for (size_t i = 0; i < r->nwalk; i++)
        e->o.on_walk(e->o.user, r->index, r->walks[i].event, r->walks[i].alloc, r->walks[i].why,
                     &r->walks[i].item);
    r->nwalk = 0;
    r->peak_walk_at = SIZE_MAX;
}

/* ---- decoding and the trace summary ------------------------------------------------- */

/* The rare events of the summary, and an ALLOC on another stream than the last one's. */
static int summary_other(as_engine *e, const as_event *ev)
{
    as_trace_summary *s = &e->sum;
    switch (ev->op) {
    case AS_OP_ALLOC:
        e->have_last_stream = 1;
        e->last_stream = ev->stream;
        if (ev->stream == UINT64_MAX) { /* the map's key is stream + 1 */
            s->streams += !e->saw_max_stream;
            e->saw_max_stream = 1;
        } else if (!as_idmap_get(&e->sum_streams, ev->stream)) {
            if (as_idmap_put(&e->sum_streams, ev->stream, 0, 0))
                return -1;
            s->streams++;
        }
        break;
    case AS_OP_FREE_REQ:
        s->free_reqs++;
        if (!as_idmap_get(&e->sum_pending, ev->id)) {
            e->sum_requested -= ev->size;
            if (as_idmap_put(&e->sum_pending, ev->id, 0, 0))
                return -1;
        }
        break;
    case AS_OP_FREE: { /* one whose FREE_REQ came first */
        as_idmap_ent *m = as_idmap_get(&e->sum_pending, ev->id);
        if (m)
            as_idmap_del(&e->sum_pending, m);
        else
            e->sum_requested -= ev->size;
        break;
    }
    case AS_OP_EMPTY_CACHE:
        s->empty_caches++;
        break;
    default:
        s->marks++;
        break;
    }
    return 0;
}

/* The trace summary over ev[0..n): the number of events taken, n or fewer (then call
 * again for the rest); *failed when out of host memory at ev[returned]. The running sums
 * live in locals across the loop (the rare cases, in summary_other, see them in e), so an
 * ALLOC or a FREE is a few register operations. */
/* The first event time of the trace, from ev[0..n) until it is found. */
static void find_t0(as_engine *e, const as_event *ev, size_t n)
{
    for (size_t i = 0; i < n && !e->have_t0; i++)
        if (ev[i].time_us != AS_TIME_NONE) {
            e->t0 = ev[i].time_us;
            e->have_t0 = 1;
        }
}

/* The summary after the reader has handed out a batch, from its tally. */
static void tally_summary(as_engine *e, as_trace_reader *rd)
{
    as_trace_tally t;
    as_trace_reader_tally(rd, &t);
    as_trace_summary *s = &e->sum;
    s->events = t.events;
    s->allocs = t.allocs;
    s->frees = t.frees;
    s->free_reqs = t.free_reqs;
    s->empty_caches = t.empty_caches;
    s->marks = t.marks;
    s->peak_requested = t.peak_requested;
    s->streams = t.streams;
    s->peak_live = t.peak_live;
    s->min_request = t.min_request;
}

static size_t summarise(as_engine *e, const as_event *ev, size_t n, int *failed)
{
    as_trace_summary *s = &e->sum;
    find_t0(e, ev, n);
    uint64_t allocs = s->allocs, frees = s->frees, min_req = s->min_request;
    uint64_t live = e->sum_live, peak_live = s->peak_live;
    uint64_t req = e->sum_requested, peak_req = s->peak_requested;
    const uint64_t last = e->last_stream;
    const int have_last = e->have_last_stream;
    size_t i = 0;
    for (; i < n; i++) {
        const as_event *x = &ev[i];
        if (x->op == AS_OP_ALLOC) {
            allocs++;
            /* min_request: the smallest size above 0 (0 - 1 wraps above every size) */
            if (x->size - 1 < min_req - 1)
                min_req = x->size;
            live++;
            peak_live = live > peak_live ? live : peak_live;
            req += x->size;
            peak_req = req > peak_req ? req : peak_req;
            if (have_last && x->stream == last)
                continue;
        } else if (x->op == AS_OP_FREE) {
            frees++;
            live -= live > 0;
            if (!e->sum_pending.n) {
                req -= x->size;
                continue;
            }
        }
        e->sum_requested = req;
        int rc = summary_other(e, x);
        req = e->sum_requested;
        if (rc) {
            *failed = 1;
            s->events++; /* the failing event is counted, as the error's event number */
            break;
        }
        if (e->have_last_stream != have_last || e->last_stream != last) {
            i++;
            break; /* a new last stream: the loop's constants change */
        }
    }
    s->events += i;
    s->allocs = allocs;
    s->frees = frees;
    s->min_request = min_req;
    e->sum_live = live;
    s->peak_live = peak_live;
    e->sum_requested = req;
    s->peak_requested = peak_req;
    return i;
}

/* Whether the summary can be the reader's tally: events come from rd, which has handed
 * out none so far. */
static int fresh_reader(as_engine *e, as_trace_reader *rd)
{
    as_trace_tally t;
    return !e->mem && rd && as_trace_reader_tally(rd, &t) == 0 && t.events == 0;
}

/* Decodes up to BATCH events (fewer at the end). Returns 0 (more may follow),
 * AS_TRACE_EOF, AS_ELIMIT (past opts.max_live: *n = 0, the batch is not to be
 * run), or < 0 with *err filled; the events before an error are in buf. */
static int decode(as_engine *e, as_trace_reader *rd, eng_ev *buf, size_t *n, as_trace_error *err)
{
    size_t k = 0;
    int rc = 0;
    while (k < BATCH) {
        size_t got = 0;
        uint64_t before = e->sum.events;
        rc = next_batch(e, rd, buf + k, BATCH - k, &got);
        if (e->tally) {
            find_t0(e, buf + k, got);
            tally_summary(e, rd);
        }
        for (size_t i = 0; i < got && !e->tally;) {
            int failed = 0;
            i += summarise(e, buf + k + i, got - i, &failed);
            if (failed) {
                *n = k + i;
                if (err) {
                    memset(err, 0, sizeof *err);
                    err->code = AS_ENOMEM;
                    err->offset = UINT64_MAX;
                    err->event = e->sum.events;
                    snprintf(err->msg, sizeof err->msg, "out of host memory");
                }
                return AS_ENOMEM;
            }
        }
        k += got;
        if (e->o.max_live && as_engine_live_weight(&e->sum) > e->o.max_live) {
            *n = 0;
            return AS_ELIMIT;
        }
        if (rd && e->o.on_progress && (before >> 20) != (e->sum.events >> 20)) {
            uint64_t done, total;
            as_trace_reader_progress(rd, &done, &total);
            e->o.on_progress(e->o.user, e->sum.events, done, total);
        }
        if (rc)
            break;
    }
    *n = k;
    if (rc < 0 && err) {
        const as_trace_error *re = rd ? as_trace_reader_error(rd) : NULL;
        if (re)
            *err = *re;
        else {
            memset(err, 0, sizeof *err);
            err->code = rc;
        }
    }
    return rc;
}

/* A batch for the runs: decode, then opts.on_events sees it (the events before an error
 * too: the runs get them). */
static int decode_run(as_engine *e, as_trace_reader *rd, eng_ev *buf, size_t *n,
                      as_trace_error *err)
{
    int rc = decode(e, rd, buf, n, err);
    if (e->o.on_events && *n)
        e->o.on_events(e->o.user, buf, *n);
    return rc;
}

/* The next batch for the runs: decoded into buf, or (as_engine_run_slotted) the caller's
 * events themselves, with no copy, no renumbering and no summary but the event count. */
static int feed(as_engine *e, as_trace_reader *rd, eng_ev *buf, const eng_ev **bat, size_t *n,
                as_trace_error *err)
{
    if (!e->mem_inplace) {
        *bat = buf;
        return decode_run(e, rd, buf, n, err);
    }
    size_t k = e->mem_n - e->mem_pos < BATCH ? e->mem_n - e->mem_pos : BATCH;
    *bat = e->mem + e->mem_pos;
    *n = k;
    find_t0(e, *bat, k);
    e->sum.events += k;
    e->mem_pos += k;
    if (e->o.on_events && k)
        e->o.on_events(e->o.user, *bat, k);
    return e->mem_pos < e->mem_n ? 0 : AS_TRACE_EOF;
}

/* ---- threads ------------------------------------------------------------------------ */

static void work(as_engine *e)
{
    unsigned i;
    while ((i = atomic_fetch_add(&e->next_run, 1)) < e->nruns)
        run_timed(e->runs[e->order[i]], e->cur, e->cur_n);
}

/* Longest first: a batch ends when its slowest run does, so the runs that cost most so far
 * start first and the cheap ones fill in behind them (the order changes little from batch
 * to batch, so the insertion sort is about one pass). */
static void order_runs(as_engine *e)
{
    for (unsigned i = 1; i < e->nruns; i++) {
        unsigned x = e->order[i], j = i;
        for (; j > 0 && e->runs[e->order[j - 1]]->cpu < e->runs[x]->cpu; j--)
            e->order[j] = e->order[j - 1];
        e->order[j] = x;
    }
}

static void *worker(void *arg)
{
    as_engine *e = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (e->gen == seen && !e->quit)
            pthread_cond_wait(&e->go, &e->mu);
        if (e->quit)
            break;
        seen = e->gen;
        pthread_mutex_unlock(&e->mu);
        work(e);
        pthread_mutex_lock(&e->mu);
        if (--e->busy == 0)
            pthread_cond_signal(&e->done);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

static void publish(as_engine *e, const eng_ev *buf, size_t n)
{
    order_runs(e); /* the workers are idle: the runs' times are settled */
    pthread_mutex_lock(&e->mu);
    e->cur = buf;
    e->cur_n = n;
    atomic_store(&e->next_run, 0);
    e->busy = e->nth;
    e->gen++;
    pthread_cond_broadcast(&e->go);
    pthread_mutex_unlock(&e->mu);
}

static void wait_done(as_engine *e)
{
    work(e); /* the reading thread helps with whatever runs are left */
    pthread_mutex_lock(&e->mu);
    while (e->busy)
        pthread_cond_wait(&e->done, &e->mu);
    pthread_mutex_unlock(&e->mu);
}

static unsigned pick_threads(const as_engine *e)
{
    /* One per run plus the reader, which decodes while the runs work; more would idle. */
    unsigned want = e->nruns + 1;
    if (e->o.threads)
        return e->o.threads < want ? e->o.threads : want;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1)
        cores = 1;
    return want < (unsigned)cores ? want : (unsigned)cores;
}

/* Hands opts.on_runs where the runs are (reading thread, workers idle). */
static void report_runs(as_engine *e, as_trace_reader *rd)
{
    as_engine_progress p = {.events = e->fed, .decoded = e->sum.events, .runs = e->nruns};
    as_trace_reader_progress(rd, &p.bytes_done, &p.bytes_total);
    for (unsigned i = 0; i < e->nruns; i++) {
        p.runs_done += e->runs[i]->stopped;
        p.run_events += e->runs[i]->events;
    }
    e->o.on_runs(e->o.user, &p);
}

/* After a batch: callbacks, then the first run error (lowest run index) if any. */
static int after_batch(as_engine *e)
{
    for (unsigned i = 0; i < e->nruns; i++)
        run_flush(e, e->runs[i]);
    for (unsigned i = 0; i < e->nruns; i++) {
        if (e->runs[i]->err) {
            snprintf(e->msg, sizeof e->msg, "%s", e->runs[i]->msg);
            return e->runs[i]->err;
        }
    }
    return 0;
}

/* ---- offline runs ------------------------------------------------------------------- */

/* The whole trace into e->own (MARK labels dropped: no run reads them). A reader error
 * ends it; the events before it are kept and the error comes after them (mem_rc). */
static int preload(as_engine *e, as_trace_reader *rd)
{
    size_t n = 0, cap = 0, got = 0;
    int rc = 0;
    while (rc == 0) {
        if (as_grow((void **)&e->own, &cap, n + BATCH, sizeof *e->own, 4 * BATCH)) {
            snprintf(e->msg, sizeof e->msg, "out of host memory for the whole trace");
            return AS_ENOMEM;
        }
        got = 0;
        rc = as_trace_next_batch(rd, e->own + n, BATCH, &got);
        for (size_t i = n; i < n + got; i++)
            if (e->own[i].op == AS_OP_MARK) /* an ALLOC's pool shares the field */
                e->own[i].label = NULL;
        n += got;
    }
    e->mem = e->own;
    e->mem_n = n;
    e->mem_pos = 0;
    e->mem_rc = rc < 0 ? rc : 0;
    return 0;
}

/* Hands every offline run the lifetimes of the whole trace (as_policy.plan). */
static int plan_offline(as_engine *e, as_trace_reader *rd)
{
    int any = 0, rc = 0;
    for (unsigned i = 0; i < e->nruns; i++)
        any |= as_policy_offline(e->runs[i]->pol);
    if (!any)
        return 0;
    if (!e->mem && (rc = preload(e, rd)))
        return rc;
    as_lifetime *lt = NULL;
    size_t n = 0;
    if (as_lifetimes_of(e->mem, e->mem_n, &lt, &n)) {
        snprintf(e->msg, sizeof e->msg, "out of host memory for the lifetimes");
        return AS_ENOMEM;
    }
    for (unsigned i = 0; i < e->nruns && rc == 0; i++) {
        run *r = e->runs[i];
        int prc = as_policy_offline(r->pol) ? r->pol->plan(r->st, lt, n) : 0;
        if (prc) {
            run_fail(r, prc == AS_ENOMEM ? AS_ENOMEM : AS_EPOLICY, "policy %s: plan returned %d",
                     r->pol->name, prc);
            snprintf(e->msg, sizeof e->msg, "%s", r->msg);
            rc = r->err;
        }
    }
    free(lt);
    return rc;
}

/* ---- public ------------------------------------------------------------------------- */

int as_engine_create(const as_engine_opts *opts, as_engine **out)
{
    *out = NULL;
    as_engine *e = calloc(1, sizeof *e);
    if (!e)
        return AS_ENOMEM;
    if (opts)
        e->o = *opts;
    if (e->o.timeline_every == 0)
        e->o.on_sample = NULL; /* peaks and OOM samples belong to a timeline too */
    *out = e;
    return 0;
}

int as_engine_add_run(as_engine *e, const as_policy_spec *spec, uint64_t capacity)
{
    if (e->ran || !spec || !spec->policy || spec->policy->abi != AS_POLICY_ABI ||
        !spec->policy->init || !spec->policy->alloc || !spec->policy->free ||
        !spec->policy->stats || (spec->policy->n_knobs && !spec->values))
        return AS_EUSAGE;
    if (e->nruns == e->capruns) {
        unsigned nc = e->capruns ? e->capruns * 2 : 8;
        run **nr = realloc(e->runs, nc * sizeof *nr);
        if (!nr)
            return AS_ENOMEM;
        e->runs = nr;
        e->capruns = nc;
    }
    run *r = calloc(1, sizeof *r);
    if (!r)
        return AS_ENOMEM;
    r->e = e;
    r->index = e->nruns;
    r->spec = spec;
    r->pol = spec->policy;
    r->hot = builtin_loop(r->pol);
    r->capacity = capacity;
    r->walk_event = AS_NONE;
    r->peak_walk_at = SIZE_MAX;
    r->res.policy = spec->text ? spec->text : spec->policy->name;
    r->res.spec = spec->input ? spec->input : r->res.policy;
    r->res.capacity = capacity;
    r->res.oom_event = r->res.oom_alloc = AS_NONE;
    r->res.peak_reserved_event = AS_NONE;
    r->res.offline = as_policy_offline(r->pol);
    e->runs[e->nruns++] = r;
    return (int)r->index;
}

int as_engine_walk_after(as_engine *e, unsigned run_index, uint64_t event)
{
    if (run_index >= e->nruns || e->ran)
        return AS_EUSAGE;
    e->runs[run_index]->walk_event = event;
    return 0;
}

/* The worker threads beside this one (pick_threads; none on one core). *started is set
 * once the lock and conditions exist, for stop_workers. */
static int start_workers(as_engine *e, int *started)
{
    unsigned threads = pick_threads(e);
    e->nth = 0;
    if (threads <= 1)
        return 0;
    e->th = calloc(threads - 1, sizeof *e->th);
    e->order = malloc(e->nruns * sizeof *e->order);
    for (unsigned i = 0; e->order && i < e->nruns; i++)
        e->order[i] = i;
    if (!e->th || !e->order || pthread_mutex_init(&e->mu, NULL) ||
        pthread_cond_init(&e->go, NULL) || pthread_cond_init(&e->done, NULL)) {
        snprintf(e->msg, sizeof e->msg, "cannot set up threads");
        return AS_ENOMEM;
    }
    *started = 1;
    for (unsigned t = 0; t + 1 < threads; t++) {
        if (pthread_create(&e->th[t], NULL, worker, e))
            break;
        e->nth++;
    }
    return 0;
}

static void stop_workers(as_engine *e, int started)
{
    if (started) {
        pthread_mutex_lock(&e->mu);
        e->quit = 1;
        pthread_cond_broadcast(&e->go);
        pthread_mutex_unlock(&e->mu);
        for (unsigned t = 0; t < e->nth; t++)
            pthread_join(e->th[t], NULL);
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->go);
        pthread_cond_destroy(&e->done);
    }
    free(e->th);
    free(e->order);
    e->th = NULL;
    e->order = NULL;
}

int as_engine_run(as_engine *e, as_trace_reader *rd, as_trace_error *err)
{
    if (err) { /* a code here means the trace failed, 0 that the engine or a run did */
        memset(err, 0, sizeof *err);
        err->offset = err->event = UINT64_MAX;
    }
    if (e->ran || e->nruns == 0) {
        snprintf(e->msg, sizeof e->msg, "%s", e->ran ? "engine already ran" : "no runs");
        return AS_EUSAGE;
    }
    e->ran = 1;
    int rc = 0, trc = 0, started = 0, stopped = 0;
    const as_sites *sites = rd ? as_trace_reader_sites(rd) : e->o.sites;
    if (!e->o.no_caught_ooms && sites && as_caught_create(sites, &e->caught)) {
        snprintf(e->msg, sizeof e->msg, "out of host memory");
        return AS_ENOMEM;
    }
    eng_ev *buf[2] = {malloc(BATCH * sizeof(eng_ev)), malloc(BATCH * sizeof(eng_ev))};
    if (!buf[0] || !buf[1]) {
        rc = AS_ENOMEM;
        snprintf(e->msg, sizeof e->msg, "out of host memory");
        goto out;
    }
    for (unsigned i = 0; i < e->nruns; i++) {
        run *r = e->runs[i];
        if (run_start(r)) {
            rc = r->err;
            snprintf(e->msg, sizeof e->msg, "%s", r->msg);
            goto out;
        }
    }

    if ((rc = plan_offline(e, rd)))
        goto out;

    size_t n[2] = {0, 0};
    const eng_ev *bat[2] = {buf[0], buf[1]};
    int cur = 0;
    e->tally = fresh_reader(e, rd);
    trc = feed(e, rd, buf[0], &bat[0], &n[0], err);
    /* Threads only for a trace longer than one batch: a short command (a tiny trace, a
     * test) would spend more on creating and joining them than on its events. */
    if (trc == 0 && (rc = start_workers(e, &started)))
        goto out;
    while (n[cur] > 0) {
        /* the tally counts the batches decoded so far: this one and none after it yet */
        e->cur_slots = e->tally ? (uint32_t)e->sum.peak_live : 0;
        if (e->nth) {
            publish(e, bat[cur], n[cur]);
            n[!cur] = 0;
            if (trc == 0)
                trc = feed(e, rd, buf[!cur], &bat[!cur], &n[!cur], err);
            wait_done(e);
        } else {
            for (unsigned i = 0; i < e->nruns; i++)
                run_timed(e->runs[i], bat[cur], n[cur]);
            n[!cur] = 0;
            if (trc == 0)
                trc = feed(e, rd, buf[!cur], &bat[!cur], &n[!cur], err);
        }
        if ((rc = after_batch(e)))
            goto out;
        e->fed += n[cur];
        if (e->o.on_runs && rd)
            report_runs(e, rd);
        if (e->o.stop && *e->o.stop) {
            stopped = 1;
            break;
        }
        cur = !cur;
    }
    if (trc == AS_ELIMIT) {
        rc = trc;
        snprintf(e->msg, sizeof e->msg,
                 "more than %llu allocations live at once (the memory budget's limit; a "
                 "stream past the first counts as %u)",
                 (unsigned long long)e->o.max_live, AS_ENGINE_STREAM_LIVES);
        goto out;
    }
    e->sum.live_at_end = e->sum.allocs - e->sum.frees;
    for (unsigned i = 0; i < e->nruns; i++) {
        run_finish(e->runs[i]);
        e->runs[i]->res.finished = !stopped || e->runs[i]->stopped;
    }
    if ((rc = after_batch(e)))
        goto out;
    if (stopped) {
        rc = AS_ENGINE_STOPPED;
        snprintf(e->msg, sizeof e->msg, "stopped");
    } else if (trc < 0) {
        rc = trc;
        snprintf(e->msg, sizeof e->msg, "%s", err ? err->msg : "trace error");
    }
out:
    stop_workers(e, started);
    free(buf[0]);
    free(buf[1]);
    return rc;
}

int as_engine_run_events(as_engine *e, const as_event *evs, size_t n, as_trace_error *err)
{
    static const as_event none;
    e->mem = n ? evs : &none;
    e->mem_n = n;
    e->mem_pos = 0;
    return as_engine_run(e, NULL, err);
}

int as_engine_run_slotted(as_engine *e, const as_event *evs, size_t n, as_trace_error *err)
{
    e->mem_inplace = 1;
    return as_engine_run_events(e, evs, n, err);
}

int as_engine_number_slots(as_event *evs, size_t n)
{
    as_engine *e = NULL;
    as_engine_opts o = {0};
    int rc = as_engine_create(&o, &e);
    if (rc == 0 && mem_slots(e, evs, n))
        rc = AS_ENOMEM;
    as_engine_destroy(e);
    return rc;
}

int as_engine_scan(as_engine *e, as_trace_reader *rd, as_trace_error *err)
{
    if (e->ran || e->nruns) {
        snprintf(e->msg, sizeof e->msg, "%s", e->ran ? "engine already ran" : "scan with runs");
        return AS_EUSAGE;
    }
    e->ran = 1;
    eng_ev *buf = malloc(BATCH * sizeof *buf);
    if (!buf) {
        snprintf(e->msg, sizeof e->msg, "out of host memory");
        return AS_ENOMEM;
    }
    uint64_t max_live = e->o.max_live;
    e->o.max_live = 0;
    e->tally = fresh_reader(e, rd);
    size_t n;
    int rc, stopped = 0;
    while ((rc = decode(e, rd, buf, &n, err)) == 0)
        if (e->o.stop && *e->o.stop) {
            stopped = 1;
            break;
        }
    e->o.max_live = max_live;
    free(buf);
    e->sum.live_at_end = e->sum.allocs - e->sum.frees;
    if (rc < 0)
        snprintf(e->msg, sizeof e->msg, "%s", err ? err->msg : "trace error");
    return stopped ? AS_ENGINE_STOPPED : rc < 0 ? rc : 0;
}

uint64_t as_engine_live_weight(const as_trace_summary *s)
{
    uint64_t more = s->streams > 1 ? s->streams - 1 : 0;
    if (more > (UINT64_MAX - s->peak_live) / AS_ENGINE_STREAM_LIVES)
        return UINT64_MAX;
    return s->peak_live + more * AS_ENGINE_STREAM_LIVES;
}

uint64_t as_engine_run_bytes(uint64_t peak_live, uint64_t streams, int logs)
{
    uint64_t per = AS_ENGINE_RUN_BASE + (logs ? AS_ENGINE_RUN_LOGS : 0);
    as_trace_summary s = {.peak_live = peak_live, .streams = streams};
    uint64_t w = as_engine_live_weight(&s);
    if (w > (UINT64_MAX - per) / AS_ENGINE_RUN_PER_LIVE)
        return UINT64_MAX;
    return per + w * AS_ENGINE_RUN_PER_LIVE;
}

unsigned as_engine_nruns(const as_engine *e)
{
    return e->nruns;
}

const as_run_result *as_engine_result(const as_engine *e, unsigned i)
{
    return i < e->nruns ? &e->runs[i]->res : NULL;
}

const as_trace_summary *as_engine_summary(const as_engine *e)
{
    return &e->sum;
}

const char *as_engine_errmsg(const as_engine *e)
{
    return e->msg;
}

void as_engine_destroy(as_engine *e)
{
    if (!e)
        return;
    for (unsigned i = 0; i < e->nruns; i++) {
        run *r = e->runs[i];
        if (r->sim)
            as_simdev_set_log(r->sim, NULL, NULL);
        else if (r->fdev && e->o.factory->set_log)
            e->o.factory->set_log(e->o.factory->user, r->fdev, NULL, NULL);
        if (r->inited && r->pol->fini)
            r->pol->fini(r->st);
        if (r->sim)
            as_simdev_destroy(r->sim);
        if (r->fdev && e->o.factory->destroy)
            e->o.factory->destroy(e->o.factory->user, r->fdev);
        free(r->live);
        as_caught_run_free(&r->fallen);
        free(r->st);
        free(r->segs);
        free(r->blks);
        free(r->smp);
        free(r->walks);
        free(r);
    }
    free(e->runs);
    free(e->own);
    as_idmap_free(&e->sum_pending);
    as_idmap_free(&e->mem_live);
    free(e->mem_free);
    as_idmap_free(&e->sum_streams);
    as_caught_destroy(e->caught);
    free(e);
}
