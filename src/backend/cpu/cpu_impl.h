/* CPU backend internals shared by cpu.c and the op files of this folder (not an interface). */
#ifndef MF_CPU_IMPL_H
#define MF_CPU_IMPL_H

#include "backend/cpu/cpu.h"
#include "core/threadpool.h"
#include "quant/quant.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

/* A data error found inside a kernel (an id out of range): recorded per thread, reported after the
 * dispatch for the lowest node id, then the lowest index. */
typedef struct {
    int32_t node;  /* -1 = none */
    int64_t index; /* which token / row */
    int64_t value; /* the offending id */
    int64_t limit; /* the valid range is 0..limit-1 */
    const char *what;
} mf_cpu_fault;

/* attention primitives, picked once per backend (bitwise equal across ISAs, see vec.c) */
typedef struct {
    float (*dot)(const float *a, const float *b, int64_t n);
    void (*axpy)(int64_t n, float p, const float *x, float *y); /* y = fma(p, x, y) */
    /* y = fma(x, p, y), x a q8_0 row of n elements (n % 32 == 0) read in place, x_i = q_i * d */
    void (*mad_q8_0)(int64_t n, float p, const void *x, float *y);
    void (*scale)(int64_t n, float s, float *y); /* y *= s */
    void (*f16_to_f32)(const uint16_t *h, float *f, int64_t n);
    /* y = (float)(f16)y, round to nearest even (the f16 probabilities of attention with an f16 V) */
    void (*round_f16)(int64_t n, float *y);
    /* y = e^(x - sub), y may be x; returns their sum as llama.cpp's softmax adds it (vec.c) */
    double (*exp_sub)(int64_t n, const float *x, float sub, float *y);
    void (*swiglu)(int64_t n, const float *x, const float *u, float *y); /* y = silu(x) * u; u NULL: silu */
    /* the first n_dims of one rope row: pair k = (x[k], x[k + n_dims/2]) (neox) or (x[2k], x[2k+1]),
     * rotated by cs[2k] = cos, cs[2k+1] = sin, rounded as llama.cpp's (vec.c); y may be x */
    void (*rope)(int64_t n_dims, bool neox, const float *cs, const float *x, float *y);
    /* sum[k] = the sum of squares of row x[k] (n elements) for nr <= MF_CPU_NORM_ROWS rows, each ggml's
     * rms_norm chain: x*x rounded to float, added in double in element order (the rows side by side) */
    void (*sumsq)(const float *const *x, int nr, int64_t n, double *sum);
    /* y = (x * s) op z, two roundings: op MF_OP_MUL or MF_OP_ADD, or -1 for y = x * s alone; z a row, or
     * one value broadcast when z1 (rms_norm and its fused weight); y may be x */
    void (*scale_op)(int64_t n, const float *x, float s, int op, const float *z, bool z1, float *y);
    /* y = x op z, op MF_OP_MUL, MF_OP_ADD or MF_OP_DIV, z a row or one value (z1) (a matmul's fused bias /
     * residual) */
    void (*bin_op)(int64_t n, const float *x, int op, const float *z, bool z1, float *y);
} mf_cpu_vec;
#define MF_CPU_NORM_ROWS 16 /* rows a sumsq call takes at most */
/* the exp every CPU op uses: one lane of ggml's AVX2 ggml_v_expf (vec.c's kernels give the same bits) */
float mf_cpu_expf(float x);
void mf_cpu_vec_init(mf_cpu_vec *v); /* the active ISA's (mf_quant_active_isa) */
void mf_cpu_vec_init_isa(mf_cpu_vec *v, mf_isa isa); /* tests: one ISA's (the CPU must have it) */

struct mf_cpu {
    int n_threads;
    mf_cpu_vec vec;
    mf_threadpool *tp;
    uint8_t *scratch; /* shared region then one region per thread; grown, never shrunk */
    size_t scratch_size;
    mf_cpu_fault *faults; /* [n_threads] */
    /* the per-forward plan (see plan_barriers in cpu.c), grown, never shrunk */
    uint8_t *plan;
    int32_t *fuse, *readers, *sole; /* per node: fused partner; reader count; the only reader */
    int32_t plan_cap;
    /* per node: the next work chunk a thread takes (matmul, attention), reset per forward */
    _Atomic int32_t *chunks;
    /* per node and thread: units of the thread's own stretch of matmul rows claimed from its front (low 32
     * bits, by the owner) and from its back (high 32 bits, by the others once their own is done) */
    _Atomic uint64_t *steal;
    /* MINFER_PROFILE=1: thread 0's time per op kind (running, and waiting at the barrier before it),
     * printed when the backend is freed */
    bool profile;
    int64_t prof_run_ns[MF_OP_COUNT], prof_wait_ns[MF_OP_COUNT], prof_calls[MF_OP_COUNT], prof_forwards;
    int64_t prof_setup_ns, prof_total_ns; /* validation + planning; whole mf_cpu_compute_range */
    struct mf_cpu_range *ranges;
    int32_t ranges_cap;
};

/* plan flags per node */
enum {
    MF_CPU_PLAN_BARRIER = 1, /* all threads must have finished earlier nodes before this one starts */
    MF_CPU_PLAN_REUSE = 2,   /* matmul: the shared scratch already holds src1 in the vec_dot type */
    MF_CPU_PLAN_FUSED = 4,   /* matmul/rms_norm also applies the ADD/MUL node fuse[i] to its result */
    MF_CPU_PLAN_SKIP = 8,    /* computed by the node it was fused into */
    MF_CPU_PLAN_PRIVATE = 16, /* matmul: each thread converts src1 itself into its own buffer (no barrier) */
};

/* A matmul converts its activations per thread (every thread all rows, into its own buffer) instead of
 * splitting the rows and meeting at a barrier when there are at most this many rows and elements: in
 * decode a barrier costs more than converting one row twice.  The bytes are the same either way. */
#define MF_CPU_PRIVATE_CONV_ROWS 4
#define MF_CPU_PRIVATE_CONV_ELEMS 16384

typedef struct {
    mf_cpu *cpu;
    mf_graph *g;
    uint8_t *shared;     /* per-op shared scratch (matmul activations), valid during one op */
    uint8_t *per_thread; /* thread ith owns per_thread + ith * per_thread_size */
    size_t per_thread_size;
    const uint8_t *plan; /* [n_nodes] MF_CPU_PLAN_* */
    const int32_t *fuse; /* [n_nodes] the ADD/MUL node a FUSED node applies */
    int32_t first, last; /* the nodes to run */
    _Atomic int32_t *chunks; /* [n_nodes] dynamic work counters, 0 at the start of the forward */
    _Atomic uint64_t *steal; /* [n_nodes][n_threads] front/back claims, 0 at the start of the forward */
    uint8_t *conv;           /* private conversions: thread ith owns conv + ith * conv_size */
    size_t conv_size;
} mf_cpu_exec;

/* does matmul n convert its activations per thread (MF_CPU_PLAN_PRIVATE)? */
bool mf_cpu_matmul_private(const mf_graph *g, const mf_node *n);
size_t mf_cpu_matmul_private_bytes(const mf_graph *g, const mf_node *n);
/* The first bytes (at most `most`) of the weights thread ith of nth streams in decode matmul n: the front of
 * its own stretch, where mm_stealing starts it.  Empty for a prefill matmul (its rows go to whichever
 * thread claims them first).  What the thread reads ahead while it waits at a barrier before n. */
mf_tp_ahead mf_cpu_matmul_ahead(const mf_graph *g, const mf_node *n, int ith, int nth, size_t most);

/* the ADD/MUL fused into node n, or NULL */
static inline const mf_node *mf_cpu_fused(const mf_cpu_exec *ex, const mf_node *n) {
    int32_t id = (int32_t)(n - mf_graph_node_c(ex->g, 0));
    return (ex->plan[id] & MF_CPU_PLAN_FUSED) ? mf_graph_node_c(ex->g, ex->fuse[id]) : NULL;
}

/* the broadcast row of b (src1 of an ADD/MUL) for row r of the result dst */
static inline const float *mf_cpu_bcast_row(const mf_node *b, const mf_node *dst, int64_t r) {
    int64_t i1 = r % dst->ne[1], i2 = (r / dst->ne[1]) % dst->ne[2], i3 = r / (dst->ne[1] * dst->ne[2]);
    return (const float *)((const char *)b->data + (size_t)(i1 % b->ne[1]) * b->nb[1] +
                           (size_t)(i2 % b->ne[2]) * b->nb[2] + (size_t)(i3 % b->ne[3]) * b->nb[3]);
}

typedef void (*mf_cpu_op_fn)(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth);

static inline void *mf_cpu_thread_scratch(const mf_cpu_exec *ex, int ith) {
    return ex->per_thread + (size_t)ith * ex->per_thread_size;
}

static inline void mf_cpu_fault_set(const mf_cpu_exec *ex, int ith, int32_t node, const char *what,
                                    int64_t index, int64_t value, int64_t limit) {
    mf_cpu_fault *f = &ex->cpu->faults[ith];
    /* the lowest (node, index) wins, so the report does not depend on which thread saw what first
     * (attention hands its items out dynamically) */
    if (f->node >= 0 && (f->node < node || (f->node == node && f->index <= index))) return;
    *f = (mf_cpu_fault){node, index, value, limit, what};
}

/* rows [r0, r1) of nr for thread ith of nth: contiguous chunks */
static inline void mf_cpu_split(int64_t nr, int ith, int nth, int64_t *r0, int64_t *r1) {
    int64_t dr = (nr + nth - 1) / nth;
    *r0 = dr * ith;
    if (*r0 > nr) *r0 = nr;
    *r1 = *r0 + dr < nr ? *r0 + dr : nr;
}

static inline int64_t mf_cpu_nrows(const mf_node *n) {
    return n->ne[1] * n->ne[2] * n->ne[3];
}

/* byte offset of row r (over dims 1..3) */
static inline size_t mf_cpu_row_offs(const mf_node *n, int64_t r) {
    int64_t i1 = r % n->ne[1], i2 = (r / n->ne[1]) % n->ne[2], i3 = r / (n->ne[1] * n->ne[2]);
    return (size_t)i1 * n->nb[1] + (size_t)i2 * n->nb[2] + (size_t)i3 * n->nb[3];
}

/* f32 dot with 8 fixed partial sums (vectorizes; the order depends only on n) */
static inline float mf_cpu_dot_f32(const float *a, const float *b, int64_t n) {
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
    for (; i < n; i++) acc[i & 7] += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* per-op scratch needs, computed before the dispatch */
size_t mf_cpu_matmul_shared_bytes(const mf_graph *g, const mf_node *n);
/* does matmul n also pack its converted activations for its kernel (quant.h, pack_size)? */
bool mf_cpu_matmul_packs(const mf_graph *g, const mf_node *n);
size_t mf_cpu_rope_thread_bytes(const mf_node *n);
size_t mf_cpu_attention_thread_bytes(const mf_graph *g, const mf_node *n);
bool mf_cpu_kv_type_ok(uint32_t type);

/* AVX-512 attention kernels (attention_avx512.c).  scores16: out[r * 16 + i] = the dot of query row r
 * (nrows rows, hd floats apart, hd % 32 == 0) with key i of kt = [hd][16] (keys transposed into lanes),
 * bitwise the AVX2 F32 vec_dot of the two rows.  pv16: for the nh heads of one token (window cnt), out row h
 * (hd floats, rows contiguous) = (sum over j of p[h][j] * v_j, in the MF_PV_LANE order) * inv[h], v_j the f16/f32 cache
 * row slice at v + cell[j] * v_nb1 + voff. */
typedef struct {
    int64_t hd, cnt;
    int nh;
    const float *p;  /* [nh][p_stride] probabilities */
    size_t p_stride;
    const float *inv; /* [nh] a factor for each row's sum (attention.c: 1, p is normalized) */
    const char *v;
    size_t v_nb1, voff;
    uint32_t vtype;
    const int32_t *cell;
    float *out;
} mf_cpu_att_pv;
/* The order of the value sum out[d] = sum_j p_j v_j[d] both attention paths keep, llama.cpp's kqv =
 * mul_mat(v, kq) over an f32 cache (llamafile's tinyBLAS, 8 lanes, as its AVX2 build runs for a batch):
 * key j (window position) goes to lane j % 8, each lane an fma chain from 0 in window order, then
 * out = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)), tinyBLAS's hsum.  The kernels run one pass
 * per lane, the k-th pass over lane MF_PV_LANE(k) (3-bit reversal: 0 4 2 6 1 5 3 7), so each pair of
 * the tree is added as soon as both halves exist. */
#define MF_PV_LANE(k) ((((k) & 1) << 2) | ((k) & 2) | (((k) >> 2) & 1))
void mf_cpu_att_scores16(int64_t hd, const float *kt, const float *q, int nrows, float *out);
void mf_cpu_att_pv16(const mf_cpu_att_pv *pv);
bool mf_cpu_att_x16_ok(int64_t hd); /* the head sizes the two kernels take */
/* kt16: the head slices (at base + cell[i] * nb1 + off, f16 or f32) of nk <= 16 keys transposed into
 * kt = [hd][16], keys >= nk zero.  scores16_put: scores16 of nrows rows times scale, row r stored under
 * mask[r] (one bit per key its window reaches) at dst + r * stride, and its lanes' running maxima
 * max_ps(s, m) (= s > m ? s : m) in mxv[r][16]. */
void mf_cpu_att_kt16(int64_t hd, const char *base, size_t nb1, size_t off, uint32_t type, const int32_t *cell,
                     int nk, float *kt);
void mf_cpu_att_scores16_put(int64_t hd, const float *kt, const float *q, int nrows, float scale,
                             const uint16_t *mask, float *dst, size_t stride, float *mxv);
/* The values of a prefill run's rows at once (AVX-512): row r (nondecreasing window counts cnt[r] over
 * the longest window's cells) gets out = the same MF_PV_LANE-order sum as pv16 with inv 1, bit for bit:
 * each lane's fma chain over its keys in window order, then tinyBLAS's hsum.  The keys go in blocks of kb
 * (a multiple of 8) whose value slices stay in L1 while every row's chains continue over them (the chains
 * wait in acc between blocks), so a value row is read from memory once per run, not once per token. */
typedef struct {
    int64_t hd, kb;
    int nrows, nh;        /* row r = (token r / nh, head r % nh) */
    const int64_t *cnt;   /* [nrows] */
    const float *p;       /* row r's probabilities at p + r * p_stride */
    size_t p_stride;
    const char *v;
    size_t v_nb1, voff;
    uint32_t vtype;       /* f16 or f32 */
    const int32_t *cell;  /* the longest window */
    float *acc;           /* scratch [8][nrows][hd] */
    float *out;           /* row r: out + (r / nh) * out_stride + (r % nh) * hd */
    size_t out_stride;
} mf_cpu_att_pvb;
void mf_cpu_att_pv_rows(const mf_cpu_att_pvb *b);
/* attention.c's normalize then round_p_f16 (when f16) of one row of n scores with maximum mx, 16 lanes at a
 * time: the same operations, the same bits */
void mf_cpu_att_softmax_row(int64_t n, float *p, float mx, bool f16);
/* The flash-attention form (q8_0 V) for one row over n keys of a block (AVX-512, the head sizes of
 * mf_cpu_att_x16_ok): scores sc[n] (scaled), the block's value rows dequantized vf[n][hd], the row's
 * running max M, sum S and accumulator acc[hd] continued: attention.c attend_run_fa's steps, the same bits */
void mf_cpu_att_fa_rows(int64_t hd, int n, const float *sc, const float *vf, float *M, float *S, float *acc);

void mf_cpu_op_get_rows(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth);
void mf_cpu_op_rms_norm(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth);
void mf_cpu_op_matmul(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth);
void mf_cpu_op_binary(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth); /* ADD, MUL */
void mf_cpu_op_unary(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth);  /* SCALE, SILU */
void mf_cpu_op_swiglu(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth);
void mf_cpu_op_softmax(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth);
void mf_cpu_op_rope(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth);
void mf_cpu_op_cont(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth);
void mf_cpu_op_hadamard(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth);
void mf_cpu_op_kv_store(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth);
void mf_cpu_op_attention(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth);
void mf_cpu_op_topk(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth);
void mf_cpu_op_matmul_id(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth);
void mf_cpu_op_moe_sum(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth);
size_t mf_cpu_matmul_id_shared_bytes(const mf_graph *g, const mf_node *n);
size_t mf_cpu_matmul_id_thread_bytes(const mf_graph *g, const mf_node *n);

#endif
