/* quant: AMX-INT8 tile kernels for the 16-row layouts q4_0x16 / q5_0x16 / q8_0x16 / iq4_nlx16 (prefill
 * GEMM; quant.h has the layouts, repack.c the reference).  Only run where kernels_x86.c found AMX usable
 * (cpuid, XCR0, the Linux tile permission); the Makefile compiles this file with -mamx-tile -mamx-int8.
 *
 * One tdpbssd per 32-quant block: A = 16 activation rows x the block's 32 quants, B = the block's weights as
 * 8 rows of 4 quants x 16 weight rows (exactly the x16 chunk layout: q8_0x16's quants are B as stored;
 * q4_0 / q5_0 / iq4_nl are unpacked to signed bytes first), C = 16 x 16 int32.  So C[m][r] is the exact
 * int32 sum of the block for activation m and weight row r - the reference's isum - and the float part is
 * the reference's too: acc = fma((float)isum, d_w * d_a, acc), block after block.  Bitwise the reference
 * and the AVX-512 x16 kernels for every activation count, so which kernel runs which rows never shows in a
 * result.
 *
 * The activations go through the tiles in tile order (tile_row: each 16-row slab's block is 512
 * contiguous bytes, its scales floats): a tile load of the q8_0s rows as they are (36-byte blocks, so half
 * the rows cross a cache line) took twice as long, and converting each f16 scale again for every group of
 * weight rows was most of the float part's extra work.  A matmul packs its rows so once for all its calls
 * (mf_amx_pack_row, then the _packed kernels); a plain vec_dot_tile call copies its own rows first.  Per
 * block the tile unit stores C while the vector units scale the previous block's C (the tile unit runs
 * its instructions in order, so this is where the two overlap).
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

/* Tiles: 0, 1 C (16 x 16 int32, alternate blocks); 2, 7 A (16 rows x 32 bytes); 3, 6 B (8 rows x 64
 * bytes).  Every slab has 16 rows in tile order (act_tiles pads the last), so there is one shape. */
static void cfg_make(amx_cfg *c) {
    memset(c, 0, sizeof *c);
    c->palette = 1;
    static const uint8_t rows[8] = {16, 16, 16, 8, 0, 0, 8, 16};
    static const uint16_t colsb[8] = {64, 64, 32, 64, 0, 0, 64, 32};
    for (int t = 0; t < 8; t++) c->rows[t] = rows[t], c->colsb[t] = colsb[t];
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

/* Tile order, shared by a call's own copy (act_tiles) and a matmul's packed copy (mf_amx_pack_row): slab S
 * (activation rows 16 S .. 16 S + 15) of block b is 512 contiguous bytes at q + ((S * sstride + b) * 16 + r)
 * * 32, its 16 scales floats at da + (S * sstride + b) * 16 + r; sstride is the blocks a slab holds. */
static inline __attribute__((always_inline)) MF_AVX512 void tile_row(const mf_block_q8_0s *y, int nbk,
                                                                     size_t sstride, int slab, int r, int8_t *q,
                                                                     float *da) {
    for (int i = 0; i < nbk; i++) {
        const size_t at = ((size_t)slab * sstride + (size_t)i) * SLAB + (size_t)r;
        _mm256_store_si256((__m256i *)(q + at * MF_QK8_0), _mm256_loadu_si256((const __m256i *)y[i].qs));
        da[at] = MF_H2F(y[i].d);
    }
}

/* A call's own copy: blocks [kb0, kb0 + nbk) of na activation rows (sstride nbk).  Rows past na repeat row
 * na - 1: the tiles compute them, nothing stores them. */
static inline __attribute__((always_inline)) MF_AVX512 void act_tiles(const void *a, size_t a_stride, int na,
                                                                      int64_t kb0, int nbk, int8_t *q,
                                                                      float *da) {
    for (int m = 0; m < (na + SLAB - 1) / SLAB * SLAB; m++) {
        const char *row = (const char *)a + (size_t)MF_MIN(m, na - 1) * a_stride;
        tile_row((const mf_block_q8_0s *)row + kb0, nbk, (size_t)nbk, m / SLAB, m % SLAB, q, da);
    }
}

/* The packed copy of M rows of K: every slab's quants, then every slab's scales. */
MF_AVX512 size_t MF_AMX_NAME(mf_amx_pack_size)(int64_t K, int64_t M) {
    if (M < AMX_MIN_NA) return 0; /* below the tiles' minimum the AVX-512 kernels run, unpacked */
    return (size_t)((M + SLAB - 1) / SLAB) * (size_t)(K / MF_QK8_0) * SLAB * (MF_QK8_0 + sizeof(float));
}

MF_AVX512 void MF_AMX_NAME(mf_amx_pack_row)(const void *row, int64_t K, int64_t m, int64_t M, void *p) {
    const size_t nb = (size_t)(K / MF_QK8_0), nslab = (size_t)((M + SLAB - 1) / SLAB);
    int8_t *q = p;
    float *da = (float *)(q + nslab * nb * SLAB * MF_QK8_0);
    tile_row(row, (int)nb, nb, (int)(m / SLAB), (int)(m % SLAB), q, da);
    if (m == M - 1) /* the last slab's rows past M repeat row M - 1, as in a call's own copy */
        for (int64_t r = M; r < (int64_t)(nslab * SLAB); r++)
            tile_row(row, (int)nb, nb, (int)(r / SLAB), (int)(r % SLAB), q, da);
}

/* One group of 16 weight rows (w: the group's first block) against na activation rows, blocks [kb0, kb0 +
 * nbk) in tile order (q, da: slab 0's block kb0; sstride: see tile_row).  kb0 == 0 starts the sums; a
 * later range adds to the partial sums s holds (a float stored and loaded back is the same float, so the
 * order is still block after block).  snext: the next group's output (NULL: none), whose rows are
 * prefetched for writing meanwhile (their first write missed the caches for a wide matrix: +25 % time at
 * N 4864).  The caller has loaded the tile config. */
static inline __attribute__((always_inline)) MF_AMX void amx_rows(const int T, int64_t kb0, int nbk, float *s,
                                                                  size_t ldc, const void *w, const float *snext,
                                                                  const int8_t *q, const float *da,
                                                                  size_t sstride, int na) {
    const size_t xbytes = T == T_Q8_0   ? sizeof(mf_block_q8_0x16)
                          : T == T_Q4_0 || T == T_IQ4_NL ? sizeof(mf_block_q4_0x16)
                                        : sizeof(mf_block_q5_0x16);
    const size_t qs_off = T == T_Q8_0 ? offsetof(mf_block_q8_0x16, qs) : 0;
    const int nslab = (na + SLAB - 1) / SLAB;
    _Alignas(64) int32_t cbuf[2][SLAB][16];
    _Alignas(64) uint8_t bbuf[KB][512]; /* the unpacked B tiles (q4_0, q5_0, iq4_nl) */
    const uint8_t *bp[KB];
    const uint8_t *wb = (const uint8_t *)w + (size_t)kb0 * xbytes;
    for (int i = 0; i < nbk; i++) {
        if (T == T_Q8_0) {
            bp[i] = wb + (size_t)i * xbytes + qs_off; /* q8_0x16's quants are the B tile as they are */
        } else {
            unpack_b(T, wb + (size_t)i * xbytes, bbuf[i]);
            bp[i] = bbuf[i];
        }
    }
    MEM_FENCE();
    for (int sl = 0; sl < nslab; sl++) {
        const int rows = MF_MIN(SLAB, na - sl * SLAB);
        const int8_t *qs = q + (size_t)sl * sstride * SLAB * MF_QK8_0;
        const float *ds = da + (size_t)sl * sstride * SLAB;
        float *ss = s + (size_t)sl * SLAB * ldc;
        __m512 acc[SLAB];
        _Pragma("GCC unroll 16") for (int m = 0; m < SLAB; m++)
            acc[m] = kb0 == 0 ? _mm512_setzero_ps() /* rows past the tail: computed, never stored */
                              : _mm512_loadu_ps(ss + (size_t)MF_MIN(m, rows - 1) * ldc);
        /* the float part runs one block behind the tiles: block i's products are stored while block i - 1's
         * (stored a block earlier, so its loads need not wait for the tile unit) are scaled */
        for (int i = 0; i <= nbk; i++) {
            if (i < nbk) {
                const int8_t *ab = qs + (size_t)i * SLAB * MF_QK8_0;
                const int pl = 2 * (sl * nbk + i);
                if (snext && pl < na) {
                    __builtin_prefetch(snext + (size_t)pl * ldc, 1, 3);
                    if (pl + 1 < na) __builtin_prefetch(snext + (size_t)(pl + 1) * ldc, 1, 3);
                }
                MEM_FENCE(); /* block i - 2's reads of this cbuf stay before the tile store */
                if (i & 1) { /* alternate tiles and buffers */
                    _tile_zero(1);
                    _tile_loadd(7, ab, MF_QK8_0);
                    _tile_loadd(6, bp[i], 64);
                    _tile_dpbssd(1, 7, 6);
                    _tile_stored(1, cbuf[1], 64);
                } else {
                    _tile_zero(0);
                    _tile_loadd(2, ab, MF_QK8_0);
                    _tile_loadd(3, bp[i], 64);
                    _tile_dpbssd(0, 2, 3);
                    _tile_stored(0, cbuf[0], 64);
                }
                MEM_FENCE(); /* and the reads below after it */
            }
            if (i > 0) {
                const int f = i - 1;
                int32_t(*cb)[16] = cbuf[f & 1];
                const __m512 dx = block_dx(wb + (size_t)f * xbytes);
                const float *dab = ds + (size_t)f * SLAB;
                _Pragma("GCC unroll 16") for (int m = 0; m < SLAB; m++) {
                    const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(dab[m]));
                    acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)cb[m])), d, acc[m]);
                }
            }
        }
        _Pragma("GCC unroll 16") for (int m = 0; m < SLAB; m++)
            if (m < rows) _mm512_storeu_ps(ss + (size_t)m * ldc, acc[m]); /* act_major */
    }
}

/* Every group of a span (ng groups) against nj <= MF_AMX_TILE_A rows in tile order, KB blocks at a time:
 * prep makes the chunk's rows ready, q_at / da_at are its slab 0's block kb0, sstride blocks a slab. */
#define AMX_GROUPS(T, prep, q_at, da_at, sstride)                                                              \
    for (int64_t kb0 = 0; kb0 < nb; kb0 += KB) {                                                               \
        const int nbk = (int)MF_MIN((int64_t)KB, nb - kb0);                                                    \
        prep;                                                                                                  \
        for (int g = 0; g < ng; g++)                                                                           \
            amx_rows(T, kb0, nbk, sj + MF_X16_ROWS * g, ldc, (const char *)w + g * gbytes,                     \
                     g + 1 < ng ? sj + MF_X16_ROWS * (g + 1) : NULL, q_at, da_at, sstride, nj);                \
    }

static inline size_t group_bytes(const int T, int64_t n) {
    return (size_t)(n / MF_QK8_0) * (T == T_Q8_0   ? sizeof(mf_block_q8_0x16)
                                     : T == T_Q5_0 ? sizeof(mf_block_q5_0x16)
                                                   : sizeof(mf_block_q4_0x16));
}

/* The exported tiles (the x16 contract: nw is a multiple of 16, that many consecutive groups; output
 * act_major).  Fewer than AMX_MIN_NA activations go to the AVX-512 kernel whole (its GEMV streams several
 * groups side by side); more, MF_AMX_TILE_A at a time, each KB blocks of K copied into tile order (64 KiB
 * of quants and 8 KiB of scales on the stack) and then run through every group.  The _packed twins take
 * the rows from a matmul's packed copy instead (mf_amx_pack_row), made once for all its calls. */
#define AMX_TILE(name, T, avx512)                                                                              \
    MF_AMX void MF_AMX_NAME(name)(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw,    \
                                  const void *a, size_t a_stride, int na) {                                    \
        if (na < AMX_MIN_NA) {                                                                                 \
            avx512(n, s, ldc, w, w_stride, nw, a, a_stride, na);                                               \
            return;                                                                                            \
        }                                                                                                      \
        const int64_t nb = n / MF_QK8_0;                                                                       \
        const size_t gbytes = group_bytes(T, n);                                                               \
        const int ng = nw / MF_X16_ROWS;                                                                       \
        _Alignas(64) int8_t q[MF_AMX_TILE_A * KB * MF_QK8_0];                                                 \
        _Alignas(64) float da[KB * MF_AMX_TILE_A];                                                            \
        _Alignas(64) amx_cfg cfg;                                                                              \
        cfg_make(&cfg);                                                                                        \
        MEM_FENCE();                                                                                           \
        _tile_loadconfig(&cfg);                                                                                \
        for (int j = 0; j < na; j += MF_AMX_TILE_A) {                                                          \
            const void *aj = (const char *)a + (size_t)j * a_stride;                                           \
            const int nj = MF_MIN(na - j, MF_AMX_TILE_A);                                                      \
            float *sj = s + (size_t)j * ldc;                                                                   \
            AMX_GROUPS(T, act_tiles(aj, a_stride, nj, kb0, nbk, q, da); MEM_FENCE(), q, da, (size_t)nbk)      \
        }                                                                                                      \
        _tile_release();                                                                                       \
    }                                                                                                          \
    MF_AMX void MF_AMX_NAME(name##_packed)(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride,   \
                                           int nw, const void *p, int64_t M, int64_t m0, int na) {            \
        const int64_t nb = n / MF_QK8_0;                                                                       \
        const size_t gbytes = group_bytes(T, n), nslab = (size_t)((M + SLAB - 1) / SLAB);                      \
        const int ng = nw / MF_X16_ROWS;                                                                       \
        const int8_t *pq = p;                                                                                  \
        const float *pd = (const float *)(pq + nslab * (size_t)nb * SLAB * MF_QK8_0);                          \
        _Alignas(64) amx_cfg cfg;                                                                              \
        cfg_make(&cfg);                                                                                        \
        MEM_FENCE();                                                                                           \
        _tile_loadconfig(&cfg);                                                                                \
        for (int j = 0; j < na; j += MF_AMX_TILE_A) {                                                          \
            const int nj = MF_MIN(na - j, MF_AMX_TILE_A);                                                      \
            const size_t s0 = (size_t)(m0 + j) / SLAB * (size_t)nb;                                            \
            float *sj = s + (size_t)j * ldc;                                                                   \
            AMX_GROUPS(T, (void)0, pq + (s0 + (size_t)kb0) * SLAB * MF_QK8_0, pd + (s0 + (size_t)kb0) * SLAB,  \
                       (size_t)nb)                                                                             \
        }                                                                                                      \
        _tile_release();                                                                                       \
    }

AMX_TILE(mf_tile_q4_0x16_amx, T_Q4_0, mf_tile_q4_0x16_avx512)
AMX_TILE(mf_tile_q5_0x16_amx, T_Q5_0, mf_tile_q5_0x16_avx512)
AMX_TILE(mf_tile_q8_0x16_amx, T_Q8_0, mf_tile_q8_0x16_avx512)
AMX_TILE(mf_tile_iq4_nlx16_amx, T_IQ4_NL, mf_tile_iq4_nlx16_avx512)
