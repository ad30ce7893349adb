/* quant: AVX-512 (F/BW/VL + VNNI) dot kernels.
 *
 * Only the Q8_0-family kernels change at this level: vpdpbusd replaces maddubs+madd.  It sums the
 * same four adjacent products into each int32 lane, so every lane, and therefore every float result,
 * is bitwise the AVX2 one (and llama.cpp's); the gain is fewer uops per block.  The K-format and float
 * kernels have no VNNI shape that keeps their lanes (their scales multiply 16-bit pair sums), so the
 * AVX-512 table reuses the AVX2 ones for them. */
#include "quant/quant_x86.h"

MF_AVX512 void mf_vec_dot_q4_0_avx512(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q4_0 *x = w;
    const mf_block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / MF_QK8_0; ib++) {
        const __m256 d = _mm256_set1_ps(MF_H2F(x[ib].d) * MF_H2F(y[ib].d));
        const __m256i qx = _mm256_sub_epi8(mf_nibbles32(x[ib].qs), _mm256_set1_epi8(8));
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        acc = _mm256_fmadd_ps(d, mf_mulsum_i8_vnni(qx, qy), acc);
    }
    *s = mf_hsum_f32x8(acc);
}

MF_AVX512 void mf_vec_dot_q5_0_avx512(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q5_0 *x = w;
    const mf_block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / MF_QK8_0; ib++) {
        const __m256 d = _mm256_set1_ps(MF_H2F(x[ib].d) * MF_H2F(y[ib].d));
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        acc = _mm256_fmadd_ps(d, mf_mulsum_i8_vnni(mf_q5_0_bytes(&x[ib]), qy), acc);
    }
    *s = mf_hsum_f32x8(acc);
}

MF_AVX512 void mf_vec_dot_q8_0_avx512(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q8_0 *x = w;
    const mf_block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < n / MF_QK8_0; ib++) {
        const __m256 d = _mm256_set1_ps(MF_H2F(x[ib].d) * MF_H2F(y[ib].d));
        const __m256i qx = _mm256_loadu_si256((const __m256i *)x[ib].qs);
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        acc = _mm256_fmadd_ps(d, mf_mulsum_i8_vnni(qx, qy), acc);
    }
    *s = mf_hsum_f32x8(acc);
}
