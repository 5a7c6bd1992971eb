/*
 * cmd_compare.c - `allocsim compare`: predicted (simulated) against measured (real GPU) runs.
 *
 *   allocsim compare [-f table|csv] [--segments PRED.csv MEAS.csv] PREDICTED.json MEASURED.json
 *
 * Both files are allocsim JSON reports (`allocsim -f json`, allocsim-replay, torch_replay.py).
 * Runs are paired by their index in the report: the validation scripts write predictions
 * and measurements in the same order, and a pair whose capacities differ is flagged. For
 * each pair it prints the OOM allocation ordinal on both sides, peak reserved and its
 * relative error, and, with --segments, whether the device event sequences agree as
 * (alloc, action, size) rows, with the first difference. Addresses are not compared:
 * the driver places segments its own way (replay/PLACEMENT.md).
 *
 * Exit status: 0 when it compared (differences are results), 1 bad input, 2 usage.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---- a small JSON reader (the subset reports use: no \u escapes beyond ASCII) ---------- */

typedef enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jval {
    jtype t;
    int b;
    double num;
    uint64_t u;   /* exact value of a non-negative integer literal */
    int is_uint;  /* 1 when u is exact */
    char *s;      /* J_STR */
    struct jval *items; /* J_ARR values, J_OBJ values */
    char **keys;        /* J_OBJ */
    size_t n;
} jval;

typedef struct jparser {
    const char *p, *start, *end;
    const char *path;
    char err[200];
    int depth;
} jparser;

static void jfree(jval *v)
{
    if (!v)
        return;
    free(v->s);
    for (size_t i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    memset(v, 0, sizeof *v);
}

static int jfail(jparser *jp, const char *what)
{
    if (!jp->err[0])
        snprintf(jp->err, sizeof jp->err, "%s: byte %zu: %s", jp->path,
                 (size_t)(jp->p - jp->start), what);
    return -1;
}

static void jws(jparser *jp)
{
    while (jp->p < jp->end && isspace((unsigned char)*jp->p))
        jp->p++;
}

static int jvalue(jparser *jp, jval *v);

static int jstring(jparser *jp, char **out)
{
    if (jp->p >= jp->end || *jp->p != '"')
        return jfail(jp, "expected a string");
    jp->p++;
    size_t cap = 16, n = 0;
    char *s = malloc(cap);
    if (!s)
        return jfail(jp, "out of memory");
    while (jp->p < jp->end && *jp->p != '"') {
        char c = *jp->p++;
        if (c == '\\') {
            if (jp->p >= jp->end)
                break;
            c = *jp->p++;
            switch (c) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': {
                unsigned x = 0;
                for (int i = 0; i < 4; i++) {
                    if (jp->p >= jp->end || !isxdigit((unsigned char)*jp->p)) {
                        free(s);
                        return jfail(jp, "bad \\u escape");
                    }
                    char h = *jp->p++;
                    x = x * 16 + (unsigned)(isdigit((unsigned char)h) ? h - '0'
                                                                      : (tolower(h) - 'a' + 10));
                }
                c = x < 128 ? (char)x : '?';
                break;
            }
            default: break; /* \" \\ \/ */
            }
        }
        if (n + 2 > cap) {
            char *ns = realloc(s, cap *= 2);
            if (!ns) {
                free(s);
                return jfail(jp, "out of memory");
            }
            s = ns;
        }
        s[n++] = c;
    }
    if (jp->p >= jp->end) {
        free(s);
        return jfail(jp, "unterminated string");
    }
    jp->p++;
    s[n] = 0;
    *out = s;
    return 0;
}

static int jpush(jparser *jp, jval *v, char *key, const jval *item)
{
    if ((v->n & (v->n - 1)) == 0) { /* grow at powers of two */
        size_t nc = v->n ? v->n * 2 : 4;
        jval *ni = realloc(v->items, nc * sizeof *ni);
        if (!ni)
            return jfail(jp, "out of memory");
        v->items = ni;
        if (v->t == J_OBJ) {
            char **nk = realloc(v->keys, nc * sizeof *nk);
            if (!nk)
                return jfail(jp, "out of memory");
            v->keys = nk;
        }
    }
    v->items[v->n] = *item;
    if (v->t == J_OBJ)
        v->keys[v->n] = key;
    v->n++;
    return 0;
}

static int jcontainer(jparser *jp, jval *v, char close)
{
    v->t = close == '}' ? J_OBJ : J_ARR;
    jp->p++;
    if (++jp->depth > 64)
        return jfail(jp, "nested too deeply");
    jws(jp);
    if (jp->p < jp->end && *jp->p == close) {
        jp->p++;
        jp->depth--;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        jval item = { 0 };
        jws(jp);
        if (v->t == J_OBJ) {
            if (jstring(jp, &key))
                return -1;
            jws(jp);
            if (jp->p >= jp->end || *jp->p != ':') {
                free(key);
                return jfail(jp, "expected ':'");
            }
            jp->p++;
        }
        if (jvalue(jp, &item) || jpush(jp, v, key, &item)) {
            free(key);
            jfree(&item);
            return -1;
        }
        jws(jp);
        if (jp->p < jp->end && *jp->p == ',') {
            jp->p++;
            continue;
        }
        if (jp->p < jp->end && *jp->p == close) {
            jp->p++;
            jp->depth--;
            return 0;
        }
        return jfail(jp, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int jvalue(jparser *jp, jval *v)
{
    memset(v, 0, sizeof *v);
    jws(jp);
    if (jp->p >= jp->end)
        return jfail(jp, "unexpected end of input");
    char c = *jp->p;
    if (c == '{')
        return jcontainer(jp, v, '}');
    if (c == '[')
        return jcontainer(jp, v, ']');
    if (c == '"') {
        v->t = J_STR;
        return jstring(jp, &v->s);
    }
    static const struct {
        const char *w;
        jtype t;
        int b;
    } words[] = { { "null", J_NULL, 0 }, { "true", J_BOOL, 1 }, { "false", J_BOOL, 0 } };
    for (size_t i = 0; i < 3; i++) {
        size_t l = strlen(words[i].w);
        if ((size_t)(jp->end - jp->p) >= l && memcmp(jp->p, words[i].w, l) == 0) {
            jp->p += l;
            v->t = words[i].t;
            v->b = words[i].b;
            return 0;
        }
    }
    if (c == '-' || isdigit((unsigned char)c)) {
        char buf[64];
        size_t n = 0;
        while (jp->p + n < jp->end && n < sizeof buf - 1 &&
               strchr("+-.eE0123456789", jp->p[n]))
            n++;
        memcpy(buf, jp->p, n);
        buf[n] = 0;
        char *e;
        errno = 0;
        v->num = strtod(buf, &e);
        if (e != buf + n || n == 0)
            return jfail(jp, "bad number");
        if (isdigit((unsigned char)buf[0]) && strspn(buf, "0123456789") == n) {
            errno = 0;
            unsigned long long u = strtoull(buf, NULL, 10);
            v->is_uint = errno == 0;
            v->u = (uint64_t)u;
        }
        v->t = J_NUM;
        jp->p += n;
        return 0;
    }
    return jfail(jp, "unexpected character");
}

static const jval *jget(const jval *o, const char *key)
{
    if (!o || o->t != J_OBJ)
        return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0)
            return &o->items[i];
    return NULL;
}

/* A non-negative integer field: 1 with *out set, 0 when null or absent, -1 when not one. */
static int jget_u64(const jval *o, const char *key, uint64_t *out)
{
    const jval *v = jget(o, key);
    if (!v || v->t == J_NULL)
        return 0;
    if (v->t != J_NUM || !v->is_uint)
        return -1;
    *out = v->u;
    return 1;
}

static int load_json(const char *path, jval *root)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        as_cli_msg("%s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    int ioerr = ferror(f);
    fclose(f);
    if (!buf || ioerr) {
        free(buf);
        as_cli_msg("%s: %s", path, buf ? "read error" : "out of memory");
        return -1;
    }
    jparser jp = { .p = buf, .start = buf, .end = buf + n, .path = path };
    int rc = jvalue(&jp, root);
    if (!rc) {
        jws(&jp);
        if (jp.p != jp.end)
            rc = jfail(&jp, "trailing data after the report");
    }
    if (!rc && (root->t != J_OBJ || !jget(root, "runs") || jget(root, "runs")->t != J_ARR))
        rc = jfail(&jp, "not an allocsim report (no \"runs\" array)");
    free(buf);
    if (rc) {
        as_cli_msg("%s", jp.err);
        jfree(root);
    }
    return rc;
}

/* ---- --segments CSV --------------------------------------------------------------------- */

typedef struct seg_row {
    uint64_t run, alloc, size;
    char action[16];
} seg_row;

typedef struct seg_log {
    seg_row *r;
    size_t n, cap;
} seg_log;

static int load_segments(const char *path, seg_log *log)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        as_cli_msg("%s: %s", path, strerror(errno));
        return -1;
    }
    char line[512];
    uint64_t ln = 0;
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (ln == 1 && strncmp(line, "run,", 4) == 0)
            continue;
        if (line[0] == '\n' || line[0] == 0)
            continue;
        seg_row s = { 0 };
        unsigned long long run, alloc, event, addr, size;
        char act[16];
        if (sscanf(line, "%llu,%llu,%llu,%15[a-z_],%llu,%llu", &run, &alloc, &event, act, &addr,
                   &size) != 6) {
            as_cli_msg("%s: line %" PRIu64 ": expected run,alloc,event,action,addr,size", path,
                       ln);
            rc = -1;
            break;
        }
        (void)event;
        (void)addr;
        s.run = run;
        s.alloc = alloc;
        s.size = size;
        snprintf(s.action, sizeof s.action, "%s", act);
        if (log->n == log->cap) {
            size_t nc = log->cap ? log->cap * 2 : 1024;
            seg_row *nr = realloc(log->r, nc * sizeof *nr);
            if (!nr) {
                as_cli_msg("%s: out of memory", path);
                rc = -1;
                break;
            }
            log->r = nr;
            log->cap = nc;
        }
        log->r[log->n++] = s;
    }
    fclose(f);
    return rc;
}

/* The rows of one run, in file order, as pointers (*out is malloc'd; NULL when none). */
static int run_rows(const seg_log *log, uint64_t run, const seg_row ***out, size_t *n)
{
    size_t k = 0;
    *out = NULL;
    *n = 0;
    for (size_t i = 0; i < log->n; i++)
        k += log->r[i].run == run;
    if (!k)
        return 0;
    if (!(*out = malloc(k * sizeof **out)))
        return -1;
    for (size_t i = 0; i < log->n; i++)
        if (log->r[i].run == run)
            (*out)[(*n)++] = &log->r[i];
    return 0;
}

/* Index of the first row where the two runs' (alloc, action, size) differ, SIZE_MAX when
 * the sequences are equal, or SIZE_MAX - 1 when out of memory. *x and *y get the rows
 * there (NULL past the end). */
static size_t first_diff(const seg_log *pl, const seg_log *ml, uint64_t run, const seg_row **x,
                         const seg_row **y, size_t *np, size_t *nm)
{
    const seg_row **p, **m;
    size_t k = SIZE_MAX - 1;
    *x = *y = NULL;
    if (run_rows(pl, run, &p, np))
        return k;
    if (run_rows(ml, run, &m, nm)) {
        free(p);
        return k;
    }
    for (k = 0; k < *np && k < *nm; k++)
        if (p[k]->alloc != m[k]->alloc || p[k]->size != m[k]->size ||
            strcmp(p[k]->action, m[k]->action) != 0)
            break;
    if (k == *np && k == *nm) {
        k = SIZE_MAX;
    } else {
        *x = k < *np ? p[k] : NULL;
        *y = k < *nm ? m[k] : NULL;
    }
    free(p);
    free(m);
    return k;
}

/* ---- the command ------------------------------------------------------------------------- */

static void fmt_opt(char *buf, size_t n, int have, uint64_t v)
{
    if (have > 0)
        snprintf(buf, n, "%" PRIu64, v);
    else
        snprintf(buf, n, "-");
}

static void fmt_row(char *buf, size_t n, const seg_row *r)
{
    if (r)
        snprintf(buf, n, "[%" PRIu64 " %s %" PRIu64 "]", r->alloc, r->action, r->size);
    else
        snprintf(buf, n, "[end]");
}

int as_cmd_compare(int argc, char **argv)
{
    const char *fmt = "table", *pseg = NULL, *mseg = NULL, *files[2] = { NULL, NULL };
    int nfiles = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: allocsim compare [-f table|csv] [--segments PRED.csv MEAS.csv] "
                   "PREDICTED.json MEASURED.json\n"
                   "Pairs the runs of two JSON reports by index and prints, per run, the OOM\n"
                   "allocation ordinal and peak reserved on both sides, the peak's relative\n"
                   "error, and whether the device event sequences agree.\n");
            return AS_EXIT_OK;
        } else if (strcmp(argv[i], "-f") == 0 && i + 1 < argc) {
            fmt = argv[++i];
            if (strcmp(fmt, "table") && strcmp(fmt, "csv"))
                return as_cli_usage("compare", "-f %s: table or csv", fmt);
        } else if (strcmp(argv[i], "--segments") == 0 && i + 2 < argc) {
            pseg = argv[++i];
            mseg = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return as_cli_usage("compare", "unknown or incomplete option '%s'", argv[i]);
        } else if (nfiles < 2) {
            files[nfiles++] = argv[i];
        } else {
            return as_cli_usage("compare", "too many files: '%s'", argv[i]);
        }
    }
    if (nfiles != 2)
        return as_cli_usage("compare", "needs PREDICTED.json and MEASURED.json");

    jval pj = { 0 }, mj = { 0 };
    seg_log pl = { 0 }, ml = { 0 };
    int rc = AS_EXIT_INPUT;
    if (load_json(files[0], &pj) || load_json(files[1], &mj))
        goto out;
    if (pseg && (load_segments(pseg, &pl) || load_segments(mseg, &ml)))
        goto out;
    const jval *pr = jget(&pj, "runs"), *mr = jget(&mj, "runs");
    size_t n = pr->n < mr->n ? pr->n : mr->n;
    int csv = strcmp(fmt, "csv") == 0;
    if (pr->n != mr->n)
        as_cli_msg("warning: %zu predicted runs, %zu measured: comparing the first %zu",
                   pr->n, mr->n, n);
    if (csv)
        printf("run,policy,capacity,pred_oom_alloc,meas_oom_alloc,oom_match,"
               "pred_peak_reserved,meas_peak_reserved,peak_error,peak_match,segments\n");
    else
        printf("%-4s %-34s %14s %9s %9s %5s %14s %14s %8s  %s\n", "run", "policy", "capacity",
               "oom pred", "oom meas", "same", "peak pred", "peak meas", "error",
               pseg ? "device events" : "");
    size_t oom_same = 0, peak_same = 0, seg_same = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        const jval *p = &pr->items[i], *m = &mr->items[i];
        uint64_t pcap = 0, mcap = 0, po = 0, mo = 0, pp = 0, mp = 0;
        int hpc = jget_u64(p, "capacity", &pcap), hmc = jget_u64(m, "capacity", &mcap);
        int hpo = jget_u64(p, "oom_alloc", &po), hmo = jget_u64(m, "oom_alloc", &mo);
        int hpp = jget_u64(p, "peak_reserved", &pp), hmp = jget_u64(m, "peak_reserved", &mp);
        if (hpc < 0 || hmc < 0 || hpo < 0 || hmo < 0 || hpp < 0 || hmp < 0) {
            as_cli_msg("%s/%s: run %zu: capacity, oom_alloc and peak_reserved must be "
                       "non-negative integers or null", files[0], files[1], i);
            goto out;
        }
        const jval *pol = jget(p, "policy");
        const char *policy = pol && pol->t == J_STR ? pol->s : "?";
        if (hpc != hmc || pcap != mcap) {
            as_cli_msg("warning: run %zu: capacities differ (%" PRIu64 " predicted, %" PRIu64
                       " measured)", i, hpc > 0 ? pcap : 0, hmc > 0 ? mcap : 0);
            bad++;
        }
        int osame = hpo == hmo && (hpo == 0 || po == mo);
        int psame = hpp > 0 && hmp > 0 && pp == mp;
        double err = hpp > 0 && hmp > 0 && mp ? ((double)pp - (double)mp) / (double)mp : NAN;
        oom_same += osame;
        peak_same += psame;
        char cap[24], a[24], b[24], c[24], d[24], segs[320] = "";
        if (hpc > 0)
            snprintf(cap, sizeof cap, "%" PRIu64, pcap);
        else
            snprintf(cap, sizeof cap, "none");
        fmt_opt(a, sizeof a, hpo, po);
        fmt_opt(b, sizeof b, hmo, mo);
        fmt_opt(c, sizeof c, hpp, pp);
        fmt_opt(d, sizeof d, hmp, mp);
        if (pseg) {
            const seg_row *x, *y;
            size_t np, nm;
            size_t k = first_diff(&pl, &ml, i, &x, &y, &np, &nm);
            if (k == SIZE_MAX - 1) {
                as_cli_msg("out of memory");
                goto out;
            }
            if (k == SIZE_MAX) {
                seg_same++;
                snprintf(segs, sizeof segs, "same (%zu)", np);
            } else {
                char rx[64], ry[64];
                fmt_row(rx, sizeof rx, x);
                fmt_row(ry, sizeof ry, y);
                snprintf(segs, sizeof segs, "differ at #%zu of %zu/%zu: %s vs %s", k, np, nm, rx,
                         ry);
            }
        }
        if (csv)
            printf("%zu,\"%s\",%s,%s,%s,%d,%s,%s,%.6g,%d,\"%s\"\n", i, policy, cap, a, b, osame, c,
                   d, err, psame, segs);
        else
            printf("%-4zu %-34.34s %14s %9s %9s %5s %14s %14s %7.3f%%  %s\n", i, policy, cap, a, b,
                   osame ? "yes" : "NO", c, d, 100 * err, segs);
    }
    if (!csv) {
        printf("\n%zu runs: OOM point exact in %zu, peak reserved exact in %zu", n, oom_same,
               peak_same);
        if (pseg)
            printf(", device events identical in %zu", seg_same);
        printf("%s\n", bad ? " (some capacities differ: see warnings)" : "");
    }
    rc = AS_EXIT_OK;
out:
    jfree(&pj);
    jfree(&mj);
    free(pl.r);
    free(ml.r);
    return rc;
}
