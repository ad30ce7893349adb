/* The test-only backend (see test_backend.h). */
#include "test_backend.h"

#include "backend/cpu/cpu.h"
#include "quant/quant.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static bool g_decline, g_layer_ops;
static const char *g_unavailable;
static long g_nodes_run, g_in_flight, g_peak, g_live;

void mf_test_backend_set_decline(bool on) { g_decline = on; }
void mf_test_backend_set_unavailable(const char *reason) { g_unavailable = reason; }
void mf_test_backend_set_layer_ops(bool on) { g_layer_ops = on; }
long mf_test_backend_nodes_run(void) { return g_nodes_run; }
long mf_test_backend_in_flight(void) { return g_in_flight; }
long mf_test_backend_inflight_peak(void) { return g_peak; }
void mf_test_backend_reset_peak(void) { g_peak = g_in_flight; }
long mf_test_backend_live_buffers(void) { return g_live; }

bool mf_test_backend_supports(mf_op op, uint32_t type) {
    switch (op) {
    case MF_OP_ADD:
    case MF_OP_MUL:
    case MF_OP_SCALE:
    case MF_OP_SILU: return type == MF_TYPE_F32;
    case MF_OP_RMS_NORM:
    case MF_OP_MATMUL: /* f32 weights only: a quantized layer placed here is refused by name */
    case MF_OP_GET_ROWS:
    case MF_OP_SWIGLU:
    case MF_OP_SOFTMAX:
    case MF_OP_ROPE:
    case MF_OP_CONT:
    case MF_OP_ATTENTION: return g_layer_ops && type == MF_TYPE_F32;
    case MF_OP_KV_STORE: return g_layer_ops && (type == MF_TYPE_F32 || type == MF_TYPE_F16);
    default: return false;
    }
}

/* ---- memory: a private table, tagged addresses ----
 * An address is TAG | slot << 36 | offset.  TAG makes it non-canonical on x86-64 (and outside the user
 * address space on aarch64), so any dereference outside these hooks faults at once. */
#define TAG 0xa5e0000000000000ull
#define TAG_MASK 0xfff0000000000000ull
#define SLOT_SHIFT 36
#define OFFS_MASK ((1ull << SLOT_SHIFT) - 1)
#define MAX_SLOTS 4096

static struct {
    void *mem;
    size_t size;
} g_slot[MAX_SLOTS];

/* The real bytes behind [addr, addr + n), or NULL when that is not (wholly) test memory. */
static void *real(const void *addr, size_t n) {
    uint64_t a = (uint64_t)(uintptr_t)addr;
    if ((a & TAG_MASK) != TAG) return NULL;
    uint64_t slot = (a & ~TAG_MASK) >> SLOT_SHIFT, offs = a & OFFS_MASK;
    if (slot >= MAX_SLOTS || !g_slot[slot].mem || offs > g_slot[slot].size || n > g_slot[slot].size - offs) return NULL;
    return (char *)g_slot[slot].mem + offs;
}

bool mf_test_backend_owns(const void *addr) { return real(addr, 0) != NULL; }

static int tb_buf_alloc(size_t size, void **addr, mf_error *err) {
    for (uint64_t i = 1; i < MAX_SLOTS; i++) { /* slot 0 unused: no address is the bare tag */
        if (g_slot[i].mem) continue;
        void *m = calloc(1, size ? size : 1);
        if (!m) return mf_err(err, MF_E_NOMEM, "test backend: no memory for a %zu-byte buffer", size);
        g_slot[i].mem = m;
        g_slot[i].size = size;
        g_live++;
        *addr = (void *)(uintptr_t)(TAG | i << SLOT_SHIFT);
        return 0;
    }
    return mf_err(err, MF_E_NOMEM, "test backend: all %d buffer slots are in use", MAX_SLOTS);
}

static void tb_buf_free(void *addr) {
    if (!addr) return;
    uint64_t a = (uint64_t)(uintptr_t)addr, slot = (a & ~TAG_MASK) >> SLOT_SHIFT;
    if ((a & TAG_MASK) != TAG || (a & OFFS_MASK) || slot >= MAX_SLOTS || !g_slot[slot].mem) return;
    free(g_slot[slot].mem);
    g_slot[slot].mem = NULL;
    g_slot[slot].size = 0;
    g_live--;
}

static int foreign(const void *addr, size_t n, const char *what, mf_error *err) {
    return mf_err(err, MF_E_BACKEND, "test backend: %s %zu bytes at %p, which is not test-backend memory", what, n, addr);
}

static int tb_buf_write(void *addr, const void *src, size_t n, mf_error *err) {
    void *p = real(addr, n);
    if (!p) return foreign(addr, n, "write of", err);
    memcpy(p, src, n);
    return 0;
}

static int tb_buf_read(const void *addr, void *dst, size_t n, mf_error *err) {
    const void *p = real(addr, n);
    if (!p) return foreign(addr, n, "read of", err);
    memcpy(dst, p, n);
    return 0;
}

static int tb_buf_copy_from(mf_backend src, const void *src_addr, void *dst_addr, size_t n, bool *done, mf_error *err) {
    *done = false;
    if (src.id != MF_BACKEND_TEST_ID) return 0; /* the registry bounces through the host */
    const void *s = real(src_addr, n);
    void *d = real(dst_addr, n);
    if (!s || !d) return foreign(s ? dst_addr : src_addr, n, "copy of", err);
    memmove(d, s, n);
    *done = true;
    return 0;
}

/* ---- execution: the CPU's kernels over the real bytes, so split runs stay bitwise ---- */

static const char *tb_unavailable(void) { return g_unavailable; }

static int tb_enable(const mf_backend_opts *opts, void **pool, mf_error *err) {
    (void)opts;
    mf_cpu *cpu = NULL;
    int rc = mf_cpu_new(1, &cpu, err);
    if (rc) return rc;
    *pool = cpu;
    return 0;
}

static void tb_release(void *pool) { mf_cpu_free(pool); }

static bool executes(mf_op op) {
    return !(op == MF_OP_INPUT || op == MF_OP_WEIGHT || op == MF_OP_EXTERNAL || op == MF_OP_VIEW ||
             op == MF_OP_RESHAPE || op == MF_OP_PERMUTE);
}

/* Run node id: every pointer it touches (itself, the root it aliases, its sources) must be test memory
 * - a value of another backend that reached it without a staged copy is refused by name - and is
 * swapped for the real bytes while the CPU kernel runs, then restored. */
static int run_node(mf_cpu *cpu, mf_graph *g, int32_t id, mf_error *err) {
    mf_node *n = mf_graph_node(g, id);
    if (!executes(n->op)) return 0;
    uint32_t t = mf_op_typed_by_src0(n->op) ? mf_graph_node_c(g, n->src[0])->type : n->type;
    if (!mf_test_backend_supports(n->op, t))
        return mf_err(err, MF_E_UNSUPPORTED, "the test backend cannot run %s '%s' (node %d)", mf_op_name(n->op), n->name,
                      id);
    int32_t ids[2 + MF_MAX_SRC];
    void *saved[2 + MF_MAX_SRC];
    int k = 0;
    ids[k++] = id;
    if (n->view_src >= 0) ids[k++] = n->view_src;
    for (int s = 0; s < MF_MAX_SRC; s++)
        if (n->src[s] >= 0) ids[k++] = n->src[s];
    int rc = 0, done = 0;
    for (; done < k; done++) {
        mf_node *x = mf_graph_node(g, ids[done]);
        saved[done] = x->data;
        bool again = false; /* the same node twice (a source that is also the aliased root) */
        for (int j = 0; j < done; j++) again |= ids[j] == ids[done];
        if (again) {
            saved[done] = NULL;
            continue;
        }
        void *p = real(x->data, mf_node_nbytes(x));
        if (!p) {
            rc = mf_err(err, MF_E_BACKEND,
                        "the test backend's node '%s' (#%d) reaches '%s' (#%d) at %p, which is not test-backend "
                        "memory (another backend's value without a staged copy)",
                        n->name, id, x->name, ids[done], x->data);
            break;
        }
        x->data = p;
    }
    if (!rc) rc = mf_cpu_compute_range(cpu, g, id, id + 1, err);
    for (int j = done - 1; j >= 0; j--)
        if (saved[j]) mf_graph_node(g, ids[j])->data = saved[j];
    if (n->view_src >= 0) n->data = (char *)mf_graph_node(g, n->view_src)->data + n->view_offs;
    if (!rc) g_nodes_run++;
    return rc;
}

static int tb_compute(void *pool, mf_graph *g, int32_t first, int32_t last, mf_error *err) {
    for (int32_t i = first; i < last; i++) {
        int rc = run_node(pool, g, i, err);
        if (rc) return rc;
    }
    return 0;
}

static int tb_host_read(void *pool, const mf_node *node, size_t offs, void *dst, size_t n, mf_error *err) {
    (void)pool;
    return tb_buf_read((const char *)node->data + offs, dst, n, err);
}

static int tb_host_write(void *pool, mf_node *node, size_t offs, const void *src, size_t n, mf_error *err) {
    (void)pool;
    return tb_buf_write((char *)node->data + offs, src, n, err);
}

/* ---- the deliberately asynchronous cross copy ---- */

typedef struct {
    const void *src;
    mf_backend dst;
    void *staging;
    size_t n;
} ticket;

static int tb_copy_cross(void *pool, const mf_node *node, void *staging, size_t n, mf_backend dst, void **out,
                         bool *issued, mf_error *err) {
    (void)pool;
    if (g_decline) {
        *issued = false;
        return 0;
    }
    if (!real(node->data, n)) return foreign(node->data, n, "staging", err);
    ticket *t = malloc(sizeof *t);
    if (!t) return mf_err(err, MF_E_NOMEM, "test backend: no memory for a copy ticket");
    *t = (ticket){node->data, dst, staging, n};
    if (mf_backend_is_host(dst)) memset(staging, 0xff, n); /* NaN until the await delivers the bytes */
    *out = t;
    *issued = true;
    if (++g_in_flight > g_peak) g_peak = g_in_flight;
    return 0;
}

static int tb_await_cross(void *pool, void *tk, mf_error *err) {
    (void)pool;
    ticket *t = tk;
    int rc = mf_backend_copy((mf_backend){MF_BACKEND_TEST_ID}, t->src, t->dst, t->staging, t->n, err);
    free(t);
    g_in_flight--;
    return rc;
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
        .buf_is_host = false,
        .buf_alloc = tb_buf_alloc,
        .buf_free = tb_buf_free,
        .buf_write = tb_buf_write,
        .buf_read = tb_buf_read,
        .buf_copy_from = tb_buf_copy_from,
    };
    return mf_backend_register_test(&e, err);
}
