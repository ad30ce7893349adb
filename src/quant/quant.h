/* quant: block formats (ids and layouts are llama.cpp's ggml ones, a file-format contract), plain-C
 * reference dequantizers/quantizers, and the dot-product kernels the matmul uses.
 *
 * Matmul contract (matches llama.cpp so results agree): a weight row of type T is dotted with an
 * activation row converted ONCE to mf_vec_dot_type(T):
 *   F32 -> F32, F16 -> F16, BF16 -> BF16, Q4_0/Q5_0/Q8_0/IQ4_NL -> Q8_0, Q4_1/Q5_1 -> Q8_1, Q*_K/IQ4_XS -> Q8_K.
 * Every kernel's reduction order along a row is fixed (never depends on how many rows are processed
 * together), so batched and serial results are bitwise equal. */
#ifndef MF_QUANT_H
#define MF_QUANT_H

#include "core/core.h"

typedef enum {
    MF_TYPE_F32 = 0,
    MF_TYPE_F16 = 1,
    MF_TYPE_Q4_0 = 2,
    MF_TYPE_Q4_1 = 3,
    MF_TYPE_Q5_0 = 6,
    MF_TYPE_Q5_1 = 7,
    MF_TYPE_Q8_0 = 8,
    MF_TYPE_Q8_1 = 9,
    MF_TYPE_Q2_K = 10,
    MF_TYPE_Q3_K = 11,
    MF_TYPE_Q4_K = 12,
    MF_TYPE_Q5_K = 13,
    MF_TYPE_Q6_K = 14,
    MF_TYPE_Q8_K = 15,
    MF_TYPE_IQ2_XXS = 16,
    MF_TYPE_IQ2_XS = 17,
    MF_TYPE_IQ3_XXS = 18,
    MF_TYPE_IQ1_S = 19,
    MF_TYPE_IQ4_NL = 20,
    MF_TYPE_IQ3_S = 21,
    MF_TYPE_IQ2_S = 22,
    MF_TYPE_IQ4_XS = 23,
    MF_TYPE_I8 = 24,
    MF_TYPE_I16 = 25,
    MF_TYPE_I32 = 26,
    MF_TYPE_I64 = 27,
    MF_TYPE_F64 = 28,
    MF_TYPE_IQ1_M = 29,
    MF_TYPE_BF16 = 30,
    /* 31-33 and 36-38 were ggml's removed in-file repacked layouts (Q4_0_4_4 ...): unknown ids */
    MF_TYPE_TQ1_0 = 34,
    MF_TYPE_TQ2_0 = 35,
    MF_TYPE_MXFP4 = 39,
    MF_TYPE_NVFP4 = 40,
    MF_TYPE_Q1_0 = 41,
    MF_TYPE_Q2_0 = 42,
    /* Internal layouts (never in a file: the GGUF reader and writer refuse them).  Made at load by
     * mf_repack: 8 weight rows interleaved so a GEMV/GEMM reads one stream and keeps one int32 lane per
     * row (see repack.c). */
    MF_TYPE_Q4_0_X8 = 44,
    MF_TYPE_Q8_0_X8 = 45,
    MF_TYPE_Q5_0_X8 = 46,
    /* activation layout of the Q4_0/Q5_0 x8 kernels: Q8_0 bytes plus the exact sum of each block's
     * quants, so the GEMM does not recompute it for every tile of 8 weight rows */
    MF_TYPE_Q8_0S = 47,
    MF_TYPE_Q4_K_X8 = 48,
    MF_TYPE_Q6_K_X8 = 49,
    /* the same layouts with 16 rows per group (one 512-bit lane per row), made instead of the x8 ones
     * when the active ISA is AVX-512: the same per-row arithmetic, so the same bits */
    MF_TYPE_Q4_0_X16 = 50,
    MF_TYPE_Q5_0_X16 = 51,
    MF_TYPE_Q8_0_X16 = 52,
    /* IQ4_NL in the q4_0x8 / q4_0x16 byte layouts (the same nibbles, mapped through mf_iq4_levels by the
     * kernels instead of minus 8) */
    MF_TYPE_IQ4_NL_X8 = 53,
    MF_TYPE_IQ4_NL_X16 = 54,
    /* IQ4_XS in the K-layout style (mf_block_iq4_xsx8 below) */
    MF_TYPE_IQ4_XS_X8 = 55,
    /* Q5_K: q4_Kx8 plus its 5th bits (mf_block_q5_Kx8 below) */
    MF_TYPE_Q5_K_X8 = 56,
    MF_TYPE_COUNT = 57 /* size of id space for tables; not every id is a type */
} mf_type;

#define MF_QK4_0 32
#define MF_QK4_1 32
#define MF_QK5_0 32
#define MF_QK5_1 32
#define MF_QK8_0 32
#define MF_QK8_1 32
#define MF_QK_K 256
#define MF_K_SCALE_SIZE 12

/* f16/bf16 values are stored as raw uint16_t bits. */
typedef struct { uint16_t d; uint8_t qs[MF_QK4_0 / 2]; } mf_block_q4_0;                    /* 18 B */
typedef struct { uint16_t d, m; uint8_t qs[MF_QK4_1 / 2]; } mf_block_q4_1;                 /* 20 B */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[MF_QK5_0 / 2]; } mf_block_q5_0;     /* 22 B */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[MF_QK5_1 / 2]; } mf_block_q5_1;  /* 24 B */
typedef struct { uint16_t d; int8_t qs[MF_QK8_0]; } mf_block_q8_0;                         /* 34 B */
typedef struct { uint16_t d, s; int8_t qs[MF_QK8_1]; } mf_block_q8_1;                      /* 36 B, s = d*sum(qs) */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[MF_K_SCALE_SIZE];
    uint8_t qs[MF_QK_K / 2];
} mf_block_q4_K; /* 144 B */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[MF_K_SCALE_SIZE];
    uint8_t qh[MF_QK_K / 8];
    uint8_t qs[MF_QK_K / 2];
} mf_block_q5_K; /* 176 B */
typedef struct {
    uint8_t ql[MF_QK_K / 2];
    uint8_t qh[MF_QK_K / 4];
    int8_t scales[MF_QK_K / 16];
    uint16_t d;
} mf_block_q6_K; /* 210 B */
typedef struct {
    float d;
    int8_t qs[MF_QK_K];
    int16_t bsums[MF_QK_K / 16];
} mf_block_q8_K; /* 292 B */
typedef struct {
    uint8_t scales[MF_QK_K / 16]; /* 4-bit scale (low) and min (high) per 16 values */
    uint8_t qs[MF_QK_K / 4];      /* 2-bit quants */
    uint16_t d, dmin;
} mf_block_q2_K; /* 84 B */
typedef struct {
    uint8_t hmask[MF_QK_K / 8]; /* the 3rd bit of each quant (set: no -4) */
    uint8_t qs[MF_QK_K / 4];    /* low 2 bits */
    uint8_t scales[12];         /* 16 6-bit scales, offset 32 */
    uint16_t d;
} mf_block_q3_K; /* 110 B */
/* IQ4: 4-bit indices into the fixed non-linear level table mf_iq4_levels (quant_impl.h) */
#define MF_QK4_NL 32
typedef struct { uint16_t d; uint8_t qs[MF_QK4_NL / 2]; } mf_block_iq4_nl; /* 18 B */
typedef struct {
    uint16_t d;
    uint16_t scales_h;            /* high 2 bits of the 8 6-bit sub-block scales */
    uint8_t scales_l[MF_QK_K / 64]; /* low 4 bits, two per byte */
    uint8_t qs[MF_QK_K / 2];
} mf_block_iq4_xs; /* 136 B */

/* Row-interleaved groups of 8 rows (internal types).  Block b of a group holds block b of each of its 8
 * rows: the 8 scales, then the quants in 4-byte pieces, piece p of row r at qs[32 * c + 4 * r ...]:
 *   q8_0x8: chunk c (0..7) = quants 4c..4c+3 of each row (lane r of a 256-bit load = row r);
 *   q4_0x8: chunk c (0..3) = bytes qs[4c..4c+3] of each row's q4_0 block, so the low nibbles of the
 *           chunk are quants 4c..4c+3 and the high nibbles quants 16+4c..16+4c+3;
 *   q5_0x8: qs exactly as q4_0x8 (the low 4 bits), and the 5th bits in qh: row r's at qh[4r..4r+3], byte c
 *           (0..3) holding those of quants 4c..4c+3 in bits 0..3 and of quants 16+4c..16+4c+3 in bits 4..7
 *           (bit t of byte c goes with byte t of chunk c).  So one byte shuffle that copies byte c of each
 *           32-bit lane into its 4 bytes lines the bits up with the nibbles of chunk c, and a mask and a
 *           compare per byte turn them into the +16 (repack.c has the bit mapping from q5_0's qh);
 *   iq4_nlx8 (and iq4_nlx16): q4_0x8's (q4_0x16's) bytes exactly, IQ4_NL's block being Q4_0's; the kernels
 *           map each nibble through mf_iq4_levels with one pshufb where q4_0's subtract 8. */
#define MF_X8_ROWS 8
typedef struct { uint16_t d[MF_X8_ROWS]; uint8_t qs[MF_X8_ROWS * MF_QK4_0 / 2]; } mf_block_q4_0x8; /* 144 B */
typedef struct { uint16_t d[MF_X8_ROWS]; int8_t qs[MF_X8_ROWS * MF_QK8_0]; } mf_block_q8_0x8;    /* 272 B */
typedef struct { uint16_t d; int16_t s; int8_t qs[MF_QK8_0]; } mf_block_q8_0s; /* 36 B: s = sum(qs) */
typedef struct {
    uint16_t d[MF_X8_ROWS];
    uint8_t qh[MF_X8_ROWS * 4];
    uint8_t qs[MF_X8_ROWS * MF_QK5_0 / 2];
} mf_block_q5_0x8; /* 176 B */

/* x16: the x8 layouts above with R = 16 rows: d[R], (qh[4R],) then the quants in 4-byte pieces, piece c of
 * row r at qs[4R * c + 4 * r ...] (lane r of a 512-bit load = row r). */
#define MF_X16_ROWS 16
typedef struct { uint16_t d[MF_X16_ROWS]; uint8_t qs[MF_X16_ROWS * MF_QK4_0 / 2]; } mf_block_q4_0x16; /* 288 B */
typedef struct { uint16_t d[MF_X16_ROWS]; int8_t qs[MF_X16_ROWS * MF_QK8_0]; } mf_block_q8_0x16;    /* 544 B */
typedef struct {
    uint16_t d[MF_X16_ROWS];
    uint8_t qh[MF_X16_ROWS * 4];
    uint8_t qs[MF_X16_ROWS * MF_QK5_0 / 2];
} mf_block_q5_0x16; /* 352 B */

/* The K layouts: block b holds super-block b of each of the 8 rows.  Their quant bytes are kept in the
 * file's byte order as 32-byte chunks, lane r = 4 bytes of row r (qs[32 * c + 4 * r + t] = row r's
 * qs[4c + t]), as in q4_0x8:
 *   q4_Kx8: d and dmin of each row; the 8 6-bit scales sc[] and 8 mins m[] of each row, re-packed for
 *           lanes (the block must stay 8 x 144 B, so they stay 6-bit) as three 32-byte vectors, lane r =
 *           row r, k = 0..3:
 *             scales[4r + k]      = (sc[k] & 15) | (sc[k + 4] & 15) << 4
 *             scales[32 + 4r + k] = (m[k] & 15) | (m[k + 4] & 15) << 4
 *             scales[64 + 4r + k] = sc[k] >> 4 | sc[k + 4] >> 4 << 2 | m[k] >> 4 << 4 | m[k + 4] >> 4 << 6
 *           (a few masks, shifts and ors give all 16 as bytes, for all 8 rows); then qs chunks c = 0..31:
 *           low nibbles = values 64 (c / 8) + 4 (c % 8) + t of sub-block 2 (c / 8), high nibbles the same
 *           positions of the next sub-block.
 *   q6_Kx8: d of each row; the 16 int8 scales of each row as chunks (scales[32v + 4r + k] = row r's
 *           scales[4v + k]); ql chunks c = 0..31; qh chunks c = 0..15. */
typedef struct {
    uint16_t d[MF_X8_ROWS], dmin[MF_X8_ROWS];
    uint8_t scales[3 * 32];
    uint8_t qs[MF_X8_ROWS * MF_QK_K / 2];
} mf_block_q4_Kx8; /* 1152 B = 8 x 144 */
/*   q5_Kx8: q4_Kx8's fields at q4_Kx8's offsets (so its code reads both), then each row's 32 bytes of 5th
 *           bits as 8 chunks (qh[32c + 4r + t] = row r's qh[4c + t]): bit sb of a byte is the 5th bit of
 *           value 4 (c % 8) + t of sub-block sb, the position the qs chunks hold in every sub-block. */
typedef struct {
    uint16_t d[MF_X8_ROWS], dmin[MF_X8_ROWS];
    uint8_t scales[3 * 32];
    uint8_t qs[MF_X8_ROWS * MF_QK_K / 2];
    uint8_t qh[MF_X8_ROWS * MF_QK_K / 8];
} mf_block_q5_Kx8; /* 1408 B = 8 x 176 */
typedef struct {
    uint16_t d[MF_X8_ROWS];
    int8_t scales[MF_X8_ROWS * MF_QK_K / 16];
    uint8_t ql[MF_X8_ROWS * MF_QK_K / 2];
    uint8_t qh[MF_X8_ROWS * MF_QK_K / 4];
} mf_block_q6_Kx8; /* 1680 B = 8 x 210 */
/*   iq4_xsx8: d of each row; each row's 6-bit sub-block scales kept as the file's bits (the block must stay
 *           8 x 136 B): scales_l[4r + k] = row r's scales_l[k], so lane r read as a little-endian uint32 holds
 *           sub-block sb's low 4 bits at bit 4 sb, and scales_h[r] = row r's scales_h (sb's high 2 bits at
 *           bit 2 sb); then qs chunks c = 0..31 (qs[32c + 4r + t] = row r's qs[4c + t]), so sub-block sb is
 *           chunks 4 sb .. 4 sb + 3, their low nibbles its values 4 (c % 4) + t, their high nibbles
 *           16 + 4 (c % 4) + t, as in iq4_nlx8. */
typedef struct {
    uint16_t d[MF_X8_ROWS];
    uint16_t scales_h[MF_X8_ROWS];
    uint8_t scales_l[MF_X8_ROWS * MF_QK_K / 64];
    uint8_t qs[MF_X8_ROWS * MF_QK_K / 2];
} mf_block_iq4_xsx8; /* 1088 B = 8 x 136 */

typedef struct {
    const char *name;  /* "f32", "q4_0", "q4_K", ... (llama.cpp spelling) */
    int64_t blck_size; /* elements per block */
    size_t type_size;  /* bytes per block (per row: an x8 group of 8 rows is 8 * row size) */
    bool quantized;
    int row_group;     /* rows stored together: 1, or MF_X8_ROWS for the internal x8 layouts */
    bool internal;     /* made at run time only (x8 weights, q8_0s activations): never in a file */
} mf_type_info;

/* NULL for an id that is not a known type. */
const mf_type_info *mf_type_get(uint32_t type);
/* Like mf_type_get but NULL for the internal types too: for ids read from or written to files. */
const mf_type_info *mf_type_get_file(uint32_t type);
const char *mf_type_name(uint32_t type); /* "unknown(N)" style for unknown ids (static buffer) */
/* Bytes of a row of n elements; 0 if n is not a multiple of the block size or type unknown. */
size_t mf_row_size(uint32_t type, int64_t n);

/* f16 / bf16 <-> f32, round-to-nearest-even, every value class (subnormals, inf, NaN). */
float mf_fp16_to_fp32(uint16_t h);
uint16_t mf_fp32_to_fp16(float f);
float mf_bf16_to_fp32(uint16_t h);
uint16_t mf_fp32_to_bf16(float f);

/* Reference (plain C) conversions of one row of n elements (n a multiple of the block size).
 * dequantize: every type above except Q8_K-as-weights (supported too, for tests).
 * quantize: F32, F16, BF16, Q8_0, Q8_1, Q4_0, Q8_K (activation/KV formats).  Returns MF_E_UNSUPPORTED
 * for others. */
int mf_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);
/* Whether mf_dequantize_row handles `type` (the embedding lookup needs it). */
bool mf_type_dequantizes(uint32_t type);
int mf_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);
/* The bytes llama.cpp's CPU backend writes when IT converts floats at run time (activations, the
 * quantized KV cache): F32, F16, BF16, Q8_0, Q8_1, Q8_K.  Differs from mf_quantize_row for Q8_0/Q8_1
 * only (ggml-cpu on x86 rounds half to even with scale 127/amax; the _ref quantizer rounds half away
 * from zero with 1/d).  Same bytes on every ISA.  MF_E_UNSUPPORTED for other types. */
int mf_quantize_row_cpu(uint32_t type, const float *src, void *dst, int64_t n);

/* ---- dot kernels ---- */
/* s = dot(w_row, a_row) over n elements; w of type T, a of type mf_vec_dot_type(T). */
typedef void (*mf_vec_dot_fn)(int64_t n, float *s, const void *w, const void *a);
/* activation conversion: converts n floats into the vec_dot type's row layout */
typedef void (*mf_from_float_fn)(const float *x, void *y, int64_t n);

/* Tile of dot products for prefill GEMM: s[i * ldc + j] = dot(weight row i, activation row j) for
 * i < nw, j < na (1 <= nw, na <= MF_TILE_MAX); weight rows are w_stride bytes apart, activation rows
 * a_stride bytes.  Every s is BITWISE the value vec_dot of the same kernel set gives for that pair:
 * each pair keeps its own accumulators in vec_dot's order, the tile only shares loads and unpacking.
 * So callers may tile however they like (edges included) without changing any result. */
#define MF_TILE_MAX 8
typedef void (*mf_vec_dot_tile_fn)(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw,
                                   const void *a, size_t a_stride, int na);

/* Kernel sets.  x86-64 builds: AVX2 = AVX2+FMA+F16C (Haswell, Zen 1+); AVX512 = AVX-512 F+BW+VL+VNNI (Ice
 * Lake, Zen 4); AMX = AVX512 + AMX-TILE/AMX-INT8 (Sapphire Rapids), the AVX512 kernels plus tile kernels
 * for the x16 layouts.  The AVX2 kernels of F32, F16, Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K give llama.cpp's (AVX2
 * build) results bit for bit; the AVX512 ones equal the AVX2 ones (VNNI keeps the int32 lanes).  Q2_K, Q3_K,
 * IQ4_NL and IQ4_XS give llama.cpp's AVX2 bits at every ISA, scalar and NEON included: their reference
 * kernels (dot_lowbit.c) are that arithmetic written lane by lane.  aarch64 builds: NEON (Advanced SIMD,
 * every aarch64 CPU) for Q4_0, Q5_0, Q8_0, Q4_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS, bitwise the scalar kernels
 * (only their exact integer sums are vectorized).  Scalar exists everywhere.  The values are
 * ids, not an order: never compare them with < or >. */
typedef enum {
    MF_ISA_SCALAR = 0,
    MF_ISA_AVX2 = 1,
    MF_ISA_AVX512 = 2,
    MF_ISA_NEON = 3,
    /* AMX = the AVX-512 set plus AMX-INT8 tile kernels for the x16 layouts' prefill (x16_amx.c; bitwise the
     * reference like every x16 kernel).  Active only where cpuid has AMX-TILE + AMX-INT8, the OS enabled the
     * tile state (XCR0) and granted this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM). */
    MF_ISA_AMX = 4,
    MF_ISA_COUNT = 5
} mf_isa;

/* Whether kernel set `isa` includes the AVX-512 kernels (AVX512 itself, and AMX, which is built on it). */
static inline bool mf_isa_avx512(mf_isa isa) { return isa == MF_ISA_AVX512 || isa == MF_ISA_AMX; }

typedef struct {
    mf_type vec_dot_type;
    mf_vec_dot_fn vec_dot;       /* NULL for the x8 layouts (their rows only exist as groups of 8) */
    mf_from_float_fn from_float; /* converts activations to vec_dot_type */
    mf_vec_dot_tile_fn vec_dot_tile; /* never NULL for a matmul weight type */
    int tile_w, tile_a; /* the tile shape it is fast at (1 x 1: no shared work, it just loops vec_dot);
                         * for the x8 layouts tile_w is MF_X8_ROWS and every call passes nw = 8 and w at
                         * the start of a group (w_stride is ignored) */
    bool act_major;     /* the tile writes s[j * ldc + i] (activation-major, the matmul output's own layout,
                         * so it stores straight into it): the x8 layouts, whose lanes are rows */
    bool spans;         /* the tile also takes nw = any multiple of tile_w: that many consecutive groups in
                         * one call (the x16 layouts: one activation row then streams several groups side
                         * by side, x16_avx512.c; the AMX x8 ones: two groups a tile pass, x8_amx.c) */
    /* Optional (NULL: none; the BF16 AVX-512 set has them).  act_ok(a, n) says whether one converted
     * activation row lets vec_dot_tile_ok run; vec_dot_tile_ok is vec_dot_tile's contract for activation
     * rows act_ok accepted, faster because it skips the check vec_dot_tile makes on every call.  The
     * matmul asks act_ok once per row as it converts it, not once per tile call. */
    bool (*act_ok)(const void *a, int64_t n);
    mf_vec_dot_tile_fn vec_dot_tile_ok;
    /* Optional (NULL: none; the AMX x16 set has them): the activations packed ONCE per matmul into the tile
     * kernel's own order, instead of the copy every vec_dot_tile call would make for itself.  pack_size(K, M)
     * is the packed copy's size in bytes for M converted rows (0: M is too small to pack; then vec_dot_tile);
     * pack_row(row, K, m, M, p) places converted row m (the vec_dot_type row from_float wrote) into it, rows
     * in any order and from any thread, each exactly once; tile_packed(K, s, ldc, w, w_stride, nw, p, M, m0,
     * na) is vec_dot_tile's contract (the same bits) for activation rows [m0, m0 + na) of the packed copy, m0
     * a multiple of 16. */
    size_t (*pack_size)(int64_t K, int64_t M);
    void (*pack_row)(const void *row, int64_t K, int64_t m, int64_t M, void *p);
    void (*tile_packed)(int64_t K, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *p,
                        int64_t M, int64_t m0, int na);
} mf_quant_kernels;

/* Dots of one f32 row k with nq f32 rows q (q_stride floats apart), n a multiple of 32: out[i] is
 * bitwise what the active ISA's F32 vec_dot gives for (k, q_i), and its F16 vec_dot for rows that are f16
 * values converted to f32 (exact).  Attention converts a K row once for all its queries with it.  NULL
 * when the active ISA has none (the caller then loops vec_dot). */
typedef void (*mf_dot_rows_fn)(int64_t n, const float *k, const float *q, size_t q_stride, int nq, float *out);
mf_dot_rows_fn mf_quant_dot_rows(void);

/* ---- load-time repacking (repack.c) ----
 * The x8 layouts give a different, still fixed, reduction order per row: per block the exact int32 dot,
 * then acc = fma((float)isum, d_w * d_a, acc) in block order (llama.cpp's repacked Q4_0 order); q4_Kx8
 * and q5_Kx8 follow it with acc = fma(-(float)imin, dmin_w * d_a, acc) for their mins, q6_Kx8 and iq4_xsx8 have no
 * mins (repack.c has the exact sums).
 * Like every kernel it never depends on how many rows or activations are processed together. */
/* The layout a matmul weight of `type`, K columns and N rows is repacked to, or `type` when none applies
 * (only Q4_0, Q5_0, Q8_0, IQ4_NL, Q4_K, Q5_K, Q6_K and IQ4_XS with N % 8 == 0 and K a multiple of their block
 * have one).
 * With AVX-512 (or AMX) active, Q4_0/Q5_0/Q8_0/IQ4_NL with N % 16 == 0 get the x16 layouts, otherwise the
 * x8 ones.  Only x86-64 builds repack (the layouts are shaped for 256/512-bit lanes, their fast kernels are x86 ones): elsewhere
 * weights keep the file layout and this returns `type`. */
uint32_t mf_repack_type(uint32_t type, int64_t K, int64_t N);
/* The same with the group size asked for (8 or 16; 16 exists for Q4_0/Q5_0/Q8_0/IQ4_NL only): tests. */
uint32_t mf_repack_type_rows(uint32_t type, int64_t K, int64_t N, int rows);
/* Repacks N rows of K (dst: mf_row_size(type, K) * N bytes, same size as src) into layout `to` (an
 * mf_repack_type_rows result for this type and shape); MF_E_INVAL otherwise. */
int mf_repack_as(uint32_t to, uint32_t type, const void *src, void *dst, int64_t K, int64_t N);
/* mf_repack_as(mf_repack_type(type, K, N), ...) */
int mf_repack(uint32_t type, const void *src, void *dst, int64_t K, int64_t N);
/* The file type an x8 layout is made from (Q4_0 for Q4_0_X8, ...); `type` itself for other types. */
uint32_t mf_repack_base(uint32_t type);
/* Row n of a repacked matrix back in the original layout (tests). */
int mf_unpack_row(uint32_t x8_type, const void *src, void *dst_row, int64_t K, int64_t n);

/* Kernels for weight type `type` at the best ISA this CPU has (cpuid / hwcaps, cached), or forced by
 * MINFER_ISA (scalar|avx2|avx512|amx on x86-64, scalar|neon on aarch64); a type without a kernel at that ISA
 * gets the next lower one of its architecture (Q4_1 and Q5_1 are scalar only).  NULL if the type has no
 * matmul kernel. */
const mf_quant_kernels *mf_quant_kernels_get(uint32_t type);
/* Kernels for an explicit ISA (tests compare each ISA with the scalar reference); NULL if absent (this
 * type has no kernel of its own at that ISA, or this build or CPU lacks the ISA). */
const mf_quant_kernels *mf_quant_kernels_get_isa(uint32_t type, mf_isa isa);
#if defined(__x86_64__)
/* How many 16-row groups the AVX-512 x16 GEMV streams side by side: 1 or 4 (0: the CPU's choice, 4 on
 * Intel, 1 elsewhere; x16_avx512.c says why).  The bits never depend on it; tests run both. */
void mf_x16_set_gemv_groups(int groups);
/* Whether the AVX-512 BF16 tile may use vdpbf16ps: 1 where the CPU has it (the default), 0 never (its fma
 * tile instead: the same bits).  Tests run both. */
void mf_bf16_set_dp(bool on);
#endif
/* The file types that have matmul kernels (so weights of them run), as "f32, f16, ..." in id order, into
 * buf (truncated to cap, always terminated): the list a refusal of another weight type names. */
void mf_quant_runnable_types(char *buf, size_t cap);
mf_isa mf_cpu_best_isa(void);
/* The ISA mf_quant_kernels_get picks from: mf_cpu_best_isa() unless MINFER_ISA forces another one the CPU
 * has.  A forced ISA it lacks, or an unknown name, is refused by mf_quant_isa_check (mf_model_load and the
 * CLI call it first); until then the best ISA stays active. */
mf_isa mf_quant_active_isa(void);
/* 0, or MINFER_ISA's refusal (not a known ISA, or one this CPU lacks) with its message. */
int mf_quant_isa_check(mf_error *err);
const char *mf_isa_name(mf_isa isa);

#endif
