/* The CPU backend's registration entry: priority 100, reads packed KV, always available.
 * The support function and the executor are the CPU module's own (backend/cpu/cpu.h); this file only
 * forwards to them. */
#include "backend/backend_entries.h"
#include "backend/cpu/cpu.h"
#include "quant/quant.h"

#include <string.h>
#include <unistd.h>

static const char *cpu_unavailable(void) { return NULL; }

static int cpu_enable(const mf_backend_opts *opts, void **pool, mf_error *err) {
    mf_cpu *cpu = NULL;
    long n = opts && opts->n_threads > 0 ? opts->n_threads : sysconf(_SC_NPROCESSORS_ONLN);
    int rc = mf_cpu_new(n > 0 ? (int)n : 1, &cpu, err);
    if (rc) return rc;
    *pool = cpu;
    return 0;
}

static void cpu_release(void *pool) { mf_cpu_free(pool); }

static int cpu_compute(void *pool, mf_graph *g, int32_t first, int32_t last, mf_error *err) {
    return mf_cpu_compute_range(pool, g, first, last, err);
}

static int cpu_host_read(void *pool, const mf_node *node, size_t offs, void *dst, size_t n, mf_error *err) {
    (void)pool;
    if (!node->data) return mf_err(err, MF_E_INTERNAL, "node '%s' has no memory to read (not allocated or bound)", node->name);
    memcpy(dst, (const char *)node->data + offs, n);
    return 0;
}

static int cpu_host_write(void *pool, mf_node *node, size_t offs, const void *src, size_t n, mf_error *err) {
    (void)pool;
    if (!node->data) return mf_err(err, MF_E_INTERNAL, "node '%s' has no memory to write (not allocated or bound)", node->name);
    memcpy((char *)node->data + offs, src, n);
    return 0;
}

/* Host memory: phase A is the copy itself (a memcpy, or the destination's write hook when its memory is
 * not host), so phase B has nothing left to wait for. */
static int cpu_copy_cross(void *pool, const mf_node *node, void *staging, size_t n, mf_backend dst, void **ticket,
                          bool *issued, mf_error *err) {
    (void)pool;
    if (!node->data) return mf_err(err, MF_E_INTERNAL, "node '%s' has no memory to read (not allocated or bound)", node->name);
    int rc = mf_backend_copy(MF_BACKEND_CPU, node->data, dst, staging, n, err);
    if (rc) return rc;
    *ticket = NULL;
    *issued = true;
    return 0;
}

static int cpu_await_cross(void *pool, void *ticket, mf_error *err) {
    (void)pool, (void)ticket, (void)err;
    return 0;
}

static uint32_t cpu_kv_format(void *pool) {
    (void)pool;
    return MF_TYPE_F16;
}

/* ---- memory: host pointers, used in place by everyone ---- */

static int cpu_buf_alloc(size_t size, void **addr, mf_error *err) {
    void *p = mf_aligned_alloc(64, size ? size : 64);
    if (!p) return mf_err(err, MF_E_NOMEM, "out of host memory for a %zu-byte CPU buffer", size);
    memset(p, 0, size);
    *addr = p;
    return 0;
}

static void cpu_buf_free(void *addr) { mf_aligned_free(addr); }

static int cpu_buf_write(void *addr, const void *src, size_t n, mf_error *err) {
    (void)err;
    memcpy(addr, src, n);
    return 0;
}

static int cpu_buf_read(const void *addr, void *dst, size_t n, mf_error *err) {
    (void)err;
    memcpy(dst, addr, n);
    return 0;
}

/* The weights the CPU owns are repacked into its row-interleaved layouts (quant/repack.c) when one fits. */
static uint32_t cpu_weight_layout(uint32_t type, int64_t K, int64_t N) { return mf_repack_type(type, K, N); }

static const mf_backend_entry k_cpu_entry = {
    .handle = {MF_BACKEND_ID_CPU},
    .name = "cpu",
    .priority = 100,
    .caps = {.reads_packed_kv = true},
    .supports = mf_cpu_supports,
    .unavailable = cpu_unavailable,
    .enable = cpu_enable,
    .release = cpu_release,
    .compute = cpu_compute,
    .synchronize = NULL,
    .host_read = cpu_host_read,
    .host_write = cpu_host_write,
    .copy_cross = cpu_copy_cross,
    .await_cross = cpu_await_cross,
    .kv_format = cpu_kv_format,
    .buf_is_host = true,
    .buf_alloc = cpu_buf_alloc,
    .buf_free = cpu_buf_free,
    .buf_write = cpu_buf_write,
    .buf_read = cpu_buf_read,
    .weight_layout = cpu_weight_layout,
};

const mf_backend_entry *mf_cpu_entry(void) { return &k_cpu_entry; }
