/* quant: AMX-INT8 tile kernels for the 16-row layouts q4_0x16 / q5_0x16 / q8_0x16 / iq4_nlx16 (prefill
 * GEMM; quant.h has the layouts, repack.c the reference).  Only run where kernels_x86.c found AMX usable
 * (cpuid, XCR0, the Linux tile permission); the Makefile compiles this file with -mamx-tile -mamx-int8.
 *
 * One tdpbssd per 32-quant block: A = 16 activation rows x the block's 32 quants (q8_0s rows, a_stride
 * apart), B = the block's weights as 8 rows of 4 quants x 16 weight rows (exactly the x16 chunk layout:
 * q8_0x16's quants are B as stored; q4_0 / q5_0 / iq4_nl are unpacked to signed bytes first), C = 16 x 16
 * int32.  So C[m][r] is the exact int32 sum of the block for activation m and weight row r - the
 * reference's isum - and the float part is the reference's too: acc = fma((float)isum, d_w * d_a, acc),
 * block after block.  Bitwise the reference and the AVX-512 x16 kernels for every activation count, so
 * which kernel runs which rows never shows in a result.
 *
 * The tile registers are per thread: every call loads its config (ldtilecfg) and releases the tiles at the
 * end (tilerelease), so an idle pool thread holds no tile state. */
#include "quant/amx_x86.h"

#include <stddef.h>

/* Below this many activations the tile's fixed cost (B load, 16-row C store) buys nothing: the AVX-512 x16
 * kernels take them (same bits). */
#define AMX_MIN_NA 8
#define SLAB 16 /* activation rows per A / C tile */
#define KB 16   /* blocks per chunk of K: their unpacked B tiles (8 KiB) are reused by every slab */

/* Tiles: 0, 1 C (16 x 16 int32, alternate blocks); 2, 7 A (16 rows x 32 bytes); 3, 6 B (8 rows x 64 bytes);
 * 4 C and 5 A of the last slab when it has fewer than 16 rows (`tail`). */
static void cfg_make(amx_cfg *c, int tail) {
    memset(c, 0, sizeof *c);
    c->palette = 1;
    static const uint8_t rows[8] = {16, 16, 16, 8, 0, 0, 8, 16};
    static const uint16_t colsb[8] = {64, 64, 32, 64, 64, 32, 64, 32};
    for (int t = 0; t < 8; t++) c->rows[t] = rows[t], c->colsb[t] = colsb[t];
    c->rows[4] = c->rows[5] = (uint8_t)tail;
}

enum { T_Q4_0, T_Q5_0, T_Q8_0, T_IQ4_NL };

/* The +16 of chunk c's 5th bits as byte masks for its low (*klo) and high (*khi) nibbles (x16_avx512.c has
 * the same): byte c of each row's qh word, bit t (4 + t) for byte t of the chunk. */
static inline __attribute__((always_inline)) MF_AVX512 void q5_hmask(__m512i qh, const int c, __mmask64 *klo,
                                                                     __mmask64 *khi) {
    const int k = 0x01010101 * c;
    const __m512i idx = _mm512_set4_epi32(k + 0x0C0C0C0C, k + 0x08080808, k + 0x04040404, k);
    const __m512i rep = _mm512_shuffle_epi8(qh, idx);
    *klo = _mm512_test_epi8_mask(rep, _mm512_set1_epi32(0x08040201));
    *khi = _mm512_test_epi8_mask(rep, _mm512_set1_epi32((int)0x80402010u));
}

/* One block's weights as the B tile (8 rows x 64 bytes of signed quants, row k = quants 4k..4k+3 of each of
 * the 16 rows): chunk c's low nibbles are row c, its high nibbles row 4 + c. */
static inline __attribute__((always_inline)) MF_AVX512 void unpack_b(const int T, const uint8_t *xb,
                                                                     uint8_t *out) {
    const __m512i m4 = _mm512_set1_epi8(0xF);
    if (T == T_IQ4_NL) { /* q4_0x16's bytes, each nibble through the 16 signed levels */
        const mf_block_q4_0x16 *x = (const mf_block_q4_0x16 *)xb;
        const __m512i lv = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)mf_iq4_levels));
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_loadu_si512((const void *)(x->qs + 64 * c));
            _mm512_store_si512((void *)(out + 64 * c), _mm512_shuffle_epi8(lv, _mm512_and_si512(v, m4)));
            _mm512_store_si512((void *)(out + 64 * (4 + c)),
                               _mm512_shuffle_epi8(lv, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4)));
        }
    } else if (T == T_Q4_0) {
        const mf_block_q4_0x16 *x = (const mf_block_q4_0x16 *)xb;
        const __m512i b8 = _mm512_set1_epi8(8);
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_loadu_si512((const void *)(x->qs + 64 * c));
            _mm512_store_si512((void *)(out + 64 * c), _mm512_sub_epi8(_mm512_and_si512(v, m4), b8));
            _mm512_store_si512((void *)(out + 64 * (4 + c)),
                               _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), b8));
        }
    } else {
        const mf_block_q5_0x16 *x = (const mf_block_q5_0x16 *)xb;
        const __m512i b16 = _mm512_set1_epi8(16), qh = _mm512_loadu_si512((const void *)x->qh);
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
            const __m512i v = _mm512_loadu_si512((const void *)(x->qs + 64 * c));
            __mmask64 klo, khi;
            q5_hmask(qh, c, &klo, &khi);
            /* value - 16 = the nibble where the 5th bit is set, the nibble - 16 where it is not */
            const __m512i l = _mm512_and_si512(v, m4), h = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            _mm512_store_si512((void *)(out + 64 * c), _mm512_mask_sub_epi8(l, ~klo, l, b16));
            _mm512_store_si512((void *)(out + 64 * (4 + c)), _mm512_mask_sub_epi8(h, ~khi, h, b16));
        }
    }
}

/* The 16 scales of a group's block b as floats (d[16] is the first field of every x16 block). */
static inline __attribute__((always_inline)) MF_AVX512 __m512 block_dx(const uint8_t *xb) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)xb));
}

/* na (AMX_MIN_NA..MF_AMX_TILE_A) activation rows against one group of 16 weight rows. */
static inline __attribute__((always_inline)) MF_AMX void amx_rows(const int T, int64_t n, float *s, size_t ldc,
                                                                  const void *w, const void *a, size_t a_stride,
                                                                  int na) {
    const size_t xbytes = T == T_Q8_0   ? sizeof(mf_block_q8_0x16)
                          : T == T_Q4_0 || T == T_IQ4_NL ? sizeof(mf_block_q4_0x16)
                                        : sizeof(mf_block_q5_0x16);
    const size_t qs_off = T == T_Q8_0 ? offsetof(mf_block_q8_0x16, qs) : 0;
    const int64_t nb = n / MF_QK8_0;
    const int nslab = (na + SLAB - 1) / SLAB, tail = na - SLAB * (nslab - 1); /* tail: 1..16 */
    _Alignas(64) float accbuf[MF_AMX_TILE_A][16];
    _Alignas(64) int32_t cbuf[2][SLAB][16];
    if (tail < SLAB) memset(cbuf, 0, sizeof cbuf); /* a short C tile stores only its rows: the rest stay read */
    _Alignas(64) uint8_t bbuf[KB][512]; /* the unpacked B tiles (q4_0, q5_0) */
    _Alignas(64) amx_cfg cfg;
    cfg_make(&cfg, tail < SLAB ? tail : SLAB);
    MEM_FENCE();
    _tile_loadconfig(&cfg);
    for (int64_t kb = 0; kb < nb; kb += KB) {
        const int nbk = (int)MF_MIN((int64_t)KB, nb - kb);
        const bool last = kb + nbk == nb;
        const uint8_t *bp[KB];
        for (int i = 0; i < nbk; i++) {
            const uint8_t *xb = (const uint8_t *)w + (size_t)(kb + i) * xbytes;
            if (T == T_Q8_0) {
                bp[i] = xb + qs_off; /* q8_0x16's quants are the B tile as they are */
            } else {
                unpack_b(T, xb, bbuf[i]);
                bp[i] = bbuf[i];
            }
        }
        MEM_FENCE();
        for (int sl = 0; sl < nslab; sl++) {
            const int rows = sl == nslab - 1 ? tail : SLAB;
            const char *ys = (const char *)a + (size_t)sl * SLAB * a_stride;
            /* rows past the tail repeat its last row: computed, never stored, and never read out of bounds */
            const mf_block_q8_0s *y[SLAB];
            __m512 acc[SLAB];
            _Pragma("GCC unroll 16") for (int m = 0; m < SLAB; m++) {
                y[m] = (const mf_block_q8_0s *)(ys + (size_t)MF_MIN(m, rows - 1) * a_stride);
                acc[m] = kb == 0 ? _mm512_setzero_ps() : _mm512_load_ps(accbuf[sl * SLAB + m]);
            }
            for (int i = 0; i < nbk; i++) {
                const int64_t b = kb + i;
                const char *ab = ys + (size_t)b * sizeof(mf_block_q8_0s) + offsetof(mf_block_q8_0s, qs);
                int32_t(*cb)[16] = cbuf[i & 1];
                MEM_FENCE(); /* block i - 2's reads of this cbuf stay before the tile store */
                if (rows < SLAB) {
                    _tile_zero(4);
                    _tile_loadd(5, ab, (long)a_stride);
                    _tile_loadd(3, bp[i], 64);
                    _tile_dpbssd(4, 5, 3);
                    _tile_stored(4, cb, 64);
                } else if (i & 1) { /* alternate tiles, so block i + 1's tile work overlaps block i's floats */
                    _tile_zero(1);
                    _tile_loadd(7, ab, (long)a_stride);
                    _tile_loadd(6, bp[i], 64);
                    _tile_dpbssd(1, 7, 6);
                    _tile_stored(1, cb, 64);
                } else {
                    _tile_zero(0);
                    _tile_loadd(2, ab, (long)a_stride);
                    _tile_loadd(3, bp[i], 64);
                    _tile_dpbssd(0, 2, 3);
                    _tile_stored(0, cb, 64);
                }
                MEM_FENCE(); /* and this block's reads after it */
                const __m512 dx = block_dx((const uint8_t *)w + (size_t)b * xbytes);
                _Pragma("GCC unroll 16") for (int m = 0; m < SLAB; m++) {
                    const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(MF_H2F(y[m][b].d)));
                    acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)cb[m])), d, acc[m]);
                }
            }
            _Pragma("GCC unroll 16") for (int m = 0; m < SLAB; m++) {
                if (!last)
                    _mm512_store_ps(accbuf[sl * SLAB + m], acc[m]);
                else if (m < rows)
                    _mm512_storeu_ps(s + (size_t)(sl * SLAB + m) * ldc, acc[m]); /* act_major */
            }
        }
    }
    _tile_release();
}

/* The exported tiles (the x16 contract: nw is a multiple of 16, that many consecutive groups; output
 * act_major).  Fewer than AMX_MIN_NA activations go to the AVX-512 kernel whole (its GEMV streams several
 * groups side by side); more, group by group through the tiles. */
#define AMX_TILE(name, T, avx512)                                                                              \
    MF_AMX void name(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,  \
                     size_t a_stride, int na) {                                                               \
        if (na < AMX_MIN_NA) {                                                                                 \
            avx512(n, s, ldc, w, w_stride, nw, a, a_stride, na);                                               \
            return;                                                                                            \
        }                                                                                                      \
        const size_t gbytes = (size_t)(n / MF_QK8_0) * (T == T_Q8_0   ? sizeof(mf_block_q8_0x16)              \
                                                        : T == T_Q5_0 ? sizeof(mf_block_q5_0x16)              \
                                                                      : sizeof(mf_block_q4_0x16));            \
        for (int g = 0; g < nw / MF_X16_ROWS; g++)                                                             \
            for (int j = 0; j < na; j += MF_AMX_TILE_A)                                                        \
                amx_rows(T, n, s + (size_t)j * ldc + MF_X16_ROWS * g, ldc, (const char *)w + g * gbytes,       \
                         (const char *)a + (size_t)j * a_stride, a_stride, MF_MIN(na - j, MF_AMX_TILE_A));     \
    }

AMX_TILE(MF_AMX_NAME(mf_tile_q4_0x16_amx), T_Q4_0, mf_tile_q4_0x16_avx512)
AMX_TILE(MF_AMX_NAME(mf_tile_q5_0x16_amx), T_Q5_0, mf_tile_q5_0x16_avx512)
AMX_TILE(MF_AMX_NAME(mf_tile_q8_0x16_amx), T_Q8_0, mf_tile_q8_0x16_avx512)
AMX_TILE(MF_AMX_NAME(mf_tile_iq4_nlx16_amx), T_IQ4_NL, mf_tile_iq4_nlx16_avx512)
