/*
 * test_json.c - the JSON of the reports that scripts read beside run's (sim/REPORT.md,
 * schema 3), parsed with jansson and held to values worked out here from other sources:
 * run's yardstick fields against the planned run and the trace's own peak requested.
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define BIG (1u << 20)

/* `allocsim ARGS` parsed (exit status want, else a failure); NULL when it is not JSON. */
static json_t *run_json(const char *args, int want)
{
    char *out = malloc(BIG), err[4096];
    int rc = tu_run_allocsim(args, out, BIG, err, sizeof err);
    if (rc != want)
        fprintf(stderr, "\n  allocsim %s: exit %d (want %d): %s\n", args, rc, want, err);
    CU_ASSERT_EQUAL(rc, want);
    json_error_t je;
    json_t *doc = json_loads(out, 0, &je);
    if (!doc)
        fprintf(stderr, "\n  allocsim %s: not JSON (%s, line %d): %.300s\n", args, je.text, je.line,
                out);
    free(out);
    return doc;
}

static uint64_t u64(const json_t *o, const char *key)
{
    return (uint64_t)json_integer_value(json_object_get(o, key));
}

/* The yardstick fields: the least peak reserved of the trace's completed planned runs, each
 * run's peak reserved over it and over the peak requested, absent (null) where the table
 * shows '-'. handwritten.txt's peak requested is 26 MiB, added up from the file: at alloc 8
 * the two 2 MiB weights, the 10 MiB and the 12 MiB scratch buffers are live (the side
 * stream's 3 MiB stopped counting at its free_req). */
static void yardstick_fields(void)
{
    char args[1024];
    snprintf(args, sizeof args, "-q -f json -p planned -p bestfit -p nocache -c none -c 8M %s",
             tu_path("traces/samples/handwritten.txt"));
    json_t *doc = run_json(args, 0);
    CU_ASSERT_FATAL(doc != NULL);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(doc, "schema")), 3);
    json_t *runs = json_object_get(doc, "runs");
    CU_ASSERT_EQUAL_FATAL(json_array_size(runs), 6);
    uint64_t plan = UINT64_MAX;
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r)
    {
        if (!strcmp(json_string_value(json_object_get(r, "policy")), "planned") &&
            json_is_true(json_object_get(r, "completed")) && u64(r, "peak_reserved") < plan)
            plan = u64(r, "peak_reserved");
    }
    CU_ASSERT_FATAL(plan != UINT64_MAX);
    unsigned completed = 0;
    json_array_foreach(runs, i, r)
    {
        CU_ASSERT_EQUAL(u64(r, "planned_peak_reserved"), plan);
        json_t *vp = json_object_get(r, "vs_planned"), *vr = json_object_get(r, "vs_requested");
        if (!json_is_true(json_object_get(r, "completed"))) {
            CU_ASSERT(json_is_null(vp));
            CU_ASSERT(json_is_null(vr));
            continue;
        }
        completed++;
        double res = (double)u64(r, "peak_reserved");
        CU_ASSERT(json_is_real(vp) && fabs(json_real_value(vp) - (res / (double)plan - 1)) < 1e-9);
        CU_ASSERT(json_is_real(vr) &&
                  fabs(json_real_value(vr) - (res / (double)(26u << 20) - 1)) < 1e-9);
    }
    CU_ASSERT_EQUAL(completed, 3); /* under the 26 MiB peak, at 8 MiB, every run stops */
    json_decref(doc);
    /* Without a planned run there is no yardstick; the bound still applies. */
    snprintf(args, sizeof args, "-q -f json -p bestfit %s",
             tu_path("traces/samples/handwritten.txt"));
    doc = run_json(args, 0);
    CU_ASSERT_FATAL(doc != NULL);
    r = json_array_get(json_object_get(doc, "runs"), 0);
    CU_ASSERT(json_is_null(json_object_get(r, "planned_peak_reserved")));
    CU_ASSERT(json_is_null(json_object_get(r, "vs_planned")));
    CU_ASSERT(json_is_real(json_object_get(r, "vs_requested")));
    json_decref(doc);
}

CU_TestInfo test_json[] = {
    {"run: the yardstick fields (planned, peak requested) and their nulls", yardstick_fields},
    CU_TEST_INFO_NULL,
};
