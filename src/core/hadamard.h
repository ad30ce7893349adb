/* hadamard: llama.cpp's attention rotation for quantized KV caches, in one place for the CPU HADAMARD op
 * and the KV context shift.
 *
 * llama.cpp (llama-kv-cache.cpp attn_rot_k / attn_rot_v, llama-graph.cpp build_attn) multiplies Q and K
 * after RoPE, and V, by an orthonormal Walsh-Hadamard matrix H_n / sqrt(n) before a quantized cache stores
 * them (the rotation spreads an outlier channel over n elements, so a q8_0 block scale loses less), and the
 * attention output by the V matrix again (H is symmetric and its own inverse, so Q.K and the weighted
 * V sum are unchanged up to rounding).  ggml-cpu computes that mul_mat as a fast transform
 * (ops.cpp ggml_compute_forward_fwht_f32): every element times 1/sqrtf(n) first, then log2(n) butterfly
 * passes (u + v, u - v) with len = 1, 2, 4, ...  Each output is a fixed sequence of exact-order adds, so
 * this scalar loop gives its bits whatever the SIMD width. */
#ifndef MF_HADAMARD_H
#define MF_HADAMARD_H

#include <stdint.h>

/* y = H_n x / sqrt(n) on each consecutive chunk of n elements of a row of ne0 (n a power of two that
 * divides ne0); y may equal x. */
void mf_hadamard_row(float *y, const float *x, int64_t ne0, int n);

/* The sizes llama.cpp uses for a head size hd (0 = no rotation): K (and Q) the largest power of two
 * >= 64 that divides hd, V always 64; both only when hd is a multiple of 64. */
int mf_hadamard_k_size(int64_t head_dim);
int mf_hadamard_v_size(int64_t head_dim);

#endif
