/*
 * plugin.h - policies from shared objects (`-p plugin:PATH[,knob=value...]`): the loader
 * the spec parser calls. Not installed: a plug-in sees only policy.h and device.h.
 */
#ifndef AS_POLICIES_PLUGIN_H
#define AS_POLICIES_PLUGIN_H

#include <stddef.h>

#include "policy.h"

/* Loads the policy table that the shared object at path (it must hold a '/') exports with
 * AS_POLICY_EXPORT, checking its ABI version before anything else and then the table
 * itself. The object stays loaded for the life of the process (the table must outlive
 * every spec made from it); loading the same path again gives the same table. Returns 0, or
 * AS_EINVAL with a one-line reason in why that names the file. */
int as_plugin_load(const char *path, const as_policy **out, char *why, size_t why_len);

#endif
