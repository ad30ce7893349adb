/* rope: the rotary position rule, in one place for the CPU ROPE op and the KV context shift.
 *
 * ggml's rope without YaRN (ext_factor 0, mscale 1): pair i (i < n_dims / 2) turns by
 * freq_scale * p * freq_base^(-2i / n_dims).  NEOX mode (Qwen) rotates elements (i, i + n_dims/2);
 * the normal mode rotates (2i, 2i + 1).  Elements from n_dims on pass through.  Because a rotation by
 * p then by d is a rotation by p + d (up to float rounding), the KV shift re-ropes a cached K row by
 * the delta alone, as llama.cpp's build_rope_shift does. */
#ifndef MF_ROPE_H
#define MF_ROPE_H

#include <stdint.h>

#define MF_ROPE_NORMAL 0
#define MF_ROPE_NEOX 2 /* llama.cpp's GGML_ROPE_TYPE_NEOX: rotate pairs (i, i + n_rot/2) - Qwen style */

/* cos/sin for position p into cache[0..n_dims) (cos at even, sin at odd index), as ggml_rope_cache_init;
 * theta_scale = freq_base^(-2 / n_dims) (mf_rope_theta_scale). */
float mf_rope_theta_scale(float freq_base, int n_dims);
void mf_rope_cache(float *cache, int64_t n_dims, float p, float freq_scale, float theta_scale);
/* y = rope(x) over one head of ne0 elements (y may equal x). */
void mf_rope_row(float *y, const float *x, int64_t ne0, int n_dims, int mode, const float *cache);

#endif
