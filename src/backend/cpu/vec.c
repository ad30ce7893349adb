/* Small f32 vector primitives for attention and the activations.  The AVX versions give BITWISE the
 * scalar results: same eight partial sums, mul then add (never fused), same final reduction; f16 -> f32
 * is exact either way; exp is the same sequence of correctly rounded operations (fmaf = vfmadd).  So the
 * ISA choice never changes a result.
 *
 * exp: libm's expf one value at a time was ~5% of a prefill (softmax, SiLU).  Here: n = round(x log2 e),
 * r = x - n ln2 (ln2 split in two, Cody-Waite), e^r by Cephes' expf polynomial (about 1 ulp), times 2^n
 * built in the exponent bits; x below -87.33 gives 0 and x is capped at 88 (e^88 = 1.7e38; only the
 * SiLU of x < -88 sees it, as -x / 1.7e38 instead of -0).  llama.cpp also uses its own vector exp there. */
#include <math.h>
#include "backend/cpu/cpu_impl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MF_CPU_X86 1
#endif

#define EXP_LO -87.33654f
#define EXP_HI 88.0f
#define LOG2E 1.44269504088896341f
#define LN2_HI 0.693145751953125f
#define LN2_LO 1.428606765330187e-06f
#define EP0 1.9875691500e-4f
#define EP1 1.3981999507e-3f
#define EP2 8.3334519073e-3f
#define EP3 4.1665795894e-2f
#define EP4 1.6666665459e-1f
#define EP5 5.0000001201e-1f

float mf_cpu_expf(float x) {
    if (isnan(x)) return x;
    if (x < EXP_LO) return 0.0f;
    if (x > EXP_HI) x = EXP_HI;
    const float n = rintf(x * LOG2E);
    float r = fmaf(-n, LN2_HI, x);
    r = fmaf(-n, LN2_LO, r);
    float p = fmaf(EP0, r, EP1);
    p = fmaf(p, r, EP2);
    p = fmaf(p, r, EP3);
    p = fmaf(p, r, EP4);
    p = fmaf(p, r, EP5);
    const float e = fmaf(p, r * r, r) + 1.0f;
    const uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    return e * scale;
}

static void exp_sub_scalar(int64_t n, const float *x, float sub, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] = mf_cpu_expf(x[i] - sub);
}

static void swiglu_scalar(int64_t n, const float *x, const float *u, float *y) {
    for (int64_t i = 0; i < n; i++) {
        const float s = x[i] / (1.0f + mf_cpu_expf(-x[i]));
        y[i] = u ? s * u[i] : s;
    }
}

static float dot_scalar(const float *a, const float *b, int64_t n) {
    return mf_cpu_dot_f32(a, b, n);
}

static void axpy_scalar(int64_t n, float p, const float *x, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] += p * x[i];
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

__attribute__((target("avx"))) static void axpy_avx(int64_t n, float p, const float *x, float *y) {
    const __m256 vp = _mm256_set1_ps(p);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(vp, _mm256_loadu_ps(x + i))));
    for (; i < n; i++) y[i] += p * x[i];
}

#define AVX2 __attribute__((target("avx2,fma")))
static inline AVX2 __m256 exp8(__m256 x) {
    const __m256 lo = _mm256_cmp_ps(x, _mm256_set1_ps(EXP_LO), _CMP_LT_OQ);
    x = _mm256_min_ps(x, _mm256_set1_ps(EXP_HI)); /* NaN lanes: the callers put the NaN back */
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(EP0), r, _mm256_set1_ps(EP1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EP2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EP3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EP4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EP5));
    const __m256 e = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(lo, _mm256_mul_ps(e, _mm256_castsi256_ps(bits)));
}

static AVX2 void exp_sub_avx2(int64_t n, const float *x, float sub, float *y) {
    const __m256 vs = _mm256_set1_ps(sub);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_sub_ps(_mm256_loadu_ps(x + i), vs);
        const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
        _mm256_storeu_ps(y + i, _mm256_blendv_ps(exp8(v), v, nan));
    }
    for (; i < n; i++) y[i] = mf_cpu_expf(x[i] - sub);
}

static AVX2 void swiglu_avx2(int64_t n, const float *x, const float *u, float *y) {
    int64_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i), m = _mm256_sub_ps(zero, v);
        const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
        const __m256 e = _mm256_blendv_ps(exp8(m), m, nan);
        __m256 s = _mm256_div_ps(v, _mm256_add_ps(one, e));
        if (u) s = _mm256_mul_ps(s, _mm256_loadu_ps(u + i));
        _mm256_storeu_ps(y + i, s);
    }
    for (; i < n; i++) {
        const float s = x[i] / (1.0f + mf_cpu_expf(-x[i]));
        y[i] = u ? s * u[i] : s;
    }
}

__attribute__((target("avx,f16c"))) static void f16_f16c(const uint16_t *h, float *f, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) f[i] = mf_fp16_to_fp32(h[i]);
}
#endif

void mf_cpu_vec_init(mf_cpu_vec *v) {
    v->dot = dot_scalar;
    v->axpy = axpy_scalar;
    v->f16_to_f32 = f16_scalar;
    v->exp_sub = exp_sub_scalar;
    v->swiglu = swiglu_scalar;
#ifdef MF_CPU_X86
    /* quant's AVX2 level implies AVX and F16C (AVX-512 includes it); MINFER_ISA=scalar forces the plain loops */
    if (mf_quant_active_isa() == MF_ISA_AVX2 || mf_quant_active_isa() == MF_ISA_AVX512) {
        v->dot = dot_avx;
        v->axpy = axpy_avx;
        v->f16_to_f32 = f16_f16c;
        v->exp_sub = exp_sub_avx2;
        v->swiglu = swiglu_avx2;
    }
#endif
}
