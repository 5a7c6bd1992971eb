/*
 * check.c - does the simulation reproduce a recorded run (check.h)? The recorded setting,
 * the pool at the trace's start, a device that answers with the recorded addresses, a
 * preamble that lays the start pool out through the policy's own calls, and the
 * comparison of device-level events. Invariant: nothing here prints; the result says what
 * happened and the caller words it (as_check_line).
 *
 * The preamble: every start segment is made by a request that creates exactly it (its own
 * size, at a moment when no free block of its pool exists, so the device is asked), freed,
 * and carved again front to back by requests of exactly its blocks' sizes (live blocks
 * under their prehistoric ids, fillers for the free gaps, freed at the end so that gaps
 * merge as PyTorch's do). Front splitting and best fit then put every piece where it was;
 * each address is verified, and a layout the policy would not make is refused, not
 * approximated.
 */
#include "check.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "grow.h"
#include "knobs.h"
#include "recdev.h"

#define MIB (1ull << 20)
#define SMALL_SEG (2ull << 20) /* kSmallBuffer: a small-pool segment */
#define H200_TOTAL 150109880320ull

/* ---- the recorded setting ---------------------------------------------------------- */

/* Appends ",text" (or "text") to spec. */
static void put(char *spec, size_t n, const char *text)
{
    size_t j = strlen(spec);
    if (j + strlen(text) + 2 < n)
        snprintf(spec + j, n - j, "%s%s", j ? "," : "", text);
}

/* The value of key in a PYTORCH_CUDA_ALLOC_CONF string ("k:v,k:[a:b,c:d],..."), copied. */
static int conf_value(const char *conf, const char *key, char *out, size_t n)
{
    size_t kl = strlen(key);
    for (const char *p = conf; p && *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *colon = strchr(p, ':');
        if (!colon)
            return 0;
        const char *end = colon + 1;
        int depth = 0;
        while (*end && (depth || *end != ',')) {
            depth += *end == '[';
            depth -= *end == ']';
            end++;
        }
        if ((size_t)(colon - p) == kl && strncmp(p, key, kl) == 0) {
            snprintf(out, n, "%.*s", (int)(end - colon - 1), colon + 1);
            return 1;
        }
        p = end;
    }
    return 0;
}

int as_recorded_setting(const as_meta *m, char *spec, size_t n, double *fraction, char *why,
                        size_t why_len)
{
    const char *conf = as_meta_get(m, "allocator_config");
    const char *ms = as_meta_get(m, "torch.max_split_size");
    const char *ex = as_meta_get(m, "torch.expandable_segments");
    const char *gc = as_meta_get(m, "torch.garbage_collection_threshold");
    const char *dv = as_meta_get(m, "torch.roundup_power2_divisions");
    char v[256], t[300];
    spec[0] = 0;
    *fraction = 0;
    if (!conf && !ms && !ex) {
        snprintf(why, why_len,
                 "the snapshot records no allocator_settings (PyTorch before 2.4, or not a "
                 "torch snapshot): name the setting the job ran with (-p)");
        return AS_EINVAL;
    }
    if (conf && conf_value(conf, "backend", v, sizeof v) && strcmp(v, "native") != 0) {
        snprintf(why, why_len, "the recording ran backend:%s, not the caching allocator", v);
        return AS_EINVAL;
    }
    long long mss = ms ? strtoll(ms, NULL, 10) : -1;
    if (mss > 0) {
        snprintf(t, sizeof t, "max_split_size_mb:%llu", (unsigned long long)mss / MIB);
        put(spec, n, t);
    }
    if (gc && strtod(gc, NULL) > 0) {
        snprintf(t, sizeof t, "garbage_collection_threshold:%s", gc);
        put(spec, n, t);
    }
    if (ex && strcmp(ex, "True") == 0)
        put(spec, n, "expandable_segments:True");
    /* "[1:0,2:0,...]": the list as PYTORCH_CUDA_ALLOC_CONF writes it, when one is not 0. */
    int divs = 0;
    for (const char *p = dv ? strchr(dv, ':') : NULL; p; p = strchr(p + 1, ':'))
        divs |= p[1] != '0';
    if (divs) {
        snprintf(t, sizeof t, "roundup_power2_divisions:%s", dv);
        put(spec, n, t);
    }
    static const char *const passed[] = {"large_segment_size_mb", "max_non_split_rounding_mb"};
    for (size_t k = 0; conf && k < sizeof passed / sizeof passed[0]; k++)
        if (conf_value(conf, passed[k], v, sizeof v)) {
            snprintf(t, sizeof t, "%s:%s", passed[k], v);
            put(spec, n, t);
        }
    if (conf && conf_value(conf, "per_process_memory_fraction", v, sizeof v)) {
        double f = strtod(v, NULL);
        *fraction = f > 0 && f < 1 ? f : 0;
    }
    if (!spec[0])
        snprintf(spec, n, "torch");
    return 0;
}

/* ---- the pool at the trace's start -------------------------------------------------- */

typedef struct sblk {
    uint64_t addr, size, id; /* id: the prehistoric ordinal, UINT64_MAX for a filler */
} sblk;

typedef struct sseg {
    uint64_t addr, size, stream;
    size_t first, n; /* its live blocks in start.blks */
    uint8_t small, expandable;
} sseg;

typedef struct start_pool {
    sseg *segs;
    size_t nsegs, cap;
    sblk *blks;
    size_t nblks;
} start_pool;

static int cmp_seg(const void *a, const void *b)
{
    const sseg *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_blk(const void *a, const void *b)
{
    const sblk *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int add_seg(start_pool *p, sseg s)
{
    if (as_grow((void **)&p->segs, &p->cap, p->nsegs + 1, sizeof *p->segs, 64) < 0)
        return AS_ENOMEM;
    p->segs[p->nsegs++] = s;
    return 0;
}

/* The trace's segment_map entries by address, with the sums of their sizes up to each, for
 * the expandable segments at the dump: built once, where each segment scanned every
 * segment entry and every other segment (quadratic in a crafted dump of many). */
typedef struct map_index {
    uint64_t *addr, *below; /* below[i]: the sizes of maps 0..i-1, in address order */
    size_t n;
} map_index;

typedef struct map_ent {
    uint64_t addr, size;
} map_ent;

static int cmp_map_ent(const void *a, const void *b)
{
    const map_ent *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int map_index_build(const as_snapshot_record *rec, map_index *mi)
{
    memset(mi, 0, sizeof *mi);
    size_t n = 0;
    for (size_t i = 0; i < rec->nsegev; i++)
        n += rec->segev[i].action == AS_SNAP_SEG_MAP;
    map_ent *m = malloc((n + 1) * sizeof *m);
    mi->addr = malloc((n + 1) * sizeof *mi->addr);
    mi->below = malloc((n + 1) * sizeof *mi->below);
    if (!m || !mi->addr || !mi->below) {
        free(m);
        free(mi->addr);
        free(mi->below);
        return AS_ENOMEM;
    }
    for (size_t i = 0, k = 0; i < rec->nsegev; i++)
        if (rec->segev[i].action == AS_SNAP_SEG_MAP)
            m[k++] = (map_ent){rec->segev[i].addr, rec->segev[i].size};
    if (n)
        qsort(m, n, sizeof *m, cmp_map_ent);
    mi->below[0] = 0;
    for (size_t i = 0; i < n; i++) {
        mi->addr[i] = m[i].addr;
        mi->below[i + 1] = mi->below[i] + m[i].size;
    }
    mi->n = n;
    free(m);
    return 0;
}

/* The first map at an address >= a. */
static size_t map_lower(const map_index *mi, uint64_t a)
{
    size_t lo = 0, hi = mi->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (mi->addr[mid] < a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int cmp_stream_small(const void *a, const void *b)
{
    const as_snap_seg *x = *(const as_snap_seg *const *)a, *y = *(const as_snap_seg *const *)b;
    if (x->stream != y->stream)
        return x->stream < y->stream ? -1 : 1;
    return (x->small > y->small) - (x->small < y->small);
}

/* 1 when the expandable segments at the dump cannot be undone: the trace unmaps a range,
 * or two of them share a stream and a pool size (two ranges of one stream and pool); else
 * 0, or < 0. */
static int expandable_unknown(const as_snapshot_record *rec)
{
    size_t n = 0;
    for (size_t i = 0; i < rec->nsegs; i++)
        n += rec->segs[i].expandable;
    if (!n)
        return 0;
    for (size_t i = 0; i < rec->nsegev; i++)
        if (rec->segev[i].action == AS_SNAP_SEG_UNMAP)
            return 1;
    const as_snap_seg **v = malloc(n * sizeof *v);
    if (!v)
        return AS_ENOMEM;
    for (size_t i = 0, k = 0; i < rec->nsegs; i++)
        if (rec->segs[i].expandable)
            v[k++] = &rec->segs[i];
    qsort(v, n, sizeof *v, cmp_stream_small);
    int rc = 0;
    for (size_t k = 1; k < n && !rc; k++)
        rc = cmp_stream_small(&v[k - 1], &v[k]) == 0;
    free(v);
    return rc;
}

/* An expandable segment at the start: the dump's mapped range less what the trace mapped
 * inside it (PyTorch grows a stream's segment at its end). */
static sseg start_expandable(const map_index *mi, const as_snap_seg *s)
{
    size_t lo = map_lower(mi, s->addr);
    uint64_t end = s->addr + s->size; /* empty or wrapped: no map inside, as before */
    size_t hi = end > s->addr ? map_lower(mi, end) : lo;
    return (sseg){.addr = s->addr,
                  .size = s->size - (mi->below[hi] - mi->below[lo]),
                  .stream = s->stream,
                  .small = s->small,
                  .expandable = 1};
}

/* A step of the backward walk of start_segments: a segment added (one of the dump's, or a
 * segment_free's) or a segment_alloc, which takes back the latest segment added at its
 * address, if any. */
typedef struct segop {
    uint64_t addr;
    size_t seq; /* walk order */
    size_t seg; /* the segment added (its index), or SIZE_MAX for a segment_alloc */
} segop;

static int cmp_segop(const void *a, const void *b)
{
    const segop *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Drops from p->segs the segments the walk's segment_allocs take back: the ops sorted by
 * address and walk order, each address's adds a stack that its allocs pop (the latest
 * free of an address is the one its alloc made). O(n log n): a search of the whole list
 * at each alloc took 6.8 s for 160,000 segments made and freed. */
static int undo_allocs(start_pool *p, segop *ops, size_t nops)
{
    size_t *stack = nops ? malloc(nops * sizeof *stack) : NULL;
    uint8_t *gone = p->nsegs ? calloc(p->nsegs, 1) : NULL;
    int rc = AS_ENOMEM;
    if ((nops && !stack) || (p->nsegs && !gone))
        goto out;
    if (nops) /* none: ops may be NULL, which qsort must not get */
        qsort(ops, nops, sizeof *ops, cmp_segop);
    for (size_t i = 0, top = 0; i < nops; i++) {
        if (i > 0 && ops[i].addr != ops[i - 1].addr)
            top = 0;
        if (ops[i].seg != SIZE_MAX)
            stack[top++] = ops[i].seg;
        else if (top)
            gone[stack[--top]] = 1;
    }
    size_t n = 0;
    for (size_t k = 0; k < p->nsegs; k++)
        if (!gone[k])
            p->segs[n++] = p->segs[k];
    p->nsegs = n;
    rc = 0;
out:
    free(stack);
    free(gone);
    return rc;
}

/* The segments alive at the start: those at the dump, undone backwards through the
 * trace's segment entries (a segment_alloc had not happened yet, a segment_free's segment
 * was still there; an expandable range had not grown yet). 1 when that cannot be told
 * (not rebuilt), else 0 or < 0. */
static int start_segments(const as_snapshot_record *rec, start_pool *p)
{
    int rc = expandable_unknown(rec);
    uint64_t maps = 0, inside = 0;
    map_index mi;
    if (rc || (rc = map_index_build(rec, &mi)))
        return rc;
    for (size_t i = 0; i < rec->nsegs && !rc; i++) {
        const as_snap_seg *s = &rec->segs[i];
        sseg x = {.addr = s->addr, .size = s->size, .stream = s->stream, .small = s->small};
        if (s->expandable)
            x = start_expandable(&mi, s);
        if (x.expandable)
            inside += s->size - x.size;
        if (x.size)
            rc = add_seg(p, x);
    }
    free(mi.addr);
    free(mi.below);
    if (rc)
        return rc;
    for (size_t i = 0; i < rec->nsegev; i++)
        maps += rec->segev[i].action == AS_SNAP_SEG_MAP ? rec->segev[i].size : 0;
    if (maps != inside)
        return 1; /* a range mapped by the trace is gone at the dump */
    size_t nops = 0;
    segop *ops = malloc((p->nsegs + rec->nsegev + 1) * sizeof *ops);
    if (!ops)
        return AS_ENOMEM;
    for (size_t k = 0; k < p->nsegs; k++, nops++)
        ops[nops] = (segop){.addr = p->segs[k].addr, .seq = nops, .seg = k};
    for (size_t i = rec->nsegev; i-- > 0 && !rc;) {
        const as_snap_segev *e = &rec->segev[i];
        if (e->action == AS_SNAP_SEG_MAP)
            continue;
        size_t seg = SIZE_MAX;
        if (e->action == AS_SNAP_SEG_FREE) {
            seg = p->nsegs;
            rc = add_seg(p, (sseg){.addr = e->addr,
                                   .size = e->size,
                                   .stream = e->stream,
                                   .small = e->size == SMALL_SEG});
        }
        ops[nops] = (segop){.addr = e->addr, .seq = nops, .seg = seg};
        nops++;
    }
    if (!rc)
        rc = undo_allocs(p, ops, nops);
    free(ops);
    if (!rc && p->nsegs) /* none: segs may be NULL, which qsort must not get */
        qsort(p->segs, p->nsegs, sizeof *p->segs, cmp_seg);
    return rc;
}

/* The segment holding [addr, addr + size), or NULL. */
static sseg *seg_of(start_pool *p, uint64_t addr, uint64_t size)
{
    size_t lo = 0, hi = p->nsegs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->segs[mid].addr + p->segs[mid].size <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < p->nsegs && p->segs[lo].addr <= addr &&
        addr + size <= p->segs[lo].addr + p->segs[lo].size)
        return &p->segs[lo];
    return NULL;
}

/* The live blocks of the start, placed in their segments (sorted by address), each grown
 * by an unsplit remainder of at most 1 MiB in a large segment. 0, 1 (not rebuilt: why) or
 * < 0. */
static int start_blocks(const as_snapshot_record *rec, const uint32_t *div, start_pool *p,
                        as_check_start *sum)
{
    p->blks = rec->npre ? calloc(rec->npre, sizeof *p->blks) : NULL;
    if (rec->npre && !p->blks)
        return AS_ENOMEM;
    for (size_t k = 0; k < rec->npre; k++) {
        const as_snap_pre *b = &rec->pre[k];
        uint64_t size = b->block ? b->block : as_round_size(b->requested, 512, div);
        sum->sizes_inferred += !b->block;
        sum->from_dump += b->block != 0;
        sum->from_frees += !b->block;
        if (!seg_of(p, b->addr, size)) {
            snprintf(sum->why, sizeof sum->why,
                     "the block at %#" PRIx64 " (allocated before the trace) lies in no "
                     "segment alive at the start",
                     b->addr);
            return 1;
        }
        p->blks[p->nblks++] = (sblk){.addr = b->addr, .size = size, .id = k};
    }
    if (p->nblks) /* none: blks may be NULL, which qsort must not get */
        qsort(p->blks, p->nblks, sizeof *p->blks, cmp_blk);
    for (size_t k = 0; k < p->nblks; k++) {
        sblk *b = &p->blks[k];
        sseg *s = seg_of(p, b->addr, b->size);
        if (s->n == 0)
            s->first = k;
        s->n++;
        uint64_t end = s->addr + s->size;
        uint64_t next = k + 1 < p->nblks && p->blks[k + 1].addr < end ? p->blks[k + 1].addr : end;
        if (next < b->addr + b->size) {
            snprintf(sum->why, sizeof sum->why,
                     "blocks allocated before the trace overlap at %#" PRIx64, next);
            return 1;
        }
        if (!s->small && !s->expandable && next - (b->addr + b->size) <= MIB)
            b->size = next - b->addr; /* an unsplit remainder */
        sum->live++;
        sum->live_bytes += b->size;
    }
    return 0;
}

/* The pool at the start of rec's trace into *p, summarised in *sum. */
static int build_start(const as_snapshot_record *rec, const uint32_t *div, start_pool *p,
                       as_check_start *sum)
{
    memset(sum, 0, sizeof *sum);
    int rc = start_segments(rec, p);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        sum->possible = rec->npre > 0;
        snprintf(sum->why, sizeof sum->why,
                 "its expandable segments were unmapped or split into several ranges, which "
                 "the trace does not let us undo");
        return 0;
    }
    for (size_t i = 0; i < p->nsegs; i++)
        sum->reserved += p->segs[i].size;
    sum->segments = p->nsegs;
    sum->possible = p->nsegs > 0 || rec->npre > 0;
    if (!sum->possible)
        return 0;
    rc = start_blocks(rec, div, p, sum);
    if (rc < 0)
        return rc;
    sum->reconstructed = rc == 0;
    return 0;
}

static void free_start(start_pool *p)
{
    free(p->segs);
    free(p->blks);
    memset(p, 0, sizeof *p);
}

void as_check_start_of(const as_trace_reader *r, as_check_start *out)
{
    const as_snapshot_record *rec = as_trace_reader_snapshot(r);
    start_pool p = {0};
    memset(out, 0, sizeof *out);
    if (rec && build_start(rec, NULL, &p, out) < 0)
        snprintf(out->why, sizeof out->why, "out of host memory");
    free_start(&p);
}

void as_dump_state_of(const as_snapshot_record *rec, as_dump_state *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < rec->nsegs; i++) {
        out->segments++;
        out->small_segments += rec->segs[i].small;
        out->reserved += rec->segs[i].size;
    }
    for (size_t i = 0; i < rec->nblocks; i++) {
        const as_snap_block *b = &rec->blocks[i];
        if (b->state == AS_SNAP_ALLOCATED) {
            /* Before PyTorch 2.0 a block had no requested_size (its history held it): its
             * request is then taken as its size, no internal waste claimed. */
            uint64_t req = b->requested ? b->requested : b->size;
            out->allocated += b->size;
            out->allocated_blocks++;
            out->requested += req;
            out->internal += b->size > req ? b->size - req : 0;
        } else if (b->state == AS_SNAP_PENDING) {
            out->pending += b->size;
            out->pending_blocks++;
        } else {
            out->free_bytes += b->size;
            out->free_blocks++;
            out->largest_free = b->size > out->largest_free ? b->size : out->largest_free;
        }
    }
    out->external = out->free_bytes;
    out->entries = rec->entries;
    out->state_only = rec->entries <= 1;
}

/* ---- the run -------------------------------------------------------------------------- */

typedef struct run {
    const as_policy *pol;
    void *st;
    uint64_t *handles; /* by allocation id */
    uint64_t nids;
    uint64_t *fill; /* the preamble's fillers */
    size_t nfill, capfill;
    uint64_t max_split; /* the spec's, in bytes; UINT64_MAX when off */
    const uint32_t *div;
} run;

/* One preamble request of exactly `size` bytes on `stream`, which must land at `want`:
 * live block `id`, or a filler (id UINT64_MAX). 0, 1 (the layout is not the policy's:
 * why) or < 0. */
static int place(run *r, uint64_t id, uint64_t size, uint64_t stream, uint64_t want,
                 as_check_start *sum)
{
    if (as_round_size(size, 512, r->div) != size) {
        snprintf(sum->why, sizeof sum->why,
                 "a block of %" PRIu64 " B at %#" PRIx64 " is not a size this setting rounds to",
                 size, want);
        return 1;
    }
    as_request rq = {.id = id == UINT64_MAX ? r->nids : id, .size = size, .stream = stream};
    as_block b;
    int rc = r->pol->alloc(r->st, &rq, &b);
    if (rc)
        return rc == AS_POLICY_OOM ? AS_EINVAL : rc;
    if (id != UINT64_MAX) {
        r->handles[id] = b.handle;
    } else {
        if (as_grow((void **)&r->fill, &r->capfill, r->nfill + 1, sizeof *r->fill, 256) < 0)
            return AS_ENOMEM;
        r->fill[r->nfill++] = b.handle;
    }
    if (b.addr != want || b.size != size) {
        snprintf(sum->why, sizeof sum->why,
                 "the policy would not lay out the start pool as recorded (%" PRIu64
                 " B wanted at %#" PRIx64 ", given at %#" PRIx64 ")",
                 size, want, b.addr);
        return 1;
    }
    return 0;
}

/* Fillers for the free gap [from, to) of a segment: pieces the pool takes (at most 1 MiB
 * in a small segment, below max_split_size in a large one). */
static int fill_gap(run *r, const sseg *s, uint64_t from, uint64_t to, as_check_start *sum)
{
    uint64_t piece = s->small ? MIB : r->max_split != UINT64_MAX ? r->max_split - MIB : to - from;
    int rc = 0;
    while (from < to && rc == 0) {
        uint64_t n = to - from < piece ? to - from : piece;
        if (!s->small && to - (from + n) > 0 && to - (from + n) <= MIB)
            n = to - from - 2 * MIB; /* leave the last piece large enough for the pool */
        rc = place(r, UINT64_MAX, n, s->stream, from, sum);
        from += n;
    }
    return rc;
}

/* One start segment through the policy (see the top of the file). */
static int build_segment(run *r, const start_pool *p, const sseg *s, as_check_start *sum)
{
    int rc;
    if (s->expandable && (r->max_split != UINT64_MAX || s->small)) {
        if (r->max_split != UINT64_MAX) {
            snprintf(sum->why, sizeof sum->why,
                     "expandable segments with max_split_size are not rebuilt");
            return 1;
        }
        /* small: pieces of at most 1 MiB map its pages as they go (below) */
    } else if (!s->small) { /* a request of its own size makes it (maps its pages, when
                               expandable); freed, it is one free block */
        if (r->max_split != UINT64_MAX && s->size >= r->max_split) {
            if (s->n == 0 || (s->n == 1 && p->blks[s->first].addr == s->addr &&
                              p->blks[s->first].size == s->size))
                return place(r, s->n ? p->blks[s->first].id : UINT64_MAX, s->size, s->stream,
                             s->addr, sum);
            snprintf(sum->why, sizeof sum->why, "an oversize segment at %#" PRIx64 " is split",
                     s->addr);
            return 1;
        }
        if ((rc = place(r, UINT64_MAX, s->size, s->stream, s->addr, sum)))
            return rc;
        if ((rc = r->pol->free(r->st, r->fill[--r->nfill], AS_FREE_COMPLETE)))
            return rc;
    }
    uint64_t pos = s->addr;
    for (size_t k = s->first; k < s->first + s->n; k++) {
        const sblk *b = &p->blks[k];
        if ((rc = fill_gap(r, s, pos, b->addr, sum)) ||
            (rc = place(r, b->id, b->size, s->stream, b->addr, sum)))
            return rc;
        pos = b->addr + b->size;
    }
    return fill_gap(r, s, pos, s->addr + s->size, sum);
}

/* The preamble: every start segment in address order, then the fillers freed. */
static int preamble(run *r, const start_pool *p, as_check_start *sum)
{
    int rc = 0;
    for (size_t i = 0; i < p->nsegs && rc == 0; i++)
        rc = build_segment(r, p, &p->segs[i], sum);
    while (rc == 0 && r->nfill)
        rc = r->pol->free(r->st, r->fill[--r->nfill], AS_FREE_COMPLETE);
    return rc;
}

typedef struct evbuf {
    const as_event *ev; /* own, or a pass's (as_check_events) */
    as_event *own;
    size_t n, cap;
    uint64_t allocs;
} evbuf;

static int load_events(as_trace_reader *rd, evbuf *eb, as_trace_error *err)
{
    as_event e;
    int rc;
    while ((rc = as_trace_next(rd, &e)) == 0) {
        if (e.op == AS_OP_MARK)
            continue; /* labels are not needed, and their text does not outlive the read */
        if (as_grow((void **)&eb->own, &eb->cap, eb->n + 1, sizeof *eb->own, 4096) < 0)
            return AS_ENOMEM;
        eb->own[eb->n++] = e;
        eb->ev = eb->own;
        eb->allocs += e.op == AS_OP_ALLOC;
    }
    if (rc != AS_TRACE_EOF) {
        *err = *as_trace_reader_error(rd);
        return rc;
    }
    return 0;
}

/* The trace through the policy from event `from` (the prehistoric ALLOCs before it were
 * the preamble's), ALLOCs counted from `from` too; stops at the first OOM. */
static int replay(run *r, as_recdev *d, const evbuf *eb, size_t from, uint64_t *oom)
{
    uint64_t k = from;
    *oom = UINT64_MAX;
    for (size_t i = from; i < eb->n; i++) {
        const as_event *e = &eb->ev[i];
        int rc = 0;
        as_recdev_at(d, k);
        if (e->op == AS_OP_ALLOC) {
            as_request rq = {.id = e->id, .size = e->size, .stream = e->stream, .pool = e->pool};
            as_block b;
            rc = r->pol->alloc(r->st, &rq, &b);
            if (rc == AS_POLICY_OOM) {
                *oom = k;
                return 0;
            }
            if (!rc && e->id < r->nids)
                r->handles[e->id] = b.handle;
            k++;
        } else if (e->op == AS_OP_FREE || e->op == AS_OP_FREE_REQ) {
            rc = r->pol->free(r->st, r->handles[e->id],
                              e->op == AS_OP_FREE_REQ ? AS_FREE_PENDING : AS_FREE_COMPLETE);
        } else if (e->op == AS_OP_EMPTY_CACHE && e->pool && r->pol->empty_pool) {
            rc = r->pol->empty_pool(r->st, e->pool);
        } else if (e->op == AS_OP_EMPTY_CACHE && !e->pool && r->pol->empty_cache) {
            rc = r->pol->empty_cache(r->st);
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- comparing, and why it differs ------------------------------------------------------ */

static void compare(const as_snapshot_record *rec, const as_recdev *d, uint64_t start_reserved,
                    as_check_result *out)
{
    size_t ngot;
    const as_recdev_ev *got = as_recdev_events(d, &ngot);
    out->recorded = rec->nsegev;
    out->simulated = ngot;
    out->first_diff = SIZE_MAX;
    uint64_t res = start_reserved;
    out->rec_peak = res;
    for (size_t i = 0; i < rec->nsegev; i++) {
        const as_snap_segev *e = &rec->segev[i];
        int grow = e->action == AS_SNAP_SEG_ALLOC || e->action == AS_SNAP_SEG_MAP;
        res = grow ? res + e->size : res - e->size;
        if (res > out->rec_peak)
            out->rec_peak = res;
    }
    size_t n = rec->nsegev > ngot ? rec->nsegev : ngot;
    for (size_t i = 0; i < n; i++) {
        const as_snap_segev *e = i < rec->nsegev ? &rec->segev[i] : NULL;
        const as_check_ev *g = i < ngot ? &got[i] : NULL;
        if (e && g && e->alloc == g->alloc && e->action == g->action && e->addr == g->addr &&
            e->size == g->size)
            continue;
        out->first_diff = i;
        out->have_rec = e != NULL;
        out->have_sim = g != NULL;
        if (e)
            out->rec = (as_check_ev){e->alloc, e->addr, e->size, e->action};
        if (g)
            out->sim = *g;
        break;
    }
    out->sim_peak = as_recdev_peak(d);
    out->reproduced = out->first_diff == SIZE_MAX && out->oom_alloc == UINT64_MAX &&
                      out->rec_peak == out->sim_peak;
}

/* The likeliest cause of a difference, from what the snapshot holds. */
static void explain(const as_snapshot_record *rec, const as_meta *m, as_check_result *out)
{
    const char *ooms = as_meta_get(m, "torch.oom_entries");
    if (rec->pool_ambiguous)
        snprintf(out->why, sizeof out->why,
                 "%" PRIu64 " allocation%s lay in segments freed before the dump on a stream "
                 "with none alive there, so the snapshot does not say if a private pool (CUDA "
                 "graph, MemPool) served them; simulated in the default pool",
                 rec->pool_ambiguous, rec->pool_ambiguous == 1 ? "" : "s");
    else if (out->start.possible && !out->start.reconstructed)
        snprintf(out->why, sizeof out->why, "the pool at the trace's start was not rebuilt: %s",
                 out->start.why);
    else if (ooms && strcmp(ooms, "0") != 0)
        snprintf(out->why, sizeof out->why,
                 "the recorded run survived %s OOM%s (oom entries) that the simulation does not "
                 "model",
                 ooms, strcmp(ooms, "1") ? "s" : "");
    else if (out->oom_alloc != UINT64_MAX)
        snprintf(out->why, sizeof out->why,
                 "the simulation ran out of memory at allocation %" PRIu64
                 " under the recorded memory fraction",
                 out->oom_alloc);
    else if (out->have_rec && out->rec.action == AS_DEV_SEGMENT_FREE &&
             (!out->have_sim || out->sim.alloc != out->rec.alloc))
        snprintf(out->why, sizeof out->why,
                 "the recorded run freed a cached segment the simulation kept (an empty_cache() "
                 "call, which a snapshot does not record as such)");
    else
        snprintf(out->why, sizeof out->why,
                 "allocsim's torch decided otherwise at this allocation (a PyTorch version "
                 "whose allocator differs from 2.11, or a difference in allocsim)");
}

/* ---- as_check ----------------------------------------------------------------------------- */

static int setup(const as_meta *m, as_policy_spec *spec, uint64_t *cap, as_check_result *out,
                 as_trace_error *err)
{
    double fraction;
    char why[240];
    if (as_recorded_setting(m, out->spec, sizeof out->spec, &fraction, why, sizeof why) ||
        as_policy_spec_parse(out->spec, spec, why, sizeof why)) {
        snprintf(err->msg, sizeof err->msg, "%s", why);
        return AS_EINVAL;
    }
    *cap = fraction > 0 ? (uint64_t)llround(fraction * (double)H200_TOTAL) : AS_CAPACITY_NONE;
    return 0;
}

/* Runs the trace (already in eb) from the start pool p through spec on device d. */
static int simulate(const as_policy_spec *spec, const as_snapshot_record *rec, start_pool *p,
                    const evbuf *eb, as_recdev *d, as_check_result *out)
{
    const as_policy *pol = spec->policy;
    run r = {.pol = pol, .nids = eb->allocs + 1, .max_split = UINT64_MAX};
    for (size_t k = 0; k < pol->n_knobs; k++) {
        if (!strcmp(pol->knobs[k].name, "maxsplit") && spec->values[k].i > 0)
            r.max_split = (uint64_t)spec->values[k].i * MIB;
        if (!strcmp(pol->knobs[k].name, "roundup"))
            r.div = spec->values[k].div;
    }
    r.st = calloc(1, pol->state_size);
    r.handles = calloc(r.nids, sizeof *r.handles);
    as_device dev = as_recdev_device(d);
    int rc = !r.st || !r.handles ? AS_ENOMEM : pol->init(r.st, spec->values, &dev);
    if (rc) {
        free(r.st);
        free(r.handles);
        return rc < 0 ? rc : AS_EINVAL;
    }
    size_t from = 0;
    if (out->start.reconstructed) {
        rc = preamble(&r, p, &out->start);
        if (rc == 1) { /* not the policy's layout: start from nothing, and say so */
            out->start.reconstructed = 0;
            pol->fini(r.st);
            memset(r.st, 0, pol->state_size);
            as_recdev_restart(d);
            rc = pol->init(r.st, spec->values, &dev);
        } else {
            from = rec->npre; /* the prehistoric ALLOCs are the preamble's live blocks */
        }
    }
    as_recdev_log(d, 1);
    if (rc == 0)
        rc = replay(&r, d, eb, from, &out->oom_alloc);
    as_recdev_log(d, 0);
    pol->fini(r.st);
    free(r.st);
    free(r.handles);
    free(r.fill);
    return rc < 0 ? rc : 0;
}

/* as_check on rd (path names it), the events from events[0..nev) (MARKs left out: a pass
 * that read them) or, when events is NULL, read from rd. */
static int check_on(as_trace_reader *rd, const char *path, const as_event *events, size_t nev,
                    as_check_result *out, as_trace_error *err)
{
    as_policy_spec spec = {0};
    start_pool p = {0};
    evbuf eb = {0};
    uint64_t *addrs = NULL;
    as_recdev *d = NULL;
    uint64_t capacity = AS_CAPACITY_NONE;
    int rc;
    memset(out, 0, sizeof *out);
    out->oom_alloc = UINT64_MAX;
    const as_snapshot_record *rec = as_trace_reader_snapshot(rd);
    const as_meta *m = as_trace_reader_meta(rd);
    snprintf(err->path, sizeof err->path, "%s", path);
    err->offset = err->event = UINT64_MAX;
    err->line = 0;
    if (!rec || (rc = setup(m, &spec, &capacity, out, err))) {
        if (!rec)
            snprintf(err->msg, sizeof err->msg,
                     "not a torch snapshot: only a snapshot records the run to check against");
        rc = AS_EINVAL;
        goto out;
    }
    if (rec->nsegev == 0) {
        snprintf(err->msg, sizeof err->msg,
                 "the snapshot's trace has no segment entries to check against (record with "
                 "torch.cuda.memory._record_memory_history(max_entries=...) before the job "
                 "allocates its memory)");
        rc = AS_EINVAL;
        goto out;
    }
    size_t divk = 0;
    while (divk < spec.policy->n_knobs && strcmp(spec.policy->knobs[divk].name, "roundup"))
        divk++;
    const uint32_t *div = divk < spec.policy->n_knobs ? spec.values[divk].div : NULL;
    if ((rc = build_start(rec, div, &p, &out->start)) < 0 ||
        (!events && (rc = load_events(rd, &eb, err))))
        goto out;
    if (events) { /* borrowed: the pass's */
        for (size_t i = 0; i < nev; i++)
            eb.allocs += events[i].op == AS_OP_ALLOC;
        eb.ev = events;
        eb.n = nev;
    }
    addrs = malloc((2 * p.nsegs + 1) * sizeof *addrs);
    if (!addrs) {
        rc = AS_ENOMEM;
        goto out;
    }
    uint64_t top = 0;
    size_t nva = 0, nmalloc = 0; /* cudaMalloc addresses first, expandable bases after */
    for (size_t i = 0; i < p.nsegs; i++)
        if (!p.segs[i].expandable)
            addrs[nmalloc++] = p.segs[i].addr;
    for (size_t i = 0; i < p.nsegs; i++)
        if (p.segs[i].expandable)
            addrs[nmalloc + nva++] = p.segs[i].addr;
    for (size_t i = 0; i < rec->nsegs; i++) /* the recorded events' ranges: the device's */
        if (rec->segs[i].addr + rec->segs[i].size > top)
            top = rec->segs[i].addr + rec->segs[i].size;
    as_recdev_opts o = {.want = rec->segev,
                        .n = rec->nsegev,
                        .start_addr = addrs,
                        .nstart = out->start.reconstructed ? nmalloc : 0,
                        .start_va = addrs + nmalloc,
                        .nstart_va = out->start.reconstructed ? nva : 0,
                        .capacity = capacity,
                        .above = top};
    if ((rc = as_recdev_create(&o, &d)) || (rc = simulate(&spec, rec, &p, &eb, d, out)))
        goto out;
    uint64_t start_res = 0; /* what the trace's segment entries do not explain */
    for (size_t i = 0; i < rec->nsegs; i++)
        start_res += rec->segs[i].size;
    for (size_t i = 0; i < rec->nsegev; i++) {
        int grow =
            rec->segev[i].action == AS_SNAP_SEG_ALLOC || rec->segev[i].action == AS_SNAP_SEG_MAP;
        start_res = grow ? start_res - rec->segev[i].size : start_res + rec->segev[i].size;
    }
    compare(rec, d, start_res, out);
    if (!out->reproduced)
        explain(rec, m, out);
out:
    free(addrs);
    as_recdev_destroy(d);
    free(eb.own);
    free_start(&p);
    as_policy_spec_free(&spec);
    return rc < 0 ? rc : 0;
}

int as_check(const char *path, const as_reader_opts *opts, as_check_result *out,
             as_trace_error *err)
{
    as_trace_reader *rd = NULL;
    int rc = as_trace_open(path, opts, &rd, err);
    if (rc < 0) {
        memset(out, 0, sizeof *out);
        out->oom_alloc = UINT64_MAX;
        return rc;
    }
    rc = check_on(rd, path, NULL, 0, out, err);
    as_trace_close(rd);
    return rc;
}

int as_check_events(as_trace_reader *rd, const char *path, const as_event *ev, size_t n,
                    as_check_result *out, as_trace_error *err)
{
    static const as_event none;
    return check_on(rd, path, ev ? ev : &none, ev ? n : 0, out, err);
}

/* ---- the line -------------------------------------------------------------------------- */

static const char *act(int a)
{
    return as_dev_action_name((as_dev_action)a);
}

void as_check_line(const as_check_result *r, char *buf, size_t n)
{
    char start[200] = "";
    if (r->start.reconstructed)
        snprintf(start, sizeof start,
                 ", from the pool rebuilt at the trace's start (%" PRIu64 " segments, %" PRIu64
                 " blocks live)",
                 r->start.segments, r->start.live);
    if (r->reproduced) {
        snprintf(buf, n,
                 "reproduced: all %zu segment events at their recorded addresses and the peak "
                 "reserved (%" PRIu64 " B) under the recorded setting (%s)%s",
                 r->recorded, r->rec_peak, r->spec, start);
        return;
    }
    char rec[120] = "none", sim[120] = "none";
    if (r->have_rec)
        snprintf(rec, sizeof rec, "%s of %" PRIu64 " B at %#" PRIx64 " (allocation %" PRIu64 ")",
                 act(r->rec.action), r->rec.size, r->rec.addr, r->rec.alloc);
    if (r->have_sim)
        snprintf(sim, sizeof sim, "%s of %" PRIu64 " B at %#" PRIx64 " (allocation %" PRIu64 ")",
                 act(r->sim.action), r->sim.size, r->sim.addr, r->sim.alloc);
    if (r->first_diff == SIZE_MAX) {
        snprintf(buf, n,
                 "differs: the %zu segment events match, but peak reserved %" PRIu64
                 " B was recorded and %" PRIu64 " B simulated (%s); what-if peaks are not "
                 "checked against this recording",
                 r->recorded, r->rec_peak, r->sim_peak, r->why);
        return;
    }
    uint64_t at = r->have_rec ? r->rec.alloc : r->sim.alloc;
    if (r->have_rec && r->have_sim && r->sim.alloc < at)
        at = r->sim.alloc;
    snprintf(buf, n,
             "differs at segment event %zu of %zu: recorded %s, simulated %s, under the "
             "recorded setting (%s)%s; %s; what-if results past allocation %" PRIu64
             " are not checked against this recording",
             r->first_diff, r->recorded, rec, sim, r->spec, start, r->why, at);
}
