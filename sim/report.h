/*
 * report.h - the reports every front end shares (the allocsim command, replay/): the
 * per-run table, CSV and JSON (the schema in sim/REPORT.md), the --segments and --timeline
 * CSV files, and the parsing and printing of byte quantities.
 *
 * A report collects traces and runs (copied, so engines can be destroyed) and writes
 * them at the end. The CSV logs spool each run's rows to its own temporary file and
 * concatenate them in run order on close, so the files are grouped by run whatever
 * order the engine delivered the rows in. Nothing here exits; every function returns 0 (or
 * an index) or a code of the one error space (error.h): AS_ENOMEM, AS_EINVAL, and for the
 * writers AS_EIO with errno's words in a why buffer ("write failed: No space left on
 * device"), for the caller to put after the file's name.
 */
#ifndef AS_SIM_REPORT_H
#define AS_SIM_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine.h"
#include "trace.h"
#include "units.h" /* the human form of sizes and capacities */

#define AS_VERSION "0.1.0"
/* The version of the report contract (sim/REPORT.md): JSON "schema", bumped on any
 * change of a field's name, meaning or order. */
#define AS_REPORT_SCHEMA 3

typedef enum as_report_fmt {
    AS_REPORT_TABLE,
    AS_REPORT_CSV,
    AS_REPORT_JSON,
    AS_REPORT_JSONL
} as_report_fmt;

/* "table", "csv", "json" or "jsonl". Returns 0 or -1. */
int as_report_fmt_parse(const char *s, as_report_fmt *out);

typedef struct as_report as_report;

int as_report_create(as_report **out);
void as_report_destroy(as_report *r);
/* Adds a trace (strings and metadata copied; meta and format may be NULL). Returns the
 * trace's index or < 0. */
int as_report_add_trace(as_report *r, const char *path, const char *format,
                        const as_trace_summary *sum, const as_meta *meta);
/* Adds a run of trace `trace` (copied, the policy text included). Returns the run's
 * index in the report (the `run` column of --segments and --timeline) or < 0. */
int as_report_add_run(as_report *r, unsigned trace, const as_run_result *res);
/* Adds what engine e just ran over trace path (read through rd): the trace, unless *trace
 * already holds its index (>= 0; it is set here otherwise), then every run of e. The one
 * way the front ends fill a report. Returns 0 or AS_ENOMEM. */
int as_report_add_engine(as_report *r, int *trace, const char *path, const as_trace_reader *rd,
                         const as_engine *e);
unsigned as_report_nruns(const as_report *r);
unsigned as_report_ntraces(const as_report *r);
/* Run i's result and its trace's index (i < nruns), and trace t's summary and path (t <
 * ntraces); owned by the report. */
const as_run_result *as_report_run(const as_report *r, unsigned i, unsigned *trace);
const as_trace_summary *as_report_trace(const as_report *r, unsigned t, const char **path);
/* Trace t's format name (NULL when none was given), its metadata, and how many call sites
 * its reader held (-1 when it was added without one, by as_report_add_trace): what a
 * second pass needs to know before it opens the trace again. */
const char *as_report_trace_format(const as_report *r, unsigned t);
const as_meta *as_report_trace_meta(const as_report *r, unsigned t);
int64_t as_report_trace_sites(const as_report *r, unsigned t);
/* Writes the report as JSON Lines (-f jsonl): one object per trace, {"allocsim", "schema",
 * "command": "run", "unit": units[i] (the trace's position among the command's traces,
 * i when units is NULL), "of": of (how many there are), "trace": {...}, "runs": [...]},
 * runs numbered within their trace. Returns 0 or AS_EIO (why says how it failed). */
int as_report_write_jsonl(const as_report *r, FILE *f, const unsigned *units, unsigned of,
                          char *why, size_t why_len);
/* Writes the whole report. Returns 0, AS_ENOMEM or AS_EIO (why says how it failed). */
int as_report_write(const as_report *r, FILE *f, as_report_fmt fmt, char *why, size_t why_len);

/* The JSON report (-f json) with its top object left open after "runs", for the members of
 * other sections (`, "NAME": ...`; run --by-mark's and --sites'); the caller writes the
 * closing "}\n" and checks the stream. Returns 0 or AS_ENOMEM. */
int as_report_write_json_open(const as_report *r, FILE *f);

/* s as one CSV field, RFC 4180-quoted when it holds a comma, quote, CR or LF; and s as a
 * JSON string literal. Every CSV and JSON writer of the command uses these. */
void as_report_csv_str(FILE *f, const char *s);
void as_report_json_str(FILE *f, const char *s);
/* An integer that may not apply (have == 0 or v == AS_NONE): -1 in CSV, null in JSON. */
void as_report_csv_u64(FILE *f, int have, uint64_t v);
void as_report_json_u64(FILE *f, int have, uint64_t v);
/* A real, always with a point or an exponent (0.0, not 0); null when not finite. */
void as_report_json_real(FILE *f, double d);
/* `{"allocsim": VERSION, "schema": N` - the head of every command's JSON object. */
void as_report_json_head(FILE *f);
/* A trace object of the "traces" array, left open for the caller's own fields and '}':
 * {"trace": index, "file", "format" (or null), the summary's counts when sum is given,
 * "meta": {...}. Every command names and writes its traces this way. */
void as_report_json_trace_open(FILE *f, unsigned index, const char *file, const char *format,
                               const as_trace_summary *sum, const as_meta *meta);

/* ---- --segments / --timeline CSV -------------------------------------------------- */

typedef enum as_runlog_kind { AS_RUNLOG_SEGMENTS, AS_RUNLOG_TIMELINE } as_runlog_kind;
typedef struct as_runlog as_runlog;

/* Creates (truncates) path; the header line is written on close. Returns 0, AS_EIO (why:
 * "cannot create: ...") or AS_ENOMEM. */
int as_runlog_open(const char *path, as_runlog_kind kind, as_runlog **out, char *why,
                   size_t why_len);
/* The same on a stream the caller owns: close flushes and checks it but does not close it.
 * Returns 0 or AS_ENOMEM. */
int as_runlog_open_stream(FILE *f, as_runlog_kind kind, as_runlog **out);
/* The engine numbers its runs from 0; the report's index of its run 0 goes here. */
void as_runlog_set_base(as_runlog *l, unsigned run_base);
/* Callbacks with the engine's signatures (user = the as_runlog). */
void as_runlog_segment(void *user, const as_seg_record *rec);
void as_runlog_sample(void *user, const as_timeline_sample *s);
/* Runs below `upto` (report index) are done: writes the header if not yet, and their rows,
 * in run order, and closes their spool files, so that only runs in flight hold one.
 * Returns 0, AS_EIO or AS_ENOMEM; why (unless NULL) says what failed ("write failed: ...",
 * "cannot create a temporary file: ..."). The first failure stays: later calls return it. */
int as_runlog_flush(as_runlog *l, unsigned upto, char *why, size_t why_len);
/* Drops the rows of runs from `from` on (a pass whose results are void). */
void as_runlog_discard(as_runlog *l, unsigned from);
/* Writes the header and every run's rows in run order, closes and frees. Returns 0 or the
 * first failure, as as_runlog_flush. */
int as_runlog_close(as_runlog *l, char *why, size_t why_len);

#endif
