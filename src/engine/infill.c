/* The infill sampler stage (llama.cpp's llama_sampler_infill, which llama.vim and llama.vscode put in their
 * /infill requests' `samplers`): made for fill-in-the-middle, it ends the completion when the model leans
 * towards ending it and otherwise narrows the candidates to the few whose text most of the probability backs.
 *
 * Over the candidates, sorted and softmax'd (p):
 *   1. p_eog, p_txt: the probability of the end-of-generation tokens and of the rest.  When
 *      3 * p_eog * n > p_txt (n: the candidates that can still be drawn), only the EOG tokens stay.
 *   2. Tokens whose texts share a beginning are one choice: for every pair (i0, i1) in the candidates' order
 *      where i0's text is a prefix of i1's, the one with the smaller p gives its p to the other and leaves.
 *   3. Text tokens under p 0.2 leave (EOG tokens stay).  When no text token is left, the only candidate is
 *      the vocabulary's EOT token.  Else p is renormalised, and text tokens under 1 / (texts left + 1) leave.
 * The draw after it recomputes p from the survivors' logits, as llama.cpp's dist does, so what the stage
 * decides is which tokens survive (a merged token keeps its own logit).  Step 2 compares every pair: the
 * sampler refuses the stage unless top_k bounds the candidates (MF_INFILL_MAX_TOP_K). */
#include "engine/engine_impl.h"

#include "model/model.h"
#include "tok/tok.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct mf_infill_vocab {
    int32_t n;
    const char **piece; /* each token's text as llama.cpp's token_to_piece(special = false) gives it */
    int32_t *len;       /* 0 for control tokens, which render as nothing there */
    unsigned char *eog;
    mf_token eot;  /* the one candidate when no text token is left */
    char *own;     /* mf_infill_vocab_from_pieces: the texts' copies */
};

void mf_infill_vocab_free(mf_infill_vocab *v) {
    if (!v) return;
    free(v->piece);
    free(v->len);
    free(v->eog);
    free(v->own);
    free(v);
}

static int alloc_vocab(int32_t n, mf_infill_vocab **out, mf_error *err) {
    mf_infill_vocab *v = calloc(1, sizeof *v);
    if (v) {
        v->n = n;
        v->piece = calloc((size_t)n, sizeof *v->piece);
        v->len = calloc((size_t)n, sizeof *v->len);
        v->eog = calloc((size_t)n, 1);
    }
    if (!v || !v->piece || !v->len || !v->eog) {
        mf_infill_vocab_free(v);
        return mf_err(err, MF_E_NOMEM, "out of memory for the infill sampler's view of %d tokens", n);
    }
    *out = v;
    return 0;
}

int mf_infill_vocab_new(const mf_model *model, mf_infill_vocab **out, mf_error *err) {
    *out = NULL;
    if (!model->tok)
        return mf_err(err, MF_E_UNSUPPORTED, "the infill sampler needs the model's tokenizer: %s", model->tok_why);
    const int32_t n = mf_tok_n_vocab(model->tok);
    mf_infill_vocab *v;
    int rc = alloc_vocab(n, &v, err);
    if (rc) return rc;
    for (int32_t id = 0; id < n; id++) {
        const mf_tok_type t = mf_tok_type_of(model->tok, id);
        size_t len = 0;
        const char *w = t == MF_TOKT_CONTROL || t == MF_TOKT_UNKNOWN ? "" : mf_tok_piece(model->tok, id, &len);
        v->piece[id] = w ? w : "";
        v->len[id] = w ? (int32_t)len : 0;
        v->eog[id] = mf_model_is_eog(model, id);
    }
    /* llama.cpp's token_eot(); a vocabulary without one ends on its first end-of-generation token */
    v->eot = mf_tok_eot(model->tok);
    if (v->eot < 0 || v->eot >= n) v->eot = model->n_eog > 0 ? model->eog[0] : -1;
    if (v->eot < 0) {
        mf_infill_vocab_free(v);
        return mf_err(err, MF_E_UNSUPPORTED,
                      "the infill sampler ends a completion on the model's end-of-text token, and this vocabulary "
                      "names none (no eot, eos or other end-of-generation token)");
    }
    *out = v;
    return 0;
}

int mf_infill_vocab_from_pieces(const char *const *pieces, const bool *eog, int32_t n, mf_token eot,
                                mf_infill_vocab **out, mf_error *err) {
    *out = NULL;
    if (n <= 0 || eot < 0 || eot >= n) return mf_err(err, MF_E_INVAL, "infill vocabulary: %d tokens, eot %d", n, eot);
    mf_infill_vocab *v;
    int rc = alloc_vocab(n, &v, err);
    if (rc) return rc;
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) total += strlen(pieces[i]) + 1;
    if (!(v->own = malloc(total))) {
        mf_infill_vocab_free(v);
        return mf_err(err, MF_E_NOMEM, "out of memory");
    }
    char *at = v->own;
    for (int32_t i = 0; i < n; i++) {
        const size_t len = strlen(pieces[i]);
        memcpy(at, pieces[i], len + 1);
        v->piece[i] = at, v->len[i] = (int32_t)len, v->eog[i] = eog[i];
        at += len + 1;
    }
    v->eot = eot;
    *out = v;
    return 0;
}

int32_t mf_infill_vocab_size(const mf_infill_vocab *v) {
    return v ? v->n : 0;
}

mf_token mf_infill_vocab_eot(const mf_infill_vocab *v) {
    return v->eot;
}

static bool is_eog(const mf_infill_vocab *v, mf_token id) {
    return id >= 0 && id < v->n && v->eog[id];
}

/* Keeps the end-of-generation candidates; returns how many. */
static int32_t keep_eog_only(const mf_infill_vocab *v, mf_cand *c, int32_t n) {
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (is_eog(v, c[i].id)) c[m++] = c[i];
    return m;
}

/* Step 2: i0's text a prefix of i1's (llama.cpp's pair loop, in the candidates' order).  The texts' first bytes
 * and lengths are read once, so the n^2 pairs mostly end on one byte compare (n <= MF_INFILL_MAX_TOP_K: the
 * sampler refuses the stage without such a top_k). */
static void merge_prefixes(const mf_infill_vocab *v, mf_cand *c, int32_t n) {
    int32_t len[MF_INFILL_MAX_TOP_K];
    unsigned char first[MF_INFILL_MAX_TOP_K];
    if (n > MF_INFILL_MAX_TOP_K) n = MF_INFILL_MAX_TOP_K;
    for (int32_t i = 0; i < n; i++) {
        len[i] = v->len[c[i].id];
        first[i] = len[i] ? (unsigned char)v->piece[c[i].id][0] : 0;
    }
    for (int32_t i0 = 0; i0 < n; i0++) {
        for (int32_t i1 = 0; i1 < n; i1++) {
            if (c[i0].logit == -INFINITY) break;
            if (i0 == i1 || c[i1].logit == -INFINITY) continue;
            const int32_t l0 = len[i0];
            if (l0 <= 0 || l0 > len[i1] || first[i0] != first[i1] ||
                memcmp(v->piece[c[i0].id], v->piece[c[i1].id], (size_t)l0))
                continue;
            int32_t dst = i0, src = i1;
            if (c[i1].p > c[i0].p) dst = i1, src = i0;
            c[dst].p += c[src].p;
            c[src].logit = -INFINITY;
            c[src].p = 0.0f;
        }
    }
}

/* Text tokens under thold leave; the rest's p renormalised.  *n_text: text tokens left. */
static int32_t threshold(const mf_infill_vocab *v, mf_cand *c, int32_t n, float thold, int32_t *n_text) {
    int32_t m = 0;
    float sum = 0.0f;
    *n_text = 0;
    for (int32_t i = 0; i < n; i++) {
        const bool eog = is_eog(v, c[i].id);
        if (c[i].p < thold && !eog) continue;
        *n_text += !eog;
        sum += c[i].p;
        c[m++] = c[i];
    }
    if (*n_text && sum > 0)
        for (int32_t i = 0; i < m; i++) c[i].p /= sum;
    return m;
}

int32_t mf_infill_apply(const mf_infill_vocab *v, mf_cand *c, int32_t n, int32_t n_possible, bool eot_banned) {
    float p_txt = 0.0f, p_eog = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        if (is_eog(v, c[i].id)) p_eog += c[i].p;
        else p_txt += c[i].p;
    }
    if (3.0f * p_eog * (float)n_possible > p_txt) {
        const int32_t m = keep_eog_only(v, c, n);
        for (int32_t i = 0; i < m; i++) c[i].p /= p_eog;
        return m;
    }
    merge_prefixes(v, c, n);
    int32_t n_text = 0;
    for (int32_t i = 0; i < n; i++) n_text += c[i].p >= 0.2f && !is_eog(v, c[i].id);
    if (!n_text) {
        /* llama.cpp's answer is the EOT token alone; where a logit_bias bans it (a ban is never sampled) the
         * stage leaves the candidates as the merge left them */
        if (eot_banned) return n;
        c[0] = (mf_cand){v->eot, 1.0f, 1.0f};
        return 1;
    }
    const int32_t m = threshold(v, c, n, 0.2f, &n_text);
    return threshold(v, c, m, 1.0f / (float)(n_text + 1), &n_text);
}
