/* Deterministic pseudo-random weights: splitmix64 keyed by (seed, tensor name), approximately
 * normal values from the sum of four 16-bit uniforms (Irwin-Hall), scaled by one float multiply.
 * No libm: the same seed gives the same bits on every machine. */
#include "genmodel.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void gm_rng_seed(gm_rng *r, uint64_t seed, const char *stream_name) {
    uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a of the name, mixed with the seed */
    for (const unsigned char *p = (const unsigned char *)stream_name; *p; p++) h = (h ^ *p) * 0x100000001B3ull;
    uint64_t s = seed ^ 0x6A09E667F3BCC909ull;
    r->s = splitmix64(&s) ^ h;
}

uint64_t gm_rng_u64(gm_rng *r) { return splitmix64(&r->s); }

/* std of (a+b+c+d - 2*65535) for four uniform integers in [0, 65535]: sqrt(4 * (65536^2 - 1) / 12) */
#define GM_IH4_STD 37837.22703f

void gm_rng_fill(gm_rng *r, float *dst, int64_t n, float mean, float sigma) {
    const float k = sigma / GM_IH4_STD;
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = splitmix64(&r->s);
        int32_t z = (int32_t)(v & 0xFFFF) + (int32_t)((v >> 16) & 0xFFFF) + (int32_t)((v >> 32) & 0xFFFF) +
                    (int32_t)(v >> 48) - 2 * 65535;
        dst[i] = mean + (float)z * k;
    }
}
