/*
 * test_shard.c - --shard I/N and allocsim merge: four shards merged equal the unsharded
 * command's JSON Lines for run (five traces), mincap (five policies) and tune (three
 * traces), line for line once the host's own timings (wall_s, cpu_s, events_per_second:
 * measured, never the same twice) are set aside; and the merge refuses an incomplete or
 * doubled set.
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define BIG (1u << 20)

/* Drops the measured timings anywhere in v. */
static void drop_timings(json_t *v)
{
    static const char *const keys[] = {"wall_s", "cpu_s", "events_per_second"};
    if (json_is_object(v)) {
        for (size_t i = 0; i < 3; i++)
            json_object_del(v, keys[i]);
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) drop_timings(x);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) drop_timings(x);
    }
}

/* Each line of text, parsed, timings dropped, dumped with sorted keys, one per line. */
static char *normal(const char *text)
{
    size_t cap = strlen(text) + 2, n = 0;
    char *out = calloc(cap, 1), *copy = strdup(text);
    for (char *save = NULL, *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        json_t *o = json_loads(l, 0, NULL);
        CU_ASSERT_PTR_NOT_NULL(o);
        if (!o)
            continue;
        drop_timings(o);
        char *d = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
        size_t dl = strlen(d);
        if (n + dl + 2 > cap)
            out = realloc(out, cap = (n + dl + 2) * 2);
        memcpy(out + n, d, dl);
        n += dl;
        out[n++] = '\n';
        out[n] = 0;
        free(d);
        json_decref(o);
    }
    free(copy);
    return out;
}

/* `allocsim CMD` whole and in four shards merged (shard files given out of order). */
static void check_shards(const char *cmd, unsigned expect_lines)
{
    char *whole = malloc(BIG), *merged = malloc(BIG), *err = malloc(4096), args[2048];
    char path[4][256];
    snprintf(args, sizeof args, "%s -f jsonl", cmd);
    CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(args, whole, BIG, err, 4096), 0);
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, "%s -f jsonl --shard %d/4", cmd, i + 1);
        CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(args, merged, BIG, err, 4096), 0);
        snprintf(path[i], sizeof path[i], "%s", tu_write_tmp(".jsonl", merged));
    }
    snprintf(args, sizeof args, "merge %s %s %s %s", path[3], path[1], path[0], path[2]);
    int mrc = tu_run_allocsim(args, merged, BIG, err, 4096);
    if (mrc)
        fprintf(stderr, "%s: %s\n", args, err);
    CU_ASSERT_EQUAL_FATAL(mrc, 0);
    unsigned lines = 0;
    for (const char *p = whole; *p; p++)
        lines += *p == '\n';
    CU_ASSERT_EQUAL(lines, expect_lines);
    char *a = normal(whole), *b = normal(merged);
    CU_ASSERT_STRING_EQUAL(a, b);
    /* Three of the four shards are not a report (shard 1 holds unit 0). */
    snprintf(args, sizeof args, "merge %s %s %s", path[1], path[2], path[3]);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, NULL, 0, err, 4096), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "missing"));
    snprintf(args, sizeof args, "merge %s %s %s %s %s", path[0], path[0], path[1], path[2],
             path[3]);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, NULL, 0, err, 4096), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "twice"));
    free(a);
    free(b);
    free(whole);
    free(merged);
    free(err);
}

static void shard_run(void)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "run -p torch -p bestfit -p expandable_segments:True -c 1G -c 4G %s %s %s %s %s",
             tu_path("traces/samples/kvcache_concat.zst"),
             tu_path("traces/samples/handwritten.txt"), tu_path("traces/samples/rmm_cudf_join.csv"),
             tu_path("tests/data/native_v1.zst"), tu_path("traces/samples/transformer_gpt2.zst"));
    check_shards(cmd, 5);
}

static void shard_mincap(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mincap -p torch -p bestfit -p firstfit -p segfit -p buddy %s",
             tu_path("traces/samples/handwritten.txt"));
    check_shards(cmd, 5);
}

static void shard_tune(void)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "tune --device 2GB -p default -p expandable_segments:True -p max_split_size_mb:64 "
             "--curves 2 %s %s %s",
             tu_path("traces/samples/handwritten.txt"), tu_path("tests/data/native_v1.zst"),
             tu_path("traces/samples/kvcache_concat.zst"));
    check_shards(cmd, 3);
}

CU_TestInfo test_shard[] = {
    {"run", shard_run},
    {"mincap", shard_mincap},
    {"tune", shard_tune},
    CU_TEST_INFO_NULL,
};
