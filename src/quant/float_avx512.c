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

#include <stdatomic.h>

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

/* One 8-element step of every output's chain in a 4 x 2P tile, activations paired (x, y, acc, idx, k in
 * scope) */
#define BF16_FMA_STEP(P)                                                                                          \
    do {                                                                                                          \
        __m512 yv[P];                                                                                             \
        _Pragma("GCC unroll 4") for (int j = 0; j < P; j++) yv[j] = bf16x8_pair(idx, y[2 * j] + k, y[2 * j + 1] + k); \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {                                                     \
            const __m512 xv = bf16x8_twice(idx, x[i] + k);                                                        \
            _Pragma("GCC unroll 4") for (int j = 0; j < P; j++) acc[i][j] = _mm512_fmadd_ps(xv, yv[j], acc[i][j]); \
        }                                                                                                         \
    } while (0)

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
            BF16_FMA_STEP(P);                                                                                     \
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

/* ---- BF16 on vdpbf16ps (AVX512_BF16: Cooper Lake, Sapphire Rapids, Zen 4) ----
 * vdpbf16ps adds two bf16 products into each f32 lane: per the instruction reference the odd word's first,
 * then the even word's, each a fused multiply-add rounded to nearest even - two steps of a lane's fma chain
 * (a product of two bf16 is exact in f32, so "fused" is the fma's own rounding).  Putting element k+l in
 * the odd word and k+8+l in the even word of dword l makes one instruction advance lane l of the 8-lane
 * chain by two steps in the chain's own order: the same bits, with half the instructions and no widening.
 * One vpermw per 16-word operand builds that order (a weight block twice, or two activations' blocks).
 * What the instruction does differently: it reads denormal inputs as zero and flushes denormal results.
 * Neither can happen when every nonzero input has a biased exponent >= 71 (|v| >= 2^-56): each product is
 * then a multiple of 2^-126, so is every rounded partial sum, which is therefore 0 or normal.  So the
 * activations are checked once a call (or once a row by the matmul, act_ok) and the weights as the
 * sub-tile reads them; where an input is below that bound, the fma kernels above run instead (the sub-tile
 * again) - the same bits either way.  Zen 4, pp512 of a Qwen2.5-0.5B BF16: see docs/PERFORMANCE.md
 * (seventeenth and eighteenth sessions). */
#define MF_AVX512BF16 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16")))

/* the word order above: out dword l = (low: in word l + 8, high: in word l), per 16-word half; `twice`
 * takes words 0-15 into both halves, `pair` words 0-15 into the low half and 16-31 into the high one */
static const uint16_t k_dp_idx_twice[32] = {8, 0, 9, 1, 10, 2, 11, 3, 12, 4, 13, 5, 14, 6, 15, 7,
                                            8, 0, 9, 1, 10, 2, 11, 3, 12, 4, 13, 5, 14, 6, 15, 7};
static const uint16_t k_dp_idx_pair[32] = {8,  0,  9,  1,  10, 2,  11, 3,  12, 4,  13, 5,  14, 6,  15, 7,
                                           24, 16, 25, 17, 26, 18, 27, 19, 28, 20, 29, 21, 30, 22, 31, 23};

/* Words whose |bf16| is nonzero and below 2^-56 (biased exponent < 71): 2v drops the sign, 2v - 2 sends
 * zero to 0xFFFE, so the unsigned minimum over everything read is below 2 * 0x2380 - 2 exactly when such a
 * word was read. */
#define DP_TINY_BOUND 0x46FE
static inline MF_AVX512BF16 __m512i dp_track(__m512i m, __m512i v) {
    return _mm512_min_epu16(m, _mm512_add_epi16(_mm512_add_epi16(v, v), _mm512_set1_epi16(-2)));
}
static inline MF_AVX512BF16 bool dp_tiny_seen(__m512i m) {
    return _mm512_cmplt_epu16_mask(m, _mm512_set1_epi16(DP_TINY_BOUND)) != 0;
}
static inline MF_AVX512BF16 __m256i dp_track256(__m256i m, __m256i v) {
    return _mm256_min_epu16(m, _mm256_add_epi16(_mm256_add_epi16(v, v), _mm256_set1_epi16(-2)));
}
static inline MF_AVX512BF16 bool dp_tiny_seen256(__m256i m) {
    return _mm256_cmplt_epu16_mask(m, _mm256_set1_epi16(DP_TINY_BOUND)) != 0;
}

/* whether rows [0, rows) of n bf16 words (n % 8 == 0) hold a word below the bound */
static MF_AVX512BF16 bool dp_rows_tiny(const void *p, size_t stride, int rows, int64_t n) {
    __m512i m = _mm512_set1_epi16(-1);
    for (int r = 0; r < rows; r++) {
        const uint16_t *q = (const uint16_t *)((const char *)p + r * stride);
        int64_t k = 0;
        for (; k + 32 <= n; k += 32) m = dp_track(m, _mm512_loadu_si512(q + k));
        if (k < n) m = dp_track(m, _mm512_maskz_loadu_epi16((__mmask32)((1ull << (n - k)) - 1), q + k));
    }
    return dp_tiny_seen(m);
}

/* 4 weight rows x 2*P activations, paired by activation, n % 8 == 0; false (s partly written) when an
 * input was below the bound */
#define BF16_DP_TILE_ACTS(NAME, P)                                                                                \
    static inline MF_AVX512BF16 bool NAME(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride,        \
                                          const void *a, size_t a_stride) {                                      \
        const __m512i it = _mm512_loadu_si512(k_dp_idx_twice), ip = _mm512_loadu_si512(k_dp_idx_pair);            \
        const __m512i idx = bf16_spread_idx();                                                                    \
        const uint16_t *x[4], *y[2 * P];                                                                          \
        __m512 acc[4][P];                                                                                         \
        __m256i mw = _mm256_set1_epi16(-1);                                                                       \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) x[i] = (const uint16_t *)((const char *)w + i * w_stride); \
        _Pragma("GCC unroll 8") for (int j = 0; j < 2 * P; j++) y[j] = (const uint16_t *)((const char *)a + j * a_stride); \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) _Pragma("GCC unroll 4") for (int j = 0; j < P; j++)   \
            acc[i][j] = _mm512_setzero_ps();                                                                      \
        int64_t k = 0;                                                                                            \
        for (; k + 16 <= n; k += 16) {                                                                            \
            __m512i yv[P];                                                                                        \
            _Pragma("GCC unroll 4") for (int j = 0; j < P; j++) {                                                 \
                const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(y[2 * j] + k))), \
                                                     _mm256_loadu_si256((const __m256i *)(y[2 * j + 1] + k)), 1); \
                yv[j] = _mm512_permutexvar_epi16(ip, v);                                                          \
            }                                                                                                     \
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {                                                 \
                const __m256i v = _mm256_loadu_si256((const __m256i *)(x[i] + k));                                \
                const __m512i xv = _mm512_permutexvar_epi16(it, _mm512_castsi256_si512(v));                       \
                mw = dp_track256(mw, v);                                                                          \
                _Pragma("GCC unroll 4") for (int j = 0; j < P; j++)                                               \
                    acc[i][j] = _mm512_dpbf16_ps(acc[i][j], (__m512bh)xv, (__m512bh)yv[j]);                       \
            }                                                                                                     \
        }                                                                                                         \
        if (k < n) { /* the chain's last 8-element step: one fma, as the kernels above */                         \
            BF16_FMA_STEP(P);                                                                                     \
        }                                                                                                         \
        if (dp_tiny_seen256(mw)) return false;                                                                    \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) _Pragma("GCC unroll 4") for (int j = 0; j < P; j++)   \
            store_pair(acc[i][j], &s[i * ldc + 2 * j], &s[i * ldc + 2 * j + 1]);                                  \
        return true;                                                                                              \
    }
BF16_DP_TILE_ACTS(bf16_dp_tile_4x8, 4)
BF16_DP_TILE_ACTS(bf16_dp_tile_4x4, 2)
BF16_DP_TILE_ACTS(bf16_dp_tile_4x2, 1)

/* whether the tile may use vdpbf16ps: the CPU has it and mf_bf16_set_dp left it on (-1: not asked yet) */
static _Atomic int g_dp = -1;

void mf_bf16_set_dp(bool on) {
    atomic_store_explicit(&g_dp, on ? -1 : 0, memory_order_relaxed);
}

static bool bf16_dp(void) {
    int d = atomic_load_explicit(&g_dp, memory_order_relaxed);
    if (d < 0) {
        d = mf_cpu_has_avx512bf16();
        atomic_store_explicit(&g_dp, d, memory_order_relaxed); /* every racer stores the same */
    }
    return d;
}

/* 4 rows x 2*P activations: on vdpbf16ps where the CPU has it and the inputs allow, else the fma kernel */
#define BF16_SUBTILE(DP, FMA)                                                                                  \
    do {                                                                                                          \
        if (!dp || !DP(n, si + j, ldc, wi, w_stride, (const char *)a + j * a_stride, a_stride))                   \
            FMA(n, si + j, ldc, wi, w_stride, (const char *)a + j * a_stride, a_stride);                          \
    } while (0)

/* What these shapes leave (n % 8 != 0: vec_dot's other order; rows and activations left over) goes to the
 * AVX2 tile, which runs the same orders.  A batch's sub-tiles run on vdpbf16ps where `dp` (the CPU has it
 * and the activations passed the check); decode stays on the fma tile, bound by reads. */
static inline __attribute__((always_inline)) MF_AVX512 void bf16_tile(int64_t n, float *s, size_t ldc, const void *w,
                                                                      size_t w_stride, int nw, const void *a,
                                                                      size_t a_stride, int na, bool dp) {
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
            for (; j + 8 <= j0; j += 8) BF16_SUBTILE(bf16_dp_tile_4x8, bf16_tile_4x8);
            if (j + 4 <= j0) {
                BF16_SUBTILE(bf16_dp_tile_4x4, bf16_tile_4x4);
                j += 4;
            }
            if (j < j0) BF16_SUBTILE(bf16_dp_tile_4x2, bf16_tile_4x2);
        }
        /* the odd activation of the rows done above */
        if (j0 < na && i0 > 0)
            mf_tile_bf16_avx2(n, s + j0, ldc, w, w_stride, i0, (const char *)a + j0 * a_stride, a_stride, na - j0);
    }
    if (i0 < nw) /* rows left over, every activation */
        mf_tile_bf16_avx2(n, s + i0 * ldc, ldc, (const char *)w + i0 * w_stride, w_stride, nw - i0, a, a_stride, na);
}

/* The tile checks its activations on every call: the matmul calls it once per 8 weight rows, so a
 * matrix's activations are checked N / 8 times (pp512 of a Qwen2.5-0.5B BF16 ran ~20 % slower than with
 * no check, docs/PERFORMANCE.md eighteenth session).  The matmul therefore checks each row once as it
 * converts it (act_ok) and calls the _ok tile for rows that passed. */
MF_AVX512 void mf_tile_bf16_avx512(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw,
                                   const void *a, size_t a_stride, int na) {
    const bool dp = na >= 2 && bf16_dp() && !dp_rows_tiny(a, a_stride, na & ~1, n);
    bf16_tile(n, s, ldc, w, w_stride, nw, a, a_stride, na, dp);
}

MF_AVX512 void mf_tile_bf16_ok_avx512(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw,
                                      const void *a, size_t a_stride, int na) {
    bf16_tile(n, s, ldc, w, w_stride, nw, a, a_stride, na, na >= 2 && bf16_dp());
}

/* one converted activation row: no word the vdpbf16ps sub-tiles must not see (false without vdpbf16ps,
 * so the matmul does not scan for nothing) */
MF_AVX512 bool mf_bf16_act_ok_avx512(const void *a, int64_t n) {
    return bf16_dp() && !dp_rows_tiny(a, 0, 1, n);
}
