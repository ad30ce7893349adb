/* The generation loop of one sequence (the step API, include/minfer.h): queued tokens -> forward ->
 * sample -> commit (sampler history, detokenizer, stop strings, limits).  run, chat, the server and
 * speculative decoding drive this one file, so a stop string or a limit behaves the same everywhere. */
#include "engine/engine_impl.h"

#include "core/core.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct mf_gen {
    mf_context *ctx;
    const mf_model *model;
    mf_gen_params p;
    char **stop; /* copies of the stop strings */
    size_t stop_max;
    mf_sampler *smp;
    mf_detok_stream *ds;
    mf_token *toks; /* the sequence: [0, n_cached) in the KV cache, [n_cached, n_tok) queued */
    int32_t n_tok, n_cached, cap, limit;
    bool gen_queued; /* toks[n_cached] is the last sampled token (not fed input) */
    int32_t status;
    bool aborted; /* the abort callback fired in batch_add; batch_done reports it */
    /* the last batch_add: where our rows sit in the caller's batch */
    int32_t row0, n_rows, n_in, n_draft;
    /* mf_gen_batch_sample: batch_done's first sample, drawn ahead on a pool thread, and the RNG before it
     * (put back if the draw is never committed, so sampling ahead changes nothing) */
    bool pre;
    mf_token pre_tok;
    double pre_s;
    mf_sampler_state pre_state; /* the sampler's RNG and mu before the draw ahead */
    mf_token *draft;
    int32_t draft_cap;
    mf_batch batch; /* mf_gen_step's own */
    double t0;
    /* text: hold = decoded but undecided (a possible stop-string start); out = final text of this step */
    char *hold, *out, *turn;
    size_t n_hold, n_out, n_turn, cap_hold, cap_out, cap_turn;
    mf_token *out_tok;
    int32_t n_out_tok, cap_out_tok;
    mf_constraint *con; /* mf_gen_set_grammar's, or NULL */
    mf_gen_stats st;
    /* n_indent: where the emitted text is (0 the turn's first line, unchecked; 1 a later line's leading blanks,
     * line_indent of them so far; 2 past them), and cut: a line fell short, nothing more is emitted */
    int line_state;
    int32_t line_indent;
    bool cut;
    double t_first; /* the turn's first generated token (t_max_predict_ms counts from it) */
    int32_t stop_hit; /* the stop string that ended the turn */
    /* post_probs: the last sample's chain probabilities (post_last*), and per committed token of this step */
    mf_token *post_last_ids;
    float *post_last_p, post_last_chosen;
    int32_t post_last_n;
    mf_token *post_ids;
    float *post_p, *post_chosen;
    int32_t *post_n, cap_post;
};

/* what an empty token list points at: never NULL, so a caller may memcpy 0 tokens from it */
static const mf_token k_none[1] = {0};

const char *mf_gen_status_name(int32_t s) {
    static const char *names[] = {"running", "eog", "length", "context", "stop", "abort"};
    return s >= 0 && s <= MF_GEN_ABORT ? names[s] : "unknown";
}

mf_gen_params mf_gen_default_params(void) {
    return (mf_gen_params){.sampler = mf_sampler_default_params(), .n_predict = -1};
}

static int grow(void **p, size_t *cap, size_t need, size_t elem, mf_error *err) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q) return mf_err(err, MF_E_NOMEM, "generation: out of memory for %zu elements", nc);
    *p = q;
    *cap = nc;
    return 0;
}

static int grow_i32(mf_token **p, int32_t *cap, int32_t need, mf_error *err) {
    size_t c = (size_t)*cap;
    int rc = grow((void **)p, &c, (size_t)need, sizeof **p, err);
    *cap = (int32_t)c;
    return rc;
}

static int cat(char **buf, size_t *n, size_t *cap, const char *s, size_t len, mf_error *err) {
    int rc = grow((void **)buf, cap, *n + len + 1, 1, err);
    if (rc) return rc;
    memcpy(*buf + *n, s, len);
    *n += len;
    (*buf)[*n] = 0;
    return 0;
}

/* n_indent: the length of s to emit; sets cut at the first character of a line (after the turn's first)
 * that starts with fewer than n_indent blanks (llama-server keeps that line's newline and blanks). */
static size_t indent_cut(mf_gen *g, const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) {
        const char c = s[i];
        if (c == '\n') {
            g->line_state = 1, g->line_indent = 0;
        } else if (g->line_state == 1) {
            if (c == ' ' || c == '\t') {
                g->line_indent++;
            } else if (g->line_indent < g->p.n_indent) {
                g->cut = true;
                return i;
            } else {
                g->line_state = 2;
            }
        }
    }
    return len;
}

static int emit(mf_gen *g, const char *s, size_t len, mf_error *err) {
    if (g->cut) return 0;
    if (g->p.n_indent > 0) len = indent_cut(g, s, len);
    int rc = cat(&g->out, &g->n_out, &g->cap_out, s, len, err);
    return rc ? rc : cat(&g->turn, &g->n_turn, &g->cap_turn, s, len, err);
}

void mf_gen_free(mf_gen *g) {
    if (!g) return;
    for (int32_t i = 0; i < g->p.n_stop; i++) free(g->stop[i]);
    free(g->stop);
    mf_sampler_free(g->smp);
    mf_detok_stream_free(g->ds);
    mf_batch_free(&g->batch);
    free(g->toks);
    free(g->draft);
    free(g->hold);
    free(g->out);
    free(g->turn);
    free(g->out_tok);
    free(g->post_last_ids);
    free(g->post_last_p);
    free(g->post_ids);
    free(g->post_p);
    free(g->post_chosen);
    free(g->post_n);
    mf_constraint_free(g->con);
    free(g);
}

int mf_gen_new(mf_context *ctx, const mf_gen_params *params, mf_gen **out, mf_error *err) {
    *out = NULL;
    mf_gen_params p = params ? *params : mf_gen_default_params();
    if (p.seq < 0) return mf_err(err, MF_E_INVAL, "generation: sequence id must be >= 0, got %d", p.seq);
    if (ctx->embeddings)
        return mf_err(err, MF_E_INVAL,
                      "generation: the context computes embeddings (embeddings = true) and has no logits; make "
                      "another context without it");
    if (p.n_predict < -1)
        return mf_err(err, MF_E_INVAL, "generation: n_predict must be >= -1 (-1 = no limit), got %d", p.n_predict);
    int32_t nc = mf_context_n_ctx(ctx);
    if (p.n_ctx < 0 || p.n_ctx > nc)
        return mf_err(err, MF_E_INVAL, "generation: n_ctx must be in 0..%d (the context's size; 0 = all), got %d", nc,
                      p.n_ctx);
    if (p.n_batch < 0) return mf_err(err, MF_E_INVAL, "generation: n_batch must be >= 0 (0 = 512), got %d", p.n_batch);
    if (p.n_stop < 0 || (p.n_stop > 0 && !p.stop))
        return mf_err(err, MF_E_INVAL, "generation: %d stop strings but no array", p.n_stop);
    if (p.n_stop > 0 && p.no_text)
        return mf_err(err, MF_E_INVAL,
                      "generation: stop strings need the detokenizer, which no_text turns off (drop the stop "
                      "strings or keep the text)");
    if (p.post_probs < 0 || p.post_probs > MF_GEN_MAX_POST_PROBS)
        return mf_err(err, MF_E_INVAL, "generation: post_probs must be in 0..%d, got %d", MF_GEN_MAX_POST_PROBS,
                      p.post_probs);
    if (p.n_indent < 0 || !(p.t_max_predict_ms >= 0))
        return mf_err(err, MF_E_INVAL, "generation: n_indent %d and t_max_predict_ms %g must be >= 0 (0 = off)",
                      p.n_indent, p.t_max_predict_ms);
    if ((p.n_indent > 0 || p.t_max_predict_ms > 0) && p.no_text)
        return mf_err(err, MF_E_INVAL,
                      "generation: n_indent and t_max_predict_ms read the text, which no_text turns off");
    for (int32_t i = 0; i < p.n_stop; i++)
        if (!p.stop[i] || !*p.stop[i])
            return mf_err(err, MF_E_INVAL, "generation: stop string %d is empty (it would match everywhere)", i);
    mf_gen *g = calloc(1, sizeof *g);
    if (!g) return mf_err(err, MF_E_NOMEM, "generation: out of memory");
    g->ctx = ctx;
    g->model = mf_context_model(ctx);
    g->limit = p.n_ctx ? p.n_ctx : nc;
    if (!p.n_batch) p.n_batch = 512;
    int rc = MF_E_NOMEM;
    if (p.n_stop > 0) {
        if (!(g->stop = calloc((size_t)p.n_stop, sizeof *g->stop))) goto nomem;
        for (int32_t i = 0; i < p.n_stop; i++) {
            if (!(g->stop[i] = strdup(p.stop[i]))) goto nomem;
            g->stop_max = MF_MAX(g->stop_max, strlen(p.stop[i]));
        }
    }
    p.stop = NULL; /* the copies are g->stop */
    g->p = p;
    mf_model_info info;
    mf_model_get_info(g->model, &info);
    if ((rc = mf_sampler_new(&p.sampler, info.n_vocab, &g->smp, err))) goto fail;
    g->p.sampler.logit_bias = NULL, g->p.sampler.n_logit_bias = 0; /* the sampler keeps its own copy */
    if (!p.no_text && (rc = mf_detok_stream_new(g->model, &g->ds, err))) goto fail;
    if (p.post_probs > 0 && (!(g->post_last_ids = malloc(sizeof *g->post_last_ids * (size_t)p.post_probs)) ||
                             !(g->post_last_p = malloc(sizeof *g->post_last_p * (size_t)p.post_probs)))) {
        rc = mf_err(err, MF_E_NOMEM, "generation: out of memory for post_probs");
        goto fail;
    }
    g->status = MF_GEN_RUNNING;
    *out = g;
    return 0;
nomem:
    mf_err(err, MF_E_NOMEM, "generation: out of memory for the stop strings");
fail:
    g->p.n_stop = p.n_stop;
    mf_gen_free(g);
    return rc;
}

int mf_gen_attach(mf_gen *g, const mf_token *ids, int32_t n, mf_error *err) {
    if (g->n_tok != 0)
        return mf_err(err, MF_E_INVAL, "generation: attach needs a fresh generator (this one holds %d tokens)", g->n_tok);
    if (n < 0 || (n > 0 && !ids) || n > g->limit)
        return mf_err(err, MF_E_RANGE, "generation: cannot attach %d tokens to a sequence of %d positions", n, g->limit);
    mf_pos last = mf_seq_pos_max(g->ctx, g->p.seq);
    if (last != n - 1)
        return mf_err(err, MF_E_INVAL,
                      "generation: sequence %d holds positions up to %d, so it cannot be the %d tokens to attach", g->p.seq,
                      last, n);
    int rc = grow_i32(&g->toks, &g->cap, n, err);
    if (rc) return rc;
    if (n) memcpy(g->toks, ids, sizeof *ids * (size_t)n);
    g->n_tok = g->n_cached = n;
    for (int32_t k = 0; k < n; k++) mf_sampler_accept(g->smp, ids[k]); /* the penalties see the prefix */
    return 0;
}

int mf_gen_set_grammar(mf_gen *g, const mf_grammar *gr, const char *open, const char *close, mf_error *err) {
    if (gr && g->p.ignore_eos)
        return mf_err(err, MF_E_INVAL, "generation: a grammar ends its text with an end-of-generation token, which "
                                       "ignore_eos turns into text (drop one of them)");
    mf_constraint *c = NULL;
    int rc = gr ? mf_constraint_new(g->model, gr, open, close, &c, err) : 0;
    if (rc) return rc;
    mf_constraint_free(g->con);
    g->con = c;
    return 0;
}

int mf_gen_feed(mf_gen *g, const mf_token *ids, int32_t n, mf_error *err) {
    if (n < 0 || (n > 0 && !ids)) return mf_err(err, MF_E_INVAL, "generation: feed of %d tokens without ids", n);
    if (n > g->limit - g->n_tok)
        return mf_err(err, MF_E_RANGE,
                      "the sequence holds %d tokens and %d more do not fit its %d positions (raise -c/--ctx-size, "
                      "or shorten the input)",
                      g->n_tok, n, g->limit);
    int rc = grow_i32(&g->toks, &g->cap, g->n_tok + n, err);
    if (rc) return rc;
    memcpy(g->toks + g->n_tok, ids, sizeof *ids * (size_t)n);
    g->n_tok += n;
    for (int32_t i = 0; i < n; i++) mf_sampler_accept(g->smp, ids[i]);
    /* a new turn: whatever the detokenizer still held belonged to the last one, which has ended */
    if (g->ds) {
        const char *piece;
        size_t len;
        mf_detok_stream_flush(g->ds, &piece, &len, NULL);
    }
    if (g->con) mf_constraint_reset(g->con); /* each turn is one sentence of the grammar */
    g->status = MF_GEN_RUNNING;
    g->aborted = false;
    g->n_hold = g->n_turn = 0;
    g->line_state = 0, g->line_indent = 0, g->cut = false;
    g->st.turn_prefilled = g->st.turn_generated = 0;
    g->st.t_prefill_s = g->st.t_decode_s = g->st.t_sample_s = 0;
    return 0;
}

/* ---------------- text: detokenizer + stop strings ---------------- */
/* The earliest complete stop string in hold: its offset, or -1. */
static long find_stop(mf_gen *g) {
    long best = -1;
    for (int32_t i = 0; i < g->p.n_stop; i++) {
        size_t sl = strlen(g->stop[i]);
        for (size_t at = 0; at + sl <= g->n_hold && (best < 0 || (long)at < best); at++)
            if (!memcmp(g->hold + at, g->stop[i], sl)) {
                best = (long)at;
                g->stop_hit = i;
                break;
            }
    }
    return best;
}

/* The longest tail of hold that is a proper prefix of some stop string: it must wait for more text. */
static size_t undecided_tail(const mf_gen *g) {
    size_t keep = 0;
    for (int32_t i = 0; i < g->p.n_stop; i++) {
        size_t sl = strlen(g->stop[i]);
        for (size_t k = MF_MIN(sl - 1, g->n_hold); k > keep; k--)
            if (!memcmp(g->hold + g->n_hold - k, g->stop[i], k)) {
                keep = k;
                break;
            }
    }
    return keep;
}

/* Appends decoded bytes; emits what can no longer become a stop string.  final: nothing more will come
 * (the held tail is emitted too).  Returns MF_GEN_STOP when a stop string completed. */
static int text_add(mf_gen *g, const char *s, size_t len, bool final, bool *stopped, mf_error *err) {
    int rc = cat(&g->hold, &g->n_hold, &g->cap_hold, s, len, err);
    if (rc) return rc;
    long at = find_stop(g);
    if (at >= 0) {
        *stopped = true;
        rc = emit(g, g->hold, (size_t)at, err);
        g->n_hold = 0;
        return rc;
    }
    size_t keep = final ? 0 : undecided_tail(g);
    if ((rc = emit(g, g->hold, g->n_hold - keep, err))) return rc;
    memmove(g->hold, g->hold + g->n_hold - keep, keep);
    g->n_hold = keep;
    return 0;
}

/* The turn ends with status: the detokenizer's rest and the held text are final now (unless a stop
 * string already cut the text). */
static int finish(mf_gen *g, int32_t status, mf_error *err) {
    g->status = status;
    if (!g->ds) return 0;
    const char *piece;
    size_t len;
    int rc = mf_detok_stream_flush(g->ds, &piece, &len, err);
    if (rc) return rc;
    if (status == MF_GEN_STOP) {
        g->n_hold = 0;
        return 0;
    }
    bool stopped = false;
    rc = text_add(g, piece, len, true, &stopped, err);
    if (stopped) g->status = MF_GEN_STOP; /* the detokenizer's last bytes completed one */
    if (g->cut) g->status = MF_GEN_LENGTH; /* n_indent ended the text first (llama-server's "limit") */
    return rc;
}

/* One sampled token becomes part of the sequence (queued: its K/V is written by the next forward). */
static int commit(mf_gen *g, mf_token t, mf_error *err) {
    int rc = grow_i32(&g->toks, &g->cap, g->n_tok + 1, err);
    if (!rc) rc = grow_i32(&g->out_tok, &g->cap_out_tok, g->n_out_tok + 1, err);
    if (rc) return rc;
    g->toks[g->n_tok++] = t;
    g->out_tok[g->n_out_tok++] = t;
    g->gen_queued = true;
    mf_sampler_accept(g->smp, t);
    if (g->con && (rc = mf_constraint_commit(g->con, t, err))) return rc;
    if (!g->st.turn_generated) g->t_first = mf_time_now();
    g->st.turn_generated++;
    g->st.n_generated++;
    if (mf_model_is_eog(g->model, t) && !g->p.ignore_eos) return finish(g, MF_GEN_EOG, err);
    if (g->ds) {
        const char *piece;
        size_t len;
        bool stopped = false;
        if ((rc = mf_detok_stream_push(g->ds, t, &piece, &len, err))) return rc;
        if ((rc = text_add(g, piece, len, false, &stopped, err))) return rc;
        if (g->cut) return finish(g, MF_GEN_LENGTH, err);
        if (stopped) return finish(g, MF_GEN_STOP, err);
        /* t_max_predict_ms: past it, the turn ends with a token that writes a newline (llama-server's rule) */
        if (g->p.t_max_predict_ms > 0 && memchr(piece, '\n', len) &&
            (mf_time_now() - g->t_first) * 1e3 > g->p.t_max_predict_ms)
            return finish(g, MF_GEN_LENGTH, err);
    }
    if (g->p.n_predict >= 0 && g->st.turn_generated >= g->p.n_predict) return finish(g, MF_GEN_LENGTH, err);
    if (g->n_tok - 1 >= g->limit) return finish(g, MF_GEN_CONTEXT, err); /* t itself has no position left */
    return 0;
}

/* The next token from these logits: the sampler's pick, among the grammar's tokens where one is active;
 * -1 when the grammar allows no token at all. */
static mf_token sample(mf_gen *g, const float *lg) {
    mf_token t;
    if (g->con && mf_constraint_active(g->con)) {
        const mf_token_filter f = {mf_constraint_allow, mf_constraint_maybe, g->con};
        t = mf_sampler_sample_allowed(g->smp, lg, &f);
    } else {
        t = mf_sampler_sample(g->smp, lg);
    }
    if (g->p.post_probs > 0 && t >= 0) /* read now: the next sample overwrites the candidates */
        g->post_last_n = mf_sampler_last_probs(g->smp, t, g->p.post_probs, g->post_last_ids, g->post_last_p,
                                               &g->post_last_chosen);
    return t;
}

/* post_probs: the committed token's (the last one of out_tok) chain probabilities join the step's output. */
static int post_record(mf_gen *g, mf_error *err) {
    const int32_t k = g->p.post_probs, i = g->n_out_tok - 1;
    if (k <= 0 || i < 0) return 0;
    if (i >= g->cap_post) {
        const int32_t cap = MF_MAX(16, 2 * (i + 1));
        mf_token *ids = realloc(g->post_ids, sizeof *ids * (size_t)cap * (size_t)k);
        if (ids) g->post_ids = ids;
        float *p = realloc(g->post_p, sizeof *p * (size_t)cap * (size_t)k);
        if (p) g->post_p = p;
        float *c = realloc(g->post_chosen, sizeof *c * (size_t)cap);
        if (c) g->post_chosen = c;
        int32_t *n = realloc(g->post_n, sizeof *n * (size_t)cap);
        if (n) g->post_n = n;
        if (!ids || !p || !c || !n) return mf_err(err, MF_E_NOMEM, "generation: out of memory for post_probs");
        g->cap_post = cap;
    }
    memcpy(g->post_ids + (size_t)i * k, g->post_last_ids, sizeof *g->post_ids * (size_t)g->post_last_n);
    memcpy(g->post_p + (size_t)i * k, g->post_last_p, sizeof *g->post_p * (size_t)g->post_last_n);
    g->post_chosen[i] = g->post_last_chosen;
    g->post_n[i] = g->post_last_n;
    return 0;
}

/* ---------------- forwards ---------------- */
/* A draw taken ahead but not committed: the sampler's RNG goes back to before it. */
static void drop_pre(mf_gen *g) {
    if (!g->pre) return;
    mf_sampler_state_set(g->smp, &g->pre_state);
    g->pre = false;
}

int32_t mf_gen_batch_add(mf_gen *g, mf_batch *b, const mf_token *draft, int32_t n_draft, mf_error *err) {
    drop_pre(g);
    g->n_rows = g->n_in = g->n_draft = 0;
    g->row0 = b->n_tokens;
    if (g->status != MF_GEN_RUNNING) return 0;
    if (g->p.abort && g->p.abort(g->p.abort_user)) {
        g->aborted = true;
        return 0;
    }
    if (n_draft < 0 || (n_draft > 0 && !draft))
        return mf_err(err, MF_E_INVAL, "generation: %d drafted tokens without ids", n_draft);
    int32_t queued = g->n_tok - g->n_cached, room = b->capacity - b->n_tokens;
    if (queued <= 0)
        return mf_err(err, MF_E_INTERNAL, "generation: nothing queued on a running turn (%d tokens, %d cached)",
                      g->n_tok, g->n_cached);
    if (room <= 0) return 0;
    g->n_in = MF_MIN(queued, MF_MIN(room, g->p.n_batch));
    /* drafts only ride along with the last queued token, and only as far as positions and rows allow */
    if (g->n_in == queued) g->n_draft = MF_MAX(0, MF_MIN(n_draft, MF_MIN(room - g->n_in, g->limit - g->n_tok)));
    int rc = grow_i32(&g->draft, &g->draft_cap, MF_MAX(g->n_draft, 1), err);
    if (rc) return rc;
    if (g->n_draft) memcpy(g->draft, draft, sizeof *draft * (size_t)g->n_draft);
    bool last_chunk = g->n_in == queued;
    for (int32_t i = 0; i < g->n_in; i++)
        mf_batch_add(b, g->toks[g->n_cached + i], g->n_cached + i, g->p.seq, last_chunk && i == g->n_in - 1);
    for (int32_t i = 0; i < g->n_draft; i++) mf_batch_add(b, g->draft[i], g->n_tok + i, g->p.seq, true);
    g->n_rows = g->n_in + g->n_draft;
    g->t0 = mf_time_now();
    return g->n_rows;
}

void mf_gen_batch_cancel(mf_gen *g) {
    drop_pre(g);
    g->n_rows = g->n_in = g->n_draft = 0;
}

static void reset_out(mf_gen *g, mf_gen_out *out) {
    g->n_out = 0;
    g->n_out_tok = 0;
    memset(out, 0, sizeof *out);
}

static void fill_out(mf_gen *g, mf_gen_out *out) {
    out->status = g->status;
    out->tokens = g->out_tok ? g->out_tok : k_none;
    out->n_tokens = g->n_out_tok;
    out->text = g->out ? g->out : "";
    out->text_len = g->n_out;
    if (g->p.post_probs > 0 && g->n_out_tok > 0) {
        out->post_chosen = g->post_chosen, out->n_post = g->post_n;
        out->post_ids = g->post_ids, out->post_p = g->post_p;
    }
}

static int batch_done(mf_gen *g, mf_gen_out *out, mf_error *err) {
    reset_out(g, out);
    int rc = 0;
    if (g->aborted) {
        g->aborted = false;
        rc = finish(g, MF_GEN_ABORT, err);
        fill_out(g, out);
        return rc;
    }
    if (!g->n_rows) {
        fill_out(g, out);
        return 0;
    }
    double dt = mf_time_now() - g->t0;
    int32_t n_gen_rows = g->gen_queued ? 1 : 0, fed = g->n_in - n_gen_rows;
    g->gen_queued = false;
    if (fed > 0) g->st.t_prefill_s += dt;
    else g->st.t_decode_s += dt;
    g->st.turn_prefilled += fed;
    g->st.n_prefilled += fed;
    g->n_cached += g->n_in;
    int32_t row = g->row0 + g->n_in - 1, n_draft = g->n_draft;
    g->n_rows = 0;
    if (g->n_cached < g->n_tok) { /* a prompt chunk: more to prefill before anything is sampled */
        fill_out(g, out);
        return 0;
    }
    out->n_drafted = n_draft;
    g->st.n_drafted += n_draft;
    if (g->p.n_predict >= 0 && g->st.turn_generated >= g->p.n_predict) { /* -n 0: prefill only */
        rc = finish(g, MF_GEN_LENGTH, err);
        fill_out(g, out);
        out->n_drafted = n_draft;
        if (n_draft) mf_seq_rm(g->ctx, g->p.seq, g->n_cached, -1);
        return rc;
    }
    /* row i's logits predict the token after draft i (i = 0: after the queued tokens); committing stops
     * at the first sample that differs from its draft, or when the turn ends */
    int32_t accepted = 0;
    const double t_sample0 = mf_time_now();
    for (int32_t i = 0; i <= n_draft; i++) {
        const float *lg = mf_get_logits(g->ctx, row + i);
        if (!lg) return mf_err(err, MF_E_INTERNAL, "generation: batch row %d has no logits", row + i);
        mf_token t;
        if (i == 0 && g->pre) { /* drawn ahead from these logits by mf_gen_batch_sample */
            t = g->pre_tok;
            g->pre = false;
            g->st.t_sample_s += g->pre_s;
        } else {
            t = sample(g, lg);
        }
        if (t < 0) {
            rc = mf_err(err, MF_E_INVAL,
                        "generation: the grammar allows no token after %zu bytes of output (it asks "
                        "for text no token of this vocabulary spells, or the logit bias bans every "
                        "token it allows)",
                        g->n_turn);
            break;
        }
        if ((rc = commit(g, t, err)) || (rc = post_record(g, err))) break;
        bool match = i < n_draft && t == g->draft[i];
        if (match) accepted++;
        if (!match || g->status != MF_GEN_RUNNING) break;
        g->n_cached++; /* the draft's K/V row, written by this forward, is the committed token's */
        g->gen_queued = false;
    }
    g->st.t_sample_s += mf_time_now() - t_sample0;
    /* the last committed token stays queued, as in plain decoding: drop drafted rows from there on */
    if (n_draft) {
        if (g->n_cached > g->n_tok - 1) g->n_cached = g->n_tok - 1;
        mf_seq_rm(g->ctx, g->p.seq, g->n_cached, -1);
        g->gen_queued = true;
    }
    out->n_accepted = accepted;
    g->st.n_accepted += accepted;
    fill_out(g, out);
    out->n_drafted = n_draft;
    return rc;
}

int mf_gen_batch_done(mf_gen *g, mf_gen_out *out, mf_error *err) {
    int rc = batch_done(g, out, err);
    drop_pre(g); /* a path that sampled nothing (none is expected: first_sample_logits mirrors them) */
    return rc;
}

/* The logits batch_done will sample its first token from, or NULL where it samples nothing this step: the
 * tests batch_done makes before its first sample, in its order. */
static const float *first_sample_logits(const mf_gen *g) {
    if (g->aborted || !g->n_rows || g->pre) return NULL;
    if (g->n_cached + g->n_in < g->n_tok) return NULL; /* a prompt chunk */
    if (g->p.n_predict >= 0 && g->st.turn_generated >= g->p.n_predict) return NULL;
    return mf_get_logits(g->ctx, g->row0 + g->n_in - 1);
}

typedef struct {
    mf_gen **g;
    const float **lg;
    int32_t n;
    _Atomic int32_t next;
} ahead_job;

static void sample_ahead(void *arg, int ith, int nth) {
    (void)ith, (void)nth;
    ahead_job *j = arg;
    for (int32_t k; (k = atomic_fetch_add(&j->next, 1)) < j->n;) { /* one generator at a time, any thread */
        mf_gen *g = j->g[k];
        const double t0 = mf_time_now();
        mf_sampler_state_get(g->smp, &g->pre_state);
        g->pre_tok = sample(g, j->lg[k]);
        g->pre_s = mf_time_now() - t0;
        g->pre = true;
    }
}

void mf_gen_batch_sample(mf_gen *const *gens, int32_t n) {
    enum { CHUNK = 64 };
    mf_gen *g[CHUNK];
    const float *lg[CHUNK];
    for (int32_t at = 0; at < n;) {
        int32_t m = 0;
        mf_context *ctx = NULL;
        for (; at < n && m < CHUNK; at++) {
            mf_gen *x = gens[at];
            const float *l = x ? first_sample_logits(x) : NULL;
            if (!l || (ctx && x->ctx != ctx)) continue; /* another context's: batch_done samples it */
            ctx = x->ctx;
            g[m] = x, lg[m++] = l;
        }
        if (m < 2) continue; /* one sample gains nothing from the pool */
        ahead_job j = {g, lg, m, 0};
        mf_cpu_run(ctx->cpu, sample_ahead, &j, MF_MIN(m, mf_cpu_n_threads(ctx->cpu)));
    }
}

int mf_gen_step_draft(mf_gen *g, const mf_token *draft, int32_t n_draft, mf_gen_out *out, mf_error *err) {
    reset_out(g, out);
    if (g->status != MF_GEN_RUNNING) {
        fill_out(g, out);
        return 0;
    }
    int32_t need = g->p.n_batch + MF_MAX(n_draft, 0);
    if (g->batch.capacity < need) {
        mf_batch_free(&g->batch);
        int rc = mf_batch_init(&g->batch, need, err);
        if (rc) return rc;
    }
    mf_batch_clear(&g->batch);
    int32_t n = mf_gen_batch_add(g, &g->batch, draft, n_draft, err);
    if (n < 0) return n;
    if (n > 0) {
        int rc = mf_decode(g->ctx, &g->batch, err);
        if (rc) {
            mf_gen_batch_cancel(g);
            return rc;
        }
    }
    return mf_gen_batch_done(g, out, err);
}

int mf_gen_step(mf_gen *g, mf_gen_out *out, mf_error *err) {
    return mf_gen_step_draft(g, NULL, 0, out, err);
}

/* ---------------- editing the sequence ---------------- */
int mf_gen_truncate(mf_gen *g, int32_t n, mf_error *err) {
    if (n < 0 || n > g->n_tok)
        return mf_err(err, MF_E_RANGE, "generation: cannot keep %d tokens of a sequence of %d", n, g->n_tok);
    mf_seq_rm(g->ctx, g->p.seq, n, -1);
    if (n < g->n_tok) g->gen_queued = g->gen_queued && n > g->n_cached;
    g->n_tok = n;
    g->n_cached = MF_MIN(g->n_cached, n);
    return 0;
}

int mf_gen_drop(mf_gen *g, mf_pos p0, mf_pos p1, mf_error *err) {
    if (p0 < 0 || p1 < p0 || p1 > g->n_cached)
        return mf_err(err, MF_E_RANGE,
                      "generation: cannot drop positions [%d, %d): the sequence has %d cached positions", p0, p1,
                      g->n_cached);
    int32_t d = p1 - p0;
    if (!d) return 0;
    mf_seq_rm(g->ctx, g->p.seq, p0, p1);
    int rc = mf_seq_add(g->ctx, g->p.seq, p1, -1, -d, err);
    if (rc) { /* the rows after p0 are gone but not moved: keep what is still consistent */
        mf_gen_truncate(g, p0, NULL);
        return rc;
    }
    memmove(g->toks + p0, g->toks + p1, sizeof *g->toks * (size_t)(g->n_tok - p1));
    g->n_tok -= d;
    g->n_cached -= d;
    return 0;
}

const mf_token *mf_gen_tokens(const mf_gen *g, int32_t *n) {
    *n = g->n_tok;
    return g->toks ? g->toks : k_none;
}

const char *mf_gen_stop_word(const mf_gen *g) {
    return g->status == MF_GEN_STOP ? g->stop[g->stop_hit] : NULL;
}

const char *mf_gen_turn_text(const mf_gen *g, size_t *len) {
    *len = g->n_turn;
    return g->turn ? g->turn : "";
}

int32_t mf_gen_status(const mf_gen *g) {
    return g->status;
}

mf_sampler *mf_gen_sampler(mf_gen *g) {
    return g->smp;
}

void mf_gen_get_stats(const mf_gen *g, mf_gen_stats *st) {
    *st = g->st;
    st->n_tokens = g->n_tok;
    st->n_cached = g->n_cached;
}

const mf_model *mf_gen_model_of(const mf_gen *g) {
    return g->model;
}

int32_t mf_gen_n_ctx(const mf_gen *g) {
    return g->limit;
}

mf_context *mf_gen_context_of(const mf_gen *g) {
    return g->ctx;
}

mf_seq_id mf_gen_seq_of(const mf_gen *g) {
    return g->p.seq;
}

bool mf_gen_abort_asked(const mf_gen *g) {
    return g->p.abort && g->p.abort(g->p.abort_user);
}

int32_t mf_gen_turn_left(const mf_gen *g) {
    return g->p.n_predict < 0 ? INT32_MAX : g->p.n_predict - g->st.turn_generated;
}

void mf_gen_add_decode_time(mf_gen *g, double s) {
    g->st.t_decode_s += s;
}

int mf_gen_restore(mf_gen *g, const mf_token *ids, int32_t n, int32_t n_cached, mf_error *err) {
    if (g->n_tok)
        return mf_err(err, MF_E_INVAL, "generation: restore needs an empty sequence, this one holds %d tokens",
                      g->n_tok);
    if (n < 0 || n_cached < 0 || n_cached > n || n > g->limit || (n > 0 && !ids))
        return mf_err(err, MF_E_RANGE, "generation: cannot restore %d tokens (%d cached) into %d positions", n,
                      n_cached, g->limit);
    int rc = grow_i32(&g->toks, &g->cap, MF_MAX(n, 1), err);
    if (rc) return rc;
    /* the penalty and DRY history sees the tokens again; the RNG state and Mirostat's mu are the caller's
     * (the session file's) */
    mf_sampler_state st;
    mf_sampler_state_get(g->smp, &st);
    mf_sampler_reset(g->smp);
    for (int32_t i = 0; i < n; i++) mf_sampler_accept(g->smp, ids[i]);
    mf_sampler_state_set(g->smp, &st);
    memcpy(g->toks, ids, sizeof *ids * (size_t)n);
    g->n_tok = n;
    g->n_cached = n_cached;
    g->gen_queued = n > n_cached; /* a saved turn ends with its last sampled token queued */
    g->status = MF_GEN_LENGTH; /* the restored turn has ended; the next feed starts one */
    return 0;
}
