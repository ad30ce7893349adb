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
    X8_PROLOGUE(mf_block_q8_K)
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (int64_t b = 0; b < n / MF_QK_K; b++) {
        if (NA == 1) prefetch_block(&x[b], sizeof x[b]);
        __m256i sc[2], mn[2], isum[4];
        q4k_scales_mins(x[b].scales, sc, mn);
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) isum[j] = _mm256_setzero_si256();
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
        q4k_finish(&x[b], y, b, mn, isum, acc, NA);
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) store_lanes(s, ldc, j0 + j, acc[j]);
}

static inline __attribute__((always_inline)) MF_AVX512 void q6_Kx8_rows_vnni(int64_t n, float *s, size_t ldc,
                                                                             const mf_block_q6_Kx8 *x,
                                                                             const void *a, size_t a_stride,
                                                                             int j0, const int NA) {
    X8_PROLOGUE(mf_block_q8_K)
    for (int64_t b = 0; b < n / MF_QK_K; b++) {
        if (NA == 1) prefetch_block(&x[b], sizeof x[b]);
        __m256i sv[4], isum[4];
        _Pragma("GCC unroll 8") for (int v = 0; v < 4; v++)
            sv[v] = _mm256_loadu_si256((const __m256i *)(x[b].scales + 32 * v));
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) isum[j] = _mm256_setzero_si256();
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
        q6k_finish(&x[b], y, b, sv, isum, acc, NA);
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) store_lanes(s, ldc, j0 + j, acc[j]);
}

X8_TILE_T(mf_tile_q4_Kx8_avx512, q4_Kx8_rows_vnni, MF_AVX512)

X8_TILE_T(mf_tile_q6_Kx8_avx512, q6_Kx8_rows_vnni, MF_AVX512)
