/*
 * trace.h - the allocsim event model and the streaming trace reader/writer.
 *
 * A trace is a sequence of events (ALLOC, FREE, FREE_REQ, EMPTY_CACHE, MARK). Allocation
 * ids are ordinals: the k-th ALLOC of a trace has id k, and FREE/FREE_REQ name that k.
 * Readers decode as a stream, in memory bounded by the number of live allocations, and
 * validate every event (a free of an unknown or already freed id, a zero or absurd size
 * are errors that name the file and the byte or event offset).
 *
 * This module depends on nothing else in the project.
 */
#ifndef AS_TRACES_TRACE_H
#define AS_TRACES_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "units.h" /* as_parse_size: sizes in the text format and generator knobs */

/* Return codes: 0, AS_TRACE_EOF (> 0: the normal end of a stream, a result), or a negative
 * code of the one error space (error.h): AS_EIO (open/read/write failed, errno in the
 * message), AS_EFORMAT (not a recognised format, or a bad header/version), AS_ECORRUPT
 * (malformed or truncated content), AS_EINVAL (a semantically invalid event: unknown id,
 * double free, bad size), AS_ENOMEM (host memory, or a reader's safety limit), AS_EUSAGE
 * (API misuse, unknown generator or knob). */
enum {
    AS_TRACE_OK = 0,
    AS_TRACE_EOF = 1,
};

typedef enum as_op {
    AS_OP_ALLOC = 0,       /* id size stream: a request for memory */
    AS_OP_FREE = 1,        /* id: the block goes back to the allocator now */
    AS_OP_FREE_REQ = 2,    /* id: program let go, a stream still uses it; FREE follows */
    AS_OP_EMPTY_CACHE = 3, /* the program called empty_cache(); with pool k: private pool k
                              was released (its last graph or MemPool gone) and emptied */
    AS_OP_MARK = 4,        /* label: iteration boundary or annotation */
} as_op;

#define AS_TIME_NONE INT64_MIN      /* event carries no timestamp */
#define AS_MAX_ALLOC_SIZE (1ull << 48) /* 256 TiB: larger requests are refused as absurd */
#define AS_MAX_LABEL 255            /* bytes in a MARK label, excluding the NUL */
#define AS_MAX_STREAMS 65536        /* distinct streams in a trace, the default 0 included */

typedef struct as_event {
    as_op op;
    uint32_t site;   /* ALLOC: its call site in the reader's site table (1..), 0 = unknown;
                        else 0 (fits the padding after op) */
    uint64_t id;     /* ALLOC: its ordinal; FREE/FREE_REQ: the ordinal it frees; else 0 */
    uint64_t size;   /* ALLOC: unrounded bytes requested (1..AS_MAX_ALLOC_SIZE); FREE*: the
                        size of the allocation it frees (filled by the reader); else 0 */
    uint64_t stream; /* ALLOC: the stream (a cudaStream_t value, 0 = default); FREE*: the
                        allocation's stream (filled by the reader); else 0 */
    int64_t time_us; /* microseconds since an arbitrary origin, or AS_TIME_NONE */
    union { /* by op, so the event stays 48 bytes */
        const char *label; /* MARK: NUL-terminated, valid until the next read */
        struct {
            uint32_t pool; /* ALLOC: the private pool serving it (a CUDA graph's or a
                              MemPool's: 1.., FORMAT.md), 0 = the default pool;
                              EMPTY_CACHE: 0 = empty_cache() (the default pool and every
                              released private pool), k = private pool k is released and
                              its free segments given back, the default pool's kept (the
                              importer's reading of a release, FORMAT.md); FREE*: zero */
            uint32_t slot; /* ALLOC, FREE*: the allocation's live slot, set by the reader:
                              a dense number below the trace's peak live count, taken at
                              the ALLOC and given back at its FREE (the most recently given
                              back is taken first), so per-allocation state can live in an
                              array indexed by it (the engine's runs); EMPTY_CACHE: 0 */
        };
    };
} as_event;

/* ---- Call sites --------------------------------------------------------------------- */

/* A stack frame as PyTorch records it: {filename, line, name}. */
typedef struct as_frame {
    const char *filename; /* NUL-terminated, non-empty in practice */
    const char *name;     /* function name (Python), or a C++ symbol with stacks="all" */
    uint32_t line;
} as_frame;

/* A per-trace table of call sites (sites.c): each site is a stack of frames, innermost
 * first; strings, frames and stacks are each stored once (memory follows the distinct
 * content, never the number of ALLOCs). Sites are numbered 1..count in the order first
 * interned; 0 means "unknown" (no frames were recorded). */
typedef struct as_sites as_sites;

#define AS_MAX_STACK 4096         /* frames in one site's stack */
#define AS_MAX_SITES (1u << 30)   /* sites, frames and strings in one table, each */
#define AS_MAX_FRAME_STR 4096     /* bytes in a frame's file or function name */

int as_sites_new(as_sites **out);
void as_sites_free(as_sites *s);
/* Interns frames[0..n) (innermost first): *site is its number (an existing one when the
 * same stack was interned before); n == 0 gives site 0. AS_EINVAL for n > AS_MAX_STACK or
 * a NULL string, AS_ENOMEM. */
int as_sites_intern(as_sites *s, const as_frame *frames, size_t n, uint32_t *site);
/* The two steps of as_sites_intern, for decoders that read a frame table first: a frame's
 * number (0..nframes-1), then a stack of frame numbers. */
int as_sites_intern_frame(as_sites *s, const as_frame *f, uint32_t *fid);
int as_sites_intern_ids(as_sites *s, const uint32_t *fids, size_t n, uint32_t *site);
uint32_t as_sites_count(const as_sites *s);   /* sites: 1..count (0 for NULL) */
uint32_t as_sites_nframes(const as_sites *s); /* distinct frames: 0..nframes-1 */
/* Frame fid's strings (valid until the table changes). AS_EINVAL when out of range. */
int as_sites_frame(const as_sites *s, uint32_t fid, as_frame *out);
/* Site's stack: its frame numbers, innermost first, and their count (0 for site 0 or out of
 * range). Valid until the table changes. */
size_t as_sites_stack(const as_sites *s, uint32_t site, const uint32_t **fids);
size_t as_sites_memory(const as_sites *s); /* host bytes held */
/* Appends every site of src to dst (src's numbering is kept when dst starts empty). */
int as_sites_copy(as_sites *dst, const as_sites *src);
/* 1 for a frame of PyTorch's own code: a Python file inside the torch package, or one of
 * the C++/interpreter frames memory_viz's frameFilter hides (see FORMAT.md). */
int as_frame_is_internal(const as_frame *f);
/* 1 for a frame of the stack recorder (gather_with_cpp and what it calls) or of the caching
 * allocator itself: the frames between a request and the code that made it. */
int as_frame_is_recorder(const char *name);
/* The frame that names a site for people: its innermost frame outside PyTorch's own code
 * (as_frame_is_internal), or the innermost when every frame is internal. Returns that
 * frame's depth (0 = innermost), or -1 for site 0 / unknown. */
int as_sites_user_frame(const as_sites *s, uint32_t site, as_frame *out);

/* Metadata: ordered key=value pairs from the header (source, device, total_memory,
 * framework, allocator_config, ...). Keys and values are NUL-terminated UTF-8 without
 * newlines; keys are [A-Za-z0-9_.-]+. */
typedef struct as_meta_kv {
    char *key;   /* the pair's one allocation, "key\0value\0" (meta.c): freed as one */
    char *value; /* points into it */
} as_meta_kv;

typedef struct as_meta {
    as_meta_kv *kv;
    size_t n, cap;
} as_meta;

int as_meta_set(as_meta *m, const char *key, const char *value); /* replaces if present */
const char *as_meta_get(const as_meta *m, const char *key);      /* NULL if absent */
int as_meta_copy(as_meta *dst, const as_meta *src);
void as_meta_free(as_meta *m);

/* Where and why decoding failed. offset is a byte offset in the (decompressed, if the
 * file is zstd) input stream; line is set for line-oriented formats (0 otherwise). */
typedef struct as_trace_error {
    int code;          /* a negative code of error.h */
    char path[256];
    uint64_t offset;   /* byte offset, or UINT64_MAX when unknown */
    uint64_t line;     /* 1-based line for text/CSV, else 0 */
    uint64_t event;    /* 0-based event index where it failed, or UINT64_MAX */
    char msg[256];
} as_trace_error;

/* Formats. Detection is by content, never by file name. */
typedef enum as_trace_fmt {
    AS_FMT_UNKNOWN = 0,
    AS_FMT_NATIVE,       /* allocsim binary (always inside zstd), see traces/FORMAT.md */
    AS_FMT_TEXT,         /* allocsim text, one event per line */
    AS_FMT_TORCH_PICKLE, /* torch.cuda.memory._dump_snapshot() pickle */
    AS_FMT_RMM_CSV,      /* RMM logging_resource_adaptor CSV */
} as_trace_fmt;

const char *as_trace_fmt_name(as_trace_fmt f);

/* ---- Reading ---------------------------------------------------------------------- */

typedef struct as_trace_reader as_trace_reader;

typedef struct as_reader_opts {
    int lenient;  /* RMM/pickle: count and skip bad rows/frees instead of failing */
    /* The largest zstd window accepted, as log2 of bytes (10..31): a frame asking for more
     * (zstd --long=28 and up) is refused before any memory is taken for it. 0: the
     * environment's ALLOCSIM_ZSTD_WINDOW_LOG if set, else AS_ZSTD_WINDOW_LOG_DEFAULT. */
    int zstd_window_log;
    uint64_t max_pickle_bytes;  /* snapshot pickles: decompressed bytes read (0: 16 GiB) */
    uint64_t max_pickle_memory; /* snapshot pickles: parser memory (0: 1 GiB) */
    uint64_t max_pickle_buffered; /* snapshot pickles: events logged from the first pass;
                                     a longer trace is read twice (0: no limit) */
    /* Snapshot pickles: read device_traces[device] when device_set; otherwise the one
     * device with a trace (a snapshot tracing several is an error that lists them). */
    int device_set;
    unsigned device;
    int pickle_vm_only; /* snapshot pickles: the general pickle VM alone, without its fast
                           paths (tests and fuzzers compare the two) */
} as_reader_opts;

#define AS_ZSTD_WINDOW_LOG_DEFAULT 27 /* 128 MiB: zstd up to level 19 and --long=27 */

/* Opens path ("-" is stdin), detects the format (unwrapping zstd first), reads the header.
 * On failure returns < 0 and fills *err (if non-NULL); *out is NULL. A regular file of a
 * MiB or more with plain (not zstd) content is read from a mapping of a few MiB of it at a
 * time; the first such open installs a SIGBUS handler (chained to the one before), so that
 * a file cut shorter while it is read fails with AS_EIO ("the file changed while it was
 * read") instead of killing the process. */
int as_trace_open(const char *path, const as_reader_opts *opts, as_trace_reader **out,
                  as_trace_error *err);
/* The same over a memory buffer (not copied; it must outlive the reader); name is used in
 * messages. For fuzzers and tests. */
int as_trace_open_mem(const void *data, size_t n, const char *name, const as_reader_opts *opts,
                      as_trace_reader **out, as_trace_error *err);
/* Next event: 0 with *ev filled, AS_TRACE_EOF at the end, < 0 on error (see _error). At
 * EOF, allocations still live are not an error (a trace may end with live memory). */
int as_trace_next(as_trace_reader *r, as_event *ev);
/* Batch form of as_trace_next, for hot loops (the native decoder fills the array in one
 * tight loop). Returns 0 with 1 <= *n <= cap events, AS_TRACE_EOF with *n == 0, or < 0
 * with *n == 0; an error met after some events is returned by the next call, after those
 * events. A MARK is always the last event of its batch and its label stays valid until the
 * next read. Calls may be mixed freely with as_trace_next. */
int as_trace_next_batch(as_trace_reader *r, as_event *evs, size_t cap, size_t *n);
const as_trace_error *as_trace_reader_error(const as_trace_reader *r);
/* e as one line, "FILE: byte B, line L, event E: MESSAGE" (the parts known; FILE is
 * fallback_path when e names none, "-" when neither does; MESSAGE as_strerror's words when
 * e has none), into buf of n bytes (truncated, always terminated). */
void as_trace_error_text(const as_trace_error *e, const char *fallback_path, char *buf,
                         size_t n);
const as_meta *as_trace_reader_meta(const as_trace_reader *r);
/* The trace's call-site table, complete from open to close (every format keeps it in the
 * header, and the snapshot importer reads the whole pickle at open). Never NULL: a trace
 * without frames has an empty table. ALLOC events name sites 1..as_sites_count. */
const as_sites *as_trace_reader_sites(const as_trace_reader *r);

/* What a torch snapshot records beside its events, for `allocsim check` and the
 * reconstruction of the pool at the trace's start (sim/check.c): the device-level entries
 * of the trace read, the segments and blocks of that device at the dump, and the blocks
 * allocated before the trace (the prehistoric ALLOCs, by id). */
enum { AS_SNAP_SEG_ALLOC, AS_SNAP_SEG_FREE, AS_SNAP_SEG_MAP, AS_SNAP_SEG_UNMAP };
/* What an entry's frames name (snap_pools.c reads capture and release from them). */
enum {
    AS_SNAP_FR_TREES = 1,    /* torch/_inductor/cudagraph_trees.py: a tree's warm-up/record */
    AS_SNAP_FR_CAPBEGIN = 2, /* torch/cuda/graphs.py capture_begin: its RNG-state tensors */
    AS_SNAP_FR_MEMPOOL = 8,  /* a C++ frame ~MemPool: a MemPool's destructor emptying it */
};
typedef struct as_snap_segev {
    uint64_t alloc;              /* the ordinal of the ALLOC being served (or the next) */
    uint64_t addr, size, stream; /* the entry's */
    uint64_t fhash;              /* a hash of its frames' content, 0 = none */
    uint32_t run;                /* segment_free/unmap: its run of such entries (1..) */
    uint8_t action;              /* AS_SNAP_SEG_* */
    uint8_t fcls;                /* AS_SNAP_FR_* its frames name */
} as_snap_segev;
enum { AS_SNAP_INACTIVE, AS_SNAP_ALLOCATED, AS_SNAP_PENDING };
typedef struct as_snap_block {
    uint64_t addr, size, requested;
    uint8_t state; /* AS_SNAP_* */
} as_snap_block;
typedef struct as_snap_seg {
    uint64_t addr, size, stream;
    int64_t pool[2]; /* segment_pool_id; (0, 0) the default pool */
    size_t first, nblocks; /* its blocks: blocks[first .. first + nblocks) */
    uint8_t small, expandable;
} as_snap_seg;
typedef struct as_snap_pre {
    uint64_t addr, requested, stream;
    uint64_t block; /* its block's size at the dump when still live there, else 0 */
} as_snap_pre;
typedef struct as_snapshot_record {
    const as_snap_segev *segev;
    size_t nsegev;
    const as_snap_seg *segs; /* at the dump, the device read, in address order */
    size_t nsegs;
    const as_snap_block *blocks;
    size_t nblocks;
    const as_snap_pre *pre; /* prehistoric allocation k is pre[k] */
    size_t npre;
    uint64_t entries; /* the device's trace entries */
    /* ALLOCs by how their pool was found (snap_pools.c; complete once the trace is read):
     * in a private pool, by their stream's one pool, ambiguous (simulated in the default). */
    uint64_t pool_allocs, pool_by_stream, pool_ambiguous;
    uint64_t pool_by_frames, pool_by_release; /* their capture frames; the release order */
    uint64_t pool_recorded;                   /* their segment's segment_pool_id */
    int have_segments, have_traces, have_settings;
} as_snapshot_record;
/* The record of a torch snapshot (valid until as_trace_close), or NULL for other formats. */
const as_snapshot_record *as_trace_reader_snapshot(const as_trace_reader *r);
as_trace_fmt as_trace_reader_format(const as_trace_reader *r);
uint64_t as_trace_reader_warnings(const as_trace_reader *r); /* lenient skips so far */
/* Bytes of input consumed so far and the total when known (else 0): for progress. */
void as_trace_reader_progress(const as_trace_reader *r, uint64_t *done, uint64_t *total);
/* What a reader has handed out so far, counted by its validator as it accepts each event,
 * so that a caller needs no pass of its own over the events (the engine's trace summary). */
typedef struct as_trace_tally {
    uint64_t events, allocs, frees, free_reqs, empty_caches, marks;
    uint64_t requested;       /* bytes the live allocations asked for, FREE_REQ'd ones out */
    uint64_t peak_requested;  /* the most `requested` has been */
    uint64_t min_request;     /* the smallest ALLOC size; 0 before the first ALLOC */
    uint64_t streams;         /* distinct streams of the ALLOCs */
    uint64_t live, peak_live; /* allocations live now (a FREE_REQ'd one until its FREE), and
                                 the most at once */
} as_trace_tally;
/* Fills *out with the tally of the events handed out. Returns 0, or 1 when as_trace_next
 * has decoded events ahead that are not handed out yet (*out then counts them too). */
int as_trace_reader_tally(const as_trace_reader *r, as_trace_tally *out);
/* Allocations live now, and the bytes of the reader's live table (memory reports, tests
 * of bounded memory). */
void as_trace_reader_live(const as_trace_reader *r, uint64_t *live, size_t *table_bytes);
void as_trace_close(as_trace_reader *r);

/* ---- Writing ---------------------------------------------------------------------- */

typedef struct as_trace_writer as_trace_writer;

/* fmt is AS_FMT_NATIVE or AS_FMT_TEXT. path "-" is stdout. The writer validates the
 * events it is given the same way a reader does. */
int as_trace_writer_open(const char *path, as_trace_fmt fmt, const as_meta *meta,
                         as_trace_writer **out, as_trace_error *err);
/* The same with a call-site table (copied; NULL or empty: none). The writer refuses an
 * ALLOC whose site is past the table (EINVAL), and sites on any other event. */
int as_trace_writer_open_sites(const char *path, as_trace_fmt fmt, const as_meta *meta,
                               const as_sites *sites, as_trace_writer **out,
                               as_trace_error *err);
int as_trace_write(as_trace_writer *w, const as_event *ev);
/* The writer's first error (path, event index, message), or NULL while there is none. */
const as_trace_error *as_trace_writer_error(const as_trace_writer *w);
/* Flushes and closes; returns the first error seen by any call, or 0. Always frees w. */
int as_trace_writer_close(as_trace_writer *w, as_trace_error *err);

/* ---- Conversion (the building blocks of `allocsim convert`) ------------------------ */

/* Copies every remaining event of r into w (metadata is w's, given at open). Returns 0,
 * or the first error (reader or writer) in *err with its path, offset and event; *events
 * (may be NULL) is the count copied. Closes neither. */
int as_trace_copy(as_trace_reader *r, as_trace_writer *w, uint64_t *events,
                  as_trace_error *err);
/* Opens in (any format, detected by content), writes out ("-" = stdout) as fmt with the
 * input's metadata (pairs in extra, if any, added or replacing), and closes both. Refuses
 * (AS_EUSAGE) to write over the input itself; removes a partial output file on
 * failure. *events (may be NULL) is the count converted. */
int as_trace_convert(const char *in, const char *out, as_trace_fmt fmt,
                     const as_reader_opts *opts, const as_meta *extra, uint64_t *events,
                     as_trace_error *err);
/* `convert --repeat N` (repeat.c): in played n times in a row as one valid trace. Each
 * pass's ids follow the last pass's, its times start 1 us after the last pass's end, and
 * allocations still live at the end of a pass (not the last) are freed there. Written to
 * a temporary file beside out and renamed into place when complete; in cannot be stdin. */
int as_trace_repeat(const char *in, const char *out, as_trace_fmt fmt, unsigned n,
                    const as_reader_opts *opts, uint64_t *events, as_trace_error *err);
/* Output format from a name: "text"/"txt" or "native"; AS_FMT_UNKNOWN otherwise. */
as_trace_fmt as_trace_fmt_parse(const char *name);
/* Default output format for a path when the user gave none: AS_FMT_TEXT for names ending
 * in ".txt" or ".text", AS_FMT_NATIVE otherwise (input is never judged by its name). */
as_trace_fmt as_trace_fmt_for_output(const char *path);

#endif
