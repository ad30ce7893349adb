/* minfer: the public C API (what the CLI, the server and embedding programs use).
 *
 * Conventions: a function that can fail returns int (0 = ok, negative MF_E_* code below) and takes
 * `mf_error *err` last (may be NULL); err->msg names the actual values and the way out.
 * Objects come in new/free pairs; every free accepts NULL.  See docs/API.md for a walk-through.
 *
 * Self-contained: this header defines everything it exposes and includes no internal header, so an
 * embedder compiles with -Iinclude alone (tests/cli/public_header.sh).  The library's internals take the
 * error struct and codes from here, so there is one definition. */
#ifndef MINFER_H
#define MINFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------- errors ---------------- */
enum {
    MF_OK = 0,
    MF_E_IO = -1,          /* open/read/write/mmap failed */
    MF_E_FORMAT = -2,      /* malformed input file or data */
    MF_E_NOMEM = -3,       /* allocation failed */
    MF_E_INVAL = -4,       /* bad argument from the caller or the user (a bad MINFER_* value included) */
    MF_E_UNSUPPORTED = -5, /* valid request this build/model cannot honour */
    MF_E_RANGE = -6,       /* a value outside its allowed range (context full, id too big) */
    MF_E_NOTFOUND = -7,    /* key, tensor, file or name not present */
    MF_E_TYPE = -8,        /* value present but of another type */
    MF_E_BACKEND = -9,     /* backend refused or failed */
    MF_E_INTERNAL = -10,   /* a bug: an invariant did not hold */
};

typedef struct mf_error {
    int code;
    char msg[1024];
} mf_error;

/* "format error", "out of memory", ... for an MF_E_* code ("unknown error" for anything else). */
const char *mf_err_code_name(int code);

/* KV cache element types for mf_context_params.type_k / type_v (the ggml type ids, which the internals
 * use).  Bytes per cell row of n elements: f32 4n, f16 2n, q8_0 34n/32 (blocks of 32: an f16 scale and 32
 * int8, exactly the bytes of the reference q8_0 quantizer); n must be a multiple of 32 for q8_0. */
enum { MF_KV_TYPE_F32 = 0, MF_KV_TYPE_F16 = 1, MF_KV_TYPE_Q8_0 = 8 };

typedef int32_t mf_token;
typedef int32_t mf_pos;
typedef int32_t mf_seq_id;

typedef struct mf_model mf_model;
typedef struct mf_context mf_context;
typedef struct mf_sampler mf_sampler;
typedef struct mf_dry_breakers mf_dry_breakers;
typedef struct mf_infill_vocab mf_infill_vocab;
typedef struct mf_gen mf_gen;

/* ---------------- model ---------------- */
typedef void (*mf_progress_fn)(float progress, void *user); /* 0.0 .. 1.0 */

/* n_gpu_layers: 0 = every block on the CPU (the default); N > 0 = blocks 0..N-1 on the GPU (CUDA), the
 * embeddings, output norm and LM head too when N covers every block (a count above the block count means
 * all); these two: */
#define MF_GPU_LAYERS_ALL (-1)  /* every block and the embeddings/output */
#define MF_GPU_LAYERS_AUTO (-2) /* as many blocks as fit the device memory budget (docs/BACKENDS.md) */

typedef struct {
    mf_progress_fn progress; /* may be NULL */
    void *progress_user;
    bool no_repack; /* keep every weight in the file's layout (also MINFER_REPACK=0) */
    /* Offload (docs/BACKENDS.md): refused at load when the request cannot be honoured (no CUDA in this build,
     * no usable device, cuda fenced out by MINFER_BACKENDS, a count whose weights exceed the budget, auto
     * without a known budget).  MINFER_GPU_MEM=<MiB> sets the budget instead of the device's free memory. */
    int32_t n_gpu_layers;
    const char *gpu_layers_origin; /* how the request was given, named in the report ("--gpu-layers 20"); may be NULL */
    int32_t n_threads; /* threads that repack the weights at load: 0 = all online CPUs, at most 16 */
} mf_model_params;

mf_model_params mf_model_default_params(void);
/* Maps the GGUF file; weights are used in place, except the Q4_0/Q5_0/Q8_0/IQ4_NL/Q4_K/Q6_K/IQ4_XS matrices the CPU
 * matmul reads, which are copied once into a row-interleaved layout (their file pages are then released,
 * so resident memory does not grow; see docs/PERFORMANCE.md) unless no_repack.  Refuses an unsupported architecture
 * naming it and the supported ones (qwen2, qwen3, qwen3moe). */
int mf_model_load(const char *path, const mf_model_params *params, mf_model **out, mf_error *err);
void mf_model_free(mf_model *model);

typedef struct {
    const char *arch; /* "qwen2" | "qwen3" | "qwen3moe" */
    int32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    float rope_freq_base, rms_eps;
    bool tied_output, qkv_bias, qk_norm;
    int32_t pooling;   /* the file's <arch>.pooling_type (an mf_pooling value), -1 when absent */
    int32_t n_cls_out; /* a reranker's classifier head: its outputs (labels), 0 without a head */
    mf_token bos, eos; /* -1 when the model names none */
    /* fill-in-the-middle (code infilling, as Qwen2.5-Coder is trained for): <|fim_prefix|>, <|fim_suffix|>,
     * <|fim_middle|>, and the repository-level <|repo_name|> and <|file_sep|>; from the file's
     * tokenizer.ggml.fim_*_token_id, else found by text as llama.cpp does; -1 when absent */
    mf_token fim_pre, fim_suf, fim_mid, fim_rep, fim_sep;
    int32_t n_eog;     /* end-of-generation ids (eos, eot, <|im_end|>, <|endoftext|>, ...) */
    const mf_token *eog;
    int32_t n_repacked;    /* weight matrices copied into an x8 layout at load (0 with no_repack) */
    size_t repacked_bytes; /* their size */
    int32_t n_gpu_layers;  /* blocks placed on the GPU (0..n_layer) */
    bool gpu_io;           /* embeddings, output norm and LM head on the GPU */
    size_t gpu_bytes;      /* weight bytes on the GPU */
    /* The offload report ("offload: 20 of 24 blocks on cuda, 4 on cpu; ..."), "" when no offload was asked */
    const char *offload_report;
    /* a mixture of experts (qwen3moe, qwen2moe): experts, experts a token, each expert's FFN width, and
     * qwen2moe's shared expert's FFN width (0 without one); all 0 for a dense model */
    int32_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    /* the file's rope scaling: MF_ROPE_SCALING_NONE, _LINEAR or _YARN, its rope.scaling.factor (1 without)
     * and YaRN's original context (rope.scaling.original_context_length, else n_ctx_train) */
    int32_t rope_scaling;
    float rope_scale;
    int32_t n_ctx_orig;
} mf_model_info;

void mf_model_get_info(const mf_model *model, mf_model_info *info);
/* A reranker's label i (<arch>.classifier.output_labels: "yes", "no" for Qwen3-Reranker); NULL when the file
 * names no labels or i is out of range. */
const char *mf_model_cls_label(const mf_model *model, int32_t i);
bool mf_model_is_eog(const mf_model *model, mf_token token);

/* ---------------- tokenizer (the model's own vocabulary) ---------------- */
/* Text -> ids.  add_special: prepend BOS when the model asks for it; parse_special: recognise special
 * token texts such as <|im_start|>.  *out is malloc'd (free() it). */
int mf_tokenize(const mf_model *model, const char *text, size_t len, bool add_special, bool parse_special,
                mf_token **out, int32_t *n_out, mf_error *err);
/* Ids -> text (malloc'd, NUL-terminated; *len its byte length). */
int mf_detokenize(const mf_model *model, const mf_token *ids, int32_t n, char **out, size_t *len,
                  mf_error *err);

/* Streaming detokenizer: push one id at a time; *piece receives the bytes that became complete UTF-8
 * (possibly empty; valid until the next call).  flush returns whatever is left. */
typedef struct mf_detok_stream mf_detok_stream;
int mf_detok_stream_new(const mf_model *model, mf_detok_stream **out, mf_error *err);
int mf_detok_stream_push(mf_detok_stream *s, mf_token id, const char **piece, size_t *len, mf_error *err);
int mf_detok_stream_flush(mf_detok_stream *s, const char **piece, size_t *len, mf_error *err);
void mf_detok_stream_free(mf_detok_stream *s);

/* Chat rendering with the model's template family, recognised from tokenizer.chat_template (Qwen2.5,
 * Qwen3, plain ChatML).  A template that is not recognised, or a model without one, is refused with a
 * message naming the way out (template "chatml") - never a silent guess.  roles: "system", "user",
 * "assistant", "tool" (a tool's result).  Tools and tool calls are rendered as the Qwen templates do under
 * transformers (each tool's JSON as json.dumps writes it); plain ChatML refuses them.  *out malloc'd. */
typedef struct {
    const char *name;
    const char *arguments; /* JSON text, as OpenAI's function.arguments string holds it */
} mf_chat_tool_call;

typedef struct {
    const char *role;
    const char *content;
    const mf_chat_tool_call *tool_calls; /* an assistant turn's calls (NULL, 0: none) */
    int32_t n_tool_calls;
} mf_chat_message;

typedef struct {
    bool add_generation_prompt; /* append the assistant header (default true) */
    const char *template_name;  /* NULL or "auto": the model's; or "chatml", "qwen2.5", "qwen3" ("" refused) */
    int enable_thinking;        /* Qwen3's switch: -1 = template default, 0 = off, 1 = on (refused with a
                                   template that has no switch) */
    const char *const *tools;   /* the tools the model may call: each one's JSON text, OpenAI's
                                   {"type": "function", "function": {...}} (NULL, 0: none) */
    int32_t n_tools;
} mf_chat_params;

mf_chat_params mf_chat_default_params(void);
int mf_chat_apply_with(const mf_model *model, const mf_chat_message *msgs, int32_t n_msgs,
                       const mf_chat_params *params, char **out, mf_error *err);
/* mf_chat_apply_with with the defaults and the given add_generation_prompt. */
int mf_chat_apply(const mf_model *model, const mf_chat_message *msgs, int32_t n_msgs,
                  bool add_generation_prompt, char **out, mf_error *err);

/* ---------------- context ---------------- */
/* mf_rope_params.scaling (the file's type by default; llama.cpp's LLAMA_ROPE_SCALING_TYPE_*) */
enum { MF_ROPE_SCALING_FILE = 0, MF_ROPE_SCALING_NONE = 1, MF_ROPE_SCALING_LINEAR = 2, MF_ROPE_SCALING_YARN = 3 };

/* Rope overrides (llama.cpp's --rope-scaling, --rope-scale, --rope-freq-base, --rope-freq-scale, --yarn-* flags;
 * docs/API.md).  Zero is the file's value; the YaRN tuning values are llama.cpp's defaults when negative (as
 * mf_context_default_params sets them).  A value out of range is refused at mf_context_new. */
typedef struct {
    int32_t scaling;       /* MF_ROPE_SCALING_FILE (the file's <arch>.rope.scaling.type), _NONE, _LINEAR, _YARN */
    float freq_base;       /* 0: the file's <arch>.rope.freq_base */
    float freq_scale;      /* 0: the file's, 1 / <arch>.rope.scaling.factor (llama.cpp's --rope-scale N is 1/N) */
    int32_t yarn_orig_ctx; /* 0: the file's rope.scaling.original_context_length, else its context_length */
    float yarn_ext_factor; /* < 0: 1 under YaRN, else 0 (0 = interpolation alone) */
    float yarn_beta_fast;  /* < 0: 32 */
    float yarn_beta_slow;  /* < 0: 1 */
} mf_rope_params;

typedef struct {
    int32_t n_ctx;     /* KV cells (all sequences together); 0 = min(n_ctx_train, 4096) */
    int32_t n_threads; /* 0 = all online CPUs, at most 16 */
    int32_t n_ubatch;  /* largest forward; mf_decode splits bigger batches; 0 = 512 */
    uint32_t type_k;   /* K cache element type: MF_KV_TYPE_F16 (default, llama.cpp's), _F32 or _Q8_0 */
    uint32_t type_v;   /* V cache element type, the same choices (K and V may differ); anything else is refused */
    /* llama.cpp's attention rotation: a q8_0 K (with Q) and a q8_0 V are multiplied by a Walsh-Hadamard
     * matrix before the cache stores them (and the attention output by V's back), which lowers q8_0's
     * rounding error; on for head sizes that are multiples of 64, as in llama.cpp.  true turns it off
     * (also MINFER_ATTN_ROT_DISABLE=1, llama.cpp's LLAMA_ATTN_ROT_DISABLE).  f32/f16 caches never rotate. */
    bool no_attn_rot;
    /* An embeddings context (llama.cpp's embeddings = true): a forward's output rows are the last layer's
     * normalised hidden states, n_embd floats (mf_get_embeddings), and the LM head never runs.
     * mf_get_logits answers NULL and generators refuse the context.  See mf_embed. */
    bool embeddings;
    /* With embeddings: a reranker's context (llama.cpp's pooling rank).  The output rows go on through the
     * model's classifier head (cls.output), n_cls_out raw scores each; mf_embed pools them with
     * MF_POOLING_RANK only.  Refused for a model without the head. */
    bool classifier;
    mf_rope_params rope; /* the file's rope unless overridden (long contexts: YaRN) */
} mf_context_params;

/* The rope a context applies, resolved from the file and mf_context_params (what llama.cpp's context would
 * use for the same values). */
typedef struct {
    int32_t scaling;       /* MF_ROPE_SCALING_NONE, _LINEAR or _YARN */
    float freq_base, freq_scale;
    int32_t n_ctx_orig;    /* YaRN's original context */
    float ext_factor, attn_factor, beta_fast, beta_slow;
    float corr_dims[2];    /* the pairs where YaRN's ramp starts and ends */
} mf_rope_info;
void mf_context_rope_info(const mf_context *ctx, mf_rope_info *out);

mf_context_params mf_context_default_params(void);
int mf_context_new(mf_model *model, const mf_context_params *params, mf_context **out, mf_error *err);
void mf_context_free(mf_context *ctx);
int32_t mf_context_n_ctx(const mf_context *ctx);
const mf_model *mf_context_model(const mf_context *ctx);

/* KV sequence operations (seq < 0: every sequence; p0 < 0: from 0; p1 < 0: to the end). */
void mf_kv_clear_all(mf_context *ctx);
void mf_seq_rm(mf_context *ctx, mf_seq_id seq, mf_pos p0, mf_pos p1);
int mf_seq_cp(mf_context *ctx, mf_seq_id src, mf_seq_id dst, mf_pos p0, mf_pos p1, mf_error *err);
mf_pos mf_seq_pos_max(const mf_context *ctx, mf_seq_id seq); /* -1 when empty */
/* KV cells holding a token now (every sequence; a cell shared by several sequences counts once). */
int32_t mf_kv_cells_used(const mf_context *ctx);
/* Context shift (llama_memory_seq_add): the positions of seq in [p0, p1) move by delta and their K rows
 * are re-roped to the new positions (V rows untouched); a cell whose new position would be < 0 is
 * removed.  With mf_seq_rm: keep the first n_keep tokens, drop [n_keep, n_keep + n_discard), then
 * mf_seq_add(ctx, seq, n_keep + n_discard, -1, -n_discard) and decode on from pos_max + 1.  Refused with
 * nothing changed when seq < 0 or a moved cell would land on a position seq keeps outside the range. */
int mf_seq_add(mf_context *ctx, mf_seq_id seq, mf_pos p0, mf_pos p1, mf_pos delta, mf_error *err);

/* ---------------- batch (llama_batch shape: data, not topology) ---------------- */
typedef struct {
    int32_t n_tokens, capacity;
    mf_token *token;
    mf_pos *pos;
    mf_seq_id *seq_id;
    int8_t *logits; /* non-zero: this row wants logits */
} mf_batch;

int mf_batch_init(mf_batch *b, int32_t capacity, mf_error *err);
void mf_batch_free(mf_batch *b);
void mf_batch_clear(mf_batch *b);
/* Append one row; MF_E_RANGE when the batch is full. */
int mf_batch_add(mf_batch *b, mf_token token, mf_pos pos, mf_seq_id seq, bool want_logits);

/* Runs the batch through the model: each token's K/V goes to a free cell of its sequence, each row
 * attends to its own sequence's rows with pos <= its pos.  Logits are kept for rows that asked.
 * A refused batch (context full, a position already cached, a bad token id) changes nothing; logits that
 * come out NaN/Inf refuse the batch too (MF_E_FORMAT, naming the position). */
int mf_decode(mf_context *ctx, const mf_batch *batch, mf_error *err);
/* Logits of batch row i of the last mf_decode (i = -1: the last row that asked); NULL if row i did
 * not ask for logits.  n_vocab floats, valid until the next mf_decode. */
const float *mf_get_logits(const mf_context *ctx, int32_t i);

typedef struct {
    int32_t graph_builds, graph_reuses; /* graph cache misses / hits */
    size_t kv_bytes, graph_peak_bytes;
    double t_last_decode_s;
} mf_context_stats;
void mf_context_get_stats(const mf_context *ctx, mf_context_stats *st);

/* In an embeddings context: batch row i's hidden state (n_embd floats, after the output norm; i < 0: the
 * last row that asked), NULL when the row asked for no output or the context computes logits. */
const float *mf_get_embeddings(const mf_context *ctx, int32_t i);

/* ---------------- embeddings (docs/EMBEDDINGS.md) ---------------- */
/* Pooling of a sequence's hidden states into one vector, llama.cpp's enum values. */
typedef enum {
    MF_POOLING_MODEL = -1, /* the file's <arch>.pooling_type; a file without one: last (a causal model's only
                              row that has seen the whole text) */
    MF_POOLING_NONE = 0,   /* no pooling: refused by mf_embed (read each row with mf_get_embeddings) */
    MF_POOLING_MEAN = 1,
    MF_POOLING_CLS = 2, /* the first token's row */
    MF_POOLING_LAST = 3,
    /* A reranker's score (llama.cpp's rank, qwen3 only): the last token's row through the classifier head,
     * softmaxed over its labels - Qwen3-Reranker's [p(yes), p(no)].  Needs a classifier context. */
    MF_POOLING_RANK = 4,
} mf_pooling;

/* llama.cpp's pooling names: "model" (MF_POOLING_MODEL), "none", "mean", "cls", "last", "rank"; "unknown"
 * otherwise.  mf_pooling_parse takes the same names; false for any other. */
const char *mf_pooling_name(int32_t pooling);
bool mf_pooling_parse(const char *name, mf_pooling *out);
/* The pooling mf_embed applies for `asked` on this model (resolves MF_POOLING_MODEL); *from_file is set to
 * whether the file named it.  Refused (MF_E_UNSUPPORTED, naming the value and the way out): a value llama.cpp
 * does not define; rank on a model without a classifier head, or on a qwen2 file (llama.cpp would score its
 * first token, which a causal model's reranker does not read). */
int mf_embed_pooling(const mf_model *model, mf_pooling asked, mf_pooling *out, bool *from_file, mf_error *err);
/* Floats per pooled vector of this embeddings context: n_embd, or n_cls_out in a classifier context. */
int32_t mf_embed_size(const mf_context *ctx);
/* A reranker's input for one (query, document) pair, as llama-server builds it: the file's
 * tokenizer.chat_template.rerank with {query} and {document} replaced, tokenized with special tokens parsed
 * and none added; a file without that template gets [BOS] query [EOS] document [EOS], each special token
 * only where the tokenizer adds it.  *out malloc'd. */
int mf_rerank_tokenize(const mf_model *model, const char *query, size_t query_len, const char *doc, size_t doc_len,
                       mf_token **out, int32_t *n_out, mf_error *err);
/* One text's embedding: decodes tokens on sequence seq of an embeddings context (seq must be empty; ubatch
 * by ubatch, output rows only where the pooling reads them), pools the rows into out[0..mf_embed_size) (raw:
 * mean in double, then rounded to float; rank: the scores softmaxed) and removes the sequence's cells again,
 * on success or failure.
 * Tokenize with add_special = true: a model whose tokenizer appends EOS (add_eos_token) expects it. */
int mf_embed(mf_context *ctx, mf_seq_id seq, const mf_token *tokens, int32_t n_tokens, mf_pooling pooling,
             float *out, mf_error *err);
/* Pooling none (llama.cpp's): every token's hidden state, out[p * n_embd ..] for position p (n_tokens * n_embd
 * floats, raw), decoded as mf_embed decodes (seq empty, emptied again).  Not in a classifier context. */
int mf_embed_tokens(mf_context *ctx, mf_seq_id seq, const mf_token *tokens, int32_t n_tokens, float *out,
                    mf_error *err);
/* Several texts' embeddings, out[i * mf_embed_size ..] for text i (raw, as mf_embed): texts are packed whole into one
 * forward while they fit a ubatch and the free cells, text k of a pack on sequence seq0 + k (those must be
 * empty); a text longer than a ubatch runs alone through mf_embed.  Rows never depend on their batch, so every
 * vector is bitwise the one mf_embed gives the text alone - only the number of forwards changes.  On failure
 * (naming the text) the sequences are left empty; vectors of texts before it are written. */
int mf_embed_batch(mf_context *ctx, mf_seq_id seq0, const mf_token *const *tokens, const int32_t *n_tokens,
                   int32_t n_texts, mf_pooling pooling, float *out, mf_error *err);
/* Whether this model's vectors may be shortened to their first `dims` floats (Matryoshka truncation, OpenAI's
 * `dimensions`; the caller keeps v[0..dims) of the raw pooled vector and normalises that).  dims == n_embd is
 * always fine; a shorter one only where the model was trained for it: the Qwen3-Embedding family (a qwen3 file
 * whose own pooling_type is last, pooled last), or where the caller vouches for it (trained: --matryoshka).
 * Refused, naming the values and the way out: MF_E_RANGE outside 1..n_embd; MF_E_UNSUPPORTED for rank pooling
 * (a reranker's scores) and for a model not known to be trained for it (truncating another model's vectors
 * degrades them without saying so). */
int mf_embed_dims_check(const mf_model *model, mf_pooling pooling, int32_t dims, bool trained, mf_error *err);
/* llama.cpp's embd_normalize, in place: -1 none, 0 max-abs (scaled to the int16 range), 1 taxicab, 2
 * Euclidean (the OpenAI endpoint's), p > 2 the p-norm.  A zero vector stays zero. */
void mf_embed_normalize(float *v, int32_t n, int norm);

/* Builds (without running) the graph for n_tokens rows, all wanting logits, and writes it as JSON
 * (format "json") or DOT ("dot"). */
int mf_context_write_graph(mf_context *ctx, int32_t n_tokens, const char *format, FILE *f, mf_error *err);

/* ---------------- sampling ----------------
 * The chain runs in llama.cpp's default common-sampler order (common/common.h):
 *   logit_bias -> penalties -> DRY -> top_n_sigma -> top_k -> typical_p -> top_p -> min_p -> XTC
 *   -> infill -> temperature (dynamic with dynatemp_range > 0) -> dist (seeded draw)
 * temp <= 0 is greedy: the highest logit after bias, penalties and DRY wins; ties: lowest id. Unless
 * dynatemp_range > 0 (the range sets the temperature), the infill stage is on (it may end on EOT first) or XTC
 * is on (it may remove the best candidates first; the best of the rest wins, as llama.cpp's temperature stage
 * runs after XTC). mirostat 1 or 2 replaces top_n_sigma .. XTC and the draw (logit_bias -> penalties -> DRY ->
 * temperature -> Mirostat), as llama.cpp's Mirostat replaces its truncation samplers; unlike llama.cpp, whose
 * Mirostat chain has no penalty stage, the penalties and DRY still apply. Every stage follows llama.cpp's
 * src/llama-sampling.cpp; the draws differ from llama.cpp's (another RNG). */

/* One logit_bias entry: bias is added to the token's logit before every other stage (llama.cpp's logit_bias
 * sampler, first in its chain); -INFINITY bans the token (never sampled, under a grammar too).  Entries are
 * added in their order, so two for one token add up. */
typedef struct {
    mf_token token;
    float bias;
} mf_logit_bias;

typedef struct {
    float temp;             /* 0.8; <= 0 greedy */
    int32_t top_k;          /* 40; <= 0 off */
    float top_p;            /* 0.95; >= 1 off */
    float min_p;            /* 0.05; <= 0 off */
    float typ_p;            /* 1.0; >= 1 off */
    int32_t penalty_last_n; /* 64; 0 off, -1 = whole history */
    float penalty_repeat;   /* 1.0 = off */
    float penalty_freq;     /* 0.0 = off */
    float penalty_present;  /* 0.0 = off */
    uint64_t seed;          /* RNG seed (splitmix64-seeded xoshiro256**) */
    /* NULL/0: none.  Copied by mf_sampler_new, which refuses a token outside [0, n_vocab), a NaN or +inf
     * bias, and a list that bans every token. */
    const mf_logit_bias *logit_bias;
    int32_t n_logit_bias;
    /* The fields below are off when zero (a struct built with = {0} runs none of them); the defaults
     * (mf_sampler_default_params) are llama.cpp's, all off. */
    /* DRY ("don't repeat yourself", llama.cpp's dry sampler): a token that would extend a repeat of
     * n >= dry_allowed_length tokens already in the last dry_last_n loses dry_multiplier *
     * dry_base^(n - dry_allowed_length) from its logit.  A repeat does not reach back across a sequence
     * breaker (mf_dry_breakers_new; copied by mf_sampler_new), and a breaker token is never penalized. */
    float dry_multiplier;       /* 0 = off; >= 0 */
    float dry_base;             /* 1.75; >= 1 */
    int32_t dry_allowed_length; /* 2; >= 1 */
    int32_t dry_last_n;         /* -1 = the whole history, 0 = off */
    const mf_dry_breakers *dry_breakers; /* NULL: none */
    float top_n_sigma;       /* -1; <= 0 off: keeps logits >= max - top_n_sigma * their standard deviation */
    float xtc_probability;   /* 0 = off: with this chance per token ... */
    float xtc_threshold;     /* 0.1: ... drops every candidate of p >= threshold but the least likely of them
                                (none when fewer than two; > 0.5 off) */
    float dynatemp_range;    /* 0 = off: temperature in [temp - range, temp + range] by normalized entropy */
    float dynatemp_exponent; /* 1 */
    int32_t mirostat;        /* 0 off, 1 (Mirostat, m = 100) or 2 (Mirostat 2.0) */
    float mirostat_tau;      /* 5: target surprise (bits); mu starts at 2 * tau */
    float mirostat_eta;      /* 0.1: learning rate */
    int32_t min_keep;        /* 0: top_p, min_p, typical_p and XTC leave at least this many candidates */
    /* llama.cpp's infill stage (fill in the middle; llama.vim's `samplers`), after XTC and before the
     * temperature: ends the completion when the end-of-generation tokens are likely enough, else merges
     * tokens whose text is a prefix of another's and keeps the few that most of the probability backs (the
     * EOT token alone when none is left).  NULL = off; borrowed (mf_infill_vocab_new), it must outlive the
     * sampler.  It compares every pair of candidates, so it needs 1 <= top_k <= MF_INFILL_MAX_TOP_K, and it
     * is not combined with Mirostat (which replaces the truncation stages). */
    const mf_infill_vocab *infill;
} mf_sampler_params;

/* DRY's sequence breakers resolved against a model's vocabulary (llama.cpp's rule): a token whose text
 * contains a breaker is a breaker by itself; a token whose text ends in a breaker's beginning is one when
 * the tokens after it spell the rest.  Strings longer than 40 bytes are cut there, tails at 20 tokens;
 * empty strings are refused.  Building reads every token's text (a few ms for 152k tokens). */
int mf_dry_breakers_new(const mf_model *model, const char *const *seqs, int32_t n, mf_dry_breakers **out,
                        mf_error *err);
void mf_dry_breakers_free(mf_dry_breakers *b);
/* llama.cpp's default breakers (common/common.h): "\n", ":", "\"", "*"; returns their count. */
int32_t mf_dry_default_breakers(const char *const **strs);
int32_t mf_dry_breakers_count(const mf_dry_breakers *b); /* the (head token, tail) sequences it holds */

/* The infill stage's view of a model's vocabulary: each token's text (control tokens none) and which tokens
 * end generation (the model's EOG set; its EOT token, else its first EOG token, ends a completion that has no
 * text left).  Refused for a model without a tokenizer. */
enum { MF_INFILL_MAX_TOP_K = 1024 };
int mf_infill_vocab_new(const mf_model *model, mf_infill_vocab **out, mf_error *err);
void mf_infill_vocab_free(mf_infill_vocab *v);
int32_t mf_infill_vocab_size(const mf_infill_vocab *v); /* its tokens (0 for NULL) */

mf_sampler_params mf_sampler_default_params(void);
/* The checks mf_sampler_new makes (ranges, the logit_bias list), without building a sampler. */
int mf_sampler_params_check(const mf_sampler_params *p, int32_t n_vocab, mf_error *err);
int mf_sampler_new(const mf_sampler_params *p, int32_t n_vocab, mf_sampler **out, mf_error *err);
void mf_sampler_free(mf_sampler *s);
/* Picks a token from n_vocab logits (not modified). */
mf_token mf_sampler_sample(mf_sampler *s, const float *logits);
/* Records a token in the penalty history (prompt tokens and generated ones). */
void mf_sampler_accept(mf_sampler *s, mf_token token);
void mf_sampler_reset(mf_sampler *s); /* clears history, re-seeds */
/* The draw's RNG state (xoshiro256**, four words): a session file keeps it so a resumed run draws the
 * same tokens.  set refuses the all-zero state (xoshiro's one invalid state), changing nothing. */
void mf_sampler_get_rng(const mf_sampler *s, uint64_t state[4]);
int mf_sampler_set_rng(mf_sampler *s, const uint64_t state[4], mf_error *err);

/* ---------------- session files (docs/SESSION.md) ----------------
 * One sequence's state in a file: its KV rows and positions, the token history, the sampler's RNG state
 * and opaque application bytes (chat keeps the conversation's text there), tagged with the model's
 * fingerprint and the KV element types, checksummed.
 *
 * save: written to a temporary file in the same directory, then renamed over path, so a crash never
 * leaves a half file.  smp may be NULL (no RNG state kept); tokens/app may be NULL with a 0 count.
 *
 * load: the file is verified completely (structure, exact length, checksum, model, KV types, room in
 * the context, an empty target sequence) before anything changes; a refusal leaves the context, the
 * sampler and the outputs untouched and names the mismatch.  On success the sequence holds the file's
 * rows at the file's positions, *tokens (malloc'd, free() it; NULL when 0) the history, smp (if not
 * NULL and the file has one) the RNG state, *app (malloc'd, NUL-terminated beyond app_len; NULL when 0)
 * the application bytes.  tokens/n_tokens/app/app_len may be NULL when not wanted.  The sampler's
 * penalty history is not in the file: a caller that uses repeat penalties accepts the history again
 * (mf_sampler_reset, mf_sampler_accept each token, then the load sets the RNG). */
int mf_session_save(mf_context *ctx, mf_seq_id seq, const mf_token *tokens, int32_t n_tokens,
                    const mf_sampler *smp, const void *app, size_t app_len, const char *path, mf_error *err);
int mf_session_load(mf_context *ctx, mf_seq_id seq, const char *path, mf_token **tokens, int32_t *n_tokens,
                    mf_sampler *smp, void **app, size_t *app_len, mf_error *err);
/* Only the application bytes of a session file (structure and checksum verified, no model needed): what
 * a caller falls back on when mf_session_load refuses the file for another model or KV type. */
int mf_session_read_app(const char *path, void **app, size_t *app_len, mf_error *err);

/* ---------------- generation: one sequence's decode loop (the step API) ----------------
 * An mf_gen owns one sequence of a context: its token history, a sampler, a streaming detokenizer, stop
 * strings, the per-turn limits and an abort callback.  `run`, `chat`, the server and speculative decoding
 * all drive this one loop:
 *   mf_gen_feed(g, prompt)                  queue input tokens (a prompt, or a new turn of a conversation)
 *   while (!mf_gen_step(g, &out, &err) && out.status == MF_GEN_RUNNING) print(out.text, out.text_len);
 * Several sequences in one forward (a server): for each generator mf_gen_batch_add(g, &batch, ...), one
 * mf_decode(ctx, &batch), then mf_gen_batch_done(g, &out) for each of them.  Speculative decoding passes
 * drafted tokens to mf_gen_step_draft / mf_gen_batch_add: they are verified in the same forward (logits on
 * every drafted row), the accepted prefix is committed exactly as plain decoding would have committed it
 * (one sample per committed token from the same logits, so greedy and seeded sampling give bitwise the
 * plain output), and the rejected rows are removed from the KV cache. */
enum {
    MF_GEN_RUNNING = 0, /* the turn goes on */
    MF_GEN_EOG,         /* an end-of-generation token was sampled (it is in out.tokens, not in the text) */
    MF_GEN_LENGTH,      /* n_predict tokens were generated in this turn */
    MF_GEN_CONTEXT,     /* the sequence filled its n_ctx positions */
    MF_GEN_STOP,        /* a stop string appeared; it and anything after it are not in the text */
    MF_GEN_ABORT,       /* the abort callback returned true before a forward */
};
/* "running", "eog", "length", "context", "stop", "abort" */
const char *mf_gen_status_name(int32_t status);

enum { MF_GEN_MAX_POST_PROBS = 256 };

/* Called before every forward; true stops the turn (MF_GEN_ABORT).  Must be async-signal friendly in
 * spirit: read a flag, do not call back into the library. */
typedef bool (*mf_abort_fn)(void *user);

typedef struct {
    mf_sampler_params sampler; /* the generator's own sampler (mf_sampler_default_params()) */
    mf_seq_id seq;             /* the KV sequence it owns (0) */
    int32_t n_predict;         /* tokens to generate per turn; -1 (default) = until EOG or the context end */
    int32_t n_ctx;             /* positions the sequence may use; 0 (default) = the context's n_ctx */
    int32_t n_batch;           /* largest prompt chunk per forward; 0 (default) = 512 */
    bool ignore_eos;           /* keep going past end-of-generation tokens (they then count as text) */
    bool no_text;              /* ids only: no detokenizer (works with a model without tokenizer); stop
                                  strings are then refused */
    const char *const *stop;   /* stop strings (copied by mf_gen_new); empty strings are refused */
    int32_t n_stop;
    /* llama-server's code-completion limits, both ending the turn with MF_GEN_LENGTH (0 = off): n_indent ends
     * it at the first character of a line after the first that starts with fewer blanks (spaces, tabs; the
     * newline and blanks stay in the text); t_max_predict_ms, once that long has passed since the turn's first
     * generated token, ends it with the next token whose text holds a newline */
    int32_t n_indent;
    double t_max_predict_ms;
    /* 0 = off: per generated token, the sampler chain's probabilities after its last stage (llama-server's
     * post_sampling_probs; greedy: the drawn token alone, p 1), the drawn token's and at most this many
     * candidates' (<= MF_GEN_MAX_POST_PROBS), in mf_gen_out */
    int32_t post_probs;
    mf_abort_fn abort; /* may be NULL */
    void *abort_user;
} mf_gen_params;

typedef struct {
    int32_t status;         /* MF_GEN_*: RUNNING until the turn ends */
    const mf_token *tokens; /* tokens committed by this step (0 after a prompt chunk that was not the
                               last); valid until the next call on this generator */
    int32_t n_tokens;
    const char *text; /* text that became final in this step (a possible stop-string prefix is held
                         back until it is decided); valid until the next call */
    size_t text_len;
    int32_t n_drafted, n_accepted; /* drafted tokens verified in this step, and how many were committed */
    /* post_probs > 0 (else NULL): for committed token i, post_chosen[i] its probability after the chain, and
     * n_post[i] candidates post_ids / post_p[i * post_probs ...], likeliest first */
    const float *post_chosen;
    const int32_t *n_post;
    const mf_token *post_ids;
    const float *post_p;
} mf_gen_out;

typedef struct {
    int32_t n_tokens;           /* tokens of the sequence (cached + queued) */
    int32_t n_cached;           /* of them in the KV cache */
    int32_t turn_prefilled;     /* fed tokens decoded in this turn (a new turn's input, not generated) */
    int32_t turn_generated;     /* tokens sampled in this turn */
    int64_t n_prefilled, n_generated, n_drafted, n_accepted; /* totals over the generator's life */
    double t_prefill_s, t_decode_s; /* forward time of this turn: rows that were fed / only generated */
    double t_sample_s;              /* the rest of this turn's steps: sampling, detokenizing, stop strings */
} mf_gen_stats;

mf_gen_params mf_gen_default_params(void);
/* The generator borrows ctx (and its model) until mf_gen_free.  Refuses a bad parameter naming it. */
int mf_gen_new(mf_context *ctx, const mf_gen_params *params, mf_gen **out, mf_error *err);
void mf_gen_free(mf_gen *g);
/* Queues tokens after the sequence (they enter the sampler's penalty history) and starts a new turn:
 * per-turn counters, status and text state reset.  Refused (nothing changes) when the sequence would
 * exceed its n_ctx positions. */
int mf_gen_feed(mf_gen *g, const mf_token *ids, int32_t n, mf_error *err);
/* One forward over the queued tokens (a prompt chunk, or the last sampled token), then sampling.  With
 * status != RUNNING on entry it does nothing.  A failed forward returns its error; the generator stays
 * usable (what was queued stays queued). */
int mf_gen_step(mf_gen *g, mf_gen_out *out, mf_error *err);
/* mf_gen_step with drafted continuations of the sequence verified in the same forward. */
int mf_gen_step_draft(mf_gen *g, const mf_token *draft, int32_t n_draft, mf_gen_out *out, mf_error *err);
/* Multi-sequence: append this generator's next rows (its queued tokens, at most n_batch and what fits
 * in b, plus the drafts when every queued token fits) to the caller's batch; returns the rows added
 * (0 when the turn has ended or the abort callback fired) or a negative MF_E_*.  After mf_decode of that
 * batch call mf_gen_batch_done for every generator that was offered the batch (also those that added
 * 0 rows); after a failed mf_decode call mf_gen_batch_cancel instead. */
int32_t mf_gen_batch_add(mf_gen *g, mf_batch *b, const mf_token *draft, int32_t n_draft, mf_error *err);
int mf_gen_batch_done(mf_gen *g, mf_gen_out *out, mf_error *err);
/* Optional, between mf_decode and the mf_gen_batch_done calls: draws the next token of every listed generator
 * that will sample in this step, spread over the context's threads, one generator per thread at a time
 * (a sampler with top_k 0 sorts all n_vocab candidates: milliseconds each).  mf_gen_batch_done then commits
 * the drawn token.  The output is the same bits as without it (each generator's own sampler and RNG; a draw
 * that mf_gen_batch_cancel or a new mf_gen_batch_add discards puts its RNG back).  The generators must share
 * one context to be drawn together; others are left to mf_gen_batch_done.  NULL entries are skipped. */
void mf_gen_batch_sample(mf_gen *const *gens, int32_t n);
void mf_gen_batch_cancel(mf_gen *g);
/* Keeps the first n tokens of the sequence and removes the rest from the KV cache (a re-rendered
 * conversation that differs from what is cached). */
int mf_gen_truncate(mf_gen *g, int32_t n, mf_error *err);
/* Context shift: removes positions [p0, p1) (cached ones only) and moves the later tokens down by
 * p1 - p0 (their K rows re-roped by mf_seq_add). */
int mf_gen_drop(mf_gen *g, mf_pos p0, mf_pos p1, mf_error *err);
/* After a session load (mf_session_load into the generator's sequence): the sequence holds ids, the first
 * n_cached of them in the KV cache, the rest queued.  The penalty history takes the ids again; the
 * sampler's RNG state (which the load set) is kept.  Needs an empty generator; the turn counts as ended. */
int mf_gen_restore(mf_gen *g, const mf_token *ids, int32_t n, int32_t n_cached, mf_error *err);
/* The sequence's tokens (cached, then queued); valid until the next call that changes them. */
const mf_token *mf_gen_tokens(const mf_gen *g, int32_t *n);
/* The stop string that ended the turn (status MF_GEN_STOP; the generator's copy), else NULL. */
const char *mf_gen_stop_word(const mf_gen *g);
/* All the text the current turn produced so far (what the steps returned, concatenated). */
const char *mf_gen_turn_text(const mf_gen *g, size_t *len);
int32_t mf_gen_status(const mf_gen *g);
int32_t mf_gen_n_ctx(const mf_gen *g); /* the positions the sequence may use */
/* A fresh generator adopts the tokens its sequence already holds at positions 0..n-1 (a prefix kept from
 * an earlier request, or shared from another sequence with mf_seq_cp): they enter the history and the
 * sampler's penalty history without a forward.  Refused unless the generator holds nothing yet and the
 * sequence's last position is exactly n - 1. */
int mf_gen_attach(mf_gen *g, const mf_token *ids, int32_t n, mf_error *err);
mf_sampler *mf_gen_sampler(mf_gen *g); /* its sampler (e.g. to save its state) */
void mf_gen_get_stats(const mf_gen *g, mf_gen_stats *st);

/* ---------------- constrained decoding (docs/GRAMMAR.md) ----------------
 * A grammar limits what a generator samples: each step the sampler chain runs over the tokens whose text
 * continues a sentence of the grammar (as if every other logit were -inf: llama.cpp's grammar-first
 * order), and an end-of-generation token is a candidate only where the text so far is a whole sentence;
 * control tokens never are.  Grammars are GBNF (llama.cpp's dialect); JSON Schema is compiled to one. */
typedef struct mf_grammar mf_grammar;
/* GBNF text (len bytes), start rule `root`.  A syntax error names line and column; an undefined rule,
 * a missing root and left recursion are refused too (MF_E_INVAL). */
int mf_grammar_new(const char *gbnf, size_t len, mf_grammar **out, mf_error *err);
/* A JSON Schema (the text of one JSON object): the grammar of the JSON texts it allows, with bounded
 * whitespace.  A keyword this compiler does not implement is refused (MF_E_UNSUPPORTED, naming it and
 * its path), never ignored: docs/GRAMMAR.md lists the supported ones. */
int mf_grammar_from_json_schema(const char *schema, size_t len, mf_grammar **out, mf_error *err);
void mf_grammar_free(mf_grammar *g);
/* From now on every turn of the generator is one sentence of gr (each mf_gen_feed starts it again); NULL
 * removes it.  open/close (both NULL, or both set): a free block a reasoning model may begin with, such as
 * "<think>" and "</think>": a turn whose first token is `open` (it must be one token) is free until `close`
 * has been generated, and the grammar holds after it; a turn that starts with anything else is held from
 * its first token.  gr must outlive the generator or the next mf_gen_set_grammar.  Refused with
 * ignore_eos (end-of-generation ends a sentence) and for a model without a tokenizer. */
int mf_gen_set_grammar(mf_gen *g, const mf_grammar *gr, const char *open, const char *close, mf_error *err);

/* ---------------- speculative decoding: a draft model ----------------
 * A small model with the target's vocabulary proposes the next tokens greedily; the target verifies them
 * in one forward (mf_gen_step_draft) and commits the prefix its own sampling agrees with.  Greedy output
 * is bitwise the plain output; with temperature > 0 the committed tokens keep the target's distribution
 * exactly (the Leviathan/Chen rejection rule for a one-hot draft; see docs/API.md) and seeded output is
 * bitwise the plain seeded output too.  The draft owns its own context and KV cache (one sequence per
 * target sequence it drafts for) and runs on the target context's threadpool. */
typedef struct mf_draft mf_draft;

#define MF_DRAFT_MAX 256 /* the largest draft_max */

typedef struct {
    int32_t draft_max; /* tokens drafted per round at most: 16 (1..MF_DRAFT_MAX) */
    int32_t draft_min; /* a proposal shorter than this is dropped (no draft this round): 0 */
    float p_min;       /* drafting stops before a token whose draft probability (llama.cpp's rule: its
                          softmax share among the draft's 10 highest logits, at temperature 1, whatever
                          the target samples with) is below it: 0.75 */
    int32_t n_seq;     /* sequences drafted for (server slots), ids 0..n_seq-1: 1 */
    int32_t n_ctx;     /* the draft's KV cells, shared evenly by the sequences; 0 = the target's n_ctx */
    uint32_t type_k, type_v; /* the draft's KV element types (MF_KV_TYPE_F16) */
} mf_draft_params;

typedef struct {
    int64_t n_proposals, n_drafted; /* propose calls that drafted, tokens proposed */
    int64_t n_prefilled;            /* history tokens the draft decoded to catch up with the target */
} mf_draft_stats;

mf_draft_params mf_draft_default_params(void);
/* 0 when the two models share a vocabulary (size, every token's text, BOS/EOS/EOT/padding ids and the
 * end-of-generation list); else MF_E_INVAL naming the first difference. */
int mf_draft_check_vocab(const mf_model *target, const mf_model *draft, mf_error *err);
/* The draft borrows draft_model and target (a context of the target model, whose threadpool it uses)
 * until mf_draft_free.  Refuses a vocabulary that differs (mf_draft_check_vocab) or a bad parameter. */
int mf_draft_new(mf_model *draft_model, mf_context *target, const mf_draft_params *params, mf_draft **out,
                 mf_error *err);
void mf_draft_free(mf_draft *d);
/* Proposes up to min(max, draft_max) tokens continuing hist[0..n_hist) (the target sequence's tokens):
 * the draft's cache for seq keeps its longest common prefix with hist (mf_seq_rm of the rest), the
 * missing tail is decoded, then greedy picks follow until one's probability is below p_min.  *n_out = 0
 * when fewer than draft_min came out, or the draft's share of cells is full.  out holds max tokens. */
int mf_draft_propose(mf_draft *d, mf_seq_id seq, const mf_token *hist, int32_t n_hist, int32_t max, mf_token *out,
                     int32_t *n_out, mf_error *err);
/* Forgets what the draft's cache holds for seq (a server slot given to another request). */
void mf_draft_seq_clear(mf_draft *d, mf_seq_id seq);
const mf_draft_params *mf_draft_get_params(const mf_draft *d);
void mf_draft_get_stats(const mf_draft *d, mf_draft_stats *st);
/* mf_gen_step with a draft: on a decode step (the history is cached but the last sampled token) the draft
 * proposes for the generator's sequence and mf_gen_step_draft verifies; any other step (a prompt chunk)
 * is a plain mf_gen_step.  d NULL: plain.  Stop strings, EOS, n_predict, the context end and the abort
 * callback act exactly as in mf_gen_step. */
int mf_gen_step_spec(mf_gen *g, mf_draft *d, mf_gen_out *out, mf_error *err);

/* ---------------- conversation: multi-turn chat over one generator ----------------
 * mf_conv keeps the messages of a chat and feeds its generator only what each turn adds: the user's
 * message is rendered with the model's template (mf_chat_apply_with), the text the cache already holds is
 * cut off, and the rest is queued on the generator (mf_gen_feed); the caller then drives mf_gen_step
 * until the reply ends, and the next mf_conv_user takes the reply from the generator's turn text.  When a
 * turn would not fit, the oldest whole turns after the system prompt are dropped by context shift
 * (mf_gen_drop).  If the re-rendered conversation does not start with what is cached (a template that
 * rewrites earlier turns, such as Qwen3 dropping old thinking), the cache is cut at the first differing
 * token and re-prefilled from there. */
typedef struct mf_conv mf_conv;

typedef struct {
    const char *system;  /* system message, or NULL (copied) */
    mf_chat_params chat; /* template_name, enable_thinking (add_generation_prompt is ignored) */
    int32_t n_reserve;   /* positions a turn leaves free for its reply; 0 = a quarter of the context */
} mf_conv_params;

typedef struct {
    int32_t n_new;            /* tokens queued by this turn (what the next steps prefill) */
    int32_t n_reused;         /* tokens of the sequence kept from before (cached or queued) */
    int32_t n_dropped_turns;  /* context shift: earlier user turns (with their replies) dropped */
    int32_t n_dropped_tokens; /* and their tokens */
    bool rerendered;          /* the cache was cut where the re-rendered conversation differed */
} mf_conv_turn;

mf_conv_params mf_conv_default_params(void);
/* The conversation borrows g (a generator over an empty sequence) until mf_conv_free. */
int mf_conv_new(mf_gen *g, const mf_conv_params *params, mf_conv **out, mf_error *err);
void mf_conv_free(mf_conv *c);
/* Adds a user message (after recording the generator's last reply, if any) and queues its tokens.
 * Refused, with nothing changed, when the message alone does not fit beside the system prompt. */
int mf_conv_user(mf_conv *c, const char *text, mf_conv_turn *info, mf_error *err);
int32_t mf_conv_n_turns(const mf_conv *c); /* user turns currently in the conversation */
/* Session files (mf_session_save / mf_session_load): save writes the generator's sequence (KV rows,
 * tokens, sampler RNG) and the conversation (messages, the last reply, what the cache stands for, as
 * JSON application bytes).  load, into a new conversation over an empty generator, resumes it: nothing
 * is prefilled and the next turn continues exactly as the saved run would have.  A file written for
 * another model, KV type or a larger context than this one is not loaded into the cache: its
 * conversation text is taken instead (*rerendered = true, *reason says why) and the next turn prefills
 * it re-rendered.  A missing file is MF_E_NOTFOUND (nothing changed); a damaged one is refused. */
int mf_conv_save(mf_conv *c, const char *path, mf_error *err);
int mf_conv_load(mf_conv *c, const char *path, bool *rerendered, char *reason, size_t reason_cap, mf_error *err);

#ifdef __cplusplus
}
#endif

#endif
