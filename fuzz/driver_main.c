/*
 * driver_main.c - build/fuzz-driver: runs corpus files or directories through a harness
 * without libFuzzer (a plain build, any compiler), like zstd's regression driver.
 *   fuzz-driver NAME PATH...    e.g. fuzz-driver policy build/fuzz/crash-policy/crash-*
 * Exit status 0 when every input ran (an oracle failure aborts), 2 on usage errors.
 */
#include <string.h>

#include "fuzz/fuzz.h"

int main(int argc, char **argv)
{
    const as_fuzz_target *t = argc >= 3 ? as_fuzz_find(argv[1]) : NULL;
    if (!t) {
        fprintf(stderr, "usage: fuzz-driver NAME PATH...\n  NAME:");
        for (const as_fuzz_target *x = as_fuzz_targets; x->name; x++)
            fprintf(stderr, " %s", x->name);
        fputc('\n', stderr);
        return 2;
    }
    long total = 0;
    for (int i = 2; i < argc; i++) {
        long n = as_fuzz_replay_path(argv[i], t->fn);
        if (n < 0) {
            fprintf(stderr, "fuzz-driver: %s: cannot read\n", argv[i]);
            return 1;
        }
        total += n;
    }
    printf("fuzz-driver %s: tested %ld inputs: success\n", t->name, total);
    return 0;
}
