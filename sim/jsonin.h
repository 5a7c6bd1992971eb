/*
 * jsonin.h - the one JSON reader: allocsim's JSON reports (`allocsim compare`), the H200
 * answer keys and the replay records (tests), all through libjansson.
 *
 * Invariant: integers are read as json_int_t (64 bits), never through a double, so byte
 * counts above 2^53 stay exact; a literal outside the 64-bit signed range is refused as
 * bad input, not rounded. Duplicate keys are refused. Nothing here prints or exits.
 */
#ifndef AS_SIM_JSONIN_H
#define AS_SIM_JSONIN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Parses the file at path into *out (the caller json_decref()s it). Returns 0, or -1 with
 * "PATH: line L, column C: WHY" in err (or "PATH: cannot open: REASON"). */
int as_json_load(const char *path, json_t **out, char *err, size_t err_len);

/* Member key of obj as a non-negative integer: 1 with *out set, 0 when obj is not an object,
 * or the member is absent or null, -1 when it is anything else (a fraction, a negative
 * number, a string). */
int as_json_u64(const json_t *obj, const char *key, uint64_t *out);

/* Element i of array arr as a non-negative integer: 1 with *out set, -1 when absent or
 * not one. */
int as_json_u64_at(const json_t *arr, size_t i, uint64_t *out);

#endif
