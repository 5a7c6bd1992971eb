/*
 * cards.c - the card and outside-memory presets (cards.h) and the device model parser.
 *
 * Every figure here is in sim/CARDS.md with its source; tests/test_cards.c parses that
 * table and checks it against these. A datasheet figure is NVIDIA's nominal size read as
 * GiB, an upper bound on totalGlobalMem (the driver keeps some back: on our H200, 141 GiB
 * nominal, 139.80 GiB reported; GDDR cards with ECC on lose about 1/16 more).
 */
#include "cards.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "report.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)

static const as_card cards[] = {
    {.name = "a100-40gb",
     .model = "NVIDIA A100-PCIE-40GB",
     .total = 42505273344ull,
     .basis = AS_CARD_REPORTED,
     .source = "deviceQuery, 42505273344 bytes (public report)"},
    {.name = "a100-80gb",
     .model = "NVIDIA A100-SXM4-80GB",
     .total = 81251 * MIB,
     .basis = AS_CARD_REPORTED,
     .source = "deviceQuery, 81251 MBytes (public report; MiB precision)"},
    {.name = "h100-80gb",
     .model = "NVIDIA H100 80GB HBM3",
     .total = 81089 * MIB,
     .basis = AS_CARD_REPORTED,
     .source =
         "torch total_memory=81089MB (torch 2.7, CUDA 12.8; 81082-81090 seen across drivers)"},
    {.name = "h100-sxm",
     .model = "NVIDIA H100 80GB HBM3",
     .total = 81089 * MIB,
     .basis = AS_CARD_REPORTED,
     .source = "the same card as h100-80gb"},
    {.name = "h100-pcie",
     .model = "NVIDIA H100 PCIe",
     .total = 80 * GIB,
     .basis = AS_CARD_DATASHEET,
     .source = "NVIDIA H100 datasheet: 80 GB HBM2e (upper bound)"},
    {.name = "h100-nvl",
     .model = "NVIDIA H100 NVL",
     .total = 94 * GIB,
     .basis = AS_CARD_DATASHEET,
     .source = "NVIDIA H100 datasheet: 94 GB HBM3 (upper bound)"},
    {.name = "h200",
     .model = "NVIDIA H200",
     .total = 150109880320ull,
     .basis = AS_CARD_MEASURED,
     .source = "our H200, CUDA 13.0: replay/data/calib-h200/info.txt"},
    {.name = "l4",
     .model = "NVIDIA L4",
     .total = 24 * GIB,
     .basis = AS_CARD_DATASHEET,
     .source = "NVIDIA L4 datasheet: 24 GB GDDR6 (upper bound; ECC on reports less)"},
    {.name = "a10",
     .model = "NVIDIA A10",
     .total = 24 * GIB,
     .basis = AS_CARD_DATASHEET,
     .source = "NVIDIA A10 datasheet: 24 GB GDDR6 (upper bound; the A10G reports 22587 MiB)"},
    {.name = "a10g",
     .model = "NVIDIA A10G",
     .total = 22587 * MIB,
     .basis = AS_CARD_REPORTED,
     .source = "torch total_memory=22587MB (public report, CUDA 13.0; MiB precision)"},
    {.name = "l40s",
     .model = "NVIDIA L40S",
     .total = 45589 * MIB,
     .basis = AS_CARD_REPORTED,
     .source = "torch total_memory=45589MB (public report; MiB precision)"},
    {.name = "rtx-4090",
     .model = "NVIDIA GeForce RTX 4090",
     .total = 24563 * MIB,
     .basis = AS_CARD_REPORTED,
     .source = "torch total_memory=24563MB (public report; MiB precision)"},
    {.name = "rtx-3090",
     .model = "NVIDIA GeForce RTX 3090",
     .total = 24268 * MIB,
     .basis = AS_CARD_REPORTED,
     .source = "torch total_memory=24268MB (public reports; 24259 also seen; MiB precision)"},
    {.name = "v100-16gb",
     .model = "Tesla V100-SXM2-16GB",
     .total = 16160 * MIB,
     .basis = AS_CARD_REPORTED,
     .source = "torch total_memory=16160MB (public reports; 16130 also seen; MiB precision)"},
    {.name = "v100-32gb",
     .model = "Tesla V100-SXM2-32GB",
     .total = 32 * GIB,
     .basis = AS_CARD_DATASHEET,
     .source = "NVIDIA V100 datasheet: 32 GB HBM2 (upper bound)"},
    {.name = "t4",
     .model = "Tesla T4",
     .total = 15843721216ull,
     .basis = AS_CARD_REPORTED,
     .source = "deviceQuery, 15843721216 bytes (public report; torch prints 15109MB, the same)"},
};

/* Measured on our H200 (CUDA 13.0, torch 2.11) as cudaMemGetInfo's used bytes minus
 * torch.cuda.memory_reserved() (issue 14); replay/measure_outside.py re-measures them. */
static const as_outside outsides[] = {
    {.name = "none", .bytes = 0, .what = "nothing outside the allocator"},
    {.name = "context",
     .bytes = 552402944ull,
     .what = "the CUDA context right after initialisation (H200, CUDA 13.0)"},
    {.name = "cublas",
     .bytes = 624000000ull,
     .what = "context + cuBLAS after an fp32 GEMM (H200, CUDA 13.0, torch 2.11)"},
    {.name = "cublas-bf16",
     .bytes = 718000000ull,
     .what = "context + cuBLAS after fp32 and bf16 GEMMs (H200, CUDA 13.0, torch 2.11)"},
    {.name = "nccl",
     .bytes = 1303000000ull,
     .what = "context + cuBLAS + NCCL after one all-reduce, world size 1 (H200, CUDA 13.0)"},
    {.name = "train-start",
     .bytes = 651000000ull,
     .what = "a GPT training process once its context existed (H200, CUDA 13.0, torch 2.11)"},
    {.name = "train",
     .bytes = 788000000ull,
     .what = "a GPT training process at its end: context, cuBLAS, kernels (H200, CUDA 13.0, "
             "torch 2.11, one GPU, no NCCL)"},
};

const as_card *as_card_list(size_t *n)
{
    *n = sizeof cards / sizeof cards[0];
    return cards;
}

const as_outside *as_outside_list(size_t *n)
{
    *n = sizeof outsides / sizeof outsides[0];
    return outsides;
}

/* Names compare case-insensitively with '_' and ' ' read as '-'. */
static int name_eq(const char *preset, const char *s)
{
    for (; *preset && *s; preset++, s++) {
        int c = tolower((unsigned char)*s);
        if (c == '_' || c == ' ')
            c = '-';
        if (c != *preset)
            return 0;
    }
    return *preset == 0 && *s == 0;
}

const as_card *as_card_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof cards / sizeof cards[0]; i++)
        if (name_eq(cards[i].name, name))
            return &cards[i];
    return NULL;
}

const as_outside *as_outside_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof outsides / sizeof outsides[0]; i++)
        if (name_eq(outsides[i].name, name))
            return &outsides[i];
    return NULL;
}

const char *as_card_basis_name(as_card_basis b)
{
    return b == AS_CARD_MEASURED ? "measured" : b == AS_CARD_REPORTED ? "reported" : "datasheet";
}

int as_device_model_parse(const char *card, const char *outside, as_device_model *d, char *why,
                          size_t why_len)
{
    *d = (as_device_model){0};
    d->card = as_card_find(card);
    if (d->card) {
        d->total = d->card->total;
    } else if (!card || as_parse_bytes(card, &d->total)) {
        snprintf(why, why_len,
                 "'%s' is neither a card ('allocsim tune --cards' lists them) nor "
                 "a size",
                 card ? card : "");
        return AS_EINVAL;
    }
    const as_outside *o = as_outside_find(outside ? outside : AS_OUTSIDE_DEFAULT);
    if (o) {
        d->outside = o->bytes;
        d->outside_what = o->what;
        d->outside_name = o->name;
    } else if (strcmp(outside, "0") == 0) {
        d->outside_what = "given";
    } else if (as_parse_bytes(outside, &d->outside)) {
        snprintf(why, why_len,
                 "--outside %s: neither a preset (none, context, cublas, "
                 "cublas-bf16, nccl, train-start, train) nor a size",
                 outside);
        return AS_EINVAL;
    } else {
        d->outside_what = "given";
    }
    if (d->outside >= d->total) {
        snprintf(why, why_len, "outside %llu B leaves nothing of the card's %llu B",
                 (unsigned long long)d->outside, (unsigned long long)d->total);
        return AS_EINVAL;
    }
    d->reserve = AS_DRIVER_RESERVE;
    uint64_t left = d->total - d->outside;
    d->usable = left > d->reserve ? (left - d->reserve) / (2ull << 20) * (2ull << 20) : 0;
    return 0;
}
