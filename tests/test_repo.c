/*
 * test_repo.c - the repository stands alone: no tracked text file names a folder of one
 * particular machine (a home, a work or a mount folder, given absolutely) or the project's
 * private data folder beside the checkout. Paths every Debian machine has (/usr, /proc,
 * /dev, /tmp, /etc) are not a particular machine's and are allowed.
 *
 * The patterns below are written so that this file does not match them itself. Binary
 * files (a NUL in them: compressed traces, pickles) are not read: their bytes are
 * recordings, not text anyone follows.
 */
#include <CUnit/CUnit.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* An absolute path under a folder that only a particular machine has, or the shared data
 * folder beside the checkout; the character before the slash must not be part of a
 * relative path (tests/data is fine); or a Windows user folder. */
static const char machine_path_re[] =
    "(^|[^A-Za-z0-9_.~/-])/(work|home|root|Users|mnt|media|scratch|srv|nfs|net|gpfs|lustre|"
    "data)/[A-Za-z0-9_.-]"
    "|[.][.]/shared([/\"'` ]|$)"
    "|[A-Za-z]:\\\\Users\\\\";

static int compile(regex_t *re)
{
    return regcomp(re, machine_path_re, REG_EXTENDED | REG_NEWLINE | REG_NOSUB);
}

/* The matcher itself, on lines made at run time (so that this source does not hold them). */
static void repo_pattern_catches(void)
{
    regex_t re;
    CU_ASSERT_EQUAL_FATAL(compile(&re), 0);
    char bad[4][64], good[6][64];
    snprintf(bad[0], 64, "data in %s%s/shared/data", "/wo", "rk");
    snprintf(bad[1], 64, "`%s%s/alice/trace.zst`", "/ho", "me");
    snprintf(bad[2], 64, "SHARED ?= %s%s/data", "..", "/shared");
    snprintf(bad[3], 64, "C:%sUsers%sbob", "\\", "\\");
    snprintf(good[0], 64, "tests/data/torch-2.11-h200/key.json");
    snprintf(good[1], 64, "TMPDIR=/tmp/allocsim-test-XXXXXX");
    snprintf(good[2], 64, "PREFIX ?= /usr/local, /proc/self/exe, /dev/null");
    snprintf(good[3], 64, "replay/data/calib-h200 and ../torch-2.11-h200/");
    snprintf(good[4], 64, "os.path.join(HERE, 'data/calib-h200')");
    snprintf(good[5], 64, "a shared/ folder, shared knobs");
    for (int i = 0; i < 4; i++) {
        if (regexec(&re, bad[i], 0, NULL, 0) != 0)
            fprintf(stderr, "\n  not caught: %s", bad[i]);
        CU_ASSERT_EQUAL(regexec(&re, bad[i], 0, NULL, 0), 0);
    }
    for (int i = 0; i < 6; i++) {
        if (regexec(&re, good[i], 0, NULL, 0) == 0)
            fprintf(stderr, "\n  wrongly caught: %s", good[i]);
        CU_ASSERT_NOT_EQUAL(regexec(&re, good[i], 0, NULL, 0), 0);
    }
    regfree(&re);
}

/* Lines of one text file that match; returns how many, printing each with its place. */
static unsigned check_file(const regex_t *re, const char *rel)
{
    size_t len = 0;
    char *text = tu_slurp(tu_path(rel), &len);
    unsigned hits = 0;
    if (!text || memchr(text, 0, len)) {
        free(text);
        return 0;
    }
    unsigned line = 1;
    for (char *p = text; *p; line++) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = 0;
        if (regexec(re, p, 0, NULL, 0) == 0 && hits++ < 5)
            fprintf(stderr, "\n  %s:%u: names a machine's folder: %.160s", rel, line, p);
        if (!nl)
            break;
        p = nl + 1;
    }
    if (hits > 5)
        fprintf(stderr, "\n  %s: %u more lines like these", rel, hits - 5);
    free(text);
    return hits;
}

static void repo_no_machine_paths(void)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "git -C '%s' ls-files -z 2>/dev/null", tu_path(""));
    FILE *ls = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ls);
    regex_t re;
    CU_ASSERT_EQUAL_FATAL(compile(&re), 0);
    char rel[1024];
    size_t n = 0;
    unsigned files = 0, hits = 0;
    int c;
    while ((c = getc(ls)) != EOF) {
        if (c != 0) {
            if (n < sizeof rel - 1)
                rel[n++] = (char)c;
            continue;
        }
        rel[n] = 0;
        n = 0;
        files++;
        hits += check_file(&re, rel);
    }
    int st = pclose(ls);
    regfree(&re);
    if (files == 0 || st != 0) {
        /* A source tree without git (a release tarball): nothing says what is tracked. */
        fprintf(stderr, "\n  [no_machine_paths: skipped, not a git checkout]\n");
        return;
    }
    fprintf(stderr, "\n  [%u tracked files checked for machine paths: %u lines name one]\n", files,
            hits);
    CU_ASSERT_EQUAL(hits, 0);
}

/* The packages after "apt-get install -y" on the first line of text that holds both it and
 * `until` (a word that ends the list, e.g. "make test"), sorted and space-joined into out. */
static int apt_packages(const char *text, const char *until, char *out, size_t n)
{
    const char *key = "apt-get install -y ";
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char line[1024];
        if (len >= sizeof line)
            continue;
        memcpy(line, l, len);
        line[len] = 0;
        char *k = strstr(line, key);
        if (!k || (until && !strstr(line, until)))
            continue;
        char *words[64], *save = NULL;
        int nw = 0;
        for (char *w = strtok_r(k + strlen(key), " ", &save); w && nw < 64;
             w = strtok_r(NULL, " ", &save)) {
            if (!strcmp(w, "&&"))
                break;
            words[nw++] = w;
        }
        for (int i = 1; i < nw; i++) /* insertion sort: a few words */
            for (int j = i; j > 0 && strcmp(words[j - 1], words[j]) > 0; j--) {
                char *t = words[j];
                words[j] = words[j - 1];
                words[j - 1] = t;
            }
        out[0] = 0;
        for (int i = 0; i < nw; i++)
            snprintf(out + strlen(out), n - strlen(out), "%s%s", i ? " " : "", words[i]);
        return nw;
    }
    return 0;
}

/* The README's test command installs exactly what CI installs (CI runs the README's test
 * command on a fresh machine: a package only .ci/run names would hide a broken README). */
static void repo_readme_installs_what_ci_does(void)
{
    size_t n1 = 0, n2 = 0;
    char *readme = tu_slurp(tu_path("README.md"), &n1), *ci = tu_slurp(tu_path(".ci/run"), &n2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(readme);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ci);
    char a[2048], b[2048];
    CU_ASSERT(apt_packages(readme, "&& make test", a, sizeof a) > 0);
    CU_ASSERT(apt_packages(ci, NULL, b, sizeof b) > 0);
    if (strcmp(a, b))
        fprintf(stderr, "\n  README installs: %s\n  .ci/run installs: %s\n", a, b);
    CU_ASSERT_STRING_EQUAL(a, b);
    free(readme);
    free(ci);
}

CU_TestInfo test_repo[] = {
    {"pattern_catches", repo_pattern_catches},
    {"no_machine_paths", repo_no_machine_paths},
    {"readme_installs_what_ci_does", repo_readme_installs_what_ci_does},
    CU_TEST_INFO_NULL,
};
