/* CPU mixture-of-experts ops: the router's top k, the experts' matmuls, their weighted sum.
 *
 * MATMUL_ID groups a batch's (token, slot) rows by expert, so each expert's matrix is streamed once per
 * forward for all the rows that chose it, as MATMUL streams a dense one.  Invariant: output (row, n) is one
 * vec_dot_tile call on the same converted bytes whatever the batch, the grouping or the thread count, and
 * it is the call MATMUL makes for that row against that expert's matrix, so a token's result does not
 * depend on which other tokens share its forward (batched == serial, bitwise). */
#include "backend/cpu/cpu_impl.h"

#define ID_TILE_N 16 /* weight rows per cache tile, as ops_matmul.c */

/* ---- topk ---- */

/* a before b in the top-k order: larger first, equal values lower index first */
static bool ranks_before(float va, int32_t a, float vb, int32_t b) {
    return va > vb || (va == vb && a < b);
}

void mf_cpu_op_topk(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *x = mf_graph_node_c(ex->g, n->src[0]);
    const int64_t ne0 = x->ne[0], k = n->ne[0];
    int64_t r0, r1;
    mf_cpu_split(x->ne[1], ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *v = (const float *)((const char *)x->data + (size_t)r * x->nb[1]);
        int32_t *o = (int32_t *)((char *)n->data + (size_t)r * n->nb[1]);
        int64_t have = 0; /* insertion into the sorted first k: n_expert is small (8..256) */
        for (int32_t i = 0; i < (int32_t)ne0; i++) {
            if (have == k && !ranks_before(v[i], i, v[o[k - 1]], o[k - 1])) continue;
            int64_t at = have < k ? have++ : k - 1;
            while (at > 0 && ranks_before(v[i], i, v[o[at - 1]], o[at - 1])) {
                o[at] = o[at - 1];
                at--;
            }
            o[at] = i;
        }
    }
}

/* ---- moe_sum ---- */

void mf_cpu_op_moe_sum(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *y = mf_graph_node_c(ex->g, n->src[0]), *p = mf_graph_node_c(ex->g, n->src[1]),
                  *ids = mf_graph_node_c(ex->g, n->src[2]);
    const int64_t N = y->ne[0], k = y->ne[1], E = p->ne[0];
    const bool norm = n->iparams[0] != 0;
    int64_t t0, t1;
    mf_cpu_split(y->ne[2], ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        const int32_t *id = (const int32_t *)((const char *)ids->data + (size_t)t * ids->nb[1]);
        const float *pr = (const float *)((const char *)p->data + (size_t)t * p->nb[1]);
        float w[MF_MOE_MAX_USED];
        double sum = 0;
        bool bad = false;
        for (int64_t j = 0; j < k; j++) {
            if (id[j] < 0 || id[j] >= E) {
                mf_cpu_fault_set(ex, ith, (int32_t)(n - mf_graph_node_c(ex->g, 0)), "expert id", t, id[j], E);
                bad = true;
                break;
            }
            w[j] = pr[id[j]];
            sum += (double)w[j]; /* ggml_sum_rows: a double sum, then one rounding */
        }
        if (bad) continue;
        if (norm) {
            float s = (float)sum;
            s = s > 6.103515625e-5f ? s : 6.103515625e-5f; /* llama.cpp clamps the sum at 2^-14 */
            for (int64_t j = 0; j < k; j++) w[j] = w[j] / s;
        }
        float *o = (float *)((char *)n->data + (size_t)t * n->nb[1]);
        const float *yt = (const float *)((const char *)y->data + (size_t)t * y->nb[2]);
        for (int64_t i = 0; i < N; i++) o[i] = yt[i] * w[0];
        for (int64_t j = 1; j < k; j++) { /* llama.cpp: mul, then ((e0 + e1) + e2) + ...: two roundings a term */
            const float *yj = yt + j * N;
            for (int64_t i = 0; i < N; i++) {
                const float term = yj[i] * w[j];
                o[i] = o[i] + term;
            }
        }
    }
}

/* ---- matmul_id ---- */

/* The shared scratch: the converted input rows, the same rows gathered in expert order, the slot of each
 * gathered row, each expert's first gathered row, and the experts in use. */
typedef struct {
    size_t rs;             /* bytes of one converted row */
    int64_t K, N, E, R, k, T;
    uint8_t *conv;         /* [R * T] converted rows of the input */
    uint8_t *rows;         /* [k * T] the rows each slot reads, by expert, then by slot */
    int32_t *slot;         /* [k * T] the slot (t * k + j) of gathered row p */
    int32_t *start;        /* [E + 1] expert e's gathered rows are start[e] .. start[e + 1] */
    int32_t *used;         /* [E + 1] the experts with rows, used[0] = how many */
    int32_t *cur;          /* [E] the sort's cursors */
} id_layout;

static size_t up64(size_t b) { return (b + 63) / 64 * 64; }

/* the layout over base (NULL: sizes only); *bytes gets its size */
static id_layout layout(const mf_graph *g, const mf_node *n, uint8_t *base, size_t *bytes) {
    const mf_node *w = mf_graph_node_c(g, n->src[0]), *x = mf_graph_node_c(g, n->src[1]);
    const mf_quant_kernels *kk = mf_quant_kernels_get(w->type);
    id_layout L = {.K = w->ne[0], .N = w->ne[1], .E = w->ne[2], .R = x->ne[1], .k = n->ne[1], .T = n->ne[2]};
    L.rs = mf_row_size(kk->vec_dot_type, L.K);
    const size_t part[6] = {L.rs * (size_t)(L.R * L.T), L.rs * (size_t)(L.k * L.T), sizeof(int32_t) * (size_t)(L.k * L.T),
                            sizeof(int32_t) * (size_t)(L.E + 1), sizeof(int32_t) * (size_t)(L.E + 1),
                            sizeof(int32_t) * (size_t)L.E};
    size_t off[6], at = 0;
    for (int i = 0; i < 6; i++) off[i] = at, at += up64(part[i]);
    *bytes = at;
    if (base) {
        L.conv = base + off[0];
        L.rows = base + off[1];
        L.slot = (int32_t *)(base + off[2]);
        L.start = (int32_t *)(base + off[3]);
        L.used = (int32_t *)(base + off[4]);
        L.cur = (int32_t *)(base + off[5]);
    }
    return L;
}

size_t mf_cpu_matmul_id_shared_bytes(const mf_graph *g, const mf_node *n) {
    size_t bytes;
    layout(g, n, NULL, &bytes);
    return bytes + 64;
}

/* Counting sort of the slots by expert (slots in order within an expert), done by one thread; an id out of
 * range is reported and its slot left out. */
static void group_by_expert(const mf_cpu_exec *ex, const mf_node *n, const id_layout *L, int ith) {
    const int32_t *id = mf_graph_node_c(ex->g, n->src[2])->data;
    int32_t *start = L->start, *cur = L->cur;
    memset(start, 0, sizeof(int32_t) * (size_t)(L->E + 1));
    for (int64_t s = 0; s < L->k * L->T; s++) {
        if (id[s] < 0 || id[s] >= L->E) {
            mf_cpu_fault_set(ex, ith, (int32_t)(n - mf_graph_node_c(ex->g, 0)), "expert id", s, id[s], L->E);
            continue;
        }
        start[id[s] + 1]++;
    }
    L->used[0] = 0;
    for (int64_t e = 0; e < L->E; e++) {
        if (start[e + 1]) L->used[++L->used[0]] = (int32_t)e;
        start[e + 1] += start[e];
        cur[e] = start[e];
    }
    for (int64_t s = 0; s < L->k * L->T; s++)
        if (id[s] >= 0 && id[s] < L->E) L->slot[cur[id[s]]++] = (int32_t)s;
}

/* an x8/x16 (or AMX) tile stores each activation's results straight into a row: a thread's rows of one call */
size_t mf_cpu_matmul_id_thread_bytes(const mf_graph *g, const mf_node *n) {
    const mf_node *w = mf_graph_node_c(g, n->src[0]);
    const mf_quant_kernels *kk = mf_quant_kernels_get(w->type);
    return kk && kk->act_major ? sizeof(float) * (size_t)MF_MAX(1, kk->tile_a) * (size_t)w->ne[1] + 64 : 0;
}

/* The act_major tiles (x8/x16 layouts, a group of tile_w rows a call, or any number of groups with spans):
 * weight rows [n0, n1) of the expert against na gathered rows at a time, into buf, then each row to its slot. */
static void expert_rows_major(const id_layout *L, const mf_quant_kernels *kk, const char *wd, size_t ws, int64_t first,
                              int64_t cnt, int64_t n0, int64_t n1, float *buf, float *out) {
    const int ta = MF_MAX(1, kk->tile_a), tw = MF_MAX(1, kk->tile_w);
    const size_t ldb = (size_t)(n1 - n0);
    for (int64_t m0 = 0; m0 < cnt; m0 += ta) {
        const int na = (int)MF_MIN((int64_t)ta, cnt - m0);
        const uint8_t *a = L->rows + (size_t)(first + m0) * L->rs;
        if (kk->spans)
            kk->vec_dot_tile(L->K, buf, ldb, wd + (size_t)n0 * ws, ws, (int)(n1 - n0), a, L->rs, na);
        else
            for (int64_t j0 = n0; j0 < n1; j0 += tw)
                kk->vec_dot_tile(L->K, buf + (j0 - n0), ldb, wd + (size_t)j0 * ws, ws, (int)MF_MIN((int64_t)tw, n1 - j0),
                                 a, L->rs, na);
        for (int j = 0; j < na; j++)
            memcpy(out + (size_t)L->slot[first + m0 + j] * (size_t)L->N + n0, buf + (size_t)j * ldb, sizeof(float) * ldb);
    }
}

/* weight rows [n0, n1) of expert e against every row that chose it */
static void expert_rows(const mf_cpu_exec *ex, const mf_node *n, const id_layout *L, const mf_quant_kernels *kk,
                        int64_t e, int64_t n0, int64_t n1, int ith) {
    const mf_node *w = mf_graph_node_c(ex->g, n->src[0]);
    const char *wd = (const char *)w->data + (size_t)e * w->nb[2];
    const size_t ws = w->nb[1];
    if (kk->act_major) {
        expert_rows_major(L, kk, wd, ws, L->start[e], L->start[e + 1] - L->start[e], n0, n1,
                          mf_cpu_thread_scratch(ex, ith), n->data);
        return;
    }
    const int tw = MF_MAX(1, MF_MIN(kk->tile_w, MF_TILE_MAX)), ta = MF_MAX(1, MF_MIN(kk->tile_a, MF_TILE_MAX));
    const int64_t first = L->start[e], cnt = L->start[e + 1] - first;
    float *out = n->data;
    float s[MF_TILE_MAX * MF_TILE_MAX];
    for (int64_t t0 = n0; t0 < n1; t0 += ID_TILE_N) {
        const int64_t t1 = MF_MIN(t0 + ID_TILE_N, n1);
        for (int64_t m0 = 0; m0 < cnt; m0 += ta) {
            const int na = (int)MF_MIN((int64_t)ta, cnt - m0);
            const uint8_t *a = L->rows + (size_t)(first + m0) * L->rs;
            for (int64_t j0 = t0; j0 < t1; j0 += tw) {
                const int nw = (int)MF_MIN((int64_t)tw, t1 - j0);
                kk->vec_dot_tile(L->K, s, MF_TILE_MAX, wd + (size_t)j0 * ws, ws, nw, a, L->rs, na);
                for (int j = 0; j < na; j++) {
                    float *o = out + (size_t)L->slot[first + m0 + j] * (size_t)L->N + j0;
                    for (int i = 0; i < nw; i++) o[i] = s[i * MF_TILE_MAX + j];
                }
            }
        }
    }
}

/* Three phases: convert the input rows (split over threads) while one thread groups the slots by expert;
 * gather each slot's row into its expert's run; then units of (expert in use, chunk of its weight rows) are
 * handed out from a shared counter. */
void mf_cpu_op_matmul_id(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *w = mf_graph_node_c(ex->g, n->src[0]), *x = mf_graph_node_c(ex->g, n->src[1]);
    const mf_quant_kernels *kk = mf_quant_kernels_get(w->type);
    size_t bytes;
    const id_layout L = layout(ex->g, n, ex->shared, &bytes);
    int64_t r0, r1;
    mf_cpu_split(L.R * L.T, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        kk->from_float((const float *)((const char *)x->data + mf_cpu_row_offs(x, r)), L.conv + (size_t)r * L.rs,
                       L.K);
    if (ith == 0) group_by_expert(ex, n, &L, ith);
    mf_threadpool_barrier(ex->cpu->tp);

    const int64_t n_rows = L.start[L.E];
    mf_cpu_split(n_rows, ith, nth, &r0, &r1);
    for (int64_t p = r0; p < r1; p++) {
        const int64_t s = L.slot[p], t = s / L.k, j = s % L.k;
        memcpy(L.rows + (size_t)p * L.rs, L.conv + (size_t)(t * L.R + (L.R == 1 ? 0 : j)) * L.rs, L.rs);
    }
    mf_threadpool_barrier(ex->cpu->tp);

    /* chunks of whole tiles, about 4 per thread over the experts in use, at most 1 MiB of weights each */
    const int64_t n_used = L.used[0];
    int64_t ch = (L.N * n_used + 4 * (int64_t)nth - 1) / (4 * (int64_t)nth);
    ch = (ch + ID_TILE_N - 1) / ID_TILE_N * ID_TILE_N;
    ch = MF_MAX((int64_t)ID_TILE_N, MF_MIN(ch, MF_MAX((int64_t)ID_TILE_N, (int64_t)(((size_t)1 << 20) / w->nb[1]) / ID_TILE_N * ID_TILE_N)));
    const int64_t per = (L.N + ch - 1) / ch, units = per * n_used;
    const int32_t id = (int32_t)(n - mf_graph_node_c(ex->g, 0));
    int32_t u;
    while ((u = atomic_fetch_add_explicit(&ex->chunks[id], 1, memory_order_relaxed)) < units) {
        const int64_t e = L.used[1 + u / per], c0 = (u % per) * ch;
        expert_rows(ex, n, &L, kk, e, c0, MF_MIN(L.N, c0 + ch), ith);
    }
}
