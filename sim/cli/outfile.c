/*
 * outfile.c - atomic outputs, the temporary-file registry and the signal handlers
 * (outfile.h).
 *
 * Invariant: a target is only ever replaced by rename(2) of a complete, flushed and
 * fsync'd temporary file in its own directory; every temporary file is in the registry
 * from its creation until it is renamed or removed, so the signal handler (which uses
 * only unlink, rmdir and _exit: async-signal-safe) can remove it.
 */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define MAX_TMP 32

volatile sig_atomic_t as_out_stop;

static volatile sig_atomic_t graceful;
static char tmp_path[MAX_TMP][PATH_MAX];
static volatile sig_atomic_t tmp_used[MAX_TMP]; /* 1 file, 2 directory */

static void remove_all(void)
{
    for (int i = 0; i < MAX_TMP; i++) /* files first: a directory must be empty */
        if (tmp_used[i] == 1) {
            unlink(tmp_path[i]);
            tmp_used[i] = 0;
        }
    for (int i = 0; i < MAX_TMP; i++)
        if (tmp_used[i] == 2) {
            rmdir(tmp_path[i]);
            tmp_used[i] = 0;
        }
}

static void on_signal(int sig)
{
    if (graceful && !as_out_stop) {
        as_out_stop = sig;
        return;
    }
    remove_all();
    _exit(AS_EXIT_SIGNAL);
}

/* Standard output is a pipe whose reader has gone (`allocsim run --timeline F T | head`):
 * the temporary files go, and the process dies of the signal as it would have, once the
 * handler returns (the signal is blocked until then). */
static void on_sigpipe(int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    remove_all();
    sigaction(sig, &dfl, NULL);
    raise(sig);
}

void as_out_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_sigpipe;
    sigaction(SIGPIPE, &sa, NULL);
    /* Past a file size limit (ulimit -f) a write fails with EFBIG and the command reports
     * it and removes its temporary files, where the signal's default killed it and left
     * them. */
    signal(SIGXFSZ, SIG_IGN);
}

void as_out_graceful(int on)
{
    graceful = on;
}

int as_out_tmp_add(const char *path)
{
    struct stat st;
    int kind = stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 2 : 1;
    for (int i = 0; i < MAX_TMP; i++) {
        if (!tmp_used[i] && strlen(path) < PATH_MAX) {
            strcpy(tmp_path[i], path);
            tmp_used[i] = kind; /* last: the handler never sees a half-copied name */
            return i;
        }
    }
    return -1;
}

int as_out_mkstemps(char *tmpl, int suffix_len, int *slot)
{
    sigset_t hold, was;
    sigemptyset(&hold);
    sigaddset(&hold, SIGINT);
    sigaddset(&hold, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &hold, &was);
    int fd = mkstemps(tmpl, suffix_len), err = errno;
    *slot = fd >= 0 ? as_out_tmp_add(tmpl) : -1;
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    errno = err;
    return fd;
}

void as_out_tmp_del(int slot)
{
    if (slot >= 0 && slot < MAX_TMP)
        tmp_used[slot] = 0;
}

void as_out_cleanup(void)
{
    remove_all();
}

/* ---- atomic outputs ------------------------------------------------------------------- */

struct as_out {
    FILE *f;
    char *name;   /* as the user gave it */
    char *target; /* what rename replaces (a symbolic link's target) */
    char *tmp;    /* NULL when written directly */
    int slot;
    int is_stdout;
};

static mode_t new_file_mode(void)
{
    mode_t m = umask(0);
    umask(m);
    return 0666 & ~m;
}

/* tmp = "DIR/.tmp-XXXXXX-BASE" beside target: hidden, and ending as the target does, for
 * writers that pick a format from the name (gnuplot's terminal, .txt traces). */
static char *tmp_name(const char *target, int *suffix_len)
{
    const char *sl = strrchr(target, '/');
    size_t dlen = sl ? (size_t)(sl - target) + 1 : 0;
    const char *base = sl ? sl + 1 : target;
    size_t n = strlen(target) + 16;
    char *t = malloc(n);
    if (t)
        snprintf(t, n, "%.*s.tmp-XXXXXX-%s", (int)dlen, target, base);
    *suffix_len = (int)strlen(base) + 1;
    return t;
}

static int open_impl(const char *path, int named, as_out **out)
{
    *out = NULL;
    as_out *o = calloc(1, sizeof *o);
    if (!o)
        return as_cli_cannot_create(path ? path : "stdout", ENOMEM);
    o->slot = -1;
    if (!path || !strcmp(path, "-")) {
        o->is_stdout = 1;
        o->f = stdout;
        o->name = strdup("stdout");
        o->target = strdup("-");
        if (!o->name || !o->target)
            goto nomem;
        *out = o;
        return 0;
    }
    struct stat st;
    int exists = stat(path, &st) == 0, err;
    o->name = strdup(path);
    o->target = exists ? realpath(path, NULL) : strdup(path);
    if (!o->name || !o->target)
        goto nomem;
    if (exists && S_ISDIR(st.st_mode)) {
        err = EISDIR;
        goto fail;
    }
    if (exists && !S_ISREG(st.st_mode)) { /* a device or FIFO: nothing to replace */
        if (!named && !(o->f = fopen(path, "w"))) {
            err = errno;
            goto fail;
        }
        *out = o;
        return 0;
    }
    int suffix_len;
    if (!(o->tmp = tmp_name(o->target, &suffix_len)))
        goto nomem;
    int fd = as_out_mkstemps(o->tmp, suffix_len, &o->slot);
    if (fd < 0) {
        err = errno;
        free(o->tmp);
        o->tmp = NULL;
        goto fail;
    }
    fchmod(fd, exists ? st.st_mode & 07777 : new_file_mode());
    if (named) {
        close(fd);
    } else if (!(o->f = fdopen(fd, "w"))) {
        err = errno;
        close(fd);
        goto fail;
    }
    *out = o;
    return 0;
nomem:
    err = ENOMEM;
fail:
    as_cli_cannot_create(path, err);
    as_out_abort(o);
    return AS_EXIT_INPUT;
}

int as_out_open(const char *path, as_out **out)
{
    return open_impl(path, 0, out);
}

int as_out_open_named(const char *path, as_out **out)
{
    return open_impl(path, 1, out);
}

FILE *as_out_file(const as_out *o)
{
    return o->f;
}

const char *as_out_path(const as_out *o)
{
    return o->tmp ? o->tmp : o->target;
}

const char *as_out_name(const as_out *o)
{
    return o->name;
}

static void out_free(as_out *o)
{
    free(o->name);
    free(o->target);
    free(o->tmp);
    free(o);
}

void as_out_abort(as_out *o)
{
    if (!o)
        return;
    if (o->f && !o->is_stdout)
        fclose(o->f);
    if (o->tmp)
        unlink(o->tmp);
    as_out_tmp_del(o->slot);
    out_free(o);
}

/* fsync of the directory holding path, so the rename itself survives a crash. */
static void sync_dir(const char *path)
{
    const char *sl = strrchr(path, '/');
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", sl ? (int)(sl - path) + (sl == path) : 1, sl ? path : ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Flushes, syncs and closes the stream or the named file. 0 or an errno value. */
static int finish(as_out *o)
{
    int err = 0;
    if (o->f) {
        if (fflush(o->f) || ferror(o->f))
            err = errno ? errno : EIO;
        if (!err && o->tmp && fsync(fileno(o->f)))
            err = errno;
        if (!o->is_stdout && fclose(o->f) && !err)
            err = errno ? errno : EIO;
        o->f = NULL;
    } else if (o->tmp) {
        int fd = open(o->tmp, O_RDONLY);
        if (fd < 0 || fsync(fd))
            err = errno;
        if (fd >= 0)
            close(fd);
    }
    return err;
}

int as_out_commit(as_out *o, int ret)
{
    if (!o)
        return ret;
    if (ret) {
        as_out_abort(o);
        return ret;
    }
    errno = 0;
    int err = finish(o);
    if (!err && o->tmp && rename(o->tmp, o->target))
        err = errno;
    if (err) {
        as_cli_msg("%s: write failed: %s", o->name, strerror(err));
        as_out_abort(o);
        return AS_EXIT_INPUT;
    }
    if (o->tmp)
        sync_dir(o->target);
    as_out_tmp_del(o->slot);
    free(o->tmp);
    o->tmp = NULL;
    out_free(o);
    return AS_EXIT_OK;
}

/* ---- outputs against inputs ----------------------------------------------------------- */

/* stat of a path, or of stdin/stdout for "-". 0 when it names an existing regular file. */
static int reg_file(const char *p, int std_fd, struct stat *st)
{
    int rc = strcmp(p, "-") ? stat(p, st) : fstat(std_fd, st);
    return rc == 0 && S_ISREG(st->st_mode) ? 0 : -1;
}

static const char *shown(const char *p, const char *std_name)
{
    return strcmp(p, "-") ? p : std_name;
}

int as_out_check(const char *cmd, const char *const *outs, size_t nout, const char *const *ins,
                 size_t nin)
{
    struct stat so, si;
    for (size_t i = 0; i < nout; i++) {
        if (!outs[i])
            continue;
        int out_reg = reg_file(outs[i], STDOUT_FILENO, &so) == 0;
        for (size_t j = 0; out_reg && j < nin; j++) {
            if (ins[j] && reg_file(ins[j], STDIN_FILENO, &si) == 0 && si.st_dev == so.st_dev &&
                si.st_ino == so.st_ino)
                return as_cli_usage(cmd, "%s is the input %s: refusing to overwrite it",
                                    shown(outs[i], "standard output"),
                                    shown(ins[j], "(standard input)"));
        }
        for (size_t j = 0; j < i; j++) {
            if (!outs[j])
                continue;
            int same = !strcmp(outs[i], outs[j]);
            if (!same && out_reg && reg_file(outs[j], STDOUT_FILENO, &si) == 0)
                same = si.st_dev == so.st_dev && si.st_ino == so.st_ino;
            if (same)
                return as_cli_usage(cmd, "two outputs name the same file %s",
                                    shown(outs[i], "(standard output)"));
        }
    }
    return 0;
}
