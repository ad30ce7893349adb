/* server/respond: OpenAI / llama-server JSON shapes (see respond.h). */
#include "server/respond.h"

#include "server/utf8.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

static char *finish(cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *mf_srv_error_json(const mf_srv_err *e) {
    mf_srv_err c = *e; /* a message may quote a URL or value that is not UTF-8: JSON must be */
    mf_srv_utf8_clean(c.msg);
    mf_srv_utf8_clean(c.param);
    e = &c;
    cJSON *o = cJSON_CreateObject(), *er = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(er, "message", e->msg);
    cJSON_AddStringToObject(er, "type", e->type ? e->type : "invalid_request_error");
    if (e->param[0]) cJSON_AddStringToObject(er, "param", e->param);
    else cJSON_AddNullToObject(er, "param");
    cJSON_AddNullToObject(er, "code");
    return finish(o);
}

static void add_usage(cJSON *o, const mf_srv_usage *u) {
    cJSON *us = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(us, "prompt_tokens", u->prompt_tokens);
    cJSON_AddNumberToObject(us, "completion_tokens", u->completion_tokens);
    cJSON_AddNumberToObject(us, "total_tokens", u->prompt_tokens + u->completion_tokens);
    cJSON *d = cJSON_AddObjectToObject(us, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", u->cached_tokens);
}

/* llama-server's per-request speculative counts (only when a draft model is loaded) */
static void add_timings(cJSON *o, const mf_srv_usage *u) {
    if (!u->draft) return;
    cJSON *t = cJSON_AddObjectToObject(o, "timings");
    cJSON_AddNumberToObject(t, "draft_n", u->draft_n);
    cJSON_AddNumberToObject(t, "draft_n_accepted", u->draft_n_accepted);
}

static cJSON *head(const mf_srv_head *h, const char *object) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", h->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)h->created);
    cJSON_AddStringToObject(o, "model", h->model);
    cJSON_AddStringToObject(o, "system_fingerprint", "minfer");
    return o;
}

/* A token's text for JSON: its piece may be part of a character, whose bytes become U+FFFD here ("bytes"
 * carries them as they are).  NULL when out of memory. */
static char *token_text(const char *piece) {
    return mf_srv_utf8_lossy_dup(piece, strlen(piece), NULL);
}

/* {"token": text, "logprob": lp, "bytes": [the piece's bytes]} */
static cJSON *token_logprob(const char *piece, float lp) {
    cJSON *t = cJSON_CreateObject();
    char *text = token_text(piece);
    cJSON_AddStringToObject(t, "token", text ? text : "");
    free(text);
    cJSON_AddNumberToObject(t, "logprob", lp);
    cJSON *bytes = cJSON_AddArrayToObject(t, "bytes");
    for (const unsigned char *b = (const unsigned char *)piece; *b; b++)
        cJSON_AddItemToArray(bytes, cJSON_CreateNumber(*b));
    return t;
}

/* llama-server's completion_probabilities (/completion with n_probs): per position {"id","token","bytes",
 * "logprob","top_logprobs":[{"id","token","bytes","logprob"}]}. */
static cJSON *completion_probabilities(const mf_srv_logprob *lp, int32_t n) {
    cJSON *arr = cJSON_CreateArray();
    for (int32_t i = 0; i < n; i++) {
        cJSON *t = token_logprob(lp[i].token, lp[i].logprob), *top = cJSON_CreateArray();
        cJSON_AddNumberToObject(t, "id", lp[i].id);
        for (int32_t k = 0; k < lp[i].n_top; k++) {
            cJSON *q = token_logprob(lp[i].top_token[k], lp[i].top_logprob[k]);
            cJSON_AddNumberToObject(q, "id", lp[i].top_id[k]);
            cJSON_AddItemToArray(top, q);
        }
        cJSON_AddItemToObject(t, "top_logprobs", top);
        cJSON_AddItemToArray(arr, t);
    }
    return arr;
}

/* chat: {"content": [{"token","logprob","bytes","top_logprobs":[{"token","logprob","bytes"}]}]}; completions:
 * the legacy {"tokens","token_logprobs","top_logprobs","text_offset"} columns, text_offset counting the
 * pieces' bytes. */
static cJSON *logprobs(mf_srv_kind kind, const mf_srv_logprob *lp, int32_t n) {
    if (!lp) return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    if (kind == MF_SRV_CHAT) {
        cJSON *arr = cJSON_AddArrayToObject(o, "content");
        for (int32_t i = 0; i < n; i++) {
            cJSON *t = token_logprob(lp[i].token, lp[i].logprob);
            cJSON *top = cJSON_AddArrayToObject(t, "top_logprobs");
            for (int32_t k = 0; k < lp[i].n_top; k++)
                cJSON_AddItemToArray(top, token_logprob(lp[i].top_token[k], lp[i].top_logprob[k]));
            cJSON_AddItemToArray(arr, t);
        }
        return o;
    }
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens"), *lps = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs"), *offs = cJSON_AddArrayToObject(o, "text_offset");
    size_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        char *text = token_text(lp[i].token);
        cJSON_AddItemToArray(toks, cJSON_CreateString(text ? text : ""));
        free(text);
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(lp[i].logprob));
        cJSON *m = cJSON_CreateObject();
        for (int32_t k = 0; k < lp[i].n_top; k++) {
            char *key = token_text(lp[i].top_token[k]);
            cJSON_AddNumberToObject(m, key ? key : "", lp[i].top_logprob[k]);
            free(key);
        }
        cJSON_AddItemToArray(tops, m);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        off += strlen(lp[i].token);
    }
    return o;
}

/* OpenAI's tool_calls array; `index` is each call's place in the answer (streamed deltas need it). */
static cJSON *tool_calls(const mf_srv_calls *c, bool with_index) {
    cJSON *arr = cJSON_CreateArray();
    for (int32_t k = c->from; k < c->to; k++) {
        cJSON *q = cJSON_CreateObject(), *fn;
        char id[48];
        snprintf(id, sizeof id, "call_%016llx_%d", (unsigned long long)c->id, (int)k);
        if (with_index) cJSON_AddNumberToObject(q, "index", k);
        cJSON_AddStringToObject(q, "id", id);
        cJSON_AddStringToObject(q, "type", "function");
        fn = cJSON_AddObjectToObject(q, "function");
        cJSON_AddStringToObject(fn, "name", c->calls[k].name);
        cJSON_AddStringToObject(fn, "arguments", c->calls[k].arguments);
        cJSON_AddItemToArray(arr, q);
    }
    return arr;
}

static const char *native_stop_type(const char *finish_reason) {
    return finish_reason && !strcmp(finish_reason, "length") ? "limit" : "eos";
}

char *mf_srv_final_json(const mf_srv_head *h, const mf_srv_choice *ch, int32_t n_choices, const mf_srv_usage *u) {
    if (h->kind == MF_SRV_NATIVE) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "content", ch[0].content ? ch[0].content : "");
        cJSON_AddStringToObject(o, "model", h->model);
        cJSON_AddBoolToObject(o, "stop", true);
        cJSON_AddStringToObject(o, "stop_type", native_stop_type(ch[0].finish_reason));
        cJSON_AddNumberToObject(o, "tokens_predicted", u->completion_tokens);
        cJSON_AddNumberToObject(o, "tokens_evaluated", u->prompt_tokens);
        cJSON_AddNumberToObject(o, "tokens_cached", u->cached_tokens);
        if (ch[0].lp) cJSON_AddItemToObject(o, "completion_probabilities", completion_probabilities(ch[0].lp, ch[0].n_lp));
        add_timings(o, u);
        return finish(o);
    }
    bool chat = h->kind == MF_SRV_CHAT;
    cJSON *o = head(h, chat ? "chat.completion" : "text_completion");
    cJSON *arr = cJSON_AddArrayToObject(o, "choices");
    for (int32_t i = 0; i < n_choices; i++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "index", i);
        if (chat) {
            cJSON *m = cJSON_AddObjectToObject(c, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            bool calls = ch[i].calls.to > ch[i].calls.from, text = ch[i].content && *ch[i].content;
            if (calls && !text) cJSON_AddNullToObject(m, "content"); /* OpenAI's shape for calls alone */
            else cJSON_AddStringToObject(m, "content", ch[i].content ? ch[i].content : "");
            if (ch[i].reasoning) cJSON_AddStringToObject(m, "reasoning_content", ch[i].reasoning);
            if (calls) cJSON_AddItemToObject(m, "tool_calls", tool_calls(&ch[i].calls, false));
        } else {
            cJSON_AddStringToObject(c, "text", ch[i].content ? ch[i].content : "");
        }
        cJSON_AddItemToObject(c, "logprobs", logprobs(h->kind, ch[i].lp, ch[i].n_lp));
        cJSON_AddStringToObject(c, "finish_reason", ch[i].finish_reason);
        cJSON_AddItemToArray(arr, c);
    }
    add_usage(o, u);
    add_timings(o, u);
    return finish(o);
}

char *mf_srv_chunk_json(const mf_srv_head *h, int32_t index, bool first, const char *content, const char *reasoning,
                        const mf_srv_calls *calls, const char *finish_reason, const mf_srv_logprob *lp, int32_t n_lp) {
    if (h->kind == MF_SRV_NATIVE) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "content", content ? content : "");
        cJSON_AddBoolToObject(o, "stop", finish_reason != NULL);
        if (finish_reason) cJSON_AddStringToObject(o, "stop_type", native_stop_type(finish_reason));
        if (lp) cJSON_AddItemToObject(o, "completion_probabilities", completion_probabilities(lp, n_lp));
        return finish(o);
    }
    bool chat = h->kind == MF_SRV_CHAT;
    cJSON *o = head(h, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *arr = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", index);
    if (chat) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (first) cJSON_AddStringToObject(d, "role", "assistant");
        if (content) cJSON_AddStringToObject(d, "content", content);
        if (reasoning) cJSON_AddStringToObject(d, "reasoning_content", reasoning);
        if (calls && calls->to > calls->from) cJSON_AddItemToObject(d, "tool_calls", tool_calls(calls, true));
    } else {
        cJSON_AddStringToObject(c, "text", content ? content : "");
    }
    cJSON_AddItemToObject(c, "logprobs", lp ? logprobs(h->kind, lp, n_lp) : cJSON_CreateNull());
    if (finish_reason) cJSON_AddStringToObject(c, "finish_reason", finish_reason);
    else cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(arr, c);
    return finish(o);
}

char *mf_srv_usage_chunk_json(const mf_srv_head *h, const mf_srv_usage *u) {
    cJSON *o = head(h, h->kind == MF_SRV_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON_AddArrayToObject(o, "choices");
    add_usage(o, u);
    add_timings(o, u);
    return finish(o);
}
