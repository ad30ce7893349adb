/* CPU attention over explicit cell spans, and the KV store.
 *
 * Two forms, chosen by the V cache's element type:
 *   - f32 / f16 V (K f32, f16 or q8_0): llama.cpp's graph without flash attention, kq = mul_mat(k, q),
 *     soft_max_ext, kqv = mul_mat(v, kq) (below);
 *   - q8_0 V: llama.cpp refuses a quantized V cache without flash attention, so minfer repeats its CPU
 *     flash attention (ggml_compute_forward_flash_attn_ext_f16_one_chunk) for it: attend_run_fa.
 *
 * For query t and head h (kv head h / (n_head / n_head_kv)): scores s_c = dot(q, k_c) * scale for the
 * cells c of query t's span (graph.h: a stretch of the KV store's cell lists) in list order, softmax with max subtraction as llama.cpp's
 * soft_max_ext (see normalize), out = sum_c p_c v_c.  One (t, h) pair is always computed by one thread in one fixed order, so a
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

/* the longest span: a sequence holds at most every cell (the scores' row stride) */
static int64_t n_win(const mf_graph *g, const mf_node *n) {
    return mf_graph_node_c(g, n->src[1])->ne[1];
}

static int64_t group_of(const mf_graph *g, const mf_node *n) {
    return mf_graph_node_c(g, n->src[0])->ne[1] / n->iparams[0];
}

#define HB_MAX 64      /* query heads per work item (bounds the per-item arrays on the stack) */
#define TB_MAX 32      /* tokens per work item (at most; the plain path takes 8) */
#define TB_PLAIN 8
#define ROWS_X16 64    /* (token, head) rows a token block aims for on the AVX-512 path: its K block
                        * transposition is shared by all of them */
#define X16_MIN_ROWS 8 /* below this many rows in a run the AVX-512 path scores key by key */
#define ROWS_SHARED 16 /* (token, head) rows a token block aims for */
#define SCORES_BUDGET ((size_t)4 << 20) /* bytes of scores per thread a token block may take */
#define FA_BLOCK 64 /* keys per block of the flash-attention form's AVX-512 path */
#define PV_BLOCK_BYTES ((size_t)32 << 10) /* value slices of one key block (mf_cpu_att_pv_rows): L1 */
/* rows per run: tb * grp <= ROWS_SHARED when tb > 1, else one token's heads <= HB_MAX */
_Static_assert(ROWS_SHARED <= HB_MAX && ROWS_X16 <= HB_MAX, "rows fit the stack arrays");

/* The AVX-512 path (attention_avx512.c): f32/f16 caches, the usual head sizes (multiples of 32, the
 * F32/F16 vec_dot step, whose order its scores keep lane for lane: both paths give the same bits). */
static bool use_x16(const mf_graph *g, const mf_node *n) {
    const mf_node *q = mf_graph_node_c(g, n->src[0]), *k = mf_graph_node_c(g, n->src[1]),
                  *v = mf_graph_node_c(g, n->src[2]);
    const bool fk = k->type == MF_TYPE_F32 || k->type == MF_TYPE_F16, fv = v->type == MF_TYPE_F32 || v->type == MF_TYPE_F16;
    /* (a q8_0 V takes attend_run_fa whatever the ISA: its SIMD is in the vec kernels it calls) */
    return mf_isa_avx512(mf_quant_active_isa()) && fk && fv && mf_cpu_att_x16_ok(q->ne[0]);
}

/* Tokens per work item.  In a causal prefill consecutive tokens see nested windows, so a block of them
 * visits each K/V row once for all its (token, head) rows: with 2 query heads per kv head a converted V
 * row would otherwise serve only 2 rows.  About ROWS_SHARED rows amortize the conversion and keep the
 * accumulators in L1; at long contexts the block shrinks so its scores [rows][n_win] stay within
 * SCORES_BUDGET (1 token: today's per-token size whatever the context). */
static int64_t tok_block(int64_t grp, int64_t nw, int64_t n_tok, bool x16) {
    const int64_t tbmax = x16 ? TB_MAX : TB_PLAIN, rmax = x16 ? ROWS_X16 : ROWS_SHARED;
    int64_t tb = MF_MAX(1, MF_MIN(MF_MIN(tbmax, rmax / grp), n_tok));
    while (tb > 1 && (size_t)(tb * grp) * (size_t)nw * sizeof(float) > SCORES_BUDGET) tb--;
    return tb;
}

size_t mf_cpu_attention_thread_bytes(const mf_graph *g, const mf_node *n) {
    const mf_node *q = mf_graph_node_c(g, n->src[0]);
    const int64_t hd = q->ne[0], grp = group_of(g, n), nw = n_win(g, n);
    const bool x16 = use_x16(g, n);
    const size_t rows = (size_t)(tok_block(grp, nw, q->ne[2], x16) * grp);
    /* scores[rows][n_win], max[rows], one v row in f32 [hd], accumulators [8][rows][hd], the queries
     * converted to K's vec_dot type (at most f32-sized) [rows][hd], the scores of one key [rows], and for the
     * dot_rows path the queries as f32 [rows][hd] and one K row as f32 [hd]; the AVX-512 path also a K block
     * [hd][16], its scores or lane maxima [rows][16] and the pv16 factors [rows] (laid out whatever the path),
     * and the flash-attention form's value block [FA_BLOCK][hd] after them */
    return (rows * (size_t)nw + rows + (size_t)hd + 10 * rows * (size_t)hd + (size_t)hd + rows +
            16 * (size_t)hd + 17 * rows + FA_BLOCK * (size_t)hd) * sizeof(float) +
           13 * 64;
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

static float *align64f(void *p) {
    return (float *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

/* one query's window: count cells of the span, in position order */
typedef struct {
    int64_t cnt;
    const int32_t *cell;
} att_win;

/* what one thread needs to compute runs of one node */
typedef struct {
    const mf_cpu_exec *ex;
    const mf_node *n, *q, *k, *v, *win;
    const mf_cpu_vec *vec;
    const mf_quant_kernels *kk;
    int64_t hd, nw, n_cells;
    size_t qrs; /* bytes of a query row in K's vec_dot type */
    float scale;
    int32_t id;
    int ith;
    float *scores, *mx, *buf, *acc; /* this thread's scratch */
    float *qf, *kf, *sk;            /* dot_rows path: queries, one K row as f32; sk: one key's dots */
    mf_dot_rows_fn dot_rows;        /* NULL: one vec_dot per (row, key) */
    float *kt, *s16, *inv;          /* AVX-512 path: K block [hd][16], its scores [rows][16], pv16 factors [rows] */
    float *vf;                      /* flash-attention form, AVX-512: a key block's value rows as f32 [FA_BLOCK][hd] */
    uint8_t *qc;
} att_ctx;

/* query t's span; cnt 0 (after recording a fault when something is out of range) when the token's output
 * is zero: a bad span or an empty window */
static att_win window_of(const att_ctx *a, int64_t t) {
    const int32_t *buf = a->win->data;
    const int64_t len = buf[0], off = buf[2 + 2 * t], cnt = buf[3 + 2 * t];
    const int64_t hdr = 2 * (a->win->ne[1]);
    if (buf[1] != a->win->ne[1] - 1) { /* spans written for another batch */
        mf_cpu_fault_set(a->ex, a->ith, a->id, "span token count", t, buf[1], a->win->ne[1]);
        return (att_win){0, NULL};
    }
    if (cnt < 0 || cnt > a->nw) {
        mf_cpu_fault_set(a->ex, a->ith, a->id, "span count", t, cnt, a->nw + 1);
        return (att_win){0, NULL};
    }
    if (off < hdr || off > len - cnt) {
        mf_cpu_fault_set(a->ex, a->ith, a->id, "span offset", t, off, len);
        return (att_win){0, NULL};
    }
    const int32_t *cell = buf + off;
    for (int64_t j = 0; j < cnt; j++) {
        if (cell[j] < 0 || cell[j] >= a->n_cells) {
            mf_cpu_fault_set(a->ex, a->ith, a->id, "span cell id", t, cell[j], a->n_cells);
            return (att_win){0, NULL};
        }
    }
    return (att_win){cnt, cell};
}

/* does window `next` start with all of window `prev` (the causal prefill's next token: the same list)? */
static bool extends(att_win prev, att_win next) {
    return next.cnt >= prev.cnt &&
           (next.cell == prev.cell || !memcmp(next.cell, prev.cell, (size_t)prev.cnt * sizeof(int32_t)));
}

/* Cache rows are a whole cell apart (n_embd_kv elements; 4 KiB for Qwen3's f32 K), so consecutive keys'
 * head slices sit in different pages and the hardware prefetcher does not follow them: fetch the slice
 * of a key a few keys ahead (measured: decode attention was latency-bound on these misses). */
#define KV_PREFETCH_AHEAD 4
static inline __attribute__((always_inline)) void prefetch_slice(const char *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + o, 0, 3);
}

static float *out_row(const att_ctx *a, int64_t t, int64_t h) {
    return (float *)((char *)a->n->data + (size_t)t * a->n->nb[1]) + h * a->hd;
}

/* query row r = (token t, head h) converted once to K's vec_dot type (llama.cpp's kq = mul_mat(k, q): an
 * f16 cache takes an f16 query) into qc, and for the f32 paths back to f32 into qf (exact) */
static void convert_query(const att_ctx *a, int64_t r, int64_t t, int64_t h, bool to_f32) {
    const int64_t hd = a->hd;
    const float *qh = (const float *)((const char *)a->q->data + (size_t)h * a->q->nb[1] + (size_t)t * a->q->nb[2]);
    a->kk->from_float(qh, a->qc + (size_t)r * a->qrs, hd);
    if (!to_f32) return;
    if (a->k->type == MF_TYPE_F16)
        a->vec->f16_to_f32((const uint16_t *)(a->qc + (size_t)r * a->qrs), a->qf + r * hd, hd);
    else
        memcpy(a->qf + r * hd, a->qc + (size_t)r * a->qrs, (size_t)hd * sizeof(float));
}

/* Scores of the run's rows key by key, as llama.cpp's kq = mul_mat(k, q): key j's cache row dotted with
 * rows r0.. (those whose window reaches it) by the K type's vec_dot on the converted queries, or by
 * dot_rows on f32 copies (the same bits); scaled into scores[r][j], with each row's max in mx[r]. */
static void score_keys(const att_ctx *a, const att_win *cols, int64_t nh, int64_t rows, int64_t kvh) {
    const int64_t hd = a->hd, nw = a->nw, e0 = kvh * hd, cnt = cols[rows / nh - 1].cnt;
    const int32_t *cell = cols[rows / nh - 1].cell;
    const size_t kslice = mf_row_size(a->k->type, e0), kbytes = mf_row_size(a->k->type, hd);
    for (int64_t r = 0; r < rows; r++) a->mx[r] = -INFINITY;
    int64_t r0 = 0; /* the first row whose window reaches key j */
    for (int64_t j = 0; j < cnt; j++) {
        while (cols[r0 / nh].cnt <= j) r0 += nh;
        if (j + KV_PREFETCH_AHEAD < cnt)
            prefetch_slice((const char *)a->k->data + (size_t)cell[j + KV_PREFETCH_AHEAD] * a->k->nb[1] + kslice,
                           kbytes);
        if (a->dot_rows) {
            const float *kf = kv_row(a->vec, a->k, cell[j], e0, hd, a->kf);
            a->dot_rows(hd, kf, a->qf + r0 * hd, (size_t)hd, (int)(rows - r0), a->sk);
        } else {
            const char *kr = (const char *)a->k->data + (size_t)cell[j] * a->k->nb[1] + kslice;
            for (int64_t r = r0; r < rows; r++) a->kk->vec_dot(hd, &a->sk[r - r0], kr, a->qc + (size_t)r * a->qrs);
        }
        for (int64_t r = r0; r < rows; r++) {
            const float s = a->sk[r - r0] * a->scale;
            a->scores[r * nw + j] = s;
            a->mx[r] = s > a->mx[r] ? s : a->mx[r];
        }
    }
}

/* The same scores 16 keys at a time (AVX-512 path): each block's K slices transposed into lanes once for
 * every row (mf_cpu_att_kt16), each row's 16 dots in the vec_dot order lane for lane, scaled and stored
 * for the keys its window reaches (mf_cpu_att_scores16_put).  The maximum is kept per lane and folded
 * at the end with the same rule s > m ? s : m: it is the maximum of the same values (NaNs never taken);
 * only which zero a max of +0/-0 ties keeps can differ, and x - (+0) and x - (-0) have the same exp. */
static void score_blocks(const att_ctx *a, const att_win *cols, int64_t nh, int64_t rows, int64_t kvh) {
    const int64_t hd = a->hd, nw = a->nw, e0 = kvh * hd, cnt = cols[rows / nh - 1].cnt;
    const int32_t *cell = cols[rows / nh - 1].cell;
    const size_t kslice = mf_row_size(a->k->type, e0), kbytes = mf_row_size(a->k->type, hd);
    for (int64_t j = 0; j < MF_MIN(cnt, (int64_t)16); j++)
        prefetch_slice((const char *)a->k->data + (size_t)cell[j] * a->k->nb[1] + kslice, kbytes);
    float *mxv = a->s16; /* [rows][16] */
    for (int64_t i = 0; i < 16 * rows; i++) mxv[i] = -INFINITY;
    uint16_t mask[HB_MAX];
    int64_t r0 = 0; /* the first row whose window reaches the block */
    for (int64_t jb = 0; jb < cnt; jb += 16) {
        const int64_t nk = MF_MIN((int64_t)16, cnt - jb);
        while (cols[r0 / nh].cnt <= jb) r0 += nh;
        /* the next block's K slices (decode reads the cache cold, right after streaming the weights) */
        for (int64_t i = jb + 16; i < MF_MIN(cnt, jb + 32); i++)
            prefetch_slice((const char *)a->k->data + (size_t)cell[i] * a->k->nb[1] + kslice, kbytes);
        mf_cpu_att_kt16(hd, a->k->data, a->k->nb[1], kslice, a->k->type, cell + jb, (int)nk, a->kt);
        for (int64_t r = r0; r < rows; r++) {
            const int64_t lim = MF_MIN((int64_t)16, cols[r / nh].cnt - jb);
            mask[r] = (uint16_t)(lim >= 16 ? 0xFFFFu : (1u << lim) - 1u);
        }
        mf_cpu_att_scores16_put(hd, a->kt, a->qf + r0 * hd, (int)(rows - r0), a->scale, mask + r0,
                                a->scores + r0 * nw + jb, (size_t)nw, mxv + 16 * r0);
    }
    for (int64_t r = 0; r < rows; r++) {
        float m = -INFINITY;
        for (int i = 0; i < 16; i++) m = mxv[16 * r + i] > m ? mxv[16 * r + i] : m;
        a->mx[r] = m;
    }
}

/* A row's softmax as llama.cpp's soft_max_ext gives it to kqv = mul_mat(v, kq): e^(s - max) with the sum
 * in its order (vec.c), then every probability times (float)(1 / sum) BEFORE the values are weighted
 * (ggml_vec_scale_f32).  Scaling the weighted sum afterwards instead rounds differently, and that last-bit
 * difference in the attention output, converted to q8 for the output projection, flipped a q8 level at a
 * position of qwen3-tiny-q8_0 whose K/V then moved 46 eval rows (docs/CONFORMANCE.md). */
static void normalize(const mf_cpu_vec *vec, int64_t cnt, float *p, float mx) {
    const float inv = (float)(1.0 / vec->exp_sub(cnt, p, mx, p));
    for (int64_t j = 0; j < cnt; j++) p[j] *= inv;
}

/* kqv = mul_mat(v, kq) with an f16 V: ggml-cpu converts kq to V's vec_dot type (f16) before the product,
 * so the probabilities the values are weighted with are rounded to f16 (exact in f32 afterwards).  Measured
 * against llama.cpp run with an f16 cache (docs/CONFORMANCE.md, "KV cache types"): without this rounding
 * 237 and 241 of the tiny q8_0 models' 289 compared rows were off by up to 1.36, with it 2 and 85. */
static void round_p_f16(const att_ctx *a, int64_t cnt, float *p) {
    if (a->v->type != MF_TYPE_F16) return;
    a->vec->round_f16(cnt, p); /* F16C where the CPU has it: a scalar conversion per probability cost a
                                * third of the f16-cache prefill's attention time */
}

/* The AVX-512 path over the same run (see attend_run for the run): the scores (by blocks; key by key when
 * the run has fewer than X16_MIN_ROWS rows, e.g. one decode token's heads, which do not pay for the
 * transposition - the same bits either way), softmax per row as there (16 lanes wide), then the values:
 * of a prefill run for all its rows at once over key blocks that stay in L1 (mf_cpu_att_pv_rows: a long
 * cache's V rows were fetched once per token of the run, from L3 at depth 4096), of one token per token. */
static void attend_run_x16(const att_ctx *a, const att_win *cols, int64_t t0, int64_t nt, int64_t kvh,
                           int64_t h0, int64_t nh) {
    const int64_t hd = a->hd, nw = a->nw, rows = nt * nh, e0 = kvh * hd;
    const int32_t *cell = cols[nt - 1].cell;
    float *scores = a->scores, *mx = a->mx;
    for (int64_t r = 0; r < rows; r++) convert_query(a, r, t0 + r / nh, h0 + r % nh, true);
    (rows < X16_MIN_ROWS ? score_keys : score_blocks)(a, cols, nh, rows, kvh);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t cr = cols[r / nh].cnt;
        mf_cpu_att_softmax_row(cr, scores + r * nw, mx[r], a->v->type == MF_TYPE_F16);
        a->inv[r] = 1.0f; /* the probabilities are normalized already */
    }
    if (nt > 1) { /* a prefill run: every row at once, each value row read once */
        int64_t rcnt[HB_MAX];
        for (int64_t r = 0; r < rows; r++) rcnt[r] = cols[r / nh].cnt;
        const size_t vrow = mf_row_size(a->v->type, hd);
        const mf_cpu_att_pvb pvb = {.hd = hd,
                                    .kb = MF_MAX((int64_t)64, MF_MIN((int64_t)512, (int64_t)(PV_BLOCK_BYTES / vrow) & ~(int64_t)7)),
                                    .nrows = (int)rows,
                                    .nh = (int)nh,
                                    .cnt = rcnt,
                                    .p = scores,
                                    .p_stride = (size_t)nw,
                                    .v = a->v->data,
                                    .v_nb1 = a->v->nb[1],
                                    .voff = mf_row_size(a->v->type, e0),
                                    .vtype = a->v->type,
                                    .cell = cell,
                                    .acc = a->acc,
                                    .out = out_row(a, t0, h0),
                                    .out_stride = a->n->nb[1] / sizeof(float)};
        mf_cpu_att_pv_rows(&pvb);
        return;
    }
    for (int64_t i = 0; i < nt; i++) {
        const mf_cpu_att_pv pv = {.hd = hd,
                                  .cnt = cols[i].cnt,
                                  .nh = (int)nh,
                                  .p = scores + i * nh * nw,
                                  .p_stride = (size_t)nw,
                                  .inv = a->inv + i * nh,
                                  .v = a->v->data,
                                  .v_nb1 = a->v->nb[1],
                                  .voff = mf_row_size(a->v->type, e0),
                                  .vtype = a->v->type,
                                  .cell = cell,
                                  .out = out_row(a, t0 + i, h0)};
        mf_cpu_att_pv16(&pv);
    }
}

/* Heads h0..h0+nh-1 of tokens t0..t0+nt-1, whose windows cols[] are nested (each starts with the
 * previous one, none empty).  Row r = (token i, head g) = i * nh + g.  Key j of the longest window is
 * visited once; the rows of the tokens whose windows reach j (a suffix of the run, the counts grow) use
 * its K row and its V row converted once.  Each row still gets exactly the single-token sequence: its
 * scores by vec_dot in its window order, its own max, its own normalized probabilities, then fused axpys
 * in llama.cpp's lane order over its window - so a run of any length gives every row the same bits. */
static void attend_run(const att_ctx *a, const att_win *cols, int64_t t0, int64_t nt, int64_t kvh,
                       int64_t h0, int64_t nh) {
    const int64_t hd = a->hd, nw = a->nw, rows = nt * nh, e0 = kvh * hd, cnt = cols[nt - 1].cnt;
    const int32_t *cell = cols[nt - 1].cell;
    float *scores = a->scores, *mx = a->mx, *acc = a->acc;
    for (int64_t r = 0; r < rows; r++) {
        convert_query(a, r, t0 + r / nh, h0 + r % nh, a->dot_rows != NULL);
    }
    score_keys(a, cols, nh, rows, kvh);
    const size_t vslice = mf_row_size(a->v->type, e0), vbytes = mf_row_size(a->v->type, hd);
    for (int64_t r = 0; r < rows; r++) {
        normalize(a->vec, cols[r / nh].cnt, scores + r * nw, mx[r]);
        round_p_f16(a, cols[r / nh].cnt, scores + r * nw);
    }
    /* the values in llama.cpp's order (cpu_impl.h, MF_PV_LANE): one pass per lane over its keys, each pass
     * merged into the partial sums p0..p2 as soon as its pair of the tree is complete */
    const size_t n = (size_t)(rows * hd);
    float *p0 = acc, *p1 = acc + n, *p2 = acc + 2 * n, *cur = acc + 3 * n;
    for (int k = 0; k < 8; k++) {
        const int64_t m = MF_PV_LANE(k);
        float *dst = k == 0 ? p0 : k == 2 || k == 4 ? p1 : k == 6 ? p2 : cur;
        memset(dst, 0, n * sizeof(float));
        int64_t r0 = 0; /* the first row whose window reaches key j */
        for (int64_t j = m; j < cnt; j += 8) {
            while (cols[r0 / nh].cnt <= j) r0 += nh;
            if (j + 8 * KV_PREFETCH_AHEAD < cnt)
                prefetch_slice((const char *)a->v->data + (size_t)cell[j + 8 * KV_PREFETCH_AHEAD] * a->v->nb[1] +
                                   vslice,
                               vbytes);
            const float *vr = kv_row(a->vec, a->v, cell[j], e0, hd, a->buf);
            for (int64_t r = r0; r < rows; r++) a->vec->axpy(hd, scores[r * nw + j], vr, dst + r * hd);
        }
        switch (k) {
        case 1: /* p0 = a0 + a4 */
            for (size_t i = 0; i < n; i++) p0[i] += cur[i];
            break;
        case 3: /* p0 = (a0 + a4) + (a2 + a6) */
            for (size_t i = 0; i < n; i++) p0[i] += p1[i] + cur[i];
            break;
        case 5: /* p1 = a1 + a5 */
            for (size_t i = 0; i < n; i++) p1[i] += cur[i];
            break;
        case 7: /* p0 + ((a1 + a5) + (a3 + a7)) */
            for (size_t i = 0; i < n; i++) p0[i] += p1[i] + (p2[i] + cur[i]);
            break;
        default:
            break;
        }
    }
    for (int64_t r = 0; r < rows; r++)
        memcpy(out_row(a, t0 + r / nh, h0 + r % nh), p0 + r * hd, (size_t)hd * sizeof(float));
}

/* A q8_0 V cache: llama.cpp's CPU flash attention, per query row (ggml-cpu ops.cpp,
 * ggml_compute_forward_flash_attn_ext_f16_one_chunk, the F32-accumulator branch it takes for a V that is
 * not f16), operation for operation: the query converted once to K's vec_dot type (q8_0 for a q8_0 K: the
 * same bytes as quantize_row_q8_0), then over the window in order (llama.cpp walks the cells in cell order
 * and skips the masked ones: the same order for a sequence's cells) s = vec_dot(k, q) * scale, an online
 * softmax with libm's expf (new maximum: the running sum of values is scaled by e^(M_old - M) first, as
 * ggml_vec_scale_f32), the value row read in q8_0 and added as fma(q * d, e^(s - M), acc) (its
 * dequantize_row_q8_0 then ggml_vec_mad_f32), the denominator S = S * ms + vs (here one fma, as a
 * contracting compiler makes it; the unfused form gives the same conformance results, measured, so which
 * one llama.cpp's build has is not pinned down), and at the end acc * (1 / S).  Every step is element-wise or scalar, so
 * the scalar and SIMD vec kernels give the same bits (test_cpu_ops test_attention_q8_0).
 *
 * A run under the flash-attention form: the rows of the run (its tokens' heads of one kv head, windows
 * nested) walk the longest window together, key by key, each row with its own running max, sum and
 * accumulator - exactly the sequence above per row (key j of the longest window is key j of every window
 * that reaches it), so the bits are one row's alone (test_cpu_ops test_attention_q8_0).  What the
 * rows share is the fetch of each K and V row, and their chains are independent, so the core overlaps one
 * row's expf and fma chain with the next row's (a long cache's decode was latency-bound on one row at a
 * time, and prefill fetched every K/V row once per row). */
static void attend_run_fa(const att_ctx *a, const att_win *cols, int64_t t0, int64_t nt, int64_t kvh,
                          int64_t h0, int64_t nh) {
    const int64_t hd = a->hd, rows = nt * nh, e0 = kvh * hd, cnt = cols[nt - 1].cnt;
    const int32_t *cell = cols[nt - 1].cell;
    const size_t kslice = mf_row_size(a->k->type, e0), kbytes = mf_row_size(a->k->type, hd);
    const size_t vslice = mf_row_size(MF_TYPE_Q8_0, e0), vbytes = mf_row_size(MF_TYPE_Q8_0, hd);
    float *M = a->mx, *S = a->sk, *acc = a->acc;
    for (int64_t r = 0; r < rows; r++) {
        convert_query(a, r, t0 + r / nh, h0 + r % nh, false);
        M[r] = -INFINITY;
        S[r] = 0.0f;
    }
    memset(acc, 0, (size_t)(rows * hd) * sizeof(float));
    if (mf_isa_avx512(mf_quant_active_isa()) && mf_cpu_att_x16_ok(hd)) {
        /* AVX-512: per block of keys, the scores of every row, the value rows dequantized once (exact: an
         * int8 times an f16 scale), then each row's steps over the block with its accumulator in registers */
        const int64_t kb = MF_MIN((int64_t)FA_BLOCK, a->nw);
        float *sc = a->scores; /* [rows][kb] */
        int64_t rb = 0;        /* the first row whose window reaches the block */
        for (int64_t jb = 0; jb < cnt; jb += kb) {
            const int64_t je = MF_MIN(cnt, jb + kb);
            while (cols[rb / nh].cnt <= jb) rb += nh;
            int64_t r0 = rb;
            for (int64_t j = jb; j < je; j++) {
                while (cols[r0 / nh].cnt <= j) r0 += nh;
                if (j + KV_PREFETCH_AHEAD < cnt) {
                    prefetch_slice((const char *)a->k->data + (size_t)cell[j + KV_PREFETCH_AHEAD] * a->k->nb[1] + kslice, kbytes);
                    prefetch_slice((const char *)a->v->data + (size_t)cell[j + KV_PREFETCH_AHEAD] * a->v->nb[1] + vslice, vbytes);
                }
                const char *kr = (const char *)a->k->data + (size_t)cell[j] * a->k->nb[1] + kslice;
                for (int64_t r = r0; r < rows; r++) {
                    float s;
                    a->kk->vec_dot(hd, &s, kr, a->qc + (size_t)r * a->qrs);
                    sc[r * kb + (j - jb)] = s * a->scale;
                }
                mf_dequantize_row(MF_TYPE_Q8_0, (const char *)a->v->data + (size_t)cell[j] * a->v->nb[1] + vslice,
                                  a->vf + (j - jb) * hd, hd);
            }
            for (int64_t r = rb; r < rows; r++)
                mf_cpu_att_fa_rows(hd, (int)(MF_MIN(je, cols[r / nh].cnt) - jb), sc + r * kb, a->vf, &M[r], &S[r],
                                   acc + r * hd);
        }
    } else {
        int64_t r0 = 0; /* the first row whose window reaches key j (the counts grow along the run) */
        for (int64_t j = 0; j < cnt; j++) {
            while (cols[r0 / nh].cnt <= j) r0 += nh;
            if (j + KV_PREFETCH_AHEAD < cnt) {
                prefetch_slice((const char *)a->k->data + (size_t)cell[j + KV_PREFETCH_AHEAD] * a->k->nb[1] + kslice, kbytes);
                prefetch_slice((const char *)a->v->data + (size_t)cell[j + KV_PREFETCH_AHEAD] * a->v->nb[1] + vslice, vbytes);
            }
            const char *kr = (const char *)a->k->data + (size_t)cell[j] * a->k->nb[1] + kslice;
            const char *vr = (const char *)a->v->data + (size_t)cell[j] * a->v->nb[1] + vslice;
            for (int64_t r = r0; r < rows; r++) {
                float s;
                a->kk->vec_dot(hd, &s, kr, a->qc + (size_t)r * a->qrs);
                s = s * a->scale;
                float ms = 1.0f, vs = 1.0f;
                if (s > M[r]) {
                    const float m_old = M[r];
                    M[r] = s;
                    ms = expf(m_old - s);
                    a->vec->scale(hd, ms, acc + r * hd);
                } else {
                    vs = expf(s - M[r]);
                }
                a->vec->mad_q8_0(hd, vs, vr, acc + r * hd);
                S[r] = fmaf(S[r], ms, vs);
            }
        }
    }
    for (int64_t r = 0; r < rows; r++) {
        float *out = out_row(a, t0 + r / nh, h0 + r % nh);
        const float inv = S[r] == 0.0f ? 0.0f : 1.0f / S[r];
        memcpy(out, acc + r * hd, (size_t)hd * sizeof(float));
        a->vec->scale(hd, inv, out);
    }
}

/* Work item = (block of tokens, kv head, block of that kv head's query heads).  The tokens of a block
 * are cut into runs of nested windows (a token alone when its window does not extend the previous
 * one's: another sequence, a bad or empty window).  The blocking - chosen from the shapes and the thread
 * count - never changes a result (see attend_run); items are handed out from a shared counter, the
 * latest token blocks (the longest causal windows) first, so the threads finish together. */
void mf_cpu_op_attention(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *q = mf_graph_node_c(ex->g, n->src[0]), *k = mf_graph_node_c(ex->g, n->src[1]);
    const int64_t hd = q->ne[0], n_tok = q->ne[2], nw = n_win(ex->g, n);
    const int64_t n_kv = n->iparams[0], grp = q->ne[1] / n_kv;
    const bool x16 = use_x16(ex->g, n), fa = mf_graph_node_c(ex->g, n->src[2])->type == MF_TYPE_Q8_0;
    const int64_t tb = tok_block(grp, nw, n_tok, x16), n_tb = (n_tok + tb - 1) / tb;
    /* enough items for every thread when the batch is small (decode) */
    int64_t n_blk = 1;
    while (n_tb * n_kv * n_blk < nth && n_blk < grp) n_blk++;
    const int64_t hb = MF_MIN((grp + n_blk - 1) / n_blk, HB_MAX);
    n_blk = (grp + hb - 1) / hb;
    const int64_t rows = tb * grp;

    att_ctx a = {.ex = ex,
                 .n = n,
                 .q = q,
                 .k = k,
                 .v = mf_graph_node_c(ex->g, n->src[2]),
                 .win = mf_graph_node_c(ex->g, n->src[3]),
                 .vec = &ex->cpu->vec,
                 .kk = mf_quant_kernels_get(k->type),
                 .hd = hd,
                 .nw = nw,
                 .n_cells = k->ne[1],
                 .scale = n->fparams[0],
                 .id = (int32_t)(n - mf_graph_node_c(ex->g, 0)),
                 .ith = ith};
    a.qrs = mf_row_size(a.kk->vec_dot_type, hd);
    a.scores = align64f(mf_cpu_thread_scratch(ex, ith));
    a.mx = align64f(a.scores + rows * nw);
    a.buf = align64f(a.mx + rows);
    a.acc = align64f(a.buf + hd);
    a.qc = (uint8_t *)align64f(a.acc + 8 * rows * hd);
    a.qf = align64f((float *)a.qc + rows * hd);
    a.kf = align64f(a.qf + rows * hd);
    a.sk = align64f(a.kf + hd);
    a.kt = align64f(a.sk + rows);
    a.s16 = align64f(a.kt + 16 * hd);
    a.inv = align64f(a.s16 + 16 * rows);
    a.vf = align64f(a.inv + rows);
    /* F32/F16 caches with hd % 32 == 0: convert each K row once for all the run's rows (same bits as the
     * type's vec_dot, see mf_dot_rows_fn) */
    a.dot_rows = (k->type == MF_TYPE_F32 || k->type == MF_TYPE_F16) && hd % 32 == 0 ? mf_quant_dot_rows() : NULL;

    const int64_t n_items = n_tb * n_kv * n_blk;
    _Atomic int32_t *ctr = &ex->chunks[a.id];
    for (int64_t item = ith; item < n_items;
         item = nth + atomic_fetch_add_explicit(ctr, 1, memory_order_relaxed)) {
        const int64_t b = n_tb - 1 - item / (n_kv * n_blk), kvh = (item / n_blk) % n_kv, blk = item % n_blk;
        const int64_t h0 = kvh * grp + blk * hb, nh = MF_MIN(hb, (kvh + 1) * grp - h0);
        const int64_t t0 = b * tb, nt = MF_MIN(tb, n_tok - t0);
        att_win cols[TB_MAX];
        for (int64_t i = 0; i < nt; i++) cols[i] = window_of(&a, t0 + i);
        int64_t i = 0;
        while (i < nt) {
            if (!cols[i].cnt) {
                memset(out_row(&a, t0 + i, h0), 0, (size_t)(nh * hd) * sizeof(float));
                i++;
                continue;
            }
            int64_t e = i + 1;
            while (e < nt && cols[e].cnt && extends(cols[e - 1], cols[e])) e++;
            (fa ? attend_run_fa : x16 ? attend_run_x16 : attend_run)(&a, cols + i, t0 + i, e - i, kvh, h0, nh);
            i = e;
        }
    }
}
