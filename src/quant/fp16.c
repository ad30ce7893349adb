/* quant: f16 / bf16 <-> f32 scalar conversions.
 *
 * Bit-exact with ggml's portable conversions (ggml-impl.h), which is what llama.cpp writes into and
 * reads from GGUF files:
 *   - f16 -> f32 is exact; a signalling NaN comes back quiet with its payload (as x86 arithmetic and
 *     F16C do), every other value is reproduced bit for bit;
 *   - f32 -> f16 rounds to nearest even, overflows to inf, produces subnormals, and maps every NaN to
 *     the canonical sign|0x7E00 (ggml's software path does; F16C would keep payload bits);
 *   - bf16 -> f32 is a shift; f32 -> bf16 rounds to nearest even and quiets NaN by setting bit 6 of
 *     the truncated pattern (ggml's rule, so NaN payloads survive truncated, not rounded). */
#include "quant/quant_impl.h"

float mf_fp16_to_fp32(uint16_t h) { return mf_h2f(h); }

/* Round the integer m (< 2^25) right by `shift` bits, to nearest even. */
static inline uint32_t shr_rne(uint32_t m, int shift) {
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    return r;
}

uint16_t mf_fp32_to_fp16(float f) {
    uint32_t x = mf_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    x &= 0x7FFFFFFF;
    if (x > 0x7F800000) return sign | 0x7E00; /* NaN */
    uint32_t exp = x >> 23, man = x & 0x7FFFFF;
    if (exp >= 143) return sign | 0x7C00; /* >= 2^16 (and inf): beyond the f16 range */
    if (exp >= 113) {
        /* normal f16 range; a mantissa carry rolls into the exponent (up to inf) by itself */
        uint32_t h = ((exp - 112) << 10) | (man >> 13);
        uint32_t rem = man & 0x1FFF;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
        return sign | (uint16_t)h;
    }
    /* f16 subnormal (or zero): the value in units of 2^-24, rounded to nearest even; rounding up to
     * 0x400 yields the smallest normal, which is the correct encoding */
    int shift = 126 - (int)exp; /* value = (man|2^23) * 2^(exp-150) = m * 2^-24 >> shift */
    if (exp == 0 || shift > 24) return sign; /* below half the smallest subnormal */
    return sign | (uint16_t)shr_rne(man | 0x800000, shift);
}

float mf_bf16_to_fp32(uint16_t h) { return mf_bf162f(h); }

uint16_t mf_fp32_to_bf16(float f) {
    uint32_t u = mf_f32_bits(f);
    if ((u & 0x7FFFFFFF) > 0x7F800000) return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + (0x7FFF + ((u >> 16) & 1))) >> 16);
}
