/*
 * policy.h - the allocator policy contract.
 *
 * A policy is one const table (as_policy) with designated initialisers. The engine
 * allocates its state (state_size bytes, zeroed) and passes it first to every slot.
 * A policy has no globals, never prints, never exits, is deterministic, and obtains
 * device memory only through the as_device it is given at init. Host memory per event
 * is only amortised growth of its own tables.
 *
 * Return values: 0 success, AS_POLICY_OOM (> 0) when the device/capacity cannot serve an
 * allocation (a result, not an error), or a negative code of the one error space
 * (error.h): AS_EINVAL (bad handle, bad knob value, misuse), AS_ENOMEM (host memory),
 * AS_EDEVICE (the device failed other than by OOM), AS_ECHECK (check() found a broken
 * invariant).
 *
 * This header depends only on device.h (and sim/base/error.h).
 */
#ifndef AS_POLICIES_POLICY_H
#define AS_POLICIES_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"

/* The version of as_policy and of every type in this header and device.h. Raised whenever
 * any of them changes layout or meaning; a plug-in built against another version is
 * refused (policies/README.md, "Bring your own policy"). 2: the plan slot (offline
 * policies) and as_lifetime. 3: the empty_pool slot (a private pool's release). 4: the
 * device's alias and unalias slots (device.h, AS_DEVICE_ABI 3). 5: the device's streams
 * slot (AS_DEVICE_ABI 4). */
#define AS_POLICY_ABI 5

enum {
    AS_POLICY_OK = 0,
    AS_POLICY_OOM = 1,
};

/* ---- Knobs ------------------------------------------------------------------------ */

typedef enum as_knob_type {
    AS_KNOB_INT,   /* integer in [min, max] */
    AS_KNOB_BOOL,  /* true/false, True/False, 1/0, on/off */
    AS_KNOB_FLOAT, /* real in [fmin, fmax] */
    AS_KNOB_SIZE,  /* bytes; accepts units (512, 2K, 2MiB, 1G) */
    AS_KNOB_ENUM,  /* one of the '|'-separated words in choices; value is the index */
    AS_KNOB_DIVS,  /* PyTorch roundup_power2_divisions: an int, or [MiB:n,...,>:n] */
} as_knob_type;

#define AS_DIV_INTERVALS 16 /* intervals [1 MiB * 2^k, 2 MiB * 2^k), k = 0..15 */

typedef struct as_knob {
    const char *name;  /* canonical short name: round, roundup, maxsplit, segment, ... */
    const char *alias; /* PYTORCH_CUDA_ALLOC_CONF key, or NULL */
    as_knob_type type;
    const char *unit;        /* "bytes", "MiB", "" ... for `allocsim policies` */
    int64_t def, min, max;   /* INT, BOOL, SIZE, ENUM (index); max may be INT64_MAX */
    double fdef, fmin, fmax; /* FLOAT */
    const char *choices;     /* ENUM: "none|oom|always" */
    const char *help;        /* one line */
    unsigned char fmax_open; /* FLOAT: fmax itself is refused, [fmin, fmax) */
    int64_t multiple;        /* INT: a value must be a multiple of this (0 = any) */
} as_knob;

/* One knob's value. i for INT/BOOL/SIZE/ENUM, f for FLOAT, div[] for DIVS. */
typedef struct as_knob_value {
    int set; /* 1 when given in the spec, 0 when the default */
    int64_t i;
    double f;
    uint32_t div[AS_DIV_INTERVALS];
} as_knob_value;

/* ---- Requests, blocks, stats, walk ------------------------------------------------ */

typedef struct as_request {
    uint64_t id;     /* allocation ordinal (unique per run) */
    uint64_t size;   /* unrounded bytes, >= 1 */
    uint64_t stream; /* stream value; blocks are never shared across streams where the
                        policy models streams */
    uint32_t pool;   /* private pool (CUDA graph, MemPool): 1.., 0 = the default pool;
                        policies that model pools never serve it from another pool's blocks
                        (policies/README.md says which do) */
} as_request;

typedef struct as_block {
    uint64_t addr;   /* device address of the block */
    uint64_t size;   /* bytes handed out: rounded, including any unsplit remainder */
    uint64_t handle; /* policy-private; passed back to free() */
} as_block;

/* free() flags. A FREE_REQ reaches the policy as AS_FREE_PENDING: the program is done
 * with the block but it must not be reused yet; the later FREE comes with
 * AS_FREE_COMPLETE. A plain FREE without a prior request is AS_FREE_COMPLETE alone. */
enum { AS_FREE_COMPLETE = 0, AS_FREE_PENDING = 1 };

typedef struct as_policy_stats {
    uint64_t allocated;    /* sum of as_block.size over blocks not yet freed (pending incl.) */
    uint64_t reserved;     /* bytes held from the device (segments + mapped pages) */
    uint64_t free_bytes;   /* free bytes inside reserved memory */
    uint64_t largest_free; /* largest free block usable by some request */
    uint64_t segments;     /* live device reservations (or mapped ranges) */
    uint64_t device_reserves, device_releases; /* reserve/map and release/unmap calls */
    uint64_t retries;                          /* policy-specific: e.g. PyTorch num_alloc_retries */
} as_policy_stats;

typedef enum as_walk_kind { AS_WALK_SEGMENT, AS_WALK_BLOCK } as_walk_kind;
typedef enum as_block_state {
    AS_BLOCK_FREE,
    AS_BLOCK_ALLOCATED,
    AS_BLOCK_PENDING,  /* freed by the program, awaiting FREE (record_stream) */
    AS_BLOCK_UNMAPPED, /* expandable segments: reserved address range without pages */
} as_block_state;

typedef struct as_walk_item {
    as_walk_kind kind;
    uint64_t addr, size;
    uint64_t stream;
    as_block_state state; /* blocks only */
    uint64_t id;          /* allocation id for allocated/pending blocks, else UINT64_MAX */
    const char *pool;     /* "small", "large", or NULL */
} as_walk_item;

/* Return non-zero to stop the walk (walk() then returns that value). Segments are
 * visited in address order, each followed by its blocks in address order. */
typedef int (*as_walk_fn)(void *user, const as_walk_item *item);

typedef struct as_check_failure {
    char msg[200];
} as_check_failure;

/* ---- Offline policies --------------------------------------------------------------- */

#define AS_LIFETIME_OPEN UINT64_MAX /* as_lifetime.end of an allocation never freed */

/* One ALLOC of the whole trace, for plan(). start is the 0-based trace position of the
 * ALLOC, end that of its FREE: the block is occupied over [start, end), a FREE_REQ in
 * between does not end it (the memory is not reusable before the FREE). */
typedef struct as_lifetime {
    uint64_t size; /* unrounded bytes requested */
    uint64_t stream;
    uint64_t start, end; /* end: AS_LIFETIME_OPEN when the trace ends with it live */
} as_lifetime;

/* ---- The table -------------------------------------------------------------------- */

typedef struct as_policy {
    const char *name;
    const char *summary; /* one line */
    int abi;             /* AS_POLICY_ABI */
    const as_knob *knobs;
    size_t n_knobs;
    size_t state_size;
    unsigned flags; /* AS_POLICY_F_* */

    /* cfg has n_knobs entries, already range-checked. dev outlives the state. */
    int (*init)(void *st, const as_knob_value *cfg, const as_device *dev);
    /* AS_POLICY_OOM when it cannot be served within the device's capacity. */
    int (*alloc)(void *st, const as_request *req, as_block *out);
    int (*free)(void *st, uint64_t handle, unsigned flags);
    /* Give back every cached block the policy can (PyTorch empty_cache()). NULL: no-op. */
    int (*empty_cache)(void *st);
    /* Private pool `pool` (1..) is released (no CUDA graph or MemPool uses it any more) and
     * emptied: its cached free segments go back now, the default pool's stay, and from now
     * on empty_cache (and the OOM retry) gives back the pool's free segments too (PyTorch's
     * releasePool, then emptyCache(pool)). NULL: no-op (a policy without private pools). */
    int (*empty_pool)(void *st, uint32_t pool);
    void (*stats)(const void *st, as_policy_stats *out);
    /* 0 when every invariant holds; AS_ECHECK with the first violation. */
    int (*check)(const void *st, as_check_failure *out);
    int (*walk)(const void *st, as_walk_fn fn, void *user);
    /* Releases host memory. Device memory still held is released through dev. */
    void (*fini)(void *st);
    /* Offline policies only (NULL for every online one): called once, after init and
     * before the first event, with every ALLOC of the trace in order (lt[k] is the
     * allocation with id k). lt is valid during the call only. 0 or < 0. */
    int (*plan)(void *st, const as_lifetime *lt, size_t n);
} as_policy;

/* A policy that sees the whole trace ahead (`allocsim policies` marks it offline). */
static inline int as_policy_offline(const as_policy *p)
{
    return p->plan != NULL;
}

/* A plug-in (a shared object built against these headers) exports its table with
 * AS_POLICY_EXPORT(table) at file scope; `-p plugin:PATH` loads it (policies/README.md). */
#define AS_POLICY_PLUGIN_ABI_SYMBOL "as_policy_plugin_abi"
#define AS_POLICY_PLUGIN_SYMBOL "as_policy_plugin"
#define AS_POLICY_EXPORT(table)                                                             \
    extern const int as_policy_plugin_abi;                                                  \
    const as_policy *as_policy_plugin(void);                                                \
    __attribute__((visibility("default"))) const int as_policy_plugin_abi = AS_POLICY_ABI;  \
    __attribute__((visibility("default"))) const as_policy *as_policy_plugin(void)         \
    {                                                                                       \
        return &(table);                                                                    \
    }

/* The policy applies the run's capacity itself, as an allocator-level limit read through
 * dev->ops->capacity (PyTorch's set_per_process_memory_fraction: a new segment is refused
 * when reserved + segment size > limit, but expandable pages may map a little past it).
 * The engine then gives it a device that reports the capacity as its limit without
 * refusing at it, as on the bigger physical GPU the limit was set on. */
#define AS_POLICY_F_LIMITS_ITSELF 1u

/* ---- Registry and spec parsing (registry.c, spec.c) -------------------------------- */

const as_policy *const *as_policy_list(size_t *n);
const as_policy *as_policy_find(const char *name);

/* A parsed -p SPEC: the policy and a value for every one of its knobs. */
typedef struct as_policy_spec {
    const as_policy *policy;
    as_knob_value *values; /* policy->n_knobs entries, owned */
    char *text;            /* canonical text, e.g. "torch,maxsplit=128", owned */
    char *input;           /* the text as given to the parser, e.g. "maxsplit=128", owned */
} as_policy_spec;

/* Parses "[name,]knob=value,..." or a PYTORCH_CUDA_ALLOC_CONF string
 * ("max_split_size_mb:128,roundup_power2_divisions:[256:1,>:8]"). With no name the
 * policy is "torch". On error returns AS_EINVAL and writes a one-line reason. */
int as_policy_spec_parse(const char *text, as_policy_spec *out, char *why, size_t why_len);
void as_policy_spec_free(as_policy_spec *s);
/* The values as_policy_spec_parse accepts for knob k of p (by its short name, the other
 * knobs at their defaults), as `allocsim policies` prints them: "[1, 1073741824], power
 * of 2", half-open "[0, 1)", "0 or [large_segment, 8796093022207]" (a bound that is
 * another knob's value is named), "true|false", or the choices "none|oom|always". */
void as_knob_range(const as_policy *p, size_t k, char *buf, size_t len);

#endif
