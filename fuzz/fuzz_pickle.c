/*
 * fuzz_pickle.c - decoder harness for PyTorch snapshot pickles (traces/pickle.c,
 * traces/torch_snapshot.c): opcodes, memo, protocol framing and the snapshot schema, strict
 * and lenient.
 *
 * Oracles (fuzz_common.c): refusals are documented error codes naming the input; the
 * events read before any refusal round-trip losslessly through the native and text
 * writers. The reader detects formats by content, so a mutant may be read as another
 * format: that is fine, the same oracles apply.
 */
#include "fuzz/fuzz.h"

int as_fuzz_pickle(const uint8_t *data, size_t size)
{
    as_fuzz_decode(data, size, "fuzz-pickle", AS_FUZZ_RT | AS_FUZZ_LENIENT);
    return 0;
}
