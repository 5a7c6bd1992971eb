/*
 * engine_fixture.h - a tiny in-test trace source and two tiny in-test policies, shared by
 * test_engine.c (which defines them) and test_metrics.c. They exist so that the engine's
 * metrics can be checked against hand arithmetic, independently of the real policies.
 *
 * Policy "tnc" (test no-cache): every request is rounded up to 512 bytes (the block) and
 * gets its own device segment of the block rounded up to 2 MiB; FREE releases it, a
 * FREE_REQ keeps it reserved until the FREE. With knob cache=1 ("tcache"), a completed
 * free keeps the segment in a cache that a later request of the same segment size
 * reuses, empty_cache() releases the cache, and an allocation the device refuses first
 * releases the cache and retries (as PyTorch does). Knob fail_size makes alloc() of that
 * exact size return AS_EINVAL (a policy bug), knob lie makes stats() report one
 * byte too many allocated once there are three blocks (a broken invariant).
 */
#ifndef AS_TESTS_ENGINE_FIXTURE_H
#define AS_TESTS_ENGINE_FIXTURE_H

#include "engine.h"
#include "policy.h"
#include "trace.h"

extern const as_policy tf_policy;

/* A spec for tf_policy; fields are owned by the fixture and freed with tf_spec_free. */
void tf_spec(as_policy_spec *s, int cache, int64_t fail_size, int lie);
void tf_spec_free(as_policy_spec *s);

/* A reader over a copy of evs (MARK labels are "m"); after `fail_after` events (if
 * not UINT64_MAX) the source fails with AS_ECORRUPT. */
as_trace_reader *tf_reader(const as_event *evs, size_t n, uint64_t fail_after);

/* Shorthands for building event arrays. */
as_event tf_alloc(uint64_t id, uint64_t size);
as_event tf_free(uint64_t id);
as_event tf_free_req(uint64_t id);
as_event tf_op(as_op op);

/* Runs evs through one engine with the given runs; returns as_engine_run's code. The
 * engine is returned in *out (destroy it). */
int tf_run(const as_event *evs, size_t n, const as_engine_opts *o, const as_policy_spec *specs,
           const uint64_t *caps, unsigned nruns, as_engine **out);

#define TF_MIB (1ull << 20)

#endif
