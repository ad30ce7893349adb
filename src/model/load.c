/* Model loading: open the GGUF (mmap), read hparams, bind weights in place (shape/type checked), the
 * vocabulary (vocab.c), place the layers on their backends, repack the CPU's matmul weights (load_repack.c). */
#include "model/model_impl.h"

#include "backend/registry.h"
#include "model/offload.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every matmul weight (a 2-D one, token_embd too when the output is tied, whose rows also dequantize for the
 * embedding lookup; a MoE layer's 3-D expert stack) needs a kernel set, which is what makes a type runnable:
 * refuse the others here, once, naming the type, instead of at graph build.  `as` says in what role. */
static int need_kernels(const char *name, const mf_gguf_tensor *t, const char *as, mf_error *err) {
    if (mf_quant_kernels_get(t->type)) return 0;
    char ok[512];
    mf_quant_runnable_types(ok, sizeof ok);
    const mf_type_info *ti = mf_type_get(t->type);
    return mf_err(err, MF_E_UNSUPPORTED,
                  "tensor '%s' is %s (ggml type %u), which minfer does not run%s; it runs %s: requantize the model to "
                  "one of these (llama-quantize)",
                  name, ti ? ti->name : "an unknown type", t->type, as, ok);
}

static int bind(const mf_gguf *g, const char *name, bool required, int n_dims, int64_t ne0, int64_t ne1,
                const mf_gguf_tensor **out, mf_error *err) {
    *out = mf_gguf_find_tensor(g, name);
    if (!*out) {
        if (required) return mf_err(err, MF_E_FORMAT, "model lacks tensor '%s'", name);
        return 0;
    }
    const mf_gguf_tensor *t = *out;
    int64_t want1 = n_dims == 1 ? 1 : ne1;
    int64_t rest = 1;
    for (uint32_t d = 2; d < MF_GGUF_MAX_DIMS; d++) rest *= t->ne[d];
    if (t->ne[0] != ne0 || t->ne[1] != want1 || rest != 1)
        return mf_err(err, MF_E_FORMAT,
                      "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]", name,
                      (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                      (long long)ne0, (long long)want1);
    const mf_type_info *ti = mf_type_get(t->type);
    if (!ti) return mf_err(err, MF_E_UNSUPPORTED, "tensor '%s' has unknown type id %u", name, t->type);
    if (n_dims == 1 && t->type != MF_TYPE_F32)
        return mf_err(err, MF_E_UNSUPPORTED, "tensor '%s' is %s; norm weights and biases must be f32", name,
                      ti->name);
    return n_dims == 2 ? need_kernels(name, t, "", err) : 0;
}

/* An experts tensor [ne0, ne1, n_expert]: the experts' matrices, each a matmul weight (load_repack.c repacks
 * them expert by expert; MATMUL_ID runs them with matmul's kernels). */
static int bind_experts(const mf_gguf *g, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                        const mf_gguf_tensor **out, mf_error *err) {
    const mf_gguf_tensor *t = *out = mf_gguf_find_tensor(g, name);
    if (!t) return mf_err(err, MF_E_FORMAT, "model lacks tensor '%s'", name);
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2 || t->ne[3] != 1)
        return mf_err(err, MF_E_FORMAT, "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld]",
                      name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                      (long long)ne0, (long long)ne1, (long long)ne2);
    return need_kernels(name, t, " as experts", err);
}

static int bind_layer(mf_model *m, int il, mf_error *err) {
    const mf_hparams *hp = &m->hp;
    mf_layer_w *L = &m->layers[il];
    char n[96];
    int rc;
#define B(field, suffix, req, nd, a, b)                                                                      \
    do {                                                                                                     \
        snprintf(n, sizeof n, "blk.%d.%s", il, suffix);                                                      \
        if ((rc = bind(m->gguf, n, req, nd, a, b, &L->field, err))) return rc;                               \
    } while (0)
    B(attn_norm, "attn_norm.weight", true, 1, hp->n_embd, 1);
    B(wq, "attn_q.weight", true, 2, hp->n_embd, hp->n_embd_q);
    B(wk, "attn_k.weight", true, 2, hp->n_embd, hp->n_embd_kv);
    B(wv, "attn_v.weight", true, 2, hp->n_embd, hp->n_embd_kv);
    B(bq, "attn_q.bias", false, 1, hp->n_embd_q, 1);
    B(bk, "attn_k.bias", false, 1, hp->n_embd_kv, 1);
    B(bv, "attn_v.bias", false, 1, hp->n_embd_kv, 1);
    B(q_norm, "attn_q_norm.weight", hp->qk_norm, 1, hp->head_dim, 1);
    B(k_norm, "attn_k_norm.weight", hp->qk_norm, 1, hp->head_dim, 1);
    B(wo, "attn_output.weight", true, 2, hp->n_embd_q, hp->n_embd);
    B(ffn_norm, "ffn_norm.weight", true, 1, hp->n_embd, 1);
    if (hp->n_expert) {
        B(ffn_gate_inp, "ffn_gate_inp.weight", true, 2, hp->n_embd, hp->n_expert);
#define X(field, suffix, a, b)                                                                               \
    do {                                                                                                     \
        snprintf(n, sizeof n, "blk.%d.%s", il, suffix);                                                      \
        if ((rc = bind_experts(m->gguf, n, a, b, hp->n_expert, &L->field, err))) return rc;                   \
    } while (0)
        X(ffn_gate_exps, "ffn_gate_exps.weight", hp->n_embd, hp->n_ff_exp);
        X(ffn_up_exps, "ffn_up_exps.weight", hp->n_embd, hp->n_ff_exp);
        X(ffn_down_exps, "ffn_down_exps.weight", hp->n_ff_exp, hp->n_embd);
#undef X
        if (hp->n_ff_shexp) { /* qwen2moe's shared expert; its gate input is a matmul weight of one row, [n_embd]
                               * or [n_embd, 1] (llama.cpp's converter writes either, f32) */
            B(ffn_gate_inp_shexp, "ffn_gate_inp_shexp.weight", true, 2, hp->n_embd, 1);
            B(ffn_gate_shexp, "ffn_gate_shexp.weight", true, 2, hp->n_embd, hp->n_ff_shexp);
            B(ffn_up_shexp, "ffn_up_shexp.weight", true, 2, hp->n_embd, hp->n_ff_shexp);
            B(ffn_down_shexp, "ffn_down_shexp.weight", true, 2, hp->n_ff_shexp, hp->n_embd);
        }
    } else {
        B(ffn_gate, "ffn_gate.weight", true, 2, hp->n_embd, hp->n_ff);
        B(ffn_up, "ffn_up.weight", true, 2, hp->n_embd, hp->n_ff);
        B(ffn_down, "ffn_down.weight", true, 2, hp->n_ff, hp->n_embd);
    }
#undef B
    if (hp->qk_norm && (!L->q_norm || !L->k_norm))
        return mf_err(err, MF_E_FORMAT, "layer %d lacks attn_q_norm/attn_k_norm (required for %s)", il,
                      hp->arch_name);
    return 0;
}

/* The layer table is sized by block_count, a number the file claims: hold it to the tensors the file has
 * (9 required per layer) before anything is sized by it, as the GGUF reader does with its counts.  Found by
 * fuzz_gguf (block_count 50000000 asked for 5.6 GB). */
static int check_block_count(const mf_model *m, mf_error *err) {
    const mf_hparams *hp = &m->hp;
    if ((int64_t)hp->n_layer * 9 <= mf_gguf_n_tensors(m->gguf)) return 0;
    return mf_err(err, MF_E_FORMAT,
                  "%s.block_count is %d, which needs at least %lld tensors (9 per layer), but the file has %lld",
                  hp->arch_name, hp->n_layer, (long long)hp->n_layer * 9, (long long)mf_gguf_n_tensors(m->gguf));
}

static char *str_copy(mf_str s) {
    char *c = malloc(s.len + 1);
    if (c) memcpy(c, s.ptr, s.len), c[s.len] = 0;
    return c;
}

/* A reranker's head: cls.output.weight [n_embd, n_labels], as llama.cpp's qwen3 loader binds it (its converter
 * writes the lm_head rows of "yes" and "no" there).  A bias is bound only to be refused by rank pooling
 * (llama.cpp's qwen3 never reads one).  Labels without the head are a file llama.cpp loads too: it just cannot
 * rank. */
static int bind_classifier(mf_model *m, mf_error *err) {
    mf_hparams *hp = &m->hp;
    char key[96];
    snprintf(key, sizeof key, "%s.classifier.output_labels", hp->arch_name);
    int rc;
    if (mf_gguf_find_key(m->gguf, key) >= 0) {
        uint64_t n = 0;
        mf_str *v = NULL;
        if ((rc = mf_gguf_get_str_array(m->gguf, key, &v, &n, err))) return rc;
        if (n == 0 || n > 4096) {
            free(v);
            return mf_err(err, MF_E_FORMAT, "%s has %llu labels; a classifier has 1 to 4096", key,
                          (unsigned long long)n);
        }
        m->cls_labels = calloc((size_t)n, sizeof *m->cls_labels);
        for (uint64_t i = 0; m->cls_labels && i < n; i++, m->n_cls_labels++)
            if (!(m->cls_labels[i] = str_copy(v[i]))) break;
        free(v);
        if ((uint64_t)m->n_cls_labels != n) return mf_err(err, MF_E_NOMEM, "out of memory for %s", key);
    }
    const int32_t n_cls = m->n_cls_labels ? m->n_cls_labels : 1;
    if ((rc = bind(m->gguf, "cls.output.weight", false, 2, hp->n_embd, n_cls, &m->cls_out, err)) ||
        (rc = bind(m->gguf, "cls.output.bias", false, 1, n_cls, 1, &m->cls_out_b, err)))
        return rc;
    if (m->cls_out_b && !m->cls_out)
        return mf_err(err, MF_E_FORMAT, "the file has cls.output.bias but no cls.output.weight");
    hp->n_cls_out = m->cls_out ? n_cls : 0;
    return 0;
}

/* Every weight, bound in place with its shape and type checked; progress per layer. */
static int bind_weights(mf_model *m, const mf_model_open_params *p, mf_error *err) {
    mf_hparams *hp = &m->hp;
    int rc;
    if ((rc = bind(m->gguf, "token_embd.weight", true, 2, hp->n_embd, hp->n_vocab, &m->tok_embd, err)) ||
        (rc = bind(m->gguf, "output_norm.weight", true, 1, hp->n_embd, 1, &m->output_norm, err)) ||
        (rc = bind(m->gguf, "output.weight", false, 2, hp->n_embd, hp->n_vocab, &m->output, err)))
        return rc;
    if (!m->output) {
        m->output = m->tok_embd; /* tied embeddings */
        hp->tied_output = true;
    }
    if ((rc = bind_classifier(m, err))) return rc;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return mf_err(err, MF_E_NOMEM, "out of memory for %d layers", hp->n_layer);
    for (int il = 0; il < hp->n_layer; il++) {
        if ((rc = bind_layer(m, il, err))) return rc;
        if (p->progress) p->progress((float)(il + 1) / (float)(hp->n_layer + 1), p->progress_user);
    }
    hp->qkv_bias = m->layers[0].bq != NULL;
    for (int il = 0; il < hp->n_layer; il++) {
        const mf_layer_w *L = &m->layers[il];
        if ((L->bq != NULL) != hp->qkv_bias || (L->bk != NULL) != hp->qkv_bias || (L->bv != NULL) != hp->qkv_bias)
            return mf_err(err, MF_E_FORMAT, "layer %d: attn_q/k/v biases must be all present or all absent", il);
    }
    return 0;
}

static int place_layers(mf_model *m, const mf_model_open_params *p, mf_error *err);

int mf_model_open(const char *path, const mf_model_open_params *p, mf_model **out, mf_error *err) {
    *out = NULL;
    const mf_model_open_params none = {0};
    if (!p) p = &none;
    mf_model *m = calloc(1, sizeof *m);
    if (!m) return mf_err(err, MF_E_NOMEM, "out of memory loading model '%s'", path);
    snprintf(m->path, sizeof m->path, "%s", path);
    int rc = mf_gguf_open(path, &m->gguf, err);
    if (rc) goto fail;
    if (p->progress) p->progress(0.0f, p->progress_user);
    if ((rc = mf_hparams_read(m->gguf, &m->hp, err)) ||                 /* <arch>.* keys */
        (rc = check_block_count(m, err)) ||
        (rc = mf_model_vocab_size(m->gguf, &m->hp.n_vocab, err)) ||     /* vocab.c */
        (rc = bind_weights(m, p, err)) ||                               /* progress per layer */
        (rc = mf_model_load_vocab(m, err)) ||                           /* tokenizer, eog list */
        (rc = place_layers(m, p, err)) ||                               /* weights onto their backends */
        (p->repack && (rc = mf_model_repack(m, p->n_threads, err)))) /* load_repack.c */
        goto fail;
    if (p->progress) p->progress(1.0f, p->progress_user);
    *out = m;
    return 0;
fail:
    /* the GGUF reader already names the file ("'PATH': ..."): say it once */
    if (err) {
        char named[sizeof m->path + 8];
        snprintf(named, sizeof named, "'%s': ", path);
        const size_t k = strlen(named);
        if (!strncmp(err->msg, named, k)) memmove(err->msg, err->msg + k, strlen(err->msg + k) + 1);
    }
    mf_err_prefix(err, rc, "cannot load model '%s'", path);
    mf_model_close(m);
    return rc;
}

/* One tensor onto backend b: a copy of its descriptor whose data is b's address, in the layout b asks for
 * (converted on the host first), uploaded through b's hooks.  *slot is re-pointed at the copy. */
static int place_tensor(mf_model *m, mf_backend b, const mf_gguf_tensor **slot, const char *owner, mf_error *err) {
    const mf_gguf_tensor *t = *slot;
    mf_gguf_tensor *c = &m->placed[m->n_placed];
    *c = *t;
    c->data = NULL;
    const bool mat = t->ne[1] > 1;
    const uint32_t to = mat ? mf_backend_weight_layout(b, t->type, t->ne[0], t->ne[1]) : t->type;
    void *addr = NULL, *tmp = NULL;
    int rc = mf_backend_alloc(b, (size_t)t->nbytes, &addr, err);
    if (rc) return mf_err_prefix(err, rc, "%s's '%.*s' on %s", owner, (int)t->name.len, t->name.ptr, mf_backend_name(b));
    c->data = addr;
    m->placed_on[m->n_placed++] = b.id; /* freed with the model from here on */
    const void *src = t->data;
    if (to != t->type) { /* the backend's own layout, made on the host first */
        tmp = mf_aligned_alloc(64, (size_t)t->nbytes);
        if (!tmp) return mf_err(err, MF_E_NOMEM, "out of memory converting '%.*s'", (int)t->name.len, t->name.ptr);
        if (mf_repack_as(to, t->type, t->data, tmp, t->ne[0], t->ne[1])) {
            mf_aligned_free(tmp);
            return mf_err(err, MF_E_INTERNAL, "converting '%.*s' for %s failed", (int)t->name.len, t->name.ptr,
                          mf_backend_name(b));
        }
        c->type = to;
        src = tmp;
    }
    rc = mf_backend_write(b, addr, src, (size_t)t->nbytes, err);
    mf_aligned_free(tmp);
    if (rc) return mf_err_prefix(err, rc, "uploading %s's '%.*s'", owner, (int)t->name.len, t->name.ptr);
    m->placed_bytes += (size_t)t->nbytes;
    *slot = c;
    return 0;
}

enum { PER_LAYER = 22 };

static const mf_gguf_tensor **layer_slot(mf_layer_w *L, int i) {
    const mf_gguf_tensor **f[PER_LAYER] = {&L->attn_norm,    &L->wq,           &L->wk,          &L->wv,
                                           &L->bq,           &L->bk,           &L->bv,          &L->q_norm,
                                           &L->k_norm,       &L->wo,           &L->ffn_norm,    &L->ffn_gate,
                                           &L->ffn_up,       &L->ffn_down,     &L->ffn_gate_inp, &L->ffn_gate_exps,
                                           &L->ffn_up_exps,  &L->ffn_down_exps, &L->ffn_gate_inp_shexp,
                                           &L->ffn_gate_shexp, &L->ffn_up_shexp, &L->ffn_down_shexp};
    return f[i];
}

/* NULL when device b runs a MoE layer's expert ops (or the model has none), else why not, in buf */
static const char *moe_unsupported(const mf_model *m, mf_backend b, char *buf, size_t cap) {
    const mf_backend_entry *e = mf_backend_entry_get(b);
    if (!m->hp.n_expert || !e) return NULL;
    const char *op = !e->supports(MF_OP_TOPK, MF_TYPE_I32) ? "topk" : !e->supports(MF_OP_MOE_SUM, MF_TYPE_F32) ? "moe_sum" : NULL;
    const char *of = ""; /* matmul_id: the experts' type it refused */
    for (int32_t il = 0; !op && il < m->hp.n_layer; il++) {
        const mf_layer_w *L = &m->layers[il];
        const mf_gguf_tensor *s[3] = {L->ffn_gate_exps, L->ffn_up_exps, L->ffn_down_exps};
        for (int i = 0; !op && i < 3; i++)
            if (!e->supports(MF_OP_MATMUL_ID, s[i]->type)) op = "matmul_id of ", of = mf_type_name(s[i]->type);
    }
    if (!op) return NULL;
    snprintf(buf, cap, "this is a MoE model, and %s does not run its expert op %s%s", mf_backend_name(b), op, of);
    return buf;
}

/* The offload plan (model/offload.h) from the file's tensor sizes and the device's memory: per layer and
 * for the embeddings/output, the backend.  *layer is malloc'd. */
static int plan_offload(mf_model *m, const mf_model_open_params *p, uint16_t **layer, uint16_t *io, mf_error *err) {
    const int32_t nl = m->hp.n_layer;
    uint64_t *bytes = calloc((size_t)nl + 1, sizeof *bytes);
    *layer = calloc((size_t)nl + 1, sizeof **layer);
    if (!bytes || !*layer) {
        free(bytes);
        return mf_err(err, MF_E_NOMEM, "out of memory planning the offload of %d layers", nl);
    }
    for (int32_t il = 0; il < nl; il++)
        for (int i = 0; i < PER_LAYER; i++) {
            const mf_gguf_tensor *t = *layer_slot(&m->layers[il], i);
            if (t) bytes[il] += t->nbytes;
        }
    const mf_backend dev = {p->gpu_backend};
    const char *unavailable = mf_backend_unavailable(dev);
    char fenced[96], moe[160];
    /* a block placed there must run there: a MoE layer's expert ops too (asked of the device's own support
     * function); if not, auto plans no block and its report says why, and a count is refused with the reason */
    if (!unavailable) unavailable = moe_unsupported(m, dev, moe, sizeof moe);
    if (!unavailable && !mf_backend_allowed(dev)) {
        snprintf(fenced, sizeof fenced, "--backend / MINFER_BACKENDS does not allow %s", mf_backend_name(dev));
        unavailable = fenced;
    }
    mf_offload_in in = {
        .request = p->gpu_layers,
        .origin = p->gpu_origin,
        .device = mf_backend_name(dev),
        .unavailable = unavailable,
        .n_layer = nl,
        .block_bytes = bytes,
        .io_bytes = m->tok_embd->nbytes + m->output_norm->nbytes + (m->hp.tied_output ? 0 : m->output->nbytes) +
                    (m->cls_out ? m->cls_out->nbytes : 0) + (m->cls_out_b ? m->cls_out_b->nbytes : 0),
        .mem_override_mib = p->gpu_mem_mib,
    };
    in.mem.outcome = MF_MEM_UNKNOWN;
    if (!unavailable && p->gpu_layers != 0) mf_backend_mem_info(dev, &in.mem);
    mf_offload_plan plan;
    int rc = mf_offload_make_plan(&in, &plan, err);
    free(bytes);
    if (rc) return rc;
    for (int32_t il = 0; il < nl; il++) (*layer)[il] = il < plan.n_gpu ? dev.id : MF_BACKEND_ID_CPU;
    *io = plan.io_gpu ? dev.id : MF_BACKEND_ID_CPU;
    m->n_gpu_layers = plan.n_gpu;
    snprintf(m->offload_report, sizeof m->offload_report, "%s", plan.report);
    return 0;
}

/* Placement: every layer's backend and the embeddings/output's; tensors not on the CPU are uploaded through
 * their backend's buffer hooks (in the layout the backend asks for) and their descriptors re-pointed. */
static int place_layers(mf_model *m, const mf_model_open_params *p, mf_error *err) {
    const int32_t nl = m->hp.n_layer;
    m->layer_backend = calloc((size_t)nl, sizeof *m->layer_backend); /* 0: the CPU */
    if (!m->layer_backend) return mf_err(err, MF_E_NOMEM, "out of memory for the placement of %d layers", nl);
    uint16_t *planned = NULL;
    const uint16_t *want = p->layer_backend;
    uint16_t io = p->io_backend;
    if (p->gpu_layers != 0 || p->gpu_origin) { /* an explicit 0 is a plan too: its report says cpu only */
        int rc = plan_offload(m, p, &planned, &io, err);
        if (rc) {
            free(planned);
            return rc;
        }
        want = planned;
    } else if (want && p->n_layer_backend != nl) {
        return mf_err(err, MF_E_INVAL, "the placement plan names %d layers, the model has %d", p->n_layer_backend, nl);
    }
    int rc = 0, n_off = 0;
    for (int32_t il = -1; il < nl && !rc; il++) {
        mf_backend b = {il < 0 ? io : want ? want[il] : (uint16_t)MF_BACKEND_ID_CPU};
        const mf_backend_entry *e = mf_backend_entry_get(b);
        if (!e || !e->buf_alloc) {
            char what[48];
            if (il < 0) snprintf(what, sizeof what, "the embeddings/output are");
            else snprintf(what, sizeof what, "layer %d is", il);
            rc = mf_err(err, MF_E_BACKEND, "%s placed on backend %s (id %d), which %s; place it on cpu", what,
                        mf_backend_name(b), (int)b.id, e ? "has no memory hooks" : "is not in this build");
            break;
        }
        if (il < 0) m->io_backend = b.id;
        else m->layer_backend[il] = b.id;
        n_off += b.id != MF_BACKEND_ID_CPU;
    }
    free(planned);
    if (rc || !n_off) return rc;
    m->placed = calloc((size_t)n_off * PER_LAYER, sizeof *m->placed);
    m->placed_on = calloc((size_t)n_off * PER_LAYER, sizeof *m->placed_on);
    if (!m->placed || !m->placed_on) return mf_err(err, MF_E_NOMEM, "out of memory placing %d layers", n_off);
    char owner[48];
    for (int32_t il = 0; il < nl; il++) {
        mf_backend b = {m->layer_backend[il]};
        if (b.id == MF_BACKEND_ID_CPU) continue;
        snprintf(owner, sizeof owner, "layer %d", il);
        for (int i = 0; i < PER_LAYER; i++) {
            const mf_gguf_tensor **slot = layer_slot(&m->layers[il], i);
            if (*slot && (rc = place_tensor(m, b, slot, owner, err))) return rc;
        }
    }
    if (m->io_backend != MF_BACKEND_ID_CPU) {
        /* a tied LM head is the embedding matrix: uploaded once, both pointing at the copy */
        const mf_backend b = {m->io_backend};
        if ((rc = place_tensor(m, b, &m->tok_embd, "the embeddings", err)) ||
            (rc = place_tensor(m, b, &m->output_norm, "the output norm", err)))
            return rc;
        if (m->hp.tied_output) m->output = m->tok_embd;
        else if ((rc = place_tensor(m, b, &m->output, "the LM head", err))) return rc;
        if ((m->cls_out && (rc = place_tensor(m, b, &m->cls_out, "the classifier head", err))) ||
            (m->cls_out_b && (rc = place_tensor(m, b, &m->cls_out_b, "the classifier head", err))))
            return rc;
    }
    m->gpu_bytes = m->placed_bytes;
    mf_log(MF_LOG_INFO, "placed %d of %d layers%s off the CPU (%d tensors, %.1f MiB through their backends' hooks)",
           n_off - (m->io_backend != MF_BACKEND_ID_CPU), nl,
           m->io_backend != MF_BACKEND_ID_CPU ? " and the embeddings/output" : "", m->n_placed,
           (double)m->placed_bytes / (1024.0 * 1024.0));
    return 0;
}

void mf_model_close(mf_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_placed; i++) mf_backend_free((mf_backend){m->placed_on[i]}, (void *)m->placed[i].data);
    free(m->placed_on);
    free(m->placed);
    free(m->layer_backend);
    mf_tok_free(m->tok);
    free(m->copies);
    mf_aligned_free(m->repack_buf);
    free(m->layers);
    for (int32_t i = 0; i < m->n_cls_labels; i++) free(m->cls_labels[i]);
    free(m->cls_labels);
    mf_gguf_close(m->gguf);
    free(m);
}
