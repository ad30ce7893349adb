/* core/env: the strict MINFER_* parsers at their edges (range ends, 2^64 and past it, signs, blanks, case,
 * empty values, presence flags), and that every library reading point refuses a bad value with the
 * parser's message instead of guessing: threadpool (MINFER_SPIN, MINFER_SPIN_US), CPU backend
 * (MINFER_PROFILE), scheduler (MINFER_SYNC_COPIES), model load (every variable, before the file is opened).
 * tests/cli/env.sh covers the CLI's startup check and --help. */
#include "backend/cpu/cpu.h"
#include "backend/sched.h"
#include "core/env.h"
#include "core/threadpool.h"
#include "harness.h"
#include "minfer.h"

static const char *k_all[] = {"MINFER_LOG",      "MINFER_ISA",     "MINFER_REPACK",   "MINFER_CACHE_TYPE",
                              "MINFER_ATTN_ROT_DISABLE", "MINFER_PROFILE",  "MINFER_SPIN",    "MINFER_SPIN_US",  "MINFER_DRAIN_MS", "MINFER_BACKENDS",
                              "MINFER_DISABLE_CUDA", "MINFER_GPU_LAYERS", "MINFER_GPU_MEM", "MINFER_CUDA_GRAPHS",
                              "MINFER_SYNC_COPIES"};

static void clear_env(void) {
    for (size_t i = 0; i < MF_ARRAY_LEN(k_all); i++) unsetenv(k_all[i]);
}

/* uint: value -> (rc, out, message fragment) */
static void uint_case(const char *name, const char *v, int want_rc, uint64_t want, const char *want_msg) {
    if (v) setenv(name, v, 1);
    else unsetenv(name);
    mf_error err = {0};
    uint64_t out = 12345;
    int rc = mf_env_uint(name, &out, &err);
    CHECK(rc == want_rc, "%s='%s': rc %d want %d (%s)", name, v ? v : "(unset)", rc, want_rc, err.msg);
    if (!want_rc) CHECK(out == want, "%s='%s': %llu want %llu", name, v ? v : "(unset)", (unsigned long long)out,
                        (unsigned long long)want);
    if (want_msg) CHECK(strstr(err.msg, want_msg) != NULL, "%s='%s': message '%s' lacks '%s'", name, v, err.msg, want_msg);
    unsetenv(name);
}

static void test_uint(void) {
    clear_env();
    uint_case("MINFER_SPIN_US", NULL, 0, 3000, NULL);
    uint_case("MINFER_SPIN_US", "", 0, 3000, NULL);
    uint_case("MINFER_SPIN_US", " \t", 0, 3000, NULL);
    uint_case("MINFER_SPIN_US", "0", 0, 0, NULL);
    uint_case("MINFER_SPIN_US", " 250 ", 0, 250, NULL);
    uint_case("MINFER_SPIN_US", "007", 0, 7, NULL);
    uint_case("MINFER_SPIN_US", "60000000", 0, 60000000, NULL);
    uint_case("MINFER_SPIN_US", "60000001", MF_E_INVAL, 0,
              "MINFER_SPIN_US='60000001' is out of range: allowed 0..60000000 microseconds (default: 3000); unset it "
              "or pick a value in range");
    uint_case("MINFER_SPIN_US", "18446744073709551615", MF_E_INVAL, 0, "'18446744073709551615' is out of range");
    /* past 2^64: atoll's signed overflow before; now a range refusal naming the value as given */
    uint_case("MINFER_SPIN_US", "99999999999999999999", MF_E_INVAL, 0,
              "MINFER_SPIN_US='99999999999999999999' is out of range: allowed 0..60000000");
    /* 2^64 + 5 would wrap to 5, inside the range */
    uint_case("MINFER_SPIN_US", "18446744073709551621", MF_E_INVAL, 0, "'18446744073709551621' is out of range");
    uint_case("MINFER_SPIN_US", "99999999999999999999x", MF_E_INVAL, 0, "is not a whole number");
    uint_case("MINFER_SPIN_US", "-1", MF_E_INVAL, 0,
              "MINFER_SPIN_US='-1' is not a whole number: allowed 0..60000000 microseconds (decimal digits only; "
              "default: 3000)");
    uint_case("MINFER_SPIN_US", "+5", MF_E_INVAL, 0, "is not a whole number");
    uint_case("MINFER_SPIN_US", "1e3", MF_E_INVAL, 0, "is not a whole number");
    uint_case("MINFER_SPIN_US", "0x10", MF_E_INVAL, 0, "is not a whole number");
    uint_case("MINFER_SPIN_US", "1 2", MF_E_INVAL, 0, "'1 2' is not a whole number");
    uint_case("MINFER_SPIN", "100000000", 0, 100000000, NULL);
    uint_case("MINFER_SPIN", "100000001", MF_E_INVAL, 0, "MINFER_SPIN='100000001' is out of range: allowed 0..100000000 pause");
    uint_case("MINFER_SPIN", "abc", MF_E_INVAL, 0, "MINFER_SPIN='abc' is not a whole number");
    /* a control byte is shown escaped, a long value cut */
    uint_case("MINFER_SPIN", "1\x01", MF_E_INVAL, 0, "MINFER_SPIN='1\\x01' is not");
    char longv[200];
    memset(longv, '9', sizeof longv - 1);
    longv[sizeof longv - 1] = 0;
    uint_case("MINFER_SPIN", longv, MF_E_INVAL, 0, "999...' is out of range");
}

static void bool_case(const char *v, int want_rc, bool want) {
    if (v) setenv("MINFER_REPACK", v, 1);
    mf_error err = {0};
    bool out = !want;
    int rc = mf_env_bool("MINFER_REPACK", &out, &err);
    CHECK(rc == want_rc, "MINFER_REPACK='%s': rc %d want %d (%s)", v ? v : "(unset)", rc, want_rc, err.msg);
    if (!want_rc) CHECK(out == want, "MINFER_REPACK='%s': %d want %d", v ? v : "(unset)", out, want);
    else {
        char want_msg[256];
        snprintf(want_msg, sizeof want_msg,
                 "MINFER_REPACK='%s' is not a boolean: allowed 1|0, true|false, on|off, yes|no (case-insensitive; "
                 "default: 1); unset it or pick one of those",
                 v);
        CHECK(!strcmp(err.msg, want_msg), "message '%s'", err.msg);
    }
    unsetenv("MINFER_REPACK");
}

static void test_bool(void) {
    clear_env();
    bool_case(NULL, 0, true); /* default on */
    bool_case("", 0, true);
    bool_case("0", 0, false);
    bool_case("1", 0, true);
    bool_case(" off ", 0, false);
    bool_case("FALSE", 0, false);
    bool_case("No", 0, false);
    bool_case("yes", 0, true);
    bool_case("ON", 0, true);
    bool_case("abc", MF_E_INVAL, false); /* used to mean on */
    bool_case("2", MF_E_INVAL, false);
    bool_case("00", MF_E_INVAL, false);
    bool_case("offf", MF_E_INVAL, false);
    bool_case("o", MF_E_INVAL, false);
    setenv("MINFER_PROFILE", "", 1);
    bool p = true;
    CHECK(mf_env_bool("MINFER_PROFILE", &p, NULL) == 0 && !p, "empty MINFER_PROFILE is its default, off");
    unsetenv("MINFER_PROFILE");
}

static void test_word(void) {
    clear_env();
    int w = 7;
    mf_error err = {0};
    CHECK(mf_env_word("MINFER_LOG", &w, &err) == 0 && w == MF_LOG_WARN, "unset: %d", w);
    const char *ok[] = {"error", "WARN", "Info", " debug ", "DEBUG"};
    const int want[] = {MF_LOG_ERROR, MF_LOG_WARN, MF_LOG_INFO, MF_LOG_DEBUG, MF_LOG_DEBUG};
    for (size_t i = 0; i < MF_ARRAY_LEN(ok); i++) {
        setenv("MINFER_LOG", ok[i], 1);
        CHECK(mf_env_word("MINFER_LOG", &w, &err) == 0 && w == want[i], "'%s': %d want %d", ok[i], w, want[i]);
    }
    setenv("MINFER_LOG", "bogus", 1);
    CHECK(mf_env_word("MINFER_LOG", &w, &err) == MF_E_INVAL &&
              !strcmp(err.msg, "MINFER_LOG='bogus' is not one of error|warn|info|debug (case-insensitive; default: "
                               "warn); unset it or pick one of those"),
          "bogus: %s", err.msg);
    const char *bad[] = {"warning", "deb", "errorr", "warn,info"};
    for (size_t i = 0; i < MF_ARRAY_LEN(bad); i++) {
        setenv("MINFER_LOG", bad[i], 1);
        CHECK(mf_env_word("MINFER_LOG", &w, &err) == MF_E_INVAL, "'%s' accepted as %d", bad[i], w);
    }
    unsetenv("MINFER_LOG");
    /* MINFER_CACHE_TYPE: f16 by default (index 1), words case-insensitive, and its own refusal wording (the
     * table's noun): it names what the run would otherwise have used */
    CHECK(mf_env_word("MINFER_CACHE_TYPE", &w, &err) == 0 && w == 1, "cache type unset: %d", w);
    const char *kv_ok[] = {"f32", "F16", " q8_0 ", "Q8_0"};
    const int kv_want[] = {0, 1, 2, 2};
    for (size_t i = 0; i < MF_ARRAY_LEN(kv_ok); i++) {
        setenv("MINFER_CACHE_TYPE", kv_ok[i], 1);
        CHECK(mf_env_word("MINFER_CACHE_TYPE", &w, &err) == 0 && w == kv_want[i], "'%s': %d", kv_ok[i], w);
    }
    const char *kv_bad[] = {"q4", "q8", "bf16", "f16,q8_0", "q4_0"};
    for (size_t i = 0; i < MF_ARRAY_LEN(kv_bad); i++) {
        setenv("MINFER_CACHE_TYPE", kv_bad[i], 1);
        char want[256];
        snprintf(want, sizeof want,
                 "MINFER_CACHE_TYPE=%s is not a KV cache type (f32, f16, q8_0); refusing rather than silently running "
                 "with f16",
                 kv_bad[i]);
        CHECK(mf_env_word("MINFER_CACHE_TYPE", &w, &err) == MF_E_INVAL && !strcmp(err.msg, want), "'%s': %s",
              kv_bad[i], err.msg);
    }
    unsetenv("MINFER_CACHE_TYPE");
    /* MINFER_ISA has no fixed default: unset is -1, and the message says what the default is */
    CHECK(mf_env_word("MINFER_ISA", &w, &err) == 0 && w == -1, "ISA unset: %d", w);
    /* the words are the build architecture's kernel sets */
#if defined(__aarch64__)
    const char *second = "NEON", *words = "scalar|neon";
#else
    const char *second = "AVX2", *words = "scalar|avx2|avx512|amx";
#endif
    setenv("MINFER_ISA", second, 1);
    CHECK(mf_env_word("MINFER_ISA", &w, &err) == 0 && w == 1, "ISA %s: %d", second, w);
    setenv("MINFER_ISA", "avx3", 1);
    char isa_want[160];
    snprintf(isa_want, sizeof isa_want, "MINFER_ISA='avx3' is not one of %s (case-insensitive; default: the best this CPU has)",
             words);
    CHECK(mf_env_word("MINFER_ISA", &w, &err) == MF_E_INVAL && strstr(err.msg, isa_want), "avx3: %s", err.msg);
    unsetenv("MINFER_ISA");
}

static void test_flag(void) {
    clear_env();
    bool on = true;
    mf_error err = {0};
    CHECK(mf_env_flag("MINFER_SYNC_COPIES", &on, &err) == 0 && !on, "unset: off");
    setenv("MINFER_SYNC_COPIES", "", 1);
    CHECK(mf_env_flag("MINFER_SYNC_COPIES", &on, &err) == 0 && on, "empty: on (presence)");
    setenv("MINFER_SYNC_COPIES", "1", 1);
    CHECK(mf_env_flag("MINFER_SYNC_COPIES", &on, &err) == 0 && on, "1: on");
    setenv("MINFER_DISABLE_CUDA", "0", 1);
    CHECK(mf_env_flag("MINFER_DISABLE_CUDA", &on, &err) == MF_E_INVAL &&
              strstr(err.msg, "MINFER_DISABLE_CUDA='0' is refused: the variable is presence-checked") &&
              strstr(err.msg, "allowed: empty or 1; unset it to turn it off"),
          "0: %s", err.msg);
    clear_env();
}

/* A variable read as the wrong kind (or not in the table) is a bug, reported as one. */
static void test_table(void) {
    mf_error err = {0};
    bool b;
    CHECK(mf_env_bool("MINFER_SPIN", &b, &err) == MF_E_INTERNAL && strstr(err.msg, "MINFER_SPIN"), "%s", err.msg);
    CHECK(mf_env_bool("MINFER_NOPE", &b, &err) == MF_E_INTERNAL, "unknown name");
    size_t n;
    const mf_env_var *v = mf_env_vars(&n);
    CHECK(n == MF_ARRAY_LEN(k_all), "table has %zu variables, this test knows %zu", n, MF_ARRAY_LEN(k_all));
    for (size_t i = 0; i < n && i < MF_ARRAY_LEN(k_all); i++)
        CHECK(!strcmp(v[i].name, k_all[i]) && v[i].help && *v[i].help, "entry %zu: %s", i, v[i].name);
    /* mf_env_check reports each parsable variable's refusal */
    for (size_t i = 0; i < n; i++) {
        if (v[i].kind == MF_ENV_LIST) continue;
        clear_env();
        CHECK(mf_env_check(&err) == 0, "clean env: %s", err.msg);
        setenv(v[i].name, "bogus", 1);
        err.msg[0] = 0;
        CHECK(mf_env_check(&err) == MF_E_INVAL && !strncmp(err.msg, v[i].name, strlen(v[i].name)) &&
                  strstr(err.msg, v[i].noun ? "=bogus is not" : "'bogus'"),
              "%s=bogus: %s", v[i].name, err.msg);
    }
    clear_env();
}

/* The library's reading points: each refuses with the parser's message and leaves *out NULL. */
static void test_reading_points(void) {
    clear_env();
    mf_error err = {0};
    mf_threadpool *tp = (mf_threadpool *)1;
    setenv("MINFER_SPIN_US", "99999999999999999999", 1);
    CHECK(mf_threadpool_new(2, &tp, &err) == MF_E_INVAL && tp == NULL &&
              strstr(err.msg, "MINFER_SPIN_US='99999999999999999999' is out of range"),
          "threadpool: %s", err.msg);
    unsetenv("MINFER_SPIN_US");
    setenv("MINFER_SPIN", "-3", 1);
    tp = (mf_threadpool *)1;
    CHECK(mf_threadpool_new(1, &tp, &err) == MF_E_INVAL && tp == NULL && strstr(err.msg, "MINFER_SPIN='-3'"),
          "threadpool spin: %s", err.msg);
    unsetenv("MINFER_SPIN");
    REQUIRE_OK(mf_threadpool_new(2, &tp, &err), "good env: %s", err.msg);
    mf_threadpool_free(tp);

    setenv("MINFER_PROFILE", "maybe", 1);
    mf_cpu *cpu = NULL;
    CHECK(mf_cpu_new(1, &cpu, &err) == MF_E_INVAL && cpu == NULL && strstr(err.msg, "MINFER_PROFILE='maybe' is not a boolean"),
          "cpu: %s", err.msg);
    unsetenv("MINFER_PROFILE");

    setenv("MINFER_SYNC_COPIES", "0", 1);
    mf_sched *s = NULL;
    CHECK(mf_sched_new(NULL, &s, &err) == MF_E_INVAL && s == NULL && strstr(err.msg, "MINFER_SYNC_COPIES='0' is refused"),
          "sched: %s", err.msg);
    mf_sched_free(s);
    unsetenv("MINFER_SYNC_COPIES");

    /* model load checks everything before it opens the file: the path does not even exist */
    const char *bad[][2] = {{"MINFER_REPACK", "abc"}, {"MINFER_LOG", "bogus"}, {"MINFER_SPIN_US", "1x"},
                            {"MINFER_DISABLE_CUDA", "no"}, {"MINFER_CACHE_TYPE", "q4"},
                            {"MINFER_ATTN_ROT_DISABLE", "maybe"}};
    for (size_t i = 0; i < MF_ARRAY_LEN(bad); i++) {
        setenv(bad[i][0], bad[i][1], 1);
        mf_model *m = (mf_model *)1;
        char want[64];
        snprintf(want, sizeof want, strcmp(bad[i][0], "MINFER_CACHE_TYPE") ? "%s='%s'" : "%s=%s", bad[i][0], bad[i][1]);
        int rc = mf_model_load("no-such-model.gguf", NULL, &m, &err);
        CHECK(rc == MF_E_INVAL && m == NULL && !strncmp(err.msg, want, strlen(want)), "load with %s: rc %d '%s'", want,
              rc, err.msg);
        CHECK(mf_model_load("no-such-model.gguf", NULL, &m, NULL) == MF_E_INVAL, "load with %s, err NULL", want);
        unsetenv(bad[i][0]);
    }
    mf_model *m = NULL;
    CHECK(mf_model_load("no-such-model.gguf", NULL, &m, &err) == MF_E_IO, "clean env reaches the file: %s", err.msg);
}

/* count (MINFER_GPU_LAYERS): a number, all (-1), auto (-2), or a refusal naming the value */
static void count_case(const char *v, int want_rc, int64_t want, bool want_set, const char *want_msg) {
    if (v) setenv("MINFER_GPU_LAYERS", v, 1);
    else unsetenv("MINFER_GPU_LAYERS");
    mf_error err = {0};
    int64_t out = 12345;
    bool set = !want_set;
    int rc = mf_env_count("MINFER_GPU_LAYERS", &out, &set, &err);
    CHECK(rc == want_rc, "'%s': rc %d want %d (%s)", v ? v : "(unset)", rc, want_rc, err.msg);
    if (!want_rc) CHECK(out == want && set == want_set, "'%s': %lld set %d, want %lld set %d", v ? v : "(unset)",
                        (long long)out, set, (long long)want, want_set);
    if (want_msg) CHECK(strstr(err.msg, want_msg) != NULL, "'%s': message '%s' lacks '%s'", v, err.msg, want_msg);
    unsetenv("MINFER_GPU_LAYERS");
}

static void test_count(void) {
    clear_env();
    count_case(NULL, 0, 0, false, NULL);
    count_case(" ", 0, 0, false, NULL);
    count_case("0", 0, 0, true, NULL);
    count_case(" 20 ", 0, 20, true, NULL);
    count_case("all", 0, -1, true, NULL);
    count_case("AUTO", 0, -2, true, NULL);
    count_case("1000000", 0, 1000000, true, NULL);
    count_case("1000001", MF_E_INVAL, 0, false, "MINFER_GPU_LAYERS='1000001' is out of range: allowed a whole number 0..1000000 or one of all|auto");
    count_case("-3", MF_E_INVAL, 0, false, "MINFER_GPU_LAYERS='-3' is not a count");
    count_case("banana", MF_E_INVAL, 0, false, "MINFER_GPU_LAYERS='banana' is not a count: allowed a whole number 0..1000000 or one of all|auto");
    count_case("99999999999999999999", MF_E_INVAL, 0, false, "is out of range");
    /* GPU_MEM: MiB, at least 1 */
    uint_case("MINFER_GPU_MEM", NULL, 0, 0, NULL);
    uint_case("MINFER_GPU_MEM", "64", 0, 64, NULL);
    uint_case("MINFER_GPU_MEM", "0", MF_E_INVAL, 0, "MINFER_GPU_MEM='0' is out of range");
    uint_case("MINFER_GPU_MEM", "abc", MF_E_INVAL, 0, "MINFER_GPU_MEM='abc' is not a whole number");
}

int main(void) {
    RUN(test_count);
    RUN(test_uint);
    RUN(test_bool);
    RUN(test_word);
    RUN(test_flag);
    RUN(test_table);
    RUN(test_reading_points);
    return mf_test_done();
}
