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

#include "check.h"
#include "driver.h"
#include "report.h"
#include "text.h"

void as_cli_put_safe(FILE *f, const char *text)
{
    as_put_safe(f, text);
}

/* "allocsim: " and the formatted message, escaped (as_cli_put_safe), on stderr. */
static void vmsg(const char *fmt, va_list ap)
{
    as_put_safe_v(stderr, "allocsim: ", fmt, ap);
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

int as_cli_write_error(int rc, const char *why, const char *path, int ret)
{
    if (rc && !ret) {
        as_cli_msg("%s: %s", path, why && why[0] ? why : as_strerror(rc));
        return AS_EXIT_INPUT;
    }
    return ret;
}

int as_cli_write_status(int failed, const char *path, int ret)
{
    return as_cli_write_error(failed ? AS_EIO : 0, "write failed", path, ret);
}

int as_cli_trace_fail(const as_trace_error *e, const char *fallback_path)
{
    char msg[1024];
    as_trace_error_text(e, fallback_path, msg, sizeof msg);
    as_cli_msg("%s", msg);
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

int as_cli_recorded(const char *cmd, const char *const *paths, int n, char *spec, size_t cap,
                    uint64_t *capacity)
{
    char one[300], why[300];
    spec[0] = 0;
    for (int i = 0; i < n; i++) {
        as_trace_reader *rd;
        double fraction = 0;
        int ret = as_cli_open_trace(paths[i], &rd);
        if (ret)
            return ret;
        int rc = as_recorded_setting(as_trace_reader_meta(rd), one, sizeof one, &fraction, why,
                                     sizeof why);
        as_trace_close(rd);
        if (rc)
            return as_cli_usage(cmd, "-p recorded: %s: %s", paths[i], why);
        if (spec[0] && strcmp(spec, one) != 0)
            return as_cli_usage(cmd,
                                "-p recorded: the traces recorded different settings (%s, %s): "
                                "give them one at a time",
                                spec, one);
        snprintf(spec, cap, "%s", one);
        if (fraction > 0 && capacity) {
            *capacity = (uint64_t)(fraction * 150109880320.0 + 0.5);
            as_cli_msg("-p recorded: %s set per_process_memory_fraction %g: run at %g of an "
                       "H200's 150109880320 B (-c to say otherwise)",
                       paths[i], fraction, fraction);
        }
    }
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
    return as_parse_count(s, out);
}

int as_cli_parse_capacity(const char *cmd, const char *text, uint64_t *out)
{
    char why[512];
    int rc = as_parse_capacity(text, out);
    if (rc) {
        as_capacity_why(rc, "-c", text, why, sizeof why);
        return as_cli_usage(cmd, "%s", why);
    }
    as_cli_warn_bare("-c", text, *out);
    return 0;
}

void as_cli_warn_bare(const char *opt, const char *text, uint64_t bytes)
{
    char note[512];
    if (as_bare_number_note(opt, text, bytes, note, sizeof note))
        as_cli_msg("%s", note);
}

void as_cli_warn_small_caps(const as_report *rep)
{
    char msg[1024];
    for (unsigned t = 0; t < as_report_ntraces(rep); t++)
        if (as_driver_small_caps(rep, t, msg, sizeof msg))
            as_cli_msg("%s", msg);
}
