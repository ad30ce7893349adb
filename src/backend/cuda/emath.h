/* emath: the per-element arithmetic of the CUDA elementwise and attention kernels (elem.cu, attention.cu),
 * as C functions that compile for the host and the device alike, so tests/test_cuda_emath.c checks on the
 * host, in every build, against the CPU reference (src/quant, src/core, backend/cpu/vec.c) what the
 * kernels compute on the device.
 *
 * The host result is the device result because both sides use only correctly rounded IEEE operations and
 * never contract a product into an addition (hd.h: mf_hd_mul / mf_hd_add / explicit fmaf); libm's
 * cosf/sinf/powf/expf are not used here (the rope's cos/sin are the one place the device's own libm is
 * used, see mf_hd_rope_theta). */
#ifndef MF_BACKEND_CUDA_EMATH_H
#define MF_BACKEND_CUDA_EMATH_H

#include <stdint.h>

#include <math.h>

#include "backend/cuda/hd.h"

/* ---- f16 (quant/fp16.c, ggml's portable conversions; f16 -> f32 is hd.h's) ---- */

/* round to nearest even, overflow to inf, subnormals, every NaN -> sign|0x7E00 */
MF_HD uint16_t mf_hd_f32_to_f16(float f) {
    uint32_t x = mf_hd_f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    x &= 0x7FFFFFFF;
    if (x > 0x7F800000) return sign | 0x7E00;
    const uint32_t exp = x >> 23, man = x & 0x7FFFFF;
    if (exp >= 143) return sign | 0x7C00;
    if (exp >= 113) {
        uint32_t h = ((exp - 112) << 10) | (man >> 13);
        const uint32_t rem = man & 0x1FFF;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
        return sign | (uint16_t)h;
    }
    const int shift = 126 - (int)exp;
    if (exp == 0 || shift > 24) return sign;
    const uint32_t m = man | 0x800000;
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    return sign | (uint16_t)r;
}

/* ---- q8_0: the KV store's quantizer (mf_quantize_row_cpu(Q8_0): ggml-cpu's x86 quantize_row_q8_0) ---- */

/* nearest, ties to even, for |v| < 2^22 (ggml's nearest_int; quant/quantize.c round_even) */
MF_HD int mf_hd_round_even(float v) {
    const float t = mf_hd_add(v, 12582912.f);
    return (int)(mf_hd_f32_bits(t) & 0x007fffff) - 0x00400000;
}

/* one block of 32 floats -> 34 bytes {f16 d (little-endian), int8 qs[32]}: d = amax / 127, q = round_even(x *
 * 127 / amax) clamped to [-128, 127].  Written byte by byte: a block inside a cache row is only 2-aligned. */
MF_HD void mf_hd_q8_0_block(const float *x, unsigned char *dst) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float a = fabsf(x[j]);
        amax = amax > a ? amax : a; /* MF_MAX(amax, fabsf(x)) */
    }
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    const uint16_t dh = mf_hd_f32_to_f16(d);
    dst[0] = (unsigned char)(dh & 0xFF);
    dst[1] = (unsigned char)(dh >> 8);
    for (int j = 0; j < 32; j++) {
        int q = mf_hd_round_even(mf_hd_mul(x[j], id));
        q = q < -128 ? -128 : q > 127 ? 127 : q;
        dst[2 + j] = (unsigned char)(int8_t)q;
    }
}

/* ---- exp: one lane of ggml_v_expf, operation for operation (backend/cpu/vec.c mf_cpu_expf) ---- */
MF_HD float mf_hd_expf(float x) {
    const float z = fmaf(x, 0x1.715476p+0f, 0x1.8p23f);
    const float n = z - 0x1.8p23f;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const uint32_t e = mf_hd_f32_bits(z) << 23;
    const float k = mf_hd_bits_f32(e + 0x3f800000u); /* + bits of 1.0f */
    const float u = mf_hd_mul(b, b);
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         mf_hd_mul(0x1.ffffecp-1f, b));
    if (!(fabsf(n) > 126.0f)) return fmaf(j, k, k); /* NaN too */
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = mf_hd_bits_f32(g + 0x7f000000u), s2 = mf_hd_bits_f32(e - g);
    if (fabsf(n) > 192.0f) return mf_hd_mul(s1, s1);
    return mf_hd_mul(fmaf(s2, j, s2), s1);
}

/* SiLU as ggml_v_silu: x / (1 + e^-x) (vec.c; the CPU's last n % 8 elements use libm's expf instead) */
MF_HD float mf_hd_silu(float x) {
    return x / mf_hd_add(1.0f, mf_hd_expf(0.0f - x));
}

/* ---- RMS norm: the scale from the double sum of the rounded squares (backend/cpu/ops_elem.c) ---- */
MF_HD float mf_hd_rms_scale(double sum_sq, int64_t n, float eps) {
    const float mean = (float)(sum_sq / (double)n);
    return 1.0f / sqrtf(mf_hd_add(mean, eps));
}

/* ---- rope (core/rope.c) ---- */

/* The angle of pair i at position p: mf_rope_cache's theta, which starts at p and is multiplied by
 * theta_scale once per pair (a running product, so pair i is i rounded multiplications, not a power),
 * times freq_scale.  theta_scale comes from the host (mf_rope_theta_scale: libm's powf).  cos/sin of
 * this angle are the device's own cosf/sinf (not bit-equal to glibc's in every case: the one source of
 * difference between the GPU and CPU rope). */
MF_HD float mf_hd_rope_theta(float p, float freq_scale, float theta_scale, int i) {
    float theta = p;
    for (int k = 0; k < i; k++) theta = mf_hd_mul(theta, theta_scale);
    return mf_hd_mul(freq_scale, theta);
}

/* YaRN's angle (ext_factor != 0): the interpolated angle above mixed with the original one by the ramp over
 * pairs corr0..corr1, one fma as core/rope.c (and ggml-cpu's build) rounds it.  cos/sin of it are then scaled
 * by the host's mf_rope_mscale. */
MF_HD float mf_hd_rope_yarn_theta(float p, float freq_scale, float theta_scale, int i, float ext_factor, float corr0,
                                  float corr1) {
    float theta = p;
    for (int k = 0; k < i; k++) theta = mf_hd_mul(theta, theta_scale);
    const float t = mf_hd_mul(freq_scale, theta);
    if (ext_factor == 0.0f) return t;
    const float d = mf_hd_sub(corr1, corr0);
    const float y = mf_hd_div(mf_hd_sub((float)i, corr0), d > 0.001f ? d : 0.001f);
    const float mix = mf_hd_mul(mf_hd_sub(1.0f, fminf(1.0f, fmaxf(0.0f, y))), ext_factor);
    return mf_hd_fma(t, mf_hd_sub(1.0f, mix), mf_hd_mul(theta, mix));
}

/* The rotation of one pair as the CPU rounds it: one fma per output (vec.c ROPE_BODY) */
MF_HD void mf_hd_rope_pair(float x0, float x1, float c, float s, int neox, float *y0, float *y1) {
    *y0 = fmaf(x0, c, -mf_hd_mul(x1, s));
    *y1 = neox ? fmaf(x0, s, mf_hd_mul(x1, c)) : fmaf(x1, c, mf_hd_mul(x0, s));
}

/* ---- hadamard (core/hadamard.c): pass `len` of the butterfly as n/2 independent pairs ---- */
/* pair j (0 <= j < n/2) of the pass with stride len: elements lo and lo + len, (u, v) -> (u + v, u - v) */
MF_HD int mf_hd_fwht_lo(int j, int len) {
    return (j / len) * 2 * len + j % len;
}

/* ---- attention: merging a chunk's partial softmax into the running state (attention.cu) ----
 * A chunk gives its max m_c, its sum l_c = sum e^(s - m_c) and o_c = sum p v.  The running state (M, L, O)
 * starts at (-inf, 0, 0) and takes the chunks in index order: M' = max(M, m_c), a = e^(M - M'),
 * b = e^(m_c - M'), L' = fma(l_c, b, L a), O' = fma(o_c, b, O a).  The decode path's combine kernel and
 * the prefill kernel both call these two functions, chunk by chunk in the same order. */
MF_HD void mf_hd_att_merge(float *M, float *L, float m_c, float l_c, float *a, float *b) {
    const float mn = m_c > *M ? m_c : *M;
    *a = mf_hd_expf(*M - mn); /* M = -inf (the first chunk): e^-inf = 0 */
    *b = mf_hd_expf(m_c - mn);
    *L = fmaf(l_c, *b, mf_hd_mul(*L, *a));
    *M = mn;
}

MF_HD float mf_hd_att_merge_o(float o, float o_c, float a, float b) {
    return fmaf(o_c, b, mf_hd_mul(o, a));
}

/* the output: O times 1 / L (the CPU's order: the reciprocal first), 0 for an empty sum */
MF_HD float mf_hd_att_out(float o, float L) {
    const float inv = L == 0.0f ? 0.0f : 1.0f / L;
    return mf_hd_mul(o, inv);
}

#endif
