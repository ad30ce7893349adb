/* The rotary position rule (rope.h). */
#include "core/rope.h"

#include <math.h>
#include <string.h>

mf_rope mf_rope_plain(int32_t n_rot, int32_t mode, float freq_base) {
    return (mf_rope){.n_rot = n_rot, .mode = mode, .freq_base = freq_base, .freq_scale = 1.0f, .attn_factor = 1.0f};
}

/* ggml_rope_yarn_corr_dim: the pair whose wavelength fits n_rot turns into the original context */
static float corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

void mf_rope_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2]) {
    const float start = floorf(corr_dim(n_dims, n_ctx_orig, beta_fast, freq_base));
    const float end = ceilf(corr_dim(n_dims, n_ctx_orig, beta_slow, freq_base));
    dims[0] = start > 0 ? start : 0;
    dims[1] = end < (float)(n_dims - 1) ? end : (float)(n_dims - 1);
}

float mf_rope_theta_scale(float freq_base, int n_dims) {
    return powf(freq_base, -2.0f / (float)n_dims);
}

float mf_rope_mscale(const mf_rope *r) {
    /* ggml-cpu's `mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale)`, contracted into one fma by its build */
    return r->ext_factor != 0.0f ? r->attn_factor * fmaf(0.1f, logf(1.0f / r->freq_scale), 1.0f) : r->attn_factor;
}

/* ggml's rope_yarn_ramp: 1 below low, 0 above high, linear between (i0 / 2 is the pair, an integer) */
static float yarn_ramp(float low, float high, int64_t i0) {
    const float d = high - low;
    const float y = ((float)(i0 / 2) - low) / (d > 0.001f ? d : 0.001f);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

void mf_rope_cache(float *cache, int64_t n_dims, float p, const mf_rope *r, float theta_scale, bool rotation_only) {
    const float fs = r->freq_scale, ext = r->ext_factor;
    const float ms = rotation_only ? 1.0f : mf_rope_mscale(r);
    float theta = p;
    for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
        float t = fs * theta;
        if (ext != 0.0f) {
            const float mix = yarn_ramp(r->corr_dims[0], r->corr_dims[1], i0) * ext;
            t = fmaf(t, 1.0f - mix, theta * mix); /* theta_interp * (1 - mix) + theta_extrap * mix, fused as ggml's build */
        }
        cache[i0 + 0] = cosf(t) * ms;
        cache[i0 + 1] = sinf(t) * ms;
        theta *= theta_scale;
    }
}

void mf_rope_row(float *y, const float *x, int64_t ne0, int n_dims, int mode, const float *cache) {
    const int64_t half = mode == MF_ROPE_NEOX ? n_dims / 2 : 1;
    for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
        const int64_t ic = mode == MF_ROPE_NEOX ? i0 / 2 : i0;
        const float c = cache[i0], s = cache[i0 + 1];
        const float x0 = x[ic], x1 = x[ic + half];
        /* fused as llama.cpp's build rounds it (gcc contracts its rotate_pairs into one fma per output), the
         * same bits as the CPU op's vec.rope */
        y[ic] = fmaf(x0, c, -(x1 * s));
        y[ic + half] = mode == MF_ROPE_NEOX ? fmaf(x0, s, x1 * c) : fmaf(x1, c, x0 * s);
    }
    if (y != x && ne0 > n_dims) memcpy(y + n_dims, x + n_dims, (size_t)(ne0 - n_dims) * sizeof(float));
}
