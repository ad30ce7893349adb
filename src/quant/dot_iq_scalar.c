/* quant: reference dot kernels of the IQ2/IQ3 formats against Q8_K activations (quant_iq.h).
 *
 * The fold is llama.cpp's AVX2 one (mf_iq_hsum8's comment), written out in plain C, so this reference,
 * minfer's SIMD kernels and llama.cpp's x86 build give the same bits.  The sign is applied to the
 * activation byte as an int8 negation (-(-128) stays -128), as the SIMD sign instructions do; Q8_K from
 * from_float never holds -128, crafted rows may. */
#include "quant/quant_iq.h"

#include <math.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

static void dot_iq(uint32_t type, float inv, int64_t n, float *s, const void *w, const void *a) {
    const size_t bs = mf_iq_block_size(type);
    const uint8_t *b = w;
    const mf_block_q8_K *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / MF_QK_K; i++, b += bs) {
        uint16_t dh;
        memcpy(&dh, b, 2);
        const float d = mf_fp16_to_fp32(dh) * y[i].d;
        int32_t lane[8] = {0};
        for (int ib = 0; ib < 8; ib++) {
            mf_iq_sub sb;
            mf_iq_unpack(type, b, ib, &sb);
            const int8_t *q8 = y[i].qs + 32 * ib;
            for (int k = 0; k < 8; k++) {
                int32_t p = 0;
                for (int e = 4 * k; e < 4 * k + 4; e++) {
                    const int8_t q = sb.signs >> e & 1 ? (int8_t)(uint8_t)(0u - (uint8_t)q8[e]) : q8[e];
                    p += sb.g[e] * q;
                }
                lane[k] += sb.m[k / 4] * p;
            }
        }
        for (int k = 0; k < 8; k++) acc[k] = fmaf(d, (float)lane[k], acc[k]);
    }
    *s = inv * mf_iq_hsum8(acc);
}

void mf_vec_dot_iq2_xxs_scalar(int64_t n, float *s, const void *w, const void *a) {
    dot_iq(MF_TYPE_IQ2_XXS, 0.125f, n, s, w, a);
}
void mf_vec_dot_iq2_xs_scalar(int64_t n, float *s, const void *w, const void *a) {
    dot_iq(MF_TYPE_IQ2_XS, 0.125f, n, s, w, a);
}
void mf_vec_dot_iq2_s_scalar(int64_t n, float *s, const void *w, const void *a) {
    dot_iq(MF_TYPE_IQ2_S, 0.125f, n, s, w, a);
}
void mf_vec_dot_iq3_xxs_scalar(int64_t n, float *s, const void *w, const void *a) {
    dot_iq(MF_TYPE_IQ3_XXS, 0.25f, n, s, w, a);
}
/* llama.cpp returns the IQ3_S sum unscaled (its multipliers already are the dequantized scale) */
void mf_vec_dot_iq3_s_scalar(int64_t n, float *s, const void *w, const void *a) {
    dot_iq(MF_TYPE_IQ3_S, 1.0f, n, s, w, a);
}
