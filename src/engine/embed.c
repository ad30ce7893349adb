/* Embeddings: one text's hidden states pooled into a vector (llama.cpp's embeddings = true with a pooling
 * type), over an embeddings context whose forward stops at the output norm (model/qwen.c).  Pooling reads
 * only the rows it needs - the first (cls), the last (last) or all (mean) - so a long text's other rows
 * never leave the graph. */
#include "engine/engine_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *pooling_name(int32_t p) {
    switch (p) {
    case MF_POOLING_NONE: return "none";
    case MF_POOLING_MEAN: return "mean";
    case MF_POOLING_CLS: return "cls";
    case MF_POOLING_LAST: return "last";
    case 4: return "rank";
    default: return "unknown";
    }
}

int mf_embed_pooling(const mf_model *model, mf_pooling asked, mf_pooling *out, bool *from_file, mf_error *err) {
    const int32_t file = model->hp.pooling;
    *from_file = asked == MF_POOLING_MODEL && file >= 0;
    int32_t p = asked;
    if (asked == MF_POOLING_MODEL) p = file >= 0 ? file : MF_POOLING_LAST;
    if (p == 4)
        return mf_err(err, MF_E_UNSUPPORTED,
                      "the model's %s.pooling_type is 4 (rank: a reranker's classification head), which minfer "
                      "does not run; choose a pooling (--pooling mean|cls|last) to embed with this model",
                      model->hp.arch_name);
    if (p < MF_POOLING_NONE || p > MF_POOLING_LAST)
        return mf_err(err, MF_E_UNSUPPORTED,
                      "pooling type %d is not one of none (0), mean (1), cls (2), last (3)%s", p,
                      asked == MF_POOLING_MODEL ? " (the model file's pooling_type); choose one with --pooling" : "");
    *out = (mf_pooling)p;
    return 0;
}

/* Adds the chunk's output rows into acc (mean) or copies the one row (cls / last). */
static void take_rows(const mf_context *ctx, const mf_batch *b, mf_pooling pool, double *acc, float *out) {
    const int32_t ne = ctx->out_width;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        if (!b->logits[i]) continue;
        const float *row = mf_get_embeddings(ctx, i);
        if (pool == MF_POOLING_MEAN)
            for (int32_t k = 0; k < ne; k++) acc[k] += row[k];
        else
            memcpy(out, row, sizeof(float) * (size_t)ne);
    }
}

int mf_embed(mf_context *ctx, mf_seq_id seq, const mf_token *tokens, int32_t n_tokens, mf_pooling pooling,
             float *out, mf_error *err) {
    if (!ctx->embeddings)
        return mf_err(err, MF_E_INVAL,
                      "embedding: the context computes logits; make it with embeddings = true "
                      "(minfer serve --embeddings)");
    if (seq < 0) return mf_err(err, MF_E_INVAL, "embedding: sequence id must be >= 0, got %d", seq);
    if (n_tokens <= 0) return mf_err(err, MF_E_INVAL, "embedding: the input has no tokens");
    mf_pooling pool;
    bool from_file;
    int rc = mf_embed_pooling(ctx->model, pooling, &pool, &from_file, err);
    if (rc) return rc;
    if (pool == MF_POOLING_NONE)
        return mf_err(err, MF_E_INVAL,
                      "embedding: pooling none gives one vector per token, not one per text; %s (read the rows "
                      "with mf_get_embeddings, or pool with mean, cls or last)",
                      from_file ? "the model file asks for none" : "none was asked");
    if (mf_seq_pos_max(ctx, seq) >= 0)
        return mf_err(err, MF_E_INVAL, "embedding: sequence %d already holds tokens (up to position %d)", seq,
                      mf_seq_pos_max(ctx, seq));
    if (n_tokens > ctx->n_ctx)
        return mf_err(err, MF_E_RANGE,
                      "embedding: the input has %d tokens, the context %d (raise -c/--ctx-size or shorten the input)",
                      n_tokens, ctx->n_ctx);
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
            bool want = pool == MF_POOLING_MEAN || (pool == MF_POOLING_CLS && p == 0) ||
                        (pool == MF_POOLING_LAST && p == n_tokens - 1);
            mf_batch_add(&b, tokens[p], p, seq, want);
        }
        if (!(rc = mf_decode(ctx, &b, err))) take_rows(ctx, &b, pool, acc, out);
    }
    if (!rc && acc)
        for (int32_t k = 0; k < ne; k++) out[k] = (float)(acc[k] / n_tokens);
    mf_batch_free(&b);
    free(acc);
    mf_seq_rm(ctx, seq, -1, -1);
    if (rc) return mf_err_prefix(err, rc, "embedding %d tokens (%s pooling)", n_tokens, pooling_name(pool));
    return 0;
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
