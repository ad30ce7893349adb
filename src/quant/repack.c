/* quant: load-time repacking of matmul weights into the row-interleaved x8 layouts (quant.h), and their
 * plain-C reference kernels.
 *
 * Why: a GEMV over plain Q4_0/Q5_0/Q8_0/IQ4_NL/Q4_K/Q5_K/Q6_K/IQ4_XS rows does one 8-lane float accumulation per row and
 * block (unpack, int8 dot, convert, scale, fma), and several rows at once read interleaved streams inside
 * one 4 KiB page, which the hardware prefetcher does not follow.  With 8 rows interleaved, one 256-bit lane per
 * row, a block costs one int32 dot per 8 rows and one convert/scale/fma for all 8, and the matrix is a
 * single forward stream.  The reference below defines the results bit for bit (the SIMD kernels must
 * equal it): per row, per block, the exact integer dot, then acc = fmaf((float)isum, d_w * d_a, acc)
 * (the K layouts: per super-block of 256, see their reference kernels at the end). */
#include "quant/quant_impl.h"

#include <math.h>

uint32_t mf_repack_type_rows(uint32_t type, int64_t K, int64_t N, int rows) {
    const mf_type_info *t = mf_type_get(type);
    if (!t || K <= 0 || N <= 0 || K % t->blck_size != 0 || (rows != MF_X8_ROWS && rows != MF_X16_ROWS) ||
        N % rows != 0)
        return type;
    if (rows == MF_X16_ROWS) {
        switch (type) {
        case MF_TYPE_Q4_0: return MF_TYPE_Q4_0_X16;
        case MF_TYPE_Q5_0: return MF_TYPE_Q5_0_X16;
        case MF_TYPE_Q8_0: return MF_TYPE_Q8_0_X16;
        case MF_TYPE_IQ4_NL: return MF_TYPE_IQ4_NL_X16;
        default: return type;
        }
    }
    switch (type) {
    case MF_TYPE_Q4_0: return MF_TYPE_Q4_0_X8;
    case MF_TYPE_Q5_0: return MF_TYPE_Q5_0_X8;
    case MF_TYPE_Q8_0: return MF_TYPE_Q8_0_X8;
    case MF_TYPE_IQ4_NL: return MF_TYPE_IQ4_NL_X8;
    case MF_TYPE_Q4_K: return MF_TYPE_Q4_K_X8;
    case MF_TYPE_Q5_K: return MF_TYPE_Q5_K_X8;
    case MF_TYPE_Q6_K: return MF_TYPE_Q6_K_X8;
    case MF_TYPE_IQ4_XS: return MF_TYPE_IQ4_XS_X8;
    default: return type;
    }
}

/* x16 only where its kernels exist (AVX-512): at AVX2 a 512-bit lane per row buys nothing.  Not at all
 * outside x86-64: the layouts are built around x86 lanes, and there the file layout's kernels (NEON) are the
 * fast ones, so a repack would only trade them for the plain-C reference tiles.  Nor under the scalar
 * kernel set (MINFER_ISA=scalar, or an x86 CPU without AVX2), for the same reason: the reference tiles
 * read each quant through the interleave and run ~2x slower than the file layout's scalar vec_dot (measured
 * on q6_K, 2026-12-02); test_quant still checks every SIMD tile against them. */
uint32_t mf_repack_type(uint32_t type, int64_t K, int64_t N) {
#if defined(__x86_64__)
    if (mf_quant_active_isa() == MF_ISA_SCALAR) return type;
    if (mf_isa_avx512(mf_quant_active_isa())) {
        const uint32_t t16 = mf_repack_type_rows(type, K, N, MF_X16_ROWS);
        if (t16 != type) return t16;
    }
    return mf_repack_type_rows(type, K, N, MF_X8_ROWS);
#else
    (void)K, (void)N;
    return type;
#endif
}

uint32_t mf_repack_base(uint32_t type) {
    switch (type) {
    case MF_TYPE_Q4_0_X8: case MF_TYPE_Q4_0_X16: return MF_TYPE_Q4_0;
    case MF_TYPE_Q5_0_X8: case MF_TYPE_Q5_0_X16: return MF_TYPE_Q5_0;
    case MF_TYPE_Q8_0_X8: case MF_TYPE_Q8_0_X16: return MF_TYPE_Q8_0;
    case MF_TYPE_IQ4_NL_X8: case MF_TYPE_IQ4_NL_X16: return MF_TYPE_IQ4_NL;
    case MF_TYPE_Q4_K_X8: return MF_TYPE_Q4_K;
    case MF_TYPE_Q5_K_X8: return MF_TYPE_Q5_K;
    case MF_TYPE_Q6_K_X8: return MF_TYPE_Q6_K;
    case MF_TYPE_IQ4_XS_X8: return MF_TYPE_IQ4_XS;
    default: return type;
    }
}

/* Byte i of row r's quant array (qs, ql or qh) in an x8 block's chunks of 4 bytes per row (quant.h). */
static inline size_t x8_pos(int r, int i) {
    return 32 * (size_t)(i / 4) + 4 * (size_t)r + (size_t)(i % 4);
}

static void x8_chunks_in(uint8_t *x8, int r, const uint8_t *row, int nbytes) {
    for (int c = 0; c < nbytes / 4; c++) memcpy(&x8[32 * c + 4 * r], &row[4 * c], 4);
}

static void x8_chunks_out(uint8_t *row, const uint8_t *x8, int r, int nbytes) {
    for (int c = 0; c < nbytes / 4; c++) memcpy(&row[4 * c], &x8[32 * c + 4 * r], 4);
}

/* q4_Kx8's lane form of row r's 6-bit scales sc[8] and mins m[8] (quant.h) and back.  Both directions
 * are exact: the 12 file bytes hold exactly these 96 bits. */
static void q4k_sm_to_x8(const uint8_t sc[8], const uint8_t m[8], uint8_t *x8s, int r) {
    for (int k = 0; k < 4; k++) {
        x8s[4 * r + k] = (uint8_t)((sc[k] & 15) | (sc[k + 4] & 15) << 4);
        x8s[32 + 4 * r + k] = (uint8_t)((m[k] & 15) | (m[k + 4] & 15) << 4);
        x8s[64 + 4 * r + k] =
            (uint8_t)(sc[k] >> 4 | (sc[k + 4] >> 4) << 2 | (m[k] >> 4) << 4 | (m[k + 4] >> 4) << 6);
    }
}

static void q4k_sm_from_x8(const uint8_t *x8s, int r, uint8_t sc[8], uint8_t m[8]) {
    for (int k = 0; k < 4; k++) {
        const uint8_t s = x8s[4 * r + k], mn = x8s[32 + 4 * r + k], h = x8s[64 + 4 * r + k];
        sc[k] = (uint8_t)((s & 15) | (h & 3) << 4);
        sc[k + 4] = (uint8_t)((s >> 4) | ((h >> 2) & 3) << 4);
        m[k] = (uint8_t)((mn & 15) | ((h >> 4) & 3) << 4);
        m[k + 4] = (uint8_t)((mn >> 4) | (h >> 6) << 4);
    }
}

/* the file's 12-byte packing (the inverse of mf_q_scale_min_k4) */
static void q4k_scales_pack(const uint8_t sc[8], const uint8_t m[8], uint8_t q[12]) {
    for (int j = 0; j < 4; j++) {
        q[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        q[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        q[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

/* q5_0's qh is one little-endian uint32 whose bit j is the 5th bit of quant j; q5_0x8 keeps a row's 32 bits
 * as 4 bytes, byte c = bits 4c..4c+3 (low nibbles of chunk c) | bits 16+4c..16+4c+3 (its high nibbles) << 4,
 * so bit t of the byte goes with byte t of the chunk (quant.h). */
static void q5_qh_to_x8(const uint8_t qh[4], uint8_t out[4]) {
    const uint32_t h = qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    for (int c = 0; c < 4; c++) out[c] = (uint8_t)(((h >> (4 * c)) & 0xF) | ((h >> (16 + 4 * c)) & 0xF) << 4);
}

static void q5_qh_from_x8(const uint8_t in[4], uint8_t qh[4]) {
    uint32_t h = 0;
    for (int c = 0; c < 4; c++)
        h |= (uint32_t)(in[c] & 0xF) << (4 * c) | (uint32_t)(in[c] >> 4) << (16 + 4 * c);
    for (int i = 0; i < 4; i++) qh[i] = (uint8_t)(h >> (8 * i));
}

/* The Q*_0 layouts for R = 8 or 16 rows (quant.h): a block is d[R], for q5_0 qh[4R], then qs[nq R]; the
 * file's own block is the same with R = 1.  IQ4_NL's block is Q4_0's (d, 16 bytes of nibbles), so its
 * layouts are q4_0's byte for byte. */
static size_t q0_qs_off(uint32_t base, int R) {
    return (base == MF_TYPE_Q5_0 ? 6 : 2) * (size_t)R;
}

static int q0_nqs(uint32_t base) { /* quant bytes per row and block */
    return base == MF_TYPE_Q8_0 ? MF_QK8_0 : MF_QK4_0 / 2;
}

/* The pack functions interleave the rows of one group (row i at rows + i * rs) block by block. */
static void pack_q0(uint32_t base, int R, const char *rows, size_t rs, uint8_t *dst, int64_t nb) {
    const size_t bs = mf_type_get(base)->type_size, qo = q0_qs_off(base, R), sqo = q0_qs_off(base, 1);
    const int nq = q0_nqs(base);
    for (int r = 0; r < R; r++) {
        const uint8_t *src = (const uint8_t *)rows + (size_t)r * rs;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *sb = src + (size_t)b * bs;
            uint8_t *xb = dst + (size_t)b * bs * R;
            memcpy(xb + 2 * r, sb, 2); /* d */
            if (base == MF_TYPE_Q5_0) q5_qh_to_x8(sb + 2, xb + 2 * R + 4 * r);
            for (int c = 0; c < nq / 4; c++) memcpy(xb + qo + 4 * (size_t)R * c + 4 * r, sb + sqo + 4 * c, 4);
        }
    }
}

static void unpack_q0(uint32_t base, int R, const uint8_t *grp, int r, uint8_t *row, int64_t nb) {
    const size_t bs = mf_type_get(base)->type_size, qo = q0_qs_off(base, R), sqo = q0_qs_off(base, 1);
    const int nq = q0_nqs(base);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *xb = grp + (size_t)b * bs * R;
        uint8_t *ob = row + (size_t)b * bs;
        memcpy(ob, xb + 2 * r, 2);
        if (base == MF_TYPE_Q5_0) q5_qh_from_x8(xb + 2 * R + 4 * r, ob + 2);
        for (int c = 0; c < nq / 4; c++) memcpy(ob + sqo + 4 * c, xb + qo + 4 * (size_t)R * c + 4 * r, 4);
    }
}

/* row r's d, dmin, scales and qs of one super-block into a q4_Kx8 block (or q5_Kx8's q4_Kx8 part) */
static void k4_in(mf_block_q4_Kx8 *xb, int r, uint16_t d, uint16_t dmin, const uint8_t scales[12],
                  const uint8_t *qs) {
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; j++) mf_q_scale_min_k4(j, scales, &sc[j], &m[j]);
    xb->d[r] = d;
    xb->dmin[r] = dmin;
    q4k_sm_to_x8(sc, m, xb->scales, r);
    x8_chunks_in(xb->qs, r, qs, MF_QK_K / 2);
}

static void k4_out(const mf_block_q4_Kx8 *xb, int r, uint16_t *d, uint16_t *dmin, uint8_t scales[12], uint8_t *qs) {
    uint8_t sc[8], m[8];
    q4k_sm_from_x8(xb->scales, r, sc, m);
    *d = xb->d[r];
    *dmin = xb->dmin[r];
    q4k_scales_pack(sc, m, scales);
    x8_chunks_out(qs, xb->qs, r, MF_QK_K / 2);
}

static void pack_q4_K(const char *rows, size_t rs, mf_block_q4_Kx8 *dst, int64_t nb) {
    for (int r = 0; r < MF_X8_ROWS; r++) {
        const mf_block_q4_K *src = (const mf_block_q4_K *)(rows + (size_t)r * rs);
        for (int64_t b = 0; b < nb; b++) k4_in(&dst[b], r, src[b].d, src[b].dmin, src[b].scales, src[b].qs);
    }
}

static void pack_q5_K(const char *rows, size_t rs, mf_block_q5_Kx8 *dst, int64_t nb) {
    for (int r = 0; r < MF_X8_ROWS; r++) {
        const mf_block_q5_K *src = (const mf_block_q5_K *)(rows + (size_t)r * rs);
        for (int64_t b = 0; b < nb; b++) {
            k4_in((mf_block_q4_Kx8 *)&dst[b], r, src[b].d, src[b].dmin, src[b].scales, src[b].qs);
            x8_chunks_in(dst[b].qh, r, src[b].qh, MF_QK_K / 8);
        }
    }
}

static void pack_q6_K(const char *rows, size_t rs, mf_block_q6_Kx8 *dst, int64_t nb) {
    for (int r = 0; r < MF_X8_ROWS; r++) {
        const mf_block_q6_K *src = (const mf_block_q6_K *)(rows + (size_t)r * rs);
        for (int64_t b = 0; b < nb; b++) {
            dst[b].d[r] = src[b].d;
            x8_chunks_in((uint8_t *)dst[b].scales, r, (const uint8_t *)src[b].scales, MF_QK_K / 16);
            x8_chunks_in(dst[b].ql, r, src[b].ql, MF_QK_K / 2);
            x8_chunks_in(dst[b].qh, r, src[b].qh, MF_QK_K / 4);
        }
    }
}

/* iq4_xsx8 (quant.h): the file's scale bits and quant bytes, moved only */
static void pack_iq4_xs(const char *rows, size_t rs, mf_block_iq4_xsx8 *dst, int64_t nb) {
    for (int r = 0; r < MF_X8_ROWS; r++) {
        const mf_block_iq4_xs *src = (const mf_block_iq4_xs *)(rows + (size_t)r * rs);
        for (int64_t b = 0; b < nb; b++) {
            dst[b].d[r] = src[b].d;
            dst[b].scales_h[r] = src[b].scales_h;
            memcpy(&dst[b].scales_l[4 * r], src[b].scales_l, 4);
            x8_chunks_in(dst[b].qs, r, src[b].qs, MF_QK_K / 2);
        }
    }
}

int mf_repack_as(uint32_t to, uint32_t type, const void *src, void *dst, int64_t K, int64_t N) {
    const mf_type_info *ti = mf_type_get(to);
    if (to == type || !ti || mf_repack_type_rows(type, K, N, ti->row_group) != to) return MF_E_INVAL;
    const int R = ti->row_group;
    const size_t rs = mf_row_size(type, K);
    const int64_t nb = K / mf_type_get(type)->blck_size;
    for (int64_t g = 0; g < N / R; g++) {
        const char *rows = (const char *)src + (size_t)g * R * rs;
        void *out = (char *)dst + (size_t)g * R * rs;
        switch (to) {
        case MF_TYPE_Q4_K_X8: pack_q4_K(rows, rs, out, nb); break;
        case MF_TYPE_Q5_K_X8: pack_q5_K(rows, rs, out, nb); break;
        case MF_TYPE_Q6_K_X8: pack_q6_K(rows, rs, out, nb); break;
        case MF_TYPE_IQ4_XS_X8: pack_iq4_xs(rows, rs, out, nb); break;
        default: pack_q0(type, R, rows, rs, out, nb); break;
        }
    }
    return 0;
}

int mf_repack(uint32_t type, const void *src, void *dst, int64_t K, int64_t N) {
    return mf_repack_as(mf_repack_type(type, K, N), type, src, dst, K, N);
}

int mf_unpack_row(uint32_t x8_type, const void *src, void *dst_row, int64_t K, int64_t n) {
    const mf_type_info *t = mf_type_get(x8_type);
    if (!t || t->row_group == 1 || K <= 0 || K % t->blck_size != 0 || n < 0) return MF_E_INVAL;
    const int64_t nb = K / t->blck_size;
    const int R = t->row_group, r = (int)(n % R);
    const size_t rs = mf_row_size(x8_type, K);
    const char *grp = (const char *)src + (size_t)(n / R) * R * rs;
    if (x8_type == MF_TYPE_Q4_K_X8) {
        const mf_block_q4_Kx8 *x = (const mf_block_q4_Kx8 *)grp;
        mf_block_q4_K *o = dst_row;
        for (int64_t b = 0; b < nb; b++) k4_out(&x[b], r, &o[b].d, &o[b].dmin, o[b].scales, o[b].qs);
        return 0;
    }
    if (x8_type == MF_TYPE_Q5_K_X8) {
        const mf_block_q5_Kx8 *x = (const mf_block_q5_Kx8 *)grp;
        mf_block_q5_K *o = dst_row;
        for (int64_t b = 0; b < nb; b++) {
            k4_out((const mf_block_q4_Kx8 *)&x[b], r, &o[b].d, &o[b].dmin, o[b].scales, o[b].qs);
            x8_chunks_out(o[b].qh, x[b].qh, r, MF_QK_K / 8);
        }
        return 0;
    }
    if (x8_type == MF_TYPE_Q6_K_X8) {
        const mf_block_q6_Kx8 *x = (const mf_block_q6_Kx8 *)grp;
        mf_block_q6_K *o = dst_row;
        for (int64_t b = 0; b < nb; b++) {
            o[b].d = x[b].d[r];
            x8_chunks_out((uint8_t *)o[b].scales, (const uint8_t *)x[b].scales, r, MF_QK_K / 16);
            x8_chunks_out(o[b].ql, x[b].ql, r, MF_QK_K / 2);
            x8_chunks_out(o[b].qh, x[b].qh, r, MF_QK_K / 4);
        }
        return 0;
    }
    if (x8_type == MF_TYPE_IQ4_XS_X8) {
        const mf_block_iq4_xsx8 *x = (const mf_block_iq4_xsx8 *)grp;
        mf_block_iq4_xs *o = dst_row;
        for (int64_t b = 0; b < nb; b++) {
            o[b].d = x[b].d[r];
            o[b].scales_h = x[b].scales_h[r];
            memcpy(o[b].scales_l, &x[b].scales_l[4 * r], 4);
            x8_chunks_out(o[b].qs, x[b].qs, r, MF_QK_K / 2);
        }
        return 0;
    }
    const uint32_t base = mf_repack_base(x8_type);
    if (base == MF_TYPE_Q4_0 || base == MF_TYPE_Q5_0 || base == MF_TYPE_Q8_0 || base == MF_TYPE_IQ4_NL) {
        unpack_q0(base, t->row_group, (const uint8_t *)grp, r, dst_row, nb);
        return 0;
    }
    return MF_E_INVAL;
}

/* ---- q8_0s activations: the scalar Q8_0 bytes, plus each block's quant sum (the SIMD converters do the
 * same in one pass, dot_avx2.c) ---- */

void mf_from_float_q8_0s(const float *x, void *vy, int64_t n) {
    enum { CHUNK = 64 }; /* blocks per conversion call */
    mf_block_q8_0 tmp[CHUNK];
    mf_block_q8_0s *y = vy;
    for (int64_t b0 = 0; b0 < n / MF_QK8_0; b0 += CHUNK) {
        const int64_t nb = MF_MIN((int64_t)CHUNK, n / MF_QK8_0 - b0);
        mf_from_float_q8_0(x + b0 * MF_QK8_0, tmp, nb * MF_QK8_0);
        for (int64_t i = 0; i < nb; i++) {
            int s = 0;
            for (int k = 0; k < MF_QK8_0; k++) s += tmp[i].qs[k];
            y[b0 + i].d = tmp[i].d;
            y[b0 + i].s = (int16_t)s;
            memcpy(y[b0 + i].qs, tmp[i].qs, MF_QK8_0);
        }
    }
}

/* ---- reference kernels (the tile contract of quant.h with nw rows of consecutive groups of R, act_major
 * output: s[j * ldc + r] for row r of the span and activation j) ---- */

/* The loops every reference kernel shares: row r of the group against activation j, block by block in
 * order, `block` adding one block's contribution to the row's single float accumulator.  R rows per group
 * (8 or 16): the arithmetic per row is the same for both, so x8 and x16 give the same bits. */
typedef float (*x8_ref_block)(const uint8_t *xb, const void *yb, int R, int r, float acc);

static void x8_ref_tile(x8_ref_block block, int R, int64_t nb, size_t xbytes, size_t ybytes, float *s, size_t ldc,
                        const void *w, int nw, const void *a, size_t a_stride, int na) {
    for (int j = 0; j < na; j++) {
        const char *y = (const char *)a + (size_t)j * a_stride;
        for (int r = 0; r < nw; r++) { /* row r is row r % R of group r / R (a span of whole groups) */
            const uint8_t *grp = (const uint8_t *)w + (size_t)(r / R) * (size_t)nb * xbytes;
            float acc = 0;
            for (int64_t b = 0; b < nb; b++) acc = block(grp + (size_t)b * xbytes, y + (size_t)b * ybytes, R, r % R, acc);
            s[(size_t)j * ldc + r] = acc; /* activation-major (act_major) */
        }
    }
}

static float x_scale(const uint8_t *xb, int r) { /* d[r] of a Q*_0 xR block */
    uint16_t d;
    memcpy(&d, xb + 2 * r, 2);
    return mf_fp16_to_fp32(d);
}

static float q4_0_block(const uint8_t *x, const void *vy, int R, int r, float acc) {
    const mf_block_q8_0s *y = vy;
    const uint8_t *qs = x + q0_qs_off(MF_TYPE_Q4_0, R);
    int32_t isum = 0;
    for (int c = 0; c < 4; c++)
        for (int t = 0; t < 4; t++) {
            const uint8_t q = qs[4 * R * c + 4 * r + t];
            isum += ((q & 0xF) - 8) * y->qs[4 * c + t] + ((q >> 4) - 8) * y->qs[16 + 4 * c + t];
        }
    acc = fmaf((float)isum, x_scale(x, r) * mf_fp16_to_fp32(y->d), acc);
    return acc;
}

/* iq4_nl: q4_0's arithmetic with each nibble mapped through the 16 levels instead of minus 8 (the levels
 * are int8, so the block's sum is the same exact int32 in any order) */
static float iq4_nl_block(const uint8_t *x, const void *vy, int R, int r, float acc) {
    const mf_block_q8_0s *y = vy;
    const uint8_t *qs = x + q0_qs_off(MF_TYPE_IQ4_NL, R);
    int32_t isum = 0;
    for (int c = 0; c < 4; c++)
        for (int t = 0; t < 4; t++) {
            const uint8_t q = qs[4 * R * c + 4 * r + t];
            isum += mf_iq4_levels[q & 0xF] * y->qs[4 * c + t] + mf_iq4_levels[q >> 4] * y->qs[16 + 4 * c + t];
        }
    acc = fmaf((float)isum, x_scale(x, r) * mf_fp16_to_fp32(y->d), acc);
    return acc;
}

static float q5_0_block(const uint8_t *x, const void *vy, int R, int r, float acc) {
    const mf_block_q8_0s *y = vy;
    const uint8_t *qh = x + 2 * R, *qs = x + q0_qs_off(MF_TYPE_Q5_0, R);
    int32_t isum = 0;
    for (int c = 0; c < 4; c++) {
        /* bit t goes with byte t's low nibble, bit 4 + t with its high one */
        const uint8_t h = qh[4 * r + c];
        for (int t = 0; t < 4; t++) {
            const uint8_t q = qs[4 * R * c + 4 * r + t];
            const int lo = (q & 0xF) | ((h >> t) & 1) << 4;
            const int hi = (q >> 4) | ((h >> (4 + t)) & 1) << 4;
            isum += (lo - 16) * y->qs[4 * c + t] + (hi - 16) * y->qs[16 + 4 * c + t];
        }
    }
    acc = fmaf((float)isum, x_scale(x, r) * mf_fp16_to_fp32(y->d), acc);
    return acc;
}

static float q8_0_block(const uint8_t *x, const void *vy, int R, int r, float acc) {
    const mf_block_q8_0s *y = vy;
    const int8_t *qs = (const int8_t *)(x + q0_qs_off(MF_TYPE_Q8_0, R));
    int32_t isum = 0;
    for (int c = 0; c < 8; c++)
        for (int t = 0; t < 4; t++) isum += qs[4 * R * c + 4 * r + t] * y->qs[4 * c + t];
    acc = fmaf((float)isum, x_scale(x, r) * mf_fp16_to_fp32(y->d), acc);
    return acc;
}

/* q4_Kx8 and q5_Kx8: per row and super-block the exact int32 isum = sum over the 8 sub-blocks of
 * sc * sum(q * y) (q the nibble, q5_K's with its 5th bit from qh, NULL for q4_K) and imin = sum of
 * m * (the sub-block's activation sum, from bsums), then, in this order,
 *   acc = fmaf((float)isum, d_w * d_a, acc);  acc = fmaf(-(float)imin, dmin_w * d_a, acc)
 * with d_w, dmin_w the f16 scales as floats and d_a the Q8_K block's float scale. */
static float k4_block(const mf_block_q4_Kx8 *x, const uint8_t *qh, const mf_block_q8_K *y, int r, float acc) {
    uint8_t sc[8], m[8];
    q4k_sm_from_x8(x->scales, r, sc, m);
    int32_t isum = 0, imin = 0;
    for (int sb = 0; sb < 8; sb++) {
        /* sub-block sb: nibble half sb % 2 of file bytes 32 (sb / 2) .. 32 (sb / 2) + 31, 5th bits in bit sb
         * of file qh bytes 0..31 */
        int32_t sub = 0;
        for (int v = 0; v < 32; v++) {
            const uint8_t q = x->qs[x8_pos(r, 32 * (sb / 2) + v)];
            const int h = qh ? (qh[x8_pos(r, v)] >> sb & 1) << 4 : 0;
            sub += (((sb & 1) ? q >> 4 : q & 0xF) | h) * y->qs[32 * sb + v];
        }
        isum += sc[sb] * sub;
        imin += m[sb] * (y->bsums[2 * sb] + y->bsums[2 * sb + 1]);
    }
    acc = fmaf((float)isum, mf_fp16_to_fp32(x->d[r]) * y->d, acc);
    acc = fmaf(-(float)imin, mf_fp16_to_fp32(x->dmin[r]) * y->d, acc);
    return acc;
}

static float q4_K_block(const uint8_t *vx, const void *vy, int R, int r, float acc) {
    (void)R;
    return k4_block((const mf_block_q4_Kx8 *)vx, NULL, vy, r, acc);
}

static float q5_K_block(const uint8_t *vx, const void *vy, int R, int r, float acc) {
    (void)R;
    return k4_block((const mf_block_q4_Kx8 *)vx, ((const mf_block_q5_Kx8 *)vx)->qh, vy, r, acc);
}

/* q6_Kx8: per row and super-block the exact int32 isum = sum over the 16 sub-blocks of
 * sc * sum((q - 32) * y), then acc = fmaf((float)isum, d_w * d_a, acc). */
static float q6_K_block(const uint8_t *vx, const void *vy, int R, int r, float acc) {
    (void)R;
    const mf_block_q6_Kx8 *x = (const mf_block_q6_Kx8 *)vx;
    const mf_block_q8_K *y = vy;
    int32_t isum = 0;
    for (int i = 0; i < MF_QK_K / 16; i++) {
        int32_t sub = 0;
        for (int p = 16 * i; p < 16 * i + 16; p++) {
            /* value p: half h, quarter k (of 32), position l (q6_K's layout, dequant.c) */
            const int h = p / 128, k = (p % 128) / 32, l = p % 32;
            const uint8_t ql = x->ql[x8_pos(r, 64 * h + 32 * (k & 1) + l)];
            const uint8_t qh = x->qh[x8_pos(r, 32 * h + l)];
            const int q = ((ql >> (4 * (k >> 1))) & 0xF) | ((qh >> (2 * k)) & 3) << 4;
            sub += (q - 32) * y->qs[p];
        }
        isum += x->scales[x8_pos(r, i)] * sub;
    }
    acc = fmaf((float)isum, mf_fp16_to_fp32(x->d[r]) * y->d, acc);
    return acc;
}

/* iq4_xsx8: per row and super-block the exact int32 isum = sum over the 8 sub-blocks of
 * (ls - 32) * sum(level(q) * y), then acc = fmaf((float)isum, d_w * d_a, acc) (q6_Kx8's form; llama.cpp's
 * vec_dot instead folds each pair of sub-blocks into 8 float lanes, so this is the x8-order class). */
static float iq4_xs_block(const uint8_t *vx, const void *vy, int R, int r, float acc) {
    (void)R;
    const mf_block_iq4_xsx8 *x = (const mf_block_iq4_xsx8 *)vx;
    const mf_block_q8_K *y = vy;
    uint32_t sl;
    memcpy(&sl, &x->scales_l[4 * r], 4);
    int32_t isum = 0;
    for (int sb = 0; sb < 8; sb++) {
        const int ls = (int)(((sl >> (4 * sb)) & 15) | ((x->scales_h[r] >> (2 * sb)) & 3) << 4) - 32;
        int32_t sub = 0;
        for (int v = 0; v < 16; v++) {
            const uint8_t q = x->qs[x8_pos(r, 16 * sb + v)];
            sub += mf_iq4_levels[q & 0xF] * y->qs[32 * sb + v] + mf_iq4_levels[q >> 4] * y->qs[32 * sb + 16 + v];
        }
        isum += ls * sub;
    }
    acc = fmaf((float)isum, mf_fp16_to_fp32(x->d[r]) * y->d, acc);
    return acc;
}

/* the exported reference tiles (quant_impl.h) */
#define X8_REF_TILE(name, block, R, qk, xt, yt)                                                                \
    void name(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,          \
              size_t a_stride, int na) {                                                                       \
        (void)w_stride;                                                                                        \
        x8_ref_tile(block, R, n / (qk), sizeof(xt), sizeof(yt), s, ldc, w, nw, a, a_stride, na);               \
    }
X8_REF_TILE(mf_tile_q4_0x8_scalar, q4_0_block, 8, MF_QK8_0, mf_block_q4_0x8, mf_block_q8_0s)
X8_REF_TILE(mf_tile_q5_0x8_scalar, q5_0_block, 8, MF_QK8_0, mf_block_q5_0x8, mf_block_q8_0s)
X8_REF_TILE(mf_tile_q8_0x8_scalar, q8_0_block, 8, MF_QK8_0, mf_block_q8_0x8, mf_block_q8_0s)
X8_REF_TILE(mf_tile_q4_Kx8_scalar, q4_K_block, 8, MF_QK_K, mf_block_q4_Kx8, mf_block_q8_K)
X8_REF_TILE(mf_tile_q5_Kx8_scalar, q5_K_block, 8, MF_QK_K, mf_block_q5_Kx8, mf_block_q8_K)
X8_REF_TILE(mf_tile_q6_Kx8_scalar, q6_K_block, 8, MF_QK_K, mf_block_q6_Kx8, mf_block_q8_K)
X8_REF_TILE(mf_tile_q4_0x16_scalar, q4_0_block, 16, MF_QK8_0, mf_block_q4_0x16, mf_block_q8_0s)
X8_REF_TILE(mf_tile_q5_0x16_scalar, q5_0_block, 16, MF_QK8_0, mf_block_q5_0x16, mf_block_q8_0s)
X8_REF_TILE(mf_tile_q8_0x16_scalar, q8_0_block, 16, MF_QK8_0, mf_block_q8_0x16, mf_block_q8_0s)
X8_REF_TILE(mf_tile_iq4_nlx8_scalar, iq4_nl_block, 8, MF_QK4_NL, mf_block_q4_0x8, mf_block_q8_0s)
X8_REF_TILE(mf_tile_iq4_nlx16_scalar, iq4_nl_block, 16, MF_QK4_NL, mf_block_q4_0x16, mf_block_q8_0s)
X8_REF_TILE(mf_tile_iq4_xsx8_scalar, iq4_xs_block, 8, MF_QK_K, mf_block_iq4_xsx8, mf_block_q8_K)
