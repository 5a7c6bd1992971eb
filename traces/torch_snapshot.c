/*
 * torch_snapshot.c - decoder for torch.cuda.memory._dump_snapshot() pickles (as_src_torch).
 *
 * The pickle streams (pickle.c's as_pk_stream): entries of device_traces are turned into
 * events as they are decompressed, and only the rest (segments, allocator_settings) is kept
 * as a tree. Prehistoric blocks (below) come first in the event stream but are known only
 * at the end, and so is the metadata, so open() reads the whole pickle once, logging the
 * events (snap_events.c: fixed records, past a chunk in an unlinked temporary file), and
 * hands them out from the log; with max_pickle_buffered set, a longer trace is read a
 * second time instead (a file: a pipe cannot be) and events are produced as that pass
 * goes. Memory: the address map (a slot per block live or pending, and freed ones until
 * the table fills: at most 4,096 slots or four per block live at once), 8 bytes for every
 * distinct address freed (a free there later is a double free, not a prehistoric block:
 * addr_set), the dump's state, the memo, and one chunk of the log. The walk charges every
 * dict item it visits against a budget of 64 per input byte, since memo references can
 * make a small pickle describe a huge structure.
 *
 * Mapping, for device_traces[d]: d is the device the reader was asked for (as_reader_opts
 * device_set/device), else the one device with a non-empty trace; a snapshot tracing several
 * is refused with the list of its devices and their entry counts (pick_device).
 *   alloc          -> ALLOC (the entry's unrounded size, the raw cudaStream_t value, and
 *                     its `frames` as a call site of the reader's site table);
 *   free_requested -> FREE when the next alloc/free_requested/free_completed entry of the
 *                     trace is the free_completed of the same address (the free had no
 *                     pending stream use, or completed before anything else happened: the
 *                     allocator sees the same thing), else FREE_REQ, and the later
 *                     free_completed -> FREE;
 *   free_completed -> FREE (one without a free_requested, e.g. recorded with
 *                     skip_actions=["free_requested"], is a plain FREE);
 *   segment_*, snapshot, oom, annotate and unknown actions -> no event (counted in meta);
 *   a change of an entry's user_metadata -> MARK "user_metadata=VALUE" before its event;
 *   external_annotations of the device -> MARKs "START name"/"END name", merged by time.
 * (Frames, user metadata and annotations: their own section below, and FORMAT.md.)
 * Live addresses map to allocation ordinals; an address is reused once freed. So a trace
 * whose frees are all immediate has allocs + free_completed events, and one with deferred
 * frees has more (one FREE_REQ per deferred free), but fewer than its entry count.
 *
 * Blocks allocated before recording began (or before the ring buffer wrapped) are
 * "prehistoric": a free of an address the trace never allocated, or a block active in the
 * final `segments` that the trace never touched. They become ALLOCs at the start, ordered by
 * address, and meta prehistoric_allocs=P says so: the trace's own k-th `alloc` entry is
 * allocation ordinal P + k.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live.h"
#include "pickle.h"
#include "snap_events.h"
#include "source.h"
#include "trace.h"
#include "trace_internal.h"

enum { ACT_ALLOC, ACT_FREE_REQ, ACT_FREE_DONE, ACT_OTHER };

/* Actions counted for the metadata, in the order they are written. */
static const char *const act_names[] = {
    "alloc",       "free_requested", "free_completed", "segment_alloc", "segment_free",
    "segment_map", "segment_unmap",  "snapshot",       "oom",           "annotate",
};
#define N_ACT_NAMES (sizeof act_names / sizeof act_names[0])
enum { NAME_SEG_ALLOC = 3, NAME_SEG_FREE, NAME_SEG_MAP, NAME_SEG_UNMAP, NAME_SNAPSHOT, NAME_OOM };

/* One alloc/free entry of the chosen device's trace. */
typedef struct snap_entry {
    uint64_t addr, size, stream;
    int64_t time_us;
    uint64_t off;   /* byte offset of the entry's dict, for messages */
    uint64_t index; /* position in device_traces[d] */
    uint8_t act;
    uint8_t has_size;
    uint32_t site;         /* alloc: its call site (frames), 0 = none */
    uint32_t umark;        /* a user_metadata MARK to emit before it: label offset + 1, 0 = none */
    uint32_t empty_before; /* the run of segment_free entries (snap_build.empty_inferred)
                              whose EMPTY_CACHE events come before it, 0 = none */
} snap_entry;

/* MARK labels, NUL-terminated, back to back. */
typedef struct label_pool {
    char *p;
    size_t n, cap;
} label_pool;

/* An external annotation of the chosen device, a MARK at its time. */
typedef struct snap_ann {
    int64_t time_us;
    size_t label; /* offset in the annotation pool */
    size_t order; /* position in external_annotations (ties keep it) */
} snap_ann;

typedef struct pre_block {
    uint64_t addr, size, stream;
    uint64_t blk; /* its block's size at the dump when live there, else 0 */
    uint32_t idx; /* order of discovery, the provisional id */
} pre_block;

/* Address -> allocation state, open addressing with linear probing. A freed block's slot
 * stays (ST_FREED: a free there is a second free, not a prehistoric block) until the table
 * fills: then its address moves to the freed set (addr_set) and the slot is deleted, so the
 * table has at most 4,096 slots or four per block live, pending or skipped at once
 * (map_make_room), and a free costs nothing more than before. */
enum { ST_EMPTY = 0, ST_LIVE, ST_PENDING, ST_FREED, ST_SKIPPED };
typedef struct addr_slot {
    uint64_t addr;
    uint64_t id; /* trace ordinal, or prehistoric index when pre */
    uint64_t size, stream;
    uint32_t entry; /* device_traces index of the alloc (for messages) */
    uint8_t state;
    uint8_t pre;
} addr_slot;

/* Addresses the trace freed whose slots were deleted: 8 bytes an address, not a slot's 40.
 * It must know them all, whatever their number: a free of any of them, or a block active
 * there at the dump, means something else than at an address never seen (a second free, a
 * mismatch, not a prehistoric block). Open addressing; key 0 is the empty mark (has0: the
 * address 0). */
typedef struct addr_set {
    uint64_t *keys;
    size_t cap, used;
    int has0;
} addr_set;

typedef struct addr_map {
    addr_slot *slots;
    size_t cap, used;
    addr_set freed;
} addr_map;

/* Events handed out at a time from the first pass's log (snap_events.c). */
#define SNAP_QUEUE 256

typedef struct snap_build snap_build;

/* frame dict -> frame number, and frames list -> site, by ref: an interned ref always names
 * the same value, an arena ref until the parser's generation changes. A slot holds its
 * generation + 1 (an interned ref's, UINT64_MAX, wraps to 0), so the zeroed slot of calloc
 * matches no lookup: an arena ref's stored generation is at least 1, and an interned ref is
 * never 0. */
#define REF_CACHE 1024
typedef struct ref_slot_t {
    uint64_t gen1;
    as_pk_ref ref;
    uint32_t val;
} ref_slot_t;
typedef struct ref_cache {
    ref_slot_t s[REF_CACHE];
} ref_cache;

typedef struct snap_state {
    snap_ev *ev; /* a queue of the next few events (two passes: the build's) */
    size_t nev, pos;
    /* one pass: the log of its events, handed out after the prehistoric ALLOCs (pre, by
     * address), ids final through rank (a prehistoric block's discovery index -> its id) */
    as_evlog *log;
    pre_block *pre;
    size_t npre;
    uint64_t *rank;
    int64_t t0;
    as_instream *in; /* for messages */
    uint64_t warnings;
    snap_build *b;          /* two passes: the second one, reading on demand */
    size_t pre_out;         /* prehistoric ALLOCs handed out so far */
    as_snapshot_record rec; /* what the snapshot records beside its events */
    uint64_t *how_count[AS_POOL_RELEASE + 1]; /* rec's count of ALLOCs for each AS_POOL_* */
    void *owned[4];         /* rec's arrays */
    as_sites *sites;        /* the call sites, complete after pass 1 */
    label_pool umarks;      /* user_metadata MARK labels (two passes: of the queued events) */
    label_pool ann_pool;    /* annotation labels */
    snap_ann *ann;          /* annotations in time order, merged into the events as MARKs */
    size_t nann, ann_pos;
    int ended;            /* the trace's events are all out (annotations may remain) */
    as_snap_pools *pools; /* which pool served each ALLOC (snap_pools.c) */
    size_t sub;           /* events of the current EMPTY_CACHE's run handed out so far */
    uint64_t last_off;    /* the input's offset before the last event of a batch was made */
} snap_state;

/* Everything the conversion needs; in one pass it is freed before open returns. */
struct snap_build {
    as_instream *in;
    as_trace_error *err;
    as_pk_stream *ps;
    const as_pk *pk;
    int lenient;
    int pass; /* 1: counting (and buffering while the events fit); 2: emitting */
    unsigned device;
    int chosen;   /* the device whose entries are read: the first with any, -1 before */
    int want_set; /* the caller named the device (as_reader_opts.device_set) */
    unsigned want;
    uint64_t *dev_entries; /* pass 1: trace entries per device_traces index */
    size_t ndev_entries, capdev;
    unsigned ndevices; /* lists in device_traces */
    /* Pass 1's record (as_snapshot_record): the device's segment entries, its segments and
     * blocks at the dump. alloc_entries counts the alloc entries read so far. */
    as_snap_segev *segev;
    size_t nsegev, capsegev;
    as_snap_seg *segs;
    size_t nsegs, capsegs;
    as_snap_block *blocks;
    size_t nblocks, capblocks;
    uint64_t alloc_entries, entries;
    snap_entry ent[2]; /* ent[ci]: the alloc/free entry waiting for the next one (free */
    unsigned ci;       /* pairing), when have_cur; the next one is read into the other */
    int have_cur;
    /* Keys and action names are mostly shared (memoized) strings, so the same few refs come
     * back for every entry: remember what each means instead of comparing strings. */
    as_pk_ref cache_ref[256]; /* AS_PK_NIL = empty */
    int8_t cache_val[256];
    uint8_t cache_key[256];
    uint64_t cache_gen;
    uint64_t act_count[N_ACT_NAMES], unknown_actions;
    /* oom entries since the last alloc, and those an alloc followed: OOMs the program
     * caught and survived (a cuDNN workspace's; sim/caught.h) */
    uint64_t oom_open, oom_caught;
    uint64_t seg_grow, seg_shrink; /* bytes by segment_alloc/map and segment_free/unmap */
    /* A run of segment_free/unmap entries is an empty_cache() call (the only release
     * without memory pressure: torch.cuda.graph makes one when a capture begins): its
     * EMPTY_CACHE goes before the next alloc/free entry, or at the end. */
    uint8_t in_release;
    uint32_t empty_pending; /* the run whose events go before the next alloc/free entry */
    uint64_t empty_inferred;
    snap_ev *ev; /* pass 2: the queue of events made by the entries read */
    size_t nev, capev;
    as_evlog *log;         /* pass 1: its events (provisional ids) */
    int overflow;          /* pass 1 stopped logging: a second pass will emit */
    uint64_t buffer_max;   /* events pass 1 may keep (the option; else no limit) */
    uint64_t emitted;      /* events of the trace (pass 1 counts them, pass 2 checks) */
    uint64_t pass2_events; /* pass 1's count, which pass 2 must reach */
    int64_t t0;            /* time of the first trace event (the prehistoric ALLOCs take it) */
    pre_block *pre;
    size_t npre, cappre;
    addr_map map;
    uint64_t ntrace_allocs, deferred, warnings, mismatch;
    /* Work bound: dict pairs visited, against 64 per input byte read. Shared (memoized)
     * dicts could otherwise make a small crafted pickle cost quadratic time; real snapshots
     * visit each dict once. */
    uint64_t work, budget;
    /* frames and user metadata (the state's tables, written by both passes) */
    as_sites *sites;
    label_pool *umarks;
    ref_cache *fcache, *scache; /* allocated with the first frames list (ref_caches) */
    char umeta[AS_MAX_LABEL + 1]; /* the user_metadata in force ("" = none) */
    as_pk_ref umeta_ref;          /* an interned string holding it, or AS_PK_NIL */
    uint64_t allocs_framed, frames_cut, frames_lost;
};

/* ---- small helpers -------------------------------------------------------------------- */

/* as_grow (instream.c), starting at 256 items */
static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    return as_grow(arr, cap, need, elem, 256);
}

/* Fails with the byte offset of the pickle value at fault (UINT64_MAX when none). */
static int bfail(snap_build *b, int code, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int bfail(snap_build *b, int code, uint64_t off, const char *fmt, ...)
{
    char msg[224];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int rc = as_instream_fail(b->in, b->err, code, "%s", msg);
    if (b->err)
        b->err->offset = off;
    return rc;
}

static int oom(snap_build *b)
{
    return bfail(b, AS_ENOMEM, UINT64_MAX, "out of host memory importing the snapshot");
}

/* The home slot of addr in a table of cap (a power of two) slots: Fibonacci hashing, the
 * product's top bits (block addresses differ in their middle bits: all of them mix into
 * the top ones), where a full 64-bit mix cost a dozen instructions an event more. Only a
 * count walks the table, so its order is free. */
static inline size_t addr_home(uint64_t addr, size_t cap)
{
    return (size_t)((addr * 0x9E3779B97F4A7C15ull) >> (64 - __builtin_ctzll(cap)));
}

static int set_has(const addr_set *f, uint64_t addr)
{
    if (!addr)
        return f->has0;
    if (!f->cap)
        return 0;
    size_t j = addr_home(addr, f->cap);
    while (f->keys[j] && f->keys[j] != addr)
        j = (j + 1) & (f->cap - 1);
    return f->keys[j] != 0;
}

/* Adds addr; 0 or -1 (host OOM). */
static int set_add(addr_set *f, uint64_t addr)
{
    if (!addr) {
        f->has0 = 1;
        return 0;
    }
    if ((f->used + 1) * 4 > f->cap * 3) {
        size_t nc = f->cap ? f->cap * 2 : 512;
        uint64_t *nk = calloc(nc, sizeof *nk);
        if (!nk)
            return -1;
        for (size_t i = 0; i < f->cap; i++) {
            if (!f->keys[i])
                continue;
            size_t j = addr_home(f->keys[i], nc);
            while (nk[j])
                j = (j + 1) & (nc - 1);
            nk[j] = f->keys[i];
        }
        free(f->keys);
        f->keys = nk;
        f->cap = nc;
    }
    size_t j = addr_home(addr, f->cap);
    while (f->keys[j] && f->keys[j] != addr)
        j = (j + 1) & (f->cap - 1);
    if (!f->keys[j]) {
        f->keys[j] = addr;
        f->used++;
    }
    return 0;
}

/* Deletes slot i by backward shift: each later slot of its run that may move back (its home
 * is not between the hole and itself) fills the hole, so no lookup meets a gap. */
static void map_delete(addr_map *m, size_t i)
{
    size_t mask = m->cap - 1;
    for (size_t j = (i + 1) & mask; m->slots[j].state != ST_EMPTY; j = (j + 1) & mask) {
        size_t h = addr_home(m->slots[j].addr, m->cap);
        if (((j - h) & mask) >= ((j - i) & mask)) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i] = (addr_slot){0};
    m->used--;
}

/* A full table: twice the size, or the same when at most half its slots hold other blocks
 * than freed ones; from MAP_PURGE_MIN slots (160 KiB) on, freed blocks' slots are dropped
 * either way, their addresses to the freed set (in place by map_delete when the size stays:
 * no new pages). Below it the table grows as it always did: a trace that reuses its few
 * thousand addresses (every shipped one) never pays for a clean-up, and at least a quarter
 * of the table is free after one, so its walks cost a few slots an insertion. Out of line:
 * inlined, it cost map_find's lookup about 12 instructions an event. 0 or -1. */
#define MAP_PURGE_MIN 4096
static __attribute__((noinline)) int map_make_room(addr_map *m)
{
    int drop = m->cap >= MAP_PURGE_MIN;
    size_t keep = 0;
    for (size_t i = 0; drop && i < m->cap; i++)
        keep += m->slots[i].state != ST_EMPTY && m->slots[i].state != ST_FREED;
    if (drop && keep * 2 <= m->cap) {
        for (size_t i = 0; i < m->cap;) {
            if (m->slots[i].state != ST_FREED) {
                i++;
                continue;
            }
            if (set_add(&m->freed, m->slots[i].addr))
                return -1;
            map_delete(m, i); /* slot i again: a later one may have moved there */
        }
        return 0;
    }
    size_t nc = m->cap ? m->cap * 2 : 64; /* small first: a short trace's few pages */
    addr_slot *ns = calloc(nc, sizeof *ns);
    if (!ns)
        return -1;
    size_t used = 0;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].state == ST_EMPTY)
            continue;
        if (drop && m->slots[i].state == ST_FREED) {
            if (set_add(&m->freed, m->slots[i].addr)) {
                free(ns);
                return -1;
            }
            continue;
        }
        size_t j = addr_home(m->slots[i].addr, nc);
        while (ns[j].state != ST_EMPTY)
            j = (j + 1) & (nc - 1);
        ns[j] = m->slots[i];
        used++;
    }
    free(m->slots);
    m->slots = ns;
    m->cap = nc;
    m->used = used;
    return 0;
}

static void map_free(addr_map *m)
{
    free(m->slots);
    free(m->freed.keys);
    *m = (addr_map){0};
}

/* The slot of addr: its own, or the empty one where it would go. NULL on host OOM. */
/* The slot of addr in m (cap > 0): its own, or the empty one where it would go. */
static inline addr_slot *map_probe(addr_map *m, uint64_t addr)
{
    size_t j = addr_home(addr, m->cap);
    while (m->slots[j].state != ST_EMPTY && m->slots[j].addr != addr)
        j = (j + 1) & (m->cap - 1);
    return &m->slots[j];
}

static addr_slot *map_find(addr_map *m, uint64_t addr, int insert)
{
    if (insert && (m->used + 1) * 4 > m->cap * 3 && map_make_room(m))
        return NULL;
    if (!m->cap)
        return NULL;
    return map_probe(m, addr);
}

/* The state of s, its slot in m: ST_FREED for an empty slot whose address the trace freed. */
static int map_state(const addr_map *m, const addr_slot *s, uint64_t addr)
{
    return s->state == ST_EMPTY && set_has(&m->freed, addr) ? ST_FREED : s->state;
}

static int map_claim(addr_map *m, addr_slot *s, uint64_t addr)
{
    if (s->state == ST_EMPTY) {
        s->addr = addr;
        m->used++;
    }
    return 0;
}

/* ---- reading the tree ----------------------------------------------------------------- */

/* Charges n units of work; 0 while within the budget (64 per input byte read so far). */
static int charge(snap_build *b, uint64_t n)
{
    b->work += n;
    if (b->work <= b->budget)
        return 0;
    b->budget = 64 * as_pk_stream_offset(b->ps) + (1u << 20);
    return b->work > b->budget;
}

static int over_budget(snap_build *b)
{
    return bfail(b, AS_ENOMEM, UINT64_MAX,
                 "snapshot too repetitive: more than %" PRIu64 " dict items visited (limit)",
                 b->budget);
}

/* as_pk_dict_get, charged; AS_PK_NIL once over the budget (the caller checks). */
static as_pk_ref dget(snap_build *b, as_pk_ref d, const char *key)
{
    if (charge(b, as_pk_len(b->pk, d) + 1))
        return AS_PK_NIL;
    return as_pk_dict_get(b->pk, d, key);
}

/* An int value as a raw 64-bit one (addresses and stream handles): 0, or -1 when r is no
 * int. */
static int val_u64(const as_pk *pk, as_pk_ref r, uint64_t *v)
{
    int64_t x;
    if (as_pk_int(pk, r, &x))
        return -1;
    memcpy(v, &x, sizeof x);
    return 0;
}

/* as_pk_dict_take, charged: 0, or over_budget's error. */
static int take(snap_build *b, as_pk_keys *k, as_pk_ref d, as_pk_ref *vals)
{
    return charge(b, as_pk_dict_take(k, d, vals) + 1) ? over_budget(b) : 0;
}

/* The index of string r among names[0..n), or -1: by length and first byte, then bytes. */
static int which(const as_pk *pk, as_pk_ref r, const char *const *names, int n)
{
    const char *s;
    size_t len;
    if (as_pk_type_of(pk, r) != AS_PK_STR || as_pk_str(pk, r, &s, &len) || len == 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (names[i][0] == s[0] && strlen(names[i]) == len && memcmp(names[i], s, len) == 0)
            return i;
    return -1;
}

/* Entry keys we read, numbered after the action names in the cache's value space. */
static const char *const entry_keys[] = {"action",  "addr",   "size",         "stream",
                                         "time_us", "frames", "user_metadata"};
enum { KEY_ACTION = 0, KEY_ADDR, KEY_SIZE, KEY_STREAM, KEY_TIME, KEY_FRAMES, KEY_UMETA, KEY_OTHER };

/* What string ref r means: as a key (KEY_*) when key, else as an action name (-1 or an
 * act_names index). Cached by ref; the cache is flushed whenever the parser drops values
 * (a ref may then name something else): */
static void cache_check(snap_build *b)
{
    uint64_t gen = b->ps ? as_pk_stream_generation(b->ps) : 0;
    if (gen != b->cache_gen) {
        memset(b->cache_ref, 0xff, sizeof b->cache_ref);
        b->cache_gen = gen;
    }
}

/* (cache_check first, once per entry) */
static inline int lookup(snap_build *b, as_pk_ref r, int key)
{
    size_t slot = ((size_t)r * 2 + (size_t)key) & 255;
    if (r == AS_PK_NIL)
        return key ? KEY_OTHER : -1;
    if (b->cache_ref[slot] == r && b->cache_key[slot] == key)
        return b->cache_val[slot];
    int v;
    if (key) {
        v = which(b->pk, r, entry_keys, KEY_OTHER);
        v = v < 0 ? KEY_OTHER : v;
    } else {
        v = which(b->pk, r, act_names, (int)N_ACT_NAMES);
    }
    b->cache_ref[slot] = r;
    b->cache_val[slot] = (int8_t)v;
    b->cache_key[slot] = (uint8_t)key;
    return v;
}

/* An entry's value as an integer (an int or a bool, as as_pk_int): 0, or -1. */
static inline int val_int(const as_pk_val *v, int64_t *i)
{
    if (v->type != AS_PK_INT && v->type != AS_PK_BOOL)
        return -1;
    *i = v->i;
    return 0;
}

/* A segment_alloc/free/map/unmap entry of the device read, for the record (pass 1); one
 * without integer addr and size is left out. Returns 0 or < 0 (host memory, the work
 * bound). */
static int seg_frames(snap_build *b, as_pk_ref fr, uint64_t *hash, uint8_t *cls);

static int record_segev(snap_build *b, int name, const as_pk_val *addr, const as_pk_val *size,
                        const as_pk_val *stream, as_pk_ref frames)
{
    int64_t a, s, st = 0;
    if (val_int(addr, &a) || val_int(size, &s) || s <= 0)
        return 0;
    val_int(stream, &st);
    uint64_t fh = 0;
    uint8_t fc = 0;
    int rc = seg_frames(b, frames, &fh, &fc);
    if (rc < 0)
        return rc;
    if (grow((void **)&b->segev, &b->capsegev, b->nsegev + 1, sizeof *b->segev))
        return oom(b);
    int release = name == NAME_SEG_FREE || name == NAME_SEG_UNMAP;
    b->segev[b->nsegev++] = (as_snap_segev){.alloc = b->alloc_entries,
                                            .addr = (uint64_t)a,
                                            .size = (uint64_t)s,
                                            .stream = (uint64_t)st,
                                            .fhash = fh,
                                            .run = release ? b->empty_inferred : 0,
                                            .action = (uint8_t)(name - NAME_SEG_ALLOC),
                                            .fcls = fc};
    return 0;
}

static int frames_site(snap_build *b, as_pk_ref fr, uint32_t *site);
static int user_mark(snap_build *b, as_pk_ref um, uint32_t *umark);

/* A value of the tree as an entry's value (as_pk_val). */
static as_pk_val tree_val(const as_pk *pk, as_pk_ref r)
{
    as_pk_val v = {.type = (uint8_t)as_pk_type_of(pk, r), .ref = r};
    as_pk_int(pk, r, &v.i);
    return v;
}

/* Trace entry e of the tree (device_traces[device][index]): its values by KEY_* into f[]
 * (the last one set wins). 1, 0 for one skipped (lenient), or < 0. */
static int tree_pairs(snap_build *b, as_pk_ref e, uint64_t index, as_pk_val *f)
{
    const as_pk *pk = b->pk;
    uint64_t off = as_pk_offset(pk, e);
    if (as_pk_type_of(pk, e) != AS_PK_DICT || as_pk_streamed(pk, e)) {
        if (b->lenient) {
            b->warnings++;
            return 0;
        }
        if (as_pk_streamed(pk, e))
            return bfail(b, AS_EFORMAT, off,
                         "device_traces[%u][%" PRIu64 "] refers back to an earlier entry (a "
                         "memo reference), which is not supported",
                         b->device, index);
        return bfail(b, AS_ECORRUPT, off,
                     "device_traces[%u][%" PRIu64 "] is a %s, not a trace entry dict", b->device,
                     index, as_pk_type_name(as_pk_type_of(pk, e)));
    }
    const as_pk_ref *kv;
    size_t nkv = as_pk_items(pk, e, &kv);
    if (charge(b, (nkv != SIZE_MAX ? nkv / 2 : as_pk_len(pk, e)) + 1))
        return over_budget(b);
    cache_check(b);
    if (nkv != SIZE_MAX) { /* one SETITEMS batch: the common case */
        for (size_t i = 0; i + 1 < nkv; i += 2)
            f[lookup(b, kv[i], 1)] = tree_val(pk, kv[i + 1]);
    } else {
        as_pk_iter it;
        as_pk_ref k, v;
        as_pk_iter_init(&it, pk, e);
        while (as_pk_iter_next_pair(&it, &k, &v))
            f[lookup(b, k, 1)] = tree_val(pk, v);
    }
    return 1;
}

/* The same for an entry the scanner read (pickle_entry.c), whose values come by key
 * (as_pk_stream_keys: entry_keys): *f set to them. (feed_all checked the cache for the
 * batch: no value is dropped while it is handed out.) */
static int scanned_pairs(snap_build *b, const as_pk_entry *pe, const as_pk_val **f)
{
    if (charge(b, pe->n + 1))
        return over_budget(b);
    *f = pe->f;
    return 1;
}

/* The action of an entry: counted, and the run of releases it starts or ends. */
static int entry_action(snap_build *b, const as_pk_val *f, uint64_t off, uint64_t index, int *name)
{
    if (f[KEY_ACTION].type != AS_PK_STR) {
        if (b->lenient) {
            b->warnings++;
            return 0;
        }
        return bfail(b, AS_ECORRUPT, off, "device_traces[%u][%" PRIu64 "] has no 'action' string",
                     b->device, index);
    }
    *name = lookup(b, f[KEY_ACTION].ref, 0);
    if (*name >= 0)
        b->act_count[*name]++;
    else
        b->unknown_actions++;
    if (*name == NAME_OOM)
        b->oom_open++;
    else if (*name == ACT_ALLOC) {
        b->oom_caught += b->oom_open;
        b->oom_open = 0;
    }
    if (*name == NAME_SEG_FREE || *name == NAME_SEG_UNMAP) {
        b->empty_inferred += !b->in_release;
        if (!b->in_release)
            b->empty_pending = (uint32_t)b->empty_inferred;
        b->in_release = 1;
    } else if (*name >= 0 && *name <= NAME_SEG_MAP) {
        b->in_release = 0;
    }
    return 1;
}

/* Reads trace entry e (device_traces[device][index]: tree value e, or when e is AS_PK_NIL
 * the scanner's pe) into *x: 1 for an alloc/free entry, 0 for another (counted) or one
 * skipped (lenient), < 0 on error. */
static int entry_fields(snap_build *b, as_pk_ref e, const as_pk_entry *pe, uint64_t index,
                        snap_entry *x)
{
    as_pk_val tf[KEY_OTHER + 1];
    const as_pk_val *f = tf;
    uint64_t off;
    int rc, name = -1;
    if (e == AS_PK_NIL) {
        off = pe->off;
        rc = scanned_pairs(b, pe, &f);
    } else {
        for (int i = 0; i <= KEY_OTHER; i++)
            tf[i] = (as_pk_val){.type = AS_PK_NONE, .ref = AS_PK_NIL};
        off = as_pk_offset(b->pk, e);
        rc = tree_pairs(b, e, index, tf);
    }
    if (rc <= 0 || (rc = entry_action(b, f, off, index, &name)) <= 0)
        return rc;
    *x = (snap_entry){.off = off, .index = index, .time_us = AS_TIME_NONE};
    x->act = (uint8_t)(name >= 0 && name < 3 ? name : ACT_OTHER);
    const as_pk_val *size = &f[KEY_SIZE];
    int64_t i64;
    if (b->pass == 1) {
        b->entries++;
        b->alloc_entries += name == ACT_ALLOC;
        int rs = name >= NAME_SEG_ALLOC && name <= NAME_SEG_UNMAP
                     ? record_segev(b, name, &f[KEY_ADDR], size, &f[KEY_STREAM], f[KEY_FRAMES].ref)
                     : 0;
        if (rs < 0)
            return rs;
    }
    if ((name >= NAME_SEG_ALLOC && name <= NAME_SEG_UNMAP) && val_int(size, &i64) == 0 && i64 > 0) {
        if (name == NAME_SEG_ALLOC || name == NAME_SEG_MAP)
            b->seg_grow += (uint64_t)i64;
        else
            b->seg_shrink += (uint64_t)i64;
    }
    if (x->act == ACT_OTHER)
        return 0;
    if (val_int(&f[KEY_ADDR], &i64)) {
        if (b->lenient) {
            b->warnings++;
            return 0;
        }
        return bfail(b, AS_ECORRUPT, off,
                     "device_traces[%u][%" PRIu64 "] (%s) has no integer 'addr'", b->device, index,
                     act_names[x->act]);
    }
    x->addr = (uint64_t)i64;
    if (val_int(size, &i64) == 0) {
        x->size = (uint64_t)i64;
        x->has_size = i64 > 0 && (uint64_t)i64 <= AS_MAX_ALLOC_SIZE;
    }
    if (val_int(&f[KEY_STREAM], &i64) == 0)
        x->stream = (uint64_t)i64;
    if (val_int(&f[KEY_TIME], &i64) == 0)
        x->time_us = i64;
    if (x->act == ACT_ALLOC && (rc = frames_site(b, f[KEY_FRAMES].ref, &x->site)) < 0)
        return rc;
    if ((rc = user_mark(b, f[KEY_UMETA].ref, &x->umark)) < 0)
        return rc;
    x->empty_before = b->empty_pending;
    b->empty_pending = 0;
    return 1;
}

/* ---- frames and user metadata -------------------------------------------------------- */

static int label_add(label_pool *lp, const char *s, size_t n, size_t *off)
{
    if (as_grow((void **)&lp->p, &lp->cap, lp->n + n + 1, 1, 4096) < 0)
        return AS_ENOMEM;
    *off = lp->n;
    memcpy(lp->p + lp->n, s, n);
    lp->p[lp->n + n] = 0;
    lp->n += n + 1;
    return 0;
}

/* A pickle string as a C string of at most cap - 1 bytes: NUL bytes become '?', and a
 * longer one is cut at a UTF-8 character boundary. 1 when it was cut, 0, or -1 when r is
 * not a string. */
static int c_string(const as_pk *pk, as_pk_ref r, char *dst, size_t cap)
{
    const char *p;
    size_t n;
    if (as_pk_str(pk, r, &p, &n))
        return -1;
    int cut = n > cap - 1;
    if (cut) {
        n = cap - 1;
        while (n > 0 && ((unsigned char)p[n] & 0xC0) == 0x80)
            n--;
    }
    for (size_t i = 0; i < n; i++)
        dst[i] = p[i] ? p[i] : '?';
    dst[n] = 0;
    return cut;
}

/* The generation a cached ref is valid in: any (UINT64_MAX) for an interned one. */
static uint64_t ref_gen(const snap_build *b, as_pk_ref r)
{
    if (as_pk_interned(b->pk, r))
        return UINT64_MAX;
    return b->ps ? as_pk_stream_generation(b->ps) : 0;
}

static size_t ref_slot(as_pk_ref r)
{
    return ((size_t)r * 0x9E3779B9u >> 7) & (REF_CACHE - 1);
}

/* The frame and site caches, made with the first frames list: 0, or -1 (host memory). A
 * snapshot recorded without stacks never touches their 32 KiB. */
static int ref_caches(snap_build *b)
{
    if (b->fcache)
        return 0;
    if (!(b->fcache = calloc(2, sizeof *b->fcache)))
        return -1;
    b->scache = b->fcache + 1;
    return 0;
}

/* The frame number of frame dict d {filename, line, name} (a missing field reads as "?" or
 * line 0). Python's pickler writes each frame dict once and refers back to it: cached. */
static int frame_of(snap_build *b, as_pk_ref d, uint32_t *fid)
{
    const as_pk *pk = b->pk;
    ref_slot_t *c = &b->fcache->s[ref_slot(d)];
    uint64_t gen1 = ref_gen(b, d) + 1;
    if (c->ref == d && c->gen1 == gen1) {
        *fid = c->val;
        return 0;
    }
    static char file[AS_MAX_FRAME_STR + 1], name[AS_MAX_FRAME_STR + 1];
    int64_t line = 0;
    int c1 = c_string(pk, dget(b, d, "filename"), file, sizeof file);
    int c2 = c_string(pk, dget(b, d, "name"), name, sizeof name);
    if (c1 < 0)
        strcpy(file, "?");
    if (c2 < 0)
        strcpy(name, "?");
    b->frames_cut += (c1 > 0) + (c2 > 0);
    if (as_pk_int(pk, dget(b, d, "line"), &line) || line < 0 || line > UINT32_MAX)
        line = 0;
    if (as_sites_intern_frame(b->sites, &(as_frame){file, name, (uint32_t)line}, fid) < 0)
        return oom(b);
    *c = (ref_slot_t){.gen1 = gen1, .ref = d, .val = *fid};
    return 0;
}

/* An alloc entry's call site from its `frames` list (innermost first, as PyTorch records
 * it); 0 when it has none. A list too deep for AS_MAX_STACK keeps its innermost frames; one
 * the parser could not keep (a memo reference to a list dropped with its batch) counts in
 * torch.frames_lost. */
static int frames_site(snap_build *b, as_pk_ref fr, uint32_t *site)
{
    const as_pk *pk = b->pk;
    *site = 0;
    as_pk_type t = as_pk_type_of(pk, fr);
    if (fr == AS_PK_NIL || (t != AS_PK_LIST && t != AS_PK_TUPLE) || as_pk_len(pk, fr) == 0) {
        b->frames_lost += fr != AS_PK_NIL && as_pk_streamed(pk, fr) == 2;
        return 0;
    }
    if (ref_caches(b))
        return oom(b);
    ref_slot_t *c = &b->scache->s[ref_slot(fr)];
    uint64_t gen1 = ref_gen(b, fr) + 1;
    b->allocs_framed++;
    if (c->ref == fr && c->gen1 == gen1) {
        *site = c->val;
        return 0;
    }
    static uint32_t ids[AS_MAX_STACK];
    size_t n = 0;
    as_pk_iter it;
    as_pk_ref d;
    int rc;
    if (charge(b, as_pk_len(pk, fr)))
        return over_budget(b);
    as_pk_iter_init(&it, pk, fr);
    while (as_pk_iter_next(&it, &d)) {
        if (n == AS_MAX_STACK) {
            b->frames_cut++;
            break;
        }
        if (as_pk_type_of(pk, d) != AS_PK_DICT)
            continue;
        if ((rc = frame_of(b, d, &ids[n])) < 0)
            return rc;
        n++;
    }
    if (as_sites_intern_ids(b->sites, ids, n, site) < 0)
        return oom(b);
    *c = (ref_slot_t){.gen1 = gen1, .ref = fr, .val = *site};
    return 0;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && memcmp(s + n - m, tail, m) == 0;
}

/* What frame f names, as AS_SNAP_FR_* bits. */
static uint8_t frame_class(const as_frame *f)
{
    uint8_t c = 0;
    if (ends_with(f->filename, "cudagraph_trees.py"))
        c |= AS_SNAP_FR_TREES;
    if (ends_with(f->filename, "torch/cuda/graphs.py") && strcmp(f->name, "capture_begin") == 0)
        c |= AS_SNAP_FR_CAPBEGIN;
    if (strstr(f->name, "~MemPool"))
        c |= AS_SNAP_FR_MEMPOOL;
    if (strcmp(f->filename, "<allocsim>") == 0 && strncmp(f->name, "empty_cache(pool=", 17) == 0)
        c |= AS_SNAP_FR_MEMPOOL; /* an export's (sim/snapout.c): a pool emptied alone */
    return c;
}

/* A segment entry's frames: a hash of their content (0 when none) and what they name. Its
 * frames are interned (frame table) but make no site: sites are the ALLOCs' stacks. */
static int seg_frames(snap_build *b, as_pk_ref fr, uint64_t *hash, uint8_t *cls)
{
    const as_pk *pk = b->pk;
    as_pk_type t = as_pk_type_of(pk, fr);
    *hash = 0, *cls = 0;
    if (fr == AS_PK_NIL || (t != AS_PK_LIST && t != AS_PK_TUPLE) || as_pk_len(pk, fr) == 0)
        return 0;
    if (ref_caches(b))
        return oom(b);
    if (charge(b, as_pk_len(pk, fr)))
        return over_budget(b);
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the frame numbers */
    as_pk_iter it;
    as_pk_ref d;
    size_t n = 0;
    as_pk_iter_init(&it, pk, fr);
    while (as_pk_iter_next(&it, &d) && n++ < AS_MAX_STACK) {
        uint32_t fid;
        as_frame f;
        int rc;
        if (as_pk_type_of(pk, d) != AS_PK_DICT)
            continue;
        if ((rc = frame_of(b, d, &fid)) < 0)
            return rc;
        h = (h ^ fid) * 0x100000001b3ull;
        if (as_sites_frame(b->sites, fid, &f) == 0)
            *cls |= frame_class(&f);
    }
    *hash = h ? h : 1;
    return 0;
}

/* An entry's user_metadata (a string the program attaches to what follows; "" = none): when it
 * differs from the one in force, a MARK "user_metadata=VALUE" goes before the entry's event. */
static int user_mark(snap_build *b, as_pk_ref um, uint32_t *umark)
{
    char v[AS_MAX_LABEL + 1 - 14];
    *umark = 0;
    if (um == AS_PK_NIL || um == b->umeta_ref) /* the same interned string as before */
        return 0;
    if (c_string(b->pk, um, v, sizeof v) < 0)
        return 0;
    if (strcmp(v, b->umeta) == 0) {
        b->umeta_ref = as_pk_interned(b->pk, um) ? um : AS_PK_NIL;
        return 0;
    }
    b->umeta_ref = as_pk_interned(b->pk, um) ? um : AS_PK_NIL;
    char label[AS_MAX_LABEL + 1];
    int n = snprintf(label, sizeof label, "user_metadata=%s", v);
    size_t off;
    if (label_add(b->umarks, label, (size_t)n, &off) < 0 || off >= UINT32_MAX)
        return oom(b);
    strcpy(b->umeta, v);
    *umark = (uint32_t)off + 1;
    return 0;
}

/* ---- the address state machine -------------------------------------------------------- */

/* One event of the trace. Pass 1 logs it (ids provisional: a trace ordinal, or a
 * prehistoric discovery index) up to buffer_max, then only counts; pass 2 queues it with
 * its final id (prehistoric blocks were preloaded with theirs). */
static inline __attribute__((always_inline)) int push_ev(snap_build *b, const snap_ev *e)
{
    if (!b->emitted++)
        b->t0 = e->time_us;
    if (b->overflow)
        return 0;
    if (b->pass == 1) {
        if (b->emitted - 1 >= b->buffer_max) { /* (the log holds every event before it) */
            b->overflow = 1;
            as_evlog_free(b->log);
            b->log = NULL;
            return 0;
        }
        int rc = as_evlog_put(b->log, e);
        if (rc == AS_ENOMEM)
            return oom(b);
        return rc ? bfail(b, rc, UINT64_MAX, "cannot write the events' temporary file: %s",
                          strerror(errno))
                  : 0;
    }
    if (grow((void **)&b->ev, &b->capev, b->nev + 1, sizeof *b->ev))
        return oom(b);
    b->ev[b->nev++] = *e;
    return 0;
}

static int emit_site(snap_build *b, as_op op, const addr_slot *s, int64_t t, uint32_t site)
{
    uint64_t id = b->pass == 2 && !s->pre ? s->id + b->npre : s->id;
    snap_ev e = {.op = (uint8_t)op,
                 .id = id,
                 .size = s->size,
                 .stream = s->stream,
                 .time_us = t,
                 .pre = s->pre,
                 .site = site,
                 .addr = s->addr};
    return push_ev(b, &e);
}

static int emit(snap_build *b, as_op op, const addr_slot *s, int64_t t)
{
    return emit_site(b, op, s, t, 0);
}

/* The user_metadata MARK an entry carries (snap_entry.umark), if any. */
static int emit_umark(snap_build *b, const snap_entry *x)
{
    if (!x->umark)
        return 0;
    snap_ev e = {.op = AS_OP_MARK, .id = x->umark - 1, .time_us = x->time_us};
    return push_ev(b, &e);
}

/* The EMPTY_CACHE of run `run`, expanded at hand-out into the events its release stands for
 * (as_snap_pools_run: none for an OOM retry's, and private pools released there). */
static int emit_empty(snap_build *b, uint32_t run)
{
    snap_ev e = {.op = AS_OP_EMPTY_CACHE, .id = run, .time_us = AS_TIME_NONE};
    b->empty_pending = 0;
    return push_ev(b, &e);
}

/* A block freed by the trace that the trace never allocated: allocated before recording. */
static int add_pre(snap_build *b, addr_slot *s, uint64_t addr, uint64_t size, uint64_t stream)
{
    if (grow((void **)&b->pre, &b->cappre, b->npre + 1, sizeof *b->pre))
        return oom(b);
    b->pre[b->npre] =
        (pre_block){.addr = addr, .size = size, .stream = stream, .idx = (uint32_t)b->npre};
    map_claim(&b->map, s, addr);
    s->id = b->npre++;
    s->size = size;
    s->stream = stream;
    s->pre = 1;
    s->state = ST_LIVE;
    s->entry = UINT32_MAX;
    return 0;
}

static const char *where(const snap_build *b, const snap_entry *x, char *buf, size_t n)
{
    snprintf(buf, n, "device_traces[%u][%" PRIu64 "] (%s of 0x%" PRIx64 ")", b->device, x->index,
             act_names[x->act], x->addr);
    return buf;
}

static int bad_entry(snap_build *b, const snap_entry *x, const char *what)
{
    char w[96];
    if (b->lenient) {
        b->warnings++;
        return 1;
    }
    return bfail(b, AS_EINVAL, x->off, "%s: %s", where(b, x, w, sizeof w), what);
}

/* Turns entry x into events. nxt is the next alloc/free entry (NULL at the end); a
 * free_requested that folds with it consumes it: then 1, else 0 or < 0. */
static int step(snap_build *b, const snap_entry *x, const snap_entry *nxt)
{
    int rc;
    addr_slot *s = map_find(&b->map, x->addr, 1);
    if (!s)
        return oom(b);
    if ((rc = emit_umark(b, x)) < 0 ||
        (x->empty_before && (rc = emit_empty(b, x->empty_before)) < 0))
        return rc;
    if (x->act == ACT_ALLOC) {
        if (s->state == ST_LIVE || s->state == ST_PENDING) {
            char m[96];
            if (s->entry == UINT32_MAX)
                snprintf(m, sizeof m,
                         "allocated again while still live (allocated "
                         "before the trace)");
            else
                snprintf(m, sizeof m,
                         "allocated again while still live (allocated by "
                         "entry %" PRIu32 ")",
                         s->entry);
            if ((rc = bad_entry(b, x, m)) < 0)
                return rc;
            /* Lenient: the old block must have been freed unrecorded. */
            if ((rc = emit(b, AS_OP_FREE, s, x->time_us)))
                return rc;
        }
        map_claim(&b->map, s, x->addr);
        if (!x->has_size) {
            if ((rc = bad_entry(b, x, "size missing, zero or absurd")) < 0)
                return rc;
            s->state = ST_SKIPPED;
            return 0;
        }
        *s = (addr_slot){.addr = x->addr,
                         .id = b->ntrace_allocs++,
                         .size = x->size,
                         .stream = x->stream,
                         .entry = x->index < UINT32_MAX ? (uint32_t)x->index : UINT32_MAX - 1,
                         .state = ST_LIVE};
        if ((rc = emit_site(b, AS_OP_ALLOC, s, x->time_us, x->site)))
            return rc;
        return 0;
    }
    /* free_requested / free_completed */
    int state = map_state(&b->map, s, x->addr);
    if (state == ST_SKIPPED)
        return 0; /* its alloc was skipped (lenient): so are its frees */
    if (state == ST_EMPTY) {
        if (!x->has_size) {
            if ((rc = bad_entry(b, x,
                                "frees a block allocated before the trace, without "
                                "a usable size")) < 0)
                return rc;
            return 0;
        }
        if ((rc = add_pre(b, s, x->addr, x->size, x->stream)))
            return rc;
    } else if (state == ST_FREED) {
        if ((rc = bad_entry(b, x, "frees an address that is not allocated (double free)")) < 0)
            return rc;
        return 0;
    }
    if (x->act == ACT_FREE_DONE) {
        s->state = ST_FREED;
        if ((rc = emit(b, AS_OP_FREE, s, x->time_us)))
            return rc;
        return 0;
    }
    if (s->state == ST_PENDING) {
        if ((rc = bad_entry(b, x, "free_requested twice")) < 0)
            return rc;
        return 0;
    }
    if (nxt && nxt->act == ACT_FREE_DONE && nxt->addr == x->addr) {
        s->state = ST_FREED;
        if ((rc = emit(b, AS_OP_FREE, s, x->time_us)) || (rc = emit_umark(b, nxt)))
            return rc;
        return 1; /* the free_completed is folded into this FREE */
    } else {
        s->state = ST_PENDING;
        b->deferred++;
        if ((rc = emit(b, AS_OP_FREE_REQ, s, x->time_us)))
            return rc;
    }
    return 0;
}

/* ---- the common entry's short path ------------------------------------------------------
 * A scanned alloc, free_requested or free_completed entry whose values are what real
 * snapshots hold (integers, no change of user_metadata, within the work bound), and its
 * event when the address is in the state it should be: the same effects as entry_fields
 * and step, in the same order, with the log's record written straight from the address
 * slot (entry_fields' generality, snap_ev's copy and push_ev's checks cost about a third of
 * the importer: sim/README.md, Snapshot import). Anything else is declined before any
 * effect and goes the general way. */
#define FAST_NO 2

/* entry_fields of scanned entry pe: 1 with *x filled, FAST_NO (nothing done), or < 0. */
static inline int entry_fast(snap_build *b, const as_pk_entry *pe, uint64_t index, snap_entry *x)
{
    const as_pk_val *f = pe->f;
    as_pk_ref act = f[KEY_ACTION].ref;
    size_t slot = ((size_t)act * 2) & 255; /* lookup's, as an action name */
    if (f[KEY_ACTION].type != AS_PK_STR || act == AS_PK_NIL || b->cache_ref[slot] != act ||
        b->cache_key[slot] != 0)
        return FAST_NO;
    int name = b->cache_val[slot];
    const as_pk_val *size = &f[KEY_SIZE], *addr = &f[KEY_ADDR];
    as_pk_ref um = f[KEY_UMETA].ref;
    if (name < 0 || name > ACT_FREE_DONE || (addr->type != AS_PK_INT && addr->type != AS_PK_BOOL) ||
        b->work + pe->n + 1 > b->budget || (um != AS_PK_NIL && um != b->umeta_ref))
        return FAST_NO;
    b->work += pe->n + 1; /* charge */
    b->act_count[name]++; /* entry_action */
    if (name == ACT_ALLOC) {
        b->oom_caught += b->oom_open;
        b->oom_open = 0;
    }
    b->in_release = 0;
    if (b->pass == 1) {
        b->entries++;
        b->alloc_entries += name == ACT_ALLOC;
    }
    int size_int = size->type == AS_PK_INT || size->type == AS_PK_BOOL;
    int64_t sz = size_int ? size->i : 0;
    x->addr = (uint64_t)addr->i;
    x->size = (uint64_t)sz;
    x->stream = f[KEY_STREAM].type == AS_PK_INT || f[KEY_STREAM].type == AS_PK_BOOL
                    ? (uint64_t)f[KEY_STREAM].i
                    : 0;
    x->time_us = f[KEY_TIME].type == AS_PK_INT || f[KEY_TIME].type == AS_PK_BOOL ? f[KEY_TIME].i
                                                                                 : AS_TIME_NONE;
    x->off = pe->off;
    x->index = index;
    x->act = (uint8_t)name;
    x->has_size = size_int && sz > 0 && (uint64_t)sz <= AS_MAX_ALLOC_SIZE;
    x->site = 0;
    x->umark = 0;
    int rc;
    if (name == ACT_ALLOC && (rc = frames_site(b, f[KEY_FRAMES].ref, &x->site)) < 0)
        return rc;
    x->empty_before = b->empty_pending;
    b->empty_pending = 0;
    return 1;
}

/* Slot s's event into the log (push_ev and emit_site, pass 1 while logging: fast_log). */
static inline __attribute__((always_inline)) int
emit_fast(snap_build *b, as_op op, const addr_slot *s, int64_t t, uint32_t site)
{
    b->emitted++;
    int rc = as_evlog_put_fields(b->log, (uint8_t)op, s->id, s->pre, s->size, s->stream, t, site,
                                 s->addr);
    if (__builtin_expect(rc != 0, 0))
        return rc == AS_ENOMEM
                   ? oom(b)
                   : bfail(b, rc, UINT64_MAX, "cannot write the events' temporary file: %s",
                           strerror(errno));
    return 0;
}

/* Whether emit_fast may stand for emit_site now: pass 1, logging, past the first event
 * (t0), and room for the next event before buffer_max. */
static inline int fast_log(const snap_build *b)
{
    return b->pass == 1 && !b->overflow && b->emitted && b->emitted < b->buffer_max;
}

/* step for x when its address is in the expected state: as step returns, or FAST_NO. */
static inline int step_fast(snap_build *b, const snap_entry *x, const snap_entry *nxt)
{
    if (x->umark || x->empty_before || !fast_log(b))
        return FAST_NO;
    addr_map *m = &b->map;
    addr_slot *s;
    if ((m->used + 1) * 4 > m->cap * 3) { /* map_find, inline while the table has room */
        if (!(s = map_find(m, x->addr, 1)))
            return oom(b);
    } else {
        s = map_probe(m, x->addr);
    }
    if (x->act == ACT_ALLOC) {
        if (s->state == ST_LIVE || s->state == ST_PENDING || !x->has_size)
            return FAST_NO;
        map_claim(&b->map, s, x->addr);
        *s = (addr_slot){.addr = x->addr,
                         .id = b->ntrace_allocs++,
                         .size = x->size,
                         .stream = x->stream,
                         .entry = x->index < UINT32_MAX ? (uint32_t)x->index : UINT32_MAX - 1,
                         .state = ST_LIVE};
        return emit_fast(b, AS_OP_ALLOC, s, x->time_us, x->site);
    }
    if (x->act == ACT_FREE_DONE) {
        if (s->state != ST_LIVE && s->state != ST_PENDING)
            return FAST_NO;
        s->state = ST_FREED;
        return emit_fast(b, AS_OP_FREE, s, x->time_us, 0);
    }
    if (s->state != ST_LIVE)
        return FAST_NO;
    if (nxt && nxt->act == ACT_FREE_DONE && nxt->addr == x->addr) {
        if (nxt->umark)
            return FAST_NO;
        s->state = ST_FREED;
        int rc = emit_fast(b, AS_OP_FREE, s, x->time_us, 0);
        return rc ? rc : 1;
    }
    s->state = ST_PENDING;
    b->deferred++;
    return emit_fast(b, AS_OP_FREE_REQ, s, x->time_us, 0);
}

/* Entry e of the chosen device: an alloc/free entry waits for the next one (the pairing of
 * free_requested with free_completed looks one ahead). */
static int feed(snap_build *b, as_pk_ref e, const as_pk_entry *pe, uint64_t index)
{
    snap_entry *x = &b->ent[b->ci ^ (unsigned)b->have_cur];
    int rc = e == AS_PK_NIL ? entry_fast(b, pe, index, x) : FAST_NO;
    if (rc == FAST_NO)
        rc = entry_fields(b, e, pe, index, x);
    if (rc <= 0)
        return rc;
    if (!b->have_cur) {
        b->have_cur = 1;
        return 0;
    }
    if ((rc = step_fast(b, &b->ent[b->ci], x)) == FAST_NO)
        rc = step(b, &b->ent[b->ci], x);
    if (rc < 0)
        return rc;
    if (rc == 1)
        b->have_cur = 0;
    else
        b->ci ^= 1;
    return 0;
}

/* What as_pk_stream_next_entries handed out: a tree entry (it->ref), or n scanned ones. */
static int feed_all(snap_build *b, const as_pk_item *it, const as_pk_entry *pe, size_t n)
{
    int rc = 0;
    if (it->ref != AS_PK_NIL)
        return feed(b, it->ref, NULL, it->index);
    cache_check(b);
    for (size_t i = 0; i < n && rc >= 0; i++)
        rc = feed(b, AS_PK_NIL, &pe[i], it->index + i);
    return rc;
}

/* The last entry waiting for a successor. */
static int feed_end(snap_build *b)
{
    int rc = b->have_cur ? step(b, &b->ent[b->ci], NULL) : 0;
    b->have_cur = 0;
    if (rc >= 0 && b->empty_pending) /* the trace ends with a release */
        rc = emit_empty(b, b->empty_pending);
    return rc < 0 ? rc : 0;
}

/* The keys read from a segment and a block of the final `segments`. */
enum { SG_DEVICE, SG_ADDRESS, SG_TOTAL, SG_ALLOCATED, SG_STREAM, SG_TYPE, SG_EXPANDABLE, SG_POOL,
       SG_BLOCKS, SG_N };
static const char *const seg_keys[SG_N] = {
    "device",       "address",       "total_size",      "allocated_size", "stream",
    "segment_type", "is_expandable", "segment_pool_id", "blocks"};
enum { BK_ADDRESS, BK_SIZE, BK_REQUESTED, BK_STATE, BK_N };
static const char *const block_keys[BK_N] = {"address", "size", "requested_size", "state"};

/* One segment of the device read at the dump (its values sv, by seg_keys), for the
 * record: its range, stream, pool (small/large), whether expandable, and its private pool
 * id. 0 or -1 (host memory). */
static int record_segment(snap_build *b, const as_pk_ref *sv, uint64_t stream)
{
    const as_pk *pk = b->pk;
    as_snap_seg x = {.stream = stream, .first = b->nblocks};
    val_u64(pk, sv[SG_ADDRESS], &x.addr);
    val_u64(pk, sv[SG_TOTAL], &x.size);
    x.small = as_pk_str_eq(pk, sv[SG_TYPE], "small");
    int64_t v = 0;
    x.expandable = as_pk_int(pk, sv[SG_EXPANDABLE], &v) == 0 && v;
    as_pk_iter it;
    as_pk_ref id;
    as_pk_iter_init(&it, pk, sv[SG_POOL]);
    for (int k = 0; k < 2 && as_pk_iter_next(&it, &id); k++)
        as_pk_int(pk, id, &x.pool[k]);
    if (grow((void **)&b->segs, &b->capsegs, b->nsegs + 1, sizeof *b->segs))
        return -1;
    b->segs[b->nsegs++] = x;
    return 0;
}

/* One block (its values bv, by block_keys) of the segment recorded last. 0 or -1 (host
 * memory). */
static int record_block(snap_build *b, const as_pk_ref *bv)
{
    const as_pk *pk = b->pk;
    as_snap_block x = {0};
    if (val_u64(pk, bv[BK_ADDRESS], &x.addr) || val_u64(pk, bv[BK_SIZE], &x.size))
        return 0;
    val_u64(pk, bv[BK_REQUESTED], &x.requested);
    as_pk_ref state = bv[BK_STATE];
    x.state = as_pk_str_eq(pk, state, "active_allocated")      ? AS_SNAP_ALLOCATED
              : as_pk_str_eq(pk, state, "active_pending_free") ? AS_SNAP_PENDING
                                                               : AS_SNAP_INACTIVE;
    if (grow((void **)&b->blocks, &b->capblocks, b->nblocks + 1, sizeof *b->blocks))
        return -1;
    b->blocks[b->nblocks++] = x;
    b->segs[b->nsegs - 1].nblocks++;
    return 0;
}

/* Blocks active in the final `segments` of this device that the trace never touched were
 * allocated before recording and are still live: prehistoric too. Also counts where the
 * final state and the replayed trace disagree. Each segment and block dict is read in one
 * walk (as_pk_dict_take: their keys are the same memoized strings in the same order). */
static int final_segments(snap_build *b, as_pk_ref segments, uint64_t *nseg, uint64_t *reserved,
                          uint64_t *allocated)
{
    const as_pk *pk = b->pk;
    as_pk_iter si, bi;
    as_pk_ref seg, blk, sv[SG_N], bv[BK_N];
    as_pk_keys sk, bk;
    uint64_t matched = 0, live = 0;
    int rc;
    as_pk_keys_init(&sk, pk, seg_keys, SG_N);
    as_pk_keys_init(&bk, pk, block_keys, BK_N);
    as_pk_iter_init(&si, pk, segments);
    while (as_pk_iter_next(&si, &seg)) {
        uint64_t dev = 0, v, sstream = 0;
        if (charge(b, 1))
            return over_budget(b);
        if (as_pk_type_of(pk, seg) != AS_PK_DICT)
            continue;
        if ((rc = take(b, &sk, seg, sv)))
            return rc;
        if (val_u64(pk, sv[SG_DEVICE], &dev) == 0 && dev != b->device)
            continue;
        (*nseg)++;
        if (val_u64(pk, sv[SG_TOTAL], &v) == 0)
            *reserved += v;
        if (val_u64(pk, sv[SG_ALLOCATED], &v) == 0)
            *allocated += v;
        val_u64(pk, sv[SG_STREAM], &sstream);
        if (record_segment(b, sv, sstream))
            return oom(b);
        as_pk_iter_init(&bi, pk, sv[SG_BLOCKS]);
        while (as_pk_iter_next(&bi, &blk)) {
            if (charge(b, 1))
                return over_budget(b);
            if ((rc = take(b, &bk, blk, bv)))
                return rc;
            if (record_block(b, bv))
                return oom(b);
            as_pk_ref state = bv[BK_STATE];
            if (!as_pk_str_eq(pk, state, "active_allocated") &&
                !as_pk_str_eq(pk, state, "active_pending_free"))
                continue;
            uint64_t addr, size = 0;
            if (val_u64(pk, bv[BK_ADDRESS], &addr))
                continue;
            /* requested_size is exact for active blocks; size (rounded) is the fallback. */
            if (val_u64(pk, bv[BK_REQUESTED], &size) || !size || size > AS_MAX_ALLOC_SIZE)
                val_u64(pk, bv[BK_SIZE], &size);
            addr_slot *s = map_find(&b->map, addr, 1);
            if (!s)
                return oom(b);
            int st = map_state(&b->map, s, addr);
            if (st == ST_EMPTY && size && size <= AS_MAX_ALLOC_SIZE) {
                if ((rc = add_pre(b, s, addr, size, sstream)))
                    return rc;
                b->pre[b->npre - 1].blk = b->nblocks ? b->blocks[b->nblocks - 1].size : 0;
                s->state = ST_FREED; /* so that the count of trace-live blocks skips it */
                continue;
            }
            if (st == ST_LIVE || st == ST_PENDING)
                matched++;
            else
                b->mismatch++; /* the trace freed it, the snapshot has it active */
        }
    }
    for (size_t i = 0; i < b->map.cap; i++) {
        const addr_slot *s = &b->map.slots[i];
        if ((s->state == ST_LIVE || s->state == ST_PENDING))
            live++;
    }
    if (segments != AS_PK_NIL && live > matched)
        b->mismatch += live - matched; /* the trace left it live, the snapshot does not */
    return 0;
}

static int cmp_pre(const void *a, const void *b)
{
    const pre_block *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* ---- metadata ------------------------------------------------------------------------- */

static int meta_fmt(as_meta *m, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int meta_fmt(as_meta *m, const char *key, const char *fmt, ...)
{
    char v[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    return as_meta_set(m, key, v);
}

/* A number's decimal text as a pair's value: meta_fmt's "%" PRIu64 without vsnprintf, which
 * costs about 1,900 instructions a call (a snapshot's metadata has 20 numbers). */
static int meta_u64(as_meta *m, const char *key, uint64_t v)
{
    char t[24];
    t[as_fmt_u64(t, v)] = 0;
    return as_meta_set(m, key, t);
}

/* v's decimal text at t (at most 20 digits and a sign, no terminator), and its length. */
static size_t fmt_i64(char *t, int64_t v)
{
    size_t k = 0;
    if (v < 0)
        t[k++] = '-';
    return k + as_fmt_u64(t + k, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
}

static int meta_i64(as_meta *m, const char *key, int64_t v)
{
    char t[24];
    t[fmt_i64(t, v)] = 0;
    return as_meta_set(m, key, t);
}

/* snprintf(out, n, "%s", s) for s of len bytes (n > 0): as much as fits, terminated; len. */
static size_t put_str(char *out, size_t n, const char *s, size_t len)
{
    size_t k = len < n - 1 ? len : n - 1;
    memcpy(out, s, k);
    out[k] = 0;
    return len;
}

/* Copies a pickle string into a metadata-safe value: control bytes become '?'. */
static void safe_str(const as_pk *pk, as_pk_ref r, char *out, size_t n)
{
    const char *s;
    size_t len, j = 0;
    out[0] = 0;
    if (as_pk_str(pk, r, &s, &len))
        return;
    for (size_t i = 0; i < len && j + 1 < n; i++)
        out[j++] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    out[j] = 0;
}

static int key_ok(const char *s, size_t n)
{
    if (!n || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

/* One allocator setting as text: str as is, bool True/False, numbers, and a dict of
 * roundup_power2_divisions as the PYTORCH_CUDA_ALLOC_CONF list "[1:0,2:0,...]". */
static int setting_text(const as_pk *pk, as_pk_ref v, char *out, size_t n, int nested)
{
    int64_t i;
    double d;
    switch (as_pk_type_of(pk, v)) {
    case AS_PK_STR:
        safe_str(pk, v, out, n);
        return 0;
    case AS_PK_BOOL:
        as_pk_int(pk, v, &i);
        put_str(out, n, i ? "True" : "False", i ? 4 : 5);
        return 0;
    case AS_PK_INT: {
        char t[24];
        as_pk_int(pk, v, &i);
        put_str(out, n, t, fmt_i64(t, i));
        return 0;
    }
    case AS_PK_FLOAT:
        as_pk_float(pk, v, &d);
        snprintf(out, n, "%.17g", d);
        return 0;
    case AS_PK_DICT: {
        if (nested)
            return -1; /* one level only: a dict may contain itself */
        as_pk_iter it;
        as_pk_ref k, x;
        size_t j = 0;
        char ks[32], vs[32], t[72];
        j += put_str(out, n, "[", 1);
        as_pk_iter_init(&it, pk, v);
        while (as_pk_iter_next_pair(&it, &k, &x) && j < n) {
            if (setting_text(pk, k, ks, sizeof ks, 1) || setting_text(pk, x, vs, sizeof vs, 1))
                return -1;
            /* "%s%s:%s" of the separator, ks and vs (each under 32 bytes) */
            size_t m = 0, kl = strlen(ks), vl = strlen(vs);
            if (j > 1)
                t[m++] = ',';
            memcpy(t + m, ks, kl);
            m += kl;
            t[m++] = ':';
            memcpy(t + m, vs, vl);
            m += vl;
            j += put_str(out + j, n - j, t, m);
        }
        if (j < n)
            put_str(out + j, n - j, "]", 1);
        return j < n ? 0 : -1;
    }
    default:
        return -1;
    }
}

static int write_meta(snap_build *b, as_meta *meta, as_pk_ref root, uint64_t ndev, uint64_t nseg,
                      uint64_t reserved, uint64_t allocated, int have_segments)
{
    const as_pk *pk = b->pk;
    char v[512];
    int rc = 0;
    rc |= as_meta_set(meta, "source", "torch-snapshot");
    rc |= meta_u64(meta, "device", b->device);
    rc |= meta_i64(meta, "torch.pickle_protocol", as_pk_protocol(pk));
    rc |= meta_u64(meta, "torch.devices", ndev);
    rc |= meta_u64(meta, "prehistoric_allocs", b->npre);
    rc |= meta_u64(meta, "torch.trace_allocs", b->ntrace_allocs);
    rc |= meta_u64(meta, "torch.deferred_frees", b->deferred);
    size_t j = 0;
    v[0] = 0;
    for (size_t i = 0; i < N_ACT_NAMES; i++)
        if (b->act_count[i] && j < sizeof v)
            j += (size_t)snprintf(v + j, sizeof v - j, "%s%s:%" PRIu64, j ? "," : "", act_names[i],
                                  b->act_count[i]);
    if (b->unknown_actions && j < sizeof v)
        snprintf(v + j, sizeof v - j, "%sother:%" PRIu64, j ? "," : "", b->unknown_actions);
    rc |= as_meta_set(meta, "torch.actions", v[0] ? v : "none");
    rc |= meta_u64(meta, "torch.oom_entries", b->act_count[NAME_OOM]);
    rc |= meta_u64(meta, "torch.oom_caught", b->oom_caught);
    rc |= meta_u64(meta, "torch.empty_cache_inferred", b->empty_inferred);
    if (have_segments) {
        rc |= meta_u64(meta, "torch.segments_at_dump", nseg);
        rc |= meta_u64(meta, "torch.reserved_at_dump", reserved);
        rc |= meta_u64(meta, "torch.allocated_at_dump", allocated);
        /* What the trace's own segment events do not explain was reserved before it began. */
        int64_t before = (int64_t)(reserved - b->seg_grow + b->seg_shrink);
        rc |= meta_i64(meta, "torch.reserved_before_trace", before);
        rc |= meta_u64(meta, "torch.state_mismatches", b->mismatch);
        /* Recording started late or the ring buffer wrapped (dropping the oldest entries). */
        rc |= meta_i64(meta, "torch.history_truncated", b->npre > 0 || before != 0);
    }
    as_pk_ref ann = as_pk_dict_get(pk, root, "external_annotations");
    if (ann != AS_PK_NIL)
        rc |= meta_u64(meta, "torch.annotations", as_pk_len(pk, ann));
    as_pk_ref st = as_pk_dict_get(pk, root, "allocator_settings");
    as_pk_iter it;
    as_pk_ref k, x;
    as_pk_iter_init(&it, pk, st);
    while (as_pk_iter_next_pair(&it, &k, &x)) {
        const char *ks;
        size_t kn;
        char key[80];
        if (as_pk_str(pk, k, &ks, &kn) || setting_text(pk, x, v, sizeof v, 0))
            continue;
        if (kn == 23 && memcmp(ks, "PYTORCH_CUDA_ALLOC_CONF", 23) == 0) {
            rc |= as_meta_set(meta, "allocator_config", v);
        } else if (key_ok(ks, kn)) { /* "torch." and the setting's name (64 bytes at most) */
            memcpy(key, "torch.", 6);
            memcpy(key + 6, ks, kn);
            key[6 + kn] = 0;
            rc |= as_meta_set(meta, key, v);
        }
    }
    return rc ? oom(b) : 0;
}

/* ---- as_source_ops -------------------------------------------------------------------- */

static int torch_probe(const uint8_t *head, size_t n)
{
    return n >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5;
}

/* Limits for snapshot pickles: the defaults of pickle.h, and the reader's options. */
static as_pk_limits snap_limits(const as_reader_opts *opts)
{
    as_pk_limits l = {0};
    if (opts) {
        l.max_input = opts->max_pickle_bytes;
        l.max_memory = opts->max_pickle_memory;
        l.vm_only = opts->pickle_vm_only;
    }
    return l;
}

/* Pass 1 counts the entries of every device (n more for device d), for the choice of the
 * device and for `info`. */
static int count_entry(snap_build *b, unsigned d, uint64_t n)
{
    if (b->pass != 1)
        return 0;
    if (d >= b->ndev_entries) {
        if (grow((void **)&b->dev_entries, &b->capdev, (size_t)d + 1, sizeof *b->dev_entries))
            return oom(b);
        memset(b->dev_entries + b->ndev_entries, 0,
               ((size_t)d + 1 - b->ndev_entries) * sizeof *b->dev_entries);
        b->ndev_entries = (size_t)d + 1;
    }
    b->dev_entries[d] += n;
    return 0;
}

/* One pass over the pickle: every entry of the chosen device through the state machine.
 * At the end the tree (segments, settings) is complete in b->pk. */
static int read_pass(snap_build *b, const as_reader_opts *opts)
{
    as_pk_error perr;
    as_pk_limits lim = snap_limits(opts);
    as_pk_item it;
    int rc;
    b->budget = 1u << 20;
    if ((rc = as_pk_stream_open(b->in, &lim, &b->ps, &perr)))
        return bfail(b, perr.code, perr.offset, "pickle: %s", perr.msg);
    as_pk_stream_keys(b->ps, entry_keys, KEY_OTHER);
    b->pk = as_pk_stream_tree(b->ps);
    const as_pk_entry *pe;
    size_t n;
    while ((rc = as_pk_stream_next_entries(b->ps, &it, &pe, &n, &perr)) == 1) {
        if ((rc = count_entry(b, it.device, n)) < 0)
            return rc;
        if (b->chosen < 0 && (!b->want_set || it.device == b->want)) {
            b->chosen = (int)it.device;
            b->device = it.device;
        }
        if ((int)it.device == b->chosen && (rc = feed_all(b, &it, pe, n)) < 0)
            return rc;
    }
    if (rc < 0)
        return bfail(b, perr.code, perr.offset, "pickle: %s", perr.msg);
    b->budget = 64 * as_pk_stream_offset(b->ps) + (1u << 20);
    return 0;
}

/* After the parse: the root's shape, and the chosen device's list when it was kept as a
 * tree (a layout other than Python's pickler, whose trace lists stream). *traces and
 * *segments are set. */
static int check_root(snap_build *b, as_pk_ref *traces, as_pk_ref *segments)
{
    const as_pk *pk = b->pk;
    as_pk_ref root = as_pk_root(pk);
    *traces = as_pk_dict_get(pk, root, "device_traces");
    *segments = as_pk_dict_get(pk, root, "segments");
    /* torch.cuda.memory_snapshot() (and PyTorch 1.x's) is the bare list of segments: the
     * state at the moment, without a history. */
    if (as_pk_type_of(pk, root) == AS_PK_LIST) {
        as_pk_iter it;
        as_pk_ref first = AS_PK_NIL;
        as_pk_iter_init(&it, pk, root);
        if (!as_pk_iter_next(&it, &first) || (as_pk_type_of(pk, first) == AS_PK_DICT &&
                                              as_pk_dict_get(pk, first, "total_size") != AS_PK_NIL))
            *traces = AS_PK_NIL, *segments = root;
    }
    if ((as_pk_type_of(pk, root) != AS_PK_DICT && as_pk_type_of(pk, root) != AS_PK_LIST) ||
        (*traces == AS_PK_NIL && *segments == AS_PK_NIL))
        return bfail(b, AS_EFORMAT, as_pk_offset(pk, root),
                     "pickle is not a torch memory snapshot (top level: %s without "
                     "'device_traces' or 'segments'); record one with "
                     "torch.cuda.memory._record_memory_history() and _dump_snapshot(FILE)",
                     as_pk_type_name(as_pk_type_of(pk, root)));
    if (*traces != AS_PK_NIL && as_pk_type_of(pk, *traces) != AS_PK_LIST)
        return bfail(b, AS_ECORRUPT, as_pk_offset(pk, *traces),
                     "'device_traces' is a %s, not a list",
                     as_pk_type_name(as_pk_type_of(pk, *traces)));
    if (*segments != AS_PK_NIL && as_pk_type_of(pk, *segments) != AS_PK_LIST)
        return bfail(b, AS_ECORRUPT, as_pk_offset(pk, *segments), "'segments' is a %s, not a list",
                     as_pk_type_name(as_pk_type_of(pk, *segments)));
    /* Device: the one asked for, else the first with a non-empty trace (0 when none has
     * one; pick_device refuses a snapshot that traces several). Lists kept whole (not
     * streamed) are counted here. */
    as_pk_iter it;
    as_pk_ref t, first = AS_PK_NIL;
    unsigned d = 0, fd = 0;
    int rc;
    as_pk_iter_init(&it, pk, *traces);
    for (; as_pk_iter_next(&it, &t); d++) {
        size_t len = as_pk_len(pk, t);
        if (as_pk_streamed(pk, t) != 1 && (rc = count_entry(b, d, len)) < 0)
            return rc;
        if (len == 0 && !(b->want_set && d == b->want))
            continue;
        if (first == AS_PK_NIL && (!b->want_set || d == b->want))
            first = t, fd = d;
    }
    b->ndevices = d;
    if (first != AS_PK_NIL && as_pk_type_of(pk, first) != AS_PK_LIST)
        return bfail(b, AS_ECORRUPT, as_pk_offset(pk, first),
                     "device_traces[%u] is a %s, not a list", fd,
                     as_pk_type_name(as_pk_type_of(pk, first)));
    if (first == AS_PK_NIL || as_pk_streamed(pk, first) == 1 || as_pk_len(pk, first) == 0) {
        if (b->chosen >= 0 && (first == AS_PK_NIL || (unsigned)b->chosen != fd))
            return bfail(b, AS_EFORMAT, as_pk_offset(pk, *traces),
                         "device_traces is laid out in a way this reader cannot stream");
        if (b->chosen < 0 && b->want_set)
            b->device = b->want; /* a device with no trace: its state alone */
        return 0;
    }
    if (b->chosen >= 0) /* device fd's list was kept whole, but a later one streamed */
        return bfail(b, AS_EFORMAT, as_pk_offset(pk, first),
                     "device_traces is laid out in a way this reader cannot stream");
    b->chosen = (int)fd;
    b->device = fd;
    as_pk_iter_init(&it, pk, first);
    for (uint64_t i = 0; as_pk_iter_next(&it, &t); i++)
        if ((rc = feed(b, t, NULL, i)) < 0)
            return rc;
    return 0;
}

/* "0 (34500 entries), 1 (120 entries)": the devices with a trace, for messages and meta. */
static void device_list(const snap_build *b, char *out, size_t n)
{
    size_t j = 0;
    out[0] = 0;
    for (size_t d = 0; d < b->ndev_entries && j + 48 < n; d++)
        if (b->dev_entries[d])
            j += (size_t)snprintf(out + j, n - j, "%s%zu (%" PRIu64 " entr%s)", j ? ", " : "", d,
                                  b->dev_entries[d], b->dev_entries[d] == 1 ? "y" : "ies");
}

/* The device read must be the one asked for, and it must exist; without a choice, a
 * snapshot whose trace covers several devices is refused: their events are separate
 * allocators, and mixing them up would simulate neither. */
static int pick_device(snap_build *b)
{
    char list[200];
    unsigned traced = 0;
    for (size_t d = 0; d < b->ndev_entries; d++)
        traced += b->dev_entries[d] != 0;
    device_list(b, list, sizeof list);
    if (b->want_set && b->ndevices && b->want >= b->ndevices)
        return bfail(b, AS_EINVAL, UINT64_MAX,
                     "device %u: the snapshot's device_traces has %u device%s (0..%u)%s%s", b->want,
                     b->ndevices, b->ndevices == 1 ? "" : "s", b->ndevices - 1,
                     traced ? ", traced: " : ", none traced", list);
    if (!b->want_set && traced > 1)
        return bfail(b, AS_EINVAL, UINT64_MAX,
                     "the snapshot traces %u devices: %s; pick one (allocsim: --snapshot-device "
                     "N)",
                     traced, list);
    return 0;
}

/* Pass 1's conclusion: final segments, metadata, prehistoric blocks in address order. */
static int finish_pass1(snap_build *b, as_meta *meta)
{
    as_pk_ref traces, segments;
    char list[400];
    int rc;
    if ((rc = check_root(b, &traces, &segments)) || (rc = pick_device(b)) || (rc = feed_end(b)))
        return rc;
    uint64_t nseg = 0, reserved = 0, allocated = 0;
    if ((rc = final_segments(b, segments, &nseg, &reserved, &allocated)))
        return rc;
    if ((rc = write_meta(b, meta, as_pk_root(b->pk), as_pk_len(b->pk, traces), nseg, reserved,
                         allocated, segments != AS_PK_NIL)))
        return rc;
    /* Devices whose trace was not imported are worth knowing about: "0,1", and with their
     * entry counts. */
    size_t j = 0;
    list[0] = 0;
    for (size_t d = 0; d < b->ndev_entries && j + 24 < sizeof list; d++)
        if (b->dev_entries[d])
            j += (size_t)snprintf(list + j, sizeof list - j, "%s%zu", j ? "," : "", d);
    if (as_meta_set(meta, "torch.traced_devices", list[0] ? list : "none") < 0)
        return oom(b);
    j = 0;
    list[0] = 0;
    for (size_t d = 0; d < b->ndev_entries && j + 32 < sizeof list; d++)
        if (b->dev_entries[d])
            j += (size_t)snprintf(list + j, sizeof list - j, "%s%zu:%" PRIu64, j ? "," : "", d,
                                  b->dev_entries[d]);
    if (list[0] && as_meta_set(meta, "torch.device_entries", list) < 0)
        return oom(b);
    if (b->npre)
        qsort(b->pre, b->npre, sizeof *b->pre, cmp_pre);
    return 0;
}

/* One pass: the log and the prehistoric blocks move to the state, which hands out the
 * prehistoric ALLOCs first (by address), then the log's events with their final ids. */
static int finish_logged(snap_build *b, snap_state *st)
{
    if (b->npre && !(st->rank = malloc(b->npre * sizeof *st->rank)))
        return oom(b);
    for (size_t i = 0; i < b->npre; i++)
        st->rank[b->pre[i].idx] = i;
    if (!(st->ev = malloc(SNAP_QUEUE * sizeof *st->ev)))
        return oom(b);
    st->log = b->log, b->log = NULL;
    st->pre = b->pre, b->pre = NULL;
    st->npre = b->npre;
    st->t0 = b->t0;
    st->in = b->in;
    return 0;
}

/* Two passes: rewinds the input and starts pass 2 with the prehistoric blocks live under
 * their final ids and everything counted in pass 1 reset. */
static int start_pass2(snap_build *b)
{
    int rc = as_instream_rewind(b->in, b->err);
    if (rc)
        return rc;
    as_pk_stream_close(b->ps);
    b->ps = NULL;
    b->pk = NULL;
    map_free(&b->map);
    for (size_t i = 0; i < b->npre; i++) {
        addr_slot *s = map_find(&b->map, b->pre[i].addr, 1);
        if (!s)
            return oom(b);
        map_claim(&b->map, s, b->pre[i].addr);
        *s = (addr_slot){.addr = b->pre[i].addr,
                         .id = i,
                         .size = b->pre[i].size,
                         .stream = b->pre[i].stream,
                         .entry = UINT32_MAX,
                         .state = ST_LIVE,
                         .pre = 1};
    }
    memset(b->cache_ref, 0xff, sizeof b->cache_ref); /* refs of the new parse */
    free(b->fcache);
    b->fcache = b->scache = NULL;
    b->umeta[0] = 0;
    b->umeta_ref = AS_PK_NIL;
    b->pass2_events = b->emitted;
    b->emitted = 0;
    b->pass = 2;
    b->overflow = 0;
    b->have_cur = 0;
    b->ntrace_allocs = b->deferred = b->warnings = b->work = 0;
    memset(b->act_count, 0, sizeof b->act_count);
    b->oom_open = b->oom_caught = 0;
    b->unknown_actions = 0;
    b->seg_grow = b->seg_shrink = 0;
    b->in_release = b->empty_pending = 0;
    b->empty_inferred = 0;
    return 0;
}

/* Pass 1's record moves to the state (it outlives the build), ordinals shifted past the
 * prehistoric ALLOCs and the prehistoric blocks copied in their id order. */
static int keep_record(snap_build *b, snap_state *st)
{
    as_snap_pre *pre = b->npre ? malloc(b->npre * sizeof *pre) : NULL;
    if (b->npre && !pre)
        return oom(b);
    for (size_t i = 0; i < b->npre; i++)
        pre[i] = (as_snap_pre){.addr = b->pre[i].addr,
                               .requested = b->pre[i].size,
                               .stream = b->pre[i].stream,
                               .block = b->pre[i].blk};
    for (size_t i = 0; i < b->nsegev; i++)
        b->segev[i].alloc += b->npre;
    as_pk_ref root = as_pk_root(b->pk);
    st->rec = (as_snapshot_record){
        .segev = b->segev,
        .nsegev = b->nsegev,
        .segs = b->segs,
        .nsegs = b->nsegs,
        .blocks = b->blocks,
        .nblocks = b->nblocks,
        .pre = pre,
        .npre = b->npre,
        .entries = b->entries,
        .have_segments = as_pk_dict_get(b->pk, root, "segments") != AS_PK_NIL ||
                         as_pk_type_of(b->pk, root) == AS_PK_LIST,
        .have_traces = as_pk_dict_get(b->pk, root, "device_traces") != AS_PK_NIL,
        .have_settings = as_pk_dict_get(b->pk, root, "allocator_settings") != AS_PK_NIL,
    };
    st->owned[0] = b->segev, st->owned[1] = b->segs, st->owned[2] = b->blocks;
    st->owned[3] = pre;
    b->segev = NULL, b->segs = NULL, b->blocks = NULL;
    return 0;
}

static void free_record(snap_state *st)
{
    for (int i = 0; i < 4; i++)
        free(st->owned[i]);
}

static void build_free(snap_build *b)
{
    if (!b)
        return;
    as_pk_stream_close(b->ps);
    free(b->ev);
    as_evlog_free(b->log);
    free(b->pre);
    map_free(&b->map);
    free(b->fcache);
    free(b->dev_entries);
    free(b->segev);
    free(b->segs);
    free(b->blocks);
}

/* ---- annotations -------------------------------------------------------------------- */

static void state_free(snap_state *st)
{
    if (!st)
        return;
    free_record(st);
    as_snap_pools_free(st->pools);
    as_sites_free(st->sites);
    free(st->umarks.p);
    free(st->ann_pool.p);
    free(st->ann);
    free(st);
}

static int cmp_ann(const void *a, const void *b)
{
    const snap_ann *x = a, *y = b;
    if (x->time_us != y->time_us)
        return x->time_us < y->time_us ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The next annotation as a MARK. */
static int ann_event(snap_state *st, as_event *ev)
{
    const snap_ann *a = &st->ann[st->ann_pos++];
    *ev = (as_event){.op = AS_OP_MARK, .time_us = a->time_us, .label = st->ann_pool.p + a->label};
    return 0;
}

/* external_annotations (record_function ranges: {name, stage, device, time_us}) of the
 * chosen device become MARKs "START name" / "END name", merged into the events by time (a
 * mark goes before the events of its microsecond). One without a time is skipped. */
static int read_annotations(snap_build *b, snap_state *st, as_meta *meta)
{
    static const char *const ann_keys[] = {"time_us", "name", "device", "stage"};
    const as_pk *pk = b->pk;
    as_pk_ref list = as_pk_dict_get(pk, as_pk_root(pk), "external_annotations"), a, av[4];
    as_pk_iter it;
    as_pk_keys ak;
    size_t cap = 0;
    int rc;
    as_pk_keys_init(&ak, pk, ann_keys, 4);
    as_pk_iter_init(&it, pk, list);
    for (size_t order = 0; as_pk_iter_next(&it, &a); order++) {
        int64_t t, dev;
        char stage[16], name[AS_MAX_LABEL + 1];
        if (charge(b, 4))
            return over_budget(b);
        if (as_pk_type_of(pk, a) != AS_PK_DICT)
            continue;
        if ((rc = take(b, &ak, a, av)))
            return rc;
        if (as_pk_int(pk, av[0], &t) || t == AS_TIME_NONE ||
            c_string(pk, av[1], name, sizeof name - 7) < 0)
            continue;
        if (as_pk_int(pk, av[2], &dev) == 0 && dev != (int64_t)b->device)
            continue;
        if (c_string(pk, av[3], stage, sizeof stage) < 0)
            strcpy(stage, "AT");
        char label[AS_MAX_LABEL + 1];
        int n = snprintf(label, sizeof label, "%s %s", stage, name);
        size_t off;
        if (grow((void **)&st->ann, &cap, st->nann + 1, sizeof *st->ann) ||
            label_add(&st->ann_pool, label, (size_t)n, &off))
            return oom(b);
        st->ann[st->nann++] = (snap_ann){.time_us = t, .label = off, .order = order};
    }
    if (st->nann) /* qsort may not be given NULL, even for no items */
        qsort(st->ann, st->nann, sizeof *st->ann, cmp_ann);
    rc = 0;
    rc |= meta_u64(meta, "torch.annotation_marks", st->nann);
    rc |= meta_u64(meta, "torch.sites", as_sites_count(b->sites));
    rc |= meta_u64(meta, "torch.allocs_with_frames", b->allocs_framed);
    if (b->frames_cut || b->frames_lost) {
        rc |= meta_u64(meta, "torch.frames_cut", b->frames_cut);
        rc |= meta_u64(meta, "torch.frames_lost", b->frames_lost);
    }
    return rc ? oom(b) : 0;
}

static int pools_meta(const as_snap_pools *p, as_meta *meta)
{
    uint32_t np = as_snap_pools_count(p);
    int rc = meta_u64(meta, "pools", np);
    for (uint32_t k = 1; k <= np && !rc; k++) {
        int64_t pair[2];
        char key[32];
        as_snap_pools_pair(p, k, pair);
        snprintf(key, sizeof key, "pool.%" PRIu32, k);
        rc = meta_fmt(meta, key, "(%" PRId64 ", %" PRId64 ")", pair[0], pair[1]);
    }
    if (!rc && as_snap_pools_inferred(p))
        rc = meta_u64(meta, "pools.inferred", as_snap_pools_inferred(p));
    if (!rc && as_snap_pools_retries(p))
        rc = meta_u64(meta, "torch.oom_retry_runs", as_snap_pools_retries(p));
    return rc ? AS_ENOMEM : 0;
}

/* The id a logged event is handed out with: one of a prehistoric block (its FREE or
 * FREE_REQ, logged with pre) is the block's rank among them; any other comes after the
 * npre prehistoric ALLOCs. */
static inline uint64_t final_id(const snap_state *st, int alloc, int pre, uint64_t id)
{
    return pre && !alloc ? st->rank[id] : id + st->npre;
}

/* An ALLOC's pool, counted into the record. */
static uint32_t pool_of(snap_state *st, uint64_t addr, uint64_t id)
{
    int how;
    uint32_t pool = as_snap_pools_of(st->pools, addr, id, &how);
    st->rec.pool_allocs += pool != 0;
    (*st->how_count[how])++;
    return pool;
}

/* The log could not be read back (its temporary file failed, or was changed). */
static int log_fail(snap_state *st, as_trace_error *err, int rc)
{
    rc = as_instream_fail(st->in, err, rc, "the events' temporary file could not be read back%s%s",
                          rc == AS_EIO ? ": " : "", rc == AS_EIO ? strerror(errno) : "");
    if (err)
        err->offset = UINT64_MAX;
    return rc;
}

/* One pass: the next events of the log into the queue, prehistoric ALLOCs first, with
 * final ids and their pools (counted into the record as they are handed out, as in two
 * passes: the record's pool counts are complete once the trace is read). 0, or
 * AS_TRACE_EOF when all are out, or < 0 (the temporary file). */
static int log_fill(snap_state *st, as_trace_error *err)
{
    st->nev = st->pos = 0;
    while (st->nev < SNAP_QUEUE && st->pre_out < st->npre) {
        const pre_block *p = &st->pre[st->pre_out];
        snap_ev *e = &st->ev[st->nev++];
        *e = (snap_ev){.op = AS_OP_ALLOC,
                       .id = st->pre_out++,
                       .size = p->size,
                       .stream = p->stream,
                       .time_us = st->t0,
                       .addr = p->addr};
        e->pool = pool_of(st, e->addr, e->id);
    }
    size_t got;
    int rc = as_evlog_get_many(st->log, st->ev + st->nev, SNAP_QUEUE - st->nev, &got);
    if (rc < 0)
        return log_fail(st, err, rc);
    for (size_t end = st->nev + got; st->nev < end;) {
        snap_ev *e = &st->ev[st->nev];
        int alloc = e->op == AS_OP_ALLOC;
        if (alloc || (e->op != AS_OP_MARK && e->op != AS_OP_EMPTY_CACHE)) /* MARK: a label */
            e->id = final_id(st, alloc, e->pre, e->id);
        if (alloc)
            e->pool = pool_of(st, e->addr, e->id);
        st->nev++;
    }
    return st->nev ? 0 : AS_TRACE_EOF;
}

static int torch_open(as_instream *in, const as_reader_opts *opts, as_meta *meta, void **stp,
                      as_trace_error *err)
{
    snap_build *b = calloc(1, sizeof *b);
    snap_state *st = calloc(1, sizeof *st);
    int rc;
    *stp = NULL;
    if (!b || !st) {
        free(b), free(st);
        return as_instream_fail(in, err, AS_ENOMEM, "out of host memory");
    }
    *b = (snap_build){.in = in,
                      .err = err,
                      .lenient = opts && opts->lenient,
                      .pass = 1,
                      .chosen = -1,
                      .t0 = AS_TIME_NONE,
                      .umeta_ref = AS_PK_NIL,
                      .buffer_max = UINT64_MAX};
    if (opts && opts->max_pickle_buffered)
        b->buffer_max = opts->max_pickle_buffered;
    if (opts && opts->device_set) {
        b->want_set = 1;
        b->want = opts->device;
        b->device = opts->device;
    }
    memset(b->cache_ref, 0xff, sizeof b->cache_ref);
    if (as_sites_new(&st->sites) < 0) {
        rc = as_instream_fail(in, err, AS_ENOMEM, "out of host memory");
        goto fail;
    }
    b->sites = st->sites;
    b->umarks = &st->umarks;
    if (as_evlog_new(1, &b->log) < 0) {
        rc = as_instream_fail(in, err, AS_ENOMEM, "out of host memory");
        goto fail;
    }
    if ((rc = read_pass(b, opts)) || (rc = finish_pass1(b, meta)) ||
        (rc = read_annotations(b, st, meta)) || (rc = keep_record(b, st)))
        goto fail;
    st->warnings = b->warnings;
    st->how_count[AS_POOL_RECORDED] = &st->rec.pool_recorded;
    st->how_count[AS_POOL_BY_STREAM] = &st->rec.pool_by_stream;
    st->how_count[AS_POOL_AMBIGUOUS] = &st->rec.pool_ambiguous;
    st->how_count[AS_POOL_FRAMES] = &st->rec.pool_by_frames;
    st->how_count[AS_POOL_RELEASE] = &st->rec.pool_by_release;
    if ((rc = as_snap_pools_build(&st->rec, &st->pools)) || (rc = pools_meta(st->pools, meta))) {
        rc = bfail(b, rc, UINT64_MAX, "out of host memory for the pool table");
        goto fail;
    }
    if (!b->overflow) {
        if ((rc = finish_logged(b, st)))
            goto fail;
        if ((rc = as_evlog_rewind(st->log)) < 0) {
            rc = log_fail(st, err, rc);
            goto fail;
        }
        build_free(b);
        free(b);
    } else {
        if ((rc = start_pass2(b)))
            goto fail;
        as_pk_limits lim = snap_limits(opts);
        as_pk_error perr;
        if ((rc = as_pk_stream_open(b->in, &lim, &b->ps, &perr))) {
            rc = bfail(b, perr.code, perr.offset, "pickle: %s", perr.msg);
            goto fail;
        }
        as_pk_stream_keys(b->ps, entry_keys, KEY_OTHER);
        b->pk = as_pk_stream_tree(b->ps);
        b->err = NULL; /* pass 2 reports through next() */
        st->b = b;
    }
    *stp = st;
    return 0;
fail:
    build_free(b);
    free(b);
    state_free(st);
    return rc;
}

/* Pass 2: the user-mark labels of the events handed out are no longer needed (a label
 * lives until the next read); the entry still waiting for its successor keeps its own. */
static int umarks_reset(snap_build *b)
{
    char keep[AS_MAX_LABEL + 1];
    size_t off;
    snap_entry *cur = &b->ent[b->ci];
    int has = b->have_cur && cur->umark;
    if (has)
        snprintf(keep, sizeof keep, "%s", b->umarks->p + cur->umark - 1);
    b->umarks->n = 0;
    if (has) {
        if (label_add(b->umarks, keep, strlen(keep), &off) < 0)
            return oom(b);
        cur->umark = (uint32_t)off + 1;
    }
    return 0;
}

/* Pass 2: parses on until the queue holds events, or the trace ends. */
static int pass2_fill(snap_state *st, as_trace_error *err)
{
    snap_build *b = st->b;
    as_pk_item it;
    as_pk_error perr;
    int rc;
    b->err = err;
    b->nev = 0;
    st->pos = 0;
    if ((rc = umarks_reset(b)) < 0)
        return rc;
    const as_pk_entry *pe;
    size_t n;
    while (b->nev == 0) {
        rc = as_pk_stream_next_entries(b->ps, &it, &pe, &n, &perr);
        if (rc < 0)
            return bfail(b, perr.code, perr.offset, "pickle: %s", perr.msg);
        if (rc == 0) {
            if ((b->have_cur || b->empty_pending) && (rc = feed_end(b)) < 0)
                return rc;
            if (b->nev)
                break;
            if (b->emitted != b->pass2_events)
                return bfail(b, AS_EIO, UINT64_MAX,
                             "the snapshot changed while it was read (%" PRIu64
                             " events, then %" PRIu64 ")",
                             b->pass2_events, b->emitted);
            return AS_TRACE_EOF;
        }
        if ((int)it.device == b->chosen && (rc = feed_all(b, &it, pe, n)) < 0)
            return rc;
    }
    st->ev = b->ev;
    st->nev = b->nev;
    return 0;
}

/* Run e's next EMPTY_CACHE event into *ev: 1, or 0 once its events are out (pos moved). */
static int run_event(snap_state *st, const snap_ev *e, as_event *ev)
{
    const uint32_t *pools;
    size_t n = as_snap_pools_run(st->pools, e->id, &pools);
    if (st->sub >= n) {
        st->pos++, st->sub = 0;
        return 0;
    }
    *ev = (as_event){.op = AS_OP_EMPTY_CACHE, .time_us = e->time_us, .pool = pools[st->sub++]};
    if (st->sub == n)
        st->pos++, st->sub = 0;
    return 1;
}

static int torch_next(void *stp, as_event *ev, as_trace_error *err)
{
    snap_state *st = stp;
    const snap_ev *e;
again:
    if (st->b && st->pre_out < st->b->npre) {
        const pre_block *p = &st->b->pre[st->pre_out];
        *ev = (as_event){.op = AS_OP_ALLOC,
                         .id = st->pre_out,
                         .size = p->size,
                         .stream = p->stream,
                         .time_us = st->b->t0,
                         .pool = pool_of(st, p->addr, st->pre_out)};
        st->pre_out++;
        return 0;
    }
    if (st->pos >= st->nev && !st->ended) {
        int rc = st->b ? pass2_fill(st, err) : log_fill(st, err);
        if (rc < 0)
            return rc;
        st->ended = rc == AS_TRACE_EOF;
    }
    if (st->ended) /* the annotations after the last event */
        return st->ann_pos < st->nann ? ann_event(st, ev) : AS_TRACE_EOF;
    e = &st->ev[st->pos];
    if (st->ann_pos < st->nann && e->time_us != AS_TIME_NONE &&
        st->ann[st->ann_pos].time_us <= e->time_us)
        return ann_event(st, ev);
    if (e->op == AS_OP_EMPTY_CACHE) {
        if (run_event(st, e, ev))
            return 0;
        goto again; /* an OOM retry's release: no event of its own */
    }
    st->pos++;
    *ev = (as_event){.op = (as_op)e->op,
                     .site = e->op == AS_OP_ALLOC ? e->site : 0,
                     .id = e->op == AS_OP_MARK ? 0 : e->id,
                     .size = e->size,
                     .stream = e->stream,
                     .time_us = e->time_us,
                     .label = e->op == AS_OP_MARK ? st->umarks.p + e->id : NULL};
    if (e->op == AS_OP_ALLOC && st->b) /* two passes: resolved here */
        ev->pool = pool_of(st, e->addr, e->id);
    else if (e->op == AS_OP_ALLOC)
        ev->pool = e->pool;
    return 0;
}

/* One pass: the next queued event into *ev when torch_next would hand it out as it is
 * (an ALLOC, FREE or FREE_REQ with no annotation due before it): 1, else 0. */
static inline int queued_event(snap_state *st, int64_t ann_t, as_event *ev)
{
    if (st->pos >= st->nev)
        return 0;
    const snap_ev *e = &st->ev[st->pos];
    if (e->op == AS_OP_EMPTY_CACHE || e->op == AS_OP_MARK ||
        (ann_t <= e->time_us && e->time_us != AS_TIME_NONE))
        return 0;
    int alloc = e->op == AS_OP_ALLOC;
    *ev = (as_event){.op = (as_op)e->op,
                     .site = alloc ? e->site : 0,
                     .id = e->id,
                     .size = e->size,
                     .stream = e->stream,
                     .time_us = e->time_us,
                     .pool = alloc ? e->pool : 0};
    st->pos++;
    return 1;
}

/* One pass, the queue empty and the prehistoric ALLOCs out: the log's next event into *ev
 * straight from its record when torch_next would hand it out as it is (as log_fill and
 * queued_event make it: an ALLOC, FREE or FREE_REQ with no annotation due before it, its
 * id final, an ALLOC's pool): 1, else 0 with nothing read. */
static inline int log_event(snap_state *st, int64_t ann_t, as_event *ev)
{
    as_ev_rec r;
    uint64_t stream;
    if (!as_evlog_peek_plain(st->log, &r) || r.op == AS_OP_EMPTY_CACHE || r.op == AS_OP_MARK ||
        (ann_t <= r.time && r.time != AS_TIME_NONE))
        return 0;
    uint64_t id = as_evlog_take_plain(st->log, &r, &stream);
    int alloc = r.op == AS_OP_ALLOC;
    id = final_id(st, alloc, r.flags & AS_EVF_PRE, id);
    *ev = (as_event){.op = (as_op)r.op,
                     .site = alloc ? r.site : 0,
                     .id = id,
                     .size = r.size,
                     .stream = stream,
                     .time_us = r.time,
                     .pool = alloc ? pool_of(st, r.a, id) : 0};
    return 1;
}

/* as_source_ops.next_batch (source.h): torch_next's events, each through the validator's
 * fast path, up to a MARK (its label lives until the queue refills). The offset an event
 * the fast path declines is reported at is the input's before the event was made, as the
 * reader's one-event path takes it. */
static int torch_next_batch(void *stp, as_validator *vd, as_event *evs, size_t cap, size_t *n,
                            size_t *checked, as_trace_error *err)
{
    snap_state *st = stp;
    size_t k = 0;
    int rc = 0, unchecked = 0;
    as_instream *in = st->b ? st->b->in : st->in;
    uint64_t off = as_instream_offset(in); /* one pass: the input is read to its end */
    int64_t ann_t = st->ann_pos < st->nann ? st->ann[st->ann_pos].time_us : INT64_MAX;
    while (k < cap) {
        as_event *ev = &evs[k];
        if (st->b)
            off = as_instream_offset(in);
        if (st->b ||
            !(st->pos < st->nev ? queued_event(st, ann_t, ev)
                                : st->pre_out >= st->npre && !st->ended && log_event(st, ann_t, ev))) {
            if ((rc = torch_next(st, ev, err)) != 0)
                break;
            ann_t = st->ann_pos < st->nann ? st->ann[st->ann_pos].time_us : INT64_MAX;
        }
        k++;
        if (vd && validate_fast(vd, ev) != 0) {
            unchecked = 1;
            st->last_off = off;
            break;
        }
        if (ev->op == AS_OP_MARK) {
            st->last_off = off;
            break;
        }
    }
    *n = k;
    if (checked)
        *checked = k - (size_t)unchecked;
    if (rc == AS_TRACE_EOF && k > 0)
        rc = 0; /* the events first; EOF again on the next call */
    return rc;
}

static uint64_t torch_last_offset(const void *stp)
{
    return ((const snap_state *)stp)->last_off;
}

static uint64_t torch_warnings(const void *stp)
{
    return ((const snap_state *)stp)->warnings;
}

static void torch_close(void *stp)
{
    snap_state *st = stp;
    if (!st)
        return;
    if (st->b) {
        build_free(st->b);
        free(st->b);
    } else {
        free(st->ev);
        as_evlog_free(st->log);
        free(st->pre);
        free(st->rank);
    }
    state_free(st);
}

static const as_sites *torch_sites(const void *stp)
{
    return ((const snap_state *)stp)->sites;
}

static const as_snapshot_record *torch_record(const void *stp)
{
    return &((const snap_state *)stp)->rec;
}

const as_source_ops as_src_torch = {
    .name = "torch",
    .fmt = AS_FMT_TORCH_PICKLE,
    .probe = torch_probe,
    .open = torch_open,
    .next = torch_next,
    .next_batch = torch_next_batch,
    .last_offset = torch_last_offset,
    .sites = torch_sites,
    .warnings = torch_warnings,
    .close = torch_close,
    .record = torch_record,
};
