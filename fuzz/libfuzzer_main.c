/*
 * libfuzzer_main.c - libFuzzer entry points for one target, chosen at compile time with
 * -DAS_FUZZ_TARGET=NAME (mk/fuzz.mk builds this file once per target). Targets with a
 * structure-aware mutator also get LLVMFuzzerCustomMutator (-DAS_FUZZ_MUTATOR).
 */
#include "fuzz/fuzz.h"

#ifndef AS_FUZZ_TARGET
#error "build with -DAS_FUZZ_TARGET=NAME"
#endif

#define AS_CAT2(a, b) a##b
#define AS_CAT(a, b) AS_CAT2(a, b)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    AS_CAT(as_fuzz_, AS_FUZZ_TARGET)(data, size);
    return 0;
}

#ifdef AS_FUZZ_MUTATOR
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    return AS_CAT(AS_CAT(as_fuzz_, AS_FUZZ_TARGET), _mutate)(data, size, max_size, seed);
}
#endif
