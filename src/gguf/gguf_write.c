/* gguf writer: collects metadata and tensor declarations, then streams a GGUF v3 file laid out the
 * way llama.cpp's own writer does (tensor offsets consecutive, each tensor padded to the alignment),
 * because llama.cpp's reader insists on exactly that layout. */
#include "gguf/gguf_impl.h"
#include "quant/quant.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char *key;
    uint32_t type;
    uint8_t *val; /* the value exactly as encoded in the file (after the type field) */
    size_t val_len;
} wkv;

typedef struct {
    char *name;
    uint32_t type, n_dims;
    int64_t ne[MF_GGUF_MAX_DIMS];
    uint64_t nbytes, offset;
} wtensor;

struct mf_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    uint64_t alignment;
    /* streaming state */
    FILE *f;
    char *path, *tmp_path; /* written under tmp_path, renamed to path by end */
    uint64_t pos;    /* bytes written so far */
    size_t next;     /* next tensor to write */
    bool begun;
    int sticky;      /* first setter failure, reported again by begin */
    char sticky_msg[256];
};

mf_gguf_writer *mf_gguf_writer_new(void) {
    mf_gguf_writer *w = calloc(1, sizeof *w);
    if (w) w->alignment = MF_GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void mf_gguf_writer_free(mf_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val);
    }
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    if (w->f) { /* abandoned mid-write: leave no partial file behind */
        fclose(w->f);
        unlink(w->tmp_path);
    }
    free(w->kv);
    free(w->t);
    free(w->path);
    free(w->tmp_path);
    free(w);
}

static int setter_fail(mf_gguf_writer *w, int code, const char *key, const char *why) {
    if (!w->sticky) {
        w->sticky = code;
        snprintf(w->sticky_msg, sizeof w->sticky_msg, "setting metadata key '%s' failed: %s", key ? key : "(null)", why);
    }
    return code;
}

/* Stores an encoded value under key, replacing an earlier one in place (first-set order is kept).
 * Takes ownership of val. */
static int put_kv(mf_gguf_writer *w, const char *key, uint32_t type, uint8_t *val, size_t len) {
    if (!w) {
        free(val);
        return MF_E_INVAL;
    }
    if (w->begun) {
        free(val);
        return setter_fail(w, MF_E_INVAL, key, "metadata is frozen once mf_gguf_writer_begin ran");
    }
    if (!key || !*key) {
        free(val);
        return setter_fail(w, MF_E_INVAL, key, "keys must be non-empty");
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].val);
            w->kv[i].type = type;
            w->kv[i].val = val;
            w->kv[i].val_len = len;
            return 0;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        wkv *nk = realloc(w->kv, cap * sizeof *nk);
        if (!nk) {
            free(val);
            return setter_fail(w, MF_E_NOMEM, key, "out of memory");
        }
        w->kv = nk;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(val);
        return setter_fail(w, MF_E_NOMEM, key, "out of memory");
    }
    w->kv[w->n_kv++] = (wkv){k, type, val, len};
    return 0;
}

/* Little-endian encoding of n scalars of type t from host-order packed data. */
static void encode_scalars(uint8_t *dst, uint32_t t, const void *src, uint64_t n) {
    size_t sz = mf_gguf_scalar_size(t);
    const uint8_t *s = src;
    for (uint64_t i = 0; i < n; i++, s += sz, dst += sz) {
        uint64_t v = 0;
        switch (sz) {
        case 1: v = *s; break;
        case 2: { uint16_t x; memcpy(&x, s, 2); v = x; } break;
        case 4: { uint32_t x; memcpy(&x, s, 4); v = x; } break;
        default: memcpy(&v, s, 8); break;
        }
        for (size_t b = 0; b < sz; b++) dst[b] = (uint8_t)(v >> (8 * b));
    }
}

int mf_gguf_writer_set_scalar(mf_gguf_writer *w, const char *key, mf_gguf_type type, const void *v) {
    size_t sz = mf_gguf_scalar_size((uint32_t)type);
    if (!w) return MF_E_INVAL;
    if (!sz || !v) return setter_fail(w, MF_E_INVAL, key, "set_scalar needs a fixed-size scalar type and a value");
    uint8_t *val = malloc(sz);
    if (!val) return setter_fail(w, MF_E_NOMEM, key, "out of memory");
    encode_scalars(val, (uint32_t)type, v, 1);
    return put_kv(w, key, (uint32_t)type, val, sz);
}

int mf_gguf_writer_set_u32(mf_gguf_writer *w, const char *key, uint32_t v) {
    return mf_gguf_writer_set_scalar(w, key, MF_GGUF_UINT32, &v);
}
int mf_gguf_writer_set_i32(mf_gguf_writer *w, const char *key, int32_t v) {
    return mf_gguf_writer_set_scalar(w, key, MF_GGUF_INT32, &v);
}
int mf_gguf_writer_set_u64(mf_gguf_writer *w, const char *key, uint64_t v) {
    return mf_gguf_writer_set_scalar(w, key, MF_GGUF_UINT64, &v);
}
int mf_gguf_writer_set_f32(mf_gguf_writer *w, const char *key, float v) {
    return mf_gguf_writer_set_scalar(w, key, MF_GGUF_FLOAT32, &v);
}
int mf_gguf_writer_set_bool(mf_gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return mf_gguf_writer_set_scalar(w, key, MF_GGUF_BOOL, &b);
}

int mf_gguf_writer_set_str(mf_gguf_writer *w, const char *key, const char *v) {
    if (!w) return MF_E_INVAL;
    if (!v) return setter_fail(w, MF_E_INVAL, key, "string value is NULL");
    size_t n = strlen(v);
    uint8_t *val = malloc(8 + n);
    if (!val) return setter_fail(w, MF_E_NOMEM, key, "out of memory");
    mf_gguf_wr64(val, n);
    memcpy(val + 8, v, n);
    return put_kv(w, key, MF_GGUF_STRING, val, 8 + n);
}

int mf_gguf_writer_set_arr(mf_gguf_writer *w, const char *key, mf_gguf_type elem_type, const void *data, uint64_t n) {
    size_t sz = mf_gguf_scalar_size((uint32_t)elem_type);
    uint64_t bytes, total;
    if (!w) return MF_E_INVAL;
    if (!sz) return setter_fail(w, MF_E_INVAL, key, "set_arr takes scalar element types (strings: set_str_arr)");
    if (n && !data) return setter_fail(w, MF_E_INVAL, key, "array data is NULL");
    if (!mf_mul_u64(n, sz, &bytes) || !mf_add_u64(bytes, 12, &total) || total > SIZE_MAX)
        return setter_fail(w, MF_E_NOMEM, key, "array too large");
    uint8_t *val = malloc((size_t)total);
    if (!val) return setter_fail(w, MF_E_NOMEM, key, "out of memory");
    mf_gguf_wr32(val, (uint32_t)elem_type);
    mf_gguf_wr64(val + 4, n);
    if (n) encode_scalars(val + 12, (uint32_t)elem_type, data, n);
    return put_kv(w, key, MF_GGUF_ARRAY, val, (size_t)total);
}

int mf_gguf_writer_set_str_arr(mf_gguf_writer *w, const char *key, const char *const *v, uint64_t n) {
    uint64_t total = 12;
    if (!w) return MF_E_INVAL;
    if (n && !v) return setter_fail(w, MF_E_INVAL, key, "string array is NULL");
    for (uint64_t i = 0; i < n; i++) {
        if (!v[i]) return setter_fail(w, MF_E_INVAL, key, "string array holds a NULL element");
        if (!mf_add_u64(total, 8 + (uint64_t)strlen(v[i]), &total) || total > SIZE_MAX)
            return setter_fail(w, MF_E_NOMEM, key, "array too large");
    }
    uint8_t *val = malloc((size_t)total);
    if (!val) return setter_fail(w, MF_E_NOMEM, key, "out of memory");
    mf_gguf_wr32(val, MF_GGUF_STRING);
    mf_gguf_wr64(val + 4, n);
    uint8_t *p = val + 12;
    for (uint64_t i = 0; i < n; i++) {
        size_t len = strlen(v[i]);
        mf_gguf_wr64(p, len);
        memcpy(p + 8, v[i], len);
        p += 8 + len;
    }
    return put_kv(w, key, MF_GGUF_ARRAY, val, (size_t)total);
}

int mf_gguf_writer_set_raw(mf_gguf_writer *w, const char *key, mf_gguf_type type, const void *value, size_t len) {
    if (!w) return MF_E_INVAL;
    if (len && !value) return setter_fail(w, MF_E_INVAL, key, "raw value is NULL");
    uint8_t *val = malloc(len ? len : 1);
    if (!val) return setter_fail(w, MF_E_NOMEM, key, "out of memory");
    if (len) memcpy(val, value, len);
    return put_kv(w, key, (uint32_t)type, val, len);
}

/* Bytes of a tensor: row size times the number of rows, refusing overflow. */
static int tensor_nbytes(const char *name, uint32_t type, const int64_t ne[MF_GGUF_MAX_DIMS], uint64_t *out,
                         mf_error *err) {
    const mf_type_info *ti = mf_type_get_file(type);
    if (!ti) return mf_err(err, MF_E_INVAL, "tensor '%s': unknown ggml type id %u", name, type);
    if (ne[0] % ti->blck_size != 0)
        return mf_err(err, MF_E_INVAL, "tensor '%s': row length %lld is not a multiple of the %s block size %lld",
                      name, (long long)ne[0], ti->name, (long long)ti->blck_size);
    uint64_t bytes = ne[0] ? (uint64_t)mf_row_size(type, ne[0]) : 0;
    for (int d = 1; d < MF_GGUF_MAX_DIMS; d++) {
        if (!mf_mul_u64(bytes, (uint64_t)ne[d], &bytes))
            return mf_err(err, MF_E_INVAL, "tensor '%s': size in bytes overflows 64 bits", name);
    }
    *out = bytes;
    return 0;
}

int mf_gguf_writer_add_tensor(mf_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                              mf_error *err) {
    if (!w || !name || !ne) return mf_err(err, MF_E_INVAL, "add_tensor: writer, name and shape are required");
    if (w->begun) return mf_err(err, MF_E_INVAL, "add_tensor '%s': tensors are frozen once begin ran", name);
    size_t nl = strlen(name);
    if (nl == 0 || nl >= MF_GGUF_MAX_NAME)
        return mf_err(err, MF_E_INVAL, "tensor name '%s' is %zu bytes; llama.cpp needs 1..%d", name, nl,
                      MF_GGUF_MAX_NAME - 1);
    if (n_dims < 1 || n_dims > MF_GGUF_MAX_DIMS)
        return mf_err(err, MF_E_INVAL, "tensor '%s': n_dims %u outside 1..%d", name, n_dims, MF_GGUF_MAX_DIMS);
    wtensor t = {.type = type, .n_dims = n_dims};
    for (int d = 0; d < MF_GGUF_MAX_DIMS; d++) {
        t.ne[d] = (uint32_t)d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 0)
            return mf_err(err, MF_E_INVAL, "tensor '%s': dimension %d is %lld (negative)", name, d, (long long)t.ne[d]);
    }
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) return mf_err(err, MF_E_INVAL, "tensor '%s' declared twice", name);
    int rc = tensor_nbytes(name, type, t.ne, &t.nbytes, err);
    if (rc) return rc;
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 16;
        wtensor *nt = realloc(w->t, cap * sizeof *nt);
        if (!nt) return mf_err(err, MF_E_NOMEM, "add_tensor '%s': out of memory", name);
        w->t = nt;
        w->cap_t = cap;
    }
    if (!(t.name = strdup(name))) return mf_err(err, MF_E_NOMEM, "add_tensor '%s': out of memory", name);
    w->t[w->n_t++] = t;
    return 0;
}

static int put(mf_gguf_writer *w, const void *p, size_t n, mf_error *err) {
    if (n && fwrite(p, 1, n, w->f) != n)
        return mf_err(err, MF_E_IO, "writing '%s' at byte %llu failed: %s", w->path, (unsigned long long)w->pos,
                      strerror(errno));
    w->pos += n;
    return 0;
}

static int put32(mf_gguf_writer *w, uint32_t v, mf_error *err) {
    uint8_t b[4];
    mf_gguf_wr32(b, v);
    return put(w, b, 4, err);
}

static int put64(mf_gguf_writer *w, uint64_t v, mf_error *err) {
    uint8_t b[8];
    mf_gguf_wr64(b, v);
    return put(w, b, 8, err);
}

static int put_string(mf_gguf_writer *w, const char *s, mf_error *err) {
    size_t n = strlen(s);
    int rc = put64(w, n, err);
    return rc ? rc : put(w, s, n, err);
}

static int pad(mf_gguf_writer *w, mf_error *err) {
    static const uint8_t zeros[256];
    while (w->pos % w->alignment) {
        size_t n = (size_t)(w->alignment - w->pos % w->alignment);
        int rc = put(w, zeros, n < sizeof zeros ? n : sizeof zeros, err);
        if (rc) return rc;
    }
    return 0;
}

/* A caller-set general.alignment is honoured, so it must be a u32 power of two (what readers demand). */
static int resolve_alignment(mf_gguf_writer *w, mf_error *err) {
    w->alignment = MF_GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment") != 0) continue;
        if (w->kv[i].type != MF_GGUF_UINT32 || w->kv[i].val_len != 4)
            return mf_err(err, MF_E_INVAL, "general.alignment must be a u32, it was set as %s",
                          mf_gguf_type_name((mf_gguf_type)w->kv[i].type));
        uint32_t a = mf_gguf_rd32(w->kv[i].val);
        if (a == 0 || (a & (a - 1)))
            return mf_err(err, MF_E_INVAL, "general.alignment %u is not a nonzero power of two", a);
        w->alignment = a;
    }
    return 0;
}

static int assign_offsets(mf_gguf_writer *w, mf_error *err) {
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        uint64_t padded;
        w->t[i].offset = off;
        if (!mf_add_u64(w->t[i].nbytes, w->alignment - 1, &padded) ||
            !mf_add_u64(off, padded / w->alignment * w->alignment, &off))
            return mf_err(err, MF_E_INVAL, "tensor '%s': data section size overflows 64 bits", w->t[i].name);
    }
    return 0;
}

static int write_header(mf_gguf_writer *w, mf_error *err) {
    int rc = put(w, "GGUF", 4, err);
    if (!rc) rc = put32(w, 3, err);
    if (!rc) rc = put64(w, (uint64_t)w->n_t, err);
    if (!rc) rc = put64(w, (uint64_t)w->n_kv, err);
    for (size_t i = 0; !rc && i < w->n_kv; i++) {
        rc = put_string(w, w->kv[i].key, err);
        if (!rc) rc = put32(w, w->kv[i].type, err);
        if (!rc) rc = put(w, w->kv[i].val, w->kv[i].val_len, err);
    }
    for (size_t i = 0; !rc && i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        rc = put_string(w, t->name, err);
        if (!rc) rc = put32(w, t->n_dims, err);
        for (uint32_t d = 0; !rc && d < t->n_dims; d++) rc = put64(w, (uint64_t)t->ne[d], err);
        if (!rc) rc = put32(w, t->type, err);
        if (!rc) rc = put64(w, t->offset, err);
    }
    return rc ? rc : pad(w, err);
}

int mf_gguf_writer_begin(mf_gguf_writer *w, const char *path, mf_error *err) {
    if (!w || !path) return mf_err(err, MF_E_INVAL, "writer_begin: writer and path are required");
    if (w->begun) return mf_err(err, MF_E_INVAL, "writer_begin called twice (file '%s')", w->path);
    if (w->sticky) return mf_err(err, w->sticky, "%s", w->sticky_msg);
    int rc = resolve_alignment(w, err);
    if (!rc) rc = assign_offsets(w, err);
    if (rc) return rc;
    /* Readers (another process loading the model) must never see a half-written file, so the data goes
     * to a temporary name next to the target and end renames it into place. */
    size_t n = strlen(path) + 32;
    free(w->path); /* a failed earlier begin may have left these */
    free(w->tmp_path);
    w->path = strdup(path);
    w->tmp_path = malloc(n);
    if (!w->path || !w->tmp_path) return mf_err(err, MF_E_NOMEM, "writer_begin: out of memory");
    snprintf(w->tmp_path, n, "%s.partial.%ld", path, (long)getpid());
    w->f = fopen(w->tmp_path, "wb");
    if (!w->f) return mf_err(err, MF_E_IO, "cannot create '%s': %s", w->tmp_path, strerror(errno));
    w->begun = true;
    w->pos = 0;
    w->next = 0;
    return write_header(w, err);
}

int mf_gguf_writer_write_tensor(mf_gguf_writer *w, const void *data, uint64_t nbytes, mf_error *err) {
    if (!w || !w->f) return mf_err(err, MF_E_INVAL, "write_tensor: writer_begin has not run (or end already did)");
    if (w->next >= w->n_t)
        return mf_err(err, MF_E_INVAL, "write_tensor: all %zu declared tensors are already written", w->n_t);
    const wtensor *t = &w->t[w->next];
    if (nbytes != t->nbytes)
        return mf_err(err, MF_E_INVAL, "write_tensor '%s': got %llu bytes, the declared shape needs %llu", t->name,
                      (unsigned long long)nbytes, (unsigned long long)t->nbytes);
    if (nbytes && !data) return mf_err(err, MF_E_INVAL, "write_tensor '%s': data is NULL", t->name);
    int rc = put(w, data, (size_t)nbytes, err);
    if (!rc) rc = pad(w, err);
    if (!rc) w->next++;
    return rc;
}

int mf_gguf_writer_end(mf_gguf_writer *w, mf_error *err) {
    if (!w || !w->f) return mf_err(err, MF_E_INVAL, "writer_end: writer_begin has not run (or end already did)");
    int rc = 0;
    if (w->next != w->n_t)
        rc = mf_err(err, MF_E_INVAL, "writer_end: '%s' has %zu of %zu declared tensors written (next: '%s')", w->path,
                    w->next, w->n_t, w->t[w->next].name);
    if (fclose(w->f) != 0 && !rc) rc = mf_err(err, MF_E_IO, "closing '%s' failed: %s", w->tmp_path, strerror(errno));
    w->f = NULL;
    if (!rc && rename(w->tmp_path, w->path) != 0)
        rc = mf_err(err, MF_E_IO, "renaming '%s' to '%s' failed: %s", w->tmp_path, w->path, strerror(errno));
    if (rc) unlink(w->tmp_path);
    return rc;
}
