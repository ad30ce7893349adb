/* x86 SIMD helpers shared by dot_avx2.c and dot_avx512.c (this folder only).  Every helper carries
 * the AVX2 target attribute, so it inlines into AVX2 and AVX-512 callers alike; nothing here runs
 * unless the dispatcher (kernels.c) saw the CPU has the ISA. */
#ifndef MF_QUANT_X86_H
#define MF_QUANT_X86_H

#include "quant/quant_impl.h"

#include <immintrin.h>

#define MF_AVX2 __attribute__((target("avx2,fma,f16c")))
#define MF_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

/* F16C converts exactly like mf_fp16_to_fp32 for every non-NaN value (weights are never NaN). */
#define MF_H2F(h) _cvtsh_ss(h)

/* Prefetch the cache lines of a weight block of `bytes` bytes, `ahead` bytes further on: the decode GEMVs'
 * software prefetch (x8_x86.h some blocks ahead, x16_avx512.c a page).  always_inline: gcc drops the call
 * of a helper it does not inline into a target() kernel (tests/cli/prefetch.sh). */
static inline __attribute__((always_inline)) void mf_prefetch_ahead(const void *p, size_t ahead, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + ahead + o, _MM_HINT_T0);
}

/* horizontal sum of 8 floats, in ggml's order (hi+lo halves, then pairs) */
static inline MF_AVX2 float mf_hsum_f32x8(__m256 x) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

static inline MF_AVX2 int mf_hsum_i32x8(__m256i a) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* 32 nibbles -> 32 bytes 0..15: low nibbles are elements 0..15, high nibbles 16..31 */
static inline MF_AVX2 __m256i mf_nibbles32(const uint8_t *p) {
    const __m128i t = _mm_loadu_si128((const __m128i *)p);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0xF));
}

/* 32 bits -> 32 bytes of 0x00 / 0xFF */
static inline MF_AVX2 __m256i mf_bits32(const uint8_t *p) {
    uint32_t x32;
    memcpy(&x32, p, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x32), shuf);
    bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

/* Q5_0 weights as signed bytes -16..15 (the missing high bit becomes 0xF0 = -16 + low nibble) */
static inline MF_AVX2 __m256i mf_q5_0_bytes(const mf_block_q5_0 *b) {
    const __m256i hi = _mm256_andnot_si256(mf_bits32(b->qh), _mm256_set1_epi8((char)0xF0));
    return _mm256_or_si256(mf_nibbles32(b->qs), hi);
}

/* Q4_1 / Q5_1 weights as unsigned bytes 0..15 / 0..31 (their min is a separate term) */
static inline MF_AVX2 __m256i mf_q4_1_ubytes(const mf_block_q4_1 *b) { return mf_nibbles32(b->qs); }

static inline MF_AVX2 __m256i mf_q5_1_ubytes(const mf_block_q5_1 *b) {
    return _mm256_or_si256(mf_nibbles32(b->qs), _mm256_and_si256(mf_bits32(b->qh), _mm256_set1_epi8(0x10)));
}

/* unsigned quants x int8 activations in the Q8_0 family's 8 int32 lanes, as floats (pair sums at most
 * 2 * 31 * 128 < 2^15) */
static inline MF_AVX2 __m256 mf_mulsum_u8_avx2(__m256i ux, __m256i y) {
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), _mm256_maddubs_epi16(ux, y)));
}

/* Q4_0 weights as signed bytes -8..7 */
static inline MF_AVX2 __m256i mf_q4_0_bytes(const mf_block_q4_0 *b) {
    return _mm256_sub_epi8(mf_nibbles32(b->qs), _mm256_set1_epi8(8));
}

static inline MF_AVX2 __m256i mf_q8_0_bytes(const mf_block_q8_0 *b) {
    return _mm256_loadu_si256((const __m256i *)b->qs);
}

/* int8 x int8 dot in groups of 4 adjacent products -> 8 int32 lanes -> float.  The sign trick keeps
 * maddubs (u8 x s8) exact: |x| <= 127 and the pair sums stay below 2^15 for quants in -127..127. */
static inline MF_AVX2 __m256 mf_mulsum_i8_avx2(__m256i x, __m256i y) {
    const __m256i ax = _mm256_sign_epi8(x, x), sy = _mm256_sign_epi8(y, x);
    const __m256i p16 = _mm256_maddubs_epi16(ax, sy);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), p16));
}

/* The same lanes with VNNI: vpdpbusd sums the same 4 adjacent products per int32 lane, so the float
 * results are bitwise those of the AVX2 form. */
static inline MF_AVX512 __m256 mf_mulsum_i8_vnni(__m256i x, __m256i y) {
    const __m256i ax = _mm256_sign_epi8(x, x), sy = _mm256_sign_epi8(y, x);
    return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, sy));
}

/* The Q8_0-family vec_dot (Q4_0, Q5_0, Q8_0 weights x Q8_0 activations), written once and instantiated per
 * ISA with its int8 multiply-sum (dot_avx2.c: maddubs + madd, dot_avx512.c: VNNI; both give the same int32
 * lanes, so the same bits).  llama.cpp's AVX2 order: per block acc = fma(d_w * d_a, MULSUM(w, a), acc) in 8
 * float lanes, then mf_hsum_f32x8.  UNPACK(b): a weight block's 32 quants as signed bytes. */
#define MF_DEFINE_Q8_DOT(NAME, TARGET, WBLOCK, UNPACK, MULSUM)                                                    \
    TARGET void NAME(int64_t n, float *s, const void *w, const void *a) {                                       \
        const WBLOCK *x = w;                                                                                    \
        const mf_block_q8_0 *y = a;                                                                             \
        __m256 acc = _mm256_setzero_ps();                                                                       \
        for (int64_t ib = 0; ib < n / MF_QK8_0; ib++) {                                                         \
            const __m256 d = _mm256_set1_ps(MF_H2F(x[ib].d) * MF_H2F(y[ib].d));                                 \
            const __m256i qy = _mm256_loadu_si256((const __m256i *)y[ib].qs);                                   \
            acc = _mm256_fmadd_ps(d, MULSUM(UNPACK(&x[ib]), qy), acc);                                          \
        }                                                                                                       \
        *s = mf_hsum_f32x8(acc);                                                                                \
    }
/* the three kernels mf_vec_dot_{q4_0,q5_0,q8_0}_SUFFIX */
#define MF_DEFINE_Q8_DOTS(SUFFIX, TARGET, MULSUM)                                                                \
    MF_DEFINE_Q8_DOT(mf_vec_dot_q4_0_##SUFFIX, TARGET, mf_block_q4_0, mf_q4_0_bytes, MULSUM)                   \
    MF_DEFINE_Q8_DOT(mf_vec_dot_q5_0_##SUFFIX, TARGET, mf_block_q5_0, mf_q5_0_bytes, MULSUM)                   \
    MF_DEFINE_Q8_DOT(mf_vec_dot_q8_0_##SUFFIX, TARGET, mf_block_q8_0, mf_q8_0_bytes, MULSUM)

/* ---- K-format pieces ---- */

/* The 8 scales (bytes 0..7) and 8 mins (bytes 8..15) of a Q4_K/Q5_K block, each 6 bits. */
static inline void mf_k4_scales_mins(const uint8_t *packed, uint32_t utmp[4]) {
    const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
    memcpy(utmp, packed, 12);
    utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
    const uint32_t uaux = utmp[1] & kmask1;
    utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
    utmp[2] = uaux;
    utmp[0] &= kmask1;
}

/* mins . (bsums summed per 32) as 4 int32 lanes (pairs of sub-blocks) */
static inline MF_AVX2 __m128i mf_k4_min_prod(__m256i mins_and_scales, const int16_t *bsums) {
    const __m256i q8sums = _mm256_loadu_si256((const __m256i *)bsums);
    const __m128i q8s = _mm_hadd_epi16(_mm256_extracti128_si256(q8sums, 0), _mm256_extracti128_si256(q8sums, 1));
    return _mm_madd_epi16(_mm256_extracti128_si256(mins_and_scales, 1), q8s);
}

/* 32 quants (0..63) x 32 activations, pair sums scaled by the two 16-element scales shuf selects */
static inline MF_AVX2 __m256i mf_q6_part(__m256i q, const int8_t *q8, __m128i scales, const uint8_t *shuf) {
    const __m256i p = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)q8));
    const __m128i sc = _mm_shuffle_epi8(scales, _mm_loadu_si128((const __m128i *)shuf));
    return _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc), p);
}

/* byte shuffles broadcasting scale 2k to int16 lanes 0..7 and 2k+1 to lanes 8..15 */
static const uint8_t mf_q6_shuf[128] = {
    0,  0,  0,  0,  0,  0,  0,  0,  1,  1,  1,  1,  1,  1,  1,  1,  2,  2,  2,  2,  2,  2,  2,  2,  3,  3,  3,  3,  3,  3,  3,  3,
    4,  4,  4,  4,  4,  4,  4,  4,  5,  5,  5,  5,  5,  5,  5,  5,  6,  6,  6,  6,  6,  6,  6,  6,  7,  7,  7,  7,  7,  7,  7,  7,
    8,  8,  8,  8,  8,  8,  8,  8,  9,  9,  9,  9,  9,  9,  9,  9,  10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11,
    12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13, 14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15};

/* ---- kernels (dot_avx2.c, dot_avx512.c) ---- */
void mf_vec_dot_f32_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_f16_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_dot_rows_f32_avx2(int64_t n, const float *k, const float *q, size_t q_stride, int nq, float *out);
void mf_vec_dot_bf16_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q4_0_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q5_0_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q4_1_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q5_1_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q8_0_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q4_K_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q5_K_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q6_K_avx2(int64_t n, float *s, const void *w, const void *a);
/* lowbit_avx2.c: llama.cpp's AVX2 kernels of these types, bitwise the dot_lowbit.c references */
void mf_vec_dot_q2_K_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q3_K_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq4_nl_avx2(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq4_xs_avx2(int64_t n, float *s, const void *w, const void *a);
/* lowbit_avx512.c: the same with VNNI dot steps, bitwise the AVX2 ones */
void mf_vec_dot_q2_K_avx512(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q3_K_avx512(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq4_nl_avx512(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_iq4_xs_avx512(int64_t n, float *s, const void *w, const void *a);
void mf_from_float_q8_0_avx2(const float *x, void *y, int64_t n);
void mf_from_float_q8_1_avx2(const float *x, void *y, int64_t n);
void mf_from_float_q8_0s_avx2(const float *x, void *y, int64_t n); /* kernels_x86.c */
void mf_from_float_q8_K_avx2(const float *x, void *y, int64_t n);
void mf_from_float_f16_avx2(const float *x, void *y, int64_t n);
void mf_from_float_bf16_avx2(const float *x, void *y, int64_t n);

/* A float tile of 4 weight rows x 2 (or 1) activations, pointers as a tile's: the shapes the F16/BF16
 * tiles are built of. */
typedef void mf_tile4_fn(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, const void *a,
                         size_t a_stride);

/* The rows [0, nw / 4 * 4) of a tile call through those shapes: activations in pairs through t4x2, an odd
 * last one through t4x1.  Returns the rows done; the caller runs the rest (its vec_dot per pair). */
static inline int mf_tile_rows_by4(mf_tile4_fn *t4x2, mf_tile4_fn *t4x1, int64_t n, float *s, size_t ldc,
                                   const void *w, size_t w_stride, int nw, const void *a, size_t a_stride, int na) {
    int i0 = 0;
    for (; i0 + 4 <= nw; i0 += 4) {
        const char *wi = (const char *)w + i0 * w_stride;
        float *si = s + i0 * ldc;
        int j = 0;
        for (; j + 2 <= na; j += 2) t4x2(n, si + j, ldc, wi, w_stride, (const char *)a + j * a_stride, a_stride);
        if (j < na) t4x1(n, si + j, ldc, wi, w_stride, (const char *)a + j * a_stride, a_stride);
    }
    return i0;
}

/* vec_dot over the pairs of rows [i0, nw) x every activation */
static inline void mf_tile_rest(mf_vec_dot_fn dot, int i0, int64_t n, float *s, size_t ldc, const void *w,
                                size_t w_stride, int nw, const void *a, size_t a_stride, int na) {
    for (int i = i0; i < nw; i++)
        for (int j = 0; j < na; j++) dot(n, &s[i * ldc + j], (const char *)w + i * w_stride, (const char *)a + j * a_stride);
}

typedef void mf_tile_fn_t(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                          size_t a_stride, int na);
mf_tile_fn_t mf_tile_q4_0_avx2, mf_tile_q5_0_avx2, mf_tile_q8_0_avx2, mf_tile_q4_1_avx2, mf_tile_q5_1_avx2;
mf_tile_fn_t mf_tile_q4_K_avx2, mf_tile_q5_K_avx2, mf_tile_q6_K_avx2;
mf_tile_fn_t mf_tile_bf16_avx2;
mf_tile_fn_t mf_tile_q2_K_avx2, mf_tile_q3_K_avx2, mf_tile_iq4_nl_avx2, mf_tile_iq4_xs_avx2; /* lowbit_avx2.c */
mf_tile_fn_t mf_tile_q2_K_avx512, mf_tile_q3_K_avx512, mf_tile_iq4_nl_avx512, mf_tile_iq4_xs_avx512; /* lowbit_avx2.c too */
mf_tile_fn_t mf_tile_q4_0_avx512, mf_tile_q5_0_avx512, mf_tile_q8_0_avx512;
mf_tile_fn_t mf_tile_f16_avx512, mf_tile_bf16_avx512; /* float_avx512.c */
/* the BF16 tile's pair for activation rows mf_bf16_act_ok_avx512 accepted (mf_quant_kernels.act_ok) */
mf_tile_fn_t mf_tile_bf16_ok_avx512;
bool mf_bf16_act_ok_avx512(const void *a, int64_t n);
/* cpuid 7.1 EAX bit 5, AVX512_BF16 (vdpbf16ps: Cooper Lake, Sapphire Rapids, Zen 4; Ice Lake lacks it) */
bool mf_cpu_has_avx512bf16(void);
mf_tile_fn_t mf_tile_q4_0x8_avx2, mf_tile_q5_0x8_avx2, mf_tile_q8_0x8_avx2, mf_tile_iq4_nlx8_avx2; /* x8_avx2.c */
mf_tile_fn_t mf_tile_q4_Kx8_avx2, mf_tile_q5_Kx8_avx2, mf_tile_q6_Kx8_avx2, mf_tile_iq4_xsx8_avx2;
mf_tile_fn_t mf_tile_q4_Kx8_avx512, mf_tile_q5_Kx8_avx512, mf_tile_q6_Kx8_avx512,
    mf_tile_iq4_xsx8_avx512; /* x8_avx512.c */
mf_tile_fn_t mf_tile_q4_0x16_avx512, mf_tile_q5_0x16_avx512, mf_tile_q8_0x16_avx512; /* x16_avx512.c */
mf_tile_fn_t mf_tile_iq4_nlx16_avx512;
mf_tile_fn_t mf_tile_q4_0x16_amx, mf_tile_q5_0x16_amx, mf_tile_q8_0x16_amx, mf_tile_iq4_nlx16_amx; /* x16_amx.c */
/* x16_amx.c: the packed-activation twins (quant.h, mf_quant_kernels.pack_size) */
typedef void mf_tile_packed_fn_t(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw,
                                 const void *p, int64_t M, int64_t m0, int na);
mf_tile_packed_fn_t mf_tile_q4_0x16_amx_packed, mf_tile_q5_0x16_amx_packed, mf_tile_q8_0x16_amx_packed,
    mf_tile_iq4_nlx16_amx_packed;
size_t mf_amx_pack_size(int64_t K, int64_t M);
void mf_amx_pack_row(const void *row, int64_t K, int64_t m, int64_t M, void *p);
mf_tile_fn_t mf_tile_q4_Kx8_amx, mf_tile_q5_Kx8_amx, mf_tile_q6_Kx8_amx;                        /* x8_amx.c */

void mf_vec_dot_q4_0_avx512(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q5_0_avx512(int64_t n, float *s, const void *w, const void *a);
void mf_vec_dot_q8_0_avx512(int64_t n, float *s, const void *w, const void *a);

#endif
