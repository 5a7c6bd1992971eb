/*
 * corpus_replay.c - runs committed corpus files through a harness without libFuzzer: used
 * by the CUnit suite (tests/test_fuzz_corpus.c, so `make test` replays every seed and
 * every past crash) and by build/fuzz-driver. No main here: the test build links it.
 */
#include "fuzz/fuzz.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

const as_fuzz_target as_fuzz_targets[] = {
    { "native", as_fuzz_native, NULL },
    { "text", as_fuzz_text, NULL },
    { "pickle", as_fuzz_pickle, NULL },
    { "rmm", as_fuzz_rmm, NULL },
    { "policy", as_fuzz_policy, as_fuzz_policy_mutate },
    { "patho", as_fuzz_patho, as_fuzz_patho_mutate },
    { "cli", as_fuzz_cli, NULL },
    { NULL, NULL, NULL },
};

const as_fuzz_target *as_fuzz_find(const char *name)
{
    for (const as_fuzz_target *t = as_fuzz_targets; t->name; t++)
        if (strcmp(t->name, name) == 0)
            return t;
    return NULL;
}

/* ---- corpus replay ---------------------------------------------------------------------- */

int as_fuzz_read_file(const char *path, uint8_t **data, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 4096, n = 0;
    uint8_t *b = malloc(cap);
    for (;;) {
        if (!b)
            break;
        if (n == cap) {
            uint8_t *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    int bad = ferror(f) || !b;
    fclose(f);
    if (bad) {
        free(b);
        return -1;
    }
    *data = b;
    *size = n;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

long as_fuzz_replay_path(const char *path, as_fuzz_fn fn)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    if (S_ISREG(st.st_mode)) {
        uint8_t *data;
        size_t n;
        if (as_fuzz_read_file(path, &data, &n))
            return -1;
        fn(data, n);
        free(data);
        return 1;
    }
    DIR *dir = opendir(path);
    if (!dir)
        return -1;
    char **names = NULL;
    size_t nn = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (de->d_name[0] == '.')
            continue;
        if (nn == cap) {
            cap = cap ? cap * 2 : 64;
            char **nb = realloc(names, cap * sizeof *nb);
            FUZZ_ASSERT(nb);
            names = nb;
        }
        names[nn++] = strdup(de->d_name);
    }
    closedir(dir);
    qsort(names, nn, sizeof *names, cmp_str);
    long runs = 0;
    for (size_t i = 0; i < nn; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, names[i]);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
            long r = as_fuzz_replay_path(p, fn);
            if (r > 0)
                runs += r;
        }
        free(names[i]);
    }
    free(names);
    return runs;
}
