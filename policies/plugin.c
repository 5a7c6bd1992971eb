/*
 * plugin.c - loads a policy built against the installed headers from a shared object
 * (plugin.h; the ABI is in policies/README.md, "Bring your own policy").
 *
 * Order of the checks: the object loads (dlopen, every symbol bound now); it exports
 * as_policy_plugin_abi and it equals AS_POLICY_ABI (read before any other symbol, since a
 * table of another version has another layout); it exports as_policy_plugin, which
 * returns a table whose own abi agrees and whose fields the engine and the parser rely on
 * are well formed. A refused object is closed again; an accepted one never is.
 *
 * Compiled with AS_NO_DLOPEN (the static allocsim, Makefile) it loads nothing: a plug-in
 * there would run on a second copy of the C library, so that program hands a command that
 * names one to allocsim-dynamic before parsing it (sim/cli/main.c), and this refusal is
 * met only by a caller that did not.
 */
#include "plugin.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#ifndef AS_NO_DLOPEN
#include <dlfcn.h>
#endif

static int refuse(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(char *why, size_t len, const char *fmt, ...)
{
    if (why && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return AS_EINVAL;
}

#ifdef AS_NO_DLOPEN
int as_plugin_load(const char *path, const as_policy **out, char *why, size_t why_len)
{
    *out = NULL;
    return refuse(why, why_len,
                  "plugin %s: this allocsim is linked statically and loads no shared objects "
                  "(allocsim-dynamic does)",
                  path ? path : "");
}
#else
/* The knob table: names present and distinct, defaults inside their ranges, enum words. */
static int knobs_ok(const as_policy *p, char *bad, size_t len)
{
    if (p->n_knobs > 256 || (p->n_knobs && !p->knobs))
        return snprintf(bad, len, "%zu knobs without a table", p->n_knobs), 0;
    for (size_t k = 0; k < p->n_knobs; k++) {
        const as_knob *kn = &p->knobs[k];
        if (!kn->name || !kn->name[0] || strlen(kn->name) > 63)
            return snprintf(bad, len, "knob %zu has no name (or one over 63 bytes)", k), 0;
        if ((unsigned)kn->type > AS_KNOB_DIVS)
            return snprintf(bad, len, "knob '%s' has an unknown type", kn->name), 0;
        if (kn->type == AS_KNOB_ENUM && (!kn->choices || !kn->choices[0]))
            return snprintf(bad, len, "enum knob '%s' has no choices", kn->name), 0;
        int in = kn->type == AS_KNOB_FLOAT ? kn->fmin <= kn->fdef && kn->fdef <= kn->fmax
                                           : kn->min <= kn->def && kn->def <= kn->max;
        if (!in)
            return snprintf(bad, len, "knob '%s': its default is outside its range", kn->name), 0;
        for (size_t q = 0; q < k; q++)
            if (strcmp(p->knobs[q].name, kn->name) == 0)
                return snprintf(bad, len, "knob '%s' is listed twice", kn->name), 0;
    }
    return 1;
}

static int table_ok(const as_policy *p, char *bad, size_t len)
{
    if (!p->name || !p->name[0] || strlen(p->name) > 63 || strpbrk(p->name, ",=: \t"))
        return snprintf(bad, len, "no name, or one that a spec cannot hold"), 0;
    if (!p->summary)
        return snprintf(bad, len, "no summary"), 0;
    if (!p->init || !p->alloc || !p->free || !p->stats)
        return snprintf(bad, len, "init, alloc, free and stats must not be NULL"), 0;
    if (p->state_size > (1u << 30))
        return snprintf(bad, len, "a state of %zu bytes (1 GiB at most)", p->state_size), 0;
    return knobs_ok(p, bad, len);
}

int as_plugin_load(const char *path, const as_policy **out, char *why, size_t why_len)
{
    *out = NULL;
    if (!path || !strchr(path, '/'))
        return refuse(why, why_len, "plugin:%s: give the shared object's path (./libmine.so)",
                      path ? path : "");
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        return refuse(why, why_len, "plugin %s: cannot load it as a shared object: %s", path,
                      e ? e : "unknown error");
    }
    const int *abi = dlsym(h, AS_POLICY_PLUGIN_ABI_SYMBOL);
    const as_policy *(*entry)(void) = NULL;
    const as_policy *p = NULL;
    char bad[160];
    int rc;
    if (!abi) {
        rc = refuse(why, why_len,
                    "plugin %s: no symbol %s: not an allocsim policy (export its table with "
                    "AS_POLICY_EXPORT from policy.h)",
                    path, AS_POLICY_PLUGIN_ABI_SYMBOL);
    } else if (*abi != AS_POLICY_ABI) {
        rc = refuse(why, why_len,
                    "plugin %s was built against policy ABI %d, this allocsim has ABI %d: "
                    "rebuild it against its headers (pkg-config --cflags allocsim-policy)",
                    path, *abi, AS_POLICY_ABI);
    } else if (!(*(void **)&entry = dlsym(h, AS_POLICY_PLUGIN_SYMBOL))) {
        rc = refuse(why, why_len, "plugin %s: no symbol %s (AS_POLICY_EXPORT defines it)", path,
                    AS_POLICY_PLUGIN_SYMBOL);
    } else if (!(p = entry())) {
        rc = refuse(why, why_len, "plugin %s: %s() returned no table", path,
                    AS_POLICY_PLUGIN_SYMBOL);
    } else if (p->abi != AS_POLICY_ABI) {
        rc = refuse(why, why_len, "plugin %s: its table says ABI %d, this allocsim has ABI %d",
                    path, p->abi, AS_POLICY_ABI);
    } else if (!table_ok(p, bad, sizeof bad)) {
        rc = refuse(why, why_len, "plugin %s: policy table refused: %s", path, bad);
    } else {
        *out = p;
        return 0;
    }
    dlclose(h);
    return rc;
}
#endif
