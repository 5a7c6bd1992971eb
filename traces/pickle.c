/*
 * pickle.c - the plain-data pickle reader (see pickle.h for what is accepted), over a
 * memory buffer (as_pk_parse) or an as_instream as it decompresses (as_pk_stream).
 *
 * Values live in one arena of 24-byte nodes; container contents in a pool of 32-bit cells,
 * as chunks [next, count, item...]; string bytes in a byte pool. Each APPENDS/SETITEMS
 * batch becomes one chunk (repeated single APPENDs extend the chunk in place while it is
 * the pool's last), and a container's chunks are prepended while parsing and put back in
 * order once at STOP. A MARK records where the three pools end; once a streamed batch of
 * trace entries (the items above that MARK) has been handed out, the pools are cut back
 * there, and memo slots that named a dropped value are re-pointed at an interned copy
 * (refs with AS_PK_IBIT set live in a second, content-deduplicated node table).
 * Invariant: every index read from the input is bounds-checked before use, every pool
 * grows through one budgeted function, and nothing in this file recurses, so a hostile
 * pickle can only hit a limit and get an error.
 */
#include "pickle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle_internal.h"
#include "trace.h"
#include "trace_internal.h"

/* Opcode names, for messages (NULL: not a pickle opcode). */
static const char *const op_names[256] = {
    ['('] = "MARK",
    ['.'] = "STOP",
    ['0'] = "POP",
    ['1'] = "POP_MARK",
    ['2'] = "DUP",
    ['F'] = "FLOAT",
    ['I'] = "INT",
    ['J'] = "BININT",
    ['K'] = "BININT1",
    ['L'] = "LONG",
    ['M'] = "BININT2",
    ['N'] = "NONE",
    ['P'] = "PERSID",
    ['Q'] = "BINPERSID",
    ['R'] = "REDUCE",
    ['S'] = "STRING",
    ['T'] = "BINSTRING",
    ['U'] = "SHORT_BINSTRING",
    ['V'] = "UNICODE",
    ['X'] = "BINUNICODE",
    ['a'] = "APPEND",
    ['b'] = "BUILD",
    ['c'] = "GLOBAL",
    ['d'] = "DICT",
    ['}'] = "EMPTY_DICT",
    ['e'] = "APPENDS",
    ['g'] = "GET",
    ['h'] = "BINGET",
    ['i'] = "INST",
    ['j'] = "LONG_BINGET",
    ['l'] = "LIST",
    [']'] = "EMPTY_LIST",
    ['o'] = "OBJ",
    ['p'] = "PUT",
    ['q'] = "BINPUT",
    ['r'] = "LONG_BINPUT",
    ['s'] = "SETITEM",
    ['t'] = "TUPLE",
    [')'] = "EMPTY_TUPLE",
    ['u'] = "SETITEMS",
    ['G'] = "BINFLOAT",
    ['B'] = "BINBYTES",
    ['C'] = "SHORT_BINBYTES",
    [0x80] = "PROTO",
    [0x81] = "NEWOBJ",
    [0x82] = "EXT1",
    [0x83] = "EXT2",
    [0x84] = "EXT4",
    [0x85] = "TUPLE1",
    [0x86] = "TUPLE2",
    [0x87] = "TUPLE3",
    [0x88] = "NEWTRUE",
    [0x89] = "NEWFALSE",
    [0x8a] = "LONG1",
    [0x8b] = "LONG4",
    [0x8c] = "SHORT_BINUNICODE",
    [0x8d] = "BINUNICODE8",
    [0x8e] = "BINBYTES8",
    [0x8f] = "EMPTY_SET",
    [0x90] = "ADDITEMS",
    [0x91] = "FROZENSET",
    [0x92] = "NEWOBJ_EX",
    [0x93] = "STACK_GLOBAL",
    [0x94] = "MEMOIZE",
    [0x95] = "FRAME",
    [0x96] = "BYTEARRAY8",
    [0x97] = "NEXT_BUFFER",
    [0x98] = "READONLY_BUFFER",
};

static const char *op_name(uint8_t op)
{
    return op_names[op];
}

static const char *type_names[] = {
    [AS_PK_NONE] = "None", [AS_PK_BOOL] = "bool",
    [AS_PK_INT] = "int",   [AS_PK_FLOAT] = "float",
    [AS_PK_STR] = "str",   [AS_PK_BYTES] = "bytes",
    [AS_PK_LIST] = "list", [AS_PK_TUPLE] = "tuple",
    [AS_PK_DICT] = "dict", [AS_PK_BIGINT] = "int beyond 64 bits",
};

const char *as_pk_type_name(as_pk_type t)
{
    return (unsigned)t < sizeof type_names / sizeof type_names[0] ? type_names[t] : "?";
}

static int fail(pk_parser *p, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(pk_parser *p, int code, const char *fmt, ...)
{
    if (p->err && !p->quiet) { /* quiet: the entry scanner tries, the VM reports */
        va_list ap;
        va_start(ap, fmt);
        p->err->code = code;
        p->err->offset = p->pos;
        vsnprintf(p->err->msg, sizeof p->err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* *arr resized to bytes (made when NULL), delta of them new, charged against max_memory:
 * 0, or the parser's error (*arr as it was). */
static int prealloc(pk_parser *p, void **arr, size_t bytes, uint64_t delta, const char *what)
{
    if (p->mem + delta > p->lim.max_memory)
        return fail(p, AS_ENOMEM, "parsing needs more than %llu MiB of memory (for %s; the limit)",
                    (unsigned long long)(p->lim.max_memory >> 20), what);
    void *n = realloc(*arr, bytes);
    if (!n)
        return fail(p, AS_ENOMEM, "out of host memory for %s", what);
    *arr = n;
    p->mem += delta;
    return 0;
}

/* The one way a pool grows: capacity doubling from 64 items, charged against max_memory
 * before the allocation. */
static int pgrow_slow(pk_parser *p, void **arr, size_t *cap, size_t need, size_t elem,
                      const char *what)
{
    size_t nc = *cap ? *cap : 64;
    while (nc < need) {
        if (nc > SIZE_MAX / 4 / elem)
            return fail(p, AS_ENOMEM, "pickle too large: %s overflow", what);
        nc *= 2;
    }
    int rc = prealloc(p, arr, nc * elem, (uint64_t)(nc - *cap) * elem, what);
    if (rc == 0)
        *cap = nc;
    return rc;
}

static inline int pgrow(pk_parser *p, void **arr, size_t *cap, size_t need, size_t elem,
                        const char *what)
{
    return need <= *cap ? 0 : pgrow_slow(p, arr, cap, need, elem, what);
}

static inline const uint8_t *str_bytes(const as_pk *pk, as_pk_ref r, const pk_node *n)
{
    return (ibit(r) ? pk->ibytes : pk->bytes) + n->u.data;
}

static inline int new_node(pk_parser *p, uint8_t type, as_pk_ref *out)
{
    as_pk *pk = p->pk;
    if (pk->nnodes >= pk->capnodes || pk->nnodes + pk->ninodes - 3 >= p->lim.max_nodes) {
        if (pk->nnodes + pk->ninodes - 3 >= p->lim.max_nodes)
            return fail(p, AS_ENOMEM, "more than %llu values (limit)",
                        (unsigned long long)p->lim.max_nodes);
        int rc = pgrow(p, (void **)&pk->nodes, &pk->capnodes, pk->nnodes + 1, sizeof *pk->nodes,
                       "values");
        if (rc)
            return rc;
    }
    pk_node *n = &pk->nodes[pk->nnodes];
    *n = (pk_node){.type = type, .off = p->pos};
    if (type == AS_PK_LIST || type == AS_PK_TUPLE || type == AS_PK_DICT)
        n->u.head = AS_PK_NIL;
    *out = (as_pk_ref)pk->nnodes++;
    return 0;
}

static int push_slow(pk_parser *p, as_pk_ref r)
{
    if (p->nstack >= p->lim.max_stack)
        return fail(p, AS_ENOMEM, "unpickling stack deeper than %llu (limit)",
                    (unsigned long long)p->lim.max_stack);
    int rc =
        pgrow(p, (void **)&p->stack, &p->capstack, p->nstack + 1, sizeof *p->stack, "the stack");
    if (rc)
        return rc;
    p->stack_room = p->capstack < p->lim.max_stack ? p->capstack : p->lim.max_stack;
    p->stack[p->nstack++] = r;
    return 0;
}

/* The hot path (every opcode but MARK and the container fills pushes): no call, no check
 * beyond the capacity, which never exceeds max_stack unchecked. */
static inline int push(pk_parser *p, as_pk_ref r)
{
    if (p->nstack < p->stack_room) {
        p->stack[p->nstack++] = r;
        return 0;
    }
    return push_slow(p, r);
}

/* Stack items above the innermost MARK: what an opcode may consume (Python's "fence"). */
static size_t avail(const pk_parser *p)
{
    return p->nstack - (p->nmarks ? p->marks[p->nmarks - 1].stack : 0);
}

static int underflow(pk_parser *p, uint8_t op, size_t need)
{
    return fail(p, AS_ECORRUPT, "%s needs %zu value%s on the stack above the mark, has %zu",
                op_name(op), need, need == 1 ? "" : "s", avail(p));
}

/* Appends cells items[0..n) to container c as one chunk (or into its newest chunk when that
 * chunk is the last thing in the pool). */
/* Reverses node n's list of chunks (in cells). */
static void reverse_chunks(uint32_t *cells, pk_node *n)
{
    uint32_t prev = AS_PK_NIL, cur = n->u.head;
    while (cur != AS_PK_NIL) {
        uint32_t next = cells[cur];
        cells[cur] = prev;
        prev = cur;
        cur = next;
    }
    n->u.head = prev;
}

static int add_items(pk_parser *p, as_pk_ref c, const as_pk_ref *items, size_t n)
{
    as_pk *pk = p->pk;
    if (n == 0)
        return 0;
    if (ibit(c)) /* a memo reference to a container dropped with its batch */
        return fail(p, AS_EFORMAT,
                    "adding items to a container that was streamed and dropped (a memo "
                    "reference back into the trace) is not supported");
    pk_node *node = &pk->nodes[c];
    if (node->flags & PKF_OLDFIRST) { /* read mid-parse: newest first again, to grow */
        reverse_chunks(pk->cells, node);
        node->flags &= (uint8_t)~PKF_OLDFIRST;
    }
    if ((uint64_t)node->a + n > 0xFFFFFFFEull)
        return fail(p, AS_ENOMEM, "container with more than 2^32 items");
    if (p->nmarks && c < p->marks[p->nmarks - 1].nodes && c < p->marks[p->nmarks - 1].low)
        p->marks[p->nmarks - 1].low = c;
    uint32_t head = node->u.head;
    int extend = head != AS_PK_NIL && (size_t)head + 2 + pk->cells[head + 1] == pk->ncells;
    size_t need = pk->ncells + n + (extend ? 0 : 2);
    if (need > 0xFFFFFFFEull)
        return fail(p, AS_ENOMEM, "pickle too large: more than 2^32 container cells");
    int rc =
        pgrow(p, (void **)&pk->cells, &pk->capcells, need, sizeof *pk->cells, "container items");
    if (rc)
        return rc;
    node = &pk->nodes[c];
    if (extend) {
        pk->cells[head + 1] += (uint32_t)n;
    } else {
        uint32_t at = (uint32_t)pk->ncells;
        pk->cells[at] = head;
        pk->cells[at + 1] = (uint32_t)n;
        node->u.head = at;
        pk->ncells += 2;
    }
    memcpy(pk->cells + pk->ncells, items, n * sizeof *items);
    pk->ncells += n;
    node->a += (uint32_t)n;
    return 0;
}

/* n (0..8) little-endian bytes; the widths opcodes use most are single loads. */
static inline uint64_t rd_le(const uint8_t *s, int n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint16_t h;
    uint32_t w;
    uint64_t d;
    switch (n) {
    case 1:
        return s[0];
    case 2:
        memcpy(&h, s, 2);
        return h;
    case 4:
        memcpy(&w, s, 4);
        return w;
    case 8:
        memcpy(&d, s, 8);
        return d;
    default:
        break;
    }
#endif
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | s[i];
    return v;
}

/* Dict keys must be hashable in Python: refuse the two unhashable types we can build. */
static int check_keys(pk_parser *p, uint8_t op, const as_pk_ref *kv, size_t n)
{
    for (size_t i = 0; i < n; i += 2) {
        uint8_t t = nd(p->pk, kv[i])->type;
        if (t == AS_PK_LIST || t == AS_PK_DICT)
            return fail(p, AS_ECORRUPT, "%s: unhashable dict key (a %s)", op_name(op),
                        as_pk_type_name(t));
    }
    return 0;
}

/* ---- the memo's pages (pickle_internal.h) ------------------------------------------------ */

/* A dense page of slots slots (PK_MPAGE but for a first page still growing), charged
 * against max_memory, every slot AS_PK_NIL unless fill is 0. */
static int page_alloc(pk_parser *p, size_t slots, int fill, as_pk_ref **out)
{
    const size_t bytes = slots * sizeof **out;
    as_pk_ref *d = NULL;
    int rc = prealloc(p, (void **)&d, bytes, bytes, "the memo");
    if (rc)
        return rc;
    if (fill)
        memset(d, 0xff, bytes); /* AS_PK_NIL */
    *out = d;
    return 0;
}

/* The first page, while it is the only one, holds PK_MEMO_FIRST slots and doubles up to
 * PK_MPAGE as the memo grows (a small pickle's memo is a few hundred slots; a full page is
 * 16 KiB written): room for slot idx, or a full page when a second one is needed. */
static int first_page_grow(pk_parser *p, uint64_t idx)
{
    pk_mpage *g = &p->mpages[0];
    size_t old = p->capmemo, nc = old;
    while (nc <= idx && nc < PK_MPAGE)
        nc *= 2;
    if (nc == old)
        return 0;
    int rc = prealloc(p, (void **)&g->dense, nc * sizeof *g->dense,
                      (uint64_t)(nc - old) * sizeof *g->dense, "the memo");
    if (rc)
        return rc;
    memset(g->dense + old, 0xff, (nc - old) * sizeof *g->dense); /* AS_PK_NIL */
    p->capmemo = nc;
    return 0;
}

int as_pk_memo_room(pk_parser *p, uint64_t idx)
{
    size_t need = (size_t)(idx >> PK_MPAGE_BITS) + 1;
    int rc = pgrow(p, (void **)&p->mpages, &p->cappages, need, sizeof *p->mpages, "the memo");
    if (rc == 0 && p->npages == 0) {
        pk_mpage *g = &p->mpages[0];
        *g = (pk_mpage){0};
        if ((rc = page_alloc(p, PK_MEMO_FIRST, 1, &g->dense)) == 0)
            p->npages = 1, p->capmemo = PK_MEMO_FIRST;
    }
    if (rc == 0 && p->npages == 1 && p->capmemo < PK_MPAGE) /* the page is dense: not packed */
        rc = first_page_grow(p, need > 1 ? PK_MPAGE : idx);
    while (rc == 0 && p->npages < need) {
        pk_mpage *g = &p->mpages[p->npages];
        *g = (pk_mpage){0};
        if ((rc = page_alloc(p, PK_MPAGE, 1, &g->dense)) == 0) {
            p->npages++;
            p->capmemo = p->npages * PK_MPAGE;
        }
    }
    return rc;
}

static uint64_t packed_bytes(const pk_mpage *g)
{
    return (uint64_t)g->npal * sizeof *g->pal + (PK_MPAGE * g->width) / 8;
}

int as_pk_memo_unpack(pk_parser *p, uint64_t idx)
{
    pk_mpage *g = &p->mpages[idx >> PK_MPAGE_BITS];
    as_pk_ref *d;
    int rc = page_alloc(p, PK_MPAGE, 0, &d);
    if (rc)
        return rc;
    for (size_t i = 0; i < PK_MPAGE; i++)
        d[i] = pk_memo_packed(g, i);
    p->mem -= packed_bytes(g);
    free(g->pal);
    free(g->bits);
    *g = (pk_mpage){.dense = d, .pinned = 1};
    return 0;
}

/* A page's palette being built: its distinct values in the order first seen, found by an
 * open-addressed table (AS_PK_NIL marks an empty cell, so NIL itself is kept aside). */
typedef struct pal_build {
    as_pk_ref key[512], pal[256];
    uint8_t val[512];
    unsigned n;
    int nil; /* NIL's index, -1 before it is seen */
} pal_build;

/* v's index in the palette, added when new; -1 for a 257th value. */
static int pal_of(pal_build *b, as_pk_ref v)
{
    if (v == AS_PK_NIL) {
        if (b->nil < 0) {
            if (b->n == 256)
                return -1;
            b->nil = (int)b->n, b->pal[b->n++] = v;
        }
        return b->nil;
    }
    unsigned h = (unsigned)((v * 0x9E3779B1u) >> 23);
    while (b->key[h] != AS_PK_NIL && b->key[h] != v)
        h = (h + 1) & 511;
    if (b->key[h] == AS_PK_NIL) {
        if (b->n == 256)
            return -1;
        b->key[h] = v, b->val[h] = (uint8_t)b->n, b->pal[b->n++] = v;
    }
    return b->val[h];
}

/* 1 with ix[i] the palette index of slot i of d, or 0 when d holds more than 256 values. A
 * trace entry writes its slots in pairs that repeat (its dict's marker, its interned "N/A"),
 * so a pair equal to the one before takes that one's indices without a look-up. */
static int page_index(const as_pk_ref *d, pal_build *b, uint8_t *ix)
{
    _Static_assert(PK_MPAGE % 8 == 0, "a page packs in whole words");
    uint64_t prev = 0;
    uint8_t pair[2] = {0, 0};
    for (size_t i = 0; i < PK_MPAGE; i += 2) {
        uint64_t two;
        memcpy(&two, d + i, sizeof two);
        if (two != prev || i == 0) {
            int a = pal_of(b, d[i]), c = a < 0 ? -1 : pal_of(b, d[i + 1]);
            if (c < 0)
                return 0;
            pair[0] = (uint8_t)a, pair[1] = (uint8_t)c, prev = two;
        }
        memcpy(ix + i, pair, 2);
    }
    return 1;
}

/* The eight indices at ix as one word, index k in its byte k. */
static inline uint64_t ix8(const uint8_t *ix)
{
    uint64_t x = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&x, ix, sizeof x);
#else
    for (unsigned k = 0; k < 8; k++)
        x |= (uint64_t)ix[k] << (8 * k);
#endif
    return x;
}

/* The indices ix of a page as w-bit fields, low bits first (w 1, 2, 4 or 8): eight at a
 * time, each step folding a byte's field onto the one before it. */
static void pack_bits(uint8_t *bits, const uint8_t *ix, unsigned w)
{
    size_t i;
    if (w == 8) {
        memcpy(bits, ix, PK_MPAGE);
        return;
    }
    for (i = 0; i < PK_MPAGE; i += 8) {
        uint64_t x = ix8(ix + i);
        if (w == 1) {
            x |= x >> 7, x |= x >> 14, x |= x >> 28;
            bits[i / 8] = (uint8_t)x;
        } else if (w == 2) {
            x |= x >> 6, x |= x >> 12;
            bits[i / 4] = (uint8_t)x, bits[i / 4 + 1] = (uint8_t)(x >> 32);
        } else {
            x |= x >> 4;
            for (unsigned k = 0; k < 4; k++)
                bits[i / 2 + k] = (uint8_t)(x >> 16 * k);
        }
    }
}

/* Page g as a palette and an index a slot, when it has at most 256 distinct values (and
 * memory for the packed form; else it stays as it is). */
static void pack_page(pk_parser *p, pk_mpage *g)
{
    pal_build b;
    uint8_t ix[PK_MPAGE];
    if (!g->dense || g->pinned)
        return;
    memset(b.key, 0xff, sizeof b.key);
    b.n = 0, b.nil = -1;
    if (!page_index(g->dense, &b, ix))
        return;
    unsigned n = b.n, w = n <= 1 ? 0 : n <= 2 ? 1 : n <= 4 ? 2 : n <= 16 ? 4 : 8;
    pk_mpage q = {.width = (uint8_t)w, .npal = (uint16_t)n};
    q.pal = malloc(n * sizeof *q.pal);
    q.bits = w ? malloc(PK_MPAGE * w / 8) : NULL;
    if (!q.pal || (w && !q.bits)) {
        free(q.pal);
        free(q.bits);
        return;
    }
    memcpy(q.pal, b.pal, n * sizeof *q.pal);
    if (w)
        pack_bits(q.bits, ix, w);
    p->mem -= PK_MPAGE * sizeof *g->dense;
    p->mem += packed_bytes(&q);
    free(g->dense);
    *g = q;
}

void as_pk_memo_pack(pk_parser *p)
{
    if (p->npages <= PK_MEMO_DENSE)
        return; /* a small memo stays as it is */
    while (p->packed_upto + 2 < p->npages)
        pack_page(p, &p->mpages[p->packed_upto++]);
}

void as_pk_memo_free(pk_parser *p)
{
    for (size_t i = 0; i < p->npages; i++) {
        free(p->mpages[i].dense);
        free(p->mpages[i].pal);
        free(p->mpages[i].bits);
    }
    free(p->mpages);
}

/* The scanner's arrays (a batch's entries, their values, the undo log) grow by 4 where the
 * tree's pools double: they are filled once per batch and kept, so the first batch of a
 * snapshot walks them from 64 items to its size, each step a copy into fresh pages; two
 * steps at a time halve the steps (allocsim run graph_probe.pickle.zst: 142 -> 134 page
 * faults, 50,000 instructions fewer), for up to 4 times the room a batch needs (2 before). */
int as_pk_grow(pk_parser *p, void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need > *cap && *cap && need / 4 < *cap)
        need = 4 * *cap;
    return pgrow(p, arr, cap, need, elem, "the entry scanner");
}

static inline int memo_put(pk_parser *p, uint8_t op, uint64_t idx)
{
    if (avail(p) < 1)
        return underflow(p, op, 1);
    /* A real pickler numbers memo slots 0, 1, 2, ... and each put costs at least a byte, so
     * an index far past the bytes read so far only comes from a crafted memo bomb: the memo
     * never takes more than 4 bytes per byte read (plus a little slack). */
    uint64_t bound = p->pos + PK_MEMO_SLACK;
    if (bound > p->lim.max_memo)
        bound = p->lim.max_memo;
    if (idx >= bound)
        return fail(p, AS_ENOMEM, "%s: memo index %llu beyond the limit %llu", op_name(op),
                    (unsigned long long)idx, (unsigned long long)bound);
    int rc;
    if (idx >= p->capmemo && (rc = as_pk_memo_room(p, idx)))
        return rc;
    if (pk_memo_get(p, idx) == AS_PK_NIL)
        p->memo_len++;
    if ((rc = pk_memo_set(p, idx, p->stack[p->nstack - 1])))
        return rc;
    if (p->nmarks && p->streaming) { /* a cut back to an open MARK must see this slot */
        if ((rc = pgrow(p, (void **)&p->dirty, &p->capdirty, p->ndirty + 1, sizeof *p->dirty,
                        "the memo")))
            return rc;
        p->dirty[p->ndirty++] = (uint32_t)idx;
    }
    return 0;
}

static int memo_get(pk_parser *p, uint8_t op, uint64_t idx)
{
    as_pk_ref r = pk_memo_get(p, idx);
    if (r == AS_PK_NIL)
        return fail(p, AS_ECORRUPT, "%s: memo key %llu was never set", op_name(op),
                    (unsigned long long)idx);
    return push(p, r);
}

/* Reverses every container's chunk list that is still newest first, so that iteration
 * runs in insertion order. */
static void order_chunks(as_pk *pk)
{
    for (size_t i = 0; i < pk->nnodes; i++) {
        pk_node *n = &pk->nodes[i];
        if (n->type != AS_PK_LIST && n->type != AS_PK_TUPLE && n->type != AS_PK_DICT)
            continue;
        if (n->flags & PKF_OLDFIRST)
            n->flags &= (uint8_t)~PKF_OLDFIRST;
        else
            reverse_chunks(pk->cells, n);
    }
    pk->ordered = 1;
}

static void set_limits(as_pk_limits *l, const as_pk_limits *in)
{
    *l = in ? *in : (as_pk_limits){0};
    if (!l->max_input)
        l->max_input = AS_PK_DEFAULT_MAX_INPUT;
    if (!l->max_nodes || l->max_nodes > PK_HARD_MAX_NODES)
        l->max_nodes = l->max_nodes ? PK_HARD_MAX_NODES : 1u << 24;
    if (!l->max_stack)
        l->max_stack = 1u << 20;
    if (!l->max_marks)
        l->max_marks = 4096;
    if (!l->max_memo || l->max_memo > 0xFFFFFFFEull)
        l->max_memo = l->max_memo ? 0xFFFFFFFEull : 1u << 26;
    if (!l->max_memory)
        l->max_memory = AS_PK_DEFAULT_MAX_MEMORY;
}

/* ---- input window ---------------------------------------------------------------------- */

/* Makes at least need unread bytes available in the window if the input has them.
 * Returns 0 (w[wp..wn) may still be shorter: the input ended) or < 0 (the stream's error). */
static int refill(pk_parser *p, size_t need)
{
    if (!p->in || p->wn - p->wp >= need)
        return 0;
    as_instream_skip(p->in, p->wp);
    p->wbase += p->wp;
    p->wp = p->wn = 0;
    const void *w;
    long got = as_instream_peek(p->in, &w, need > PK_WINDOW ? need : PK_WINDOW);
    if (got < 0) {
        const as_trace_error *e = as_instream_error(p->in);
        return fail(p, (int)got, "%s", e ? e->msg : "read failed");
    }
    p->w = w;
    p->wn = (size_t)got;
    if (p->wbase + p->wn > p->lim.max_input) {
        p->pos = p->lim.max_input;
        return fail(p, AS_ENOMEM,
                    "decompressed pickle longer than %llu bytes (the limit on its size)",
                    (unsigned long long)p->lim.max_input);
    }
    return 0;
}

int as_pk_refill(pk_parser *p, size_t need)
{
    return refill(p, need);
}

/* Copies n bytes at the window's read position to dst, crossing refills (a string longer
 * than the window). Returns 0, or < 0 when the input ends first. */
static int take(pk_parser *p, uint8_t *dst, uint64_t n, uint8_t op)
{
    uint64_t done = 0;
    while (done < n) {
        size_t k = p->wn - p->wp;
        if (k == 0) {
            int rc = refill(p, 1);
            if (rc)
                return rc;
            if ((k = p->wn - p->wp) == 0)
                return fail(p, AS_ECORRUPT, "truncated pickle: %s of %llu bytes, %llu left",
                            op_name(op), (unsigned long long)n, (unsigned long long)done);
        }
        if (k > n - done)
            k = (size_t)(n - done);
        memcpy(dst + done, p->w + p->wp, k);
        p->wp += k;
        done += k;
    }
    return 0;
}

/* A string or bytes value of n bytes, the next thing in the window. */
static int new_string(pk_parser *p, uint8_t op, uint64_t n, as_pk_ref *r)
{
    as_pk *pk = p->pk;
    int is_str = op == 0x8c || op == 'X' || op == 0x8d;
    size_t left = p->wn - p->wp;
    if (n > left && (!p->in || n > p->lim.max_input - (p->wbase + p->wp)))
        return fail(p, AS_ECORRUPT, "truncated pickle: %s of %llu bytes, %zu left", op_name(op),
                    (unsigned long long)n, left);
    if (n > 0xFFFFFFFEull)
        return fail(p, AS_ENOMEM, "%s of %llu bytes: strings up to 4 GiB are read", op_name(op),
                    (unsigned long long)n);
    int rc = new_node(p, is_str ? AS_PK_STR : AS_PK_BYTES, r);
    if (rc ||
        (rc = pgrow(p, (void **)&pk->bytes, &pk->capbytes, pk->nbytes + (size_t)n, 1, "strings")))
        return rc;
    pk_node *node = &pk->nodes[*r];
    node->a = (uint32_t)n;
    node->off = p->wbase + p->wp;
    node->u.data = pk->nbytes;
    if (n == 0) {
        return 0; /* the pool may still be NULL: no pointer arithmetic on it */
    } else if (n <= left) {
        memcpy(pk->bytes + pk->nbytes, p->w + p->wp, (size_t)n);
        p->wp += (size_t)n;
    } else if ((rc = take(p, pk->bytes + pk->nbytes, n, op))) {
        return rc;
    }
    pk->nbytes += (size_t)n;
    return 0;
}

/* ---- interning (memo slots that outlive their batch) ---------------------------------- */

static uint64_t hash_bytes(uint64_t h, const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

static int is_container(uint8_t t)
{
    return t == AS_PK_LIST || t == AS_PK_TUPLE || t == AS_PK_DICT;
}

/* The hash of an interned container's items (refs, so a word at a time). */
static uint64_t hash_items(uint8_t type, const uint32_t *x, size_t k)
{
    uint64_t h = 0xcbf29ce484222325ull ^ type ^ (uint64_t)k << 8;
    for (size_t i = 0; i < k; i++) {
        h = (h ^ x[i]) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    return h;
}

/* A scalar's or string's hash: n's type and value, s its bytes (STR, BYTES). */
static uint64_t value_hash(const pk_node *n, const uint8_t *s)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n->type;
    if (n->type == AS_PK_STR || n->type == AS_PK_BYTES)
        return hash_bytes(h, s, n->a);
    return hash_bytes(h, (const uint8_t *)&n->u.i, sizeof n->u.i);
}

static uint64_t node_hash(const as_pk *pk, as_pk_ref r, const pk_node *n)
{
    if (is_container(n->type)) /* an interned container: its items, in icells */
        return hash_items(n->type, pk->icells + n->u.head + 2, n->a);
    return value_hash(n,
                      n->type == AS_PK_STR || n->type == AS_PK_BYTES ? str_bytes(pk, r, n) : NULL);
}

/* Whether interned node c holds the value of n (bytes s for a string). */
static int same_value(const as_pk *pk, const pk_node *c, const pk_node *n, const uint8_t *s)
{
    if (c->type != n->type)
        return 0;
    if (c->type == AS_PK_STR || c->type == AS_PK_BYTES)
        return c->a == n->a && (n->a == 0 || memcmp(pk->ibytes + c->u.data, s, n->a) == 0);
    return c->u.i == n->u.i;
}

static int intern_rehash(pk_parser *p)
{
    as_pk *pk = p->pk;
    size_t nc = pk->capihash ? pk->capihash * 2 : 256, old = pk->capihash;
    uint32_t *nh = NULL;
    size_t cap = 0;
    int rc = pgrow(p, (void **)&nh, &cap, nc, sizeof *nh, "the memo");
    if (rc)
        return rc;
    memset(nh, 0, cap * sizeof *nh);
    for (size_t i = 3; i < pk->ninodes; i++) {
        as_pk_ref r = AS_PK_IBIT | (uint32_t)i;
        size_t j = node_hash(pk, r, &pk->inodes[i]) & (cap - 1);
        while (nh[j])
            j = (j + 1) & (cap - 1);
        nh[j] = (uint32_t)i + 1;
    }
    free(pk->ihash);
    p->mem -= old * sizeof *nh;
    pk->ihash = nh;
    pk->capihash = cap;
    return 0;
}

static int intern_container(pk_parser *p, as_pk_ref r, size_t keep, int nested, as_pk_ref *out);

/* The interned ref for arena node r as cut_back needs it: everything below keep stays. */

/* The interned ref for the value of arena node r: a scalar's copy, a small plain
 * container's (intern_container), else its type's dropped marker. Nodes below keep are
 * not being dropped: a container's items there stay as they are. */
static int intern_keep(pk_parser *p, as_pk_ref r, size_t keep, as_pk_ref *out)
{
    as_pk *pk = p->pk;
    const pk_node *n = &pk->nodes[r];
    int rc;
    if (is_container(n->type)) {
        if ((rc = intern_container(p, r, keep, 1, out)) <= 0)
            return rc;
        *out = AS_PK_IBIT | (n->type == AS_PK_LIST ? 0u : n->type == AS_PK_TUPLE ? 1u : 2u);
        return 0;
    }
    int str = n->type == AS_PK_STR || n->type == AS_PK_BYTES;
    return as_pk_intern_value(p, n, str && n->a ? str_bytes(pk, r, n) : NULL, out);
}

int as_pk_intern_value(pk_parser *p, const pk_node *n, const uint8_t *s, as_pk_ref *out)
{
    as_pk *pk = p->pk;
    int rc;
    if ((pk->ninodes + 1) * 4 > pk->capihash * 3 && (rc = intern_rehash(p)))
        return rc;
    size_t j = value_hash(n, s) & (pk->capihash - 1);
    while (pk->ihash[j]) {
        uint32_t i = pk->ihash[j] - 1;
        if (same_value(pk, &pk->inodes[i], n, s)) {
            *out = AS_PK_IBIT | i;
            return 0;
        }
        j = (j + 1) & (pk->capihash - 1);
    }
    if (pk->nnodes + pk->ninodes - 3 >= p->lim.max_nodes)
        return fail(p, AS_ENOMEM, "more than %llu values (limit)",
                    (unsigned long long)p->lim.max_nodes);
    if ((rc = pgrow(p, (void **)&pk->inodes, &pk->capinodes, pk->ninodes + 1, sizeof *pk->inodes,
                    "the memo")))
        return rc;
    pk_node c = *n;
    if (n->type == AS_PK_STR || n->type == AS_PK_BYTES) {
        if ((rc =
                 pgrow(p, (void **)&pk->ibytes, &pk->capibytes, pk->nibytes + n->a, 1, "the memo")))
            return rc;
        if (n->a)
            memcpy(pk->ibytes + pk->nibytes, s, n->a);
        c.u.data = pk->nibytes;
        pk->nibytes += n->a;
    }
    uint32_t i = (uint32_t)pk->ninodes++;
    pk->inodes[i] = c;
    pk->ihash[j] = i + 1;
    *out = AS_PK_IBIT | i;
    return 0;
}

/* An interned container with these items (dict: keys and values alternating): an existing
 * one with the same type and items, or a new one in icells. */
int as_pk_intern_items(pk_parser *p, const pk_node *n, const as_pk_ref *items, size_t k, int nested,
                       as_pk_ref *out)
{
    as_pk *pk = p->pk;
    int rc;
    if ((pk->ninodes + 1) * 4 > pk->capihash * 3 && (rc = intern_rehash(p)))
        return rc;
    size_t j = hash_items(n->type, items, k) & (pk->capihash - 1);
    for (; pk->ihash[j]; j = (j + 1) & (pk->capihash - 1)) {
        const pk_node *c = &pk->inodes[pk->ihash[j] - 1];
        if (c->type == n->type && c->a == k &&
            memcmp(pk->icells + c->u.head + 2, items, k * sizeof *items) == 0) {
            *out = AS_PK_IBIT | (pk->ihash[j] - 1);
            return 0;
        }
    }
    if (pk->nnodes + pk->ninodes - 3 >= p->lim.max_nodes)
        return fail(p, AS_ENOMEM, "more than %llu values (limit)",
                    (unsigned long long)p->lim.max_nodes);
    if ((rc = pgrow(p, (void **)&pk->inodes, &pk->capinodes, pk->ninodes + 1, sizeof *pk->inodes,
                    "the memo")) ||
        (rc = pgrow(p, (void **)&pk->icells, &pk->capicells, pk->nicells + k + 2,
                    sizeof *pk->icells, "the memo")))
        return rc;
    uint32_t at = (uint32_t)pk->nicells;
    pk->icells[at] = AS_PK_NIL;
    pk->icells[at + 1] = (uint32_t)k;
    memcpy(pk->icells + at + 2, items, k * sizeof *items);
    pk->nicells += k + 2;
    uint32_t i = (uint32_t)pk->ninodes++;
    pk->inodes[i] = (pk_node){.type = n->type,
                              .flags = nested ? PKF_NESTED : 0,
                              .a = (uint32_t)k,
                              .off = n->off,
                              .u.head = at};
    pk->ihash[j] = i + 1;
    *out = AS_PK_IBIT | i;
    return 0;
}

/* One item x of a container being interned, as an interned ref: 0, 1 (the container does
 * not qualify) or < 0. inner: x may be a flat container (the container is a list/tuple at
 * the outer level). */
static int intern_item(pk_parser *p, as_pk_ref *x, size_t keep, int inner)
{
    as_pk *pk = p->pk;
    const pk_node *xn = nd(pk, *x);
    if (!is_container(xn->type))
        return ibit(*x) || *x < keep ? 0 : intern_keep(p, *x, keep, x);
    if (!inner || (xn->flags & (PKF_DROPPED | PKF_NESTED | PKF_TRACE)) || xn->a > PK_FLAT_CELLS)
        return 1;
    if (ibit(*x) || *x < keep) /* interned flat already, or kept in the tree */
        return 0;
    return intern_container(p, *x, keep, 0, x);
}

/* Interns arena container r when it qualifies (PK_FLAT_CELLS): 0 with *out, 1 when it does
 * not, or < 0. While parsing, a container's chunks are newest first (order_chunks runs at
 * STOP), so they are walked oldest first here. nested: r may hold flat containers. */
static int intern_container(pk_parser *p, as_pk_ref r, size_t keep, int nested, as_pk_ref *out)
{
    as_pk *pk = p->pk;
    const pk_node n = pk->nodes[r];
    int inner = nested && n.type != AS_PK_DICT;
    if ((n.flags & PKF_TRACE) || n.a > (inner ? PK_NESTED_ITEMS : PK_FLAT_CELLS))
        return 1;
    uint32_t chunks[64];
    size_t nch = 0;
    for (uint32_t c = n.u.head; c != AS_PK_NIL; c = pk->cells[c])
        if (nch == 64)
            return 1; /* built by more than 64 batches: not a small container */
        else
            chunks[nch++] = c;
    as_pk_ref local[PK_FLAT_CELLS],
        *items = n.a > PK_FLAT_CELLS ? malloc(n.a * sizeof *items) : local;
    if (!items)
        return fail(p, AS_ENOMEM, "out of host memory");
    size_t k = 0;
    int rc = 0;
    int oldfirst = (n.flags & PKF_OLDFIRST) != 0;
    for (size_t j = 0; rc == 0 && j < nch; j++) {
        size_t c = oldfirst ? j : nch - 1 - j;
        for (uint32_t i = 0; rc == 0 && i < pk->cells[chunks[c] + 1] && k < n.a; i++) {
            items[k] = pk->cells[chunks[c] + 2 + i];
            rc = intern_item(p, &items[k++], keep, inner);
        }
    }
    if (rc == 0)
        rc = as_pk_intern_items(p, &n, items, k, inner, out);
    if (items != local)
        free(items);
    return rc;
}

/* Cuts the pools back to mark m once its batch is handed out: memo slots set since then
 * that name a value about to go are re-pointed at its interned copy. */
static int cut_back(pk_parser *p, const pk_mark *m)
{
    as_pk *pk = p->pk;
    int rc;
    for (size_t i = m->dirty; i < p->ndirty; i++) {
        as_pk_ref v = pk_memo_get(p, p->dirty[i]);
        if (v != AS_PK_NIL && !ibit(v) && v >= m->nodes &&
            ((rc = intern_keep(p, v, m->nodes, &v)) || (rc = pk_memo_set(p, p->dirty[i], v))))
            return rc;
    }
    p->ndirty = m->dirty;
    p->generation++;
    pk->nnodes = m->nodes;
    pk->ncells = m->cells;
    pk->nbytes = m->bytes;
    as_pk_memo_pack(p);
    return 0;
}

/* ---- which lists are streamed ----------------------------------------------------------- */

/* Stack index of the innermost MARK at or below stack position i, or 0 when none. */
static size_t mark_at_or_below(const pk_parser *p, size_t i)
{
    for (size_t j = p->nmarks; j-- > 0;)
        if (p->marks[j].stack <= i)
            return p->marks[j].stack;
    return 0;
}

static int is_str(const as_pk *pk, as_pk_ref r, const char *s, size_t n)
{
    const pk_node *x = nd(pk, r);
    return x->type == AS_PK_STR && x->a == n && memcmp(str_bytes(pk, r, x), s, n) == 0;
}

/* 1 if stack[i] is a list about to become root["device_traces"]: the root dict is
 * stack[0], and stack[i - 1] is the key, in a SETITEMS batch (MARK at 1) or a SETITEM. */
static int is_device_traces(const pk_parser *p, size_t i)
{
    as_pk *pk = p->pk;
    if (i < 2 || nd(pk, p->stack[0])->type != AS_PK_DICT ||
        nd(pk, p->stack[i])->type != AS_PK_LIST ||
        !is_str(pk, p->stack[i - 1], "device_traces", 13))
        return 0;
    size_t m = mark_at_or_below(p, i - 1);
    return m ? m == 1 && (i - m) % 2 == 1 : i == 2;
}

/* Whether the list at stack[i], about to get items, is root["device_traces"][d]: either
 * the next single APPEND to the list below it, or an item of the APPENDS batch above
 * the MARK just above that list. Sets PKF_TRACE and the device on it. */
int as_pk_vm_is_trace_list(const pk_parser *p, size_t i, uint64_t *dev)
{
    as_pk *pk = p->pk;
    as_pk_ref l = p->stack[i];
    if (ibit(l) || pk->nodes[l].type != AS_PK_LIST)
        return 0;
    const pk_node *n = &pk->nodes[l];
    size_t m;
    if (n->flags & PKF_TRACE)
        *dev = n->dev;
    else if (i >= 1 && is_device_traces(p, i - 1))
        *dev = nd(pk, p->stack[i - 1])->a;
    else if ((m = mark_at_or_below(p, i)) >= 1 && is_device_traces(p, m - 1))
        *dev = (uint64_t)nd(pk, p->stack[m - 1])->a + (i - m);
    else
        return 0;
    return *dev < UINT16_MAX; /* else kept as a tree: the importer reads it there */
}

int as_pk_vm_trace_list(pk_parser *p, size_t i)
{
    uint64_t dev;
    if (!as_pk_vm_is_trace_list(p, i, &dev))
        return 0;
    pk_node *n = &p->pk->nodes[p->stack[i]];
    n->flags |= PKF_TRACE;
    n->dev = (uint16_t)dev;
    return 1;
}

/* ---- the opcode loop -------------------------------------------------------------------- */

/* Pops the innermost MARK; the one below inherits its record of old containers written. */
static pk_mark pop_mark(pk_parser *p)
{
    pk_mark m = p->marks[--p->nmarks];
    if (p->nmarks && m.low < p->marks[p->nmarks - 1].low)
        p->marks[p->nmarks - 1].low = m.low;
    return m;
}

static int push_mark(pk_parser *p)
{
    if (p->nmarks >= p->lim.max_marks)
        return fail(p, AS_ENOMEM, "MARKs nested deeper than %llu (limit)",
                    (unsigned long long)p->lim.max_marks);
    int rc = pgrow(p, (void **)&p->marks, &p->capmarks, p->nmarks + 1, sizeof *p->marks, "marks");
    if (rc)
        return rc;
    as_pk *pk = p->pk;
    p->marks[p->nmarks++] = (pk_mark){.stack = p->nstack,
                                      .nodes = pk->nnodes,
                                      .cells = pk->ncells,
                                      .bytes = pk->nbytes,
                                      .dirty = p->ndirty,
                                      .low = UINT32_MAX};
    return 0;
}

static int check_target(pk_parser *p, uint8_t op, as_pk_ref c, uint8_t want)
{
    uint8_t t = nd(p->pk, c)->type;
    if (t != want)
        return fail(p, AS_EFORMAT, "%s onto a %s (only a %s is supported)", op_name(op),
                    as_pk_type_name(t), as_pk_type_name(want));
    return 0;
}

/* Integers: BININT (signed 32-bit), BININT1 (u8), BININT2 (u16), LONG1/LONG4 (a length,
 * then little-endian two's complement). Sets *argn to the argument bytes used. */
static int op_int(pk_parser *p, uint8_t op, const uint8_t *arg, size_t left, size_t *argn)
{
    int64_t v;
    int rc;
    size_t need = op == 'J' ? 4 : op == 'K' ? 1 : op == 'M' ? 2 : op == 0x8a ? 1 : 4;
    if (left < need)
        goto truncated;
    if (op == 'J') {
        v = (int32_t)(uint32_t)rd_le(arg, 4);
    } else if (op == 'K') {
        v = arg[0];
    } else if (op == 'M') {
        v = (int64_t)rd_le(arg, 2);
    } else {
        int hl = (int)need;
        int64_t n = op == 0x8a ? arg[0] : (int32_t)(uint32_t)rd_le(arg, 4);
        if (n < 0)
            return fail(p, AS_ECORRUPT, "LONG4 with negative length %lld", (long long)n);
        need = (size_t)(hl + n);
        if (left < need)
            goto truncated;
        if (n > 8) { /* no value kept (AS_PK_BIGINT) */
            *argn = need;
            as_pk_ref r = AS_PK_NIL;
            return (rc = new_node(p, AS_PK_BIGINT, &r)) ? rc : push(p, r);
        }
        uint64_t u = rd_le(arg + hl, (int)n);
        if (n > 0 && n < 8 && (arg[hl + n - 1] & 0x80))
            u |= ~0ull << (8 * n);
        memcpy(&v, &u, sizeof v);
    }
    *argn = need;
    as_pk_ref r = AS_PK_NIL;
    if ((rc = new_node(p, AS_PK_INT, &r)))
        return rc;
    p->pk->nodes[r].u.i = v;
    return push(p, r);
truncated:
    return fail(p, AS_ECORRUPT, "truncated pickle: %s needs %zu argument bytes, %zu left",
                op_name(op), need, left);
}

/* STOP: the stack must hold exactly the root, and nothing may follow. */
static int op_stop(pk_parser *p, size_t left)
{
    if (p->nmarks)
        return fail(p, AS_ECORRUPT, "STOP with %zu MARK%s still open", p->nmarks,
                    p->nmarks == 1 ? "" : "s");
    if (p->nstack != 1)
        return fail(p, AS_ECORRUPT, "STOP with %zu values on the stack (needs 1)", p->nstack);
    p->wp++;
    int rc = refill(p, 1);
    if (rc)
        return rc;
    left = p->wn - p->wp;
    if (left)
        return fail(p, AS_ECORRUPT, "%s%zu bytes of trailing data after STOP",
                    p->in ? "at least " : "", left);
    p->pk->root = p->stack[0];
    p->done = 1;
    return 0;
}

/* A streamed batch: stack[m .. nstack) are entries of the trace list l. Returns 1 when there
 * is something to hand out. */
static int start_batch(pk_parser *p, uint8_t op, as_pk_ref l, size_t m, const pk_mark *mk)
{
    p->pend_op = op;
    p->pend_list = l;
    p->pend_m = m;
    p->pend_n = p->nstack - m;
    p->pend_i = 0;
    if (mk)
        p->pend_mark = *mk;
    return 1;
}

/* After a batch was handed out: drop its items, and cut the pools back to its MARK unless
 * something older was written to meanwhile (then its values stay). */
static int end_batch(pk_parser *p)
{
    int rc = 0;
    p->nstack = p->pend_m;
    if (p->pend_op == 'e') {
        pk_mark *m = &p->pend_mark;
        if (m->low >= m->nodes)
            rc = cut_back(p, m);
        else if (p->nmarks && m->low < p->marks[p->nmarks - 1].low)
            p->marks[p->nmarks - 1].low = m->low;
    }
    p->pend_op = 0;
    return rc;
}

/* APPENDS, SETITEMS and TUPLE: the items above the innermost MARK go into the container
 * below it (or a new tuple). APPENDS onto a trace list starts a streamed batch instead. */
static int vm_fill(pk_parser *p, uint8_t op, size_t at)
{
    int rc;
    as_pk_ref r = AS_PK_NIL;
    if (!p->nmarks)
        return fail(p, AS_ECORRUPT, "%s without a MARK", op_name(op));
    size_t m = p->marks[p->nmarks - 1].stack;
    size_t n = p->nstack - m;
    if (op == 't') {
        pop_mark(p);
        if ((rc = new_node(p, AS_PK_TUPLE, &r)) ||
            (rc = add_items(p, r, n ? &p->stack[m] : NULL, n))) /* stack may be NULL */
            return rc;
        p->nstack = m;
        return push(p, r);
    }
    size_t fence = p->nmarks > 1 ? p->marks[p->nmarks - 2].stack : 0;
    if (m < 1 || m - 1 < fence) /* the container must sit just below the mark */
        return fail(p, AS_ECORRUPT, "%s with no %s below its MARK", op_name(op),
                    op == 'e' ? "list" : "dict");
    as_pk_ref c = p->stack[m - 1];
    if ((rc = check_target(p, op, c, op == 'e' ? AS_PK_LIST : AS_PK_DICT)))
        return rc;
    if (op == 'e' && p->streaming && as_pk_vm_trace_list(p, m - 1)) {
        pk_mark mk = p->marks[--p->nmarks];
        p->wp = at + 1;
        start_batch(p, op, c, m, &mk);
        return n ? 1 : end_batch(p); /* 1: run returns, the batch is handed out */
    }
    if (op == 'u' && (n % 2))
        return fail(p, AS_ECORRUPT, "odd number of items (%zu) for SETITEMS", n);
    if (op == 'u' && (rc = check_keys(p, op, &p->stack[m], n)))
        return rc;
    pop_mark(p);
    if ((rc = add_items(p, c, &p->stack[m], n)))
        return rc;
    p->nstack = m;
    return 0;
}

/* PROTO first: protocols 2 to 5. */
static int start(pk_parser *p)
{
    int rc = refill(p, 16);
    if (rc)
        return rc;
    p->pos = 0;
    if (p->wn < 2 || p->w[0] != 0x80)
        return fail(p, AS_EFORMAT, "not a pickle of protocol 2 or later (no PROTO opcode)");
    if (p->w[1] < 2 || p->w[1] > 5)
        return fail(p, AS_EFORMAT, "pickle protocol %u is not supported (2 to 5 are)", p->w[1]);
    p->pk->protocol = p->w[1];
    p->wp = 2;
    return 0;
}

static int truncated(pk_parser *p, uint8_t op, size_t need, size_t left)
{
    return fail(p, AS_ECORRUPT, "truncated pickle: %s needs %zu argument bytes, %zu left",
                op_name(op), need, left);
}

/* FRAME: a length prefix only; checked when it is short enough to hold in the window (the
 * check may refill it, moving the opcode to *at). */
static int op_frame(pk_parser *p, size_t *at, size_t *left)
{
    int rc;
    if (*left < 8)
        return truncated(p, 0x95, 8, *left);
    uint64_t flen = rd_le(p->w + *at + 1, 8);
    if (flen > *left - 8 && p->in && flen <= PK_FRAME_CHECK) {
        if ((rc = refill(p, 9 + (size_t)flen)))
            return rc;
        *at = p->wp, *left = p->wn - *at - 1;
    }
    if (flen > *left - 8 && (!p->in || flen <= PK_FRAME_CHECK))
        return fail(p, AS_ECORRUPT, "truncated pickle: FRAME of %llu bytes, %zu left",
                    (unsigned long long)flen, *left - 8);
    return 0;
}

/* NONE, NEWTRUE, NEWFALSE, BINFLOAT (big-endian IEEE 754) and the EMPTY_ containers: one
 * new value pushed. */
static int op_value(pk_parser *p, uint8_t op, const uint8_t *arg, size_t left, size_t *argn)
{
    as_pk_ref r = AS_PK_NIL;
    int rc;
    uint8_t t = op == 'N'   ? AS_PK_NONE
                : op == 'G' ? AS_PK_FLOAT
                : op == ']' ? AS_PK_LIST
                : op == '}' ? AS_PK_DICT
                : op == ')' ? AS_PK_TUPLE
                            : AS_PK_BOOL;
    if (op == 'G' && left < 8)
        return truncated(p, op, 8, left);
    if ((rc = new_node(p, t, &r)))
        return rc;
    if (op == 'G') {
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
            u = u << 8 | arg[i];
        memcpy(&p->pk->nodes[r].u.f, &u, sizeof u);
        *argn = 8;
    } else if (t == AS_PK_BOOL) {
        p->pk->nodes[r].u.i = op == 0x88;
    }
    return push(p, r);
}

/* SHORT_BINUNICODE, BINUNICODE, BINUNICODE8 and the BINBYTES: a length, then the bytes
 * (new_string moves the window past them). */
static int op_string(pk_parser *p, uint8_t op, size_t at, const uint8_t *arg, size_t left)
{
    as_pk_ref r = AS_PK_NIL;
    int rc;
    int hl = (op == 0x8c || op == 'C') ? 1 : (op == 'X' || op == 'B') ? 4 : 8;
    if (left < (size_t)hl)
        return truncated(p, op, (size_t)hl, left);
    uint64_t n = rd_le(arg, hl);
    p->wp = at + 1 + (size_t)hl;
    if ((rc = new_string(p, op, n, &r)))
        return rc;
    return push(p, r);
}

/* APPEND (list item) and SETITEM (dict key value); an APPEND to a trace list is a streamed
 * batch of one (1). */
static int vm_append(pk_parser *p, uint8_t op, size_t at)
{
    int rc;
    size_t k = op == 'a' ? 1 : 2;
    if (avail(p) < k + 1)
        return underflow(p, op, k + 1);
    as_pk_ref c = p->stack[p->nstack - k - 1];
    if ((rc = check_target(p, op, c, op == 'a' ? AS_PK_LIST : AS_PK_DICT)))
        return rc;
    if (op == 'a' && p->streaming && as_pk_vm_trace_list(p, p->nstack - 2)) {
        p->wp = at + 1;
        return start_batch(p, op, c, p->nstack - 1, NULL);
    }
    if (op == 's' && (rc = check_keys(p, op, &p->stack[p->nstack - 2], 2)))
        return rc;
    if ((rc = add_items(p, c, &p->stack[p->nstack - k], k)))
        return rc;
    p->nstack -= k;
    return 0;
}

/* TUPLE1, TUPLE2, TUPLE3. */
static int op_tuple_n(pk_parser *p, uint8_t op)
{
    as_pk_ref r = AS_PK_NIL;
    int rc;
    size_t n = (size_t)(op - 0x84);
    if (avail(p) < n)
        return underflow(p, op, n);
    if ((rc = new_node(p, AS_PK_TUPLE, &r)) || (rc = add_items(p, r, &p->stack[p->nstack - n], n)))
        return rc;
    p->nstack -= n;
    return push(p, r);
}

/* MEMOIZE, BINPUT, LONG_BINPUT, BINGET, LONG_BINGET. */
static inline int op_memo(pk_parser *p, uint8_t op, const uint8_t *arg, size_t left, size_t *argn)
{
    if (op == 0x94)
        return memo_put(p, op, p->memo_len);
    int hl = (op == 'q' || op == 'h') ? 1 : 4;
    if (left < (size_t)hl)
        return truncated(p, op, (size_t)hl, left);
    uint64_t idx = rd_le(arg, hl);
    *argn = (size_t)hl;
    return (op == 'q' || op == 'r') ? memo_put(p, op, idx) : memo_get(p, op, idx);
}

/* Every opcode that is not plain data, or not an opcode at all. */
static int op_refused(pk_parser *p, uint8_t op)
{
    const char *name = op_name(op);
    if (op == 0x80)
        return fail(p, AS_ECORRUPT, "PROTO opcode after the start of the pickle");
    if (name)
        return fail(p, AS_EFORMAT,
                    "opcode %s (0x%02x) refused: only plain data (numbers, strings, lists, "
                    "tuples, dicts) is read",
                    name, op);
    return fail(p, AS_ECORRUPT, "invalid pickle opcode 0x%02x", op);
}

/* After a MARK (p->wp past it): when it opens a batch of a trace list, the entry scanner
 * reads the batch (1) or leaves it to the VM (0). */
static int scan_here(pk_parser *p)
{
    uint64_t dev;
    if (p->nstack < 1 || p->marks[p->nmarks - 1].stack != p->nstack ||
        (p->nmarks > 1 && p->marks[p->nmarks - 2].stack >= p->nstack) ||
        !as_pk_vm_is_trace_list(p, p->nstack - 1, &dev))
        return 0;
    return as_pk_scan_batch(p);
}

/* The opcode loop. Returns 0 at STOP (root set), 1 with a streamed batch pending, or < 0.
 * The window holds 16 bytes at each opcode if the input does, more than any fixed
 * argument, so a short one means the input ended. */
static int run(pk_parser *p)
{
    int rc;
    for (;;) {
        if (p->wn - p->wp < 16 && (rc = refill(p, 16)))
            return rc;
        size_t at = p->wp;
        p->pos = p->wbase + at;
        if (at >= p->wn)
            return fail(p, AS_ECORRUPT, "truncated pickle: no STOP opcode before the end");
        uint8_t op = p->w[at];
        size_t left = p->wn - at - 1; /* argument bytes available after the opcode */
        const uint8_t *arg = p->w + at + 1;
        size_t argn = 0; /* fixed argument length consumed */
        switch (op) {
        case 0x95: /* FRAME */
            rc = op_frame(p, &at, &left);
            argn = 8;
            break;
        case '.': /* STOP */
            return op_stop(p, left);
        case 'N':
        case 0x88:
        case 0x89:
        case 'G':
        case ']':
        case '}':
        case ')':
            rc = op_value(p, op, arg, left, &argn);
            break;
        case 'J':
        case 'K':
        case 'M':
        case 0x8a:
        case 0x8b: /* BININT*, LONG1, LONG4 */
            rc = op_int(p, op, arg, left, &argn);
            break;
        case 0x8c:
        case 'X':
        case 0x8d:
        case 'C':
        case 'B':
        case 0x8e:
            if ((rc = op_string(p, op, at, arg, left)))
                return rc;
            continue; /* the window moved past the bytes */
        case '(':     /* MARK */
            if ((rc = push_mark(p)))
                return rc;
            p->wp = at + 1;
            if (p->scan && (rc = scan_here(p)))
                return rc; /* 1: a scanned batch to hand out, or the error */
            continue;
        case 'a':
        case 's': /* APPEND, SETITEM */
            rc = vm_append(p, op, at);
            break;
        case 'e':
        case 'u':
        case 't': /* APPENDS, SETITEMS, TUPLE */
            rc = vm_fill(p, op, at);
            break;
        case 0x85:
        case 0x86:
        case 0x87: /* TUPLE1..3 */
            rc = op_tuple_n(p, op);
            break;
        case 0x94:
        case 'q':
        case 'r':
        case 'h':
        case 'j': /* the memo */
            rc = op_memo(p, op, arg, left, &argn);
            break;
        default:
            return op_refused(p, op);
        }
        if (rc)
            return rc; /* an error, or 1: a streamed batch to hand out (wp already past) */
        p->wp = at + 1 + argn;
    }
}

/* ---- entry points ----------------------------------------------------------------------- */

static int parser_init(pk_parser *p, const as_pk_limits *lim, as_pk_error *err)
{
    set_limits(&p->lim, lim);
    memset(p->mc_idx, 0xff, sizeof p->mc_idx);
    memset(p->mc_ref, 0xff, sizeof p->mc_ref); /* AS_PK_NIL */
    p->err = err;
    p->pk = calloc(1, sizeof *p->pk);
    if (!p->pk)
        return fail(p, AS_ENOMEM, "out of host memory");
    p->pk->root = AS_PK_NIL;
    /* The dropped-container markers, one per type, are inodes 0..2. */
    int rc =
        pgrow(p, (void **)&p->pk->inodes, &p->pk->capinodes, 3, sizeof *p->pk->inodes, "the memo");
    if (rc)
        return rc;
    static const uint8_t types[3] = {AS_PK_LIST, AS_PK_TUPLE, AS_PK_DICT};
    for (int i = 0; i < 3; i++)
        p->pk->inodes[i] = (pk_node){
            .type = types[i], .flags = PKF_DROPPED, .off = UINT64_MAX, .u.head = AS_PK_NIL};
    p->pk->ninodes = 3;
    return 0;
}

static void parser_free(pk_parser *p)
{
    as_pk_scan_free(p);
    free(p->stack);
    free(p->marks);
    as_pk_memo_free(p);
    free(p->dirty);
    as_pk_free(p->pk);
    memset(p, 0, sizeof *p);
}

int as_pk_parse(const uint8_t *buf, size_t len, const as_pk_limits *lim, as_pk **out,
                as_pk_error *err)
{
    pk_parser p = {.w = buf, .wn = len};
    int rc;
    *out = NULL;
    if (err)
        memset(err, 0, sizeof *err);
    if ((rc = parser_init(&p, lim, err)))
        goto out;
    if (len > p.lim.max_input) {
        rc = fail(&p, AS_ENOMEM, "pickle of %zu bytes exceeds the limit of %llu", len,
                  (unsigned long long)p.lim.max_input);
        goto out;
    }
    if ((rc = start(&p)) || (rc = run(&p)))
        goto out;
    order_chunks(p.pk);
    *out = p.pk;
    p.pk = NULL;
out:
    parser_free(&p);
    return rc;
}

int as_pk_stream_open(as_instream *in, const as_pk_limits *lim, as_pk_stream **out,
                      as_pk_error *err)
{
    *out = NULL;
    if (err)
        memset(err, 0, sizeof *err);
    as_pk_stream *ps = calloc(1, sizeof *ps);
    if (!ps) {
        if (err)
            *err = (as_pk_error){.code = AS_ENOMEM, .msg = "out of host memory"};
        return AS_ENOMEM;
    }
    pk_parser *p = &ps->p;
    p->in = in;
    p->streaming = 1;
    p->wbase = as_instream_offset(in);
    int rc = parser_init(p, lim, &ps->err);
    if (!rc)
        rc = start(p);
    if (rc) {
        if (err)
            *err = ps->err;
        as_pk_stream_close(ps);
        return rc;
    }
    *out = ps;
    return 0;
}

/* The next item: from a scanned batch (e given), a streamed batch of the VM, or parsing on. */
static int stream_next(as_pk_stream *ps, as_pk_item *item, const as_pk_entry **e, size_t *n,
                       as_pk_error *err)
{
    pk_parser *p = &ps->p;
    int rc = 0;
    if (ps->err.code) {
        rc = ps->err.code;
        goto out;
    }
    for (;;) {
        if (e && as_pk_scan_next(p, item, e, n))
            return 1;
        if (p->pend_op && p->pend_i < p->pend_n) {
            pk_node *l = &p->pk->nodes[p->pend_list];
            if (e)
                *e = NULL, *n = 1;
            item->ref = p->stack[p->pend_m + p->pend_i++];
            item->device = l->dev;
            item->index = l->a++;
            return 1;
        }
        if (p->pend_op && (rc = end_batch(p)))
            break;
        if (p->done)
            return 0;
        if ((rc = run(p)) <= 0) {
            if (rc == 0) {
                order_chunks(p->pk);
                as_instream_skip(p->in, p->wp);
                p->wbase += p->wp;
                p->wp = p->wn = 0;
            }
            break;
        }
    }
out:
    if (rc < 0 && err)
        *err = ps->err;
    return rc;
}

int as_pk_stream_next(as_pk_stream *ps, as_pk_item *item, as_pk_error *err)
{
    ps->p.scan = 0;
    return stream_next(ps, item, NULL, NULL, err);
}

int as_pk_stream_next_entries(as_pk_stream *ps, as_pk_item *item, const as_pk_entry **e, size_t *n,
                              as_pk_error *err)
{
    ps->p.scan = !ps->p.lim.vm_only;
    return stream_next(ps, item, e, n, err);
}

int as_pk_stream_keys(as_pk_stream *ps, const char *const *keys, size_t n)
{
    if (n > AS_PK_MAX_KEYS || ps->p.sc)
        return AS_EINVAL;
    for (size_t k = 0; k < n; k++) {
        size_t len = strlen(keys[k]);
        if (len > 255)
            return AS_EINVAL;
        ps->p.keylen[k] = (uint8_t)len;
    }
    ps->p.keys = keys;
    ps->p.nkeys = (uint8_t)n;
    return 0;
}

int as_pk_stream_open_mem(const uint8_t *buf, size_t len, const as_pk_limits *lim,
                          as_pk_stream **out, as_pk_error *err)
{
    as_instream *in = NULL;
    as_trace_error te;
    int rc = as_instream_open_mem(buf, len, "pickle", &in, &te);
    *out = NULL;
    if (rc) {
        if (err) {
            *err = (as_pk_error){.code = rc};
            snprintf(err->msg, sizeof err->msg, "%.*s", (int)sizeof err->msg - 1, te.msg);
        }
        return rc;
    }
    if ((rc = as_pk_stream_open(in, lim, out, err))) {
        as_instream_close(in);
        return rc;
    }
    (*out)->own = in;
    return 0;
}

uint64_t as_pk_stream_generation(const as_pk_stream *ps)
{
    return ps->p.generation;
}

const as_pk *as_pk_stream_tree(const as_pk_stream *ps)
{
    return ps->p.pk;
}

uint64_t as_pk_stream_offset(const as_pk_stream *ps)
{
    return ps->p.wbase + ps->p.wp;
}

void as_pk_stream_close(as_pk_stream *ps)
{
    if (!ps)
        return;
    parser_free(&ps->p);
    as_instream_close(ps->own);
    free(ps);
}

void as_pk_free(as_pk *pk)
{
    if (!pk)
        return;
    free(pk->nodes);
    free(pk->cells);
    free(pk->icells);
    free(pk->bytes);
    free(pk->inodes);
    free(pk->ibytes);
    free(pk->ihash);
    free(pk);
}

/* ---- accessors ------------------------------------------------------------------------ */

static const pk_node *node_at(const as_pk *pk, as_pk_ref r)
{
    if (!pk || r == AS_PK_NIL)
        return NULL;
    if (ibit(r))
        return (r & ~AS_PK_IBIT) < pk->ninodes ? &pk->inodes[r & ~AS_PK_IBIT] : NULL;
    return r < pk->nnodes ? &pk->nodes[r] : NULL;
}

as_pk_ref as_pk_root(const as_pk *pk)
{
    return pk ? pk->root : AS_PK_NIL;
}
int as_pk_protocol(const as_pk *pk)
{
    return pk ? pk->protocol : 0;
}
size_t as_pk_node_count(const as_pk *pk)
{
    return pk ? pk->nnodes : 0;
}

size_t as_pk_memory(const as_pk *pk)
{
    return pk ? sizeof *pk + (pk->capnodes + pk->capinodes) * sizeof(pk_node) +
                    (pk->capcells + pk->capicells) * sizeof *pk->cells + pk->capbytes +
                    pk->capibytes + pk->capihash * sizeof *pk->ihash
              : 0;
}

as_pk_type as_pk_type_of(const as_pk *pk, as_pk_ref r)
{
    const pk_node *n = node_at(pk, r);
    return n ? (as_pk_type)n->type : AS_PK_NONE;
}

int as_pk_streamed(const as_pk *pk, as_pk_ref r)
{
    const pk_node *n = node_at(pk, r);
    return !n ? 0 : (n->flags & PKF_TRACE) ? 1 : (n->flags & PKF_DROPPED) ? 2 : 0;
}

int as_pk_interned(const as_pk *pk, as_pk_ref r)
{
    return r != AS_PK_NIL && ibit(r) && (r & ~AS_PK_IBIT) >= 3 && node_at(pk, r) != NULL;
}

uint64_t as_pk_offset(const as_pk *pk, as_pk_ref r)
{
    const pk_node *n = node_at(pk, r);
    return n ? n->off : UINT64_MAX;
}

int as_pk_int(const as_pk *pk, as_pk_ref r, int64_t *v)
{
    const pk_node *n = node_at(pk, r);
    if (!n || (n->type != AS_PK_INT && n->type != AS_PK_BOOL))
        return -1;
    *v = n->u.i;
    return 0;
}

int as_pk_float(const as_pk *pk, as_pk_ref r, double *v)
{
    const pk_node *n = node_at(pk, r);
    if (!n)
        return -1;
    if (n->type == AS_PK_FLOAT)
        *v = n->u.f;
    else if (n->type == AS_PK_INT)
        *v = (double)n->u.i;
    else
        return -1;
    return 0;
}

int as_pk_str(const as_pk *pk, as_pk_ref r, const char **s, size_t *len)
{
    const pk_node *n = node_at(pk, r);
    if (!n || (n->type != AS_PK_STR && n->type != AS_PK_BYTES))
        return -1;
    *s = (const char *)str_bytes(pk, r, n);
    *len = n->a;
    return 0;
}

/* Whether k is the string key[0..kl): its length first (a load), then its bytes. */
static inline int key_is(const as_pk *pk, as_pk_ref k, const char *key, size_t kl)
{
    const pk_node *n = node_at(pk, k);
    return n && n->type == AS_PK_STR && n->a == kl &&
           (kl == 0 || memcmp(str_bytes(pk, k, n), key, kl) == 0);
}

int as_pk_str_eq(const as_pk *pk, as_pk_ref r, const char *key)
{
    return key_is(pk, r, key, strlen(key));
}

size_t as_pk_len(const as_pk *pk, as_pk_ref r)
{
    const pk_node *n = node_at(pk, r);
    if (!n)
        return 0;
    if (n->type == AS_PK_LIST || n->type == AS_PK_TUPLE)
        return n->a;
    if (n->type == AS_PK_DICT)
        return n->a / 2;
    return 0;
}

size_t as_pk_items(const as_pk *pk, as_pk_ref c, const as_pk_ref **items)
{
    const pk_node *n = node_at(pk, c);
    if (!n || (n->type != AS_PK_LIST && n->type != AS_PK_TUPLE && n->type != AS_PK_DICT) ||
        n->u.head == AS_PK_NIL)
        return 0;
    const uint32_t *chunk = (ibit(c) ? pk->icells : pk->cells) + n->u.head;
    if (chunk[0] != AS_PK_NIL) /* more than one chunk */
        return SIZE_MAX;
    *items = chunk + 2;
    return chunk[1];
}

/* A container iterated before STOP (a streamed entry) whose chunks are newest first is put
 * oldest first, once. Iteration order is the tree's content and the chunk order only its
 * storage, which a const tree still lets us rearrange (its arrays are not const). The cost
 * is the count of chunks, which the caller pays for the items anyway (torch_snapshot.c
 * charges them), and add_items undoes it only when the container grows. */
static void iter_order(const as_pk *pk, as_pk_ref c)
{
    pk_node *n = &pk->nodes[c];
    if (pk->ordered || (n->flags & PKF_OLDFIRST) || n->u.head == AS_PK_NIL ||
        pk->cells[n->u.head] == AS_PK_NIL)
        return;
    reverse_chunks(pk->cells, n);
    n->flags |= PKF_OLDFIRST;
}

void as_pk_iter_init(as_pk_iter *it, const as_pk *pk, as_pk_ref c)
{
    const pk_node *n = node_at(pk, c);
    if (n && !ibit(c) && is_container(n->type))
        iter_order(pk, c);
    it->pk = pk;
    it->cells = pk ? (ibit(c) && c != AS_PK_NIL ? pk->icells : pk->cells) : NULL;
    it->pos = 0;
    it->pairs = n && n->type == AS_PK_DICT;
    it->chunk = (n && (n->type == AS_PK_LIST || n->type == AS_PK_TUPLE || n->type == AS_PK_DICT))
                    ? n->u.head
                    : AS_PK_NIL;
}

/* Next cell of the container, crossing chunk boundaries. */
static int iter_cell(as_pk_iter *it, as_pk_ref *out)
{
    const uint32_t *cells = it->cells;
    while (it->chunk != AS_PK_NIL) {
        if (it->pos < cells[it->chunk + 1]) {
            *out = cells[it->chunk + 2 + it->pos++];
            return 1;
        }
        it->chunk = cells[it->chunk];
        it->pos = 0;
    }
    return 0;
}

int as_pk_iter_next(as_pk_iter *it, as_pk_ref *item)
{
    if (it->pairs)
        return 0;
    return iter_cell(it, item);
}

int as_pk_iter_next_pair(as_pk_iter *it, as_pk_ref *key, as_pk_ref *value)
{
    /* SETITEMS batches hold whole pairs, so a key and its value share a chunk. */
    if (!it->pairs)
        return 0;
    return iter_cell(it, key) && iter_cell(it, value);
}

as_pk_ref as_pk_dict_get(const as_pk *pk, as_pk_ref dict, const char *key)
{
    as_pk_iter it;
    as_pk_ref found = AS_PK_NIL, last = AS_PK_NIL;
    if (as_pk_type_of(pk, dict) != AS_PK_DICT)
        return AS_PK_NIL;
    size_t kl = strlen(key);
    as_pk_iter_init(&it, pk, dict);
    /* SETITEMS batches hold whole pairs, so a chunk holds whole pairs too; a key repeated
     * (the last one wins) is most often the same memoized string: last. */
    for (uint32_t c = it.chunk; c != AS_PK_NIL; c = it.cells[c]) {
        const uint32_t *x = it.cells + c + 2;
        for (uint32_t i = 0, m = it.cells[c + 1]; i + 1 < m; i += 2)
            if (x[i] == last || key_is(pk, x[i], key, kl))
                found = x[i + 1], last = x[i];
    }
    return found;
}

int as_pk_keys_init(as_pk_keys *k, const as_pk *pk, const char *const *names, size_t n)
{
    if (n > AS_PK_MAX_KEYS)
        return AS_EINVAL;
    *k = (as_pk_keys){.pk = pk, .names = names, .n = (uint8_t)n};
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (len > 255)
            return AS_EINVAL;
        k->len[i] = (uint8_t)len;
    }
    memset(k->pos_ref, 0xff, sizeof k->pos_ref); /* AS_PK_NIL: nothing seen */
    return 0;
}

/* The index of key string r among k's names, k->n for none (by length, then bytes). */
static unsigned take_match(const as_pk_keys *k, as_pk_ref r)
{
    for (unsigned i = 0; i < k->n; i++)
        if (key_is(k->pk, r, k->names[i], k->len[i]))
            return i;
    return k->n;
}

size_t as_pk_dict_take(as_pk_keys *k, as_pk_ref dict, as_pk_ref *vals)
{
    const as_pk *pk = k->pk;
    as_pk_iter it;
    for (unsigned i = 0; i < k->n; i++)
        vals[i] = AS_PK_NIL;
    if (as_pk_type_of(pk, dict) != AS_PK_DICT)
        return 0;
    as_pk_iter_init(&it, pk, dict);
    size_t j = 0; /* pair position */
    for (uint32_t c = it.chunk; c != AS_PK_NIL; c = it.cells[c]) {
        const uint32_t *x = it.cells + c + 2;
        for (uint32_t i = 0, m = it.cells[c + 1]; i + 1 < m; i += 2, j++) {
            unsigned key;
            if (j < AS_PK_TAKE_POS && k->pos_ref[j] == x[i]) {
                key = k->pos_key[j];
            } else {
                key = take_match(k, x[i]);
                if (j < AS_PK_TAKE_POS)
                    k->pos_ref[j] = x[i], k->pos_key[j] = (uint8_t)key;
            }
            if (key < k->n)
                vals[key] = x[i + 1];
        }
    }
    return j;
}
