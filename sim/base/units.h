/*
 * units.h - byte quantities in text: the one parser of sizes with units that every part
 * uses (command line, policy specs, text traces, generators), capacities ("none" is an
 * unlimited device), and the one human form of sizes and capacities in tables.
 *
 * Part of sim/base/: uses nothing else in the project.
 */
#ifndef AS_BASE_UNITS_H
#define AS_BASE_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Parses n bytes of s (no more: the rest of a line is not looked at) as a byte quantity:
 * digits, an optional fraction or exponent, an optional unit. K/M/G/T, Ki/Mi/Gi/Ti and
 * KiB/MiB/GiB/TiB are powers of 1024; KB/MB/GB/TB powers of 1000; B or nothing is bytes;
 * letters in any case. A fraction is rounded down to whole bytes (0.3K = 307). No sign,
 * no space. Returns 0, or -1 for bad text or a value past 2^64 - 1. */
int as_parse_size(const char *s, size_t n, uint64_t *out);

#define AS_CAPACITY_NONE UINT64_MAX /* no capacity: an unlimited device */

/* A whole string of bytes with an optional unit, as as_parse_size: K/M/G/T and
 * KiB/MiB/GiB/TiB are binary (80G = 80 GiB), KB/MB/GB/TB decimal (80GB = 80e9, as GPU
 * vendors count); a real with an exponent ("141e9", "1.5GiB") is rounded down to whole
 * bytes. Returns 0 or -1 (bad text, overflow, zero). */
int as_parse_bytes(const char *s, uint64_t *out);
/* As as_parse_bytes, plus "none"/"unlimited" -> AS_CAPACITY_NONE. Returns 0, AS_EINVAL
 * (not bytes), or AS_ELIMIT for 2^64-1 bytes: the value that means no limit is past the
 * largest capacity, refused rather than read silently as "none". */
int as_parse_capacity(const char *s, uint64_t *out);
/* What is wrong with option opt's text that as_parse_capacity refused with rc, in words for
 * a usage error ("-c 80X: not a capacity (bytes with an optional unit: ...)"), into why. */
void as_capacity_why(int rc, const char *opt, const char *text, char *why, size_t n);
/* The warning for option opt's text read as `bytes` when text is a bare number under 1 MiB,
 * probably a missing unit ("-c 80: read as 80 bytes; did you mean 80G?"): 1 with note
 * filled, else 0. */
int as_bare_number_note(const char *opt, const char *text, uint64_t bytes, char *note, size_t n);
/* A whole string of decimal digits as an unsigned count: 0, or -1 (empty, a sign, another
 * character, past 2^64 - 1). */
int as_parse_count(const char *s, uint64_t *out);

/* The decimal digits of v at p (at most 20, no terminator), and how many. */
size_t as_fmt_u64(char *p, uint64_t v);
/* snprintf(buf, n, "%.<prec>f%s", v, suffix), byte for byte (prec <= 3), without printf's
 * cost where it can (v in [0, 2^53)): the table's numbers. */
void as_fmt_fixed(char *buf, size_t n, double v, unsigned prec, const char *suffix);
/* "512 B", "1.5 KiB", "20.0 MiB", "79.65 GiB" (binary units, rounded). */
void as_fmt_bytes(char *buf, size_t n, uint64_t bytes);
/* A capacity: "none"; exact when a whole number of GiB or MiB ("80 GiB", "8600 MiB"; KiB
 * or B under 1 MiB); else rounded as as_fmt_bytes with a "~" ("~74.51 GiB" for 80GB). */
void as_fmt_capacity(char *buf, size_t n, uint64_t cap);

#endif
