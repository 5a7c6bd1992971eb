/*
 * info.h - what `allocsim info` reports about a trace, computed in one streaming pass in
 * memory proportional to the live allocations: counts, streams, peak requested (with the
 * engine's FREE_REQ rule), and histograms of request sizes and lifetimes.
 */
#ifndef AS_SIM_INFO_H
#define AS_SIM_INFO_H

#include <stdint.h>

#include "engine.h"
#include "trace.h"

#define AS_INFO_BUCKETS 64 /* bucket k holds values in [2^k, 2^(k+1)) */
#define AS_INFO_STREAMS 32 /* streams listed one by one; more are only counted */

typedef struct as_info_stream {
    uint64_t stream, allocs, bytes;
} as_info_stream;

typedef struct as_trace_info {
    as_trace_summary sum;                 /* as the engine computes it */
    uint64_t size_hist[AS_INFO_BUCKETS];  /* ALLOC requests by size */
    uint64_t size_bytes[AS_INFO_BUCKETS]; /* their bytes */
    uint64_t life_hist[AS_INFO_BUCKETS];  /* events from an ALLOC to its FREE */
    uint64_t pend_hist[AS_INFO_BUCKETS];  /* events from a FREE_REQ to its FREE */
    uint64_t min_size, max_size, total_bytes;
    uint64_t peak_live;            /* most allocations live at once */
    int64_t first_time, last_time; /* AS_TIME_NONE when the trace has no times */
    as_info_stream streams[AS_INFO_STREAMS];
    unsigned nstreams; /* entries used in streams[] */
} as_trace_info;

/* Reads r to its end. Returns 0, or a trace error (< 0) with *err filled. */
int as_trace_info_compute(as_trace_reader *r, as_trace_info *out, as_trace_error *err);

/* The same, feeding every event to sites (siterep.h: the call sites at the peak) unless it
 * is NULL, so that one read of the trace serves both. */
typedef struct as_site_peak as_site_peak;
int as_trace_info_compute_sites(as_trace_reader *r, as_trace_info *out, as_site_peak *sites,
                                as_trace_error *err);

/* The bucket of v >= 1: floor(log2 v). */
unsigned as_info_bucket(uint64_t v);

#endif
