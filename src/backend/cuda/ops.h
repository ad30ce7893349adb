/* The CUDA backend's internal contract: the per-op launchers (one .cu file per family of ops), the
 * execution context they share, and the error rules every launch follows.  C-callable from both the
 * C entry (cuda_entry.c) and the .cu files; compiled only with make CUDA=1.
 *
 * Division of labour:
 *   runtime.cu      the context (stream, cuBLAS handle, scratch), error checks, dynamic shared memory
 *                   opt-in, the node loop and CUDA graph capture/replay of a decode step;
 *   matmul.cu       MATMUL and GET_ROWS for every weight type the backend claims (int8-activation
 *                   matrix-vector products for small batches, a tiled int8 kernel for prefill, one
 *                   reduction order for both - no cuBLAS, whose order per row depends on M);
 *   elem.cu         RMS_NORM, ADD, MUL, SCALE, SILU, SWIGLU, SOFTMAX, ROPE, CONT, HADAMARD, KV_STORE;
 *   attention.cu    ATTENTION over the KV spans (f32/f16/q8_0 caches; split-K decode, tensor-core prefill).
 * The per-block arithmetic of the kernels lives in C-compatible `MF_HD` functions (qmath.h, emath.h) that
 * the host tests check against the CPU reference in every build, GPU or not.
 *
 * Every launcher enqueues its node's work on c->stream and returns 0, or an mf_error that names the kernel
 * and the graph node (mf_cuda_launch_check).  Launchers never synchronize and never allocate device memory
 * except through mf_cuda_scratch (so a step can be captured into a CUDA graph once scratch is sized). */
#ifndef MF_BACKEND_CUDA_OPS_H
#define MF_BACKEND_CUDA_OPS_H

#include <stdbool.h>
#include <stddef.h>

/* core.h and graph.h are C headers without their own extern "C": included inside the block, so a .cu
 * file that includes ops.h first links against the C symbols (mf_err, mf_graph_node_c, ...). */
#ifdef __cplusplus
extern "C" {
#endif

#include "core/core.h"
#include "graph/graph.h"

typedef struct mf_cuda_ctx {
    void *stream;          /* cudaStream_t every launch goes to */
    void *cublas;          /* cublasHandle_t bound to stream */
    void *scratch;         /* device scratch (dequantized weights, int8 activations, split-K partials) */
    size_t scratch_bytes;  /* its size */
    size_t scratch_want;   /* the largest request seen: the next step grows scratch to it before running */
    bool capturing;        /* a CUDA graph is being captured: no allocation, no synchronization */
    int device;            /* ordinal */
    int sm_count;          /* multiprocessors */
    int cc_major, cc_minor;
    size_t smem_optin;     /* cudaDevAttrMaxSharedMemoryPerBlockOptin */
    const mf_graph *g;     /* the graph being executed (launchers read their sources from it) */
} mf_cuda_ctx;

/* A node's source k (must exist). */
static inline const mf_node *mf_cuda_src(const mf_cuda_ctx *c, const mf_node *n, int k) {
    return mf_graph_node_c(c->g, n->src[k]);
}

/* ---- runtime.cu: shared services ---- */

/* Device scratch of at least `bytes` (valid until the next call in the same node).  Grows outside a
 * capture; inside one, a request larger than the current scratch records it in scratch_want and fails
 * (the runtime then reruns the step uncaptured). */
int mf_cuda_scratch(mf_cuda_ctx *c, size_t bytes, void **out, mf_error *err);
/* Before a launch: an error left by an earlier call is reported as such ("an earlier CUDA call left
 * error ...; found before launching KERNEL for node 'NAME'"), never blamed on this launch. */
int mf_cuda_pre_launch(const char *kernel, const mf_node *n, mf_error *err);
/* After a launch: cudaGetLastError, named with the kernel and the node. */
int mf_cuda_launch_check(const char *kernel, const mf_node *n, mf_error *err);
/* A runtime API call's result (an int cudaError_t), named with the call, the kernel and the node. */
int mf_cuda_call_check(int cuda_error, const char *call, const char *kernel, const mf_node *n, mf_error *err);
/* Dynamic shared memory above the 48 KiB default, opted into once per kernel (func: the kernel's
 * address); a request above the device's opt-in limit is refused naming both numbers. */
int mf_cuda_smem_optin(const void *func, const char *kernel, size_t bytes, const mf_node *n, mf_error *err);

/* ---- matmul.cu ---- */
bool mf_cuda_matmul_supports(uint32_t weight_type);
bool mf_cuda_get_rows_supports(uint32_t table_type);
int mf_cuda_op_matmul(mf_cuda_ctx *c, const mf_node *n, mf_error *err);
int mf_cuda_op_get_rows(mf_cuda_ctx *c, const mf_node *n, mf_error *err);
/* Once per pool, on its stream (a cudaStream_t), before any launch and outside a capture: the device
 * copies of the IQ2/IQ3 lattice tables (qmath.h) that the grid types' kernels read. */
int mf_cuda_matmul_init(void *stream, mf_error *err);

/* ---- elem.cu ---- */
int mf_cuda_op_rms_norm(mf_cuda_ctx *c, const mf_node *n, mf_error *err);
int mf_cuda_op_binary(mf_cuda_ctx *c, const mf_node *n, mf_error *err); /* ADD, MUL (broadcast src1) */
int mf_cuda_op_scale(mf_cuda_ctx *c, const mf_node *n, mf_error *err);
int mf_cuda_op_silu(mf_cuda_ctx *c, const mf_node *n, mf_error *err);
int mf_cuda_op_swiglu(mf_cuda_ctx *c, const mf_node *n, mf_error *err);
int mf_cuda_op_softmax(mf_cuda_ctx *c, const mf_node *n, mf_error *err);
int mf_cuda_op_rope(mf_cuda_ctx *c, const mf_node *n, mf_error *err);
int mf_cuda_op_cont(mf_cuda_ctx *c, const mf_node *n, mf_error *err);
int mf_cuda_op_hadamard(mf_cuda_ctx *c, const mf_node *n, mf_error *err);
int mf_cuda_op_kv_store(mf_cuda_ctx *c, const mf_node *n, mf_error *err);
bool mf_cuda_kv_type_supports(uint32_t kv_type); /* f32, f16, q8_0 */

/* ---- attention.cu ---- */
int mf_cuda_op_attention(mf_cuda_ctx *c, const mf_node *n, mf_error *err);

#ifdef __cplusplus
}
#endif

#endif
