/*
 * test_outputs.c - no output ever overwrites an input or destroys a file (issue 12): an
 * output naming an input is a usage error before any work and the input is unchanged;
 * outputs are renamed into place whole, so a failure or a kill leaves the old file
 * byte-identical and two writers never mix rows; every write to standard output is
 * checked (> /dev/full exits 1). Runs build/allocsim ($AS_ALLOCSIM) through /bin/sh.
 */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define CAP 65536

static char out[CAP], err[CAP];

/* Runs a shell command line in which "@" stands for the allocsim binary, stdout and
 * stderr captured in out and err. Returns the exit status or -1. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int sh(const char *fmt, ...)
{
    char line[4096], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t k = 0;
    for (const char *s = line; *s && k + 1024 < sizeof cmd; s++) {
        if (*s == '@')
            k += (size_t)snprintf(cmd + k, sizeof cmd - k, "'%s'", tu_allocsim());
        else
            cmd[k++] = *s;
    }
    cmd[k] = 0;
    return tu_run_sh(cmd, out, CAP, err, CAP);
}

/* A fresh directory of the test's own, to see every file a command leaves. */
static const char *fresh_dir(char *buf, size_t n)
{
    snprintf(buf, n, "%s/outputs-XXXXXX", tu_tmpdir());
    return mkdtemp(buf);
}

/* Names in dir, ignoring those in keep (NULL-terminated); 0 when there are none. */
static int stray_files(const char *dir, const char *const *keep)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    if (!d)
        return -1;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        int kept = 0;
        for (const char *const *k = keep; *k; k++)
            kept |= !strcmp(de->d_name, *k);
        if (!kept) {
            fprintf(stderr, "\n  stray file %s/%s\n", dir, de->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

/* 1 when path holds exactly the n bytes of want. */
static int same_bytes(const char *path, const char *want, size_t n)
{
    size_t len = 0;
    char *b = tu_slurp(path, &len);
    int same = b && len == n && memcmp(b, want, n) == 0;
    free(b);
    return same;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static const char trace_txt[] = "allocsim-text 1\n"
                                "alloc 0 1M\n"
                                "alloc 1 3M\n"
                                "free 0\n"
                                "free 1\n";

/* Every output option aimed at the input: exit 2 before any work, the input unchanged. */
static void test_output_is_input(void)
{
    char d[1024], t[1200], z[1200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh_dir(d, sizeof d));
    snprintf(t, sizeof t, "%s/t.txt", d);
    snprintf(z, sizeof z, "%s/r.zst", d);
    put(t, trace_txt);
    CU_ASSERT_EQUAL_FATAL(sh("@ convert '%s' '%s'", t, z), 0);
    size_t zlen = 0;
    char *zb = tu_slurp(z, &zlen);
    CU_ASSERT_FATAL(zb && zlen > 16);

    CU_ASSERT_EQUAL(sh("@ -p bestfit -o '%s' '%s'", t, t), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "refusing to overwrite"));
    CU_ASSERT(same_bytes(t, trace_txt, strlen(trace_txt)));
    CU_ASSERT_EQUAL(sh("@ -p bestfit --segments '%s' '%s'", z, z), 2);
    CU_ASSERT(same_bytes(z, zb, zlen));
    CU_ASSERT_EQUAL(sh("@ -p bestfit --timeline '%s' '%s' '%s'", t, z, t), 2);
    CU_ASSERT_EQUAL(sh("@ -p bestfit --segment-map '%s' '%s'", z, z), 2);
    CU_ASSERT(same_bytes(z, zb, zlen));
    /* The same file by another name (a hard link) is still the input. */
    char ln[1300];
    snprintf(ln, sizeof ln, "%s/link.txt", d);
    CU_ASSERT_EQUAL_FATAL(link(t, ln), 0);
    CU_ASSERT_EQUAL(sh("@ -p bestfit -o '%s' '%s'", ln, t), 2);
    CU_ASSERT(same_bytes(t, trace_txt, strlen(trace_txt)));
    unlink(ln);
    /* Standard output that is the input (>> keeps its bytes for the check). */
    CU_ASSERT_EQUAL(sh("@ -p bestfit '%s' >> '%s'", t, t), 2);
    CU_ASSERT(same_bytes(t, trace_txt, strlen(trace_txt)));
    CU_ASSERT_EQUAL(sh("@ mincap -p bestfit --csv '%s' '%s'", t, t), 2);
    CU_ASSERT(same_bytes(t, trace_txt, strlen(trace_txt)));
    /* convert from standard input onto the file that standard input is. */
    CU_ASSERT_EQUAL(sh("@ convert - '%s' < '%s'", z, z), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "standard input"));
    CU_ASSERT(same_bytes(z, zb, zlen));
    CU_ASSERT_EQUAL(sh("@ convert '%s' '%s'", z, z), 2);
    CU_ASSERT(same_bytes(z, zb, zlen));
    /* Two outputs on one file would lose one of them. */
    char c[1300];
    snprintf(c, sizeof c, "%s/c.csv", d);
    CU_ASSERT_EQUAL(sh("@ -p bestfit --timeline '%s' --segments '%s' '%s'", c, c, t), 2);
    const char *keep[] = {"t.txt", "r.zst", NULL};
    CU_ASSERT_EQUAL(stray_files(d, keep), 0);
    free(zb);
}

/* A failing command leaves every old output as it was, and no temporary file. */
static void test_failure_keeps_old_file(void)
{
    char d[1024], bad[1200], o[1200], tl[1200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh_dir(d, sizeof d));
    snprintf(bad, sizeof bad, "%s/bad.txt", d);
    snprintf(o, sizeof o, "%s/old.zst", d);
    snprintf(tl, sizeof tl, "%s/tl.csv", d);
    /* A free of an id never allocated on line 4: two events convert, then it fails. */
    put(bad, "allocsim-text 1\nalloc 0 1M\nfree 0\nfree 7\n");
    const char old[] = "the old file, which no failure may touch\n";
    put(o, old);
    put(tl, old);
    CU_ASSERT_EQUAL(sh("@ convert '%s' '%s'", bad, o), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 4"));
    CU_ASSERT(same_bytes(o, old, strlen(old)));
    CU_ASSERT_EQUAL(sh("@ -p bestfit --timeline '%s' '%s'", tl, bad), 1);
    CU_ASSERT(same_bytes(tl, old, strlen(old)));
    const char *keep[] = {"bad.txt", "old.zst", "tl.csv", NULL};
    CU_ASSERT_EQUAL(stray_files(d, keep), 0);
    /* An unwritable -o is found before the simulation: nothing runs, exit 1. */
    CU_ASSERT_EQUAL(sh("@ -p bestfit -o /nonexistent/dir/r.txt '%s'", bad), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent/dir/r.txt: cannot create"));
    CU_ASSERT_PTR_NULL(strstr(err, "line 4")); /* the trace was never read */
    /* A successful run replaces the file whole, with its old permissions. */
    chmod(tl, 0640);
    put(bad, trace_txt);
    CU_ASSERT_EQUAL(sh("@ -p bestfit --timeline '%s' '%s'", tl, bad), 0);
    size_t n = 0;
    char *b = tu_slurp(tl, &n);
    CU_ASSERT(b && !strncmp(b, "run,event,alloc,", 16));
    free(b);
    struct stat st;
    CU_ASSERT(stat(tl, &st) == 0 && (st.st_mode & 0777) == 0640);
    CU_ASSERT_EQUAL(stray_files(d, keep), 0);
}

/* Spawns `allocsim convert IN OUT` with IN a FIFO fed half of a trace, waits until the
 * conversion is under way, then kills it with sig. Returns the exit status (128 + sig
 * for a signal death, as the shell reports it). */
static int convert_killed(const char *fifo, const char *outp, const char *text, int sig)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl(tu_allocsim(), tu_allocsim(), "convert", fifo, outp, (char *)NULL);
        _exit(127);
    }
    int fd = open(fifo, O_WRONLY); /* blocks until the converter opened it */
    size_t half = strlen(text) / 2;
    if (fd >= 0)
        (void)!write(fd, text, half);
    struct timespec ts = {0, 200 * 1000 * 1000}; /* it reads, decodes, writes a little */
    nanosleep(&ts, NULL);
    kill(pid, sig);
    int st = 0;
    waitpid(pid, &st, 0);
    if (fd >= 0)
        close(fd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* convert killed halfway (SIGKILL: no handler runs; SIGTERM: the handler cleans up)
 * leaves the old OUT byte-identical. */
static void test_convert_killed(void)
{
    char d[1024], fifo[1200], o[1200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh_dir(d, sizeof d));
    snprintf(fifo, sizeof fifo, "%s/in.fifo", d);
    snprintf(o, sizeof o, "%s/out.zst", d);
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    /* 20,000 events of text: the first half is decoded and written before the kill. */
    size_t cap = 1 << 20, k = 0;
    char *text = malloc(cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    k += (size_t)snprintf(text + k, cap - k, "allocsim-text 1\n");
    for (int i = 0; i < 10000; i++)
        k += (size_t)snprintf(text + k, cap - k, "alloc %d 4096\nfree %d\n", i, i);
    const char old[] = "an old OUT\n";
    put(o, old);
    signal(SIGPIPE, SIG_IGN);
    CU_ASSERT_EQUAL(convert_killed(fifo, o, text, SIGKILL), 128 + SIGKILL);
    CU_ASSERT(same_bytes(o, old, strlen(old)));
    CU_ASSERT_EQUAL(convert_killed(fifo, o, text, SIGTERM), 130);
    CU_ASSERT(same_bytes(o, old, strlen(old)));
    /* SIGKILL cannot be caught: its hidden temporary file (.tmp-*-out.zst) may stay; the
     * SIGTERM run removed its own. Only the kill's leftover is allowed. */
    DIR *dd = opendir(d);
    struct dirent *de;
    int others = 0;
    while (dd && (de = readdir(dd)))
        if (de->d_name[0] != '.' && strcmp(de->d_name, "in.fifo") && strcmp(de->d_name, "out.zst"))
            others++;
    if (dd)
        closedir(dd);
    CU_ASSERT_EQUAL(others, 0);
    signal(SIGPIPE, SIG_DFL);
    free(text);
}

/* Standard output is checked at exit by every command. */
static void test_stdout_full(void)
{
    char d[1024], t[1200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh_dir(d, sizeof d));
    snprintf(t, sizeof t, "%s/t.txt", d);
    put(t, trace_txt);
    const char *cmds[] = {"--help",        "policies",          "run --help",
                          "-p bestfit",    "mincap -p bestfit", "info",
                          "convert '%s' -"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[2600];
        if (strstr(cmds[i], "%s"))
            snprintf(args, sizeof args, "convert '%s' -", t);
        else if (strstr(cmds[i], "help") || !strcmp(cmds[i], "policies"))
            snprintf(args, sizeof args, "%s", cmds[i]);
        else
            snprintf(args, sizeof args, "%s '%s'", cmds[i], t);
        CU_ASSERT_EQUAL(sh("@ %s > /dev/full", args), 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "write failed"));
        if (!strstr(err, "write failed"))
            fprintf(stderr, "\n  %s > /dev/full: %s\n", args, err);
    }
}

/* Runs allocsim with argv (NULL-terminated) and standard output a pipe whose reader has
 * gone, standard error thrown away; the wait status. */
static int run_reader_gone(char *const argv[])
{
    int pfd[2];
    if (pipe(pfd))
        return -1;
    close(pfd[0]);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL); /* an ignored signal stays ignored across exec */
        int dn = open("/dev/null", O_WRONLY);
        dup2(pfd[1], 1);
        dup2(dn, 2);
        execv(tu_allocsim(), argv);
        _exit(127);
    }
    close(pfd[1]);
    int st = -1;
    if (pid > 0)
        waitpid(pid, &st, 0);
    return st;
}

/* Standard output's reader gone (`allocsim run --timeline F T | head`), and a file size
 * limit (ulimit -f): the command dies of SIGPIPE as before, or reports the write that
 * failed (EFBIG) and exits 1; either way the old outputs stay byte-identical and no
 * temporary file is left (both signals' defaults killed it with its .tmp-* files there). */
static void test_reader_gone_and_fsize(void)
{
    char d[1024], t[1200], big[1200], tl[1200], csv[1200], conv[1200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh_dir(d, sizeof d));
    snprintf(t, sizeof t, "%s/t.txt", d);
    snprintf(big, sizeof big, "%s/big.txt", d);
    snprintf(tl, sizeof tl, "%s/tl.csv", d);
    snprintf(csv, sizeof csv, "%s/sweep.csv", d);
    snprintf(conv, sizeof conv, "%s/conv.txt", d);
    put(t, trace_txt);
    put(tl, "old timeline\n");
    put(csv, "old sweep\n");
    put(conv, "old conversion\n");
    char *run[] = {"allocsim", "-p", "bestfit", "--timeline", tl, t, NULL};
    char *mincap[] = {"allocsim", "mincap", "-p", "bestfit", "-p",
                      "firstfit", "--csv",  csv,  t,         NULL};
    int st = run_reader_gone(run);
    CU_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE);
    st = run_reader_gone(mincap);
    CU_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE);
    FILE *f = fopen(big, "w"); /* 200 events: its text is past ulimit -f 1 (512 bytes) */
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("allocsim-text 1\n", f);
    for (int i = 0; i < 100; i++)
        fprintf(f, "alloc %d 4096\nfree %d\n", i, i);
    fclose(f);
    CU_ASSERT_EQUAL(sh("ulimit -f 1; @ convert '%s' '%s' --text", big, conv), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "conv.txt"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "File too large"));
    CU_ASSERT_EQUAL(
        sh("ulimit -f 1; @ -p bestfit --timeline '%s' --timeline-every 1 '%s' >/dev/null", tl, big),
        1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "tl.csv"));
    CU_ASSERT(same_bytes(tl, "old timeline\n", 13));
    CU_ASSERT(same_bytes(csv, "old sweep\n", 10));
    CU_ASSERT(same_bytes(conv, "old conversion\n", 15));
    const char *keep[] = {"t.txt", "big.txt", "tl.csv", "sweep.csv", "conv.txt", NULL};
    CU_ASSERT_EQUAL(stray_files(d, keep), 0);
}

/* Two runs writing the same --timeline at once: the file is one of them, whole. */
static void test_two_writers(void)
{
    char d[1024], t[1200], tl[1200], a[1200], b[1200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh_dir(d, sizeof d));
    snprintf(t, sizeof t, "%s/t.zst", d);
    snprintf(tl, sizeof tl, "%s/tl.csv", d);
    snprintf(a, sizeof a, "%s/a.csv", d);
    snprintf(b, sizeof b, "%s/b.csv", d);
    CU_ASSERT_EQUAL_FATAL(sh("@ gen transformer -o '%s'", t), 0);
    CU_ASSERT_EQUAL_FATAL(sh("@ -q -p bestfit --timeline-every 7 --timeline '%s' '%s'", a, t), 0);
    CU_ASSERT_EQUAL_FATAL(sh("@ -q -p firstfit --timeline-every 5 --timeline '%s' '%s'", b, t), 0);
    for (int round = 0; round < 3; round++) {
        CU_ASSERT_EQUAL(sh("@ -q -p bestfit --timeline-every 7 --timeline '%s' '%s' > /dev/null & "
                           "@ -q -p firstfit --timeline-every 5 --timeline '%s' '%s' > /dev/null; "
                           "wait",
                           tl, t, tl, t),
                        0);
        size_t na = 0, nb = 0, nt = 0;
        char *xa = tu_slurp(a, &na), *xb = tu_slurp(b, &nb), *xt = tu_slurp(tl, &nt);
        CU_ASSERT(xa && xb && xt);
        if (xa && xb && xt)
            CU_ASSERT((nt == na && !memcmp(xt, xa, na)) || (nt == nb && !memcmp(xt, xb, nb)));
        free(xa);
        free(xb);
        free(xt);
    }
    const char *keep[] = {"t.zst", "tl.csv", "a.csv", "b.csv", NULL};
    CU_ASSERT_EQUAL(stray_files(d, keep), 0);
}

/* Size of the one hidden temporary file (.tmp-*) in dir, -1 while there is none. */
static long tmp_size(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    long size = -1;
    while (d && (de = readdir(d))) {
        size_t n = strlen(de->d_name), k = strlen(suffix);
        if (!strncmp(de->d_name, ".tmp-", 5) && n > k && !strcmp(de->d_name + n - k, suffix)) {
            char p[2048];
            struct stat st;
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            if (stat(p, &st) == 0)
                size = (long)st.st_size;
        }
    }
    if (d)
        closedir(d);
    return size;
}

/* Every line of a CSV ends with a newline and has `fields` fields; returns the rows after
 * the header, -1 if any line is malformed. Run numbers (field 0) must be < max_run. */
static long csv_rows(const char *path, int fields, long max_run)
{
    size_t n = 0;
    char *b = tu_slurp(path, &n);
    long rows = -1;
    if (!b || n == 0 || b[n - 1] != '\n')
        goto out;
    rows = 0;
    for (char *line = b, *nl; (nl = strchr(line, '\n')); line = nl + 1, rows++) {
        int f = 1;
        for (char *c = line; c < nl; c++)
            f += *c == ',';
        if (f != fields || (rows > 0 && max_run >= 0 && strtol(line, NULL, 10) >= max_run)) {
            fprintf(stderr, "\n  %s: bad line %ld: %.*s\n", path, rows, (int)(nl - line), line);
            rows = -1;
            goto out;
        }
    }
    rows--; /* the header */
out:
    free(b);
    return rows;
}

/* SIGINT to a running sweep (once a group of runs has finished: the temporary timeline
 * file has rows): exit 130, a well-formed report and timeline holding the runs that
 * finished, a message, and no temporary file anywhere. */
static void test_sigint_sweep(void)
{
    char d[1024], rep[1200], tl[1200], errp[1200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh_dir(d, sizeof d));
    snprintf(rep, sizeof rep, "%s/rep.csv", d);
    snprintf(tl, sizeof tl, "%s/tl.csv", d);
    snprintf(errp, sizeof errp, "%s/err.txt", d);
    const char *trace = tu_path("traces/samples/transformer_gpt2.zst");
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        execl(tu_allocsim(), tu_allocsim(), "-q", "-f", "csv", "-o", rep, "--timeline", tl, "-c",
              "32G..45G/8M", trace, (char *)NULL);
        _exit(127);
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    for (int i = 0; i < 3000 && tmp_size(d, "tl.csv") <= 0; i++)
        nanosleep(&ts, NULL);
    CU_ASSERT(tmp_size(d, "tl.csv") > 0); /* a group's rows are in: the sweep is under way */
    kill(pid, SIGINT);
    int st = 0;
    waitpid(pid, &st, 0);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 130);
    size_t n = 0;
    char *e = tu_slurp(errp, &n);
    CU_ASSERT(e && strstr(e, "interrupted: ") && strstr(e, " of 1665 runs had finished"));
    long runs =
        e && strstr(e, "interrupted: ") ? strtol(strstr(e, "interrupted: ") + 13, NULL, 10) : -1;
    free(e);
    CU_ASSERT(runs > 0 && runs < 1665);
    /* The report: a header and one complete row per finished run; the timeline's rows all
     * belong to those runs. */
    size_t hn = 0;
    char *h = tu_slurp(rep, &hn);
    int fields = 1;
    for (char *c = h; c && *c && *c != '\n'; c++)
        fields += *c == ',';
    free(h);
    CU_ASSERT_EQUAL(csv_rows(rep, fields, runs), runs);
    CU_ASSERT(csv_rows(tl, 7, runs) > runs);
    unlink(errp);
    const char *keep[] = {"rep.csv", "tl.csv", NULL};
    CU_ASSERT_EQUAL(stray_files(d, keep), 0);
    /* allocsim's own temporary files (mincap's spool, plot's) would be in TMPDIR
     * (tu_tmpdir): none either. */
    DIR *t = opendir(tu_tmpdir());
    struct dirent *de;
    int strays = 0;
    while (t && (de = readdir(t))) {
        if (!strncmp(de->d_name, "allocsim-mincap-", 16) ||
            !strncmp(de->d_name, "allocsim-plot-", 14) ||
            !strncmp(de->d_name, "allocsim-gnuplot-", 17)) {
            fprintf(stderr, "\n  stray %s/%s\n", tu_tmpdir(), de->d_name);
            strays++;
        }
    }
    if (t)
        closedir(t);
    CU_ASSERT_EQUAL(strays, 0);
}


/* SIGINT to mincap once its first policy is answered (on stdout, flushed per policy): exit
 * 130, that answer kept in stdout and in --csv, the second policy's search dropped whole,
 * no temporary file (its native spool of a text trace included). */
static void test_sigint_mincap(void)
{
    char d[1024], o[1200], csv[1200], errp[1200], txt[1200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh_dir(d, sizeof d));
    snprintf(o, sizeof o, "%s/out.txt", d);
    snprintf(csv, sizeof csv, "%s/sweep.csv", d);
    snprintf(errp, sizeof errp, "%s/err.txt", d);
    snprintf(txt, sizeof txt, "%s/t.txt", d); /* text: mincap spools it to a native file */
    /* The sample 8 times over, so that the second search lasts well past the polling below
     * (once itself, torch's took 0.06 s: on a loaded machine it could end before the
     * signal came, and mincap then finished with 0). */
    CU_ASSERT_EQUAL_FATAL(
        sh("@ convert --repeat 8 '%s' '%s'", tu_path("traces/samples/transformer_gpt2.zst"), txt),
        0);
    pid_t pid = fork();
    if (pid == 0) {
        int fo = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fo, 1);
        dup2(fe, 2);
        execl(tu_allocsim(), tu_allocsim(), "mincap", "-p", "nocache", "-p", "torch", "--step",
              "4M", "--csv", csv, txt, (char *)NULL);
        _exit(127);
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    size_t n = 0;
    char *b = NULL;
    for (int i = 0; i < 6000; i++) {
        free(b);
        b = tu_file_size(o) > 0 ? tu_slurp(o, &n) : NULL;
        if (b && strstr(b, "swept")) /* the last line of a policy's answer */
            break;
        nanosleep(&ts, NULL);
    }
    free(b);
    kill(pid, SIGINT);
    int st = 0;
    waitpid(pid, &st, 0);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 130);
    b = tu_slurp(o, &n);
    CU_ASSERT(b && strstr(b, "policy nocache") && !strstr(b, "policy torch"));
    free(b);
    b = tu_slurp(errp, &n);
    CU_ASSERT(b && strstr(b, "interrupted: 1 of 2 policies searched"));
    free(b);
    b = tu_slurp(csv, &n);
    CU_ASSERT(b && strstr(b, ",nocache,") && !strstr(b, ",torch,"));
    CU_ASSERT(b && n && b[n - 1] == '\n');
    free(b);
    unlink(errp);
    const char *keep[] = {"out.txt", "sweep.csv", "t.txt", NULL};
    CU_ASSERT_EQUAL(stray_files(d, keep), 0);
    DIR *t = opendir(tu_tmpdir());
    struct dirent *de;
    int strays = 0;
    while (t && (de = readdir(t)))
        strays += !strncmp(de->d_name, "allocsim-mincap-", 16);
    if (t)
        closedir(t);
    CU_ASSERT_EQUAL(strays, 0);
}

/* Input bytes reach the terminal escaped: a file name and metadata holding ESC, BEL, a C1
 * control in UTF-8 and a byte that is not UTF-8, in a message and in `info`; valid UTF-8
 * (é) stays as it is; the run table's trace line as well. */
static void test_terminal_safe(void)
{
    char d[1024], t[1200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh_dir(d, sizeof d));
    snprintf(t, sizeof t, "%s/x\033[31m.txt", d);
    put(t, "allocsim-text 1\nmeta title=\033]0;pwned\007 \xc2\x9b"
           "2J \xff \xc3\xa9\n"
           "alloc 0 1M\nfree 0\n");
    CU_ASSERT_EQUAL(sh("@ info \"$(printf '%s/x\\033[31m.txt')\"", d), 0);
    CU_ASSERT_PTR_NULL(strchr(out, '\033'));
    CU_ASSERT_PTR_NULL(strchr(out, '\007'));
    CU_ASSERT_PTR_NULL(strstr(out, "\xc2\x9b"));
    CU_ASSERT_PTR_NULL(strchr(out, '\xff'));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "x\\x1b[31m.txt"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "title = \\x1b]0;pwned\\x07 \\xc2\\x9b2J \\xff \xc3\xa9"));
    /* The run table's trace line names the file too. */
    CU_ASSERT_EQUAL(sh("@ -p bestfit \"$(printf '%s/x\\033[31m.txt')\"", d), 0);
    CU_ASSERT_PTR_NULL(strchr(out, '\033'));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "x\\x1b[31m.txt: 2 events"));
    /* A message naming the file, and one quoting a bad line. */
    put(t, "allocsim-text 1\nalloc 0 1M\nfree \033]0;x\007\n");
    CU_ASSERT_EQUAL(sh("@ -p bestfit \"$(printf '%s/x\\033[31m.txt')\"", d), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "x\\x1b[31m.txt"));
    CU_ASSERT_PTR_NULL(strchr(err, '\033'));
    CU_ASSERT_PTR_NULL(strchr(err, '\007'));
    unlink(t);
}

/* Several traces, one bad: without --skip-bad every trace is decoded first and the bad one
 * stops the command (exit 1, old outputs kept); with it the good ones are reported, the bad
 * one named, exit 1. */
static void test_bad_among_several(void)
{
    char d[1024], g[1200], b[1200], r[1200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh_dir(d, sizeof d));
    snprintf(g, sizeof g, "%s/good.txt", d);
    snprintf(b, sizeof b, "%s/bad.txt", d);
    snprintf(r, sizeof r, "%s/r.csv", d);
    put(g, trace_txt);
    put(b, "allocsim-text 1\nalloc 0 1M\nfree 9\n");
    put(r, "old\n");
    CU_ASSERT_EQUAL(sh("@ -p bestfit -f csv -o '%s' '%s' '%s' '%s'", r, g, b, g), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "bad.txt: byte 27, line 3"));
    CU_ASSERT(same_bytes(r, "old\n", 4));
    CU_ASSERT_EQUAL(sh("@ -p bestfit -f csv --skip-bad -o '%s' '%s' '%s' '%s'", r, g, b, g), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "bad.txt: byte 27, line 3"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "1 of 3 traces could not be read"));
    size_t n = 0;
    char *rep = tu_slurp(r, &n);
    int good = 0, badn = 0;
    for (char *p = rep; p && (p = strstr(p, "good.txt")); p++)
        good++;
    for (char *p = rep; p && (p = strstr(p, "bad.txt")); p++)
        badn++;
    CU_ASSERT_EQUAL(good, 2); /* one run of each good trace */
    CU_ASSERT_EQUAL(badn, 0);
    free(rep);
}

/* Names in tu_tmpdir() starting with prefix. */
static int tmp_entries(const char *prefix)
{
    DIR *t = opendir(tu_tmpdir());
    struct dirent *de;
    int n = 0;
    while (t && (de = readdir(t)))
        n += !strncmp(de->d_name, prefix, strlen(prefix));
    if (t)
        closedir(t);
    return n;
}

/* Ctrl-C (SIGINT to the process group, as a terminal sends it) while `plot capacity` runs
 * its mincap: exit 130, no chart, and plot's directory of CSV files is gone. */
static void test_sigint_plot(void)
{
    char d[1024], png[1200], errp[1200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh_dir(d, sizeof d));
    snprintf(png, sizeof png, "%s/cap.png", d);
    snprintf(errp, sizeof errp, "%s/err.txt", d);
    int before = tmp_entries("allocsim-plot-");
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fe, 2);
        /* bfc reads its capacity at once (its preallocated fraction), so mincap runs it
         * one capacity per run, seconds of work; torch alone is one fast curve now, done
         * before the signal could come. */
        execl(tu_allocsim(), tu_allocsim(), "plot", "capacity", "-o", png, "-p", "torch", "-p",
              "bfc", tu_path("traces/samples/transformer_gpt2.zst"), (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    struct timespec ts = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 3000 && tmp_entries("allocsim-plot-") == before; i++)
        nanosleep(&ts, NULL);
    ts.tv_nsec = 300 * 1000 * 1000; /* the mincap run is under way */
    nanosleep(&ts, NULL);
    kill(-pid, SIGINT);
    int st = 0;
    waitpid(pid, &st, 0);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 130);
    size_t n = 0;
    char *e = tu_slurp(errp, &n);
    CU_ASSERT(e && strstr(e, "not written"));
    free(e);
    CU_ASSERT_EQUAL(tu_file_size(png), -1);
    CU_ASSERT_EQUAL(tmp_entries("allocsim-plot-"), before);
    CU_ASSERT_EQUAL(tmp_entries("allocsim-mincap-"), 0);
    unlink(errp);
    const char *keep[] = {NULL};
    CU_ASSERT_EQUAL(stray_files(d, keep), 0);
}

/* SIGINT before any run finished (a single run of 11.6 M events, interrupted as soon as
 * its outputs are open): exit 130, and the old -o and --timeline stay as they were. */
static void test_sigint_nothing_finished(void)
{
    char d[1024], t[1200], o[1200], tl[1200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(fresh_dir(d, sizeof d));
    snprintf(t, sizeof t, "%s/big.zst", d);
    snprintf(o, sizeof o, "%s/r.txt", d);
    snprintf(tl, sizeof tl, "%s/tl.csv", d);
    CU_ASSERT_EQUAL_FATAL(sh("@ gen transformer steps=4000 layers=48 -o '%s'", t), 0);
    put(o, "old report\n");
    put(tl, "old timeline\n");
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 2);
        execl(tu_allocsim(), tu_allocsim(), "-q", "-p", "bestfit", "-o", o, "--timeline", tl, t,
              (char *)NULL);
        _exit(127);
    }
    struct timespec ts = {0, 5 * 1000 * 1000};
    for (int i = 0; i < 2000 && tmp_size(d, "tl.csv") < 0; i++)
        nanosleep(&ts, NULL);
    kill(pid, SIGINT);
    int st = 0;
    waitpid(pid, &st, 0);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 130);
    CU_ASSERT(same_bytes(o, "old report\n", 11));
    CU_ASSERT(same_bytes(tl, "old timeline\n", 13));
    const char *keep[] = {"big.zst", "r.txt", "tl.csv", NULL};
    CU_ASSERT_EQUAL(stray_files(d, keep), 0);
}

CU_TestInfo test_outputs[] = {
    {"an output naming an input: exit 2, input unchanged", test_output_is_input},
    {"a failure keeps the old output, no temporary file", test_failure_keeps_old_file},
    {"convert killed halfway keeps the old OUT", test_convert_killed},
    {"stdout > /dev/full: exit 1 for every command", test_stdout_full},
    {"two writers of one --timeline never mix rows", test_two_writers},
    {"stdout's reader gone, ulimit -f: old outputs kept, no temp file", test_reader_gone_and_fsize},
    {"SIGINT to a sweep: 130, finished runs whole, no temp file", test_sigint_sweep},
    {"SIGINT to mincap: 130, answered policies kept, no spool", test_sigint_mincap},
    {"SIGINT before any run finished keeps the old outputs", test_sigint_nothing_finished},
    {"input bytes escaped in messages and info", test_terminal_safe},
    {"Ctrl-C to plot: 130, no chart, its temp dir gone", test_sigint_plot},
    {"a bad trace among several: stop first, or --skip-bad", test_bad_among_several},
    CU_TEST_INFO_NULL,
};
