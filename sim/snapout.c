/*
 * snapout.c - a simulated run as a _dump_snapshot() pickle (snapout.h).
 *
 * The pickle is written as Python's pickle protocol 4 writes it, without framing (optional
 * for readers): dicts, lists, ints (LONG1 past 32 bits), strings, floats, tuples, bools
 * and None. Every dict key and action name is written once and fetched from the memo after
 * that, and so is each distinct frame dict and each site's frame list: a file grows with
 * its entries, not with the length of their stacks. Lists are appended in batches of 1000
 * (as Python does), so a long trace never needs more than one batch on a reader's stack.
 * Invariant: the pass over the trace emits the run's device events in the order the engine
 * logged them, each before the ALLOC that caused it and after any other event.
 */
#include "snapout.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "knobs.h"

/* ---- the pickle writer -------------------------------------------------------------- */

enum {
    K_ACTION,
    K_ADDR,
    K_SIZE,
    K_STREAM,
    K_TIME,
    K_FRAMES,
    K_FILENAME,
    K_LINE,
    K_NAME,
    K_DEVICE_FREE,
    K_SEGMENTS,
    K_TRACES,
    K_SETTINGS,
    K_DEVICE,
    K_ADDRESS,
    K_TOTAL,
    K_ALLOCATED,
    K_ACTIVE,
    K_REQUESTED,
    K_SEG_TYPE,
    K_POOL,
    K_EXPANDABLE,
    K_BLOCKS,
    K_STATE,
    A_ALLOC,
    A_FREE_REQ,
    A_FREE_DONE,
    A_SEG_ALLOC,
    A_SEG_FREE,
    A_SEG_MAP,
    A_SEG_UNMAP,
    A_OOM,
    S_ALLOCATED,
    S_PENDING,
    S_INACTIVE,
    T_SMALL,
    T_LARGE,
    K_USER_META,
    K_ANNOTATIONS,
    K_STAGE,
    K_COUNT
};

static const char *const key_text[K_COUNT] = {
    [K_ACTION] = "action",
    [K_ADDR] = "addr",
    [K_SIZE] = "size",
    [K_STREAM] = "stream",
    [K_TIME] = "time_us",
    [K_FRAMES] = "frames",
    [K_FILENAME] = "filename",
    [K_LINE] = "line",
    [K_NAME] = "name",
    [K_DEVICE_FREE] = "device_free",
    [K_SEGMENTS] = "segments",
    [K_TRACES] = "device_traces",
    [K_SETTINGS] = "allocator_settings",
    [K_DEVICE] = "device",
    [K_ADDRESS] = "address",
    [K_TOTAL] = "total_size",
    [K_ALLOCATED] = "allocated_size",
    [K_ACTIVE] = "active_size",
    [K_REQUESTED] = "requested_size",
    [K_SEG_TYPE] = "segment_type",
    [K_POOL] = "segment_pool_id",
    [K_EXPANDABLE] = "is_expandable",
    [K_BLOCKS] = "blocks",
    [K_STATE] = "state",
    [A_ALLOC] = "alloc",
    [A_FREE_REQ] = "free_requested",
    [A_FREE_DONE] = "free_completed",
    [A_SEG_ALLOC] = "segment_alloc",
    [A_SEG_FREE] = "segment_free",
    [A_SEG_MAP] = "segment_map",
    [A_SEG_UNMAP] = "segment_unmap",
    [A_OOM] = "oom",
    [S_ALLOCATED] = "active_allocated",
    [S_PENDING] = "active_pending_free",
    [S_INACTIVE] = "inactive",
    [T_SMALL] = "small",
    [T_LARGE] = "large",
    [K_USER_META] = "user_metadata",
    [K_ANNOTATIONS] = "external_annotations",
    [K_STAGE] = "stage",
};

#define BATCH 1000

typedef struct pkw {
    FILE *f;
    uint32_t memo;          /* the next memo index */
    uint32_t keys[K_COUNT]; /* memo index + 1 of each key, 0 before its first use */
    uint32_t *frame_memo;   /* per frame of the site table, memo index + 1 */
    uint32_t *site_memo;    /* per site, its frame list's memo index + 1 */
    const as_sites *sites;
} pkw;

static void op(pkw *w, int c)
{
    putc(c, w->f);
}

static void raw(pkw *w, const void *p, size_t n)
{
    fwrite(p, 1, n, w->f);
}

static void le(pkw *w, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        op(w, (int)((v >> (8 * i)) & 0xff));
}

static void memoize(pkw *w)
{
    op(w, 0x94); /* MEMOIZE */
    w->memo++;
}

static void get(pkw *w, uint32_t id)
{
    if (id < 256) {
        op(w, 'h'); /* BINGET */
        op(w, (int)id);
    } else {
        op(w, 'j'); /* LONG_BINGET */
        le(w, id, 4);
    }
}

/* A non-negative int: BININT1, BININT2, BININT (signed 32 bits) or LONG1. */
static void pk_uint(pkw *w, uint64_t v)
{
    if (v < 256) {
        op(w, 'K');
        op(w, (int)v);
    } else if (v < 65536) {
        op(w, 'M');
        le(w, v, 2);
    } else if (v <= INT32_MAX) {
        op(w, 'J');
        le(w, v, 4);
    } else {
        unsigned n = 0;
        while (n < 8 && (v >> (8 * n)))
            n++;
        int pad = (v >> (8 * n - 1)) & 1; /* the top bit set: a 0 byte keeps it positive */
        op(w, 0x8a);
        op(w, (int)(n + (unsigned)pad));
        le(w, v, n);
        if (pad)
            op(w, 0);
    }
}

static void pk_int(pkw *w, int64_t v)
{
    if (v >= 0) {
        pk_uint(w, (uint64_t)v);
    } else if (v >= INT32_MIN) {
        op(w, 'J');
        le(w, (uint64_t)(uint32_t)(int32_t)v, 4);
    } else {
        op(w, 0x8a); /* LONG1, 8 bytes of two's complement */
        op(w, 8);
        le(w, (uint64_t)v, 8);
    }
}

static void pk_str(pkw *w, const char *s, size_t n)
{
    if (n < 256) {
        op(w, 0x8c); /* SHORT_BINUNICODE */
        op(w, (int)n);
    } else {
        op(w, 'X'); /* BINUNICODE */
        le(w, n, 4);
    }
    raw(w, s, n);
}

static void pk_float(pkw *w, double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    op(w, 'G'); /* BINFLOAT: big-endian */
    for (int i = 7; i >= 0; i--)
        op(w, (int)((b >> (8 * i)) & 0xff));
}

static void pk_bool(pkw *w, int v)
{
    op(w, v ? 0x88 : 0x89);
}

/* A key or a fixed word: written once, then fetched from the memo. */
static void word(pkw *w, int k)
{
    if (w->keys[k]) {
        get(w, w->keys[k] - 1);
        return;
    }
    pk_str(w, key_text[k], strlen(key_text[k]));
    w->keys[k] = w->memo + 1;
    memoize(w);
}

static void frame_dict(pkw *w, uint32_t fid)
{
    if (w->frame_memo[fid]) {
        get(w, w->frame_memo[fid] - 1);
        return;
    }
    as_frame f = {0};
    as_sites_frame(w->sites, fid, &f);
    op(w, '}');
    op(w, '(');
    word(w, K_FILENAME);
    pk_str(w, f.filename ? f.filename : "", f.filename ? strlen(f.filename) : 0);
    word(w, K_LINE);
    pk_uint(w, f.line);
    word(w, K_NAME);
    pk_str(w, f.name ? f.name : "", f.name ? strlen(f.name) : 0);
    op(w, 'u');
    w->frame_memo[fid] = w->memo + 1;
    memoize(w);
}

/* A site's frames, innermost first, as a list of {filename, line, name}; [] for none. */
static void frames(pkw *w, uint32_t site)
{
    if (site && w->site_memo[site]) {
        get(w, w->site_memo[site] - 1);
        return;
    }
    const uint32_t *fids;
    size_t n = as_sites_stack(w->sites, site, &fids);
    op(w, ']');
    for (size_t i = 0; i < n; i += BATCH) {
        op(w, '(');
        for (size_t j = i; j < n && j < i + BATCH; j++)
            frame_dict(w, fids[j]);
        op(w, 'e');
    }
    if (n) {
        w->site_memo[site] = w->memo + 1;
        memoize(w);
    }
}

/* ---- the records of the run ---------------------------------------------------------- */

typedef struct devrec {
    uint64_t event, addr, size;
    as_dev_action action;
} devrec;

typedef struct blkrec {
    uint64_t addr, size; /* addr 0: no block (the request failed, or never ran) */
} blkrec;

struct as_snapout {
    devrec *dev;
    size_t ndev, capdev;
    blkrec *blk; /* indexed by allocation ordinal */
    size_t nblk, capblk;
    int err;
};

int as_snapout_create(as_snapout **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : AS_ENOMEM;
}

void as_snapout_free(as_snapout *s)
{
    if (!s)
        return;
    free(s->dev);
    free(s->blk);
    free(s);
}

void as_snapout_segment(as_snapout *s, const as_seg_record *r)
{
    if (s->err || as_grow((void **)&s->dev, &s->capdev, s->ndev + 1, sizeof *s->dev, 64)) {
        s->err = AS_ENOMEM;
        return;
    }
    s->dev[s->ndev++] = (devrec){
        .event = r->event, .addr = r->dev.addr, .size = r->dev.size, .action = r->dev.action};
}

void as_snapout_block(as_snapout *s, const as_block_record *r)
{
    if (s->err || r->alloc >= SIZE_MAX / sizeof *s->blk)
        return;
    size_t need = (size_t)r->alloc + 1;
    if (need > s->nblk) {
        if (as_grow((void **)&s->blk, &s->capblk, need, sizeof *s->blk, 1024)) {
            s->err = AS_ENOMEM;
            return;
        }
        memset(s->blk + s->nblk, 0, (need - s->nblk) * sizeof *s->blk);
        s->nblk = need;
    }
    s->blk[r->alloc] = (blkrec){.addr = r->addr, .size = r->size};
}

/* ---- the pass over the trace ---------------------------------------------------------- */

enum { ST_NONE, ST_ALLOCATED, ST_PENDING, ST_FREED };

typedef struct alive {
    uint64_t req, stream;
    uint32_t site;
    uint8_t state;
} alive;

/* A live device range: a cudaMalloc segment, or one mapping of an expandable segment. */
typedef struct lseg {
    uint64_t addr, size, stream;
    uint32_t site, pool; /* pool: the private pool of the ALLOC that made it (0 = default) */
    uint8_t small, mapped;
} lseg;

typedef struct pass {
    pkw w;
    as_snapout *s;
    const as_run_result *res;
    const as_meta *meta; /* the trace's: pool.K names private pool K's segment_pool_id */
    int torch;           /* the policy is torch: an oom entry's size is rounded as it rounds */
    const uint32_t *div; /* its roundup_power2_divisions (NULL: none) */
    alive *al;           /* per allocation ordinal, s->nblk of them */
    lseg *seg;
    size_t nseg, capseg;
    size_t di;         /* the next device record */
    size_t in_batch;   /* items of device_traces since the last APPENDS */
    uint64_t reserved; /* bytes, from the device records so far */
    /* Marks: "user_metadata=V" sets the user_metadata of the entries after it (umeta_on once
     * one was set: then every entry carries it, "" too); the others are annotations. */
    char umeta[AS_MAX_LABEL + 1];
    int umeta_on;
    const as_event *release; /* the EMPTY_CACHE whose frees are being written, else NULL */
    char *ann; /* annotations: time_us (8 bytes), stage (1), label, NUL; one after another */
    size_t nann, capann, annlen;
} pass;

static void list_item_done(pass *p)
{
    if (++p->in_batch == BATCH) {
        op(&p->w, 'e');
        op(&p->w, '(');
        p->in_batch = 0;
    }
}

/* The frames of an EMPTY_CACHE event's frees: one frame naming the call, which a simulated
 * run has no stack for: {<allocsim>, 0, "empty_cache()"}, or "empty_cache(pool=K)" for
 * private pool K released and emptied alone. An import reads each call's frees, and which
 * of the two it was, from them (traces/FORMAT.md, "Private pools"). */
static void release_frames(pass *p)
{
    pkw *w = &p->w;
    char name[48];
    int n = p->release->pool
                ? snprintf(name, sizeof name, "empty_cache(pool=%" PRIu32 ")", p->release->pool)
                : snprintf(name, sizeof name, "empty_cache()");
    op(w, ']');
    op(w, '(');
    op(w, '}');
    op(w, '(');
    word(w, K_FILENAME);
    pk_str(w, "<allocsim>", 10);
    word(w, K_LINE);
    pk_uint(w, 0);
    word(w, K_NAME);
    pk_str(w, name, (size_t)n);
    op(w, 'u');
    op(w, 'e');
}

/* One trace entry: {action, addr (or device_free), size, stream, time_us, frames}. */
static void entry(pass *p, int action, uint64_t addr, uint64_t size, uint64_t stream,
                  int64_t time_us, uint32_t site)
{
    pkw *w = &p->w;
    op(w, '}');
    op(w, '(');
    word(w, K_ACTION);
    word(w, action);
    word(w, action == A_OOM ? K_DEVICE_FREE : K_ADDR);
    pk_uint(w, addr);
    word(w, K_SIZE);
    pk_uint(w, size);
    word(w, K_STREAM);
    pk_uint(w, stream);
    word(w, K_TIME);
    pk_int(w, time_us == AS_TIME_NONE ? 0 : time_us);
    word(w, K_FRAMES);
    if (p->release)
        release_frames(p);
    else
        frames(w, site);
    if (p->umeta_on) {
        word(w, K_USER_META);
        pk_str(w, p->umeta, strlen(p->umeta));
    }
    op(w, 'u');
    list_item_done(p);
}

static int seg_add(pass *p, const devrec *d, const as_event *x)
{
    if (as_grow((void **)&p->seg, &p->capseg, p->nseg + 1, sizeof *p->seg, 64))
        return AS_ENOMEM;
    int alloc = x && x->op == AS_OP_ALLOC;
    p->seg[p->nseg++] = (lseg){
        .addr = d->addr,
        .size = d->size,
        .stream = alloc ? x->stream : 0,
        .site = alloc ? x->site : 0,
        .pool = alloc ? x->pool : 0,
        .small = alloc ? x->size <= (1u << 20) : d->size == (2u << 20),
        .mapped = d->action == AS_DEV_SEGMENT_MAP,
    };
    return 0;
}

/* Removes [addr, addr + size) from the live ranges (a free, or an unmap of part of a
 * mapping); the stream of the first range it touched goes to *stream. */
static int seg_remove(pass *p, uint64_t addr, uint64_t size, uint64_t *stream)
{
    uint64_t end = addr + size;
    *stream = 0;
    int found = 0;
    for (size_t i = 0; i < p->nseg; i++) {
        lseg *g = &p->seg[i];
        uint64_t gend = g->addr + g->size;
        if (gend <= addr || g->addr >= end)
            continue;
        if (!found++)
            *stream = g->stream;
        lseg right = *g;
        if (g->addr < addr) { /* a left part stays */
            g->size = addr - g->addr;
        } else {
            p->seg[i--] = p->seg[--p->nseg];
        }
        if (gend > end) {
            right.addr = end;
            right.size = gend - end;
            if (as_grow((void **)&p->seg, &p->capseg, p->nseg + 1, sizeof *p->seg, 64))
                return AS_ENOMEM;
            p->seg[p->nseg++] = right;
        }
    }
    return 0;
}

/* The device records logged while handling event k (x, NULL past the end), as entries. */
static int dev_entries(pass *p, uint64_t k, const as_event *x)
{
    static const int act[] = {[AS_DEV_SEGMENT_ALLOC] = A_SEG_ALLOC,
                              [AS_DEV_SEGMENT_FREE] = A_SEG_FREE,
                              [AS_DEV_SEGMENT_MAP] = A_SEG_MAP,
                              [AS_DEV_SEGMENT_UNMAP] = A_SEG_UNMAP};
    for (; p->di < p->s->ndev && (!x || p->s->dev[p->di].event <= k); p->di++) {
        const devrec *d = &p->s->dev[p->di];
        int grows = d->action == AS_DEV_SEGMENT_ALLOC || d->action == AS_DEV_SEGMENT_MAP;
        uint64_t stream = 0;
        int rc = grows ? seg_add(p, d, x) : seg_remove(p, d->addr, d->size, &stream);
        if (rc)
            return rc;
        p->reserved += grows ? d->size : (uint64_t)0 - d->size;
        /* made or freed while serving an ALLOC (an OOM retry frees cached segments first):
         * the request's frames, as PyTorch records every entry of one malloc under its
         * context (which is how an import tells a retry's release from empty_cache()) */
        int during = x && x->op == AS_OP_ALLOC, alloc = grows && during;
        p->release = x && x->op == AS_OP_EMPTY_CACHE && !grows ? x : NULL;
        entry(p, act[d->action], d->addr, d->size, alloc ? x->stream : stream,
              x ? x->time_us : AS_TIME_NONE, during ? x->site : 0);
        p->release = NULL;
    }
    return 0;
}

/* A MARK: user_metadata for what follows, or an annotation ("START name", "END name"; any
 * other label is the name of a START). */
static int mark(pass *p, const as_event *x)
{
    const char *l = x->label;
    if (!l)
        return 0;
    if (strncmp(l, "user_metadata=", 14) == 0) {
        snprintf(p->umeta, sizeof p->umeta, "%s", l + 14);
        p->umeta_on = 1;
        return 0;
    }
    int stage = strncmp(l, "END ", 4) == 0 ? 1 : 0;
    if (strncmp(l, "START ", 6) == 0 || stage)
        l += stage ? 4 : 6;
    size_t n = strlen(l), need = p->annlen + 9 + n + 1;
    if (as_grow((void **)&p->ann, &p->capann, need, 1, 4096))
        return AS_ENOMEM;
    int64_t t = x->time_us == AS_TIME_NONE ? 0 : x->time_us;
    memcpy(p->ann + p->annlen, &t, 8);
    p->ann[p->annlen + 8] = (char)stage;
    memcpy(p->ann + p->annlen + 9, l, n + 1);
    p->annlen = need;
    p->nann++;
    return 0;
}

/* external_annotations: [{name, stage, device, time_us}], as record_function writes them. */
static void write_annotations(pass *p)
{
    pkw *w = &p->w;
    if (!p->nann)
        return;
    word(w, K_ANNOTATIONS);
    op(w, ']');
    size_t at = 0;
    for (size_t i = 0; i < p->nann; i += BATCH) {
        op(w, '(');
        for (size_t j = i; j < p->nann && j < i + BATCH; j++) {
            int64_t t;
            memcpy(&t, p->ann + at, 8);
            const char *stage = p->ann[at + 8] ? "END" : "START";
            const char *l = p->ann + at + 9;
            size_t n = strlen(l);
            op(w, '}');
            op(w, '(');
            word(w, K_NAME);
            pk_str(w, l, n);
            word(w, K_STAGE);
            pk_str(w, stage, strlen(stage));
            word(w, K_DEVICE);
            pk_uint(w, 0);
            word(w, K_TIME);
            pk_int(w, t);
            op(w, 'u');
            at += 9 + n + 1;
        }
        op(w, 'e');
    }
}

/* One event of the trace: its entries, and the device records of its handling. */
static int event_entries(pass *p, uint64_t k, const as_event *x)
{
    const as_snapout *s = p->s;
    int known = x->id < s->nblk;
    const blkrec *b = known ? &s->blk[x->id] : NULL;
    alive *a = known ? &p->al[x->id] : NULL;
    int rc;
    switch (x->op) {
    case AS_OP_ALLOC:
        if ((rc = dev_entries(p, k, x)))
            return rc;
        if (b && b->addr) {
            *a = (alive){
                .req = x->size, .stream = x->stream, .site = x->site, .state = ST_ALLOCATED};
            entry(p, A_ALLOC, b->addr, x->size, x->stream, x->time_us, x->site);
        } else { /* the request failed: CUDA's free memory at the OOM, and the size
                  * as PyTorch writes it (round_size's) under torch, else as requested */
            uint64_t cap = p->res->capacity;
            uint64_t dfree = cap != AS_CAPACITY_NONE && cap > p->reserved ? cap - p->reserved : 0;
            uint64_t size = p->torch ? as_round_size(x->size, 512, p->div) : x->size;
            entry(p, A_OOM, dfree, size, x->stream, x->time_us, x->site);
        }
        return 0;
    case AS_OP_FREE_REQ:
    case AS_OP_FREE:
        if (a && a->state == ST_ALLOCATED)
            entry(p, A_FREE_REQ, b->addr, x->size, x->stream, x->time_us, 0);
        if (a && (a->state == ST_ALLOCATED || a->state == ST_PENDING)) {
            if (x->op == AS_OP_FREE) {
                entry(p, A_FREE_DONE, b->addr, x->size, x->stream, x->time_us, 0);
                a->state = ST_FREED;
            } else {
                a->state = ST_PENDING;
            }
        }
        return dev_entries(p, k, x);
    case AS_OP_MARK:
        if ((rc = mark(p, x)))
            return rc;
        return dev_entries(p, k, x);
    default: /* EMPTY_CACHE: no entry of its own (a snapshot has none) */
        return dev_entries(p, k, x);
    }
}

/* The events the run handled, and the failing request of a stopping OOM. */
static uint64_t events_of_run(const as_run_result *res)
{
    int stop_oom = !res->completed && res->oom_event != AS_NONE && res->oom_event == res->events;
    return res->events + (uint64_t)stop_oom;
}

/* device_traces: [[entries...]]. 0, a trace error (why filled) or AS_ENOMEM. */
static int write_traces(pass *p, as_trace_reader *rd, const char *path, char *why, size_t wl)
{
    pkw *w = &p->w;
    word(w, K_TRACES);
    op(w, ']'); /* one list per device: device 0's */
    op(w, ']');
    op(w, '(');
    uint64_t limit = events_of_run(p->res), k = 0;
    as_event ev[256];
    size_t n = 0;
    int rc = 0;
    while (k < limit && (rc = as_trace_next_batch(rd, ev, 256, &n)) == 0)
        for (size_t i = 0; i < n && k < limit && !rc; i++, k++)
            rc = event_entries(p, k, &ev[i]);
    if (rc == AS_TRACE_EOF)
        rc = 0;
    if (rc == 0 && k < limit) {
        snprintf(why, wl,
                 "%s: the trace ended at event %" PRIu64 " of the %" PRIu64
                 " the run handled (did it change?)",
                 path, k, limit);
        return AS_EINVAL;
    }
    if (rc == 0)
        rc = dev_entries(p, k, NULL);
    if (rc < 0 && rc != AS_ENOMEM)
        as_trace_error_text(as_trace_reader_error(rd), path, why, wl);
    op(w, 'e'); /* the device's list */
    op(w, 'a'); /* appended to device_traces */
    return rc;
}

/* ---- segments at the end, and the settings ------------------------------------------- */

static int by_addr(const void *a, const void *b)
{
    uint64_t x = ((const lseg *)a)->addr, y = ((const lseg *)b)->addr;
    return x < y ? -1 : x > y;
}

/* Live ranges in address order, an expandable segment's adjacent mappings as one. */
static void seg_merge(pass *p)
{
    qsort(p->seg, p->nseg, sizeof *p->seg, by_addr);
    size_t j = 0;
    for (size_t i = 0; i < p->nseg; i++) {
        lseg *l = j ? &p->seg[j - 1] : NULL;
        const lseg *g = &p->seg[i];
        if (l && l->mapped && g->mapped && l->addr + l->size == g->addr && l->stream == g->stream &&
            l->small == g->small && l->pool == g->pool)
            l->size += g->size;
        else
            p->seg[j++] = *g;
    }
    p->nseg = j;
}

typedef struct lblk {
    uint64_t addr, size, id;
} lblk;

static int blk_by_addr(const void *a, const void *b)
{
    uint64_t x = ((const lblk *)a)->addr, y = ((const lblk *)b)->addr;
    return x < y ? -1 : x > y;
}

static void block_dict(pass *p, uint64_t addr, uint64_t size, const alive *a)
{
    pkw *w = &p->w;
    op(w, '}');
    op(w, '(');
    word(w, K_ADDRESS);
    pk_uint(w, addr);
    word(w, K_SIZE);
    pk_uint(w, size);
    word(w, K_REQUESTED);
    pk_uint(w, a ? a->req : 0);
    word(w, K_STATE);
    word(w, !a ? S_INACTIVE : a->state == ST_PENDING ? S_PENDING : S_ALLOCATED);
    word(w, K_FRAMES);
    frames(w, a ? a->site : 0);
    op(w, 'u');
}

/* segment_pool_id of private pool k: the trace's pool.K pair ("(a, b)", as the importer
 * keeps it); (k, 0) for a pool the trace names no pair for (a generated trace); (0, 0) for
 * the default pool. */
static void pool_pair(const as_meta *m, uint32_t k, int64_t pair[2])
{
    char key[32];
    long long a, b;
    pair[0] = pair[1] = 0;
    if (!k)
        return;
    snprintf(key, sizeof key, "pool.%" PRIu32, k);
    const char *v = m ? as_meta_get(m, key) : NULL;
    if (v && sscanf(v, "(%lld, %lld)", &a, &b) == 2 && (a || b)) {
        pair[0] = a, pair[1] = b;
        return;
    }
    pair[0] = k;
}

/* One segment dict with its blocks: blks[*bi..] are the live blocks from its address on. */
static void segment_dict(pass *p, const lseg *g, const lblk *blks, size_t nb, size_t *bi)
{
    pkw *w = &p->w;
    uint64_t end = g->addr + g->size, allocated = 0, active = 0, requested = 0;
    size_t b0 = *bi, b1 = b0;
    for (; b1 < nb && blks[b1].addr + blks[b1].size <= end; b1++) {
        const alive *a = &p->al[blks[b1].id];
        active += blks[b1].size;
        allocated += a->state == ST_ALLOCATED ? blks[b1].size : 0;
        requested += a->req;
    }
    *bi = b1;
    op(w, '}');
    op(w, '(');
    word(w, K_DEVICE);
    pk_uint(w, 0);
    word(w, K_ADDRESS);
    pk_uint(w, g->addr);
    word(w, K_TOTAL);
    pk_uint(w, g->size);
    word(w, K_ALLOCATED);
    pk_uint(w, allocated);
    word(w, K_ACTIVE);
    pk_uint(w, active);
    word(w, K_REQUESTED);
    pk_uint(w, requested);
    word(w, K_STREAM);
    pk_uint(w, g->stream);
    word(w, K_SEG_TYPE);
    word(w, g->small ? T_SMALL : T_LARGE);
    int64_t pair[2];
    pool_pair(p->meta, g->pool, pair);
    word(w, K_POOL);
    pk_int(w, pair[0]);
    pk_int(w, pair[1]);
    op(w, 0x86); /* TUPLE2 */
    word(w, K_EXPANDABLE);
    pk_bool(w, g->mapped);
    word(w, K_FRAMES);
    frames(w, g->site);
    word(w, K_BLOCKS);
    op(w, ']');
    op(w, '(');
    uint64_t at = g->addr;
    for (size_t i = b0; i < b1; i++) {
        if (blks[i].addr > at)
            block_dict(p, at, blks[i].addr - at, NULL);
        block_dict(p, blks[i].addr, blks[i].size, &p->al[blks[i].id]);
        at = blks[i].addr + blks[i].size;
    }
    if (at < end)
        block_dict(p, at, end - at, NULL);
    op(w, 'e');
    op(w, 'u');
}

/* segments: the live ranges with the blocks alive in them when the run ended. */
static int write_segments(pass *p)
{
    seg_merge(p);
    size_t nb = 0;
    for (size_t i = 0; i < p->s->nblk; i++)
        nb += p->al[i].state == ST_ALLOCATED || p->al[i].state == ST_PENDING;
    lblk *blks = malloc((nb ? nb : 1) * sizeof *blks);
    if (!blks)
        return AS_ENOMEM;
    nb = 0;
    for (size_t i = 0; i < p->s->nblk; i++)
        if (p->al[i].state == ST_ALLOCATED || p->al[i].state == ST_PENDING)
            blks[nb++] = (lblk){.addr = p->s->blk[i].addr, .size = p->s->blk[i].size, .id = i};
    qsort(blks, nb, sizeof *blks, blk_by_addr);
    pkw *w = &p->w;
    word(w, K_SEGMENTS);
    op(w, ']');
    size_t bi = 0;
    for (size_t i = 0; i < p->nseg; i += BATCH) {
        op(w, '(');
        for (size_t j = i; j < p->nseg && j < i + BATCH; j++) {
            while (bi < nb && blks[bi].addr < p->seg[j].addr) /* outside any segment */
                bi++;
            segment_dict(p, &p->seg[j], blks, nb, &bi);
        }
        op(w, 'e');
    }
    free(blks);
    return 0;
}

static void setting_str(pkw *w, const char *k, const char *v)
{
    pk_str(w, k, strlen(k));
    pk_str(w, v, strlen(v));
}

/* The card a recorded per_process_memory_fraction is a fraction of, as `allocsim check` and
 * `-p recorded` read it (sim/check.c's H200_TOTAL: an H200's totalGlobalMem). */
#define RECORDED_TOTAL 150109880320ull

/* PYTORCH_CUDA_ALLOC_CONF for the knobs the spec set that have a PyTorch name, and the
 * capacity as the fraction of RECORDED_TOTAL it is (when below it). */
static void alloc_conf(const as_policy_spec *spec, uint64_t cap, char *out, size_t n)
{
    const as_policy *pol = spec->policy;
    size_t j = 0;
    out[0] = 0;
    for (size_t k = 0; k < pol->n_knobs && j < n; k++) {
        const as_knob *kn = &pol->knobs[k];
        const as_knob_value *v = &spec->values[k];
        if (!kn->alias || !v->set)
            continue;
        j += (size_t)snprintf(out + j, n - j, "%s%s:", j ? "," : "", kn->alias);
        if (j >= n)
            break;
        if (kn->type == AS_KNOB_BOOL)
            j += (size_t)snprintf(out + j, n - j, "%s", v->i ? "True" : "False");
        else if (kn->type == AS_KNOB_FLOAT)
            j += (size_t)snprintf(out + j, n - j, "%g", v->f);
        else if (kn->type == AS_KNOB_DIVS)
            for (unsigned d = 0; d < AS_DIV_INTERVALS && j < n; d++)
                j += (size_t)snprintf(out + j, n - j, "%s%u:%u", d ? "," : "[", 1u << d, v->div[d]);
        else
            j += (size_t)snprintf(out + j, n - j, "%" PRId64, v->i);
        if (kn->type == AS_KNOB_DIVS && j < n)
            j += (size_t)snprintf(out + j, n - j, "]");
    }
    if (cap != AS_CAPACITY_NONE && cap < RECORDED_TOTAL && j < n)
        j += (size_t)snprintf(out + j, n - j, "%sper_process_memory_fraction:%.17g", j ? "," : "",
                              (double)cap / (double)RECORDED_TOTAL);
    if (j >= n)
        out[0] = 0;
}

/* A knob's value by its PyTorch name, or NULL when the policy has none. */
static const as_knob_value *knob(const as_policy_spec *spec, const char *alias)
{
    for (size_t k = 0; k < spec->policy->n_knobs; k++)
        if (spec->policy->knobs[k].alias && strcmp(spec->policy->knobs[k].alias, alias) == 0)
            return &spec->values[k];
    return NULL;
}

/* allocator_settings as PyTorch 2.11 writes them, for the torch policy only (the other
 * policies are not PyTorch's allocator: no setting says what they did). */
static void write_settings(pkw *w, const as_policy_spec *spec, uint64_t cap)
{
    if (strcmp(spec->policy->name, "torch") != 0)
        return;
    char conf[1024];
    alloc_conf(spec, cap, conf, sizeof conf);
    const as_knob_value *ms = knob(spec, "max_split_size_mb");
    const as_knob_value *gc = knob(spec, "garbage_collection_threshold");
    const as_knob_value *ex = knob(spec, "expandable_segments");
    const as_knob_value *dv = knob(spec, "roundup_power2_divisions");
    word(w, K_SETTINGS);
    op(w, '}');
    op(w, '(');
    setting_str(w, "PYTORCH_CUDA_ALLOC_CONF", conf);
    pk_str(w, "max_split_size", 14);
    pk_int(w, ms && ms->i > 0 ? ms->i << 20 : -1);
    pk_str(w, "garbage_collection_threshold", 28);
    pk_float(w, gc ? gc->f : 0.0);
    pk_str(w, "expandable_segments", 19);
    pk_bool(w, ex && ex->i);
    pk_str(w, "release_lock_on_cudamalloc", 26);
    pk_bool(w, 0);
    pk_str(w, "pinned_use_cuda_host_register", 29);
    pk_bool(w, 0);
    pk_str(w, "pinned_num_register_threads", 27);
    pk_uint(w, 1);
    pk_str(w, "roundup_power2_divisions", 24);
    op(w, '}');
    op(w, '(');
    for (unsigned d = 0; d < AS_DIV_INTERVALS; d++) {
        char k[8];
        int kn = snprintf(k, sizeof k, "%u", 1u << d);
        pk_str(w, k, (size_t)kn);
        pk_uint(w, dv ? dv->div[d] : 0);
    }
    op(w, 'u');
    op(w, 'u');
}

int as_snapout_write(as_snapout *s, const char *path, const as_reader_opts *opts,
                     const as_policy_spec *spec, const as_run_result *res, FILE *f, char *why,
                     size_t why_len)
{
    as_trace_reader *rd = NULL;
    as_trace_error err;
    pass p = {.s = s, .res = res, .w = {.f = f}};
    int rc = s->err;
    why[0] = 0;
    if (!rc && (rc = as_trace_open(path, opts, &rd, &err)) < 0) {
        as_trace_error_text(&err, path, why, why_len);
        goto out;
    }
    const as_sites *sites = rc ? NULL : as_trace_reader_sites(rd);
    p.w.sites = sites;
    p.meta = rc ? NULL : as_trace_reader_meta(rd);
    const as_knob_value *dv = knob(spec, "roundup_power2_divisions");
    p.torch = strcmp(spec->policy->name, "torch") == 0;
    p.div = dv ? dv->div : NULL;
    p.al = rc ? NULL : calloc(s->nblk ? s->nblk : 1, sizeof *p.al);
    p.w.frame_memo = rc ? NULL : calloc((size_t)as_sites_nframes(sites) + 1, sizeof(uint32_t));
    p.w.site_memo = rc ? NULL : calloc((size_t)as_sites_count(sites) + 1, sizeof(uint32_t));
    if (!rc && (!p.al || !p.w.frame_memo || !p.w.site_memo))
        rc = AS_ENOMEM;
    if (rc)
        goto out;
    op(&p.w, 0x80); /* PROTO 4 */
    op(&p.w, 4);
    op(&p.w, '}');
    op(&p.w, '(');
    if ((rc = write_traces(&p, rd, path, why, why_len)) || (rc = write_segments(&p)))
        goto out;
    write_annotations(&p);
    write_settings(&p.w, spec, res->capacity);
    op(&p.w, 'u');
    op(&p.w, '.'); /* STOP */
out:
    if (rc == AS_ENOMEM && !why[0])
        snprintf(why, why_len, "out of host memory for the snapshot");
    as_trace_close(rd);
    free(p.al);
    free(p.seg);
    free(p.ann);
    free(p.w.frame_memo);
    free(p.w.site_memo);
    return rc;
}
