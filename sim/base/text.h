/*
 * text.h - input bytes made safe for a terminal. A trace's file name, metadata or labels
 * may hold ESC and other controls that a terminal would obey (set its title, move the
 * cursor); every human-readable output that quotes them writes them through here.
 */
#ifndef AS_BASE_TEXT_H
#define AS_BASE_TEXT_H

#include <stdarg.h>
#include <stdio.h>

/* Writes text to f with control characters but newline and tab, DEL, bytes that are not
 * valid UTF-8 and UTF-8-encoded C1 controls (U+0080-U+009F) as \xHH; valid UTF-8 stays.
 * Machine formats (JSON, CSV) keep their own escaping and do not use this. */
void as_put_safe(FILE *f, const char *text);
/* prefix (as it is), then the message fmt formats, through as_put_safe: a command's
 * "PROG: MESSAGE" (no newline). */
void as_put_safe_v(FILE *f, const char *prefix, const char *fmt, va_list ap);

#endif
