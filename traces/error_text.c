/*
 * error_text.c - a trace error in words (trace.h, as_trace_error_text): the file, then the
 * byte, line and event that are known, then the message. Every command and program that
 * reports a bad trace words it through here, so the form is the same everywhere.
 */
#include <stdio.h>

#include "error.h"
#include "trace.h"

void as_trace_error_text(const as_trace_error *e, const char *fallback_path, char *buf, size_t n)
{
    const char *path = e->path[0] ? e->path : fallback_path ? fallback_path : "-";
    char where[160] = "";
    size_t k = 0;
    if (e->offset != UINT64_MAX)
        k += (size_t)snprintf(where + k, sizeof where - k, "byte %llu",
                              (unsigned long long)e->offset);
    if (e->line && k < sizeof where)
        k += (size_t)snprintf(where + k, sizeof where - k, "%sline %llu", k ? ", " : "",
                              (unsigned long long)e->line);
    if (e->event != UINT64_MAX && k < sizeof where)
        k += (size_t)snprintf(where + k, sizeof where - k, "%sevent %llu", k ? ", " : "",
                              (unsigned long long)e->event);
    const char *msg = e->msg[0] ? e->msg : as_strerror(e->code);
    if (where[0])
        snprintf(buf, n, "%s: %s: %s", path, where, msg);
    else
        snprintf(buf, n, "%s: %s", path, msg);
}
