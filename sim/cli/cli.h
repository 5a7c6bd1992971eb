/*
 * cli.h - the allocsim command's subcommands and the helpers they share. Only the command
 * (these files) prints or exits; everything it calls returns codes.
 *
 * To add a subcommand: write sim/cmd_NAME.c defining `int as_cmd_NAME(int argc, char
 * **argv)` (argv[0] is the subcommand's name; return an AS_EXIT_* code), declare it below
 * and add one line to the table in sim/commands.c.
 */
#ifndef AS_SIM_CLI_H
#define AS_SIM_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "policy.h"
#include "report.h"
#include "trace.h"

enum {
    AS_EXIT_OK = 0,    /* it ran (an OOM is a result) */
    AS_EXIT_INPUT = 1, /* bad input or I/O: the message names the file and the offset */
    AS_EXIT_USAGE = 2, /* bad command line */
    AS_EXIT_DIFFERS = 3, /* check: the simulation does not reproduce the recorded run */
};

/* The whole command: argv as main() gets it; returns the exit status, never exits. Safe to
 * call again in the same process (sim/commands.c). */
int as_cli_main(int argc, char **argv);

/* Capacities of one `run` (every -c and --sweep) and of one `mincap` grid: a guard against
 * "--sweep 20M:100000M:1M" (99,981 runs of one spec), 32 GiB in 2 MiB steps. */
#define AS_CLI_MAX_CAPACITIES 16384

int as_cmd_run(int argc, char **argv);
int as_cmd_convert(int argc, char **argv);
int as_cmd_info(int argc, char **argv);
int as_cmd_policies(int argc, char **argv);
int as_cmd_gen(int argc, char **argv);
int as_cmd_compare(int argc, char **argv);
int as_cmd_mincap(int argc, char **argv); /* cmd_mincap.c */
int as_cmd_plot(int argc, char **argv);   /* cmd_plot.c */
int as_cmd_tune(int argc, char **argv);   /* cmd_tune.c */
int as_cmd_merge(int argc, char **argv);  /* cmd_merge.c */
int as_cmd_check(int argc, char **argv);  /* cmd_check.c */

/* Writes text to f with every byte that could drive a terminal escaped as \xHH: control
 * characters but newline and tab, DEL, and bytes that are not valid UTF-8 or that encode a
 * C1 control. Every message goes through it, and `info` prints input bytes with it. */
void as_cli_put_safe(FILE *f, const char *text);
/* "allocsim: MESSAGE\n" on stderr, escaped as above (a file name or an excerpt of a trace
 * cannot set the terminal's title). */
void as_cli_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "PROG VERSION" and "zstd VERSION" (the library loaded) on stdout, for --version. */
void as_cli_version(const char *prog);
/* A usage error for subcommand cmd: the message, a pointer to --help; returns 2. */
int as_cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The usage error for what getopt_long returned on a bad option ("unknown option 'X'", or,
 * for ':' (optstring starting with ':'), "option 'X' needs a value"); call it right after
 * getopt_long, as it names argv[optind - 1]. Returns 2. */
int as_cli_bad_option(const char *cmd, int c, char *const argv[]);
/* "PATH: cannot create: REASON" for errno value errnum; returns AS_EXIT_INPUT. */
int as_cli_cannot_create(const char *path, int errnum);
/* fopen(path, "w"), or the message above. Returns 0 or AS_EXIT_INPUT (*out untouched). */
int as_cli_create(const char *path, FILE **out);
/* The status after writing or closing output path: failed != 0 is a write failure, reported
 * as "PATH: write failed" (status AS_EXIT_INPUT) only when ret, the status so far, is 0, so
 * the first failure is the one named. Returns the status to go on with. */
int as_cli_write_status(int failed, const char *path, int ret);
/* The same for a library writer's result (rc: 0 or a code of error.h; why: its message,
 * "write failed: No space left on device"): "PATH: WHY". */
int as_cli_write_error(int rc, const char *why, const char *path, int ret);
/* Prints a trace error as "allocsim: FILE: byte B (line L, event E): MESSAGE" and returns
 * AS_EXIT_INPUT. */
int as_cli_trace_fail(const as_trace_error *e, const char *fallback_path);
/* Opens a trace with as_cli_reader_opts(), printing the error on failure. Returns 0 or
 * AS_EXIT_INPUT. */
int as_cli_open_trace(const char *path, as_trace_reader **out);
/* The reader options of this command line: every trace a command opens is read with them
 * (--snapshot-device N). Reset by as_cli_main at each call. */
const as_reader_opts *as_cli_reader_opts(void);
void as_cli_reset_reader_opts(void);
/* --snapshot-device N, the getopt value every command gives it, and its parser: N is the
 * index in a snapshot's device_traces (cuda:N is accepted too). Returns 0 or 2. */
#define AS_CLI_OPT_SNAPSHOT_DEVICE 0x5d0
int as_cli_snapshot_device(const char *cmd, const char *text);
/* Parses a -p SPEC, printing why on failure (with a hint when the default policy 'torch'
 * is meant but not registered). Returns 0 or AS_EXIT_USAGE. */
int as_cli_parse_spec(const char *cmd, const char *text, as_policy_spec *out);
/* -p recorded: the setting the snapshots paths[0..n) recorded (sim/check.h's
 * as_recorded_setting), which must be the same for all, into spec; with a memory fraction
 * recorded, *capacity is that fraction of an H200's memory (the snapshot does not say the
 * card), with a note on stderr. 0 or an exit status. */
int as_cli_recorded(const char *cmd, const char *const *paths, int n, char *spec, size_t cap,
                    uint64_t *capacity);
/* A card (preset or total bytes) less what lies outside the allocator (--outside text,
 * NULL = the default), as sim/cards.h models it: *usable gets the allocator's capacity,
 * and the card's total, outside and usable bytes are printed on stdout (to_stdout) or
 * stderr. Returns 0 or AS_EXIT_USAGE (cmd_tune.c). */
int as_cli_device(const char *cmd, const char *card, const char *outside, int to_stdout,
                  uint64_t *usable);
/* A trace that is not native (a pickle, a text trace) written once to a temporary native
 * file for commands that decode it many times (cmd_mincap.c): tmp gets its name (empty
 * when path is native already), *slot its temporary-file registration. 0 or a status. */
int as_cli_spool_native(const char *path, char *tmp, size_t n, int *slot);
/* Parses -c TEXT for cmd (as_parse_capacity), printing the usage error (returns 2; 2^64-1
 * is refused in favour of 'none'), or a warning when a bare number under 1 MiB is probably
 * a missing unit ("-c 80: read as 80 bytes; did you mean 80G?"). Returns 0 or 2. */
int as_cli_parse_capacity(const char *cmd, const char *text, uint64_t *out);
/* The warning above for option opt's TEXT read as `bytes`, when TEXT is a bare number under
 * 1 MiB; nothing otherwise. */
void as_cli_warn_bare(const char *opt, const char *text, uint64_t bytes);
/* One warning per trace of the report whose runs have a capacity below its smallest
 * request: each fails at its first allocation. */
void as_cli_warn_small_caps(const as_report *rep);
/* --shard "I/N" (1 <= I <= N <= 10^6) into the 0-based *shard and *n; 0 or -1. A shard takes
 * the units (traces; mincap's policies) at 0-based positions k with k % N == I - 1. */
int as_cli_parse_shard(const char *s, unsigned *shard, unsigned *n);
/* Parses an unsigned decimal count; returns 0 or -1. */
int as_cli_parse_u64(const char *s, uint64_t *out);

#endif
