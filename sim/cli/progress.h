/*
 * progress.h - the progress line of long commands (run's sweeps and groups, mincap):
 * "runs done/total, percent, time left" on stderr, only when stderr is a terminal and -q
 * was not given, redrawn at most four times a second, erased before anything else is
 * printed. The estimate of time left is elapsed * (1 - f) / f for the fraction f of the
 * work done, which the caller computes from what the engine reports (the library never
 * prints; only the command layer does).
 */
#ifndef AS_SIM_PROGRESS_H
#define AS_SIM_PROGRESS_H

#include <stdint.h>

#include "engine.h"

typedef struct as_progress {
    int on;            /* stderr is a terminal and not quiet */
    int shown;         /* a line is on the screen */
    double t0, last;   /* start, last redraw (monotonic seconds) */
    const char *what;  /* "runs", "capacities" */
    const char *label; /* what is running: a trace or a policy; may be NULL */
} as_progress;

/* Starts the clock; on only when stderr is a terminal and quiet is 0. */
void as_progress_start(as_progress *p, int quiet, const char *what);
/* Redraws (at most every 0.25 s): done of total units, and frac in [0, 1] of the work. */
void as_progress_show(as_progress *p, uint64_t done, uint64_t total, double frac);
/* Erases the line (before a message or the report). */
void as_progress_clear(as_progress *p);
/* The fraction of one engine's work done: each finished run counts what it handled, each
 * run still going the whole trace, whose length comes from `events_total` when known
 * (nonzero) or else from the bytes read of the input. 0 when nothing can be estimated. */
double as_progress_engine_frac(const as_engine_progress *e, uint64_t events_total);

#endif
