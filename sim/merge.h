/*
 * merge.h - `allocsim merge`: the JSON Lines of shards (run, mincap and tune with --shard
 * I/N -f jsonl) put back together into the unsharded command's lines.
 *
 * Every line is one unit of work: {"command": C, "unit": k, "of": N, ...}, k the unit's
 * 0-based position in the command's order (a trace of run and tune, a policy of mincap),
 * N how many the command had. The merge keeps every line as written and orders them by
 * unit; it refuses lines of different commands or counts, a unit seen twice, and a set
 * that misses a unit, so a merged report is whole or not written at all.
 *
 * Invariant: nothing here prints; memory is the lines' own bytes and one slot per line.
 */
#ifndef AS_SIM_MERGE_H
#define AS_SIM_MERGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct as_merge_line {
    uint64_t unit;
    char *text; /* the line as written, without its newline (owned) */
} as_merge_line;

typedef struct as_merge {
    as_merge_line *lines; /* ordered by unit: lines[k].unit == k */
    size_t n;
    char *command; /* owned */
} as_merge;

/* Reads and checks every line of paths[0..n). Returns 0, or AS_EFORMAT / AS_EIO /
 * AS_ENOMEM with "FILE: line L: WHY" (or what is missing) in why. */
int as_merge_files(const char *const *paths, size_t n, as_merge *out, char *why, size_t why_len);
void as_merge_free(as_merge *m);

#endif
