/*
 * fuzz_cli.c - the allocsim command line, in-process: options, policy specs and capacities
 * from the fuzzer, run through as_cli_main (sim/commands.c), the same function main()
 * calls, over a small trace.
 *
 * Input: argv words, one per line, then an empty line, then the trace:
 *
 *     -p\nbestfit,round=512\n-c\n80M\n--timeline\ntl.csv\nt\n\nallocsim-text 1\nalloc 0 5\n
 *
 * The trace bytes go to the file `t` (any format: the reader detects it); a trace section
 * that starts with "gen " is a generator command line instead ("gen random events=50"),
 * run first as `allocsim gen ... -o t`. No trace section: a built-in one. argv[0] is
 * "allocsim"; argv[1] may name a subcommand, as on the real command line.
 *
 * Every call runs in a private temporary directory (cwd, TMPDIR), emptied after the call,
 * with standard input read from `t` and standard output and error thrown away (kept when
 * AS_FUZZ_CLI_SHOW is set, to see what a crash file does). A word
 * cannot name a file outside it: '/' becomes '_' except in a sweep "LO..HI/STEP".
 * Files are limited to 1 MiB (RLIMIT_FSIZE, SIGXFSZ ignored, so a big `gen` or report
 * meets a write error, which is a path worth fuzzing too); everything is restored after
 * the call, so the CUnit suite can replay the corpus in its own process.
 *
 * Oracles: the exit status is 0, 1 or 2; ASan/UBSan (and libFuzzer's leak check) do the
 * rest. The command must never exit: that would end the fuzzer, which reports it.
 */
#include "fuzz/fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define MAX_WORDS 32
#define MAX_WORD 256
#define FILE_LIMIT (1u << 20)

static const char default_trace[] = "allocsim-text 1\n"
                                    "meta source=fuzz-cli\n"
                                    "alloc 0 2M\n"
                                    "alloc 1 5M s=7\n"
                                    "mark step\n"
                                    "alloc 2 1536K\n"
                                    "free_req 1\n"
                                    "free 0\n"
                                    "alloc 3 12M\n"
                                    "free 1\n"
                                    "empty_cache\n"
                                    "free 2\n"
                                    "free 3\n";

static char dir[256]; /* the private directory, made once per process */

/* A word may not reach outside the directory: '/' only in "LO..HI/STEP" (one '/', after
 * "..", not after a '.', the word not starting with '/'), which is relative anyway. */
static void confine(char *w)
{
    char *slash = strchr(w, '/');
    if (!slash)
        return;
    char *dots = strstr(w, "..");
    int sweep = slash != w && slash[-1] != '.' && !strchr(slash + 1, '/') && dots && dots < slash;
    if (sweep)
        return;
    for (char *p = w; *p; p++)
        if (*p == '/')
            *p = '_';
}

/* Splits data[0..n) at '\n' into at most MAX_WORDS words of at most MAX_WORD bytes
 * (copied, NUL-terminated, confined) into words; returns the count. */
static int split_words(const uint8_t *data, size_t n, char words[][MAX_WORD + 1], char sep)
{
    int k = 0;
    size_t i = 0;
    while (i < n && k < MAX_WORDS) {
        size_t j = i;
        while (j < n && data[j] != (uint8_t)sep)
            j++;
        size_t len = j - i < MAX_WORD ? j - i : MAX_WORD;
        memcpy(words[k], data + i, len);
        words[k][len] = 0;
        if (strlen(words[k]) == len || sep == '\n') { /* an embedded NUL ends the word */
            confine(words[k]);
            if (sep == '\n' || len > 0)
                k++;
        }
        i = j + 1;
    }
    return k;
}

/* Removes everything in directory fd (depth-first); closes fd. */
static void empty_dir(int fd)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (unlinkat(dirfd(d), de->d_name, 0) == 0)
            continue;
        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        if (sub >= 0) {
            empty_dir(sub);
            unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
        }
    }
    closedir(d);
}

static int write_file(const char *name, const void *p, size_t n)
{
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    int bad = n && write(fd, p, n) != (ssize_t)n;
    return close(fd) || bad ? -1 : 0;
}

/* What a call changes in the process, saved before and put back after. */
typedef struct saved {
    int cwd, in, out, err;
    struct rlimit fsize;
    struct sigaction xfsz;
    char *tmpdir, *gnuplot;
} saved;

static char *dup_env(const char *name)
{
    const char *v = getenv(name);
    return v ? strdup(v) : NULL;
}

static void restore_env(const char *name, char *v)
{
    if (v)
        setenv(name, v, 1);
    else
        unsetenv(name);
    free(v);
}

static int enter(saved *s)
{
    memset(s, 0, sizeof *s);
    fflush(stdout);
    fflush(stderr);
    s->cwd = open(".", O_RDONLY | O_DIRECTORY);
    if (s->cwd < 0 || chdir(dir)) {
        if (s->cwd >= 0)
            close(s->cwd);
        return -1;
    }
    int null = getenv("AS_FUZZ_CLI_SHOW") ? -1 : open("/dev/null", O_WRONLY);
    s->in = dup(0);
    s->out = dup(1);
    s->err = dup(2);
    if (null >= 0) {
        dup2(null, 1);
        dup2(null, 2);
        close(null);
    }
    getrlimit(RLIMIT_FSIZE, &s->fsize);
    struct rlimit lim = s->fsize;
    if (lim.rlim_max == RLIM_INFINITY || lim.rlim_max > FILE_LIMIT)
        lim.rlim_cur = FILE_LIMIT;
    setrlimit(RLIMIT_FSIZE, &lim);
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGXFSZ, &ign, &s->xfsz);
    s->tmpdir = dup_env("TMPDIR");
    s->gnuplot = dup_env("GNUPLOT");
    setenv("TMPDIR", dir, 1);
    setenv("GNUPLOT", "allocsim-fuzz-no-gnuplot", 1); /* plot runs no program */
    return 0;
}

static void leave(saved *s)
{
    fflush(stdout);
    fflush(stderr);
    clearerr(stdout);
    clearerr(stderr);
    clearerr(stdin);
    dup2(s->in, 0);
    dup2(s->out, 1);
    dup2(s->err, 2);
    close(s->in);
    close(s->out);
    close(s->err);
    setrlimit(RLIMIT_FSIZE, &s->fsize);
    sigaction(SIGXFSZ, &s->xfsz, NULL);
    restore_env("TMPDIR", s->tmpdir);
    restore_env("GNUPLOT", s->gnuplot);
    int fd = open(".", O_RDONLY | O_DIRECTORY);
    if (fd >= 0)
        empty_dir(fd);
    if (fchdir(s->cwd)) {
        /* the saved directory is open; fchdir cannot fail on it short of EIO */
    }
    close(s->cwd);
}

static int call(int argc, char **argv)
{
    argv[argc] = NULL;
    int rc = as_cli_main(argc, argv);
    if (getenv("AS_FUZZ_CLI_SHOW"))
        fprintf(stderr, "[fuzz-cli] exit status %d\n", rc);
    FUZZ_ASSERT_MSG(rc == AS_EXIT_OK || rc == AS_EXIT_INPUT || rc == AS_EXIT_USAGE,
                    "%s %s: exit status %d", argv[0], argc > 1 ? argv[1] : "", rc);
    return rc;
}

/* Writes `t` from the trace section (a file, a generator line or the default). */
static void make_trace(const uint8_t *p, size_t n)
{
    if (n == 0) {
        write_file("t", default_trace, sizeof default_trace - 1);
        return;
    }
    if (n < 4 || memcmp(p, "gen ", 4) != 0) {
        write_file("t", p, n);
        return;
    }
    static char words[MAX_WORDS][MAX_WORD + 1];
    const uint8_t *nl = memchr(p, '\n', n);
    size_t len = nl ? (size_t)(nl - p) : n;
    int k = split_words(p, len, words, ' ');
    char *argv[MAX_WORDS + 5];
    int argc = 0;
    argv[argc++] = "allocsim";
    for (int i = 0; i < k && argc < MAX_WORDS; i++)
        argv[argc++] = words[i]; /* words[0] is "gen" */
    argv[argc++] = "-o";
    argv[argc++] = "t";
    call(argc, argv);
}

int as_fuzz_cli(const uint8_t *data, size_t size)
{
    static char words[MAX_WORDS][MAX_WORD + 1];
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/allocsim-fuzz-cli-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(dir)) {
            dir[0] = 0;
            return 0;
        }
    }
    size_t split = size;
    for (size_t i = 0; i + 1 < size; i++)
        if (data[i] == '\n' && data[i + 1] == '\n') {
            split = i;
            break;
        }
    int k = split_words(data, split, words, '\n');
    saved s;
    if (enter(&s))
        return 0;
    size_t off = split + 2 <= size ? split + 2 : size;
    make_trace(data + off, size - off);
    char *argv[MAX_WORDS + 2];
    int argc = 0;
    argv[argc++] = "allocsim";
    for (int i = 0; i < k; i++)
        argv[argc++] = words[i];
    call(argc, argv);
    leave(&s);
    return 0;
}

/* The private directory goes when the process ends (libFuzzer, the test runner). */
__attribute__((destructor)) static void remove_dir(void)
{
    if (!dir[0])
        return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0)
        empty_dir(fd);
    rmdir(dir);
}
