/* Round-to-nearest-grid-point quantizers for IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S (layouts in
 * src/quant/quant_iq.h).  Not ggml's quantizers (those search scales with an importance matrix, which
 * llama-quantize demands for IQ2 and IQ3_XXS): every super-block gets the f16 scale that maps its largest
 * magnitude onto the largest level at multiplier 31, each sub-block (or half, where the format has two
 * scales) the multiplier closest to its own largest magnitude, and each group of 8 (IQ2) or 4 (IQ3)
 * values the grid point nearest to its magnitudes rounded to the format's levels (a table lookup, see
 * nearest()).  Signs follow the values; where the format
 * stores 7 sign bits (the 8th makes the count of minus signs even), an odd count flips the sign of the
 * group's smallest magnitude, as ggml does.  Only IEEE-exact operations, so the bytes are the same on
 * every machine. */
#include "genmodel.h"
#include "quant/iq_grids.h"
#include "quant/quant.h"

#include <stdlib.h>
#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

static inline float absf(float x) { return x < 0 ? -x : x; }

static float amax_of(const float *x, int n) {
    float m = 0;
    for (int j = 0; j < n; j++) m = m > absf(x[j]) ? m : absf(x[j]);
    return m;
}

/* the multiplier nibble (m = 2 nib + 1) nearest to 31 * a / amax */
static int nibble(float a, float amax) {
    const float m = amax > 0 ? 31.0f * a / amax : 1.0f;
    const int nib = (int)((m - 1.0f) / 2.0f + 0.5f);
    return nib < 0 ? 0 : nib > 15 ? 15 : nib;
}

/* The nearest grid point is looked up, not searched: each magnitude is rounded to its nearest level
 * (levels[]: 3 for IQ2, 8 for IQ3), and a table made once per grid maps every such vector of level
 * indices (3^8 or 8^4 of them) to the grid entry nearest to it in squared error (first on ties). */
typedef struct {
    int nl;
    float lev[8];
    int16_t *map; /* nl^width entries */
} gm_iq_lut;

static int16_t *build_map(const void *grid, int entries, int width, int nl, const float *lev) {
    int nkeys = 1;
    for (int j = 0; j < width; j++) nkeys *= nl;
    int16_t *map = malloc((size_t)nkeys * sizeof *map);
    if (!map) return NULL;
    for (int key = 0; key < nkeys; key++) {
        float t[8];
        for (int j = 0, k = key; j < width; j++, k /= nl) t[j] = lev[k % nl];
        int best = 0;
        float best_e = 0;
        for (int e = 0; e < entries; e++) {
            const uint64_t v = width == 8 ? ((const uint64_t *)grid)[e] : ((const uint32_t *)grid)[e];
            float err = 0;
            for (int j = 0; j < width; j++) {
                const float diff = (float)(v >> 8 * j & 255) - t[j];
                err += diff * diff;
            }
            if (e == 0 || err < best_e) best = e, best_e = err;
        }
        map[key] = (int16_t)best;
    }
    return map;
}

static int nearest(const gm_iq_lut *L, int width, const float *t) {
    int key = 0;
    for (int j = width - 1; j >= 0; j--) {
        int li = 0;
        for (int l = 1; l < L->nl; l++) /* levels ascend: the nearest is the last one not past the midpoint */
            if (t[j] > (L->lev[l - 1] + L->lev[l]) / 2.0f) li = l;
        key = key * L->nl + li;
    }
    return L->map[key];
}

/* the 8 sign bits of x[0..7]; with `even`, made even by flipping the smallest magnitude's */
static uint8_t signs8(const float *x, bool even) {
    unsigned s = 0;
    int smallest = 0;
    for (int j = 0; j < 8; j++) {
        s |= (unsigned)(x[j] < 0) << j;
        if (absf(x[j]) < absf(x[smallest])) smallest = j;
    }
    if (even && __builtin_popcount(s) % 2) s ^= 1u << smallest;
    return (uint8_t)s;
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* One super-block of 256 values into `b`. */
static void quant_block(uint32_t type, const gm_iq_lut *L, const float *x, uint8_t *b, size_t bs) {
    const bool iq3 = type == MF_TYPE_IQ3_XXS || type == MF_TYPE_IQ3_S;
    const int width = iq3 ? 4 : 8;
    const float gmax = type == MF_TYPE_IQ3_XXS ? 62.0f : type == MF_TYPE_IQ3_S ? 15.0f : 43.0f;
    const float F = type == MF_TYPE_IQ3_XXS ? 4.0f : type == MF_TYPE_IQ3_S ? 1.0f : 8.0f;
    const bool half_scales = type == MF_TYPE_IQ2_XS || type == MF_TYPE_IQ2_S;

    memset(b, 0, bs);
    const float amax = amax_of(x, 256);
    if (amax == 0) return; /* d = 0: every value 0 */
    const uint16_t dh = mf_fp32_to_fp16(amax * F / (31.0f * gmax));
    const float d = mf_fp16_to_fp32(dh);
    put16(b, dh);
    if (d == 0) return;
    for (int ib = 0; ib < 8; ib++) {
        const float *xs = x + 32 * ib;
        int nib[2];
        if (half_scales) nib[0] = nibble(amax_of(xs, 16), amax), nib[1] = nibble(amax_of(xs + 16, 16), amax);
        else nib[0] = nib[1] = nibble(amax_of(xs, 32), amax);
        uint32_t aux = 0; /* IQ2_XXS / IQ3_XXS: 4 x 7 sign bits + scale << 28 */
        for (int g = 0; g < 32 / width; g++) {
            const int e0 = width * g;
            const float s = d * (float)(2 * nib[e0 / 16] + 1) / F;
            float t[8];
            for (int j = 0; j < width; j++) t[j] = absf(xs[e0 + j]) / s;
            const int idx = nearest(L, width, t);
            switch (type) {
            case MF_TYPE_IQ2_XXS: b[2 + 8 * ib + g] = (uint8_t)idx; break;
            case MF_TYPE_IQ2_XS: put16(b + 2 + 8 * ib + 2 * g, (uint16_t)(idx | (signs8(xs + e0, true) & 127) << 9)); break;
            case MF_TYPE_IQ2_S:
                b[2 + 4 * ib + g] = (uint8_t)(idx & 255);
                b[66 + ib] |= (uint8_t)((idx >> 8) << 2 * g);
                b[34 + 4 * ib + g] = signs8(xs + e0, false);
                break;
            case MF_TYPE_IQ3_XXS: b[2 + 8 * ib + g] = (uint8_t)idx; break;
            default: /* IQ3_S */
                b[2 + 8 * ib + g] = (uint8_t)(idx & 255);
                b[66 + ib] |= (uint8_t)((idx >> 8) << g);
                break;
            }
        }
        for (int l = 0; l < 4; l++) { /* the sign bytes of the IQ3 types and IQ2_XXS, per 8 values */
            if (type == MF_TYPE_IQ3_S) b[74 + 4 * ib + l] = signs8(xs + 8 * l, false);
            if (type == MF_TYPE_IQ2_XXS || type == MF_TYPE_IQ3_XXS) aux |= (uint32_t)(signs8(xs + 8 * l, true) & 127) << 7 * l;
        }
        if (type == MF_TYPE_IQ2_XXS) put32(b + 2 + 8 * ib + 4, aux | (uint32_t)nib[0] << 28);
        if (type == MF_TYPE_IQ3_XXS) put32(b + 66 + 4 * ib, aux | (uint32_t)nib[0] << 28);
        if (half_scales) b[(type == MF_TYPE_IQ2_XS ? 66 : 74) + ib] = (uint8_t)(nib[0] | nib[1] << 4);
        if (type == MF_TYPE_IQ3_S) b[106 + ib / 2] |= (uint8_t)(nib[0] << 4 * (ib % 2));
    }
}

/* one lookup table per type, made on first use (mf-genmodel converts on one thread) and kept */
static gm_iq_lut g_luts[5];

static const gm_iq_lut *lut_for(uint32_t type) {
    static const float l2[] = {8, 25, 43}, l3x[] = {4, 12, 20, 28, 36, 44, 52, 62}, l3s[] = {1, 3, 5, 7, 9, 11, 13, 15};
    int i;
    const void *grid;
    int entries, width = 8, nl = 3;
    const float *lev = l2;
    switch (type) {
    case MF_TYPE_IQ2_XXS: i = 0, grid = mf_iq2xxs_grid, entries = 256; break;
    case MF_TYPE_IQ2_XS: i = 1, grid = mf_iq2xs_grid, entries = 512; break;
    case MF_TYPE_IQ2_S: i = 2, grid = mf_iq2s_grid, entries = 1024; break;
    case MF_TYPE_IQ3_XXS: i = 3, grid = mf_iq3xxs_grid, entries = 256, width = 4, nl = 8, lev = l3x; break;
    case MF_TYPE_IQ3_S: i = 4, grid = mf_iq3s_grid, entries = 512, width = 4, nl = 8, lev = l3s; break;
    default: return NULL;
    }
    gm_iq_lut *L = &g_luts[i];
    if (!L->map) {
        L->nl = nl;
        memcpy(L->lev, lev, (size_t)nl * sizeof *lev);
        L->map = build_map(grid, entries, width, nl, lev);
    }
    return L->map ? L : NULL;
}

int gm_quantize_row_iq(uint32_t type, const float *src, void *dst, int64_t n) {
    const mf_type_info *ti = mf_type_get(type);
    if (!ti || ti->blck_size != 256 || n % 256) return MF_E_INVAL;
    const gm_iq_lut *L = lut_for(type);
    if (!L) return MF_E_NOMEM;
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / 256; i++) quant_block(type, L, src + 256 * i, b + i * ti->type_size, ti->type_size);
    return 0;
}
