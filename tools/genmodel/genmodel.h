/* mf-genmodel internals: a synthetic Qwen2/Qwen3/Qwen3-MoE/Qwen2-MoE GGUF generator (see docs/GENMODEL.md).
 *
 * Everything written is a pure function of the command line and the tokenizer files: the weights
 * come from an integer PRNG and are converted with the quantizers in quantize.c (no libm calls other
 * than IEEE-exact ones), so files are byte-identical across machines and compilers. */
#ifndef MF_GENMODEL_H
#define MF_GENMODEL_H

#include "core/core.h"
#include "gguf/gguf.h"

#define GM_VOCAB 151936 /* the Qwen2/2.5/3 embedding rows (tokenizer ids are fewer; the rest is [PAD<id>]) */

/* qwen3moe: qwen3's attention, a routed mixture of experts in place of the dense ffn (Qwen3-30B-A3B);
 * qwen2moe: qwen2's attention, the same routed experts plus a sigmoid-gated shared expert (Qwen1.5-MoE-A2.7B,
 * Qwen2-57B-A14B) */
typedef enum { GM_ARCH_QWEN2, GM_ARCH_QWEN3, GM_ARCH_QWEN3MOE, GM_ARCH_QWEN2MOE } gm_arch;
#define GM_ARCH_NAMES "qwen2|qwen3|qwen3moe|qwen2moe"
#define GM_MAX_EXPERTS 512

#define GM_MAX_OVERRIDES 8
#define GM_MAX_SCRIPT 256
#define GM_SCRIPT_LOGIT 100.0f /* a script row's head weight: its logit beats every random one */

/* What --type asks for: a single tensor type (llama-quantize --pure style) or a mix (Q4_K_M, Q3_K_S/M;
 * with --llama-quantize every type is llama-quantize's mix for that ftype). */
typedef enum {
    GM_T_F32, GM_T_F16, GM_T_BF16, GM_T_Q8_0, GM_T_Q4_0, GM_T_Q4_1, GM_T_Q5_0, GM_T_Q5_1,
    GM_T_Q4_K, GM_T_Q5_K, GM_T_Q6_K, GM_T_Q4_K_M, GM_T_Q2_K, GM_T_Q3_K, GM_T_IQ4_NL, GM_T_IQ4_XS,
    GM_T_IQ2_XXS, GM_T_IQ2_XS, GM_T_IQ2_S, GM_T_IQ3_XXS, GM_T_IQ3_S, GM_T_Q3_K_S, GM_T_Q3_K_M,
    GM_T_COUNT
} gm_ftype;

typedef struct {
    const char *name;
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_ctx;
    float rope_base;
    bool tied;
    /* the MoE arches: experts, experts used per token, each expert's ffn width (0: a dense-only preset);
     * qwen2moe also the shared expert's ffn width */
    int n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    /* moe_only: a real MoE model's shape, refused with every arch but moe_arch (its layout is that arch's) */
    bool moe_only;
    gm_arch moe_arch;
} gm_preset;

typedef struct {
    gm_arch arch;
    gm_preset p; /* preset after --layers/--ctx/--tied overrides */
    gm_ftype ftype;
    uint64_t seed;
    const char *tokenizer_dir;
    const char *out_path;
    bool quiet;
    /* --llama-quantize: the file llama.cpp's llama_model_quantize (no imatrix, not --pure) writes from the
     * --type f16 file of the same options: values rounded to f16 first, llama_tensor_get_type's per-tensor
     * types, ggml's quantizers (quantize_ggml.c) */
    bool llama;
    /* --tensor-type NAME=TYPE (llama-quantize's option, exact names): these tensors in TYPE instead */
    struct { char name[64]; uint32_t type; } over[GM_MAX_OVERRIDES];
    int n_over;
    /* an agreeing target/draft pair (docs/GENMODEL.md, "Speculative decoding pairs") */
    int lowrank;       /* r > 0: embeddings (and an untied head) are rank-r products A*P (B*P) */
    float layer_scale; /* multiplies every layer's residual writes (1 = the usual init) */
    bool draft;        /* write the draft of the target these options describe, not the target */
    int draft_layers;  /* the draft's layers (its writes are zero: it is the target's bigram) */
    gm_preset target;  /* with draft: the target's shape (p is then the draft's) */
    /* --script: a model that writes a fixed token sequence under greedy decoding (docs/GENMODEL.md) */
    int32_t script[GM_MAX_SCRIPT];
    int n_script;
    /* an embedding model's keys (llama.cpp's names): --pooling writes <arch>.pooling_type (0 none, 1 mean,
     * 2 cls, 3 last; -1: not written), --add-eos tokenizer.ggml.add_eos_token = true (Qwen3-Embedding's
     * tokenizer appends <|endoftext|>) */
    int pooling;
    bool add_eos;
    /* --reranker: Qwen3-Reranker's layout as llama.cpp's converter writes it - pooling_type 4 (rank),
     * classifier.output_labels ["yes", "no"], cls.output.weight (2 rows) and tokenizer.chat_template.rerank */
    bool reranker;
    /* --cls-bias / --cls-dense (with --reranker): add cls.output.bias, or a BERT-style dense layer cls.weight
     * (n_embd x n_embd) - heads llama.cpp's qwen3 does not read, which minfer refuses to rank with */
    bool cls_bias, cls_dense;
    /* a long-context file's RoPE scaling keys (llama.cpp's names, what Qwen3's 128K GGUFs carry):
     * --rope-scaling writes <arch>.rope.scaling.type ("none" | "linear" | "yarn"; NULL: not written),
     * --rope-scale .rope.scaling.factor (0: not written), --yarn-orig-ctx
     * .rope.scaling.original_context_length (0: not written) */
    const char *rope_scaling;
    float rope_scale;
    uint32_t yarn_orig_ctx;
} gm_config;

/* The rerank prompt llama.cpp's converter (conversion/qwen.py) stores for Qwen3-Reranker. */
#define GM_RERANK_TEMPLATE                                                                                        \
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct " \
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n<Instruct>: "   \
    "Given a web search query, retrieve relevant passages that answer the query\n<Query>: {query}\n<Document>: "  \
    "{document}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"

/* ---- tokenizer (tokenizer.c) ---- */
/* Reads tokenizer.json + tokenizer_config.json (+ config.json if present) from dir and sets the
 * tokenizer.* keys the way llama.cpp's convert_hf_to_gguf.py does for Qwen, with n_vocab tokens. */
int gm_tokenizer_add(mf_gguf_writer *w, const char *dir, int64_t n_vocab, bool add_eos, mf_error *err);

/* ---- weights (weights.c) ---- */
typedef struct {
    uint64_t s;
} gm_rng;
void gm_rng_seed(gm_rng *r, uint64_t seed, const char *stream_name);
/* n values, mean + sigma * (approximately standard normal, Irwin-Hall of 4 uniforms), deterministic. */
uint64_t gm_rng_u64(gm_rng *r);
void gm_rng_fill(gm_rng *r, float *dst, int64_t n, float mean, float sigma);

/* ---- low-rank pairs (lowrank.c) ----
 * P (r x d, rows of norm ~1) and, for a draft, M = sqrt(d/r) * P diag(g) P^T (r x r), g the target's
 * output_norm gain.  Rows of the target's token_embd are A[t] P and of its untied output B[t] P; the
 * draft's token_embd is A, its output A M (tied target) or B M (untied). */
typedef struct {
    int r, d;
    float *P, *M;
    gm_rng a_rng, h_rng; /* the factor rows' streams of the tensor being written */
    float *a;
    int64_t a_cap;
} gm_lowrank;
int gm_lowrank_init(const gm_config *c, gm_lowrank *lr, mf_error *err);
void gm_lowrank_free(gm_lowrank *lr);
/* Streams the rows of token_embd (head false) or of the output head (true) of the model c writes:
 * begin, then the next nr rows (nr x n_embd floats) per call. */
void gm_lowrank_begin(const gm_config *c, gm_lowrank *lr, bool head);
int gm_lowrank_rows(const gm_config *c, gm_lowrank *lr, bool head, int64_t nr, float *rows, mf_error *err);

/* ---- tables (model.c) ---- */
const char *gm_arch_name(gm_arch a);
bool gm_arch_moe(gm_arch a);      /* qwen3moe, qwen2moe: routed experts in place of the dense ffn */
bool gm_arch_qkv_bias(gm_arch a); /* qwen2, qwen2moe: q/k/v biases, no q/k norms, no key/value length */
const gm_preset *gm_preset_find(const char *name);
const char *gm_preset_names(void); /* "tiny|qwen2.5-0.5b|...|qwen2-57b-a14b" */
const char *gm_preset_moe_names(gm_arch a); /* the presets MoE arch a takes, for refusals: "tiny or ..." */
const char *gm_ftype_name(gm_ftype t);
int gm_ftype_parse(const char *s, gm_ftype *out);
const char *gm_ftype_names(void);
uint32_t gm_ftype_file_type(gm_ftype t); /* general.file_type (llama_ftype) */
bool gm_ftype_llama_ok(gm_ftype t);      /* --llama-quantize reproduces this ftype */

/* Validates the shape combination (qwen2 needs n_head*head_dim == n_embd, the MoE arches 1 <= experts used <=
 * experts, ...). */
int gm_config_check(const gm_config *c, mf_error *err);
/* Writes the whole file: metadata, tokenizer, weights. */
int gm_generate(const gm_config *c, mf_error *err);

/* ---- quantizers (quantize.c) ---- */
/* Converts one row of n floats into type (F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K
 * IQ4_NL IQ4_XS).
 * Round-to-nearest reference quantizers; returns MF_E_UNSUPPORTED for other types. */
int gm_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);
/* ggml's own quantizers as llama_model_quantize runs them without an importance matrix (quantize_ggml.c):
 * Q2_K..Q6_K, IQ4_NL, IQ4_XS; F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 through gm_quantize_row (already ggml's);
 * MF_E_UNSUPPORTED for the others. */
int gm_quantize_row_ggml(uint32_t type, const float *src, void *dst, int64_t n);
/* IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S (quantize_iq.c; gm_quantize_row hands them over) */
int gm_quantize_row_iq(uint32_t type, const float *src, void *dst, int64_t n);

#endif
