/* CPU matmul: out[m][n] = vec_dot(K, w_n, a_m) with the quant kernels of the weight type.
 *
 * Phase 1 converts each activation row once to the kernel's vec_dot type (rows split over threads).
 * Phase 2 splits the weight rows over threads; a thread walks its rows in tiles and, for each tile,
 * every activation row, so a weight row is streamed from memory once per forward while it is hot.
 * Invariant: (n, m) is always one vec_dot call on the same bytes, so the result depends neither on M
 * nor on the thread count (batched == serial, bitwise). */
#include "backend/cpu/cpu_impl.h"

#define TILE_N 16 /* weight rows per cache tile (a multiple of every kernel tile width) */

static bool direct_f32(const mf_quant_kernels *k) {
    return k->vec_dot_type == MF_TYPE_F32;
}

size_t mf_cpu_matmul_shared_bytes(const mf_graph *g, const mf_node *n) {
    const mf_node *w = mf_graph_node_c(g, n->src[0]), *x = mf_graph_node_c(g, n->src[1]);
    const mf_quant_kernels *k = mf_quant_kernels_get(w->type);
    if (!k || direct_f32(k)) return 0;
    size_t rs = mf_row_size(k->vec_dot_type, x->ne[0]);
    return rs * (size_t)mf_cpu_nrows(x) + 64;
}

bool mf_cpu_matmul_private(const mf_graph *g, const mf_node *n) {
    const mf_node *w = mf_graph_node_c(g, n->src[0]), *x = mf_graph_node_c(g, n->src[1]);
    const mf_quant_kernels *k = mf_quant_kernels_get(w->type);
    const int64_t M = mf_cpu_nrows(x);
    return k && !direct_f32(k) && M <= MF_CPU_PRIVATE_CONV_ROWS && M * x->ne[0] <= MF_CPU_PRIVATE_CONV_ELEMS;
}

size_t mf_cpu_matmul_private_bytes(const mf_graph *g, const mf_node *n) {
    if (!mf_cpu_matmul_private(g, n)) return 0;
    const mf_node *w = mf_graph_node_c(g, n->src[0]), *x = mf_graph_node_c(g, n->src[1]);
    return mf_row_size(mf_quant_kernels_get(w->type)->vec_dot_type, x->ne[0]) * (size_t)mf_cpu_nrows(x) + 64;
}

/* a fused ADD/MUL (in place over this result): columns [t0, t1) of every row, the same float operation
 * the unfused node performs */
static void apply_fused(const mf_cpu_exec *ex, const mf_node *f, float *out, int64_t N, int64_t M, int64_t t0,
                        int64_t t1) {
    const mf_node *b = mf_graph_node_c(ex->g, f->src[1]);
    const bool add = f->op == MF_OP_ADD;
    for (int64_t m = 0; m < M; m++) {
        const float *z = mf_cpu_bcast_row(b, f, m);
        float *o = out + m * N;
        if (b->ne[0] == 1) {
            const float c = z[0];
            for (int64_t j = t0; j < t1; j++) o[j] = add ? o[j] + c : o[j] * c;
        } else if (add) {
            for (int64_t j = t0; j < t1; j++) o[j] = o[j] + z[j];
        } else {
            for (int64_t j = t0; j < t1; j++) o[j] = o[j] * z[j];
        }
    }
}

void mf_cpu_op_matmul(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *w = mf_graph_node_c(ex->g, n->src[0]), *x = mf_graph_node_c(ex->g, n->src[1]);
    const mf_quant_kernels *k = mf_quant_kernels_get(w->type);
    const int64_t K = w->ne[0], N = w->ne[1], M = mf_cpu_nrows(x);
    const bool direct = direct_f32(k);
    const size_t rs = direct ? 0 : mf_row_size(k->vec_dot_type, K);

    const int32_t id = (int32_t)(n - mf_graph_node_c(ex->g, 0));
    const bool priv = ex->plan[id] & MF_CPU_PLAN_PRIVATE;
    uint8_t *abuf = priv ? ex->conv + (size_t)ith * ex->conv_size : ex->shared;
    if (!direct && !(ex->plan[id] & MF_CPU_PLAN_REUSE)) {
        int64_t m0 = 0, m1 = M;
        if (!priv) mf_cpu_split(M, ith, nth, &m0, &m1);
        for (int64_t m = m0; m < m1; m++)
            k->from_float((const float *)((const char *)x->data + mf_cpu_row_offs(x, m)), abuf + (size_t)m * rs, K);
        if (!priv) mf_threadpool_barrier(ex->cpu->tp);
    }

    /* activation rows at a uniform stride can go through the kernel's tile (bitwise = vec_dot) */
    const bool uniform = !direct || (x->ne[2] * x->ne[3] == 1) ||
                         (x->nb[2] == x->nb[1] * (size_t)x->ne[1] && x->nb[3] == x->nb[2] * (size_t)x->ne[2]);
    const size_t as = direct ? x->nb[1] : rs;
    /* an x8/x16 layout's tile is one whole group of rows (TILE_N is a multiple of both) */
    const int tw = k->act_major ? k->tile_w : MF_MAX(1, MF_MIN(k->tile_w, MF_TILE_MAX));
    const int ta = uniform ? MF_MAX(1, MF_MIN(k->tile_a, MF_TILE_MAX)) : 1;

    /* Weight rows are handed out in chunks from a shared counter (thread ith starts with chunk ith), so
     * a thread the OS delays does not stall the other at the next barrier.  Which thread computes a
     * row never changes its value: (n, m) is always the same one kernel call. */
    const int64_t n_chunks_min = (int64_t)nth * (M <= MF_CPU_PRIVATE_CONV_ROWS ? 1 : 8);
    int64_t ch = (N + n_chunks_min - 1) / n_chunks_min;
    ch = (ch + TILE_N - 1) / TILE_N * TILE_N;
    if (ch < TILE_N) ch = TILE_N;
    if (M > MF_CPU_PRIVATE_CONV_ROWS && ch > 4 * TILE_N) ch = 4 * TILE_N;
    const int64_t n_chunks = (N + ch - 1) / ch;
    _Atomic int32_t *ctr = &ex->chunks[id];
    const char *wd = w->data;
    const size_t ws = w->nb[1];
    float *out = n->data; /* contiguous [N, M] */
    float s[MF_TILE_MAX * MF_TILE_MAX];
    const mf_node *f = mf_cpu_fused(ex, n);
    for (int64_t c = ith; c < n_chunks;
         c = nth + atomic_fetch_add_explicit(ctr, 1, memory_order_relaxed)) {
        const int64_t n0 = c * ch, n1 = MF_MIN(N, n0 + ch);
        for (int64_t t0 = n0; t0 < n1; t0 += TILE_N) {
            const int64_t t1 = t0 + TILE_N < n1 ? t0 + TILE_N : n1;
            for (int64_t m0 = 0; m0 < M; m0 += ta) {
                const int na = (int)MF_MIN((int64_t)ta, M - m0);
                const void *a = direct ? (const void *)((const char *)x->data + mf_cpu_row_offs(x, m0))
                                       : (const void *)(abuf + (size_t)m0 * rs);
                for (int64_t j0 = t0; j0 < t1; j0 += tw) {
                    const int nw = (int)MF_MIN((int64_t)tw, t1 - j0);
                    if (k->act_major) { /* straight into the output rows */
                        k->vec_dot_tile(K, &out[m0 * N + j0], (size_t)N, wd + (size_t)j0 * ws, ws, nw, a, as, na);
                        continue;
                    }
                    if (nw == 1 && na == 1 && k->vec_dot) {
                        k->vec_dot(K, &out[m0 * N + j0], wd + (size_t)j0 * ws, a);
                        continue;
                    }
                    k->vec_dot_tile(K, s, MF_TILE_MAX, wd + (size_t)j0 * ws, ws, nw, a, as, na);
                    for (int i = 0; i < nw; i++)
                        for (int j = 0; j < na; j++) out[(m0 + j) * N + j0 + i] = s[i * MF_TILE_MAX + j];
                }
            }
        }
        if (f) apply_fused(ex, f, out, N, M, n0, n1);
    }
}
