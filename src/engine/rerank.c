/* A reranker's input: one (query, document) pair as llama-server's format_prompt_rerank builds it - the file's
 * tokenizer.chat_template.rerank (Qwen3-Reranker's "Judge whether the Document meets ..." prompt, which
 * llama.cpp's converter writes) with {query} and {document} filled in, or, without that template, the two
 * texts joined by the special tokens the tokenizer adds. */
#include "engine/engine_impl.h"

#include "tok/tok.h"

#include <stdlib.h>
#include <string.h>

#define RERANK_TEMPLATE_KEY "tokenizer.chat_template.rerank"

/* The template with every {query} and {document} replaced, in one pass: a query that contains the text
 * "{document}" stays as written (llama.cpp replaces the queries first, then every "{document}" of the result,
 * the query's too). */
static char *fill(mf_str tmpl, const char *q, size_t ql, const char *d, size_t dl, size_t *len) {
    static const char kq[] = "{query}", kd[] = "{document}";
    size_t cap = tmpl.len + 1, n = 0;
    for (size_t i = 0; i < tmpl.len; i++) /* an upper bound: every '{' could open a slot */
        if (tmpl.ptr[i] == '{') cap += ql + dl;
    char *s = malloc(cap);
    if (!s) return NULL;
    for (size_t i = 0; i < tmpl.len;) {
        const size_t left = tmpl.len - i;
        if (left >= sizeof kq - 1 && !memcmp(tmpl.ptr + i, kq, sizeof kq - 1)) {
            memcpy(s + n, q, ql), n += ql, i += sizeof kq - 1;
        } else if (left >= sizeof kd - 1 && !memcmp(tmpl.ptr + i, kd, sizeof kd - 1)) {
            memcpy(s + n, d, dl), n += dl, i += sizeof kd - 1;
        } else {
            s[n++] = tmpl.ptr[i++];
        }
    }
    s[n] = 0;
    *len = n;
    return s;
}

/* [BOS] query [EOS] document [EOS]: llama-server's pair without a template (texts not parsed for special
 * tokens; BOS and EOS only where the tokenizer adds them - a Qwen tokenizer adds neither). */
static int join_plain(const mf_tok *t, const char *q, size_t ql, const char *d, size_t dl, mf_tok_ids *o,
                      mf_error *err) {
    const bool bos = mf_tok_add_bos(t) && mf_tok_bos(t) >= 0, eos = mf_tok_add_eos(t) && mf_tok_eos(t) >= 0;
    int rc = 0;
    if (bos) rc = mf_tok_ids_push(o, mf_tok_bos(t), err);
    if (!rc) rc = mf_tok_encode(t, q, ql, 0, o, err);
    if (!rc && eos) rc = mf_tok_ids_push(o, mf_tok_eos(t), err);
    if (!rc) rc = mf_tok_encode(t, d, dl, 0, o, err);
    if (!rc && eos) rc = mf_tok_ids_push(o, mf_tok_eos(t), err);
    return rc;
}

int mf_rerank_tokenize(const mf_model *model, const char *query, size_t query_len, const char *doc, size_t doc_len,
                       mf_token **out, int32_t *n_out, mf_error *err) {
    *out = NULL;
    *n_out = 0;
    if (!model->tok)
        return mf_err(err, MF_E_UNSUPPORTED, "model '%s' has no usable tokenizer: %s", model->path, model->tok_why);
    mf_tok_ids ids = {0};
    int rc;
    if (mf_gguf_find_key(model->gguf, RERANK_TEMPLATE_KEY) >= 0) {
        mf_str tmpl;
        if ((rc = mf_gguf_get_str(model->gguf, RERANK_TEMPLATE_KEY, &tmpl, err))) return rc;
        size_t len;
        char *prompt = fill(tmpl, query, query_len, doc, doc_len, &len);
        if (!prompt) return mf_err(err, MF_E_NOMEM, "out of memory");
        rc = mf_tok_encode(model->tok, prompt, len, MF_TOK_PARSE_SPECIAL, &ids, err);
        free(prompt);
    } else {
        rc = join_plain(model->tok, query, query_len, doc, doc_len, &ids, err);
    }
    if (!rc && ids.n > INT32_MAX) rc = mf_err(err, MF_E_RANGE, "the pair gives %zu tokens", ids.n);
    if (rc) {
        free(ids.ids);
        return rc;
    }
    *out = ids.ids;
    *n_out = (int32_t)ids.n;
    return 0;
}
