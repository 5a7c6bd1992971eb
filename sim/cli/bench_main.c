/*
 * bench_main.c - build/allocsim-bench (`make bench`): events per second, one core, CPU
 * time of the whole measuring process, for every registered policy and the main torch
 * settings, on long traces made from the real snapshots in the repository (each played N
 * times in a row by as_trace_repeat, the code of `allocsim convert --repeat N`) next to the
 * generated transformer trace; plus decode-only and engine-only (a no-op policy) rows, so
 * that each policy's own ns/event is the difference from the engine-only row. Also the
 * peak RSS of decoding 1 M and 10 M events, to show that memory does not grow with length,
 * and the snapshot import (a long real pickle, traces/long_snapshot.py) next to native;
 * and the start-up of short allocsim commands against an empty process (--startup alone).
 *
 * Every measurement runs in a fresh process (this program re-executed with --child), so
 * that its CPU time and peak RSS (from wait4) are its own; with --reps N each cell is the
 * lowest CPU time of N such processes (the least disturbed by the machine's other load).
 * The traces are made once into build/bench/ and reused.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

extern char **environ;

#include "engine.h"
#include "gen.h"
#include "mincap.h"
#include "policy.h"
#include "trace.h"
#include "tune.h"

/* A transformer step is about 747 events with the generator's defaults. */
#define STEPS_10M "steps=13500"
#define STEPS_1M "steps=1350"
#define REAL_EVENTS 5000000ull  /* each real snapshot is repeated up to about this long */
#define REAL_MIN_EVENTS 5000ull /* smaller snapshots (probes) are left out */
#define MAX_TRACES 12
#define H200_BYTES 150109880320ull /* the gc row's capacity: an H200's memory */

typedef struct bench_res {
    uint64_t events;
    int ok;
    char msg[300];
} bench_res;

typedef struct trace_in {
    char path[512];
    char name[64];
    uint64_t events;
} trace_in;

/* ---- a no-op policy: the engine's own cost per event ---------------------------------- */

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

static void decode_file(const char *path, bench_res *r)
{
    as_trace_reader *rd;
    as_trace_error err;
    if (as_trace_open(path, NULL, &rd, &err) < 0) {
        snprintf(r->msg, sizeof r->msg, "%s: %s", path, err.msg);
        return;
    }
    as_event evs[4096];
    size_t n;
    int rc;
    while ((rc = as_trace_next_batch(rd, evs, 4096, &n)) == 0)
        r->events += n;
    r->ok = rc == AS_TRACE_EOF;
    if (!r->ok)
        snprintf(r->msg, sizeof r->msg, "%s", as_trace_reader_error(rd)->msg);
    as_trace_close(rd);
}

/* Decompresses a zstd file and throws the bytes away: the ceiling of any decoder reading
 * it. r->events = events, the count of the trace it holds. */
static void unzstd_only(const char *path, uint64_t events, bench_res *r)
{
    FILE *f = fopen(path, "rb");
    ZSTD_DStream *z = ZSTD_createDStream();
    static uint8_t ib[1 << 17], ob[1 << 17];
    size_t n, rc = 1;
    int ok = f && z;
    while (ok && (n = fread(ib, 1, sizeof ib, f)) > 0) {
        ZSTD_inBuffer i = {ib, n, 0};
        while (ok && i.pos < i.size) {
            ZSTD_outBuffer o = {ob, sizeof ob, 0};
            rc = ZSTD_decompressStream(z, &o, &i);
            ok = !ZSTD_isError(rc);
        }
    }
    ZSTD_freeDStream(z);
    if (f)
        fclose(f);
    r->ok = ok && rc == 0;
    r->events = events;
    if (!r->ok)
        snprintf(r->msg, sizeof r->msg, "%s: cannot decompress", path);
}

static void engine_run(const char *path, const char *spec_text, uint64_t cap, bench_res *r)
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
    if (as_trace_open(path, NULL, &rd, &err) < 0) {
        snprintf(r->msg, sizeof r->msg, "%s: %s", path, err.msg);
        goto out;
    }
    if (as_engine_create(&o, &e) || as_engine_add_run(e, sp, cap) < 0) {
        snprintf(r->msg, sizeof r->msg, "engine setup failed");
        goto out;
    }
    int rc = as_engine_run(e, rd, &err);
    if (rc) {
        snprintf(r->msg, sizeof r->msg, "%s", err.code < 0 ? err.msg : as_engine_errmsg(e));
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

/* allocsim tune's search at one capacity, no curves: every setting of the space (all), or
 * the default alone (one run, the ratio's unit); an OOM is a result here. */
static int open_path(void *user, as_trace_reader **out, as_trace_error *err)
{
    const char *const *path = user;
    return as_trace_open(*path, NULL, out, err);
}

static void tune_run(const char *path, int all, uint64_t cap, bench_res *r)
{
    char *one[] = {(char *)""};
    as_tune_opts o = {.capacity = cap, .threads = 1};
    as_tune_result res;
    as_trace_error err;
    if (as_tune(open_path, &path, all ? NULL : one, all ? 0 : 1, &o, &res, &err, r->msg,
                sizeof r->msg) == 0) {
        r->ok = 1;
        r->events = res.events * res.n;
        as_tune_result_free(&res);
    }
}

/* A whole mincap curve of one setting, single-threaded: curve mode (kind 4) or one run per
 * capacity (kind 5); r->events = the capacities answered. */
static void mincap_run(const char *path, const char *spec_text, int passes, bench_res *r)
{
    as_policy_spec spec;
    char why[300];
    as_trace_error err;
    as_mincap_result m = {0};
    as_mincap_opts o = {.threads = 1, .exact_passes = passes, .memory = 2ull << 30};
    if (as_policy_spec_parse(spec_text, &spec, why, sizeof why)) {
        snprintf(r->msg, sizeof r->msg, "%s", why);
        return;
    }
    if (as_mincap(open_path, &path, &spec, &o, &m, &err, why, sizeof why) == 0) {
        r->events = m.npoints;
        r->ok = 1;
    } else {
        snprintf(r->msg, sizeof r->msg, "%s", why[0] ? why : err.msg);
    }
    as_mincap_result_free(&m);
    as_policy_spec_free(&spec);
}

/* ---- the measuring process -------------------------------------------------------------- */

static const char *self_exe;

/* What a launcher (--launch, below) reports of the measuring process it ran. */
typedef struct launch_res {
    double cpu;
    long rss_kib;
} launch_res;

static double ru_cpu(const struct rusage *ru)
{
    return (double)ru->ru_utime.tv_sec + (double)ru->ru_utime.tv_usec * 1e-6 +
           (double)ru->ru_stime.tv_sec + (double)ru->ru_stime.tv_usec * 1e-6;
}

/* One measurement in a fresh process (fork + exec of this program with --child), which
 * writes its bench_res to the pipe; its CPU time (user + system) and peak RSS come from
 * wait4. Returns the CPU seconds, or a negative number on failure (r->msg says why).
 * Linux's ru_maxrss of a process counts the high-water RSS of the one it was forked from
 * (exec keeps the larger of the old and new address spaces' peaks), so a child of this
 * program, grown by the traces it has made, reports at least this program's peak. With
 * launch the child is forked by a launcher (this program exec'd afresh, about 2 MiB),
 * which waits for it and writes its rusage after its bench_res: the peak RSS is then the
 * measuring process's own (at least the launcher's few MiB). */
static double measure_once(const char *exe, int kind, const char *path, const char *spec,
                           uint64_t cap, bench_res *r, long *rss_kib, int launch)
{
    int fd[2];
    memset(r, 0, sizeof *r);
    snprintf(r->msg, sizeof r->msg, "the measuring process failed");
    if (pipe(fd))
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(fd[0]);
        char k[8], f[16], c[24];
        snprintf(k, sizeof k, "%d", kind);
        snprintf(f, sizeof f, "%d", fd[1]);
        snprintf(c, sizeof c, "%llu", (unsigned long long)cap);
        if (launch)
            execl(self_exe, self_exe, "--launch", exe, "--child", k, f, path, spec ? spec : "-", c,
                  (char *)NULL);
        else
            execl(exe, exe, "--child", k, f, path, spec ? spec : "-", c, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    bench_res x;
    launch_res lr = {-1, 0};
    ssize_t got = read(fd[0], &x, sizeof x);
    if (launch && got == (ssize_t)sizeof x && read(fd[0], &lr, sizeof lr) != (ssize_t)sizeof lr)
        got = -1;
    close(fd[0]);
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0 || got != (ssize_t)sizeof x || (launch && lr.cpu < 0))
        return -1;
    *r = x;
    if (rss_kib)
        *rss_kib = launch ? lr.rss_kib : ru.ru_maxrss;
    return launch ? lr.cpu : ru_cpu(&ru);
}

/* The launcher: runs argv[2..] (EXE --child ...) in a child and writes its CPU time and
 * peak RSS to the child's result pipe (argv[5]) once the child has written and exited. */
static int launch_main(char **argv)
{
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        execv(argv[2], argv + 2);
        _exit(127);
    }
    int st;
    struct rusage ru;
    launch_res lr = {-1, 0};
    if (wait4(pid, &st, 0, &ru) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        lr = (launch_res){ru_cpu(&ru), ru.ru_maxrss};
    return write(atoi(argv[5]), &lr, sizeof lr) == (ssize_t)sizeof lr ? 0 : 1;
}

static unsigned reps = 1;

/* The lowest CPU time of `reps` processes of exe; M events/s in *rate, 0 when it failed. */
static double measure(const char *exe, int kind, const char *path, const char *spec, uint64_t cap,
                      double *rate)
{
    double best = -1;
    bench_res r;
    *rate = 0;
    for (unsigned i = 0; i < reps; i++) {
        double s = measure_once(exe, kind, path, spec, cap, &r, NULL, 0);
        if (s < 0 || !r.ok) {
            fprintf(stderr, "allocsim-bench: %s on %s: %s\n", spec ? spec : "(no policy)", path,
                    r.msg);
            return -1;
        }
        if (best < 0 || s < best)
            best = s;
    }
    *rate = best > 0 ? (double)r.events / best / 1e6 : 0;
    return best;
}

/* ---- traces ----------------------------------------------------------------------------- */

static int gen_trace(const char *path, const char *steps)
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

static uint64_t count_events(const char *path)
{
    bench_res r = {0};
    decode_file(path, &r);
    return r.ok ? r.events : 0;
}

/* A snapshot in the repository -> build/bench/NAME.zst (native, once) ->
 * build/bench/NAME-xN.zst, N passes of about target events in all. 1: left out (too
 * short, or not a trace). */
static int real_trace(const char *dir, const char *snap, uint64_t target, trace_in *t)
{
    const char *base = strrchr(snap, '/') ? strrchr(snap, '/') + 1 : snap;
    char stem[40], one[512];
    snprintf(stem, sizeof stem, "%.*s", (int)strcspn(base, "."), base);
    snprintf(one, sizeof one, "%s/%s.zst", dir, stem);
    as_trace_error err;
    struct stat sb;
    if (stat(one, &sb) != 0 && as_trace_convert(snap, one, AS_FMT_NATIVE, NULL, NULL, NULL, &err)) {
        /* Not every pickle in the repository is a trace (a state-only dump, say). */
        fprintf(stderr, "allocsim-bench: %s left out: %s\n", snap, err.msg);
        return 1;
    }
    uint64_t n = count_events(one);
    if (n < REAL_MIN_EVENTS)
        return 1;
    unsigned times = (unsigned)((target + n - 1) / n);
    snprintf(t->name, sizeof t->name, "%.15s x%u", stem, times);
    snprintf(t->path, sizeof t->path, "%s/%s-x%u.zst", dir, stem, times);
    if (stat(t->path, &sb) != 0) {
        fprintf(stderr, "allocsim-bench: %s = %s x%u\n", t->path, snap, times);
        if (as_trace_repeat(one, t->path, AS_FMT_NATIVE, times, NULL, NULL, &err)) {
            fprintf(stderr, "allocsim-bench: %s: %s\n", t->path, err.msg);
            return -1;
        }
    }
    t->events = count_events(t->path);
    return t->events ? 0 : -1;
}

/* The snapshots in the repository (each name once), run from the repository's root. */
static int find_real(const char *dir, uint64_t target, trace_in *t, int max)
{
    static const char *const where[] = {"replay/data/*.pickle.zst", "tests/data/*.pickle.zst",
                                        "tests/data/*/*.pickle.zst"};
    int n = 0;
    for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
        glob_t g;
        if (glob(where[w], 0, NULL, &g))
            continue;
        for (size_t i = 0; i < g.gl_pathc && n < max; i++) {
            const char *base = strrchr(g.gl_pathv[i], '/') + 1;
            int dup = 0;
            for (int k = 0; k < n; k++)
                dup |= strncmp(t[k].name, base, strcspn(base, ".")) == 0 &&
                       t[k].name[strcspn(base, ".")] == ' ';
            int rc = dup ? 1 : real_trace(dir, g.gl_pathv[i], target, &t[n]);
            if (rc < 0) {
                globfree(&g);
                return -1;
            }
            n += rc == 0;
        }
        globfree(&g);
    }
    return n;
}

/* ---- report ----------------------------------------------------------------------------- */

static int events_cells = 1; /* 0 with --startup alone: no events/s cells follow */

static void machine(const char *commit, const char *dir)
{
    struct utsname u;
    char model[256] = "unknown CPU", line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
            snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = 0;
            break;
        }
    if (f)
        fclose(f);
    double la[3] = {0};
    if (getloadavg(la, 3) < 0)
        la[0] = la[1] = la[2] = -1;
    uname(&u);
    time_t now = time(NULL);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    printf("allocsim-bench: %s, commit %s, %s %s\n", when, commit ? commit : "unknown", u.sysname,
           u.machine);
    printf("machine: %s, nproc %ld, load average %.2f %.2f %.2f (at the start)\n", model,
           sysconf(_SC_NPROCESSORS_ONLN), la[0], la[1], la[2]);
    if (!events_cells)
        return;
    printf("traces in %s; each cell: M events/s = events / CPU seconds (user + system) of the\n"
           "whole measuring process, one core, best of %u run(s)\n\n",
           dir, reps);
}

typedef struct row_def {
    const char *label;
    int kind; /* the child's: 0 decode, 1 engine, 2-3 tune, 4-5 mincap */
    const char *spec;
    uint64_t cap;
} row_def;

static int markdown;

static const char *base_exe; /* --base: an earlier allocsim-bench, measured beside this one */

static int colw(void)
{
    return base_exe ? 24 : 18;
}

static void print_header(const trace_in *t, int nt)
{
    if (markdown) {
        printf("| what |");
        for (int i = 0; i < nt; i++)
            printf(" %s (%.1fM) |", t[i].name, (double)t[i].events / 1e6);
        printf("\n| --- |");
        for (int i = 0; i < nt; i++)
            printf(" ---: |");
        printf("\n");
        return;
    }
    printf("%-34s", "M events/s (CPU)");
    for (int i = 0; i < nt; i++)
        printf(" %-*.*s", colw(), colw(), t[i].name);
    printf("\n%-34s", "events");
    for (int i = 0; i < nt; i++)
        printf(" %5.1fM%*s", (double)t[i].events / 1e6, colw() - 6, "");
    printf("\n");
}

/* The policy's own ns/event: its row's time per event minus the engine-only row's. */
static double own_ns(double rate, double eng)
{
    return rate > 0 && eng > 0 ? 1e3 / rate - 1e3 / eng : 0;
}

/* One cell: "rate (own ns)", or with --base "old->new (old->new ns)". */
static void cell(const row_def *d, int is_engine, double r, double e, double rb, double eb)
{
    char txt[64];
    int own = d->kind == 1 && !is_engine;
    if (base_exe && own)
        snprintf(txt, sizeof txt, "%.1f->%.1f (%.0f->%.0f ns)", rb, r, own_ns(rb, eb),
                 own_ns(r, e));
    else if (base_exe)
        snprintf(txt, sizeof txt, "%.1f->%.1f", rb, r);
    else if (own)
        snprintf(txt, sizeof txt, "%.1f (%.0f ns)", r, own_ns(r, e));
    else
        snprintf(txt, sizeof txt, "%.1f", r);
    if (markdown)
        printf(" %s |", txt);
    else
        printf(" %-*s", colw(), txt);
}

/* One row: a cell per trace; with --base, the base build measured right before. */
static void print_row(const row_def *d, const trace_in *t, int nt, double *eng, double *beng,
                      int is_engine)
{
    double rate[MAX_TRACES] = {0}, brate[MAX_TRACES] = {0};
    for (int i = 0; i < nt; i++) {
        if (base_exe)
            measure(base_exe, d->kind, t[i].path, d->spec, d->cap, &brate[i]);
        measure(self_exe, d->kind, t[i].path, d->spec, d->cap, &rate[i]);
    }
    if (is_engine) {
        memcpy(eng, rate, sizeof rate);
        memcpy(beng, brate, sizeof brate);
    }
    printf(markdown ? "| %s |" : "%-34s", d->label);
    for (int i = 0; i < nt; i++)
        cell(d, is_engine, rate[i], eng[i], brate[i], beng[i]);
    printf("\n");
}

static void rss_rows(const char *p1, const char *p10)
{
    bench_res r;
    long k1 = 0, k10 = 0;
    measure_once(self_exe, 0, p1, NULL, AS_CAPACITY_NONE, &r, &k1, 1);
    measure_once(self_exe, 0, p10, NULL, AS_CAPACITY_NONE, &r, &k10, 1);
    printf("\npeak RSS of decoding: 1M events %.1f MiB, 10M events %.1f MiB\n", (double)k1 / 1024,
           (double)k10 / 1024);
}

static void run_bench(const trace_in *t, int nt)
{
    static row_def rows[64];
    size_t nr = 0, np;
    rows[nr++] = (row_def){"decode only (native)", 0, NULL, AS_CAPACITY_NONE};
    rows[nr++] = (row_def){"engine only (no-op policy)", 1, NULL, AS_CAPACITY_NONE};
    const as_policy *const *l = as_policy_list(&np);
    /* An offline policy plans the whole trace before its first event (O(n * live) on the
     * long traces here: minutes): it has no per-event speed to compare, so it is left out
     * and said so; policies/README.md gives its planning times. */
    size_t offline = 0;
    for (size_t i = 0; i < np && nr < 56; i++)
        if (as_policy_offline(l[i]))
            offline++;
        else
            rows[nr++] = (row_def){l[i]->name, 1, l[i]->name, AS_CAPACITY_NONE};
    if (as_policy_find("torch")) {
        rows[nr++] =
            (row_def){"torch,expandable=true", 1, "torch,expandable=true", AS_CAPACITY_NONE};
        rows[nr++] = (row_def){"torch,maxsplit=128", 1, "torch,maxsplit=128", AS_CAPACITY_NONE};
        rows[nr++] = (row_def){"torch,roundup=4", 1, "torch,roundup=4", AS_CAPACITY_NONE};
        rows[nr++] = (row_def){"torch,gc=0.6 -c 139.8GiB", 1, "torch,gc=0.6", H200_BYTES};
    }
    double eng[MAX_TRACES] = {0}, beng[MAX_TRACES] = {0};
    print_header(t, nt);
    for (size_t i = 0; i < nr; i++)
        print_row(&rows[i], t, nt, eng, beng, i == 1);
    printf("%s(in parentheses: the policy's own ns/event, its row's minus the engine-only "
           "row's%s)\n",
           markdown ? "\n" : "", base_exe ? "; old->new: --base, then this build" : "");
    for (size_t i = 0; i < np && offline; i++)
        if (as_policy_offline(l[i]))
            printf("%s (offline) is not benched: it plans the whole trace first "
                   "(policies/README.md gives its planning time)\n",
                   l[i]->name);
}

/* ---- start-up ----------------------------------------------------------------------------
 * What a short command costs: each command below runs SU_RUNS times in fresh processes
 * (posix_spawn, output to /dev/null), round-robin with the others so that the machine's
 * load falls on all of them alike; a cell is the median and the lowest CPU time (user +
 * system, from wait4: the kernel's exec, the dynamic loader if any, main, exit) and the
 * median of minor page faults. /bin/true is the floor: an empty process, linked to glibc
 * dynamically. The commands are the issue's: --version, `run` of the repository's small
 * native trace and small snapshot pickle as a user types them, and 1 and 16 runs of a
 * 2-event trace (one decode), whose difference is the fixed cost of each extra run. */

#define SU_RUNS 300
#define SU_MAX 12
#define SU_NATIVE "tests/data/native_v1.zst"
#define SU_PICKLE "tests/data/torch-2.11-h200-pools/graph_probe.pickle.zst"

typedef struct su_cmd {
    char label[64];
    char arg[8][512];
    char *argv[9];
    double us[SU_RUNS];
    double flt[SU_RUNS];
    double med, low, mflt;
} su_cmd;

static int su_spawn(char *const *argv, double *us, double *flt)
{
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int st;
    struct rusage ru;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc || wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
        return -1;
    *us = ru_cpu(&ru) * 1e6;
    *flt = (double)ru.ru_minflt;
    return 0;
}

static int su_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double su_median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, su_cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The allocsim program beside a bench executable (both are built into one folder). */
static void su_allocsim(const char *bench, char *out, size_t n)
{
    const char *sl = strrchr(bench, '/');
    snprintf(out, n, "%.*sallocsim", sl ? (int)(sl - bench + 1) : 0, bench);
}

static void su_set(su_cmd *c, int i, const char *a)
{
    snprintf(c->arg[i], sizeof c->arg[i], "%s", a);
    c->argv[i] = c->arg[i];
    c->argv[i + 1] = NULL;
}

/* The commands of one allocsim build (the 2-event trace's path in trace); a repository
 * trace that is missing leaves its row out. */
static int su_add(su_cmd *c, int k, const char *exe, const char *tag, const char *trace)
{
    static const struct {
        const char *label, *arg[7];
    } what[] = {
        {"--version", {"--version"}},
        {"run native_v1.zst (80 events)", {"run", SU_NATIVE}},
        {"run graph_probe.pickle.zst", {"run", SU_PICKLE}},
        {"run -p torch, 2 events, 1 run", {"run", "-q", "-p", "torch", "@"}},
        {"run -p torch, 2 events, 16 runs", {"run", "-q", "-p", "torch", "-c", "1G..16G/1G", "@"}},
    };
    for (size_t w = 0; w < sizeof what / sizeof what[0]; w++) {
        const char *need = w == 1 ? SU_NATIVE : w == 2 ? SU_PICKLE : NULL;
        int a = 0;
        if (need && access(need, R_OK))
            continue;
        snprintf(c[k].label, sizeof c[k].label, "allocsim%s %s", tag, what[w].label);
        su_set(&c[k], a++, exe);
        for (int i = 0; i < 7 && what[w].arg[i]; i++)
            su_set(&c[k], a++, strcmp(what[w].arg[i], "@") ? what[w].arg[i] : trace);
        k++;
    }
    return k;
}

static void su_print(const su_cmd *c, const su_cmd *floor)
{
    printf("  %-46s %7.0f us %7.0f us %+8.0f us %6.0f\n", c->label, c->med, c->low,
           c->med - floor->med, c->mflt);
}

/* Each build's extra run: its 16-run row's median less its 1-run row's, over 15. */
static void su_extra_runs(const su_cmd *c, int n)
{
    for (int k = 1; k < n; k++) {
        const char *l = strstr(c[k].label, " run -p torch, 2 events, 1 run");
        if (!l || k + 1 >= n || !strstr(c[k + 1].label, "16 runs"))
            continue;
        printf("  %.*s: each extra run of one decode %.1f us (16 runs' median minus 1 run's, "
               "/ 15)\n",
               (int)(l - c[k].label), c[k].label, (c[k + 1].med - c[k].med) / 15);
    }
}

static void startup_rows(const char *dir)
{
    static su_cmd c[SU_MAX];
    static char exe[4096], bexe[4096];
    char txt[512], trace[512];
    as_trace_error err;
    snprintf(txt, sizeof txt, "%s/startup-2.txt", dir);
    snprintf(trace, sizeof trace, "%s/startup-2.zst", dir);
    FILE *f = fopen(txt, "w");
    if (!f || fputs("allocsim-text 1\nalloc 0 1024\nfree 0\n", f) < 0 || fclose(f) ||
        as_trace_convert(txt, trace, AS_FMT_NATIVE, NULL, NULL, NULL, &err)) {
        fprintf(stderr, "allocsim-bench: cannot write %s: start-up rows left out\n", trace);
        return;
    }
    int n = 0;
    snprintf(c[n].label, sizeof c[n].label, "/bin/true (empty process)");
    su_set(&c[n++], 0, "/bin/true");
    su_allocsim(self_exe, exe, sizeof exe);
    if (base_exe) {
        su_allocsim(base_exe, bexe, sizeof bexe);
        n = su_add(c, n, bexe, " (base)", trace);
    }
    n = su_add(c, n, exe, "", trace);
    for (int r = 0; r < SU_RUNS; r++)
        for (int k = 0; k < n; k++)
            if (su_spawn(c[k].argv, &c[k].us[r], &c[k].flt[r])) {
                fprintf(stderr, "allocsim-bench: %s %s failed: start-up rows left out\n",
                        c[k].argv[0], c[k].argv[1] ? c[k].argv[1] : "");
                return;
            }
    for (int k = 0; k < n; k++) {
        c[k].med = su_median(c[k].us, SU_RUNS);
        c[k].low = c[k].us[0];
        c[k].mflt = su_median(c[k].flt, SU_RUNS);
    }
    printf("\nstart-up: %d fresh processes of each command, round-robin; CPU time (user + system)\n"
           "median and lowest, the median over /bin/true's, minor page faults (median):\n",
           SU_RUNS);
    printf("  %-46s %10s %10s %11s %6s\n", "command", "median", "lowest", "over true", "faults");
    for (int k = 0; k < n; k++)
        su_print(&c[k], &c[0]);
    su_extra_runs(c, n);
}

/* zstd -d in > out (the snapshots ship compressed; users' pickles are plain). */
static int unzstd(const char *in, const char *out)
{
    FILE *f = fopen(in, "rb"), *g = fopen(out, "wb");
    ZSTD_DStream *z = ZSTD_createDStream();
    static uint8_t ib[1 << 17], ob[1 << 17];
    size_t n, r = 1;
    int ok = f && g && z;
    while (ok && (n = fread(ib, 1, sizeof ib, f)) > 0) {
        ZSTD_inBuffer i = {ib, n, 0};
        while (ok && i.pos < i.size) {
            ZSTD_outBuffer o = {ob, sizeof ob, 0};
            r = ZSTD_decompressStream(z, &o, &i);
            ok = !ZSTD_isError(r) && fwrite(ob, 1, o.pos, g) == o.pos;
        }
    }
    ZSTD_freeDStream(z);
    if (f)
        fclose(f);
    if (g && fclose(g))
        ok = 0;
    return ok && r == 0 ? 0 : -1;
}

/* zstd -3 in > out, the level `zstd FILE` uses; 0 or -1. */
static int zstd3(const char *in, const char *out)
{
    FILE *f = fopen(in, "rb"), *g = fopen(out, "wb");
    ZSTD_CStream *z = ZSTD_createCStream();
    static uint8_t ib[1 << 17], ob[1 << 17];
    size_t n, r = 0;
    int ok = f && g && z && !ZSTD_isError(ZSTD_initCStream(z, 3));
    while (ok && (n = fread(ib, 1, sizeof ib, f)) > 0) {
        ZSTD_inBuffer i = {ib, n, 0};
        while (ok && i.pos < i.size) {
            ZSTD_outBuffer o = {ob, sizeof ob, 0};
            ok = !ZSTD_isError(ZSTD_compressStream(z, &o, &i)) && fwrite(ob, 1, o.pos, g) == o.pos;
        }
    }
    do {
        ZSTD_outBuffer o = {ob, sizeof ob, 0};
        r = ZSTD_endStream(z, &o);
        ok = ok && !ZSTD_isError(r) && fwrite(ob, 1, o.pos, g) == o.pos;
    } while (ok && r > 0);
    ZSTD_freeCStream(z);
    if (f)
        fclose(f);
    if (g && fclose(g))
        ok = 0;
    if (!ok)
        unlink(out);
    return ok ? 0 : -1;
}

/* mincap, the whole curve of one setting on the shared snapshots, one core: CPU time of
 * the whole process (its forks included) in curve mode, beside one run per capacity and
 * beside a single uncapped run, as ratios. */
static void mincap_rows(void)
{
    static const char *const snaps[] = {
        "tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst",
        "tests/data/torch-2.11-h200/moe_like.pickle.zst",
        "tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst",
    };
    static const char *const specs[] = {"torch", "expandable_segments:True",
                                        "max_split_size_mb:128"};
    printf("\nmincap, whole curve of one setting (CPU s, one core; x = times one uncapped run):\n");
    for (size_t i = 0; i < sizeof snaps / sizeof *snaps; i++)
        for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
            bench_res r, q;
            double rate;
            double one = measure(self_exe, 1, snaps[i], specs[k], AS_CAPACITY_NONE, &rate);
            double cs = measure_once(self_exe, 4, snaps[i], specs[k], 0, &r, NULL, 0);
            double ps = measure_once(self_exe, 5, snaps[i], specs[k], 0, &q, NULL, 0);
            if (one <= 0 || cs < 0 || ps < 0 || !r.ok || !q.ok) {
                fprintf(stderr, "allocsim-bench: mincap %s on %s: %s\n", specs[k], snaps[i],
                        !r.ok ? r.msg : q.msg);
                continue;
            }
            const char *base = strrchr(snaps[i], '/') + 1;
            printf("  %-28s %-26s %5llu caps: curve %6.2f s (%5.0fx), one run per capacity "
                   "%6.2f s (%5.0fx), single run %.3f s\n",
                   base, specs[k], (unsigned long long)r.events, cs, cs / one, ps, ps / one, one);
        }
}

/* Repetitions of a small input in one measuring process, so that about 2 M events are
 * decoded and the process's start-up is amortized. */
static unsigned import_reps(uint64_t events)
{
    uint64_t r = events ? (2000000 + events - 1) / events : 1;
    return r > 1000 ? 1000 : (unsigned)r;
}

/* One import cell: decode (kind 7) or decompression alone (kind 6), R times in one
 * process, by exe: M events/s and (when rss) the peak RSS in MiB; -1 when it failed. */
static double import_cell(const char *exe, int kind, const char *path, uint64_t events, double *rss)
{
    char rs[24];
    double best = -1;
    unsigned r = import_reps(events);
    snprintf(rs, sizeof rs, "%u", r);
    for (unsigned i = 0; i < reps; i++) {
        bench_res x;
        long kib = 0;
        double s = measure_once(exe, kind, path, rs, events, &x, &kib, 1);
        if (s < 0 || !x.ok) {
            fprintf(stderr, "allocsim-bench: import of %s: %s\n", path, x.msg);
            return -1;
        }
        if (best < 0 || s < best)
            best = s;
        if (rss)
            *rss = (double)kib / 1024;
    }
    return best > 0 ? (double)events * r / best / 1e6 : 0;
}

/* A row: name, events, MB, then M events/s and peak RSS (old->new with --base). */
static void import_row(const char *name, int kind, const char *path, uint64_t events)
{
    struct stat sb;
    double mb = stat(path, &sb) == 0 ? (double)sb.st_size / 1e6 : 0, rss = 0, orss = 0;
    double rate = import_cell(self_exe, kind, path, events, kind == 7 ? &rss : NULL);
    char cell[64], mem[48] = "";
    if (base_exe) {
        double old = import_cell(base_exe, kind, path, events, kind == 7 ? &orss : NULL);
        snprintf(cell, sizeof cell, "%.2f->%.2f", old, rate);
        if (kind == 7)
            snprintf(mem, sizeof mem, "%.1f->%.1f MiB", orss, rss);
    } else {
        snprintf(cell, sizeof cell, "%.2f", rate);
        if (kind == 7)
            snprintf(mem, sizeof mem, "%.1f MiB", rss);
    }
    printf("  %-46s %9llu %7.1f  %-14s %s\n", name, (unsigned long long)events, mb, cell, mem);
}

/* A plain (decompressed) copy of a shipped snapshot: dir/STEM.pickle; 0 or -1. */
static int plain_copy(const char *dir, const char *snap, char *out, size_t n)
{
    const char *base = strrchr(snap, '/') ? strrchr(snap, '/') + 1 : snap;
    struct stat sb;
    snprintf(out, n, "%s/%.*s.pickle", dir, (int)strcspn(base, "."), base);
    return stat(out, &sb) == 0 ? 0 : unzstd(snap, out);
}

/* A long pickle from real ones (traces/long_snapshot.py OUT N IN...), once; 0 or -1. */
static int long_pickle(const char *out, unsigned rounds, char in[][512], size_t nin)
{
    struct stat sb;
    char cmd[4096];
    if (stat(out, &sb) == 0)
        return 0;
    int k = snprintf(cmd, sizeof cmd, "python3 traces/long_snapshot.py '%s' %u", out, rounds);
    for (size_t i = 0; i < nin && k > 0 && (size_t)k < sizeof cmd; i++)
        k += snprintf(cmd + k, sizeof cmd - (size_t)k, " '%s'", in[i]);
    if (system(cmd) != 0 || stat(out, &sb) != 0) {
        fprintf(stderr, "allocsim-bench: no long pickle (%s): its rows left out\n", cmd);
        return -1;
    }
    return 0;
}

/* Snapshots recorded with Python and C++ stacks (_record_memory_history(context="all",
 * stacks="all")), as users have them: over a hundred frames an allocation, fresh frame dicts
 * among references. Plain and as shipped. */
static void stacked_rows(const char *dir)
{
    static const char *const snaps[] = {
        "tests/data/torch-2.11-h200-graphs/dyn.pickle.zst",
        "tests/data/torch-2.11-h200-graphs/infer.pickle.zst",
    };
    char plain[512], name[96];
    for (size_t i = 0; i < sizeof snaps / sizeof snaps[0]; i++) {
        const char *base = strrchr(snaps[i], '/') + 1;
        uint64_t n = count_events(snaps[i]);
        if (!n || plain_copy(dir, snaps[i], plain, sizeof plain)) {
            fprintf(stderr, "allocsim-bench: %s: its import rows left out\n", snaps[i]);
            continue;
        }
        snprintf(name, sizeof name, "%.*s (stacks), plain", (int)strcspn(base, "."), base);
        import_row(name, 7, plain, n);
        snprintf(name, sizeof name, "%s (zstd -19, shipped)", base);
        import_row(name, 7, snaps[i], n);
    }
}

/* Snapshot import, decode only: the shared snapshots as shipped (zstd -19) and plain (as
 * _dump_snapshot writes them), then long pickles made of them (traces/long_snapshot.py:
 * llama 8 times, 605,792 events; all four 10 times, about 1.4 M events, past the buffer
 * of the one-pass mode), plain and zstd -3; each compressed one's decompression alone is
 * the ceiling of any reader of it. The same events in the native format for scale. */
static void pickle_rows(const char *dir)
{
    static const char *const snaps[] = {
        "tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst",
        "tests/data/torch-2.11-h200/moe_like.pickle.zst",
        "tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst",
        "tests/data/torch-2.11-h200-streams/streams2_default.pickle.zst",
    };
    enum { NS = sizeof snaps / sizeof snaps[0] };
    char plain[NS][512], path[512], lz[520], nat[512];
    as_trace_error err;
    struct stat sb;
    printf("\nsnapshot import, decode only (whole-process CPU, one core; a small input is "
           "decoded R times in one process; peak RSS of that process%s):\n",
           base_exe ? "; old->new" : "");
    printf("  %-46s %9s %7s  %-14s %s\n", "pickle", "events", "MB", "M events/s", "peak RSS");
    for (size_t i = 0; i < NS; i++) {
        const char *base = strrchr(snaps[i], '/') + 1;
        uint64_t n = count_events(snaps[i]);
        char name[96];
        if (!n || plain_copy(dir, snaps[i], plain[i], sizeof plain[i])) {
            fprintf(stderr, "allocsim-bench: %s: import rows left out\n", snaps[i]);
            return;
        }
        snprintf(name, sizeof name, "%.*s, plain", (int)strcspn(base, "."), base);
        import_row(name, 7, plain[i], n);
        snprintf(name, sizeof name, "%s (zstd -19, shipped)", base);
        import_row(name, 7, snaps[i], n);
        import_row("  its decompression alone", 6, snaps[i], n);
    }
    stacked_rows(dir);
    static const struct {
        const char *name;
        unsigned rounds;
        int all; /* 1: every snapshot above, 0: llama alone */
    } longs[] = {{"llama-x8", 8, 0}, {"all4-x10", 10, 1}};
    for (size_t i = 0; i < sizeof longs / sizeof longs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s.pickle", dir, longs[i].name);
        if (long_pickle(path, longs[i].rounds, longs[i].all ? plain : plain + 2,
                        longs[i].all ? NS : 1))
            continue;
        uint64_t n = count_events(path);
        char name[96];
        snprintf(name, sizeof name, "%s.pickle, plain", longs[i].name);
        import_row(name, 7, path, n);
        snprintf(lz, sizeof lz, "%s.zst", path);
        if (stat(lz, &sb) != 0 && zstd3(path, lz)) {
            fprintf(stderr, "allocsim-bench: cannot compress %s: its zstd rows left out\n", path);
            continue;
        }
        snprintf(name, sizeof name, "%s.pickle.zst (zstd -3)", longs[i].name);
        import_row(name, 7, lz, n);
        import_row("  its decompression alone", 6, lz, n);
        snprintf(nat, sizeof nat, "%s/%s-from-pickle.zst", dir, longs[i].name);
        if (stat(nat, &sb) != 0 &&
            as_trace_convert(path, nat, AS_FMT_NATIVE, NULL, NULL, NULL, &err)) {
            fprintf(stderr, "allocsim-bench: %s: %s\n", path, err.msg);
            continue;
        }
        import_row("  the same events, native", 7, nat, n);
    }
}

/* allocsim tune on each shared snapshot at a card where the default runs out: the 252
 * settings at the usable size (one decode, one thread, no curves) against one run. */
static void tune_rows(const char *dir)
{
    static const struct {
        const char *snap, *card;
        uint64_t cap;
    } tc[] = {
        {"tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst", "9.6GB", 8812000000ull},
        {"tests/data/torch-2.11-h200/moe_like.pickle.zst", "12GB", 11212000000ull},
        {"tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst", "8GiB", 7801934592ull},
    };
    printf("\ntune, 252 settings at the usable size of a card (- 788 MB outside), one thread, no "
           "curves; CPU s\n");
    for (size_t i = 0; i < sizeof tc / sizeof tc[0]; i++) {
        char nat[512];
        const char *b = strrchr(tc[i].snap, '/');
        snprintf(nat, sizeof nat, "%s/tune-%s", dir, b + 1);
        as_trace_error err;
        struct stat sb;
        if (stat(nat, &sb) != 0 &&
            as_trace_convert(tc[i].snap, nat, AS_FMT_NATIVE, NULL, NULL, NULL, &err)) {
            fprintf(stderr, "allocsim-bench: %s: %s\n", tc[i].snap, err.msg);
            continue;
        }
        double r1, rn, one = measure(self_exe, 2, nat, NULL, tc[i].cap, &r1);
        double all = measure(self_exe, 3, nat, NULL, tc[i].cap, &rn);
        printf("  %-28s %-6s tune %6.2f s, one run %6.3f s: %5.0fx one run for 252\n", b + 1,
               tc[i].card, all, one, one > 0 ? all / one : 0);
    }
}

int main(int argc, char **argv)
{
    const char *dir = "build/bench", *commit = NULL;
    uint64_t target = REAL_EVENTS;
    int quick = 0, import_only = 0, startup_only = 0;
    if (argc == 9 && strcmp(argv[1], "--launch") == 0 && strcmp(argv[3], "--child") == 0)
        return launch_main(argv);
    if (argc == 7 && strcmp(argv[1], "--child") == 0) {
        bench_res x = {0};
        uint64_t cap = strtoull(argv[6], NULL, 10);
        const char *spec = strcmp(argv[5], "-") ? argv[5] : NULL;
        int kind = atoi(argv[2]);
        unsigned r = spec ? (unsigned)atoi(spec) : 1;
        if (kind == 0)
            decode_file(argv[4], &x);
        else if (kind == 7) /* decode, r times */
            for (unsigned i = 0; i < r && (i == 0 || x.ok); i++)
                x.ok = 0, decode_file(argv[4], &x);
        else if (kind == 6) /* decompression alone, r times */
            for (unsigned i = 0; i < r && (i == 0 || x.ok); i++)
                unzstd_only(argv[4], cap, &x);
        else if (kind >= 4)
            mincap_run(argv[4], spec, kind == 5, &x);
        else if (kind >= 2)
            tune_run(argv[4], kind == 3, cap, &x);
        else
            engine_run(argv[4], spec, cap, &x);
        return write(atoi(argv[3]), &x, sizeof x) == (ssize_t)sizeof x ? 0 : 1;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--commit") == 0 && i + 1 < argc)
            commit = argv[++i];
        else if (strcmp(argv[i], "--base") == 0 && i + 1 < argc)
            base_exe = argv[++i];
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0)
            reps = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0)
            quick = 1, target = 1000000;
        else if (strcmp(argv[i], "--markdown") == 0)
            markdown = 1;
        else if (strcmp(argv[i], "--import") == 0)
            import_only = 1;
        else if (strcmp(argv[i], "--startup") == 0)
            startup_only = 1;
        else {
            fprintf(stderr,
                    "usage: allocsim-bench [--dir DIR] [--reps N] [--commit ID] [--base EXE] "
                    "[--quick] [--markdown] [--import] [--startup]\n"
                    "  --reps N: each cell the best of N processes (default 1)\n"
                    "  --base EXE: an earlier build's allocsim-bench, measured beside "
                    "this one, cell by cell\n"
                    "  --quick: 1 M event traces\n"
                    "  --markdown: the table in Markdown (README)\n"
                    "  --import: the snapshot import rows alone\n"
                    "  --startup: the start-up rows alone\n");
            return 2;
        }
    }
    static char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) {
        fprintf(stderr, "allocsim-bench: cannot find my own executable\n");
        return 1;
    }
    self[sl] = 0;
    self_exe = self;
    if (import_only || startup_only) {
        mkdir(dir, 0777);
        events_cells = import_only;
        machine(commit, dir);
        if (import_only)
            pickle_rows(dir);
        if (startup_only)
            startup_rows(dir);
        return 0;
    }
    trace_in t[MAX_TRACES] = {0};
    char p1[512];
    snprintf(t[0].path, sizeof t[0].path, "%s/transformer-10M.zst", dir);
    snprintf(p1, sizeof p1, "%s/transformer-1M.zst", dir);
    mkdir(dir, 0777);
    if (gen_trace(p1, STEPS_1M) || gen_trace(t[0].path, STEPS_10M))
        return 1;
    if (quick)
        snprintf(t[0].path, sizeof t[0].path, "%s", p1);
    snprintf(t[0].name, sizeof t[0].name, "generated");
    t[0].events = count_events(t[0].path);
    int nr = find_real(dir, target, t + 1, MAX_TRACES - 1);
    if (nr < 0)
        return 1;
    machine(commit, dir);
    run_bench(t, 1 + nr);
    if (!quick)
        rss_rows(p1, t[0].path);
    pickle_rows(dir);
    tune_rows(dir);
    mincap_rows();
    startup_rows(dir);
    return 0;
}
