/*
 * progress.c - the progress line (progress.h). Command layer: it prints, on stderr only.
 */
#include "progress.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void as_progress_start(as_progress *p, int quiet, const char *what)
{
    p->on = !quiet && isatty(STDERR_FILENO);
    p->shown = 0;
    p->t0 = now_s();
    p->last = 0;
    p->what = what;
}

static void fmt_secs(char *b, size_t n, double s)
{
    unsigned long t = (unsigned long)(s + 0.5);
    if (t >= 3600)
        snprintf(b, n, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(b, n, "%lu:%02lu", t / 60, t % 60);
}

void as_progress_show(as_progress *p, uint64_t done, uint64_t total, double frac)
{
    if (!p->on)
        return;
    double t = now_s(), el = t - p->t0;
    if (t - p->last < 0.25 || el < 0.5) /* quick commands show nothing */
        return;
    p->last = t;
    char left[32] = "estimating";
    if (frac > 0.005 && el > 1.0) {
        fmt_secs(left, sizeof left - 5, el * (1.0 - frac) / frac);
        snprintf(left + strlen(left), 6, " left");
    }
    fputs("\r\033[K", stderr);
    if (p->label) { /* a trace's name or a spec: the user's bytes, escaped */
        as_cli_put_safe(stderr, p->label);
        fputs(": ", stderr);
    }
    fprintf(stderr, "%llu/%llu %s, %.0f%%, %s", (unsigned long long)done, (unsigned long long)total,
            p->what, 100.0 * frac, left);
    fflush(stderr);
    p->shown = 1;
}

void as_progress_clear(as_progress *p)
{
    if (p->shown)
        fputs("\r\033[K", stderr);
    p->shown = 0;
}
