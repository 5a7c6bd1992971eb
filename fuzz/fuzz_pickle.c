/*
 * fuzz_pickle.c - decoder harness for PyTorch snapshot pickles (traces/pickle.c,
 * traces/pickle_entry.c, traces/torch_snapshot.c): opcodes, memo, protocol framing and the
 * snapshot schema, strict and lenient.
 *
 * Oracles (fuzz_common.c): refusals are documented error codes naming the input; the
 * events read before any refusal round-trip losslessly through the native and text
 * writers. The reader detects formats by content, so a mutant may be read as another
 * format: that is fine, the same oracles apply. And the entry scanner changes nothing:
 * imported with and without it (traces/pickle_entry.c, which reads trace entries without a
 * tree; the VM alone is the oracle) the input gives the same events, metadata, sites and
 * warnings, or the same error.
 */
#include <string.h>

#include "fuzz/fuzz.h"
#include "pickle.h"
#include "trace.h"

/* A whole import folded: metadata, every event, the sites' frames, warnings, the end. */
static uint64_t import_digest(const uint8_t *data, size_t size, int vm_only, int lenient,
                              as_trace_error *err, int *rc)
{
    uint64_t h = 0xcbf29ce484222325ull;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 0x100000001b3ull)
#define MIXS(s)                                                                                    \
    do {                                                                                           \
        for (const char *c_ = (s); c_ && *c_; c_++)                                                \
            MIX((uint8_t)*c_);                                                                     \
        MIX(0);                                                                                    \
    } while (0)
    as_trace_reader *r = NULL;
    as_reader_opts o = {
        .lenient = lenient, .pickle_vm_only = vm_only, .max_pickle_memory = 64u << 20};
    memset(err, 0, sizeof *err);
    *rc = as_trace_open_mem(data, size, "fuzz-pickle", &o, &r, err);
    if (*rc == 0) {
        const as_meta *m = as_trace_reader_meta(r);
        for (size_t i = 0; i < m->n; i++) {
            MIXS(m->kv[i].key);
            MIXS(m->kv[i].value);
        }
        as_event e;
        while ((*rc = as_trace_next(r, &e)) == 0) {
            MIX(e.op), MIX(e.id), MIX(e.size), MIX(e.stream), MIX(e.time_us);
            if (e.op == AS_OP_MARK)
                MIXS(e.label);
            else
                MIX(e.site), MIX(e.pool);
        }
        if (*rc == AS_TRACE_EOF)
            *rc = 0;
        else
            *err = *as_trace_reader_error(r);
        const as_sites *st = as_trace_reader_sites(r);
        as_frame f;
        for (uint32_t k = 0; st && k < as_sites_nframes(st); k++)
            if (as_sites_frame(st, k, &f) == 0) {
                MIXS(f.filename);
                MIXS(f.name);
                MIX(f.line);
            }
        for (uint32_t k = 1; st && k <= as_sites_count(st); k++) {
            const uint32_t *fids;
            size_t nf = as_sites_stack(st, k, &fids);
            for (size_t i = 0; i < nf; i++)
                MIX(fids[i]);
            MIX(nf);
        }
        MIX(as_trace_reader_warnings(r));
        as_trace_close(r);
    }
    return h;
#undef MIXS
#undef MIX
}

/* The entry scanner changes nothing the importer gives. */
static void scanner_same(const uint8_t *data, size_t size, int lenient)
{
    as_trace_error e[2];
    int rc[2];
    uint64_t d[2];
    for (int k = 0; k < 2; k++)
        d[k] = import_digest(data, size, k, lenient, &e[k], &rc[k]);
    FUZZ_ASSERT_MSG(rc[0] == rc[1] && d[0] == d[1] && e[0].offset == e[1].offset &&
                        strcmp(e[0].msg, e[1].msg) == 0,
                    "entry scanner: rc %d at %llu (%s); VM: rc %d at %llu (%s)", rc[0],
                    (unsigned long long)e[0].offset, e[0].msg, rc[1],
                    (unsigned long long)e[1].offset, e[1].msg);
}

int as_fuzz_pickle(const uint8_t *data, size_t size)
{
    as_fuzz_decode(data, size, "fuzz-pickle", AS_FUZZ_RT | AS_FUZZ_LENIENT);
    if (size >= 2 && data[0] == 0x80) /* a pickle (others are read as other formats) */
        for (int lenient = 0; lenient < 2; lenient++)
            scanner_same(data, size, lenient);
    return 0;
}
