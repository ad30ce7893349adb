/* Reranking: llama.cpp's scores for a Qwen3-Reranker (tests/golden/rerank/, recorded by
 * tools/oracle/make_rerank_goldens.sh on regenerated synthetic rerankers: the pair's tokens as llama-server
 * builds them, and the softmaxed label scores), and the engine's promises: a pair's scores do not depend on
 * the pairs packed beside it, rank pooling is the head's softmax of the last row, the rerank prompt is the
 * file's template (or the plain join without one), and what cannot be honoured is refused.
 *
 * Tolerance classes (measured against llama.cpp 80fb11a, haswell CPU library, f16 KV, one ubatch):
 *   "f32"     (f32 weights): the hidden state and the head's dot products are f32 sums in a different order;
 *             <= 1.2e-5 measured on the probabilities; tol 5e-5.
 *   "vec_dot" (q8_0 weights): as test_embed's class, tol 1e-5; a pair whose prompt crosses a q8 rounding
 *             boundary (test_conformance's outlier class: one row's 1-ulp difference flips a q8 value, and
 *             every later row that attends to it moves) is listed in k_outliers with its measured |d|; a
 *             listed pair must stay within 2x its record and 0.02, a listed pair now within tol is reported.
 *             Every template prompt (77-98 tokens) crosses one on the random q8_0 model (prefixes of one:
 *             3, 4, 5, 8 tokens within 1.4e-6 of llama.cpp's hidden state, 6, 20, 77 tokens 0.020-0.029 off);
 *             the four short prompts given as ids (3-6 tokens) do not, and there the scores agree bitwise. */
#include "harness.h"
#include "support/golden_model.h"
#include "minfer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static mf_model *ranker; /* the invariants' model: a qwen3 q8_0 reranker */

static mf_context *new_ctx(mf_model *m, int32_t n_ctx, int32_t n_ubatch, bool classifier, mf_error *err) {
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_ubatch = n_ubatch;
    cp.n_threads = 2;
    cp.embeddings = true;
    cp.classifier = classifier;
    mf_context *ctx = NULL;
    if (mf_context_new(m, &cp, &ctx, err)) return NULL;
    return ctx;
}

static mf_model *load(const char *args, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", mf_test_tmpdir(), name);
    mf_model *m = NULL;
    mf_error err = {0};
    if (!mf_golden_gen(args, path) || mf_model_load(path, NULL, &m, &err)) printf("  %s: %s\n", name, err.msg);
    return m;
}

/* The reviewed outlier pairs (see the classes above): golden, pair index, |d| measured. */
static const struct {
    const char *golden;
    int pair;
    double d;
} k_outliers[] = {
    {"qwen3-tiny-q8_0-reranker", 0, 0.00111},
    {"qwen3-tiny-q8_0-reranker", 1, 0.00567},
    {"qwen3-tiny-q8_0-reranker", 2, 0.00324},
    {"qwen3-tiny-q8_0-reranker", 3, 0.00272},
};

static double listed_outlier(const char *golden, int pair) {
    for (size_t i = 0; i < sizeof k_outliers / sizeof k_outliers[0]; i++)
        if (!strcmp(k_outliers[i].golden, golden) && k_outliers[i].pair == pair) return k_outliers[i].d;
    return 0;
}

static bool tokens_are(const mf_token *ids, int32_t n, const cJSON *want) {
    bool same = n == cJSON_GetArraySize(want);
    for (int32_t i = 0; same && i < n; i++) same = ids[i] == cJSON_GetArrayItem(want, i)->valueint;
    return same;
}

/* One pair of a golden: its tokens, then its scores within the class. */
static void check_pair(mf_model *m, mf_context *ctx, const char *name, bool f32, int k, const cJSON *c, int *n_outl) {
    const cJSON *q = cJSON_GetObjectItem(c, "query"), *d = cJSON_GetObjectItem(c, "document");
    const cJSON *want = cJSON_GetObjectItem(c, "scores"), *want_ids = cJSON_GetObjectItem(c, "tokens");
    mf_token *ids = NULL;
    int32_t n = 0;
    mf_error err = {0};
    if (q && d) { /* a pair: llama-server's prompt */
        REQUIRE_OK(mf_rerank_tokenize(m, q->valuestring, strlen(q->valuestring), d->valuestring,
                                      strlen(d->valuestring), &ids, &n, &err), "%s", err.msg);
        CHECK(tokens_are(ids, n, want_ids), "%s pair %d: %d tokens, llama.cpp's %d (or other ids)", name, k, n,
              cJSON_GetArraySize(want_ids));
    } else { /* a prompt given as ids */
        n = cJSON_GetArraySize(want_ids);
        ids = malloc(sizeof *ids * (size_t)n);
        for (int32_t i = 0; i < n; i++) ids[i] = cJSON_GetArrayItem(want_ids, i)->valueint;
    }
    float v[8];
    REQUIRE(mf_embed_size(ctx) == 2 && cJSON_GetArraySize(want) == 2, "%s: %d scores, golden %d", name,
            mf_embed_size(ctx), cJSON_GetArraySize(want));
    int rc = mf_embed(ctx, 0, ids, n, MF_POOLING_MODEL, v, &err);
    CHECK(rc == 0, "%s pair %d: %s", name, k, err.msg);
    double maxd = 0;
    for (int i = 0; !rc && i < 2; i++) {
        const double dd = fabs(v[i] - cJSON_GetArrayItem(want, i)->valuedouble);
        maxd = dd > maxd || dd != dd ? dd : maxd;
    }
    const double tol = f32 ? 5e-5 : 1e-5, listed = listed_outlier(name, k);
    printf("  %-26s %s %d %3d tokens  p(yes) %.6f llama.cpp %.6f  max |d| %.3g  tol %g (%s)%s\n", name, q ? "pair" : "ids ", k, n, v[0],
           cJSON_GetArrayItem(want, 0)->valuedouble, maxd, tol, f32 ? "f32" : "vec_dot",
           listed ? "  listed outlier" : "");
    if (!listed) {
        CHECK(maxd <= tol, "%s pair %d: the scores differ by %.3g from llama.cpp's (tol %g)", name, k, maxd, tol);
    } else {
        ++*n_outl;
        CHECK(maxd <= 2 * listed && maxd <= 0.02, "%s pair %d: listed outlier at %.3g, record %.3g", name, k, maxd,
              listed);
        if (maxd <= tol) printf("  note     %s pair %d: the listed outlier is now within %g (remove it)\n", name, k, tol);
    }
    free(ids);
}

/* One golden file: regenerate its model (sha256 checked), then every pair. */
static void run_golden(const char *file) {
    char gguf[1024];
    const char *type;
    cJSON *j = mf_golden_open("rerank", file, "tools/oracle/make_rerank_goldens.sh", gguf, sizeof gguf, &type);
    if (!j) return;
    const char *name = cJSON_GetObjectItem(j, "name")->valuestring;
    const bool f32 = !strcmp(type, "f32");
    mf_model *m = NULL;
    mf_error err = {0};
    REQUIRE_OK(mf_model_load(gguf, NULL, &m, &err), "%s: %s", name, err.msg);
    mf_context *ctx = new_ctx(m, 256, 512, true, &err);
    REQUIRE(ctx, "%s: %s", name, err.msg);
    const cJSON *c;
    int k = 0, n_outl = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "cases")) check_pair(m, ctx, name, f32, k++, c, &n_outl);
    printf("  %s: %d cases compared, %d of them listed outliers\n", name, k, n_outl);
    CHECK(k >= 8, "%s: only %d cases", name, k);
    mf_context_free(ctx);
    mf_model_free(m);
    remove(gguf);
    cJSON_Delete(j);
}

static void test_rerank_scores_match_llama_cpp(void) {
    run_golden("qwen3-tiny-f32-reranker.json");
    run_golden("qwen3-tiny-q8_0-reranker.json");
}

static mf_token *pair(const char *q, const char *d, int32_t *n) {
    mf_token *ids = NULL;
    mf_error err = {0};
    if (mf_rerank_tokenize(ranker, q, strlen(q), d, strlen(d), &ids, n, &err)) printf("  pair: %s\n", err.msg);
    return ids;
}

/* Rank pooling is the classifier's softmax over the last row's raw scores (what the head computes), bitwise:
 * the probabilities sum to 1 and order the labels as the raw scores do. */
static void test_rank_is_the_softmax_of_the_last_row(void) {
    mf_error err = {0};
    mf_context *ctx = new_ctx(ranker, 256, 512, true, &err);
    REQUIRE(ctx, "%s", err.msg);
    int32_t n;
    mf_token *ids = pair("What is a panda?", "A bear that lives in China.", &n);
    REQUIRE(ids, "tokens");
    mf_batch b;
    REQUIRE_OK(mf_batch_init(&b, n, &err), "%s", err.msg);
    for (int32_t i = 0; i < n; i++) mf_batch_add(&b, ids[i], i, 0, i == n - 1);
    REQUIRE_OK(mf_decode(ctx, &b, &err), "%s", err.msg);
    const float *raw = mf_get_embeddings(ctx, n - 1);
    REQUIRE(raw, "no row");
    const float r0 = raw[0], r1 = raw[1];
    mf_kv_clear_all(ctx);
    float v[2];
    REQUIRE_OK(mf_embed(ctx, 0, ids, n, MF_POOLING_RANK, v, &err), "%s", err.msg);
    const float mx = r0 > r1 ? r0 : r1, e0 = expf(r0 - mx), e1 = expf(r1 - mx);
    const float s = (float)(1.0 / ((double)e0 + (double)e1));
    CHECK(v[0] == e0 * s && v[1] == e1 * s, "rank: %.9g %.9g, softmax of %.9g %.9g is %.9g %.9g", v[0], v[1], r0, r1,
          e0 * s, e1 * s);
    CHECK(fabsf(v[0] + v[1] - 1) < 1e-6f && (v[0] > v[1]) == (r0 > r1), "probabilities %g %g", v[0], v[1]);
    mf_batch_free(&b);
    free(ids);
    mf_context_free(ctx);
}

/* Pairs packed several to a forward give bitwise the scores each gives alone, in fewer forwards. */
static void test_packed_pairs_equal_each_alone(void) {
    mf_error err = {0};
    mf_context *ctx = new_ctx(ranker, 512, 256, true, &err);
    REQUIRE(ctx, "%s", err.msg);
    static const char *const docs[] = {"hi", "The giant panda is a bear.", "Python is a language.",
                                       "Pandas eat bamboo for most of the day, about 12 hours."};
    enum { N = 4 };
    mf_token *ids[N];
    int32_t lens[N];
    for (int i = 0; i < N; i++) REQUIRE((ids[i] = pair("What is a panda?", docs[i], &lens[i])), "tokens");
    float packed[2 * N], alone[2];
    mf_context_stats st;
    REQUIRE_OK(mf_embed_batch(ctx, 0, (const mf_token *const *)ids, lens, N, MF_POOLING_RANK, packed, &err), "%s",
               err.msg);
    mf_context_get_stats(ctx, &st);
    const int32_t f_packed = st.graph_builds + st.graph_reuses;
    for (int i = 0; i < N; i++) {
        REQUIRE_OK(mf_embed(ctx, 0, ids[i], lens[i], MF_POOLING_RANK, alone, &err), "%s", err.msg);
        CHECK(!memcmp(alone, packed + 2 * i, sizeof alone), "pair %d (%d tokens): packed %.9g, alone %.9g", i, lens[i],
              packed[2 * i], alone[0]);
    }
    CHECK(f_packed < N, "%d forwards for %d pairs packed", f_packed, N);
    CHECK(packed[0] != packed[2] || packed[2] != packed[4], "every pair scored the same");
    for (int i = 0; i < N; i++) free(ids[i]);
    mf_context_free(ctx);
}

/* The prompt: the file's template with the two texts in place, special tokens parsed, none added; a query
 * holding "{document}" keeps it; without a template the texts are joined by the EOS the tokenizer adds. */
static void test_rerank_prompt_is_the_files_template(void) {
    mf_error err = {0};
    int32_t n, nq, nd, nt;
    mf_token *ids = pair("Q1", "D2", &n), *q = NULL, *d = NULL, *t = NULL;
    REQUIRE(ids, "tokens");
    char *text = NULL;
    size_t len;
    REQUIRE_OK(mf_detokenize(ranker, ids, n, &text, &len, &err), "%s", err.msg);
    /* (control tokens such as <|im_start|> detokenize to nothing) */
    CHECK(strstr(text, "<Query>: Q1\n<Document>: D2\nassistant\n") && !strncmp(text, "system\nJudge whether", 20) &&
              strstr(text, "</think>\n\n") == text + len - 10 && ids[0] == 151644,
          "prompt: %s", text);
    free(text);
    free(ids);
    ids = pair("find {document} here", "D", &n);
    REQUIRE_OK(mf_detokenize(ranker, ids, n, &text, &len, &err), "%s", err.msg);
    CHECK(strstr(text, "<Query>: find {document} here\n"), "a query's {document} was replaced: %s", text);
    free(text);
    free(ids);
    /* no template: [query][EOS][document][EOS] for a tokenizer that adds EOS, texts not parsed for specials */
    mf_model *plain = load("--arch qwen3 --type q8_0 --add-eos --seed 5", "rerank-plain");
    REQUIRE(plain, "model");
    const char *qs = "a <|im_end|> b", *ds = "c d";
    REQUIRE_OK(mf_rerank_tokenize(plain, qs, strlen(qs), ds, strlen(ds), &ids, &n, &err), "%s", err.msg);
    REQUIRE_OK(mf_tokenize(plain, qs, strlen(qs), false, false, &q, &nq, &err), "%s", err.msg);
    REQUIRE_OK(mf_tokenize(plain, ds, strlen(ds), false, false, &d, &nd, &err), "%s", err.msg);
    mf_model_info info;
    mf_model_get_info(plain, &info);
    t = malloc(sizeof *t * (size_t)(nq + nd + 2));
    nt = 0;
    for (int32_t i = 0; i < nq; i++) t[nt++] = q[i];
    t[nt++] = info.eos;
    for (int32_t i = 0; i < nd; i++) t[nt++] = d[i];
    t[nt++] = info.eos;
    CHECK(n == nt && !memcmp(ids, t, sizeof *t * (size_t)nt), "plain join: %d tokens, want %d", n, nt);
    free(ids);
    free(q);
    free(d);
    free(t);
    mf_model_free(plain);
}

static void test_what_cannot_be_ranked_is_refused(void) {
    mf_error err = {0};
    float v[2048];
    const mf_token some[] = {9707, 1879, 11, 1052};
    /* a classifier context needs the head, and embeddings */
    mf_model *plain = load("--arch qwen3 --type q8_0 --seed 5", "rerank-nohead");
    REQUIRE(plain, "model");
    mf_context *c = new_ctx(plain, 64, 64, true, &err);
    CHECK(!c && strstr(err.msg, "cls.output.weight") && strstr(err.msg, "not a reranker"), "no head: %s", err.msg);
    mf_context_params cp = mf_context_default_params();
    cp.classifier = true;
    CHECK(mf_context_new(ranker, &cp, &c, &err) == MF_E_INVAL && strstr(err.msg, "embeddings = true"),
          "classifier without embeddings: %s", err.msg);
    mf_pooling p;
    bool from_file;
    int rc = mf_embed_pooling(plain, MF_POOLING_RANK, &p, &from_file, &err);
    CHECK(rc == MF_E_UNSUPPORTED && strstr(err.msg, "classifier head") && strstr(err.msg, "--pooling mean"),
          "rank without a head: rc %d %s", rc, err.msg);
    mf_model_free(plain);
    /* rank pooling and the classifier context go together */
    mf_context *emb = new_ctx(ranker, 64, 64, false, &err), *cls = new_ctx(ranker, 64, 64, true, &err);
    REQUIRE(emb && cls, "contexts: %s", err.msg);
    rc = mf_embed(emb, 0, some, 4, MF_POOLING_MODEL, v, &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "classifier = true"), "rank on a plain context: rc %d %s", rc, err.msg);
    rc = mf_embed(emb, 0, some, 4, MF_POOLING_LAST, v, &err);
    CHECK(rc == 0 && mf_embed_size(emb) == 256, "a reranker's hidden states: rc %d %s", rc, err.msg);
    rc = mf_embed(cls, 0, some, 4, MF_POOLING_MEAN, v, &err);
    CHECK(rc == MF_E_INVAL && strstr(err.msg, "pool them with rank"), "mean on a classifier: rc %d %s", rc, err.msg);
    CHECK(mf_kv_cells_used(cls) == 0, "a refusal left cells");
    mf_context_free(emb);
    mf_context_free(cls);
    /* qwen2: llama.cpp's rank reads the first token, which a causal reranker never uses */
    mf_model *q2 = load("--arch qwen2 --type q8_0 --reranker --seed 5", "rerank-qwen2");
    REQUIRE(q2, "model");
    rc = mf_embed_pooling(q2, MF_POOLING_MODEL, &p, &from_file, &err);
    CHECK(rc == MF_E_UNSUPPORTED && strstr(err.msg, "qwen2") && strstr(err.msg, "first token"), "qwen2: rc %d %s", rc,
          err.msg);
    mf_model_free(q2);
    /* heads llama.cpp's qwen3 does not read: a bias, a BERT-style dense layer; the file loads, ranking is refused */
    const char *const extra[][3] = {{"--cls-bias", "rerank-bias", "a bias (cls.output.bias)"},
                                    {"--cls-dense", "rerank-dense", "a dense layer (cls.weight"}};
    for (int k = 0; k < 2; k++) {
        char args[128];
        snprintf(args, sizeof args, "--arch qwen3 --type q8_0 --reranker %s --seed 5", extra[k][0]);
        mf_model *m = load(args, extra[k][1]);
        REQUIRE(m, "%s: model", extra[k][0]);
        rc = mf_embed_pooling(m, MF_POOLING_MODEL, &p, &from_file, &err);
        CHECK(rc == MF_E_UNSUPPORTED && strstr(err.msg, extra[k][2]), "%s: rc %d %s", extra[k][0], rc, err.msg);
        CHECK(mf_embed_pooling(m, MF_POOLING_LAST, &p, &from_file, &err) == 0, "%s: last refused: %s", extra[k][0],
              err.msg);
        mf_model_free(m);
    }
}

static void test_labels_and_info(void) {
    mf_model_info info;
    mf_model_get_info(ranker, &info);
    CHECK(info.n_cls_out == 2 && info.pooling == MF_POOLING_RANK, "n_cls_out %d pooling %d", info.n_cls_out,
          info.pooling);
    const char *y = mf_model_cls_label(ranker, 0), *n = mf_model_cls_label(ranker, 1);
    CHECK(y && n && !strcmp(y, "yes") && !strcmp(n, "no") && !mf_model_cls_label(ranker, 2), "labels %s %s", y, n);
    mf_pooling p;
    CHECK(mf_pooling_parse("rank", &p) && p == MF_POOLING_RANK && !strcmp(mf_pooling_name(4), "rank"), "names");
}

int main(void) {
    RUN(test_rerank_scores_match_llama_cpp);
    if (!(ranker = load("--arch qwen3 --type q8_0 --reranker --seed 6", "rerank-q8"))) return mf_test_done() | 1;
    RUN(test_labels_and_info);
    RUN(test_rank_is_the_softmax_of_the_last_row);
    RUN(test_packed_pairs_equal_each_alone);
    RUN(test_rerank_prompt_is_the_files_template);
    RUN(test_what_cannot_be_ranked_is_refused);
    mf_model_free(ranker);
    return mf_test_done();
}
