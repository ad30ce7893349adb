/* quant: AVX2 dot kernels of Q2_K, Q3_K, IQ4_NL and IQ4_XS.  Each is llama.cpp's AVX2 kernel operation for
 * operation (8 float lanes, one fma per block and lane, ggml's horizontal sum), so it gives the bits of the
 * plain-C reference in dot_lowbit.c, which spells out the same lanes (tests/test_quant.c checks both against
 * llama.cpp's goldens).  lowbit_avx512.c is the AVX-512 (VNNI) version, bitwise these. */
#include "quant/quant_x86.h"

#include <math.h>

/* 32-byte shuffle that spreads int16 scale 2i over the low 128-bit half and 2i + 1 over the high one */
static inline MF_AVX2 __m256i scale_shuffle(int i) {
    const __m128i lo = _mm_set1_epi16((short)(0x0100 * (4 * i + 1) + 4 * i));
    const __m128i hi = _mm_set1_epi16((short)(0x0100 * (4 * i + 3) + 4 * i + 2));
    return _mm256_set_m128i(hi, lo);
}

/* the 16 int8 scales as int16, low and high 8 repeated in both 128-bit halves */
static inline MF_AVX2 void scales16(__m128i sc8, __m256i out[2]) {
    const __m256i all = _mm256_cvtepi8_epi16(sc8);
    const __m128i l = _mm256_extracti128_si256(all, 0), h = _mm256_extracti128_si256(all, 1);
    out[0] = _mm256_set_m128i(l, l);
    out[1] = _mm256_set_m128i(h, h);
}

MF_AVX2 void mf_vec_dot_q2_K_avx2(int64_t n, float *s, const void *w, const void *a) {
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
            __m256i p[4];
            for (int l = 0; l < 4; l++, q8 += 32) {
                const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * l), m3);
                p[l] = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)q8));
                p[l] = _mm256_madd_epi16(_mm256_shuffle_epi8(sc[j], scale_shuffle(l)), p[l]);
            }
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_add_epi32(p[0], p[1]), _mm256_add_epi32(p[2], p[3])));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = mf_hsum_f32x8(acc);
}

MF_AVX2 void mf_vec_dot_q3_K_avx2(int64_t n, float *s, const void *w, const void *a) {
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
            __m256i p[4];
            for (int l = 0; l < 4; l++, q8 += 32, bit++) {
                const __m256i ql = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * l), m3);
                /* 4 where the high bit is clear (the value is ql - 4), else 0 */
                const __m256i qh = _mm256_slli_epi16(
                    _mm256_srli_epi16(_mm256_andnot_si256(hbits, _mm256_slli_epi16(mone, bit)), bit), 2);
                const __m256i q8v = _mm256_loadu_si256((const __m256i *)q8);
                p[l] = _mm256_sub_epi16(_mm256_maddubs_epi16(ql, q8v), _mm256_maddubs_epi16(qh, q8v));
                p[l] = _mm256_madd_epi16(_mm256_shuffle_epi8(sc[j], scale_shuffle(l)), p[l]);
            }
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_add_epi32(p[0], p[1]), _mm256_add_epi32(p[2], p[3])));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = mf_hsum_f32x8(acc);
}

/* 32 IQ4 indices -> their levels (low nibbles = values 0..15 in the low half) */
static inline MF_AVX2 __m256i iq4_levels32(const uint8_t *qs) {
    const __m128i lut = _mm_loadu_si128((const __m128i *)mf_iq4_levels), m4 = _mm_set1_epi8(0xF);
    const __m128i b = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_set_m128i(_mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(b, 4), m4)),
                            _mm_shuffle_epi8(lut, _mm_and_si128(b, m4)));
}

/* ggml's mul_add_epi8: |x| times y with x's sign, pairs summed to int16 */
static inline MF_AVX2 __m256i mul_add_epi8(__m256i x, __m256i y) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

MF_AVX2 void mf_vec_dot_iq4_nl_avx2(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_iq4_nl *x = w;
    const mf_block_q8_0 *y = a;
    const int64_t nb = n / MF_QK4_NL;
    const __m256i one = _mm256_set1_epi16(1);
    __m256 acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps();
    int64_t ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        const __m256i p1 = _mm256_madd_epi16(
            mul_add_epi8(iq4_levels32(x[ib].qs), _mm256_loadu_si256((const __m256i *)y[ib].qs)), one);
        const __m256i p2 = _mm256_madd_epi16(
            mul_add_epi8(iq4_levels32(x[ib + 1].qs), _mm256_loadu_si256((const __m256i *)y[ib + 1].qs)), one);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(MF_H2F(y[ib].d) * MF_H2F(x[ib].d)), _mm256_cvtepi32_ps(p1), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_set1_ps(MF_H2F(y[ib + 1].d) * MF_H2F(x[ib + 1].d)), _mm256_cvtepi32_ps(p2), acc2);
    }
    float sumf = mf_hsum_f32x8(_mm256_add_ps(acc1, acc2));
    for (; ib < nb; ib++) { /* ggml's scalar tail */
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += y[ib].qs[j] * mf_iq4_levels[x[ib].qs[j] & 0xF] + y[ib].qs[j + 16] * mf_iq4_levels[x[ib].qs[j] >> 4];
        sumf = fmaf(MF_H2F(y[ib].d) * MF_H2F(x[ib].d), (float)sumi, sumf);
    }
    *s = sumf;
}

MF_AVX2 void mf_vec_dot_iq4_xs_avx2(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_iq4_xs *x = w;
    const mf_block_q8_K *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const uint8_t *qs = x[i].qs;
        const int8_t *q8 = y[i].qs;
        __m256i sumi1 = _mm256_setzero_si256(), sumi2 = _mm256_setzero_si256();
        for (int ib = 0; ib < 8; ib += 2, qs += 32, q8 += 64) {
            const __m256i p1 = mul_add_epi8(iq4_levels32(qs), _mm256_loadu_si256((const __m256i *)q8));
            const __m256i p2 = mul_add_epi8(iq4_levels32(qs + 16), _mm256_loadu_si256((const __m256i *)(q8 + 32)));
            sumi1 = _mm256_add_epi32(_mm256_madd_epi16(p1, _mm256_set1_epi16((short)mf_iq4_xs_scale(&x[i], ib))), sumi1);
            sumi2 = _mm256_add_epi32(_mm256_madd_epi16(p2, _mm256_set1_epi16((short)mf_iq4_xs_scale(&x[i], ib + 1))), sumi2);
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(MF_H2F(x[i].d) * y[i].d), _mm256_cvtepi32_ps(_mm256_add_epi32(sumi1, sumi2)), acc);
    }
    *s = mf_hsum_f32x8(acc);
}

/* ---- 2 weight rows x 2 activation rows (prefill) ----
 * Each pair gets vec_dot's float work exactly (one fma per super-block with the same scalar, the same
 * horizontal sum); the int32 lanes fed to it are the same integers (integer sums are exact in any order),
 * so every result is bitwise the vec_dot above (test_quant test_tile_bitwise).  What is shared: a weight
 * row's unpacked quants and scales serve both activation rows, an activation load both weight rows. */
#define LB_TW 2
#define LB_TA 2

/* The exported tile: the 2 x 2 kernel, or the table's own vec_dot per pair for any other shape (decode's
 * 2 x 1, a batch's odd last row), AVX2's or AVX-512's (the AVX-512 table takes these tiles too). */
#define LB_TILE(T, ISA)                                                                                            \
    MF_AVX2 void mf_tile_##T##_##ISA(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw,       \
                                     const void *a, size_t a_stride, int na) {                                   \
        if (nw == LB_TW && na == LB_TA) {                                                                         \
            lb_##T##_2x2(n, s, ldc, w, w_stride, a, a_stride);                                                    \
            return;                                                                                               \
        }                                                                                                         \
        for (int i = 0; i < nw; i++)                                                                              \
            for (int j = 0; j < na; j++)                                                                          \
                mf_vec_dot_##T##_##ISA(n, &s[i * ldc + j], (const char *)w + i * w_stride,                        \
                                       (const char *)a + j * a_stride);                                           \
    }

/* A K-quant block's closing fma per output: acc += (d_y * d_x) * its exact int32 sums, as vec_dot's */
static inline MF_AVX2 void lb_k_block_fma(__m256 acc[LB_TW][LB_TA], __m256i sumi[LB_TW][LB_TA], float dx0, float dx1,
                                          float dy0, float dy1) {
    const float dx[LB_TW] = {dx0, dx1}, dy[LB_TA] = {dy0, dy1};
    _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++) _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++)
        acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(dy[j] * dx[i]), _mm256_cvtepi32_ps(sumi[i][j]), acc[i][j]);
}

/* each output's lanes summed as vec_dot's hsum */
static inline MF_AVX2 void lb_store(float *s, size_t ldc, __m256 acc[LB_TW][LB_TA]) {
    _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++) _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++)
        s[i * ldc + j] = mf_hsum_f32x8(acc[i][j]);
}

/* Q2_K: per block and output the min term's fma, then the quants' (vec_dot's two fmas in its order) */
static inline MF_AVX2 void lb_q2_K_2x2(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, const void *a,
                                     size_t a_stride) {
    const mf_block_q2_K *x[LB_TW] = {w, (const mf_block_q2_K *)((const char *)w + w_stride)};
    const mf_block_q8_K *y[LB_TA] = {a, (const mf_block_q8_K *)((const char *)a + a_stride)};
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0xF);
    __m256 acc[LB_TW][LB_TA];
    _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++) _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++)
        acc[i][j] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / MF_QK_K; ib++) {
        __m256i sc[LB_TW][2], sumi[LB_TW][LB_TA];
        _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++) {
            const __m128i ms = _mm_loadu_si128((const __m128i *)x[i][ib].scales);
            const __m256i mins16 = _mm256_cvtepi8_epi16(_mm_and_si128(_mm_srli_epi16(ms, 4), m4));
            const float dmin = MF_H2F(x[i][ib].dmin);
            _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++) {
                const __m256i prod = _mm256_madd_epi16(mins16, _mm256_loadu_si256((const __m256i *)y[j][ib].bsums));
                acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(-y[j][ib].d * dmin), _mm256_cvtepi32_ps(prod), acc[i][j]);
                sumi[i][j] = _mm256_setzero_si256();
            }
            scales16(_mm_and_si128(ms, m4), sc[i]);
        }
        for (int h = 0; h < 2; h++) {
            __m256i bits[LB_TW];
            _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++)
                bits[i] = _mm256_loadu_si256((const __m256i *)(x[i][ib].qs + 32 * h));
            for (int l = 0; l < 4; l++) {
                __m256i q8v[LB_TA];
                _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++)
                    q8v[j] = _mm256_loadu_si256((const __m256i *)(y[j][ib].qs + 128 * h + 32 * l));
                _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++) {
                    const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits[i], 2 * l), m3);
                    const __m256i scl = _mm256_shuffle_epi8(sc[i][h], scale_shuffle(l));
                    _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++)
                        sumi[i][j] = _mm256_add_epi32(sumi[i][j], _mm256_madd_epi16(scl, _mm256_maddubs_epi16(q, q8v[j])));
                }
            }
        }
        lb_k_block_fma(acc, sumi, MF_H2F(x[0][ib].d), MF_H2F(x[1][ib].d), y[0][ib].d, y[1][ib].d);
    }
    lb_store(s, ldc, acc);
}

static inline MF_AVX2 void lb_q3_K_2x2(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, const void *a,
                                     size_t a_stride) {
    const mf_block_q3_K *x[LB_TW] = {w, (const mf_block_q3_K *)((const char *)w + w_stride)};
    const mf_block_q8_K *y[LB_TA] = {a, (const mf_block_q8_K *)((const char *)a + a_stride)};
    const __m256i m3 = _mm256_set1_epi8(3), mone = _mm256_set1_epi8(1);
    __m256 acc[LB_TW][LB_TA];
    _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++) _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++)
        acc[i][j] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / MF_QK_K; ib++) {
        __m256i sc[LB_TW][2], hbits[LB_TW], sumi[LB_TW][LB_TA];
        _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++) {
            int8_t sc8[16];
            mf_q3_K_scales(x[i][ib].scales, sc8);
            scales16(_mm_loadu_si128((const __m128i *)sc8), sc[i]);
            hbits[i] = _mm256_loadu_si256((const __m256i *)x[i][ib].hmask);
            _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++) sumi[i][j] = _mm256_setzero_si256();
        }
        for (int h = 0; h < 2; h++) {
            __m256i bits[LB_TW];
            _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++)
                bits[i] = _mm256_loadu_si256((const __m256i *)(x[i][ib].qs + 32 * h));
            for (int l = 0; l < 4; l++) {
                const int bit = 4 * h + l;
                __m256i q8v[LB_TA];
                _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++)
                    q8v[j] = _mm256_loadu_si256((const __m256i *)(y[j][ib].qs + 128 * h + 32 * l));
                _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++) {
                    const __m256i ql = _mm256_and_si256(_mm256_srli_epi16(bits[i], 2 * l), m3);
                    const __m256i qh = _mm256_slli_epi16(
                        _mm256_srli_epi16(_mm256_andnot_si256(hbits[i], _mm256_slli_epi16(mone, bit)), bit), 2);
                    const __m256i scl = _mm256_shuffle_epi8(sc[i][h], scale_shuffle(l));
                    _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++) {
                        const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(ql, q8v[j]), _mm256_maddubs_epi16(qh, q8v[j]));
                        sumi[i][j] = _mm256_add_epi32(sumi[i][j], _mm256_madd_epi16(scl, p));
                    }
                }
            }
        }
        lb_k_block_fma(acc, sumi, MF_H2F(x[0][ib].d), MF_H2F(x[1][ib].d), y[0][ib].d, y[1][ib].d);
    }
    lb_store(s, ldc, acc);
}

static inline MF_AVX2 void lb_iq4_xs_2x2(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, const void *a,
                                     size_t a_stride) {
    const mf_block_iq4_xs *x[LB_TW] = {w, (const mf_block_iq4_xs *)((const char *)w + w_stride)};
    const mf_block_q8_K *y[LB_TA] = {a, (const mf_block_q8_K *)((const char *)a + a_stride)};
    __m256 acc[LB_TW][LB_TA];
    _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++) _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++)
        acc[i][j] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / MF_QK_K; ib++) {
        __m256i sumi[LB_TW][LB_TA];
        _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++) _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++)
            sumi[i][j] = _mm256_setzero_si256();
        for (int k = 0; k < 4; k++) {
            __m256i q8a[LB_TA], q8b[LB_TA];
            _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++) {
                q8a[j] = _mm256_loadu_si256((const __m256i *)(y[j][ib].qs + 64 * k));
                q8b[j] = _mm256_loadu_si256((const __m256i *)(y[j][ib].qs + 64 * k + 32));
            }
            _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++) {
                const __m256i v1 = iq4_levels32(x[i][ib].qs + 32 * k), v2 = iq4_levels32(x[i][ib].qs + 32 * k + 16);
                const __m256i a1 = _mm256_sign_epi8(v1, v1), a2 = _mm256_sign_epi8(v2, v2);
                const __m256i s1 = _mm256_set1_epi16((short)mf_iq4_xs_scale(&x[i][ib], 2 * k));
                const __m256i s2 = _mm256_set1_epi16((short)mf_iq4_xs_scale(&x[i][ib], 2 * k + 1));
                _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++) {
                    const __m256i p1 = _mm256_maddubs_epi16(a1, _mm256_sign_epi8(q8a[j], v1));
                    const __m256i p2 = _mm256_maddubs_epi16(a2, _mm256_sign_epi8(q8b[j], v2));
                    sumi[i][j] = _mm256_add_epi32(sumi[i][j],
                                                  _mm256_add_epi32(_mm256_madd_epi16(p1, s1), _mm256_madd_epi16(p2, s2)));
                }
            }
        }
        _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++) {
            const float dx = MF_H2F(x[i][ib].d);
            _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++)
                acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(dx * y[j][ib].d), _mm256_cvtepi32_ps(sumi[i][j]), acc[i][j]);
        }
    }
    lb_store(s, ldc, acc);
}

static inline MF_AVX2 void lb_iq4_nl_2x2(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, const void *a,
                                     size_t a_stride) {
    const mf_block_iq4_nl *x[LB_TW] = {w, (const mf_block_iq4_nl *)((const char *)w + w_stride)};
    const mf_block_q8_0 *y[LB_TA] = {a, (const mf_block_q8_0 *)((const char *)a + a_stride)};
    const int64_t nb = n / MF_QK4_NL;
    const __m256i one = _mm256_set1_epi16(1);
    __m256 acc[LB_TW][LB_TA][2]; /* vec_dot's two chains: even and odd blocks */
    _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++) _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++)
        acc[i][j][0] = acc[i][j][1] = _mm256_setzero_ps();
    int64_t ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        _Pragma("GCC unroll 2") for (int e = 0; e < 2; e++) {
            __m256i q8[LB_TA];
            float dy[LB_TA];
            _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++) {
                q8[j] = _mm256_loadu_si256((const __m256i *)y[j][ib + e].qs);
                dy[j] = MF_H2F(y[j][ib + e].d);
            }
            _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++) {
                const __m256i v = iq4_levels32(x[i][ib + e].qs), av = _mm256_sign_epi8(v, v);
                const float dx = MF_H2F(x[i][ib + e].d);
                _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++) {
                    const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_sign_epi8(q8[j], v)), one);
                    acc[i][j][e] = _mm256_fmadd_ps(_mm256_set1_ps(dy[j] * dx), _mm256_cvtepi32_ps(p), acc[i][j][e]);
                }
            }
        }
    }
    _Pragma("GCC unroll 2") for (int i = 0; i < LB_TW; i++) _Pragma("GCC unroll 2") for (int j = 0; j < LB_TA; j++) {
        float sumf = mf_hsum_f32x8(_mm256_add_ps(acc[i][j][0], acc[i][j][1]));
        for (int64_t t = ib; t < nb; t++) { /* ggml's scalar tail, as vec_dot */
            int sumi = 0;
            for (int k = 0; k < 16; k++)
                sumi += y[j][t].qs[k] * mf_iq4_levels[x[i][t].qs[k] & 0xF] +
                        y[j][t].qs[k + 16] * mf_iq4_levels[x[i][t].qs[k] >> 4];
            sumf = fmaf(MF_H2F(y[j][t].d) * MF_H2F(x[i][t].d), (float)sumi, sumf);
        }
        s[i * ldc + j] = sumf;
    }
}

LB_TILE(q2_K, avx2)
LB_TILE(q2_K, avx512)
LB_TILE(q3_K, avx2)
LB_TILE(q3_K, avx512)
LB_TILE(iq4_nl, avx2)
LB_TILE(iq4_nl, avx512)
LB_TILE(iq4_xs, avx2)
LB_TILE(iq4_xs, avx512)
