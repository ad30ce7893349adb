/* The Qwen2 / Qwen2.5 / Qwen3 graph, in llama.cpp's order (src/models/qwen2.cpp, qwen3.cpp):
 *   embd -> per layer: attn_norm -> q,k,v (+bias qwen2) -> heads -> q/k norm (qwen3) -> rope NEOX ->
 *   [hadamard q, k / v: a quantized K / V cache, as llama.cpp's build_attn] -> kv_store -> attention
 *   [-> hadamard] -> attn_output -> +residual -> ffn_norm -> swiglu(gate, up) -> down -> +residual
 *   (qwen3moe, src/models/qwen3moe.cpp: the FFN is build_moe_ffn's, see moe_ffn below; qwen2moe,
 *   src/models/qwen2moe.cpp: qwen2's attention, that FFN plus a gated shared expert, see shared_expert)
 *   -> output_norm -> output (an embeddings graph stops at output_norm: llama.cpp's t_embd, which its pooling
 *   reads; a reranker's ends with the classifier head cls.output instead of the LM head).
 * Like llama.cpp, the rows that want logits are selected (GET_ROWS) after the last layer's attention, so
 * the last FFN and the LM head run only on output rows.  Every op is row-independent, so the selection
 * changes no value. */
#include "model/model.h"

#include "quant/quant.h"

#include <math.h>
#include <stdio.h>

static int32_t weight(mf_graph *g, const mf_gguf_tensor *t, int nd, int layer) {
    int64_t ne[MF_MAX_DIMS] = {t->ne[0], t->ne[1], t->ne[2], 1}; /* ne[2]: a MoE layer's experts, else 1 */
    int32_t id = mf_g_weight(g, "", t->type, nd, ne, t->data);
    mf_g_name(g, id, "%.*s", (int)MF_MIN(t->name.len, 63), t->name.ptr);
    return mf_g_layer(g, id, layer);
}

/* a norm weight or bias (one row) is a vector; everything else a matrix */
static int32_t W(mf_graph *g, const mf_gguf_tensor *t, int layer) {
    return weight(g, t, t->ne[1] == 1 ? 1 : 2, layer);
}

/* rms_norm(x) * w, named like llama.cpp's build_norm callback */
static int32_t norm(mf_graph *g, int32_t x, const mf_gguf_tensor *w, float eps, int layer, const char *name) {
    int32_t n = mf_g_layer(g, mf_g_rms_norm(g, x, eps), layer);
    int32_t r = mf_g_mul(g, n, W(g, w, layer));
    if (layer >= 0)
        mf_g_name(g, r, "blk.%d.%s", layer, name);
    else
        mf_g_name(g, r, "%s", name);
    return mf_g_layer(g, r, layer);
}

static int32_t named(mf_graph *g, int32_t id, int layer, const char *name) {
    mf_g_name(g, id, "blk.%d.%s", layer, name);
    return mf_g_layer(g, id, layer);
}

/* llama.cpp's build_moe_ffn as qwen3moe and qwen2moe call it: softmax gating over the router's logits, the
 * token's n_expert_used most probable experts, each a swiglu FFN, their outputs summed weighted by the
 * probabilities, renormalized over the chosen ones for qwen3moe (norm_w), as they are for qwen2moe */
static int32_t moe_ffn(mf_graph *g, const mf_hparams *hp, const mf_layer_w *L, int32_t cur, int il) {
    const mf_node *c = mf_graph_node_c(g, cur);
    const int64_t nt = c ? c->ne[1] : 1;
    int32_t logits = named(g, mf_g_matmul(g, W(g, L->ffn_gate_inp, il), cur), il, "ffn_moe_logits");
    int32_t probs = named(g, mf_g_softmax(g, logits), il, "ffn_moe_probs");
    int32_t ids = named(g, mf_g_topk(g, probs, hp->n_expert_used), il, "ffn_moe_topk");
    int64_t ne[4] = {hp->n_embd, 1, nt, 1}; /* one input row a token, shared by its experts */
    int32_t x = named(g, mf_g_reshape(g, cur, 3, ne), il, "ffn_moe_in");
    int32_t up = named(g, mf_g_matmul_id(g, weight(g, L->ffn_up_exps, 3, il), x, ids), il, "ffn_moe_up");
    int32_t gate = named(g, mf_g_matmul_id(g, weight(g, L->ffn_gate_exps, 3, il), x, ids), il, "ffn_moe_gate");
    int32_t act = named(g, mf_g_swiglu(g, gate, up), il, "ffn_moe_swiglu");
    int32_t y = named(g, mf_g_matmul_id(g, weight(g, L->ffn_down_exps, 3, il), act, ids), il, "ffn_moe_down");
    return named(g, mf_g_moe_sum(g, y, probs, ids, hp->moe_norm), il, "ffn_moe_out");
}

/* llama.cpp's build_ffn as the Qwen graphs call it (LLM_FFN_SILU, LLM_FFN_PAR): down(swiglu(gate x, up x)),
 * the dense FFN and qwen2moe's shared expert; its nodes named <part>_gate, _up, _swiglu, then out_name */
static int32_t swiglu_ffn(mf_graph *g, const mf_gguf_tensor *wg, const mf_gguf_tensor *wu, const mf_gguf_tensor *wd,
                          int32_t x, int il, const char *part, const char *out_name) {
    char n[64];
    snprintf(n, sizeof n, "%s_gate", part);
    int32_t gate = named(g, mf_g_matmul(g, W(g, wg, il), x), il, n);
    snprintf(n, sizeof n, "%s_up", part);
    int32_t up = named(g, mf_g_matmul(g, W(g, wu, il), x), il, n);
    snprintf(n, sizeof n, "%s_swiglu", part);
    int32_t act = named(g, mf_g_swiglu(g, gate, up), il, n);
    return named(g, mf_g_matmul(g, W(g, wd, il), act), il, out_name);
}

/* qwen2moe's shared expert (src/models/qwen2moe.cpp): a swiglu FFN every token runs, times a per-token
 * sigmoid gate that llama.cpp computes as silu(g) / g (g = the gate input's dot with the token); the sum
 * with the routed experts' output in its order */
static int32_t shared_expert(mf_graph *g, const mf_layer_w *L, int32_t cur, int32_t moe_out, int il) {
    int32_t gi = named(g, mf_g_matmul(g, weight(g, L->ffn_gate_inp_shexp, 2, il), cur), il, "ffn_shexp_gate_inp");
    int32_t gate = named(g, mf_g_div(g, named(g, mf_g_silu(g, gi), il, "ffn_shexp_silu"), gi), il, "ffn_shexp_sigmoid");
    int32_t ffn = swiglu_ffn(g, L->ffn_gate_shexp, L->ffn_up_shexp, L->ffn_down_shexp, cur, il, "ffn_shexp", "ffn_shexp");
    int32_t out = named(g, mf_g_mul(g, ffn, gate), il, "ffn_shexp_out");
    return named(g, mf_g_add(g, moe_out, out), il, "ffn_out");
}

int mf_model_build(const mf_model *m, const mf_build_params *p, mf_graph *g, mf_graph_io *io, mf_error *err) {
    const mf_hparams *hp = &m->hp;
    const int64_t nt = p->n_tokens, no = p->n_outputs;
    if (nt <= 0 || no < 0 || no > nt)
        return mf_err(err, MF_E_INVAL, "graph for %lld tokens with %lld output rows is not valid",
                      (long long)nt, (long long)no);
    const int64_t hd = hp->head_dim;
    const float eps = hp->rms_eps;
    const mf_rope *rope = p->rope; /* the context's (rope_scaling.c); the KV shift re-ropes with it */

    int64_t ne[4] = {nt, 1, 1, 1};
    io->tokens = mf_g_name(g, mf_g_input(g, "", MF_TYPE_I32, 1, ne), "inp_tokens");
    io->pos = mf_g_name(g, mf_g_input(g, "", MF_TYPE_I32, 1, ne), "inp_pos");
    io->cells = mf_g_name(g, mf_g_input(g, "", MF_TYPE_I32, 1, ne), "inp_cells");
    int64_t nes[4] = {2, nt + 1, 1, 1};
    io->spans = mf_g_name(g, mf_g_external(g, "", MF_TYPE_I32, 2, nes, p->spans), "inp_spans");
    io->out_ids = -1;
    if (no < nt) {
        int64_t neo[4] = {no, 1, 1, 1};
        io->out_ids = mf_g_name(g, mf_g_input(g, "", MF_TYPE_I32, 1, neo), "inp_out_ids");
    }

    /* a tied, repacked output holds the embedding too: look rows up there, so the file's token_embd
     * pages (released after repacking) are never faulted back in */
    const mf_gguf_tensor *embd = hp->tied_output && m->output != m->tok_embd ? m->output : m->tok_embd;
    int32_t x = mf_g_name(g, mf_g_get_rows(g, W(g, embd, -1), io->tokens), "inp_embd");
    for (int il = 0; il < hp->n_layer; il++) {
        const mf_layer_w *L = &m->layers[il];
        int32_t inp = x;
        int32_t cur = norm(g, x, L->attn_norm, eps, il, "attn_norm");

        int32_t q = named(g, mf_g_matmul(g, W(g, L->wq, il), cur), il, "attn_q");
        int32_t k = named(g, mf_g_matmul(g, W(g, L->wk, il), cur), il, "attn_k");
        int32_t v = named(g, mf_g_matmul(g, W(g, L->wv, il), cur), il, "attn_v");
        if (hp->qkv_bias) {
            q = named(g, mf_g_add(g, q, W(g, L->bq, il)), il, "attn_q_b");
            k = named(g, mf_g_add(g, k, W(g, L->bk, il)), il, "attn_k_b");
            v = named(g, mf_g_add(g, v, W(g, L->bv, il)), il, "attn_v_b");
        }
        int64_t qs[4] = {hd, hp->n_head, nt, 1}, ks[4] = {hd, hp->n_head_kv, nt, 1};
        q = named(g, mf_g_reshape(g, q, 3, qs), il, "Qcur");
        k = named(g, mf_g_reshape(g, k, 3, ks), il, "Kcur");
        if (hp->qk_norm) {
            q = norm(g, q, L->q_norm, eps, il, "Qcur_normed");
            k = norm(g, k, L->k_norm, eps, il, "Kcur_normed");
        }
        q = named(g, mf_g_rope(g, q, io->pos, rope), il,
                  "Qcur_rope");
        k = named(g, mf_g_rope(g, k, io->pos, rope), il,
                  "Kcur_rope");
        if (p->rot_k) { /* after RoPE, before the store; Q too, so Q.K is the unrotated one */
            q = named(g, mf_g_hadamard(g, q, p->rot_k), il, "Qcur_rot");
            k = named(g, mf_g_hadamard(g, k, p->rot_k), il, "Kcur_rot");
        }
        if (p->rot_v) v = named(g, mf_g_hadamard(g, v, p->rot_v), il, "Vcur_rot");
        int64_t kv2[4] = {hp->n_embd_kv, nt, 1, 1};
        int32_t k2 = named(g, mf_g_reshape(g, k, 2, kv2), il, "Kcur_2d");

        int64_t cne[4] = {hp->n_embd_kv, p->n_cells, 1, 1};
        int32_t kc = named(g, mf_g_external(g, "", p->type_k, 2, cne, p->k_cache[il]), il, "cache_k");
        int32_t vc = named(g, mf_g_external(g, "", p->type_v, 2, cne, p->v_cache[il]), il, "cache_v");
        int32_t ks_ = named(g, mf_g_kv_store(g, kc, k2, io->cells), il, "k_store");
        int32_t vs_ = named(g, mf_g_kv_store(g, vc, v, io->cells), il, "v_store");
        int32_t att =
            named(g, mf_g_attention(g, q, ks_, vs_, io->spans, hp->n_head_kv, 1.0f / sqrtf((float)hd)), il,
                  "kqv_out");
        if (p->rot_v) att = named(g, mf_g_hadamard(g, att, p->rot_v), il, "kqv_out_rot"); /* H^2 = I: back */
        cur = named(g, mf_g_matmul(g, W(g, L->wo, il), att), il, "attn_out");
        if (il == hp->n_layer - 1 && io->out_ids >= 0) {
            cur = named(g, mf_g_get_rows(g, cur, io->out_ids), il, "attn_out_sel");
            inp = named(g, mf_g_get_rows(g, inp, io->out_ids), il, "inp_sel");
        }
        int32_t ffn_inp = named(g, mf_g_add(g, cur, inp), il, "ffn_inp");
        cur = norm(g, ffn_inp, L->ffn_norm, eps, il, "ffn_norm");
        int32_t down;
        if (hp->n_expert) {
            down = moe_ffn(g, hp, L, cur, il);
            if (L->ffn_gate_inp_shexp) down = shared_expert(g, L, cur, down, il);
        } else {
            down = swiglu_ffn(g, L->ffn_gate, L->ffn_up, L->ffn_down, cur, il, "ffn", "ffn_out");
        }
        x = named(g, mf_g_add(g, down, ffn_inp), il, "l_out");
    }
    int32_t cur = norm(g, x, m->output_norm, eps, -1, "result_norm");
    int32_t logits;
    if (!p->embeddings) {
        logits = mf_g_name(g, mf_g_matmul(g, W(g, m->output, -1), cur), "result_output");
    } else if (p->classifier) { /* llama.cpp's rank pooling head, on the rows the pooling reads */
        logits = mf_g_name(g, mf_g_matmul(g, weight(g, m->cls_out, 2, -1), cur), "result_cls"); /* 1 label: 1 row */
    } else {
        logits = cur;
    }
    mf_g_set_output(g, logits);
    io->logits = logits;
    int rc = mf_graph_error(g, err);
    if (rc) return mf_err_prefix(err, rc, "building the %s graph for %lld tokens", hp->arch_name, (long long)nt);
    return 0;
}
