/* The CUDA backend's registration entry (only with make CUDA=1; only the support answer otherwise): the
 * support function (ops.h's launchers and their own type questions), the pool (runtime.cu), host access,
 * the cross copy and the buffer hooks.  What it claims is support.c's, on every build. */
#include "backend/cuda/cuda.h"
#include "core/env.h"

#include <stdio.h>
#include <stdlib.h>

#if MF_CUDA
#include "backend/backend_entries.h"
#include "backend/cuda/ops.h"
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
    (void)opts;
    bool graphs = true;
    int rc = mf_env_bool("MINFER_CUDA_GRAPHS", &graphs, err);
    if (rc) return rc;
    mf_cuda_pool *p = NULL;
    rc = mf_cuda_pool_new(graphs, &p, err);
    if (rc) return rc;
    *pool = p;
    return 0;
}

static void cuda_release(void *pool) { mf_cuda_pool_free(pool); }

static int cuda_compute(void *pool, mf_graph *g, int32_t first, int32_t last, mf_error *err) {
    return mf_cuda_pool_compute(pool, g, first, last, err);
}

static int cuda_synchronize(void *pool, mf_error *err) { return mf_cuda_pool_sync(pool, err); }

static int cuda_host_read(void *pool, const mf_node *node, size_t offs, void *dst, size_t n, mf_error *err) {
    if (!node->data) return mf_err(err, MF_E_INTERNAL, "node '%s' has no device memory to read", node->name);
    return mf_cuda_pool_read(pool, (const char *)node->data + offs, dst, n, err);
}

static int cuda_host_write(void *pool, mf_node *node, size_t offs, const void *src, size_t n, mf_error *err) {
    if (!node->data) return mf_err(err, MF_E_INTERNAL, "node '%s' has no device memory to write", node->name);
    return mf_cuda_pool_write(pool, (char *)node->data + offs, src, n, err);
}

/* Phase A: a device -> host copy on the stream, ordered after the kernels that wrote the value, and an
 * event as the ticket.  A destination whose memory is not host memory is declined (the scheduler bounces
 * through the host). */
static int cuda_copy_cross(void *pool, const mf_node *node, void *staging, size_t n, mf_backend dst, void **ticket,
                           bool *issued, mf_error *err) {
    *issued = false;
    if (!mf_backend_is_host(dst)) return 0;
    if (!node->data) return mf_err(err, MF_E_INTERNAL, "node '%s' has no device memory to copy", node->name);
    int rc = mf_cuda_pool_copy_out(pool, node->data, staging, n, ticket, err);
    if (rc) return rc;
    *issued = true;
    return 0;
}

static int cuda_await_cross(void *pool, void *ticket, mf_error *err) { return mf_cuda_pool_await(pool, ticket, err); }

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

static void cuda_mem_info(mf_mem_info *out) {
    size_t f = 0, t = 0;
    int code = 0;
    const char *name = "";
    switch (mf_cuda_mem_query(&f, &t, &code, &name)) {
    case 0:
        out->outcome = MF_MEM_KNOWN;
        out->free_bytes = f;
        out->total_bytes = t;
        break;
    case 1:
        out->outcome = MF_MEM_UNKNOWN;
        snprintf(out->why, sizeof out->why, "the CUDA device reports no memory size (cudaMemGetInfo)");
        break;
    default:
        out->outcome = MF_MEM_FAILED;
        snprintf(out->why, sizeof out->why, "%s (%d)", name, code);
        break;
    }
}

static const mf_backend_entry k_cuda_entry = {
    .handle = {MF_BACKEND_ID_CUDA},
    .name = "cuda",
    .priority = 200,
    /* ops.h promises q8_0 caches to attention.cu; this says yes once that kernel is in (test_registry pins it) */
    .caps = {.reads_packed_kv = false},
    .supports = mf_cuda_supports,
    .unavailable = mf_cuda_unavailable,
    .enable = cuda_enable,
    .release = cuda_release,
    .compute = cuda_compute,
    .synchronize = cuda_synchronize,
    .kv_format = cuda_kv_format,
    .host_read = cuda_host_read,
    .host_write = cuda_host_write,
    .copy_cross = cuda_copy_cross,
    .await_cross = cuda_await_cross,
    .buf_is_host = false,
    .buf_alloc = cuda_buf_alloc,
    .buf_free = cuda_buf_free,
    .buf_write = cuda_buf_write,
    .buf_read = cuda_buf_read,
    .buf_copy_from = cuda_buf_copy_from,
    .mem_info = cuda_mem_info,
};

const mf_backend_entry *mf_cuda_entry(void) { return &k_cuda_entry; }
#else
const char *mf_cuda_unavailable(void) { return "the CUDA backend is compiled only with make CUDA=1"; }
#endif
