/* quant: reference dequantizers, one block format per function.  Each reproduces ggml's
 * dequantize_row_* float expressions exactly (same operand order, no fused multiply-add: this file is
 * compiled for the baseline ISA) so results match llama.cpp bit for bit. */
#include "quant/quant_impl.h"
#include "quant/quant_iq.h"

#define H2F mf_fp16_to_fp32

static void deq_f16(const void *src, float *y, int64_t n) {
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++) y[i] = H2F(x[i]);
}

static void deq_bf16(const void *src, float *y, int64_t n) {
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++) y[i] = mf_bf16_to_fp32(x[i]);
}

static void deq_q4_0(const void *src, float *y, int64_t n) {
    const mf_block_q4_0 *x = src;
    for (int64_t i = 0; i < n / MF_QK4_0; i++, y += MF_QK4_0) {
        const float d = H2F(x[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = ((x[i].qs[j] & 0x0F) - 8) * d;
            y[j + 16] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static void deq_q4_1(const void *src, float *y, int64_t n) {
    const mf_block_q4_1 *x = src;
    for (int64_t i = 0; i < n / MF_QK4_1; i++, y += MF_QK4_1) {
        const float d = H2F(x[i].d), m = H2F(x[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = (x[i].qs[j] & 0x0F) * d + m;
            y[j + 16] = (x[i].qs[j] >> 4) * d + m;
        }
    }
}

static void deq_q5_0(const void *src, float *y, int64_t n) {
    const mf_block_q5_0 *x = src;
    uint8_t q[32];
    for (int64_t i = 0; i < n / MF_QK5_0; i++, y += MF_QK5_0) {
        const float d = H2F(x[i].d);
        mf_q5_unpack(x[i].qs, x[i].qh, q);
        for (int j = 0; j < 32; j++) y[j] = (q[j] - 16) * d;
    }
}

static void deq_q5_1(const void *src, float *y, int64_t n) {
    const mf_block_q5_1 *x = src;
    uint8_t q[32];
    for (int64_t i = 0; i < n / MF_QK5_1; i++, y += MF_QK5_1) {
        const float d = H2F(x[i].d), m = H2F(x[i].m);
        mf_q5_unpack(x[i].qs, x[i].qh, q);
        for (int j = 0; j < 32; j++) y[j] = q[j] * d + m;
    }
}

static void deq_q8_0(const void *src, float *y, int64_t n) {
    const mf_block_q8_0 *x = src;
    for (int64_t i = 0; i < n / MF_QK8_0; i++, y += MF_QK8_0) {
        const float d = H2F(x[i].d);
        for (int j = 0; j < 32; j++) y[j] = x[i].qs[j] * d;
    }
}

/* ggml has no Q8_1 dequantizer (it is an activation-only format); d*q is the obvious meaning. */
static void deq_q8_1(const void *src, float *y, int64_t n) {
    const mf_block_q8_1 *x = src;
    for (int64_t i = 0; i < n / MF_QK8_1; i++, y += MF_QK8_1) {
        const float d = H2F(x[i].d);
        for (int j = 0; j < 32; j++) y[j] = x[i].qs[j] * d;
    }
}

static void deq_q2_K(const void *src, float *y, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / MF_QK_K; i++, b += MF_Q2_K_SIZE) {
        const uint8_t *scales = b, *q = b + 16;
        uint16_t hd, hm;
        memcpy(&hd, b + 80, 2);
        memcpy(&hm, b + 82, 2);
        const float d = H2F(hd), min = H2F(hm);
        int is = 0;
        for (int nn = 0; nn < MF_QK_K; nn += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    const uint8_t sc = scales[is++];
                    const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; l++) *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
                }
            }
        }
    }
}

static void deq_q3_K(const void *src, float *y, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / MF_QK_K; i++, b += MF_Q3_K_SIZE) {
        const uint8_t *hm = b, *q = b + 32;
        uint16_t hd;
        memcpy(&hd, b + 108, 2);
        const float d_all = H2F(hd);
        /* 16 6-bit scales: low 4 bits in bytes 0..7, high 2 bits in bytes 8..11 */
        uint32_t aux[4];
        memcpy(aux, b + 96, 12);
        const uint32_t tmp = aux[2], m2 = 0x03030303, m4 = 0x0f0f0f0f;
        aux[2] = ((aux[0] >> 4) & m4) | (((tmp >> 4) & m2) << 4);
        aux[3] = ((aux[1] >> 4) & m4) | (((tmp >> 6) & m2) << 4);
        aux[0] = (aux[0] & m4) | (((tmp >> 0) & m2) << 4);
        aux[1] = (aux[1] & m4) | (((tmp >> 2) & m2) << 4);
        int8_t scales[16];
        memcpy(scales, aux, 16);
        int is = 0;
        uint8_t m = 1;
        for (int nn = 0; nn < MF_QK_K; nn += 128, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int half = 0; half < 2; half++) {
                    const float dl = d_all * (scales[is++] - 32);
                    for (int l = 0; l < 16; l++) {
                        const int k = l + 16 * half;
                        *y++ = dl * (((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4));
                    }
                }
            }
        }
    }
}

static void deq_q4_K(const void *src, float *y, int64_t n) {
    const mf_block_q4_K *x = src;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const uint8_t *q = x[i].qs;
        const float d = H2F(x[i].d), min = H2F(x[i].dmin);
        for (int is = 0; is < 8; is += 2, q += 32) {
            uint8_t sc, m;
            mf_q_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            mf_q_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

static void deq_q5_K(const void *src, float *y, int64_t n) {
    const mf_block_q5_K *x = src;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        const float d = H2F(x[i].d), min = H2F(x[i].dmin);
        uint8_t u1 = 1, u2 = 2;
        for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
            uint8_t sc, m;
            mf_q_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            mf_q_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

static void deq_q6_K(const void *src, float *y, int64_t n) {
    const mf_block_q6_K *x = src;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = H2F(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int nn = 0; nn < MF_QK_K; nn += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

static void deq_iq4_nl(const void *src, float *y, int64_t n) {
    const mf_block_iq4_nl *x = src;
    for (int64_t i = 0; i < n / MF_QK4_NL; i++, y += MF_QK4_NL) {
        const float d = H2F(x[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * mf_iq4_levels[x[i].qs[j] & 0xF];
            y[j + 16] = d * mf_iq4_levels[x[i].qs[j] >> 4];
        }
    }
}

static void deq_iq4_xs(const void *src, float *y, int64_t n) {
    const mf_block_iq4_xs *x = src;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = H2F(x[i].d);
        for (int ib = 0; ib < 8; ib++, y += 32) {
            const float dl = d * mf_iq4_xs_scale(&x[i], ib);
            const uint8_t *qs = x[i].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * mf_iq4_levels[qs[j] & 0xF];
                y[j + 16] = dl * mf_iq4_levels[qs[j] >> 4];
            }
        }
    }
}

static void deq_q8_K(const void *src, float *y, int64_t n) {
    const mf_block_q8_K *x = src;
    for (int64_t i = 0; i < n / MF_QK_K; i++)
        for (int j = 0; j < MF_QK_K; j++) *y++ = x[i].d * x[i].qs[j];
}

static void deq_f32(const void *src, float *y, int64_t n) { memmove(y, src, (size_t)n * sizeof(float)); }

static void deq_q8_0s(const void *src, float *y, int64_t n) {
    const mf_block_q8_0s *b = src;
    for (int64_t i = 0; i < n / MF_QK8_0; i++)
        for (int k = 0; k < MF_QK8_0; k++) y[i * MF_QK8_0 + k] = mf_fp16_to_fp32(b[i].d) * (float)b[i].qs[k];
}

typedef void (*deq_fn)(const void *src, float *y, int64_t n);

/* The IQ2/IQ3 dequantizers live with their grids (dequant_iq.c), behind one entry that takes the type. */
#define DEQ_IQ(name, T) \
    static void name(const void *src, float *y, int64_t n) { mf_dequantize_row_iq(T, src, y, n); }
DEQ_IQ(deq_iq2_xxs, MF_TYPE_IQ2_XXS)
DEQ_IQ(deq_iq2_xs, MF_TYPE_IQ2_XS)
DEQ_IQ(deq_iq2_s, MF_TYPE_IQ2_S)
DEQ_IQ(deq_iq3_xxs, MF_TYPE_IQ3_XXS)
DEQ_IQ(deq_iq3_s, MF_TYPE_IQ3_S)

/* One row per type; integer and f64 tensors are never weights, the types minfer does not run have none. */
static const deq_fn k_deq[MF_TYPE_COUNT] = {
    [MF_TYPE_F32] = deq_f32,
    [MF_TYPE_F16] = deq_f16,
    [MF_TYPE_BF16] = deq_bf16,
    [MF_TYPE_Q4_0] = deq_q4_0,
    [MF_TYPE_Q4_1] = deq_q4_1,
    [MF_TYPE_Q5_0] = deq_q5_0,
    [MF_TYPE_Q5_1] = deq_q5_1,
    [MF_TYPE_Q8_0] = deq_q8_0,
    [MF_TYPE_Q8_0S] = deq_q8_0s,
    [MF_TYPE_Q8_1] = deq_q8_1,
    [MF_TYPE_Q2_K] = deq_q2_K,
    [MF_TYPE_Q3_K] = deq_q3_K,
    [MF_TYPE_Q4_K] = deq_q4_K,
    [MF_TYPE_Q5_K] = deq_q5_K,
    [MF_TYPE_Q6_K] = deq_q6_K,
    [MF_TYPE_Q8_K] = deq_q8_K,
    [MF_TYPE_IQ4_NL] = deq_iq4_nl,
    [MF_TYPE_IQ4_XS] = deq_iq4_xs,
    [MF_TYPE_IQ2_XXS] = deq_iq2_xxs,
    [MF_TYPE_IQ2_XS] = deq_iq2_xs,
    [MF_TYPE_IQ2_S] = deq_iq2_s,
    [MF_TYPE_IQ3_XXS] = deq_iq3_xxs,
    [MF_TYPE_IQ3_S] = deq_iq3_s,
};

bool mf_type_dequantizes(uint32_t type) { return type < MF_TYPE_COUNT && k_deq[type] != NULL; }

int mf_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    const mf_type_info *t = mf_type_get(type);
    if (!t || n < 0 || n % t->blck_size) return MF_E_INVAL;
    if (!k_deq[type]) return MF_E_UNSUPPORTED;
    k_deq[type](src, dst, n);
    return 0;
}
