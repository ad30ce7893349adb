/* server/rerank: a reranking request from its body to its answer (see rerank.h). */
#include "server/rerank.h"

#include "server/think.h"
#include "server/utf8.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mf_srv_rerank_req_free(mf_srv_rerank_req *r) {
    for (int32_t i = 0; r->docs && i < r->in.n; i++) free(r->docs[i]);
    free(r->docs);
    mf_srv_embed_req_free(&r->in);
    memset(r, 0, sizeof *r);
}

/* Document i's text: a string, or (Cohere's and Jina's clients) an object whose "text" is one. */
static const char *doc_text(const cJSON *v) {
    if (cJSON_IsString(v)) return v->valuestring;
    const cJSON *t = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "text") : NULL;
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

/* Every document paired with the query, into the model's rerank prompt. */
static int pairs(const mf_model *model, int32_t n_ctx, const char *query, const cJSON *docs, const char *field,
                 mf_srv_rerank_req *r, mf_srv_err *e) {
    mf_srv_embed_req *in = &r->in;
    in->n = cJSON_GetArraySize(docs);
    if (in->n > MF_SRV_EMBED_MAX_INPUTS)
        return mf_srv_fail(e, 400, "invalid_request_error", field, "'%s' has %d documents; at most %d per request",
                           field, in->n, MF_SRV_EMBED_MAX_INPUTS);
    in->ids = calloc((size_t)in->n, sizeof *in->ids);
    in->n_ids = calloc((size_t)in->n, sizeof *in->n_ids);
    r->docs = calloc((size_t)in->n, sizeof *r->docs);
    if (!in->ids || !in->n_ids || !r->docs) return mf_srv_fail(e, 500, "server_error", "", "out of memory");
    int32_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, docs) {
        const char *d = doc_text(v);
        if (!d)
            return mf_srv_fail(e, 400, "invalid_request_error", field,
                               "'%s[%d]' must be a string or an object with a string \"text\"", field, i);
        if (!mf_srv_utf8_valid(d, strlen(d))) /* a \ud800 escape decodes to a surrogate */
            return mf_srv_fail(e, 400, "invalid_request_error", field, "'%s[%d]' is not valid UTF-8", field, i);
        if (!(r->docs[i] = strdup(d))) return mf_srv_fail(e, 500, "server_error", "", "out of memory");
        mf_error err = {0};
        if (mf_rerank_tokenize(model, query, strlen(query), d, strlen(d), &in->ids[i], &in->n_ids[i], &err))
            return mf_srv_fail(e, 400, "invalid_request_error", field, "'%s[%d]': %s", field, i, err.msg);
        if (in->n_ids[i] > n_ctx)
            return mf_srv_fail(e, 400, "invalid_request_error", field,
                               "'%s[%d]' with the query makes a prompt of %d tokens and the server's context holds "
                               "%d (shorten it, or restart with a larger -c/--ctx-size)",
                               field, i, in->n_ids[i], n_ctx);
        in->n_tokens += in->n_ids[i];
        i++;
    }
    return 0;
}

static int parse_fields(const mf_model *model, int32_t n_ctx, const cJSON *o, mf_srv_rerank_req *r, mf_srv_err *e) {
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(o, "query");
    const cJSON *docs = cJSON_GetObjectItemCaseSensitive(o, "documents");
    const char *field = "documents";
    if (!docs && (docs = cJSON_GetObjectItemCaseSensitive(o, "texts"))) field = "texts", r->tei = true;
    if (!cJSON_IsString(q))
        return mf_srv_fail(e, 400, "invalid_request_error", "query", "'query' %s",
                           q ? "must be a string" : "is required: the text the documents are ranked against");
    if (!mf_srv_utf8_valid(q->valuestring, strlen(q->valuestring)))
        return mf_srv_fail(e, 400, "invalid_request_error", "query", "'query' is not valid UTF-8");
    if (!cJSON_IsArray(docs) || cJSON_GetArraySize(docs) == 0)
        return mf_srv_fail(e, 400, "invalid_request_error", field, "'%s' %s", field,
                           !docs ? "is required: the texts to rank (an array)"
                                 : cJSON_IsArray(docs) ? "is an empty array" : "must be an array of texts");
    const cJSON *ret = cJSON_GetObjectItemCaseSensitive(o, r->tei ? "return_text" : "return_documents");
    if (ret && !cJSON_IsNull(ret) && !cJSON_IsBool(ret))
        return mf_srv_fail(e, 400, "invalid_request_error", ret->string, "'%s' must be true or false", ret->string);
    r->return_docs = cJSON_IsTrue(ret);
    if (pairs(model, n_ctx, q->valuestring, docs, field, r, e)) return -1;
    r->top_n = r->in.n;
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(o, "top_n");
    if (top && !cJSON_IsNull(top)) {
        if (!cJSON_IsNumber(top) || top->valuedouble < 0 || top->valuedouble != floor(top->valuedouble))
            return mf_srv_fail(e, 400, "invalid_request_error", "top_n",
                               "'top_n' must be a non-negative integer (the best results to answer)");
        if (top->valuedouble < r->in.n) r->top_n = (int32_t)top->valuedouble;
    }
    return 0;
}

int mf_srv_rerank_parse(const mf_model *model, int32_t n_ctx, const char *body, size_t len, mf_srv_rerank_req *out,
                        mf_srv_err *e) {
    memset(out, 0, sizeof *out);
    cJSON *o = mf_srv_embed_body(body, len, e);
    if (!o) return -1;
    int rc = parse_fields(model, n_ctx, o, out, e);
    cJSON_Delete(o);
    if (rc) mf_srv_rerank_req_free(out);
    return rc;
}

/* ---------------- the answer ---------------- */

typedef struct {
    int32_t index;
    float score;
} ranked;

/* best first; equal scores keep the documents' order */
static int by_score(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static bool add_str(mf_srv_buf *b, const char *s) { return mf_srv_buf_add(b, s, strlen(s)); }

static bool add_result(mf_srv_buf *b, const mf_srv_rerank_req *r, int32_t k, const ranked *x) {
    char head[96];
    snprintf(head, sizeof head, "%s{\"index\":%d,\"%s\":%.9g", k ? "," : "", x->index,
             r->tei ? "score" : "relevance_score", (double)x->score);
    bool ok = add_str(b, head);
    if (ok && r->return_docs)
        ok = add_str(b, r->tei ? ",\"text\":" : ",\"document\":{\"text\":") && mf_srv_buf_add_json_str(b, r->docs[x->index]) &&
             (r->tei || add_str(b, "}"));
    return ok && add_str(b, "}");
}

static bool write_answer(mf_srv_buf *b, const mf_srv_rerank_req *r, const ranked *res, const char *model_name) {
    bool ok = add_str(b, r->tei ? "[" : "{\"object\":\"list\",\"results\":[");
    for (int32_t k = 0; ok && k < r->top_n; k++) ok = add_result(b, r, k, &res[k]);
    if (r->tei) return ok && add_str(b, "]");
    char usage[128];
    snprintf(usage, sizeof usage, ",\"usage\":{\"prompt_tokens\":%d,\"total_tokens\":%d}}", r->in.n_tokens,
             r->in.n_tokens);
    return ok && add_str(b, "],\"model\":") && mf_srv_buf_add_json_str(b, model_name) && add_str(b, usage);
}

/* A group's scores: the first label's probability (llama-server's relevance_score) of each pair. */
static bool take_scores(void *arg, int32_t g0, int32_t k, float *v, int32_t dim) {
    ranked *res = arg;
    for (int32_t i = 0; i < k; i++) res[g0 + i] = (ranked){g0 + i, v[(size_t)i * (size_t)dim]};
    return true;
}

void mf_srv_rerank_run(mf_context *ctx, mf_seq_id seq, const mf_srv_rerank_req *const *r, mf_srv_pooled *p, int n,
                       const char *model_name) {
    for (int i = 0; i < n; i++) {
        ranked *res = malloc(sizeof *res * (size_t)r[i]->in.n);
        p[i].req = &r[i]->in, p[i].take = take_scores, p[i].arg = res, p[i].status = res ? 200 : 500;
    }
    mf_srv_embed_groups(ctx, seq, MF_POOLING_RANK, p, n, "documents", "");
    for (int i = 0; i < n; i++) {
        ranked *res = p[i].arg;
        mf_srv_buf b = {0};
        if (p[i].status == 200) {
            qsort(res, (size_t)r[i]->in.n, sizeof *res, by_score);
            if (!write_answer(&b, r[i], res, model_name)) p[i].status = 500;
        }
        free(res);
        p[i].arg = NULL;
        p[i].status = mf_srv_embed_answer(p[i].status, &b, &p[i].body, &p[i].err);
    }
}
