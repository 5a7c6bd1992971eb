/*
 * test_spec.c - the -p SPEC parser: both syntaxes, every knob type, every error, and
 * that the canonical text parses back to the same values.
 */
#include <CUnit/CUnit.h>
#include <string.h>

#include "knobs.h"
#include "policy.h"

static int knob_index(const as_policy *p, const char *name)
{
    for (size_t i = 0; i < p->n_knobs; i++)
        if (strcmp(p->knobs[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* Parses, asserts success, and returns the value of one knob (spec kept in *s). */
static const as_knob_value *parse_ok(const char *text, as_policy_spec *s, const char *knob)
{
    char why[256] = "";
    int rc = as_policy_spec_parse(text, s, why, sizeof why);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    if (rc) {
        fprintf(stderr, "\n  unexpected error for '%s': %s\n", text, why);
        return NULL;
    }
    if (!knob)
        return NULL;
    int k = knob_index(s->policy, knob);
    CU_ASSERT_FATAL(k >= 0);
    return &s->values[k];
}

/* Asserts failure with a reason that contains every one of the words. */
static void parse_bad(const char *text, const char *w1, const char *w2)
{
    as_policy_spec s;
    char why[256] = "";
    int rc = as_policy_spec_parse(text, &s, why, sizeof why);
    CU_ASSERT_EQUAL(rc, AS_EINVAL);
    CU_ASSERT(strchr(why, '\n') == NULL);
    int ok = (!w1 || strstr(why, w1)) && (!w2 || strstr(why, w2));
    CU_ASSERT(ok);
    if (rc != AS_EINVAL || !ok)
        fprintf(stderr, "\n  '%s' -> rc %d, why '%s' (wanted '%s' '%s')\n", text, rc, why,
                w1 ? w1 : "", w2 ? w2 : "");
    CU_ASSERT_PTR_NULL(s.values);
    CU_ASSERT_PTR_NULL(s.text);
}

static void spec_bare_name(void)
{
    as_policy_spec s;
    parse_ok("bestfit", &s, NULL);
    CU_ASSERT_PTR_EQUAL(s.policy, as_policy_find("bestfit"));
    CU_ASSERT_STRING_EQUAL(s.text, "bestfit");
    /* Every knob has its table default and is marked unset. */
    for (size_t i = 0; i < s.policy->n_knobs; i++) {
        CU_ASSERT_EQUAL(s.values[i].set, 0);
        CU_ASSERT_EQUAL(s.values[i].i, s.policy->knobs[i].def);
    }
    as_policy_spec_free(&s);
    parse_ok("  nocache ", &s, NULL);
    CU_ASSERT_STRING_EQUAL(s.text, "nocache");
    as_policy_spec_free(&s);
}

static void spec_int_and_alias(void)
{
    as_policy_spec s;
    const as_knob_value *v = parse_ok("bestfit,maxsplit=128", &s, "maxsplit");
    CU_ASSERT_EQUAL(v->i, 128);
    CU_ASSERT_EQUAL(v->set, 1);
    CU_ASSERT_STRING_EQUAL(s.text, "bestfit,maxsplit=128");
    as_policy_spec_free(&s);
    /* PyTorch key and ':' separator; whitespace dropped; canonical name in the text. */
    v = parse_ok("bestfit, max_split_size_mb : 256 ", &s, "maxsplit");
    CU_ASSERT_EQUAL(v->i, 256);
    CU_ASSERT_STRING_EQUAL(s.text, "bestfit,maxsplit=256");
    as_policy_spec_free(&s);
    /* maxsplit=0 is our "off" and passes PyTorch's >= 20 rule; by the PyTorch key it is
     * refused, as PyTorch refuses it. */
    v = parse_ok("bestfit,maxsplit=0", &s, "maxsplit");
    CU_ASSERT_EQUAL(v->i, 0);
    as_policy_spec_free(&s);
    parse_bad("bestfit,max_split_size_mb:0", "'maxsplit'", "minimum 20");
    v = parse_ok("bestfit,segment=64,maxsplit=20", &s, "segment");
    CU_ASSERT_EQUAL(v->i, 64);
    CU_ASSERT_STRING_EQUAL(s.text, "bestfit,maxsplit=20,segment=64");
    as_policy_spec_free(&s);
}

static void spec_size_units(void)
{
    as_policy_spec s;
    static const struct {
        const char *text;
        int64_t bytes;
        const char *canon;
    } cases[] = {
        {"bestfit,round=512", 512, "bestfit,round=512"},
        {"bestfit,round=2K", 2048, "bestfit,round=2KiB"},
        {"bestfit,round=4KiB", 4096, "bestfit,round=4KiB"},
        {"bestfit,round=2MiB", 2 << 20, "bestfit,round=2MiB"},
        {"bestfit,round=1M", 1 << 20, "bestfit,round=1MiB"},
        {"bestfit,round=1G", 1 << 30, "bestfit,round=1GiB"},
        {"bestfit,round=0.5K", 512, "bestfit,round=512"},
        {"bestfit,round=1.024e3B", 1024, "bestfit,round=1KiB"},
        {"bestfit,round=256B", 256, "bestfit,round=256"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const as_knob_value *v = parse_ok(cases[i].text, &s, "round");
        CU_ASSERT_EQUAL(v->i, cases[i].bytes);
        CU_ASSERT_STRING_EQUAL(s.text, cases[i].canon);
        as_policy_spec_free(&s);
    }
}

static void spec_enum(void)
{
    as_policy_spec s;
    const as_knob_value *v = parse_ok("bestfit,release=always", &s, "release");
    CU_ASSERT_EQUAL(v->i, AS_RELEASE_ALWAYS);
    CU_ASSERT_STRING_EQUAL(s.text, "bestfit,release=always");
    as_policy_spec_free(&s);
    v = parse_ok("bestfit,release=none", &s, "release");
    CU_ASSERT_EQUAL(v->i, AS_RELEASE_NONE);
    as_policy_spec_free(&s);
    v = parse_ok("bestfit,release:oom", &s, "release");
    CU_ASSERT_EQUAL(v->i, AS_RELEASE_OOM);
    as_policy_spec_free(&s);
}

static void spec_bool_float(void)
{
    as_policy_spec s;
    static const struct {
        const char *text;
        int64_t v;
    } bools[] = {
        {"bfc,allow_growth=True", 1},  {"bfc,allow_growth=False", 0}, {"bfc,allow_growth=true", 1},
        {"bfc,allow_growth=false", 0}, {"bfc,allow_growth=1", 1},     {"bfc,allow_growth=0", 0},
        {"bfc,allow_growth=on", 1},    {"bfc,allow_growth=off", 0},
    };
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) {
        const as_knob_value *v = parse_ok(bools[i].text, &s, "allow_growth");
        CU_ASSERT_EQUAL(v->i, bools[i].v);
        CU_ASSERT_STRING_EQUAL(s.text,
                               bools[i].v ? "bfc,allow_growth=true" : "bfc,allow_growth=false");
        as_policy_spec_free(&s);
    }
    const as_knob_value *v = parse_ok("bfc,fraction=0.75", &s, "fraction");
    CU_ASSERT_DOUBLE_EQUAL(v->f, 0.75, 0);
    CU_ASSERT_STRING_EQUAL(s.text, "bfc,fraction=0.75");
    as_policy_spec_free(&s);
    v = parse_ok("bfc,fraction=1", &s, "fraction");
    CU_ASSERT_DOUBLE_EQUAL(v->f, 1.0, 0);
    as_policy_spec_free(&s);
    v = parse_ok("bfc,fraction=0.1", &s, "fraction");
    CU_ASSERT_STRING_EQUAL(s.text, "bfc,fraction=0.1");
    as_policy_spec_free(&s);
    parse_bad("bfc,fraction=1.5", "'fraction'", "out of range");
    parse_bad("bfc,fraction=0", "'fraction'", "out of range");
    parse_bad("bfc,fraction=half", "'fraction'", "not a number");
    parse_bad("bfc,fraction=nan", "'fraction'", "not a number");
    parse_bad("bfc,allow_growth=yes", "'allow_growth'", "True/False");
    parse_bad("bfc,allow_growth=TRUE", "'allow_growth'", "not a boolean");
}

static void spec_divs(void)
{
    as_policy_spec s;
    /* Int form: every interval. */
    const as_knob_value *v = parse_ok("bestfit,roundup=4", &s, "roundup");
    for (int i = 0; i < AS_DIV_INTERVALS; i++)
        CU_ASSERT_EQUAL(v->div[i], 4);
    CU_ASSERT_STRING_EQUAL(s.text, "bestfit,roundup=4");
    as_policy_spec_free(&s);

    /* The PyTorch docs' example: 256 MiB is index 8 and its 1 also fills 0..7; 512 -> 9;
     * 1024 -> 10; '>' fills 11..15 (2.11: from last_index + 1). */
    v = parse_ok("bestfit,roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", &s, "roundup");
    static const uint32_t want[AS_DIV_INTERVALS] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8};
    CU_ASSERT_EQUAL(memcmp(v->div, want, sizeof want), 0);
    CU_ASSERT_STRING_EQUAL(s.text, "bestfit,roundup=[256:1,512:2,1024:4,>:8]");
    as_policy_spec_free(&s);

    /* The same list with '=' and spaces. */
    v = parse_ok("bestfit, roundup = [ 256:1 , 512:2, 1024:4 ,>:8 ]", &s, "roundup");
    CU_ASSERT_EQUAL(memcmp(v->div, want, sizeof want), 0);
    as_policy_spec_free(&s);

    /* Keys past 32768 MiB clamp to index 15; a first entry at 1 MiB fills only index 0;
     * unset middle indices stay 0. */
    v = parse_ok("bestfit,roundup=[1:2,65536:16]", &s, "roundup");
    CU_ASSERT_EQUAL(v->div[0], 2);
    for (int i = 1; i < 15; i++)
        CU_ASSERT_EQUAL(v->div[i], 0);
    CU_ASSERT_EQUAL(v->div[15], 16);
    as_policy_spec_free(&s);

    /* '>' alone fills from index 1 (last_index starts at 0); index 0 keeps its default. */
    v = parse_ok("bestfit,roundup=[>:4]", &s, "roundup");
    CU_ASSERT_EQUAL(v->div[0], 0);
    for (int i = 1; i < AS_DIV_INTERVALS; i++)
        CU_ASSERT_EQUAL(v->div[i], 4);
    as_policy_spec_free(&s);

    /* 0 is allowed as a division count (off). */
    v = parse_ok("bestfit,roundup=[2:0,4:8,>:0]", &s, "roundup");
    CU_ASSERT_EQUAL(v->div[0], 0);
    CU_ASSERT_EQUAL(v->div[1], 0);
    CU_ASSERT_EQUAL(v->div[2], 8);
    CU_ASSERT_EQUAL(v->div[3], 0);
    as_policy_spec_free(&s);
}

/* The canonical text parses back to identical values. */
static void spec_roundtrip(void)
{
    static const char *const texts[] = {
        "bestfit,roundup=[256:1,512:2,1024:4,>:8]",
        "bestfit,roundup=[1:2,65536:16]",
        "bestfit,roundup=[>:4]",
        "bestfit,roundup=[2:0,4:8,>:0]",
        "bestfit,roundup=[1:1,2:2,4:4,8:8,16:16,32:32,64:64,128:128,256:256,512:512,"
        "1024:1024,2048:2048,4096:4096,8192:8192,16384:16384,32768:32768]",
        "bestfit,round=4K,maxsplit=64,segment=32,release=always",
        "max_split_size_mb:128", /* torch, when registered */
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        as_policy_spec a, b;
        char why[256];
        if (as_policy_spec_parse(texts[i], &a, why, sizeof why) != 0) {
            CU_ASSERT_PTR_NULL(as_policy_find("torch")); /* only the nameless one may fail */
            continue;
        }
        CU_ASSERT_EQUAL_FATAL(as_policy_spec_parse(a.text, &b, why, sizeof why), 0);
        CU_ASSERT_PTR_EQUAL(a.policy, b.policy);
        CU_ASSERT_STRING_EQUAL(a.text, b.text);
        for (size_t k = 0; k < a.policy->n_knobs; k++) {
            CU_ASSERT_EQUAL(a.values[k].set, b.values[k].set);
            CU_ASSERT_EQUAL(a.values[k].i, b.values[k].i);
            CU_ASSERT_EQUAL(a.values[k].f, b.values[k].f);
            CU_ASSERT_EQUAL(memcmp(a.values[k].div, b.values[k].div, sizeof a.values[k].div), 0);
        }
        as_policy_spec_free(&a);
        as_policy_spec_free(&b);
    }
}

static void spec_errors(void)
{
    parse_bad("nosuch", "unknown policy 'nosuch'", "bestfit");
    parse_bad("nosuch,maxsplit=128", "unknown policy 'nosuch'", NULL);
    parse_bad("bestfit,frobnicate=1", "no knob 'frobnicate'", "maxsplit");
    parse_bad("bestfit,maxsplit=abc", "'maxsplit' (max_split_size_mb)", "not an integer");
    parse_bad("bestfit,maxsplit=-5", "'maxsplit'", "out of range");
    parse_bad("bestfit,maxsplit=12.5", "'maxsplit'", "not an integer");
    parse_bad("bestfit,maxsplit=99999999999999999999999", "'maxsplit'", "not an integer");
    /* PyTorch's rule: max_split_size_mb >= 20 (the large segment size). */
    parse_bad("bestfit,max_split_size_mb:10", "'maxsplit'", "minimum 20");
    parse_bad("bestfit,segment=1", "'segment'", "out of range 2..");
    parse_bad("bestfit,segment=", "'segment'", "no value");
    parse_bad("bestfit,maxsplit=128,maxsplit=256", "'maxsplit'", "twice");
    parse_bad("bestfit,maxsplit=128,max_split_size_mb:256", "'maxsplit'", "twice");
    parse_bad("bestfit,release=sometimes", "'release'", "none|oom|always");
    parse_bad("bestfit,round=3", "'round'", "power of 2");
    parse_bad("bestfit,round=2X", "'round'", "not a size");
    parse_bad("bestfit,round=0", "'round'", "out of range");
    parse_bad("bestfit,round=2G", "'round'", "out of range");
    /* the one unit rule rounds a fraction down: 0.3 bytes is 0, out of range, and 4.5K
     * is 4608, no power of 2 */
    parse_bad("bestfit,round=0.3", "'round'", "out of range");
    parse_bad("bestfit,round=4.5K", "'round'", "power of 2");
    parse_bad("bestfit,roundup=3", "'roundup'", "power of 2");
    parse_bad("bestfit,roundup=[256:3]", "'roundup'", "power of 2");
    parse_bad("bestfit,roundup=[100:4]", "interval '100'", "power of 2");
    parse_bad("bestfit,roundup=[256:1,512:2", "unclosed '['", NULL);
    parse_bad("bestfit,roundup=256:1]", "unmatched ']'", NULL);
    parse_bad("bestfit,roundup=[256]", "'roundup'", "KEY:DIVISIONS");
    parse_bad("bestfit,roundup=[]", "'roundup'", "empty list");
    parse_bad("bestfit,roundup=[256:1,]", "'roundup'", "empty entry");
    parse_bad("bestfit,roundup=[[1:1]]", "nested '['", NULL);
    parse_bad("bestfit,roundup=[1:1]x", "'roundup'", "must end with ']'");
    parse_bad("bestfit,,maxsplit=128", "empty knob", NULL);
    parse_bad("bestfit,maxsplit=128,", "empty knob", NULL);
    parse_bad("bestfit,", "empty knob", NULL);
    parse_bad("bestfit,maxsplit", "'maxsplit' is not knob=value", NULL);
    parse_bad("bestfit,nocache", "policy name 'nocache' must come first", NULL);
    parse_bad("nocache,maxsplit=128", "policy 'nocache' has no knob 'maxsplit'", NULL);
    /* Messages quote the spec without whitespace; other control bytes are refused. */
    parse_bad("bestfit,\nroundup=[1:1]]",
              "unmatched ']' at offset 21 of "
              "'bestfit,roundup=[1:1]]'",
              NULL);
    parse_bad("bestfit,round=\x01", "byte 0x01 at offset 14", NULL);
    parse_bad("bestfit\xb6", "byte 0xb6 at offset 7", NULL);
}

/* With no name the policy is torch; until torch is registered that is a clear error. */
static void spec_default_torch(void)
{
    as_policy_spec s;
    char why[256] = "";
    int rc = as_policy_spec_parse("max_split_size_mb:128", &s, why, sizeof why);
    if (!as_policy_find("torch")) {
        CU_ASSERT_EQUAL(rc, AS_EINVAL);
        CU_ASSERT_PTR_NOT_NULL(strstr(why, "no policy named 'torch' is registered yet"));
        rc = as_policy_spec_parse("", &s, why, sizeof why);
        CU_ASSERT_EQUAL(rc, AS_EINVAL);
        return;
    }
    /* torch's knobs under their PyTorch names (PYTORCH_CUDA_ALLOC_CONF keys). */
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_STRING_EQUAL(s.policy->name, "torch");
    CU_ASSERT_STRING_EQUAL(s.text, "torch,maxsplit=128");
    as_policy_spec_free(&s);
    const as_knob_value *v = parse_ok("max_split_size_mb:128,roundup_power2_divisions:[256:1,>:8],"
                                      "expandable_segments:True",
                                      &s, "expandable");
    CU_ASSERT_EQUAL(v->i, 1);
    as_policy_spec_free(&s);
    parse_ok("torch,expandable=false", &s, NULL);
    as_policy_spec_free(&s);
    v = parse_ok("garbage_collection_threshold:0.6", &s, "gc");
    CU_ASSERT_DOUBLE_EQUAL(v->f, 0.6, 1e-12);
    as_policy_spec_free(&s);
    /* PyTorch's validation: the threshold strictly inside (0, 1); max_split and
     * max_non_split_rounding at least the large segment size. */
    parse_bad("garbage_collection_threshold:1.0", "'gc'", NULL);
    parse_bad("garbage_collection_threshold:0", "'gc'", "strictly between 0 and 1");
    v = parse_ok("torch,gc=0", &s, "gc"); /* the short name: 0 = off */
    CU_ASSERT_EQUAL(v->f, 0.0);
    as_policy_spec_free(&s);
    parse_bad("expandable_segments:maybe", "'expandable'", "not a boolean");
    parse_bad("max_split_size_mb:19", "'maxsplit'", "minimum 20");
    parse_bad("large_segment_size_mb:64,max_split_size_mb:32", "'maxsplit'", "minimum 64");
    parse_ok("large_segment_size_mb:64,max_split_size_mb:64", &s, NULL);
    /* An odd large segment cannot be reserved in 2 MiB pages (found by fuzz_policy), and
     * PyTorch wants more than 10 MiB: 12 is the smallest. */
    parse_bad("large_segment_size_mb:11", "'large_segment'", "out of range 12..");
    parse_bad("large_segment_size_mb:13", "'large_segment'", "not a multiple of 2 MiB");
    parse_bad("torch,gc=1", "'gc'", "out of range [0, 1)");
    as_policy_spec_free(&s);
    /* The async pool's chunk is mapped in 2 MiB pages: an odd one was refused only by
     * the device, at the run's first event, as "init returned -1". */
    parse_bad("cudamallocasync,grow=3", "'grow'", "not a multiple of 2 MiB");
    parse_ok("cudamallocasync,grow=6", &s, NULL);
    as_policy_spec_free(&s);
    parse_bad("max_non_split_rounding_mb:4", "max_non_split_rounding", NULL);
    parse_bad("nosuch_key:1", "no knob 'nosuch_key'", NULL);
    /* Keys that do not affect the device caching allocator are accepted and dropped. */
    parse_ok("backend:native,expandable_segments:True,pinned_use_cuda_host_register:True,"
             "pinned_num_register_threads:8,release_lock_on_cudamalloc:True",
             &s, NULL);
    CU_ASSERT_STRING_EQUAL(s.text, "torch,expandable=true");
    as_policy_spec_free(&s);
    /* backend:cudaMallocAsync is the stream-ordered pool's model, at PyTorch's threshold
     * (UINT64_MAX: never trim), unless the spec sets it. */
    CU_ASSERT_EQUAL(parse_ok("backend:cudaMallocAsync", &s, "release_threshold")->i, INT64_MAX);
    CU_ASSERT_STRING_EQUAL(s.policy->name, "cudamallocasync");
    CU_ASSERT_STRING_EQUAL(s.text, "cudamallocasync,release_threshold=max");
    as_policy_spec_free(&s);
    /* "max" is the knob's top and reads back as itself; a size knob with a finite top
     * does not take it. */
    CU_ASSERT_EQUAL(parse_ok("cudamallocasync,release_threshold=max", &s, "release_threshold")->i,
                    INT64_MAX);
    CU_ASSERT_STRING_EQUAL(s.text, "cudamallocasync,release_threshold=max");
    as_policy_spec_free(&s);
    parse_bad("bestfit,round=max", "'round'", "not a size");
    CU_ASSERT_EQUAL(
        parse_ok("backend:cudaMallocAsync,release_threshold=0", &s, "release_threshold")->i, 0);
    CU_ASSERT_STRING_EQUAL(s.text, "cudamallocasync,release_threshold=0");
    as_policy_spec_free(&s);
    CU_ASSERT_EQUAL(parse_ok("cudamallocasync", &s, "release_threshold")->i, 0); /* CUDA's */
    as_policy_spec_free(&s);
    parse_bad("torch,backend:cudaMallocAsync", "backend:cudaMallocAsync", "-p cudamallocasync");
    parse_bad("backend:cudaMallocAsync,max_split_size_mb:128", "no knob 'max_split_size_mb'",
              NULL);
    parse_bad("backend:foo", "backend 'foo'", "not simulated");
    parse_bad("pinned_num_register_threads:", "pinned_num_register_threads", "no value");
    /* Only for policies that take PyTorch's settings. */
    parse_bad("bestfit,backend:native", "no knob 'backend'", NULL);
}

CU_TestInfo test_spec[] = {
    {"bare_name", spec_bare_name},         {"int_and_alias", spec_int_and_alias},
    {"size_units", spec_size_units},       {"enum", spec_enum},
    {"bool_float", spec_bool_float},       {"divs", spec_divs},
    {"roundtrip", spec_roundtrip},         {"errors", spec_errors},
    {"default_torch", spec_default_torch}, CU_TEST_INFO_NULL,
};
