/*
 * gen_cnn.c - convolutional network training (ResNet-style: a 7x7 stem, max-pool, four
 * stages of basic or bottleneck blocks that halve H and W and double the channels, global
 * pooling and a classifier) with a batch size that changes every step, as with variable
 * batch data loaders. Forward keeps each conv's and BN's output for backward; backward
 * walks the units in reverse, allocating gradients and freeing the saved maps; the
 * optimizer (SGD momentum or Adam, state created by the first step) updates fp32 weights.
 *
 * Invariant: one step's events depend only on the knobs and that step's batch; state is
 * the model plus one step's saved maps.
 *
 * A unit is conv -> BN (-> ReLU in place) with output n*C*H*W*e bytes (e = 4, or 2 with
 * amp): it saves its conv output and its BN output, 2 maps. A block adds its residual sum
 * (1 map). Saved activation bytes are therefore about sum over units of 2 n C H W e, linear
 * in the batch n, which is why peaks follow the largest batch seen.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_impl.h"

enum {
    K_DEPTH,
    K_WIDTH,
    K_IMAGE,
    K_CLASSES,
    K_BATCH,
    K_BATCH_MIN,
    K_BATCH_DIST,
    K_AMP,
    K_OPT,
    K_WS,
    K_STEPS,
    K_SEED,
    K_N
};

static const gen_knob knobs[K_N] = {
    [K_DEPTH] = {"depth", GEN_ENUM, "50", "", "18|34|50|101", 0, 0,
                 "ResNet depth: 18/34 basic blocks, 50/101 bottlenecks"},
    [K_WIDTH] = {"width", GEN_U64, "64", "channels", NULL, 1, 1 << 16,
                 "channels of the first stage (doubles each stage)"},
    [K_IMAGE] = {"image", GEN_U64, "224", "pixels", NULL, 32, 1 << 14, "input height and width"},
    [K_CLASSES] = {"classes", GEN_U64, "1000", "classes", NULL, 1, 1 << 24, "classifier outputs"},
    [K_BATCH] = {"batch", GEN_U64, "128", "images", NULL, 1, 1 << 20,
                 "batch size (the largest, when it varies)"},
    [K_BATCH_MIN] = {"batch_min", GEN_U64, "16", "images", NULL, 1, 1 << 20,
                     "smallest batch with batch_dist=uniform"},
    [K_BATCH_DIST] = {"batch_dist", GEN_ENUM, "uniform", "", "fixed|uniform", 0, 0,
                      "per-step batch: always batch, or uniform on [batch_min, batch]"},
    [K_AMP] = {"amp", GEN_BOOL, "0", "", NULL, 0, 0,
               "autocast: 2-byte activations (weights, grads, state stay fp32)"},
    [K_OPT] = {"optimizer", GEN_ENUM, "sgd", "", "sgd|adam|none", 0, 0,
               "optimizer state per parameter: momentum (4 B), two moments (8 B), none"},
    [K_WS] = {"workspace", GEN_SIZE, "0", "bytes", NULL, 0, 1e13,
              "cuDNN workspace per convolution call, allocated and freed around it"},
    [K_STEPS] = {"steps", GEN_U64, "20", "steps", NULL, 1, 1e12, "optimizer steps"},
    [K_SEED] = {"seed", GEN_U64, "1", "", NULL, 0, 18446744073709551615.0,
                "PRNG seed (batch sizes)"},
};

/* One conv + BN unit. */
typedef struct unit {
    uint64_t cin, cout, k, hin, hout; /* square maps */
    int relu;
    int block_end;                            /* after this unit: residual add (block output) */
    int shortcut;                             /* this unit is a block's projection shortcut */
    uint64_t pw, pbn;                         /* parameters: conv weights, BN weight+bias */
    gen_tensor w, g, bn, gbn, m1, m2, n1, n2; /* weights, grads, states */
    gen_tensor conv_out, bn_out, sum;         /* saved for backward */
} unit;

typedef struct cnn {
    unit *u;
    uint64_t nu, classes, batch, batch_min, steps, ws, e, img;
    int dist, opt;
    gen_rng rng;
    gen_tensor fc_w, fc_b, fc_gw, fc_gb, fc_m[4], pooled, logits, input, stem_pool;
    uint64_t step, pool_hw, last_c;
    int inited;
} cnn;

static int add_unit(cnn *c, uint64_t cap, uint64_t cin, uint64_t cout, uint64_t k, uint64_t hin,
                    uint64_t h, int relu)
{
    if (c->nu == cap)
        return -1;
    unit *u = &c->u[c->nu++];
    memset(u, 0, sizeof *u);
    u->cin = cin, u->cout = cout, u->k = k, u->hin = hin, u->hout = h, u->relu = relu;
    u->pw = k * k * cin * cout;
    u->pbn = 2 * cout;
    return 0;
}

static int cnn_init(as_gen *g, void *st, const gen_val *v, as_trace_error *err)
{
    (void)g;
    cnn *c = st;
    static const int blocks[4][4] = {{2, 2, 2, 2}, {3, 4, 6, 3}, {3, 4, 6, 3}, {3, 4, 23, 3}};
    int depth = (int)v[K_DEPTH].u, bottleneck = depth >= 2;
    uint64_t w = v[K_WIDTH].u, img = v[K_IMAGE].u;
    c->classes = v[K_CLASSES].u, c->batch = v[K_BATCH].u, c->batch_min = v[K_BATCH_MIN].u;
    c->dist = (int)v[K_BATCH_DIST].u, c->opt = (int)v[K_OPT].u, c->ws = v[K_WS].u;
    c->steps = v[K_STEPS].u, c->e = v[K_AMP].u ? 2 : 4, c->img = img;
    gen_rng_seed(&c->rng, v[K_SEED].u);
    if (c->dist == 1 && c->batch_min > c->batch) {
        snprintf(err->msg, sizeof err->msg, "cnn: batch_min > batch");
        return AS_EUSAGE;
    }
    uint64_t cap = 1 + 4 * 23 * 4 + 16;
    c->u = calloc(cap, sizeof *c->u);
    if (!c->u)
        return AS_ENOMEM;
    uint64_t h = (img + 1) / 2; /* stem: 7x7 stride 2 */
    add_unit(c, cap, 3, w, 7, img, h, 1);
    h = (h + 1) / 2; /* max-pool stride 2 */
    c->pool_hw = h;
    uint64_t cin = w;
    for (int s = 0; s < 4; s++) {
        uint64_t mid = w << s, out = bottleneck ? mid * 4 : mid;
        for (int b = 0; b < blocks[depth][s]; b++) {
            uint64_t hin = h;
            if (b == 0 && s > 0)
                h = (h + 1) / 2;
            if (bottleneck) { /* torchvision v1.5: the stride is on the 3x3 */
                add_unit(c, cap, cin, mid, 1, hin, hin, 1);
                add_unit(c, cap, mid, mid, 3, hin, h, 1);
                add_unit(c, cap, mid, out, 1, h, h, 0);
            } else {
                add_unit(c, cap, cin, mid, 3, hin, h, 1);
                add_unit(c, cap, mid, out, 3, h, h, 0);
            }
            if (b == 0 && (cin != out || s > 0)) {
                add_unit(c, cap, cin, out, 1, hin, h, 0);
                c->u[c->nu - 1].shortcut = 1;
            }
            c->u[c->nu - 1].block_end = 1;
            cin = out;
        }
    }
    c->last_c = cin;
    /* the largest tensors: the images, a feature map or its gradient, a weight, the fc */
    double n = (double)c->batch, big = n * 3 * (double)img * img * 4;
    for (uint64_t i = 0; i < c->nu; i++) {
        const unit *u = &c->u[i];
        big = fmax(big, n * u->cout * (double)u->hout * u->hout * c->e);
        big = fmax(big, n * u->cin * (double)u->hin * u->hin * c->e);
        big = fmax(big, (double)u->pw * 4);
    }
    big = fmax(big, (double)c->last_c * c->classes * 4 + n * c->classes * 4);
    if (big > (double)AS_MAX_ALLOC_SIZE) {
        snprintf(err->msg, sizeof err->msg, "cnn: a tensor of %.3g bytes exceeds 256 TiB", big);
        return AS_EUSAGE;
    }
    return 0;
}

static uint64_t map_bytes(const cnn *c, const unit *u, uint64_t n)
{
    return n * u->cout * u->hout * u->hout * c->e;
}

static void conv_call(as_gen *g, cnn *c)
{
    if (c->ws) {
        gen_tensor ws = gen_t(g, c->ws);
        gen_tfree(g, &ws);
    }
}

static void step_forward(as_gen *g, cnn *c, uint64_t n)
{
    c->input = gen_t(g, n * 3 * c->img * c->img * 4); /* fp32 images */
    for (uint64_t i = 0; i < c->nu; i++) {
        unit *u = &c->u[i];
        conv_call(g, c);
        u->conv_out = gen_t(g, map_bytes(c, u, n));
        u->bn_out = gen_t(g, map_bytes(c, u, n)); /* ReLU runs in place on it */
        if (i == 0)                               /* max-pool after the stem */
            c->stem_pool = gen_t(g, n * u->cout * c->pool_hw * c->pool_hw * c->e);
        if (u->block_end)
            u->sum = gen_t(g, map_bytes(c, u, n)); /* residual add + ReLU */
    }
    c->pooled = gen_t(g, n * c->last_c * c->e);
    c->logits = gen_t(g, n * c->classes * 4);
}

static void grad(as_gen *g, gen_tensor *t, uint64_t bytes)
{
    if (!t->size)
        *t = gen_t(g, bytes);
}

static void step_backward(as_gen *g, cnn *c, uint64_t n)
{
    gen_tensor dlogits = gen_t(g, n * c->classes * 4);
    grad(g, &c->fc_gw, c->last_c * c->classes * 4);
    grad(g, &c->fc_gb, c->classes * 4);
    gen_tensor dy = gen_t(g, n * c->last_c * c->e);
    gen_tfree(g, &dlogits);
    gen_tfree(g, &c->logits);
    gen_tfree(g, &c->pooled);
    gen_tensor dmap = gen_t(g, map_bytes(c, &c->u[c->nu - 1], n)); /* avg-pool backward */
    gen_tfree(g, &dy);
    dy = dmap;
    for (uint64_t i = c->nu; i-- > 0;) {
        unit *u = &c->u[i];
        gen_tfree(g, &u->sum);
        gen_tensor dbn = gen_t(g, map_bytes(c, u, n));
        grad(g, &u->gbn, u->pbn * 4);
        gen_tfree(g, &u->bn_out);
        gen_tfree(g, &u->conv_out);
        conv_call(g, c);
        grad(g, &u->g, u->pw * 4);
        /* the gradient of this conv's input (none for the images) */
        gen_tensor dx = {0, 0};
        if (i)
            dx = gen_t(g, n * u->cin * u->hin * u->hin * c->e);
        gen_tfree(g, &dbn);
        if (!u->shortcut)
            gen_tfree(g, &dy);
        else
            gen_tfree(g, &dx); /* the shortcut's input grad is summed into the main path */
        if (!u->shortcut)
            dy = dx;
        if (i == 0)
            gen_tfree(g, &c->stem_pool);
    }
    gen_tfree(g, &dy);
    gen_tfree(g, &c->input);
}

static int cnn_refill(as_gen *g, void *st)
{
    cnn *c = st;
    if (!c->inited) {
        uint64_t P = c->last_c * c->classes + c->classes;
        for (uint64_t i = 0; i < c->nu; i++)
            P += c->u[i].pw + c->u[i].pbn;
        gen_mark(g, "init units=%llu params=%llu", (unsigned long long)c->nu,
                 (unsigned long long)P);
        for (uint64_t i = 0; i < c->nu; i++) {
            c->u[i].w = gen_t(g, c->u[i].pw * 4);
            c->u[i].bn = gen_t(g, c->u[i].pbn * 4 * 2); /* weight, bias, running stats */
        }
        c->fc_w = gen_t(g, c->last_c * c->classes * 4);
        c->fc_b = gen_t(g, c->classes * 4);
        c->inited = 1;
        return 0;
    }
    if (c->step == c->steps)
        return AS_TRACE_EOF;
    uint64_t n =
        c->dist ? c->batch_min + gen_rng_below(&c->rng, c->batch - c->batch_min + 1) : c->batch;
    gen_mark(g, "step=%llu batch=%llu", (unsigned long long)c->step, (unsigned long long)n);
    step_forward(g, c, n);
    step_backward(g, c, n);
    if (c->step == 0 && c->opt != 2) {
        int k = c->opt == 1 ? 2 : 1;
        for (uint64_t i = 0; i < c->nu; i++) {
            c->u[i].m1 = gen_t(g, c->u[i].pw * 4);
            c->u[i].n1 = gen_t(g, c->u[i].pbn * 4);
            if (k == 2) {
                c->u[i].m2 = gen_t(g, c->u[i].pw * 4);
                c->u[i].n2 = gen_t(g, c->u[i].pbn * 4);
            }
        }
        for (int j = 0; j < 2 * k; j++)
            c->fc_m[j] = gen_t(g, j % 2 ? c->classes * 4 : c->last_c * c->classes * 4);
    }
    for (uint64_t i = 0; i < c->nu; i++) { /* zero_grad(set_to_none=True) */
        gen_tfree(g, &c->u[i].g);
        gen_tfree(g, &c->u[i].gbn);
    }
    gen_tfree(g, &c->fc_gw);
    gen_tfree(g, &c->fc_gb);
    c->step++;
    return 0;
}

static void cnn_fini(void *st)
{
    free(((cnn *)st)->u);
}

const gen_kind as_gen_cnn = {
    .name = "cnn",
    .summary = "ResNet-style CNN training with a batch size that varies per step",
    .text = "torchvision-like ResNet (depth 18/34/50/101): stem conv 7x7/2 and max-pool,\n"
            "four stages at H/4, H/8, H/16, H/32 with width, 2x, 4x, 8x channels (x4 out\n"
            "for bottlenecks), global pooling and a linear classifier. Each conv+BN unit\n"
            "saves 2 maps of n*C*H*W*e bytes and each block its residual sum, so saved\n"
            "activations are linear in the step's batch n; backward frees them in reverse\n"
            "while allocating weight gradients (fp32), which zero_grad frees after the\n"
            "optimizer step. The batch is drawn per step, so the allocator sees the same\n"
            "layers at ever-changing sizes: the classic fragmentation workload.\n",
    .knobs = knobs,
    .nknobs = K_N,
    .state_size = sizeof(cnn),
    .init = cnn_init,
    .refill = cnn_refill,
    .fini = cnn_fini,
};
