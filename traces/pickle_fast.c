/*
 * pickle_fast.c - the pickle VM's fast path for the opcodes a snapshot's trace entries are
 * made of: Python's pickler writes each entry as EMPTY_DICT MEMOIZE MARK, then per key a
 * memo reference (BINGET, LONG_BINGET) or a memoized SHORT_BINUNICODE, a value (BININT*,
 * LONG1, a memoized string, NONE, a bool, BINFLOAT, or a list of frame dicts built the same
 * way) and SETITEMS; about 20 opcodes an entry. This loop keeps the window, the stack and
 * the node arena in locals and runs those opcodes inline; the container fills (SETITEMS,
 * APPENDS, APPEND, SETITEM) go to the VM's own functions.
 *
 * Invariant: an opcode is either run here with exactly the VM's effect (the same nodes,
 * offsets, memo slots and marks), or left to the VM untouched: every check the VM makes
 * (window, stack room, node limit, memo bounds, mark depth, pool capacity) is made first,
 * and anything that would fail, grow a pool, or is not one of these opcodes stops the loop
 * there, so that the VM runs it, reports its error, or grows. The tests parse with and
 * without this path and compare trees and errors (test_pickle, fuzz_pickle).
 */
#include <string.h>

#include "pickle_internal.h"

/* The parser state this loop works on, in locals (written back by sync). */
typedef struct fast {
    pk_parser *p;
    as_pk *pk;
    const uint8_t *w;
    size_t at, wn; /* window position of the current opcode, window end */
    as_pk_ref *stack;
    size_t ns;    /* stack items */
    size_t sroom; /* p->stack_room */
    size_t fence; /* stack index of the innermost MARK (0: none) */
    pk_node *nodes;
    size_t nn;    /* nodes */
    size_t nroom; /* nodes below capacity and the limit on values held */
} fast;

static void reload(fast *f)
{
    pk_parser *p = f->p;
    as_pk *pk = p->pk;
    f->pk = pk;
    f->stack = p->stack;
    f->ns = p->nstack;
    f->sroom = p->stack_room;
    f->fence = p->nmarks ? p->marks[p->nmarks - 1].stack : 0;
    f->nodes = pk->nodes;
    f->nn = pk->nnodes;
    /* new_node's test: nnodes < capnodes and nnodes + ninodes - 3 < max_nodes */
    uint64_t held = pk->ninodes - 3, lim = p->lim.max_nodes;
    size_t byval = held < lim ? (size_t)(lim - held) : 0;
    f->nroom = pk->capnodes < byval ? pk->capnodes : byval;
}

static void sync(fast *f)
{
    f->p->wp = f->at;
    f->p->nstack = f->ns;
    f->pk->nnodes = f->nn;
}

/* n (0..8) little-endian bytes at s; 8 bytes at s are readable. */
static inline uint64_t le_bytes(const uint8_t *s, unsigned n)
{
    uint64_t v = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&v, s, 8);
    return n >= 8 ? v : v & ((1ull << (8 * n)) - 1);
#else
    for (unsigned i = n; i-- > 0;)
        v = v << 8 | s[i];
    return v;
#endif
}

/* A new value of type t pushed, as new_node + push; NULL when the VM must do it. */
static inline pk_node *fresh(fast *f, uint8_t t)
{
    if (f->nn >= f->nroom || f->ns >= f->sroom)
        return NULL;
    pk_node *n = &f->nodes[f->nn];
    *n = (pk_node){.type = t, .off = f->p->wbase + f->at};
    f->stack[f->ns++] = (as_pk_ref)f->nn++;
    return n;
}

/* BININT, BININT1, BININT2, LONG1 of up to 8 bytes: 0 when the VM must run it. */
static inline int fast_int(fast *f, uint8_t op, const uint8_t *arg)
{
    int64_t v;
    size_t len;
    if (op == 'J') {
        v = (int32_t)(uint32_t)le_bytes(arg, 4), len = 5;
    } else if (op == 'K') {
        v = arg[0], len = 2;
    } else if (op == 'M') {
        v = arg[0] | arg[1] << 8, len = 3;
    } else { /* LONG1: a length, then two's complement */
        unsigned n = arg[0];
        if (n > 8)
            return 0;
        uint64_t u = le_bytes(arg + 1, n);
        if (n > 0 && n < 8 && (arg[n] & 0x80))
            u |= ~0ull << (8 * n);
        memcpy(&v, &u, sizeof v);
        len = 2 + n;
    }
    pk_node *n = fresh(f, AS_PK_INT);
    if (!n)
        return 0;
    n->u.i = v;
    f->at += len;
    return 1;
}

/* NONE, NEWTRUE, NEWFALSE, BINFLOAT and the EMPTY_ containers. */
static inline int fast_value(fast *f, uint8_t op, const uint8_t *arg)
{
    uint8_t t = op == 'N'   ? AS_PK_NONE
                : op == 'G' ? AS_PK_FLOAT
                : op == ']' ? AS_PK_LIST
                : op == '}' ? AS_PK_DICT
                : op == ')' ? AS_PK_TUPLE
                            : AS_PK_BOOL;
    pk_node *n = fresh(f, t);
    if (!n)
        return 0;
    if (t == AS_PK_LIST || t == AS_PK_TUPLE || t == AS_PK_DICT) {
        n->u.head = AS_PK_NIL;
    } else if (t == AS_PK_BOOL) {
        n->u.i = op == 0x88;
    } else if (t == AS_PK_FLOAT) {
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
            u = u << 8 | arg[i];
        memcpy(&n->u.f, &u, sizeof u);
        f->at += 8;
    }
    f->at += 1;
    return 1;
}

/* SHORT_BINUNICODE and SHORT_BINBYTES whose bytes are in the window and fit the pool. */
static inline int fast_string(fast *f, uint8_t op, const uint8_t *arg)
{
    as_pk *pk = f->pk;
    size_t n = arg[0];
    if (n > f->wn - f->at - 2 || pk->nbytes + n > pk->capbytes)
        return 0;
    pk_node *node = fresh(f, op == 0x8c ? AS_PK_STR : AS_PK_BYTES);
    if (!node)
        return 0;
    node->a = (uint32_t)n;
    node->off = f->p->wbase + f->at + 2;
    node->u.data = pk->nbytes;
    if (n) {
        memcpy(pk->bytes + pk->nbytes, arg + 1, n);
        pk->nbytes += n;
    }
    f->at += 2 + n;
    return 1;
}

/* MEMOIZE, BINPUT, LONG_BINPUT into a slot the memo already has room for (memo_put). */
static inline int fast_put(fast *f, uint8_t op, const uint8_t *arg)
{
    pk_parser *p = f->p;
    uint64_t idx;
    size_t len;
    if (op == 0x94) {
        idx = p->memo_len, len = 1;
    } else if (op == 'q') {
        idx = arg[0], len = 2;
    } else {
        idx = le_bytes(arg, 4), len = 5;
    }
    uint64_t bound = p->wbase + f->at + PK_MEMO_SLACK;
    if (bound > p->lim.max_memo)
        bound = p->lim.max_memo;
    int track = p->nmarks && p->streaming; /* memo_put's dirty list */
    if (f->ns <= f->fence || idx >= bound || idx >= p->capmemo ||
        (track && p->ndirty >= p->capdirty))
        return 0;
    as_pk_ref *slot = p->mpages[idx >> PK_MPAGE_BITS].dense;
    if (!slot) /* a packed page: the VM unpacks it */
        return 0;
    slot += idx & (PK_MPAGE - 1);
    if (*slot == AS_PK_NIL)
        p->memo_len++;
    *slot = f->stack[f->ns - 1];
    pk_memo_forget(p, idx);
    if (track)
        p->dirty[p->ndirty++] = (uint32_t)idx;
    f->at += len;
    return 1;
}

/* BINGET, LONG_BINGET of a slot that is set (memo_get). */
static inline int fast_get(fast *f, uint8_t op, const uint8_t *arg)
{
    pk_parser *p = f->p;
    uint64_t idx;
    if (op == 'h') {
        idx = arg[0];
    } else {
        idx = le_bytes(arg, 4);
    }
    as_pk_ref r = pk_memo_get(p, idx);
    if (r == AS_PK_NIL || f->ns >= f->sroom)
        return 0;
    f->stack[f->ns++] = r;
    f->at += op == 'h' ? 2 : 5;
    return 1;
}

/* MARK with room for it (push_mark). */
static inline int fast_mark(fast *f)
{
    pk_parser *p = f->p;
    if (p->nmarks >= p->lim.max_marks || p->nmarks >= p->capmarks)
        return 0;
    if (p->scan && f->ns && nd(f->pk, f->stack[f->ns - 1])->type == AS_PK_LIST)
        return 0; /* perhaps a trace batch: the VM asks the entry scanner */
    p->marks[p->nmarks++] = (pk_mark){.stack = f->ns,
                                      .nodes = f->nn,
                                      .cells = f->pk->ncells,
                                      .bytes = f->pk->nbytes,
                                      .dirty = p->ndirty,
                                      .low = UINT32_MAX};
    f->fence = f->ns;
    f->at += 1;
    return 1;
}

/* The checks add_items makes before it writes n (> 0) items into container c: 1 when they
 * fit without a pool growing or a limit (else the VM grows or reports), with *extend. */
static inline int add_fits(const fast *f, as_pk_ref c, size_t n, int *extend)
{
    const as_pk *pk = f->pk;
    if (ibit(c))
        return 0;
    const pk_node *node = &f->nodes[c];
    uint32_t head = node->u.head;
    *extend = head != AS_PK_NIL && (size_t)head + 2 + pk->cells[head + 1] == pk->ncells;
    size_t need = pk->ncells + n + (*extend ? 0 : 2);
    return (uint64_t)node->a + n <= 0xFFFFFFFEull && need <= 0xFFFFFFFEull && need <= pk->capcells;
}

/* add_items' writes, once add_fits said yes. */
static inline void add_commit(fast *f, as_pk_ref c, const as_pk_ref *items, size_t n, int extend)
{
    pk_parser *p = f->p;
    as_pk *pk = f->pk;
    pk_node *node = &f->nodes[c];
    if (p->nmarks && c < p->marks[p->nmarks - 1].nodes && c < p->marks[p->nmarks - 1].low)
        p->marks[p->nmarks - 1].low = c;
    if (extend) {
        pk->cells[node->u.head + 1] += (uint32_t)n;
    } else {
        uint32_t at = (uint32_t)pk->ncells;
        pk->cells[at] = node->u.head;
        pk->cells[at + 1] = (uint32_t)n;
        node->u.head = at;
        pk->ncells += 2;
    }
    memcpy(pk->cells + pk->ncells, items, n * sizeof *items);
    pk->ncells += n;
    node->a += (uint32_t)n;
}

/* Dict keys Python could hash (check_keys): none of them a list or a dict. */
static inline int keys_ok(const fast *f, const as_pk_ref *kv, size_t n)
{
    for (size_t i = 0; i < n; i += 2) {
        uint8_t t = nd(f->pk, kv[i])->type;
        if (t == AS_PK_LIST || t == AS_PK_DICT)
            return 0;
    }
    return 1;
}

/* SETITEMS, and APPENDS onto a list that is not streamed (as_pk_vm_fill). */
static inline int fast_fill(fast *f, uint8_t op)
{
    pk_parser *p = f->p;
    if (!p->nmarks)
        return 0;
    size_t m = f->fence, n = f->ns - m;
    size_t below = p->nmarks > 1 ? p->marks[p->nmarks - 2].stack : 0;
    if (m < 1 || m - 1 < below)
        return 0;
    as_pk_ref c = f->stack[m - 1];
    if (nd(f->pk, c)->type != (op == 'e' ? AS_PK_LIST : AS_PK_DICT))
        return 0;
    if (op == 'e' ? p->streaming && as_pk_vm_trace_list(p, m - 1)
                  : (n % 2) || !keys_ok(f, &f->stack[m], n))
        return 0;
    int extend = 0;
    if (n && !add_fits(f, c, n, &extend))
        return 0;
    pk_mark mk = p->marks[--p->nmarks]; /* pop_mark */
    if (p->nmarks && mk.low < p->marks[p->nmarks - 1].low)
        p->marks[p->nmarks - 1].low = mk.low;
    if (n)
        add_commit(f, c, &f->stack[m], n, extend);
    f->ns = m;
    f->fence = p->nmarks ? p->marks[p->nmarks - 1].stack : 0;
    f->at += 1;
    return 1;
}

/* APPEND onto a list that is not streamed, and SETITEM (as_pk_vm_append). */
static inline int fast_add1(fast *f, uint8_t op)
{
    pk_parser *p = f->p;
    size_t k = op == 'a' ? 1 : 2;
    if (f->ns - f->fence < k + 1)
        return 0;
    as_pk_ref c = f->stack[f->ns - k - 1];
    if (nd(f->pk, c)->type != (op == 'a' ? AS_PK_LIST : AS_PK_DICT))
        return 0;
    if (op == 'a' ? p->streaming && as_pk_vm_trace_list(p, f->ns - 2)
                  : !keys_ok(f, &f->stack[f->ns - 2], 2))
        return 0;
    int extend = 0;
    if (!add_fits(f, c, k, &extend))
        return 0;
    add_commit(f, c, &f->stack[f->ns - k], k, extend);
    f->ns -= k;
    f->at += 1;
    return 1;
}

enum { FC_VM = 0, FC_INT, FC_PUT, FC_GET, FC_STR, FC_VALUE, FC_MARK, FC_FILL, FC_ADD1 };

/* What runs each opcode here (FC_VM: the general loop). */
static const uint8_t fast_class[256] = {
    ['J'] = FC_INT,    ['K'] = FC_INT,    ['M'] = FC_INT,   [0x8a] = FC_INT,  [0x94] = FC_PUT,
    ['q'] = FC_PUT,    ['r'] = FC_PUT,    ['h'] = FC_GET,   ['j'] = FC_GET,   [0x8c] = FC_STR,
    ['C'] = FC_STR,    ['}'] = FC_VALUE,  [']'] = FC_VALUE, [')'] = FC_VALUE, ['N'] = FC_VALUE,
    [0x88] = FC_VALUE, [0x89] = FC_VALUE, ['G'] = FC_VALUE, ['('] = FC_MARK,  ['u'] = FC_FILL,
    ['e'] = FC_FILL,   ['a'] = FC_ADD1,   ['s'] = FC_ADD1,
};

/* One opcode: 1 when run here, 0 when it is the VM's. */
static inline int fast_op(fast *f, uint8_t op, const uint8_t *arg)
{
    switch (fast_class[op]) {
    case FC_INT:
        return fast_int(f, op, arg);
    case FC_PUT:
        return fast_put(f, op, arg);
    case FC_GET:
        return fast_get(f, op, arg);
    case FC_STR:
        return fast_string(f, op, arg);
    case FC_VALUE:
        return fast_value(f, op, arg);
    case FC_MARK:
        return fast_mark(f);
    case FC_FILL:
        return fast_fill(f, op);
    case FC_ADD1:
        return fast_add1(f, op);
    default:
        return 0;
    }
}

int as_pk_fast_run(pk_parser *p)
{
    fast f = {.p = p, .w = p->w, .at = p->wp, .wn = p->wn};
    reload(&f);
    /* At least 16 bytes at each opcode, as the VM keeps: every fixed argument is there. */
    while (f.wn - f.at >= 16 && fast_op(&f, f.w[f.at], f.w + f.at + 1))
        ;
    sync(&f);
    return 0;
}
