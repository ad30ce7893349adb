// The CUDA backend's ATTENTION over the KV spans (graph.h MF_OP_ATTENTION; the CPU form:
// backend/cpu/attention.c): q f32 [hd, n_head, n_tok], K/V caches [hd * n_head_kv, n_cells] in f32, f16 or
// q8_0, spans int32 {L, n_tok} then per query {offset, count} into the cell lists that follow in the same
// (device) buffer.  Head h reads kv head h / (n_head / n_head_kv).  hd 64 and 128.
//
// THE CANONICAL ORDER (batch invariance).  A query row (token t, head h) sees the cells list[0 .. count) of
// its span.  That list is cut into fixed chunks of kChunk = 64 cells: chunk c is list[64c .. 64c + 64).
// Chunk c of the row gives, by one fixed sequence of operations that reads only the row's own query and
// the chunk's cells:
//   s_j = mma_f16(q, k_j) * scale    (wmma 16x16x16, f16 inputs, f32 accumulation over hd in steps of 16)
//   m_c = max s_j,  p_j = e^(s_j - m_c) (emath.h's exp),  l_c = sum p_j (fixed warp butterfly),
//   o_c = mma_f16(f16(p), v)         (wmma, f32 accumulation over the 64 cells)
// and the chunks are merged in index order c = 0, 1, ... by mf_hd_att_merge / mf_hd_att_merge_o (emath.h)
// into (M, L, O), the output being O * (1 / L).
// Both launch forms use exactly that:
//   - prefill (att_tile_kernel, one CTA per tile of 16 rows): runs the chunks of its rows in order and
//     merges each as it goes;
//   - decode (n_tok <= kSplitMaxTok: the same kernel with gridDim.z > 1, "split-K"): CTA z computes the
//     chunks c = z, z + nsplit, ... and stores every chunk's (m_c, l_c, o_c); att_combine_kernel then
//     merges them in index order with the same two functions.
// Why a row's bits do not depend on the batch: its chunks are fixed by its own list, not by the launch; an
// mma's output element (i, j) depends only on row i of A and column j of B, so the other rows of a tile
// (other tokens, other heads of the group, zero padding) change nothing; cells past the row's count that a
// tile holds for longer rows get p = 0 and are left out of the max, so they add exact zeros to o_c; and the
// merge is one fixed chain per row.  Which form ran (split or not, how many CTAs) changes nothing either.
//
// Rows of one tile may belong to different sequences (a batch of several): a tile takes its rows in
// groups that share a list offset, one group at a time, every group with the same per-row arithmetic.
// A bad span or a cell id out of range gives a row of zeros (the CPU gives the same and records a fault).
extern "C" {
#include "core/core.h"
#include "graph/graph.h"
#include "quant/quant.h"
}
#include "backend/cuda/emath.h"
#include "backend/cuda/ops.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

namespace {

using namespace nvcuda;

constexpr int kRows = 16;       // query rows per tile (the mma's M)
constexpr int kChunk = 64;      // cells per chunk: THE unit of the canonical order
constexpr int kThreads = 128;   // 4 warps
constexpr int kSplitMaxTok = 4; // up to this many tokens: the split-K (decode) form

struct att_params {
    const char *q;
    long long q_nb1, q_nb2;
    const char *k, *v;
    long long k_nb1, v_nb1;
    int k_type, v_type;
    const int *spans;
    char *out;
    long long out_nb1;
    int n_tok, n_head, n_kv, grp, n_cells;
    float scale;
    float *part_ml; // split form: [n_tok * n_head][nchunk_max][4] = m, l, bad, -
    float *part_o;  // split form: [n_tok * n_head][nchunk_max][hd]
    int nchunk_max;
    int split; // the split-K form: every chunk's partial to part_*, att_combine_kernel merges
};

// query t's span: false when it cannot be used (the CPU's window_of checks, same order)
__device__ bool span_of(const att_params &p, int t, int *off, int *cnt) {
    const int *s = p.spans;
    if (s[1] != p.n_tok) return false;
    const long long L = s[0], o = s[2 + 2 * t], c = s[3 + 2 * t], hdr = 2LL * (p.n_tok + 1);
    if (c < 0 || c > p.n_cells) return false;
    if (o < hdr || o > L - c) return false;
    *off = (int)o;
    *cnt = (int)c;
    return true;
}

constexpr size_t al(size_t b) {
    return (b + 127) / 128 * 128;
}

// The dynamic shared memory of att_tile_kernel: every region 128-aligned (wmma wants 32-byte pointers); the
// leading dimensions padded off the bank stride, multiples of 8 halves / 4 floats as wmma requires.
template <int HD> struct tile_layout {
    static constexpr int QLD = HD + 8, KLD = HD + 8, VLD = HD + 8, SLD = kChunk + 4, PLD = kChunk + 8, OLD = HD + 4;
    static constexpr size_t q_off = 0;
    static constexpr size_t k_off = q_off + al(sizeof(__half) * kRows * QLD);
    static constexpr size_t v_off = k_off + al(sizeof(__half) * kChunk * KLD);
    static constexpr size_t s_off = v_off + al(sizeof(__half) * kChunk * VLD);
    static constexpr size_t p_off = s_off + al(sizeof(float) * kRows * SLD);
    static constexpr size_t bytes = p_off + al(sizeof(__half) * kRows * PLD);
    static_assert(sizeof(float) * kRows * OLD <= sizeof(__half) * kChunk * KLD, "o_c fits where the K tile was");
};

// One K or V tile: the kChunk cells of cells[] (-1: none, zeros) as f16 rows of HD, from the kv head's slice.
template <int HD>
__device__ void load_tile(__half *dst, int ld, const char *base, long long nb1, int type, int kvh, const int *cells) {
    if (type == MF_TYPE_Q8_0) {
        constexpr int nbk = HD / 32; // blocks per head slice
        for (int i = threadIdx.x; i < kChunk * nbk; i += kThreads) {
            const int key = i / nbk, blk = i % nbk, cl = cells[key];
            __half *d = dst + key * ld + blk * 32;
            if (cl < 0) {
                for (int j = 0; j < 32; j++) d[j] = __float2half_rn(0.0f);
                continue;
            }
            const uint16_t *b = (const uint16_t *)(base + cl * nb1 + (long long)(kvh * nbk + blk) * 34);
            const float sc = mf_hd_f16_to_f32(b[0]);
            for (int j = 0; j < 16; j++) { // the quants as 16 little-endian pairs (a block is 2-aligned)
                const uint16_t w = b[1 + j];
                d[2 * j] = __float2half_rn(__fmul_rn((float)(int8_t)(w & 0xFF), sc));
                d[2 * j + 1] = __float2half_rn(__fmul_rn((float)(int8_t)(w >> 8), sc));
            }
        }
    } else if (type == MF_TYPE_F16) {
        constexpr int nv = HD / 8; // 16-byte vectors per head slice
        for (int i = threadIdx.x; i < kChunk * nv; i += kThreads) {
            const int key = i / nv, part = i % nv, cl = cells[key];
            uint4 w = make_uint4(0, 0, 0, 0);
            if (cl >= 0) w = ((const uint4 *)(base + cl * nb1 + (long long)kvh * HD * 2))[part];
            *(uint4 *)(dst + key * ld + part * 8) = w;
        }
    } else { // f32: converted to f16 here
        constexpr int nv = HD / 8;
        for (int i = threadIdx.x; i < kChunk * nv; i += kThreads) {
            const int key = i / nv, part = i % nv, cl = cells[key];
            __align__(16) __half h[8];
            if (cl >= 0) {
                const float4 *src = (const float4 *)(base + cl * nb1 + (long long)kvh * HD * 4) + 2 * part;
                const float4 a = src[0], b = src[1];
                h[0] = __float2half_rn(a.x), h[1] = __float2half_rn(a.y), h[2] = __float2half_rn(a.z);
                h[3] = __float2half_rn(a.w), h[4] = __float2half_rn(b.x), h[5] = __float2half_rn(b.y);
                h[6] = __float2half_rn(b.z), h[7] = __float2half_rn(b.w);
            } else {
                for (int j = 0; j < 8; j++) h[j] = __float2half_rn(0.0f);
            }
            *(uint4 *)(dst + key * ld + part * 8) = *(const uint4 *)h;
        }
    }
}

// Grid: x = tile of kRows rows of one kv head's (token, head) pairs, y = kv head, z = split index (1 when
// the prefill form).  Row r of tile x: f = 16x + r, token f / grp, head kvh * grp + f % grp.
template <int HD> __global__ void __launch_bounds__(kThreads) att_tile_kernel(att_params p) {
    using TL = tile_layout<HD>;
    extern __shared__ __align__(128) unsigned char smem[];
    __half *Qs = (__half *)(smem + TL::q_off), *Ks = (__half *)(smem + TL::k_off), *Vs = (__half *)(smem + TL::v_off);
    float *Ss = (float *)(smem + TL::s_off), *Os = (float *)(smem + TL::k_off); // o_c reuses the K tile's space
    __half *Ps = (__half *)(smem + TL::p_off);
    __shared__ int r_t[kRows], r_h[kRows], r_off[kRows], r_cnt[kRows], r_state[kRows], r_bad[kRows], r_upd[kRows];
    __shared__ float r_M[kRows], r_L[kRows], r_a[kRows], r_b[kRows];
    __shared__ int cells[kChunk], keybad[kChunk];

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, kvh = blockIdx.y;
    const bool split = p.split != 0;
    if (tid < kRows) {
        const long long f = (long long)blockIdx.x * kRows + tid;
        const int t = (int)(f / p.grp);
        r_t[tid] = t < p.n_tok ? t : -1;
        r_h[tid] = kvh * p.grp + (int)(f % p.grp);
        int off = 0, cnt = 0;
        // state 1: waiting for its group; 2: done; 0: no attention (padding, bad span, empty window)
        r_state[tid] = t < p.n_tok && span_of(p, t, &off, &cnt) && cnt > 0 ? 1 : 0;
        r_off[tid] = off;
        r_cnt[tid] = cnt;
        r_bad[tid] = 0;
        r_M[tid] = -INFINITY;
        r_L[tid] = 0.0f;
    }
    __syncthreads();
    for (int e = tid; e < kRows * HD; e += kThreads) {
        const int r = e / HD, d = e % HD;
        float x = 0.0f;
        if (r_t[r] >= 0) x = *(const float *)(p.q + r_t[r] * p.q_nb2 + r_h[r] * p.q_nb1 + d * 4LL);
        Qs[r * TL::QLD + d] = __float2half_rn(x);
    }
    constexpr int kOwn = kRows * HD / kThreads; // output elements per thread: e = tid + kThreads * i
    float o[kOwn];
#pragma unroll
    for (int i = 0; i < kOwn; i++) o[i] = 0.0f;
    __syncthreads();

    for (;;) {
        // the next group: the rows waiting that share the first waiting row's list offset
        int lead = -1;
        for (int r = 0; r < kRows && lead < 0; r++)
            if (r_state[r] == 1) lead = r;
        if (lead < 0) break;
        const int goff = r_off[lead];
        int gmax = 0;
        for (int r = 0; r < kRows; r++)
            if (r_state[r] == 1 && r_off[r] == goff && r_cnt[r] > gmax) gmax = r_cnt[r];
        const int nch = (gmax + kChunk - 1) / kChunk;

        for (int c = blockIdx.z; c < nch; c += gridDim.z) {
            const int jb = c * kChunk;
            if (tid < kChunk) {
                int cl = -1, bad = 0;
                if (jb + tid < gmax) {
                    cl = p.spans[goff + jb + tid];
                    bad = cl < 0 || cl >= p.n_cells;
                    if (bad) cl = -1;
                }
                cells[tid] = cl;
                keybad[tid] = bad;
            }
            __syncthreads();
            load_tile<HD>(Ks, TL::KLD, p.k, p.k_nb1, p.k_type, kvh, cells);
            load_tile<HD>(Vs, TL::VLD, p.v, p.v_nb1, p.v_type, kvh, cells);
            __syncthreads();

            { // S = Q K^T: warp w the 16 columns 16w..16w+15, over hd in steps of 16
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
                wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
                wmma::fill_fragment(acc, 0.0f);
                for (int d0 = 0; d0 < HD; d0 += 16) {
                    wmma::load_matrix_sync(fa, Qs + d0, TL::QLD);
                    wmma::load_matrix_sync(fb, Ks + warp * 16 * TL::KLD + d0, TL::KLD);
                    wmma::mma_sync(acc, fa, fb, acc);
                }
                wmma::store_matrix_sync(Ss + warp * 16, acc, TL::SLD, wmma::mem_row_major);
            }
            __syncthreads();

            // the chunk's softmax per row: warp w rows 4w..4w+3, lane the columns lane and lane + 32
            for (int rr = 0; rr < kRows / 4; rr++) {
                const int r = warp * (kRows / 4) + rr;
                const bool upd = r_state[r] == 1 && r_off[r] == goff && jb < r_cnt[r];
                if (!upd) {
                    Ps[r * TL::PLD + lane] = __float2half_rn(0.0f);
                    Ps[r * TL::PLD + lane + 32] = __float2half_rn(0.0f);
                    if (lane == 0) r_upd[r] = 0;
                    continue;
                }
                const int nvalid = r_cnt[r] - jb; // >= 1
                const bool v0 = lane < nvalid, v1 = lane + 32 < nvalid;
                const float s0 = v0 ? __fmul_rn(Ss[r * TL::SLD + lane], p.scale) : -INFINITY;
                const float s1 = v1 ? __fmul_rn(Ss[r * TL::SLD + lane + 32], p.scale) : -INFINITY;
                float m = s0 > s1 ? s0 : s1;
                for (int w = 16; w > 0; w /= 2) {
                    const float x = __shfl_xor_sync(0xffffffffu, m, w);
                    m = x > m ? x : m;
                }
                const float p0 = v0 ? mf_hd_expf(s0 - m) : 0.0f, p1 = v1 ? mf_hd_expf(s1 - m) : 0.0f;
                float l = __fadd_rn(p0, p1);
                for (int w = 16; w > 0; w /= 2) l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, w));
                const int bad = __any_sync(0xffffffffu, (v0 && keybad[lane]) || (v1 && keybad[lane + 32]));
                Ps[r * TL::PLD + lane] = __float2half_rn(p0);
                Ps[r * TL::PLD + lane + 32] = __float2half_rn(p1);
                if (lane == 0) {
                    r_upd[r] = 1;
                    if (split) {
                        float *ml = p.part_ml + ((long long)(r_t[r] * p.n_head + r_h[r]) * p.nchunk_max + c) * 4;
                        ml[0] = m, ml[1] = l, ml[2] = bad ? 1.0f : 0.0f, ml[3] = 0.0f;
                    } else {
                        r_bad[r] |= bad;
                        float a, b;
                        mf_hd_att_merge(&r_M[r], &r_L[r], m, l, &a, &b);
                        r_a[r] = a;
                        r_b[r] = b;
                    }
                }
            }
            __syncthreads();

            { // o_c = P V: warp w the output columns 16w.. and 16(w + 4).., over the chunk's cells
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
                wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
                for (int db = warp; db < HD / 16; db += kThreads / 32) {
                    wmma::fill_fragment(acc, 0.0f);
                    for (int k0 = 0; k0 < kChunk; k0 += 16) {
                        wmma::load_matrix_sync(fa, Ps + k0, TL::PLD);
                        wmma::load_matrix_sync(fb, Vs + k0 * TL::VLD + db * 16, TL::VLD);
                        wmma::mma_sync(acc, fa, fb, acc);
                    }
                    wmma::store_matrix_sync(Os + db * 16, acc, TL::OLD, wmma::mem_row_major);
                }
            }
            __syncthreads();

#pragma unroll
            for (int i = 0; i < kOwn; i++) {
                const int e = tid + kThreads * i, r = e / HD, d = e % HD;
                if (!r_upd[r]) continue;
                const float oc = Os[r * TL::OLD + d];
                if (split)
                    p.part_o[((long long)(r_t[r] * p.n_head + r_h[r]) * p.nchunk_max + c) * HD + d] = oc;
                else
                    o[i] = mf_hd_att_merge_o(o[i], oc, r_a[r], r_b[r]);
            }
            __syncthreads(); // the next chunk overwrites cells, the tiles and r_upd
        }
        __syncthreads(); // every thread has read r_state for this group (the chunk loop may have run 0 times)
        if (tid < kRows && r_state[tid] == 1 && r_off[tid] == goff) r_state[tid] = 2;
        __syncthreads();
    }

    if (split) return; // att_combine_kernel writes the rows
#pragma unroll
    for (int i = 0; i < kOwn; i++) {
        const int e = tid + kThreads * i, r = e / HD, d = e % HD;
        if (r_t[r] < 0) continue;
        const float y = r_state[r] == 2 && !r_bad[r] ? mf_hd_att_out(o[i], r_L[r]) : 0.0f;
        *(float *)(p.out + r_t[r] * p.out_nb1 + (r_h[r] * HD + d) * 4LL) = y;
    }
}

// The split form's merge: one block of HD threads per row (t, h), the chunks in index order.
template <int HD> __global__ void __launch_bounds__(HD) att_combine_kernel(att_params p) {
    const int row = blockIdx.x, t = row / p.n_head, h = row % p.n_head, d = threadIdx.x;
    float *y = (float *)(p.out + t * p.out_nb1) + h * HD + d;
    int off = 0, cnt = 0;
    if (!span_of(p, t, &off, &cnt) || cnt == 0) {
        *y = 0.0f;
        return;
    }
    const int nch = (cnt + kChunk - 1) / kChunk;
    float M = -INFINITY, L = 0.0f, o = 0.0f;
    bool bad = false;
    for (int c = 0; c < nch; c++) {
        const float *ml = p.part_ml + ((long long)row * p.nchunk_max + c) * 4;
        float a, b;
        bad |= ml[2] != 0.0f;
        mf_hd_att_merge(&M, &L, ml[0], ml[1], &a, &b);
        o = mf_hd_att_merge_o(o, p.part_o[((long long)row * p.nchunk_max + c) * HD + d], a, b);
    }
    *y = bad ? 0.0f : mf_hd_att_out(o, L);
}

template <int HD> int launch(mf_cuda_ctx *c, const mf_node *n, att_params &p, mf_error *err) {
    const size_t smem = tile_layout<HD>::bytes;
    const char *kname = HD == 64 ? "att_tile_kernel<64>" : "att_tile_kernel<128>";
    const char *cname = HD == 64 ? "att_combine_kernel<64>" : "att_combine_kernel<128>";
    int rc;
    // (the kernel's static shared arrays take about 1.2 KiB on top)
    if (smem + 2048 > 48 * 1024 && (rc = mf_cuda_smem_optin((const void *)att_tile_kernel<HD>, kname, smem, n, err)))
        return rc;
    const long long rows_per_kv = (long long)p.n_tok * p.grp;
    const unsigned tiles = (unsigned)((rows_per_kv + kRows - 1) / kRows);
    unsigned nsplit = 1;
    p.split = p.n_tok <= kSplitMaxTok;
    if (p.split) {
        // enough CTAs for the machine; more than the chunks would idle (the bits do not depend on it)
        const long long want = (2LL * (c->sm_count > 0 ? c->sm_count : 1) + tiles * p.n_kv - 1) / (tiles * p.n_kv);
        nsplit = (unsigned)(want < 1 ? 1 : want > p.nchunk_max ? p.nchunk_max : want);
        const size_t rows = (size_t)p.n_tok * p.n_head * p.nchunk_max;
        void *scratch = NULL;
        if ((rc = mf_cuda_scratch(c, rows * (4 + HD) * sizeof(float), &scratch, err))) return rc;
        p.part_ml = (float *)scratch;
        p.part_o = p.part_ml + rows * 4;
    }
    if ((rc = mf_cuda_pre_launch(kname, n, err))) return rc;
    att_tile_kernel<HD><<<dim3(tiles, p.n_kv, nsplit), kThreads, smem, (cudaStream_t)c->stream>>>(p);
    if ((rc = mf_cuda_launch_check(kname, n, err))) return rc;
    if (!p.split) return 0;
    if ((rc = mf_cuda_pre_launch(cname, n, err))) return rc;
    att_combine_kernel<HD><<<(unsigned)(p.n_tok * p.n_head), HD, 0, (cudaStream_t)c->stream>>>(p);
    return mf_cuda_launch_check(cname, n, err);
}

bool aligned16(const void *ptr, size_t nb1) {
    return ((uintptr_t)ptr % 16) == 0 && nb1 % 16 == 0;
}

} // namespace

extern "C" int mf_cuda_op_attention(mf_cuda_ctx *c, const mf_node *n, mf_error *err) {
    const mf_node *q = mf_cuda_src(c, n, 0), *k = mf_cuda_src(c, n, 1), *v = mf_cuda_src(c, n, 2),
                  *sp = mf_cuda_src(c, n, 3);
    const long long hd = q->ne[0], n_head = q->ne[1], n_tok = q->ne[2], n_kv = n->iparams[0];
    if (hd != 64 && hd != 128)
        return mf_err(err, MF_E_UNSUPPORTED,
                      "cuda attention: node '%s' has head size %lld; the CUDA kernels take 64 and 128 (run this model "
                      "on the CPU: --gpu-layers 0)",
                      n->name, hd);
    if (q->type != MF_TYPE_F32 || q->nb[0] != sizeof(float) || n->type != MF_TYPE_F32 || n->nb[0] != sizeof(float))
        return mf_err(err, MF_E_UNSUPPORTED, "cuda attention: node '%s': q and the output must be f32 rows", n->name);
    if (n_kv <= 0 || n_head % n_kv)
        return mf_err(err, MF_E_INVAL, "cuda attention: node '%s': %lld query heads do not group over %lld kv heads",
                      n->name, n_head, n_kv);
    const mf_node *kv[2] = {k, v};
    for (int i = 0; i < 2; i++) {
        if (!mf_cuda_kv_type_supports(kv[i]->type))
            return mf_err(err, MF_E_UNSUPPORTED,
                          "cuda attention: node '%s': %s cache type %s; the CUDA kernels read f32, f16 and q8_0 "
                          "(--cache-type-k/--cache-type-v)",
                          n->name, i ? "V" : "K", mf_type_name(kv[i]->type));
        if (kv[i]->ne[0] != hd * n_kv || kv[i]->ne[1] != k->ne[1])
            return mf_err(err, MF_E_INVAL, "cuda attention: node '%s': %s cache [%lld, %lld] does not hold %lld heads of %lld",
                          n->name, i ? "V" : "K", (long long)kv[i]->ne[0], (long long)kv[i]->ne[1], n_kv, hd);
        if (kv[i]->type != MF_TYPE_Q8_0 && !aligned16(kv[i]->data, kv[i]->nb[1]))
            return mf_err(err, MF_E_UNSUPPORTED,
                          "cuda attention: node '%s': %s cache rows are not 16-byte aligned (row stride %zu)", n->name,
                          i ? "V" : "K", kv[i]->nb[1]);
    }
    if (sp->type != MF_TYPE_I32 || sp->ne[1] != n_tok + 1)
        return mf_err(err, MF_E_INVAL, "cuda attention: node '%s': spans [%lld, %lld] for %lld tokens", n->name,
                      (long long)sp->ne[0], (long long)sp->ne[1], n_tok);
    if (n_tok == 0) return 0;
    att_params p = {};
    p.q = (const char *)q->data;
    p.q_nb1 = (long long)q->nb[1];
    p.q_nb2 = (long long)q->nb[2];
    p.k = (const char *)k->data;
    p.v = (const char *)v->data;
    p.k_nb1 = (long long)k->nb[1];
    p.v_nb1 = (long long)v->nb[1];
    p.k_type = (int)k->type;
    p.v_type = (int)v->type;
    p.spans = (const int *)sp->data;
    p.out = (char *)n->data;
    p.out_nb1 = (long long)n->nb[1];
    p.n_tok = (int)n_tok;
    p.n_head = (int)n_head;
    p.n_kv = (int)n_kv;
    p.grp = (int)(n_head / n_kv);
    p.n_cells = (int)k->ne[1];
    p.scale = n->fparams[0];
    p.nchunk_max = (int)((k->ne[1] + kChunk - 1) / kChunk);
    if (p.nchunk_max == 0) p.nchunk_max = 1;
    return hd == 64 ? launch<64>(c, n, p, err) : launch<128>(c, n, p, err);
}
