/*
 * gen_robson_bfc.h - the BFC adversary of `gen robson` (gen_robson_bfc.c), called by
 * gen_robson.c: a state made at init, one step per refill.
 */
#ifndef AS_TRACES_GEN_ROBSON_BFC_H
#define AS_TRACES_GEN_ROBSON_BFC_H

#include <stdint.h>

#include "gen_impl.h"

typedef struct robson_bfc robson_bfc;

/* m and n in units; unit divides 2 MiB (BFC's first region). 0 or AS_ENOMEM. */
int gen_robson_bfc_create(uint64_t m, uint64_t n, uint64_t unit, robson_bfc **out);
/* Queues the next step's events: 0, or AS_TRACE_EOF when done. */
int gen_robson_bfc_refill(as_gen *g, robson_bfc *a);
void gen_robson_bfc_free(robson_bfc *a);

#endif
