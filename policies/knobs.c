/*
 * knobs.c - size rounding shared by all policies (PyTorch's round_size rule).
 * Invariant: the result is >= size and a multiple of `round` (the power-of-two step is
 * itself a multiple of `round` whenever it is used, because size > round * d).
 */
#include "knobs.h"

unsigned as_div_interval(uint64_t size)
{
    if (size < (2ull << 20))
        return 0;
    unsigned lg = 63u - (unsigned)__builtin_clzll(size);
    unsigned k = lg - 20u;
    return k >= AS_DIV_INTERVALS ? AS_DIV_INTERVALS - 1 : k;
}

static uint64_t next_division(uint64_t size, uint64_t divs)
{
    if ((size & (size - 1)) == 0)
        return size;
    unsigned lg = 63u - (unsigned)__builtin_clzll(size);
    uint64_t floor2 = 1ull << lg;
    unsigned dl = 63u - (unsigned)__builtin_clzll(divs);
    uint64_t step = floor2 >> dl;
    if (step == 0)
        return floor2 << 1;
    return (size + step - 1) & ~(step - 1); /* step is a power of two */
}

uint64_t as_round_size(uint64_t size, uint64_t round, const uint32_t *div)
{
    if (size < round)
        return round;
    uint64_t d = div ? div[as_div_interval(size)] : 0;
    if (d > 1 && size > round * d)
        return next_division(size, d);
    if ((round & (round - 1)) == 0) /* every policy's round is: no 64-bit division per call */
        return (size + round - 1) & ~(round - 1);
    return (size + round - 1) / round * round;
}
