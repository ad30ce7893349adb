/* gguf value rendering for people (minfer info): shortest round-trip numbers, escaped strings, arrays
 * summarised to a few elements.  Runs only on a validated handle, so walking the bytes is safe. */
#include "gguf/gguf_read_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *buf;
    size_t cap, len; /* len counts everything, also what did not fit */
    size_t max_elems, max_str;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->len + 1 < b->cap) {
        size_t room = b->cap - 1 - b->len;
        memcpy(b->buf + b->len, s, n < room ? n : room);
    }
    b->len += n;
}

static void putf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(sbuf *b, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* The fewest significant digits that read back to the same value. */
static void put_float(sbuf *b, double v, bool single) {
    char tmp[40];
    int max = single ? 9 : 17;
    for (int prec = 1; prec <= max; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (single ? strtof(tmp, NULL) == (float)v : strtod(tmp, NULL) == v) break;
    }
    /* whole numbers read better spelled out (1000000, not 1e+06) */
    if (strchr(tmp, 'e') && v > -1e15 && v < 1e15 && v == (double)(long long)v) snprintf(tmp, sizeof tmp, "%.0f", v);
    put(b, tmp, strlen(tmp));
}

static void put_string(sbuf *b, const uint8_t *s, uint64_t len) {
    uint64_t shown = b->max_str && len > b->max_str ? b->max_str : len;
    put(b, "\"", 1);
    for (uint64_t i = 0; i < shown; i++) {
        uint8_t c = s[i];
        switch (c) {
        case '"': put(b, "\\\"", 2); break;
        case '\\': put(b, "\\\\", 2); break;
        case '\n': put(b, "\\n", 2); break;
        case '\r': put(b, "\\r", 2); break;
        case '\t': put(b, "\\t", 2); break;
        default:
            if (c < 0x20 || c == 0x7f)
                putf(b, "\\x%02x", c);
            else
                put(b, (const char *)&c, 1);
        }
    }
    put(b, "\"", 1);
    if (shown < len) putf(b, "... (%llu bytes)", (unsigned long long)len);
}

/* Bytes taken by one element of type t at p (strings and nested arrays walked). */
static uint64_t elem_size(uint32_t t, const uint8_t *p) {
    size_t sz = mf_gguf_scalar_size(t);
    if (sz) return sz;
    if (t == MF_GGUF_STRING) return 8 + mf_gguf_rd64(p);
    uint32_t et = mf_gguf_rd32(p);
    uint64_t n = mf_gguf_rd64(p + 4), off = 12;
    for (uint64_t i = 0; i < n; i++) off += elem_size(et, p + off);
    return off;
}

static void put_array(sbuf *b, uint32_t et, uint64_t n, const uint8_t *p);

static void put_scalar(sbuf *b, uint32_t t, const uint8_t *p) {
    switch (t) {
    case MF_GGUF_BOOL: put(b, p[0] ? "true" : "false", p[0] ? 4 : 5); break;
    case MF_GGUF_FLOAT32: put_float(b, mf_gguf_read_float(t, p), true); break;
    case MF_GGUF_FLOAT64: put_float(b, mf_gguf_read_float(t, p), false); break;
    case MF_GGUF_STRING: put_string(b, p + 8, mf_gguf_rd64(p)); break;
    case MF_GGUF_ARRAY:
        put(b, "[", 1);
        put_array(b, mf_gguf_rd32(p), mf_gguf_rd64(p + 4), p + 12);
        put(b, "]", 1);
        break;
    default: {
        mf_int v = mf_gguf_read_int(t, p);
        putf(b, "%s%llu", v.neg ? "-" : "", (unsigned long long)v.mag);
    }
    }
}

static void put_array(sbuf *b, uint32_t et, uint64_t n, const uint8_t *p) {
    putf(b, "[%s x %llu]", mf_gguf_type_name((mf_gguf_type)et), (unsigned long long)n);
    uint64_t shown = b->max_elems && n > b->max_elems ? b->max_elems : n;
    for (uint64_t i = 0; i < shown; i++) {
        put(b, i ? ", " : " ", i ? 2 : 1);
        put_scalar(b, et, p);
        p += elem_size(et, p);
    }
    if (shown < n) put(b, ", ...", 5);
}

size_t mf_gguf_kv_format(const mf_gguf *g, int64_t i, size_t max_elems, size_t max_str, char *buf, size_t cap) {
    sbuf b = {buf, cap, 0, max_elems, max_str};
    const mf_gguf_rkv *kv = mf_gguf_rkv_at(g, i);
    if (kv && kv->type == MF_GGUF_ARRAY)
        put_array(&b, kv->arr_type, kv->arr_len, kv->val);
    else if (kv && kv->type == MF_GGUF_STRING)
        put_string(&b, kv->val, kv->val_len);
    else if (kv)
        put_scalar(&b, kv->type, kv->val);
    if (cap) buf[b.len < cap ? b.len : cap - 1] = 0;
    return b.len;
}
