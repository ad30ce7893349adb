/* The CUDA backend's registration entry (only with make CUDA=1; empty otherwise).  It claims no op yet,
 * so its compute/copy hooks are never reached; they refuse loudly if they ever are. */
#include "backend/cuda/cuda.h"
#include "core/env.h"

#include <stdlib.h>

bool mf_cuda_supports(mf_op op, uint32_t type) {
    (void)op, (void)type;
    return false;
}

#if MF_CUDA
#include "backend/backend_entries.h"
#include "quant/quant.h"

/* One reason for both cases: these are the refusal's words (docs/BACKENDS.md). */
#define NO_CUDA "no CUDA device is available, or CUDA is disabled (MINFER_DISABLE_CUDA)"

const char *mf_cuda_unavailable(void) {
    /* presence-checked; a value other than empty or 1 still disables here (the CLI and model load refuse it) */
    bool off = false;
    if (mf_env_flag("MINFER_DISABLE_CUDA", &off, NULL) || off) return NO_CUDA;
    int n = 0;
    if (mf_cuda_device_count(&n) != 0 || n <= 0) return NO_CUDA;
    return NULL;
}

static int cuda_enable(const mf_backend_opts *opts, void **pool, mf_error *err) {
    (void)opts, (void)pool;
    return mf_err(err, MF_E_UNSUPPORTED, "the CUDA backend executes no op yet (it claims none; nothing is assigned to it)");
}

static int cuda_compute(void *pool, mf_graph *g, int32_t first, int32_t last, mf_error *err) {
    (void)pool, (void)g;
    return mf_err(err, MF_E_UNSUPPORTED, "the CUDA backend executes no op yet (asked for nodes %d..%d)", first, last - 1);
}

static uint32_t cuda_kv_format(void *pool) {
    (void)pool;
    return MF_TYPE_F16;
}

/* ---- memory: device addresses (cudaMalloc), reached only through these hooks ---- */

static int cuda_buf_alloc(size_t size, void **addr, mf_error *err) {
    const char *what = "";
    int e = mf_cuda_malloc(size, addr, &what);
    if (e) return mf_err(err, MF_E_NOMEM, "cudaMalloc of %zu bytes failed: %s (error %d)", size, what, e);
    return 0;
}

static void cuda_buf_free(void *addr) { mf_cuda_free(addr); }

static int cuda_buf_write(void *addr, const void *src, size_t n, mf_error *err) {
    const char *what = "";
    int e = mf_cuda_memcpy(addr, src, n, 0, &what);
    return e ? mf_err(err, MF_E_BACKEND, "cudaMemcpy host to device (%zu bytes) failed: %s (error %d)", n, what, e) : 0;
}

static int cuda_buf_read(const void *addr, void *dst, size_t n, mf_error *err) {
    const char *what = "";
    int e = mf_cuda_memcpy(dst, addr, n, 1, &what);
    return e ? mf_err(err, MF_E_BACKEND, "cudaMemcpy device to host (%zu bytes) failed: %s (error %d)", n, what, e) : 0;
}

static int cuda_buf_copy_from(mf_backend src, const void *src_addr, void *dst_addr, size_t n, bool *done,
                              mf_error *err) {
    *done = false;
    if (src.id != MF_BACKEND_ID_CUDA) return 0; /* the registry bounces through the host */
    const char *what = "";
    int e = mf_cuda_memcpy(dst_addr, src_addr, n, 2, &what);
    if (e) return mf_err(err, MF_E_BACKEND, "cudaMemcpy device to device (%zu bytes) failed: %s (error %d)", n, what, e);
    *done = true;
    return 0;
}

static int cuda_host_read(void *pool, const mf_node *node, size_t offs, void *dst, size_t n, mf_error *err) {
    (void)pool;
    return cuda_buf_read((const char *)node->data + offs, dst, n, err);
}

static int cuda_host_write(void *pool, mf_node *node, size_t offs, const void *src, size_t n, mf_error *err) {
    (void)pool;
    return cuda_buf_write((char *)node->data + offs, src, n, err);
}

static const mf_backend_entry k_cuda_entry = {
    .handle = {MF_BACKEND_ID_CUDA},
    .name = "cuda",
    .priority = 200,
    .caps = {.reads_packed_kv = false},
    .supports = mf_cuda_supports,
    .unavailable = mf_cuda_unavailable,
    .enable = cuda_enable,
    .compute = cuda_compute,
    .kv_format = cuda_kv_format,
    .host_read = cuda_host_read,
    .host_write = cuda_host_write,
    .buf_is_host = false,
    .buf_alloc = cuda_buf_alloc,
    .buf_free = cuda_buf_free,
    .buf_write = cuda_buf_write,
    .buf_read = cuda_buf_read,
    .buf_copy_from = cuda_buf_copy_from,
};

const mf_backend_entry *mf_cuda_entry(void) { return &k_cuda_entry; }
#else
const char *mf_cuda_unavailable(void) { return "the CUDA backend is compiled only with make CUDA=1"; }
#endif
