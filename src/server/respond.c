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

static double per(double a, double b) {
    return b > 0 ? a / b : 0.0;
}

/* llama-server's timings object (result_timings), with the speculative counts when a draft model is loaded */
static void add_timings(cJSON *o, const mf_srv_usage *u) {
    if (!u->timings && !u->draft) return;
    cJSON *t = cJSON_AddObjectToObject(o, "timings");
    if (u->timings) {
        cJSON_AddNumberToObject(t, "cache_n", u->cached_tokens);
        cJSON_AddNumberToObject(t, "prompt_n", u->prompt_n);
        cJSON_AddNumberToObject(t, "prompt_ms", u->prompt_ms);
        cJSON_AddNumberToObject(t, "prompt_per_token_ms", per(u->prompt_ms, u->prompt_n));
        cJSON_AddNumberToObject(t, "prompt_per_second", per(1e3 * u->prompt_n, u->prompt_ms));
        cJSON_AddNumberToObject(t, "predicted_n", u->predicted_n);
        cJSON_AddNumberToObject(t, "predicted_ms", u->predicted_ms);
        cJSON_AddNumberToObject(t, "predicted_per_token_ms", per(u->predicted_ms, u->predicted_n));
        cJSON_AddNumberToObject(t, "predicted_per_second", per(1e3 * u->predicted_n, u->predicted_ms));
    }
    if (u->draft) {
        cJSON_AddNumberToObject(t, "draft_n", u->draft_n);
        cJSON_AddNumberToObject(t, "draft_n_accepted", u->draft_n_accepted);
    }
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

/* {"token": text, "logprob": lp, "bytes": [the piece's bytes]} ("prob" for post_sampling_probs) */
static cJSON *token_value(const char *piece, const char *key, float lp) {
    cJSON *t = cJSON_CreateObject();
    char *text = token_text(piece);
    cJSON_AddStringToObject(t, "token", text ? text : "");
    free(text);
    cJSON_AddNumberToObject(t, key, lp);
    cJSON *bytes = cJSON_AddArrayToObject(t, "bytes");
    for (const unsigned char *b = (const unsigned char *)piece; *b; b++)
        cJSON_AddItemToArray(bytes, cJSON_CreateNumber(*b));
    return t;
}

static cJSON *token_logprob(const char *piece, float lp) {
    return token_value(piece, "logprob", lp);
}

/* llama-server's completion_probabilities (/completion with n_probs): per position {"id","token","bytes",
 * "logprob","top_logprobs":[{"id","token","bytes","logprob"}]}; with post_sampling_probs "prob" and
 * "top_probs" (the chain's probabilities). */
static cJSON *completion_probabilities(const mf_srv_logprob *lp, int32_t n, bool post) {
    const char *key = post ? "prob" : "logprob";
    cJSON *arr = cJSON_CreateArray();
    for (int32_t i = 0; i < n; i++) {
        cJSON *t = token_value(lp[i].token, key, lp[i].logprob), *top = cJSON_CreateArray();
        cJSON_AddNumberToObject(t, "id", lp[i].id);
        for (int32_t k = 0; k < lp[i].n_top; k++) {
            cJSON *q = token_value(lp[i].top_token[k], key, lp[i].top_logprob[k]);
            cJSON_AddNumberToObject(q, "id", lp[i].top_id[k]);
            cJSON_AddItemToArray(top, q);
        }
        cJSON_AddItemToObject(t, post ? "top_probs" : "top_logprobs", top);
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

static cJSON *token_ids(const mf_token *t, int32_t n) {
    cJSON *a = cJSON_CreateArray();
    for (int32_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(t[i]));
    return a;
}

/* llama-server's response_fields: each path ("timings/prompt_n" reads "prompt_n" inside "timings") that the
 * answer has becomes a key of a new object, named by the whole path; a path it lacks is left out. */
static cJSON *project(cJSON *o, char *const *paths, int32_t n) {
    cJSON *out = cJSON_CreateObject();
    for (int32_t i = 0; i < n; i++) {
        const cJSON *cur = o;
        char key[256];
        const char *p = paths[i];
        while (cur && *p) {
            const char *slash = strchr(p, '/');
            size_t len = slash ? (size_t)(slash - p) : strlen(p);
            if (len >= sizeof key || !cJSON_IsObject(cur)) {
                cur = NULL;
                break;
            }
            memcpy(key, p, len);
            key[len] = 0;
            cur = cJSON_GetObjectItemCaseSensitive(cur, key);
            p += len + (slash != NULL);
            if (slash && !*p) cur = NULL; /* "a/": an empty last key, which no answer has */
        }
        if (cur && *paths[i] && !cJSON_GetObjectItemCaseSensitive(out, paths[i]))
            cJSON_AddItemToObject(out, paths[i], cJSON_Duplicate(cur, true));
    }
    cJSON_Delete(o);
    return out;
}

/* One /completion result (llama-server's server_task_result_cmpl_final, less generation_settings and
 * prompt); a stream's last chunk leaves out the text and tokens it already sent. */
static cJSON *native_result(const mf_srv_head *h, const mf_srv_choice *c, int32_t index, const mf_srv_usage *u) {
    cJSON *o = cJSON_CreateObject();
    const mf_srv_native *nt = &c->nat;
    cJSON_AddNumberToObject(o, "index", index);
    cJSON_AddStringToObject(o, "content", !h->streamed && c->content ? c->content : "");
    const bool toks = h->return_tokens && !h->streamed;
    cJSON_AddItemToObject(o, "tokens", token_ids(nt->tokens, toks ? nt->n_tokens : 0));
    cJSON_AddNumberToObject(o, "id_slot", h->id_slot);
    cJSON_AddBoolToObject(o, "stop", true);
    cJSON_AddStringToObject(o, "model", h->model);
    cJSON_AddNumberToObject(o, "tokens_predicted", nt->n_gen);
    cJSON_AddNumberToObject(o, "tokens_evaluated", u->prompt_tokens);
    cJSON_AddBoolToObject(o, "has_new_line", nt->has_new_line);
    cJSON_AddBoolToObject(o, "truncated", nt->truncated);
    cJSON_AddStringToObject(o, "stop_type", nt->stop_type ? nt->stop_type : "eos");
    cJSON_AddStringToObject(o, "stopping_word", nt->stopping_word ? nt->stopping_word : "");
    cJSON_AddNumberToObject(o, "tokens_cached", u->cached_tokens);
    add_timings(o, u);
    if (c->lp && !h->streamed)
        cJSON_AddItemToObject(o, "completion_probabilities", completion_probabilities(c->lp, c->n_lp, h->post_probs));
    return h->fields_given ? project(o, h->fields, h->n_fields) : o;
}

char *mf_srv_native_chunk_json(const mf_srv_head *h, const char *content, const mf_token *toks, int32_t n_toks,
                               int32_t n_gen, const mf_srv_usage *u, const mf_srv_logprob *lp, int32_t n_lp) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", 0);
    cJSON_AddStringToObject(o, "content", content ? content : "");
    cJSON_AddItemToObject(o, "tokens", token_ids(toks, n_toks));
    cJSON_AddBoolToObject(o, "stop", false);
    cJSON_AddNumberToObject(o, "id_slot", h->id_slot);
    cJSON_AddNumberToObject(o, "tokens_predicted", n_gen);
    if (u) {
        cJSON_AddNumberToObject(o, "tokens_evaluated", u->prompt_tokens);
        add_timings(o, u);
    }
    if (lp) cJSON_AddItemToObject(o, "completion_probabilities", completion_probabilities(lp, n_lp, h->post_probs));
    return finish(o);
}

char *mf_srv_final_json(const mf_srv_head *h, const mf_srv_choice *ch, int32_t n_choices, const mf_srv_usage *u) {
    if (h->kind == MF_SRV_NATIVE) { /* llama-server answers several results as an array */
        if (n_choices == 1) return finish(native_result(h, &ch[0], 0, u));
        cJSON *arr = cJSON_CreateArray();
        for (int32_t i = 0; i < n_choices; i++) cJSON_AddItemToArray(arr, native_result(h, &ch[i], i, u));
        return finish(arr);
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
    if (h->kind == MF_SRV_NATIVE) return mf_srv_native_chunk_json(h, content, NULL, 0, 0, NULL, lp, n_lp);
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
