/*
 * test_ranges.c - every knob's range as `allocsim policies` prints it is the range the
 * spec parser accepts: each printed bound is accepted when shown closed ('[', ']') and
 * refused when shown open (')'), the value just outside a closed bound is refused, the one
 * just inside an open bound accepted, and the noted rules (power of 2, multiple of N) hold.
 * An accepted bound must also run: the policy's own init takes it. A bound printed as a
 * knob's name is that knob's default. The printed text is checked against the binary's
 * `allocsim policies -f tsv` as well.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_fixture.h"
#include "policy.h"
#include "util.h"

/* 1 when "POLICY,KNOB=VALUE" parses and (run != 0) a small trace runs under it. */
static int accepted(const as_policy *p, const as_knob *k, const char *value, int run)
{
    char text[256], why[512];
    snprintf(text, sizeof text, "%s,%s=%s", p->name, k->name, value);
    as_policy_spec s;
    if (as_policy_spec_parse(text, &s, why, sizeof why))
        return 0;
    int ok = 1;
    if (run) {
        const as_event evs[] = {tf_alloc(0, TF_MIB), tf_alloc(1, 3 * TF_MIB), tf_free(0),
                                tf_free(1)};
        as_engine_opts o = {.threads = 1};
        uint64_t cap = 1ull << 30;
        as_engine *e = NULL;
        int rc = tf_run(evs, 4, &o, &s, &cap, 1, &e);
        if (rc) {
            fprintf(stderr, "\n  %s parses but does not run: %d %s\n", text, rc,
                    e ? as_engine_errmsg(e) : "");
            ok = 0;
        }
        as_engine_destroy(e);
    }
    as_policy_spec_free(&s);
    return ok;
}

static void expect(const as_policy *p, const as_knob *k, const char *value, int want,
                   const char *range)
{
    int got = accepted(p, k, value, want);
    if (got != want) {
        fprintf(stderr, "\n  %s,%s=%s: %s, but the printed range is %s\n", p->name, k->name, value,
                got ? "accepted" : "refused", range);
        CU_FAIL("printed range disagrees with the parser");
    }
}

/* A bound: a number, or another knob's name (its default). Integers are kept exact. */
static int bound(const as_policy *p, const char *s, size_t n, double *out, int64_t *iout)
{
    char b[64];
    if (n == 0 || n >= sizeof b)
        return -1;
    memcpy(b, s, n);
    b[n] = 0;
    for (size_t i = 0; i < p->n_knobs; i++)
        if (strcmp(p->knobs[i].name, b) == 0) {
            *iout = p->knobs[i].def;
            *out = (double)*iout;
            return 0;
        }
    char *end;
    errno = 0;
    *out = strtod(b, &end);
    if (*end || errno)
        return -1;
    *iout = strtoll(b, &end, 10);
    return 0;
}

/* x + d as decimal text, exact past INT64_MAX and below INT64_MIN. */
static void fmt_int(char *b, size_t n, int64_t x, int d)
{
    if (d > 0 && x == INT64_MAX)
        snprintf(b, n, "9223372036854775808");
    else if (d < 0 && x == INT64_MIN)
        snprintf(b, n, "-9223372036854775809");
    else
        snprintf(b, n, "%" PRId64, x + d);
}

static void check_words(const as_policy *p, const as_knob *k, const char *range)
{
    char w[64];
    for (const char *s = range; *s;) {
        size_t n = strcspn(s, "|");
        snprintf(w, sizeof w, "%.*s", (int)n, s);
        expect(p, k, w, 1, range);
        s += n + (s[n] == '|');
    }
    expect(p, k, "no_such_word", 0, range);
}

/* lo/hi closed or open, integer or real. */
static void check_interval(const as_policy *p, const as_knob *k, const char *range)
{
    const char *r = range;
    int zero_too = strncmp(r, "0 or ", 5) == 0;
    if (zero_too)
        r += 5;
    CU_ASSERT_FATAL(*r == '[' || *r == '(');
    int lo_open = *r == '(';
    const char *comma = strchr(r, ','), *close = strpbrk(r, "])");
    CU_ASSERT_FATAL(comma && close && comma < close);
    int hi_open = *close == ')';
    double lo, hi;
    int64_t ilo, ihi;
    CU_ASSERT_FATAL(bound(p, r + 1, (size_t)(comma - r - 1), &lo, &ilo) == 0);
    CU_ASSERT_FATAL(bound(p, comma + 2, (size_t)(close - comma - 2), &hi, &ihi) == 0);
    const char *note = close + 1;
    char v[64];
    if (k->type == AS_KNOB_FLOAT) {
        snprintf(v, sizeof v, "%.17g", lo);
        expect(p, k, v, !lo_open, range);
        snprintf(v, sizeof v, "%.17g",
                 lo_open ? nextafter(lo, INFINITY) : nextafter(lo, -INFINITY));
        expect(p, k, v, lo_open, range);
        snprintf(v, sizeof v, "%.17g", hi);
        expect(p, k, v, !hi_open, range);
        snprintf(v, sizeof v, "%.17g",
                 hi_open ? nextafter(hi, -INFINITY) : nextafter(hi, INFINITY));
        expect(p, k, v, hi_open, range);
        return;
    }
    CU_ASSERT_FATAL(!lo_open && !hi_open); /* integers are printed closed */
    fmt_int(v, sizeof v, ilo, 0);
    expect(p, k, v, 1, range);
    fmt_int(v, sizeof v, ilo, -1);
    expect(p, k, v, zero_too && ilo - 1 == 0, range);
    if (zero_too)
        expect(p, k, "0", 1, range);
    fmt_int(v, sizeof v, ihi, 0);
    expect(p, k, v, 1, range);
    fmt_int(v, sizeof v, ihi, 1);
    expect(p, k, v, 0, range);
    if (strstr(note, "power of 2")) {
        fmt_int(v, sizeof v, ilo < 3 ? 3 : ilo * 2 + 1, 0);
        expect(p, k, v, 0, range);
    }
    if (strstr(note, "multiple of ")) {
        fmt_int(v, sizeof v, ilo, 1);
        expect(p, k, v, 0, range);
    }
}

static void test_ranges_agree(void)
{
    size_t n, knobs = 0;
    const as_policy *const *l = as_policy_list(&n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < l[i]->n_knobs; j++) {
            const as_knob *k = &l[i]->knobs[j];
            char range[128];
            as_knob_range(l[i], j, range, sizeof range);
            if (k->type == AS_KNOB_BOOL || k->type == AS_KNOB_ENUM)
                check_words(l[i], k, range);
            else
                check_interval(l[i], k, range);
            knobs++;
        }
    CU_ASSERT(knobs >= 30);
}

/* The binary prints the same ranges, one tab-separated line per knob. */
static void test_policies_tsv(void)
{
    static char out[1 << 16];
    CU_ASSERT_EQUAL(tu_run_allocsim("policies -f tsv", out, sizeof out, NULL, 0), 0);
    CU_ASSERT_EQUAL(strncmp(out, "policy\tknob\talias\ttype\tunit\tdefault\trange\thelp\n", 47), 0);
    size_t n, lines = 0;
    const as_policy *const *l = as_policy_list(&n);
    for (size_t i = 0; i < n; i++) {
        char line[512];
        if (!l[i]->n_knobs) {
            snprintf(line, sizeof line, "\n%s\t\t\t\t\t\t\t\n", l[i]->name);
            CU_ASSERT_PTR_NOT_NULL(strstr(out, line));
            lines++;
        }
        for (size_t j = 0; j < l[i]->n_knobs; j++) {
            const as_knob *k = &l[i]->knobs[j];
            char range[128];
            as_knob_range(l[i], j, range, sizeof range);
            snprintf(line, sizeof line, "\n%s\t%s\t%s\t", l[i]->name, k->name,
                     k->alias ? k->alias : "");
            const char *at = strstr(out, line);
            CU_ASSERT_PTR_NOT_NULL_FATAL(at);
            const char *eol = strchr(at + 1, '\n');
            /* Fields 7 (range) of this line. */
            const char *f = at + 1;
            for (int t = 0; t < 6 && f; t++)
                f = strchr(f, '\t') ? strchr(f, '\t') + 1 : NULL;
            CU_ASSERT_FATAL(f && eol && f < eol);
            CU_ASSERT_EQUAL(strncmp(f, range, strlen(range)), 0);
            CU_ASSERT_EQUAL(f[strlen(range)], '\t');
            lines++;
        }
    }
    size_t nl = 0;
    for (const char *c = out; *c; c++)
        nl += *c == '\n';
    CU_ASSERT_EQUAL(nl, lines + 1);
    CU_ASSERT_EQUAL(tu_run_allocsim("policies -f yaml", out, sizeof out, NULL, 0), 2);
}

CU_TestInfo test_ranges[] = {
    {"every knob's printed range is what the parser accepts", test_ranges_agree},
    {"policies -f tsv: one line per knob with that range", test_policies_tsv},
    CU_TEST_INFO_NULL,
};
