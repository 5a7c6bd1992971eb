/*
 * bench_main.c - build/allocsim-bench (`make bench`): events per second, one core, for
 * decoding alone (native format, from a file and from memory) and end to end (decode +
 * engine + policy) for every registered policy and for torch with each major knob, on a
 * generated transformer-training trace of about 10 M events, with each measurement's peak
 * RSS; and decode of a 1 M and a 10 M event trace side by side, to show that memory does
 * not grow with the trace's length.
 *
 * Every measurement runs in a fresh process (this program re-executed with --child), so
 * that its peak RSS (from wait4) is its own. The traces are generated once into
 * build/bench/ and reused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "gen.h"
#include "policy.h"
#include "trace.h"

/* A transformer step is about 747 events with the generator's defaults. */
#define STEPS_10M "steps=13500"
#define STEPS_1M "steps=1350"
#define STEPS_30M "steps=40500"

typedef struct bench_res {
    uint64_t events;
    double seconds;
    int ok;
    char msg[300];
} bench_res;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- a trivial policy: the engine's own cost per event --------------------------------- */

typedef struct null_st {
    uint64_t allocated;
} null_st;

static int null_init(void *st, const as_knob_value *cfg, const as_device *dev)
{
    (void)st;
    (void)cfg;
    (void)dev;
    return 0;
}
static int null_alloc(void *st, const as_request *rq, as_block *out)
{
    ((null_st *)st)->allocated += rq->size;
    *out = (as_block){.addr = 0, .size = rq->size, .handle = rq->size};
    return 0;
}
static int null_free(void *st, uint64_t handle, unsigned flags)
{
    if (!(flags & AS_FREE_PENDING))
        ((null_st *)st)->allocated -= handle;
    return 0;
}
static void null_stats(const void *st, as_policy_stats *out)
{
    *out = (as_policy_stats){.allocated = ((const null_st *)st)->allocated};
}

static const as_policy null_policy = {
    .name = "(engine only)",
    .summary = "hands out the request, holds no device memory",
    .abi = AS_POLICY_ABI,
    .state_size = sizeof(null_st),
    .init = null_init,
    .alloc = null_alloc,
    .free = null_free,
    .stats = null_stats,
};

/* ---- measurements (run in a child) ------------------------------------------------------ */

/* Decodes every event of rd in batches of 4096: the count, the seconds since t0 and whether
 * it reached the end go into r. */
static void drain(as_trace_reader *rd, double t0, bench_res *r)
{
    as_event evs[4096];
    size_t n;
    int rc;
    while ((rc = as_trace_next_batch(rd, evs, 4096, &n)) == 0)
        r->events += n;
    r->seconds = now_s() - t0;
    r->ok = rc == AS_TRACE_EOF;
}

static void decode_file(const char *path, bench_res *r)
{
    as_trace_reader *rd;
    as_trace_error err;
    double t0 = now_s();
    if (as_trace_open(path, NULL, &rd, &err) < 0) {
        snprintf(r->msg, sizeof r->msg, "%s: %s", path, err.msg);
        return;
    }
    drain(rd, t0, r);
    if (!r->ok)
        snprintf(r->msg, sizeof r->msg, "%s", as_trace_reader_error(rd)->msg);
    as_trace_close(rd);
}

static void decode_mem(const char *path, bench_res *r)
{
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f || fstat(fileno(f), &sb)) {
        snprintf(r->msg, sizeof r->msg, "%s: %s", path, strerror(errno));
        if (f)
            fclose(f);
        return;
    }
    size_t len = (size_t)sb.st_size;
    char *buf = malloc(len ? len : 1);
    if (!buf || fread(buf, 1, len, f) != len) {
        snprintf(r->msg, sizeof r->msg, "%s: read failed", path);
        fclose(f);
        free(buf);
        return;
    }
    fclose(f);
    as_trace_reader *rd;
    as_trace_error err;
    double t0 = now_s();
    if (as_trace_open_mem(buf, len, path, NULL, &rd, &err) < 0) {
        snprintf(r->msg, sizeof r->msg, "%s: %s", path, err.msg);
        free(buf);
        return;
    }
    drain(rd, t0, r);
    as_trace_close(rd);
    free(buf);
}

static void engine_run(const char *path, const char *spec_text, bench_res *r)
{
    as_policy_spec spec = {0}, *sp = &spec;
    as_policy_spec null_spec = {.policy = &null_policy, .text = "(engine only)"};
    char why[256];
    if (!spec_text) {
        sp = &null_spec;
    } else if (as_policy_spec_parse(spec_text, &spec, why, sizeof why)) {
        snprintf(r->msg, sizeof r->msg, "%s", why);
        return;
    }
    as_trace_reader *rd = NULL;
    as_engine *e = NULL;
    as_trace_error err;
    as_engine_opts o = {.threads = 1};
    double t0 = now_s();
    if (as_trace_open(path, NULL, &rd, &err) < 0) {
        snprintf(r->msg, sizeof r->msg, "%s: %s", path, err.msg);
        goto out;
    }
    if (as_engine_create(&o, &e) || as_engine_add_run(e, sp, AS_CAPACITY_NONE) < 0) {
        snprintf(r->msg, sizeof r->msg, "engine setup failed");
        goto out;
    }
    int rc = as_engine_run(e, rd, &err);
    r->seconds = now_s() - t0;
    if (rc) {
        snprintf(r->msg, sizeof r->msg, "%s", rc < AS_TRACE_EUSAGE ? as_engine_errmsg(e) : err.msg);
        goto out;
    }
    r->events = as_engine_result(e, 0)->events;
    r->ok = as_engine_result(e, 0)->completed;
    if (!r->ok)
        snprintf(r->msg, sizeof r->msg, "did not complete");
out:
    as_engine_destroy(e);
    as_trace_close(rd);
    if (sp == &spec)
        as_policy_spec_free(&spec);
}

static void child(int kind, const char *path, const char *spec, bench_res *x)
{
    memset(x, 0, sizeof *x);
    if (kind == 0)
        decode_file(path, x);
    else if (kind == 1)
        decode_mem(path, x);
    else
        engine_run(path, spec, x);
}

/* Runs one measurement in a fresh process (fork + exec of this program with --child),
 * which writes its bench_res to the pipe; the child's peak RSS comes from wait4. Returns
 * the RSS in KiB (0 on failure). */
static double cpu_s; /* CPU time of the last measuring process */

static long measure(const char *self, int kind, const char *path, const char *spec, bench_res *r)
{
    int fd[2];
    memset(r, 0, sizeof *r);
    snprintf(r->msg, sizeof r->msg, "the measuring process failed");
    if (pipe(fd))
        return 0;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 0;
    if (pid == 0) {
        close(fd[0]);
        char k[8], f[16];
        snprintf(k, sizeof k, "%d", kind);
        snprintf(f, sizeof f, "%d", fd[1]);
        execl(self, self, "--child", k, f, path, spec ? spec : "-", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    bench_res x;
    ssize_t got = read(fd[0], &x, sizeof x);
    close(fd[0]);
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0 || got != (ssize_t)sizeof x)
        return 0;
    *r = x;
    cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
            (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    return ru.ru_maxrss;
}

static int markdown; /* --markdown: rows as a Markdown table (README) */

static void row(const char *what, const char *trace, long rss, const bench_res *r)
{
    if (markdown && r->ok) {
        printf("| %s | %s | %llu | %.3f | %.1f | %.1f |\n", what, trace,
               (unsigned long long)r->events, cpu_s,
               cpu_s > 0 ? (double)r->events / cpu_s / 1e6 : 0.0, (double)rss / 1024);
        return;
    }
    if (!r->ok) {
        printf("%-40s %-6s  FAILED: %s\n", what, trace, r->msg);
        return;
    }
    printf("%-40s %-6s %11llu %8.3f %9.2f %8.3f %9.2f %8.1f\n", what, trace,
           (unsigned long long)r->events, r->seconds, (double)r->events / r->seconds / 1e6, cpu_s,
           cpu_s > 0 ? (double)r->events / cpu_s / 1e6 : 0.0, (double)rss / 1024);
}

static int make_trace(const char *path, const char *steps)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && sb.st_size > 0)
        return 0;
    char kv0[64];
    snprintf(kv0, sizeof kv0, "%s", steps);
    char *kv[] = {kv0};
    as_trace_reader *rd = NULL;
    as_trace_writer *w = NULL;
    as_trace_error err;
    fprintf(stderr, "allocsim-bench: generating %s (transformer %s)\n", path, steps);
    if (as_gen_open("transformer", 1, kv, &rd, &err) < 0 ||
        as_trace_writer_open(path, AS_FMT_NATIVE, as_trace_reader_meta(rd), &w, &err) < 0 ||
        as_trace_copy(rd, w, NULL, &err) < 0) {
        fprintf(stderr, "allocsim-bench: %s: %s\n", path, err.msg);
        if (w)
            as_trace_writer_close(w, NULL);
        as_trace_close(rd);
        unlink(path);
        return -1;
    }
    as_trace_close(rd);
    if (as_trace_writer_close(w, &err) < 0) {
        fprintf(stderr, "allocsim-bench: %s: %s\n", path, err.msg);
        unlink(path);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = "build/bench";
    int quick = 0;
    if (argc == 6 && strcmp(argv[1], "--child") == 0) {
        bench_res x;
        child(atoi(argv[2]), argv[4], strcmp(argv[5], "-") ? argv[5] : NULL, &x);
        int fd = atoi(argv[3]);
        return write(fd, &x, sizeof x) == (ssize_t)sizeof x ? 0 : 1;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--markdown") == 0)
            markdown = 1;
        else {
            fprintf(stderr, "usage: allocsim-bench [--dir DIR] [--quick] [--markdown]\n"
                            "  --quick: only the 1 M event trace for the policies\n"
                            "  --markdown: CPU-time rows as a Markdown table\n");
            return 2;
        }
    }
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) {
        fprintf(stderr, "allocsim-bench: cannot find my own executable\n");
        return 1;
    }
    self[sl] = 0;
    char p10[512], p1[512], p30[512];
    snprintf(p10, sizeof p10, "%s/transformer-10M.zst", dir);
    snprintf(p1, sizeof p1, "%s/transformer-1M.zst", dir);
    snprintf(p30, sizeof p30, "%s/transformer-30M.zst", dir);
    mkdir(dir, 0777);
    if (make_trace(p1, STEPS_1M) || make_trace(p10, STEPS_10M) ||
        (!quick && make_trace(p30, STEPS_30M)))
        return 1;
    const char *big = quick ? p1 : p10;
    const char *big_name = quick ? "1M" : "10M";

    printf("allocsim-bench: one core; traces: transformer (gen defaults) in %s\n"
           "wall: the measured loop; CPU: user+system time of the whole measuring process\n"
           "(steadier on a shared machine); RSS: that process's peak resident set\n",
           dir);
    if (markdown)
        printf("\n| what | trace | events | CPU s | Mevents/s (CPU) | peak RSS MiB |\n"
               "| --- | --- | ---: | ---: | ---: | ---: |\n");
    else
        printf("%-40s %-6s %11s %8s %9s %8s %9s %8s\n", "what", "trace", "events", "wall s",
               "Mev/s", "CPU s", "Mev/s CPU", "RSS MiB");
    bench_res r;
    long rss;
    rss = measure(self, 0, p1, NULL, &r);
    row("decode (native, file)", "1M", rss, &r);
    rss = measure(self, 0, p10, NULL, &r);
    row("decode (native, file)", "10M", rss, &r);
    if (!quick) {
        rss = measure(self, 0, p30, NULL, &r);
        row("decode (native, file)", "30M", rss, &r);
    }
    rss = measure(self, 1, p10, NULL, &r);
    row("decode (native, memory)", "10M", rss, &r);
    rss = measure(self, 2, p1, NULL, &r);
    row("decode + engine, trivial policy", "1M", rss, &r);
    if (!quick) {
        rss = measure(self, 2, p10, NULL, &r);
        row("decode + engine, trivial policy", "10M", rss, &r);
    }

    size_t n;
    const as_policy *const *l = as_policy_list(&n);
    for (size_t i = 0; i < n; i++) {
        char what[64];
        snprintf(what, sizeof what, markdown ? "%s" : "decode + engine + %s", l[i]->name);
        rss = measure(self, 2, big, l[i]->name, &r);
        row(what, big_name, rss, &r);
    }
    if (as_policy_find("torch")) {
        static const char *const variants[] = {
            "torch,maxsplit=128",
            "torch,roundup=4",
            "torch,expandable=true",
            "torch,gc=0.6",
        };
        for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
            char what[64];
            snprintf(what, sizeof what, markdown ? "%s" : "decode + engine + %s", variants[i]);
            rss = measure(self, 2, big, variants[i], &r);
            row(what, big_name, rss, &r);
        }
    }
    return 0;
}
