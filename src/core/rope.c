/* The rotary position rule (rope.h). */
#include "core/rope.h"

#include <math.h>
#include <string.h>

float mf_rope_theta_scale(float freq_base, int n_dims) {
    return powf(freq_base, -2.0f / (float)n_dims);
}

void mf_rope_cache(float *cache, int64_t n_dims, float p, float freq_scale, float theta_scale) {
    float theta = p;
    for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
        const float t = freq_scale * theta;
        cache[i0 + 0] = cosf(t);
        cache[i0 + 1] = sinf(t);
        theta *= theta_scale;
    }
}

void mf_rope_row(float *y, const float *x, int64_t ne0, int n_dims, int mode, const float *cache) {
    const int64_t half = mode == MF_ROPE_NEOX ? n_dims / 2 : 1;
    for (int64_t i0 = 0; i0 < n_dims; i0 += 2) {
        const int64_t ic = mode == MF_ROPE_NEOX ? i0 / 2 : i0;
        const float c = cache[i0], s = cache[i0 + 1];
        const float x0 = x[ic], x1 = x[ic + half];
        y[ic] = x0 * c - x1 * s;
        y[ic + half] = x0 * s + x1 * c;
    }
    if (y != x && ne0 > n_dims) memcpy(y + n_dims, x + n_dims, (size_t)(ne0 - n_dims) * sizeof(float));
}
