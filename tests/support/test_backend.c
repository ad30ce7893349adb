/* The test-only backend (see test_backend.h). */
#include "test_backend.h"

#include "backend/cpu/cpu_impl.h"
#include "quant/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool g_decline;
static const char *g_unavailable;
static long g_nodes_run, g_in_flight, g_peak;

void mf_test_backend_set_decline(bool on) { g_decline = on; }
void mf_test_backend_set_unavailable(const char *reason) { g_unavailable = reason; }
long mf_test_backend_nodes_run(void) { return g_nodes_run; }
long mf_test_backend_in_flight(void) { return g_in_flight; }
long mf_test_backend_inflight_peak(void) { return g_peak; }
void mf_test_backend_reset_peak(void) { g_peak = g_in_flight; }

bool mf_test_backend_supports(mf_op op, uint32_t type) {
    switch (op) {
    case MF_OP_ADD:
    case MF_OP_MUL:
    case MF_OP_SCALE:
    case MF_OP_SILU: return type == MF_TYPE_F32;
    default: return false;
    }
}

static const char *tb_unavailable(void) { return g_unavailable; }

static int tb_enable(const mf_backend_opts *opts, void **pool, mf_error *err) {
    (void)opts, (void)err;
    static int token;
    *pool = &token; /* no state */
    return 0;
}

static void tb_release(void *pool) { (void)pool; }

static float *at(const mf_node *n, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (float *)((char *)n->data + i0 * (int64_t)n->nb[0] + i1 * (int64_t)n->nb[1] + i2 * (int64_t)n->nb[2] +
                     i3 * (int64_t)n->nb[3]);
}

static int run_node(mf_graph *g, int32_t id, mf_error *err) {
    const mf_node *n = mf_graph_node_c(g, id);
    if (n->op == MF_OP_INPUT || n->op == MF_OP_WEIGHT || n->op == MF_OP_EXTERNAL || n->op == MF_OP_VIEW ||
        n->op == MF_OP_RESHAPE || n->op == MF_OP_PERMUTE)
        return 0;
    if (!mf_test_backend_supports(n->op, n->type))
        return mf_err(err, MF_E_UNSUPPORTED, "the test backend cannot run %s '%s' (node %d)", mf_op_name(n->op), n->name,
                      id);
    const mf_node *a = mf_graph_node_c(g, n->src[0]);
    const mf_node *b = n->src[1] >= 0 ? mf_graph_node_c(g, n->src[1]) : NULL;
    for (int64_t i3 = 0; i3 < n->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < n->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < n->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < n->ne[0]; i0++) {
                    float x = *at(a, i0, i1, i2, i3), y;
                    float z = b ? *at(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]) : 0.0f;
                    switch (n->op) {
                    case MF_OP_ADD: y = x + z; break;
                    case MF_OP_MUL: y = x * z; break;
                    case MF_OP_SCALE: y = x * n->fparams[0]; break;
                    default: /* SILU, with the CPU's bits (cpu/vec.c: llama.cpp's exp for whole groups of 8
                              * along a row, libm's expf for the rest), so split runs stay bitwise */
                        y = x / (1.0f + (i0 < (n->ne[0] & ~(int64_t)7) ? mf_cpu_expf(0.0f - x) : expf(-x)));
                        break;
                    }
                    *at(n, i0, i1, i2, i3) = y;
                }
    g_nodes_run++;
    return 0;
}

static int tb_compute(void *pool, mf_graph *g, int32_t first, int32_t last, mf_error *err) {
    (void)pool;
    for (int32_t i = first; i < last; i++) {
        int rc = run_node(g, i, err);
        if (rc) return rc;
    }
    return 0;
}

static int tb_host_read(void *pool, const mf_node *node, size_t offs, void *dst, size_t n, mf_error *err) {
    (void)pool;
    if (!node->data) return mf_err(err, MF_E_INTERNAL, "test backend: '%s' has no memory", node->name);
    memcpy(dst, (const char *)node->data + offs, n);
    return 0;
}

static int tb_host_write(void *pool, mf_node *node, size_t offs, const void *src, size_t n, mf_error *err) {
    (void)pool;
    if (!node->data) return mf_err(err, MF_E_INTERNAL, "test backend: '%s' has no memory", node->name);
    memcpy((char *)node->data + offs, src, n);
    return 0;
}

typedef struct {
    const void *src;
    void *dst;
    size_t n;
} ticket;

static int tb_copy_cross(void *pool, const mf_node *node, void *staging, size_t n, mf_backend dst, void **out,
                         bool *issued, mf_error *err) {
    (void)pool, (void)dst;
    if (g_decline) {
        *issued = false;
        return 0;
    }
    ticket *t = malloc(sizeof *t);
    if (!t) return mf_err(err, MF_E_NOMEM, "test backend: no memory for a copy ticket");
    *t = (ticket){node->data, staging, n};
    memset(staging, 0xff, n); /* NaN until the await delivers the bytes */
    *out = t;
    *issued = true;
    if (++g_in_flight > g_peak) g_peak = g_in_flight;
    return 0;
}

static int tb_await_cross(void *pool, void *tk, mf_error *err) {
    (void)pool, (void)err;
    ticket *t = tk;
    memcpy(t->dst, t->src, t->n);
    free(t);
    g_in_flight--;
    return 0;
}

static uint32_t tb_kv_format(void *pool) {
    (void)pool;
    return MF_TYPE_F32;
}

int mf_test_backend_register(mf_error *err) {
    const mf_backend_entry e = {
        .handle = {MF_BACKEND_TEST_ID},
        .name = "test",
        .priority = MF_TEST_BACKEND_PRIORITY,
        .caps = {.reads_packed_kv = false},
        .supports = mf_test_backend_supports,
        .unavailable = tb_unavailable,
        .enable = tb_enable,
        .release = tb_release,
        .compute = tb_compute,
        .host_read = tb_host_read,
        .host_write = tb_host_write,
        .copy_cross = tb_copy_cross,
        .await_cross = tb_await_cross,
        .kv_format = tb_kv_format,
    };
    return mf_backend_register_test(&e, err);
}
