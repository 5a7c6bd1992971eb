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

size_t as_fmt_u64(char *p, uint64_t v)
{
    char t[20];
    size_t k = 0;
    do
        t[k++] = (char)('0' + v % 10);
    while (v /= 10);
    for (size_t i = 0; i < k; i++)
        p[i] = t[k - 1 - i];
    return k;
}

/* snprintf's contract for a text of len bytes formed in t: as much as fits, terminated. */
static void put_text(char *buf, size_t n, const char *t, size_t len)
{
    if (!n)
        return;
    size_t k = len < n - 1 ? len : n - 1;
    memcpy(buf, t, k);
    buf[k] = 0;
}

/* v with prec (0..3) decimals at t, as printf's %.<prec>f writes it, and its length; 0
 * when this cannot say (negative, -0, not finite, 2^53 or more: the caller asks printf).
 * v is m 2^e exactly (m < 2^53), so v 10^prec is m 10^prec 2^e, and printf rounds that to
 * the nearest integer, a tie to the even one: here in integers (m 1000 < 2^63). */
static size_t fixed(char *t, double v, unsigned prec)
{
    static const uint64_t pow10[] = {1, 10, 100, 1000};
    if (!(v >= 0) || v >= 9007199254740992.0 || (v == 0 && signbit(v)) || prec > 3)
        return 0;
    int e;
    double f = frexp(v, &e); /* v = f 2^e, f in [0.5, 1) */
    uint64_t m = (uint64_t)ldexp(f, 53), num = m * pow10[prec], q;
    int shift = 53 - e; /* v 10^prec = num / 2^shift */
    if (v == 0)
        q = 0;
    else if (shift <= 0)
        q = num << -shift; /* v < 2^53 and an integer: num << -shift < 2^63 */
    else if (shift >= 64)
        q = 0; /* v 10^prec < 2^-4: rounds to 0 */
    else {
        uint64_t r = num & ((1ull << shift) - 1), half = 1ull << (shift - 1);
        q = num >> shift;
        q += r > half || (r == half && (q & 1));
    }
    size_t k = as_fmt_u64(t, q / pow10[prec]);
    if (prec) {
        uint64_t frac = q % pow10[prec];
        t[k++] = '.';
        for (unsigned i = prec; i-- > 0; frac /= 10)
            t[k + i] = (char)('0' + frac % 10);
        k += prec;
    }
    return k;
}

void as_fmt_fixed(char *buf, size_t n, double v, unsigned prec, const char *suffix)
{
    char t[64];
    size_t k = fixed(t, v, prec), l = strlen(suffix);
    if (!k || l > sizeof t - k) {
        snprintf(buf, n, "%.*f%s", (int)prec, v, suffix);
        return;
    }
    memcpy(t + k, suffix, l);
    put_text(buf, n, t, k + l);
}

void as_fmt_bytes(char *buf, size_t n, uint64_t b)
{
    if (b < 1024) {
        char t[24];
        size_t k = as_fmt_u64(t, b);
        memcpy(t + k, " B", 2);
        put_text(buf, n, t, k + 2);
    } else if (b < (1ull << 20))
        as_fmt_fixed(buf, n, (double)b / 1024, 1, " KiB");
    else if (b < (1ull << 30))
        as_fmt_fixed(buf, n, (double)b / (1 << 20), 1, " MiB");
    else
        as_fmt_fixed(buf, n, (double)b / (1 << 30), 2, " GiB");
}

void as_fmt_capacity(char *buf, size_t n, uint64_t cap)
{
    /* Exact when it is a whole number of the unit; otherwise rounded as every other byte
     * column is, and marked "~" (the exact bytes are in CSV and JSON). */
    static const char *const unit[] = {" B", " KiB", " MiB", " GiB"};
    int u = -1;
    if (cap == AS_CAPACITY_NONE)
        put_text(buf, n, "none", 4);
    else if (cap >= (1ull << 30) && cap % (1ull << 30) == 0)
        u = 3;
    else if (cap >= (1ull << 20) && cap % (1ull << 20) == 0)
        u = 2;
    else if (cap < (1ull << 20) && cap >= 1024 && cap % 1024 == 0)
        u = 1;
    else if (cap < 1024)
        u = 0;
    if (u >= 0) { /* a whole number of the unit */
        char t[32];
        size_t k = as_fmt_u64(t, cap >> (10 * u)), l = strlen(unit[u]);
        memcpy(t + k, unit[u], l);
        put_text(buf, n, t, k + l);
    } else if (cap != AS_CAPACITY_NONE) {
        buf[0] = '~';
        as_fmt_bytes(buf + (n > 1), n > 1 ? n - 1 : n, cap);
    }
}
