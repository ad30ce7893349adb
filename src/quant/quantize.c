/* quant: reference quantizers (bit-exact with ggml's quantize_row_*_ref) and the activation
 * converters the matmul uses (bit-exact with what ggml-cpu's x86 build produces, so the activation
 * bytes, and therefore the logits, agree with llama.cpp).
 *
 * The two differ for Q8_0/Q8_1 only: the _ref quantizer scales by 1/d and rounds half away from zero
 * (roundf); ggml-cpu on x86 scales by 127/amax and rounds half to even (_mm256_round_ps).  Q8_K is
 * the same on both paths (nearest_int rounds half to even). */
#include "quant/quant_impl.h"

#include <math.h>

/* Round to nearest, ties to even, for |v| < 2^22: adding 1.5*2^23 pushes the fraction out of the
 * mantissa under the default rounding (ggml's nearest_int, independent of the libm rounding mode). */
static inline int round_even(float v) {
    float t = v + 12582912.f;
    int32_t i;
    memcpy(&i, &t, 4);
    return (i & 0x007fffff) - 0x00400000;
}

static float block_amax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = MF_MAX(amax, fabsf(x[j]));
    return amax;
}

static void quant_q8_0_ref(const float *x, void *vy, int64_t n) {
    mf_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / MF_QK8_0; i++, x += MF_QK8_0) {
        const float d = block_amax(x, MF_QK8_0) / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = mf_fp32_to_fp16(d);
        for (int j = 0; j < MF_QK8_0; j++) y[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

static void quant_q8_1_ref(const float *x, void *vy, int64_t n) {
    mf_block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / MF_QK8_1; i++, x += MF_QK8_1) {
        const float d = block_amax(x, MF_QK8_1) / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = mf_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < MF_QK8_1; j++) {
            y[i].qs[j] = (int8_t)roundf(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].s = mf_fp32_to_fp16(sum * d);
    }
}

static void quant_q4_0_ref(const float *x, void *vy, int64_t n) {
    mf_block_q4_0 *y = vy;
    for (int64_t i = 0; i < n / MF_QK4_0; i++, x += MF_QK4_0) {
        /* the signed value of largest magnitude maps to -8, so the full 16 levels are used */
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < MF_QK4_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = mf_fp32_to_fp16(d);
        for (int j = 0; j < MF_QK4_0 / 2; j++) {
            const int q0 = MF_MIN(15, (int)(int8_t)(x[j] * id + 8.5f));
            const int q1 = MF_MIN(15, (int)(int8_t)(x[j + MF_QK4_0 / 2] * id + 8.5f));
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* Q8_K: scale -127/max by the signed extreme; also the x86 activation path (ggml uses the ref). */
static void quant_q8_K(const float *x, void *vy, int64_t n) {
    mf_block_q8_K *y = vy;
    for (int64_t i = 0; i < n / MF_QK_K; i++, x += MF_QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < MF_QK_K; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        /* ggml leaves bsums untouched for an all-zero block; zero them so the bytes are defined */
        memset(&y[i], 0, sizeof y[i]);
        if (!amax) continue;
        const float iscale = -127.f / max;
        for (int j = 0; j < MF_QK_K; j++) y[i].qs[j] = (int8_t)MF_MIN(127, round_even(iscale * x[j]));
        for (int j = 0; j < MF_QK_K / 16; j++) {
            int sum = 0;
            for (int k = 0; k < 16; k++) sum += y[i].qs[j * 16 + k];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

void mf_from_float_f32(const float *x, void *y, int64_t n) { memmove(y, x, (size_t)n * sizeof(float)); }

void mf_from_float_f16(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    for (int64_t i = 0; i < n; i++) y[i] = mf_fp32_to_fp16(x[i]);
}

void mf_from_float_bf16(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    for (int64_t i = 0; i < n; i++) y[i] = mf_fp32_to_bf16(x[i]);
}

/* ggml-cpu x86 quantize_row_q8_0: id = 127/amax (not 1/d), round half to even; packs saturate. */
void mf_from_float_q8_0(const float *x, void *vy, int64_t n) {
    mf_block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / MF_QK8_0; i++, x += MF_QK8_0) {
        const float amax = block_amax(x, MF_QK8_0);
        const float d = amax / 127.f;
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[i].d = mf_fp32_to_fp16(d);
        for (int j = 0; j < MF_QK8_0; j++) y[i].qs[j] = (int8_t)MF_MAX(-128, MF_MIN(127, round_even(x[j] * id)));
    }
}

/* ggml-cpu x86 quantize_row_q8_1: as Q8_0, plus s = fp16(d * sum of the quants). */
void mf_from_float_q8_1(const float *x, void *vy, int64_t n) {
    mf_block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / MF_QK8_1; i++, x += MF_QK8_1) {
        const float amax = block_amax(x, MF_QK8_1);
        const float d = amax / 127.f;
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[i].d = mf_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < MF_QK8_1; j++) {
            y[i].qs[j] = (int8_t)MF_MAX(-128, MF_MIN(127, round_even(x[j] * id)));
            sum += y[i].qs[j];
        }
        y[i].s = mf_fp32_to_fp16(d * sum);
    }
}

void mf_from_float_q8_K(const float *x, void *y, int64_t n) { quant_q8_K(x, y, n); }

int mf_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    const mf_type_info *t = mf_type_get(type);
    if (!t || n < 0 || n % t->blck_size) return MF_E_INVAL;
    switch (type) {
    case MF_TYPE_F32: mf_from_float_f32(src, dst, n); return 0;
    case MF_TYPE_F16: mf_from_float_f16(src, dst, n); return 0;
    case MF_TYPE_BF16: mf_from_float_bf16(src, dst, n); return 0;
    case MF_TYPE_Q8_0: quant_q8_0_ref(src, dst, n); return 0;
    case MF_TYPE_Q8_1: quant_q8_1_ref(src, dst, n); return 0;
    case MF_TYPE_Q4_0: quant_q4_0_ref(src, dst, n); return 0;
    case MF_TYPE_Q8_K: quant_q8_K(src, dst, n); return 0;
    default: return MF_E_UNSUPPORTED;
    }
}
