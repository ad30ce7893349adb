/* quant: reference dequantizers of the IQ2/IQ3 formats (quant_iq.h), bit-exact against ggml's
 * dequantize_row_iq*: the same float expressions in the same order (sub-block scale first, then times
 * the grid magnitude, then the sign), no fused multiply-add (baseline ISA, FP_CONTRACT off). */
#include "quant/quant_iq.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* the float scale of the values of sub-block ib's half h, as ggml writes it per type */
static float sub_scale(uint32_t type, float d, const uint8_t *b, int ib, int h) {
    switch (type) {
    case MF_TYPE_IQ2_XXS: return d * (0.5f + (float)(mf_iq_rd32(b + 2 + 8 * ib + 4) >> 28)) * 0.25f;
    case MF_TYPE_IQ2_XS: return d * (0.5f + (float)(h ? b[66 + ib] >> 4 : b[66 + ib] & 15)) * 0.25f;
    case MF_TYPE_IQ2_S: return d * (0.5f + (float)(h ? b[74 + ib] >> 4 : b[74 + ib] & 15)) * 0.25f;
    case MF_TYPE_IQ3_XXS: return d * (0.5f + (float)(mf_iq_rd32(b + 66 + 4 * ib) >> 28)) * 0.5f;
    case MF_TYPE_IQ3_S: {
        const uint8_t sc = b[106 + ib / 2];
        return d * (float)(1 + 2 * (ib % 2 ? sc >> 4 : sc & 15));
    }
    default: return 0;
    }
}

void mf_dequantize_row_iq(uint32_t type, const void *src, float *y, int64_t n) {
    const size_t bs = mf_iq_block_size(type);
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / MF_QK_K; i++, b += bs) {
        uint16_t dh;
        memcpy(&dh, b, 2);
        const float d = mf_fp16_to_fp32(dh);
        for (int ib = 0; ib < 8; ib++, y += 32) {
            mf_iq_sub s;
            mf_iq_unpack(type, b, ib, &s);
            const float db[2] = {sub_scale(type, d, b, ib, 0), sub_scale(type, d, b, ib, 1)};
            for (int e = 0; e < 32; e++) y[e] = db[e / 16] * (float)s.g[e] * (s.signs >> e & 1 ? -1.f : 1.f);
        }
    }
}
