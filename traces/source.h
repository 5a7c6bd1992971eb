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
    void (*close)(void *st);
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
