/*
 * test_install.c - allocsim as an installed tool: --version; allocsim-replay on a machine
 * without the CUDA driver (a clear message and exit 1, not a loader failure); the man
 * pages agree with the help text (every subcommand, option, policy, chart kind and
 * generator the help lists is in the page, and nothing more) and render without a
 * warning; the bash completion offers what the program knows; `make install` into a
 * temporary prefix puts every file in place and `make uninstall` takes every one away.
 * allocsim-replay is checked only when make built it ($AS_REPLAY, set by `make test` when
 * the CUDA toolkit is present); what cannot be checked here is reported as skipped, by
 * name.
 */
#include <CUnit/CUnit.h>
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "cards.h"
#include "policy.h"
#include "report.h"
#include "util.h"

#define CAP 65536

static char out[CAP], err[CAP];


/* A printf-formatted shell command line, its stdout and stderr into out and err. */
#define sh(...) tu_run_shf(out, sizeof out, err, sizeof err, __VA_ARGS__)

/* --version and -V: the version from report.h, and the zstd library actually loaded. */
static void test_version(void)
{
    char want[128];
    snprintf(want, sizeof want, "allocsim %s\nzstd %s", AS_VERSION, ZSTD_versionString());
    const char *forms[] = {"--version", "-V"};
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(sh("'%s' %s", tu_allocsim(), forms[i]), 0);
        CU_ASSERT_EQUAL(strncmp(out, want, strlen(want)), 0);
        CU_ASSERT_STRING_EQUAL(err, "");
    }
    CU_ASSERT_EQUAL(sh("'%s' --help", tu_allocsim()), 0);
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

/* ---- man pages against the help ---------------------------------------------------------- */

/* A set of words: "\nw1\nw2\n...". */
typedef struct wset {
    char s[8192];
} wset;

static int has(const wset *w, const char *word)
{
    char k[128];
    snprintf(k, sizeof k, "\n%s\n", word);
    return strstr(w->s, k) != NULL;
}

static void add(wset *w, const char *word, size_t n)
{
    char k[128];
    snprintf(k, sizeof k, "%.*s", (int)n, word);
    if (!w->s[0])
        snprintf(w->s, sizeof w->s, "\n");
    if (strcmp(k, "-h") == 0 || strcmp(k, "--help") == 0 || has(w, k))
        return;
    size_t l = strlen(w->s);
    snprintf(w->s + l, sizeof w->s - l, "%s\n", k);
}

static size_t opt_len(const char *p)
{
    if (p[0] != '-' ||
        !(isalnum((unsigned char)p[1]) || (p[1] == '-' && isalpha((unsigned char)p[2]))))
        return 0;
    size_t n = 1;
    while (isalnum((unsigned char)p[n]) || p[n] == '-')
        n++;
    return n;
}

/* The option words a definition starts with: "-p, --policy SPEC" gives -p and --policy. */
static void leading_opts(const char *p, wset *w)
{
    while (*p == ' ' || *p == '\t')
        p++;
    for (size_t n; (n = opt_len(p)) > 0;) {
        add(w, p, n);
        p += n;
        if (strncmp(p, ", ", 2) != 0)
            break;
        p += 2;
    }
}

/* The options a help text defines: leading option words of lines that start with '-'
 * (indented 8 columns at most: the descriptions are deeper), and every option word of its
 * usage lines. -h/--help are left out (every command has
 * them, and the page says so once). */
static void help_opts(const char *help, wset *w)
{
    for (const char *line = help; *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        const char *t = line;
        while (*t == ' ')
            t++;
        if (strncmp(t, "usage:", 6) == 0 || strncmp(t, "allocsim", 8) == 0) {
            for (const char *p = t; p < line + len; p++)
                if ((p == t || strchr(" [(|", p[-1])) && opt_len(p)) {
                    add(w, p, opt_len(p));
                    p += opt_len(p) - 1;
                }
        } else if (*t == '-' && t - line <= 8) { /* deeper: a description's own line */
            char b[512];
            snprintf(b, sizeof b, "%.*s", (int)len, line);
            leading_opts(b, w);
        }
        line += len + (eol != NULL);
    }
}

/* The words of the indented "  NAME  summary" lines after the first line that starts with
 * header. */
static void listed(const char *help, const char *header, wset *w)
{
    const char *p = help;
    while (p && strncmp(p, header, strlen(header)) != 0)
        p = (p = strchr(p, '\n')) ? p + 1 : NULL;
    if (!p)
        return;
    /* Until a blank line; deeper lines continue a summary. */
    for (p = strchr(p, '\n'); p && p[1] && p[1] != '\n'; p = strchr(p + 1, '\n'))
        if (strncmp(p, "\n  ", 3) == 0 && islower((unsigned char)p[3]))
            add(w, p + 3, strcspn(p + 3, " \n"));
}

/* A roff request line as text: font escapes dropped, \- as -, the arguments of the
 * alternating-font macros (.BR, .BI, .IR, ...) joined as they are printed. */
static void roff_text(const char *line, char *txt, size_t cap)
{
    static const char *const alt[] = {".BR ", ".BI ", ".IB ", ".IR ", ".RB ", ".RI "};
    int alternating = 0;
    for (int i = 0; i < 6; i++)
        alternating |= strncmp(line, alt[i], 4) == 0;
    const char *p = line;
    if (*p == '.')
        p += strcspn(p, " ");
    size_t o = 0;
    int quoted = 0;
    for (; *p && o + 1 < cap; p++) {
        if (*p == '"') {
            quoted = !quoted;
            continue;
        }
        if (*p == ' ' && !quoted && (alternating || o == 0))
            continue;
        if (p[0] == '\\' && p[1] == 'f' && p[2]) {
            p += 2;
            continue;
        }
        if (p[0] == '\\' && (p[1] == '-' || p[1] == '&')) {
            if (p[1] == '-')
                txt[o++] = '-';
            p++;
            continue;
        }
        txt[o++] = *p;
    }
    txt[o] = 0;
}

typedef struct man_section {
    char name[160]; /* "OPTIONS", "COMMANDS/run", "POLICY SPECS", ... */
    wset opts, tags;
} man_section;

/* Reads a page: per .SH/.SS section, the option words and the other first words of its
 * .TP tags. Returns the number of sections (at most max), or -1. */
static int read_man(const char *path, man_section *sec, int max)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[1024], sh[64] = "", text[64];
    int n = 0, tag_next = 0;
    man_section *cur = NULL;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, ".SH ", 4) == 0 || strncmp(line, ".SS ", 4) == 0) {
            roff_text(line, text, sizeof text);
            if (line[2] == 'H')
                snprintf(sh, sizeof sh, "%s", text);
            if (n == max)
                break;
            cur = &sec[n++];
            memset(cur, 0, sizeof *cur);
            if (line[2] == 'H')
                snprintf(cur->name, sizeof cur->name, "%s", text);
            else
                snprintf(cur->name, sizeof cur->name, "%s/%s", sh, text);
        } else if (strcmp(line, ".TP") == 0) {
            tag_next = 1;
        } else if (tag_next && cur) {
            tag_next = 0;
            roff_text(line, text, sizeof text);
            if (text[0] == '-')
                leading_opts(text, &cur->opts);
            else
                add(&cur->tags, text, strcspn(text, " "));
        }
    }
    fclose(f);
    return n;
}

static const man_section *section(const man_section *sec, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(sec[i].name, name) == 0)
            return &sec[i];
    return NULL;
}

/* Every word of a in b; prints the ones missing. */
static int subset(const wset *a, const wset *b, const char *what, const char *where)
{
    int ok = 1;
    for (const char *p = a->s[0] ? a->s + 1 : ""; *p;) {
        size_t l = strcspn(p, "\n");
        char wd[128];
        snprintf(wd, sizeof wd, "%.*s", (int)l, p);
        if (!has(b, wd)) {
            fprintf(stderr, "\n  %s '%s' is missing from %s", what, wd, where);
            ok = 0;
        }
        p += l + 1;
    }
    return ok;
}

static void same(const wset *help, const wset *man, const char *what)
{
    char w1[160], w2[160];
    snprintf(w1, sizeof w1, "the man page (%s)", what);
    snprintf(w2, sizeof w2, "the help (%s)", what);
    int a = subset(help, man, "help's", w1), b = subset(man, help, "man page's", w2);
    CU_ASSERT(a && b);
}

static void test_man_agrees_with_help(void)
{
    static man_section sec[40];
    int n = read_man(tu_path("sim/man/allocsim.1"), sec, 40);
    CU_ASSERT_FATAL(n > 10);
    wset cmds = {{0}}, top = {{0}}, run = {{0}};
    CU_ASSERT_EQUAL_FATAL(sh("'%s' --help", tu_allocsim()), 0);
    listed(out, "commands:", &cmds);
    help_opts(out, &top);
    const man_section *cs = section(sec, n, "COMMANDS");
    CU_ASSERT_PTR_NOT_NULL_FATAL(cs);
    wset man_cmds = {{0}};
    for (int i = 0; i < n; i++)
        if (strncmp(sec[i].name, "COMMANDS/", 9) == 0)
            add(&man_cmds, sec[i].name + 9, strlen(sec[i].name + 9));
    same(&cmds, &man_cmds, "commands");
    for (const char *p = cmds.s + 1; *p;) {
        size_t l = strcspn(p, "\n");
        char cmd[64], name[80];
        snprintf(cmd, sizeof cmd, "%.*s", (int)l, p);
        p += l + 1;
        wset h = {{0}};
        CU_ASSERT_EQUAL(sh("'%s' %s --help", tu_allocsim(), cmd), 0);
        help_opts(out, &h);
        if (strcmp(cmd, "run") == 0)
            run = h;
        snprintf(name, sizeof name, "COMMANDS/%s", cmd);
        const man_section *s = section(sec, n, name);
        if (!s)
            continue; /* named by the commands check */
        same(&h, &s->opts, name);
        wset kinds = {{0}};
        if (strcmp(cmd, "plot") == 0)
            listed(out, "KIND", &kinds);
        if (strcmp(cmd, "gen") == 0)
            listed(out, "generators", &kinds);
        if (kinds.s[0])
            same(&kinds, &s->tags, name);
    }
    /* The top level's own options: its usage lines less run's. */
    wset own = {{0}};
    for (const char *p = top.s + 1; *p;) {
        size_t l = strcspn(p, "\n");
        char wd[64];
        snprintf(wd, sizeof wd, "%.*s", (int)l, p);
        if (!has(&run, wd))
            add(&own, wd, l);
        p += l + 1;
    }
    CU_ASSERT(has(&own, "--version") && has(&own, "-V"));
    const man_section *os = section(sec, n, "OPTIONS");
    CU_ASSERT_PTR_NOT_NULL_FATAL(os);
    same(&own, &os->opts, "OPTIONS");
    /* The policies, from the registry. */
    const man_section *ps = section(sec, n, "POLICY SPECS");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ps);
    wset pol = {{0}};
    size_t np;
    const as_policy *const *l = as_policy_list(&np);
    for (size_t i = 0; i < np; i++)
        add(&pol, l[i]->name, strlen(l[i]->name));
    same(&pol, &ps->tags, "POLICY SPECS");
}

static void test_replay_man_agrees_with_help(void)
{
    const char *bin = replay_bin();
    if (!bin)
        return;
    static man_section sec[20];
    int n = read_man(tu_path("sim/man/allocsim-replay.1"), sec, 20);
    const man_section *os = n > 0 ? section(sec, n, "OPTIONS") : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(os);
    wset h = {{0}};
    CU_ASSERT_EQUAL(sh("'%s' --help", bin), 0);
    help_opts(out, &h);
    CU_ASSERT(has(&h, "--async") && has(&h, "-p"));
    same(&h, &os->opts, "allocsim-replay OPTIONS");
}

/* Both pages format with every groff warning on, and man -l shows them. */
static void test_man_renders(void)
{
    const char *pages[] = {"sim/man/allocsim.1", "sim/man/allocsim-replay.1"};
    int have_groff = sh("command -v groff") == 0, have_man = sh("command -v man") == 0;
    if (!have_groff)
        fprintf(stderr, "\n  [groff not installed: the warning check is skipped]\n");
    for (int i = 0; i < 2; i++) {
        char page[512];
        snprintf(page, sizeof page, "%s", tu_path(pages[i]));
        if (have_groff) {
            CU_ASSERT_EQUAL(sh("groff -ww -z -man '%s'", page), 0);
            if (err[0])
                fprintf(stderr, "\n  %s: %s", pages[i], err);
            CU_ASSERT_STRING_EQUAL(err, "");
        }
        if (have_man) {
            CU_ASSERT_EQUAL(sh("MANWIDTH=80 man --warnings -l '%s'", page), 0);
            if (err[0])
                fprintf(stderr, "\n  %s: %s", pages[i], err);
            CU_ASSERT_STRING_EQUAL(err, "");
            CU_ASSERT_PTR_NOT_NULL(strstr(out, "NAME"));
            CU_ASSERT_PTR_NOT_NULL(strstr(out, "SYNOPSIS"));
        }
    }
}

/* ---- bash completion ---------------------------------------------------------------------- */

/* The completion's answer for the command line `line` (cursor at its end), as a wset. */
static int complete(const char *prog, const char *line, wset *w)
{
    memset(w, 0, sizeof *w);
    int rc = sh("bash -c 'source \"$1\"; COMP_LINE=\"$2\"; COMP_POINT=${#COMP_LINE}; "
                "read -ra COMP_WORDS <<<\"$COMP_LINE\"; _allocsim; "
                "printf \"%%s\\n\" \"${COMPREPLY[@]}\"' _ '%s' '%s %s'",
                tu_path("sim/completion/allocsim.bash"), prog, line);
    for (const char *p = out; *p;) {
        size_t l = strcspn(p, "\n");
        if (l)
            add(w, p, l);
        p += l + (p[l] != 0);
    }
    return rc;
}

static void expect_completion(const char *line, const wset *want, int exact)
{
    wset got;
    CU_ASSERT_EQUAL(complete(tu_allocsim(), line, &got), 0);
    char where[200];
    snprintf(where, sizeof where, "the completion of '%s'", line);
    int ok = subset(want, &got, "expected", where);
    if (exact)
        ok &= subset(&got, want, "completed", "what was expected");
    CU_ASSERT(ok);
}

static void test_completion(void)
{
    if (sh("command -v bash") != 0) {
        fprintf(stderr, "\n  [bash not installed: the completion is not checked]\n");
        return;
    }
    wset cmds = {{0}}, w;
    CU_ASSERT_EQUAL(sh("'%s' --help", tu_allocsim()), 0);
    listed(out, "commands:", &cmds);
    expect_completion("", &cmds, 1);
    /* Every option each command's help defines. */
    for (const char *p = cmds.s + 1; *p;) {
        size_t l = strcspn(p, "\n");
        char cmd[64], line[80];
        snprintf(cmd, sizeof cmd, "%.*s", (int)l, p);
        p += l + 1;
        wset h = {{0}};
        sh("'%s' %s --help", tu_allocsim(), cmd);
        help_opts(out, &h);
        snprintf(line, sizeof line, "%s -", cmd);
        expect_completion(line, &h, 1);
    }
    /* Policies and, for each, its knobs by name and alias; bool and enum values. */
    size_t np;
    const as_policy *const *l = as_policy_list(&np);
    wset pol = {{0}};
    for (size_t i = 0; i < np; i++) {
        add(&pol, l[i]->name, strlen(l[i]->name));
        wset knobs = {{0}};
        char line[300], word[200];
        for (size_t k = 0; k < l[i]->n_knobs; k++) {
            const as_knob *kb = &l[i]->knobs[k];
            add(&knobs, word, (size_t)snprintf(word, sizeof word, "%s,%s=", l[i]->name, kb->name));
            if (kb->alias)
                add(&knobs, word,
                    (size_t)snprintf(word, sizeof word, "%s,%s:", l[i]->name, kb->alias));
            if (kb->type != AS_KNOB_BOOL && kb->type != AS_KNOB_ENUM)
                continue;
            wset vals = {{0}};
            const char *c = kb->type == AS_KNOB_BOOL ? "true|false" : kb->choices;
            for (const char *q = c; *q;) {
                size_t n = strcspn(q, "|");
                add(&vals, q, n); /* readline completes after the '=' */
                q += n + (q[n] == '|');
            }
            snprintf(line, sizeof line, "-p %s,%s=", l[i]->name, kb->name);
            expect_completion(line, &vals, 1);
        }
        snprintf(line, sizeof line, "-p %s,", l[i]->name);
        expect_completion(line, &knobs, 1);
    }
    expect_completion("-p ", &pol, 0);
    expect_completion("policies ", &pol, 1);
    memset(&w, 0, sizeof w);
    add(&w, "table", 5);
    add(&w, "csv", 3);
    add(&w, "json", 4);
    add(&w, "jsonl", 5);
    expect_completion("run -f ", &w, 1);
    memset(&w, 0, sizeof w);
    add(&w, "text", 4);
    add(&w, "json", 4);
    expect_completion("check -f ", &w, 1);
    /* Card presets for -c and tune --device, outside presets for --outside, from the
     * table in sim/cards.c. */
    wset cards = {{0}}, outs = {{0}};
    size_t nc, no;
    const as_card *cl = as_card_list(&nc);
    const as_outside *ol = as_outside_list(&no);
    for (size_t i = 0; i < nc; i++)
        add(&cards, cl[i].name, strlen(cl[i].name));
    for (size_t i = 0; i < no; i++)
        add(&outs, ol[i].name, strlen(ol[i].name));
    CU_ASSERT(nc > 5 && no > 3);
    expect_completion("tune --device ", &cards, 1);
    expect_completion("tune --outside ", &outs, 1);
    add(&cards, "none", 4);
    expect_completion("-c ", &cards, 1);
    wset kinds = {{0}}, gens = {{0}};
    sh("'%s' plot --help", tu_allocsim());
    listed(out, "KIND", &kinds);
    CU_ASSERT(has(&kinds, "timeline"));
    expect_completion("plot -p torch ", &kinds, 1);
    sh("'%s' gen --help", tu_allocsim());
    listed(out, "generators", &gens);
    CU_ASSERT(has(&gens, "random"));
    expect_completion("gen ", &gens, 1);
}

/* ---- make install / uninstall --------------------------------------------------------------- */

static const char *build_dir(void)
{
    const char *b = getenv("AS_BUILD");
    return b && *b ? b : "build";
}

/* `make TARGET ARGS` in the source tree, outside the make that runs the suite. */
static int make(const char *target, const char *args)
{
    return sh("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C '%s' BUILD='%s' %s %s",
              tu_path(""), build_dir(), target, args);
}

static int files_under(const char *dir)
{
    sh("find '%s' -type f -o -type l -o -name '*allocsim*'", dir);
    if (out[0])
        fprintf(stderr, "\n  left under %s:\n%s", dir, out);
    return out[0] != 0;
}

static void test_install_uninstall(void)
{
    char prefix[600], args[700], f[800];
    snprintf(prefix, sizeof prefix, "%s/prefix", tu_tmpdir());
    snprintf(args, sizeof args, "PREFIX='%s'", prefix);
    int replay = replay_bin() != NULL;
    CU_ASSERT_EQUAL_FATAL(make("install", args), 0);
    const char *want[] = {"bin/allocsim", "share/man/man1/allocsim.1",
                          "share/bash-completion/completions/allocsim",
                          "share/allocsim/plots/common.gp", "share/allocsim/plots/timeline.gp"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        snprintf(f, sizeof f, "%s/%s", prefix, want[i]);
        CU_ASSERT_EQUAL(access(f, R_OK), 0);
    }
    const char *with_replay[] = {"bin/allocsim-replay", "share/man/man1/allocsim-replay.1",
                                 "share/bash-completion/completions/allocsim-replay"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(f, sizeof f, "%s/%s", prefix, with_replay[i]);
        CU_ASSERT_EQUAL(access(f, R_OK) == 0, replay);
    }
    CU_ASSERT_EQUAL(sh("'%s/bin/allocsim' --version", prefix), 0);
    /* The release build is what is installed (make asan's suite runs another binary). */
    char built[700];
    snprintf(built, sizeof built, "%s/allocsim",
             build_dir()[0] == '/' ? build_dir() : tu_path(build_dir()));
    CU_ASSERT_EQUAL(sh("cmp '%s/bin/allocsim' '%s'", prefix, built), 0);
    /* A static build's plug-in runs go to libexec/allocsim-dynamic (sim/cli/main.c): the
     * dynamic loader's own refusal shows the installed one was reached. */
    snprintf(f, sizeof f, "%s-dynamic", built);
    if (access(f, X_OK) == 0) {
        snprintf(f, sizeof f, "%s/libexec/allocsim-dynamic", prefix);
        CU_ASSERT_EQUAL(access(f, X_OK), 0);
        CU_ASSERT_EQUAL(sh("'%s/bin/allocsim' -p plugin:./no-such.so '%s'", prefix,
                           tu_path("traces/samples/handwritten.txt")),
                        2);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot load it as a shared object"));
    }
    if (sh("command -v man") == 0) { /* man finds the page where it was put */
        CU_ASSERT_EQUAL(sh("MANPATH='%s/share/man' man -w allocsim", prefix), 0);
        CU_ASSERT_EQUAL(strncmp(out, prefix, strlen(prefix)), 0);
    }
    CU_ASSERT_EQUAL(make("uninstall", args), 0);
    CU_ASSERT_EQUAL(files_under(prefix), 0);

    /* DESTDIR stages the same tree under another root. */
    snprintf(args, sizeof args, "DESTDIR='%s/stage' PREFIX=/usr", tu_tmpdir());
    CU_ASSERT_EQUAL_FATAL(make("install", args), 0);
    snprintf(f, sizeof f, "%s/stage/usr/bin/allocsim", tu_tmpdir());
    CU_ASSERT_EQUAL(access(f, X_OK), 0);
    CU_ASSERT_EQUAL(make("uninstall", args), 0);
    snprintf(f, sizeof f, "%s/stage", tu_tmpdir());
    CU_ASSERT_EQUAL(files_under(f), 0);
    sh("rm -rf '%s' '%s'", prefix, f);
}

CU_TestInfo test_install[] = {
    {"--version and -V: allocsim and zstd versions", test_version},
    {"allocsim-replay without the CUDA driver: message, exit 1", test_replay_without_driver},
    {"allocsim(1) lists what the help lists, and no more", test_man_agrees_with_help},
    {"allocsim-replay(1) lists what its help lists", test_replay_man_agrees_with_help},
    {"man pages render without warnings", test_man_renders},
    {"bash completion: commands, options, policies, knobs, values", test_completion},
    {"make install and uninstall, PREFIX and DESTDIR", test_install_uninstall},
    CU_TEST_INFO_NULL,
};
