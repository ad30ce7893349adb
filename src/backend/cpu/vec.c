/* Small f32 vector primitives for attention and the activations.  The AVX versions give BITWISE the
 * scalar results: same eight partial sums, mul then add (never fused), same final reduction; f16 -> f32
 * is exact either way; exp is the same sequence of correctly rounded operations (fmaf = vfmadd).  So the
 * ISA choice never changes a result.
 *
 * exp, softmax and SiLU repeat llama.cpp's CPU backend as its AVX2 build (ggml-cpu "haswell", the
 * variant the conformance goldens are recorded with) computes them, operation for operation:
 *   exp:     ggml_v_expf (ggml-cpu vec.h, MIT; from ARM's optimized-routines expf): n = round(x log2 e)
 *            by the 1.5 * 2^23 shift, b = x - n ln2 (two fnmadds), a degree-5 polynomial j = e^b - 1 in
 *            the order written there, e^x = fma(j, 2^n, 2^n), and its own path for |n| > 126 (denormal
 *            results, 0 below about -104, inf above 88.38).  Max error ~1.5 ulp.
 *   softmax: ggml_vec_soft_max_f32: e^(x - max) per element, the sum per 8 elements in float as its
 *            horizontal add ((e0+e4)+(e2+e6)) + ((e1+e5)+(e3+e7)), the 8-sums added in double.  A row
 *            shorter than a multiple of 8 sums as if padded with zeros (llama.cpp's KQ rows are padded to
 *            256 cells with -inf, whose exp is 0).
 *   SiLU:    ggml_v_silu, x / (1 + e^-x) with that exp, 8 elements at a time; the last n % 8 elements as
 *            ggml_silu_f32 does, with libm's expf (llama.cpp's tail too).
 * Before (9834f6b .. this change) a Cephes-polynomial exp of about the same accuracy rounded differently
 * from ggml's in enough elements that the activations converted to q8 after SiLU and attention flipped a
 * level ~40x as often (docs/CONFORMANCE.md, "exp"). */
#include <math.h>
#include "backend/cpu/cpu_impl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MF_CPU_X86 1
#endif
#if defined(__x86_64__)
#include "backend/cpu/exp_avx512.h"
#endif

/* ggml_v_expf's constants */
#define EXP_SHIFT 0x1.8p23f
#define EXP_LOG2E 0x1.715476p+0f
#define EXP_LN2_HI 0x1.62e4p-1f
#define EXP_LN2_LO 0x1.7f7d1cp-20f
#define EXP_C1 0x1.ffffecp-1f
#define EXP_C2 0x1.fffdb6p-2f
#define EXP_C3 0x1.555e66p-3f
#define EXP_C4 0x1.573e2ep-5f
#define EXP_C5 0x1.0e4020p-7f


/* one lane of ggml_v_expf (AVX2), every operation as there */
float mf_cpu_expf(float x) {
    const float z = fmaf(x, EXP_LOG2E, EXP_SHIFT);
    const float n = z - EXP_SHIFT;
    const float b = fmaf(-n, EXP_LN2_LO, fmaf(-n, EXP_LN2_HI, x));
    const uint32_t e = mf_f32_bits(z) << 23;
    const float k = mf_bits_f32(e + mf_f32_bits(1.0f));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(EXP_C5, b, EXP_C4), u, fmaf(EXP_C3, b, EXP_C2)), u, EXP_C1 * b);
    if (!(fabsf(n) > 126.0f)) return fmaf(j, k, k); /* NaN too */
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = mf_bits_f32(g + 0x7f000000u), s2 = mf_bits_f32(e - g);
    if (fabsf(n) > 192.0f) return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

/* ggml_silu_f32: the tail of ggml_vec_swiglu_f32 (libm's expf) */
static inline float silu_tail(float x) {
    return x / (1.0f + expf(-x));
}

/* the horizontal add of one 8-element group as ggml_vec_soft_max_f32 does it */
static inline float hsum8(const float *e) {
    return ((e[0] + e[4]) + (e[2] + e[6])) + ((e[1] + e[5]) + (e[3] + e[7]));
}

static double exp_sub_scalar(int64_t n, const float *x, float sub, float *y) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i += 8) {
        float e[8] = {0};
        for (int64_t l = 0; l < 8 && i + l < n; l++) e[l] = y[i + l] = mf_cpu_expf(x[i + l] - sub);
        sum += (double)hsum8(e);
    }
    return sum;
}

static void swiglu_scalar(int64_t n, const float *x, const float *u, float *y) {
    const int64_t nv = n & ~(int64_t)7; /* the elements the AVX2 loop takes 8 at a time */
    int64_t i = 0;
    for (; i < nv; i++) {
        const float s = x[i] / (1.0f + mf_cpu_expf(0.0f - x[i]));
        y[i] = u ? s * u[i] : s;
    }
    for (; i < n; i++) y[i] = u ? silu_tail(x[i]) * u[i] : silu_tail(x[i]);
}

static float dot_scalar(const float *a, const float *b, int64_t n) {
    return mf_cpu_dot_f32(a, b, n);
}

/* fused, as llama.cpp's tinyBLAS accumulates p.V (attention.c): one rounding per term */
static void axpy_scalar(int64_t n, float p, const float *x, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] = fmaf(p, x[i], y[i]);
}

/* q8_0 rows for the flash-attention form (attention.c, fa_row): y[i] = fma(x_i, p, y[i]) with x_i = q_i * d,
 * the value dequantize_row_q8_0 gives (one rounding), so no row is converted into a buffer first; every
 * ISA's form does the same two roundings per element, hence the same bits.  n is a multiple of 32. */
static void mad_q8_0_scalar(int64_t n, float p, const void *x, float *y) {
    const uint8_t *b = x;
    for (int64_t i = 0; i < n; i += 32, b += 34) {
        uint16_t dh;
        memcpy(&dh, b, 2);
        const float d = mf_fp16_to_fp32(dh);
        for (int j = 0; j < 32; j++) y[i + j] = fmaf((float)(int8_t)b[2 + j] * d, p, y[i + j]);
    }
}

static void scale_scalar(int64_t n, float s, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] *= s;
}

/* RoPE's rotation as llama.cpp's AVX2 build rounds it: gcc contracts rotate_pairs (ops.cpp) into one fma
 * per output (read from libggml-cpu-haswell.so): neox y0 = fma(x0, c, -(x1 s)), y1 = fma(x0, s, x1 c); the
 * normal mode's vector loop y1 = fma(x1, c, x0 s).  Unfused, about one output in ten was an ulp off,
 * which flipped q8/bf16 roundings of the attention output at some positions (docs/CONFORMANCE.md). */
#define ROPE_BODY(FMA)                                                                                  \
    const int64_t half = neox ? n_dims / 2 : 1;                                                        \
    for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {                                                       \
        const int64_t ic = neox ? i0 / 2 : i0;                                                         \
        const float c = cs[i0], s = cs[i0 + 1], x0 = x[ic], x1 = x[ic + half];                         \
        y[ic] = FMA(x0, c, -(x1 * s));                                                                 \
        y[ic + half] = neox ? FMA(x0, s, x1 * c) : FMA(x1, c, x0 * s);                                 \
    }

static void rope_scalar(int64_t n_dims, bool neox, const float *cs, const float *x, float *y) {
    ROPE_BODY(fmaf)
}

/* ggml's rms_norm sum: a chain of double adds, one per element, so bound by the add's latency; eight rows'
 * chains side by side (named: a loop over an array kept them in memory, a store per add) */
static void sumsq_scalar(const float *const *x, int nr, int64_t n, double *sum) {
    int r = 0;
    for (; r + 8 <= nr; r += 8) {
        const float *x0 = x[r], *x1 = x[r + 1], *x2 = x[r + 2], *x3 = x[r + 3], *x4 = x[r + 4], *x5 = x[r + 5],
                    *x6 = x[r + 6], *x7 = x[r + 7];
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
        for (int64_t i = 0; i < n; i++) {
            s0 += (double)(x0[i] * x0[i]), s1 += (double)(x1[i] * x1[i]);
            s2 += (double)(x2[i] * x2[i]), s3 += (double)(x3[i] * x3[i]);
            s4 += (double)(x4[i] * x4[i]), s5 += (double)(x5[i] * x5[i]);
            s6 += (double)(x6[i] * x6[i]), s7 += (double)(x7[i] * x7[i]);
        }
        sum[r] = s0, sum[r + 1] = s1, sum[r + 2] = s2, sum[r + 3] = s3;
        sum[r + 4] = s4, sum[r + 5] = s5, sum[r + 6] = s6, sum[r + 7] = s7;
    }
    for (; r < nr; r++) {
        double s0 = 0;
        for (int64_t i = 0; i < n; i++) s0 += (double)(x[r][i] * x[r][i]);
        sum[r] = s0;
    }
}

static void scale_op_scalar(int64_t n, const float *x, float s, int op, const float *z, bool z1, float *y) {
    for (int64_t i = 0; i < n; i++) {
        const float t = x[i] * s, b = z1 ? z[0] : z ? z[i] : 0.0f;
        y[i] = op == MF_OP_MUL ? t * b : op == MF_OP_ADD ? t + b : t;
    }
}

static void bin_op_scalar(int64_t n, const float *x, int op, const float *z, bool z1, float *y) {
    for (int64_t i = 0; i < n; i++) {
        const float b = z1 ? z[0] : z[i];
        y[i] = op == MF_OP_MUL ? x[i] * b : op == MF_OP_DIV ? x[i] / b : x[i] + b;
    }
}

static void round_f16_scalar(int64_t n, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] = mf_fp16_to_fp32(mf_fp32_to_fp16(y[i]));
}

static void f16_scalar(const uint16_t *h, float *f, int64_t n) {
    for (int64_t i = 0; i < n; i++) f[i] = mf_fp16_to_fp32(h[i]);
}

#ifdef MF_CPU_X86
__attribute__((target("avx"))) static float dot_avx(const float *a, const float *b, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    float l[8];
    _mm256_storeu_ps(l, acc);
    for (; i < n; i++) l[i & 7] += a[i] * b[i];
    return ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]));
}

#define AVX2 __attribute__((target("avx2,fma")))

/* the same operations; with FMA enabled gcc and clang inline fmaf as vfmadd */
AVX2 static void rope_fma(int64_t n_dims, bool neox, const float *cs, const float *x, float *y) {
    ROPE_BODY(__builtin_fmaf)
}

AVX2 static void axpy_fma(int64_t n, float p, const float *x, float *y) {
    const __m256 vp = _mm256_set1_ps(p);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(vp, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = fmaf(p, x[i], y[i]);
}
AVX2 static void mad_q8_0_avx2(int64_t n, float p, const void *x, float *y) {
    const __m256 vp = _mm256_set1_ps(p);
    const uint8_t *b = x;
    for (int64_t i = 0; i < n; i += 32, b += 34) {
        uint16_t dh;
        memcpy(&dh, b, 2);
        const __m256 d = _mm256_set1_ps(mf_fp16_to_fp32(dh));
        for (int j = 0; j < 32; j += 8) {
            const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2 + j))));
            _mm256_storeu_ps(y + i + j, _mm256_fmadd_ps(_mm256_mul_ps(q, d), vp, _mm256_loadu_ps(y + i + j)));
        }
    }
}

AVX2 static void scale_avx2(int64_t n, float s, float *y) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), vs));
    for (; i < n; i++) y[i] *= s;
}

/* G groups of 4 rows: per 4 elements a 4 x 4 transpose puts element i of the group's rows in one register,
 * squared in float, widened and added to the group's 4 double chains in element order; the last n % 4
 * elements continue each chain in scalar */
static inline __attribute__((always_inline)) AVX2 void sumsq_groups(const float *const *x, const int G, int64_t n,
                                                                    double *sum) {
    /* unrolled over the groups so that the chains stay in registers (a loop over acc[] kept them in
     * memory: every add waited on a store-to-load forward) and the row pointers are loaded once */
    __m256d acc[4];
    const float *rp[16];
    _Pragma("GCC unroll 4") for (int g = 0; g < G; g++) acc[g] = _mm256_setzero_pd();
    _Pragma("GCC unroll 16") for (int k = 0; k < 4 * G; k++) rp[k] = x[k];
    const int64_t n4 = n & ~(int64_t)3;
    for (int64_t i = 0; i < n4; i += 4) {
        _Pragma("GCC unroll 4") for (int g = 0; g < G; g++) {
            __m128 r0 = _mm_loadu_ps(rp[4 * g] + i), r1 = _mm_loadu_ps(rp[4 * g + 1] + i);
            __m128 r2 = _mm_loadu_ps(rp[4 * g + 2] + i), r3 = _mm_loadu_ps(rp[4 * g + 3] + i);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            acc[g] = _mm256_add_pd(acc[g], _mm256_cvtps_pd(_mm_mul_ps(r0, r0)));
            acc[g] = _mm256_add_pd(acc[g], _mm256_cvtps_pd(_mm_mul_ps(r1, r1)));
            acc[g] = _mm256_add_pd(acc[g], _mm256_cvtps_pd(_mm_mul_ps(r2, r2)));
            acc[g] = _mm256_add_pd(acc[g], _mm256_cvtps_pd(_mm_mul_ps(r3, r3)));
        }
    }
    for (int g = 0; g < G; g++) {
        double s[4];
        _mm256_storeu_pd(s, acc[g]);
        for (int k = 0; k < 4; k++) {
            const float *xr = x[4 * g + k];
            for (int64_t i = n4; i < n; i++) s[k] += (double)(xr[i] * xr[i]);
            sum[4 * g + k] = s[k];
        }
    }
}

AVX2 static void sumsq_avx2(const float *const *x, int nr, int64_t n, double *sum) {
    int r = 0;
    for (; r + 16 <= nr; r += 16) sumsq_groups(x + r, 4, n, sum + r);
    for (; r + 4 <= nr; r += 4) sumsq_groups(x + r, 1, n, sum + r);
    if (r < nr) sumsq_scalar(x + r, nr - r, n, sum + r);
}

AVX2 static void scale_op_avx2(int64_t n, const float *x, float s, int op, const float *z, bool z1, float *y) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    if (op != MF_OP_MUL && op != MF_OP_ADD) {
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    } else {
        const bool mul = op == MF_OP_MUL;
        for (; i + 8 <= n; i += 8) {
            const __m256 t = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
            const __m256 b = z1 ? _mm256_set1_ps(z[0]) : _mm256_loadu_ps(z + i);
            _mm256_storeu_ps(y + i, mul ? _mm256_mul_ps(t, b) : _mm256_add_ps(t, b));
        }
    }
    if (i < n) scale_op_scalar(n - i, x + i, s, op, z1 ? z : z ? z + i : NULL, z1, y + i);
}

AVX2 static void bin_op_avx2(int64_t n, const float *x, int op, const float *z, bool z1, float *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 a = _mm256_loadu_ps(x + i), b = z1 ? _mm256_set1_ps(z[0]) : _mm256_loadu_ps(z + i);
        _mm256_storeu_ps(y + i, op == MF_OP_MUL   ? _mm256_mul_ps(a, b)
                                : op == MF_OP_DIV ? _mm256_div_ps(a, b) /* correctly rounded, as x / b */
                                                  : _mm256_add_ps(a, b));
    }
    if (i < n) bin_op_scalar(n - i, x + i, op, z1 ? z : z + i, z1, y + i);
}

#define AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw")))
AVX512 static void mad_q8_0_avx512(int64_t n, float p, const void *x, float *y) {
    const __m512 vp = _mm512_set1_ps(p);
    const uint8_t *b = x;
    for (int64_t i = 0; i < n; i += 32, b += 34) {
        uint16_t dh;
        memcpy(&dh, b, 2);
        const __m512 d = _mm512_set1_ps(mf_fp16_to_fp32(dh));
        for (int j = 0; j < 32; j += 16) {
            const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 2 + j))));
            _mm512_storeu_ps(y + i + j, _mm512_fmadd_ps(_mm512_mul_ps(q, d), vp, _mm512_loadu_ps(y + i + j)));
        }
    }
}

/* ggml_v_expf (ggml-cpu vec.h, the __AVX2__ && __FMA__ form), unchanged */
static inline AVX2 __m256 exp8(__m256 x) {
    const __m256 r = _mm256_set1_ps(EXP_SHIFT);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(EXP_LOG2E), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_LO), _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_HI), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1))));
    const __m256i c =
        _mm256_castps_si256(_mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), n), _mm256_set1_ps(126), _CMP_GT_OQ));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(EXP_C5), b, _mm256_set1_ps(EXP_C4)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(EXP_C3), b, _mm256_set1_ps(EXP_C2))),
        u, _mm256_mul_ps(_mm256_set1_ps(EXP_C1), b));
    if (!_mm256_movemask_ps(_mm256_castsi256_ps(c))) return _mm256_fmadd_ps(j, k, k);
    const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                       _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256i d =
        _mm256_castps_si256(_mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), n), _mm256_set1_ps(192), _CMP_GT_OQ));
    return _mm256_or_ps(
        _mm256_and_ps(_mm256_castsi256_ps(d), _mm256_mul_ps(s1, s1)),
        _mm256_andnot_ps(_mm256_castsi256_ps(d),
                         _mm256_or_ps(_mm256_and_ps(_mm256_castsi256_ps(c), _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1)),
                                      _mm256_andnot_ps(_mm256_castsi256_ps(c), _mm256_fmadd_ps(k, j, k)))));
}

/* ggml_vec_soft_max_f32's AVX2 loop; the last n % 8 elements as one zero-padded group (see the top) */
static AVX2 double exp_sub_avx2(int64_t n, const float *x, float sub, float *y) {
    const __m256 vs = _mm256_set1_ps(sub);
    double sum = 0.0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 val = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs));
        _mm256_storeu_ps(y + i, val);
        __m128 v2 = _mm_add_ps(_mm256_extractf128_ps(val, 1), _mm256_castps256_ps128(val));
        v2 = _mm_add_ps(v2, _mm_movehl_ps(v2, v2));
        v2 = _mm_add_ss(v2, _mm_movehdup_ps(v2));
        sum += (double)_mm_cvtss_f32(v2);
    }
    if (i < n) {
        float e[8] = {0};
        for (int64_t l = 0; i + l < n; l++) e[l] = y[i + l] = mf_cpu_expf(x[i + l] - sub);
        sum += (double)hsum8(e);
    }
    return sum;
}

/* ggml_vec_swiglu_f32's AVX2 loop (ggml_v_silu times u), then ggml_silu_f32 for the tail */
static AVX2 void swiglu_avx2(int64_t n, const float *x, const float *u, float *y) {
    int64_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        __m256 s = _mm256_div_ps(v, _mm256_add_ps(one, exp8(_mm256_sub_ps(zero, v))));
        if (u) s = _mm256_mul_ps(s, _mm256_loadu_ps(u + i));
        _mm256_storeu_ps(y + i, s);
    }
    for (; i < n; i++) y[i] = u ? silu_tail(x[i]) * u[i] : silu_tail(x[i]);
}

#if defined(__x86_64__)
/* the same, 16 lanes at a time: every lane the same operations as exp8's and ggml_v_silu's, so the same
 * bits; the boundary between vector and tail stays AVX2's (the last n % 8 elements take libm's expf) */
static AVX512 void swiglu_avx512(int64_t n, const float *x, const float *u, float *y) {
    const int64_t nv = n & ~(int64_t)7;
    int64_t i = 0;
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    for (; i + 16 <= nv; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        __m512 s = _mm512_div_ps(v, _mm512_add_ps(one, mf_exp16(_mm512_sub_ps(zero, v))));
        if (u) s = _mm512_mul_ps(s, _mm512_loadu_ps(u + i));
        _mm512_storeu_ps(y + i, s);
    }
    swiglu_avx2(n - i, x + i, u ? u + i : NULL, y + i);
}
#endif

/* F16C's conversion rounds to nearest even like mf_fp32_to_fp16 (subnormals included): the same bits */
__attribute__((target("avx,f16c"))) static void round_f16_f16c(int64_t n, float *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(y + i), _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++) y[i] = mf_fp16_to_fp32(mf_fp32_to_fp16(y[i]));
}

__attribute__((target("avx,f16c"))) static void f16_f16c(const uint16_t *h, float *f, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) f[i] = mf_fp16_to_fp32(h[i]);
}
#endif

void mf_cpu_vec_init_isa(mf_cpu_vec *v, mf_isa isa) {
    v->dot = dot_scalar;
    v->axpy = axpy_scalar;
    v->mad_q8_0 = mad_q8_0_scalar;
    v->scale = scale_scalar;
    v->f16_to_f32 = f16_scalar;
    v->round_f16 = round_f16_scalar;
    v->exp_sub = exp_sub_scalar;
    v->swiglu = swiglu_scalar;
    v->rope = rope_scalar;
    v->sumsq = sumsq_scalar;
    v->scale_op = scale_op_scalar;
    v->bin_op = bin_op_scalar;
#ifdef MF_CPU_X86
    /* quant's AVX2 level implies AVX and F16C (AVX-512 includes it); MINFER_ISA=scalar forces the plain loops */
    if (isa == MF_ISA_AVX2 || mf_isa_avx512(isa)) {
        v->dot = dot_avx;
        v->axpy = axpy_fma;
        v->mad_q8_0 = mf_isa_avx512(isa) ? mad_q8_0_avx512 : mad_q8_0_avx2;
        v->scale = scale_avx2;
        v->f16_to_f32 = f16_f16c;
        v->round_f16 = round_f16_f16c;
        v->exp_sub = exp_sub_avx2;
        v->swiglu = swiglu_avx2;
#if defined(__x86_64__)
        if (mf_isa_avx512(isa)) v->swiglu = swiglu_avx512;
#endif
        v->rope = rope_fma;
        v->sumsq = sumsq_avx2;
        v->scale_op = scale_op_avx2;
        v->bin_op = bin_op_avx2;
    }
#else
    (void)isa;
#endif
}

void mf_cpu_vec_init(mf_cpu_vec *v) {
    mf_cpu_vec_init_isa(v, mf_quant_active_isa());
}
