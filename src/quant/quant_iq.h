/* quant: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S (ggml's "i-quants" on grids), shared by the files of
 * this folder only.  Each super-block of 256 values is 8 sub-blocks of 32; a sub-block is 4 groups of 8
 * (IQ2: one 8-value grid index per group) or 8 groups of 4 (IQ3), with one sign byte per 8 values and an
 * integer scale multiplier per 16 values.  Layouts (bytes; d is the f16 super-block scale):
 *   iq2_xxs  66: d, then per sub-block 8 bytes: 4 grid indices, a u32 of 4 x 7 sign bits + scale << 28
 *   iq2_xs   74: d, qs u16[32] (index 9 bits | sign field 7 bits << 9), scales[8] (two nibbles)
 *   iq2_s    82: d, qs[32] (index low 8 bits), signs[32], qh[8] (index bits 8..9, 2 per group), scales[8]
 *   iq3_xxs  98: d, qs[64] (4-value indices), per sub-block a u32 of 4 x 7 sign bits + scale << 28
 *   iq3_s   110: d, qs[64] (index low 8 bits), qh[8] (bit 8, one per index), signs[32], scales[4]
 *                (sub-block 2k's scale in the low nibble of byte k, 2k+1's in the high one)
 * A sub-block's integer value e is grid magnitude g[e] times its sign; the dot with Q8_K uses the
 * multiplier m = 2 * nibble + 1 of e's half and the factor: dequantized value = d * m * g * sign / F with
 * F = 8 (the IQ2 types), 4 (IQ3_XXS), 1 (IQ3_S). */
#ifndef MF_QUANT_IQ_H
#define MF_QUANT_IQ_H

#include "quant/iq_grids.h"
#include "quant/quant_impl.h"

#define MF_IQ2_XXS_SIZE 66
#define MF_IQ2_XS_SIZE 74
#define MF_IQ2_S_SIZE 82
#define MF_IQ3_XXS_SIZE 98
#define MF_IQ3_S_SIZE 110

/* One sub-block ib (0..7) of a block of an IQ type, unpacked: magnitudes g[32], sign bit e of *signs
 * negates value e, and the multipliers of values 0..15 (m[0]) and 16..31 (m[1]). */
typedef struct {
    uint8_t g[32];
    uint32_t signs;
    int m[2];
} mf_iq_sub;

static inline uint32_t mf_iq_rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline void mf_iq_put8(uint8_t *g, uint64_t v) {
    for (int j = 0; j < 8; j++) g[j] = (uint8_t)(v >> 8 * j);
}
static inline void mf_iq_put4(uint8_t *g, uint32_t v) {
    for (int j = 0; j < 4; j++) g[j] = (uint8_t)(v >> 8 * j);
}

static inline void mf_iq_unpack(uint32_t type, const uint8_t *b, int ib, mf_iq_sub *s) {
    uint32_t sg = 0;
    switch (type) {
    case MF_TYPE_IQ2_XXS: {
        const uint8_t *q = b + 2 + 8 * ib;
        const uint32_t aux = mf_iq_rd32(q + 4);
        for (int l = 0; l < 4; l++) {
            mf_iq_put8(s->g + 8 * l, mf_iq2xxs_grid[q[l]]);
            sg |= (uint32_t)mf_iq_ksigns(aux >> 7 * l) << 8 * l;
        }
        s->m[0] = s->m[1] = 2 * (int)(aux >> 28) + 1;
        break;
    }
    case MF_TYPE_IQ2_XS: {
        for (int l = 0; l < 4; l++) {
            const uint16_t q = (uint16_t)(b[2 + 8 * ib + 2 * l] | b[3 + 8 * ib + 2 * l] << 8);
            mf_iq_put8(s->g + 8 * l, mf_iq2xs_grid[q & 511]);
            sg |= (uint32_t)mf_iq_ksigns(q >> 9) << 8 * l;
        }
        const uint8_t sc = b[66 + ib];
        s->m[0] = 2 * (sc & 15) + 1;
        s->m[1] = 2 * (sc >> 4) + 1;
        break;
    }
    case MF_TYPE_IQ2_S: {
        const uint8_t qh = b[66 + ib];
        for (int l = 0; l < 4; l++)
            mf_iq_put8(s->g + 8 * l, mf_iq2s_grid[b[2 + 4 * ib + l] | ((qh >> 2 * l) & 3) << 8]);
        sg = mf_iq_rd32(b + 34 + 4 * ib);
        const uint8_t sc = b[74 + ib];
        s->m[0] = 2 * (sc & 15) + 1;
        s->m[1] = 2 * (sc >> 4) + 1;
        break;
    }
    case MF_TYPE_IQ3_XXS: {
        const uint8_t *q = b + 2 + 8 * ib;
        const uint32_t aux = mf_iq_rd32(b + 66 + 4 * ib);
        for (int k = 0; k < 8; k++) mf_iq_put4(s->g + 4 * k, mf_iq3xxs_grid[q[k]]);
        for (int l = 0; l < 4; l++) sg |= (uint32_t)mf_iq_ksigns(aux >> 7 * l) << 8 * l;
        s->m[0] = s->m[1] = 2 * (int)(aux >> 28) + 1;
        break;
    }
    case MF_TYPE_IQ3_S: {
        const uint8_t *q = b + 2 + 8 * ib;
        const uint8_t qh = b[66 + ib];
        for (int k = 0; k < 8; k++) mf_iq_put4(s->g + 4 * k, mf_iq3s_grid[q[k] | ((qh >> k) & 1) << 8]);
        sg = mf_iq_rd32(b + 74 + 4 * ib);
        const uint8_t sc = b[106 + ib / 2];
        s->m[0] = s->m[1] = 2 * (ib % 2 ? sc >> 4 : sc & 15) + 1;
        break;
    }
    default: memset(s, 0, sizeof *s); return;
    }
    s->signs = sg;
}

static inline size_t mf_iq_block_size(uint32_t type) {
    switch (type) {
    case MF_TYPE_IQ2_XXS: return MF_IQ2_XXS_SIZE;
    case MF_TYPE_IQ2_XS: return MF_IQ2_XS_SIZE;
    case MF_TYPE_IQ2_S: return MF_IQ2_S_SIZE;
    case MF_TYPE_IQ3_XXS: return MF_IQ3_XXS_SIZE;
    case MF_TYPE_IQ3_S: return MF_IQ3_S_SIZE;
    default: return 0;
    }
}

/* The fold every IQ kernel shares (llama.cpp's AVX2 order, so its results are llama.cpp's bits): per
 * super-block, 8 int32 lanes, lane k = sum over the 8 sub-blocks of m * (the integer dot of values
 * 4k..4k+3); then acc[k] = fmaf(d_w * d_a, (float)lane[k], acc[k]); at the end
 * ((acc0+acc4) + (acc2+acc6)) + ((acc1+acc5) + (acc3+acc7)), times 1/F. */
static inline float mf_iq_hsum8(const float a[8]) {
    const float r0 = a[0] + a[4], r1 = a[1] + a[5], r2 = a[2] + a[6], r3 = a[3] + a[7];
    return (r0 + r2) + (r1 + r3);
}

/* dequant_iq.c / dot_iq_scalar.c */
void mf_dequantize_row_iq(uint32_t type, const void *src, float *dst, int64_t n);
void mf_vec_dot_iq2_xxs_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq2_xs_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq2_s_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq3_xxs_scalar(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq3_s_scalar(int64_t n, float *s, const void *w, const void *a);
/* dot_iq_avx2.c (x86-64 builds) */
void mf_vec_dot_iq2_xxs_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq2_xs_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq2_s_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq3_xxs_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq3_s_avx2(int64_t n, float *s, const void *w, const void *a);
/* dot_iq_neon.c (aarch64 builds) */
void mf_vec_dot_iq2_xxs_neon(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq2_xs_neon(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq2_s_neon(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq3_xxs_neon(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq3_s_neon(int64_t n, float *s, const void *w, const void *a);
/* dot_iq_avx512.c (x86-64 builds) */
void mf_vec_dot_iq2_xxs_avx512(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq2_xs_avx512(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq2_s_avx512(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq3_xxs_avx512(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq3_s_avx512(int64_t n, float *s, const void *w, const void *a);
/* their tiles (dot_iq_avx2.c, dot_iq_avx512.c): one weight row against up to 4 activations at a time */
void mf_tile_iq2_xxs_avx2(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                          size_t a_stride, int na);
void mf_tile_iq2_xs_avx2(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                         size_t a_stride, int na);
void mf_tile_iq2_s_avx2(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                        size_t a_stride, int na);
void mf_tile_iq3_xxs_avx2(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                          size_t a_stride, int na);
void mf_tile_iq3_s_avx2(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                        size_t a_stride, int na);
void mf_tile_iq2_xxs_avx512(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                            size_t a_stride, int na);
void mf_tile_iq2_xs_avx512(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                           size_t a_stride, int na);
void mf_tile_iq2_s_avx512(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                          size_t a_stride, int na);
void mf_tile_iq3_xxs_avx512(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                            size_t a_stride, int na);
void mf_tile_iq3_s_avx512(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                          size_t a_stride, int na);

#endif
