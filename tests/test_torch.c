/*
 * test_torch.c - the torch policy's rules on small cases worked by hand from PyTorch
 * 2.11's c10/cuda/CUDACachingAllocator.cpp (each expected number is derived in a comment),
 * plus a randomised run that checks every invariant after every operation.
 */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "knobs.h"
#include "policy.h"
#include "simdev.h"
#include "trace.h"
#include "util.h"

extern const as_policy as_policy_torch;
uint64_t as_torch_fset_steps(const void *st); /* policies/torch_fset.h */

#define MIB (1ull << 20)

enum { K_MAXSPLIT, K_ROUNDUP, K_EXPANDABLE, K_GC, K_LARGE_SEGMENT, K_MAX_NON_SPLIT, K_SYNC };

typedef struct rec {
    as_dev_action action;
    uint64_t addr, size;
} rec;

typedef struct fix {
    as_simdev *sd;
    void *st;
    as_knob_value v[8];
    rec ev[256];
    unsigned nev;
    uint64_t next_id;
} fix;

static void on_ev(void *user, const as_dev_event *e)
{
    fix *f = user;
    if (f->nev < 256)
        f->ev[f->nev++] = (rec){e->action, e->addr, e->size};
}

static void defaults(fix *f)
{
    memset(f, 0, sizeof *f);
    const as_policy *p = &as_policy_torch;
    for (size_t i = 0; i < p->n_knobs; i++) {
        f->v[i].i = p->knobs[i].def;
        f->v[i].f = p->knobs[i].fdef;
    }
}

/* Creates the device (capacity in bytes or AS_CAPACITY_NONE) and initialises the policy. */
static int start(fix *f, uint64_t capacity)
{
    as_simdev_params prm;
    as_simdev_default_params(&prm);
    prm.capacity = capacity;
    if (as_simdev_create(&prm, &f->sd))
        return -1;
    as_simdev_set_log(f->sd, on_ev, f);
    f->st = calloc(1, as_policy_torch.state_size);
    return as_policy_torch.init(f->st, f->v, as_simdev_device(f->sd));
}

static void stop(fix *f)
{
    as_check_failure cf;
    int rc = as_policy_torch.check(f->st, &cf);
    if (rc)
        fprintf(stderr, "\n  torch check: %s\n", cf.msg);
    CU_ASSERT_EQUAL(rc, 0);
    as_policy_torch.fini(f->st);
    as_simdev_counters c;
    as_simdev_counters_get(f->sd, &c);
    CU_ASSERT_EQUAL(c.reserved, 0); /* fini gave everything back */
    free(f->st);
    as_simdev_destroy(f->sd);
}

static int al(fix *f, uint64_t size, as_block *b)
{
    as_request r = {.id = f->next_id++, .size = size, .stream = 0};
    return as_policy_torch.alloc(f->st, &r, b);
}

static int fr(fix *f, const as_block *b)
{
    return as_policy_torch.free(f->st, b->handle, 0);
}

static as_policy_stats stats(fix *f)
{
    as_policy_stats s;
    as_policy_torch.stats(f->st, &s);
    return s;
}

static void torch_rounding_and_pools(void)
{
    fix f;
    defaults(&f);
    CU_ASSERT_FATAL(start(&f, AS_CAPACITY_NONE) == 0);
    as_block a, b, c, d;
    /* 100 B rounds to 512 B, small pool: one 2 MiB segment. */
    CU_ASSERT_EQUAL(al(&f, 100, &a), 0);
    CU_ASSERT_EQUAL(a.size, 512);
    CU_ASSERT_EQUAL(f.nev, 1);
    CU_ASSERT_EQUAL(f.ev[0].size, 2 * MIB);
    /* Exactly 1 MiB is still small (inclusive) and fits the same segment's tail. */
    CU_ASSERT_EQUAL(al(&f, MIB, &b), 0);
    CU_ASSERT_EQUAL(b.size, MIB);
    CU_ASSERT_EQUAL(b.addr, a.addr + 512);
    CU_ASSERT_EQUAL(f.nev, 1);
    /* 1 MiB + 1 rounds to 1 MiB + 512: large pool, 20 MiB segment (1-10 MiB band). */
    CU_ASSERT_EQUAL(al(&f, MIB + 1, &c), 0);
    CU_ASSERT_EQUAL(c.size, MIB + 512);
    CU_ASSERT_EQUAL(f.nev, 2);
    CU_ASSERT_EQUAL(f.ev[1].size, 20 * MIB);
    /* 5,000,000 B -> 5,000,192 B in the 20 MiB segment's split tail: no new segment. */
    CU_ASSERT_EQUAL(al(&f, 5000000, &d), 0);
    CU_ASSERT_EQUAL(d.size, 5000192);
    CU_ASSERT_EQUAL(d.addr, c.addr + c.size);
    CU_ASSERT_EQUAL(f.nev, 2);
    stop(&f);
}

static void torch_segment_sizes(void)
{
    fix f;
    defaults(&f);
    CU_ASSERT_FATAL(start(&f, AS_CAPACITY_NONE) == 0);
    as_block a, b;
    /* 10.5 MiB: >= 10 MiB rounds up to 2 MiB -> 12 MiB; exactly 10 MiB -> 10 MiB. */
    CU_ASSERT_EQUAL(al(&f, 10 * MIB + MIB / 2, &a), 0);
    CU_ASSERT_EQUAL(al(&f, 10 * MIB, &b), 0);
    CU_ASSERT_EQUAL(f.nev, 2);
    CU_ASSERT_EQUAL(f.ev[0].size, 12 * MIB);
    CU_ASSERT_EQUAL(f.ev[1].size, 10 * MIB);
    /* 10.5 MiB leaves 1.5 MiB in its 12 MiB segment: > 1 MiB, so it was split. */
    CU_ASSERT_EQUAL(a.size, 10 * MIB + MIB / 2);
    stop(&f);

    /* large_segment changes the 1-10 MiB band's segment. */
    defaults(&f);
    f.v[K_LARGE_SEGMENT].i = 32;
    CU_ASSERT_FATAL(start(&f, AS_CAPACITY_NONE) == 0);
    CU_ASSERT_EQUAL(al(&f, 3 * MIB, &a), 0);
    CU_ASSERT_EQUAL(f.ev[0].size, 32 * MIB);
    stop(&f);
}

static void torch_split_thresholds(void)
{
    fix f;
    defaults(&f);
    CU_ASSERT_FATAL(start(&f, AS_CAPACITY_NONE) == 0);
    as_block a, b, c;
    /* 19 MiB in a 20 MiB segment leaves exactly 1 MiB: not > 1 MiB, whole block handed out. */
    CU_ASSERT_EQUAL(al(&f, 19 * MIB, &a), 0);
    CU_ASSERT_EQUAL(a.size, 20 * MIB);
    CU_ASSERT_EQUAL(stats(&f).allocated, 20 * MIB);
    /* 18.5 MiB leaves 1.5 MiB: split. */
    CU_ASSERT_EQUAL(al(&f, 18 * MIB + MIB / 2, &b), 0);
    CU_ASSERT_EQUAL(b.size, 18 * MIB + MIB / 2);
    CU_ASSERT_EQUAL(stats(&f).free_bytes, MIB + MIB / 2);
    /* Small pool: a 512 B leftover is enough to split (2 MiB - (2 MiB - 512)). */
    CU_ASSERT_EQUAL(al(&f, MIB, &c), 0);
    as_block d, e;
    CU_ASSERT_EQUAL(al(&f, MIB - 512, &d), 0);
    CU_ASSERT_EQUAL(d.size, MIB - 512);
    CU_ASSERT_EQUAL(al(&f, 512, &e), 0);
    CU_ASSERT_EQUAL(e.addr, d.addr + d.size);
    CU_ASSERT_EQUAL(f.nev, 3); /* 20, 20, 2 MiB */
    stop(&f);
}

static void torch_tie_lower_address(void)
{
    fix f;
    defaults(&f);
    CU_ASSERT_FATAL(start(&f, AS_CAPACITY_NONE) == 0);
    as_block a, b, c;
    CU_ASSERT_EQUAL(al(&f, 12 * MIB, &a), 0);
    CU_ASSERT_EQUAL(al(&f, 12 * MIB, &b), 0);
    CU_ASSERT_NOT_EQUAL(a.addr, b.addr);
    CU_ASSERT_EQUAL(fr(&f, &a), 0);
    CU_ASSERT_EQUAL(fr(&f, &b), 0);
    /* Two free 12 MiB blocks: equal size, so the lower address wins (2.11 comparator). */
    CU_ASSERT_EQUAL(al(&f, 12 * MIB, &c), 0);
    CU_ASSERT_EQUAL(c.addr, a.addr < b.addr ? a.addr : b.addr);
    /* Best fit beats address: a 10 MiB request still takes the other 12 MiB block, not a
     * new segment. */
    as_block d;
    CU_ASSERT_EQUAL(al(&f, 10 * MIB, &d), 0);
    CU_ASSERT_EQUAL(d.addr, a.addr < b.addr ? b.addr : a.addr);
    CU_ASSERT_EQUAL(f.nev, 2);
    stop(&f);
}

static void torch_oversize_rules(void)
{
    fix f;
    defaults(&f);
    f.v[K_MAXSPLIT].set = 1;
    f.v[K_MAXSPLIT].i = 40;
    CU_ASSERT_FATAL(start(&f, AS_CAPACITY_NONE) == 0);
    as_block a, b, c, d;
    CU_ASSERT_EQUAL(al(&f, 100 * MIB, &a), 0);
    CU_ASSERT_EQUAL(fr(&f, &a), 0);
    /* A normal request (30 < 40 MiB) never takes the oversize 100 MiB block. */
    CU_ASSERT_EQUAL(al(&f, 30 * MIB, &b), 0);
    CU_ASSERT_EQUAL(f.nev, 2);
    CU_ASSERT_EQUAL(f.ev[1].size, 30 * MIB);
    /* Oversize 70 MiB: 100 >= 70 + 20, too big to take unsplit -> new 70 MiB segment. */
    CU_ASSERT_EQUAL(al(&f, 70 * MIB, &c), 0);
    CU_ASSERT_EQUAL(f.nev, 3);
    CU_ASSERT_EQUAL(f.ev[2].size, 70 * MIB);
    /* Oversize 90 MiB: 100 < 90 + 20 -> takes it whole (oversize blocks are never split). */
    CU_ASSERT_EQUAL(al(&f, 90 * MIB, &d), 0);
    CU_ASSERT_EQUAL(d.addr, a.addr);
    CU_ASSERT_EQUAL(d.size, 100 * MIB);
    CU_ASSERT_EQUAL(f.nev, 3);
    stop(&f);
}

static void torch_release_available(void)
{
    fix f;
    as_block a, b, c;
    /* One block big enough: cached 60 and 200 MiB (oversize, maxsplit 40), cap 300 MiB.
     * 100 MiB: the search fails (200 >= 100 + 20), 260 + 100 > 300, so
     * release_available_cached_blocks frees the 200 MiB block only, then 60 + 100 fits. */
    defaults(&f);
    f.v[K_MAXSPLIT].i = 40;
    CU_ASSERT_FATAL(start(&f, 300 * MIB) == 0);
    CU_ASSERT_EQUAL(al(&f, 60 * MIB, &a), 0);
    CU_ASSERT_EQUAL(al(&f, 200 * MIB, &b), 0);
    fr(&f, &a);
    fr(&f, &b);
    CU_ASSERT_EQUAL(al(&f, 100 * MIB, &c), 0);
    CU_ASSERT_EQUAL(f.nev, 4);
    CU_ASSERT_EQUAL(f.ev[2].action, AS_DEV_SEGMENT_FREE);
    CU_ASSERT_EQUAL(f.ev[2].size, 200 * MIB);
    CU_ASSERT_EQUAL(f.ev[3].action, AS_DEV_SEGMENT_ALLOC);
    CU_ASSERT_EQUAL(f.ev[3].size, 100 * MIB);
    CU_ASSERT_EQUAL(stats(&f).retries, 0); /* the full flush was not needed */
    CU_ASSERT_EQUAL(stats(&f).reserved, 160 * MIB);
    stop(&f);

    /* None big enough: cached 50 and 60 MiB, cap 150 MiB, request 80 MiB. Walk down from
     * the largest: free 60 (60 < 80), free 50 (110 >= 80), then 80 fits. */
    defaults(&f);
    f.v[K_MAXSPLIT].i = 40;
    CU_ASSERT_FATAL(start(&f, 150 * MIB) == 0);
    CU_ASSERT_EQUAL(al(&f, 50 * MIB, &a), 0);
    CU_ASSERT_EQUAL(al(&f, 60 * MIB, &b), 0);
    fr(&f, &a);
    fr(&f, &b);
    CU_ASSERT_EQUAL(al(&f, 80 * MIB, &c), 0);
    CU_ASSERT_EQUAL(f.nev, 5);
    CU_ASSERT_EQUAL(f.ev[2].size, 60 * MIB);
    CU_ASSERT_EQUAL(f.ev[3].size, 50 * MIB);
    CU_ASSERT_EQUAL(f.ev[4].size, 80 * MIB);
    CU_ASSERT_EQUAL(stats(&f).retries, 0);
    stop(&f);
}

static void torch_gc_ages(void)
{
    fix f;
    defaults(&f);
    f.v[K_GC].f = 0.5;
    /* cap 100 MiB: GC threshold 50 MiB. Each large-pool search advances the age clock. */
    CU_ASSERT_FATAL(start(&f, 100 * MIB) == 0);
    as_block a, b, c, d, e, g;
    CU_ASSERT_EQUAL(al(&f, 12 * MIB, &a), 0); /* clock 1, new 12 MiB segment */
    CU_ASSERT_EQUAL(al(&f, 14 * MIB, &b), 0); /* clock 2, new 14 */
    CU_ASSERT_EQUAL(al(&f, 16 * MIB, &c), 0); /* clock 3, new 16; reserved 42 */
    fr(&f, &a);                               /* a, b, c inserted at clock 3 */
    fr(&f, &b);
    fr(&f, &c);
    CU_ASSERT_EQUAL(al(&f, 12 * MIB, &d), 0); /* clock 4: reuses a's block */
    CU_ASSERT_EQUAL(d.addr, a.addr);
    fr(&f, &d);                               /* a's block re-inserted at clock 4 */
    CU_ASSERT_EQUAL(al(&f, 30 * MIB, &e), 0); /* clock 5: miss; 42 <= 50, no GC; new 30 */
    fr(&f, &e);                               /* inserted at clock 5; reserved 72 */
    CU_ASSERT_EQUAL(f.nev, 4);
    /* clock 6: miss; 72 > 50, target 22. Ages: 12->2, 14->3, 16->3, 30->1; mean 2.25.
     * One pass in size order frees 14 and 16 (age 3 >= 2.25), keeps 12 and 30; 30 >= 22
     * reclaimed ends GC. Then 42 + 40 <= 100: new 40 MiB segment. */
    CU_ASSERT_EQUAL(al(&f, 40 * MIB, &g), 0);
    CU_ASSERT_EQUAL(f.nev, 7);
    CU_ASSERT_EQUAL(f.ev[4].action, AS_DEV_SEGMENT_FREE);
    CU_ASSERT_EQUAL(f.ev[4].size, 14 * MIB);
    CU_ASSERT_EQUAL(f.ev[5].size, 16 * MIB);
    CU_ASSERT_EQUAL(f.ev[6].action, AS_DEV_SEGMENT_ALLOC);
    CU_ASSERT_EQUAL(f.ev[6].size, 40 * MIB);
    stop(&f);

    /* Without a capacity there is no memory fraction, so GC never runs. */
    defaults(&f);
    f.v[K_GC].f = 0.5;
    CU_ASSERT_FATAL(start(&f, AS_CAPACITY_NONE) == 0);
    CU_ASSERT_EQUAL(al(&f, 12 * MIB, &a), 0);
    fr(&f, &a);
    CU_ASSERT_EQUAL(al(&f, 40 * MIB, &b), 0);
    CU_ASSERT_EQUAL(f.nev, 2);
    stop(&f);
}

/* A device oracle that answers at the device's own capacity (cap) and counts the questions
 * whose answer differs between lo and hi: where a curve carrying [lo, hi] would fork. */
typedef struct split_count {
    uint64_t lo, hi, cap;
    unsigned splits;
} split_count;

static int count_ask(void *user, as_cap_pred pred, const void *arg, int *yes)
{
    split_count *s = user;
    s->splits += (pred(arg, s->lo) != 0) != (pred(arg, s->hi) != 0);
    *yes = pred(arg, s->cap) != 0;
    return 0;
}

static void count_pin(void *user, uint64_t *capacity)
{
    *capacity = ((split_count *)user)->cap;
}

static void torch_gc_nothing_to_collect(void)
{
    fix f;
    defaults(&f);
    f.v[K_GC].f = 0.5;
    CU_ASSERT_FATAL(start(&f, 100 * MIB) == 0);
    as_block a, b, c, d;
    CU_ASSERT_EQUAL(al(&f, 20 * MIB, &a), 0); /* new 20 MiB segment */
    CU_ASSERT_EQUAL(al(&f, 12 * MIB, &b), 0); /* new 12; reserved 32, nothing free */
    /* A curve over [60, 100] MiB: thresholds 30..50 MiB. */
    split_count sc = {.lo = 60 * MIB, .hi = 100 * MIB, .cap = 100 * MIB};
    as_cap_oracle o = {.ask = count_ask, .pin = count_pin, .user = &sc};
    as_simdev_set_oracle(f.sd, &o);
    /* Miss at reserved 32: the threshold question (32 MiB <= 0.5 x capacity) would split
     * [60, 100] (30 < 32 <= 50), but no free block can be released, so either answer leaves
     * the same state and it is not asked; 32 + 12 = 44 <= 60 fits everywhere. */
    CU_ASSERT_EQUAL(al(&f, 12 * MIB, &c), 0);
    CU_ASSERT_EQUAL(sc.splits, 0);
    CU_ASSERT_EQUAL(f.nev, 3);
    fr(&f, &c); /* c's 12 MiB segment is free and whole: collectable */
    /* Miss at reserved 44 (12 < 14): 30 < 44 <= 50 splits it, and now it is asked; at 100
     * MiB the threshold 50 >= 44, no collection; 44 + 14 = 58 <= 60 fits everywhere. */
    CU_ASSERT_EQUAL(al(&f, 14 * MIB, &d), 0);
    CU_ASSERT_EQUAL(sc.splits, 1);
    CU_ASSERT_EQUAL(f.nev, 4);
    CU_ASSERT_EQUAL(f.ev[3].action, AS_DEV_SEGMENT_ALLOC);
    CU_ASSERT_EQUAL(f.ev[3].size, 14 * MIB);
    as_simdev_set_oracle(f.sd, NULL);
    stop(&f);
}

static void torch_retry_no_research(void)
{
    fix f;
    defaults(&f);
    f.v[K_SYNC].i = 1; /* PyTorch's event sync in the full flush */
    CU_ASSERT_FATAL(start(&f, 20 * MIB) == 0);
    as_block a, b, c;
    /* One 20 MiB segment: a = 5 MiB, b = 14 MiB takes the rest whole (1 MiB leftover). */
    CU_ASSERT_EQUAL(al(&f, 5 * MIB, &a), 0);
    CU_ASSERT_EQUAL(al(&f, 14 * MIB, &b), 0);
    CU_ASSERT_EQUAL(b.size, 15 * MIB);
    /* a is freed with a pending stream use: not reusable yet. */
    CU_ASSERT_EQUAL(as_policy_torch.free(f.st, a.handle, AS_FREE_PENDING), 0);
    CU_ASSERT_EQUAL(stats(&f).allocated, 20 * MIB); /* pending blocks count until FREE */
    /* 5 MiB: no free block; 20 + 20 > cap; the full flush syncs the event so a becomes
     * free, but its segment is split and stays, and PyTorch does not search again:
     * cudaMalloc is retried and fails. OOM, although a now fits. */
    CU_ASSERT_EQUAL(al(&f, 5 * MIB, &c), AS_POLICY_OOM);
    CU_ASSERT_EQUAL(stats(&f).retries, 1);
    CU_ASSERT_EQUAL(f.nev, 1);
    /* The trace's own completion of a arrives later: already done, accepted. */
    CU_ASSERT_EQUAL(as_policy_torch.free(f.st, a.handle, AS_FREE_COMPLETE), 0);
    /* An immediate retry succeeds in a's place. */
    CU_ASSERT_EQUAL(al(&f, 5 * MIB, &c), 0);
    CU_ASSERT_EQUAL(c.addr, a.addr);
    /* A genuine double free is still an error. */
    CU_ASSERT_EQUAL(as_policy_torch.free(f.st, a.handle, AS_FREE_COMPLETE), AS_EINVAL);
    stop(&f);

    /* Without sync_frees (the default) a pending block waits for its FREE: same OOM, and
     * the block is still pending afterwards. */
    defaults(&f);
    CU_ASSERT_FATAL(start(&f, 20 * MIB) == 0);
    CU_ASSERT_EQUAL(al(&f, 5 * MIB, &a), 0);
    CU_ASSERT_EQUAL(al(&f, 14 * MIB, &b), 0);
    CU_ASSERT_EQUAL(as_policy_torch.free(f.st, a.handle, AS_FREE_PENDING), 0);
    CU_ASSERT_EQUAL(al(&f, 5 * MIB, &c), AS_POLICY_OOM);
    CU_ASSERT_EQUAL(as_policy_torch.empty_cache(f.st), 0);
    CU_ASSERT_EQUAL(al(&f, 5 * MIB, &c), AS_POLICY_OOM);
    CU_ASSERT_EQUAL(as_policy_torch.free(f.st, a.handle, AS_FREE_COMPLETE), 0);
    CU_ASSERT_EQUAL(al(&f, 5 * MIB, &c), 0);
    CU_ASSERT_EQUAL(c.addr, a.addr);
    stop(&f);
}

static void torch_expandable_mapping(void)
{
    fix f;
    defaults(&f);
    f.v[K_EXPANDABLE].i = 1;
    CU_ASSERT_FATAL(start(&f, AS_CAPACITY_NONE) == 0);
    as_block b[8];
    /* 8 x 16 MiB = 128 MiB in one growing segment mapped in 20 MiB pages: 7 pages,
     * 140 MiB, one segment_map per growth, blocks back to back. */
    for (int i = 0; i < 8; i++) {
        CU_ASSERT_EQUAL(al(&f, 16 * MIB, &b[i]), 0);
        if (i)
            CU_ASSERT_EQUAL(b[i].addr, b[i - 1].addr + 16 * MIB);
    }
    CU_ASSERT_EQUAL(stats(&f).reserved, 140 * MIB);
    CU_ASSERT_EQUAL(f.nev, 7);
    for (unsigned i = 0; i < f.nev; i++) {
        CU_ASSERT_EQUAL(f.ev[i].action, AS_DEV_SEGMENT_MAP);
        CU_ASSERT_EQUAL(f.ev[i].size, 20 * MIB);
    }
    /* Free the last two: 12 MiB of page 7 and page 6 partly free. empty_cache unmaps only
     * pages wholly inside free blocks: the free range is [96, 140) MiB, whole pages
     * [100, 140) -> 40 MiB unmapped. */
    fr(&f, &b[6]);
    fr(&f, &b[7]);
    CU_ASSERT_EQUAL(as_policy_torch.empty_cache(f.st), 0);
    CU_ASSERT_EQUAL(f.nev, 8);
    CU_ASSERT_EQUAL(f.ev[7].action, AS_DEV_SEGMENT_UNMAP);
    CU_ASSERT_EQUAL(f.ev[7].size, 40 * MIB);
    CU_ASSERT_EQUAL(stats(&f).reserved, 100 * MIB);
    /* 16 MiB again: the 4 MiB still mapped at 96 MiB plus one remapped page. */
    as_block c;
    CU_ASSERT_EQUAL(al(&f, 16 * MIB, &c), 0);
    CU_ASSERT_EQUAL(c.addr, b[6].addr);
    CU_ASSERT_EQUAL(f.ev[8].action, AS_DEV_SEGMENT_MAP);
    CU_ASSERT_EQUAL(f.ev[8].size, 20 * MIB);
    stop(&f);
}

static void torch_empty_cache_whole_segments(void)
{
    fix f;
    defaults(&f);
    CU_ASSERT_FATAL(start(&f, AS_CAPACITY_NONE) == 0);
    as_block a, b, c, d;
    CU_ASSERT_EQUAL(al(&f, 12 * MIB, &b), 0); /* 12 MiB segment */
    CU_ASSERT_EQUAL(al(&f, 5 * MIB, &a), 0);  /* 20 MiB segment, split */
    CU_ASSERT_EQUAL(al(&f, 100, &c), 0);      /* 2 MiB small segment */
    CU_ASSERT_EQUAL(al(&f, 6 * MIB, &d), 0);  /* from the 20 MiB segment's tail */
    fr(&f, &b);
    fr(&f, &c);
    fr(&f, &d);
    CU_ASSERT_EQUAL(as_policy_torch.empty_cache(f.st), 0);
    /* The large pool is released before the small one; the 20 MiB segment holding a
     * stays although 15 MiB of it is free. */
    CU_ASSERT_EQUAL(f.nev, 5);
    CU_ASSERT_EQUAL(f.ev[3].action, AS_DEV_SEGMENT_FREE);
    CU_ASSERT_EQUAL(f.ev[3].size, 12 * MIB);
    CU_ASSERT_EQUAL(f.ev[4].size, 2 * MIB);
    CU_ASSERT_EQUAL(stats(&f).reserved, 20 * MIB);
    CU_ASSERT_EQUAL(stats(&f).largest_free, 15 * MIB);
    fr(&f, &a);
    CU_ASSERT_EQUAL(as_policy_torch.empty_cache(f.st), 0);
    CU_ASSERT_EQUAL(stats(&f).reserved, 0);
    stop(&f);
}

static void torch_streams_kept_apart(void)
{
    fix f;
    defaults(&f);
    CU_ASSERT_FATAL(start(&f, AS_CAPACITY_NONE) == 0);
    as_block a, b;
    as_request r1 = {.id = 0, .size = 12 * MIB, .stream = 7};
    CU_ASSERT_EQUAL(as_policy_torch.alloc(f.st, &r1, &a), 0);
    fr(&f, &a);
    /* The free 12 MiB block belongs to stream 7: stream 0 gets a new segment. */
    as_request r2 = {.id = 1, .size = 12 * MIB, .stream = 0};
    CU_ASSERT_EQUAL(as_policy_torch.alloc(f.st, &r2, &b), 0);
    CU_ASSERT_NOT_EQUAL(a.addr, b.addr);
    CU_ASSERT_EQUAL(f.nev, 2);
    stop(&f);
}

/* A private pool (a CUDA graph's, a MemPool's) has its own block pools: its free block
 * serves neither the default pool nor another private pool on the same stream, and
 * empty_cache() leaves its whole free segments cached while the pool lives (PyTorch
 * releases a private pool's blocks only once the pool is freeable, use_count 0). */
static void torch_private_pools_apart(void)
{
    fix f;
    defaults(&f);
    CU_ASSERT_FATAL(start(&f, AS_CAPACITY_NONE) == 0);
    as_block a, b, c, d;
    as_request in1 = {.id = 0, .size = 3 * MIB, .stream = 0, .pool = 1};
    CU_ASSERT_EQUAL(as_policy_torch.alloc(f.st, &in1, &a), 0); /* 20 MiB segment, pool 1 */
    fr(&f, &a);
    as_request out = {.id = 1, .size = 3 * MIB, .stream = 0};
    CU_ASSERT_EQUAL(as_policy_torch.alloc(f.st, &out, &b), 0); /* not from pool 1: anew */
    as_request in2 = {.id = 2, .size = 3 * MIB, .stream = 0, .pool = 2};
    CU_ASSERT_EQUAL(as_policy_torch.alloc(f.st, &in2, &c), 0); /* pool 2: anew */
    as_request again = {.id = 3, .size = 3 * MIB, .stream = 0, .pool = 1};
    CU_ASSERT_EQUAL(as_policy_torch.alloc(f.st, &again, &d), 0); /* pool 1's free block */
    CU_ASSERT_EQUAL(d.addr, a.addr);
    CU_ASSERT_NOT_EQUAL(b.addr, a.addr);
    CU_ASSERT_EQUAL(stats(&f).reserved, 60 * MIB);
    fr(&f, &b);
    fr(&f, &c);
    fr(&f, &d);
    /* Only the default pool's 20 MiB goes back: pools 1 and 2 keep theirs. */
    CU_ASSERT_EQUAL(as_policy_torch.empty_cache(f.st), 0);
    CU_ASSERT_EQUAL(stats(&f).reserved, 40 * MIB);
    CU_ASSERT_EQUAL(f.ev[f.nev - 1].action, AS_DEV_SEGMENT_FREE);
    CU_ASSERT_EQUAL(f.ev[f.nev - 1].addr, b.addr);
    /* A stream value that cannot share the key with a pool number is refused. */
    as_request bad = {.id = 4, .size = 1, .stream = 1ull << 50, .pool = 1};
    CU_ASSERT_EQUAL(as_policy_torch.alloc(f.st, &bad, &a), AS_EINVAL);
    stop(&f);
}

/* A request in a private pool is made while its capture or use_mem_pool is underway
 * (PyTorch's captures_underway is not empty), and then malloc skips its last step,
 * releasing every whole free segment and retrying cudaMalloc. Capacity 40 MiB: 12 MiB
 * held and 14 MiB cached free (requests of 10 MiB and up get a segment of their own size,
 * rounded to 2 MiB), 26 MiB reserved. 16 MiB more does not fit (42 > 40); with the 14
 * MiB segment released it would (28). */
static void torch_pool_request_no_release(void)
{
    fix f;
    defaults(&f);
    CU_ASSERT_FATAL(start(&f, 40 * MIB) == 0);
    as_block held, cached, x;
    CU_ASSERT_EQUAL(al(&f, 12 * MIB, &held), 0);
    CU_ASSERT_EQUAL(al(&f, 14 * MIB, &cached), 0);
    fr(&f, &cached);
    CU_ASSERT_EQUAL(stats(&f).reserved, 26 * MIB);
    /* In pool 1: OOM, and the default pool's cached segment stays. */
    as_request in = {.id = f.next_id++, .size = 16 * MIB, .stream = 0, .pool = 1};
    CU_ASSERT_EQUAL(as_policy_torch.alloc(f.st, &in, &x), AS_POLICY_OOM);
    CU_ASSERT_EQUAL(stats(&f).reserved, 26 * MIB);
    CU_ASSERT_EQUAL(stats(&f).retries, 0);
    CU_ASSERT_EQUAL(f.nev, 2);
    /* In the default pool: the retry gives the 14 MiB segment back, then 16 MiB fits. */
    CU_ASSERT_EQUAL(al(&f, 16 * MIB, &x), 0);
    CU_ASSERT_EQUAL(stats(&f).reserved, 28 * MIB);
    CU_ASSERT_EQUAL(stats(&f).retries, 1);
    CU_ASSERT_EQUAL(f.nev, 4);
    CU_ASSERT_EQUAL(f.ev[2].action, AS_DEV_SEGMENT_FREE);
    CU_ASSERT_EQUAL(f.ev[2].addr, cached.addr);
    fr(&f, &x);
    fr(&f, &held);
    stop(&f);
}

/* A pool's teardown (a MemPool's destructor: releasePool, then emptyCache(pool)) first
 * syncs that pool's own events (release_cached_blocks(mempool_id) calls
 * synchronize_and_free_events for the pool): replay/data/h200-pool-xstream's mp_teardown
 * recorded the pending block's free_completed under ~MemPool's frames right before the
 * pool's segment_free entries, and the default pool left as it was. With sync_frees the
 * policy completes pool 1's pending 24 MiB block there and gives its segment back; the
 * default pool's pending 30 MiB block stays pending and its segment cached. Each trace FREE
 * is then accepted. */
static void torch_empty_pool_syncs_its_frees(void)
{
    fix f;
    defaults(&f);
    f.v[K_SYNC].i = 1;
    CU_ASSERT_FATAL(start(&f, AS_CAPACITY_NONE) == 0);
    as_block x, d;
    as_request in = {.id = f.next_id++, .size = 24 * MIB, .stream = 0, .pool = 1};
    CU_ASSERT_EQUAL(as_policy_torch.alloc(f.st, &in, &x), 0);
    CU_ASSERT_EQUAL(al(&f, 30 * MIB, &d), 0);
    CU_ASSERT_EQUAL(as_policy_torch.free(f.st, x.handle, AS_FREE_PENDING), 0);
    CU_ASSERT_EQUAL(as_policy_torch.free(f.st, d.handle, AS_FREE_PENDING), 0);
    CU_ASSERT_EQUAL(as_policy_torch.empty_pool(f.st, 1), 0);
    CU_ASSERT_EQUAL(f.nev, 3);
    CU_ASSERT_EQUAL(f.ev[2].action, AS_DEV_SEGMENT_FREE);
    CU_ASSERT_EQUAL(f.ev[2].addr, x.addr);
    CU_ASSERT_EQUAL(f.ev[2].size, 24 * MIB);
    CU_ASSERT_EQUAL(stats(&f).reserved, 30 * MIB);
    CU_ASSERT_EQUAL(as_policy_torch.free(f.st, x.handle, AS_FREE_COMPLETE), 0);
    CU_ASSERT_EQUAL(as_policy_torch.free(f.st, d.handle, AS_FREE_COMPLETE), 0);
    CU_ASSERT_EQUAL(stats(&f).reserved, 30 * MIB);
    stop(&f);
}

static void torch_knob_validation(void)
{
    fix f;
    defaults(&f);
    f.v[K_MAXSPLIT].i = 10; /* below large_segment_size (20 MiB): PyTorch refuses */
    CU_ASSERT_EQUAL(start(&f, AS_CAPACITY_NONE), AS_EINVAL);
    free(f.st);
    as_simdev_destroy(f.sd);
    defaults(&f);
    f.v[K_GC].f = 1.0; /* must be inside (0, 1) */
    CU_ASSERT_EQUAL(start(&f, AS_CAPACITY_NONE), AS_EINVAL);
    free(f.st);
    as_simdev_destroy(f.sd);
    defaults(&f);
    for (int k = 0; k < AS_DIV_INTERVALS; k++)
        f.v[K_ROUNDUP].div[k] = 3; /* not a power of two */
    CU_ASSERT_EQUAL(start(&f, AS_CAPACITY_NONE), AS_EINVAL);
    free(f.st);
    as_simdev_destroy(f.sd);
    /* roundup 4: 5,000,000 B -> next quarter of [4, 8) MiB = 5 MiB. */
    defaults(&f);
    for (int k = 0; k < AS_DIV_INTERVALS; k++)
        f.v[K_ROUNDUP].div[k] = 4;
    CU_ASSERT_FATAL(start(&f, AS_CAPACITY_NONE) == 0);
    as_block a;
    CU_ASSERT_EQUAL(al(&f, 5000000, &a), 0);
    CU_ASSERT_EQUAL(a.size, 5 * MIB);
    stop(&f);
}

/* Random allocations, pending and completed frees and empty_cache under every config
 * family; check() after every operation. */
static void torch_random_invariants(void)
{
    uint64_t seed = tu_seed("torch_random_invariants");
    for (int cfg = 0; cfg < 5; cfg++) {
        fix f;
        defaults(&f);
        uint64_t cap = AS_CAPACITY_NONE;
        if (cfg == 1)
            f.v[K_MAXSPLIT].i = 24;
        if (cfg == 2 || cfg == 4)
            f.v[K_EXPANDABLE].i = 1;
        if (cfg == 3) {
            f.v[K_GC].f = 0.6;
            f.v[K_MAXSPLIT].i = 32;
            cap = 400 * MIB;
        }
        if (cfg == 4)
            cap = 300 * MIB;
        CU_ASSERT_FATAL(start(&f, cap) == 0);
        enum { N = 64 };
        as_block live[N];
        int state[N] = {0}; /* 0 empty, 1 allocated, 2 pending */
        int bad = 0;
        for (int step = 0; step < 3000 && !bad; step++) {
            uint64_t r = tu_rand(&seed);
            int slot = (int)(r % N);
            int op = (int)((r >> 8) % 16);
            if (state[slot] == 0) {
                uint64_t sz =
                    (r >> 16) % 4 == 0 ? 1 + (r >> 20) % (64 * MIB) : 1 + (r >> 20) % (3 * MIB);
                as_request rq = {.id = f.next_id++, .size = sz, .stream = (r >> 40) % 2};
                int rc = as_policy_torch.alloc(f.st, &rq, &live[slot]);
                CU_ASSERT(rc == 0 || rc == AS_POLICY_OOM);
                if (rc == 0) {
                    CU_ASSERT(live[slot].size >= sz);
                    state[slot] = 1;
                }
            } else if (op == 0) {
                CU_ASSERT_EQUAL(as_policy_torch.empty_cache(f.st), 0);
            } else if (state[slot] == 1 && op < 4) {
                CU_ASSERT_EQUAL(as_policy_torch.free(f.st, live[slot].handle, AS_FREE_PENDING), 0);
                state[slot] = 2;
            } else {
                CU_ASSERT_EQUAL(as_policy_torch.free(f.st, live[slot].handle, AS_FREE_COMPLETE), 0);
                state[slot] = 0;
            }
            as_check_failure cf;
            if (as_policy_torch.check(f.st, &cf)) {
                fprintf(stderr, "\n  cfg %d step %d: %s\n", cfg, step, cf.msg);
                CU_FAIL("invariant broken");
                bad = 1;
            }
        }
        stop(&f);
    }
}

/* A crowded bin: 99 free 512 B blocks of one stream, none of them mergeable, are one bin
 * beyond the list limit (a treap inside the free set). Best fit must still hand them out
 * lowest address first, the invariants must hold at every step, and the bin must go back
 * to a list as it empties. */
static void torch_crowded_bin(void)
{
    fix f;
    defaults(&f);
    CU_ASSERT_FATAL(start(&f, AS_CAPACITY_NONE) == 0);
    enum { N = 200 };
    static as_block b[N];
    for (int i = 0; i < N; i++)
        CU_ASSERT_EQUAL_FATAL(al(&f, 512, &b[i]), 0);
    for (int i = 1; i < N; i += 2)
        CU_ASSERT_EQUAL(fr(&f, &b[i]), 0);
    as_check_failure cf;
    CU_ASSERT_EQUAL(as_policy_torch.check(f.st, &cf), 0);
    /* The last block freed merged with the segment's tail: 2 MiB - 199 * 512 B, the
     * largest free block; the other 99 are one bin of 512 B blocks. */
    CU_ASSERT_EQUAL(stats(&f).largest_free, 2 * MIB - (N - 1) * 512);
    for (int i = 1; i < N; i += 2) {
        as_block x;
        CU_ASSERT_EQUAL(al(&f, 512, &x), 0);
        CU_ASSERT_EQUAL(x.addr, b[i].addr); /* the lowest free 512 B block */
        b[i] = x;
        int rc = as_policy_torch.check(f.st, &cf);
        if (rc)
            fprintf(stderr, "\n  torch check: %s\n", cf.msg);
        CU_ASSERT_EQUAL_FATAL(rc, 0);
    }
    for (int i = 0; i < N; i++) {
        CU_ASSERT_EQUAL(fr(&f, &b[i]), 0);
        CU_ASSERT_EQUAL_FATAL(as_policy_torch.check(f.st, &cf), 0);
    }
    CU_ASSERT_EQUAL(stats(&f).largest_free, 2 * MIB); /* all merged back */
    stop(&f);
}

/* The free sets' work (as_torch_fset_steps) over a run that makes s streams: each
 * allocation (4 KiB) on a new stream and a new peak, so stats() after each as the engine
 * reads it at every peak; then every block freed and empty_cache(). */
static uint64_t stream_steps(unsigned s)
{
    fix f;
    defaults(&f);
    CU_ASSERT_FATAL(start(&f, AS_CAPACITY_NONE) == 0);
    as_block *b = calloc(s, sizeof *b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    for (unsigned i = 0; i < s; i++) {
        as_request r = {.id = f.next_id++, .size = 4096, .stream = i + 1};
        CU_ASSERT_EQUAL(as_policy_torch.alloc(f.st, &r, &b[i]), 0);
        CU_ASSERT_EQUAL(stats(&f).allocated, (uint64_t)(i + 1) * 4096);
    }
    for (unsigned i = 0; i < s; i++)
        CU_ASSERT_EQUAL(fr(&f, &b[i]), 0);
    CU_ASSERT_EQUAL(as_policy_torch.empty_cache(f.st), 0);
    CU_ASSERT_EQUAL(stats(&f).reserved, 0);
    uint64_t steps = as_torch_fset_steps(f.st);
    stop(&f);
    free(b);
    return steps;
}

/* Statistics and per-event work do not grow with the number of streams (a walk over every
 * stream at each peak made 20,000 streams cost 9.5 s against bestfit's 0.01 s). Counted,
 * not timed: the free sets' out-of-line work, every slot a stream lookup probes, what the
 * hash and the max tree visit when they double, the tree's climbs at a new maximum and
 * empty_cache's whole-set walk. Each stream costs a new slot (a probe or two and its share
 * of the doublings, under 8), a few climbs of at most log2 of the tree's width (13 levels
 * for 5,000 slots) as its free blocks come and go, and a visit by the walk: at least 3 and
 * at most 64 a stream, and 4 s streams cost 4 (c + log2 s + 2) / (c + log2 s) < 5 times
 * s's (4.6 at c = 0). A walk over every slot at each new stream or peak costs s^2 / 2 in
 * all: 2,500 a stream at 5,000 streams, and 16 times for 4 s. */
static void torch_many_streams(void)
{
    enum { S = 5000 };
    uint64_t a = stream_steps(S), b = stream_steps(4 * S);
    fprintf(stderr, "\n  [free-set steps: %u streams %llu, %u streams %llu]\n", S,
            (unsigned long long)a, 4 * S, (unsigned long long)b);
    CU_ASSERT(a >= 3ull * S);  /* a probe, a climb step and a visit per stream at least */
    CU_ASSERT(a <= 64ull * S); /* no more than a few times log2 S per stream */
    CU_ASSERT(b < 5 * a);      /* linear up to the log: quadratic would be 16 times */
}

CU_TestInfo test_torch[] = {
    {"private_pools_apart", torch_private_pools_apart},
    {"rounding_and_pools", torch_rounding_and_pools},
    {"pool_request_no_release", torch_pool_request_no_release},
    {"empty_pool_syncs_its_frees", torch_empty_pool_syncs_its_frees},
    {"segment_sizes", torch_segment_sizes},
    {"split_thresholds", torch_split_thresholds},
    {"tie_lower_address", torch_tie_lower_address},
    {"oversize_rules", torch_oversize_rules},
    {"release_available", torch_release_available},
    {"gc_ages", torch_gc_ages},
    {"gc_nothing_to_collect", torch_gc_nothing_to_collect},
    {"retry_no_research", torch_retry_no_research},
    {"expandable_mapping", torch_expandable_mapping},
    {"empty_cache_whole_segments", torch_empty_cache_whole_segments},
    {"streams_kept_apart", torch_streams_kept_apart},
    {"knob_validation", torch_knob_validation},
    {"random_invariants", torch_random_invariants},
    {"crowded_bin", torch_crowded_bin},
    {"many_streams", torch_many_streams},
    CU_TEST_INFO_NULL,
};
