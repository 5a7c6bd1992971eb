/*
 * gen_robson.c - adversarial sequences in Robson's setting (live bytes never above M
 * units, every request 1 to n units; Knuth TAOCP vol. 1 §2.5 ex. 38-43), built for one
 * policy's placement rules so that it reserves as much as possible. The constructions and
 * why each step lands where it does are in fuzz/README.md, "Constructions"; in short, with
 * s the policy's segment in units:
 *
 * - firstfit: new segments come at lower addresses (the default chunked device grows top
 *   down), so first fit serves from the newest one. Per segment: n units (no hole fits
 *   them: a new segment), freed; p = (s-1)/2 units at its start, a 1-unit pin after it, the
 *   p freed. Holes p and s-1-p, both under n, so the next n units need a new segment: one
 *   pinned segment per live unit, M - n + 1 segments.
 * - bestfit: phases b = ceil(s/2) .. n-1. Per segment: b+1 units (larger than every hole:
 *   a new segment), 1 unit (the remainder s-b-1 is the smallest hole, ties go to the lower
 *   address: the new segment), free the b+1, b units (the b+1 hole is the only one that
 *   fits), a 1-unit pin into the exact 1-unit hole left, free the 1 unit. The phase's b
 *   blocks stay live until it ends (a freed one would take the next b); then the holes
 *   are b and s-1-b, and the next phase asks for b+1. At the end, n-unit fillers.
 * - torch (PyTorch's caching allocator, unit = 1 MiB): a request of 10 MiB or more gets a
 *   segment of its size rounded up to 2 MiB, a block is split only when more than 1 MiB
 *   would be left, and best fit breaks ties by address as bestfit does. Phases b = 7..n-3:
 *   b+3 units (a new segment of b+3 or b+4 units, nothing cached is that large), freed,
 *   b units (split off it: 3 or 4 units left), a pin of 2 (or 3, for an even b) units that
 *   takes the rest unsplit. The b blocks stay live to the end of the phase, as bestfit's.
 *   Then n-unit fillers.
 * - buddy: Robson's doubling phases j = 0..log2 n over aligned power-of-two blocks, with
 *   requests of 2^(j-1)+1 units that the buddy rounds to 2^j: each phase fills fresh
 *   memory (buddy takes consecutive addresses there), then keeps one live block in every
 *   2^(j+1)-aligned window so that no free block of the next order is left.
 * - bfc (TensorFlow's BFC): a prelude that makes its doubling regions 4, 8, 16 MiB, then
 *   doubling phases of T units in chunks of 2T - 1 that BFC gives whole; gen_robson_bfc.c
 *   says why it reaches 1036 MiB (4.05 x M) at the defaults, and no more.
 *
 * Invariant: live bytes never exceed M units and every size is 1..n units (the search's
 * setting, fuzz/fuzz_patho.c); state is the live blocks, at most M of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_impl.h"
#include "gen_robson_bfc.h"

enum { K_TARGET, K_M, K_N_, K_UNIT, K_SEGMENT, K_N };
enum { T_BESTFIT, T_FIRSTFIT, T_BUDDY, T_TORCH, T_BFC };

static const gen_knob knobs[K_N] = {
    [K_TARGET] = {"target", GEN_ENUM, "bestfit", "", "bestfit|firstfit|buddy|torch|bfc", 0, 0,
                  "the policy the sequence is built against (its default knobs)"},
    [K_M] = {"M", GEN_U64, "256", "units", NULL, 1, 1 << 20,
             "most live memory at any time (Knuth's n)"},
    [K_N_] = {"n", GEN_U64, "16", "units", NULL, 2, 1 << 20, "largest request (Knuth's m)"},
    [K_UNIT] = {"unit", GEN_SIZE, "1M", "bytes", NULL, 512, 1073741824.0,
                "bytes per unit (a multiple of 512 B, the policies' rounding)"},
    [K_SEGMENT] = {"segment", GEN_SIZE, "0", "bytes", NULL, 0, 1099511627776.0,
                   "the policy's segment: 0 = its default (bestfit/firstfit segment=20 MiB, "
                   "buddy 2^max_order = 64 MiB)"},
};

typedef struct blk {
    uint64_t id, pos, occ, req; /* buddy: position and occupancy in units */
} blk;

typedef struct robson {
    int target, done;
    uint64_t m, n, unit, s;
    uint64_t live;    /* units */
    uint64_t b, bhi;  /* bestfit: the phase; firstfit: p in b */
    unsigned j, jtop; /* buddy: the phase */
    uint64_t end;     /* buddy: units of memory used so far */
    blk *v;           /* bestfit: the phase's b blocks; buddy: live blocks by position */
    size_t nv;
    robson_bfc *bfc; /* bfc: its own state */
} robson;

static uint64_t ra(as_gen *g, robson *r, uint64_t units)
{
    r->live += units;
    return gen_alloc(g, units * r->unit, 0);
}

static void rf(as_gen *g, robson *r, uint64_t id, uint64_t units)
{
    r->live -= units;
    gen_free(g, id, units * r->unit, 0);
}

static int fail(as_trace_error *err, const char *msg, unsigned long long a, unsigned long long b)
{
    snprintf(err->msg, sizeof err->msg, "robson: ");
    size_t l = strlen(err->msg);
    snprintf(err->msg + l, sizeof err->msg - l, msg, a, b);
    err->code = AS_EUSAGE;
    return AS_EUSAGE;
}

static int rb_init(as_gen *g, void *st, const gen_val *v, as_trace_error *err)
{
    (void)g;
    robson *r = st;
    r->target = (int)v[K_TARGET].u;
    r->m = v[K_M].u, r->n = v[K_N_].u, r->unit = v[K_UNIT].u;
    uint64_t seg = v[K_SEGMENT].u ? v[K_SEGMENT].u : (r->target == T_BUDDY ? 64 : 20) << 20;
    if (r->unit % 512 || seg % r->unit)
        return fail(err,
                    "segment (%llu B) must be a multiple of unit (%llu B, itself a "
                    "multiple of 512)",
                    seg, r->unit);
    r->s = seg / r->unit;
    if (r->n > r->m || r->n * r->unit > AS_MAX_ALLOC_SIZE)
        return fail(err, "need n <= M (n=%llu, M=%llu)", r->n, r->m);
    if (r->target == T_BUDDY) {
        if ((r->unit & (r->unit - 1)) || (r->s & (r->s - 1)))
            return fail(err, "buddy: unit and segment must be powers of two (%llu, %llu units)",
                        r->unit, r->s);
        while (r->jtop < 40 && 2ull << r->jtop <= r->n && 2ull << r->jtop <= r->s)
            r->jtop++;
    } else if (r->target == T_BFC) {
        if ((2u << 20) % r->unit || r->m > 4096)
            return fail(err,
                        "bfc: needs a unit that divides 2 MiB (its first region) and M <= "
                        "4096 (its model's cost grows as M squared; unit %llu B, M %llu)",
                        r->unit, r->m);
        return gen_robson_bfc_create(r->m, r->n, r->unit, &r->bfc);
    } else if (r->target == T_TORCH) {
        if (r->unit != 1u << 20 || r->n < 10)
            return fail(err,
                        "torch: needs unit=1M (its thresholds are in MiB) and n >= 10 "
                        "(unit %llu B, n %llu)",
                        r->unit, r->n);
    } else if (r->s <= r->n || r->s > 2 * r->n) {
        return fail(err, "bestfit/firstfit: need n < segment <= 2n units (segment %llu, n %llu)",
                    r->s, r->n);
    }
    if (r->target == T_FIRSTFIT)
        r->b = (r->s - 1) / 2; /* holes p and s-1-p, both under n */
    r->bhi = r->n - 1;
    if (r->target == T_BESTFIT)
        r->b = (r->s - 1) / 2 + 1; /* b > s-1-b: the next b never fits a right hole */
    if (r->target == T_TORCH)
        r->b = 7, r->bhi = r->n - 3; /* b+3 >= 10 MiB: a segment of its own size */
    r->v = calloc(r->m + 1, sizeof *r->v);
    return r->v ? 0 : AS_ENOMEM;
}

/* One pinned segment, or the end. */
static int ff_refill(as_gen *g, robson *r)
{
    if (r->live + r->n > r->m)
        return AS_TRACE_EOF;
    uint64_t a = ra(g, r, r->n); /* no hole holds n: a new, lowest segment */
    if (r->live + 1 > r->m)
        return 0; /* the last one stays: the next call ends */
    rf(g, r, a, r->n);
    uint64_t b = ra(g, r, r->b); /* first fit: the newest segment's start */
    ra(g, r, 1);                 /* the pin, right after it */
    rf(g, r, b, r->b);
    return 0;
}

/* After a phase's last pinned segment: the phase is over, its b holes now ask for b + 1
 * (its blocks freed); after the last phase, fillers of n, a new segment each (every hole is
 * under n), until the live units would pass m. */
static int phase_end(as_gen *g, robson *r)
{
    if (r->b <= r->bhi) {
        for (size_t i = 0; i < r->nv; i++)
            rf(g, r, r->v[i].id, r->v[i].occ);
        r->nv = 0;
        r->b++;
        return 0;
    }
    if (r->live + r->n > r->m)
        return AS_TRACE_EOF;
    ra(g, r, r->n);
    return 0;
}

/* One pinned segment of phase b, the end of a phase, or the fillers. */
static int bf_refill(as_gen *g, robson *r)
{
    uint64_t b = r->b;
    if (b <= r->bhi && r->live + b + 2 <= r->m) {
        uint64_t a = ra(g, r, b + 1); /* larger than every hole: a new segment */
        uint64_t z = ra(g, r, 1);     /* its remainder, the smallest hole (ties: newest) */
        rf(g, r, a, b + 1);
        r->v[r->nv].id = ra(g, r, b); /* only the b+1 hole fits */
        r->v[r->nv++].occ = b;
        ra(g, r, 1); /* the pin, into the exact 1-unit hole */
        rf(g, r, z, 1);
        return 0;
    }
    return phase_end(g, r);
}

/* One pinned segment of phase b, the end of a phase, or the fillers. */
static int torch_refill(as_gen *g, robson *r)
{
    uint64_t b = r->b, pin = b & 1 ? 2 : 3;
    if (b <= r->bhi && r->live + b + 3 <= r->m) {
        uint64_t a = ra(g, r, b + 3); /* nothing cached holds it: a segment of b+3 or b+4 */
        rf(g, r, a, b + 3);
        r->v[r->nv].id = ra(g, r, b); /* split off that block, pin + 1 units left */
        r->v[r->nv++].occ = b;
        ra(g, r, pin); /* takes them all: 1 MiB left is not split off */
        return 0;
    }
    return phase_end(g, r);
}

/* Keeps, in every 2^k-aligned window, the live block with the smallest request. */
static void bd_thin(as_gen *g, robson *r, unsigned k)
{
    size_t w = 0, i = 0;
    while (i < r->nv) {
        uint64_t win = r->v[i].pos >> k;
        size_t keep = i, e = i;
        for (; e < r->nv && r->v[e].pos >> k == win; e++)
            if (r->v[e].req < r->v[keep].req)
                keep = e;
        for (size_t x = i; x < e; x++)
            if (x != keep)
                rf(g, r, r->v[x].id, r->v[x].req);
        r->v[w++] = r->v[keep];
        i = e;
    }
    r->nv = w;
}

/* One doubling phase. */
static int bd_refill(as_gen *g, robson *r)
{
    unsigned j = r->j;
    if (j > r->jtop)
        return AS_TRACE_EOF;
    uint64_t occ = 1ull << j, req = j ? (occ >> 1) + 1 : 1;
    uint64_t pos = (r->end + occ - 1) & ~(occ - 1); /* a free order-(j-1) block is skipped */
    while (r->live + req <= r->m && r->nv < r->m) {
        blk x = {.pos = pos, .occ = occ, .req = req};
        x.id = ra(g, r, req);
        r->v[r->nv++] = x;
        pos += occ;
    }
    r->end = pos;
    if (j < r->jtop)
        bd_thin(g, r, j + 1);
    r->j++;
    return 0;
}

static int rb_refill(as_gen *g, void *st)
{
    robson *r = st;
    switch (r->target) {
    case T_FIRSTFIT:
        return ff_refill(g, r);
    case T_BUDDY:
        return bd_refill(g, r);
    case T_TORCH:
        return torch_refill(g, r);
    case T_BFC:
        return gen_robson_bfc_refill(g, r->bfc);
    default:
        return bf_refill(g, r);
    }
}

static void rb_fini(void *st)
{
    free(((robson *)st)->v);
    gen_robson_bfc_free(((robson *)st)->bfc);
}

const gen_kind as_gen_robson = {
    .name = "robson",
    .summary = "worst cases in Robson's setting (live <= M units, requests 1..n units)",
    .text = "Adversarial sequences that make one policy reserve as much as it can while\n"
            "the live memory never exceeds M units and every request is 1 to n units\n"
            "(Knuth TAOCP vol. 1, 2.5 ex. 38-43): target=bestfit, firstfit, buddy,\n"
            "torch or bfc, built for that policy's default knobs on the default device.\n"
            "allocsim -p TARGET replays one; fuzz/README.md explains each construction.\n"
            "At M=256, n=16, unit=1M: bestfit reserves 104 segments of 20 MiB\n"
            "(8.1 x M), firstfit 241 (18.8 x M), buddy 16 of 64 MiB (4.0 x M), torch\n"
            "1068 MiB (4.2 x M), bfc 1036 MiB (4.0 x M).\n",
    .knobs = knobs,
    .nknobs = K_N,
    .state_size = sizeof(robson),
    .init = rb_init,
    .refill = rb_refill,
    .fini = rb_fini,
};
