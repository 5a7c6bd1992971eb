/*
 * meta.c - trace metadata (ordered key=value pairs), format names and error strings.
 *
 * Invariant: keys are unique within an as_meta and keep their first insertion order, so a
 * header written and read back compares equal pair by pair.
 */
#include <stdlib.h>
#include <string.h>

#include "trace_internal.h"

int as_meta_key_ok(const char *key)
{
    if (!key || !*key)
        return 0;
    for (const char *p = key; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

/* Appends a copy of (key, value), room for it made: 0, or AS_ENOMEM. */
static int append(as_meta *m, const char *key, const char *value)
{
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return AS_ENOMEM;
    }
    m->kv[m->n].key = k;
    m->kv[m->n].value = v;
    m->n++;
    return 0;
}

int as_meta_set(as_meta *m, const char *key, const char *value)
{
    if (!m || !as_meta_key_ok(key) || !value)
        return AS_EUSAGE;
    for (size_t i = 0; i < m->n; i++) {
        if (strcmp(m->kv[i].key, key) == 0) {
            char *v = strdup(value);
            if (!v)
                return AS_ENOMEM;
            free(m->kv[i].value);
            m->kv[i].value = v;
            return 0;
        }
    }
    if (as_grow((void **)&m->kv, &m->cap, m->n + 1, sizeof *m->kv, 8) < 0)
        return AS_ENOMEM;
    return append(m, key, value);
}

const char *as_meta_get(const as_meta *m, const char *key)
{
    if (!m || !key)
        return NULL;
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->kv[i].key, key) == 0)
            return m->kv[i].value;
    return NULL;
}

int as_meta_copy(as_meta *dst, const as_meta *src)
{
    if (!dst)
        return AS_EUSAGE;
    if (!src)
        return 0;
    if (dst->n == 0 && src->n) { /* src's keys are unique and valid (the invariant): no search */
        if (as_grow((void **)&dst->kv, &dst->cap, src->n, sizeof *dst->kv, 8) < 0)
            return AS_ENOMEM;
        int rc = 0;
        for (size_t i = 0; i < src->n && !rc; i++)
            rc = append(dst, src->kv[i].key, src->kv[i].value);
        return rc;
    }
    for (size_t i = 0; i < src->n; i++) {
        int rc = as_meta_set(dst, src->kv[i].key, src->kv[i].value);
        if (rc < 0)
            return rc;
    }
    return 0;
}

void as_meta_free(as_meta *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->kv[i].key);
        free(m->kv[i].value);
    }
    free(m->kv);
    m->kv = NULL;
    m->n = m->cap = 0;
}

const char *as_trace_fmt_name(as_trace_fmt f)
{
    switch (f) {
    case AS_FMT_NATIVE:
        return "native";
    case AS_FMT_TEXT:
        return "text";
    case AS_FMT_TORCH_PICKLE:
        return "torch-pickle";
    case AS_FMT_RMM_CSV:
        return "rmm-csv";
    case AS_FMT_UNKNOWN:
        break;
    }
    return "unknown";
}
