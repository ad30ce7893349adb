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

/* ---------------- model ---------------- */
typedef void (*mf_progress_fn)(float progress, void *user); /* 0.0 .. 1.0 */

typedef struct {
    mf_progress_fn progress; /* may be NULL */
    void *progress_user;
    bool no_repack; /* keep every weight in the file's layout (also MINFER_REPACK=0) */
} mf_model_params;

mf_model_params mf_model_default_params(void);
/* Maps the GGUF file; weights are used in place, except the Q4_0/Q5_0/Q8_0/Q4_K/Q6_K matrices the CPU
 * matmul reads, which are copied once into a row-interleaved layout (their file pages are then released,
 * so resident memory does not grow; see docs/PERFORMANCE.md) unless no_repack.  Refuses an unsupported architecture
 * naming it and the supported ones (qwen2, qwen3). */
int mf_model_load(const char *path, const mf_model_params *params, mf_model **out, mf_error *err);
void mf_model_free(mf_model *model);

typedef struct {
    const char *arch; /* "qwen2" | "qwen3" */
    int32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    float rope_freq_base, rms_eps;
    bool tied_output, qkv_bias, qk_norm;
    mf_token bos, eos; /* -1 when the model names none */
    int32_t n_eog;     /* end-of-generation ids (eos, eot, <|im_end|>, <|endoftext|>, ...) */
    const mf_token *eog;
    int32_t n_repacked;    /* weight matrices copied into an x8 layout at load (0 with no_repack) */
    size_t repacked_bytes; /* their size */
} mf_model_info;

void mf_model_get_info(const mf_model *model, mf_model_info *info);
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
 * "assistant".  *out malloc'd. */
typedef struct {
    const char *role;
    const char *content;
} mf_chat_message;

typedef struct {
    bool add_generation_prompt; /* append the assistant header (default true) */
    const char *template_name;  /* NULL or "auto": the model's; or "chatml", "qwen2.5", "qwen3" ("" refused) */
    int enable_thinking;        /* Qwen3's switch: -1 = template default, 0 = off, 1 = on (refused with a
                                   template that has no switch) */
} mf_chat_params;

mf_chat_params mf_chat_default_params(void);
int mf_chat_apply_with(const mf_model *model, const mf_chat_message *msgs, int32_t n_msgs,
                       const mf_chat_params *params, char **out, mf_error *err);
/* mf_chat_apply_with with the defaults and the given add_generation_prompt. */
int mf_chat_apply(const mf_model *model, const mf_chat_message *msgs, int32_t n_msgs,
                  bool add_generation_prompt, char **out, mf_error *err);

/* ---------------- context ---------------- */
typedef struct {
    int32_t n_ctx;     /* KV cells (all sequences together); 0 = min(n_ctx_train, 4096) */
    int32_t n_threads; /* 0 = all online CPUs, at most 16 */
    int32_t n_ubatch;  /* largest forward; mf_decode splits bigger batches; 0 = 512 */
    uint32_t type_k;   /* K cache element type: MF_KV_TYPE_F16 (default, llama.cpp's), _F32 or _Q8_0 */
    uint32_t type_v;   /* V cache element type, the same choices (K and V may differ); anything else is refused */
} mf_context_params;

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

/* Builds (without running) the graph for n_tokens rows, all wanting logits, and writes it as JSON
 * (format "json") or DOT ("dot"). */
int mf_context_write_graph(mf_context *ctx, int32_t n_tokens, const char *format, FILE *f, mf_error *err);

/* ---------------- sampling ----------------
 * The chain runs in llama.cpp's default common-sampler order:
 *   penalties -> top_k -> typical_p -> top_p -> min_p -> temperature -> dist (seeded draw)
 * temp <= 0 is greedy (the highest logit after penalties wins; ties: lowest id). */
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
} mf_sampler_params;

mf_sampler_params mf_sampler_default_params(void);
int mf_sampler_new(const mf_sampler_params *p, int32_t n_vocab, mf_sampler **out, mf_error *err);
void mf_sampler_free(mf_sampler *s);
/* Picks a token from n_vocab logits (not modified). */
mf_token mf_sampler_sample(mf_sampler *s, const float *logits);
/* Records a token in the penalty history (prompt tokens and generated ones). */
void mf_sampler_accept(mf_sampler *s, mf_token token);
void mf_sampler_reset(mf_sampler *s); /* clears history, re-seeds */

#ifdef __cplusplus
}
#endif

#endif
