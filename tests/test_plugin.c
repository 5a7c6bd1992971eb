/*
 * test_plugin.c - bring your own policy: `make install` into a temporary prefix puts the ABI
 * headers and allocsim-policy.pc there; the example plug-in (policies/examples/slab.c) is
 * built against the installed headers alone, through pkg-config, loaded by `-p plugin:` and
 * run through the conformance suite (this runner, again, with $AS_CHECK_PLUGIN) and through
 * the command on a hand-worked trace; objects that are no policy, or of another ABI, are
 * refused with a message naming the file and what is wrong.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin.h"
#include "policy.h"
#include "util.h"

static char out[1 << 16];

/* A printf-formatted shell command line; its stdout and stderr together into out. */
#define sh(...) tu_run_shf(out, sizeof out, NULL, 0, "exec 2>&1; " __VA_ARGS__)

static const char *cc(void)
{
    const char *c = getenv("CC");
    return c && *c ? c : "cc";
}

/* Builds policies/examples/slab.c against the headers installed under prefix; *so gets the
 * shared object's path. */
static int build_example(const char *prefix, char *so, size_t len)
{
    snprintf(so, len, "%s/libslab.so", prefix);
    return sh("PKG_CONFIG_PATH='%s/lib/pkgconfig' && export PKG_CONFIG_PATH && "
              "%s -std=c11 -Wall -Wextra -Werror -O2 -shared -fPIC "
              "$(pkg-config --cflags allocsim-policy) '%s' -o '%s'",
              prefix, cc(), tu_path("policies/examples/slab.c"), so);
}

static void plugin_installed_example(void)
{
    char prefix[600], so[700], f[800];
    snprintf(prefix, sizeof prefix, "%s/plugin-prefix", tu_tmpdir());
    const char *b = getenv("AS_BUILD");
    CU_ASSERT_EQUAL_FATAL(sh("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C '%s' "
                             "BUILD='%s' install PREFIX='%s'",
                             tu_path(""), b && *b ? b : "build", prefix),
                          0);
    static const char *const want[] = {"include/allocsim/policy.h", "include/allocsim/device.h",
                                       "include/allocsim/error.h", "include/allocsim/units.h",
                                       "lib/pkgconfig/allocsim-policy.pc"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        snprintf(f, sizeof f, "%s/%s", prefix, want[i]);
        CU_ASSERT_EQUAL(access(f, R_OK), 0);
    }
    CU_ASSERT_EQUAL(
        sh("PKG_CONFIG_PATH='%s/lib/pkgconfig' pkg-config --cflags allocsim-policy", prefix), 0);
    snprintf(f, sizeof f, "-I%s/include/allocsim", prefix);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, f));
    /* Only the installed headers: the compiler is given no path into the source tree. */
    CU_ASSERT_EQUAL_FATAL(build_example(prefix, so, sizeof so), 0);
    const as_policy *p;
    char why[400];
    CU_ASSERT_EQUAL_FATAL(as_plugin_load(so, &p, why, sizeof why), 0);
    CU_ASSERT_STRING_EQUAL(p->name, "slab");
    const as_policy *again;
    CU_ASSERT(as_plugin_load(so, &again, why, sizeof why) == 0 && again == p);
    /* The conformance suite through the loader: this runner, on that plug-in alone. */
    CU_ASSERT_EQUAL(
        sh("AS_CHECK_PLUGIN='plugin:%s' /proc/%d/exe -q conformance", so, (int)getpid()), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "4 passed, 0 failed"));
    if (!strstr(out, "4 passed, 0 failed"))
        fprintf(stderr, "\n%s\n", out);
    /* Through the command: 1 MiB and 3 MiB live, the first freed, 1 MiB again: its 2 MiB
     * block is reused, so 2 + 4 = 6 MiB at the peak; at step=4M both blocks are 4 MiB, and
     * the third takes the freed one: 8 MiB. */
    const char *t = tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 1M\nalloc 1 3M\nfree 0\n"
                                         "alloc 2 1M\nfree 1\nfree 2\n");
    CU_ASSERT_EQUAL(
        sh("'%s' -f csv -p 'plugin:%s' -p 'plugin:%s,step=4M' '%s'", tu_allocsim(), so, so, t), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ",6291456,")); /* 6 MiB reserved at the peak */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ",8388608,")); /* 8 MiB */
    snprintf(f, sizeof f, "plugin:%s,step=4MiB", so);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, f)); /* the canonical spec names the file */
    b = getenv("AS_BUILD");
    CU_ASSERT_EQUAL(sh("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C '%s' BUILD='%s' "
                       "uninstall PREFIX='%s' && rm -f '%s' && "
                       "find '%s' -type f -o -name '*allocsim*'",
                       tu_path(""), b && *b ? b : "build", prefix, so, prefix),
                    0);
    CU_ASSERT_STRING_EQUAL(out, ""); /* uninstall took every file away */
}

/* Objects that are not a policy of this ABI: each refused with its reason, by the loader
 * and by the command (a usage error, exit 2). */
static void plugin_refusals(void)
{
    static const struct {
        const char *src, *want;
    } bad[] = {
        {"int not_a_policy(void); int not_a_policy(void) { return 1; }",
         "no symbol as_policy_plugin_abi"},
        {"extern const int as_policy_plugin_abi; const int as_policy_plugin_abi = 1;",
         "built against policy ABI 1, this allocsim has ABI 5"},
        {"#include \"policy.h\"\nstatic const as_policy t = {.name = \"x\", .summary = \"\","
         " .abi = AS_POLICY_ABI};\nAS_POLICY_EXPORT(t)",
         "init, alloc, free and stats must not be NULL"},
    };
    char so[700], src[700], why[400];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(src, sizeof src, "%s", tu_write_tmp(".c", bad[i].src));
        snprintf(so, sizeof so, "%s/bad%zu.so", tu_tmpdir(), i);
        CU_ASSERT_EQUAL_FATAL(sh("%s -std=c11 -shared -fPIC -I'%s' -I'%s' '%s' -o '%s'", cc(),
                                 tu_path("policies"), tu_path("sim/base"), src, so),
                              0);
        const as_policy *p = (const as_policy *)1;
        CU_ASSERT_EQUAL(as_plugin_load(so, &p, why, sizeof why), AS_EINVAL);
        CU_ASSERT_PTR_NULL(p);
        CU_ASSERT_PTR_NOT_NULL(strstr(why, bad[i].want));
        CU_ASSERT_PTR_NOT_NULL(strstr(why, so));
        CU_ASSERT_EQUAL(sh("'%s' -p 'plugin:%s' '%s'", tu_allocsim(), so,
                           tu_path("traces/samples/handwritten.txt")),
                        2);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, bad[i].want));
    }
    const char *text = tu_write_tmp(".so", "not an ELF file\n");
    const as_policy *p;
    CU_ASSERT_EQUAL(as_plugin_load(text, &p, why, sizeof why), AS_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "cannot load it as a shared object"));
    CU_ASSERT_EQUAL(as_plugin_load("libslab.so", &p, why, sizeof why), AS_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "give the shared object's path"));
}

/* A static allocsim (the release build) runs a command that names a plug-in with
 * allocsim-dynamic from its own folder (sim/cli/main.c); copied alone, it says which
 * program it looked for and where, exit 1. A dynamic allocsim has no sibling to check. */
static void plugin_static_hand_over(void)
{
    char dyn[700], dir[700];
    snprintf(dyn, sizeof dyn, "%s-dynamic", tu_allocsim());
    if (access(dyn, X_OK) != 0)
        return;
    snprintf(dir, sizeof dir, "%s/alone", tu_tmpdir());
    CU_ASSERT_EQUAL_FATAL(sh("mkdir -p '%s' && cp '%s' '%s/allocsim'", dir, tu_allocsim(), dir), 0);
    const char *t = tu_path("traces/samples/handwritten.txt");
    CU_ASSERT_EQUAL(sh("'%s/allocsim' -p plugin:./no-such.so '%s'", dir, t), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "allocsim-dynamic"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, dir));
    /* Beside it, allocsim-dynamic's loader answers (a usage error naming the file). */
    CU_ASSERT_EQUAL_FATAL(sh("cp '%s' '%s/allocsim-dynamic'", dyn, dir), 0);
    CU_ASSERT_EQUAL(sh("'%s/allocsim' -p plugin:./no-such.so '%s'", dir, t), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "no-such.so: cannot load it as a shared object"));
    /* Without a plug-in nothing is handed over: the same table as the build's. */
    CU_ASSERT_EQUAL(sh("rm -f '%s/allocsim-dynamic' && '%s/allocsim' -p bestfit '%s'", dir, dir, t),
                    0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "bestfit"));
    sh("rm -rf '%s'", dir);
}

CU_TestInfo test_plugin[] = {
    {"installed headers, pkg-config, the example through the loader and conformance",
     plugin_installed_example},
    {"not a policy, another ABI, a broken table: refused by name", plugin_refusals},
    {"a static allocsim hands plug-ins to allocsim-dynamic, and says where it looked",
     plugin_static_hand_over},
    CU_TEST_INFO_NULL,
};
