/* Small f32 vector primitives for attention.  The AVX versions give BITWISE the scalar results: same
 * eight partial sums, mul then add (never fused), same final reduction; f16 -> f32 is exact either
 * way.  So the ISA choice never changes a result. */
#include "backend/cpu/cpu_impl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MF_CPU_X86 1
#endif

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
#ifdef MF_CPU_X86
    /* quant's AVX2 level implies AVX and F16C; MINFER_ISA=scalar forces the plain loops */
    if (mf_quant_active_isa() >= MF_ISA_AVX2) {
        v->dot = dot_avx;
        v->axpy = axpy_avx;
        v->f16_to_f32 = f16_f16c;
    }
#endif
}
