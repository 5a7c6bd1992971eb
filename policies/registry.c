/*
 * registry.c - every policy, looked up by its CLI name. Order is the order of
 * `allocsim policies` and of the conformance suite.
 */
#include <string.h>

#include "policy.h"

/* Each policy file defines one of these tables. */

static const as_policy *const policies[] = {
    NULL, /* placeholder so the array is never empty; skipped below */
};

const as_policy *const *as_policy_list(size_t *n)
{
    *n = sizeof policies / sizeof policies[0] - 1;
    return policies + 1;
}

const as_policy *as_policy_find(const char *name)
{
    size_t n;
    const as_policy *const *l = as_policy_list(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(l[i]->name, name) == 0)
            return l[i];
    return NULL;
}
