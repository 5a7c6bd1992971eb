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

void as_cli_msg(const char *fmt, ...)
{
    va_list ap;
    fputs("allocsim: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
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
    fputs("allocsim: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
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

int as_cli_open_trace(const char *path, as_trace_reader **out)
{
    as_trace_error err;
    memset(&err, 0, sizeof err);
    err.offset = err.event = UINT64_MAX;
    if (as_trace_open(path, NULL, out, &err) < 0)
        return as_cli_trace_fail(&err, path);
    return 0;
}

int as_cli_parse_spec(const char *cmd, const char *text, as_policy_spec *out)
{
    char why[512];
    if (as_policy_spec_parse(text, out, why, sizeof why) == 0)
        return 0;
    if (!as_policy_find("torch") &&
        (strncmp(text, "torch", 5) == 0 && (text[5] == 0 || text[5] == ',')))
        return as_cli_usage(cmd,
                            "-p %s: policy 'torch' is not available yet; name another "
                            "policy (see 'allocsim policies')",
                            text);
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
