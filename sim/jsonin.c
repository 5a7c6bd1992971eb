/*
 * jsonin.c - the JSON reader (jsonin.h) on libjansson. Integers stay json_int_t from the
 * parser to the caller's uint64_t; no value passes through a double.
 */
#include "jsonin.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int as_json_load(const char *path, json_t **out, char *err, size_t err_len)
{
    json_error_t je;
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    /* JSON_DISABLE_EOF_CHECK off: trailing data after the value is an error. */
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    int ioerr = ferror(f);
    fclose(f);
    if (!root || ioerr) {
        if (ioerr)
            snprintf(err, err_len, "%s: read error", path);
        else
            snprintf(err, err_len, "%s: line %d, column %d: %s", path, je.line, je.column, je.text);
        json_decref(root);
        return -1;
    }
    *out = root;
    return 0;
}

static int to_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

int as_json_u64(const json_t *obj, const char *key, uint64_t *out)
{
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    if (!v || json_is_null(v))
        return 0;
    return to_u64(v, out);
}

int as_json_u64_at(const json_t *arr, size_t i, uint64_t *out)
{
    const json_t *v = json_is_array(arr) ? json_array_get(arr, i) : NULL;
    return v ? to_u64(v, out) : -1;
}
