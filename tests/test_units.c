/*
 * test_units.c - one unit rule everywhere: as_parse_size (sim/base/units.c: command line,
 * text format, generators) and the policy spec parser's SIZE knobs, which call it, read the
 * same text as the same number of bytes. Expected values are the definitions: K = 2^10,
 * KB = 10^3, and so on.
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdint.h>
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

static uint64_t xs(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* The table's formatting without printf is printf's, byte for byte: as_fmt_fixed against
 * snprintf("%.*f%s") on doubles of every kind (any bit pattern: negative, -0, NaN, huge,
 * subnormal; exact ties such as 0.25 and 1.05 in binary-exact cases, near ties; ratios as
 * the fragmentation column makes them), every precision 0..3, buffers cut short; and
 * as_fmt_bytes and as_fmt_capacity against their printf forms (every size below 2^20
 * and random ones above). */
static void units_fmt_is_printf(void)
{
    uint64_t x = 0x9e3779b97f4a7c15ull, bad = 0;
    char a[64], b[64];
    for (long i = 0; i < 400000; i++) {
        double v;
        uint64_t bits = xs(&x);
        unsigned prec = (unsigned)(xs(&x) % 4);
        switch (i % 5) {
        case 0:
            memcpy(&v, &bits, sizeof v);
            break;
        case 1: /* halves, quarters, ...: ties at one or two decimals, and their neighbours */
            v = (double)(bits % 4000000) / 8.0;
            v = i % 3 ? v : nextafter(v, i % 2 ? 0 : 1e300);
            break;
        case 2:
            v = ldexp((double)(bits >> 11), -(int)(xs(&x) % 90));
            break;
        case 3:
            v = 100 * (1 - (double)(bits % 100000) / (double)(xs(&x) % 100000 + 1));
            break;
        default:
            v = (double)(bits >> (xs(&x) % 64)) / (1 << 30);
        }
        size_t n = i % 13 ? sizeof a : (size_t)(xs(&x) % 9);
        memset(a, 'x', sizeof a);
        memset(b, 'x', sizeof b);
        as_fmt_fixed(a, n, v, prec, i % 2 ? " us" : "%");
        snprintf(b, n, "%.*f%s", (int)prec, v, i % 2 ? " us" : "%");
        bad += memcmp(a, b, sizeof a) != 0;
    }
    static const double edge[] = {0.0, -0.0, 0.05, 0.25, 0.125, 1.005, 99.95, 9007199254740991.0,
                                  9007199254740992.0, 1e300, 4.9e-324};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++)
        for (unsigned prec = 0; prec < 4; prec++) {
            as_fmt_fixed(a, sizeof a, edge[i], prec, "");
            snprintf(b, sizeof b, "%.*f", (int)prec, edge[i]);
            bad += strcmp(a, b) != 0;
        }
    for (uint64_t v = 0; v < (1u << 20) + 4096; v++) {
        uint64_t w = v < (1u << 20) ? v : xs(&x) >> (xs(&x) % 64);
        char c[32];
        as_fmt_bytes(a, sizeof a, w);
        if (w < 1024)
            snprintf(b, sizeof b, "%llu B", (unsigned long long)w);
        else if (w < (1u << 20))
            snprintf(b, sizeof b, "%.1f KiB", (double)w / 1024);
        else if (w < (1u << 30))
            snprintf(b, sizeof b, "%.1f MiB", (double)w / (1 << 20));
        else
            snprintf(b, sizeof b, "%.2f GiB", (double)w / (1 << 30));
        bad += strcmp(a, b) != 0;
        as_fmt_capacity(a, sizeof a, w << (v % 3 ? 0 : 20));
        uint64_t cap = w << (v % 3 ? 0 : 20);
        if (cap >= (1ull << 30) && cap % (1ull << 30) == 0)
            snprintf(b, sizeof b, "%llu GiB", (unsigned long long)(cap >> 30));
        else if (cap >= (1ull << 20) && cap % (1ull << 20) == 0)
            snprintf(b, sizeof b, "%llu MiB", (unsigned long long)(cap >> 20));
        else if (cap < (1ull << 20) && cap >= 1024 && cap % 1024 == 0)
            snprintf(b, sizeof b, "%llu KiB", (unsigned long long)(cap >> 10));
        else if (cap < 1024)
            snprintf(b, sizeof b, "%llu B", (unsigned long long)cap);
        else {
            as_fmt_bytes(c, sizeof c, cap);
            snprintf(b, sizeof b, "~%s", c);
        }
        bad += cap != AS_CAPACITY_NONE && strcmp(a, b) != 0;
    }
    CU_ASSERT_EQUAL(bad, 0);
}

CU_TestInfo test_units[] = {
    { "table", units_table },
    { "spec_agrees", units_spec_agrees },
    { "fmt_is_printf", units_fmt_is_printf },
    CU_TEST_INFO_NULL,
};
