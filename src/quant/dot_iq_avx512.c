/* quant: AVX-512 (VNNI) IQ2/IQ3 x Q8_K dot kernels (dot_iq_x86.h): maddubs pairs the products exactly as
 * in the AVX2 kernels, and vpdpwssd multiplies each pair sum by the per-16 multiplier and adds both of a
 * lane's into it in one instruction (exact int32), so the lanes and the bits are those of the AVX2 kernels
 * and the reference.  (vpdpbusd + vpmulld + vpaddd before: one instruction more, and vpmulld is slow.) */
#include "quant/dot_iq_x86.h"

static inline MF_AVX512 __m256i mulacc_vnni(__m256i acc, __m256i g, __m256i qs, int m0, int m1) {
    const __m256i m = _mm256_set_m128i(_mm_set1_epi16((short)m1), _mm_set1_epi16((short)m0));
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(g, qs), m);
}
#define MF_IQ_MULACC mulacc_vnni
MF_IQ_X86_ROWS(MF_AVX512)

MF_AVX512 MF_IQ_X86_DOT(mf_vec_dot_iq2_xxs_avx512, MF_TYPE_IQ2_XXS, 0.125f)
MF_AVX512 MF_IQ_X86_DOT(mf_vec_dot_iq2_xs_avx512, MF_TYPE_IQ2_XS, 0.125f)
MF_AVX512 MF_IQ_X86_DOT(mf_vec_dot_iq2_s_avx512, MF_TYPE_IQ2_S, 0.125f)
MF_AVX512 MF_IQ_X86_DOT(mf_vec_dot_iq3_xxs_avx512, MF_TYPE_IQ3_XXS, 0.25f)
MF_AVX512 MF_IQ_X86_DOT(mf_vec_dot_iq3_s_avx512, MF_TYPE_IQ3_S, 1.0f)
MF_AVX512 MF_IQ_X86_TILE(mf_tile_iq2_xxs_avx512, MF_TYPE_IQ2_XXS, 0.125f)
MF_AVX512 MF_IQ_X86_TILE(mf_tile_iq2_xs_avx512, MF_TYPE_IQ2_XS, 0.125f)
MF_AVX512 MF_IQ_X86_TILE(mf_tile_iq2_s_avx512, MF_TYPE_IQ2_S, 0.125f)
MF_AVX512 MF_IQ_X86_TILE(mf_tile_iq3_xxs_avx512, MF_TYPE_IQ3_XXS, 0.25f)
MF_AVX512 MF_IQ_X86_TILE(mf_tile_iq3_s_avx512, MF_TYPE_IQ3_S, 1.0f)
