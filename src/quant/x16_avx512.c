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

#include <cpuid.h>
#include <stdatomic.h>

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

/* The GEMV prefetches each group's stream X16_PF_BYTES ahead (a page: hardware prefetchers stop at a 4 KiB
 * page boundary, the likely reason a page ahead helps where closer did not).  On Zen 5 tg128 Q4_0 +5-15 %,
 * Q4_K_M (its q5_0 / q8_0 matrices) +4-8 %, Q8_0 within the noise, against none (alternated builds,
 * 2026-12-05; 8 and 16 KiB no better than 4; docs/PERFORMANCE.md).  On Intel untimed:
 * scripts/amx-check.sh builds -DX16_PF_BYTES=0 and 8192 and times decode with them beside this default.
 * Same bits either way. */
#ifndef X16_PF_BYTES
#define X16_PF_BYTES 4096
#endif
static inline __attribute__((always_inline)) void prefetch_ahead(const void *p, size_t bytes) {
    if (X16_PF_BYTES > 0) mf_prefetch_ahead(p, X16_PF_BYTES, bytes);
}

/* Groups a GEMV streams side by side (X16_GEMV_MAX_G at most).  Several streams keep more reads in
 * flight on Intel's Sapphire Rapids (4: +2-49 % per pass there, 2026-12-02), but on AMD one stream is
 * faster (Zen 4: tg128 Q4_0 and Q8_0 12-30 % faster with 1 than with 2 or 4, 2026-12-02; Zen 5: Q8_0
 * 9-13 % and Q4_0 2-16 % faster with 1 than with 4, 2026-12-05; docs/PERFORMANCE.md), so the count is the
 * CPU's: 4 on Intel, 1 elsewhere.  Every count gives the same bits (per group the same sums in the same
 * order); mf_x16_set_gemv_groups lets test_quant run both. */
#define X16_GEMV_MAX_G 8
static _Atomic int g_gemv_groups; /* 0: not chosen yet */

static bool cpu_is_intel(void) {
    unsigned a, b, c, d;
    return __get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu; /* GenuineIntel */
}

static int gemv_groups(void) {
    int g = atomic_load_explicit(&g_gemv_groups, memory_order_relaxed);
    if (g == 0) {
        g = cpu_is_intel() ? 4 : 1;
        atomic_store_explicit(&g_gemv_groups, g, memory_order_relaxed); /* any racer stores the same */
    }
    return g;
}

void mf_x16_set_gemv_groups(int groups) {
    atomic_store_explicit(&g_gemv_groups, groups == 4 || groups == 1 ? groups : 0, memory_order_relaxed);
}

/* the block's int32 sum from its two chains: the low-half chunks' (with the -k * sum(y) start) and the
 * high-half chunks', whose quants are 1 << hi times their value (q4_0's high nibbles in place) */
static inline __attribute__((always_inline)) MF_AVX512 __m512i block_isum(__m512i lo, __m512i hi_sum, const int hi) {
    return _mm512_add_epi32(lo, hi ? _mm512_srai_epi32(hi_sum, hi) : hi_sum);
}

static inline MF_AVX512 void acc_block(__m512 *acc, __m512i isum, __m512 dx, uint16_t dy) {
    const __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(MF_H2F(dy)));
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, *acc);
}

/* A block of 16 rows as 8 vectors of unsigned bytes u[c]: chunk c holds quants 4c..4c+3 of every row, to be
 * dotted with activation quants 4c..4c+3.  The block's exact int32 sum is sum_c u[c] . y[4c..4c+3] minus
 * (1 << SHIFT) * sum(y); the order of the int32 additions does not matter (exact, no saturation). */
typedef struct {
    __m512i m4, m4hi, b16, bias, lv;
} x16_consts;

static inline MF_AVX512 x16_consts x16_consts_make(void) {
    x16_consts k;
    k.m4 = _mm512_set1_epi8(0xF);
    k.m4hi = _mm512_set1_epi8((char)0xF0);
    k.b16 = _mm512_set1_epi8(0x10);
    k.bias = _mm512_set1_epi8((char)0x80);
    k.lv = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)mf_iq4_levels)), k.bias);
    return k;
}

/* q4_0: the nibbles 0..15 (low nibbles are quants 0..15, high ones 16..31); sum (nib - 8) * y */
#define Q4_0_SHIFT 3
static inline __attribute__((always_inline)) MF_AVX512 void unpack_q4_0(const mf_block_q4_0x16 *x, const x16_consts *k,
                                                                        __m512i u[8]) {
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
        const __m512i v = _mm512_loadu_si512((const void *)(x->qs + 64 * c));
        u[c] = _mm512_and_si512(v, k->m4);
        u[4 + c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), k->m4);
    }
}

/* The GEMV's q4_0 (decode, where a block serves one activation): the high nibbles stay where they are, 16
 * times their value (v & 0xF0, 0..240; a product is at most 240 * 128 and a block's 16 per lane stay far
 * from the int32 limit), and their chain's sum is shifted down once a block (exact: a multiple of 16)
 * instead of every byte: per block of G groups 4G shifts become G (with Intel's 4 groups the loop's
 * vector instructions go from 140-152 to 128-140, objdump).  Zen 5 shows no difference (its four vector
 * pipes have room; an L2-resident GEMV reads 92-99 GB/s either way); Intel, whose 512-bit work shares two
 * ports, decodes Q4_0 at 83 % of its read bandwidth against Q8_0's 94 % (3 times the instructions per
 * byte): scripts/amx-check.sh times it there against a -DX16_Q4_HI_INPLACE=0 build (the shifts as in
 * unpack_q4_0).  The rows kernel keeps the shifts: it unpacks a block once for up to 8 activations, and
 * would pay a shift per activation. */
#ifndef X16_Q4_HI_INPLACE
#define X16_Q4_HI_INPLACE 1
#endif
#define Q4_0_GEMV_HI (X16_Q4_HI_INPLACE ? 4 : 0)
static inline __attribute__((always_inline)) MF_AVX512 void unpack_q4_0_gemv(const mf_block_q4_0x16 *x,
                                                                             const x16_consts *k, __m512i u[8]) {
    if (!X16_Q4_HI_INPLACE) {
        unpack_q4_0(x, k, u);
        return;
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
        const __m512i v = _mm512_loadu_si512((const void *)(x->qs + 64 * c));
        u[c] = _mm512_and_si512(v, k->m4);
        u[4 + c] = _mm512_and_si512(v, k->m4hi);
    }
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

/* q5_0: unsigned 5-bit values u = q + 16 (0..31); sum (u - 16) * y */
#define Q5_0_SHIFT 4
static inline __attribute__((always_inline)) MF_AVX512 void unpack_q5_0(const mf_block_q5_0x16 *x, const x16_consts *k,
                                                                        __m512i u[8]) {
    const __m512i qh = _mm512_loadu_si512((const void *)x->qh);
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
        const __m512i v = _mm512_loadu_si512((const void *)(x->qs + 64 * c));
        __mmask64 klo, khi;
        q5_hmask(qh, c, &klo, &khi);
        const __m512i l = _mm512_and_si512(v, k->m4), h = _mm512_and_si512(_mm512_srli_epi16(v, 4), k->m4);
        u[c] = _mm512_mask_add_epi8(l, klo, l, k->b16);
        u[4 + c] = _mm512_mask_add_epi8(h, khi, h, k->b16);
    }
}

/* q8_0: (w xor 0x80) = w + 128 as unsigned; sum (w + 128) * y - 128 * sum y */
#define Q8_0_SHIFT 7
static inline __attribute__((always_inline)) MF_AVX512 void unpack_q8_0(const mf_block_q8_0x16 *x, const x16_consts *k,
                                                                        __m512i u[8]) {
    _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++)
        u[c] = _mm512_xor_si512(_mm512_loadu_si512((const void *)(x->qs + 64 * c)), k->bias);
}

/* iq4_nl (q4_0x16's bytes): each nibble through the 16 levels + 128 (1..241, unsigned) with one pshufb,
 * then q8_0's sum (w + 128) * y - 128 * sum y */
#define IQ4_NL_SHIFT 7
static inline __attribute__((always_inline)) MF_AVX512 void unpack_iq4_nl(const mf_block_q4_0x16 *x, const x16_consts *k,
                                                                          __m512i u[8]) {
    _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {
        const __m512i v = _mm512_loadu_si512((const void *)(x->qs + 64 * c));
        u[c] = _mm512_shuffle_epi8(k->lv, _mm512_and_si512(v, k->m4));
        u[4 + c] = _mm512_shuffle_epi8(k->lv, _mm512_and_si512(_mm512_srli_epi16(v, 4), k->m4));
    }
}

/* NA activation rows against one group of 16 rows (prefill below AMX's 8 rows, or without AMX): a block
 * is unpacked once for all NA.  NA is a constant at every call (always inlined). */
#define X16_ROWS(name, xt, unpack, shift)                                                                      \
    static inline __attribute__((always_inline)) MF_AVX512 void name(int64_t n, float *s, size_t ldc,         \
                                                                     const void *w, const void *a,           \
                                                                     size_t a_stride, int j0, const int NA) { \
        const mf_block_q8_0s *y[8];                                                                            \
        __m512 acc[8];                                                                                         \
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {                                                 \
            y[j] = (const mf_block_q8_0s *)((const char *)a + (size_t)(j0 + j) * a_stride);                    \
            acc[j] = _mm512_setzero_ps();                                                                      \
        }                                                                                                      \
        const xt *x = w;                                                                                       \
        const x16_consts k = x16_consts_make();                                                                \
        for (int64_t b = 0; b < n / MF_QK8_0; b++) {                                                           \
            const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)x[b].d));                   \
            __m512i u[8];                                                                                      \
            unpack(&x[b], &k, u);                                                                              \
            _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) {                                             \
                const int8_t *q = y[j][b].qs;                                                                  \
                /* two chains of 4 (exact, any order): half the dependent vpdpbusd latency per pair */       \
                __m512i p = neg_sum(&y[j][b], shift), p2 = _mm512_setzero_si512();                             \
                _Pragma("GCC unroll 8") for (int c = 0; c < 8; c += 2) {                                       \
                    p = _mm512_dpbusd_epi32(p, u[c], bcast4z(q + 4 * c));                                      \
                    p2 = _mm512_dpbusd_epi32(p2, u[c + 1], bcast4z(q + 4 * c + 4));                            \
                }                                                                                              \
                acc_block(&acc[j], _mm512_add_epi32(p, p2), dx, y[j][b].d);                                    \
            }                                                                                                  \
        }                                                                                                      \
        _Pragma("GCC unroll 8") for (int j = 0; j < NA; j++) _mm512_storeu_ps(s + (size_t)(j0 + j) * ldc, acc[j]); \
    }

/* GEMV (one activation row, decode) against G consecutive groups at once, G streams through the matrix
 * side by side: a block's activation broadcasts serve all G groups, and G independent dependency chains
 * and read streams keep more of the memory system busy than one.  Per group the int32 block sums and the
 * float operations of X16_ROWS with NA = 1, in the same order: bitwise the same. */
#define X16_GEMV(name, xt, unpack, shift, hi)                                                                  \
    static inline __attribute__((always_inline)) MF_AVX512 void name(int64_t n, float *s, const void *w,      \
                                                                     const mf_block_q8_0s *y, const int G) {  \
        const int64_t nb = n / MF_QK8_0;                                                                       \
        const xt *x = w;                                                                                       \
        const x16_consts k = x16_consts_make();                                                                \
        __m512 acc[X16_GEMV_MAX_G];                                                                            \
        _Pragma("GCC unroll 8") for (int g = 0; g < G; g++) acc[g] = _mm512_setzero_ps();                      \
        for (int64_t b = 0; b < nb; b++) {                                                                     \
            __m512i ya[8];                                                                                     \
            _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) ya[c] = bcast4z(y[b].qs + 4 * c);              \
            const __m512i ns = neg_sum(&y[b], shift);                                                          \
            _Pragma("GCC unroll 8") for (int g = 0; g < G; g++) {                                              \
                const xt *xb = &x[(int64_t)g * nb + b];                                                        \
                prefetch_ahead(xb, sizeof *xb);                                                                \
                const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)xb->d));                 \
                __m512i u[8];                                                                                  \
                unpack(xb, &k, u);                                                                             \
                __m512i p = ns, q = _mm512_setzero_si512(); /* two chains: exact, any order */                \
                _Pragma("GCC unroll 4") for (int c = 0; c < 4; c++) {                                          \
                    p = _mm512_dpbusd_epi32(p, u[c], ya[c]);                                                   \
                    q = _mm512_dpbusd_epi32(q, u[4 + c], ya[4 + c]);                                           \
                }                                                                                              \
                acc_block(&acc[g], block_isum(p, q, hi), dx, y[b].d);                                          \
            }                                                                                                  \
        }                                                                                                      \
        _Pragma("GCC unroll 8") for (int g = 0; g < G; g++) _mm512_storeu_ps(s + MF_X16_ROWS * g, acc[g]);     \
    }

X16_ROWS(q4_0x16_rows, mf_block_q4_0x16, unpack_q4_0, Q4_0_SHIFT)
X16_ROWS(q5_0x16_rows, mf_block_q5_0x16, unpack_q5_0, Q5_0_SHIFT)
X16_ROWS(q8_0x16_rows, mf_block_q8_0x16, unpack_q8_0, Q8_0_SHIFT)
X16_ROWS(iq4_nlx16_rows, mf_block_q4_0x16, unpack_iq4_nl, IQ4_NL_SHIFT)

X16_GEMV(q4_0x16_gemv, mf_block_q4_0x16, unpack_q4_0_gemv, Q4_0_SHIFT, Q4_0_GEMV_HI)
X16_GEMV(q5_0x16_gemv, mf_block_q5_0x16, unpack_q5_0, Q5_0_SHIFT, 0)
X16_GEMV(q8_0x16_gemv, mf_block_q8_0x16, unpack_q8_0, Q8_0_SHIFT, 0)
X16_GEMV(iq4_nlx16_gemv, mf_block_q4_0x16, unpack_iq4_nl, IQ4_NL_SHIFT, 0)

/* The exported tiles: nw is a multiple of MF_X16_ROWS, that many consecutive groups (w_stride, the bytes
 * of one row, is ignored: a group is MF_X16_ROWS rows).  One activation goes through the GEMV, gemv_groups()
 * groups at a time; more go group by group, in eights and then one pass of the rest. */
#define X16_TILE(name, xt, rows, gemv)                                                                         \
    MF_AVX512 void name(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a, \
                        size_t a_stride, int na) {                                                             \
        (void)w_stride;                                                                                        \
        const size_t gbytes = (size_t)(n / MF_QK8_0) * sizeof(xt);                                             \
        const int ng = nw / MF_X16_ROWS;                                                                       \
        if (na == 1) {                                                                                         \
            int g = 0;                                                                                         \
            if (gemv_groups() == 4)                                                                            \
                for (; g + 4 <= ng; g += 4) gemv(n, s + MF_X16_ROWS * g, (const char *)w + g * gbytes, a, 4);  \
            for (; g < ng; g++) gemv(n, s + MF_X16_ROWS * g, (const char *)w + g * gbytes, a, 1);              \
            return;                                                                                            \
        }                                                                                                      \
        for (int g = 0; g < ng; g++) {                                                                         \
            const void *wg = (const char *)w + g * gbytes;                                                     \
            float *sg = s + MF_X16_ROWS * g;                                                                   \
            int j = 0;                                                                                         \
            for (; j + 8 <= na; j += 8) rows(n, sg, ldc, wg, a, a_stride, j, 8);                               \
            switch (na - j) {                                                                                  \
            case 7: rows(n, sg, ldc, wg, a, a_stride, j, 7); break;                                            \
            case 6: rows(n, sg, ldc, wg, a, a_stride, j, 6); break;                                            \
            case 5: rows(n, sg, ldc, wg, a, a_stride, j, 5); break;                                            \
            case 4: rows(n, sg, ldc, wg, a, a_stride, j, 4); break;                                            \
            case 3: rows(n, sg, ldc, wg, a, a_stride, j, 3); break;                                            \
            case 2: rows(n, sg, ldc, wg, a, a_stride, j, 2); break;                                            \
            case 1: rows(n, sg, ldc, wg, a, a_stride, j, 1); break;                                            \
            default: break;                                                                                    \
            }                                                                                                  \
        }                                                                                                      \
    }

X16_TILE(mf_tile_q4_0x16_avx512, mf_block_q4_0x16, q4_0x16_rows, q4_0x16_gemv)
X16_TILE(mf_tile_q5_0x16_avx512, mf_block_q5_0x16, q5_0x16_rows, q5_0x16_gemv)
X16_TILE(mf_tile_q8_0x16_avx512, mf_block_q8_0x16, q8_0x16_rows, q8_0x16_gemv)
X16_TILE(mf_tile_iq4_nlx16_avx512, mf_block_q4_0x16, iq4_nlx16_rows, iq4_nlx16_gemv)
