/* quant: AVX-512 VL + VNNI kernels for the K layouts q4_Kx8 / q5_Kx8 / q6_Kx8 / iq4_xsx8 (256-bit registers,
 * lane r = row r of the group, as in x8_avx2.c).  vpdpbusd adds four adjacent unsigned x signed byte products into
 * each int32 lane, so a sub-block's sum of q * y is one instruction per chunk instead of maddubs + add
 * (+ madd); the sub-block's scale then multiplies that int32 exactly (vpmulld).  Every int32 sum is the
 * same integer as the AVX2 kernel's and the reference's, and the float steps are the same, so the
 * results are bitwise the reference's for any activation count. */
#include "quant/x8_x86.h"

/* q4_Kx8 and q5_Kx8 (Q5: the 5th bits or-ed into the nibbles, quant.h) */
static inline __attribute__((always_inline)) MF_AVX512 void k4x8_rows_vnni(int64_t n, float *s, size_t ldc,
                                                                           const void *w, const void *a,
                                                                           size_t a_stride, int j0, const int NA,
                                                                           const bool Q5) {
    X8_PROLOGUE(mf_block_q8_K)
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const size_t xbytes = Q5 ? sizeof(mf_block_q5_Kx8) : sizeof(mf_block_q4_Kx8);
    for (int64_t b = 0; b < n / MF_QK_K; b++) {
        const mf_block_q4_Kx8 *xb = (const mf_block_q4_Kx8 *)((const char *)w + (size_t)b * xbytes);
        const uint8_t *qh = Q5 ? ((const mf_block_q5_Kx8 *)xb)->qh : NULL;
        if (NA == 1) prefetch_block(xb, xbytes);
        __m256i sc[2], mn[2], isum[4];
        q4k_scales_mins(xb->scales, sc, mn);
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) isum[j] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8") for (int sb = 0; sb < 8; sb++) {
            /* sub-block sb: the low (even sb) or high nibbles of chunks 8 (sb / 2) .. 8 (sb / 2) + 7 */
            const uint8_t *qs = xb->qs + 256 * (sb / 2);
            __m256i p[4];
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) p[j] = _mm256_setzero_si256();
            _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
                __m256i q = _mm256_and_si256(sb & 1 ? _mm256_srli_epi16(v, 4) : v, m4);
                if (Q5) q = _mm256_or_si256(q, q5k_hbit(_mm256_loadu_si256((const __m256i *)(qh + 32 * c)), sb));
                _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++)
                    p[j] = _mm256_dpbusd_epi32(p[j], q, bcast4(y[j][b].qs + 32 * sb + 4 * c));
            }
            const __m256i sc32 = lane_u8(sc[sb / 4], sb % 4);
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++)
                isum[j] = _mm256_add_epi32(isum[j], _mm256_mullo_epi32(p[j], sc32));
        }
        q4k_finish(xb, y, b, mn, isum, acc, NA);
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) store_lanes(s, ldc, j0 + j, acc[j]);
}

static inline __attribute__((always_inline)) MF_AVX512 void q4_Kx8_rows_vnni(int64_t n, float *s, size_t ldc,
                                                                             const void *w, const void *a,
                                                                             size_t a_stride, int j0, const int NA) {
    k4x8_rows_vnni(n, s, ldc, w, a, a_stride, j0, NA, false);
}

static inline __attribute__((always_inline)) MF_AVX512 void q5_Kx8_rows_vnni(int64_t n, float *s, size_t ldc,
                                                                             const void *w, const void *a,
                                                                             size_t a_stride, int j0, const int NA) {
    k4x8_rows_vnni(n, s, ldc, w, a, a_stride, j0, NA, true);
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

/* iq4_xsx8: each nibble through the 16 levels + 128 (1..241, unsigned: the levels with the sign bit
 * flipped) with one pshufb per chunk, so vpdpbusd sums (l + 128) * y over a sub-block; the sub-block's
 * scale ls - 32 multiplies that exactly, and sum (ls - 32) * 128 * (the sub-block's activation sum, two
 * bsums of 16) comes off once per super-block.  Bounds: a sub-block's biased sum is at most
 * 32 * 241 * 128 < 2^20, times |ls - 32| <= 32, eight of them < 2^28; the result is the integer of the
 * AVX2 kernel and the reference, so the fma that follows is theirs. */
static inline __attribute__((always_inline)) MF_AVX512 void iq4_xsx8_rows_vnni(int64_t n, float *s, size_t ldc,
                                                                               const mf_block_iq4_xsx8 *x,
                                                                               const void *a, size_t a_stride,
                                                                               int j0, const int NA) {
    X8_PROLOGUE(mf_block_q8_K)
    const __m256i off = _mm256_set1_epi32(32), lvu = _mm256_xor_si256(iq4_levels256(), _mm256_set1_epi8((char)0x80));
    for (int64_t b = 0; b < n / MF_QK_K; b++) {
        if (NA == 1) prefetch_block(&x[b], sizeof x[b]);
        /* lane r: row r's scales_l (sub-block sb's low bits at 4 sb) and scales_h (high bits at 2 sb) */
        const __m256i sl = _mm256_loadu_si256((const __m256i *)x[b].scales_l);
        const __m256i sh = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)x[b].scales_h));
        __m256i isum[4], corr[4];
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) isum[j] = corr[j] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8") for (int sb = 0; sb < 8; sb++) {
            const __m256i sc32 = _mm256_sub_epi32(iq4xs_scale(sl, sh, sb), off);
            /* ls - 32 in both int16 halves, for madd against a pair of bsums */
            const __m256i sc16 = _mm256_or_si256(_mm256_and_si256(sc32, _mm256_set1_epi32(0xFFFF)),
                                                 _mm256_slli_epi32(sc32, 16));
            __m256i p[4];
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) p[j] = _mm256_setzero_si256();
            _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * (4 * sb + c)));
                /* chunk 4 sb + c: low nibbles are values 4c..4c+3 of the sub-block, high ones 16+4c.. */
                __m256i wl, wh;
                nibble_lookup(v, lvu, &wl, &wh);
                _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
                    const int8_t *q = y[j][b].qs + 32 * sb;
                    p[j] = _mm256_dpbusd_epi32(p[j], wl, bcast4(q + 4 * c));
                    p[j] = _mm256_dpbusd_epi32(p[j], wh, bcast4(q + 16 + 4 * c));
                }
            }
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
                isum[j] = _mm256_add_epi32(isum[j], _mm256_mullo_epi32(p[j], sc32));
                corr[j] = _mm256_add_epi32(corr[j], _mm256_madd_epi16(sc16, bsum_pair(y[j][b].bsums + 2 * sb)));
                PIN(isum[j]);
                PIN(corr[j]);
            }
        }
        const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[b].d));
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
            const __m256i q = _mm256_sub_epi32(isum[j], _mm256_slli_epi32(corr[j], 7));
            const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(y[j][b].d));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), d, acc[j]);
        }
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) store_lanes(s, ldc, j0 + j, acc[j]);
}

X8_TILE_T(mf_tile_q4_Kx8_avx512, q4_Kx8_rows_vnni, MF_AVX512)

X8_TILE_T(mf_tile_q5_Kx8_avx512, q5_Kx8_rows_vnni, MF_AVX512)

X8_TILE_T(mf_tile_q6_Kx8_avx512, q6_Kx8_rows_vnni, MF_AVX512)

X8_TILE_T(mf_tile_iq4_xsx8_avx512, iq4_xsx8_rows_vnni, MF_AVX512)
