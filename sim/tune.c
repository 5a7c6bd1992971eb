/*
 * tune.c - the settings search of `allocsim tune` (tune.h): the space, one decode for
 * every setting at the card's capacity, the ranking, and the curves of the best.
 *
 * Every result is an exact engine run; the ranking is a pure function of the results
 * and the settings' texts, so shards and reruns agree.
 */
#include "tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "error.h"
#include "simdev.h"

static const char *const space_es[] = {NULL, "expandable_segments:True"};
static const char *const space_ms[] = {NULL,
                                       "max_split_size_mb:32",
                                       "max_split_size_mb:64",
                                       "max_split_size_mb:128",
                                       "max_split_size_mb:256",
                                       "max_split_size_mb:512",
                                       "max_split_size_mb:1024"};
static const char *const space_rd[] = {NULL,
                                       "roundup_power2_divisions:2",
                                       "roundup_power2_divisions:4",
                                       "roundup_power2_divisions:8",
                                       "roundup_power2_divisions:16",
                                       "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]"};
static const char *const space_gc[] = {NULL, "garbage_collection_threshold:0.6",
                                       "garbage_collection_threshold:0.8"};
#define NA(a) (sizeof(a) / sizeof((a)[0]))

void as_tune_space_free(char **confs, size_t n)
{
    for (size_t i = 0; confs && i < n; i++)
        free(confs[i]);
    free(confs);
}

int as_tune_space(char ***confs, size_t *n)
{
    size_t total = NA(space_es) * NA(space_ms) * NA(space_rd) * NA(space_gc), k = 0;
    char **c = calloc(total, sizeof *c);
    if (!c)
        return AS_ENOMEM;
    /* The default first, then by how many knobs are set, in the order above. */
    for (unsigned want = 0; want <= 4; want++)
        for (size_t a = 0; a < NA(space_es); a++)
            for (size_t b = 0; b < NA(space_ms); b++)
                for (size_t d = 0; d < NA(space_rd); d++)
                    for (size_t g = 0; g < NA(space_gc); g++) {
                        const char *parts[4] = {space_es[a], space_ms[b], space_rd[d], space_gc[g]};
                        unsigned set = 0;
                        char buf[256] = "";
                        for (int i = 0; i < 4; i++)
                            if (parts[i]) {
                                if (set++)
                                    strcat(buf, ",");
                                strcat(buf, parts[i]);
                            }
                        if (set != want)
                            continue;
                        if (!(c[k++] = strdup(buf))) {
                            as_tune_space_free(c, k);
                            return AS_ENOMEM;
                        }
                    }
    *confs = c;
    *n = k;
    return 0;
}

unsigned as_tune_knobs(const char *conf)
{
    unsigned n = 0, depth = 0;
    int any = 0;
    for (const char *p = conf; *p; p++) {
        if (*p == '[')
            depth++;
        else if (*p == ']' && depth)
            depth--;
        else if (*p == ',' && depth == 0)
            n++, any = 0;
        if (*p != ' ' && *p != ',')
            any = 1;
    }
    return conf[0] ? n + (any ? 1 : 0) : 0;
}

/* Rule 3: the default, the simpler, less device time, the text. */
static int cmp_ties(const as_tune_item *a, const as_tune_item *b)
{
    if (a->knobs != b->knobs)
        return a->knobs < b->knobs ? -1 : 1; /* the default has 0 knobs */
    if (a->device_time_s != b->device_time_s)
        return a->device_time_s < b->device_time_s ? -1 : 1;
    int c = strcmp(a->conf, b->conf);
    return c ? c : (a->index > b->index) - (a->index < b->index);
}

static int cmp_rank(const void *pa, const void *pb)
{
    const as_tune_item *a = pa, *b = pb;
    if (a->completed != b->completed)
        return a->completed ? -1 : 1;
    if (!a->completed && a->oom_alloc != b->oom_alloc)
        return a->oom_alloc > b->oom_alloc ? -1 : 1;
    if (a->peak_reserved != b->peak_reserved)
        return a->peak_reserved < b->peak_reserved ? -1 : 1;
    return cmp_ties(a, b);
}

static int cmp_curve(const void *pa, const void *pb)
{
    const as_tune_item *a = pa, *b = pb;
    if (a->fits_from != b->fits_from)
        return a->fits_from < b->fits_from ? -1 : 1; /* AS_NONE is last */
    return cmp_rank(a, b);
}

void as_tune_rank(as_tune_item *items, size_t n)
{
    qsort(items, n, sizeof *items, cmp_rank);
}

void as_tune_rank_curves(as_tune_item *items, size_t n)
{
    /* Stable partition: curved items to the front, in rank order, then sorted. */
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (items[i].has_curve) {
            as_tune_item t = items[i];
            memmove(items + k + 1, items + k, (i - k) * sizeof *items);
            items[k++] = t;
        }
    qsort(items, k, sizeof *items, cmp_curve);
    /* Room that differs by less than AS_TUNE_ROOM_TIE is a tie: of the settings that fit
     * from within it of the best, the default, then the simpler, then the cheaper leads. */
    if (k == 0 || items[0].fits_from == AS_NONE)
        return;
    size_t lead = 0;
    for (size_t i = 1; i < k && items[i].fits_from != AS_NONE &&
                       items[i].fits_from - items[0].fits_from < AS_TUNE_ROOM_TIE;
         i++)
        if (cmp_ties(&items[i], &items[lead]) < 0)
            lead = i;
    as_tune_item t = items[lead];
    memmove(items + 1, items, lead * sizeof *items);
    items[0] = t;
}

void as_tune_result_free(as_tune_result *r)
{
    for (size_t i = 0; r && i < r->n; i++) {
        free(r->items[i].conf);
        free(r->items[i].gaps);
    }
    if (r) {
        free(r->items);
        r->items = NULL;
        r->n = 0;
    }
}

static void set_why(char *why, size_t n, const char *fmt, const char *a, const char *b)
{
    if (why && n)
        snprintf(why, n, fmt, a, b);
}

/* One decode: items[0..n) at the capacity. */
static int run_group(as_trace_open_fn open, void *ou, const as_tune_opts *o, as_policy_spec *specs,
                     as_tune_item *items, size_t n, uint64_t max_live, as_tune_result *out,
                     as_trace_error *err, char *why, size_t why_len)
{
    as_engine *e = NULL;
    as_trace_reader *rd = NULL;
    as_engine_opts eo = {.threads = o->threads,
                         .max_live = max_live,
                         .no_caught_ooms = o->no_caught_ooms,
                         .streams = o->streams};
    int rc = as_engine_create(&eo, &e);
    if (rc) {
        set_why(why, why_len, "cannot create the engine%s%s", "", "");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        if ((rc = as_engine_add_run(e, &specs[i], out->capacity)) < 0) {
            set_why(why, why_len, "cannot add a run: %s%s", as_engine_errmsg(e), "");
            goto done;
        }
    if ((rc = open(ou, &rd, err)))
        goto done;
    if ((rc = as_engine_run(e, rd, err))) {
        if (rc != AS_ELIMIT && (!err || err->code == 0))
            set_why(why, why_len, "%s%s", as_engine_errmsg(e), "");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const as_run_result *r = as_engine_result(e, (unsigned)i);
        as_tune_item *it = &items[i];
        it->completed = r->completed;
        it->oom_event = r->completed ? AS_NONE : r->oom_event;
        it->oom_alloc = r->completed ? AS_NONE : r->oom_alloc;
        it->oom_size = r->completed ? AS_NONE : r->oom_size;
        it->peak_requested = r->peak_requested;
        it->peak_reserved = r->peak_reserved;
        it->device_reserves = r->device_reserves;
        it->device_releases = r->device_releases;
        it->device_time_s = r->device_time_s;
    }
    const as_trace_summary *s = as_engine_summary(e);
    out->events = s->events;
    out->allocs = s->allocs;
    out->peak_requested = s->peak_requested;
    out->decodes++;
    out->runs += n;
done:
    if (rd)
        as_trace_close(rd);
    as_engine_destroy(e);
    return rc;
}

/* The streams the process makes for this trace (tune.h) and the capacity their pages leave
 * the allocator: one scan counts the trace's streams. */
static int scan_streams(as_trace_open_fn open, void *ou, const as_tune_opts *o, as_tune_result *out,
                        as_trace_error *err, char *why, size_t why_len)
{
    out->capacity = o->capacity;
    if (!o->streams)
        return 0;
    as_engine *e = NULL;
    as_trace_reader *rd = NULL;
    as_engine_opts eo = {0};
    int rc = as_engine_create(&eo, &e);
    if (rc == 0 && (rc = open(ou, &rd, err)) == 0)
        rc = as_engine_scan(e, rd, err);
    if (rc == 0) {
        uint64_t seen = as_engine_summary(e)->streams;
        out->trace_streams = seen;
        out->decodes++;
        if (o->streams == AS_ENGINE_STREAMS_EACH) /* one per trace stream (engine.h) */
            out->streams = (uint32_t)(seen < AS_ENGINE_STREAM_IDS ? seen : AS_ENGINE_STREAM_IDS);
        else if (seen > 1) /* made at the first allocation on a second stream */
            out->streams = o->streams;
        out->stream_bytes = as_simdev_stream_memory(out->streams);
    }
    if (rd)
        as_trace_close(rd);
    as_engine_destroy(e);
    if (rc == 0 && out->stream_bytes >= o->capacity) {
        char a[24], b[24];
        snprintf(a, sizeof a, "%llu", (unsigned long long)out->stream_bytes);
        snprintf(b, sizeof b, "%llu", (unsigned long long)o->capacity);
        set_why(why, why_len, "the streams' pages (%s B) leave nothing of the capacity (%s B)", a,
                b);
        return AS_EINVAL;
    }
    out->capacity = o->capacity - out->stream_bytes;
    return rc;
}

/* items[0..n) at the capacity: one decode when the runs fit opts->memory, else groups. */
static int run_all(as_trace_open_fn open, void *ou, const as_tune_opts *o, as_policy_spec *specs,
                   as_tune_item *items, size_t n, as_tune_result *out, as_trace_error *err,
                   char *why, size_t why_len)
{
    size_t group = n;
    if (n == 0)
        return 0;
    uint64_t max_live = 0, per0 = as_engine_run_bytes(0, 0, 0);
    if (o->memory && n) {
        if (o->memory / n <= per0)
            max_live = 1;
        else
            max_live = (o->memory / n - per0) / AS_ENGINE_RUN_PER_LIVE;
    }
    int rc = run_group(open, ou, o, specs, items, n, max_live, out, err, why, why_len);
    if (rc != AS_ELIMIT)
        return rc;
    /* The trace outgrew the budget: size groups by its peak live allocations. */
    as_engine *e = NULL;
    as_trace_reader *rd = NULL;
    as_engine_opts eo = {0};
    if ((rc = as_engine_create(&eo, &e)) == 0 && (rc = open(ou, &rd, err)) == 0)
        rc = as_engine_scan(e, rd, err);
    const as_trace_summary *sum = e ? as_engine_summary(e) : NULL;
    uint64_t per = sum ? as_engine_run_bytes(sum->peak_live, sum->streams, 0) : 1;
    if (rd)
        as_trace_close(rd);
    as_engine_destroy(e);
    if (rc)
        return rc;
    out->decodes++;
    group = o->memory / per ? (size_t)(o->memory / per) : 1;
    for (size_t i = 0; i < n; i += group) {
        size_t m = n - i < group ? n - i : group;
        if ((rc = run_group(open, ou, o, specs + i, items + i, m, 0, out, err, why, why_len)))
            return rc;
    }
    return 0;
}

/* ---- garbage_collection_threshold twins ------------------------------------------------
 *
 * A setting with garbage_collection_threshold:G runs exactly as the same setting without it
 * (its twin) when its twin never reserved more than G x the capacity: torch's collection
 * acts only at a cache miss whose reserved bytes pass (size_t)(G x capacity) (torch.c
 * garbage_collect, its first question), and until a first collection the two runs are the
 * same run, so a twin whose peak reserved stays at or under that threshold means there is
 * none (every other use of G, the blocks' ages, feeds the collection alone). Such a
 * setting's results are its twin's, copied; the rest run in a second decode. The
 * threshold is taken at capacity less the streams' pages, a lower bound of the limit
 * PyTorch compares with. test_tune twins checks the copies against runs. */

/* The value of a top-level "garbage_collection_threshold:G" of conf (0 when none or not a
 * plain number in (0, 1)) and, in twin, conf without it. */
static double gc_part(const char *conf, char *twin, size_t twin_len)
{
    static const char key[] = "garbage_collection_threshold:";
    double g = 0;
    size_t k = 0, len = strlen(conf);
    unsigned depth = 0;
    if (len >= twin_len)
        return 0;
    for (size_t i = 0, start = 0; i <= len; i++) {
        if (i < len && conf[i] == '[')
            depth++;
        else if (i < len && conf[i] == ']' && depth)
            depth--;
        if (i < len && (conf[i] != ',' || depth))
            continue;
        const char *part = conf + start;
        size_t plen = i - start;
        start = i + 1;
        if (plen > sizeof key - 1 && !strncmp(part, key, sizeof key - 1)) {
            char num[32], *end;
            if (g) /* twice: not a plain setting */
                return 0;
            size_t nl = plen - (sizeof key - 1);
            if (nl >= sizeof num)
                return 0;
            memcpy(num, part + sizeof key - 1, nl);
            num[nl] = 0;
            g = strtod(num, &end);
            if (*end || !(g > 0 && g < 1))
                return 0;
            continue;
        }
        if (k)
            twin[k++] = ',';
        memcpy(twin + k, part, plen);
        k += plen;
    }
    twin[k] = 0;
    return g;
}

typedef struct twin {
    size_t of; /* the twin's position, SIZE_MAX when it is not among the items */
    double gc;
} twin;

/* Swaps items, specs and twins a and b. */
static void swap3(as_tune_item *items, as_policy_spec *specs, twin *tw, size_t a, size_t b)
{
    as_tune_item t = items[a];
    as_policy_spec s = specs[a];
    twin w = tw[a];
    items[a] = items[b], specs[a] = specs[b], tw[a] = tw[b];
    items[b] = t, specs[b] = s, tw[b] = w;
}

/* Every item at the capacity, twins copied where the rule above holds: items[0..n) are
 * reordered (ranking orders them again; index keeps each one's place). */
static int run_settings(as_trace_open_fn open, void *ou, const as_tune_opts *o,
                        as_policy_spec *specs, as_tune_result *out, as_trace_error *err, char *why,
                        size_t why_len)
{
    enum { TEXT = 4096 };
    as_tune_item *it = out->items;
    size_t n = out->n, a = 0, b;
    twin *tw = calloc(n ? n : 1, sizeof *tw);
    char *buf = malloc(TEXT);
    int rc = AS_ENOMEM;
    if (!tw || !buf)
        goto done;
    /* [0, a): the settings without garbage_collection_threshold, each its own run */
    for (size_t i = 0; i < n; i++)
        if (o->every_setting || !(tw[i].gc = gc_part(it[i].conf, buf, TEXT)))
            swap3(it, specs, tw, i, a++);
    /* then those whose twin is among them; the others run with the first */
    for (size_t i = a; i < n; i++) {
        gc_part(it[i].conf, buf, TEXT);
        tw[i].of = SIZE_MAX;
        for (size_t j = 0; j < a && tw[i].of == SIZE_MAX; j++)
            if (!tw[j].gc && !strcmp(it[j].conf, buf))
                tw[i].of = j;
    }
    for (size_t i = a; i < n; i++)
        if (tw[i].of == SIZE_MAX)
            swap3(it, specs, tw, i, a++);
    if ((rc = run_all(open, ou, o, specs, it, a, out, err, why, why_len)))
        goto done;
    /* [a, b): those whose twin passed the threshold, run; [b, n): the twin's results */
    const uint64_t low = out->capacity > out->stream_bytes ? out->capacity - out->stream_bytes : 0;
    b = a;
    for (size_t i = a; i < n; i++)
        if ((uint64_t)(tw[i].gc * (double)low) < it[tw[i].of].peak_reserved)
            swap3(it, specs, tw, i, b++);
    if ((rc = run_all(open, ou, o, specs + a, it + a, b - a, out, err, why, why_len)))
        goto done;
    for (size_t i = b; i < n; i++) {
        const as_tune_item *t = &it[tw[i].of];
        it[i].completed = t->completed;
        it[i].oom_event = t->oom_event;
        it[i].oom_alloc = t->oom_alloc;
        it[i].oom_size = t->oom_size;
        it[i].peak_requested = t->peak_requested;
        it[i].peak_reserved = t->peak_reserved;
        it[i].device_reserves = t->device_reserves;
        it[i].device_releases = t->device_releases;
        it[i].device_time_s = t->device_time_s;
    }
done:
    free(tw);
    free(buf);
    return rc;
}

/* The curve of one item under mo: fills its curve fields and adds the decodes. */
static int curve_of(as_trace_open_fn open, void *ou, const as_mincap_opts *mo, as_tune_item *it,
                    as_tune_result *out, as_trace_error *err, char *why, size_t why_len)
{
    as_policy_spec spec;
    if (as_policy_spec_parse(it->conf[0] ? it->conf : "torch", &spec, why, why_len))
        return AS_EINVAL;
    as_mincap_result m;
    int rc = as_mincap(open, ou, &spec, mo, &m, err, why, why_len);
    as_policy_spec_free(&spec);
    if (rc)
        return rc;
    /* the curve ran at the allocator's capacities: the card's are the streams' pages more */
    const uint64_t sb = out->stream_bytes;
    it->has_curve = 1;
    it->min_capacity = m.min_capacity == AS_NONE ? AS_NONE : m.min_capacity + sb;
    it->fits_from = m.fits_from == AS_NONE ? AS_NONE : m.fits_from + sb;
    it->gaps = m.gaps;
    it->ngaps = m.ngaps;
    for (size_t i = 0; i < m.ngaps; i++) {
        it->gaps[i].lo += sb;
        it->gaps[i].hi += sb;
    }
    it->curve_lo = m.lo + sb;
    it->curve_hi = m.hi + sb;
    it->curve_points = m.npoints;
    out->decodes += m.passes;
    m.gaps = NULL;
    m.ngaps = 0;
    as_mincap_result_free(&m);
    return 0;
}

/* Curves of the best `curves` fitting settings with distinct outcomes at the card. */
static int run_curves(as_trace_open_fn open, void *ou, const as_tune_opts *o, as_tune_result *out,
                      as_trace_error *err, char *why, size_t why_len)
{
    unsigned done = 0;
    uint64_t top = o->curve_max ? o->curve_max : o->capacity;
    as_mincap_opts mo = {.threads = o->threads,
                         .memory = o->memory,
                         .max = top > out->stream_bytes ? top - out->stream_bytes : 1,
                         .no_caught_ooms = o->no_caught_ooms,
                         .streams = o->streams};
    for (size_t i = 0; i < out->n && done < o->curves; i++) {
        as_tune_item *it = &out->items[i];
        if (!it->completed)
            break;
        int dup = 0;
        for (size_t j = 0; j < i && !dup; j++) {
            const as_tune_item *p = &out->items[j];
            dup = p->has_curve && p->peak_reserved == it->peak_reserved &&
                  p->device_reserves == it->device_reserves &&
                  p->device_releases == it->device_releases &&
                  p->device_time_s == it->device_time_s;
        }
        if (dup)
            continue;
        if (o->on_progress)
            o->on_progress(o->user, it->conf[0] ? it->conf : "default", done, o->curves);
        int rc = curve_of(open, ou, &mo, it, out, err, why, why_len);
        if (rc)
            return rc;
        done++;
    }
    return 0;
}

/* Nothing fits at the card: the best setting's curve without the card's cap says how far it
 * is from fitting (min_capacity). Only that is reported, not the failing ranges above it; a
 * grid over max_points leaves the miss unknown. */
static int miss_curve(as_trace_open_fn open, void *ou, const as_tune_opts *o, as_tune_result *out,
                      as_trace_error *err, char *why, size_t why_len)
{
    as_mincap_opts mo = {.threads = o->threads,
                         .memory = o->memory,
                         .max_points = o->max_points,
                         .no_caught_ooms = o->no_caught_ooms,
                         .streams = o->streams};
    as_tune_item *b = &out->items[0];
    int rc = curve_of(open, ou, &mo, b, out, err, why, why_len);
    if (rc == AS_ELIMIT)
        return 0;
    free(b->gaps);
    b->gaps = NULL;
    b->ngaps = 0;
    return rc;
}

int as_tune(as_trace_open_fn open, void *open_user, char **confs, size_t nconfs,
            const as_tune_opts *opts, as_tune_result *out, as_trace_error *err, char *why,
            size_t why_len)
{
    char **space = NULL;
    size_t nspace = 0;
    as_policy_spec *specs = NULL;
    size_t nspecs = 0;
    int rc = 0;
    unsigned nsh = opts->nshards ? opts->nshards : 1;
    *out = (as_tune_result){0};
    if (why && why_len)
        why[0] = 0;
    if (!confs) {
        if ((rc = as_tune_space(&space, &nspace)))
            return rc;
        confs = space;
        nconfs = nspace;
    }
    out->items = calloc(nconfs ? nconfs : 1, sizeof *out->items);
    specs = calloc(nconfs ? nconfs : 1, sizeof *specs);
    if (!out->items || !specs) {
        rc = AS_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < nconfs; i++) {
        if (i % nsh != opts->shard)
            continue;
        as_tune_item *it = &out->items[out->n];
        it->index = (unsigned)i;
        it->knobs = as_tune_knobs(confs[i]);
        it->min_capacity = it->fits_from = AS_NONE;
        if (!(it->conf = strdup(confs[i]))) {
            rc = AS_ENOMEM;
            goto done;
        }
        out->n++;
        if ((rc = as_policy_spec_parse(confs[i][0] ? confs[i] : "torch", &specs[nspecs], why,
                                       why_len)))
            goto done;
        nspecs++;
    }
    if (out->n && ((rc = scan_streams(open, open_user, opts, out, err, why, why_len)) ||
                   (rc = run_settings(open, open_user, opts, specs, out, err, why, why_len))))
        goto done;
    as_tune_rank(out->items, out->n);
    if (opts->curves && (rc = run_curves(open, open_user, opts, out, err, why, why_len)))
        goto done;
    as_tune_rank_curves(out->items, out->n);
    if (opts->curves && out->n && !out->items[0].completed &&
        (rc = miss_curve(open, open_user, opts, out, err, why, why_len)))
        goto done;
done:
    for (size_t i = 0; i < nspecs; i++)
        as_policy_spec_free(&specs[i]);
    free(specs);
    as_tune_space_free(space, nspace);
    if (rc)
        as_tune_result_free(out);
    return rc;
}
