/* What the CUDA backend claims, compiled into every build: a capability of the backend's code, not of
 * this machine, so the op matrix (docs/SUPPORT-MATRIX.md) states one answer that a CPU-only build and a
 * make CUDA=1 build both check.  Whether the backend can be used at all is the registry's question (the
 * entry exists only with make CUDA=1, and its probe asks for a device); nothing is assigned to a backend
 * that is not registered and available. */
#include "backend/cuda/cuda.h"
#include "backend/cuda/qmath.h"
#include "quant/quant.h"

bool mf_cuda_matmul_supports(uint32_t weight_type) {
    return mf_qm_type_quantized(weight_type) || mf_qm_type_float(weight_type);
}

bool mf_cuda_get_rows_supports(uint32_t table_type) { return mf_cuda_matmul_supports(table_type); }

bool mf_cuda_kv_type_supports(uint32_t kv_type) {
    return kv_type == MF_TYPE_F32 || kv_type == MF_TYPE_F16 || kv_type == MF_TYPE_Q8_0;
}

/* The CPU's type rule: the node's type, except MATMUL/GET_ROWS (src0's, which the caller passes). */
bool mf_cuda_supports(mf_op op, uint32_t type) {
    switch (op) { /* exhaustive, so a new op is a compile warning until this says whether CUDA runs it */
    case MF_OP_INPUT:
    case MF_OP_WEIGHT:
    case MF_OP_EXTERNAL:
    case MF_OP_VIEW:
    case MF_OP_RESHAPE:
    case MF_OP_PERMUTE: return true; /* !mf_op_computes: memory only */
    case MF_OP_MATMUL: return mf_cuda_matmul_supports(type);
    case MF_OP_GET_ROWS: return mf_cuda_get_rows_supports(type);
    case MF_OP_KV_STORE: return mf_cuda_kv_type_supports(type); /* the node is the cache: its type */
    /* the node is the f32 output; the cache types it reads are the KV_STORE nodes' (asked above) */
    case MF_OP_ATTENTION: return type == MF_TYPE_F32;
    case MF_OP_RMS_NORM:
    case MF_OP_ADD:
    case MF_OP_MUL:
    case MF_OP_SCALE:
    case MF_OP_SILU:
    case MF_OP_SWIGLU:
    case MF_OP_SOFTMAX:
    case MF_OP_ROPE:
    case MF_OP_CONT:
    case MF_OP_HADAMARD: return type == MF_TYPE_F32;
    /* not yet on the device: a MoE model's expert ops stay on the CPU (the scheduler splits there) */
    case MF_OP_TOPK:
    case MF_OP_MATMUL_ID:
    case MF_OP_MOE_SUM:
    case MF_OP_DIV: return false; /* only qwen2moe's shared-expert gate divides, beside those */
    case MF_OP_COUNT: break;
    }
    return false;
}
