/* MF_HD: a function the CUDA kernels call on the device and the host tests call on the host (qmath.h,
 * emath.h); plain C, so tests/test_cuda_*.c compile it in every build.
 *
 * The arithmetic both headers build on lives here once:
 *   - separate IEEE operations: nvcc fuses `a * b + c` into one fma by default (--fmad=true) where gcc in
 *     ISO C mode does not, so every product that feeds an addition goes through mf_hd_mul / mf_hd_add
 *     (__fmul_rn / __fadd_rn on the device: never fused), and every fma the CPU reference does is an
 *     explicit mf_hd_fma.  +, -, *, / and fmaf are correctly rounded on both sides (nvcc's defaults:
 *     -prec-div and -prec-sqrt on; never build with --use_fast_math);
 *   - bit casts: __float_as_uint / __uint_as_float on the device, memcpy on the host;
 *   - f16 and bf16 -> f32, exact for every value. */
#ifndef MF_BACKEND_CUDA_HD_H
#define MF_BACKEND_CUDA_HD_H

#include <stdint.h>

#include <math.h>
#include <string.h>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define MF_HD __host__ __device__ static inline
#else
#define MF_HD static inline
#endif

MF_HD float mf_hd_mul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
MF_HD float mf_hd_add(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
MF_HD float mf_hd_sub(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
MF_HD float mf_hd_div(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
MF_HD float mf_hd_fma(float a, float b, float c) {
#ifdef __CUDA_ARCH__
    return __fmaf_rn(a, b, c);
#else
    return fmaf(a, b, c);
#endif
}

MF_HD uint32_t mf_hd_f32_bits(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

MF_HD float mf_hd_bits_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* f16 bits -> f32 (quant/fp16.c, ggml's portable conversion), exact for every number; the host keeps a
 * signalling NaN's payload and quiets it, the device's conversion instruction may not (no NaN reaches a
 * kernel's arithmetic from a valid file or cache). */
MF_HD float mf_hd_f16_to_f32(uint16_t h) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    if (exp == 0x1F) return mf_hd_bits_f32(sign | 0x7F800000u | (man << 13) | (man ? 0x400000u : 0));
    if (exp == 0) return mf_hd_bits_f32(sign | mf_hd_f32_bits((float)man * 0x1p-24f)); /* exact */
    return mf_hd_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
#endif
}

MF_HD float mf_hd_bf16_to_f32(uint16_t h) { return mf_hd_bits_f32((uint32_t)h << 16); }

#endif
