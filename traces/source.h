/*
 * source.h - internal seam between the generic reader (reader.c: format detection, zstd
 * unwrapping, validation of ids and sizes) and the per-format decoders.
 *
 * A decoder turns bytes from an as_instream into raw events. It does not need to check
 * ids or double frees: the generic reader validates every event, fills FREE sizes and
 * streams, and attaches file/offset/event to errors. A decoder reports format errors
 * itself, with the byte offset (as_instream_offset) and line where it has them.
 */
#ifndef AS_TRACES_SOURCE_H
#define AS_TRACES_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

typedef struct as_validator as_validator; /* live.h */

/* Buffered input: the raw file, or its zstd-decompressed content (streamed). Offsets are
 * in the decompressed stream. */
typedef struct as_instream as_instream;

/* Reads up to n bytes; returns the count (0 at EOF) or < 0 (AS_EIO/ECORRUPT). */
long as_instream_read(as_instream *in, void *buf, size_t n);
/* Looks at the next n bytes without consuming them; returns how many are available. */
long as_instream_peek(as_instream *in, const void **buf, size_t n);
uint64_t as_instream_offset(const as_instream *in);
const char *as_instream_path(const as_instream *in);
/* Formats an error into err with the stream's path and current offset. Returns code. */
int as_instream_fail(as_instream *in, as_trace_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

typedef struct as_source_ops {
    const char *name;
    as_trace_fmt fmt;
    /* Cheap content test on the first bytes (already decompressed). 1 = mine. */
    int (*probe)(const uint8_t *head, size_t n);
    /* Reads the header (filling meta), allocates decoder state into *st. */
    int (*open)(as_instream *in, const as_reader_opts *opts, as_meta *meta, void **st,
                as_trace_error *err);
    /* 0 with an event, AS_TRACE_EOF, or < 0 with err filled. Decoders may set ev->size
     * and ev->stream to 0 on FREE*; the reader fills them from its live table. */
    int (*next)(void *st, as_event *ev, as_trace_error *err);
    uint64_t (*warnings)(const void *st); /* lenient skips; may be NULL */
    /* Optional (NULL: the reader calls next once per event). Decodes up to cap events
     * straight into evs, with no per-event indirect call. Returns 0 with *n >= 1,
     * AS_TRACE_EOF with *n == 0, or < 0 (err filled) with *n events decoded before the
     * error. At most one MARK per batch, and it is last (its label lives in decoder state
     * until the next call). With v, each event also goes through the validator's fast path
     * (live.h) as it is decoded; the first one the fast path does not accept ends the
     * batch, unvalidated: *checked is *n or *n - 1. A decoder with next_batch has
     * last_offset too. */
    int (*next_batch)(void *st, as_validator *v, as_event *evs, size_t cap, size_t *n,
                      size_t *checked, as_trace_error *err);
    /* Offset in the decompressed stream of the last event next_batch decoded, when it was
     * unchecked (or decoded without a validator): the one the reader reports on. */
    uint64_t (*last_offset)(const void *st);
    void (*close)(void *st);
    /* Optional (NULL: no frames): the call-site table, complete once open returned. */
    const as_sites *(*sites)(const void *st);
    /* Optional: a snapshot's record (trace.h as_trace_reader_snapshot). */
    const as_snapshot_record *(*record)(const void *st);
} as_source_ops;

/* Wraps an already-open decoder state (a workload generator, for instance) in a reader,
 * with the same validation. Takes ownership of st (closed with ops->close) and copies meta. */
int as_trace_reader_from_source(const as_source_ops *ops, void *st, const as_meta *meta,
                                const char *name, as_trace_reader **out);

/* Decoders, registered in reader.c's probe order. */
extern const as_source_ops as_src_native;
extern const as_source_ops as_src_text;
extern const as_source_ops as_src_torch;
extern const as_source_ops as_src_rmm;

#endif
