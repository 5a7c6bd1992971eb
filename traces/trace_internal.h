/*
 * trace_internal.h - plumbing shared by the trace layer's own files (instream.c, reader.c,
 * writer.c, convert.c and the decoders). Nothing outside traces/ includes it; decoders
 * written against source.h do not need it.
 * The live table and the validator have their own header, live.h.
 *
 * Key invariant: an instream's offsets are in the decompressed stream, so every error a
 * decoder or the reader reports points at a byte of the content the user can inspect.
 */
#ifndef AS_TRACES_TRACE_INTERNAL_H
#define AS_TRACES_TRACE_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "grow.h"
#include "source.h"
#include "trace.h"

/* ---- instream (instream.c) ------------------------------------------------------- */

/* Opens path ("-" = stdin) and sniffs the zstd magic. */
int as_instream_open(const char *path, as_instream **out, as_trace_error *err);
/* A stream over a memory buffer (not copied: it must outlive the stream); name is the
 * path used in messages. zstd content is unwrapped like a file's. */
int as_instream_open_mem(const void *data, size_t n, const char *name, as_instream **out,
                         as_trace_error *err);
void as_instream_close(as_instream *in);
/* The largest zstd window accepted (log2 bytes, 10..31); before the first read. */
int as_instream_set_window_log(as_instream *in, int log, as_trace_error *err);
/* Starts the stream again from its first byte (a second pass): files and memory buffers;
 * a pipe cannot (AS_EIO, err filled). */
int as_instream_rewind(as_instream *in, as_trace_error *err);
/* 1 when as_instream_rewind can work (a memory buffer, a seekable file), 0 for a pipe. */
int as_instream_rewindable(const as_instream *in);
/* Consumes n bytes that a peek returned (n <= what the peek made available). */
void as_instream_skip(as_instream *in, size_t n);
/* 1 when the input was zstd-compressed. */
int as_instream_is_zstd(const as_instream *in);
/* Raw (compressed) bytes consumed so far, and the file size when known (else 0). */
void as_instream_progress(const as_instream *in, uint64_t *done, uint64_t *total);
/* The stream's own sticky error (I/O, corrupt or truncated zstd, a mapped file cut
 * shorter while read), or NULL. */
const as_trace_error *as_instream_error(as_instream *in);

/* One line of a line-oriented input (text.c, rmm.c), peeked, not consumed. */
typedef struct as_inline {
    const char *p;   /* the line's bytes, not NUL-terminated; valid until the next peek/skip */
    size_t len;      /* without the '\n' */
    size_t consume;  /* len plus the '\n' when there is one: what as_instream_skip passes */
    uint64_t off;    /* stream offset of p */
    const char *nul; /* with AS_INLINE_NUL: the first NUL byte in the line */
} as_inline;
enum { AS_INLINE_TOO_LONG = 2, AS_INLINE_NUL = 3 };
/* Peeks the next line, up to max bytes (a power-of-two multiple of 4 KiB). Returns 0
 * (l filled), AS_TRACE_EOF (l->off set), < 0 when the read failed (err filled),
 * AS_INLINE_NUL (l filled, l->nul set) or AS_INLINE_TOO_LONG (no newline within max
 * bytes; only l->p and l->off set). The caller counts lines and words its own errors. */
int as_instream_peek_line(as_instream *in, size_t max, as_inline *l, as_trace_error *err);
/* A line reader's next line (text.c, rmm.c): as_instream_peek_line into l, counting it in
 * *line (also a line too long or holding a NUL, which the reader words with its own
 * message), and, with strip_cr, without a trailing '\r'. The same return values. */
static inline int as_instream_next_line(as_instream *in, size_t max, int strip_cr,
                                        as_inline *l, uint64_t *line, as_trace_error *err)
{
    int rc = as_instream_peek_line(in, max, l, err);
    if (rc < 0 || rc == AS_TRACE_EOF)
        return rc;
    if (rc != AS_INLINE_TOO_LONG && strip_cr && l->len && l->p[l->len - 1] == '\r')
        l->len--;
    (*line)++;
    return rc;
}

/* Decoders that know where an event starts report it here, so that the reader's own
 * validation errors (unknown id, double free) point at the event's line and byte rather
 * than at wherever buffering left the stream. Cheap: two stores. */
void as_instream_mark_event(as_instream *in, uint64_t offset, uint64_t line);
void as_instream_take_mark(as_instream *in, uint64_t *offset, uint64_t *line);

/* Fills err (code, path, offset, line, event = UINT64_MAX, message). Returns code. */
int as_trace_set_error(as_trace_error *err, int code, const char *path, uint64_t offset,
                       uint64_t line, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
int as_trace_vset_error(as_trace_error *err, int code, const char *path, uint64_t offset,
                        uint64_t line, const char *fmt, va_list ap)
    __attribute__((format(printf, 6, 0)));

/* ---- format writers (native.c, text.c); the generic writer validates first ------- */

/* A buffered byte sink: the file or stdout. */
typedef struct as_outfile {
    int fd;
    int own_fd;
    char path[256];
    uint64_t written; /* bytes handed to write(2) */
    uint8_t *buf;
    size_t len, cap;
} as_outfile;

int as_outfile_write(as_outfile *o, const void *p, size_t n, as_trace_error *err);
int as_outfile_flush(as_outfile *o, as_trace_error *err);

typedef struct as_format_writer {
    /* Writes the header (metadata and the call-site table, which outlives the writer). */
    int (*open)(as_outfile *o, const as_meta *meta, const as_sites *sites, void **st,
                as_trace_error *err);
    int (*write)(void *st, const as_event *ev, as_trace_error *err);
    /* Flushes and writes the trailer; st is freed even on error. */
    int (*close)(void *st, as_trace_error *err);
} as_format_writer;

extern const as_format_writer as_native_writer;
extern const as_format_writer as_text_writer;

/* ---- helpers ---------------------------------------------------------------------- */

/* Meta keys are [A-Za-z0-9_.-]+; values have no NUL/newline (text escapes them anyway). */
int as_meta_key_ok(const char *key);

/* ---- private pools of a torch snapshot (snap_pools.c) ----------------------------- */

/* How an allocation's pool was found (snap_pools.c's header says how each is read): the
 * segment holding it is alive at the dump (its segment_pool_id), its stream's one pool,
 * neither (then the default pool), the frames of the allocation that made the segment, or
 * the order in which a release freed it. */
enum {
    AS_POOL_RECORDED = 0,
    AS_POOL_BY_STREAM = 1,
    AS_POOL_AMBIGUOUS = 2,
    AS_POOL_FRAMES = 3,
    AS_POOL_RELEASE = 4,
};
typedef struct as_snap_pools as_snap_pools;
int as_snap_pools_build(const as_snapshot_record *rec, as_snap_pools **out);
/* The pool (0 default, 1..count private) of the block at addr allocated by ALLOC `alloc`
 * (the record's ordinals: prehistoric ALLOCs first); *how is an AS_POOL_*. */
uint32_t as_snap_pools_of(as_snap_pools *p, uint64_t addr, uint64_t alloc, int *how);
/* Private pools: those at the dump (their segment_pool_id), then those inferred. */
uint32_t as_snap_pools_count(const as_snap_pools *p);
uint32_t as_snap_pools_inferred(const as_snap_pools *p);
/* k: 1..count; an inferred pool gets an unused (0, N), as a graph_pool_handle() would be */
void as_snap_pools_pair(const as_snap_pools *p, uint32_t k, int64_t pair[2]);
/* The EMPTY_CACHE events that run `run` (segev's run numbers) stands for, in order: 0 for
 * empty_cache() itself, k for private pool k released and emptied; none for an OOM retry's
 * release (the simulation retries by itself). A run the record does not know: {0}. */
size_t as_snap_pools_run(const as_snap_pools *p, uint64_t run, const uint32_t **pools);
uint64_t as_snap_pools_retries(const as_snap_pools *p); /* runs read as OOM retries */
void as_snap_pools_free(as_snap_pools *p);

#endif
