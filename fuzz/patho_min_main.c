/*
 * patho_min_main.c - build/patho-min: the shortest sequence with the same ratios
 * (as_patho_minimise, delta debugging over the operations) of a pathological trace.
 *   patho-min [-p SPEC] [-M UNITS] [-n UNITS] [-u BYTES] [-e MAX_EVALS] IN OUT
 * The setting is the trace's patho.* metadata, else the defaults, each overridden by an
 * option. OUT is native when its name ends in .zst, else text; it is written beside
 * itself under a temporary name and renamed when complete. Exit 0, 1 on a bad input or
 * I/O, 2 on usage errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz/fuzz.h"
#include "fuzz/patho.h"

static int usage(void)
{
    fprintf(stderr, "usage: patho-min [-p SPEC] [-M UNITS] [-n UNITS] [-u BYTES] "
                    "[-e MAX_EVALS] IN OUT\n");
    return 2;
}

static int parse_u64(const char *v, uint64_t *x)
{
    char *end;
    *x = strtoull(v, &end, 10);
    return *end || !*v || *x == 0 ? -1 : 0;
}

/* Writes text to out (native through the converter when out ends in .zst). */
static int write_out(const char *out, const uint8_t *txt, size_t n)
{
    char tmp[4200], ztmp[4210];
    const char *done = tmp; /* the complete file, renamed to out */
    if (strlen(out) > 4000 || snprintf(tmp, sizeof tmp, "%s.tmpXXXXXX", out) >= (int)sizeof tmp)
        return -1;
    int fd = mkstemp(tmp);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "wb");
    int rc = f && fwrite(txt, 1, n, f) == n ? 0 : -1;
    if (f && fclose(f))
        rc = -1;
    size_t l = strlen(out);
    if (!rc && l > 4 && !strcmp(out + l - 4, ".zst")) {
        snprintf(ztmp, sizeof ztmp, "%s.zst", tmp);
        as_trace_error err;
        rc = as_trace_convert(tmp, ztmp, AS_FMT_NATIVE, NULL, NULL, NULL, &err);
        if (rc)
            fprintf(stderr, "patho-min: %s: %s\n", out, err.msg);
        remove(tmp);
        done = ztmp;
    }
    if (!rc && rename(done, out))
        rc = -1;
    if (rc)
        remove(done);
    return rc;
}

int main(int argc, char **argv)
{
    const char *spec = NULL;
    uint64_t m = 0, n = 0, unit = 0, evals = 0;
    int opt;
    while ((opt = getopt(argc, argv, "p:M:n:u:e:")) != -1) {
        uint64_t *dst = opt == 'M' ? &m : opt == 'n' ? &n : opt == 'u' ? &unit : &evals;
        if (opt == 'p')
            spec = optarg;
        else if (opt == '?' || parse_u64(optarg, dst))
            return usage();
    }
    if (argc - optind != 2)
        return usage();
    const char *in = argv[optind], *out = argv[optind + 1];
    uint8_t *data, *txt;
    size_t size, len;
    if (as_fuzz_read_file(in, &data, &size)) {
        fprintf(stderr, "patho-min: %s: cannot read\n", in);
        return 1;
    }
    as_trace_reader *r;
    as_patho_setting s;
    as_trace_error err;
    if (as_trace_open_mem(data, size, in, NULL, &r, &err) < 0) {
        fprintf(stderr, "patho-min: %s\n", err.msg);
        free(data);
        return 1;
    }
    int bad = as_patho_setting_of(as_trace_reader_meta(r), &s);
    as_trace_close(r);
    if (spec)
        snprintf(s.policy, sizeof s.policy, "%s", spec);
    s.m_units = m ? m : s.m_units, s.n = n ? n : s.n, s.unit = unit ? unit : s.unit;
    as_patho_result before, after;
    if (bad || as_patho_minimise(data, size, &s, evals, &txt, &len, &before, &after)) {
        fprintf(stderr,
                "patho-min: %s: bad patho.* metadata, or nothing inside the setting "
                "(policy %s, M=%llu, n=%llu, unit=%llu)\n",
                in, s.policy, (unsigned long long)s.m_units, (unsigned long long)s.n,
                (unsigned long long)s.unit);
        free(data);
        return 1;
    }
    free(data);
    int rc = write_out(out, txt, len);
    free(txt);
    if (rc) {
        fprintf(stderr, "patho-min: %s: cannot write\n", out);
        return 1;
    }
    printf("patho-min %s: %zu ops -> %zu, peak reserved %llu -> %llu, requested %llu -> "
           "%llu\n",
           s.policy, before.ops, after.ops, (unsigned long long)before.peak_reserved,
           (unsigned long long)after.peak_reserved, (unsigned long long)before.peak_requested,
           (unsigned long long)after.peak_requested);
    return 0;
}
