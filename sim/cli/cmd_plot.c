/*
 * cmd_plot.c - `allocsim plot KIND`: draws a chart with the gnuplot scripts in plots/.
 *
 * The data always goes through the CSV files that allocsim writes, so a chart can be
 * redrawn by hand with gnuplot from the same files (--keep DIR keeps them). Given a trace,
 * the command runs this same allocsim binary (run, mincap) to make the CSV first, then
 * runs `gnuplot -e "in='...'; out='...'" SCRIPT`. Scripts are found, in order, in
 * --scripts DIR, $ALLOCSIM_PLOTS, next to the binary's source tree (BIN/../plots,
 * BIN/plots) and in the install tree (BIN/../share/allocsim/plots).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "options.h"
#include "outfile.h"
#include "plot_csv.h"

extern char **environ;

#define MAX_ARGS 256

/* The columns each script reads, checked in a CSV the user gives (plot_csv.c), so that a
 * wrong file is named with what is missing rather than by a gnuplot error in our script. */
static const char *const timeline_cols[] = {"run",       "event",     "alloc",    "time_us",
                                            "requested", "allocated", "reserved", NULL};
static const char *const runs_cols[] = {"file", "policy", "capacity", "oom_alloc", NULL};
static const char *const seg_runs_cols[] = {"policy",       "capacity", "oom_alloc",
                                            "oom_reserved", "oom_size", NULL};
static const char *const compare_cols[] = {
    "file", "policy", "capacity", "completed", "peak_requested", "peak_reserved", "waste", NULL};
static const char *const capacity_cols[] = {"file",   "policy",    "capacity",       "completed",
                                            "allocs", "oom_alloc", "peak_requested", NULL};
static const char *const segmap_cols[] = {"run",      "when",       "segment",    "seg_addr",
                                          "seg_size", "block_addr", "block_size", "state",
                                          "stream",   NULL};
static const char *const validation_cols[] = {
    "policy",    "capacity",           "pred_oom_alloc",     "meas_oom_alloc",
    "oom_match", "pred_peak_reserved", "meas_peak_reserved", "peak_match",
    NULL};

#define RUNS_WHAT "a run report from `allocsim run -f csv`"

static const char plot_help[] =
    "usage: allocsim plot KIND [options] -o FILE.png|FILE.svg [TRACE...]\n"
    "\n"
    "Draws a chart with gnuplot. Given traces, runs the simulation first; given --csv,\n"
    "draws from CSV files that allocsim wrote earlier.\n"
    "\n"
    "KIND\n"
    "  timeline    requested, allocated and reserved through one TRACE for every -p and -c,\n"
    "              with capacities and OOM points    (--csv TIMELINE.csv [--runs RUNS.csv])\n"
    "  compare     peak reserved and waste per policy and TRACE over a corpus\n"
    "                                                (--csv REPORT.csv from run -f csv)\n"
    "  capacity    how far TRACE gets at each capacity from peak requested to peak\n"
    "              reserved, per -p; the minimum capacity and failures above it\n"
    "                                                (--csv SWEEP.csv from mincap --csv or\n"
    "                                                 run --sweep -f csv)\n"
    "  segments    the segment map of one run at its reserved peak or its OOM\n"
    "                                                (--csv SEGMAP.csv [--runs RUNS.csv])\n"
    "  validation  predicted against measured OOM point and peak reserved\n"
    "                                                (--csv VALIDATION.csv)\n"
    "\n"
    "options\n"
    "  -o, --output FILE     the chart: .png (pngcairo) or .svg\n"
    "  -p, --policy SPEC     as for run (repeatable; default torch)\n"
    "  -c, --capacity CAP    as for run (repeatable)\n"
    "      --sweep LO:HI:STEP  capacity: sweep these capacities instead of the full mincap\n"
    "                        range\n"
    "      --csv FILE        draw from this CSV instead of running a trace: timeline from\n"
    "                        run --timeline, compare from run -f csv, capacity from\n"
    "                        mincap --csv or run --sweep -f csv, segments from run\n"
    "                        --segment-map\n"
    "      --runs FILE       timeline, segments: the run report (-f csv) that goes with\n"
    "                        --csv: names policies, capacities and OOMs\n"
    "      --every N         timeline: sample every N events (default 100)\n"
    "      --x event|alloc|time  timeline: the x axis (default event)\n"
    "      --when peak|oom   segments: which map (default: oom if the run hit one)\n"
    "      --run N           segments: which run of the CSV (default 0)\n"
    "      --layout bytes|wrap|fraction  segments: a row per segment as long as its size,\n"
    "                        rows of equal bytes (a segment wraps onto several), or a row\n"
    "                        per segment all equally long (default: wrap when one segment\n"
    "                        holds over a quarter of the reserved bytes, else bytes)\n"
    "      --title TEXT      the chart's title\n"
    "      --size WxH        pixels (default depends on the chart)\n"
    "      --keep DIR        keep the CSV files made on the way in DIR\n"
    "      --scripts DIR     where the gnuplot scripts are\n"
    "  -q, --quiet           no output from the runs\n"
    "  -v, --verbose         show gnuplot's warnings even when it succeeds\n"
    "\n"
    "Environment: GNUPLOT (the gnuplot program), ALLOCSIM_PLOTS (the scripts' folder).\n"
    "Exit status: 0 drawn, 1 bad input or a failed run or gnuplot, 2 usage error.\n";

enum {
    OPT_SWEEP = 256,
    OPT_CSV,
    OPT_RUNS,
    OPT_EVERY,
    OPT_X,
    OPT_WHEN,
    OPT_RUN,
    OPT_LAYOUT,
    OPT_TITLE,
    OPT_SIZE,
    OPT_KEEP,
    OPT_SCRIPTS,
};

static const struct option plot_opts[] = {
    {"output", required_argument, NULL, 'o'},
    {"capacity", required_argument, NULL, 'c'},
    {"sweep", required_argument, NULL, OPT_SWEEP},
    {"csv", required_argument, NULL, OPT_CSV},
    {"runs", required_argument, NULL, OPT_RUNS},
    {"every", required_argument, NULL, OPT_EVERY},
    {"x", required_argument, NULL, OPT_X},
    {"when", required_argument, NULL, OPT_WHEN},
    {"run", required_argument, NULL, OPT_RUN},
    {"layout", required_argument, NULL, OPT_LAYOUT},
    {"title", required_argument, NULL, OPT_TITLE},
    {"size", required_argument, NULL, OPT_SIZE},
    {"keep", required_argument, NULL, OPT_KEEP},
    {"scripts", required_argument, NULL, OPT_SCRIPTS},
    {"verbose", no_argument, NULL, 'v'},
    AS_CLI_BASE_OPTIONS,
    {NULL, 0, NULL, 0},
};

typedef struct plot_args {
    const char *kind, *out, *csv, *runs, *sweep, *x, *when, *layout, *title, *size;
    const char *keep, *scripts;
    as_cli_common co; /* -p (into pol), -q */
    const char *pol[MAX_ARGS], *cap[MAX_ARGS];
    unsigned ncap;
    uint64_t every, run;
    int verbose, help;
    char dir[PATH_MAX]; /* where the CSV files go */
    int tmpdir;         /* dir is ours to remove */
    const char *chart;  /* where gnuplot writes: a temporary file beside out */
    int slots[8];       /* registered temporary files and dir (outfile.h), -1 when none */
} plot_args;

/* An argv under construction: room for every -p and -c (two words each) and the rest,
 * so that a push can fail only for too many traces (checked where they are pushed). */
typedef struct argv_t {
    const char *a[4 * MAX_ARGS + 64];
    unsigned n;
} argv_t;

static int push(argv_t *v, const char *s)
{
    if (v->n + 1 >= sizeof v->a / sizeof v->a[0])
        return -1;
    v->a[v->n++] = s;
    v->a[v->n] = NULL;
    return 0;
}

/* Runs v (PATH lookup) with stdout to out_path (or /dev/null when quiet and out_path is
 * NULL) and stderr to err_path when given. Returns its exit status, 127 when it could not
 * start, or 128 + the signal that killed it. */
static int spawn(const argv_t *v, const char *out_path, int quiet, const char *err_path)
{
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int st = 0;
    posix_spawn_file_actions_init(&fa);
    if (out_path)
        posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    else if (quiet)
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (err_path)
        posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int rc = posix_spawnp(&pid, v->a[0], &fa, NULL, (char *const *)(uintptr_t)v->a, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) {
        as_cli_msg("cannot run %s: %s", v->a[0], strerror(rc));
        return 127;
    }
    int forwarded = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return 127;
        /* A SIGTERM sent to plot alone stops its run too; a Ctrl-C reached the whole
         * process group already (a second signal would make the run exit at once). */
        if (as_out_stop == SIGTERM && !forwarded++)
            kill(pid, SIGTERM);
    }
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static int self_path(char *buf, size_t n)
{
    ssize_t k = readlink("/proc/self/exe", buf, n - 1);
    if (k <= 0)
        return -1;
    buf[k] = 0;
    return 0;
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Finds SCRIPT.gp; fills path. */
static int find_script(const plot_args *a, const char *name, char *path, size_t n)
{
    char exe[PATH_MAX], dir[PATH_MAX];
    const char *cands[5];
    unsigned nc = 0;
    if (a->scripts)
        cands[nc++] = a->scripts;
    if (getenv("ALLOCSIM_PLOTS"))
        cands[nc++] = getenv("ALLOCSIM_PLOTS");
    char d1[PATH_MAX + 32], d2[PATH_MAX + 32], d3[PATH_MAX + 32];
    if (self_path(exe, sizeof exe) == 0) {
        snprintf(dir, sizeof dir, "%s", exe);
        char *sl = strrchr(dir, '/');
        if (sl)
            *sl = 0;
        snprintf(d1, sizeof d1, "%s/../plots", dir);
        snprintf(d2, sizeof d2, "%s/plots", dir);
        snprintf(d3, sizeof d3, "%s/../share/allocsim/plots", dir);
        cands[nc++] = d1;
        cands[nc++] = d2;
        cands[nc++] = d3;
    }
    for (unsigned i = 0; i < nc; i++) {
        snprintf(path, n, "%s/%s.gp", cands[i], name);
        if (is_file(path))
            return 0;
    }
    as_cli_msg("plot: cannot find %s.gp (looked in --scripts, $ALLOCSIM_PLOTS, "
               "BIN/../plots, BIN/plots, BIN/../share/allocsim/plots)",
               name);
    return -1;
}

/* Appends name='value' to a gnuplot -e string, doubling single quotes as gnuplot's
 * single-quoted strings want. */
static int gp_set(char *buf, size_t n, const char *name, const char *value)
{
    size_t len = strlen(buf);
    int k = snprintf(buf + len, n - len, "%s='", name);
    if (k < 0 || (size_t)k >= n - len)
        return -1;
    len += (size_t)k;
    for (const char *s = value; *s; s++) {
        if (len + 3 >= n)
            return -1;
        if (*s == '\'')
            buf[len++] = '\'';
        buf[len++] = *s;
    }
    if (len + 3 >= n)
        return -1;
    buf[len++] = '\'';
    buf[len++] = ';';
    buf[len++] = ' ';
    buf[len] = 0;
    return 0;
}

static int gp_setn(char *buf, size_t n, const char *name, uint64_t v)
{
    size_t len = strlen(buf);
    int k = snprintf(buf + len, n - len, "%s=%llu; ", name, (unsigned long long)v);
    return k < 0 || (size_t)k >= n - len ? -1 : 0;
}

/* Copies a file to stderr (gnuplot's messages when it failed). */
static void show_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char buf[4096];
    size_t n;
    if (!f)
        return;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, stderr);
    fclose(f);
}

/* Runs gnuplot. Its messages (warnings such as "no valid points" for a series that is
 * empty in this data set) are shown only when it fails, or with --verbose. */
static int run_gnuplot(const plot_args *a, const char *script, const char *vars)
{
    char path[PATH_MAX + 64], log[PATH_MAX];
    if (find_script(a, script, path, sizeof path))
        return AS_EXIT_INPUT;
    argv_t v = {.n = 0};
    const char *gp = getenv("GNUPLOT");
    push(&v, gp && *gp ? gp : "gnuplot");
    push(&v, "-e");
    push(&v, vars);
    push(&v, path);
    const char *t = getenv("TMPDIR");
    snprintf(log, sizeof log, "%s/allocsim-gnuplot-XXXXXX", t && *t ? t : "/tmp");
    int slot = -1, fd = a->verbose ? -1 : as_out_mkstemps(log, 0, &slot);
    if (fd >= 0)
        close(fd);
    int st = spawn(&v, NULL, 0, fd >= 0 ? log : NULL);
    if (st && !as_out_stop) {
        if (fd >= 0)
            show_file(log);
        as_cli_msg("plot: gnuplot %s failed (exit status %d)", path, st);
    }
    if (fd >= 0)
        unlink(log);
    as_out_tmp_del(slot);
    return st ? AS_EXIT_INPUT : AS_EXIT_OK;
}

/* Runs `allocsim ARGS` (this binary); stdout to out_path when given. */
static int run_self(const plot_args *a, argv_t *v, const char *out_path)
{
    int st = spawn(v, out_path, a->co.quiet, NULL);
    if (st == 1 || st == 2 || st == AS_EXIT_SIGNAL)
        return st; /* the run printed why */
    if (st) {
        as_cli_msg("plot: %s %s failed (exit status %d)", v->a[0], v->a[1], st);
        return AS_EXIT_INPUT;
    }
    return AS_EXIT_OK;
}

static void path_in(const plot_args *a, const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", a->dir, name);
}

/* Reads the segment map CSV: does run `run` have an "oom" map? 1 yes, 0 no, -1 error. */
static int segmap_has_oom(const char *path, uint64_t run)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        char *end;
        unsigned long long r = strtoull(line, &end, 10);
        if (end != line && *end == ',' && r == run && strncmp(end + 1, "oom,", 4) == 0) {
            found = 1;
            break;
        }
    }
    fclose(f);
    return found;
}

static void add_specs(const plot_args *a, argv_t *v, int caps)
{
    for (unsigned i = 0; i < a->co.np; i++) {
        push(v, "-p");
        push(v, a->pol[i]);
    }
    for (unsigned i = 0; caps && i < a->ncap; i++) {
        push(v, "-c");
        push(v, a->cap[i]);
    }
}

/* Starts v as the child `allocsim run` every chart built from traces runs: plot's -p (and,
 * with caps, its -c) options, --sweep when sweep is given, then a quiet CSV report to
 * report_path. The caller appends its own options and the traces. */
static void run_argv(const plot_args *a, argv_t *v, char *self, int caps, const char *sweep,
                     const char *report_path)
{
    push(v, self);
    push(v, "run");
    add_specs(a, v, caps);
    if (sweep) {
        push(v, "--sweep");
        push(v, sweep);
    }
    push(v, "-q");
    push(v, "-f");
    push(v, "csv");
    push(v, "-o");
    push(v, report_path);
}

static void common_vars(const plot_args *a, char *vars, size_t n)
{
    if (a->title)
        gp_set(vars, n, "title", a->title);
    if (a->size) {
        char sz[64];
        snprintf(sz, sizeof sz, "%s", a->size);
        char *x = strchr(sz, 'x');
        if (x)
            *x = ',';
        gp_set(vars, n, "size", sz);
    }
    gp_set(vars, n, "out", a->chart);
}

static int plot_timeline(plot_args *a, char **traces, int ntr, char *self)
{
    char runs[PATH_MAX + 32], tl[PATH_MAX + 32], vars[8192] = "";
    char every[32];
    int rc;
    if (ntr) {
        if (ntr != 1)
            return as_cli_usage("plot", "timeline takes one trace (got %d)", ntr);
        path_in(a, "runs.csv", runs, sizeof runs);
        path_in(a, "timeline.csv", tl, sizeof tl);
        snprintf(every, sizeof every, "%llu", (unsigned long long)a->every);
        argv_t v = {.n = 0};
        run_argv(a, &v, self, 1, NULL, runs);
        push(&v, "--timeline");
        push(&v, tl);
        push(&v, "--timeline-every");
        push(&v, every);
        push(&v, traces[0]);
        if ((rc = run_self(a, &v, NULL)))
            return rc;
    } else {
        if (!a->csv)
            return as_cli_usage("plot", "timeline needs a trace, or --csv TIMELINE.csv "
                                        "(and --runs RUNS.csv)");
        snprintf(tl, sizeof tl, "%s", a->csv);
        snprintf(runs, sizeof runs, "%s", a->runs ? a->runs : "");
        if ((rc = as_plot_check_csv(tl, "a timeline from `allocsim run --timeline`",
                                    timeline_cols)) ||
            (runs[0] && (rc = as_plot_check_csv(runs, RUNS_WHAT, runs_cols))))
            return rc;
    }
    gp_set(vars, sizeof vars, "in", tl);
    if (runs[0])
        gp_set(vars, sizeof vars, "runs", runs);
    if (a->x)
        gp_set(vars, sizeof vars, "x", a->x);
    common_vars(a, vars, sizeof vars);
    return run_gnuplot(a, "timeline", vars);
}

static int plot_compare(plot_args *a, char **traces, int ntr, char *self)
{
    char rep[PATH_MAX + 32], vars[8192] = "";
    int rc;
    if (ntr) {
        path_in(a, "report.csv", rep, sizeof rep);
        argv_t v = {.n = 0};
        run_argv(a, &v, self, 1, NULL, rep);
        for (int i = 0; i < ntr; i++)
            if (push(&v, traces[i]))
                return as_cli_usage("plot", "too many traces");
        if ((rc = run_self(a, &v, NULL)))
            return rc;
    } else {
        if (!a->csv)
            return as_cli_usage("plot", "compare needs traces or --csv REPORT.csv");
        snprintf(rep, sizeof rep, "%s", a->csv);
        if ((rc = as_plot_check_csv(rep, RUNS_WHAT, compare_cols)))
            return rc;
    }
    gp_set(vars, sizeof vars, "in", rep);
    common_vars(a, vars, sizeof vars);
    return run_gnuplot(a, "compare", vars);
}

static int plot_capacity(plot_args *a, char **traces, int ntr, char *self)
{
    char sw[PATH_MAX + 32], vars[8192] = "";
    int rc;
    if (ntr) {
        if (ntr != 1)
            return as_cli_usage("plot", "capacity takes one trace (got %d)", ntr);
        path_in(a, "sweep.csv", sw, sizeof sw);
        argv_t v = {.n = 0};
        if (a->sweep) {
            run_argv(a, &v, self, 0, a->sweep, sw);
        } else {
            push(&v, self);
            push(&v, "mincap");
            add_specs(a, &v, 0);
            push(&v, "--csv");
            push(&v, sw);
        }
        push(&v, traces[0]);
        if ((rc = run_self(a, &v, NULL)))
            return rc;
    } else {
        if (!a->csv)
            return as_cli_usage("plot", "capacity needs a trace or --csv SWEEP.csv");
        snprintf(sw, sizeof sw, "%s", a->csv);
        if ((rc = as_plot_check_csv(sw,
                                    "a sweep from `allocsim mincap --csv` or `run --sweep "
                                    "-f csv`",
                                    capacity_cols)))
            return rc;
    }
    gp_set(vars, sizeof vars, "in", sw);
    common_vars(a, vars, sizeof vars);
    return run_gnuplot(a, "capacity", vars);
}

static int plot_segments(plot_args *a, char **traces, int ntr, char *self)
{
    char sm[PATH_MAX + 32], runs[PATH_MAX + 32], vars[8192] = "";
    int rc;
    if (ntr) {
        if (ntr != 1)
            return as_cli_usage("plot", "segments takes one trace (got %d)", ntr);
        path_in(a, "segmap.csv", sm, sizeof sm);
        path_in(a, "runs.csv", runs, sizeof runs);
        argv_t v = {.n = 0};
        run_argv(a, &v, self, 1, NULL, runs);
        push(&v, "--segment-map");
        push(&v, sm);
        push(&v, traces[0]);
        if ((rc = run_self(a, &v, NULL)))
            return rc;
    } else {
        if (!a->csv)
            return as_cli_usage("plot", "segments needs a trace or --csv SEGMAP.csv");
        snprintf(sm, sizeof sm, "%s", a->csv);
        snprintf(runs, sizeof runs, "%s", a->runs ? a->runs : "");
        if ((rc = as_plot_check_csv(sm, "a segment map from `allocsim run --segment-map`",
                                    segmap_cols)) ||
            (runs[0] && (rc = as_plot_check_csv(runs, RUNS_WHAT, seg_runs_cols))))
            return rc;
    }
    const char *when = a->when;
    if (!when) {
        int h = segmap_has_oom(sm, a->run);
        if (h < 0) {
            as_cli_msg("%s: cannot read: %s", sm, strerror(errno));
            return AS_EXIT_INPUT;
        }
        when = h ? "oom" : "peak";
    }
    gp_set(vars, sizeof vars, "in", sm);
    if (runs[0])
        gp_set(vars, sizeof vars, "runs", runs);
    gp_set(vars, sizeof vars, "when", when);
    gp_setn(vars, sizeof vars, "run", a->run);
    if (a->layout)
        gp_set(vars, sizeof vars, "x", a->layout);
    common_vars(a, vars, sizeof vars);
    return run_gnuplot(a, "segments", vars);
}

static int plot_validation(plot_args *a, int ntr)
{
    char vars[8192] = "";
    if (ntr || !a->csv)
        return as_cli_usage("plot", "validation draws from --csv VALIDATION.csv only");
    int rc = as_plot_check_csv(a->csv, "a validation table from `allocsim compare -f csv`",
                               validation_cols);
    if (rc)
        return rc;
    gp_set(vars, sizeof vars, "in", a->csv);
    common_vars(a, vars, sizeof vars);
    return run_gnuplot(a, "validation", vars);
}

/* mkdir -p: 0 when path is a directory afterwards. */
static int mkdir_p(const char *path)
{
    char p[PATH_MAX];
    struct stat st;
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0755) && errno != EEXIST)
            return -1;
        *s = '/';
    }
    if (mkdir(p, 0755) && errno != EEXIST)
        return -1;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* 1 when the chart gnuplot wrote is whole: a PNG ends with its IEND chunk, an SVG with
 * </svg>. gnuplot exits 0 after a write that failed (ENOSPC on a full disk: 32 KiB of a
 * 98 KiB PNG), so its status alone would rename a broken file over the target. */
static int chart_complete(const char *path, const char *name)
{
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
    unsigned char tail[64];
    size_t n = 0;
    FILE *f = fopen(path, "rb");
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        long from = len > (long)sizeof tail ? len - (long)sizeof tail : 0;
        if (len > 0 && fseek(f, from, SEEK_SET) == 0)
            n = fread(tail, 1, sizeof tail, f);
    }
    if (f)
        fclose(f);
    if (ends_with(name, ".png"))
        return n >= sizeof iend && !memcmp(tail + n - sizeof iend, iend, sizeof iend);
    while (n && (tail[n - 1] == '\n' || tail[n - 1] == '\r' || tail[n - 1] == ' '))
        n--;
    return n >= 6 && !memcmp(tail + n - 6, "</svg>", 6);
}

static const char *const tmp_names[] = {"runs.csv", "timeline.csv", "report.csv", "sweep.csv",
                                        "segmap.csv"};

/* Makes the temporary directory and registers it and the files the runs make in it, so
 * that every exit path, a signal included, removes them. 0 or an exit status. */
static int make_tmpdir(plot_args *a)
{
    const char *t = getenv("TMPDIR");
    char p[PATH_MAX + 32];
    snprintf(a->dir, sizeof a->dir, "%s/allocsim-plot-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(a->dir))
        return as_cli_cannot_create(a->dir, errno);
    a->tmpdir = 1;
    for (size_t i = 0; i < sizeof tmp_names / sizeof tmp_names[0]; i++) {
        path_in(a, tmp_names[i], p, sizeof p);
        a->slots[i] = as_out_tmp_add(p);
    }
    a->slots[sizeof tmp_names / sizeof tmp_names[0]] = as_out_tmp_add(a->dir);
    return AS_EXIT_OK;
}

/* Removes the files we made in a temporary directory, then the directory. */
static void cleanup_dir(const plot_args *a)
{
    char p[PATH_MAX + 32];
    if (!a->tmpdir)
        return;
    for (size_t i = 0; i < sizeof tmp_names / sizeof tmp_names[0]; i++) {
        path_in(a, tmp_names[i], p, sizeof p);
        unlink(p);
    }
    rmdir(a->dir);
    for (size_t i = 0; i < sizeof a->slots / sizeof a->slots[0]; i++)
        as_out_tmp_del(a->slots[i]);
}

/* One option of getopt_long's: 0 or an exit status. */
static int plot_option(const char *cmd, int c, char **argv, plot_args *a)
{
    switch (c) {
    case 'o':
        a->out = optarg;
        return 0;
    case 'c':
        if (a->ncap == MAX_ARGS)
            return as_cli_usage(cmd, "too many -c");
        a->cap[a->ncap++] = optarg;
        return 0;
    case OPT_SWEEP:
        a->sweep = optarg;
        return 0;
    case OPT_CSV:
        a->csv = optarg;
        return 0;
    case OPT_RUNS:
        a->runs = optarg;
        return 0;
    case OPT_EVERY:
        if (as_cli_parse_u64(optarg, &a->every) || a->every == 0)
            return as_cli_usage(cmd, "--every %s: a positive count", optarg);
        return 0;
    case OPT_X:
        if (strcmp(optarg, "event") && strcmp(optarg, "alloc") && strcmp(optarg, "time"))
            return as_cli_usage(cmd, "--x %s: event, alloc or time", optarg);
        a->x = optarg;
        return 0;
    case OPT_WHEN:
        if (strcmp(optarg, "peak") && strcmp(optarg, "oom"))
            return as_cli_usage(cmd, "--when %s: peak or oom", optarg);
        a->when = optarg;
        return 0;
    case OPT_RUN:
        if (as_cli_parse_u64(optarg, &a->run))
            return as_cli_usage(cmd, "--run %s: a run index", optarg);
        return 0;
    case OPT_LAYOUT:
        if (strcmp(optarg, "bytes") && strcmp(optarg, "wrap") && strcmp(optarg, "fraction"))
            return as_cli_usage(cmd, "--layout %s: bytes, wrap or fraction", optarg);
        a->layout = optarg;
        return 0;
    case OPT_TITLE:
        a->title = optarg;
        return 0;
    case OPT_SIZE: {
        unsigned w, h;
        char extra;
        if (sscanf(optarg, "%ux%u%c", &w, &h, &extra) != 2 || w < 200 || h < 150 || w > 10000 ||
            h > 10000)
            return as_cli_usage(cmd, "--size %s: WxH in pixels, e.g. 1200x700", optarg);
        a->size = optarg;
        return 0;
    }
    case OPT_KEEP:
        a->keep = optarg;
        return 0;
    case OPT_SCRIPTS:
        a->scripts = optarg;
        return 0;
    case 'v':
        a->verbose = 1;
        return 0;
    case 'h':
        fputs(plot_help, stdout);
        a->help = 1;
        return 0;
    }
    int ret = as_cli_common_option(cmd, c, optarg, &a->co);
    return ret == AS_CLI_NOT_COMMON ? as_cli_bad_option(cmd, c, argv) : ret;
}

static const char *const kinds[] = {"timeline", "compare", "capacity", "segments", "validation"};
#define NKINDS (sizeof kinds / sizeof kinds[0])

/* `plot KIND [options] TRACE...` into a; *k gets the kind's index. 0 or an exit status
 * (a->help: nothing more to do). */
static int plot_parse(const char *cmd, int argc, char **argv, plot_args *a, size_t *k)
{
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            fputs(plot_help, stdout);
            a->help = 1;
            return AS_EXIT_OK;
        }
        return as_cli_usage(cmd, "which chart? timeline, compare, capacity, segments or "
                                 "validation");
    }
    a->kind = argv[1];
    as_cli_common_init(&a->co, a->pol, MAX_ARGS, "policies");
    optind = 2;
    opterr = 0;
    int c, ret = 0;
    while (!ret && !a->help && (c = getopt_long(argc, argv, ":o:p:c:qvh", plot_opts, NULL)) != -1)
        ret = plot_option(cmd, c, argv, a);
    if (ret || a->help)
        return ret;
    if (!a->out)
        return as_cli_usage(cmd, "-o FILE.png or FILE.svg is required");
    if (!ends_with(a->out, ".png") && !ends_with(a->out, ".svg"))
        return as_cli_usage(cmd, "-o %s: the chart is .png or .svg", a->out);
    for (*k = 0; *k < NKINDS && strcmp(kinds[*k], a->kind);)
        ++*k;
    if (*k == NKINDS)
        return as_cli_usage(cmd,
                            "unknown chart '%s': timeline, compare, capacity, segments "
                            "or validation",
                            a->kind);
    return 0;
}

/* Where the runs' CSV files go (a temporary directory, or --keep's), and this binary, for
 * the charts that run traces. 0 or an exit status. */
static int plot_workdir(plot_args *a, char *self, size_t n)
{
    if (self_path(self, n)) {
        as_cli_msg("plot: cannot find the allocsim binary (/proc/self/exe)");
        return AS_EXIT_INPUT;
    }
    if (!a->keep)
        return make_tmpdir(a);
    if (mkdir_p(a->keep))
        return as_cli_cannot_create(a->keep, errno);
    snprintf(a->dir, sizeof a->dir, "%s", a->keep);
    return 0;
}

static int plot_draw(plot_args *a, size_t k, char **traces, int ntr, char *self)
{
    switch (k) {
    case 0:
        return plot_timeline(a, traces, ntr, self);
    case 1:
        return plot_compare(a, traces, ntr, self);
    case 2:
        return plot_capacity(a, traces, ntr, self);
    case 3:
        return plot_segments(a, traces, ntr, self);
    default:
        return plot_validation(a, ntr);
    }
}

int as_cmd_plot(int argc, char **argv)
{
    const char *cmd = "plot";
    plot_args a = {.every = 100, .slots = {-1, -1, -1, -1, -1, -1, -1, -1}};
    size_t k = 0;
    int ret = plot_parse(cmd, argc, argv, &a, &k);
    if (ret || a.help)
        return ret;
    char self[PATH_MAX];
    int ntr = argc - optind;
    if (ntr && k != 4 && (ret = plot_workdir(&a, self, sizeof self)))
        return ret;
    /* The chart goes to a temporary file beside -o, renamed into place once drawn; -o
     * must name none of the inputs. */
    const char *ins[MAX_ARGS + 2] = {a.csv, a.runs};
    size_t nin = 2;
    for (int i = optind; i < argc && nin < sizeof ins / sizeof ins[0]; i++)
        ins[nin++] = argv[i];
    as_out *chart = NULL;
    if ((ret = as_out_check(cmd, &a.out, 1, ins, nin)) ||
        (ret = as_out_open_named(a.out, &chart))) {
        cleanup_dir(&a);
        return ret;
    }
    a.chart = as_out_path(chart);
    as_out_graceful(1);
    ret = plot_draw(&a, k, argv + optind, ntr, self);
    cleanup_dir(&a);
    if (as_out_stop) { /* the runs said what they finished; no chart from half the data */
        as_out_abort(chart);
        as_cli_msg("plot: interrupted; %s not written", a.out);
        return AS_EXIT_SIGNAL;
    }
    if (!ret && !chart_complete(a.chart, a.out)) {
        as_cli_msg("plot: gnuplot wrote an incomplete %s (a write failed: is the disk full?); "
                   "%s not written",
                   a.out, a.out);
        ret = AS_EXIT_INPUT;
    }
    ret = as_out_commit(chart, ret);
    if (ret == AS_EXIT_OK && !a.co.quiet)
        fprintf(stderr, "allocsim: wrote %s\n", a.out);
    return ret;
}
