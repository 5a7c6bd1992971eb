/*
 * options.c - the shared options of run, mincap, tune and plot (options.h): one reading of
 * each, with its limits and its words for a bad value.
 */
#include "options.h"

#include <string.h>

#include "driver.h"
#include "engine.h"
#include "units.h"

void as_cli_common_init(as_cli_common *co, const char **ptext, size_t maxp, const char *what)
{
    memset(co, 0, sizeof *co);
    co->ptext = ptext;
    co->maxp = maxp;
    co->what = what;
    co->nshards = 1;
    co->memory = AS_DRIVER_MEMORY_DEFAULT;
}

int as_cli_common_option(const char *cmd, int c, const char *arg, as_cli_common *co)
{
    switch (c) {
    case 'p':
        if (co->np == co->maxp)
            return as_cli_usage(cmd, "at most %zu %s", co->maxp, co->what);
        co->ptext[co->np++] = arg;
        return 0;
    case 'q':
        co->quiet = 1;
        return 0;
    case AS_CLI_OPT_DEVICE:
        co->card = arg;
        return 0;
    case AS_CLI_OPT_OUTSIDE:
        co->outside = arg;
        return 0;
    case AS_CLI_OPT_SHARD:
        if (as_cli_parse_shard(arg, &co->shard, &co->nshards))
            return as_cli_usage(cmd, "--shard %s: I/N with 1 <= I <= N", arg);
        return 0;
    case AS_CLI_OPT_MEMORY:
        if (as_parse_bytes(arg, &co->memory))
            return as_cli_usage(cmd, "--memory %s: bytes with an optional unit (2G, 512MiB)", arg);
        return 0;
    case 'j':
        if (as_cli_parse_u64(arg, &co->threads) || co->threads == 0 || co->threads > 1024)
            return as_cli_usage(cmd, "--threads %s: a count from 1 to 1024", arg);
        return 0;
    case AS_CLI_OPT_SNAPSHOT_DEVICE:
        return as_cli_snapshot_device(cmd, arg);
    case AS_CLI_OPT_NO_CAUGHT:
        co->no_caught = 1;
        return 0;
    default:
        return AS_CLI_NOT_COMMON;
    }
}

int as_cli_parse_streams(const char *cmd, const char *arg, uint32_t *out)
{
    uint64_t n;
    if (!strcmp(arg, "none"))
        *out = 0;
    else if (!strcmp(arg, "pytorch"))
        *out = AS_ENGINE_STREAMS_PYTORCH;
    else if (!strcmp(arg, "each"))
        *out = AS_ENGINE_STREAMS_EACH;
    else if (!as_cli_parse_u64(arg, &n) && n >= 1 && n <= 65536)
        *out = (uint32_t)n;
    else
        return as_cli_usage(cmd,
                            "--device-streams %s: none, pytorch, each or a count from 1 to "
                            "65536",
                            arg);
    return 0;
}

int as_cli_fmt_tjl(const char *cmd, const char *arg, int *fmt)
{
    if (!strcmp(arg, "table"))
        *fmt = 0;
    else if (!strcmp(arg, "json"))
        *fmt = 1;
    else if (!strcmp(arg, "jsonl"))
        *fmt = 2;
    else
        return as_cli_usage(cmd, "-f %s: the format is table, json or jsonl", arg);
    return 0;
}
