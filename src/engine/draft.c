/* The draft model of speculative decoding (include/minfer.h, "speculative decoding"): its own context and
 * KV cache on the target's threadpool, a vocabulary check against the target, and greedy proposals that
 * the generator then verifies (mf_gen_step_draft / mf_gen_batch_add).
 *
 * Why greedy drafting keeps the target's distribution exactly: the generator commits a drafted token only
 * when the target's own sample at that row (same sampler, same RNG draw as plain decoding) equals it.
 * For a deterministic draft q is one-hot on the drafted x, so the Leviathan/Chen rule "accept with
 * probability min(1, p(x)/q(x))" accepts with probability p(x) - exactly the chance that the target's
 * sample is x - and on rejection draws from norm(max(0, p - q)), which is p restricted to tokens != x:
 * exactly the target's sample conditioned on not being x.  So the committed tokens are distributed as the
 * target's, and, since the draws are the same ones, seeded output is bitwise the plain output
 * (docs/API.md, "Speculative decoding"). */
#include "engine/engine_impl.h"

#include "core/core.h"
#include "tok/tok.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct mf_draft {
    mf_context *ctx; /* the draft model's own context and KV cache, on the target's pool */
    mf_draft_params p;
    int32_t n_vocab;
    mf_token **cached; /* per sequence: the tokens its KV cache holds at positions 0.. */
    int32_t *n_cached, *cap;
    mf_batch batch;
    mf_draft_stats st;
};

mf_draft_params mf_draft_default_params(void) {
    return (mf_draft_params){.draft_max = 16, .draft_min = 0, .p_min = 0.75f, .n_seq = 1, .type_k = MF_KV_TYPE_F16,
                             .type_v = MF_KV_TYPE_F16};
}

static const char *special_name(int i) {
    static const char *names[] = {"BOS", "EOS", "EOT", "padding"};
    return names[i];
}

static void special_ids(const mf_tok *t, int32_t ids[4]) {
    ids[0] = mf_tok_bos(t);
    ids[1] = mf_tok_eos(t);
    ids[2] = mf_tok_eot(t);
    ids[3] = mf_tok_pad(t);
}

/* A short printable form of a vocabulary text for a message ("Ġhello", bytes beyond 48 cut). */
static void show(char *dst, size_t cap, const char *s, size_t len) {
    size_t n = MF_MIN(len, (size_t)48);
    size_t j = 0;
    for (size_t i = 0; i < n && j + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != 0x7f && c != '\'') dst[j++] = (char)c;
        else j += (size_t)snprintf(dst + j, cap - j, "\\x%02x", c);
    }
    dst[j] = 0;
    if (len > n && j + 4 < cap) strcat(dst, "...");
}

int mf_draft_check_vocab(const mf_model *target, const mf_model *draft, mf_error *err) {
    const char *how = "(a draft must use the target's tokenizer: pick a draft of the same model family, e.g. "
                      "written with mf-genmodel --draft from the target's options)";
    if (target->hp.n_vocab != draft->hp.n_vocab)
        return mf_err(err, MF_E_INVAL, "draft vocabulary differs: the target has %d tokens, the draft %d %s",
                      target->hp.n_vocab, draft->hp.n_vocab, how);
    if (!target->tok != !draft->tok)
        return mf_err(err, MF_E_INVAL, "draft vocabulary differs: the %s has a tokenizer, the %s none %s",
                      target->tok ? "target" : "draft", target->tok ? "draft" : "target", how);
    if (target->tok) {
        int32_t nt = mf_tok_n_vocab(target->tok), nd = mf_tok_n_vocab(draft->tok);
        if (nt != nd)
            return mf_err(err, MF_E_INVAL, "draft vocabulary differs: the target's tokenizer has %d tokens, the "
                          "draft's %d %s", nt, nd, how);
        for (int32_t id = 0; id < nt; id++) {
            size_t lt, ld;
            const char *a = mf_tok_text(target->tok, id, &lt), *b = mf_tok_text(draft->tok, id, &ld);
            if (lt != ld || memcmp(a, b, lt)) {
                char sa[256], sb[256];
                show(sa, sizeof sa, a, lt);
                show(sb, sizeof sb, b, ld);
                return mf_err(err, MF_E_INVAL, "draft vocabulary differs at token %d: the target's text is '%s', the "
                              "draft's '%s' %s", id, sa, sb, how);
            }
        }
        int32_t st[4], sd[4];
        special_ids(target->tok, st);
        special_ids(draft->tok, sd);
        for (int i = 0; i < 4; i++)
            if (st[i] != sd[i])
                return mf_err(err, MF_E_INVAL, "draft vocabulary differs: the target's %s id is %d, the draft's %d "
                              "(-1 = none) %s", special_name(i), st[i], sd[i], how);
    }
    if (target->n_eog != draft->n_eog || memcmp(target->eog, draft->eog, sizeof *target->eog * (size_t)target->n_eog))
        return mf_err(err, MF_E_INVAL, "draft vocabulary differs: the target has %d end-of-generation ids (first %d), "
                      "the draft %d (first %d) %s", target->n_eog, target->n_eog ? target->eog[0] : -1,
                      draft->n_eog, draft->n_eog ? draft->eog[0] : -1, how);
    return 0;
}

void mf_draft_free(mf_draft *d) {
    if (!d) return;
    if (d->cached)
        for (int32_t s = 0; s < d->p.n_seq; s++) free(d->cached[s]);
    free(d->cached);
    free(d->n_cached);
    free(d->cap);
    mf_batch_free(&d->batch);
    mf_context_free(d->ctx);
    free(d);
}

int mf_draft_new(mf_model *draft_model, mf_context *target, const mf_draft_params *params, mf_draft **out,
                 mf_error *err) {
    *out = NULL;
    mf_draft_params p = params ? *params : mf_draft_default_params();
    if (p.draft_max < 1 || p.draft_max > MF_DRAFT_MAX)
        return mf_err(err, MF_E_INVAL, "--draft-max must be in 1..%d, got %d (drop -md to decode without a draft)",
                      MF_DRAFT_MAX, p.draft_max);
    if (p.draft_min < 0 || p.draft_min > p.draft_max)
        return mf_err(err, MF_E_INVAL, "--draft-min must be in 0..%d (--draft-max), got %d", p.draft_max, p.draft_min);
    if (!(p.p_min >= 0.0f && p.p_min <= 1.0f))
        return mf_err(err, MF_E_INVAL, "--draft-p-min must be in 0..1, got %g", (double)p.p_min);
    if (p.n_seq < 1) return mf_err(err, MF_E_INVAL, "draft: n_seq must be >= 1, got %d", p.n_seq);
    int rc = mf_draft_check_vocab(target->model, draft_model, err);
    if (rc) return rc;
    mf_draft *d = calloc(1, sizeof *d);
    if (!d) return mf_err(err, MF_E_NOMEM, "draft: out of memory");
    d->p = p;
    d->n_vocab = draft_model->hp.n_vocab;
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = p.n_ctx ? p.n_ctx : target->n_ctx;
    cp.type_k = p.type_k;
    cp.type_v = p.type_v;
    if ((rc = mf_context_new_on(draft_model, &cp, target, &d->ctx, err))) goto fail;
    d->cached = calloc((size_t)p.n_seq, sizeof *d->cached);
    d->n_cached = calloc((size_t)p.n_seq, sizeof *d->n_cached);
    d->cap = calloc((size_t)p.n_seq, sizeof *d->cap);
    if (!d->cached || !d->n_cached || !d->cap) {
        rc = mf_err(err, MF_E_NOMEM, "draft: out of memory");
        goto fail;
    }
    if ((rc = mf_batch_init(&d->batch, 512, err))) goto fail;
    *out = d;
    return 0;
fail:
    mf_draft_free(d);
    return rc;
}

const mf_draft_params *mf_draft_get_params(const mf_draft *d) {
    return &d->p;
}

void mf_draft_get_stats(const mf_draft *d, mf_draft_stats *st) {
    *st = d->st;
}

/* The draft's greedy pick and its confidence, by llama.cpp's rule (common/speculative.cpp: the draft
 * samples with top-k 10 then dist, and a drafted token's probability is its softmax share among those
 * 10 logits, at temperature 1 whatever the target samples with).  One pass keeps the 10 highest logits
 * (almost every logit loses its one compare with the 10th), then 10 exps: the full-vocabulary softmax in
 * double this replaced cost more than the draft's whole forward (151936 exps per drafted token). */
#define DRAFT_TOP_K 10
mf_token mf_draft_pick(const float *lg, int32_t n, float *prob) {
    float v[DRAFT_TOP_K];
    int32_t id[DRAFT_TOP_K], k = 0;
    for (int32_t i = 0; i < n; i++) {
        if (k == DRAFT_TOP_K && !(lg[i] > v[k - 1])) continue;
        int32_t j = k < DRAFT_TOP_K ? k++ : k - 1; /* the slot it enters from: the end, or the 10th */
        while (j > 0 && lg[i] > v[j - 1]) { /* strictly greater: the lowest id wins a tie, as in the scan */
            v[j] = v[j - 1], id[j] = id[j - 1];
            j--;
        }
        v[j] = lg[i], id[j] = i;
    }
    double sum = 0;
    for (int32_t j = 0; j < k; j++) sum += exp((double)(v[j] - v[0]));
    *prob = (float)(1.0 / sum);
    return id[0];
}

static int grow_seq(mf_draft *d, mf_seq_id s, int32_t need, mf_error *err) {
    if (need <= d->cap[s]) return 0;
    int32_t nc = MF_MAX(need, d->cap[s] ? 2 * d->cap[s] : 256);
    mf_token *q = realloc(d->cached[s], sizeof *q * (size_t)nc);
    if (!q) return mf_err(err, MF_E_NOMEM, "draft: out of memory for %d tokens", nc);
    d->cached[s] = q;
    d->cap[s] = nc;
    return 0;
}

/* Decodes tokens [from, to) of the sequence's cached list (already written there), logits on the last. */
static int prefill(mf_draft *d, mf_seq_id s, int32_t from, int32_t to, mf_error *err) {
    for (int32_t i = from; i < to;) {
        int32_t n = MF_MIN(to - i, d->batch.capacity);
        mf_batch_clear(&d->batch);
        for (int32_t k = 0; k < n; k++) mf_batch_add(&d->batch, d->cached[s][i + k], i + k, s, i + k == to - 1);
        int rc = mf_decode(d->ctx, &d->batch, err);
        if (rc) {
            mf_seq_rm(d->ctx, s, i, -1);
            d->n_cached[s] = i;
            return rc;
        }
        i += n;
        d->n_cached[s] = i;
    }
    return 0;
}

int mf_draft_propose(mf_draft *d, mf_seq_id seq, const mf_token *hist, int32_t n_hist, int32_t max, mf_token *out,
                     int32_t *n_out, mf_error *err) {
    *n_out = 0;
    if (seq < 0 || seq >= d->p.n_seq)
        return mf_err(err, MF_E_INVAL, "draft: sequence %d is not in 0..%d (n_seq)", seq, d->p.n_seq - 1);
    if (n_hist < 1 || !hist) return mf_err(err, MF_E_INVAL, "draft: a proposal needs a history, got %d tokens", n_hist);
    int32_t room = d->ctx->n_ctx / d->p.n_seq; /* each slot's share of the draft's cells */
    max = MF_MIN(max, MF_MIN(d->p.draft_max, room - n_hist));
    if (max <= 0 || max < d->p.draft_min) return 0; /* the draft cannot look that far: plain decoding */
    /* keep the longest common prefix; the last history token is always decoded again for its logits */
    int32_t keep = 0, lim = MF_MIN(d->n_cached[seq], n_hist - 1);
    while (keep < lim && d->cached[seq][keep] == hist[keep]) keep++;
    if (keep < d->n_cached[seq]) mf_seq_rm(d->ctx, seq, keep, -1);
    d->n_cached[seq] = keep;
    int rc = grow_seq(d, seq, n_hist + max, err);
    if (rc) return rc;
    memcpy(d->cached[seq] + keep, hist + keep, sizeof *hist * (size_t)(n_hist - keep));
    d->st.n_prefilled += n_hist - keep;
    if ((rc = prefill(d, seq, keep, n_hist, err))) return rc;
    int32_t n = 0;
    for (;;) {
        float prob;
        mf_token t = mf_draft_pick(mf_get_logits(d->ctx, -1), d->n_vocab, &prob);
        if (prob < d->p.p_min) break; /* an unsure draft costs verify rows that will likely be rejected */
        out[n++] = t;
        if (n == max) break;
        d->cached[seq][d->n_cached[seq]] = t;
        if ((rc = prefill(d, seq, d->n_cached[seq], d->n_cached[seq] + 1, err))) return rc;
    }
    if (n < d->p.draft_min) n = 0; /* llama.cpp's rule: too short a draft is not worth a verify */
    d->st.n_proposals++;
    d->st.n_drafted += n;
    *n_out = n;
    return 0;
}

void mf_draft_seq_clear(mf_draft *d, mf_seq_id seq) {
    if (seq < 0 || seq >= d->p.n_seq) return;
    mf_seq_rm(d->ctx, seq, -1, -1);
    d->n_cached[seq] = 0;
}

int mf_gen_step_spec(mf_gen *g, mf_draft *d, mf_gen_out *out, mf_error *err) {
    int32_t n_tok;
    const mf_token *toks = mf_gen_tokens(g, &n_tok);
    mf_gen_stats st;
    mf_gen_get_stats(g, &st);
    int32_t n_draft = 0;
    /* draft only for a decode step: the history is cached except the last sampled token */
    if (d && mf_gen_status(g) == MF_GEN_RUNNING && st.n_cached == n_tok - 1 && st.turn_generated > 0 &&
        !mf_gen_abort_asked(g)) {
        const mf_draft_params *p = &d->p;
        mf_token buf[MF_DRAFT_MAX];
        double t0 = mf_time_now();
        int32_t max = MF_MIN(p->draft_max, mf_gen_turn_left(g) - 1);
        int rc = max > 0 ? mf_draft_propose(d, mf_gen_seq_of(g), toks, n_tok, max, buf, &n_draft, err) : 0;
        mf_gen_add_decode_time(g, mf_time_now() - t0); /* drafting is part of the decode's cost */
        if (rc) return rc;
        return mf_gen_step_draft(g, buf, n_draft, out, err);
    }
    return mf_gen_step_draft(g, NULL, 0, out, err);
}
