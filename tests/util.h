/*
 * util.h - helpers shared by the CUnit suites: paths into the source tree, temporary
 * files, a seeded PRNG that prints its seed, and running the allocsim binary.
 */
#ifndef AS_TESTS_UTIL_H
#define AS_TESTS_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Absolute path of a file in the source tree ("tests/data/x.txt"): everything the suite
 * reads is in the repository, and a missing one is named on stderr. Returns a static
 * buffer per call slot (4 rotating). */
const char *tu_path(const char *rel);
/* The runner's private temporary directory (made on first call under $TMPDIR, which then
 * names it for child processes; removed with everything in it at exit). */
const char *tu_tmpdir(void);
/* A fresh temporary file name in tu_tmpdir() (the file is created empty). Static buffer
 * per call slot (4 rotating, shared with tu_path); tu_rm removes it early (and removes
 * nothing outside tu_tmpdir()), exit removes what is left. */
const char *tu_tmp(const char *suffix);
void tu_rm(const char *path);
/* Writes text to a new temporary file and returns its name. */
const char *tu_write_tmp(const char *suffix, const char *text);

/* The whole file at path, NUL-terminated, malloc'd (the caller frees it), its size in *len
 * when len is not NULL; NULL when it cannot be opened or read, or out of memory. */
char *tu_slurp(const char *path, size_t *len);
/* tu_slurp of a zstd file, decompressed whole; NULL also when it is not valid zstd. */
char *tu_slurp_zst(const char *path, size_t *len);
/* The size of the file at path, or -1 when it cannot be stat'ed. */
long tu_file_size(const char *path);

/* Drops the host-timing fields of a CSV report (the last three of report schema 3, wall_s,
 * cpu_s and events_per_second: they measure the host, the rest must be reproducible) from
 * every line, in place. Returns 0, or -1 (csv untouched) when its header does not end in
 * them. */
int tu_drop_timing(char *csv);

/* Seed for randomised tests: $AS_SEED if set, else time-based. Printed once per test. */
uint64_t tu_seed(const char *test_name);
uint64_t tu_rand(uint64_t *state); /* splitmix64 */

/* Runs a shell command line through /bin/sh with stdin from /dev/null, capturing stdout
 * and stderr (each truncated to cap-1 bytes, NUL-terminated; either may be NULL, and is
 * then discarded). Returns the exit status, or -1. Takes none of the rotating buffers of
 * tu_path and tu_tmp. */
int tu_run_sh(const char *cmdline, char *out, size_t out_cap, char *err, size_t err_cap);
/* tu_run_sh of a printf-formatted command line; -1 when it formats to more than 8 KiB. */
int tu_run_shf(char *out, size_t out_cap, char *err, size_t err_cap, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The allocsim the tests run: $AS_ALLOCSIM (make test sets it), else build/allocsim. */
const char *tu_allocsim(void);
/* Runs `tu_allocsim() args` as tu_run_sh does. */
int tu_run_allocsim(const char *args, char *out, size_t out_cap, char *err, size_t err_cap);
/* tu_run_allocsim with printf-formatted arguments; -1 when they format to more than 8 KiB. */
int tu_run_allocsimf(char *out, size_t out_cap, char *err, size_t err_cap, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* 1 in a build under AddressSanitizer (gcc or clang), whose memory and CPU figures are not
 * the program's own: tests of peak RSS and CPU skip those asserts there. */
#if defined(__SANITIZE_ADDRESS__)
#define AS_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AS_UNDER_ASAN 1
#endif
#endif
#ifndef AS_UNDER_ASAN
#define AS_UNDER_ASAN 0
#endif

#endif
