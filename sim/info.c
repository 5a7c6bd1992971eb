/*
 * info.c - one streaming pass over a trace for `allocsim info` (info.h). The id map holds
 * only live allocations (ALLOC event index, FREE_REQ event index), so memory follows the
 * live count, never the trace length.
 */
#include "info.h"

#include <string.h>

#include "idmap.h"
#include "siterep.h"

unsigned as_info_bucket(uint64_t v)
{
    return v ? 63u - (unsigned)__builtin_clzll(v) : 0;
}

static void add_stream(as_trace_info *in, as_idmap *seen, int *saw_max, uint64_t stream,
                       uint64_t size)
{
    for (unsigned i = 0; i < in->nstreams; i++) {
        if (in->streams[i].stream == stream) {
            in->streams[i].allocs++;
            in->streams[i].bytes += size;
            return;
        }
    }
    if (in->nstreams < AS_INFO_STREAMS) {
        in->streams[in->nstreams++] = (as_info_stream){stream, 1, size};
        in->sum.streams++;
        return;
    }
    if (stream == UINT64_MAX) {
        in->sum.streams += !*saw_max;
        *saw_max = 1;
    } else if (!as_idmap_get(seen, stream)) {
        if (as_idmap_put(seen, stream, 0, 0) == 0)
            in->sum.streams++;
    }
}

int as_trace_info_compute(as_trace_reader *r, as_trace_info *in, as_trace_error *err)
{
    return as_trace_info_compute_sites(r, in, NULL, err);
}

int as_trace_info_compute_sites(as_trace_reader *r, as_trace_info *in, as_site_peak *sites,
                                as_trace_error *err)
{
    memset(in, 0, sizeof *in);
    in->first_time = in->last_time = AS_TIME_NONE;
    in->min_size = UINT64_MAX;
    as_idmap live = {0}, seen = {0};
    int saw_max = 0, rc;
    uint64_t requested = 0;
    as_event ev;
    while ((rc = as_trace_next(r, &ev)) == 0) {
        uint64_t idx = in->sum.events++;
        if (sites && as_site_peak_feed(sites, &ev, 1))
            goto nomem;
        if (ev.time_us != AS_TIME_NONE) {
            if (in->first_time == AS_TIME_NONE)
                in->first_time = ev.time_us;
            in->last_time = ev.time_us;
        }
        switch (ev.op) {
        case AS_OP_ALLOC: {
            in->sum.allocs++;
            unsigned b = as_info_bucket(ev.size);
            in->size_hist[b]++;
            in->size_bytes[b] += ev.size;
            in->total_bytes += ev.size;
            if (ev.size < in->min_size)
                in->min_size = ev.size;
            if (ev.size > in->max_size)
                in->max_size = ev.size;
            requested += ev.size;
            if (requested > in->sum.peak_requested)
                in->sum.peak_requested = requested;
            add_stream(in, &seen, &saw_max, ev.stream, ev.size);
            if (as_idmap_put(&live, ev.id, idx, UINT64_MAX))
                goto nomem;
            if (live.n > in->peak_live)
                in->peak_live = live.n;
            break;
        }
        case AS_OP_FREE_REQ: {
            in->sum.free_reqs++;
            as_idmap_ent *m = as_idmap_get(&live, ev.id);
            if (m && m->b == UINT64_MAX) {
                m->b = idx;
                requested -= ev.size;
            }
            break;
        }
        case AS_OP_FREE: {
            in->sum.frees++;
            as_idmap_ent *m = as_idmap_get(&live, ev.id);
            if (!m)
                break;
            in->life_hist[as_info_bucket(idx - m->a)]++;
            if (m->b == UINT64_MAX)
                requested -= ev.size;
            else
                in->pend_hist[as_info_bucket(idx - m->b ? idx - m->b : 1)]++;
            as_idmap_del(&live, m);
            break;
        }
        case AS_OP_EMPTY_CACHE:
            in->sum.empty_caches++;
            break;
        default:
            in->sum.marks++;
            break;
        }
    }
    if (in->min_size == UINT64_MAX)
        in->min_size = 0;
    in->sum.live_at_end = live.n;
    as_idmap_free(&live);
    as_idmap_free(&seen);
    if (rc < 0) {
        const as_trace_error *re = as_trace_reader_error(r);
        if (err && re)
            *err = *re;
        return rc;
    }
    return 0;
nomem:
    as_idmap_free(&live);
    as_idmap_free(&seen);
    if (err) {
        memset(err, 0, sizeof *err);
        err->code = AS_ENOMEM;
        err->offset = UINT64_MAX;
        err->event = in->sum.events - 1;
        strcpy(err->msg, "out of host memory");
    }
    return AS_ENOMEM;
}
