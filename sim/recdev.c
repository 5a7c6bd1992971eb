/*
 * recdev.c - the device at a recorded run's addresses (recdev.h). Invariant: reserved is the
 * sum of what was reserved and mapped less what was released and unmapped; va holds the
 * address ranges reserved and not yet released.
 */
#include "recdev.h"

#include <stdlib.h>

#include "grow.h"
#include "knobs.h"

#define MAX_VA 64 /* address ranges held at once (expandable segments: one per stream and pool) */

struct as_recdev {
    as_recdev_opts o;
    size_t next; /* where to look for the next segment_alloc */
    size_t start_next, start_va_next;
    uint64_t fresh; /* addresses past everything recorded, for extra segments */
    uint64_t reserved, peak, cur_alloc;
    int log_on;
    as_recdev_ev *got;
    size_t ngot, cap;
    uint64_t va[MAX_VA][2];
    unsigned nva;
};

static void rd_log(as_recdev *d, int action, uint64_t addr, uint64_t size)
{
    if (!d->log_on)
        return;
    if (d->reserved > d->peak)
        d->peak = d->reserved;
    if (as_grow((void **)&d->got, &d->cap, d->ngot + 1, sizeof *d->got, 256) < 0)
        return; /* the comparison then sees fewer events: reported, not hidden */
    d->got[d->ngot++] = (as_recdev_ev){d->cur_alloc, addr, size, action};
}

static int rd_reserve(void *c, uint64_t size, uint64_t *addr)
{
    as_recdev *d = c;
    if (d->start_next < d->o.nstart) {
        *addr = d->o.start_addr[d->start_next++];
    } else {
        while (d->next < d->o.n && d->o.want[d->next].action != AS_SNAP_SEG_ALLOC)
            d->next++;
        if (d->next < d->o.n) {
            *addr = d->o.want[d->next++].addr;
        } else {
            *addr = d->fresh;
            d->fresh += as_align_up(size, AS_DEV_GRANULARITY);
        }
    }
    d->reserved += size;
    rd_log(d, AS_DEV_SEGMENT_ALLOC, *addr, size);
    return AS_DEV_OK;
}

/* A release or an unmap: reserved goes down by size. */
static int rd_less(void *c, int action, uint64_t addr, uint64_t size)
{
    as_recdev *d = c;
    d->reserved -= size;
    rd_log(d, action, addr, size);
    return AS_DEV_OK;
}

static int rd_release(void *c, uint64_t addr, uint64_t size)
{
    return rd_less(c, AS_DEV_SEGMENT_FREE, addr, size);
}

/* cuMemAddressReserve as the recorded run answered it: the start pool's bases first, then
 * the next recorded mapping outside the ranges held. */
static int rd_va(void *c, uint64_t size, uint64_t *addr)
{
    as_recdev *d = c;
    if (d->nva == MAX_VA)
        return AS_EINVAL;
    *addr = d->fresh;
    if (d->start_va_next < d->o.nstart_va) {
        *addr = d->o.start_va[d->start_va_next++];
    } else {
        for (size_t i = 0; i < d->o.n; i++) {
            if (d->o.want[i].action != AS_SNAP_SEG_MAP)
                continue;
            int inside = 0;
            for (unsigned k = 0; k < d->nva; k++)
                inside |= d->o.want[i].addr >= d->va[k][0] && d->o.want[i].addr < d->va[k][1];
            if (!inside) {
                *addr = d->o.want[i].addr;
                break;
            }
        }
        if (*addr == d->fresh)
            d->fresh += as_align_up(size, AS_DEV_GRANULARITY);
    }
    d->va[d->nva][0] = *addr;
    d->va[d->nva++][1] = *addr + size;
    return AS_DEV_OK;
}

static int rd_va_release(void *c, uint64_t addr, uint64_t size)
{
    as_recdev *d = c;
    (void)size;
    for (unsigned k = 0; k < d->nva; k++)
        if (d->va[k][0] == addr) {
            d->nva--;
            d->va[k][0] = d->va[d->nva][0];
            d->va[k][1] = d->va[d->nva][1];
            return AS_DEV_OK;
        }
    return AS_EINVAL;
}

static int rd_map(void *c, uint64_t addr, uint64_t size)
{
    as_recdev *d = c;
    d->reserved += size;
    rd_log(d, AS_DEV_SEGMENT_MAP, addr, size);
    return AS_DEV_OK;
}

static int rd_unmap(void *c, uint64_t addr, uint64_t size)
{
    return rd_less(c, AS_DEV_SEGMENT_UNMAP, addr, size);
}

/* A stitched mapping takes no memory, and a PyTorch snapshot records none. */
static int rd_alias(void *c, uint64_t dst, uint64_t src, uint64_t size)
{
    (void)c, (void)dst, (void)src, (void)size;
    return AS_DEV_OK;
}

static int rd_unalias(void *c, uint64_t addr, uint64_t size)
{
    (void)c, (void)addr, (void)size;
    return AS_DEV_OK;
}

static uint64_t rd_capacity(void *c)
{
    return ((as_recdev *)c)->o.capacity;
}

static uint64_t rd_reserved(void *c)
{
    return ((as_recdev *)c)->reserved;
}

static int rd_cap_test(void *c, as_cap_pred pred, const void *arg, int *yes)
{
    *yes = pred(arg, rd_capacity(c));
    return 0;
}

/* The recorded addresses already say where the streams' pages put the segments. */
static int rd_streams(void *c, uint32_t n)
{
    (void)c;
    (void)n;
    return AS_ENOSYS;
}

static const as_device_ops rec_ops = {
    .abi = AS_DEVICE_ABI,
    .reserve = rd_reserve,
    .release = rd_release,
    .va_reserve = rd_va,
    .va_release = rd_va_release,
    .map = rd_map,
    .unmap = rd_unmap,
    .alias = rd_alias,
    .unalias = rd_unalias,
    .capacity = rd_capacity,
    .cap_test = rd_cap_test,
    .reserved = rd_reserved,
    .streams = rd_streams,
};

int as_recdev_create(const as_recdev_opts *o, as_recdev **out)
{
    as_recdev *d = calloc(1, sizeof *d);
    *out = d;
    if (!d)
        return AS_ENOMEM;
    d->o = *o;
    uint64_t top = o->above;
    for (size_t i = 0; i < o->n; i++)
        if (o->want[i].addr + o->want[i].size > top)
            top = o->want[i].addr + o->want[i].size;
    d->fresh = as_align_up(top + (1ull << 30), 1ull << 30);
    return 0;
}

void as_recdev_destroy(as_recdev *d)
{
    if (!d)
        return;
    free(d->got);
    free(d);
}

as_device as_recdev_device(as_recdev *d)
{
    return (as_device){.ops = &rec_ops, .ctx = d};
}

void as_recdev_log(as_recdev *d, int on)
{
    if (on && !d->log_on)
        d->peak = d->reserved;
    d->log_on = on;
}

void as_recdev_at(as_recdev *d, uint64_t alloc)
{
    d->cur_alloc = alloc;
}

void as_recdev_restart(as_recdev *d)
{
    d->reserved = 0;
    d->nva = 0;
    d->start_next = d->o.nstart;
    d->start_va_next = d->o.nstart_va;
}

const as_recdev_ev *as_recdev_events(const as_recdev *d, size_t *n)
{
    *n = d->ngot;
    return d->got;
}

uint64_t as_recdev_peak(const as_recdev *d)
{
    return d->peak > d->reserved ? d->peak : d->reserved;
}
