// The CUDA backend's row-wise and elementwise ops: RMS_NORM, ADD, MUL, SCALE, SILU, SWIGLU, SOFTMAX, ROPE,
// CONT, HADAMARD, KV_STORE (the contract: ops.h; the semantics: backend/cpu/ops_elem.c, attention.c's KV
// store, core/rope.c, core/hadamard.c).
//
// Every output element is computed by one fixed sequence of operations that depends only on its own row
// (the reductions of RMS_NORM and SOFTMAX run over one row in a fixed thread tree), so a row's bits never
// depend on how many rows the launch has: the batch invariance the engine promises.  The per-element
// arithmetic is emath.h's (tested on the host against the CPU reference bit for bit); where the CPU's
// order is reproduced (HADAMARD, KV_STORE, SCALE/ADD/MUL, SiLU, the rope rotation) the bits are the CPU's,
// elsewhere (the double sums of RMS_NORM and SOFTMAX in another order, the device's cosf/sinf) they may
// differ from the CPU by a rounding.  Strides: every source is read through its nb (views, permutes).
extern "C" {
#include "core/core.h"
#include "core/rope.h"
#include "graph/graph.h"
#include "quant/quant.h"
}
#include "backend/cuda/emath.h"
#include "backend/cuda/ops.h"

#include <cuda_runtime.h>

namespace {

// a tensor's shape and byte strides, by value into a kernel
struct shape4 {
    long long ne[4];
    long long nb[4];
};

shape4 shape_of(const mf_node *n) {
    shape4 s;
    for (int i = 0; i < 4; i++) {
        s.ne[i] = n->ne[i];
        s.nb[i] = (long long)n->nb[i];
    }
    return s;
}

long long nrows_of(const mf_node *n) {
    return (long long)n->ne[1] * n->ne[2] * n->ne[3];
}

// byte offset of row r (dims 1..3) of s
__device__ __forceinline__ long long row_offs(const shape4 &s, long long r) {
    const long long i1 = r % s.ne[1], i2 = (r / s.ne[1]) % s.ne[2], i3 = r / (s.ne[1] * s.ne[2]);
    return i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3];
}

// byte offset of the element with flat (contiguous-order) index e of shape s
__device__ __forceinline__ long long elem_offs(const shape4 &s, long long e) {
    const long long i0 = e % s.ne[0], r = e / s.ne[0];
    return i0 * s.nb[0] + row_offs(s, r);
}

constexpr int kThreads = 256;

unsigned grid_for(long long n, int threads) {
    long long b = (n + threads - 1) / threads;
    return (unsigned)(b < 65535LL * 16 ? b : 65535LL * 16); // grid-stride loops cover the rest
}

// ---- elementwise: ADD, MUL (src1 broadcast: each dim 1 or equal), SCALE, SILU, SWIGLU ----
enum ew_kind { EW_ADD, EW_MUL, EW_SCALE, EW_SILU, EW_SWIGLU };

__global__ void ew_kernel(int kind, const char *a, shape4 sa, const char *b, shape4 sb, char *y, shape4 sy, float s,
                          long long n) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
        const long long i0 = e % sy.ne[0], r = e / sy.ne[0];
        const long long i1 = r % sy.ne[1], i2 = (r / sy.ne[1]) % sy.ne[2], i3 = r / (sy.ne[1] * sy.ne[2]);
        const float x = *(const float *)(a + i0 * sa.nb[0] + i1 * sa.nb[1] + i2 * sa.nb[2] + i3 * sa.nb[3]);
        float out;
        switch (kind) {
        case EW_ADD:
        case EW_MUL:
        case EW_SWIGLU: {
            const float z = *(const float *)(b + (i0 % sb.ne[0]) * sb.nb[0] + (i1 % sb.ne[1]) * sb.nb[1] +
                                             (i2 % sb.ne[2]) * sb.nb[2] + (i3 % sb.ne[3]) * sb.nb[3]);
            out = kind == EW_ADD ? __fadd_rn(x, z) : kind == EW_MUL ? __fmul_rn(x, z) : __fmul_rn(mf_hd_silu(x), z);
            break;
        }
        case EW_SCALE:
            out = __fmul_rn(x, s);
            break;
        default: // EW_SILU
            out = mf_hd_silu(x);
            break;
        }
        *(float *)(y + i0 * sy.nb[0] + i1 * sy.nb[1] + i2 * sy.nb[2] + i3 * sy.nb[3]) = out;
    }
}

int launch_ew(mf_cuda_ctx *c, const mf_node *n, int kind, const char *kname, mf_error *err) {
    const mf_node *a = mf_cuda_src(c, n, 0);
    const mf_node *b = (kind == EW_ADD || kind == EW_MUL || kind == EW_SWIGLU) ? mf_cuda_src(c, n, 1) : a;
    if (a->type != MF_TYPE_F32 || b->type != MF_TYPE_F32 || n->type != MF_TYPE_F32)
        return mf_err(err, MF_E_UNSUPPORTED, "cuda %s: node '%s' has non-f32 operands (%u, %u -> %u); only f32 runs here",
                      kname, n->name, a->type, b->type, n->type);
    for (int i = 0; i < 4; i++)
        if (b->ne[i] != 1 && b->ne[i] != n->ne[i])
            return mf_err(err, MF_E_INVAL, "cuda %s: node '%s': src1 dim %d is %lld, neither 1 nor %lld", kname, n->name, i,
                          (long long)b->ne[i], (long long)n->ne[i]);
    const long long ne = mf_node_nelements(n);
    if (ne == 0) return 0;
    int rc = mf_cuda_pre_launch(kname, n, err);
    if (rc) return rc;
    ew_kernel<<<grid_for(ne, kThreads), kThreads, 0, (cudaStream_t)c->stream>>>(
        kind, (const char *)a->data, shape_of(a), (const char *)b->data, shape_of(b), (char *)n->data, shape_of(n),
        n->fparams[0], ne);
    return mf_cuda_launch_check(kname, n, err);
}

// ---- RMS_NORM: one block per row; squares rounded to float, summed in double per thread, then a fixed tree ----
constexpr int kRmsThreads = 128; // tests/test_cuda_emath.c emulates this order (RMS_THREADS)

__global__ void rms_norm_kernel(const char *a, shape4 sa, char *y, shape4 sy, float eps, long long nrows) {
    __shared__ double part[kRmsThreads];
    const long long ne0 = sa.ne[0];
    for (long long r = blockIdx.x; r < nrows; r += gridDim.x) {
        const char *xr = a + row_offs(sa, r);
        double s = 0.0;
        for (long long i = threadIdx.x; i < ne0; i += kRmsThreads) {
            const float x = *(const float *)(xr + i * sa.nb[0]);
            s += (double)__fmul_rn(x, x);
        }
        part[threadIdx.x] = s;
        __syncthreads();
        for (int w = kRmsThreads / 2; w > 0; w /= 2) {
            if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
            __syncthreads();
        }
        const float sc = mf_hd_rms_scale(part[0], ne0, eps);
        char *yr = y + row_offs(sy, r);
        for (long long i = threadIdx.x; i < ne0; i += kRmsThreads)
            *(float *)(yr + i * sy.nb[0]) = __fmul_rn(*(const float *)(xr + i * sa.nb[0]), sc);
        __syncthreads(); // part[] is reused by the next row
    }
}

// ---- SOFTMAX: one block per row; e^(x - max) per 8-element group summed as the CPU's hsum8, the group sums
// in double per thread, the thread sums in a fixed tree (test_cuda_emath.c emulates it: SM_THREADS) ----
constexpr int kSmThreads = 128;

__global__ void softmax_kernel(const char *a, shape4 sa, char *y, shape4 sy, long long nrows) {
    __shared__ double part[kSmThreads];
    __shared__ float pmax[kSmThreads];
    const long long ne0 = sa.ne[0], ng = (ne0 + 7) / 8;
    for (long long r = blockIdx.x; r < nrows; r += gridDim.x) {
        const char *xr = a + row_offs(sa, r);
        char *yr = y + row_offs(sy, r);
        float mx = -INFINITY;
        for (long long i = threadIdx.x; i < ne0; i += kSmThreads) {
            const float x = *(const float *)(xr + i * sa.nb[0]);
            mx = x > mx ? x : mx;
        }
        pmax[threadIdx.x] = mx;
        __syncthreads();
        for (int w = kSmThreads / 2; w > 0; w /= 2) {
            if ((int)threadIdx.x < w) {
                const float o = pmax[threadIdx.x + w];
                pmax[threadIdx.x] = o > pmax[threadIdx.x] ? o : pmax[threadIdx.x];
            }
            __syncthreads();
        }
        mx = pmax[0];
        double s = 0.0;
        for (long long g = threadIdx.x; g < ng; g += kSmThreads) {
            float e[8];
            for (int l = 0; l < 8; l++) {
                const long long i = g * 8 + l;
                e[l] = 0.0f;
                if (i < ne0) {
                    e[l] = mf_hd_expf(*(const float *)(xr + i * sa.nb[0]) - mx);
                    *(float *)(yr + i * sy.nb[0]) = e[l];
                }
            }
            s += (double)(((e[0] + e[4]) + (e[2] + e[6])) + ((e[1] + e[5]) + (e[3] + e[7])));
        }
        part[threadIdx.x] = s;
        __syncthreads();
        for (int w = kSmThreads / 2; w > 0; w /= 2) {
            if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
            __syncthreads();
        }
        const float inv = (float)(1.0 / part[0]);
        // each thread rescales the elements it wrote itself: no other thread's store to wait for
        for (long long g = threadIdx.x; g < ng; g += kSmThreads)
            for (int l = 0; l < 8 && g * 8 + l < ne0; l++) {
                float *p = (float *)(yr + (g * 8 + l) * sy.nb[0]);
                *p = __fmul_rn(*p, inv);
            }
        __syncthreads(); // part[] / pmax[] are reused by the next row
    }
}

// ---- ROPE: one thread per pair (and per pass-through pair of elements past n_rot) ----
__global__ void rope_kernel(const char *a, shape4 sa, const int *pos, char *y, shape4 sy, int n_rot, int neox,
                            float freq_scale, float theta_scale, float ext_factor, float corr0, float corr1,
                            float mscale, long long n) {
    const long long half_ne0 = (sa.ne[0] + 1) / 2;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
        const long long i = e % half_ne0, r = e / half_ne0; // r = i1 + ne1 * i2 (heads, tokens)
        const long long i1 = r % sa.ne[1], i2 = r / sa.ne[1];
        const char *xr = a + i1 * sa.nb[1] + i2 * sa.nb[2];
        char *yr = y + i1 * sy.nb[1] + i2 * sy.nb[2];
        if (i < n_rot / 2) {
            const long long half = neox ? n_rot / 2 : 1, ic = neox ? i : 2 * i;
            const float t =
                mf_hd_rope_yarn_theta((float)pos[i2], freq_scale, theta_scale, (int)i, ext_factor, corr0, corr1);
            const float cs = mf_hd_mul(cosf(t), mscale), sn = mf_hd_mul(sinf(t), mscale);
            const float x0 = *(const float *)(xr + ic * sa.nb[0]), x1 = *(const float *)(xr + (ic + half) * sa.nb[0]);
            float y0, y1;
            mf_hd_rope_pair(x0, x1, cs, sn, neox, &y0, &y1);
            *(float *)(yr + ic * sy.nb[0]) = y0;
            *(float *)(yr + (ic + half) * sy.nb[0]) = y1;
        } else {
            // pass-through elements n_rot + 2 (i - n_rot/2) and the next one
            for (long long k = n_rot + 2 * (i - n_rot / 2), j = 0; j < 2 && k < sa.ne[0]; j++, k++)
                *(float *)(yr + k * sy.nb[0]) = *(const float *)(xr + k * sa.nb[0]);
        }
    }
}

// ---- CONT: strided -> contiguous, one thread per element (element size 4, 2 or 1 bytes) ----
__global__ void cont_kernel(const char *a, shape4 sa, char *y, shape4 sy, int es, long long n) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
        const char *src = a + elem_offs(sa, e);
        char *dst = y + elem_offs(sy, e);
        if (es == 4)
            *(uint32_t *)dst = *(const uint32_t *)src;
        else if (es == 2)
            *(uint16_t *)dst = *(const uint16_t *)src;
        else
            *dst = *src;
    }
}

// ---- HADAMARD: one block per chunk of n, n/2 threads, the CPU's butterfly pass by pass (bit-exact) ----
__global__ void hadamard_kernel(const char *a, shape4 sa, char *y, shape4 sy, int n, float scale, long long nchunks) {
    extern __shared__ float h_r[];
    const long long per_row = sa.ne[0] / n;
    for (long long ch = blockIdx.x; ch < nchunks; ch += gridDim.x) {
        const long long r = ch / per_row, c0 = (ch % per_row) * n;
        const char *xr = a + row_offs(sa, r);
        char *yr = y + row_offs(sy, r);
        for (int j = threadIdx.x; j < n; j += blockDim.x)
            h_r[j] = __fmul_rn(*(const float *)(xr + (c0 + j) * sa.nb[0]), scale);
        __syncthreads();
        for (int len = 1; len < n; len <<= 1) {
            for (int j = threadIdx.x; j < n / 2; j += blockDim.x) {
                const int lo = mf_hd_fwht_lo(j, len);
                const float u = h_r[lo], v = h_r[lo + len];
                h_r[lo] = __fadd_rn(u, v);
                h_r[lo + len] = __fsub_rn(u, v);
            }
            __syncthreads();
        }
        for (int j = threadIdx.x; j < n; j += blockDim.x) *(float *)(yr + (c0 + j) * sy.nb[0]) = h_r[j];
        __syncthreads();
    }
}

// ---- KV_STORE: f32 rows -> the cache row of each token's cell (f32, f16, or q8_0 with the CPU's bytes) ----
__global__ void kv_store_kernel(const char *rows, long long rows_nb1, const int *cell, char *cache, long long cache_nb1,
                                long long n_cells, int type, long long ne0, long long n_tok) {
    const long long units = type == MF_TYPE_Q8_0 ? ne0 / 32 : ne0; // q8_0: one thread per block of 32
    const long long n = units * n_tok;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
        const long long t = e / units, u = e % units;
        const int cl = cell[t];
        if (cl < 0 || cl >= n_cells) continue; // out of range: nothing written (the CPU records a fault)
        const float *x = (const float *)(rows + t * rows_nb1);
        char *dst = cache + (long long)cl * cache_nb1;
        if (type == MF_TYPE_F32)
            ((float *)dst)[u] = x[u];
        else if (type == MF_TYPE_F16)
            ((uint16_t *)dst)[u] = mf_hd_f32_to_f16(x[u]);
        else
            mf_hd_q8_0_block(x + 32 * u, (unsigned char *)dst + 34 * u);
    }
}

bool f32_rows(const mf_node *n) {
    return n->type == MF_TYPE_F32 && n->nb[0] == sizeof(float);
}

int need_f32(const mf_node *n, const mf_node *a, const char *kname, mf_error *err) {
    if (a->type != MF_TYPE_F32 || n->type != MF_TYPE_F32)
        return mf_err(err, MF_E_UNSUPPORTED, "cuda %s: node '%s' reads type %u and writes type %u; only f32 runs here",
                      kname, n->name, a->type, n->type);
    return 0;
}

} // namespace

/* mf_cuda_kv_type_supports: support.c (compiled into every build) */

extern "C" int mf_cuda_op_binary(mf_cuda_ctx *c, const mf_node *n, mf_error *err) {
    return n->op == MF_OP_ADD ? launch_ew(c, n, EW_ADD, "add", err) : launch_ew(c, n, EW_MUL, "mul", err);
}

extern "C" int mf_cuda_op_scale(mf_cuda_ctx *c, const mf_node *n, mf_error *err) {
    return launch_ew(c, n, EW_SCALE, "scale", err);
}

extern "C" int mf_cuda_op_silu(mf_cuda_ctx *c, const mf_node *n, mf_error *err) {
    return launch_ew(c, n, EW_SILU, "silu", err);
}

extern "C" int mf_cuda_op_swiglu(mf_cuda_ctx *c, const mf_node *n, mf_error *err) {
    const mf_node *a = mf_cuda_src(c, n, 0), *b = mf_cuda_src(c, n, 1);
    for (int i = 0; i < 4; i++)
        if (a->ne[i] != b->ne[i])
            return mf_err(err, MF_E_INVAL, "cuda swiglu: node '%s': gate and up differ in dim %d (%lld vs %lld)", n->name, i,
                          (long long)a->ne[i], (long long)b->ne[i]);
    return launch_ew(c, n, EW_SWIGLU, "swiglu", err);
}

extern "C" int mf_cuda_op_rms_norm(mf_cuda_ctx *c, const mf_node *n, mf_error *err) {
    const mf_node *a = mf_cuda_src(c, n, 0);
    int rc = need_f32(n, a, "rms_norm", err);
    if (rc) return rc;
    const long long nr = nrows_of(n);
    if (nr == 0 || n->ne[0] == 0) return 0;
    if ((rc = mf_cuda_pre_launch("rms_norm_kernel", n, err))) return rc;
    rms_norm_kernel<<<(unsigned)(nr < 65535LL * 16 ? nr : 65535LL * 16), kRmsThreads, 0, (cudaStream_t)c->stream>>>(
        (const char *)a->data, shape_of(a), (char *)n->data, shape_of(n), n->fparams[0], nr);
    return mf_cuda_launch_check("rms_norm_kernel", n, err);
}

extern "C" int mf_cuda_op_softmax(mf_cuda_ctx *c, const mf_node *n, mf_error *err) {
    const mf_node *a = mf_cuda_src(c, n, 0);
    int rc = need_f32(n, a, "softmax", err);
    if (rc) return rc;
    const long long nr = nrows_of(n);
    if (nr == 0 || n->ne[0] == 0) return 0;
    if ((rc = mf_cuda_pre_launch("softmax_kernel", n, err))) return rc;
    softmax_kernel<<<(unsigned)(nr < 65535LL * 16 ? nr : 65535LL * 16), kSmThreads, 0, (cudaStream_t)c->stream>>>(
        (const char *)a->data, shape_of(a), (char *)n->data, shape_of(n), nr);
    return mf_cuda_launch_check("softmax_kernel", n, err);
}

extern "C" int mf_cuda_op_rope(mf_cuda_ctx *c, const mf_node *n, mf_error *err) {
    const mf_node *a = mf_cuda_src(c, n, 0), *pos = mf_cuda_src(c, n, 1);
    int rc = need_f32(n, a, "rope", err);
    if (rc) return rc;
    const int n_rot = n->iparams[0], mode = n->iparams[1];
    if (n_rot <= 0 || n_rot % 2 || n_rot > a->ne[0])
        return mf_err(err, MF_E_INVAL, "cuda rope: node '%s': n_rot %d must be even and within the head size %lld",
                      n->name, n_rot, (long long)a->ne[0]);
    if (a->ne[3] != 1 || pos->ne[0] < a->ne[2])
        return mf_err(err, MF_E_INVAL, "cuda rope: node '%s': %lld positions for %lld tokens (dim 3: %lld)", n->name,
                      (long long)pos->ne[0], (long long)a->ne[2], (long long)a->ne[3]);
    const long long ne = (a->ne[0] + 1) / 2 * a->ne[1] * a->ne[2];
    if (ne == 0) return 0;
    // the host computes theta_scale with libm's powf, exactly as the CPU op (core/rope.c)
    const mf_rope rope = mf_node_rope(n);
    const float theta_scale = mf_rope_theta_scale(rope.freq_base, n_rot);
    const float mscale = mf_rope_mscale(&rope); // attn_factor, with YaRN's log term (core/rope.c's libm logf)
    if ((rc = mf_cuda_pre_launch("rope_kernel", n, err))) return rc;
    rope_kernel<<<grid_for(ne, kThreads), kThreads, 0, (cudaStream_t)c->stream>>>(
        (const char *)a->data, shape_of(a), (const int *)pos->data, (char *)n->data, shape_of(n), n_rot,
        mode == MF_ROPE_NEOX, rope.freq_scale, theta_scale, rope.ext_factor, rope.corr_dims[0], rope.corr_dims[1],
        mscale, ne);
    return mf_cuda_launch_check("rope_kernel", n, err);
}

extern "C" int mf_cuda_op_cont(mf_cuda_ctx *c, const mf_node *n, mf_error *err) {
    const mf_node *a = mf_cuda_src(c, n, 0);
    const size_t es = n->nb[0];
    if (a->type != n->type || (es != 4 && es != 2 && es != 1) || mf_type_get(n->type)->blck_size != 1)
        return mf_err(err, MF_E_UNSUPPORTED,
                      "cuda cont: node '%s' copies type %u to %u with %zu-byte elements; only same-type 1/2/4-byte "
                      "elements run here",
                      n->name, a->type, n->type, es);
    const long long ne = mf_node_nelements(n);
    if (ne == 0) return 0;
    int rc = mf_cuda_pre_launch("cont_kernel", n, err);
    if (rc) return rc;
    cont_kernel<<<grid_for(ne, kThreads), kThreads, 0, (cudaStream_t)c->stream>>>(
        (const char *)a->data, shape_of(a), (char *)n->data, shape_of(n), (int)es, ne);
    return mf_cuda_launch_check("cont_kernel", n, err);
}

extern "C" int mf_cuda_op_hadamard(mf_cuda_ctx *c, const mf_node *n, mf_error *err) {
    const mf_node *a = mf_cuda_src(c, n, 0);
    int rc = need_f32(n, a, "hadamard", err);
    if (rc) return rc;
    const int hn = n->iparams[0];
    if (hn < 2 || hn > 4096 || (hn & (hn - 1)) || a->ne[0] % hn)
        return mf_err(err, MF_E_INVAL,
                      "cuda hadamard: node '%s': chunk %d must be a power of two in 2..4096 dividing the row (%lld)",
                      n->name, hn, (long long)a->ne[0]);
    const long long nchunks = nrows_of(n) * (a->ne[0] / hn);
    if (nchunks == 0) return 0;
    const int threads = hn / 2 < 512 ? hn / 2 : 512;
    const float scale = 1.0f / sqrtf((float)hn); // as core/hadamard.c (sqrtf is correctly rounded everywhere)
    if ((rc = mf_cuda_pre_launch("hadamard_kernel", n, err))) return rc;
    hadamard_kernel<<<(unsigned)(nchunks < 65535LL * 16 ? nchunks : 65535LL * 16), threads, hn * sizeof(float),
                      (cudaStream_t)c->stream>>>((const char *)a->data, shape_of(a), (char *)n->data, shape_of(n), hn,
                                                 scale, nchunks);
    return mf_cuda_launch_check("hadamard_kernel", n, err);
}

extern "C" int mf_cuda_op_kv_store(mf_cuda_ctx *c, const mf_node *n, mf_error *err) {
    const mf_node *rows = mf_cuda_src(c, n, 1), *cells = mf_cuda_src(c, n, 2);
    const long long ne0 = n->ne[0], n_tok = rows->ne[1];
    if (!mf_cuda_kv_type_supports(n->type))
        return mf_err(err, MF_E_UNSUPPORTED,
                      "cuda kv_store: node '%s': cache type %s is not one the CUDA backend stores (f32, f16, q8_0); "
                      "choose one with --cache-type-k/--cache-type-v",
                      n->name, mf_type_name(n->type));
    if (!f32_rows(rows) || rows->ne[0] != ne0 || (n->type == MF_TYPE_Q8_0 && ne0 % 32))
        return mf_err(err, MF_E_INVAL, "cuda kv_store: node '%s': rows [%lld, %lld] (type %u) do not fit cache rows of %lld",
                      n->name, (long long)rows->ne[0], n_tok, rows->type, ne0);
    if (n_tok == 0 || ne0 == 0) return 0;
    const long long units = (n->type == MF_TYPE_Q8_0 ? ne0 / 32 : ne0) * n_tok;
    int rc = mf_cuda_pre_launch("kv_store_kernel", n, err);
    if (rc) return rc;
    kv_store_kernel<<<grid_for(units, kThreads), kThreads, 0, (cudaStream_t)c->stream>>>(
        (const char *)rows->data, (long long)rows->nb[1], (const int *)cells->data, (char *)n->data,
        (long long)n->nb[1], (long long)n->ne[1], (int)n->type, ne0, n_tok);
    return mf_cuda_launch_check("kv_store_kernel", n, err);
}
