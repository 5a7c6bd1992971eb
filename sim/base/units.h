/*
 * units.h - byte quantities in text: the one parser of sizes with units that every part
 * uses (command line, policy specs, text traces, generators).
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

#endif
