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

/* A pair in one allocation, "key\0value\0": kv.key owns it and kv.value points into it, so
 * a key's length is value - key - 1 (the search in as_meta_set compares lengths first) and
 * a pair costs one malloc and one free (a snapshot's 35 pairs are made, copied into the
 * report and freed once each in a short run). */
static char *pair_new(const char *key, size_t kl, const char *value)
{
    size_t vl = strlen(value);
    char *b = malloc(kl + vl + 2);
    if (b) {
        memcpy(b, key, kl + 1);
        memcpy(b + kl + 1, value, vl + 1);
    }
    return b;
}

/* Appends a copy of (key, value), room for it made: 0, or AS_ENOMEM. */
static int append(as_meta *m, const char *key, size_t kl, const char *value)
{
    char *b = pair_new(key, kl, value);
    if (!b)
        return AS_ENOMEM;
    m->kv[m->n].key = b;
    m->kv[m->n].value = b + kl + 1;
    m->n++;
    return 0;
}

int as_meta_set(as_meta *m, const char *key, const char *value)
{
    if (!m || !as_meta_key_ok(key) || !value)
        return AS_EUSAGE;
    size_t kl = strlen(key);
    for (size_t i = 0; i < m->n; i++) {
        as_meta_kv *e = &m->kv[i];
        if ((size_t)(e->value - e->key) == kl + 1 && memcmp(e->key, key, kl) == 0) {
            char *b = pair_new(key, kl, value);
            if (!b)
                return AS_ENOMEM;
            free(e->key);
            e->key = b;
            e->value = b + kl + 1;
            return 0;
        }
    }
    if (as_grow((void **)&m->kv, &m->cap, m->n + 1, sizeof *m->kv, 8) < 0)
        return AS_ENOMEM;
    return append(m, key, kl, value);
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
            rc = append(dst, src->kv[i].key, (size_t)(src->kv[i].value - src->kv[i].key - 1),
                        src->kv[i].value);
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
    for (size_t i = 0; i < m->n; i++)
        free(m->kv[i].key); /* the pair's one allocation (pair_new) */
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
