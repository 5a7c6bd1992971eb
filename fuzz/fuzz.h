/*
 * fuzz.h - the allocsim fuzz harnesses: one entry point per target, the oracle macro, and
 * the table that the corpus replayer (tests, fuzz-driver) walks.
 *
 * A harness is `int as_fuzz_NAME(const uint8_t *data, size_t size)` in fuzz/fuzz_NAME.c.
 * It never aborts on a refusal: a decoder or spec error is a fine outcome. It aborts
 * (FUZZ_ASSERT) only when an oracle breaks: a wrong error code, a round trip that changes
 * the events, a policy invariant, a result that differs between two identical runs.
 * libFuzzer entry points live in fuzz/libfuzzer_main.c, built once per target with
 * -DAS_FUZZ_TARGET=NAME; nothing here depends on libFuzzer, so the CUnit suite links the
 * harnesses and replays the committed corpora (fuzz/corpus/NAME/).
 */
#ifndef AS_FUZZ_FUZZ_H
#define AS_FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Always on, unlike assert(): an oracle failure prints where and why, then aborts, which
 * libFuzzer reports as a crash and saves the input. */
#define FUZZ_ASSERT_MSG(cond, ...)                                                          \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "%s:%d: oracle failed: %s: ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fputc('\n', stderr);                                                            \
            abort();                                                                        \
        }                                                                                   \
    } while (0)
#define FUZZ_ASSERT(cond) FUZZ_ASSERT_MSG(cond, "%s", "")

typedef int (*as_fuzz_fn)(const uint8_t *data, size_t size);
/* Structure-aware mutator (libFuzzer's LLVMFuzzerCustomMutator contract): rewrites
 * data[0..size) in place into at most max_size bytes and returns the new size. */
typedef size_t (*as_fuzz_mutator)(uint8_t *data, size_t size, size_t max_size,
                                  unsigned int seed);

int as_fuzz_native(const uint8_t *data, size_t size);
int as_fuzz_text(const uint8_t *data, size_t size);
int as_fuzz_pickle(const uint8_t *data, size_t size);
int as_fuzz_rmm(const uint8_t *data, size_t size);
int as_fuzz_policy(const uint8_t *data, size_t size);
int as_fuzz_patho(const uint8_t *data, size_t size);
int as_fuzz_cli(const uint8_t *data, size_t size);

size_t as_fuzz_policy_mutate(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t as_fuzz_patho_mutate(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

typedef struct as_fuzz_target {
    const char *name;
    as_fuzz_fn fn;
    as_fuzz_mutator mutate; /* NULL: libFuzzer's own mutations only */
} as_fuzz_target;

/* Every harness, NULL-terminated; and one by name (NULL when unknown). */
extern const as_fuzz_target as_fuzz_targets[];
const as_fuzz_target *as_fuzz_find(const char *name);

/* Runs every regular file of dir (or the file itself) through fn, in name order; a
 * crash aborts. Returns the number of inputs run, or -1 when dir cannot be read. */
long as_fuzz_replay_path(const char *path, as_fuzz_fn fn);
/* Reads a whole file into a malloc'd buffer; 0 or -1. */
int as_fuzz_read_file(const char *path, uint8_t **data, size_t *size);

/* ---- shared by the decoder harnesses (fuzz_common.c) ---------------------------------- */

enum {
    AS_FUZZ_RT = 1,      /* round trip through the text writer (and native, 1 input in 32) */
    AS_FUZZ_ZSTD = 2,    /* also decode a zstd-wrapped copy and compare the outcomes */
    AS_FUZZ_LENIENT = 4, /* also decode in lenient mode */
};
/* Decodes data through the real reader (as_trace_open_mem) with the oracles in flags. */
void as_fuzz_decode(const uint8_t *data, size_t size, const char *name, unsigned flags);

#endif
