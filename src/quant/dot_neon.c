/* quant: NEON (Advanced SIMD) dot kernels for aarch64 builds: Q4_0, Q5_0, Q8_0 against Q8_0 and Q4_K, Q6_K
 * against Q8_K.
 *
 * Each is BITWISE its scalar reference (dot_scalar.c): NEON computes only the integer sums of a block,
 * which are exact in any order (int8 x int8 products widened to int16, pairs added into int32 lanes: no
 * sum can overflow), and the float folding is the scalar code's, operation for operation (one
 * accumulator in block order, a multiply then an add, never fused: gcc -std=c11 does not contract, the
 * pragma keeps clang from it).  So an aarch64 run gives the results MINFER_ISA=scalar gives on any
 * machine with the same weights, activations and file layout. */
#include "quant/quant_impl.h"

#include <arm_neon.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* f16 -> f32 in hardware (FCVT): exact, and NaNs quieted with their payload kept, like mf_fp16_to_fp32 */
static inline float h2f(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* sum of x[i] * y[i] over 16 int8 pairs, exact */
static inline int32x4_t dot16(int32x4_t acc, int8x16_t x, int8x16_t y) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(x), vget_low_s8(y)));
    return vpadalq_s16(acc, vmull_high_s8(x, y));
}

/* the exact int dot of 32 weight bytes (x0: elements 0..15, x1: 16..31) with 32 activation bytes */
static inline int dot32(int8x16_t x0, int8x16_t x1, const int8_t *y) {
    return vaddvq_s32(dot16(dot16(vdupq_n_s32(0), x0, vld1q_s8(y)), x1, vld1q_s8(y + 16)));
}

void mf_vec_dot_q4_0_neon(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q4_0 *x = w;
    const mf_block_q8_0 *y = a;
    const uint8x16_t m4 = vdupq_n_u8(0xF);
    const int8x16_t s8 = vdupq_n_s8(8);
    float acc = 0;
    for (int64_t ib = 0; ib < n / MF_QK8_0; ib++) {
        const uint8x16_t q = vld1q_u8(x[ib].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), s8); /* elements 0..15 */
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), s8); /* 16..31 */
        const int isum = dot32(lo, hi, y[ib].qs);
        acc += (h2f(x[ib].d) * h2f(y[ib].d)) * (float)isum;
    }
    *s = acc;
}

/* bit i of each byte, for vtst: element j of a 16-byte half uses bit j % 8 of qh byte j / 8 */
static const uint8_t k_bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};

void mf_vec_dot_q5_0_neon(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q5_0 *x = w;
    const mf_block_q8_0 *y = a;
    const uint8x16_t m4 = vdupq_n_u8(0xF), h5 = vdupq_n_u8(0x10), bits = vld1q_u8(k_bit);
    const int8x16_t s16 = vdupq_n_s8(16);
    float acc = 0;
    for (int64_t ib = 0; ib < n / MF_QK8_0; ib++) {
        const uint8_t *qh = x[ib].qh; /* bit j of the little-endian uint32: the 5th bit of element j */
        const uint8x16_t h0 = vtstq_u8(vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1])), bits);
        const uint8x16_t h1 = vtstq_u8(vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3])), bits);
        const uint8x16_t q = vld1q_u8(x[ib].qs);
        const uint8x16_t lo = vorrq_u8(vandq_u8(q, m4), vandq_u8(h0, h5));
        const uint8x16_t hi = vorrq_u8(vshrq_n_u8(q, 4), vandq_u8(h1, h5));
        const int isum = dot32(vsubq_s8(vreinterpretq_s8_u8(lo), s16), vsubq_s8(vreinterpretq_s8_u8(hi), s16), y[ib].qs);
        acc += (h2f(x[ib].d) * h2f(y[ib].d)) * (float)isum;
    }
    *s = acc;
}

void mf_vec_dot_q8_0_neon(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q8_0 *x = w;
    const mf_block_q8_0 *y = a;
    float acc = 0;
    for (int64_t ib = 0; ib < n / MF_QK8_0; ib++) {
        const int isum = dot32(vld1q_s8(x[ib].qs), vld1q_s8(x[ib].qs + 16), y[ib].qs);
        acc += (h2f(x[ib].d) * h2f(y[ib].d)) * (float)isum;
    }
    *s = acc;
}

void mf_vec_dot_q4_K_neon(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q4_K *x = w;
    const mf_block_q8_K *y = a;
    const uint8x16_t m4 = vdupq_n_u8(0xF);
    float acc = 0;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const uint8_t *q4 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int isum = 0;
        /* sub-blocks j, j + 1: the low and high nibbles of the same 32 bytes */
        for (int j = 0; j < 8; j += 2, q4 += 32, q8 += 64) {
            uint8_t sc0, sc1, m;
            mf_q_scale_min_k4(j, x[i].scales, &sc0, &m);
            mf_q_scale_min_k4(j + 1, x[i].scales, &sc1, &m);
            const uint8x16_t b0 = vld1q_u8(q4), b1 = vld1q_u8(q4 + 16);
            const int s0 = dot32(vreinterpretq_s8_u8(vandq_u8(b0, m4)), vreinterpretq_s8_u8(vandq_u8(b1, m4)), q8);
            const int s1 = dot32(vreinterpretq_s8_u8(vshrq_n_u8(b0, 4)), vreinterpretq_s8_u8(vshrq_n_u8(b1, 4)), q8 + 32);
            isum += sc0 * s0 + sc1 * s1;
        }
        const int msum = mf_k4_min_dot(x[i].scales, y[i].bsums);
        acc += (h2f(x[i].d) * y[i].d) * (float)isum - (h2f(x[i].dmin) * y[i].d) * (float)msum;
    }
    *s = acc;
}

/* 16 q6 values (4 low bits from ql >> shl, 2 high bits from qh >> shh) minus 32, as int8 */
static inline int8x16_t q6_16(uint8x16_t ql, int lo_shift, uint8x16_t qh, int hi_shift) {
    const uint8x16_t l = lo_shift ? vshrq_n_u8(ql, 4) : vandq_u8(ql, vdupq_n_u8(0xF));
    const uint8x16_t h = vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(4 - hi_shift))), vdupq_n_u8(0x30));
    return vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(l, h)), vdupq_n_s8(32));
}

void mf_vec_dot_q6_K_neon(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q6_K *x = w;
    const mf_block_q8_K *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *q8 = y[i].qs, *sc = x[i].scales;
        int isum = 0;
        /* dot_scalar.c's layout: in each half of 128, element l + 32k (l < 32, k < 4) is the low (k < 2) or
         * high (k >= 2) nibble of ql[l + 32 (k & 1)] with bits 2k, 2k + 1 of qh[l], scaled by sc[l / 16 + 2k] */
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, q8 += 128, sc += 8) {
            int sub[8];
            for (int g = 0; g < 2; g++) { /* l = 16g .. 16g + 15 */
                const uint8x16_t l0 = vld1q_u8(ql + 16 * g), l1 = vld1q_u8(ql + 32 + 16 * g);
                const uint8x16_t hb = vld1q_u8(qh + 16 * g);
                const int8_t *y0 = q8 + 16 * g;
                sub[g + 0] = vaddvq_s32(dot16(vdupq_n_s32(0), q6_16(l0, 0, hb, 0), vld1q_s8(y0)));
                sub[g + 2] = vaddvq_s32(dot16(vdupq_n_s32(0), q6_16(l1, 0, hb, 2), vld1q_s8(y0 + 32)));
                sub[g + 4] = vaddvq_s32(dot16(vdupq_n_s32(0), q6_16(l0, 1, hb, 4), vld1q_s8(y0 + 64)));
                sub[g + 6] = vaddvq_s32(dot16(vdupq_n_s32(0), q6_16(l1, 1, hb, 6), vld1q_s8(y0 + 96)));
            }
            for (int k = 0; k < 8; k++) isum += sc[k] * sub[k];
        }
        acc += (h2f(x[i].d) * y[i].d) * (float)isum;
    }
    *s = acc;
}
