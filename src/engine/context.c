/* Public API: model load/info and the context (KV store, graph cache, CPU backend). */
#include "engine/engine_impl.h"

#include "backend/registry.h"
#include "core/env.h"
#include "core/hadamard.h"
#include "quant/quant.h"

_Static_assert((int)MF_KV_TYPE_F32 == (int)MF_TYPE_F32 && (int)MF_KV_TYPE_F16 == (int)MF_TYPE_F16 &&
                   (int)MF_KV_TYPE_Q8_0 == (int)MF_TYPE_Q8_0,
               "public KV type ids are ggml's");

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------- model ---------------- */
mf_model_params mf_model_default_params(void) {
    mf_model_params p = {0};
    return p;
}

/* 0 threads (model or context params): every online CPU, at most 16 */
static int32_t default_threads(void) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return (int32_t)MF_MAX(1, MF_MIN(n, 16));
}

/* An offload request this build or machine cannot honour is refused before the file is touched (the plan
 * itself, after the tensor table is read, refuses the rest: a count that does not fit, auto without a
 * budget).  auto with no usable device is not refused: it fits nothing, and the report says why. */
static int gpu_request_check(const mf_model_params *p, mf_error *err) {
    const int32_t n = p->n_gpu_layers;
    char origin[96];
    if (p->gpu_layers_origin) snprintf(origin, sizeof origin, "%s", p->gpu_layers_origin);
    else snprintf(origin, sizeof origin, "n_gpu_layers %d", n);
    if (n < MF_GPU_LAYERS_AUTO)
        return mf_err(err, MF_E_INVAL, "%s is not a block count: give 0 or more blocks, all (%d) or auto (%d)", origin,
                      MF_GPU_LAYERS_ALL, MF_GPU_LAYERS_AUTO);
    if (n == 0 || n == MF_GPU_LAYERS_AUTO) return 0;
    const char *why = mf_backend_unavailable(MF_BACKEND_CUDA);
    if (why)
        return mf_err(err, MF_E_UNSUPPORTED, "%s asks for blocks on cuda, which is not usable here: %s; use --gpu-layers 0",
                      origin, why);
    if (!mf_backend_allowed(MF_BACKEND_CUDA))
        return mf_err(err, MF_E_UNSUPPORTED, "%s asks for blocks on cuda, which --backend / MINFER_BACKENDS does not "
                      "allow; allow cuda or use --gpu-layers 0", origin);
    return 0;
}

/* Loading is the model module's (src/model); the engine only turns the public params into its own. */
int mf_model_load(const char *path, const mf_model_params *params, mf_model **out, mf_error *err) {
    *out = NULL;
    if (!path || !*path) return mf_err(err, MF_E_INVAL, "no model path given (-m FILE.gguf)");
    mf_model_params p = params ? *params : mf_model_default_params();
    /* Every MINFER_* variable is checked before the file is touched: a bad one refuses the load (an embedder
     * has no startup check of its own), and MINFER_ISA picks the repacked layouts. */
    bool repack = true;
    uint64_t gpu_mem = 0;
    int rc = mf_env_check(err);
    if (!rc) rc = mf_quant_isa_check(err);
    if (!rc) rc = mf_env_bool("MINFER_REPACK", &repack, err);
    if (!rc) rc = mf_env_uint("MINFER_GPU_MEM", &gpu_mem, err);
    if (!rc) rc = gpu_request_check(&p, err);
    if (!rc && p.n_threads < 0)
        rc = mf_err(err, MF_E_INVAL, "model params: n_threads must be >= 0 (0 = all online CPUs), got %d", p.n_threads);
    if (rc) return rc;
    const mf_model_open_params op = {
        .progress = p.progress,
        .progress_user = p.progress_user,
        .repack = !p.no_repack && repack,
        .n_threads = p.n_threads ? p.n_threads : default_threads(),
        .gpu_layers = p.n_gpu_layers,
        .gpu_backend = MF_BACKEND_ID_CUDA,
        .gpu_origin = p.gpu_layers_origin,
        .gpu_mem_mib = gpu_mem,
    };
    return mf_model_open(path, &op, out, err);
}

void mf_model_free(mf_model *model) {
    mf_model_close(model);
}

void mf_model_get_info(const mf_model *m, mf_model_info *info) {
    memset(info, 0, sizeof *info);
    const mf_hparams *hp = &m->hp;
    info->arch = hp->arch_name;
    info->n_vocab = hp->n_vocab;
    info->n_ctx_train = hp->n_ctx_train;
    info->n_embd = hp->n_embd;
    info->n_layer = hp->n_layer;
    info->n_head = hp->n_head;
    info->n_head_kv = hp->n_head_kv;
    info->head_dim = hp->head_dim;
    info->n_ff = hp->n_ff;
    info->n_expert = hp->n_expert;
    info->n_expert_used = hp->n_expert_used;
    info->n_ff_exp = hp->n_ff_exp;
    info->n_ff_shexp = hp->n_ff_shexp;
    info->rope_freq_base = hp->rope_freq_base;
    info->rms_eps = hp->rms_eps;
    info->tied_output = hp->tied_output;
    info->qkv_bias = hp->qkv_bias;
    info->qk_norm = hp->qk_norm;
    info->pooling = hp->pooling;
    info->n_cls_out = hp->n_cls_out;
    info->bos = m->bos;
    info->eos = m->eos;
    info->fim_pre = m->fim[MF_FIM_PRE];
    info->fim_suf = m->fim[MF_FIM_SUF];
    info->fim_mid = m->fim[MF_FIM_MID];
    info->fim_rep = m->fim[MF_FIM_REP];
    info->fim_sep = m->fim[MF_FIM_SEP];
    info->n_eog = m->n_eog;
    info->eog = m->eog;
    info->n_repacked = m->n_repacked;
    info->repacked_bytes = m->repack_bytes;
    info->n_gpu_layers = m->n_gpu_layers;
    info->gpu_io = m->io_backend == MF_BACKEND_ID_CUDA;
    info->gpu_bytes = m->n_gpu_layers || info->gpu_io ? m->gpu_bytes : 0;
    info->offload_report = m->offload_report;
    info->rope_scaling = hp->rope_scaling;
    info->rope_scale = hp->rope_freq_scale > 0.0f ? 1.0f / hp->rope_freq_scale : 1.0f;
    info->n_ctx_orig = hp->n_ctx_orig_yarn;
}

const char *mf_model_cls_label(const mf_model *m, int32_t i) {
    return i >= 0 && i < m->n_cls_labels ? m->cls_labels[i] : NULL;
}

bool mf_model_is_eog(const mf_model *model, mf_token token) {
    return mf_model_token_is_eog(model, token);
}

/* ---------------- context ---------------- */
mf_context_params mf_context_default_params(void) {
    mf_context_params p = {0};
    /* llama.cpp's default: half the memory and bandwidth of f32 (docs/API.md) */
    p.type_k = MF_TYPE_F16;
    p.type_v = MF_TYPE_F16;
    /* llama.cpp's "not set": YaRN's defaults (rope_scaling.c) */
    p.rope.yarn_ext_factor = -1.0f;
    p.rope.yarn_beta_fast = -1.0f;
    p.rope.yarn_beta_slow = -1.0f;
    return p;
}

/* The KV footprint at info level (the CLI's load line says it too): bytes, and their share of what f32 cells
 * would take (f16 50 %, q8_0 34/128 = 26.6 %). */
static void kv_log_footprint(const mf_kv *kv, const mf_hparams *hp, int32_t n_cells) {
    const double f32 = 4.0 * (double)hp->n_layer * n_cells * (double)(2 * hp->n_embd_kv);
    mf_log(MF_LOG_INFO, "KV cache: %d cells x %d layers, K %s, V %s: %zu bytes (%.2f MiB, %.1f %% of f32's %.0f)",
           n_cells, hp->n_layer, mf_type_name(mf_kv_type_k(kv)), mf_type_name(mf_kv_type_v(kv)), mf_kv_bytes(kv),
           (double)mf_kv_bytes(kv) / (1 << 20), 100.0 * (double)mf_kv_bytes(kv) / f32, f32);
}

/* The KV store's memory hooks: a layer's rows live on the backend the model placed the layer on. */
static mf_backend kv_backend(void *user, int32_t layer) {
    return (mf_backend){((const mf_model *)user)->layer_backend[layer]};
}
static bool kv_is_host(void *user, int32_t layer) { return mf_backend_is_host(kv_backend(user, layer)); }
static int kv_alloc(void *user, int32_t layer, size_t bytes, void **addr, mf_error *err) {
    return mf_backend_alloc(kv_backend(user, layer), bytes, addr, err);
}
static void kv_free(void *user, int32_t layer, void *addr) { mf_backend_free(kv_backend(user, layer), addr); }
static int kv_read(void *user, int32_t layer, const void *addr, void *dst, size_t n, mf_error *err) {
    return mf_backend_read(kv_backend(user, layer), addr, dst, n, err);
}
static int kv_write(void *user, int32_t layer, void *addr, const void *src, size_t n, mf_error *err) {
    return mf_backend_write(kv_backend(user, layer), addr, src, n, err);
}

int mf_context_new(mf_model *model, const mf_context_params *params, mf_context **out, mf_error *err) {
    return mf_context_new_on(model, params, NULL, out, err);
}

/* A sequence may grow to the whole context; past the length the model was trained for (llama.cpp's
 * "possible training context overflow"), its output degrades without an error, so say so once, with the way
 * out.  Under rope scaling the model is made for the original context times the factor. */
static void warn_past_training(const mf_hparams *hp, const mf_rope_info *ri, int32_t n_ctx) {
    int64_t trained = hp->n_ctx_train;
    /* llama.cpp's default type is linear, at factor 1: scaling only where the factor stretches */
    const bool scaled = ri->scaling != MF_ROPE_SCALING_NONE && ri->freq_scale > 0.0f && ri->freq_scale < 1.0f;
    if (scaled) trained = MF_MAX(trained, (int64_t)((double)ri->n_ctx_orig / (double)ri->freq_scale + 0.5));
    if (trained <= 0 || n_ctx <= trained) return;
    const char *way_out = scaled ? "" : ", or rope scaling for a model made for it (Qwen2.5: --rope-scaling yarn "
                                        "--rope-scale 4 --yarn-orig-ctx 32768)";
    mf_log(MF_LOG_WARN,
           "the context holds %d tokens, more than the %lld the model was trained for%s: a sequence that grows past "
           "%lld tokens is beyond its training and its output degrades; use -c %lld or less%s",
           n_ctx, (long long)trained, scaled ? " (with its rope scaling)" : "", (long long)trained, (long long)trained,
           way_out);
}

int mf_context_new_on(mf_model *model, const mf_context_params *params, mf_context *share, mf_context **out,
                      mf_error *err) {
    *out = NULL;
    mf_context_params p = params ? *params : mf_context_default_params();
    const mf_hparams *hp = &model->hp;
    if (p.n_ctx < 0 || p.n_threads < 0 || p.n_ubatch < 0)
        return mf_err(err, MF_E_INVAL, "context sizes must be >= 0: n_ctx %d, n_threads %d, n_ubatch %d",
                      p.n_ctx, p.n_threads, p.n_ubatch);
    if (p.n_ctx == 0) p.n_ctx = MF_MIN(hp->n_ctx_train, 4096);
    if (p.n_ctx <= 0) p.n_ctx = 4096;
    if (p.n_threads == 0) p.n_threads = default_threads();
    if (share) p.n_threads = share->n_threads; /* one pool: the two never run at the same time */
    if (p.n_ubatch == 0) p.n_ubatch = 512;
    if (p.classifier && (!p.embeddings || !model->cls_out)) {
        return mf_err(err, MF_E_INVAL, "a classifier context %s",
                      !p.embeddings ? "is an embeddings context: set embeddings = true too"
                                    : "needs the model's classifier head (cls.output.weight), and this file has "
                                      "none: it is not a reranker");
    }
    mf_rope rope;
    mf_rope_info rope_info;
    int rc = mf_model_rope(model, &p.rope, &rope, &rope_info, err);
    if (rc) return rc;
    /* here, not in mf_model_rope: a session file resolves the model's own rope too, and must not log it */
    const char *scaling = rope_info.scaling == MF_ROPE_SCALING_NONE ? "none"
                          : rope_info.scaling == MF_ROPE_SCALING_LINEAR ? "linear" : "yarn";
    mf_log(MF_LOG_INFO, "rope: %s, freq_base %g, freq_scale %g%s", scaling, (double)rope_info.freq_base,
           (double)rope_info.freq_scale, rope_info.ext_factor != 0.0f ? "" : " (no YaRN)");
    if (rope_info.ext_factor != 0.0f)
        mf_log(MF_LOG_INFO, "rope: YaRN original context %d, ext_factor %g, beta %g/%g, attn_factor %.9g, ramp over pairs %g..%g",
               rope_info.n_ctx_orig, (double)rope_info.ext_factor, (double)rope_info.beta_fast, (double)rope_info.beta_slow, (double)rope_info.attn_factor,
               (double)rope_info.corr_dims[0], (double)rope_info.corr_dims[1]);
    warn_past_training(hp, &rope_info, p.n_ctx);
    mf_context *c = calloc(1, sizeof *c);
    if (!c) return mf_err(err, MF_E_NOMEM, "out of memory");
    c->model = model;
    c->rope = rope;
    c->rope_info = rope_info;
    c->n_ctx = p.n_ctx;
    c->n_ubatch = p.n_ubatch;
    c->n_threads = p.n_threads;
    c->type_k = p.type_k;
    c->type_v = p.type_v;
    c->embeddings = p.embeddings;
    c->classifier = p.classifier;
    c->out_width = p.classifier ? hp->n_cls_out : p.embeddings ? hp->n_embd : hp->n_vocab;
    /* attention reads one head's slice of a row: a block-quantized row must not split a head */
    for (int i = 0; i < 2; i++) {
        const uint32_t t = i ? p.type_v : p.type_k;
        if (mf_kv_type_ok(t) && hp->head_dim % (int64_t)mf_type_get(t)->blck_size) {
            rc = mf_err(err, MF_E_UNSUPPORTED,
                        "a %s %s cache needs a head size that is a multiple of %lld, this model's is %lld (use f16)",
                        mf_type_name(t), i ? "V" : "K", (long long)mf_type_get(t)->blck_size, (long long)hp->head_dim);
            goto fail;
        }
    }
    /* llama.cpp's rule (llama_kv_cache: attn_rot_k / attn_rot_v): a quantized type, a head size that is a
     * multiple of 64, not disabled */
    bool rot_off = p.no_attn_rot;
    if ((rc = mf_env_bool("MINFER_ATTN_ROT_DISABLE", &rot_off, err))) goto fail;
    rot_off = rot_off || p.no_attn_rot;
    c->rot_k = !rot_off && mf_type_get(p.type_k) && mf_type_get(p.type_k)->blck_size > 1 ? mf_hadamard_k_size(hp->head_dim) : 0;
    c->rot_v = !rot_off && mf_type_get(p.type_v) && mf_type_get(p.type_v)->blck_size > 1 ? mf_hadamard_v_size(hp->head_dim) : 0;
    /* each layer's rows on the backend that runs the layer; all on the CPU: one host block, as always */
    bool off_cpu = false;
    for (int32_t l = 0; l < hp->n_layer; l++) off_cpu |= model->layer_backend[l] != MF_BACKEND_ID_CPU;
    if (off_cpu) {
        const mf_kv_mem mem = {.user = model,
                               .is_host = kv_is_host,
                               .alloc = kv_alloc,
                               .free = kv_free,
                               .read = kv_read,
                               .write = kv_write};
        rc = mf_kv_new_placed(hp->n_layer, hp->n_embd_kv, hp->n_embd_kv, p.n_ctx, p.type_k, p.type_v, &mem, &c->kv,
                              err);
    } else {
        rc = mf_kv_new(hp->n_layer, hp->n_embd_kv, hp->n_embd_kv, p.n_ctx, p.type_k, p.type_v, &c->kv, err);
    }
    if (rc) goto fail;
    kv_log_footprint(c->kv, hp, p.n_ctx);
    if (c->rot_k || c->rot_v)
        mf_log(MF_LOG_INFO, "attention rotation (llama.cpp's, for quantized caches): K %d, V %d (0 = off; "
               "MINFER_ATTN_ROT_DISABLE=1 turns it off)", c->rot_k, c->rot_v);
    c->k_ptr = calloc((size_t)hp->n_layer, sizeof(void *));
    c->v_ptr = calloc((size_t)hp->n_layer, sizeof(void *));
    c->cache = mf_graph_cache_new(MF_GRAPH_CACHE_CAP);
    if (!c->k_ptr || !c->v_ptr || !c->cache) {
        rc = mf_err(err, MF_E_NOMEM, "out of memory");
        goto fail;
    }
    for (int32_t l = 0; l < hp->n_layer; l++) {
        c->k_ptr[l] = mf_kv_k(c->kv, l);
        c->v_ptr[l] = mf_kv_v(c->kv, l);
    }
    if (share) c->cpu = share->cpu, c->cpu_borrowed = true;
    else if ((rc = mf_cpu_new(p.n_threads, &c->cpu, err))) goto fail;
    mf_backend_opts bo = {.n_threads = p.n_threads};
    if ((rc = mf_sched_new(&bo, &c->sched, err)) || (rc = mf_sched_set_pool(c->sched, MF_BACKEND_CPU, c->cpu, err)))
        goto fail;
    *out = c;
    return 0;
fail:
    mf_context_free(c);
    return rc;
}

void mf_context_free(mf_context *c) {
    if (!c) return;
    mf_sched_free(c->sched);
    if (!c->cpu_borrowed) mf_cpu_free(c->cpu);
    mf_graph_cache_free(c->cache);
    mf_kv_free(c->kv);
    free(c->k_ptr);
    free(c->v_ptr);
    free(c->logits);
    free(c->out_row);
    free(c->cells);
    free(c);
}

int32_t mf_context_n_ctx(const mf_context *ctx) {
    return ctx->n_ctx;
}
const mf_model *mf_context_model(const mf_context *ctx) {
    return ctx->model;
}

void mf_kv_clear_all(mf_context *ctx) {
    mf_kv_clear(ctx->kv);
}
void mf_seq_rm(mf_context *ctx, mf_seq_id seq, mf_pos p0, mf_pos p1) {
    mf_kv_seq_rm(ctx->kv, seq, p0, p1);
}
int mf_seq_cp(mf_context *ctx, mf_seq_id src, mf_seq_id dst, mf_pos p0, mf_pos p1, mf_error *err) {
    return mf_kv_seq_cp(ctx->kv, src, dst, p0, p1, err);
}
int32_t mf_kv_cells_used(const mf_context *ctx) { return mf_kv_n_used(ctx->kv); }

int mf_seq_add(mf_context *ctx, mf_seq_id seq, mf_pos p0, mf_pos p1, mf_pos delta, mf_error *err) {
    /* rotated K rows: back, re-rope, forward again (llama.cpp's build_rope_shift) */
    const mf_kv_rope rope = {.head_dim = ctx->model->hp.head_dim, .rope = ctx->rope, .rot = ctx->rot_k};
    return mf_kv_seq_add(ctx->kv, seq, p0, p1, delta, &rope, err);
}
void mf_context_rope_info(const mf_context *ctx, mf_rope_info *out) { *out = ctx->rope_info; }

mf_pos mf_seq_pos_max(const mf_context *ctx, mf_seq_id seq) {
    return mf_kv_seq_pos_max(ctx->kv, seq);
}

void mf_context_get_stats(const mf_context *ctx, mf_context_stats *st) {
    memset(st, 0, sizeof *st);
    st->graph_builds = ctx->builds;
    st->graph_reuses = ctx->reuses;
    st->kv_bytes = mf_kv_bytes(ctx->kv);
    st->graph_peak_bytes = ctx->peak_bytes;
    st->t_last_decode_s = ctx->t_last;
}

int mf_engine_build_graph(mf_context *ctx, int32_t n_tokens, int32_t n_outputs, mf_graph **out,
                          mf_graph_io *io_out, mf_error *err) {
    *out = NULL;
    mf_graph *g = mf_graph_new();
    if (!g) return mf_err(err, MF_E_NOMEM, "out of memory for a graph");
    mf_build_params bp = {
        .n_tokens = n_tokens,
        .n_outputs = n_outputs,
        .n_cells = ctx->n_ctx,
        .type_k = ctx->type_k,
        .type_v = ctx->type_v,
        .rot_k = ctx->rot_k,
        .rot_v = ctx->rot_v,
        .k_cache = ctx->k_ptr,
        .v_cache = ctx->v_ptr,
        .spans = mf_kv_spans(ctx->kv),
        .embeddings = ctx->embeddings,
        .classifier = ctx->classifier,
        .rope = &ctx->rope,
    };
    mf_graph_io io;
    int rc = mf_model_build(ctx->model, &bp, g, &io, err);
    /* backend assignment is topology: decided once per graph, by layer from the model's placement (where
     * its weights and KV rows live), under the process-wide fence; never a silent fallback */
    const mf_placement pl = {.layer = ctx->model->layer_backend,
                             .n_layer = ctx->model->hp.n_layer,
                             .io = {ctx->model->io_backend}};
    if (!rc) rc = mf_sched_assign_placed(g, &pl, NULL, err);
    if (rc) {
        mf_graph_free(g);
        return rc;
    }
    if (io_out) *io_out = io;
    *out = g;
    return 0;
}

int mf_context_write_graph(mf_context *ctx, int32_t n_tokens, const char *format, FILE *f, mf_error *err) {
    bool json = format && !strcmp(format, "json"), dot = format && !strcmp(format, "dot");
    if (!json && !dot)
        return mf_err(err, MF_E_INVAL, "unknown graph format '%s' (json, dot)", format ? format : "(null)");
    if (n_tokens <= 0 || n_tokens > ctx->n_ctx)
        return mf_err(err, MF_E_RANGE, "graph token count %d must be in [1, %d] (the context size)", n_tokens,
                      ctx->n_ctx);
    mf_graph *g = NULL;
    int rc = mf_engine_build_graph(ctx, n_tokens, n_tokens, &g, NULL, err);
    if (rc) return rc;
    rc = json ? mf_graph_write_json(g, f) : mf_graph_write_dot(g, f);
    mf_graph_free(g);
    if (rc) return mf_err(err, rc < 0 ? rc : MF_E_IO, "writing the graph as %s failed", format);
    return 0;
}
