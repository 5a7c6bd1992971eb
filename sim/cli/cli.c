/*
 * cli.c - helpers shared by the subcommands (cli.h): messages, usage errors, trace errors
 * that name the file and offset, and -p SPEC parsing with the 'torch' hint.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "report.h"
#include "text.h"

void as_cli_put_safe(FILE *f, const char *text)
{
    as_put_safe(f, text);
}

/* "allocsim: " and the formatted message, escaped (as_cli_put_safe), on stderr. */
static void vmsg(const char *fmt, va_list ap)
{
    char small[1024], *b = small;
    va_list aq;
    va_copy(aq, ap);
    int k = vsnprintf(small, sizeof small, fmt, ap);
    if (k >= (int)sizeof small && (b = malloc((size_t)k + 1)))
        vsnprintf(b, (size_t)k + 1, fmt, aq);
    va_end(aq);
    fputs("allocsim: ", stderr);
    as_cli_put_safe(stderr, b ? b : small);
    if (b != small)
        free(b);
}

void as_cli_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void as_cli_version(const char *prog)
{
    /* The library actually loaded, and the headers built against when they differ. */
    printf("%s %s\nzstd %s", prog, AS_VERSION, ZSTD_versionString());
    if (ZSTD_versionNumber() != ZSTD_VERSION_NUMBER)
        printf(" (built with %s)", ZSTD_VERSION_STRING);
    putchar('\n');
}

int as_cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
    /* A program of its own (allocsim-replay) is named whole, a subcommand after allocsim. */
    if (cmd && strncmp(cmd, "allocsim-", 9) == 0)
        fprintf(stderr, "\nTry '%s --help'.\n", cmd);
    else
        fprintf(stderr, "\nTry 'allocsim %s%s--help'.\n", cmd ? cmd : "", cmd ? " " : "");
    return AS_EXIT_USAGE;
}

int as_cli_bad_option(const char *cmd, int c, char *const argv[])
{
    if (c == ':')
        return as_cli_usage(cmd, "option '%s' needs a value", argv[optind - 1]);
    return as_cli_usage(cmd, "unknown option '%s'", argv[optind - 1]);
}

int as_cli_cannot_create(const char *path, int errnum)
{
    as_cli_msg("%s: cannot create: %s", path, strerror(errnum));
    return AS_EXIT_INPUT;
}

int as_cli_create(const char *path, FILE **out)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return as_cli_cannot_create(path, errno);
    *out = f;
    return AS_EXIT_OK;
}

int as_cli_write_status(int failed, const char *path, int ret)
{
    if (failed && !ret) {
        as_cli_msg("%s: write failed", path);
        return AS_EXIT_INPUT;
    }
    return ret;
}

int as_cli_trace_fail(const as_trace_error *e, const char *fallback_path)
{
    const char *path = e->path[0] ? e->path : fallback_path ? fallback_path : "-";
    char where[160] = "";
    size_t k = 0;
    if (e->offset != UINT64_MAX)
        k += (size_t)snprintf(where + k, sizeof where - k, "byte %llu",
                              (unsigned long long)e->offset);
    if (e->line && k < sizeof where)
        k += (size_t)snprintf(where + k, sizeof where - k, "%sline %llu", k ? ", " : "",
                              (unsigned long long)e->line);
    if (e->event != UINT64_MAX && k < sizeof where)
        k += (size_t)snprintf(where + k, sizeof where - k, "%sevent %llu", k ? ", " : "",
                              (unsigned long long)e->event);
    const char *msg = e->msg[0] ? e->msg : as_strerror(e->code);
    if (where[0])
        as_cli_msg("%s: %s: %s", path, where, msg);
    else
        as_cli_msg("%s: %s", path, msg);
    return AS_EXIT_INPUT;
}

/* The command line's reader options: one command runs at a time (as_cli_main resets them,
 * so nothing survives from one call to the next). */
static as_reader_opts reader_opts;

const as_reader_opts *as_cli_reader_opts(void)
{
    return &reader_opts;
}

void as_cli_reset_reader_opts(void)
{
    memset(&reader_opts, 0, sizeof reader_opts);
}

int as_cli_snapshot_device(const char *cmd, const char *text)
{
    uint64_t d;
    const char *num = strncmp(text, "cuda:", 5) == 0 ? text + 5 : text;
    if (as_cli_parse_u64(num, &d) || d > 65535)
        return as_cli_usage(cmd,
                            "--snapshot-device %s: a device index of the snapshot (0, 1, ... "
                            "or cuda:N; allocsim info lists them)",
                            text);
    reader_opts.device_set = 1;
    reader_opts.device = (unsigned)d;
    return 0;
}

int as_cli_open_trace(const char *path, as_trace_reader **out)
{
    as_trace_error err;
    memset(&err, 0, sizeof err);
    err.offset = err.event = UINT64_MAX;
    if (as_trace_open(path, &reader_opts, out, &err) < 0)
        return as_cli_trace_fail(&err, path);
    return 0;
}

int as_cli_parse_spec(const char *cmd, const char *text, as_policy_spec *out)
{
    char why[512];
    if (as_policy_spec_parse(text, out, why, sizeof why) == 0)
        return 0;
    return as_cli_usage(cmd, "-p %s: %s", text, why);
}

int as_cli_parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int as_cli_parse_capacity(const char *cmd, const char *text, uint64_t *out)
{
    int rc = as_parse_capacity(text, out);
    if (rc == -ERANGE)
        return as_cli_usage(cmd,
                            "-c %s: 2^64-1 bytes is the value that means no limit, not a "
                            "capacity; write -c none for no limit",
                            text);
    if (rc)
        return as_cli_usage(cmd,
                            "-c %s: not a capacity (bytes with an optional unit: 80G, 80GB, "
                            "80GiB, 141e9, or none)",
                            text);
    as_cli_warn_bare("-c", text, *out);
    return 0;
}

void as_cli_warn_bare(const char *opt, const char *text, uint64_t bytes)
{
    /* A bare number under 1 MiB is probably a missing unit; a short one most likely G. */
    if (text[strspn(text, "0123456789")] != 0 || bytes >= (1u << 20))
        return;
    char b[32];
    as_fmt_bytes(b, sizeof b, bytes);
    if (bytes < 10000)
        as_cli_msg("%s %s: read as %s bytes; did you mean %sG?", opt, text, text, text);
    else
        as_cli_msg("%s %s: read as %s bytes (%s); add a unit (K, M, G) if more was meant", opt,
                   text, text, b);
}

void as_cli_warn_small_caps(const as_report *rep)
{
    unsigned nt = as_report_ntraces(rep), nr = as_report_nruns(rep);
    for (unsigned t = 0; t < nt; t++) {
        const char *path;
        uint64_t runs = 0, below = 0, min = as_report_trace(rep, t, &path)->min_request;
        for (unsigned i = 0; i < nr && min; i++) {
            unsigned rt;
            const as_run_result *r = as_report_run(rep, i, &rt);
            if (rt == t && r->capacity != AS_CAPACITY_NONE && r->capacity < min) {
                runs++;
                below = r->capacity > below ? r->capacity : below;
            }
        }
        if (!runs)
            continue;
        char a[32], b[32];
        as_fmt_bytes(a, sizeof a, below);
        as_fmt_bytes(b, sizeof b, min);
        as_cli_msg("%s: %llu run%s at a capacity %s%s, below the trace's smallest request "
                   "(%s): %s at the first allocation",
                   path, (unsigned long long)runs, runs == 1 ? "" : "s",
                   runs == 1 ? "of " : "up to ", a, b, runs == 1 ? "it fails" : "they fail");
    }
}
