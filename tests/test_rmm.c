/*
 * test_rmm.c - the RMM log importer: the committed sample against an independent parse,
 * columns in any order, every error with its line and byte offset, lenient counting,
 * midnight wrap, the cnmem-era header, bounded memory, and a lossless round trip through
 * the native and text formats.
 */
#include <CUnit/CUnit.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "engine.h"
#include "gen.h"
#include "policy.h"
#include "trace.h"
#include "util.h"

#define SAMPLE "traces/samples/rmm_cudf_join.csv"

typedef struct evrec {
    as_event ev;
    char label[AS_MAX_LABEL + 1];
} evrec;

/* Reads every event of path; returns the count (or -1), events in *out (malloc'd). */
static long read_all(const char *path, int lenient, evrec **out, as_trace_error *errout,
                     uint64_t *warnings)
{
    as_reader_opts o = {.lenient = lenient};
    as_trace_reader *r;
    as_trace_error err;
    *out = NULL;
    if (as_trace_open(path, &o, &r, &err) != 0) {
        if (errout)
            *errout = err;
        return -1;
    }
    size_t n = 0, cap = 256;
    evrec *v = malloc(cap * sizeof *v);
    as_event ev;
    int rc;
    while ((rc = as_trace_next(r, &ev)) == 0) {
        if (n == cap)
            v = realloc(v, (cap *= 2) * sizeof *v);
        v[n].ev = ev;
        v[n].label[0] = 0;
        if (ev.op == AS_OP_MARK && ev.label)
            snprintf(v[n].label, sizeof v[n].label, "%s", ev.label);
        v[n].ev.label = NULL;
        n++;
    }
    if (warnings)
        *warnings = as_trace_reader_warnings(r);
    if (rc != AS_TRACE_EOF) {
        if (errout)
            *errout = *as_trace_reader_error(r);
        as_trace_close(r);
        free(v);
        return -1;
    }
    as_trace_close(r);
    *out = v;
    return (long)n;
}

static int same_events(const evrec *a, const evrec *b, long n)
{
    for (long i = 0; i < n; i++)
        if (a[i].ev.op != b[i].ev.op || a[i].ev.id != b[i].ev.id || a[i].ev.size != b[i].ev.size ||
            a[i].ev.stream != b[i].ev.stream || a[i].ev.time_us != b[i].ev.time_us ||
            strcmp(a[i].label, b[i].label) != 0) {
            fprintf(stderr, "  event %ld differs\n", i);
            return 0;
        }
    return 1;
}

/* The committed sample, checked against a plain sscanf parse of the same file. */
static void rmm_sample_matches_plain_parse(void)
{
    FILE *f = fopen(tu_path(SAMPLE), "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[512];
    uint64_t ptrs[4096], sizes[4096];
    int nlive = 0;
    uint64_t allocs = 0, frees = 0, fails = 0, live = 0, peak = 0, on_stream = 0;
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
    while (fgets(line, sizeof line, f)) {
        unsigned long long th, p, sz;
        char act[32], ptr[32], stream[32];
        int hh, mm;
        double ss;
        CU_ASSERT_EQUAL_FATAL(sscanf(line, "%llu,%d:%d:%lf,%31[^,],%31[^,],%llu,%31s", &th, &hh,
                                     &mm, &ss, act, ptr, &sz, stream),
                              8);
        if (strcmp(act, "allocate failure") == 0) {
            fails++;
            continue;
        }
        p = strtoull(ptr, NULL, 16);
        if (strcmp(act, "allocate") == 0) {
            CU_ASSERT_FATAL(nlive < 4096);
            ptrs[nlive] = p, sizes[nlive++] = sz;
            allocs++;
            live += sz;
            peak = live > peak ? live : peak;
            on_stream += strcmp(stream, "0x0") != 0;
        } else {
            int i = 0;
            while (i < nlive && ptrs[i] != p)
                i++;
            CU_ASSERT_FATAL(i < nlive);
            live -= sizes[i];
            ptrs[i] = ptrs[nlive - 1], sizes[i] = sizes[nlive - 1], nlive--;
            frees++;
        }
    }
    fclose(f);

    evrec *v;
    as_trace_error err;
    long n = read_all(tu_path(SAMPLE), 0, &v, &err, NULL);
    CU_ASSERT_EQUAL_FATAL(n, (long)(allocs + frees + fails));
    uint64_t a = 0, fr = 0, mk = 0, l2 = 0, pk = 0, st = 0;
    int ordinal = 1, monotone = 1;
    for (long i = 0; i < n; i++) {
        const as_event *e = &v[i].ev;
        if (i && e->time_us < v[i - 1].ev.time_us)
            monotone = 0;
        if (e->op == AS_OP_ALLOC) {
            ordinal &= e->id == a;
            a++;
            l2 += e->size;
            pk = l2 > pk ? l2 : pk;
            st += e->stream == 0x55d0c1e3a2f0ull;
        } else if (e->op == AS_OP_FREE) {
            fr++;
            l2 -= e->size;
        } else if (e->op == AS_OP_MARK) {
            mk++;
            CU_ASSERT_PTR_NOT_NULL(strstr(v[i].label, "allocate failure"));
        }
    }
    CU_ASSERT(ordinal);
    CU_ASSERT(monotone);
    CU_ASSERT_EQUAL(a, allocs);
    CU_ASSERT_EQUAL(fr, frees);
    CU_ASSERT_EQUAL(mk, fails);
    CU_ASSERT_EQUAL(mk, 2);
    CU_ASSERT_EQUAL(pk, peak);
    CU_ASSERT_EQUAL(st, on_stream);
    CU_ASSERT_EQUAL(l2, 0);
    /* first row: 14:03:27.118339 -> microseconds within the day */
    CU_ASSERT_EQUAL(v[0].ev.time_us, (14 * 3600 + 3 * 60 + 27) * 1000000ll + 118339);
    free(v);
}

/* The reader's metadata after EOF has the failure count. */
static void rmm_meta_counts(void)
{
    as_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(tu_path(SAMPLE), NULL, &r, NULL), 0);
    CU_ASSERT_EQUAL(as_trace_reader_format(r), AS_FMT_RMM_CSV);
    as_event ev;
    while (as_trace_next(r, &ev) == 0)
        ;
    const char *f = as_meta_get(as_trace_reader_meta(r), "rmm.allocate_failures");
    CU_ASSERT_PTR_NOT_NULL(f);
    if (f)
        CU_ASSERT_STRING_EQUAL(f, "2");
    CU_ASSERT_STRING_EQUAL(as_meta_get(as_trace_reader_meta(r), "source"), "rmm-csv");
    as_trace_close(r);
}

static const char canon[] = "Thread,Time,Action,Pointer,Size,Stream\n"
                            "11,10:00:00.000001,allocate,0x7f0000000000,1000,0x0\n"
                            "12,10:00:00.000002,allocate,0x7f0000001000,2000,0x5500\n"
                            "11,10:00:00.000003,free,0x7f0000000000,1000,0x0\n"
                            "12,10:00:00.000004,allocate failure,(nil),99999999999,0x5500\n"
                            "11,10:00:00.000005,allocate,0x7f0000000000,3000,0x0\n"
                            "12,10:00:00.000006,free,0x7f0000001000,2000,0x5500\n";

static void rmm_columns_any_order(void)
{
    static const char shuffled[] =
        "Stream,Size,Pointer,Extra,Action,Time,Thread\r\n"
        "0x0,1000,0x7f0000000000,a,allocate,10:00:00.000001,11\r\n"
        "0x5500,2000,0x7f0000001000,b,allocate,10:00:00.000002,12\r\n"
        "0x0,1000,0x7f0000000000,c,free,10:00:00.000003,11\r\n"
        "0x5500,99999999999,(nil),d,allocate failure,10:00:00.000004,12\r\n"
        "\r\n"
        "0x0,3000,0x7f0000000000,e,allocate,10:00:00.000005,11\r\n"
        "0x5500,2000,0x7f0000001000,f,free,10:00:00.000006,12\r\n";
    evrec *a, *b;
    const char *p1 = tu_write_tmp(".csv", canon), *p2 = tu_write_tmp(".csv", shuffled);
    long na = read_all(p1, 0, &a, NULL, NULL), nb = read_all(p2, 0, &b, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(na, 6);
    CU_ASSERT_EQUAL_FATAL(nb, 6);
    CU_ASSERT(same_events(a, b, 6));
    /* the re-used address is a new allocation, id 2; the free on line 7 frees id 1 */
    CU_ASSERT_EQUAL(a[4].ev.op, AS_OP_ALLOC);
    CU_ASSERT_EQUAL(a[4].ev.id, 2);
    CU_ASSERT_EQUAL(a[4].ev.size, 3000);
    CU_ASSERT_EQUAL(a[5].ev.op, AS_OP_FREE);
    CU_ASSERT_EQUAL(a[5].ev.id, 1);
    CU_ASSERT_EQUAL(a[5].ev.stream, 0x5500);
    CU_ASSERT_EQUAL(a[1].ev.stream, 0x5500);
    CU_ASSERT_EQUAL(a[3].ev.op, AS_OP_MARK);
    free(a);
    free(b);
    tu_rm(p1);
    tu_rm(p2);
}

/* Each bad row: the error names its line and the byte offset of the bad field (found
 * here by searching the text), in strict mode; lenient skips and counts it. */
static void rmm_errors_name_line_and_offset(void)
{
    /* lenient: how many rows count as bad; a free or allocate that is accepted with a
     * warning leaves the last row (free of 0x7f0000000000, 3000 bytes) wrong too */
    static const struct {
        const char *row, *bad_field, *msg;
        uint64_t lenient_warnings;
    } cases[] = {
        {"11,10:00:01.000000,alocate,0x7f0000009000,10,0x0\n", "alocate", "unknown action", 1},
        {"11,10:00:01.000000,allocate,0x7g0000009000,10,0x0\n", "0x7g", "bad pointer", 1},
        {"11,10:00:01.000000,allocate,0x7f0000009000,ten,0x0\n", "ten", "bad size", 1},
        {"11,10:00:01.000000,allocate,0x7f0000009000,10,stream\n", "stream", "bad stream", 1},
        {"11,10:61:01.000000,allocate,0x7f0000009000,10,0x0\n", "10:61", "bad time", 1},
        {"11,10:00:01.000000,free,0x7f00000ab000,10,0x0\n", "0x7f00000ab000", "not allocated", 1},
        {"11,10:00:01.000000,free,0x7f0000000000,999,0x0\n", "999,", "allocated with 3000", 2},
        {"11,10:00:01.000000,allocate,0x7f0000000000,10,0x0\n", "0x7f0000000000,10",
         "still allocated", 2},
        {"11,10:00:01.000000,allocate,0x7f0000009000,10\n", "\n", "fields", 1},
        {"11,10:00:01.000000,allocate,0x7f0000009000,0,0x0\n", "0,0x0", "allocate of 0", 1},
        /* 68 fields (split keeps 64): the count is still the real one */
        {"11,10:00:01.000000,allocate,0x7f0000009000,8,0x0,a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,"
         "r,s,t,u,v,w,x,y,z,a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u,v,w,x,y,z,a,b,c,d,e,f,g,"
         "h,i,j\n",
         "11,10:00:01", "68 fields, the header has 6", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[2048];
        /* canon leaves 0x7f0000000000 (3000 bytes) live; the bad row is line 8 */
        snprintf(text, sizeof text, "%s%s11,10:00:02.000000,free,0x7f0000000000,3000,0x0\n", canon,
                 cases[i].row);
        const char *p = tu_write_tmp(".csv", text);
        evrec *v;
        as_trace_error err;
        memset(&err, 0, sizeof err);
        long n = read_all(p, 0, &v, &err, NULL);
        CU_ASSERT_EQUAL(n, -1);
        const char *row = text + strlen(canon);
        uint64_t want_off = (uint64_t)(strstr(row, cases[i].bad_field) - text);
        if (err.line != 8 || err.offset != want_off || !strstr(err.msg, cases[i].msg) ||
            !strstr(err.msg, "line 8") || err.code >= 0)
            fprintf(stderr, "  case %zu: line %llu offset %llu (want %llu): %s\n", i,
                    (unsigned long long)err.line, (unsigned long long)err.offset,
                    (unsigned long long)want_off, err.msg);
        CU_ASSERT_EQUAL(err.line, 8);
        CU_ASSERT_EQUAL(err.offset, want_off);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, cases[i].msg));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.path, "allocsim-test-"));
        /* lenient: everything else is read, the row counted once */
        uint64_t w = 0;
        n = read_all(p, 1, &v, &err, &w);
        CU_ASSERT(n >= 7);
        CU_ASSERT_EQUAL(w, cases[i].lenient_warnings);
        free(v);
        tu_rm(p);
    }
}

static void rmm_lenient_counts_and_keeps_going(void)
{
    static const char text[] =
        "Thread,Time,Action,Pointer,Size,Stream\n"
        "1,00:00:00.000001,allocate,0x1000,100,0x0\n"
        "1,00:00:00.000002,free,0x2000,100,0x0\n"     /* unknown pointer */
        "1,00:00:00.000003,bogus,0x3000,100,0x0\n"    /* bad action */
        "1,00:00:00.000004,allocate,0x1000,200,0x0\n" /* still live: free + alloc */
        "1,00:00:00.000005,free,0x1000,200,0x0\n"
        "1,00:00:00.000006,free,(nil),0,0x0\n" /* free(nullptr): a no-op */
        "1,00:00:00.000007,allocate,0x4000,300,0x0\n";
    const char *p = tu_write_tmp(".csv", text);
    as_reader_opts o = {.lenient = 1};
    as_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(p, &o, &r, NULL), 0);
    as_event ev;
    as_op ops[8];
    uint64_t ids[8], sizes[8];
    int n = 0;
    while (n < 8 && as_trace_next(r, &ev) == 0)
        ops[n] = ev.op, ids[n] = ev.id, sizes[n++] = ev.size;
    CU_ASSERT_EQUAL(n, 5);
    /* alloc 0 (100); [implicit free 0; alloc 1 (200)]; free 1; alloc 2 (300) */
    as_op wops[] = {AS_OP_ALLOC, AS_OP_FREE, AS_OP_ALLOC, AS_OP_FREE, AS_OP_ALLOC};
    uint64_t wids[] = {0, 0, 1, 1, 2}, wsz[] = {100, 100, 200, 200, 300};
    for (int i = 0; i < 5 && i < n; i++) {
        CU_ASSERT_EQUAL(ops[i], wops[i]);
        CU_ASSERT_EQUAL(ids[i], wids[i]);
        CU_ASSERT_EQUAL(sizes[i], wsz[i]);
    }
    CU_ASSERT_EQUAL(as_trace_reader_warnings(r), 3);
    const as_meta *m = as_trace_reader_meta(r);
    CU_ASSERT_STRING_EQUAL(as_meta_get(m, "rmm.bad_rows"), "3");
    CU_ASSERT_STRING_EQUAL(as_meta_get(m, "rmm.null_pointer_rows"), "1");
    CU_ASSERT_PTR_NOT_NULL(strstr(as_meta_get(m, "rmm.first_bad_row"), "line 3"));
    as_trace_close(r);
    tu_rm(p);
}

static void rmm_midnight_wrap(void)
{
    static const char text[] = "Thread,Time,Action,Pointer,Size,Stream\n"
                               "1,23:59:59.999990,allocate,0x1000,100,0x0\n"
                               "1,23:59:59.999980,allocate,0x2000,100,0x0\n" /* reordered */
                               "1,00:00:00.000010,free,0x1000,100,0x0\n"     /* next day */
                               "1,00:00:01.5,free,0x2000,100,0x0\n";
    const char *p = tu_write_tmp(".csv", text);
    evrec *v;
    long n = read_all(p, 0, &v, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(n, 4);
    int64_t day = 86400000000ll;
    CU_ASSERT_EQUAL(v[0].ev.time_us, day - 10);
    CU_ASSERT_EQUAL(v[1].ev.time_us, day - 20); /* a small step back is not midnight */
    CU_ASSERT_EQUAL(v[2].ev.time_us, day + 10);
    CU_ASSERT_EQUAL(v[3].ev.time_us, day + 1500000);
    free(v);
    tu_rm(p);
}

static void rmm_refuses_other_csv(void)
{
    const char *p = tu_write_tmp(".csv", "Thread,Time,Verb,Address\n1,2,3,4\n");
    as_trace_reader *r = NULL;
    as_trace_error err;
    CU_ASSERT_EQUAL(as_trace_open(p, NULL, &r, &err), AS_EFORMAT);
    CU_ASSERT_PTR_NULL(r);
    tu_rm(p);
}

/* The cnmem-era log (rmm 0.x, 2019): Event Type Alloc/Free, Address, seconds in Start,
 * and 0 as a free's size. Rows like these are in rmm issue #75 era examples. */
static void rmm_cnmem_header(void)
{
    static const char text[] =
        "Event Type,Device ID,Address,Stream,Size (bytes),Free Memory,Total Memory,"
        "Current Allocs,Start,End,Elapsed,Location\n"
        "Alloc,0,0x7fae06600000,0,80,0,0,1,1.10549,1.1074,0.00191666,/x/driver.py:683\n"
        "Alloc,0,0x7fae06600200,0,4096,0,0,2,1.2,1.21,0.01,/x/driver.py:683\n"
        "Free,0,0x7fae06600000,0,0,0,0,1,1.30798,1.30921,0.00122238,/x/utils.py:678\n";
    const char *p = tu_write_tmp(".csv", text);
    evrec *v;
    as_trace_error err;
    long n = read_all(p, 0, &v, &err, NULL);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    CU_ASSERT_EQUAL(v[0].ev.op, AS_OP_ALLOC);
    CU_ASSERT_EQUAL(v[0].ev.size, 80);
    CU_ASSERT_EQUAL(v[0].ev.time_us, 1105490);
    CU_ASSERT_EQUAL(v[2].ev.op, AS_OP_FREE);
    CU_ASSERT_EQUAL(v[2].ev.id, 0);
    CU_ASSERT_EQUAL(v[2].ev.size, 80); /* filled from the allocation */
    free(v);
    tu_rm(p);
    /* two devices in one log are refused: one trace is one device */
    const char *p2 = tu_write_tmp(".csv", "Event Type,Device ID,Address,Stream,Size (bytes),Start\n"
                                          "Alloc,0,0x1000,0,80,1.0\nAlloc,1,0x2000,0,80,1.1\n");
    CU_ASSERT_EQUAL(read_all(p2, 0, &v, &err, NULL), -1);
    CU_ASSERT_EQUAL(err.line, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "device"));
    tu_rm(p2);
}

/* 400,000 rows with at most 16 live pointers: the reader's live table stays small. */
static void rmm_streaming_memory(void)
{
    const char *p = tu_tmp(".csv");
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "Thread,Time,Action,Pointer,Size,Stream\n");
    uint64_t s = 42;
    for (int i = 0; i < 200000; i++) {
        uint64_t ptr = 0x7f0000000000ull + (uint64_t)(i % 16) * 0x100000;
        unsigned sz = 256 + (unsigned)(tu_rand(&s) % 100000);
        fprintf(f, "7,01:00:00.%06d,allocate,%#" PRIx64 ",%u,0x0\n", i % 1000000, ptr, sz);
        fprintf(f, "7,01:00:00.%06d,free,%#" PRIx64 ",%u,0x0\n", i % 1000000, ptr, sz);
    }
    fclose(f);
    as_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(p, NULL, &r, NULL), 0);
    as_event ev;
    uint64_t n = 0, live;
    size_t table = 0, max_table = 0;
    while (as_trace_next(r, &ev) == 0) {
        n++;
        as_trace_reader_live(r, &live, &table);
        max_table = table > max_table ? table : max_table;
    }
    CU_ASSERT_EQUAL(n, 400000);
    CU_ASSERT(max_table < 64 * 1024);
    as_trace_close(r);
    tu_rm(p);
}

/* RMM -> native -> text -> the same events as reading the RMM log directly. */
static void rmm_round_trip_native_text(void)
{
    const char *nat = tu_tmp(".zst"), *txt = tu_tmp(".txt");
    as_trace_error err;
    uint64_t n1 = 0, n2 = 0;
    CU_ASSERT_EQUAL_FATAL(
        as_trace_convert(tu_path(SAMPLE), nat, AS_FMT_NATIVE, NULL, NULL, &n1, &err), 0);
    CU_ASSERT_EQUAL_FATAL(as_trace_convert(nat, txt, AS_FMT_TEXT, NULL, NULL, &n2, &err), 0);
    evrec *a, *b, *c;
    long na = read_all(tu_path(SAMPLE), 0, &a, NULL, NULL);
    long nb = read_all(nat, 0, &b, NULL, NULL), nc = read_all(txt, 0, &c, NULL, NULL);
    CU_ASSERT(na > 300);
    CU_ASSERT_EQUAL(na, nb);
    CU_ASSERT_EQUAL(na, nc);
    CU_ASSERT_EQUAL((uint64_t)na, n1);
    if (na == nb && na == nc) {
        CU_ASSERT(same_events(a, b, na));
        CU_ASSERT(same_events(a, c, na));
    }
    as_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(nat, NULL, &r, NULL), 0);
    CU_ASSERT_STRING_EQUAL(as_meta_get(as_trace_reader_meta(r), "source"), "rmm-csv");
    as_trace_close(r);
    free(a);
    free(b);
    free(c);
    tu_rm(nat);
    tu_rm(txt);
}

/* Runs specs x caps on a reader; results in out[] (row-major). 0 or < 0. */
static int simulate(as_trace_reader *r, as_policy_spec *specs, int nspec, const uint64_t *caps,
                    int ncap, as_run_result *out)
{
    as_engine_opts o = {.threads = 1};
    as_engine *e;
    if (as_engine_create(&o, &e) != 0)
        return -1;
    for (int i = 0; i < nspec; i++)
        for (int j = 0; j < ncap; j++)
            as_engine_add_run(e, &specs[i], caps[j]);
    as_trace_error err;
    int rc = as_engine_run(e, r, &err);
    for (unsigned k = 0; rc == 0 && k < as_engine_nruns(e); k++)
        out[k] = *as_engine_result(e, k);
    as_engine_destroy(e);
    return rc;
}

static int same_result(const as_run_result *a, const as_run_result *b)
{
    return a->completed == b->completed && a->oom_event == b->oom_event &&
           a->oom_alloc == b->oom_alloc && a->peak_requested == b->peak_requested &&
           a->peak_allocated == b->peak_allocated && a->peak_reserved == b->peak_reserved &&
           a->device_reserves == b->device_reserves && a->device_releases == b->device_releases;
}

/* The RMM log and its native copy simulate identically under bestfit and torch, with and
 * without a capacity that runs out (the log peaks at 520 MiB requested); likewise a
 * generator run directly and its native file. */
static void rmm_same_simulation_after_round_trip(void)
{
    const char *names[] = {"bestfit", "torch"};
    as_policy_spec specs[2];
    char why[256];
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL_FATAL(as_policy_spec_parse(names[i], &specs[i], why, sizeof why), 0);
    uint64_t caps[] = {AS_CAPACITY_NONE, 560ull << 20};
    const char *nat = tu_tmp(".zst");
    CU_ASSERT_EQUAL_FATAL(
        as_trace_convert(tu_path(SAMPLE), nat, AS_FMT_NATIVE, NULL, NULL, NULL, NULL), 0);
    as_run_result a[4], b[4];
    as_trace_reader *r;
    CU_ASSERT_EQUAL_FATAL(as_trace_open(tu_path(SAMPLE), NULL, &r, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(simulate(r, specs, 2, caps, 2, a), 0);
    as_trace_close(r);
    CU_ASSERT_EQUAL_FATAL(as_trace_open(nat, NULL, &r, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(simulate(r, specs, 2, caps, 2, b), 0);
    as_trace_close(r);
    int ooms = 0;
    for (int k = 0; k < 4; k++) {
        CU_ASSERT(same_result(&a[k], &b[k]));
        ooms += !a[k].completed;
    }
    CU_ASSERT(ooms > 0); /* the capped runs exercise the OOM point too */

    char *kv[] = {"layers=2",         "hidden=256", "vocab=1000", "seq=256",
                  "seq_dist=uniform", "steps=6",    "accum=2"};
    as_trace_writer *w;
    CU_ASSERT_EQUAL_FATAL(as_gen_open("transformer", 7, kv, &r, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(
        as_trace_writer_open(nat, AS_FMT_NATIVE, as_trace_reader_meta(r), &w, NULL), 0);
    CU_ASSERT_EQUAL(as_trace_copy(r, w, NULL, NULL), 0);
    CU_ASSERT_EQUAL(as_trace_writer_close(w, NULL), 0);
    as_trace_close(r);
    uint64_t caps2[] = {AS_CAPACITY_NONE, 40ull << 20};
    CU_ASSERT_EQUAL_FATAL(as_gen_open("transformer", 7, kv, &r, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(simulate(r, specs, 2, caps2, 2, a), 0);
    as_trace_close(r);
    CU_ASSERT_EQUAL_FATAL(as_trace_open(nat, NULL, &r, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(simulate(r, specs, 2, caps2, 2, b), 0);
    as_trace_close(r);
    for (int k = 0; k < 4; k++)
        CU_ASSERT(same_result(&a[k], &b[k]));
    CU_ASSERT(a[0].completed && a[0].peak_requested > 0);
    for (int i = 0; i < 2; i++)
        as_policy_spec_free(&specs[i]);
    tu_rm(nat);
}

/* Random corruptions of the sample (byte flips, deleted and duplicated spans, cut-offs):
 * never a crash or an out-of-bounds read (the suite also runs under ASan); a strict
 * failure is an error with a line number and an offset inside the input; lenient reads
 * either finish or stop with an error of the same kind. */
static void rmm_random_corruption(void)
{
    uint64_t seed = tu_seed("rmm_random_corruption");
    FILE *f = fopen(tu_path(SAMPLE), "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char orig[32768];
    size_t n0 = fread(orig, 1, sizeof orig, f);
    fclose(f);
    CU_ASSERT_FATAL(n0 > 1000 && n0 < sizeof orig);
    char *buf = malloc(2 * sizeof orig);
    int strict_errors = 0, bad_reports = 0;
    for (int iter = 0; iter < 300; iter++) {
        size_t n = n0;
        memcpy(buf, orig, n);
        int edits = 1 + (int)(tu_rand(&seed) % 4);
        for (int k = 0; k < edits && n > 40; k++) { /* a cut may leave only the header */
            size_t at = 40 + tu_rand(&seed) % (n - 40); /* keep the header */
            size_t len = 1 + tu_rand(&seed) % 24;
            switch (tu_rand(&seed) % 4) {
            case 0:
                buf[at] = (char)tu_rand(&seed);
                break;
            case 1:
                if (at + len < n) {
                    memmove(buf + at, buf + at + len, n - at - len);
                    n -= len;
                }
                break;
            case 2:
                if (at + len < n && n + len < 2 * sizeof orig) {
                    memmove(buf + at + len, buf + at, n - at);
                    n += len;
                }
                break;
            default:
                n = at;
                break;
            }
        }
        for (int lenient = 0; lenient < 2; lenient++) {
            as_reader_opts o = {.lenient = lenient};
            as_trace_reader *r;
            as_trace_error err;
            if (as_trace_open_mem(buf, n, "mutant.csv", &o, &r, &err) != 0)
                continue; /* header damaged: refused up front */
            as_event ev;
            int rc;
            while ((rc = as_trace_next(r, &ev)) == 0)
                ;
            if (rc != AS_TRACE_EOF) {
                const as_trace_error *e = as_trace_reader_error(r);
                strict_errors += !lenient;
                if (e->line == 0 || e->offset > n || e->code >= 0)
                    bad_reports++;
            }
            as_trace_close(r);
        }
    }
    free(buf);
    CU_ASSERT_EQUAL(bad_reports, 0);
    CU_ASSERT(strict_errors > 100); /* most mutations must be caught */
}

CU_TestInfo test_rmm[] = {
    {"sample_matches_plain_parse", rmm_sample_matches_plain_parse},
    {"meta_counts", rmm_meta_counts},
    {"columns_any_order", rmm_columns_any_order},
    {"errors_name_line_and_offset", rmm_errors_name_line_and_offset},
    {"lenient_counts_and_keeps_going", rmm_lenient_counts_and_keeps_going},
    {"midnight_wrap", rmm_midnight_wrap},
    {"refuses_other_csv", rmm_refuses_other_csv},
    {"cnmem_header", rmm_cnmem_header},
    {"streaming_memory", rmm_streaming_memory},
    {"round_trip_native_text", rmm_round_trip_native_text},
    {"same_simulation_after_round_trip", rmm_same_simulation_after_round_trip},
    {"random_corruption", rmm_random_corruption},
    CU_TEST_INFO_NULL,
};
