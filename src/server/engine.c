/* server/engine: the one thread that owns the model's context and KV cache.
 *
 * Slots are KV sequences (slot i = sequence i) that share one pool of cells.  Each step is one forward
 * carrying every decoding slot's next token first, then prefill chunks of newly admitted requests, at
 * most -b rows in all, so a long prompt never stalls the streams already running.  Every slot runs one
 * mf_gen (the engine's step API: sampler, detokenizer, stop strings, limits) for its request.
 *
 * Prefix reuse: a finished slot keeps its tokens' cells; a new request takes the idle slot whose cached
 * tokens share the longest prefix with its prompt (or copies the prefix from any slot that has it) and
 * prefills only the rest.  Idle caches are evicted, least recently used first, when the pool runs short.
 * A request with n choices prefills once in its lead slot; the other choices copy that prompt and
 * decode side by side.
 *
 * Every job is answered exactly once (mf_srv_job_finish ignores a second answer): a failed forward
 * answers the requests in it with 500 and the engine goes on; a stall guard answers everyone with 500
 * and stops. */
#include "server/respond.h"
#include "server/reuse.h"
#include "server/server_impl.h"
#include "server/think.h"
#include "server/toolcall.h"
#include "server/utf8.h"

#include "core/core.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { SLOT_IDLE, SLOT_WAIT, SLOT_RUN, SLOT_DONE };
enum { STALL_STEP_LIMIT = 64 };

typedef struct {
    int state;
    mf_gen *gen;
    mf_srv_job *job; /* one reference per slot of the job */
    int lead, choice;
    mf_token *cache; /* tokens whose cells this sequence holds (idle and done slots) */
    int32_t n_cache, cap_cache;
    uint64_t used_at;
    int32_t row; /* logits row of this slot in the current forward, -1 */
    mf_srv_think think;
    mf_srv_buf content, reasoning; /* streaming: this step's delta; otherwise the whole reply */
    mf_srv_tools tools;            /* requests with tools: the calls, picked out of the answer */
    mf_srv_buf answer;             /* ... and the answer between the two splitters */
    int32_t calls_sent;            /* streaming: calls sent so far */
    uint64_t call_id;              /* the calls' ids: call_<this, hex>_<index> */
    mf_srv_logprob *lp;
    int32_t n_lp, cap_lp, lp_sent;
    int32_t n_gen;
    int32_t n_drafted, n_accepted; /* speculative decoding: this reply's drafts and accepted ones */
    mf_token *toks;                /* the reply's tokens (return_tokens; a /completion stream's chunks) */
    int32_t n_toks, cap_toks, toks_sent;
    bool has_nl;                   /* the reply's text holds a newline */
    int32_t status;                /* the generator's end status (MF_GEN_*) */
    char *stop_word;               /* the stop string that ended it */
    const char *finish;
    bool sent_first;
    double t_last;
    /* lead slot only: the job's bookkeeping */
    int n_choices, n_done;
    int32_t reused;
    bool got_first;
    double t_admit, t_first; /* admission and the first token: llama-server's timings */
} slot;

struct mf_srv_engine {
    mf_server *s;
    mf_context *ctx;
    mf_model *draft_model; /* -md: the draft (one draft sequence per slot) */
    mf_draft *draft;
    slot *slots;
    int n;
    mf_batch batch;
    int32_t batch_cap;
    uint64_t tick, seed_counter;
    int stall;
    bool stopped;
    int *offered; /* slots offered the current batch */
    mf_gen **sampled; /* their generators, drawn side by side on the pool (mf_gen_batch_sample) */
    mf_pooling pooling; /* --embeddings: the pooling resolved at load */
};

int mf_srv_engine_new(mf_server *s, mf_srv_engine **out, mf_error *err) {
    mf_srv_engine *e = calloc(1, sizeof *e);
    if (!e || !(e->slots = calloc((size_t)s->o.n_parallel, sizeof *e->slots)) ||
        !(e->offered = calloc((size_t)s->o.n_parallel, sizeof *e->offered)) ||
        !(e->sampled = calloc((size_t)s->o.n_parallel, sizeof *e->sampled))) {
        if (e) free(e->slots), free(e->offered);
        free(e);
        return mf_err(err, MF_E_NOMEM, "out of memory for %d slots", s->o.n_parallel);
    }
    e->s = s;
    e->n = s->o.n_parallel;
    for (int i = 0; i < e->n; i++) e->slots[i].row = -1;
    *out = e;
    return 0;
}

static void slot_clear_output(slot *sl) {
    mf_srv_think_free(&sl->think);
    memset(&sl->think, 0, sizeof sl->think);
    mf_srv_buf_free(&sl->content);
    mf_srv_buf_free(&sl->reasoning);
    mf_srv_tools_free(&sl->tools);
    mf_srv_buf_free(&sl->answer);
    sl->calls_sent = 0;
    for (int32_t i = 0; i < sl->n_lp; i++) {
        free(sl->lp[i].token);
        for (int32_t k = 0; k < sl->lp[i].n_top; k++) free(sl->lp[i].top_token[k]);
        free(sl->lp[i].top_token);
        free(sl->lp[i].top_logprob);
        free(sl->lp[i].top_id);
    }
    free(sl->lp);
    sl->lp = NULL, sl->n_lp = sl->cap_lp = sl->lp_sent = 0;
    sl->n_gen = 0, sl->finish = NULL, sl->sent_first = false;
    sl->n_drafted = sl->n_accepted = 0;
    free(sl->toks);
    free(sl->stop_word);
    sl->toks = NULL, sl->stop_word = NULL;
    sl->n_toks = sl->cap_toks = sl->toks_sent = 0;
    sl->has_nl = false, sl->status = MF_GEN_RUNNING;
}

void mf_srv_engine_free(mf_srv_engine *e) {
    if (!e) return;
    for (int i = 0; i < e->n; i++) {
        slot *sl = &e->slots[i];
        mf_gen_free(sl->gen);
        if (sl->job) mf_srv_job_unref(sl->job);
        slot_clear_output(sl);
        free(sl->cache);
    }
    free(e->slots);
    free(e->offered);
    free(e->sampled);
    mf_draft_free(e->draft);
    mf_model_free(e->draft_model);
    mf_batch_free(&e->batch);
    mf_context_free(e->ctx);
    free(e);
}

int mf_srv_engine_busy(mf_srv_engine *e) {
    int n = 0;
    for (int i = 0; i < e->n; i++) n += e->slots[i].state != SLOT_IDLE;
    return n;
}

/* ---------------- KV cells ---------------- */

static void set_cache(slot *sl, const mf_token *t, int32_t n) {
    if (n > sl->cap_cache) {
        mf_token *c = realloc(sl->cache, sizeof *c * (size_t)n);
        if (!c) n = 0; /* keep nothing rather than a wrong record */
        else sl->cache = c, sl->cap_cache = n;
    }
    if (n) memcpy(sl->cache, t, sizeof *t * (size_t)n);
    sl->n_cache = n;
}

static void drop_cells(mf_srv_engine *e, int i) {
    mf_seq_rm(e->ctx, i, -1, -1);
    e->slots[i].n_cache = 0;
}

static int32_t cells_free(mf_srv_engine *e) { return mf_context_n_ctx(e->ctx) - mf_kv_cells_used(e->ctx); }

/* Evicts idle caches, least recently used first, until `want` cells are free (or no idle cache is left). */
static void make_room(mf_srv_engine *e, int32_t want) {
    while (cells_free(e) < want) {
        int best = -1;
        for (int i = 0; i < e->n; i++) {
            slot *sl = &e->slots[i];
            if (sl->state == SLOT_IDLE && sl->n_cache > 0 && (best < 0 || sl->used_at < e->slots[best].used_at))
                best = i;
        }
        if (best < 0) return;
        drop_cells(e, best);
    }
}

/* The tokens a slot's sequence holds in cells now. */
static const mf_token *slot_tokens(const slot *sl, int32_t *n) {
    if (sl->gen) {
        mf_gen_stats st;
        mf_gen_get_stats(sl->gen, &st);
        int32_t nt;
        const mf_token *t = mf_gen_tokens(sl->gen, &nt);
        *n = st.n_cached;
        return t;
    }
    *n = sl->n_cache;
    return sl->cache;
}

/* ---------------- answering ---------------- */

static void fail_job(mf_srv_engine *e, mf_srv_job *j, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void update_gauges(mf_srv_engine *e);

static void release_slot(mf_srv_engine *e, int i, bool keep_cells) {
    slot *sl = &e->slots[i];
    if (sl->gen) {
        int32_t n;
        const mf_token *t = slot_tokens(sl, &n);
        if (keep_cells) set_cache(sl, t, n);
        mf_gen_free(sl->gen);
        sl->gen = NULL;
    }
    if (!keep_cells) drop_cells(e, i);
    if (sl->job) mf_srv_job_unref(sl->job);
    sl->job = NULL;
    slot_clear_output(sl);
    sl->state = SLOT_IDLE;
    sl->used_at = ++e->tick;
    sl->row = -1;
}

static void fail_job(mf_srv_engine *e, mf_srv_job *j, int status, const char *type, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* as in complete_job: metrics and slots are settled before the answer is released, so /metrics read
     * right after a failed answer shows its slots free and the drop counted */
    if (mf_srv_job_is_cancelled(j)) mf_srv_metrics_add(e->s->m, MF_SRV_C_CLIENT_GONE, 1);
    mf_srv_metrics_add(e->s->m, MF_SRV_C_JOBS_DROPPED, 1);
    mf_srv_job_ref(j); /* the slots' references go now */
    for (int i = 0; i < e->n; i++)
        if (e->slots[i].job == j) release_slot(e, i, false);
    update_gauges(e);
    mf_srv_job_fail(j, status, type, "%s", msg);
    mf_srv_job_unref(j);
}

static bool grow_lp(slot *sl) {
    if (sl->n_lp < sl->cap_lp) return true;
    int32_t cap = sl->cap_lp ? sl->cap_lp * 2 : 16;
    mf_srv_logprob *p = realloc(sl->lp, sizeof *p * (size_t)cap);
    if (!p) return false;
    sl->lp = p, sl->cap_lp = cap;
    return true;
}

/* The slot's next position: the token's piece (respond makes it JSON text), id and value; NULL when out of memory
 * (the position goes unreported). */
static mf_srv_logprob *begin_lp(mf_srv_engine *e, slot *sl, mf_token tok, float value) {
    if (!grow_lp(sl)) return NULL;
    mf_srv_logprob *lp = &sl->lp[sl->n_lp];
    memset(lp, 0, sizeof *lp);
    size_t len;
    if (mf_detokenize(e->s->model, &tok, 1, &lp->token, &len, NULL)) return NULL;
    lp->id = tok;
    lp->logprob = value;
    return lp;
}

/* Room for k alternatives; false when out of memory (the position's allocations freed: it goes unreported). */
static bool alloc_top(mf_srv_logprob *lp, int32_t k) {
    lp->top_token = calloc((size_t)k, sizeof *lp->top_token);
    lp->top_logprob = calloc((size_t)k, sizeof *lp->top_logprob);
    lp->top_id = calloc((size_t)k, sizeof *lp->top_id);
    if (lp->top_token && lp->top_logprob && lp->top_id) return true;
    free(lp->token), free(lp->top_token), free(lp->top_logprob), free(lp->top_id);
    return false;
}

/* Alternative q of the position (the ones before it named); false when its piece cannot be made. */
static bool name_top(mf_srv_engine *e, mf_srv_logprob *lp, int32_t q, mf_token id, float value) {
    size_t len;
    if (mf_detokenize(e->s->model, &id, 1, &lp->top_token[q], &len, NULL)) return false;
    lp->top_id[q] = id;
    lp->top_logprob[q] = value;
    lp->n_top = q + 1;
    return true;
}

/* post_sampling_probs: token k's probabilities after the sampler chain, as the generator recorded them. */
static void add_post_prob(mf_srv_engine *e, slot *sl, const mf_gen_out *out, int32_t k) {
    const int32_t K = sl->job->req.top_logprobs, n = out->n_post[k];
    mf_srv_logprob *lp = begin_lp(e, sl, out->tokens[k], out->post_chosen[k]);
    if (!lp || !alloc_top(lp, MF_MAX(n, 1))) return;
    for (int32_t q = 0; q < n; q++)
        if (!name_top(e, lp, q, out->post_ids[(size_t)k * K + q], out->post_p[(size_t)k * K + q])) break;
    sl->n_lp++;
}

/* row: the batch row whose logits chose tok (a verified draft's tokens come from consecutive rows) */
static void add_logprob(mf_srv_engine *e, slot *sl, int32_t row, mf_token tok) {
    const mf_srv_req *r = &sl->job->req;
    if (!r->logprobs || row < 0) return;
    const float *lg = mf_get_logits(e->ctx, row);
    int32_t nv = e->s->info.n_vocab;
    if (!lg) return;
    float mx = lg[0];
    for (int32_t v = 1; v < nv; v++) mx = lg[v] > mx ? lg[v] : mx;
    double sum = 0;
    for (int32_t v = 0; v < nv; v++) sum += exp((double)lg[v] - mx);
    const float lse = (float)(mx + log(sum));
    mf_srv_logprob *lp = begin_lp(e, sl, tok, lg[tok] - lse);
    if (!lp) return;
    int32_t k = r->top_logprobs;
    if (k > 0) {
        if (!alloc_top(lp, k)) return;
        mf_token *best = lp->top_id;
        int32_t nb = 0; /* insertion into a small sorted list: k <= 20 */
        for (int32_t v = 0; v < nv; v++) {
            if (nb == k && lg[v] <= lg[best[nb - 1]]) continue;
            int32_t at = nb < k ? nb++ : k - 1;
            while (at > 0 && lg[best[at - 1]] < lg[v]) best[at] = best[at - 1], at--;
            best[at] = v;
        }
        for (int32_t q = 0; q < nb; q++)
            if (!name_top(e, lp, q, best[q], lg[best[q]] - lse)) break;
    }
    sl->n_lp++;
}

/* The answer's identity and /completion's shape options (the lead slot is its id_slot). */
static mf_srv_head job_head(const mf_srv_job *j, int lead, bool streamed) {
    const mf_srv_req *r = &j->req;
    return (mf_srv_head){mf_srv_shape(r->kind), j->id, j->model_name, j->created, r->return_tokens, streamed,
                         r->post_probs, r->response_fields, r->n_response_fields, r->response_fields_given, lead};
}

/* A job's usage and llama-server's timings from its slots: the prompt from admission to the first token,
 * the generation from then to now. */
static mf_srv_usage job_usage(mf_srv_engine *e, const mf_srv_job *j, int lead) {
    const slot *ld = &e->slots[lead];
    mf_srv_usage u = {.prompt_tokens = j->n_prompt, .cached_tokens = ld->reused, .draft = e->draft != NULL,
                      .timings = true};
    for (int i = 0; i < e->n; i++) {
        const slot *sl = &e->slots[i];
        if (sl->job != j) continue;
        u.completion_tokens += sl->n_gen;
        u.draft_n += sl->n_drafted;
        u.draft_n_accepted += sl->n_accepted;
    }
    const double now = mf_time_now();
    u.prompt_n = j->n_prompt - ld->reused;
    u.predicted_n = u.completion_tokens;
    u.prompt_ms = 1e3 * ((ld->got_first ? ld->t_first : now) - ld->t_admit);
    u.predicted_ms = ld->got_first ? 1e3 * (now - ld->t_first) : 0.0;
    return u;
}

static const char *native_stop_type(int32_t status) {
    return status == MF_GEN_EOG ? "eos" : status == MF_GEN_STOP ? "word" : "limit";
}

/* One slot's reply as a choice of the answer. */
static mf_srv_choice choice_of(const slot *sl, const mf_srv_req *r) {
    return (mf_srv_choice){sl->content.s ? sl->content.s : "",
                           sl->reasoning.n ? sl->reasoning.s : NULL,
                           sl->finish,
                           r->logprobs ? sl->lp : NULL,
                           sl->n_lp,
                           {sl->tools.calls, 0, sl->tools.n_calls, sl->call_id},
                           {sl->toks, sl->n_toks, sl->n_gen, native_stop_type(sl->status), sl->stop_word,
                            sl->status == MF_GEN_CONTEXT, sl->has_nl}};
}

/* A /completion stream: each step's text and tokens, then llama-server's final result with the stop. */
static void native_chunk(mf_srv_engine *e, slot *sl, bool ended) {
    mf_srv_job *j = sl->job;
    const mf_srv_req *r = &j->req;
    const mf_srv_head h = job_head(j, sl->lead, ended);
    if (sl->content.n || sl->n_toks > sl->toks_sent || sl->n_lp > sl->lp_sent) {
        const mf_srv_usage u = r->timings_per_token ? job_usage(e, j, sl->lead) : (mf_srv_usage){0};
        char *json = mf_srv_native_chunk_json(&h, sl->content.n ? sl->content.s : "", sl->toks + sl->toks_sent,
                                              sl->n_toks - sl->toks_sent, sl->n_gen,
                                              r->timings_per_token ? &u : NULL,
                                              sl->n_lp > sl->lp_sent ? sl->lp + sl->lp_sent : NULL,
                                              sl->n_lp - sl->lp_sent);
        if (json) mf_srv_job_sse(j, json);
        free(json);
        sl->toks_sent = sl->n_toks, sl->lp_sent = sl->n_lp;
        sl->content.n = 0;
        if (sl->content.s) sl->content.s[0] = 0;
    }
    if (!ended) return;
    const mf_srv_usage u = job_usage(e, j, sl->lead);
    const mf_srv_choice c = choice_of(sl, r);
    char *json = mf_srv_final_json(&h, &c, 1, &u);
    if (json) mf_srv_job_sse(j, json);
    free(json);
}

/* Streaming: sends what this slot decided since the last chunk. */
static void stream_chunk(mf_srv_engine *e, slot *sl, const char *finish) {
    mf_srv_job *j = sl->job;
    const mf_srv_req *r = &j->req;
    if (mf_srv_shape(r->kind) == MF_SRV_NATIVE) {
        native_chunk(e, sl, finish != NULL);
        return;
    }
    bool chat = r->kind == MF_SRV_CHAT;
    bool have = sl->content.n || sl->reasoning.n || sl->n_lp > sl->lp_sent || sl->tools.n_calls > sl->calls_sent;
    if (!have && !finish && !(chat && !sl->sent_first)) return;
    mf_srv_head h = job_head(j, sl->lead, false);
    if (finish && have) { /* text first, then the finish chunk with an empty delta, as OpenAI does */
        stream_chunk(e, sl, NULL);
        have = false;
    }
    const char *content = sl->content.n ? sl->content.s : NULL;
    bool calls = sl->tools.n_calls > sl->calls_sent;
    if (!content && !finish && !sl->reasoning.n && !calls) content = ""; /* the first chat chunk: role only */
    if (!content && r->kind != MF_SRV_CHAT) content = "";                /* completions always carry "text" */
    mf_srv_calls cs = {sl->tools.calls, sl->calls_sent, sl->tools.n_calls, sl->call_id};
    char *json = mf_srv_chunk_json(&h, sl->choice, !sl->sent_first, content, sl->reasoning.n ? sl->reasoning.s : NULL,
                                   calls ? &cs : NULL, finish, sl->n_lp > sl->lp_sent ? sl->lp + sl->lp_sent : NULL,
                                   sl->n_lp - sl->lp_sent);
    sl->calls_sent = sl->tools.n_calls;
    if (json) mf_srv_job_sse(j, json);
    free(json);
    sl->sent_first = true;
    sl->lp_sent = sl->n_lp;
    sl->content.n = sl->reasoning.n = 0;
    if (sl->content.s) sl->content.s[0] = 0;
    if (sl->reasoning.s) sl->reasoning.s[0] = 0;
}

static void complete_job(mf_srv_engine *e, int lead) {
    slot *ld = &e->slots[lead];
    mf_srv_job *j = ld->job;
    const mf_srv_req *r = &j->req;
    mf_srv_head h = job_head(j, lead, false);
    mf_srv_usage u = job_usage(e, j, lead);
    mf_srv_choice ch[MF_SRV_MAX_N];
    int nc = 0;
    for (int i = 0; i < e->n; i++) {
        slot *sl = &e->slots[i];
        if (sl->job != j) continue;
        ch[sl->choice] = choice_of(sl, r);
        nc++;
    }
    /* The answer's last bytes are built first, then the job's metrics and slots are settled, and only then
     * is the answer released: a client that reads /metrics right after its answer sees its slots free. */
    char *usage = NULL, *body = NULL;
    if (r->stream && r->include_usage) usage = mf_srv_usage_chunk_json(&h, &u);
    if (!r->stream) body = mf_srv_final_json(&h, ch, nc, &u);
    mf_srv_metrics_observe(e->s->m, MF_SRV_H_E2E, mf_time_now() - j->t_arrival);
    mf_srv_job_ref(j); /* the slots' references go now */
    for (int i = 0; i < e->n; i++)
        if (e->slots[i].job == j) release_slot(e, i, true);
    update_gauges(e);
    if (r->stream) {
        if (usage) mf_srv_job_sse(j, usage);
        if (mf_srv_shape(r->kind) != MF_SRV_NATIVE) mf_srv_job_push(j, "data: [DONE]\n\n", 14);
        mf_srv_job_finish(j, 200, NULL);
    } else if (body) {
        mf_srv_job_finish(j, 200, body);
        body = NULL;
    } else {
        mf_srv_job_fail(j, 500, "server_error", "out of memory building the answer");
    }
    free(usage);
    free(body);
    mf_srv_job_unref(j);
}

static const char *finish_reason(int32_t status) {
    return status == MF_GEN_LENGTH || status == MF_GEN_CONTEXT ? "length" : "stop";
}

/* The answer (after <think> is split off) through the tool-call splitter into content and calls. */
static bool answer_to_tools(slot *sl) {
    bool ok = mf_srv_tools_push(&sl->tools, sl->answer.s, sl->answer.n, &sl->content);
    sl->answer.n = 0;
    return ok;
}

/* A step's text into the reply.  It goes out as JSON, so bytes that form no character become U+FFFD, as
 * llama-server sends them: a token's piece may be part of a character that the next token does not complete
 * (the detokenizer holds such a tail back only while it still could be). */
static bool add_text(slot *sl, const mf_srv_req *r, const char *s, size_t n) {
    char *fixed = NULL;
    if (!mf_srv_utf8_valid(s, n)) {
        if (!(fixed = mf_srv_utf8_lossy_dup(s, n, &n))) return false;
        s = fixed;
    }
    bool ok;
    if (r->kind != MF_SRV_CHAT) ok = mf_srv_buf_add(&sl->content, s, n);
    else if (!r->n_tools) ok = mf_srv_think_push(&sl->think, s, n, &sl->content, &sl->reasoning);
    else ok = mf_srv_think_push(&sl->think, s, n, &sl->answer, &sl->reasoning) && answer_to_tools(sl);
    free(fixed);
    return ok;
}

/* The end of a chat answer: what the splitters still hold goes out. */
static bool flush_text(slot *sl, const mf_srv_req *r) {
    if (!r->n_tools) return mf_srv_think_flush(&sl->think, &sl->content, &sl->reasoning);
    return mf_srv_think_flush(&sl->think, &sl->answer, &sl->reasoning) && answer_to_tools(sl) &&
           mf_srv_tools_flush(&sl->tools, &sl->content);
}

/* The step's tokens, where the answer shows them (return_tokens, a /completion stream's "tokens"). */
static bool keep_tokens(slot *sl, const mf_srv_req *r, const mf_gen_out *out) {
    if (!out->n_tokens || !(r->return_tokens || (r->stream && mf_srv_shape(r->kind) == MF_SRV_NATIVE))) return true;
    if (sl->n_toks + out->n_tokens > sl->cap_toks) {
        int32_t cap = MF_MAX(64, 2 * (sl->n_toks + out->n_tokens));
        mf_token *t = realloc(sl->toks, sizeof *t * (size_t)cap);
        if (!t) return false;
        sl->toks = t, sl->cap_toks = cap;
    }
    memcpy(sl->toks + sl->n_toks, out->tokens, sizeof *out->tokens * (size_t)out->n_tokens);
    sl->n_toks += out->n_tokens;
    return true;
}

/* One slot's result of a forward. */
static void take_output(mf_srv_engine *e, int i, const mf_gen_out *out) {
    slot *sl = &e->slots[i];
    slot *ld = &e->slots[sl->lead];
    mf_srv_job *j = sl->job;
    const mf_srv_req *r = &j->req;
    double now = mf_time_now();
    if (out->n_drafted) {
        sl->n_drafted += out->n_drafted;
        sl->n_accepted += out->n_accepted;
        mf_srv_metrics_add(e->s->m, MF_SRV_C_DRAFT_TOKENS, (uint64_t)out->n_drafted);
        mf_srv_metrics_add(e->s->m, MF_SRV_C_DRAFT_ACCEPTED, (uint64_t)out->n_accepted);
    }
    if (out->n_tokens > 0) {
        if (!ld->got_first) {
            mf_srv_metrics_observe(e->s->m, MF_SRV_H_TTFT, now - j->t_arrival);
            ld->got_first = true;
            ld->t_first = now;
        } else if (sl->n_gen > 0) {
            mf_srv_metrics_observe(e->s->m, MF_SRV_H_ITL, now - sl->t_last);
        }
        sl->t_last = now;
        sl->n_gen += out->n_tokens;
        mf_srv_metrics_add(e->s->m, MF_SRV_C_GENERATED_TOKENS, (uint64_t)out->n_tokens);
        for (int32_t k = 0; k < out->n_tokens; k++) {
            if (out->post_chosen) add_post_prob(e, sl, out, k); /* (the generator records them for post_probs) */
            else add_logprob(e, sl, sl->row < 0 ? -1 : sl->row + k, out->tokens[k]);
        }
    }
    bool ok = keep_tokens(sl, r, out);
    if (out->text_len) ok = ok && add_text(sl, r, out->text, out->text_len);
    sl->has_nl |= out->text_len && memchr(out->text, '\n', out->text_len);
    bool ended = out->status != MF_GEN_RUNNING;
    if (ended) {
        sl->status = out->status;
        const char *word = mf_gen_stop_word(sl->gen);
        if (word && !(sl->stop_word = strdup(word))) ok = false;
        if (r->kind == MF_SRV_CHAT) ok = ok && flush_text(sl, r);
        sl->finish = finish_reason(out->status);
        /* a complete answer that made calls ends for them, as OpenAI says; one cut short stays "length" */
        if (sl->tools.n_calls && !strcmp(sl->finish, "stop")) sl->finish = "tool_calls";
    }
    if (!ok) {
        fail_job(e, j, 500, "server_error", "out of memory collecting the reply");
        return;
    }
    if (r->stream) stream_chunk(e, sl, ended ? sl->finish : NULL);
    if (!ended) return;
    /* the slot keeps its cells (a later request may share the prefix) until the job completes */
    int32_t n;
    const mf_token *t = slot_tokens(sl, &n);
    set_cache(sl, t, n);
    mf_gen_free(sl->gen);
    sl->gen = NULL;
    sl->state = SLOT_DONE;
    if (++ld->n_done == ld->n_choices) complete_job(e, sl->lead);
}

/* ---------------- admission ---------------- */

static uint64_t fresh_seed(mf_srv_engine *e) {
    uint64_t z = (uint64_t)(mf_time_now() * 1e9) + 0x9E3779B97F4A7C15ull * ++e->seed_counter;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A generator for slot i continuing from the first `keep` prompt tokens already in its cells. */
static int start_gen(mf_srv_engine *e, int i, mf_srv_job *j, int choice, int32_t keep, uint64_t seed, mf_error *err) {
    slot *sl = &e->slots[i];
    mf_gen_params gp = mf_gen_default_params();
    gp.sampler = j->req.sp;
    gp.sampler.seed = seed + (uint64_t)choice;
    gp.seq = i;
    gp.n_predict = j->req.max_tokens;
    gp.n_batch = e->s->o.n_batch;
    gp.ignore_eos = j->req.ignore_eos;
    gp.stop = (const char *const *)j->req.stop;
    gp.n_stop = j->req.n_stop;
    gp.n_indent = j->req.n_indent;
    gp.post_probs = j->req.post_probs && j->req.logprobs ? j->req.top_logprobs : 0;
    gp.t_max_predict_ms = j->req.t_max_predict_ms;
    int rc = mf_gen_new(e->ctx, &gp, &sl->gen, err);
    if (!rc && j->grammar)
        rc = mf_gen_set_grammar(sl->gen, j->grammar, j->think_first ? "<think>" : NULL,
                                j->think_first ? "</think>" : NULL, err);
    if (!rc && keep > 0) rc = mf_gen_attach(sl->gen, j->prompt, keep, err);
    if (!rc) rc = mf_gen_feed(sl->gen, j->prompt + keep, j->n_prompt - keep, err);
    if (rc) {
        mf_gen_free(sl->gen);
        sl->gen = NULL;
        return rc;
    }
    sl->state = SLOT_RUN;
    sl->used_at = ++e->tick;
    return 0;
}

/* The --cache-reuse run length a job asks for (its n_cache_reuse, else the server's; 0: off). */
static int32_t job_reuse(const mf_srv_engine *e, const mf_srv_job *j) {
    if (!j->req.cache_prompt) return 0;
    return j->req.n_cache_reuse >= 0 ? j->req.n_cache_reuse : e->s->o.n_cache_reuse;
}

/* Slot i's own cells for the job's prompt past their common prefix c, runs of at least min_chunk (reuse.h): the
 * moves made, the prompt tokens the cells then hold returned, *shifted those that moved. */
static int32_t reuse_cells(mf_srv_engine *e, int i, const mf_srv_job *j, int32_t c, int32_t min_chunk,
                           int32_t *shifted) {
    int32_t n, n_moves;
    const mf_token *t = slot_tokens(&e->slots[i], &n);
    mf_srv_move *m = malloc(sizeof *m * (size_t)mf_srv_reuse_max_moves(j->n_prompt, min_chunk));
    if (!m) { /* the plain prefix, then */
        mf_seq_rm(e->ctx, i, c, -1);
        return c;
    }
    mf_srv_reuse_plan(t, n, j->prompt, j->n_prompt, c, min_chunk, m, &n_moves);
    mf_error err = {0};
    const int32_t k = mf_srv_reuse_apply(e->ctx, i, c, m, n_moves, &err);
    if (err.msg[0]) mf_log(MF_LOG_WARN, "[server] slot %d: cache reuse stopped at %d tokens: %s", i, k, err.msg);
    free(m);
    *shifted = k - c;
    return k;
}

/* Picks the lead slot for a prompt and how many of its tokens are already in (or copied into) its cells;
 * *shifted: how many of those were moved there by --cache-reuse. */
static int pick_slot(mf_srv_engine *e, const mf_srv_job *j, int32_t *keep, int32_t *shifted) {
    int best_idle = -1, src = -1;
    int32_t best_idle_len = -1, best_idle_lcp = 0, best_src_len = 0;
    const int32_t limit = j->n_prompt - 1; /* the last prompt token is always run: its logits give the first token */
    const int32_t reuse = job_reuse(e, j);
    *shifted = 0;
    for (int i = 0; i < e->n; i++) {
        const slot *sl = &e->slots[i];
        int32_t n;
        const mf_token *t = slot_tokens(sl, &n);
        int32_t c = j->req.cache_prompt ? mf_srv_common_prefix(t, n, j->prompt, j->n_prompt) : 0;
        /* with --cache-reuse an idle slot counts what its own cells would give after the moves */
        int32_t own = c;
        if (reuse && sl->state == SLOT_IDLE && limit >= 0)
            own = mf_srv_reuse_plan(t, n, j->prompt, j->n_prompt, MF_MIN(c, limit), reuse, NULL, NULL);
        if (sl->state == SLOT_IDLE && (j->slot < 0 || j->slot == i) &&
            (own > best_idle_len || (own == best_idle_len && sl->used_at < e->slots[best_idle].used_at)))
            best_idle = i, best_idle_len = own, best_idle_lcp = c;
        if (c > best_src_len) src = i, best_src_len = c;
    }
    if (best_idle < 0) return -1;
    /* compared as capped: a copy that would give no more than the idle slot holds is not made */
    if (MF_MIN(best_src_len, limit) > best_idle_len && src != best_idle) {
        int32_t k = MF_MIN(best_src_len, limit);
        drop_cells(e, best_idle);
        mf_error err = {0};
        if (k > 0 && mf_seq_cp(e->ctx, src, best_idle, 0, k, &err) == 0) {
            *keep = k;
            return best_idle;
        }
        *keep = 0;
        return best_idle;
    }
    int32_t k = MF_MIN(best_idle_lcp, limit);
    if (reuse && best_idle_len > k) {
        *keep = reuse_cells(e, best_idle, j, k, reuse, shifted);
        return best_idle;
    }
    mf_seq_rm(e->ctx, best_idle, k, -1);
    *keep = k;
    return best_idle;
}

static int idle_slots(mf_srv_engine *e) {
    int n = 0;
    for (int i = 0; i < e->n; i++) n += e->slots[i].state == SLOT_IDLE;
    return n;
}

static void answer_slots(mf_srv_engine *e, mf_srv_job *j);
static void slot_action(mf_srv_engine *e, mf_srv_job *j);

static bool job_cancelled(void *j) { return mf_srv_job_is_cancelled(j); }

/* The queued requests of first's kind that follow it, while their inputs and first's fit one group
 * (MF_SRV_EMBED_GROUP): many small requests then share forwards instead of running one after another. */
static int gather_pooled(mf_srv_engine *e, mf_srv_job *first, mf_srv_job **jobs) {
    const mf_srv_embed_req *in = first->kind == MF_JOB_RERANK ? &first->rerank.in : &first->embed;
    int32_t n_in = in->n;
    int n = 0;
    jobs[n++] = first;
    while (n < MF_SRV_EMBED_GROUP) {
        mf_srv_job *j = mf_srv_queue_pop(&e->s->q, 0);
        if (!j) break;
        in = j->kind == MF_JOB_RERANK ? &j->rerank.in : &j->embed;
        if (j->kind != first->kind || n_in + in->n > MF_SRV_EMBED_GROUP) {
            mf_srv_queue_unpop(&e->s->q, j); /* the queue's reference again */
            break;
        }
        n_in += in->n;
        jobs[n++] = j;
    }
    return n;
}

/* Embeddings or reranking requests, whole, between two steps: on such a server nothing else runs, and every
 * sequence is free (mf_embed leaves its sequence empty again).  first and the requests queued behind it that
 * fit one group run together (each vector bitwise its input's alone). */
static void pooled_jobs(mf_srv_engine *e, mf_srv_job *first) {
    mf_server *s = e->s;
    mf_srv_job *jobs[MF_SRV_EMBED_GROUP];
    mf_srv_pooled p[MF_SRV_EMBED_GROUP];
    const mf_srv_rerank_req *rr[MF_SRV_EMBED_GROUP];
    const int n = gather_pooled(e, first, jobs);
    const bool rank = first->kind == MF_JOB_RERANK;
    for (int i = 0; i < n; i++) {
        mf_srv_metrics_observe(s->m, MF_SRV_H_QUEUE_WAIT, mf_time_now() - jobs[i]->t_arrival);
        mf_srv_metrics_add(s->m, MF_SRV_C_JOBS_ADMITTED, 1);
        p[i] = (mf_srv_pooled){.req = &jobs[i]->embed, .cancelled = job_cancelled, .user = jobs[i]};
        rr[i] = &jobs[i]->rerank;
    }
    if (rank) mf_srv_rerank_run(e->ctx, 0, rr, p, n, s->model_name);
    else mf_srv_embed_run(e->ctx, 0, e->pooling, p, n, s->model_name);
    for (int i = 0; i < n; i++) {
        mf_srv_job *j = jobs[i];
        const mf_srv_embed_req *in = rank ? &j->rerank.in : &j->embed;
        if (p[i].status == 499) {
            mf_srv_metrics_add(s->m, MF_SRV_C_CLIENT_GONE, 1);
            mf_srv_job_finish(j, 499, NULL);
        } else if (p[i].status != 200) {
            mf_srv_job_fail(j, p[i].status, p[i].err.type, "%s", p[i].err.msg);
        } else {
            mf_srv_metrics_add(s->m, MF_SRV_C_PROMPT_TOKENS, (uint64_t)in->n_tokens);
            mf_srv_metrics_add(s->m, MF_SRV_C_PREFILLED_TOKENS, (uint64_t)in->n_tokens);
            mf_srv_job_finish(j, 200, p[i].body);
        }
        char with[48] = "";
        if (n > 1) snprintf(with, sizeof with, ", %d requests together", n);
        mf_log(MF_LOG_INFO, "[server] %s: %d %s, %d tokens %s (status %d%s)", j->id, in->n,
               rank ? "documents" : "inputs", in->n_tokens, rank ? "ranked" : "embedded", p[i].status, with);
        if (i) mf_srv_job_unref(j); /* the ones gather_pooled popped; admit drops first's */
    }
}

/* Admits queued jobs while slots are free; returns after the first that must wait. */
static void admit(mf_srv_engine *e) {
    mf_server *s = e->s;
    for (;;) {
        mf_srv_job *j = mf_srv_queue_pop(&s->q, 0);
        if (!j) return;
        if (j->kind == MF_JOB_SLOTS) answer_slots(e, j);
        else if (j->kind == MF_JOB_EMBED || j->kind == MF_JOB_RERANK) pooled_jobs(e, j);
        else if (j->kind != MF_JOB_GENERATE) slot_action(e, j);
        else if (mf_srv_job_is_cancelled(j)) {
            mf_srv_metrics_add(s->m, MF_SRV_C_CLIENT_GONE, 1);
            mf_srv_metrics_add(s->m, MF_SRV_C_JOBS_DROPPED, 1);
            mf_srv_job_finish(j, 499, NULL);
        } else if (j->slot >= e->n) {
            mf_srv_job_fail(j, 400, "invalid_request_error", "'id_slot' is %d; this server has slots 0..%d (--parallel %d)",
                            j->slot, e->n - 1, e->n);
        } else if (j->req.n > e->n) {
            mf_srv_job_fail(j, 400, "invalid_request_error",
                            "'n' is %d; this server decodes at most %d choices at once (--parallel %d)", j->req.n, e->n,
                            e->n);
        } else if (idle_slots(e) < j->req.n || (j->slot >= 0 && e->slots[j->slot].state != SLOT_IDLE)) {
            mf_srv_queue_unpop(&s->q, j);
            return;
        } else {
            int32_t keep = 0, shifted = 0;
            int lead = pick_slot(e, j, &keep, &shifted);
            mf_error err = {0};
            uint64_t seed = j->req.seed_given ? j->req.sp.seed : fresh_seed(e);
            slot *ld = &e->slots[lead];
            ld->job = mf_srv_job_ref(j);
            ld->lead = lead, ld->choice = 0, ld->n_choices = j->req.n, ld->n_done = 0, ld->reused = keep;
            ld->got_first = false;
            ld->t_admit = mf_time_now();
            if (start_gen(e, lead, j, 0, keep, seed, &err)) {
                fail_job(e, j, 500, "server_error", "cannot start the request: %s", err.msg);
            } else {
                for (int c = 1, i = 0; c < j->req.n; i++) {
                    if (e->slots[i].state != SLOT_IDLE) continue;
                    slot *sl = &e->slots[i];
                    sl->state = SLOT_WAIT, sl->job = mf_srv_job_ref(j), sl->lead = lead, sl->choice = c++;
                    sl->tools.single = !j->req.parallel_tool_calls;
                    sl->call_id = fresh_seed(e);
                }
                mf_srv_metrics_add(s->m, MF_SRV_C_JOBS_ADMITTED, 1);
                mf_srv_metrics_add(s->m, MF_SRV_C_PROMPT_TOKENS, (uint64_t)j->n_prompt);
                mf_srv_metrics_add(s->m, MF_SRV_C_REUSED_TOKENS, (uint64_t)keep);
                mf_srv_metrics_add(s->m, MF_SRV_C_SHIFTED_TOKENS, (uint64_t)shifted);
                mf_srv_metrics_add(s->m, MF_SRV_C_PREFILLED_TOKENS, (uint64_t)(j->n_prompt - keep));
                mf_srv_metrics_observe(s->m, MF_SRV_H_QUEUE_WAIT, mf_time_now() - j->t_arrival);
                mf_log(MF_LOG_INFO, "[server] slot %d: %s, prompt %d tokens (%d reused, %d of them moved)", lead,
                       j->id, j->n_prompt, keep, shifted);
            }
        }
        mf_srv_job_unref(j);
    }
}

/* The other choices of an n > 1 request start once the lead has the whole prompt in its cells. */
static void start_waiting(mf_srv_engine *e) {
    for (int i = 0; i < e->n; i++) {
        slot *sl = &e->slots[i];
        if (sl->state != SLOT_WAIT) continue;
        slot *ld = &e->slots[sl->lead];
        mf_srv_job *j = sl->job;
        int32_t n;
        slot_tokens(ld, &n);
        if (n < j->n_prompt) continue;
        int32_t keep = j->n_prompt - 1;
        drop_cells(e, i);
        mf_error err = {0};
        if (keep > 0 && mf_seq_cp(e->ctx, sl->lead, i, 0, keep, &err)) keep = 0; /* no cells: prefill it */
        uint64_t seed = j->req.seed_given ? j->req.sp.seed : fresh_seed(e);
        if (start_gen(e, i, j, sl->choice, keep, seed, &err)) {
            fail_job(e, j, 500, "server_error", "cannot start choice %d: %s", sl->choice, err.msg);
        }
    }
}

/* ---------------- control jobs ---------------- */

static void answer_slots(mf_srv_engine *e, mf_srv_job *j) {
    mf_srv_buf b = {0};
    bool ok = mf_srv_buf_add(&b, "[", 1);
    for (int i = 0; i < e->n && ok; i++) {
        const slot *sl = &e->slots[i];
        int32_t n;
        slot_tokens(sl, &n);
        char item[256];
        int k = snprintf(item, sizeof item, "%s{\"id\":%d,\"is_processing\":%s,\"n_ctx\":%d,\"n_cached\":%d,\"id_task\":%s%s%s}",
                         i ? "," : "", i, sl->state == SLOT_IDLE ? "false" : "true", mf_context_n_ctx(e->ctx), n,
                         sl->job ? "\"" : "", sl->job ? sl->job->id : "null", sl->job ? "\"" : "");
        ok = mf_srv_buf_add(&b, item, (size_t)k);
    }
    ok = ok && mf_srv_buf_add(&b, "]", 1);
    if (ok) mf_srv_job_finish(j, 200, b.s);
    else {
        mf_srv_buf_free(&b);
        mf_srv_job_fail(j, 500, "server_error", "out of memory listing the slots");
    }
}

static void slot_action(mf_srv_engine *e, mf_srv_job *j) {
    slot *sl = &e->slots[j->slot];
    if (sl->state != SLOT_IDLE) {
        mf_srv_job_fail(j, 409, "invalid_request_error",
                        "slot %d is processing a request; retry when it is idle (GET /slots)", j->slot);
        return;
    }
    if (j->kind == MF_JOB_SLOT_ERASE) {
        int32_t n = sl->n_cache;
        drop_cells(e, j->slot);
        char body[96];
        snprintf(body, sizeof body, "{\"id_slot\":%d,\"n_erased\":%d}", j->slot, n);
        mf_srv_job_finish(j, 200, strdup(body));
        return;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", e->s->o.slot_save_path, j->filename);
    mf_error err = {0};
    double t0 = mf_time_now();
    char body[512];
    if (j->kind == MF_JOB_SLOT_SAVE) {
        if (mf_session_save(e->ctx, j->slot, sl->cache, sl->n_cache, NULL, NULL, 0, path, &err)) {
            mf_srv_job_fail(j, 500, "server_error", "slot %d: saving '%s' failed: %s", j->slot, j->filename, err.msg);
            return;
        }
        snprintf(body, sizeof body, "{\"id_slot\":%d,\"filename\":\"%s\",\"n_saved\":%d,\"timings\":{\"save_ms\":%.3f}}",
                 j->slot, j->filename, sl->n_cache, (mf_time_now() - t0) * 1e3);
    } else {
        /* the slot's cache is only a cache: it is replaced, and a refused file leaves the slot empty */
        drop_cells(e, j->slot);
        mf_token *toks = NULL;
        int32_t n = 0;
        int rc = mf_session_load(e->ctx, j->slot, path, &toks, &n, NULL, NULL, NULL, &err);
        if (rc) {
            mf_srv_job_fail(j, rc == MF_E_IO || rc == MF_E_NOTFOUND ? 404 : 400, "invalid_request_error",
                            "slot %d: cannot restore '%s': %s", j->slot, j->filename, err.msg);
            return;
        }
        set_cache(sl, toks, n);
        free(toks);
        snprintf(body, sizeof body,
                 "{\"id_slot\":%d,\"filename\":\"%s\",\"n_restored\":%d,\"timings\":{\"restore_ms\":%.3f}}", j->slot,
                 j->filename, n, (mf_time_now() - t0) * 1e3);
    }
    sl->used_at = ++e->tick;
    mf_srv_job_finish(j, 200, strdup(body));
}

/* ---------------- the step ---------------- */

static void fail_all(mf_srv_engine *e, int status, const char *msg) {
    for (int i = 0; i < e->n; i++)
        if (e->slots[i].job) fail_job(e, e->slots[i].job, status, status == 503 ? "unavailable_error" : "server_error", "%s", msg);
}

static void update_gauges(mf_srv_engine *e) {
    mf_srv_metrics *m = e->s->m;
    mf_srv_metrics_set(m, MF_SRV_G_SLOTS_BUSY, mf_srv_engine_busy(e));
    mf_srv_metrics_set(m, MF_SRV_G_KV_USED, mf_kv_cells_used(e->ctx));
    mf_srv_metrics_set(m, MF_SRV_G_QUEUE_DEPTH, mf_srv_queue_depth(&e->s->q));
}

/* The running slot holding the most cells ends with "length": the pool cannot hold every request. */
static void end_biggest(mf_srv_engine *e) {
    int big = -1;
    int32_t most = -1;
    for (int i = 0; i < e->n; i++) {
        int32_t n;
        if (e->slots[i].state != SLOT_RUN) continue;
        slot_tokens(&e->slots[i], &n);
        if (n > most) most = n, big = i;
    }
    if (big < 0) return;
    slot *sl = &e->slots[big];
    mf_log(MF_LOG_INFO, "[server] slot %d: the KV pool is full (%d cells); ending %s with finish_reason length", big,
           mf_context_n_ctx(e->ctx), sl->job->id);
    mf_gen_out out = {.status = MF_GEN_CONTEXT};
    take_output(e, big, &out);
    drop_cells(e, big);
}

/* Speculative decoding: the draft's proposal for decoding slot i (its own draft sequence i), at most
 * room tokens so every other decoding slot keeps its row in this forward. */
static int draft_for(mf_srv_engine *e, int i, const mf_gen_stats *st, int32_t room, mf_token *out, int32_t *n,
                     mf_error *err) {
    *n = 0;
    if (!e->draft || st->turn_generated == 0 || st->n_cached != st->n_tokens - 1) return 0;
    int32_t n_tok;
    const mf_token *toks = mf_gen_tokens(e->slots[i].gen, &n_tok);
    int32_t max = MF_MIN(room, mf_draft_get_params(e->draft)->draft_max);
    if (e->slots[i].job->req.max_tokens >= 0) max = MF_MIN(max, e->slots[i].job->req.max_tokens - st->turn_generated - 1);
    return max > 0 ? mf_draft_propose(e->draft, i, toks, n_tok, max, out, n, err) : 0;
}

static void step(mf_srv_engine *e) {
    start_waiting(e);
    int running = 0;
    for (int i = 0; i < e->n; i++) {
        slot *sl = &e->slots[i];
        if (sl->job && mf_srv_job_is_cancelled(sl->job)) {
            mf_log(MF_LOG_INFO, "[server] slot %d: the client of %s went away; slot freed", i, sl->job->id);
            fail_job(e, sl->job, 499, "server_error", "the client disconnected");
            continue;
        }
        running += sl->state == SLOT_RUN;
    }
    if (!running) return;
    make_room(e, MF_MIN(e->batch_cap, running + e->s->o.n_batch));
    int32_t room = cells_free(e);
    if (room <= 0) {
        end_biggest(e);
        return;
    }
    mf_batch_clear(&e->batch);
    e->batch.capacity = MF_MIN(e->batch_cap, room); /* the batch never asks for more cells than are free */
    int *offered = e->offered, n_off = 0;
    mf_error err = {0};
    int n_decoding = 0; /* decoding slots not yet offered: each keeps a row for its own next token */
    for (int i = 0; i < e->n; i++) {
        if (e->slots[i].state != SLOT_RUN) continue;
        mf_gen_stats st;
        mf_gen_get_stats(e->slots[i].gen, &st);
        n_decoding += st.n_tokens - st.n_cached <= 1;
    }
    for (int pass = 0; pass < 2; pass++) { /* decoding slots first, then prefill chunks */
        for (int i = 0; i < e->n; i++) {
            slot *sl = &e->slots[i];
            if (sl->state != SLOT_RUN) continue;
            mf_gen_stats st;
            mf_gen_get_stats(sl->gen, &st);
            bool decoding = st.n_tokens - st.n_cached <= 1;
            if (decoding != (pass == 0)) continue;
            mf_token drafted[MF_DRAFT_MAX];
            int32_t n_draft = 0;
            if (decoding) {
                n_decoding--;
                if (draft_for(e, i, &st, e->batch.capacity - e->batch.n_tokens - 1 - n_decoding, drafted, &n_draft,
                              &err)) {
                    fail_job(e, sl->job, 500, "server_error", "the draft model failed: %s", err.msg);
                    continue;
                }
            }
            int32_t r0 = e->batch.n_tokens;
            int32_t k = mf_gen_batch_add(sl->gen, &e->batch, drafted, n_draft, &err);
            if (k < 0) {
                fail_job(e, sl->job, 500, "server_error", "cannot schedule the request: %s", err.msg);
                continue;
            }
            sl->row = k > 0 ? (decoding ? r0 : e->batch.n_tokens - 1) : -1; /* a decoding slot's one queued row */
            offered[n_off++] = i;
        }
    }
    e->batch.capacity = e->batch_cap;
    int rc = e->batch.n_tokens ? mf_decode(e->ctx, &e->batch, &err) : 0;
    if (rc) {
        for (int k = 0; k < n_off; k++)
            if (e->slots[offered[k]].gen) mf_gen_batch_cancel(e->slots[offered[k]].gen);
        fprintf(stderr, "[server] step failed: %s; answering the %d request(s) in it with 500\n", err.msg, n_off);
        for (int k = 0; k < n_off; k++)
            if (e->slots[offered[k]].job) fail_job(e, e->slots[offered[k]].job, 500, "server_error", "the forward failed: %s", err.msg);
        e->stall = 0;
        return;
    }
    mf_srv_metrics_add(e->s->m, MF_SRV_C_STEPS, 1);
    /* every slot's sampler over all n_vocab logits (milliseconds with top_k 0), side by side on the pool
     * instead of one after another on this thread; batch_done commits the draws */
    for (int k = 0; k < n_off; k++) e->sampled[k] = e->slots[offered[k]].gen;
    mf_gen_batch_sample(e->sampled, n_off);
    bool progress = e->batch.n_tokens > 0;
    for (int k = 0; k < n_off; k++) {
        slot *sl = &e->slots[offered[k]];
        if (!sl->gen) continue;
        mf_gen_out out;
        if (mf_gen_batch_done(sl->gen, &out, &err)) {
            fail_job(e, sl->job, 500, "server_error", "sampling failed: %s", err.msg);
            continue;
        }
        progress |= out.status != MF_GEN_RUNNING;
        take_output(e, offered[k], &out);
    }
    e->stall = progress ? 0 : e->stall + 1;
    if (e->stall >= STALL_STEP_LIMIT) {
        int live = mf_srv_engine_busy(e), queued = mf_srv_queue_depth(&e->s->q);
        fprintf(stderr,
                "[server] the worker stalled: %d consecutive steps left the engine busy without advancing its "
                "work (%d run(s), %d queued job(s) answered with 500); stopping the worker\n",
                STALL_STEP_LIMIT, live, queued);
        mf_srv_metrics_add(e->s->m, MF_SRV_C_WORKER_STALLED, 1);
        fail_all(e, 500, "the worker stalled");
        e->stopped = true;
    }
}

/* ---------------- the thread ---------------- */

static int load(mf_srv_engine *e, mf_error *err) {
    mf_server *s = e->s;
    mf_model_params mp = mf_model_default_params();
    mp.n_gpu_layers = s->o.n_gpu_layers;
    mp.gpu_layers_origin = s->o.gpu_layers_origin;
    mp.n_threads = s->o.n_threads; /* the repack at load too */
    int rc = mf_model_load(s->o.model_path, &mp, &s->model, err);
    if (rc) return rc;
    mf_model_get_info(s->model, &s->info);
    if (s->info.offload_report[0]) fprintf(stderr, "[server] %s\n", s->info.offload_report);
    mf_error ierr = {0}; /* a model without a tokenizer has no infill stage; requests that list it are told why */
    if (mf_infill_vocab_new(s->model, &s->infill, &ierr))
        snprintf(s->infill_why, sizeof s->infill_why, "%.250s", ierr.msg);
    mp.n_gpu_layers = 0; /* the draft model, if any, runs on the CPU */
    mp.gpu_layers_origin = NULL;
    mf_context_params cp = mf_context_default_params();
    int32_t per_slot = MF_MIN(s->info.n_ctx_train > 0 ? s->info.n_ctx_train : 4096, 4096);
    /* an embeddings server runs one input at a time: one slot's share is enough */
    cp.n_ctx = s->o.n_ctx > 0 ? s->o.n_ctx : per_slot * (s->o.embeddings ? 1 : s->o.n_parallel);
    cp.n_threads = s->o.n_threads;
    cp.n_ubatch = s->o.n_batch;
    cp.type_k = s->o.type_k;
    cp.type_v = s->o.type_v;
    cp.rope = s->o.rope;
    cp.embeddings = s->o.embeddings;
    bool from_file = false;
    if (s->o.embeddings && (rc = mf_embed_pooling(s->model, s->o.pooling, &e->pooling, &from_file, err))) return rc;
    if (s->o.embeddings) {
        /* rank pooling (--rerank, or a reranker's own): the classifier head ends the graph, /v1/rerank is served */
        s->ranking = cp.classifier = e->pooling == MF_POOLING_RANK;
        snprintf(s->pooling_desc, sizeof s->pooling_desc, "%s, %s pooling (%s)", s->ranking ? "reranking" : "embeddings",
                 mf_pooling_name(e->pooling),
                 from_file                          ? "the model's"
                 : s->o.pooling == MF_POOLING_MODEL ? "the file names none: last"
                 : s->o.rerank                      ? "--rerank"
                                                    : "--pooling");
    }
    if ((rc = mf_context_new(s->model, &cp, &e->ctx, err))) return rc;
    s->n_ctx = mf_context_n_ctx(e->ctx);
    e->batch_cap = s->o.n_batch;
    if ((rc = mf_batch_init(&e->batch, e->batch_cap, err))) return rc;
    if (s->o.draft_path) {
        if ((rc = mf_model_load(s->o.draft_path, &mp, &e->draft_model, err))) return rc;
        mf_draft_params dp = s->o.draft;
        dp.n_seq = e->n;
        dp.n_ctx = s->n_ctx; /* each slot's draft sequence gets an equal share */
        if ((rc = mf_draft_new(e->draft_model, e->ctx, &dp, &e->draft, err))) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            return mf_err(err, rc, "draft model '%s': %s", s->o.draft_path, why);
        }
    }
    mf_srv_metrics_set(s->m, MF_SRV_G_SLOTS_TOTAL, e->n);
    mf_srv_metrics_set(s->m, MF_SRV_G_KV_TOTAL, s->n_ctx);
    return 0;
}

/* Drain: after the deadline, whatever still runs or waits is answered 503. */
static void reject_queued(mf_srv_engine *e, const char *msg) {
    mf_srv_job *j;
    while ((j = mf_srv_queue_pop(&e->s->q, 0))) {
        mf_srv_job_fail(j, 503, "unavailable_error", "%s", msg);
        mf_srv_job_unref(j);
    }
}

void *mf_srv_engine_main(void *arg) {
    mf_server *s = arg;
    mf_srv_engine *e = s->eng;
    mf_error err = {0};
    if (load(e, &err)) {
        /* mf_server_run returns this error and the command prints it, once */
        snprintf(s->load_error, sizeof s->load_error, "%.390s", err.msg);
        atomic_store(&s->state, MF_SRV_FAILED);
        reject_queued(e, "the model failed to load");
        return NULL;
    }
    int expected = MF_SRV_LOADING;
    atomic_compare_exchange_strong(&s->state, &expected, MF_SRV_READY);
    double drain_deadline = 0;
    while (!e->stopped) {
        bool draining = atomic_load(&s->state) == MF_SRV_DRAINING;
        if (draining && drain_deadline == 0) drain_deadline = mf_time_now() + s->o.drain_ms / 1000.0;
        if (draining && mf_time_now() > drain_deadline) {
            fail_all(e, 503, "server shutting down");
            reject_queued(e, "server shutting down");
            break;
        }
        admit(e);
        update_gauges(e);
        if (mf_srv_engine_busy(e) == 0) {
            if (draining && mf_srv_queue_depth(&s->q) == 0) break;
            mf_srv_job *j = mf_srv_queue_pop(&s->q, 100);
            if (j) mf_srv_queue_unpop(&s->q, j); /* only waited for work: the queue keeps it */
            continue;
        }
        step(e);
    }
    if (e->stopped) reject_queued(e, "server shutting down");
    update_gauges(e);
    return NULL;
}
