/* The sampler chain, in llama.cpp's default common-sampler order (common/common.h `samplers`), after the
 * logit_bias sampler common_sampler_init puts first:
 *   logit_bias -> penalties -> DRY -> top_n_sigma -> top_k -> typical_p -> top_p -> min_p -> XTC
 *   -> infill -> temperature (dynamic with dynatemp_range) -> dist
 * or, with Mirostat, logit_bias -> penalties -> DRY -> temperature -> mirostat (v1 or v2).
 * Each stage follows llama.cpp's semantics (src/llama-sampling.cpp); probabilities are a softmax over
 * the surviving candidates.  temp <= 0: greedy (llama.cpp's temp sampler keeps only the max, then dist
 * picks it).  The RNG is our own (xoshiro256** seeded by splitmix64), so draws are deterministic per
 * seed but differ from llama.cpp's mt19937; XTC's coin comes from the same stream (llama.cpp gives XTC
 * a second generator), so one state, the session file's, covers every draw.
 *
 * The penalties and DRY only change the logits of tokens in the history, and DRY only lowers them, so
 * the top_k shortcut (top_k_of_logits) reads them straight from the logits with those few corrected.
 * top_n_sigma's threshold is taken over every token; its mask (-inf below it) is applied to top_k's
 * survivors, which leaves the same survivors with a finite logit, and as many masked ones, as masking
 * first would. */
#include "engine/engine_impl.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef mf_cand cand;

struct mf_sampler {
    mf_sampler_params p;
    int32_t n_vocab;
    cand *c;
    int32_t n;
    bool sorted;
    cand *spare; /* the radix sort's other buffer (n_vocab candidates), made on first use */
    int32_t *hist; /* ring of the last penalty_last_n accepted tokens (or all) */
    int32_t hist_cap, hist_n, hist_head;
    int32_t *count; /* per token count inside the window */
    bool full_path; /* tests: every candidate built before top_k, sorts by qsort (mf_sampler_full_path) */
    mf_logit_bias *bias; /* p.logit_bias copied (p's pointer is not kept) */
    float *biased;       /* the logits plus the bias, rebuilt per sample (n_vocab floats, with a bias only) */
    bool bans;           /* a bias is -inf: keep_allowed refuses those tokens */
    mf_dry *dry;         /* the DRY stage's history and scratch (NULL when off) */
    const float *dry_pen; /* this step's DRY penalties (n_vocab), NULL when it penalizes nothing */
    float sigma_min;     /* this step's top_n_sigma threshold (-inf: off) */
    float mu;            /* Mirostat's running bound on surprise (bits) */
    float *vals;         /* top_n_sigma's scratch: every token's logit after the penalties (n_vocab) */
    const mf_token_filter *filter; /* mf_sampler_sample_allowed's, while it runs (the infill stage asks it) */
    bool last_single; /* the last sample picked greedily: the chain left that one token (p 1) */
    uint64_t s[4];
};

mf_sampler_params mf_sampler_default_params(void) {
    mf_sampler_params p = {
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .typ_p = 1.0f,
        .penalty_last_n = 64,
        .penalty_repeat = 1.0f,
        .penalty_freq = 0.0f,
        .penalty_present = 0.0f,
        .seed = 0x5EEDu,
        .dry_base = 1.75f,
        .dry_allowed_length = 2,
        .dry_last_n = -1,
        .top_n_sigma = -1.0f,
        .xtc_threshold = 0.1f,
        .dynatemp_exponent = 1.0f,
        .mirostat_tau = 5.0f,
        .mirostat_eta = 0.1f,
    };
    return p;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static uint64_t next_u64(mf_sampler *s) {
    uint64_t *q = s->s;
    uint64_t r = rotl(q[1] * 5, 7) * 9, t = q[1] << 17;
    q[2] ^= q[0];
    q[3] ^= q[1];
    q[1] ^= q[2];
    q[0] ^= q[3];
    q[2] ^= t;
    q[3] = rotl(q[3], 45);
    return r;
}

/* uniform double in [0, 1) with 53 random bits */
static double next_unit(mf_sampler *s) {
    return (double)(next_u64(s) >> 11) * 0x1.0p-53;
}

static void seed_rng(mf_sampler *s) {
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++) s->s[i] = splitmix64(&x);
}

/* Every entry names a token of the vocabulary with a bias that is a number or -inf (NaN would poison the
 * softmax, +inf makes a token certain in a way no stage can undo), and some token stays possible. */
static int check_bias(const mf_sampler_params *q, int32_t n_vocab, mf_error *err) {
    if (q->n_logit_bias < 0 || (q->n_logit_bias > 0 && !q->logit_bias))
        return mf_err(err, MF_E_INVAL, "logit_bias: %d entries at %p", q->n_logit_bias,
                      (const void *)q->logit_bias);
    int32_t n_banned = 0;
    unsigned char *banned = NULL;
    for (int32_t i = 0; i < q->n_logit_bias; i++) {
        const mf_logit_bias b = q->logit_bias[i];
        if (b.token < 0 || b.token >= n_vocab)
            return mf_err(err, MF_E_RANGE, "logit_bias: token %d is outside the vocabulary [0, %d)", b.token,
                          n_vocab);
        if (isnan(b.bias) || b.bias == INFINITY)
            return mf_err(err, MF_E_INVAL,
                          "logit_bias: token %d has bias %g; a bias must be a number or -inf (a ban)",
                          b.token, (double)b.bias);
        if (b.bias != -INFINITY) continue;
        if (!banned && !(banned = calloc((size_t)n_vocab, 1)))
            return mf_err(err, MF_E_NOMEM, "out of memory");
        n_banned += !banned[b.token];
        banned[b.token] = 1;
    }
    free(banned);
    if (n_banned == n_vocab)
        return mf_err(err, MF_E_INVAL, "logit_bias bans every one of the %d tokens: nothing could be sampled",
                      n_vocab);
    return 0;
}

/* x is a number in [lo, hi] (NaN never is). */
static bool within(float x, double lo, double hi) {
    return x >= lo && x <= hi;
}

/* DRY, top_n_sigma, XTC, dynamic temperature and Mirostat: each stage's values are checked only when it is
 * on, as a struct built with = {0} leaves the others 0. */
static int check_stages(const mf_sampler_params *p, mf_error *err) {
    if (!within(p->dry_multiplier, 0, FLT_MAX) || p->dry_last_n < -1 || p->dry_allowed_length < 0)
        return mf_err(err, MF_E_INVAL,
                      "DRY values out of range: multiplier %g (>= 0), last_n %d (>= -1), allowed_length %d (>= 0)",
                      p->dry_multiplier, p->dry_last_n, p->dry_allowed_length);
    if (p->dry_multiplier > 0 && !within(p->dry_base, 1, FLT_MAX))
        return mf_err(err, MF_E_INVAL, "DRY base %g: it must be >= 1 (the penalty grows as base^length)",
                      p->dry_base);
    if (isnan(p->top_n_sigma)) return mf_err(err, MF_E_INVAL, "top_n_sigma is NaN (<= 0 switches it off)");
    if (!within(p->xtc_probability, 0, 1) || (p->xtc_probability > 0 && !within(p->xtc_threshold, FLT_MIN, 1)))
        return mf_err(err, MF_E_INVAL,
                      "XTC values out of range: probability %g (0..1), threshold %g (> 0 and <= 1; above 0.5 XTC "
                      "removes nothing)",
                      p->xtc_probability, p->xtc_threshold);
    if (!within(p->dynatemp_range, 0, FLT_MAX) ||
        (p->dynatemp_range > 0 && !within(p->dynatemp_exponent, 0, FLT_MAX)))
        return mf_err(err, MF_E_INVAL, "dynamic temperature out of range: range %g (>= 0), exponent %g (>= 0)",
                      p->dynatemp_range, p->dynatemp_exponent);
    if (p->min_keep < 0) return mf_err(err, MF_E_INVAL, "min_keep must be >= 0, got %d", p->min_keep);
    if (p->mirostat < 0 || p->mirostat > 2)
        return mf_err(err, MF_E_INVAL, "mirostat %d: 0 (off), 1 (Mirostat) or 2 (Mirostat 2.0)", p->mirostat);
    if (p->mirostat && (!within(p->mirostat_tau, 0, FLT_MAX) || !within(p->mirostat_eta, 0, FLT_MAX)))
        return mf_err(err, MF_E_INVAL, "Mirostat values out of range: tau %g (>= 0), eta %g (>= 0)",
                      p->mirostat_tau, p->mirostat_eta);
    if (p->infill && p->mirostat)
        return mf_err(err, MF_E_INVAL,
                      "the infill stage runs among the truncation stages, which Mirostat %d replaces: use one of them",
                      p->mirostat);
    if (p->infill && (p->top_k < 1 || p->top_k > MF_INFILL_MAX_TOP_K))
        return mf_err(err, MF_E_INVAL,
                      "the infill stage compares every pair of candidates, so it needs top_k between 1 and %d (got "
                      "%d; llama.vim sends 40)",
                      MF_INFILL_MAX_TOP_K, p->top_k);
    return 0;
}

int mf_sampler_params_check(const mf_sampler_params *p, int32_t n_vocab, mf_error *err) {
    if (n_vocab <= 0) return mf_err(err, MF_E_INVAL, "sampler needs n_vocab > 0, got %d", n_vocab);
    if (p->penalty_last_n < -1)
        return mf_err(err, MF_E_INVAL, "penalty_last_n must be >= -1, got %d", p->penalty_last_n);
    if (p->top_p < 0 || p->min_p < 0 || p->typ_p < 0 || p->penalty_repeat <= 0)
        return mf_err(
            err, MF_E_INVAL,
            "sampler values out of range: top_p %g, min_p %g, typ_p %g, repeat %g (must be >= 0; repeat > 0)",
            p->top_p, p->min_p, p->typ_p, p->penalty_repeat);
    int rc = check_stages(p, err);
    if (!rc && p->infill && mf_infill_vocab_size(p->infill) != n_vocab)
        rc = mf_err(err, MF_E_INVAL,
                    "the infill stage's vocabulary has %d tokens, the sampler %d: build it from this model",
                    mf_infill_vocab_size(p->infill), n_vocab);
    return rc ? rc : check_bias(p, n_vocab, err);
}

int mf_sampler_new(const mf_sampler_params *p, int32_t n_vocab, mf_sampler **out, mf_error *err) {
    *out = NULL;
    mf_sampler_params q = p ? *p : mf_sampler_default_params();
    int rc = mf_sampler_params_check(&q, n_vocab, err);
    if (rc) return rc;
    mf_sampler *s = calloc(1, sizeof *s);
    if (!s) return mf_err(err, MF_E_NOMEM, "out of memory");
    s->p = q;
    s->p.logit_bias = NULL;
    s->p.dry_breakers = NULL; /* copied into the DRY stage */
    s->mu = 2.0f * q.mirostat_tau;
    if (mf_dry_on(&q) && (rc = mf_dry_new(&q, n_vocab, &s->dry, err))) {
        mf_sampler_free(s);
        return rc;
    }
    if (q.top_n_sigma > 0 && !(s->vals = malloc(sizeof(float) * (size_t)n_vocab))) {
        mf_sampler_free(s);
        return mf_err(err, MF_E_NOMEM, "out of memory for top_n_sigma over %d tokens", n_vocab);
    }
    if (q.n_logit_bias > 0) {
        s->bias = malloc(sizeof *s->bias * (size_t)q.n_logit_bias);
        s->biased = malloc(sizeof(float) * (size_t)n_vocab);
        if (!s->bias || !s->biased) {
            mf_sampler_free(s);
            return mf_err(err, MF_E_NOMEM, "out of memory for a logit bias of %d entries", q.n_logit_bias);
        }
        memcpy(s->bias, q.logit_bias, sizeof *s->bias * (size_t)q.n_logit_bias);
        for (int32_t i = 0; i < q.n_logit_bias; i++) s->bans |= isinf(q.logit_bias[i].bias);
    }
    s->n_vocab = n_vocab;
    s->c = malloc(sizeof(cand) * (size_t)n_vocab);
    s->count = calloc((size_t)n_vocab, sizeof(int32_t));
    s->hist_cap = q.penalty_last_n > 0 ? q.penalty_last_n : 1024;
    s->hist = malloc(sizeof(int32_t) * (size_t)s->hist_cap);
    if (!s->c || !s->count || !s->hist) {
        mf_sampler_free(s);
        return mf_err(err, MF_E_NOMEM, "out of memory for a sampler over %d tokens", n_vocab);
    }
    seed_rng(s);
    *out = s;
    return 0;
}

void mf_sampler_free(mf_sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->spare);
    free(s->count);
    free(s->hist);
    free(s->bias);
    free(s->biased);
    mf_dry_free(s->dry);
    free(s->vals);
    free(s);
}

void mf_sampler_reset(mf_sampler *s) {
    memset(s->count, 0, sizeof(int32_t) * (size_t)s->n_vocab);
    s->hist_n = s->hist_head = 0;
    if (s->dry) mf_dry_reset(s->dry);
    s->mu = 2.0f * s->p.mirostat_tau;
    seed_rng(s);
}

void mf_sampler_accept(mf_sampler *s, mf_token t) {
    if (t < 0 || t >= s->n_vocab) return;
    if (s->dry) mf_dry_accept(s->dry, t);
    if (s->p.penalty_last_n == 0) return;
    if (s->p.penalty_last_n > 0) {
        if (s->hist_n == s->hist_cap) { /* ring full: the oldest leaves the window */
            s->count[s->hist[s->hist_head]]--;
            s->hist[s->hist_head] = t;
            s->hist_head = (s->hist_head + 1) % s->hist_cap;
        } else {
            s->hist[(s->hist_head + s->hist_n++) % s->hist_cap] = t;
        }
    }
    s->count[t]++;
}

/* descending logit, ties by ascending id (deterministic) */
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* A float's bits as a key whose ascending order is the float's descending one (-0 is +0, as == has it). */
static inline uint32_t desc_key(float f) {
    if (f == 0.0f) f = 0.0f;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u & 0x80000000u ? u : ~u & 0x7FFFFFFFu;
}

/* Fewer candidates than this go to qsort. */
#define RADIX_MIN 2048

/* Every candidate, sorted (top_k 0 or above TOP_K_PARTIAL, then typical_p / top_p / min_p): with qsort and
 * a compare call per step a sample over 151936 candidates took 21-26 ms; with an LSD radix sort on
 * desc_key, three passes of 11 bits, 2.0-2.8 ms, two thirds of it the sort (docs/PERFORMANCE.md).  It is stable, so candidates still in ascending id order (as
 * chain builds them) come out exactly in cand_cmp's order, ties by ascending id.  (typical_p reorders
 * them, but stably, so equal logits stay in id order.)  Returns false, sorting nothing, when they are not
 * in id order, a logit is NaN (cand_cmp has no total order then: qsort's placement is kept) or the spare
 * buffer cannot be had. */
static bool radix_sort(mf_sampler *s) {
    const int32_t n = s->n;
    if (!s->spare && !(s->spare = malloc(sizeof(cand) * (size_t)s->n_vocab))) return false;
    uint32_t hist[3][2048] = {{0}}; /* 24 KiB on the stack: samplers run on any thread */
    for (int32_t i = 0; i < n; i++) {
        const float l = s->c[i].logit;
        if (l != l || (i > 0 && s->c[i].id <= s->c[i - 1].id)) return false;
        const uint32_t k = desc_key(l);
        hist[0][k & 2047]++, hist[1][k >> 11 & 2047]++, hist[2][k >> 22]++;
    }
    cand *from = s->c, *to = s->spare;
    for (int pass = 0; pass < 3; pass++) {
        uint32_t *h = hist[pass], at = 0;
        if (h[desc_key(from[0].logit) >> (11 * pass) & 2047] == (uint32_t)n) continue; /* one digit: order stays */
        for (int d = 0; d < 2048; d++) {
            const uint32_t c = h[d];
            h[d] = at, at += c;
        }
        for (int32_t i = 0; i < n; i++) to[h[desc_key(from[i].logit) >> (11 * pass) & 2047]++] = from[i];
        cand *t = from;
        from = to, to = t;
    }
    s->c = from, s->spare = to;
    return true;
}

static void sort_cands(mf_sampler *s) {
    if (!s->sorted && (s->n < RADIX_MIN || s->full_path || !radix_sort(s)))
        qsort(s->c, (size_t)s->n, sizeof(cand), cand_cmp);
    s->sorted = true;
}

/* p = softmax(logit) over the current candidates (sorted first, as llama.cpp's softmax does) */
static void softmax(mf_sampler *s) {
    sort_cands(s);
    float mx = s->c[0].logit;
    double sum = 0;
    for (int32_t i = 0; i < s->n; i++) {
        s->c[i].p = expf(s->c[i].logit - mx);
        sum += s->c[i].p;
    }
    for (int32_t i = 0; i < s->n; i++) s->c[i].p = (float)(s->c[i].p / sum);
}

/* no penalty stage configured: the logits pass through unchanged */
static bool penalties_off(const mf_sampler_params *p) {
    return p->penalty_last_n == 0 ||
           (p->penalty_repeat == 1.0f && p->penalty_freq == 0.0f && p->penalty_present == 0.0f);
}

/* the logit of a token c > 0 times in the window, after the penalty stage (llama.cpp's penalties sampler) */
static float penalized(const mf_sampler_params *p, float l, int32_t c) {
    if (l <= 0)
        l *= p->penalty_repeat;
    else
        l /= p->penalty_repeat;
    return l - ((float)c * p->penalty_freq + p->penalty_present);
}

/* the penalty stage and DRY leave every logit as it is this step */
static bool adjust_off(const mf_sampler *s) {
    return penalties_off(&s->p) && !s->dry_pen;
}

/* The penalty stage, then DRY. */
static void apply_penalties(mf_sampler *s) {
    const mf_sampler_params *p = &s->p;
    if (adjust_off(s)) return;
    const bool pen = !penalties_off(p);
    for (int32_t i = 0; i < s->n; i++) {
        const int32_t id = s->c[i].id, c = pen ? s->count[id] : 0;
        if (c > 0) s->c[i].logit = penalized(p, s->c[i].logit, c);
        if (s->dry_pen) s->c[i].logit -= s->dry_pen[id];
    }
    s->sorted = false;
}

/* x into the sorted c[0..k), over the last one (x beats it) */
static void insert_best(cand *c, int32_t k, cand x) {
    int32_t j = k - 1;
    while (j > 0 && cand_cmp(&x, &c[j - 1]) < 0) {
        c[j] = c[j - 1];
        j--;
    }
    c[j] = x;
}

/* up to this k, top_k selects by insertion instead of sorting every candidate */
#define TOP_K_PARTIAL 256

static void apply_top_k(mf_sampler *s) {
    int32_t k = s->p.top_k;
    if (k <= 0 || k >= s->n) return;
    if (!s->sorted && k <= TOP_K_PARTIAL) {
        /* partial selection: keep the k best in c[0..k) sorted (insertion; later ones rarely qualify) */
        qsort(s->c, (size_t)k, sizeof(cand), cand_cmp);
        for (int32_t i = k; i < s->n; i++)
            if (cand_cmp(&s->c[i], &s->c[k - 1]) < 0) insert_best(s->c, k, s->c[i]);
        s->sorted = true;
    }
    sort_cands(s);
    s->n = k;
}

/* 0 < top_k <= TOP_K_PARTIAL: what building every candidate, the penalty stage and apply_top_k leave in
 * c[0..k), read straight from the logits (and, with penalties on, the window's counts), in the same id
 * order.  A later id never wins a tie (ids ascend), so a logit qualifies exactly when it is > the k-th's (a
 * NaN never does, as in cand_cmp), and a block of 16 with none, and no penalized token, is passed with one
 * vector compare.  Per token the full path was a 1.8 MB candidate copy and a compare call per logit (325 us
 * against 25 for 151936 logits, top_k 40: docs/PERFORMANCE.md). */
static inline float logit_after_penalties(const mf_sampler *s, const float *l, const int32_t *cnt, int32_t i) {
    const float v = cnt && cnt[i] > 0 ? penalized(&s->p, l[i], cnt[i]) : l[i];
    return s->dry_pen ? v - s->dry_pen[i] : v; /* DRY only lowers: a block below the k-th stays below */
}

static void top_k_of_logits(mf_sampler *s, const float *l, int32_t k) {
    const int32_t n = s->n_vocab, *cnt = penalties_off(&s->p) ? NULL : s->count;
    for (int32_t i = 0; i < k; i++) s->c[i] = (cand){i, logit_after_penalties(s, l, cnt, i), 0.0f};
    qsort(s->c, (size_t)k, sizeof(cand), cand_cmp);
    for (int32_t i = k; i < n;) {
        if (i + 16 <= n) {
            const float t = s->c[k - 1].logit;
            int any = 0;
            for (int j = 0; j < 16; j++) any |= l[i + j] > t;
            if (cnt)
                for (int j = 0; j < 16; j++) any |= cnt[i + j] > 0;
            if (!any) {
                i += 16;
                continue;
            }
        }
        for (const int32_t end = MF_MIN(i + 16, n); i < end; i++) {
            const float v = logit_after_penalties(s, l, cnt, i);
            if (v > s->c[k - 1].logit) insert_best(s->c, k, (cand){i, v, 0.0f});
        }
    }
    s->n = k;
    s->sorted = true;
}

static void apply_typical(mf_sampler *s) {
    float tp = s->p.typ_p;
    if (tp >= 1.0f || s->n <= 1) return;
    softmax(s);
    double ent = 0;
    for (int32_t i = 0; i < s->n; i++)
        if (s->c[i].p > 0) ent += -s->c[i].p * log(s->c[i].p);
    /* order by |-log p - entropy| ascending (stable on the current order), keep until cum >= typ_p */
    int32_t n = s->n;
    float *score = malloc(sizeof(float) * (size_t)n);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)n);
    cand *tmp = malloc(sizeof(cand) * (size_t)n);
    if (!score || !idx || !tmp) {
        free(score);
        free(idx);
        free(tmp);
        return;
    }
    for (int32_t i = 0; i < n; i++) {
        score[i] = fabsf((float)(-log(s->c[i].p) - ent));
        idx[i] = i;
    }
    for (int32_t i = 1; i < n; i++) { /* insertion sort: stable, n is small after top_k */
        int32_t v = idx[i], j = i - 1;
        while (j >= 0 && score[idx[j]] > score[v]) {
            idx[j + 1] = idx[j];
            j--;
        }
        idx[j + 1] = v;
    }
    float cum = 0;
    int32_t last = n;
    for (int32_t i = 0; i < n; i++) {
        cum += s->c[idx[i]].p;
        if (cum > tp && i + 1 >= s->p.min_keep) {
            last = i + 1;
            break;
        }
    }
    for (int32_t i = 0; i < last; i++) tmp[i] = s->c[idx[i]];
    memcpy(s->c, tmp, sizeof(cand) * (size_t)last);
    s->n = last;
    s->sorted = false;
    free(score);
    free(idx);
    free(tmp);
}

static void apply_top_p(mf_sampler *s) {
    float tp = s->p.top_p;
    if (tp >= 1.0f) return;
    softmax(s);
    float cum = 0;
    int32_t last = s->n;
    for (int32_t i = 0; i < s->n; i++) {
        cum += s->c[i].p;
        if (cum >= tp && i + 1 >= s->p.min_keep) {
            last = i + 1;
            break;
        }
    }
    s->n = last;
}

static void apply_min_p(mf_sampler *s) {
    float mp = s->p.min_p;
    if (mp <= 0.0f || s->n <= 1) return;
    sort_cands(s);
    float min_logit = s->c[0].logit + logf(mp); /* p_i >= min_p * p_max */
    int32_t i = 1;
    while (i < s->n && (s->c[i].logit >= min_logit || i < s->p.min_keep)) i++;
    s->n = i;
}

/* top_n_sigma's threshold over n logits: their maximum less top_n_sigma standard deviations, -inf ones (bans)
 * left out, as llama.cpp's (which sums in float; here in double). */
static float sigma_cut(const float *v, int32_t n, float k) {
    float mx = -INFINITY;
    double sum = 0, sq = 0; /* one pass: in double, E[x^2] - E[x]^2 loses nothing a float logit holds */
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        const double x = v[i];
        if (x == -INFINITY || x != x) continue;
        mx = v[i] > mx ? v[i] : mx, sum += x, sq += x * x, m++;
    }
    if (!m) return -INFINITY;
    const double mean = sum / m, var = sq / m - mean * mean;
    return (float)(mx - k * sqrt(var > 0 ? var : 0));
}

/* The threshold over every token, from the logits (top_k's shortcut keeps only k candidates) ... */
static void sigma_of_logits(mf_sampler *s, const float *l) {
    if (!(s->p.top_n_sigma > 0)) return;
    if (adjust_off(s)) {
        s->sigma_min = sigma_cut(l, s->n_vocab, s->p.top_n_sigma);
        return;
    }
    const int32_t *cnt = penalties_off(&s->p) ? NULL : s->count;
    for (int32_t i = 0; i < s->n_vocab; i++) s->vals[i] = logit_after_penalties(s, l, cnt, i);
    s->sigma_min = sigma_cut(s->vals, s->n_vocab, s->p.top_n_sigma);
}

/* ... or over the candidates, every token (or every token a grammar allows), the penalties applied. */
static void sigma_of_cands(mf_sampler *s) {
    if (!(s->p.top_n_sigma > 0)) return;
    for (int32_t i = 0; i < s->n; i++) s->vals[i] = s->c[i].logit;
    s->sigma_min = sigma_cut(s->vals, s->n, s->p.top_n_sigma);
}

/* Below the threshold a logit is -inf (llama.cpp's mask; the candidates stay, with probability 0).  Sorted
 * candidates stay sorted: the masked ones are a tail. */
static void apply_sigma(mf_sampler *s) {
    for (int32_t i = 0; i < s->n; i++)
        if (s->c[i].logit < s->sigma_min) s->c[i].logit = -INFINITY;
}

/* The candidates that can still be drawn.  XTC and dynamic temperature count these where llama.cpp counts
 * its whole candidate array, -inf entries included (banned, masked by top_n_sigma or a grammar): so a
 * grammar's tokens sample the same whether the others are left out (mf_sampler_sample_allowed) or -inf. */
static int32_t n_possible(const mf_sampler *s) {
    int32_t m = 0;
    for (int32_t i = 0; i < s->n; i++) m += s->c[i].logit > -INFINITY;
    return m;
}

/* XTC: with probability xtc_probability, every candidate of p >= xtc_threshold but the least likely of them
 * goes (nothing when fewer than two reach it). */
static void apply_xtc(mf_sampler *s) {
    const float pr = s->p.xtc_probability, t = s->p.xtc_threshold;
    if (!(pr > 0) || t > 0.5f || n_possible(s) < 2) return;
    if (next_unit(s) > pr) return;
    softmax(s);
    int32_t last = 0;
    while (last + 1 < s->n && s->c[last + 1].p >= t) last++;
    if (!last || n_possible(s) - last < s->p.min_keep) return; /* it would leave fewer than min_keep */
    memmove(s->c, s->c + last, sizeof(cand) * (size_t)(s->n - last));
    s->n -= last;
}

/* The infill stage (infill.c).  Its forced EOT is no forced pick where the token may not be drawn: banned by
 * the logit_bias, or not allowed by mf_sampler_sample_allowed's filter. */
static void apply_infill(mf_sampler *s) {
    const mf_infill_vocab *v = s->p.infill;
    if (!v || !s->n) return;
    const mf_token eot = mf_infill_vocab_eot(v);
    const bool banned = (s->bans && s->biased[eot] == -INFINITY) ||
                        (s->filter && !s->filter->allow(s->filter->user, eot));
    softmax(s);
    s->n = mf_infill_apply(v, s->c, s->n, n_possible(s), banned);
    s->sorted = false; /* merged tokens are -inf where they stood */
}

/* Dynamic temperature: temp +- dynatemp_range, by the candidates' entropy over its maximum, log n. */
static float dynamic_temp(mf_sampler *s, int32_t n) {
    const float t = s->p.temp, lo = fmaxf(0.0f, t - s->p.dynatemp_range), hi = t + s->p.dynatemp_range;
    const float max_ent = -logf(1.0f / (float)n);
    softmax(s);
    float ent = 0;
    for (int32_t i = 0; i < s->n; i++)
        if (s->c[i].p > 0) ent -= s->c[i].p * logf(s->c[i].p);
    return lo + (hi - lo) * powf(ent / max_ent, s->p.dynatemp_exponent);
}

static void apply_temp(mf_sampler *s) {
    float t = s->p.temp;
    if (s->p.dynatemp_range > 0) {
        const int32_t n = n_possible(s);
        if (n <= 1) return;
        t = dynamic_temp(s, n);
    }
    if (t <= 0.0f) { /* greedy: only the maximum survives */
        sort_cands(s);
        s->n = 1;
        return;
    }
    for (int32_t i = 0; i < s->n; i++) s->c[i].logit /= t;
}

/* The drawn candidate's index (c[0..n) softmax'd, p set, when more than one). */
static int32_t draw_index(mf_sampler *s) {
    if (s->n == 1) {
        s->c[0].p = 1.0f;
        return 0;
    }
    softmax(s);
    double r = next_unit(s), cum = 0;
    for (int32_t i = 0; i < s->n; i++) {
        cum += s->c[i].p;
        if (r < cum) return i;
    }
    /* r beyond the rounded sum: the last candidate with any probability (a banned token has none) */
    int32_t i = s->n - 1;
    while (i > 0 && !(s->c[i].p > 0)) i--;
    return i;
}

static int32_t draw(mf_sampler *s) {
    const int32_t i = draw_index(s); /* first: its sort may swap s->c for the spare buffer */
    return s->c[i].id;
}

/* The stages after top_k, which read only its survivors (mf_sampler_sample_allowed relies on that). */
static void after_top_k(mf_sampler *s) {
    if (s->sigma_min != -INFINITY) apply_sigma(s);
    apply_typical(s);
    apply_top_p(s);
    apply_min_p(s);
    apply_xtc(s);
    apply_infill(s);
    apply_temp(s);
}

/* Every token a candidate, in id order. */
static void all_cands(mf_sampler *s, const float *logits) {
    for (int32_t i = 0; i < s->n_vocab; i++) s->c[i] = (cand){i, logits[i], 0.0f};
    s->n = s->n_vocab;
    s->sorted = false;
}

static void chain(mf_sampler *s, const float *logits) {
    const int32_t k = s->p.top_k;
    if (!s->full_path && k > 0 && k < s->n_vocab && k <= TOP_K_PARTIAL) {
        top_k_of_logits(s, logits, k);
        sigma_of_logits(s, logits);
    } else {
        all_cands(s, logits);
        apply_penalties(s);
        sigma_of_cands(s);
        apply_top_k(s);
    }
    after_top_k(s);
}

/* ---------------- Mirostat ---------------- */

enum { MIROSTAT_M = 100 };

/* The MIROSTAT_M best candidates in cand_cmp's order, read without reordering the rest. */
static int32_t best_m(const mf_sampler *s, cand *top) {
    int32_t nb = 0;
    for (int32_t i = 0; i < s->n; i++) {
        if (nb == MIROSTAT_M && cand_cmp(&s->c[i], &top[nb - 1]) >= 0) continue;
        if (nb < MIROSTAT_M) top[nb++] = s->c[i];
        insert_best(top, nb, s->c[i]);
    }
    return nb;
}

/* v1: Zipf's exponent s_hat estimated from the 100 most likely, then top_k with the k that should give
 * surprise mu (llama.cpp's formula, with this vocabulary's size). */
static void mirostat_v1(mf_sampler *s) {
    /* p_i / p_i+1 = exp(logit_i - logit_i+1): the ratios need the best 100 in order, not every candidate sorted */
    cand top[MIROSTAT_M];
    const int32_t nb = best_m(s, top);
    float sum_tb = 0, sum_tt = 0;
    for (int32_t i = 0; i < nb - 1; i++) {
        const float t = logf((float)(i + 2) / (float)(i + 1)), b = top[i].logit - top[i + 1].logit;
        sum_tb += t * b;
        sum_tt += t * t;
    }
    const float s_hat = sum_tb / sum_tt, eps = s_hat - 1;
    const float k = powf(eps * powf(2, s->mu) / (1 - powf((float)s->n_vocab, -eps)), 1 / s_hat);
    const int32_t kk = k >= (float)s->n ? s->n : k >= 1 ? (int32_t)k : 1; /* NaN: one */
    if (kk <= nb) { /* the usual case: the k best are among the 100 */
        memcpy(s->c, top, sizeof(cand) * (size_t)kk);
        s->n = kk;
        s->sorted = true;
        return;
    }
    sort_cands(s);
    s->n = kk;
}

/* v2: the candidates whose surprise, -log2 p, is at most mu (the most likely one when none is). */
static void mirostat_v2(mf_sampler *s) {
    float mx = s->c[0].logit;
    int32_t best = 0;
    for (int32_t i = 1; i < s->n; i++)
        if (s->c[i].logit > mx) mx = s->c[i].logit, best = i;
    /* the softmax's sum; a logit 40 below the best adds under e^-40 each, less than a double's rounding of the
     * sum even over every token, so it is passed without an exp */
    double sum = 0;
    for (int32_t i = 0; i < s->n; i++)
        if (s->c[i].logit > mx - 40.0f) sum += expf(s->c[i].logit - mx);
    /* -log2(p) <= mu  <=>  logit >= max + ln(sum) - mu ln 2: one compare per candidate */
    const double cut = (double)mx + log(sum) - (double)s->mu * M_LN2;
    int32_t m = 0;
    for (int32_t i = 0; i < s->n; i++)
        if ((double)s->c[i].logit >= cut) s->c[m++] = s->c[i];
    if (!m) s->c[m++] = s->c[best];
    s->n = m;
    s->sorted = false;
}

/* Mirostat over the candidates (the penalties applied): temperature, truncation, the draw, then mu moves
 * toward the target by eta times the draw's surprise error.  Impossible candidates (-inf) go first. */
static mf_token mirostat(mf_sampler *s) {
    int32_t m = 0;
    for (int32_t i = 0; i < s->n; i++)
        if (s->c[i].logit > -INFINITY) s->c[m++] = s->c[i];
    if (!m) return -1;
    s->n = m;
    for (int32_t i = 0; i < s->n; i++) s->c[i].logit /= s->p.temp;
    if (s->p.mirostat == 1) mirostat_v1(s);
    else mirostat_v2(s);
    const int32_t i = draw_index(s);
    s->mu -= s->p.mirostat_eta * (-log2f(s->c[i].p) - s->p.mirostat_tau);
    return s->c[i].id;
}

/* The lowest id of the largest logit, as `if (l[i] > l[best]) best = i` gives (NaN never wins; a NaN at
 * 0 stays the pick).  Eight running maxima break the compare chain (152k logits per token), then the
 * first index holding the maximum. */
static int32_t argmax(const float *l, int32_t n) {
    if (n <= 0 || l[0] != l[0]) return 0;
    float m[8] = {l[0], l[0], l[0], l[0], l[0], l[0], l[0], l[0]};
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) m[k] = l[i + k] > m[k] ? l[i + k] : m[k];
    float best = m[0];
    for (int k = 1; k < 8; k++) best = m[k] > best ? m[k] : best;
    for (; i < n; i++) best = l[i] > best ? l[i] : best;
    for (i = 0; i < n; i++)
        if (l[i] == best) return i;
    return 0;
}

/* The logit_bias stage: the logits as the rest of the chain reads them.  A copy (600 KB for 152k tokens,
 * tens of microseconds against a forward's milliseconds) keeps every later stage and shortcut unchanged. */
static const float *with_bias(mf_sampler *s, const float *logits) {
    if (!s->bias) return logits;
    memcpy(s->biased, logits, sizeof(float) * (size_t)s->n_vocab);
    for (int32_t i = 0; i < s->p.n_logit_bias; i++) s->biased[s->bias[i].token] += s->bias[i].bias;
    return s->biased;
}

/* The highest logit (after bias, penalties and DRY) wins: temp <= 0, unless a dynamic range makes the
 * temperature, or XTC may remove the highest candidates first (llama.cpp's temp stage then keeps the best of
 * the rest); with Mirostat, temp <= 0 (llama.cpp's temp 0 leaves Mirostat one candidate). */
static bool greedy(const mf_sampler *s) {
    if (s->p.temp > 0.0f || s->p.infill) return false; /* infill may force EOT first */
    if (s->p.mirostat) return true;
    return !(s->p.dynatemp_range > 0) && !(s->p.xtc_probability > 0 && s->p.xtc_threshold <= 0.5f);
}

/* What every sample starts with: this step's DRY penalties, no top_n_sigma threshold yet. */
static void begin_step(mf_sampler *s) {
    s->dry_pen = NULL;
    s->filter = NULL;
    s->last_single = false;
    if (s->dry) (void)mf_dry_step(s->dry, &s->dry_pen);
    s->sigma_min = -INFINITY;
}

mf_token mf_sampler_sample(mf_sampler *s, const float *logits) {
    logits = with_bias(s, logits);
    begin_step(s);
    if ((s->last_single = greedy(s))) { /* greedy fast path: argmax after penalties and DRY (lowest id on ties) */
        if (adjust_off(s)) return argmax(logits, s->n_vocab); /* no 1.8 MB candidate copy per token */
        if (!s->full_path) { /* the best one read straight from the logits, the few penalized corrected */
            top_k_of_logits(s, logits, 1);
            return s->c[0].id;
        }
        all_cands(s, logits); /* the reference the shortcut is tested against */
        apply_penalties(s);
        int32_t best = 0;
        for (int32_t i = 1; i < s->n; i++)
            if (s->c[i].logit > s->c[best].logit) best = i;
        return s->c[best].id;
    }
    if (s->p.mirostat) {
        all_cands(s, logits);
        apply_penalties(s);
        return mirostat(s);
    }
    chain(s, logits);
    return draw(s);
}

/* Keeps the first `want` candidates allow() accepts (all of them when want < 0), in their order; a token
 * the logit_bias bans (-inf) is not allowed either. */
static int32_t keep_allowed(mf_sampler *s, const mf_token_filter *f, int32_t want) {
    int32_t m = 0;
    for (int32_t i = 0; i < s->n && (want < 0 || m < want); i++)
        if (!(s->bans && s->c[i].logit == -INFINITY) && f->allow(f->user, s->c[i].id)) s->c[m++] = s->c[i];
    s->n = m;
    return m;
}

/* The chain over the allowed tokens only: what mf_sampler_sample gives for logits where every other token
 * is -inf (llama.cpp applies its grammar first too), asking allow() about as few tokens as it can.  The
 * stages after top_k read only its k survivors, and those are the first k allowed tokens in the candidates'
 * total order (logit after penalties descending, id ascending), so a window of that order - the best
 * 4k, at least 64, read straight from the logits - settles it when k of them are allowed.  Otherwise (a
 * grammar that rules out most of the likely tokens, or top_k off) every token the filter's `maybe` names
 * (or every token) is asked. */
mf_token mf_sampler_sample_allowed(mf_sampler *s, const float *logits, const mf_token_filter *f) {
    logits = with_bias(s, logits);
    begin_step(s);
    s->filter = f;
    const bool greedy_pick = s->last_single = greedy(s);
    const int32_t k = greedy_pick ? 1 : s->p.top_k;
    /* Mirostat and top_n_sigma read every allowed token, not a window of the likely ones */
    const bool whole = !greedy_pick && (s->p.mirostat || s->p.top_n_sigma > 0);
    bool settled = false;
    if (!s->full_path && !whole && k > 0 && k <= TOP_K_PARTIAL && k < s->n_vocab) {
        top_k_of_logits(s, logits, MF_MIN(s->n_vocab, MF_MAX(64, 4 * k)));
        settled = keep_allowed(s, f, k) == k;
    }
    if (!settled) {
        s->n = s->n_vocab;
        /* maybe's ids land in the spare buffer's memory, then become candidates; without that buffer (out of
         * memory) every token is asked, as without maybe: it only saves asking */
        if (f->maybe && (s->spare || (s->spare = malloc(sizeof(cand) * (size_t)s->n_vocab)))) {
            int32_t *ids = (int32_t *)s->spare;
            s->n = f->maybe(f->user, ids);
            for (int32_t i = s->n - 1; i >= 0; i--) s->c[i] = (cand){ids[i], logits[ids[i]], 0.0f};
        } else {
            for (int32_t i = 0; i < s->n_vocab; i++) s->c[i] = (cand){i, logits[i], 0.0f};
        }
        s->sorted = false;
        apply_penalties(s);
        if (!keep_allowed(s, f, -1)) return -1;
        if (greedy_pick) {
            int32_t best = 0;
            for (int32_t i = 1; i < s->n; i++)
                if (cand_cmp(&s->c[i], &s->c[best]) < 0) best = i;
            return s->c[best].id;
        }
        if (s->p.mirostat) return mirostat(s);
        sigma_of_cands(s);
        apply_top_k(s);
    }
    if (greedy_pick) return s->c[0].id;
    after_top_k(s);
    return draw(s);
}

int32_t mf_sampler_candidates(mf_sampler *s, const float *logits, int32_t *ids, float *probs, int32_t cap) {
    logits = with_bias(s, logits);
    begin_step(s);
    chain(s, logits);
    softmax(s);
    int32_t n = MF_MIN(s->n, cap);
    for (int32_t i = 0; i < n; i++) {
        ids[i] = s->c[i].id;
        probs[i] = s->c[i].p;
    }
    return n;
}

int32_t mf_sampler_last_probs(const mf_sampler *s, mf_token chosen, int32_t cap, mf_token *ids, float *p,
                              float *p_chosen) {
    *p_chosen = 0.0f;
    if (s->last_single) {
        *p_chosen = 1.0f;
        if (cap <= 0) return 0;
        ids[0] = chosen, p[0] = 1.0f;
        return 1;
    }
    int32_t m = 0; /* the draw left c[0..n) softmax'd, likeliest first; those of no probability are not kept */
    for (int32_t i = 0; i < s->n; i++) {
        if (!(s->c[i].p > 0.0f)) continue;
        if (s->c[i].id == chosen) *p_chosen = s->c[i].p;
        if (m < cap) ids[m] = s->c[i].id, p[m] = s->c[i].p, m++;
    }
    return m;
}

void mf_sampler_full_path(mf_sampler *s, bool on) {
    s->full_path = on;
}

void mf_sampler_state_get(const mf_sampler *s, mf_sampler_state *st) {
    memcpy(st->rng, s->s, sizeof s->s);
    st->mu = s->mu;
}

void mf_sampler_state_set(mf_sampler *s, const mf_sampler_state *st) {
    memcpy(s->s, st->rng, sizeof s->s);
    s->mu = st->mu;
}

bool mf_sampler_mu(const mf_sampler *s, float *mu) {
    *mu = s->mu;
    return s->p.mirostat != 0;
}

void mf_sampler_set_mu(mf_sampler *s, float mu) {
    s->mu = mu;
}

void mf_sampler_get_rng(const mf_sampler *s, uint64_t state[4]) {
    memcpy(state, s->s, sizeof s->s);
}

int mf_sampler_set_rng(mf_sampler *s, const uint64_t state[4], mf_error *err) {
    if (!(state[0] | state[1] | state[2] | state[3]))
        return mf_err(err, MF_E_INVAL, "the sampler RNG state is all zero, which xoshiro256** never reaches "
                                       "(a damaged or hand-made state)");
    memcpy(s->s, state, sizeof s->s);
    return 0;
}
