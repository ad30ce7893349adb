/* Chat templates: recognise the model's Jinja template and render ChatML exactly as the Qwen2.5 and
 * Qwen3 templates do (system/user/assistant/tool turns, Qwen3 <think> handling, the generation prompt,
 * enable_thinking, tool definitions in the system turn and an assistant's tool calls). */
#include "tok/tok_impl.h"
#include "core/pyjson.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_cat(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

typedef struct {
    const char *p;
    size_t n;
} span;

static span sp_of(const char *s) { return (span){s, strlen(s)}; }
static span sp_lstrip_nl(span s) {
    while (s.n && s.p[0] == '\n') s.p++, s.n--;
    return s;
}
static span sp_rstrip_nl(span s) {
    while (s.n && s.p[s.n - 1] == '\n') s.n--;
    return s;
}
static const char *sp_find(span s, const char *needle, bool last) {
    size_t k = strlen(needle);
    const char *hit = NULL;
    for (size_t i = 0; i + k <= s.n; i++)
        if (!memcmp(s.p + i, needle, k)) {
            hit = s.p + i;
            if (!last) break;
        }
    return hit;
}
/* python s.split(sep)[-1] and s.split(sep)[0] */
static span sp_after_last(span s, const char *sep) {
    const char *h = sp_find(s, sep, true);
    if (!h) return s;
    size_t off = (size_t)(h - s.p) + strlen(sep);
    return (span){s.p + off, s.n - off};
}
static span sp_before_first(span s, const char *sep) {
    const char *h = sp_find(s, sep, false);
    return h ? (span){s.p, (size_t)(h - s.p)} : s;
}
static bool starts_with(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }
static bool ends_with(const char *s, const char *p) {
    size_t a = strlen(s), b = strlen(p);
    return a >= b && !memcmp(s + a - b, p, b);
}
static bool is_role(const mf_chat_msg *m, const char *r) { return m->role && !strcmp(m->role, r); }

int mf_chat_format_parse(const char *name, mf_chat_format *out, mf_error *err) {
    if (!strcmp(name, "auto")) *out = MF_CHAT_AUTO;
    else if (!strcmp(name, "chatml")) *out = MF_CHAT_CHATML;
    else if (!strcmp(name, "qwen2.5") || !strcmp(name, "qwen25")) *out = MF_CHAT_QWEN25;
    else if (!strcmp(name, "qwen3")) *out = MF_CHAT_QWEN3;
    else
        return mf_err(err, MF_E_INVAL, "unknown chat template '%s' (known: auto, chatml, qwen2.5, qwen3)", name);
    return 0;
}

const char *mf_chat_format_name(mf_chat_format f) {
    switch (f) {
    case MF_CHAT_AUTO: return "auto";
    case MF_CHAT_CHATML: return "chatml";
    case MF_CHAT_QWEN25: return "qwen2.5";
    case MF_CHAT_QWEN3: return "qwen3";
    }
    return "?";
}

/* Fingerprints: every listed piece of template text must be present (the pieces that carry the
 * behaviour rendered below), so an edited template that changes that behaviour is not claimed. */
static const char *const k_qwen3_marks[] = {
    "<|im_start|>",
    "ns.last_query_index",
    "reasoning_content",
    "message.content.split('</think>')[-1].lstrip('\\n')",
    "'\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n')",
    "enable_thinking is defined and enable_thinking is false",
    "'<think>\\n\\n</think>\\n\\n'",
};
static const char *const k_qwen25_marks[] = {
    "<|im_start|>",
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
    "'<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n'",
    "{{- '<|im_start|>assistant\\n' }}",
};

static bool has_all(const char *t, size_t len, const char *const *marks, size_t n) {
    span s = {t, len};
    for (size_t i = 0; i < n; i++)
        if (!sp_find(s, marks[i], false)) return false;
    return true;
}

int mf_chat_detect(const char *tmpl, size_t len, mf_chat_format *out, mf_error *err) {
    if (!tmpl || !len)
        return mf_err(err, MF_E_UNSUPPORTED,
                      "the model has no tokenizer.chat_template; pass --chat-template chatml to use plain ChatML");
    span s = {tmpl, len};
    if (has_all(tmpl, len, k_qwen3_marks, MF_ARRAY_LEN(k_qwen3_marks))) {
        *out = MF_CHAT_QWEN3;
        return 0;
    }
    if (has_all(tmpl, len, k_qwen25_marks, MF_ARRAY_LEN(k_qwen25_marks)) && !sp_find(s, "<think>", false)) {
        *out = MF_CHAT_QWEN25;
        return 0;
    }
    /* the template is len bytes, not a C string: quote at most that many (found by fuzz_chat) */
    return mf_err(err, MF_E_UNSUPPORTED,
                  "the model's chat template (%zu bytes, starting '%.*s') is not one this build recognises (known: "
                  "the Qwen3 and Qwen2.5 templates); pass --chat-template chatml to use plain ChatML",
                  len, (int)MF_MIN(len, 40), tmpl);
}

/* JSON text as the template's tojson writes it (transformers' json.dumps). */
static int sb_pyjson(sbuf *b, const char *json, mf_error *err) {
    char *t = NULL;
    size_t n = 0;
    int rc = mf_pyjson(json, strlen(json), &t, &n, err);
    if (!rc) sb_put(b, t, n);
    free(t);
    return rc;
}

static const char k_tools_head[] = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                                   "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char k_tools_tail[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

/* The system turn that presents the tools (both templates): the system prompt, if any, a blank line, the
 * tools. */
static int tools_turn(sbuf *b, const char *intro, const mf_chat_opts *o, mf_error *err) {
    sb_cat(b, "<|im_start|>system\n");
    if (intro) sb_cat(b, intro), sb_cat(b, "\n\n");
    sb_cat(b, k_tools_head);
    for (size_t t = 0; t < o->n_tools; t++) {
        sb_cat(b, "\n");
        int rc = sb_pyjson(b, o->tools[t], err);
        if (rc) return mf_err_prefix(err, rc, "chat render: tool %zu", t);
    }
    sb_cat(b, k_tools_tail);
    return 0;
}

/* One call as both templates write it; Qwen2.5 writes `arguments | tojson` of the parsed object (tojson),
 * Qwen3 the string as it is (its `arguments is string` branch). */
static int tool_call(sbuf *b, const mf_chat_tool_call *c, bool tojson, mf_error *err) {
    sb_cat(b, "<tool_call>\n{\"name\": \"");
    sb_cat(b, c->name);
    sb_cat(b, "\", \"arguments\": ");
    int rc = 0;
    if (tojson) rc = sb_pyjson(b, c->arguments, err);
    else sb_cat(b, c->arguments);
    sb_cat(b, "}\n</tool_call>");
    return rc;
}

static void tool_turn(sbuf *b, const mf_chat_msg *m, size_t i, size_t n) {
    if (i == 0 || !is_role(&m[i - 1], "tool")) sb_cat(b, "<|im_start|>user");
    sb_cat(b, "\n<tool_response>\n");
    sb_cat(b, m[i].content);
    sb_cat(b, "\n</tool_response>");
    if (i + 1 == n || !is_role(&m[i + 1], "tool")) sb_cat(b, "<|im_end|>\n");
}

static void plain_turn(sbuf *b, const char *role, const char *content) {
    sb_cat(b, "<|im_start|>");
    sb_cat(b, role);
    sb_cat(b, "\n");
    sb_cat(b, content);
    sb_cat(b, "<|im_end|>\n");
}

static int render_qwen3(sbuf *b, const mf_chat_msg *m, size_t n, const mf_chat_opts *o, mf_error *err) {
    int rc;
    if (o->n_tools) {
        if ((rc = tools_turn(b, is_role(&m[0], "system") ? m[0].content : NULL, o, err))) return rc;
    } else if (is_role(&m[0], "system")) {
        plain_turn(b, "system", m[0].content);
    }
    /* the last user turn that is not a tool response wrapper */
    size_t last_query = n - 1;
    for (size_t k = n; k-- > 0;)
        if (is_role(&m[k], "user") &&
            !(starts_with(m[k].content, "<tool_response>") && ends_with(m[k].content, "</tool_response>"))) {
            last_query = k;
            break;
        }
    for (size_t i = 0; i < n; i++) {
        if (is_role(&m[i], "user") || (is_role(&m[i], "system") && i > 0)) {
            plain_turn(b, m[i].role, m[i].content);
        } else if (is_role(&m[i], "assistant")) {
            span content = sp_of(m[i].content), reasoning = {"", 0};
            if (m[i].reasoning_content) {
                reasoning = sp_of(m[i].reasoning_content);
            } else if (sp_find(content, "</think>", false)) {
                span full = content;
                content = sp_lstrip_nl(sp_after_last(full, "</think>"));
                reasoning = sp_lstrip_nl(sp_after_last(sp_rstrip_nl(sp_before_first(full, "</think>")), "<think>"));
            }
            sb_cat(b, "<|im_start|>assistant\n");
            span shown = content;
            if (i > last_query && (i + 1 == n || reasoning.n)) {
                span r = sp_rstrip_nl(sp_lstrip_nl(reasoning));
                sb_cat(b, "<think>\n");
                sb_put(b, r.p, r.n);
                sb_cat(b, "\n</think>\n\n");
                shown = sp_lstrip_nl(content);
            }
            sb_put(b, shown.p, shown.n);
            for (size_t k = 0; k < m[i].n_tool_calls; k++) {
                if (k > 0 || content.n) sb_cat(b, "\n"); /* the template tests content before its lstrip */
                tool_call(b, &m[i].tool_calls[k], false, err); /* the text as given: cannot fail */
            }
            sb_cat(b, "<|im_end|>\n");
        } else if (is_role(&m[i], "tool")) {
            tool_turn(b, m, i, n);
        }
    }
    if (o->add_generation_prompt) {
        sb_cat(b, "<|im_start|>assistant\n");
        if (o->enable_thinking == 0) sb_cat(b, "<think>\n\n</think>\n\n");
    }
    return 0;
}

static const char k_qwen25_system[] = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

static int qwen25_calls(sbuf *b, const mf_chat_msg *msg, size_t i, mf_error *err) {
    sb_cat(b, "<|im_start|>assistant");
    if (*msg->content) sb_cat(b, "\n"), sb_cat(b, msg->content);
    for (size_t k = 0; k < msg->n_tool_calls; k++) {
        sb_cat(b, "\n");
        int rc = tool_call(b, &msg->tool_calls[k], true, err);
        if (rc) return mf_err_prefix(err, rc, "chat render: message %zu, tool call %zu, arguments", i, k);
    }
    sb_cat(b, "<|im_end|>\n");
    return 0;
}

static int render_qwen25(sbuf *b, const mf_chat_msg *m, size_t n, const mf_chat_opts *o, mf_error *err) {
    int rc;
    bool sys = is_role(&m[0], "system");
    if (o->n_tools) {
        if ((rc = tools_turn(b, sys ? m[0].content : k_qwen25_system, o, err))) return rc;
    } else {
        plain_turn(b, "system", sys ? m[0].content : k_qwen25_system);
    }
    for (size_t i = 0; i < n; i++) {
        if (is_role(&m[i], "assistant") && m[i].n_tool_calls) {
            if ((rc = qwen25_calls(b, &m[i], i, err))) return rc;
        } else if (is_role(&m[i], "user") || (is_role(&m[i], "system") && i > 0) || is_role(&m[i], "assistant")) {
            plain_turn(b, m[i].role, m[i].content);
        } else if (is_role(&m[i], "tool")) {
            tool_turn(b, m, i, n);
        }
    }
    if (o->add_generation_prompt) sb_cat(b, "<|im_start|>assistant\n");
    return 0;
}

static void render_chatml(sbuf *b, const mf_chat_msg *m, size_t n, const mf_chat_opts *o) {
    for (size_t i = 0; i < n; i++) plain_turn(b, m[i].role, m[i].content);
    if (o->add_generation_prompt) sb_cat(b, "<|im_start|>assistant\n");
}

int mf_chat_render(mf_chat_format f, const mf_chat_msg *msgs, size_t n, const mf_chat_opts *opts, char **out,
                   size_t *out_len, mf_error *err) {
    *out = NULL;
    if (f == MF_CHAT_AUTO)
        return mf_err(err, MF_E_INVAL, "chat render: resolve the 'auto' template with mf_chat_detect first");
    if (!n) return mf_err(err, MF_E_INVAL, "chat render: no messages (the templates need at least one)");
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return mf_err(err, MF_E_INVAL, "chat render: message %zu has no %s", i, msgs[i].role ? "content" : "role");
    mf_chat_opts def = {.add_generation_prompt = true, .enable_thinking = -1};
    if (!opts) opts = &def;
    size_t n_calls = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < msgs[i].n_tool_calls; k++) {
            const mf_chat_tool_call *c = &msgs[i].tool_calls[k];
            if (!c->name || !c->arguments)
                return mf_err(err, MF_E_INVAL, "chat render: message %zu, tool call %zu has no %s", i, k,
                              c->name ? "arguments" : "name");
        }
        n_calls += msgs[i].n_tool_calls;
    }
    for (size_t t = 0; t < opts->n_tools; t++)
        if (!opts->tools[t]) return mf_err(err, MF_E_INVAL, "chat render: tool %zu is NULL", t);
    if (f == MF_CHAT_CHATML && (opts->n_tools || n_calls)) /* before the JSON: no JSON makes ChatML able */
        return mf_err(err, MF_E_UNSUPPORTED,
                      "plain ChatML has no way to present %s; tool calling needs the model's own Qwen2.5 or Qwen3 "
                      "template (--chat-template qwen2.5 or qwen3)",
                      opts->n_tools ? "tools" : "tool calls");
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < msgs[i].n_tool_calls; k++) {
            char *t = NULL; /* Qwen3 writes the text as it is, but both templates are given JSON only */
            int rc = mf_pyjson(msgs[i].tool_calls[k].arguments, strlen(msgs[i].tool_calls[k].arguments), &t, NULL, err);
            free(t);
            if (rc) return mf_err_prefix(err, rc, "chat render: message %zu, tool call %zu, arguments", i, k);
        }
    sbuf b = {0};
    sb_put(&b, "", 0);
    int rc = 0;
    switch (f) {
    case MF_CHAT_QWEN3: rc = render_qwen3(&b, msgs, n, opts, err); break;
    case MF_CHAT_QWEN25: rc = render_qwen25(&b, msgs, n, opts, err); break;
    default: render_chatml(&b, msgs, n, opts); break;
    }
    if (rc) {
        free(b.p);
        return rc;
    }
    if (b.oom) {
        free(b.p);
        return mf_err(err, MF_E_NOMEM, "chat render: out of memory");
    }
    *out = b.p;
    if (out_len) *out_len = b.n;
    return 0;
}
