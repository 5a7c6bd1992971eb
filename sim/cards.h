/*
 * cards.h - real GPU cards and the memory a process loses outside the caching allocator.
 *
 * A card is not a capacity: the CUDA context, the libraries' workspaces (cuBLAS, cuDNN,
 * NCCL) and loaded kernels take device memory that PyTorch's allocator never sees, so the
 * capacity the allocator may use is total - outside, less the little the driver keeps of
 * its free memory (AS_DRIVER_RESERVE), in 2 MiB pages. Each preset holds the card's
 * total memory as cudaGetDeviceProperties().totalGlobalMem reports it, and where that
 * figure comes from (sim/CARDS.md is the table with its sources; tests/test_cards.c checks
 * the two agree). Each outside preset is one measured state of a process on our H200.
 *
 * Invariant: nothing here prints; the tables are const and every figure has a source.
 */
#ifndef AS_SIM_CARDS_H
#define AS_SIM_CARDS_H

#include <stddef.h>
#include <stdint.h>

/* How precise a card's total is. */
typedef enum as_card_basis {
    AS_CARD_MEASURED, /* our own measurement, exact bytes */
    AS_CARD_REPORTED, /* a public cudaGetDeviceProperties/deviceQuery report (bytes or MiB) */
    AS_CARD_DATASHEET /* NVIDIA's nominal size in GiB: an upper bound (see sim/CARDS.md) */
} as_card_basis;

typedef struct as_card {
    const char *name;  /* preset name, lower case: "a100-80gb" */
    const char *model; /* the name the device reports: "NVIDIA A100-SXM4-80GB" */
    uint64_t total;    /* totalGlobalMem, bytes */
    as_card_basis basis;
    const char *source; /* one line: where the number comes from */
} as_card;

/* Memory outside the allocator: a measured state of a process. */
typedef struct as_outside {
    const char *name; /* "train" */
    uint64_t bytes;
    const char *what; /* what it counts, one line */
} as_outside;

/* The default outside preset: what a real single-GPU training process held at its end. */
#define AS_OUTSIDE_DEFAULT "train"

const as_card *as_card_list(size_t *n);
/* A preset by name, case-insensitive, '_' or ' ' read as '-' ("A100_80GB", "h200");
 * NULL when none. */
const as_card *as_card_find(const char *name);
/* "datasheet", "reported" or "measured". */
const char *as_card_basis_name(as_card_basis b);

const as_outside *as_outside_list(size_t *n);
const as_outside *as_outside_find(const char *name);

/* A device as the command line gives it: a card (preset or bytes) and what lies outside. */
typedef struct as_device_model {
    const as_card *card;      /* NULL when the card was given as a size */
    uint64_t total;           /* the card's bytes */
    uint64_t outside;         /* bytes outside the allocator */
    const char *outside_what; /* the preset's description, or "given" (--outside BYTES) */
    const char *outside_name; /* the preset's name, or NULL */
    uint64_t reserve;         /* AS_DRIVER_RESERVE */
    uint64_t usable;          /* total - outside - reserve, down to 2 MiB: the capacity */
} as_device_model;

/* What the driver keeps of the free memory it reports: on the H200, at every one of 1,233
 * steps of filling, freeing and asking near a full device, the largest cudaMalloc that
 * succeeded was cudaMemGetInfo's free less 3.125 MiB, to the 2 MiB (replay/PLACEMENT.md
 * sections 5 and 8). The outside presets are used - reserved, so free holds it. */
#define AS_DRIVER_RESERVE (3ull * (1ull << 20) + (1ull << 17))

/* Fills d from a card text (preset name or byte quantity) and an outside text (preset
 * name or byte quantity; NULL = AS_OUTSIDE_DEFAULT). Returns 0, or AS_EINVAL with a
 * one-line reason in why (unknown card, bad size, outside >= total). */
int as_device_model_parse(const char *card, const char *outside, as_device_model *d, char *why,
                          size_t why_len);

#endif
