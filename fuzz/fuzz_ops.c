/*
 * fuzz_ops.c - the editable operation list behind the structure-aware mutators (see
 * fuzz_ops.h). Invariant: after fz_normalize every FREE/FREE_REQ names a live allocation,
 * so fz_write_text always produces a trace the reader accepts.
 */
#include "fuzz/fuzz_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t fz_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t *rng, uint64_t n)
{
    return n ? fz_rand(rng) % n : 0;
}

int fz_push(fz_trace *t, fz_op op)
{
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        fz_op *no = realloc(t->ops, nc * sizeof *no);
        if (!no)
            return -1;
        t->ops = no;
        t->cap = nc;
    }
    t->ops[t->n++] = op;
    if (op.op == AS_OP_ALLOC && op.tag >= t->next_tag)
        t->next_tag = op.tag + 1;
    return 0;
}

static int insert_at(fz_trace *t, size_t pos, fz_op op)
{
    if (fz_push(t, op))
        return -1;
    memmove(t->ops + pos + 1, t->ops + pos, (t->n - 1 - pos) * sizeof *t->ops);
    t->ops[pos] = op;
    return 0;
}

void fz_free(fz_trace *t)
{
    free(t->ops);
    as_meta_free(&t->meta);
    memset(t, 0, sizeof *t);
}

int fz_parse(const uint8_t *data, size_t size, fz_trace *t)
{
    memset(t, 0, sizeof *t);
    as_trace_reader *r;
    int rc = as_trace_open_mem(data, size, "fuzz-input", NULL, &r, NULL);
    if (rc < 0)
        return rc;
    if (as_meta_copy(&t->meta, as_trace_reader_meta(r)) != 0) {
        as_trace_close(r);
        return AS_ENOMEM;
    }
    as_event e;
    while ((rc = as_trace_next(r, &e)) == 0) {
        if (e.op == AS_OP_MARK)
            continue;
        fz_op o = {.op = (uint8_t)e.op, .tag = (uint32_t)e.id};
        if (e.id > UINT32_MAX / 2) {
            rc = AS_ENOMEM;
            break;
        }
        if (e.op == AS_OP_ALLOC) {
            o.size = e.size;
            o.stream = e.stream;
        }
        if (fz_push(t, o)) {
            rc = AS_ENOMEM;
            break;
        }
    }
    as_trace_close(r);
    if (rc < 0) {
        fz_free(t);
        return rc;
    }
    return 0;
}

enum { S_NONE, S_LIVE, S_REQ, S_DONE };

void fz_normalize(fz_trace *t)
{
    uint8_t *st = calloc(t->next_tag + 1, 1);
    if (!st)
        return;
    size_t w = 0;
    for (size_t i = 0; i < t->n; i++) {
        fz_op o = t->ops[i];
        int keep = 1;
        if (o.op == AS_OP_ALLOC) {
            keep = st[o.tag] == S_NONE; /* a duplicated tag: keep the first */
            if (keep)
                st[o.tag] = S_LIVE;
        } else if (o.op == AS_OP_FREE_REQ) {
            keep = o.tag < t->next_tag && st[o.tag] == S_LIVE;
            if (keep)
                st[o.tag] = S_REQ;
        } else if (o.op == AS_OP_FREE) {
            keep = o.tag < t->next_tag && (st[o.tag] == S_LIVE || st[o.tag] == S_REQ);
            if (keep)
                st[o.tag] = S_DONE;
        }
        if (keep)
            t->ops[w++] = o;
    }
    t->n = w;
    free(st);
}

static int put(uint8_t *out, size_t cap, size_t *len, const char *s, size_t n)
{
    if (*len + n > cap)
        return -1;
    memcpy(out + *len, s, n);
    *len += n;
    return 0;
}

size_t fz_write_text(const fz_trace *t, uint8_t *out, size_t cap)
{
    size_t len = 0;
    char line[512];
    if (put(out, cap, &len, "allocsim-text 1\n", 16))
        return 0;
    for (size_t i = 0; i < t->meta.n; i++) {
        int n = snprintf(line, sizeof line, "meta %s=", t->meta.kv[i].key);
        if (put(out, cap, &len, line, (size_t)n))
            return 0;
        for (const char *v = t->meta.kv[i].value; *v; v++) {
            unsigned char c = (unsigned char)*v;
            if (c == '\\' || c == '#' || c < 0x20 || c == 0x7f ||
                (c == ' ' && (v == t->meta.kv[i].value || !v[1])))
                n = snprintf(line, sizeof line, "\\x%02x", c);
            else
                n = snprintf(line, sizeof line, "%c", c);
            if (put(out, cap, &len, line, (size_t)n))
                return 0;
        }
        if (put(out, cap, &len, "\n", 1))
            return 0;
    }
    uint32_t *ord = calloc(t->next_tag + 1, sizeof *ord);
    if (!ord)
        return 0;
    uint64_t nalloc = 0;
    size_t ok = len;
    for (size_t i = 0; i < t->n && ok; i++) {
        const fz_op *o = &t->ops[i];
        int n;
        switch (o->op) {
        case AS_OP_ALLOC:
            ord[o->tag] = (uint32_t)nalloc;
            if (o->stream)
                n = snprintf(line, sizeof line, "alloc %llu %llu s=0x%llx\n",
                             (unsigned long long)nalloc, (unsigned long long)o->size,
                             (unsigned long long)o->stream);
            else
                n = snprintf(line, sizeof line, "alloc %llu %llu\n", (unsigned long long)nalloc,
                             (unsigned long long)o->size);
            nalloc++;
            break;
        case AS_OP_FREE:
            n = snprintf(line, sizeof line, "free %u\n", ord[o->tag]);
            break;
        case AS_OP_FREE_REQ:
            n = snprintf(line, sizeof line, "free_req %u\n", ord[o->tag]);
            break;
        default:
            n = snprintf(line, sizeof line, "empty_cache\n");
            break;
        }
        if (put(out, cap, &len, line, (size_t)n))
            ok = 0;
    }
    free(ord);
    return ok ? len : 0;
}

uint64_t fz_size(uint64_t *rng, const fz_params *p)
{
    if (p->unit)
        return p->unit * (1 + below(rng, p->nmax));
    unsigned bits = (unsigned)below(rng, p->max_log2 + 1);
    uint64_t top = 1ull << bits;
    uint64_t s = top + below(rng, top);
    switch (below(rng, 8)) {
    case 0: /* a power of two, or one byte either side */
        s = top + below(rng, 3) - 1;
        break;
    case 1: /* whole MiB */
        s = (1 + below(rng, 24)) << 20;
        break;
    case 2: /* around PyTorch's small/large and 10 MiB boundaries */
        s = (below(rng, 2) ? 1ull << 20 : 10ull << 20) + below(rng, 3) - 1;
        break;
    default:
        break;
    }
    return s ? s : 1;
}

/* A position in the list, biased to the end where growth happens. */
static size_t pos(uint64_t *rng, const fz_trace *t)
{
    return (size_t)below(rng, t->n + 1);
}

/* The tag of an allocation before position p, or UINT32_MAX. */
static uint32_t alloc_before(uint64_t *rng, const fz_trace *t, size_t p)
{
    for (int tries = 0; tries < 8 && p; tries++) {
        const fz_op *o = &t->ops[below(rng, p)];
        if (o->op == AS_OP_ALLOC)
            return o->tag;
    }
    return UINT32_MAX;
}

static fz_op new_alloc(fz_trace *t, uint64_t *rng, const fz_params *p)
{
    fz_op o = {.op = AS_OP_ALLOC, .tag = t->next_tag, .size = fz_size(rng, p)};
    if (p->streams && below(rng, 4) == 0)
        o.stream = below(rng, 4);
    return o;
}

/* Changes one allocation's size: a step up or down, or a fresh draw. */
static void mut_resize(fz_trace *t, uint64_t *rng, const fz_params *p)
{
    for (int tries = 0; tries < 8 && t->n; tries++) {
        fz_op *o = &t->ops[below(rng, t->n)];
        if (o->op != AS_OP_ALLOC)
            continue;
        uint64_t step = p->unit ? p->unit : 1 + o->size / 16;
        switch (below(rng, 4)) {
        case 0:
            o->size += step;
            break;
        case 1:
            o->size = o->size > step ? o->size - step : o->size;
            break;
        default:
            o->size = fz_size(rng, p);
            break;
        }
        if (p->unit && o->size > p->unit * p->nmax)
            o->size = p->unit * p->nmax;
        break;
    }
}

/* Duplicates a run with fresh tags. */
static void mut_duplicate(fz_trace *t, uint64_t *rng, const fz_params *p)
{
    if (!t->n)
        return;
    size_t k = below(rng, t->n);
    size_t len = 1 + below(rng, 32);
    if (k + len > t->n)
        len = t->n - k;
    if (t->n + len > p->max_ops)
        return;
    uint32_t base = t->next_tag, lo = UINT32_MAX;
    for (size_t i = k; i < k + len; i++)
        if (t->ops[i].op == AS_OP_ALLOC && t->ops[i].tag < lo)
            lo = t->ops[i].tag;
    size_t dst = k + len;
    for (size_t i = 0; i < len; i++) {
        fz_op o = t->ops[k + i];
        if (lo != UINT32_MAX && o.op != AS_OP_EMPTY_CACHE && o.tag >= lo)
            o.tag = base + (o.tag - lo);
        if (o.tag > UINT32_MAX / 4)
            return;
        if (insert_at(t, dst + i, o))
            return;
    }
}

/* Allocates k equal blocks at at, then frees every other one (Robson's holes). */
static void mut_burst(fz_trace *t, uint64_t *rng, const fz_params *p, size_t at)
{
    size_t k = 2 + below(rng, 30);
    if (t->n + k + k / 2 > p->max_ops)
        return;
    fz_op a = new_alloc(t, rng, p);
    uint32_t first = t->next_tag;
    for (size_t i = 0; i < k; i++) {
        a.tag = first + (uint32_t)i;
        if (insert_at(t, at + i, a))
            return;
    }
    size_t q = at + k;
    for (size_t i = 0; i < k; i += 2)
        if (insert_at(t, q++, (fz_op){.op = AS_OP_FREE, .tag = first + (uint32_t)i}))
            return;
}

/* Frees (each with probability 1/2) what is live at at: the end of an iteration. */
static void mut_free_live(fz_trace *t, uint64_t *rng, const fz_params *p, size_t at)
{
    if (t->n < p->max_ops / 2) {
        uint8_t *live = calloc(t->next_tag + 1, 1);
        if (!live)
            return;
        /* Before fz_normalize, a free may name a tag not (yet) allocated. */
        for (size_t i = 0; i < at; i++) {
            if (t->ops[i].tag >= t->next_tag)
                continue;
            if (t->ops[i].op == AS_OP_ALLOC)
                live[t->ops[i].tag] = 1;
            else if (t->ops[i].op == AS_OP_FREE)
                live[t->ops[i].tag] = 0;
        }
        size_t q = at;
        for (uint32_t g = 0; g < t->next_tag && t->n < p->max_ops; g++)
            if (live[g] && below(rng, 2))
                insert_at(t, q++, (fz_op){.op = AS_OP_FREE, .tag = g});
        free(live);
    }
}

/* Every allocation of one size, from a random point on, one step larger or smaller: a
 * phase of Robson's constructions asks for one size, and its successor for the next. */
static void mut_size_class(fz_trace *t, uint64_t *rng, const fz_params *p)
{
    for (int tries = 0; tries < 8 && t->n; tries++) {
        size_t k = below(rng, t->n);
        if (t->ops[k].op != AS_OP_ALLOC)
            continue;
        uint64_t from = t->ops[k].size, step = p->unit ? p->unit : 1 + from / 16;
        uint64_t to = below(rng, 2) ? from + step : from > step ? from - step : from;
        if (p->unit && to > p->unit * p->nmax)
            return;
        size_t start = below(rng, 2) ? 0 : k;
        for (size_t i = start; i < t->n; i++)
            if (t->ops[i].op == AS_OP_ALLOC && t->ops[i].size == from)
                t->ops[i].size = to;
        return;
    }
}

/* Operation a moved to position b, those between shifted by one. */
static void move_op(fz_trace *t, size_t a, size_t b)
{
    fz_op o = t->ops[a];
    if (a < b)
        memmove(t->ops + a, t->ops + a + 1, (b - a) * sizeof *t->ops);
    else
        memmove(t->ops + b + 1, t->ops + b, (a - b) * sizeof *t->ops);
    t->ops[b] = o;
}

/* One operation moved by 1 to 8 places: a free a little earlier or later. */
static void mut_nudge(fz_trace *t, uint64_t *rng)
{
    if (t->n < 2)
        return;
    size_t a = below(rng, t->n), d = 1 + below(rng, 8), b;
    if (below(rng, 2))
        b = a + d < t->n ? a + d : t->n - 1;
    else
        b = a > d ? a - d : 0;
    move_op(t, a, b);
}

static void mutate_one(fz_trace *t, uint64_t *rng, const fz_params *p)
{
    if (p->phases && below(rng, 4) == 0) {
        if (below(rng, 2))
            mut_size_class(t, rng, p);
        else
            mut_nudge(t, rng);
        return;
    }
    size_t at = pos(rng, t);
    switch (below(rng, p->extras ? 11 : 9)) {
    case 0: /* insert an allocation */
    case 1:
        if (t->n < p->max_ops)
            insert_at(t, at, new_alloc(t, rng, p));
        break;
    case 2: { /* insert a free of an earlier allocation */
        uint32_t tag = alloc_before(rng, t, at);
        if (tag != UINT32_MAX && t->n < p->max_ops)
            insert_at(t, at, (fz_op){.op = AS_OP_FREE, .tag = tag});
        break;
    }
    case 3: /* delete one, or a run */
        if (t->n) {
            size_t k = at < t->n ? at : t->n - 1;
            size_t len = below(rng, 4) ? 1 : 1 + below(rng, 16);
            if (k + len > t->n)
                len = t->n - k;
            memmove(t->ops + k, t->ops + k + len, (t->n - k - len) * sizeof *t->ops);
            t->n -= len;
        }
        break;
    case 4: /* resize an allocation */
        mut_resize(t, rng, p);
        break;
    case 5: /* move one operation */
        if (t->n >= 2) {
            size_t a = below(rng, t->n), b = below(rng, t->n);
            move_op(t, a, b);
        }
        break;
    case 6: /* duplicate a run with fresh tags: repeats a pattern (a loop iteration) */
        mut_duplicate(t, rng, p);
        break;
    case 7: /* a burst: allocate k equal blocks, free every other one (Robson's holes) */
        mut_burst(t, rng, p, at);
        break;
    case 8: /* free everything live at a point (end of an iteration) */
        mut_free_live(t, rng, p, at);
        break;
    case 9: { /* FREE_REQ: a deferred free */
        uint32_t tag = alloc_before(rng, t, at);
        if (tag != UINT32_MAX && t->n < p->max_ops)
            insert_at(t, at, (fz_op){.op = AS_OP_FREE_REQ, .tag = tag});
        break;
    }
    default:
        if (t->n < p->max_ops)
            insert_at(t, at, (fz_op){.op = AS_OP_EMPTY_CACHE});
        break;
    }
}

void fz_mutate(fz_trace *t, uint64_t *rng, const fz_params *p)
{
    unsigned k = 1 + (unsigned)(below(rng, 4) ? 0 : below(rng, 4));
    for (unsigned i = 0; i < k; i++)
        mutate_one(t, rng, p);
    fz_normalize(t);
}

void fz_random(fz_trace *t, uint64_t *rng, const fz_params *p, size_t n)
{
    for (size_t i = 0; i < n && t->n < p->max_ops; i++) {
        uint64_t u = below(rng, 100);
        if (u < 55 || t->n == 0) {
            fz_push(t, new_alloc(t, rng, p));
        } else {
            uint32_t tag = alloc_before(rng, t, t->n);
            if (tag == UINT32_MAX)
                continue;
            uint8_t op = p->extras && u >= 95 ? AS_OP_FREE_REQ : AS_OP_FREE;
            if (p->extras && u == 99)
                fz_push(t, (fz_op){.op = AS_OP_EMPTY_CACHE});
            else
                fz_push(t, (fz_op){.op = op, .tag = tag});
        }
    }
    fz_normalize(t);
}

size_t fz_write_out(fz_trace *t, uint8_t *data, size_t size, size_t max_size)
{
    uint8_t *buf = malloc(max_size ? max_size : 1);
    size_t n = 0;
    while (buf && (n = fz_write_text(t, buf, max_size)) == 0 && t->n) {
        t->n = t->n * 3 / 4; /* too long for max_size: keep a prefix */
        fz_normalize(t);
    }
    if (n)
        memcpy(data, buf, n);
    free(buf);
    /* Never an empty unit: when not even the header fits, the input stays as it was. */
    return n ? n : (size < max_size ? size : max_size);
}
