/*
 * test_tune.c - allocsim tune: the search space, the ranking and tie rules on items whose
 * order is known by construction, and the command on crafted traces: identical outcomes
 * pick the default; a trace too big for the card says nothing fits and by how much; the
 * recommended line parses back through -p to the setting that was ranked and fits there.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "policy.h"
#include "tune.h"
#include "util.h"

static void tune_space(void)
{
    char **c;
    size_t n;
    CU_ASSERT_EQUAL_FATAL(as_tune_space(&c, &n), 0);
    CU_ASSERT_EQUAL(n, 2u * 7 * 6 * 3);
    CU_ASSERT_STRING_EQUAL(c[0], ""); /* the default first */
    /* every setting parses, and no two are the same setting */
    char **canon = calloc(n, sizeof *canon);
    for (size_t i = 0; i < n; i++) {
        as_policy_spec s;
        char why[256];
        CU_ASSERT_EQUAL_FATAL(as_policy_spec_parse(c[i][0] ? c[i] : "torch", &s, why, sizeof why),
                              0);
        canon[i] = strdup(s.text);
        as_policy_spec_free(&s);
        for (size_t j = 0; j < i; j++)
            CU_ASSERT(strcmp(canon[i], canon[j]) != 0);
        if (i)
            CU_ASSERT(as_tune_knobs(c[i]) >= as_tune_knobs(c[i - 1])); /* simplest first */
    }
    for (size_t i = 0; i < n; i++)
        free(canon[i]);
    free(canon);
    as_tune_space_free(c, n);
    CU_ASSERT_EQUAL(as_tune_knobs(""), 0);
    CU_ASSERT_EQUAL(as_tune_knobs("expandable_segments:True"), 1);
    CU_ASSERT_EQUAL(
        as_tune_knobs("roundup_power2_divisions:[256:1,512:2,>:8],max_split_size_mb:64"), 2);
}

static as_tune_item item(char *conf, int ok, uint64_t oom_alloc, uint64_t peak, double dt)
{
    as_tune_item it = {.conf = conf,
                       .knobs = as_tune_knobs(conf),
                       .completed = ok,
                       .oom_alloc = ok ? AS_NONE : oom_alloc,
                       .peak_reserved = peak,
                       .device_time_s = dt,
                       .min_capacity = AS_NONE,
                       .fits_from = AS_NONE};
    return it;
}

static void tune_rank_rules(void)
{
    /* Expected order by the rules, given shuffled. */
    const char *want[] = {
        "",                                              /* fits, 100, the default: wins the tie */
        "max_split_size_mb:128",                         /* fits, 100, one knob */
        "expandable_segments:True,max_split_size_mb:64", /* fits, 100, two knobs, less time */
        "garbage_collection_threshold:0.8,max_split_size_mb:64", /* two knobs, more time */
        "roundup_power2_divisions:4",                            /* fits, 120 */
        "expandable_segments:True",                              /* OOM at 50 (later), 90 */
        "max_split_size_mb:256",                                 /* OOM at 10, 80 */
        "max_split_size_mb:512",                                 /* OOM at 10, 95 */
    };
    as_tune_item it[8] = {
        item("max_split_size_mb:512", 0, 10, 95, 0),
        item("roundup_power2_divisions:4", 1, 0, 120, 0),
        item("garbage_collection_threshold:0.8,max_split_size_mb:64", 1, 0, 100, 2),
        item("expandable_segments:True", 0, 50, 90, 0),
        item("max_split_size_mb:128", 1, 0, 100, 0),
        item("max_split_size_mb:256", 0, 10, 80, 0),
        item("expandable_segments:True,max_split_size_mb:64", 1, 0, 100, 1),
        item("", 1, 0, 100, 5),
    };
    as_tune_rank(it, 8);
    for (int i = 0; i < 8; i++)
        CU_ASSERT_STRING_EQUAL(it[i].conf, want[i]);
    /* Curves: the curved ones go first, by the capacity they fit from; within 64 MiB of
     * the lowest it is a tie (fewer knobs, less device time, the text). */
    const uint64_t M = 1ull << 20;
    as_tune_item c[8];
    memcpy(c, it, sizeof c);
    c[1].has_curve = 1, c[1].fits_from = 1030 * M; /* max_split_size_mb:128, 1 knob */
    c[4].has_curve = 1, c[4].fits_from = 1000 * M; /* roundup_power2_divisions:4, 1 knob */
    c[0].has_curve = 1, c[0].fits_from = 1100 * M; /* the default, 100 MiB more: no tie */
    as_tune_rank_curves(c, 8);
    CU_ASSERT_STRING_EQUAL(c[0].conf, "max_split_size_mb:128"); /* tie: the text decides */
    CU_ASSERT_STRING_EQUAL(c[1].conf, "roundup_power2_divisions:4");
    CU_ASSERT_STRING_EQUAL(c[2].conf, "");
    CU_ASSERT_STRING_EQUAL(c[3].conf, "expandable_segments:True,max_split_size_mb:64");
    /* Within 64 MiB the default wins over the setting that fits lowest. */
    memcpy(c, it, sizeof c);
    c[0].has_curve = 1, c[0].fits_from = 1060 * M;
    c[2].has_curve = 1, c[2].fits_from = 1000 * M; /* two knobs */
    as_tune_rank_curves(c, 8);
    CU_ASSERT_STRING_EQUAL(c[0].conf, "");
    CU_ASSERT_STRING_EQUAL(c[1].conf, "expandable_segments:True,max_split_size_mb:64");
    CU_ASSERT_STRING_EQUAL(c[2].conf, "max_split_size_mb:128");
}

/* Small requests only: every setting holds one 2 MiB small segment; the default wins. */
static void tune_tie_default(void)
{
    const char *t = tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 512\nalloc 1 4096\nfree 0\n"
                                         "alloc 2 1000\nfree 1\nfree 2\n");
    char args[512], out[16384], err[4096];
    snprintf(args, sizeof args,
             "tune --device 1G --outside 0 -p max_split_size_mb:128 -p default "
             "-p roundup_power2_divisions:4 %s",
             t);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "unset PYTORCH_CUDA_ALLOC_CONF"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(out, "usable        1069547520 B")); /* 1 GiB - 3.125 MiB, /2 MiB */
}

/* One 2 GiB request on a 1 GB card: nothing fits, and the miss is 2 GiB - 1 GB. */
static void tune_nothing_fits(void)
{
    const char *t = tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 2147483648\nfree 0\n");
    char args[512], out[16384], err[4096];
    snprintf(args, sizeof args, "tune --device 1GB --outside 0 -p default %s", t);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "nothing fits"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "needs 2 GiB")); /* 2048 MiB: the request, rounded */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "more than the card has"));
    CU_ASSERT_PTR_NULL(strstr(out, "export PYTORCH_CUDA_ALLOC_CONF"));
    snprintf(args, sizeof args, "tune --device 1GB --outside 0 -p default -f json %s", t);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"usable\": 996147200, \"fits\": false, "
                                       "\"recommendation\": null"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"min_capacity\": 2147483648"));
}

/* The paste line, read back through -p, is the setting tune ranked first, and it fits. */
static void tune_line_parses_back(void)
{
    const char *trace = tu_path("tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst");
    char args[1024], out[32768], err[4096], conf[256];
    snprintf(args, sizeof args,
             "tune --device 9.5GB -p default -p expandable_segments:True "
             "-p max_split_size_mb:128 --curves 1 %s",
             trace);
    CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    const char *e = strstr(out, "export PYTORCH_CUDA_ALLOC_CONF=");
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL_FATAL(sscanf(e, "export PYTORCH_CUDA_ALLOC_CONF=%255s", conf), 1);
    CU_ASSERT_STRING_EQUAL(conf, "expandable_segments:True");
    /* usable = 9.5e9 - 788e6 (the default outside) - 3.125 MiB, down to 2 MiB */
    snprintf(args, sizeof args, "-p '%s' -p torch -c 8707375104 -f csv %s", conf, trace);
    CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ",\"torch,expandable=true\",8707375104,1,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ",torch,torch,8707375104,0,")); /* the default OOMs */
}

/* --device-streams: two 100 MiB requests on two streams reserve 200 MiB under the default
 * setting, and the job's streams take 2 MiB pages of the card that PyTorch's limit does not
 * count: floor((n + 2) / 4) + floor((n + 7) / 43) of them after n streams
 * (replay/PLACEMENT.md section 10). PyTorch's pool is 128 streams, 32 + 3 = 35 pages (70
 * MiB); each, one a trace stream, 2 streams, 1 + 0 (2 MiB); 130 streams 33 + 3 (72 MiB).
 * A card whose usable memory is 270 MiB (the driver keeps 3.125 MiB, rounded to 2 MiB)
 * fits it with the pool and nothing to spare; 268 MiB does not, and needs 270, while
 * without streams it leaves 68 MiB of headroom. A one-stream trace makes none. */
static void tune_streams(void)
{
    static char out[16384], err[4096], two[600], one[600];
    snprintf(two, sizeof two, "%s",
             tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 104857600\n"
                                  "alloc 1 104857600 s=7\nfree 0\nfree 1\n"));
    snprintf(one, sizeof one, "%s",
             tu_write_tmp(".txt", "allocsim-text 1\nalloc 0 104857600\n"
                                  "alloc 1 104857600\nfree 0\nfree 1\n"));
    const uint64_t mib = 1ull << 20, keep = 3276800; /* what the driver keeps */
    static const struct {
        const char *mode, *trace_of; /* "" = the default (pytorch) */
        uint64_t usable_mib, pages;
        int fits;
    } c[] = {
        {"", "two", 270, 35, 1},    {"", "two", 268, 35, 0},    {"pytorch", "two", 268, 35, 0},
        {"none", "two", 268, 0, 1}, {"each", "two", 268, 1, 1}, {"130", "two", 270, 36, 0},
        {"", "one", 268, 0, 1},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char args[1600], want[160];
        uint64_t usable = c[i].usable_mib * mib, cap = usable - c[i].pages * 2 * mib;
        snprintf(args, sizeof args,
                 "tune --device %llu --outside 0 -p default --curves 1 %s%s -f json '%s'",
                 (unsigned long long)(usable + keep), c[i].mode[0] ? "--device-streams " : "",
                 c[i].mode, c[i].trace_of[0] == 't' ? two : one);
        CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
        snprintf(want, sizeof want, "\"usable\": %llu, \"fits\": %s", (unsigned long long)usable,
                 c[i].fits ? "true" : "false");
        CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
        snprintf(want, sizeof want, "\"made\": %u, \"bytes\": %llu}, \"capacity\": %llu",
                 c[i].pages == 0    ? 0u
                 : c[i].pages == 1  ? 2u
                 : c[i].pages == 35 ? 128u
                                    : 130u,
                 (unsigned long long)(c[i].pages * 2 * mib), (unsigned long long)cap);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
        if (c[i].fits) { /* fits from the requests plus the pages, on the card's scale */
            snprintf(want, sizeof want, "\"headroom\": %llu,",
                     (unsigned long long)(cap - 200 * mib));
            CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
            snprintf(want, sizeof want, "\"fits_from\": %llu,",
                     (unsigned long long)(200 * mib + c[i].pages * 2 * mib));
        } else { /* the miss: the requests plus the pages */
            snprintf(want, sizeof want, "\"min_capacity\": %llu,",
                     (unsigned long long)(200 * mib + c[i].pages * 2 * mib));
        }
        CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
    }
    /* the table says what the streams took */
    char args[1600];
    snprintf(args, sizeof args, "tune --device %llu --outside 0 -p default --curves 0 '%s'",
             (unsigned long long)(270 * mib + keep), two);
    CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "streams: 2 in the trace; PyTorch's pool of 128 streams "
                                       "takes 70.0 MiB of the card"));
    /* the nccl preset holds the pool already: none by default, pytorch when asked */
    for (int given = 0; given < 2; given++) {
        snprintf(args, sizeof args, "tune --device 4GB --outside nccl -p default %s -f json '%s'",
                 given ? "--device-streams pytorch" : "", two);
        CU_ASSERT_EQUAL_FATAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, given ? "\"made\": 128, \"bytes\": 73400320}"
                                                 : "\"made\": 0, \"bytes\": 0}"));
    }
    snprintf(args, sizeof args, "tune --device 1GB --device-streams 0 '%s'", two);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--device-streams 0"));
}

static int open_path(void *user, as_trace_reader **out, as_trace_error *err)
{
    return as_trace_open(user, NULL, out, err);
}

/* A garbage_collection_threshold setting takes its twin's results only where a run of its
 * own gives the same: every setting run (every_setting) against the twins copied, on the
 * real snapshots from just above the peak requested (the thresholds crossed) to room
 * enough that no collection happens (most copied). */
static void tune_twins(void)
{
    static const char *const traces[] = {
        "tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst",
        "tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst",
        "tests/data/torch-2.11-h200-streams/streams2_default.pickle.zst",
    };
    static const double scale[] = {1.08, 1.6, 3.0};
    uint64_t runs = 0, saved = 0, compared = 0, differ = 0;
    for (size_t t = 0; t < sizeof traces / sizeof *traces; t++) {
        char path[1200];
        snprintf(path, sizeof path, "%s", tu_path(traces[t]));
        /* the trace's peak requested, from a search of the default alone */
        char *dflt[] = {""};
        as_tune_result one;
        as_trace_error err0;
        char why0[300];
        as_tune_opts o1 = {.capacity = 1ull << 40, .streams = AS_ENGINE_STREAMS_PYTORCH};
        CU_ASSERT_EQUAL_FATAL(
            as_tune(open_path, path, dflt, 1, &o1, &one, &err0, why0, sizeof why0), 0);
        const uint64_t req = one.peak_requested;
        as_tune_result_free(&one);
        for (size_t c = 0; c < sizeof scale / sizeof *scale; c++) {
            as_tune_result r[2];
            as_trace_error err;
            char why[300];
            as_tune_opts o = {.capacity = (uint64_t)(scale[c] * (double)req),
                              .threads = 2,
                              .streams = AS_ENGINE_STREAMS_PYTORCH};
            for (int every = 0; every < 2; every++) {
                o.every_setting = every;
                CU_ASSERT_EQUAL_FATAL(
                    as_tune(open_path, path, NULL, 0, &o, &r[every], &err, why, sizeof why), 0);
            }
            CU_ASSERT_EQUAL(r[1].runs, 252);
            CU_ASSERT_EQUAL(r[0].n, 252);
            runs += r[0].runs;
            saved += r[1].runs - r[0].runs;
            /* the copies the rule allows, from the runs of every setting: a conf ending in
             * ",garbage_collection_threshold:G" (the space's form) whose twin's peak
             * reserved is at most G x the allocator's capacity */
            uint64_t allowed = 0;
            for (size_t i = 0; i < r[1].n; i++) {
                const as_tune_item *g = &r[1].items[i];
                const char *k = strstr(g->conf, "garbage_collection_threshold:");
                if (!k)
                    continue;
                double gc = strtod(k + strlen("garbage_collection_threshold:"), NULL);
                size_t len = k > g->conf ? (size_t)(k - g->conf) - 1 : 0;
                for (size_t j = 0; j < r[1].n; j++) {
                    const as_tune_item *w = &r[1].items[j];
                    if (strlen(w->conf) == len && !strncmp(w->conf, g->conf, len))
                        allowed += (uint64_t)(gc * (double)(r[1].capacity - r[1].stream_bytes)) >=
                                   w->peak_reserved;
                }
            }
            CU_ASSERT_EQUAL(r[1].runs - r[0].runs, allowed);
            for (size_t i = 0; i < r[0].n; i++)
                for (size_t j = 0; j < r[1].n; j++) {
                    const as_tune_item *a = &r[0].items[i], *b = &r[1].items[j];
                    if (a->index != b->index)
                        continue;
                    compared++;
                    if (i != j || a->completed != b->completed || a->oom_event != b->oom_event ||
                        a->oom_alloc != b->oom_alloc || a->oom_size != b->oom_size ||
                        a->peak_requested != b->peak_requested ||
                        a->peak_reserved != b->peak_reserved ||
                        a->device_reserves != b->device_reserves ||
                        a->device_releases != b->device_releases ||
                        memcmp(&a->device_time_s, &b->device_time_s, sizeof a->device_time_s)) {
                        differ++;
                        fprintf(stderr, "twins differ: %s at %llu: %s\n", traces[t],
                                (unsigned long long)o.capacity, a->conf);
                    }
                }
            as_tune_result_free(&r[0]);
            as_tune_result_free(&r[1]);
        }
    }
    CU_ASSERT_EQUAL(compared, 252 * 9);
    CU_ASSERT_EQUAL(differ, 0);
    CU_ASSERT(saved > 0);     /* the rule applies somewhere */
    CU_ASSERT(runs > 84 * 9); /* and near the peak some thresholds are crossed */
    printf("\n  tune twins: %llu settings compared, %llu differing, %llu of %u runs copied\n",
           (unsigned long long)compared, (unsigned long long)differ, (unsigned long long)saved,
           252 * 9);
}

CU_TestInfo test_tune[] = {
    {"space", tune_space},
    {"rank_rules", tune_rank_rules},
    {"tie_default", tune_tie_default},
    {"nothing_fits", tune_nothing_fits},
    {"line_parses_back", tune_line_parses_back},
    {"streams", tune_streams},
    {"twins", tune_twins},
    CU_TEST_INFO_NULL,
};
