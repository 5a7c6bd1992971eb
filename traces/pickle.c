/*
 * pickle.c - the plain-data pickle reader (see pickle.h for what is accepted).
 *
 * Values live in one array of 16-byte nodes. Container contents live in a pool of 32-bit
 * cells, as chunks [next, count, item...]; each APPENDS/SETITEMS batch becomes one chunk
 * (repeated single APPENDs extend the chunk in place while it is the pool's last), and a
 * container's chunks are prepended while parsing and put back in order once at STOP.
 * Invariant: every index read from the input is bounds-checked before use, and nothing in
 * this file recurses, so a hostile pickle can only hit a limit and get an error.
 */
#include "pickle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "trace_internal.h"

#define PK_HARD_MAX_INPUT 0xFFFFFFFEull /* offsets and lengths fit in 32 bits */
#define PK_HARD_MAX_NODES 0xFFFFFFFEull /* AS_PK_NIL stays free */

typedef struct pk_node {
    uint8_t type;
    uint8_t pad[3];
    uint32_t a; /* STR/BYTES: length; containers: item cells (dict: 2 per pair);
                   scalars: opcode offset */
    union {
        int64_t i;
        double f;
        uint64_t data; /* STR/BYTES: offset of the bytes in the input */
        struct {
            uint32_t head; /* first chunk (the newest one while parsing), or AS_PK_NIL */
            uint32_t off;  /* opcode offset */
        } c;
    } u;
} pk_node;

_Static_assert(sizeof(pk_node) == 16, "pk_node is meant to stay 16 bytes");

struct as_pk {
    const uint8_t *buf;
    size_t len;
    int protocol;
    as_pk_ref root;
    pk_node *nodes;
    size_t nnodes, capnodes;
    uint32_t *cells;
    size_t ncells, capcells;
};

/* Parser state that does not outlive as_pk_parse. */
typedef struct pk_parser {
    as_pk *pk;
    as_pk_limits lim;
    as_pk_error *err;
    size_t pos; /* offset of the current opcode */
    as_pk_ref *stack;
    size_t nstack, capstack;
    size_t *marks;
    size_t nmarks, capmarks;
    as_pk_ref *memo; /* AS_PK_NIL = unset */
    size_t capmemo, memo_len;
} pk_parser;

/* ---- opcode names, for messages ------------------------------------------------------ */

static const char *op_name(uint8_t op)
{
    switch (op) {
    case '(': return "MARK";
    case '.': return "STOP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'L': return "LONG";
    case 'M': return "BININT2";
    case 'N': return "NONE";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'X': return "BINUNICODE";
    case 'a': return "APPEND";
    case 'b': return "BUILD";
    case 'c': return "GLOBAL";
    case 'd': return "DICT";
    case '}': return "EMPTY_DICT";
    case 'e': return "APPENDS";
    case 'g': return "GET";
    case 'h': return "BINGET";
    case 'i': return "INST";
    case 'j': return "LONG_BINGET";
    case 'l': return "LIST";
    case ']': return "EMPTY_LIST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";
    case 't': return "TUPLE";
    case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";
    case 'G': return "BINFLOAT";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return NULL;
    }
}

static const char *type_names[] = {
    [AS_PK_NONE] = "None", [AS_PK_BOOL] = "bool",   [AS_PK_INT] = "int",
    [AS_PK_FLOAT] = "float", [AS_PK_STR] = "str",   [AS_PK_BYTES] = "bytes",
    [AS_PK_LIST] = "list",  [AS_PK_TUPLE] = "tuple", [AS_PK_DICT] = "dict",
};

const char *as_pk_type_name(as_pk_type t)
{
    return (unsigned)t < sizeof type_names / sizeof type_names[0] ? type_names[t] : "?";
}

static int fail(pk_parser *p, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(pk_parser *p, int code, const char *fmt, ...)
{
    if (p->err) {
        va_list ap;
        va_start(ap, fmt);
        p->err->code = code;
        p->err->offset = p->pos;
        vsnprintf(p->err->msg, sizeof p->err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* as_grow (instream.c), starting at 64 items */
static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    return as_grow(arr, cap, need, elem, 64);
}

static int new_node(pk_parser *p, uint8_t type, as_pk_ref *out)
{
    as_pk *pk = p->pk;
    if (pk->nnodes >= pk->capnodes || pk->nnodes >= p->lim.max_nodes) {
        if (pk->nnodes >= p->lim.max_nodes)
            return fail(p, AS_TRACE_ENOMEM, "more than %llu values (limit)",
                        (unsigned long long)p->lim.max_nodes);
        if (grow((void **)&pk->nodes, &pk->capnodes, pk->nnodes + 1, sizeof *pk->nodes))
            return fail(p, AS_TRACE_ENOMEM, "out of host memory for %zu values", pk->nnodes + 1);
    }
    pk_node *n = &pk->nodes[pk->nnodes];
    n->type = type;
    n->pad[0] = n->pad[1] = n->pad[2] = 0;
    if (type == AS_PK_LIST || type == AS_PK_TUPLE || type == AS_PK_DICT) {
        n->a = 0;
        n->u.c.head = AS_PK_NIL;
        n->u.c.off = (uint32_t)p->pos;
    } else {
        n->a = (uint32_t)p->pos;
        n->u.i = 0;
    }
    *out = (as_pk_ref)pk->nnodes++;
    return 0;
}

static int push_slow(pk_parser *p, as_pk_ref r)
{
    if (p->nstack >= p->lim.max_stack)
        return fail(p, AS_TRACE_ENOMEM, "unpickling stack deeper than %llu (limit)",
                    (unsigned long long)p->lim.max_stack);
    if (grow((void **)&p->stack, &p->capstack, p->nstack + 1, sizeof *p->stack))
        return fail(p, AS_TRACE_ENOMEM, "out of host memory for the stack");
    p->stack[p->nstack++] = r;
    return 0;
}

/* The hot path (every opcode but MARK and the container fills pushes): no call, no check
 * beyond the capacity, which never exceeds max_stack unchecked. */
static inline int push(pk_parser *p, as_pk_ref r)
{
    if (p->nstack < p->capstack && p->nstack < p->lim.max_stack) {
        p->stack[p->nstack++] = r;
        return 0;
    }
    return push_slow(p, r);
}

/* Stack items above the innermost MARK: what an opcode may consume (Python's "fence"). */
static size_t avail(const pk_parser *p)
{
    return p->nstack - (p->nmarks ? p->marks[p->nmarks - 1] : 0);
}

static int underflow(pk_parser *p, uint8_t op, size_t need)
{
    return fail(p, AS_TRACE_ECORRUPT, "%s needs %zu value%s on the stack above the mark, has %zu",
                op_name(op), need, need == 1 ? "" : "s", avail(p));
}

/* Appends cells items[0..n) to container c as one chunk (or into its newest chunk when that
 * chunk is the last thing in the pool). */
static int add_items(pk_parser *p, as_pk_ref c, const as_pk_ref *items, size_t n)
{
    as_pk *pk = p->pk;
    pk_node *node = &pk->nodes[c];
    if (n == 0)
        return 0;
    if ((uint64_t)node->a + n > 0xFFFFFFFEull)
        return fail(p, AS_TRACE_ENOMEM, "container with more than 2^32 items");
    uint32_t head = node->u.c.head;
    int extend = head != AS_PK_NIL && (size_t)head + 2 + pk->cells[head + 1] == pk->ncells;
    size_t need = pk->ncells + n + (extend ? 0 : 2);
    if (need > 0xFFFFFFFEull)
        return fail(p, AS_TRACE_ENOMEM, "pickle too large: more than 2^32 container cells");
    if (grow((void **)&pk->cells, &pk->capcells, need, sizeof *pk->cells))
        return fail(p, AS_TRACE_ENOMEM, "out of host memory for %zu container cells", need);
    node = &pk->nodes[c];
    if (extend) {
        pk->cells[head + 1] += (uint32_t)n;
    } else {
        uint32_t at = (uint32_t)pk->ncells;
        pk->cells[at] = head;
        pk->cells[at + 1] = (uint32_t)n;
        node->u.c.head = at;
        pk->ncells += 2;
    }
    memcpy(pk->cells + pk->ncells, items, n * sizeof *items);
    pk->ncells += n;
    node->a += (uint32_t)n;
    return 0;
}

static uint64_t rd_le(const uint8_t *s, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | s[i];
    return v;
}

/* Dict keys must be hashable in Python: refuse the two unhashable types we can build. */
static int check_keys(pk_parser *p, uint8_t op, const as_pk_ref *kv, size_t n)
{
    for (size_t i = 0; i < n; i += 2) {
        uint8_t t = p->pk->nodes[kv[i]].type;
        if (t == AS_PK_LIST || t == AS_PK_DICT)
            return fail(p, AS_TRACE_ECORRUPT, "%s: unhashable dict key (a %s)", op_name(op),
                        as_pk_type_name(t));
    }
    return 0;
}

static int memo_put(pk_parser *p, uint8_t op, uint64_t idx)
{
    if (avail(p) < 1)
        return underflow(p, op, 1);
    if (idx >= p->lim.max_memo)
        return fail(p, AS_TRACE_ENOMEM, "%s: memo index %llu beyond the limit %llu", op_name(op),
                    (unsigned long long)idx, (unsigned long long)p->lim.max_memo);
    size_t old = p->capmemo;
    if (grow((void **)&p->memo, &p->capmemo, (size_t)idx + 1, sizeof *p->memo))
        return fail(p, AS_TRACE_ENOMEM, "out of host memory for the memo");
    for (size_t i = old; i < p->capmemo; i++)
        p->memo[i] = AS_PK_NIL;
    if (p->memo[idx] == AS_PK_NIL)
        p->memo_len++;
    p->memo[idx] = p->stack[p->nstack - 1];
    return 0;
}

static int memo_get(pk_parser *p, uint8_t op, uint64_t idx)
{
    if (idx >= p->capmemo || p->memo[idx] == AS_PK_NIL)
        return fail(p, AS_TRACE_ECORRUPT, "%s: memo key %llu was never set", op_name(op),
                    (unsigned long long)idx);
    return push(p, p->memo[idx]);
}

/* Reverses every container's chunk list, so that iteration runs in insertion order. */
static void order_chunks(as_pk *pk)
{
    for (size_t i = 0; i < pk->nnodes; i++) {
        pk_node *n = &pk->nodes[i];
        if (n->type != AS_PK_LIST && n->type != AS_PK_TUPLE && n->type != AS_PK_DICT)
            continue;
        uint32_t prev = AS_PK_NIL, cur = n->u.c.head;
        while (cur != AS_PK_NIL) {
            uint32_t next = pk->cells[cur];
            pk->cells[cur] = prev;
            prev = cur;
            cur = next;
        }
        n->u.c.head = prev;
    }
}

static void set_limits(as_pk_limits *l, const as_pk_limits *in, size_t len)
{
    *l = in ? *in : (as_pk_limits){0};
    if (!l->max_input || l->max_input > PK_HARD_MAX_INPUT)
        l->max_input = PK_HARD_MAX_INPUT;
    if (!l->max_nodes || l->max_nodes > PK_HARD_MAX_NODES)
        l->max_nodes = PK_HARD_MAX_NODES;
    if (!l->max_stack)
        l->max_stack = 1u << 24;
    if (!l->max_marks)
        l->max_marks = 4096;
    if (!l->max_memo)
        l->max_memo = 1u << 26;
    /* A real pickler numbers memo slots 0, 1, 2, ... and each put costs at least a byte, so
     * an index at or past the input length only comes from a crafted memo bomb. */
    if (l->max_memo > len)
        l->max_memo = len;
}

/* The opcode loop. Returns 0 at STOP with the root set. */
static int run(pk_parser *p)
{
    as_pk *pk = p->pk;
    const uint8_t *b = pk->buf;
    size_t len = pk->len;
    int rc;

    if (len < 2 || b[0] != 0x80)
        return fail(p, AS_TRACE_EFORMAT, "not a pickle of protocol 2 or later (no PROTO opcode)");
    if (b[1] < 2 || b[1] > 5)
        return fail(p, AS_TRACE_EFORMAT, "pickle protocol %u is not supported (2 to 5 are)", b[1]);
    pk->protocol = b[1];
    p->pos = 2;

    for (;;) {
        if (p->pos >= len)
            return fail(p, AS_TRACE_ECORRUPT, "truncated pickle: no STOP opcode before the end");
        size_t at = p->pos;
        uint8_t op = b[at];
        size_t left = len - at - 1; /* argument bytes available after the opcode */
        const uint8_t *arg = b + at + 1;
        size_t argn = 0;            /* fixed argument length consumed */
        as_pk_ref r;

/* Checks that the opcode's next n argument bytes exist. */
#define NEED(n)                                                                                \
    do {                                                                                       \
        if (left < (size_t)(n))                                                                \
            return fail(p, AS_TRACE_ECORRUPT, "truncated pickle: %s needs %llu argument bytes, " \
                        "%zu left", op_name(op), (unsigned long long)(n), left);               \
    } while (0)

        switch (op) {
        case 0x95: { /* FRAME: a length prefix only; the whole input is already in memory */
            NEED(8);
            uint64_t flen = rd_le(arg, 8);
            if (flen > left - 8)
                return fail(p, AS_TRACE_ECORRUPT,
                            "truncated pickle: FRAME of %llu bytes, %zu left",
                            (unsigned long long)flen, left - 8);
            argn = 8;
            break;
        }
        case '.': /* STOP */
            if (p->nmarks)
                return fail(p, AS_TRACE_ECORRUPT, "STOP with %zu MARK%s still open", p->nmarks,
                            p->nmarks == 1 ? "" : "s");
            if (p->nstack != 1)
                return fail(p, AS_TRACE_ECORRUPT, "STOP with %zu values on the stack (needs 1)",
                            p->nstack);
            if (left)
                return fail(p, AS_TRACE_ECORRUPT, "%zu bytes of trailing data after STOP", left);
            pk->root = p->stack[0];
            return 0;
        case 'N': /* NONE */
        case 0x88: /* NEWTRUE */
        case 0x89: /* NEWFALSE */
            if ((rc = new_node(p, op == 'N' ? AS_PK_NONE : AS_PK_BOOL, &r)))
                return rc;
            pk->nodes[r].u.i = op == 0x88;
            if ((rc = push(p, r)))
                return rc;
            break;
        case 'J':  /* BININT: signed 32-bit */
        case 'K':  /* BININT1: unsigned 8-bit */
        case 'M':  /* BININT2: unsigned 16-bit */
        case 0x8a: /* LONG1: 1-byte length, little-endian two's complement */
        case 0x8b: /* LONG4: 4-byte signed length, then the same */
        {
            int64_t v;
            if (op == 'J') {
                NEED(4);
                v = (int32_t)(uint32_t)rd_le(arg, 4);
                argn = 4;
            } else if (op == 'K') {
                NEED(1);
                v = arg[0];
                argn = 1;
            } else if (op == 'M') {
                NEED(2);
                v = (int64_t)rd_le(arg, 2);
                argn = 2;
            } else {
                int hl = op == 0x8a ? 1 : 4;
                NEED(hl);
                int64_t n = op == 0x8a ? arg[0] : (int32_t)(uint32_t)rd_le(arg, 4);
                if (n < 0)
                    return fail(p, AS_TRACE_ECORRUPT, "LONG4 with negative length %lld",
                                (long long)n);
                if (n > 8)
                    return fail(p, AS_TRACE_EFORMAT,
                                "%s of %lld bytes: integers wider than 64 bits are not supported",
                                op_name(op), (long long)n);
                NEED(hl + n);
                uint64_t u = rd_le(arg + hl, (int)n);
                if (n > 0 && n < 8 && (arg[hl + n - 1] & 0x80))
                    u |= ~0ull << (8 * n);
                memcpy(&v, &u, sizeof v);
                argn = (size_t)(hl + n);
            }
            if ((rc = new_node(p, AS_PK_INT, &r)))
                return rc;
            pk->nodes[r].u.i = v;
            if ((rc = push(p, r)))
                return rc;
            break;
        }
        case 'G': { /* BINFLOAT: big-endian IEEE 754 double */
            NEED(8);
            uint64_t u = 0;
            for (int i = 0; i < 8; i++)
                u = u << 8 | arg[i];
            double d;
            memcpy(&d, &u, sizeof d);
            argn = 8;
            if ((rc = new_node(p, AS_PK_FLOAT, &r)))
                return rc;
            pk->nodes[r].u.f = d;
            if ((rc = push(p, r)))
                return rc;
            break;
        }
        case 0x8c: /* SHORT_BINUNICODE */
        case 'X':  /* BINUNICODE */
        case 0x8d: /* BINUNICODE8 */
        case 'C':  /* SHORT_BINBYTES */
        case 'B':  /* BINBYTES */
        case 0x8e: /* BINBYTES8 */
        {
            int hl = (op == 0x8c || op == 'C') ? 1 : (op == 'X' || op == 'B') ? 4 : 8;
            NEED(hl);
            uint64_t n = rd_le(arg, hl);
            if (n > left - (size_t)hl)
                return fail(p, AS_TRACE_ECORRUPT,
                            "truncated pickle: %s of %llu bytes, %zu left", op_name(op),
                            (unsigned long long)n, left - (size_t)hl);
            int is_str = op == 0x8c || op == 'X' || op == 0x8d;
            if ((rc = new_node(p, is_str ? AS_PK_STR : AS_PK_BYTES, &r)))
                return rc;
            pk->nodes[r].a = (uint32_t)n; /* n < len <= 2^32 - 2 */
            pk->nodes[r].u.data = at + 1 + (size_t)hl;
            argn = (size_t)hl + (size_t)n;
            if ((rc = push(p, r)))
                return rc;
            break;
        }
        case ']': /* EMPTY_LIST */
        case '}': /* EMPTY_DICT */
        case ')': /* EMPTY_TUPLE */
            if ((rc = new_node(p, op == ']' ? AS_PK_LIST : op == '}' ? AS_PK_DICT : AS_PK_TUPLE,
                               &r)))
                return rc;
            if ((rc = push(p, r)))
                return rc;
            break;
        case '(': /* MARK */
            if (p->nmarks >= p->lim.max_marks)
                return fail(p, AS_TRACE_ENOMEM, "MARKs nested deeper than %llu (limit)",
                            (unsigned long long)p->lim.max_marks);
            if (grow((void **)&p->marks, &p->capmarks, p->nmarks + 1, sizeof *p->marks))
                return fail(p, AS_TRACE_ENOMEM, "out of host memory for marks");
            p->marks[p->nmarks++] = p->nstack;
            break;
        case 'a': /* APPEND: list item -> list */
        case 's': /* SETITEM: dict key value -> dict */
        {
            size_t k = op == 'a' ? 1 : 2;
            if (avail(p) < k + 1)
                return underflow(p, op, k + 1);
            as_pk_ref c = p->stack[p->nstack - k - 1];
            uint8_t want = op == 'a' ? AS_PK_LIST : AS_PK_DICT;
            if (pk->nodes[c].type != want)
                return fail(p, AS_TRACE_EFORMAT, "%s onto a %s (only a %s is supported)",
                            op_name(op), as_pk_type_name(pk->nodes[c].type),
                            as_pk_type_name(want));
            if (op == 's' && (rc = check_keys(p, op, &p->stack[p->nstack - 2], 2)))
                return rc;
            if ((rc = add_items(p, c, &p->stack[p->nstack - k], k)))
                return rc;
            p->nstack -= k;
            break;
        }
        case 'e': /* APPENDS: list MARK items -> list */
        case 'u': /* SETITEMS: dict MARK k v ... -> dict */
        case 't': /* TUPLE: MARK items -> tuple */
        {
            if (!p->nmarks)
                return fail(p, AS_TRACE_ECORRUPT, "%s without a MARK", op_name(op));
            size_t m = p->marks[--p->nmarks];
            size_t n = p->nstack - m;
            if (op == 't') {
                if ((rc = new_node(p, AS_PK_TUPLE, &r)) ||
                    (rc = add_items(p, r, n ? &p->stack[m] : NULL, n))) /* stack may be NULL */
                    return rc;
                p->nstack = m;
                if ((rc = push(p, r)))
                    return rc;
                break;
            }
            if (avail(p) < n + 1) { /* the container must sit just below the mark */
                p->nmarks++;
                return fail(p, AS_TRACE_ECORRUPT, "%s with no %s below its MARK", op_name(op),
                            op == 'e' ? "list" : "dict");
            }
            as_pk_ref c = p->stack[m - 1];
            uint8_t want = op == 'e' ? AS_PK_LIST : AS_PK_DICT;
            if (pk->nodes[c].type != want)
                return fail(p, AS_TRACE_EFORMAT, "%s onto a %s (only a %s is supported)",
                            op_name(op), as_pk_type_name(pk->nodes[c].type),
                            as_pk_type_name(want));
            if (op == 'u' && (n % 2))
                return fail(p, AS_TRACE_ECORRUPT, "odd number of items (%zu) for SETITEMS", n);
            if (op == 'u' && (rc = check_keys(p, op, &p->stack[m], n)))
                return rc;
            if ((rc = add_items(p, c, &p->stack[m], n)))
                return rc;
            p->nstack = m;
            break;
        }
        case 0x85: /* TUPLE1 */
        case 0x86: /* TUPLE2 */
        case 0x87: /* TUPLE3 */
        {
            size_t n = (size_t)(op - 0x84);
            if (avail(p) < n)
                return underflow(p, op, n);
            if ((rc = new_node(p, AS_PK_TUPLE, &r)) ||
                (rc = add_items(p, r, &p->stack[p->nstack - n], n)))
                return rc;
            p->nstack -= n;
            if ((rc = push(p, r)))
                return rc;
            break;
        }
        case 0x94: /* MEMOIZE */
            if ((rc = memo_put(p, op, p->memo_len)))
                return rc;
            break;
        case 'q': /* BINPUT */
        case 'r': /* LONG_BINPUT */
        case 'h': /* BINGET */
        case 'j': /* LONG_BINGET */
        {
            int hl = (op == 'q' || op == 'h') ? 1 : 4;
            NEED(hl);
            uint64_t idx = rd_le(arg, hl);
            argn = (size_t)hl;
            rc = (op == 'q' || op == 'r') ? memo_put(p, op, idx) : memo_get(p, op, idx);
            if (rc)
                return rc;
            break;
        }
        case 0x80:
            return fail(p, AS_TRACE_ECORRUPT, "PROTO opcode after the start of the pickle");
        default: {
            const char *name = op_name(op);
            if (name)
                return fail(p, AS_TRACE_EFORMAT,
                            "opcode %s (0x%02x) refused: only plain data (numbers, strings, "
                            "lists, tuples, dicts) is read",
                            name, op);
            return fail(p, AS_TRACE_ECORRUPT, "invalid pickle opcode 0x%02x", op);
        }
        }
#undef NEED
        p->pos = at + 1 + argn;
    }
}

int as_pk_parse(const uint8_t *buf, size_t len, const as_pk_limits *lim, as_pk **out,
                as_pk_error *err)
{
    pk_parser p = {.err = err};
    int rc;
    *out = NULL;
    if (err)
        memset(err, 0, sizeof *err);
    set_limits(&p.lim, lim, len);
    if (len > p.lim.max_input)
        return fail(&p, AS_TRACE_ENOMEM, "pickle of %zu bytes exceeds the limit of %llu", len,
                    (unsigned long long)p.lim.max_input);
    p.pk = calloc(1, sizeof *p.pk);
    if (!p.pk)
        return fail(&p, AS_TRACE_ENOMEM, "out of host memory");
    p.pk->buf = buf;
    p.pk->len = len;
    p.pk->root = AS_PK_NIL;
    rc = run(&p);
    if (rc == 0) {
        order_chunks(p.pk);
        *out = p.pk;
    } else {
        as_pk_free(p.pk);
    }
    free(p.stack);
    free(p.marks);
    free(p.memo);
    return rc;
}

void as_pk_free(as_pk *pk)
{
    if (!pk)
        return;
    free(pk->nodes);
    free(pk->cells);
    free(pk);
}

/* ---- accessors ------------------------------------------------------------------------ */

static const pk_node *node_at(const as_pk *pk, as_pk_ref r)
{
    return (pk && r < pk->nnodes) ? &pk->nodes[r] : NULL;
}

as_pk_ref as_pk_root(const as_pk *pk) { return pk ? pk->root : AS_PK_NIL; }
int as_pk_protocol(const as_pk *pk) { return pk ? pk->protocol : 0; }
size_t as_pk_node_count(const as_pk *pk) { return pk ? pk->nnodes : 0; }

size_t as_pk_memory(const as_pk *pk)
{
    return pk ? sizeof *pk + pk->capnodes * sizeof *pk->nodes + pk->capcells * sizeof *pk->cells
              : 0;
}

as_pk_type as_pk_type_of(const as_pk *pk, as_pk_ref r)
{
    const pk_node *n = node_at(pk, r);
    return n ? (as_pk_type)n->type : AS_PK_NONE;
}

uint64_t as_pk_offset(const as_pk *pk, as_pk_ref r)
{
    const pk_node *n = node_at(pk, r);
    if (!n)
        return UINT64_MAX;
    switch (n->type) {
    case AS_PK_STR:
    case AS_PK_BYTES: return n->u.data;
    case AS_PK_LIST:
    case AS_PK_TUPLE:
    case AS_PK_DICT: return n->u.c.off;
    default: return n->a;
    }
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
    *s = (const char *)pk->buf + n->u.data;
    *len = n->a;
    return 0;
}

int as_pk_str_eq(const as_pk *pk, as_pk_ref r, const char *key)
{
    const pk_node *n = node_at(pk, r);
    if (!n || n->type != AS_PK_STR)
        return 0;
    size_t kl = strlen(key);
    return n->a == kl && memcmp(pk->buf + n->u.data, key, kl) == 0;
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

void as_pk_iter_init(as_pk_iter *it, const as_pk *pk, as_pk_ref c)
{
    const pk_node *n = node_at(pk, c);
    it->pk = pk;
    it->pos = 0;
    it->pairs = n && n->type == AS_PK_DICT;
    it->chunk = (n && (n->type == AS_PK_LIST || n->type == AS_PK_TUPLE || n->type == AS_PK_DICT))
                    ? n->u.c.head
                    : AS_PK_NIL;
}

/* Next cell of the container, crossing chunk boundaries. */
static int iter_cell(as_pk_iter *it, as_pk_ref *out)
{
    const uint32_t *cells = it->pk ? it->pk->cells : NULL;
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
    as_pk_ref k, v, found = AS_PK_NIL;
    if (as_pk_type_of(pk, dict) != AS_PK_DICT)
        return AS_PK_NIL;
    as_pk_iter_init(&it, pk, dict);
    while (as_pk_iter_next_pair(&it, &k, &v))
        if (as_pk_str_eq(pk, k, key))
            found = v;
    return found;
}
