/* The per-block arithmetic of the CUDA matmul and get_rows kernels, as C functions that compile for the
 * host (plain C, tests/test_cuda_qmath.c) and for the device (nvcc, matmul.cu): the kernels call exactly
 * these, so the host test checks the device's arithmetic bit for bit without a GPU.
 *
 * Vocabulary.  A weight row of K elements is cut into J = K / 32 UNITS of 32 elements (a Q4_0/Q5_0/Q8_0/...
 * block, or one 32-element sub-block of a 256-element K-quant super-block).  A unit is handled as four
 * QUARTERS of 8 elements (t = 0..3: elements 8t..8t+7).
 *
 * Activations (quantized weight types): each unit of an activation row becomes 32 int8 q = round(x / d),
 * d = amax / 127 (f32, not f16: no second rounding), plus the exact integer sum s of the 32 q.
 *
 * The value of one (weight unit, activation unit) pair is defined from exact integer sums:
 *   quarter sums  p_t = sum over the quarter of qw * qa      (qw: the weight's integer level, offset applied)
 *   I             = s0 * (p_0 + p_1) + s1 * (p_2 + p_3)      (s0, s1: the int scales of the two 16-element
 *                                                             halves; 1 except Q6_K, Q3_K, Q2_K and
 *                                                             the IQ2/IQ3 grid types)
 *   v             = d_a * (a * (float)I - b * (float)s_a)    (a, b: the unit's float scale and min; for Q2_K,
 *                                                             whose mins are per half, s_a is replaced by
 *                                                             m0 * S_lo + m1 * S_hi, the halves' level sums)
 * Integer sums are exact, so it does not matter which threads add which products; only the float steps
 * above are ordered, and each is a separate IEEE operation (mf_hd_mul/add/sub: never contracted to an FMA
 * on the device, where nvcc would otherwise fuse them).
 *
 * Float weights (F32/F16/BF16) against f32 activations: p_t = the quarter's 8 products accumulated with fmaf
 * in element order from 0, and v = (p_0 + p_1) + (p_2 + p_3).
 *
 * Dequantization (get_rows) reproduces src/quant/dequant.c's expressions operation for operation, so it is
 * bitwise the CPU reference.
 *
 * The grid types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) look their magnitudes up in src/quant's lattice
 * tables: the host reads iq_grids.h's arrays, the device a copy of the same bytes that matmul.cu uploads
 * once per CUDA pool (mf_cuda_matmul_init), so both sides decode from one table. */
#ifndef MF_BACKEND_CUDA_QMATH_H
#define MF_BACKEND_CUDA_QMATH_H

#include "quant/quant.h"

#ifdef __cplusplus
extern "C" {
#endif
#include "quant/iq_grids.h"
#ifdef __cplusplus
}
#endif

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/cuda/hd.h"

#define MF_QM_UNIT 32 /* elements per unit */
#define MF_QM_SLICES 8 /* the canonical K split of matmul.cu (see there) */

/* ---- loads (weights are 2-byte aligned in every file layout; rows are read in place) ---- */
MF_HD uint16_t mf_qm_ld16(const uint8_t *p) { return *(const uint16_t *)p; }
/* 4 bytes at a 2-byte aligned address, little endian */
MF_HD uint32_t mf_qm_ld32(const uint8_t *p) {
    const uint16_t *q = (const uint16_t *)p;
    return (uint32_t)q[0] | (uint32_t)q[1] << 16;
}

/* dp4a: c + the dot of the four signed bytes of a and b */
MF_HD int mf_qm_dp4a(int32_t a, int32_t b, int c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 4; i++) c += (int)(int8_t)(uint8_t)((uint32_t)a >> 8 * i) * (int)(int8_t)(uint8_t)((uint32_t)b >> 8 * i);
    return c;
#endif
}

/* four bytes 0..127 minus o (o <= 128 - max byte) each, as signed bytes; no borrow between bytes */
MF_HD int32_t mf_qm_sub_bytes(uint32_t x, uint32_t o4) {
    return (int32_t)(((x | 0x80808080u) - o4) ^ 0x80808080u);
}

/* bits 0..3 of h -> bit 4 of bytes 0..3 */
MF_HD uint32_t mf_qm_bits_to_b4(uint32_t h) {
    return (h & 1u) << 4 | (h & 2u) << 11 | (h & 4u) << 18 | (h & 8u) << 25;
}

/* Q4_K/Q5_K: the 6-bit scale and min of sub-block j (ggml's get_scale_min_k4) */
MF_HD void mf_qm_scale_min_k4(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
    }
}

/* Q3_K: the 6-bit scale j (0..15) of the 12-byte scales field, minus 32 (quant_impl.h's mf_q3_K_scales,
 * one at a time): low 4 bits from byte j % 8 (low nibble for j < 8), high 2 bits from byte 8 + j % 4 */
MF_HD int mf_qm_q3_K_scale(const uint8_t *sc12, int j) {
    const int lo = (sc12[j & 7] >> 4 * (j >> 3)) & 15, hi = (sc12[8 + (j & 3)] >> 2 * (j >> 2)) & 3;
    return (lo | hi << 4) - 32;
}

/* IQ4_NL/IQ4_XS: the signed level of each of 4 indices (the low nibbles of 4 bytes), from the format's fixed
 * 16-level grid (quant_impl.h's mf_iq4_levels: -127 -104 -83 -65 | -49 -35 -22 -10 | 1 13 25 38 | 53 69 89
 * 113), held here as four words of 4 signed bytes and picked by comparisons: no table in memory, so the
 * same code runs on the host and the device. */
MF_HD int32_t mf_qm_iq4_word(uint32_t idx4) {
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) {
        const uint32_t n = (idx4 >> 8 * i) & 15;
        const uint32_t w = n < 8 ? (n < 4 ? 0xBFAD9881u : 0xF6EADDCFu) : (n < 12 ? 0x26190D01u : 0x71594535u);
        r |= ((w >> 8 * (n & 3)) & 0xFFu) << 8 * i;
    }
    return (int32_t)r;
}

/* ---- the IQ2/IQ3 lattice tables ----
 * The device copies are global memory, not __constant__: the lanes of a warp look up different entries,
 * which the constant cache would serve one address at a time, while the read-only data cache serves them
 * together.  matmul.cu fills them from the host arrays before any kernel runs (mf_cuda_matmul_init). */
#ifdef __CUDACC__
static __device__ uint64_t mf_qm_dev_iq2xxs_grid[256];
static __device__ uint64_t mf_qm_dev_iq2xs_grid[512];
static __device__ uint64_t mf_qm_dev_iq2s_grid[1024];
static __device__ uint32_t mf_qm_dev_iq3xxs_grid[256];
static __device__ uint32_t mf_qm_dev_iq3s_grid[512];
#endif

/* IQ2 grid entry k of the type's table: 8 magnitudes, value i in byte i */
MF_HD uint64_t mf_qm_grid8(uint32_t type, int k) {
#ifdef __CUDA_ARCH__
    return __ldg(type == MF_TYPE_IQ2_XXS ? &mf_qm_dev_iq2xxs_grid[k]
                 : type == MF_TYPE_IQ2_XS ? &mf_qm_dev_iq2xs_grid[k] : &mf_qm_dev_iq2s_grid[k]);
#else
    return type == MF_TYPE_IQ2_XXS ? mf_iq2xxs_grid[k] : type == MF_TYPE_IQ2_XS ? mf_iq2xs_grid[k] : mf_iq2s_grid[k];
#endif
}
/* IQ3 grid entry k: 4 magnitudes */
MF_HD uint32_t mf_qm_grid4(uint32_t type, int k) {
#ifdef __CUDA_ARCH__
    return __ldg(type == MF_TYPE_IQ3_XXS ? &mf_qm_dev_iq3xxs_grid[k] : &mf_qm_dev_iq3s_grid[k]);
#else
    return type == MF_TYPE_IQ3_XXS ? mf_iq3xxs_grid[k] : mf_iq3s_grid[k];
#endif
}

/* The 8 sign bits of a 7-bit sign field (iq_grids.h's mf_iq_ksigns, whose __builtin_parity has no device
 * form): the 8th bit makes the number of minus signs even. */
MF_HD uint32_t mf_qm_ksigns(uint32_t field) {
    field &= 127;
    uint32_t p = field ^ field >> 4;
    p ^= p >> 2;
    p ^= p >> 1;
    return field | (p & 1) << 7;
}

/* Four magnitudes (bytes 0..127) with bit i of signs4 negating byte i, as signed bytes: 0 - x is formed
 * as (128 - x) ^ 128 in the negated bytes, so no byte borrows from its neighbour. */
MF_HD int32_t mf_qm_signed_word(uint32_t mag4, uint32_t signs4) {
    const uint32_t neg = ((signs4 & 1u) | (signs4 & 2u) << 7 | (signs4 & 4u) << 14 | (signs4 & 8u) << 21) * 0xFFu;
    return (int32_t)(((0x80808080u | (mag4 & ~neg)) - (mag4 & neg)) ^ 0x80808080u);
}

/* ---- which types, and where a unit lives ---- */
MF_HD bool mf_qm_type_quantized(uint32_t type) {
    switch (type) {
    case MF_TYPE_Q4_0: case MF_TYPE_Q4_1: case MF_TYPE_Q5_0: case MF_TYPE_Q5_1: case MF_TYPE_Q8_0:
    case MF_TYPE_Q4_K: case MF_TYPE_Q5_K: case MF_TYPE_Q6_K:
    case MF_TYPE_Q2_K: case MF_TYPE_Q3_K: case MF_TYPE_IQ4_NL: case MF_TYPE_IQ4_XS:
    case MF_TYPE_IQ2_XXS: case MF_TYPE_IQ2_XS: case MF_TYPE_IQ2_S: case MF_TYPE_IQ3_XXS: case MF_TYPE_IQ3_S:
        return true;
    default:
        return false;
    }
}
MF_HD bool mf_qm_type_float(uint32_t type) {
    return type == MF_TYPE_F32 || type == MF_TYPE_F16 || type == MF_TYPE_BF16;
}

/* bytes of one storage block and units per block */
MF_HD int mf_qm_block_bytes(uint32_t type) {
    switch (type) {
    case MF_TYPE_Q4_0: return 18;
    case MF_TYPE_Q4_1: return 20;
    case MF_TYPE_Q5_0: return 22;
    case MF_TYPE_Q5_1: return 24;
    case MF_TYPE_Q8_0: return 34;
    case MF_TYPE_Q4_K: return 144;
    case MF_TYPE_Q5_K: return 176;
    case MF_TYPE_Q6_K: return 210;
    case MF_TYPE_Q2_K: return 84;   /* scales[16] qs[64] d dmin */
    case MF_TYPE_Q3_K: return 110;  /* hmask[32] qs[64] scales[12] d */
    case MF_TYPE_IQ4_NL: return 18; /* d qs[16] */
    case MF_TYPE_IQ4_XS: return 136; /* d scales_h scales_l[4] qs[128] */
    case MF_TYPE_IQ2_XXS: return 66; /* d, per sub-block 4 grid indices + a u32 of signs and scale */
    case MF_TYPE_IQ2_XS: return 74;  /* d qs u16[32] scales[8] */
    case MF_TYPE_IQ2_S: return 82;   /* d qs[32] signs[32] qh[8] scales[8] */
    case MF_TYPE_IQ3_XXS: return 98; /* d qs[64], per sub-block a u32 of signs and scale */
    case MF_TYPE_IQ3_S: return 110;  /* d qs[64] qh[8] signs[32] scales[4] */
    case MF_TYPE_F32: return 4 * MF_QM_UNIT;
    case MF_TYPE_F16: case MF_TYPE_BF16: return 2 * MF_QM_UNIT;
    default: return 0;
    }
}
MF_HD int mf_qm_units_per_block(uint32_t type) {
    switch (type) {
    case MF_TYPE_Q2_K: case MF_TYPE_Q3_K: case MF_TYPE_Q4_K: case MF_TYPE_Q5_K: case MF_TYPE_Q6_K:
    case MF_TYPE_IQ4_XS:
    case MF_TYPE_IQ2_XXS: case MF_TYPE_IQ2_XS: case MF_TYPE_IQ2_S: case MF_TYPE_IQ3_XXS: case MF_TYPE_IQ3_S:
        return 8;
    default:
        return 1;
    }
}

/* the storage block holding unit j of a row, and the unit's index inside it */
MF_HD const uint8_t *mf_qm_block(uint32_t type, const uint8_t *row, int j, int *sub) {
    const int upb = mf_qm_units_per_block(type);
    *sub = j % upb;
    return row + (size_t)(j / upb) * (size_t)mf_qm_block_bytes(type);
}

/* ---- quantized weights: a quarter's integer levels and a unit's scaling ---- */
typedef struct {
    float a, b;       /* v = d_a * (a * I - b * s_a) */
    int16_t s0, s1;   /* int scales of elements 0..15 and 16..31 */
    int16_t m0, m1;   /* Q2_K only (mf_qm_half_mins): int mins of the two halves, s_a = m0 S_lo + m1 S_hi */
} mf_qm_unit;

/* Types whose min is per 16-element half (Q2_K): the min term's integer is m0 * S_lo + m1 * S_hi over the
 * activation's level sums per half (mf_qm_quarter_msum), not the unit's whole sum. */
MF_HD bool mf_qm_half_mins(uint32_t type) { return type == MF_TYPE_Q2_K; }

/* The integer levels of elements 8t..8t+7 of unit j (offsets applied: Q4_0 -8, Q5_0 -16, Q6_K -32, Q3_K -4
 * where its high bit is clear; Q4_1, Q5_1, Q2_K, Q4_K, Q5_K unsigned; IQ4_NL/IQ4_XS the grid's signed
 * levels; the IQ2/IQ3 grid types the lattice magnitude times its sign, |level| <= 62), as two words of 4
 * signed bytes in element order. */
MF_HD void mf_qm_quarter(uint32_t type, const uint8_t *row, int j, int t, int32_t *w0, int32_t *w1) {
    int sub;
    const uint8_t *b = mf_qm_block(type, row, j, &sub);
    const int hi = t >> 1, o = 8 * (t & 1); /* nibble half, byte offset inside the 16 quant bytes */
    uint32_t x0, x1;
    switch (type) {
    case MF_TYPE_Q8_0:
        *w0 = (int32_t)mf_qm_ld32(b + 2 + 8 * t);
        *w1 = (int32_t)mf_qm_ld32(b + 6 + 8 * t);
        return;
    case MF_TYPE_Q4_0:
    case MF_TYPE_Q4_1: {
        const uint8_t *qs = b + (type == MF_TYPE_Q4_0 ? 2 : 4) + o;
        x0 = (mf_qm_ld32(qs) >> 4 * hi) & 0x0F0F0F0Fu;
        x1 = (mf_qm_ld32(qs + 4) >> 4 * hi) & 0x0F0F0F0Fu;
        if (type == MF_TYPE_Q4_0) {
            *w0 = mf_qm_sub_bytes(x0, 0x08080808u);
            *w1 = mf_qm_sub_bytes(x1, 0x08080808u);
        } else {
            *w0 = (int32_t)x0;
            *w1 = (int32_t)x1;
        }
        return;
    }
    case MF_TYPE_Q5_0:
    case MF_TYPE_Q5_1: {
        /* qh bit e is the 5th bit of element e (e = 0..31), so byte t of qh holds this quarter's 8 */
        const uint8_t *qh = b + (type == MF_TYPE_Q5_0 ? 2 : 4), *qs = qh + 4 + o;
        const uint32_t h = qh[t];
        x0 = ((mf_qm_ld32(qs) >> 4 * hi) & 0x0F0F0F0Fu) | mf_qm_bits_to_b4(h);
        x1 = ((mf_qm_ld32(qs + 4) >> 4 * hi) & 0x0F0F0F0Fu) | mf_qm_bits_to_b4(h >> 4);
        if (type == MF_TYPE_Q5_0) {
            *w0 = mf_qm_sub_bytes(x0, 0x10101010u);
            *w1 = mf_qm_sub_bytes(x1, 0x10101010u);
        } else {
            *w0 = (int32_t)x0;
            *w1 = (int32_t)x1;
        }
        return;
    }
    case MF_TYPE_Q4_K:
    case MF_TYPE_Q5_K: {
        /* sub-blocks 2p and 2p+1 share 32 quant bytes: low nibbles, then high nibbles */
        const int p = sub >> 1, sh = 4 * (sub & 1);
        const uint8_t *qs = b + (type == MF_TYPE_Q4_K ? 16 : 48) + 32 * p + 8 * t;
        x0 = (mf_qm_ld32(qs) >> sh) & 0x0F0F0F0Fu;
        x1 = (mf_qm_ld32(qs + 4) >> sh) & 0x0F0F0F0Fu;
        if (type == MF_TYPE_Q5_K) { /* bit `sub` of qh[l] is the 5th bit of element l of sub-block `sub` */
            const uint8_t *qh = b + 16 + 8 * t;
            x0 |= ((mf_qm_ld32(qh) >> sub) & 0x01010101u) << 4;
            x1 |= ((mf_qm_ld32(qh + 4) >> sub) & 0x01010101u) << 4;
        }
        *w0 = (int32_t)x0;
        *w1 = (int32_t)x1;
        return;
    }
    case MF_TYPE_Q6_K: {
        /* 128-element half nn, quarter qq of it: low 4 bits from ql (byte l or l + 32, low or high
         * nibble), high 2 bits from qh[l] at bit 2 qq */
        const int nn = sub >> 2, qq = sub & 3;
        const uint8_t *ql = b + 64 * nn + 32 * (qq & 1) + 8 * t, *qh = b + 128 + 32 * nn + 8 * t;
        const int lsh = 4 * (qq >> 1), hsh = 2 * qq;
        x0 = ((mf_qm_ld32(ql) >> lsh) & 0x0F0F0F0Fu) | ((mf_qm_ld32(qh) >> hsh) & 0x03030303u) << 4;
        x1 = ((mf_qm_ld32(ql + 4) >> lsh) & 0x0F0F0F0Fu) | ((mf_qm_ld32(qh + 4) >> hsh) & 0x03030303u) << 4;
        *w0 = mf_qm_sub_bytes(x0, 0x20202020u);
        *w1 = mf_qm_sub_bytes(x1, 0x20202020u);
        return;
    }
    case MF_TYPE_Q2_K:
    case MF_TYPE_Q3_K: {
        /* unit `sub` = 128-element half n, 2-bit plane s: element k (0..31) is bits 2s..2s+1 of qs[32n + k];
         * Q3_K's third bit is bit 4n + s of hmask[k]: set means the level as is, clear means 4 less */
        const int n = sub >> 2, s = sub & 3;
        const uint8_t *qs = b + (type == MF_TYPE_Q2_K ? 16 : 32) + 32 * n + 8 * t;
        x0 = (mf_qm_ld32(qs) >> 2 * s) & 0x03030303u;
        x1 = (mf_qm_ld32(qs + 4) >> 2 * s) & 0x03030303u;
        if (type == MF_TYPE_Q3_K) {
            const uint8_t *hm = b + 8 * t;
            x0 |= ((mf_qm_ld32(hm) >> (4 * n + s)) & 0x01010101u) << 2;
            x1 |= ((mf_qm_ld32(hm + 4) >> (4 * n + s)) & 0x01010101u) << 2;
            *w0 = mf_qm_sub_bytes(x0, 0x04040404u);
            *w1 = mf_qm_sub_bytes(x1, 0x04040404u);
        } else {
            *w0 = (int32_t)x0;
            *w1 = (int32_t)x1;
        }
        return;
    }
    case MF_TYPE_IQ4_NL:
    case MF_TYPE_IQ4_XS: { /* Q4_0's nibble layout (sub-block `sub` at qs + 16 sub for IQ4_XS), grid levels */
        const uint8_t *qs = b + (type == MF_TYPE_IQ4_NL ? 2 : 8 + 16 * sub) + o;
        *w0 = mf_qm_iq4_word((mf_qm_ld32(qs) >> 4 * hi) & 0x0F0F0F0Fu);
        *w1 = mf_qm_iq4_word((mf_qm_ld32(qs + 4) >> 4 * hi) & 0x0F0F0F0Fu);
        return;
    }
    case MF_TYPE_IQ2_XXS:
    case MF_TYPE_IQ2_XS:
    case MF_TYPE_IQ2_S: { /* quarter t = grid group t (8 values): one index, one sign byte */
        int k;
        uint32_t sg;
        if (type == MF_TYPE_IQ2_XXS) { /* 4 index bytes, then 4 x 7 sign bits (scale in the top 4) */
            k = b[2 + 8 * sub + t];
            sg = mf_qm_ksigns(mf_qm_ld32(b + 6 + 8 * sub) >> 7 * t);
        } else if (type == MF_TYPE_IQ2_XS) { /* u16: 9-bit index, 7 sign bits */
            const uint32_t q = mf_qm_ld16(b + 2 + 8 * sub + 2 * t);
            k = (int)(q & 511);
            sg = mf_qm_ksigns(q >> 9);
        } else { /* low 8 index bits in qs, bits 8..9 in qh (2 per group), 8 explicit sign bits */
            k = b[2 + 4 * sub + t] | ((b[66 + sub] >> 2 * t) & 3) << 8;
            sg = b[34 + 4 * sub + t];
        }
        const uint64_t g = mf_qm_grid8(type, k);
        *w0 = mf_qm_signed_word((uint32_t)g, sg);
        *w1 = mf_qm_signed_word((uint32_t)(g >> 32), sg >> 4);
        return;
    }
    case MF_TYPE_IQ3_XXS:
    case MF_TYPE_IQ3_S: { /* quarter t = grid groups 2t, 2t+1 (4 values each), sign byte t */
        const uint8_t *qs = b + 2 + 8 * sub + 2 * t;
        int k0 = qs[0], k1 = qs[1];
        uint32_t sg;
        if (type == MF_TYPE_IQ3_XXS) { /* 4 x 7 sign bits after the 64 index bytes */
            sg = mf_qm_ksigns(mf_qm_ld32(b + 66 + 4 * sub) >> 7 * t);
        } else { /* index bit 8 in qh (one per group), 8 explicit sign bits */
            const int qh = b[66 + sub] >> 2 * t;
            k0 |= (qh & 1) << 8, k1 |= (qh & 2) << 7;
            sg = b[74 + 4 * sub + t];
        }
        *w0 = mf_qm_signed_word(mf_qm_grid4(type, k0), sg);
        *w1 = mf_qm_signed_word(mf_qm_grid4(type, k1), sg >> 4);
        return;
    }
    default:
        *w0 = *w1 = 0;
        return;
    }
}

/* The scaling of unit j: v = d_a * (a * I - b * s_a). */
MF_HD mf_qm_unit mf_qm_unit_params(uint32_t type, const uint8_t *row, int j) {
    int sub;
    const uint8_t *b = mf_qm_block(type, row, j, &sub);
    mf_qm_unit u;
    u.a = 0.0f, u.b = 0.0f, u.s0 = 1, u.s1 = 1, u.m0 = 0, u.m1 = 0;
    switch (type) {
    case MF_TYPE_Q4_0: case MF_TYPE_Q5_0: case MF_TYPE_Q8_0:
        u.a = mf_hd_f16_to_f32(mf_qm_ld16(b));
        break;
    case MF_TYPE_Q4_1: case MF_TYPE_Q5_1: /* element = d q + m: the min enters as -b */
        u.a = mf_hd_f16_to_f32(mf_qm_ld16(b));
        u.b = -mf_hd_f16_to_f32(mf_qm_ld16(b + 2));
        break;
    case MF_TYPE_Q4_K: case MF_TYPE_Q5_K: { /* element = (d sc) q - (dmin m) */
        int sc, m;
        mf_qm_scale_min_k4(sub, b + 4, &sc, &m);
        u.a = mf_hd_mul(mf_hd_f16_to_f32(mf_qm_ld16(b)), (float)sc);
        u.b = mf_hd_mul(mf_hd_f16_to_f32(mf_qm_ld16(b + 2)), (float)m);
        break;
    }
    case MF_TYPE_Q6_K: { /* element = d sc q with one int8 scale per 16 elements */
        const int nn = sub >> 2, qq = sub & 3;
        const int8_t *sc = (const int8_t *)(b + 192 + 8 * nn + 2 * qq);
        u.a = mf_hd_f16_to_f32(mf_qm_ld16(b + 208));
        u.s0 = sc[0];
        u.s1 = sc[1];
        break;
    }
    case MF_TYPE_Q2_K: { /* element = (d sc) q - (dmin m): a 4-bit scale and a 4-bit min per 16 elements */
        const uint8_t lo = b[2 * sub], hi = b[2 * sub + 1];
        u.a = mf_hd_f16_to_f32(mf_qm_ld16(b + 80));
        u.b = mf_hd_f16_to_f32(mf_qm_ld16(b + 82));
        u.s0 = lo & 15, u.s1 = hi & 15, u.m0 = lo >> 4, u.m1 = hi >> 4;
        break;
    }
    case MF_TYPE_Q3_K: /* element = (d sc) q with a 6-bit scale - 32 per 16 elements */
        u.a = mf_hd_f16_to_f32(mf_qm_ld16(b + 108));
        u.s0 = (int16_t)mf_qm_q3_K_scale(b + 96, 2 * sub);
        u.s1 = (int16_t)mf_qm_q3_K_scale(b + 96, 2 * sub + 1);
        break;
    case MF_TYPE_IQ4_NL: /* element = d level */
        u.a = mf_hd_f16_to_f32(mf_qm_ld16(b));
        break;
    case MF_TYPE_IQ4_XS: { /* element = (d (ls - 32)) level, ls 6 bits: low 4 in scales_l, high 2 in scales_h */
        const int ls = ((b[4 + sub / 2] >> 4 * (sub % 2)) & 15) | ((mf_qm_ld16(b + 2) >> 2 * sub) & 3) << 4;
        u.a = mf_hd_mul(mf_hd_f16_to_f32(mf_qm_ld16(b)), (float)(ls - 32));
        break;
    }
    /* the grid types: element = d * m * level / F with the odd multiplier m = 2 * nibble + 1 per half and
     * F = 8 (IQ2), 4 (IQ3_XXS), 1 (IQ3_S) - dot_iq_scalar.c's factors; a = d / F is exact (a power of 2) */
    case MF_TYPE_IQ2_XXS: case MF_TYPE_IQ3_XXS: { /* one 4-bit scale per sub-block, top of its sign word */
        const uint32_t nib = mf_qm_ld32(b + (type == MF_TYPE_IQ2_XXS ? 6 + 8 * sub : 66 + 4 * sub)) >> 28;
        u.a = mf_hd_mul(mf_hd_f16_to_f32(mf_qm_ld16(b)), type == MF_TYPE_IQ2_XXS ? 0.125f : 0.25f);
        u.s0 = u.s1 = (int16_t)(2 * nib + 1);
        break;
    }
    case MF_TYPE_IQ2_XS: case MF_TYPE_IQ2_S: { /* a nibble per half: low = values 0..15 */
        const uint8_t sc = b[(type == MF_TYPE_IQ2_XS ? 66 : 74) + sub];
        u.a = mf_hd_mul(mf_hd_f16_to_f32(mf_qm_ld16(b)), 0.125f);
        u.s0 = (int16_t)(2 * (sc & 15) + 1), u.s1 = (int16_t)(2 * (sc >> 4) + 1);
        break;
    }
    case MF_TYPE_IQ3_S: { /* sub-blocks 2k, 2k+1 share byte k of scales: low nibble, high nibble */
        const uint8_t sc = b[106 + sub / 2];
        u.a = mf_hd_f16_to_f32(mf_qm_ld16(b));
        u.s0 = u.s1 = (int16_t)(2 * (sub % 2 ? sc >> 4 : sc & 15) + 1);
        break;
    }
    default:
        break;
    }
    return u;
}

/* A quarter's exact int partial with its half's scale applied: s_{t/2} * p_t (summed over the 4 quarters
 * in any order, this gives I exactly). */
MF_HD int mf_qm_quarter_isum(const mf_qm_unit *u, int t, int32_t w0, int32_t w1, int32_t a0, int32_t a1) {
    const int p = mf_qm_dp4a(w1, a1, mf_qm_dp4a(w0, a0, 0));
    return (t < 2 ? u->s0 : u->s1) * p;
}

/* Q2_K's min integer for one quarter: m_{t/2} times the sum of its 8 activation levels (summed over the 4
 * quarters in any order: m0 S_lo + m1 S_hi exactly). */
MF_HD int mf_qm_quarter_msum(const mf_qm_unit *u, int t, int32_t a0, int32_t a1) {
    const int s = mf_qm_dp4a(a1, 0x01010101, mf_qm_dp4a(a0, 0x01010101, 0));
    return (t < 2 ? u->m0 : u->m1) * s;
}

/* the same from a unit's 8 activation words (the tiled kernel's form) */
MF_HD int mf_qm_unit_msum(const mf_qm_unit *u, const int32_t a[8]) {
    int lo = 0, hi = 0;
    for (int k = 0; k < 4; k++) lo = mf_qm_dp4a(a[k], 0x01010101, lo);
    for (int k = 4; k < 8; k++) hi = mf_qm_dp4a(a[k], 0x01010101, hi);
    return u->m0 * lo + u->m1 * hi;
}

/* I from a unit's 8 weight words and 8 activation words (words 0..3: elements 0..15) - the tiled kernel's
 * form; the same integer as the four mf_qm_quarter_isum summed. */
MF_HD int mf_qm_unit_isum(const mf_qm_unit *u, const int32_t w[8], const int32_t a[8]) {
    int lo = 0, hi = 0;
    for (int k = 0; k < 4; k++) lo = mf_qm_dp4a(w[k], a[k], lo);
    for (int k = 4; k < 8; k++) hi = mf_qm_dp4a(w[k], a[k], hi);
    return u->s0 * lo + u->s1 * hi;
}

/* v = d_a * (a * I - b * s_a): one unit's float value (four separate IEEE operations, in this order) */
MF_HD float mf_qm_unit_value(const mf_qm_unit *u, int isum, float da, int sa) {
    return mf_hd_mul(da, mf_hd_sub(mf_hd_mul(u->a, (float)isum), mf_hd_mul(u->b, (float)sa)));
}

/* ---- float weights ---- */
/* Elements 8t..8t+7 of unit j as f32 (exact conversions); those at or past K (a float row need not fill
 * its last unit) are 0 and never read. */
MF_HD void mf_qm_quarter_f(uint32_t type, const uint8_t *row, int j, int t, int64_t K, float w[8]) {
    const int64_t e = (int64_t)MF_QM_UNIT * j + 8 * t;
    for (int i = 0; i < 8; i++) {
        if (e + i >= K)
            w[i] = 0.0f;
        else if (type == MF_TYPE_F32)
            w[i] = ((const float *)row)[e + i];
        else if (type == MF_TYPE_F16)
            w[i] = mf_hd_f16_to_f32(mf_qm_ld16(row + 2 * (e + i)));
        else
            w[i] = mf_hd_bf16_to_f32(mf_qm_ld16(row + 2 * (e + i)));
    }
}

/* the activations of the same quarter (0 past K) */
MF_HD void mf_qm_quarter_x(const float *x, int j, int t, int64_t K, float v[8]) {
    const int64_t e = (int64_t)MF_QM_UNIT * j + 8 * t;
    for (int i = 0; i < 8; i++) v[i] = e + i < K ? x[e + i] : 0.0f;
}

/* a float quarter's partial: fmaf over the 8 products in element order, from 0 (a zero pair past K adds +0) */
MF_HD float mf_qm_fdot8(const float w[8], const float x[8]) {
    float p = 0.0f;
    for (int i = 0; i < 8; i++) p = mf_hd_fma(w[i], x[i], p);
    return p;
}

/* the four quarter partials of a unit -> its value */
MF_HD float mf_qm_tree4(const float p[4]) { return mf_hd_add(mf_hd_add(p[0], p[1]), mf_hd_add(p[2], p[3])); }

/* The canonical combination of the 8 slice sums (matmul.cu: slice s sums units s, s + 8, s + 16, ... in that
 * order): pairs 4 apart, then 2 apart, then 1 apart - what a warp's xor butterfly over lanes gives. */
MF_HD float mf_qm_tree8(const float a[8]) {
    const float b0 = mf_hd_add(a[0], a[4]), b1 = mf_hd_add(a[1], a[5]), b2 = mf_hd_add(a[2], a[6]),
                b3 = mf_hd_add(a[3], a[7]);
    return mf_hd_add(mf_hd_add(b0, b2), mf_hd_add(b1, b3));
}

/* ---- activations: one unit of 32 floats -> 32 int8, its scale and the exact sum of its levels ---- */
MF_HD float mf_qm_act_scale(float amax) { return amax / 127.0f; }
MF_HD float mf_qm_act_inv(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }
MF_HD int mf_qm_act_level(float x, float id) { return (int)roundf(mf_hd_mul(x, id)); }

MF_HD void mf_qm_quantize_unit(const float *x, int8_t q[MF_QM_UNIT], float *d, int *s) {
    float amax = 0.0f;
    for (int i = 0; i < MF_QM_UNIT; i++) amax = fmaxf(amax, fabsf(x[i]));
    *d = mf_qm_act_scale(amax);
    const float id = mf_qm_act_inv(*d);
    int sum = 0;
    for (int i = 0; i < MF_QM_UNIT; i++) {
        q[i] = (int8_t)mf_qm_act_level(x[i], id);
        sum += q[i];
    }
    *s = sum;
}

/* ---- one whole dot in the canonical order (the host's model of both matmul kernels) ---- */
typedef struct {
    float d;   /* the unit's scale */
    int32_t s; /* the exact sum of its 32 levels */
} mf_qm_act;

/* dot(weight row of J units, activation row): slice s sums the values of units s, s + 8, ... in order from
 * 0.0f, and mf_qm_tree8 combines the slices.  aq: J * 32 levels, ad: J scales. */
MF_HD float mf_qm_row_dot_q(uint32_t type, const uint8_t *row, int J, const int8_t *aq, const mf_qm_act *ad) {
    float acc[MF_QM_SLICES];
    for (int s = 0; s < MF_QM_SLICES; s++) acc[s] = 0.0f;
    for (int j = 0; j < J; j++) {
        const mf_qm_unit u = mf_qm_unit_params(type, row, j);
        int isum = 0, msum = 0;
        for (int t = 0; t < 4; t++) {
            int32_t w0, w1;
            mf_qm_quarter(type, row, j, t, &w0, &w1);
            const uint8_t *a = (const uint8_t *)aq + MF_QM_UNIT * j + 8 * t;
            const int32_t a0 = (int32_t)((uint32_t)a[0] | (uint32_t)a[1] << 8 | (uint32_t)a[2] << 16 | (uint32_t)a[3] << 24);
            const int32_t a1 = (int32_t)((uint32_t)a[4] | (uint32_t)a[5] << 8 | (uint32_t)a[6] << 16 | (uint32_t)a[7] << 24);
            isum += mf_qm_quarter_isum(&u, t, w0, w1, a0, a1);
            msum += mf_qm_quarter_msum(&u, t, a0, a1);
        }
        const int sa = mf_qm_half_mins(type) ? msum : ad[j].s;
        acc[j % MF_QM_SLICES] = mf_hd_add(acc[j % MF_QM_SLICES], mf_qm_unit_value(&u, isum, ad[j].d, sa));
    }
    return mf_qm_tree8(acc);
}

/* the same for float weights against an f32 row x of K elements (J = ceil(K / 32) units) */
MF_HD float mf_qm_row_dot_f(uint32_t type, const uint8_t *row, int64_t K, const float *x) {
    float acc[MF_QM_SLICES];
    for (int s = 0; s < MF_QM_SLICES; s++) acc[s] = 0.0f;
    const int J = (int)((K + MF_QM_UNIT - 1) / MF_QM_UNIT);
    for (int j = 0; j < J; j++) {
        float p[4], w[8], v[8];
        for (int t = 0; t < 4; t++) {
            mf_qm_quarter_f(type, row, j, t, K, w);
            mf_qm_quarter_x(x, j, t, K, v);
            p[t] = mf_qm_fdot8(w, v);
        }
        acc[j % MF_QM_SLICES] = mf_hd_add(acc[j % MF_QM_SLICES], mf_qm_tree4(p));
    }
    return mf_qm_tree8(acc);
}

/* ---- dequantization of a quarter (get_rows): bitwise src/quant/dequant.c ---- */
/* (K: the row's length, which bounds what a float row's last unit reads; quantized rows are whole units) */
MF_HD void mf_qm_dequant8(uint32_t type, const uint8_t *row, int j, int t, int64_t K, float y[8]) {
    if (mf_qm_type_float(type)) {
        mf_qm_quarter_f(type, row, j, t, K, y);
        return;
    }
    int sub;
    const uint8_t *b = mf_qm_block(type, row, j, &sub);
    int32_t w[2];
    mf_qm_quarter(type, row, j, t, &w[0], &w[1]);
    int8_t q[8];
    for (int i = 0; i < 8; i++) q[i] = (int8_t)(uint8_t)((uint32_t)w[i >> 2] >> 8 * (i & 3));
    switch (type) {
    case MF_TYPE_Q4_0: case MF_TYPE_Q5_0: case MF_TYPE_Q8_0: { /* (q - o) * d */
        const float d = mf_hd_f16_to_f32(mf_qm_ld16(b));
        for (int i = 0; i < 8; i++) y[i] = mf_hd_mul((float)q[i], d);
        return;
    }
    case MF_TYPE_Q4_1: case MF_TYPE_Q5_1: { /* q * d + m */
        const float d = mf_hd_f16_to_f32(mf_qm_ld16(b)), m = mf_hd_f16_to_f32(mf_qm_ld16(b + 2));
        for (int i = 0; i < 8; i++) y[i] = mf_hd_add(mf_hd_mul((float)q[i], d), m);
        return;
    }
    case MF_TYPE_Q4_K: case MF_TYPE_Q5_K: { /* d1 * q - m1 with d1 = d * sc, m1 = dmin * m */
        const mf_qm_unit u = mf_qm_unit_params(type, row, j);
        for (int i = 0; i < 8; i++) y[i] = mf_hd_sub(mf_hd_mul(u.a, (float)q[i]), u.b);
        return;
    }
    case MF_TYPE_Q6_K: { /* d * sc * q */
        const mf_qm_unit u = mf_qm_unit_params(type, row, j);
        const float ds = mf_hd_mul(u.a, (float)(t < 2 ? u.s0 : u.s1));
        for (int i = 0; i < 8; i++) y[i] = mf_hd_mul(ds, (float)q[i]);
        return;
    }
    case MF_TYPE_Q2_K: { /* dl * q - ml with dl = d * sc, ml = dmin * m */
        const mf_qm_unit u = mf_qm_unit_params(type, row, j);
        const float dl = mf_hd_mul(u.a, (float)(t < 2 ? u.s0 : u.s1)), ml = mf_hd_mul(u.b, (float)(t < 2 ? u.m0 : u.m1));
        for (int i = 0; i < 8; i++) y[i] = mf_hd_sub(mf_hd_mul(dl, (float)q[i]), ml);
        return;
    }
    case MF_TYPE_Q3_K: { /* dl * q with dl = d * (sc - 32) */
        const mf_qm_unit u = mf_qm_unit_params(type, row, j);
        const float dl = mf_hd_mul(u.a, (float)(t < 2 ? u.s0 : u.s1));
        for (int i = 0; i < 8; i++) y[i] = mf_hd_mul(dl, (float)q[i]);
        return;
    }
    case MF_TYPE_IQ4_NL: case MF_TYPE_IQ4_XS: { /* d * level (IQ4_XS: d = the super-block's d * (ls - 32)) */
        const mf_qm_unit u = mf_qm_unit_params(type, row, j);
        for (int i = 0; i < 8; i++) y[i] = mf_hd_mul(u.a, (float)q[i]);
        return;
    }
    case MF_TYPE_IQ2_XXS: case MF_TYPE_IQ2_XS: case MF_TYPE_IQ2_S: case MF_TYPE_IQ3_XXS: case MF_TYPE_IQ3_S: {
        /* dequant_iq.c: db * g * sign with db = d * (0.5 + nibble) * F' (F' = 0.25 IQ2, 0.5 IQ3_XXS) or
         * d * m (IQ3_S).  Here db * (sign g): rounding to nearest is symmetric in sign and no grid
         * magnitude is 0, so (db * g) * -1 and db * -g are the same bits. */
        const mf_qm_unit u = mf_qm_unit_params(type, row, j);
        const int nib = ((t < 2 ? u.s0 : u.s1) - 1) / 2;
        const float d = mf_hd_f16_to_f32(mf_qm_ld16(b));
        const float db = type == MF_TYPE_IQ3_S ? mf_hd_mul(d, (float)(2 * nib + 1))
                         : mf_hd_mul(mf_hd_mul(d, 0.5f + (float)nib), type == MF_TYPE_IQ3_XXS ? 0.5f : 0.25f);
        for (int i = 0; i < 8; i++) y[i] = mf_hd_mul(db, (float)q[i]);
        return;
    }
    default:
        for (int i = 0; i < 8; i++) y[i] = 0.0f;
        return;
    }
}

#endif
