// TEMPORARY: weak stand-ins for the launchers of matmul.cu (cuda-mm), elem.cu and attention.cu (cuda-attn),
// so a make CUDA=1 build of the runtime links before those files exist.  Every one refuses with
// MF_E_UNSUPPORTED ("not built"), and the support answers are false, so nothing is ever assigned to a
// launcher that is not there.  Delete this file when the real launchers are merged: a weak definition in
// a static library also stops the linker from pulling the real object for that symbol.
#include "backend/cuda/ops.h"

#define WEAK __attribute__((weak))

static int not_built(const char *op, const mf_node *n, mf_error *err) {
    return mf_err(err, MF_E_UNSUPPORTED, "the CUDA %s kernels are not built into this binary (node '%s'); run that "
                  "layer on the CPU (--gpu-layers 0)", op, n && n->name[0] ? n->name : "(unnamed)");
}

extern "C" {
WEAK bool mf_cuda_matmul_supports(uint32_t weight_type) { (void)weight_type; return false; }
WEAK bool mf_cuda_get_rows_supports(uint32_t table_type) { (void)table_type; return false; }
WEAK bool mf_cuda_kv_type_supports(uint32_t kv_type) { (void)kv_type; return false; }
WEAK int mf_cuda_op_matmul(mf_cuda_ctx *c, const mf_node *n, mf_error *err) { (void)c; return not_built("MATMUL", n, err); }
WEAK int mf_cuda_op_get_rows(mf_cuda_ctx *c, const mf_node *n, mf_error *err) { (void)c; return not_built("GET_ROWS", n, err); }
WEAK int mf_cuda_op_rms_norm(mf_cuda_ctx *c, const mf_node *n, mf_error *err) { (void)c; return not_built("RMS_NORM", n, err); }
WEAK int mf_cuda_op_binary(mf_cuda_ctx *c, const mf_node *n, mf_error *err) { (void)c; return not_built("ADD/MUL", n, err); }
WEAK int mf_cuda_op_scale(mf_cuda_ctx *c, const mf_node *n, mf_error *err) { (void)c; return not_built("SCALE", n, err); }
WEAK int mf_cuda_op_silu(mf_cuda_ctx *c, const mf_node *n, mf_error *err) { (void)c; return not_built("SILU", n, err); }
WEAK int mf_cuda_op_swiglu(mf_cuda_ctx *c, const mf_node *n, mf_error *err) { (void)c; return not_built("SWIGLU", n, err); }
WEAK int mf_cuda_op_softmax(mf_cuda_ctx *c, const mf_node *n, mf_error *err) { (void)c; return not_built("SOFTMAX", n, err); }
WEAK int mf_cuda_op_rope(mf_cuda_ctx *c, const mf_node *n, mf_error *err) { (void)c; return not_built("ROPE", n, err); }
WEAK int mf_cuda_op_cont(mf_cuda_ctx *c, const mf_node *n, mf_error *err) { (void)c; return not_built("CONT", n, err); }
WEAK int mf_cuda_op_hadamard(mf_cuda_ctx *c, const mf_node *n, mf_error *err) { (void)c; return not_built("HADAMARD", n, err); }
WEAK int mf_cuda_op_kv_store(mf_cuda_ctx *c, const mf_node *n, mf_error *err) { (void)c; return not_built("KV_STORE", n, err); }
WEAK int mf_cuda_op_attention(mf_cuda_ctx *c, const mf_node *n, mf_error *err) { (void)c; return not_built("ATTENTION", n, err); }
}
