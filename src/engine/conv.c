/* A multi-turn conversation over one generator (include/minfer.h, mf_conv): each turn renders the whole
 * conversation with the model's template, feeds only what the cache does not hold yet, and makes room
 * by dropping the oldest whole turns after the system prompt (context shift).  Why text diffs and not a
 * token compare: a reply's tokens are what the model sampled, which need not be what the tokenizer would
 * make of the same text, so re-tokenizing the conversation would re-prefill every reply. */
#include "engine/engine_impl.h"

#include "core/core.h"

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
    for (int32_t i = 0; i < n; i++) v[i] = (mf_chat_message){c->m[i].role, c->m[i].content};
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

/* The tokens of a first turn (nothing cached): the system part and the rest tokenized apart, so the
 * system part's token count is exact. */
static int first_turn(mf_conv *c, const char *f, mf_token **ids, int32_t *n, int32_t *n_keep, mf_error *err) {
    mf_error scratch = {0};
    size_t sl = system_part(c, f, &scratch);
    char *sys = strndup(f, sl);
    if (!sys) return mf_err(err, MF_E_NOMEM, "conversation: out of memory");
    int rc = sl ? tok_append(c->model, sys, true, ids, n, err) : 0;
    free(sys);
    *n_keep = *n;
    if (!rc) rc = tok_append(c->model, f + sl, sl == 0, ids, n, err);
    return rc;
}

/* The generator's last reply becomes an assistant message; returns the tokens that close it the way
 * the template renders a finished reply (e.g. "<|im_end|>\n", without an end token already sampled). */
static int record_reply(mf_conv *c, mf_token **close, int32_t *n_close, mf_error *err) {
    size_t len;
    const char *reply = mf_gen_turn_text(c->g, &len);
    int rc = push_msg(c, "assistant", reply, len, err);
    if (rc || !c->text) return rc;
    char *r = NULL;
    if ((rc = render(c, c->n_m, false, &r, err))) return rc;
    size_t lt = strlen(c->text);
    const char *content = c->m[c->n_m - 1].content;
    if (!starts_with(r, c->text) || !starts_with(r + lt, content)) { /* the template rewrote something */
        free(r);
        free(c->text);
        c->text = NULL;
        return 0;
    }
    if ((rc = tok_append(c->model, r + lt + strlen(content), false, close, n_close, err))) {
        free(r);
        return rc;
    }
    int32_t nt;
    const mf_token *t = mf_gen_tokens(c->g, &nt);
    if (*n_close && nt && t[nt - 1] == (*close)[0] && mf_model_is_eog(c->model, t[nt - 1])) {
        memmove(*close, *close + 1, sizeof **close * (size_t)(*n_close - 1));
        (*n_close)--;
    }
    free(c->text);
    c->text = r;
    return 0;
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
    mf_token *close = NULL, *ids = NULL, *alt = NULL;
    int32_t n_close = 0, n_ids = 0, n_alt = 0, keep = c->n_keep;
    char *f = NULL, *f2 = NULL;
    int rc = 0;
    if (c->n_m && !strcmp(c->m[c->n_m - 1].role, "user") && (rc = record_reply(c, &close, &n_close, err)))
        goto out;
    if ((rc = push_msg(c, "user", text, strlen(text), err))) goto out;
    int32_t me = c->n_m - 1;
    if ((rc = render(c, c->n_m, true, &f, err))) goto undo;
    int32_t n_tok;
    const mf_token *toks = mf_gen_tokens(c->g, &n_tok);
    int32_t base = n_tok; /* tokens kept before this turn's */
    bool first = mf_conv_n_turns(c) == 1;
    if (first) {
        if ((rc = first_turn(c, f, &ids, &n_ids, &keep, err))) goto undo;
        c->m[me].start = keep;
    } else if (c->text && starts_with(f, c->text)) {
        ids = close;
        n_ids = n_close;
        close = NULL;
        c->m[me].start = n_tok + n_ids;
        if ((rc = tok_append(c->model, f + strlen(c->text), false, &ids, &n_ids, err))) goto undo;
    } else { /* re-rendered differently: keep the common token prefix, prefill the rest */
        mf_token *all = NULL;
        int32_t n_all = 0;
        if ((rc = tok_append(c->model, f, true, &all, &n_all, err))) goto undo;
        int32_t l = 0;
        while (l < n_all && l < n_tok && all[l] == toks[l]) l++;
        l = MF_MAX(l, MF_MIN(keep, n_tok));
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
    int32_t limit = mf_gen_n_ctx(c->g);
    int32_t reserve = c->p.n_reserve > 0 ? c->p.n_reserve : limit / 4;
    reserve = MF_MIN(reserve, limit / 2);
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
            if (c->system) v[nv++] = (mf_chat_message){"system", c->system};
            v[nv++] = (mf_chat_message){"user", c->m[me].content};
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
undo:
    pop_msg(c);
out:
    free(close);
    free(ids);
    free(alt);
    free(f);
    free(f2);
    return rc;
}
