/*
 * inmap.h - a plain regular file mapped read-only for the instream's direct window
 * (inmap.c), guarded against the file being cut shorter while mapped. Internal to traces/.
 */
#ifndef AS_TRACES_INMAP_H
#define AS_TRACES_INMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct as_inmap as_inmap;

/* A map of fd's first size bytes (nothing mapped yet); 0, or -1 when the guard cannot be
 * had (its slots taken, no signal handler): the caller reads the file instead. */
int as_inmap_open(int fd, uint64_t size, as_inmap **out);
/* File bytes from off in place: *data, *avail of them (at least need, or to the end; 0 at
 * the end). Valid until the next view of this map. 0, or -1 when the window cannot be
 * mapped (errno). */
int as_inmap_view(as_inmap *m, uint64_t off, size_t need, const uint8_t **data, size_t *avail);
/* 1 once a read found the file shorter than when it was opened (those bytes read as 0). */
int as_inmap_cut(const as_inmap *m);
void as_inmap_close(as_inmap *m);

#endif
