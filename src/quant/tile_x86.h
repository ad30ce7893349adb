/* Tile kernels for the Q8_0 family (Q4_0, Q5_0, Q8_0 weights x Q8_0 activations), written once as a
 * macro and instantiated per ISA (tile_avx2.c: maddubs, tile_avx512.c: VNNI).  Shape 4 weight rows x
 * 2 activation rows.  Each pair (i, j) runs exactly vec_dot's sequence: acc_ij = fma(d_i*d_j,
 * mulsum(q_i, q_j), acc_ij) per block, then the same horizontal sum, so results are bitwise vec_dot's.
 * Other shapes (tile edges) call the vec_dot kernel per pair. */
#ifndef MF_TILE_X86_H
#define MF_TILE_X86_H

#include "quant/quant_x86.h"

#define MF_TILE_Q8_TW 4
#define MF_TILE_Q8_TA 2

/* WBLOCK: weight block type; UNPACK(b): its 32 quants as signed bytes; MULSUM(x, y): int8 dot lanes */
#define MF_DEFINE_Q8_TILE(NAME, TARGET, WBLOCK, UNPACK, MULSUM, VEC_DOT)                                           \
    TARGET void NAME(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,      \
                     size_t a_stride, int na) {                                                                 \
        if (nw != MF_TILE_Q8_TW || na != MF_TILE_Q8_TA) {                                                       \
            for (int i = 0; i < nw; i++)                                                                        \
                for (int j = 0; j < na; j++)                                                                    \
                    VEC_DOT(n, &s[i * ldc + j], (const char *)w + i * w_stride, (const char *)a + j * a_stride); \
            return;                                                                                             \
        }                                                                                                       \
        const WBLOCK *x[MF_TILE_Q8_TW];                                                                         \
        const mf_block_q8_0 *y[MF_TILE_Q8_TA];                                                                  \
        _Pragma("GCC unroll 4") for (int i = 0; i < MF_TILE_Q8_TW; i++) x[i] =                                  \
            (const WBLOCK *)((const char *)w + i * w_stride);                                                   \
        _Pragma("GCC unroll 4") for (int j = 0; j < MF_TILE_Q8_TA; j++) y[j] =                                  \
            (const mf_block_q8_0 *)((const char *)a + j * a_stride);                                            \
        __m256 acc[MF_TILE_Q8_TW][MF_TILE_Q8_TA];                                                               \
        _Pragma("GCC unroll 4") for (int i = 0; i < MF_TILE_Q8_TW; i++)                                         \
            _Pragma("GCC unroll 4") for (int j = 0; j < MF_TILE_Q8_TA; j++) acc[i][j] = _mm256_setzero_ps();    \
        for (int64_t ib = 0; ib < n / MF_QK8_0; ib++) {                                                         \
            __m256i qy[MF_TILE_Q8_TA];                                                                          \
            float dy[MF_TILE_Q8_TA];                                                                            \
            _Pragma("GCC unroll 4") for (int j = 0; j < MF_TILE_Q8_TA; j++) {                                   \
                qy[j] = _mm256_loadu_si256((const __m256i *)y[j][ib].qs);                                       \
                dy[j] = MF_H2F(y[j][ib].d);                                                                     \
            }                                                                                                   \
            _Pragma("GCC unroll 4") for (int i = 0; i < MF_TILE_Q8_TW; i++) {                                   \
                const __m256i qx = UNPACK(&x[i][ib]);                                                           \
                const float dx = MF_H2F(x[i][ib].d);                                                            \
                _Pragma("GCC unroll 4") for (int j = 0; j < MF_TILE_Q8_TA; j++) acc[i][j] =                     \
                    _mm256_fmadd_ps(_mm256_set1_ps(dx * dy[j]), MULSUM(qx, qy[j]), acc[i][j]);                  \
            }                                                                                                   \
        }                                                                                                       \
        _Pragma("GCC unroll 4") for (int i = 0; i < MF_TILE_Q8_TW; i++)                                         \
            _Pragma("GCC unroll 4") for (int j = 0; j < MF_TILE_Q8_TA; j++) s[i * ldc + j] =                    \
                mf_hsum_f32x8(acc[i][j]);                                                                       \
    }

static inline MF_AVX2 __m256i mf_q4_0_bytes(const mf_block_q4_0 *b) {
    return _mm256_sub_epi8(mf_nibbles32(b->qs), _mm256_set1_epi8(8));
}

static inline MF_AVX2 __m256i mf_q8_0_bytes(const mf_block_q8_0 *b) {
    return _mm256_loadu_si256((const __m256i *)b->qs);
}

#endif
