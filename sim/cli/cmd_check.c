/*
 * cmd_check.c - `allocsim check [-f json] SNAPSHOT...`: does the simulation reproduce the
 * recorded run? One line per snapshot, or one JSON object for all (sim/REPORT.md, "check");
 * sim/check.h does the work. The exit status says it for scripts: 0 every snapshot
 * reproduced, 3 one differs, 1 bad input, 2 usage.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "cli.h"
#include "report.h"

static const char check_help[] =
    "usage: allocsim check [-f text|json] [--snapshot-device N] SNAPSHOT...\n"
    "\n"
    "Simulates each snapshot's trace under the setting it recorded (allocator_settings, as\n"
    "'-p recorded' reads it), from the pool as it was when recording began, on a device\n"
    "that hands out the recorded segment addresses, and compares the device-level events\n"
    "(segment alloc and free; map and unmap with expandable segments) and the peak\n"
    "reserved with the snapshot's own. One line per snapshot: 'reproduced: ...', or where\n"
    "the events first differ, expected against simulated, the likely cause and what it\n"
    "limits.\n"
    "\n"
    "  -f, --format FMT     text (the default: one line per snapshot) or json (one object:\n"
    "                       each snapshot's result, its first difference, the counts)\n"
    "      --snapshot-device N  which device of a multi-device snapshot\n"
    "\n"
    "Exit status: 0 every snapshot reproduced, 3 one differs, 1 bad input or I/O, 2 usage\n"
    "error.\n";

/* A device event of the comparison, or null. */
static void json_ev(int have, const as_check_ev *e)
{
    if (!have) {
        fputs("null", stdout);
        return;
    }
    printf("{\"action\": \"%s\", \"size\": %" PRIu64 ", \"addr\": %" PRIu64 ", \"alloc\": %" PRIu64
           "}",
           as_dev_action_name((as_dev_action)e->action), e->size, e->addr, e->alloc);
}

/* The difference: what kind, where, and the allocation past which what-ifs are unchecked
 * (as the line words it). */
static void json_diff(const as_check_result *r)
{
    if (r->reproduced) {
        fputs("null", stdout);
        return;
    }
    const char *kind = r->first_diff != SIZE_MAX    ? "segment_event"
                       : r->oom_alloc != UINT64_MAX ? "oom"
                                                    : "peak";
    printf("{\"kind\": \"%s\", \"index\": ", kind);
    as_report_json_u64(stdout, r->first_diff != SIZE_MAX, r->first_diff);
    fputs(", \"recorded\": ", stdout);
    json_ev(r->first_diff != SIZE_MAX && r->have_rec, &r->rec);
    fputs(", \"simulated\": ", stdout);
    json_ev(r->first_diff != SIZE_MAX && r->have_sim, &r->sim);
    uint64_t at = r->have_rec ? r->rec.alloc : r->sim.alloc;
    if (r->have_rec && r->have_sim && r->sim.alloc < at)
        at = r->sim.alloc;
    fputs(", \"allocation\": ", stdout);
    as_report_json_u64(stdout, r->first_diff != SIZE_MAX, at);
    fputs(", \"why\": ", stdout);
    as_report_json_str(stdout, r->why);
    putchar('}');
}

static void json_start(const as_check_start *s)
{
    printf("{\"possible\": %s, \"rebuilt\": %s, \"segments\": %" PRIu64 ", \"reserved\": %" PRIu64
           ", \"live_blocks\": %" PRIu64 ", \"live_bytes\": %" PRIu64 ", \"from_frees\": %" PRIu64
           ", \"from_dump\": %" PRIu64 ", \"sizes_inferred\": %" PRIu64 ", \"why\": ",
           s->possible ? "true" : "false", s->reconstructed ? "true" : "false", s->segments,
           s->reserved, s->live, s->live_bytes, s->from_frees, s->from_dump, s->sizes_inferred);
    if (s->possible && !s->reconstructed)
        as_report_json_str(stdout, s->why);
    else
        fputs("null", stdout);
    putchar('}');
}

/* One CHECK object of check -f json: r is NULL when the snapshot could not be checked
 * (error says why). */
static void json_check(unsigned i, const char *path, const as_check_result *r, const char *error)
{
    printf("%s{\"trace\": %u, \"file\": ", i ? ",\n  " : "\n  ", i);
    as_report_json_str(stdout, path);
    printf(", \"status\": \"%s\", \"reproduced\": %s, \"error\": ",
           !r              ? "error"
           : r->reproduced ? "reproduced"
                           : "differs",
           r && r->reproduced ? "true" : "false");
    if (r)
        fputs("null", stdout);
    else
        as_report_json_str(stdout, error);
    if (!r) {
        fputs(", \"spec\": null, \"recorded_events\": null, \"simulated_events\": null, "
              "\"recorded_peak_reserved\": null, \"simulated_peak_reserved\": null, "
              "\"oom_alloc\": null, \"difference\": null, \"start\": null, \"line\": null}",
              stdout);
        return;
    }
    char line[1200];
    as_check_line(r, line, sizeof line);
    fputs(", \"spec\": ", stdout);
    as_report_json_str(stdout, r->spec);
    printf(", \"recorded_events\": %zu, \"simulated_events\": %zu, \"recorded_peak_reserved\": "
           "%" PRIu64 ", \"simulated_peak_reserved\": %" PRIu64 ", \"oom_alloc\": ",
           r->recorded, r->simulated, r->rec_peak, r->sim_peak);
    as_report_json_u64(stdout, r->oom_alloc != UINT64_MAX, r->oom_alloc);
    fputs(", \"difference\": ", stdout);
    json_diff(r);
    fputs(", \"start\": ", stdout);
    json_start(&r->start);
    fputs(", \"line\": ", stdout);
    as_report_json_str(stdout, line);
    putchar('}');
}

/* One snapshot checked and said, as text or JSON (the i-th). An exit status. */
static int check_one(unsigned i, const char *path, int json)
{
    as_check_result r;
    as_trace_error err;
    memset(&err, 0, sizeof err);
    err.offset = err.line = err.event = UINT64_MAX;
    if (as_check(path, as_cli_reader_opts(), &r, &err) < 0) {
        char msg[1024];
        as_trace_error_text(&err, path, msg, sizeof msg);
        if (json)
            json_check(i, path, NULL, msg);
        as_cli_msg("%s", msg);
        return AS_EXIT_INPUT;
    }
    if (json) {
        json_check(i, path, &r, NULL);
    } else {
        char line[1200];
        as_check_line(&r, line, sizeof line);
        as_cli_put_safe(stdout, path);
        fputs(": ", stdout);
        as_cli_put_safe(stdout, line);
        putchar('\n');
    }
    return r.reproduced ? AS_EXIT_OK : AS_EXIT_DIFFERS;
}

int as_cmd_check(int argc, char **argv)
{
    static const struct option opts[] = {
        {"format", required_argument, NULL, 'f'},
        {"snapshot-device", required_argument, NULL, AS_CLI_OPT_SNAPSHOT_DEVICE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c, json = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:h", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
                return as_cli_usage("check", "-f %s: the format is text or json", optarg);
            json = strcmp(optarg, "json") == 0;
            break;
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
    if (json) {
        as_report_json_head(stdout);
        fputs(", \"command\": \"check\",\n \"traces\": [", stdout);
        for (int i = optind; i < argc; i++) {
            fputs(i > optind ? ",\n  " : "\n  ", stdout);
            as_report_json_trace_open(stdout, (unsigned)(i - optind), argv[i], NULL, NULL, NULL);
            putchar('}');
        }
        fputs("],\n \"checks\": [", stdout);
    }
    for (int i = optind; i < argc; i++) {
        int rc = check_one((unsigned)(i - optind), argv[i], json);
        /* bad input outranks a difference, as in the text */
        if (rc == AS_EXIT_INPUT || (rc == AS_EXIT_DIFFERS && ret == AS_EXIT_OK))
            ret = rc;
    }
    if (json)
        fputs("]}\n", stdout);
    if (fflush(stdout) || ferror(stdout)) {
        as_cli_msg("stdout: write failed");
        return AS_EXIT_INPUT;
    }
    return ret;
}
