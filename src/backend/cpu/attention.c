/* CPU attention over explicit cell windows, and the KV store.
 *
 * For query t and head h (kv head h / (n_head / n_head_kv)): scores s_c = dot(q, k_c) * scale for the
 * cells c of column t of the window in list order, softmax with max subtraction (sum in double),
 * out = sum_c p_c v_c / sum.  One (t, h) pair is always computed by one thread in one fixed order, so a
 * query's result does not depend on the other queries in the batch or on the thread count. */
#include "backend/cpu/cpu_impl.h"

static int32_t node_id(const mf_cpu_exec *ex, const mf_node *n) {
    return (int32_t)(n - mf_graph_node_c(ex->g, 0));
}

bool mf_cpu_kv_type_ok(uint32_t type) {
    switch (type) {
    case MF_TYPE_F32:
    case MF_TYPE_F16:
    case MF_TYPE_BF16:
    case MF_TYPE_Q8_0:
        return mf_quant_kernels_get(type) != NULL; /* the scores use the type's matmul kernel */
    default:
        return false;
    }
}

void mf_cpu_op_kv_store(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *rows = mf_graph_node_c(ex->g, n->src[1]), *cells = mf_graph_node_c(ex->g, n->src[2]);
    const int64_t ne0 = n->ne[0], n_cells = n->ne[1];
    const int32_t *cell = cells->data;
    int64_t t0, t1;
    mf_cpu_split(rows->ne[1], ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        const int32_t c = cell[t];
        if (c < 0 || c >= n_cells) {
            mf_cpu_fault_set(ex, ith, node_id(ex, n), "cell id", t, c, n_cells);
            continue;
        }
        const float *x = (const float *)((const char *)rows->data + (size_t)t * rows->nb[1]);
        char *y = (char *)n->data + (size_t)c * n->nb[1];
        switch (n->type) {
        case MF_TYPE_F32:
            memcpy(y, x, (size_t)ne0 * sizeof(float));
            break;
        default:
            mf_quantize_row_cpu(n->type, x, y, ne0);
            break; /* llama.cpp's run-time bytes */
        }
    }
}

static int64_t n_win(const mf_graph *g, const mf_node *n) {
    return mf_graph_node_c(g, n->src[3])->ne[0] - 1;
}

static int64_t group_of(const mf_graph *g, const mf_node *n) {
    return mf_graph_node_c(g, n->src[0])->ne[1] / n->iparams[0];
}

size_t mf_cpu_attention_thread_bytes(const mf_graph *g, const mf_node *n) {
    const int64_t hd = mf_graph_node_c(g, n->src[0])->ne[0], grp = group_of(g, n);
    /* scores[grp][n_win], max[grp], one v row in f32 [hd], accumulators [grp][hd], and the query heads
     * converted to K's vec_dot type (at most f32-sized) [grp][hd] */
    return ((size_t)grp * (size_t)n_win(g, n) + (size_t)grp + (size_t)hd + 2 * (size_t)grp * (size_t)hd) *
               sizeof(float) +
           5 * 64;
}

/* head slice (hd values from element offset e0) of a cache row as f32: the row itself when f32 */
static const float *kv_row(const mf_cpu_vec *vec, const mf_node *c, int32_t cell, int64_t e0, int64_t hd,
                           float *buf) {
    const char *row = (const char *)c->data + (size_t)cell * c->nb[1];
    switch (c->type) {
    case MF_TYPE_F32:
        return (const float *)row + e0;
    case MF_TYPE_F16:
        vec->f16_to_f32((const uint16_t *)row + e0, buf, hd);
        return buf;
    default:
        mf_dequantize_row(c->type, row + mf_row_size(c->type, e0), buf, hd);
        return buf;
    }
}

#define HB_MAX 64 /* query heads per work item (bounds the per-item arrays on the stack) */

static float *align64f(void *p) {
    return (float *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

/* Work item = (token, kv head, block of that kv head's query heads): a K/V row is converted once per
 * block.  Every query head is computed in the same order whatever the blocking (scores in window order,
 * then exp/accumulate in window order), so the blocking - chosen from the thread count - never changes
 * a result. */
void mf_cpu_op_attention(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *q = mf_graph_node_c(ex->g, n->src[0]), *k = mf_graph_node_c(ex->g, n->src[1]),
                  *v = mf_graph_node_c(ex->g, n->src[2]), *win = mf_graph_node_c(ex->g, n->src[3]);
    const mf_cpu_vec *vec = &ex->cpu->vec;
    const int64_t hd = q->ne[0], n_tok = q->ne[2], nw = win->ne[0] - 1, n_cells = k->ne[1];
    const int64_t n_kv = n->iparams[0], grp = q->ne[1] / n_kv;
    const float scale = n->fparams[0];
    const int32_t id = (int32_t)(n - mf_graph_node_c(ex->g, 0));
    /* enough items for every thread when the batch is small (decode) */
    int64_t n_blk = 1;
    while (n_tok * n_kv * n_blk < nth && n_blk < grp) n_blk++;
    const int64_t hb = MF_MIN((grp + n_blk - 1) / n_blk, HB_MAX);
    n_blk = (grp + hb - 1) / hb;

    float *scores = align64f(mf_cpu_thread_scratch(ex, ith));
    float *mx = align64f(scores + grp * nw);
    float *buf = align64f(mx + grp);
    float *acc = align64f(buf + hd);
    uint8_t *qc = (uint8_t *)align64f(acc + grp * hd);
    /* scores as llama.cpp's kq = mul_mat(k, q): the query converted once to the K type's vec_dot type,
     * dotted with the raw cache row by the matmul kernel of that type (f16 cache -> f16 query) */
    const mf_quant_kernels *kk = mf_quant_kernels_get(k->type);
    const size_t qrs = mf_row_size(kk->vec_dot_type, hd);
    int64_t w0, w1;
    mf_cpu_split(n_tok * n_kv * n_blk, ith, nth, &w0, &w1);
    for (int64_t item = w0; item < w1; item++) {
        const int64_t t = item / (n_kv * n_blk), kvh = (item / n_blk) % n_kv, blk = item % n_blk;
        const int64_t h0 = kvh * grp + blk * hb, nh = MF_MIN(hb, (kvh + 1) * grp - h0), e0 = kvh * hd;
        const int32_t *col = (const int32_t *)((const char *)win->data + (size_t)t * win->nb[1]);
        float *out = (float *)((char *)n->data + (size_t)t * n->nb[1]) + h0 * hd;
        const int64_t cnt = col[0];
        bool bad = false;
        if (cnt < 0 || cnt > nw) {
            mf_cpu_fault_set(ex, ith, id, "window count", t, cnt, nw + 1);
            bad = true;
        }
        for (int64_t j = 0; !bad && j < cnt; j++) {
            if (col[1 + j] < 0 || col[1 + j] >= n_cells) {
                mf_cpu_fault_set(ex, ith, id, "window cell id", t, col[1 + j], n_cells);
                bad = true;
            }
        }
        if (bad || cnt == 0) {
            memset(out, 0, (size_t)(nh * hd) * sizeof(float));
            continue;
        }
        const float *qh[HB_MAX];
        double sum[HB_MAX];
        for (int64_t g = 0; g < nh; g++) {
            mx[g] = -INFINITY;
            sum[g] = 0.0;
            qh[g] =
                (const float *)((const char *)q->data + (size_t)(h0 + g) * q->nb[1] + (size_t)t * q->nb[2]);
            kk->from_float(qh[g], qc + (size_t)g * qrs, hd);
        }
        const size_t kslice = mf_row_size(k->type, e0);
        for (int64_t j = 0; j < cnt; j++) {
            const char *kr = (const char *)k->data + (size_t)col[1 + j] * k->nb[1] + kslice;
            for (int64_t g = 0; g < nh; g++) {
                float s;
                kk->vec_dot(hd, &s, kr, qc + (size_t)g * qrs);
                s *= scale;
                scores[g * nw + j] = s;
                mx[g] = s > mx[g] ? s : mx[g];
            }
        }
        memset(acc, 0, (size_t)(nh * hd) * sizeof(float));
        for (int64_t g = 0; g < nh; g++) vec->exp_sub(cnt, scores + g * nw, mx[g], scores + g * nw);
        for (int64_t j = 0; j < cnt; j++) {
            const float *vr = kv_row(vec, v, col[1 + j], e0, hd, buf);
            for (int64_t g = 0; g < nh; g++) {
                const float p = scores[g * nw + j];
                sum[g] += (double)p;
                vec->axpy(hd, p, vr, acc + g * hd);
            }
        }
        for (int64_t g = 0; g < nh; g++) {
            const float inv = (float)(1.0 / sum[g]);
            for (int64_t d = 0; d < hd; d++) out[g * hd + d] = acc[g * hd + d] * inv;
        }
    }
}
