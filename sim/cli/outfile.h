/*
 * outfile.h - outputs that never destroy a file, and the command's signal handling.
 *
 * An output is written to a temporary file beside its target (the same directory, so the
 * rename is atomic) and renamed over the target only when complete: a failed or
 * interrupted command leaves the old file exactly as it was, and two commands writing the
 * same file never mix their rows (the last rename wins, whole). Every temporary file the
 * command makes is registered here, and every exit path removes it: commit or abort, the
 * SIGINT/SIGTERM handler, and as_out_cleanup at the end of main.
 *
 * Signals: after as_out_signals(), SIGINT or SIGTERM removes every registered temporary
 * file and exits 130 at once, unless a command doing long work (run, mincap, plot) has
 * called as_out_graceful(1): then the first signal only sets as_out_stop, the work stops
 * after its current batch, what finished is written, and the command exits 130 (its own
 * job); a second signal exits at once as above. SIGPIPE (standard output's reader gone)
 * removes them and kills the process as the signal's default does; SIGXFSZ is ignored, so
 * a write past `ulimit -f` fails (EFBIG) and is reported like any write error.
 *
 * Command-layer code: it prints its messages ("PATH: cannot create: ...") and returns
 * AS_EXIT_* statuses.
 */
#ifndef AS_SIM_OUTFILE_H
#define AS_SIM_OUTFILE_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>

#define AS_EXIT_SIGNAL 130 /* interrupted by SIGINT or SIGTERM (128 + SIGINT, as shells do) */

/* The signal that asked the work to stop, 0 while none has. */
extern volatile sig_atomic_t as_out_stop;

/* Installs the SIGINT/SIGTERM handlers (main, once). */
void as_out_signals(void);
/* on = 1: a first signal only sets as_out_stop; 0: it exits at once (the default). */
void as_out_graceful(int on);
/* Registers a temporary file (or an empty directory, removed with rmdir) for removal on
 * any exit path. Returns a slot for as_out_tmp_del, or -1 when the table is full (the
 * caller still removes the file itself). */
int as_out_tmp_add(const char *path);
/* mkstemps(tmpl, suffix_len) and as_out_tmp_add of the file it made, with SIGINT and
 * SIGTERM held between the two, so that a signal never finds a file it does not know of.
 * Returns the open descriptor (*slot set) or -1 with errno set. */
int as_out_mkstemps(char *tmpl, int suffix_len, int *slot);
/* Forgets slot (after the file was renamed or removed); -1 is ignored. */
void as_out_tmp_del(int slot);
/* Removes every registered temporary file (main, before it returns). */
void as_out_cleanup(void);

typedef struct as_out as_out;

/* Opens output path for writing through as_out_file. NULL or "-" is stdout, written
 * directly; so is a path that exists and is not a regular file (/dev/null, a FIFO). A
 * symbolic link is followed: its target is replaced, the link stays. Otherwise a temporary
 * file is made beside the target (proving the directory writable before any work) with
 * the target's permissions, or 0666 less the umask for a new file. Returns 0, or prints
 * "PATH: cannot create: REASON" and returns AS_EXIT_INPUT. */
int as_out_open(const char *path, as_out **out);
/* The same for a writer that opens the file by name (trace writers, gnuplot): write to
 * as_out_path(); nothing is open here. */
int as_out_open_named(const char *path, as_out **out);
FILE *as_out_file(const as_out *o);
/* Where to write: the temporary file, or the target itself when written directly. */
const char *as_out_path(const as_out *o);
/* The output as the user named it, for messages ("stdout" for standard output). */
const char *as_out_name(const as_out *o);
/* Finishes o and frees it. With ret == 0 (the status so far), flushes and checks every
 * write (fflush, ferror, fsync, fclose) and renames the temporary file over the target;
 * on a failure prints "NAME: write failed: REASON", removes the temporary file and
 * returns AS_EXIT_INPUT. With ret != 0 it aborts instead (as_out_abort) and returns ret.
 * An interrupted command commits what finished with ret 0. NULL o returns ret. */
int as_out_commit(as_out *o, int ret);
/* Removes the temporary file (the target is untouched) and frees o. NULL is a no-op. */
void as_out_abort(as_out *o);

/* Refuses, before any work, an output that would overwrite an input or another output:
 * the same regular file (device and inode; "-" among outs is stdout, among ins stdin), or
 * two outputs with the same name. NULL entries (outputs not asked for) are skipped.
 * Prints a usage error for subcommand cmd and returns AS_EXIT_USAGE, or returns 0. */
int as_out_check(const char *cmd, const char *const *outs, size_t nout, const char *const *ins,
                 size_t nin);

#endif
