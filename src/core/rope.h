/* rope: the rotary position rule, in one place for the CPU ROPE op and the KV context shift.
 *
 * ggml's rope_ext: pair i (i < n_dims / 2) turns by theta_i(p) = p * freq_base^(-2i / n_dims) (a running
 * product, rounded as ggml rounds it) times freq_scale.  NEOX mode (Qwen) rotates elements (i, i + n_dims/2);
 * the normal mode rotates (2i, 2i + 1).  Elements from n_dims on pass through.
 *
 * YaRN (ext_factor != 0): the angle mixes the interpolated (freq_scale) and the original angle, more of the
 * original for the fast pairs below corr_dims[0], none above corr_dims[1]; cos and sin are scaled by
 * attn_factor * (1 + 0.1 ln(1 / freq_scale)).  Without YaRN they are scaled by attn_factor (1: exact).
 * Rounded as llama.cpp's ggml-cpu build rounds it (two fmas; tests/golden/rope is its output, bit for bit).
 *
 * Because the angle is linear in p, a rotation by p then by d is a rotation by p + d (up to float rounding):
 * the KV shift re-ropes a cached K row by the delta alone, with the magnitude scale left at 1 (mf_rope_cache's
 * `rotation_only`; llama.cpp's build_rope_shift applies the YaRN scale again at every shift). */
#ifndef MF_ROPE_H
#define MF_ROPE_H

#include <stdbool.h>
#include <stdint.h>

#define MF_ROPE_NORMAL 0
#define MF_ROPE_NEOX 2 /* llama.cpp's GGML_ROPE_TYPE_NEOX: rotate pairs (i, i + n_rot/2) - Qwen style */

/* One rope as a graph applies it: ggml_rope_ext's arguments, resolved (the context's rope, mf_rope_resolve). */
typedef struct {
    int32_t n_rot, mode;
    float freq_base, freq_scale;
    float ext_factor;   /* YaRN's extrapolation mix: 0 = none (plain or linear rope) */
    float attn_factor;  /* the scale of cos/sin before YaRN's own log term (1 for plain rope) */
    float corr_dims[2]; /* YaRN's ramp, in pairs: mf_rope_corr_dims */
} mf_rope;

/* A plain rope (no scaling) */
mf_rope mf_rope_plain(int32_t n_rot, int32_t mode, float freq_base);
/* ggml_rope_yarn_corr_dims: the pairs where YaRN's ramp starts and ends for the original context n_ctx_orig */
void mf_rope_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2]);

/* cos/sin for position p into cache[0..n_dims) (cos at even, sin at odd index), as ggml_rope_cache_init;
 * theta_scale = freq_base^(-2 / n_dims) (mf_rope_theta_scale).  rotation_only: no magnitude scale (the
 * KV shift's rotation by a delta). */
float mf_rope_theta_scale(float freq_base, int n_dims);
void mf_rope_cache(float *cache, int64_t n_dims, float p, const mf_rope *r, float theta_scale, bool rotation_only);
/* The scale of cos/sin: attn_factor, times 1 + 0.1 ln(1 / freq_scale) under YaRN (the CUDA kernel gets it
 * from here). */
float mf_rope_mscale(const mf_rope *r);
/* y = rope(x) over one head of ne0 elements (y may equal x). */
void mf_rope_row(float *y, const float *x, int64_t ne0, int n_dims, int mode, const float *cache);

#endif
