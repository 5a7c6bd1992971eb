/*
 * test_pickle.c - the plain-data pickle reader (traces/pickle.c): every accepted opcode
 * against byte strings written by CPython 3.12's pickle (the disassembly from
 * `pickletools.dis(pickle.dumps(obj, proto))` is in the comment above each), every refused
 * opcode, truncation at every byte, hostile inputs (memo, depth and length bombs, random
 * corruption), and one real snapshot against golden values read with Python's pickle.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle.h"
#include "trace.h"
#include "util.h"

/* A literal as (bytes, length) without its NUL. */
#define LIT(s) (const uint8_t *)(s), (sizeof(s) - 1)

static as_pk *parse_ok(const uint8_t *b, size_t n)
{
    as_pk *pk = NULL;
    as_pk_error e;
    int rc = as_pk_parse(b, n, NULL, &pk, &e);
    if (rc)
        fprintf(stderr, "\nunexpected pickle error %d at %llu: %s\n", rc,
                (unsigned long long)e.offset, e.msg);
    CU_ASSERT_EQUAL(rc, 0);
    return pk;
}

static int parse_err(const uint8_t *b, size_t n, const as_pk_limits *lim, as_pk_error *e)
{
    as_pk *pk = (as_pk *)1;
    int rc = as_pk_parse(b, n, lim, &pk, e);
    CU_ASSERT_PTR_NULL(pk);
    CU_ASSERT(rc < 0);
    CU_ASSERT_EQUAL(e->code, rc);
    as_pk_free(pk);
    return rc;
}

/* The i-th item of a list or tuple (AS_PK_NIL past the end). */
static as_pk_ref item(const as_pk *pk, as_pk_ref c, size_t i)
{
    as_pk_iter it;
    as_pk_ref r;
    as_pk_iter_init(&it, pk, c);
    while (as_pk_iter_next(&it, &r))
        if (i-- == 0)
            return r;
    return AS_PK_NIL;
}

static int64_t int_at(const as_pk *pk, as_pk_ref c, size_t i)
{
    int64_t v = -424242;
    CU_ASSERT_EQUAL(as_pk_int(pk, item(pk, c, i), &v), 0);
    return v;
}

static void pickle_ints(void)
{
    /* pickle.dumps([0, 255, 256, 65535, 65536, -1, -2**31, 2**31, 2**40, -2**40, 2**63-1,
     *               -2**63], 2):
     *  0 PROTO 2, 2 EMPTY_LIST, 3 BINPUT 0, 5 MARK, 6 BININT1 0, 8 BININT1 255,
     * 10 BININT2 256, 13 BININT2 65535, 16 BININT 65536, 21 BININT -1, 26 BININT -2**31,
     * 31 LONG1 2**31, 38 LONG1 2**40, 46 LONG1 -2**40, 54 LONG1 2**63-1, 64 LONG1 -2**63,
     * 74 APPENDS, 75 STOP */
    static const char b[] =
        "\x80\x02\x5d\x71\x00\x28\x4b\x00\x4b\xff\x4d\x00\x01\x4d\xff\xff\x4a\x00\x00\x01\x00"
        "\x4a\xff\xff\xff\xff\x4a\x00\x00\x00\x80\x8a\x05\x00\x00\x00\x80\x00\x8a\x06\x00\x00"
        "\x00\x00\x00\x01\x8a\x06\x00\x00\x00\x00\x00\xff\x8a\x08\xff\xff\xff\xff\xff\xff\xff"
        "\x7f\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x65\x2e";
    as_pk *pk = parse_ok(LIT(b));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    as_pk_ref root = as_pk_root(pk);
    CU_ASSERT_EQUAL(as_pk_protocol(pk), 2);
    CU_ASSERT_EQUAL(as_pk_type_of(pk, root), AS_PK_LIST);
    CU_ASSERT_EQUAL(as_pk_len(pk, root), 12);
    const int64_t want[] = {0,           255,          256,           65535,
                            65536,       -1,           INT32_MIN,     2147483648ll,
                            1ll << 40,   -(1ll << 40), INT64_MAX,     INT64_MIN};
    for (size_t i = 0; i < 12; i++)
        CU_ASSERT_EQUAL(int_at(pk, root, i), want[i]);
    CU_ASSERT_EQUAL(as_pk_offset(pk, item(pk, root, 2)), 10); /* the BININT2 opcode */
    CU_ASSERT_EQUAL(as_pk_offset(pk, root), 2);
    as_pk_free(pk);

    /* Hand-made (CPython only writes LONG4 past 255 bytes): LONG4 length 2, 0xff 0x7f =
     * 32767; LONG1 of length 0 = 0; LONG4 length 1, 0x80 = -128; as a TUPLE3. */
    static const char l4[] = "\x80\x02\x8b\x02\x00\x00\x00\xff\x7f\x8a\x00"
                             "\x8b\x01\x00\x00\x00\x80\x87\x2e";
    pk = parse_ok(LIT(l4));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    CU_ASSERT_EQUAL(as_pk_type_of(pk, as_pk_root(pk)), AS_PK_TUPLE);
    CU_ASSERT_EQUAL(int_at(pk, as_pk_root(pk), 0), 32767);
    CU_ASSERT_EQUAL(int_at(pk, as_pk_root(pk), 1), 0);
    CU_ASSERT_EQUAL(int_at(pk, as_pk_root(pk), 2), -128);
    as_pk_free(pk);
}

static void pickle_wide_ints(void)
{
    as_pk_error e;
    /* pickle.dumps(2**64, 2): 0 PROTO 2, 2 LONG1 (9 bytes), 13 STOP. Kept as a value of its
     * own type with no value: as_pk_int refuses it (PyTorch writes a C++ frame's unknown line
     * as 2^64 - 1, which a snapshot recorded with stacks="all" holds) */
    static const char b[] = "\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01\x2e";
    as_pk *pk = parse_ok(LIT(b));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    CU_ASSERT_EQUAL(as_pk_type_of(pk, as_pk_root(pk)), AS_PK_BIGINT);
    int64_t v = 7;
    CU_ASSERT_NOT_EQUAL(as_pk_int(pk, as_pk_root(pk), &v), 0);
    as_pk_free(pk);
    /* its bytes must be there */
    static const char t[] = "\x80\x02\x8a\x09\x00\x00\x00\x2e";
    CU_ASSERT_EQUAL(parse_err(LIT(t), NULL, &e), AS_ECORRUPT);
    CU_ASSERT_EQUAL(e.offset, 2);
    /* Hand-made LONG4 with a negative length. */
    static const char n[] = "\x80\x02\x8b\xff\xff\xff\xff\x2e";
    CU_ASSERT_EQUAL(parse_err(LIT(n), NULL, &e), AS_ECORRUPT);
    CU_ASSERT_EQUAL(e.offset, 2);
}

static void pickle_floats_and_consts(void)
{
    /* pickle.dumps([1.5, -0.25], 2): 2 EMPTY_LIST, 3 BINPUT 0, 5 MARK, 6 BINFLOAT 1.5,
     * 15 BINFLOAT -0.25, 24 APPENDS, 25 STOP */
    static const char f[] = "\x80\x02\x5d\x71\x00\x28\x47\x3f\xf8\x00\x00\x00\x00\x00\x00"
                            "\x47\xbf\xd0\x00\x00\x00\x00\x00\x00\x65\x2e";
    as_pk *pk = parse_ok(LIT(f));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    double d = 0;
    CU_ASSERT_EQUAL(as_pk_float(pk, item(pk, as_pk_root(pk), 0), &d), 0);
    CU_ASSERT_EQUAL(d, 1.5);
    CU_ASSERT_EQUAL(as_pk_float(pk, item(pk, as_pk_root(pk), 1), &d), 0);
    CU_ASSERT_EQUAL(d, -0.25);
    int64_t v;
    CU_ASSERT_EQUAL(as_pk_int(pk, item(pk, as_pk_root(pk), 0), &v), -1); /* not an int */
    as_pk_free(pk);

    /* pickle.dumps([None, True, False], 2): 5 MARK, 6 NONE, 7 NEWTRUE, 8 NEWFALSE, 9 APPENDS */
    static const char c[] = "\x80\x02\x5d\x71\x00\x28\x4e\x88\x89\x65\x2e";
    pk = parse_ok(LIT(c));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    as_pk_ref r = as_pk_root(pk);
    CU_ASSERT_EQUAL(as_pk_type_of(pk, item(pk, r, 0)), AS_PK_NONE);
    CU_ASSERT_EQUAL(as_pk_type_of(pk, item(pk, r, 1)), AS_PK_BOOL);
    CU_ASSERT_EQUAL(int_at(pk, r, 1), 1);
    CU_ASSERT_EQUAL(int_at(pk, r, 2), 0);
    as_pk_free(pk);
}

static void check_str(const as_pk *pk, as_pk_ref r, const char *want, as_pk_type t)
{
    const char *s = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(as_pk_type_of(pk, r), t);
    CU_ASSERT_EQUAL_FATAL(as_pk_str(pk, r, &s, &n), 0);
    CU_ASSERT_EQUAL(n, strlen(want));
    CU_ASSERT(n == strlen(want) && memcmp(s, want, n) == 0);
}

static void pickle_strings(void)
{
    /* pickle.dumps(['ab', '\u00e9'], 4): 2 FRAME 15, 11 EMPTY_LIST, 12 MEMOIZE, 13 MARK,
     * 14 SHORT_BINUNICODE 'ab', 18 MEMOIZE, 19 SHORT_BINUNICODE 'é', 23 MEMOIZE, 24 APPENDS */
    static const char s4[] = "\x80\x04\x95\x0f\x00\x00\x00\x00\x00\x00\x00\x5d\x94\x28\x8c\x02"
                             "\x61\x62\x94\x8c\x02\xc3\xa9\x94\x65\x2e";
    as_pk *pk = parse_ok(LIT(s4));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    check_str(pk, item(pk, as_pk_root(pk), 0), "ab", AS_PK_STR);
    check_str(pk, item(pk, as_pk_root(pk), 1), "\xc3\xa9", AS_PK_STR);
    CU_ASSERT(as_pk_str_eq(pk, item(pk, as_pk_root(pk), 0), "ab"));
    CU_ASSERT(!as_pk_str_eq(pk, item(pk, as_pk_root(pk), 0), "a"));
    as_pk_free(pk);

    /* pickle.dumps(['ab'], 2): 2 EMPTY_LIST, 3 BINPUT 0, 5 BINUNICODE 'ab', 12 BINPUT 1,
     * 14 APPEND, 15 STOP */
    static const char s2[] = "\x80\x02\x5d\x71\x00\x58\x02\x00\x00\x00\x61\x62\x71\x01\x61\x2e";
    pk = parse_ok(LIT(s2));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    check_str(pk, item(pk, as_pk_root(pk), 0), "ab", AS_PK_STR);
    as_pk_free(pk);

    /* Hand-made: BINUNICODE8 'abc' (CPython only writes it past 4 GiB). */
    static const char s8[] = "\x80\x04\x8d\x03\x00\x00\x00\x00\x00\x00\x00\x61\x62\x63\x2e";
    pk = parse_ok(LIT(s8));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    check_str(pk, as_pk_root(pk), "abc", AS_PK_STR);
    as_pk_free(pk);

    /* pickle.dumps([b'ab'], 3): 5 SHORT_BINBYTES b'ab', 9 BINPUT 1, 11 APPEND. Then
     * hand-made BINBYTES b'xyz' and BINBYTES8 b'q' in a TUPLE2. */
    static const char by[] = "\x80\x03\x5d\x71\x00\x43\x02\x61\x62\x71\x01\x61\x2e";
    pk = parse_ok(LIT(by));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    check_str(pk, item(pk, as_pk_root(pk), 0), "ab", AS_PK_BYTES);
    CU_ASSERT(!as_pk_str_eq(pk, item(pk, as_pk_root(pk), 0), "ab")); /* bytes are not str */
    as_pk_free(pk);
    static const char b8[] = "\x80\x04\x42\x03\x00\x00\x00\x78\x79\x7a"
                             "\x8e\x01\x00\x00\x00\x00\x00\x00\x00\x71\x86\x2e";
    pk = parse_ok(LIT(b8));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    check_str(pk, item(pk, as_pk_root(pk), 0), "xyz", AS_PK_BYTES);
    check_str(pk, item(pk, as_pk_root(pk), 1), "q", AS_PK_BYTES);
    as_pk_free(pk);
}

static void pickle_tuples(void)
{
    /* pickle.dumps([(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)], 2): 6 EMPTY_TUPLE,
     * 9 TUPLE1, 16 TUPLE2, 25 TUPLE3, 28 MARK ... 37 TUPLE, each followed by a BINPUT */
    static const char b[] =
        "\x80\x02\x5d\x71\x00\x28\x29\x4b\x01\x85\x71\x01\x4b\x01\x4b\x02\x86\x71\x02\x4b\x01"
        "\x4b\x02\x4b\x03\x87\x71\x03\x28\x4b\x01\x4b\x02\x4b\x03\x4b\x04\x74\x71\x04\x65\x2e";
    as_pk *pk = parse_ok(LIT(b));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    as_pk_ref root = as_pk_root(pk);
    CU_ASSERT_EQUAL(as_pk_len(pk, root), 5);
    for (size_t i = 0; i < 5; i++) {
        as_pk_ref t = item(pk, root, i);
        CU_ASSERT_EQUAL(as_pk_type_of(pk, t), AS_PK_TUPLE);
        CU_ASSERT_EQUAL(as_pk_len(pk, t), i);
        for (size_t j = 0; j < i; j++)
            CU_ASSERT_EQUAL(int_at(pk, t, j), (int64_t)j + 1);
    }
    as_pk_free(pk);
}

static void pickle_dicts(void)
{
    /* pickle.dumps({'a': 1, 'b': 2.5, 'c': None, 'a2': 'x'}, 5): 2 FRAME 38, 11 EMPTY_DICT,
     * 12 MEMOIZE, 13 MARK, 'a' 1 'b' 2.5 'c' None 'a2' 'x' (SHORT_BINUNICODE keys, each
     * MEMOIZEd), 47 SETITEMS, 48 STOP */
    static const char b[] =
        "\x80\x05\x95\x26\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94\x4b\x01\x8c"
        "\x01\x62\x94\x47\x40\x04\x00\x00\x00\x00\x00\x00\x8c\x01\x63\x94\x4e\x8c\x02\x61\x32"
        "\x94\x8c\x01\x78\x94\x75\x2e";
    as_pk *pk = parse_ok(LIT(b));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    as_pk_ref d = as_pk_root(pk);
    CU_ASSERT_EQUAL(as_pk_protocol(pk), 5);
    CU_ASSERT_EQUAL(as_pk_type_of(pk, d), AS_PK_DICT);
    CU_ASSERT_EQUAL(as_pk_len(pk, d), 4);
    int64_t v = 0;
    double f = 0;
    CU_ASSERT_EQUAL(as_pk_int(pk, as_pk_dict_get(pk, d, "a"), &v), 0);
    CU_ASSERT_EQUAL(v, 1);
    CU_ASSERT_EQUAL(as_pk_float(pk, as_pk_dict_get(pk, d, "b"), &f), 0);
    CU_ASSERT_EQUAL(f, 2.5);
    CU_ASSERT_EQUAL(as_pk_type_of(pk, as_pk_dict_get(pk, d, "c")), AS_PK_NONE);
    CU_ASSERT_NOT_EQUAL(as_pk_dict_get(pk, d, "c"), AS_PK_NIL);
    check_str(pk, as_pk_dict_get(pk, d, "a2"), "x", AS_PK_STR);
    CU_ASSERT_EQUAL(as_pk_dict_get(pk, d, "zz"), AS_PK_NIL);
    CU_ASSERT_EQUAL(as_pk_dict_get(pk, item(pk, d, 0), "a"), AS_PK_NIL); /* not a dict */
    /* Pairs come back in insertion order. */
    as_pk_iter it;
    as_pk_ref k, val;
    const char *keys[] = {"a", "b", "c", "a2"};
    size_t i = 0;
    as_pk_iter_init(&it, pk, d);
    while (as_pk_iter_next_pair(&it, &k, &val))
        CU_ASSERT(i < 4 && as_pk_str_eq(pk, k, keys[i++]));
    CU_ASSERT_EQUAL(i, 4);
    as_pk_free(pk);

    /* pickle.dumps({'a': 1}, 2): 2 EMPTY_DICT, 3 BINPUT 0, 5 BINUNICODE 'a', 11 BINPUT 1,
     * 13 BININT1 1, 15 SETITEM. Then hand-made: a second SETITEM 'a' -> 2 after it
     * (BINGET 1 for the key): Python keeps the last value. */
    static const char s[] = "\x80\x02\x7d\x71\x00\x58\x01\x00\x00\x00\x61\x71\x01\x4b\x01\x73"
                            "\x68\x01\x4b\x02\x73\x2e";
    pk = parse_ok(LIT(s));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    CU_ASSERT_EQUAL(as_pk_int(pk, as_pk_dict_get(pk, as_pk_root(pk), "a"), &v), 0);
    CU_ASSERT_EQUAL(v, 2);
    as_pk_free(pk);
}

/* The values of names[0..n) in dict d by as_pk_dict_take, each checked against
 * as_pk_dict_get; the ints in want (-1: absent). */
static void take_check(as_pk_keys *k, const as_pk *pk, as_pk_ref d, const int64_t *want)
{
    as_pk_ref v[AS_PK_MAX_KEYS];
    CU_ASSERT_EQUAL(as_pk_dict_take(k, d, v), as_pk_len(pk, d));
    for (size_t i = 0; i < k->n; i++) {
        int64_t x = -1;
        CU_ASSERT_EQUAL(v[i], as_pk_dict_get(pk, d, k->names[i]));
        if (v[i] != AS_PK_NIL)
            CU_ASSERT_EQUAL(as_pk_int(pk, v[i], &x), 0);
        CU_ASSERT_EQUAL(x, want[i]);
    }
}

static void pickle_dict_take(void)
{
    /* pickle.dumps([{'a': 1, 'bb': 2, 'c': 3}, {'a': 4, 'bb': 5, 'c': 6},
     *               {'c': 7, 'a': 8, 'x': 9}, {'bb': 10}, {1: 11, 'a': 12}, 5], 2):
     * the first dict's keys are BINUNICODE + BINPUT 2, 3, 4, the later dicts refer back
     * to them (BINGET), the third in another order (its first pair is 'c' where the two
     * before had 'a'), the fifth with an int key first. */
    static const char b[] =
        "\x80\x02\x5d\x71\x00\x28\x7d\x71\x01\x28\x58\x01\x00\x00\x00\x61\x71\x02\x4b\x01\x58"
        "\x02\x00\x00\x00\x62\x62\x71\x03\x4b\x02\x58\x01\x00\x00\x00\x63\x71\x04\x4b\x03\x75"
        "\x7d\x71\x05\x28\x68\x02\x4b\x04\x68\x03\x4b\x05\x68\x04\x4b\x06\x75\x7d\x71\x06\x28"
        "\x68\x04\x4b\x07\x68\x02\x4b\x08\x58\x01\x00\x00\x00\x78\x71\x07\x4b\x09\x75\x7d\x71"
        "\x08\x68\x03\x4b\x0a\x73\x7d\x71\x09\x28\x4b\x01\x4b\x0b\x68\x02\x4b\x0c\x75\x4b\x05"
        "\x65\x2e";
    static const char *const names[] = {"c", "a", "zz", "bb"};
    static const int64_t want[5][4] = {
        {3, 1, -1, 2}, {6, 4, -1, 5}, {7, 8, -1, -1}, {-1, -1, -1, 10}, {-1, 12, -1, -1}};
    as_pk *pk = parse_ok(LIT(b));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    as_pk_keys k;
    as_pk_ref v[4];
    CU_ASSERT_EQUAL(as_pk_keys_init(&k, pk, names, 4), 0);
    for (size_t i = 0; i < 5; i++)
        take_check(&k, pk, item(pk, as_pk_root(pk), i), want[i]);
    /* the first dict again, after the others moved the remembered positions */
    take_check(&k, pk, item(pk, as_pk_root(pk), 0), want[0]);
    /* not a dict: no pairs, every value absent */
    CU_ASSERT_EQUAL(as_pk_dict_take(&k, item(pk, as_pk_root(pk), 5), v), 0);
    for (size_t i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(v[i], AS_PK_NIL);
    CU_ASSERT_EQUAL(as_pk_keys_init(&k, pk, names, AS_PK_MAX_KEYS + 1), AS_EINVAL);
    as_pk_free(pk);

    /* Hand-made from pickle.dumps([{'a': 1, 'bb': 2}, {'a': 5, 'bb': 6}], 2): the second
     * dict's first key is a fresh 'a' (BINUNICODE, no memo: another ref with the same
     * bytes, where the first dict had the memoized one), and 'a' is set again by BINGET 2
     * after 'bb': Python reads {'a': 7, 'bb': 6}. */
    static const char h[] =
        "\x80\x02\x5d\x71\x00\x28\x7d\x71\x01\x28\x58\x01\x00\x00\x00\x61\x71\x02\x4b\x01\x58"
        "\x02\x00\x00\x00\x62\x62\x71\x03\x4b\x02\x75\x7d\x71\x04\x28\x58\x01\x00\x00\x00\x61"
        "\x4b\x05\x68\x03\x4b\x06\x68\x02\x4b\x07\x75\x65\x2e";
    static const int64_t want2[2][4] = {{-1, 1, -1, 2}, {-1, 7, -1, 6}};
    pk = parse_ok(LIT(h));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    CU_ASSERT_EQUAL(as_pk_keys_init(&k, pk, names, 4), 0);
    for (size_t i = 0; i < 2; i++)
        take_check(&k, pk, item(pk, as_pk_root(pk), i), want2[i]);
    as_pk_free(pk);
}

static void pickle_memo(void)
{
    /* x = [7]; pickle.dumps([x, x], 2): 2 EMPTY_LIST, 3 BINPUT 0, 5 MARK, 6 EMPTY_LIST,
     * 7 BINPUT 1, 9 BININT1 7, 11 APPEND, 12 BINGET 1, 14 APPENDS, 15 STOP */
    static const char m2[] = "\x80\x02\x5d\x71\x00\x28\x5d\x71\x01\x4b\x07\x61\x68\x01\x65\x2e";
    as_pk *pk = parse_ok(LIT(m2));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    as_pk_ref r = as_pk_root(pk);
    CU_ASSERT_EQUAL(item(pk, r, 0), item(pk, r, 1)); /* one shared object, as in Python */
    CU_ASSERT_EQUAL(int_at(pk, item(pk, r, 1), 0), 7);
    as_pk_free(pk);

    /* pickle.dumps({'k': [x, x]}, 4): 11 EMPTY_DICT, 12 MEMOIZE (0), 13 'k', 16 MEMOIZE (1),
     * 17 EMPTY_LIST, 18 MEMOIZE (2), 19 MARK, 20 EMPTY_LIST, 21 MEMOIZE (3), 22 BININT1 7,
     * 24 APPEND, 25 BINGET 3, 27 APPENDS, 28 SETITEM */
    static const char m4[] = "\x80\x04\x95\x13\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x8c\x01\x6b"
                             "\x94\x5d\x94\x28\x5d\x94\x4b\x07\x61\x68\x03\x65\x73\x2e";
    pk = parse_ok(LIT(m4));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    as_pk_ref l = as_pk_dict_get(pk, as_pk_root(pk), "k");
    CU_ASSERT_EQUAL(as_pk_len(pk, l), 2);
    CU_ASSERT_EQUAL(item(pk, l, 0), item(pk, l, 1));
    as_pk_free(pk);

    /* Hand-made: LONG_BINPUT 5 / LONG_BINGET 5 (CPython uses them from index 256 on):
     * EMPTY_LIST, LONG_BINPUT 5, MARK, LONG_BINGET 5, BININT1 9, APPENDS -> l = [l, 9]: a
     * list that contains itself, which Python builds the same way. */
    static const char lb[] = "\x80\x02\x5d\x72\x05\x00\x00\x00\x28\x6a\x05\x00\x00\x00\x4b\x09"
                             "\x65\x2e";
    pk = parse_ok(LIT(lb));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    r = as_pk_root(pk);
    CU_ASSERT_EQUAL(as_pk_len(pk, r), 2);
    CU_ASSERT_EQUAL(item(pk, r, 0), r);
    CU_ASSERT_EQUAL(int_at(pk, r, 1), 9);
    as_pk_free(pk);
}

/* A list of n ints written the way CPython batches it (MARK + APPENDS per 1000 items), with
 * lists nested in some items so that chunks of different containers interleave. */
static uint8_t *build_batched(size_t n, size_t *len)
{
    uint8_t *b = malloc(16 + n * 8), *p = b;
    *p++ = 0x80, *p++ = 2, *p++ = ']';
    for (size_t i = 0; i < n; i++) {
        if (i % 1000 == 0)
            *p++ = '(';
        if (i % 7 == 3) { /* [i % 256] */
            *p++ = ']', *p++ = 'K', *p++ = (uint8_t)i, *p++ = 'a';
        } else {
            *p++ = 'M', *p++ = (uint8_t)i, *p++ = (uint8_t)(i >> 8);
        }
        if (i % 1000 == 999 || i == n - 1)
            *p++ = 'e';
    }
    *p++ = '.';
    *len = (size_t)(p - b);
    return b;
}

static void pickle_memo_first_page(void)
{
    /* pickle.dumps({'a': 1}, 2) and the hand-made second SETITEM of pickle_dicts: two memo
     * slots. Parser memory is charged against max_memory as pools grow; the memo's first
     * page starts at 512 slots (2 KiB), so this parses within 8 KiB, where a first page of
     * 4096 slots (16 KiB) refused it. */
    static const char s[] = "\x80\x02\x7d\x71\x00\x58\x01\x00\x00\x00\x61\x71\x01\x4b\x01\x73"
                            "\x68\x01\x4b\x02\x73\x2e";
    as_pk_limits lim = {.max_memory = 8u << 10};
    as_pk *pk = NULL;
    as_pk_error e;
    int64_t v = 0;
    CU_ASSERT_EQUAL(as_pk_parse(LIT(s), &lim, &pk, &e), 0);
    CU_ASSERT_EQUAL(as_pk_int(pk, as_pk_dict_get(pk, as_pk_root(pk), "a"), &v), 0);
    CU_ASSERT_EQUAL(v, 2);
    as_pk_free(pk);

    /* The first page grows as slots past it are put: LONG_BINPUT 3000 (slot 0 and 511 on
     * the way) and the three read back by LONG_BINGET, [7, 8, 9, 9, 8, 7]. */
    static const char g[] = "\x80\x02\x5d\x28"
                            "\x4b\x07\x72\x00\x00\x00\x00"  /* 7, put 0 */
                            "\x4b\x08\x72\xff\x01\x00\x00"  /* 8, put 511 */
                            "\x4b\x09\x72\xb8\x0b\x00\x00"  /* 9, put 3000 */
                            "\x6a\xb8\x0b\x00\x00\x6a\xff\x01\x00\x00\x6a\x00\x00\x00\x00"
                            "\x65\x2e";
    CU_ASSERT_EQUAL(as_pk_parse(LIT(g), NULL, &pk, &e), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    static const int64_t want[6] = {7, 8, 9, 9, 8, 7};
    CU_ASSERT_EQUAL(as_pk_len(pk, as_pk_root(pk)), 6);
    for (size_t i = 0; i < 6; i++)
        CU_ASSERT_EQUAL(int_at(pk, as_pk_root(pk), i), want[i]);
    as_pk_free(pk);
}

static void pickle_batches_keep_order(void)
{
    size_t len;
    uint8_t *b = build_batched(2500, &len);
    as_pk *pk = parse_ok(b, len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    as_pk_ref root = as_pk_root(pk);
    CU_ASSERT_EQUAL(as_pk_len(pk, root), 2500);
    as_pk_iter it;
    as_pk_ref r;
    size_t i = 0, bad = 0;
    as_pk_iter_init(&it, pk, root);
    while (as_pk_iter_next(&it, &r)) {
        int64_t v = -1;
        if (i % 7 == 3)
            as_pk_int(pk, item(pk, r, 0), &v), bad += v != (int64_t)(i % 256);
        else
            as_pk_int(pk, r, &v), bad += v != (int64_t)(i & 0xffff);
        i++;
    }
    CU_ASSERT_EQUAL(i, 2500);
    CU_ASSERT_EQUAL(bad, 0);
    as_pk_free(pk);
    free(b);

    /* 300 single APPENDs (protocol-0 style) onto one list: one growing chunk, in order. */
    uint8_t s[3 + 300 * 3 + 1], *p = s;
    *p++ = 0x80, *p++ = 2, *p++ = ']';
    for (int k = 0; k < 300; k++)
        *p++ = 'K', *p++ = (uint8_t)k, *p++ = 'a';
    *p++ = '.';
    pk = parse_ok(s, (size_t)(p - s));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    CU_ASSERT_EQUAL(as_pk_len(pk, as_pk_root(pk)), 300);
    CU_ASSERT_EQUAL(int_at(pk, as_pk_root(pk), 299), 299 & 0xff);
    CU_ASSERT_EQUAL(int_at(pk, as_pk_root(pk), 256), 0);
    as_pk_free(pk);
}

/* Opcodes the reader accepts; every other byte value must be refused. */
static int accepted(int op)
{
    static const char ok[] = "N\x88\x89JKM\x8a\x8bG\x8cX\x8d" "CB\x8e]})(aestu\x85\x86\x87"
                             "\x94qrhj\x95.\x80";
    return op != 0 && memchr(ok, op, sizeof ok - 1) != NULL;
}

static void pickle_refused_opcodes(void)
{
    /* Every byte value as the first opcode after PROTO 2, followed by 16 bytes of padding:
     * the object-building and text opcodes must be refused at offset 2 with their name,
     * unknown bytes as invalid. */
    static const char *named[] = {
        "GLOBAL", "REDUCE", "BUILD", "STACK_GLOBAL", "PERSID", "BINPERSID", "EXT1", "EXT2",
        "EXT4", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "INT", "LONG", "FLOAT", "STRING",
        "BINSTRING", "SHORT_BINSTRING", "UNICODE", "PUT", "GET", "DICT", "LIST", "POP",
        "POP_MARK", "DUP", "EMPTY_SET", "ADDITEMS", "FROZENSET", "BYTEARRAY8", "NEXT_BUFFER",
        "READONLY_BUFFER"};
    size_t seen[sizeof named / sizeof named[0]] = {0};
    int refused = 0;
    for (int op = 0; op < 256; op++) {
        if (accepted(op))
            continue;
        uint8_t b[20] = {0x80, 2, (uint8_t)op, 'a', 'b', '\n', 'c', '\n'};
        b[19] = '.';
        as_pk_error e;
        int rc = parse_err(b, sizeof b, NULL, &e);
        CU_ASSERT_EQUAL(e.offset, 2);
        CU_ASSERT(rc == AS_EFORMAT || rc == AS_ECORRUPT);
        for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
            char want[40];
            snprintf(want, sizeof want, "opcode %s ", named[i]);
            if (strstr(e.msg, want)) {
                seen[i]++;
                CU_ASSERT_EQUAL(rc, AS_EFORMAT);
            }
        }
        refused++;
    }
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        CU_ASSERT_EQUAL(seen[i], 1);
    /* 256 byte values minus the 35 accepted opcodes (PROTO included: it is tested at the
     * start only). */
    CU_ASSERT_EQUAL(refused, 256 - 35);

    /* The classic exploit, pickle.dumps(E(), 2) with E.__reduce__ returning
     * (os.system, ('echo pwned',)): 2 GLOBAL 'posix system', 16 BINPUT 0, 18 BINUNICODE,
     * 33 BINPUT 1, 35 TUPLE1, 36 BINPUT 2, 38 REDUCE, ... */
    static const char evil[] = "\x80\x02\x63\x70\x6f\x73\x69\x78\x0a\x73\x79\x73\x74\x65\x6d\x0a"
                               "\x71\x00\x58\x0a\x00\x00\x00\x65\x63\x68\x6f\x20\x70\x77\x6e\x65"
                               "\x64\x71\x01\x85\x71\x02\x52\x71\x03\x2e";
    as_pk_error e;
    CU_ASSERT_EQUAL(parse_err(LIT(evil), NULL, &e), AS_EFORMAT);
    CU_ASSERT_EQUAL(e.offset, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "GLOBAL"));
}

static void pickle_bad_structure(void)
{
    as_pk_error e;
    struct {
        const char *b;
        size_t n;
        int code;
        uint64_t off;
        const char *what;
    } cases[] = {
#define C(s, code, off, what) {s, sizeof(s) - 1, code, off, what}
        C("", AS_EFORMAT, 0, "PROTO"),
        C("\x80\x01\x4e\x2e", AS_EFORMAT, 0, "protocol 1"),
        C("\x80\x06\x4e\x2e", AS_EFORMAT, 0, "protocol 6"),
        C("(lp0\n.", AS_EFORMAT, 0, "PROTO"),                  /* protocol 0 */
        C("\x80\x02\x4e\x4e\x2e", AS_ECORRUPT, 4, "2 values"), /* STOP, 2 items */
        C("\x80\x02\x2e", AS_ECORRUPT, 2, "0 values"),         /* STOP, empty */
        C("\x80\x02\x28\x4e\x2e", AS_ECORRUPT, 4, "MARK"),     /* open MARK */
        C("\x80\x02\x4e\x2e\x4e", AS_ECORRUPT, 3, "trailing"),
        C("\x80\x02\x4e\x80\x02\x2e", AS_ECORRUPT, 3, "PROTO"),
        C("\x80\x02\x4e", AS_ECORRUPT, 3, "STOP"),
        C("\x80\x02\x4b\x01\x61\x2e", AS_ECORRUPT, 4, "APPEND"), /* no list */
        C("\x80\x02\x5d\x28\x4b\x01\x61\x2e", AS_ECORRUPT, 6, "above the mark"),
        C("\x80\x02\x7d\x4b\x01\x61\x2e", AS_EFORMAT, 5, "dict"), /* APPEND to dict */
        C("\x80\x02\x5d\x28\x4b\x01\x4b\x02\x75\x2e", AS_EFORMAT, 8, "list"),
        C("\x80\x02\x7d\x28\x4b\x01\x75\x2e", AS_ECORRUPT, 6, "odd"),
        C("\x80\x02\x7d\x5d\x4b\x01\x73\x2e", AS_ECORRUPT, 6, "unhashable"),
        C("\x80\x02\x4b\x01\x65\x2e", AS_ECORRUPT, 4, "without a MARK"),
        C("\x80\x02\x28\x4b\x01\x65\x2e", AS_ECORRUPT, 5, "no list"),
        C("\x80\x02\x68\x00\x2e", AS_ECORRUPT, 2, "never set"),   /* BINGET unset */
        C("\x80\x02\x71\x00\x2e", AS_ECORRUPT, 2, "needs 1"),     /* BINPUT, empty */
        C("\x80\x02\x28\x94\x4e\x2e", AS_ECORRUPT, 3, "MEMOIZE"), /* above fence */
        C("\x80\x02\x4b\x01\x86\x2e", AS_ECORRUPT, 4, "TUPLE2"),
        C("\x80\x04\x95\xff\x00\x00\x00\x00\x00\x00\x00\x4e\x2e", AS_ECORRUPT, 2, "FRAME"),
        C("\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x80\x2e", AS_ECORRUPT, 2, "BINUNICODE8"),
        C("\x80\x02\x58\xff\xff\xff\xff\x61\x2e", AS_ECORRUPT, 2, "BINUNICODE"),
#undef C
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = parse_err((const uint8_t *)cases[i].b, cases[i].n, NULL, &e);
        if (rc != cases[i].code || e.offset != cases[i].off || !strstr(e.msg, cases[i].what))
            fprintf(stderr, "\ncase %zu: rc %d offset %llu: %s\n", i, rc,
                    (unsigned long long)e.offset, e.msg);
        CU_ASSERT_EQUAL(rc, cases[i].code);
        CU_ASSERT_EQUAL(e.offset, cases[i].off);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, cases[i].what));
    }
}

static void truncate_all(const uint8_t *b, size_t len)
{
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees any overread */
        memcpy(copy, b, n);
        as_pk_error e;
        parse_err(copy, n, NULL, &e);
        CU_ASSERT(e.offset <= n);
        free(copy);
    }
}

static void pickle_truncated_everywhere(void)
{
    /* Every proper prefix of these must be an error (never a crash, never success),
     * located inside the prefix.
     * pickle.dumps({'a': 1, 'b': 2.5, 'c': None, 'k': [x, x], 't': (-1, 2**40, b'ab', True),
     *               256: 'z'}, 4) with x = [7]:
     *  2 FRAME 77, 11 EMPTY_DICT, 12 MEMOIZE, 13 MARK, 'a' 1 'b' BINFLOAT 2.5 'c' NONE 'k'
     * 42 EMPTY_LIST, 44 MARK, 45 EMPTY_LIST, 47 BININT1 7, 49 APPEND, 50 BINGET 6,
     * 52 APPENDS, 't', 57 MARK, 58 BININT -1, 63 LONG1 2**40, 71 SHORT_BINBYTES b'ab',
     * 76 NEWTRUE, 77 TUPLE, 79 BININT2 256, 82 'z', 86 SETITEMS, 87 STOP */
    static const char b4[] =
        "\x80\x04\x95\x4d\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94\x4b\x01\x8c"
        "\x01\x62\x94\x47\x40\x04\x00\x00\x00\x00\x00\x00\x8c\x01\x63\x94\x4e\x8c\x01\x6b\x94"
        "\x5d\x94\x28\x5d\x94\x4b\x07\x61\x68\x06\x65\x8c\x01\x74\x94\x28\x4a\xff\xff\xff\xff"
        "\x8a\x06\x00\x00\x00\x00\x00\x01\x43\x02\x61\x62\x94\x88\x74\x94\x4d\x00\x01\x8c\x01"
        "\x7a\x94\x75\x2e";
    /* pickle.dumps({'u': (1, 'vv'), 'w': {'e': [False]}}, 2): 2 EMPTY_DICT, 3 BINPUT 0,
     * 5 MARK, 6 BINUNICODE 'u', 14 BININT1 1, 16 BINUNICODE 'vv', 25 TUPLE2, 28 'w',
     * 36 EMPTY_DICT, 39 'e', 47 EMPTY_LIST, 50 NEWFALSE, 51 APPEND, 52 SETITEM,
     * 53 SETITEMS, 54 STOP (each value BINPUT after it) */
    static const char b2[] =
        "\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x75\x71\x01\x4b\x01\x58\x02\x00\x00\x00"
        "\x76\x76\x71\x02\x86\x71\x03\x58\x01\x00\x00\x00\x77\x71\x04\x7d\x71\x05\x58\x01\x00"
        "\x00\x00\x65\x71\x06\x5d\x71\x07\x89\x61\x73\x75\x2e";
    as_pk *pk = parse_ok(LIT(b4));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    CU_ASSERT_EQUAL(as_pk_len(pk, as_pk_root(pk)), 6);
    as_pk_ref t = as_pk_dict_get(pk, as_pk_root(pk), "t");
    CU_ASSERT_EQUAL(as_pk_len(pk, t), 4);
    CU_ASSERT_EQUAL(int_at(pk, t, 1), 1ll << 40);
    as_pk_free(pk);
    pk = parse_ok(LIT(b2));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    as_pk_ref w = as_pk_dict_get(pk, as_pk_root(pk), "w");
    CU_ASSERT_EQUAL(int_at(pk, as_pk_dict_get(pk, w, "e"), 0), 0);
    check_str(pk, item(pk, as_pk_dict_get(pk, as_pk_root(pk), "u"), 1), "vv", AS_PK_STR);
    as_pk_free(pk);
    truncate_all(LIT(b4));
    truncate_all(LIT(b2));
}

static void pickle_bombs(void)
{
    as_pk_error e;
    as_pk *pk = NULL;
    /* MARK nesting: 100,000 MARKs stop at the default limit of 4096. */
    size_t n = 100000;
    uint8_t *b = malloc(n + 3);
    b[0] = 0x80, b[1] = 2;
    memset(b + 2, '(', n);
    b[n + 2] = '.';
    CU_ASSERT_EQUAL(parse_err(b, n + 3, NULL, &e), AS_ENOMEM);
    CU_ASSERT_EQUAL(e.offset, 2 + 4096);
    free(b);

    /* Depth without MARKs: 100,000 nested lists ("]" x n, then "a" x n-1) parse without
     * recursion; with max_stack 1000 they hit the limit instead. */
    b = malloc(2 * n + 2);
    b[0] = 0x80, b[1] = 2;
    memset(b + 2, ']', n);
    memset(b + 2 + n, 'a', n - 1);
    b[2 * n + 1] = '.';
    pk = parse_ok(b, 2 * n + 2);
    CU_ASSERT_EQUAL(as_pk_node_count(pk), n);
    as_pk_free(pk);
    as_pk_limits lim = {.max_stack = 1000};
    CU_ASSERT_EQUAL(parse_err(b, 2 * n + 2, &lim, &e), AS_ENOMEM);
    CU_ASSERT_EQUAL(e.offset, 2 + 1000);
    free(b);

    /* Memo bomb: LONG_BINPUT 0xfffffff0 must not allocate 16 GiB. */
    static const char mb[] = "\x80\x02\x4e\x72\xf0\xff\xff\xff\x2e";
    CU_ASSERT_EQUAL(parse_err(LIT(mb), NULL, &e), AS_ENOMEM);
    CU_ASSERT_EQUAL(e.offset, 3);

    /* Node limit. */
    static const char nl[] = "\x80\x02\x5d\x28\x4b\x01\x4b\x02\x4b\x03\x65\x2e";
    lim = (as_pk_limits){.max_nodes = 3};
    CU_ASSERT_EQUAL(parse_err(LIT(nl), &lim, &e), AS_ENOMEM);
    CU_ASSERT_EQUAL(e.offset, 8);
    lim = (as_pk_limits){.max_input = 5};
    CU_ASSERT_EQUAL(parse_err(LIT(nl), &lim, &e), AS_ENOMEM);

    /* "Billion laughs": level k is a 2-tuple of level k-1 twice (through the memo), 40
     * levels: 2^40 leaves logically, but a tree of 41 nodes in linear memory. */
    uint8_t lb[8 + 40 * 6], *p = lb;
    *p++ = 0x80, *p++ = 2, *p++ = 'N', *p++ = 'q', *p++ = 0;
    for (int k = 1; k <= 40; k++)
        *p++ = 'h', *p++ = (uint8_t)(k - 1), *p++ = 0x86, *p++ = 'q', *p++ = (uint8_t)k;
    *p++ = '.';
    /* Level k-1 is on the stack; BINGET pushes it again and TUPLE2 pairs the two. */
    pk = parse_ok(lb, (size_t)(p - lb));
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    CU_ASSERT_EQUAL(as_pk_node_count(pk), 41);
    as_pk_ref r = as_pk_root(pk);
    for (int k = 0; k < 40; k++) {
        CU_ASSERT_EQUAL_FATAL(as_pk_type_of(pk, r), AS_PK_TUPLE);
        CU_ASSERT_EQUAL(item(pk, r, 0), item(pk, r, 1));
        r = item(pk, r, 0);
    }
    CU_ASSERT_EQUAL(as_pk_type_of(pk, r), AS_PK_NONE);
    as_pk_free(pk);
}

static void pickle_random_corruption(void)
{
    /* Flip random bytes of a valid pickle: any result is fine except a crash or an
     * out-of-bounds read (ASan), and every failure must carry an offset inside the input. */
    static const char b[] =
        "\x80\x04\x95\x13\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x8c\x01\x6b\x94\x5d\x94\x28\x5d"
        "\x94\x4b\x07\x61\x68\x03\x65\x73\x2e";
    uint64_t st = tu_seed("pickle_random_corruption");
    size_t n = sizeof b - 1, failures = 0;
    for (int round = 0; round < 20000; round++) {
        uint8_t *c = malloc(n);
        memcpy(c, b, n);
        int flips = 1 + (int)(tu_rand(&st) % 3);
        for (int f = 0; f < flips; f++)
            c[tu_rand(&st) % n] = (uint8_t)tu_rand(&st);
        as_pk *pk = NULL;
        as_pk_error e;
        int rc = as_pk_parse(c, n, NULL, &pk, &e);
        if (rc) {
            failures++;
            CU_ASSERT(e.offset <= n);
            CU_ASSERT(pk == NULL);
        } else {
            CU_ASSERT(as_pk_root(pk) != AS_PK_NIL);
            as_pk_free(pk);
        }
        free(c);
    }
    CU_ASSERT(failures > 0);
}


static void pickle_real_snapshot(void)
{
    /* Golden values from Python:
     *   d = pickle.load(open('resnet_varbatch.pickle', 'rb'))  # after zstd -d
     *   len(d['device_traces'][0]) == 34500; len(d['segments']) == 126
     *   t[1] == {'action': 'alloc', 'addr': 139988618444800, 'size': 37632, 'stream': 0,
     *            'time_us': 1795936507807473, ...}, len(t[1]['frames']) == 6,
     *   t[1]['frames'][0]['line'] == 1370
     *   d['segments'][0]['total_size'] == 471859200, ['segment_pool_id'] == (0, 0)
     *   sum(e['size'] for e in t if e['action'] == 'alloc') == 294083959850
     *   d['allocator_settings']['max_split_size'] == -1 */
    size_t len = 0;
    const char *path = tu_path("tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst");
    uint8_t *buf = (uint8_t *)tu_slurp_zst(path, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    CU_ASSERT_EQUAL(len, 2964102);
    as_pk *pk = parse_ok(buf, len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pk);
    CU_ASSERT_EQUAL(as_pk_protocol(pk), 4);
    as_pk_ref root = as_pk_root(pk);
    as_pk_ref traces = as_pk_dict_get(pk, root, "device_traces");
    CU_ASSERT_EQUAL(as_pk_len(pk, traces), 1);
    as_pk_ref t = item(pk, traces, 0);
    CU_ASSERT_EQUAL(as_pk_len(pk, t), 34500);
    CU_ASSERT_EQUAL(as_pk_len(pk, as_pk_dict_get(pk, root, "segments")), 126);
    as_pk_ref e1 = item(pk, t, 1);
    int64_t v = 0;
    CU_ASSERT(as_pk_str_eq(pk, as_pk_dict_get(pk, e1, "action"), "alloc"));
    CU_ASSERT_EQUAL(as_pk_int(pk, as_pk_dict_get(pk, e1, "addr"), &v), 0);
    CU_ASSERT_EQUAL(v, 139988618444800ll);
    CU_ASSERT_EQUAL(as_pk_int(pk, as_pk_dict_get(pk, e1, "size"), &v), 0);
    CU_ASSERT_EQUAL(v, 37632);
    CU_ASSERT_EQUAL(as_pk_int(pk, as_pk_dict_get(pk, e1, "time_us"), &v), 0);
    CU_ASSERT_EQUAL(v, 1795936507807473ll);
    as_pk_ref frames = as_pk_dict_get(pk, e1, "frames");
    CU_ASSERT_EQUAL(as_pk_len(pk, frames), 6);
    CU_ASSERT_EQUAL(as_pk_int(pk, as_pk_dict_get(pk, item(pk, frames, 0), "line"), &v), 0);
    CU_ASSERT_EQUAL(v, 1370);
    as_pk_ref seg0 = item(pk, as_pk_dict_get(pk, root, "segments"), 0);
    CU_ASSERT_EQUAL(as_pk_int(pk, as_pk_dict_get(pk, seg0, "total_size"), &v), 0);
    CU_ASSERT_EQUAL(v, 471859200);
    CU_ASSERT_EQUAL(as_pk_type_of(pk, as_pk_dict_get(pk, seg0, "segment_pool_id")), AS_PK_TUPLE);
    as_pk_ref st = as_pk_dict_get(pk, root, "allocator_settings");
    CU_ASSERT_EQUAL(as_pk_int(pk, as_pk_dict_get(pk, st, "max_split_size"), &v), 0);
    CU_ASSERT_EQUAL(v, -1);
    int64_t sum = 0, allocs = 0;
    as_pk_iter it;
    as_pk_ref e;
    as_pk_iter_init(&it, pk, t);
    while (as_pk_iter_next(&it, &e)) {
        if (as_pk_str_eq(pk, as_pk_dict_get(pk, e, "action"), "alloc")) {
            allocs++;
            if (as_pk_int(pk, as_pk_dict_get(pk, e, "size"), &v) == 0)
                sum += v;
        }
    }
    CU_ASSERT_EQUAL(allocs, 11460);
    CU_ASSERT_EQUAL(sum, 294083959850ll);
    as_pk_free(pk);
    free(buf);
}

CU_TestInfo test_pickle[] = {
    {"ints", pickle_ints},
    {"wide_ints_kept_without_value", pickle_wide_ints},
    {"floats_and_consts", pickle_floats_and_consts},
    {"strings", pickle_strings},
    {"tuples", pickle_tuples},
    {"dicts", pickle_dicts},
    {"dict_take", pickle_dict_take},
    {"memo", pickle_memo},
    {"memo_first_page", pickle_memo_first_page},
    {"batches_keep_order", pickle_batches_keep_order},
    {"refused_opcodes", pickle_refused_opcodes},
    {"bad_structure", pickle_bad_structure},
    {"truncated_everywhere", pickle_truncated_everywhere},
    {"bombs", pickle_bombs},
    {"random_corruption", pickle_random_corruption},
    {"real_snapshot", pickle_real_snapshot},
    CU_TEST_INFO_NULL,
};
