/* quant: AVX2 GEMV/GEMM kernels for the row-interleaved x8 layouts (repack.c has the layout, the
 * reference and why).  Lane r of every 256-bit register is weight row r of the group, so a block needs
 * one int32 dot for 8 rows and one convert + scale + fma for all of them.  Each activation row is
 * independent: the 8 x 4 tile and the 8 x 1 GEMV run the same operations per (row, activation), so
 * results never depend on the batch (bitwise the scalar reference). */
#include "quant/x8_x86.h"

/* NA activation rows against one group of 8 rows.  NA is a constant at every call (always inlined). */
static inline __attribute__((always_inline)) MF_AVX2 void q4_0x8_rows(int64_t n, float *s, size_t ldc,
                                                                      const mf_block_q4_0x8 *x, const void *a,
                                                                      size_t a_stride, int j0, const int NA) {
    X8_PROLOGUE(mf_block_q8_0s)
    const __m256i m4 = _mm256_set1_epi8(0xF), ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < n / MF_QK8_0; b++) {
        const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[b].d));
        __m256i lo[4], hi[4];
        _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * c));
            lo[c] = _mm256_and_si256(v, m4);
            hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        }
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
            const int8_t *q = y[j][b].qs;
            /* int16 sums of nibble (0..15) x int8 pairs: 8 chunks add up to at most 8 * 2 * 15 * 128 < 2^15 */
            __m256i p = _mm256_maddubs_epi16(lo[0], bcast4(q));
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(hi[0], bcast4(q + 16)));
            _Pragma("GCC unroll 8") for (int c = 1; c < 4; c++) {
                p = _mm256_add_epi16(p, _mm256_maddubs_epi16(lo[c], bcast4(q + 4 * c)));
                p = _mm256_add_epi16(p, _mm256_maddubs_epi16(hi[c], bcast4(q + 16 + 4 * c)));
            }
            /* sum (nib - 8) * y = sum nib * y - 8 * sum y, exact in int32 */
            const __m256i isum = _mm256_sub_epi32(_mm256_madd_epi16(p, ones), _mm256_slli_epi32(_mm256_set1_epi32(y[j][b].s), 3));
            const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(MF_H2F(y[j][b].d)));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc[j]);
        }
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) store_lanes(s, ldc, j0 + j, acc[j]);
}

/* The +16 of chunk c's 5th bits, for its low nibbles (*lo16) and its high ones (*hi16).  Byte c of each
 * row's qh word holds them, bit t (resp. 4 + t) for byte t of the chunk (quant.h): copy that byte into the
 * lane's 4 bytes, keep bit t of byte t and turn a set one into 0x10. */
static inline __attribute__((always_inline)) MF_AVX2 void q5_hbits16(__m256i qh, const int c, __m256i *lo16,
                                                                     __m256i *hi16) {
    const int k = 0x01010101 * c; /* byte index c of each lane, for every byte of it */
    const __m256i idx = _mm256_setr_epi32(k, k + 0x04040404, k + 0x08080808, k + 0x0C0C0C0C, k, k + 0x04040404,
                                          k + 0x08080808, k + 0x0C0C0C0C);
    const __m256i rep = _mm256_shuffle_epi8(qh, idx);
    const __m256i mlo = _mm256_set1_epi32(0x08040201), mhi = _mm256_set1_epi32((int)0x80402010u);
    const __m256i b16 = _mm256_set1_epi8(0x10);
    *lo16 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(rep, mlo), mlo), b16);
    *hi16 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(rep, mhi), mhi), b16);
}

static inline __attribute__((always_inline)) MF_AVX2 void q5_0x8_rows(int64_t n, float *s, size_t ldc,
                                                                      const mf_block_q5_0x8 *x, const void *a,
                                                                      size_t a_stride, int j0, const int NA) {
    X8_PROLOGUE(mf_block_q8_0s)
    const __m256i m4 = _mm256_set1_epi8(0xF), ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < n / MF_QK8_0; b++) {
        const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[b].d));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)x[b].qh);
        /* unsigned 5-bit values u = q + 16 (0..31) */
        __m256i lo[4], hi[4];
        _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * c));
            __m256i lo16, hi16;
            q5_hbits16(qh, c, &lo16, &hi16);
            lo[c] = _mm256_or_si256(_mm256_and_si256(v, m4), lo16);
            hi[c] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), hi16);
        }
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
            const int8_t *q = y[j][b].qs;
            /* int16 sums of u (0..31) x int8 pairs: a pair is at most 2 * 31 * 128 = 7936, so only 4 may be
             * added before widening (chunks 0-1, then 2-3) */
            __m256i p[2];
            _Pragma("GCC unroll 8") for (int h = 0; h < 2; h++) {
                const int c = 2 * h;
                p[h] = _mm256_maddubs_epi16(lo[c], bcast4(q + 4 * c));
                p[h] = _mm256_add_epi16(p[h], _mm256_maddubs_epi16(hi[c], bcast4(q + 16 + 4 * c)));
                p[h] = _mm256_add_epi16(p[h], _mm256_maddubs_epi16(lo[c + 1], bcast4(q + 4 * (c + 1))));
                p[h] = _mm256_add_epi16(p[h], _mm256_maddubs_epi16(hi[c + 1], bcast4(q + 16 + 4 * (c + 1))));
            }
            const __m256i usum = _mm256_add_epi32(_mm256_madd_epi16(p[0], ones), _mm256_madd_epi16(p[1], ones));
            /* sum (u - 16) * y = sum u * y - 16 * sum y, exact in int32 */
            const __m256i isum = _mm256_sub_epi32(usum, _mm256_slli_epi32(_mm256_set1_epi32(y[j][b].s), 4));
            const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(MF_H2F(y[j][b].d)));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc[j]);
        }
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) store_lanes(s, ldc, j0 + j, acc[j]);
}

static inline __attribute__((always_inline)) MF_AVX2 void q8_0x8_rows(int64_t n, float *s, size_t ldc,
                                                                      const mf_block_q8_0x8 *x, const void *a,
                                                                      size_t a_stride, int j0, const int NA) {
    X8_PROLOGUE(mf_block_q8_0s)
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < n / MF_QK8_0; b++) {
        const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[b].d));
        __m256i isum[4];
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) isum[j] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
            const __m256i w = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * c));
            const __m256i aw = _mm256_sign_epi8(w, w);
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
                /* |w| x sign(y, w): pair sums stay below 2^15 for quants in -127..127 */
                const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(bcast4(y[j][b].qs + 4 * c), w));
                isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(p, ones));
            }
        }
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
            const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(MF_H2F(y[j][b].d)));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), d, acc[j]);
        }
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) store_lanes(s, ldc, j0 + j, acc[j]);
}

/* iq4_nlx8 (q4_0x8's bytes): each nibble through the 16 levels with one pshufb, then q8_0x8's signed
 * product: |w| x sign(y, w), whose pair sums stay below 2^15 for levels and quants in -127..127. */
static inline __attribute__((always_inline)) MF_AVX2 void iq4_nlx8_rows(int64_t n, float *s, size_t ldc,
                                                                        const mf_block_q4_0x8 *x, const void *a,
                                                                        size_t a_stride, int j0, const int NA) {
    X8_PROLOGUE(mf_block_q8_0s)
    const __m256i ones = _mm256_set1_epi16(1), lv = iq4_levels256();
    for (int64_t b = 0; b < n / MF_QK4_NL; b++) {
        const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[b].d));
        __m256i isum[4];
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) isum[j] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * c));
            /* chunk c's low nibbles are quants 4c..4c+3, its high ones 16+4c..16+4c+3 */
            __m256i wl, wh;
            nibble_lookup(v, lv, &wl, &wh);
            const __m256i al = _mm256_sign_epi8(wl, wl), ah = _mm256_sign_epi8(wh, wh);
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
                const int8_t *q = y[j][b].qs;
                const __m256i pl = _mm256_maddubs_epi16(al, _mm256_sign_epi8(bcast4(q + 4 * c), wl));
                const __m256i ph = _mm256_maddubs_epi16(ah, _mm256_sign_epi8(bcast4(q + 16 + 4 * c), wh));
                isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(pl, ones));
                isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(ph, ones));
            }
        }
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
            const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(MF_H2F(y[j][b].d)));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), d, acc[j]);
        }
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) store_lanes(s, ldc, j0 + j, acc[j]);
}

X8_TILE(mf_tile_q4_0x8_avx2, q4_0x8_rows)

X8_TILE(mf_tile_iq4_nlx8_avx2, iq4_nlx8_rows)

X8_TILE(mf_tile_q5_0x8_avx2, q5_0x8_rows)

X8_TILE(mf_tile_q8_0x8_avx2, q8_0x8_rows)

/* q4_Kx8 and q5_Kx8 (Q5: its 5th bits too; its blocks start as q4_Kx8's, quant.h).  One super-block at a
 * time, one sub-block of 32 at a time: its 8 chunks of quants are unpacked once and used by every
 * activation (repack.c has the reference order). */
static inline __attribute__((always_inline)) MF_AVX2 void k4x8_rows(int64_t n, float *s, size_t ldc, const void *w,
                                                                    const void *a, size_t a_stride, int j0,
                                                                    const int NA, const bool Q5) {
    X8_PROLOGUE(mf_block_q8_K)
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const size_t xbytes = Q5 ? sizeof(mf_block_q5_Kx8) : sizeof(mf_block_q4_Kx8);
    /* nibble x int8 pair sums are at most 2 * 15 * 128, 5-bit ones 2 * 31 * 128: 8 resp. 4 chunks of them
     * still fit in int16 before the madd with the scale widens them */
    const int G = Q5 ? 4 : 8;
    for (int64_t b = 0; b < n / MF_QK_K; b++) {
        const mf_block_q4_Kx8 *xb = (const mf_block_q4_Kx8 *)((const char *)w + (size_t)b * xbytes);
        const uint8_t *qh = Q5 ? ((const mf_block_q5_Kx8 *)xb)->qh : NULL;
        if (NA == 1) prefetch_block(xb, xbytes);
        __m256i sc[2], mn[2], isum[4];
        q4k_scales_mins(xb->scales, sc, mn);
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) isum[j] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8") for (int sb = 0; sb < 8; sb++) {
            /* sub-block sb: the low (even sb) or high nibbles of chunks 8 (sb / 2) .. 8 (sb / 2) + 7 (chunk
             * outside: few live registers, no spills) */
            const uint8_t *qs = xb->qs + 256 * (sb / 2);
            const __m256i sc16 = lane_u8_x2(sc[sb / 4], sb % 4);
            __m256i p[4];
            _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
                __m256i q = _mm256_and_si256(sb & 1 ? _mm256_srli_epi16(v, 4) : v, m4);
                if (Q5) q = _mm256_or_si256(q, q5k_hbit(_mm256_loadu_si256((const __m256i *)(qh + 32 * c)), sb));
                _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
                    const __m256i t = _mm256_maddubs_epi16(q, bcast4(y[j][b].qs + 32 * sb + 4 * c));
                    p[j] = c % G == 0 ? t : _mm256_add_epi16(p[j], t);
                    PIN(p[j]);
                }
                if (c % G == G - 1)
                    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
                        isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(p[j], sc16));
                        PIN(isum[j]);
                    }
            }
        }
        q4k_finish(xb, y, b, mn, isum, acc, NA);
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) store_lanes(s, ldc, j0 + j, acc[j]);
}

static inline __attribute__((always_inline)) MF_AVX2 void q4_Kx8_rows(int64_t n, float *s, size_t ldc, const void *w,
                                                                      const void *a, size_t a_stride, int j0,
                                                                      const int NA) {
    k4x8_rows(n, s, ldc, w, a, a_stride, j0, NA, false);
}

static inline __attribute__((always_inline)) MF_AVX2 void q5_Kx8_rows(int64_t n, float *s, size_t ldc, const void *w,
                                                                      const void *a, size_t a_stride, int j0,
                                                                      const int NA) {
    k4x8_rows(n, s, ldc, w, a, a_stride, j0, NA, true);
}

static inline __attribute__((always_inline)) MF_AVX2 void q6_Kx8_rows(int64_t n, float *s, size_t ldc,
                                                                      const mf_block_q6_Kx8 *x, const void *a,
                                                                      size_t a_stride, int j0, const int NA) {
    X8_PROLOGUE(mf_block_q8_K)
    for (int64_t b = 0; b < n / MF_QK_K; b++) {
        if (NA == 1) prefetch_block(&x[b], sizeof x[b]);
        __m256i sv[4], isum[4];
        _Pragma("GCC unroll 8") for (int v = 0; v < 4; v++)
            sv[v] = _mm256_loadu_si256((const __m256i *)(x[b].scales + 32 * v));
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) isum[j] = _mm256_setzero_si256();
        _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) {
            const __m256i sc16 = lane_s8_pair(sv[i / 4], i % 4, i % 4);
            __m256i p[4];
            _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
                const __m256i q = q6k_chunk(&x[b], i, c);
                /* 6-bit x int8 pair sums are at most 2 * 63 * 128: only 2 fit in int16 before the madd */
                _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
                    const __m256i t = _mm256_maddubs_epi16(q, bcast4(y[j][b].qs + 16 * i + 4 * c));
                    p[j] = c % 2 == 0 ? t : _mm256_add_epi16(p[j], t);
                    if (c % 2) {
                        isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(p[j], sc16));
                        PIN(isum[j]);
                    }
                }
            }
        }
        q6k_finish(&x[b], y, b, sv, isum, acc, NA);
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) store_lanes(s, ldc, j0 + j, acc[j]);
}

X8_TILE(mf_tile_q4_Kx8_avx2, q4_Kx8_rows)

X8_TILE(mf_tile_q5_Kx8_avx2, q5_Kx8_rows)

X8_TILE(mf_tile_q6_Kx8_avx2, q6_Kx8_rows)

/* iq4_xsx8: per sub-block its 4 chunks of nibbles go through the 16 levels (one pshufb each, as
 * iq4_nlx8) and are used by every activation; each |y| x sign(w, y) maddubs (pair sums at most
 * 2 * 128 * 127 < 2^15) is multiplied by the sub-block's scale ls - 32 in its madd, exactly (repack.c has
 * the reference order). */
static inline __attribute__((always_inline)) MF_AVX2 void iq4_xsx8_rows(int64_t n, float *s, size_t ldc,
                                                                        const mf_block_iq4_xsx8 *x, const void *a,
                                                                        size_t a_stride, int j0, const int NA) {
    X8_PROLOGUE(mf_block_q8_K)
    const __m256i off = _mm256_set1_epi16(32), lv = iq4_levels256();
    for (int64_t b = 0; b < n / MF_QK_K; b++) {
        if (NA == 1) prefetch_block(&x[b], sizeof x[b]);
        /* lane r: row r's scales_l as a little-endian uint32 (sub-block sb's low bits at 4 sb) and its
         * scales_h (high bits at 2 sb) */
        const __m256i sl = _mm256_loadu_si256((const __m256i *)x[b].scales_l);
        const __m256i sh = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)x[b].scales_h));
        __m256i isum[4];
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) isum[j] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8") for (int sb = 0; sb < 8; sb++) {
            const __m256i ls = iq4xs_scale(sl, sh, sb);
            /* ls - 32 in both int16 halves of the lane (ls is 0..63, so the halves do not interfere) */
            const __m256i sc16 = _mm256_sub_epi16(_mm256_or_si256(ls, _mm256_slli_epi32(ls, 16)), off);
            _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * (4 * sb + c)));
                /* chunk 4 sb + c: low nibbles are values 4c..4c+3 of the sub-block, high ones 16+4c.. */
                __m256i wl, wh;
                nibble_lookup(v, lv, &wl, &wh);
                _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
                    const int8_t *q = y[j][b].qs + 32 * sb;
                    const __m256i yl = bcast4(q + 4 * c), yh = bcast4(q + 16 + 4 * c);
                    /* |y| x sign(w, y): Q8_K holds -128 (its quantizer's scale is -128 / max), which
                     * sign(y, w) cannot negate but abs gives as the unsigned 128; levels are -127..113 */
                    const __m256i pl = _mm256_maddubs_epi16(_mm256_abs_epi8(yl), _mm256_sign_epi8(wl, yl));
                    const __m256i ph = _mm256_maddubs_epi16(_mm256_abs_epi8(yh), _mm256_sign_epi8(wh, yh));
                    isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(pl, sc16));
                    isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(ph, sc16));
                    PIN(isum[j]);
                }
            }
        }
        const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[b].d));
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
            const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(y[j][b].d));
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), d, acc[j]);
        }
    }
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) store_lanes(s, ldc, j0 + j, acc[j]);
}

X8_TILE(mf_tile_iq4_xsx8_avx2, iq4_xsx8_rows)
