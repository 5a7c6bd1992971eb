/*
 * instream.c - buffered input for the decoders: a file, stdin or a memory buffer, with
 * zstd content (magic 28 B5 2F FD) unwrapped transparently through ZSTD_decompressStream.
 *
 * A small zstd file is decoded in one call instead (oneshot), into a window of its size.
 * Plain content is read in place (direct): a memory buffer's own bytes, or a regular file
 * of IN_MAP_MIN bytes and more mapped (inmap.c), with no copy into a window.
 *
 * Invariant: buf[pos..len) is the not yet consumed window of the decompressed stream and
 * base is the stream offset of buf[0], so every offset reported is in decompressed bytes.
 * A stream error is sticky: once set, reads and peeks keep returning it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_getFrameHeader: the window a frame asks for */
#include <zstd.h>
#include <zstd_errors.h>

#include "inmap.h"
#include "trace_internal.h"

#define IN_CHUNK (128u << 10)   /* raw read size and initial window */
#define IN_MAX_PEEK (64u << 20) /* a peek larger than this is refused */
#define IN_ZFEED 4096u          /* compressed bytes given to zstd per call */
#define IN_ONESHOT (1u << 20)   /* the most output oneshot decodes: the first window */
#define IN_MAP_MIN (1u << 20)   /* a plain file this long is mapped, not read */

struct as_instream {
    int fd; /* -1 for memory streams */
    int own_fd;
    char path[256];
    /* decompressed window */
    uint8_t *buf;
    size_t pos, len, cap;
    uint64_t base;
    int direct;     /* buf is the content in place, never written: a memory buffer whole, */
    as_inmap *map;  /* or a window of this mapped file (at base, moved by map_window) */
    /* raw input (file bytes, or the memory buffer) */
    uint8_t *raw;
    size_t raw_pos, raw_len, raw_cap;
    const uint8_t *mem; /* memory stream: raw points into it, never freed */
    int raw_eof;
    uint64_t raw_done, raw_total;
    /* zstd */
    int zstd;             /* the content is zstd-compressed */
    ZSTD_DStream *zd;     /* its decoder; NULL after a one-call decode until a rewind */
    size_t zret;          /* last ZSTD_decompressStream result: 0 = at a frame boundary */
    int zdone;            /* decompressed stream fully drained */
    int wlog;             /* largest window accepted (log2 bytes) */
    uint64_t frame_start; /* compressed offset of the current frame */
    /* sticky error */
    as_trace_error err;
    int failed;
    /* the event being decoded (as_instream_mark_event) */
    uint64_t mark_off, mark_line;
};

int as_trace_vset_error(as_trace_error *err, int code, const char *path, uint64_t offset,
                        uint64_t line, const char *fmt, va_list ap)
{
    if (!err)
        return code;
    err->code = code;
    snprintf(err->path, sizeof err->path, "%s", path ? path : "");
    err->offset = offset;
    err->line = line;
    err->event = UINT64_MAX;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    return code;
}

int as_trace_set_error(as_trace_error *err, int code, const char *path, uint64_t offset,
                       uint64_t line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    as_trace_vset_error(err, code, path, offset, line, fmt, ap);
    va_end(ap);
    return code;
}

static int stream_fail(as_instream *in, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int stream_fail(as_instream *in, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    as_trace_vset_error(&in->err, code, in->path, in->base + in->len, 0, fmt, ap);
    va_end(ap);
    in->failed = 1;
    return code;
}

/* A zstd frame, or a zstd skippable frame (magic 0x184D2A50..5F) in front of one: h[0..4). */
static int zstd_magic(const uint8_t *h)
{
    static const uint8_t zmagic[4] = {0x28, 0xB5, 0x2F, 0xFD};
    return memcmp(h, zmagic, 4) == 0 ||
           ((h[0] & 0xF0) == 0x50 && h[1] == 0x2A && h[2] == 0x4D && h[3] == 0x18);
}

/* Plain content read in place: buf is data[0..n), stream offsets base.. (a mapped
 * window), or the whole stream (memory). */
static void go_direct(as_instream *in, const uint8_t *data, size_t n, uint64_t base)
{
    in->direct = 1;
    in->buf = (uint8_t *)(uintptr_t)data; /* never written */
    in->len = in->cap = n;
    in->base = base;
    in->zdone = in->raw_eof = 1;
}

/* The mapped window moved to hold n bytes from the read position (or to the end). */
static int map_window(as_instream *in, size_t n)
{
    const uint8_t *d;
    size_t avail;
    uint64_t off = in->base + in->pos;
    if (as_inmap_view(in->map, off, n, &d, &avail) < 0)
        return stream_fail(in, AS_ENOMEM, "cannot map the file's bytes at %llu: %s",
                           (unsigned long long)off, strerror(errno));
    go_direct(in, d, avail, off);
    in->pos = 0;
    return 0;
}

/* A regular file of IN_MAP_MIN bytes or more with plain content: mapped, 1; else 0 (read
 * it). zstd content is read, since zstd copies it into its own buffers anyway. */
static int map_file(as_instream *in)
{
    const uint8_t *d;
    size_t avail;
    if (in->raw_total < IN_MAP_MIN || as_inmap_open(in->fd, in->raw_total, &in->map) < 0)
        return 0;
    if (as_inmap_view(in->map, 0, IN_CHUNK, &d, &avail) < 0 || zstd_magic(d)) {
        as_inmap_close(in->map);
        in->map = NULL;
        return 0;
    }
    go_direct(in, d, avail, 0);
    return 1;
}

/* A mapped file whose window ends before the file does: map_window moves it on. */
static int map_more(const as_instream *in)
{
    return in->map && in->base + in->len < in->raw_total;
}

/* Reads more raw bytes into raw[]; 0 on success (raw_eof set at the end), < 0 on error. */
static int raw_fill(as_instream *in)
{
    if (in->raw_eof)
        return 0;
    if (in->mem) {
        in->raw_eof = 1;
        return 0;
    }
    if (in->raw_pos > 0) {
        memmove(in->raw, in->raw + in->raw_pos, in->raw_len - in->raw_pos);
        in->raw_len -= in->raw_pos;
        in->raw_pos = 0;
    }
    for (;;) {
        ssize_t r = read(in->fd, in->raw + in->raw_len, in->raw_cap - in->raw_len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return stream_fail(in, AS_EIO, "read failed: %s", strerror(errno));
        if (r == 0)
            in->raw_eof = 1;
        in->raw_len += (size_t)r;
        return 0;
    }
}

/* Makes room for at least want more bytes after len, compacting first. */
static int window_reserve(as_instream *in, size_t want)
{
    if (in->pos > 0 && in->cap - in->len < want) {
        memmove(in->buf, in->buf + in->pos, in->len - in->pos);
        in->base += in->pos;
        in->len -= in->pos;
        in->pos = 0;
    }
    if (in->cap - in->len >= want)
        return 0;
    /* A window several blocks long: compaction (a memmove of the unread tail) then runs
     * once per few blocks instead of once per block. */
    size_t ncap = in->cap ? in->cap : 8 * IN_CHUNK;
    while (ncap - in->len < want)
        ncap *= 2;
    uint8_t *nb = realloc(in->buf, ncap);
    if (!nb)
        return stream_fail(in, AS_ENOMEM, "out of memory for the input buffer");
    in->buf = nb;
    in->cap = ncap;
    return 0;
}

/* Raw (compressed) bytes at absolute offset off, for find_block: from the memory buffer,
 * the raw buffer, or the file. Returns the count read. */
static size_t raw_at(as_instream *in, uint64_t off, uint8_t *dst, size_t n)
{
    uint64_t rb = in->raw_done - in->raw_pos; /* offset of raw[0] */
    if (in->mem || (off >= rb && off + n <= rb + in->raw_len)) {
        if (off < rb || off - rb >= in->raw_len)
            return 0;
        size_t k = in->raw_len - (size_t)(off - rb);
        k = k < n ? k : n;
        memcpy(dst, in->raw + (off - rb), k);
        return k;
    }
    ssize_t got = pread(in->fd, dst, n, (off_t)off);
    return got > 0 ? (size_t)got : 0;
}

/* The block of the current frame that ends after compressed offset a (the first one zstd
 * had not finished before the failing call): walks the block headers from the frame's
 * start. 0 with [*bs, *be), or -1 when the bytes cannot be read again (a pipe). */
static int find_block(as_instream *in, uint64_t a, uint64_t *bs, uint64_t *be)
{
    uint8_t h[ZSTD_FRAMEHEADERSIZE_MAX];
    size_t n = raw_at(in, in->frame_start, h, sizeof h);
    ZSTD_frameHeader fh;
    if (n < 5 || ZSTD_getFrameHeader(&fh, h, n) != 0 || fh.frameType != ZSTD_frame)
        return -1;
    uint64_t pos = in->frame_start + fh.headerSize;
    for (int i = 0; i < (1 << 24); i++) {
        if (raw_at(in, pos, h, 3) != 3)
            return -1;
        uint32_t bh = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16;
        uint64_t end = pos + 3 + ((bh >> 1 & 3) == 1 ? 1 : bh >> 3);
        if (end > a || (bh & 1)) {
            *bs = pos;
            *be = end;
            return 0;
        }
        pos = end;
    }
    return -1;
}

/* A zstd error: a window above the limit gets its own message (what the frame asks for,
 * and how to allow it); the rest name the compressed offset. */
/* The window a frame header at h[0..n) asks for, 0 when it does not say. ZSTD_getFrameHeader
 * refuses one above zstd's own largest window, so the window descriptor is read here then
 * (RFC 8878 3.1.1.1.2: 2^(10 + exponent) plus mantissa eighths of it). */
static unsigned long long frame_window(const uint8_t *h, size_t n)
{
    ZSTD_frameHeader fh;
    if (ZSTD_getFrameHeader(&fh, h, n) == 0)
        return fh.windowSize;
    if (n < 6 || h[0] != 0x28 || h[1] != 0xB5 || h[2] != 0x2F || h[3] != 0xFD || (h[4] & 0x20))
        return 0;
    unsigned long long base = 1ull << (10 + (h[5] >> 3));
    return base + base / 8 * (h[5] & 7);
}

static int zstd_fail(as_instream *in, size_t r, size_t ipos)
{
    if (ZSTD_getErrorCode(r) == ZSTD_error_frameParameter_windowTooLarge) {
        unsigned long long want = frame_window(in->raw + in->raw_pos, in->raw_len - in->raw_pos);
        int top = ZSTD_dParam_getBounds(ZSTD_d_windowLogMax).upperBound, log = top;
        if (want > 1ull << top)
            return stream_fail(in, AS_ECORRUPT,
                               "zstd frame asks for a %llu MiB window, more than zstd decodes "
                               "(%llu MiB at most): not a file zstd wrote",
                               want >> 20, (1ull << top) >> 20);
        while (log > 10 && want && (1ull << (log - 1)) >= want)
            log--;
        return stream_fail(in, AS_ENOMEM,
                           "zstd frame needs a %llu MiB window (zstd --long?), above the "
                           "limit of %u MiB: allow it with ALLOCSIM_ZSTD_WINDOW_LOG=%d, or "
                           "recompress without --long",
                           want >> 20, (1u << in->wlog) >> 20, log);
    }
    uint64_t a = in->raw_done, b = in->raw_done + (ipos - in->raw_pos), bs, be;
    if (find_block(in, a, &bs, &be) == 0)
        return stream_fail(in, AS_ECORRUPT,
                           "corrupt zstd data in the block at compressed bytes %llu to %llu: %s",
                           (unsigned long long)bs, (unsigned long long)be, ZSTD_getErrorName(r));
    return stream_fail(in, AS_ECORRUPT,
                       "corrupt zstd data between compressed bytes %llu and %llu: %s",
                       (unsigned long long)(a > in->frame_start + IN_ZFEED ? a - IN_ZFEED : 0),
                       (unsigned long long)b, ZSTD_getErrorName(r));
}

/* Appends at least one byte to the window, or sets zdone/raw_eof. */
/* Plain file input read into the window itself (window_fill made room). */
static int read_direct(as_instream *in)
{
    for (;;) {
        ssize_t r = read(in->fd, in->buf + in->len, in->cap - in->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return stream_fail(in, AS_EIO, "read failed: %s", strerror(errno));
        if (r == 0)
            in->raw_eof = in->zdone = 1;
        in->len += (size_t)r;
        in->raw_done += (size_t)r;
        return 0;
    }
}

/* A small zstd file decoded in one call straight into the window: a frame written through a
 * pipe names no content size, so the streamed path gets zstd's own window of the size the
 * frame asks for (8 MiB at level 19), decodes into it and copies out of it; here neither. It
 * is taken at the stream's start when the raw buffer holds the whole input (a regular file
 * or memory), every frame's window is within the limit (so that the streamed path's message
 * stays the one for a larger one) and ZSTD_decompressBound, the frames' stated sizes or
 * 128 KiB for each block, is at most the streamed path's first window (IN_ONESHOT): the
 * window is sized from the blocks present, never from a stated size alone, and no larger
 * than the streamed path would make it. On any zstd error nothing is kept and the streamed
 * path decodes from the start, so its messages (the block named, a truncation) are the
 * only ones. Returns 1 when decoded, 0 when not taken, < 0 on a read error. */
static int oneshot(as_instream *in)
{
    if (in->raw_done || in->len || in->raw_pos || (!in->mem && !in->raw_total) ||
        in->raw_total > in->raw_cap)
        return 0;
    while (!in->raw_eof && in->raw_len < in->raw_cap)
        if (raw_fill(in) < 0)
            return in->err.code;
    if (!in->raw_eof)
        return 0;
    const uint8_t *src = in->raw;
    size_t n = in->raw_len;
    for (size_t at = 0; at < n;) {
        ZSTD_frameHeader fh;
        if (ZSTD_getFrameHeader(&fh, src + at, n - at) != 0 ||
            (fh.frameType == ZSTD_frame && fh.windowSize > 1ull << in->wlog))
            return 0;
        size_t fl = ZSTD_findFrameCompressedSize(src + at, n - at);
        if (ZSTD_isError(fl))
            return 0;
        at += fl;
    }
    unsigned long long bound = ZSTD_decompressBound(src, n);
    if (bound == ZSTD_CONTENTSIZE_ERROR || bound > IN_ONESHOT)
        return 0;
    size_t cap = bound ? (size_t)bound : 1;
    if (in->cap < cap) {
        uint8_t *nb = realloc(in->buf, cap);
        if (!nb)
            return 0;
        in->buf = nb;
        in->cap = cap;
    }
    size_t r = ZSTD_decompressDCtx(in->zd, in->buf, in->cap, src, n);
    if (ZSTD_isError(r)) {
        ZSTD_DCtx_reset(in->zd, ZSTD_reset_session_only);
        return 0;
    }
    in->len = r;
    in->raw_pos = n;
    in->raw_done = n;
    in->zret = 0;
    in->zdone = 1;
    /* The stream is decoded: the decoder's context (about 100 KiB, some 7 pages of it
     * written) goes back to the heap now, where the parser's first tables reuse its pages
     * instead of touching new ones (a snapshot's start-up: 7 page faults fewer). A rewind
     * makes another. */
    ZSTD_freeDStream(in->zd);
    in->zd = NULL;
    return 1;
}

static int window_fill(as_instream *in)
{
    if (in->failed)
        return in->err.code;
    if (in->zstd) {
        int rc = oneshot(in);
        if (rc)
            return rc < 0 ? rc : 0;
    }
    if (window_reserve(in, IN_CHUNK / 2) < 0)
        return in->err.code;
    if (!in->zstd) {
        /* Plain input: once the raw buffer is used up, a file is read straight into the
         * window (no copy through raw); before that, and from memory, raw bytes move. */
        if (in->raw_pos == in->raw_len && !in->mem && !in->raw_eof)
            return read_direct(in);
        if (in->raw_pos == in->raw_len && raw_fill(in) < 0)
            return in->err.code;
        size_t k = in->raw_len - in->raw_pos;
        if (k > in->cap - in->len)
            k = in->cap - in->len;
        memcpy(in->buf + in->len, in->raw + in->raw_pos, k);
        in->len += k;
        in->raw_pos += k;
        in->raw_done += k;
        if (k == 0 && in->raw_eof)
            in->zdone = 1;
        return 0;
    }
    while (!in->zdone) {
        if (in->raw_pos == in->raw_len) {
            if (raw_fill(in) < 0)
                return in->err.code;
            if (in->raw_pos == in->raw_len && in->raw_eof) {
                if (in->zret != 0)
                    return stream_fail(in, AS_ECORRUPT,
                                       "truncated zstd stream (ends inside a frame, after "
                                       "%llu compressed bytes)",
                                       (unsigned long long)in->raw_done);
                in->zdone = 1;
                return 0;
            }
        }
        /* Input in small pieces: zstd decodes a block once it has all of it, so the call that
         * fails tells, to within IN_ZFEED bytes, where the bad block ends. */
        size_t feed = in->raw_len - in->raw_pos > IN_ZFEED ? in->raw_pos + IN_ZFEED : in->raw_len;
        ZSTD_inBuffer ib = {in->raw, feed, in->raw_pos};
        ZSTD_outBuffer ob = {in->buf, in->cap, in->len};
        if (in->zret == 0 || in->raw_done == 0)
            in->frame_start = in->raw_done; /* a new frame begins here */
        size_t r = ZSTD_decompressStream(in->zd, &ob, &ib);
        if (ZSTD_isError(r))
            return zstd_fail(in, r, feed);
        in->raw_done += ib.pos - in->raw_pos;
        in->raw_pos = ib.pos;
        in->zret = r;
        int produced = ob.pos > in->len;
        in->len = ob.pos;
        if (produced)
            return 0;
        /* No output: zstd consumed input (header, skippable frame) or needs more. */
    }
    return 0;
}

/* A mapped file cut shorter while read: its missing bytes read as 0 since, so the stream
 * fails, and this message stands over whatever a decoder made of the zeros. */
static int cut_check(as_instream *in)
{
    if (!in->map || in->failed || !as_inmap_cut(in->map))
        return 0;
    return stream_fail(in, AS_EIO,
                       "the file changed while it was read: it is now shorter than the %llu "
                       "bytes it had when opened",
                       (unsigned long long)in->raw_total);
}

long as_instream_peek(as_instream *in, const void **buf, size_t n)
{
    if (cut_check(in) < 0)
        return in->err.code;
    if (n > IN_MAX_PEEK)
        n = IN_MAX_PEEK;
    if (in->len - in->pos < n && map_more(in) && map_window(in, n) < 0)
        return in->err.code;
    while (in->len - in->pos < n && !in->zdone) {
        if (in->cap - in->pos < n && window_reserve(in, n - (in->len - in->pos)) < 0)
            return in->err.code;
        if (window_fill(in) < 0)
            return in->err.code;
    }
    if (in->failed && in->len - in->pos < n)
        return in->err.code;
    *buf = in->buf + in->pos;
    size_t avail = in->len - in->pos;
    return (long)(avail < n ? avail : n);
}

long as_instream_read(as_instream *in, void *dst, size_t n)
{
    size_t got = 0;
    uint8_t *d = dst;
    while (got < n) {
        if (in->pos == in->len) {
            if (map_more(in)) {
                if (map_window(in, n - got) < 0)
                    return got ? (long)got : in->err.code;
                continue;
            }
            if (in->zdone)
                break;
            if (window_fill(in) < 0)
                return got ? (long)got : in->err.code;
            continue;
        }
        size_t k = in->len - in->pos;
        if (k > n - got)
            k = n - got;
        memcpy(d + got, in->buf + in->pos, k);
        in->pos += k;
        got += k;
    }
    return (long)got;
}

void as_instream_skip(as_instream *in, size_t n)
{
    size_t avail = in->len - in->pos;
    in->pos += n < avail ? n : avail;
}

uint64_t as_instream_offset(const as_instream *in)
{
    return in->base + in->pos;
}
const char *as_instream_path(const as_instream *in)
{
    return in->path;
}
int as_instream_is_zstd(const as_instream *in)
{
    return in->zstd;
}

void as_instream_progress(const as_instream *in, uint64_t *done, uint64_t *total)
{
    if (done)
        *done = in->direct ? in->base + in->pos : in->raw_done;
    if (total)
        *total = in->raw_total;
}

const as_trace_error *as_instream_error(as_instream *in)
{
    cut_check(in);
    return in->failed ? &in->err : NULL;
}

void as_instream_mark_event(as_instream *in, uint64_t offset, uint64_t line)
{
    in->mark_off = offset;
    in->mark_line = line;
}

void as_instream_take_mark(as_instream *in, uint64_t *offset, uint64_t *line)
{
    *offset = in->mark_off;
    *line = in->mark_line;
    in->mark_off = UINT64_MAX;
    in->mark_line = 0;
}

int as_instream_fail(as_instream *in, as_trace_error *err, int code, const char *fmt, ...)
{
    cut_check(in);
    if (in->failed) {
        /* The stream itself broke (I/O, corrupt zstd): that is the root cause. */
        if (err)
            *err = in->err;
        return in->err.code;
    }
    va_list ap;
    va_start(ap, fmt);
    as_trace_vset_error(err, code, in->path, as_instream_offset(in), 0, fmt, ap);
    va_end(ap);
    return code;
}

/* A zstd decoder for the stream, with its window limit. 0, or -1 out of memory. */
static int zstd_new(as_instream *in)
{
    in->zd = ZSTD_createDStream();
    if (!in->zd)
        return -1;
    ZSTD_initDStream(in->zd);
    ZSTD_DCtx_setParameter(in->zd, ZSTD_d_windowLogMax, in->wlog);
    return 0;
}

static int stream_init(as_instream *in, as_trace_error *err)
{
    in->mark_off = UINT64_MAX;
    if (!in->mem && map_file(in))
        return 0;
    if (!in->mem) {
        /* A small file's bytes in a buffer of its size and a page (room for the read that
         * sees its end), not a 128 KiB mapping made and unmapped for 2 KiB. */
        in->raw_cap = IN_CHUNK;
        if (in->raw_total && in->raw_total < IN_CHUNK - 4096)
            in->raw_cap = (size_t)in->raw_total + 4096;
        in->raw = malloc(in->raw_cap);
        if (!in->raw)
            return as_trace_set_error(err, AS_ENOMEM, in->path, 0, 0, "out of memory");
    }
    /* Sniff the zstd magic on the raw bytes. */
    while (in->raw_len - in->raw_pos < 4 && !in->raw_eof)
        if (raw_fill(in) < 0) {
            if (err)
                *err = in->err;
            return in->err.code;
        }
    if (in->raw_len - in->raw_pos >= 4 && zstd_magic(in->raw + in->raw_pos)) {
        /* Frames may ask for big windows (--long): the reader's option decides. */
        in->wlog = AS_ZSTD_WINDOW_LOG_DEFAULT;
        in->zstd = 1;
        if (zstd_new(in) < 0)
            return as_trace_set_error(err, AS_ENOMEM, in->path, 0, 0, "out of memory");
        in->zret = 1;
    } else if (in->mem) {
        go_direct(in, in->mem, in->raw_len, 0);
    }
    return 0;
}

int as_instream_open(const char *path, as_instream **out, as_trace_error *err)
{
    *out = NULL;
    as_instream *in = calloc(1, sizeof *in);
    if (!in)
        return as_trace_set_error(err, AS_ENOMEM, path, 0, 0, "out of memory");
    snprintf(in->path, sizeof in->path, "%s", path);
    if (strcmp(path, "-") == 0) {
        in->fd = 0;
        snprintf(in->path, sizeof in->path, "<stdin>");
    } else {
        in->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (in->fd < 0) {
            int rc = as_trace_set_error(err, AS_EIO, path, UINT64_MAX, 0, "cannot open: %s",
                                        strerror(errno));
            free(in);
            return rc;
        }
        in->own_fd = 1;
        struct stat sb;
        if (fstat(in->fd, &sb) == 0) {
            if (S_ISDIR(sb.st_mode)) {
                int rc = as_trace_set_error(err, AS_EIO, path, UINT64_MAX, 0,
                                            "cannot read: is a directory");
                as_instream_close(in);
                return rc;
            }
            if (S_ISREG(sb.st_mode))
                in->raw_total = (uint64_t)sb.st_size;
        }
    }
    int rc = stream_init(in, err);
    if (rc < 0) {
        as_instream_close(in);
        return rc;
    }
    *out = in;
    return 0;
}

int as_instream_open_mem(const void *data, size_t n, const char *name, as_instream **out,
                         as_trace_error *err)
{
    *out = NULL;
    as_instream *in = calloc(1, sizeof *in);
    if (!in)
        return as_trace_set_error(err, AS_ENOMEM, name, 0, 0, "out of memory");
    snprintf(in->path, sizeof in->path, "%s", name ? name : "<memory>");
    in->fd = -1;
    in->mem = data;
    in->raw = (uint8_t *)(uintptr_t)data; /* never written: raw_fill does not run on mem */
    in->raw_len = in->raw_cap = n;
    in->raw_eof = 1;
    in->raw_total = n;
    int rc = stream_init(in, err);
    if (rc < 0) {
        as_instream_close(in);
        return rc;
    }
    *out = in;
    return 0;
}

int as_instream_set_window_log(as_instream *in, int log, as_trace_error *err)
{
    if (log < 10 || log > 31)
        return as_trace_set_error(err, AS_EUSAGE, in->path, UINT64_MAX, 0,
                                  "zstd window log %d is out of range (10 to 31)", log);
    in->wlog = log;
    if (in->zd && ZSTD_isError(ZSTD_DCtx_setParameter(in->zd, ZSTD_d_windowLogMax, log)))
        return as_trace_set_error(err, AS_EUSAGE, in->path, UINT64_MAX, 0,
                                  "zstd refuses window log %d", log);
    return 0;
}

int as_instream_rewindable(const as_instream *in)
{
    return in->direct || in->mem || lseek(in->fd, 0, SEEK_CUR) >= 0;
}

int as_instream_rewind(as_instream *in, as_trace_error *err)
{
    if (in->failed || cut_check(in) < 0) {
        if (err)
            *err = in->err;
        return in->err.code;
    }
    if (in->direct) {
        in->pos = 0;
        if (in->map && in->base) {
            in->base = 0;
            in->len = 0; /* the next peek maps the file's first bytes */
        }
        return 0;
    }
    if (!in->mem) {
        if (lseek(in->fd, 0, SEEK_SET) != 0)
            return as_trace_set_error(err, AS_EIO, in->path, UINT64_MAX, 0,
                                      "this input must be read twice (a long snapshot) and "
                                      "cannot be: %s; give it as a file",
                                      errno == ESPIPE ? "it is a pipe" : strerror(errno));
        in->raw_len = 0;
        in->raw_eof = 0;
    }
    in->raw_pos = 0;
    in->raw_done = 0;
    in->pos = in->len = 0;
    in->base = 0;
    in->zdone = 0;
    if (in->zstd) {
        if (in->zd)
            ZSTD_DCtx_reset(in->zd, ZSTD_reset_session_only);
        else if (zstd_new(in) < 0)
            return as_trace_set_error(err, AS_ENOMEM, in->path, UINT64_MAX, 0, "out of memory");
        in->zret = 1;
    }
    return 0;
}

void as_instream_close(as_instream *in)
{
    if (!in)
        return;
    if (in->own_fd)
        close(in->fd);
    if (!in->mem)
        free(in->raw);
    if (!in->direct)
        free(in->buf);
    as_inmap_close(in->map);
    ZSTD_freeDStream(in->zd);
    free(in);
}

int as_instream_peek_line(as_instream *in, size_t max, as_inline *l, as_trace_error *err)
{
    size_t want = 4096;
    for (;;) {
        const void *p;
        long n = as_instream_peek(in, &p, want);
        if (n < 0)
            return as_instream_fail(in, err, (int)n, "read failed");
        l->off = as_instream_offset(in);
        if (n == 0)
            return AS_TRACE_EOF;
        const char *nl = memchr(p, '\n', (size_t)n);
        if (nl || (size_t)n < want) {
            l->p = p;
            l->len = nl ? (size_t)(nl - (const char *)p) : (size_t)n;
            l->consume = l->len + (nl ? 1 : 0);
            l->nul = memchr(p, '\0', l->len);
            return l->nul ? AS_INLINE_NUL : 0;
        }
        if (want >= max) {
            l->p = p;
            return AS_INLINE_TOO_LONG;
        }
        want *= 2;
    }
}
