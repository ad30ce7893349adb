/* MATMUL and GET_ROWS on CUDA for F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
 * IQ4_NL, IQ4_XS and the grid types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S weights in the file's layout.
 * The grid types read their lattice tables from device memory that mf_cuda_matmul_init fills.  out[m][n] = dot(w_n, x_m); the per-block math is qmath.h's (tested on the host).
 *
 * THE CANONICAL ORDER (batch invariance: every output element is bitwise the same whatever M is and
 * whatever the other rows hold, in the decode kernel and the prefill kernel alike):
 *   1. Activations (quantized weight types): each activation row is quantized once per node, by itself,
 *      unit by unit (32 values -> 32 int8, f32 scale d = amax / 127, exact level sum): nothing in it
 *      depends on another row (k_quantize_act, or for one token inside k_mmv1_q: the same function).
 *   2. A weight row of K elements is J = K / 32 units (a block, or a 32-element sub-block of a K-quant
 *      super-block).  Unit j's value v_j = d_a * (a * I - b * s_a) from the EXACT int32 dot I
 *      (qmath.h); integer sums are exact, so which thread adds which product does not matter.
 *      Float weights: v_j = (p0 + p1) + (p2 + p3), p_t the fmaf chain over quarter t's 8 elements.
 *   3. K is cut into 8 SLICES by unit index: slice s = units s, s + 8, s + 16, ...; each slice is summed
 *      in that order from 0.0f, one IEEE add per unit.
 *   4. The 8 slice sums are combined by the fixed tree ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))
 *      (mf_qm_tree8: an xor butterfly over 4, 2, 1).
 * The decode kernel (mmv: M <= 8) runs slice s in lane group s of a warp (4 lanes a unit, one quarter each,
 * the int sum joined by shuffles) and the tree as a butterfly over lane groups; the prefill kernel (mmq:
 * M > 8) runs slice s in lane s of each group of 8 lanes over a shared-memory tile and the tree as a
 * butterfly over those lanes.  Neither the tile nor the number of columns in flight changes any of 1-4,
 * and every float step is a separate __fmul_rn/__fadd_rn/__fsub_rn (nvcc would otherwise contract a
 * multiply and an add into an FMA in one kernel and not in the other), so both give the bits of the host
 * model mf_qm_row_dot_q / mf_qm_row_dot_f.
 * Why this order: 8 slices give a decode warp 8 units (32 lanes) in flight per row, and the slice of a
 * unit is fixed by its index alone, so a tile of any shape can follow it. */
extern "C" {
#include "core/core.h"
#include "graph/graph.h"
#include "quant/quant.h"
}
#include "backend/cuda/ops.h"
#include "backend/cuda/qmath.h"

#include <cuda_runtime.h>

#include <stdint.h>

#define FULL_MASK 0xffffffffu

/* ---- activation quantizer: one warp per unit, lane i = element i ---- */

/* byte offset of activation row m of a [K, ne1, ne2, ne3] tensor with strides nb1..nb3 */
__device__ static inline size_t act_row_offs(int64_t m, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t nb3) {
    const int64_t i1 = m % ne1, i2 = (m / ne1) % ne2, i3 = m / (ne1 * ne2);
    return (size_t)i1 * nb1 + (size_t)i2 * nb2 + (size_t)i3 * nb3;
}

/* One unit quantized by one warp (lane = element): mf_qm_quantize_unit's values, since the max and the int
 * sum are exact in any order. */
__device__ static inline void quantize_unit_warp(float v, int lane, int8_t *q_out, mf_qm_act *d_out) {
    float amax = fabsf(v);
    for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(FULL_MASK, amax, off));
    const float d = mf_qm_act_scale(amax), id = mf_qm_act_inv(d);
    const int q = mf_qm_act_level(v, id);
    int s = q;
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(FULL_MASK, s, off);
    q_out[lane] = (int8_t)q;
    if (lane == 0) {
        mf_qm_act a;
        a.d = d, a.s = s;
        *d_out = a;
    }
}

#define QA_WARPS 8
__global__ void __launch_bounds__(QA_WARPS * 32)
k_quantize_act(const char *__restrict__ x, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t nb3, int64_t M,
               int64_t K, int J, int8_t *__restrict__ aq, mf_qm_act *__restrict__ ad) {
    const int lane = threadIdx.x & 31;
    const int j = blockIdx.x * QA_WARPS + (threadIdx.x >> 5);
    if (j >= J) return; /* whole warp */
    for (int64_t m = blockIdx.y; m < M; m += gridDim.y) {
        const float v = ((const float *)(x + act_row_offs(m, ne1, ne2, nb1, nb2, nb3)))[(int64_t)MF_QM_UNIT * j + lane];
        quantize_unit_warp(v, lane, aq + m * K + (int64_t)MF_QM_UNIT * j, ad + m * J + j);
    }
}

/* ---- decode: matrix-vector products for up to NC activation columns ----
 * A block is MMV_WARPS warps, a warp MMV_ROWS weight rows; lane = 4 g + t works on quarter t of units
 * g, g + 8, ... (slice g).  Loads: the 4 lanes of a unit read its 32 quant bytes side by side, so a warp
 * instruction covers 8 consecutive blocks of a row. */
#define MMV_WARPS 4
#define MMV_ROWS 1 /* a row is at most 32 lanes of work (8 slices x 4 quarters), so small-N matrices (the
                    * FFN down projection's 896 rows of 4864) get their parallelism from one row per warp */

/* rows n0 .. n0 + MMV_ROWS - 1 of one warp against activation columns m0 .. m0 + NC - 1 (aq/ad: global or
 * shared memory, row m at m * K / m * J) */
template <int T, int NC>
__device__ static inline void mmv_q_warp(const uint8_t *__restrict__ w, size_t ws, int64_t N, int J,
                                         const int8_t *aq, const mf_qm_act *ad, int64_t M, int64_t K,
                                         float *__restrict__ out, int64_t n0, int64_t m0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const unsigned gmask = 0xFu << (lane & ~3);
    float acc[MMV_ROWS][NC];
#pragma unroll
    for (int r = 0; r < MMV_ROWS; r++)
#pragma unroll
        for (int m = 0; m < NC; m++) acc[r][m] = 0.0f;

#pragma unroll 4 /* lets the next units' loads go out before this unit's adds */
    for (int j = g; j < J; j += MF_QM_SLICES) { /* the 4 lanes of a group take the same trips */
        int32_t a0[NC], a1[NC];
        mf_qm_act ax[NC];
#pragma unroll
        for (int m = 0; m < NC; m++) {
            a0[m] = a1[m] = 0;
            ax[m].d = 0.0f, ax[m].s = 0;
            if (m0 + m < M) {
                const int2 v = *(const int2 *)(aq + (m0 + m) * K + (int64_t)MF_QM_UNIT * j + 8 * t);
                a0[m] = v.x, a1[m] = v.y;
                ax[m] = ad[(m0 + m) * J + j];
            }
        }
#pragma unroll
        for (int r = 0; r < MMV_ROWS; r++) {
            if (n0 + r >= N) break; /* whole warp */
            const uint8_t *row = w + (size_t)(n0 + r) * ws;
            int32_t w0, w1;
            mf_qm_quarter(T, row, j, t, &w0, &w1);
            const mf_qm_unit u = mf_qm_unit_params(T, row, j);
#pragma unroll
            for (int m = 0; m < NC; m++) {
                if (m0 + m >= M) break; /* whole warp */
                int isum = mf_qm_quarter_isum(&u, t, w0, w1, a0[m], a1[m]);
                isum += __shfl_xor_sync(gmask, isum, 1);
                isum += __shfl_xor_sync(gmask, isum, 2);
                int sa = ax[m].s;
                if (mf_qm_half_mins(T)) { /* Q2_K: the min integer over the group's quarters too */
                    sa = mf_qm_quarter_msum(&u, t, a0[m], a1[m]);
                    sa += __shfl_xor_sync(gmask, sa, 1);
                    sa += __shfl_xor_sync(gmask, sa, 2);
                }
                acc[r][m] = mf_hd_add(acc[r][m], mf_qm_unit_value(&u, isum, ax[m].d, sa));
            }
        }
    }
#pragma unroll
    for (int r = 0; r < MMV_ROWS; r++)
#pragma unroll
        for (int m = 0; m < NC; m++) {
            float v = acc[r][m]; /* slice g's sum (the same in the group's 4 lanes) */
            v = mf_hd_add(v, __shfl_xor_sync(FULL_MASK, v, 16));
            v = mf_hd_add(v, __shfl_xor_sync(FULL_MASK, v, 8));
            v = mf_hd_add(v, __shfl_xor_sync(FULL_MASK, v, 4));
            if (lane == 0 && n0 + r < N && m0 + m < M) out[(m0 + m) * N + n0 + r] = v;
        }
}

template <int T, int NC>
__global__ void __launch_bounds__(MMV_WARPS * 32)
k_mmv_q(const uint8_t *__restrict__ w, size_t ws, int64_t N, int J, const int8_t *__restrict__ aq,
        const mf_qm_act *__restrict__ ad, int64_t M, int64_t K, float *__restrict__ out) {
    const int64_t n0 = ((int64_t)blockIdx.x * MMV_WARPS + (threadIdx.x >> 5)) * MMV_ROWS;
    if (n0 >= N) return; /* whole warp */
    mmv_q_warp<T, NC>(w, ws, N, J, aq, ad, M, K, out, n0, (int64_t)blockIdx.y * NC);
}

/* Decode of one token (M == 1, K <= MMV1_KMAX): each block quantizes the activation row into shared memory
 * itself (the same values as k_quantize_act: the same function per unit) instead of a separate launch -
 * a decode step runs ~170 matmuls, and a launch costs more than re-quantizing a few KiB from L2.  Above
 * MMV1_KMAX (8 units a warp) re-quantizing in every block would cost more than the launch. */
#define MMV1_WARPS 8
#define MMV1_KMAX 2048
template <int T>
__global__ void __launch_bounds__(MMV1_WARPS * 32)
k_mmv1_q(const uint8_t *__restrict__ w, size_t ws, int64_t N, int J, int64_t K, const float *__restrict__ x,
         float *__restrict__ out) {
    __shared__ __align__(16) int8_t sq[MMV1_KMAX];
    __shared__ mf_qm_act sd[MMV1_KMAX / MF_QM_UNIT];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int j = warp; j < J; j += MMV1_WARPS)
        quantize_unit_warp(x[(int64_t)MF_QM_UNIT * j + lane], lane, sq + MF_QM_UNIT * j, sd + j);
    __syncthreads();
    const int64_t n0 = ((int64_t)blockIdx.x * MMV1_WARPS + warp) * MMV_ROWS;
    if (n0 >= N) return; /* whole warp, after the block's only barrier */
    mmv_q_warp<T, 1>(w, ws, N, J, sq, sd, 1, K, out, n0, 0);
}

/* Float weights (every M: they are not the models' hot path, and one kernel keeps the order trivially
 * the same): the same lanes and slices, x read in place (row m at its strides). */
template <int T, int NC>
__global__ void __launch_bounds__(MMV_WARPS * 32)
k_mmv_f(const uint8_t *__restrict__ w, size_t ws, int64_t N, int64_t K, const char *__restrict__ x, int64_t ne1,
        int64_t ne2, size_t nb1, size_t nb2, size_t nb3, int64_t M, float *__restrict__ out) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const unsigned gmask = 0xFu << (lane & ~3);
    const int64_t n0 = ((int64_t)blockIdx.x * MMV_WARPS + (threadIdx.x >> 5)) * MMV_ROWS;
    const int64_t m0 = (int64_t)blockIdx.y * NC;
    const int J = (int)((K + MF_QM_UNIT - 1) / MF_QM_UNIT);
    if (n0 >= N) return;
    const float *xr[NC];
    float acc[MMV_ROWS][NC];
#pragma unroll
    for (int m = 0; m < NC; m++) {
        xr[m] = m0 + m < M ? (const float *)(x + act_row_offs(m0 + m, ne1, ne2, nb1, nb2, nb3)) : NULL;
#pragma unroll
        for (int r = 0; r < MMV_ROWS; r++) acc[r][m] = 0.0f;
    }
    for (int j = g; j < J; j += MF_QM_SLICES) {
#pragma unroll
        for (int r = 0; r < MMV_ROWS; r++) {
            if (n0 + r >= N) break;
            float wv[8];
            mf_qm_quarter_f(T, w + (size_t)(n0 + r) * ws, j, t, K, wv);
#pragma unroll
            for (int m = 0; m < NC; m++) {
                if (m0 + m >= M) break;
                float xv[8];
                mf_qm_quarter_x(xr[m], j, t, K, xv);
                float p = mf_qm_fdot8(wv, xv);
                p = mf_hd_add(p, __shfl_xor_sync(gmask, p, 1)); /* (p0 + p1) + (p2 + p3): mf_qm_tree4 */
                p = mf_hd_add(p, __shfl_xor_sync(gmask, p, 2));
                acc[r][m] = mf_hd_add(acc[r][m], p);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < MMV_ROWS; r++)
#pragma unroll
        for (int m = 0; m < NC; m++) {
            float v = acc[r][m];
            v = mf_hd_add(v, __shfl_xor_sync(FULL_MASK, v, 16));
            v = mf_hd_add(v, __shfl_xor_sync(FULL_MASK, v, 8));
            v = mf_hd_add(v, __shfl_xor_sync(FULL_MASK, v, 4));
            if (lane == 0 && n0 + r < N && m0 + m < M) out[(m0 + m) * N + n0 + r] = v;
        }
}

/* ---- prefill: a tile of MMQ_TN weight rows x MMQ_TM activation rows, K walked in chunks of 8 units ----
 * Unit u of a chunk is slice u, so thread (s = tid & 7, r = tid >> 3) computes slice s of its outputs:
 * weight rows rn + 16 i (i < 4, rn = r & 15) x activation rows rm + 2 k (k < 16, rm = r >> 4).  Shared
 * memory holds the chunk's decoded levels as words, word w (0..7) of unit u at [row][8 w + u], so the 8
 * slice lanes read 8 consecutive banks; weight rows are MMQ_WSTRIDE = 72 words apart, which puts the 4
 * weight rows of a warp 8 banks apart (no conflict); a warp's activation reads are broadcasts. */
#define MMQ_TN 64
#define MMQ_TM 32
#define MMQ_THREADS 256
#define MMQ_WSTRIDE 72
#define MMQ_ASTRIDE 64

static_assert(MMQ_TN * 32 == 8 * MMQ_THREADS && MMQ_TN * 8 == 2 * MMQ_THREADS && MMQ_TM * 64 == 8 * MMQ_THREADS &&
                  MMQ_TM * 8 == MMQ_THREADS,
              "mmq_fetch/mmq_store hand out the tile's pieces in these counts per thread");

/* One thread's share of a chunk's tile, fetched from global memory into registers while the previous chunk
 * is computed (its loads then overlap that work), and stored to shared memory after the next barrier. */
typedef struct {
    int32_t w[16];  /* 8 quarters (row, unit, quarter) = (i >> 5, (i >> 2) & 7, i & 3), i = tid + 256 it */
    mf_qm_unit u[2]; /* (row, unit) = (i >> 3, i & 7) */
    int32_t a[8];   /* activation words (row, word) = (i >> 6, i & 63) */
    mf_qm_act d;    /* (row, unit) = (tid >> 3, tid & 7) */
} mmq_stage;

template <int T>
__device__ static inline void mmq_fetch(mmq_stage *st, int c, int tid, const uint8_t *__restrict__ w, size_t ws,
                                        int64_t N, int J, const int8_t *__restrict__ aq,
                                        const mf_qm_act *__restrict__ ad, int64_t M, int64_t K, int64_t n0,
                                        int64_t m0) {
#pragma unroll
    for (int it = 0; it < 8; it++) {
        const int i = tid + it * MMQ_THREADS, row = i >> 5, u = (i >> 2) & 7, q = i & 3, j = c * MF_QM_SLICES + u;
        st->w[2 * it] = st->w[2 * it + 1] = 0;
        if (n0 + row < N && j < J) mf_qm_quarter(T, w + (size_t)(n0 + row) * ws, j, q, &st->w[2 * it], &st->w[2 * it + 1]);
    }
#pragma unroll
    for (int it = 0; it < 2; it++) {
        const int i = tid + it * MMQ_THREADS, row = i >> 3, u = i & 7, j = c * MF_QM_SLICES + u;
        st->u[it].a = 0.0f, st->u[it].b = 0.0f, st->u[it].s0 = 0, st->u[it].s1 = 0, st->u[it].m0 = 0, st->u[it].m1 = 0;
        if (n0 + row < N && j < J) st->u[it] = mf_qm_unit_params(T, w + (size_t)(n0 + row) * ws, j);
    }
#pragma unroll
    for (int it = 0; it < 8; it++) {
        const int i = tid + it * MMQ_THREADS, row = i >> 6, k = i & 63, u = k >> 3, wd = k & 7, j = c * MF_QM_SLICES + u;
        st->a[it] = m0 + row < M && j < J ? *(const int32_t *)(aq + (m0 + row) * K + (int64_t)MF_QM_UNIT * j + 4 * wd) : 0;
    }
    {
        const int row = tid >> 3, u = tid & 7, j = c * MF_QM_SLICES + u;
        st->d.d = 0.0f, st->d.s = 0;
        if (m0 + row < M && j < J) st->d = ad[(m0 + row) * J + j];
    }
}

__device__ static inline void mmq_store(const mmq_stage *st, int tid, int32_t *sw, mf_qm_unit *su, int32_t *sa,
                                        mf_qm_act *sd) {
#pragma unroll
    for (int it = 0; it < 8; it++) {
        const int i = tid + it * MMQ_THREADS, row = i >> 5, u = (i >> 2) & 7, q = i & 3;
        sw[row * MMQ_WSTRIDE + 8 * (2 * q) + u] = st->w[2 * it];
        sw[row * MMQ_WSTRIDE + 8 * (2 * q + 1) + u] = st->w[2 * it + 1];
    }
#pragma unroll
    for (int it = 0; it < 2; it++) su[tid + it * MMQ_THREADS] = st->u[it]; /* [row * 8 + unit] */
#pragma unroll
    for (int it = 0; it < 8; it++) {
        const int i = tid + it * MMQ_THREADS, row = i >> 6, k = i & 63;
        sa[row * MMQ_ASTRIDE + 8 * (k & 7) + (k >> 3)] = st->a[it];
    }
    sd[tid] = st->d; /* [row * 8 + unit] */
}

template <int T>
__global__ void __launch_bounds__(MMQ_THREADS)
k_mmq(const uint8_t *__restrict__ w, size_t ws, int64_t N, int J, const int8_t *__restrict__ aq,
      const mf_qm_act *__restrict__ ad, int64_t M, int64_t K, float *__restrict__ out) {
    __shared__ int32_t sw[MMQ_TN * MMQ_WSTRIDE];
    __shared__ mf_qm_unit su[MMQ_TN * MF_QM_SLICES];
    __shared__ int32_t sa[MMQ_TM * MMQ_ASTRIDE];
    __shared__ mf_qm_act sd[MMQ_TM * MF_QM_SLICES];
    const int tid = threadIdx.x, s = tid & 7, r = tid >> 3, rn = r & 15, rm = r >> 4;
    const int64_t n0 = (int64_t)blockIdx.x * MMQ_TN, m0 = (int64_t)blockIdx.y * MMQ_TM;
    float acc[4][16];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int k = 0; k < 16; k++) acc[i][k] = 0.0f;

    const int chunks = (J + MF_QM_SLICES - 1) / MF_QM_SLICES;
    mmq_stage st;
    mmq_fetch<T>(&st, 0, tid, w, ws, N, J, aq, ad, M, K, n0, m0);
    for (int c = 0; c < chunks; c++) {
        __syncthreads(); /* the previous chunk's reads of shared memory are done */
        mmq_store(&st, tid, sw, su, sa, sd);
        __syncthreads();
        if (c + 1 < chunks) mmq_fetch<T>(&st, c + 1, tid, w, ws, N, J, aq, ad, M, K, n0, m0);
        if (c * MF_QM_SLICES + s >= J) continue; /* no unit of slice s in the last chunk: it adds nothing */
        int32_t wv[4][8];
        mf_qm_unit up[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int n = rn + 16 * i;
#pragma unroll
            for (int wd = 0; wd < 8; wd++) wv[i][wd] = sw[n * MMQ_WSTRIDE + 8 * wd + s];
            up[i] = su[n * MF_QM_SLICES + s];
        }
#pragma unroll
        for (int k = 0; k < 16; k++) {
            const int m = rm + 2 * k;
            int32_t av[8];
#pragma unroll
            for (int wd = 0; wd < 8; wd++) av[wd] = sa[m * MMQ_ASTRIDE + 8 * wd + s];
            const mf_qm_act a = sd[m * MF_QM_SLICES + s];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int isum = mf_qm_unit_isum(&up[i], wv[i], av); /* exact: the decode kernel's I */
                const int sa = mf_qm_half_mins(T) ? mf_qm_unit_msum(&up[i], av) : a.s;
                acc[i][k] = mf_hd_add(acc[i][k], mf_qm_unit_value(&up[i], isum, a.d, sa));
            }
        }
    }
    /* the tree over the 8 slices: lanes s = 0..7 of each group of 8 (s^4, s^2, s^1: mf_qm_tree8) */
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int k = 0; k < 16; k++) {
            float v = acc[i][k];
            v = mf_hd_add(v, __shfl_xor_sync(FULL_MASK, v, 4));
            v = mf_hd_add(v, __shfl_xor_sync(FULL_MASK, v, 2));
            v = mf_hd_add(v, __shfl_xor_sync(FULL_MASK, v, 1));
            const int64_t n = n0 + rn + 16 * i, m = m0 + rm + 2 * k;
            if (s == (k & 7) && n < N && m < M) out[m * N + n] = v; /* the 8 lanes share the stores */
        }
}

/* ---- get_rows: one block per id, a thread per quarter (8 floats) ---- */
template <int T>
__global__ void __launch_bounds__(128)
k_get_rows(const uint8_t *__restrict__ tab, size_t ts, int64_t R, const int32_t *__restrict__ ids, int64_t n_ids,
           int64_t K, char *__restrict__ out, size_t onb1) {
    const int J = (int)((K + MF_QM_UNIT - 1) / MF_QM_UNIT);
    for (int64_t r = blockIdx.x; r < n_ids; r += gridDim.x) {
        const int32_t id = ids[r];
        float *y = (float *)(out + (size_t)r * onb1);
        /* an id out of range gives a zero row (the CPU reports it; the host checks ids before they get here) */
        const bool ok = id >= 0 && id < R;
        for (int q = threadIdx.x; q < 4 * J; q += blockDim.x) {
            const int j = q >> 2, t = q & 3;
            float v[8];
            if (ok)
                mf_qm_dequant8(T, tab + (size_t)id * ts, j, t, K, v);
            else
                for (int i = 0; i < 8; i++) v[i] = 0.0f;
            const int64_t e = (int64_t)MF_QM_UNIT * j + 8 * t;
            for (int i = 0; i < 8; i++)
                if (e + i < K) y[e + i] = v[i];
        }
    }
}

/* ---- host side ---- */

/* mf_cuda_matmul_supports / mf_cuda_get_rows_supports: support.c (compiled into every build) */

#define SUPPORTED_LIST                                                                                   \
    "f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, iq2_xxs, iq2_xs, " \
    "iq2_s, iq3_xxs, iq3_s"

/* calls F<T>(args) for the weight type t (one of SUPPORTED_LIST) */
#define DISPATCH_Q(t, F, ...)                                                                            \
    switch (t) {                                                                                         \
    case MF_TYPE_Q4_0: F<MF_TYPE_Q4_0>(__VA_ARGS__); break;                                              \
    case MF_TYPE_Q4_1: F<MF_TYPE_Q4_1>(__VA_ARGS__); break;                                              \
    case MF_TYPE_Q5_0: F<MF_TYPE_Q5_0>(__VA_ARGS__); break;                                              \
    case MF_TYPE_Q5_1: F<MF_TYPE_Q5_1>(__VA_ARGS__); break;                                              \
    case MF_TYPE_Q8_0: F<MF_TYPE_Q8_0>(__VA_ARGS__); break;                                              \
    case MF_TYPE_Q4_K: F<MF_TYPE_Q4_K>(__VA_ARGS__); break;                                              \
    case MF_TYPE_Q5_K: F<MF_TYPE_Q5_K>(__VA_ARGS__); break;                                              \
    case MF_TYPE_Q6_K: F<MF_TYPE_Q6_K>(__VA_ARGS__); break;                                              \
    case MF_TYPE_Q2_K: F<MF_TYPE_Q2_K>(__VA_ARGS__); break;                                              \
    case MF_TYPE_Q3_K: F<MF_TYPE_Q3_K>(__VA_ARGS__); break;                                              \
    case MF_TYPE_IQ4_NL: F<MF_TYPE_IQ4_NL>(__VA_ARGS__); break;                                          \
    case MF_TYPE_IQ4_XS: F<MF_TYPE_IQ4_XS>(__VA_ARGS__); break;                                          \
    case MF_TYPE_IQ2_XXS: F<MF_TYPE_IQ2_XXS>(__VA_ARGS__); break;                                        \
    case MF_TYPE_IQ2_XS: F<MF_TYPE_IQ2_XS>(__VA_ARGS__); break;                                          \
    case MF_TYPE_IQ2_S: F<MF_TYPE_IQ2_S>(__VA_ARGS__); break;                                            \
    case MF_TYPE_IQ3_XXS: F<MF_TYPE_IQ3_XXS>(__VA_ARGS__); break;                                        \
    case MF_TYPE_IQ3_S: F<MF_TYPE_IQ3_S>(__VA_ARGS__); break;                                            \
    default: break;                                                                                      \
    }
#define DISPATCH_F(t, F, ...)                                                                            \
    switch (t) {                                                                                         \
    case MF_TYPE_F32: F<MF_TYPE_F32>(__VA_ARGS__); break;                                                \
    case MF_TYPE_F16: F<MF_TYPE_F16>(__VA_ARGS__); break;                                                \
    case MF_TYPE_BF16: F<MF_TYPE_BF16>(__VA_ARGS__); break;                                              \
    default: break;                                                                                      \
    }

typedef struct {
    const uint8_t *w;
    size_t ws;
    int64_t N, K, M;
    int J;
    const char *x;
    int64_t ne1, ne2;
    size_t nb1, nb2, nb3;
    const int8_t *aq;
    const mf_qm_act *ad;
    float *out;
    cudaStream_t st;
} mm_args;

/* the decode kernel for M <= 8 (NC = the smallest of 1, 2, 4, 8 that holds M) or, for float weights, every M
 * in groups of 8 columns */
template <int T, int NC>
static void launch_mmv_q_nc(const mm_args *a) {
    const dim3 grid((unsigned)((a->N + MMV_WARPS * MMV_ROWS - 1) / (MMV_WARPS * MMV_ROWS)), (unsigned)((a->M + NC - 1) / NC));
    k_mmv_q<T, NC><<<grid, MMV_WARPS * 32, 0, a->st>>>(a->w, a->ws, a->N, a->J, a->aq, a->ad, a->M, a->K, a->out);
}
template <int T>
static void launch_mmv1_q(const mm_args *a) {
    const unsigned grid = (unsigned)((a->N + MMV1_WARPS * MMV_ROWS - 1) / (MMV1_WARPS * MMV_ROWS));
    k_mmv1_q<T><<<grid, MMV1_WARPS * 32, 0, a->st>>>(a->w, a->ws, a->N, a->J, a->K, (const float *)a->x, a->out);
}
template <int T>
static void launch_mmv_q(const mm_args *a) {
    if (a->M <= 1)
        launch_mmv_q_nc<T, 1>(a);
    else if (a->M <= 2)
        launch_mmv_q_nc<T, 2>(a);
    else if (a->M <= 4)
        launch_mmv_q_nc<T, 4>(a);
    else
        launch_mmv_q_nc<T, 8>(a);
}
template <int T>
static void launch_mmq(const mm_args *a) {
    const dim3 grid((unsigned)((a->N + MMQ_TN - 1) / MMQ_TN), (unsigned)((a->M + MMQ_TM - 1) / MMQ_TM));
    k_mmq<T><<<grid, MMQ_THREADS, 0, a->st>>>(a->w, a->ws, a->N, a->J, a->aq, a->ad, a->M, a->K, a->out);
}
template <int T, int NC>
static void launch_mmv_f_nc(const mm_args *a) {
    const dim3 grid((unsigned)((a->N + MMV_WARPS * MMV_ROWS - 1) / (MMV_WARPS * MMV_ROWS)), (unsigned)((a->M + NC - 1) / NC));
    k_mmv_f<T, NC><<<grid, MMV_WARPS * 32, 0, a->st>>>(a->w, a->ws, a->N, a->K, a->x, a->ne1, a->ne2, a->nb1, a->nb2,
                                                       a->nb3, a->M, a->out);
}
template <int T>
static void launch_mmv_f(const mm_args *a) {
    if (a->M <= 1)
        launch_mmv_f_nc<T, 1>(a);
    else if (a->M <= 2)
        launch_mmv_f_nc<T, 2>(a);
    else if (a->M <= 4)
        launch_mmv_f_nc<T, 4>(a);
    else
        launch_mmv_f_nc<T, 8>(a);
}

/* The grid tables' device copies (qmath.h) from src/quant's host arrays, on the pool's stream: every kernel
 * of that stream runs after the copies, and the synchronization here reports a failed copy now, naming it,
 * rather than as a wrong result later.  Each pool writes the same bytes, so a second pool's copy does not
 * change what a running kernel of the first reads. */
static int upload(const void *sym, const void *src, size_t bytes, const char *name, cudaStream_t st, mf_error *err) {
    const cudaError_t e = cudaMemcpyToSymbolAsync(sym, src, bytes, 0, cudaMemcpyHostToDevice, st);
    if (e == cudaSuccess) return 0;
    (void)cudaGetLastError();
    return mf_err(err, MF_E_BACKEND, "cudaMemcpyToSymbolAsync of the %s lattice table (%zu bytes) failed: %s (%d: %s)",
                  name, bytes, cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
}

extern "C" int mf_cuda_matmul_init(void *stream, mf_error *err) {
    const cudaStream_t st = (cudaStream_t)stream;
    int rc;
    if ((rc = upload(mf_qm_dev_iq2xxs_grid, mf_iq2xxs_grid, sizeof mf_iq2xxs_grid, "iq2_xxs", st, err)) ||
        (rc = upload(mf_qm_dev_iq2xs_grid, mf_iq2xs_grid, sizeof mf_iq2xs_grid, "iq2_xs", st, err)) ||
        (rc = upload(mf_qm_dev_iq2s_grid, mf_iq2s_grid, sizeof mf_iq2s_grid, "iq2_s", st, err)) ||
        (rc = upload(mf_qm_dev_iq3xxs_grid, mf_iq3xxs_grid, sizeof mf_iq3xxs_grid, "iq3_xxs", st, err)) ||
        (rc = upload(mf_qm_dev_iq3s_grid, mf_iq3s_grid, sizeof mf_iq3s_grid, "iq3_s", st, err)))
        return rc;
    const cudaError_t e = cudaStreamSynchronize(st);
    if (e == cudaSuccess) return 0;
    (void)cudaGetLastError();
    return mf_err(err, MF_E_BACKEND, "cudaStreamSynchronize after uploading the IQ lattice tables failed: %s (%d: %s)",
                  cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
}

#define MMV_MAX_COLS 8 /* decode kernel up to here, the tiled one above (quantized weights) */
#define GRID_Y_MAX 65535

extern "C" int mf_cuda_op_matmul(mf_cuda_ctx *c, const mf_node *n, mf_error *err) {
    const mf_node *w = mf_cuda_src(c, n, 0), *x = mf_cuda_src(c, n, 1);
    const int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1] * x->ne[2] * x->ne[3];
    if (!mf_cuda_matmul_supports(w->type))
        return mf_err(err, MF_E_UNSUPPORTED,
                      "CUDA matmul node '%s': weight '%s' is %s, which has no CUDA kernel (CUDA runs " SUPPORTED_LIST
                      "); keep this layer on the CPU (--gpu-layers)",
                      n->name, w->name, mf_type_name(w->type));
    if (x->type != MF_TYPE_F32 || x->nb[0] != sizeof(float) || !mf_node_is_contiguous(n) || n->ne[0] != N)
        return mf_err(err, MF_E_INVAL,
                      "CUDA matmul node '%s': input '%s' must be f32 with dense rows (type %s, nb0 %zu) and the result "
                      "contiguous [%lld, ...] (ne0 %lld)",
                      n->name, x->name, mf_type_name(x->type), x->nb[0], (long long)N, (long long)n->ne[0]);
    if (M == 0 || N == 0) return 0;
    const bool quant = mf_qm_type_quantized(w->type);
    if (quant && K % MF_QM_UNIT != 0) /* a quantized row is whole blocks, so this only guards a bad node */
        return mf_err(err, MF_E_INVAL, "CUDA matmul node '%s': K = %lld of %s weight '%s' is not a multiple of %d",
                      n->name, (long long)K, mf_type_name(w->type), w->name, MF_QM_UNIT);
    if ((K + MF_QM_UNIT - 1) / MF_QM_UNIT > INT32_MAX || (!quant && (M + MMV_MAX_COLS - 1) / MMV_MAX_COLS > GRID_Y_MAX) ||
        (quant && M > MMV_MAX_COLS && (M + MMQ_TM - 1) / MMQ_TM > GRID_Y_MAX))
        return mf_err(err, MF_E_UNSUPPORTED, "CUDA matmul node '%s': shape K %lld x M %lld is beyond the kernels' grid",
                      n->name, (long long)K, (long long)M);

    mm_args a;
    memset(&a, 0, sizeof a);
    a.w = (const uint8_t *)w->data, a.ws = w->nb[1], a.N = N, a.K = K, a.M = M;
    a.J = (int)((K + MF_QM_UNIT - 1) / MF_QM_UNIT);
    a.x = (const char *)x->data, a.ne1 = x->ne[1], a.ne2 = x->ne[2], a.nb1 = x->nb[1], a.nb2 = x->nb[2], a.nb3 = x->nb[3];
    a.out = (float *)n->data;
    a.st = (cudaStream_t)c->stream;

    if (!quant) {
        int rc = mf_cuda_pre_launch("mmv_f", n, err);
        if (rc) return rc;
        DISPATCH_F(w->type, launch_mmv_f, &a);
        return mf_cuda_launch_check("mmv_f", n, err);
    }

    if (M == 1 && K <= MMV1_KMAX) { /* decode: quantization inside the matmul kernel */
        int rc = mf_cuda_pre_launch("mmv1_q", n, err);
        if (rc) return rc;
        DISPATCH_Q(w->type, launch_mmv1_q, &a);
        return mf_cuda_launch_check("mmv1_q", n, err);
    }

    /* int8 activations: M * K levels, then M * J (scale, sum) pairs, 16-byte aligned */
    const size_t q_bytes = ((size_t)M * (size_t)K + 15) & ~(size_t)15;
    void *scratch = NULL;
    int rc = mf_cuda_scratch(c, q_bytes + (size_t)M * (size_t)a.J * sizeof(mf_qm_act), &scratch, err);
    if (rc) return rc;
    a.aq = (const int8_t *)scratch;
    a.ad = (const mf_qm_act *)((char *)scratch + q_bytes);

    if ((rc = mf_cuda_pre_launch("quantize_act", n, err))) return rc;
    const dim3 qgrid((unsigned)((a.J + QA_WARPS - 1) / QA_WARPS), (unsigned)(M < GRID_Y_MAX ? M : GRID_Y_MAX));
    k_quantize_act<<<qgrid, QA_WARPS * 32, 0, a.st>>>(a.x, a.ne1, a.ne2, a.nb1, a.nb2, a.nb3, M, K, a.J,
                                                     (int8_t *)a.aq, (mf_qm_act *)a.ad);
    if ((rc = mf_cuda_launch_check("quantize_act", n, err))) return rc;

    const char *kname = M <= MMV_MAX_COLS ? "mmv_q" : "mmq";
    if ((rc = mf_cuda_pre_launch(kname, n, err))) return rc;
    if (M <= MMV_MAX_COLS) {
        DISPATCH_Q(w->type, launch_mmv_q, &a);
    } else {
        DISPATCH_Q(w->type, launch_mmq, &a);
    }
    return mf_cuda_launch_check(kname, n, err);
}

template <int T>
static void launch_get_rows(const mm_args *a, const int32_t *ids, int64_t R, char *out, size_t onb1) {
    const unsigned blocks = (unsigned)(a->M < (1 << 20) ? a->M : (1 << 20));
    k_get_rows<T><<<blocks, 128, 0, a->st>>>(a->w, a->ws, R, ids, a->M, a->K, out, onb1);
}

extern "C" int mf_cuda_op_get_rows(mf_cuda_ctx *c, const mf_node *n, mf_error *err) {
    const mf_node *t = mf_cuda_src(c, n, 0), *ids = mf_cuda_src(c, n, 1);
    if (!mf_cuda_get_rows_supports(t->type))
        return mf_err(err, MF_E_UNSUPPORTED,
                      "CUDA get_rows node '%s': table '%s' is %s, which has no CUDA kernel (CUDA runs " SUPPORTED_LIST
                      "); keep the embeddings on the CPU",
                      n->name, t->name, mf_type_name(t->type));
    const int64_t K = t->ne[0], n_ids = ids->ne[0];
    if (n_ids == 0 || K == 0) return 0;
    mm_args a;
    memset(&a, 0, sizeof a);
    a.w = (const uint8_t *)t->data, a.ws = t->nb[1], a.K = K, a.M = n_ids, a.st = (cudaStream_t)c->stream;
    const int rc = mf_cuda_pre_launch("get_rows", n, err);
    if (rc) return rc;
    const int32_t *id = (const int32_t *)ids->data;
    char *out = (char *)n->data;
    switch (t->type) {
    case MF_TYPE_F32: launch_get_rows<MF_TYPE_F32>(&a, id, t->ne[1], out, n->nb[1]); break;
    case MF_TYPE_F16: launch_get_rows<MF_TYPE_F16>(&a, id, t->ne[1], out, n->nb[1]); break;
    case MF_TYPE_BF16: launch_get_rows<MF_TYPE_BF16>(&a, id, t->ne[1], out, n->nb[1]); break;
    default: DISPATCH_Q(t->type, launch_get_rows, &a, id, t->ne[1], out, n->nb[1]); break;
    }
    return mf_cuda_launch_check("get_rows", n, err);
}
