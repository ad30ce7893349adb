/* quant: AVX2 IQ2/IQ3 x Q8_K dot kernels (dot_iq_x86.h), bitwise the reference ones (dot_iq_scalar.c)
 * and llama.cpp's AVX2 ones.  Products: maddubs (grid bytes <= 62 unsigned times signed activations: pair
 * sums below 2^15, exact), then madd with the per-16 multipliers (int16 lanes 0..7 are values 0..15). */
#include "quant/dot_iq_x86.h"

static inline MF_AVX2 __m256i mulacc_avx2(__m256i acc, __m256i g, __m256i qs, int m0, int m1) {
    const __m256i m = _mm256_set_m128i(_mm_set1_epi16((short)m1), _mm_set1_epi16((short)m0));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(g, qs), m));
}
#define MF_IQ_MULACC mulacc_avx2
MF_IQ_X86_ROWS(MF_AVX2)

MF_AVX2 MF_IQ_X86_DOT(mf_vec_dot_iq2_xxs_avx2, MF_TYPE_IQ2_XXS, 0.125f)
MF_AVX2 MF_IQ_X86_DOT(mf_vec_dot_iq2_xs_avx2, MF_TYPE_IQ2_XS, 0.125f)
MF_AVX2 MF_IQ_X86_DOT(mf_vec_dot_iq2_s_avx2, MF_TYPE_IQ2_S, 0.125f)
MF_AVX2 MF_IQ_X86_DOT(mf_vec_dot_iq3_xxs_avx2, MF_TYPE_IQ3_XXS, 0.25f)
MF_AVX2 MF_IQ_X86_DOT(mf_vec_dot_iq3_s_avx2, MF_TYPE_IQ3_S, 1.0f)
MF_AVX2 MF_IQ_X86_TILE(mf_tile_iq2_xxs_avx2, MF_TYPE_IQ2_XXS, 0.125f)
MF_AVX2 MF_IQ_X86_TILE(mf_tile_iq2_xs_avx2, MF_TYPE_IQ2_XS, 0.125f)
MF_AVX2 MF_IQ_X86_TILE(mf_tile_iq2_s_avx2, MF_TYPE_IQ2_S, 0.125f)
MF_AVX2 MF_IQ_X86_TILE(mf_tile_iq3_xxs_avx2, MF_TYPE_IQ3_XXS, 0.25f)
MF_AVX2 MF_IQ_X86_TILE(mf_tile_iq3_s_avx2, MF_TYPE_IQ3_S, 1.0f)
