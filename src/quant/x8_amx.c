/* quant: AMX-INT8 tile kernels for the K layouts q4_Kx8 / q5_Kx8 / q6_Kx8 (prefill GEMM; quant.h has the
 * layouts, repack.c the references k4_block and q6_K_block).  Only run where kernels_x86.c found AMX
 * usable; the Makefile compiles this file with -mamx-tile -mamx-int8.
 *
 * A pass takes two consecutive 8-row groups at once (one, for the last of an odd count): 16 weight rows.
 * One tdpbssd per 32-quant sub-block: A = 16 activation rows x the sub-block's 32 q8_K quants, B = the
 * sub-block's weights as 8 rows of 4 quants x the 16 weight rows, C = 16 x 16 int32.  The nibbles (with the
 * 5th bit for q5_K: 0..31) are valid signed bytes as they are, and an x8 chunk of 32 bytes is exactly one B
 * row of 8 weight rows (lane r = 4 quants of row r), so unpacking is a mask and a shift per chunk.  C[m][r]
 * is then the reference's exact sub-block sum; times the row's 6-bit scale, summed over the 8 sub-blocks,
 * it is the reference's int32 isum (at most 8 x 63 x 32 x 31 x 128 < 2^31), and the mins' imin comes from
 * the activation bsums as in every q4_K kernel.  The float part is k4_block's two fmas per super-block:
 * bitwise the reference and the AVX-512 x8 kernels for every activation count.
 *
 * q6_K the same way with its 16 sub-blocks of 16 quants (tdpbssd with K = 16): the stored value - 32 is the
 * signed quant (-32..31) itself, so C is the reference's sub-block sum, times the signed 8-bit scale, summed
 * into isum (at most 16 x 128 x 16 x 32 x 128 < 2^31), then q6_K_block's one fma. */
#include "quant/amx_x86.h"
#include "quant/x8_x86.h"

#include <stddef.h>

/* Below this many activations the AVX-512 x8 kernels take them (same bits). */
#define AMX_MIN_NA 8
#define SLAB 16 /* activation rows per A / C tile */
#define KS 2    /* super-blocks per chunk of K: their unpacked weights (2 x 5 KiB) serve every slab */

enum { T_Q4_K, T_Q5_K, T_Q6_K };

/* sub-blocks per super-block, and quants per sub-block (the tiles' K) */
#define NSB(T) ((T) == T_Q6_K ? 16 : 8)
#define SBK(T) (MF_QK_K / NSB(T))

/* Tiles: 0 C (16 x 8G int32), 1 A (16 rows x sbk bytes), 2 B (sbk / 4 rows x 32G bytes); 3 C and 4 A of the
 * last slab when it has fewer than 16 rows (`tail`).  G = 2 groups per pass, or 1. */
static void k4_cfg(amx_cfg *c, int G, int tail, int sbk) {
    memset(c, 0, sizeof *c);
    c->palette = 1;
    const uint8_t rows[5] = {16, 16, (uint8_t)(sbk / 4), (uint8_t)tail, (uint8_t)tail};
    const uint16_t colsb[5] = {(uint16_t)(32 * G), (uint16_t)sbk, (uint16_t)(32 * G), (uint16_t)(32 * G),
                               (uint16_t)sbk};
    for (int t = 0; t < 5; t++) c->rows[t] = rows[t], c->colsb[t] = colsb[t];
}

/* The weight side of one super-block for the pass's 8G rows: its B tiles, the sub-block scales (and q4_K's
 * mins) as int32 per row, and d (and dmin) as floats (lanes past 8G zero). */
typedef struct {
    _Alignas(64) uint8_t b[MF_QK_K / 4][64]; /* sub-block sb's B tile from row sb * sbk / 4: [k][32 g + 4 r + i] */
    _Alignas(64) int32_t sc[16][16], mn[8][16];
    _Alignas(64) float d[16], dmin[16];
} k4_side;

static size_t k_xbytes(const int T) {
    return T == T_Q6_K ? sizeof(mf_block_q6_Kx8) : T == T_Q5_K ? sizeof(mf_block_q5_Kx8) : sizeof(mf_block_q4_Kx8);
}

/* q6_Kx8's half of k4_unpack: quants - 32 as B rows (4 chunks per sub-block), the 16 signed scales */
static inline __attribute__((always_inline)) MF_AVX512 void q6_unpack(const mf_block_q6_Kx8 *xb, int g, k4_side *o) {
    const __m256i b32 = _mm256_set1_epi8(32);
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++)
        _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++)
            _mm256_store_si256((__m256i *)(o->b[4 * i + c] + 32 * g), _mm256_sub_epi8(q6k_chunk(xb, i, c), b32));
    /* scales[32 v + 4 r + k] = row r's scale of sub-block 4 v + k */
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) _mm256_store_si256(
        (__m256i *)(o->sc[i] + 8 * g), lane_s8(_mm256_loadu_si256((const __m256i *)(xb->scales + 32 * (i / 4))), i % 4));
    _mm256_store_ps(o->d + 8 * g, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)xb->d)));
}

static inline __attribute__((always_inline)) MF_AVX512 void k4_unpack(const int T, const int G, const uint8_t *w,
                                                                      size_t gbytes, int64_t b, k4_side *o) {
    const bool Q5 = T == T_Q5_K;
    const size_t xbytes = k_xbytes(T);
    const __m256i m4 = _mm256_set1_epi8(0xF);
    if (G == 1) { /* the lanes past 8 */
        memset(o->sc, 0, sizeof o->sc);
        memset(o->mn, 0, sizeof o->mn);
        memset(o->d, 0, sizeof o->d);
        memset(o->dmin, 0, sizeof o->dmin);
    }
    for (int g = 0; g < G; g++) {
        if (T == T_Q6_K) {
            q6_unpack((const mf_block_q6_Kx8 *)(w + (size_t)g * gbytes + (size_t)b * xbytes), g, o);
            continue;
        }
        const mf_block_q4_Kx8 *xb = (const mf_block_q4_Kx8 *)(w + (size_t)g * gbytes + (size_t)b * xbytes);
        const uint8_t *qh = Q5 ? ((const mf_block_q5_Kx8 *)xb)->qh : NULL;
        _Pragma("GCC unroll 8") for (int sb = 0; sb < 8; sb++) {
            /* sub-block sb: the low (even sb) or high nibbles of chunks 8 (sb / 2) .. 8 (sb / 2) + 7; chunk c of
             * them holds quants 4c..4c+3 of each row, so it is B row c */
            const uint8_t *qs = xb->qs + 256 * (sb / 2);
            _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
                __m256i q = _mm256_and_si256(sb & 1 ? _mm256_srli_epi16(v, 4) : v, m4);
                if (Q5) q = _mm256_or_si256(q, q5k_hbit(_mm256_loadu_si256((const __m256i *)(qh + 32 * c)), sb));
                _mm256_store_si256((__m256i *)(o->b[8 * sb + c] + 32 * g), q);
            }
        }
        /* the scales and mins as bytes, lane r = row r's [k] / [k + 4] (x8_x86.h), then one int32 per row */
        __m256i sc[2], mn[2];
        q4k_scales_mins(xb->scales, sc, mn);
        _Pragma("GCC unroll 8") for (int sb = 0; sb < 8; sb++) {
            _mm256_store_si256((__m256i *)(o->sc[sb] + 8 * g), lane_u8(sc[sb / 4], sb % 4));
            _mm256_store_si256((__m256i *)(o->mn[sb] + 8 * g), lane_u8(mn[sb / 4], sb % 4));
        }
        _mm256_store_ps(o->d + 8 * g, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)xb->d)));
        _mm256_store_ps(o->dmin + 8 * g, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)xb->dmin)));
    }
}

/* na (AMX_MIN_NA..MF_AMX_TILE_A) activation rows against G (1 or 2) consecutive groups, gbytes apart. */
static inline __attribute__((always_inline)) MF_AMX void k4_rows(const int T, const int G, int64_t n, float *s,
                                                                 size_t ldc, const uint8_t *w, size_t gbytes,
                                                                 const void *a, size_t a_stride, int na) {
    const int64_t nb = n / MF_QK_K;
    const int nslab = (na + SLAB - 1) / SLAB, tail = na - SLAB * (nslab - 1); /* tail: 1..16 */
    _Alignas(64) float accbuf[MF_AMX_TILE_A][16];
    _Alignas(64) int32_t cbuf[SLAB][16];
    memset(cbuf, 0, sizeof cbuf); /* lanes past 8G, and a short C tile's missing rows: read, never stored */
    _Alignas(64) k4_side side[KS];
    _Alignas(64) amx_cfg cfg;
    k4_cfg(&cfg, G, tail, SBK(T));
    MEM_FENCE();
    _tile_loadconfig(&cfg);
    for (int64_t kb = 0; kb < nb; kb += KS) {
        const int nbk = (int)MF_MIN((int64_t)KS, nb - kb);
        const bool last = kb + nbk == nb;
        for (int i = 0; i < nbk; i++) k4_unpack(T, G, w, gbytes, kb + i, &side[i]);
        MEM_FENCE();
        for (int sl = 0; sl < nslab; sl++) {
            const int rows = sl == nslab - 1 ? tail : SLAB;
            const char *ys = (const char *)a + (size_t)sl * SLAB * a_stride;
            /* rows past the tail repeat its last row: computed, never stored, and never read out of bounds */
            const mf_block_q8_K *y[SLAB];
            __m512 acc[SLAB];
            _Pragma("GCC unroll 16") for (int m = 0; m < SLAB; m++) {
                y[m] = (const mf_block_q8_K *)(ys + (size_t)MF_MIN(m, rows - 1) * a_stride);
                acc[m] = kb == 0 ? _mm512_setzero_ps() : _mm512_load_ps(accbuf[sl * SLAB + m]);
            }
            for (int i = 0; i < nbk; i++) {
                const int64_t b = kb + i;
                const k4_side *ws = &side[i];
                __m512i isum[SLAB];
                _Pragma("GCC unroll 16") for (int m = 0; m < SLAB; m++) isum[m] = _mm512_setzero_si512();
                for (int sb = 0; sb < NSB(T); sb++) {
                    const char *ab = ys + (size_t)b * sizeof(mf_block_q8_K) + offsetof(mf_block_q8_K, qs) + SBK(T) * sb;
                    const uint8_t *bt = ws->b[SBK(T) / 4 * sb];
                    MEM_FENCE(); /* the last sub-block's reads of cbuf stay before this one's tile store */
                    if (rows < SLAB) {
                        _tile_zero(3);
                        _tile_loadd(4, ab, (long)a_stride);
                        _tile_loadd(2, bt, 64);
                        _tile_dpbssd(3, 4, 2);
                        _tile_stored(3, cbuf, 64);
                    } else {
                        _tile_zero(0);
                        _tile_loadd(1, ab, (long)a_stride);
                        _tile_loadd(2, bt, 64);
                        _tile_dpbssd(0, 1, 2);
                        _tile_stored(0, cbuf, 64);
                    }
                    MEM_FENCE(); /* and its reads after it */
                    const __m512i sc = _mm512_load_si512((const void *)ws->sc[sb]);
                    _Pragma("GCC unroll 16") for (int m = 0; m < SLAB; m++) isum[m] = _mm512_add_epi32(
                        isum[m], _mm512_mullo_epi32(_mm512_load_si512((const void *)cbuf[m]), sc));
                }
                const __m512 dx = _mm512_load_ps(ws->d), dmx = _mm512_load_ps(ws->dmin);
                if (T == T_Q6_K) { /* q6_K_block: one fma */
                    _Pragma("GCC unroll 16") for (int m = 0; m < SLAB; m++) acc[m] = _mm512_fmadd_ps(
                        _mm512_cvtepi32_ps(isum[m]), _mm512_mul_ps(dx, _mm512_set1_ps(y[m][b].d)), acc[m]);
                    continue;
                }
                _Pragma("GCC unroll 16") for (int m = 0; m < SLAB; m++) {
                    __m512i imin = _mm512_setzero_si512();
                    _Pragma("GCC unroll 8") for (int sb = 0; sb < 8; sb++) {
                        const int32_t bs = y[m][b].bsums[2 * sb] + y[m][b].bsums[2 * sb + 1];
                        imin = _mm512_add_epi32(imin, _mm512_mullo_epi32(_mm512_load_si512((const void *)ws->mn[sb]),
                                                                         _mm512_set1_epi32(bs)));
                    }
                    const __m512 da = _mm512_set1_ps(y[m][b].d);
                    acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m]), _mm512_mul_ps(dx, da), acc[m]);
                    /* fmaf(-(float)imin, dmin_w * d_a, acc): negating a product is exact */
                    acc[m] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(imin), _mm512_mul_ps(dmx, da), acc[m]);
                }
            }
            _Pragma("GCC unroll 16") for (int m = 0; m < SLAB; m++) {
                if (!last)
                    _mm512_store_ps(accbuf[sl * SLAB + m], acc[m]);
                else if (m < rows) /* act_major: the pass's 8G results of activation m */
                    _mm512_mask_storeu_ps(s + (size_t)(sl * SLAB + m) * ldc, G == 2 ? 0xFFFF : 0xFF, acc[m]);
            }
        }
    }
    _tile_release();
}

/* The exported tiles (x8 layouts with spans: nw a multiple of 8, that many consecutive groups; output
 * act_major).  Fewer than AMX_MIN_NA activations go to the AVX-512 kernel group by group; more, two groups
 * a pass through the tiles. */
#define AMX_K4(name, T, avx512)                                                                               \
    MF_AMX void name(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,  \
                     size_t a_stride, int na) {                                                               \
        const size_t gbytes = (size_t)(n / MF_QK_K) * k_xbytes(T);                                             \
        const int ng = nw / MF_X8_ROWS;                                                                        \
        for (int g = 0; g < ng; g += 2) {                                                                      \
            const int G = ng - g >= 2 ? 2 : 1;                                                                 \
            const uint8_t *wg = (const uint8_t *)w + (size_t)g * gbytes;                                       \
            float *sg = s + MF_X8_ROWS * g;                                                                    \
            if (na < AMX_MIN_NA) {                                                                             \
                for (int h = 0; h < G; h++)                                                                    \
                    avx512(n, sg + MF_X8_ROWS * h, ldc, wg + h * gbytes, w_stride, MF_X8_ROWS, a, a_stride, na); \
                continue;                                                                                      \
            }                                                                                                  \
            for (int j = 0; j < na; j += MF_AMX_TILE_A) {                                                      \
                const void *aj = (const char *)a + (size_t)j * a_stride;                                       \
                const int nj = MF_MIN(na - j, MF_AMX_TILE_A);                                                  \
                if (G == 2)                                                                                    \
                    k4_rows(T, 2, n, sg + (size_t)j * ldc, ldc, wg, gbytes, aj, a_stride, nj);                \
                else                                                                                           \
                    k4_rows(T, 1, n, sg + (size_t)j * ldc, ldc, wg, gbytes, aj, a_stride, nj);                \
            }                                                                                                  \
        }                                                                                                      \
    }

AMX_K4(MF_AMX_NAME(mf_tile_q4_Kx8_amx), T_Q4_K, mf_tile_q4_Kx8_avx512)
AMX_K4(MF_AMX_NAME(mf_tile_q5_Kx8_amx), T_Q5_K, mf_tile_q5_Kx8_avx512)
AMX_K4(MF_AMX_NAME(mf_tile_q6_Kx8_amx), T_Q6_K, mf_tile_q6_Kx8_avx512)
