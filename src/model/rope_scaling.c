/* The rope a context applies: the file's rope values (hparams.c) with the context's overrides, resolved as
 * llama.cpp's context resolves them (llama_context's constructor, commit 80fb11a), then checked. */
#include "model/model.h"

#include <math.h>

/* a float override: finite and > 0, or `unset` (0 for the file's values, < 0 for YaRN's defaults) */
static int check_pos(const char *name, float v, bool neg_is_unset, mf_error *err) {
    if (isfinite(v) && (v > 0.0f || v == 0.0f || (neg_is_unset && v < 0.0f))) return 0;
    return mf_err(err, MF_E_INVAL, "%s %g must be a finite number > 0 (%s: the default)", name, (double)v,
                  neg_is_unset ? "negative" : "0");
}

int mf_model_rope(const mf_model *m, const mf_rope_params *p, mf_rope *rope, mf_rope_info *info, mf_error *err) {
    const mf_hparams *hp = &m->hp;
    int rc;
    if (p->scaling < MF_ROPE_SCALING_FILE || p->scaling > MF_ROPE_SCALING_YARN)
        return mf_err(err, MF_E_INVAL, "rope scaling %d is not one of MF_ROPE_SCALING_FILE, _NONE, _LINEAR, _YARN (0..3)",
                      p->scaling);
    if ((rc = check_pos("rope freq_base", p->freq_base, false, err)) ||
        (rc = check_pos("rope freq_scale", p->freq_scale, false, err)) ||
        (rc = check_pos("yarn_beta_fast", p->yarn_beta_fast, true, err)) ||
        (rc = check_pos("yarn_beta_slow", p->yarn_beta_slow, true, err)))
        return rc;
    if (!isfinite(p->yarn_ext_factor))
        return mf_err(err, MF_E_INVAL, "yarn_ext_factor %g must be finite (negative: the default)", (double)p->yarn_ext_factor);
    if (p->yarn_orig_ctx < 0)
        return mf_err(err, MF_E_INVAL, "yarn_orig_ctx %d must be >= 0 (0: the file's)", p->yarn_orig_ctx);
    mf_rope_info r = {0};
    r.scaling = p->scaling != MF_ROPE_SCALING_FILE ? p->scaling : hp->rope_scaling;
    r.freq_base = p->freq_base > 0.0f ? p->freq_base : hp->rope_freq_base;
    r.freq_scale = p->freq_scale > 0.0f ? p->freq_scale : hp->rope_freq_scale;
    if (r.scaling == MF_ROPE_SCALING_NONE) r.freq_scale = 1.0f; /* never scale if the type is none */
    r.n_ctx_orig = p->yarn_orig_ctx > 0 ? p->yarn_orig_ctx : hp->n_ctx_orig_yarn > 0 ? hp->n_ctx_orig_yarn : hp->n_ctx_train;
    r.ext_factor = p->yarn_ext_factor >= 0.0f ? p->yarn_ext_factor : r.scaling == MF_ROPE_SCALING_YARN ? 1.0f : 0.0f;
    r.beta_fast = p->yarn_beta_fast > 0.0f ? p->yarn_beta_fast : 32.0f;
    r.beta_slow = p->yarn_beta_slow > 0.0f ? p->yarn_beta_slow : 1.0f;
    r.attn_factor = 1.0f;
    if (r.ext_factor != 0.0f) {
        if (r.n_ctx_orig <= 0)
            return mf_err(err, MF_E_INVAL, "YaRN needs an original context length: set yarn_orig_ctx (--yarn-orig-ctx N)");
        /* HF's default attention factor 0.1 ln(factor) + 1, cancelled by the same factor ggml's rope applies
         * again (llama.cpp PR 17945); libllama's build rounds it without fma */
        const float factor = 1.0f / r.freq_scale, l = logf(factor);
        const float mscale = factor <= 1.0f ? 1.0f : 0.1f * 1.0f * l + 1.0f;
        r.attn_factor = mscale * (1.0f / (1.0f + 0.1f * l));
        mf_rope_corr_dims(hp->n_rot, r.n_ctx_orig, r.freq_base, r.beta_fast, r.beta_slow, r.corr_dims);
    }
    r.attn_factor *= hp->rope_attn_factor;
    *rope = (mf_rope){.n_rot = hp->n_rot,
                      .mode = MF_ROPE_NEOX,
                      .freq_base = r.freq_base,
                      .freq_scale = r.freq_scale,
                      .ext_factor = r.ext_factor,
                      .attn_factor = r.attn_factor,
                      .corr_dims = {r.corr_dims[0], r.corr_dims[1]}};
    if (info) *info = r;
    return 0;
}
