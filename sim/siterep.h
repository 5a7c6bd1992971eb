/*
 * siterep.h - call sites in the reports (`allocsim run --sites FILE`, the OOM lines of the
 * table, `allocsim info`): which code the bytes belong to.
 *
 * For each run of a trace that has call sites, a second pass of the same runs walks the
 * policy right after the event at which the run first reached its peak reserved, and at
 * its first OOM (as the segment map does), and attributes every block to the site of the
 * allocation it holds:
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

int as_siterep_create(as_siterep **out);
void as_siterep_destroy(as_siterep *s);

/* The pass for report trace t (path), whose runs are specs x caps, spec-major, as the
 * driver adds them. A trace without sites adds nothing but its note, and is not opened
 * again when the report says so (as_report_trace_sites).
 * Returns 0, a trace error (< 0, err filled) or an engine error (< 0, why filled). */
int as_siterep_trace(as_siterep *s, const as_report *rep, unsigned t, const char *path,
                     const as_reader_opts *ro, const as_policy_spec *specs, size_t nspec,
                     const uint64_t *caps, size_t ncap, as_trace_error *err, char *why,
                     size_t why_len);

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

#define AS_SITE_LABEL 160 /* bytes of a label as_siterep_peak_live writes */

/* For `info`: the sites by requested bytes live at the trace's peak requested (first
 * reached; an allocation counts until its FREE), largest first, at most top (<= 64) of
 * them into labels/bytes and, unless it is NULL, their numbers into ids. *n is how many
 * were written; *nsites the trace's site count. Two decodes of the trace. Returns 0 or < 0
 * (err filled). */
int as_siterep_peak_live(const char *path, const as_reader_opts *ro, unsigned top,
                         char (*labels)[AS_SITE_LABEL], uint64_t *bytes, uint32_t *ids, unsigned *n,
                         uint32_t *nsites, as_trace_error *err);

#endif
