/* quant: scalar dot kernels, the reference every SIMD kernel is tested against.
 *
 * Reduction order (fixed, one row at a time): the integer dot of each block is exact; blocks are
 * folded into a single float accumulator in block order as acc += (d_w * d_a) * isum (minus the
 * min term for the K/"_1" formats).  Float rows (F32/F16/BF16) accumulate in double, element order. */
#include "quant/quant_impl.h"

#define H2F mf_h2f

/* The reference order is a multiply, then an add: keep clang from fusing them where the target has FMA
 * (aarch64 always does); gcc in ISO C mode (-std=c11) never fuses. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

void mf_vec_dot_f32_scalar(int64_t n, float *s, const void *w, const void *a) {
    const float *x = w, *y = a;
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += (double)(x[i] * y[i]);
    *s = (float)acc;
}

void mf_vec_dot_f16_scalar(int64_t n, float *s, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += (double)(H2F(x[i]) * H2F(y[i]));
    *s = (float)acc;
}

void mf_vec_dot_bf16_scalar(int64_t n, float *s, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += (double)(mf_bf162f(x[i]) * mf_bf162f(y[i]));
    *s = (float)acc;
}

void mf_vec_dot_q4_0_scalar(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q4_0 *x = w;
    const mf_block_q8_0 *y = a;
    float acc = 0;
    for (int64_t ib = 0; ib < n / MF_QK8_0; ib++) {
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            isum += ((x[ib].qs[j] & 0x0F) - 8) * y[ib].qs[j];
            isum += ((x[ib].qs[j] >> 4) - 8) * y[ib].qs[j + 16];
        }
        acc += (H2F(x[ib].d) * H2F(y[ib].d)) * (float)isum;
    }
    *s = acc;
}

void mf_vec_dot_q4_1_scalar(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q4_1 *x = w;
    const mf_block_q8_1 *y = a;
    float acc = 0;
    for (int64_t ib = 0; ib < n / MF_QK8_1; ib++) {
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            isum += (x[ib].qs[j] & 0x0F) * y[ib].qs[j];
            isum += (x[ib].qs[j] >> 4) * y[ib].qs[j + 16];
        }
        /* y.s = d_a * sum(q_a) carries the min term: sum((q*d + m) * a) = d*d_a*isum + m*s */
        acc += (H2F(x[ib].d) * H2F(y[ib].d)) * (float)isum + H2F(x[ib].m) * H2F(y[ib].s);
    }
    *s = acc;
}

void mf_vec_dot_q5_0_scalar(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q5_0 *x = w;
    const mf_block_q8_0 *y = a;
    uint8_t q[32];
    float acc = 0;
    for (int64_t ib = 0; ib < n / MF_QK8_0; ib++) {
        mf_q5_unpack(x[ib].qs, x[ib].qh, q);
        int isum = 0;
        for (int j = 0; j < 32; j++) isum += (q[j] - 16) * y[ib].qs[j];
        acc += (H2F(x[ib].d) * H2F(y[ib].d)) * (float)isum;
    }
    *s = acc;
}

void mf_vec_dot_q5_1_scalar(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q5_1 *x = w;
    const mf_block_q8_1 *y = a;
    uint8_t q[32];
    float acc = 0;
    for (int64_t ib = 0; ib < n / MF_QK8_1; ib++) {
        mf_q5_unpack(x[ib].qs, x[ib].qh, q);
        int isum = 0;
        for (int j = 0; j < 32; j++) isum += q[j] * y[ib].qs[j];
        acc += (H2F(x[ib].d) * H2F(y[ib].d)) * (float)isum + H2F(x[ib].m) * H2F(y[ib].s);
    }
    *s = acc;
}

void mf_vec_dot_q8_0_scalar(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q8_0 *x = w;
    const mf_block_q8_0 *y = a;
    float acc = 0;
    for (int64_t ib = 0; ib < n / MF_QK8_0; ib++) {
        int isum = 0;
        for (int j = 0; j < 32; j++) isum += x[ib].qs[j] * y[ib].qs[j];
        acc += (H2F(x[ib].d) * H2F(y[ib].d)) * (float)isum;
    }
    *s = acc;
}

/* Q4_K/Q5_K: 8 sub-blocks of 32 with 6-bit scale sc and min m; value = d*sc*q - dmin*m.  The min
 * term only needs the activation's per-16 sums (bsums), so it is one short integer dot (mf_k4_min_dot). */
void mf_vec_dot_q4_K_scalar(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q4_K *x = w;
    const mf_block_q8_K *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const uint8_t *q4 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int isum = 0;
        for (int j = 0; j < 8; j += 2, q4 += 32, q8 += 64) {
            uint8_t sc0, sc1, m;
            mf_q_scale_min_k4(j, x[i].scales, &sc0, &m);
            mf_q_scale_min_k4(j + 1, x[i].scales, &sc1, &m);
            int s0 = 0, s1 = 0;
            for (int l = 0; l < 32; l++) {
                s0 += (q4[l] & 0xF) * q8[l];
                s1 += (q4[l] >> 4) * q8[l + 32];
            }
            isum += sc0 * s0 + sc1 * s1;
        }
        const int msum = mf_k4_min_dot(x[i].scales, y[i].bsums);
        acc += (H2F(x[i].d) * y[i].d) * (float)isum - (H2F(x[i].dmin) * y[i].d) * (float)msum;
    }
    *s = acc;
}

void mf_vec_dot_q5_K_scalar(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q5_K *x = w;
    const mf_block_q8_K *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        const int8_t *q8 = y[i].qs;
        int isum = 0;
        for (int j = 0; j < 8; j += 2, ql += 32, q8 += 64) {
            uint8_t sc0, sc1, m;
            mf_q_scale_min_k4(j, x[i].scales, &sc0, &m);
            mf_q_scale_min_k4(j + 1, x[i].scales, &sc1, &m);
            const uint8_t u0 = (uint8_t)(1u << j), u1 = (uint8_t)(2u << j);
            int s0 = 0, s1 = 0;
            for (int l = 0; l < 32; l++) {
                s0 += ((ql[l] & 0xF) + (qh[l] & u0 ? 16 : 0)) * q8[l];
                s1 += ((ql[l] >> 4) + (qh[l] & u1 ? 16 : 0)) * q8[l + 32];
            }
            isum += sc0 * s0 + sc1 * s1;
        }
        const int msum = mf_k4_min_dot(x[i].scales, y[i].bsums);
        acc += (H2F(x[i].d) * y[i].d) * (float)isum - (H2F(x[i].dmin) * y[i].d) * (float)msum;
    }
    *s = acc;
}

void mf_vec_dot_q6_K_scalar(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q6_K *x = w;
    const mf_block_q8_K *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *q8 = y[i].qs, *sc = x[i].scales;
        int isum = 0;
        /* two halves of 128; within a half, element l+32k uses 2 bits of qh[l] at 2k and 16-wide
         * scale sc[l/16 + 2k] */
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, q8 += 128, sc += 8) {
            int sub[8] = {0};
            for (int l = 0; l < 32; l++) {
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                const int is = l / 16;
                sub[is + 0] += q1 * q8[l];
                sub[is + 2] += q2 * q8[l + 32];
                sub[is + 4] += q3 * q8[l + 64];
                sub[is + 6] += q4 * q8[l + 96];
            }
            for (int k = 0; k < 8; k++) isum += sc[k] * sub[k];
        }
        acc += (H2F(x[i].d) * y[i].d) * (float)isum;
    }
    *s = acc;
}
