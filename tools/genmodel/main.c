/* mf-genmodel: writes a synthetic Qwen2/Qwen3/Qwen3-MoE/Qwen2-MoE GGUF (real tokenizer, deterministic random
 * weights) that llama.cpp and minfer both load.  See docs/GENMODEL.md. */
#include "genmodel.h"
#include "quant/quant.h"

#include <errno.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: mf-genmodel --arch " GM_ARCH_NAMES " [options] -o OUT.gguf\n"
            "\n"
            "Writes a synthetic model with llama.cpp's tensor names, shapes and metadata, the real Qwen\n"
            "tokenizer and random weights that are a pure function of the options (byte-identical files\n"
            "for the same options on every machine).\n"
            "\n"
            "  --arch A        qwen2 | qwen3 | qwen3moe | qwen2moe (required). qwen2 has q/k/v biases, qwen3\n"
            "                  q/k norms; qwen3moe is qwen3's attention with a mixture of experts in place of the\n"
            "                  ffn (ffn_gate_inp router, always f32, and 3-D ffn_{gate,up,down}_exps); qwen2moe is\n"
            "                  qwen2's attention, the same experts and a shared expert (ffn_{gate,up,down}_shexp)\n"
            "                  scaled by sigmoid(ffn_gate_inp_shexp . x) (a 1-D f32 vector)\n"
            "  --preset P      %s (default tiny)\n"
            "                    tiny          2 layers, n_embd 256, 4 heads, 2 kv heads, head_dim 64, ffn 512,\n"
            "                                  ctx 4096, untied output; qwen3moe, qwen2moe: 8 experts, 2 used,\n"
            "                                  expert ffn 256; qwen2moe: shared ffn 512\n"
            "                    qwen2.5-0.5b  24 layers, 896, 14 heads, 2 kv, head_dim 64, ffn 4864, ctx 32768, tied\n"
            "                    qwen3-0.6b    28 layers, 1024, 16 heads, 8 kv, head_dim 128, ffn 3072, ctx 40960,\n"
            "                                  tied (qwen3 only: n_head*head_dim != n_embd)\n"
            "                    qwen3-30b-a3b 48 layers, 2048, 32 heads, 4 kv, head_dim 128, ffn 6144, 128 experts,\n"
            "                                  8 used, expert ffn 768, ctx 40960, untied (qwen3moe only)\n"
            "                    qwen1.5-moe-a2.7b  24 layers, 2048, 16 heads, 16 kv, head_dim 128, ffn 5632, 60\n"
            "                                  experts, 4 used, expert ffn 1408, shared ffn 5632, ctx 8192, untied\n"
            "                                  (qwen2moe only)\n"
            "                    qwen2-57b-a14b 28 layers, 3584, 28 heads, 4 kv, head_dim 128, ffn 18944, 64 experts,\n"
            "                                  8 used, expert ffn 2560, shared ffn 20480, ctx 32768, untied\n"
            "                                  (qwen2moe only)\n"
            "                  every preset: vocab 151936, rope base 1e6, rms eps 1e-6\n"
            "  --experts N     qwen3moe, qwen2moe: experts per layer (1..512; default the preset's)\n"
            "  --experts-used K  qwen3moe, qwen2moe: experts each token is routed to (1..N; default the preset's)\n"
            "  --expert-ff F   qwen3moe, qwen2moe: each expert's ffn width (a multiple of 32 in 32..65536; default\n"
            "                  the preset's)\n"
            "  --shared-ff F   qwen2moe: the shared expert's ffn width (a multiple of 32 in 32..65536; default the\n"
            "                  preset's)\n"
            "  --type T        %s (default f16)\n"
            "                  a single type is every 2-D weight in T (llama-quantize --pure; rows that are not\n"
            "                  a multiple of 256 fall back q4_k->q5_0, q5_k->q5_1, q6_k->q8_0, q2_k/q3_k->q4_0,\n"
            "                  iq4_xs/iq2_*/iq3_*->iq4_nl); q4_k_m is llama.cpp's Q4_K_M mix. Norms and biases are\n"
            "                  always f32. The iq2/iq3 types are nearest-grid-point quantizers (no importance matrix).\n"
            "                  q3_k_s / q3_k_m are llama.cpp's Q3_K_S / Q3_K_M mixes. qwen3moe and qwen2moe take\n"
            "                  the single types only (expert tensors quantized row by row; the router and the\n"
            "                  shared expert's gate stay f32).\n"
            "  --llama-quantize\n"
            "                  write what llama.cpp's llama-quantize (no imatrix, not --pure) makes of the\n"
            "                  --type f16 file of the same options: its per-tensor mix for T and ggml's own\n"
            "                  quantizers, byte for byte; T one of f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k\n"
            "                  q3_k_s q3_k_m q4_k_m iq4_nl iq4_xs iq3_s (not with qwen3moe or qwen2moe)\n"
            "  --seed N        weight seed, unsigned 64-bit decimal (default 1)\n"
            "  --tied          no output.weight: the output reuses token_embd (default of the 0.5B/0.6B presets;\n"
            "                  not with qwen2moe, whose output.weight llama.cpp requires)\n"
            "  --untied        a separate output.weight (default of tiny and the MoE presets)\n"
            "  --tokenizer DIR folder with tokenizer.json and tokenizer_config.json (default $MF_TOKENIZER_DIR,\n"
            "                  else the repository's tokenizers/qwen3: " MF_TOKENIZER_DEFAULT ")\n"
            "  --tensor-type NAME=TYPE\n"
            "                  write tensor NAME (e.g. blk.0.attn_k.weight) in TYPE, any ggml type name\n"
            "                  (llama-quantize's option, exact names; at most 8).  A type without a\n"
            "                  quantizer here (iq*, tq*, mxfp4, ...) is written as all-zero blocks:\n"
            "                  valid files for minfer info and refusal tests, not models to run.\n"
            "  --layers N      override the preset's layer count (1..512)\n"
            "  --ctx N         override the preset's context_length (1..16777216)\n"
            "  --rope-scaling none|linear|yarn\n"
            "                  write <arch>.rope.scaling.type, a long-context file's RoPE scaling\n"
            "                  (default: not written; Qwen3's 128K GGUFs: --rope-scaling yarn\n"
            "                  --rope-scale 4 --yarn-orig-ctx 32768)\n"
            "  --rope-scale F  with --rope-scaling: write <arch>.rope.scaling.factor = F (f32, finite, > 0)\n"
            "  --yarn-orig-ctx N\n"
            "                  with --rope-scaling yarn: write\n"
            "                  <arch>.rope.scaling.original_context_length = N (1..4294967295)\n"
            "  --lowrank R     speculative-decoding pair (docs/GENMODEL.md): token embeddings (and an untied\n"
            "                  head) of rank R (a multiple of 32, at most n_embd), so a small draft can compute\n"
            "                  the target's next-token bigram exactly\n"
            "  --layer-scale S multiply every layer's residual writes by S (default 1; 0..16): how far the\n"
            "                  target's layers move it from the bigram, which sets the draft's acceptance\n"
            "  --draft         with --lowrank: write the draft of the target the other options describe (the\n"
            "                  same options otherwise): n_embd R, one head of size R, n_ff 2R, untied head,\n"
            "                  the target's tokenizer; its layers write zeros (it is the target's bigram)\n"
            "  --draft-layers N  the draft's layer count (default 1; 1..64)\n"
            "  --script ID,ID,...\n"
            "                  a model that writes a fixed text: after token ID1 greedy decoding writes ID2,\n"
            "                  then ID3, ... (2..256 distinct token ids; the last is usually <|im_end|>, 151645).\n"
            "                  The layers write zeros, token ID_k's embedding is the k-th unit vector and the\n"
            "                  head maps it to ID_k+1; needs an untied head (tiny, or --untied)\n"
            "  --pooling none|mean|cls|last|rank\n"
            "                  write <arch>.pooling_type (an embedding model's pooling; default: not written)\n"
            "  --reranker      a Qwen3-Reranker as llama.cpp's converter writes one: pooling_type rank (unless\n"
            "                  --pooling says otherwise), classifier.output_labels [yes, no], a two-row\n"
            "                  cls.output.weight in the weights' type and tokenizer.chat_template.rerank\n"
            "  --cls-bias      with --reranker: also cls.output.bias (2 floats)\n"
            "  --cls-dense     with --reranker: also cls.weight (n_embd x n_embd, a BERT-style dense layer);\n"
            "                  heads llama.cpp's qwen3 reranker does not read (tests of minfer's refusal)\n"
            "                  --lowrank, --draft, --script, --pooling, --reranker: qwen2/qwen3 only (qwen3moe\n"
            "                  and qwen2moe refuse them)\n"
            "  --add-eos       write tokenizer.ggml.add_eos_token = true (tokenizing with special tokens then\n"
            "                  appends the end-of-sequence token, as Qwen3-Embedding's tokenizer does)\n"
            "  -o, --output F  the file to write (required)\n"
            "  -q, --quiet     no summary line\n"
            "  -h, --help      this text\n"
            "\n"
            "Exit status: 0 written, 1 generation failed (nothing left behind), 2 bad command line.\n",
            gm_preset_names(), gm_ftype_names());
}

static int bad(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "mf-genmodel: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n(see mf-genmodel --help)\n");
    return 2;
}

static bool parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-' || *s == '+') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

/* --script ID,ID,...: distinct ids below the vocabulary; the layers are silenced (their writes are zero). */
static int parse_script(const char *s, gm_config *c) {
    const char *q = s;
    while (*q) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(q, &end, 10);
        if (errno || end == q || (*end && *end != ',') || v >= GM_VOCAB || *q == '-' || *q == '+')
            return bad("--script '%s': not a list of token ids below 151936 separated by commas%s", s, "");
        if (c->n_script == GM_MAX_SCRIPT || c->n_script > c->p.n_embd)
            return bad("--script '%s': more ids than 256 or the preset's n_embd + 1%s", s, "");
        for (int k = 0; k < c->n_script; k++)
            if (c->script[k] == (int32_t)v) return bad("--script '%s': token ids must be distinct (the text is a chain)%s", s, "");
        c->script[c->n_script++] = (int32_t)v;
        q = *end ? end + 1 : end;
    }
    if (c->n_script < 2) return bad("--script '%s': at least two ids (the one to follow and one to write)%s", s, "");
    if (c->p.tied) return bad("--script needs an untied head (the tiny preset, or --untied)%s%s", "", "");
    if (c->lowrank) return bad("--script and --lowrank do not combine%s%s", "", "");
    c->layer_scale = 0.0f;
    return 0;
}

/* The dense arch with a MoE arch's attention (qwen3moe: qwen3; qwen2moe: qwen2, or qwen3 for a preset whose
 * heads do not span n_embd), for refusals that point the other way; and the MoE arch of a dense one. */
static const char *dense_of(const gm_config *c) {
    const gm_preset *p = &c->p;
    return c->arch == GM_ARCH_QWEN2MOE && p->n_head * p->head_dim == p->n_embd ? "qwen2" : "qwen3";
}
static const char *moe_of(gm_arch a) { return a == GM_ARCH_QWEN2 ? "qwen2moe" : "qwen3moe"; }

static int parse_ff(const char *opt, const char *s, int *out) {
    uint64_t v;
    if (!parse_u64(s, &v) || v < 32 || v > 65536 || v % 32)
        return bad("%s '%s' is not a multiple of 32 in 32..65536", opt, s);
    *out = (int)v;
    return 0;
}

/* The MoE arches: a preset with a MoE form that is not the other MoE arch's model, the expert options, a
 * single --type (the mixes' expert rules are not repeated here), --shared-ff for qwen2moe only; the dense
 * arches: no MoE-only preset, no expert option. */
static int moe_options(gm_config *c, const char *arch, const char *preset, const char *type,
                       const char *experts, const char *experts_used, const char *expert_ff,
                       const char *shared_ff) {
    uint64_t v;
    char num[24], msg[320];
    if (!gm_arch_moe(c->arch)) {
        if (c->p.moe_only) {
            snprintf(msg, sizeof msg,
                     "--preset '%s' is a mixture-of-experts model: use it with --arch %s, not %s", preset,
                     gm_arch_name(c->p.moe_arch), arch);
            return bad("%s%s", msg, "");
        }
        if (shared_ff)
            return bad("--shared-ff shapes qwen2moe's shared expert: it needs --arch qwen2moe (%s is "
                       "dense)%s", arch, "");
        const char *o = experts ? "--experts" : experts_used ? "--experts-used" : expert_ff ? "--expert-ff" : NULL;
        if (o) {
            snprintf(msg, sizeof msg, "%s shapes a mixture of experts: it needs --arch %s (%s is dense)", o,
                     moe_of(c->arch), arch);
            return bad("%s%s", msg, "");
        }
        return 0;
    }
    if (c->p.moe_only && c->p.moe_arch != c->arch) {
        const char *own = gm_arch_name(c->p.moe_arch);
        snprintf(msg, sizeof msg, "--preset '%s' is a %s model (%s): use it with --arch %s, not %s", preset,
                 own,
                 c->p.moe_arch == GM_ARCH_QWEN2MOE ? "qwen2's attention, a shared expert"
                                                   : "qwen3's attention, no shared expert",
                 own, arch);
        return bad("%s%s", msg, "");
    }
    if (!c->p.n_expert) {
        snprintf(msg, sizeof msg,
                 "--arch %s needs a mixture-of-experts preset and '%s' is dense: use --preset %s "
                 "(or --arch %s with '%s')",
                 arch, preset, gm_preset_moe_names(c->arch), dense_of(c), preset);
        return bad("%s%s", msg, "");
    }
    if (c->ftype == GM_T_Q4_K_M || c->ftype == GM_T_Q3_K_S || c->ftype == GM_T_Q3_K_M) {
        snprintf(msg, sizeof msg,
                 "--type %s (llama.cpp's per-tensor mix) is not supported for --arch %s: use a single type (%s)",
                 type, arch,
                 "f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q2_k|q3_k|q4_k|q5_k|q6_k|iq4_nl|iq4_xs|iq2_*|iq3_*");
        return bad("%s%s", msg, "");
    }
    if (shared_ff && c->arch != GM_ARCH_QWEN2MOE)
        return bad("--shared-ff shapes qwen2moe's shared expert: it needs --arch qwen2moe (%s has no "
                   "shared expert)%s", arch, "");
    if (experts) {
        if (!parse_u64(experts, &v) || v < 1 || v > GM_MAX_EXPERTS)
            return bad("--experts '%s' is not in 1..%s", experts, "512");
        c->p.n_expert = (int)v;
    }
    snprintf(num, sizeof num, "%d", c->p.n_expert);
    if (experts_used) {
        if (!parse_u64(experts_used, &v) || v < 1 || v > (uint64_t)c->p.n_expert)
            return bad("--experts-used '%s' is not in 1..%s (the expert count)", experts_used, num);
        c->p.n_expert_used = (int)v;
    } else if (c->p.n_expert_used > c->p.n_expert) {
        snprintf(msg, sizeof msg, "--experts %d is fewer than the %d experts per token of preset '%s': add "
                 "--experts-used K with K in 1..%d", c->p.n_expert, c->p.n_expert_used, preset, c->p.n_expert);
        return bad("%s%s", msg, "");
    }
    if (expert_ff && parse_ff("--expert-ff", expert_ff, &c->p.n_ff_exp)) return 2;
    if (shared_ff && parse_ff("--shared-ff", shared_ff, &c->p.n_ff_shexp)) return 2;
    return 0;
}

int main(int argc, char **argv) {
    gm_config c = {0};
    c.layer_scale = 1.0f;
    c.pooling = -1;
    const char *arch = NULL, *preset = "tiny", *type = "f16", *layers = NULL, *ctx = NULL, *seed = NULL;
    const char *lowrank = NULL, *layer_scale = NULL, *draft_layers = NULL, *script = NULL, *pooling = NULL;
    const char *experts = NULL, *experts_used = NULL, *expert_ff = NULL, *shared_ff = NULL;
    const char *rope_scaling = NULL, *rope_scale = NULL, *yarn_orig_ctx = NULL;
    int tied = -1;
    c.tokenizer_dir = getenv("MF_TOKENIZER_DIR");
    if (!c.tokenizer_dir || !*c.tokenizer_dir) c.tokenizer_dir = MF_TOKENIZER_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **dst = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--tied")) tied = 1;
        else if (!strcmp(a, "--untied")) tied = 0;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) c.quiet = true;
        else if (!strcmp(a, "--llama-quantize")) c.llama = true;
        else if (!strcmp(a, "--arch")) dst = &arch;
        else if (!strcmp(a, "--preset")) dst = &preset;
        else if (!strcmp(a, "--type")) dst = &type;
        else if (!strcmp(a, "--seed")) dst = &seed;
        else if (!strcmp(a, "--tokenizer")) dst = &c.tokenizer_dir;
        else if (!strcmp(a, "--layers")) dst = &layers;
        else if (!strcmp(a, "--experts")) dst = &experts;
        else if (!strcmp(a, "--experts-used")) dst = &experts_used;
        else if (!strcmp(a, "--expert-ff")) dst = &expert_ff;
        else if (!strcmp(a, "--shared-ff")) dst = &shared_ff;
        else if (!strcmp(a, "--lowrank")) dst = &lowrank;
        else if (!strcmp(a, "--layer-scale")) dst = &layer_scale;
        else if (!strcmp(a, "--draft-layers")) dst = &draft_layers;
        else if (!strcmp(a, "--draft")) c.draft = true;
        else if (!strcmp(a, "--script")) dst = &script;
        else if (!strcmp(a, "--pooling")) dst = &pooling;
        else if (!strcmp(a, "--add-eos")) c.add_eos = true;
        else if (!strcmp(a, "--reranker")) c.reranker = true;
        else if (!strcmp(a, "--cls-bias")) c.cls_bias = true;
        else if (!strcmp(a, "--cls-dense")) c.cls_dense = true;
        else if (!strcmp(a, "--tensor-type")) {
            if (i + 1 >= argc) return bad("%s needs a value%s", a, "");
            const char *v = argv[++i], *eq = strrchr(v, '=');
            if (c.n_over == GM_MAX_OVERRIDES) return bad("--tensor-type '%s': at most 8 are allowed%s", v, "");
            if (!eq || eq == v || (size_t)(eq - v) >= sizeof c.over[0].name)
                return bad("--tensor-type '%s' is not NAME=TYPE (e.g. blk.0.attn_k.weight=iq4_xs)%s", v, "");
            uint32_t ty = 0;
            while (ty < MF_TYPE_COUNT && !(mf_type_get_file(ty) && !strcasecmp(mf_type_name(ty), eq + 1))) ty++;
            if (ty == MF_TYPE_COUNT || (!mf_type_get(ty)->quantized && ty != MF_TYPE_F32 && ty != MF_TYPE_F16 &&
                                           ty != MF_TYPE_BF16))
                return bad("--tensor-type '%s': '%s' is not a ggml weight type name (f32, f16, bf16, q4_0, ..., "
                           "iq4_xs, tq1_0, mxfp4)", v, eq + 1);
            snprintf(c.over[c.n_over].name, sizeof c.over[0].name, "%.*s", (int)(eq - v), v);
            c.over[c.n_over++].type = ty;
        }
        else if (!strcmp(a, "--ctx")) dst = &ctx;
        else if (!strcmp(a, "--rope-scaling")) dst = &rope_scaling;
        else if (!strcmp(a, "--rope-scale")) dst = &rope_scale;
        else if (!strcmp(a, "--yarn-orig-ctx")) dst = &yarn_orig_ctx;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) dst = &c.out_path;
        else return bad("unknown option '%s'%s", a, "");
        if (dst) {
            if (i + 1 >= argc) return bad("%s needs a value%s", a, "");
            *dst = argv[++i];
        }
    }
    if (!arch) return bad("--arch is required (%s)%s", GM_ARCH_NAMES, "");
    if (!strcmp(arch, "qwen2")) c.arch = GM_ARCH_QWEN2;
    else if (!strcmp(arch, "qwen3")) c.arch = GM_ARCH_QWEN3;
    else if (!strcmp(arch, "qwen3moe")) c.arch = GM_ARCH_QWEN3MOE;
    else if (!strcmp(arch, "qwen2moe")) c.arch = GM_ARCH_QWEN2MOE;
    else return bad("unknown --arch '%s'; allowed: %s", arch, GM_ARCH_NAMES);
    const gm_preset *p = gm_preset_find(preset);
    if (!p) return bad("unknown --preset '%s'; allowed: %s", preset, gm_preset_names());
    c.p = *p;
    if (gm_ftype_parse(type, &c.ftype)) return bad("unknown --type '%s'; allowed: %s", type, gm_ftype_names());
    if (moe_options(&c, arch, preset, type, experts, experts_used, expert_ff, shared_ff)) return 2;
    if (gm_arch_moe(c.arch)) {
        const char *no = c.llama ? "--llama-quantize" : lowrank ? "--lowrank" : c.draft ? "--draft"
                       : draft_layers ? "--draft-layers" : script ? "--script" : pooling ? "--pooling"
                       : c.reranker ? "--reranker" : c.cls_bias ? "--cls-bias" : c.cls_dense ? "--cls-dense" : NULL;
        if (no) {
            char msg[160];
            snprintf(msg, sizeof msg, "%s is not supported for --arch %s (drop it, or use --arch %s)", no,
                     arch, dense_of(&c));
            return bad("%s%s", msg, "");
        }
    }
    /* llama.cpp's qwen2moe requires output.weight: unlike qwen2's, it has no token_embd fallback */
    if (c.arch == GM_ARCH_QWEN2MOE && tied == 1)
        return bad("--tied is not supported for --arch qwen2moe: llama.cpp's qwen2moe requires a separate "
                   "output.weight (drop --tied)%s%s", "", "");
    if (c.llama && !gm_ftype_llama_ok(c.ftype))
        return bad("--llama-quantize does not reproduce --type '%s'; allowed: %s (iq2_*/iq3_xxs need an importance "
                   "matrix in llama.cpp, the q4_k/q5_k/q6_k mixes are not repeated here)",
                   type, "f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q2_k|q3_k_s|q3_k_m|q4_k_m|iq4_nl|iq4_xs|iq3_s");
    c.seed = 1;
    if (seed && !parse_u64(seed, &c.seed))
        return bad("--seed '%s' is not an unsigned decimal integer (0..18446744073709551615)%s", seed, "");
    uint64_t v;
    if (layers) {
        if (!parse_u64(layers, &v) || v < 1 || v > 512) return bad("--layers '%s' is not in 1..512%s", layers, "");
        c.p.n_layer = (int)v;
    }
    if (ctx) {
        if (!parse_u64(ctx, &v) || v < 1 || v > 16777216) return bad("--ctx '%s' is not in 1..16777216%s", ctx, "");
        c.p.n_ctx = (int)v;
    }
    if (rope_scaling) {
        static const char *const names[] = {"none", "linear", "yarn"};
        for (int k = 0; k < 3; k++)
            if (!strcmp(rope_scaling, names[k])) c.rope_scaling = names[k];
        if (!c.rope_scaling)
            return bad("unknown --rope-scaling '%s'; allowed: %s", rope_scaling, "none|linear|yarn");
    }
    if (rope_scale) {
        if (!c.rope_scaling)
            return bad("--rope-scale needs --rope-scaling: add --rope-scaling yarn (or linear), the "
                       "scaling the factor belongs to%s%s", "", "");
        char *end;
        errno = 0;
        double x = strtod(rope_scale, &end);
        if (errno || end == rope_scale || *end || !(x > 0 && x <= FLT_MAX) || !((float)x > 0))
            return bad("--rope-scale '%s' is not a finite number above 0 that fits an f32 (e.g. 4)%s",
                       rope_scale, "");
        c.rope_scale = (float)x;
    }
    if (yarn_orig_ctx) {
        if (!c.rope_scaling)
            return bad("--yarn-orig-ctx needs --rope-scaling: add --rope-scaling yarn (the original "
                       "context length is YaRN's)%s%s", "", "");
        if (strcmp(c.rope_scaling, "yarn"))
            return bad("--yarn-orig-ctx needs --rope-scaling yarn, not '%s' (the original context length is "
                       "YaRN's): use --rope-scaling yarn or drop --yarn-orig-ctx%s", c.rope_scaling, "");
        if (!parse_u64(yarn_orig_ctx, &v) || v < 1 || v > UINT32_MAX)
            return bad("--yarn-orig-ctx '%s' is not in 1..4294967295%s", yarn_orig_ctx, "");
        c.yarn_orig_ctx = (uint32_t)v;
    }
    if (tied >= 0) c.p.tied = tied;
    if (layer_scale) {
        char *end;
        errno = 0;
        double x = strtod(layer_scale, &end);
        if (errno || *end || !(x >= 0 && x <= 16))
            return bad("--layer-scale '%s' is not a number in 0..16%s", layer_scale, "");
        c.layer_scale = (float)x;
    }
    if (lowrank) {
        char nd[16];
        snprintf(nd, sizeof nd, "%d", c.p.n_embd);
        if (!parse_u64(lowrank, &v) || v < 32 || v % 32 || v > (uint64_t)c.p.n_embd)
            return bad("--lowrank '%s' is not a multiple of 32 in 32..%s (the preset's n_embd)", lowrank, nd);
        c.lowrank = (int)v;
    }
    if ((c.draft || draft_layers) && !c.lowrank)
        return bad("--draft and --draft-layers need --lowrank R (the draft computes the rank-R bigram)%s%s", "", "");
    if (c.draft) {
        v = 1;
        if (draft_layers && (!parse_u64(draft_layers, &v) || v < 1 || v > 64))
            return bad("--draft-layers '%s' is not in 1..64%s", draft_layers, "");
        c.target = c.p;
        c.p = (gm_preset){.name = "draft", .n_layer = (int)v, .n_embd = c.lowrank, .n_head = 1,
                          .n_head_kv = 1, .head_dim = c.lowrank, .n_ff = 2 * c.lowrank,
                          .n_ctx = c.target.n_ctx, .rope_base = c.target.rope_base};
    }
    if (script && parse_script(script, &c)) return 2;
    if (pooling) {
        static const char *const names[] = {"none", "mean", "cls", "last", "rank"};
        for (int k = 0; k < 5; k++)
            if (!strcmp(pooling, names[k])) c.pooling = k;
        if (c.pooling < 0) return bad("unknown --pooling '%s'; allowed: %s", pooling, "none|mean|cls|last|rank");
    } else if (c.reranker) {
        c.pooling = 4;
    }
    if (!c.out_path) return bad("-o OUT.gguf is required%s%s", "", "");
    if ((c.cls_bias || c.cls_dense) && !c.reranker) return bad("--cls-bias and --cls-dense extend --reranker's head%s%s", "", "");
    mf_error err = {0};
    if (gm_config_check(&c, &err)) return bad("%s%s", err.msg, "");
    if (gm_generate(&c, &err)) {
        fprintf(stderr, "mf-genmodel: %s\n", err.msg);
        return 1;
    }
    return 0;
}
