/*
 * siterep.h - call sites in the reports (`allocsim run --sites FILE`, the OOM lines of the
 * table, `allocsim info`): which code the bytes belong to.
 *
 * For each run of a trace that has call sites, the run's own pass (the driver's,
 * driver.h: no second decode, no second run) walks the policy at its first OOM and, for
 * the full report (--sites), right after each event at which the run reaches a new peak of
 * reserved, the last of which is the peak (as the segment map's pass walks it; when the
 * engine's budget for peak walks skipped the last, the driver walks it in a second pass,
 * so a trace whose reserved memory grows at every allocation stays linear), and
 * attributes every block to the site of the allocation it holds:
 *   live   the requested bytes of the site's allocations live then;
 *   waste  what the site costs beyond them: its blocks' rounding (block - requested) plus
 *          a share of the free bytes of each segment it pins, in proportion to its block
 *          bytes there (a segment with no allocation left pins nothing: its free bytes are
 *          the cache's, `(cached)`, site -1);
 *   at the OOM also the failing request's site (`request`), and the sites whose blocks pin
 *   the three largest fragmented segments (the most free bytes among segments holding an
 *   allocation, `pin`: their block bytes there).
 * Summed over sites (the cache included), live is the run's requested bytes then and
 * live + waste its reserved bytes. Memory: a site and a size per ALLOC of the trace (12
 * bytes each) and a row per site per run.
 */
#ifndef AS_SIM_SITEREP_H
#define AS_SIM_SITEREP_H

#include <stdint.h>
#include <stdio.h>

#include "engine.h"
#include "policy.h"
#include "report.h"
#include "trace.h"

typedef struct as_siterep as_siterep;

/* full: the peak's rows too (--sites: a walk at each new peak of reserved), else the OOMs'
 * alone (the table's lines: a walk at each run's first OOM, nothing before it). */
int as_siterep_create(int full, as_siterep **out);
void as_siterep_destroy(as_siterep *s);
int as_siterep_full(const as_siterep *s);

/* The hooks of the runs' own pass (driver.h's as_driver_pass, which cmd_run.c wires), on
 * the reading thread. A group of n runs of the trace rd reads (not read from yet) is about
 * to run, as one engine's runs 0..n-1; what an earlier group left that was not kept is
 * dropped. Returns 1 when the trace has call sites: the group's engine then hands its
 * events to as_siterep_events and its walks to as_siterep_walk (at the OOMs, and at the
 * peaks when full); 0 when it has none (no hooks), or AS_ENOMEM. */
int as_siterep_group(as_siterep *s, const as_trace_reader *rd, size_t n);
void as_siterep_events(as_siterep *s, const as_event *ev, size_t n);
void as_siterep_walk(as_siterep *s, unsigned run, uint64_t event, uint64_t alloc, const char *why,
                     const as_walk_item *it);
/* The group is in the report: trace t's runs from report run base on, as engine e ran
 * them (its results say which peak walk was the peak, and the OOMs' requests). A trace
 * without sites gets its entry too (its note). Returns 0 or AS_ENOMEM. */
int as_siterep_keep(as_siterep *s, const as_report *rep, unsigned t, const as_trace_reader *rd,
                    const as_engine *e, unsigned base);

/* The text section after the table: per trace with sites, every OOM's request site and
 * pinning sites, and with full, each run's top sites by live bytes and by waste at its
 * peak; for a snapshot without frames, how to record them. Nothing when there is nothing
 * to say. Returns 0 or AS_EIO. */
int as_siterep_write_text(const as_siterep *s, const as_report *rep, FILE *f, int full,
                          unsigned top);
/* The CSV of sim/REPORT.md ("Call sites"): top rows per run, moment and measure. */
int as_siterep_write_csv(const as_siterep *s, const as_report *rep, FILE *f, unsigned top);
/* The same rows as a JSON array of objects (`-f json`'s "sites"; the cache's row has site
 * null). Returns 0 or AS_EIO. */
int as_siterep_write_json(const as_siterep *s, FILE *f, unsigned top);

/* A site as people read it: its user frame (as_sites_user_frame) "FILE:LINE NAME" with
 * FILE after its last "site-packages/" (or "dist-packages/"), else its last two path
 * components; "(no frames)" for site 0. */
void as_site_label(const as_sites *s, uint32_t site, char *buf, size_t n);

#define AS_SITE_LABEL 160 /* bytes of a label as_site_peak_top writes */

/* For `info`, fed the events of the pass that reads the trace anyway: the sites by
 * requested bytes live at the trace's peak requested (first reached; an allocation counts
 * until its FREE). Memory: a site per ALLOC of the trace, 4 bytes, and 25 bytes a site.
 * A trace's sites 0..nsites; feed returns 0 or AS_ENOMEM (the events after are not
 * taken). top writes the largest first, at most top (<= 64) of them, into labels (from
 * sites) and bytes and, unless it is NULL, their numbers into ids; *n is how many were
 * written. Returns 0 or AS_ENOMEM. */
typedef struct as_site_peak as_site_peak;
int as_site_peak_create(uint32_t nsites, as_site_peak **out);
int as_site_peak_feed(as_site_peak *p, const as_event *ev, size_t n);
int as_site_peak_top(const as_site_peak *p, const as_sites *sites, unsigned top,
                     char (*labels)[AS_SITE_LABEL], uint64_t *bytes, uint32_t *ids, unsigned *n);
void as_site_peak_destroy(as_site_peak *p);

#endif
