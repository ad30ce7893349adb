/* gguf reader: parses and validates a whole GGUF v2/v3 file up front, so nothing that uses the handle
 * ever needs to re-check an offset.  Hostile input is normal input: every count, length and extent is
 * checked against the bytes that remain before it is used, sizes use overflow-checked arithmetic, and
 * allocations grow with what was actually parsed, never with a count the file claims. */
#include "gguf/gguf_read_impl.h"
#include "quant/quant.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Smallest encodings, used to bound claimed counts by the bytes that remain. */
#define MIN_KV_BYTES 13     /* u64 key length + u32 type + a one-byte value */
#define MIN_TENSOR_BYTES 32 /* u64 name length + u32 n_dims + one i64 dim + u32 type + u64 offset */
#define MIN_NESTED_BYTES 12 /* u32 element type + u64 count */

typedef struct {
    const uint8_t *p;
    uint64_t size, pos;
} cursor;

static uint64_t remaining(const cursor *c) { return c->size - c->pos; }

const char *mf_gguf_show(mf_str s, char *buf, size_t cap) {
    size_t o = 0;
    uint64_t i = 0;
    for (; i < s.len && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\')
            buf[o++] = (char)ch;
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", ch);
    }
    if (i < s.len && o + 4 <= cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o < cap ? o : cap - 1] = 0;
    return buf;
}

static int need(const cursor *c, uint64_t n, const char *what, mf_error *err) {
    if (n <= remaining(c)) return 0;
    return mf_err(err, MF_E_FORMAT, "%s at offset %llu needs %llu bytes, but the file ends at %llu (truncated)", what,
                  (unsigned long long)c->pos, (unsigned long long)n, (unsigned long long)c->size);
}

static int rd_u32(cursor *c, uint32_t *v, const char *what, mf_error *err) {
    int rc = need(c, 4, what, err);
    if (rc) return rc;
    *v = mf_gguf_rd32(c->p + c->pos);
    c->pos += 4;
    return 0;
}

static int rd_u64(cursor *c, uint64_t *v, const char *what, mf_error *err) {
    int rc = need(c, 8, what, err);
    if (rc) return rc;
    *v = mf_gguf_rd64(c->p + c->pos);
    c->pos += 8;
    return 0;
}

static int rd_str(cursor *c, mf_str *s, const char *what, mf_error *err) {
    uint64_t len, at = c->pos;
    int rc = rd_u64(c, &len, what, err);
    if (rc) return rc;
    if (len > remaining(c))
        return mf_err(err, MF_E_FORMAT, "%s at offset %llu claims %llu bytes, but only %llu remain in the file (%llu bytes)",
                      what, (unsigned long long)at, (unsigned long long)len, (unsigned long long)remaining(c),
                      (unsigned long long)c->size);
    s->ptr = (const char *)c->p + c->pos;
    s->len = len;
    c->pos += len;
    return 0;
}

static int check_value_type(uint32_t t, const char *what, uint64_t at, mf_error *err) {
    if (t < MF_GGUF_TYPE_COUNT) return 0;
    return mf_err(err, MF_E_FORMAT, "%s at offset %llu is %u, not a GGUF value type (0..%d)", what,
                  (unsigned long long)at, t, MF_GGUF_TYPE_COUNT - 1);
}

/* Walks an array body (element type and count already read), validating every element. */
static int skip_array(cursor *c, uint32_t et, uint64_t n, int depth, mf_error *err) {
    size_t sz = mf_gguf_scalar_size(et);
    if (sz) {
        if (n > remaining(c) / sz)
            return mf_err(err, MF_E_FORMAT, "array of %llu %s elements (%zu bytes each) at offset %llu runs past the end of the file (%llu bytes)",
                          (unsigned long long)n, mf_gguf_type_name((mf_gguf_type)et), sz, (unsigned long long)c->pos,
                          (unsigned long long)c->size);
        c->pos += n * sz;
        return 0;
    }
    uint64_t min = et == MF_GGUF_STRING ? 8 : MIN_NESTED_BYTES;
    if (n > remaining(c) / min)
        return mf_err(err, MF_E_FORMAT, "array of %llu %s elements at offset %llu cannot fit in the %llu bytes left (each takes at least %llu)",
                      (unsigned long long)n, mf_gguf_type_name((mf_gguf_type)et), (unsigned long long)c->pos,
                      (unsigned long long)remaining(c), (unsigned long long)min);
    if (et == MF_GGUF_ARRAY && depth >= MF_GGUF_MAX_NESTING)
        return mf_err(err, MF_E_FORMAT, "arrays nested deeper than %d levels at offset %llu", MF_GGUF_MAX_NESTING,
                      (unsigned long long)c->pos);
    for (uint64_t i = 0; i < n; i++) {
        int rc;
        if (et == MF_GGUF_STRING) {
            mf_str s;
            rc = rd_str(c, &s, "string element length", err);
        } else {
            uint32_t inner;
            uint64_t inner_n, at = c->pos;
            rc = rd_u32(c, &inner, "nested array element type", err);
            if (!rc) rc = check_value_type(inner, "nested array element type", at, err);
            if (!rc) rc = rd_u64(c, &inner_n, "nested array length", err);
            if (!rc) rc = skip_array(c, inner, inner_n, depth + 1, err);
        }
        if (rc) return mf_err_prefix(err, rc, "element %llu of %llu", (unsigned long long)i, (unsigned long long)n);
    }
    return 0;
}

static int read_value(cursor *c, mf_gguf_rkv *kv, mf_error *err) {
    uint64_t at = c->pos;
    int rc = rd_u32(c, &kv->type, "value type", err);
    if (!rc) rc = check_value_type(kv->type, "value type", at, err);
    if (rc) return rc;
    if (kv->type == MF_GGUF_STRING) {
        mf_str s;
        if ((rc = rd_str(c, &s, "string length", err))) return rc;
        kv->val = (const uint8_t *)s.ptr;
        kv->val_len = s.len;
        return 0;
    }
    if (kv->type != MF_GGUF_ARRAY) {
        size_t sz = mf_gguf_scalar_size(kv->type);
        if ((rc = need(c, sz, mf_gguf_type_name((mf_gguf_type)kv->type), err))) return rc;
        kv->val = c->p + c->pos;
        kv->val_len = sz;
        c->pos += sz;
        return 0;
    }
    at = c->pos;
    rc = rd_u32(c, &kv->arr_type, "array element type", err);
    if (!rc) rc = check_value_type(kv->arr_type, "array element type", at, err);
    if (!rc) rc = rd_u64(c, &kv->arr_len, "array length", err);
    if (rc) return rc;
    kv->val = c->p + c->pos;
    rc = skip_array(c, kv->arr_type, kv->arr_len, 1, err);
    kv->val_len = (uint64_t)(c->p + c->pos - kv->val);
    return rc;
}

/* --- name tables: open addressing over indices, so lookups and duplicate checks stay linear --- */

typedef mf_str (*name_fn)(const void *ctx, int64_t i);

/* Returns the index stored under name, or -1 (then *slot is where it would go). */
static int64_t table_find(const mf_gguf_table *t, mf_str name, name_fn name_of, const void *ctx, uint64_t *slot) {
    uint64_t mask = t->cap - 1, h = mf_gguf_hash(name.ptr, name.len) & mask;
    for (;; h = (h + 1) & mask) {
        int64_t idx = t->slots[h] - 1;
        if (idx < 0) break;
        mf_str other = name_of(ctx, idx);
        if (other.len == name.len && (name.len == 0 || memcmp(other.ptr, name.ptr, name.len) == 0)) return idx;
    }
    if (slot) *slot = h;
    return -1;
}

/* Makes room for entry `count - 1` (entries 0 .. count-2 are in the table), keeping the load at most
 * one half.  Tables grow with what was parsed, never with a count the header claims. */
static int table_reserve(mf_gguf_table *t, uint64_t count, name_fn name_of, const void *ctx, mf_error *err) {
    if (2 * count <= t->cap) return 0;
    uint64_t cap = t->cap ? t->cap : 64;
    while (cap < 2 * count) cap *= 2;
    mf_gguf_table nt = {calloc((size_t)cap, sizeof *nt.slots), cap};
    if (!nt.slots) return mf_err(err, MF_E_NOMEM, "name table of %llu slots: out of memory", (unsigned long long)cap);
    for (uint64_t i = 0; i + 1 < count; i++) {
        uint64_t slot = 0;
        table_find(&nt, name_of(ctx, (int64_t)i), name_of, ctx, &slot);
        nt.slots[slot] = (int64_t)i + 1;
    }
    free(t->slots);
    *t = nt;
    return 0;
}

/* Room for entry i of an array that likewise grows with what was parsed. */
static int reserve(void **arr, uint64_t *cap, uint64_t i, size_t elem, mf_error *err) {
    if (i < *cap) return 0;
    uint64_t ncap = *cap ? 2 * *cap : 64; /* i is bounded by the file size, so this cannot overflow */
    void *p = realloc(*arr, (size_t)(ncap * elem));
    if (!p) return mf_err(err, MF_E_NOMEM, "table of %llu entries: out of memory", (unsigned long long)ncap);
    memset((char *)p + *cap * elem, 0, (size_t)((ncap - *cap) * elem));
    *arr = p;
    *cap = ncap;
    return 0;
}

static mf_str kv_name_of(const void *g, int64_t i) { return ((const mf_gguf *)g)->kv[i].key; }
static mf_str tensor_name_of(const void *g, int64_t i) { return ((const mf_gguf *)g)->t[i].name; }

/* --- sections --- */

static int read_header(mf_gguf *g, cursor *c, uint64_t *n_t, uint64_t *n_kv, mf_error *err) {
    int rc = need(c, 4, "magic", err);
    if (rc) return rc;
    if (memcmp(c->p, "GGUF", 4) != 0) {
        char shown[32];
        mf_str m = {(const char *)c->p, 4};
        return mf_err(err, MF_E_FORMAT, "not a GGUF file: magic bytes '%s', expected 'GGUF'", mf_gguf_show(m, shown, sizeof shown));
    }
    c->pos = 4;
    if ((rc = rd_u32(c, &g->version, "version", err))) return rc;
    if (g->version == 1)
        return mf_err(err, MF_E_UNSUPPORTED, "GGUF version 1 is not supported (versions 2 and 3 are); re-convert the model with a current llama.cpp");
    if (g->version != 2 && g->version != 3)
        return mf_err(err, MF_E_UNSUPPORTED, "GGUF version %u is not supported (versions 2 and 3 are)%s", g->version,
                      (g->version & 0xffff) == 0 ? "; the file looks big-endian, which this reader does not handle" : "");
    if ((rc = rd_u64(c, n_t, "tensor count", err)) || (rc = rd_u64(c, n_kv, "metadata key count", err))) return rc;
    if (*n_t > INT64_MAX || *n_t > remaining(c) / MIN_TENSOR_BYTES)
        return mf_err(err, MF_E_FORMAT, "header claims %llu tensors, but the %llu bytes after the header hold at most %llu (each takes at least %d)",
                      (unsigned long long)*n_t, (unsigned long long)remaining(c),
                      (unsigned long long)(remaining(c) / MIN_TENSOR_BYTES), MIN_TENSOR_BYTES);
    if (*n_kv > INT64_MAX || *n_kv > remaining(c) / MIN_KV_BYTES)
        return mf_err(err, MF_E_FORMAT, "header claims %llu metadata keys, but the %llu bytes after the header hold at most %llu (each takes at least %d)",
                      (unsigned long long)*n_kv, (unsigned long long)remaining(c),
                      (unsigned long long)(remaining(c) / MIN_KV_BYTES), MIN_KV_BYTES);
    return 0;
}

static int read_kvs(mf_gguf *g, cursor *c, uint64_t n, mf_error *err) {
    uint64_t cap = 0;
    int rc = table_reserve(&g->kv_table, 1, kv_name_of, g, err);
    for (uint64_t i = 0; !rc && i < n; i++) {
        void *arr = g->kv;
        rc = reserve(&arr, &cap, i, sizeof *g->kv, err);
        g->kv = arr;
        if (rc || (rc = table_reserve(&g->kv_table, i + 1, kv_name_of, g, err))) break;
        mf_gguf_rkv *kv = &g->kv[i];
        char shown[96];
        uint64_t slot = 0;
        if ((rc = rd_str(c, &kv->key, "key length", err)))
            return mf_err_prefix(err, rc, "metadata key %llu of %llu", (unsigned long long)i, (unsigned long long)n);
        if (kv->key.len == 0)
            return mf_err(err, MF_E_FORMAT, "metadata key %llu of %llu is empty (offset %llu)", (unsigned long long)i,
                          (unsigned long long)n, (unsigned long long)(c->pos - 8));
        int64_t dup = table_find(&g->kv_table, kv->key, kv_name_of, g, &slot);
        if (dup >= 0)
            return mf_err(err, MF_E_FORMAT, "metadata key '%s' appears twice (entries %lld and %llu)",
                          mf_gguf_show(kv->key, shown, sizeof shown), (long long)dup, (unsigned long long)i);
        if ((rc = read_value(c, kv, err)))
            return mf_err_prefix(err, rc, "metadata key %llu '%s'", (unsigned long long)i, mf_gguf_show(kv->key, shown, sizeof shown));
        g->kv_table.slots[slot] = (int64_t)i + 1;
        g->n_kv = (int64_t)i + 1;
    }
    return rc;
}

static int resolve_alignment(mf_gguf *g, mf_error *err) {
    g->alignment = MF_GGUF_DEFAULT_ALIGNMENT;
    int64_t i = mf_gguf_find_key(g, "general.alignment");
    if (i < 0) return 0;
    const mf_gguf_rkv *kv = &g->kv[i];
    if (kv->type != MF_GGUF_UINT32)
        return mf_err(err, MF_E_FORMAT, "general.alignment is a %s, it must be a u32",
                      mf_gguf_type_name((mf_gguf_type)kv->type));
    uint32_t a = mf_gguf_rd32(kv->val);
    if (a == 0 || (a & (a - 1)))
        return mf_err(err, MF_E_FORMAT, "general.alignment is %u, it must be a nonzero power of two", a);
    g->alignment = a;
    return 0;
}

/* Shape, type and byte size of one tensor; name already read. */
static int read_tensor_shape(cursor *c, mf_gguf_tensor *t, mf_error *err) {
    int rc = rd_u32(c, &t->n_dims, "n_dims", err);
    if (rc) return rc;
    if (t->n_dims < 1 || t->n_dims > MF_GGUF_MAX_DIMS)
        return mf_err(err, MF_E_FORMAT, "n_dims is %u, must be 1..%d", t->n_dims, MF_GGUF_MAX_DIMS);
    int64_t nel = 1;
    for (int d = 0; d < MF_GGUF_MAX_DIMS; d++) {
        uint64_t v = 1;
        if ((uint32_t)d < t->n_dims && (rc = rd_u64(c, &v, "dimension", err))) return rc;
        t->ne[d] = (int64_t)v;
        if (t->ne[d] < 0) return mf_err(err, MF_E_FORMAT, "dimension %d is %lld, must be >= 0", d, (long long)t->ne[d]);
        if (__builtin_mul_overflow(nel, t->ne[d], &nel))
            return mf_err(err, MF_E_FORMAT, "shape [%lld, %lld, %lld, %lld] has more than 2^63 elements",
                          (long long)t->ne[0], (long long)t->ne[1], (long long)(d >= 2 ? t->ne[2] : 1),
                          (long long)(d >= 3 ? t->ne[3] : 1));
    }
    uint64_t at = c->pos;
    if ((rc = rd_u32(c, &t->type, "tensor type", err))) return rc;
    const mf_type_info *ti = mf_type_get_file(t->type);
    if (!ti) return mf_err(err, MF_E_FORMAT, "tensor type %u (offset %llu) is not a known ggml type", t->type, (unsigned long long)at);
    if (t->ne[0] % ti->blck_size != 0)
        return mf_err(err, MF_E_FORMAT, "row length %lld is not a multiple of the %s block size %lld", (long long)t->ne[0],
                      ti->name, (long long)ti->blck_size);
    uint64_t row, bytes;
    if (!mf_mul_u64((uint64_t)(t->ne[0] / ti->blck_size), ti->type_size, &row) || row > SIZE_MAX)
        return mf_err(err, MF_E_FORMAT, "a row of %lld %s elements overflows 64 bits", (long long)t->ne[0], ti->name);
    if (t->ne[0] > 0 && mf_row_size(t->type, t->ne[0]) != row)
        return mf_err(err, MF_E_INTERNAL, "row size of %lld %s elements: quant says %zu, gguf computed %llu", (long long)t->ne[0],
                      ti->name, mf_row_size(t->type, t->ne[0]), (unsigned long long)row);
    bytes = row;
    for (int d = 1; d < MF_GGUF_MAX_DIMS; d++)
        if (!mf_mul_u64(bytes, (uint64_t)t->ne[d], &bytes))
            return mf_err(err, MF_E_FORMAT, "size in bytes of %s shape [%lld, %lld, %lld, %lld] overflows 64 bits", ti->name,
                          (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    t->nbytes = bytes;
    return rd_u64(c, &t->offset, "data offset", err);
}

static int read_tensor_index(mf_gguf *g, cursor *c, uint64_t n, mf_error *err) {
    /* n_tensors was bounded by the bytes after the header; bound it again by what the metadata left */
    if (n > remaining(c) / MIN_TENSOR_BYTES)
        return mf_err(err, MF_E_FORMAT, "header claims %llu tensors, but the %llu bytes after the metadata hold at most %llu (truncated?)",
                      (unsigned long long)n, (unsigned long long)remaining(c),
                      (unsigned long long)(remaining(c) / MIN_TENSOR_BYTES));
    uint64_t cap = 0;
    int rc = table_reserve(&g->t_table, 1, tensor_name_of, g, err);
    for (uint64_t i = 0; !rc && i < n; i++) {
        void *arr = g->t;
        rc = reserve(&arr, &cap, i, sizeof *g->t, err);
        g->t = arr;
        if (rc || (rc = table_reserve(&g->t_table, i + 1, tensor_name_of, g, err))) break;
        mf_gguf_tensor *t = &g->t[i];
        char shown[96];
        uint64_t slot = 0;
        if ((rc = rd_str(c, &t->name, "name length", err)))
            return mf_err_prefix(err, rc, "tensor index entry %llu of %llu", (unsigned long long)i, (unsigned long long)n);
        if (t->name.len >= MF_GGUF_MAX_NAME)
            return mf_err(err, MF_E_FORMAT, "tensor index entry %llu: name '%s' is %llu bytes, GGUF tensor names are at most %d",
                          (unsigned long long)i, mf_gguf_show(t->name, shown, sizeof shown), (unsigned long long)t->name.len,
                          MF_GGUF_MAX_NAME - 1);
        int64_t dup = table_find(&g->t_table, t->name, tensor_name_of, g, &slot);
        if (dup >= 0)
            return mf_err(err, MF_E_FORMAT, "tensor name '%s' appears twice (entries %lld and %llu)",
                          mf_gguf_show(t->name, shown, sizeof shown), (long long)dup, (unsigned long long)i);
        if ((rc = read_tensor_shape(c, t, err)))
            return mf_err_prefix(err, rc, "tensor '%s' (index entry %llu)", mf_gguf_show(t->name, shown, sizeof shown),
                                 (unsigned long long)i);
        g->t_table.slots[slot] = (int64_t)i + 1;
        g->n_t = (int64_t)i + 1;
    }
    return rc;
}

static int place_tensors(mf_gguf *g, uint64_t header_end, mf_error *err) {
    uint64_t start;
    if (!mf_add_u64(header_end, g->alignment - 1, &start))
        return mf_err(err, MF_E_FORMAT, "data section offset overflows 64 bits");
    start = start / g->alignment * g->alignment;
    if (start > g->size) {
        if (g->n_t > 0)
            return mf_err(err, MF_E_FORMAT, "data section would start at offset %llu (tensor index ends at %llu, alignment %llu), past the end of the file (%llu bytes)",
                          (unsigned long long)start, (unsigned long long)header_end, (unsigned long long)g->alignment,
                          (unsigned long long)g->size);
        start = g->size; /* no tensors: a file may end right after its metadata */
    }
    g->data_offset = start;
    for (int64_t i = 0; i < g->n_t; i++) {
        mf_gguf_tensor *t = &g->t[i];
        char shown[96];
        uint64_t abs, end;
        mf_gguf_show(t->name, shown, sizeof shown);
        if (t->offset % g->alignment)
            return mf_err(err, MF_E_FORMAT, "tensor '%s' data offset %llu is not a multiple of the alignment %llu", shown,
                          (unsigned long long)t->offset, (unsigned long long)g->alignment);
        /* the offset as the file gives it (relative to the data section), never the sum, which may have wrapped */
        if (!mf_add_u64(start, t->offset, &abs) || !mf_add_u64(abs, t->nbytes, &end) || end > g->size)
            return mf_err(err, MF_E_FORMAT,
                          "tensor '%s' data [offset %llu, %llu bytes] ends past the file (%llu bytes; the data section "
                          "starts at byte %llu)",
                          shown, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                          (unsigned long long)g->size, (unsigned long long)start);
        t->data = g->base + abs;
    }
    return 0;
}

static int parse(mf_gguf *g, mf_error *err) {
    cursor c = {g->base, g->size, 0};
    uint64_t n_t = 0, n_kv = 0;
    int rc = read_header(g, &c, &n_t, &n_kv, err);
    if (rc) return mf_err_prefix(err, rc, "header");
    if ((rc = read_kvs(g, &c, n_kv, err))) return rc;
    if ((rc = resolve_alignment(g, err))) return rc;
    if ((rc = read_tensor_index(g, &c, n_t, err))) return rc;
    return place_tensors(g, c.pos, err);
}

static int open_buffer(const void *data, size_t size, mf_gguf **out, mf_error *err) {
    mf_gguf *g = calloc(1, sizeof *g);
    if (!g) return mf_err(err, MF_E_NOMEM, "gguf handle: out of memory");
    g->base = data;
    g->size = size;
    int rc = parse(g, err);
    if (rc) {
        mf_gguf_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

int mf_gguf_open_memory(const void *data, size_t size, mf_gguf **out, mf_error *err) {
    if (!out) return mf_err(err, MF_E_INVAL, "mf_gguf_open_memory: out is NULL");
    *out = NULL;
    if (!data && size) return mf_err(err, MF_E_INVAL, "mf_gguf_open_memory: data is NULL but size is %zu", size);
    static const uint8_t empty[1];
    return open_buffer(data ? data : empty, size, out, err);
}

int mf_gguf_open(const char *path, mf_gguf **out, mf_error *err) {
    if (!out || !path) return mf_err(err, MF_E_INVAL, "mf_gguf_open: path and out are required");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mf_err(err, MF_E_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        close(fd);
        return mf_err(err, MF_E_IO, "'%s' is not a readable regular file%s%s", path, e ? ": " : "", e ? strerror(e) : "");
    }
    void *map = NULL;
    size_t size = (size_t)st.st_size;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return mf_err(err, MF_E_IO, "cannot map '%s' (%zu bytes): %s", path, size, strerror(e));
        }
    }
    close(fd); /* the mapping keeps the file alive */
    static const uint8_t empty[1];
    int rc = open_buffer(map ? map : empty, size, out, err);
    if (rc) {
        if (map) munmap(map, size);
        return mf_err_prefix(err, rc, "'%s'", path);
    }
    (*out)->map = map;
    (*out)->map_len = size;
    return 0;
}

void mf_gguf_close(mf_gguf *g) {
    if (!g) return;
    if (g->map) munmap(g->map, g->map_len);
    free(g->kv);
    free(g->t);
    free(g->kv_table.slots);
    free(g->t_table.slots);
    free(g);
}

/* --- plain accessors --- */

uint32_t mf_gguf_version(const mf_gguf *g) { return g->version; }
uint64_t mf_gguf_alignment(const mf_gguf *g) { return g->alignment; }
uint64_t mf_gguf_file_size(const mf_gguf *g) { return g->size; }
uint64_t mf_gguf_data_offset(const mf_gguf *g) { return g->data_offset; }
int64_t mf_gguf_n_kv(const mf_gguf *g) { return g->n_kv; }
int64_t mf_gguf_n_tensors(const mf_gguf *g) { return g->n_t; }

int64_t mf_gguf_find_key(const mf_gguf *g, const char *key) {
    if (!g || !key || !g->kv_table.cap) return -1;
    mf_str k = {key, strlen(key)};
    return table_find(&g->kv_table, k, kv_name_of, g, NULL);
}

const mf_gguf_tensor *mf_gguf_find_tensor(const mf_gguf *g, const char *name) {
    if (!g || !name || !g->t_table.cap) return NULL;
    mf_str k = {name, strlen(name)};
    int64_t i = table_find(&g->t_table, k, tensor_name_of, g, NULL);
    return i < 0 ? NULL : &g->t[i];
}

const mf_gguf_tensor *mf_gguf_tensor_at(const mf_gguf *g, int64_t i) {
    return g && i >= 0 && i < g->n_t ? &g->t[i] : NULL;
}

static const mf_gguf_rkv *kv_at(const mf_gguf *g, int64_t i) { return g && i >= 0 && i < g->n_kv ? &g->kv[i] : NULL; }

mf_str mf_gguf_kv_key(const mf_gguf *g, int64_t i) {
    const mf_gguf_rkv *kv = kv_at(g, i);
    return kv ? kv->key : (mf_str){"", 0};
}

mf_gguf_type mf_gguf_kv_type(const mf_gguf *g, int64_t i) {
    const mf_gguf_rkv *kv = kv_at(g, i);
    return kv ? (mf_gguf_type)kv->type : MF_GGUF_TYPE_COUNT;
}

mf_gguf_type mf_gguf_kv_arr_type(const mf_gguf *g, int64_t i) {
    const mf_gguf_rkv *kv = kv_at(g, i);
    return kv && kv->type == MF_GGUF_ARRAY ? (mf_gguf_type)kv->arr_type : MF_GGUF_TYPE_COUNT;
}

uint64_t mf_gguf_kv_arr_len(const mf_gguf *g, int64_t i) {
    const mf_gguf_rkv *kv = kv_at(g, i);
    return kv && kv->type == MF_GGUF_ARRAY ? kv->arr_len : 0;
}

const void *mf_gguf_kv_data(const mf_gguf *g, int64_t i, uint64_t *nbytes) {
    const mf_gguf_rkv *kv = kv_at(g, i);
    if (nbytes) *nbytes = kv ? kv->val_len : 0;
    return kv ? kv->val : NULL;
}

const mf_gguf_rkv *mf_gguf_rkv_at(const mf_gguf *g, int64_t i) { return kv_at(g, i); }
