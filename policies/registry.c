/*
 * registry.c - every policy, looked up by its CLI name. Order is the order of
 * `allocsim policies` and of the conformance suite. Each policy file defines one table.
 */
#include <string.h>

#include "builtin.h"
#include "policy.h"

static const as_policy *const policies[] = {
    &as_policy_torch, /* first: it is the default policy */
    &as_policy_bestfit,
    &as_policy_firstfit,
    &as_policy_segfit,
    &as_policy_buddy,
    &as_policy_bfc,
    &as_policy_nocache,
    &as_policy_cudamallocasync, /* a calibrated model, not the driver's code */
    &as_policy_gmlake,
    &as_policy_planned, /* offline: the yardstick */
};

const as_policy *const *as_policy_list(size_t *n)
{
    *n = sizeof policies / sizeof policies[0];
    return policies;
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
