/* A multi-turn conversation over one generator (include/minfer.h, mf_conv): each turn renders the whole
 * conversation with the model's template, feeds only what the cache does not hold yet, and makes room
 * by dropping the oldest whole turns after the system prompt (context shift).  Why text diffs and not a
 * token compare: a reply's tokens are what the model sampled, which need not be what the tokenizer would
 * make of the same text, so re-tokenizing the conversation would re-prefill every reply. */
#include "engine/engine_impl.h"

#include "core/core.h"

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>

typedef struct {
    char *role, *content;
    int32_t start; /* user turns: the token index where the turn starts in the sequence */
} msg;

struct mf_conv {
    mf_gen *g;
    const mf_model *model;
    mf_conv_params p;
    char *system;
    msg *m;
    int32_t n_m, cap_m, n_keep; /* n_keep: tokens of the system part, never dropped */
    char *text;                 /* the rendered text the sequence stands for; NULL: unknown */
    char *reply;                /* a loaded session's last reply (else the generator's turn text) */
};

mf_conv_params mf_conv_default_params(void) {
    mf_conv_params p = {.chat = mf_chat_default_params()};
    return p;
}

void mf_conv_free(mf_conv *c) {
    if (!c) return;
    for (int32_t i = 0; i < c->n_m; i++) {
        free(c->m[i].role);
        free(c->m[i].content);
    }
    free(c->m);
    free(c->system);
    free(c->text);
    free(c->reply);
    free(c);
}

static int push_msg(mf_conv *c, const char *role, const char *content, size_t len, mf_error *err) {
    if (c->n_m == c->cap_m) {
        int32_t nc = c->cap_m ? c->cap_m * 2 : 8;
        msg *q = realloc(c->m, sizeof *q * (size_t)nc);
        if (!q) return mf_err(err, MF_E_NOMEM, "conversation: out of memory");
        c->m = q;
        c->cap_m = nc;
    }
    msg *m = &c->m[c->n_m];
    m->role = strdup(role);
    m->content = strndup(content, len);
    m->start = -1;
    if (!m->role || !m->content) {
        free(m->role);
        free(m->content);
        return mf_err(err, MF_E_NOMEM, "conversation: out of memory");
    }
    c->n_m++;
    return 0;
}

static void pop_msg(mf_conv *c) {
    c->n_m--;
    free(c->m[c->n_m].role);
    free(c->m[c->n_m].content);
}

int mf_conv_new(mf_gen *g, const mf_conv_params *params, mf_conv **out, mf_error *err) {
    *out = NULL;
    mf_gen_stats st;
    mf_gen_get_stats(g, &st);
    if (st.n_tokens)
        return mf_err(err, MF_E_INVAL, "conversation: the generator's sequence already holds %d tokens (start from "
                      "an empty one)", st.n_tokens);
    mf_conv *c = calloc(1, sizeof *c);
    if (!c) return mf_err(err, MF_E_NOMEM, "conversation: out of memory");
    c->g = g;
    c->model = mf_gen_model_of(g);
    c->p = params ? *params : mf_conv_default_params();
    int rc = 0;
    if (c->p.system) {
        if (!(c->system = strdup(c->p.system))) rc = mf_err(err, MF_E_NOMEM, "conversation: out of memory");
        else rc = push_msg(c, "system", c->system, strlen(c->system), err);
    }
    c->p.system = c->system;
    if (rc) {
        mf_conv_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

int32_t mf_conv_n_turns(const mf_conv *c) {
    int32_t n = 0;
    for (int32_t i = 0; i < c->n_m; i++) n += !strcmp(c->m[i].role, "user");
    return n;
}

/* Renders m[0, n) (mf_chat_message views of them). */
static int render(mf_conv *c, int32_t n, bool add_generation_prompt, char **out, mf_error *err) {
    mf_chat_message *v = malloc(sizeof *v * (size_t)MF_MAX(n, 1));
    if (!v) return mf_err(err, MF_E_NOMEM, "conversation: out of memory");
    for (int32_t i = 0; i < n; i++) v[i] = (mf_chat_message){.role = c->m[i].role, .content = c->m[i].content};
    mf_chat_params cp = c->p.chat;
    cp.add_generation_prompt = add_generation_prompt;
    int rc = mf_chat_apply_with(c->model, v, n, &cp, out, err);
    free(v);
    return rc;
}

/* Appends the tokens of text (special token texts recognised) to *ids. */
static int tok_append(const mf_model *model, const char *text, bool add_special, mf_token **ids, int32_t *n,
                      mf_error *err) {
    mf_token *t = NULL;
    int32_t nt = 0;
    int rc = mf_tokenize(model, text, strlen(text), add_special, true, &t, &nt, err);
    if (rc) return rc;
    mf_token *q = realloc(*ids, sizeof *q * (size_t)MF_MAX(*n + nt, 1));
    if (!q) {
        free(t);
        return mf_err(err, MF_E_NOMEM, "conversation: out of memory");
    }
    memcpy(q + *n, t, sizeof *t * (size_t)nt);
    *ids = q;
    *n += nt;
    free(t);
    return 0;
}

static bool starts_with(const char *s, const char *p) {
    return !strncmp(s, p, strlen(p));
}

/* The text of the system part of a first-turn rendering f: what stays when turns are dropped. */
static size_t system_part(mf_conv *c, const char *f, mf_error *err) {
    if (c->system) {
        char *s = NULL;
        size_t n = 0;
        if (!render(c, 1, false, &s, err) && starts_with(f, s)) n = strlen(s);
        free(s);
        return n;
    }
    /* no system message: what the template put before the user turn (Qwen2.5's default system) */
    const char *u = strstr(f, "<|im_start|>user");
    return u ? (size_t)(u - f) : 0;
}

/* The tokens of a conversation rendered whole (nothing cached: the first turn, or a session re-rendered
 * from its text): the system part and each user turn (from its "<|im_start|>") tokenized apart, so the
 * system part's token count and every turn's start are exact. */
static int first_turn(mf_conv *c, const char *f, mf_token **ids, int32_t *n, int32_t *n_keep, mf_error *err) {
    mf_error scratch = {0};
    size_t sl = system_part(c, f, &scratch);
    int rc = 0;
    *n_keep = 0;
    if (sl) {
        char *sys = strndup(f, sl);
        if (!sys) return mf_err(err, MF_E_NOMEM, "conversation: out of memory");
        rc = tok_append(c->model, sys, true, ids, n, err);
        free(sys);
        if (rc) return rc;
        *n_keep = *n;
    }
    const char *p = f + sl;
    int32_t u = 0; /* the user message whose start comes next */
    while (*p) {
        const char *next = strstr(p + 1, "<|im_start|>user");
        size_t len = next ? (size_t)(next - p) : strlen(p);
        if (starts_with(p, "<|im_start|>user")) {
            while (u < c->n_m && strcmp(c->m[u].role, "user")) u++;
            if (u < c->n_m) c->m[u++].start = *n;
        }
        char *seg = strndup(p, len);
        if (!seg) return mf_err(err, MF_E_NOMEM, "conversation: out of memory");
        rc = tok_append(c->model, seg, *n == 0, ids, n, err);
        free(seg);
        if (rc) return rc;
        p += len;
    }
    return 0;
}

/* What a turn adds after the cached text: the rest of the rendering f after c->text and, when the turn
 * follows a reply, after the reply's text (reply_len bytes of the last assistant message).  The tokens
 * that close the reply (e.g. "<|im_end|>\n") and those of the new turn (from its "<|im_start|>") are
 * tokenized apart so *turn_at is the exact token where the new turn starts; an end-of-generation token
 * the reply already sampled is not fed again.  Returns false when f does not start with what is cached. */
static bool diff_turn(mf_conv *c, const char *f, const char *reply, mf_token **ids, int32_t *n, int32_t *turn_at,
                      int *rc, mf_error *err) {
    size_t lt = strlen(c->text);
    if (!starts_with(f, c->text) || (reply && !starts_with(f + lt, reply))) return false;
    const char *rest = f + lt + (reply ? strlen(reply) : 0);
    const char *turn = strstr(rest, "<|im_start|>");
    size_t nclose = turn ? (size_t)(turn - rest) : 0;
    char *closing = strndup(rest, nclose);
    if (!closing) {
        *rc = mf_err(err, MF_E_NOMEM, "conversation: out of memory");
        return true;
    }
    *rc = tok_append(c->model, closing, false, ids, n, err);
    free(closing);
    if (*rc) return true;
    int32_t nt;
    const mf_token *t = mf_gen_tokens(c->g, &nt);
    if (reply && *n && nt && t[nt - 1] == (*ids)[0] && mf_model_is_eog(c->model, t[nt - 1])) {
        memmove(*ids, *ids + 1, sizeof **ids * (size_t)(*n - 1));
        (*n)--;
    }
    *turn_at = nt + *n;
    *rc = tok_append(c->model, rest + nclose, false, ids, n, err);
    return true;
}

/* Removes messages [a, b) (whole turns). */
static void remove_msgs(mf_conv *c, int32_t a, int32_t b) {
    for (int32_t i = a; i < b; i++) {
        free(c->m[i].role);
        free(c->m[i].content);
    }
    memmove(c->m + a, c->m + b, sizeof *c->m * (size_t)(c->n_m - b));
    c->n_m -= b - a;
}

int mf_conv_user(mf_conv *c, const char *text, mf_conv_turn *info, mf_error *err) {
    mf_conv_turn dummy;
    if (!info) info = &dummy;
    memset(info, 0, sizeof *info);
    if (!text) return mf_err(err, MF_E_INVAL, "conversation: no user text");
    mf_token *ids = NULL, *alt = NULL;
    int32_t n_ids = 0, n_alt = 0, keep = c->n_keep;
    char *f = NULL, *f2 = NULL;
    int rc = 0;
    /* the generator's last reply becomes an assistant message */
    bool replied = c->n_m && !strcmp(c->m[c->n_m - 1].role, "user");
    if (replied) {
        size_t len;
        const char *reply = c->reply ? c->reply : mf_gen_turn_text(c->g, &len);
        if (c->reply) len = strlen(c->reply);
        if ((rc = push_msg(c, "assistant", reply, len, err))) goto out;
    }
    if ((rc = push_msg(c, "user", text, strlen(text), err))) goto out;
    int32_t me = c->n_m - 1;
    if ((rc = render(c, c->n_m, true, &f, err))) goto undo;
    int32_t n_tok;
    const mf_token *toks = mf_gen_tokens(c->g, &n_tok);
    int32_t base = n_tok; /* tokens kept before this turn's */
    bool first = n_tok == 0;
    int32_t limit = mf_gen_n_ctx(c->g);
    int32_t reserve = c->p.n_reserve > 0 ? c->p.n_reserve : limit / 4;
    reserve = MF_MIN(reserve, limit / 2);
    if (first) { /* nothing cached: render it all; old turns that do not fit go before anything is fed */
        int32_t n_whole = -1;
        for (;;) {
            for (int32_t i = 0; i < c->n_m; i++) c->m[i].start = -1;
            if ((rc = first_turn(c, f, &ids, &n_ids, &keep, err))) goto undo;
            if (n_whole < 0) n_whole = n_ids;
            info->n_dropped_tokens = n_whole - n_ids; /* what the dropped turns would have taken */
            if (c->m[me].start < 0) c->m[me].start = keep;
            if (n_ids + reserve <= limit || mf_conv_n_turns(c) == 1) break;
            int32_t u0 = 0, u1;
            while (strcmp(c->m[u0].role, "user")) u0++;
            for (u1 = u0 + 1; strcmp(c->m[u1].role, "user"); u1++) {}
            info->n_dropped_turns++;
            remove_msgs(c, u0, u1);
            me = c->n_m - 1;
            free(ids);
            ids = NULL;
            n_ids = 0;
            free(f);
            f = NULL;
            if ((rc = render(c, c->n_m, true, &f, err))) goto out;
        }
        if (n_ids > limit) goto too_big;
    } else if (c->text && diff_turn(c, f, replied ? c->m[me - 1].content : NULL, &ids, &n_ids, &c->m[me].start,
                                    &rc, err)) {
        if (rc) goto undo;
    } else { /* re-rendered differently: keep the common token prefix, prefill the rest */
        mf_token *all = NULL;
        int32_t n_all = 0;
        if ((rc = tok_append(c->model, f, true, &all, &n_all, err))) goto undo;
        int32_t l = 0;
        while (l < n_all && l < n_tok && all[l] == toks[l]) l++;
        if (l > n_all) l = n_all; /* cannot happen with a system part that renders the same */
        n_ids = n_all - l;
        ids = malloc(sizeof *ids * (size_t)MF_MAX(n_ids, 1));
        if (!ids) {
            free(all);
            rc = mf_err(err, MF_E_NOMEM, "conversation: out of memory");
            goto undo;
        }
        memcpy(ids, all + l, sizeof *ids * (size_t)n_ids);
        free(all);
        base = l;
        info->rerendered = true;
        for (int32_t i = 0; i < me; i++)
            if (c->m[i].start > l) c->m[i].start = l;
        c->m[me].start = l;
    }
    /* room: the new tokens plus the reply's reserve; else drop the oldest whole turns */
    mf_gen_stats st;
    mf_gen_get_stats(c->g, &st);
    int32_t cut_to = -1, dropped = 0, n_cached = st.n_cached, u0 = -1;
    if (!first && base + n_ids + reserve > limit) {
        /* turns are [start of user i, start of the next user turn); the last old one ends at base */
        for (int32_t i = 0; i < me && u0 < 0; i++)
            if (!strcmp(c->m[i].role, "user")) u0 = i;
        for (int32_t i = u0 + 1; u0 >= 0 && i < me; i++) {
            if (strcmp(c->m[i].role, "user")) continue;
            int32_t d = c->m[i].start - c->m[u0].start;
            if (c->m[i].start <= MF_MIN(base, n_cached) && base - d + n_ids + reserve <= limit) {
                cut_to = i;
                dropped = d;
                break;
            }
        }
        if (cut_to < 0 && u0 >= 0) { /* every earlier turn goes: start over after the system part */
            mf_chat_message v[2];
            int32_t nv = 0;
            if (c->system) v[nv++] = (mf_chat_message){.role = "system", .content = c->system};
            v[nv++] = (mf_chat_message){.role = "user", .content = c->m[me].content};
            mf_chat_params cp = c->p.chat;
            cp.add_generation_prompt = true;
            if ((rc = mf_chat_apply_with(c->model, v, nv, &cp, &f2, err))) goto undo;
            mf_error scratch = {0};
            if ((rc = tok_append(c->model, f2 + system_part(c, f2, &scratch), false, &alt, &n_alt, err)))
                goto undo;
            if (keep + n_alt > limit) goto too_big;
            cut_to = me;
            dropped = base - keep;
        } else if (cut_to < 0) {
            goto too_big;
        }
    } else if (base + n_ids > limit) {
        goto too_big;
    }
    /* apply: nothing above changed the sequence */
    if (info->rerendered && (rc = mf_gen_truncate(c->g, base, err))) goto undo;
    if (cut_to >= 0) {
        bool all = cut_to == me;
        int32_t p0 = c->m[u0].start;
        rc = all ? mf_gen_truncate(c->g, keep, err) : mf_gen_drop(c->g, p0, c->m[cut_to].start, err);
        if (rc) goto undo;
        if (all) {
            free(ids);
            ids = alt;
            n_ids = n_alt;
            alt = NULL;
        }
        for (int32_t i = u0; i < cut_to; i++) info->n_dropped_turns += !strcmp(c->m[i].role, "user");
        info->n_dropped_tokens = dropped;
        remove_msgs(c, u0, cut_to);
        me = c->n_m - 1;
        for (int32_t i = u0; i <= me; i++)
            if (c->m[i].start >= 0) c->m[i].start = all ? keep : c->m[i].start - dropped;
        free(f);
        f = NULL;
        if ((rc = render(c, c->n_m, true, &f, err))) goto out; /* the sequence changed: no undo */
    }
    if ((rc = mf_gen_feed(c->g, ids, n_ids, err))) goto out;
    c->n_keep = keep;
    free(c->reply);
    c->reply = NULL;
    free(c->text);
    c->text = f;
    f = NULL;
    int32_t nt;
    mf_gen_tokens(c->g, &nt);
    info->n_new = n_ids;
    info->n_reused = nt - n_ids;
    goto out;
too_big:
    rc = mf_err(err, MF_E_RANGE,
                "the message needs %d tokens and the system prompt %d; they do not fit the context of %d "
                "(raise -c/--ctx-size, or send a shorter message)",
                first ? n_ids - keep : (n_alt ? n_alt : n_ids), keep, limit);
undo: /* the reply is taken again from the generator by the next call */
    pop_msg(c);
    if (replied) pop_msg(c);
out:
    free(ids);
    free(alt);
    free(f);
    free(f2);
    return rc;
}

/* ---------------- session files ---------------- */
/* The conversation as JSON application bytes: {"format":"minfer-chat","version":1,"n_keep":..,
 * "text":..|null,"reply":..|null,"messages":[{"role","content","start"}...]}. */
static char *conv_json(const mf_conv *c) {
    cJSON *o = cJSON_CreateObject(), *ms = cJSON_CreateArray();
    if (!o || !ms) {
        cJSON_Delete(o);
        cJSON_Delete(ms);
        return NULL;
    }
    cJSON_AddStringToObject(o, "format", "minfer-chat");
    cJSON_AddNumberToObject(o, "version", 1);
    cJSON_AddNumberToObject(o, "n_keep", c->n_keep);
    if (c->text) cJSON_AddStringToObject(o, "text", c->text);
    else cJSON_AddNullToObject(o, "text");
    bool pending = c->n_m && !strcmp(c->m[c->n_m - 1].role, "user");
    size_t len = 0;
    const char *reply = c->reply ? c->reply : mf_gen_turn_text(c->g, &len);
    if (pending) cJSON_AddStringToObject(o, "reply", reply);
    else cJSON_AddNullToObject(o, "reply");
    for (int32_t i = 0; i < c->n_m; i++) {
        cJSON *m = cJSON_CreateObject();
        if (!m) break;
        cJSON_AddStringToObject(m, "role", c->m[i].role);
        cJSON_AddStringToObject(m, "content", c->m[i].content);
        cJSON_AddNumberToObject(m, "start", c->m[i].start);
        cJSON_AddItemToArray(ms, m);
    }
    cJSON_AddItemToObject(o, "messages", ms);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

int mf_conv_save(mf_conv *c, const char *path, mf_error *err) {
    char *app = conv_json(c);
    if (!app) return mf_err(err, MF_E_NOMEM, "conversation: out of memory for the session's text");
    int32_t n;
    const mf_token *t = mf_gen_tokens(c->g, &n);
    int rc = mf_session_save(mf_gen_context_of(c->g), mf_gen_seq_of(c->g), t, n, mf_gen_sampler(c->g), app,
                             strlen(app), path, err);
    free(app);
    return rc;
}

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The conversation from its JSON (an empty conversation: messages replaced). */
static int conv_from_json(mf_conv *c, const char *app, size_t len, const char *path, mf_error *err) {
    cJSON *o = cJSON_ParseWithLength(app, len);
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(o, "messages"), *m;
    const char *fmt = jstr(o, "format");
    if (!o || !fmt || strcmp(fmt, "minfer-chat") || !cJSON_IsArray(ms)) {
        cJSON_Delete(o);
        return mf_err(err, MF_E_FORMAT, "the session file '%s' holds no minfer chat conversation (written by "
                      "another program? give another --session file)", path);
    }
    while (c->n_m) pop_msg(c);
    int rc = 0;
    cJSON_ArrayForEach(m, ms) {
        const char *role = jstr(m, "role"), *content = jstr(m, "content");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(m, "start");
        if (!role || !content || !cJSON_IsNumber(st)) {
            rc = mf_err(err, MF_E_FORMAT, "the session file '%s': message %d has no role, content or start", path,
                        c->n_m);
            break;
        }
        if ((rc = push_msg(c, role, content, strlen(content), err))) break;
        c->m[c->n_m - 1].start = (int32_t)st->valuedouble;
    }
    free(c->system); /* the file's system message is the conversation's */
    c->system = c->n_m && !strcmp(c->m[0].role, "system") ? strdup(c->m[0].content) : NULL;
    c->p.system = c->system;
    const cJSON *nk = cJSON_GetObjectItemCaseSensitive(o, "n_keep");
    c->n_keep = cJSON_IsNumber(nk) ? (int32_t)nk->valuedouble : 0;
    free(c->text);
    free(c->reply);
    c->text = jstr(o, "text") ? strdup(jstr(o, "text")) : NULL;
    c->reply = jstr(o, "reply") ? strdup(jstr(o, "reply")) : NULL;
    cJSON_Delete(o);
    return rc;
}

int mf_conv_load(mf_conv *c, const char *path, bool *rerendered, char *reason, size_t reason_cap, mf_error *err) {
    *rerendered = false;
    if (reason_cap) reason[0] = 0;
    int32_t n_tok;
    mf_gen_tokens(c->g, &n_tok);
    if (n_tok || mf_conv_n_turns(c))
        return mf_err(err, MF_E_INVAL, "conversation: a session loads into a new conversation (this one has %d "
                      "turns)", mf_conv_n_turns(c));
    mf_context *ctx = mf_gen_context_of(c->g);
    mf_seq_id seq = mf_gen_seq_of(c->g);
    mf_token *t = NULL;
    int32_t n = 0;
    void *app = NULL;
    size_t alen = 0;
    mf_error lerr = {0};
    int rc = mf_session_load(ctx, seq, path, &t, &n, mf_gen_sampler(c->g), &app, &alen, &lerr);
    if (rc == MF_E_NOTFOUND || rc == MF_E_IO || rc == MF_E_INVAL) {
        if (err) *err = lerr;
        return rc;
    }
    if (rc) { /* this run cannot take the cache: the conversation's text can still be re-rendered */
        if (reason_cap) snprintf(reason, reason_cap, "%s", lerr.msg);
        if ((rc = mf_session_read_app(path, &app, &alen, err))) return rc;
        rc = conv_from_json(c, app, alen, path, err);
        free(app);
        free(c->text); /* nothing is cached: the next turn renders it all */
        c->text = NULL;
        if (!rc) *rerendered = true;
        return rc;
    }
    if (!(rc = conv_from_json(c, app, alen, path, err))) {
        mf_pos pm = mf_seq_pos_max(ctx, seq);
        rc = mf_gen_restore(c->g, t, n, pm + 1, err);
    }
    if (rc) mf_seq_rm(ctx, seq, -1, -1);
    free(t);
    free(app);
    return rc;
}
