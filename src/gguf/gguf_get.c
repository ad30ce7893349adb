/* gguf typed getters: look a key up, check its type, convert integers only when the value fits. */
#include "gguf/gguf_read_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void type_desc(const mf_gguf_rkv *kv, char *buf, size_t cap) {
    if (kv->type == MF_GGUF_ARRAY)
        snprintf(buf, cap, "array of %s", mf_gguf_type_name((mf_gguf_type)kv->arr_type));
    else
        snprintf(buf, cap, "%s", mf_gguf_type_name((mf_gguf_type)kv->type));
}

static int find(const mf_gguf *g, const char *key, const mf_gguf_rkv **kv, mf_error *err) {
    int64_t i = mf_gguf_find_key(g, key);
    if (i < 0) return mf_err(err, MF_E_NOTFOUND, "key '%s' not found", key ? key : "(null)");
    *kv = mf_gguf_rkv_at(g, i);
    return 0;
}

static int wrong_type(const char *key, const mf_gguf_rkv *kv, const char *want, mf_error *err) {
    char found[48];
    type_desc(kv, found, sizeof found);
    return mf_err(err, MF_E_TYPE, "key '%s' is a %s, wanted %s", key, found, want);
}

static bool is_int_type(uint32_t t) {
    return t == MF_GGUF_UINT8 || t == MF_GGUF_INT8 || t == MF_GGUF_UINT16 || t == MF_GGUF_INT16 ||
           t == MF_GGUF_UINT32 || t == MF_GGUF_INT32 || t == MF_GGUF_UINT64 || t == MF_GGUF_INT64;
}

/* Fits [-neg_max, pos_max]? */
static bool int_fits(mf_int v, uint64_t neg_max, uint64_t pos_max) { return v.neg ? v.mag <= neg_max : v.mag <= pos_max; }
static int64_t int_as_i64(mf_int v) { return v.neg ? -(int64_t)(v.mag - 1) - 1 : (int64_t)v.mag; }

static void int_str(mf_int v, char *buf, size_t cap) { snprintf(buf, cap, "%s%llu", v.neg ? "-" : "", (unsigned long long)v.mag); }

static int get_int(const mf_gguf *g, const char *key, uint64_t neg_max, uint64_t pos_max, const char *want, mf_int *out,
                   mf_error *err) {
    const mf_gguf_rkv *kv = NULL;
    int rc = find(g, key, &kv, err);
    if (rc) return rc;
    if (!is_int_type(kv->type)) return wrong_type(key, kv, want, err);
    mf_int v = mf_gguf_read_int(kv->type, kv->val);
    if (!int_fits(v, neg_max, pos_max)) {
        char s[32];
        int_str(v, s, sizeof s);
        return mf_err(err, MF_E_RANGE, "key '%s' is %s (%s), which does not fit a %s", key, s,
                      mf_gguf_type_name((mf_gguf_type)kv->type), want);
    }
    *out = v;
    return 0;
}

int mf_gguf_get_u32(const mf_gguf *g, const char *key, uint32_t *out, mf_error *err) {
    mf_int v = {false, 0};
    int rc = get_int(g, key, 0, UINT32_MAX, "u32", &v, err);
    if (!rc) *out = (uint32_t)v.mag;
    return rc;
}

int mf_gguf_get_u64(const mf_gguf *g, const char *key, uint64_t *out, mf_error *err) {
    mf_int v = {false, 0};
    int rc = get_int(g, key, 0, UINT64_MAX, "u64", &v, err);
    if (!rc) *out = v.mag;
    return rc;
}

int mf_gguf_get_i64(const mf_gguf *g, const char *key, int64_t *out, mf_error *err) {
    mf_int v = {false, 0};
    int rc = get_int(g, key, (uint64_t)INT64_MAX + 1, INT64_MAX, "i64", &v, err);
    if (!rc) *out = int_as_i64(v);
    return rc;
}

int mf_gguf_get_f32(const mf_gguf *g, const char *key, float *out, mf_error *err) {
    const mf_gguf_rkv *kv = NULL;
    int rc = find(g, key, &kv, err);
    if (rc) return rc;
    if (kv->type != MF_GGUF_FLOAT32 && kv->type != MF_GGUF_FLOAT64) return wrong_type(key, kv, "f32 or f64", err);
    *out = (float)mf_gguf_read_float(kv->type, kv->val);
    return 0;
}

int mf_gguf_get_bool(const mf_gguf *g, const char *key, bool *out, mf_error *err) {
    const mf_gguf_rkv *kv = NULL;
    int rc = find(g, key, &kv, err);
    if (rc) return rc;
    if (kv->type != MF_GGUF_BOOL) return wrong_type(key, kv, "bool", err);
    *out = kv->val[0] != 0;
    return 0;
}

int mf_gguf_get_str(const mf_gguf *g, const char *key, mf_str *out, mf_error *err) {
    const mf_gguf_rkv *kv = NULL;
    int rc = find(g, key, &kv, err);
    if (rc) return rc;
    if (kv->type != MF_GGUF_STRING) return wrong_type(key, kv, "string", err);
    *out = (mf_str){(const char *)kv->val, kv->val_len};
    return 0;
}

/* The array under key with an element type accepted by ok(); the count came from a validated file. */
static int find_array(const mf_gguf *g, const char *key, bool (*ok)(uint32_t), const char *want, const mf_gguf_rkv **kv,
                      size_t elem_size, void **out, mf_error *err) {
    int rc = find(g, key, kv, err);
    if (rc) return rc;
    if ((*kv)->type != MF_GGUF_ARRAY || !ok((*kv)->arr_type)) return wrong_type(key, *kv, want, err);
    uint64_t n = (*kv)->arr_len, bytes;
    if (!mf_mul_u64(n ? n : 1, elem_size, &bytes) || bytes > SIZE_MAX || !(*out = malloc((size_t)bytes)))
        return mf_err(err, MF_E_NOMEM, "key '%s': %llu elements: out of memory", key, (unsigned long long)n);
    return 0;
}

static bool is_string(uint32_t t) { return t == MF_GGUF_STRING; }
static bool is_number(uint32_t t) { return is_int_type(t) || t == MF_GGUF_FLOAT32 || t == MF_GGUF_FLOAT64; }

int mf_gguf_get_str_array(const mf_gguf *g, const char *key, mf_str **out, uint64_t *n, mf_error *err) {
    const mf_gguf_rkv *kv = NULL;
    void *mem = NULL;
    int rc = find_array(g, key, is_string, "array of string", &kv, sizeof(mf_str), &mem, err);
    if (rc) return rc;
    mf_str *v = mem;
    const uint8_t *p = kv->val;
    for (uint64_t i = 0; i < kv->arr_len; i++) { /* lengths were validated when the file was opened */
        uint64_t len = mf_gguf_rd64(p);
        v[i] = (mf_str){(const char *)p + 8, len};
        p += 8 + len;
    }
    *out = v;
    *n = kv->arr_len;
    return 0;
}

int mf_gguf_get_i32_array(const mf_gguf *g, const char *key, int32_t **out, uint64_t *n, mf_error *err) {
    const mf_gguf_rkv *kv = NULL;
    void *mem = NULL;
    int rc = find_array(g, key, is_int_type, "array of integers", &kv, sizeof(int32_t), &mem, err);
    if (rc) return rc;
    int32_t *v = mem;
    size_t sz = mf_gguf_scalar_size(kv->arr_type);
    for (uint64_t i = 0; i < kv->arr_len; i++) {
        mf_int x = mf_gguf_read_int(kv->arr_type, kv->val + i * sz);
        if (!int_fits(x, (uint64_t)INT32_MAX + 1, INT32_MAX)) {
            char s[32];
            int_str(x, s, sizeof s);
            free(v);
            return mf_err(err, MF_E_RANGE, "key '%s' element %llu is %s, which does not fit an i32", key,
                          (unsigned long long)i, s);
        }
        v[i] = (int32_t)int_as_i64(x);
    }
    *out = v;
    *n = kv->arr_len;
    return 0;
}

int mf_gguf_get_f32_array(const mf_gguf *g, const char *key, float **out, uint64_t *n, mf_error *err) {
    const mf_gguf_rkv *kv = NULL;
    void *mem = NULL;
    int rc = find_array(g, key, is_number, "array of numbers", &kv, sizeof(float), &mem, err);
    if (rc) return rc;
    float *v = mem;
    size_t sz = mf_gguf_scalar_size(kv->arr_type);
    for (uint64_t i = 0; i < kv->arr_len; i++) {
        const uint8_t *p = kv->val + i * sz;
        v[i] = is_int_type(kv->arr_type) ? mf_gguf_int_as_double(mf_gguf_read_int(kv->arr_type, p))
                                         : (float)mf_gguf_read_float(kv->arr_type, p);
    }
    *out = v;
    *n = kv->arr_len;
    return 0;
}
