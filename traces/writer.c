/*
 * writer.c - the generic trace writer: output file, validation (the same rules as the
 * reader, strict), and dispatch to the native or text encoder.
 *
 * Invariant: an event reaches an encoder only after it passed validation, so everything
 * allocsim writes reads back without error. Errors are sticky; the first one is returned
 * again by every later call and by as_trace_writer_close.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "live.h"
#include "trace_internal.h"

#define OUT_BUF (256u << 10)

struct as_trace_writer {
    as_outfile o;
    const as_format_writer *fw;
    void *st;
    as_validator v;
    as_sites *sites; /* the table given at open (a copy), never NULL */
    uint32_t nsites;
    int rc;
    as_trace_error err;
};

static int write_all(as_outfile *o, const void *p, size_t n, as_trace_error *err)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(o->fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return as_trace_set_error(err, AS_EIO, o->path, o->written, 0, "write failed: %s",
                                      strerror(errno));
        b += w;
        n -= (size_t)w;
        o->written += (uint64_t)w;
    }
    return 0;
}

int as_outfile_flush(as_outfile *o, as_trace_error *err)
{
    int rc = write_all(o, o->buf, o->len, err);
    o->len = 0;
    return rc;
}

int as_outfile_write(as_outfile *o, const void *p, size_t n, as_trace_error *err)
{
    if (o->len + n > o->cap) {
        int rc = as_outfile_flush(o, err);
        if (rc < 0)
            return rc;
        if (n >= o->cap)
            return write_all(o, p, n, err);
    }
    memcpy(o->buf + o->len, p, n);
    o->len += n;
    return 0;
}

int as_trace_writer_open(const char *path, as_trace_fmt fmt, const as_meta *meta,
                         as_trace_writer **out, as_trace_error *err)
{
    return as_trace_writer_open_sites(path, fmt, meta, NULL, out, err);
}

int as_trace_writer_open_sites(const char *path, as_trace_fmt fmt, const as_meta *meta,
                               const as_sites *sites, as_trace_writer **out, as_trace_error *err)
{
    *out = NULL;
    const as_format_writer *fw = fmt == AS_FMT_NATIVE ? &as_native_writer
                                 : fmt == AS_FMT_TEXT ? &as_text_writer
                                                      : NULL;
    if (!path)
        return as_trace_set_error(err, AS_EUSAGE, "", UINT64_MAX, 0, "no path given");
    if (!fw)
        return as_trace_set_error(err, AS_EUSAGE, path, UINT64_MAX, 0,
                                  "cannot write format '%s' (only native and text)",
                                  as_trace_fmt_name(fmt));
    for (size_t i = 0; meta && i < meta->n; i++)
        if (!as_meta_key_ok(meta->kv[i].key) || !meta->kv[i].value)
            return as_trace_set_error(err, AS_EUSAGE, path, UINT64_MAX, 0, "bad metadata key '%s'",
                                      meta->kv[i].key);
    as_trace_writer *w = calloc(1, sizeof *w);
    if (!w)
        return as_trace_set_error(err, AS_ENOMEM, path, UINT64_MAX, 0, "out of memory");
    w->fw = fw;
    snprintf(w->o.path, sizeof w->o.path, "%s", strcmp(path, "-") ? path : "<stdout>");
    w->o.cap = OUT_BUF;
    w->o.buf = malloc(w->o.cap);
    int rc;
    if (!w->o.buf || as_sites_new(&w->sites) < 0 || (sites && as_sites_copy(w->sites, sites) < 0)) {
        rc = as_trace_set_error(err, AS_ENOMEM, path, UINT64_MAX, 0, "out of memory");
        goto bad;
    }
    w->nsites = as_sites_count(w->sites);
    if (strcmp(path, "-") == 0) {
        w->o.fd = 1;
    } else {
        w->o.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (w->o.fd < 0) {
            rc = as_trace_set_error(err, AS_EIO, path, UINT64_MAX, 0, "cannot create: %s",
                                    strerror(errno));
            goto bad;
        }
        w->o.own_fd = 1;
    }
    rc = fw->open(&w->o, meta, w->sites, &w->st, err);
    if (rc < 0)
        goto bad;
    *out = w;
    return 0;
bad:
    if (w->o.own_fd)
        close(w->o.fd);
    free(w->o.buf);
    as_sites_free(w->sites);
    free(w);
    return rc;
}

int as_trace_write(as_trace_writer *w, const as_event *ev)
{
    if (w->rc)
        return w->rc;
    as_event e = *ev;
    char msg[256];
    uint64_t idx = w->v.events;
    int rc = as_validate(&w->v, &e, msg, sizeof msg);
    if (rc == 0 && e.site && (e.op != AS_OP_ALLOC || e.site > w->nsites)) {
        rc = AS_EINVAL;
        if (e.op != AS_OP_ALLOC)
            snprintf(msg, sizeof msg, "a site (%u) on an event other than ALLOC", e.site);
        else
            snprintf(msg, sizeof msg, "ALLOC %llu names site %u, past the site table (%u sites)",
                     (unsigned long long)e.id, e.site, w->nsites);
    }
    if (rc < 0) {
        as_trace_set_error(&w->err, rc, w->o.path, UINT64_MAX, 0, "%s", msg);
        w->err.event = idx;
        return w->rc = rc;
    }
    rc = w->fw->write(w->st, &e, &w->err);
    if (rc < 0) {
        w->err.event = idx;
        return w->rc = rc;
    }
    return 0;
}

const as_trace_error *as_trace_writer_error(const as_trace_writer *w)
{
    return w->rc < 0 ? &w->err : NULL;
}

int as_trace_writer_close(as_trace_writer *w, as_trace_error *err)
{
    if (!w)
        return 0;
    as_trace_error e2;
    int rc = w->rc;
    int rc2 = w->fw->close(w->st, &e2);
    if (!rc && rc2 < 0) {
        rc = rc2;
        w->err = e2;
    }
    if (!rc && (rc2 = as_outfile_flush(&w->o, &w->err)) < 0)
        rc = rc2;
    if (w->o.own_fd && close(w->o.fd) < 0 && !rc)
        rc = as_trace_set_error(&w->err, AS_EIO, w->o.path, w->o.written, 0, "close failed: %s",
                                strerror(errno));
    if (rc && err)
        *err = w->err;
    as_validator_free(&w->v);
    as_sites_free(w->sites);
    free(w->o.buf);
    free(w);
    return rc;
}
