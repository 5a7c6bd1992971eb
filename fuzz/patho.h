/*
 * patho.h - the pathological search's setting, objective and minimiser (fuzz/fuzz_patho.c),
 * shared by the harness, the minimiser tool (fuzz/patho_min_main.c) and tests/test_patho.c.
 *
 * The setting is Robson's: live bytes never above M units, every request 1 to n units of
 * `unit` bytes, replayed over the default simulated device with no capacity. Events outside
 * it are dropped before scoring, so every trace scored or written is inside it.
 */
#ifndef AS_FUZZ_PATHO_H
#define AS_FUZZ_PATHO_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

typedef struct as_patho_setting {
    char policy[256];
    uint64_t m_units, n, unit;
} as_patho_setting;

typedef struct as_patho_result {
    uint64_t peak_reserved, peak_requested;
    size_t ops; /* operations kept inside the setting */
} as_patho_result;

/* The setting a trace's metadata gives (patho.policy, patho.M, patho.n, patho.unit), each
 * missing key from the campaign's environment ($AS_PATHO_POLICY, ...) or the defaults
 * (bestfit, 256, 16, 1 MiB); with the environment's policy set, the environment wins. 0,
 * or -1 when the metadata is bad. */
int as_patho_setting_of(const as_meta *m, as_patho_setting *s);

/* Minimises a trace (any format the reader takes) in setting s (NULL: the trace's own,
 * as_patho_setting_of): the shortest operation list found by delta debugging (ddmin over
 * the operations, down to single ones, until no removal is accepted) whose
 * peak_reserved / peak_requested and peak_reserved / M are both at least the input's. At
 * most max_evals replays (0: no limit). *out (malloc'd, *out_len bytes) is an allocsim
 * text trace carrying the input's metadata and patho.* keys for the result; before and
 * after are the input's and the result's. 0, or -1 on an unreadable input, a bad setting
 * or an input with nothing inside the setting. */
int as_patho_minimise(const uint8_t *data, size_t size, const as_patho_setting *s,
                      uint64_t max_evals, uint8_t **out, size_t *out_len, as_patho_result *before,
                      as_patho_result *after);

#endif
