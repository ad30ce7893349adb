/* graph: node storage, builders with shape/type validation at creation, zero-copy views. */
#include "graph/graph_internal.h"
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[MF_OP_COUNT] = {
    [MF_OP_INPUT] = "input",       [MF_OP_WEIGHT] = "weight",     [MF_OP_EXTERNAL] = "external",
    [MF_OP_GET_ROWS] = "get_rows", [MF_OP_RMS_NORM] = "rms_norm", [MF_OP_MATMUL] = "matmul",
    [MF_OP_ADD] = "add",           [MF_OP_MUL] = "mul",           [MF_OP_SCALE] = "scale",
    [MF_OP_SILU] = "silu",         [MF_OP_SWIGLU] = "swiglu",     [MF_OP_SOFTMAX] = "softmax",
    [MF_OP_ROPE] = "rope",         [MF_OP_KV_STORE] = "kv_store", [MF_OP_ATTENTION] = "attention",
    [MF_OP_VIEW] = "view",         [MF_OP_RESHAPE] = "reshape",   [MF_OP_PERMUTE] = "permute",
    [MF_OP_CONT] = "cont",         [MF_OP_HADAMARD] = "hadamard", [MF_OP_TOPK] = "topk",
    [MF_OP_MATMUL_ID] = "matmul_id", [MF_OP_MOE_SUM] = "moe_sum", [MF_OP_DIV] = "div",
};

const char *mf_op_name(mf_op op) {
    if ((int)op < 0 || op >= MF_OP_COUNT || !op_names[op]) return "unknown";
    return op_names[op];
}

mf_graph *mf_graph_new(void) {
    mf_graph *g = calloc(1, sizeof *g);
    if (g) g->err_id = -1;
    return g;
}

void mf_graph_free(mf_graph *g) {
    if (!g) return;
    free(g->nodes);
    free(g->offs);
    for (int b = 0; b < MF_GRAPH_ARENAS; b++) mf_aligned_free(g->own[b]);
    free(g);
}

int mf_graph_error(const mf_graph *g, mf_error *err) {
    if (!g) return mf_err(err, MF_E_INVAL, "graph is NULL (mf_graph_new failed: out of memory)");
    if (!g->has_err) return 0;
    if (err) *err = g->err;
    return g->err.code;
}

int32_t mf_graph_n_nodes(const mf_graph *g) {
    return g ? g->n_nodes : 0;
}

mf_node *mf_graph_node(mf_graph *g, int32_t id) {
    if (!g || id < 0 || id >= g->n_nodes) return NULL;
    return &g->nodes[id];
}

const mf_node *mf_graph_node_c(const mf_graph *g, int32_t id) {
    if (!g || id < 0 || id >= g->n_nodes) return NULL;
    return &g->nodes[id];
}

int32_t mf_graph_find(const mf_graph *g, const char *name) {
    if (!g || !name) return -1;
    for (int32_t i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, name)) return i;
    return -1;
}

/* ---- shape helpers ---- */

static int64_t blck_of(uint32_t type) {
    const mf_type_info *ti = mf_type_get(type);
    return ti ? ti->blck_size : 1;
}

static size_t tsize_of(uint32_t type) {
    const mf_type_info *ti = mf_type_get(type);
    return ti ? ti->type_size : 0;
}

bool mf_node_is_contiguous(const mf_node *n) {
    size_t ts = tsize_of(n->type);
    int64_t bs = blck_of(n->type);
    if (n->nb[0] != ts) return false;
    size_t expect = ts * (size_t)(n->ne[0] / bs);
    for (int i = 1; i < MF_MAX_DIMS; i++) {
        /* a dimension of extent 1 is never stepped over, so its stride does not matter */
        if (n->ne[i] != 1 && n->nb[i] != expect) return false;
        expect *= (size_t)n->ne[i];
    }
    return true;
}

int64_t mf_node_nelements(const mf_node *n) {
    return n->ne[0] * n->ne[1] * n->ne[2] * n->ne[3];
}

size_t mf_node_nbytes(const mf_node *n) {
    for (int i = 0; i < MF_MAX_DIMS; i++)
        if (n->ne[i] <= 0) return 0;
    int64_t bs = blck_of(n->type);
    size_t bytes;
    if (bs == 1) {
        bytes = tsize_of(n->type);
        for (int i = 0; i < MF_MAX_DIMS; i++) bytes += (size_t)(n->ne[i] - 1) * n->nb[i];
    } else {
        bytes = (size_t)(n->ne[0] / bs) * n->nb[0];
        for (int i = 1; i < MF_MAX_DIMS; i++) bytes += (size_t)(n->ne[i] - 1) * n->nb[i];
    }
    return bytes;
}

static void fmt_shape(char *buf, size_t cap, const mf_node *n) {
    size_t at = 0;
    at += (size_t)snprintf(buf + at, cap - at, "[");
    for (int i = 0; i < n->n_dims && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", i ? ", " : "", (long long)n->ne[i]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
}

static void fmt_ne(char *buf, size_t cap, int n_dims, const int64_t *ne) {
    mf_node tmp = {0};
    tmp.n_dims = n_dims;
    for (int i = 0; i < n_dims && i < MF_MAX_DIMS; i++) tmp.ne[i] = ne[i];
    fmt_shape(buf, cap, &tmp);
}

/* "'name' [a, b] f32" (or "#id [a, b] f32" when unnamed) for messages */
static void describe(const mf_graph *g, int32_t id, char *buf, size_t cap) {
    const mf_node *n = &g->nodes[id];
    char shape[128];
    fmt_shape(shape, sizeof shape, n);
    if (n->name[0])
        snprintf(buf, cap, "'%s' %s %s", n->name, shape, mf_type_name(n->type));
    else
        snprintf(buf, cap, "#%d (%s) %s %s", id, mf_op_name(n->op), shape, mf_type_name(n->type));
}

static void render_err(mf_graph *g, const char *name) {
    char who[96];
    if (name && name[0])
        snprintf(who, sizeof who, "'%s'", name);
    else
        snprintf(who, sizeof who, "(node #%d)", g->err_id);
    snprintf(g->err.msg, sizeof g->err.msg, "%s %s: %s", g->err_op, who, g->err_detail);
}

static int32_t fail(mf_graph *g, mf_op op, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int32_t fail(mf_graph *g, mf_op op, int code, const char *fmt, ...) {
    if (g->has_err) return MF_NODE_INVALID;
    g->has_err = true;
    g->err_fresh = true;
    g->err.code = code;
    g->err_id = g->n_nodes;
    snprintf(g->err_op, sizeof g->err_op, "%s", mf_op_name(op));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->err_detail, sizeof g->err_detail, fmt, ap);
    va_end(ap);
    render_err(g, NULL);
    return MF_NODE_INVALID;
}

/* every builder starts here: the previous failure is no longer the latest call */
static void begin(mf_graph *g) {
    g->err_fresh = false;
}

static bool valid_id(const mf_graph *g, int32_t id) {
    return id >= 0 && id < g->n_nodes;
}

static void set_contiguous_strides(mf_node *n) {
    size_t ts = tsize_of(n->type);
    int64_t bs = blck_of(n->type);
    n->nb[0] = ts;
    n->nb[1] = ts * (size_t)(n->ne[0] / bs);
    for (int i = 2; i < MF_MAX_DIMS; i++) n->nb[i] = n->nb[i - 1] * (size_t)n->ne[i - 1];
}

static mf_node *push(mf_graph *g, mf_op op, uint32_t type, int n_dims, const int64_t *ne, int32_t *id_out) {
    if (g->n_nodes == g->cap) {
        int32_t nc = g->cap ? g->cap * 2 : 256;
        mf_node *nn = realloc(g->nodes, (size_t)nc * sizeof *nn);
        if (!nn) {
            fail(g, op, MF_E_NOMEM, "out of memory growing the graph to %d nodes", nc);
            return NULL;
        }
        g->nodes = nn;
        g->cap = nc;
    }
    int32_t id = g->n_nodes++;
    mf_node *n = &g->nodes[id];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->type = type;
    n->n_dims = n_dims;
    for (int i = 0; i < MF_MAX_DIMS; i++) n->ne[i] = i < n_dims ? ne[i] : 1;
    for (int i = 0; i < MF_MAX_SRC; i++) n->src[i] = -1;
    n->view_src = -1;
    n->layer = -1;
    n->backend = -1;
    set_contiguous_strides(n);
    *id_out = id;
    return n;
}

/* checks shared by leaves: a known type, 1..4 dims, positive extents, ne0 a whole number of blocks */
static bool check_leaf(mf_graph *g, mf_op op, const char *name, uint32_t type, int n_dims,
                       const int64_t *ne) {
    if (!mf_type_get(type)) {
        fail(g, op, MF_E_TYPE, "'%s': type id %u is not a known tensor type", name ? name : "?", type);
        return false;
    }
    if (n_dims < 1 || n_dims > MF_MAX_DIMS || !ne) {
        fail(g, op, MF_E_INVAL, "'%s': %d dimensions given, 1..%d are supported", name ? name : "?", n_dims,
             MF_MAX_DIMS);
        return false;
    }
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] <= 0) {
            char s[128];
            fmt_ne(s, sizeof s, n_dims, ne);
            fail(g, op, MF_E_INVAL, "'%s': shape %s has a non-positive extent in dim %d", name ? name : "?",
                 s, i);
            return false;
        }
    }
    int64_t bs = blck_of(type);
    if (ne[0] % bs) {
        char s[128];
        fmt_ne(s, sizeof s, n_dims, ne);
        fail(g, op, MF_E_INVAL, "'%s': shape %s: ne0 %lld is not a multiple of %s's block size %lld",
             name ? name : "?", s, (long long)ne[0], mf_type_name(type), (long long)bs);
        return false;
    }
    return true;
}

static int32_t leaf(mf_graph *g, mf_op op, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                    const void *data) {
    if (!g) return MF_NODE_INVALID;
    begin(g);
    if (g->has_err) return MF_NODE_INVALID;
    if (!check_leaf(g, op, name, type, n_dims, ne)) return MF_NODE_INVALID;
    int32_t id;
    mf_node *n = push(g, op, type, n_dims, ne, &id);
    if (!n) return MF_NODE_INVALID;
    if (name) snprintf(n->name, sizeof n->name, "%s", name);
    n->data = (void *)data;
    return id;
}

int32_t mf_g_input(mf_graph *g, const char *name, uint32_t type, int n_dims, const int64_t *ne) {
    return leaf(g, MF_OP_INPUT, name, type, n_dims, ne, NULL);
}

int32_t mf_g_weight(mf_graph *g, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                    const void *data) {
    return leaf(g, MF_OP_WEIGHT, name, type, n_dims, ne, data);
}

int32_t mf_g_external(mf_graph *g, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                      void *data) {
    return leaf(g, MF_OP_EXTERNAL, name, type, n_dims, ne, data);
}

/* Validates that every source id exists; an invalid source means an earlier builder failed (and
 * recorded the error) unless no error is recorded, in which case this is the first error. */
static bool srcs_ok(mf_graph *g, mf_op op, int n, const int32_t *ids) {
    if (!g) return false;
    begin(g);
    for (int i = 0; i < n; i++) {
        if (!valid_id(g, ids[i])) {
            if (!g->has_err)
                fail(g, op, MF_E_INVAL, "source %d is node id %d, which does not exist (graph has %d nodes)",
                     i, ids[i], g->n_nodes);
            return false;
        }
    }
    return !g->has_err;
}

static bool need_type(mf_graph *g, mf_op op, const char *role, int32_t id, uint32_t type) {
    if (g->nodes[id].type == type) return true;
    char d[256];
    describe(g, id, d, sizeof d);
    fail(g, op, MF_E_TYPE, "%s %s must be %s", role, d, mf_type_name(type));
    return false;
}

static bool need_rows_f32(mf_graph *g, mf_op op, const char *role, int32_t id) {
    if (!need_type(g, op, role, id, MF_TYPE_F32)) return false;
    if (g->nodes[id].nb[0] != sizeof(float)) {
        char d[256];
        describe(g, id, d, sizeof d);
        fail(g, op, MF_E_INVAL, "%s %s has element stride %zu; rows must be dense (add a cont)", role, d,
             g->nodes[id].nb[0]);
        return false;
    }
    return true;
}

/* a new f32 contiguous result with src0's shape */
static int32_t unary_like(mf_graph *g, mf_op op, int32_t x, int n_src, const int32_t *src) {
    int32_t id;
    mf_node *n = push(g, op, MF_TYPE_F32, g->nodes[x].n_dims, g->nodes[x].ne, &id);
    if (!n) return MF_NODE_INVALID;
    for (int i = 0; i < n_src; i++) n->src[i] = src[i];
    return id;
}

int32_t mf_g_get_rows(mf_graph *g, int32_t table, int32_t ids) {
    const int32_t s[2] = {table, ids};
    if (!srcs_ok(g, MF_OP_GET_ROWS, 2, s)) return MF_NODE_INVALID;
    if (!need_type(g, MF_OP_GET_ROWS, "ids", ids, MF_TYPE_I32)) return MF_NODE_INVALID;
    const mf_node *t = &g->nodes[table], *i = &g->nodes[ids];
    if (t->ne[2] != 1 || t->ne[3] != 1 || t->nb[0] != tsize_of(t->type) || i->ne[1] != 1 || i->ne[2] != 1 ||
        i->ne[3] != 1 || i->nb[0] != sizeof(int32_t)) {
        char a[256], b[256];
        describe(g, table, a, sizeof a);
        describe(g, ids, b, sizeof b);
        return fail(g, MF_OP_GET_ROWS, MF_E_INVAL,
                    "table %s must be 2-D with dense rows and ids %s a dense 1-D list", a, b);
    }
    const int64_t ne[2] = {t->ne[0], i->ne[0]};
    int32_t id;
    mf_node *n = push(g, MF_OP_GET_ROWS, MF_TYPE_F32, 2, ne, &id);
    if (!n) return MF_NODE_INVALID;
    n->src[0] = table;
    n->src[1] = ids;
    return id;
}

int32_t mf_g_rms_norm(mf_graph *g, int32_t x, float eps) {
    if (!srcs_ok(g, MF_OP_RMS_NORM, 1, &x)) return MF_NODE_INVALID;
    if (!need_rows_f32(g, MF_OP_RMS_NORM, "input", x)) return MF_NODE_INVALID;
    if (!(eps >= 0.0f)) return fail(g, MF_OP_RMS_NORM, MF_E_INVAL, "eps %g must be >= 0", (double)eps);
    int32_t id = unary_like(g, MF_OP_RMS_NORM, x, 1, &x);
    if (id >= 0) g->nodes[id].fparams[0] = eps;
    return id;
}

int32_t mf_g_matmul(mf_graph *g, int32_t w, int32_t x) {
    const int32_t s[2] = {w, x};
    if (!srcs_ok(g, MF_OP_MATMUL, 2, s)) return MF_NODE_INVALID;
    if (!need_rows_f32(g, MF_OP_MATMUL, "input", x)) return MF_NODE_INVALID;
    const mf_node *wn = &g->nodes[w], *xn = &g->nodes[x];
    char a[256];
    if (wn->ne[2] != 1 || wn->ne[3] != 1) {
        describe(g, w, a, sizeof a);
        return fail(g, MF_OP_MATMUL, MF_E_INVAL, "weight %s must be 2-D [K, N]", a);
    }
    if (wn->nb[0] != tsize_of(wn->type)) {
        describe(g, w, a, sizeof a);
        return fail(g, MF_OP_MATMUL, MF_E_INVAL, "weight %s must have dense rows (nb0 %zu)", a, wn->nb[0]);
    }
    if (wn->ne[0] != xn->ne[0]) {
        char sa[128], sb[128];
        fmt_shape(sa, sizeof sa, wn);
        fmt_shape(sb, sizeof sb, xn);
        return fail(g, MF_OP_MATMUL, MF_E_INVAL,
                    "weight %s%s%s %s and input %s%s%s %s disagree on ne0 (%lld vs %lld)",
                    wn->name[0] ? "'" : "", wn->name, wn->name[0] ? "'" : "", sa, xn->name[0] ? "'" : "",
                    xn->name, xn->name[0] ? "'" : "", sb, (long long)wn->ne[0], (long long)xn->ne[0]);
    }
    const int64_t ne[4] = {wn->ne[1], xn->ne[1], xn->ne[2], xn->ne[3]};
    int32_t id;
    mf_node *n = push(g, MF_OP_MATMUL, MF_TYPE_F32, xn->n_dims < 2 ? 2 : xn->n_dims, ne, &id);
    if (!n) return MF_NODE_INVALID;
    n->src[0] = w;
    n->src[1] = x;
    return id;
}

static int32_t binary_bcast(mf_graph *g, mf_op op, int32_t a, int32_t b) {
    const int32_t s[2] = {a, b};
    if (!srcs_ok(g, op, 2, s)) return MF_NODE_INVALID;
    if (!need_rows_f32(g, op, "src0", a) || !need_rows_f32(g, op, "src1", b)) return MF_NODE_INVALID;
    const mf_node *an = &g->nodes[a], *bn = &g->nodes[b];
    for (int i = 0; i < MF_MAX_DIMS; i++) {
        if (bn->ne[i] != 1 && bn->ne[i] != an->ne[i]) {
            char da[256], db[256];
            describe(g, a, da, sizeof da);
            describe(g, b, db, sizeof db);
            return fail(
                g, op, MF_E_INVAL,
                "src0 %s and src1 %s disagree on ne%d (%lld vs %lld); src1 extents must be 1 or equal", da,
                db, i, (long long)an->ne[i], (long long)bn->ne[i]);
        }
    }
    return unary_like(g, op, a, 2, s);
}

int32_t mf_g_add(mf_graph *g, int32_t a, int32_t b) {
    return binary_bcast(g, MF_OP_ADD, a, b);
}
int32_t mf_g_mul(mf_graph *g, int32_t a, int32_t b) {
    return binary_bcast(g, MF_OP_MUL, a, b);
}
int32_t mf_g_div(mf_graph *g, int32_t a, int32_t b) {
    return binary_bcast(g, MF_OP_DIV, a, b);
}

static int32_t unary_f32(mf_graph *g, mf_op op, int32_t x) {
    if (!srcs_ok(g, op, 1, &x)) return MF_NODE_INVALID;
    if (!need_rows_f32(g, op, "input", x)) return MF_NODE_INVALID;
    return unary_like(g, op, x, 1, &x);
}

int32_t mf_g_scale(mf_graph *g, int32_t x, float s) {
    int32_t id = unary_f32(g, MF_OP_SCALE, x);
    if (id >= 0) g->nodes[id].fparams[0] = s;
    return id;
}

int32_t mf_g_silu(mf_graph *g, int32_t x) {
    return unary_f32(g, MF_OP_SILU, x);
}
int32_t mf_g_softmax(mf_graph *g, int32_t x) {
    return unary_f32(g, MF_OP_SOFTMAX, x);
}

int32_t mf_g_hadamard(mf_graph *g, int32_t x, int n) {
    if (!srcs_ok(g, MF_OP_HADAMARD, 1, &x)) return MF_NODE_INVALID;
    if (n < 2 || (n & (n - 1)) || g->nodes[x].ne[0] % n) {
        char da[256];
        describe(g, x, da, sizeof da);
        return fail(g, MF_OP_HADAMARD, MF_E_INVAL, "rotation size %d must be a power of two >= 2 that divides ne0 of %s",
                    n, da);
    }
    int32_t id = unary_f32(g, MF_OP_HADAMARD, x);
    if (id >= 0) g->nodes[id].iparams[0] = n;
    return id;
}

int32_t mf_g_swiglu(mf_graph *g, int32_t gate, int32_t up) {
    const int32_t s[2] = {gate, up};
    if (!srcs_ok(g, MF_OP_SWIGLU, 2, s)) return MF_NODE_INVALID;
    if (!need_rows_f32(g, MF_OP_SWIGLU, "gate", gate) || !need_rows_f32(g, MF_OP_SWIGLU, "up", up))
        return MF_NODE_INVALID;
    for (int i = 0; i < MF_MAX_DIMS; i++) {
        if (g->nodes[gate].ne[i] != g->nodes[up].ne[i]) {
            char da[256], db[256];
            describe(g, gate, da, sizeof da);
            describe(g, up, db, sizeof db);
            return fail(g, MF_OP_SWIGLU, MF_E_INVAL, "gate %s and up %s disagree on ne%d (%lld vs %lld)", da,
                        db, i, (long long)g->nodes[gate].ne[i], (long long)g->nodes[up].ne[i]);
        }
    }
    return unary_like(g, MF_OP_SWIGLU, gate, 2, s);
}

int32_t mf_g_rope(mf_graph *g, int32_t x, int32_t pos, const mf_rope *r) {
    const int n_rot = r->n_rot, mode = r->mode;
    const float freq_base = r->freq_base, freq_scale = r->freq_scale;
    const int32_t s[2] = {x, pos};
    if (!srcs_ok(g, MF_OP_ROPE, 2, s)) return MF_NODE_INVALID;
    if (!need_rows_f32(g, MF_OP_ROPE, "input", x) || !need_type(g, MF_OP_ROPE, "positions", pos, MF_TYPE_I32))
        return MF_NODE_INVALID;
    const mf_node *xn = &g->nodes[x], *pn = &g->nodes[pos];
    char da[256], db[256];
    if (pn->ne[0] != xn->ne[2] || pn->ne[1] != 1 || pn->nb[0] != sizeof(int32_t) || xn->ne[3] != 1) {
        describe(g, x, da, sizeof da);
        describe(g, pos, db, sizeof db);
        return fail(g, MF_OP_ROPE, MF_E_INVAL,
                    "input %s [head_dim, n_head, n_tok] and positions %s must agree on n_tok (%lld vs %lld)",
                    da, db, (long long)xn->ne[2], (long long)pn->ne[0]);
    }
    if (n_rot <= 0 || n_rot % 2 || n_rot > xn->ne[0]) {
        describe(g, x, da, sizeof da);
        return fail(g, MF_OP_ROPE, MF_E_INVAL, "n_rot %d must be even and in 2..%lld for input %s", n_rot,
                    (long long)xn->ne[0], da);
    }
    if (mode != 0 && mode != MF_ROPE_NEOX)
        return fail(g, MF_OP_ROPE, MF_E_UNSUPPORTED, "rope mode %d is not supported (0 = normal, %d = neox)",
                    mode, MF_ROPE_NEOX);
    if (!(freq_base > 0.0f) || !(freq_scale > 0.0f))
        return fail(g, MF_OP_ROPE, MF_E_INVAL, "freq_base %g and freq_scale %g must be > 0",
                    (double)freq_base, (double)freq_scale);
    if (!isfinite(r->ext_factor) || !isfinite(r->attn_factor) || !(r->attn_factor > 0.0f) ||
        !isfinite(r->corr_dims[0]) || !isfinite(r->corr_dims[1]))
        return fail(g, MF_OP_ROPE, MF_E_INVAL, "YaRN ext_factor %g, attn_factor %g (> 0) and corr_dims %g..%g must be finite",
                    (double)r->ext_factor, (double)r->attn_factor, (double)r->corr_dims[0], (double)r->corr_dims[1]);
    int32_t id = unary_like(g, MF_OP_ROPE, x, 2, s);
    if (id < 0) return id;
    mf_node *n = &g->nodes[id];
    n->iparams[0] = n_rot;
    n->iparams[1] = mode;
    n->fparams[0] = freq_base;
    n->fparams[1] = freq_scale;
    n->fparams[2] = r->ext_factor;
    n->fparams[3] = r->attn_factor;
    n->fparams[4] = r->corr_dims[0];
    n->fparams[5] = r->corr_dims[1];
    return id;
}

mf_rope mf_node_rope(const mf_node *n) {
    return (mf_rope){.n_rot = n->iparams[0],
                     .mode = n->iparams[1],
                     .freq_base = n->fparams[0],
                     .freq_scale = n->fparams[1],
                     .ext_factor = n->fparams[2],
                     .attn_factor = n->fparams[3],
                     .corr_dims = {n->fparams[4], n->fparams[5]}};
}

/* root buffer of a node: itself unless it aliases another node */
static int32_t root_of(const mf_graph *g, int32_t id) {
    const mf_node *n = &g->nodes[id];
    return n->view_src >= 0 ? n->view_src : id;
}

int32_t mf_g_kv_store(mf_graph *g, int32_t cache, int32_t rows, int32_t cells) {
    const int32_t s[3] = {cache, rows, cells};
    if (!srcs_ok(g, MF_OP_KV_STORE, 3, s)) return MF_NODE_INVALID;
    if (!need_rows_f32(g, MF_OP_KV_STORE, "rows", rows) ||
        !need_type(g, MF_OP_KV_STORE, "cells", cells, MF_TYPE_I32))
        return MF_NODE_INVALID;
    const mf_node *c = &g->nodes[cache], *r = &g->nodes[rows], *ce = &g->nodes[cells];
    char da[256], db[256], dc[256];
    describe(g, cache, da, sizeof da);
    describe(g, rows, db, sizeof db);
    describe(g, cells, dc, sizeof dc);
    int32_t croot = root_of(g, cache);
    mf_op rop = g->nodes[croot].op;
    if (rop != MF_OP_EXTERNAL)
        return fail(g, MF_OP_KV_STORE, MF_E_INVAL,
                    "cache %s must be (a view of) an external buffer, not a %s", da, mf_op_name(rop));
    if (c->ne[2] != 1 || c->ne[3] != 1 || c->nb[0] != tsize_of(c->type) || r->ne[2] != 1 || r->ne[3] != 1)
        return fail(g, MF_OP_KV_STORE, MF_E_INVAL, "cache %s and rows %s must be 2-D with dense rows", da,
                    db);
    if (c->ne[0] != r->ne[0])
        return fail(g, MF_OP_KV_STORE, MF_E_INVAL, "cache %s and rows %s disagree on ne0 (%lld vs %lld)", da,
                    db, (long long)c->ne[0], (long long)r->ne[0]);
    if (ce->ne[0] != r->ne[1] || ce->ne[1] != 1 || ce->nb[0] != sizeof(int32_t))
        return fail(g, MF_OP_KV_STORE, MF_E_INVAL, "rows %s and cells %s disagree on n_tok (%lld vs %lld)",
                    db, dc, (long long)r->ne[1], (long long)ce->ne[0]);
    int32_t id;
    mf_node *n = push(g, MF_OP_KV_STORE, c->type, c->n_dims, c->ne, &id);
    if (!n) return MF_NODE_INVALID;
    c = &g->nodes[cache];
    memcpy(n->nb, c->nb, sizeof n->nb);
    n->src[0] = cache;
    n->src[1] = rows;
    n->src[2] = cells;
    n->view_src = croot;
    n->view_offs = c->view_src >= 0 ? c->view_offs : 0;
    return id;
}

int32_t mf_g_attention(mf_graph *g, int32_t q, int32_t k, int32_t v, int32_t spans, int n_head_kv,
                       float scale) {
    const int32_t s[4] = {q, k, v, spans};
    if (!srcs_ok(g, MF_OP_ATTENTION, 4, s)) return MF_NODE_INVALID;
    if (!need_rows_f32(g, MF_OP_ATTENTION, "q", q) ||
        !need_type(g, MF_OP_ATTENTION, "spans", spans, MF_TYPE_I32))
        return MF_NODE_INVALID;
    const mf_node *qn = &g->nodes[q], *kn = &g->nodes[k], *vn = &g->nodes[v], *wn = &g->nodes[spans];
    char dq[256], dk[256], dv[256], dw[256];
    describe(g, q, dq, sizeof dq);
    describe(g, k, dk, sizeof dk);
    describe(g, v, dv, sizeof dv);
    describe(g, spans, dw, sizeof dw);
    int64_t hd = qn->ne[0], n_head = qn->ne[1], n_tok = qn->ne[2];
    if (qn->ne[3] != 1)
        return fail(g, MF_OP_ATTENTION, MF_E_INVAL, "q %s must be 3-D [head_dim, n_head, n_tok]", dq);
    if (n_head_kv <= 0 || n_head % n_head_kv)
        return fail(g, MF_OP_ATTENTION, MF_E_INVAL, "n_head %lld of q %s is not a multiple of n_head_kv %d",
                    (long long)n_head, dq, n_head_kv);
    if (kn->ne[0] != hd * n_head_kv || kn->ne[2] != 1 || kn->ne[3] != 1)
        return fail(g, MF_OP_ATTENTION, MF_E_INVAL,
                    "k %s must be [head_dim*n_head_kv = %lld, n_cells] for q %s", dk,
                    (long long)(hd * n_head_kv), dq);
    if (vn->ne[0] != kn->ne[0] || vn->ne[1] != kn->ne[1] || vn->ne[2] != 1 || vn->ne[3] != 1)
        return fail(g, MF_OP_ATTENTION, MF_E_INVAL, "k %s and v %s must have the same shape", dk, dv);
    if (kn->nb[0] != tsize_of(kn->type) || vn->nb[0] != tsize_of(vn->type))
        return fail(g, MF_OP_ATTENTION, MF_E_INVAL, "k %s and v %s must have dense rows", dk, dv);
    if (hd % blck_of(kn->type) || hd % blck_of(vn->type))
        return fail(g, MF_OP_ATTENTION, MF_E_INVAL,
                    "head_dim %lld is not a whole number of k %s / v %s blocks", (long long)hd, dk, dv);
    if (wn->ne[0] != 2 || wn->ne[1] != n_tok + 1 || wn->ne[2] != 1 || wn->ne[3] != 1 ||
        wn->nb[0] != sizeof(int32_t))
        return fail(g, MF_OP_ATTENTION, MF_E_INVAL, "spans %s must be [2, n_tok + 1 = %lld] for q %s", dw,
                    (long long)(n_tok + 1), dq);
    const int64_t ne[2] = {hd * n_head, n_tok};
    int32_t id;
    mf_node *n = push(g, MF_OP_ATTENTION, MF_TYPE_F32, 2, ne, &id);
    if (!n) return MF_NODE_INVALID;
    for (int i = 0; i < 4; i++) n->src[i] = s[i];
    n->iparams[0] = n_head_kv;
    n->fparams[0] = scale;
    return id;
}

/* An alias of x's memory: view_src is x's root, view_offs accumulates through views of views. */
static int32_t alias(mf_graph *g, mf_op op, int32_t x, int n_dims, const int64_t *ne, const size_t *nb,
                     uint64_t offs) {
    int32_t root = root_of(g, x);
    uint64_t base = g->nodes[x].view_src >= 0 ? g->nodes[x].view_offs : 0;
    int32_t id;
    mf_node *n = push(g, op, g->nodes[x].type, n_dims, ne, &id);
    if (!n) return MF_NODE_INVALID;
    if (nb) memcpy(n->nb, nb, sizeof n->nb);
    n->src[0] = x;
    n->view_src = root;
    n->view_offs = base + offs;
    const mf_node *r = &g->nodes[root];
    size_t need = mf_node_nbytes(n);
    if (n->view_offs + need > mf_node_nbytes(r)) {
        char dx[256], sv[128];
        describe(g, x, dx, sizeof dx);
        fmt_shape(sv, sizeof sv, n);
        g->n_nodes--;
        return fail(
            g, op, MF_E_RANGE,
            "%s %s at byte offset %llu spans %zu bytes, past the end of its buffer (%zu bytes) under %s",
            mf_op_name(op), sv, (unsigned long long)n->view_offs, need, mf_node_nbytes(r), dx);
    }
    return id;
}

int32_t mf_g_view(mf_graph *g, int32_t x, int n_dims, const int64_t *ne, const size_t *nb, uint64_t offs) {
    if (!srcs_ok(g, MF_OP_VIEW, 1, &x)) return MF_NODE_INVALID;
    const char *nm = g->nodes[x].name;
    if (!check_leaf(g, MF_OP_VIEW, nm, g->nodes[x].type, n_dims, ne)) return MF_NODE_INVALID;
    size_t full[MF_MAX_DIMS];
    if (nb) {
        for (int i = 0; i < MF_MAX_DIMS; i++) full[i] = i < n_dims ? nb[i] : 0;
        /* strides of the implicit trailing dims of extent 1 */
        for (int i = n_dims; i < MF_MAX_DIMS; i++)
            full[i] = full[i - 1] * (size_t)(i - 1 < n_dims ? ne[i - 1] : 1);
    }
    return alias(g, MF_OP_VIEW, x, n_dims, ne, nb ? full : NULL, offs);
}

int32_t mf_g_reshape(mf_graph *g, int32_t x, int n_dims, const int64_t *ne) {
    if (!srcs_ok(g, MF_OP_RESHAPE, 1, &x)) return MF_NODE_INVALID;
    const mf_node *xn = &g->nodes[x];
    if (!check_leaf(g, MF_OP_RESHAPE, xn->name, xn->type, n_dims, ne)) return MF_NODE_INVALID;
    char dx[256], s[128];
    describe(g, x, dx, sizeof dx);
    fmt_ne(s, sizeof s, n_dims, ne);
    if (!mf_node_is_contiguous(xn))
        return fail(g, MF_OP_RESHAPE, MF_E_INVAL, "reshape of non-contiguous %s to %s (add a cont first)", dx,
                    s);
    int64_t cnt = 1;
    for (int i = 0; i < n_dims; i++) cnt *= ne[i];
    if (cnt != mf_node_nelements(xn))
        return fail(g, MF_OP_RESHAPE, MF_E_INVAL, "%s has %lld elements, shape %s has %lld", dx,
                    (long long)mf_node_nelements(xn), s, (long long)cnt);
    return alias(g, MF_OP_RESHAPE, x, n_dims, ne, NULL, 0);
}

int32_t mf_g_permute(mf_graph *g, int32_t x, int a0, int a1, int a2, int a3) {
    if (!srcs_ok(g, MF_OP_PERMUTE, 1, &x)) return MF_NODE_INVALID;
    const int ax[4] = {a0, a1, a2, a3};
    int seen = 0;
    for (int i = 0; i < 4; i++) {
        if (ax[i] < 0 || ax[i] > 3 || (seen & (1 << ax[i])))
            return fail(g, MF_OP_PERMUTE, MF_E_INVAL, "axes (%d, %d, %d, %d) are not a permutation of 0..3",
                        a0, a1, a2, a3);
        seen |= 1 << ax[i];
    }
    const mf_node *xn = &g->nodes[x];
    if (blck_of(xn->type) != 1 && ax[0] != 0)
        return fail(g, MF_OP_PERMUTE, MF_E_INVAL, "cannot move axis 0 of block-quantized %s",
                    mf_type_name(xn->type));
    int64_t ne[4];
    size_t nb[4];
    int n_dims = xn->n_dims;
    for (int i = 0; i < 4; i++) {
        ne[ax[i]] = xn->ne[i];
        nb[ax[i]] = xn->nb[i];
        if (i < xn->n_dims && ax[i] + 1 > n_dims) n_dims = ax[i] + 1;
    }
    return alias(g, MF_OP_PERMUTE, x, n_dims, ne, nb, 0);
}

int32_t mf_g_cont(mf_graph *g, int32_t x) {
    if (!srcs_ok(g, MF_OP_CONT, 1, &x)) return MF_NODE_INVALID;
    const mf_node *xn = &g->nodes[x];
    if (blck_of(xn->type) != 1) {
        char dx[256];
        describe(g, x, dx, sizeof dx);
        return fail(g, MF_OP_CONT, MF_E_TYPE, "cont of block-quantized %s is not supported", dx);
    }
    int32_t id;
    mf_node *n = push(g, MF_OP_CONT, xn->type, xn->n_dims, xn->ne, &id);
    if (!n) return MF_NODE_INVALID;
    n->src[0] = x;
    return id;
}

int32_t mf_g_name(mf_graph *g, int32_t id, const char *fmt, ...) {
    if (!g || !fmt) return id;
    char buf[sizeof g->nodes[0].name];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (valid_id(g, id)) {
        memcpy(g->nodes[id].name, buf, sizeof buf);
    } else if (id == MF_NODE_INVALID && g->has_err && g->err_fresh) {
        /* the builder that just failed is being named: put its name in the message */
        render_err(g, buf);
        g->err_fresh = false;
    }
    return id;
}

int32_t mf_g_layer(mf_graph *g, int32_t id, int layer) {
    if (g && valid_id(g, id)) g->nodes[id].layer = layer;
    return id;
}

void mf_g_set_output(mf_graph *g, int32_t id) {
    if (g && valid_id(g, id)) g->nodes[id].flags |= MF_NODE_OUTPUT;
}

/* ---- mixture of experts ---- */

/* a new node of the given shape over n sources, or MF_NODE_INVALID (out of memory, recorded) */
static int32_t node_of(mf_graph *g, mf_op op, uint32_t type, int nd, const int64_t *ne, int n_src, const int32_t *src) {
    int32_t id;
    mf_node *n = push(g, op, type, nd, ne, &id);
    if (!n) return MF_NODE_INVALID;
    for (int i = 0; i < n_src; i++) n->src[i] = src[i];
    return id;
}

/* a dense 2-D i32 list [k, T] */
static bool need_ids(mf_graph *g, mf_op op, int32_t ids, int64_t k, int64_t t) {
    if (!need_type(g, op, "ids", ids, MF_TYPE_I32)) return false;
    const mf_node *i = &g->nodes[ids];
    if (mf_node_is_contiguous(i) && i->ne[0] == k && i->ne[1] == t && i->ne[2] == 1 && i->ne[3] == 1) return true;
    char d[256];
    describe(g, ids, d, sizeof d);
    fail(g, op, MF_E_INVAL, "ids %s must be a dense [%lld, %lld] list", d, (long long)k, (long long)t);
    return false;
}

int32_t mf_g_topk(mf_graph *g, int32_t x, int k) {
    if (!srcs_ok(g, MF_OP_TOPK, 1, &x)) return MF_NODE_INVALID;
    if (!need_rows_f32(g, MF_OP_TOPK, "input", x)) return MF_NODE_INVALID;
    const mf_node *xn = &g->nodes[x];
    if (k < 1 || k > xn->ne[0] || xn->ne[2] != 1 || xn->ne[3] != 1) {
        char d[256];
        describe(g, x, d, sizeof d);
        return fail(g, MF_OP_TOPK, MF_E_INVAL, "k %d must be 1..ne0 of a 2-D input %s", k, d);
    }
    const int64_t ne[2] = {k, xn->ne[1]};
    int32_t id = node_of(g, MF_OP_TOPK, MF_TYPE_I32, 2, ne, 1, &x);
    if (id >= 0) g->nodes[id].iparams[0] = k;
    return id;
}

int32_t mf_g_matmul_id(mf_graph *g, int32_t w, int32_t x, int32_t ids) {
    const int32_t s[3] = {w, x, ids};
    if (!srcs_ok(g, MF_OP_MATMUL_ID, 3, s)) return MF_NODE_INVALID;
    if (!need_rows_f32(g, MF_OP_MATMUL_ID, "input", x)) return MF_NODE_INVALID;
    const mf_node *wn = &g->nodes[w], *xn = &g->nodes[x], *in = &g->nodes[ids];
    char a[256], b[256];
    if (wn->ne[3] != 1 || !mf_node_is_contiguous(wn) || xn->ne[3] != 1 || wn->ne[0] != xn->ne[0] ||
        (xn->ne[1] != 1 && xn->ne[1] != in->ne[0])) {
        describe(g, w, a, sizeof a);
        describe(g, x, b, sizeof b);
        return fail(g, MF_OP_MATMUL_ID, MF_E_INVAL,
                    "weight %s must be a dense [K, N, experts] and input %s [K, 1 or k, tokens] with the same K", a,
                    b);
    }
    if (!need_ids(g, MF_OP_MATMUL_ID, ids, in->ne[0], xn->ne[2])) return MF_NODE_INVALID;
    const int64_t ne[3] = {wn->ne[1], in->ne[0], xn->ne[2]};
    return node_of(g, MF_OP_MATMUL_ID, MF_TYPE_F32, 3, ne, 3, s);
}

int32_t mf_g_moe_sum(mf_graph *g, int32_t y, int32_t probs, int32_t ids, bool normalize) {
    const int32_t s[3] = {y, probs, ids};
    if (!srcs_ok(g, MF_OP_MOE_SUM, 3, s)) return MF_NODE_INVALID;
    if (!need_rows_f32(g, MF_OP_MOE_SUM, "experts' rows", y) || !need_rows_f32(g, MF_OP_MOE_SUM, "probs", probs))
        return MF_NODE_INVALID;
    const mf_node *yn = &g->nodes[y], *pn = &g->nodes[probs];
    if (!mf_node_is_contiguous(yn) || !mf_node_is_contiguous(pn) || yn->ne[3] != 1 || pn->ne[2] != 1 ||
        pn->ne[3] != 1 || pn->ne[1] != yn->ne[2] || pn->ne[0] < yn->ne[1] || yn->ne[1] > MF_MOE_MAX_USED) {
        char a[256], b[256];
        describe(g, y, a, sizeof a);
        describe(g, probs, b, sizeof b);
        return fail(g, MF_OP_MOE_SUM, MF_E_INVAL,
                    "experts' rows %s must be a dense [N, k <= %d, tokens] and probs %s a dense [experts >= k, tokens]", a,
                    MF_MOE_MAX_USED, b);
    }
    if (!need_ids(g, MF_OP_MOE_SUM, ids, yn->ne[1], yn->ne[2])) return MF_NODE_INVALID;
    const int64_t ne[2] = {yn->ne[0], yn->ne[2]};
    int32_t id = node_of(g, MF_OP_MOE_SUM, MF_TYPE_F32, 2, ne, 3, s);
    if (id >= 0) g->nodes[id].iparams[0] = normalize;
    return id;
}
