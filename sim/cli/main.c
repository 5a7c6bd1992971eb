/*
 * main.c - the allocsim program: the command itself is a function (as_cli_main in
 * sim/commands.c), so that tests and the CLI fuzz harness run it in-process. What only a
 * process has is here: the signal handlers and the check of standard output at exit.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

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

int main(int argc, char **argv)
{
    as_out_signals(); /* from here on, a signal removes every temporary file */
    return close_stdout(as_cli_main(argc, argv));
}
