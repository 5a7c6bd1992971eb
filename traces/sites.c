/*
 * sites.c - a trace's call-site table: every distinct stack an ALLOC was made from, stored
 * once. Three interned layers: strings (file names, function names), frames (file, line,
 * name: three ints) and sites (a list of frame numbers, innermost first). Each layer is an
 * append-only array with an open-addressing hash in front of it, so interning a stack
 * costs a few probes and memory follows the distinct content, never the number of ALLOCs
 * that name it.
 *
 * Invariant: numbers are handed out in first-seen order and never change (site 1.. in the
 * order interned; frame and string indices the same), so a table written out in order and
 * interned back in order gets the same numbers: the formats rely on it.
 */
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "trace.h"

/* The site sits in the padding after op: the hot loops' events did not grow. */
_Static_assert(sizeof(as_event) == 48, "as_event is meant to stay 48 bytes");

typedef struct frame_rec {
    uint32_t file, name, line; /* string indices, line number */
} frame_rec;

struct as_sites {
    /* strings: bytes in one pool, NUL-terminated; soff[i] is where string i starts */
    char *pool;
    size_t npool, cappool;
    size_t *soff;
    size_t nstr, capstr;
    uint32_t *shash; /* string index + 1, 0 = empty */
    size_t capshash;
    frame_rec *frames;
    size_t nframes, capframes;
    uint32_t *fhash;
    size_t capfhash;
    /* sites: frame numbers of site k (1-based) at fids[start[k - 1] .. start[k]) */
    uint32_t *fids;
    size_t nfids, capfids;
    size_t *start; /* start[0] = 0; nsites + 1 entries */
    size_t nsites, capstart;
    uint32_t *sitehash; /* site number, 0 = empty */
    size_t capsitehash;
    size_t bytes; /* host bytes held, for as_sites_memory */
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t hash_str(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t hash_frame(const frame_rec *f)
{
    return mix(mix(mix(0, f->file), f->name), f->line);
}

static uint64_t hash_fids(const uint32_t *ids, size_t n)
{
    uint64_t h = n;
    for (size_t i = 0; i < n; i++)
        h = mix(h, ids[i]);
    return h;
}

int as_sites_new(as_sites **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return AS_ENOMEM;
    if (as_grow((void **)&(*out)->start, &(*out)->capstart, 1, sizeof(size_t), 64) < 0) {
        free(*out);
        *out = NULL;
        return AS_ENOMEM;
    }
    (*out)->start[0] = 0;
    return 0;
}

void as_sites_free(as_sites *s)
{
    if (!s)
        return;
    free(s->pool);
    free(s->soff);
    free(s->shash);
    free(s->frames);
    free(s->fhash);
    free(s->fids);
    free(s->start);
    free(s->sitehash);
    free(s);
}

/* Rebuilds a hash of n items at twice the size; key(i) gives item i's hash. */
static int rehash(uint32_t **tab, size_t *cap, size_t n, uint64_t (*key)(const as_sites *, size_t),
                  const as_sites *s, uint32_t base)
{
    size_t nc = *cap ? *cap * 2 : 256;
    uint32_t *t = calloc(nc, sizeof *t);
    if (!t)
        return AS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        size_t j = key(s, i) & (nc - 1);
        while (t[j])
            j = (j + 1) & (nc - 1);
        t[j] = (uint32_t)(i + base);
    }
    free(*tab);
    *tab = t;
    *cap = nc;
    return 0;
}

static uint64_t str_key(const as_sites *s, size_t i)
{
    return hash_str(s->pool + s->soff[i], strlen(s->pool + s->soff[i]));
}
static uint64_t frame_key(const as_sites *s, size_t i)
{
    return hash_frame(&s->frames[i]);
}
static uint64_t site_key(const as_sites *s, size_t i)
{
    return hash_fids(s->fids + s->start[i], s->start[i + 1] - s->start[i]);
}

static int intern_str(as_sites *s, const char *str, size_t n, uint32_t *out)
{
    if ((s->nstr + 1) * 2 > s->capshash && rehash(&s->shash, &s->capshash, s->nstr, str_key, s, 1))
        return AS_ENOMEM;
    size_t j = hash_str(str, n) & (s->capshash - 1);
    for (; s->shash[j]; j = (j + 1) & (s->capshash - 1)) {
        const char *c = s->pool + s->soff[s->shash[j] - 1];
        if (strncmp(c, str, n) == 0 && c[n] == 0) {
            *out = s->shash[j] - 1;
            return 0;
        }
    }
    if (s->nstr >= AS_MAX_SITES ||
        as_grow((void **)&s->soff, &s->capstr, s->nstr + 1, sizeof *s->soff, 64) < 0 ||
        as_grow((void **)&s->pool, &s->cappool, s->npool + n + 1, 1, 4096) < 0)
        return AS_ENOMEM;
    memcpy(s->pool + s->npool, str, n);
    s->pool[s->npool + n] = 0;
    s->soff[s->nstr] = s->npool;
    s->npool += n + 1;
    s->bytes += n + 1 + sizeof *s->soff;
    s->shash[j] = (uint32_t)++s->nstr;
    *out = (uint32_t)(s->nstr - 1);
    return 0;
}

static int intern_frame(as_sites *s, const as_frame *f, uint32_t *out)
{
    frame_rec r;
    int rc;
    if ((rc = intern_str(s, f->filename, strlen(f->filename), &r.file)) ||
        (rc = intern_str(s, f->name, strlen(f->name), &r.name)))
        return rc;
    r.line = f->line;
    if ((s->nframes + 1) * 2 > s->capfhash &&
        rehash(&s->fhash, &s->capfhash, s->nframes, frame_key, s, 1))
        return AS_ENOMEM;
    size_t j = hash_frame(&r) & (s->capfhash - 1);
    for (; s->fhash[j]; j = (j + 1) & (s->capfhash - 1)) {
        const frame_rec *c = &s->frames[s->fhash[j] - 1];
        if (c->file == r.file && c->name == r.name && c->line == r.line) {
            *out = s->fhash[j] - 1;
            return 0;
        }
    }
    if (s->nframes >= AS_MAX_SITES ||
        as_grow((void **)&s->frames, &s->capframes, s->nframes + 1, sizeof *s->frames, 64) < 0)
        return AS_ENOMEM;
    s->frames[s->nframes] = r;
    s->bytes += sizeof r;
    s->fhash[j] = (uint32_t)++s->nframes;
    *out = (uint32_t)(s->nframes - 1);
    return 0;
}

int as_sites_intern_ids(as_sites *s, const uint32_t *fids, size_t n, uint32_t *site)
{
    *site = 0;
    if (n == 0)
        return 0;
    if (n > AS_MAX_STACK)
        return AS_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (fids[i] >= s->nframes)
            return AS_EINVAL;
    if ((s->nsites + 1) * 2 > s->capsitehash &&
        rehash(&s->sitehash, &s->capsitehash, s->nsites, site_key, s, 1))
        return AS_ENOMEM;
    size_t j = hash_fids(fids, n) & (s->capsitehash - 1);
    for (; s->sitehash[j]; j = (j + 1) & (s->capsitehash - 1)) {
        uint32_t k = s->sitehash[j];
        size_t b = s->start[k - 1], len = s->start[k] - b;
        if (len == n && memcmp(s->fids + b, fids, n * sizeof *fids) == 0) {
            *site = k;
            return 0;
        }
    }
    if (s->nsites >= AS_MAX_SITES ||
        as_grow((void **)&s->fids, &s->capfids, s->nfids + n, sizeof *s->fids, 256) < 0 ||
        as_grow((void **)&s->start, &s->capstart, s->nsites + 2, sizeof *s->start, 64) < 0)
        return AS_ENOMEM;
    memcpy(s->fids + s->nfids, fids, n * sizeof *fids);
    s->nfids += n;
    s->start[++s->nsites] = s->nfids;
    s->bytes += n * sizeof *fids + sizeof *s->start;
    s->sitehash[j] = (uint32_t)s->nsites;
    *site = (uint32_t)s->nsites;
    return 0;
}

int as_sites_intern_frame(as_sites *s, const as_frame *f, uint32_t *fid)
{
    if (!f->filename || !f->name)
        return AS_EINVAL;
    return intern_frame(s, f, fid);
}

int as_sites_intern(as_sites *s, const as_frame *frames, size_t n, uint32_t *site)
{
    *site = 0;
    if (n > AS_MAX_STACK)
        return AS_EINVAL;
    uint32_t local[64], *ids = n <= 64 ? local : malloc(n * sizeof *ids);
    if (!ids)
        return AS_ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = as_sites_intern_frame(s, &frames[i], &ids[i]);
    if (!rc)
        rc = as_sites_intern_ids(s, ids, n, site);
    if (ids != local)
        free(ids);
    return rc;
}

uint32_t as_sites_count(const as_sites *s)
{
    return s ? (uint32_t)s->nsites : 0;
}

uint32_t as_sites_nframes(const as_sites *s)
{
    return s ? (uint32_t)s->nframes : 0;
}

int as_sites_frame(const as_sites *s, uint32_t fid, as_frame *out)
{
    if (!s || fid >= s->nframes)
        return AS_EINVAL;
    const frame_rec *r = &s->frames[fid];
    out->filename = s->pool + s->soff[r->file];
    out->name = s->pool + s->soff[r->name];
    out->line = r->line;
    return 0;
}

size_t as_sites_stack(const as_sites *s, uint32_t site, const uint32_t **fids)
{
    if (!s || site == 0 || site > s->nsites) {
        *fids = NULL;
        return 0;
    }
    *fids = s->fids + s->start[site - 1];
    return s->start[site] - s->start[site - 1];
}

size_t as_sites_memory(const as_sites *s)
{
    return s ? sizeof *s + s->bytes + (s->capshash + s->capfhash + s->capsitehash) * 4 : 0;
}

int as_sites_copy(as_sites *dst, const as_sites *src)
{
    uint32_t map_local[256], *map = NULL;
    size_t nf = as_sites_nframes(src);
    map = nf <= 256 ? map_local : malloc(nf * sizeof *map);
    if (nf && !map)
        return AS_ENOMEM;
    int rc = 0;
    for (uint32_t f = 0; f < nf && !rc; f++) {
        as_frame fr;
        as_sites_frame(src, f, &fr);
        rc = intern_frame(dst, &fr, &map[f]);
    }
    uint32_t *ids = NULL;
    size_t capids = 0;
    for (uint32_t k = 1; k <= as_sites_count(src) && !rc; k++) {
        const uint32_t *fids;
        size_t n = as_sites_stack(src, k, &fids);
        if (as_grow((void **)&ids, &capids, n, sizeof *ids, 64) < 0) {
            rc = AS_ENOMEM;
            break;
        }
        for (size_t i = 0; i < n; i++)
            ids[i] = map[fids[i]];
        uint32_t got;
        rc = as_sites_intern_ids(dst, ids, n, &got);
    }
    free(ids);
    if (map != map_local)
        free(map);
    return rc;
}

/* PyTorch's own code, which memory_viz shows but which names no user's line: Python files
 * inside the torch package, and the C++ and interpreter frames memory_viz's own frameFilter
 * (torch/utils/viz/MemoryViz.js) hides. */
/* The interpreter's binary (python3.12), libpython, and the C and C++ runtimes: a C++
 * stack (stacks="all") symbolized by TORCH_SYMBOLIZE_MODE=fast or dladdr names the binary
 * of such a frame, not its source, and says nothing of the user's code. */
static int native_runtime(const char *file)
{
    const char *b = strrchr(file, '/');
    b = b ? b + 1 : file;
    if (!strncmp(b, "libpython", 9) || !strncmp(b, "libc.so", 7) || !strncmp(b, "libstdc++.so", 12))
        return 1;
    if (strncmp(b, "python", 6))
        return 0;
    for (b += 6; (*b >= '0' && *b <= '9') || *b == '.'; b++)
        ;
    return *b == 0;
}

int as_frame_is_internal(const as_frame *f)
{
    static const char *const omit_names[] = {
        "unwind::unwind",    "CapturedTraceback::gather",
        "gather_with_cpp",   "_start",
        "__libc_start_main", "PyEval_",
        "PyObject_",         "PyFunction_",
    };
    static const char *const omit_files[] = {
        "core/boxing",
        "/Register",
        "/Redispatch",
        "pythonrun.c",
        "Modules/main.c",
        "Objects/call.c",
        "Objects/methodobject.c",
        "pycore_ceval.h",
        "ceval.c",
        "cpython/abstract.h",
    };
    for (size_t i = 0; i < sizeof omit_names / sizeof *omit_names; i++)
        if (strstr(f->name, omit_names[i]))
            return 1;
    for (size_t i = 0; i < sizeof omit_files / sizeof *omit_files; i++)
        if (strstr(f->filename, omit_files[i]))
            return 1;
    if (!strcmp(f->name, "??") || native_runtime(f->filename)) /* nothing could name it */
        return 1;
    /* Python: the package path after the last site-packages/ (or dist-packages/) starts
     * with torch/; a file outside an installed package is PyTorch's own when it sits in a
     * torch/ folder of PyTorch's layout (a source checkout). */
    const char *p = f->filename, *q;
    while ((q = strstr(p, "site-packages/")) || (q = strstr(p, "dist-packages/")))
        p = q + 14;
    if (p != f->filename)
        return strncmp(p, "torch/", 6) == 0;
    static const char *const torch_dirs[] = {"/torch/nn/",   "/torch/autograd/", "/torch/optim/",
                                             "/torch/utils/", "/torch/cuda/",    "/torch/_",
                                             "/torch/amp/",  "/torch/fx/",       "/torch/functional.py"};
    for (size_t i = 0; i < sizeof torch_dirs / sizeof *torch_dirs; i++)
        if (strstr(p, torch_dirs[i]))
            return 1;
    return strncmp(p, "torch/", 6) == 0;
}

int as_frame_is_recorder(const char *name)
{
    static const char *const prefixes[] = {
        "torch::unwind::",
        "torch::CapturedTraceback::",
        "torch::cuda::(anonymous namespace)::gather",
        "c10::cuda::CUDACachingAllocator::",
    };
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
            return 1;
    return 0;
}

int as_sites_user_frame(const as_sites *s, uint32_t site, as_frame *out)
{
    const uint32_t *fids;
    size_t n = as_sites_stack(s, site, &fids);
    if (!n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        as_sites_frame(s, fids[i], out);
        if (!as_frame_is_internal(out))
            return (int)i;
    }
    /* All internal (the autograd thread's stacks have no Python frame): the innermost below
     * the stack recorder and the caching allocator, the operator that asked. */
    for (size_t i = 0; i < n; i++) {
        as_sites_frame(s, fids[i], out);
        if (!as_frame_is_recorder(out->name))
            return (int)i;
    }
    as_sites_frame(s, fids[0], out); /* nothing else: the innermost */
    return 0;
}
