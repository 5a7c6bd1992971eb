/*
 * lifetimes.c - the lifetimes of a decoded trace's allocations (lifetimes.h). Ids are ALLOC
 * ordinals, so the table is indexed by id and grows as the ALLOCs come.
 */
#include "lifetimes.h"

#include <stdlib.h>

#include "grow.h"

int as_lifetimes_of(const as_event *evs, size_t n, as_lifetime **out, size_t *nout)
{
    as_lifetime *lt = NULL;
    size_t m = 0, cap = 0;
    *out = NULL;
    *nout = 0;
    for (size_t i = 0; i < n; i++) {
        const as_event *e = &evs[i];
        if (e->op == AS_OP_ALLOC) {
            if (as_grow((void **)&lt, &cap, m + 1, sizeof *lt, 1024)) {
                free(lt);
                return AS_ENOMEM;
            }
            lt[m++] = (as_lifetime){
                .size = e->size, .stream = e->stream, .start = i, .end = AS_LIFETIME_OPEN};
        } else if (e->op == AS_OP_FREE && e->id < m && lt[e->id].end == AS_LIFETIME_OPEN) {
            lt[e->id].end = i;
        }
    }
    *out = lt;
    *nout = m;
    return 0;
}
