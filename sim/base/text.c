/*
 * text.c - terminal-safe text (text.h). Invariant: nothing written here can be read by a
 * terminal as a control sequence, and every valid printable UTF-8 character is kept.
 */
#include "text.h"

#include <stddef.h>
#include <stdlib.h>

/* Length of the valid UTF-8 sequence at s that is not a C1 control (U+0080-U+009F, which
 * some terminals obey like ESC), or 0. Overlong forms and surrogates are not valid. */
static size_t utf8_len(const unsigned char *s)
{
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        return s[1] >= 0x80 && s[1] <= 0xbf && !(s[0] == 0xc2 && s[1] <= 0x9f) ? 2 : 0;
    unsigned lo = 0x80, hi = 0xbf;
    size_t n;
    if (s[0] >= 0xe0 && s[0] <= 0xef) {
        n = 3;
        lo = s[0] == 0xe0 ? 0xa0 : 0x80;
        hi = s[0] == 0xed ? 0x9f : 0xbf;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        n = 4;
        lo = s[0] == 0xf0 ? 0x90 : 0x80;
        hi = s[0] == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return n;
}

void as_put_safe(FILE *f, const char *text)
{
    const unsigned char *s = (const unsigned char *)text, *run = s;
    /* Kept bytes go out in runs, one fwrite each (one a character cost about 130
     * instructions: a run's report table is some 300 of them). */
    while (*s) {
        size_t n = 1;
        if (*s >= 0x80)
            n = utf8_len(s);
        if ((*s < 0x20 && *s != '\n' && *s != '\t') || *s == 0x7f || n == 0) {
            fwrite(run, 1, (size_t)(s - run), f);
            fprintf(f, "\\x%02x", *s);
            run = ++s;
            continue;
        }
        s += n;
    }
    fwrite(run, 1, (size_t)(s - run), f);
}

void as_put_safe_v(FILE *f, const char *prefix, const char *fmt, va_list ap)
{
    char small[1024], *b = small;
    va_list aq;
    va_copy(aq, ap);
    int k = vsnprintf(small, sizeof small, fmt, ap);
    if (k >= (int)sizeof small && (b = malloc((size_t)k + 1)))
        vsnprintf(b, (size_t)k + 1, fmt, aq);
    va_end(aq);
    fputs(prefix, f);
    as_put_safe(f, b ? b : small);
    if (b != small)
        free(b);
}
