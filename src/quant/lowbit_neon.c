/* quant: NEON dot kernels of Q2_K, Q3_K, IQ4_NL and IQ4_XS (aarch64 builds).  Bitwise their references in
 * dot_lowbit.c: NEON forms the same 8 exact int32 lane sums (lane k: bytes 4k..4k+3 of each 32-byte chunk,
 * times that chunk's sub-block scale), and the float steps are the reference's, one fused multiply-add per
 * block and lane (vfmaq, as fmaf), then ggml's horizontal sum. */
#include "quant/quant_impl.h"

#include <arm_neon.h>
#include <math.h>

static inline float h2f(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* the 4-byte sums of 16 int8 products: lane i = x[4i..4i+3] . y[4i..4i+3] (exact) */
static inline int32x4_t sum4(int8x16_t x, int8x16_t y) {
    const int16x8_t p = vpaddq_s16(vmull_s8(vget_low_s8(x), vget_low_s8(y)), vmull_high_s8(x, y));
    return vpaddlq_s16(p);
}

/* ggml's byte-sign product: |v| times y negated where v < 0 (-128 stays -128, as vnegq wraps) */
static inline int32x4_t sum4_iq4(int8x16_t v, int8x16_t y) {
    const int8x16_t sy = vbslq_s8(vcltzq_s8(v), vnegq_s8(y), y);
    return sum4(vabsq_s8(v), sy);
}

static inline float hsum8(float32x4_t lo, float32x4_t hi) {
    const float32x4_t r = vaddq_f32(hi, lo);
    return (vgetq_lane_f32(r, 0) + vgetq_lane_f32(r, 2)) + (vgetq_lane_f32(r, 1) + vgetq_lane_f32(r, 3));
}

void mf_vec_dot_q2_K_neon(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q2_K *x = w;
    const mf_block_q8_K *y = a;
    const uint8x16_t m3 = vdupq_n_u8(3);
    float32x4_t acc_lo = vdupq_n_f32(0), acc_hi = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = y[i].d * h2f(x[i].d), dmin = -y[i].d * h2f(x[i].dmin);
        int32_t prod[8];
        for (int k = 0; k < 8; k++)
            prod[k] = (x[i].scales[2 * k] >> 4) * y[i].bsums[2 * k] + (x[i].scales[2 * k + 1] >> 4) * y[i].bsums[2 * k + 1];
        acc_lo = vfmaq_n_f32(acc_lo, vcvtq_f32_s32(vld1q_s32(prod)), dmin);
        acc_hi = vfmaq_n_f32(acc_hi, vcvtq_f32_s32(vld1q_s32(prod + 4)), dmin);
        int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
        for (int j = 0; j < 2; j++) {
            const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * j), b1 = vld1q_u8(x[i].qs + 32 * j + 16);
            for (int l = 0; l < 4; l++) {
                const int8_t *q8 = y[i].qs + 128 * j + 32 * l;
                const int8x16_t q0 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(b0, vdupq_n_s8((int8_t)(-2 * l))), m3));
                const int8x16_t q1 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(b1, vdupq_n_s8((int8_t)(-2 * l))), m3));
                lo = vmlaq_n_s32(lo, sum4(q0, vld1q_s8(q8)), x[i].scales[8 * j + 2 * l] & 0xF);
                hi = vmlaq_n_s32(hi, sum4(q1, vld1q_s8(q8 + 16)), x[i].scales[8 * j + 2 * l + 1] & 0xF);
            }
        }
        acc_lo = vfmaq_n_f32(acc_lo, vcvtq_f32_s32(lo), d);
        acc_hi = vfmaq_n_f32(acc_hi, vcvtq_f32_s32(hi), d);
    }
    *s = hsum8(acc_lo, acc_hi);
}

void mf_vec_dot_q3_K_neon(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q3_K *x = w;
    const mf_block_q8_K *y = a;
    const uint8x16_t m3 = vdupq_n_u8(3), four = vdupq_n_u8(4);
    float32x4_t acc_lo = vdupq_n_f32(0), acc_hi = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = y[i].d * h2f(x[i].d);
        int8_t sc[16];
        mf_q3_K_scales(x[i].scales, sc);
        const uint8x16_t h0 = vld1q_u8(x[i].hmask), h1 = vld1q_u8(x[i].hmask + 16);
        int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
        for (int j = 0; j < 2; j++) {
            const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * j), b1 = vld1q_u8(x[i].qs + 32 * j + 16);
            for (int l = 0; l < 4; l++) {
                const int8_t *q8 = y[i].qs + 128 * j + 32 * l;
                const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (4 * j + l)));
                const int8x16_t sh = vdupq_n_s8((int8_t)(-2 * l));
                /* low 2 bits, minus 4 where the high bit is clear */
                const int8x16_t q0 = vreinterpretq_s8_u8(
                    vsubq_u8(vandq_u8(vshlq_u8(b0, sh), m3), vbicq_u8(four, vtstq_u8(h0, bit))));
                const int8x16_t q1 = vreinterpretq_s8_u8(
                    vsubq_u8(vandq_u8(vshlq_u8(b1, sh), m3), vbicq_u8(four, vtstq_u8(h1, bit))));
                lo = vmlaq_n_s32(lo, sum4(q0, vld1q_s8(q8)), sc[8 * j + 2 * l]);
                hi = vmlaq_n_s32(hi, sum4(q1, vld1q_s8(q8 + 16)), sc[8 * j + 2 * l + 1]);
            }
        }
        acc_lo = vfmaq_n_f32(acc_lo, vcvtq_f32_s32(lo), d);
        acc_hi = vfmaq_n_f32(acc_hi, vcvtq_f32_s32(hi), d);
    }
    *s = hsum8(acc_lo, acc_hi);
}

/* the levels of one 32-value sub-block: values 0..15 (low nibbles), 16..31 (high nibbles) */
static inline void iq4_levels(const uint8_t *qs, int8x16_t *v0, int8x16_t *v1) {
    const int8x16_t lut = vld1q_s8(mf_iq4_levels);
    const uint8x16_t b = vld1q_u8(qs);
    *v0 = vqtbl1q_s8(lut, vandq_u8(b, vdupq_n_u8(0xF)));
    *v1 = vqtbl1q_s8(lut, vshrq_n_u8(b, 4));
}

void mf_vec_dot_iq4_nl_neon(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_iq4_nl *x = w;
    const mf_block_q8_0 *y = a;
    const int64_t nb = n / MF_QK4_NL;
    float32x4_t a1_lo = vdupq_n_f32(0), a1_hi = vdupq_n_f32(0), a2_lo = vdupq_n_f32(0), a2_hi = vdupq_n_f32(0);
    int64_t ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        int8x16_t v0, v1;
        iq4_levels(x[ib].qs, &v0, &v1);
        const float d1 = h2f(y[ib].d) * h2f(x[ib].d), d2 = h2f(y[ib + 1].d) * h2f(x[ib + 1].d);
        a1_lo = vfmaq_n_f32(a1_lo, vcvtq_f32_s32(sum4_iq4(v0, vld1q_s8(y[ib].qs))), d1);
        a1_hi = vfmaq_n_f32(a1_hi, vcvtq_f32_s32(sum4_iq4(v1, vld1q_s8(y[ib].qs + 16))), d1);
        iq4_levels(x[ib + 1].qs, &v0, &v1);
        a2_lo = vfmaq_n_f32(a2_lo, vcvtq_f32_s32(sum4_iq4(v0, vld1q_s8(y[ib + 1].qs))), d2);
        a2_hi = vfmaq_n_f32(a2_hi, vcvtq_f32_s32(sum4_iq4(v1, vld1q_s8(y[ib + 1].qs + 16))), d2);
    }
    float sumf = hsum8(vaddq_f32(a1_lo, a2_lo), vaddq_f32(a1_hi, a2_hi));
    for (; ib < nb; ib++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += y[ib].qs[j] * mf_iq4_levels[x[ib].qs[j] & 0xF] + y[ib].qs[j + 16] * mf_iq4_levels[x[ib].qs[j] >> 4];
        sumf = fmaf(h2f(y[ib].d) * h2f(x[ib].d), (float)sumi, sumf);
    }
    *s = sumf;
}

void mf_vec_dot_iq4_xs_neon(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_iq4_xs *x = w;
    const mf_block_q8_K *y = a;
    float32x4_t acc_lo = vdupq_n_f32(0), acc_hi = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
        for (int ib = 0; ib < 8; ib++) {
            int8x16_t v0, v1;
            iq4_levels(x[i].qs + 16 * ib, &v0, &v1);
            const int ls = mf_iq4_xs_scale(&x[i], ib);
            lo = vmlaq_n_s32(lo, sum4_iq4(v0, vld1q_s8(y[i].qs + 32 * ib)), ls);
            hi = vmlaq_n_s32(hi, sum4_iq4(v1, vld1q_s8(y[i].qs + 32 * ib + 16)), ls);
        }
        const float d = h2f(x[i].d) * y[i].d;
        acc_lo = vfmaq_n_f32(acc_lo, vcvtq_f32_s32(lo), d);
        acc_hi = vfmaq_n_f32(acc_hi, vcvtq_f32_s32(hi), d);
    }
    *s = hsum8(acc_lo, acc_hi);
}
