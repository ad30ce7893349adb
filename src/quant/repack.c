/* quant: load-time repacking of matmul weights into the row-interleaved x8 layouts (quant.h), and their
 * plain-C reference kernels.
 *
 * Why: a GEMV over plain Q4_0/Q8_0 rows does one 8-lane float accumulation per row and block (unpack,
 * int8 dot, convert, scale, fma), and several rows at once read interleaved streams inside one 4 KiB
 * page, which the hardware prefetcher does not follow.  With 8 rows interleaved, one 256-bit lane per
 * row, a block costs one int32 dot per 8 rows and one convert/scale/fma for all 8, and the matrix is a
 * single forward stream.  The reference below defines the results bit for bit (the SIMD kernels must
 * equal it): per row, per block, the exact integer dot, then acc = fmaf((float)isum, d_w * d_a, acc). */
#include "quant/quant_impl.h"

#include <math.h>

uint32_t mf_repack_type(uint32_t type, int64_t K, int64_t N) {
    if (K <= 0 || N <= 0 || K % MF_QK8_0 != 0 || N % MF_X8_ROWS != 0) return type;
    switch (type) {
    case MF_TYPE_Q4_0: return MF_TYPE_Q4_0_X8;
    case MF_TYPE_Q8_0: return MF_TYPE_Q8_0_X8;
    default: return type;
    }
}

uint32_t mf_repack_base(uint32_t type) {
    switch (type) {
    case MF_TYPE_Q4_0_X8: return MF_TYPE_Q4_0;
    case MF_TYPE_Q8_0_X8: return MF_TYPE_Q8_0;
    default: return type;
    }
}

static void pack_q4_0(const mf_block_q4_0 *src[MF_X8_ROWS], mf_block_q4_0x8 *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++) {
        for (int r = 0; r < MF_X8_ROWS; r++) {
            dst[b].d[r] = src[r][b].d;
            for (int c = 0; c < 4; c++) memcpy(&dst[b].qs[32 * c + 4 * r], &src[r][b].qs[4 * c], 4);
        }
    }
}

static void pack_q8_0(const mf_block_q8_0 *src[MF_X8_ROWS], mf_block_q8_0x8 *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++) {
        for (int r = 0; r < MF_X8_ROWS; r++) {
            dst[b].d[r] = src[r][b].d;
            for (int c = 0; c < 8; c++) memcpy(&dst[b].qs[32 * c + 4 * r], &src[r][b].qs[4 * c], 4);
        }
    }
}

int mf_repack(uint32_t type, const void *src, void *dst, int64_t K, int64_t N) {
    const uint32_t to = mf_repack_type(type, K, N);
    if (to == type) return MF_E_INVAL;
    const size_t rs = mf_row_size(type, K);
    const int64_t nb = K / MF_QK8_0;
    for (int64_t g = 0; g < N / MF_X8_ROWS; g++) {
        const char *rows = (const char *)src + (size_t)g * MF_X8_ROWS * rs;
        char *out = (char *)dst + (size_t)g * MF_X8_ROWS * rs;
        if (to == MF_TYPE_Q4_0_X8) {
            const mf_block_q4_0 *r[MF_X8_ROWS];
            for (int i = 0; i < MF_X8_ROWS; i++) r[i] = (const mf_block_q4_0 *)(rows + (size_t)i * rs);
            pack_q4_0(r, (mf_block_q4_0x8 *)out, nb);
        } else {
            const mf_block_q8_0 *r[MF_X8_ROWS];
            for (int i = 0; i < MF_X8_ROWS; i++) r[i] = (const mf_block_q8_0 *)(rows + (size_t)i * rs);
            pack_q8_0(r, (mf_block_q8_0x8 *)out, nb);
        }
    }
    return 0;
}

int mf_unpack_row(uint32_t x8_type, const void *src, void *dst_row, int64_t K, int64_t n) {
    if (K <= 0 || K % MF_QK8_0 != 0 || n < 0) return MF_E_INVAL;
    const int64_t nb = K / MF_QK8_0;
    const int r = (int)(n % MF_X8_ROWS);
    const size_t rs = mf_row_size(x8_type, K);
    const char *grp = (const char *)src + (size_t)(n / MF_X8_ROWS) * MF_X8_ROWS * rs;
    if (x8_type == MF_TYPE_Q4_0_X8) {
        const mf_block_q4_0x8 *x = (const mf_block_q4_0x8 *)grp;
        mf_block_q4_0 *o = dst_row;
        for (int64_t b = 0; b < nb; b++) {
            o[b].d = x[b].d[r];
            for (int c = 0; c < 4; c++) memcpy(&o[b].qs[4 * c], &x[b].qs[32 * c + 4 * r], 4);
        }
        return 0;
    }
    if (x8_type == MF_TYPE_Q8_0_X8) {
        const mf_block_q8_0x8 *x = (const mf_block_q8_0x8 *)grp;
        mf_block_q8_0 *o = dst_row;
        for (int64_t b = 0; b < nb; b++) {
            o[b].d = x[b].d[r];
            for (int c = 0; c < 8; c++) memcpy(&o[b].qs[4 * c], &x[b].qs[32 * c + 4 * r], 4);
        }
        return 0;
    }
    return MF_E_INVAL;
}

/* ---- reference kernels (the tile contract of quant.h with nw = 8 rows of one group) ---- */

void mf_tile_q4_0x8_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                           size_t a_stride, int na) {
    (void)w_stride;
    const mf_block_q4_0x8 *x = w;
    for (int j = 0; j < na; j++) {
        const mf_block_q8_0 *y = (const mf_block_q8_0 *)((const char *)a + (size_t)j * a_stride);
        for (int r = 0; r < nw && r < MF_X8_ROWS; r++) {
            float acc = 0;
            for (int64_t b = 0; b < n / MF_QK8_0; b++) {
                int32_t isum = 0;
                for (int c = 0; c < 4; c++)
                    for (int t = 0; t < 4; t++) {
                        const uint8_t q = x[b].qs[32 * c + 4 * r + t];
                        isum += ((q & 0xF) - 8) * y[b].qs[4 * c + t] + ((q >> 4) - 8) * y[b].qs[16 + 4 * c + t];
                    }
                acc = fmaf((float)isum, mf_fp16_to_fp32(x[b].d[r]) * mf_fp16_to_fp32(y[b].d), acc);
            }
            s[(size_t)r * ldc + j] = acc;
        }
    }
}

void mf_tile_q8_0x8_scalar(int64_t n, float *s, size_t ldc, const void *w, size_t w_stride, int nw, const void *a,
                           size_t a_stride, int na) {
    (void)w_stride;
    const mf_block_q8_0x8 *x = w;
    for (int j = 0; j < na; j++) {
        const mf_block_q8_0 *y = (const mf_block_q8_0 *)((const char *)a + (size_t)j * a_stride);
        for (int r = 0; r < nw && r < MF_X8_ROWS; r++) {
            float acc = 0;
            for (int64_t b = 0; b < n / MF_QK8_0; b++) {
                int32_t isum = 0;
                for (int c = 0; c < 8; c++)
                    for (int t = 0; t < 4; t++) isum += x[b].qs[32 * c + 4 * r + t] * y[b].qs[4 * c + t];
                acc = fmaf((float)isum, mf_fp16_to_fp32(x[b].d[r]) * mf_fp16_to_fp32(y[b].d), acc);
            }
            s[(size_t)r * ldc + j] = acc;
        }
    }
}
