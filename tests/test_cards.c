/*
 * test_cards.c - the card presets against their table (sim/CARDS.md, which cites each
 * figure's source), and the device model's arithmetic: usable = total - outside, exactly,
 * for presets and sizes, with the errors named.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cards.h"
#include "error.h"
#include "util.h"

/* "85,197,848,576" -> 85197848576; -1 on anything else. */
static long long grouped(const char *s, const char *end)
{
    long long v = 0;
    int digits = 0;
    for (; s < end; s++) {
        if (*s >= '0' && *s <= '9') {
            v = v * 10 + (*s - '0');
            digits++;
        } else if (*s != ',' && *s != ' ') {
            return -1;
        }
    }
    return digits ? v : -1;
}

/* The i-th '|' cell of a table row (0 = first after the leading '|'), into buf. */
static int cell(const char *line, int i, char *buf, size_t n)
{
    const char *p = strchr(line, '|');
    for (int k = 0; p && k < i; k++)
        p = strchr(p + 1, '|');
    const char *q = p ? strchr(p + 1, '|') : NULL;
    if (!q)
        return -1;
    p++;
    while (*p == ' ')
        p++;
    size_t len = (size_t)(q - p);
    while (len && p[len - 1] == ' ')
        len--;
    if (len >= n)
        return -1;
    memcpy(buf, p, len);
    buf[len] = 0;
    return 0;
}

static void cards_match_table(void)
{
    FILE *f = fopen(tu_path("sim/CARDS.md"), "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[1024], name[64], model[128], bytes[64], basis[32];
    size_t ncards, nout, seen_cards = 0, seen_out = 0;
    as_card_list(&ncards);
    as_outside_list(&nout);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "| `", 3) != 0)
            continue;
        CU_ASSERT_FATAL(cell(line, 0, name, sizeof name) == 0);
        name[strlen(name) - 1] = 0; /* the backquotes */
        const char *n = name + 1;
        const as_card *c = as_card_find(n);
        const as_outside *o = as_outside_find(n);
        CU_ASSERT(c || o);
        if (c && cell(line, 4, basis, sizeof basis) == 0) {
            CU_ASSERT(cell(line, 1, model, sizeof model) == 0);
            CU_ASSERT(cell(line, 2, bytes, sizeof bytes) == 0);
            CU_ASSERT_STRING_EQUAL(model, c->model);
            CU_ASSERT_EQUAL(grouped(bytes, bytes + strlen(bytes)), (long long)c->total);
            CU_ASSERT_STRING_EQUAL(basis, as_card_basis_name(c->basis));
            seen_cards++;
        } else if (o) {
            CU_ASSERT(cell(line, 1, bytes, sizeof bytes) == 0);
            CU_ASSERT_EQUAL(grouped(bytes, bytes + strlen(bytes)), (long long)o->bytes);
            seen_out++;
        }
    }
    fclose(f);
    CU_ASSERT_EQUAL(seen_cards, ncards); /* every preset is in the table, once */
    CU_ASSERT_EQUAL(seen_out, nout);
}

/* Sources the repository holds are checked against it: our H200's measured total and
 * context (calib-h200/info.txt: totalGlobalMem, and cudaMemGetInfo free right after the
 * context was made). */
static void cards_h200_measured(void)
{
    FILE *f = fopen(tu_path("replay/data/calib-h200/info.txt"), "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[256];
    unsigned long long total = 0, free_b = 0, t2 = 0;
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "device NVIDIA H200 cc 9.0 totalGlobalMem %llu", &total);
        sscanf(line, "cudaMemGetInfo free %llu total %llu", &free_b, &t2);
    }
    fclose(f);
    const as_card *h = as_card_find("h200");
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(h->total, total);
    CU_ASSERT_EQUAL(h->basis, AS_CARD_MEASURED);
    CU_ASSERT_EQUAL(as_outside_find("context")->bytes, t2 - free_b);
    /* A datasheet figure is the nominal GiB, an upper bound over every reported card of
     * the same nominal size. */
    CU_ASSERT(as_card_find("h100-pcie")->total >= as_card_find("h100-80gb")->total);
    CU_ASSERT(as_card_find("a10")->total >= as_card_find("a10g")->total);
}

static void cards_names(void)
{
    CU_ASSERT_PTR_EQUAL(as_card_find("A100_80GB"), as_card_find("a100-80gb"));
    CU_ASSERT_PTR_EQUAL(as_card_find("RTX 4090"), as_card_find("rtx-4090"));
    CU_ASSERT_PTR_NULL(as_card_find("a100"));
    CU_ASSERT_PTR_NULL(as_card_find("a100-80gbx"));
    CU_ASSERT_PTR_NULL(as_card_find(""));
    CU_ASSERT_PTR_NOT_NULL(as_outside_find(AS_OUTSIDE_DEFAULT));
}

/* The model's usable capacity, computed here from its definition: total - outside less
 * the 3.125 MiB the driver keeps (measured, replay/PLACEMENT.md section 8), down to 2 MiB. */
static uint64_t usable_of(uint64_t total, uint64_t outside)
{
    return (total - outside - (3ull << 20) - (1ull << 17)) / (2ull << 20) * (2ull << 20);
}

static void cards_model_arithmetic(void)
{
    as_device_model d;
    char why[256];
    CU_ASSERT_EQUAL(as_device_model_parse("h200", NULL, &d, why, sizeof why), 0);
    CU_ASSERT_EQUAL(d.total, 150109880320ull);
    CU_ASSERT_EQUAL(d.outside, 788000000ull); /* the default: the training process's end */
    CU_ASSERT_EQUAL(d.reserve, 3276800ull);
    CU_ASSERT_EQUAL(d.usable, usable_of(150109880320ull, 788000000ull));
    CU_ASSERT_EQUAL(d.usable % (2ull << 20), 0);
    CU_ASSERT_EQUAL(as_device_model_parse("a100-40gb", "nccl", &d, why, sizeof why), 0);
    CU_ASSERT_EQUAL(d.usable, usable_of(42505273344ull, 1303000000ull));
    CU_ASSERT_STRING_EQUAL(d.outside_name, "nccl");
    CU_ASSERT_EQUAL(as_device_model_parse("24GB", "1GiB", &d, why, sizeof why), 0);
    CU_ASSERT_PTR_NULL(d.card);
    CU_ASSERT_EQUAL(d.usable, usable_of(24000000000ull, 1ull << 30));
    CU_ASSERT_STRING_EQUAL(d.outside_what, "given");
    CU_ASSERT_EQUAL(as_device_model_parse("9GB", "0", &d, why, sizeof why), 0);
    CU_ASSERT_EQUAL(d.usable, 8994684928ull); /* (9e9 - 3276800) // 2 MiB = 4289 pages */
    CU_ASSERT_EQUAL(as_device_model_parse("rtx-5000", NULL, &d, why, sizeof why), AS_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "rtx-5000"));
    CU_ASSERT_EQUAL(as_device_model_parse("t4", "lots", &d, why, sizeof why), AS_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "lots"));
    CU_ASSERT_EQUAL(as_device_model_parse("1GB", "1GB", &d, why, sizeof why), AS_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "leaves nothing"));
}

/* run -c CARD and --device: the runs' capacity is the model's usable memory (total -
 * outside - the driver's 3.125 MiB, down to 2 MiB), and the numbers are printed (stderr
 * when the report is CSV). */
static void cards_run_capacity(void)
{
    char args[1024], out[8192], err[4096];
    const char *t = tu_path("traces/samples/handwritten.txt");
    snprintf(args, sizeof args, "-c t4 --outside nccl --device 9GB -f csv %s", t);
    CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ",14535360512,")); /* 15843721216 - 1303000000 - 3.125 MiB, /2 MiB */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ",7692353536,"));  /* 9e9 - 1303000000 - 3.125 MiB, /2 MiB */
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "usable       14535360512 B"));
    snprintf(args, sizeof args, "-c h100 %s", t); /* not a preset: a usage error */
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 2);
}

CU_TestInfo test_cards[] = {
    {"run_capacity", cards_run_capacity},         {"match_table", cards_match_table},
    {"h200_measured", cards_h200_measured},       {"names", cards_names},
    {"model_arithmetic", cards_model_arithmetic}, CU_TEST_INFO_NULL,
};
