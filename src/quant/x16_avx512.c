/* quant: AVX-512 (F/BW/VL/VNNI) GEMV/GEMM kernels for the 16-row layouts q4_0x16 / q5_0x16 / q8_0x16 /
 * iq4_nlx16
 * (quant.h; repack.c has the reference).  Lane r of every 512-bit register is weight row r of the group,
 * and vpdpbusd (unsigned x signed bytes, four adjacent products added into each int32 lane, no
 * saturation) does a chunk of 4 quants for all 16 rows in one instruction:
 *   q4_0 / q5_0: the unsigned nibbles (0..15, 0..31) times the activation, minus 8 (16) * sum(activation);
 *   q8_0: (w xor 0x80) = w + 128 as unsigned, minus 128 * sum(activation);
 *   iq4_nl: the nibble's level + 128 (a pshufb of the biased levels), minus 128 * sum(activation).
 * The q8_0s activations carry each block's exact sum, so the int32 block sum is exact and equal to the
 * reference's; then acc = fma((float)isum, d_w * d_a, acc) per block as there.  Activations are
 * independent of each other (the 8-wide tile and the GEMV run the same operations per pair), so the
 * result never depends on the batch: bitwise the reference for any activation count. */
#include "quant/quant_x86.h"

/* 4 activation quants y[0..3] as one int32 in every lane */
static inline MF_AVX512 __m512i bcast4z(const int8_t *y) {
    int32_t v;
    memcpy(&v, y, 4);
    return _mm512_set1_epi32(v);
}

/* -k * sum(activation quants of the block) in every lane: the start of the block's int32 sum */
static inline MF_AVX512 __m512i neg_sum(const mf_block_q8_0s *y, int shift) {
    return _mm512_set1_epi32(-((int32_t)y->s * (1 << shift)));
}

/* GEMV reads the matrix as one forward stream; a software prefetch a fixed distance ahead keeps more
 * lines in flight than the hardware prefetcher alone. */
#ifndef X16_PF_BYTES
#define X16_PF_BYTES 1024
#endif
static inline void prefetch16(const void *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + X16_PF_BYTES + o, _MM_HINT_T0);
}

static inline MF_AVX512 void acc_block(__m512 *acc, __m512i isum, __m512 dx, uint16_t dy) {
    const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(MF_H2F(dy)));
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, *acc);
}

#define X16_PROLOGUE(xt)                                                                                       \
    const mf_block_q8_0s *y[8];                                                                                \
    __m512 acc[8];                                                                                             \
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {                                                     \
        y[j] = (const mf_block_q8_0s *)((const char *)a + (size_t)(j0 + j) * a_stride);                        \
        acc[j] = _mm512_setzero_ps();                                                                          \
    }                                                                                                          \
    const xt *x = w

#define X16_EPILOGUE                                                                                           \
    _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) _mm512_storeu_ps(s + (size_t)(j0 + j) * ldc, acc[j])

/* NA activation rows against one group of 16 rows.  NA is a constant at every call (always inlined). */
static inline __attribute__((always_inline)) MF_AVX512 void q4_0x16_rows(int64_t n, float *s, size_t ldc,
                                                                         const void *w, const void *a,
                                                                         size_t a_stride, int j0, const int NA) {
    X16_PROLOGUE(mf_block_q4_0x16);
    const __m512i m4 = _mm512_set1_epi8(0xF);
    for (int64_t b = 0; b < n / MF_QK8_0; b++) {
        if (NA == 1) prefetch16(&x[b], sizeof x[b]);
        const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)x[b].d));
        __m512i lo[4], hi[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_loadu_si512((const void *)(x[b].qs + 64 * c));
            lo[c] = _mm512_and_si512(v, m4);
            hi[c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        }
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
            const int8_t *q = y[j][b].qs;
            /* sum (nib - 8) * y = sum nib * y - 8 * sum y, exact in int32 */
            __m512i p = neg_sum(&y[j][b], 3);
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
                p = _mm512_dpbusd_epi32(p, lo[c], bcast4z(q + 4 * c));
                p = _mm512_dpbusd_epi32(p, hi[c], bcast4z(q + 16 + 4 * c));
            }
            acc_block(&acc[j], p, dx, y[j][b].d);
        }
    }
    X16_EPILOGUE;
}

/* The +16 of chunk c's 5th bits as masks, for its low nibbles (*klo) and its high ones (*khi).  Byte c of
 * each row's qh word holds them, bit t (resp. 4 + t) for byte t of the chunk (quant.h): copy that byte into
 * the lane's 4 bytes and test bit t of byte t. */
static inline __attribute__((always_inline)) MF_AVX512 void q5_hmask(__m512i qh, const int c, __mmask64 *klo,
                                                                     __mmask64 *khi) {
    const int k = 0x01010101 * c; /* byte index c of each lane, for every byte of it */
    const __m512i idx = _mm512_set4_epi32(k + 0x0C0C0C0C, k + 0x08080808, k + 0x04040404, k);
    const __m512i rep = _mm512_shuffle_epi8(qh, idx);
    *klo = _mm512_test_epi8_mask(rep, _mm512_set1_epi32(0x08040201));
    *khi = _mm512_test_epi8_mask(rep, _mm512_set1_epi32((int)0x80402010u));
}

static inline __attribute__((always_inline)) MF_AVX512 void q5_0x16_rows(int64_t n, float *s, size_t ldc,
                                                                         const void *w, const void *a,
                                                                         size_t a_stride, int j0, const int NA) {
    X16_PROLOGUE(mf_block_q5_0x16);
    const __m512i m4 = _mm512_set1_epi8(0xF), b16 = _mm512_set1_epi8(0x10);
    for (int64_t b = 0; b < n / MF_QK8_0; b++) {
        if (NA == 1) prefetch16(&x[b], sizeof x[b]);
        const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)x[b].d));
        const __m512i qh = _mm512_loadu_si512((const void *)x[b].qh);
        /* unsigned 5-bit values u = q + 16 (0..31) */
        __m512i lo[4], hi[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_loadu_si512((const void *)(x[b].qs + 64 * c));
            __mmask64 klo, khi;
            q5_hmask(qh, c, &klo, &khi);
            const __m512i l = _mm512_and_si512(v, m4), h = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            lo[c] = _mm512_mask_add_epi8(l, klo, l, b16);
            hi[c] = _mm512_mask_add_epi8(h, khi, h, b16);
        }
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
            const int8_t *q = y[j][b].qs;
            __m512i p = neg_sum(&y[j][b], 4); /* sum (u - 16) * y = sum u * y - 16 * sum y */
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
                p = _mm512_dpbusd_epi32(p, lo[c], bcast4z(q + 4 * c));
                p = _mm512_dpbusd_epi32(p, hi[c], bcast4z(q + 16 + 4 * c));
            }
            acc_block(&acc[j], p, dx, y[j][b].d);
        }
    }
    X16_EPILOGUE;
}

static inline __attribute__((always_inline)) MF_AVX512 void q8_0x16_rows(int64_t n, float *s, size_t ldc,
                                                                         const void *w, const void *a,
                                                                         size_t a_stride, int j0, const int NA) {
    X16_PROLOGUE(mf_block_q8_0x16);
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    for (int64_t b = 0; b < n / MF_QK8_0; b++) {
        if (NA == 1) prefetch16(&x[b], sizeof x[b]);
        const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)x[b].d));
        __m512i u[8];
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++)
            u[c] = _mm512_xor_si512(_mm512_loadu_si512((const void *)(x[b].qs + 64 * c)), bias);
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
            const int8_t *q = y[j][b].qs;
            __m512i p = neg_sum(&y[j][b], 7); /* sum (w + 128) * y - 128 * sum y */
            _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) p = _mm512_dpbusd_epi32(p, u[c], bcast4z(q + 4 * c));
            acc_block(&acc[j], p, dx, y[j][b].d);
        }
    }
    X16_EPILOGUE;
}

/* iq4_nlx16 (q4_0x16's bytes): each nibble through the 16 levels + 128 (1..241, unsigned) with one pshufb,
 * then q8_0x16's sum (w + 128) * y - 128 * sum y. */
static inline __attribute__((always_inline)) MF_AVX512 void iq4_nlx16_rows(int64_t n, float *s, size_t ldc,
                                                                           const void *w, const void *a,
                                                                           size_t a_stride, int j0, const int NA) {
    X16_PROLOGUE(mf_block_q4_0x16);
    const __m512i m4 = _mm512_set1_epi8(0xF), bias = _mm512_set1_epi8((char)0x80);
    const __m512i lv = _mm512_xor_si512(
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)mf_iq4_levels)), bias);
    for (int64_t b = 0; b < n / MF_QK4_NL; b++) {
        if (NA == 1) prefetch16(&x[b], sizeof x[b]);
        const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)x[b].d));
        __m512i lo[4], hi[4];
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_loadu_si512((const void *)(x[b].qs + 64 * c));
            lo[c] = _mm512_shuffle_epi8(lv, _mm512_and_si512(v, m4));
            hi[c] = _mm512_shuffle_epi8(lv, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        }
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {
            const int8_t *q = y[j][b].qs;
            __m512i p = neg_sum(&y[j][b], 7); /* sum (w + 128) * y - 128 * sum y */
            _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
                p = _mm512_dpbusd_epi32(p, lo[c], bcast4z(q + 4 * c));
                p = _mm512_dpbusd_epi32(p, hi[c], bcast4z(q + 16 + 4 * c));
            }
            acc_block(&acc[j], p, dx, y[j][b].d);
        }
    }
    X16_EPILOGUE;
}

/* The exported tiles: nw is always MF_X16_ROWS (one group); activations in eights, the rest in one pass of
 * their count. */
#define X16_TILE(name, rows)                                                                                   \
    MF_AVX512 void name(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a, \
                        size_t a_stride, int na) {                                                             \
        (void)w_stride, (void)nw;                                                                              \
        int j = 0;                                                                                             \
        for (; j + 8 <= na; j += 8) rows(n, s, ldc, w, a, a_stride, j, 8);                                     \
        switch (na - j) {                                                                                      \
        case 7: rows(n, s, ldc, w, a, a_stride, j, 7); break;                                                  \
        case 6: rows(n, s, ldc, w, a, a_stride, j, 6); break;                                                  \
        case 5: rows(n, s, ldc, w, a, a_stride, j, 5); break;                                                  \
        case 4: rows(n, s, ldc, w, a, a_stride, j, 4); break;                                                  \
        case 3: rows(n, s, ldc, w, a, a_stride, j, 3); break;                                                  \
        case 2: rows(n, s, ldc, w, a, a_stride, j, 2); break;                                                  \
        case 1: rows(n, s, ldc, w, a, a_stride, j, 1); break;                                                  \
        default: break;                                                                                        \
        }                                                                                                      \
    }

X16_TILE(mf_tile_q4_0x16_avx512, q4_0x16_rows)

X16_TILE(mf_tile_q5_0x16_avx512, q5_0x16_rows)

X16_TILE(mf_tile_q8_0x16_avx512, q8_0x16_rows)
X16_TILE(mf_tile_iq4_nlx16_avx512, iq4_nlx16_rows)
