/*
 * units.c - byte quantities as people write them: one rule for the command line, the
 * policy specs' SIZE knobs, the text format and the generators (GNU coreutils'
 * convention): K, M, G, T (also Ki/KiB, ...) are powers of 1024; KB, MB, GB, TB powers of
 * 1000; letters in any case; e notation and fractions are fine (1.5G, 141e9), rounded down
 * to whole bytes. Invariant: a plain integer is read exactly (no floating point), so the
 * text format's sizes never lose a byte. Also the one human form of sizes and capacities
 * that every table and chart legend prints (sim/REPORT.md, Conventions).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "units.h"

#include "error.h"

static int unit_mul(const char *u, size_t n, double *mul)
{
    if (n == 0 || (n == 1 && (u[0] == 'B' || u[0] == 'b'))) {
        *mul = 1;
        return 0;
    }
    static const char letters[] = "KMGT";
    const char *l = u[0] ? strchr(letters, toupper((unsigned char)u[0])) : NULL;
    if (!l)
        return -1;
    unsigned k = (unsigned)(l - letters) + 1;
    int i1 = n > 1 && (u[1] == 'i' || u[1] == 'I');
    int b_at = n == 2 ? 1 : n == 3 ? 2 : 0;
    int binary;
    if (n == 1 || (n == 2 && i1) || (n == 3 && i1 && (u[2] == 'B' || u[2] == 'b')))
        binary = 1;
    else if (n == 2 && (u[b_at] == 'B' || u[b_at] == 'b'))
        binary = 0;
    else
        return -1;
    *mul = binary ? ldexp(1.0, 10 * (int)k) : pow(1000.0, (double)k);
    return 0;
}

int as_parse_size(const char *s, size_t n, uint64_t *out)
{
    size_t i = 0;
    uint64_t x = 0;
    /* The common case, a plain integer (the text format's sizes), stays exact and fast. */
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        uint64_t d = (uint64_t)(s[i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
        i++;
    }
    if (i == 0)
        return -1;
    if (i == n) {
        *out = x;
        return 0;
    }
    size_t num = i;
    /* A fraction or an exponent goes through strtod, then the unit, then floor. */
    if (s[i] == '.' || s[i] == 'e' || s[i] == 'E') {
        char buf[64];
        size_t j = i;
        if (s[j] == '.')
            for (j++; j < n && s[j] >= '0' && s[j] <= '9'; j++)
                ;
        if (j < n && (s[j] == 'e' || s[j] == 'E') && j + 1 < n &&
            ((s[j + 1] >= '0' && s[j + 1] <= '9') || s[j + 1] == '+'))
            for (j += 2; j < n && s[j] >= '0' && s[j] <= '9'; j++)
                ;
        num = j;
        if (num >= sizeof buf)
            return -1;
        memcpy(buf, s, num);
        buf[num] = 0;
        double mul, v = strtod(buf, NULL);
        if (unit_mul(s + num, n - num, &mul) || !(v >= 0))
            return -1;
        double b = v * mul;
        if (b >= 18446744073709551615.0)
            return -1;
        *out = (uint64_t)floor(b);
        return 0;
    }
    double mul;
    if (unit_mul(s + num, n - num, &mul))
        return -1;
    uint64_t m = (uint64_t)mul;
    if (x > UINT64_MAX / m)
        return -1;
    *out = x * m;
    return 0;
}

/* ---- capacities and the human form of sizes ----------------------------------------- */

int as_parse_bytes(const char *s, uint64_t *out)
{
    return s && as_parse_size(s, strlen(s), out) == 0 && *out ? 0 : -1;
}

int as_parse_capacity(const char *s, uint64_t *out)
{
    if (s && (strcmp(s, "none") == 0 || strcmp(s, "unlimited") == 0)) {
        *out = AS_CAPACITY_NONE;
        return 0;
    }
    uint64_t v;
    if (as_parse_bytes(s, &v))
        return AS_EINVAL;
    if (v == AS_CAPACITY_NONE) /* the bytes that mean no limit are not a capacity */
        return AS_ELIMIT;
    *out = v;
    return 0;
}

void as_capacity_why(int rc, const char *opt, const char *text, char *why, size_t n)
{
    if (rc == AS_ELIMIT)
        snprintf(why, n,
                 "%s %s: 2^64-1 bytes is the value that means no limit, not a capacity; write "
                 "%s none for no limit",
                 opt, text, opt);
    else
        snprintf(why, n,
                 "%s %s: not a capacity (bytes with an optional unit: 80G, 80GB, 80GiB, 141e9, "
                 "or none)",
                 opt, text);
}

int as_bare_number_note(const char *opt, const char *text, uint64_t bytes, char *note, size_t n)
{
    /* A bare number under 1 MiB is probably a missing unit; a short one most likely G. */
    if (text[strspn(text, "0123456789")] != 0 || bytes >= (1u << 20))
        return 0;
    char b[32];
    as_fmt_bytes(b, sizeof b, bytes);
    if (bytes < 10000)
        snprintf(note, n, "%s %s: read as %s bytes; did you mean %sG?", opt, text, text, text);
    else
        snprintf(note, n, "%s %s: read as %s bytes (%s); add a unit (K, M, G) if more was meant",
                 opt, text, text, b);
    return 1;
}

int as_parse_count(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

void as_fmt_bytes(char *buf, size_t n, uint64_t b)
{
    if (b < 1024)
        snprintf(buf, n, "%llu B", (unsigned long long)b);
    else if (b < (1ull << 20))
        snprintf(buf, n, "%.1f KiB", (double)b / 1024);
    else if (b < (1ull << 30))
        snprintf(buf, n, "%.1f MiB", (double)b / (1 << 20));
    else
        snprintf(buf, n, "%.2f GiB", (double)b / (1 << 30));
}

void as_fmt_capacity(char *buf, size_t n, uint64_t cap)
{
    /* Exact when it is a whole number of the unit; otherwise rounded as every other byte
     * column is, and marked "~" (the exact bytes are in CSV and JSON). */
    if (cap == AS_CAPACITY_NONE)
        snprintf(buf, n, "none");
    else if (cap >= (1ull << 30) && cap % (1ull << 30) == 0)
        snprintf(buf, n, "%llu GiB", (unsigned long long)(cap >> 30));
    else if (cap >= (1ull << 20) && cap % (1ull << 20) == 0)
        snprintf(buf, n, "%llu MiB", (unsigned long long)(cap >> 20));
    else if (cap < (1ull << 20) && cap >= 1024 && cap % 1024 == 0)
        snprintf(buf, n, "%llu KiB", (unsigned long long)(cap >> 10));
    else if (cap < 1024)
        snprintf(buf, n, "%llu B", (unsigned long long)cap);
    else {
        buf[0] = '~';
        as_fmt_bytes(buf + (n > 1), n > 1 ? n - 1 : n, cap);
    }
}
