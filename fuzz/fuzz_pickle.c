/*
 * fuzz_pickle.c - decoder harness for PyTorch snapshot pickles (traces/pickle.c,
 * traces/pickle_fast.c, traces/torch_snapshot.c): opcodes, memo, protocol framing and the
 * snapshot schema, strict and lenient.
 *
 * Oracles (fuzz_common.c): refusals are documented error codes naming the input; the
 * events read before any refusal round-trip losslessly through the native and text
 * writers. The reader detects formats by content, so a mutant may be read as another
 * format: that is fine, the same oracles apply. And the pickle VM's fast path changes
 * nothing: the input parsed with and without it gives the same error (code, offset,
 * message) or the same tree (a digest of every value's type, offset and content).
 */
#include <string.h>

#include "fuzz/fuzz.h"
#include "pickle.h"

/* FNV-1a over the tree under r, depth first, at most 1 << 16 values. */
static uint64_t tree_digest(const as_pk *pk, as_pk_ref r)
{
    as_pk_ref todo[1 << 12];
    size_t nt = 0, left = 1 << 16;
    uint64_t h = 0xcbf29ce484222325ull;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 0x100000001b3ull)
    todo[nt++] = r;
    while (nt && left--) {
        r = todo[--nt];
        as_pk_type t = as_pk_type_of(pk, r);
        int64_t i = 0;
        double f = 0;
        const char *s;
        size_t n;
        MIX(t), MIX(as_pk_offset(pk, r)), MIX(as_pk_len(pk, r));
        if (as_pk_str(pk, r, &s, &n) == 0)
            for (size_t k = 0; k < n; k++)
                MIX((uint8_t)s[k]);
        else if (as_pk_int(pk, r, &i) == 0)
            MIX(i);
        else if (as_pk_float(pk, r, &f) == 0 && (memcpy(&i, &f, sizeof i), 1))
            MIX(i);
        as_pk_iter it;
        as_pk_ref k, v;
        as_pk_iter_init(&it, pk, r);
        if (t == AS_PK_DICT) {
            while (nt + 2 <= sizeof todo / sizeof todo[0] && as_pk_iter_next_pair(&it, &k, &v))
                todo[nt++] = k, todo[nt++] = v;
        } else {
            while (nt < sizeof todo / sizeof todo[0] && as_pk_iter_next(&it, &k))
                todo[nt++] = k;
        }
    }
#undef MIX
    return h;
}

static void fast_path_same(const uint8_t *data, size_t size)
{
    int rc[2];
    as_pk_error e[2];
    uint64_t d[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        as_pk_limits lim = {.vm_only = k, .max_memory = 64u << 20};
        as_pk *pk = NULL;
        memset(&e[k], 0, sizeof e[k]);
        rc[k] = as_pk_parse(data, size, &lim, &pk, &e[k]);
        if (!rc[k])
            d[k] = tree_digest(pk, as_pk_root(pk));
        as_pk_free(pk);
    }
    FUZZ_ASSERT_MSG(rc[0] == rc[1] && e[0].offset == e[1].offset && d[0] == d[1] &&
                        strcmp(e[0].msg, e[1].msg) == 0,
                    "fast path: rc %d at %llu (%s); VM: rc %d at %llu (%s)", rc[0],
                    (unsigned long long)e[0].offset, e[0].msg, rc[1],
                    (unsigned long long)e[1].offset, e[1].msg);
}

/* The same, streamed: each item handed out, then the tree or the error. */
static void fast_path_same_streamed(const uint8_t *data, size_t size)
{
    int rc[2];
    as_pk_error e[2];
    uint64_t d[2] = {0, 0}, items[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        as_pk_limits lim = {.vm_only = k, .max_memory = 64u << 20};
        as_pk_stream *ps = NULL;
        as_pk_item it;
        memset(&e[k], 0, sizeof e[k]);
        rc[k] = as_pk_stream_open_mem(data, size, &lim, &ps, &e[k]);
        while (!rc[k] && (rc[k] = as_pk_stream_next(ps, &it, &e[k])) == 1) {
            d[k] = d[k] * 31 + tree_digest(as_pk_stream_tree(ps), it.ref) + it.index;
            items[k]++;
            rc[k] = 0;
        }
        if (!rc[k] && ps)
            d[k] =
                d[k] * 31 + tree_digest(as_pk_stream_tree(ps), as_pk_root(as_pk_stream_tree(ps)));
        as_pk_stream_close(ps);
    }
    FUZZ_ASSERT_MSG(rc[0] == rc[1] && e[0].offset == e[1].offset && d[0] == d[1] &&
                        items[0] == items[1] && strcmp(e[0].msg, e[1].msg) == 0,
                    "streamed, fast path: rc %d at %llu (%s); VM: rc %d at %llu (%s)", rc[0],
                    (unsigned long long)e[0].offset, e[0].msg, rc[1],
                    (unsigned long long)e[1].offset, e[1].msg);
}

int as_fuzz_pickle(const uint8_t *data, size_t size)
{
    as_fuzz_decode(data, size, "fuzz-pickle", AS_FUZZ_RT | AS_FUZZ_LENIENT);
    fast_path_same(data, size);
    fast_path_same_streamed(data, size);
    return 0;
}
