/*
 * cmd_merge.c - `allocsim merge SHARD.jsonl... [-o FILE]`: the JSON Lines of the shards
 * of one run, mincap or tune (--shard I/N -f jsonl), in the unsharded order, checked whole
 * (sim/merge.c). CLI code: it prints and returns exit statuses.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "merge.h"
#include "outfile.h"

static const char usage_text[] =
    "usage: allocsim merge [-o FILE] SHARD.jsonl...\n"
    "  Joins the JSON Lines that `allocsim run|mincap|tune --shard I/N -f jsonl` wrote into\n"
    "  the lines the unsharded command writes: ordered by unit (a trace of run and tune, a\n"
    "  policy of mincap), every unit once; a missing or doubled unit is an error.\n"
    "options:\n"
    "  -o, --output FILE   write here instead of stdout (only when the merge is whole)\n";

static const struct option merge_opts[] = {
    {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int as_cmd_merge(int argc, char **argv)
{
    const char *cmd = "merge", *out_path = NULL;
    int c, st;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:h", merge_opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            out_path = optarg;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return AS_EXIT_OK;
        default:
            return as_cli_bad_option(cmd, c, argv);
        }
    }
    if (optind >= argc)
        return as_cli_usage(cmd, "no shard files given");
    const char *const *ins = (const char *const *)argv + optind;
    size_t nin = (size_t)(argc - optind);
    const char *outs[] = {out_path ? out_path : "-"};
    as_out *out = NULL;
    if ((st = as_out_check(cmd, outs, 1, ins, nin)) || (st = as_out_open(out_path, &out)))
        return st;
    as_merge m;
    char why[512];
    if (as_merge_files(ins, nin, &m, why, sizeof why)) {
        as_cli_msg("merge: %s", why);
        return as_out_commit(out, AS_EXIT_INPUT);
    }
    FILE *f = as_out_file(out);
    for (size_t i = 0; i < m.n; i++) {
        fputs(m.lines[i].text, f);
        fputc('\n', f);
    }
    st = as_cli_write_status(fflush(f) != 0 || ferror(f), out_path ? out_path : "-", AS_EXIT_OK);
    as_merge_free(&m);
    return as_out_commit(out, st);
}
