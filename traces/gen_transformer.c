/*
 * gen_transformer.c - training of a decoder-only (GPT-style) transformer, tensor by tensor:
 * parameters, fp32 master weights, gradients and optimiser states sized from the shape,
 * the activations each layer saves for backward (Korthikanti et al. 2022 accounting), the
 * backward pass freeing them layer by layer, gradient accumulation, activation
 * checkpointing, flash attention and DDP gradient buckets.
 *
 * Invariant: the events of one step depend only on the knobs and that step's sequence
 * length, and state is one step's saved tensors, so any number of steps streams.
 *
 * Notation: L layers, h hidden, a heads, f ffn multiple, V vocab, S = seq (the maximum,
 * sizes the positional table), b micro-batch, s this step's sequence length, T = b*s;
 * e = 2 (bf16) or 4 (fp32) bytes per activation, parameter and gradient element.
 *
 *   parameters  Pa = 4h^2 + 6h (qkv, proj, ln1)   Pm = 2f h^2 + (f+3)h (fc1, fc2, ln2)
 *               Pl = Pa + Pm    Ph = V h + 2h (tied embedding/LM head, final LN)
 *               Pp = S h (learned positions; 0 with pos_emb=0)   P = L Pl + Ph + Pp
 *   static      W = e P   M = 4P with bf16 (fp32 master), else 0
 *               O = 8P adam (exp_avg, exp_avg_sq), 4P sgd (momentum), 0 none; created
 *               lazily by the first optimizer step, as PyTorch does
 *   grads       G = e P, allocated as backward produces them in the first micro-batch of a
 *               step, accumulated in place after, freed by zero_grad(set_to_none)
 *   per layer   X = e T h (one residual-stream tensor)
 *               Z = e a b s^2 (softmax output), or 4 a b s with flash (logsumexp)
 *               D = dropout ? 2 T h + (flash ? 0 : (1+e) a b s^2) : 0 (masks, dropout out)
 *               Am = (1+2f) X + (dropout ? T h : 0)     (ln2 out, fc1 out, gelu out)
 *               A  = (7+2f) X + Z + D                   (all that a layer saves)
 *   head        I = 16 T (input ids and targets, int64)  Lg = e T V (logits)
 *               Ah = I + (L+1) X + (ckpt ? 0 : L A) + X + Lg + 4
 *                    (ids, x0..xL, layer saves, final LN out, logits, fp32 loss)
 *   backward    Zb = e a b s^2, or 4 a b s with flash (grad of the scores / flash delta)
 *               MLP op outputs d_gelu, d_fc1 (f X each) and d_h1 (X);
 *               attention op outputs d_ctx, d_qkv (3X), Zb and dx (X)
 *
 * One micro-batch starting with R bytes live, F = 1 if it is the first of its step (its
 * backward allocates the gradients), rel = 1 with graph=release (0 with retain), c = ckpt:
 *   forward end     R + Ah                           (ckpt adds R + I + (L+1)X + A + X)
 *   head backward   R + Ah + Lg                                   (dlogits)
 *                   R + Ah + Lg - rel(Lg + 4) + F Gh + X          (grads, d_lnf)
 *                   R + Ah - rel(Lg + 4 + X) + F Gh + 2X          (dy; matters if V < h)
 *   layer l         B(l) = R + F (Gh + (L-1-l) Gl) + X + (rel ? I + (l+1)(X + (1-c) A)
 *                                                             : Ah)
 *                   recompute (c):   B(l) + A + 2X
 *                   MLP op:          B(l) + c A + F Gm + (2f+1) X
 *                   attention op:    B(l) + c A - (rel|c) Am + F Gl + 5X + Zb
 *   embedding       R + F G + X + (rel ? I : Ah)
 * with Gh = e Ph, Gl = e Pl, Gm = e Pm. B(l) is linear in l, so only l = 0 and l = L-1
 * matter. A micro-batch ends with R + F G (+ Ah with retain); retain frees every graph
 * of the step after the last backward. DDP (bucket > 0) allocates in the last micro-batch
 * one buffer per bucket when its first gradient is ready, in DDP's reverse order, and
 * frees them all after backward: the embedding point gains + G, earlier points the
 * buckets opened so far. The optimizer step peaks at W + M + G + O.
 *
 * The peak of requested memory is the max of these over the micro-batches of every step,
 * with R = W + M (+ O from the second step), + G after the first micro-batch, + the
 * retained graphs. Steady state, release, no checkpointing, the usual winner is the head:
 *   W + M + O + F'G + I + (L+2) X + L A + 2 Lg + 4     (F' = 1 if accum > 1)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_impl.h"

enum {
    K_LAYERS,
    K_HIDDEN,
    K_HEADS,
    K_FFN,
    K_VOCAB,
    K_SEQ,
    K_SEQ_DIST,
    K_SEQ_MIN,
    K_SEQ_ROUND,
    K_BATCH,
    K_ACCUM,
    K_GRAPH,
    K_CKPT,
    K_FLASH,
    K_DROPOUT,
    K_PREC,
    K_OPT,
    K_BUCKET,
    K_POS,
    K_STEPS,
    K_SEED,
    K_N
};

static const gen_knob knobs[K_N] = {
    [K_LAYERS] = {"layers", GEN_U64, "12", "layers", NULL, 1, 1024, "transformer blocks L"},
    [K_HIDDEN] = {"hidden", GEN_U64, "768", "elements", NULL, 1, 1 << 20, "model width h"},
    [K_HEADS] = {"heads", GEN_U64, "12", "heads", NULL, 1, 4096,
                 "attention heads a (the s^2 scores are per head)"},
    [K_FFN] = {"ffn", GEN_U64, "4", "x hidden", NULL, 1, 64, "MLP width f as a multiple of h"},
    [K_VOCAB] = {"vocab", GEN_U64, "50257", "tokens", NULL, 1, 1 << 24, "vocabulary V"},
    [K_SEQ] = {"seq", GEN_U64, "1024", "tokens", NULL, 1, 1 << 22,
               "sequence length (the maximum when it varies; sizes the position table)"},
    [K_SEQ_DIST] = {"seq_dist", GEN_ENUM, "fixed", "", "fixed|uniform", 0, 0,
                    "per-step sequence length: always seq, or uniform on [seq_min, seq] in "
                    "steps of seq_round"},
    [K_SEQ_MIN] = {"seq_min", GEN_U64, "128", "tokens", NULL, 1, 1 << 22,
                   "shortest sequence with seq_dist=uniform"},
    [K_SEQ_ROUND] = {"seq_round", GEN_U64, "64", "tokens", NULL, 1, 1 << 22,
                     "uniform lengths are multiples of this (padding buckets)"},
    [K_BATCH] = {"batch", GEN_U64, "8", "sequences", NULL, 1, 1 << 20, "micro-batch size b"},
    [K_ACCUM] = {"accum", GEN_U64, "1", "micro-batches", NULL, 1, 4096,
                 "gradient accumulation: micro-batches per optimizer step"},
    [K_GRAPH] = {"graph", GEN_ENUM, "release", "", "release|retain", 0, 0,
                 "release: backward frees each micro-batch's saved tensors; retain: graphs "
                 "are kept (retain_graph=True, or one backward on a summed loss) until the "
                 "step ends"},
    [K_CKPT] = {"ckpt", GEN_BOOL, "0", "", NULL, 0, 0,
                "activation checkpointing: keep only layer inputs, recompute one layer at a "
                "time in backward"},
    [K_FLASH] = {"flash", GEN_BOOL, "0", "", NULL, 0, 0,
                 "flash attention: no a*b*s^2 scores, a 4*a*b*s logsumexp instead"},
    [K_DROPOUT] = {"dropout", GEN_BOOL, "0", "", NULL, 0, 0,
                   "dropout on (1-byte masks, and the dropped attention probabilities)"},
    [K_PREC] = {"precision", GEN_ENUM, "bf16", "", "bf16|fp32", 0, 0,
                "bf16: 2-byte params, grads and activations plus fp32 master weights; "
                "fp32: 4 bytes, no master copy"},
    [K_OPT] = {"optimizer", GEN_ENUM, "adam", "", "adam|sgd|none", 0, 0,
               "optimizer state: 2 fp32 moments (adam), 1 fp32 momentum (sgd), none"},
    [K_BUCKET] = {"bucket", GEN_SIZE, "0", "bytes", NULL, 0, 1e15,
                  "DDP gradient bucket size (e.g. 25M); 0 = single GPU, no buckets"},
    [K_POS] = {"pos_emb", GEN_BOOL, "1", "", NULL, 0, 0,
               "learned position embeddings (seq x h); 0 for rotary (no parameters)"},
    [K_STEPS] = {"steps", GEN_U64, "10", "steps", NULL, 1, 1e12, "optimizer steps"},
    [K_SEED] = {"seed", GEN_U64, "1", "", NULL, 0, 18446744073709551615.0,
                "PRNG seed (sequence lengths)"},
};

/* Parameter tensors of a layer, in registration order. */
enum {
    P_LN1W,
    P_LN1B,
    P_QKVW,
    P_QKVB,
    P_PROJW,
    P_PROJB,
    P_LN2W,
    P_LN2B,
    P_FC1W,
    P_FC1B,
    P_FC2W,
    P_FC2B,
    P_PER_LAYER
};

/* What one layer saves for backward. */
typedef struct layer_act {
    gen_tensor ln1, qkv, z, amask, adrop, ctx, pmask, h1, ln2, fc1, gelu, mmask;
} layer_act;

/* One micro-batch's graph. */
typedef struct graph {
    gen_tensor ids, tgt, lnf, logits, loss;
    gen_tensor *x;    /* L + 1 */
    layer_act *layer; /* L */
} graph;

typedef struct tf {
    uint64_t L, h, a, f, V, S, b, k, steps, seq_min, seq_round, bucket;
    int dist, retain, ckpt, flash, dropout, opt, pos;
    uint64_t e; /* bytes per element */
    gen_rng rng;
    uint64_t np;     /* parameter tensors */
    uint64_t *numel; /* per parameter tensor */
    gen_tensor *param, *master, *grad, *m1, *m2;
    /* gradient production order (DDP bucket order) and buckets */
    uint64_t *order;     /* order[i] = parameter index */
    uint64_t *bucket_of; /* per parameter index: its bucket */
    int *bucket_first;   /* per parameter index: 1 if it opens its bucket */
    uint64_t *bucket_size, nb;
    gen_tensor *bk;
    graph *g; /* k graphs (retain keeps them all) */
    uint64_t step;
    int inited;
} tf;

static uint64_t pidx_emb(const tf *t)
{
    (void)t;
    return 0;
}
static uint64_t pidx_pos(const tf *t)
{
    (void)t;
    return 1;
}
static uint64_t pidx_layer(const tf *t, uint64_t l, int w)
{
    return (t->pos ? 2 : 1) + l * P_PER_LAYER + (uint64_t)w;
}
static uint64_t pidx_lnf(const tf *t, int w)
{
    return pidx_layer(t, t->L, 0) + (uint64_t)w;
}

/* The parameters' sizes, the order backward produces their gradients in, and the DDP
 * buckets that follow that order (t's arrays allocated). */
static void tf_params(tf *t)
{
    uint64_t L = t->L, h = t->h, f = t->f;
    t->numel[pidx_emb(t)] = t->V * h;
    if (t->pos)
        t->numel[pidx_pos(t)] = t->S * h;
    for (uint64_t l = 0; l < L; l++) {
        static const int ln[] = {P_LN1W, P_LN1B, P_LN2W, P_LN2B};
        for (int i = 0; i < 4; i++)
            t->numel[pidx_layer(t, l, ln[i])] = h;
        t->numel[pidx_layer(t, l, P_QKVW)] = 3 * h * h;
        t->numel[pidx_layer(t, l, P_QKVB)] = 3 * h;
        t->numel[pidx_layer(t, l, P_PROJW)] = h * h;
        t->numel[pidx_layer(t, l, P_PROJB)] = h;
        t->numel[pidx_layer(t, l, P_FC1W)] = f * h * h;
        t->numel[pidx_layer(t, l, P_FC1B)] = f * h;
        t->numel[pidx_layer(t, l, P_FC2W)] = f * h * h;
        t->numel[pidx_layer(t, l, P_FC2B)] = h;
    }
    t->numel[pidx_lnf(t, 0)] = h;
    t->numel[pidx_lnf(t, 1)] = h;
    /* Backward produces gradients in this order; DDP buckets follow it. */
    uint64_t n = 0;
    t->order[n++] = pidx_emb(t);
    t->order[n++] = pidx_lnf(t, 0);
    t->order[n++] = pidx_lnf(t, 1);
    for (uint64_t l = L; l-- > 0;) {
        static const int mlp_then_attn[] = {P_FC2W,  P_FC2B,  P_FC1W, P_FC1B, P_LN2W, P_LN2B,
                                            P_PROJW, P_PROJB, P_QKVW, P_QKVB, P_LN1W, P_LN1B};
        for (int i = 0; i < P_PER_LAYER; i++)
            t->order[n++] = pidx_layer(t, l, mlp_then_attn[i]);
    }
    if (t->pos)
        t->order[n++] = pidx_pos(t);
    if (t->bucket) {
        uint64_t cur = 0;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t p = t->order[i];
            if (cur == 0)
                t->bucket_first[p] = 1;
            t->bucket_of[p] = t->nb;
            t->bucket_size[t->nb] += t->e * t->numel[p];
            cur += t->e * t->numel[p];
            if (cur >= t->bucket) {
                t->nb++;
                cur = 0;
            }
        }
        if (cur)
            t->nb++;
    }
}

static int tf_init(as_gen *gg, void *st, const gen_val *v, as_trace_error *err)
{
    (void)gg;
    tf *t = st;
    t->L = v[K_LAYERS].u, t->h = v[K_HIDDEN].u, t->a = v[K_HEADS].u, t->f = v[K_FFN].u;
    t->V = v[K_VOCAB].u, t->S = v[K_SEQ].u, t->b = v[K_BATCH].u, t->k = v[K_ACCUM].u;
    t->steps = v[K_STEPS].u, t->seq_min = v[K_SEQ_MIN].u, t->seq_round = v[K_SEQ_ROUND].u;
    t->bucket = v[K_BUCKET].u, t->dist = (int)v[K_SEQ_DIST].u;
    t->retain = v[K_GRAPH].u == 1, t->ckpt = (int)v[K_CKPT].u, t->flash = (int)v[K_FLASH].u;
    t->dropout = (int)v[K_DROPOUT].u, t->opt = (int)v[K_OPT].u, t->pos = (int)v[K_POS].u;
    t->e = v[K_PREC].u == 0 ? 2 : 4;
    gen_rng_seed(&t->rng, v[K_SEED].u);
    if (t->dist == 1 && t->seq_min > t->S) {
        snprintf(err->msg, sizeof err->msg, "transformer: seq_min (%llu) > seq (%llu)",
                 (unsigned long long)t->seq_min, (unsigned long long)t->S);
        return AS_EUSAGE;
    }
    /* The largest tensors: scores, logits, fc1 output, fc1 weight, embedding, bucket. */
    double de = (double)t->e, dT = (double)t->b * t->S, dh = (double)t->h, df = (double)t->f;
    double big = fmax(de * t->a * t->b * (double)t->S * t->S, de * dT * t->V);
    big = fmax(big, fmax(de * df * dT * dh, de * df * dh * dh));
    big = fmax(big, fmax(de * (double)t->V * dh, (double)t->bucket));
    if (big > (double)AS_MAX_ALLOC_SIZE) {
        snprintf(err->msg, sizeof err->msg,
                 "transformer: a tensor of %.3g bytes exceeds the 256 TiB request limit", big);
        return AS_EUSAGE;
    }
    uint64_t L = t->L;
    t->np = (t->pos ? 2 : 1) + L * P_PER_LAYER + 2;
    t->numel = calloc(t->np, sizeof *t->numel);
    t->param = calloc(t->np, sizeof *t->param);
    t->master = calloc(t->np, sizeof *t->master);
    t->grad = calloc(t->np, sizeof *t->grad);
    t->m1 = calloc(t->np, sizeof *t->m1);
    t->m2 = calloc(t->np, sizeof *t->m2);
    t->order = calloc(t->np, sizeof *t->order);
    t->bucket_of = calloc(t->np, sizeof *t->bucket_of);
    t->bucket_first = calloc(t->np, sizeof *t->bucket_first);
    t->bucket_size = calloc(t->np, sizeof *t->bucket_size);
    t->bk = calloc(t->np, sizeof *t->bk);
    t->g = calloc(t->k, sizeof *t->g);
    if (!t->numel || !t->param || !t->master || !t->grad || !t->m1 || !t->m2 || !t->order ||
        !t->bucket_of || !t->bucket_first || !t->bucket_size || !t->bk || !t->g)
        return AS_ENOMEM;
    for (uint64_t j = 0; j < t->k; j++) {
        t->g[j].x = calloc(L + 1, sizeof *t->g[j].x);
        t->g[j].layer = calloc(L, sizeof *t->g[j].layer);
        if (!t->g[j].x || !t->g[j].layer)
            return AS_ENOMEM;
    }
    tf_params(t);
    return 0;
}

/* ---- pieces of a step ------------------------------------------------------------- */

static void grad_ready(as_gen *gg, tf *t, uint64_t p, int first, int last)
{
    if (first)
        t->grad[p] = gen_t(gg, t->e * t->numel[p]);
    if (last && t->bucket && t->bucket_first[p]) {
        uint64_t b = t->bucket_of[p];
        t->bk[b] = gen_t(gg, t->bucket_size[b]);
    }
}

static void layer_forward(as_gen *gg, tf *t, graph *g, uint64_t l, uint64_t s)
{
    uint64_t e = t->e, T = t->b * s, h = t->h, X = e * T * h, abss = t->a * t->b * s * s;
    layer_act *A = &g->layer[l];
    A->ln1 = gen_t(gg, X);
    A->qkv = gen_t(gg, 3 * X);
    A->z = gen_t(gg, t->flash ? 4 * t->a * t->b * s : e * abss);
    if (t->dropout && !t->flash) {
        A->amask = gen_t(gg, abss);
        A->adrop = gen_t(gg, e * abss);
    }
    A->ctx = gen_t(gg, X);
    gen_tensor proj = gen_t(gg, X);
    if (t->dropout)
        A->pmask = gen_t(gg, T * h);
    A->h1 = gen_t(gg, X);
    gen_tfree(gg, &proj);
    A->ln2 = gen_t(gg, X);
    A->fc1 = gen_t(gg, t->f * X);
    A->gelu = gen_t(gg, t->f * X);
    gen_tensor fc2 = gen_t(gg, X);
    if (t->dropout)
        A->mmask = gen_t(gg, T * h);
    g->x[l + 1] = gen_t(gg, X);
    gen_tfree(gg, &fc2);
}

static void free_mlp_saves(as_gen *gg, layer_act *A)
{
    gen_tfree(gg, &A->ln2);
    gen_tfree(gg, &A->fc1);
    gen_tfree(gg, &A->gelu);
    gen_tfree(gg, &A->mmask);
}

static void free_attn_saves(as_gen *gg, layer_act *A)
{
    gen_tfree(gg, &A->ln1);
    gen_tfree(gg, &A->qkv);
    gen_tfree(gg, &A->z);
    gen_tfree(gg, &A->amask);
    gen_tfree(gg, &A->adrop);
    gen_tfree(gg, &A->ctx);
    gen_tfree(gg, &A->pmask);
    gen_tfree(gg, &A->h1);
}

static void forward(as_gen *gg, tf *t, graph *g, uint64_t s)
{
    uint64_t T = t->b * s, X = t->e * T * t->h;
    g->ids = gen_t(gg, 8 * T);
    g->tgt = gen_t(gg, 8 * T);
    g->x[0] = gen_t(gg, X);
    for (uint64_t l = 0; l < t->L; l++) {
        layer_forward(gg, t, g, l, s);
        if (t->ckpt) { /* no_grad forward: only the layer's output survives */
            free_mlp_saves(gg, &g->layer[l]);
            free_attn_saves(gg, &g->layer[l]);
        }
    }
    g->lnf = gen_t(gg, X);
    g->logits = gen_t(gg, t->e * T * t->V);
    g->loss = gen_t(gg, 4);
}

/* Backward of one micro-batch. first: allocate the gradients; last: DDP buckets. */
static void backward(as_gen *gg, tf *t, graph *g, uint64_t s, int first, int last)
{
    uint64_t e = t->e, T = t->b * s, h = t->h, X = e * T * h, f = t->f;
    int rel = !t->retain;
    gen_tensor dlogits = gen_t(gg, e * T * t->V);
    if (rel) {
        gen_tfree(gg, &g->loss);
        gen_tfree(gg, &g->logits);
    }
    grad_ready(gg, t, pidx_emb(t), first, last);
    grad_ready(gg, t, pidx_lnf(t, 0), first, last);
    grad_ready(gg, t, pidx_lnf(t, 1), first, last);
    gen_tensor dlnf = gen_t(gg, X);
    gen_tfree(gg, &dlogits);
    if (rel)
        gen_tfree(gg, &g->lnf);
    gen_tensor dy = gen_t(gg, X);
    gen_tfree(gg, &dlnf);
    if (rel)
        gen_tfree(gg, &g->x[t->L]);
    for (uint64_t l = t->L; l-- > 0;) {
        layer_act *A = &g->layer[l];
        if (t->ckpt) { /* recompute this layer with grad; its output copy is dropped */
            gen_tensor xl1 = g->x[l + 1];
            layer_forward(gg, t, g, l, s);
            gen_tfree(gg, &g->x[l + 1]);
            g->x[l + 1] = xl1;
        }
        /* MLP */
        static const int mlp[] = {P_FC2W, P_FC2B, P_FC1W, P_FC1B, P_LN2W, P_LN2B};
        for (int i = 0; i < 6; i++)
            grad_ready(gg, t, pidx_layer(t, l, mlp[i]), first, last);
        gen_tensor dgelu = gen_t(gg, f * X), dfc1 = gen_t(gg, f * X), dh1 = gen_t(gg, X);
        gen_tfree(gg, &dgelu);
        gen_tfree(gg, &dfc1);
        if (rel || t->ckpt)
            free_mlp_saves(gg, A);
        gen_tfree(gg, &dy);
        /* attention */
        static const int attn[] = {P_PROJW, P_PROJB, P_QKVW, P_QKVB, P_LN1W, P_LN1B};
        for (int i = 0; i < 6; i++)
            grad_ready(gg, t, pidx_layer(t, l, attn[i]), first, last);
        uint64_t zb = t->flash ? 4 * t->a * t->b * s : e * t->a * t->b * s * s;
        gen_tensor dctx = gen_t(gg, X), dsc = gen_t(gg, zb), dqkv = gen_t(gg, 3 * X);
        dy = gen_t(gg, X); /* dx: the next (lower) layer's dy */
        gen_tfree(gg, &dctx);
        gen_tfree(gg, &dsc);
        gen_tfree(gg, &dqkv);
        if (rel || t->ckpt)
            free_attn_saves(gg, A);
        gen_tfree(gg, &dh1);
        if (rel)
            gen_tfree(gg, &g->x[l]);
    }
    if (t->pos)
        grad_ready(gg, t, pidx_pos(t), first, last);
    gen_tfree(gg, &dy);
    if (rel) {
        gen_tfree(gg, &g->ids);
        gen_tfree(gg, &g->tgt);
    }
    if (last)
        for (uint64_t b = 0; b < t->nb; b++)
            gen_tfree(gg, &t->bk[b]);
}

static void free_graph(as_gen *gg, tf *t, graph *g)
{
    gen_tfree(gg, &g->ids);
    gen_tfree(gg, &g->tgt);
    for (uint64_t l = 0; l <= t->L; l++)
        gen_tfree(gg, &g->x[l]);
    for (uint64_t l = 0; l < t->L; l++) {
        free_mlp_saves(gg, &g->layer[l]);
        free_attn_saves(gg, &g->layer[l]);
    }
    gen_tfree(gg, &g->lnf);
    gen_tfree(gg, &g->logits);
    gen_tfree(gg, &g->loss);
}

static uint64_t draw_seq(tf *t)
{
    if (t->dist == 0)
        return t->S;
    uint64_t r = t->seq_round, lo = (t->seq_min + r - 1) / r, hi = t->S / r;
    if (hi < lo) /* no multiple of seq_round in range: use the bounds as they are */
        return t->seq_min + gen_rng_below(&t->rng, t->S - t->seq_min + 1);
    return (lo + gen_rng_below(&t->rng, hi - lo + 1)) * r;
}

static int tf_refill(as_gen *gg, void *st)
{
    tf *t = st;
    if (!t->inited) { /* model.to(device), then the fp32 master copy */
        uint64_t P = 0;
        for (uint64_t p = 0; p < t->np; p++)
            P += t->numel[p];
        gen_mark(gg, "init tensors=%llu params=%llu", (unsigned long long)t->np,
                 (unsigned long long)P);
        for (uint64_t p = 0; p < t->np; p++)
            t->param[p] = gen_t(gg, t->e * t->numel[p]);
        if (t->e == 2)
            for (uint64_t p = 0; p < t->np; p++)
                t->master[p] = gen_t(gg, 4 * t->numel[p]);
        t->inited = 1;
        return 0;
    }
    if (t->step == t->steps)
        return AS_TRACE_EOF;
    uint64_t s = draw_seq(t);
    gen_mark(gg, "step=%llu seq=%llu", (unsigned long long)t->step, (unsigned long long)s);
    for (uint64_t j = 0; j < t->k; j++) {
        forward(gg, t, &t->g[j], s);
        backward(gg, t, &t->g[j], s, j == 0, j == t->k - 1);
    }
    if (t->retain)
        for (uint64_t j = 0; j < t->k; j++)
            free_graph(gg, t, &t->g[j]);
    if (t->step == 0 && t->opt != 2) /* optimizer state is created by the first step() */
        for (uint64_t p = 0; p < t->np; p++) {
            t->m1[p] = gen_t(gg, 4 * t->numel[p]);
            if (t->opt == 0)
                t->m2[p] = gen_t(gg, 4 * t->numel[p]);
        }
    for (uint64_t p = 0; p < t->np; p++) /* zero_grad(set_to_none=True) */
        gen_tfree(gg, &t->grad[p]);
    t->step++;
    return 0;
}

static void tf_fini(void *st)
{
    tf *t = st;
    free(t->numel);
    free(t->param);
    free(t->master);
    free(t->grad);
    free(t->m1);
    free(t->m2);
    free(t->order);
    free(t->bucket_of);
    free(t->bucket_first);
    free(t->bucket_size);
    free(t->bk);
    if (t->g)
        for (uint64_t j = 0; j < t->k; j++) {
            free(t->g[j].x);
            free(t->g[j].layer);
        }
    free(t->g);
}

const gen_kind as_gen_transformer = {
    .name = "transformer",
    .summary = "decoder-only transformer training (params, grads, Adam, activations)",
    .text =
        "GPT-style training, tensor by tensor. Notation: L layers, h hidden, a heads, f ffn,\n"
        "V vocab, S = seq, b batch, s this step's length, T = b*s, e = 2 (bf16) or 4 (fp32).\n"
        "  P  = L(Pa+Pm) + Vh + 2h + Sh   Pa = 4h^2+6h   Pm = 2fh^2+(f+3)h  (Sh: pos_emb=1)\n"
        "  W = eP params, M = 4P fp32 master (bf16 only), G = eP grads,\n"
        "  O = 8P adam / 4P sgd / 0, created by the first optimizer step\n"
        "  X = eTh   Z = e*a*b*s^2 (flash: 4*a*b*s)   A = (7+2f)X + Z + D per layer\n"
        "  D = dropout ? 2Th + (flash ? 0 : (1+e)*a*b*s^2) : 0\n"
        "  I = 16T (ids, targets)  Lg = eTV (logits)  Ah = I + (L+1)X + (ckpt?0:L*A) + X + Lg + 4\n"
        "Peak requested = max over the micro-batches of every step of the points below,\n"
        "with R = bytes live when the micro-batch starts (W + M, + O from the second step,\n"
        "+ G after the first micro-batch, + earlier retained graphs), F = 1 in the first\n"
        "micro-batch of a step (it allocates the gradients), rel = 1 for graph=release,\n"
        "c = ckpt, Gh = e(Vh+2h), Gl = e(Pa+Pm), Gm = e*Pm, Zb = Z (flash: 4abs),\n"
        "Am = (1+2f)X (+Th with dropout):\n"
        "  forward end    R + Ah          (ckpt also: R + I + (L+2)X + A)\n"
        "  head backward  R + Ah + Lg;  R + Ah + Lg - rel(Lg+4) + F*Gh + X;\n"
        "                 R + Ah - rel(Lg+4+X) + F*Gh + 2X\n"
        "  layer l, at l = 0 and l = L-1 (linear in l in between), with\n"
        "    B = R + F(Gh + (L-1-l)Gl) + X + (rel ? I + (l+1)(X + (1-c)A) : Ah):\n"
        "    recompute (ckpt) B + A + 2X;  MLP B + cA + F*Gm + (2f+1)X;\n"
        "    attention B + cA - (rel|c)Am + F*Gl + 5X + Zb\n"
        "  embedding      R + F*G + X + (rel ? I : Ah)\n"
        "  optimizer      W + M + G + O\n"
        "After a micro-batch R grows by F*G (+ Ah with retain). bucket>0 (DDP) adds, in\n"
        "the last micro-batch, + G at the embedding point and at most G before it (the\n"
        "buckets opened so far; exactly G from the head on with one bucket >= G).\n"
        "Steady state, release, no ckpt, the head backward usually wins:\n"
        "  W + M + O + (accum>1 ? G : 0) + I + (L+2)X + L*A + 2Lg + 4\n"
        "Each step starts with MARK \"step=N seq=S\".\n",
    .knobs = knobs,
    .nknobs = K_N,
    .state_size = sizeof(tf),
    .init = tf_init,
    .refill = tf_refill,
    .fini = tf_fini,
};
