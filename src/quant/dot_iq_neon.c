/* quant: NEON IQ2/IQ3 x Q8_K dot kernels (aarch64 builds), bitwise the reference (dot_iq_scalar.c): the
 * same exact int32 lanes (lane k of a sub-block = values 4k..4k+3: a widening multiply, two pairwise
 * adds), the same per-lane fused multiply-add into 2 x 4 float lanes, the same final sums.  The grid
 * bytes, signs and multipliers come from the reference unpacker. */
#include "quant/quant_iq.h"

#include <arm_neon.h>

/* 16 values: grid magnitudes g (<= 62, so exact as int8), activations q with the signs applied as an int8
 * negation (wraps like the reference), their 4 int32 group sums */
static inline int32x4_t sums16(const uint8_t *g, const int8_t *q8, uint16_t sg) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t sb = vcombine_u8(vdup_n_u8((uint8_t)sg), vdup_n_u8((uint8_t)(sg >> 8)));
    const int8x16_t neg = vreinterpretq_s8_u8(vtstq_u8(sb, vld1q_u8(bit)));
    const int8x16_t q = vsubq_s8(veorq_s8(vld1q_s8(q8), neg), neg);
    const int8x16_t w = vreinterpretq_s8_u8(vld1q_u8(g));
    const int16x8_t lo = vmull_s8(vget_low_s8(w), vget_low_s8(q)), hi = vmull_high_s8(w, q);
    return vpaddlq_s16(vpaddq_s16(lo, hi)); /* pair sums stay below 2^15: 2 * 62 * 128 */
}

static void dot_iq_neon(uint32_t type, float inv, int64_t n, float *s, const void *w, const void *a) {
    const size_t bs = mf_iq_block_size(type);
    const uint8_t *b = w;
    const mf_block_q8_K *y = a;
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / MF_QK_K; i++, b += bs) {
        uint16_t dh;
        memcpy(&dh, b, 2);
        const float d = mf_fp16_to_fp32(dh) * y[i].d;
        int32x4_t s0 = vdupq_n_s32(0), s1 = vdupq_n_s32(0);
        for (int ib = 0; ib < 8; ib++) {
            mf_iq_sub sb;
            mf_iq_unpack(type, b, ib, &sb);
            const int8_t *q8 = y[i].qs + 32 * ib;
            s0 = vmlaq_n_s32(s0, sums16(sb.g, q8, (uint16_t)sb.signs), sb.m[0]);
            s1 = vmlaq_n_s32(s1, sums16(sb.g + 16, q8 + 16, (uint16_t)(sb.signs >> 16)), sb.m[1]);
        }
        acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(s0), d);
        acc1 = vfmaq_n_f32(acc1, vcvtq_f32_s32(s1), d);
    }
    float acc[8];
    vst1q_f32(acc, acc0);
    vst1q_f32(acc + 4, acc1);
    *s = inv * mf_iq_hsum8(acc);
}

void mf_vec_dot_iq2_xxs_neon(int64_t n, float *s, const void *w, const void *a) {
    dot_iq_neon(MF_TYPE_IQ2_XXS, 0.125f, n, s, w, a);
}
void mf_vec_dot_iq2_xs_neon(int64_t n, float *s, const void *w, const void *a) {
    dot_iq_neon(MF_TYPE_IQ2_XS, 0.125f, n, s, w, a);
}
void mf_vec_dot_iq2_s_neon(int64_t n, float *s, const void *w, const void *a) {
    dot_iq_neon(MF_TYPE_IQ2_S, 0.125f, n, s, w, a);
}
void mf_vec_dot_iq3_xxs_neon(int64_t n, float *s, const void *w, const void *a) {
    dot_iq_neon(MF_TYPE_IQ3_XXS, 0.25f, n, s, w, a);
}
void mf_vec_dot_iq3_s_neon(int64_t n, float *s, const void *w, const void *a) {
    dot_iq_neon(MF_TYPE_IQ3_S, 1.0f, n, s, w, a);
}
