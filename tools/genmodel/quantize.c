/* Reference round-to-nearest quantizers for every type mf-genmodel writes.
 *
 * The legacy 32-blocks (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0) follow ggml's *_ref functions step for step; the
 * K-quants use a plain min/max (Q4_K, Q5_K) or absmax (Q6_K) scale per sub-block instead of ggml's
 * iterative search: the bit layout is exactly llama.cpp's, the chosen levels need not be; the signs are
 * llama.cpp's (Q4_0 / Q5_0 d and Q6_K's d and int8 scales take both signs, as ggml's quantizers give
 * them; before 2026-12-01 Q6_K's were all positive, which hid sign bugs in the kernels).  Only
 * IEEE-exact operations are used (+ - * /, fabsf, comparisons), so the output bytes are the same on
 * every machine. */
#include "genmodel.h"
#include "quant/quant.h"

#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF /* a fused multiply-add would change the rounding, hence the bytes */
#endif

static inline float gm_absf(float x) { return x < 0 ? -x : x; }
static inline int gm_nearest(float x) { return (int)(x >= 0 ? x + 0.5f : x - 0.5f); }
static inline int gm_clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static void q8_0(const float *x, mf_block_q8_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = amax > gm_absf(x[j]) ? amax : gm_absf(x[j]);
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = mf_fp32_to_fp16(d);
        for (int j = 0; j < 32; j++) y[i].qs[j] = (int8_t)gm_nearest(x[j] * id);
    }
}

static void q4_0(const float *x, mf_block_q4_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float amax = 0, max = 0;
        for (int j = 0; j < 32; j++)
            if (amax < gm_absf(x[j])) amax = gm_absf(x[j]), max = x[j];
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = mf_fp32_to_fp16(d);
        for (int j = 0; j < 16; j++) {
            int a = (int8_t)(x[j] * id + 8.5f), b = (int8_t)(x[16 + j] * id + 8.5f);
            a = a > 15 ? 15 : a;
            b = b > 15 ? 15 : b;
            y[i].qs[j] = (uint8_t)(a | (b << 4));
        }
    }
}

static void minmax32(const float *x, float *mn, float *mx) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < 32; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

static void q4_1(const float *x, mf_block_q4_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float mn, mx;
        minmax32(x, &mn, &mx);
        const float d = (mx - mn) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = mf_fp32_to_fp16(d);
        y[i].m = mf_fp32_to_fp16(mn);
        for (int j = 0; j < 16; j++) {
            int a = (int8_t)((x[j] - mn) * id + 0.5f), b = (int8_t)((x[16 + j] - mn) * id + 0.5f);
            a = a > 15 ? 15 : a;
            b = b > 15 ? 15 : b;
            y[i].qs[j] = (uint8_t)(a | (b << 4));
        }
    }
}

static void put_qh(uint8_t qh[4], uint32_t v) {
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(v >> (8 * k));
}

static void q5_0(const float *x, mf_block_q5_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float amax = 0, max = 0;
        for (int j = 0; j < 32; j++)
            if (amax < gm_absf(x[j])) amax = gm_absf(x[j]), max = x[j];
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = mf_fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int a = (int8_t)(x[j] * id + 16.5f), b = (int8_t)(x[16 + j] * id + 16.5f);
            a = a > 31 ? 31 : a;
            b = b > 31 ? 31 : b;
            y[i].qs[j] = (uint8_t)((a & 15) | ((b & 15) << 4));
            qh |= (uint32_t)((a >> 4) & 1) << j;
            qh |= (uint32_t)((b >> 4) & 1) << (j + 16);
        }
        put_qh(y[i].qh, qh);
    }
}

static void q5_1(const float *x, mf_block_q5_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float mn, mx;
        minmax32(x, &mn, &mx);
        const float d = (mx - mn) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = mf_fp32_to_fp16(d);
        y[i].m = mf_fp32_to_fp16(mn);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            int a = gm_clampi((int)((x[j] - mn) * id + 0.5f), 0, 31);
            int b = gm_clampi((int)((x[16 + j] - mn) * id + 0.5f), 0, 31);
            y[i].qs[j] = (uint8_t)((a & 15) | ((b & 15) << 4));
            qh |= (uint32_t)((a >> 4) & 1) << j;
            qh |= (uint32_t)((b >> 4) & 1) << (j + 16);
        }
        put_qh(y[i].qh, qh);
    }
}

/* Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scale and min each, packed as get_scale_min_k4 reads. */
static void kquant_scales(const float *x, int nmax, uint8_t scales[12], uint16_t *d16, uint16_t *dmin16,
                          uint8_t *L) {
    float sc[8], mn[8], max_sc = 0, max_mn = 0;
    for (int j = 0; j < 8; j++) {
        float lo, hi;
        minmax32(x + 32 * j, &lo, &hi);
        if (lo > 0) lo = 0; /* the min is subtracted: keep it <= 0 so it is stored as a positive m */
        sc[j] = (hi - lo) / (float)nmax;
        mn[j] = -lo;
        if (sc[j] > max_sc) max_sc = sc[j];
        if (mn[j] > max_mn) max_mn = mn[j];
    }
    const float inv_sc = max_sc > 0 ? 63.f / max_sc : 0.f;
    const float inv_mn = max_mn > 0 ? 63.f / max_mn : 0.f;
    memset(scales, 0, 12);
    for (int j = 0; j < 8; j++) {
        int ls = gm_clampi(gm_nearest(inv_sc * sc[j]), 0, 63), lm = gm_clampi(gm_nearest(inv_mn * mn[j]), 0, 63);
        if (j < 4) {
            scales[j] = (uint8_t)ls;
            scales[j + 4] = (uint8_t)lm;
        } else {
            scales[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d16 = mf_fp32_to_fp16(max_sc / 63.f);
    *dmin16 = mf_fp32_to_fp16(max_mn / 63.f);
    const float d = mf_fp16_to_fp32(*d16), dmin = mf_fp16_to_fp32(*dmin16);
    for (int j = 0; j < 8; j++) {
        uint8_t s, m;
        if (j < 4) {
            s = scales[j] & 63;
            m = scales[j + 4] & 63;
        } else {
            s = (uint8_t)((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
            m = (uint8_t)((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
        }
        const float ds = d * s, dm = dmin * m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = ds ? (uint8_t)gm_clampi(gm_nearest((x[32 * j + l] + dm) / ds), 0, nmax) : 0;
    }
}

static void q4_k(const float *x, mf_block_q4_K *y, int64_t nb) {
    uint8_t L[256];
    for (int64_t i = 0; i < nb; i++, x += 256) {
        kquant_scales(x, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < 256; j += 64, q += 32)
            for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

static void q5_k(const float *x, mf_block_q5_K *y, int64_t nb) {
    uint8_t L[256];
    for (int64_t i = 0; i < nb; i++, x += 256) {
        kquant_scales(x, 31, y[i].scales, &y[i].d, &y[i].dmin, L);
        uint8_t *qh = y[i].qh, *ql = y[i].qs;
        memset(qh, 0, 32);
        uint8_t m1 = 1, m2 = 2;
        for (int n = 0; n < 256; n += 64, ql += 32, m1 <<= 2, m2 <<= 2) {
            for (int j = 0; j < 32; j++) {
                int l1 = L[n + j], l2 = L[n + j + 32];
                if (l1 > 15) l1 -= 16, qh[j] |= m1;
                if (l2 > 15) l2 -= 16, qh[j] |= m2;
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
        }
    }
}

/* Q6_K as quantize_row_q6_K_ref chooses its signs: a sub-block's scale is 1 / (-32 / max) with max its
 * element of largest magnitude (so that element maps to level -32, the long end of -32..31: the scale has
 * the opposite sign of max), d = 1 / (-128 / the scale of largest magnitude) (that sub-block gets -128),
 * and every int8 scale is nearest(-128 / that scale * its scale), at most 127.  Scales and d therefore take
 * both signs, as in every llama.cpp Q6_K file.  (ggml refines each sub-block scale by a search,
 * make_qx_quants with rmse_type 1; we keep its first guess.) */
static void q6_k(const float *x, mf_block_q6_K *y, int64_t nb) {
    uint8_t L[256];
    for (int64_t i = 0; i < nb; i++, x += 256) {
        float sc[16], max_sc = 0, max_abs = 0;
        for (int j = 0; j < 16; j++) {
            float amax = 0, max = 0;
            for (int l = 0; l < 16; l++)
                if (gm_absf(x[16 * j + l]) > amax) amax = gm_absf(x[16 * j + l]), max = x[16 * j + l];
            sc[j] = amax > 0 ? 1.0f / (-32.f / max) : 0.0f;
            if (gm_absf(sc[j]) > max_abs) max_abs = gm_absf(sc[j]), max_sc = sc[j];
        }
        const float iscale = max_sc != 0 ? -128.f / max_sc : 0.0f;
        y[i].d = mf_fp32_to_fp16(iscale != 0 ? 1.0f / iscale : 0.0f);
        const float d = mf_fp16_to_fp32(y[i].d);
        for (int j = 0; j < 16; j++) {
            y[i].scales[j] = (int8_t)gm_clampi(gm_nearest(iscale * sc[j]), -128, 127);
            const float ds = d * y[i].scales[j];
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)(32 + (ds ? gm_clampi(gm_nearest(x[16 * j + l] / ds), -32, 31) : 0));
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < 256; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((L[j + l] & 0xF) | ((L[j + l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((L[j + l + 32] & 0xF) | ((L[j + l + 96] & 0xF) << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                  ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

/* Q2_K: 16 sub-blocks of 16, value = d * sc * q - dmin * m with q in 0..3 and 4-bit sc, m (min/max per
 * sub-block, the scales rounded to 4 bits against the largest).  Quant of value e = 128j + 32l + b sits in
 * qs[32j + b] at bits 2l; sub-block e / 16 has scales[e / 16] = sc | m << 4. */
static void q2_k(const float *x, mf_block_q2_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 256) {
        float sc[16], mn[16], max_sc = 0, max_mn = 0;
        for (int j = 0; j < 16; j++) {
            float lo = x[16 * j], hi = x[16 * j];
            for (int l = 1; l < 16; l++) {
                if (x[16 * j + l] < lo) lo = x[16 * j + l];
                if (x[16 * j + l] > hi) hi = x[16 * j + l];
            }
            if (lo > 0) lo = 0;
            sc[j] = (hi - lo) / 3.f;
            mn[j] = -lo;
            if (sc[j] > max_sc) max_sc = sc[j];
            if (mn[j] > max_mn) max_mn = mn[j];
        }
        y[i].d = mf_fp32_to_fp16(max_sc / 15.f);
        y[i].dmin = mf_fp32_to_fp16(max_mn / 15.f);
        const float d = mf_fp16_to_fp32(y[i].d), dmin = mf_fp16_to_fp32(y[i].dmin);
        memset(y[i].qs, 0, sizeof y[i].qs);
        for (int j = 0; j < 16; j++) {
            const int ls = d > 0 ? gm_clampi(gm_nearest(sc[j] / d), 0, 15) : 0;
            const int lm = dmin > 0 ? gm_clampi(gm_nearest(mn[j] / dmin), 0, 15) : 0;
            y[i].scales[j] = (uint8_t)(ls | lm << 4);
            const float ds = d * ls, dm = dmin * lm;
            for (int l = 0; l < 16; l++) {
                const int e = 16 * j + l;
                const int q = ds ? gm_clampi(gm_nearest((x[e] + dm) / ds), 0, 3) : 0;
                y[i].qs[32 * (e / 128) + e % 32] |= (uint8_t)(q << (2 * ((e % 128) / 32)));
            }
        }
    }
}

/* Q3_K: 16 sub-blocks of 16, value = d * (sc - 32) * q with q in -4..3 and a 6-bit sc (a sub-block's scale is
 * its largest-magnitude element / -4, as Q4_0 picks it; d puts the largest scale at -32..31).  q + 4 is
 * stored as 2 low bits (laid out as Q2_K's) and hmask[e % 32] bit (e / 32), set when q >= 0. */
static void q3_k(const float *x, mf_block_q3_K *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 256) {
        float sc[16], max_abs = 0;
        for (int j = 0; j < 16; j++) {
            float amax = 0, max = 0;
            for (int l = 0; l < 16; l++)
                if (gm_absf(x[16 * j + l]) > amax) amax = gm_absf(x[16 * j + l]), max = x[16 * j + l];
            sc[j] = max / -4.f;
            if (gm_absf(sc[j]) > max_abs) max_abs = gm_absf(sc[j]);
        }
        y[i].d = mf_fp32_to_fp16(max_abs / 31.f);
        const float d = mf_fp16_to_fp32(y[i].d);
        memset(y[i].qs, 0, sizeof y[i].qs);
        memset(y[i].hmask, 0, sizeof y[i].hmask);
        memset(y[i].scales, 0, sizeof y[i].scales);
        for (int j = 0; j < 16; j++) {
            const int ls = d > 0 ? gm_clampi(gm_nearest(sc[j] / d), -32, 31) : 0;
            const int u = ls + 32;
            y[i].scales[j % 8] |= (uint8_t)((u & 0xF) << (4 * (j / 8)));
            y[i].scales[8 + j % 4] |= (uint8_t)((u >> 4) << (2 * (j / 4)));
            const float ds = d * ls;
            for (int l = 0; l < 16; l++) {
                const int e = 16 * j + l;
                const int q = (ds ? gm_clampi(gm_nearest(x[e] / ds), -4, 3) : 0) + 4;
                y[i].qs[32 * (e / 128) + e % 32] |= (uint8_t)((q & 3) << (2 * ((e % 128) / 32)));
                if (q >= 4) y[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
            }
        }
    }
}

static const float k_iq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* the IQ4 level index nearest to v / dl (the lower one on a tie) */
static uint8_t iq4_index(float v, float dl) {
    if (!dl) return 8; /* level 1: the one nearest to 0 */
    const float t = v / dl;
    int best = 0;
    for (int k = 1; k < 16; k++)
        if (gm_absf(t - k_iq4[k]) < gm_absf(t - k_iq4[best])) best = k;
    return (uint8_t)best;
}

/* a 32-value sub-block's scale: its largest-magnitude element maps to level -127 */
static float iq4_scale(const float *x) {
    float amax = 0, max = 0;
    for (int l = 0; l < 32; l++)
        if (gm_absf(x[l]) > amax) amax = gm_absf(x[l]), max = x[l];
    return max / -127.f;
}

static void iq4_pack(const float *x, float dl, uint8_t qs[16]) {
    for (int l = 0; l < 16; l++) qs[l] = (uint8_t)(iq4_index(x[l], dl) | iq4_index(x[l + 16], dl) << 4);
}

static void iq4_nl(const float *x, mf_block_iq4_nl *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 32) {
        y[i].d = mf_fp32_to_fp16(iq4_scale(x));
        iq4_pack(x, mf_fp16_to_fp32(y[i].d), y[i].qs);
    }
}

/* IQ4_XS: 8 sub-blocks of 32 with 6-bit scales (ls - 32) times one f16 d. */
static void iq4_xs(const float *x, mf_block_iq4_xs *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += 256) {
        float sc[8], max_abs = 0;
        for (int j = 0; j < 8; j++) {
            sc[j] = iq4_scale(x + 32 * j);
            if (gm_absf(sc[j]) > max_abs) max_abs = gm_absf(sc[j]);
        }
        y[i].d = mf_fp32_to_fp16(max_abs / 31.f);
        const float d = mf_fp16_to_fp32(y[i].d);
        y[i].scales_h = 0;
        memset(y[i].scales_l, 0, sizeof y[i].scales_l);
        for (int j = 0; j < 8; j++) {
            const int ls = d > 0 ? gm_clampi(gm_nearest(sc[j] / d), -32, 31) : 0, u = ls + 32;
            y[i].scales_l[j / 2] |= (uint8_t)((u & 0xF) << (4 * (j % 2)));
            y[i].scales_h |= (uint16_t)((u >> 4) << (2 * j));
            iq4_pack(x + 32 * j, d * ls, y[i].qs + 16 * j);
        }
    }
}

int gm_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    switch (type) {
    case MF_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return 0;
    case MF_TYPE_F16: {
        uint16_t *o = dst;
        for (int64_t i = 0; i < n; i++) o[i] = mf_fp32_to_fp16(src[i]);
        return 0;
    }
    case MF_TYPE_BF16: {
        uint16_t *o = dst;
        for (int64_t i = 0; i < n; i++) o[i] = mf_fp32_to_bf16(src[i]);
        return 0;
    }
    default: break;
    }
    const mf_type_info *ti = mf_type_get(type);
    if (!ti || n % ti->blck_size) return MF_E_INVAL;
    const int64_t nb = n / ti->blck_size;
    switch (type) {
    case MF_TYPE_Q8_0: q8_0(src, dst, nb); return 0;
    case MF_TYPE_Q4_0: q4_0(src, dst, nb); return 0;
    case MF_TYPE_Q4_1: q4_1(src, dst, nb); return 0;
    case MF_TYPE_Q5_0: q5_0(src, dst, nb); return 0;
    case MF_TYPE_Q5_1: q5_1(src, dst, nb); return 0;
    case MF_TYPE_Q4_K: q4_k(src, dst, nb); return 0;
    case MF_TYPE_Q5_K: q5_k(src, dst, nb); return 0;
    case MF_TYPE_Q6_K: q6_k(src, dst, nb); return 0;
    case MF_TYPE_Q2_K: q2_k(src, dst, nb); return 0;
    case MF_TYPE_Q3_K: q3_k(src, dst, nb); return 0;
    case MF_TYPE_IQ4_NL: iq4_nl(src, dst, nb); return 0;
    case MF_TYPE_IQ4_XS: iq4_xs(src, dst, nb); return 0;
    case MF_TYPE_IQ2_XXS: case MF_TYPE_IQ2_XS: case MF_TYPE_IQ2_S: case MF_TYPE_IQ3_XXS: case MF_TYPE_IQ3_S:
        return gm_quantize_row_iq(type, src, dst, n);
    default: return MF_E_UNSUPPORTED;
    }
}
