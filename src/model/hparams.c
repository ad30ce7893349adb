/* Hyper-parameters of a Qwen-family GGUF (<arch>.* keys, llama.cpp's names and defaults). */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const k_arch_names[MF_ARCH_COUNT] = {"qwen2", "qwen3", "qwen3moe", "qwen2moe"};

static int get_u32(const mf_gguf *g, const char *arch, const char *suffix, bool required, uint32_t def,
                   int32_t *out, mf_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v = def;
    if (mf_gguf_find_key(g, key) < 0) {
        if (required)
            return mf_err(err, MF_E_FORMAT, "model metadata lacks '%s' (required for architecture %s)", key,
                          arch);
    } else {
        int rc = mf_gguf_get_u32(g, key, &v, err);
        if (rc) return rc;
    }
    if (v > INT32_MAX) return mf_err(err, MF_E_FORMAT, "'%s' = %u is too large", key, v);
    *out = (int32_t)v;
    return 0;
}

static int get_f32(const mf_gguf *g, const char *arch, const char *suffix, bool required, float def,
                   float *out, mf_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    *out = def;
    if (mf_gguf_find_key(g, key) < 0) {
        if (required)
            return mf_err(err, MF_E_FORMAT, "model metadata lacks '%s' (required for architecture %s)", key,
                          arch);
        return 0;
    }
    return mf_gguf_get_f32(g, key, out, err);
}

/* The expert keys as llama.cpp's qwen3moe / qwen2moe loaders read them: expert_feed_forward_length optional
 * (absent: feed_forward_length / expert_used_count), and qwen2moe's expert_shared_feed_forward_length
 * (absent: feed_forward_length).  A MoE file without experts, or one that routes a token to more experts
 * than it has, is refused. */
static int read_experts(const mf_gguf *g, mf_hparams *hp, mf_error *err) {
    const char *an = hp->arch_name;
    int rc;
    if ((rc = get_u32(g, an, "expert_count", true, 0, &hp->n_expert, err)) ||
        (rc = get_u32(g, an, "expert_used_count", true, 0, &hp->n_expert_used, err)))
        return rc;
    const uint32_t def_ff = hp->n_expert_used > 0 ? (uint32_t)(hp->n_ff / hp->n_expert_used) : 0;
    if ((rc = get_u32(g, an, "expert_feed_forward_length", false, def_ff, &hp->n_ff_exp, err))) return rc;
    if (hp->n_expert < 1 || hp->n_expert > 4096 || hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert ||
        hp->n_expert_used > MF_MOE_MAX_USED || hp->n_ff_exp < 1)
        return mf_err(err, MF_E_FORMAT,
                      "%s.expert_count %d, expert_used_count %d, expert_feed_forward_length %d: a MoE model needs "
                      "1..4096 experts, 1..min(experts, %d) of them a token and a positive width",
                      an, hp->n_expert, hp->n_expert_used, hp->n_ff_exp, MF_MOE_MAX_USED);
    hp->moe_norm = hp->arch == MF_ARCH_QWEN3MOE; /* llama.cpp's norm_w: true for qwen3moe, false for qwen2moe */
    if (hp->arch != MF_ARCH_QWEN2MOE) return 0;
    if ((rc = get_u32(g, an, "expert_shared_feed_forward_length", false, (uint32_t)hp->n_ff, &hp->n_ff_shexp, err)))
        return rc;
    if (hp->n_ff_shexp < 1)
        return mf_err(err, MF_E_FORMAT, "%s.expert_shared_feed_forward_length is 0: the shared expert needs a width",
                      an);
    return 0;
}

/* rope scaling, read as llama.cpp reads it (llama_model::load_hparams): the type defaults to linear, the
 * factor (rope.scaling.factor, else the old rope.scale_linear) applies to any type but none, YaRN's original
 * context defaults to the training context.  A type llama.cpp would need more for (longrope's factor
 * tensors) or does not know is refused. */
static int read_rope_scaling(const mf_gguf *g, mf_hparams *hp, mf_error *err) {
    const char *an = hp->arch_name;
    char key[128];
    int rc;
    hp->rope_scaling = MF_ROPE_SCALING_LINEAR;
    snprintf(key, sizeof key, "%s.rope.scaling.type", an);
    if (mf_gguf_find_key(g, key) >= 0) {
        mf_str st;
        if ((rc = mf_gguf_get_str(g, key, &st, err))) return rc;
        if (mf_str_eq(st, "none")) hp->rope_scaling = MF_ROPE_SCALING_NONE;
        else if (mf_str_eq(st, "linear")) hp->rope_scaling = MF_ROPE_SCALING_LINEAR;
        else if (mf_str_eq(st, "yarn")) hp->rope_scaling = MF_ROPE_SCALING_YARN;
        else
            return mf_err(err, MF_E_UNSUPPORTED, "%s = '%.*s' is not supported (none, linear, yarn)", key,
                          (int)MF_MIN(st.len, 32), st.ptr);
    }
    float factor = 0.0f;
    snprintf(key, sizeof key, "%s.rope.scaling.factor", an);
    const char *fkey = mf_gguf_find_key(g, key) >= 0 ? "rope.scaling.factor" : "rope.scale_linear";
    if ((rc = get_f32(g, an, fkey, false, 0.0f, &factor, err))) return rc;
    if (!isfinite(factor) || factor < 0.0f)
        return mf_err(err, MF_E_FORMAT, "%s.%s = %g must be a finite number > 0 (0: no scaling)", an, fkey, (double)factor);
    hp->rope_freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
    if ((rc = get_u32(g, an, "rope.scaling.original_context_length", false, (uint32_t)hp->n_ctx_train,
                      &hp->n_ctx_orig_yarn, err)) ||
        (rc = get_f32(g, an, "rope.scaling.attn_factor", false, 1.0f, &hp->rope_attn_factor, err)))
        return rc;
    if (!isfinite(hp->rope_attn_factor) || !(hp->rope_attn_factor > 0.0f))
        return mf_err(err, MF_E_FORMAT, "%s.rope.scaling.attn_factor = %g must be a finite number > 0", an,
                      (double)hp->rope_attn_factor);
    if (hp->rope_scaling == MF_ROPE_SCALING_YARN && hp->n_ctx_orig_yarn <= 0)
        return mf_err(err, MF_E_FORMAT, "YaRN needs %s.rope.scaling.original_context_length (or context_length) > 0", an);
    return 0;
}

int mf_hparams_read(const mf_gguf *g, mf_hparams *hp, mf_error *err) {
    memset(hp, 0, sizeof *hp);
    mf_str a;
    int rc = mf_gguf_get_str(g, "general.architecture", &a, err);
    if (rc) return mf_err_prefix(err, rc, "cannot tell the model architecture");
    int arch = -1;
    for (int i = 0; i < MF_ARCH_COUNT; i++)
        if (mf_str_eq(a, k_arch_names[i])) arch = i;
    if (arch < 0)
        return mf_err(err, MF_E_UNSUPPORTED, "unsupported model architecture '%.*s' (supported: %s)",
                      (int)MF_MIN(a.len, 64), a.ptr, MF_SUPPORTED_ARCHS);
    hp->arch = (mf_arch)arch;
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", k_arch_names[arch]);
    const char *an = hp->arch_name;

    if ((rc = get_u32(g, an, "context_length", true, 0, &hp->n_ctx_train, err)) ||
        (rc = get_u32(g, an, "embedding_length", true, 0, &hp->n_embd, err)) ||
        (rc = get_u32(g, an, "block_count", true, 0, &hp->n_layer, err)) ||
        (rc = get_u32(g, an, "feed_forward_length", true, 0, &hp->n_ff, err)) ||
        (rc = get_u32(g, an, "attention.head_count", true, 0, &hp->n_head, err)))
        return rc;
    if ((rc = get_u32(g, an, "attention.head_count_kv", false, (uint32_t)hp->n_head, &hp->n_head_kv, err)))
        return rc;
    if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 || hp->n_ff <= 0)
        return mf_err(err, MF_E_FORMAT,
                      "model has an empty dimension: n_embd %d, n_layer %d, n_head %d, n_head_kv %d, n_ff %d",
                      hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv, hp->n_ff);
    if (hp->n_head % hp->n_head_kv)
        return mf_err(err, MF_E_FORMAT, "attention.head_count %d is not a multiple of head_count_kv %d",
                      hp->n_head, hp->n_head_kv);
    int32_t def_hd = hp->n_embd / hp->n_head, hd_v = 0;
    if ((rc = get_u32(g, an, "attention.key_length", false, (uint32_t)def_hd, &hp->head_dim, err)) ||
        (rc = get_u32(g, an, "attention.value_length", false, (uint32_t)hp->head_dim, &hd_v, err)))
        return rc;
    if (hd_v != hp->head_dim)
        return mf_err(err, MF_E_UNSUPPORTED, "key_length %d != value_length %d is not supported",
                      hp->head_dim, hd_v);
    if (hp->head_dim <= 0 || hp->head_dim % 2)
        return mf_err(err, MF_E_FORMAT, "head dimension %d must be positive and even", hp->head_dim);
    if ((rc = get_u32(g, an, "rope.dimension_count", false, (uint32_t)hp->head_dim, &hp->n_rot, err)))
        return rc;
    if (hp->n_rot != hp->head_dim)
        return mf_err(err, MF_E_UNSUPPORTED,
                      "rope.dimension_count %d != head dimension %d is not supported for %s", hp->n_rot,
                      hp->head_dim, an);
    if ((rc = get_f32(g, an, "attention.layer_norm_rms_epsilon", true, 0, &hp->rms_eps, err)) ||
        (rc = get_f32(g, an, "rope.freq_base", false, 10000.0f, &hp->rope_freq_base, err)))
        return rc;
    if ((rc = read_rope_scaling(g, hp, err))) return rc;
    if ((rc = get_u32(g, an, "pooling_type", false, UINT32_MAX >> 1, &hp->pooling, err))) return rc;
    if (hp->pooling == (int32_t)(UINT32_MAX >> 1)) hp->pooling = -1; /* absent: a generative model */
    /* head_dim and the head counts are the file's: their product must fit the int32 the graph uses
     * (n_head_kv divides n_head, so it is no larger).  Found by fuzz_gguf (signed overflow). */
    int64_t n_embd_q = (int64_t)hp->head_dim * hp->n_head;
    if (n_embd_q > INT32_MAX)
        return mf_err(err, MF_E_FORMAT,
                      "head dimension %d x attention.head_count %d = %lld is larger than %d: the file's %s.attention.* "
                      "values are corrupt (re-convert the model)",
                      hp->head_dim, hp->n_head, (long long)n_embd_q, INT32_MAX, an);
    hp->n_embd_q = hp->head_dim * hp->n_head;
    hp->n_embd_kv = hp->head_dim * hp->n_head_kv;
    hp->qk_norm = hp->arch == MF_ARCH_QWEN3 || hp->arch == MF_ARCH_QWEN3MOE;
    if (hp->arch == MF_ARCH_QWEN3MOE || hp->arch == MF_ARCH_QWEN2MOE) return read_experts(g, hp, err);
    return 0;
}
