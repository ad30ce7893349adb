/* quant: AVX-512 VL + VNNI kernels for the K layouts q4_Kx8 / q5_Kx8 / q6_Kx8 / iq4_xsx8 (lane r = row r of
 * the group, as in x8_avx2.c).  vpdpbusd adds four adjacent unsigned x signed byte products into each int32
 * lane, so a sub-block's sum of q * y is one instruction per chunk instead of maddubs + add (+ madd); the
 * sub-block's scale then multiplies that int32 exactly (vpmulld).  The quant work runs on 512-bit registers
 * holding two chunks of the group side by side (row r in lanes r and 8 + r, folded once the sums are
 * made); the scales, mins and float steps stay on 256-bit ones.  Every int32 sum is the same integer as
 * the AVX2 kernel's and the reference's, and the float steps are the same, so the results are bitwise the
 * reference's for any activation count. */
#include "quant/x8_x86.h"

/* q6_Kx8 on 512-bit registers: chunks c and c + 1 of a sub-block side by side (lanes 0-7 chunk c, lanes
 * 8-15 chunk c + 1, so row r sits in lanes r and 8 + r), one vpdpbusd for 8 quants of every row where the
 * 256-bit form took two.  The chunks of a sub-block are consecutive in ql and qh (x8_x86.h), so a pair is one
 * 64-byte load of each.  Lane r + 8's sums are added to lane r's once per super-block: every sum is an
 * exact int32 (the scale multiplies each half exactly too), so the result is the 256-bit kernel's integer,
 * and the float steps that follow are its own (q6k_finish).  On CPUs with 512-bit datapaths (Zen 5,
 * Sapphire Rapids) it needs about half the instructions per weight byte, which is what bounded this GEMV:
 * 17 GB/s on one Zen 5 core against 33 for a plain read (docs/PERFORMANCE.md). */
static inline __attribute__((always_inline)) MF_AVX512 __m512i q6k_pair(const mf_block_q6_Kx8 *x, const int i,
                                                                       const int c) {
    const int k = (i % 8) / 2;
    const __m512i m4 = _mm512_set1_epi8(0xF), m30 = _mm512_set1_epi8(0x30);
    const __m512i ql = _mm512_loadu_si512((const void *)(x->ql + 32 * q6k_ql_chunk(i, c)));
    const __m512i qh = _mm512_loadu_si512((const void *)(x->qh + 32 * q6k_qh_chunk(i, c)));
    const __m512i lo = _mm512_and_si512(k >= 2 ? _mm512_srli_epi16(ql, 4) : ql, m4);
    /* bits 2k, 2k + 1 to bits 4, 5 (16-bit shifts: the mask drops what crosses a byte) */
    const __m512i hs = k == 0 ? _mm512_slli_epi16(qh, 4) : k == 1 ? _mm512_slli_epi16(qh, 2)
                                              : k == 2 ? qh : _mm512_srli_epi16(qh, 2);
    return _mm512_or_si512(lo, _mm512_and_si512(hs, m30));
}

/* dwords c and c + 1 of v (a sub-block's activation quants) in lanes 0-7 and 8-15: the activations of the
 * chunk pair (c, c + 1).  One load and a permute per pair measured faster on Zen 5 than two broadcasts
 * from memory merged under a mask (q6_Kx8 in L2: 61-65 against 57-59 GB/s a core). */
static inline __attribute__((always_inline)) MF_AVX512 __m512i y_pair(__m512i v, const int c) {
    const int lo = c, hi = c + 1;
    return _mm512_permutexvar_epi32(_mm512_set_epi32(hi, hi, hi, hi, hi, hi, hi, hi, lo, lo, lo, lo, lo, lo, lo, lo), v);
}

/* lane_u8 / lane_s8 (x8_x86.h) on scales broadcast to both halves: pshufb works per 128-bit lane */
static inline __attribute__((always_inline)) MF_AVX512 __m512i lane_u8_512(__m512i v, const int k) {
    return _mm512_shuffle_epi8(v, _mm512_broadcast_i64x4(lane_pattern(0x80808000u | (uint32_t)k)));
}

static inline __attribute__((always_inline)) MF_AVX512 __m512i lane_s8_512(__m512i v, const int k) {
    return _mm512_srai_epi32(_mm512_shuffle_epi8(v, _mm512_broadcast_i64x4(lane_pattern(0x00808080u | (uint32_t)k << 24))),
                             24);
}

/* an int32 sum kept in both halves (lane r + 8 holds more of row r): lane r's total */
static inline __attribute__((always_inline)) MF_AVX512 __m256i fold_halves(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* q4_Kx8 and q5_Kx8 (Q5: the 5th bits or-ed into the nibbles, quant.h), chunk pairs as q6_Kx8 below: the 8
 * chunks of a sub-block are 4 contiguous pairs of qs (and of qh) */
static inline __attribute__((always_inline)) MF_AVX512 void k4x8_rows_vnni(int64_t n, float *s, size_t ldc,
                                                                           const void *w, const void *a,
                                                                           size_t a_stride, int j0, const int NA,
                                                                           const bool Q5) {
    X8_PROLOGUE(mf_block_q8_K)
    const __m512i m4 = _mm512_set1_epi8(0xF);
    const size_t xbytes = Q5 ? sizeof(mf_block_q5_Kx8) : sizeof(mf_block_q4_Kx8);
    for (int64_t b = 0; b < n / MF_QK_K; b++) {
        const mf_block_q4_Kx8 *xb = (const mf_block_q4_Kx8 *)((const char *)w + (size_t)b * xbytes);
        const uint8_t *qh = Q5 ? ((const mf_block_q5_Kx8 *)xb)->qh : NULL;
        if (NA == 1) prefetch_block(xb, xbytes);
        __m256i sc[2], mn[2], isum[4];
        q4k_scales_mins(xb->scales, sc, mn);
        const __m512i sw[2] = {_mm512_broadcast_i64x4(sc[0]), _mm512_broadcast_i64x4(sc[1])};
        __m512i iw[4];
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) iw[j] = _mm512_setzero_si512();
        _Pragma("GCC unroll 8") for (int sb = 0; sb < 8; sb++) {
            /* sub-block sb: the low (even sb) or high nibbles of chunks 8 (sb / 2) .. 8 (sb / 2) + 7 */
            const uint8_t *qs = xb->qs + 256 * (sb / 2);
            __m512i p[4], yv[4];
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
                p[j] = _mm512_setzero_si512();
                yv[j] = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(y[j][b].qs + 32 * sb)));
            }
            _Pragma("GCC unroll 4") for (int c = 0; c < 8; c += 2) {
                const __m512i v = _mm512_loadu_si512((const void *)(qs + 32 * c));
                __m512i q = _mm512_and_si512(sb & 1 ? _mm512_srli_epi16(v, 4) : v, m4);
                if (Q5) {
                    /* q5k_hbit on both chunks: bit sb of each qh byte to bit 4 */
                    const __m512i h = _mm512_loadu_si512((const void *)(qh + 32 * c));
                    const __m512i hs = sb < 4 ? _mm512_slli_epi16(h, 4 - sb) : sb == 4 ? h : _mm512_srli_epi16(h, sb - 4);
                    q = _mm512_or_si512(q, _mm512_and_si512(hs, _mm512_set1_epi8(0x10)));
                }
                _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++)
                    p[j] = _mm512_dpbusd_epi32(p[j], q, y_pair(yv[j], c));
            }
            const __m512i sc32 = lane_u8_512(sw[sb / 4], sb % 4);
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++)
                iw[j] = _mm512_add_epi32(iw[j], _mm512_mullo_epi32(p[j], sc32));
        }
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) isum[j] = fold_halves(iw[j]);
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
        __m512i sw[4], iw[4];
        _Pragma("GCC unroll 8") for (int v = 0; v < 4; v++) {
            sv[v] = _mm256_loadu_si256((const __m256i *)(x[b].scales + 32 * v));
            sw[v] = _mm512_broadcast_i64x4(sv[v]); /* row r's scales in lanes r and 8 + r */
        }
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) iw[j] = _mm512_setzero_si512();
        _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) {
            __m512i p[4];
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) p[j] = _mm512_setzero_si512();
            __m512i yv[4];
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++)
                yv[j] = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(y[j][b].qs + 16 * i)));
            _Pragma("GCC unroll 2") for (int c = 0; c < 4; c += 2) {
                const __m512i q = q6k_pair(&x[b], i, c);
                _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++)
                    p[j] = _mm512_dpbusd_epi32(p[j], q, y_pair(yv[j], c));
            }
            const __m512i sc32 = lane_s8_512(sw[i / 4], i % 4);
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++)
                iw[j] = _mm512_add_epi32(iw[j], _mm512_mullo_epi32(p[j], sc32));
        }
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) isum[j] = fold_halves(iw[j]);
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
    const __m512i lvw = _mm512_broadcast_i64x4(lvu), m4 = _mm512_set1_epi8(0xF);
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
            __m512i pw[4], yv[4];
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
                pw[j] = _mm512_setzero_si512();
                yv[j] = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(y[j][b].qs + 32 * sb)));
            }
            _Pragma("GCC unroll 2") for (int c = 0; c < 4; c += 2) {
                /* chunks 4 sb + c, + 1 (as q6_Kx8's pairs): low nibbles are values 4c..4c+7 of the
                 * sub-block, high ones 16+4c.. */
                const __m512i v = _mm512_loadu_si512((const void *)(x[b].qs + 32 * (4 * sb + c)));
                const __m512i wl = _mm512_shuffle_epi8(lvw, _mm512_and_si512(v, m4));
                const __m512i wh = _mm512_shuffle_epi8(lvw, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
                _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
                    pw[j] = _mm512_dpbusd_epi32(pw[j], wl, y_pair(yv[j], c));
                    pw[j] = _mm512_dpbusd_epi32(pw[j], wh, y_pair(yv[j], 4 + c));
                }
            }
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
                /* the halves' sum is the 256-bit kernel's exact sub-block sum, so its scaling is unchanged */
                isum[j] = _mm256_add_epi32(isum[j], _mm256_mullo_epi32(fold_halves(pw[j]), sc32));
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
