/*
 * gen_kvcache.c - LLM inference serving: requests arrive (Poisson, per decode step) with
 * prompt and output lengths from distributions, are admitted up to a batch limit, prefill,
 * then decode one token per step until done. The KV cache grows either by concatenation
 * (HF DynamicCache / torch.cat: every step each layer's K and V are copied into a tensor
 * one token longer, and the old one freed: the fragmenting way) or in fixed blocks of
 * `block` tokens (paged attention, allocated through the caching allocator). Each step
 * also allocates its activation workspace and the sampling logits, freed at its end.
 *
 * Invariant: state is the running requests (each holds 2L tensors, or its blocks) and a
 * count of waiting ones, so memory follows the live set, never the trace length.
 * Request lengths come from their own PRNG stream, in admission order, so changing the
 * arrival rate or the batch limit reshuffles timing, not the requests themselves.
 *
 * Sizes: kv = kv_heads * head_dim * e bytes per token per layer for K (the same for V).
 *   concat: request with n tokens holds 2 L tensors of n kv bytes
 *   paged:  ceil(n / block) blocks of block * 2 L kv bytes
 *   step workspace (tokens t = prefill tokens + decoding requests): t * (2h + 2f) * e,
 *   as two tensors (attention/hidden t*2h*e and MLP t*2f*e), and logits b * V * 4
 *   for the b requests sampled.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_impl.h"

enum {
    K_MODE,
    K_LAYERS,
    K_KVH,
    K_HDIM,
    K_HIDDEN,
    K_FFN,
    K_VOCAB,
    K_DTYPE,
    K_BLOCK,
    K_RATE,
    K_REQS,
    K_PDIST,
    K_PMEAN,
    K_PMAX,
    K_ODIST,
    K_OMEAN,
    K_OMAX,
    K_MAXB,
    K_STEPUS,
    K_MARK,
    K_SEED,
    K_N
};

static const gen_knob knobs[K_N] = {
    [K_MODE] = {"cache", GEN_ENUM, "concat", "", "concat|paged", 0, 0,
                "KV growth: concat (new tensor one token longer each step, copy, free the "
                "old) or paged (fixed blocks)"},
    [K_LAYERS] = {"layers", GEN_U64, "32", "layers", NULL, 1, 1024, "transformer layers L"},
    [K_KVH] = {"kv_heads", GEN_U64, "8", "heads", NULL, 1, 1024,
               "key/value heads (GQA: fewer than the query heads)"},
    [K_HDIM] = {"head_dim", GEN_U64, "128", "elements", NULL, 1, 4096, "per-head width"},
    [K_HIDDEN] = {"hidden", GEN_U64, "4096", "elements", NULL, 1, 1 << 20, "model width h"},
    [K_FFN] = {"ffn", GEN_U64, "14336", "elements", NULL, 1, 1 << 22, "MLP width f"},
    [K_VOCAB] = {"vocab", GEN_U64, "128256", "tokens", NULL, 1, 1 << 24, "vocabulary V"},
    [K_DTYPE] = {"dtype_bytes", GEN_U64, "2", "bytes", NULL, 1, 8,
                 "bytes per element e of cache and activations"},
    [K_BLOCK] = {"block", GEN_U64, "16", "tokens", NULL, 1, 1 << 20, "paged: tokens per KV block"},
    [K_RATE] = {"rate", GEN_F64, "0.5", "requests/step", NULL, 0.000001, 1e6,
                "mean arrivals per decode step (Poisson)"},
    [K_REQS] = {"requests", GEN_U64, "200", "requests", NULL, 1, 1e12,
                "requests in the trace; it ends when the last one finishes"},
    [K_PDIST] = {"prompt_dist", GEN_ENUM, "exp", "", "exp|uniform|fixed", 0, 0,
                 "prompt lengths: exponential, uniform on [1, 2*mean-1], or fixed"},
    [K_PMEAN] = {"prompt_mean", GEN_F64, "512", "tokens", NULL, 1, 1e9, "mean prompt length"},
    [K_PMAX] = {"prompt_max", GEN_U64, "4096", "tokens", NULL, 1, 1e9,
                "prompt lengths are clipped to this"},
    [K_ODIST] = {"output_dist", GEN_ENUM, "exp", "", "exp|uniform|fixed", 0, 0,
                 "output lengths, as prompt_dist"},
    [K_OMEAN] = {"output_mean", GEN_F64, "256", "tokens", NULL, 1, 1e9, "mean output length"},
    [K_OMAX] = {"output_max", GEN_U64, "2048", "tokens", NULL, 1, 1e9,
                "output lengths are clipped to this"},
    [K_MAXB] = {"max_batch", GEN_U64, "32", "requests", NULL, 1, 1 << 20,
                "requests running at once; later arrivals wait (FIFO)"},
    [K_STEPUS] = {"step_us", GEN_U64, "30000", "us", NULL, 0, 1e12,
                  "time stamp step between decode steps (0: no times)"},
    [K_MARK] = {"mark_every", GEN_U64, "0", "steps", NULL, 0, 1e12,
                "a MARK every N decode steps; 0 = none"},
    [K_SEED] = {"seed", GEN_U64, "1", "", NULL, 0, 18446744073709551615.0, "PRNG seed"},
};

typedef struct req {
    uint64_t prompt, out; /* lengths */
    uint64_t len, made;   /* tokens in cache, tokens generated */
    gen_tensor *kv;       /* concat: 2L tensors */
    gen_tensor *blk;      /* paged: blocks */
    uint64_t nblk, capblk;
} req;

typedef struct kvc {
    int paged, pdist, odist;
    uint64_t L, kv, h, f, V, e, block, reqs, pmax, omax, maxb, step_us, mark_every;
    double rate, pmean, omean;
    gen_rng rng, lens; /* arrivals; request lengths */
    uint64_t arrived, finished, step;
    req *run; /* running, up to maxb */
    uint64_t nrun;
    uint64_t wn; /* waiting requests: their lengths are drawn when they are admitted */
} kvc;

static int kv_init(as_gen *g, void *st, const gen_val *v, as_trace_error *err)
{
    (void)g;
    kvc *k = st;
    k->paged = v[K_MODE].u == 1;
    k->L = v[K_LAYERS].u;
    k->e = v[K_DTYPE].u;
    k->kv = v[K_KVH].u * v[K_HDIM].u * k->e;
    k->h = v[K_HIDDEN].u, k->f = v[K_FFN].u, k->V = v[K_VOCAB].u;
    k->block = v[K_BLOCK].u, k->rate = v[K_RATE].d, k->reqs = v[K_REQS].u;
    k->pdist = (int)v[K_PDIST].u, k->pmean = v[K_PMEAN].d, k->pmax = v[K_PMAX].u;
    k->odist = (int)v[K_ODIST].u, k->omean = v[K_OMEAN].d, k->omax = v[K_OMAX].u;
    k->maxb = v[K_MAXB].u, k->step_us = v[K_STEPUS].u, k->mark_every = v[K_MARK].u;
    gen_rng_seed(&k->rng, v[K_SEED].u);
    gen_rng_seed(&k->lens, v[K_SEED].u ^ 0x6C656E6774687321ull);
    if (k->pmax >= (1ull << 32) || k->omax >= (1ull << 32)) {
        snprintf(err->msg, sizeof err->msg, "kvcache: prompt_max and output_max must be < 2^32");
        return AS_EUSAGE;
    }
    /* the largest tensors: a cache tensor or block, a full step's workspace, the logits */
    double biggest = (double)(k->pmax + k->omax) * k->kv * (k->paged ? 2.0 * k->L : 1.0);
    biggest = fmax(biggest, (double)k->maxb * (k->pmax + 1) * 2.0 * fmax(k->h, k->f) * k->e);
    biggest = fmax(biggest, (double)k->maxb * k->V * 4.0);
    if (biggest > (double)AS_MAX_ALLOC_SIZE) {
        snprintf(err->msg, sizeof err->msg,
                 "kvcache: a tensor would exceed 256 TiB (cache, workspace or logits)");
        return AS_EUSAGE;
    }
    k->run = calloc(k->maxb, sizeof *k->run);
    return k->run ? 0 : AS_ENOMEM;
}

static uint64_t draw_len(kvc *k, int dist, double mean, uint64_t max)
{
    double x;
    if (dist == 2)
        x = mean;
    else if (dist == 1)
        x = 1 + (double)gen_rng_below(&k->lens, (uint64_t)fmax(1, 2 * mean - 1));
    else
        x = ceil(gen_rng_exp(&k->lens, mean));
    uint64_t n = x < 1 ? 1 : (uint64_t)x;
    return n > max ? max : n;
}

/* Grows a request's cache to hold n tokens. */
static int grow(as_gen *g, kvc *k, req *r, uint64_t n)
{
    if (!k->paged) {
        for (uint64_t i = 0; i < 2 * k->L; i++) {
            gen_tensor nt = gen_t(g, n * k->kv); /* torch.cat: the new tensor, then... */
            gen_tfree(g, &r->kv[i]);             /* ...the old one goes */
            r->kv[i] = nt;
        }
    } else {
        uint64_t need = (n + k->block - 1) / k->block;
        if (need > r->capblk) {
            uint64_t nc = r->capblk ? r->capblk * 2 : 8;
            while (nc < need)
                nc *= 2;
            gen_tensor *nb = realloc(r->blk, nc * sizeof *nb);
            if (!nb)
                return AS_ENOMEM;
            r->blk = nb;
            r->capblk = nc;
        }
        while (r->nblk < need)
            r->blk[r->nblk++] = gen_t(g, k->block * 2 * k->L * k->kv);
    }
    r->len = n;
    return 0;
}

static void release(as_gen *g, kvc *k, req *r)
{
    if (r->kv)
        for (uint64_t i = 0; i < 2 * k->L; i++)
            gen_tfree(g, &r->kv[i]);
    for (uint64_t i = 0; i < r->nblk; i++)
        gen_tfree(g, &r->blk[i]);
    free(r->kv);
    free(r->blk);
    memset(r, 0, sizeof *r);
}

static int kv_refill(as_gen *g, void *st)
{
    kvc *k = st;
    if (k->finished == k->reqs)
        return AS_TRACE_EOF;
    if (k->step_us)
        gen_set_time(g, (int64_t)(k->step * k->step_us));
    if (k->mark_every && k->step % k->mark_every == 0)
        gen_mark(g, "step=%llu running=%llu waiting=%llu", (unsigned long long)k->step,
                 (unsigned long long)k->nrun, (unsigned long long)k->wn);
    /* arrivals */
    uint64_t n = gen_rng_poisson(&k->rng, k->rate);
    if (k->arrived == 0 && n == 0)
        n = 1; /* do not open the trace with idle steps */
    for (uint64_t i = 0; i < n && k->arrived < k->reqs; i++, k->arrived++)
        k->wn++;
    /* admission and prefill */
    uint64_t tokens = 0, sampled = 0;
    while (k->wn && k->nrun < k->maxb) {
        k->wn--;
        req *r = &k->run[k->nrun++];
        memset(r, 0, sizeof *r);
        r->prompt = draw_len(k, k->pdist, k->pmean, k->pmax);
        r->out = draw_len(k, k->odist, k->omean, k->omax);
        if (!k->paged && !(r->kv = calloc(2 * k->L, sizeof *r->kv)))
            return AS_ENOMEM;
        tokens += r->prompt;
    }
    /* this step's activations: prefill tokens plus one per decoding request */
    for (uint64_t i = 0; i < k->nrun; i++)
        if (k->run[i].len)
            tokens++;
    sampled = k->nrun;
    gen_tensor hid = {0, 0}, mlp = {0, 0}, logits = {0, 0};
    if (tokens) {
        hid = gen_t(g, tokens * 2 * k->h * k->e);
        mlp = gen_t(g, tokens * 2 * k->f * k->e);
    }
    for (uint64_t i = 0; i < k->nrun; i++) {
        req *r = &k->run[i];
        int rc = grow(g, k, r, r->len ? r->len + 1 : r->prompt);
        if (rc)
            return rc;
    }
    if (sampled)
        logits = gen_t(g, sampled * k->V * 4);
    gen_tfree(g, &mlp);
    gen_tfree(g, &hid);
    gen_tfree(g, &logits);
    /* each running request produced a token; finished ones leave */
    for (uint64_t i = 0; i < k->nrun;) {
        req *r = &k->run[i];
        if (++r->made >= r->out) {
            release(g, k, r);
            k->run[i] = k->run[--k->nrun];
            k->finished++;
        } else {
            i++;
        }
    }
    k->step++;
    return 0;
}

static void kv_fini(void *st)
{
    kvc *k = st;
    if (k->run)
        for (uint64_t i = 0; i < k->nrun; i++) {
            free(k->run[i].kv);
            free(k->run[i].blk);
        }
    free(k->run);
}

const gen_kind as_gen_kvcache = {
    .name = "kvcache",
    .summary = "LLM inference serving: arriving requests, KV cache by concat or in blocks",
    .text = "Requests arrive (Poisson, `rate` per decode step) with prompt and output\n"
            "lengths drawn from their distributions, wait FIFO for one of `max_batch`\n"
            "slots, prefill, then decode one token per step. Per token per layer K and V\n"
            "take kv = kv_heads*head_dim*dtype_bytes bytes each.\n"
            "  cache=concat: each step every layer's K and V are re-allocated one token\n"
            "    longer (allocate new, copy, free old), as torch.cat does: 2L allocations\n"
            "    and frees per running request per step, sizes that never repeat.\n"
            "  cache=paged: blocks of block*2L*kv bytes, one more each `block` tokens,\n"
            "    all freed when the request finishes.\n"
            "Each step also holds tokens*2h*e and tokens*2f*e of activations and\n"
            "running*V*4 of logits. Peak KV at a moment: sum over running requests of\n"
            "2L*kv*n (concat; +2L*kv*(n+1) transient during a copy) or\n"
            "ceil(n/block)*block*2L*kv (paged).\n",
    .knobs = knobs,
    .nknobs = K_N,
    .state_size = sizeof(kvc),
    .init = kv_init,
    .refill = kv_refill,
    .fini = kv_fini,
};
