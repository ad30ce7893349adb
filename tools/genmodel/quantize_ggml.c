/* ggml's own quantizers for the K and IQ4 types, as llama.cpp's `llama_model_quantize` runs them without
 * an importance matrix (`quantize_q2_K` .. `quantize_q6_K` fall back to `quantize_row_*_ref`;
 * `quantize_iq4_nl` / `quantize_iq4_xs` run `quantize_row_iq4_nl_impl` with no weights and 7 tries;
 * `quantize_iq3_s` runs `quantize_row_iq3_s_impl` with weights x^2 over its grid's neighbour lists).
 * `mf-genmodel --llama-quantize` uses them so that the file it writes is, tensor for tensor, the bytes
 * llama-quantize writes from the generator's F16 file: the conformance goldens of llama.cpp-quantized
 * files (docs/CONFORMANCE.md) record a hash of every tensor of llama.cpp's file and the test checks the
 * regenerated one against them.  Written from the algorithm of ggml-quants.c (llama.cpp 80fb11a): the
 * same scale searches, operation for operation and in the same order, since one reordered float sum
 * changes a chosen level.  The library that ran them (libggml-base.so of node-llama-cpp, x86-64 baseline)
 * has no fused multiply-add, hence FP_CONTRACT OFF here (gcc in -std=c11 does not contract either). */
#include "genmodel.h"
#include "quant/iq_grids.h"
#include "quant/quant.h"
#include "quant/quant_iq.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define GG_EPS 1e-15f /* GROUP_MAX_EPS */
#define GG_MIN(a, b) ((a) < (b) ? (a) : (b))
#define GG_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ggml's nearest_int: add 1.5 * 2^23 and read the mantissa (round half to even, |x| < 2^22) */
static inline int gg_nearest(float fval) {
    float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static const int8_t gg_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

static inline int gg_best_index(int n, const int8_t *val, float x) {
    if (x <= val[0]) return 0;
    if (x >= val[n - 1]) return n - 1;
    int ml = 0, mu = n - 1;
    while (mu - ml > 1) {
        int mav = (ml + mu) / 2;
        if (x < val[mav]) mu = mav;
        else ml = mav;
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

/* make_qx_quants with rmse_type 1 and no weights (the only use here: Q6_K) */
static float gg_qx(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) amax = ax, max = x[i];
    }
    if (amax < GG_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = gg_nearest(iscale * x[i]);
        l = GG_MAX(-nmax, GG_MIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = gg_nearest(iscale * x[i]);
            l = GG_MAX(-nmax, GG_MIN(nmax - 1, l));
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                int l = gg_nearest(iscale * x[i]);
                L[i] = (int8_t)(nmax + GG_MAX(-nmax, GG_MIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* make_q3_quants with do_rmse */
static float gg_q3(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) amax = ax, max = x[i];
    }
    if (amax < GG_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = gg_nearest(iscale * x[i]);
        l = GG_MAX(-nmax, GG_MIN(nmax - 1, l));
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int new_l = gg_nearest(x[i] * sl2 / slx);
                new_l = GG_MAX(-nmax, GG_MIN(nmax - 1, new_l));
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* make_qkx2_quants (min/scale search over nstep+1 candidate ranges) */
static float gg_qkx2(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                     uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = gg_nearest(iscale * (x[i] - min));
        L[i] = (uint8_t)GG_MAX(0, GG_MIN(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        float w = weights[i];
        best_error += w * diff;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = gg_nearest(iscale * (x[i] - min));
            l = GG_MAX(0, GG_MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                float w = weights[i];
                cur_error += w * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

static void gg_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

static void gg_q2_K(const float *x, mf_block_q2_K *y, int64_t nb) {
    uint8_t L[MF_QK_K], Laux[16];
    float weights[16], mins[MF_QK_K / 16], scales[MF_QK_K / 16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < nb; i++, x += MF_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < MF_QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = gg_qkx2(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < MF_QK_K / 16; ++j) y[i].scales[j] = (uint8_t)gg_nearest(iscale * scales[j]);
            y[i].d = mf_fp32_to_fp16(max_scale / q4scale);
        } else {
            for (int j = 0; j < MF_QK_K / 16; ++j) y[i].scales[j] = 0;
            y[i].d = mf_fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            for (int j = 0; j < MF_QK_K / 16; ++j) {
                int l = gg_nearest(iscale * mins[j]);
                y[i].scales[j] |= (uint8_t)(l << 4);
            }
            y[i].dmin = mf_fp32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = mf_fp32_to_fp16(0.f);
        }
        for (int j = 0; j < MF_QK_K / 16; ++j) {
            const float d = mf_fp16_to_fp32(y[i].d) * (y[i].scales[j] & 0xF);
            if (!d) continue;
            const float dm = mf_fp16_to_fp32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                int l = gg_nearest((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = (uint8_t)GG_MAX(0, GG_MIN(3, l));
            }
        }
        for (int j = 0; j < MF_QK_K; j += 128)
            for (int l = 0; l < 32; ++l)
                y[i].qs[j / 4 + l] =
                    (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
}

static void gg_q3_K(const float *x, mf_block_q3_K *y, int64_t nb) {
    int8_t L[MF_QK_K];
    float scales[MF_QK_K / 16];
    for (int64_t i = 0; i < nb; i++, x += MF_QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < MF_QK_K / 16; ++j) {
            scales[j] = gg_q3(16, 4, x + 16 * j, L + 16 * j);
            float scale = fabsf(scales[j]);
            if (scale > amax) amax = scale, max_scale = scales[j];
        }
        memset(y[i].scales, 0, 12);
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < MF_QK_K / 16; ++j) {
                int8_t l = (int8_t)gg_nearest(iscale * scales[j]);
                l = (int8_t)(GG_MAX(-32, GG_MIN(31, l)) + 32);
                if (j < 8) y[i].scales[j] = l & 0xF;
                else y[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                l >>= 4;
                y[i].scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
            }
            y[i].d = mf_fp32_to_fp16(1 / iscale);
        } else {
            y[i].d = mf_fp32_to_fp16(0.f);
        }
        for (int j = 0; j < MF_QK_K / 16; ++j) {
            int8_t sc = (int8_t)(j < 8 ? y[i].scales[j] & 0xF : y[i].scales[j - 8] >> 4);
            sc = (int8_t)((sc | (((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
            float d = mf_fp16_to_fp32(y[i].d) * sc;
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = gg_nearest(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(GG_MAX(-4, GG_MIN(3, l)) + 4);
            }
        }
        memset(y[i].hmask, 0, MF_QK_K / 8);
        int m = 0;
        uint8_t hm = 1;
        for (int j = 0; j < MF_QK_K; ++j) {
            if (L[j] > 3) {
                y[i].hmask[m] |= hm;
                L[j] -= 4;
            }
            if (++m == MF_QK_K / 8) m = 0, hm <<= 1;
        }
        for (int j = 0; j < MF_QK_K; j += 128)
            for (int l = 0; l < 32; ++l)
                y[i].qs[j / 4 + l] =
                    (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
}

/* Q4_K and Q5_K share the scale search and the 6-bit scale packing; nmax 15 / 31 and the search range
 * differ (quantize_row_q4_K_ref: -1, 0.1, 20; q5_K: -0.5, 0.1, 15) */
static void gg_k_scales(const float *x, int nmax, float rmin, int nstep, uint8_t *L, uint8_t scales6[12],
                        uint16_t *d16, uint16_t *dmin16) {
    uint8_t Laux[32];
    float weights[32], mins[MF_QK_K / 32], scales[MF_QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < MF_QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = gg_qkx2(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < MF_QK_K / 32; ++j) {
        uint8_t ls = (uint8_t)gg_nearest(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)gg_nearest(inv_min * mins[j]);
        ls = GG_MIN(63, ls);
        lm = GG_MIN(63, lm);
        if (j < 4) {
            scales6[j] = ls;
            scales6[j + 4] = lm;
        } else {
            scales6[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales6[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales6[j - 0] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d16 = mf_fp32_to_fp16(max_scale / 63.f);
    *dmin16 = mf_fp32_to_fp16(max_min / 63.f);
    uint8_t sc, m;
    for (int j = 0; j < MF_QK_K / 32; ++j) {
        gg_scale_min_k4(j, scales6, &sc, &m);
        const float d = mf_fp16_to_fp32(*d16) * sc;
        if (!d) continue;
        const float dm = mf_fp16_to_fp32(*dmin16) * m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = gg_nearest((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)GG_MAX(0, GG_MIN(nmax, l));
        }
    }
}

static void gg_q4_K(const float *x, mf_block_q4_K *y, int64_t nb) {
    uint8_t L[MF_QK_K];
    for (int64_t i = 0; i < nb; i++, x += MF_QK_K) {
        gg_k_scales(x, 15, -1.f, 20, L, y[i].scales, &y[i].d, &y[i].dmin);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < MF_QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

static void gg_q5_K(const float *x, mf_block_q5_K *y, int64_t nb) {
    uint8_t L[MF_QK_K];
    for (int64_t i = 0; i < nb; i++, x += MF_QK_K) {
        gg_k_scales(x, 31, -0.5f, 15, L, y[i].scales, &y[i].d, &y[i].dmin);
        uint8_t *qh = y[i].qh, *ql = y[i].qs;
        memset(qh, 0, MF_QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n = 0; n < MF_QK_K; n += 64, ql += 32) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[n + j];
                if (l1 > 15) l1 -= 16, qh[j] |= m1;
                int l2 = L[n + j + 32];
                if (l2 > 15) l2 -= 16, qh[j] |= m2;
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 <<= 2;
            m2 <<= 2;
        }
    }
}

static void gg_q6_K(const float *x, mf_block_q6_K *y, int64_t nb) {
    int8_t L[MF_QK_K];
    float scales[MF_QK_K / 16];
    for (int64_t i = 0; i < nb; i++, x += MF_QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < MF_QK_K / 16; ++ib) {
            const float scale = gg_qx(16, 32, x + 16 * ib, L + 16 * ib);
            scales[ib] = scale;
            const float abs_scale = fabsf(scale);
            if (abs_scale > max_abs_scale) max_abs_scale = abs_scale, max_scale = scale;
        }
        if (max_abs_scale < GG_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            y[i].d = mf_fp32_to_fp16(0.f);
            continue;
        }
        float iscale = -128.f / max_scale;
        y[i].d = mf_fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < MF_QK_K / 16; ++ib) y[i].scales[ib] = (int8_t)GG_MIN(127, gg_nearest(iscale * scales[ib]));
        for (int j = 0; j < MF_QK_K / 16; ++j) {
            float d = mf_fp16_to_fp32(y[i].d) * y[i].scales[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = gg_nearest(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(GG_MAX(-32, GG_MIN(31, l)) + 32);
            }
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < MF_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l + 0] & 0xF, q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                  ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

/* quantize_row_iq4_nl_impl without quant weights (weight = x^2), ntry 7: one 32-block (IQ4_NL) or a
 * 256 super-block of 8 with 6-bit sub-scales (IQ4_XS) */
static void gg_iq4(int sbs, const float *x, uint16_t *dh, uint8_t *q4, uint16_t *scales_h, uint8_t *scales_l) {
    const int bs = 32, ntry = 7;
    const int8_t *values = gg_iq4nl;
    float scales[MF_QK_K / 32], weight[32];
    uint8_t L[MF_QK_K];
    memset(L, 0, sizeof L);
    memset(q4, 0, (size_t)sbs / 2);
    dh[0] = mf_fp32_to_fp16(0.f);
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < sbs / bs; ++ib) {
        const float *xb = x + ib * bs;
        uint8_t *Lb = L + ib * bs;
        for (int j = 0; j < bs; ++j) weight[j] = xb[j] * xb[j];
        float amax = 0, max = 0;
        for (int j = 0; j < bs; ++j) {
            float ax = fabsf(xb[j]);
            if (ax > amax) amax = ax, max = xb[j];
        }
        if (amax < GG_EPS) {
            scales[ib] = 0;
            continue;
        }
        float d = -max / values[0];
        float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < bs; ++j) {
            float al = id * xb[j];
            int l = gg_best_index(16, values, al);
            Lb[j] = (uint8_t)l;
            float q = values[l];
            float w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
        float best = d * sumqx;
        for (int itry = -ntry; itry <= ntry; ++itry) {
            id = (itry + values[0]) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < bs; ++j) {
                float al = id * xb[j];
                int l = gg_best_index(16, values, al);
                float q = values[l];
                float w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) d = sumqx / sumq2, best = d * sumqx;
        }
        scales[ib] = d;
        float abs_d = fabsf(d);
        if (abs_d > amax_scale) amax_scale = abs_d, max_scale = d;
    }
    if (sbs / bs > 1) {
        *scales_h = 0;
        float d = -max_scale / 32;
        dh[0] = mf_fp32_to_fp16(d);
        float id = d ? 1 / d : 0.f;
        for (int ib = 0; ib < sbs / bs; ++ib) {
            int l = gg_nearest(id * scales[ib]);
            l = GG_MAX(-32, GG_MIN(31, l));
            float dl = d * l;
            float idl = dl ? 1 / dl : 0.f;
            uint8_t *Lb = L + ib * bs;
            const float *xb = x + ib * bs;
            for (int j = 0; j < bs; ++j) Lb[j] = (uint8_t)gg_best_index(16, values, idl * xb[j]);
            l += 32;
            uint8_t l_l = l & 0xf, l_h = (uint8_t)(l >> 4);
            if (ib % 2 == 0) scales_l[ib / 2] = l_l;
            else scales_l[ib / 2] |= (uint8_t)(l_l << 4);
            *scales_h |= (uint16_t)(l_h << 2 * (ib % 8));
        }
    } else {
        dh[0] = mf_fp32_to_fp16(scales[0]);
        float id = scales[0] ? 1 / scales[0] : 0;
        for (int j = 0; j < sbs; ++j) L[j] = (uint8_t)gg_best_index(16, values, id * x[j]);
    }
    for (int i = 0; i < sbs / 32; ++i)
        for (int j = 0; j < 16; ++j) q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

/* ---- IQ3_S: quantize_row_iq3_s_impl (block 32) with iq3xs_init_impl(512)'s map and neighbour lists ----
 * The grid is minfer's own table (src/quant/iq_grids.c, recovered from ggml's dequantizer, same order as
 * ggml's); a lattice point is 4 levels l in 0..7 (the value 2l+1), u = l0 | l1 << 3 | l2 << 6 | l3 << 9.
 * map[u] = the grid index of u, or -(offset + 1) of u's neighbour list: the grid points at the 3 smallest
 * squared distances from u (all of those at the third one too), by distance then index. */
static int g_iq3_map[4096];
static uint16_t *g_iq3_nb;

static int gg_cmp_pair(const void *a, const void *b) {
    const int *l = a, *r = b;
    return l[0] < r[0] ? -1 : l[0] > r[0] ? 1 : l[1] < r[1] ? -1 : l[1] > r[1] ? 1 : 0;
}

static const int8_t *gg_iq3_pt(int j) { return (const int8_t *)&mf_iq3s_grid[j]; }

static int gg_iq3_init(void) {
    if (g_iq3_nb) return 0;
    enum { G = 512, NWANT = 3 };
    for (int i = 0; i < 4096; i++) g_iq3_map[i] = -1;
    for (int i = 0; i < G; i++) {
        uint16_t u = 0;
        for (int k = 0; k < 4; k++) u |= (uint16_t)(((gg_iq3_pt(i)[k] - 1) / 2) << 3 * k);
        g_iq3_map[u] = i;
    }
    int *dist2 = malloc(2 * G * sizeof *dist2);
    uint16_t *nb = malloc(4096 * (G + 1) * sizeof *nb); /* an upper bound; kept for the process's life */
    if (!dist2 || !nb) return free(dist2), free(nb), MF_E_NOMEM;
    int counter = 0;
    for (int i = 0; i < 4096; i++) {
        if (g_iq3_map[i] >= 0) continue;
        int8_t pos[4];
        for (int k = 0; k < 4; k++) pos[k] = (int8_t)(2 * ((i >> 3 * k) & 7) + 1);
        for (int j = 0; j < G; j++) {
            int d2 = 0;
            for (int k = 0; k < 4; k++) d2 += (gg_iq3_pt(j)[k] - pos[k]) * (gg_iq3_pt(j)[k] - pos[k]);
            dist2[2 * j] = d2, dist2[2 * j + 1] = j;
        }
        qsort(dist2, G, 2 * sizeof(int), gg_cmp_pair);
        g_iq3_map[i] = -(counter + 1);
        uint16_t *start = &nb[counter++];
        int d2 = dist2[0], n = 0, nhave = 1;
        for (int j = 0; j < G; j++) {
            if (dist2[2 * j] > d2) {
                if (nhave == NWANT) break;
                d2 = dist2[2 * j];
                ++nhave;
            }
            nb[counter++] = (uint16_t)dist2[2 * j + 1];
            ++n;
        }
        *start = (uint16_t)n;
    }
    free(dist2);
    g_iq3_nb = nb;
    return 0;
}

static int gg_iq3_best(const uint16_t *nbs, const float *xval, const float *weight, float scale, int8_t *L) {
    float best_d2 = FLT_MAX;
    int gi = -1;
    for (int j = 1; j <= nbs[0]; ++j) {
        const int8_t *pg = gg_iq3_pt(nbs[j]);
        float d2 = 0;
        for (int i = 0; i < 4; ++i) {
            float q = pg[i];
            float diff = scale * q - xval[i];
            d2 += weight[i] * diff * diff;
        }
        if (d2 < best_d2) best_d2 = d2, gi = nbs[j];
    }
    for (int i = 0; i < 4; ++i) L[i] = (int8_t)((gg_iq3_pt(gi)[i] - 1) / 2);
    return gi;
}

static void gg_iq3_s(const float *x, uint8_t *y, int64_t nbl) {
    enum { BS = 32, BS4 = 8, BS8 = 4, KMAXQ = 8 };
    float scales[MF_QK_K / BS], weight[BS], xval[BS], waux[BS];
    int8_t L[BS], Laux[BS];
    bool on_grid[BS4], on_grid_aux[BS4];
    uint8_t block_signs[BS8];
    for (int64_t ibl = 0; ibl < nbl; ++ibl, y += MF_IQ3_S_SIZE) {
        /* d, qs[64], qh[8], signs[32], scales[4] */
        memset(y, 0, MF_IQ3_S_SIZE);
        uint8_t *qs = y + 2, *qh = y + 66, *signs = y + 74, *sc = y + 106;
        float max_scale = 0;
        const float *xbl = x + MF_QK_K * ibl;
        for (int ib = 0; ib < MF_QK_K / BS; ++ib) {
            const float *xb = xbl + BS * ib;
            for (int i = 0; i < BS; ++i) weight[i] = xb[i] * xb[i];
            for (int i = 0; i < BS; ++i) waux[i] = sqrtf(weight[i]);
            for (int k = 0; k < BS8; ++k) {
                uint8_t s = 0;
                for (int i = 0; i < 8; ++i) {
                    if (xb[8 * k + i] >= 0) xval[8 * k + i] = xb[8 * k + i];
                    else xval[8 * k + i] = -xb[8 * k + i], s |= (uint8_t)(1 << i);
                }
                block_signs[k] = s;
            }
            float max = xval[0];
            for (int i = 1; i < BS; ++i) max = GG_MAX(max, xval[i]);
            memset(L, 0, BS);
            if (!max) {
                scales[ib] = 0;
                continue; /* as ggml: qs/signs of this sub-block stay zero and the pointers do not move */
            }
            float best = 0;
            float scale = max / (2 * KMAXQ - 1);
            for (int k = 0; k < BS4; ++k) on_grid[k] = false;
            for (int is = -9; is <= 9; ++is) {
                float id = (2 * KMAXQ - 1 + is * 0.2f) / max;
                float this_scale = 1 / id;
                for (int k = 0; k < BS4; ++k) {
                    for (int i = 0; i < 4; ++i) {
                        int l = gg_nearest(0.5f * (id * xval[4 * k + i] - 1));
                        Laux[4 * k + i] = (int8_t)GG_MAX(0, GG_MIN(KMAXQ - 1, l));
                    }
                    uint16_t u = 0;
                    for (int i = 0; i < 4; ++i) u |= (uint16_t)(Laux[4 * k + i] << 3 * i);
                    on_grid_aux[k] = g_iq3_map[u] >= 0;
                    if (g_iq3_map[u] < 0)
                        gg_iq3_best(g_iq3_nb - g_iq3_map[u] - 1, xval + 4 * k, waux + 4 * k, this_scale, Laux + 4 * k);
                }
                float sumqx = 0, sumq2 = 0;
                for (int i = 0; i < BS; ++i) {
                    float w = weight[i];
                    float q = 2 * Laux[i] + 1;
                    sumqx += w * xval[i] * q;
                    sumq2 += w * q * q;
                }
                if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                    scale = sumqx / sumq2;
                    best = scale * sumqx;
                    for (int i = 0; i < BS; ++i) L[i] = Laux[i];
                    for (int k = 0; k < BS4; ++k) on_grid[k] = on_grid_aux[k];
                }
            }
            int n_not = 0;
            for (int k = 0; k < BS4; ++k) n_not += !on_grid[k];
            if (n_not > 0 && scale > 0) {
                float id = 1 / scale;
                for (int k = 0; k < BS4; ++k) {
                    uint16_t u = 0;
                    for (int i = 0; i < 4; ++i) {
                        int l = gg_nearest(0.5f * (id * xval[4 * k + i] - 1));
                        l = GG_MAX(0, GG_MIN(KMAXQ - 1, l));
                        u |= (uint16_t)(l << 3 * i);
                    }
                    int gi = g_iq3_map[u];
                    if (gi < 0) gi = gg_iq3_best(g_iq3_nb - g_iq3_map[u] - 1, xval + 4 * k, waux + 4 * k, scale, L + 4 * k);
                    for (int i = 0; i < 4; ++i) L[4 * k + i] = (int8_t)((gg_iq3_pt(gi)[i] - 1) / 2);
                }
                float sumqx = 0, sumq2 = 0;
                for (int i = 0; i < BS; ++i) {
                    float w = weight[i];
                    float q = 2 * L[i] + 1;
                    sumqx += w * xval[i] * q;
                    sumq2 += w * q * q;
                }
                if (sumq2 > 0) scale = sumqx / sumq2;
            }
            if (scale < 0) {
                scale = -scale;
                for (int k = 0; k < BS8; ++k) block_signs[k] = (uint8_t)~block_signs[k];
            }
            for (int k = 0; k < BS4; ++k) {
                uint16_t u = 0;
                for (int i = 0; i < 4; ++i) u |= (uint16_t)(L[4 * k + i] << 3 * i);
                const int gi = g_iq3_map[u]; /* on the grid by construction (ggml aborts otherwise) */
                qs[k] = (uint8_t)(gi & 255);
                qh[(ib * BS4 + k) / 8] |= (uint8_t)((gi >> 8) << ((ib * BS4 + k) % 8));
            }
            qs += BS4;
            for (int k = 0; k < BS8; ++k) signs[k] = block_signs[k];
            signs += BS8;
            scales[ib] = scale;
            max_scale = GG_MAX(max_scale, scale);
        }
        if (!max_scale) continue;
        float d = max_scale / 31;
        const uint16_t dh = mf_fp32_to_fp16(d * 1.033f);
        memcpy(y, &dh, 2);
        float id = 1 / d;
        for (int ib = 0; ib < MF_QK_K / BS; ib += 2) {
            int l1 = gg_nearest(0.5f * (id * scales[ib + 0] - 1));
            l1 = GG_MAX(0, GG_MIN(15, l1));
            int l2 = gg_nearest(0.5f * (id * scales[ib + 1] - 1));
            l2 = GG_MAX(0, GG_MIN(15, l2));
            sc[ib / 2] = (uint8_t)(l1 | (l2 << 4));
        }
    }
}

int gm_quantize_row_ggml(uint32_t type, const float *src, void *dst, int64_t n) {
    const int64_t nk = n / MF_QK_K;
    switch (type) {
    case MF_TYPE_Q2_K: gg_q2_K(src, dst, nk); return 0;
    case MF_TYPE_Q3_K: gg_q3_K(src, dst, nk); return 0;
    case MF_TYPE_Q4_K: gg_q4_K(src, dst, nk); return 0;
    case MF_TYPE_Q5_K: gg_q5_K(src, dst, nk); return 0;
    case MF_TYPE_Q6_K: gg_q6_K(src, dst, nk); return 0;
    case MF_TYPE_IQ4_NL: {
        mf_block_iq4_nl *y = dst;
        for (int64_t b = 0; b < n / MF_QK4_NL; b++) gg_iq4(MF_QK4_NL, src + b * MF_QK4_NL, &y[b].d, y[b].qs, NULL, NULL);
        return 0;
    }
    case MF_TYPE_IQ4_XS: {
        mf_block_iq4_xs *y = dst;
        for (int64_t b = 0; b < nk; b++)
            gg_iq4(MF_QK_K, src + b * MF_QK_K, &y[b].d, y[b].qs, &y[b].scales_h, y[b].scales_l);
        return 0;
    }
    case MF_TYPE_IQ3_S: {
        const int rc = gg_iq3_init();
        if (rc) return rc;
        gg_iq3_s(src, dst, nk);
        return 0;
    }
    /* F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1: quantize.c already follows ggml's *_ref step for step */
    case MF_TYPE_F32: case MF_TYPE_F16: case MF_TYPE_BF16: case MF_TYPE_Q8_0: case MF_TYPE_Q4_0: case MF_TYPE_Q4_1:
    case MF_TYPE_Q5_0: case MF_TYPE_Q5_1:
        return gm_quantize_row(type, src, dst, n);
    default: return MF_E_UNSUPPORTED;
    }
}
