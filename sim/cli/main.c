/*
 * main.c - the allocsim program: the command itself is a function (as_cli_main in
 * sim/commands.c), so that tests and the CLI fuzz harness run it in-process. What only a
 * process has is here: the signal handlers, the check of standard output at exit, the
 * hand-over of a command that names a policy plug-in from a static allocsim to
 * allocsim-dynamic (Makefile: a static program cannot dlopen on its own C library), and
 * the heap's settings.
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "cli.h"
#include "outfile.h"

/* Standard output is checked once here for every command, after its last write: a full
 * disk (> /dev/full) is an I/O error, exit 1, not a silent success. */
static int close_stdout(int ret)
{
    errno = 0;
    int bad = fflush(stdout) != 0 || ferror(stdout); /* ferror: an earlier write failed */
    int err = errno;
    if (fclose(stdout) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    if (bad && ret == AS_EXIT_OK) {
        /* The reason is known only when the failing write was this flush's. */
        if (err)
            as_cli_msg("standard output: write failed: %s", strerror(err));
        else
            as_cli_msg("standard output: write failed");
        return AS_EXIT_INPUT;
    }
    return ret;
}

/* The process has no program interpreter (AT_BASE 0) when it is linked statically. */
static int linked_statically(void)
{
    return getauxval(AT_BASE) == 0;
}

/* Any argument that holds "plugin:" may name a plug-in (-p plugin:P, -pplugin:P,
 * --policy=plugin:P): one that only looks like it costs an exec, the same results. */
static int names_plugin(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strstr(argv[i], "plugin:"))
            return 1;
    return 0;
}

/* Runs argv with allocsim-dynamic, the same program linked with glibc dynamic: beside this
 * one (the build folder) or in PREFIX/libexec when this one is PREFIX/bin/allocsim. Returns
 * only when neither could be run, with the exit status. */
static int hand_over(char **argv)
{
    static const char *const where[] = {"allocsim-dynamic", "../libexec/allocsim-dynamic"};
    char self[PATH_MAX], path[PATH_MAX + 40];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
    char *slash = strrchr(self, '/');
    if (!slash) {
        as_cli_msg("-p plugin: needs allocsim-dynamic beside this program, but "
                   "/proc/self/exe does not say where it is");
        return AS_EXIT_INPUT;
    }
    *slash = 0;
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", self, where[i]);
        execv(path, argv);
    }
    as_cli_msg("-p plugin: this allocsim is linked statically and loads plug-ins through "
               "allocsim-dynamic, which is neither %s/%s nor %s/%s (%s); build with "
               "`make STATIC=0` for one program that does both",
               self, where[0], self, where[1], strerror(errno));
    return AS_EXIT_INPUT;
}

/* Blocks up to 16 MiB come from the heap instead of a mapping of their own: a short
 * command's few large buffers (zstd's window, 4-8.4 MiB for the frames zstd and allocsim
 * write, the input window, the engine's batches) each cost an mmap and a munmap, which on
 * this kind of virtual machine took about a third of a 2-event run's CPU time
 * (sim/README.md, Performance). glibc raises its own threshold to the size of the first
 * mapped block freed, so a long command ran this way after its first few buffers anyway.
 * A heap grown by 1 MiB at a time needs fewer brk calls; its untouched pages cost nothing. */
static void heap_settings(void)
{
    mallopt(M_MMAP_THRESHOLD, 16 << 20);
    mallopt(M_TOP_PAD, 1 << 20);
}

int main(int argc, char **argv)
{
    if (names_plugin(argc, argv) && linked_statically())
        return hand_over(argv);
    heap_settings();
    as_out_signals(); /* from here on, a signal removes every temporary file */
    return close_stdout(as_cli_main(argc, argv));
}
