/*
 * test_planned.c - the offline yardstick (policies/planned.c, arena_plan.c): arena sizes
 * worked out by hand for each greedy order on small traces; on random and on the real H200
 * traces, a naive check of every pair of allocations live at once (their blocks must not
 * overlap), the arena against the peak requested (never below) and against its own
 * largest end offset; the capacity rule (the first OOM is the first allocation planned
 * past the prefix the capacity leaves); the lifetimes the engine hands out.
 */
#include <CUnit/CUnit.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena_plan.h"
#include "engine.h"
#include "fuzz/policy_harness.h"
#include "knobs.h"
#include "lifetimes.h"
#include "report.h"
#include "util.h"

#define MIB (1ull << 20)

/* ---- the planner on hand-worked cases ------------------------------------------------------ */

/* x0: 3 bytes over [0,3), x1: 2 over [1,5), x2: 2 over [4,7), x3: 3 over [6,9); at most 5
 * bytes are live at once (t = 1, 2 and 6).
 *   size (3s before 2s, x0 before x3 by start; then x1, longer, before x2): x0 at 0; x3
 *     meets no placed block (x0 ended at 3) -> 0; x1 meets x0 -> 3; x2 meets x3 [0,3) and
 *     x1 [3,5), no gap -> 5. Arena 7.
 *   breadth: every block sees 5 bytes live at some instant, so the size order again: 7.
 *   length (x1, 4 long, first; then x0 and x3 by size and start, x2): x1 at 0; x0 meets x1
 *     -> 2; x3 meets none -> 0; x2 meets x1 [0,2) and x3 [0,3) -> 3. Arena 5, the bound.
 *   best: the smallest, 5, by length. */
static const as_plan_item four[] = {{3, 0, 3}, {2, 1, 5}, {2, 4, 7}, {3, 6, 9}};

static void plan_hand_orders(void)
{
    static const struct {
        as_plan_order o;
        uint64_t arena, off[4];
        as_plan_order used;
    } want[] = {
        {AS_PLAN_SIZE, 7, {0, 3, 5, 0}, AS_PLAN_SIZE},
        {AS_PLAN_BREADTH, 7, {0, 3, 5, 0}, AS_PLAN_BREADTH},
        {AS_PLAN_LENGTH, 5, {2, 0, 3, 0}, AS_PLAN_LENGTH},
        {AS_PLAN_BEST, 5, {2, 0, 3, 0}, AS_PLAN_LENGTH},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        uint64_t off[4], arena;
        as_plan_order used;
        CU_ASSERT_EQUAL_FATAL(as_arena_plan(four, 4, want[k].o, off, &arena, &used), 0);
        CU_ASSERT_EQUAL(arena, want[k].arena);
        CU_ASSERT_EQUAL(used, want[k].used);
        for (int i = 0; i < 4; i++)
            CU_ASSERT_EQUAL(off[i], want[k].off[i]);
    }
}

/* A gap left by a block freed early is reused (order size): g0 6 [0,10) at 0; g1 5 [1,3)
 * above it at 6; g2 4 [2,10) meets both -> 11; g3 3 [4,10) meets g0 [0,6) and g2 [11,15)
 * (g1 has ended): the gap [6,11) takes it at 6; g4 2 [5,10) meets g0, g3 [6,9), g2: the
 * gap [9,11) holds it exactly. Arena 15 = 6 + 5 + 4 live at t = 2, the bound. A block of
 * size 0 is left out (AS_PLAN_NONE), and a bad trace is refused. */
static void plan_hand_gaps(void)
{
    static const as_plan_item g[] = {{6, 0, 10}, {5, 1, 3},  {4, 2, 10},
                                     {3, 4, 10}, {2, 5, 10}, {0, 6, 7}};
    uint64_t off[6], arena;
    CU_ASSERT_EQUAL_FATAL(as_arena_plan(g, 6, AS_PLAN_SIZE, off, &arena, NULL), 0);
    static const uint64_t want[] = {0, 6, 11, 6, 9, AS_PLAN_NONE};
    for (int i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(off[i], want[i]);
    CU_ASSERT_EQUAL(arena, 15);
    static const as_plan_item unordered[] = {{1, 5, 6}, {1, 2, 3}};
    static const as_plan_item empty_life[] = {{1, 5, 5}};
    CU_ASSERT_EQUAL(as_arena_plan(unordered, 2, AS_PLAN_BEST, off, &arena, NULL), AS_EINVAL);
    CU_ASSERT_EQUAL(as_arena_plan(empty_life, 1, AS_PLAN_BEST, off, &arena, NULL), AS_EINVAL);
    CU_ASSERT_EQUAL(as_arena_plan(NULL, 0, AS_PLAN_BEST, off, &arena, NULL), 0);
    CU_ASSERT_EQUAL(arena, 0);
}

/* ---- the policy over whole traces ---------------------------------------------------------- */

typedef struct replay {
    uint64_t *addr, *size; /* by id; size 0 for an allocation never served */
    uint64_t peak_requested, reserved, max_end, base;
    uint64_t ooms;
} replay;

/* Plans evs[0..n) through `spec` on a device of `cap`, then replays it alloc by alloc
 * (FREE_REQ kept live until its FREE), recording every block. */
static void replay_events(const char *spec, uint64_t cap, const as_event *evs, size_t n,
                          replay *out)
{
    memset(out, 0, sizeof *out);
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, spec, cap) == 0);
    CU_ASSERT_EQUAL_FATAL(ph_plan(&t, evs, n), 0);
    size_t na = 0;
    for (size_t i = 0; i < n; i++)
        na += evs[i].op == AS_OP_ALLOC;
    out->addr = calloc(na + 1, sizeof *out->addr);
    out->size = calloc(na + 1, sizeof *out->size);
    CU_ASSERT_FATAL(out->addr && out->size);
    /* The bound counts a block from its ALLOC to its FREE (the engine's requested ends at a
     * FREE_REQ): the arena must not be below even this larger one. */
    uint64_t req = 0;
    for (size_t i = 0; i < n; i++) {
        const as_event *e = &evs[i];
        if (e->op == AS_OP_ALLOC) {
            as_block b = {0};
            uint64_t id;
            int rc = ph_alloc_id(&t, e->size, e->stream, &id, &b);
            CU_ASSERT(rc == 0 || rc == AS_POLICY_OOM);
            CU_ASSERT_EQUAL(id, e->id);
            if (rc == AS_POLICY_OOM) {
                out->ooms++;
                continue;
            }
            out->addr[id] = b.addr;
            out->size[id] = b.size;
            req += e->size;
            out->peak_requested = req > out->peak_requested ? req : out->peak_requested;
        } else if ((e->op == AS_OP_FREE || e->op == AS_OP_FREE_REQ) && out->size[e->id]) {
            int fin = e->op == AS_OP_FREE;
            CU_ASSERT_EQUAL(ph_free(&t, e->id, fin ? AS_FREE_COMPLETE : AS_FREE_PENDING), 0);
            req -= fin ? e->size : 0;
        }
        as_policy_stats s = ph_stats(&t);
        out->reserved = s.reserved > out->reserved ? s.reserved : out->reserved;
    }
    out->base = out->reserved ? UINT64_MAX : 0;
    for (size_t k = 0; k < na; k++)
        if (out->size[k]) {
            out->base = out->addr[k] < out->base ? out->addr[k] : out->base;
            uint64_t end = out->addr[k] + out->size[k];
            out->max_end = end > out->max_end ? end : out->max_end;
        }
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

static void replay_free(replay *r)
{
    free(r->addr);
    free(r->size);
}

/* Naive: at every ALLOC, the new block against every block live then. Returns the number of
 * overlapping pairs (0 when the plan is sound). */
static uint64_t overlaps(const as_event *evs, size_t n, const replay *r)
{
    uint64_t *live = malloc((n + 1) * sizeof *live), bad = 0;
    size_t nl = 0;
    CU_ASSERT_FATAL(live != NULL);
    for (size_t i = 0; i < n; i++) {
        const as_event *e = &evs[i];
        if (e->op == AS_OP_ALLOC && r->size[e->id]) {
            uint64_t a = r->addr[e->id], z = a + r->size[e->id];
            for (size_t k = 0; k < nl; k++) {
                uint64_t b = r->addr[live[k]], y = b + r->size[live[k]];
                if (a < y && b < z && bad++ < 3)
                    fprintf(stderr, "\n  ids %" PRIu64 " and %" PRIu64 " overlap\n", e->id,
                            live[k]);
            }
            live[nl++] = e->id;
        } else if (e->op == AS_OP_FREE) {
            for (size_t k = 0; k < nl; k++)
                if (live[k] == e->id) {
                    live[k] = live[--nl];
                    break;
                }
        }
    }
    free(live);
    return bad;
}

/* Every block inside the arena, no live pair overlapping, the arena its largest end offset
 * rounded to the device granularity, and never below the bound. */
static void sound(const char *spec, const as_event *evs, size_t n, uint64_t *arena)
{
    replay r;
    replay_events(spec, AS_CAPACITY_NONE, evs, n, &r);
    CU_ASSERT_EQUAL(r.ooms, 0);
    CU_ASSERT_EQUAL(overlaps(evs, n, &r), 0);
    uint64_t used = r.max_end - r.base;
    CU_ASSERT_EQUAL(r.reserved, as_align_up(used, AS_DEV_GRANULARITY));
    CU_ASSERT(used >= r.peak_requested);
    if (arena)
        *arena = used;
    replay_free(&r);
}

/* A random trace: ALLOCs of 1 B to 64 MiB, FREEs, FREE_REQ+FREE pairs and MARKs. */
static as_event *random_trace(uint64_t seed, size_t nev, size_t *n)
{
    as_event *ev = calloc(nev, sizeof *ev);
    uint64_t *live = calloc(nev, sizeof *live), rng = seed, next = 0;
    uint64_t *sizes = calloc(nev, sizeof *sizes);
    unsigned char *pend = calloc(nev, 1);
    size_t m = 0, nl = 0;
    CU_ASSERT_FATAL(ev && live && pend && sizes);
    while (m < nev) {
        uint64_t u = tu_rand(&rng) % 100;
        if (u < 50 || nl == 0) {
            uint64_t size = 1 + tu_rand(&rng) % (1ull << (tu_rand(&rng) % 27));
            ev[m++] = (as_event){
                .op = AS_OP_ALLOC, .id = next, .size = size, .stream = tu_rand(&rng) % 2};
            sizes[next] = size;
            live[nl++] = next++;
        } else if (u < 95) {
            size_t k = (size_t)(tu_rand(&rng) % nl);
            uint64_t id = live[k];
            if (u >= 85 && !pend[id]) {
                ev[m++] = (as_event){.op = AS_OP_FREE_REQ, .id = id, .size = sizes[id]};
                pend[id] = 1;
            } else {
                ev[m++] = (as_event){.op = AS_OP_FREE, .id = id, .size = sizes[id]};
                live[k] = live[--nl];
            }
        } else {
            ev[m++] = (as_event){.op = AS_OP_MARK};
        }
    }
    free(live);
    free(pend);
    free(sizes);
    *n = m;
    return ev;
}

static void planned_random_traces(void)
{
    uint64_t seed = tu_seed("planned_random_traces");
    static const char *const specs[] = {"planned,order=size", "planned,order=breadth",
                                        "planned,order=length"};
    for (int k = 0; k < 6; k++) {
        size_t n;
        as_event *ev = random_trace(seed + (uint64_t)k, 3000, &n);
        uint64_t best, least = UINT64_MAX, each;
        for (int s = 0; s < 3; s++) {
            sound(specs[s], ev, n, &each);
            least = each < least ? each : least;
        }
        sound("planned", ev, n, &best);
        CU_ASSERT_EQUAL(best, least); /* best keeps the smallest of the three */
        sound("planned,round=1", ev, n, NULL);
        free(ev);
    }
}

/* The whole of a trace file, MARKs included (their positions count). */
static as_event *load(const char *rel, size_t *n)
{
    as_trace_reader *rd;
    as_trace_error err;
    *n = 0;
    if (as_trace_open(tu_path(rel), NULL, &rd, &err) < 0) {
        fprintf(stderr, "\n  %s: %s\n", rel, err.msg);
        CU_FAIL("cannot open trace");
        return NULL;
    }
    size_t cap = 1 << 16;
    as_event *ev = malloc(cap * sizeof *ev), e;
    while (ev && as_trace_next(rd, &e) == 0) {
        if (*n == cap) {
            as_event *ne = realloc(ev, (cap *= 2) * sizeof *ev);
            if (!ne)
                break;
            ev = ne;
        }
        e.label = NULL;
        ev[(*n)++] = e;
    }
    as_trace_close(rd);
    return ev;
}

/* The real H200 snapshots: sound, and within 1 % of the bound (a fact of these traces that
 * the README's comparison quotes, not a property of the heuristics). */
static void planned_real_traces(void)
{
    static const char *const files[] = {
        "tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst",
        "tests/data/torch-2.11-h200/moe_like.pickle.zst",
        "tests/data/torch-2.11-h200-streams/streams2_default.pickle.zst",
        "tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst",
    };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t n;
        as_event *ev = load(files[f], &n);
        CU_ASSERT_FATAL(ev && n > 1000);
        replay r;
        replay_events("planned", AS_CAPACITY_NONE, ev, n, &r);
        CU_ASSERT_EQUAL(r.ooms, 0);
        CU_ASSERT_EQUAL(overlaps(ev, n, &r), 0);
        uint64_t used = r.max_end - r.base;
        CU_ASSERT(used >= r.peak_requested);
        CU_ASSERT(used <= r.peak_requested + r.peak_requested / 100);
        replay_free(&r);
        free(ev);
    }
}

/* ---- capacity and the engine --------------------------------------------------------------- */

/* The four blocks of `four` in units of 2 MiB, at event positions 0..9 (MARKs between).
 * Planned (best = length order): x1 at 0, x0 at 4 MiB, x3 at 0, x2 at 6 MiB; arena 10 MiB.
 * At 8 MiB the device refuses 10 and the 8 MiB prefix is reserved: x0 (alloc 0, ending at
 * 10 MiB) is the first OOM, at event 0; x1 and x3 fit, x2 (ending at 10 MiB) does not. */
static const as_event four_ev[] = {
    {.op = AS_OP_ALLOC, .id = 0, .size = 6 * MIB},
    {.op = AS_OP_ALLOC, .id = 1, .size = 4 * MIB},
    {.op = AS_OP_MARK},
    {.op = AS_OP_FREE, .id = 0, .size = 6 * MIB},
    {.op = AS_OP_ALLOC, .id = 2, .size = 4 * MIB},
    {.op = AS_OP_FREE, .id = 1, .size = 4 * MIB},
    {.op = AS_OP_ALLOC, .id = 3, .size = 6 * MIB},
    {.op = AS_OP_FREE, .id = 2, .size = 4 * MIB},
    {.op = AS_OP_MARK},
    {.op = AS_OP_FREE, .id = 3, .size = 6 * MIB},
};

static void run_four(uint64_t cap, int keep_going, as_run_result *out)
{
    as_policy_spec sp;
    char why[128];
    CU_ASSERT_FATAL(as_policy_spec_parse("planned", &sp, why, sizeof why) == 0);
    as_engine_opts o = {.threads = 1, .check = 1, .keep_going = keep_going};
    as_engine *e;
    CU_ASSERT_FATAL(as_engine_create(&o, &e) == 0);
    CU_ASSERT_FATAL(as_engine_add_run(e, &sp, cap) == 0);
    as_trace_error err;
    CU_ASSERT_EQUAL(as_engine_run_events(e, four_ev, sizeof four_ev / sizeof four_ev[0], &err), 0);
    *out = *as_engine_result(e, 0);
    as_engine_destroy(e);
    as_policy_spec_free(&sp);
}

static void planned_capacity(void)
{
    as_run_result r;
    run_four(AS_CAPACITY_NONE, 0, &r);
    CU_ASSERT(r.completed);
    CU_ASSERT_EQUAL(r.peak_requested, 10 * MIB);
    CU_ASSERT_EQUAL(r.peak_reserved, 10 * MIB);
    CU_ASSERT_EQUAL(r.device_reserves, 1);
    run_four(10 * MIB, 0, &r); /* exactly the arena fits */
    CU_ASSERT(r.completed);
    run_four(8 * MIB, 1, &r);
    CU_ASSERT(!r.completed);
    CU_ASSERT_EQUAL(r.oom_alloc, 0);
    CU_ASSERT_EQUAL(r.oom_event, 0);
    CU_ASSERT_EQUAL(r.ooms, 2);
    CU_ASSERT_EQUAL(r.peak_reserved, 8 * MIB);
    run_four(8 * MIB, 0, &r); /* without keep_going the run stops at the first */
    CU_ASSERT_EQUAL(r.oom_alloc, 0);
    CU_ASSERT_EQUAL(r.ooms, 1);
    run_four(MIB, 1, &r); /* less than one granule: nothing to reserve, every alloc refused */
    CU_ASSERT_EQUAL(r.ooms, 4);
    CU_ASSERT_EQUAL(r.peak_reserved, 0);
}

/* The lifetimes: a FREE ends a block, a FREE_REQ does not, a block never freed is open. */
static void planned_lifetimes(void)
{
    static const as_event ev[] = {
        {.op = AS_OP_ALLOC, .id = 0, .size = 7, .stream = 3},
        {.op = AS_OP_MARK},
        {.op = AS_OP_ALLOC, .id = 1, .size = 9},
        {.op = AS_OP_FREE_REQ, .id = 0, .size = 7},
        {.op = AS_OP_EMPTY_CACHE},
        {.op = AS_OP_FREE, .id = 0, .size = 7},
    };
    as_lifetime *lt;
    size_t n;
    CU_ASSERT_EQUAL_FATAL(as_lifetimes_of(ev, 6, &lt, &n), 0);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT(lt[0].size == 7 && lt[0].stream == 3 && lt[0].start == 0 && lt[0].end == 5);
    CU_ASSERT(lt[1].size == 9 && lt[1].start == 2 && lt[1].end == AS_LIFETIME_OPEN);
    free(lt);
}

/* Misuse: an id the plan does not know, another size than planned, a second plan. */
static void planned_misuse(void)
{
    ph t;
    CU_ASSERT_FATAL(ph_open(&t, "planned", AS_CAPACITY_NONE) == 0);
    as_block b;
    uint64_t id;
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 100, 0, &id, &b), AS_EINVAL); /* not planned yet */
    ph_close(&t);
    CU_ASSERT_FATAL(ph_open(&t, "planned", AS_CAPACITY_NONE) == 0);
    static const as_event ev[] = {{.op = AS_OP_ALLOC, .id = 0, .size = 1000}};
    CU_ASSERT_EQUAL_FATAL(ph_plan(&t, ev, 1), 0);
    CU_ASSERT_EQUAL(ph_plan(&t, ev, 1), AS_EINVAL);
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 5000, 0, &id, &b), AS_EINVAL); /* planned 1000 */
    t.next_id = 0;
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 1000, 0, &id, &b), 0);
    CU_ASSERT_EQUAL(b.size, 1024);                                 /* round 512 */
    CU_ASSERT_EQUAL(ph_alloc_id(&t, 1000, 0, &id, &b), AS_EINVAL); /* id 1: unknown */
    CU_ASSERT_EQUAL(ph_check(&t), 0);
    ph_close(&t);
}

/* The table's yardstick columns: a trace with a completed offline run of 10 MiB and an online
 * run of 15 MiB (peak requested 10 MiB) shows +50.0% in both; a trace without one has
 * neither column; an offline run that did not complete is no yardstick. */
static void planned_table_columns(void)
{
    as_report *rep;
    CU_ASSERT_FATAL(as_report_create(&rep) == 0);
    as_trace_summary sum = {.events = 10, .allocs = 4, .peak_requested = 10 * MIB, .streams = 1};
    as_run_result plan = {.policy = "planned",
                          .capacity = AS_CAPACITY_NONE,
                          .completed = 1,
                          .offline = 1,
                          .peak_requested = 10 * MIB,
                          .peak_reserved = 10 * MIB,
                          .oom_event = AS_NONE,
                          .oom_alloc = AS_NONE};
    as_run_result other = plan;
    other.policy = "bestfit";
    other.offline = 0;
    other.peak_reserved = 15 * MIB;
    as_run_result failed = plan;
    failed.completed = 0;
    CU_ASSERT_FATAL(as_report_add_trace(rep, "a", "text", &sum, NULL) == 0);
    CU_ASSERT_FATAL(as_report_add_run(rep, 0, &plan) == 0);
    CU_ASSERT_FATAL(as_report_add_run(rep, 0, &other) == 1);
    CU_ASSERT_FATAL(as_report_add_trace(rep, "b", "text", &sum, NULL) == 1);
    CU_ASSERT_FATAL(as_report_add_run(rep, 1, &failed) == 2);
    CU_ASSERT_FATAL(as_report_add_run(rep, 1, &other) == 3);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CU_ASSERT_FATAL(f != NULL);
    char why[128];
    CU_ASSERT_EQUAL(as_report_write(rep, f, AS_REPORT_TABLE, why, sizeof why), 0);
    fclose(f);
    const char *b = strstr(buf, "\nb: ");
    CU_ASSERT_FATAL(b != NULL);
    const char *a_head = strstr(buf, "vs planned  vs requested");
    CU_ASSERT(a_head != NULL && a_head < b);
    const char *row = strstr(buf, "  bestfit");
    CU_ASSERT(row != NULL && row < b && strstr(row, "+50.0%        +50.0%") != NULL);
    const char *prow = strstr(buf, "  planned");
    CU_ASSERT(prow != NULL && strstr(prow, "+0.0%         +0.0%") != NULL);
    CU_ASSERT(strstr(b, "vs planned") == NULL); /* trace b: no completed offline run */
    free(buf);
    as_report_destroy(rep);
}

CU_TestInfo test_planned[] = {
    {"table_columns", planned_table_columns},
    {"hand_orders", plan_hand_orders},
    {"hand_gaps", plan_hand_gaps},
    {"lifetimes", planned_lifetimes},
    {"misuse", planned_misuse},
    {"capacity", planned_capacity},
    {"random_traces", planned_random_traces},
    {"real_traces", planned_real_traces},
    CU_TEST_INFO_NULL,
};
