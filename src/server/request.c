/* server/request: JSON body -> mf_srv_req (see request.h for the rules). */
#include "server/request.h"

#include "core/pyjson.h"

#include "server/grammar.h"

#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mf_srv_fail(mf_srv_err *e, int status, const char *type, const char *param, const char *fmt, ...) {
    e->status = status;
    e->type = type;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

#define BAD(e, param, ...) mf_srv_fail((e), 400, "invalid_request_error", (param), __VA_ARGS__)

/* A short, printable rendering of a JSON value for messages ("got ..."). */
static void show(const cJSON *v, char *buf, size_t n) {
    char *txt = cJSON_PrintUnformatted(v);
    if (!txt) {
        snprintf(buf, n, "(a value)");
        return;
    }
    size_t len = strlen(txt);
    if (len + 1 > n && n > 4) snprintf(buf, n, "%.*s...", (int)(n - 4), txt);
    else snprintf(buf, n, "%s", txt);
    cJSON_free(txt);
}

static const char *kind_of(const cJSON *v) {
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "an array";
    return "an object";
}

/* A field present and not null (OpenAI treats an explicit null as "use the default"). */
static const cJSON *field(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return (v && !cJSON_IsNull(v)) ? v : NULL;
}

static int get_bool(const cJSON *o, const char *name, bool *out, mf_srv_err *e) {
    const cJSON *v = field(o, name);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) return BAD(e, name, "'%s' must be a boolean (true or false), got %s", name, kind_of(v));
    *out = cJSON_IsTrue(v);
    return 0;
}

/* The field as a JSON number in *v (NULL when absent or null); anything else is refused as not being `what`
 * ("a number", "an integer"), showing the value.  get_num and get_int share it. */
static int number_field(const cJSON *o, const char *name, const char *what, bool *given, const cJSON **v,
                        mf_srv_err *e) {
    *v = field(o, name);
    if (given) *given = *v != NULL;
    if (!*v || cJSON_IsNumber(*v)) return 0;
    char b[64];
    show(*v, b, sizeof b);
    return BAD(e, name, "'%s' must be %s, got %s %s", name, what, kind_of(*v), b);
}

static int get_num(const cJSON *o, const char *name, double lo, double hi, double *out, bool *given, mf_srv_err *e) {
    const cJSON *v;
    if (number_field(o, name, "a number", given, &v, e)) return -1;
    if (!v) return 0;
    double d = v->valuedouble;
    if (!isfinite(d) || d < lo || d > hi) return BAD(e, name, "'%s' must be in [%g, %g], got %.17g", name, lo, hi, d);
    *out = d;
    return 0;
}

static int get_int(const cJSON *o, const char *name, double lo, double hi, int64_t *out, bool *given, mf_srv_err *e) {
    const cJSON *v;
    if (number_field(o, name, "an integer", given, &v, e)) return -1;
    if (!v) return 0;
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d)) return BAD(e, name, "'%s' must be an integer, got %.17g", name, d);
    if (d < lo || d > hi) return BAD(e, name, "'%s' must be in [%.0f, %.0f], got %.17g", name, lo, hi, d);
    *out = (int64_t)d;
    return 0;
}

static int dup_str(const cJSON *v, const char *param, char **out, mf_srv_err *e) {
    size_t n = strlen(v->valuestring);
    if (!mf_srv_utf8_valid(v->valuestring, n)) return BAD(e, param, "'%s' is not valid UTF-8", param);
    if (!(*out = strdup(v->valuestring)))
        return mf_srv_fail(e, 500, "server_error", param, "out of memory copying '%s' (%zu bytes)", param, n);
    return 0;
}

/* Fields whose presence asks for something minfer does not do: refused, never dropped. */
static int refuse_unsupported(const cJSON *o, mf_srv_err *e) {
    static const struct {
        const char *name, *why;
    } k[] = {
        {"functions", "the legacy 'functions' field is not supported by minfer; send the functions as 'tools'"},
        {"function_call", "the legacy 'function_call' field is not supported by minfer; use 'tool_choice'"},
        {"audio", "audio output is not supported by minfer"},
        {"prediction", "predicted outputs are not supported by minfer; send the request without 'prediction'"},
        {"lora", "minfer loads no LoRA adapters, so 'lora' cannot set their scales; send the request without it"},
        {"image_data", "minfer serves text models: 'image_data' (images) cannot be read"},
        {"multimodal_data", "minfer serves text models: 'multimodal_data' cannot be read"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const cJSON *v = field(o, k[i].name);
        /* an empty tools list asks for nothing */
        if (v && !(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0) && !(cJSON_IsObject(v) && !v->child))
            return BAD(e, k[i].name, "%s", k[i].why);
    }
    const cJSON *echo = field(o, "echo");
    if (echo && !cJSON_IsFalse(echo))
        return BAD(e, "echo", "'echo' is not supported by minfer; send the request without it or with false");
    int64_t best_of = 1;
    if (get_int(o, "best_of", 1, 1, &best_of, NULL, e))
        return BAD(e, "best_of", "'best_of' other than 1 is not supported by minfer; use 'n' for several choices");
    return 0;
}

/* tools: [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}], each kept
 * as its compact JSON text (the template writes it again as json.dumps does).  tool_choice "auto" (the
 * default), "none", "required" or a named function (the last two become a grammar: parse_constraint). */
static int parse_tools(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    const cJSON *tc = field(o, "tool_choice"), *t = field(o, "tools");
    bool none = false;
    if (tc) {
        if (cJSON_IsString(tc) && (!strcmp(tc->valuestring, "auto") || !strcmp(tc->valuestring, "none")))
            none = !strcmp(tc->valuestring, "none");
        else if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "required"))
            r->tool_choice_required = true;
        else if (cJSON_IsObject(tc)) {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
            const cJSON *name = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
            if (!cJSON_IsString(name) || !*name->valuestring)
                return BAD(e, "tool_choice", "'tool_choice' as an object must be {\"type\": \"function\", \"function\": "
                                             "{\"name\": ...}}");
            if (dup_str(name, "tool_choice", &r->tool_choice_name, e)) return -1;
        } else
            return BAD(e, "tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or an object, got %s",
                       kind_of(tc));
    }
    if (get_bool(o, "parallel_tool_calls", &r->parallel_tool_calls, e)) return -1;
    if (!t) return 0;
    if (!cJSON_IsArray(t)) return BAD(e, "tools", "'tools' must be an array, got %s", kind_of(t));
    int n = cJSON_GetArraySize(t);
    if (!n || none) return 0; /* nothing to offer: rendered and answered as without tools */
    if (r->kind != MF_SRV_CHAT)
        return BAD(e, "tools", "'tools' is a field of /v1/chat/completions; this route takes a prompt only");
    if (!(r->tools = calloc((size_t)n, sizeof *r->tools)))
        return mf_srv_fail(e, 500, "server_error", "tools", "out of memory (%d tools)", n);
    for (int i = 0; i < n; i++) {
        const cJSON *tool = cJSON_GetArrayItem(t, i);
        char param[48];
        snprintf(param, sizeof param, "tools[%d]", i);
        if (!cJSON_IsObject(tool)) return BAD(e, param, "'%s' must be an object, got %s", param, kind_of(tool));
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(tool, "type");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))
            return BAD(e, param, "'%s.type' must be \"function\" (the only kind of tool minfer offers a model)", param);
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
        const cJSON *name = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
        if (!cJSON_IsString(name) || !*name->valuestring)
            return BAD(e, param, "'%s.function' must be an object with a non-empty string 'name'", param);
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        if (ps && !cJSON_IsObject(ps))
            return BAD(e, param, "'%s.function.parameters' must be a JSON Schema object, got %s", param, kind_of(ps));
        if (!(r->tools[i] = cJSON_PrintUnformatted(tool)))
            return mf_srv_fail(e, 500, "server_error", param, "out of memory");
        r->n_tools = i + 1;
    }
    return 0;
}

/* The schema of response_format: OpenAI's {"type": "json_schema", "json_schema": {"name", "schema",
 * "strict"}}, llama-server's {"type": "json_object" | "json_schema", "schema": {...}} (both shapes are
 * taken), or json_object alone (any JSON object).  *schema stays NULL for "text". */
static int response_format_schema(const cJSON *rf, char **schema, mf_srv_err *e) {
    if (!cJSON_IsObject(rf)) return BAD(e, "response_format", "'response_format' must be an object, got %s", kind_of(rf));
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsString(t))
        return BAD(e, "response_format", "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(rf, "schema");
    if (!sc && cJSON_IsObject(js)) sc = cJSON_GetObjectItemCaseSensitive(js, "schema");
    if (!strcmp(t->valuestring, "text")) return 0;
    if (!strcmp(t->valuestring, "json_object")) {
        *schema = sc ? cJSON_PrintUnformatted(sc) : strdup("{\"type\": \"object\"}");
    } else if (!strcmp(t->valuestring, "json_schema")) {
        if (!sc || !(cJSON_IsObject(sc) || cJSON_IsBool(sc)))
            return BAD(e, "response_format", "'response_format' of type \"json_schema\" needs its schema object in "
                                             "'json_schema.schema' (OpenAI) or 'schema'");
        *schema = cJSON_PrintUnformatted(sc);
    } else {
        return BAD(e, "response_format", "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", "
                                         "got \"%.40s\"", t->valuestring);
    }
    if (!*schema) return mf_srv_fail(e, 500, "server_error", "response_format", "out of memory");
    return 0;
}

/* Structured output: at most one of 'grammar' (GBNF), 'json_schema' (llama-server), response_format JSON,
 * and tool_choice "required" / a named function; the grammar is compiled once here, so a bad one is a 400
 * naming the field, never a generation that ignores it. */
static int parse_constraint(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    const cJSON *gr = field(o, "grammar"), *js = field(o, "json_schema"), *rf = field(o, "response_format");
    char *schema = NULL;
    if (rf && response_format_schema(rf, &schema, e)) return -1;
    const bool tools_forced = r->tool_choice_required || r->tool_choice_name;
    int n = (gr && !(cJSON_IsString(gr) && !*gr->valuestring)) + !!js + !!schema + tools_forced;
    if (n > 1) {
        free(schema);
        return BAD(e, "grammar", "only one of 'grammar', 'json_schema', a JSON 'response_format' and a forced "
                                 "'tool_choice' may constrain a request, and this one has %d", n);
    }
    if (n && r->ignore_eos) {
        free(schema);
        return BAD(e, "ignore_eos", "'ignore_eos' and a constraint ('grammar', 'json_schema', 'response_format', a forced "
                                    "'tool_choice') do not mix: the end of the grammar's text is an end-of-generation token");
    }
    mf_error err = {0};
    int rc = 0;
    if (gr && cJSON_IsString(gr) && *gr->valuestring) {
        r->constraint = "grammar";
        if (!(r->gbnf = strdup(gr->valuestring))) rc = MF_E_NOMEM;
    } else if (gr && !cJSON_IsString(gr)) {
        return BAD(e, "grammar", "'grammar' must be a string of GBNF, got %s", kind_of(gr));
    } else if (js || schema) {
        r->constraint = js ? "json_schema" : "response_format";
        if (js && !(cJSON_IsObject(js) || cJSON_IsBool(js)))
            return BAD(e, "json_schema", "'json_schema' must be a JSON Schema object, got %s", kind_of(js));
        if (js && !(schema = cJSON_PrintUnformatted(js))) rc = MF_E_NOMEM;
        if (!rc) rc = mf_srv_schema_gbnf(schema, strlen(schema), &r->gbnf, &err);
    } else if (tools_forced) {
        r->constraint = "tool_choice";
        if (!r->n_tools) return BAD(e, "tool_choice", "'tool_choice' forces a tool call, but the request has no 'tools'");
        rc = mf_srv_tools_gbnf(r->tools, r->n_tools, r->tool_choice_name, r->parallel_tool_calls && !r->tool_choice_name,
                               &r->gbnf, &err);
    }
    free(schema);
    if (!rc && r->gbnf) {
        mf_grammar *g = NULL;
        rc = mf_grammar_new(r->gbnf, strlen(r->gbnf), &g, &err);
        mf_grammar_free(g);
    }
    if (rc == MF_E_NOMEM) return mf_srv_fail(e, 500, "server_error", r->constraint, "out of memory");
    if (rc) return BAD(e, r->constraint, "'%s': %s", r->constraint, err.msg);
    return 0;
}

/* An assistant turn's tool_calls: [{"id"?, "type": "function"?, "function": {"name", "arguments"}}], the
 * arguments being OpenAI's JSON text in a string. */
static int parse_tool_calls(const cJSON *tcs, int idx, mf_chat_message *m, mf_srv_err *e) {
    char param[80];
    snprintf(param, sizeof param, "messages[%d].tool_calls", idx);
    if (!cJSON_IsArray(tcs)) return BAD(e, param, "'%s' must be an array, got %s", param, kind_of(tcs));
    int n = cJSON_GetArraySize(tcs);
    if (!n) return 0;
    mf_chat_tool_call *c = calloc((size_t)n, sizeof *c);
    if (!c) return mf_srv_fail(e, 500, "server_error", param, "out of memory");
    m->tool_calls = c;
    for (int k = 0; k < n; k++) {
        const cJSON *q = cJSON_GetArrayItem(tcs, k);
        snprintf(param, sizeof param, "messages[%d].tool_calls[%d]", idx, k);
        const cJSON *fn = cJSON_IsObject(q) ? cJSON_GetObjectItemCaseSensitive(q, "function") : NULL;
        const cJSON *type = cJSON_IsObject(q) ? field(q, "type") : NULL;
        if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "function")))
            return BAD(e, param, "'%s.type' must be \"function\"", param);
        const cJSON *name = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
        const cJSON *args = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "arguments") : NULL;
        if (!cJSON_IsString(name) || !cJSON_IsString(args))
            return BAD(e, param, "'%s' must be {\"function\": {\"name\": string, \"arguments\": string}}", param);
        char *py = NULL;
        mf_error err = {0};
        if (mf_pyjson(args->valuestring, strlen(args->valuestring), &py, NULL, &err))
            return BAD(e, param, "'%s.function.arguments' must hold JSON text (OpenAI sends the arguments object as a "
                                 "string): %s", param, err.msg);
        free(py);
        m->n_tool_calls = k + 1;
        if (dup_str(name, param, (char **)&c[k].name, e) || dup_str(args, param, (char **)&c[k].arguments, e)) return -1;
    }
    return 0;
}

/* content: a string, or an array of {"type":"text","text":...} parts (joined). */
static int message_content(const cJSON *c, int idx, char **out, mf_srv_err *e) {
    char param[48];
    snprintf(param, sizeof param, "messages[%d].content", idx);
    if (!c) {
        *out = strdup("");
        return *out ? 0 : mf_srv_fail(e, 500, "server_error", param, "out of memory");
    }
    if (cJSON_IsString(c)) return dup_str(c, param, out, e);
    if (!cJSON_IsArray(c))
        return BAD(e, param, "'%s' must be a string or an array of text parts, got %s", param, kind_of(c));
    size_t total = 0;
    int n = cJSON_GetArraySize(c);
    for (int i = 0; i < n; i++) {
        const cJSON *p = cJSON_GetArrayItem(c, i);
        const cJSON *t = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, "type") : NULL;
        if (!cJSON_IsString(t))
            return BAD(e, param, "'%s[%d]' must be an object with a string 'type', got %s", param, i, kind_of(p));
        if (strcmp(t->valuestring, "text") != 0)
            return BAD(e, param, "'%s[%d]' has type '%.40s': only \"text\" parts are supported (this is a text-only model)",
                       param, i, t->valuestring);
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsString(tx)) return BAD(e, param, "'%s[%d].text' must be a string, got %s", param, i, kind_of(tx));
        total += strlen(tx->valuestring);
    }
    char *s = malloc(total + 1);
    if (!s) return mf_srv_fail(e, 500, "server_error", param, "out of memory (%zu bytes)", total);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        const char *tx = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(c, i), "text")->valuestring;
        size_t l = strlen(tx);
        memcpy(s + at, tx, l);
        at += l;
    }
    s[at] = 0;
    if (!mf_srv_utf8_valid(s, at)) {
        free(s);
        return BAD(e, param, "'%s' is not valid UTF-8", param);
    }
    *out = s;
    return 0;
}

static int parse_messages(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    const cJSON *m = field(o, "messages");
    if (!m) return BAD(e, "messages", "'messages' is required: an array of {\"role\", \"content\"} objects");
    if (!cJSON_IsArray(m)) return BAD(e, "messages", "'messages' must be an array, got %s", kind_of(m));
    int n = cJSON_GetArraySize(m);
    if (n == 0) return BAD(e, "messages", "'messages' must hold at least one message, got []");
    if (!(r->msgs = calloc((size_t)n, sizeof *r->msgs)))
        return mf_srv_fail(e, 500, "server_error", "messages", "out of memory (%d messages)", n);
    r->n_msgs = n;
    for (int i = 0; i < n; i++) {
        const cJSON *msg = cJSON_GetArrayItem(m, i);
        char param[48];
        snprintf(param, sizeof param, "messages[%d]", i);
        if (!cJSON_IsObject(msg)) return BAD(e, param, "'%s' must be an object, got %s", param, kind_of(msg));
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        snprintf(param, sizeof param, "messages[%d].role", i);
        if (!cJSON_IsString(role)) return BAD(e, param, "'%s' must be a string, got %s", param, kind_of(role));
        const char *rs = role->valuestring;
        /* OpenAI's "developer" role is the newer name of "system" */
        /* a static string: the parsed tree is freed before the request is used */
        const char *canon = !strcmp(rs, "system") || !strcmp(rs, "developer") ? "system"
                            : !strcmp(rs, "user")                            ? "user"
                            : !strcmp(rs, "assistant")                       ? "assistant"
                            : !strcmp(rs, "tool")                            ? "tool"
                                                                             : NULL;
        if (!canon)
            return BAD(e, param,
                       "'%s' is '%.40s': supported roles are system (or developer), user, assistant and tool", param,
                       rs);
        r->msgs[i].role = canon;
        snprintf(param, sizeof param, "messages[%d].function_call", i);
        if (field(msg, "function_call")) return BAD(e, param, "'%s' is the legacy form; send 'tool_calls'", param);
        const cJSON *tcs = field(msg, "tool_calls");
        snprintf(param, sizeof param, "messages[%d].tool_calls", i);
        if (tcs && strcmp(canon, "assistant"))
            return BAD(e, param, "'messages[%d]' is a %s turn with tool_calls; only assistant turns make calls", i, canon);
        if (tcs && parse_tool_calls(tcs, i, &r->msgs[i], e)) return -1;
        char *content = NULL;
        if (message_content(field(msg, "content"), i, &content, e)) return -1;
        r->msgs[i].content = content;
    }
    return 0;
}

/* prompt: a string, an array of token ids, or an array holding one string or one id array. */
static int parse_prompt(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    const cJSON *p = field(o, "prompt");
    if (!p) return BAD(e, "prompt", "'prompt' is required: a string or an array of token ids");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && !cJSON_IsNumber(cJSON_GetArrayItem(p, 0)))
        p = cJSON_GetArrayItem(p, 0); /* ["text"] or [[ids]] */
    if (cJSON_IsString(p)) return dup_str(p, "prompt", &r->prompt, e);
    if (!cJSON_IsArray(p))
        return BAD(e, "prompt", "'prompt' must be a string or an array of token ids, got %s", kind_of(p));
    int n = cJSON_GetArraySize(p);
    if (n == 0) return BAD(e, "prompt", "'prompt' is an empty array; send at least one token id or a string");
    if (!cJSON_IsNumber(cJSON_GetArrayItem(p, 0)))
        return BAD(e, "prompt", "'prompt' holds %d prompts: minfer takes one prompt per request (use 'n' for several "
                               "choices of one prompt)", n);
    if (!(r->tokens = malloc((size_t)n * sizeof *r->tokens)))
        return mf_srv_fail(e, 500, "server_error", "prompt", "out of memory (%d token ids)", n);
    for (int i = 0; i < n; i++) {
        const cJSON *t = cJSON_GetArrayItem(p, i);
        double d = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (!cJSON_IsNumber(t) || d != floor(d) || d < 0 || d > INT32_MAX) {
            char b[48];
            show(t, b, sizeof b);
            return BAD(e, "prompt", "'prompt[%d]' must be a token id (an integer >= 0), got %s", i, b);
        }
        r->tokens[i] = (mf_token)d;
    }
    r->n_tokens = n;
    return 0;
}

/* A string field that must be present (what names the use, for the message). */
static int need_str(const cJSON *o, const char *name, const char *what, char **out, mf_srv_err *e) {
    const cJSON *v = field(o, name);
    if (!v) return BAD(e, name, "'%s' is required: %s", name, what);
    if (!cJSON_IsString(v)) return BAD(e, name, "'%s' must be a string (%s), got %s", name, what, kind_of(v));
    return dup_str(v, name, out, e);
}

/* /infill (llama-server's fields): input_prefix and input_suffix (required strings), input_extra
 * [{"filename"?, "text"}], prompt (an optional string: text after the prefix). */
static int parse_infill(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    r->fim = true;
    if (need_str(o, "input_prefix", "the text before the gap", &r->input_prefix, e) ||
        need_str(o, "input_suffix", "the text after the gap, \"\" for none", &r->input_suffix, e))
        return -1;
    const cJSON *p = field(o, "prompt");
    if (p && !cJSON_IsString(p))
        return BAD(e, "prompt", "'prompt' of /infill must be a string (text after input_prefix), got %s",
                   kind_of(p));
    if (p && dup_str(p, "prompt", &r->prompt, e)) return -1;
    if (!p && !(r->prompt = strdup(""))) return mf_srv_fail(e, 500, "server_error", "prompt", "out of memory");
    const cJSON *x = field(o, "input_extra");
    if (!x) return 0;
    if (!cJSON_IsArray(x))
        return BAD(e, "input_extra",
                   "'input_extra' must be an array of {\"filename\": string, \"text\": string}, got %s",
                   kind_of(x));
    int n = cJSON_GetArraySize(x);
    if (n && !(r->extra = calloc((size_t)n, sizeof *r->extra)))
        return mf_srv_fail(e, 500, "server_error", "input_extra", "out of memory (%d chunks)", n);
    for (int i = 0; i < n; i++) {
        const cJSON *c = cJSON_GetArrayItem(x, i);
        char param[48];
        snprintf(param, sizeof param, "input_extra[%d]", i);
        const cJSON *t = cJSON_IsObject(c) ? field(c, "text") : NULL,
                    *f = cJSON_IsObject(c) ? field(c, "filename") : NULL;
        if (!cJSON_IsString(t) || (f && !cJSON_IsString(f)))
            return BAD(e, "input_extra", "'%s' must be {\"filename\": string (optional), \"text\": string}",
                       param);
        r->n_extra = i + 1;
        if (dup_str(t, "input_extra", &r->extra[i].text, e)) return -1;
        if (f && dup_str(f, "input_extra", &r->extra[i].filename, e)) return -1;
        if (!f && !(r->extra[i].filename = strdup("tmp")))
            return mf_srv_fail(e, 500, "server_error", "input_extra", "out of memory");
    }
    return 0;
}

/* OpenAI's 'suffix' (insertion) on /v1/completions: the prompt text is the prefix, the answer what goes
 * between (the model's FIM layout); other routes refuse it, naming the ones that take it. */
static int parse_suffix(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    const cJSON *v = field(o, "suffix");
    if (!v || r->kind == MF_SRV_INFILL) return 0;
    if (r->kind != MF_SRV_COMPLETION)
        return BAD(e, "suffix",
                   "'suffix' (insertion) belongs to /v1/completions; /infill takes input_prefix and "
                   "input_suffix");
    if (!cJSON_IsString(v)) return BAD(e, "suffix", "'suffix' must be a string, got %s", kind_of(v));
    if (!r->prompt) return BAD(e, "suffix", "'suffix' needs the prompt as text (the prefix), not token ids");
    r->fim = true;
    r->input_prefix = r->prompt;
    if (!(r->prompt = strdup(""))) return mf_srv_fail(e, 500, "server_error", "suffix", "out of memory");
    return dup_str(v, "suffix", &r->input_suffix, e);
}

static int parse_stop(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    const cJSON *s = field(o, "stop");
    if (!s) return 0;
    if (cJSON_IsString(s)) {
        if (!*s->valuestring) return 0; /* "" stops nothing */
        if (dup_str(s, "stop", &r->stop[0], e)) return -1;
        r->n_stop = 1;
        return 0;
    }
    if (!cJSON_IsArray(s)) return BAD(e, "stop", "'stop' must be a string or an array of strings, got %s", kind_of(s));
    int n = cJSON_GetArraySize(s);
    if (n > MF_SRV_MAX_STOP) return BAD(e, "stop", "'stop' holds %d strings; at most %d are supported", n, MF_SRV_MAX_STOP);
    for (int i = 0; i < n; i++) {
        const cJSON *v = cJSON_GetArrayItem(s, i);
        if (!cJSON_IsString(v)) return BAD(e, "stop", "'stop[%d]' must be a string, got %s", i, kind_of(v));
        if (!*v->valuestring) continue;
        if (dup_str(v, "stop", &r->stop[r->n_stop], e)) return -1;
        r->n_stop++;
    }
    return 0;
}

/* max_tokens / max_completion_tokens / n_predict: at most one limit, the same meaning. */
static int parse_limits(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    static const char *names[] = {"max_completion_tokens", "max_tokens", "n_predict"};
    for (int i = 0; i < 3; i++) {
        int64_t v;
        bool given;
        double lo = i == 2 ? -1 : 1; /* n_predict -1 means "no limit", as llama-server */
        if (get_int(o, names[i], lo, INT32_MAX, &v, &given, e)) return -1;
        if (given) {
            r->max_tokens = (int32_t)v;
            return 0;
        }
    }
    return 0;
}

/* A number field into a float, when given. */
static int num_into(const cJSON *o, const char *name, double lo, double hi, float *out, mf_srv_err *e) {
    double d = 0;
    bool g;
    if (get_num(o, name, lo, hi, &d, &g, e)) return -1;
    if (g) *out = (float)d;
    return 0;
}

static int int_into(const cJSON *o, const char *name, double lo, double hi, int32_t *out, mf_srv_err *e) {
    int64_t v = 0;
    bool g;
    if (get_int(o, name, lo, hi, &v, &g, e)) return -1;
    if (g) *out = (int32_t)v;
    return 0;
}

static int parse_sampling(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    mf_sampler_params *sp = &r->sp;
    int64_t i;
    bool g;
    if (num_into(o, "temperature", 0, 2, &sp->temp, e) || num_into(o, "top_p", 0, 1, &sp->top_p, e) ||
        int_into(o, "top_k", 0, INT32_MAX, &sp->top_k, e) || num_into(o, "min_p", 0, 1, &sp->min_p, e) ||
        num_into(o, "typical_p", 0, 1, &sp->typ_p, e) ||
        num_into(o, "presence_penalty", -2, 2, &sp->penalty_present, e) ||
        num_into(o, "frequency_penalty", -2, 2, &sp->penalty_freq, e) ||
        num_into(o, "repeat_penalty", 0, 100, &sp->penalty_repeat, e) ||
        int_into(o, "repeat_last_n", -1, INT32_MAX, &sp->penalty_last_n, e))
        return -1;
    /* JSON numbers are doubles: seeds are exact up to 2^53; larger ones would be silently rounded */
    if (get_int(o, "seed", -9007199254740992.0, 9007199254740992.0, &i, &g, e)) return -1;
    if (g) sp->seed = (uint64_t)i, r->seed_given = true;
    return 0;
}

/* A logit_bias value: a number (added to the logit) or false (a ban, -inf), as llama-server takes them.  A
 * bias beyond +-1e6 is refused: it already decides every draw, and summed ones could overflow to inf. */
static int bias_value(const cJSON *v, const char *param, float *out, mf_srv_err *e) {
    if (cJSON_IsFalse(v)) {
        *out = -INFINITY;
        return 0;
    }
    char b[48];
    show(v, b, sizeof b);
    if (!cJSON_IsNumber(v))
        return BAD(e, "logit_bias", "'%s' must be a number (the bias) or false (a ban), got %s %s", param,
                   kind_of(v), b);
    if (!isfinite(v->valuedouble) || fabs(v->valuedouble) > 1e6)
        return BAD(e, "logit_bias", "'%s' must be in [-1e6, 1e6] (or false to ban the token), got %s", param,
                   b);
    *out = (float)v->valuedouble;
    return 0;
}

/* A key of all digits (a '-' before them allowed, so a negative id is refused as one) is a token id. */
static bool id_key(const char *k, int64_t *id) {
    const char *d = k + (*k == '-');
    if (!*d || strspn(d, "0123456789") != strlen(d)) return false;
    *id = strlen(d) > 18 ? (*k == '-' ? INT64_MIN : INT64_MAX) : strtoll(k, NULL, 10);
    return true;
}

/* One entry: its token (an id, or a text to tokenize later) and its bias. */
static int bias_entry(const cJSON *key, const char *skey, const cJSON *val, const char *param,
                      mf_srv_bias *out, mf_srv_err *e) {
    if (bias_value(val, param, &out->bias, e)) return -1;
    if (skey && id_key(skey, &out->token)) return 0;
    if (key && cJSON_IsNumber(key)) {
        const double d = key->valuedouble;
        if (d != floor(d) || !isfinite(d))
            return BAD(e, "logit_bias", "'%s' names token %.17g, not an integer", param, d);
        out->token = d > 9e18 ? INT64_MAX : d < -9e18 ? INT64_MIN : (int64_t)d;
        return 0;
    }
    if (key && !cJSON_IsString(key))
        return BAD(e, "logit_bias", "'%s' must be [token id or text, bias], got %s first", param,
                   kind_of(key));
    const char *t = skey ? skey : key->valuestring;
    if (!*t) return BAD(e, "logit_bias", "'%s' names the empty text, which has no tokens", param);
    if (!mf_srv_utf8_valid(t, strlen(t))) return BAD(e, "logit_bias", "'%s' is not valid UTF-8", param);
    out->token = -1;
    if (!(out->text = strdup(t))) return mf_srv_fail(e, 500, "server_error", "logit_bias", "out of memory");
    return 0;
}

/* logit_bias: OpenAI's {"<token id>": bias} (a key that is not an id is a text, as llama-server reads it) or
 * llama-server's [[id or text, bias or false], ...].  Ids are checked against the vocabulary and texts
 * tokenized later (mf_srv_req_resolve_bias): this parser has no model. */
static int parse_logit_bias(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    const cJSON *lb = field(o, "logit_bias");
    if (!lb) return 0;
    if (!cJSON_IsObject(lb) && !cJSON_IsArray(lb))
        return BAD(e, "logit_bias",
                   "'logit_bias' must be an object {\"token id\": bias} or an array [[token id, bias], "
                   "...], got %s",
                   kind_of(lb));
    const int n = cJSON_GetArraySize(lb);
    if (!n) return 0;
    if (!(r->bias = calloc((size_t)n, sizeof *r->bias)))
        return mf_srv_fail(e, 500, "server_error", "logit_bias", "out of memory (%d entries)", n);
    int i = 0;
    for (const cJSON *el = lb->child; el; el = el->next, i++) {
        char param[96];
        mf_srv_bias *b = &r->bias[i];
        r->n_bias = i + 1;
        if (cJSON_IsObject(lb)) {
            snprintf(param, sizeof param, "logit_bias[\"%.60s\"]", el->string);
            if (bias_entry(NULL, el->string, el, param, b, e)) return -1;
            continue;
        }
        snprintf(param, sizeof param, "logit_bias[%d]", i);
        if (!cJSON_IsArray(el) || cJSON_GetArraySize(el) != 2)
            return BAD(e, "logit_bias", "'%s' must be a pair [token id or text, bias], got %s", param,
                       kind_of(el));
        if (bias_entry(el->child, NULL, el->child->next, param, b, e)) return -1;
    }
    return 0;
}

/* dry_sequence_breakers: a non-empty array of non-empty strings, as llama-server requires. */
static int parse_breakers(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    const cJSON *v = field(o, "dry_sequence_breakers");
    if (!v) return 0;
    if (!cJSON_IsArray(v))
        return BAD(e, "dry_sequence_breakers", "'dry_sequence_breakers' must be an array of strings, got %s",
                   kind_of(v));
    const int n = cJSON_GetArraySize(v);
    if (!n || n > MF_SRV_MAX_BREAKERS)
        return BAD(e, "dry_sequence_breakers",
                   "'dry_sequence_breakers' holds %d strings; send 1 to %d (leave it out for llama-server's "
                   "defaults \"\\n\", \":\", \"\\\"\", \"*\")",
                   n, MF_SRV_MAX_BREAKERS);
    if (!(r->dry_seq = calloc((size_t)n, sizeof *r->dry_seq)))
        return mf_srv_fail(e, 500, "server_error", "dry_sequence_breakers", "out of memory");
    for (const cJSON *it = v->child; it; it = it->next) {
        const int i = r->n_dry_seq;
        if (!cJSON_IsString(it) || !it->valuestring[0])
            return BAD(e, "dry_sequence_breakers", "'dry_sequence_breakers[%d]' must be a non-empty string, got %s",
                       i, cJSON_IsString(it) ? "\"\"" : kind_of(it));
        const size_t len = strlen(it->valuestring);
        if (len > MF_SRV_MAX_BREAKER_BYTES)
            return BAD(e, "dry_sequence_breakers",
                       "'dry_sequence_breakers[%d]' is %zu bytes; a breaker is at most %d (llama.cpp would cut it "
                       "there and match more than you sent)",
                       i, len, MF_SRV_MAX_BREAKER_BYTES);
        if (dup_str(it, "dry_sequence_breakers", &r->dry_seq[i], e)) return -1;
        r->n_dry_seq = i + 1;
    }
    return 0;
}

/* llama-server's other samplers: DRY, XTC, top-n-sigma, dynamic temperature, Mirostat, min_keep (the engine's
 * ranges, checked here so the answer names the field). */
static int parse_more_samplers(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    mf_sampler_params *sp = &r->sp;
    if (num_into(o, "dry_multiplier", 0, 1e6, &sp->dry_multiplier, e) ||
        num_into(o, "dry_base", 0, 1e6, &sp->dry_base, e) ||
        int_into(o, "dry_allowed_length", 0, 1e6, &sp->dry_allowed_length, e) ||
        int_into(o, "dry_penalty_last_n", -1, INT32_MAX, &sp->dry_last_n, e) || parse_breakers(o, r, e) ||
        num_into(o, "xtc_probability", 0, 1, &sp->xtc_probability, e) ||
        num_into(o, "xtc_threshold", 0, 1, &sp->xtc_threshold, e) ||
        num_into(o, "top_n_sigma", -1e6, 1e6, &sp->top_n_sigma, e) ||
        num_into(o, "dynatemp_range", 0, 1e6, &sp->dynatemp_range, e) ||
        num_into(o, "dynatemp_exponent", 0, 1e6, &sp->dynatemp_exponent, e) ||
        int_into(o, "mirostat", 0, 2, &sp->mirostat, e) || num_into(o, "mirostat_tau", 0, 1e6, &sp->mirostat_tau, e) ||
        num_into(o, "mirostat_eta", 0, 1e6, &sp->mirostat_eta, e) ||
        int_into(o, "min_keep", 0, 1 << 20, &sp->min_keep, e))
        return -1;
    if (sp->dry_multiplier > 0 && sp->dry_base < 1)
        return BAD(e, "dry_base",
                   "'dry_base' %g is below 1, where DRY's penalty (multiplier * base^length) would shrink as the "
                   "repeat grows (llama.cpp switches DRY off then); send a base >= 1, or dry_multiplier 0",
                   sp->dry_base);
    if (sp->xtc_probability > 0 && sp->xtc_threshold <= 0)
        return BAD(e, "xtc_threshold",
                   "'xtc_threshold' 0 would have XTC remove every candidate but the least likely; send a "
                   "threshold in (0, 0.5], or xtc_probability 0");
    return 0;
}

/* llama-server's n_probs (/completion, /infill): the top n_probs tokens of every position, as
 * completion_probabilities; the probabilities are the model's softmax, as OpenAI's logprobs here, or with
 * post_sampling_probs the sampler chain's after its last stage. */
static int parse_n_probs(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    int64_t v = 0;
    bool g, post = false;
    if (get_int(o, "n_probs", 0, MF_SRV_MAX_TOP_LOGPROBS, &v, &g, e) || get_bool(o, "post_sampling_probs", &post, e))
        return -1;
    r->post_probs = post;
    if (!v) return 0;
    if (mf_srv_shape(r->kind) != MF_SRV_NATIVE)
        return BAD(e, "n_probs", "'n_probs' belongs to /completion and /infill; here ask for 'logprobs'%s",
                   r->kind == MF_SRV_CHAT ? " and 'top_logprobs'" : " N");
    r->logprobs = true, r->top_logprobs = (int32_t)v;
    return 0;
}

/* The chain stages, in llama.cpp's default order (common/common.h), the order minfer runs them in. */
enum { ST_PEN, ST_DRY, ST_SIGMA, ST_TOPK, ST_TYP, ST_TOPP, ST_MINP, ST_XTC, ST_INFILL, ST_TEMP, ST_N };
#define MF_SRV_STAGE_ORDER "penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, infill, temperature"

/* A llama.cpp sampler name or letter (common_sampler_type_from_name / _from_chars) as a stage; -1 unknown. */
static int stage_of(const char *name, char c) {
    static const struct {
        const char *name;
        char c;
        int st;
    } k[] = {{"penalties", 'e', ST_PEN}, {"top_k", 'k', ST_TOPK},       {"typ_p", 'y', ST_TYP},
             {"typical_p", 0, ST_TYP},   {"typical", 0, ST_TYP},        {"top_p", 'p', ST_TOPP},
             {"min_p", 'm', ST_MINP},    {"temperature", 't', ST_TEMP}, {"temp", 0, ST_TEMP},
             {"dry", 'd', ST_DRY},       {"xtc", 'x', ST_XTC},          {"top_n_sigma", 's', ST_SIGMA},
             {"infill", 'i', ST_INFILL}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (name ? !strcmp(name, k[i].name) : c && c == k[i].c) return k[i].st;
    return -1;
}

/* llama-server's 'samplers' (an array of names, or a string of letters as --sampler-seq): the stages it runs,
 * in order.  minfer runs its chain in one order, so a list that reorders it is refused; the stages it leaves
 * out are switched off, as llama.cpp would not run them (no temperature stage: the draw at temperature 1). */
static int parse_sampler_order(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    const cJSON *v = field(o, "samplers");
    if (!v) return 0;
    if (!cJSON_IsArray(v) && !cJSON_IsString(v))
        return BAD(e, "samplers",
                   "'samplers' must be an array of sampler names or a string of their letters, got %s",
                   kind_of(v));
    const int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : (int)strlen(v->valuestring);
    bool in[ST_N] = {false};
    int last = -1;
    for (int i = 0; i < n; i++) {
        const cJSON *it = cJSON_IsArray(v) ? cJSON_GetArrayItem(v, i) : NULL;
        if (it && !cJSON_IsString(it))
            return BAD(e, "samplers", "'samplers[%d]' must be a string, got %s", i, kind_of(it));
        char one[2] = {it ? 0 : v->valuestring[i], 0};
        const char *name = it ? it->valuestring : one;
        const int st = stage_of(it ? name : NULL, one[0]);
        if (st < 0)
            return BAD(e, "samplers",
                       "'samplers' names '%.40s', which is not a sampler minfer knows (llama.cpp's names: "
                       MF_SRV_STAGE_ORDER ")",
                       name);
        if (st <= last)
            return BAD(e, "samplers",
                       "'samplers' puts '%.40s' after a stage minfer runs before it; minfer's order is "
                       MF_SRV_STAGE_ORDER,
                       name);
        in[st] = true, last = st;
    }
    mf_sampler_params *sp = &r->sp;
    /* (a request that generates nothing, as llama.vim's cache warm-up with "samplers": [] and temperature 0,
     * samples nothing either) */
    if (!in[ST_TEMP] && sp->temp <= 0 && r->max_tokens != 0)
        return BAD(e, "samplers",
                   "'samplers' leaves out temperature, so llama.cpp would draw at temperature 1, but "
                   "'temperature' is %g (greedy); list temperature or send a positive one",
                   sp->temp);
    if (!in[ST_PEN]) sp->penalty_last_n = 0;
    if (!in[ST_DRY]) sp->dry_multiplier = 0.0f;
    if (!in[ST_SIGMA]) sp->top_n_sigma = -1.0f;
    if (!in[ST_XTC]) sp->xtc_probability = 0.0f;
    if (!in[ST_TOPK]) sp->top_k = 0;
    if (!in[ST_TYP]) sp->typ_p = 1.0f;
    if (!in[ST_TOPP]) sp->top_p = 1.0f;
    if (!in[ST_MINP]) sp->min_p = 0.0f;
    if (!in[ST_TEMP]) sp->temp = 1.0f;
    r->infill_stage = in[ST_INFILL];
    return 0;
}

/* llama-server's /completion extras for code completion and its answer's shape: n_indent and
 * t_max_predict_ms (the generator's limits), return_tokens, response_fields (the answer cut to these paths,
 * "a/b" read inside "a"), timings_per_token; and n_cmpl, llama-server's name for n. */
static int parse_completion_extras(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    int64_t v;
    double t;
    bool g;
    if (int_into(o, "n_indent", 0, 1 << 20, &r->n_indent, e)) return -1;
    if (get_num(o, "t_max_predict_ms", -1, 1e12, &t, &g, e)) return -1; /* -1 and 0: off, as llama-server */
    if (g && t > 0) r->t_max_predict_ms = t;
    if (get_bool(o, "return_tokens", &r->return_tokens, e) ||
        get_bool(o, "timings_per_token", &r->timings_per_token, e))
        return -1;
    if (get_int(o, "n_cmpl", 1, MF_SRV_MAX_N, &v, &g, e)) return -1;
    if (g) {
        if (field(o, "n") && r->n != v)
            return BAD(e, "n_cmpl", "'n_cmpl' %lld and 'n' %d ask for different numbers of choices; send one",
                       (long long)v, r->n);
        r->n = (int32_t)v;
    }
    const cJSON *rf = field(o, "response_fields");
    if (!rf) return 0;
    if (!cJSON_IsArray(rf))
        return BAD(e, "response_fields", "'response_fields' must be an array of strings, got %s", kind_of(rf));
    const int n = cJSON_GetArraySize(rf);
    if (n > MF_SRV_MAX_RESPONSE_FIELDS)
        return BAD(e, "response_fields", "'response_fields' has %d entries; at most %d", n, MF_SRV_MAX_RESPONSE_FIELDS);
    if (!(r->response_fields = calloc((size_t)n + 1, sizeof *r->response_fields)))
        return mf_srv_fail(e, 500, "server_error", "response_fields", "out of memory");
    r->n_response_fields = n;
    r->response_fields_given = true;
    for (int i = 0; i < n; i++) {
        const cJSON *it = cJSON_GetArrayItem(rf, i);
        if (!cJSON_IsString(it))
            return BAD(e, "response_fields", "'response_fields[%d]' must be a string, got %s", i, kind_of(it));
        if (dup_str(it, "response_fields", &r->response_fields[i], e)) return -1;
    }
    return 0;
}

static int parse_stream(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    if (get_bool(o, "stream", &r->stream, e)) return -1;
    const cJSON *so = field(o, "stream_options");
    if (!so) return 0;
    if (!cJSON_IsObject(so)) return BAD(e, "stream_options", "'stream_options' must be an object, got %s", kind_of(so));
    if (!r->stream)
        return BAD(e, "stream_options", "'stream_options' is only allowed with \"stream\": true");
    return get_bool(so, "include_usage", &r->include_usage, e);
}

static int parse_logprobs(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    const cJSON *lp = field(o, "logprobs");
    int64_t v;
    bool g;
    if (r->kind == MF_SRV_CHAT) {
        if (get_bool(o, "logprobs", &r->logprobs, e)) return -1;
        if (get_int(o, "top_logprobs", 0, MF_SRV_MAX_TOP_LOGPROBS, &v, &g, e)) return -1;
        if (g && !r->logprobs) return BAD(e, "top_logprobs", "'top_logprobs' needs \"logprobs\": true");
        if (g) r->top_logprobs = (int32_t)v;
        return 0;
    }
    /* completions: logprobs is the number of alternatives (0..5 in OpenAI's legacy API) */
    if (lp && cJSON_IsBool(lp)) {
        r->logprobs = cJSON_IsTrue(lp);
        return 0;
    }
    if (get_int(o, "logprobs", 0, MF_SRV_MAX_TOP_LOGPROBS, &v, &g, e)) return -1;
    if (g) r->logprobs = true, r->top_logprobs = (int32_t)v;
    return 0;
}

static int parse_llama_extras(const cJSON *o, mf_srv_req *r, mf_srv_err *e) {
    int64_t v;
    bool g;
    if (get_int(o, "n", 1, MF_SRV_MAX_N, &v, &g, e)) return -1;
    if (g) r->n = (int32_t)v;
    if (parse_completion_extras(o, r, e)) return -1;
    if (r->n > 1 && r->stream && mf_srv_shape(r->kind) == MF_SRV_NATIVE)
        return BAD(e, "n", "streaming several choices is not available on /completion; use /v1/completions, or "
                   "leave out \"stream\" (the answer is then an array of %d results)", r->n);
    if (get_bool(o, "cache_prompt", &r->cache_prompt, e)) return -1;
    if (int_into(o, "n_cache_reuse", 0, INT32_MAX, &r->n_cache_reuse, e)) return -1;
    if (r->n_cache_reuse > 0 && !r->cache_prompt)
        return BAD(e, "n_cache_reuse", "'n_cache_reuse' is %d, which moves cached runs, and 'cache_prompt' is "
                   "false, which uses no cache; drop one", r->n_cache_reuse);
    if (get_int(o, "id_slot", -1, INT32_MAX, &v, &g, e)) return -1;
    if (g) r->id_slot = (int32_t)v;
    if (get_bool(o, "ignore_eos", &r->ignore_eos, e)) return -1;
    const cJSON *kw = field(o, "chat_template_kwargs");
    if (kw) {
        if (!cJSON_IsObject(kw))
            return BAD(e, "chat_template_kwargs", "'chat_template_kwargs' must be an object, got %s", kind_of(kw));
        bool think;
        const cJSON *t = field(kw, "enable_thinking");
        if (t) {
            if (get_bool(kw, "enable_thinking", &think, e)) return -1;
            r->enable_thinking = think;
        }
    }
    const cJSON *model = field(o, "model");
    if (model) {
        if (!cJSON_IsString(model)) return BAD(e, "model", "'model' must be a string, got %s", kind_of(model));
        if (dup_str(model, "model", &r->model, e)) return -1;
    }
    const cJSON *user = field(o, "user");
    if (user && !cJSON_IsString(user)) return BAD(e, "user", "'user' must be a string, got %s", kind_of(user));
    return 0;
}

static void req_defaults(mf_srv_kind kind, const mf_sampler_params *sp, bool seed_given, mf_srv_req *r) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->max_tokens = -1;
    r->sp = *sp;
    r->sp.logit_bias = NULL, r->sp.n_logit_bias = 0, r->sp.dry_breakers = NULL; /* the request's own */
    r->seed_given = seed_given;
    r->n = 1;
    r->cache_prompt = true;
    r->id_slot = -1;
    r->n_cache_reuse = -1;
    r->enable_thinking = -1;
    r->parallel_tool_calls = true;
}

int mf_srv_req_parse(mf_srv_kind kind, const char *body, size_t len, mf_srv_req *r, mf_srv_err *e) {
    const mf_sampler_params d = mf_sampler_default_params();
    return mf_srv_req_parse_over(kind, body, len, &d, false, r, e);
}

int mf_srv_req_parse_over(mf_srv_kind kind, const char *body, size_t len, const mf_sampler_params *defaults,
                          bool seed_given, mf_srv_req *r, mf_srv_err *e) {
    req_defaults(kind, defaults, seed_given, r);
    if (!mf_srv_utf8_valid(body, len)) return BAD(e, "", "the request body is not valid UTF-8 (JSON must be UTF-8)");
    const char *nul = memchr(body, 0, len); /* cJSON would skip it as a blank */
    if (nul) return BAD(e, "", "the request body is not valid JSON: a NUL byte at offset %zu", (size_t)(nul - body));
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!o) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        return BAD(e, "", "the request body is not valid JSON (error near byte %zu of %zu)", at, len);
    }
    int rc = -1;
    while (end && end < body + len && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')) end++;
    if (end && end < body + len) {
        BAD(e, "", "the request body has data after the JSON value (at byte %zu of %zu)", (size_t)(end - body), len);
        goto done;
    }
    if (!cJSON_IsObject(o)) {
        BAD(e, "", "the request body must be a JSON object, got %s", kind_of(o));
        goto done;
    }
    if (refuse_unsupported(o, e) || parse_tools(o, r, e)) goto done;
    if (kind == MF_SRV_CHAT     ? parse_messages(o, r, e)
        : kind == MF_SRV_INFILL ? parse_infill(o, r, e)
                                : parse_prompt(o, r, e))
        goto done;
    if (parse_suffix(o, r, e)) goto done;
    if (parse_limits(o, r, e) || parse_sampling(o, r, e) || parse_more_samplers(o, r, e) ||
        parse_sampler_order(o, r, e) || parse_logit_bias(o, r, e) || parse_stop(o, r, e) ||
        parse_stream(o, r, e) || parse_logprobs(o, r, e) || parse_n_probs(o, r, e) || parse_llama_extras(o, r, e) ||
        parse_constraint(o, r, e))
        goto done;
    rc = 0;
done:
    cJSON_Delete(o);
    if (rc) mf_srv_req_free(r);
    return rc;
}

void mf_srv_req_free(mf_srv_req *r) {
    if (!r) return;
    for (int32_t i = 0; i < r->n_msgs; i++) {
        free((char *)r->msgs[i].content);
        for (int32_t k = 0; k < r->msgs[i].n_tool_calls; k++) {
            free((char *)r->msgs[i].tool_calls[k].name);
            free((char *)r->msgs[i].tool_calls[k].arguments);
        }
        free((void *)r->msgs[i].tool_calls);
    }
    free(r->msgs);
    for (int32_t i = 0; i < r->n_tools; i++) cJSON_free(r->tools[i]);
    free(r->tools);
    free(r->prompt);
    free(r->tokens);
    for (int32_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->model);
    free(r->gbnf);
    free(r->tool_choice_name);
    free(r->input_prefix);
    free(r->input_suffix);
    for (int32_t i = 0; i < r->n_dry_seq; i++) free(r->dry_seq[i]);
    free(r->dry_seq);
    mf_dry_breakers_free(r->dry_own);
    for (int32_t i = 0; i < r->n_extra; i++) free(r->extra[i].filename), free(r->extra[i].text);
    free(r->extra);
    for (int32_t i = 0; i < r->n_response_fields; i++) free(r->response_fields[i]);
    free(r->response_fields);
    for (int32_t i = 0; i < r->n_bias; i++) free(r->bias[i].text);
    free(r->bias);
    free(r->logit_bias);
    mf_srv_kind k = r->kind;
    memset(r, 0, sizeof *r);
    r->kind = k;
}

int mf_srv_req_resolve_bias(mf_srv_req *r, const mf_model *model, int32_t n_vocab, mf_srv_err *e) {
    if (!r->n_bias) return 0;
    int32_t n = 0, cap = r->n_bias;
    mf_logit_bias *out = malloc(sizeof *out * (size_t)cap);
    if (!out) return mf_srv_fail(e, 500, "server_error", "logit_bias", "out of memory");
    r->logit_bias = out;
    for (int32_t i = 0; i < r->n_bias; i++) {
        const mf_srv_bias *b = &r->bias[i];
        if (!b->text) {
            if (b->token < 0 || b->token >= n_vocab)
                return BAD(e, "logit_bias",
                           "'logit_bias' names token %lld, outside the model's vocabulary [0, %d)",
                           (long long)b->token, n_vocab);
            out[n++] = (mf_logit_bias){(mf_token)b->token, b->bias};
            continue;
        }
        mf_token *ids = NULL;
        int32_t m = 0;
        mf_error err = {0};
        if (!model || mf_tokenize(model, b->text, strlen(b->text), false, false, &ids, &m, &err))
            return BAD(e, "logit_bias", "'logit_bias' text \"%.60s\" could not be tokenized: %s", b->text,
                       model ? err.msg : "no model");
        if (m > 1) { /* one slot became several */
            mf_logit_bias *grown = realloc(out, sizeof *out * (size_t)(cap += m - 1));
            if (!grown) {
                free(ids);
                return mf_srv_fail(e, 500, "server_error", "logit_bias", "out of memory");
            }
            r->logit_bias = out = grown;
        }
        for (int32_t k = 0; k < m; k++) out[n++] = (mf_logit_bias){ids[k], b->bias};
        free(ids);
    }
    r->sp.logit_bias = out, r->sp.n_logit_bias = n;
    mf_error err = {0}; /* the sampler's own checks (a list that bans every token), before the request queues */
    int rc = mf_sampler_params_check(&r->sp, n_vocab, &err);
    if (rc == MF_E_NOMEM) return mf_srv_fail(e, 500, "server_error", "logit_bias", "%s", err.msg);
    if (rc) return BAD(e, "logit_bias", "'logit_bias': %s", err.msg);
    return 0;
}

int mf_srv_req_resolve_infill(mf_srv_req *r, const mf_infill_vocab *v, const char *why, int32_t n_vocab,
                              mf_srv_err *e) {
    if (!r->infill_stage) return 0;
    if (!v) return BAD(e, "samplers", "'samplers' lists infill, which this server cannot run: %s", why);
    r->sp.infill = v;
    mf_error err = {0};
    int rc = mf_sampler_params_check(&r->sp, n_vocab, &err);
    if (rc == MF_E_NOMEM) return mf_srv_fail(e, 500, "server_error", "samplers", "%s", err.msg);
    if (rc) return BAD(e, "samplers", "'samplers' lists infill: %s", err.msg);
    return 0;
}
