/* ggml_v_expf on 16 lanes, for the AVX-512 kernels of attention_avx512.c and vec.c (x86-64 only; include
 * after <immintrin.h>). */
#ifndef MF_BACKEND_CPU_EXP_AVX512_H
#define MF_BACKEND_CPU_EXP_AVX512_H

/* ggml_v_expf (vec.c's exp8) on 16 lanes: every lane the same operations, so the same bits as one lane
 * of exp8 or mf_cpu_expf (the special path's fma(k, j, k) is fma(j, k, k)) */
static inline __attribute__((target("avx2,fma,avx512f"))) __m512 mf_exp16(__m512 x) {
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __m512i e = _mm512_slli_epi32(_mm512_castps_si512(z), 23);
    const __m512 k = _mm512_castsi512_ps(_mm512_add_epi32(e, _mm512_castps_si512(_mm512_set1_ps(1))));
    const __m512 an = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(n), _mm512_set1_epi32(0x7fffffff)));
    const __mmask16 c = _mm512_cmp_ps_mask(an, _mm512_set1_ps(126), _CMP_GT_OQ);
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_mul_ps(_mm512_set1_ps(0x1.ffffecp-1f), b));
    const __m512 plain = _mm512_fmadd_ps(j, k, k);
    if (!c) return plain;
    const __mmask16 le = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
    const __m512i g = _mm512_maskz_mov_epi32(le, _mm512_set1_epi32((int)0x82000000u));
    const __m512 s1 = _mm512_castsi512_ps(_mm512_add_epi32(g, _mm512_set1_epi32(0x7f000000)));
    const __m512 s2 = _mm512_castsi512_ps(_mm512_sub_epi32(e, g));
    const __mmask16 d = _mm512_cmp_ps_mask(an, _mm512_set1_ps(192), _CMP_GT_OQ);
    __m512 y = _mm512_mask_mov_ps(plain, c, _mm512_mul_ps(_mm512_fmadd_ps(s2, j, s2), s1));
    return _mm512_mask_mov_ps(y, d, _mm512_mul_ps(s1, s1));
}

#endif
