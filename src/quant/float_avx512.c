/* quant: the AVX-512 tiles of F16 and BF16 weights (the tile contract is in quant.h).
 *
 * F16: each output in mf_vec_dot_f16_avx2's order exactly (llama.cpp's ggml_vec_dot_f16: four 8-lane fma
 * chains over k in steps of 32, then reduce4), with two of the chains in one 512-bit register: 16
 * consecutive halves convert to exactly the lanes of chain 0 (elements k..k+7) and chain 1 (k+8..k+15),
 * so one 512-bit fma advances both by the element the AVX2 kernel would, and a second register holds
 * chains 2 and 3.  The reduction adds the same pairs: P + Q is (c0 + c2 | c1 + c3), its two halves summed
 * are reduce4's s0 + s1.  The AVX2 vec_dot converts a weight and an activation block for every pair; a
 * 4 x 2 tile converts each weight block once for two activations and each activation block once for four
 * rows, with 16 registers of chains in flight (llama.cpp prefill: 2.5x minfer's per-pair loop before). */
#include "quant/quant_x86.h"

static inline MF_AVX512 __m512 f16x16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

/* reduce4 (dot_avx2.c) of the packed chains p = (c0 | c1), q = (c2 | c3) */
static inline MF_AVX512 float reduce_packed(__m512 p, __m512 q) {
    const __m512 s = _mm512_add_ps(p, q);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1));
    const __m256 s01 = _mm256_add_ps(_mm512_castps512_ps256(s), hi);
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s01), _mm256_extractf128_ps(s01, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

/* 4 weight rows x TA activations, n % 32 == 0.  The four rows are four read streams a few KiB apart: each
 * is prefetched 2 KiB ahead (measured for the same pattern in the BF16 tile, tile_avx2.c). */
#define F16_TILE_SHAPE(NAME, TA)                                                                                  \
    static inline MF_AVX512 void NAME(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, const void *a, \
                                      size_t a_stride) {                                                          \
        const uint16_t *x[4], *y[TA];                                                                             \
        __m512 p[4][TA], q[4][TA];                                                                                \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) x[i] = (const uint16_t *)((const char *)w + i * w_stride); \
        _Pragma("GCC unroll 2") for (int j = 0; j < TA; j++) y[j] = (const uint16_t *)((const char *)a + j * a_stride); \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) _Pragma("GCC unroll 2") for (int j = 0; j < TA; j++) { \
            p[i][j] = _mm512_setzero_ps();                                                                        \
            q[i][j] = _mm512_setzero_ps();                                                                        \
        }                                                                                                         \
        for (int64_t k = 0; k < n; k += 32) {                                                                     \
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) _mm_prefetch((const char *)(x[i] + k) + 2048, _MM_HINT_T0); \
            __m512 y0[TA], y1[TA];                                                                                \
            _Pragma("GCC unroll 2") for (int j = 0; j < TA; j++) {                                                \
                y0[j] = f16x16(y[j] + k);                                                                         \
                y1[j] = f16x16(y[j] + k + 16);                                                                    \
            }                                                                                                     \
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {                                                 \
                const __m512 x0 = f16x16(x[i] + k), x1 = f16x16(x[i] + k + 16);                                   \
                _Pragma("GCC unroll 2") for (int j = 0; j < TA; j++) {                                            \
                    p[i][j] = _mm512_fmadd_ps(x0, y0[j], p[i][j]);                                                \
                    q[i][j] = _mm512_fmadd_ps(x1, y1[j], q[i][j]);                                                \
                }                                                                                                 \
            }                                                                                                     \
        }                                                                                                         \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) _Pragma("GCC unroll 2") for (int j = 0; j < TA; j++) \
            s[i * ldc + j] = reduce_packed(p[i][j], q[i][j]);                                                     \
    }
F16_TILE_SHAPE(f16_tile_4x2, 2)
F16_TILE_SHAPE(f16_tile_4x1, 1)

/* One activation (decode) goes to vec_dot row by row: a single forward read of the matrix, which the
 * hardware prefetchers follow (as fast as the memory there); so do lengths vec_dot ends with a tail and
 * the rows left over. */
MF_AVX512 void mf_tile_f16_avx512(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw,
                                  const void *a, size_t a_stride, int na) {
    const int i0 =
        n % 32 == 0 && na >= 2 ? mf_tile_rows_by4(f16_tile_4x2, f16_tile_4x1, n, s, ldc, w, w_stride, nw, a, a_stride, na) : 0;
    mf_tile_rest(mf_vec_dot_f16_avx2, i0, n, s, ldc, w, w_stride, nw, a, a_stride, na);
}

/* ---- BF16 ----
 * Each output in mf_vec_dot_bf16_avx2's order for n % 8 == 0 (llama.cpp's batched one: a single 8-lane
 * fma chain over k, then mf_hsum_f32x8), two outputs per 512-bit register: lanes 0-7 one chain, lanes
 * 8-15 another.  With activations (prefill) the pair is two activations against one weight row; with one
 * activation (decode) two weight rows against it.  bf16 -> f32 is the bf16 bits in the high half of a
 * dword: one masked vpermw puts word j of a 16-word source into dword j's high half and zeroes the low
 * ones, so each 16-lane operand costs one permute (a broadcast load gives it a weight block twice, a
 * 128-bit insert two rows' or two activations' blocks), where the AVX2 tile widens and shifts 8 lanes. */
static inline MF_AVX512 __m512i bf16_spread_idx(void) {
    return _mm512_set_epi16(15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0, 9, 0, 8, 0, 7, 0, 6, 0, 5, 0, 4, 0, 3, 0, 2, 0,
                            1, 0, 0, 0);
}

/* words 0..15 of v as 16 floats */
static inline MF_AVX512 __m512 bf16_spread(__m512i idx, __m512i v) {
    return _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, idx, v));
}

/* 8 bf16 at p in both halves */
static inline MF_AVX512 __m512 bf16x8_twice(__m512i idx, const uint16_t *p) {
    return bf16_spread(idx, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p)));
}

/* 8 bf16 at p in the low half, 8 at q in the high half */
static inline MF_AVX512 __m512 bf16x8_pair(__m512i idx, const uint16_t *p, const uint16_t *q) {
    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p)),
                                              _mm_loadu_si128((const __m128i *)q), 1);
    return bf16_spread(idx, _mm512_castsi256_si512(v));
}

static inline MF_AVX512 void store_pair(__m512 acc, float *lo, float *hi) {
    *lo = mf_hsum_f32x8(_mm512_castps512_ps256(acc));
    *hi = mf_hsum_f32x8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)));
}

/* 4 weight rows x 2*P activations, paired by activation */
#define BF16_TILE_ACTS(NAME, P)                                                                                   \
    static inline MF_AVX512 void NAME(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, const void *a, \
                                      size_t a_stride) {                                                          \
        const __m512i idx = bf16_spread_idx();                                                                    \
        const uint16_t *x[4], *y[2 * P];                                                                          \
        __m512 acc[4][P];                                                                                         \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) x[i] = (const uint16_t *)((const char *)w + i * w_stride); \
        _Pragma("GCC unroll 8") for (int j = 0; j < 2 * P; j++) y[j] = (const uint16_t *)((const char *)a + j * a_stride); \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) _Pragma("GCC unroll 4") for (int j = 0; j < P; j++)   \
            acc[i][j] = _mm512_setzero_ps();                                                                      \
        for (int64_t k = 0; k < n; k += 8) {                                                                      \
            __m512 yv[P];                                                                                         \
            _Pragma("GCC unroll 4") for (int j = 0; j < P; j++) yv[j] = bf16x8_pair(idx, y[2 * j] + k, y[2 * j + 1] + k); \
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {                                                 \
                const __m512 xv = bf16x8_twice(idx, x[i] + k);                                                    \
                _Pragma("GCC unroll 4") for (int j = 0; j < P; j++) acc[i][j] = _mm512_fmadd_ps(xv, yv[j], acc[i][j]); \
            }                                                                                                     \
        }                                                                                                         \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) _Pragma("GCC unroll 4") for (int j = 0; j < P; j++)   \
            store_pair(acc[i][j], &s[i * ldc + 2 * j], &s[i * ldc + 2 * j + 1]);                                  \
    }
BF16_TILE_ACTS(bf16_tile_4x8, 4)
BF16_TILE_ACTS(bf16_tile_4x4, 2)
BF16_TILE_ACTS(bf16_tile_4x2, 1)

/* 8 weight rows x 1 activation, paired by row: eight read streams, each prefetched 2 KiB ahead (the AVX2
 * tile's measured distance) */
static inline MF_AVX512 void bf16_tile_8x1(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride,
                                           const void *a) {
    const __m512i idx = bf16_spread_idx();
    const uint16_t *x[8], *y = a;
    __m512 acc[4];
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) x[i] = (const uint16_t *)((const char *)w + i * w_stride);
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) acc[i] = _mm512_setzero_ps();
    for (int64_t k = 0; k < n; k += 8) {
        if ((k & 31) == 0)
            _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) _mm_prefetch((const char *)(x[i] + k) + 2048, _MM_HINT_T0);
        const __m512 yv = bf16x8_twice(idx, y + k);
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
            acc[i] = _mm512_fmadd_ps(bf16x8_pair(idx, x[2 * i] + k, x[2 * i + 1] + k), yv, acc[i]);
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) store_pair(acc[i], &s[2 * i * ldc], &s[(2 * i + 1) * ldc]);
}

/* What these shapes leave (n % 8 != 0: vec_dot's other order; rows and activations left over) goes to the
 * AVX2 tile, which runs the same orders. */
MF_AVX512 void mf_tile_bf16_avx512(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw,
                                   const void *a, size_t a_stride, int na) {
    if (n % 8 != 0) {
        mf_tile_bf16_avx2(n, s, ldc, w, w_stride, nw, a, a_stride, na);
        return;
    }
    int i0 = 0, j0 = 0;
    if (na == 1) {
        for (; i0 + 8 <= nw; i0 += 8) bf16_tile_8x1(n, s + i0 * ldc, ldc, (const char *)w + i0 * w_stride, w_stride, a);
    } else {
        j0 = na & ~1;
        for (; i0 + 4 <= nw; i0 += 4) {
            const char *wi = (const char *)w + i0 * w_stride;
            float *si = s + i0 * ldc;
            int j = 0;
            for (; j + 8 <= j0; j += 8) bf16_tile_4x8(n, si + j, ldc, wi, w_stride, (const char *)a + j * a_stride, a_stride);
            if (j + 4 <= j0) {
                bf16_tile_4x4(n, si + j, ldc, wi, w_stride, (const char *)a + j * a_stride, a_stride);
                j += 4;
            }
            if (j < j0) bf16_tile_4x2(n, si + j, ldc, wi, w_stride, (const char *)a + j * a_stride, a_stride);
        }
        /* the odd activation of the rows done above */
        if (j0 < na && i0 > 0)
            mf_tile_bf16_avx2(n, s + j0, ldc, w, w_stride, i0, (const char *)a + j0 * a_stride, a_stride, na - j0);
    }
    if (i0 < nw) /* rows left over, every activation */
        mf_tile_bf16_avx2(n, s + i0 * ldc, ldc, (const char *)w + i0 * w_stride, w_stride, nw - i0, a, a_stride, na);
}
