/* Speculative decoding with a draft model (mf_draft + mf_gen_step_spec) on agreeing tiny pairs written by
 * mf-genmodel --lowrank/--draft: greedy and seeded output bitwise the plain output on three
 * architecture/type/KV combinations and several draft-max values, also when EOS, a stop string or the
 * context end falls inside a drafted block; the sampled distribution equal to plain sampling's
 * (chi-square); the vocabulary refusals; p_min and draft_min. */
#include "harness.h"
#include "minfer.h"

#include "engine/engine_impl.h" /* mf_draft_pick, for the confidence rule */
#include "model/model.h"
#include "tok/tok_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const mf_token k_prompt[] = {785, 6722, 315, 9625, 374};
#define N_PROMPT 5
#define MAX_TOK 256

typedef struct {
    const char *name, *args;
    uint32_t kv;
    mf_model *target, *draft;
    char tpath[512], dpath[512];
} pair;

static pair pairs[] = {
    {"qwen2 q8_0, f16 KV", "--arch qwen2 --type q8_0", MF_KV_TYPE_F16, NULL, NULL, "", ""},
    {"qwen3 q4_k, q8_0 KV", "--arch qwen3 --type q4_k", MF_KV_TYPE_Q8_0, NULL, NULL, "", ""},
    {"qwen2 f16 untied, f32 KV", "--arch qwen2 --type f16", MF_KV_TYPE_F32, NULL, NULL, "", ""},
};
#define N_PAIRS 3

/* Under an emulator (scripts/cross-test.sh sets MF_TEST_EMULATED=1: every float operation is emulated, and
 * this binary took 27 minutes there) the greedy identity runs on the first pair only (q8_0 weights, the
 * NEON kernels' path; the f16 pair's scalar LM head is most of the cost) and the chi-square test draws 100
 * tokens a side instead of 300.  The native run keeps every pair and draw, so no property goes untested. */
static int n_pairs_run(void) { return mf_test_emulated() ? 1 : N_PAIRS; }

typedef struct {
    mf_token tok[MAX_TOK];
    int32_t n;
    char text[16384];
    size_t len;
    int status;
    int64_t drafted, accepted;
} result;

static mf_context *new_ctx(mf_model *m, int32_t n_ctx, uint32_t kv) {
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 1;
    cp.type_k = cp.type_v = kv;
    mf_context *c = NULL;
    mf_error err = {0};
    if (mf_context_new(m, &cp, &c, &err)) printf("  context: %s\n", err.msg);
    return c;
}

static mf_draft *new_draft(pair *p, mf_context *ctx, int32_t draft_max, int32_t draft_min, float p_min) {
    mf_draft_params dp = mf_draft_default_params();
    dp.draft_max = draft_max;
    dp.draft_min = draft_min;
    dp.p_min = p_min;
    mf_draft *d = NULL;
    mf_error err = {0};
    if (mf_draft_new(p->draft, ctx, &dp, &d, &err)) printf("  draft: %s\n", err.msg);
    return d;
}

/* One turn on the prompt in a cleared context (d NULL: plain). */
static int run(mf_context *ctx, mf_draft *d, const mf_gen_params *gp, result *r) {
    memset(r, 0, sizeof *r);
    mf_kv_clear_all(ctx);
    mf_gen *g = NULL;
    mf_error err = {0};
    if (mf_gen_new(ctx, gp, &g, &err) || mf_gen_feed(g, k_prompt, N_PROMPT, &err)) {
        printf("  gen: %s\n", err.msg);
        mf_gen_free(g);
        return -1;
    }
    mf_gen_out o;
    int k = 0;
    do {
        if (mf_gen_step_spec(g, d, &o, &err)) {
            printf("  step: %s\n", err.msg);
            mf_gen_free(g);
            return -1;
        }
        if (r->n + o.n_tokens > MAX_TOK || r->len + o.text_len > sizeof r->text) break;
        if (o.n_tokens) memcpy(r->tok + r->n, o.tokens, sizeof *o.tokens * (size_t)o.n_tokens);
        r->n += o.n_tokens;
        if (o.text_len) memcpy(r->text + r->len, o.text, o.text_len);
        r->len += o.text_len;
    } while (o.status == MF_GEN_RUNNING && ++k < 1000);
    r->status = o.status;
    mf_gen_stats st;
    mf_gen_get_stats(g, &st);
    r->drafted = st.n_drafted;
    r->accepted = st.n_accepted;
    mf_gen_free(g);
    return 0;
}

static bool same(const result *a, const result *b) {
    return a->n == b->n && !memcmp(a->tok, b->tok, sizeof *a->tok * (size_t)a->n) && a->len == b->len &&
           !memcmp(a->text, b->text, a->len) && a->status == b->status;
}

static mf_sampler_params greedy(void) {
    mf_sampler_params sp = mf_sampler_default_params();
    sp.temp = 0;
    return sp;
}

/* Adds token x to both models' end-of-generation lists (the vocabulary check compares them), so a run
 * ends on a token the synthetic model does produce; undo restores the lists. */
static void make_eog(pair *p, mf_token x, bool undo) {
    mf_model *ms[2] = {p->target, p->draft};
    for (int i = 0; i < 2; i++) {
        if (undo) ms[i]->n_eog--;
        else ms[i]->eog[ms[i]->n_eog++] = x;
    }
}

/* The first generated token at index >= from that did not occur before it (in the prompt or output). */
static int32_t fresh_index(const result *r, int32_t from) {
    for (int32_t i = from; i < r->n; i++) {
        bool seen = false;
        for (int32_t k = 0; k < i && !seen; k++) seen = r->tok[k] == r->tok[i];
        for (int32_t k = 0; k < N_PROMPT && !seen; k++) seen = k_prompt[k] == r->tok[i];
        if (!seen) return i;
    }
    return -1;
}

static void test_greedy_speculative_output_is_bitwise_the_plain_output(void) {
    static const int32_t maxes[] = {1, 4, 16};
    int64_t drafted = 0, accepted = 0;
    for (int pi = 0; pi < n_pairs_run(); pi++) {
        pair *p = &pairs[pi];
        mf_context *ctx = new_ctx(p->target, 256, p->kv);
        REQUIRE(ctx, "context");
        /* 0: -n 40; 1: EOS inside a block; 2: a stop string inside a block; 3: the context end */
        for (int end = 0; end < 4; end++) {
            mf_gen_params gp = mf_gen_default_params();
            gp.sampler = greedy();
            gp.n_predict = 40;
            result plain, base;
            REQUIRE_OK(run(ctx, NULL, &gp, &base), "plain");
            int32_t at = -1;
            char stop[64] = "";
            const char *stops[1] = {stop};
            if (end == 1) {
                at = fresh_index(&base, 4);
                REQUIRE(at > 0, "%s: a fresh token after 4", p->name);
                make_eog(p, base.tok[at], false);
            } else if (end == 2) { /* the text of a fresh token as the stop string */
                at = fresh_index(&base, 6);
                REQUIRE(at > 0, "%s: a fresh token after 6", p->name);
                char *s = NULL;
                size_t len = 0;
                REQUIRE_OK(mf_detokenize(p->target, &base.tok[at], 1, &s, &len, NULL), "detok");
                snprintf(stop, sizeof stop, "%.*s", (int)MF_MIN(len, sizeof stop - 1), s);
                free(s);
                gp.stop = stops;
                gp.n_stop = stop[0] ? 1 : 0;
            } else if (end == 3) {
                gp.n_predict = -1;
                gp.n_ctx = N_PROMPT + 13;
            }
            if (end == 0)
                plain = base; /* the same parameters: the same run */
            else
                REQUIRE_OK(run(ctx, NULL, &gp, &plain), "plain");
            int want = end == 0 ? MF_GEN_LENGTH : end == 1 ? MF_GEN_EOG : end == 2 ? MF_GEN_STOP : MF_GEN_CONTEXT;
            CHECK(plain.status == want || (end == 2 && !stop[0]), "%s end %d: plain stopped with %s", p->name, end,
                  mf_gen_status_name(plain.status));
            for (int mi = end ? 1 : 0; mi < 3; mi++) { /* draft-max 1 only for the plain end */
                mf_draft *d = new_draft(p, ctx, maxes[mi], 0, 0.0f);
                REQUIRE(d, "draft");
                result spec;
                REQUIRE_OK(run(ctx, d, &gp, &spec), "speculative");
                CHECK(same(&plain, &spec), "%s, end %d, draft-max %d: %d tokens (%s) vs plain %d (%s)", p->name, end,
                      maxes[mi], spec.n, mf_gen_status_name(spec.status), plain.n, mf_gen_status_name(plain.status));
                CHECK(spec.accepted > 0, "%s, end %d, draft-max %d: no draft was accepted (%lld drafted)", p->name, end,
                      maxes[mi], (long long)spec.drafted);
                drafted += spec.drafted;
                accepted += spec.accepted;
                mf_draft_free(d);
            }
            if (end == 1) make_eog(p, base.tok[at], true);
        }
        mf_context_free(ctx);
    }
    /* both paths ran: drafts that were accepted, and drafts that were rejected */
    CHECK(accepted > 0 && accepted < drafted, "accepted %lld of %lld drafted", (long long)accepted,
          (long long)drafted);
    printf("  greedy: accepted %lld of %lld drafted tokens\n", (long long)accepted, (long long)drafted);
}

static void test_seeded_speculative_sampling_is_bitwise_the_plain_sampling(void) {
    pair *p = &pairs[0];
    mf_context *ctx = new_ctx(p->target, 256, p->kv);
    REQUIRE(ctx, "context");
    mf_draft *d = new_draft(p, ctx, 8, 0, 0.0f);
    REQUIRE(d, "draft");
    int64_t drafted = 0, accepted = 0;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        mf_gen_params gp = mf_gen_default_params();
        gp.sampler = mf_sampler_default_params();
        gp.sampler.seed = seed;
        gp.sampler.temp = seed >= 4 ? 3.0f : 1.0f;
        gp.sampler.penalty_repeat = seed == 3 ? 1.3f : 1.0f; /* the penalty history must follow commits */
        if (seed == 5) /* DRY's history follows commits too; XTC's coin and top_n_sigma come from the one chain */
            gp.sampler.dry_multiplier = 1.0f, gp.sampler.dry_allowed_length = 1, gp.sampler.xtc_probability = 0.5f,
            gp.sampler.top_n_sigma = 2.0f;
        if (seed == 6) /* Mirostat's mu moves with every draw, drafted rows or not */
            gp.sampler.mirostat = 2, gp.sampler.mirostat_tau = 3.0f, gp.sampler.dry_multiplier = 0.5f;
        gp.n_predict = 48;
        result plain, spec;
        REQUIRE_OK(run(ctx, NULL, &gp, &plain), "plain");
        REQUIRE_OK(run(ctx, d, &gp, &spec), "speculative");
        CHECK(same(&plain, &spec), "seed %llu: %d tokens vs plain %d", (unsigned long long)seed, spec.n, plain.n);
        drafted += spec.drafted;
        accepted += spec.accepted;
    }
    CHECK(accepted > 0 && accepted < drafted, "accepted %lld of %lld", (long long)accepted, (long long)drafted);
    mf_draft_free(d);
    mf_context_free(ctx);
}

/* Upper quantile of chi-square with k degrees of freedom at z standard deviations (Wilson-Hilferty). */
static double chi2_quantile(int k, double z) {
    double a = 2.0 / (9.0 * k);
    double c = 1.0 - a + z * sqrt(a);
    return k * c * c * c;
}

/* Two-sample chi-square test of homogeneity: plain sampling (seeds 1..N) and speculative sampling
 * (seeds N+1..2N, so the two samples are independent draws, not the same draws twice) of the 2nd and 3rd
 * generated tokens - the ones the draft proposes - at temperature 8 over the top 40, where the target's distribution is
 * spread and the greedy draft is often rejected.  Significance 0.001 (z = 3.09). */
#define N_DRAWS_MAX 300
static void test_speculative_sampling_keeps_the_targets_distribution_chi_square(void) {
    const int N_DRAWS = mf_test_emulated() ? 100 : N_DRAWS_MAX;
    pair *p = &pairs[0];
    mf_context *ctx = new_ctx(p->target, 64, p->kv);
    REQUIRE(ctx, "context");
    mf_draft *d = new_draft(p, ctx, 2, 0, 0.0f);
    REQUIRE(d, "draft");
    enum { CAP = 4096 };
    static uint64_t key[CAP];
    static int32_t cnt[2][CAP];
    int n_key = 0;
    memset(cnt, 0, sizeof cnt);
    int64_t drafted = 0, accepted = 0;
    for (int side = 0; side < 2; side++)
        for (int s = 0; s < N_DRAWS; s++) {
            mf_gen_params gp = mf_gen_default_params();
            gp.sampler = mf_sampler_default_params();
            gp.sampler.seed = (uint64_t)(side * N_DRAWS + s + 1);
            gp.sampler.temp = 8.0f;
            gp.sampler.top_k = 40; /* a full sort of 151936 candidates per draw would dominate the test */
            gp.sampler.top_p = 1.0f;
            gp.sampler.min_p = 0.0f;
            gp.n_predict = 3;
            result r;
            REQUIRE_OK(run(ctx, side ? d : NULL, &gp, &r), "run");
            REQUIRE(r.n == 3, "3 tokens, got %d", r.n);
            drafted += r.drafted;
            accepted += r.accepted;
            for (int pos = 1; pos < 3; pos++) { /* one category per (position, token) */
                uint64_t k = (uint64_t)pos << 32 | (uint32_t)r.tok[pos];
                int i = 0;
                while (i < n_key && key[i] != k) i++;
                if (i == n_key) {
                    REQUIRE(n_key < CAP, "categories");
                    key[n_key++] = k;
                }
                cnt[side][i]++;
            }
        }
    /* pool categories with fewer than 10 draws in all into one, so every expected count is >= 5 */
    double chi2 = 0;
    int df = -1, n_cat = 0;
    int32_t rest[2] = {0, 0};
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < (pass ? 1 : n_key); i++) {
            int32_t a = pass ? rest[0] : cnt[0][i], b = pass ? rest[1] : cnt[1][i];
            if (!pass && a + b < 10) {
                rest[0] += a, rest[1] += b;
                continue;
            }
            if (a + b == 0) continue;
            double e = (a + b) / 2.0; /* equal sample sizes */
            chi2 += (a - e) * (a - e) / e + (b - e) * (b - e) / e;
            df++, n_cat++;
        }
    double crit = df > 0 ? chi2_quantile(df, 3.09) : 0;
    printf("  chi-square %.2f over %d categories (df %d), critical %.2f at 0.001; draft accepted %lld of %lld\n", chi2,
           n_cat, df, crit, (long long)accepted, (long long)drafted);
    CHECK(df >= 3, "the distribution is too narrow to test: %d categories", n_cat);
    CHECK(accepted > 0 && accepted < drafted, "both outcomes: accepted %lld of %lld", (long long)accepted,
          (long long)drafted);
    CHECK(chi2 < crit, "speculative sampling's distribution differs from plain: chi-square %.2f >= %.2f (df %d)", chi2,
          crit, df);
    mf_draft_free(d);
    mf_context_free(ctx);
}

static void test_a_draft_with_another_vocabulary_is_refused_naming_the_difference(void) {
    pair *p = &pairs[0];
    mf_context *ctx = new_ctx(p->target, 64, p->kv);
    REQUIRE(ctx, "context");
    mf_error err = {0};
    mf_draft *d = NULL;
    REQUIRE_OK(mf_draft_check_vocab(p->target, p->draft, &err), "the pair agrees: %s", err.msg);
    /* size */
    int32_t nv = p->draft->hp.n_vocab;
    p->draft->hp.n_vocab = nv - 64;
    CHECK(mf_draft_new(p->draft, ctx, NULL, &d, &err) == MF_E_INVAL && !d, "size refused");
    CHECK(strstr(err.msg, "the target has 151936 tokens, the draft 151872"), "size message: %s", err.msg);
    p->draft->hp.n_vocab = nv;
    /* a token's text */
    mf_tok *t = p->draft->tok;
    uint32_t off = t->text_off[1000], len = t->text_len[1000];
    t->text_off[1000] = t->text_off[1001], t->text_len[1000] = t->text_len[1001];
    CHECK(mf_draft_new(p->draft, ctx, NULL, &d, &err) == MF_E_INVAL && !d, "text refused");
    CHECK(strstr(err.msg, "differs at token 1000") && strstr(err.msg, "target's text is '") &&
              strstr(err.msg, "the draft's '"),
          "text message: %s", err.msg);
    printf("  %s\n", err.msg);
    t->text_off[1000] = off, t->text_len[1000] = len;
    /* a special id */
    int32_t eos = t->eos;
    t->eos = 11;
    CHECK(mf_draft_new(p->draft, ctx, NULL, &d, &err) == MF_E_INVAL && !d, "EOS refused");
    CHECK(strstr(err.msg, "EOS id is") && strstr(err.msg, "the draft's 11"), "EOS message: %s", err.msg);
    t->eos = eos;
    REQUIRE_OK(mf_draft_new(p->draft, ctx, NULL, &d, &err), "restored: %s", err.msg);
    mf_draft_free(d);
    mf_context_free(ctx);
}

typedef struct {
    float v;
    int32_t id;
} logit_id;
static int by_logit_desc(const void *a, const void *b) {
    const logit_id *x = a, *y = b;
    return x->v != y->v ? (x->v < y->v ? 1 : -1) : (x->id > y->id) - (x->id < y->id);
}

static void test_p_min_and_draft_min_cut_proposals(void) {
    pair *p = &pairs[0];
    mf_context *ctx = new_ctx(p->target, 128, p->kv);
    REQUIRE(ctx, "context");
    mf_token out[MF_DRAFT_MAX];
    int32_t n = -1;
    /* p_min 0 drafts draft_max; p_min 1 drafts nothing (no softmax top is exactly 1 here) */
    mf_draft *d = new_draft(p, ctx, 6, 0, 0.0f);
    REQUIRE(d, "draft");
    REQUIRE_OK(mf_draft_propose(d, 0, k_prompt, N_PROMPT, 16, out, &n, NULL), "propose");
    CHECK(n == 6, "p_min 0, draft-max 6: %d drafted", n);
    mf_token first = out[0];
    /* the same history again: the cache is reused (nothing new prefilled but the last token) */
    mf_draft_stats st0, st1;
    mf_draft_get_stats(d, &st0);
    REQUIRE_OK(mf_draft_propose(d, 0, k_prompt, N_PROMPT, 3, out, &n, NULL), "propose");
    mf_draft_get_stats(d, &st1);
    CHECK(n == 3 && out[0] == first, "max 3: %d drafted, first %d (was %d)", n, out[0], first);
    CHECK(st1.n_prefilled - st0.n_prefilled == 1, "re-proposal prefilled %lld tokens",
          (long long)(st1.n_prefilled - st0.n_prefilled));
    mf_draft_free(d);
    d = new_draft(p, ctx, 6, 0, 1.0f);
    REQUIRE(d, "draft");
    REQUIRE_OK(mf_draft_propose(d, 0, k_prompt, N_PROMPT, 16, out, &n, NULL), "propose");
    CHECK(n == 0, "p_min 1: %d drafted", n);
    mf_draft_free(d);
    /* p_min between: the drafted tokens are exactly those up to the first below it (checked against the
     * draft's probabilities recomputed here from the draft model's own logits) */
    d = new_draft(p, ctx, 16, 0, 0.9f);
    REQUIRE(d, "draft");
    REQUIRE_OK(mf_draft_propose(d, 0, k_prompt, N_PROMPT, 16, out, &n, NULL), "propose");
    int32_t n_p = n;
    mf_draft_free(d);
    mf_context *dc = new_ctx(p->draft, 64, MF_KV_TYPE_F16);
    REQUIRE(dc, "draft context");
    mf_batch b;
    mf_batch_init(&b, 32, NULL);
    for (int32_t i = 0; i < N_PROMPT; i++) mf_batch_add(&b, k_prompt[i], i, 0, i == N_PROMPT - 1);
    int32_t expect = 0;
    mf_token hist_next;
    for (int32_t k = 0; k < 16; k++) {
        REQUIRE_OK(mf_decode(dc, &b, NULL), "decode");
        const float *lg = mf_get_logits(dc, -1);
        /* llama.cpp's confidence: the top token's softmax share among the 10 highest logits (sorted here) */
        const int32_t nv = p->draft->hp.n_vocab;
        logit_id *s = malloc(sizeof *s * (size_t)nv);
        REQUIRE(s, "sort buffer");
        for (int32_t i = 0; i < nv; i++) s[i] = (logit_id){lg[i], i};
        qsort(s, (size_t)nv, sizeof *s, by_logit_desc);
        int32_t best = s[0].id;
        double sum = 0;
        for (int32_t j = 0; j < 10; j++) sum += exp((double)s[j].v - s[0].v);
        free(s);
        if (1.0 / sum < 0.9) break;
        hist_next = best;
        expect++;
        mf_batch_clear(&b);
        mf_batch_add(&b, hist_next, N_PROMPT + k, 0, true);
    }
    CHECK(n_p == expect, "p_min 0.9: drafted %d, the draft's probabilities say %d", n_p, expect);
    mf_batch_free(&b);
    mf_context_free(dc);
    /* draft_min above what p_min lets through: nothing */
    if (expect < 16) {
        d = new_draft(p, ctx, 16, expect + 1, 0.9f);
        REQUIRE(d, "draft");
        REQUIRE_OK(mf_draft_propose(d, 0, k_prompt, N_PROMPT, 16, out, &n, NULL), "propose");
        CHECK(n == 0, "draft-min %d with %d possible: %d drafted", expect + 1, expect, n);
        mf_draft_free(d);
    }
    /* bad parameters are refused naming the value */
    mf_draft_params dp = mf_draft_default_params();
    mf_error err = {0};
    dp.draft_max = 0;
    CHECK(mf_draft_new(p->draft, ctx, &dp, &d, &err) == MF_E_INVAL && strstr(err.msg, "got 0"), "%s", err.msg);
    dp = mf_draft_default_params();
    dp.p_min = 1.5f;
    CHECK(mf_draft_new(p->draft, ctx, &dp, &d, &err) == MF_E_INVAL && strstr(err.msg, "1.5"), "%s", err.msg);
    dp = mf_draft_default_params();
    dp.draft_min = 17;
    CHECK(mf_draft_new(p->draft, ctx, &dp, &d, &err) == MF_E_INVAL && strstr(err.msg, "got 17"), "%s", err.msg);
    mf_context_free(ctx);
}

/* The draft's confidence is llama.cpp's: the pick's softmax share among the 10 highest logits - not the
 * whole-vocabulary softmax, not a narrower top - and the pick is the first highest logit.  Logits made so
 * the three differ widely (the tiny models' drafts are too sure of themselves for that): 12 high values
 * spread over the vocabulary, the rest flat. */
static void test_draft_confidence_is_the_top10_share(void) {
    const int32_t nv = 151936;
    float *lg = malloc(sizeof *lg * (size_t)nv);
    REQUIRE(lg, "logits");
    for (int32_t i = 0; i < nv; i++) lg[i] = (float)(i % 7) * 0.01f;
    const float high[12] = {3.0f, 2.5f, 2.4f, 2.3f, 2.2f, 2.1f, 2.0f, 1.9f, 1.8f, 1.7f, 1.6f, 1.5f};
    const int32_t at[12] = {90001, 5, 151935, 70000, 12, 3000, 100, 42, 150000, 77, 8, 66666};
    for (int k = 0; k < 12; k++) lg[at[k]] = high[k];
    lg[120000] = 3.0f; /* ties the top: the first (lowest id) highest logit is the pick */
    double top10 = 0;
    const float sorted[10] = {3.0f, 3.0f, 2.5f, 2.4f, 2.3f, 2.2f, 2.1f, 2.0f, 1.9f, 1.8f};
    for (int k = 0; k < 10; k++) top10 += exp((double)sorted[k] - 3.0);
    float prob = -1;
    mf_token t = mf_draft_pick(lg, nv, &prob);
    CHECK(t == 90001, "pick %d, want 90001 (the first of two equal highest logits)", t);
    CHECK(fabs((double)prob - 1.0 / top10) < 1e-6, "confidence %.7f, the top-10 share is %.7f (top 2 %.7f)",
          (double)prob, 1.0 / top10, 0.5);
    free(lg);
}

int main(void) {
    const char *gen = mf_test_genmodel();
    for (int i = 0; i < n_pairs_run(); i++) {
        pair *p = &pairs[i];
        snprintf(p->tpath, sizeof p->tpath, "%s/spec-%d-target.gguf", mf_test_tmpdir(), i);
        snprintf(p->dpath, sizeof p->dpath, "%s/spec-%d-draft.gguf", mf_test_tmpdir(), i);
        char cmd[2048];
        const char *common = "--lowrank 64 --layer-scale 0.06 --seed 7 -q";
        snprintf(cmd, sizeof cmd, "%s %s %s -o %s && %s %s %s --draft -o %s", gen, p->args,
                 common, p->tpath, gen, p->args, common, p->dpath);
        mf_error err = {0};
        if (system(cmd) != 0 || mf_model_load(p->tpath, NULL, &p->target, &err) ||
            mf_model_load(p->dpath, NULL, &p->draft, &err)) {
            printf("FAIL: the test pair %s: %s\n", p->name, err.msg);
            return mf_test_done() | 1;
        }
    }
    RUN(test_greedy_speculative_output_is_bitwise_the_plain_output);
    RUN(test_seeded_speculative_sampling_is_bitwise_the_plain_sampling);
    RUN(test_speculative_sampling_keeps_the_targets_distribution_chi_square);
    RUN(test_a_draft_with_another_vocabulary_is_refused_naming_the_difference);
    RUN(test_p_min_and_draft_min_cut_proposals);
    RUN(test_draft_confidence_is_the_top10_share);
    for (int i = 0; i < n_pairs_run(); i++) {
        mf_model_free(pairs[i].target);
        mf_model_free(pairs[i].draft);
        remove(pairs[i].tpath);
        remove(pairs[i].dpath);
    }
    return mf_test_done();
}
