/*
 * commands.c - the allocsim command as a function: the table of subcommands (git style)
 * and as_cli_main(), which sim/main.c calls and the CLI fuzz harness (fuzz/fuzz_cli.c)
 * calls in-process, many times. A first argument that is not a subcommand's name means
 * `run`, so `allocsim -p bestfit trace.zst` works. Adding a subcommand is one file
 * (sim/cmd_NAME.c, see cli.h) and one line below.
 *
 * Invariant: nothing here or below exits; every path returns an AS_EXIT_* status, and no
 * state survives from one call to the next (getopt's included, see getopt_reset).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "outfile.h"

typedef struct as_cli_cmd {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} as_cli_cmd;

static const as_cli_cmd commands[] = {
    {"run", as_cmd_run, "replay traces through policies at capacities (the default)"},
    {"info", as_cmd_info, "counts, streams, peak, size and lifetime histograms of a trace"},
    {"check", as_cmd_check, "does the simulation reproduce a snapshot's recorded run?"},
    {"convert", as_cmd_convert, "convert a trace to the native or text format"},
    {"gen", as_cmd_gen, "write a synthetic trace from a workload generator"},
    {"tune", as_cmd_tune, "which PYTORCH_CUDA_ALLOC_CONF fits a card, ranked, and the line to paste"},
    {"merge", as_cmd_merge, "join the JSON Lines of --shard I/N runs into the unsharded report"},
    {"mincap", as_cmd_mincap, "smallest capacity that fits a trace, and where larger ones fail"},
    {"plot", as_cmd_plot, "gnuplot charts: timeline, compare, capacity, segments, validation"},
    {"policies", as_cmd_policies, "list the policies and their knobs"},
    {"compare", as_cmd_compare, "predicted against measured runs (two JSON reports)"},
};

static void usage(FILE *f)
{
    fputs("usage: allocsim [run] [-p SPEC]... [-c CAP]... [-f table|csv|json] TRACE...\n"
          "       allocsim COMMAND [ARGS]    (allocsim COMMAND --help for each)\n"
          "       allocsim --version | -V\n\ncommands:\n",
          f);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fputs("\nExit status: 0 when it ran (an OOM is a result), 1 bad input or I/O, "
          "2 usage error.\n",
          f);
}

/* getopt keeps its place inside a cluster of short options between calls: a command that
 * returns at 'h' of "-hq" leaves it pointing at the 'q' of an argv that may be gone by the
 * next call. optind = 0 asks glibc and musl to re-initialise on the next getopt call; one
 * scan of an empty argument list does it now, so each command's own `optind = 1` starts
 * from a clean state. */
static void getopt_reset(void)
{
    static char arg0[] = "allocsim";
    char *none[] = {arg0, NULL};
    optind = 0;
    opterr = 0;
    while (getopt(1, none, "") != -1)
        ;
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return AS_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return AS_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        as_cli_version("allocsim");
        return AS_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    /* No subcommand: everything is run's. argv[0] stands in for the command name. */
    return as_cmd_run(argc, argv);
}

int as_cli_main(int argc, char **argv)
{
    getopt_reset();
    as_cli_reset_reader_opts();
    int ret = dispatch(argc, argv);
    as_out_cleanup(); /* temporary files a failure path left registered */
    as_out_graceful(0);
    return ret;
}
