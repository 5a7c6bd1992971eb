/*
 * test_pkmemo.c - the unpickler's paged memo (traces/pickle.c): a snapshot-shaped pickle
 * whose trace memoizes about 450,000 slots, past the pages kept dense, so the pages left
 * behind pack (those of at most 256 distinct values, in 1, 2, 4 or 8 bits a slot by how
 * many their page holds) or stay dense (more). Memo references, one slot in 61,
 * after the trace read back what the slots were given, through packed pages and dense ones,
 * a LONG_BINPUT into an old slot (a packed page unpacked) is what a later LONG_BINGET sees,
 * and the entry scanner and the VM alone agree on every value.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle.h"

typedef struct buf {
    uint8_t *b;
    size_t n, cap;
    uint32_t memo; /* the next MEMOIZE's index */
} buf;

static void put(buf *w, const void *p, size_t n)
{
    if (w->n + n > w->cap) {
        w->cap = (w->n + n) * 2;
        w->b = realloc(w->b, w->cap);
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void op(buf *w, uint8_t o)
{
    put(w, &o, 1);
}

static uint32_t memoize(buf *w)
{
    op(w, 0x94);
    return w->memo++;
}

static uint32_t str(buf *w, const char *s) /* SHORT_BINUNICODE, memoized: its slot */
{
    uint8_t h[2] = {0x8c, (uint8_t)strlen(s)};
    put(w, h, 2);
    put(w, s, strlen(s));
    return memoize(w);
}

static void idx_op(buf *w, uint8_t o, uint32_t m) /* LONG_BINGET, LONG_BINPUT */
{
    uint8_t q[5] = {o, (uint8_t)m, (uint8_t)(m >> 8), (uint8_t)(m >> 16), (uint8_t)(m >> 24)};
    put(w, q, 5);
}

static void intv(buf *w, uint32_t v)
{
    uint8_t q[5] = {'J', (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(w, q, 5);
}

enum { ENTRIES = 150000, BATCH = 1000, NREF = 2400 };

/* The entries whose note slot the settings refer to: one in 61, from 7 (whose slot is then
 * put into), through pages of every kind. */
static uint32_t ref_of(int i)
{
    return 7 + 61 * (uint32_t)i;
}

/* The string entry k's "note" holds. An entry's slots are its dict's, its "" key's and its
 * note's; in the first half its pages pack, a slot in as few bits as its page's values
 * need: a quarter of it notes "" (the key's string: 2 values a page, 1 bit), then 2
 * distinct notes (4 values, 2 bits), 10 (4 bits), 100 (8 bits); 1,000 in the second half
 * (too many: dense). */
static void note(uint32_t k, char *s, size_t n)
{
    static const uint32_t distinct[4] = {0, 2, 10, 100};
    uint32_t d = k < ENTRIES / 2 ? distinct[k / (ENTRIES / 8)] : 1000;
    if (d)
        snprintf(s, n, "v%u", k % d);
    else
        snprintf(s, n, "%s", "");
}

/* {"device_traces": [[entry...]], "allocator_settings": {"rK": the note of entry K, ...,
 * "over": "new" put into entry 7's note slot, "after": that slot again}}. */
static buf build(void)
{
    buf w = {0};
    static uint32_t slot[ENTRIES];
    uint32_t action = 0, keys[3] = {0, 0, 0};
    char s[32];
    put(&w, "\x80\x04", 2);
    op(&w, '}'), memoize(&w), op(&w, '(');
    str(&w, "device_traces");
    op(&w, ']'), memoize(&w), op(&w, '(');
    op(&w, ']'), memoize(&w);
    for (uint32_t k = 0; k < ENTRIES; k++) {
        if (k % BATCH == 0)
            op(&w, '(');
        op(&w, '}'), memoize(&w), op(&w, '(');
        if (k == 0) {
            keys[0] = str(&w, "action");
            action = str(&w, "alloc");
            keys[1] = str(&w, "addr");
            intv(&w, 4096 * (k + 1));
            keys[2] = str(&w, "size");
            intv(&w, 512);
        } else {
            idx_op(&w, 'j', keys[0]), idx_op(&w, 'j', action);
            idx_op(&w, 'j', keys[1]), intv(&w, 4096 * (k + 1));
            idx_op(&w, 'j', keys[2]), intv(&w, 512);
        }
        str(&w, "note" + (k ? 4 : 0)); /* "note" once, then "" keys: fresh each time */
        note(k, s, sizeof s);
        slot[k] = str(&w, s);
        op(&w, 'u');
        if (k % BATCH == BATCH - 1 || k == ENTRIES - 1)
            op(&w, 'e');
    }
    op(&w, 'e'); /* the list of devices */
    str(&w, "allocator_settings");
    op(&w, '}'), memoize(&w), op(&w, '(');
    for (int i = 0; i < NREF; i++) {
        snprintf(s, sizeof s, "r%u", ref_of(i));
        str(&w, s);
        idx_op(&w, 'j', slot[ref_of(i)]);
    }
    str(&w, "over");
    uint8_t h[5] = {0x8c, 3, 'n', 'e', 'w'};
    put(&w, h, 5);
    idx_op(&w, 'r', slot[7]); /* LONG_BINPUT into a packed page */
    str(&w, "after");
    idx_op(&w, 'j', slot[7]);
    op(&w, 'u'), op(&w, 'u'), op(&w, '.');
    return w;
}

/* The settings read back, with (vm_only 0) or without the entry scanner. */
static int read_settings(const buf *w, int vm_only, char got[NREF + 2][32], uint64_t *entries)
{
    as_pk_limits lim = {.vm_only = vm_only};
    as_pk_stream *ps = NULL;
    as_pk_error e = {0};
    as_pk_item it;
    const as_pk_entry *pe;
    size_t nent;
    int rc = as_pk_stream_open_mem(w->b, w->n, &lim, &ps, &e);
    *entries = 0;
    while (!rc && (rc = as_pk_stream_next_entries(ps, &it, &pe, &nent, &e)) == 1)
        rc = 0, *entries += nent;
    if (rc) {
        fprintf(stderr, "\n  pickle: %s at %llu\n", e.msg, (unsigned long long)e.offset);
        as_pk_stream_close(ps);
        return rc;
    }
    const as_pk *pk = as_pk_stream_tree(ps);
    as_pk_ref set = as_pk_dict_get(pk, as_pk_root(pk), "allocator_settings");
    for (int i = 0; i < NREF + 2; i++) {
        char key[16];
        if (i < NREF)
            snprintf(key, sizeof key, "r%u", ref_of(i));
        else
            snprintf(key, sizeof key, "%s", i == NREF ? "over" : "after");
        const char *s = "(not a string)";
        size_t n = strlen(s);
        as_pk_str(pk, as_pk_dict_get(pk, set, key), &s, &n);
        snprintf(got[i], 32, "%.*s", (int)n, s);
    }
    as_pk_stream_close(ps);
    return 0;
}

static void memo_pages(void)
{
    buf w = build();
    static char got[2][NREF + 2][32];
    char want[32];
    uint64_t entries[2];
    for (int vm = 0; vm < 2; vm++) {
        CU_ASSERT_EQUAL_FATAL(read_settings(&w, vm, got[vm], &entries[vm]), 0);
        CU_ASSERT_EQUAL(entries[vm], ENTRIES);
        for (int i = 0; i < NREF; i++) {
            note(ref_of(i), want, sizeof want);
            CU_ASSERT_STRING_EQUAL(got[vm][i], want);
        }
        CU_ASSERT_STRING_EQUAL(got[vm][NREF], "new");
        CU_ASSERT_STRING_EQUAL(got[vm][NREF + 1], "new");
    }
    CU_ASSERT(w.memo > 64 * 4096 + 2 * 4096); /* past the dense pages and the two newest */
    free(w.b);
}

CU_TestInfo test_pkmemo[] = {
    {"packed and dense pages read back, an old slot rewritten, scanner = VM", memo_pages},
    CU_TEST_INFO_NULL,
};
