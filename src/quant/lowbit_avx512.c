/* quant: AVX-512 (VNNI, 256-bit) dot kernels of Q2_K, Q3_K, IQ4_NL and IQ4_XS.  lowbit_avx2.c with each
 * "multiply int16 pairs by the scale, then add into the int32 sums" fused into one vpdpwssd (IQ4_NL: the
 * pair sums of ones into one vpdpbusd).  The integer sums are exact either way (no int16 product saturates:
 * at most 2 x 127 x 128), and the float steps are AVX2's, so these are bitwise the AVX2 kernels and the
 * references (tests/test_quant.c). */
#include "quant/quant_x86.h"

#include <math.h>

static inline MF_AVX512 __m256i scale_shuffle(int i) {
    const __m128i lo = _mm_set1_epi16((short)(0x0100 * (4 * i + 1) + 4 * i));
    const __m128i hi = _mm_set1_epi16((short)(0x0100 * (4 * i + 3) + 4 * i + 2));
    return _mm256_set_m128i(hi, lo);
}

static inline MF_AVX512 void scales16(__m128i sc8, __m256i out[2]) {
    const __m256i all = _mm256_cvtepi8_epi16(sc8);
    const __m128i l = _mm256_extracti128_si256(all, 0), h = _mm256_extracti128_si256(all, 1);
    out[0] = _mm256_set_m128i(l, l);
    out[1] = _mm256_set_m128i(h, h);
}

MF_AVX512 void mf_vec_dot_q2_K_avx512(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q2_K *x = w;
    const mf_block_q8_K *y = a;
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0xF);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = y[i].d * MF_H2F(x[i].d), dmin = -y[i].d * MF_H2F(x[i].dmin);
        const uint8_t *q2 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        const __m128i ms = _mm_loadu_si128((const __m128i *)x[i].scales);
        const __m128i mins8 = _mm_and_si128(_mm_srli_epi16(ms, 4), m4);
        const __m256i prod = _mm256_madd_epi16(_mm256_cvtepi8_epi16(mins8), _mm256_loadu_si256((const __m256i *)y[i].bsums));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), acc);
        __m256i sc[2];
        scales16(_mm_and_si128(ms, m4), sc);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 2; j++, q2 += 32) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)q2);
            for (int l = 0; l < 4; l++, q8 += 32) {
                const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * l), m3);
                const __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)q8));
                sumi = _mm256_dpwssd_epi32(sumi, _mm256_shuffle_epi8(sc[j], scale_shuffle(l)), p);
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = mf_hsum_f32x8(acc);
}

MF_AVX512 void mf_vec_dot_q3_K_avx512(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q3_K *x = w;
    const mf_block_q8_K *y = a;
    const __m256i m3 = _mm256_set1_epi8(3), mone = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = y[i].d * MF_H2F(x[i].d);
        const uint8_t *q3 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        int8_t sc8[16];
        mf_q3_K_scales(x[i].scales, sc8);
        __m256i sc[2];
        scales16(_mm_loadu_si128((const __m128i *)sc8), sc);
        const __m256i hbits = _mm256_loadu_si256((const __m256i *)x[i].hmask);
        __m256i sumi = _mm256_setzero_si256();
        int bit = 0;
        for (int j = 0; j < 2; j++, q3 += 32) {
            const __m256i bits = _mm256_loadu_si256((const __m256i *)q3);
            for (int l = 0; l < 4; l++, q8 += 32, bit++) {
                const __m256i ql = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * l), m3);
                const __m256i qh = _mm256_slli_epi16(
                    _mm256_srli_epi16(_mm256_andnot_si256(hbits, _mm256_slli_epi16(mone, bit)), bit), 2);
                const __m256i q8v = _mm256_loadu_si256((const __m256i *)q8);
                const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(ql, q8v), _mm256_maddubs_epi16(qh, q8v));
                sumi = _mm256_dpwssd_epi32(sumi, _mm256_shuffle_epi8(sc[j], scale_shuffle(l)), p);
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = mf_hsum_f32x8(acc);
}

static inline MF_AVX512 __m256i iq4_levels32(const uint8_t *qs) {
    const __m128i lut = _mm_loadu_si128((const __m128i *)mf_iq4_levels), m4 = _mm_set1_epi8(0xF);
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_set_m128i(_mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(b, 4), m4)),
                            _mm_shuffle_epi8(lut, _mm_and_si128(b, m4)));
}

MF_AVX512 void mf_vec_dot_iq4_nl_avx512(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_iq4_nl *x = w;
    const mf_block_q8_0 *y = a;
    const int64_t nb = n / MF_QK4_NL;
    __m256 acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps();
    int64_t ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        const __m256i v1 = iq4_levels32(x[ib].qs), v2 = iq4_levels32(x[ib + 1].qs);
        const __m256i y1 = _mm256_loadu_si256((const __m256i *)y[ib].qs), y2 = _mm256_loadu_si256((const __m256i *)y[ib + 1].qs);
        const __m256i p1 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(v1, v1), _mm256_sign_epi8(y1, v1));
        const __m256i p2 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(v2, v2), _mm256_sign_epi8(y2, v2));
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(MF_H2F(y[ib].d) * MF_H2F(x[ib].d)), _mm256_cvtepi32_ps(p1), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_set1_ps(MF_H2F(y[ib + 1].d) * MF_H2F(x[ib + 1].d)), _mm256_cvtepi32_ps(p2), acc2);
    }
    float sumf = mf_hsum_f32x8(_mm256_add_ps(acc1, acc2));
    for (; ib < nb; ib++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += y[ib].qs[j] * mf_iq4_levels[x[ib].qs[j] & 0xF] + y[ib].qs[j + 16] * mf_iq4_levels[x[ib].qs[j] >> 4];
        sumf = fmaf(MF_H2F(y[ib].d) * MF_H2F(x[ib].d), (float)sumi, sumf);
    }
    *s = sumf;
}

MF_AVX512 void mf_vec_dot_iq4_xs_avx512(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_iq4_xs *x = w;
    const mf_block_q8_K *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const uint8_t *qs = x[i].qs;
        const int8_t *q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib++, qs += 16, q8 += 32) {
            const __m256i v = iq4_levels32(qs), q = _mm256_loadu_si256((const __m256i *)q8);
            const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(q, v));
            sumi = _mm256_dpwssd_epi32(sumi, p, _mm256_set1_epi16((short)mf_iq4_xs_scale(&x[i], ib)));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(MF_H2F(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = mf_hsum_f32x8(acc);
}
