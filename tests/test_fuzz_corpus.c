/*
 * test_fuzz_corpus.c - `make test` replays every committed fuzz corpus file (fuzz/corpus/
 * NAME/, seeds and the inputs of past crashes) through its harness, so a fixed crash stays
 * fixed: a broken oracle aborts the run. Also checks the mutators' promise that whatever
 * they write is a valid trace (the policy fuzzer's crash files must replay in allocsim)
 * and, for the pathological search, stays within its setting (sizes <= n units, live <= M).
 */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz.h"
#include "fuzz/fuzz_ops.h"
#include "trace.h"
#include "util.h"

static void replay_all_corpora(void)
{
    for (const as_fuzz_target *t = as_fuzz_targets; t->name; t++) {
        char rel[128];
        snprintf(rel, sizeof rel, "fuzz/corpus/%s", t->name);
        long n = as_fuzz_replay_path(tu_path(rel), t->fn);
        if (n < 3)
            fprintf(stderr, "\n  %s: %ld corpus files\n", t->name, n);
        CU_ASSERT(n >= 3); /* every harness has a committed seed corpus */
    }
}

/* Reads every event of a trace in memory; returns the count, or -1 when it is refused. */
static long count_events(const uint8_t *p, size_t n, as_meta *meta_out)
{
    as_trace_reader *r;
    if (as_trace_open_mem(p, n, "mutant", NULL, &r, NULL) < 0)
        return -1;
    if (meta_out)
        as_meta_copy(meta_out, as_trace_reader_meta(r));
    as_event e;
    long k = 0;
    int rc;
    while ((rc = as_trace_next(r, &e)) == 0)
        k++;
    as_trace_close(r);
    return rc == AS_TRACE_EOF ? k : -1;
}

/* Chains 300 mutations from a seed file; every step must parse, and stay in bounds. */
static void mutate_chain(const char *seed_rel, as_fuzz_mutator mut, int patho)
{
    uint8_t *seed;
    size_t n;
    CU_ASSERT_FATAL(as_fuzz_read_file(tu_path(seed_rel), &seed, &n) == 0);
    size_t cap = 1u << 16;
    uint8_t *buf = malloc(cap);
    CU_ASSERT_FATAL(buf != NULL);
    memcpy(buf, seed, n < cap ? n : cap);
    size_t len = n < cap ? n : cap;
    uint64_t s = tu_seed(seed_rel);
    int grew = 0;
    for (int i = 0; i < 300; i++) {
        size_t before = len;
        len = mut(buf, len, cap, (unsigned)tu_rand(&s));
        CU_ASSERT(len > 0 && len <= cap);
        as_meta meta = { 0 };
        long k = count_events(buf, len, &meta);
        CU_ASSERT(k >= 0);
        if (k < 0) {
            fprintf(stderr, "\n  mutant %d of %s does not parse\n", i, seed_rel);
            as_meta_free(&meta);
            break;
        }
        grew |= len != before;
        if (patho) {
            /* sizes in [1, n] units and live <= M, with the defaults 1 MiB, 16, 256 */
            CU_ASSERT_STRING_EQUAL(as_meta_get(&meta, "patho.M"), "256");
            fz_trace t;
            CU_ASSERT_FATAL(fz_parse(buf, len, &t) == 0);
            uint64_t live = 0, *sz = calloc(t.next_tag + 1, sizeof *sz);
            for (size_t j = 0; j < t.n; j++) {
                if (t.ops[j].op == AS_OP_ALLOC) {
                    CU_ASSERT(t.ops[j].size % (1u << 20) == 0 && t.ops[j].size <= 16u << 20);
                    sz[t.ops[j].tag] = t.ops[j].size;
                    live += t.ops[j].size;
                    CU_ASSERT(live <= 256u << 20);
                } else if (t.ops[j].op == AS_OP_FREE) {
                    live -= sz[t.ops[j].tag];
                } else {
                    CU_FAIL("patho mutant with an op other than ALLOC/FREE");
                }
            }
            free(sz);
            fz_free(&t);
        } else {
            CU_ASSERT_PTR_NOT_NULL(as_meta_get(&meta, "fuzz.policy"));
            CU_ASSERT_PTR_NOT_NULL(as_meta_get(&meta, "fuzz.capacity"));
        }
        as_meta_free(&meta);
    }
    CU_ASSERT(grew); /* the mutator does change its input */
    free(buf);
    free(seed);
}

static void policy_mutator_valid(void)
{
    unsetenv("AS_PATHO_POLICY");
    mutate_chain("fuzz/corpus/policy/seed09.txt", as_fuzz_policy_mutate, 0);
}

static void patho_mutator_valid(void)
{
    unsetenv("AS_PATHO_POLICY");
    unsetenv("AS_PATHO_M");
    unsetenv("AS_PATHO_N");
    unsetenv("AS_PATHO_UNIT");
    mutate_chain("fuzz/corpus/patho/random0.txt", as_fuzz_patho_mutate, 1);
}

/* The op list round-trips through text: ids renumber, frees follow their allocations. */
static void ops_text_round_trip(void)
{
    static const char src[] = "allocsim-text 1\nmeta a=b\\#c\nalloc 0 5\nalloc 1 7 s=0x3\n"
                              "free_req 0\nempty_cache\nfree 0\nfree 1\n";
    fz_trace t;
    CU_ASSERT_FATAL(fz_parse((const uint8_t *)src, sizeof src - 1, &t) == 0);
    CU_ASSERT_EQUAL(t.n, 6);
    /* Drop the first ALLOC: its FREE_REQ and FREE go with it, and alloc 1 becomes 0. */
    memmove(t.ops, t.ops + 1, (t.n - 1) * sizeof *t.ops);
    t.n--;
    fz_normalize(&t);
    CU_ASSERT_EQUAL(t.n, 3);
    uint8_t out[256];
    size_t n = fz_write_text(&t, out, sizeof out);
    CU_ASSERT_FATAL(n > 0);
    static const char want[] = "allocsim-text 1\nmeta a=b\\x23c\nalloc 0 7 s=0x3\nempty_cache\n"
                               "free 0\n";
    CU_ASSERT(n == sizeof want - 1 && memcmp(out, want, n) == 0);
    CU_ASSERT_EQUAL(fz_write_text(&t, out, 20), 0); /* does not fit: refused, not cut */
    fz_free(&t);
}

CU_TestInfo test_fuzz_corpus[] = {
    { "replay_all_corpora", replay_all_corpora },
    { "ops_text_round_trip", ops_text_round_trip },
    { "policy_mutator_valid", policy_mutator_valid },
    { "patho_mutator_valid", patho_mutator_valid },
    CU_TEST_INFO_NULL,
};
