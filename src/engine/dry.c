/* DRY ("don't repeat yourself"): the sampler stage that penalizes a token which would extend a repeat of
 * what the history already holds (llama.cpp's dry sampler, after koboldcpp's), and the sequence breakers
 * that stop a repeat from reaching back across them.
 *
 * Per step, over the window W of the last dry_last_n accepted tokens r (r[0] the newest, backwards):
 *   1. the newest breaker in the window limits how far back a repeat may reach (rep_limit);
 *   2. Z[k] = the longest common prefix of r and r[k..] (the Z-algorithm, linear): the window's suffix
 *      recurs ending k tokens back, for min(Z[k], rep_limit) tokens;
 *   3. the token that followed that occurrence, r[k-1], would extend the repeat: its longest such run n;
 *   4. a token with n >= dry_allowed_length loses dry_multiplier * dry_base^(n - dry_allowed_length), unless
 *      it is a breaker by itself (its exponent is capped where the power would overflow a float). */
#include "engine/engine_impl.h"

#include "tok/tok.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { BREAKER_MAX_BYTES = 40, BREAKER_MAX_TAIL = 20 };

/* Sequences sorted by head token: head[i] then the tail tokens tail[off[i] .. off[i+1]). */
struct mf_dry_breakers {
    int32_t n;
    mf_token *head;
    int32_t *off;
    mf_token *tail;
};

void mf_dry_breakers_free(mf_dry_breakers *b) {
    if (!b) return;
    free(b->head);
    free(b->off);
    free(b->tail);
    free(b);
}

int32_t mf_dry_default_breakers(const char *const **strs) {
    static const char *const k_default[] = {"\n", ":", "\"", "*"};
    *strs = k_default;
    return (int32_t)(sizeof k_default / sizeof k_default[0]);
}

int32_t mf_dry_breakers_count(const mf_dry_breakers *b) {
    return b ? b->n : 0;
}

mf_token mf_dry_breakers_at(const mf_dry_breakers *b, int32_t i, const mf_token **tail, int32_t *n_tail) {
    *tail = b->tail + b->off[i];
    *n_tail = b->off[i + 1] - b->off[i];
    return b->head[i];
}

/* ---------------- building ---------------- */

typedef struct {
    mf_token head;
    int32_t at, len; /* into the tail pool */
} entry;

typedef struct {
    entry *e;
    int32_t n, cap;
    mf_token *pool;
    int32_t n_pool, cap_pool;
} builder;

static int grow(void **p, int32_t *cap, int32_t need, size_t elem, mf_error *err) {
    if (need <= *cap) return 0;
    int32_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, elem * (size_t)c);
    if (!q) return mf_err(err, MF_E_NOMEM, "out of memory for %d DRY sequence breakers", need);
    *p = q, *cap = c;
    return 0;
}

static bool same_tail(const builder *b, const entry *e, const mf_token *t, int32_t len) {
    return e->len == len && (!len || !memcmp(b->pool + e->at, t, sizeof *t * (size_t)len));
}

/* One (head, tail) unless the head already has that tail (the entries of one head are contiguous while a
 * string is processed, and a head met again by a later string is checked against all of its entries). */
static int add(builder *b, mf_token head, const mf_token *t, int32_t len, mf_error *err) {
    for (int32_t i = b->n - 1; i >= 0; i--)
        if (b->e[i].head == head && same_tail(b, &b->e[i], t, len)) return 0;
    int rc = grow((void **)&b->e, &b->cap, b->n + 1, sizeof *b->e, err);
    if (!rc) rc = grow((void **)&b->pool, &b->cap_pool, b->n_pool + len, sizeof *b->pool, err);
    if (rc) return rc;
    if (len) memcpy(b->pool + b->n_pool, t, sizeof *t * (size_t)len);
    b->e[b->n++] = (entry){head, b->n_pool, len};
    b->n_pool += len;
    return 0;
}

/* The tokens after the first i bytes of s (tokenized without specials, cut at BREAKER_MAX_TAIL). */
static int tail_of(const mf_tok *tok, const char *s, size_t len, size_t i, mf_tok_ids *out, mf_error *err) {
    out->n = 0;
    int rc = mf_tok_encode(tok, s + i, len - i, 0, out, err);
    if (!rc && out->n > BREAKER_MAX_TAIL) out->n = BREAKER_MAX_TAIL;
    return rc;
}

/* Every token whose text holds s, or ends in a beginning of s (then with the tokens of the rest). */
static int add_string(builder *b, const mf_tok *tok, const char *s, size_t len, mf_error *err) {
    mf_tok_ids tails[BREAKER_MAX_BYTES] = {{0}}; /* tails[i]: the rest after i bytes, tokenized once */
    bool have[BREAKER_MAX_BYTES] = {false};
    int rc = 0;
    const int32_t n_vocab = mf_tok_n_vocab(tok);
    for (int32_t id = 0; id < n_vocab && !rc; id++) {
        size_t wl;
        const char *w = mf_tok_piece(tok, id, &wl);
        if (!w || !wl) continue;
        if (wl >= len && memmem(w, wl, s, len)) {
            rc = add(b, id, NULL, 0, err);
            continue;
        }
        for (size_t pos = 0; pos < wl && !rc; pos++) {
            const size_t i = wl - pos; /* the piece's last i bytes would be s's first i */
            if (i >= len || memcmp(w + pos, s, i)) continue;
            if (!have[i] && !(rc = tail_of(tok, s, len, i, &tails[i], err))) have[i] = true;
            if (!rc) rc = add(b, id, tails[i].ids, (int32_t)tails[i].n, err);
        }
    }
    for (int i = 0; i < BREAKER_MAX_BYTES; i++) free(tails[i].ids);
    return rc;
}

static int entry_cmp(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->head != y->head) return x->head < y->head ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at; /* stable: the order they were found */
}

static int finish(builder *b, mf_dry_breakers **out, mf_error *err) {
    mf_dry_breakers *d = calloc(1, sizeof *d);
    if (!d) return mf_err(err, MF_E_NOMEM, "out of memory");
    if (b->n) qsort(b->e, (size_t)b->n, sizeof *b->e, entry_cmp); /* (no pool nor entries when none was found) */
    d->n = b->n;
    d->head = malloc(sizeof *d->head * (size_t)MF_MAX(b->n, 1));
    d->off = malloc(sizeof *d->off * (size_t)(b->n + 1));
    d->tail = malloc(sizeof *d->tail * (size_t)MF_MAX(b->n_pool, 1));
    if (!d->head || !d->off || !d->tail) {
        mf_dry_breakers_free(d);
        return mf_err(err, MF_E_NOMEM, "out of memory for %d DRY sequence breakers", b->n);
    }
    int32_t at = 0;
    for (int32_t i = 0; i < b->n; i++) {
        d->head[i] = b->e[i].head;
        d->off[i] = at;
        if (b->e[i].len) memcpy(d->tail + at, b->pool + b->e[i].at, sizeof *d->tail * (size_t)b->e[i].len);
        at += b->e[i].len;
    }
    d->off[b->n] = at;
    *out = d;
    return 0;
}

int mf_dry_breakers_new(const mf_model *model, const char *const *seqs, int32_t n, mf_dry_breakers **out,
                        mf_error *err) {
    *out = NULL;
    if (!model->tok)
        return mf_err(err, MF_E_UNSUPPORTED, "DRY sequence breakers need the model's tokenizer: %s", model->tok_why);
    if (n < 0 || (n > 0 && !seqs)) return mf_err(err, MF_E_INVAL, "DRY sequence breakers: %d strings at %p", n,
                                                 (const void *)seqs);
    builder b = {0};
    int rc = 0;
    for (int32_t i = 0; i < n && !rc; i++) {
        const size_t len = seqs[i] ? strlen(seqs[i]) : 0;
        if (!len)
            rc = mf_err(err, MF_E_INVAL, "DRY sequence breaker %d is empty; every breaker needs at least one character",
                        i);
        else
            rc = add_string(&b, model->tok, seqs[i], MF_MIN(len, (size_t)BREAKER_MAX_BYTES), err);
    }
    if (!rc) rc = finish(&b, out, err);
    free(b.e);
    free(b.pool);
    return rc;
}

int mf_dry_breakers_from_tokens(const mf_token *toks, const int32_t *lens, int32_t n, mf_dry_breakers **out,
                                mf_error *err) {
    *out = NULL;
    builder b = {0};
    int rc = 0;
    for (int32_t i = 0, at = 0; i < n && !rc; at += lens[i++]) {
        if (lens[i] < 1) rc = mf_err(err, MF_E_INVAL, "DRY sequence breaker %d has %d tokens", i, lens[i]);
        else rc = add(&b, toks[at], toks + at + 1, lens[i] - 1, err);
    }
    if (!rc) rc = finish(&b, out, err);
    free(b.e);
    free(b.pool);
    return rc;
}

static int breakers_copy(const mf_dry_breakers *src, mf_dry_breakers *d, mf_error *err) {
    d->n = src->n;
    d->head = malloc(sizeof *d->head * (size_t)MF_MAX(src->n, 1));
    d->off = malloc(sizeof *d->off * (size_t)(src->n + 1));
    d->tail = malloc(sizeof *d->tail * (size_t)MF_MAX(src->off[src->n], 1));
    if (!d->head || !d->off || !d->tail) return mf_err(err, MF_E_NOMEM, "out of memory for the DRY breakers");
    memcpy(d->head, src->head, sizeof *d->head * (size_t)src->n);
    memcpy(d->off, src->off, sizeof *d->off * (size_t)(src->n + 1));
    memcpy(d->tail, src->tail, sizeof *d->tail * (size_t)src->off[src->n]);
    return 0;
}

/* The first sequence whose head is t, or b->n. */
static int32_t first_of(const mf_dry_breakers *b, mf_token t) {
    int32_t lo = 0, hi = b->n;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo) / 2;
        if (b->head[mid] < t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* ---------------- the stage ---------------- */

struct mf_dry {
    float multiplier, base;
    int32_t allowed, last_n, n_vocab;
    mf_dry_breakers br;
    mf_token *hist; /* accepted tokens, oldest first (the last last_n kept when last_n > 0) */
    int32_t n_hist, cap_hist;
    int32_t *z;     /* per step: the Z values over the reversed window */
    int32_t cap_z;
    float *pen;     /* n_vocab: this step's penalty per token (0 for the rest) */
    mf_token *ids;  /* the tokens pen holds a value for */
    int32_t n_ids, cap_ids;
};

bool mf_dry_on(const mf_sampler_params *p) {
    return p->dry_multiplier > 0 && p->dry_last_n != 0;
}

int mf_dry_new(const mf_sampler_params *p, int32_t n_vocab, mf_dry **out, mf_error *err) {
    *out = NULL;
    mf_dry *d = calloc(1, sizeof *d);
    if (!d) return mf_err(err, MF_E_NOMEM, "out of memory");
    d->multiplier = p->dry_multiplier, d->base = p->dry_base;
    d->allowed = p->dry_allowed_length, d->last_n = p->dry_last_n, d->n_vocab = n_vocab;
    int rc = 0;
    if (p->dry_breakers) rc = breakers_copy(p->dry_breakers, &d->br, err);
    else if (!(d->br.off = calloc(1, sizeof *d->br.off))) rc = mf_err(err, MF_E_NOMEM, "out of memory");
    if (!rc && !(d->pen = calloc((size_t)n_vocab, sizeof *d->pen)))
        rc = mf_err(err, MF_E_NOMEM, "out of memory for DRY over %d tokens", n_vocab);
    if (rc) {
        mf_dry_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

void mf_dry_free(mf_dry *d) {
    if (!d) return;
    free(d->br.head);
    free(d->br.off);
    free(d->br.tail);
    free(d->hist);
    free(d->z);
    free(d->pen);
    free(d->ids);
    free(d);
}

static void clear_pen(mf_dry *d) {
    for (int32_t i = 0; i < d->n_ids; i++) d->pen[d->ids[i]] = 0.0f;
    d->n_ids = 0;
}

void mf_dry_reset(mf_dry *d) {
    clear_pen(d);
    d->n_hist = 0;
}

void mf_dry_accept(mf_dry *d, mf_token t) {
    if (d->last_n > 0 && d->n_hist >= 2 * d->last_n) { /* keep the window, drop the rest now and then */
        memmove(d->hist, d->hist + d->n_hist - d->last_n, sizeof *d->hist * (size_t)d->last_n);
        d->n_hist = d->last_n;
    }
    if (d->n_hist == d->cap_hist) {
        const int32_t c = d->cap_hist ? 2 * d->cap_hist : 256;
        mf_token *h = realloc(d->hist, sizeof *h * (size_t)c);
        if (!h) return; /* out of memory: the window loses this token (DRY sees less, nothing breaks) */
        d->hist = h, d->cap_hist = c;
    }
    d->hist[d->n_hist++] = t;
}

/* r(i): the i-th newest token of the window (r(0) the newest). */
#define R(i) (d->hist[d->n_hist - 1 - (i)])

/* Step 1: how far back a repeat may reach - up to the newest complete breaker in the window. */
static int32_t rep_limit(const mf_dry *d, int32_t w) {
    for (int32_t i = 0; i < w; i++) {
        int32_t longest = -1;
        for (int32_t s = first_of(&d->br, R(i)); s < d->br.n && d->br.head[s] == R(i); s++) {
            const int32_t len = d->br.off[s + 1] - d->br.off[s];
            if (len <= longest || len > i) continue;
            const mf_token *t = d->br.tail + d->br.off[s];
            int32_t k = 0;
            while (k < len && t[k] == R(i - k - 1)) k++;
            if (k == len) longest = len;
        }
        if (longest >= 0) return i - longest;
    }
    return w;
}

/* Step 2: z[k] = the longest common prefix of r(0..) and r(k..), k in [1, w) (z[0] unused). */
static void z_values(mf_dry *d, int32_t w) {
    int32_t *z = d->z, lt = 0, rt = 0; /* [lt, rt): the rightmost match box found so far */
    z[0] = w;
    for (int32_t k = 1; k < w; k++) {
        int32_t n = k < rt ? MF_MIN(rt - k, z[k - lt]) : 0;
        while (k + n < w && R(n) == R(k + n)) n++;
        z[k] = n;
        if (k + n > rt) lt = k, rt = k + n;
    }
}

static bool single_breaker(const mf_dry *d, mf_token t) {
    for (int32_t s = first_of(&d->br, t); s < d->br.n && d->br.head[s] == t; s++)
        if (d->br.off[s + 1] == d->br.off[s]) return true;
    return false;
}

int32_t mf_dry_step(mf_dry *d, const float **pen) {
    clear_pen(d);
    *pen = NULL;
    const int32_t w = d->last_n > 0 ? MF_MIN(d->n_hist, d->last_n) : d->n_hist;
    if (w <= d->allowed) return 0;
    const int32_t limit = rep_limit(d, w);
    if (limit < d->allowed) return 0;
    if (w > d->cap_z) {
        int32_t *z = realloc(d->z, sizeof *z * (size_t)w);
        if (!z) return 0; /* out of memory: no penalty this step */
        d->z = z, d->cap_z = w;
    }
    if (w > d->cap_ids) {
        mf_token *ids = realloc(d->ids, sizeof *ids * (size_t)w);
        if (!ids) return 0;
        d->ids = ids, d->cap_ids = w;
    }
    z_values(d, w);
    /* step 3: pen[] holds each token's longest run plus one for now (0: none, as a run may be 0 long) */
    for (int32_t k = 1; k < w; k++) {
        const int32_t n = MF_MIN(d->z[k], limit);
        if (n < d->allowed) continue;
        const mf_token t = R(k - 1);
        if (t < 0 || t >= d->n_vocab) continue;
        if (d->pen[t] == 0.0f) d->ids[d->n_ids++] = t;
        if ((float)(n + 1) > d->pen[t]) d->pen[t] = (float)(n + 1);
    }
    /* step 4: runs become penalties */
    const int32_t max_exp = d->base > 1.000001f ? (int32_t)(88.7228391f / logf(d->base)) : 0;
    int32_t m = 0;
    for (int32_t i = 0; i < d->n_ids; i++) {
        const mf_token t = d->ids[i];
        int32_t e = (int32_t)d->pen[t] - 1 - d->allowed;
        if (max_exp > 0 && e > max_exp) e = max_exp;
        d->pen[t] = 0.0f;
        if (single_breaker(d, t)) continue;
        d->pen[t] = (float)(d->multiplier * pow(d->base, e)); /* in double, as llama.cpp's std::pow(float, int) */
        d->ids[m++] = t;
    }
    d->n_ids = m;
    if (m) *pen = d->pen;
    return m;
}
