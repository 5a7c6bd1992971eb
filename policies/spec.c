/*
 * spec.c - the -p SPEC parser: "[name,]knob=value,..." and PYTORCH_CUDA_ALLOC_CONF strings
 * ("key:value,...", list values "[k:v,...,>:v]"), verbatim.
 *
 * Whitespace is dropped everywhere (PyTorch's ConfigTokenizer does the same). Items are
 * separated by commas outside brackets; a knob is matched by its name or its
 * PYTORCH_CUDA_ALLOC_CONF alias, with '=' or ':' between key and value. Invariant: on
 * success every knob of the policy has a value within the table's range (defaults for the
 * ones not given) and spec->text parses back to the same values; on failure nothing is
 * allocated and `why` holds one line naming the knob and what is allowed.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "knobs.h"
#include "plugin.h"
#include "policy.h"
#include "units.h"

#define DEFAULT_POLICY "torch"
#define ASYNC_POLICY "cudamallocasync" /* PYTORCH_CUDA_ALLOC_CONF backend:cudaMallocAsync */

typedef struct strbuf {
    char *p;
    size_t len, cap;
    int oom;
} strbuf;

static void sb_add(strbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t nc = b->cap ? b->cap * 2 : 64;
        while (nc <= b->len + (size_t)n)
            nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
}

static int fail(char *why, size_t why_len, const char *fmt, ...)
{
    if (why && why_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return AS_EINVAL;
}

static int is_pow2(uint64_t x)
{
    return x && !(x & (x - 1));
}

/* "knob 'maxsplit' (max_split_size_mb)" for messages. */
static const char *knob_label(const as_knob *k, char *buf, size_t len)
{
    if (k->alias)
        snprintf(buf, len, "knob '%s' (%s)", k->name, k->alias);
    else
        snprintf(buf, len, "knob '%s'", k->name);
    return buf;
}

/* Unsigned decimal integer; the whole string must be digits. */
static int parse_u64(const char *s, uint64_t *out)
{
    if (!*s)
        return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s))
            return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -2;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int parse_i64(const char *s, int64_t *out)
{
    int neg = *s == '-';
    if (*s == '-' || *s == '+')
        s++;
    uint64_t u;
    int rc = parse_u64(s, &u);
    if (rc)
        return rc;
    if (neg) {
        if (u > (uint64_t)INT64_MAX + 1)
            return -2;
        *out = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
    } else {
        if (u > INT64_MAX)
            return -2;
        *out = (int64_t)u;
    }
    return 0;
}

static int parse_bool(const char *s, int64_t *out)
{
    static const char *const yes[] = {"True", "true", "1", "on"};
    static const char *const no[] = {"False", "false", "0", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(s, yes[i]) == 0)
            return *out = 1, 0;
        if (strcmp(s, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

static int parse_enum(const char *choices, const char *s, int64_t *out)
{
    size_t len = strlen(s);
    int64_t idx = 0;
    for (const char *c = choices; c && *c; idx++) {
        const char *e = strchr(c, '|');
        size_t cl = e ? (size_t)(e - c) : strlen(c);
        if (cl == len && memcmp(c, s, len) == 0)
            return *out = idx, 0;
        if (!e)
            break;
        c = e + 1;
    }
    return -1;
}

/* The word for an ENUM index, into buf. */
static const char *enum_word(const char *choices, int64_t idx, char *buf, size_t len)
{
    const char *c = choices ? choices : "";
    for (int64_t i = 0; i < idx && c; i++) {
        c = strchr(c, '|');
        if (c)
            c++;
    }
    if (!c)
        c = "?";
    const char *e = strchr(c, '|');
    size_t cl = e ? (size_t)(e - c) : strlen(c);
    if (cl >= len)
        cl = len - 1;
    memcpy(buf, c, cl);
    buf[cl] = 0;
    return buf;
}

/* DIVS: "N" for every interval, or "[K:N,...,>:N]" (PyTorch 2.11's roundup_power2_divisions
 * grammar, c10/core/AllocatorConfig.cpp). */
static int parse_divs(const as_knob *k, const char *s, as_knob_value *v, char *why, size_t wl)
{
    char lab[96];
    knob_label(k, lab, sizeof lab);
    uint64_t n;
    if (*s != '[') {
        int rc = parse_u64(s, &n);
        if (rc || (n != 0 && !is_pow2(n)) || (int64_t)n < k->min || (int64_t)n > k->max)
            return fail(why, wl,
                        "%s: '%s' is not a valid number of divisions (0 or a power of 2 up to "
                        "%" PRId64 ", or a list like [256:1,512:2,>:8])",
                        lab, s, k->max);
        for (int i = 0; i < AS_DIV_INTERVALS; i++)
            v->div[i] = (uint32_t)n;
        return 0;
    }
    size_t len = strlen(s);
    if (len < 2 || s[len - 1] != ']')
        return fail(why, wl, "%s: list '%s' must end with ']'", lab, s);
    if (len == 2)
        return fail(why, wl, "%s: empty list '[]'", lab);
    memset(v->div, 0, sizeof v->div);
    unsigned last_index = 0;
    int first = 1;
    const char *p = s + 1;
    while (*p != ']') {
        const char *colon = strchr(p, ':');
        const char *end = p + strcspn(p, ",]");
        if (!colon || colon > end)
            return fail(why, wl, "%s: list entry '%.*s' is not KEY:DIVISIONS", lab, (int)(end - p),
                        p);
        char key[32], val[32];
        size_t kl = (size_t)(colon - p), vl = (size_t)(end - colon - 1);
        if (kl == 0 || kl >= sizeof key || vl == 0 || vl >= sizeof val)
            return fail(why, wl, "%s: list entry '%.*s' is not KEY:DIVISIONS", lab, (int)(end - p),
                        p);
        memcpy(key, p, kl);
        key[kl] = 0;
        memcpy(val, colon + 1, vl);
        val[vl] = 0;
        if (parse_u64(val, &n) || (n != 0 && !is_pow2(n)) || (int64_t)n > k->max)
            return fail(why, wl,
                        "%s: divisions '%s' for '%s' must be 0 or a power of 2 up to %" PRId64, lab,
                        val, key, k->max);
        if (strcmp(key, ">") == 0) {
            for (unsigned i = last_index + 1; i < AS_DIV_INTERVALS; i++)
                v->div[i] = (uint32_t)n;
        } else {
            uint64_t mib;
            if (parse_u64(key, &mib) || !is_pow2(mib))
                return fail(why, wl,
                            "%s: interval '%s' must be a power of 2 (MiB: 1, 2, 4, ... 32768) or "
                            "'>'",
                            lab, key);
            unsigned idx = 63u - (unsigned)__builtin_clzll(mib);
            if (idx > AS_DIV_INTERVALS - 1)
                idx = AS_DIV_INTERVALS - 1;
            if (first) {
                for (unsigned i = 0; i < idx; i++)
                    v->div[i] = (uint32_t)n;
                first = 0;
            }
            v->div[idx] = (uint32_t)n;
            last_index = idx;
        }
        p = end;
        if (*p == ',') {
            p++;
            if (*p == ']')
                return fail(why, wl, "%s: empty entry before ']' in '%s'", lab, s);
        } else if (*p != ']') {
            return fail(why, wl, "%s: bad list '%s'", lab, s);
        }
    }
    if (p[1] != 0)
        return fail(why, wl, "%s: text after ']' in '%s'", lab, s);
    return 0;
}

static int parse_value(const char *pol, const as_knob *k, const char *s, as_knob_value *v,
                       char *why, size_t wl)
{
    char lab[96];
    knob_label(k, lab, sizeof lab);
    int rc;
    switch (k->type) {
    case AS_KNOB_INT: {
        int64_t x;
        rc = parse_i64(s, &x);
        if (rc)
            return fail(why, wl,
                        "%s of '%s': '%s' is not an integer (allowed %" PRId64 "..%" PRId64 " %s)",
                        lab, pol, s, k->min, k->max, k->unit ? k->unit : "");
        if (x < k->min || x > k->max)
            return fail(why, wl,
                        "%s of '%s': %" PRId64 " is out of range %" PRId64 "..%" PRId64 " %s", lab,
                        pol, x, k->min, k->max, k->unit ? k->unit : "");
        if (k->multiple > 1 && x % k->multiple)
            return fail(why, wl, "%s of '%s': %" PRId64 " is not a multiple of %" PRId64 " %s", lab,
                        pol, x, k->multiple, k->unit ? k->unit : "");
        v->i = x;
        return 0;
    }
    case AS_KNOB_BOOL:
        if (parse_bool(s, &v->i))
            return fail(why, wl,
                        "%s of '%s': '%s' is not a boolean (True/False, true/false, "
                        "1/0, on/off)",
                        lab, pol, s);
        return 0;
    case AS_KNOB_FLOAT: {
        char *end;
        errno = 0;
        double d = strtod(s, &end);
        if (!*s || *end || errno || !isfinite(d))
            return fail(why, wl, "%s of '%s': '%s' is not a number (allowed %g..%g)", lab, pol, s,
                        k->fmin, k->fmax);
        if (d < k->fmin || d > k->fmax || (k->fmax_open && d == k->fmax))
            return fail(why, wl, "%s of '%s': %g is out of range [%g, %g%s", lab, pol, d, k->fmin,
                        k->fmax, k->fmax_open ? ")" : "]");
        v->f = d;
        return 0;
    }
    case AS_KNOB_SIZE: {
        uint64_t x;
        /* "max" names an unbounded knob's top (cudaMallocAsync's release threshold, which
         * PyTorch sets to UINT64_MAX), so the normalised text reads back. */
        if (k->max == INT64_MAX && strcmp(s, "max") == 0) {
            v->i = INT64_MAX;
            return 0;
        }
        rc = as_parse_size(s, strlen(s), &x);
        if (rc)
            return fail(why, wl,
                        "%s of '%s': '%s' is not a size (bytes with an optional unit: "
                        "512, 2K, 2MiB, 1G)",
                        lab, pol, s);
        if (x > (uint64_t)INT64_MAX || (int64_t)x < k->min || (int64_t)x > k->max)
            return fail(why, wl, "%s of '%s': %s is out of range %" PRId64 "..%" PRId64 " bytes",
                        lab, pol, s, k->min, k->max);
        v->i = (int64_t)x;
        return 0;
    }
    case AS_KNOB_ENUM:
        if (parse_enum(k->choices, s, &v->i))
            return fail(why, wl, "%s of '%s': '%s' is not one of %s", lab, pol, s,
                        k->choices ? k->choices : "(none)");
        return 0;
    case AS_KNOB_DIVS:
        return parse_divs(k, s, v, why, wl);
    }
    return fail(why, wl, "%s of '%s': unknown knob type", lab, pol);
}

static void set_default(const as_knob *k, as_knob_value *v)
{
    memset(v, 0, sizeof *v);
    v->i = k->def;
    v->f = k->fdef;
    if (k->type == AS_KNOB_DIVS)
        for (int i = 0; i < AS_DIV_INTERVALS; i++)
            v->div[i] = (uint32_t)k->def;
}

static int find_knob(const as_policy *p, const char *key)
{
    for (size_t i = 0; i < p->n_knobs; i++)
        if (strcmp(p->knobs[i].name, key) == 0 ||
            (p->knobs[i].alias && strcmp(p->knobs[i].alias, key) == 0))
            return (int)i;
    return -1;
}

static int knob_by_alias(const as_policy *p, const char *alias)
{
    for (size_t i = 0; i < p->n_knobs; i++)
        if (p->knobs[i].alias && strcmp(p->knobs[i].alias, alias) == 0)
            return (int)i;
    return -1;
}

/* Knobs named `round` are granularities and must be powers of two (knobs.h). */
static int check_round(const as_policy *p, const as_knob_value *v, char *why, size_t wl)
{
    char lab[96];
    for (size_t i = 0; i < p->n_knobs; i++)
        if (strcmp(p->knobs[i].name, "round") == 0 && !is_pow2((uint64_t)v[i].i))
            return fail(why, wl, "%s of '%s': %" PRId64 " is not a power of 2",
                        knob_label(&p->knobs[i], lab, sizeof lab), p->name, v[i].i);
    return 0;
}

/* PyTorch's cross-knob validation (2.11's c10/core/AllocatorConfig.cpp), for the
 * knobs that carry the PyTorch alias. A value of 0 for maxsplit or gc is our "off" when
 * given by the short name; given by the PYTORCH_CUDA_ALLOC_CONF key (by_alias[k]) it is
 * refused, as PyTorch refuses it. */
static int check_pytorch_rules(const as_policy *p, const as_knob_value *v, const char *by_alias,
                               char *why, size_t wl)
{
    char lab[96];
    int ls = knob_by_alias(p, "large_segment_size_mb");
    int64_t large = ls >= 0 ? v[ls].i : 20;
    int ms = knob_by_alias(p, "max_split_size_mb");
    if (ms >= 0 && v[ms].set && (v[ms].i != 0 || by_alias[ms]) && v[ms].i < large)
        return fail(why, wl,
                    "%s of '%s': %" PRId64 " MiB is below the minimum %" PRId64
                    " MiB (the large segment size, as PyTorch requires)%s",
                    knob_label(&p->knobs[ms], lab, sizeof lab), p->name, v[ms].i, large,
                    by_alias[ms] ? "" : "; 0 = off");
    int nr = knob_by_alias(p, "max_non_split_rounding_mb");
    if (nr >= 0 && v[nr].set && v[nr].i < large)
        return fail(why, wl,
                    "%s of '%s': %" PRId64 " MiB is below the minimum %" PRId64
                    " MiB (the large segment size, as PyTorch requires)",
                    knob_label(&p->knobs[nr], lab, sizeof lab), p->name, v[nr].i, large);
    /* The table's range is [0, 1) with 0 = off; PyTorch's key refuses 0 too. */
    int gc = knob_by_alias(p, "garbage_collection_threshold");
    if (gc >= 0 && v[gc].set && by_alias[gc] && !(v[gc].f > 0.0 && v[gc].f < 1.0))
        return fail(why, wl, "%s of '%s': %g must be strictly between 0 and 1",
                    knob_label(&p->knobs[gc], lab, sizeof lab), p->name, v[gc].f);
    return 0;
}

/* The lower bound check_pytorch_rules puts on max_split_size_mb and
 * max_non_split_rounding_mb: the large_segment knob by name, or its fixed 20 MiB. */
static int pytorch_min_bound(const as_policy *p, const as_knob *k, char *buf, size_t len)
{
    if (!k->alias || (strcmp(k->alias, "max_split_size_mb") != 0 &&
                      strcmp(k->alias, "max_non_split_rounding_mb") != 0))
        return 0;
    int ls = knob_by_alias(p, "large_segment_size_mb");
    if (ls >= 0)
        snprintf(buf, len, "%s", p->knobs[ls].name);
    else
        snprintf(buf, len, "20");
    return 1;
}

void as_knob_range(const as_policy *p, size_t i, char *buf, size_t len)
{
    const as_knob *k = &p->knobs[i];
    char lo[64];
    switch (k->type) {
    case AS_KNOB_BOOL:
        snprintf(buf, len, "true|false");
        return;
    case AS_KNOB_ENUM:
        snprintf(buf, len, "%s", k->choices ? k->choices : "");
        return;
    case AS_KNOB_FLOAT:
        snprintf(buf, len, "[%g, %g%s", k->fmin, k->fmax, k->fmax_open ? ")" : "]");
        return;
    case AS_KNOB_DIVS:
        snprintf(buf, len, "[%" PRId64 ", %" PRId64 "], 0 or a power of 2, or a list", k->min,
                 k->max);
        return;
    case AS_KNOB_INT:
    case AS_KNOB_SIZE:
        break;
    }
    const char *zero = "";
    if (pytorch_min_bound(p, k, lo, sizeof lo)) {
        /* 0 = off for maxsplit: below the bound, only 0 passes check_pytorch_rules. */
        zero = strcmp(k->alias, "max_split_size_mb") == 0 ? "0 or " : "";
    } else {
        snprintf(lo, sizeof lo, "%" PRId64, k->min);
    }
    int n = snprintf(buf, len, "%s[%s, %" PRId64 "]", zero, lo, k->max);
    if (n < 0 || (size_t)n >= len)
        return;
    if (strcmp(k->name, "round") == 0) /* check_round */
        snprintf(buf + n, len - (size_t)n, ", power of 2");
    else if (k->multiple > 1)
        snprintf(buf + n, len - (size_t)n, ", multiple of %" PRId64, k->multiple);
}

/* PYTORCH_CUDA_ALLOC_CONF keys that do not change the device caching allocator's
 * decisions (pinned host memory, locking, IPC handles, graph capture): accepted, so that a
 * user's setting can be pasted verbatim, and left out of the canonical text. 1 when key is
 * one of them, 0 when not, < 0 (why filled) for a value we cannot simulate. */
static int ignored_pytorch_key(const char *key, const char *val, char *why, size_t wl)
{
    static const char *const keys[] = {
        "pinned_use_cuda_host_register",     "pinned_use_hip_host_register",
        "pinned_num_register_threads",       "pinned_use_background_threads",
        "pinned_reserve_segment_size_mb",    "pinned_free_catch_all",
        "pinned_max_round_threshold_mb",     "pinned_max_cached_size_mb",
        "release_lock_on_cudamalloc",        "release_lock_on_hipmalloc",
        "graph_capture_record_stream_reuse", "expandable_segments_handle_type",
    };
    if (strcmp(key, "backend") == 0) {
        if (strcmp(val, "native") == 0)
            return 1;
        if (strcmp(val, "cudaMallocAsync") == 0)
            fail(why, wl,
                 "backend:cudaMallocAsync is not the caching allocator: give it without a "
                 "policy name (a PYTORCH_CUDA_ALLOC_CONF string) or as -p cudamallocasync");
        else
            fail(why, wl,
                 "backend '%s' is not simulated (backend:native, the caching allocator, "
                 "or backend:cudaMallocAsync, the calibrated model of the stream-ordered pool)",
                 val);
        return -1;
    }
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(key, keys[i]) == 0) {
            if (!*val) {
                fail(why, wl, "PyTorch key '%s' has no value", key);
                return -1;
            }
            return 1;
        }
    return 0;
}

static void fmt_size(strbuf *b, uint64_t x)
{
    static const struct {
        const char *u;
        unsigned sh;
    } units[] = {{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}};
    for (size_t i = 0; i < 4; i++)
        if (x && x % (1ull << units[i].sh) == 0) {
            sb_add(b, "%" PRIu64 "%s", x >> units[i].sh, units[i].u);
            return;
        }
    sb_add(b, "%" PRIu64, x);
}

/* A DIVS table as text that parses back to the same table. */
static void fmt_divs(strbuf *b, const uint32_t *d)
{
    int all = 1;
    for (int i = 1; i < AS_DIV_INTERVALS; i++)
        all &= d[i] == d[0];
    if (all) {
        sb_add(b, "%" PRIu32, d[0]);
        return;
    }
    int a = 0; /* end of the first run: the first entry fills everything below it */
    while (a + 1 < AS_DIV_INTERVALS && d[a + 1] == d[0])
        a++;
    int z = AS_DIV_INTERVALS - 1; /* start of the last run: '>' fills from there */
    while (z - 1 > a && d[z - 1] == d[AS_DIV_INTERVALS - 1])
        z--;
    sb_add(b, "[%llu:%" PRIu32, 1ull << a, d[a]);
    for (int i = a + 1; i < z; i++)
        sb_add(b, ",%llu:%" PRIu32, 1ull << i, d[i]);
    sb_add(b, ",>:%" PRIu32 "]", d[AS_DIV_INTERVALS - 1]);
}

static char *canonical(const as_policy *p, const as_knob_value *v)
{
    strbuf b = {0};
    sb_add(&b, "%s", p->name);
    for (size_t i = 0; i < p->n_knobs; i++) {
        const as_knob *k = &p->knobs[i];
        if (!v[i].set)
            continue;
        sb_add(&b, ",%s=", k->name);
        char w[64];
        switch (k->type) {
        case AS_KNOB_INT:
            sb_add(&b, "%" PRId64, v[i].i);
            break;
        case AS_KNOB_BOOL:
            sb_add(&b, "%s", v[i].i ? "true" : "false");
            break;
        case AS_KNOB_FLOAT: {
            /* The shortest text that reads back as the same double. */
            char f[40];
            for (int prec = 6; prec <= 17; prec++) {
                snprintf(f, sizeof f, "%.*g", prec, v[i].f);
                if (strtod(f, NULL) == v[i].f)
                    break;
            }
            sb_add(&b, "%s", f);
            break;
        }
        case AS_KNOB_SIZE:
            if (k->max == INT64_MAX && v[i].i == INT64_MAX)
                sb_add(&b, "max");
            else
                fmt_size(&b, (uint64_t)v[i].i);
            break;
        case AS_KNOB_ENUM:
            sb_add(&b, "%s", enum_word(k->choices, v[i].i, w, sizeof w));
            break;
        case AS_KNOB_DIVS:
            fmt_divs(&b, v[i].div);
            break;
        }
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

static void list_policies(char *buf, size_t len)
{
    size_t n, used = 0;
    const as_policy *const *l = as_policy_list(&n);
    buf[0] = 0;
    for (size_t i = 0; i < n && used + 1 < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", l[i]->name);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (n == 0)
        snprintf(buf, len, "none");
}

/* Splits at commas outside brackets. Returns the item length; *next past the comma. */
static size_t item_len(const char *s)
{
    int depth = 0;
    size_t i;
    for (i = 0; s[i]; i++) {
        if (s[i] == '[')
            depth++;
        else if (s[i] == ']')
            depth--;
        else if (s[i] == ',' && depth <= 0)
            break;
    }
    return i;
}

/* 1 when one of the comma-separated items of s is exactly it. */
static int has_item(const char *s, const char *it)
{
    size_t il = strlen(it);
    while (*s) {
        size_t n = item_len(s);
        if (n == il && strncmp(s, it, il) == 0)
            return 1;
        s += n;
        if (*s == ',')
            s++;
    }
    return 0;
}

/* One parse in progress: the spec without whitespace, the policy, and its knob values. */
typedef struct spec_parse {
    char *buf;
    const as_policy *pol;
    as_knob_value *vals;
    char *by_alias; /* per knob: 1 when it was given by its PYTORCH_CUDA_ALLOC_CONF alias */
    char *plugin;   /* "plugin:PATH" when the policy came from a shared object, else NULL */
    int async;      /* the policy came from backend:cudaMallocAsync */
    char *why;
    size_t wl;
} spec_parse;

/* Copies text into ps->buf without whitespace, refusing bytes a spec cannot hold and
 * unbalanced or nested brackets (so that item splitting cannot run wild). */
static int spec_normalise(spec_parse *ps, const char *text, size_t tl)
{
    ps->buf = malloc(tl + 1);
    if (!ps->buf) {
        fail(ps->why, ps->wl, "out of host memory");
        return AS_ENOMEM;
    }
    size_t bl = 0;
    for (size_t i = 0; i < tl; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (isspace(ch))
            continue;
        if (!isgraph(ch) || ch >= 0x80)
            return fail(ps->why, ps->wl,
                        "byte 0x%02x at offset %zu is not allowed in a policy spec", ch, i);
        ps->buf[bl++] = (char)ch;
    }
    ps->buf[bl] = 0;
    int depth = 0;
    for (size_t i = 0; i < bl; i++) {
        if (ps->buf[i] == '[' && ++depth > 1)
            return fail(ps->why, ps->wl, "nested '[' at offset %zu of '%s'", i, ps->buf);
        if (ps->buf[i] == ']' && --depth < 0)
            return fail(ps->why, ps->wl, "unmatched ']' at offset %zu of '%s'", i, ps->buf);
    }
    if (depth)
        return fail(ps->why, ps->wl, "unclosed '[' in '%s'", ps->buf);
    return 0;
}

/* The policy: the first item when it is a bare name, else the default (a
 * PYTORCH_CUDA_ALLOC_CONF string or knobs alone mean torch). Moves *pp past the name and
 * allocates the knob values, at their defaults. */
static int spec_policy(spec_parse *ps, const char **pp)
{
    const char *p = *pp;
    int async = 0;
    size_t first = item_len(p);
    if (strncmp(p, "plugin:", 7) == 0) {
        /* A policy from a shared object: the path runs to the first ',' */
        ps->plugin = malloc(first + 1);
        if (!ps->plugin) {
            fail(ps->why, ps->wl, "out of host memory");
            return AS_ENOMEM;
        }
        memcpy(ps->plugin, p, first);
        ps->plugin[first] = 0;
        int rc = as_plugin_load(ps->plugin + 7, &ps->pol, ps->why, ps->wl);
        if (rc)
            return rc;
        p += first;
        if (*p == ',')
            p++;
        if (!*p && p[-1] == ',')
            return fail(ps->why, ps->wl, "empty knob after ',' in '%s'", ps->buf);
    } else if (first > 0 && !memchr(p, '=', first) && !memchr(p, ':', first)) {
        char name[64], known[256];
        if (first >= sizeof name)
            return fail(ps->why, ps->wl, "policy name '%.*s...' is too long", 20, p);
        memcpy(name, p, first);
        name[first] = 0;
        if (!(ps->pol = as_policy_find(name))) {
            list_policies(known, sizeof known);
            return fail(ps->why, ps->wl, "unknown policy '%s' (known: %s)", name, known);
        }
        p += first;
        if (*p == ',')
            p++;
        if (!*p && p[-1] == ',')
            return fail(ps->why, ps->wl, "empty knob after ',' in '%s'", ps->buf);
    } else {
        /* PyTorch's backend:cudaMallocAsync is the stream-ordered pool, whose release
         * threshold PyTorch sets to UINT64_MAX (never trim but on a refused growth) */
        async = has_item(p, "backend:cudaMallocAsync");
        ps->pol = as_policy_find(async ? ASYNC_POLICY : DEFAULT_POLICY); /* registry.c */
    }
    *pp = p;
    size_t nk = ps->pol->n_knobs ? ps->pol->n_knobs : 1;
    ps->vals = calloc(nk, sizeof *ps->vals);
    ps->by_alias = calloc(nk, 1);
    if (!ps->vals || !ps->by_alias) {
        fail(ps->why, ps->wl, "out of host memory");
        return AS_ENOMEM;
    }
    for (size_t i = 0; i < ps->pol->n_knobs; i++)
        set_default(&ps->pol->knobs[i], &ps->vals[i]);
    ps->async = async;
    return 0;
}

/* Copies the next item (up to a comma outside brackets) into item; moves *pp past it. */
static int spec_next_item(spec_parse *ps, const char **pp, char *item, size_t cap)
{
    const char *p = *pp;
    size_t n = item_len(p);
    if (n == 0)
        return fail(ps->why, ps->wl, "empty knob at offset %zu of '%s'", (size_t)(p - ps->buf),
                    ps->buf);
    if (n >= cap)
        return fail(ps->why, ps->wl, "knob setting '%.*s...' is too long", 30, p);
    memcpy(item, p, n);
    item[n] = 0;
    p += n;
    if (*p == ',' && !*++p)
        return fail(ps->why, ps->wl, "empty knob after the last ',' in '%s'", ps->buf);
    *pp = p;
    return 0;
}

/* One knob=value (or key:value) item into ps->vals. */
static int spec_apply_item(spec_parse *ps, char *item)
{
    const as_policy *pol = ps->pol;
    size_t kl = strcspn(item, "=:[");
    if (item[kl] != '=' && item[kl] != ':') {
        if (as_policy_find(item))
            return fail(ps->why, ps->wl, "policy name '%s' must come first in the spec", item);
        return fail(ps->why, ps->wl, "'%s' is not knob=value (or key:value)", item);
    }
    item[kl] = 0;
    const char *val = item + kl + 1;
    int ki = find_knob(pol, item);
    if (ki < 0 && strcmp(pol->name, ASYNC_POLICY) == 0 && strcmp(item, "backend") == 0 &&
        strcmp(val, "cudaMallocAsync") == 0)
        return 0; /* it chose this policy (spec_policy) */
    if (ki < 0 && knob_by_alias(pol, "expandable_segments") >= 0) {
        /* torch's table: PYTORCH_CUDA_ALLOC_CONF keys that change nothing are accepted */
        int ig = ignored_pytorch_key(item, val, ps->why, ps->wl);
        if (ig)
            return ig < 0 ? AS_EINVAL : 0;
    }
    if (ki < 0) {
        strbuf names = {0};
        for (size_t i = 0; i < pol->n_knobs; i++)
            sb_add(&names, "%s%s", i ? ", " : "", pol->knobs[i].name);
        fail(ps->why, ps->wl, "policy '%s' has no knob '%s' (knobs: %s)", pol->name, item,
             names.p ? names.p : "none");
        free(names.p);
        return AS_EINVAL;
    }
    const as_knob *k = &pol->knobs[ki];
    char lab[96];
    if (ps->vals[ki].set)
        return fail(ps->why, ps->wl, "%s of '%s' is given twice", knob_label(k, lab, sizeof lab),
                    pol->name);
    if (!*val)
        return fail(ps->why, ps->wl, "%s of '%s' has no value", knob_label(k, lab, sizeof lab),
                    pol->name);
    if (parse_value(pol->name, k, val, &ps->vals[ki], ps->why, ps->wl))
        return AS_EINVAL;
    ps->vals[ki].set = 1;
    ps->by_alias[ki] = k->alias && strcmp(item, k->alias) == 0;
    return 0;
}

/* The checks across knobs, then the canonical text and the input into out. */
static int spec_finish(spec_parse *ps, const char *text, size_t tl, as_policy_spec *out)
{
    int ki = ps->async ? find_knob(ps->pol, "release_threshold") : -1;
    if (ki >= 0 && !ps->vals[ki].set) { /* PyTorch's UINT64_MAX, the knob's largest value */
        ps->vals[ki].i = ps->pol->knobs[ki].max;
        ps->vals[ki].set = 1;
    }
    if (check_round(ps->pol, ps->vals, ps->why, ps->wl) ||
        check_pytorch_rules(ps->pol, ps->vals, ps->by_alias, ps->why, ps->wl))
        return AS_EINVAL;
    out->text = canonical(ps->pol, ps->vals);
    if (out->text && ps->plugin) { /* "plugin:PATH" in place of the table's name */
        size_t nl = strlen(ps->pol->name), pl = strlen(ps->plugin), tl2 = strlen(out->text);
        char *t = malloc(pl + tl2 - nl + 1);
        if (t) {
            memcpy(t, ps->plugin, pl);
            memcpy(t + pl, out->text + nl, tl2 - nl + 1);
        }
        free(out->text);
        out->text = t;
    }
    out->input = malloc(tl + 1);
    if (out->input)
        memcpy(out->input, text, tl + 1);
    if (!out->text || !out->input) {
        free(out->text);
        free(out->input);
        out->text = out->input = NULL;
        fail(ps->why, ps->wl, "out of host memory");
        return AS_ENOMEM;
    }
    out->policy = ps->pol;
    out->values = ps->vals;
    ps->vals = NULL;
    return 0;
}

int as_policy_spec_parse(const char *text, as_policy_spec *out, char *why, size_t why_len)
{
    spec_parse ps = {.why = why, .wl = why_len};
    char item[512];
    if (why && why_len)
        why[0] = 0;
    if (!out)
        return fail(why, why_len, "no output spec");
    memset(out, 0, sizeof *out);
    if (!text)
        text = "";
    size_t tl = strlen(text);
    const char *p = NULL;
    int rc = spec_normalise(&ps, text, tl);
    if (!rc)
        p = ps.buf, rc = spec_policy(&ps, &p);
    while (!rc && *p && !(rc = spec_next_item(&ps, &p, item, sizeof item)))
        rc = spec_apply_item(&ps, item);
    if (!rc)
        rc = spec_finish(&ps, text, tl, out);
    free(ps.by_alias);
    free(ps.vals);
    free(ps.buf);
    free(ps.plugin);
    return rc;
}

void as_policy_spec_free(as_policy_spec *s)
{
    if (!s)
        return;
    free(s->values);
    free(s->text);
    free(s->input);
    s->values = NULL;
    s->text = NULL;
    s->input = NULL;
    s->policy = NULL;
}
