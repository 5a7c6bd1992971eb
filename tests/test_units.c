/*
 * test_units.c - one unit rule everywhere: as_parse_size (sim/base/units.c: command line,
 * text format, generators) and the policy spec parser's SIZE knobs, which call it, read the
 * same text as the same number of bytes. Expected values are the definitions: K = 2^10,
 * KB = 10^3, and so on.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "policy.h"
#include "units.h"

static int ps(const char *s, uint64_t *v) { return as_parse_size(s, strlen(s), v); }

static void units_table(void)
{
    static const struct {
        const char *s;
        uint64_t v;
    } ok[] = {
        {"0", 0},
        {"512", 512},
        {"4K", 4096},
        {"4k", 4096},
        {"4KiB", 4096},
        {"4Ki", 4096},
        {"4KB", 4000},
        {"4kb", 4000},
        {"2M", 2u << 20},
        {"2MB", 2000000},
        {"80G", 80ull << 30},
        {"80GiB", 80ull << 30},
        {"80gib", 80ull << 30},
        {"80GB", 80000000000ull},
        {"1T", 1ull << 40},
        {"1TB", 1000000000000ull},
        {"141e9", 141000000000ull},
        {"1.5G", 3ull << 29},
        {"0.5K", 512},
        {"1.2e3", 1200},
        {"0.3K", 307}, /* 307.2 rounds down */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t v = 1;
        int rc = ps(ok[i].s, &v);
        if (rc != 0 || v != ok[i].v)
            fprintf(stderr, "\n  '%s' -> rc %d, %llu (want %llu)\n", ok[i].s, rc,
                    (unsigned long long)v, (unsigned long long)ok[i].v);
        CU_ASSERT_EQUAL(rc, 0);
        CU_ASSERT_EQUAL(v, ok[i].v);
    }
    static const char *const bad[] = {"", "K", "-1", "+1", " 1", "1 K", "1X", "1KX", "1KiBB",
                                      "1iB", "1e", "1.5.5", "18446744073709551616",
                                      "16777216T", "1e30"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v;
        CU_ASSERT_EQUAL(ps(bad[i], &v), -1);
    }
    /* Only n bytes are read: the rest of a text line is not looked at. */
    uint64_t v;
    CU_ASSERT_EQUAL(as_parse_size("2Mxyz", 2, &v), 0);
    CU_ASSERT_EQUAL(v, 2u << 20);
}

/* A SIZE knob reads its value with as_parse_size, edges included (letter case, decimal
 * units, fractions rounded down, e notation): bfc's `limit` takes any byte count. */
static uint64_t spec_limit(const char *text, int *ok)
{
    char spec[96], why[256];
    snprintf(spec, sizeof spec, "bfc,limit=%s", text);
    as_policy_spec s;
    *ok = as_policy_spec_parse(spec, &s, why, sizeof why) == 0;
    if (!*ok)
        return 0;
    uint64_t v = UINT64_MAX;
    for (size_t k = 0; k < s.policy->n_knobs; k++)
        if (strcmp(s.policy->knobs[k].name, "limit") == 0)
            v = (uint64_t)s.values[k].i;
    as_policy_spec_free(&s);
    return v;
}

static void units_spec_agrees(void)
{
    static const char *const texts[] = {"4K",   "4KiB",  "8k",    "64K",  "1M",    "2MiB",
                                        "512",  "4kb",   "80gib", "80GB", "1.5G",  "0.3K",
                                        "141e9", "1.2e3", "2mb",  "1T",   "7b"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        uint64_t want;
        int ok;
        CU_ASSERT_EQUAL(ps(texts[i], &want), 0);
        uint64_t got = spec_limit(texts[i], &ok);
        if (!ok || got != want)
            fprintf(stderr, "\n  limit=%s -> ok %d, %llu (as_parse_size %llu)\n", texts[i], ok,
                    (unsigned long long)got, (unsigned long long)want);
        CU_ASSERT(ok);
        CU_ASSERT_EQUAL(got, want);
    }
    /* and refuses what as_parse_size refuses */
    static const char *const bad[] = {"1X", "-1", "1KiBB", "1e30", "K", "1.5.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int ok;
        (void)spec_limit(bad[i], &ok);
        CU_ASSERT(!ok);
    }
}

CU_TestInfo test_units[] = {
    { "table", units_table },
    { "spec_agrees", units_spec_agrees },
    CU_TEST_INFO_NULL,
};
