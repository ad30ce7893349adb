/* gguf: GGUF v2/v3 reader (mmap, every count/offset/extent validated against the file size with
 * overflow-safe arithmetic before use) and a writer that llama.cpp can load.
 *
 * Strings are mf_str views into the mapping: NOT NUL-terminated; use len.  Numeric array data may be
 * unaligned in the file: copy it with memcpy (or the typed array getters below). */
#ifndef MF_GGUF_H
#define MF_GGUF_H

#include "core/core.h"

typedef enum {
    MF_GGUF_UINT8 = 0,
    MF_GGUF_INT8 = 1,
    MF_GGUF_UINT16 = 2,
    MF_GGUF_INT16 = 3,
    MF_GGUF_UINT32 = 4,
    MF_GGUF_INT32 = 5,
    MF_GGUF_FLOAT32 = 6,
    MF_GGUF_BOOL = 7,
    MF_GGUF_STRING = 8,
    MF_GGUF_ARRAY = 9,
    MF_GGUF_UINT64 = 10,
    MF_GGUF_INT64 = 11,
    MF_GGUF_FLOAT64 = 12,
    MF_GGUF_TYPE_COUNT
} mf_gguf_type;

const char *mf_gguf_type_name(mf_gguf_type t); /* "u32", "string", "array", ... */

typedef struct {
    const char *ptr;
    uint64_t len;
} mf_str;

/* compare an mf_str with a C string */
bool mf_str_eq(mf_str s, const char *c);

#define MF_GGUF_MAX_DIMS 4
#define MF_GGUF_DEFAULT_ALIGNMENT 32

typedef struct {
    mf_str name;
    uint32_t n_dims;
    int64_t ne[MF_GGUF_MAX_DIMS]; /* ne[0] = innermost (row length); unused dims are 1 */
    uint32_t type;                /* ggml type id (see quant/quant.h mf_type) */
    uint64_t offset;              /* relative to the start of the data section */
    uint64_t nbytes;              /* validated: row size * rows, inside the file */
    const void *data;             /* points into the mapping */
} mf_gguf_tensor;

typedef struct mf_gguf mf_gguf;

/* Open and validate: header, every key/value (nested arrays included), the tensor index, alignment and
 * every tensor extent.  On failure *out is NULL and err names the section and the values. */
int mf_gguf_open(const char *path, mf_gguf **out, mf_error *err);
/* Same over a caller-owned buffer (tests, fuzzing); the buffer must outlive the handle. */
int mf_gguf_open_memory(const void *data, size_t size, mf_gguf **out, mf_error *err);
void mf_gguf_close(mf_gguf *g);

uint32_t mf_gguf_version(const mf_gguf *g);
uint64_t mf_gguf_alignment(const mf_gguf *g);
uint64_t mf_gguf_file_size(const mf_gguf *g);
uint64_t mf_gguf_data_offset(const mf_gguf *g); /* file offset of the data section */

/* --- metadata --- */
int64_t mf_gguf_n_kv(const mf_gguf *g);
int64_t mf_gguf_find_key(const mf_gguf *g, const char *key); /* index or -1 */
mf_str mf_gguf_kv_key(const mf_gguf *g, int64_t i);
mf_gguf_type mf_gguf_kv_type(const mf_gguf *g, int64_t i);
/* for arrays: element type and count (nested arrays report MF_GGUF_ARRAY) */
mf_gguf_type mf_gguf_kv_arr_type(const mf_gguf *g, int64_t i);
uint64_t mf_gguf_kv_arr_len(const mf_gguf *g, int64_t i);

/* The value bytes of key i as stored in the file (little-endian): a scalar's bytes; a string's bytes without
 * the length; an array's elements (after its type and count).  *nbytes gets their size. */
const void *mf_gguf_kv_data(const mf_gguf *g, int64_t i, uint64_t *nbytes);
/* Renders key i's value for people: numbers in their shortest round-trip form, strings quoted and escaped
 * (cut after max_str bytes, then the byte count), arrays as `[string x 151936] "!", "\"", ...` with at
 * most max_elems elements shown (nested arrays bracketed).  0 means no limit for either.  Always
 * NUL-terminates buf (cap >= 1); returns the length the full rendering needs (like snprintf). */
size_t mf_gguf_kv_format(const mf_gguf *g, int64_t i, size_t max_elems, size_t max_str, char *buf, size_t cap);

/* Typed getters by key.  Missing key -> MF_E_NOTFOUND ("key 'x' not found"); wrong type -> MF_E_TYPE
 * naming the key, the wanted and the found type.  Integer getters accept any integer type whose value
 * fits the target (u32 from u8/u16/u32/i32>=0/u64 that fits ...), naming the value when it does not. */
int mf_gguf_get_u32(const mf_gguf *g, const char *key, uint32_t *out, mf_error *err);
int mf_gguf_get_i64(const mf_gguf *g, const char *key, int64_t *out, mf_error *err);
int mf_gguf_get_u64(const mf_gguf *g, const char *key, uint64_t *out, mf_error *err);
int mf_gguf_get_f32(const mf_gguf *g, const char *key, float *out, mf_error *err); /* f32 or f64 */
int mf_gguf_get_bool(const mf_gguf *g, const char *key, bool *out, mf_error *err);
int mf_gguf_get_str(const mf_gguf *g, const char *key, mf_str *out, mf_error *err);
/* Array of strings: *out is a malloc'd array of views (free() it); *n its length. */
int mf_gguf_get_str_array(const mf_gguf *g, const char *key, mf_str **out, uint64_t *n, mf_error *err);
/* Array of integers converted to int32 (values must fit): *out malloc'd (free() it). */
int mf_gguf_get_i32_array(const mf_gguf *g, const char *key, int32_t **out, uint64_t *n, mf_error *err);
/* Array of numbers converted to float: *out malloc'd (free() it). */
int mf_gguf_get_f32_array(const mf_gguf *g, const char *key, float **out, uint64_t *n, mf_error *err);

/* --- tensors --- */
int64_t mf_gguf_n_tensors(const mf_gguf *g);
const mf_gguf_tensor *mf_gguf_tensor_at(const mf_gguf *g, int64_t i);
const mf_gguf_tensor *mf_gguf_find_tensor(const mf_gguf *g, const char *name); /* NULL if absent */

/* --- writer --- */
typedef struct mf_gguf_writer mf_gguf_writer;

mf_gguf_writer *mf_gguf_writer_new(void); /* NULL on OOM; version 3, alignment 32 */
void mf_gguf_writer_free(mf_gguf_writer *w);
/* Metadata setters copy their arguments.  Setting a key twice replaces it (order of first set kept). */
int mf_gguf_writer_set_u32(mf_gguf_writer *w, const char *key, uint32_t v);
int mf_gguf_writer_set_i32(mf_gguf_writer *w, const char *key, int32_t v);
int mf_gguf_writer_set_u64(mf_gguf_writer *w, const char *key, uint64_t v);
int mf_gguf_writer_set_f32(mf_gguf_writer *w, const char *key, float v);
int mf_gguf_writer_set_bool(mf_gguf_writer *w, const char *key, bool v);
int mf_gguf_writer_set_str(mf_gguf_writer *w, const char *key, const char *v);
/* elem_type: any scalar type; data holds n packed elements of that type */
int mf_gguf_writer_set_arr(mf_gguf_writer *w, const char *key, mf_gguf_type elem_type, const void *data, uint64_t n);
int mf_gguf_writer_set_str_arr(mf_gguf_writer *w, const char *key, const char *const *v, uint64_t n);
/* Any fixed-size scalar type (u8 .. f64, bool as one byte); v points at one host-order value. */
int mf_gguf_writer_set_scalar(mf_gguf_writer *w, const char *key, mf_gguf_type type, const void *v);
/* The value bytes exactly as they appear in the file after the type field (little-endian; for an array:
 * u32 element type, u64 count, elements).  Not checked: for nested arrays and for tests that build
 * malformed files on purpose. */
int mf_gguf_writer_set_raw(mf_gguf_writer *w, const char *key, mf_gguf_type type, const void *value, size_t len);
/* Declare a tensor (name copied).  Data is written later, in declaration order. */
int mf_gguf_writer_add_tensor(mf_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                              const int64_t *ne, mf_error *err);
/* Streaming write: begin writes header, metadata and tensor index; then one write_tensor per declared
 * tensor in order (nbytes must equal the declared size); end pads and closes. */
int mf_gguf_writer_begin(mf_gguf_writer *w, const char *path, mf_error *err);
int mf_gguf_writer_write_tensor(mf_gguf_writer *w, const void *data, uint64_t nbytes, mf_error *err);
int mf_gguf_writer_end(mf_gguf_writer *w, mf_error *err);

#endif
