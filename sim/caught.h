/*
 * caught.h - OOMs the program survives: the cuDNN workspace requests whose OutOfMemoryError
 * PyTorch catches, recognised by their call site, and a run's memory of the fallbacks.
 *
 * PyTorch 2.11's convolutions (aten/src/ATen/native/cudnn/Conv_v8.cpp) ask the caching
 * allocator for the chosen engine's workspace in run_conv_plan (run_conv_plan_fused for the
 * fused conv-bias-add-relu); run_single_conv tries the engine cached for the convolution,
 * then the heuristics' engines in order, catching each OutOfMemoryError, and caches the one
 * that runs. A snapshot recorded with C++ frames (context="all", stacks="all") names that
 * function as the innermost frame outside the allocator and the stack recorder. Without
 * C++ frames nothing is recognised, and every OOM stops a run as before.
 *
 * The model, chosen on tests/data/torch-2.11-h200-caught/fit (that folder's README says
 * what the recordings show): an OOM at a workspace request is caught (a result, counted);
 * the engine that then runs needs no workspace (nothing is allocated: the recorded
 * fallbacks asked 0 B or 16 KiB where the first engine asked 50 MB); and the fallback
 * stays cached, so a later workspace request of the same site and size (the same
 * convolution asking the same engine's workspace) gets the fallback at once, without an
 * OOM and without an allocation.
 *
 * Invariant: a run's fallback set only grows, and only workspace requests consult it.
 */
#ifndef AS_SIM_CAUGHT_H
#define AS_SIM_CAUGHT_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

/* 1 when the innermost frame of site outside the caching allocator and the stack recorder
 * is a workspace request's function (run_conv_plan, run_conv_plan_fused), else 0 (site 0,
 * frameless or Python-only stacks included). */
int as_caught_is_workspace(const as_sites *s, uint32_t site);

/* Per trace: which of its sites are workspace requests. */
typedef struct as_caught as_caught;

/* Recognises the workspace sites of s. *out is NULL when s has none (nothing to model).
 * Returns 0 or AS_ENOMEM. */
int as_caught_create(const as_sites *s, as_caught **out);
void as_caught_destroy(as_caught *c);
int as_caught_site(const as_caught *c, uint32_t site); /* 1 for a workspace site */
uint32_t as_caught_nsites(const as_caught *c);         /* workspace sites (0 for NULL) */

/* A run's fallbacks: the (site, size) of each workspace request whose OOM was caught.
 * Zero-initialised is empty. */
typedef struct as_caught_key {
    uint64_t size; /* 0 = an empty slot (requests are never 0 bytes) */
    uint32_t site;
} as_caught_key;
typedef struct as_caught_run {
    as_caught_key *slot; /* open addressing */
    size_t n, cap;       /* keys held; slots, a power of 2 or 0 */
} as_caught_run;

/* 1 when an OOM at the same site and size was caught before: its fallback is cached. */
int as_caught_fallen(const as_caught_run *r, uint32_t site, uint64_t size);
/* Remembers a caught OOM at (site, size). Returns 0 or AS_ENOMEM. */
int as_caught_add(as_caught_run *r, uint32_t site, uint64_t size);
void as_caught_run_free(as_caught_run *r);

#endif
