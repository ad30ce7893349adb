/* Public API: thin wrappers over src/tok (tokenize, detokenize, streaming detokenizer, chat). */
#include "engine/engine_impl.h"

#include "tok/tok.h"

#include <stdlib.h>
#include <string.h>

static int need_tok(const mf_model *m, mf_error *err) {
    if (m->tok) return 0;
    return mf_err(err, MF_E_UNSUPPORTED, "model '%s' has no usable tokenizer: %s; give token ids instead (--tokens)",
                  m->path, m->tok_why);
}

int mf_tokenize(const mf_model *model, const char *text, size_t len, bool add_special, bool parse_special,
                mf_token **out, int32_t *n_out, mf_error *err) {
    *out = NULL;
    *n_out = 0;
    int rc = need_tok(model, err);
    if (rc) return rc;
    mf_tok_ids ids = {0};
    unsigned flags = (add_special ? MF_TOK_ADD_BOS : 0) | (parse_special ? MF_TOK_PARSE_SPECIAL : 0);
    rc = mf_tok_encode(model->tok, text, len, flags, &ids, err);
    if (rc) {
        free(ids.ids);
        return rc;
    }
    if (ids.n > INT32_MAX) {
        free(ids.ids);
        return mf_err(err, MF_E_RANGE, "text gives %zu tokens, more than an int32 count", ids.n);
    }
    *out = ids.ids;
    *n_out = (int32_t)ids.n;
    return 0;
}

int mf_detokenize(const mf_model *model, const mf_token *ids, int32_t n, char **out, size_t *len,
                  mf_error *err) {
    *out = NULL;
    int rc = need_tok(model, err);
    if (rc) return rc;
    return mf_tok_decode(model->tok, ids, (size_t)MF_MAX(n, 0), 0, out, len, err);
}

struct mf_detok_stream {
    mf_tok_stream s;
};

int mf_detok_stream_new(const mf_model *model, mf_detok_stream **out, mf_error *err) {
    *out = NULL;
    int rc = need_tok(model, err);
    if (rc) return rc;
    mf_detok_stream *d = calloc(1, sizeof *d);
    if (!d) return mf_err(err, MF_E_NOMEM, "out of memory");
    mf_tok_stream_init(&d->s, model->tok, 0);
    *out = d;
    return 0;
}

int mf_detok_stream_push(mf_detok_stream *s, mf_token id, const char **piece, size_t *len, mf_error *err) {
    return mf_tok_stream_push(&s->s, id, piece, len, err);
}

int mf_detok_stream_flush(mf_detok_stream *s, const char **piece, size_t *len, mf_error *err) {
    return mf_tok_stream_flush(&s->s, piece, len, err);
}

void mf_detok_stream_free(mf_detok_stream *s) {
    if (!s) return;
    mf_tok_stream_free(&s->s);
    free(s);
}

mf_chat_params mf_chat_default_params(void) {
    return (mf_chat_params){.add_generation_prompt = true, .template_name = NULL, .enable_thinking = -1};
}

/* The format to render with: the caller's explicit choice, else the model's recognised template. */
static int resolve_chat_format(const mf_model *model, const char *name, mf_chat_format *fmt, mf_error *err) {
    int rc;
    if (name && (rc = mf_chat_format_parse(name, fmt, err))) return rc; /* "" is no name: refused */
    if (name && *fmt != MF_CHAT_AUTO) return 0;
    const char *tmpl = mf_tok_chat_template(model->tok);
    if (!tmpl || !*tmpl)
        return mf_err(err, MF_E_UNSUPPORTED,
                      "model '%s' has no chat template (tokenizer.chat_template); pass --chat-template chatml "
                      "to render plain ChatML",
                      model->path);
    return mf_chat_detect(tmpl, strlen(tmpl), fmt, err);
}

int mf_chat_apply_with(const mf_model *model, const mf_chat_message *msgs, int32_t n_msgs,
                       const mf_chat_params *params, char **out, mf_error *err) {
    *out = NULL;
    int rc = need_tok(model, err);
    if (rc) return rc;
    mf_chat_params p = params ? *params : mf_chat_default_params();
    mf_chat_format fmt = MF_CHAT_AUTO;
    if ((rc = resolve_chat_format(model, p.template_name, &fmt, err))) return rc;
    /* only Qwen3's template reads enable_thinking: a switch the template ignores is refused, not dropped */
    if (p.enable_thinking >= 0 && fmt != MF_CHAT_QWEN3)
        return mf_err(err, MF_E_UNSUPPORTED,
                      "--think %s given but the chat template '%s' has no thinking switch (only qwen3 has; omit "
                      "--think)",
                      p.enable_thinking ? "on" : "off", mf_chat_format_name(fmt));
    mf_chat_msg *m = calloc((size_t)MF_MAX(n_msgs, 1), sizeof *m);
    if (!m) return mf_err(err, MF_E_NOMEM, "out of memory");
    for (int32_t i = 0; i < n_msgs; i++) {
        m[i].role = msgs[i].role;
        m[i].content = msgs[i].content;
        m[i].tool_calls = msgs[i].tool_calls;
        m[i].n_tool_calls = (size_t)MF_MAX(msgs[i].n_tool_calls, 0);
    }
    mf_chat_opts opts = {.add_generation_prompt = p.add_generation_prompt,
                         .enable_thinking = p.enable_thinking,
                         .tools = p.tools,
                         .n_tools = (size_t)MF_MAX(p.n_tools, 0)};
    size_t len = 0;
    rc = mf_chat_render(fmt, m, (size_t)MF_MAX(n_msgs, 0), &opts, out, &len, err);
    free(m);
    return rc;
}

int mf_chat_apply(const mf_model *model, const mf_chat_message *msgs, int32_t n_msgs,
                  bool add_generation_prompt, char **out, mf_error *err) {
    mf_chat_params p = mf_chat_default_params();
    p.add_generation_prompt = add_generation_prompt;
    return mf_chat_apply_with(model, msgs, n_msgs, &p, out, err);
}
