/* quant: AVX2 (+FMA, F16C) dot kernels and activation converters.
 *
 * The quantized kernels follow llama.cpp's AVX2 kernels operation for operation (one 8-lane float
 * accumulator fed block by block, the same int32 lane grouping, the same final horizontal sums), so
 * with the same activation bytes they give llama.cpp's results bit for bit.  Each row's order is
 * fixed: nothing depends on how many rows a caller processes together. */
#include "quant/quant_x86.h"

/* keep clang from fusing the few scalar a*b+c below: gcc (-std=c11) never does, results must agree */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- float rows: 4 accumulators x 8 lanes over steps of 32 (ggml's GGML_F32_STEP layout) ---- */

/* The 4 accumulators are named, not an array: gcc -O2 keeps an array in memory and does not unroll. */
static inline MF_AVX2 float reduce4(__m256 s0, __m256 s1, __m256 s2, __m256 s3) {
    s0 = _mm256_add_ps(s0, s2);
    s1 = _mm256_add_ps(s1, s3);
    s0 = _mm256_add_ps(s0, s1);
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

static inline MF_AVX2 __m256 f16x8(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

static inline MF_AVX2 __m256 bf16x8(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

/* One body for the three float formats: LOAD8(p) gives 8 floats. */
#define MF_FLOAT_DOT_BODY(LOAD8)                                                                                      \
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                                      \
    const int64_t np = n & ~(int64_t)31;                                                                             \
    for (int64_t i = 0; i < np; i += 32) {                                                                           \
        a0 = _mm256_fmadd_ps(LOAD8(x + i), LOAD8(y + i), a0);                                                        \
        a1 = _mm256_fmadd_ps(LOAD8(x + i + 8), LOAD8(y + i + 8), a1);                                                \
        a2 = _mm256_fmadd_ps(LOAD8(x + i + 16), LOAD8(y + i + 16), a2);                                              \
        a3 = _mm256_fmadd_ps(LOAD8(x + i + 24), LOAD8(y + i + 24), a3);                                              \
    }

/* mf_dot_rows_fn: the body and reduction of mf_vec_dot_f32_avx2 / mf_vec_dot_f16_avx2 (without their
 * tails: n % 32 == 0) per query row, the k loads shared through L1 */
MF_AVX2 void mf_dot_rows_f32_avx2(int64_t n, const float *k, const float *q, size_t q_stride, int nq, float *out) {
    for (int i = 0; i < nq; i++) {
        const float *x = k, *y = q + (size_t)i * q_stride;
        MF_FLOAT_DOT_BODY(_mm256_loadu_ps)
        (void)np;
        out[i] = reduce4(a0, a1, a2, a3);
    }
}

MF_AVX2 void mf_vec_dot_f32_avx2(int64_t n, float *s, const void *w, const void *a) {
    const float *x = w, *y = a;
    MF_FLOAT_DOT_BODY(_mm256_loadu_ps)
    float sumf = reduce4(a0, a1, a2, a3);
    for (int64_t i = np; i < n; i++) sumf += x[i] * y[i];
    *s = sumf;
}

MF_AVX2 void mf_vec_dot_f16_avx2(int64_t n, float *s, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    MF_FLOAT_DOT_BODY(f16x8)
    double sumf = reduce4(a0, a1, a2, a3);
    for (int64_t i = np; i < n; i++) sumf += (double)(MF_H2F(x[i]) * MF_H2F(y[i]));
    *s = (float)sumf;
}

/* BF16 in the order of llama.cpp's batched matmul: for n >= 2 rows of activations ggml-cpu hands BF16 x
 * BF16 to llamafile's tinyBLAS<8, __m256> (sgemm.cpp, AVX2 build): one 8-lane fma chain per output over
 * k in steps of 8, then hsum.  That is the path of every prefill and eval row, so minfer takes it for
 * every row (a row's bits never depend on its batch); llama.cpp's one-token decode runs
 * ggml_vec_dot_bf16 instead (4 x 8 fma lanes, ((c1 + c3) + (c2 + c4)), hsum, the tail in double), which
 * is what tinyBLAS declines to (k % 8 != 0) and so what this kernel does for such n.  (A bf16 x bf16
 * product is exact in float, so fused or not never matters here; only the order of the sums does.)
 * tile_avx2.c runs 4 x 2 outputs at a time in this order, so the single chain's latency overlaps. */
MF_AVX2 void mf_vec_dot_bf16_avx2(int64_t n, float *s, const void *w, const void *a) {
    const uint16_t *x = w, *y = a;
    if (n % 8 == 0) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t i = 0; i < n; i += 8) acc = _mm256_fmadd_ps(bf16x8(x + i), bf16x8(y + i), acc);
        *s = mf_hsum_f32x8(acc);
        return;
    }
    MF_FLOAT_DOT_BODY(bf16x8)
    a0 = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
    double sumf = mf_hsum_f32x8(a0);
    for (int64_t i = np; i < n; i++) sumf += (double)(mf_bf16_to_fp32(x[i]) * mf_bf16_to_fp32(y[i]));
    *s = (float)sumf;
}

/* ---- 32-element blocks against Q8_0 ---- */

MF_DEFINE_Q8_DOTS(avx2, MF_AVX2, mf_mulsum_i8_avx2)

/* ---- 32-element blocks with a min against Q8_1 ---- */

/* llama.cpp's AVX2 ggml_vec_dot_q4_1_q8_1 / _q5_1_q8_1 (libggml-cpu-haswell.so, read from its machine
 * code): the unsigned quants (0..15 / 0..31) times the activations in the same 8 int32 lanes as the
 * Q8_0 family, acc = fma(d_w * d_a, lanes, acc); the min term apart in one float, summs += m * s (gcc
 * fuses it; the product of two f16 values is exact in float, so fused or not is the same); the result
 * hsum(acc) + summs.  The scalar kernels add d*d_a*isum + m*s to one float per block: a few ulps off
 * llama.cpp per row, enough for 100+ outlier rows in the q4_1/q5_1 goldens before this kernel. */
MF_AVX2 void mf_vec_dot_q4_1_avx2(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q4_1 *x = w;
    const mf_block_q8_1 *y = a;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.f;
    for (int64_t ib = 0; ib < n / MF_QK8_1; ib++) {
        summs += MF_H2F(x[ib].m) * MF_H2F(y[ib].s);
        const __m256 d = _mm256_set1_ps(MF_H2F(x[ib].d) * MF_H2F(y[ib].d));
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        acc = _mm256_fmadd_ps(d, mf_mulsum_u8_avx2(mf_q4_1_ubytes(&x[ib]), qy), acc);
    }
    *s = mf_hsum_f32x8(acc) + summs;
}

MF_AVX2 void mf_vec_dot_q5_1_avx2(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q5_1 *x = w;
    const mf_block_q8_1 *y = a;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.f;
    for (int64_t ib = 0; ib < n / MF_QK8_1; ib++) {
        summs += MF_H2F(x[ib].m) * MF_H2F(y[ib].s);
        const __m256 d = _mm256_set1_ps(MF_H2F(x[ib].d) * MF_H2F(y[ib].d));
        const __m256i qx = mf_q5_1_ubytes(&x[ib]);
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        acc = _mm256_fmadd_ps(d, mf_mulsum_u8_avx2(qx, qy), acc);
    }
    *s = mf_hsum_f32x8(acc) + summs;
}

/* ---- K formats against Q8_K ---- */

MF_AVX2 void mf_vec_dot_q4_K_avx2(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q4_K *x = w;
    const mf_block_q8_K *y = a;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = y[i].d * MF_H2F(x[i].d);
        const float dmin = -y[i].d * MF_H2F(x[i].dmin);
        uint32_t utmp[4];
        mf_k4_scales_mins(x[i].scales, utmp);
        const __m256i mins_and_scales =
            _mm256_cvtepu8_epi16(_mm_set_epi32((int)utmp[3], (int)utmp[2], (int)utmp[1], (int)utmp[0]));
        acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mf_k4_min_prod(mins_and_scales, y[i].bsums)), acc_m);
        const uint8_t *sc = (const uint8_t *)utmp;
        const uint8_t *q4 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++, q4 += 32, q8 += 64) {
            const __m256i q4bits = _mm256_loadu_si256((const __m256i *)q4);
            const __m256i q4l = _mm256_and_si256(q4bits, m4);
            const __m256i q4h = _mm256_and_si256(_mm256_srli_epi16(q4bits, 4), m4);
            __m256i pl = _mm256_maddubs_epi16(q4l, _mm256_loadu_si256((const __m256i *)q8));
            __m256i ph = _mm256_maddubs_epi16(q4h, _mm256_loadu_si256((const __m256i *)(q8 + 32)));
            pl = _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * j]), pl);
            ph = _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * j + 1]), ph);
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
    *s = mf_hsum_f32x8(acc) + _mm_cvtss_f32(acc_m);
}

/* ggml's AVX2 Q5_K: the min term in one float, summs += dmin * (float)msum, which gcc fuses (vfmadd231ss
 * in libggml-cpu-haswell.so); dmin = -d_a * dmin_w is a full float, so the unfused product rounds
 * differently (3.8e-5 on every eval row of qwen3-tiny-q5_k before this was fused). */
MF_AVX2 void mf_vec_dot_q5_K_avx2(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q5_K *x = w;
    const mf_block_q8_K *y = a;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.f;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = y[i].d * MF_H2F(x[i].d);
        const float dmin = -y[i].d * MF_H2F(x[i].dmin);
        uint32_t utmp[4];
        mf_k4_scales_mins(x[i].scales, utmp);
        const __m256i mins_and_scales =
            _mm256_cvtepu8_epi16(_mm_set_epi32((int)utmp[3], (int)utmp[2], (int)utmp[1], (int)utmp[0]));
        const __m128i prod = mf_k4_min_prod(mins_and_scales, y[i].bsums);
        const __m128i hs = _mm_hadd_epi32(_mm_hadd_epi32(prod, _mm_setzero_si128()), _mm_setzero_si128());
        summs = __builtin_fmaf(dmin, (float)_mm_extract_epi32(hs, 0), summs); /* fused, as gcc builds ggml's */
        const uint8_t *sc = (const uint8_t *)utmp;
        const uint8_t *q5 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        const __m256i hbits = _mm256_loadu_si256((const __m256i *)x[i].qh);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++, q5 += 32, q8 += 64) {
            const __m256i q5bits = _mm256_loadu_si256((const __m256i *)q5);
            /* bit 2j of qh is the high bit of the low nibbles, bit 2j+1 of the high ones */
            const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), _mm256_set1_epi8(1));
            const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), _mm256_set1_epi8(1));
            const __m256i q5_0 = _mm256_add_epi8(_mm256_and_si256(q5bits, m4), _mm256_slli_epi16(h0, 4));
            const __m256i q5_1 = _mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(q5bits, 4), m4), _mm256_slli_epi16(h1, 4));
            __m256i p0 = _mm256_maddubs_epi16(q5_0, _mm256_loadu_si256((const __m256i *)q8));
            __m256i p1 = _mm256_maddubs_epi16(q5_1, _mm256_loadu_si256((const __m256i *)(q8 + 32)));
            p0 = _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * j]), p0);
            p1 = _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * j + 1]), p1);
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = mf_hsum_f32x8(acc) + summs;
}

MF_AVX2 void mf_vec_dot_q6_K_avx2(int64_t n, float *s, const void *w, const void *a) {
    const mf_block_q6_K *x = w;
    const mf_block_q8_K *y = a;
    const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi8(15);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = y[i].d * MF_H2F(x[i].d);
        const uint8_t *q4 = x[i].ql, *qh = x[i].qh;
        const int8_t *q8 = y[i].qs;
        const __m128i scales = _mm_loadu_si128((const __m128i *)x[i].scales);
        /* the quants are stored +32: subtract 32 * sum(scale * q8) once, via the activation bsums */
        const __m256i q8sums = _mm256_loadu_si256((const __m256i *)y[i].bsums);
        const __m256i q8sclsub = _mm256_slli_epi32(_mm256_madd_epi16(q8sums, _mm256_cvtepi8_epi16(scales)), 5);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0, is = 0; j < 2; j++, is += 4) {
            const __m256i b1 = _mm256_loadu_si256((const __m256i *)q4);
            const __m256i b2 = _mm256_loadu_si256((const __m256i *)(q4 + 32));
            const __m256i bh = _mm256_loadu_si256((const __m256i *)qh);
            q4 += 64;
            qh += 32;
            const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(bh, m3), 4);
            const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(bh, _mm256_set1_epi8(12)), 2);
            const __m256i h2 = _mm256_and_si256(bh, _mm256_set1_epi8(48));
            const __m256i h3 = _mm256_srli_epi16(_mm256_and_si256(bh, _mm256_set1_epi8(-64)), 2);
            const __m256i q0 = _mm256_or_si256(_mm256_and_si256(b1, m15), h0);
            const __m256i q1 = _mm256_or_si256(_mm256_and_si256(b2, m15), h1);
            const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m15), h2);
            const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m15), h3);
            const __m256i p0 = mf_q6_part(q0, q8 + 0, scales, mf_q6_shuf + 16 * (is + 0));
            const __m256i p1 = mf_q6_part(q1, q8 + 32, scales, mf_q6_shuf + 16 * (is + 1));
            const __m256i p2 = mf_q6_part(q2, q8 + 64, scales, mf_q6_shuf + 16 * (is + 2));
            const __m256i p3 = mf_q6_part(q3, q8 + 96, scales, mf_q6_shuf + 16 * (is + 3));
            q8 += 128;
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p2, p3));
        }
        sumi = _mm256_sub_epi32(sumi, q8sclsub);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = mf_hsum_f32x8(acc);
}

/* ---- activation converters: bytes identical to the scalar ones in quantize.c ---- */

MF_AVX2 void mf_from_float_f16_avx2(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = mf_fp32_to_fp16(x[i]);
}

static inline MF_AVX2 float hmax_f32x8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* 4 x 8 int32 -> 32 int8 in element order (packs saturate, as ggml's do) */
static inline MF_AVX2 __m256i pack32(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
    const __m256i a = _mm256_packs_epi32(i0, i1), b = _mm256_packs_epi32(i2, i3);
    return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(a, b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* ggml-cpu's x86 quantize_row_q8_0 for one block of 32: d = amax/127 (returned as a float, stored as f16),
 * q = round_half_even(x * 127/amax), packed with saturation; returns the 32 bytes.  Inlined and unrolled
 * (gcc -O2 did neither: v[] and q[] went through the stack and the call cost a frame per block, ~4 % of a
 * Q8_0 prefill) */
static inline __attribute__((always_inline)) MF_AVX2 __m256i q8_block_avx2(const float *x, uint16_t *d16, float *d) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
    }
    const float m = hmax_f32x8(amax);
    *d = m / 127.f;
    *d16 = (uint16_t)_cvtss_sh(*d, _MM_FROUND_TO_NEAREST_INT);
    const __m256 mul = _mm256_set1_ps(m != 0.0f ? 127.f / m : 0.0f);
    __m256i q[4];
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
        q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return pack32(q[0], q[1], q[2], q[3]);
}

MF_AVX2 void mf_from_float_q8_0_avx2(const float *x, void *vy, int64_t n) {
    mf_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / MF_QK8_0; i++, x += MF_QK8_0) {
        float d;
        _mm256_storeu_si256((__m256i *)y[i].qs, q8_block_avx2(x, &y[i].d, &d));
    }
}

/* the sum of 32 signed bytes: ones x bytes in pairs, then pairs of pairs */
static inline MF_AVX2 int sum_i8x32(__m256i b) {
    return mf_hsum_i32x8(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), b), _mm256_set1_epi16(1)));
}

/* q8_0s (the x16 kernels' activations): Q8_0's bytes and scale as above, and each block's quant sum, in
 * one pass (converting to q8_0 first, then copying with the sums, read every block twice) */
MF_AVX2 void mf_from_float_q8_0s_avx2(const float *x, void *vy, int64_t n) {
    mf_block_q8_0s *y = vy;
    for (int64_t i = 0; i < n / MF_QK8_0; i++, x += MF_QK8_0) {
        float d;
        const __m256i b = q8_block_avx2(x, &y[i].d, &d);
        _mm256_storeu_si256((__m256i *)y[i].qs, b);
        y[i].s = (int16_t)sum_i8x32(b);
    }
}

/* Q8_1: Q8_0's bytes and scale, plus s = d * sum(qs) in f16, as the scalar converter and ggml's */
MF_AVX2 void mf_from_float_q8_1_avx2(const float *x, void *vy, int64_t n) {
    mf_block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / MF_QK8_1; i++, x += MF_QK8_1) {
        float d;
        const __m256i b = q8_block_avx2(x, &y[i].d, &d);
        _mm256_storeu_si256((__m256i *)y[i].qs, b);
        /* d times the sum of the stored (saturated) bytes */
        y[i].s = (uint16_t)_cvtss_sh(d * (float)sum_i8x32(b), _MM_FROUND_TO_NEAREST_INT);
    }
}

/* quantize_row_q8_K_ref, vectorized: the scale comes from the FIRST element of largest magnitude
 * (its sign matters), quants round half to even and clamp at 127, bsums are sums of 16. */
MF_AVX2 void mf_from_float_q8_K_avx2(const float *x, void *vy, int64_t n) {
    mf_block_q8_K *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / MF_QK_K; i++, x += MF_QK_K) {
        __m256 amax = _mm256_setzero_ps();
        for (int k = 0; k < MF_QK_K; k += 8) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)));
        const float am = hmax_f32x8(amax);
        memset(&y[i], 0, sizeof y[i]);
        if (!(am > 0.0f)) continue;
        int first = 0;
        for (int k = 0; k < MF_QK_K; k += 8) {
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)), _mm256_set1_ps(am), _CMP_EQ_OQ));
            if (hit) {
                first = k + __builtin_ctz((unsigned)hit);
                break;
            }
        }
        const float iscale = -127.f / x[first];
        const __m256 mul = _mm256_set1_ps(iscale);
        const __m256i q127 = _mm256_set1_epi32(127);
        for (int k = 0; k < MF_QK_K; k += 32) {
            __m256i q[4];
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) { /* (not unrolled at -O2: q[] on the stack) */
                const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + k + 8 * j), mul);
                q[j] = _mm256_min_epi32(q127, _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
            }
            const __m256i q8 = pack32(q[0], q[1], q[2], q[3]);
            _mm256_storeu_si256((__m256i *)(y[i].qs + k), q8);
            /* two bsums of 16: widen to int16, add pairs, then fold to one int16 per 16 */
            const __m256i w16a = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q8));
            const __m256i w16b = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q8, 1));
            y[i].bsums[k / 16] = (int16_t)mf_hsum_i32x8(_mm256_madd_epi16(w16a, _mm256_set1_epi16(1)));
            y[i].bsums[k / 16 + 1] = (int16_t)mf_hsum_i32x8(_mm256_madd_epi16(w16b, _mm256_set1_epi16(1)));
        }
        y[i].d = 1 / iscale;
    }
}

/* f32 -> bf16 exactly as mf_fp32_to_bf16 (round to nearest even; NaN truncated and quieted with bit 6) */
MF_AVX2 void mf_from_float_bf16_avx2(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    int64_t i = 0;
    const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
    for (; i + 16 <= n; i += 16) {
        __m256i r[2];
        for (int k = 0; k < 2; k++) {
            const __m256i u = _mm256_loadu_si256((const __m256i *)(x + i + 8 * k));
            const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
            const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
            const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
            const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
            r[k] = _mm256_blendv_epi8(rounded, quiet, nan);
        }
        /* packus works per 128-bit lane: fix the order of the 64-bit quarters */
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), _MM_SHUFFLE(3, 1, 2, 0));
        _mm256_storeu_si256((__m256i *)(y + i), packed);
    }
    for (; i < n; i++) y[i] = mf_fp32_to_bf16(x[i]);
}
