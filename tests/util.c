/*
 * util.c - test helpers (see util.h). Nothing here is allocsim logic.
 *
 * Every temporary file lives in one private directory, made on first use and removed
 * with all it holds when the runner exits (also after a failed CU_ASSERT_FATAL, and on
 * SIGINT/SIGTERM), so `make test` leaves nothing in $TMPDIR whatever a test forgets.
 * The directory becomes the children's $TMPDIR too: allocsim's own temporary files land
 * there, where a test can look for leftovers (tu_tmpdir).
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include "util.h"

#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <zstd.h>
#include <unistd.h>

#ifndef AS_TEST_ROOT
#define AS_TEST_ROOT "."
#endif

static char bufs[4][1024];
static unsigned slot;

static char *next_buf(void)
{
    return bufs[slot++ & 3];
}

const char *tu_path(const char *rel)
{
    char *b = next_buf();
    snprintf(b, 1024, "%s/%s", AS_TEST_ROOT, rel);
    /* Everything the suite reads ships with the repository: a missing file is a broken
     * checkout, named here, before the test that needs it fails on it. */
    if (access(b, F_OK) != 0)
        fprintf(stderr, "\n  [%s: missing from the source tree (%s)]\n", rel, b);
    return b;
}

static char tmpdir[1024];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path); /* on failure go on: remove as much as possible */
    return 0;
}

static void rm_tmpdir(void)
{
    if (tmpdir[0])
        nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void on_signal(int sig)
{
    rm_tmpdir();
    signal(sig, SIG_DFL);
    raise(sig);
}

const char *tu_tmpdir(void)
{
    if (tmpdir[0])
        return tmpdir;
    const char *dir = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/allocsim-test-XXXXXX", dir && *dir ? dir : "/tmp");
    if (!mkdtemp(tmpdir)) {
        snprintf(tmpdir, sizeof tmpdir, "%s", dir && *dir ? dir : "/tmp");
        return tmpdir; /* no cleanup possible; the files still work */
    }
    atexit(rm_tmpdir);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    setenv("TMPDIR", tmpdir, 1);
    return tmpdir;
}

/* A fresh empty file in tu_tmpdir(), its name in b[1024]. */
static void make_tmp(char *b, const char *suffix)
{
    snprintf(b, 1024, "%s/allocsim-test-XXXXXX%s", tu_tmpdir(), suffix ? suffix : "");
    int fd = mkstemps(b, suffix ? (int)strlen(suffix) : 0);
    if (fd >= 0)
        close(fd);
}

const char *tu_tmp(const char *suffix)
{
    char *b = next_buf();
    make_tmp(b, suffix);
    return b;
}

/* Only what the suite made: a name that a stale tu_tmp buffer has since turned into a
 * tu_path (they share the rotating buffers) would otherwise delete a tracked file. */
void tu_rm(const char *path)
{
    const char *dir = tu_tmpdir();
    size_t n = strlen(dir);
    if (strncmp(path, dir, n) != 0 || path[n] != '/') {
        fprintf(stderr, "\n  [tu_rm: %s is not in the suite's temporary folder: left alone]\n",
                path);
        return;
    }
    unlink(path);
}

const char *tu_write_tmp(const char *suffix, const char *text)
{
    const char *p = tu_tmp(suffix);
    FILE *f = fopen(p, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return p;
}

uint64_t tu_seed(const char *test_name)
{
    const char *e = getenv("AS_SEED");
    uint64_t s = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    fprintf(stderr, "\n  [%s: seed %llu, rerun with AS_SEED=%llu]\n", test_name,
            (unsigned long long)s, (unsigned long long)s);
    return s;
}

uint64_t tu_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void slurp(const char *path, char *dst, size_t cap)
{
    if (!dst || cap == 0)
        return;
    dst[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    size_t n = fread(dst, 1, cap - 1, f);
    dst[n] = 0;
    fclose(f);
}

char *tu_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *b = malloc(cap + 1);
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(b, (cap *= 2) + 1);
            if (!nb)
                free(b);
            b = nb;
        }
    }
    if (b && ferror(f)) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n] = 0;
        if (len)
            *len = n;
    }
    return b;
}

char *tu_slurp_zst(const char *path, size_t *len)
{
    size_t zn = 0, cap = 1 << 20, n = 0, rc = 1;
    char *z = tu_slurp(path, &zn), *out = malloc(cap + 1);
    ZSTD_DStream *d = ZSTD_createDStream();
    ZSTD_inBuffer in = {z, zn, 0};
    int ok = z && out && d;
    while (ok && (in.pos < in.size || rc != 0)) { /* every frame, and all it holds back */
        if (cap - n < (1 << 16)) {
            char *nb = realloc(out, (cap *= 2) + 1);
            if (!(ok = nb != NULL))
                break;
            out = nb;
        }
        ZSTD_outBuffer o = {out + n, cap - n, 0};
        size_t was = in.pos;
        rc = ZSTD_decompressStream(d, &o, &in);
        n += o.pos;
        ok = !ZSTD_isError(rc) && (o.pos || in.pos > was); /* no progress: it is cut short */
    }
    ZSTD_freeDStream(d);
    free(z);
    if (!ok) {
        free(out);
        return NULL;
    }
    out[n] = 0;
    if (len)
        *len = n;
    return out;
}

long tu_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

int tu_run_sh(const char *cmdline, char *out, size_t out_cap, char *err, size_t err_cap)
{
    char o[1024], e[1024]; /* not tu_tmp's: a caller's tu_path and tu_tmp names stay valid */
    make_tmp(o, ".out");
    make_tmp(e, ".err");
    size_t len = strlen(cmdline) + sizeof o + sizeof e + 64;
    char *cmd = malloc(len);
    if (!cmd)
        return -1;
    /* Braces, so that the redirections apply to a whole list such as "a && b". */
    snprintf(cmd, len, "{ %s\n} >'%s' 2>'%s' </dev/null", cmdline, o, e);
    int st = system(cmd);
    free(cmd);
    slurp(o, out, out_cap);
    slurp(e, err, err_cap);
    unlink(o);
    unlink(e);
    if (st == -1 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

/* The formatted line of a tu_run_*f call in line[TU_LINE_MAX], or -1 when it does not fit. */
enum { TU_LINE_MAX = 8192 };
static int format_line(char *line, const char *fmt, va_list ap)
{
    int n = vsnprintf(line, TU_LINE_MAX, fmt, ap);
    return n < 0 || n >= TU_LINE_MAX ? -1 : 0;
}

int tu_run_shf(char *out, size_t out_cap, char *err, size_t err_cap, const char *fmt, ...)
{
    char line[TU_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    int rc = format_line(line, fmt, ap);
    va_end(ap);
    return rc ? rc : tu_run_sh(line, out, out_cap, err, err_cap);
}

const char *tu_allocsim(void)
{
    const char *env = getenv("AS_ALLOCSIM");
    return env && *env ? env : "build/allocsim";
}

int tu_run_allocsim(const char *args, char *out, size_t out_cap, char *err, size_t err_cap)
{
    const char *bin = tu_allocsim();
    size_t len = strlen(bin) + strlen(args) + 8;
    char *cmd = malloc(len);
    if (!cmd)
        return -1;
    snprintf(cmd, len, "'%s' %s", bin, args);
    int rc = tu_run_sh(cmd, out, out_cap, err, err_cap);
    free(cmd);
    return rc;
}

int tu_run_allocsimf(char *out, size_t out_cap, char *err, size_t err_cap, const char *fmt, ...)
{
    char line[TU_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    int rc = format_line(line, fmt, ap);
    va_end(ap);
    return rc ? rc : tu_run_allocsim(line, out, out_cap, err, err_cap);
}

int tu_drop_timing(char *csv)
{
    const char *hdr_end = strchr(csv, '\n');
    const char *tail = ",wall_s,cpu_s,events_per_second";
    size_t tl = strlen(tail);
    if (!hdr_end || (size_t)(hdr_end - csv) <= tl || memcmp(hdr_end - tl, tail, tl) != 0)
        return -1;
    char *w = csv;
    for (char *line = csv; *line;) {
        char *end = line + strcspn(line, "\n"), *cut = end;
        for (int k = 0; k < 3 && cut > line;)
            k += *--cut == ',';
        memmove(w, line, (size_t)(cut - line));
        w += cut - line;
        if (*end)
            *w++ = '\n';
        line = *end ? end + 1 : end;
    }
    *w = 0;
    return 0;
}
