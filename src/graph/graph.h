/* graph: the declarative compute IR that model builders emit and a backend executes.
 *
 * Tensors follow ggml's dimension order: ne[0] is the innermost (contiguous) dimension, so a matrix of
 * N rows of length K has ne = {K, N}.  nb[] are byte strides (nb[0] = element/block size).
 *
 * Builders never fail mid-expression: a builder that detects a bad shape or type records the first
 * error in the graph (naming the node and both shapes) and returns MF_NODE_INVALID; every later builder
 * given an invalid source returns MF_NODE_INVALID too.  Check mf_graph_error() once after building.
 *
 * Reuse identity: a graph depends only on its params (token count, output rows, topology flags) -
 * never on positions, cells or spans, which are input DATA bound per forward. */
#ifndef MF_GRAPH_H
#define MF_GRAPH_H

#include "core/core.h"
#include "core/rope.h" /* MF_ROPE_NEOX */

#include <stdio.h>

#define MF_MAX_DIMS 4
#define MF_MAX_SRC 4
#define MF_NODE_INVALID (-1)

typedef enum {
    MF_OP_INPUT,     /* data bound per forward by the engine (token ids, positions, cell ids, windows) */
    MF_OP_WEIGHT,    /* read-only model data (mmap'd or repacked); data set at build time */
    MF_OP_EXTERNAL,  /* writable memory owned outside the graph (the KV cache of one layer) */
    MF_OP_GET_ROWS,  /* src0 table [K, R] any type, src1 i32 ids [n] -> f32 [K, n] (dequantized rows) */
    MF_OP_RMS_NORM,  /* src0 f32 [K, ...]; f[0] = eps; x / sqrt(mean(x^2) + eps) along ne0 */
    MF_OP_MATMUL,    /* src0 weight [K, N] (any type), src1 f32 [K, M] -> f32 [N, M]; out[m][n] = dot(w_n, x_m) */
    MF_OP_ADD,       /* src0 f32, src1 f32 broadcast over src0 (each dim of src1 is 1 or equal) */
    MF_OP_MUL,       /* as ADD, elementwise product */
    MF_OP_SCALE,     /* src0 f32 * f[0] */
    MF_OP_SILU,      /* x * sigmoid(x) */
    MF_OP_SWIGLU,    /* silu(src0) * src1, same shapes */
    MF_OP_SOFTMAX,   /* softmax along ne0 */
    MF_OP_ROPE,      /* src0 f32 [hd, n_head, n_tok], src1 i32 positions [n_tok]; i[0] = n_rot,
                        i[1] = mode (MF_ROPE_NEOX); f[0] = freq_base, f[1] = freq_scale,
                        f[2] = ext_factor, f[3] = attn_factor, f[4..5] = corr_dims (YaRN; core/rope.h) */
    MF_OP_KV_STORE,  /* src0 cache (EXTERNAL [n_embd_kv, n_cells], cache type), src1 f32 rows [n_embd_kv, n_tok],
                        src2 i32 cell ids [n_tok]: cache[:, cell[t]] = convert(rows[:, t]).  The node is a view
                        of the whole cache (same shape/type), so readers depend on the store. */
    MF_OP_ATTENTION, /* src0 q f32 [hd, n_head, n_tok], src1 k cache [hd*n_head_kv, n_cells] (a KV_STORE node),
                        src2 v cache (same), src3 i32 spans [2, n_tok + 1] (EXTERNAL: the KV store's buffer,
                        rebound per forward): column 0 = {L = int32 entries in the buffer, n_tok}, column t + 1 =
                        {offset, count}: query t sees the cells buf[offset .. offset + count), in position order
                        (kv.h: its sequence's list up to its own entry; count <= n_cells).  i[0] = n_head_kv;
                        f[0] = scale.  GQA: head h reads kv head h / (n_head / n_head_kv).  -> f32
                        [hd*n_head, n_tok].  Softmax is accumulated over the span in list order (fixed per
                        query). */
    MF_OP_VIEW,      /* alias of src0 memory at byte offset view_offs with its own ne/nb (no copy) */
    MF_OP_RESHAPE,   /* alias of a contiguous src0 with another shape (no copy) */
    MF_OP_PERMUTE,   /* alias with permuted ne/nb: i[0..3] = destination axis of each source axis */
    MF_OP_CONT,      /* copy a strided tensor into contiguous memory */
    MF_OP_HADAMARD,  /* src0 f32 rows; i[0] = n (a power of two dividing ne0): each chunk of n elements of a row
                        times the orthonormal Walsh-Hadamard matrix H_n / sqrt(n) (core/hadamard.h: llama.cpp's
                        attention rotation for quantized KV caches, computed as ggml-cpu's fast transform) */
    /* A mixture-of-experts FFN (llama.cpp's build_moe_ffn) is three ops around the usual ones:
     * probs = softmax(router . x); ids = topk(probs); y = matmul_id(down, swiglu(matmul_id(gate, x, ids),
     * matmul_id(up, x, ids)), ids); out = moe_sum(y, probs, ids). */
    MF_OP_TOPK,      /* src0 f32 [n, rows]; i[0] = k -> i32 [k, rows]: the indices of each row's k largest values,
                        largest first, equal values lower index first (llama.cpp's argsort_top_k) */
    MF_OP_MATMUL_ID, /* src0 weight [K, N, E] (E experts' matrices), src1 f32 [K, R, T] (R = 1: one row a token,
                        shared by its experts; R = k: a row per slot), src2 i32 ids [k, T] -> f32 [N, k, T];
                        out[:, j, t] = matrix ids[j, t] times x[:, j % R, t], each (row, weight row) the same one
                        kernel call as MATMUL's (llama.cpp's mul_mat_id) */
    MF_OP_MOE_SUM,   /* src0 f32 y [N, k, T], src1 f32 probs [E, T], src2 i32 ids [k, T]; i[0] = normalize ->
                        f32 [N, T]: out[:, t] = sum over j in order of y[:, j, t] * w_j, w_j = probs[ids[j, t], t]
                        (over max(their double sum as a float, 2^-14) when normalize): llama.cpp's get_rows,
                        sum_rows, clamp, div, mul, then a chain of adds, rounding where it rounds */
    MF_OP_DIV,       /* as ADD, elementwise quotient (qwen2moe's shared-expert gate: llama.cpp's silu(x) / x) */
    MF_OP_COUNT
} mf_op;


enum {
    MF_NODE_OUTPUT = 1u << 0, /* value must survive the forward (logits); never reused by the allocator */
};

typedef struct mf_node {
    mf_op op;
    uint32_t type; /* mf_type (quant/quant.h) */
    int32_t n_dims;
    int64_t ne[MF_MAX_DIMS];
    size_t nb[MF_MAX_DIMS];
    int32_t src[MF_MAX_SRC]; /* node ids, -1 = unused */
    int32_t iparams[4];
    float fparams[6];
    int32_t view_src; /* VIEW/RESHAPE/PERMUTE/KV_STORE: node whose memory this aliases, else -1 */
    uint64_t view_offs;
    int32_t layer;   /* transformer block index, -1 outside blocks */
    int32_t backend; /* registry id assigned by the scheduler, -1 = unassigned */
    uint32_t flags;
    char name[64];
    void *data; /* WEIGHT/EXTERNAL: set at build; INPUT: bound per forward; others: set by the allocator */
    /* An EXTERNAL rebound per forward to a buffer holding more than its shape says (the KV spans: the
     * header and windows the shape covers, then the cell lists they point into): the bytes actually
     * behind data, so a cross-backend copy moves all of them; 0 = the shape's bytes. */
    size_t bound_bytes;
} mf_node;

/* The ops that name memory and compute nothing: leaves (memory bound from outside the graph) and pure aliases
 * (another shape or offset over a source's memory).  Every backend, the scheduler and the exporter agree on
 * these by asking here; every other op is work some backend runs. */
static inline bool mf_op_is_leaf(mf_op op) { return op == MF_OP_INPUT || op == MF_OP_WEIGHT || op == MF_OP_EXTERNAL; }
static inline bool mf_op_is_alias(mf_op op) { return op == MF_OP_VIEW || op == MF_OP_RESHAPE || op == MF_OP_PERMUTE; }
static inline bool mf_op_computes(mf_op op) { return !mf_op_is_leaf(op) && !mf_op_is_alias(op); }
/* The ops whose dtype (for the support matrix and every backend's support function) is src0's, the weight's
 * or table's, not the node's own f32. */
static inline bool mf_op_typed_by_src0(mf_op op) {
    return op == MF_OP_MATMUL || op == MF_OP_GET_ROWS || op == MF_OP_MATMUL_ID;
}

typedef struct mf_graph mf_graph;

mf_graph *mf_graph_new(void);
void mf_graph_free(mf_graph *g);
int mf_graph_error(const mf_graph *g, mf_error *err); /* 0, or the first builder error */

int32_t mf_graph_n_nodes(const mf_graph *g);
mf_node *mf_graph_node(mf_graph *g, int32_t id);
const mf_node *mf_graph_node_c(const mf_graph *g, int32_t id);
int32_t mf_graph_find(const mf_graph *g, const char *name); /* -1 if absent */
bool mf_node_is_contiguous(const mf_node *n);
int64_t mf_node_nelements(const mf_node *n);
size_t mf_node_nbytes(const mf_node *n); /* bytes spanned (contiguous size for contiguous nodes) */

/* ---- builders (return node id or MF_NODE_INVALID) ---- */
int32_t mf_g_input(mf_graph *g, const char *name, uint32_t type, int n_dims, const int64_t *ne);
int32_t mf_g_weight(mf_graph *g, const char *name, uint32_t type, int n_dims, const int64_t *ne, const void *data);
int32_t mf_g_external(mf_graph *g, const char *name, uint32_t type, int n_dims, const int64_t *ne, void *data);
int32_t mf_g_get_rows(mf_graph *g, int32_t table, int32_t ids);
int32_t mf_g_rms_norm(mf_graph *g, int32_t x, float eps);
int32_t mf_g_matmul(mf_graph *g, int32_t w, int32_t x);
int32_t mf_g_add(mf_graph *g, int32_t a, int32_t b);
int32_t mf_g_mul(mf_graph *g, int32_t a, int32_t b);
int32_t mf_g_div(mf_graph *g, int32_t a, int32_t b);
int32_t mf_g_scale(mf_graph *g, int32_t x, float s);
int32_t mf_g_silu(mf_graph *g, int32_t x);
int32_t mf_g_swiglu(mf_graph *g, int32_t gate, int32_t up);
int32_t mf_g_softmax(mf_graph *g, int32_t x);
int32_t mf_g_rope(mf_graph *g, int32_t x, int32_t pos, const mf_rope *r);
/* The rope a ROPE node applies (its params back as an mf_rope) */
mf_rope mf_node_rope(const mf_node *n);
/* x's rows rotated by H_n / sqrt(n) in chunks of n (MF_OP_HADAMARD) */
int32_t mf_g_hadamard(mf_graph *g, int32_t x, int n);
int32_t mf_g_kv_store(mf_graph *g, int32_t cache, int32_t rows, int32_t cells);
int32_t mf_g_attention(mf_graph *g, int32_t q, int32_t k, int32_t v, int32_t spans, int n_head_kv, float scale);
int32_t mf_g_view(mf_graph *g, int32_t x, int n_dims, const int64_t *ne, const size_t *nb, uint64_t offs);
int32_t mf_g_reshape(mf_graph *g, int32_t x, int n_dims, const int64_t *ne);
int32_t mf_g_permute(mf_graph *g, int32_t x, int a0, int a1, int a2, int a3);
int32_t mf_g_cont(mf_graph *g, int32_t x);
/* mixture of experts (MF_OP_TOPK, MF_OP_MATMUL_ID, MF_OP_MOE_SUM) */
int32_t mf_g_topk(mf_graph *g, int32_t x, int k);
int32_t mf_g_matmul_id(mf_graph *g, int32_t w, int32_t x, int32_t ids);
#define MF_MOE_MAX_USED 256 /* experts a token may use (moe_sum keeps their weights on the stack) */
int32_t mf_g_moe_sum(mf_graph *g, int32_t y, int32_t probs, int32_t ids, bool normalize);
/* Name the most recent node (printf-style) and tag its layer; returns id unchanged (chainable). */
int32_t mf_g_name(mf_graph *g, int32_t id, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int32_t mf_g_layer(mf_graph *g, int32_t id, int layer);
void mf_g_set_output(mf_graph *g, int32_t id);

/* ---- allocation ---- */
/* Memory is planned per backend: every arena-backed node (not a view, not INPUT-free leaves: WEIGHT and
 * EXTERNAL bring their own memory) gets an offset inside the arena of the backend it is assigned to
 * (node->backend; -1 counts as 0, the CPU), so assign before planning.  Liveness over the topological
 * (creation) order; buffers reused once their last reader ran; in place only where safe and on the same
 * backend.  INPUT nodes get their own region too (the engine writes them before each forward).
 * MF_GRAPH_ARENAS equals the backend registry's slot count (backend/registry.h checks). */
#define MF_GRAPH_ARENAS 8
/* Plan (again) and say how many bytes each backend's arena needs (0: none). */
int mf_graph_plan_memory(mf_graph *g, size_t need[MF_GRAPH_ARENAS], mf_error *err);
/* Point every planned node's data at bases[b] + its offset (b its backend) and re-resolve the views.  The
 * bases are addresses in each backend's own space; nothing here dereferences them.  Cheap: a scheduler
 * that shares one arena per backend among several graphs rebinds a graph when an arena moved. */
void mf_graph_bind_memory(mf_graph *g, void *const bases[MF_GRAPH_ARENAS]);
/* True when g was planned and is bound to exactly these bases (for every arena it needs). */
bool mf_graph_bound_to(const mf_graph *g, void *const bases[MF_GRAPH_ARENAS]);
/* Host-only convenience (tests, tools): plan, then give each backend's share its own host arena owned
 * by the graph, and bind.  A backend whose memory is not host must be allocated through the scheduler
 * (mf_sched_alloc) instead. */
int mf_graph_alloc(mf_graph *g, mf_error *err);
size_t mf_graph_peak_bytes(const mf_graph *g); /* the planned arenas' bytes, all backends together */

/* ---- export (minfer viz) ---- */
/* JSON: {"nodes":[{"id","name","op","type","ne":[..],"src":[..],"layer","backend"}...]}; DOT: a digraph
 * with one node per op labelled with name, op, shape, type, layer and backend. */
int mf_graph_write_json(const mf_graph *g, FILE *f);
int mf_graph_write_dot(const mf_graph *g, FILE *f);

/* ---- graph cache: several graphs keyed by params, most-recently-used first ---- */
typedef struct {
    int32_t n_tokens;  /* tokens in the batch */
    int32_t n_outputs; /* rows that want logits */
    uint32_t flags;    /* anything else that changes topology */
} mf_graph_key;

/* The nodes a forward binds and reads, as the builder returned their ids: kept with the cached graph so
 * that a forward never looks them up by name. */
typedef struct {
    int32_t tokens, pos, cells, out_ids; /* INPUT node ids (out_ids -1 when every row is an output) */
    int32_t spans;                       /* EXTERNAL, its data rebound to the KV store's spans per forward */
    int32_t logits;                      /* f32 [n_vocab, n_outputs] */
} mf_graph_io;

typedef struct mf_graph_cache mf_graph_cache;
mf_graph_cache *mf_graph_cache_new(int capacity);
void mf_graph_cache_free(mf_graph_cache *c); /* frees the graphs it holds */
/* NULL on miss; a hit becomes the most recently used and *io (when non-NULL) gets the ids put with it */
mf_graph *mf_graph_cache_get(mf_graph_cache *c, const mf_graph_key *key, mf_graph_io *io);
/* Owns g (and keeps a copy of *io, which may be NULL); evicts the least recently used. */
void mf_graph_cache_put(mf_graph_cache *c, const mf_graph_key *key, mf_graph *g, const mf_graph_io *io);
int mf_graph_cache_hits(const mf_graph_cache *c);
int mf_graph_cache_misses(const mf_graph_cache *c);

const char *mf_op_name(mf_op op);

#endif
