/* Embeddings: one text's hidden states pooled into a vector (llama.cpp's embeddings = true with a pooling
 * type), over an embeddings context whose forward stops at the output norm (model/qwen.c), or, for a
 * reranker, at its classifier head.  Pooling reads only the rows it needs - the first (cls), the last (last,
 * rank) or all (mean) - so a long text's other rows never leave the graph. */
#include "engine/engine_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *mf_pooling_name(int32_t p) {
    switch (p) {
    case MF_POOLING_MODEL: return "model";
    case MF_POOLING_NONE: return "none";
    case MF_POOLING_MEAN: return "mean";
    case MF_POOLING_CLS: return "cls";
    case MF_POOLING_LAST: return "last";
    case MF_POOLING_RANK: return "rank";
    default: return "unknown";
    }
}

bool mf_pooling_parse(const char *name, mf_pooling *out) {
    for (int32_t p = MF_POOLING_MODEL; p <= MF_POOLING_RANK; p++)
        if (!strcmp(name, mf_pooling_name(p))) {
            *out = (mf_pooling)p;
            return true;
        }
    return false;
}

/* Whether the row at position p of an n-token text is one the pooling reads (rank: the last, as llama.cpp's
 * qwen3 rerankers). */
static bool pooled_row(mf_pooling pool, int32_t p, int32_t n) {
    return pool == MF_POOLING_NONE || pool == MF_POOLING_MEAN || (pool == MF_POOLING_CLS && p == 0) ||
           ((pool == MF_POOLING_LAST || pool == MF_POOLING_RANK) && p == n - 1);
}

/* The classifier's scores into probabilities over its labels, as ggml_soft_max: exp(x - max) in float,
 * summed in double, scaled by the float reciprocal.  llama.cpp does this for qwen3 rerankers only. */
static void softmax(float *v, int32_t n) {
    float mx = v[0];
    for (int32_t i = 1; i < n; i++) mx = v[i] > mx ? v[i] : mx;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        v[i] = expf(v[i] - mx);
        sum += v[i];
    }
    const float scale = (float)(1.0 / sum);
    for (int32_t i = 0; i < n; i++) v[i] *= scale;
}

/* One pooled row out of the decode: a reranker's scores become probabilities. */
static void take_row(const mf_context *ctx, const float *row, float *out) {
    memcpy(out, row, sizeof(float) * (size_t)ctx->out_width);
    if (ctx->classifier) softmax(out, ctx->out_width);
}

int32_t mf_embed_size(const mf_context *ctx) { return ctx->embeddings ? ctx->out_width : 0; }

int mf_embed_pooling(const mf_model *model, mf_pooling asked, mf_pooling *out, bool *from_file, mf_error *err) {
    const int32_t file = model->hp.pooling;
    *from_file = asked == MF_POOLING_MODEL && file >= 0;
    int32_t p = asked;
    if (asked == MF_POOLING_MODEL) p = file >= 0 ? file : MF_POOLING_LAST;
    if (p < MF_POOLING_NONE || p > MF_POOLING_RANK)
        return mf_err(err, MF_E_UNSUPPORTED,
                      "pooling type %d is not one of none (0), mean (1), cls (2), last (3), rank (4)%s", p,
                      asked == MF_POOLING_MODEL ? " (the model file's pooling_type); choose one with --pooling" : "");
    if (p == MF_POOLING_RANK && !model->cls_out)
        return mf_err(err, MF_E_UNSUPPORTED,
                      "rank pooling%s needs a reranker's classifier head (cls.output.weight), and this file has "
                      "none; embed with --pooling mean|cls|last instead",
                      *from_file ? " (the file's pooling_type)" : "");
    if (p == MF_POOLING_RANK && (model->cls_out_b || mf_gguf_find_tensor(model->gguf, "cls.weight")))
        return mf_err(err, MF_E_UNSUPPORTED,
                      "the file's classifier head has %s, which llama.cpp's qwen3 reranker does not read; minfer "
                      "refuses to rank with it rather than guess whether it applies",
                      model->cls_out_b ? "a bias (cls.output.bias)" : "a dense layer (cls.weight: a BERT-style head)");
    if (p == MF_POOLING_RANK && model->hp.arch != MF_ARCH_QWEN3)
        return mf_err(err, MF_E_UNSUPPORTED,
                      "rank pooling is defined for qwen3 rerankers (the last token through the head, softmaxed); "
                      "this file is %s, for which llama.cpp would score the first token, which a causal model's "
                      "reranker never reads",
                      model->hp.arch_name);
    *out = (mf_pooling)p;
    return 0;
}

/* Adds the chunk's output rows into acc (mean), copies the one row (cls / last), or every row to its
 * position's place (none: the chunk starts at position p0). */
static void take_rows(const mf_context *ctx, const mf_batch *b, mf_pooling pool, int32_t p0, double *acc, float *out) {
    const int32_t ne = ctx->out_width;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        if (!b->logits[i]) continue;
        const float *row = mf_get_embeddings(ctx, i);
        if (pool == MF_POOLING_NONE)
            memcpy(out + (size_t)(p0 + i) * (size_t)ne, row, sizeof(float) * (size_t)ne);
        else if (pool == MF_POOLING_MEAN)
            for (int32_t k = 0; k < ne; k++) acc[k] += row[k];
        else
            take_row(ctx, row, out);
    }
}

/* Rank pooling and a classifier context go together: the head is in the context's graph. */
static int check_classifier(const mf_context *ctx, mf_pooling pool, mf_error *err) {
    if ((pool == MF_POOLING_RANK) == ctx->classifier) return 0;
    return mf_err(err, MF_E_INVAL,
                  ctx->classifier ? "embedding: this context ends with the classifier head (a reranker's), so its "
                                    "rows are scores; pool them with rank, or make a context without classifier "
                                    "for %s pooling"
                                  : "embedding: %s pooling needs the classifier head in the graph; make the "
                                    "context with classifier = true (minfer serve --rerank)",
                  mf_pooling_name(pool));
}

/* What every text's run needs: an embeddings context, a valid empty sequence, tokens that fit. */
static int check_text(mf_context *ctx, mf_seq_id seq, int32_t n_tokens, mf_error *err) {
    if (!ctx->embeddings)
        return mf_err(err, MF_E_INVAL,
                      "embedding: the context computes logits; make it with embeddings = true "
                      "(minfer serve --embeddings)");
    if (seq < 0) return mf_err(err, MF_E_INVAL, "embedding: sequence id must be >= 0, got %d", seq);
    if (n_tokens <= 0) return mf_err(err, MF_E_INVAL, "embedding: the input has no tokens");
    if (mf_seq_pos_max(ctx, seq) >= 0)
        return mf_err(err, MF_E_INVAL, "embedding: sequence %d already holds tokens (up to position %d)", seq,
                      mf_seq_pos_max(ctx, seq));
    if (n_tokens > ctx->n_ctx)
        return mf_err(err, MF_E_RANGE,
                      "embedding: the input has %d tokens, the context %d (raise -c/--ctx-size or shorten the input)",
                      n_tokens, ctx->n_ctx);
    return 0;
}

/* One text on its own, a ubatch at a time; the sequence is emptied again either way. */
static int run_text(mf_context *ctx, mf_seq_id seq, const mf_token *tokens, int32_t n_tokens, mf_pooling pool,
                    float *out, mf_error *err) {
    int rc = 0;
    const int32_t ne = ctx->out_width, chunk = ctx->n_ubatch;
    double *acc = pool == MF_POOLING_MEAN ? calloc((size_t)ne, sizeof *acc) : NULL;
    mf_batch b;
    if (pool == MF_POOLING_MEAN && !acc) return mf_err(err, MF_E_NOMEM, "embedding: out of memory");
    if ((rc = mf_batch_init(&b, MF_MIN(chunk, n_tokens), err))) {
        free(acc);
        return rc;
    }
    /* a ubatch at a time, so a context sized for the text holds it whatever n_ubatch is */
    for (int32_t p0 = 0; p0 < n_tokens && !rc; p0 += chunk) {
        const int32_t n = MF_MIN(chunk, n_tokens - p0);
        mf_batch_clear(&b);
        for (int32_t i = 0; i < n; i++) {
            const int32_t p = p0 + i;
            mf_batch_add(&b, tokens[p], p, seq, pooled_row(pool, p, n_tokens));
        }
        if (!(rc = mf_decode(ctx, &b, err))) take_rows(ctx, &b, pool, p0, acc, out);
    }
    if (!rc && acc)
        for (int32_t k = 0; k < ne; k++) out[k] = (float)(acc[k] / n_tokens);
    mf_batch_free(&b);
    free(acc);
    mf_seq_rm(ctx, seq, -1, -1);
    if (rc) return mf_err_prefix(err, rc, "embedding %d tokens (%s pooling)", n_tokens, mf_pooling_name(pool));
    return 0;
}

int mf_embed(mf_context *ctx, mf_seq_id seq, const mf_token *tokens, int32_t n_tokens, mf_pooling pooling,
             float *out, mf_error *err) {
    int rc = check_text(ctx, seq, n_tokens, err);
    if (rc) return rc;
    mf_pooling pool;
    bool from_file;
    if ((rc = mf_embed_pooling(ctx->model, pooling, &pool, &from_file, err))) return rc;
    if (pool == MF_POOLING_NONE)
        return mf_err(err, MF_E_INVAL,
                      "embedding: pooling none gives one vector per token, not one per text; %s (mf_embed_tokens "
                      "gives them, or pool with mean, cls or last)",
                      from_file ? "the model file asks for none" : "none was asked");
    if ((rc = check_classifier(ctx, pool, err))) return rc;
    return run_text(ctx, seq, tokens, n_tokens, pool, out, err);
}

int mf_embed_tokens(mf_context *ctx, mf_seq_id seq, const mf_token *tokens, int32_t n_tokens, float *out,
                    mf_error *err) {
    int rc = check_text(ctx, seq, n_tokens, err);
    if (!rc) rc = check_classifier(ctx, MF_POOLING_NONE, err);
    return rc ? rc : run_text(ctx, seq, tokens, n_tokens, MF_POOLING_NONE, out, err);
}

/* How many texts from `from` fit one forward whole: at most a ubatch of tokens and the free cells. */
static int32_t pack_size(const mf_context *ctx, const int32_t *n_tokens, int32_t from, int32_t n_texts) {
    const int32_t room = MF_MIN(ctx->n_ubatch, ctx->n_ctx - mf_kv_cells_used(ctx));
    int32_t k = 0, used = 0;
    while (from + k < n_texts && used + n_tokens[from + k] <= room) used += n_tokens[from + k++];
    return k;
}

/* Pools text k of a decoded pack (its rows start at batch row r0) into out. */
static void pool_rows(const mf_context *ctx, int32_t r0, int32_t n, mf_pooling pool, double *acc, float *out) {
    const int32_t ne = ctx->out_width;
    if (pool != MF_POOLING_MEAN) {
        take_row(ctx, mf_get_embeddings(ctx, pool == MF_POOLING_CLS ? r0 : r0 + n - 1), out);
        return;
    }
    memset(acc, 0, sizeof *acc * (size_t)ne);
    for (int32_t i = 0; i < n; i++) { /* position order, in double: mf_embed's sum */
        const float *row = mf_get_embeddings(ctx, r0 + i);
        for (int32_t k = 0; k < ne; k++) acc[k] += row[k];
    }
    for (int32_t k = 0; k < ne; k++) out[k] = (float)(acc[k] / n);
}

/* One forward over texts [from, from + k), text j on sequence seq0 + j - from. */
static int embed_pack(mf_context *ctx, mf_seq_id seq0, const mf_token *const *tokens, const int32_t *n_tokens,
                      int32_t from, int32_t k, mf_pooling pool, mf_batch *b, double *acc, float *out, mf_error *err) {
    const int32_t ne = ctx->out_width;
    mf_batch_clear(b);
    for (int32_t j = 0; j < k; j++) {
        const int32_t n = n_tokens[from + j];
        for (int32_t p = 0; p < n; p++)
            mf_batch_add(b, tokens[from + j][p], p, seq0 + j, pooled_row(pool, p, n));
    }
    int rc = mf_decode(ctx, b, err);
    for (int32_t j = 0, r0 = 0; !rc && j < k; r0 += n_tokens[from + j++])
        pool_rows(ctx, r0, n_tokens[from + j], pool, acc, out + (size_t)(from + j) * (size_t)ne);
    for (int32_t j = 0; j < k; j++) mf_seq_rm(ctx, seq0 + j, -1, -1);
    return rc;
}

int mf_embed_batch(mf_context *ctx, mf_seq_id seq0, const mf_token *const *tokens, const int32_t *n_tokens,
                   int32_t n_texts, mf_pooling pooling, float *out, mf_error *err) {
    if (!ctx->embeddings || seq0 < 0 || n_texts <= 0)
        return mf_err(err, MF_E_INVAL, "embedding: %s",
                      !ctx->embeddings ? "the context computes logits; make it with embeddings = true"
                      : seq0 < 0       ? "sequence id must be >= 0"
                                       : "no texts");
    mf_pooling pool;
    bool from_file;
    int rc = mf_embed_pooling(ctx->model, pooling, &pool, &from_file, err);
    if (rc) return rc;
    if (pool == MF_POOLING_NONE) return mf_embed(ctx, seq0, tokens[0], n_tokens[0], pooling, out, err); /* its refusal */
    if ((rc = check_classifier(ctx, pool, err))) return rc;
    const int32_t ne = ctx->out_width;
    for (int32_t i = 0; i < n_texts; i++)
        if (n_tokens[i] <= 0) return mf_err(err, MF_E_INVAL, "embedding: text %d has no tokens", i);
    for (int32_t j = 0; j < MF_MIN(n_texts, ctx->n_ubatch); j++) /* a pack has at most a ubatch of texts */
        if (mf_seq_pos_max(ctx, seq0 + j) >= 0)
            return mf_err(err, MF_E_INVAL, "embedding: sequence %d already holds tokens (a pack of texts uses "
                          "sequences %d..%d)", seq0 + j, seq0, seq0 + MF_MIN(n_texts, ctx->n_ubatch) - 1);
    double *acc = malloc(sizeof *acc * (size_t)ne);
    mf_batch b;
    if (!acc) return mf_err(err, MF_E_NOMEM, "embedding: out of memory");
    if ((rc = mf_batch_init(&b, ctx->n_ubatch, err))) {
        free(acc);
        return rc;
    }
    for (int32_t i = 0; i < n_texts && !rc;) {
        const int32_t k = pack_size(ctx, n_tokens, i, n_texts);
        if (k == 0) { /* longer than a ubatch (or than the free cells: mf_embed says which) */
            rc = mf_embed(ctx, seq0, tokens[i], n_tokens[i], pool, out + (size_t)i * (size_t)ne, err);
            i++;
            continue;
        }
        rc = embed_pack(ctx, seq0, tokens, n_tokens, i, k, pool, &b, acc, out, err);
        if (rc) rc = mf_err_prefix(err, rc, "embedding texts %d..%d (%s pooling)", i, i + k - 1, mf_pooling_name(pool));
        i += k;
    }
    mf_batch_free(&b);
    free(acc);
    return rc;
}

int mf_embed_dims_check(const mf_model *model, mf_pooling pooling, int32_t dims, bool trained, mf_error *err) {
    const int32_t n_embd = model->hp.n_embd;
    mf_pooling pool;
    bool from_file;
    int rc = mf_embed_pooling(model, pooling, &pool, &from_file, err);
    if (rc) return rc;
    if (pool == MF_POOLING_RANK || pool == MF_POOLING_NONE)
        return mf_err(err, MF_E_UNSUPPORTED, "dimensions %d: %s, which are not shortened; drop dimensions", dims,
                      pool == MF_POOLING_RANK ? "a reranker's vector is its labels' probabilities"
                                              : "pooling none gives every token's raw hidden state");
    if (dims < 1 || dims > n_embd)
        return mf_err(err, MF_E_RANGE, "dimensions %d is outside 1..%d (the model's embedding size)", dims, n_embd);
    /* Qwen3-Embedding (its model card: output dimensions 32..n_embd) was trained for truncation of its
     * last-token vector; nothing in a GGUF says so of any other model */
    const bool known = model->hp.arch == MF_ARCH_QWEN3 && model->hp.pooling == MF_POOLING_LAST &&
                       pool == MF_POOLING_LAST;
    if (dims == n_embd || known || trained) return 0;
    return mf_err(err, MF_E_UNSUPPORTED,
                  "dimensions %d shortens the vectors (Matryoshka truncation), which only a model trained for it "
                  "survives; this one (%s, pooling_type %s, pooled %s) is not known to be (the Qwen3-Embedding "
                  "family is): ask for %d or leave dimensions out, or vouch for the model with --matryoshka",
                  dims, model->hp.arch_name, model->hp.pooling >= 0 ? mf_pooling_name(model->hp.pooling) : "absent",
                  mf_pooling_name(pool), n_embd);
}

void mf_embed_normalize(float *v, int32_t n, int norm) {
    double sum = 0;
    if (norm < 0) return;
    if (norm == 0) { /* llama.cpp: the largest magnitude becomes 32760 */
        for (int32_t i = 0; i < n; i++) sum = fabs(v[i]) > sum ? fabs(v[i]) : sum;
        sum /= 32760.0;
    } else if (norm == 2) {
        for (int32_t i = 0; i < n; i++) sum += v[i] * v[i]; /* float products, as llama.cpp's loop */
        sum = sqrt(sum);
    } else {
        for (int32_t i = 0; i < n; i++) sum += pow(fabs(v[i]), norm);
        sum = pow(sum, 1.0 / norm);
    }
    const float scale = sum > 0 ? (float)(1.0 / sum) : 0.0f;
    for (int32_t i = 0; i < n; i++) v[i] *= scale;
}
