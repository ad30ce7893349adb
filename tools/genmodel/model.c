/* Presets, per-tensor type choice (llama.cpp's rules), the tensor list with its init scale, and the
 * streaming writer loop. */
#include "genmodel.h"
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

static const gm_preset presets[] = {
    /* name, layers, embd, heads, kv heads, head_dim, ff, ctx, rope, tied, experts, used, ff_exp, ff_shexp,
     * moe_only, moe_arch.  The expert columns matter to the MoE arches only (0: no MoE form), ff_shexp to
     * qwen2moe only; a moe_only preset is a real MoE model's config, refused with every arch but moe_arch
     * (moe_arch is unused otherwise). */
    {"tiny", 2, 256, 4, 2, 64, 512, 4096, 1000000.f, false, 8, 2, 256, 512, false, GM_ARCH_QWEN2},
    {"qwen2.5-0.5b", 24, 896, 14, 2, 64, 4864, 32768, 1000000.f, true, 0, 0, 0, 0, false, GM_ARCH_QWEN2},
    {"qwen3-0.6b", 28, 1024, 16, 8, 128, 3072, 40960, 1000000.f, true, 0, 0, 0, 0, false, GM_ARCH_QWEN2},
    {"qwen3-30b-a3b", 48, 2048, 32, 4, 128, 6144, 40960, 1000000.f, false, 128, 8, 768, 0, true,
     GM_ARCH_QWEN3MOE},
    {"qwen1.5-moe-a2.7b", 24, 2048, 16, 16, 128, 5632, 8192, 1000000.f, false, 60, 4, 1408, 5632, true,
     GM_ARCH_QWEN2MOE},
    {"qwen2-57b-a14b", 28, 3584, 28, 4, 128, 18944, 32768, 1000000.f, false, 64, 8, 2560, 20480, true,
     GM_ARCH_QWEN2MOE},
};

const gm_preset *gm_preset_find(const char *name) {
    for (size_t i = 0; i < MF_ARRAY_LEN(presets); i++)
        if (!strcmp(presets[i].name, name)) return &presets[i];
    return NULL;
}
const char *gm_preset_names(void) {
    return "tiny|qwen2.5-0.5b|qwen3-0.6b|qwen3-30b-a3b|qwen1.5-moe-a2.7b|qwen2-57b-a14b";
}
const char *gm_preset_moe_names(gm_arch a) {
    return a == GM_ARCH_QWEN3MOE ? "tiny or qwen3-30b-a3b" : "tiny, qwen1.5-moe-a2.7b or qwen2-57b-a14b";
}
const char *gm_arch_name(gm_arch a) {
    static const char *const names[] = {"qwen2", "qwen3", "qwen3moe", "qwen2moe"};
    return names[a];
}
bool gm_arch_moe(gm_arch a) { return a == GM_ARCH_QWEN3MOE || a == GM_ARCH_QWEN2MOE; }
bool gm_arch_qkv_bias(gm_arch a) { return a == GM_ARCH_QWEN2 || a == GM_ARCH_QWEN2MOE; }

static const struct {
    const char *name;
    uint32_t type;      /* the tensor type (for q4_k_m: the default before the per-tensor rules) */
    uint32_t file_type; /* llama_ftype */
} ftypes[GM_T_COUNT] = {
    [GM_T_F32] = {"f32", MF_TYPE_F32, 0},        [GM_T_F16] = {"f16", MF_TYPE_F16, 1},
    [GM_T_BF16] = {"bf16", MF_TYPE_BF16, 32},    [GM_T_Q8_0] = {"q8_0", MF_TYPE_Q8_0, 7},
    [GM_T_Q4_0] = {"q4_0", MF_TYPE_Q4_0, 2},     [GM_T_Q4_1] = {"q4_1", MF_TYPE_Q4_1, 3},
    [GM_T_Q5_0] = {"q5_0", MF_TYPE_Q5_0, 8},     [GM_T_Q5_1] = {"q5_1", MF_TYPE_Q5_1, 9},
    [GM_T_Q4_K] = {"q4_k", MF_TYPE_Q4_K, 14},    [GM_T_Q5_K] = {"q5_k", MF_TYPE_Q5_K, 16},
    [GM_T_Q6_K] = {"q6_k", MF_TYPE_Q6_K, 18},    [GM_T_Q4_K_M] = {"q4_k_m", MF_TYPE_Q4_K, 15},
    [GM_T_Q2_K] = {"q2_k", MF_TYPE_Q2_K, 10},    [GM_T_Q3_K] = {"q3_k", MF_TYPE_Q3_K, 11},
    [GM_T_IQ4_NL] = {"iq4_nl", MF_TYPE_IQ4_NL, 25}, [GM_T_IQ4_XS] = {"iq4_xs", MF_TYPE_IQ4_XS, 30},
    [GM_T_IQ2_XXS] = {"iq2_xxs", MF_TYPE_IQ2_XXS, 19}, [GM_T_IQ2_XS] = {"iq2_xs", MF_TYPE_IQ2_XS, 20},
    [GM_T_IQ2_S] = {"iq2_s", MF_TYPE_IQ2_S, 28},       [GM_T_IQ3_XXS] = {"iq3_xxs", MF_TYPE_IQ3_XXS, 23},
    [GM_T_IQ3_S] = {"iq3_s", MF_TYPE_IQ3_S, 26},
    [GM_T_Q3_K_S] = {"q3_k_s", MF_TYPE_Q3_K, 11},      [GM_T_Q3_K_M] = {"q3_k_m", MF_TYPE_Q3_K, 12},
};

const char *gm_ftype_name(gm_ftype t) { return ftypes[t].name; }
const char *gm_ftype_names(void) {
    return "f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q2_k|q3_k|q4_k|q5_k|q6_k|q4_k_m|iq4_nl|iq4_xs|"
           "iq2_xxs|iq2_xs|iq2_s|iq3_xxs|iq3_s|q3_k_s|q3_k_m";
}
uint32_t gm_ftype_file_type(gm_ftype t) { return ftypes[t].file_type; }
int gm_ftype_parse(const char *s, gm_ftype *out) {
    for (int i = 0; i < GM_T_COUNT; i++)
        if (!strcasecmp(s, ftypes[i].name)) return *out = (gm_ftype)i, 0;
    return MF_E_INVAL;
}

int gm_config_check(const gm_config *c, mf_error *err) {
    const gm_preset *p = &c->p;
    if (p->n_head % p->n_head_kv)
        return mf_err(err, MF_E_INVAL, "n_head %d is not a multiple of n_head_kv %d", p->n_head, p->n_head_kv);
    if (gm_arch_qkv_bias(c->arch) && p->n_head * p->head_dim != p->n_embd)
        return mf_err(err, MF_E_INVAL,
                      "%s needs n_head*head_dim == n_embd, preset '%s' has %d*%d != %d (use --arch %s with "
                      "it)",
                      gm_arch_name(c->arch), p->name, p->n_head, p->head_dim, p->n_embd,
                      c->arch == GM_ARCH_QWEN2 ? "qwen3" : "qwen3moe");
    if (p->n_embd % 32 || p->n_ff % 32 || (p->n_head * p->head_dim) % 32)
        return mf_err(err, MF_E_INVAL, "row lengths must be multiples of 32");
    if (gm_arch_moe(c->arch)) {
        if (p->n_expert < 1 || p->n_expert > GM_MAX_EXPERTS)
            return mf_err(err, MF_E_INVAL, "%s needs 1..%d experts, not %d", gm_arch_name(c->arch),
                          GM_MAX_EXPERTS, p->n_expert);
        if (p->n_expert_used < 1 || p->n_expert_used > p->n_expert)
            return mf_err(err, MF_E_INVAL, "experts used per token %d is not in 1..%d (the expert count)",
                          p->n_expert_used, p->n_expert);
        if (p->n_ff_exp < 32 || p->n_ff_exp % 32)
            return mf_err(err, MF_E_INVAL, "the expert ffn width %d is not a positive multiple of 32", p->n_ff_exp);
    }
    if (c->arch == GM_ARCH_QWEN2MOE && (p->n_ff_shexp < 32 || p->n_ff_shexp % 32))
        return mf_err(err, MF_E_INVAL, "the shared expert's ffn width %d is not a positive multiple of 32",
                      p->n_ff_shexp);
    return 0;
}

/* ---- the tensor list ---- */
/* C_ROUTER: a MoE layer's ffn_gate_inp, always f32 (llama.cpp's converter and quantizer keep it so);
 * C_GATE_X / C_UP_X / C_DOWN_X: the 3-D expert stacks, quantized row by row like the 2-D weights */
typedef enum {
    C_EMBD, C_OUT, C_Q, C_K, C_V, C_O, C_GATE, C_UP, C_DOWN, C_1D, C_CLS, C_ROUTER, C_GATE_X, C_UP_X, C_DOWN_X
} gm_cat;

typedef struct {
    char name[64];
    gm_cat cat;
    int layer;
    uint32_t n_dims;
    int64_t ne[3]; /* ne[0] the row length; ne[1] * ne[2] rows */
    uint32_t type;
    float mean, sigma;
} gm_tensor;

/* llama_tensor_get_type's use_more_bits */
static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* tensor_type_fallback: rows that are not a multiple of the block size */
static uint32_t fallback(uint32_t t, int64_t ncols) {
    int64_t bs = mf_type_get(t)->blck_size;
    if (ncols % bs == 0) return t;
    switch (t) {
    case MF_TYPE_Q4_K: t = MF_TYPE_Q5_0; break;
    case MF_TYPE_Q5_K: t = MF_TYPE_Q5_1; break;
    case MF_TYPE_Q6_K: t = MF_TYPE_Q8_0; break;
    case MF_TYPE_IQ4_XS: case MF_TYPE_IQ2_XXS: case MF_TYPE_IQ2_XS: case MF_TYPE_IQ2_S: case MF_TYPE_IQ3_XXS:
    case MF_TYPE_IQ3_S:
        t = MF_TYPE_IQ4_NL;
        break;
    case MF_TYPE_Q2_K: case MF_TYPE_Q3_K: t = MF_TYPE_Q4_0; break;
    default: break;
    }
    return ncols % mf_type_get(t)->blck_size ? MF_TYPE_F16 : t;
}

/* llama_tensor_get_type_impl (llama.cpp 80fb11a, src/llama-quant.cpp) for the ftypes this generator
 * writes, no imatrix, not Falcon, no experts, not 70B: the output (and a tied token_embd) in Q6_K (Q8_0
 * when the row is not a multiple of the default type's block or the default is Q8_0); attn_v, ffn_down and
 * attn_output per ftype.  attn_v / ffn_down count their tensors in file order, which is the layer here. */
static uint32_t llama_mix(const gm_config *c, uint32_t t, gm_cat cat, int layer, int64_t ncols) {
    const gm_ftype f = c->ftype;
    const int nl = c->p.n_layer, gqa = c->p.n_head / c->p.n_head_kv;
    const bool iq4 = f == GM_T_IQ4_NL || f == GM_T_IQ4_XS;
    if (cat == C_OUT || (c->p.tied && cat == C_EMBD))
        return ncols % mf_type_get(t)->blck_size ? MF_TYPE_Q8_0 : t != MF_TYPE_Q8_0 ? MF_TYPE_Q6_K : t;
    if (cat == C_V) {
        if (f == GM_T_Q2_K) return gqa >= 4 ? MF_TYPE_Q4_K : MF_TYPE_Q3_K;
        if (f == GM_T_Q3_K_M) return layer < 2 ? MF_TYPE_Q5_K : MF_TYPE_Q4_K;
        if (iq4 && gqa >= 4) return MF_TYPE_Q5_K;
        if (f == GM_T_IQ3_S && gqa >= 4) return MF_TYPE_Q4_K;
        if (f == GM_T_Q4_K_M && use_more_bits(layer, nl)) return MF_TYPE_Q6_K;
    } else if (cat == C_DOWN) {
        if (f == GM_T_Q2_K) return MF_TYPE_Q3_K;
        if (f == GM_T_Q3_K_M) return layer < nl / 16 ? MF_TYPE_Q5_K : MF_TYPE_Q4_K; /* not Falcon: Q4_K */
        if (f == GM_T_Q4_K_M) return use_more_bits(layer, nl) ? MF_TYPE_Q6_K : t;
        if (iq4 && layer < nl / 8) return MF_TYPE_Q5_K;
    } else if (cat == C_O) {
        if (f == GM_T_Q2_K) return MF_TYPE_Q3_K;
        if (f == GM_T_Q3_K_M) return MF_TYPE_Q4_K;
    }
    return t;
}

/* the ftypes --llama-quantize reproduces (docs/GENMODEL.md): their mix is llama_mix above and ggml's
 * quantizers for every type the mix uses are in quantize_ggml.c.  Not: q4_k / q5_k / q6_k (their ftypes'
 * mixes are not written here), iq2_* and iq3_xxs (llama-quantize needs an importance matrix for them). */
bool gm_ftype_llama_ok(gm_ftype t) {
    switch (t) {
    case GM_T_F16: case GM_T_BF16: case GM_T_Q8_0: case GM_T_Q4_0: case GM_T_Q4_1: case GM_T_Q5_0: case GM_T_Q5_1:
    case GM_T_Q2_K: case GM_T_Q3_K_S: case GM_T_Q3_K_M: case GM_T_Q4_K_M: case GM_T_IQ4_NL: case GM_T_IQ4_XS:
    case GM_T_IQ3_S:
        return true;
    default: return false;
    }
}

/* --type X is llama-quantize --pure X (every 2-D weight X, with the shape fallback); q4_k_m, q3_k_s and
 * q3_k_m, and every type under --llama-quantize, follow llama_tensor_get_type's mix (llama_mix). */
static uint32_t pick_type(const gm_config *c, gm_cat cat, int layer, int64_t ncols) {
    if (cat == C_1D || cat == C_ROUTER) return MF_TYPE_F32;
    uint32_t t = ftypes[c->ftype].type;
    if (!mf_type_get(t)->quantized) return t;
    if (c->llama || c->ftype == GM_T_Q4_K_M || c->ftype == GM_T_Q3_K_S || c->ftype == GM_T_Q3_K_M)
        t = llama_mix(c, t, cat, layer, ncols);
    return fallback(t, ncols);
}

/* Init scheme (docs/GENMODEL.md): unit-variance projections in, residual writes scaled to the
 * embedding, logits with a std of about GM_LOGIT_STD. */
#define GM_LOGIT_STD 10.0f
#define GM_NORM_JITTER 0.1f
#define GM_RESID 2.0f
/* a MoE router's logits (over the ffn-normed state, |x| ~ sqrt(n_embd)) have this std: the experts' softmax
 * probabilities are clearly distinct (tiny, 2 of 8: mean weights 0.82 / 0.18 of the two chosen) */
#define GM_ROUTER_STD 4.0f
/* qwen2moe's shared-expert gate logit (the same state dotted with ffn_gate_inp_shexp) has this std: its
 * sigmoid spreads over about (0.07, 0.91) token by token (tiny f32, 5th-95th percentile over token
 * embeddings) instead of sitting at 0 or 1, so the gate's value shows in the output */
#define GM_SHEXP_GATE_STD 1.5f

static int build_list(const gm_config *c, gm_tensor **out, int *n_out, mf_error *err) {
    const gm_preset *p = &c->p;
    const int L = p->n_layer, d = p->n_embd, dq = p->n_head * p->head_dim, dkv = p->n_head_kv * p->head_dim;
    const int per_layer = 17; /* qwen2moe's: 8 attention, ffn_norm, 4 routed, 4 shared */
    gm_tensor *t = calloc((size_t)(4 + per_layer * L), sizeof *t);
    if (!t) return mf_err(err, MF_E_NOMEM, "out of memory building the tensor list");
    int n = 0;
    const float sd = sqrtf((float)d), se = GM_LOGIT_STD / sd;
    /* a draft's layers write nothing: it is exactly the bigram its target's embeddings and head encode */
    const float resid = c->draft ? 0.0f : GM_RESID * se / sqrtf((float)L) * c->layer_scale;
#define ADD2(nm, c_, l, n0, n1, s)                                                                                     \
    do {                                                                                                              \
        gm_tensor *x = &t[n++];                                                                                       \
        snprintf(x->name, sizeof x->name, "%s", nm);                                                                  \
        x->cat = c_, x->layer = l, x->n_dims = 2, x->ne[0] = n0, x->ne[1] = n1, x->ne[2] = 1, x->mean = 0,          \
        x->sigma = s;                                                                                                 \
    } while (0)
#define ADD3(nm, c_, l, n0, n1, n2, s)                                                                                 \
    do {                                                                                                              \
        gm_tensor *x = &t[n++];                                                                                       \
        snprintf(x->name, sizeof x->name, "%s", nm);                                                                  \
        x->cat = c_, x->layer = l, x->n_dims = 3, x->ne[0] = n0, x->ne[1] = n1, x->ne[2] = n2, x->mean = 0,         \
        x->sigma = s;                                                                                                 \
    } while (0)
#define ADD1(nm, l, n0, m, s)                                                                                          \
    do {                                                                                                              \
        gm_tensor *x = &t[n++];                                                                                       \
        snprintf(x->name, sizeof x->name, "%s", nm);                                                                  \
        x->cat = C_1D, x->layer = l, x->n_dims = 1, x->ne[0] = n0, x->ne[1] = 1, x->ne[2] = 1, x->mean = m,          \
        x->sigma = s;                                                                                                 \
    } while (0)
    ADD2("token_embd.weight", C_EMBD, -1, d, GM_VOCAB, se);
    char nm[64];
    for (int i = 0; i < L; i++) {
#define NM(s) (snprintf(nm, sizeof nm, "blk.%d.%s", i, s), nm)
        ADD1(NM("attn_norm.weight"), i, d, 1.0f, GM_NORM_JITTER);
        ADD2(NM("attn_q.weight"), C_Q, i, d, dq, 1.0f / sd);
        const bool bias = gm_arch_qkv_bias(c->arch);
        if (bias) ADD1(NM("attn_q.bias"), i, dq, 0, 0.5f);
        ADD2(NM("attn_k.weight"), C_K, i, d, dkv, 1.0f / sd);
        if (bias) ADD1(NM("attn_k.bias"), i, dkv, 0, 0.5f);
        ADD2(NM("attn_v.weight"), C_V, i, d, dkv, 1.0f / sd);
        if (bias) ADD1(NM("attn_v.bias"), i, dkv, 0, 0.1f);
        if (!bias) {
            ADD1(NM("attn_q_norm.weight"), i, p->head_dim, 1.0f, GM_NORM_JITTER);
            ADD1(NM("attn_k_norm.weight"), i, p->head_dim, 1.0f, GM_NORM_JITTER);
        }
        ADD2(NM("attn_output.weight"), C_O, i, dq, d, resid / sqrtf((float)dq));
        ADD1(NM("ffn_norm.weight"), i, d, 1.0f, GM_NORM_JITTER);
        if (gm_arch_moe(c->arch)) {
            /* expert e is rows [e*ff_exp, (e+1)*ff_exp) of gate/up and [e*d, (e+1)*d) of down: each expert is
             * initialised like the dense ffn of width ff_exp (the router's weights of the chosen sum to 1) */
            const int ne = p->n_expert, fx = p->n_ff_exp;
            ADD2(NM("ffn_gate_inp.weight"), C_ROUTER, i, d, ne, GM_ROUTER_STD / sd);
            ADD3(NM("ffn_gate_exps.weight"), C_GATE_X, i, d, fx, ne, 1.0f / sd);
            ADD3(NM("ffn_up_exps.weight"), C_UP_X, i, d, fx, ne, 1.0f / sd);
            ADD3(NM("ffn_down_exps.weight"), C_DOWN_X, i, fx, d, ne, 2.0f * resid / sqrtf((float)fx));
        }
        if (c->arch == GM_ARCH_QWEN2MOE) {
            /* the shared expert is initialised as the dense ffn of its width; its gate is HF's 1-row
             * shared_expert_gate, f32 as the converter keeps it, 1-D as llama.cpp creates it ({n_embd}) */
            const int fs = p->n_ff_shexp;
            ADD1(NM("ffn_gate_inp_shexp.weight"), i, d, 0, GM_SHEXP_GATE_STD / sd);
            ADD2(NM("ffn_gate_shexp.weight"), C_GATE, i, d, fs, 1.0f / sd);
            ADD2(NM("ffn_up_shexp.weight"), C_UP, i, d, fs, 1.0f / sd);
            ADD2(NM("ffn_down_shexp.weight"), C_DOWN, i, fs, d, 2.0f * resid / sqrtf((float)fs));
        }
        if (!gm_arch_moe(c->arch)) {
            ADD2(NM("ffn_gate.weight"), C_GATE, i, d, p->n_ff, 1.0f / sd);
            ADD2(NM("ffn_up.weight"), C_UP, i, d, p->n_ff, 1.0f / sd);
            ADD2(NM("ffn_down.weight"), C_DOWN, i, p->n_ff, d, 2.0f * resid / sqrtf((float)p->n_ff));
        }
#undef NM
    }
    /* Random-sign gain: with a positive one and tied embeddings the current token's own row wins by
     * ~sqrt(n_embd) * logit std (the residual is mostly its embedding) and greedy repeats it forever. */
    if (c->draft || c->n_script) ADD1("output_norm.weight", -1, d, 1.0f, 0.0f); /* a draft: its target's gain is
                                                                                  * folded into its head */
    else ADD1("output_norm.weight", -1, d, 0.0f, 1.0f);
    if (!p->tied) ADD2("output.weight", C_OUT, -1, d, GM_VOCAB, se);
    /* a reranker's head (llama.cpp's converter: the lm_head rows of "yes" and "no"); scores of std ~1 over
     * the unit-gain hidden state, so the two labels' probabilities spread instead of saturating */
    if (c->reranker) ADD2("cls.output.weight", C_CLS, -1, d, 2, 1.0f / sd);
    if (c->cls_bias) ADD1("cls.output.bias", -1, 2, 0.0f, 0.5f);
    if (c->cls_dense) ADD2("cls.weight", C_CLS, -1, d, d, 1.0f / sd);
#undef ADD1
#undef ADD2
#undef ADD3
    for (int i = 0; i < n; i++) t[i].type = pick_type(c, t[i].cat, t[i].layer, t[i].ne[0]);
    for (int o = 0; o < c->n_over; o++) {
        int i = 0;
        while (i < n && strcmp(t[i].name, c->over[o].name)) i++;
        const int64_t bs = mf_type_get(c->over[o].type)->blck_size;
        if (i == n || t[i].n_dims < 2 || t[i].ne[0] % bs) {
            const int rc = mf_err(err, MF_E_INVAL,
                                  i == n ? "--tensor-type %s=%s: this model has no tensor '%s' (names as minfer info "
                                           "lists them, e.g. blk.0.attn_k.weight)"
                                         : "--tensor-type %s=%s: tensor '%s' is 1-D or its rows are not a multiple "
                                           "of the type's block",
                                  c->over[o].name, mf_type_name(c->over[o].type), c->over[o].name);
            free(t);
            return rc;
        }
        t[i].type = c->over[o].type;
    }
    *out = t;
    *n_out = n;
    return 0;
}

static int set_meta(mf_gguf_writer *w, const gm_config *c) {
    const gm_preset *p = &c->p;
    const char *a = gm_arch_name(c->arch);
    char key[128], name[128];
    int rc = 0;
#define K(s) (snprintf(key, sizeof key, "%s.%s", a, s), key)
    if (c->draft) snprintf(name, sizeof name, "minfer synthetic draft (rank %d) of %s %s", c->lowrank, c->target.name, a);
    else snprintf(name, sizeof name, "minfer synthetic %s %s", p->name, a);
    rc |= mf_gguf_writer_set_str(w, "general.architecture", a);
    rc |= mf_gguf_writer_set_str(w, "general.type", "model");
    rc |= mf_gguf_writer_set_str(w, "general.name", name);
    rc |= mf_gguf_writer_set_u32(w, K("block_count"), (uint32_t)p->n_layer);
    rc |= mf_gguf_writer_set_u32(w, K("context_length"), (uint32_t)p->n_ctx);
    rc |= mf_gguf_writer_set_u32(w, K("embedding_length"), (uint32_t)p->n_embd);
    rc |= mf_gguf_writer_set_u32(w, K("feed_forward_length"), (uint32_t)p->n_ff);
    rc |= mf_gguf_writer_set_u32(w, K("attention.head_count"), (uint32_t)p->n_head);
    rc |= mf_gguf_writer_set_u32(w, K("attention.head_count_kv"), (uint32_t)p->n_head_kv);
    rc |= mf_gguf_writer_set_f32(w, K("rope.freq_base"), p->rope_base);
    if (c->rope_scaling) rc |= mf_gguf_writer_set_str(w, K("rope.scaling.type"), c->rope_scaling);
    if (c->rope_scale > 0) rc |= mf_gguf_writer_set_f32(w, K("rope.scaling.factor"), c->rope_scale);
    if (c->yarn_orig_ctx)
        rc |= mf_gguf_writer_set_u32(w, K("rope.scaling.original_context_length"), c->yarn_orig_ctx);
    rc |= mf_gguf_writer_set_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-6f);
    if (!gm_arch_qkv_bias(c->arch)) {
        rc |= mf_gguf_writer_set_u32(w, K("attention.key_length"), (uint32_t)p->head_dim);
        rc |= mf_gguf_writer_set_u32(w, K("attention.value_length"), (uint32_t)p->head_dim);
    }
    if (gm_arch_moe(c->arch)) {
        rc |= mf_gguf_writer_set_u32(w, K("expert_count"), (uint32_t)p->n_expert);
        rc |= mf_gguf_writer_set_u32(w, K("expert_used_count"), (uint32_t)p->n_expert_used);
        rc |= mf_gguf_writer_set_u32(w, K("expert_feed_forward_length"), (uint32_t)p->n_ff_exp);
    }
    if (c->arch == GM_ARCH_QWEN2MOE)
        rc |= mf_gguf_writer_set_u32(w, K("expert_shared_feed_forward_length"), (uint32_t)p->n_ff_shexp);
    if (c->pooling >= 0) rc |= mf_gguf_writer_set_u32(w, K("pooling_type"), (uint32_t)c->pooling);
    if (c->reranker) {
        static const char *const labels[] = {"yes", "no"};
        rc |= mf_gguf_writer_set_str_arr(w, K("classifier.output_labels"), labels, 2);
        rc |= mf_gguf_writer_set_str(w, "tokenizer.chat_template.rerank", GM_RERANK_TEMPLATE);
    }
#undef K
    rc |= mf_gguf_writer_set_u32(w, "general.file_type", gm_ftype_file_type(c->ftype));
    rc |= mf_gguf_writer_set_u32(w, "general.quantization_version", 2);
    rc |= mf_gguf_writer_set_u64(w, "minfer.genmodel.seed", c->seed);
    rc |= mf_gguf_writer_set_str(w, "minfer.genmodel.type", gm_ftype_name(c->ftype));
    if (c->lowrank) {
        rc |= mf_gguf_writer_set_u32(w, "minfer.genmodel.lowrank", (uint32_t)c->lowrank);
        rc |= mf_gguf_writer_set_f32(w, "minfer.genmodel.layer_scale", c->layer_scale);
        rc |= mf_gguf_writer_set_str(w, "minfer.genmodel.role", c->draft ? "draft" : "target");
    }
    return rc ? MF_E_NOMEM : 0;
}

#define GM_ROWS_PER_CHUNK 64

/* One output row in GM_HOT_ONE_IN gets GM_HOT_SCALE times the norm: the logits then have a heavy upper
 * tail, so the top token stands clear of the runner-up (greedy decoding robust to float rounding)
 * while thousands of tokens can still win.  Powers of two keep the product exact. */
#define GM_HOT_ONE_IN 128
#define GM_HOT_SCALE 2.0f
/* --script: the embedding of the k-th id is unit vector k, the head row of id k+1 reads that dimension. */
static void script_rows(const gm_config *c, bool head, int64_t r0, float *rows, int64_t ncol, int64_t nr) {
    for (int k = 0; k < c->n_script; k++) {
        int64_t id = c->script[k], dim = head ? k - 1 : k;
        if (id < r0 || id >= r0 + nr || dim < 0 || (!head && k == c->n_script - 1)) continue;
        float *row = rows + (id - r0) * ncol;
        memset(row, 0, (size_t)ncol * sizeof *row);
        row[dim] = head ? GM_SCRIPT_LOGIT : 1.0f;
    }
}

static void hot_rows(gm_rng *r, float *rows, int64_t ncol, int64_t nr) {
    for (int64_t k = 0; k < nr; k++) {
        if (gm_rng_u64(r) % GM_HOT_ONE_IN) continue;
        for (int64_t j = 0; j < ncol; j++) rows[k * ncol + j] *= GM_HOT_SCALE;
    }
}

int gm_generate(const gm_config *c, mf_error *err) {
    double t0 = mf_time_now();
    int rc = gm_config_check(c, err);
    if (rc) return rc;
    gm_tensor *t = NULL;
    int n = 0;
    mf_gguf_writer *w = mf_gguf_writer_new();
    uint8_t *buf = NULL;
    float *rows = NULL;
    bool begun = false;
    gm_lowrank lr = {0};
    if (c->lowrank && (rc = gm_lowrank_init(c, &lr, err))) return rc;
    if (!w) {
        rc = mf_err(err, MF_E_NOMEM, "out of memory building the tensor list");
        goto done;
    }
    if ((rc = build_list(c, &t, &n, err))) goto done;
    if ((rc = set_meta(w, c))) {
        rc = mf_err(err, rc, "setting the model metadata failed");
        goto done;
    }
    if ((rc = gm_tokenizer_add(w, c->tokenizer_dir, GM_VOCAB, c->add_eos, err))) goto done;

    uint64_t max_bytes = 0, total = 0;
    int64_t max_row = 0;
    int count_by_type[MF_TYPE_COUNT] = {0};
    for (int i = 0; i < n; i++) {
        if ((rc = mf_gguf_writer_add_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne, err))) goto done;
        uint64_t nb = (uint64_t)mf_row_size(t[i].type, t[i].ne[0]) * (uint64_t)(t[i].ne[1] * t[i].ne[2]);
        max_bytes = nb > max_bytes ? nb : max_bytes;
        max_row = t[i].ne[0] > max_row ? t[i].ne[0] : max_row;
        total += nb;
        count_by_type[t[i].type]++;
    }
    buf = malloc(max_bytes);
    rows = malloc((size_t)max_row * GM_ROWS_PER_CHUNK * sizeof(float));
    if (!buf || !rows) {
        rc = mf_err(err, MF_E_NOMEM, "cannot allocate %llu bytes of tensor buffer", (unsigned long long)max_bytes);
        goto done;
    }
    if ((rc = mf_gguf_writer_begin(w, c->out_path, err))) goto done;
    begun = true;
    for (int i = 0; i < n; i++) {
        gm_rng r, hot;
        gm_rng_seed(&r, c->seed, t[i].name);
        char hot_name[80];
        snprintf(hot_name, sizeof hot_name, "%s#hot", t[i].name);
        gm_rng_seed(&hot, c->seed, hot_name);
        const int64_t ncol = t[i].ne[0], nrow = t[i].ne[1] * t[i].ne[2];
        const size_t rs = mf_row_size(t[i].type, ncol);
        const bool low = c->lowrank && (t[i].cat == C_OUT || t[i].cat == C_EMBD);
        if (low) gm_lowrank_begin(c, &lr, t[i].cat == C_OUT);
        for (int64_t r0 = 0; r0 < nrow; r0 += GM_ROWS_PER_CHUNK) {
            int64_t nr = MF_MIN(GM_ROWS_PER_CHUNK, nrow - r0);
            if (low) {
                if ((rc = gm_lowrank_rows(c, &lr, t[i].cat == C_OUT, nr, rows, err))) goto done;
            } else {
                gm_rng_fill(&r, rows, ncol * nr, t[i].mean, t[i].sigma);
                if (t[i].cat == C_OUT || (c->p.tied && t[i].cat == C_EMBD)) hot_rows(&hot, rows, ncol, nr);
                if (c->n_script && (t[i].cat == C_OUT || t[i].cat == C_EMBD))
                    script_rows(c, t[i].cat == C_OUT, r0, rows, ncol, nr);
            }
            /* llama-quantize reads the F16 file: every value as the f16 the generator would have written */
            if (c->llama && t[i].n_dims >= 2)
                for (int64_t k = 0; k < ncol * nr; k++) rows[k] = mf_fp16_to_fp32(mf_fp32_to_fp16(rows[k]));
            for (int64_t k = 0; k < nr; k++) {
                rc = (c->llama ? gm_quantize_row_ggml : gm_quantize_row)(t[i].type, rows + k * ncol,
                                                                         buf + (size_t)(r0 + k) * rs, ncol);
                /* a --tensor-type without a quantizer here: all-zero blocks are valid in every ggml type */
                if (rc == MF_E_UNSUPPORTED && mf_type_get(t[i].type)->quantized)
                    rc = 0, memset(buf + (size_t)(r0 + k) * rs, 0, rs);
                if (rc) {
                    rc = mf_err(err, MF_E_INTERNAL, "no quantizer for %s (tensor %s)", mf_type_name(t[i].type),
                                t[i].name);
                    goto done;
                }
            }
        }
        if ((rc = mf_gguf_writer_write_tensor(w, buf, rs * (uint64_t)nrow, err))) goto done;
    }
    if ((rc = mf_gguf_writer_end(w, err))) goto done;
    if (!c->quiet) {
        printf("mf-genmodel: wrote %s: %s %s, %d layers, %s, %d tensors, %.1f MiB of weights (", c->out_path,
               gm_arch_name(c->arch), c->p.name, c->p.n_layer, gm_ftype_name(c->ftype), n, (double)total / 1048576.0);
        const char *sep = "";
        for (int k = 0; k < MF_TYPE_COUNT; k++)
            if (count_by_type[k]) printf("%s%d %s", sep, count_by_type[k], mf_type_name((uint32_t)k)), sep = ", ";
        printf("), seed %llu, %.2f s\n", (unsigned long long)c->seed, mf_time_now() - t0);
    }
done:
    if (rc && begun) remove(c->out_path); /* never leave a half-written model behind */
    gm_lowrank_free(&lr);
    mf_gguf_writer_free(w);
    free(t);
    free(buf);
    free(rows);
    return rc;
}
