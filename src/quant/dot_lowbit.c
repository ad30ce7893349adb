/* quant: reference dot kernels of Q2_K, Q3_K (with Q8_K activations), IQ4_NL (with Q8_0, as ggml pairs it)
 * and IQ4_XS (with Q8_K).
 *
 * Unlike the older scalar kernels (one float accumulator in block order), these reproduce llama.cpp's AVX2
 * kernels' arithmetic exactly, written lane by lane in plain C: 8 float lanes, lane k holding the exact
 * integer dot of the bytes 4k..4k+3 of every 32-byte chunk, folded per block with a fused multiply-add
 * (fmaf, correctly rounded everywhere), then ggml's horizontal sum.  So this reference, every SIMD kernel
 * of these types and llama.cpp give the same bits (tests/test_quant.c checks all three).
 *
 * The IQ4 products follow ggml's mul_add_epi8 (|w| times the activation with w's sign applied as a byte):
 * an activation byte of -128 against a negative level stays -128, as _mm256_sign_epi8 leaves it. */
#include "quant/quant_impl.h"

#include <math.h>

#define H2F mf_h2f

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* ggml's hsum_float_8: the high half onto the low one, then pairs */
static float hsum8(const float a[8]) {
    const float r0 = a[4] + a[0], r1 = a[5] + a[1], r2 = a[6] + a[2], r3 = a[7] + a[3];
    return (r0 + r2) + (r1 + r3);
}

/* |w| * (q with w's sign), the byte arithmetic of _mm256_sign_epi8 + _mm256_maddubs_epi16 */
static inline int iq4_mul(int w, int8_t q) {
    const int8_t sq = w < 0 ? (int8_t)(uint8_t)(-(int)q) : w == 0 ? 0 : q;
    return (w < 0 ? -w : w) * sq;
}

void mf_vec_dot_q2_K_scalar(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q2_K *x = w;
    const mf_block_q8_K *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = y[i].d * H2F(x[i].d), dmin = -y[i].d * H2F(x[i].dmin);
        for (int k = 0; k < 8; k++) {
            const int prod = (x[i].scales[2 * k] >> 4) * y[i].bsums[2 * k] +
                             (x[i].scales[2 * k + 1] >> 4) * y[i].bsums[2 * k + 1];
            acc[k] = fmaf(dmin, (float)prod, acc[k]);
        }
        for (int k = 0; k < 8; k++) {
            int sumi = 0;
            for (int j = 0; j < 2; j++)
                for (int l = 0; l < 4; l++) {
                    int p = 0;
                    for (int t = 0; t < 4; t++)
                        p += ((x[i].qs[32 * j + 4 * k + t] >> (2 * l)) & 3) * y[i].qs[128 * j + 32 * l + 4 * k + t];
                    sumi += (x[i].scales[8 * j + 2 * l + (k >> 2)] & 0xF) * p;
                }
            acc[k] = fmaf(d, (float)sumi, acc[k]);
        }
    }
    *s = hsum8(acc);
}

void mf_vec_dot_q3_K_scalar(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q3_K *x = w;
    const mf_block_q8_K *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = y[i].d * H2F(x[i].d);
        int8_t sc[16];
        mf_q3_K_scales(x[i].scales, sc);
        for (int k = 0; k < 8; k++) {
            int sumi = 0;
            for (int j = 0; j < 2; j++)
                for (int l = 0; l < 4; l++) {
                    int p = 0;
                    for (int t = 0; t < 4; t++) {
                        const int b = 4 * k + t;
                        const int q = ((x[i].qs[32 * j + b] >> (2 * l)) & 3) - ((x[i].hmask[b] >> (4 * j + l)) & 1 ? 0 : 4);
                        p += q * y[i].qs[128 * j + 32 * l + b];
                    }
                    sumi += sc[8 * j + 2 * l + (k >> 2)] * p;
                }
            acc[k] = fmaf(d, (float)sumi, acc[k]);
        }
    }
    *s = hsum8(acc);
}

/* lane k of one 32-value IQ4 sub-block: its values 4k..4k+3 (low nibbles are values 0..15) */
static inline int iq4_lane(const uint8_t qs[16], const int8_t *q8, int k) {
    int p = 0;
    for (int t = 0; t < 4; t++) {
        const int e = 4 * k + t;
        const int nib = e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4;
        p += iq4_mul(mf_iq4_levels[nib], q8[e]);
    }
    return p;
}

/* Blocks in pairs, even ones into one set of lanes and odd ones into another, summed before the
 * horizontal sum; an odd last block is added after it (ggml's scalar tail, contracted to an fma). */
void mf_vec_dot_iq4_nl_scalar(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_iq4_nl *x = w;
    const mf_block_q8_0 *y = a;
    const int64_t nb = n / MF_QK4_NL;
    float acc1[8] = {0}, acc2[8] = {0};
    int64_t ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        const float d1 = H2F(y[ib].d) * H2F(x[ib].d), d2 = H2F(y[ib + 1].d) * H2F(x[ib + 1].d);
        for (int k = 0; k < 8; k++) {
            acc1[k] = fmaf(d1, (float)iq4_lane(x[ib].qs, y[ib].qs, k), acc1[k]);
            acc2[k] = fmaf(d2, (float)iq4_lane(x[ib + 1].qs, y[ib + 1].qs, k), acc2[k]);
        }
    }
    float sum[8];
    for (int k = 0; k < 8; k++) sum[k] = acc1[k] + acc2[k];
    float sumf = hsum8(sum);
    for (; ib < nb; ib++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += y[ib].qs[j] * mf_iq4_levels[x[ib].qs[j] & 0xF] + y[ib].qs[j + 16] * mf_iq4_levels[x[ib].qs[j] >> 4];
        sumf = fmaf(H2F(y[ib].d) * H2F(x[ib].d), (float)sumi, sumf);
    }
    *s = sumf;
}

void mf_vec_dot_iq4_xs_scalar(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_iq4_xs *x = w;
    const mf_block_q8_K *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = H2F(x[i].d) * y[i].d;
        for (int k = 0; k < 8; k++) {
            int sumi = 0;
            for (int ib = 0; ib < 8; ib++)
                sumi += mf_iq4_xs_scale(&x[i], ib) * iq4_lane(x[i].qs + 16 * ib, y[i].qs + 32 * ib, k);
            acc[k] = fmaf(d, (float)sumi, acc[k]);
        }
    }
    *s = hsum8(acc);
}
