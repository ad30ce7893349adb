/* llama-server's other samplers - DRY, XTC, top-n-sigma, dynamic temperature, Mirostat 1 and 2 - against
 * llama.cpp's own expectations (tests/test-sampling.cpp: the probabilities each stage leaves) where it has
 * them, and against the formulas of src/llama-sampling.cpp worked by hand where it does not.  Plus the
 * invariants the sampler's shortcuts rest on: the top_k shortcut with DRY and top_n_sigma equals building
 * every candidate, and a draw ahead that is put back leaves Mirostat's mu as it was. */
#include "harness.h"

#include "engine/engine_impl.h"
#include "support/sampler_params.h"
#include "server/breakers.h"
#include "tok/tok.h"

#include <math.h>


/* The chain's probability of each id (0 for an id it left out), from logits log(probs). */
static int probs_by_id(mf_sampler *s, const float *probs, int n, float *out) {
    float l[16], pr[16];
    int32_t ids[16];
    for (int i = 0; i < n; i++) l[i] = logf(probs[i]), out[i] = 0.0f;
    const int m = mf_sampler_candidates(s, l, ids, pr, 16);
    for (int i = 0; i < m; i++) out[ids[i]] = pr[i];
    return m;
}

/* llama.cpp's test_dry cases: probabilities, history, expectation, multiplier, base, allowed length, last_n,
 * breakers (token sequences). */
static void test_dry_follows_llama_cpp(void) {
    static const struct {
        int n;
        float probs[5];
        int n_hist;
        mf_token hist[8];
        float want[5];
        float mult, base;
        int32_t allowed, last_n;
        int n_brk;
        mf_token brk[1];
    } c[] = {
        {4, {.25f, .25f, .25f, .25f}, 2, {0, 1}, {.25f, .25f, .25f, .25f}, 1.0f, 1.1f, 2, 4, 0, {0}},
        {4, {.25f, .25f, .25f, .25f}, 5, {0, 1, 2, 0, 1}, {0.296923f, 0.296923f, 0.109232f, 0.296923f}, 1.0f, 1.1f,
         2, 5, 0, {0}},
        {5, {.2f, .2f, .2f, .2f, .2f}, 6, {0, 1, 3, 4, 0, 1}, {.2f, .2f, .2f, .2f, .2f}, 1.0f, 1.1f, 2, 6, 1, {3}},
        {5, {.2f, .2f, .2f, .2f, .2f}, 5, {0, 1, 2, 0, 1}, {0.241818f, 0.241818f, 0.032727f, 0.241818f, 0.241818f},
         2.0f, 1.1f, 2, 5, 0, {0}},
        {5, {.2f, .2f, .2f, .2f, .2f}, 7, {0, 1, 2, 3, 4, 0, 1}, {.2f, .2f, .2f, .2f, .2f}, 1.0f, 1.1f, 4, 7, 0, {0}},
    };
    for (size_t k = 0; k < MF_ARRAY_LEN(c); k++) {
        mf_dry_breakers *br = NULL;
        mf_error err = {0};
        const int32_t len1 = 1;
        if (c[k].n_brk) REQUIRE_OK(mf_dry_breakers_from_tokens(c[k].brk, &len1, 1, &br, &err), "%s", err.msg);
        mf_sampler_params p = mf_test_sampler_off();
        p.dry_multiplier = c[k].mult, p.dry_base = c[k].base, p.dry_allowed_length = c[k].allowed;
        p.dry_last_n = c[k].last_n, p.dry_breakers = br;
        mf_sampler *s = mf_test_sampler_new(&p, c[k].n);
        mf_dry_breakers_free(br); /* the sampler holds its own copy */
        REQUIRE(s, "new");
        for (int i = 0; i < c[k].n_hist; i++) mf_sampler_accept(s, c[k].hist[i]);
        float got[5];
        probs_by_id(s, c[k].probs, c[k].n, got);
        for (int i = 0; i < c[k].n; i++)
            CHECK(NEAR(got[i], c[k].want[i]), "case %zu id %d: p %f, llama.cpp %f", k, i, got[i], c[k].want[i]);
        mf_sampler_free(s);
    }
}

/* A repeat reaches back only to the newest breaker; a breaker of several tokens counts once all of them are
 * there; a token that is a breaker by itself is never penalized; the exponent grows with the repeat. */
static void test_dry_breakers_limit_the_repeat(void) {
    /* history a b c d a b c: token d (3) would extend "a b c" (3 long): 1.0 * 2^(3-2) = 2 */
    const mf_token hist[] = {0, 1, 2, 3, 0, 1, 2};
    const float probs[6] = {1 / 6.f, 1 / 6.f, 1 / 6.f, 1 / 6.f, 1 / 6.f, 1 / 6.f};
    struct {
        int32_t n_brk, lens[2];
        mf_token toks[3];
        float want_logit_drop; /* of token 3 */
    } c[] = {
        {0, {0, 0}, {0}, 2.0f},           /* no breaker: 3 long */
        {1, {1, 0}, {1}, 0.0f},           /* b breaks: the repeat "c" is 1 long, under the allowed 2 */
        {1, {2, 0}, {1, 2}, 0.0f},        /* "b c" breaks: complete at the end, a repeat of 0 */
        {1, {2, 0}, {1, 4}, 2.0f},        /* "b e" never occurs: no limit */
        {1, {1, 0}, {3}, 0.0f},           /* d itself is a breaker: spared */
        {2, {1, 1}, {5, 0}, 1.0f},        /* 5 never occurs; a, 2 back, limits the repeat to "b c": 2^0 */
    };
    for (size_t k = 0; k < MF_ARRAY_LEN(c); k++) {
        mf_dry_breakers *br = NULL;
        mf_error err = {0};
        if (c[k].n_brk)
            REQUIRE_OK(mf_dry_breakers_from_tokens(c[k].toks, c[k].lens, c[k].n_brk, &br, &err), "%s", err.msg);
        mf_sampler_params p = mf_test_sampler_off();
        p.dry_multiplier = 1.0f, p.dry_base = 2.0f, p.dry_allowed_length = 2, p.dry_last_n = -1, p.dry_breakers = br;
        mf_sampler *s = mf_test_sampler_new(&p, 6);
        mf_dry_breakers_free(br);
        REQUIRE(s, "new");
        for (size_t i = 0; i < MF_ARRAY_LEN(hist); i++) mf_sampler_accept(s, hist[i]);
        float got[6];
        probs_by_id(s, probs, 6, got);
        /* every other token keeps its logit: the drop is log(p_other / p_3) */
        const float drop = logf(got[4] / got[3]);
        CHECK(NEAR(drop, c[k].want_logit_drop), "case %zu: token 3 lost %f, want %f", k, drop, c[k].want_logit_drop);
        mf_sampler_free(s);
    }
}

/* DRY's window: dry_last_n = 4 sees only "d a b c"; a longer history with the same tail is penalized alike. */
static void test_dry_window_is_the_last_n(void) {
    /* a b c d, four e, then a b c: the whole history holds "a b c" followed by d (token 3 would extend a repeat
     * of 3: 2^(3-1) = 4), the last 4 tokens (e a b c) hold no repeat at all */
    const mf_token hist[] = {0, 1, 2, 3, 4, 4, 4, 4, 0, 1, 2};
    const float probs[6] = {1 / 6.f, 1 / 6.f, 1 / 6.f, 1 / 6.f, 1 / 6.f, 1 / 6.f};
    const struct {
        int32_t last_n;
        float want; /* token 3's loss */
    } c[] = {{-1, 4.0f}, {4, 0.0f}, {10, 2.0f}, {11, 4.0f}, {0, 0.0f}}; /* 10: "b c" then d, 2^1 */
    for (size_t k = 0; k < MF_ARRAY_LEN(c); k++) {
        mf_sampler_params p = mf_test_sampler_off();
        p.dry_multiplier = 1.0f, p.dry_base = 2.0f, p.dry_allowed_length = 1, p.dry_last_n = c[k].last_n;
        mf_sampler *s = mf_test_sampler_new(&p, 6);
        REQUIRE(s, "new");
        for (size_t i = 0; i < MF_ARRAY_LEN(hist); i++) mf_sampler_accept(s, hist[i]);
        float got[6];
        probs_by_id(s, probs, 6, got);
        CHECK(NEAR(logf(got[5] / got[3]), c[k].want), "last_n %d: token 3 lost %f, want %f", c[k].last_n,
              logf(got[5] / got[3]), c[k].want);
        CHECK(NEAR(got[0], got[5]) && NEAR(got[1], got[5]) && NEAR(got[2], got[5]) && NEAR(got[4], got[5]),
              "last_n %d: only token 3 is penalized", c[k].last_n);
        mf_sampler_reset(s); /* the history goes with a reset */
        probs_by_id(s, probs, 6, got);
        CHECK(NEAR(got[3], 1 / 6.f), "last_n %d: after reset token 3 has p %f", c[k].last_n, got[3]);
        mf_sampler_free(s);
    }
}

/* llama.cpp's test_xtc: p 0.4 0.3 0.2 0.1; every candidate at or above the threshold but the last goes. */
static void test_xtc_follows_llama_cpp(void) {
    const float probs[4] = {0.4f, 0.3f, 0.2f, 0.1f};
    const struct {
        float t;
        int keep; /* the kept ones are the last `keep` ids */
    } c[] = {{0.09f, 1}, {0.19f, 2}, {0.29f, 3}, {0.39f, 4}, {0.6f, 4}};
    for (size_t k = 0; k < MF_ARRAY_LEN(c); k++) {
        mf_sampler_params p = mf_test_sampler_off();
        p.xtc_probability = 1.0f, p.xtc_threshold = c[k].t;
        mf_sampler *s = mf_test_sampler_new(&p, 4);
        REQUIRE(s, "new");
        float got[4], sum = 0;
        for (int i = 4 - c[k].keep; i < 4; i++) sum += probs[i];
        const int m = probs_by_id(s, probs, 4, got);
        CHECK(m == c[k].keep, "threshold %g: %d kept, llama.cpp keeps %d", c[k].t, m, c[k].keep);
        for (int i = 0; i < 4; i++) {
            const float want = i < 4 - c[k].keep ? 0.0f : probs[i] / sum;
            CHECK(NEAR(got[i], want), "threshold %g id %d: p %f, want %f", c[k].t, i, got[i], want);
        }
        mf_sampler_free(s);
    }
    /* temperature 0 after XTC is the best of what XTC leaves (llama.cpp's temp stage runs after it) */
    mf_sampler_params g = mf_test_sampler_off();
    g.temp = 0.0f, g.xtc_probability = 1.0f, g.xtc_threshold = 0.19f;
    mf_sampler *gs = mf_test_sampler_new(&g, 4);
    REQUIRE(gs, "new");
    float gl[4];
    for (int i = 0; i < 4; i++) gl[i] = logf(probs[i]);
    CHECK(mf_sampler_sample(gs, gl) == 2, "greedy after XTC picked %d, want 2 (0.4 and 0.3 removed)",
          mf_sampler_sample(gs, gl));
    mf_sampler_free(gs);
    /* probability 0.5: about half the draws run it (the coin comes from the sampler's RNG) */
    mf_sampler_params p = mf_test_sampler_off();
    p.xtc_probability = 0.5f, p.xtc_threshold = 0.09f;
    mf_sampler *s = mf_test_sampler_new(&p, 4);
    REQUIRE(s, "new");
    int cut = 0;
    for (int d = 0; d < 2000; d++) {
        float got[4];
        cut += probs_by_id(s, probs, 4, got) == 1;
    }
    CHECK(cut > 900 && cut < 1100, "XTC ran %d of 2000 times at probability 0.5", cut);
    mf_sampler_free(s);
}

/* llama.cpp's test_top_n_sigma: 1 sigma keeps 0.3 and 0.4; 0 (off) and 3 keep all. */
static void test_top_n_sigma_follows_llama_cpp(void) {
    const float probs[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    const struct {
        float n, want[4];
    } c[] = {{1.0f, {0, 0, 0.428571f, 0.571429f}}, {0.0f, {.1f, .2f, .3f, .4f}}, {3.0f, {.1f, .2f, .3f, .4f}}};
    for (size_t k = 0; k < MF_ARRAY_LEN(c); k++) {
        mf_sampler_params p = mf_test_sampler_off();
        p.top_n_sigma = c[k].n;
        mf_sampler *s = mf_test_sampler_new(&p, 4);
        REQUIRE(s, "new");
        float got[4];
        probs_by_id(s, probs, 4, got);
        for (int i = 0; i < 4; i++)
            CHECK(NEAR(got[i], c[k].want[i]), "n %g id %d: p %f, llama.cpp %f", c[k].n, i, got[i], c[k].want[i]);
        mf_sampler_free(s);
    }
}

/* temp_ext: the temperature is lo + (hi - lo) * (H / log n)^exponent, then the logits are divided by it. */
static void test_dynamic_temperature_follows_the_entropy(void) {
    const float probs[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    const struct {
        float temp, range, exponent;
    } c[] = {{1.0f, 0.5f, 1.0f}, {0.8f, 0.5f, 2.0f}, {0.2f, 0.5f, 1.0f}, {1.0f, 0.0f, 1.0f}};
    double h = 0;
    for (int i = 0; i < 4; i++) h -= probs[i] * log(probs[i]);
    for (size_t k = 0; k < MF_ARRAY_LEN(c); k++) {
        mf_sampler_params p = mf_test_sampler_off();
        p.temp = c[k].temp, p.dynatemp_range = c[k].range, p.dynatemp_exponent = c[k].exponent;
        mf_sampler *s = mf_test_sampler_new(&p, 4);
        REQUIRE(s, "new");
        const double lo = fmax(0, c[k].temp - c[k].range), hi = c[k].temp + c[k].range;
        const double t = c[k].range > 0 ? lo + (hi - lo) * pow(h / log(4), c[k].exponent) : c[k].temp;
        double z = 0, want[4];
        for (int i = 0; i < 4; i++) z += want[i] = pow(probs[i], 1 / t);
        float got[4];
        probs_by_id(s, probs, 4, got);
        for (int i = 0; i < 4; i++)
            CHECK(NEAR(got[i], want[i] / z), "case %zu id %d: p %f, want %f (temperature %f)", k, i, got[i],
                  want[i] / z, t);
        mf_sampler_free(s);
    }
    /* temp 0 with a range is not greedy: the range alone sets the temperature */
    mf_sampler_params p = mf_test_sampler_off();
    p.temp = 0.0f, p.dynatemp_range = 1.0f;
    mf_sampler *s = mf_test_sampler_new(&p, 4);
    REQUIRE(s, "new");
    float got[4];
    CHECK(probs_by_id(s, probs, 4, got) == 4, "temp 0 with dynatemp_range 1 kept one candidate");
    mf_sampler_free(s);
}

/* Mirostat 2.0: only tokens of surprise <= mu (2 * tau at first) are drawn, and mu moves by eta times the
 * error of each draw's surprise (its probability among the kept ones). */
static void test_mirostat_v2_truncates_at_mu_and_learns(void) {
    const float probs[5] = {0.5f, 0.25f, 0.125f, 0.0625f, 0.0625f};
    float l[5];
    for (int i = 0; i < 5; i++) l[i] = logf(probs[i]);
    mf_sampler_params p = mf_test_sampler_off();
    p.mirostat = 2, p.mirostat_tau = 1.1f, p.mirostat_eta = 0.1f; /* mu 2.2: p >= 0.22 (no p on the edge) */
    mf_sampler *s = mf_test_sampler_new(&p, 5);
    REQUIRE(s, "new");
    float mu;
    CHECK(mf_sampler_mu(s, &mu) && mu == 2.2f, "mu starts at %f, want 2 * tau", mu);
    int bad = 0;
    for (int d = 0; d < 200; d++) {
        float before;
        mf_sampler_mu(s, &before);
        const mf_token t = mf_sampler_sample(s, l);
        /* what the kept set was, and the draw's renormalized probability */
        double z = 0;
        for (int i = 0; i < 5; i++) z += -log2(probs[i]) <= before ? probs[i] : 0;
        const bool kept = t >= 0 && t < 5 && -log2(probs[t]) <= before;
        const double want = kept ? before - 0.1 * (-log2(probs[t] / z) - 1.1) : NAN;
        mf_sampler_mu(s, &mu);
        if ((!kept || fabs(mu - want) > 1e-4) && bad++ < 3)
            printf("  draw %d: token %d with mu %f; mu now %f, want %f\n", d, t, before, mu, want);
    }
    CHECK(bad == 0, "%d of 200 draws outside surprise mu or with mu off the update rule", bad);
    mf_sampler_reset(s);
    CHECK(mf_sampler_mu(s, &mu) && mu == 2.2f, "reset leaves mu %f", mu);
    mf_sampler_free(s);
}

/* Mirostat 1 on a Zipf distribution p_i ~ 1 / (i + 1)^1.5: its estimate s_hat is 1.5, so the first draw is
 * among the k = (eps 2^mu / (1 - N^-eps))^(1 / s_hat) best, eps = 0.5: k = 10 for tau 3 (mu 6), N 1000. */
static void test_mirostat_v1_keeps_the_zipf_k(void) {
    enum { N = 1000 };
    static float l[N];
    for (int i = 0; i < N; i++) l[i] = -1.5f * logf((float)(i + 1));
    const double k = pow(0.5 * pow(2, 6) / (1 - pow(N, -0.5)), 1 / 1.5);
    CHECK((int)k == 10, "the formula gives k %f", k);
    int outside = 0, seen_last = 0;
    for (uint64_t seed = 1; seed <= 400; seed++) {
        mf_sampler_params p = mf_test_sampler_off();
        p.mirostat = 1, p.mirostat_tau = 3.0f, p.seed = seed;
        mf_sampler *s = mf_test_sampler_new(&p, N);
        REQUIRE(s, "new");
        const mf_token t = mf_sampler_sample(s, l);
        outside += t < 0 || t >= 10;
        seen_last |= t == 9;
        mf_sampler_free(s);
    }
    CHECK(outside == 0, "%d of 400 first draws outside the 10 best", outside);
    CHECK(seen_last, "the 10th best was never drawn in 400 tries (k smaller than 10?)");
    /* tau 10 (mu 20): k is past the vocabulary, every token may come; beyond the 100 best lies 7.7 % of the mass */
    int beyond = 0;
    for (uint64_t seed = 1; seed <= 400; seed++) {
        mf_sampler_params p = mf_test_sampler_off();
        p.mirostat = 1, p.mirostat_tau = 10.0f, p.seed = seed;
        mf_sampler *s = mf_test_sampler_new(&p, N);
        REQUIRE(s, "new");
        beyond += mf_sampler_sample(s, l) >= 100;
        mf_sampler_free(s);
    }
    CHECK(beyond > 10 && beyond < 60, "%d of 400 draws beyond the 100 best, about 31 expected", beyond);
}

/* The top_k shortcut reads the k best straight from the logits; with DRY lowering a few and top_n_sigma's
 * threshold over every token, it must still give the full path's candidates, probabilities and draws. */
static void test_top_k_shortcut_with_dry_and_sigma_equals_every_candidate(void) {
    enum { N = 4099 };
    static float l[N];
    static int32_t ia[256], ib[256];
    static float pa[256], pb[256];
    const int32_t ks[] = {1, 40, 256};
    uint32_t r = 99;
    int bad = 0, runs = 0, dry_hits = 0;
    for (int cfg = 0; cfg < 4; cfg++)
        for (size_t ki = 0; ki < MF_ARRAY_LEN(ks); ki++) {
            mf_sampler_params p = mf_test_sampler_off();
            p.top_k = ks[ki], p.top_p = 0.95f;
            p.dry_multiplier = cfg != 1 ? 0.8f : 0.0f, p.dry_allowed_length = 2;
            p.top_n_sigma = cfg >= 1 ? 1.5f : -1.0f;
            if (cfg == 3) p.penalty_repeat = 1.2f, p.xtc_probability = 0.5f, p.dynatemp_range = 0.3f;
            mf_sampler *fast = mf_test_sampler_new(&p, N), *full = mf_test_sampler_new(&p, N);
            REQUIRE(fast && full, "new");
            mf_sampler_full_path(full, true);
            /* a repeated phrase of high ids (the likely ones below), then its start again */
            const mf_token phrase[] = {N - 1, N - 7, N - 3, N - 12, N - 5};
            for (int rep = 0; rep < 3; rep++)
                for (int i = 0; i < (rep < 2 ? 5 : 3); i++)
                    mf_sampler_accept(fast, phrase[i]), mf_sampler_accept(full, phrase[i]);
            for (int rep = 0; rep < 6; rep++) {
                for (int32_t i = 0; i < N; i++) {
                    r = r * 1664525u + 1013904223u;
                    l[i] = rep == 0 ? (float)i * 0.01f : (float)((r >> 8) % 48) * 0.25f - 6.0f;
                }
                const int na = mf_sampler_candidates(fast, l, ia, pa, 256),
                          nb = mf_sampler_candidates(full, l, ib, pb, 256);
                const bool same = na == nb && !memcmp(ia, ib, (size_t)na * sizeof *ia) &&
                                  !memcmp(pa, pb, (size_t)na * sizeof *pa) &&
                                  mf_sampler_sample(fast, l) == mf_sampler_sample(full, l);
                if (rep == 0 && p.dry_multiplier > 0) { /* N-12 follows the repeat "N-1 N-7 N-3": penalized */
                    bool present = false;
                    for (int i = 0; i < na; i++) present |= ia[i] == N - 12;
                    dry_hits += !present || ks[ki] == 1;
                }
                if (!same && bad++ < 3)
                    printf("  config %d k %d rep %d: %d candidates (first %d), against %d (first %d)\n", cfg, ks[ki],
                           rep, na, ia[0], nb, ib[0]);
                runs++;
            }
            mf_sampler_free(fast);
            mf_sampler_free(full);
        }
    printf("  %d runs compared\n", runs);
    CHECK(bad == 0, "%d of %d runs differ from the full path", bad, runs);
    CHECK(dry_hits > 0, "DRY never moved the token that extends the repeat out of the candidates");
}

/* Greedy with penalties or DRY reads the best token straight from the logits (top_k_of_logits with k 1): the
 * same pick as building every candidate, ties to the lowest id, a penalty of 0.8 raising negative logits,
 * NaN and infinite logits included. */
static void test_greedy_with_penalties_and_dry_equals_every_candidate(void) {
    enum { N = 4099 };
    static float l[N];
    const float pens[][3] = {{1.3f, 0, 0}, {0.8f, 0, 0}, {1.0f, 0.5f, 0.25f}, {1.0f, 0, 0}};
    uint32_t r = 2024;
    int bad = 0, runs = 0;
    for (size_t pi = 0; pi < MF_ARRAY_LEN(pens); pi++)
        for (int dry = 0; dry < 2; dry++) {
            if (!dry && pi == 3) continue; /* nothing on: the plain argmax */
            mf_sampler_params p = mf_test_sampler_off();
            p.temp = 0.0f;
            p.penalty_repeat = pens[pi][0], p.penalty_freq = pens[pi][1], p.penalty_present = pens[pi][2];
            p.dry_multiplier = dry ? 3.0f : 0.0f, p.dry_allowed_length = 1;
            mf_sampler *fast = mf_test_sampler_new(&p, N), *full = mf_test_sampler_new(&p, N);
            REQUIRE(fast && full, "new");
            mf_sampler_full_path(full, true);
            for (int rep = 0; rep < 40; rep++) {
                for (int32_t i = 0; i < N; i++) {
                    r = r * 1664525u + 1013904223u;
                    l[i] = rep % 4 == 0 ? (float)((r >> 8) % 8) - 6.0f : (float)((r >> 8) % 2000) * 0.01f - 10.0f;
                }
                if (rep % 5 == 1) l[(r >> 4) % N] = NAN;
                if (rep % 7 == 2) l[(r >> 6) % N] = INFINITY, l[(r >> 9) % N] = -INFINITY;
                const mf_token a = mf_sampler_sample(fast, l), b = mf_sampler_sample(full, l);
                if (a != b && bad++ < 3) printf("  penalties %zu dry %d rep %d: %d vs %d\n", pi, dry, rep, a, b);
                runs++;
                mf_sampler_accept(fast, a), mf_sampler_accept(full, b); /* the history repeats the picks */
                if (rep % 3 == 0) mf_sampler_accept(fast, N - 1 - rep), mf_sampler_accept(full, N - 1 - rep);
            }
            mf_sampler_free(fast);
            mf_sampler_free(full);
        }
    CHECK(bad == 0, "%d of %d greedy picks differ from the full path", bad, runs);
}

/* min_keep (llama.cpp's): top_p, min_p, typical_p and XTC leave at least that many candidates. */
static void test_min_keep_holds_every_truncation(void) {
    const float probs[4] = {0.4f, 0.3f, 0.2f, 0.1f};
    const struct {
        const char *what;
        float top_p, min_p, typ_p, xtc_t;
        int32_t min_keep, want;
    } c[] = {
        {"top_p 0.3", 0.3f, 0, 1, 0, 0, 1},        {"top_p 0.3, min_keep 3", 0.3f, 0, 1, 0, 3, 3},
        {"min_p 0.9", 1, 0.9f, 1, 0, 0, 1},         {"min_p 0.9, min_keep 2", 1, 0.9f, 1, 0, 2, 2},
        {"typical 0.2", 1, 0, 0.2f, 0, 0, 1},       {"typical 0.2, min_keep 3", 1, 0, 0.2f, 0, 3, 3},
        {"xtc 0.09", 1, 0, 1, 0.09f, 0, 1},         {"xtc 0.09, min_keep 2 (not run)", 1, 0, 1, 0.09f, 2, 4},
        {"xtc 0.19, min_keep 2", 1, 0, 1, 0.19f, 2, 2},
    };
    for (size_t k = 0; k < MF_ARRAY_LEN(c); k++) {
        mf_sampler_params p = mf_test_sampler_off();
        p.top_p = c[k].top_p, p.min_p = c[k].min_p, p.typ_p = c[k].typ_p, p.min_keep = c[k].min_keep;
        if (c[k].xtc_t > 0) p.xtc_probability = 1.0f, p.xtc_threshold = c[k].xtc_t;
        mf_sampler *s = mf_test_sampler_new(&p, 4);
        REQUIRE(s, "new");
        float got[4];
        const int m = probs_by_id(s, probs, 4, got);
        CHECK(m == c[k].want, "%s: %d candidates kept, want %d", c[k].what, m, c[k].want);
        mf_sampler_free(s);
    }
}

/* A generator draws ahead and may put the draw back (mf_sampler_state_set): Mirostat's mu goes back too. */
static void test_state_set_puts_mu_and_rng_back(void) {
    const float l[4] = {1.0f, 0.5f, 0.2f, 0.1f};
    mf_sampler_params p = mf_test_sampler_off();
    p.mirostat = 2;
    mf_sampler *a = mf_test_sampler_new(&p, 4), *b = mf_test_sampler_new(&p, 4);
    REQUIRE(a && b, "new");
    mf_sampler_state st;
    mf_sampler_state_get(a, &st);
    (void)mf_sampler_sample(a, l); /* drawn ahead, then dropped */
    mf_sampler_state_set(a, &st);
    int differ = 0;
    for (int d = 0; d < 50; d++) differ += mf_sampler_sample(a, l) != mf_sampler_sample(b, l);
    float mua, mub;
    mf_sampler_mu(a, &mua), mf_sampler_mu(b, &mub);
    CHECK(differ == 0 && mua == mub, "%d of 50 draws differ, mu %f vs %f", differ, mua, mub);
    mf_sampler_free(a);
    mf_sampler_free(b);
}

/* ---------------- the infill stage (llama.cpp's llama_sampler_infill, worked by hand) ---------------- */

/* texts "a" "ab" "b" "c", then an end-of-generation token (the EOT) */
static mf_infill_vocab *infill_vocab5(void) {
    static const char *const pieces[] = {"a", "ab", "b", "c", "<eog>"};
    static const bool eog[] = {false, false, false, false, true};
    mf_infill_vocab *v = NULL;
    mf_error err = {0};
    if (mf_infill_vocab_from_pieces(pieces, eog, 5, 4, &v, &err)) printf("  infill vocab: %s\n", err.msg);
    return v;
}

/* six texts without common beginnings, an EOG token (6) and a second one (7) that is the EOT */
static mf_infill_vocab *infill_vocab8(void) {
    static const char *const pieces[] = {"x", "y", "z", "w", "v", "u", "<eog>", "<eot>"};
    static const bool eog[] = {false, false, false, false, false, false, true, true};
    mf_infill_vocab *v = NULL;
    mf_error err = {0};
    if (mf_infill_vocab_from_pieces(pieces, eog, 8, 7, &v, &err)) printf("  infill vocab: %s\n", err.msg);
    return v;
}

static mf_sampler *infill_sampler(const mf_infill_vocab *v, int n, int32_t top_k, float temp) {
    mf_sampler_params p = mf_test_sampler_off();
    p.infill = v, p.top_k = top_k, p.temp = temp;
    return mf_test_sampler_new(&p, n);
}

/* A token whose text begins another's is one choice with it (the likelier keeps both probabilities); texts
 * under 0.2, then under 1 / (texts + 1), leave; the draw's probabilities are the survivors' softmax. */
static void test_infill_merges_prefixes_and_keeps_the_backed_few(void) {
    static const struct {
        const char *what;
        float probs[5];
        float want[5];
    } c[] = {
        /* a (.45) takes ab (.30): a .75 alone passes 0.2 and 1/2; the EOG token always stays */
        {"a takes ab", {.45f, .30f, .15f, .0999f, .0001f}, {.45f / .4501f, 0, 0, 0, .0001f / .4501f}},
        /* ab (.40) is likelier than its prefix a (.30): ab takes a; b .25 passes 0.2, not 1/3 of the rest */
        {"ab takes a", {.30f, .40f, .25f, .0499f, .0001f}, {0, .40f / .4001f, 0, 0, .0001f / .4001f}},
        /* a .50 (with ab) and b .40 both pass 1/3 */
        {"two texts", {.45f, .05f, .40f, .0999f, .0001f}, {.45f / .8501f, 0, .40f / .8501f, 0, .0001f / .8501f}},
        /* 3 * p_eog * n = 1.5 > p_txt = 0.9: only the end-of-generation tokens stay */
        {"eog likely", {.3f, .3f, .2f, .1f, .1f}, {0, 0, 0, 0, 1}},
    };
    mf_infill_vocab *v = infill_vocab5();
    REQUIRE(v, "vocab");
    for (size_t k = 0; k < MF_ARRAY_LEN(c); k++) {
        mf_sampler *s = infill_sampler(v, 5, 5, 1.0f);
        REQUIRE(s, "new");
        float got[5];
        probs_by_id(s, c[k].probs, 5, got);
        for (int i = 0; i < 5; i++)
            CHECK(NEAR(got[i], c[k].want[i]), "%s: id %d p %f, want %f", c[k].what, i, got[i], c[k].want[i]);
        mf_sampler_free(s);
    }
    mf_infill_vocab_free(v);
}

/* No text reaching 0.2 ends the completion: the EOT token alone, also when top_k had left it out, also
 * greedy (whose argmax would be a text); a logit_bias that bans the EOT keeps it out (the candidates stay),
 * and so does a grammar that does not allow it. */
static void test_infill_ends_on_eot_unless_it_is_banned(void) {
    float l[8];
    for (int i = 0; i < 6; i++) l[i] = logf(.166f);
    l[0] = logf(.17f), l[6] = logf(.003f), l[7] = logf(.0001f); /* the EOT is 8th: outside top_k 7 */
    mf_infill_vocab *v = infill_vocab8();
    REQUIRE(v, "vocab");
    for (int g = 0; g < 2; g++) {
        mf_sampler *s = infill_sampler(v, 8, 7, g ? 0.0f : 1.0f);
        REQUIRE(s, "new");
        int32_t ids[8];
        float pr[8];
        const int32_t m = mf_sampler_candidates(s, l, ids, pr, 8);
        CHECK(m == 1 && ids[0] == 7, "%s: %d candidates, first %d; want the EOT 7 alone", g ? "greedy" : "sampled",
              (int)m, (int)ids[0]);
        CHECK(mf_sampler_sample(s, l) == 7, "%s: the draw is not the EOT", g ? "greedy" : "sampled");
        mf_sampler_free(s);
    }
    mf_sampler_params p = mf_test_sampler_off();
    const mf_logit_bias ban = {7, -INFINITY};
    p.infill = v, p.top_k = 8, p.logit_bias = &ban, p.n_logit_bias = 1;
    mf_sampler *s = mf_test_sampler_new(&p, 8);
    REQUIRE(s, "new");
    int seen7 = 0, texts = 0;
    for (int d = 0; d < 200; d++) {
        const mf_token t = mf_sampler_sample(s, l);
        seen7 += t == 7, texts += t < 6;
    }
    CHECK(!seen7 && texts > 150, "EOT banned: drawn %d times, texts %d of 200", seen7, texts);
    mf_sampler_free(s);
    mf_infill_vocab_free(v);
}

static bool not_seven(void *user, int32_t id) {
    (void)user;
    return id != 7;
}

static void test_infill_under_a_grammar_keeps_to_it(void) {
    float l[8];
    for (int i = 0; i < 6; i++) l[i] = logf(.166f);
    l[6] = logf(.003f), l[7] = logf(.0001f);
    mf_infill_vocab *v = infill_vocab8();
    REQUIRE(v, "vocab");
    mf_sampler *s = infill_sampler(v, 8, 8, 1.0f);
    REQUIRE(s, "new");
    const mf_token_filter f = {not_seven, NULL, NULL};
    int seen7 = 0;
    for (int d = 0; d < 100; d++) seen7 += mf_sampler_sample_allowed(s, l, &f) == 7;
    CHECK(!seen7, "the grammar's filter refuses 7, drawn %d times", seen7);
    CHECK(mf_sampler_sample(s, l) == 7, "without the filter the stage ends on the EOT");
    mf_sampler_free(s);
    mf_infill_vocab_free(v);
}

static void test_bad_stage_values_are_refused(void) {
    mf_sampler_params p;
    mf_sampler *s = NULL;
    mf_error err = {0};
#define REFUSED(assign, needle)                                                                          \
    do {                                                                                                 \
        p = mf_test_sampler_off();                                                                       \
        assign;                                                                                          \
        err.msg[0] = 0;                                                                                  \
        CHECK(mf_sampler_new(&p, 8, &s, &err) == MF_E_INVAL && !s, "%s accepted", #assign);              \
        CHECK(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", #assign, err.msg, needle); \
    } while (0)
    REFUSED((p.dry_multiplier = 1.0f, p.dry_base = 0.5f), "base 0.5");
    REFUSED(p.dry_multiplier = -1.0f, "multiplier -1");
    REFUSED(p.dry_multiplier = NAN, "multiplier nan");
    REFUSED(p.dry_last_n = -2, "last_n -2");
    REFUSED(p.top_n_sigma = NAN, "top_n_sigma is NaN");
    REFUSED(p.xtc_probability = 1.5f, "probability 1.5");
    REFUSED((p.xtc_probability = 0.5f, p.xtc_threshold = 0.0f), "threshold 0");
    REFUSED(p.dynatemp_range = -1.0f, "range -1");
    REFUSED(p.mirostat = 3, "mirostat 3");
    REFUSED((p.mirostat = 2, p.mirostat_tau = -1.0f), "tau -1");
    mf_infill_vocab *v8 = infill_vocab8();
    REFUSED((p.infill = v8, p.top_k = 0), "got 0; llama.vim sends 40");
    REFUSED((p.infill = v8, p.top_k = MF_INFILL_MAX_TOP_K + 1), "between 1 and 1024");
    REFUSED((p.infill = v8, p.top_k = 8, p.mirostat = 2), "Mirostat 2 replaces");
    p = mf_test_sampler_off();
    p.infill = v8, p.top_k = 4;
    CHECK(mf_sampler_new(&p, 9, &s, &err) == MF_E_INVAL && strstr(err.msg, "has 8 tokens, the sampler 9"),
          "a vocabulary of another size: %s", err.msg);
    mf_infill_vocab_free(v8);
#undef REFUSED
    /* zero is off for every stage: a struct of zeros plus the basics is a valid sampler */
    mf_sampler_params z = {0};
    z.temp = 1.0f, z.penalty_repeat = 1.0f;
    CHECK(mf_sampler_new(&z, 8, &s, &err) == 0 && s, "a zeroed params struct refused: %s", err.msg);
    mf_sampler_free(s);
}

/* ---------------- breaker strings over the real Qwen vocabulary (a generated model) ---------------- */

static mf_model *g_model;

static bool contains(const char *w, size_t wl, const char *s, size_t sl) {
    for (size_t i = 0; i + sl <= wl; i++)
        if (!memcmp(w + i, s, sl)) return true;
    return false;
}

/* llama.cpp's rule, written again from its description: a token whose text holds s is a breaker alone; a
 * token whose text ends in s's first i bytes (i < |s|) starts one whose tail is the rest, tokenized.  Every
 * sequence built is one the rule gives, and the rule's count of each kind is what was built. */
static void test_breakers_follow_llama_cpps_rule(void) {
    if (!g_model) SKIP("no model (mf-genmodel failed)");
    static const char *const strs[] = {"\n", ":", "ab:cd", "<|im_end|>"};
    for (size_t k = 0; k < MF_ARRAY_LEN(strs); k++) {
        const char *str = strs[k];
        const size_t sl = strlen(str);
        mf_dry_breakers *b = NULL;
        mf_error err = {0};
        REQUIRE_OK(mf_dry_breakers_new(g_model, &str, 1, &b, &err), "%s", err.msg);
        int32_t singles = 0, tails = 0, wrong = 0, want_singles = 0, want_tails = 0;
        for (int32_t i = 0; i < mf_dry_breakers_count(b); i++) {
            const mf_token *t;
            int32_t nt;
            const mf_token h = mf_dry_breakers_at(b, i, &t, &nt);
            char *rest = NULL;
            size_t wl = 0, rl = 0;
            const char *w = mf_tok_piece(g_model->tok, h, &wl); /* control tokens with their text, as llama.cpp */
            if (!nt) {
                singles++;
                wrong += !contains(w, wl, str, sl);
            } else {
                tails++;
                REQUIRE_OK(mf_detokenize(g_model, t, nt, &rest, &rl, &err), "%s", err.msg);
                /* the head's text ends in str's first (sl - rl) bytes, the tail spells the rest */
                const size_t i0 = sl - rl;
                wrong += !(rl < sl && i0 <= wl && !memcmp(w + wl - i0, str, i0) && !memcmp(rest, str + i0, rl));
            }
            free(rest);
        }
        mf_model_info info;
        mf_model_get_info(g_model, &info);
        for (mf_token id = 0; id < info.n_vocab; id++) {
            size_t wl = 0;
            const char *w = mf_tok_piece(g_model->tok, id, &wl);
            if (!w) continue;
            if (contains(w, wl, str, sl)) want_singles++;
            else
                for (size_t i = 1; i < sl && i <= wl; i++) want_tails += !memcmp(w + wl - i, str, i);
        }
        printf("  \"%s\": %d alone, %d with a tail\n", k == 0 ? "\\n" : str, singles, tails);
        CHECK(wrong == 0, "\"%s\": %d sequences the rule does not give", str, wrong);
        CHECK(singles == want_singles && tails == want_tails,
              "\"%s\": %d alone and %d with a tail, the rule gives %d, %d", str, singles, tails, want_singles,
              want_tails);
        CHECK(singles + tails > 0, "\"%s\": no sequence at all", str);
        mf_dry_breakers_free(b);
    }
    const char *empty = "";
    mf_dry_breakers *b = NULL;
    mf_error err = {0};
    CHECK(mf_dry_breakers_new(g_model, &empty, 1, &b, &err) == MF_E_INVAL && !b && strstr(err.msg, "is empty"),
          "an empty breaker: %s", err.msg);
}

/* The server resolves a set once and hands the same one out again; a different set is another entry; past
 * MF_SRV_BREAKER_SETS a request gets its own. */
static void test_server_keeps_resolved_breakers(void) {
    if (!g_model) SKIP("no model (mf-genmodel failed)");
    mf_srv_breakers *c = NULL;
    mf_error err = {0};
    REQUIRE_OK(mf_srv_breakers_new(&c, &err), "%s", err.msg);
    const char *a[] = {"\n", ":"}, *b2[] = {"\n:"}, *a_split[] = {"\n", ":", ""};
    const mf_dry_breakers *x = NULL, *y = NULL, *z = NULL;
    mf_dry_breakers *own = NULL;
    REQUIRE_OK(mf_srv_breakers_get(c, g_model, a, 2, &x, &own, &err), "%s", err.msg);
    CHECK(x && !own, "the first set is kept");
    REQUIRE_OK(mf_srv_breakers_get(c, g_model, b2, 1, &y, &own, &err), "%s", err.msg);
    REQUIRE_OK(mf_srv_breakers_get(c, g_model, a, 2, &z, &own, &err), "%s", err.msg);
    CHECK(y && y != x && z == x && !own && mf_srv_breakers_kept(c) == 2, "sets kept %d; the same set again: %s",
          mf_srv_breakers_kept(c), z == x ? "the same" : "another");
    CHECK(mf_srv_breakers_get(c, g_model, a_split, 3, &z, &own, &err) == MF_E_INVAL && mf_srv_breakers_kept(c) == 2,
          "an empty string refused, nothing kept: %s", err.msg);
    char names[MF_SRV_BREAKER_SETS][16];
    for (int i = 0; i < MF_SRV_BREAKER_SETS; i++) {
        snprintf(names[i], sizeof names[i], "x%d", i);
        const char *one = names[i];
        REQUIRE_OK(mf_srv_breakers_get(c, g_model, &one, 1, &z, &own, &err), "%s", err.msg);
        if (own) { /* past the cache's room: the request's own */
            CHECK(i == MF_SRV_BREAKER_SETS - 2 && z == own, "set %d built for the request alone", i);
            mf_dry_breakers_free(own);
            break;
        }
    }
    CHECK(mf_srv_breakers_kept(c) == MF_SRV_BREAKER_SETS, "%d sets kept", mf_srv_breakers_kept(c));
    mf_srv_breakers_free(c);
}

/* The model's view: every token, <|im_end|> the EOT (Qwen's vocabulary names it by text), the EOG set's. */
static void test_infill_vocab_reads_the_model(void) {
    REQUIRE(g_model, "model");
    mf_infill_vocab *v = NULL;
    mf_error err = {0};
    REQUIRE_OK(mf_infill_vocab_new(g_model, &v, &err), "%s", err.msg);
    mf_model_info info;
    mf_model_get_info(g_model, &info);
    mf_token *ids = NULL;
    int32_t n = 0;
    REQUIRE_OK(mf_tokenize(g_model, "<|im_end|>", 10, false, true, &ids, &n, &err), "%s", err.msg);
    CHECK(mf_infill_vocab_size(v) == info.n_vocab, "%d tokens, the model %d", mf_infill_vocab_size(v), info.n_vocab);
    CHECK(n == 1 && mf_infill_vocab_eot(v) == ids[0] && mf_model_is_eog(g_model, ids[0]), "EOT %d, <|im_end|> %d",
          mf_infill_vocab_eot(v), n == 1 ? ids[0] : -1);
    free(ids);
    mf_infill_vocab_free(v);
}

int main(void) {
    RUN(test_dry_follows_llama_cpp);
    RUN(test_dry_breakers_limit_the_repeat);
    RUN(test_dry_window_is_the_last_n);
    RUN(test_xtc_follows_llama_cpp);
    RUN(test_top_n_sigma_follows_llama_cpp);
    RUN(test_dynamic_temperature_follows_the_entropy);
    RUN(test_mirostat_v2_truncates_at_mu_and_learns);
    RUN(test_mirostat_v1_keeps_the_zipf_k);
    RUN(test_top_k_shortcut_with_dry_and_sigma_equals_every_candidate);
    RUN(test_greedy_with_penalties_and_dry_equals_every_candidate);
    RUN(test_min_keep_holds_every_truncation);
    RUN(test_state_set_puts_mu_and_rng_back);
    RUN(test_infill_merges_prefixes_and_keeps_the_backed_few);
    RUN(test_infill_ends_on_eot_unless_it_is_banned);
    RUN(test_infill_under_a_grammar_keeps_to_it);
    RUN(test_bad_stage_values_are_refused);
    char path[600];
    snprintf(path, sizeof path, "%s/stages-qwen2.gguf", mf_test_tmpdir());
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s --arch qwen2 --preset tiny --seed 3 -q -o %s", mf_test_genmodel(), path);
    mf_error err = {0};
    if (system(cmd) == 0 && mf_model_load(path, NULL, &g_model, &err)) printf("  load: %s\n", err.msg);
    RUN(test_breakers_follow_llama_cpps_rule);
    RUN(test_server_keeps_resolved_breakers);
    RUN(test_infill_vocab_reads_the_model);
    mf_model_free(g_model);
    remove(path);
    return mf_test_done();
}
