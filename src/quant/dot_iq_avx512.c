/* quant: AVX-512 (VNNI) IQ2/IQ3 x Q8_K dot kernels (dot_iq_x86.h): vpdpbusd sums the same 4 adjacent
 * products per int32 lane that maddubs + madd pair up, and the per-16 multiplier scales whole lanes
 * (lanes 0..3 are values 0..15), so the lanes and the bits are those of the AVX2 kernels and the
 * reference. */
#include "quant/dot_iq_x86.h"

static inline MF_AVX512 __m256i mulsum_vnni(__m256i g, __m256i qs, int m0, int m1) {
    const __m256i m = _mm256_set_m128i(_mm_set1_epi32(m1), _mm_set1_epi32(m0));
    return _mm256_mullo_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), g, qs), m);
}
#define MF_IQ_MULSUM mulsum_vnni

MF_AVX512 MF_IQ_X86_DOT(mf_vec_dot_iq2_xxs_avx512, MF_TYPE_IQ2_XXS, 0.125f)
MF_AVX512 MF_IQ_X86_DOT(mf_vec_dot_iq2_xs_avx512, MF_TYPE_IQ2_XS, 0.125f)
MF_AVX512 MF_IQ_X86_DOT(mf_vec_dot_iq2_s_avx512, MF_TYPE_IQ2_S, 0.125f)
MF_AVX512 MF_IQ_X86_DOT(mf_vec_dot_iq3_xxs_avx512, MF_TYPE_IQ3_XXS, 0.25f)
MF_AVX512 MF_IQ_X86_DOT(mf_vec_dot_iq3_s_avx512, MF_TYPE_IQ3_S, 1.0f)
