/* Samplers against hand-computed distributions, the chain order, and seeded determinism. */
#include "harness.h"

#include "engine/engine_impl.h"
#include "support/sampler_params.h"

#include <math.h>


static void test_greedy_picks_the_max_lowest_id_on_ties(void) {
    mf_sampler_params p = mf_test_sampler_off();
    p.temp = 0.0f;
    mf_sampler *s = mf_test_sampler_new(&p, 5);
    REQUIRE(s, "new");
    float l[5] = {1, 3, 2, 3, -1};
    CHECK(mf_sampler_sample(s, l) == 1, "greedy picked %d", mf_sampler_sample(s, l));
    mf_sampler_free(s);
}

static void test_top_k_keeps_the_k_best(void) {
    mf_sampler_params p = mf_test_sampler_off();
    p.top_k = 2;
    mf_sampler *s = mf_test_sampler_new(&p, 4);
    REQUIRE(s, "new");
    float l[4] = {1, 2, 3, 0};
    int32_t ids[4];
    float pr[4];
    int n = mf_sampler_candidates(s, l, ids, pr, 4);
    /* softmax([3, 2]) = [e/(e+1), 1/(e+1)] = [0.731059, 0.268941] */
    CHECK(n == 2 && ids[0] == 2 && ids[1] == 1, "n %d ids %d %d", n, ids[0], ids[1]);
    CHECK(NEAR(pr[0], 0.7310586) && NEAR(pr[1], 0.2689414), "p %f %f", pr[0], pr[1]);
    mf_sampler_free(s);
}

static void test_top_p_stops_once_the_mass_is_reached(void) {
    mf_sampler_params p = mf_test_sampler_off();
    p.top_p = 0.7f;
    mf_sampler *s = mf_test_sampler_new(&p, 3);
    REQUIRE(s, "new");
    float l[3] = {logf(0.2f), logf(0.5f), logf(0.3f)};
    int32_t ids[3];
    float pr[3];
    int n = mf_sampler_candidates(s, l, ids, pr, 3);
    /* 0.5 < 0.7, 0.5 + 0.3 >= 0.7: keep {1, 2}, renormalised to 0.625 / 0.375 */
    CHECK(n == 2 && ids[0] == 1 && ids[1] == 2, "n %d ids %d %d", n, ids[0], ids[1]);
    CHECK(NEAR(pr[0], 0.625) && NEAR(pr[1], 0.375), "p %f %f", pr[0], pr[1]);
    mf_sampler_free(s);
}

static void test_min_p_is_relative_to_the_best(void) {
    mf_sampler_params p = mf_test_sampler_off();
    p.min_p = 0.5f;
    mf_sampler *s = mf_test_sampler_new(&p, 4);
    REQUIRE(s, "new");
    /* p = 0.4, 0.3, 0.2, 0.1: keep p >= 0.5 * 0.4 = 0.2 -> {0, 1, 2} -> 4/9, 3/9, 2/9 */
    float l[4] = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};
    int32_t ids[4];
    float pr[4];
    int n = mf_sampler_candidates(s, l, ids, pr, 4);
    CHECK(n == 3, "kept %d", n);
    CHECK(NEAR(pr[0], 4.0 / 9) && NEAR(pr[1], 3.0 / 9) && NEAR(pr[2], 2.0 / 9), "p %f %f %f", pr[0], pr[1],
          pr[2]);
    mf_sampler_free(s);
}

static void test_temperature_scales_logits(void) {
    mf_sampler_params p = mf_test_sampler_off();
    p.temp = 2.0f;
    mf_sampler *s = mf_test_sampler_new(&p, 2);
    REQUIRE(s, "new");
    float l[2] = {0.0f, logf(4.0f)}; /* /2 -> {0, ln 2}: 1/3, 2/3 */
    int32_t ids[2];
    float pr[2];
    int n = mf_sampler_candidates(s, l, ids, pr, 2);
    CHECK(n == 2 && ids[0] == 1 && NEAR(pr[0], 2.0 / 3) && NEAR(pr[1], 1.0 / 3), "n %d p %f %f", n, pr[0],
          pr[1]);
    mf_sampler_free(s);
}

static void test_typical_keeps_the_typical_set(void) {
    mf_sampler_params p = mf_test_sampler_off();
    p.typ_p = 0.5f;
    mf_sampler *s = mf_test_sampler_new(&p, 3);
    REQUIRE(s, "new");
    /* p = 0.5, 0.25, 0.25: H = 1.0397; |-ln p - H| = 0.3466, 0.3466, 0.3466 -> all equal, stable order:
     * cum 0.5 is not > 0.5, 0.75 > 0.5 -> keep two: {0, 1} -> 2/3, 1/3 */
    float l[3] = {logf(0.5f), logf(0.25f), logf(0.25f)};
    int32_t ids[3];
    float pr[3];
    int n = mf_sampler_candidates(s, l, ids, pr, 3);
    CHECK(n == 2 && ids[0] == 0 && ids[1] == 1, "n %d ids %d %d", n, ids[0], ids[1]);
    CHECK(NEAR(pr[0], 2.0 / 3), "p %f", pr[0]);
    mf_sampler_free(s);
}

/* The typical set is ordered by |-ln p - H|, not by p: here the most likely token is the least typical
 * after the 0.1 one, so a sampler that keeps probability order keeps {0} instead of {1, 2}. */
static void test_typical_orders_by_typicality_not_probability(void) {
    mf_sampler_params p = mf_test_sampler_off();
    p.typ_p = 0.3f;
    mf_sampler *s = mf_test_sampler_new(&p, 4);
    REQUIRE(s, "new");
    /* p = 0.5, 0.2, 0.2, 0.1: H = 1.2206; |-ln p - H| = 0.527, 0.389, 0.389, 1.082 -> order 1, 2, 0, 3;
     * cum 0.2, 0.4 > 0.3 -> keep {1, 2} -> 0.5 each (probability order would stop at {0}: 0.5 > 0.3) */
    float l[4] = {logf(0.5f), logf(0.2f), logf(0.2f), logf(0.1f)};
    int32_t ids[4];
    float pr[4];
    int n = mf_sampler_candidates(s, l, ids, pr, 4);
    CHECK(n == 2 && ((ids[0] == 1 && ids[1] == 2) || (ids[0] == 2 && ids[1] == 1)), "n %d ids %d %d (want 1 and 2)",
          n, ids[0], n > 1 ? ids[1] : -1);
    CHECK(n == 2 && NEAR(pr[0], 0.5) && NEAR(pr[1], 0.5), "p %f %f", pr[0], n > 1 ? pr[1] : -1);
    mf_sampler_free(s);
}

/* Softmax subtracts the maximum: logits near 1000 (exp overflows f32 beyond 88) give the same
 * probabilities as the same logits shifted to 0. */
static void test_softmax_is_shift_invariant(void) {
    mf_sampler_params p = mf_test_sampler_off();
    mf_sampler *s = mf_test_sampler_new(&p, 3);
    REQUIRE(s, "new");
    float l[3] = {1000.0f, 999.0f, 997.0f};
    int32_t ids[3];
    float pr[3];
    int n = mf_sampler_candidates(s, l, ids, pr, 3);
    /* softmax([0, -1, -3]) = 0.7053845, 0.2594965, 0.0351190 */
    CHECK(n == 3 && ids[0] == 0 && ids[1] == 1 && ids[2] == 2, "n %d ids %d %d %d", n, ids[0], ids[1], ids[2]);
    CHECK(NEAR(pr[0], 0.7053845) && NEAR(pr[1], 0.2594965) && NEAR(pr[2], 0.0351190), "p %f %f %f", pr[0], pr[1],
          pr[2]);
    mf_sampler_free(s);
}

static void test_penalties_follow_llama_cpp(void) {
    mf_sampler_params p = mf_test_sampler_off();
    p.penalty_repeat = 2.0f;
    p.penalty_freq = 0.5f;
    p.penalty_present = 0.25f;
    mf_sampler *s = mf_test_sampler_new(&p, 4);
    REQUIRE(s, "new");
    mf_sampler_accept(s, 0);
    mf_sampler_accept(s, 1);
    mf_sampler_accept(s, 1);
    /* id 0: 2 / 2 - 0.5 - 0.25 = 0.25; id 1: -2 * 2 - 1.0 - 0.25 = -5.25; id 2, 3 untouched (1, 0) */
    float l[4] = {2, -2, 1, 0};
    int32_t ids[4];
    float pr[4];
    int n = mf_sampler_candidates(s, l, ids, pr, 4);
    REQUIRE(n == 4, "n %d", n);
    double z = exp(1) + exp(0.25) + exp(0) + exp(-5.25);
    CHECK(ids[0] == 2 && ids[1] == 0 && ids[2] == 3 && ids[3] == 1, "order %d %d %d %d", ids[0], ids[1],
          ids[2], ids[3]);
    CHECK(NEAR(pr[0], exp(1) / z) && NEAR(pr[1], exp(0.25) / z) && NEAR(pr[3], exp(-5.25) / z), "p %f %f %f",
          pr[0], pr[1], pr[3]);
    mf_sampler_free(s);
}

static void test_penalty_window_forgets_old_tokens(void) {
    mf_sampler_params p = mf_test_sampler_off();
    p.temp = 0.0f;
    p.penalty_repeat = 10.0f;
    p.penalty_last_n = 2;
    mf_sampler *s = mf_test_sampler_new(&p, 4);
    REQUIRE(s, "new");
    float l[4] = {5, 4, 0, 0};
    mf_sampler_accept(s, 0);
    CHECK(mf_sampler_sample(s, l) == 1, "0 should be penalised");
    mf_sampler_accept(s, 2);
    mf_sampler_accept(s, 3); /* 0 leaves the 2-token window */
    CHECK(mf_sampler_sample(s, l) == 0, "0 should be free again");
    mf_sampler_reset(s);
    CHECK(mf_sampler_sample(s, l) == 0, "reset keeps history");
    mf_sampler_free(s);
}

static void test_chain_order_penalties_before_top_k(void) {
    /* penalties run first: id 0 (3.0, seen) drops to 1.5 so top_k = 1 keeps id 1.  With top_k first it
     * would keep id 0. */
    mf_sampler_params p = mf_test_sampler_off();
    p.top_k = 1;
    p.penalty_repeat = 2.0f;
    mf_sampler *s = mf_test_sampler_new(&p, 2);
    REQUIRE(s, "new");
    mf_sampler_accept(s, 0);
    float l[2] = {3.0f, 2.9f};
    int32_t ids[2];
    float pr[2];
    int n = mf_sampler_candidates(s, l, ids, pr, 2);
    CHECK(n == 1 && ids[0] == 1, "n %d id %d", n, ids[0]);
    mf_sampler_free(s);
    /* top_p before min_p, both before temperature: p = .6 .3 .1, top_p .5 keeps {0}; */
    p = mf_test_sampler_off();
    p.top_p = 0.5f;
    p.min_p = 0.1f;
    p.temp = 100.0f; /* if temperature ran first, top_p would need more tokens */
    s = mf_test_sampler_new(&p, 3);
    REQUIRE(s, "new");
    float l2[3] = {logf(0.6f), logf(0.3f), logf(0.1f)};
    n = mf_sampler_candidates(s, l2, ids, pr, 3);
    CHECK(n == 1 && ids[0] == 0, "n %d", n);
    mf_sampler_free(s);
}

static void test_seeded_draws_are_deterministic_and_fair(void) {
    mf_sampler_params p = mf_test_sampler_off();
    p.seed = 7;
    mf_sampler *a = mf_test_sampler_new(&p, 2), *b = mf_test_sampler_new(&p, 2);
    p.seed = 8;
    mf_sampler *c = mf_test_sampler_new(&p, 2);
    REQUIRE(a && b && c, "new");
    float l[2] = {0.0f, logf(3.0f)}; /* 0.25 / 0.75 */
    int count1 = 0, same = 1, differ = 0;
    const int N = 20000;
    for (int i = 0; i < N; i++) {
        int x = mf_sampler_sample(a, l), y = mf_sampler_sample(b, l), z = mf_sampler_sample(c, l);
        same &= x == y;
        differ |= x != z;
        count1 += x == 1;
    }
    CHECK(same, "same seed gave different draws");
    CHECK(differ, "different seeds gave the same 20000 draws");
    double f = (double)count1 / N;
    CHECK(fabs(f - 0.75) < 0.01, "frequency of id 1: %f (want 0.75)", f);
    mf_sampler_reset(a);
    mf_sampler_reset(b);
    CHECK(mf_sampler_sample(a, l) == mf_sampler_sample(b, l), "reset reseeds");
    mf_sampler_free(a);
    mf_sampler_free(b);
    mf_sampler_free(c);
}

/* top_k reads the k best straight from the logits (and the penalty window's counts) instead of building
 * every candidate (sampler.c top_k_of_logits): the same candidates, in the same order, with the same
 * probabilities and the same seeded draws, bit for bit, as the full path (mf_sampler_full_path), with the
 * penalties off, a repeat penalty above and below 1, and frequency + presence penalties, over a window of 40
 * accepted tokens with repeats.  Logits from 48 levels so ties are everywhere, or rising so every one
 * qualifies; vocabularies not a multiple of 16; k from 1 to 256. */
static void test_top_k_from_logits_equals_every_candidate(void) {
    static float l[4099];
    static int32_t ia[256], ib[256];
    static float pa[256], pb[256];
    const int32_t ns[] = {7, 1000, 4099}, ks[] = {1, 2, 40, 256};
    const float pens[][3] = {{1.0f, 0.0f, 0.0f}, {1.3f, 0.0f, 0.0f}, {0.8f, 0.0f, 0.0f}, {1.0f, 0.5f, 0.25f}};
    uint32_t r = 12345;
    int bad = 0, runs = 0;
    for (size_t ni = 0; ni < MF_ARRAY_LEN(ns); ni++)
        for (size_t ki = 0; ki < MF_ARRAY_LEN(ks); ki++)
            for (size_t pi = 0; pi < MF_ARRAY_LEN(pens); pi++) {
                const int32_t n = ns[ni], k = ks[ki];
                if (k >= n) continue;
                mf_sampler_params p = mf_test_sampler_off();
                p.top_k = k;
                p.top_p = 0.9f;
                p.penalty_repeat = pens[pi][0], p.penalty_freq = pens[pi][1], p.penalty_present = pens[pi][2];
                mf_sampler *fast = mf_test_sampler_new(&p, n), *full = mf_test_sampler_new(&p, n);
                REQUIRE(fast && full, "new");
                mf_sampler_full_path(full, true);
                for (int t = 0; t < 40; t++) { /* a window with repeats, some in the first k ids */
                    r = r * 1664525u + 1013904223u;
                    const int32_t id = (int32_t)((r >> 8) % (uint32_t)(t & 1 ? MF_MIN(n, 300) : n));
                    mf_sampler_accept(fast, id), mf_sampler_accept(full, id);
                }
                for (int rep = 0; rep < 8; rep++) {
                    for (int32_t i = 0; i < n; i++) {
                        r = r * 1664525u + 1013904223u;
                        l[i] = rep == 0 ? (float)i * 0.01f : (float)((r >> 8) % 48) * 0.25f - 6.0f;
                    }
                    const int na = mf_sampler_candidates(fast, l, ia, pa, 256),
                              nb = mf_sampler_candidates(full, l, ib, pb, 256);
                    const bool same = na == nb && !memcmp(ia, ib, (size_t)na * sizeof *ia) &&
                                      !memcmp(pa, pb, (size_t)na * sizeof *pa) &&
                                      mf_sampler_sample(fast, l) == mf_sampler_sample(full, l);
                    if (!same && bad++ < 3)
                        printf("  n %d k %d penalties %g/%g/%g rep %d: %d candidates, first ids %d / %d, against %d, "
                               "%d / %d\n", n, k, pens[pi][0], pens[pi][1], pens[pi][2], rep, na, ia[0],
                               na > 1 ? ia[1] : -1, nb, ib[0], nb > 1 ? ib[1] : -1);
                    runs++;
                }
                mf_sampler_free(fast);
                mf_sampler_free(full);
            }
    CHECK(bad == 0, "%d of %d runs differ from the full path", bad, runs);
}

/* top_k 0 (or above 256) sorts every candidate: by a radix sort on the logits' bits, which must leave them
 * in exactly qsort's cand_cmp order (descending logit, ties by ascending id), so candidates, probabilities
 * and draws are the same bits.  Heavy ties, -0 beside +0, infinities, logits of every exponent, small
 * integers (one digit in a pass); a NaN sends both to qsort, and typical_p reorders before top_p sorts. */
static void test_radix_sort_equals_qsort(void) {
    const int32_t ns[] = {2047, 2048, 6000, 151936};
    struct {
        int32_t k;
        float top_p, min_p, typ_p, temp, repeat;
    } cfg[] = {
        {0, 1.0f, 0.0f, 1.0f, 1.0f, 1.0f},    {0, 0.95f, 0.05f, 1.0f, 0.8f, 1.0f}, {1000, 0.9f, 0.0f, 1.0f, 1.0f, 1.0f},
        {0, 0.9f, 0.0f, 0.9f, 1.0f, 1.0f},    {0, 0.95f, 0.0f, 1.0f, 1.5f, 1.3f},
    };
    uint32_t r = 777;
    int bad = 0, runs = 0;
    for (size_t ni = 0; ni < MF_ARRAY_LEN(ns); ni++) {
        const int32_t n = ns[ni];
        float *l = malloc(sizeof(float) * (size_t)n), *pa = malloc(sizeof(float) * (size_t)n),
              *pb = malloc(sizeof(float) * (size_t)n);
        int32_t *ia = malloc(sizeof(int32_t) * (size_t)n), *ib = malloc(sizeof(int32_t) * (size_t)n);
        REQUIRE(l && pa && pb && ia && ib, "alloc");
        for (size_t ci = 0; ci < MF_ARRAY_LEN(cfg); ci++) {
            if (n == 151936 && ci > 1) break; /* the real vocabulary: the two plain configurations */
            mf_sampler_params p = mf_test_sampler_off();
            p.top_k = cfg[ci].k, p.top_p = cfg[ci].top_p, p.min_p = cfg[ci].min_p, p.typ_p = cfg[ci].typ_p;
            p.temp = cfg[ci].temp, p.penalty_repeat = cfg[ci].repeat;
            mf_sampler *radix = mf_test_sampler_new(&p, n), *ref = mf_test_sampler_new(&p, n);
            REQUIRE(radix && ref, "new");
            mf_sampler_full_path(ref, true);
            for (int t = 0; t < 32; t++) mf_sampler_accept(radix, t * 37 % n), mf_sampler_accept(ref, t * 37 % n);
            for (int rep = 0; rep < 5; rep++) {
                for (int32_t i = 0; i < n; i++) {
                    r = r * 1664525u + 1013904223u;
                    uint32_t bits = (r >> 1 & 0x3FFFFFFFu) | (r & 1u) << 31; /* any exponent below 2^64 */
                    float w;
                    memcpy(&w, &bits, sizeof w);
                    l[i] = rep == 0   ? (float)((r >> 8) % 48) * 0.25f - 6.0f
                           : rep == 1 ? ((r >> 8) % 4 == 0 ? -0.0f : (r >> 8) % 4 == 1 ? 0.0f : (float)((r >> 10) % 5))
                           : rep == 2 ? w
                           : rep == 3 ? (float)((r >> 8) % 1000) * 0.01f
                                      : (float)((r >> 8) % 10); /* keys alike in their low 11 bits: a pass skipped */
                }
                if (rep == 1) l[n / 3] = INFINITY, l[n / 2] = -INFINITY;
                if (rep == 3) l[n / 2] = NAN;
                const int32_t na = mf_sampler_candidates(radix, l, ia, pa, n),
                              nb = mf_sampler_candidates(ref, l, ib, pb, n);
                bool same = na == nb && !memcmp(ia, ib, sizeof *ia * (size_t)na) &&
                            !memcmp(pa, pb, sizeof *pa * (size_t)na);
                for (int d = 0; d < 3; d++) same = same && mf_sampler_sample(radix, l) == mf_sampler_sample(ref, l);
                if (!same && bad++ < 3)
                    printf("  n %d config %zu rep %d: %d candidates, first ids %d %d, against %d: %d %d\n", n, ci, rep,
                           na, ia[0], na > 1 ? ia[1] : -1, nb, ib[0], nb > 1 ? ib[1] : -1);
                runs++;
            }
            mf_sampler_free(radix);
            mf_sampler_free(ref);
        }
        free(l), free(pa), free(pb), free(ia), free(ib);
    }
    CHECK(bad == 0, "%d of %d runs differ from qsort's order", bad, runs);
}

static void test_bad_params_are_refused(void) {
    mf_sampler_params p = mf_test_sampler_off();
    p.penalty_repeat = 0.0f;
    mf_sampler *s = NULL;
    mf_error err = {0};
    CHECK(mf_sampler_new(&p, 4, &s, &err) == MF_E_INVAL && !s, "repeat 0 accepted");
    CHECK(strstr(err.msg, "repeat 0") != NULL, "msg: %s", err.msg);
    CHECK(mf_sampler_new(NULL, 0, &s, &err) == MF_E_INVAL, "n_vocab 0 accepted");
}

/* logit_bias is a stage in front of the chain: a sampler given a bias picks, candidate for candidate and draw
 * for draw, what one without it picks from logits the bias was added to (entry by entry, in order).  Greedy
 * with and without penalties, top_k by the shortcut and by the full sort, typical; bans of the best tokens,
 * boosts from the bottom, two entries for one token. */
static void test_logit_bias_is_sampling_the_biased_logits(void) {
    enum { N = 4099 };
    static float l[N], lb[N];
    static int32_t ia[N], ib[N];
    static float pa[N], pb[N];
    struct {
        float temp;
        int32_t k;
        float typ, repeat;
    } cfg[] = {{0.0f, 40, 1.0f, 1.0f},
               {0.0f, 40, 1.0f, 1.3f},
               {1.0f, 40, 1.0f, 1.0f},
               {0.8f, 0, 1.0f, 1.3f},
               {1.0f, 1000, 0.9f, 1.0f}};
    uint32_t r = 4242;
    int bad = 0, runs = 0;
    for (size_t ci = 0; ci < MF_ARRAY_LEN(cfg); ci++) {
        for (int rep = 0; rep < 6; rep++) {
            for (int32_t i = 0; i < N; i++) {
                r = r * 1664525u + 1013904223u;
                l[i] = (float)((r >> 8) % 1000) * 0.01f - 5.0f;
            }
            int32_t best = 0;
            for (int32_t i = 1; i < N; i++) best = l[i] > l[best] ? i : best;
            const mf_logit_bias b[] = {
                {best, -INFINITY}, {(best + 1) % N, -INFINITY}, {17, 12.5f},
                {17, -3.25f},      {(int32_t)(r % N), 0.125f},  {N - 1, rep & 1 ? -INFINITY : 9.0f}};
            memcpy(lb, l, sizeof l);
            for (size_t k = 0; k < MF_ARRAY_LEN(b); k++) lb[b[k].token] += b[k].bias;
            mf_sampler_params p = mf_test_sampler_off();
            p.temp = cfg[ci].temp, p.top_k = cfg[ci].k, p.typ_p = cfg[ci].typ,
            p.penalty_repeat = cfg[ci].repeat;
            p.top_p = 0.95f, p.min_p = 0.01f, p.seed = (uint64_t)rep;
            mf_sampler *plain = mf_test_sampler_new(&p, N);
            p.logit_bias = b, p.n_logit_bias = (int32_t)MF_ARRAY_LEN(b);
            mf_sampler *biased = mf_test_sampler_new(&p, N);
            REQUIRE(plain && biased, "new");
            for (int t = 0; t < 20; t++)
                mf_sampler_accept(plain, t * 31 % N), mf_sampler_accept(biased, t * 31 % N);
            bool same = true;
            for (int d = 0; d < 4; d++) {
                const mf_token x = mf_sampler_sample(biased, l), y = mf_sampler_sample(plain, lb);
                same = same && x == y && x != best && x != (best + 1) % N;
            }
            const int32_t na = mf_sampler_candidates(biased, l, ia, pa, N),
                          nb = mf_sampler_candidates(plain, lb, ib, pb, N);
            same = same && na == nb && !memcmp(ia, ib, sizeof *ia * (size_t)na) &&
                   !memcmp(pa, pb, sizeof *pa * (size_t)na);
            if (!same && bad++ < 3)
                printf("  config %zu rep %d: %d candidates (first %d) against %d (first %d)\n", ci, rep, na,
                       ia[0], nb, ib[0]);
            runs++;
            mf_sampler_free(plain);
            mf_sampler_free(biased);
        }
    }
    CHECK(bad == 0, "%d of %d runs differ from sampling the biased logits", bad, runs);
}

static bool allow_two(void *user, int32_t id) {
    const int32_t *two = user;
    return id == two[0] || id == two[1];
}

/* Under a grammar (a filter) a banned token stays banned: of two allowed tokens with one banned the other is
 * always picked, however likely the banned one; with both banned nothing is (-1), greedy or sampled. */
static void test_logit_bias_ban_holds_under_a_filter(void) {
    enum { N = 600 };
    static float l[N];
    for (int32_t i = 0; i < N; i++) l[i] = (float)(i % 7) * 0.1f;
    int32_t two[2] = {300, 5};
    l[300] = 20.0f; /* the allowed favourite */
    const mf_token_filter f = {.allow = allow_two, .user = two};
    const float temps[] = {0.0f, 1.0f};
    for (size_t ti = 0; ti < MF_ARRAY_LEN(temps); ti++) {
        mf_sampler_params p = mf_test_sampler_off();
        p.temp = temps[ti], p.top_k = 40;
        mf_logit_bias b[2] = {{300, -INFINITY}, {5, -INFINITY}};
        p.logit_bias = b, p.n_logit_bias = 1;
        mf_sampler *s = mf_test_sampler_new(&p, N);
        REQUIRE(s, "new");
        int picked5 = 0;
        for (int d = 0; d < 20; d++) picked5 += mf_sampler_sample_allowed(s, l, &f) == 5;
        CHECK(picked5 == 20, "temp %g: token 5 picked %d of 20 times with 300 banned", temps[ti], picked5);
        mf_sampler_free(s);
        p.n_logit_bias = 2;
        s = mf_test_sampler_new(&p, N);
        REQUIRE(s, "new");
        const mf_token t = mf_sampler_sample_allowed(s, l, &f);
        CHECK(t == -1, "temp %g: both allowed tokens banned, yet %d was picked", temps[ti], t);
        mf_sampler_free(s);
    }
}

static void test_bad_logit_bias_is_refused(void) {
    mf_sampler_params p = mf_test_sampler_off();
    mf_sampler *s = NULL;
    mf_error err = {0};
    const struct {
        mf_logit_bias b[5];
        int32_t n;
        int code;
        const char *msg;
    } bad[] = {
        {{{4, 1.0f}}, 1, MF_E_RANGE, "token 4 is outside the vocabulary [0, 4)"},
        {{{-1, 1.0f}}, 1, MF_E_RANGE, "token -1"},
        {{{1, NAN}}, 1, MF_E_INVAL, "token 1 has bias nan"},
        {{{2, INFINITY}}, 1, MF_E_INVAL, "token 2 has bias inf"},
        {{{0, -INFINITY}, {1, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}, {3, -INFINITY}},
         5,
         MF_E_INVAL,
         "bans every one of the 4 tokens"},
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(bad); i++) {
        p.logit_bias = bad[i].b, p.n_logit_bias = bad[i].n;
        const int rc = mf_sampler_new(&p, 4, &s, &err);
        CHECK(rc == bad[i].code && !s && strstr(err.msg, bad[i].msg), "case %zu: rc %d, msg: %s", i, rc,
              err.msg);
    }
    mf_logit_bias three[] = {{0, -INFINITY}, {1, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}};
    p.logit_bias = three, p.n_logit_bias = 4;
    CHECK(mf_sampler_new(&p, 4, &s, &err) == 0 && s, "three of four banned refused: %s", err.msg);
    float l[4] = {9, 8, 7, -50};
    CHECK(s && mf_sampler_sample(s, l) == 3, "the one token left was not picked");
    mf_sampler_free(s);
}

int main(void) {
    RUN(test_greedy_picks_the_max_lowest_id_on_ties);
    RUN(test_top_k_keeps_the_k_best);
    RUN(test_top_p_stops_once_the_mass_is_reached);
    RUN(test_min_p_is_relative_to_the_best);
    RUN(test_temperature_scales_logits);
    RUN(test_typical_keeps_the_typical_set);
    RUN(test_typical_orders_by_typicality_not_probability);
    RUN(test_softmax_is_shift_invariant);
    RUN(test_penalties_follow_llama_cpp);
    RUN(test_penalty_window_forgets_old_tokens);
    RUN(test_chain_order_penalties_before_top_k);
    RUN(test_seeded_draws_are_deterministic_and_fair);
    RUN(test_top_k_from_logits_equals_every_candidate);
    RUN(test_radix_sort_equals_qsort);
    RUN(test_bad_params_are_refused);
    RUN(test_logit_bias_is_sampling_the_biased_logits);
    RUN(test_logit_bias_ban_holds_under_a_filter);
    RUN(test_bad_logit_bias_is_refused);
    return mf_test_done();
}
