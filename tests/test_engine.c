/*
 * test_engine.c - the engine: OOM index rules, FREE_REQ semantics, keep_going, segment
 * records and their alloc ordinals, timeline samples, errors, and independence from the
 * thread count. Also defines the in-test source and policies (engine_fixture.h).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_fixture.h"
#include "idmap.h"
#include "source.h"
#include "util.h"

/* ---- fixture: policy ------------------------------------------------------------------ */

typedef struct tf_blk {
    uint64_t addr, seg, blk, id;
    int used;
} tf_blk;

typedef struct tf_seg {
    uint64_t addr, seg;
} tf_seg;

typedef struct tf_state {
    const as_device *dev;
    int cache, lie;
    int64_t fail_size;
    tf_blk *b;
    size_t nb, capb;
    size_t *fr; /* free slots of b */
    size_t nfr, capfr;
    tf_seg *c; /* cached segments (cache=1) */
    size_t nc, capc;
    uint64_t allocated, reserved, live;
} tf_state;

static const as_knob tf_knobs[] = {
    {.name = "cache", .type = AS_KNOB_BOOL, .def = 0, .min = 0, .max = 1, .help = "cache"},
    {.name = "fail_size",
     .type = AS_KNOB_SIZE,
     .def = 0,
     .min = 0,
     .max = INT64_MAX,
     .help = "alloc of this size is a policy error"},
    {.name = "lie", .type = AS_KNOB_BOOL, .def = 0, .min = 0, .max = 1, .help = "bad stats"},
};

static int tf_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    void *np = realloc(*p, nc * elem);
    if (!np)
        return -1;
    *p = np;
    *cap = nc;
    return 0;
}

static int tf_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    tf_state *s = st;
    s->dev = dev;
    s->cache = (int)cfg[0].i;
    s->fail_size = cfg[1].i;
    s->lie = (int)cfg[2].i;
    return 0;
}

static void tf_drop_cache(tf_state *s)
{
    for (size_t i = 0; i < s->nc; i++) {
        s->dev->ops->release(s->dev->ctx, s->c[i].addr, s->c[i].seg);
        s->reserved -= s->c[i].seg;
    }
    s->nc = 0;
}

static int tfp_alloc(void *st, const as_request *rq, as_block *out)
{
    tf_state *s = st;
    if (s->fail_size && rq->size == (uint64_t)s->fail_size)
        return AS_EINVAL;
    uint64_t blk = (rq->size + 511) / 512 * 512;
    uint64_t seg = (blk + TF_MIB * 2 - 1) / (TF_MIB * 2) * (TF_MIB * 2);
    uint64_t addr = 0;
    int found = 0;
    for (size_t i = 0; i < s->nc && !found; i++) {
        if (s->c[i].seg == seg) {
            addr = s->c[i].addr;
            s->c[i] = s->c[--s->nc];
            found = 1;
        }
    }
    if (!found) {
        int rc = s->dev->ops->reserve(s->dev->ctx, seg, &addr);
        if (rc == AS_DEV_OOM && s->nc) {
            tf_drop_cache(s);
            rc = s->dev->ops->reserve(s->dev->ctx, seg, &addr);
        }
        if (rc == AS_DEV_OOM)
            return AS_POLICY_OOM;
        if (rc)
            return AS_EDEVICE;
        s->reserved += seg;
    }
    size_t h;
    if (s->nfr) {
        h = s->fr[--s->nfr];
    } else {
        if (tf_grow((void **)&s->b, &s->capb, s->nb + 1, sizeof *s->b))
            return AS_ENOMEM;
        h = s->nb++;
    }
    s->b[h] = (tf_blk){.addr = addr, .seg = seg, .blk = blk, .id = rq->id, .used = 1};
    s->allocated += blk;
    s->live++;
    *out = (as_block){.addr = addr, .size = blk, .handle = h};
    return 0;
}

static int tfp_free(void *st, uint64_t h, unsigned flags)
{
    tf_state *s = st;
    if (h >= s->nb || !s->b[h].used)
        return AS_EINVAL;
    if (flags & AS_FREE_PENDING)
        return 0; /* stays allocated (and reserved) until the FREE */
    tf_blk *b = &s->b[h];
    if (s->cache) {
        if (tf_grow((void **)&s->c, &s->capc, s->nc + 1, sizeof *s->c))
            return AS_ENOMEM;
        s->c[s->nc++] = (tf_seg){b->addr, b->seg};
    } else {
        if (s->dev->ops->release(s->dev->ctx, b->addr, b->seg))
            return AS_EDEVICE;
        s->reserved -= b->seg;
    }
    s->allocated -= b->blk;
    s->live--;
    b->used = 0;
    if (tf_grow((void **)&s->fr, &s->capfr, s->nfr + 1, sizeof *s->fr))
        return AS_ENOMEM;
    s->fr[s->nfr++] = h;
    return 0;
}

static int tf_empty(void *st)
{
    tf_drop_cache(st);
    return 0;
}

static void tf_stats(const void *st, as_policy_stats *o)
{
    const tf_state *s = st;
    uint64_t largest = 0, freeb = 0;
    for (size_t i = 0; i < s->nb; i++) {
        if (!s->b[i].used)
            continue;
        uint64_t f = s->b[i].seg - s->b[i].blk;
        freeb += f;
        if (f > largest)
            largest = f;
    }
    for (size_t i = 0; i < s->nc; i++) {
        freeb += s->c[i].seg;
        if (s->c[i].seg > largest)
            largest = s->c[i].seg;
    }
    *o = (as_policy_stats){
        .allocated = s->allocated + (s->lie && s->live >= 3),
        .reserved = s->reserved,
        .free_bytes = freeb,
        .largest_free = largest,
        .segments = s->live + s->nc,
    };
}

static int tf_check(const void *st, as_check_failure *f)
{
    const tf_state *s = st;
    uint64_t a = 0, r = 0;
    for (size_t i = 0; i < s->nb; i++)
        if (s->b[i].used) {
            a += s->b[i].blk;
            r += s->b[i].seg;
        }
    for (size_t i = 0; i < s->nc; i++)
        r += s->c[i].seg;
    if (a != s->allocated || r != s->reserved) {
        snprintf(f->msg, sizeof f->msg, "tf: counters disagree");
        return AS_ECHECK;
    }
    return 0;
}

static int tf_walk(const void *st, as_walk_fn fn, void *user)
{
    const tf_state *s = st;
    for (size_t i = 0; i < s->nb; i++) {
        if (!s->b[i].used)
            continue;
        as_walk_item seg = {
            .kind = AS_WALK_SEGMENT, .addr = s->b[i].addr, .size = s->b[i].seg, .id = UINT64_MAX};
        as_walk_item blk = {.kind = AS_WALK_BLOCK,
                            .addr = s->b[i].addr,
                            .size = s->b[i].blk,
                            .state = AS_BLOCK_ALLOCATED,
                            .id = s->b[i].id};
        int rc = fn(user, &seg);
        if (!rc)
            rc = fn(user, &blk);
        if (rc)
            return rc;
    }
    return 0;
}

static void tf_fini(void *st)
{
    tf_state *s = st;
    tf_drop_cache(s);
    for (size_t i = 0; i < s->nb; i++)
        if (s->b[i].used)
            s->dev->ops->release(s->dev->ctx, s->b[i].addr, s->b[i].seg);
    free(s->b);
    free(s->fr);
    free(s->c);
}

const as_policy tf_policy = {
    .name = "tf",
    .summary = "test policy",
    .abi = AS_POLICY_ABI,
    .knobs = tf_knobs,
    .n_knobs = 3,
    .state_size = sizeof(tf_state),
    .init = tf_init,
    .alloc = tfp_alloc,
    .free = tfp_free,
    .empty_cache = tf_empty,
    .stats = tf_stats,
    .check = tf_check,
    .walk = tf_walk,
    .fini = tf_fini,
};

void tf_spec(as_policy_spec *s, int cache, int64_t fail_size, int lie)
{
    s->policy = &tf_policy;
    s->values = calloc(3, sizeof *s->values);
    s->values[0].i = cache;
    s->values[1].i = fail_size;
    s->values[2].i = lie;
    s->text = malloc(64);
    snprintf(s->text, 64, "tf,cache=%d", cache);
}

void tf_spec_free(as_policy_spec *s)
{
    free(s->values);
    free(s->text);
}

/* ---- fixture: source --------------------------------------------------------------- */

typedef struct tf_src {
    as_event *evs;
    size_t n, i;
    uint64_t fail_after;
} tf_src;

static int tf_src_next(void *st, as_event *ev, as_trace_error *err)
{
    tf_src *s = st;
    if (s->i == s->fail_after) {
        memset(err, 0, sizeof *err);
        err->code = AS_ECORRUPT;
        err->offset = s->i;
        err->event = s->i;
        snprintf(err->msg, sizeof err->msg, "tf: injected corruption");
        return AS_ECORRUPT;
    }
    if (s->i >= s->n)
        return AS_TRACE_EOF;
    *ev = s->evs[s->i++];
    if (ev->op == AS_OP_MARK)
        ev->label = "m";
    return 0;
}

static void tf_src_close(void *st)
{
    tf_src *s = st;
    free(s->evs);
    free(s);
}

static const as_source_ops tf_src_ops = {
    .name = "tf",
    .fmt = AS_FMT_TEXT,
    .next = tf_src_next,
    .close = tf_src_close,
};

as_trace_reader *tf_reader(const as_event *evs, size_t n, uint64_t fail_after)
{
    tf_src *s = calloc(1, sizeof *s);
    s->evs = malloc((n ? n : 1) * sizeof *evs);
    memcpy(s->evs, evs, n * sizeof *evs);
    s->n = n;
    s->fail_after = fail_after;
    as_meta m = {0};
    as_trace_reader *r = NULL;
    if (as_trace_reader_from_source(&tf_src_ops, s, &m, "tf-trace", &r))
        return NULL;
    return r;
}

as_event tf_alloc(uint64_t id, uint64_t size)
{
    return (as_event){.op = AS_OP_ALLOC, .id = id, .size = size, .time_us = AS_TIME_NONE};
}
as_event tf_free(uint64_t id)
{
    return (as_event){.op = AS_OP_FREE, .id = id, .time_us = AS_TIME_NONE};
}
as_event tf_free_req(uint64_t id)
{
    return (as_event){.op = AS_OP_FREE_REQ, .id = id, .time_us = AS_TIME_NONE};
}
as_event tf_op(as_op op)
{
    return (as_event){.op = op, .time_us = AS_TIME_NONE};
}

int tf_run(const as_event *evs, size_t n, const as_engine_opts *o, const as_policy_spec *specs,
           const uint64_t *caps, unsigned nruns, as_engine **out)
{
    as_engine *e = NULL;
    as_engine_opts d = {.threads = 1};
    if (as_engine_create(o ? o : &d, &e))
        return -1000;
    for (unsigned i = 0; i < nruns; i++)
        if (as_engine_add_run(e, &specs[i], caps[i]) != (int)i)
            return -1001;
    as_trace_reader *r = tf_reader(evs, n, UINT64_MAX);
    as_trace_error err;
    memset(&err, 0, sizeof err);
    int rc = as_engine_run(e, r, &err);
    as_trace_close(r);
    *out = e;
    return rc;
}

/* ---- tests ----------------------------------------------------------------------------- */

#define NEV(a) (sizeof(a) / sizeof((a)[0]))

/* The OOM trace. Capacity 6 MiB, policy tnc (one 2 MiB-rounded segment per block):
 *   e0 ALLOC id0 4 MiB      reserved 4
 *   e1 MARK
 *   e2 FREE id0             reserved 0
 *   e3 ALLOC id1 2 MiB      reserved 2
 *   e4 ALLOC id2 4 MiB      reserved 6 (exactly the capacity: fits)
 *   e5 MARK
 *   e6 ALLOC id3 1 byte     needs 2 MiB more: 8 > 6, OOM at event 6, alloc 3
 *   e7 FREE id1             reserved 4
 *   e8 ALLOC id4 1 byte     reserved 6 (keep_going only)
 *   e9 FREE id3             the failed allocation: ignored by the engine
 * At the OOM: reserved 6 MiB, allocated = requested = 2 MiB + 4 MiB (both 512-aligned). */
static const as_event oom_trace[] = {
    {AS_OP_ALLOC, 0, 0, 4 * TF_MIB, 0, AS_TIME_NONE, {NULL}},
    {AS_OP_MARK, 0, 0, 0, 0, AS_TIME_NONE, {NULL}},
    {AS_OP_FREE, 0, 0, 0, 0, AS_TIME_NONE, {NULL}},
    {AS_OP_ALLOC, 0, 1, 2 * TF_MIB, 0, AS_TIME_NONE, {NULL}},
    {AS_OP_ALLOC, 0, 2, 4 * TF_MIB, 0, AS_TIME_NONE, {NULL}},
    {AS_OP_MARK, 0, 0, 0, 0, AS_TIME_NONE, {NULL}},
    {AS_OP_ALLOC, 0, 3, 1, 0, AS_TIME_NONE, {NULL}},
    {AS_OP_FREE, 0, 1, 0, 0, AS_TIME_NONE, {NULL}},
    {AS_OP_ALLOC, 0, 4, 1, 0, AS_TIME_NONE, {NULL}},
    {AS_OP_FREE, 0, 3, 0, 0, AS_TIME_NONE, {NULL}},
};

static void test_oom_indices(void)
{
    as_policy_spec sp[3];
    for (int i = 0; i < 3; i++)
        tf_spec(&sp[i], 0, 0, 0);
    uint64_t caps[3] = {6 * TF_MIB, 6 * TF_MIB - 1, 8 * TF_MIB};
    as_engine *e;
    as_engine_opts o = {.threads = 1, .check = 1};
    CU_ASSERT_EQUAL_FATAL(tf_run(oom_trace, NEV(oom_trace), &o, sp, caps, 3, &e), 0);
    const as_run_result *r = as_engine_result(e, 0);
    CU_ASSERT_FALSE(r->completed);
    CU_ASSERT_EQUAL(r->oom_event, 6); /* MARKs and the FREE count as events ... */
    CU_ASSERT_EQUAL(r->oom_alloc, 3); /* ... but not as allocations */
    CU_ASSERT_EQUAL(r->oom_size, 1);
    CU_ASSERT_EQUAL(r->oom_reserved, 6 * TF_MIB);
    CU_ASSERT_EQUAL(r->oom_allocated, 6 * TF_MIB);
    CU_ASSERT_EQUAL(r->oom_requested, 6 * TF_MIB);
    CU_ASSERT_EQUAL(r->ooms, 1);
    CU_ASSERT_EQUAL(r->events, 6); /* stopped there */
    CU_ASSERT_EQUAL(r->allocs, 3);
    CU_ASSERT_EQUAL(r->peak_reserved, 6 * TF_MIB);
    /* One byte less: 6 MiB no longer fits at event 4 (alloc 2): 2 + 4 > 6 MiB - 1. */
    r = as_engine_result(e, 1);
    CU_ASSERT_EQUAL(r->oom_event, 4);
    CU_ASSERT_EQUAL(r->oom_alloc, 2);
    CU_ASSERT_EQUAL(r->oom_reserved, 2 * TF_MIB);
    /* 8 MiB: everything fits (peak 2 + 4 + 2 at event 6). */
    r = as_engine_result(e, 2);
    CU_ASSERT_TRUE(r->completed);
    CU_ASSERT_EQUAL(r->oom_event, AS_NONE);
    CU_ASSERT_EQUAL(r->oom_alloc, AS_NONE);
    CU_ASSERT_EQUAL(r->events, NEV(oom_trace));
    CU_ASSERT_EQUAL(r->allocs, 5);
    CU_ASSERT_EQUAL(r->peak_reserved, 8 * TF_MIB);
    CU_ASSERT_EQUAL(r->peak_reserved_event, 6);
    as_engine_destroy(e);
    for (int i = 0; i < 3; i++)
        tf_spec_free(&sp[i]);
}

static void test_keep_going(void)
{
    as_policy_spec sp;
    tf_spec(&sp, 0, 0, 0);
    uint64_t cap = 6 * TF_MIB;
    as_engine *e;
    as_engine_opts o = {.threads = 1, .check = 1, .keep_going = 1};
    CU_ASSERT_EQUAL_FATAL(tf_run(oom_trace, NEV(oom_trace), &o, &sp, &cap, 1, &e), 0);
    const as_run_result *r = as_engine_result(e, 0);
    CU_ASSERT_FALSE(r->completed); /* an OOM happened */
    CU_ASSERT_EQUAL(r->ooms, 1);   /* e8 fits once id1 is gone */
    CU_ASSERT_EQUAL(r->oom_event, 6);
    CU_ASSERT_EQUAL(r->oom_alloc, 3);
    CU_ASSERT_EQUAL(r->events, NEV(oom_trace));
    CU_ASSERT_EQUAL(r->allocs, 5);
    /* Left live: id2 (4 MiB) and id4 (1 byte, block 512, segment 2 MiB); the FREE of the
     * failed id3 changed nothing. */
    CU_ASSERT_EQUAL(r->final_requested, 4 * TF_MIB + 1);
    CU_ASSERT_EQUAL(r->final_allocated, 4 * TF_MIB + 512);
    CU_ASSERT_EQUAL(r->final_reserved, 6 * TF_MIB);
    as_engine_destroy(e);
    tf_spec_free(&sp);
}

/* FREE_REQ: the allocation stops counting for requested/allocated at the FREE_REQ, but its
 * segment stays reserved until the FREE.
 *   e0 ALLOC id0 1 MiB   req 1, alloc 1, reserved 2
 *   e1 FREE_REQ id0      req 0, alloc 0, reserved 2 (pending)
 *   e2 ALLOC id1 1 MiB   req 1, alloc 1, reserved 4   <- peak reserved
 *   e3 FREE id0          req 1, alloc 1, reserved 2
 *   e4 FREE id1          0, 0, 0
 * Peaks: requested 1 MiB, allocated 1 MiB, reserved 4 MiB: fragmentation 1 - 1/4. The
 * checked run also verifies that the policy's allocated (pending included) equals the
 * engine's allocated + pending after every event. */
static void test_free_req(void)
{
    as_event t[] = {tf_alloc(0, TF_MIB), tf_free_req(0), tf_alloc(1, TF_MIB), tf_free(0),
                    tf_free(1)};
    as_policy_spec sp;
    tf_spec(&sp, 0, 0, 0);
    uint64_t cap = AS_CAPACITY_NONE;
    as_engine *e;
    as_engine_opts o = {.threads = 1, .check = 1};
    CU_ASSERT_EQUAL_FATAL(tf_run(t, NEV(t), &o, &sp, &cap, 1, &e), 0);
    const as_run_result *r = as_engine_result(e, 0);
    CU_ASSERT_TRUE(r->completed);
    CU_ASSERT_EQUAL(r->peak_requested, TF_MIB);
    CU_ASSERT_EQUAL(r->peak_allocated, TF_MIB);
    CU_ASSERT_EQUAL(r->peak_reserved, 4 * TF_MIB);
    CU_ASSERT_DOUBLE_EQUAL(r->fragmentation, 0.75, 1e-12);
    CU_ASSERT_EQUAL(r->peak_pending, TF_MIB); /* id0's block from e1 to e3 */
    CU_ASSERT_EQUAL(r->waste, 3 * TF_MIB);
    CU_ASSERT_EQUAL(r->final_reserved, 0);
    const as_trace_summary *s = as_engine_summary(e);
    CU_ASSERT_EQUAL(s->events, 5);
    CU_ASSERT_EQUAL(s->allocs, 2);
    CU_ASSERT_EQUAL(s->frees, 2);
    CU_ASSERT_EQUAL(s->free_reqs, 1);
    CU_ASSERT_EQUAL(s->peak_requested, TF_MIB); /* same FREE_REQ rule for the trace */
    CU_ASSERT_EQUAL(s->live_at_end, 0);
    CU_ASSERT_EQUAL(s->streams, 1);
    as_engine_destroy(e);

    /* At 3 MiB, e2 needs a second 2 MiB segment while id0's is still held by its pending
     * free: OOM with nothing allocated, 2 MiB reserved, 1 MiB of it pending. */
    cap = 3 * TF_MIB;
    CU_ASSERT_EQUAL_FATAL(tf_run(t, NEV(t), &o, &sp, &cap, 1, &e), 0);
    r = as_engine_result(e, 0);
    CU_ASSERT_EQUAL(r->oom_event, 2);
    CU_ASSERT_EQUAL(r->oom_alloc, 1);
    CU_ASSERT_EQUAL(r->oom_reserved, 2 * TF_MIB);
    CU_ASSERT_EQUAL(r->oom_allocated, 0);
    CU_ASSERT_EQUAL(r->oom_requested, 0);
    CU_ASSERT_EQUAL(r->oom_pending, TF_MIB);
    as_engine_destroy(e);
    tf_spec_free(&sp);
}

typedef struct seglog {
    as_seg_record r[64];
    size_t n;
    as_timeline_sample s[64];
    size_t ns;
} seglog;

static void seg_cb(void *user, const as_seg_record *r)
{
    seglog *l = user;
    if (l->n < 64)
        l->r[l->n++] = *r;
}

static void smp_cb(void *user, const as_timeline_sample *s)
{
    seglog *l = user;
    if (l->ns < 64)
        l->s[l->ns++] = *s;
}

/* Device-level records with the cached policy:
 *   e0 ALLOC id0 1000    segment_alloc 2 MiB, alloc 0, event 0
 *   e1 FREE id0          cached (no device call)
 *   e2 ALLOC id1 1000    served from the cache
 *   e3 FREE id1          cached
 *   e4 EMPTY_CACHE       segment_free 2 MiB, event 4, alloc 2 (the next ALLOC's ordinal)
 *   e5 ALLOC id2 5 MiB   segment_alloc 6 MiB, alloc 2, event 5; the freed range is reused
 *   e6 MARK              */
static void test_segment_records(void)
{
    as_event t[] = {tf_alloc(0, 1000),        tf_free(0),
                    tf_alloc(1, 1000),        tf_free(1),
                    tf_op(AS_OP_EMPTY_CACHE), tf_alloc(2, 5 * TF_MIB),
                    tf_op(AS_OP_MARK)};
    as_policy_spec sp[2];
    tf_spec(&sp[0], 1, 0, 0);
    tf_spec(&sp[1], 1, 0, 0);
    uint64_t caps[2] = {AS_CAPACITY_NONE, AS_CAPACITY_NONE};
    seglog l = {.n = 0};
    /* Default placement is the CUDA driver's chunked heap (simdev.h): the first 2 MiB
     * range lands in the CUDA context's chunk at the top + 414 MiB, the 6 MiB one (after
     * that is freed) in the context's other chunk, free from the top + 488 MiB. */
    as_engine_opts o = {.threads = 1, .check = 1, .on_segment = seg_cb, .user = &l};
    as_engine *e;
    CU_ASSERT_EQUAL_FATAL(tf_run(t, NEV(t), &o, sp, caps, 2, &e), 0);
    CU_ASSERT_EQUAL_FATAL(l.n, 6);
    /* Run 0's three records, then run 1's (both runs fit in one batch). */
    CU_ASSERT_EQUAL(l.r[0].run, 0);
    CU_ASSERT_EQUAL(l.r[0].dev.action, AS_DEV_SEGMENT_ALLOC);
    CU_ASSERT_EQUAL(l.r[0].alloc, 0);
    CU_ASSERT_EQUAL(l.r[0].event, 0);
    CU_ASSERT_EQUAL(l.r[0].dev.size, 2 * TF_MIB);
    CU_ASSERT_EQUAL(l.r[0].dev.addr, AS_SIMDEV_TOP + 414 * TF_MIB);
    CU_ASSERT_EQUAL(l.r[1].dev.action, AS_DEV_SEGMENT_FREE);
    CU_ASSERT_EQUAL(l.r[1].alloc, 2);
    CU_ASSERT_EQUAL(l.r[1].event, 4);
    CU_ASSERT_EQUAL(l.r[2].dev.action, AS_DEV_SEGMENT_ALLOC);
    CU_ASSERT_EQUAL(l.r[2].alloc, 2);
    CU_ASSERT_EQUAL(l.r[2].event, 5);
    CU_ASSERT_EQUAL(l.r[2].dev.size, 6 * TF_MIB);
    CU_ASSERT_EQUAL(l.r[2].dev.addr, AS_SIMDEV_TOP + 488 * TF_MIB);
    CU_ASSERT_EQUAL(l.r[3].run, 1);
    CU_ASSERT_EQUAL(l.r[5].run, 1);
    const as_run_result *r = as_engine_result(e, 0);
    CU_ASSERT_EQUAL(r->device_reserves, 2);
    CU_ASSERT_EQUAL(r->device_releases, 1);
    CU_ASSERT_EQUAL(r->final_reserved, 6 * TF_MIB);
    as_engine_destroy(e);

    /* dev_params reach the device: low first fit puts both ranges at the base. */
    as_simdev_params p;
    as_simdev_default_params(&p);
    p.placement = AS_PLACE_LOW_FIRST_FIT;
    o.dev_params = &p;
    l.n = 0;
    CU_ASSERT_EQUAL_FATAL(tf_run(t, NEV(t), &o, sp, caps, 2, &e), 0);
    CU_ASSERT_EQUAL_FATAL(l.n, 6);
    CU_ASSERT_EQUAL(l.r[0].dev.addr, AS_SIMDEV_BASE);
    CU_ASSERT_EQUAL(l.r[2].dev.addr, AS_SIMDEV_BASE);
    as_engine_destroy(e);
    tf_spec_free(&sp[0]);
    tf_spec_free(&sp[1]);
}

/* Timeline every 2 events on the first metrics trace (tnc, unlimited):
 *   e0 ALLOC 1000        req 1000,    alloc 1024,    res 2 MiB   periodic + new peak
 *   e1 ALLOC 3 MiB       req 3146728, alloc 3146752, res 6 MiB   new peak
 *   e2 FREE id0          req 3145728, alloc 3145728, res 4 MiB   periodic
 *   e3 ALLOC 100         req 3145828, alloc 3146240, res 6 MiB   (equal to the peak: none)
 *   e4 MARK              periodic
 *   e5 FREE id1          req 100, alloc 512, res 2 MiB
 *   e6 FREE id2          periodic, and the last event
 * so samples at events 0, 1, 2, 4, 6. The OOM run (cap 4 MiB) fails at e1 and samples
 * e0 and its OOM point e1 only. */
static void test_timeline(void)
{
    as_event t[] = {tf_alloc(0, 1000), tf_alloc(1, 3 * TF_MIB), tf_free(0),
                    tf_alloc(2, 100),  tf_op(AS_OP_MARK),       tf_free(1),
                    tf_free(2)};
    for (size_t i = 0; i < NEV(t); i++)
        t[i].time_us = 10 * (int64_t)i;
    as_policy_spec sp[2];
    tf_spec(&sp[0], 0, 0, 0);
    tf_spec(&sp[1], 0, 0, 0);
    uint64_t caps[2] = {AS_CAPACITY_NONE, 4 * TF_MIB};
    seglog l = {.n = 0};
    as_engine_opts o = {.threads = 1, .timeline_every = 2, .on_sample = smp_cb, .user = &l};
    as_engine *e;
    CU_ASSERT_EQUAL_FATAL(tf_run(t, NEV(t), &o, sp, caps, 2, &e), 0);
    CU_ASSERT_EQUAL_FATAL(l.ns, 7);
    const uint64_t ev[5] = {0, 1, 2, 4, 6};
    for (int i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL(l.s[i].run, 0);
        CU_ASSERT_EQUAL(l.s[i].event, ev[i]);
        CU_ASSERT_EQUAL(l.s[i].time_us, 10 * (int64_t)ev[i]);
    }
    CU_ASSERT_EQUAL(l.s[1].requested, 3146728);
    CU_ASSERT_EQUAL(l.s[1].allocated, 3146752);
    CU_ASSERT_EQUAL(l.s[1].reserved, 6 * TF_MIB);
    CU_ASSERT_EQUAL(l.s[2].reserved, 4 * TF_MIB);
    CU_ASSERT_EQUAL(l.s[2].alloc, 2); /* after two ALLOCs, the next is ordinal 2 */
    CU_ASSERT_EQUAL(l.s[4].reserved, 0);
    CU_ASSERT_EQUAL(l.s[5].run, 1);
    CU_ASSERT_EQUAL(l.s[5].event, 0);
    CU_ASSERT_EQUAL(l.s[6].run, 1);
    CU_ASSERT_EQUAL(l.s[6].event, 1); /* the OOM */
    CU_ASSERT_EQUAL(l.s[6].reserved, 2 * TF_MIB);
    CU_ASSERT_EQUAL(as_engine_result(e, 1)->oom_event, 1);
    as_engine_destroy(e);
    tf_spec_free(&sp[0]);
    tf_spec_free(&sp[1]);
}

static void test_errors(void)
{
    as_event t[] = {tf_alloc(0, 1000), tf_alloc(1, 666), tf_free(0),    tf_free(1),
                    tf_alloc(2, 1),    tf_alloc(3, 1),   tf_alloc(4, 1)};
    as_policy_spec sp;
    uint64_t cap = AS_CAPACITY_NONE;
    as_engine *e;
    as_engine_opts o = {.threads = 1, .check = 1};

    /* A policy error (not an OOM) names the run, event and allocation. */
    tf_spec(&sp, 0, 666, 0);
    CU_ASSERT_EQUAL(tf_run(t, NEV(t), &o, &sp, &cap, 1, &e), AS_EPOLICY);
    CU_ASSERT_PTR_NOT_NULL(strstr(as_engine_errmsg(e), "event 1 (alloc 1)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(as_engine_errmsg(e), "run 0"));
    as_engine_destroy(e);
    tf_spec_free(&sp);

    /* stats() that disagree with the blocks handed out fail a checked run at the event
     * where a third block is live: e6 (ids 2, 3 and 4). */
    tf_spec(&sp, 0, 0, 1);
    CU_ASSERT_EQUAL(tf_run(t, NEV(t), &o, &sp, &cap, 1, &e), AS_ECHECK);
    CU_ASSERT_PTR_NOT_NULL(strstr(as_engine_errmsg(e), "event 6"));
    as_engine_destroy(e);
    /* Unchecked, the same run completes. */
    o.check = 0;
    CU_ASSERT_EQUAL(tf_run(t, NEV(t), &o, &sp, &cap, 1, &e), 0);
    as_engine_destroy(e);
    tf_spec_free(&sp);

    /* A trace error surfaces with the reader's code; the events before it were run. */
    tf_spec(&sp, 0, 0, 0);
    as_engine_create(&o, &e);
    as_engine_add_run(e, &sp, cap);
    as_trace_reader *rd = tf_reader(t, NEV(t), 3);
    as_trace_error err;
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(as_engine_run(e, rd, &err), AS_ECORRUPT);
    CU_ASSERT_EQUAL(err.code, AS_ECORRUPT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "injected"));
    CU_ASSERT_EQUAL(as_engine_summary(e)->events, 3);
    /* Running twice, or adding a run afterwards, is misuse. */
    CU_ASSERT_EQUAL(as_engine_run(e, rd, &err), AS_EUSAGE);
    CU_ASSERT_EQUAL(as_engine_add_run(e, &sp, cap), AS_EUSAGE);
    as_trace_close(rd);
    as_engine_destroy(e);
    tf_spec_free(&sp);
}

typedef struct walklog {
    unsigned n, oom, ev, blocks;
    uint64_t event[16], alloc[16];
} walklog;

static void walk_cb(void *user, unsigned run, uint64_t event, uint64_t alloc, const char *why,
                    const as_walk_item *it)
{
    walklog *l = user;
    (void)run;
    if (l->n < 16) {
        l->event[l->n] = event;
        l->alloc[l->n] = alloc;
    }
    l->n++;
    l->oom += strcmp(why, "oom") == 0;
    l->ev += strcmp(why, "event") == 0;
    l->blocks += it->kind == AS_WALK_BLOCK;
}

/* Segment map hook on the OOM trace at 6 MiB: after e3 only id1 is live (one segment, one
 * block); at the OOM (e6, alloc 3) id1 and id2 are (two of each). */
static void test_walk_hook(void)
{
    as_policy_spec sp;
    tf_spec(&sp, 0, 0, 0);
    as_engine *e;
    walklog l = {0};
    as_engine_opts o = {.threads = 1, .on_walk = walk_cb, .walk_at_oom = 1, .user = &l};
    CU_ASSERT_EQUAL_FATAL(as_engine_create(&o, &e), 0);
    CU_ASSERT_EQUAL(as_engine_add_run(e, &sp, 6 * TF_MIB), 0);
    CU_ASSERT_EQUAL(as_engine_walk_after(e, 0, 3), 0);
    CU_ASSERT_EQUAL(as_engine_walk_after(e, 1, 3), AS_EUSAGE);
    as_trace_reader *rd = tf_reader(oom_trace, NEV(oom_trace), UINT64_MAX);
    as_trace_error err;
    CU_ASSERT_EQUAL(as_engine_run(e, rd, &err), 0);
    CU_ASSERT_EQUAL(l.n, 6);
    CU_ASSERT_EQUAL(l.ev, 2);
    CU_ASSERT_EQUAL(l.oom, 4);
    CU_ASSERT_EQUAL(l.blocks, 3);
    CU_ASSERT_EQUAL(l.event[0], 3);
    CU_ASSERT_EQUAL(l.alloc[0], 1); /* e3 is the ALLOC of ordinal 1 */
    CU_ASSERT_EQUAL(l.event[5], 6);
    CU_ASSERT_EQUAL(l.alloc[5], 3);
    as_trace_close(rd);
    as_engine_destroy(e);
    tf_spec_free(&sp);
}

typedef struct peaklog {
    unsigned peak, oom, stale; /* items by why; peak items of another event than the last */
    uint64_t peak_event, events, allocs, last_id;
    int in_order;
} peaklog;

static void peak_cb(void *user, unsigned run, uint64_t event, uint64_t alloc, const char *why,
                    const as_walk_item *it)
{
    peaklog *l = user;
    (void)run, (void)alloc, (void)it;
    if (strcmp(why, "peak") == 0) {
        l->stale += l->peak && event != l->peak_event;
        l->peak_event = event;
        l->peak++;
    }
    l->oom += strcmp(why, "oom") == 0;
}

static void events_cb(void *user, const as_event *ev, size_t n)
{
    peaklog *l = user;
    for (size_t i = 0; i < n; i++, l->events++)
        if (ev[i].op == AS_OP_ALLOC) {
            l->in_order &= ev[i].id == l->allocs;
            l->allocs++;
        }
}

/* walk_at_peak and on_events on the OOM trace. Uncapped, reserved peaks at e0 (4 MiB: one
 * segment and its block), e4 (6 MiB: two of each) and e6 (8 MiB: three); all in one batch,
 * each walk replaces the one before, so only e6's six items come. At 6 MiB the last peak
 * is e4's (four items), and e6's OOM walk (four) follows it. on_events sees the ten
 * events, the five ALLOCs by ordinal. */
static void test_walk_at_peak(void)
{
    as_policy_spec sp;
    tf_spec(&sp, 0, 0, 0);
    const uint64_t caps[2] = {AS_CAPACITY_NONE, 6 * TF_MIB};
    const unsigned items[2] = {6, 4}, ooms[2] = {0, 4};
    const uint64_t at[2] = {6, 4};
    for (int k = 0; k < 2; k++) {
        peaklog l = {.in_order = 1};
        as_engine *e;
        as_engine_opts o = {.threads = 1,
                            .on_walk = peak_cb,
                            .walk_at_oom = 1,
                            .walk_at_peak = 1,
                            .on_events = events_cb,
                            .user = &l};
        CU_ASSERT_EQUAL_FATAL(tf_run(oom_trace, NEV(oom_trace), &o, &sp, &caps[k], 1, &e), 0);
        CU_ASSERT_EQUAL(l.peak, items[k]);
        CU_ASSERT_EQUAL(l.stale, 0);
        CU_ASSERT_EQUAL(l.peak_event, at[k]);
        CU_ASSERT_EQUAL(as_engine_result(e, 0)->peak_reserved_event, at[k]);
        CU_ASSERT_EQUAL(l.oom, ooms[k]);
        CU_ASSERT_EQUAL(l.events, NEV(oom_trace));
        CU_ASSERT_EQUAL(l.allocs, 5);
        CU_ASSERT(l.in_order);
        as_engine_destroy(e);
    }
    tf_spec_free(&sp);
}

/* The peak walks' budget: N allocations of 1 MiB, each a segment of its own, so every
 * event is a new peak and its walk has 2(i + 1) items: walking them all would visit about
 * N^2 items. Budgeted (1), the walks visit at most AS_ENGINE_PEAK_WALK_BUDGET items per
 * event (plus 2^16 and the walk that crossed it), and peak_walk_missed says exactly
 * whether the last walk handed over is the peak's; every peak (2) walks the last event. */
static void test_walk_at_peak_budget(void)
{
    enum { N = 4000 };
    as_event *ev = calloc(N, sizeof *ev);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
    for (size_t i = 0; i < N; i++)
        ev[i] = (as_event){AS_OP_ALLOC, 0, i, TF_MIB, 0, AS_TIME_NONE, {NULL}};
    as_policy_spec sp;
    tf_spec(&sp, 0, 0, 0);
    const uint64_t cap = AS_CAPACITY_NONE;
    for (int mode = 1; mode <= 2; mode++) {
        peaklog l = {.in_order = 1};
        as_engine *e;
        as_engine_opts o = {.threads = 1, .on_walk = peak_cb, .walk_at_peak = mode, .user = &l};
        CU_ASSERT_EQUAL_FATAL(tf_run(ev, N, &o, &sp, &cap, 1, &e), 0);
        const as_run_result *r = as_engine_result(e, 0);
        CU_ASSERT_EQUAL(r->peak_reserved_event, N - 1);
        CU_ASSERT_EQUAL(r->peak_walk_missed, l.peak_event != N - 1);
        if (mode == 1) {
            CU_ASSERT(r->peak_walk_missed); /* the walks thin out geometrically */
            CU_ASSERT(l.peak <= AS_ENGINE_PEAK_WALK_BUDGET * N + (1u << 16) + 2 * N);
        } else {
            CU_ASSERT_EQUAL(l.peak_event, N - 1);
            CU_ASSERT_EQUAL(l.peak >= 2 * N, 1);
        }
        as_engine_destroy(e);
    }
    tf_spec_free(&sp);
    free(ev);
}

/* ---- thread-count independence -------------------------------------------------------- */

typedef struct reclog {
    as_seg_record *r;
    size_t n, cap;
    as_timeline_sample *s;
    size_t ns, caps;
} reclog;

static void rl_seg(void *user, const as_seg_record *r)
{
    reclog *l = user;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->r = realloc(l->r, l->cap * sizeof *l->r);
    }
    l->r[l->n++] = *r;
}

static void rl_smp(void *user, const as_timeline_sample *s)
{
    reclog *l = user;
    if (l->ns == l->caps) {
        l->caps = l->caps ? l->caps * 2 : 256;
        l->s = realloc(l->s, l->caps * sizeof *l->s);
    }
    l->s[l->ns++] = *s;
}

/* A random trace of n events: allocations of 1 B .. 8 MiB, frees of random live ids (a
 * quarter through FREE_REQ first), an EMPTY_CACHE now and then, on two streams. */
static as_event *random_trace(uint64_t seed, size_t n, size_t *out_n)
{
    as_event *t = malloc(n * sizeof *t);
    uint64_t *live = malloc(n * sizeof *live), *pend = malloc(n * sizeof *pend);
    size_t nl = 0, np = 0, k = 0;
    uint64_t id = 0;
    while (k < n) {
        uint64_t x = tu_rand(&seed) % 100;
        if (x < 45 || nl == 0) {
            uint64_t sz = 1 + tu_rand(&seed) % (8 * TF_MIB);
            t[k] = tf_alloc(id, sz);
            t[k].stream = tu_rand(&seed) & 1;
            live[nl++] = id++;
        } else if (x < 85) {
            size_t j = tu_rand(&seed) % nl;
            uint64_t v = live[j];
            live[j] = live[--nl];
            if (tu_rand(&seed) % 4 == 0) {
                t[k] = tf_free_req(v);
                pend[np++] = v;
            } else {
                t[k] = tf_free(v);
            }
        } else if (x < 95 && np) {
            size_t j = tu_rand(&seed) % np;
            t[k] = tf_free(pend[j]);
            pend[j] = pend[--np];
        } else if (x < 97) {
            t[k] = tf_op(AS_OP_EMPTY_CACHE);
        } else {
            t[k] = tf_op(AS_OP_MARK);
        }
        t[k].time_us = (int64_t)k;
        k++;
    }
    free(live);
    free(pend);
    *out_n = k;
    return t;
}

static void threads_case(const as_event *t, size_t n, int keep_going)
{
    enum { NR = 8 };
    as_policy_spec sp[NR];
    uint64_t caps[NR];
    for (int i = 0; i < NR; i++) {
        tf_spec(&sp[i], i & 1, 0, 0);
        caps[i] = i < 2 ? AS_CAPACITY_NONE : (uint64_t)(60 + 40 * i) * TF_MIB;
    }
    const unsigned threads[] = {1, 2, 3, 9};
    as_run_result base[NR];
    reclog l0 = {0};
    for (size_t ti = 0; ti < 4; ti++) {
        reclog l = {0};
        as_engine_opts o = {.threads = threads[ti],
                            .keep_going = keep_going,
                            .timeline_every = 100,
                            .on_segment = rl_seg,
                            .on_sample = rl_smp,
                            .user = &l};
        as_engine *e;
        CU_ASSERT_EQUAL_FATAL(tf_run(t, n, &o, sp, caps, NR, &e), 0);
        for (int i = 0; i < NR; i++) {
            as_run_result r; /* memcpy, so that padding compares equal too */
            memcpy(&r, as_engine_result(e, (unsigned)i), sizeof r);
            r.wall_s = r.events_per_second = r.cpu_s = 0;
            if (ti == 0) {
                base[i] = r;
            } else {
                CU_ASSERT_STRING_EQUAL(r.policy, base[i].policy);
                r.policy = base[i].policy;
                CU_ASSERT_EQUAL(memcmp(&r, &base[i], sizeof r), 0);
            }
        }
        if (ti == 0) {
            l0 = l;
            /* The trace must exercise OOMs for the capped runs to mean anything. */
            CU_ASSERT_FALSE(as_engine_result(e, 2)->completed);
            CU_ASSERT_TRUE(as_engine_result(e, 0)->completed);
            if (keep_going)
                CU_ASSERT(as_engine_result(e, 2)->ooms > 1);
        } else {
            CU_ASSERT_EQUAL(l.n, l0.n);
            CU_ASSERT_EQUAL(l.ns, l0.ns);
            size_t bad = 0;
            for (size_t j = 0; j < l.n && j < l0.n; j++)
                bad += l.r[j].run != l0.r[j].run || l.r[j].alloc != l0.r[j].alloc ||
                       l.r[j].event != l0.r[j].event || l.r[j].dev.action != l0.r[j].dev.action ||
                       l.r[j].dev.addr != l0.r[j].dev.addr || l.r[j].dev.size != l0.r[j].dev.size;
            for (size_t j = 0; j < l.ns && j < l0.ns; j++)
                bad += l.s[j].run != l0.s[j].run || l.s[j].event != l0.s[j].event ||
                       l.s[j].alloc != l0.s[j].alloc || l.s[j].time_us != l0.s[j].time_us ||
                       l.s[j].requested != l0.s[j].requested ||
                       l.s[j].allocated != l0.s[j].allocated || l.s[j].reserved != l0.s[j].reserved;
            CU_ASSERT_EQUAL(bad, 0);
            free(l.r);
            free(l.s);
        }
        as_engine_destroy(e);
    }
    free(l0.r);
    free(l0.s);
    for (int i = 0; i < NR; i++)
        tf_spec_free(&sp[i]);
}

static void test_threads(void)
{
    uint64_t seed = tu_seed("engine threads");
    size_t n;
    as_event *t = random_trace(seed, 30000, &n);
    threads_case(t, n, 0);
    threads_case(t, n, 1);
    free(t);
}

/* The engine's id map against a plain array: ids handed out in order, freed at random
 * ages (some live far longer than the ring), so entries move from the ring to the hash
 * map; every live id must be found with its values and every dead one not. */
static void test_idring(void)
{
    uint64_t seed = tu_seed("engine idring");
    enum { N = 200000 };
    uint64_t *val = calloc(N, sizeof *val);
    unsigned char *live = calloc(N, 1);
    as_idring m = {0};
    uint64_t nlive = 0, next = 0, bad = 0;
    for (int step = 0; step < 3 * N && next < N; step++) {
        uint64_t x = tu_rand(&seed);
        if (x % 2 == 0 || nlive == 0) {
            val[next] = tu_rand(&seed);
            CU_ASSERT_EQUAL_FATAL(as_idring_put(&m, next, val[next], ~val[next]), 0);
            live[next++] = 1;
            nlive++;
        } else {
            /* Mostly young victims, sometimes very old ones. */
            uint64_t age = x % 7 == 0 ? tu_rand(&seed) % next : tu_rand(&seed) % 600;
            uint64_t id = next - 1 - (age < next ? age : 0);
            as_idmap_ent *e = as_idring_get(&m, id);
            bad += !live[id] != !e;
            if (e) {
                bad += e->a != val[id] || e->b != ~val[id];
                as_idring_del(&m, e);
                live[id] = 0;
                nlive--;
            }
        }
    }
    CU_ASSERT_EQUAL(m.n, nlive);
    CU_ASSERT(m.far.n > 0); /* the long-lived ones did move to the hash map */
    for (uint64_t id = 0; id < next; id++) {
        as_idmap_ent *e = as_idring_get(&m, id);
        bad += !live[id] != !e || (e && e->a != val[id]);
    }
    CU_ASSERT_EQUAL(bad, 0);
    as_idring_free(&m);
    free(val);
    free(live);
}

typedef struct proglog {
    unsigned calls;
    uint64_t last, bad;
} proglog;

static void prog_cb(void *user, uint64_t events, uint64_t done, uint64_t total)
{
    proglog *p = user;
    (void)done;
    (void)total;
    p->bad += events < p->last;
    p->last = events;
    p->calls++;
}

/* Progress comes about every 2^20 events: 2.5 Mi events (MARKs, cheap) give two calls,
 * with growing counts. */
static void test_progress(void)
{
    size_t n = (5u << 20) / 2;
    as_event *t = malloc(n * sizeof *t);
    for (size_t i = 0; i < n; i++)
        t[i] = tf_op(AS_OP_MARK);
    t[0] = tf_alloc(0, 100);
    as_policy_spec sp;
    tf_spec(&sp, 0, 0, 0);
    uint64_t cap = AS_CAPACITY_NONE;
    proglog p = {0};
    as_engine_opts o = {.threads = 2, .on_progress = prog_cb, .user = &p};
    as_engine *e;
    CU_ASSERT_EQUAL_FATAL(tf_run(t, n, &o, &sp, &cap, 1, &e), 0);
    CU_ASSERT_EQUAL(p.calls, 2);
    CU_ASSERT_EQUAL(p.bad, 0);
    CU_ASSERT(p.last >= (2u << 20));
    CU_ASSERT_EQUAL(as_engine_result(e, 0)->events, n);
    as_engine_destroy(e);
    tf_spec_free(&sp);
    free(t);
}

/* ---- the summary: the reader's tally against the engine's own sums ------------------------- */

/* The summary of path twice: from the reader's tally (as_engine_scan of a fresh reader) and
 * summed by the engine over the same events in memory (as_engine_run_events, which has no
 * reader). The two are written separately (traces/live.c, sim/engine.c) and must agree on
 * every field. 0 when path could not be read. */
static int tally_matches_sums(const char *path)
{
    as_trace_reader *rd;
    as_trace_error err;
    as_engine *e;
    if (as_trace_open(path, NULL, &rd, &err) < 0)
        return 0;
    CU_ASSERT_EQUAL_FATAL(as_engine_create(NULL, &e), 0);
    CU_ASSERT_EQUAL(as_engine_scan(e, rd, &err), 0);
    as_trace_summary tal = *as_engine_summary(e);
    as_engine_destroy(e);
    as_trace_close(rd);

    CU_ASSERT_FATAL(as_trace_open(path, NULL, &rd, &err) == 0);
    size_t n = 0, cap = 0, got;
    as_event *evs = NULL;
    int rc;
    do {
        if (n + 4096 > cap) {
            cap = 2 * cap + 4096;
            evs = realloc(evs, cap * sizeof *evs);
            CU_ASSERT_PTR_NOT_NULL_FATAL(evs);
        }
        rc = as_trace_next_batch(rd, evs + n, 4096, &got);
        for (size_t i = n; i < n + got; i++)
            if (evs[i].op == AS_OP_MARK)
                evs[i].label = "m"; /* valid after the next read */
        n += got;
    } while (rc == 0);
    CU_ASSERT_EQUAL(rc, AS_TRACE_EOF);
    as_policy_spec sp;
    tf_spec(&sp, 0, 0, 0);
    uint64_t capn = AS_CAPACITY_NONE;
    as_engine_opts o = {.threads = 1};
    CU_ASSERT_EQUAL_FATAL(tf_run(evs, n, &o, &sp, &capn, 1, &e), 0);
    const as_trace_summary *sum = as_engine_summary(e);
    CU_ASSERT_EQUAL(tal.events, sum->events);
    CU_ASSERT_EQUAL(tal.allocs, sum->allocs);
    CU_ASSERT_EQUAL(tal.frees, sum->frees);
    CU_ASSERT_EQUAL(tal.free_reqs, sum->free_reqs);
    CU_ASSERT_EQUAL(tal.empty_caches, sum->empty_caches);
    CU_ASSERT_EQUAL(tal.marks, sum->marks);
    CU_ASSERT_EQUAL(tal.peak_requested, sum->peak_requested);
    CU_ASSERT_EQUAL(tal.streams, sum->streams);
    CU_ASSERT_EQUAL(tal.live_at_end, sum->live_at_end);
    CU_ASSERT_EQUAL(tal.peak_live, sum->peak_live);
    CU_ASSERT_EQUAL(tal.min_request, sum->min_request);
    as_engine_destroy(e);
    tf_spec_free(&sp);
    as_trace_close(rd);
    free(evs);
    return 1;
}

/* Every op, stream 0 unused, the stream whose key is the set's empty mark (UINT64_MAX), a
 * FREE_REQ'd allocation's size subtracted once, a smallest request that comes late; then
 * the real snapshots of several streams, FREE_REQs and marks, and a native trace. */
static void test_summary_tally(void)
{
    const char *t = tu_write_tmp(".txt", "allocsim-text 1\n"
                                         "alloc 0 300 s=0x7 t=5\n"
                                         "alloc 1 200 s=0xffffffffffffffff\n"
                                         "free_req 0\n"
                                         "mark step 1\n"
                                         "alloc 2 1000 s=0x7\n"
                                         "empty_cache\n"
                                         "free 0\n"
                                         "alloc 3 3 s=0x9\n"
                                         "free 2\n"
                                         "free_req 3\n");
    CU_ASSERT_TRUE(tally_matches_sums(t));
    tu_rm(t);
    const char *real[] = {
        "tests/data/torch-2.11-h200-streams/streams2_default.pickle.zst",
        "tests/data/torch-2.11-h200/moe_like.pickle.zst",
        "tests/data/torch-2.11-h200-graphs/graph.pickle.zst",
        "tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst",
        "traces/samples/transformer_gpt2.zst",
        "traces/samples/kvcache_concat.zst",
        "traces/samples/rmm_cudf_join.csv",
    };
    for (size_t i = 0; i < sizeof real / sizeof *real; i++)
        CU_ASSERT_TRUE(tally_matches_sums(tu_path(real[i])));
}

CU_TestInfo test_engine[] = {
    {"OOM: oom_event counts every event, oom_alloc only ALLOCs", test_oom_indices},
    {"keep_going skips the failed request and its frees", test_keep_going},
    {"FREE_REQ: live until FREE_REQ, reserved until FREE", test_free_req},
    {"segment records carry alloc ordinal and event", test_segment_records},
    {"timeline: periodic, at peaks, at the OOM", test_timeline},
    {"policy error, broken invariant, trace error, misuse", test_errors},
    {"segment map hook: after an event and at the OOM", test_walk_hook},
    {"walks at each new peak (the last kept) and every decoded batch", test_walk_at_peak},
    {"walks at new peaks within a budget, a missed peak said", test_walk_at_peak_budget},
    {"results do not depend on the thread count", test_threads},
    {"id map: ring and hash map against a plain array", test_idring},
    {"progress about every 2^20 events", test_progress},
    {"summary: the reader's tally equals the engine's sums", test_summary_tally},
    CU_TEST_INFO_NULL,
};
