/* gguf internals shared by the reader, the writer and the formatter (not part of the module API). */
#ifndef MF_GGUF_IMPL_H
#define MF_GGUF_IMPL_H

#include "gguf/gguf.h"

/* GGUF is little-endian on disk; these helpers keep the code independent of the host order. */
static inline uint16_t mf_gguf_rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t mf_gguf_rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t mf_gguf_rd64(const uint8_t *p) {
    return (uint64_t)mf_gguf_rd32(p) | ((uint64_t)mf_gguf_rd32(p + 4) << 32);
}
static inline void mf_gguf_wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void mf_gguf_wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Bytes of one scalar of type t; 0 for string, array and unknown ids. */
size_t mf_gguf_scalar_size(uint32_t t);

/* The llama.cpp loader keeps tensor names in char[64], so a name must be shorter than this. */
#define MF_GGUF_MAX_NAME 64
/* Nested arrays deeper than this are refused: recursion on hostile input must stay bounded. */
#define MF_GGUF_MAX_NESTING 8

/* FNV-1a, used by the reader's key and tensor-name tables. */
uint64_t mf_gguf_hash(const char *p, uint64_t len);

#endif
