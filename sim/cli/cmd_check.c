/*
 * cmd_check.c - `allocsim check SNAPSHOT...`: does the simulation reproduce the recorded
 * run? One line per snapshot (sim/check.h does the work); the exit status says it for
 * scripts: 0 every snapshot reproduced, 3 one differs, 1 bad input, 2 usage.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "cli.h"

static const char check_help[] =
    "usage: allocsim check [--snapshot-device N] SNAPSHOT...\n"
    "\n"
    "Simulates each snapshot's trace under the setting it recorded (allocator_settings, as\n"
    "'-p recorded' reads it), from the pool as it was when recording began, on a device\n"
    "that hands out the recorded segment addresses, and compares the device-level events\n"
    "(segment alloc and free; map and unmap with expandable segments) and the peak\n"
    "reserved with the snapshot's own. One line per snapshot: 'reproduced: ...', or where\n"
    "the events first differ, expected against simulated, the likely cause and what it\n"
    "limits.\n"
    "\n"
    "      --snapshot-device N  which device of a multi-device snapshot\n"
    "\n"
    "Exit status: 0 every snapshot reproduced, 3 one differs, 1 bad input or I/O, 2 usage\n"
    "error.\n";

int as_cmd_check(int argc, char **argv)
{
    static const struct option opts[] = {
        {"snapshot-device", required_argument, NULL, AS_CLI_OPT_SNAPSHOT_DEVICE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case AS_CLI_OPT_SNAPSHOT_DEVICE:
            if (as_cli_snapshot_device("check", optarg))
                return AS_EXIT_USAGE;
            break;
        case 'h':
            fputs(check_help, stdout);
            return AS_EXIT_OK;
        default:
            return as_cli_bad_option("check", c, argv);
        }
    }
    if (optind >= argc)
        return as_cli_usage("check", "no snapshot given");
    int ret = AS_EXIT_OK;
    for (int i = optind; i < argc; i++) {
        as_check_result r;
        as_trace_error err;
        memset(&err, 0, sizeof err);
        err.offset = err.line = err.event = UINT64_MAX;
        if (as_check(argv[i], as_cli_reader_opts(), &r, &err) < 0) {
            as_cli_trace_fail(&err, argv[i]);
            ret = AS_EXIT_INPUT;
            continue;
        }
        char line[1200];
        as_check_line(&r, line, sizeof line);
        as_cli_put_safe(stdout, argv[i]);
        fputs(": ", stdout);
        as_cli_put_safe(stdout, line);
        putchar('\n');
        if (!r.reproduced && ret == AS_EXIT_OK)
            ret = AS_EXIT_DIFFERS;
    }
    if (fflush(stdout) || ferror(stdout)) {
        as_cli_msg("stdout: write failed");
        return AS_EXIT_INPUT;
    }
    return ret;
}
