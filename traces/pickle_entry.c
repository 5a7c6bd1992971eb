/*
 * pickle_entry.c - the entry scanner: a batch of a snapshot's trace entries read straight
 * from the opcodes Python's pickler writes for it, without the VM's tree. A batch is
 * MARK, then per entry EMPTY_DICT, its memo put, MARK, keys and values, SETITEMS, and at
 * the end APPENDS onto root["device_traces"][d]. Keys and strings are memoized strings or
 * memo references; values are numbers, strings, None, bools, or a `frames` list of frame
 * dicts {filename, line, name}, themselves fresh or memo references. The scanner keeps a
 * small stack of its own (numbers inline, strings and finished containers as interned
 * refs, containers being built as their items) and writes each entry's values, by the key
 * the reader named (as_pk_stream_keys), to a buffer that as_pk_stream_next_entries hands
 * out a batch at a time; a memo reference costs a lookup, so a frame the pickle refers back
 * to is never read or hashed again, and a key's number is cached with its memo line. The
 * common layout (entry_one) reads entry after entry in one loop; the keys of the entry it
 * read last (memo references, the same bytes in every entry of a trace) are its skeleton,
 * and the entries after it are matched against that by a word compare a key (sk_match),
 * entry_one again at the first difference; and an entry sk_match read whose values are
 * numbers, memo references or the skeleton's fresh string is a template of its exact byte
 * layout (a few per trace, by the sizes' opcodes): the entries of that layout are read by
 * masked 16-byte compares and their values taken at fixed offsets (tm_read). A snapshot
 * recorded with stacks has entries whose frames lists hold a hundred frames or more, new
 * ones fresh among references; entry_one declines those and the general loop reads them:
 * its stack and its containers being built grow to a list of the pickler's 1,000 items, a
 * C++ frame's line of 2^64 - 1 is the VM's value-less int beyond 64 bits, and a frame that
 * recurs within its own stack (a reference to a dict its list has not finished) finishes
 * and freezes the dict (freeze).
 *
 * Invariant: a batch is read whole or not at all. Until its APPENDS every memo write is
 * logged, and when the scanner meets anything else (another opcode or layout, a limit, the
 * end of its window) it takes them back and leaves the batch to the VM, which then reads
 * it as if the scanner had not looked (interned values the scanner added stay: the table
 * is deduplicated by content, and they are the values the VM's cut-back interns). When
 * the batch is read, the memo holds what the VM's cut-back would leave (strings, numbers
 * and small containers interned, an entry dict its dropped marker) and each entry's values
 * are the dict's (the last one set of each key): fuzz_pickle and test_pickle import with
 * and without the scanner.
 */
#include <stdlib.h>
#include <string.h>

#include "pickle_internal.h"

/* The scanner's stack holds an entry's keys and values, and a container's items until their
 * fill: a frames list of a snapshot recorded with stacks (a hundred frames or more, any of
 * them a fresh dict) is one MARK ... APPENDS of up to the pickler's 1,000 items. The stack
 * and the containers being built start at SC_FIRST and grow to these. */
#define SC_DEPTH 1040             /* values on the scanner's stack */
#define SC_OPEN 1040              /* containers being built in one entry */
#define SC_FIRST 64u
#define SC_MARKS 16               /* MARKs open inside a batch */
#define SC_SLOTS 4                /* memo slots naming one container */
#define SC_WINDOW (1u << 20)      /* the window asked for at a batch's start ... */
#define SC_WINDOW_MAX (16u << 20) /* ... and at most, for a long batch */
#define SC_MAX_ENTRIES 65536u     /* longer batches are left to the VM */
#define HOT inline __attribute__((always_inline)) /* the common layout's steps, in one loop */

enum { SC_ABORT = 0, SC_DONE, SC_MORE, SC_GO }; /* SC_MORE: a larger window might do */
enum { SV_SCALAR, SV_REF, SV_OPEN, SV_ENTRY };

/* A value on the scanner's stack. */
typedef struct sv {
    uint8_t kind; /* SV_* */
    uint8_t type; /* as_pk_type */
    uint32_t x;   /* SV_REF: the ref; SV_OPEN: its sc_open; SV_ENTRY: its entry */
    int64_t i;    /* SV_SCALAR: the value (a float's bits) */
    uint64_t off; /* SV_SCALAR: its opcode's offset */
} sv;

/* A container being built inside an entry: its items are refs, contiguous in items[]. */
typedef struct sc_open {
    uint8_t type, nslots;
    uint8_t frozen; /* a reference took it as it is (freeze): no fill may change it */
    uint32_t first, n, chunks; /* chunks: its fills (the VM's chunks, at most 64 interned) */
    uint64_t off;
    uint32_t slot[SC_SLOTS];
} sc_open;

typedef struct sc_ent {
    uint64_t off;
    uint32_t first, n; /* its values from fields[first]; n: its pairs */
    uint32_t slot[SC_SLOTS];
    uint8_t nslots;
} sc_ent;

typedef struct sc_undo {
    uint32_t idx;
    as_pk_ref old;
} sc_undo;

/* The skeleton: the opcodes of an entry entry_one read, learnt so that the entries after
 * it, which Python's pickler writes with the same key references in the same order, are
 * matched by a compare of each key's bytes instead of being decoded. A pair's key is a memo
 * reference (its bytes, its slot and the interned string the slot held: the skeleton is
 * valid while every such slot still holds it), its value a hole read by fast_value, or for
 * a short fresh string and its MEMOIZE (a "N/A" in every entry) the same bytes again. */
#define SK_PAIRS 24
enum { SK_ANY, SK_CONST };
typedef struct sk_pair {
    uint64_t kw, km; /* the key's bytes, little-endian, and their mask */
    uint64_t vw, vm; /* SK_CONST: the value's bytes and mask */
    as_pk_ref kref;  /* the key's string (interned, or in the tree kept: either stays) */
    as_pk_ref vref;  /* SK_CONST: the value's string, interned */
    uint32_t kidx;   /* the key's memo slot */
    uint8_t klen, key, kind, vlen;
} sk_pair;

typedef struct skel {
    int valid;
    uint64_t serial; /* skeletons learnt so far */
    uint8_t put;     /* the entry's dict has a MEMOIZE */
    uint32_t n;
    sk_pair pr[SK_PAIRS];
} skel;

/* A template: the exact bytes of an entry sk_match read, with holes where its numbers and
 * its values' memo indices lie, so that the entries after it of the same byte layout (the
 * same opcodes and lengths: a trace has a handful, by its sizes' opcodes) are matched by
 * masked compares of 16 bytes at a time and their values read at fixed offsets. A template
 * belongs to the skeleton it was learnt under (skel.serial) and is valid while that is. */
#define TM_BYTES 128
#define TM_N 4
typedef uint8_t v16 __attribute__((vector_size(16)));
typedef struct tm_int {
    uint64_t keep;         /* the value: its bytes at off, << sh and back (arithmetic), & keep */
    uint8_t off, sh, key;  /* (keep: every bit for a signed one, its bytes' for an unsigned one) */
} tm_int;
typedef struct tm_get {
    uint8_t off, key;
    uint32_t mask; /* BINGET: 0xff, LONG_BINGET: 0xffffffff */
} tm_get;
typedef struct tmpl {
    uint64_t serial; /* its skeleton's, 0: empty */
    uint32_t len, nv, npairs;
    v16 w[TM_BYTES / 16], m[TM_BYTES / 16];
    uint8_t ni, ng, nput, put_entry;
    tm_int hi[SK_PAIRS];
    tm_get hg[SK_PAIRS];
    /* the entry's values as they are before its holes are read: each fixed value (None, a
     * bool, the skeleton's string, an empty list) in place, an int hole's type, none else */
    as_pk_val img[16];
    uint8_t put_off[SC_SLOTS]; /* its MEMOIZEs, in order: the entry's own first (put_entry) */
    as_pk_ref put_ref[SC_SLOTS];
} tmpl;

/* Where entry_one found a pair's key and value (for learning a skeleton). */
typedef struct sk_rec {
    uint32_t n, end, kat[SK_PAIRS], vat[SK_PAIRS]; /* offsets from the entry's '}' */
    as_pk_ref vref[SK_PAIRS];
    uint8_t key[SK_PAIRS];
} sk_rec;

struct pk_scan {
    as_pk_val *fields; /* the batch's entries' values, stride() an entry, by key */
    size_t nfields, capfields;
    as_pk_entry *out; /* the batch as handed out */
    size_t capout;
    sc_ent *ents;
    size_t nents, capents, next; /* next: the entry as_pk_scan_next hands out */
    size_t room;                 /* entries that fit ents, out and fields (entry_room) */
    as_pk_ref list;              /* the trace list of the batch handed out */
    sc_undo *undo;               /* memo writes of the batch being read */
    size_t nundo, capundo;
    as_pk_ref *items; /* containers' items, for the entry being read */
    size_t nitems, capitems;
    /* short strings seen (up to 7 bytes, with their length and type): their interned ref,
     * so that a fresh "N/A" in every entry is not hashed again */
    uint64_t skey[64];
    as_pk_ref sref[64];
    /* key strings by ref -> their number (key_of): a key whose memo line the frames'
     * references pushed out is not compared again; valid in one generation (AS_PK_NIL:
     * empty) */
    as_pk_ref kc_ref[64];
    uint8_t kc_key[64];
    uint64_t kc_gen;
    skel sk;       /* the layout of the entries being read (sk.valid 0: none) */
    sk_rec rec;    /* where the last entry entry_one read had its keys and values */
    tmpl tm[TM_N]; /* the skeleton's templates */
    unsigned tm_cur, tm_next;
    int sk_plain; /* every value of the entry sk_match read last may be a template's hole */
    sv *stk;      /* each try's stack and containers (scan.st, scan.open) */
    size_t capstk;
    sc_open *opn;
    size_t capopn;
};

/* The state of one try. */
typedef struct scan {
    pk_parser *p;
    pk_scan *sc;
    const uint8_t *w;
    size_t at, wn;
    size_t at0;   /* where the try began */
    size_t fwork; /* containers freeze looked through (bounded by the bytes read) */
    int at_end;   /* the window holds the rest of the input */
    sv *st; /* pk_scan's, capst of them */
    size_t depth, capst;
    size_t mk[SC_MARKS]; /* stack depth at each MARK */
    size_t nmk;
    sc_open *open; /* pk_scan's, capopen of them */
    size_t nopen, capopen;
    size_t memo_len; /* p->memo_len before the batch */
    uint64_t put_lim; /* tm_puts: slots below it are in a dense page it may write (put_limit) */
    uint64_t put_lo;     /* that page's first slot, */
    as_pk_ref *put_page; /* and its slots */
} scan;

static inline uint64_t rd(const uint8_t *s, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = n; i-- > 0;)
        v = v << 8 | s[i];
    return v;
}

static inline uint32_t rd32(const uint8_t *s)
{
    return (uint32_t)s[0] | (uint32_t)s[1] << 8 | (uint32_t)s[2] << 16 | (uint32_t)s[3] << 24;
}

/* The stack (which 0) or the containers being built (1) grown by one: 0 past their bound
 * or when memory refuses. */
static __attribute__((noinline)) int scan_grow(scan *s, int which)
{
    pk_scan *sc = s->sc;
    if (which == 0) {
        if (s->capst >= SC_DEPTH ||
            as_pk_grow(s->p, (void **)&sc->stk, &sc->capstk, s->capst + 1, sizeof *sc->stk))
            return 0;
        s->st = sc->stk, s->capst = sc->capstk < SC_DEPTH ? sc->capstk : SC_DEPTH;
    } else {
        if (s->capopen >= SC_OPEN ||
            as_pk_grow(s->p, (void **)&sc->opn, &sc->capopn, s->capopen + 1, sizeof *sc->opn))
            return 0;
        s->open = sc->opn, s->capopen = sc->capopn < SC_OPEN ? sc->capopn : SC_OPEN;
    }
    return 1;
}

/* Pushes a value; 0 when the stack is full. */
static inline int push(scan *s, sv v)
{
    if (s->depth >= s->capst && !scan_grow(s, 0))
        return 0;
    s->st[s->depth++] = v;
    return 1;
}

/* The fence of the innermost MARK (0: the batch's own). */
static inline size_t fence(const scan *s)
{
    return s->nmk ? s->mk[s->nmk - 1] : 0;
}

/* The entries (and memo writes) the first batch makes room for at once: its window's bytes
 * at 48 an entry (a real snapshot's take 54 to 130), at most SC_FIRST_ROOM. Grown from 64
 * instead, a small snapshot's first batch copied its arrays 3 times each (allocsim run
 * graph_probe.pickle.zst, 264 entries in 14 KiB: 31,000 instructions). */
#define SC_FIRST_ROOM 1024u
static size_t first_room(const scan *s, size_t need)
{
    size_t est = (s->wn - s->at) / 48;
    est = est < SC_FIRST_ROOM ? est : SC_FIRST_ROOM;
    return need > est ? need : est;
}

/* memo_set's room: the undo log's and slot idx's page dense; 1, or 0 (memory). */
static __attribute__((noinline)) int memo_room(scan *s, uint64_t idx)
{
    pk_parser *p = s->p;
    pk_scan *sc = s->sc;
    if (sc->nundo >= sc->capundo &&
        as_pk_grow(p, (void **)&sc->undo, &sc->capundo,
                   sc->capundo ? sc->nundo + 1 : first_room(s, sc->nundo + 1), sizeof *sc->undo))
        return 0;
    return p->mpages[idx >> PK_MPAGE_BITS].dense || !as_pk_memo_unpack(p, idx);
}

/* A memo write, logged for the undo; 0 when refused. A write over the slot of a container
 * still being built (PK_PENDING) is left to the VM: the container's finish would write its
 * copy over the newer value (Python's pickler never reuses a slot; a crafted pickle may). */
static HOT int memo_set(scan *s, uint64_t idx, as_pk_ref v)
{
    pk_parser *p = s->p;
    pk_scan *sc = s->sc;
    pk_mpage *g = &p->mpages[idx >> PK_MPAGE_BITS]; /* idx < capmemo: the callers' room */
    if ((sc->nundo >= sc->capundo || !g->dense) && !memo_room(s, idx))
        return 0;
    as_pk_ref *slot = &g->dense[idx & (PK_MPAGE - 1)], old = *slot;
    if (old == PK_PENDING)
        return 0;
    *slot = v;
    sc->undo[sc->nundo++] = (sc_undo){(uint32_t)idx, old};
    if (old == AS_PK_NIL) { /* an unset slot is in no line of the scanner's cache */
        p->memo_len++;
    } else {
        pk_memo_forget(p, idx);
        sc->sk.valid = 0; /* it may have been a key's */
    }
    return 1;
}

/* A scalar's interned copy (an item of an interned container, or memoized). */
static int intern_scalar(scan *s, const sv *v, as_pk_ref *r)
{
    pk_node n = {.type = v->type, .off = v->off, .u.i = v->i};
    return as_pk_intern_value(s->p, &n, NULL, r) == 0;
}

/* A value as a ref (the VM's intern_item), for an interned container's items. */
static int as_ref(scan *s, const sv *v, as_pk_ref *r)
{
    if (v->kind == SV_REF) {
        *r = v->x;
        return 1;
    }
    return v->kind == SV_SCALAR && intern_scalar(s, v, r);
}

/* Whether item r may sit in an interned container of type t (intern_item's test). */
static int item_ok(const scan *s, as_pk_ref r, uint8_t t)
{
    const pk_node *n = nd(s->p->pk, r);
    if (n->type != AS_PK_LIST && n->type != AS_PK_TUPLE && n->type != AS_PK_DICT)
        return 1;
    return t != AS_PK_DICT && !(n->flags & (PKF_DROPPED | PKF_NESTED | PKF_TRACE)) &&
           n->a <= PK_FLAT_CELLS;
}

/* A finished container c (consumed by a fill): its interned copy, as the VM's cut-back
 * makes it from a memo slot, which its slots get. 0 when it would not be interned. */
static int finish(scan *s, uint32_t c, int as_item, as_pk_ref *r)
{
    sc_open *o = &s->open[c];
    if (o->chunks > 64 || o->n > (o->type == AS_PK_DICT ? PK_FLAT_CELLS : PK_NESTED_ITEMS))
        return 0;
    if (o->type != AS_PK_DICT && as_item)
        return 0; /* a list in a list: interned flat by the VM; left to it */
    const as_pk_ref *items = o->n ? s->sc->items + o->first : NULL;
    for (uint32_t i = 0; i < o->n; i++)
        if (!item_ok(s, items[i], o->type))
            return 0;
    static const as_pk_ref none[1] = {AS_PK_NIL};
    pk_node n = {.type = o->type, .off = o->off};
    if (as_pk_intern_items(s->p, &n, o->n ? items : none, o->n, o->type != AS_PK_DICT, r))
        return 0;
    for (uint8_t k = 0; k < o->nslots; k++)
        if (pk_memo_set(s->p, o->slot[k], *r)) /* logged as PENDING when put */
            return 0;
    return 1;
}

/* v as the value of an entry's pair or a container's item: finished when open. */
static int settle(scan *s, sv *v, int as_item)
{
    as_pk_ref r;
    if (v->kind == SV_ENTRY)
        return 0;
    if (v->kind != SV_OPEN)
        return 1;
    if (!finish(s, v->x, as_item, &r))
        return 0;
    *v = (sv){.kind = SV_REF, .type = s->open[v->x].type, .x = r};
    return 1;
}

/* Items st[from..depth) into open container c (a fill), as refs, after its earlier ones. */
static int fill_open(scan *s, uint32_t c, size_t from)
{
    pk_scan *sc = s->sc;
    sc_open *o = &s->open[c];
    size_t k = s->depth - from;
    if (o->frozen || o->n + k > PK_NESTED_ITEMS || ++o->chunks > 64)
        return 0;
    int last = o->first + o->n == sc->nitems; /* its items end the pool: extend in place */
    size_t need = sc->nitems + k + (last ? 0 : o->n);
    if (need > sc->capitems &&
        as_pk_grow(s->p, (void **)&sc->items, &sc->capitems, need, sizeof *sc->items))
        return 0;
    if (!last) { /* move its items to the end */
        if (o->n)
            memmove(sc->items + sc->nitems, sc->items + o->first, o->n * sizeof *sc->items);
        o->first = (uint32_t)sc->nitems;
        sc->nitems += o->n;
    }
    for (size_t i = from; i < s->depth; i++) {
        sv *v = &s->st[i];
        if (o->type == AS_PK_DICT && ((i - from) % 2) == 0 && v->kind != SV_SCALAR &&
            (v->kind != SV_REF || v->type == AS_PK_LIST || v->type == AS_PK_DICT))
            return 0; /* an unhashable key: the VM's error */
        as_pk_ref r;
        if (!settle(s, v, 1) || !as_ref(s, v, &r))
            return 0;
        sc->items[sc->nitems++] = r;
    }
    o->n += (uint32_t)k;
    s->depth = from;
    return 1;
}

/* The number of string r among the reader's keys (as_pk_stream_keys), p->nkeys for
 * anything else. */
static __attribute__((noinline)) unsigned key_of(const pk_parser *p, as_pk_ref r)
{
    pk_scan *sc = p->sc;
    size_t c = ((size_t)r * 0x9E3779B9u >> 8) & 63;
    if (sc->kc_gen != p->generation + 1) { /* refs may name other values now */
        memset(sc->kc_ref, 0xff, sizeof sc->kc_ref);
        sc->kc_gen = p->generation + 1;
    }
    if (sc->kc_ref[c] == r)
        return sc->kc_key[c];
    const char *b = "";
    size_t n = nd(p->pk, r)->a;
    unsigned k = p->nkeys;
    if (nd(p->pk, r)->type == AS_PK_STR && (!n || !as_pk_str(p->pk, r, &b, &n)))
        for (k = 0; k < p->nkeys; k++) /* (an empty string may have no byte pool) */
            if (p->keylen[k] == n && memcmp(p->keys[k], b, n) == 0)
                break;
    sc->kc_ref[c] = r, sc->kc_key[c] = (uint8_t)k;
    return k;
}

/* Pairs st[from..depth) into the entry being read (its values by key, the last one wins). */
static int fill_entry(scan *s, uint32_t e, size_t from)
{
    pk_scan *sc = s->sc;
    size_t k = s->depth - from;
    if (k % 2)
        return 0;
    as_pk_val *f = sc->fields + sc->ents[e].first;
    for (size_t i = from; i < s->depth; i += 2) {
        sv *key = &s->st[i], *val = &s->st[i + 1];
        if (key->kind != SV_REF || key->type == AS_PK_LIST || key->type == AS_PK_DICT ||
            (val->kind >= SV_OPEN && !settle(s, val, 0)))
            return 0;
        f[key_of(s->p, key->x)] = (as_pk_val){.type = val->type,
                                              .ref = val->kind == SV_REF ? val->x : AS_PK_NIL,
                                              .i = val->kind == SV_SCALAR ? val->i : 0};
    }
    sc->ents[e].n += (uint32_t)(k / 2);
    s->depth = from;
    return 1;
}

/* SETITEMS, APPENDS (single: SETITEM, APPEND) inside the batch. */
static int fill(scan *s, uint8_t op)
{
    int single = op == 's' || op == 'a';
    size_t k = op == 's' ? 2 : 1, from;
    if (single) {
        if (s->depth < fence(s) + k + 1)
            return 0;
        from = s->depth - k;
    } else {
        if (!s->nmk)
            return 0;
        from = s->mk[s->nmk - 1];
        size_t below = s->nmk > 1 ? s->mk[s->nmk - 2] : 0;
        if (from < 1 || from - 1 < below)
            return 0;
    }
    sv *t = &s->st[from - 1];
    int dict = op == 's' || op == 'u';
    if (t->kind == SV_ENTRY && dict) {
        if (!single)
            s->nmk--;
        return fill_entry(s, t->x, from);
    }
    if (t->kind != SV_OPEN || (t->type == AS_PK_DICT) != dict || (dict && (s->depth - from) % 2))
        return 0;
    if (!single)
        s->nmk--;
    return fill_open(s, t->x, from);
}

/* MEMOIZE, BINPUT, LONG_BINPUT of the top value. */
static int put(scan *s, uint8_t op, const uint8_t *arg, size_t *len)
{
    pk_parser *p = s->p;
    uint64_t idx = op == 0x94 ? p->memo_len : op == 'q' ? arg[0] : rd32(arg);
    *len = op == 0x94 ? 1 : op == 'q' ? 2 : 5;
    uint64_t bound = p->wbase + s->at + PK_MEMO_SLACK;
    if (bound > p->lim.max_memo)
        bound = p->lim.max_memo;
    if (s->depth <= fence(s) || idx >= bound || (idx >= p->capmemo && as_pk_memo_room(p, idx)))
        return 0;
    sv *v = &s->st[s->depth - 1];
    as_pk_ref r;
    if (v->kind == SV_REF)
        return memo_set(s, idx, v->x);
    if (v->kind == SV_SCALAR)
        return intern_scalar(s, v, &r) && memo_set(s, idx, r);
    uint8_t *n = v->kind == SV_OPEN ? &s->open[v->x].nslots : &s->sc->ents[v->x].nslots;
    uint32_t *slots = v->kind == SV_OPEN ? s->open[v->x].slot : s->sc->ents[v->x].slot;
    if (*n >= SC_SLOTS || !memo_set(s, idx, PK_PENDING))
        return 0;
    slots[(*n)++] = (uint32_t)idx;
    return 1;
}

/* An entry's values in fields[]: its keys' and a scratch one, in 8 or 16. */
static inline unsigned stride(unsigned nkeys)
{
    _Static_assert(AS_PK_MAX_KEYS < 16, "an entry's values are 16 at most");
    return nkeys < 8 ? 8 : 16;
}

/* entry_room past its capacities: they grown for one more entry, and the count that fits
 * them all; 0 when memory refuses. */
static __attribute__((noinline)) int entry_grow(scan *s)
{
    pk_scan *sc = s->sc;
    size_t nf = stride(s->p->nkeys);
    size_t want = sc->capents ? sc->nents + 1 : first_room(s, sc->nents + 1);
    if (!((sc->nents < sc->capents ||
           !as_pk_grow(s->p, (void **)&sc->ents, &sc->capents, want, sizeof *sc->ents)) &&
          (sc->nents < sc->capout ||
           !as_pk_grow(s->p, (void **)&sc->out, &sc->capout, want, sizeof *sc->out)) &&
          (sc->nfields + nf <= sc->capfields ||
           !as_pk_grow(s->p, (void **)&sc->fields, &sc->capfields,
                       sc->capfields ? sc->nfields + nf : want * nf, sizeof *sc->fields))))
        return 0;
    size_t room = sc->capents < sc->capout ? sc->capents : sc->capout;
    if (room > sc->capfields / nf) /* nfields is nents strides */
        room = sc->capfields / nf;
    sc->room = room;
    return 1;
}

/* Room for one more entry, its values and its place in the batch handed out; 0 when memory
 * refuses it. */
static inline int entry_room(scan *s)
{
    return s->sc->nents < s->sc->room || entry_grow(s);
}

/* An entry's values before its pairs: none (all of its stride, the scratch one too). */
static inline void fields_none(as_pk_val *f, unsigned nkeys)
{
#define NONE_                                                                                      \
    {                                                                                              \
        .type = AS_PK_NONE, .ref = AS_PK_NIL                                                       \
    }
    static const as_pk_val none[16] = {NONE_, NONE_, NONE_, NONE_, NONE_, NONE_, NONE_, NONE_,
                                       NONE_, NONE_, NONE_, NONE_, NONE_, NONE_, NONE_, NONE_};
#undef NONE_
    if (stride(nkeys) == 8) /* fixed-length copies */
        memcpy(f, none, 8 * sizeof *f);
    else
        memcpy(f, none, 16 * sizeof *f);
}

/* EMPTY_DICT, EMPTY_LIST: at the batch's level a new entry (the one before is done). */
static int empty(scan *s, uint8_t op)
{
    pk_scan *sc = s->sc;
    uint64_t off = s->p->wbase + s->at;
    if (s->nmk == 0) {
        if (op != '}' || s->depth > 1 || (s->depth == 1 && s->st[0].kind != SV_ENTRY) ||
            sc->nents >= SC_MAX_ENTRIES)
            return 0;
        if (!entry_room(s))
            return 0;
        sc->ents[sc->nents] = (sc_ent){.off = off, .first = (uint32_t)sc->nfields};
        fields_none(sc->fields + sc->nfields, s->p->nkeys);
        sc->nfields += stride(s->p->nkeys);
        s->st[0] = (sv){.kind = SV_ENTRY, .type = AS_PK_DICT, .x = (uint32_t)sc->nents++};
        s->depth = 1;
        s->nopen = 0;
        sc->nitems = 0;
        return 1;
    }
    if (s->nopen >= s->capopen && !scan_grow(s, 1))
        return 0;
    s->open[s->nopen] = (sc_open){
        .type = op == '}' ? AS_PK_DICT : AS_PK_LIST, .first = (uint32_t)sc->nitems, .off = off};
    return push(s,
                (sv){.kind = SV_OPEN, .type = s->open[s->nopen].type, .x = (uint32_t)s->nopen++});
}

/* A number, None or a bool; len set. */
static int scalar(scan *s, uint8_t op, const uint8_t *arg, size_t *len)
{
    sv v = {.kind = SV_SCALAR, .type = AS_PK_INT, .off = s->p->wbase + s->at};
    switch (op) {
    case 'J':
        v.i = (int32_t)rd32(arg), *len = 5;
        break;
    case 'K':
        v.i = arg[0], *len = 2;
        break;
    case 'M':
        v.i = (int64_t)rd(arg, 2), *len = 3;
        break;
    case 0x8a: { /* LONG1 */
        unsigned n = arg[0];
        if (n > 8) { /* beyond 64 bits, no value kept, as the VM's (a C++ frame's line -1) */
            if (s->wn - s->at < 2 + (size_t)n)
                return 0;
            v.type = AS_PK_BIGINT, *len = 2 + n;
            break;
        }
        uint64_t u = rd(arg + 1, n);
        if (n > 0 && n < 8 && (arg[n] & 0x80))
            u |= ~0ull << (8 * n);
        memcpy(&v.i, &u, sizeof u);
        *len = 2 + n;
        break;
    }
    case 'G': { /* BINFLOAT, big-endian */
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
            u = u << 8 | arg[i];
        v.type = AS_PK_FLOAT, v.i = (int64_t)u, *len = 9;
        break;
    }
    case 'N':
        v.type = AS_PK_NONE, *len = 1;
        break;
    default: /* NEWTRUE, NEWFALSE */
        v.type = AS_PK_BOOL, v.i = op == 0x88, *len = 1;
        break;
    }
    return s->nmk && push(s, v);
}

/* str_ref past its cache: the string interned (and cached under key, when not 0). */
static __attribute__((noinline)) int str_intern(scan *s, uint8_t type, const uint8_t *b, size_t n,
                                                uint64_t off, uint64_t key, size_t slot,
                                                as_pk_ref *r)
{
    pk_node node = {.type = type, .a = (uint32_t)n, .off = off};
    if (as_pk_intern_value(s->p, &node, b, r))
        return 0;
    if (key)
        s->sc->skey[slot] = key, s->sc->sref[slot] = *r;
    return 1;
}

/* The interned ref of string bytes b[0..n) of type at offset off (b has 8 bytes readable):
 * 1, or 0. */
static HOT int str_ref(scan *s, uint8_t type, const uint8_t *b, size_t n, uint64_t off,
                       as_pk_ref *r)
{
    uint64_t key = 0;
    size_t slot = 0;
    if (n < 8) { /* the cache of short strings (their bytes, length and type: never 0) */
        memcpy(&key, b, 8);
        key = (n ? key & (~0ull >> (64 - 8 * n)) : 0) | (uint64_t)(n + 1) << 56 |
              (uint64_t)type << 60;
        slot = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 58);
        if (s->sc->skey[slot] == key) {
            *r = s->sc->sref[slot];
            return 1;
        }
    }
    return str_intern(s, type, b, n, off, key, slot, r);
}

/* SHORT_BINUNICODE, BINUNICODE, SHORT_BINBYTES in the window: interned. */
static int string(scan *s, uint8_t op, const uint8_t *arg, size_t *len)
{
    size_t hl = op == 'X' ? 4 : 1, n = hl == 4 ? rd32(arg) : arg[0];
    if (n > s->wn - s->at - 1 - hl)
        return SC_MORE;
    uint8_t type = op == 'C' ? AS_PK_BYTES : AS_PK_STR;
    as_pk_ref r;
    *len = 1 + hl + n;
    if (!s->nmk || !str_ref(s, type, arg + hl, n, s->p->wbase + s->at + 1 + hl, &r))
        return 0;
    return push(s, (sv){.kind = SV_REF, .type = type, .x = r});
}

/* A reference to memo slot idx while the container put there is being built (PK_PENDING):
 * a frame that recurs in one stack is a reference to a dict of the same frames list, which
 * the list's fill has not finished yet. The dict is finished now, as that fill would
 * finish it (its slots get its interned copy, and are its no more: the finish at the fill
 * writes only slots put after), and frozen: a fill of it after would change what the
 * reference saw, and is left to the VM. AS_PK_NIL for anything else. */
static as_pk_ref freeze(scan *s, uint64_t idx)
{
    /* a look through the containers a reference: a crafted batch of many could make that
     * quadratic, so its work is bounded by the bytes read (a real stack's is well under) */
    s->fwork += s->nopen;
    if (s->fwork > 16 * (s->at - s->at0) + 4096)
        return AS_PK_NIL;
    for (size_t c = s->nopen; c-- > 0;) {
        sc_open *o = &s->open[c];
        for (uint8_t k = 0; k < o->nslots; k++) {
            as_pk_ref r;
            if (o->slot[k] != idx)
                continue;
            if (o->type != AS_PK_DICT || !finish(s, (uint32_t)c, 1, &r))
                return AS_PK_NIL;
            o->frozen = 1;
            o->nslots = 0; /* given their value: a put over one after is newer than the dict */
            return r;
        }
    }
    return AS_PK_NIL; /* an entry's dict */
}

/* BINGET, LONG_BINGET of a slot set and finished, or of a dict being built (freeze). */
static int get(scan *s, uint8_t op, const uint8_t *arg, size_t *len)
{
    pk_parser *p = s->p;
    uint64_t idx = op == 'h' ? arg[0] : rd32(arg);
    *len = op == 'h' ? 2 : 5;
    uint8_t type = AS_PK_NONE;
    as_pk_ref r = pk_memo_typed(p, idx, &type);
    if (r == PK_PENDING && (r = freeze(s, idx)) != AS_PK_NIL)
        type = AS_PK_DICT;
    if (!s->nmk || r == AS_PK_NIL || r == PK_PENDING)
        return 0;
    return push(s, (sv){.kind = SV_REF, .type = type, .x = r});
}

/* The batch's APPENDS: every entry done, the memo slots of the entry dicts their dropped
 * marker (an entry of more than 3 pairs is never interned), the trace list marked. */
static int commit(scan *s)
{
    pk_parser *p = s->p;
    pk_scan *sc = s->sc;
    if (s->depth != 1 || s->st[0].kind != SV_ENTRY)
        return 0;
    for (size_t i = 0; i < sc->nents; i++) {
        const sc_ent *e = &sc->ents[i];
        if (e->nslots && e->n * 2 <= PK_FLAT_CELLS)
            return 0;
        for (uint8_t k = 0; k < e->nslots; k++)
            if (pk_memo_set(p, e->slot[k], AS_PK_IBIT | 2u))
                return 0;
    }
    if (p->nstack + sc->nents > p->lim.max_stack)
        return 0; /* the VM would have run out of stack */
    p->nmarks--;
    as_pk_vm_trace_list(p, p->nstack - 1);
    sc->list = p->stack[p->nstack - 1];
    sc->next = 0;
    p->wp = s->at + 1;
    p->generation++;
    return 1;
}

/* One opcode: SC_GO, SC_DONE at the batch's APPENDS, SC_ABORT or SC_MORE. */
static int step(scan *s)
{
    if (s->wn - s->at < 16)
        return s->at_end ? SC_ABORT : SC_MORE;
    uint8_t op = s->w[s->at];
    const uint8_t *arg = s->w + s->at + 1;
    size_t len = 1;
    int ok;
    switch (op) {
    case '}':
    case ']':
        ok = empty(s, op);
        break;
    case '(':
        ok = s->nmk < SC_MARKS && s->p->nmarks + s->nmk < s->p->lim.max_marks &&
             (s->nmk || (s->depth == 1 && s->st[0].kind == SV_ENTRY));
        if (ok)
            s->mk[s->nmk++] = s->depth;
        break;
    case 'e':
        if (!s->nmk)
            return commit(s) ? SC_DONE : SC_ABORT;
        ok = fill(s, op);
        break;
    case 'u':
    case 's':
    case 'a':
        ok = fill(s, op);
        break;
    case 0x94:
    case 'q':
    case 'r':
        ok = put(s, op, arg, &len);
        break;
    case 'h':
    case 'j':
        ok = get(s, op, arg, &len);
        break;
    case 0x8c:
    case 'X':
    case 'C':
        if ((ok = string(s, op, arg, &len)) == SC_MORE)
            return s->at_end ? SC_ABORT : SC_MORE;
        break;
    case 'J':
    case 'K':
    case 'M':
    case 0x8a:
    case 'G':
    case 'N':
    case 0x88:
    case 0x89:
        ok = scalar(s, op, arg, &len);
        break;
    case 0x95: { /* FRAME: checked as the VM does when the frame is in the window */
        uint64_t flen = rd(arg, 8);
        if (flen > s->wn - s->at - 9)
            return s->at_end ? SC_ABORT : SC_MORE;
        ok = 1, len = 9;
        break;
    }
    default:
        ok = 0;
    }
    if (!ok)
        return SC_ABORT;
    s->at += len;
    return SC_GO;
}

/* Takes back the memo writes of a try. */
static void undo(scan *s)
{
    pk_scan *sc = s->sc;
    while (sc->nundo) {
        sc->nundo--;
        pk_memo_set(s->p, sc->undo[sc->nundo].idx, sc->undo[sc->nundo].old); /* dense */
    }
    s->p->memo_len = s->memo_len;
    sc->nents = sc->nfields = sc->nitems = 0;
}

/* ---- the common layout in one go ------------------------------------------------------- */

/* A memo put at w[at] of ref v (PK_PENDING: a container not finished): its length, or 0
 * when it is not a put or the memo refuses it. */
static HOT size_t fast_put(scan *s, size_t at, as_pk_ref v)
{
    pk_parser *p = s->p;
    const uint8_t *w = s->w;
    uint64_t idx;
    size_t len;
    if (w[at] == 0x94)
        idx = p->memo_len, len = 1;
    else if (w[at] == 'q')
        idx = w[at + 1], len = 2;
    else if (w[at] == 'r')
        idx = rd32(w + at + 1), len = 5;
    else
        return 0;
    uint64_t bound = p->wbase + at + PK_MEMO_SLACK;
    if (bound > p->lim.max_memo)
        bound = p->lim.max_memo;
    if (idx >= bound || (idx >= p->capmemo && as_pk_memo_room(p, idx)) || !memo_set(s, idx, v))
        return 0;
    return len;
}

/* A memo reference at w[at] (BINGET, LONG_BINGET) to a finished value, its node's type in
 * *type: 0 or its length. */
static HOT size_t fast_get(const scan *s, size_t at, as_pk_ref *r, uint8_t *type)
{
    pk_parser *p = s->p;
    const uint8_t *w = s->w;
    uint64_t idx;
    size_t len;
    if (w[at] == 'h')
        idx = w[at + 1], len = 2;
    else if (w[at] == 'j')
        idx = rd32(w + at + 1), len = 5;
    else
        return 0;
    if ((*r = pk_memo_typed(p, idx, type)) == AS_PK_NIL || *r == PK_PENDING)
        return 0;
    return len;
}

/* Item k of the frames list being read. */
static int frame_item(scan *s, size_t k, as_pk_ref x)
{
    pk_scan *sc = s->sc;
    if (k >= PK_NESTED_ITEMS)
        return 0;
    if (sc->nitems + k >= sc->capitems &&
        as_pk_grow(s->p, (void **)&sc->items, &sc->capitems, sc->nitems + k + 1, sizeof *sc->items))
        return 0;
    sc->items[sc->nitems + k] = x;
    return 1;
}

/* The common frame of a frames list, memo slot idx: a ref to a finished flat dict (item_ok;
 * interned, or kept in the tree from the snapshot's segments), read straight from a dense
 * page, since a frames list's items are many distinct frames that the memo references'
 * cache would mostly miss; 1 with *x, or 0 for anything else (fast_get and item_ok then
 * decide). */
static inline int frame_ref(const pk_parser *p, uint64_t idx, as_pk_ref *x)
{
    if (idx >= p->capmemo)
        return 0;
    const as_pk_ref *dense = p->mpages[idx >> PK_MPAGE_BITS].dense;
    if (!dense)
        return 0;
    as_pk_ref r = dense[idx & (PK_MPAGE - 1)];
    if (r >= PK_PENDING) /* unset, or being filled */
        return 0;
    const pk_node *n = nd(p->pk, r);
    if (n->type != AS_PK_DICT || (n->flags & (PKF_DROPPED | PKF_NESTED | PKF_TRACE)) ||
        n->a > PK_FLAT_CELLS)
        return 0;
    *x = r;
    return 1;
}

/* A frames list at w[at] (EMPTY_LIST, its put, and MARK items APPENDS, or one item APPEND,
 * or none), its items memo references to finished flat dicts: interned (its slot too), as
 * *r; 0 or its length. An item of MARK ... APPENDS costs one check of the window and, for
 * the common frame (frame_ref), no call. */
static size_t fast_frames(scan *s, size_t at, as_pk_ref *r)
{
    pk_scan *sc = s->sc;
    const uint8_t *w = s->w;
    size_t start = at, len = 0;
    uint32_t slot[SC_SLOTS];
    size_t nslot = 0, n = 0;
    uint64_t off = s->p->wbase + at;
    at++;
    while (s->wn - at >= 16 && (w[at] == 0x94 || w[at] == 'q' || w[at] == 'r') &&
           nslot < SC_SLOTS) {
        uint64_t idx = w[at] == 0x94 ? s->p->memo_len : w[at] == 'q' ? w[at + 1] : rd32(w + at + 1);
        if (!(len = fast_put(s, at, PK_PENDING)))
            return 0;
        slot[nslot++] = (uint32_t)idx;
        at += len;
    }
    as_pk_ref x;
    uint8_t type;
    if (s->wn - at >= 16 && w[at] == '(') { /* MARK, items, APPENDS */
        const pk_parser *p = s->p;
        const size_t lim = s->wn - 16; /* w[at .. at + 16) is in the window while at <= lim */
        /* the items' room (frame_item grows it; none before the first: NULL + 0 is undefined) */
        as_pk_ref *it = sc->items ? sc->items + sc->nitems : NULL;
        size_t room = sc->capitems - sc->nitems;
        if (room > PK_NESTED_ITEMS)
            room = PK_NESTED_ITEMS;
        for (at++;; at += len) {
            uint64_t idx;
            if (at > lim)
                return 0;
            if (w[at] == 'h')
                idx = w[at + 1], len = 2;
            else if (w[at] == 'j')
                idx = rd32(w + at + 1), len = 5;
            else if (w[at] == 'e')
                break;
            else
                return 0;
            if (!frame_ref(p, idx, &x) &&
                (!fast_get(s, at, &x, &type) || !item_ok(s, x, AS_PK_LIST)))
                return 0;
            if (n < room) {
                it[n++] = x;
                continue;
            }
            if (!frame_item(s, n++, x))
                return 0;
            it = sc->items + sc->nitems;
            room = sc->capitems - sc->nitems;
            if (room > PK_NESTED_ITEMS)
                room = PK_NESTED_ITEMS;
        }
        at++;
    } else if (s->wn - at >= 16 && (len = fast_get(s, at, &x, &type)) && w[at + len] == 'a') {
        if (!item_ok(s, x, AS_PK_LIST) || !frame_item(s, n++, x))
            return 0;
        at += len + 1;
    } /* else an empty list */
    static const as_pk_ref none[1] = {AS_PK_NIL};
    pk_node node = {.type = AS_PK_LIST, .off = off};
    if (as_pk_intern_items(s->p, &node, n ? sc->items + sc->nitems : none, n, 1, r))
        return 0;
    for (size_t k = 0; k < nslot; k++)
        if (pk_memo_set(s->p, slot[k], *r))
            return 0;
    return at - start;
}

static HOT size_t fast_str(scan *s, size_t at, as_pk_ref *r);

/* A plain value at w[at] into *v: 0 or its length. */
static HOT size_t fast_value(scan *s, size_t at, as_pk_val *v)
{
    const uint8_t *w = s->w;
    uint8_t op = w[at];
    size_t len;
    as_pk_ref r;
    switch (op) {
    case 'K':
        *v = (as_pk_val){.type = AS_PK_INT, .ref = AS_PK_NIL, .i = w[at + 1]};
        return 2;
    case 'M':
        *v = (as_pk_val){.type = AS_PK_INT, .ref = AS_PK_NIL, .i = w[at + 1] | w[at + 2] << 8};
        return 3;
    case 'J':
        *v = (as_pk_val){.type = AS_PK_INT, .ref = AS_PK_NIL, .i = (int32_t)rd32(w + at + 1)};
        return 5;
    case 0x8a: { /* LONG1: n little-endian bytes, two's complement, by shifts of 8 read */
        unsigned n = w[at + 1];
        uint64_t u;
        if (n > 8)
            return 0;
        memcpy(&u, w + at + 2, 8);
        unsigned sh = 64 - 8 * n; /* 64 for n = 0: the value is 0 */
        int64_t i = n ? (int64_t)(u << (sh & 63)) >> (sh & 63) : 0;
        *v = (as_pk_val){.type = AS_PK_INT, .ref = AS_PK_NIL, .i = i};
        return 2 + n;
    }
    case 'N':
        *v = (as_pk_val){.type = AS_PK_NONE, .ref = AS_PK_NIL};
        return 1;
    case 0x88:
    case 0x89:
        *v = (as_pk_val){.type = AS_PK_BOOL, .ref = AS_PK_NIL, .i = op == 0x88};
        return 1;
    case 'h':
    case 'j': {
        uint8_t type;
        if (!(len = fast_get(s, at, &r, &type)))
            return 0;
        *v = (as_pk_val){.type = type, .ref = r};
        return len;
    }
    case ']':
        if (!(len = fast_frames(s, at, &r)))
            return 0;
        *v = (as_pk_val){.type = AS_PK_LIST, .ref = r};
        return len;
    case 0x8c:
        if (!(len = fast_str(s, at, &r)))
            return 0;
        *v = (as_pk_val){.type = AS_PK_STR, .ref = r};
        return len;
    default:
        return 0;
    }
}

/* A string at w[at] (SHORT_BINUNICODE, then its puts), or a memo reference to one: its
 * ref in *r; 0 or the length. */
static HOT size_t fast_str(scan *s, size_t at, as_pk_ref *r)
{
    const uint8_t *w = s->w;
    size_t len, start = at;
    uint8_t type;
    if ((len = fast_get(s, at, r, &type)))
        return type == AS_PK_STR ? len : 0;
    if (w[at] != 0x8c || w[at + 1] > s->wn - at - 2 ||
        !str_ref(s, AS_PK_STR, w + at + 2, w[at + 1], s->p->wbase + at + 2, r))
        return 0;
    at += 2 + w[at + 1];
    while (s->wn - at >= 16 && (len = fast_put(s, at, *r)))
        at += len;
    return at - start;
}

/* A key at w[at]: a memo reference to a string (its number among the reader's keys cached
 * with the memo line, so a key the pickler refers back to costs a compare of the index) or
 * a fresh string and its puts; its number in *k: the length, or 0. */
static HOT size_t fast_key(scan *s, size_t at, unsigned *k)
{
    pk_parser *p = s->p;
    const uint8_t *w = s->w;
    uint64_t idx;
    size_t len;
    as_pk_ref r;
    uint8_t type = AS_PK_NONE;
    if (w[at] == 'h')
        idx = w[at + 1], len = 2;
    else if (w[at] == 'j')
        idx = rd32(w + at + 1), len = 5;
    else if ((len = fast_str(s, at, &r))) {
        *k = key_of(p, r);
        return len;
    } else
        return 0;
    size_t h = (size_t)idx & (PK_MCACHE - 1);
    if (p->mc_idx[h] == idx && p->mc_key[h] != PK_KEY_UNSEEN) {
        *k = p->mc_key[h];
        return len;
    }
    if ((r = pk_memo_typed(p, idx, &type)) == AS_PK_NIL || r == PK_PENDING || type != AS_PK_STR)
        return 0;
    *k = key_of(p, r);
    if (p->mc_idx[h] == idx)
        p->mc_key[h] = (uint8_t)*k;
    return len;
}

/* One entry at w[at] in the layout Python's pickler writes (EMPTY_DICT, its puts, MARK,
 * string keys with plain values, SETITEMS), its values straight to their keys' places
 * f[]: the length, or 0 (its memo writes are logged: the caller takes them back). With
 * rec, where its keys and values lie too (sk_learn). */
static HOT size_t entry_one(scan *s, size_t at, as_pk_val *f, sc_ent *e, sk_rec *rec)
{
    const uint8_t *w = s->w;
    const size_t start = at;
    if (s->wn < 16)
        return 0;
    const size_t lim = s->wn - 16; /* w[at .. at + 16) is in the window while at <= lim */
    size_t len;
    unsigned nslots = 0;
    for (at++; at <= lim && nslots < SC_SLOTS; at += len) {
        uint64_t idx = w[at] == 0x94 ? s->p->memo_len : w[at] == 'q' ? w[at + 1] : rd32(w + at + 1);
        if (!(len = fast_put(s, at, PK_PENDING)))
            break;
        e->slot[nslots++] = (uint32_t)idx;
    }
    e->nslots = (uint8_t)nslots;
    if (at > lim || w[at] != '(')
        return 0;
    fields_none(f, s->p->nkeys);
    uint32_t n = 0;
    for (at++;; n++) {
        unsigned k;
        if (at > lim)
            return 0;
        if (w[at] == 'u')
            break;
        if (!(len = fast_key(s, at, &k)))
            return 0;
        if (rec && n < SK_PAIRS)
            rec->kat[n] = (uint32_t)(at - start), rec->key[n] = (uint8_t)k;
        at += len;
        as_pk_val v;
        if (at > lim || !(len = fast_value(s, at, &v)))
            return 0;
        if (rec && n < SK_PAIRS)
            rec->vat[n] = (uint32_t)(at - start), rec->vref[n] = v.ref;
        f[k] = v;
        at += len;
    }
    if (rec)
        rec->n = n, rec->end = (uint32_t)(at - start);
    e->n = n;
    /* a small entry may be interned: the general loop's */
    return n * 2 <= PK_FLAT_CELLS ? 0 : at + 1 - start;
}

/* The memo writes of a try back to nundo of them, memo_len as it was. */
static void undo_to(scan *s, size_t nundo, size_t memo_len)
{
    pk_scan *sc = s->sc;
    while (sc->nundo > nundo) {
        sc->nundo--;
        pk_memo_set(s->p, sc->undo[sc->nundo].idx, sc->undo[sc->nundo].old); /* dense */
    }
    s->p->memo_len = memo_len;
}

/* Bytes b[0..n) (n <= 8, 8 readable) as a little-endian word, and the mask of n bytes. */
static inline uint64_t ld64(const uint8_t *b)
{
    uint64_t v;
    memcpy(&v, b, 8);
    return v;
}

static inline uint64_t mask_of(size_t n)
{
    return n >= 8 ? ~0ull : (1ull << (8 * n)) - 1;
}

/* The skeleton of the entry entry_one just read at w[start] with recording (sc->rec):
 * learnt when every key is a memo reference to an interned string, else none. */
static void sk_learn(scan *s, size_t start)
{
    pk_scan *sc = s->sc;
    skel *k = &sc->sk;
    const sk_rec *r = &sc->rec;
    const uint8_t *w = s->w + start;
    k->valid = 0;
    if (r->n > SK_PAIRS || r->n * 2 <= PK_FLAT_CELLS)
        return;
    if (r->kat[0] == 2 && w[1] == '(')
        k->put = 0;
    else if (r->kat[0] == 3 && w[1] == 0x94 && w[2] == '(')
        k->put = 1;
    else
        return;
    for (uint32_t i = 0; i < r->n; i++) {
        sk_pair *pr = &k->pr[i];
        const uint8_t *kb = w + r->kat[i], *vb = w + r->vat[i];
        size_t klen = r->vat[i] - r->kat[i],
               vlen = (i + 1 < r->n ? r->kat[i + 1] : r->end) - r->vat[i];
        uint64_t idx;
        if (kb[0] == 'h' && klen == 2)
            idx = kb[1];
        else if (kb[0] == 'j' && klen == 5)
            idx = rd32(kb + 1);
        else
            return; /* a fresh key */
        as_pk_ref kr = pk_memo_get(s->p, idx);
        if (kr == AS_PK_NIL || kr == PK_PENDING || nd(s->p->pk, kr)->type != AS_PK_STR)
            return;
        *pr = (sk_pair){.kw = ld64(kb) & mask_of(klen),
                        .km = mask_of(klen),
                        .kref = kr,
                        .kidx = (uint32_t)idx,
                        .klen = (uint8_t)klen,
                        .key = (uint8_t)key_of(s->p, kr), /* (what the slot names now) */
                        .kind = SK_ANY};
        if (vb[0] == 0x8c && vlen == 3u + vb[1] && vlen <= 8 && vb[vlen - 1] == 0x94 &&
            ibit(r->vref[i])) { /* a short fresh string and one MEMOIZE */
            pr->kind = SK_CONST;
            pr->vw = ld64(vb) & mask_of(vlen), pr->vm = mask_of(vlen);
            pr->vref = r->vref[i];
            pr->vlen = (uint8_t)vlen;
        }
    }
    k->n = r->n;
    k->valid = 1;
    k->serial++;
}

/* Whether the skeleton's keys still name what they named when it was learnt (at a try's
 * start: the VM or an undo may have written the memo since). */
static void sk_check(pk_parser *p)
{
    skel *k = &p->sc->sk;
    for (uint32_t i = 0; i < k->n && k->valid; i++)
        if (pk_memo_get(p, k->pr[i].kidx) != k->pr[i].kref)
            k->valid = 0;
}

/* The entry at w[at] matched against the skeleton (s->wn - at >= 16): what entry_one
 * would read, its length, or 0 at the first difference (its memo writes are logged). */
static HOT size_t sk_match(scan *s, size_t at, as_pk_val *f, sc_ent *e)
{
    const skel *k = &s->sc->sk;
    const uint8_t *w = s->w;
    /* at <= lim: a key's 8 bytes and its value's first 16 (a key is 5 bytes at most) */
    const size_t start = at, lim = s->wn - 24;
    size_t len;
    int plain = 1;
    static const uint8_t hole_op[256] = {['K'] = 1, ['M'] = 1, ['J'] = 1,  [0x8a] = 1, ['h'] = 1,
                                         ['j'] = 1, ['N'] = 1, [0x88] = 1, [0x89] = 1, [']'] = 1};
    if (s->wn < 24)
        return 0;
    at++;
    e->nslots = 0;
    if (k->put) {
        e->slot[0] = (uint32_t)s->p->memo_len;
        if (w[at] != 0x94 || !fast_put(s, at, PK_PENDING))
            return 0;
        e->nslots = 1;
        at++;
    }
    if (w[at] != '(')
        return 0;
    at++;
    fields_none(f, s->p->nkeys);
    for (uint32_t i = 0; i < k->n; i++) {
        const sk_pair *pr = &k->pr[i];
        if (at > lim || (ld64(w + at) & pr->km) != pr->kw)
            return 0;
        at += pr->klen;
        if (pr->kind == SK_CONST) {
            if ((ld64(w + at) & pr->vm) != pr->vw || !fast_put(s, at + pr->vlen - 1, pr->vref))
                return 0;
            f[pr->key] = (as_pk_val){.type = AS_PK_STR, .ref = pr->vref};
            at += pr->vlen;
        } else {
            as_pk_val v;
            uint8_t op = w[at];
            if (!(len = fast_value(s, at, &v)))
                return 0;
            /* tm_learn takes an empty fresh list and its put (2 bytes), no other list */
            plain &= hole_op[op] & (op != ']' || len == 2);
            f[pr->key] = v;
            at += len;
        }
    }
    s->sc->sk_plain = plain;
    if (at > lim || w[at] != 'u' || !k->valid) /* (a put over a key's slot) */
        return 0;
    e->n = k->n;
    return at + 1 - start;
}

/* A template of the entry at w[at] (len bytes) that sk_match just read, into the next
 * slot: when each of its values is a number, None, a bool, a memo reference or the
 * skeleton's fresh string, and it is short enough. */
static void tm_learn(scan *s, size_t at, size_t len, const as_pk_val *f)
{
    pk_scan *sc = s->sc;
    const skel *k = &sc->sk;
    const uint8_t *b = s->w + at;
    tmpl nt, *t = &nt;
    uint8_t m[TM_BYTES], w[TM_BYTES];
    if (len > TM_BYTES || s->wn - at < TM_BYTES + 16)
        return;
    memset(m, 0, sizeof m);
    memset(m, 0xff, len);
    t->ni = t->ng = t->nput = 0;
    fields_none(t->img, s->p->nkeys);
    t->put_entry = k->put;
    size_t pos = 2;
    if (k->put)
        t->put_off[t->nput] = 1, t->put_ref[t->nput++] = PK_PENDING, pos = 3;
    uint32_t seen = 0;
    for (uint32_t i = 0; i < k->n; i++) {
        const sk_pair *pr = &k->pr[i];
        if (pr->key < s->p->nkeys && (seen >> pr->key & 1))
            return; /* a key twice: its last value, in order */
        seen |= 1u << pr->key;
        pos += pr->klen;
        size_t vlen, hole = 0, hl = 0;
        uint8_t op = b[pos];
        if (pr->kind == SK_CONST) {
            t->img[pr->key] = (as_pk_val){.type = AS_PK_STR, .ref = pr->vref};
            vlen = pr->vlen;
            if (t->nput >= SC_SLOTS)
                return;
            t->put_off[t->nput] = (uint8_t)(pos + vlen - 1), t->put_ref[t->nput++] = pr->vref;
        } else if (op == 'K' || op == 'M' || op == 'J' ||
                   (op == 0x8a && b[pos + 1] && b[pos + 1] <= 8)) {
            unsigned n = op == 'K' ? 1 : op == 'M' ? 2 : op == 'J' ? 4 : b[pos + 1];
            hole = op == 0x8a ? 2 : 1, hl = n, vlen = hole + n;
            t->hi[t->ni++] = (tm_int){.off = (uint8_t)(pos + hole),
                                      .sh = (uint8_t)(64 - 8 * n),
                                      .keep = op == 'J' || op == 0x8a ? ~0ull : mask_of(n),
                                      .key = pr->key};
            t->img[pr->key] = (as_pk_val){.type = AS_PK_INT, .ref = AS_PK_NIL};
        } else if (op == 'h' || op == 'j') {
            hole = 1, hl = op == 'h' ? 1 : 4, vlen = 1 + hl;
            t->hg[t->ng++] = (tm_get){
                .off = (uint8_t)(pos + 1), .key = pr->key, .mask = op == 'h' ? 0xffu : 0xffffffffu};
        } else if (op == 'N' || op == 0x88 || op == 0x89 || (op == 0x8a && !b[pos + 1])) {
            vlen = op == 0x8a ? 2 : 1;
            t->img[pr->key] = (as_pk_val){.type = op == 'N'    ? AS_PK_NONE
                                                  : op == 0x8a ? AS_PK_INT
                                                               : AS_PK_BOOL,
                                          .ref = AS_PK_NIL,
                                          .i = op == 0x88};
        } else if (op == ']' && b[pos + 1] == 0x94 && pr->key < s->p->nkeys &&
                   f[pr->key].type == AS_PK_LIST && ibit(f[pr->key].ref) && t->nput < SC_SLOTS &&
                   (i + 1 < k->n ? (ld64(b + pos + 2) & k->pr[i + 1].km) == k->pr[i + 1].kw
                                 : b[pos + 2] == 'u')) { /* an empty fresh list, put once */
            vlen = 2;
            t->img[pr->key] = f[pr->key];
            t->put_off[t->nput] = (uint8_t)(pos + 1), t->put_ref[t->nput++] = f[pr->key].ref;
        } else {
            return; /* a string, a frames list: no template */
        }
        if (pos + vlen >= len)
            return;
        memset(m + pos + hole, 0, hl);
        pos += vlen;
    }
    if (pos != len - 1 || b[pos] != 'u')
        return;
    memcpy(w, b, TM_BYTES);
    for (size_t i = 0; i < TM_BYTES; i++)
        w[i] &= m[i];
    t->nv = (uint32_t)(len + 15) / 16;
    memcpy(t->w, w, sizeof t->w);
    memcpy(t->m, m, sizeof t->m);
    t->len = (uint32_t)len;
    t->npairs = k->n;
    t->serial = k->serial;
    sc->tm[sc->tm_next] = nt;
    sc->tm_cur = sc->tm_next;
    sc->tm_next = (sc->tm_next + 1) % TM_N;
}

/* Whether the bytes at b are template t's, holes aside (b has TM_BYTES readable). */
static HOT int tm_same(const tmpl *t, const uint8_t *b)
{
    v16 d = {0}, x;
#define TM_CMP(i) (memcpy(&x, b + 16 * (i), 16), d |= (x ^ t->w[i]) & t->m[i])
    switch (t->nv) { /* unrolled: the last vectors first (nv >= 1) */
    case 8:
        TM_CMP(7); /* fall through */
    case 7:
        TM_CMP(6); /* fall through */
    case 6:
        TM_CMP(5); /* fall through */
    case 5:
        TM_CMP(4); /* fall through */
    case 4:
        TM_CMP(3); /* fall through */
    case 3:
        TM_CMP(2); /* fall through */
    case 2:
        TM_CMP(1); /* fall through */
    default:
        TM_CMP(0);
    }
#undef TM_CMP
    uint64_t lo, hi;
    memcpy(&lo, &d, 8);
    memcpy(&hi, (uint8_t *)&d + 8, 8);
    return (lo | hi) == 0;
}

/* The end of the run of slots from idx that tm_puts may write in place: within idx's page
 * when it is dense, the memo's capacity and its bound (0: none), and that page's slots. A
 * page stays dense and in place while a try is under way (packing runs between batches,
 * and a larger memo moves the page table, not its pages), so both hold for the try. */
static __attribute__((noinline)) void put_limit(scan *s, uint64_t idx)
{
    pk_parser *p = s->p;
    uint64_t lim = ((idx >> PK_MPAGE_BITS) + 1) << PK_MPAGE_BITS;
    if (lim > p->capmemo)
        lim = p->capmemo;
    if (lim > p->lim.max_memo)
        lim = p->lim.max_memo;
    as_pk_ref *dense = idx < lim ? p->mpages[idx >> PK_MPAGE_BITS].dense : NULL;
    s->put_lim = dense ? lim : 0;
    s->put_page = dense, s->put_lo = idx & ~(uint64_t)(PK_MPAGE - 1);
}

/* The memo writes of template t's MEMOIZEs at w[at], logged; 0 when one is refused. The
 * common case in a few stores: fresh slots memo_len.. of one dense page, the undo log's
 * room, within the memo's bound; else one fast_put each. */
static HOT int tm_puts(scan *s, const tmpl *t, size_t at, sc_ent *e)
{
    pk_parser *p = s->p;
    pk_scan *sc = s->sc;
    uint64_t idx = p->memo_len, end = idx + t->nput;
    unsigned n = t->nput;
    e->nslots = t->put_entry;
    e->slot[0] = (uint32_t)idx;
    if (end > s->put_lim && n) /* past the dense page known: that of idx, if it is one */
        put_limit(s, idx);
    if (n && end <= s->put_lim && end <= p->wbase + at + PK_MEMO_SLACK &&
        sc->nundo + n <= sc->capundo) {
        as_pk_ref *slot = s->put_page + (idx - s->put_lo);
        sc_undo *u = sc->undo + sc->nundo;
        unsigned i = 0;
        for (; i < n && slot[i] == AS_PK_NIL; i++) {
            slot[i] = t->put_ref[i];
            u[i] = (sc_undo){(uint32_t)(idx + i), AS_PK_NIL};
        }
        sc->nundo += i;
        p->memo_len += i;
        if (i == n)
            return 1;
        for (; i < n; i++) /* a slot was set: the rest one by one */
            if (!fast_put(s, at + t->put_off[i], t->put_ref[i]))
                return 0;
        return 1;
    }
    for (unsigned i = 0; i < n; i++)
        if (!fast_put(s, at + t->put_off[i], t->put_ref[i]))
            return 0;
    return 1;
}

/* The entry at w[at] read by template t (its bytes matched): what sk_match would read, its
 * length, or 0 (its memo writes are logged). Its MEMOIZEs are written first, so a memo
 * reference to one of their slots, which would come before it in the bytes, is declined. */
static HOT size_t tm_read(scan *s, const tmpl *t, size_t at, as_pk_val *f, sc_ent *e)
{
    const uint8_t *b = s->w + at;
    uint64_t m0 = s->p->memo_len;
    if (!tm_puts(s, t, at, e))
        return 0;
    if (stride(s->p->nkeys) == 8) /* fixed-length copies */
        memcpy(f, t->img, 8 * sizeof *f);
    else
        memcpy(f, t->img, 16 * sizeof *f);
    const unsigned ni = t->ni, ng = t->ng, nput = t->nput;
    for (unsigned i = 0; i < ni; i++) { /* (no key twice: tm_learn; f is not t) */
        const tm_int h = t->hi[i];
        f[h.key].i = (int64_t)((uint64_t)((int64_t)(ld64(b + h.off) << h.sh) >> h.sh) & h.keep);
    }
    for (unsigned i = 0; i < ng; i++) {
        const tm_get h = t->hg[i];
        uint8_t type;
        uint32_t idx = rd32(b + h.off) & h.mask;
        as_pk_ref r = pk_memo_typed(s->p, idx, &type);
        if (r == AS_PK_NIL || r == PK_PENDING || idx - m0 < nput)
            return 0;
        f[h.key].type = type;
        f[h.key].ref = r;
    }
    if (!s->sc->sk.valid) /* (a put over a key's slot) */
        return 0;
    e->n = t->npairs;
    return t->len;
}

/* The entry at w[at] by a template of the skeleton's, the last one that matched first: its
 * length, or 0 (none did; the memo writes of a try taken back). */
static HOT size_t tm_any(scan *s, size_t at, as_pk_val *f, sc_ent *e, size_t nundo, size_t memo_len)
{
    pk_scan *sc = s->sc;
    if (s->wn - at < TM_BYTES + 16)
        return 0;
    for (unsigned k = 0, i = sc->tm_cur; k < TM_N; k++, i = (i + 1) % TM_N) {
        const tmpl *t = &sc->tm[i];
        /* its last byte first: entries of another layout are most often of another length */
        if (t->serial != sc->sk.serial || s->w[at + t->len - 1] != 'u' || !tm_same(t, s->w + at))
            continue;
        size_t len = tm_read(s, t, at, f, e);
        if (len) {
            sc->tm_cur = i;
            return len;
        }
        undo_to(s, nundo, memo_len);
        return 0;
    }
    return 0;
}

/* The entries at s->at in the common layout (entry_one), read one after another: 1 when
 * one was read at least (the last one's state as empty() and fill_entry leave it), or 0;
 * an entry that is not in the layout is taken back whole and left to the general loop. */
static int entry_fast(scan *s)
{
    pk_scan *sc = s->sc;
    size_t at = s->at, len, got = 0;
    while (s->wn - at >= 16 && s->w[at] == '}' && sc->nents < SC_MAX_ENTRIES && entry_room(s)) {
        size_t nundo = sc->nundo, memo_len = s->p->memo_len;
        sc_ent *e = &sc->ents[sc->nents];
        e->off = s->p->wbase + at; /* (each reader sets its n, nslots and slots) */
        e->first = (uint32_t)sc->nfields;
        as_pk_val *f = sc->fields + sc->nfields;
        len = sc->sk.valid ? tm_any(s, at, f, e, nundo, memo_len) : 0;
        if (!len && sc->sk.valid && (len = sk_match(s, at, f, e)) && sc->sk_plain)
            tm_learn(s, at, len, f);
        if (!len) {
            undo_to(s, nundo, memo_len);
            if ((len = entry_one(s, at, f, e, &sc->rec)))
                sk_learn(s, at);
        }
        if (!len) {
            undo_to(s, nundo, memo_len);
            break;
        }
        sc->nfields += stride(s->p->nkeys);
        sc->nents++;
        at += len;
        got++;
    }
    if (!got)
        return 0;
    s->st[0] = (sv){.kind = SV_ENTRY, .type = AS_PK_DICT, .x = (uint32_t)sc->nents - 1};
    s->depth = 1;
    s->nopen = 0;
    sc->nitems = 0;
    s->at = at;
    return 1;
}

/* The hot loop: an entry's keys and plain values inline, with the window in locals; the
 * other opcodes through step(). */
static int scan_loop(scan *s)
{
    pk_parser *p = s->p;
    const uint8_t *w = s->w;
    uint64_t wbase = p->wbase;
    for (;;) {
        size_t at = s->at;
        if (s->wn - at >= 16 && s->nmk && s->depth < s->capst) {
            sv *v = &s->st[s->depth];
            uint8_t op = w[at];
            uint64_t idx;
            as_pk_ref r;
            uint8_t type = AS_PK_NONE;
            switch (op) {
            case 'h':
            case 'j':
                idx = op == 'h' ? w[at + 1] : rd32(w + at + 1);
                if ((r = pk_memo_typed(p, idx, &type)) == AS_PK_NIL)
                    return SC_ABORT;
                if (r == PK_PENDING)
                    break; /* get's (freeze) */
                *v = (sv){.kind = SV_REF, .type = type, .x = r};
                s->depth++;
                s->at = at + (op == 'h' ? 2 : 5);
                continue;
            case 'K':
                *v = (sv){.kind = SV_SCALAR, .type = AS_PK_INT, .i = w[at + 1], .off = wbase + at};
                s->depth++;
                s->at = at + 2;
                continue;
            case 'J':
                *v = (sv){.kind = SV_SCALAR,
                          .type = AS_PK_INT,
                          .i = (int32_t)rd32(w + at + 1),
                          .off = wbase + at};
                s->depth++;
                s->at = at + 5;
                continue;
            default:
                break;
            }
        }
        if (s->wn - at >= 16 && !s->nmk && s->w[at] == '}' &&
            (s->depth == 0 || (s->depth == 1 && s->st[0].kind == SV_ENTRY)) &&
            s->sc->nents < SC_MAX_ENTRIES && entry_fast(s))
            continue;
        int rc = step(s);
        if (rc != SC_GO)
            return rc;
    }
}

int as_pk_scan_batch(pk_parser *p)
{
    if (!p->sc && !(p->sc = calloc(1, sizeof *p->sc)))
        return 0;
    pk_scan *sc = p->sc;
    if ((!sc->stk && as_pk_grow(p, (void **)&sc->stk, &sc->capstk, SC_FIRST, sizeof *sc->stk)) ||
        (!sc->opn && as_pk_grow(p, (void **)&sc->opn, &sc->capopn, SC_FIRST, sizeof *sc->opn)))
        return 0;
    scan *s = malloc(sizeof *s);
    if (!s)
        return 0;
    size_t want = SC_WINDOW;
    int rc = SC_ABORT, refilled = 0;
    p->quiet = 1;
    for (;;) {
        /* The window as it is when it holds a quarter of what is wanted, else refilled: a
         * refill moves what is left to the buffer's start. */
        uint64_t left = p->lim.max_input - (p->wbase + p->wp); /* never past the limit */
        size_t ask = left < want ? (size_t)left : want;
        int at_end = 0;
        if (refilled || p->wn - p->wp < ask / 4) {
            if (p->wn - p->wp < ask && as_pk_refill(p, ask))
                break;
            at_end = p->wn - p->wp < ask;
            refilled = 1;
        }
        *s = (scan){.p = p,
                    .sc = p->sc,
                    .w = p->w,
                    .at = p->wp,
                    .at0 = p->wp,
                    .wn = p->wn,
                    .at_end = at_end,
                    .memo_len = p->memo_len,
                    .st = sc->stk,
                    .capst = sc->capstk < SC_DEPTH ? sc->capstk : SC_DEPTH,
                    .open = sc->opn,
                    .capopen = sc->capopn < SC_OPEN ? sc->capopn : SC_OPEN};
        s->sc->nundo = s->sc->nents = s->sc->nfields = s->sc->nitems = 0;
        sk_check(p);
        /* Each value the VM would make costs a byte at least, and its stack holds the
         * batch's entries and one's values: the batch cannot reach the VM's limits. */
        if (p->pk->nnodes + p->pk->ninodes - 3 + (p->wn - p->wp) >= p->lim.max_nodes ||
            p->nstack + SC_MAX_ENTRIES + SC_DEPTH >= p->lim.max_stack) {
            rc = SC_ABORT;
            break;
        }
        rc = scan_loop(s);
        if (rc == SC_DONE)
            break;
        undo(s);
        if (rc != SC_MORE || at_end)
            break;
        if (refilled && p->wn - p->wp >= ask) { /* the window was full: a larger one */
            if (want >= SC_WINDOW_MAX || ask < want)
                break;
            want *= 4;
        }
        refilled = 1;
    }
    p->quiet = 0;
    free(s);
    p->sc->nundo = 0;
    if (rc == SC_DONE) /* nothing is mid-read: the memo's old pages pack */
        as_pk_memo_pack(p);
    return rc == SC_DONE;
}

int as_pk_scan_next(pk_parser *p, as_pk_item *item, const as_pk_entry **e, size_t *n)
{
    pk_scan *sc = p->sc;
    if (!sc || sc->next >= sc->nents)
        return 0;
    for (size_t i = 0; i < sc->nents; i++) {
        const sc_ent *x = &sc->ents[i];
        sc->out[i] = (as_pk_entry){.off = x->off, .n = x->n, .f = sc->fields + x->first};
    }
    pk_node *l = &p->pk->nodes[sc->list];
    item->ref = AS_PK_NIL;
    item->device = l->dev;
    item->index = l->a;
    l->a += (uint32_t)sc->nents;
    *e = sc->out;
    *n = sc->nents;
    sc->next = sc->nents = 0; /* the values stay until the next batch */
    return 1;
}

void as_pk_scan_free(pk_parser *p)
{
    if (!p->sc)
        return;
    free(p->sc->fields);
    free(p->sc->out);
    free(p->sc->ents);
    free(p->sc->undo);
    free(p->sc->items);
    free(p->sc->stk);
    free(p->sc->opn);
    free(p->sc);
    p->sc = NULL;
}
