/*
 * cmd_tools.c - the small subcommands: `convert IN OUT`, `info TRACE`, `policies` and
 * `gen KIND [k=v...] -o OUT`. Each one reads or writes traces only through traces/'s API.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cli.h"
#include "gen.h"
#include "info.h"
#include "outfile.h"
#include "report.h"
#include "siterep.h"

/* Output format from --text/--native, else from the name (*.txt is text). */
static as_trace_fmt out_format(const char *path, int forced)
{
    return forced ? (as_trace_fmt)forced : as_trace_fmt_for_output(path);
}

/* A writer's error names the temporary file it wrote: name the output instead. */
static void name_output(as_trace_error *err, const as_out *o)
{
    if (!strcmp(err->path, as_out_path(o)))
        snprintf(err->path, sizeof err->path, "%s", as_out_name(o));
}

/* Copies every event of rd into output o (as_out_open_named). */
static int copy_trace(as_trace_reader *rd, const char *in_path, const as_out *o, as_trace_fmt fmt)
{
    as_trace_writer *w = NULL;
    as_trace_error err;
    memset(&err, 0, sizeof err);
    err.offset = err.event = UINT64_MAX;
    if (as_trace_writer_open_sites(as_out_path(o), fmt, as_trace_reader_meta(rd),
                                   as_trace_reader_sites(rd), &w, &err) < 0) {
        name_output(&err, o);
        return as_cli_trace_fail(&err, as_out_name(o));
    }
    int rc = as_trace_copy(rd, w, NULL, &err);
    as_trace_error cerr;
    memset(&cerr, 0, sizeof cerr);
    cerr.offset = cerr.event = UINT64_MAX;
    int crc = as_trace_writer_close(w, &cerr);
    name_output(&err, o);
    name_output(&cerr, o);
    if (rc < 0)
        return as_cli_trace_fail(&err, in_path);
    if (crc < 0)
        return as_cli_trace_fail(&cerr, as_out_name(o));
    return AS_EXIT_OK;
}

/* ---- convert ------------------------------------------------------------------------------ */

static const char convert_help[] =
    "usage: allocsim convert IN OUT [--text | --native] [--repeat N] [--snapshot-device N]\n"
    "\n"
    "Reads IN in any format allocsim knows (recognised by content) and writes OUT in the\n"
    "native format (a zstd stream) or, with --text or an OUT ending in .txt, the text\n"
    "format. '-' is stdin/stdout. The round trip is lossless.\n"
    "--repeat N writes IN N times in a row as one trace (ids and times follow on; what\n"
    "is live at the end of a pass is freed there): long benchmark traces from snapshots.\n"
    "--snapshot-device N reads that device of a multi-device snapshot.\n";

int as_cmd_convert(int argc, char **argv)
{
    static const struct option opts[] = {
        {"text", no_argument, NULL, 't'},
        {"native", no_argument, NULL, 'n'},
        {"repeat", required_argument, NULL, 'r'},
        {"snapshot-device", required_argument, NULL, AS_CLI_OPT_SNAPSHOT_DEVICE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int forced = 0, c;
    uint64_t repeat = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            forced = AS_FMT_TEXT;
            break;
        case 'n':
            forced = AS_FMT_NATIVE;
            break;
        case 'r':
            if (as_cli_parse_u64(optarg, &repeat) || repeat == 0 || repeat > 1000000)
                return as_cli_usage("convert", "--repeat %s: a count from 1 to 1000000", optarg);
            break;
        case AS_CLI_OPT_SNAPSHOT_DEVICE:
            if (as_cli_snapshot_device("convert", optarg))
                return AS_EXIT_USAGE;
            break;
        case 'h':
            fputs(convert_help, stdout);
            return AS_EXIT_OK;
        default:
            return as_cli_bad_option("convert", c, argv);
        }
    }
    if (argc - optind != 2)
        return as_cli_usage("convert", "convert takes IN and OUT");
    const char *in = argv[optind], *outp = argv[optind + 1];
    as_out *o = NULL;
    int ret = as_out_check("convert", &outp, 1, &in, 1);
    if (ret || (ret = as_out_open_named(outp, &o)))
        return ret;
    as_trace_error err;
    memset(&err, 0, sizeof err);
    err.offset = err.event = UINT64_MAX;
    int rc = repeat ? as_trace_repeat(in, as_out_path(o), out_format(outp, forced),
                                      (unsigned)repeat, as_cli_reader_opts(), NULL, &err)
                    : as_trace_convert(in, as_out_path(o), out_format(outp, forced),
                                       as_cli_reader_opts(), NULL, NULL, &err);
    name_output(&err, o);
    if (rc == AS_EUSAGE)
        ret = as_cli_usage("convert", "%s", err.msg);
    else if (rc < 0)
        ret = as_cli_trace_fail(&err, in);
    return as_out_commit(o, ret);
}

/* ---- gen -------------------------------------------------------------------------------- */

static const char gen_help[] =
    "usage: allocsim gen KIND [knob=value ...] -o OUT [--text | --native]\n"
    "       allocsim gen KIND --help     (the kind's knobs)\n"
    "\n"
    "Writes a synthetic trace. OUT '-' is stdout; *.txt (or --text) is the text format.\n";

int as_cmd_gen(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"text", no_argument, NULL, 't'},
        {"native", no_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *outp = NULL;
    int forced = 0, help = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            outp = optarg;
            break;
        case 't':
            forced = AS_FMT_TEXT;
            break;
        case 'n':
            forced = AS_FMT_NATIVE;
            break;
        case 'h':
            help = 1;
            break;
        case ':':
        default:
            return as_cli_bad_option("gen", c, argv);
        }
    }
    const char *kind = optind < argc ? argv[optind] : NULL;
    if (help || !kind) {
        if (kind && !as_gen_help(kind))
            return as_cli_usage("gen", "unknown generator '%s'", kind);
        if (!kind)
            fputs(gen_help, help ? stdout : stderr);
        fputs(as_gen_help(kind), help ? stdout : stderr);
        return help ? AS_EXIT_OK : AS_EXIT_USAGE;
    }
    if (!outp)
        return as_cli_usage("gen", "gen needs -o OUT ('-' for stdout)");
    as_trace_reader *rd = NULL;
    as_out *o = NULL;
    as_trace_error err;
    memset(&err, 0, sizeof err);
    err.offset = err.event = UINT64_MAX;
    int rc = as_gen_open(kind, argc - optind - 1, argv + optind + 1, &rd, &err);
    if (rc == AS_EUSAGE)
        return as_cli_usage("gen", "%s", err.msg);
    if (rc < 0)
        return as_cli_trace_fail(&err, kind);
    int ret = as_out_open_named(outp, &o);
    if (!ret)
        ret = as_out_commit(o, copy_trace(rd, kind, o, out_format(outp, forced)));
    as_trace_close(rd);
    return ret;
}

/* ---- policies ----------------------------------------------------------------------------- */

static const char *type_name(as_knob_type t)
{
    switch (t) {
    case AS_KNOB_INT:
        return "int";
    case AS_KNOB_BOOL:
        return "bool";
    case AS_KNOB_FLOAT:
        return "float";
    case AS_KNOB_SIZE:
        return "size";
    case AS_KNOB_ENUM:
        return "enum";
    case AS_KNOB_DIVS:
        return "divisions";
    }
    return "?";
}

/* The idx-th '|'-separated word of choices. */
static void choice(char *b, size_t n, const char *choices, int64_t idx)
{
    const char *p = choices ? choices : "";
    for (int64_t i = 0; i < idx && p; i++) {
        p = strchr(p, '|');
        if (p)
            p++;
    }
    if (!p) {
        snprintf(b, n, "%" PRId64, idx);
        return;
    }
    size_t len = strcspn(p, "|");
    snprintf(b, n, "%.*s", (int)len, p);
}

/* The knob's default as the spec parser reads it back. */
static void knob_default(const as_knob *k, char *def, size_t n)
{
    switch (k->type) {
    case AS_KNOB_BOOL:
        snprintf(def, n, "%s", k->def ? "true" : "false");
        break;
    case AS_KNOB_FLOAT:
        snprintf(def, n, "%g", k->fdef);
        break;
    case AS_KNOB_ENUM:
        choice(def, n, k->choices, k->def);
        break;
    default:
        snprintf(def, n, "%" PRId64, k->def);
        break;
    }
}

static void knob_line(const as_policy *p, size_t i, int w, int tsv)
{
    const as_knob *k = &p->knobs[i];
    char def[64], range[128];
    knob_default(k, def, sizeof def);
    as_knob_range(p, i, range, sizeof range);
    const char *unit = k->unit && k->unit[0] ? k->unit : "-";
    if (tsv) {
        printf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p->name, k->name, k->alias ? k->alias : "",
               type_name(k->type), unit, def, range, k->help ? k->help : "");
        return;
    }
    printf("    %-*s %-9s %-9s default %-8s range %s%s%s\n        %s\n", w, k->name,
           type_name(k->type), unit, def, range, k->alias ? "  alias " : "",
           k->alias ? k->alias : "", k->help ? k->help : "");
}

static const char policies_help[] =
    "usage: allocsim policies [-f table|tsv] [NAME]\n"
    "\n"
    "Lists every policy (or NAME) with its knobs: name, type, unit, default, the range the\n"
    "spec parser accepts, PYTORCH_CUDA_ALLOC_CONF alias and help.\n"
    "\n"
    "  -f, --format FMT      table (default), or tsv: a header line, then one tab-separated\n"
    "                        line per knob: policy, knob, alias, type, unit, default, range,\n"
    "                        help (a policy without knobs: one line, the rest empty)\n";

int as_cmd_policies(int argc, char **argv)
{
    static const struct option opts[] = {
        {"format", required_argument, NULL, 'f'}, {"help", no_argument, NULL, 'h'}, {0}};
    int tsv = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:h", opts, NULL)) != -1) {
        if (c == 'h') {
            fputs(policies_help, stdout);
            return AS_EXIT_OK;
        }
        if (c != 'f')
            return as_cli_bad_option("policies", c, argv);
        if (strcmp(optarg, "tsv") != 0 && strcmp(optarg, "table") != 0)
            return as_cli_usage("policies", "-f %s: the format is table or tsv", optarg);
        tsv = strcmp(optarg, "tsv") == 0;
    }
    if (argc - optind > 1)
        return as_cli_usage("policies", "one policy name at most");
    size_t n;
    const as_policy *const *l = as_policy_list(&n);
    const char *only = optind < argc ? argv[optind] : NULL;
    if (only && !as_policy_find(only))
        return as_cli_usage("policies", "unknown policy '%s'", only);
    if (tsv)
        printf("policy\tknob\talias\ttype\tunit\tdefault\trange\thelp\n");
    for (size_t i = 0; i < n; i++) {
        if (only && strcmp(only, l[i]->name) != 0)
            continue;
        if (tsv && !l[i]->n_knobs)
            printf("%s\t\t\t\t\t\t\t\n", l[i]->name);
        if (!tsv)
            printf("%s%s%s - %s\n%s", i && !only ? "\n" : "", l[i]->name,
                   as_policy_offline(l[i]) ? " (offline)" : "", l[i]->summary,
                   l[i]->n_knobs ? "" : "    (no knobs)\n");
        int w = 12;
        for (size_t k = 0; k < l[i]->n_knobs; k++)
            if ((int)strlen(l[i]->knobs[k].name) > w)
                w = (int)strlen(l[i]->knobs[k].name);
        for (size_t k = 0; k < l[i]->n_knobs; k++)
            knob_line(l[i], k, w, tsv);
    }
    return AS_EXIT_OK;
}

/* ---- info --------------------------------------------------------------------------------- */

static void bucket_label(char *b, size_t n, unsigned k, int bytes)
{
    char lo[32], hi[32];
    if (bytes) {
        as_fmt_bytes(lo, sizeof lo, 1ull << k);
        if (k < 63)
            as_fmt_bytes(hi, sizeof hi, 1ull << (k + 1));
        else
            snprintf(hi, sizeof hi, "inf");
    } else {
        snprintf(lo, sizeof lo, "%llu", 1ull << k);
        if (k < 63)
            snprintf(hi, sizeof hi, "%llu", 1ull << (k + 1));
        else
            snprintf(hi, sizeof hi, "inf");
    }
    snprintf(b, n, "[%s, %s)", lo, hi);
}

static void histogram(const char *title, const uint64_t *h, const uint64_t *bytes, int is_bytes)
{
    unsigned lo = AS_INFO_BUCKETS, hi = 0;
    uint64_t max = 0, total = 0;
    for (unsigned k = 0; k < AS_INFO_BUCKETS; k++) {
        if (!h[k])
            continue;
        if (lo == AS_INFO_BUCKETS)
            lo = k;
        hi = k;
        total += h[k];
        if (h[k] > max)
            max = h[k];
    }
    printf("%s:\n", title);
    if (!total) {
        printf("  (none)\n");
        return;
    }
    for (unsigned k = lo; k <= hi; k++) {
        char lab[80], by[32] = "";
        bucket_label(lab, sizeof lab, k, is_bytes);
        if (bytes)
            as_fmt_bytes(by, sizeof by, bytes[k]);
        int bar = (int)((40 * h[k] + max - 1) / max);
        printf("  %-24s %10llu %5.1f%%  %10s  %.*s\n", lab, (unsigned long long)h[k],
               100.0 * (double)h[k] / (double)total, by, bar,
               "########################################");
    }
}

static void json_hist(const char *name, const uint64_t *h, const uint64_t *bytes)
{
    printf(", \"%s\": [", name);
    int first = 1;
    for (unsigned k = 0; k < AS_INFO_BUCKETS; k++) {
        if (!h[k])
            continue;
        printf("%s{\"lo\": %llu, \"count\": %llu", first ? "" : ", ", 1ull << k,
               (unsigned long long)h[k]);
        if (bytes)
            printf(", \"bytes\": %llu", (unsigned long long)bytes[k]);
        putchar('}');
        first = 0;
    }
    putchar(']');
}

/* The call sites with the most bytes live at the trace's peak requested (siterep.h: sp,
 * fed by info's read of the trace), or for a snapshot without frames how to record them. */
static void info_sites(const as_site_peak *sp, const as_meta *m, const as_sites *sites)
{
    const char *src = m ? as_meta_get(m, "source") : NULL;
    if (!as_sites_count(sites)) {
        if (src && strcmp(src, "torch-snapshot") == 0)
            printf("call sites: none: the snapshot was recorded without stacks (record them "
                   "with torch.cuda.memory._record_memory_history(enabled=\"all\", "
                   "context=\"all\", stacks=\"python\"))\n");
        return;
    }
    printf("call sites: %u (each named by its innermost frame outside PyTorch)\n",
           as_sites_count(sites));
    static char labels[10][AS_SITE_LABEL];
    uint64_t bytes[10];
    unsigned n = 0;
    if (!sp || as_site_peak_top(sp, sites, 10, labels, bytes, NULL, &n) < 0)
        return;
    printf("  by bytes live at the peak requested:\n");
    for (unsigned i = 0; i < n; i++) {
        char b[32];
        as_fmt_bytes(b, sizeof b, bytes[i]);
        printf("  %10s  ", b);
        as_cli_put_safe(stdout, labels[i]);
        putchar('\n');
    }
}

/* info -f json's call sites: their count, and the top ten by bytes live at the peak
 * requested as text's list (null when they could not be computed: out of host memory). */
static void json_sites(const as_site_peak *sp, const as_sites *sites)
{
    static char labels[10][AS_SITE_LABEL];
    uint64_t bytes[10];
    uint32_t ids[10];
    unsigned n = 0;
    printf(", \"call_sites\": %u, \"sites_at_peak\": ", as_sites_count(sites));
    if (as_sites_count(sites) &&
        (!sp || as_site_peak_top(sp, sites, 10, labels, bytes, ids, &n) < 0)) {
        fputs("null", stdout);
        return;
    }
    putchar('[');
    for (unsigned i = 0; i < n; i++) {
        printf("%s{\"rank\": %u, \"site\": %u, \"bytes\": %llu, \"frame\": ", i ? ", " : "", i + 1,
               ids[i], (unsigned long long)bytes[i]);
        as_report_json_str(stdout, labels[i]);
        putchar('}');
    }
    putchar(']');
}

/* One JSON object; histogram buckets are [lo, 2 lo). */
static void info_json(const char *path, const as_trace_reader *rd, const as_trace_info *in,
                      const as_site_peak *sp)
{
    const as_trace_summary *s = &in->sum;
    /* The trace object every command writes, with info's own fields added to it. */
    as_report_json_head(stdout);
    fputs(", \"traces\": [", stdout);
    as_report_json_trace_open(stdout, 0, path, as_trace_fmt_name(as_trace_reader_format(rd)), s,
                              as_trace_reader_meta(rd));
    printf(", \"peak_live\": %llu, \"total_bytes\": %llu, \"min_size\": %llu, "
           "\"max_size\": %llu",
           (unsigned long long)in->peak_live, (unsigned long long)in->total_bytes,
           (unsigned long long)in->min_size, (unsigned long long)in->max_size);
    printf(", \"stream_list\": [");
    for (unsigned i = 0; i < in->nstreams; i++)
        printf("%s{\"stream\": %llu, \"allocs\": %llu, \"bytes\": %llu}", i ? ", " : "",
               (unsigned long long)in->streams[i].stream, (unsigned long long)in->streams[i].allocs,
               (unsigned long long)in->streams[i].bytes);
    printf("], \"time_span_us\": ");
    if (in->first_time != AS_TIME_NONE)
        printf("%lld", (long long)(in->last_time - in->first_time));
    else
        printf("null");
    json_hist("sizes", in->size_hist, in->size_bytes);
    json_hist("lifetimes", in->life_hist, NULL);
    json_hist("pending", in->pend_hist, NULL);
    json_sites(sp, as_trace_reader_sites(rd));
    printf("}]}\n");
}

/* A snapshot's devices with their trace entries, and the one read: "devices: 0 (6860
 * trace entries, read)". The reader's metadata holds both (torch.device_entries "0:6860",
 * device). */
static void print_devices(const as_meta *m)
{
    const char *list = m ? as_meta_get(m, "torch.device_entries") : NULL;
    const char *dev = m ? as_meta_get(m, "device") : NULL;
    if (!list || !dev)
        return;
    fputs("devices:", stdout);
    for (const char *p = list; *p;) {
        unsigned long long d, n;
        int used = 0;
        if (sscanf(p, "%llu:%llu%n", &d, &n, &used) != 2 || used <= 0)
            break;
        char idx[24];
        snprintf(idx, sizeof idx, "%llu", d);
        printf("%s %llu (%llu trace entr%s%s)", p == list ? "" : ",", d, n, n == 1 ? "y" : "ies",
               strcmp(idx, dev) ? "" : ", read");
        p += used;
        p += *p == ',';
    }
    putchar('\n');
}

/* A snapshot's state at the dump (the whole of a state-only one), and how much of the
 * state at the trace's start was rebuilt (sim/check.h). */
static void print_snapshot_state(const as_trace_reader *rd)
{
    const as_snapshot_record *rec = as_trace_reader_snapshot(rd);
    if (!rec || !rec->have_segments)
        return;
    as_dump_state d;
    as_check_start s;
    char a[32], b[32], c[32], e[32];
    as_dump_state_of(rec, &d);
    as_fmt_bytes(a, sizeof a, d.reserved);
    as_fmt_bytes(b, sizeof b, d.allocated);
    as_fmt_bytes(c, sizeof c, d.requested);
    printf("state at the dump: %llu segments (%llu small), %s reserved; %s allocated in %llu "
           "blocks (%s requested)",
           (unsigned long long)d.segments, (unsigned long long)d.small_segments, a, b,
           (unsigned long long)d.allocated_blocks, c);
    if (d.pending_blocks) {
        as_fmt_bytes(a, sizeof a, d.pending);
        printf(", %s in %llu blocks awaiting their free", a, (unsigned long long)d.pending_blocks);
    }
    as_fmt_bytes(a, sizeof a, d.free_bytes);
    as_fmt_bytes(b, sizeof b, d.largest_free);
    as_fmt_bytes(c, sizeof c, d.internal);
    as_fmt_bytes(e, sizeof e, d.external);
    printf("; %s free inside segments in %llu blocks, the largest %s\n", a,
           (unsigned long long)d.free_blocks, b);
    printf("  fragmentation as memory_viz splits it: internal %s (allocated blocks beyond their "
           "request), external %s (free blocks inside segments)",
           c, e);
    if (d.free_bytes)
        printf("; 1 - largest/free = %.3f", 1.0 - (double)d.largest_free / (double)d.free_bytes);
    putchar('\n');
    if (d.state_only) {
        printf("history: none (%llu trace entr%s): only the state at the dump; to simulate, record "
               "the history: torch.cuda.memory._record_memory_history(max_entries=1000000) "
               "before the job allocates, then torch.cuda.memory._dump_snapshot(FILE)\n",
               (unsigned long long)d.entries, d.entries == 1 ? "y" : "ies");
        return;
    }
    as_check_start_of(rd, &s);
    if (!s.possible)
        return;
    as_fmt_bytes(a, sizeof a, s.reserved);
    as_fmt_bytes(b, sizeof b, s.live_bytes);
    if (s.reconstructed)
        printf("start of the trace: recorded mid-run; rebuilt %llu segments (%s) and %llu live "
               "blocks (%s: %llu freed by the trace, %llu live at the dump; %llu sizes from the "
               "request)\n",
               (unsigned long long)s.segments, a, (unsigned long long)s.live, b,
               (unsigned long long)s.from_frees, (unsigned long long)s.from_dump,
               (unsigned long long)s.sizes_inferred);
    else
        printf("start of the trace: recorded mid-run; not rebuilt: %s\n", s.why);
}

/* How a snapshot's allocations were given their pools (traces/FORMAT.md, "Private pools"),
 * once the trace is read: what is recorded, what is inferred, what is ambiguous. */
static void print_snapshot_pools(const as_trace_reader *rd)
{
    const as_snapshot_record *rec = as_trace_reader_snapshot(rd);
    const as_meta *m = as_trace_reader_meta(rd);
    const char *np = as_meta_get(m, "pools"), *ni = as_meta_get(m, "pools.inferred");
    const char *nr = as_meta_get(m, "torch.oom_retry_runs");
    if (!rec || !np || (!strcmp(np, "0") && !rec->pool_ambiguous && !nr))
        return;
    printf("private pools: %s (%s inferred), %llu allocations in them; each allocation's pool "
           "read from segment_pool_id for %llu, its segment's capture frames for %llu, the "
           "release order for %llu, its stream for %llu; %llu ambiguous (simulated in the "
           "default pool)",
           np, ni ? ni : "0", (unsigned long long)rec->pool_allocs,
           (unsigned long long)rec->pool_recorded, (unsigned long long)rec->pool_by_frames,
           (unsigned long long)rec->pool_by_release, (unsigned long long)rec->pool_by_stream,
           (unsigned long long)rec->pool_ambiguous);
    if (nr)
        printf("; %s release%s read as OOM retries", nr, strcmp(nr, "1") ? "s" : "");
    putchar('\n');
}

static const char info_help[] =
    "usage: allocsim info [-f text|json] [--snapshot-device N] TRACE\n"
    "\n"
    "Counts, streams, peak requested memory (an allocation stops counting at its FREE_REQ),\n"
    "histograms of request sizes and of lifetimes (events from ALLOC to FREE), and the\n"
    "trace's source and metadata. For a snapshot, its devices and their trace entries;\n"
    "--snapshot-device N reads device N (one tracing several devices needs it).\n";

/* `info`'s text: the trace's name, format, source and metadata, its counts, streams and
 * histograms. */
static void info_text(const char *path, as_trace_reader *rd, const as_trace_info *in,
                      const as_site_peak *sp)
{
    const as_trace_summary *s = &in->sum;
    char a[32], b[32], c[32];
    /* The name and the metadata are the input's bytes: escaped, so that a trace cannot
     * drive the terminal (JSON has its own escaping). */
    fputs("trace: ", stdout);
    as_cli_put_safe(stdout, path);
    printf("\nformat: %s\n", as_trace_fmt_name(as_trace_reader_format(rd)));
    const as_meta *m = as_trace_reader_meta(rd);
    const char *src = m ? as_meta_get(m, "source") : NULL;
    fputs("source: ", stdout);
    as_cli_put_safe(stdout, src ? src : "(unknown)");
    putchar('\n');
    print_devices(m);
    print_snapshot_state(rd);
    print_snapshot_pools(rd);
    if (m && m->n) {
        printf("metadata:\n");
        for (size_t i = 0; i < m->n; i++) {
            fputs("  ", stdout);
            as_cli_put_safe(stdout, m->kv[i].key);
            fputs(" = ", stdout);
            as_cli_put_safe(stdout, m->kv[i].value);
            putchar('\n');
        }
    }
    printf("events: %llu (alloc %llu, free %llu, free_req %llu, empty_cache %llu, mark %llu)\n",
           (unsigned long long)s->events, (unsigned long long)s->allocs,
           (unsigned long long)s->frees, (unsigned long long)s->free_reqs,
           (unsigned long long)s->empty_caches, (unsigned long long)s->marks);
    printf("live: %llu at the end, %llu at most\n", (unsigned long long)s->live_at_end,
           (unsigned long long)in->peak_live);
    as_fmt_bytes(a, sizeof a, s->peak_requested);
    printf("peak requested: %s (%llu bytes)\n", a, (unsigned long long)s->peak_requested);
    info_sites(sp, m, as_trace_reader_sites(rd));
    as_fmt_bytes(a, sizeof a, in->total_bytes);
    as_fmt_bytes(b, sizeof b, in->min_size);
    as_fmt_bytes(c, sizeof c, in->max_size);
    printf("requests: %s in all, smallest %s, largest %s\n", a, b, c);
    if (in->first_time != AS_TIME_NONE)
        printf("time span: %.6f s\n", (double)(in->last_time - in->first_time) * 1e-6);
    printf("streams: %llu\n", (unsigned long long)s->streams);
    for (unsigned i = 0; i < in->nstreams; i++) {
        as_fmt_bytes(a, sizeof a, in->streams[i].bytes);
        printf("  %#llx: %llu allocs, %s\n", (unsigned long long)in->streams[i].stream,
               (unsigned long long)in->streams[i].allocs, a);
    }
    if (s->streams > in->nstreams)
        printf("  ... and %llu more\n", (unsigned long long)(s->streams - in->nstreams));
    histogram("request sizes (count, share, bytes)", in->size_hist, in->size_bytes, 1);
    histogram("lifetimes, events from ALLOC to FREE", in->life_hist, NULL, 0);
    if (s->free_reqs)
        histogram("pending time, events from FREE_REQ to FREE", in->pend_hist, NULL, 0);
}

int as_cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {
        {"format", required_argument, NULL, 'f'},
        {"snapshot-device", required_argument, NULL, AS_CLI_OPT_SNAPSHOT_DEVICE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int json = 0, opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":f:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'f':
            if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
                return as_cli_usage("info", "-f %s: the format is text or json", optarg);
            json = strcmp(optarg, "json") == 0;
            break;
        case AS_CLI_OPT_SNAPSHOT_DEVICE:
            if (as_cli_snapshot_device("info", optarg))
                return AS_EXIT_USAGE;
            break;
        case 'h':
            fputs(info_help, stdout);
            return AS_EXIT_OK;
        case ':':
        default:
            return as_cli_bad_option("info", opt, argv);
        }
    }
    if (argc - optind != 1)
        return as_cli_usage("info", "info takes one TRACE");
    const char *path = argv[optind];
    as_trace_reader *rd;
    int ret = as_cli_open_trace(path, &rd);
    if (ret)
        return ret;
    as_trace_info *in = malloc(sizeof *in);
    as_site_peak *sp = NULL;
    as_trace_error err;
    memset(&err, 0, sizeof err);
    err.offset = err.event = UINT64_MAX;
    if (!in) {
        as_trace_close(rd);
        as_cli_msg("out of host memory");
        return AS_EXIT_INPUT;
    }
    /* The call sites at the peak come from the same read (they cost 4 bytes an ALLOC). */
    uint32_t nsites = as_sites_count(as_trace_reader_sites(rd));
    if (nsites && as_site_peak_create(nsites, &sp) < 0) {
        as_site_peak_destroy(sp);
        sp = NULL;
    }
    if (as_trace_info_compute_sites(rd, in, sp, &err) < 0) {
        ret = as_cli_trace_fail(&err, path);
        goto out;
    }
    if (json)
        info_json(path, rd, in, sp);
    else
        info_text(path, rd, in, sp);
    if (fflush(stdout) || ferror(stdout)) {
        as_cli_msg("stdout: write failed");
        ret = AS_EXIT_INPUT;
    }
out:
    as_site_peak_destroy(sp);
    free(in);
    as_trace_close(rd);
    return ret;
}
