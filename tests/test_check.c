/*
 * test_check.c - `allocsim check` (sim/check.c): every shared snapshot against its own
 * recorded run. The golden numbers are the recordings': the peak reserved each recording
 * run's memory_stats() reported (the *.meta.json and *.stats.json beside the snapshots,
 * the streams README's table), the segment entries the snapshot holds (its metadata's
 * action counts), and for the pools snapshot its README's account (23 segment events,
 * peak 780,140,544 B, differing from the 14th on, because of its private pools).
 */
#include <CUnit/CUnit.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "jsonin.h"
#include "trace.h"
#include "util.h"

/* The recorded run's peak reserved, from the JSON file beside the snapshot. */
static uint64_t json_peak(const char *rel, const char *key)
{
    json_t *root;
    char why[300];
    uint64_t v = 0;
    if (as_json_load(tu_path(rel), &root, why, sizeof why)) {
        fprintf(stderr, "\n  %s", why);
        return 0;
    }
    CU_ASSERT_EQUAL(as_json_u64(root, key, &v), 1);
    json_decref(root);
    return v;
}

/* segment_* entries of the snapshot, from its metadata ("torch.actions"). */
static uint64_t seg_entries(const char *path)
{
    as_trace_reader *r;
    as_trace_error err;
    uint64_t n = 0;
    if (as_trace_open(path, NULL, &r, &err))
        return 0;
    const char *a = as_meta_get(as_trace_reader_meta(r), "torch.actions");
    for (const char *p = a; p && (p = strstr(p, "segment_")); p++) {
        const char *c = strchr(p, ':');
        n += c ? strtoull(c + 1, NULL, 10) : 0;
    }
    as_trace_close(r);
    return n;
}

static void one(const char *rel, uint64_t peak, int reproduced, as_check_result *r)
{
    as_trace_error err;
    const char *path = tu_path(rel);
    CU_ASSERT_EQUAL_FATAL(as_check(path, NULL, r, &err), 0);
    char line[1200];
    as_check_line(r, line, sizeof line);
    if (r->reproduced != reproduced)
        fprintf(stderr, "\n  check %s: %s", rel, line);
    CU_ASSERT_EQUAL(r->reproduced, reproduced);
    CU_ASSERT_EQUAL(r->recorded, seg_entries(path));
    CU_ASSERT_EQUAL(r->rec_peak, peak);
    CU_ASSERT_EQUAL(strncmp(line, reproduced ? "reproduced: " : "differs ", 8), 0);
}

static void check_shared(void)
{
    as_check_result r;
    one("tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst",
        json_peak("tests/data/torch-2.11-h200/resnet_varbatch.meta.json", "peak_reserved"), 1, &r);
    CU_ASSERT_EQUAL(r.sim_peak, r.rec_peak);
    CU_ASSERT_STRING_EQUAL(r.spec, "torch");
    CU_ASSERT_FALSE(r.start.possible);
    one("tests/data/torch-2.11-h200/moe_like.pickle.zst",
        json_peak("tests/data/torch-2.11-h200/moe_like.meta.json", "peak_reserved"), 1, &r);
    one("tests/data/torch-2.11-h200-llama/llama_accum_ckpt.pickle.zst",
        json_peak("tests/data/torch-2.11-h200-llama/llama_accum_ckpt.meta.json", "peak_reserved"),
        1, &r);
    one("tests/data/torch-2.11-h200-streams/streams2_default.pickle.zst", 18708692992ull, 1, &r);
    one("tests/data/torch-2.11-h200-streams/streams2_expandable_segments_True.pickle.zst",
        15386804224ull, 1, &r);
    CU_ASSERT_STRING_EQUAL(r.spec, "expandable_segments:True");
    /* The pools snapshot: its CUDA graph's and MemPool's segments are alive at the dump,
     * so every allocation's pool is known (no ambiguous one): the 14 allocations of the
     * captured forward (record_graph_probe.py: the MLP under torch.cuda.graph) and the two
     * made under use_mem_pool are private; torch.cuda.graph's empty_cache() at the
     * capture's start shows as the run of two segment_free entries. Reproduced. */
    one("tests/data/torch-2.11-h200-pools/graph_probe.pickle.zst", 780140544ull, 1, &r);
    CU_ASSERT_EQUAL(r.recorded, 23);
    CU_ASSERT_EQUAL(r.sim_peak, r.rec_peak);
}

/* A metadata value of the snapshot at rel, as a number (UINT64_MAX when absent). */
static uint64_t meta_u64(const char *rel, const char *key)
{
    as_trace_reader *r;
    as_trace_error err;
    uint64_t v = UINT64_MAX;
    if (as_trace_open(tu_path(rel), NULL, &r, &err))
        return v;
    const char *s = as_meta_get(as_trace_reader_meta(r), key);
    if (s)
        v = strtoull(s, NULL, 10);
    as_trace_close(r);
    return v;
}

/* The record's pool counts, complete once the trace has been read. */
static as_snapshot_record read_all(const char *rel, uint64_t *n, uint64_t *first2, uint64_t *side)
{
    as_trace_reader *r;
    as_trace_error err;
    as_snapshot_record rec = {0};
    *first2 = UINT64_MAX, *side = 0;
    if (as_trace_open(tu_path(rel), NULL, &r, &err)) {
        CU_FAIL("open");
        return rec;
    }
    as_event e;
    while (as_trace_next(r, &e) == 0)
        if (e.op == AS_OP_ALLOC) {
            n[e.pool < 3 ? e.pool : 3]++;
            *side += e.stream != 0;
            if (e.pool == 2 && *first2 == UINT64_MAX)
                *first2 = e.id;
        }
    rec = *as_trace_reader_snapshot(r);
    as_trace_close(r);
    return rec;
}

/* Converts rel to a native trace nat and that to a text trace txt (each path 300 bytes),
 * through the command, so what convert keeps can be read back from both formats. */
static void convert_twice(const char *rel, char *nat, char *txt)
{
    static char out[4096], err[4096], args[1200];
    snprintf(nat, 300, "%s", tu_tmp(".zst"));
    snprintf(txt, 300, "%s", tu_tmp(".txt"));
    snprintf(args, sizeof args, "convert '%s' '%s'", tu_path(rel), nat);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    snprintf(args, sizeof args, "convert '%s' '%s'", nat, txt);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
}

static void check_pools_import(void)
{
    const char *rel = "tests/data/torch-2.11-h200-pools/graph_probe.pickle.zst";
    CU_ASSERT_EQUAL(meta_u64(rel, "pools"), 2); /* (0, 1) the MemPool, (1, 0) the graph */
    CU_ASSERT_EQUAL(meta_u64(rel, "torch.empty_cache_inferred"), 1);
    /* The events carry it: pool 2 is (1, 0), the graph's, first taken by ALLOC 57 (the
     * first allocation inside the capture; 55 and 56, the capture's RNG state made just
     * before it begins, are in the default pool as the dump's segment says). */
    uint64_t n[4] = {0}, first, side;
    as_snapshot_record rec = read_all(rel, n, &first, &side);
    CU_ASSERT_EQUAL(first, 57);
    CU_ASSERT_EQUAL(n[1], 2);
    CU_ASSERT_EQUAL(n[2], 14);
    CU_ASSERT_EQUAL(n[3], 0);
    CU_ASSERT_EQUAL(rec.pool_allocs, 14 + 2);
    CU_ASSERT_EQUAL(rec.pool_ambiguous, 0);
    /* convert keeps every ALLOC's pool, through the native format and the text one. */
    char nat[300], txt[300];
    convert_twice(rel, nat, txt);
    const char *back[] = {nat, txt};
    for (int k = 0; k < 2; k++) {
        as_trace_reader *r;
        as_trace_error e2;
        CU_ASSERT_FATAL(as_trace_open(back[k], NULL, &r, &e2) == 0);
        CU_ASSERT_STRING_EQUAL(as_meta_get(as_trace_reader_meta(r), "pool.2"), "(1, 0)");
        as_event e;
        uint64_t m[4] = {0}, first2 = UINT64_MAX;
        while (as_trace_next(r, &e) == 0)
            if (e.op == AS_OP_ALLOC) {
                m[e.pool < 3 ? e.pool : 3]++;
                if (e.pool == 2 && first2 == UINT64_MAX)
                    first2 = e.id;
            }
        as_trace_close(r);
        CU_ASSERT_EQUAL(m[1], n[1]);
        CU_ASSERT_EQUAL(m[2], n[2]);
        CU_ASSERT_EQUAL(m[3], 0);
        CU_ASSERT_EQUAL(first2, 57);
    }
}

/* A stats_end value of a recording's JSON at rel (record_graphs.py, record_xstream.py:
 * memory_stats() at the dump). */
static uint64_t stats_end(const char *rel, const char *key)
{
    char why[300];
    json_t *root;
    uint64_t v = 0;
    if (as_json_load(tu_path(rel), &root, why, sizeof why)) {
        fprintf(stderr, "\n  %s", why);
        return 0;
    }
    CU_ASSERT_EQUAL(as_json_u64(json_object_get(root, "stats_end"), key, &v), 1);
    json_decref(root);
    return v;
}

/* A stats_end value of a CUDA-graph recording's *_stats.json. */
static uint64_t graphs_stat(const char *work, const char *key)
{
    char rel[200];
    snprintf(rel, sizeof rel, "tests/data/torch-2.11-h200-graphs/%s_stats.json", work);
    return stats_end(rel, key);
}

/* Every ALLOC's pool of a trace (rel: in the source tree, or an absolute path) (pools[id], at
 * most cap), its EMPTY_CACHE events as a
 * string ('0' empty_cache(), 'P' a private pool released: the last one's in *last) and
 * the number of ALLOCs. */
static size_t alloc_pools(const char *rel, uint32_t *pools, size_t cap, char *empties, size_t ecap,
                          uint32_t *last)
{
    as_trace_reader *r;
    as_trace_error err;
    size_t n = 0, k = 0;
    if (as_trace_open(rel[0] == '/' ? rel : tu_path(rel), NULL, &r, &err))
        return 0;
    as_event e;
    while (as_trace_next(r, &e) == 0) {
        if (e.op == AS_OP_ALLOC && n < cap)
            pools[n++] = e.pool;
        if (e.op == AS_OP_EMPTY_CACHE && k + 1 < ecap) {
            empties[k++] = e.pool ? 'P' : '0';
            if (e.pool)
                *last = e.pool;
        }
    }
    empties[k] = 0;
    as_trace_close(r);
    return n;
}

/* The CUDA-graph recordings (tests/data/torch-2.11-h200-graphs/README.md): each reproduces
 * every device call memory_stats() counted (num_device_alloc + num_device_free) at its
 * recorded address, and the recorded peak reserved, though no segment of their graph pool
 * is left at the dump (the reduce-overhead runs) or some are (graph). The ground truth of
 * the pools is the snapshot taken in the same process before the release, whose segments
 * carry segment_pool_id: over the allocations it holds (a prefix of the trace), every
 * allocation is in the same pool (one pool of the dump for each of the release's, the
 * default for the default), and none is ambiguous. dyn is held out: the rules were written
 * without it. The EMPTY_CACHE events are the script's empty_cache() after the release, in
 * which the tree's pool goes back (0P), torch.cuda.graph's at the first capture that freed
 * something (train: 00P), and for graph the capture's, then the MemPool's destructor
 * emptying its own pool alone, then the script's with the graph pool (0P0P). */
static void check_graphs(void)
{
    static const struct {
        const char *work, *live, *empties;
    } g[] = {
        {"infer", "infer", "0P"},
        {"train", "train", "00P"},
        {"infer_noframes", "infer", "0P"},
        {"train_noframes", "train", "00P"},
        {"dyn", "dyn", "0P"},
        {"graph", "graph", "0P0P"},
    };
    enum { CAP = 4096 };
    static uint32_t fin[CAP], live[CAP];
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        as_check_result r;
        char rel[200], lrel[200], emp[16], lemp[16];
        uint32_t last = 0, unused = 0;
        snprintf(rel, sizeof rel, "tests/data/torch-2.11-h200-graphs/%s.pickle.zst", g[i].work);
        snprintf(lrel, sizeof lrel, "tests/data/torch-2.11-h200-graphs/%s_live.pickle.zst",
                 g[i].live);
        one(rel, graphs_stat(g[i].work, "reserved_bytes.all.peak"), 1, &r);
        CU_ASSERT_EQUAL(r.recorded, graphs_stat(g[i].work, "num_device_alloc") +
                                        graphs_stat(g[i].work, "num_device_free"));
        uint64_t n[4] = {0}, first, side;
        as_snapshot_record rec = read_all(rel, n, &first, &side);
        CU_ASSERT_EQUAL(rec.pool_ambiguous, 0);
        size_t nf = alloc_pools(rel, fin, CAP, emp, sizeof emp, &last);
        size_t nl = alloc_pools(lrel, live, CAP, lemp, sizeof lemp, &unused);
        CU_ASSERT(nl > 0 && nl < nf);
        uint32_t map[8] = {0}, back[8] = {0};
        size_t same = 0, priv = 0, in_last = 0;
        for (size_t k = 0; k < nl && k < nf; k++) {
            uint32_t a = fin[k] < 8 ? fin[k] : 7, b = live[k] < 8 ? live[k] : 7;
            if (!map[a] && !back[b])
                map[a] = b + 1, back[b] = a + 1;
            same += map[a] == b + 1 && back[b] == a + 1 && (a == 0) == (b == 0);
            priv += b != 0;
            in_last += fin[k] == last;
        }
        if (same != nl)
            fprintf(stderr, "\n  %s: %zu of %zu allocations in their pool", g[i].work, same, nl);
        CU_ASSERT_EQUAL(same, nl);
        CU_ASSERT(priv > 0);
        CU_ASSERT_EQUAL(rec.pool_allocs, priv); /* the allocations after it: the default's */
        CU_ASSERT_STRING_EQUAL(emp, g[i].empties);
        CU_ASSERT(in_last > 0); /* the pool released last is one that served allocations */
    }
    /* info says how the pools were found: graph's 10 private allocations (those of the
     * snapshot before the release), in the pool at the dump (the graphs') and the one
     * inferred (the MemPool's) */
    static char out[16384], err[4096], args[1200];
    snprintf(args, sizeof args, "info '%s'",
             tu_path("tests/data/torch-2.11-h200-graphs/graph.pickle.zst"));
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nprivate pools: 2 (1 inferred), 10 allocations in them;"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "; 0 ambiguous (simulated in the default pool)\n"));
    /* convert keeps the releases (an EMPTY_CACHE of a pool) and every ALLOC's pool, through
     * the native format and the text one */
    static uint32_t back[CAP];
    char nat[300], txt[300], emp[16], bemp[16];
    uint32_t last = 0;
    const char *rel = "tests/data/torch-2.11-h200-graphs/graph.pickle.zst";
    size_t nf = alloc_pools(rel, fin, CAP, emp, sizeof emp, &last);
    convert_twice(rel, nat, txt);
    const char *conv[] = {nat, txt};
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(alloc_pools(conv[k], back, CAP, bemp, sizeof bemp, &last), nf);
        CU_ASSERT_EQUAL(memcmp(back, fin, nf * sizeof *fin), 0);
        CU_ASSERT_STRING_EQUAL(bemp, emp);
    }
}

/* Recorded after the model was built and three steps ran: the trace frees blocks it never
 * allocated, in segments it never made. Rebuilt, the pool at its start has the 48 segments
 * of the dump (memory_stats' segment.all.current) less the 11 the trace makes, and the
 * run reproduces every segment event and the recording's own peak. */
static void check_midrun(void)
{
    as_check_result r;
    const char *dir = "tests/data/torch-2.11-h200-midrun/";
    char p[200], s[200];
    snprintf(p, sizeof p, "%smidrun.pickle.zst", dir);
    snprintf(s, sizeof s, "%smidrun.stats.json", dir);
    one(p, json_peak(s, "reserved_bytes.all.peak"), 1, &r);
    uint64_t segs = json_peak(s, "segment.all.current");
    CU_ASSERT_EQUAL(r.start.segments, segs - r.recorded);
    CU_ASSERT(r.start.possible && r.start.reconstructed);
    CU_ASSERT(r.start.live > 0);
    CU_ASSERT_EQUAL(r.start.live, r.start.from_frees + r.start.from_dump);
    CU_ASSERT_EQUAL(r.sim_peak, r.rec_peak);
    /* With expandable segments: the two ranges at the dump (large, small) less the 11
     * ranges the trace maps at the large one's end; every segment_map and the peak. */
    snprintf(p, sizeof p, "%smidrun_expandable.pickle.zst", dir);
    snprintf(s, sizeof s, "%smidrun_expandable.stats.json", dir);
    one(p, json_peak(s, "reserved_bytes.all.peak"), 1, &r);
    CU_ASSERT(r.start.possible && r.start.reconstructed);
    CU_ASSERT_EQUAL(r.start.segments, 2);
    CU_ASSERT_EQUAL(r.sim_peak, r.rec_peak);
}

/* A state-only snapshot (recorded with enabled="state": a trace of one entry) and the
 * bare list of torch.cuda.memory_snapshot(): the segment map at the dump agrees with the
 * recording process's memory_stats() (reserved, allocated, segment count), and the free
 * space inside segments is what is neither allocated nor awaiting its free. */
static void check_state_only(void)
{
    const char *files[] = {"tests/data/torch-2.11-h200-midrun/midrun_state.pickle.zst",
                           "tests/data/torch-2.11-h200-midrun/midrun_segments.pickle.zst"};
    const char *stats = "tests/data/torch-2.11-h200-midrun/midrun_state.stats.json";
    for (int i = 0; i < 2; i++) {
        as_trace_reader *r;
        as_trace_error err;
        CU_ASSERT_EQUAL_FATAL(as_trace_open(tu_path(files[i]), NULL, &r, &err), 0);
        const as_snapshot_record *rec = as_trace_reader_snapshot(r);
        CU_ASSERT_PTR_NOT_NULL_FATAL(rec);
        as_dump_state d;
        as_dump_state_of(rec, &d);
        CU_ASSERT(d.state_only);
        CU_ASSERT_EQUAL(d.reserved, json_peak(stats, "reserved_bytes.all.current"));
        CU_ASSERT_EQUAL(d.allocated, json_peak(stats, "allocated_bytes.all.current"));
        CU_ASSERT_EQUAL(d.segments, json_peak(stats, "segment.all.current"));
        CU_ASSERT_EQUAL(d.free_bytes, d.reserved - d.allocated - d.pending);
        CU_ASSERT(d.largest_free <= d.free_bytes && d.largest_free > 0);
        CU_ASSERT_EQUAL(d.external, d.free_bytes);
        as_trace_close(r);
    }
    static char out[16384], err[2048], args[1024];
    snprintf(args, sizeof args, "info '%s'", tu_path(files[0]));
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nstate at the dump: 48 segments (12 small)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nhistory: none (1 trace entry)"));
    snprintf(args, sizeof args, "info '%s'",
             tu_path("tests/data/torch-2.11-h200-midrun/midrun.pickle.zst"));
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nstart of the trace: recorded mid-run; rebuilt 37 "
                                       "segments"));
}

/* The start of a trace whose segment addresses are reused (tests/reuse_snapshot.py): each
 * segment_alloc takes back the latest segment freed at its address, so each address keeps
 * the segment made before the trace; and of many expandable segments, each less what the
 * trace mapped inside it. Up to n = 20,000, where the walks were quadratic (a search of
 * every segment at each segment_alloc: 6.5 s at n = 160,000, now 0.45 s; every segment
 * entry and every other segment for each expandable one: 17 s at 60,000, now 0.2 s). */
static void check_start_reuse(void)
{
    const unsigned n[] = {1, 3, 20000, 1, 3, 20000};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
        char pk[400], cmd[1000];
        snprintf(pk, sizeof pk, "%s", tu_tmp(".pickle"));
        snprintf(cmd, sizeof cmd, "python3 '%s' '%s' %u%s", tu_path("tests/reuse_snapshot.py"), pk,
                 n[i], i < 3 ? "" : " expandable");
        CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
        as_trace_reader *r;
        as_trace_error err;
        CU_ASSERT_EQUAL_FATAL(as_trace_open(pk, NULL, &r, &err), 0);
        as_check_start st;
        as_check_start_of(r, &st);
        CU_ASSERT(st.possible && st.reconstructed);
        CU_ASSERT_EQUAL(st.segments, n[i]);
        CU_ASSERT_EQUAL(st.reserved, (uint64_t)n[i] * (2u << 20));
        CU_ASSERT_EQUAL(st.live, 0);
        as_trace_close(r);
        tu_rm(pk);
    }
}

/* The command: one line per snapshot, exit 0 reproduced, 3 differs, 1 bad input, 2 usage. */
static void check_cli(void)
{
    static char out[8192], err[4096], args[1024];
    snprintf(args, sizeof args, "check '%s'",
             tu_path("tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst"));
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "resnet_varbatch.pickle.zst: reproduced: all 126 "));
    CU_ASSERT_EQUAL(strchr(out, '\n') - out + 1, (long)strlen(out)); /* one line */
    /* tests/differs_snapshot.py's: its second request got a segment of its own */
    char pk[400], cmd[1000];
    snprintf(pk, sizeof pk, "%s", tu_tmp(".pickle"));
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s'", tu_path("tests/differs_snapshot.py"), pk);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(args, sizeof args, "check '%s' '%s'",
             tu_path("tests/data/torch-2.11-h200/resnet_varbatch.pickle.zst"), pk);
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ".pickle: differs at segment event 1 of 2: recorded "
                                       "segment_alloc of 2097152 B at 0x20000000"));
    snprintf(args, sizeof args, "check '%s'", tu_path("tests/data/native_v1.zst"));
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a torch snapshot"));
    CU_ASSERT_EQUAL(tu_run_allocsim("check", out, sizeof out, err, sizeof err), 2);
}

/* -p recorded from a snapshot's settings: the parsed keys, then the string's others. */
static void check_recorded_setting(void)
{
    as_meta m = {0};
    char spec[300], why[300];
    double f = -1;
    CU_ASSERT_EQUAL(as_recorded_setting(&m, spec, sizeof spec, &f, why, sizeof why), AS_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "no allocator_settings"));
    as_meta_set(&m, "allocator_config", "");
    as_meta_set(&m, "torch.max_split_size", "-1");
    as_meta_set(&m, "torch.expandable_segments", "False");
    as_meta_set(&m, "torch.garbage_collection_threshold", "0");
    as_meta_set(&m, "torch.roundup_power2_divisions", "[1:0,2:0,4:0]");
    CU_ASSERT_EQUAL(as_recorded_setting(&m, spec, sizeof spec, &f, why, sizeof why), 0);
    CU_ASSERT_STRING_EQUAL(spec, "torch");
    CU_ASSERT_EQUAL(f, 0);
    as_meta_set(&m, "allocator_config",
                "max_split_size_mb:128,large_segment_size_mb:40,"
                "per_process_memory_fraction:0.5,garbage_collection_"
                "threshold:0.6,roundup_power2_divisions:[1:4,>:8]");
    as_meta_set(&m, "torch.max_split_size", "134217728");
    as_meta_set(&m, "torch.garbage_collection_threshold", "0.6");
    as_meta_set(&m, "torch.roundup_power2_divisions", "[1:4,2:8,4:8]");
    CU_ASSERT_EQUAL(as_recorded_setting(&m, spec, sizeof spec, &f, why, sizeof why), 0);
    CU_ASSERT_STRING_EQUAL(spec, "max_split_size_mb:128,garbage_collection_threshold:0.6,"
                                 "roundup_power2_divisions:[1:4,2:8,4:8],large_segment_size_mb:40");
    CU_ASSERT_EQUAL(f, 0.5);
    as_policy_spec ps;
    CU_ASSERT_EQUAL(as_policy_spec_parse(spec, &ps, why, sizeof why), 0);
    as_policy_spec_free(&ps);
    as_meta_set(&m, "allocator_config", "backend:cudaMallocAsync");
    CU_ASSERT_EQUAL(as_recorded_setting(&m, spec, sizeof spec, &f, why, sizeof why), AS_EINVAL);
    as_meta_free(&m);
    /* The command: run -p recorded on the expandable streams snapshot runs that setting. */
    static char out[8192], err[2048], args[1024];
    snprintf(args, sizeof args, "run -f csv -p recorded '%s'",
             tu_path("tests/data/torch-2.11-h200-streams/"
                     "streams2_expandable_segments_True.pickle.zst"));
    CU_ASSERT_EQUAL(tu_run_allocsim(args, out, sizeof out, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ",expandable_segments:True,\"torch,expandable=true\","));
}

/* The cross-stream pool recordings (replay/data/h200-pool-xstream/README.md): each
 * reproduces every segment event at its recorded address and the peak reserved that
 * memory_stats() reported. Blocks of a MemPool or a graph's pool freed while in use on
 * another stream (inside use_mem_pool or outside, in a 24 MiB or a split 20 MiB segment,
 * expandable or not), a pool dropped while one is pending, empty_cache() while they are,
 * default-pool requests on another stream during a capture, the OOMs of capture_oom,
 * mp_oom and mp_oom_thread (the request that failed is not in the trace: no retry
 * released anything for it). empty_cache() called while use_mem_pool is underway
 * (mp_empty_inside; held_thread: from another thread; held_rerelease: twice, the second
 * freeing a pool released before) frees the freeable graph pools' segments and keeps the
 * default pool's: reproduced only since the importer reads a capture stream's segments as
 * the graph's and gives such a call the pools' EMPTY_CACHE alone. The two expandable
 * teardowns (mp_teardown_exp: a MemPool's destructor unmapping its two segments;
 * graph_teardown_exp: empty_cache() unmapping a dropped graph pool's segment after a default
 * one) reproduce only since the importer follows each expandable segment's life over its
 * segment_map and segment_unmap entries and reads its pool. held_two_pools (two graphs
 * with pools of their own on one capture stream) reproduces only since the importer tells
 * a capture stream's pools apart by the order in which one call released them. */
static void check_xstream(void)
{
    static const struct {
        const char *name;
        int reproduced;
    } w[] = {
        {"default_pending", 1},     {"default_pending_6m", 1}, {"default_pending_exp", 1},
        {"mp_free_in", 1},          {"mp_free_in_6m", 1},      {"mp_free_in_exp", 1},
        {"mp_free_out", 1},         {"mp_free_out_6m", 1},     {"mp_free_out_exp", 1},
        {"mp_teardown", 1},         {"mp_teardown_6m", 1},     {"mp_teardown_exp", 1},
        {"mp_empty", 1},            {"mp_empty_inside", 1},    {"graph_pending", 1},
        {"graph_pending_exp", 1},   {"graph_teardown", 1},     {"graph_teardown_exp", 1},
        {"capture_stream", 1},      {"capture_oom", 1},        {"mp_oom", 1},
        {"mp_oom_thread", 1},       {"held_two_pools", 1},     {"held_thread", 1},
        {"held_rerelease", 1},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        as_check_result r;
        char rel[200], js[200];
        snprintf(rel, sizeof rel, "replay/data/h200-pool-xstream/%s.pickle.zst", w[i].name);
        snprintf(js, sizeof js, "replay/data/h200-pool-xstream/%s.json", w[i].name);
        one(rel, stats_end(js, "reserved_bytes.all.peak"), w[i].reproduced, &r);
    }
}

CU_TestInfo test_check[] = {
    {"recorded_setting", check_recorded_setting},
    {"shared_snapshots", check_shared},
    {"midrun", check_midrun},
    {"start_reuse", check_start_reuse},
    {"cli", check_cli},
    {"state_only", check_state_only},
    {"graphs", check_graphs},
    {"pools_import", check_pools_import},
    {"xstream", check_xstream},
    CU_TEST_INFO_NULL,
};
