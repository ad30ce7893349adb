/* Tile kernels for the Q8_0 family (Q4_0, Q5_0, Q8_0 weights x Q8_0 activations) and for Q4_1 / Q5_1 x Q8_1
 * (their min term in one float per pair, as their vec_dot), written once as a macro and instantiated per
 * ISA (tile_avx2.c: maddubs, tile_avx512.c: VNNI).  Shape 4 weight rows x
 * 4 activation rows (4 x 2 for 2-3 rows).  Each pair (i, j) runs exactly vec_dot's sequence: acc_ij = fma(d_i*d_j,
 * mulsum(q_i, q_j), acc_ij) per block, then the same horizontal sum, so results are bitwise vec_dot's.
 * Other shapes (tile edges) call the vec_dot kernel per pair. */
#ifndef MF_TILE_X86_H
#define MF_TILE_X86_H

#include "quant/quant_x86.h"

#define MF_TILE_Q8_TW 4

/* One shape, 4 x TA: WBLOCK / YBLOCK: weight / activation block types; UNPACK(b): its 32 quants as bytes;
 * MULSUM(x, y): the int8 dot lanes as floats (the same int32 lanes for every form); MIN(summ, xb, yb): the
 * Q4_1/Q5_1 min term into the pair's own float (MF_Q8_NO_MIN for the Q8_0 family), OUT(acc, summ): the
 * pair's result as vec_dot forms it. */
#define MF_DEFINE_Q8_TILE_SHAPE(NAME, TARGET, WBLOCK, YBLOCK, UNPACK, MULSUM, MIN, OUT, TA)                  \
    static inline TARGET void NAME(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, const void *a, \
                                   size_t a_stride) {                                                           \
        const WBLOCK *x[MF_TILE_Q8_TW];                                                                         \
        const YBLOCK *y[TA];                                                                                    \
        _Pragma("GCC unroll 4") for (int i = 0; i < MF_TILE_Q8_TW; i++) x[i] =                                  \
            (const WBLOCK *)((const char *)w + i * w_stride);                                                   \
        _Pragma("GCC unroll 4") for (int j = 0; j < TA; j++) y[j] = (const YBLOCK *)((const char *)a + j * a_stride); \
        __m256 acc[MF_TILE_Q8_TW][TA];                                                                          \
        float summ[MF_TILE_Q8_TW][TA];                                                                          \
        _Pragma("GCC unroll 4") for (int i = 0; i < MF_TILE_Q8_TW; i++)                                         \
            _Pragma("GCC unroll 4") for (int j = 0; j < TA; j++) {                                              \
                acc[i][j] = _mm256_setzero_ps();                                                                \
                summ[i][j] = 0.f;                                                                               \
            }                                                                                                   \
        for (int64_t ib = 0; ib < n / MF_QK8_0; ib++) {                                                         \
            __m256i qy[TA];                                                                                     \
            float dy[TA];                                                                                       \
            _Pragma("GCC unroll 4") for (int j = 0; j < TA; j++) {                                              \
                qy[j] = _mm256_loadu_si256((const __m256i *)y[j][ib].qs);                                       \
                dy[j] = MF_H2F(y[j][ib].d);                                                                     \
            }                                                                                                   \
            _Pragma("GCC unroll 4") for (int i = 0; i < MF_TILE_Q8_TW; i++) {                                   \
                const __m256i qx = UNPACK(&x[i][ib]);                                                           \
                const float dx = MF_H2F(x[i][ib].d);                                                            \
                _Pragma("GCC unroll 4") for (int j = 0; j < TA; j++) {                                          \
                    MIN(summ[i][j], &x[i][ib], &y[j][ib]);                                                      \
                    acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(dx * dy[j]), MULSUM(qx, qy[j]), acc[i][j]);      \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
        _Pragma("GCC unroll 4") for (int i = 0; i < MF_TILE_Q8_TW; i++)                                         \
            _Pragma("GCC unroll 4") for (int j = 0; j < TA; j++) s[i * ldc + j] = OUT(acc[i][j], summ[i][j]);   \
    }

/* The exported tile: 4 x 4 (TA = 4), 4 x 2 for two or three activation rows (small batches), vec_dot per
 * pair for any other shape; every path gives each pair vec_dot's bits. */
#define MF_DEFINE_Q8_TILE_MIN(NAME, TARGET, WBLOCK, YBLOCK, UNPACK, MULSUM, MIN, OUT, VEC_DOT)                   \
    MF_DEFINE_Q8_TILE_SHAPE(NAME##_4x4, TARGET, WBLOCK, YBLOCK, UNPACK, MULSUM, MIN, OUT, 4)                     \
    MF_DEFINE_Q8_TILE_SHAPE(NAME##_4x2, TARGET, WBLOCK, YBLOCK, UNPACK, MULSUM, MIN, OUT, 2)                     \
    TARGET void NAME(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,      \
                     size_t a_stride, int na) {                                                                 \
        int j0 = 0;                                                                                             \
        if (nw == MF_TILE_Q8_TW && na == 4) {                                                                   \
            NAME##_4x4(n, s, ldc, w, w_stride, a, a_stride);                                                    \
            return;                                                                                             \
        }                                                                                                       \
        if (nw == MF_TILE_Q8_TW && na >= 2) {                                                                   \
            NAME##_4x2(n, s, ldc, w, w_stride, a, a_stride);                                                    \
            j0 = 2;                                                                                             \
        }                                                                                                       \
        for (int i = 0; i < nw; i++)                                                                            \
            for (int j = j0; j < na; j++)                                                                       \
                VEC_DOT(n, &s[i * ldc + j], (const char *)w + i * w_stride, (const char *)a + j * a_stride);    \
    }

/* the Q8_0 family (no min term) */
#define MF_Q8_NO_MIN(summ, xb, yb) (void)(summ)
#define MF_Q8_OUT(acc, summ) mf_hsum_f32x8(acc)
#define MF_DEFINE_Q8_TILE(NAME, TARGET, WBLOCK, UNPACK, MULSUM, VEC_DOT)                                           \
    MF_DEFINE_Q8_TILE_MIN(NAME, TARGET, WBLOCK, mf_block_q8_0, UNPACK, MULSUM, MF_Q8_NO_MIN, MF_Q8_OUT, VEC_DOT)

/* Q4_1 / Q5_1 against Q8_1, vec_dot's (dot_avx2.c): the unsigned quants' int8 dot per block, and the min
 * term m * s in one float per pair added after the horizontal sum */
#define MF_Q8_1_MIN(summ, xb, yb) ((summ) += MF_H2F((xb)->m) * MF_H2F((yb)->s))
#define MF_Q8_1_OUT(acc, summ) (mf_hsum_f32x8(acc) + (summ))

/* Q4_0 with its unsigned nibbles straight into maddubs (u8 x s8): each int16 pair sum is
 * q0*y0 + q1*y1 - 8*(y0 + y1) = (q0-8)*y0 + (q1-8)*y1 exactly (|sums| < 2^15), so the int32 lanes are the
 * ones mf_mulsum_i8_avx2 gives for the signed quants and the floats are bitwise the same.  The 8*(y0+y1)
 * term depends on the activation block only; the compiler computes it once per block for the tile. */
static inline MF_AVX2 __m256i mf_q4_0_nibbles(const mf_block_q4_0 *b) { return mf_nibbles32(b->qs); }

static inline MF_AVX2 __m256 mf_mulsum_u4_avx2(__m256i nib, __m256i y) {
    const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(nib, y), _mm256_maddubs_epi16(_mm256_set1_epi8(8), y));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), p16));
}

#endif
