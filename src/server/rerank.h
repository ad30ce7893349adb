/* server/rerank: a reranker's scores on a server started with --rerank (or --embeddings on a model whose
 * pooling is rank, such as Qwen3-Reranker).  POST /v1/rerank, /rerank, /v1/reranking and /reranking answer in
 * llama-server's Jina/Cohere shape, or TEI's when the body names "texts".  The HTTP thread parses and
 * tokenizes each (query, document) pair into the model's rerank prompt (mf_srv_rerank_parse); the engine
 * thread scores them (mf_srv_rerank_run). */
#ifndef MF_SERVER_RERANK_H
#define MF_SERVER_RERANK_H

#include "server/embed.h"

typedef struct {
    mf_srv_embed_req in; /* the pairs' prompts, tokenized (in.n pairs, in.n_tokens in all) */
    char **docs;         /* the documents' texts, for return_documents / return_text */
    int32_t top_n;       /* results answered: the best top_n (default and at most: every document) */
    bool tei;            /* TEI's shape: the body named "texts"; a bare array of {index, score[, text]} */
    bool return_docs;    /* Jina/Cohere's return_documents (document: {text}) or TEI's return_text (text) */
} mf_srv_rerank_req;

/* Parses body (query; documents as strings or {"text": ...} objects, or TEI's texts; top_n; return_documents
 * or return_text; model is ignored) and tokenizes every pair.  Refused with 400 naming the field: no query or
 * a non-string one, no documents or an empty list, a document that is neither a string nor an object with a
 * string "text", more than MF_SRV_EMBED_MAX_INPUTS documents, top_n not a non-negative integer, a pair longer
 * than n_ctx tokens. */
int mf_srv_rerank_parse(const mf_model *model, int32_t n_ctx, const char *body, size_t len, mf_srv_rerank_req *out,
                        mf_srv_err *e);
void mf_srv_rerank_req_free(mf_srv_rerank_req *r);

/* Engine thread: scores every pair of the n requests r[i] (mf_srv_embed_groups with rank pooling from sequence
 * seq on: packed across requests; a pair's score is its first label's probability, llama-server's
 * relevance_score), then writes each answer into p[i].body, sorted by score (ties: the lower index first), the
 * best top_n.  p[i].cancelled/user are the caller's; p[i].status is set as mf_srv_embed_run sets it. */
void mf_srv_rerank_run(mf_context *ctx, mf_seq_id seq, const mf_srv_rerank_req *const *r, mf_srv_pooled *p, int n,
                       const char *model_name);

#endif
