/* quant: helpers of the x8 kernels (x8_avx2.c, x8_avx512.c; this folder only).  They carry the AVX2
 * target attribute, so they inline into AVX2 and AVX-512 callers alike. */
#ifndef MF_X8_X86_H
#define MF_X8_X86_H

#include "quant/quant_x86.h"

/* 4 activation quants y[0..3] as one int32, broadcast to every lane */
static inline MF_AVX2 __m256i bcast4(const int8_t *y) {
    int32_t v;
    memcpy(&v, y, 4);
    return _mm256_set1_epi32(v);
}

/* The K-quant GEMVs (an 8-row group's block is 1.1-1.7 KB) read the matrix faster with each block
 * prefetched X8_PF_BLOCKS blocks ahead (one core's q6_Kx8 GEMV from DRAM 16 -> 34 GB/s, two cores' 32 -> 69;
 * 1, 2, 4, 6, 8 and 12 blocks tried, 4-8 best) and tg128 of a Qwen3-0.6B Q4_K_M +40-54 % (Zen 5,
 * 2026-12-05, docs/PERFORMANCE.md).  The small-block x8 and x16 layouts (0.3-0.6 KB) have none: with it
 * q4_0x8 read 25 -> 20 GB/s, and the x16 ones at 1-8 KB ahead no faster.  always_inline is load-bearing:
 * a plain static inline helper called from a target("avx2") kernel is not inlined, and gcc then drops the
 * call as free of side effects - no prefetch reached the binary before 2026-12-05 (tests/cli/prefetch.sh
 * reads the objects). */
#ifndef X8_PF_BLOCKS
#define X8_PF_BLOCKS 4
#endif
static inline __attribute__((always_inline)) void prefetch_block(const void *p, size_t bytes) {
    mf_prefetch_ahead(p, X8_PF_BLOCKS * bytes, bytes);
}

/* the 8 rows' results for activation j: contiguous in the activation-major output */
static inline MF_AVX2 void store_lanes(float *s, size_t ldc, int j, __m256 acc) {
    _mm256_storeu_ps(s + (size_t)j * ldc, acc);
}

/* The start of every x8 kernel: the NA activation rows (from j0) as blocks of type yt, and their float
 * accumulators (8 rows each) at zero */
#define X8_PROLOGUE(yt)                                                                                        \
    const yt *y[4];                                                                                            \
    __m256 acc[4];                                                                                             \
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {                                                     \
        y[j] = (const yt *)((const char *)a + (size_t)(j0 + j) * a_stride);                                    \
        acc[j] = _mm256_setzero_ps();                                                                          \
    }

/* The exported tiles: nw is always MF_X8_ROWS (one group); activations in fours, then singly. */
#define X8_TILE_T(name, rows, TGT)                                                                             \
    TGT void name(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,      \
                  size_t a_stride, int na) {                                                                   \
        (void)w_stride, (void)nw;                                                                              \
        int j = 0;                                                                                             \
        for (; j + 4 <= na; j += 4) rows(n, s, ldc, w, a, a_stride, j, 4);                                     \
        for (; j < na; j++) rows(n, s, ldc, w, a, a_stride, j, 1);                                             \
    }

#define X8_TILE(name, rows) X8_TILE_T(name, rows, MF_AVX2)

/* A pshufb index applying the 4-byte pattern p (byte numbers within a 32-bit lane, 0x80 = zero) to every
 * lane.  Adding 4 * lane to a 0x80 byte keeps its top bit, so it stays zero. */
static inline __attribute__((always_inline)) MF_AVX2 __m256i lane_pattern(uint32_t p) {
    const int a = (int)p, b = (int)(p + 0x04040404u), c = (int)(p + 0x08080808u), d = (int)(p + 0x0C0C0C0Cu);
    return _mm256_setr_epi32(a, b, c, d, a, b, c, d);
}

/* byte k (0..3) of each lane, zero-extended (*_u) or sign-extended (*_s) to the lane's int32 */
static inline __attribute__((always_inline)) MF_AVX2 __m256i lane_u8(__m256i v, const int k) {
    return _mm256_shuffle_epi8(v, lane_pattern(0x80808000u | (uint32_t)k));
}

static inline __attribute__((always_inline)) MF_AVX2 __m256i lane_s8(__m256i v, const int k) {
    return _mm256_srai_epi32(_mm256_shuffle_epi8(v, lane_pattern(0x00808080u | (uint32_t)k << 24)), 24);
}

/* Byte k (0..3) of each lane in both of its int16 halves, zero-extended: madd_epi16 with it multiplies
 * the lane's two int16 pair sums by that row's factor and adds them, exactly. */
static inline __attribute__((always_inline)) MF_AVX2 __m256i lane_u8_x2(__m256i v, const int k) {
    return _mm256_shuffle_epi8(v, lane_pattern(0x80008000u | (uint32_t)k * 0x00010001u));
}

/* Bytes k0 and k1 of each lane as its two int16 halves, sign-extended (through the high byte and an
 * arithmetic shift). */
static inline __attribute__((always_inline)) MF_AVX2 __m256i lane_s8_pair(__m256i v, const int k0,
                                                                          const int k1) {
    const uint32_t p = 0x00800080u | (uint32_t)k0 << 8 | (uint32_t)k1 << 24;
    return _mm256_srai_epi16(_mm256_shuffle_epi8(v, lane_pattern(p)), 8);
}

/* An empty asm that "changes" v: gcc otherwise regroups the integer running sums below (sums of int16
 * products, of per-sub-block madds) into trees whose terms all stay live, and spills dozens of registers. */
#define PIN(v) __asm__("" : "+x"(v))

/* bsums[i], bsums[i + 1] of a Q8_K block as one int32, broadcast: madd with a lane's factor in both int16
 * halves gives factor * (bsums[i] + bsums[i + 1]) */
static inline MF_AVX2 __m256i bsum_pair(const int16_t *bsums) {
    int32_t v;
    memcpy(&v, bsums, 4);
    return _mm256_set1_epi32(v);
}

/* q4_Kx8's 6-bit scales and mins as bytes (quant.h): byte k of lane r of sc[0] = row r's sc[k], of sc[1]
 * its sc[k + 4]; mn the same for the mins.  The shifts are 16-bit: the masks drop what crosses a byte. */
static inline __attribute__((always_inline)) MF_AVX2 void q4k_scales_mins(const uint8_t *p, __m256i sc[2],
                                                                          __m256i mn[2]) {
    const __m256i m4 = _mm256_set1_epi8(0xF), m30 = _mm256_set1_epi8(0x30);
    const __m256i vs = _mm256_loadu_si256((const __m256i *)p);
    const __m256i vm = _mm256_loadu_si256((const __m256i *)(p + 32));
    const __m256i vh = _mm256_loadu_si256((const __m256i *)(p + 64));
    /* low 4 bits from vs / vm, bits 4-5 from the 2-bit fields of vh */
    sc[0] = _mm256_or_si256(_mm256_and_si256(vs, m4), _mm256_and_si256(_mm256_slli_epi16(vh, 4), m30));
    sc[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(vs, 4), m4),
                            _mm256_and_si256(_mm256_slli_epi16(vh, 2), m30));
    mn[0] = _mm256_or_si256(_mm256_and_si256(vm, m4), _mm256_and_si256(vh, m30));
    mn[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(vm, 4), m4),
                            _mm256_and_si256(_mm256_srli_epi16(vh, 2), m30));
}

/* mf_iq4_levels in both 128-bit halves (pshufb looks up within each half) */
static inline MF_AVX2 __m256i iq4_levels256(void) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mf_iq4_levels));
}

/* A chunk of 32 bytes of nibbles through a 16-entry table t (in each 128-bit half): the low nibbles'
 * entries in *lo, the high nibbles' in *hi (the iq4_nl / iq4_xs x8 kernels' one level lookup) */
static inline __attribute__((always_inline)) MF_AVX2 void nibble_lookup(__m256i v, __m256i t, __m256i *lo,
                                                                        __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0xF);
    *lo = _mm256_shuffle_epi8(t, _mm256_and_si256(v, m4));
    *hi = _mm256_shuffle_epi8(t, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
}

/* iq4_xsx8: sub-block sb's 6-bit scale ls (0..63) of each row, from the lanes' scales_l word sl (4 bits at
 * 4 sb) and scales_h word sh (2 bits at 2 sb) */
static inline __attribute__((always_inline)) MF_AVX2 __m256i iq4xs_scale(__m256i sl, __m256i sh, const int sb) {
    return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(sl, 4 * sb), _mm256_set1_epi32(15)),
                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(sh, 2 * sb), _mm256_set1_epi32(3)), 4));
}

/* q5_Kx8: the 5th bits of sub-block sb in one qh chunk (bit sb of each byte) as 0x10 per byte.  The
 * shifts are 16-bit, but bit 4 of each byte only ever comes from bit sb of the same byte. */
static inline __attribute__((always_inline)) MF_AVX2 __m256i q5k_hbit(__m256i qh, const int sb) {
    const __m256i h = sb < 4 ? _mm256_slli_epi16(qh, 4 - sb) : sb == 4 ? qh : _mm256_srli_epi16(qh, sb - 4);
    return _mm256_and_si256(h, _mm256_set1_epi8(0x10));
}

/* Where chunk c (0..3) of q6_Kx8 sub-block i lives.  Sub-block i = 8h + 2k + gg holds values 128h + 32k +
 * 16gg .. + 15: the low (k < 2) or high nibbles of ql chunk q6k_ql_chunk and bits 2k, 2k + 1 of qh chunk
 * q6k_qh_chunk (q6_K's layout); a sub-block's 4 chunks are consecutive in both. */
static inline int q6k_ql_chunk(const int i, const int c) {
    return 16 * (i / 8) + 8 * (((i % 8) / 2) & 1) + 4 * (i % 2) + c;
}

static inline int q6k_qh_chunk(const int i, const int c) {
    return 8 * (i / 8) + 4 * (i % 2) + c;
}

/* q6_K's 6-bit values (unsigned 0..63) of chunk c of sub-block i for the 8 rows */
static inline __attribute__((always_inline)) MF_AVX2 __m256i q6k_chunk(const mf_block_q6_Kx8 *x, const int i,
                                                                       const int c) {
    const int k = (i % 8) / 2;
    const __m256i m4 = _mm256_set1_epi8(0xF), m30 = _mm256_set1_epi8(0x30);
    const __m256i ql = _mm256_loadu_si256((const __m256i *)(x->ql + 32 * q6k_ql_chunk(i, c)));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * q6k_qh_chunk(i, c)));
    const __m256i lo = _mm256_and_si256(k >= 2 ? _mm256_srli_epi16(ql, 4) : ql, m4);
    /* bits 2k, 2k + 1 to bits 4, 5 (16-bit shifts: the mask drops what crosses a byte) */
    const __m256i hs = k == 0 ? _mm256_slli_epi16(qh, 4) : k == 1 ? _mm256_slli_epi16(qh, 2)
                                              : k == 2 ? qh : _mm256_srli_epi16(qh, 2);
    return _mm256_or_si256(lo, _mm256_and_si256(hs, m30));
}

/* The end of a q4_Kx8 super-block b, for both ISAs: the mins (min * the sub-block's activation sum, from
 * two bsums of 16) and the two fmas of the reference order. */
static inline __attribute__((always_inline)) MF_AVX2 void q4k_finish(const mf_block_q4_Kx8 *xb,
                                                                     const mf_block_q8_K *const *y, int64_t b,
                                                                     const __m256i mn[2], const __m256i *isum,
                                                                     __m256 *acc, const int NA) {
    __m256i imin[4];
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) imin[j] = _mm256_setzero_si256();
    _Pragma("GCC unroll 8") for (int sb = 0; sb < 8; sb++) {
        const __m256i mn16 = lane_u8_x2(mn[sb / 4], sb % 4);
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
            const __m256i t = _mm256_madd_epi16(mn16, bsum_pair(y[j][b].bsums + 2 * sb));
            imin[j] = _mm256_add_epi32(imin[j], t);
            PIN(imin[j]);
        }
    }
    const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)xb->d));
    const __m256 dmx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)xb->dmin));
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
        const __m256 da = _mm256_set1_ps(y[j][b].d);
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j]), _mm256_mul_ps(dx, da), acc[j]);
        /* fmaf(-(float)imin, dmin_w * d_a, acc): negating a product is exact */
        acc[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(imin[j]), _mm256_mul_ps(dmx, da), acc[j]);
    }
}

/* The end of a q6_Kx8 super-block b: the values are stored + 32, so subtract 32 * sum of scale * (the
 * sub-block's activation sum), then the reference's fma. */
static inline __attribute__((always_inline)) MF_AVX2 void q6k_finish(const mf_block_q6_Kx8 *xb,
                                                                     const mf_block_q8_K *const *y, int64_t b,
                                                                     const __m256i sv[4], const __m256i *isum,
                                                                     __m256 *acc, const int NA) {
    __m256i corr[4];
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) corr[j] = _mm256_setzero_si256();
    _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++) {
        const __m256i sp = lane_s8_pair(sv[t / 2], 2 * (t % 2), 2 * (t % 2) + 1);
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
            corr[j] = _mm256_add_epi32(corr[j], _mm256_madd_epi16(sp, bsum_pair(y[j][b].bsums + 2 * t)));
            PIN(corr[j]);
        }
    }
    const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)xb->d));
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
        const __m256i q = _mm256_sub_epi32(isum[j], _mm256_slli_epi32(corr[j], 5));
        const __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(y[j][b].d));
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), d, acc[j]);
    }
}

#endif
