/* The IQ2/IQ3 x Q8_K vec_dot for x86, written once and instantiated per ISA (dot_iq_avx2.c: maddubs +
 * madd; dot_iq_avx512.c: VNNI).  Both build, per super-block, the reference's 8 int32 lanes (lane k = sum
 * over sub-blocks of the multiplier times the integer dot of values 4k..4k+3: exact, so equal however
 * they are summed) and fold them exactly as the reference does (quant_iq.h): the same bits.
 * This folder only; included by one .c per ISA, which defines MF_IQ_MULACC. */
#ifndef MF_DOT_IQ_X86_H
#define MF_DOT_IQ_X86_H

#include "quant/quant_iq.h"
#include "quant/quant_x86.h"

/* Sub-block ib of a block of `type` (a constant after inlining): its 32 grid magnitudes as bytes, its
 * 32 sign bits (bit e negates value e) and the multipliers of its two halves. */
static inline __attribute__((always_inline)) MF_AVX2 __m256i mf_iq_x86_sub(uint32_t type, const uint8_t *b, int ib,
                                                                            uint32_t *signs, int *m0, int *m1) {
    switch (type) {
    case MF_TYPE_IQ2_XXS: {
        const uint8_t *q = b + 2 + 8 * ib;
        const uint32_t aux = mf_iq_rd32(q + 4);
        *signs = (uint32_t)mf_iq_ksigns(aux) | (uint32_t)mf_iq_ksigns(aux >> 7) << 8 |
                 (uint32_t)mf_iq_ksigns(aux >> 14) << 16 | (uint32_t)mf_iq_ksigns(aux >> 21) << 24;
        *m0 = *m1 = 2 * (int)(aux >> 28) + 1;
        return _mm256_set_epi64x((long long)mf_iq2xxs_grid[q[3]], (long long)mf_iq2xxs_grid[q[2]],
                                 (long long)mf_iq2xxs_grid[q[1]], (long long)mf_iq2xxs_grid[q[0]]);
    }
    case MF_TYPE_IQ2_XS: {
        uint16_t q[4];
        memcpy(q, b + 2 + 8 * ib, 8);
        *signs = (uint32_t)mf_iq_ksigns(q[0] >> 9) | (uint32_t)mf_iq_ksigns(q[1] >> 9) << 8 |
                 (uint32_t)mf_iq_ksigns(q[2] >> 9) << 16 | (uint32_t)mf_iq_ksigns(q[3] >> 9) << 24;
        *m0 = 2 * (b[66 + ib] & 15) + 1;
        *m1 = 2 * (b[66 + ib] >> 4) + 1;
        return _mm256_set_epi64x((long long)mf_iq2xs_grid[q[3] & 511], (long long)mf_iq2xs_grid[q[2] & 511],
                                 (long long)mf_iq2xs_grid[q[1] & 511], (long long)mf_iq2xs_grid[q[0] & 511]);
    }
    case MF_TYPE_IQ2_S: {
        const uint8_t *q = b + 2 + 4 * ib;
        const unsigned qh = b[66 + ib];
        *signs = mf_iq_rd32(b + 34 + 4 * ib);
        *m0 = 2 * (b[74 + ib] & 15) + 1;
        *m1 = 2 * (b[74 + ib] >> 4) + 1;
        return _mm256_set_epi64x((long long)mf_iq2s_grid[q[3] | (qh >> 6 & 3) << 8],
                                 (long long)mf_iq2s_grid[q[2] | (qh >> 4 & 3) << 8],
                                 (long long)mf_iq2s_grid[q[1] | (qh >> 2 & 3) << 8],
                                 (long long)mf_iq2s_grid[q[0] | (qh & 3) << 8]);
    }
    case MF_TYPE_IQ3_XXS: {
        const uint8_t *q = b + 2 + 8 * ib;
        const uint32_t aux = mf_iq_rd32(b + 66 + 4 * ib);
        *signs = (uint32_t)mf_iq_ksigns(aux) | (uint32_t)mf_iq_ksigns(aux >> 7) << 8 |
                 (uint32_t)mf_iq_ksigns(aux >> 14) << 16 | (uint32_t)mf_iq_ksigns(aux >> 21) << 24;
        *m0 = *m1 = 2 * (int)(aux >> 28) + 1;
        return _mm256_set_epi32((int)mf_iq3xxs_grid[q[7]], (int)mf_iq3xxs_grid[q[6]], (int)mf_iq3xxs_grid[q[5]],
                                (int)mf_iq3xxs_grid[q[4]], (int)mf_iq3xxs_grid[q[3]], (int)mf_iq3xxs_grid[q[2]],
                                (int)mf_iq3xxs_grid[q[1]], (int)mf_iq3xxs_grid[q[0]]);
    }
    default: { /* MF_TYPE_IQ3_S */
        const uint8_t *q = b + 2 + 8 * ib;
        const unsigned qh = b[66 + ib];
        const unsigned sc = b[106 + ib / 2];
        *signs = mf_iq_rd32(b + 74 + 4 * ib);
        *m0 = *m1 = 2 * (int)(ib % 2 ? sc >> 4 : sc & 15) + 1;
#define MF_IQ3S_G(k) (int)mf_iq3s_grid[q[k] | (qh >> (k) & 1) << 8]
        return _mm256_set_epi32(MF_IQ3S_G(7), MF_IQ3S_G(6), MF_IQ3S_G(5), MF_IQ3S_G(4), MF_IQ3S_G(3),
                                MF_IQ3S_G(2), MF_IQ3S_G(1), MF_IQ3S_G(0));
#undef MF_IQ3S_G
    }
    }
}

/* Activation rows a, a + a_stride, ... (na of them, 1 to 8, a constant after inlining) against weight row b,
 * into s[0], s[s_stride], ...: each pair's int32 lanes and float steps are exactly the vec_dot's (na = 1 IS
 * the vec_dot), while the weight's grid bytes, signs and multipliers are worked out once for all of them.
 * The sign is applied to the activation bytes with vpsignb: -(-128) stays -128, as in the reference.
 * Expanded once per ISA file, after its MF_IQ_MULACC (acc plus the multiplied sums), with that file's target attribute. */
#define MF_IQ_X86_ROWS(TGT)                                                                                          \
    static inline __attribute__((always_inline)) TGT void iq_rows(uint32_t type, float inv, int64_t n,               \
                                                                  const uint8_t *b, const uint8_t *a,                \
                                                                  size_t a_stride, int na, float *s,                 \
                                                                  size_t s_stride) {                                 \
        const size_t bs = mf_iq_block_size(type);                                                                    \
        __m256 acc[8];                                                                                               \
        _Pragma("GCC unroll 8") for (int j = 0; j < na; j++) acc[j] = _mm256_setzero_ps();                           \
        for (int64_t i = 0; i < n / MF_QK_K; i++, b += bs) {                                                         \
            uint16_t dh;                                                                                             \
            memcpy(&dh, b, 2);                                                                                       \
            const float dw = MF_H2F(dh);                                                                             \
            __m256i sumi[8];                                                                                         \
            _Pragma("GCC unroll 8") for (int j = 0; j < na; j++) sumi[j] = _mm256_setzero_si256();                   \
            for (int ib = 0; ib < 8; ib++) {                                                                         \
                uint32_t sg;                                                                                         \
                int m0, m1;                                                                                          \
                const __m256i g = mf_iq_x86_sub(type, b, ib, &sg, &m0, &m1);                                         \
                const __m256i sgn = _mm256_or_si256(mf_bits32((const uint8_t *)&sg), _mm256_set1_epi8(1));           \
                _Pragma("GCC unroll 8") for (int j = 0; j < na; j++) {                                               \
                    const mf_block_q8_K *y = (const mf_block_q8_K *)(a + j * a_stride) + i;                          \
                    const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * ib));                       \
                    sumi[j] = MF_IQ_MULACC(sumi[j], g, _mm256_sign_epi8(q8, sgn), m0, m1);         \
                }                                                                                                    \
            }                                                                                                        \
            _Pragma("GCC unroll 8") for (int j = 0; j < na; j++) {                                                   \
                const float d = dw * ((const mf_block_q8_K *)(a + j * a_stride))[i].d;                               \
                acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[j]), acc[j]);                    \
            }                                                                                                        \
        }                                                                                                            \
        _Pragma("GCC unroll 8") for (int j = 0; j < na; j++) s[j * s_stride] = (inv) * mf_hsum_f32x8(acc[j]);        \
    }

#define MF_IQ_X86_DOT(name, type, inv)                                                                               \
    void name(int64_t n, float *s, const void *w, const void *a) {                                                   \
        iq_rows(type, inv, n, w, a, 0, 1, s, 1);                                                                     \
    }

/* The tile: each weight row against the activations 8 at a time (then 4, 2, 1).  A prefill pays the
 * weight's decoding (grid lookups, sign bits) once per 8 activations instead of once per pair: pp512 of a
 * Qwen2.5-0.5B IQ2_XXS file 2.9x, IQ3_S 2.3x on Zen 4 (docs/PERFORMANCE.md, eighteenth session).  With 4
 * at a time it was 2.4x; AVX2's 16 registers did as well with 8 as with 4. */
#define MF_IQ_X86_TILE(name, type, inv)                                                                              \
    void name(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,                \
              size_t a_stride, int na) {                                                                             \
        for (int i = 0; i < nw; i++) {                                                                               \
            const uint8_t *wi = (const uint8_t *)w + i * w_stride, *aj = a;                                          \
            float *si = s + i * ldc;                                                                                 \
            int j = 0;                                                                                               \
            for (; j + 8 <= na; j += 8) iq_rows(type, inv, n, wi, aj + j * a_stride, a_stride, 8, si + j, 1);        \
            if (j + 4 <= na) {                                                                                       \
                iq_rows(type, inv, n, wi, aj + j * a_stride, a_stride, 4, si + j, 1);                                \
                j += 4;                                                                                              \
            }                                                                                                        \
            if (j + 2 <= na) {                                                                                       \
                iq_rows(type, inv, n, wi, aj + j * a_stride, a_stride, 2, si + j, 1);                                \
                j += 2;                                                                                              \
            }                                                                                                        \
            if (j < na) iq_rows(type, inv, n, wi, aj + j * a_stride, a_stride, 1, si + j, 1);                        \
        }                                                                                                            \
    }

#endif
