/* quant internals shared by the files of this folder only (never included from outside src/quant). */
#ifndef MF_QUANT_IMPL_H
#define MF_QUANT_IMPL_H

#include "quant/quant.h"

#include <string.h>

/* mf_fp16_to_fp32, inline: the scalar kernels convert every element of an F16 row (and every block
 * scale) with it, and a call per element was a third of an F16 matmul's time. */
static inline float mf_h2f(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    if (exp == 0x1F) return mf_bits_f32(sign | 0x7F800000u | (man << 13) | (man ? 0x400000u : 0));
    if (exp == 0) return mf_bits_f32(sign | mf_f32_bits((float)man * 0x1p-24f)); /* zero or subnormal: exact */
    return mf_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

/* mf_bf16_to_fp32, inline, for the same reason (the BF16 scalar dot). */
static inline float mf_bf162f(uint16_t h) { return mf_bits_f32((uint32_t)h << 16); }

/* Byte sizes of mf_block_q2_K / mf_block_q3_K (dequant.c walks them by offset). */
#define MF_Q2_K_SIZE 84  /* scales[16] qs[64] d dmin */
#define MF_Q3_K_SIZE 110 /* hmask[32] qs[64] scales[12] d */

/* The 16 levels an IQ4_NL / IQ4_XS index selects (the format's definition: a fixed non-uniform grid
 * denser near zero, signed bytes so a dot stays an int8 x int8 product). */
static const int8_t mf_iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* The 16 6-bit scales of a Q3_K block (12 bytes: low 4 bits in bytes 0..7, high 2 bits in 8..11), minus 32. */
static inline void mf_q3_K_scales(const uint8_t scales12[12], int8_t out[16]) {
    uint32_t aux[4];
    memcpy(aux, scales12, 12);
    const uint32_t tmp = aux[2], m2 = 0x03030303, m4 = 0x0f0f0f0f;
    aux[2] = ((aux[0] >> 4) & m4) | (((tmp >> 4) & m2) << 4);
    aux[3] = ((aux[1] >> 4) & m4) | (((tmp >> 6) & m2) << 4);
    aux[0] = (aux[0] & m4) | (((tmp >> 0) & m2) << 4);
    aux[1] = (aux[1] & m4) | (((tmp >> 2) & m2) << 4);
    memcpy(out, aux, 16);
    for (int k = 0; k < 16; k++) out[k] = (int8_t)(out[k] - 32);
}

/* The 6-bit scale of IQ4_XS sub-block ib (0..7), minus 32. */
static inline int mf_iq4_xs_scale(const mf_block_iq4_xs *b, int ib) {
    return (((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b->scales_h >> 2 * ib) & 3) << 4)) - 32;
}

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

/* Q4_K/Q5_K min term: sum over the 8 sub-blocks of m * (the activation's two per-16 sums), exact. */
static inline int mf_k4_min_dot(const uint8_t *scales12, const int16_t *bsums) {
    int msum = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        mf_q_scale_min_k4(j, scales12, &sc, &m);
        msum += m * (bsums[2 * j] + bsums[2 * j + 1]);
    }
    return msum;
}

/* ---- kernel tables (kernels.c: scalar and the choice; kernels_x86.c / kernels_neon.c: the SIMD sets) ---- */

/* Tiles for kernels without a specialized one: loop vec_dot over the pairs (trivially bitwise equal). */
#define MF_TILE_LOOP(dot)                                                                                      \
    static void dot##_tile(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a, \
                           size_t a_stride, int na) {                                                          \
        for (int i = 0; i < nw; i++)                                                                           \
            for (int j = 0; j < na; j++)                                                                       \
                dot(n, &s[i * ldc + j], (const char *)w + i * w_stride, (const char *)a + j * a_stride);        \
    }

/* a kernel set whose tile just loops vec_dot */
#define MF_K(vt, dot, ff) {vt, dot, ff, dot##_tile, 1, 1, false, false, NULL, NULL, NULL, NULL, NULL}
/* a kernel set with a specialized tile of shape tw x ta */
#define MF_KT(vt, dot, ff, tile, tw, ta) {vt, dot, ff, tile, tw, ta, false, false, NULL, NULL, NULL, NULL, NULL}
/* a kernel set with a specialized tile and a faster one for activation rows act_ok accepts (quant.h) */
#define MF_KT_OK(vt, dot, ff, tile, tw, ta, act_ok, tile_ok)                                                   \
    {vt, dot, ff, tile, tw, ta, false, false, act_ok, tile_ok, NULL, NULL, NULL}
/* an x8 layout: 8-row groups, activation-major output */
#define MF_KX8(vt, tile, ff) {vt, NULL, ff, tile, MF_X8_ROWS, 4, true, false, NULL, NULL, NULL, NULL, NULL}
/* an x16 layout: 16-row groups, up to 8 activations per pass, any number of consecutive groups per call */
#define MF_KX16(vt, tile, ff) {vt, NULL, ff, tile, MF_X16_ROWS, 8, true, true, NULL, NULL, NULL, NULL, NULL}
/* an x16 layout's AMX tile kernel: up to MF_AMX_TILE_A activations per call (8 tiles of 16; its output is
 * act_major, so the matmul hands it more than MF_TILE_MAX), and its packed-activation twin (quant.h) */
#define MF_AMX_TILE_A 128
#define MF_KAMX(vt, tile, ff, packed)                                                                           \
    {vt, NULL, ff, tile, MF_X16_ROWS, MF_AMX_TILE_A, true, true, NULL, NULL, mf_amx_pack_size, mf_amx_pack_row, packed}
/* an x8 layout's AMX tile kernel: the same, over any number of consecutive 8-row groups (two per pass) */
#define MF_KAMX8(vt, tile, ff) {vt, NULL, ff, tile, MF_X8_ROWS, MF_AMX_TILE_A, true, true, NULL, NULL, NULL, NULL, NULL}

/* What the architecture's file gives kernels.c for a SIMD ISA of its own (never MF_ISA_SCALAR): its
 * table (MF_TYPE_COUNT entries; a type without a kernel of that ISA has vec_dot_tile NULL), whether this
 * CPU runs it, and its mf_dot_rows_fn (NULL: none).  Only called for the ISAs kernels.c lists for the
 * build's architecture. */
const mf_quant_kernels *mf_quant_arch_table(mf_isa isa);
bool mf_quant_arch_cpu_has(mf_isa isa);
mf_dot_rows_fn mf_quant_arch_dot_rows(mf_isa isa);
/* Why this machine cannot run `isa` when the reason is more than "the CPU lacks it" (the OS refused AMX's
 * tile state, with the errno), or NULL.  Said once at MINFER_LOG=info and in MINFER_ISA's refusal. */
const char *mf_quant_arch_lacks(mf_isa isa);

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

/* ---- reference kernels of Q2_K, Q3_K, IQ4_NL, IQ4_XS (dot_lowbit.c): llama.cpp's AVX2 lane order ---- */
void mf_vec_dot_q2_K_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q3_K_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq4_nl_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq4_xs_scalar(int64_t n, float *s, const void *w, const void *a);

/* ---- NEON kernels (dot_neon.c, aarch64 builds only): bitwise the scalar ones ---- */
void mf_vec_dot_q4_0_neon(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q5_0_neon(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q8_0_neon(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q4_K_neon(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q6_K_neon(int64_t n, float *s, const void *w, const void *a);
/* lowbit_neon.c: bitwise the dot_lowbit.c references (their lane order) */
void mf_vec_dot_q2_K_neon(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q3_K_neon(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq4_nl_neon(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq4_xs_neon(int64_t n, float *s, const void *w, const void *a);

/* ---- reference kernels of the x8 layouts and the q8_0s converters (repack.c) ---- */
void mf_from_float_q8_0s(const float *x, void *y, int64_t n);
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
void mf_tile_q5_Kx8_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                           size_t a_stride, int na);
void mf_tile_q4_0x16_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                            size_t a_stride, int na);
void mf_tile_q5_0x16_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                            size_t a_stride, int na);
void mf_tile_q8_0x16_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                            size_t a_stride, int na);
void mf_tile_iq4_nlx8_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                             size_t a_stride, int na);
void mf_tile_iq4_xsx8_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                             size_t a_stride, int na);
void mf_tile_iq4_nlx16_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                              size_t a_stride, int na);

/* ---- activation converters (quantize.c): what ggml-cpu's x86 build produces ---- */
void mf_from_float_f32(const float *x, void *y, int64_t n);
void mf_from_float_f16(const float *x, void *y, int64_t n);
void mf_from_float_bf16(const float *x, void *y, int64_t n);
void mf_from_float_q8_0(const float *x, void *y, int64_t n);
void mf_from_float_q8_1(const float *x, void *y, int64_t n);
void mf_from_float_q8_K(const float *x, void *y, int64_t n);

#endif
