/* The reader's handle layout, shared by the files that implement the reader API (read, get, format). */
#ifndef MF_GGUF_READ_IMPL_H
#define MF_GGUF_READ_IMPL_H

#include "gguf/gguf_impl.h"

#include <string.h>

typedef struct {
    mf_str key;
    uint32_t type;      /* mf_gguf_type */
    uint32_t arr_type;  /* arrays only */
    uint64_t arr_len;   /* arrays only */
    const uint8_t *val; /* scalar bytes, string bytes, or an array's elements */
    uint64_t val_len;
} mf_gguf_rkv;

/* Open addressing: slots hold index + 1, 0 is empty; cap is a power of two, at least twice the entries. */
typedef struct {
    int64_t *slots;
    uint64_t cap;
} mf_gguf_table;

struct mf_gguf {
    const uint8_t *base;
    uint64_t size;
    void *map; /* non-NULL when mf_gguf_open mapped the file */
    size_t map_len;
    uint32_t version;
    uint64_t alignment, data_offset;
    mf_gguf_rkv *kv;
    int64_t n_kv;
    mf_gguf_tensor *t;
    int64_t n_t;
    mf_gguf_table kv_table, t_table;
};

/* An integer as sign and magnitude, so every source type compares against every target range. */
typedef struct {
    bool neg;
    uint64_t mag;
} mf_int;

static inline mf_int mf_gguf_read_int(uint32_t t, const uint8_t *p) {
    int64_t s;
    switch (t) {
    case MF_GGUF_UINT8: return (mf_int){false, p[0]};
    case MF_GGUF_UINT16: return (mf_int){false, mf_gguf_rd16(p)};
    case MF_GGUF_UINT32: return (mf_int){false, mf_gguf_rd32(p)};
    case MF_GGUF_UINT64: return (mf_int){false, mf_gguf_rd64(p)};
    case MF_GGUF_INT8: s = (int8_t)p[0]; break;
    case MF_GGUF_INT16: s = (int16_t)mf_gguf_rd16(p); break;
    case MF_GGUF_INT32: s = (int32_t)mf_gguf_rd32(p); break;
    default: s = (int64_t)mf_gguf_rd64(p); break;
    }
    return s < 0 ? (mf_int){true, (uint64_t)(-(s + 1)) + 1} : (mf_int){false, (uint64_t)s};
}

static inline double mf_gguf_int_as_double(mf_int v) { return v.neg ? -(double)v.mag : (double)v.mag; }

/* f32 or f64 at p, widened. */
static inline double mf_gguf_read_float(uint32_t t, const uint8_t *p) {
    if (t == MF_GGUF_FLOAT32) {
        uint32_t b = mf_gguf_rd32(p);
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    uint64_t b = mf_gguf_rd64(p);
    double d;
    memcpy(&d, &b, 8);
    return d;
}

const mf_gguf_rkv *mf_gguf_rkv_at(const mf_gguf *g, int64_t i);
/* Printable, bounded rendering of untrusted bytes for error messages (non-printables as \xNN). */
const char *mf_gguf_show(mf_str s, char *buf, size_t cap);

#endif
