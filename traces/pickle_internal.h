/*
 * pickle_internal.h - the pickle reader's state, shared by the general VM (pickle.c) and
 * the entry scanner that reads trace batches without its tree (pickle_entry.c); internal
 * to traces/. Invariant: the scanner leaves this state as the VM's own opcodes would have
 * (or untouched, when it hands a batch back), so the VM may run the next opcode.
 */
#ifndef AS_TRACES_PICKLE_INTERNAL_H
#define AS_TRACES_PICKLE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pickle.h"
#include "trace_internal.h"

#define PK_HARD_MAX_NODES 0x7FFFFFFEull /* refs are 31 bits; AS_PK_NIL stays free */
#define AS_PK_IBIT 0x80000000u          /* ref into the interned table */
#define PK_WINDOW (64u << 10)           /* bytes asked of the instream at a time */
#define PK_MEMO_SLACK 4096u             /* memo indices allowed past the bytes read */
#define PK_FRAME_CHECK (16u << 20)      /* a FRAME up to this long is checked for truncation */

/* pk_node.flags. PKF_OLDFIRST: while parsing, a container's chunks are newest first, but
 * one iterated before STOP (a streamed entry: its dict, frames list and frame dicts) was
 * put oldest first then, and is marked so that add_items and order_chunks know. */
enum { PKF_TRACE = 1, PKF_DROPPED = 2, PKF_NESTED = 4, PKF_OLDFIRST = 8 };
/* Memoized containers that outlive their batch keep their items when they are small and
 * plain: a "flat" one (a dict of at most 3 pairs, a list or tuple of at most 6 items, all
 * strings or numbers: a stack frame {filename, line, name}) or a list or tuple of at most
 * 4096 flat ones (a frames list). Each is interned by content, so memory follows the
 * distinct frames and stacks; anything else becomes its type's dropped marker (pickle.c's
 * intern_keep). */
#define PK_FLAT_CELLS 6
#define PK_NESTED_ITEMS 4096

typedef struct pk_node {
    uint8_t type;
    uint8_t flags;
    uint16_t dev; /* PKF_TRACE: the device index */
    uint32_t a;   /* STR/BYTES: length; containers: item cells (dict: 2 per pair), or the
                     items handed out for a streamed list */
    uint64_t off; /* input offset of the opcode (STR/BYTES: of the bytes) */
    union {
        int64_t i;
        double f;
        uint64_t data; /* STR/BYTES: offset in the byte pool */
        uint32_t head; /* first chunk (the newest one while parsing), or AS_PK_NIL */
    } u;
} pk_node;

_Static_assert(sizeof(pk_node) == 24, "pk_node is meant to stay 24 bytes");

struct as_pk {
    int protocol;
    int ordered; /* order_chunks ran (STOP): every chunk list is oldest first */
    as_pk_ref root;
    pk_node *nodes;
    size_t nnodes, capnodes;
    uint32_t *cells;
    size_t ncells, capcells;
    uint8_t *bytes;
    size_t nbytes, capbytes;
    /* interned values: memoized strings and numbers that outlived their batch, and one
     * dropped-container marker per type (inodes[0..2]) */
    pk_node *inodes;
    size_t ninodes, capinodes;
    uint8_t *ibytes;
    size_t nibytes, capibytes;
    uint32_t *ihash; /* open addressing: inode index + 1, 0 = empty */
    size_t capihash;
    uint32_t *icells; /* interned containers' items, one chunk each [NIL, n, item...] */
    size_t nicells, capicells;
};

/* Where the pools ended when a MARK was pushed, and the oldest container written since. */
typedef struct pk_mark {
    size_t stack, nodes, cells, bytes, dirty;
    uint32_t low; /* lowest container ref that got items above this mark (UINT32_MAX: none) */
} pk_mark;

typedef struct pk_scan pk_scan;

/* The memo, in pages of PK_MPAGE slots (pickle.c). Python's pickler memoizes every string,
 * list and dict, so a snapshot's memo grows by a slot or two per trace entry, nearly all
 * of them the same few values (the dropped marker of an entry dict, an interned "N/A" or
 * frames list): once the memo has more than PK_MEMO_DENSE pages, a page the reading has
 * left behind is packed, at the next point where no batch is being read or cut back, into
 * a palette of its distinct values and 0-8 bits a slot when it has at most 256 of them; a
 * write into a packed page unpacks it for good. */
#define PK_MPAGE_BITS 12
#define PK_MPAGE (1u << PK_MPAGE_BITS)
#define PK_MEMO_DENSE 64       /* pages (1 MiB) before any packs */
#define PK_MEMO_FIRST 512u     /* slots of the first page at first (2 KiB; doubled to PK_MPAGE) */
#define PK_MCACHE 256          /* lines: an entry's dozen keys and values rarely share one */
#define PK_PENDING 0xFFFFFFFEu /* the entry scanner's mark of a slot being filled */
#define PK_KEY_UNSEEN 0xFFu
typedef struct pk_mpage {
    as_pk_ref *dense; /* the slots, or NULL when packed */
    as_pk_ref *pal;   /* packed: the distinct values */
    uint8_t *bits;    /* packed: each slot's index into pal, width bits, low bits first */
    uint8_t width;    /* packed: 0 (one value), 1, 2, 4 or 8 */
    uint8_t pinned;   /* unpacked by a write: stays dense */
    uint16_t npal;
} pk_mpage;

/* Parser state. For as_pk_parse it lives on the stack; for as_pk_stream it persists. */
typedef struct pk_parser {
    as_pk *pk;
    as_pk_limits lim;
    as_pk_error *err;
    uint64_t pos; /* offset of the current opcode */
    /* input window: w[wp..wn) unread; wbase = offset of w[0]; in == NULL: all in memory */
    as_instream *in;
    const uint8_t *w;
    size_t wn, wp;
    uint64_t wbase;
    uint64_t mem; /* bytes of every pool's capacity, against lim.max_memory */
    as_pk_ref *stack;
    size_t nstack, capstack;
    size_t stack_room; /* min(capstack, max_stack): push's one check */
    pk_mark *marks;
    size_t nmarks, capmarks;
    pk_mpage *mpages; /* the memo (AS_PK_NIL = unset); capmemo = npages * PK_MPAGE, but
                         PK_MEMO_FIRST.. while the first page is the only one */
    size_t npages, cappages, packed_upto;
    size_t capmemo, memo_len;
    /* the entry scanner's memo references, by index: the ref and its node's type (a
     * trace entry's keys are the same few slots); every write of a slot drops its line */
    uint32_t mc_idx[PK_MCACHE]; /* UINT32_MAX: empty (mc_ref AS_PK_NIL) */
    as_pk_ref mc_ref[PK_MCACHE];
    uint8_t mc_type[PK_MCACHE];
    uint8_t mc_key[PK_MCACHE]; /* the slot's string as a key: its number, or PK_KEY_UNSEEN */
    /* the keys a scanned entry's values are taken by (as_pk_stream_keys) */
    const char *const *keys;
    uint8_t nkeys;
    uint8_t keylen[AS_PK_MAX_KEYS];
    uint32_t *dirty; /* memo indices set while a MARK was open, newest last */
    size_t ndirty, capdirty;
    int streaming;
    /* a streamed batch being handed out: stack[pend_m .. pend_m + pend_n) */
    uint8_t pend_op;
    size_t pend_m, pend_n, pend_i;
    as_pk_ref pend_list;
    pk_mark pend_mark;
    int done;
    uint64_t generation; /* cut-backs so far */
    int quiet;           /* fail() leaves err alone (the entry scanner's tries) */
    int scan;            /* as_pk_stream_next_entries: trace batches go to the scanner */
    pk_scan *sc;         /* its state (pickle_entry.c), NULL before the first batch */
} pk_parser;

struct as_pk_stream {
    pk_parser p;
    as_pk_error err;
    as_instream *own; /* as_pk_stream_open_mem's instream, closed with the stream */
};

static inline int ibit(as_pk_ref r)
{
    return (r & AS_PK_IBIT) != 0;
}

/* The node behind r (main arena or interned table); r must be valid. */
static inline pk_node *nd(const as_pk *pk, as_pk_ref r)
{
    return ibit(r) ? &pk->inodes[r & ~AS_PK_IBIT] : &pk->nodes[r];
}

/* Whether the list at stack[i], about to get items, is root["device_traces"][d] (whose
 * items are streamed): 1 or 0; it marks the list so when it is (pickle.c). */
int as_pk_vm_trace_list(pk_parser *p, size_t i);

/* Interning (pickle.c), also for the entry scanner: the interned copy of scalar or string
 * n (s: a string's bytes), or of a container of type n->type made at n->off with items
 * items[0..k) (already interned or kept in the tree; nested: it may hold flat ones). */
int as_pk_intern_value(pk_parser *p, const pk_node *n, const uint8_t *s, as_pk_ref *out);
int as_pk_intern_items(pk_parser *p, const pk_node *n, const as_pk_ref *items, size_t k, int nested,
                       as_pk_ref *out);
/* The memo slot idx, grown (and set to AS_PK_NIL) as memo_put would; 0 or < 0. */
int as_pk_memo_room(pk_parser *p, uint64_t idx);
/* The page of slot idx (< capmemo) dense again, for good: 0 or < 0 (memory). */
int as_pk_memo_unpack(pk_parser *p, uint64_t idx);
/* Packs the pages two or more below the newest, once each (at a point where no entry
 * scanner's try is under way: its undo writes only dense pages). */
void as_pk_memo_pack(pk_parser *p);
void as_pk_memo_free(pk_parser *p);

static inline as_pk_ref pk_memo_packed(const pk_mpage *g, size_t i)
{
    unsigned w = g->width;
    if (!w)
        return g->pal[0];
    size_t bit = i * w;
    return g->pal[(g->bits[bit >> 3] >> (bit & 7)) & ((1u << w) - 1)];
}

/* Memo slot idx (AS_PK_NIL: unset, or past the memo). */
static inline as_pk_ref pk_memo_get(const pk_parser *p, uint64_t idx)
{
    if (idx >= p->capmemo)
        return AS_PK_NIL;
    const pk_mpage *g = &p->mpages[idx >> PK_MPAGE_BITS];
    size_t i = (size_t)idx & (PK_MPAGE - 1);
    return g->dense ? g->dense[i] : pk_memo_packed(g, i);
}

/* The scanner's cache forgets slot idx (it is being written). */
static inline void pk_memo_forget(pk_parser *p, uint64_t idx)
{
    size_t h = (size_t)idx & (PK_MCACHE - 1);
    if (p->mc_idx[h] == idx) {
        p->mc_idx[h] = UINT32_MAX;
        p->mc_ref[h] = AS_PK_NIL;
    }
}

/* Sets memo slot idx (< capmemo: as_pk_memo_room first): 0, or < 0 (memory). */
static inline int pk_memo_set(pk_parser *p, uint64_t idx, as_pk_ref v)
{
    pk_mpage *g = &p->mpages[idx >> PK_MPAGE_BITS];
    int rc;
    if (!g->dense && (rc = as_pk_memo_unpack(p, idx)))
        return rc;
    g->dense[idx & (PK_MPAGE - 1)] = v;
    pk_memo_forget(p, idx);
    return 0;
}

/* Memo slot idx through the scanner's cache, its node's type in *type (a slot unset or
 * being filled is returned and not cached). */
static inline as_pk_ref pk_memo_typed(pk_parser *p, uint64_t idx, uint8_t *type)
{
    size_t h = (size_t)idx & (PK_MCACHE - 1);
    if (p->mc_idx[h] == idx) {
        *type = p->mc_type[h];
        return p->mc_ref[h];
    }
    as_pk_ref r = pk_memo_get(p, idx);
    if (r != AS_PK_NIL && r != PK_PENDING) {
        p->mc_idx[h] = (uint32_t)idx;
        p->mc_ref[h] = r;
        p->mc_type[h] = *type = nd(p->pk, r)->type;
        p->mc_key[h] = PK_KEY_UNSEEN;
    }
    return r;
}
/* Whether stack[i] is a list that would become root["device_traces"][d] (d in *dev), as
 * as_pk_vm_trace_list decides but without marking it. */
int as_pk_vm_is_trace_list(const pk_parser *p, size_t i, uint64_t *dev);
/* At least need unread bytes in the window if the input has them (pickle.c's refill). */
int as_pk_refill(pk_parser *p, size_t need);
/* Budgeted growth of a scanner array (pickle.c's pool growth). */
int as_pk_grow(pk_parser *p, void **arr, size_t *cap, size_t need, size_t elem);

/* The entry scanner (pickle_entry.c): at the MARK of a trace list's APPENDS batch (p->wp
 * just past it), reads the whole batch when every item is a trace entry in the layout
 * Python's pickler writes, keeping no tree: the entries' pairs go to a buffer handed out
 * by as_pk_stream_next_entries, memo slots get what the VM's cut-back would leave in them.
 * 1 with the batch read (p->wp past its APPENDS), 0 when it leaves the batch to the VM
 * untouched (anything else, or too long for its window), < 0 on a failed read. */
int as_pk_scan_batch(pk_parser *p);
/* The scanned batch's entries, all at once (*e[0..*n), the first one's place in *item): 1,
 * or 0 when they were handed out. */
int as_pk_scan_next(pk_parser *p, as_pk_item *item, const as_pk_entry **e, size_t *n);
void as_pk_scan_free(pk_parser *p);

#endif
