/*
 * lifetimes.h - every ALLOC of a decoded trace with its lifetime, as offline policies are
 * given it (as_policy.plan): lt[k] is allocation k, occupied from its ALLOC's position to
 * its FREE's ([start, end); a FREE_REQ does not end it; AS_LIFETIME_OPEN when never freed).
 */
#ifndef AS_SIM_LIFETIMES_H
#define AS_SIM_LIFETIMES_H

#include <stddef.h>

#include "policy.h"
#include "trace.h"

/* *out (malloc'd, the caller frees it) gets one entry per ALLOC of evs[0..n), *nout their
 * count. An event naming an id that is no earlier ALLOC is ignored (the readers refuse such
 * traces). Returns 0 or AS_ENOMEM. */
int as_lifetimes_of(const as_event *evs, size_t n, as_lifetime **out, size_t *nout);

#endif
