/* engine internals: the context (model + KV store + graph cache + CPU backend). */
#ifndef MF_ENGINE_IMPL_H
#define MF_ENGINE_IMPL_H

#include "minfer.h"

#include "backend/cpu/cpu.h"
#include "backend/sched.h"
#include "graph/graph.h"
#include "kv/kv.h"
#include "model/model.h"

#define MF_GRAPH_CACHE_CAP 8

struct mf_context {
    mf_model *model;
    mf_cpu *cpu;
    bool cpu_borrowed; /* another context's pool (a draft model's context shares its target's) */
    mf_sched *sched; /* backend assignment + splits; the cpu pool above is lent to it */
    mf_kv *kv;
    mf_graph_cache *cache;
    int32_t n_ctx, n_ubatch, n_threads;
    uint32_t type_k, type_v; /* KV element types */
    int32_t rot_k, rot_v;    /* attention rotation sizes (core/hadamard.h), 0 = off: only quantized types rotate */
    mf_rope rope;            /* the rope every forward applies (mf_model_rope) ... */
    mf_rope_info rope_info;  /* ... and how it was resolved */
    void **k_ptr, **v_ptr; /* per-layer KV regions */
    /* logits of the last decode: rows in batch order of the rows that asked; in an embeddings context
     * (mf_context_params.embeddings) the rows are n_embd hidden states instead */
    bool embeddings;
    bool classifier;   /* embeddings through the classifier head: n_cls_out scores per row */
    int32_t out_width; /* floats per output row: n_vocab, n_embd for embeddings, n_cls_out for a classifier */
    float *logits;
    size_t logits_cap; /* floats */
    int32_t *out_row;  /* per batch row: index into logits or -1 */
    int32_t out_row_cap, n_batch_last, last_out;
    int32_t *cells; /* scratch: resolved cells of the whole batch */
    int32_t cells_cap;
    int32_t builds, reuses;
    size_t peak_bytes;
    double t_last;
};

/* mf_context_new, but with share != NULL the new context runs on share's CPU threadpool (and thread
 * count) instead of starting its own: a draft model and its target never compute at the same time, so
 * one pool serves both without oversubscribing the cores.  share must outlive the new context. */
int mf_context_new_on(mf_model *model, const mf_context_params *params, mf_context *share, mf_context **out,
                      mf_error *err);

/* Build (not allocate) the graph for n_tokens rows with n_outputs output rows; *io gets the ids of its
 * inputs and logits (io may be NULL). */
int mf_engine_build_graph(mf_context *ctx, int32_t n_tokens, int32_t n_outputs, mf_graph **out,
                          mf_graph_io *io, mf_error *err);

/* Tests: run the sampler chain up to (not including) the draw; the surviving candidates in the order
 * the chain left them, with their softmax probabilities.  Returns the count (<= cap). */
int32_t mf_sampler_candidates(mf_sampler *s, const float *logits, int32_t *ids, float *probs, int32_t cap);
/* A token filter (a grammar): allow(user, id) is true when the token may come next; maybe (may be NULL)
 * writes, in ascending order, ids that include every allowed one (a cheap superset, so a full scan asks
 * allow() about those only) and returns their count. */
typedef struct {
    bool (*allow)(void *user, int32_t id);
    int32_t (*maybe)(void *user, int32_t *ids);
    void *user;
} mf_token_filter;
/* mf_sampler_sample over the tokens the filter allows only, as if every other logit were -inf; asks about
 * as few tokens as the chain needs.  -1 when it allows none. */
mf_token mf_sampler_sample_allowed(mf_sampler *s, const float *logits, const mf_token_filter *f);
/* constrain.c: a generator's grammar state (mf_gen_set_grammar).  allow and maybe are an
 * mf_token_filter's over an mf_constraint; commit moves the grammar past a committed token (or watches for the free block's close). */
typedef struct mf_constraint mf_constraint;
int mf_constraint_new(const mf_model *model, const mf_grammar *g, const char *open, const char *close,
                      mf_constraint **out, mf_error *err);
void mf_constraint_free(mf_constraint *c);
void mf_constraint_reset(mf_constraint *c); /* a new turn: the grammar's start, the free block not opened */
bool mf_constraint_active(const mf_constraint *c);
bool mf_constraint_allow(void *c, int32_t id);
int32_t mf_constraint_maybe(void *c, int32_t *ids);
int mf_constraint_commit(mf_constraint *c, int32_t id, mf_error *err);
/* dry.c: a sampler's DRY stage.  step clears the last step's penalties and computes this one's: *pen (n_vocab
 * floats, 0 for every token it spares) or NULL when it penalizes none; returns how many it penalizes. */
typedef struct mf_dry mf_dry;
bool mf_dry_on(const mf_sampler_params *p);
int mf_dry_new(const mf_sampler_params *p, int32_t n_vocab, mf_dry **out, mf_error *err);
void mf_dry_free(mf_dry *d);
void mf_dry_reset(mf_dry *d);
void mf_dry_accept(mf_dry *d, mf_token t);
int32_t mf_dry_step(mf_dry *d, const float **pen);
/* Tests: sequence i of a breaker set (0 <= i < mf_dry_breakers_count): its head token, and its tail. */
mf_token mf_dry_breakers_at(const mf_dry_breakers *b, int32_t i, const mf_token **tail, int32_t *n_tail);
/* Tests: breakers given as token sequences (toks holds them one after another, lens[i] tokens each). */
int mf_dry_breakers_from_tokens(const mf_token *toks, const int32_t *lens, int32_t n, mf_dry_breakers **out,
                                mf_error *err);
/* A sampler candidate: token, logit (after the stages so far), probability (valid after a softmax). */
typedef struct {
    int32_t id;
    float logit, p;
} mf_cand;
/* infill.c: the infill stage over c[0..n), sorted by logit with p softmax'd; n_possible of them have a finite
 * logit.  Returns how many candidates it leaves (compacted in place; c[0] may become the EOT token).
 * eot_banned: the EOT token may not be drawn (a logit_bias ban, a grammar), so the stage does not force it. */
int32_t mf_infill_apply(const mf_infill_vocab *v, mf_cand *c, int32_t n, int32_t n_possible, bool eot_banned);
mf_token mf_infill_vocab_eot(const mf_infill_vocab *v);
/* Tests: a vocabulary given as texts, end-of-generation flags and the EOT id. */
int mf_infill_vocab_from_pieces(const char *const *pieces, const bool *eog, int32_t n, mf_token eot,
                                mf_infill_vocab **out, mf_error *err);
/* What one sample changes in a sampler besides its history: the RNG and Mirostat's mu.  A generator that
 * draws ahead and drops the draw puts it back (gen.c). */
typedef struct {
    uint64_t rng[4];
    float mu;
} mf_sampler_state;
void mf_sampler_state_get(const mf_sampler *s, mf_sampler_state *st);
void mf_sampler_state_set(mf_sampler *s, const mf_sampler_state *st);
/* Mirostat's mu, for a session file (mf_sampler_mu: false when the sampler runs no Mirostat). */
bool mf_sampler_mu(const mf_sampler *s, float *mu);
void mf_sampler_set_mu(mf_sampler *s, float mu);
/* After a sample that drew `chosen`: the chain's probabilities after its last stage (llama-server's
 * post_sampling_probs), the drawn token's in *p_chosen and up to cap candidates, likeliest first (greedy: the one
 * token, p 1).  Returns how many it wrote. */
int32_t mf_sampler_last_probs(const mf_sampler *s, mf_token chosen, int32_t cap, mf_token *ids, float *p,
                              float *p_chosen);
/* Tests: the sampler as it was before its two shortcuts, the reference they are checked against: every
 * candidate built before the penalty stage and top_k (not the k best read straight from the logits), and
 * every sort by qsort with cand_cmp (not the radix sort). */
void mf_sampler_full_path(mf_sampler *s, bool on);

/* The model a generator's context runs (the conversation renders with it). */
const mf_model *mf_gen_model_of(const mf_gen *g);
mf_context *mf_gen_context_of(const mf_gen *g);
mf_seq_id mf_gen_seq_of(const mf_gen *g);
void mf_gen_add_decode_time(mf_gen *g, double s); /* the draft's share of a decode step */
/* Tokens the turn may still generate (n_predict; INT32_MAX without a limit): a step commits at most
 * n_draft + 1, so drafting more than this - 1 only adds rows that are dropped. */
int32_t mf_gen_turn_left(const mf_gen *g);
/* The draft's greedy pick among n logits and its confidence (llama.cpp's: the pick's softmax share among
 * the 10 highest logits, at temperature 1); draft.c, exposed for tests. */
mf_token mf_draft_pick(const float *logits, int32_t n, float *prob);
/* The abort callback's answer now (false without one): no draft is made for a turn about to stop. */
bool mf_gen_abort_asked(const mf_gen *g);

#endif
