/*
 * test_evlog.c - the snapshot importer's event log (traces/snap_events.c): what is read
 * back is what was put (by as_evlog_put or the inline as_evlog_put_fields, mixed), across
 * events that break the fixed records' assumptions and across the spill to its temporary
 * file, which leaves nothing behind.
 */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snap_events.h"
#include "trace.h"

/* A deterministic mix: ALLOCs with growing ids, FREEs and FREE_REQs of earlier ones and of
 * prehistoric blocks, MARKs, EMPTY_CACHEs, streams that change, times that go backwards or
 * are missing, and now and then an event no delta fits (written whole). */
static snap_ev make_ev(uint64_t i, uint64_t *allocs)
{
    uint64_t r = (i + 1) * 0x9E3779B97F4A7C15ull;
    r ^= r >> 29;
    snap_ev e = {.time_us = (int64_t)(i * 7) - (int64_t)(r % 50)};
    switch (r % 9) {
    case 0:
    case 1:
    case 2:
    case 3:
        e.op = AS_OP_ALLOC;
        e.id = (*allocs)++;
        e.size = r >> 20;
        e.stream = r % 5 == 0 ? r : 7;
        e.site = (uint32_t)(r % 13);
        e.addr = 0x7f0000000000ull + (r % 100000) * 512;
        break;
    case 4:
    case 5:
        e.op = (r >> 8) % 3 ? AS_OP_FREE : AS_OP_FREE_REQ;
        e.pre = (r >> 12) % 7 == 0;
        e.id = e.pre ? r % 40 : (*allocs ? (r >> 3) % *allocs : 0);
        e.pre |= !*allocs;
        e.size = r >> 30;
        e.stream = 7;
        break;
    case 6:
        e.op = AS_OP_MARK;
        e.id = r % 1000;
        break;
    case 7:
        e.op = AS_OP_EMPTY_CACHE;
        e.id = r % 3;
        e.time_us = AS_TIME_NONE;
        break;
    default: /* the odd ones: an ALLOC out of order, a time missing, extreme values */
        e.op = AS_OP_ALLOC;
        e.id = r % 2 ? UINT64_MAX : *allocs + 5;
        e.size = UINT64_MAX;
        e.stream = UINT64_MAX;
        e.time_us = r % 3 ? AS_TIME_NONE : INT64_MAX;
        e.addr = r % 2 ? 0 : UINT64_MAX;
        e.site = UINT32_MAX;
        break;
    }
    return e;
}

static int same(const snap_ev *a, const snap_ev *b)
{
    int mem = a->op <= AS_OP_FREE_REQ;
    return a->op == b->op && a->id == b->id && a->time_us == b->time_us &&
           (!mem || (a->size == b->size && a->stream == b->stream && a->pre == b->pre)) &&
           (a->op != AS_OP_ALLOC || (a->site == b->site && a->addr == b->addr));
}

static int temp_files(void)
{
    const char *d = getenv("TMPDIR");
    DIR *dir = opendir(d && *d ? d : "/tmp");
    struct dirent *de;
    int n = 0;
    if (!dir)
        return -1;
    while ((de = readdir(dir)))
        n += strncmp(de->d_name, "allocsim-events-", 16) == 0;
    closedir(dir);
    return n;
}

/* as_evlog_put, or (fields) as_evlog_put_fields, the importer's inline one */
static int put(as_evlog *g, snap_ev e, int fields)
{
    return fields ? as_evlog_put_fields(g, e.op, e.id, e.pre, e.size, e.stream, e.time_us, e.site,
                                        e.addr)
                  : as_evlog_put(g, &e);
}

static void roundtrip(int spill, uint64_t n)
{
    as_evlog *g;
    uint64_t allocs = 0, bad = 0;
    int before = temp_files();
    CU_ASSERT_EQUAL_FATAL(as_evlog_new(spill, &g), 0);
    for (uint64_t i = 0; i < n; i++) /* both ways of putting, mixed */
        CU_ASSERT_EQUAL_FATAL(put(g, make_ev(i, &allocs), i % 3 != 0), 0);
    CU_ASSERT_EQUAL(as_evlog_count(g), n);
    CU_ASSERT_EQUAL(as_evlog_spilled(g), spill && as_evlog_bytes(g) > (1u << 20));
    /* 32 bytes a record, 64 with its extension (an ALLOC out of order, a stream past the
     * table's 4096: this mix has thousands of them) */
    CU_ASSERT(as_evlog_bytes(g) >= n * 32 && as_evlog_bytes(g) <= n * 64);
    CU_ASSERT_EQUAL(temp_files(), before); /* unlinked at once */
    for (int pass = 0; pass < 3; pass++) { /* read three ways: one, many, in place */
        snap_ev e;
        uint64_t got = 0;
        allocs = 0;
        CU_ASSERT_EQUAL_FATAL(as_evlog_rewind(g), 0);
        if (pass == 0) {
            for (int rc; (rc = as_evlog_get(g, &e)) == 1; got++) {
                snap_ev want = make_ev(got, &allocs);
                bad += !same(&want, &e);
            }
        } else if (pass == 2) { /* as the hand-out: in place while it can, else one by one */
            uint64_t inplace = 0;
            for (;;) {
                as_ev_rec r;
                uint64_t stream;
                snap_ev want = make_ev(got, &allocs);
                if (as_evlog_peek_plain(g, &r)) {
                    uint64_t id = as_evlog_take_plain(g, &r, &stream);
                    bad += r.op != want.op || id != want.id || r.time != want.time_us ||
                           (want.op <= AS_OP_FREE_REQ &&
                            (r.size != want.size || stream != want.stream ||
                             !(r.flags & AS_EVF_PRE) != !want.pre)) ||
                           (want.op == AS_OP_ALLOC && (r.site != want.site || r.a != want.addr));
                    inplace++, got++;
                    continue;
                }
                size_t k;
                CU_ASSERT_EQUAL_FATAL(as_evlog_get_many(g, &e, 1, &k), 0);
                if (!k)
                    break;
                bad += !same(&want, &e);
                got++;
            }
            /* about half of this mix is plain (its streams overflow the table, its odd ALLOCs) */
            CU_ASSERT(n < 1000 || inplace > n / 3);
        } else { /* as the importer's queue takes them: runs of 1 to 300, across refills */
            static snap_ev q[300];
            size_t k = 1;
            for (size_t i = 0; i < 1u << 20; i++) {
                size_t cap = i % 3 == 0 ? 300 : i % 3 == 1 ? 1 + i % 7 : 1 + i % 256;
                CU_ASSERT_EQUAL_FATAL(as_evlog_get_many(g, q, cap, &k), 0);
                CU_ASSERT(k == cap || got + k == n);
                for (size_t j = 0; j < k; j++, got++) {
                    snap_ev want = make_ev(got, &allocs);
                    bad += !same(&want, &q[j]);
                }
                if (k < cap)
                    break;
            }
            CU_ASSERT_EQUAL(as_evlog_get(g, &e), 0);
        }
        CU_ASSERT_EQUAL(got, n);
        CU_ASSERT_EQUAL(bad, 0);
    }
    snap_ev e = {0};
    CU_ASSERT_EQUAL(as_evlog_put(g, &e), AS_EINVAL); /* no put once reading */
    CU_ASSERT_EQUAL(put(g, make_ev(0, &allocs), 1), AS_EINVAL);
    as_evlog_free(g);
}

static void evlog_memory(void)
{
    roundtrip(0, 200000);
}

static void evlog_spilled(void)
{
    roundtrip(1, 400000);
}

/* The common case, ALLOCs in order and their FREEs on a few streams: one 32-byte record
 * each, what was put. */
static void evlog_plain(void)
{
    as_evlog *g;
    CU_ASSERT_EQUAL_FATAL(as_evlog_new(1, &g), 0);
    for (uint64_t i = 0; i < 100000; i++) {
        snap_ev e = {.op = i % 2 ? AS_OP_FREE : AS_OP_ALLOC,
                     .id = i / 2,
                     .size = 512 * (i % 7 + 1),
                     .stream = i % 3 ? 0 : 0x5555aaaa0000ull + i % 5,
                     .time_us = (int64_t)i,
                     .site = (uint32_t)(i % 11),
                     .addr = i % 2 ? 0 : 0x7f0000000000ull + i * 256};
        CU_ASSERT_EQUAL_FATAL(put(g, e, i % 4 != 0), 0);
    }
    CU_ASSERT_EQUAL(as_evlog_bytes(g), 100000 * 32);
    CU_ASSERT_EQUAL_FATAL(as_evlog_rewind(g), 0);
    snap_ev e;
    uint64_t bad = 0, i = 0;
    for (; as_evlog_get(g, &e) == 1; i++)
        bad += e.op != (i % 2 ? AS_OP_FREE : AS_OP_ALLOC) || e.id != i / 2 ||
               e.size != 512 * (i % 7 + 1) || e.stream != (i % 3 ? 0 : 0x5555aaaa0000ull + i % 5) ||
               e.time_us != (int64_t)i || e.site != i % 11 || e.pool != 0 ||
               e.addr != (i % 2 ? 0 : 0x7f0000000000ull + i * 256);
    CU_ASSERT_EQUAL(i, 100000);
    CU_ASSERT_EQUAL(bad, 0);
    as_evlog_free(g);
}

static void evlog_empty(void)
{
    roundtrip(1, 0);
    roundtrip(1, 1);
}

CU_TestInfo test_evlog[] = {
    {"in memory: what was put, in order or not", evlog_memory},
    {"spilled to its temporary file, read three times (one, many, in place)", evlog_spilled},
    {"empty and one event", evlog_empty},
    {"ALLOCs in order on a few streams: 32 bytes an event", evlog_plain},
    CU_TEST_INFO_NULL,
};
