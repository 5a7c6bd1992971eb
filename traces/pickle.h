/*
 * pickle.h - a safe reader for the plain-data subset of Python's pickle (protocols 2-5),
 * internal to traces/. It exists to read torch.cuda.memory._dump_snapshot() files.
 *
 * Accepted: PROTO, FRAME, STOP, the memo (MEMOIZE, BINPUT, LONG_BINPUT, BINGET,
 * LONG_BINGET), ints (BININT, BININT1, BININT2, LONG1/LONG4 up to 64 bits), BINFLOAT,
 * str (SHORT_BINUNICODE, BINUNICODE, BINUNICODE8), bytes (SHORT_BINBYTES, BINBYTES,
 * BINBYTES8), NONE, NEWTRUE, NEWFALSE, and lists, tuples and dicts (EMPTY_*, MARK,
 * APPEND(S), SETITEM(S), TUPLE, TUPLE1-3). Every other opcode (GLOBAL, REDUCE, BUILD,
 * the text forms, ...) and every malformed input is refused with an error code and the
 * byte offset of the offending opcode; nothing is ever executed or imported.
 *
 * Two ways in. as_pk_parse reads a whole pickle in memory into a tree (tests, fuzzers).
 * as_pk_stream reads from an as_instream as it decompresses and hands out, one at a time,
 * the items of the lists at root["device_traces"][d] (a snapshot's trace entries) instead
 * of storing them: after a batch of entries has been handed out, the values it created are
 * dropped (the arena is cut back to where the batch began), and the memo slots that named
 * them keep a compact copy, interned by content: strings, numbers, small plain containers
 * (a stack frame dict {filename, line, name}, a list of such: a snapshot's frames, which
 * Python's pickler shares between entries), or for any other container a "dropped" marker
 * of its type. Everything else (segments, settings) is kept as a tree.
 *
 * Invariant: memory is bounded by the tree kept, one batch of entries, the memo (4 bytes
 * a slot) and the distinct memoized strings, never by the trace's length; the parse is a
 * loop over opcodes with an explicit value stack (no recursion); limits on the input
 * length, the stack, the MARK nesting, the values held, the memo and the total memory
 * stop the rest with an error naming the byte offset and the limit.
 */
#ifndef AS_TRACES_PICKLE_H
#define AS_TRACES_PICKLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct as_pk as_pk;  /* a parsed pickle: its value tree (opaque) */
typedef uint32_t as_pk_ref;  /* a value in the tree */
#define AS_PK_NIL UINT32_MAX /* "no value" (a missing dict key, the end of an iteration) */

typedef enum as_pk_type {
    AS_PK_NONE = 0,
    AS_PK_BOOL,
    AS_PK_INT, /* signed 64-bit */
    AS_PK_FLOAT,
    AS_PK_STR, /* bytes as stored (UTF-8 from Python), not NUL-terminated */
    AS_PK_BYTES,
    AS_PK_LIST,
    AS_PK_TUPLE,
    AS_PK_DICT,
    AS_PK_BIGINT, /* an int beyond 64 bits (LONG1/LONG4 of more than 8 bytes): no value is
                     kept; as_pk_int refuses it, so a field holding one reads as absent
                     (PyTorch writes a C++ frame's unknown line as 2^64 - 1) */
} as_pk_type;

/* Safety limits. A zero field takes the default given in the comment. */
typedef struct as_pk_limits {
    uint64_t max_input;  /* bytes of (decompressed) pickle read (default 16 GiB) */
    uint64_t max_nodes;  /* values held at once (default 2^24, maximum 2^31 - 2) */
    uint64_t max_stack;  /* values on the unpickling stack at once (default 2^20) */
    uint64_t max_marks;  /* MARK nesting depth (default 4096) */
    uint64_t max_memo;   /* memo index bound (default 2^26; never above the bytes read) */
    uint64_t max_memory; /* host bytes of parser state: values, items, strings, memo,
                            stack (default 1 GiB) */
    int vm_only;         /* 1: the general opcode loop alone, without the entry scanner
                            for trace batches (the tests compare the two) */
} as_pk_limits;

#define AS_PK_DEFAULT_MAX_INPUT (16ull << 30)
#define AS_PK_DEFAULT_MAX_MEMORY (1ull << 30)

typedef struct as_pk_error {
    int code;        /* AS_ECORRUPT (malformed/truncated), AS_EFORMAT (refused
                        opcode or protocol), AS_ENOMEM (host memory or a limit) */
    uint64_t offset; /* byte offset of the opcode at fault in the pickle */
    char msg[192];
} as_pk_error;

/* Parses buf[0..len) (one pickle ending in STOP, nothing after it) into a tree (strings are
 * copied). Returns 0, or a negative AS_TRACE_E* code with *err filled (err may be NULL).
 * lim may be NULL for the defaults. Nothing is streamed. */
int as_pk_parse(const uint8_t *buf, size_t len, const as_pk_limits *lim, as_pk **out,
                as_pk_error *err);
void as_pk_free(as_pk *pk);

/* ---- streaming -------------------------------------------------------------------- */

struct as_instream;
typedef struct as_pk_stream as_pk_stream;

/* A trace entry handed out by as_pk_stream_next: root["device_traces"][device][index]. */
typedef struct as_pk_item {
    as_pk_ref ref; /* valid (with all it contains) until the next as_pk_stream_next */
    uint32_t device;
    uint64_t index;
} as_pk_item;

/* Starts reading a pickle from in (which must outlive the stream). */
int as_pk_stream_open(struct as_instream *in, const as_pk_limits *lim, as_pk_stream **out,
                      as_pk_error *err);
/* The same over a memory buffer buf[0..len) (tests, fuzzers), which must outlive the
 * stream; the stream owns the instream it reads through. */
int as_pk_stream_open_mem(const uint8_t *buf, size_t len, const as_pk_limits *lim,
                          as_pk_stream **out, as_pk_error *err);
/* Parses on to the next trace entry: 1 with *item, 0 at STOP (the pickle is complete and
 * nothing follows it), or < 0 with *err filled. */
int as_pk_stream_next(as_pk_stream *ps, as_pk_item *item, as_pk_error *err);
/* A value of a scanned trace entry: a string or container as a ref (interned, or kept in
 * the tree), a number inline. */
typedef struct as_pk_val {
    uint8_t type;  /* as_pk_type */
    as_pk_ref ref; /* STR, BYTES, LIST, TUPLE, DICT; else AS_PK_NIL */
    int64_t i;     /* INT, BOOL: the value; FLOAT: its IEEE 754 bits; NONE: 0 */
} as_pk_val;

/* A trace entry read without building its dict: the values of the keys the reader named
 * (as_pk_stream_keys), the last one set of each. */
typedef struct as_pk_entry {
    uint64_t off;       /* byte offset of the entry's EMPTY_DICT */
    size_t n;           /* pairs (keys repeated count again, and keys not named) */
    const as_pk_val *f; /* f[k]: the value of keys[k] (type AS_PK_NONE, ref AS_PK_NIL when
                           the entry has none); f[nkeys] is scratch. Valid until the next
                           as_pk_stream_next_entries */
} as_pk_entry;

#define AS_PK_MAX_KEYS 15
/* The keys of a trace entry the reader takes (strings, at most AS_PK_MAX_KEYS, which must
 * outlive the stream), before the first as_pk_stream_next_entries; 0, or AS_EINVAL. */
int as_pk_stream_keys(as_pk_stream *ps, const char *const *keys, size_t n);

/* as_pk_stream_next for a reader that takes entries either way, a batch at a time: when
 * item->ref is AS_PK_NIL, (*e)[0..*n) are the entries item->index, item->index + 1, ... of
 * device_traces[item->device] (their dicts were never built: a batch of entries in the
 * layout Python's pickler writes is read by a scanner beside the VM, with the same memo and
 * the same values), else item->ref is the tree value as as_pk_stream_next gives it (*n is 1,
 * *e NULL). Use one of the two on a stream, not both. Unless lim.vm_only. */
int as_pk_stream_next_entries(as_pk_stream *ps, as_pk_item *item, const as_pk_entry **e, size_t *n,
                              as_pk_error *err);

/* The tree: complete after as_pk_stream_next returned 0. A streamed list holds no items
 * (as_pk_len counts the items it handed out; as_pk_streamed says so). */
const as_pk *as_pk_stream_tree(const as_pk_stream *ps);
uint64_t as_pk_stream_offset(const as_pk_stream *ps); /* bytes consumed */
/* How many times values were dropped so far: a ref names the same value between two calls
 * that return the same count (callers caching by ref flush when it changes). */
uint64_t as_pk_stream_generation(const as_pk_stream *ps);
void as_pk_stream_close(as_pk_stream *ps);

/* 1 if r is a list whose items were streamed, 2 if r is a container dropped after its
 * batch was streamed (a memo reference to it: its items are gone), else 0. */
int as_pk_streamed(const as_pk *pk, as_pk_ref r);
/* 1 if r is an interned value (a memoized string or number that outlived its batch): it
 * names the same value until the tree is freed, so callers may cache by ref. */
int as_pk_interned(const as_pk *pk, as_pk_ref r);

as_pk_ref as_pk_root(const as_pk *pk);
int as_pk_protocol(const as_pk *pk);
size_t as_pk_node_count(const as_pk *pk);
size_t as_pk_memory(const as_pk *pk); /* host bytes held by the tree (not the input) */

/* AS_PK_NONE also for AS_PK_NIL or an out-of-range ref. */
as_pk_type as_pk_type_of(const as_pk *pk, as_pk_ref r);
const char *as_pk_type_name(as_pk_type t);
/* Byte offset where the value was created (opcode, or string data); UINT64_MAX if none. */
uint64_t as_pk_offset(const as_pk *pk, as_pk_ref r);

/* Typed getters: 0 on success, -1 if r is not of a fitting type (*v untouched).
 * as_pk_int accepts INT and BOOL; as_pk_float accepts FLOAT and INT; as_pk_str accepts STR
 * and BYTES. */
int as_pk_int(const as_pk *pk, as_pk_ref r, int64_t *v);
int as_pk_float(const as_pk *pk, as_pk_ref r, double *v);
int as_pk_str(const as_pk *pk, as_pk_ref r, const char **s, size_t *n);
/* 1 if r is a STR equal to the NUL-terminated key, else 0. */
int as_pk_str_eq(const as_pk *pk, as_pk_ref r, const char *key);

/* Items of a LIST or TUPLE, pairs of a DICT; 0 for anything else. */
size_t as_pk_len(const as_pk *pk, as_pk_ref r);

/* Iteration in insertion order. For a DICT, each step yields a key and its value (keys
 * repeated by SETITEMS are yielded again: the last one wins, as in Python). */
typedef struct as_pk_iter {
    const as_pk *pk;
    const uint32_t *cells; /* the container's cell pool (the tree's, or the interned one) */
    uint32_t chunk;        /* current chunk in the cell pool, or AS_PK_NIL */
    uint32_t pos;          /* next cell within it */
    int pairs;             /* 1 for a DICT */
} as_pk_iter;

void as_pk_iter_init(as_pk_iter *it, const as_pk *pk, as_pk_ref container);
/* Lists/tuples: 1 with *item, 0 at the end. Dicts: use as_pk_iter_next_pair. */
int as_pk_iter_next(as_pk_iter *it, as_pk_ref *item);
int as_pk_iter_next_pair(as_pk_iter *it, as_pk_ref *key, as_pk_ref *value);

/* The items of a LIST or TUPLE (the keys and values, alternating, of a DICT) when they
 * lie in one chunk, as one APPENDS/SETITEMS batch leaves them: their count, with *items
 * pointing at them (valid while the tree is unchanged). SIZE_MAX when they do not (then
 * iterate), 0 for an empty container or another type. */
size_t as_pk_items(const as_pk *pk, as_pk_ref c, const as_pk_ref **items);

/* The value of a STR key in a DICT (the last one set), or AS_PK_NIL. O(len): one walk of
 * the pairs, a key of another length rejected without a compare of its bytes. */
as_pk_ref as_pk_dict_get(const as_pk *pk, as_pk_ref dict, const char *key);

/* Several keys of many dicts of one kind (a snapshot's segments, its blocks), each dict
 * read in one walk by as_pk_dict_take. Python's pickler writes a key string once and
 * refers back to it (the memo), and writes the dicts of one kind with their keys in the
 * same order, so the walk remembers, for each position of a pair, the key string it found
 * there (a ref) and which name that is: a dict laid out as the ones before is read with
 * one compare of refs a pair; any other pair is matched by its string (length first) and
 * remembered. Refs are only compared while the tree does not change: use a set on a
 * complete tree (after as_pk_parse, or once as_pk_stream_next returned 0), and init it
 * again for another tree. */
#define AS_PK_TAKE_POS 16 /* pair positions remembered */
typedef struct as_pk_keys {
    const as_pk *pk;
    const char *const *names;
    uint8_t n;
    uint8_t len[AS_PK_MAX_KEYS];
    as_pk_ref pos_ref[AS_PK_TAKE_POS]; /* the key string last seen at that pair, or NIL */
    uint8_t pos_key[AS_PK_TAKE_POS];   /* its index among names, n for none of them */
} as_pk_keys;

/* names[0..n) (n <= AS_PK_MAX_KEYS; they must outlive the set): 0, or AS_EINVAL. */
int as_pk_keys_init(as_pk_keys *k, const as_pk *pk, const char *const *names, size_t n);
/* vals[i]: the value of names[i] in dict (the last one set), AS_PK_NIL when it has none
 * (every one when dict is not a DICT). Returns the pairs visited (as_pk_len). */
size_t as_pk_dict_take(as_pk_keys *k, as_pk_ref dict, as_pk_ref *vals);

#endif
