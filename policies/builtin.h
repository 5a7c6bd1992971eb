/*
 * builtin.h - the built-in policies' tables, and the per-event entry points of those whose
 * events the engine runs through a loop copy of their own.
 *
 * Every policy, built in or a plug-in, is its as_policy table (policy.h): that contract
 * is the only one a policy implements and the only one the engine needs. For the policies
 * named here the engine also has a copy of its event loop that calls as_NAME_alloc and
 * as_NAME_free by name instead of through the table, so that the release build, which
 * optimises the engine and these policies' objects together (the Makefile's HOT_LTO),
 * inlines them into that copy (sim/README.md, Session 8: 4-12 % of the instructions of
 * a run). Invariant: as_NAME_alloc and as_NAME_free are the table's alloc and free, the
 * same calls with the same answers (AS_BUILTIN_ENTRIES defines them so), so which loop
 * runs a batch changes nothing but its cost.
 */
#ifndef AS_POLICIES_BUILTIN_H
#define AS_POLICIES_BUILTIN_H

#include "policy.h"

extern const as_policy as_policy_torch;
extern const as_policy as_policy_bestfit;
extern const as_policy as_policy_firstfit;
extern const as_policy as_policy_segfit;
extern const as_policy as_policy_buddy;
extern const as_policy as_policy_bfc;
extern const as_policy as_policy_nocache;
extern const as_policy as_policy_cudamallocasync;
extern const as_policy as_policy_gmlake;
extern const as_policy as_policy_planned;

/* The policies with a loop copy, as X(name): as_NAME_alloc, as_NAME_free and
 * as_policy_NAME exist for each. Every online built-in; planned, which places every
 * allocation before the first event, has none. */
#define AS_BUILTIN_HOT(X)                                                                          \
    X(torch)                                                                                       \
    X(bestfit) X(firstfit) X(segfit) X(buddy) X(bfc) X(nocache) X(cudamallocasync) X(gmlake)

#define AS_BUILTIN_DECLARE(name)                                                                   \
    int as_##name##_alloc(void *st, const as_request *req, as_block *out);                         \
    int as_##name##_free(void *st, uint64_t handle, unsigned flags);
AS_BUILTIN_HOT(AS_BUILTIN_DECLARE)
#undef AS_BUILTIN_DECLARE

/* In the policy's file, after its alloc and free: the entry points, which are those. */
#define AS_BUILTIN_ENTRIES(name, alloc_fn, free_fn)                                                \
    int as_##name##_alloc(void *st, const as_request *req, as_block *out)                          \
    {                                                                                              \
        return alloc_fn(st, req, out);                                                             \
    }                                                                                              \
    int as_##name##_free(void *st, uint64_t handle, unsigned flags)                                \
    {                                                                                              \
        return free_fn(st, handle, flags);                                                         \
    }

#endif
