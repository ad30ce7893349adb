/* hadamard: the fast Walsh-Hadamard transform as ggml-cpu computes it (rules in hadamard.h). */
#include "core/hadamard.h"

#include <math.h>
#include <string.h>

void mf_hadamard_row(float *y, const float *x, int64_t ne0, int n) {
    const float scale = 1.0f / sqrtf((float)n);
    for (int64_t c = 0; c + n <= ne0; c += n) {
        float *r = y + c;
        const float *s = x + c;
        for (int j = 0; j < n; j++) r[j] = s[j] * scale; /* scaled first, as ggml does */
        for (int len = 1; len < n; len <<= 1)
            for (int i = 0; i < n; i += 2 * len)
                for (int j = 0; j < len; j++) {
                    const float u = r[i + j], v = r[i + len + j];
                    r[i + j] = u + v;
                    r[i + len + j] = u - v;
                }
    }
}

int mf_hadamard_k_size(int64_t head_dim) {
    if (head_dim <= 0 || head_dim % 64) return 0;
    int n = 64;
    while (head_dim % (2 * (int64_t)n) == 0) n *= 2; /* llama.cpp's do-while: the largest that divides */
    return n;
}

int mf_hadamard_v_size(int64_t head_dim) {
    /* llama.cpp keeps V at 64 ("smaller rotation matrices for V seem beneficial") */
    return head_dim > 0 && head_dim % 64 == 0 ? 64 : 0;
}
