/* server/infill: the fill-in-the-middle prompt (see infill.h for the layout and the cuts). */
#include "server/infill.h"

#include "core/core.h"

#include <stdlib.h>
#include <string.h>

int32_t mf_srv_fim_window(int32_t n_batch, int32_t n_ctx) {
    return MF_MIN(MF_MAX(n_batch, 2048), n_ctx / 2);
}

static void put(mf_token *out, int32_t *at, const mf_token *t, int32_t n) {
    if (n > 0) memcpy(out + *at, t, sizeof *t * (size_t)n);
    *at += n;
}

/* the last n of t[0..len) (t may be NULL when len is 0) */
static void put_tail(mf_token *out, int32_t *at, const mf_token *t, int32_t len, int32_t n) {
    if (n > 0) put(out, at, t + (len - n), n);
}

int mf_srv_fim_layout(const mf_srv_fim *f, mf_token **out, int32_t *n) {
    const int32_t w = f->window;
    const int32_t n_pre = MF_MIN(f->n_prefix, 3 * (w / 4));
    const int32_t n_suf = MF_MIN(f->n_suffix, MF_MAX(0, w / 4 - (2 + f->n_prompt)));
    /* 64-bit: max_tokens may be up to INT32_MAX */
    const int64_t room = (int64_t)f->n_ctx - w - 2 * (int64_t)MF_MAX(f->n_predict, 0) - 4 - f->n_prompt;
    const int32_t n_ext = (int32_t)MF_MIN((int64_t)f->n_extra, MF_MAX((int64_t)0, room));
    const int32_t total = n_ext + 1 + n_pre + f->n_prompt + 1 + n_suf + 1;
    mf_token *t = malloc(sizeof *t * (size_t)total);
    if (!t) return MF_E_NOMEM;
    int32_t at = 0;
    put_tail(t, &at, f->extra, f->n_extra, n_ext); /* the extra context's end: nearest the prefix */
    t[at++] = f->pre;
    put_tail(t, &at, f->prefix, f->n_prefix, n_pre); /* the prefix's end: nearest the gap */
    put(t, &at, f->prompt, f->n_prompt);
    t[at++] = f->suf;
    put(t, &at, f->suffix, n_suf); /* the suffix's start: nearest the gap */
    t[at++] = f->mid;
    *out = t, *n = at;
    return 0;
}

/* a growing list of token ids */
typedef struct {
    mf_token *t;
    int32_t n, cap;
} ids;

static int add_ids(ids *v, const mf_token *t, int32_t n) {
    if (v->n + n > v->cap) {
        int32_t cap = MF_MAX(v->cap * 2, v->n + n + 64);
        mf_token *g = realloc(v->t, sizeof *g * (size_t)cap);
        if (!g) return MF_E_NOMEM;
        v->t = g, v->cap = cap;
    }
    put(v->t, &v->n, t, n);
    return 0;
}

/* v += the tokens of s (special tokens parsed only when asked) */
static int add_text(ids *v, const mf_model *m, const char *s, bool special, mf_error *err) {
    mf_token *t = NULL;
    int32_t n = 0;
    int rc = mf_tokenize(m, s, strlen(s), false, special, &t, &n, err);
    if (!rc) rc = add_ids(v, t, n);
    free(t);
    return rc;
}

/* A file's name line: "NAME\n" after <|file_sep|>. */
static int add_name(ids *v, const mf_model *m, mf_token sep, const char *name, mf_error *err) {
    size_t l = strlen(name);
    char *s = malloc(l + 2);
    if (!s) return MF_E_NOMEM;
    memcpy(s, name, l);
    s[l] = '\n', s[l + 1] = 0;
    int rc = add_ids(v, &sep, 1);
    if (!rc) rc = add_text(v, m, s, false, err);
    free(s);
    return rc;
}

/* The repository-level context before the FIM prefix (llama-server's: the project is "myproject", the file
 * being edited "filename"); without <|file_sep|> the chunks are joined by a "--- snippet ---" line. */
static int extra_context(const mf_model *m, const mf_model_info *in, const mf_srv_req *r, ids *v,
                         mf_error *err) {
    int rc = 0;
    if (in->fim_rep >= 0) {
        rc = add_ids(v, &in->fim_rep, 1);
        if (!rc) rc = add_text(v, m, "myproject\n", false, err);
    }
    for (int32_t i = 0; !rc && i < r->n_extra; i++) {
        rc = in->fim_sep >= 0 ? add_name(v, m, in->fim_sep, r->extra[i].filename, err)
                              : add_text(v, m, "\n\n--- snippet ---\n\n", false, err);
        if (!rc) rc = add_text(v, m, r->extra[i].text, false, err);
    }
    if (!rc && in->fim_sep >= 0) rc = add_name(v, m, in->fim_sep, "filename", err);
    return rc;
}

int mf_srv_infill_tokens(const mf_model *model, const mf_srv_req *r, int32_t n_batch, int32_t n_ctx,
                         mf_token **out, int32_t *n, mf_srv_err *e) {
    mf_model_info in;
    mf_model_get_info(model, &in);
    if (in.fim_pre < 0 || in.fim_suf < 0 || in.fim_mid < 0)
        return mf_srv_fail(e, 501, "not_supported_error", "",
                           "fill-in-the-middle is not supported by this model: it has "
                           "no%s%s%s token (a code model such as Qwen2.5-Coder has them)",
                           in.fim_pre < 0 ? " <|fim_prefix|>" : "", in.fim_suf < 0 ? " <|fim_suffix|>" : "",
                           in.fim_mid < 0 ? " <|fim_middle|>" : "");
    ids x = {0}, pre = {0}, suf = {0}, pr = {0};
    mf_error err = {0};
    int rc = extra_context(model, &in, r, &x, &err);
    if (!rc) rc = add_text(&pre, model, r->input_prefix, false, &err);
    if (!rc) rc = add_text(&suf, model, r->input_suffix, false, &err);
    if (!rc) rc = add_text(&pr, model, r->prompt, true, &err); /* "" when the request has none */
    const mf_srv_fim f = {x.t,        pre.t,        pr.t,       suf.t,
                          x.n,        pre.n,        pr.n,       suf.n,
                          in.fim_pre, in.fim_suf,   in.fim_mid, mf_srv_fim_window(n_batch, n_ctx),
                          n_ctx,      r->max_tokens};
    if (!rc) rc = mf_srv_fim_layout(&f, out, n);
    free(x.t), free(pre.t), free(suf.t), free(pr.t);
    if (rc == MF_E_NOMEM)
        return mf_srv_fail(e, 500, "server_error", "", "out of memory building the infill prompt");
    if (rc)
        return mf_srv_fail(e, 400, "invalid_request_error",
                           r->kind == MF_SRV_INFILL ? "input_prefix" : "prompt", "%s", err.msg);
    return 0;
}
