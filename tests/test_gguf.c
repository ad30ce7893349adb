/* gguf: writer -> reader round trips for every metadata type (nested arrays included) and several tensor
 * types, then the malformed-input suite: truncation at many points, byte flips, inflated counts and
 * lengths, bad offsets, types and alignments.  Every hostile buffer is opened from an exact-size heap
 * copy so the sanitizer build catches any read past its end.
 *
 *   test_gguf                         run the suite
 *   test_gguf --write-sample PATH     write the small sample file tests/cli/info.sh inspects
 *   test_gguf --write-all-types PATH  one tensor of every ggml type id (tests/cli/info.sh) */
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "harness.h"

#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>

/* ---------- helpers ---------- */

static char g_path[512];

static const char *tmp_path(const char *name) {
    const char *dir = mf_test_tmpdir();
    mkdir(dir, 0777);
    snprintf(g_path, sizeof g_path, "%s/%s", dir, name);
    return g_path;
}

/* Opens an exact-size heap copy of data[0..len) so any over-read is a sanitizer error. */
static int open_copy(const uint8_t *data, size_t len, mf_gguf **g, uint8_t **copy, mf_error *err) {
    *copy = malloc(len ? len : 1);
    if (len) memcpy(*copy, data, len);
    return mf_gguf_open_memory(*copy, len, g, err);
}

/* Touch everything a successful open exposes: render every value, read every tensor byte. */
static unsigned touch_all(const mf_gguf *g) {
    unsigned sum = 0;
    char buf[256];
    for (int64_t i = 0; i < mf_gguf_n_kv(g); i++) {
        mf_gguf_kv_format(g, i, 4, 32, buf, sizeof buf);
        sum += (unsigned char)buf[0];
        mf_str k = mf_gguf_kv_key(g, i);
        for (uint64_t j = 0; j < k.len; j++) sum += (unsigned char)k.ptr[j];
    }
    for (int64_t i = 0; i < mf_gguf_n_tensors(g); i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        for (uint64_t j = 0; j < t->nbytes; j++) sum += ((const uint8_t *)t->data)[j];
    }
    return sum;
}

/* ---------- the sample file (also used by tests/cli/info.sh) ---------- */

enum { SAMPLE_VOCAB = 40 };

static int write_sample(const char *path, uint32_t alignment, mf_error *err) {
    mf_gguf_writer *w = mf_gguf_writer_new();
    if (!w) return mf_err(err, MF_E_NOMEM, "writer_new");
    char words[SAMPLE_VOCAB][16];
    const char *vocab[SAMPLE_VOCAB];
    for (int i = 0; i < SAMPLE_VOCAB; i++) {
        if (i == 0) snprintf(words[i], sizeof words[i], "!");
        else if (i == 1) snprintf(words[i], sizeof words[i], "\"");
        else snprintf(words[i], sizeof words[i], "t%d", i);
        vocab[i] = words[i];
    }
    int32_t types[SAMPLE_VOCAB];
    for (int i = 0; i < SAMPLE_VOCAB; i++) types[i] = 1;
    mf_gguf_writer_set_str(w, "general.architecture", "qwen2");
    mf_gguf_writer_set_str(w, "general.name", "sample");
    if (alignment) mf_gguf_writer_set_u32(w, "general.alignment", alignment);
    mf_gguf_writer_set_u32(w, "qwen2.block_count", 1);
    mf_gguf_writer_set_u32(w, "qwen2.context_length", 128);
    mf_gguf_writer_set_f32(w, "qwen2.rope.freq_base", 1000000.0f);
    mf_gguf_writer_set_f32(w, "qwen2.attention.layer_norm_rms_epsilon", 1e-6f);
    mf_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    mf_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", vocab, SAMPLE_VOCAB);
    mf_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", MF_GGUF_INT32, types, SAMPLE_VOCAB);
    int64_t ne_emb[2] = {32, SAMPLE_VOCAB}, ne_norm[1] = {32}, ne_q[2] = {256, 2};
    int rc = mf_gguf_writer_add_tensor(w, "token_embd.weight", MF_TYPE_F16, 2, ne_emb, err);
    if (!rc) rc = mf_gguf_writer_add_tensor(w, "output_norm.weight", MF_TYPE_F32, 1, ne_norm, err);
    if (!rc) rc = mf_gguf_writer_add_tensor(w, "blk.0.ffn_up.weight", MF_TYPE_Q8_0, 2, ne_q, err);
    if (!rc) rc = mf_gguf_writer_begin(w, path, err);
    static uint8_t data[32 * SAMPLE_VOCAB * 2];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7 + 1);
    if (!rc) rc = mf_gguf_writer_write_tensor(w, data, 32 * SAMPLE_VOCAB * 2, err);
    if (!rc) rc = mf_gguf_writer_write_tensor(w, data, 32 * 4, err);
    if (!rc) rc = mf_gguf_writer_write_tensor(w, data, 2 * 8 * 34, err);
    if (!rc) rc = mf_gguf_writer_end(w, err);
    mf_gguf_writer_free(w);
    return rc;
}

/* One tensor of every file type id the type table knows ("t.<name>", [256, 2], zero bytes: a valid block of
 * every ggml type), for tests/cli/info.sh: minfer info must show a file whatever its tensor types. */
static int write_all_types(const char *path, mf_error *err) {
    mf_gguf_writer *w = mf_gguf_writer_new();
    if (!w) return mf_err(err, MF_E_NOMEM, "writer_new");
    mf_gguf_writer_set_str(w, "general.architecture", "qwen3");
    int64_t ne[2] = {256, 2};
    int rc = 0;
    for (uint32_t t = 0; t < MF_TYPE_COUNT && !rc; t++) {
        if (!mf_type_get_file(t)) continue;
        char name[32];
        snprintf(name, sizeof name, "t.%s", mf_type_name(t));
        rc = mf_gguf_writer_add_tensor(w, name, t, 2, ne, err);
    }
    if (!rc) rc = mf_gguf_writer_begin(w, path, err);
    static uint8_t zero[256 * 2 * 8];
    for (uint32_t t = 0; t < MF_TYPE_COUNT && !rc; t++)
        if (mf_type_get_file(t)) rc = mf_gguf_writer_write_tensor(w, zero, 2 * mf_row_size(t, 256), err);
    if (!rc) rc = mf_gguf_writer_end(w, err);
    mf_gguf_writer_free(w);
    return rc;
}

static uint8_t *sample_bytes(size_t *len) {
    mf_error err = {0};
    const char *p = tmp_path("gguf_sample.gguf");
    if (write_sample(p, 0, &err)) {
        printf("  write_sample: %s\n", err.msg);
        return NULL;
    }
    return (uint8_t *)mf_test_slurp(p, len);
}

/* ---------- round trips ---------- */

typedef struct {
    uint8_t b[4096];
    size_t n;
} bytes;

static void b_put(bytes *b, const void *p, size_t n) {
    memcpy(b->b + b->n, p, n);
    b->n += n;
}
static void b_u32(bytes *b, uint32_t v) {
    uint8_t x[4];
    for (int i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
    b_put(b, x, 4);
}
static void b_u64(bytes *b, uint64_t v) {
    uint8_t x[8];
    for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    b_put(b, x, 8);
}
static void b_str(bytes *b, const char *s) {
    b_u64(b, strlen(s));
    b_put(b, s, strlen(s));
}

static void test_roundtrip_metadata(void) {
    mf_error err = {0};
    mf_gguf_writer *w = mf_gguf_writer_new();
    REQUIRE(w, "writer_new");
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    int64_t i64 = -5000000000ll;
    double f64 = 0.1;
    mf_gguf_writer_set_scalar(w, "s.u8", MF_GGUF_UINT8, &u8);
    mf_gguf_writer_set_scalar(w, "s.i8", MF_GGUF_INT8, &i8);
    mf_gguf_writer_set_scalar(w, "s.u16", MF_GGUF_UINT16, &u16);
    mf_gguf_writer_set_scalar(w, "s.i16", MF_GGUF_INT16, &i16);
    mf_gguf_writer_set_u32(w, "s.u32", 4000000000u);
    mf_gguf_writer_set_i32(w, "s.i32", -7);
    mf_gguf_writer_set_f32(w, "s.f32", 1.5f);
    mf_gguf_writer_set_bool(w, "s.bool", true);
    mf_gguf_writer_set_str(w, "s.str", "h\xc3\xa9llo \"q\"");
    mf_gguf_writer_set_str(w, "s.empty", "");
    mf_gguf_writer_set_u64(w, "s.u64", 18000000000000000000ull);
    mf_gguf_writer_set_scalar(w, "s.i64", MF_GGUF_INT64, &i64);
    mf_gguf_writer_set_scalar(w, "s.f64", MF_GGUF_FLOAT64, &f64);
    mf_gguf_writer_set_u32(w, "s.replaced", 1);
    mf_gguf_writer_set_u32(w, "s.replaced", 2); /* replaces in place */
    uint8_t a_u8[3] = {1, 2, 255};
    int8_t a_i8[2] = {-1, 1};
    uint16_t a_u16[2] = {1, 65535};
    int16_t a_i16[2] = {-32768, 5};
    uint32_t a_u32[2] = {7, 4000000000u};
    int32_t a_i32[4] = {-2147483647 - 1, 0, 5, 2147483647};
    float a_f32[3] = {0.5f, -2.0f, 1e-6f};
    uint8_t a_bool[2] = {1, 0};
    uint64_t a_u64[2] = {1, 18000000000000000000ull};
    int64_t a_i64[2] = {-1, 3};
    double a_f64[2] = {0.25, -1e300};
    mf_gguf_writer_set_arr(w, "a.u8", MF_GGUF_UINT8, a_u8, 3);
    mf_gguf_writer_set_arr(w, "a.i8", MF_GGUF_INT8, a_i8, 2);
    mf_gguf_writer_set_arr(w, "a.u16", MF_GGUF_UINT16, a_u16, 2);
    mf_gguf_writer_set_arr(w, "a.i16", MF_GGUF_INT16, a_i16, 2);
    mf_gguf_writer_set_arr(w, "a.u32", MF_GGUF_UINT32, a_u32, 2);
    mf_gguf_writer_set_arr(w, "a.i32", MF_GGUF_INT32, a_i32, 4);
    mf_gguf_writer_set_arr(w, "a.f32", MF_GGUF_FLOAT32, a_f32, 3);
    mf_gguf_writer_set_arr(w, "a.bool", MF_GGUF_BOOL, a_bool, 2);
    mf_gguf_writer_set_arr(w, "a.u64", MF_GGUF_UINT64, a_u64, 2);
    mf_gguf_writer_set_arr(w, "a.i64", MF_GGUF_INT64, a_i64, 2);
    mf_gguf_writer_set_arr(w, "a.f64", MF_GGUF_FLOAT64, a_f64, 2);
    mf_gguf_writer_set_arr(w, "a.empty", MF_GGUF_UINT8, NULL, 0);
    const char *strs[3] = {"!", "\"", ""};
    mf_gguf_writer_set_str_arr(w, "a.str", strs, 3);
    /* nested: [[i32 x 2] 1, 2], [[i32 x 0]], then [[[string x 1] "x"]] three levels deep */
    bytes nest = {.n = 0};
    b_u32(&nest, MF_GGUF_ARRAY);
    b_u64(&nest, 2);
    b_u32(&nest, MF_GGUF_INT32);
    b_u64(&nest, 2);
    b_u32(&nest, 1);
    b_u32(&nest, 2);
    b_u32(&nest, MF_GGUF_INT32);
    b_u64(&nest, 0);
    mf_gguf_writer_set_raw(w, "a.nested", MF_GGUF_ARRAY, nest.b, nest.n);
    bytes deep = {.n = 0};
    b_u32(&deep, MF_GGUF_ARRAY);
    b_u64(&deep, 1);
    b_u32(&deep, MF_GGUF_ARRAY);
    b_u64(&deep, 1);
    b_u32(&deep, MF_GGUF_STRING);
    b_u64(&deep, 1);
    b_str(&deep, "x");
    mf_gguf_writer_set_raw(w, "a.deep", MF_GGUF_ARRAY, deep.b, deep.n);
    const char *path = tmp_path("gguf_meta.gguf");
    int rc = mf_gguf_writer_begin(w, path, &err);
    if (!rc) rc = mf_gguf_writer_end(w, &err);
    mf_gguf_writer_free(w);
    REQUIRE(rc == 0, "write: %s", err.msg);

    mf_gguf *g = NULL;
    rc = mf_gguf_open(path, &g, &err);
    REQUIRE(rc == 0, "open: %s", err.msg);
    CHECK(mf_gguf_version(g) == 3, "version %u", mf_gguf_version(g));
    CHECK(mf_gguf_alignment(g) == 32, "alignment %llu", (unsigned long long)mf_gguf_alignment(g));
    CHECK(mf_gguf_n_kv(g) == 29, "n_kv %lld", (long long)mf_gguf_n_kv(g));
    CHECK(mf_gguf_n_tensors(g) == 0, "n_tensors");
    CHECK(mf_str_eq(mf_gguf_kv_key(g, 0), "s.u8"), "first key order");
    CHECK(mf_gguf_kv_type(g, mf_gguf_find_key(g, "s.i16")) == MF_GGUF_INT16, "i16 type");

    uint32_t v32 = 0;
    uint64_t v64 = 0;
    int64_t s64 = 0;
    float f = 0;
    bool bl = false;
    mf_str s = {0};
    CHECK(mf_gguf_get_u32(g, "s.u8", &v32, &err) == 0 && v32 == 200, "u8 -> u32 %u", v32);
    CHECK(mf_gguf_get_i64(g, "s.i8", &s64, &err) == 0 && s64 == -100, "i8 -> i64 %lld", (long long)s64);
    CHECK(mf_gguf_get_u32(g, "s.u16", &v32, &err) == 0 && v32 == 60000, "u16");
    CHECK(mf_gguf_get_i64(g, "s.i16", &s64, &err) == 0 && s64 == -30000, "i16");
    CHECK(mf_gguf_get_u32(g, "s.u32", &v32, &err) == 0 && v32 == 4000000000u, "u32");
    CHECK(mf_gguf_get_i64(g, "s.i32", &s64, &err) == 0 && s64 == -7, "i32");
    CHECK(mf_gguf_get_f32(g, "s.f32", &f, &err) == 0 && f == 1.5f, "f32");
    CHECK(mf_gguf_get_bool(g, "s.bool", &bl, &err) == 0 && bl, "bool");
    CHECK(mf_gguf_get_str(g, "s.str", &s, &err) == 0 && mf_str_eq(s, "h\xc3\xa9llo \"q\""), "str");
    CHECK(mf_gguf_get_str(g, "s.empty", &s, &err) == 0 && s.len == 0, "empty str");
    CHECK(mf_gguf_get_u64(g, "s.u64", &v64, &err) == 0 && v64 == 18000000000000000000ull, "u64");
    CHECK(mf_gguf_get_i64(g, "s.i64", &s64, &err) == 0 && s64 == -5000000000ll, "i64");
    CHECK(mf_gguf_get_f32(g, "s.f64", &f, &err) == 0 && f == 0.1f, "f64 -> f32");
    CHECK(mf_gguf_get_u32(g, "s.replaced", &v32, &err) == 0 && v32 == 2, "replaced %u", v32);

    /* raw bytes of every scalar array equal what was written (little-endian host) */
    struct { const char *key; const void *data; size_t bytes; mf_gguf_type t; } arrs[] = {
        {"a.u8", a_u8, sizeof a_u8, MF_GGUF_UINT8},     {"a.i8", a_i8, sizeof a_i8, MF_GGUF_INT8},
        {"a.u16", a_u16, sizeof a_u16, MF_GGUF_UINT16}, {"a.i16", a_i16, sizeof a_i16, MF_GGUF_INT16},
        {"a.u32", a_u32, sizeof a_u32, MF_GGUF_UINT32}, {"a.i32", a_i32, sizeof a_i32, MF_GGUF_INT32},
        {"a.f32", a_f32, sizeof a_f32, MF_GGUF_FLOAT32}, {"a.bool", a_bool, sizeof a_bool, MF_GGUF_BOOL},
        {"a.u64", a_u64, sizeof a_u64, MF_GGUF_UINT64}, {"a.i64", a_i64, sizeof a_i64, MF_GGUF_INT64},
        {"a.f64", a_f64, sizeof a_f64, MF_GGUF_FLOAT64},
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(arrs); i++) {
        int64_t k = mf_gguf_find_key(g, arrs[i].key);
        uint64_t nb = 0;
        const void *d = mf_gguf_kv_data(g, k, &nb);
        CHECK(k >= 0 && mf_gguf_kv_type(g, k) == MF_GGUF_ARRAY && mf_gguf_kv_arr_type(g, k) == arrs[i].t,
              "%s type", arrs[i].key);
        CHECK(nb == arrs[i].bytes && d && memcmp(d, arrs[i].data, nb) == 0, "%s bytes (%llu)", arrs[i].key,
              (unsigned long long)nb);
    }
    int64_t k = mf_gguf_find_key(g, "a.nested");
    uint64_t nb = 0;
    const void *d = mf_gguf_kv_data(g, k, &nb);
    CHECK(mf_gguf_kv_arr_type(g, k) == MF_GGUF_ARRAY && mf_gguf_kv_arr_len(g, k) == 2, "nested header");
    CHECK(nb == nest.n - 12 && memcmp(d, nest.b + 12, nb) == 0, "nested bytes %llu", (unsigned long long)nb);
    k = mf_gguf_find_key(g, "a.deep");
    d = mf_gguf_kv_data(g, k, &nb);
    CHECK(nb == deep.n - 12 && memcmp(d, deep.b + 12, nb) == 0, "deep bytes");
    CHECK(mf_gguf_kv_arr_len(g, mf_gguf_find_key(g, "a.empty")) == 0, "empty array");

    mf_str *sv = NULL;
    int32_t *iv = NULL;
    float *fv = NULL;
    uint64_t n = 0;
    CHECK(mf_gguf_get_str_array(g, "a.str", &sv, &n, &err) == 0 && n == 3 && mf_str_eq(sv[0], "!") &&
              mf_str_eq(sv[1], "\"") && sv[2].len == 0, "str array");
    free(sv);
    CHECK(mf_gguf_get_i32_array(g, "a.i32", &iv, &n, &err) == 0 && n == 4 && iv[0] == a_i32[0] && iv[3] == a_i32[3],
          "i32 array");
    free(iv);
    iv = NULL;
    CHECK(mf_gguf_get_i32_array(g, "a.i16", &iv, &n, &err) == 0 && n == 2 && iv[0] == -32768, "i16 -> i32 array");
    free(iv);
    CHECK(mf_gguf_get_f32_array(g, "a.f32", &fv, &n, &err) == 0 && n == 3 && fv[2] == 1e-6f, "f32 array");
    free(fv);
    fv = NULL;
    CHECK(mf_gguf_get_f32_array(g, "a.u8", &fv, &n, &err) == 0 && n == 3 && fv[2] == 255.0f, "u8 -> f32 array");
    free(fv);
    fv = NULL;
    CHECK(mf_gguf_get_f32_array(g, "a.empty", &fv, &n, &err) == 0 && n == 0, "empty f32 array");
    free(fv);
    touch_all(g);
    mf_gguf_close(g);
}

static void test_getter_refusals(void) {
    mf_error err = {0};
    mf_gguf_writer *w = mf_gguf_writer_new();
    REQUIRE(w, "writer_new");
    int32_t neg = -3;
    uint64_t big[1] = {3000000000ull};
    mf_gguf_writer_set_i32(w, "neg", neg);
    mf_gguf_writer_set_u64(w, "big", 5000000000ull);
    mf_gguf_writer_set_str(w, "name", "x");
    mf_gguf_writer_set_arr(w, "bigs", MF_GGUF_UINT64, big, 1);
    const char *path = tmp_path("gguf_getters.gguf");
    int rc = mf_gguf_writer_begin(w, path, &err);
    if (!rc) rc = mf_gguf_writer_end(w, &err);
    mf_gguf_writer_free(w);
    REQUIRE(rc == 0, "write: %s", err.msg);
    mf_gguf *g = NULL;
    REQUIRE_OK(mf_gguf_open(path, &g, &err), "open: %s", err.msg);
    uint32_t v32;
    uint64_t v64;
    int64_t s64;
    bool b;
    mf_str s;
    int32_t *iv = NULL;
    uint64_t n;
    rc = mf_gguf_get_u32(g, "missing.key", &v32, &err);
    CHECK(rc == MF_E_NOTFOUND && strstr(err.msg, "key 'missing.key' not found"), "missing: %d %s", rc, err.msg);
    rc = mf_gguf_get_u32(g, "neg", &v32, &err);
    CHECK(rc == MF_E_RANGE && strstr(err.msg, "'neg'") && strstr(err.msg, "-3") && strstr(err.msg, "u32"), "neg: %s",
          err.msg);
    rc = mf_gguf_get_u64(g, "neg", &v64, &err);
    CHECK(rc == MF_E_RANGE, "neg u64: %s", err.msg);
    CHECK(mf_gguf_get_i64(g, "neg", &s64, &err) == 0 && s64 == -3, "neg i64");
    rc = mf_gguf_get_u32(g, "big", &v32, &err);
    CHECK(rc == MF_E_RANGE && strstr(err.msg, "5000000000"), "big: %s", err.msg);
    rc = mf_gguf_get_u32(g, "name", &v32, &err);
    CHECK(rc == MF_E_TYPE && strstr(err.msg, "'name' is a string, wanted u32"), "type: %s", err.msg);
    rc = mf_gguf_get_bool(g, "neg", &b, &err);
    CHECK(rc == MF_E_TYPE && strstr(err.msg, "i32") && strstr(err.msg, "bool"), "bool: %s", err.msg);
    rc = mf_gguf_get_str(g, "bigs", &s, &err);
    CHECK(rc == MF_E_TYPE && strstr(err.msg, "array of u64"), "str: %s", err.msg);
    rc = mf_gguf_get_i32_array(g, "bigs", &iv, &n, &err);
    CHECK(rc == MF_E_RANGE && strstr(err.msg, "element 0 is 3000000000"), "i32 arr: %s", err.msg);
    rc = mf_gguf_get_i32_array(g, "name", &iv, &n, &err);
    CHECK(rc == MF_E_TYPE && strstr(err.msg, "wanted array of integers"), "i32 arr type: %s", err.msg);
    CHECK(mf_gguf_find_key(g, "nope") == -1 && mf_gguf_find_tensor(g, "nope") == NULL, "absent lookups");
    CHECK(mf_gguf_kv_type(g, 99) == MF_GGUF_TYPE_COUNT && mf_gguf_tensor_at(g, 0) == NULL, "out of range");
    mf_gguf_close(g);
}

static void test_roundtrip_tensors(void) {
    mf_error err = {0};
    mf_gguf_writer *w = mf_gguf_writer_new();
    REQUIRE(w, "writer_new");
    struct { const char *name; uint32_t type, n_dims; int64_t ne[4]; } ts[] = {
        {"t.f32", MF_TYPE_F32, 1, {7, 1, 1, 1}},       {"t.f16", MF_TYPE_F16, 2, {3, 5, 1, 1}},
        {"t.q8_0", MF_TYPE_Q8_0, 3, {64, 2, 3, 1}},    {"t.q4_K", MF_TYPE_Q4_K, 2, {256, 3, 1, 1}},
        {"t.empty", MF_TYPE_F32, 2, {0, 4, 1, 1}},     {"t.bf16", MF_TYPE_BF16, 4, {2, 2, 2, 2}},
        {"t.q6_K", MF_TYPE_Q6_K, 2, {512, 1, 1, 1}},   {"t.q4_0", MF_TYPE_Q4_0, 1, {32, 1, 1, 1}},
    };
    uint64_t want[] = {28, 30, 34 * 2 * 6, 144 * 3, 0, 32, 420, 18};
    for (size_t i = 0; i < MF_ARRAY_LEN(ts); i++)
        REQUIRE_OK(mf_gguf_writer_add_tensor(w, ts[i].name, ts[i].type, ts[i].n_dims, ts[i].ne, &err), "add %s: %s",
                ts[i].name, err.msg);
    const char *path = tmp_path("gguf_tensors.gguf");
    REQUIRE_OK(mf_gguf_writer_begin(w, path, &err), "begin: %s", err.msg);
    uint8_t buf[2048];
    for (size_t i = 0; i < MF_ARRAY_LEN(ts); i++) {
        for (uint64_t j = 0; j < want[i]; j++) buf[j] = (uint8_t)(i * 31 + j);
        REQUIRE_OK(mf_gguf_writer_write_tensor(w, buf, want[i], &err), "write %s: %s", ts[i].name, err.msg);
    }
    REQUIRE_OK(mf_gguf_writer_end(w, &err), "end: %s", err.msg);
    mf_gguf_writer_free(w);

    mf_gguf *g = NULL;
    REQUIRE_OK(mf_gguf_open(path, &g, &err), "open: %s", err.msg);
    CHECK(mf_gguf_n_tensors(g) == (int64_t)MF_ARRAY_LEN(ts), "n_tensors");
    CHECK(mf_gguf_data_offset(g) % 32 == 0, "data offset %llu", (unsigned long long)mf_gguf_data_offset(g));
    uint64_t expect_off = 0;
    for (size_t i = 0; i < MF_ARRAY_LEN(ts); i++) {
        const mf_gguf_tensor *t = mf_gguf_find_tensor(g, ts[i].name);
        REQUIRE(t && t == mf_gguf_tensor_at(g, (int64_t)i), "find %s", ts[i].name);
        CHECK(t->type == ts[i].type && t->n_dims == ts[i].n_dims, "%s type/dims", ts[i].name);
        CHECK(memcmp(t->ne, ts[i].ne, sizeof t->ne) == 0, "%s shape", ts[i].name);
        CHECK(t->nbytes == want[i], "%s nbytes %llu want %llu", ts[i].name, (unsigned long long)t->nbytes,
              (unsigned long long)want[i]);
        /* llama.cpp demands consecutive offsets, each tensor padded to the alignment */
        CHECK(t->offset == expect_off, "%s offset %llu want %llu", ts[i].name, (unsigned long long)t->offset,
              (unsigned long long)expect_off);
        expect_off += (t->nbytes + 31) / 32 * 32;
        CHECK((const uint8_t *)t->data == (const uint8_t *)mf_gguf_tensor_at(g, 0)->data + t->offset, "data ptr");
        bool same = true;
        for (uint64_t j = 0; j < t->nbytes; j++) same &= ((const uint8_t *)t->data)[j] == (uint8_t)(i * 31 + j);
        CHECK(same, "%s data", ts[i].name);
    }
    CHECK(mf_gguf_file_size(g) == mf_gguf_data_offset(g) + expect_off, "file size %llu",
          (unsigned long long)mf_gguf_file_size(g));
    mf_gguf_close(g);
}

static void test_custom_alignment(void) {
    mf_error err = {0};
    const char *path = tmp_path("gguf_align64.gguf");
    REQUIRE_OK(write_sample(path, 64, &err), "write: %s", err.msg);
    mf_gguf *g = NULL;
    REQUIRE_OK(mf_gguf_open(path, &g, &err), "open: %s", err.msg);
    CHECK(mf_gguf_alignment(g) == 64, "alignment %llu", (unsigned long long)mf_gguf_alignment(g));
    CHECK(mf_gguf_data_offset(g) % 64 == 0, "data offset");
    for (int64_t i = 0; i < mf_gguf_n_tensors(g); i++) CHECK(mf_gguf_tensor_at(g, i)->offset % 64 == 0, "offset %lld", (long long)i);
    mf_gguf_close(g);

    int rc = write_sample(tmp_path("gguf_align48.gguf"), 48, &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "48") && strstr(err.msg, "power of two"), "align 48: %s", err.msg);
    mf_gguf_writer *w = mf_gguf_writer_new();
    mf_gguf_writer_set_u64(w, "general.alignment", 64);
    rc = mf_gguf_writer_begin(w, tmp_path("gguf_align_u64.gguf"), &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "must be a u32"), "align u64: %s", err.msg);
    mf_gguf_writer_free(w);
}

static void test_writer_misuse(void) {
    mf_error err = {0};
    mf_gguf_writer *w = mf_gguf_writer_new();
    REQUIRE(w, "writer_new");
    int64_t ne[2] = {33, 2}, ok_ne[2] = {32, 2}, neg[2] = {4, -1};
    int rc = mf_gguf_writer_add_tensor(w, "q", MF_TYPE_Q8_0, 2, ne, &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "33") && strstr(err.msg, "block size 32"), "block: %s", err.msg);
    rc = mf_gguf_writer_add_tensor(w, "u", 43, 2, ok_ne, &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "unknown ggml type id 43"), "type: %s", err.msg);
    rc = mf_gguf_writer_add_tensor(w, "n", MF_TYPE_F32, 2, neg, &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "negative"), "neg: %s", err.msg);
    rc = mf_gguf_writer_add_tensor(w, "d", MF_TYPE_F32, 5, ok_ne, &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "n_dims 5"), "dims: %s", err.msg);
    char longname[80];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    rc = mf_gguf_writer_add_tensor(w, longname, MF_TYPE_F32, 2, ok_ne, &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "79 bytes"), "long name: %s", err.msg);
    CHECK(mf_gguf_writer_add_tensor(w, "a", MF_TYPE_F32, 2, ok_ne, &err) == 0, "add a");
    rc = mf_gguf_writer_add_tensor(w, "a", MF_TYPE_F32, 2, ok_ne, &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "'a' declared twice"), "dup: %s", err.msg);
    CHECK(mf_gguf_writer_add_tensor(w, "b", MF_TYPE_F32, 1, ok_ne, &err) == 0, "add b");
    CHECK(mf_gguf_writer_set_arr(w, "bad", MF_GGUF_STRING, "x", 1) == MF_E_INVAL, "string via set_arr");
    const char *path = tmp_path("gguf_misuse.gguf");
    remove(path);
    rc = mf_gguf_writer_begin(w, path, &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "'bad'"), "sticky setter error: %s", err.msg);
    mf_gguf_writer_free(w);

    w = mf_gguf_writer_new();
    mf_gguf_writer_add_tensor(w, "a", MF_TYPE_F32, 2, ok_ne, &err);
    mf_gguf_writer_add_tensor(w, "b", MF_TYPE_F32, 1, ok_ne, &err);
    REQUIRE_OK(mf_gguf_writer_begin(w, path, &err), "begin: %s", err.msg);
    CHECK(mf_gguf_writer_set_u32(w, "late", 1) == MF_E_INVAL, "set after begin");
    float data[64] = {0};
    rc = mf_gguf_writer_write_tensor(w, data, 100, &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "got 100 bytes") && strstr(err.msg, "256"), "size: %s", err.msg);
    CHECK(mf_gguf_writer_write_tensor(w, data, 256, &err) == 0, "write a: %s", err.msg);
    rc = mf_gguf_writer_end(w, &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "1 of 2") && strstr(err.msg, "'b'"), "end early: %s", err.msg);
    rc = mf_gguf_writer_write_tensor(w, data, 128, &err);
    CHECK(rc == MF_E_INVAL, "write after end");
    mf_gguf_writer_free(w);
    struct stat st;
    CHECK(stat(path, &st) != 0, "a refused end leaves no file at '%s'", path);

    /* abandoned mid-write: no file, no leftovers; a finished write replaces the target atomically */
    w = mf_gguf_writer_new();
    mf_gguf_writer_add_tensor(w, "a", MF_TYPE_F32, 2, ok_ne, &err);
    REQUIRE_OK(mf_gguf_writer_begin(w, path, &err), "begin: %s", err.msg);
    mf_gguf_writer_free(w);
    CHECK(stat(path, &st) != 0, "an abandoned write leaves no file");
    w = mf_gguf_writer_new();
    REQUIRE_OK(mf_gguf_writer_begin(w, path, &err), "begin: %s", err.msg);
    CHECK(stat(path, &st) != 0, "target appears only at end");
    REQUIRE_OK(mf_gguf_writer_end(w, &err), "end: %s", err.msg);
    mf_gguf_writer_free(w);
    CHECK(stat(path, &st) == 0 && st.st_size == 32, "empty gguf written (%lld bytes)", (long long)st.st_size);
    remove(path);

    w = mf_gguf_writer_new();
    rc = mf_gguf_writer_begin(w, "/nonexistent-dir/x.gguf", &err);
    CHECK(rc == MF_E_IO && strstr(err.msg, "/nonexistent-dir/x.gguf"), "bad path: %s", err.msg);
    mf_gguf_writer_free(w);
}

static void test_many_names(void) {
    mf_error err = {0};
    mf_gguf_writer *w = mf_gguf_writer_new();
    REQUIRE(w, "writer_new");
    char name[64];
    int64_t ne[1] = {1};
    for (int i = 0; i < 600; i++) {
        snprintf(name, sizeof name, "k.%d", i);
        mf_gguf_writer_set_u32(w, name, (uint32_t)i);
        snprintf(name, sizeof name, "blk.%d.w", i);
        REQUIRE_OK(mf_gguf_writer_add_tensor(w, name, MF_TYPE_F32, 1, ne, &err), "add: %s", err.msg);
    }
    const char *path = tmp_path("gguf_many.gguf");
    REQUIRE_OK(mf_gguf_writer_begin(w, path, &err), "begin: %s", err.msg);
    for (int i = 0; i < 600; i++) {
        float v = (float)i;
        REQUIRE_OK(mf_gguf_writer_write_tensor(w, &v, 4, &err), "write: %s", err.msg);
    }
    REQUIRE_OK(mf_gguf_writer_end(w, &err), "end: %s", err.msg);
    mf_gguf_writer_free(w);
    mf_gguf *g = NULL;
    REQUIRE_OK(mf_gguf_open(path, &g, &err), "open: %s", err.msg);
    int bad = 0;
    for (int i = 0; i < 600; i++) {
        uint32_t v = 0;
        snprintf(name, sizeof name, "k.%d", i);
        if (mf_gguf_get_u32(g, name, &v, &err) || v != (uint32_t)i) bad++;
        snprintf(name, sizeof name, "blk.%d.w", i);
        const mf_gguf_tensor *t = mf_gguf_find_tensor(g, name);
        float f = -1;
        if (t) memcpy(&f, t->data, 4);
        if (!t || f != (float)i) bad++;
    }
    CHECK(bad == 0, "%d lookups failed", bad);
    mf_gguf_close(g);
}

static void test_format(void) {
    mf_error err = {0};
    mf_gguf_writer *w = mf_gguf_writer_new();
    REQUIRE(w, "writer_new");
    const char *strs[4] = {"!", "\"", "#", "$"};
    mf_gguf_writer_set_str_arr(w, "toks", strs, 4);
    mf_gguf_writer_set_f32(w, "eps", 1e-6f);
    mf_gguf_writer_set_f32(w, "base", 1000000.0f);
    mf_gguf_writer_set_f32(w, "tenth", 0.1f);
    mf_gguf_writer_set_str(w, "long", "abcdefghijklmnopqrstuvwxyz");
    mf_gguf_writer_set_str(w, "ctl", "a\nb\x01");
    mf_gguf_writer_set_bool(w, "flag", true);
    mf_gguf_writer_set_i32(w, "neg", -5);
    bytes nest = {.n = 0};
    b_u32(&nest, MF_GGUF_ARRAY);
    b_u64(&nest, 2);
    b_u32(&nest, MF_GGUF_INT32);
    b_u64(&nest, 2);
    b_u32(&nest, 1);
    b_u32(&nest, 2);
    b_u32(&nest, MF_GGUF_UINT8);
    b_u64(&nest, 0);
    mf_gguf_writer_set_raw(w, "nest", MF_GGUF_ARRAY, nest.b, nest.n);
    const char *path = tmp_path("gguf_format.gguf");
    int rc = mf_gguf_writer_begin(w, path, &err);
    if (!rc) rc = mf_gguf_writer_end(w, &err);
    mf_gguf_writer_free(w);
    REQUIRE(rc == 0, "write: %s", err.msg);
    mf_gguf *g = NULL;
    REQUIRE_OK(mf_gguf_open(path, &g, &err), "open: %s", err.msg);
    struct { const char *key; size_t max_elems, max_str; const char *want; } cases[] = {
        {"toks", 3, 0, "[string x 4] \"!\", \"\\\"\", \"#\", ..."},
        {"toks", 0, 0, "[string x 4] \"!\", \"\\\"\", \"#\", \"$\""},
        {"eps", 0, 0, "1e-06"},
        {"base", 0, 0, "1000000"},
        {"tenth", 0, 0, "0.1"},
        {"long", 0, 5, "\"abcde\"... (26 bytes)"},
        {"ctl", 0, 0, "\"a\\nb\\x01\""},
        {"flag", 0, 0, "true"},
        {"neg", 0, 0, "-5"},
        {"nest", 0, 0, "[array x 2] [[i32 x 2] 1, 2], [[u8 x 0]]"},
        {"nest", 1, 0, "[array x 2] [[i32 x 2] 1, ...], ..."},
    };
    char buf[256];
    for (size_t i = 0; i < MF_ARRAY_LEN(cases); i++) {
        size_t n = mf_gguf_kv_format(g, mf_gguf_find_key(g, cases[i].key), cases[i].max_elems, cases[i].max_str, buf,
                                     sizeof buf);
        CHECK(strcmp(buf, cases[i].want) == 0 && n == strlen(buf), "%s: got '%s' want '%s'", cases[i].key, buf,
              cases[i].want);
    }
    char small[8];
    size_t n = mf_gguf_kv_format(g, mf_gguf_find_key(g, "long"), 0, 0, small, sizeof small);
    CHECK(n == 28 && strcmp(small, "\"abcdef") == 0, "truncated buffer: %zu '%s'", n, small);
    mf_gguf_close(g);
}

static void test_open_errors(void) {
    mf_error err = {0};
    mf_gguf *g = (mf_gguf *)1;
    int rc = mf_gguf_open(tmp_path("does-not-exist.gguf"), &g, &err);
    CHECK(rc == MF_E_IO && g == NULL && strstr(err.msg, "does-not-exist.gguf") && strstr(err.msg, "No such file"),
          "missing: %s", err.msg);
    rc = mf_gguf_open(mf_test_tmpdir(), &g, &err);
    CHECK(rc == MF_E_IO && strstr(err.msg, "not a readable regular file"), "dir: %s", err.msg);
    const char *empty = tmp_path("gguf_empty.gguf");
    FILE *f = fopen(empty, "wb");
    if (f) fclose(f);
    rc = mf_gguf_open(empty, &g, &err);
    CHECK(rc == MF_E_FORMAT && strstr(err.msg, "gguf_empty.gguf") && strstr(err.msg, "magic"), "empty: %s", err.msg);
    rc = mf_gguf_open_memory("GGUF", 4, &g, &err);
    CHECK(rc == MF_E_FORMAT && strstr(err.msg, "version"), "4 bytes: %s", err.msg);
    /* err is optional: a refusal that passes through mf_err_prefix keeps its own code without one */
    rc = mf_gguf_open(empty, &g, NULL);
    CHECK(rc == MF_E_FORMAT && g == NULL, "empty file, err NULL: rc %d (%s), want %d", rc, mf_err_code_name(rc),
          MF_E_FORMAT);
    CHECK(mf_err_prefix(NULL, MF_E_NOMEM, "ctx") == MF_E_NOMEM, "mf_err_prefix(NULL) keeps the caller's code");
    mf_err(&err, MF_E_IO, "inner %d", 7);
    rc = mf_err_prefix(&err, MF_E_IO, "outer '%s'", "x");
    CHECK(rc == MF_E_IO && err.code == MF_E_IO && !strcmp(err.msg, "outer 'x': inner 7"), "prefix: %d '%s'", rc, err.msg);
}

/* ---------- versions ---------- */

static void test_versions(void) {
    size_t len = 0;
    uint8_t *file = sample_bytes(&len);
    REQUIRE(file, "sample");
    mf_error err = {0};
    mf_gguf *g = NULL;
    uint8_t *copy = NULL;
    file[4] = 2; /* v2 has the v3 layout (v3 only added big-endian files) */
    int rc = open_copy(file, len, &g, &copy, &err);
    CHECK(rc == 0 && mf_gguf_version(g) == 2, "v2: %s", err.msg);
    mf_gguf_close(g);
    free(copy);
    struct { uint32_t v; const char *want; } bad[] = {
        {1, "version 1 is not supported"}, {4, "version 4 is not supported"}, {0, "version 0"},
        {0x03000000u, "big-endian"},
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(bad); i++) {
        for (int b = 0; b < 4; b++) file[4 + b] = (uint8_t)(bad[i].v >> (8 * b));
        rc = open_copy(file, len, &g, &copy, &err);
        CHECK(rc != 0 && g == NULL && strstr(err.msg, bad[i].want), "version %u: %s", bad[i].v, err.msg);
        free(copy);
    }
    free(file);
}

/* ---------- hostile input ---------- */

static void test_truncation(void) {
    size_t len = 0;
    uint8_t *file = sample_bytes(&len);
    REQUIRE(file, "sample");
    mf_error err = {0};
    mf_gguf *g = NULL;
    uint8_t *copy = NULL;
    REQUIRE_OK(open_copy(file, len, &g, &copy, &err), "full: %s", err.msg);
    /* the last tensor's data ends before the trailing padding; shorter files must be refused */
    uint64_t needed = 0;
    for (int64_t i = 0; i < mf_gguf_n_tensors(g); i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        uint64_t end = mf_gguf_data_offset(g) + t->offset + t->nbytes;
        if (end > needed) needed = end;
    }
    uint64_t data_off = mf_gguf_data_offset(g);
    mf_gguf_close(g);
    free(copy);
    int wrong = 0, empty_msg = 0;
    for (size_t cut = 0; cut < len; cut += cut < data_off ? 1 : 3) {
        err.msg[0] = 0;
        int rc = open_copy(file, cut, &g, &copy, &err);
        bool want_ok = cut >= needed;
        if ((rc == 0) != want_ok) {
            if (wrong++ < 5) printf("  cut at %zu: rc %d (%s)\n", cut, rc, err.msg);
        }
        if (rc && (!err.msg[0] || rc != MF_E_FORMAT)) empty_msg++;
        if (!rc) touch_all(g);
        mf_gguf_close(g);
        free(copy);
    }
    CHECK(wrong == 0, "%d cuts misjudged (file %zu bytes, data needs %llu)", wrong, len, (unsigned long long)needed);
    CHECK(empty_msg == 0, "%d refusals without a format message", empty_msg);
    /* a representative message: cut inside the tensor data */
    open_copy(file, (size_t)needed - 1, &g, &copy, &err);
    CHECK(strstr(err.msg, "tensor 'blk.0.ffn_up.weight' data [offset") && strstr(err.msg, "ends past the file"), "%s",
          err.msg);
    free(copy);
    open_copy(file, 20, &g, &copy, &err);
    CHECK(strstr(err.msg, "metadata key count at offset 16 needs 8 bytes"), "%s", err.msg);
    free(copy);
    free(file);
}

static void test_byte_flips(void) {
    size_t len = 0;
    uint8_t *file = sample_bytes(&len);
    REQUIRE(file, "sample");
    mf_error err = {0};
    mf_gguf *g = NULL;
    uint8_t *copy = NULL;
    REQUIRE_OK(open_copy(file, len, &g, &copy, &err), "full: %s", err.msg);
    size_t header = (size_t)mf_gguf_data_offset(g);
    mf_gguf_close(g);
    free(copy);
    static const uint8_t patterns[] = {0xff, 0x80, 0x01, 0x7f};
    int refused = 0, accepted = 0, silent = 0;
    for (size_t pos = 0; pos < header; pos++) {
        for (size_t p = 0; p < sizeof patterns; p++) {
            uint8_t keep = file[pos];
            file[pos] ^= patterns[p];
            err.msg[0] = 0;
            int rc = open_copy(file, len, &g, &copy, &err);
            if (rc) {
                refused++;
                if (!err.msg[0]) silent++;
            } else {
                accepted++;
                touch_all(g);
            }
            mf_gguf_close(g);
            free(copy);
            file[pos] = keep;
        }
    }
    /* deterministic multi-byte corruption, anywhere in the file */
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int iter = 0; iter < 3000; iter++) {
        uint8_t *m = malloc(len);
        memcpy(m, file, len);
        int flips = 1 + iter % 4;
        for (int k = 0; k < flips; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t pos = (size_t)(seed >> 33) % (iter % 2 ? len : header);
            m[pos] = (uint8_t)(seed >> 17);
        }
        int rc = mf_gguf_open_memory(m, len, &g, &err);
        if (!rc) {
            touch_all(g);
            mf_gguf_close(g);
        } else if (!err.msg[0]) {
            silent++;
        }
        free(m);
    }
    CHECK(silent == 0, "%d refusals without a message", silent);
    CHECK(refused > 0 && accepted > 0, "refused %d accepted %d", refused, accepted);
    free(file);
}

static size_t find_bytes(const uint8_t *h, size_t n, const char *s) {
    const size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(h + i, s, k)) return i;
    return (size_t)-1;
}

/* Single flips in known fields: each refusal names the field, where it is and the value it read (not
 * only "some message"): the counts, a value type, and every field of a tensor's index entry. */
static void test_byte_flips_name_the_field(void) {
    size_t len = 0;
    uint8_t *file = sample_bytes(&len);
    REQUIRE(file, "sample");
    mf_error err = {0};
    mf_gguf *g = NULL;
    uint8_t *copy = NULL;
    REQUIRE_OK(open_copy(file, len, &g, &copy, &err), "full: %s", err.msg);
    const uint64_t data_off = mf_gguf_data_offset(g);
    mf_gguf_close(g);
    free(copy);
    /* token_embd.weight's entry: name, n_dims u32, ne[2] u64, type u32 (1 = f16), offset u64 (0) */
    const size_t arch = find_bytes(file, len, "general.architecture"), te = find_bytes(file, len, "token_embd.weight");
    REQUIRE(arch == 32 && te != (size_t)-1 && te < data_off, "sample layout: arch key at %zu, token_embd at %zu", arch,
            te);
    const size_t dims = te + 17, ne0 = dims + 4, type = ne0 + 16, offs = type + 4;
    char past[192], ty[96], vt[128];
    snprintf(past, sizeof past,
             "tensor 'token_embd.weight' data [offset 0, 12800 bytes] ends past the file (%zu bytes; the data section "
             "starts at byte %llu)",
             len, (unsigned long long)data_off);
    snprintf(ty, sizeof ty, "tensor type 65 (offset %zu) is not a known ggml type", type);
    snprintf(vt, sizeof vt, "metadata key 0 'general.architecture': value type at offset %zu is 247, not a GGUF value type (0..12)",
             arch + 20);
    struct {
        size_t off;
        uint8_t x;
        const char *want;
    } cases[] = {
        {15, 0x80, "header claims 9223372036854775811 tensors, but the"},   /* tensor count's top bit */
        {23, 0x80, "header claims 9223372036854775817 metadata keys, but"}, /* key count's top bit */
        {arch + 20, 0xff, vt},                                             /* the first value's type 8 -> 247 */
        {dims, 0x0c, "tensor 'token_embd.weight' (index entry 0): n_dims is 14, must be 1..4"},
        {ne0 + 7, 0x40, "shape [4611686018427387936, 40, 1, 1] has more than 2^63 elements"},
        {ne0, 0x80, past}, /* ne[0] 32 -> 160 */
        {type, 0x40, ty},  /* f16 -> 65 */
        {offs, 0x63, "tensor 'token_embd.weight' data offset 99 is not a multiple of the alignment 32"},
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(cases); i++) {
        const uint8_t keep = file[cases[i].off];
        file[cases[i].off] ^= cases[i].x;
        err.msg[0] = 0;
        g = NULL;
        const int rc = open_copy(file, len, &g, &copy, &err);
        CHECK(rc == MF_E_FORMAT && g == NULL && strstr(err.msg, cases[i].want),
              "byte %zu ^ 0x%02x: rc %d, message '%s', want '%s'", cases[i].off, cases[i].x, rc, err.msg, cases[i].want);
        if (!rc) mf_gguf_close(g);
        free(copy);
        file[cases[i].off] = keep;
    }
    free(file);
}

/* Builds small files field by field so each case corrupts exactly one thing. */
typedef struct {
    uint64_t n_t, n_kv;
    const char *key;        /* first key */
    uint32_t val_type;      /* its value type */
    uint64_t str_len;       /* string value's claimed length (0: real) */
    uint32_t align_type;    /* if nonzero, add general.alignment with this type ... */
    uint64_t align;         /* ... and value */
    const char *key2;       /* optional second key (duplicates) */
    const char *tname, *tname2;
    uint32_t n_dims, ttype;
    int64_t ne0, ne1;
    uint64_t toff;
    uint64_t arr_len;       /* for val_type ARRAY: claimed element count */
    uint32_t arr_type;
    int nest_depth;         /* for val_type ARRAY: nested levels */
} spec;

static spec base_spec(void) {
    return (spec){.n_t = 1, .n_kv = 1, .key = "general.architecture", .val_type = MF_GGUF_STRING, .tname = "w",
                  .n_dims = 2, .ttype = MF_TYPE_F32, .ne0 = 4, .ne1 = 2, .arr_type = MF_GGUF_UINT8, .arr_len = 3};
}

static void build(const spec *s, bytes *b) {
    b->n = 0;
    b_put(b, "GGUF", 4);
    b_u32(b, 3);
    b_u64(b, s->n_t);
    b_u64(b, s->n_kv);
    b_str(b, s->key);
    b_u32(b, s->val_type);
    if (s->val_type == MF_GGUF_STRING) {
        b_u64(b, s->str_len ? s->str_len : 5);
        b_put(b, "qwen2", 5);
    } else if (s->val_type == MF_GGUF_ARRAY) {
        for (int d = 0; d < s->nest_depth; d++) {
            b_u32(b, MF_GGUF_ARRAY);
            b_u64(b, 1);
        }
        b_u32(b, s->arr_type);
        b_u64(b, s->arr_len);
        b_put(b, "abc", 3);
    } else {
        b_u32(b, 7);
    }
    if (s->align_type) {
        b_str(b, "general.alignment");
        b_u32(b, s->align_type);
        if (s->align_type >= MF_GGUF_UINT64)
            b_u64(b, s->align);
        else
            b_u32(b, (uint32_t)s->align);
    }
    if (s->key2) {
        b_str(b, s->key2);
        b_u32(b, MF_GGUF_UINT32);
        b_u32(b, 1);
    }
    const char *names[2] = {s->tname, s->tname2};
    for (int i = 0; i < 2 && names[i]; i++) {
        b_str(b, names[i]);
        b_u32(b, s->n_dims);
        for (uint32_t d = 0; d < s->n_dims && d < 6; d++) b_u64(b, (uint64_t)(d == 0 ? s->ne0 : d == 1 ? s->ne1 : 1));
        b_u32(b, s->ttype);
        b_u64(b, i == 0 ? s->toff : 32);
    }
    uint64_t align = s->align_type == MF_GGUF_UINT32 && s->align && !(s->align & (s->align - 1)) ? s->align : 32;
    while (b->n % align) b->b[b->n++] = 0;
    memset(b->b + b->n, 0x3c, 64);
    b->n += 64;
}

static void expect_refused(const char *what, const spec *s, int want_rc, const char *want1, const char *want2) {
    bytes b;
    build(s, &b);
    mf_error err = {0};
    mf_gguf *g = NULL;
    uint8_t *copy = NULL;
    int rc = open_copy(b.b, b.n, &g, &copy, &err);
    CHECK(rc == want_rc && g == NULL, "%s: rc %d want %d (%s)", what, rc, want_rc, err.msg);
    CHECK(strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)), "%s: message '%s' lacks '%s'%s%s", what, err.msg,
          want1, want2 ? " / " : "", want2 ? want2 : "");
    mf_gguf_close(g);
    free(copy);
}

static void test_malformed_fields(void) {
    spec s = base_spec();
    bytes b;
    build(&s, &b);
    mf_error err = {0};
    mf_gguf *g = NULL;
    uint8_t *copy = NULL;
    REQUIRE_OK(open_copy(b.b, b.n, &g, &copy, &err), "base spec must open: %s", err.msg);
    CHECK(mf_gguf_find_tensor(g, "w") && mf_gguf_find_tensor(g, "w")->nbytes == 32, "base tensor");
    mf_gguf_close(g);
    free(copy);

    s = base_spec(); s.n_kv = 1ull << 40;
    expect_refused("n_kv", &s, MF_E_FORMAT, "claims 1099511627776 metadata keys", "at most");
    s = base_spec(); s.n_kv = UINT64_MAX;
    expect_refused("n_kv max", &s, MF_E_FORMAT, "18446744073709551615 metadata keys", NULL);
    s = base_spec(); s.n_t = 1ull << 40;
    expect_refused("n_tensors", &s, MF_E_FORMAT, "claims 1099511627776 tensors", NULL);
    s = base_spec(); s.n_t = 4;
    expect_refused("n_tensors after metadata", &s, MF_E_FORMAT, "claims 4 tensors", "after the metadata hold at most");
    s = base_spec(); s.n_kv = 2;
    expect_refused("n_kv one too many", &s, MF_E_FORMAT, "tensor index entry 0 of 1", "remain in the file");
    s = base_spec(); s.str_len = 1ull << 62;
    expect_refused("string length", &s, MF_E_FORMAT, "string length at offset", "claims 4611686018427387904 bytes");
    s = base_spec(); s.val_type = 13;
    expect_refused("value type", &s, MF_E_FORMAT, "'general.architecture'", "is 13, not a GGUF value type");
    s = base_spec(); s.val_type = MF_GGUF_ARRAY; s.arr_len = 1ull << 61;
    expect_refused("array length", &s, MF_E_FORMAT, "array of 2305843009213693952 u8 elements", "past the end");
    s = base_spec(); s.val_type = MF_GGUF_ARRAY; s.arr_type = MF_GGUF_UINT64; s.arr_len = 1ull << 61;
    expect_refused("array length x size overflow", &s, MF_E_FORMAT, "2305843009213693952 u64 elements", NULL);
    s = base_spec(); s.val_type = MF_GGUF_ARRAY; s.arr_type = MF_GGUF_STRING; s.arr_len = 1ull << 40;
    expect_refused("string array length", &s, MF_E_FORMAT, "1099511627776 string elements", "cannot fit");
    s = base_spec(); s.val_type = MF_GGUF_ARRAY; s.arr_type = 99;
    expect_refused("array elem type", &s, MF_E_FORMAT, "array element type", "is 99");
    s = base_spec(); s.val_type = MF_GGUF_ARRAY; s.nest_depth = 1; s.arr_len = 1ull << 60;
    expect_refused("nested array length", &s, MF_E_FORMAT, "element 0 of 1", "1152921504606846976 u8 elements");
    s = base_spec(); s.val_type = MF_GGUF_ARRAY; s.nest_depth = 12; s.arr_len = 3;
    expect_refused("nesting depth", &s, MF_E_FORMAT, "nested deeper than 8", NULL);
    s = base_spec(); s.key = "";
    expect_refused("empty key", &s, MF_E_FORMAT, "metadata key 0 of 1 is empty", NULL);
    s = base_spec(); s.n_kv = 2; s.key2 = "general.architecture";
    expect_refused("duplicate key", &s, MF_E_FORMAT, "'general.architecture' appears twice", "entries 0 and 1");
    s = base_spec(); s.n_kv = 2; s.align_type = MF_GGUF_UINT32; s.align = 48;
    expect_refused("alignment 48", &s, MF_E_FORMAT, "general.alignment is 48", "power of two");
    s = base_spec(); s.n_kv = 2; s.align_type = MF_GGUF_UINT32; s.align = 0;
    expect_refused("alignment 0", &s, MF_E_FORMAT, "general.alignment is 0", NULL);
    s = base_spec(); s.n_kv = 2; s.align_type = MF_GGUF_UINT64; s.align = 32;
    expect_refused("alignment type", &s, MF_E_FORMAT, "general.alignment is a u64", "must be a u32");
    s = base_spec(); s.n_dims = 5;
    expect_refused("n_dims 5", &s, MF_E_FORMAT, "tensor 'w'", "n_dims is 5");
    s = base_spec(); s.n_dims = 0;
    expect_refused("n_dims 0", &s, MF_E_FORMAT, "n_dims is 0", NULL);
    s = base_spec(); s.ne1 = -2;
    expect_refused("negative ne", &s, MF_E_FORMAT, "dimension 1 is -2", NULL);
    s = base_spec(); s.ne0 = INT64_MAX; s.ne1 = 4;
    expect_refused("element overflow", &s, MF_E_FORMAT, "more than 2^63 elements", NULL);
    s = base_spec(); s.ne0 = 1ll << 40; s.ne1 = 1ll << 22;
    expect_refused("byte overflow", &s, MF_E_FORMAT, "overflows 64 bits", NULL);
    s = base_spec(); s.ttype = 4;
    expect_refused("removed type 4", &s, MF_E_FORMAT, "tensor type 4", "not a known ggml type");
    s = base_spec(); s.ttype = 1000;
    expect_refused("type 1000", &s, MF_E_FORMAT, "tensor type 1000", NULL);
    s = base_spec(); s.ttype = MF_TYPE_Q8_0; s.ne0 = 40;
    expect_refused("block multiple", &s, MF_E_FORMAT, "row length 40 is not a multiple of the q8_0 block size 32", NULL);
    s = base_spec(); s.toff = 8;
    expect_refused("misaligned offset", &s, MF_E_FORMAT, "tensor 'w' data offset 8 is not a multiple of the alignment 32", NULL);
    s = base_spec(); s.toff = 1ull << 40;
    expect_refused("offset past end", &s, MF_E_FORMAT, "tensor 'w' data [offset 1099511627776, 32 bytes] ends past the file",
                   "(192 bytes; the data section starts at byte 128)");
    /* offset + data start wraps past 2^64: the message shows the offset read, not the wrapped sum */
    s = base_spec(); s.toff = UINT64_MAX - 31;
    expect_refused("offset overflow", &s, MF_E_FORMAT,
                   "tensor 'w' data [offset 18446744073709551584, 32 bytes] ends past the file", NULL);
    s = base_spec(); s.ne1 = 1000;
    expect_refused("extent past end", &s, MF_E_FORMAT, "16000 bytes] ends past the file", NULL);
    s = base_spec(); s.n_t = 2; s.tname2 = "w";
    expect_refused("duplicate tensor", &s, MF_E_FORMAT, "tensor name 'w' appears twice", "entries 0 and 1");
    s = base_spec(); s.tname = "a-name-that-is-far-too-long-for-llama-cpp-to-keep-in-its-64-byte-field";
    expect_refused("long tensor name", &s, MF_E_FORMAT, "GGUF tensor names are at most 63", NULL);
}

int main(int argc, char **argv) {
    if (argc == 3 && (strcmp(argv[1], "--write-sample") == 0 || strcmp(argv[1], "--write-all-types") == 0)) {
        mf_error err = {0};
        if (argv[1][8] == 'a' ? write_all_types(argv[2], &err) : write_sample(argv[2], 0, &err)) {
            fprintf(stderr, "Error: %s\n", err.msg);
            return 1;
        }
        return 0;
    }
    RUN(test_roundtrip_metadata);
    RUN(test_getter_refusals);
    RUN(test_roundtrip_tensors);
    RUN(test_custom_alignment);
    RUN(test_writer_misuse);
    RUN(test_many_names);
    RUN(test_format);
    RUN(test_open_errors);
    RUN(test_versions);
    RUN(test_truncation);
    RUN(test_byte_flips);
    RUN(test_byte_flips_name_the_field);
    RUN(test_malformed_fields);
    return mf_test_done();
}
