/* quant: AVX2 tile kernels (see tile_x86.h and the tile contract in quant.h). */
#include "quant/tile_x86.h"

/* keep clang from fusing scalar a*b+c (the Q5_K min sums): vec_dot does not, and bits must agree */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

MF_DEFINE_Q8_TILE(mf_tile_q4_0_avx2, MF_AVX2, mf_block_q4_0, mf_q4_0_nibbles, mf_mulsum_u4_avx2, mf_vec_dot_q4_0_avx2)
MF_DEFINE_Q8_TILE(mf_tile_q5_0_avx2, MF_AVX2, mf_block_q5_0, mf_q5_0_bytes, mf_mulsum_i8_avx2, mf_vec_dot_q5_0_avx2)
MF_DEFINE_Q8_TILE(mf_tile_q8_0_avx2, MF_AVX2, mf_block_q8_0, mf_q8_0_bytes, mf_mulsum_i8_avx2, mf_vec_dot_q8_0_avx2)
MF_DEFINE_Q8_TILE_MIN(mf_tile_q4_1_avx2, MF_AVX2, mf_block_q4_1, mf_block_q8_1, mf_q4_1_ubytes, mf_mulsum_u8_avx2,
                      MF_Q8_1_MIN, MF_Q8_1_OUT, mf_vec_dot_q4_1_avx2)
MF_DEFINE_Q8_TILE_MIN(mf_tile_q5_1_avx2, MF_AVX2, mf_block_q5_1, mf_block_q8_1, mf_q5_1_ubytes, mf_mulsum_u8_avx2,
                      MF_Q8_1_MIN, MF_Q8_1_OUT, mf_vec_dot_q5_1_avx2)

/* ---- K formats: 2 weight rows x 2 activation rows ----
 * Per pair the float work is vec_dot's exactly (acc / acc_m fed once per super-block with the same
 * scalars, the same final sums); the int32 lanes fed to the float work are the same integers (integer
 * additions are exact in any order), so every result is bitwise vec_dot's. */

#define KT_W 2
#define KT_A 2

static void tile_loop(mf_vec_dot_fn dot, int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw,
                      const void *a, size_t a_stride, int na) {
    for (int i = 0; i < nw; i++)
        for (int j = 0; j < na; j++) dot(n, &s[i * ldc + j], (const char *)w + i * w_stride, (const char *)a + j * a_stride);
}

MF_AVX2 void mf_tile_q4_K_avx2(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                               size_t a_stride, int na) {
    if (nw != KT_W || na != KT_A) {
        tile_loop(mf_vec_dot_q4_K_avx2, n, s, ldc, w, w_stride, nw, a, a_stride, na);
        return;
    }
    const mf_block_q4_K *x[KT_W] = {w, (const mf_block_q4_K *)((const char *)w + w_stride)};
    const mf_block_q8_K *y[KT_A] = {a, (const mf_block_q8_K *)((const char *)a + a_stride)};
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 acc[KT_W][KT_A];
    __m128 acc_m[KT_W][KT_A];
    _Pragma("GCC unroll 2") for (int i = 0; i < KT_W; i++) _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++) {
        acc[i][j] = _mm256_setzero_ps();
        acc_m[i][j] = _mm_setzero_ps();
    }
    for (int64_t ib = 0; ib < n / MF_QK_K; ib++) {
        uint32_t utmp[KT_W][4];
        __m256i sumi[KT_W][KT_A];
        _Pragma("GCC unroll 2") for (int i = 0; i < KT_W; i++) {
            mf_k4_scales_mins(x[i][ib].scales, utmp[i]);
            const __m256i ms = _mm256_cvtepu8_epi16(
                _mm_set_epi32((int)utmp[i][3], (int)utmp[i][2], (int)utmp[i][1], (int)utmp[i][0]));
            const float dxm = MF_H2F(x[i][ib].dmin);
            _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++) {
                const float dmin = -y[j][ib].d * dxm;
                acc_m[i][j] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mf_k4_min_prod(ms, y[j][ib].bsums)), acc_m[i][j]);
                sumi[i][j] = _mm256_setzero_si256();
            }
        }
        for (int k = 0; k < 4; k++) {
            const __m256i q8l[KT_A] = {_mm256_loadu_si256((const __m256i *)(y[0][ib].qs + 64 * k)),
                                       _mm256_loadu_si256((const __m256i *)(y[1][ib].qs + 64 * k))};
            const __m256i q8h[KT_A] = {_mm256_loadu_si256((const __m256i *)(y[0][ib].qs + 64 * k + 32)),
                                       _mm256_loadu_si256((const __m256i *)(y[1][ib].qs + 64 * k + 32))};
            _Pragma("GCC unroll 2") for (int i = 0; i < KT_W; i++) {
                const uint8_t *sc = (const uint8_t *)utmp[i];
                const __m256i q4bits = _mm256_loadu_si256((const __m256i *)(x[i][ib].qs + 32 * k));
                const __m256i q4l = _mm256_and_si256(q4bits, m4);
                const __m256i q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
                const __m256i scl = _mm256_set1_epi16(sc[2 * k]), sch = _mm256_set1_epi16(sc[2 * k + 1]);
                _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++) {
                    const __m256i pl = _mm256_madd_epi16(scl, _mm256_maddubs_epi16(q4l, q8l[j]));
                    const __m256i ph = _mm256_madd_epi16(sch, _mm256_maddubs_epi16(q4h, q8h[j]));
                    sumi[i][j] = _mm256_add_epi32(sumi[i][j], _mm256_add_epi32(pl, ph));
                }
            }
        }
        _Pragma("GCC unroll 2") for (int i = 0; i < KT_W; i++) {
            const float dx = MF_H2F(x[i][ib].d);
            _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++) {
                const float d = y[j][ib].d * dx;
                acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[i][j]), acc[i][j]);
            }
        }
    }
    _Pragma("GCC unroll 2") for (int i = 0; i < KT_W; i++) _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++) {
        __m128 m = acc_m[i][j];
        m = _mm_add_ps(m, _mm_movehl_ps(m, m));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        s[i * ldc + j] = mf_hsum_f32x8(acc[i][j]) + _mm_cvtss_f32(m);
    }
}

MF_AVX2 void mf_tile_q6_K_avx2(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                               size_t a_stride, int na) {
    if (nw != KT_W || na != KT_A) {
        tile_loop(mf_vec_dot_q6_K_avx2, n, s, ldc, w, w_stride, nw, a, a_stride, na);
        return;
    }
    const mf_block_q6_K *x[KT_W] = {w, (const mf_block_q6_K *)((const char *)w + w_stride)};
    const mf_block_q8_K *y[KT_A] = {a, (const mf_block_q8_K *)((const char *)a + a_stride)};
    const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi8(15);
    __m256 acc[KT_W][KT_A];
    _Pragma("GCC unroll 2") for (int i = 0; i < KT_W; i++) _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++)
        acc[i][j] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / MF_QK_K; ib++) {
        __m128i scales[KT_W];
        __m256i sumi[KT_W][KT_A];
        _Pragma("GCC unroll 2") for (int i = 0; i < KT_W; i++) {
            scales[i] = _mm_loadu_si128((const __m128i *)x[i][ib].scales);
            const __m256i sc16 = _mm256_cvtepi8_epi16(scales[i]);
            /* start from -32 * sum(scale * q8): vec_dot subtracts it at the end, same integer */
            _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++) sumi[i][j] = _mm256_sub_epi32(
                _mm256_setzero_si256(),
                _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[j][ib].bsums), sc16), 5));
        }
        for (int h = 0; h < 2; h++) {
            for (int k = 0; k < 4; k++) {
                const int is = 4 * h + k;
                __m256i q8[KT_A];
                _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++) q8[j] =
                    _mm256_loadu_si256((const __m256i *)(y[j][ib].qs + 128 * h + 32 * k));
                _Pragma("GCC unroll 2") for (int i = 0; i < KT_W; i++) {
                    /* quant group k of this half: low/high nibble of ql[0..31] or ql[32..63], bits 2k of qh */
                    const __m256i b = _mm256_loadu_si256((const __m256i *)(x[i][ib].ql + 64 * h + 32 * (k & 1)));
                    const __m256i bh = _mm256_loadu_si256((const __m256i *)(x[i][ib].qh + 32 * h));
                    const __m256i lo = k < 2 ? _mm256_and_si256(b, m15) : _mm256_and_si256(_mm256_srli_epi16(b, 4), m15);
                    const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2 * k), m3), 4);
                    const __m256i q = _mm256_or_si256(lo, hi);
                    const __m128i sc = _mm_shuffle_epi8(scales[i], _mm_loadu_si128((const __m128i *)mf_q6_shuf + is));
                    const __m256i sc16 = _mm256_cvtepi8_epi16(sc);
                    _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++) sumi[i][j] =
                        _mm256_add_epi32(sumi[i][j], _mm256_madd_epi16(sc16, _mm256_maddubs_epi16(q, q8[j])));
                }
            }
        }
        _Pragma("GCC unroll 2") for (int i = 0; i < KT_W; i++) {
            const float dx = MF_H2F(x[i][ib].d);
            _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++) {
                const float d = y[j][ib].d * dx;
                acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[i][j]), acc[i][j]);
            }
        }
    }
    _Pragma("GCC unroll 2") for (int i = 0; i < KT_W; i++) _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++)
        s[i * ldc + j] = mf_hsum_f32x8(acc[i][j]);
}

MF_AVX2 void mf_tile_q5_K_avx2(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                               size_t a_stride, int na) {
    if (nw != KT_W || na != KT_A) {
        tile_loop(mf_vec_dot_q5_K_avx2, n, s, ldc, w, w_stride, nw, a, a_stride, na);
        return;
    }
    const mf_block_q5_K *x[KT_W] = {w, (const mf_block_q5_K *)((const char *)w + w_stride)};
    const mf_block_q8_K *y[KT_A] = {a, (const mf_block_q8_K *)((const char *)a + a_stride)};
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    __m256 acc[KT_W][KT_A];
    float summs[KT_W][KT_A];
    _Pragma("GCC unroll 2") for (int i = 0; i < KT_W; i++) _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++) {
        acc[i][j] = _mm256_setzero_ps();
        summs[i][j] = 0.f;
    }
    for (int64_t ib = 0; ib < n / MF_QK_K; ib++) {
        uint32_t utmp[KT_W][4];
        __m256i sumi[KT_W][KT_A];
        _Pragma("GCC unroll 2") for (int i = 0; i < KT_W; i++) {
            mf_k4_scales_mins(x[i][ib].scales, utmp[i]);
            const __m256i ms = _mm256_cvtepu8_epi16(
                _mm_set_epi32((int)utmp[i][3], (int)utmp[i][2], (int)utmp[i][1], (int)utmp[i][0]));
            const float dxm = MF_H2F(x[i][ib].dmin);
            _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++) {
                const float dmin = -y[j][ib].d * dxm;
                const __m128i prod = mf_k4_min_prod(ms, y[j][ib].bsums);
                const __m128i hs = _mm_hadd_epi32(_mm_hadd_epi32(prod, _mm_setzero_si128()), _mm_setzero_si128());
                summs[i][j] = __builtin_fmaf(dmin, (float)_mm_extract_epi32(hs, 0), summs[i][j]);
                sumi[i][j] = _mm256_setzero_si256();
            }
        }
        for (int k = 0; k < 4; k++) {
            const __m256i q8l[KT_A] = {_mm256_loadu_si256((const __m256i *)(y[0][ib].qs + 64 * k)),
                                       _mm256_loadu_si256((const __m256i *)(y[1][ib].qs + 64 * k))};
            const __m256i q8h[KT_A] = {_mm256_loadu_si256((const __m256i *)(y[0][ib].qs + 64 * k + 32)),
                                       _mm256_loadu_si256((const __m256i *)(y[1][ib].qs + 64 * k + 32))};
            _Pragma("GCC unroll 2") for (int i = 0; i < KT_W; i++) {
                const uint8_t *sc = (const uint8_t *)utmp[i];
                const __m256i q5bits = _mm256_loadu_si256((const __m256i *)(x[i][ib].qs + 32 * k));
                const __m256i hbits = _mm256_loadu_si256((const __m256i *)x[i][ib].qh);
                const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * k), one);
                const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * k + 1), one);
                const __m256i q5l = _mm256_add_epi8(_mm256_and_si256(q5bits, m4), _mm256_slli_epi16(h0, 4));
                const __m256i q5h = _mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(q5bits, 4), m4), _mm256_slli_epi16(h1, 4));
                const __m256i scl = _mm256_set1_epi16(sc[2 * k]), sch = _mm256_set1_epi16(sc[2 * k + 1]);
                _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++) {
                    const __m256i pl = _mm256_madd_epi16(scl, _mm256_maddubs_epi16(q5l, q8l[j]));
                    const __m256i ph = _mm256_madd_epi16(sch, _mm256_maddubs_epi16(q5h, q8h[j]));
                    sumi[i][j] = _mm256_add_epi32(sumi[i][j], _mm256_add_epi32(pl, ph));
                }
            }
        }
        _Pragma("GCC unroll 2") for (int i = 0; i < KT_W; i++) {
            const float dx = MF_H2F(x[i][ib].d);
            _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++) {
                const float d = y[j][ib].d * dx;
                acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[i][j]), acc[i][j]);
            }
        }
    }
    _Pragma("GCC unroll 2") for (int i = 0; i < KT_W; i++) _Pragma("GCC unroll 2") for (int j = 0; j < KT_A; j++)
        s[i * ldc + j] = mf_hsum_f32x8(acc[i][j]) + summs[i][j];
}

/* BF16: each output in vec_dot's batched order (one 8-lane fma chain over k, then hsum; dot_avx2.c), with
 * 4 x TA chains in flight so the fma latency overlaps as in tinyBLAS's own tiles; n % 8 != 0 (vec_dot's
 * other order) and the shapes left over go to vec_dot.  The four rows are four read streams a few KiB
 * apart, which the hardware prefetchers follow poorly: each is prefetched 2 KiB ahead (decode of a
 * Qwen2.5-0.5B BF16 on Zen 4, 2 threads, alternated: 33-36 t/s without, 37-38 at 512 B, 36-41 at 1 KiB,
 * 41-49 at 2 KiB, 47-51 at 4 KiB, noisier). */
static inline MF_AVX2 __m256 mf_bf16x8_tile(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

#define MF_BF16_TILE_SHAPE(NAME, TA)                                                                              \
    static inline MF_AVX2 void NAME(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, const void *a, \
                                    size_t a_stride) {                                                            \
        const uint16_t *x[4], *y[TA];                                                                             \
        __m256 acc[4][TA];                                                                                        \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) x[i] = (const uint16_t *)((const char *)w + i * w_stride); \
        _Pragma("GCC unroll 2") for (int j = 0; j < TA; j++) y[j] = (const uint16_t *)((const char *)a + j * a_stride); \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                                       \
            _Pragma("GCC unroll 2") for (int j = 0; j < TA; j++) acc[i][j] = _mm256_setzero_ps();                 \
        for (int64_t k = 0; k < n; k += 8) {                                                                      \
            if ((k & 31) == 0)                                                                                    \
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) _mm_prefetch((const char *)(x[i] + k) + 2048, _MM_HINT_T0); \
            __m256 yv[TA];                                                                                        \
            _Pragma("GCC unroll 2") for (int j = 0; j < TA; j++) yv[j] = mf_bf16x8_tile(y[j] + k);                \
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {                                                 \
                const __m256 xv = mf_bf16x8_tile(x[i] + k);                                                       \
                _Pragma("GCC unroll 2") for (int j = 0; j < TA; j++) acc[i][j] = _mm256_fmadd_ps(xv, yv[j], acc[i][j]); \
            }                                                                                                     \
        }                                                                                                         \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                                       \
            _Pragma("GCC unroll 2") for (int j = 0; j < TA; j++) s[i * ldc + j] = mf_hsum_f32x8(acc[i][j]);       \
    }
MF_BF16_TILE_SHAPE(bf16_tile_4x2, 2)
MF_BF16_TILE_SHAPE(bf16_tile_4x1, 1)

MF_AVX2 void mf_tile_bf16_avx2(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                               size_t a_stride, int na) {
    const int i0 = n % 8 == 0 ? mf_tile_rows_by4(bf16_tile_4x2, bf16_tile_4x1, n, s, ldc, w, w_stride, nw, a, a_stride, na) : 0;
    mf_tile_rest(mf_vec_dot_bf16_avx2, i0, n, s, ldc, w, w_stride, nw, a, a_stride, na);
}
