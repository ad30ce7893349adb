/* server/routes: which handler answers which method and path, and the handlers that need no forward
 * (health, metrics, models, props, tokenize, detokenize, apply-template).  Generation and slot actions
 * become jobs for the engine thread; this file waits for their answer. */
#include "server/grammar.h"
#include "server/infill.h"
#include "server/respond.h"
#include "server/server_impl.h"
#include "server/utf8.h"

#include "core/core.h"

#include <cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void mf_srv_answer_error(mf_srv_answer *a, int status, const char *type, const char *param, const char *fmt, ...) {
    mf_srv_err e = {.status = status, .type = type};
    snprintf(e.param, sizeof e.param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.msg, sizeof e.msg, fmt, ap);
    va_end(ap);
    a->status = status;
    a->ctype = "application/json";
    a->body = mf_srv_error_json(&e);
    a->len = a->body ? strlen(a->body) : 0;
}

static void answer_err(mf_srv_answer *a, const mf_srv_err *e) {
    mf_srv_answer_error(a, e->status, e->type, e->param, "%s", e->msg);
}

static void answer_json(mf_srv_answer *a, int status, cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!s) {
        mf_srv_answer_error(a, 500, "server_error", "", "out of memory building the answer");
        return;
    }
    a->status = status, a->ctype = "application/json", a->body = s, a->len = strlen(s);
}

/* The model is usable (and read-only) once the engine thread has loaded it. */
static bool need_model(mf_server *s, mf_srv_answer *a) {
    int st = atomic_load(&s->state);
    if (st == MF_SRV_READY) return true;
    if (st == MF_SRV_LOADING) mf_srv_answer_error(a, 503, "unavailable_error", "", "Loading model");
    else if (st == MF_SRV_DRAINING) mf_srv_answer_error(a, 503, "unavailable_error", "", "server shutting down");
    else mf_srv_answer_error(a, 503, "unavailable_error", "", "the model failed to load: %s", s->load_error);
    return false;
}

static void h_health(mf_server *s, mf_srv_answer *a) {
    int st = atomic_load(&s->state);
    if (st != MF_SRV_READY) {
        need_model(s, a);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", "ok");
    answer_json(a, 200, o);
}

static void h_metrics(mf_server *s, mf_srv_answer *a) {
    if (s->eng) mf_srv_metrics_set(s->m, MF_SRV_G_QUEUE_DEPTH, mf_srv_queue_depth(&s->q));
    size_t len = 0;
    char *t = mf_srv_metrics_render(s->m, &len);
    if (!t) {
        mf_srv_answer_error(a, 500, "server_error", "", "out of memory rendering the metrics");
        return;
    }
    a->status = 200, a->ctype = "text/plain; version=0.0.4; charset=utf-8", a->body = t, a->len = len;
}

static void h_models(mf_server *s, mf_srv_answer *a) {
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddStringToObject(m, "id", s->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)time(NULL));
    cJSON_AddStringToObject(m, "owned_by", "minfer");
    if (atomic_load(&s->state) == MF_SRV_READY) {
        cJSON *meta = cJSON_AddObjectToObject(m, "meta");
        cJSON_AddStringToObject(meta, "arch", s->info.arch);
        cJSON_AddNumberToObject(meta, "n_vocab", s->info.n_vocab);
        cJSON_AddNumberToObject(meta, "n_ctx_train", s->info.n_ctx_train);
        cJSON_AddNumberToObject(meta, "n_embd", s->info.n_embd);
        cJSON_AddNumberToObject(meta, "n_ctx", s->n_ctx);
    }
    cJSON_AddItemToArray(data, m);
    answer_json(a, 200, o);
}

static void h_props(mf_server *s, mf_srv_answer *a) {
    if (!need_model(s, a)) return;
    const mf_sampler_params sp = s->o.sampler; /* llama-server's defaults, or the command line's */
    cJSON *o = cJSON_CreateObject(), *g = cJSON_AddObjectToObject(o, "default_generation_settings");
    cJSON_AddNumberToObject(g, "n_ctx", s->n_ctx);
    cJSON *p = cJSON_AddObjectToObject(g, "params");
    cJSON_AddNumberToObject(p, "temperature", sp.temp);
    cJSON_AddNumberToObject(p, "top_k", sp.top_k);
    cJSON_AddNumberToObject(p, "top_p", sp.top_p);
    cJSON_AddNumberToObject(p, "min_p", sp.min_p);
    cJSON_AddNumberToObject(p, "typical_p", sp.typ_p);
    cJSON_AddNumberToObject(p, "repeat_penalty", sp.penalty_repeat);
    cJSON_AddNumberToObject(p, "repeat_last_n", sp.penalty_last_n);
    cJSON_AddNumberToObject(p, "presence_penalty", sp.penalty_present);
    cJSON_AddNumberToObject(p, "frequency_penalty", sp.penalty_freq);
    cJSON_AddNumberToObject(p, "dry_multiplier", sp.dry_multiplier);
    cJSON_AddNumberToObject(p, "dry_base", sp.dry_base);
    cJSON_AddNumberToObject(p, "dry_allowed_length", sp.dry_allowed_length);
    cJSON_AddNumberToObject(p, "dry_penalty_last_n", sp.dry_last_n);
    const char *const *brk;
    const int32_t n_brk = mf_srv_default_breakers(s->o.dry_breakers, s->o.n_dry_breakers, &brk);
    cJSON_AddItemToObject(p, "dry_sequence_breakers", cJSON_CreateStringArray(brk, n_brk));
    cJSON_AddNumberToObject(p, "xtc_probability", sp.xtc_probability);
    cJSON_AddNumberToObject(p, "xtc_threshold", sp.xtc_threshold);
    cJSON_AddNumberToObject(p, "top_n_sigma", sp.top_n_sigma);
    cJSON_AddNumberToObject(p, "dynatemp_range", sp.dynatemp_range);
    cJSON_AddNumberToObject(p, "dynatemp_exponent", sp.dynatemp_exponent);
    cJSON_AddNumberToObject(p, "mirostat", sp.mirostat);
    cJSON_AddNumberToObject(p, "mirostat_tau", sp.mirostat_tau);
    cJSON_AddNumberToObject(p, "mirostat_eta", sp.mirostat_eta);
    cJSON_AddNumberToObject(p, "min_keep", sp.min_keep);
    static const char *const order[] = {"penalties", "dry",   "top_n_sigma", "top_k",      "typ_p",
                                        "top_p",     "min_p", "xtc",         "temperature"};
    cJSON_AddItemToObject(p, "samplers", cJSON_CreateStringArray(order, 9));
    cJSON_AddNumberToObject(p, "n_predict", -1);
    cJSON_AddArrayToObject(p, "logit_bias");
    cJSON_AddNumberToObject(o, "total_slots", s->o.n_parallel);
    cJSON_AddStringToObject(o, "model_alias", s->model_name);
    cJSON_AddStringToObject(o, "model_path", s->o.model_path);
    cJSON_AddNumberToObject(o, "n_batch", s->o.n_batch);
    cJSON_AddStringToObject(o, "build_info", "minfer");
    answer_json(a, 200, o);
}

/* Parses a body that must be a JSON object; answers 400 otherwise. */
static cJSON *body_object(const char *body, size_t len, mf_srv_answer *a) {
    if (!mf_srv_utf8_valid(body, len)) {
        mf_srv_answer_error(a, 400, "invalid_request_error", "", "the request body is not valid UTF-8");
        return NULL;
    }
    cJSON *o = memchr(body, 0, len) ? NULL : cJSON_ParseWithLength(body, len); /* cJSON skips NUL as a blank */
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        mf_srv_answer_error(a, 400, "invalid_request_error", "", "the request body must be a JSON object");
        return NULL;
    }
    return o;
}

static bool opt_bool(cJSON *o, const char *name, bool dflt, bool *out, mf_srv_answer *a) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    *out = dflt;
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsBool(v)) {
        mf_srv_answer_error(a, 400, "invalid_request_error", name, "'%s' must be a boolean", name);
        return false;
    }
    *out = cJSON_IsTrue(v);
    return true;
}

static void h_tokenize(mf_server *s, const char *body, size_t len, mf_srv_answer *a) {
    if (!need_model(s, a)) return;
    cJSON *o = body_object(body, len, a);
    if (!o) return;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "content");
    bool add_special, parse_special, pieces;
    if (!cJSON_IsString(c)) {
        mf_srv_answer_error(a, 400, "invalid_request_error", "content", "'content' is required and must be a string");
    } else if (opt_bool(o, "add_special", false, &add_special, a) && opt_bool(o, "parse_special", true, &parse_special, a) &&
               opt_bool(o, "with_pieces", false, &pieces, a)) {
        mf_token *ids = NULL;
        int32_t n = 0;
        mf_error err = {0};
        if (mf_tokenize(s->model, c->valuestring, strlen(c->valuestring), add_special, parse_special, &ids, &n, &err)) {
            mf_srv_answer_error(a, 400, "invalid_request_error", "content", "%s", err.msg);
        } else {
            cJSON *r = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(r, "tokens");
            for (int32_t i = 0; i < n; i++) {
                if (!pieces) {
                    cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
                    continue;
                }
                char *piece = NULL;
                size_t pl = 0;
                cJSON *t = cJSON_CreateObject();
                cJSON_AddNumberToObject(t, "id", ids[i]);
                if (!mf_detokenize(s->model, &ids[i], 1, &piece, &pl, &err) && mf_srv_utf8_valid(piece, pl))
                    cJSON_AddStringToObject(t, "piece", piece);
                else { /* a piece that is part of a UTF-8 sequence: its bytes, as llama-server does */
                    cJSON *bytes = cJSON_AddArrayToObject(t, "piece");
                    for (size_t k = 0; piece && k < pl; k++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)piece[k]));
                }
                free(piece);
                cJSON_AddItemToArray(arr, t);
            }
            answer_json(a, 200, r);
        }
        free(ids);
    }
    cJSON_Delete(o);
}

/* Token ids from a JSON array, each checked against the vocabulary. */
static mf_token *token_array(mf_server *s, const cJSON *arr, const char *param, int32_t *n, mf_srv_answer *a) {
    if (!cJSON_IsArray(arr)) {
        mf_srv_answer_error(a, 400, "invalid_request_error", param, "'%s' must be an array of token ids", param);
        return NULL;
    }
    int k = cJSON_GetArraySize(arr);
    mf_token *ids = malloc(sizeof *ids * (size_t)(k > 0 ? k : 1));
    if (!ids) {
        mf_srv_answer_error(a, 500, "server_error", param, "out of memory (%d ids)", k);
        return NULL;
    }
    for (int i = 0; i < k; i++) {
        const cJSON *t = cJSON_GetArrayItem(arr, i);
        double d = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (!cJSON_IsNumber(t) || d != (double)(int64_t)d || d < 0 || d >= s->info.n_vocab) {
            mf_srv_answer_error(a, 400, "invalid_request_error", param,
                                "'%s[%d]' must be a token id in [0, %d) (the model's vocabulary)", param, i,
                                s->info.n_vocab);
            free(ids);
            return NULL;
        }
        ids[i] = (mf_token)d;
    }
    *n = k;
    return ids;
}

static void h_detokenize(mf_server *s, const char *body, size_t len, mf_srv_answer *a) {
    if (!need_model(s, a)) return;
    cJSON *o = body_object(body, len, a);
    if (!o) return;
    int32_t n = 0;
    mf_token *ids = token_array(s, cJSON_GetObjectItemCaseSensitive(o, "tokens"), "tokens", &n, a);
    if (ids) {
        char *text = NULL;
        size_t tl = 0;
        mf_error err = {0};
        if (mf_detokenize(s->model, ids, n, &text, &tl, &err)) {
            mf_srv_answer_error(a, 400, "invalid_request_error", "tokens", "%s", err.msg);
        } else {
            /* bytes that form no character (a piece that is part of one, where the ids end or the next id
             * does not complete it) become U+FFFD, as in generated text (JSON strings are UTF-8) */
            char *fixed = mf_srv_utf8_lossy_dup(text, tl, NULL);
            if (!fixed) {
                mf_srv_answer_error(a, 500, "server_error", "tokens", "out of memory (%zu bytes of text)", tl);
            } else {
                cJSON *r = cJSON_CreateObject();
                cJSON_AddStringToObject(r, "content", fixed);
                answer_json(a, 200, r);
                free(fixed);
            }
        }
        free(text);
        free(ids);
    }
    cJSON_Delete(o);
}

/* The chat prompt text of a parsed chat request (rendered with the model's template). */
static int render_chat(mf_server *s, const mf_srv_req *r, char **text, mf_srv_err *e) {
    mf_chat_params cp = mf_chat_default_params();
    cp.enable_thinking = r->enable_thinking;
    cp.tools = (const char *const *)r->tools;
    cp.n_tools = r->n_tools;
    mf_error err = {0};
    if (mf_chat_apply_with(s->model, r->msgs, r->n_msgs, &cp, text, &err))
        return mf_srv_fail(e, 400, "invalid_request_error", "messages", "%s", err.msg);
    return 0;
}

static void h_apply_template(mf_server *s, const char *body, size_t len, mf_srv_answer *a) {
    if (!need_model(s, a)) return;
    mf_srv_req r;
    mf_srv_err e;
    char *text = NULL;
    if (mf_srv_req_parse(MF_SRV_CHAT, body, len, &r, &e) || render_chat(s, &r, &text, &e)) {
        answer_err(a, &e);
    } else {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "prompt", text);
        answer_json(a, 200, o);
    }
    free(text);
    mf_srv_req_free(&r);
}

/* The prompt's token ids (rendered and tokenized here: the model is read-only). */
static int prompt_tokens(mf_server *s, mf_srv_job *j, mf_srv_err *e) {
    mf_srv_req *r = &j->req;
    if (r->fim) return mf_srv_infill_tokens(s->model, r, s->o.n_batch, s->n_ctx, &j->prompt, &j->n_prompt, e);
    if (r->tokens) {
        for (int32_t i = 0; i < r->n_tokens; i++)
            if (r->tokens[i] >= s->info.n_vocab)
                return mf_srv_fail(e, 400, "invalid_request_error", "prompt",
                                   "'prompt[%d]' is %d, outside the model's vocabulary [0, %d)", i, r->tokens[i],
                                   s->info.n_vocab);
        j->prompt = r->tokens, j->n_prompt = r->n_tokens;
        r->tokens = NULL, r->n_tokens = 0;
        return 0;
    }
    char *rendered = NULL;
    if (r->kind == MF_SRV_CHAT && render_chat(s, r, &rendered, e)) return -1;
    const char *text = rendered ? rendered : r->prompt;
    mf_error err = {0};
    int rc = mf_tokenize(s->model, text, strlen(text), true, true, &j->prompt, &j->n_prompt, &err);
    free(rendered);
    if (rc) return mf_srv_fail(e, 400, "invalid_request_error", r->kind == MF_SRV_CHAT ? "messages" : "prompt", "%s", err.msg);
    return 0;
}

/* Whether a chat answer may open with thinking: the model spells <think> as one token and the request does
 * not switch thinking off.  Then the grammar holds after </think> (and a few blanks). */
static bool may_think(mf_server *s, const mf_srv_req *r) {
    if (r->kind != MF_SRV_CHAT || r->enable_thinking == 0) return false;
    mf_token *ids = NULL;
    int32_t n = 0;
    bool one = !mf_tokenize(s->model, "<think>", 7, false, true, &ids, &n, NULL) && n == 1;
    free(ids);
    return one;
}

/* The request's constraint compiled for the engine (request.c compiled it once already, so only memory can
 * fail here). */
static int compile_constraint(mf_server *s, mf_srv_job *j, mf_srv_err *e) {
    const mf_srv_req *r = &j->req;
    if (!r->gbnf) return 0;
    j->think_first = may_think(s, r);
    char *wrapped = NULL;
    mf_error err = {0};
    int rc = j->think_first ? mf_srv_think_gbnf(r->gbnf, &wrapped, &err) : 0;
    const char *g = wrapped ? wrapped : r->gbnf;
    if (!rc) rc = mf_grammar_new(g, strlen(g), &j->grammar, &err);
    free(wrapped);
    if (rc) return mf_srv_fail(e, rc == MF_E_NOMEM ? 500 : 400, rc == MF_E_NOMEM ? "server_error" : "invalid_request_error",
                               r->constraint, "'%s': %s", r->constraint, err.msg);
    return 0;
}

/* Queues a generate or embed job; false after answering 503 (queue full: Retry-After; shutting down), the job
 * then let go. */
static bool queue_job(mf_server *s, mf_srv_job *j, mf_srv_answer *a) {
    int rc = mf_srv_queue_push(&s->q, j);
    if (rc == 1) {
        mf_srv_answer_error(a, 503, "unavailable_error", "",
                            "the server is busy: %d requests are already waiting for a slot (--max-queue %d); "
                            "retry later", s->o.max_queue, s->o.max_queue);
        a->hdr_name = "Retry-After", a->hdr_value = "1";
    } else if (rc) {
        mf_srv_answer_error(a, 503, "unavailable_error", "", "server shutting down");
    }
    if (rc) mf_srv_job_unref(j);
    return rc == 0;
}

static void h_generate(mf_server *s, mf_srv_kind kind, const char *body, size_t len, int fd, mf_srv_answer *a,
                       mf_srv_job **stream_job) {
    if (!need_model(s, a)) return;
    mf_srv_job *j = mf_srv_job_new(MF_JOB_GENERATE);
    if (!j) {
        mf_srv_answer_error(a, 500, "server_error", "", "out of memory");
        return;
    }
    j->t_arrival = mf_time_now();
    mf_srv_err e;
    if (mf_srv_req_parse_over(kind, body, len, &s->o.sampler, s->o.seed_given, &j->req, &e) ||
        prompt_tokens(s, j, &e) ||
        mf_srv_req_resolve_bias(&j->req, s->model, s->info.n_vocab, &e) ||
        mf_srv_req_resolve_dry(&j->req, s->breakers, s->model, s->o.dry_breakers, s->o.n_dry_breakers, &e) ||
        mf_srv_req_resolve_infill(&j->req, s->infill, s->infill_why, s->info.n_vocab, &e) ||
        compile_constraint(s, j, &e)) {
        answer_err(a, &e);
        mf_srv_job_unref(j);
        return;
    }
    if (j->n_prompt == 0) {
        mf_srv_answer_error(a, 400, "invalid_request_error", kind == MF_SRV_CHAT ? "messages" : "prompt",
                            "the prompt is empty (0 tokens)");
        mf_srv_job_unref(j);
        return;
    }
    if (j->n_prompt >= s->n_ctx) {
        mf_srv_answer_error(a, 400, "invalid_request_error", kind == MF_SRV_CHAT ? "messages" : "prompt",
                            "the prompt has %d tokens and the server's context holds %d: it must hold the prompt "
                            "plus at least one generated token (shorten the prompt, or restart with a larger "
                            "-c/--ctx-size)", j->n_prompt, s->n_ctx);
        mf_srv_job_unref(j);
        return;
    }
    unsigned long long id = (unsigned long long)atomic_fetch_add(&s->next_id, 1);
    snprintf(j->id, sizeof j->id, "%s-%llu", kind == MF_SRV_CHAT ? "chatcmpl" : "cmpl", id);
    j->model_name = s->model_name;
    j->created = (int64_t)time(NULL);
    j->slot = j->req.id_slot;
    if (!queue_job(s, j, a)) return;
    if (!mf_srv_wait_job(j, fd, j->req.stream)) { /* the client went away; the engine frees the slot */
        mf_srv_job_unref(j);
        a->status = 0;
        return;
    }
    pthread_mutex_lock(&j->mu);
    bool started = j->started;
    pthread_mutex_unlock(&j->mu);
    if (j->req.stream && started) {
        *stream_job = j; /* the reference moves to the stream */
        return;
    }
    a->status = j->status, a->ctype = "application/json", a->body = j->body, a->len = j->body_len;
    j->body = NULL;
    mf_srv_job_unref(j);
}

/* POST /v1/embeddings (OpenAI's shape), /embedding, /embeddings (llama-server's) and /v1/rerank with its aliases:
 * parsed and tokenized here (a reranker's pairs into its rerank prompt), run by the engine thread a group of
 * inputs at a time. */
static void h_pooled(mf_server *s, mf_job_kind kind, bool oai, const char *body, size_t len, int fd, mf_srv_answer *a) {
    if (!need_model(s, a)) return;
    mf_srv_job *j = mf_srv_job_new(kind);
    if (!j) {
        mf_srv_answer_error(a, 500, "server_error", "", "out of memory");
        return;
    }
    j->t_arrival = mf_time_now();
    mf_srv_err e;
    const bool rank = kind == MF_JOB_RERANK;
    const mf_srv_embed_limits lim = {s->n_ctx, s->o.pooling, s->o.matryoshka};
    if (rank ? mf_srv_rerank_parse(s->model, s->n_ctx, body, len, &j->rerank, &e)
             : mf_srv_embed_parse(s->model, &lim, oai, body, len, &j->embed, &e)) {
        answer_err(a, &e);
        mf_srv_job_unref(j);
        return;
    }
    snprintf(j->id, sizeof j->id, "%s-%llu", rank ? "rerank" : "embd",
             (unsigned long long)atomic_fetch_add(&s->next_id, 1));
    if (!queue_job(s, j, a)) return;
    if (!mf_srv_wait_job(j, fd, false)) a->status = 0; /* the client went away; the engine stops between groups */
    else {
        a->status = j->status, a->ctype = "application/json", a->body = j->body, a->len = j->body_len;
        j->body = NULL;
    }
    mf_srv_job_unref(j);
}

/* GET /slots and POST /slots/{id}?action=...: jobs for the engine (it owns the KV cells). */
static void h_slots(mf_server *s, const char *method, const char *url, const char *action, const char *body, size_t len,
                    int fd, mf_srv_answer *a) {
    if (!need_model(s, a)) return;
    mf_job_kind kind = MF_JOB_SLOTS;
    int slot = -1;
    char filename[256] = "";
    if (!strcmp(method, "POST")) {
        const char *id = url + strlen("/slots/");
        char *end = NULL;
        long v = strtol(id, &end, 10);
        if (!*id || *end || v < 0 || v >= s->o.n_parallel) {
            mf_srv_answer_error(a, 400, "invalid_request_error", "id_slot", "'%.40s' is not a slot id (0..%d)", id,
                                s->o.n_parallel - 1);
            return;
        }
        slot = (int)v;
        if (!action || (strcmp(action, "save") && strcmp(action, "restore") && strcmp(action, "erase"))) {
            mf_srv_answer_error(a, 400, "invalid_request_error", "action",
                                "'action' must be save, restore or erase, got '%.40s'", action ? action : "");
            return;
        }
        kind = !strcmp(action, "save") ? MF_JOB_SLOT_SAVE : !strcmp(action, "restore") ? MF_JOB_SLOT_RESTORE
                                                                                       : MF_JOB_SLOT_ERASE;
        if (kind != MF_JOB_SLOT_ERASE) {
            if (!s->o.slot_save_path) {
                mf_srv_answer_error(a, 501, "not_supported_error", "action",
                                    "slot %s needs a folder for the files: start the server with --slot-save-path DIR",
                                    action);
                return;
            }
            cJSON *o = body_object(body, len, a);
            if (!o) return;
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "filename");
            /* a plain name: letters, digits, '.', '_', '-', not starting with '.' (no path, no "..") */
            bool ok = cJSON_IsString(f) && f->valuestring[0] && f->valuestring[0] != '.' &&
                      strlen(f->valuestring) < sizeof filename &&
                      strspn(f->valuestring, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
                          strlen(f->valuestring) &&
                      !strstr(f->valuestring, "..");
            if (ok) snprintf(filename, sizeof filename, "%s", f->valuestring);
            else
                mf_srv_answer_error(a, 400, "invalid_request_error", "filename",
                                    "'filename' must be a plain file name inside --slot-save-path: letters, digits, "
                                    "'.', '_' and '-', not starting with '.', at most 255 bytes");
            cJSON_Delete(o);
            if (!ok) return;
        }
    }
    mf_srv_job *j = mf_srv_job_new(kind);
    if (!j) {
        mf_srv_answer_error(a, 500, "server_error", "", "out of memory");
        return;
    }
    j->slot = slot;
    snprintf(j->filename, sizeof j->filename, "%s", filename);
    j->t_arrival = mf_time_now();
    if (mf_srv_queue_push(&s->q, j)) {
        mf_srv_answer_error(a, 503, "unavailable_error", "", "server shutting down or busy");
        mf_srv_job_unref(j);
        return;
    }
    if (!mf_srv_wait_job(j, fd, false)) a->status = 0;
    else {
        a->status = j->status, a->ctype = "application/json", a->body = j->body, a->len = j->body_len;
        j->body = NULL;
    }
    mf_srv_job_unref(j);
}

typedef struct {
    const char *path, *method, *label;
    int kind; /* handler id */
} route;

enum {
    R_HEALTH, R_METRICS, R_MODELS, R_PROPS, R_TOKENIZE, R_DETOKENIZE, R_TEMPLATE, R_CHAT, R_CMPL, R_NATIVE, R_INFILL,
    R_SLOTS, R_EMBED_OAI, R_EMBED_NATIVE, R_RERANK
};

static const route k_routes[] = {
    {"/health", "GET", "/health", R_HEALTH},
    {"/v1/health", "GET", "/health", R_HEALTH},
    {"/metrics", "GET", "/metrics", R_METRICS},
    {"/v1/models", "GET", "/v1/models", R_MODELS},
    {"/models", "GET", "/v1/models", R_MODELS},
    {"/props", "GET", "/props", R_PROPS},
    {"/tokenize", "POST", "/tokenize", R_TOKENIZE},
    {"/detokenize", "POST", "/detokenize", R_DETOKENIZE},
    {"/apply-template", "POST", "/apply-template", R_TEMPLATE},
    {"/v1/chat/completions", "POST", "/v1/chat/completions", R_CHAT},
    {"/chat/completions", "POST", "/v1/chat/completions", R_CHAT},
    {"/v1/completions", "POST", "/v1/completions", R_CMPL},
    {"/completions", "POST", "/v1/completions", R_CMPL},
    {"/completion", "POST", "/completion", R_NATIVE},
    {"/infill", "POST", "/infill", R_INFILL},
    {"/slots", "GET", "/slots", R_SLOTS},
    {"/v1/embeddings", "POST", "/v1/embeddings", R_EMBED_OAI},
    {"/embeddings", "POST", "/embeddings", R_EMBED_NATIVE},
    {"/embedding", "POST", "/embeddings", R_EMBED_NATIVE},
    {"/v1/rerank", "POST", "/v1/rerank", R_RERANK},
    {"/v1/reranking", "POST", "/v1/rerank", R_RERANK},
    {"/rerank", "POST", "/v1/rerank", R_RERANK},
    {"/reranking", "POST", "/v1/rerank", R_RERANK},
};

/* llama-server's and OpenAI's routes that minfer does not serve: answered 501 with what they are, so a client
 * pointed at them learns that, not "no route" (as if the path were mistyped). */
static const struct {
    const char *path, *what;
} k_not_served[] = {
    {"/v1/responses", "the Responses API"},
    {"/v1/messages", "the Anthropic Messages API"},
    {"/v1/messages/count_tokens", "the Anthropic Messages API"},
    {"/lora-adapters", "LoRA adapters"},
};

static const char *not_served(const char *url) {
    for (size_t i = 0; i < sizeof k_not_served / sizeof k_not_served[0]; i++)
        if (!strcmp(k_not_served[i].path, url)) return k_not_served[i].what;
    return NULL;
}

/* A server generates, embeds (--embeddings) or ranks (--rerank, or --embeddings on a reranker): a request of
 * another kind learns which server this is and how to start the one it needs (llama-server's split). */
static bool served_here(mf_server *s, int kind, const char *url, mf_srv_answer *a) {
    const bool embed = kind == R_EMBED_OAI || kind == R_EMBED_NATIVE, rank = kind == R_RERANK;
    const bool gen = kind == R_CHAT || kind == R_CMPL || kind == R_NATIVE || kind == R_INFILL;
    if (!embed && !rank && !gen) return true;
    if ((embed || rank) && s->o.embeddings && !need_model(s, a)) return false; /* ranking is known once loaded */
    const char *is = !s->o.embeddings ? "generates text"
                     : s->ranking     ? "ranks documents (--rerank: POST /v1/rerank)"
                                      : "computes embeddings (--embeddings)";
    const char *need = NULL;
    if (embed && (!s->o.embeddings || s->ranking))
        need = "embeddings need a server started with --embeddings on an embedding model such as Qwen3-Embedding "
               "(a reranker's own pooling is rank; --pooling mean|cls|last overrides it)";
    else if (rank && !s->ranking)
        need = "reranking needs a server started with --rerank on a reranker such as Qwen3-Reranker";
    else if (gen && s->o.embeddings)
        need = "text generation needs a server started without --embeddings or --rerank";
    if (!need) return true;
    mf_srv_answer_error(a, 501, "not_supported_error", "", "this server %s: %s is not served here; %s", is, url, need);
    return false;
}

void mf_srv_route(mf_server *s, const char *method, const char *url, const char *action, const char *body, size_t len,
                  int fd, mf_srv_answer *a, mf_srv_job **stream_job, const char **label) {
    *stream_job = NULL;
    const route *hit = NULL;
    const char *allow = NULL; /* the method the path takes, when the path exists */
    const char *what;         /* a route minfer does not serve: what it is */
    for (size_t i = 0; i < sizeof k_routes / sizeof k_routes[0]; i++) {
        if (strcmp(k_routes[i].path, url)) continue;
        allow = k_routes[i].method;
        if (!strcmp(k_routes[i].method, method)) hit = &k_routes[i];
    }
    if (!strncmp(url, "/slots/", 7)) {
        *label = "/slots";
        if (!strcmp(method, "POST") && s->o.embeddings) {
            mf_srv_answer_error(a, 501, "not_supported_error", "action",
                                "this server computes embeddings (--embeddings) and keeps no slot state to save, "
                                "restore or erase");
            return;
        }
        if (!strcmp(method, "POST")) {
            h_slots(s, method, url, action, body, len, fd, a);
            return;
        }
        allow = "POST";
    }
    if (!hit) {
        if (allow) {
            *label = "method_not_allowed";
            mf_srv_answer_error(a, 405, "invalid_request_error", "", "%s is not allowed on %s (use %s)", method, url,
                                allow);
            a->hdr_name = "Allow", a->hdr_value = allow;
        } else if ((what = not_served(url))) {
            *label = "not_implemented";
            mf_srv_answer_error(a, 501, "not_supported_error", "",
                                "minfer serves text generation; %s (%s) is not implemented: use POST "
                                "/v1/chat/completions, /v1/completions or /completion",
                                what, url);
        } else {
            *label = "not_found";
            mf_srv_answer_error(a, 404, "not_found_error", "",
                                "there is no route %s %.200s (see GET /v1/models, POST /v1/chat/completions, ...)",
                                method, url);
        }
        return;
    }
    *label = hit->label;
    if (!served_here(s, hit->kind, url, a)) return;
    switch (hit->kind) {
    case R_HEALTH: h_health(s, a); break;
    case R_METRICS: h_metrics(s, a); break;
    case R_MODELS: h_models(s, a); break;
    case R_PROPS: h_props(s, a); break;
    case R_TOKENIZE: h_tokenize(s, body, len, a); break;
    case R_DETOKENIZE: h_detokenize(s, body, len, a); break;
    case R_TEMPLATE: h_apply_template(s, body, len, a); break;
    case R_CHAT: h_generate(s, MF_SRV_CHAT, body, len, fd, a, stream_job); break;
    case R_CMPL: h_generate(s, MF_SRV_COMPLETION, body, len, fd, a, stream_job); break;
    case R_NATIVE: h_generate(s, MF_SRV_NATIVE, body, len, fd, a, stream_job); break;
    case R_INFILL: h_generate(s, MF_SRV_INFILL, body, len, fd, a, stream_job); break;
    case R_SLOTS: h_slots(s, method, url, action, body, len, fd, a); break;
    case R_EMBED_OAI: h_pooled(s, MF_JOB_EMBED, true, body, len, fd, a); break;
    case R_EMBED_NATIVE: h_pooled(s, MF_JOB_EMBED, false, body, len, fd, a); break;
    case R_RERANK: h_pooled(s, MF_JOB_RERANK, false, body, len, fd, a); break;
    }
}
