/*
 * options.h - the options that the commands running traces (run, mincap, tune, plot) share:
 * one getopt table entry each (AS_CLI_TRACE_OPTIONS, AS_CLI_BASE_OPTIONS) and one reading
 * (as_cli_common_option), so that every command spells, limits and words them alike. A
 * command's own options come first in its table and its own switch sees every value
 * first; what it does not take it hands to as_cli_common_option.
 */
#ifndef AS_SIM_CLI_OPTIONS_H
#define AS_SIM_CLI_OPTIONS_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"

/* getopt values of the shared long options without a letter (AS_CLI_OPT_SNAPSHOT_DEVICE
 * is cli.h's). */
enum {
    AS_CLI_OPT_DEVICE = 0x5e0,
    AS_CLI_OPT_OUTSIDE,
    AS_CLI_OPT_SHARD,
    AS_CLI_OPT_MEMORY,
    AS_CLI_OPT_NO_CAUGHT,
};

/* clang-format off */
/* -p, -q and --help: every command that runs policies. */
#define AS_CLI_BASE_OPTIONS \
    {"policy", required_argument, NULL, 'p'}, \
    {"quiet", no_argument, NULL, 'q'}, \
    {"help", no_argument, NULL, 'h'}
/* What run, mincap and tune add: the card and what lies outside the allocator, shards,
 * host memory, threads (-j; a command without "j:" in its letters takes --threads only),
 * the snapshot's device and whether workspace OOMs are caught (sim/caught.h). */
#define AS_CLI_TRACE_OPTIONS \
    {"device", required_argument, NULL, AS_CLI_OPT_DEVICE}, \
    {"outside", required_argument, NULL, AS_CLI_OPT_OUTSIDE}, \
    {"shard", required_argument, NULL, AS_CLI_OPT_SHARD}, \
    {"memory", required_argument, NULL, AS_CLI_OPT_MEMORY}, \
    {"threads", required_argument, NULL, 'j'}, \
    {"snapshot-device", required_argument, NULL, AS_CLI_OPT_SNAPSHOT_DEVICE}, \
    {"no-caught-ooms", no_argument, NULL, AS_CLI_OPT_NO_CAUGHT}
/* clang-format on */

/* What the shared options said. */
typedef struct as_cli_common {
    const char **ptext; /* -p, in order: the caller's array of maxp entries */
    size_t np, maxp;
    const char *what; /* what -p names, for "at most N policies" */
    const char *card; /* --device (the last one) */
    const char *outside;
    unsigned shard, nshards; /* --shard I/N: 0-based I, N (1 without it) */
    uint64_t memory;         /* --memory (AS_DRIVER_MEMORY_DEFAULT without it) */
    uint64_t threads;        /* -j, --threads (0 without it) */
    int quiet;
    int no_caught; /* --no-caught-ooms: an OOM at a cuDNN workspace request stops the run */
} as_cli_common;

/* Defaults; ptext is an array of maxp entries for -p, what names them ("policies"). */
void as_cli_common_init(as_cli_common *co, const char **ptext, size_t maxp, const char *what);

/* The value getopt_long gave for one of the shared options, for command cmd: 0 (read), an
 * exit status (a usage error, printed), or AS_CLI_NOT_COMMON: none of them ('h', ':' and
 * unknown options are the command's). */
#define AS_CLI_NOT_COMMON (-1)
int as_cli_common_option(const char *cmd, int c, const char *arg, as_cli_common *co);

/* --device-streams S (run, mincap): none, pytorch, each or a count, as
 * as_engine_opts.streams takes them. 0 or a usage error. */
int as_cli_parse_streams(const char *cmd, const char *arg, uint32_t *out);

/* -f for the commands whose report is table, json or jsonl (mincap, tune): *fmt gets 0, 1
 * or 2. 0 or a usage error. */
int as_cli_fmt_tjl(const char *cmd, const char *arg, int *fmt);

#endif
