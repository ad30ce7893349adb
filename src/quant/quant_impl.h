/* quant internals shared by the files of this folder only (never included from outside src/quant). */
#ifndef MF_QUANT_IMPL_H
#define MF_QUANT_IMPL_H

#include "quant/quant.h"

#include <string.h>

/* Byte layouts of the two K types quant.h has no struct for (dequantized for info/tests only). */
#define MF_Q2_K_SIZE 84  /* scales[16] qs[64] d dmin */
#define MF_Q3_K_SIZE 110 /* hmask[32] qs[64] scales[12] d */

/* 6-bit scale/min pair j (0..7) of a Q4_K/Q5_K block's 12-byte scales field. */
static inline void mf_q_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* The 32 5-bit values of a Q5_0/Q5_1 block, low nibble + high bit, unsigned 0..31. */
static inline void mf_q5_unpack(const uint8_t qs[16], const uint8_t qh_bytes[4], uint8_t out[32]) {
    uint32_t qh;
    memcpy(&qh, qh_bytes, 4);
    for (int j = 0; j < 16; j++) {
        out[j] = (uint8_t)((qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10));
        out[j + 16] = (uint8_t)((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10));
    }
}

/* ---- scalar kernels (dot_scalar.c) ---- */
void mf_vec_dot_f32_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_f16_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_bf16_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q4_0_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q4_1_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q5_0_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q5_1_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q8_0_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q4_K_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q5_K_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q6_K_scalar(int64_t n, float *s, const void *w, const void *a);

/* ---- reference kernels of the x8 layouts and the q8_0s converters (repack.c) ---- */
void mf_from_float_q8_0s(const float *x, void *y, int64_t n);
void mf_from_float_q8_0s_avx2(const float *x, void *y, int64_t n);
void mf_tile_q4_0x8_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                           size_t a_stride, int na);
void mf_tile_q5_0x8_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                           size_t a_stride, int na);
void mf_tile_q8_0x8_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                           size_t a_stride, int na);
void mf_tile_q4_Kx8_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                           size_t a_stride, int na);
void mf_tile_q6_Kx8_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                           size_t a_stride, int na);
void mf_tile_q4_0x16_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                            size_t a_stride, int na);
void mf_tile_q5_0x16_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                            size_t a_stride, int na);
void mf_tile_q8_0x16_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                            size_t a_stride, int na);

/* ---- activation converters (quantize.c): what ggml-cpu's x86 build produces ---- */
void mf_from_float_f32(const float *x, void *y, int64_t n);
void mf_from_float_f16(const float *x, void *y, int64_t n);
void mf_from_float_bf16(const float *x, void *y, int64_t n);
void mf_from_float_q8_0(const float *x, void *y, int64_t n);
void mf_from_float_q8_1(const float *x, void *y, int64_t n);
void mf_from_float_q8_K(const float *x, void *y, int64_t n);

#endif
