/* gguf: type names, scalar sizes, string helpers shared by reader and writer. */
#include "gguf/gguf_impl.h"

#include <string.h>

const char *mf_gguf_type_name(mf_gguf_type t) {
    static const char *const names[MF_GGUF_TYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
    };
    if ((unsigned)t >= MF_GGUF_TYPE_COUNT) return "unknown";
    return names[t];
}

size_t mf_gguf_scalar_size(uint32_t t) {
    switch (t) {
    case MF_GGUF_UINT8: case MF_GGUF_INT8: case MF_GGUF_BOOL: return 1;
    case MF_GGUF_UINT16: case MF_GGUF_INT16: return 2;
    case MF_GGUF_UINT32: case MF_GGUF_INT32: case MF_GGUF_FLOAT32: return 4;
    case MF_GGUF_UINT64: case MF_GGUF_INT64: case MF_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

bool mf_str_eq(mf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && (n == 0 || memcmp(s.ptr, c, n) == 0);
}

uint64_t mf_gguf_hash(const char *p, uint64_t len) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < len; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}
