/* quant: AVX-512 VL + VNNI kernels for the K layouts q4_Kx8 / q6_Kx8 (256-bit registers, lane r = row r
 * of the group, as in x8_avx2.c).  vpdpbusd adds four adjacent unsigned x signed byte products into
 * each int32 lane, so a sub-block's sum of q * y is one instruction per chunk instead of maddubs + add
 * (+ madd); the sub-block's scale then multiplies that int32 exactly (vpmulld).  Every int32 sum is the
 * same integer as the AVX2 kernel's and the reference's, and the float steps are the same, so the
 * results are bitwise the reference's for any activation count. */
#include "quant/x8_x86.h"

/* byte k (0..3) of each lane, zero-extended (*_u) or sign-extended (*_s) to the lane's int32 */
static inline __attribute__((always_inline)) MF_AVX2 __m256i lane_u8(__m256i v, const int k) {
    return _mm256_shuffle_epi8(v, lane_pattern(0x80808000u | (uint32_t)k));
}

static inline __attribute__((always_inline)) MF_AVX2 __m256i lane_s8(__m256i v, const int k) {
    return _mm256_srai_epi32(_mm256_shuffle_epi8(v, lane_pattern(0x00808080u | (uint32_t)k << 24)), 24);
}

static inline __attribute__((always_inline)) MF_AVX512 void q4_Kx8_rows_vnni(int64_t n, float *s, size_t ldc,
                                                                             const mf_block_q4_Kx8 *x,
                                                                             const void *a, size_t a_stride,
                                                                             int j0, const int NA) {
    const mf_block_q8_K *y[4];
    __m256 acc[4];
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
        y[j] = (const mf_block_q8_K *)((const char *)a + (size_t)(j0 + j) * a_stride);
        acc[j] = _mm256_setzero_ps();
    }
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (int64_t b = 0; b < n / MF_QK_K; b++) {
        if (NA == 1) prefetch_block(&x[b], sizeof x[b]);
        __m256i sc[2], mn[2], isum[4], imin[4];
        q4k_scales_mins(x[b].scales, sc, mn);
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) isum[j] = imin[j] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8") for (int sb = 0; sb < 8; sb++) {
            /* sub-block sb: the low (even sb) or high nibbles of chunks 8 (sb / 2) .. 8 (sb / 2) + 7 */
            const uint8_t *qs = x[b].qs + 256 * (sb / 2);
            __m256i p[4];
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) p[j] = _mm256_setzero_si256();
            _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
                const __m256i q = _mm256_and_si256(sb & 1 ? _mm256_srli_epi16(v, 4) : v, m4);
                _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++)
                    p[j] = _mm256_dpbusd_epi32(p[j], q, bcast4(y[j][b].qs + 32 * sb + 4 * c));
            }
            const __m256i sc32 = lane_u8(sc[sb / 4], sb % 4);
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++)
                isum[j] = _mm256_add_epi32(isum[j], _mm256_mullo_epi32(p[j], sc32));
        }
        /* the mins: min * (the sub-block's activation sum, from two bsums of 16) */
        _Pragma("GCC unroll 8") for (int sb = 0; sb < 8; sb++) {
            const __m256i mn16 = lane_u8_x2(mn[sb / 4], sb % 4);
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++)
                imin[j] = _mm256_add_epi32(imin[j], _mm256_madd_epi16(mn16, bsum_pair(y[j][b].bsums + 2 * sb)));
        }
        const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[b].d));
        const __m256 dmx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[b].dmin));
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
            const __m256 da = _mm256_set1_ps(y[j][b].d);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_mul_ps(dx, da), acc[j]);
            acc[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(imin[j]), _mm256_mul_ps(dmx, da), acc[j]);
        }
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) store_lanes(s, ldc, j0 + j, acc[j]);
}

static inline __attribute__((always_inline)) MF_AVX512 void q6_Kx8_rows_vnni(int64_t n, float *s, size_t ldc,
                                                                             const mf_block_q6_Kx8 *x,
                                                                             const void *a, size_t a_stride,
                                                                             int j0, const int NA) {
    const mf_block_q8_K *y[4];
    __m256 acc[4];
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
        y[j] = (const mf_block_q8_K *)((const char *)a + (size_t)(j0 + j) * a_stride);
        acc[j] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < n / MF_QK_K; b++) {
        if (NA == 1) prefetch_block(&x[b], sizeof x[b]);
        __m256i sv[4], isum[4], corr[4];
        _Pragma("GCC unroll 8") for (int v = 0; v < 4; v++)
            sv[v] = _mm256_loadu_si256((const __m256i *)(x[b].scales + 32 * v));
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) isum[j] = corr[j] = _mm256_setzero_si256();
        _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) {
            __m256i p[4];
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) p[j] = _mm256_setzero_si256();
            _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
                const __m256i q = q6k_chunk(&x[b], i, c);
                _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++)
                    p[j] = _mm256_dpbusd_epi32(p[j], q, bcast4(y[j][b].qs + 16 * i + 4 * c));
            }
            const __m256i sc32 = lane_s8(sv[i / 4], i % 4);
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++)
                isum[j] = _mm256_add_epi32(isum[j], _mm256_mullo_epi32(p[j], sc32));
        }
        /* the values are stored + 32: subtract 32 * sum of scale * (the sub-block's activation sum) */
        _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++) {
            const __m256i sp = lane_s8_pair(sv[t / 2], 2 * (t % 2), 2 * (t % 2) + 1);
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++)
                corr[j] = _mm256_add_epi32(corr[j], _mm256_madd_epi16(sp, bsum_pair(y[j][b].bsums + 2 * t)));
        }
        const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[b].d));
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
            const __m256i q = _mm256_sub_epi32(isum[j], _mm256_slli_epi32(corr[j], 5));
            const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(y[j][b].d));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), d, acc[j]);
        }
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) store_lanes(s, ldc, j0 + j, acc[j]);
}

X8_TILE_T(mf_tile_q4_Kx8_avx512, q4_Kx8_rows_vnni, MF_AVX512)

X8_TILE_T(mf_tile_q6_Kx8_avx512, q6_Kx8_rows_vnni, MF_AVX512)
