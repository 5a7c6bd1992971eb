/*
 * test_install.c - allocsim as an installed tool: --version, and allocsim-replay on a
 * machine without the CUDA driver (a clear message and exit 1, not a loader failure).
 * allocsim-replay is checked only when make built it ($AS_REPLAY, set by `make test` when
 * the CUDA toolkit is present); its absence is reported as skipped, by name.
 */
#include <CUnit/CUnit.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include "report.h"
#include "util.h"

#define CAP 65536

static char out[CAP], err[CAP];

static void slurp(const char *path, char *dst, size_t cap)
{
    dst[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    size_t n = fread(dst, 1, cap - 1, f);
    dst[n] = 0;
    fclose(f);
}

/* Runs a shell command line, stdout and stderr into out and err; the exit status or -1. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char line[8192], o[512], e[512], cmd[9300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    snprintf(o, sizeof o, "%s", tu_tmp(".out"));
    snprintf(e, sizeof e, "%s", tu_tmp(".err"));
    snprintf(cmd, sizeof cmd, "%s >'%s' 2>'%s' </dev/null", line, o, e);
    int st = system(cmd);
    slurp(o, out, sizeof out);
    slurp(e, err, sizeof err);
    tu_rm(o);
    tu_rm(e);
    return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

static const char *allocsim(void)
{
    const char *b = getenv("AS_ALLOCSIM");
    return b ? b : "build/allocsim";
}

/* --version and -V: the version from report.h, and the zstd library actually loaded. */
static void test_version(void)
{
    char want[128];
    snprintf(want, sizeof want, "allocsim %s\nzstd %s", AS_VERSION, ZSTD_versionString());
    const char *forms[] = {"--version", "-V"};
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(sh("'%s' %s", allocsim(), forms[i]), 0);
        CU_ASSERT_EQUAL(strncmp(out, want, strlen(want)), 0);
        CU_ASSERT_STRING_EQUAL(err, "");
    }
    CU_ASSERT_EQUAL(sh("'%s' --help", allocsim()), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--version"));
}

static const char *replay_bin(void)
{
    const char *b = getenv("AS_REPLAY");
    if (b && *b && access(b, X_OK) == 0)
        return b;
    fprintf(stderr, "\n  [allocsim-replay not built (no CUDA toolkit): skipped]\n");
    return NULL;
}

/* The program starts without libcuda (it is not linked), and says what is missing. */
static void test_replay_without_driver(void)
{
    const char *bin = replay_bin();
    if (!bin)
        return;
    char want[128];
    snprintf(want, sizeof want, "allocsim-replay %s\nzstd %s\nCUDA runtime ", AS_VERSION,
             ZSTD_versionString());
    CU_ASSERT_EQUAL(sh("'%s' --version", bin), 0);
    CU_ASSERT_EQUAL(strncmp(out, want, strlen(want)), 0);
    CU_ASSERT_EQUAL(sh("'%s' --help", bin), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "libcuda.so.1"));
    /* The binary's own dependencies: no libcuda among them. */
    CU_ASSERT_EQUAL(sh("ldd '%s'", bin), 0);
    CU_ASSERT_PTR_NULL(strstr(out, "libcuda"));

    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (drv) {
        dlclose(drv);
        fprintf(stderr, "\n  [this machine has the CUDA driver: the no-driver message is "
                        "not checked]\n");
        return;
    }
    const char *trace = tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 1M\nfree 0\n");
    char t[256];
    snprintf(t, sizeof t, "%s", trace);
    CU_ASSERT_EQUAL(sh("'%s' -p bestfit '%s'", bin, t), 1);
    CU_ASSERT_STRING_EQUAL(out, "");
    CU_ASSERT_EQUAL(
        strncmp(err, "allocsim-replay: cannot load the NVIDIA CUDA driver (libcuda.so.1", 52), 0);
    char *nl = strchr(err, '\n');
    CU_ASSERT(nl && nl[1] == 0); /* one line */
    /* A usage error is still a usage error, found before the driver is needed. */
    CU_ASSERT_EQUAL(sh("'%s' -p nosuchpolicy '%s'", bin, t), 2);
    CU_ASSERT_EQUAL(sh("'%s' --bogus '%s'", bin, t), 2);
    tu_rm(t);
}

CU_TestInfo test_install[] = {
    {"--version and -V: allocsim and zstd versions", test_version},
    {"allocsim-replay without the CUDA driver: message, exit 1", test_replay_without_driver},
    CU_TEST_INFO_NULL,
};
