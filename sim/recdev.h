/*
 * recdev.h - a simulated device that answers with a recorded run's addresses, so that a
 * policy's placement is compared with the real allocator's on the real driver's answers
 * (`allocsim check`, and tests/test_torch_fidelity.c on the H200's key replays).
 *
 * cudaMalloc gets the next recorded segment_alloc's address (after the start pool's own,
 * given in the order the caller's preamble asks for them); cuMemAddressReserve the next
 * recorded segment_map outside the ranges held (PyTorch maps a new expandable segment from
 * its start). Past the recording, addresses come from above everything recorded: the
 * comparison then sees the extra events. The device never refuses: a capacity is only
 * reported (torch enforces its memory fraction itself). Every reserve, release, map and
 * unmap is logged with the ALLOC being served while logging is on.
 */
#ifndef AS_SIM_RECDEV_H
#define AS_SIM_RECDEV_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "trace.h"

/* A logged device event; action is an as_dev_action. */
typedef struct as_recdev_ev {
    uint64_t alloc, addr, size;
    int action;
} as_recdev_ev;

typedef struct as_recdev_opts {
    const as_snap_segev *want; /* the recorded device events, in order (kept, not copied) */
    size_t n;
    const uint64_t *start_addr; /* the start pool's cudaMalloc addresses (kept), or NULL */
    size_t nstart;
    const uint64_t *start_va; /* the start pool's expandable segments' bases (kept) */
    size_t nstart_va;
    uint64_t capacity; /* what capacity() answers (AS_CAPACITY_NONE: none) */
    uint64_t above;    /* extra addresses start at the next GiB 1 GiB above this and every
                          recorded range */
} as_recdev_opts;

typedef struct as_recdev as_recdev;

/* Returns 0 or AS_ENOMEM. */
int as_recdev_create(const as_recdev_opts *o, as_recdev **out);
void as_recdev_destroy(as_recdev *d);
/* The device to give the policy's init (valid while d lives). */
as_device as_recdev_device(as_recdev *d);
/* Logging on (from the reserved level now: the peak starts there) or off. */
void as_recdev_log(as_recdev *d, int on);
/* The ordinal of the ALLOC being served, for the events that follow. */
void as_recdev_at(as_recdev *d, uint64_t alloc);
/* Back to nothing reserved, the start pool's addresses spent (a preamble given up). */
void as_recdev_restart(as_recdev *d);
/* The events logged so far (*n of them; owned by d). A host allocation failure while
 * logging leaves fewer events than happened, which the comparison reports. */
const as_recdev_ev *as_recdev_events(const as_recdev *d, size_t *n);
/* The most reserved while logging was on (the level logging began at included). */
uint64_t as_recdev_peak(const as_recdev *d);

#endif
