/*
 * bymark.h - a report broken down between marks (`allocsim run --by-mark[=TEXT]`): the
 * trace's MARK events whose label contains TEXT (every MARK without it) cut it into
 * intervals, interval 0 before the first such mark and interval k from the k-th on (a
 * snapshot's annotations are "START name" / "END name": --by-mark="START Optimizer.step"
 * gives one interval per training step).
 *
 * Per interval: its first event and mark label, the ALLOCs in it, the most bytes requested
 * (live, unrounded) at once within it; and per run the most bytes reserved within it (its
 * level when the interval began included), the device reserves and releases in it, and
 * whether the run's OOM fell in it. Reserved changes only at device calls, so a second pass
 * of the same runs with the device-event hook gives it exactly. Memory: a row per interval
 * per run.
 */
#ifndef AS_SIM_BYMARK_H
#define AS_SIM_BYMARK_H

#include <stdio.h>

#include "engine.h"
#include "policy.h"
#include "report.h"
#include "trace.h"

typedef struct as_bymark as_bymark;

/* The breakdown of report trace t (path; its runs are specs x caps, spec-major, ncap
 * capacities). Returns 0, a trace error (< 0, err filled) or an engine error (why). */
int as_bymark_trace(const as_report *rep, unsigned t, const char *path, const as_reader_opts *ro,
                    const as_policy_spec *specs, size_t nspec, size_t ncap, const char *match,
                    as_bymark **out, as_trace_error *err, char *why, size_t why_len);
/* The text section after the table. Returns 0 or AS_EIO. */
int as_bymark_write_text(const as_bymark *b, const as_report *rep, FILE *f);
/* The same as the rows of `-f json`'s "by_mark" array (sim/REPORT.md): one object per run
 * and interval, each after ",\n  " but the first (*n counts the rows written so far, over
 * the calls for several traces). Returns 0 or AS_EIO. */
int as_bymark_write_json(const as_bymark *b, const as_report *rep, FILE *f, unsigned *n);
void as_bymark_destroy(as_bymark *b);

#endif
