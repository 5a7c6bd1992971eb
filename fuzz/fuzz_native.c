/*
 * fuzz_native.c - decoder harness for the native binary format (traces/native.c), fed
 * decompressed: the reader detects the magic with or without the zstd wrapper, so mutations
 * reach the block decoder directly; the zstd-wrapped copy must decode identically.
 *
 * Oracles (fuzz_common.c): refusals are documented error codes naming the input; the
 * events read before any refusal round-trip losslessly through the native and text
 * writers. The reader detects formats by content, so a mutant may be read as another
 * format: that is fine, the same oracles apply.
 */
#include "fuzz/fuzz.h"

int as_fuzz_native(const uint8_t *data, size_t size)
{
    as_fuzz_decode(data, size, "fuzz-native", AS_FUZZ_RT | AS_FUZZ_ZSTD);
    return 0;
}
