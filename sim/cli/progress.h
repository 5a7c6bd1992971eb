/*
 * progress.h - the progress line of long commands (run's sweeps and groups, mincap):
 * "runs done/total, percent, time left" on stderr, only when stderr is a terminal and -q
 * was not given, redrawn at most four times a second, erased before anything else is
 * printed. The estimate of time left is elapsed * (1 - f) / f for the fraction f of the
 * work done, which the caller computes from what the engine reports (driver.h's
 * as_driver_engine_frac for one engine; the library never prints, only the command layer).
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
#endif
