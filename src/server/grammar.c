/* server/grammar: the GBNF text a request's constraint stands for - a JSON Schema (response_format,
 * json_schema), forced tool calls (tool_choice "required" or a named function), and the wrapper that lets
 * a reasoning model think before its constrained answer.  Pure text work over src/grammar's compiler, so
 * request.c can refuse a bad schema with 400 before anything runs. */
#include "server/grammar.h"

#include "grammar/grammar.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *s;
    size_t n, cap;
    bool oom;
} sb;

static void put(sb *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->s, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->s = q, b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void puts_(sb *b, const char *s) {
    put(b, s, strlen(s));
}

/* s as the inside of a GBNF literal: quotes and backslashes escaped, control bytes as \xHH. */
static void put_lit(sb *b, const char *s) {
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        char e[8];
        if (c == '"' || c == '\\')
            snprintf(e, sizeof e, "\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            snprintf(e, sizeof e, "\\x%02X", c);
        else
            e[0] = (char)c, e[1] = 0;
        puts_(b, e);
    }
}

int mf_srv_schema_gbnf(const char *schema, size_t len, char **out, mf_error *err) {
    return mf_json_schema_to_gbnf(schema, len, out, err);
}

/* One tool's alternative of the call rule: its name as JSON, then its arguments by its parameters' schema
 * (rules prefixed t<i>- so the tools' grammars live side by side). */
static int tool_alternative(const char *tool_json, int i, bool first, sb *rules, sb *alt, mf_error *err) {
    cJSON *t = cJSON_Parse(tool_json);
    const cJSON *fn = t ? cJSON_GetObjectItemCaseSensitive(t, "function") : NULL;
    const cJSON *name = fn ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
    const cJSON *params = fn ? cJSON_GetObjectItemCaseSensitive(fn, "parameters") : NULL;
    char *name_json = cJSON_IsString(name) ? cJSON_PrintUnformatted(name) : NULL;
    char *ps = params && !cJSON_IsNull(params) ? cJSON_PrintUnformatted(params) : NULL;
    char *gbnf = NULL, *renamed = NULL, prefix[32];
    snprintf(prefix, sizeof prefix, "t%d-", i);
    int rc = 0;
    if (!name_json) rc = mf_err(err, MF_E_INVAL, "tools[%d] has no function name", i);
    if (!rc) {
        const char *schema = ps ? ps : "{\"type\": \"object\"}";
        rc = mf_json_schema_to_gbnf(schema, strlen(schema), &gbnf, err);
        if (rc) {
            mf_error inner = *err;
            rc = mf_err(err, rc, "tools[%d] (%s): its parameters: %s", i, name->valuestring, inner.msg);
        }
    }
    if (!rc) rc = mf_gbnf_prefix(gbnf, strlen(gbnf), prefix, &renamed, err);
    if (!rc) {
        puts_(rules, renamed);
        puts_(rules, "\n");
        puts_(alt, first ? "\"" : " |\n    \"");
        put_lit(alt, name_json);
        puts_(alt, ", \\\"arguments\\\": \" ");
        puts_(alt, prefix);
        puts_(alt, "root");
    }
    cJSON_Delete(t);
    free(name_json);
    free(ps);
    free(gbnf);
    free(renamed);
    return rc;
}

int mf_srv_tools_gbnf(char *const *tools, int32_t n_tools, const char *only, bool parallel, char **out,
                      mf_error *err) {
    *out = NULL;
    sb rules = {0}, alt = {0}, g = {0};
    int rc = 0, n_alt = 0;
    for (int32_t i = 0; i < n_tools && !rc; i++) {
        if (only) { /* a named function: that tool alone */
            cJSON *t = cJSON_Parse(tools[i]);
            const cJSON *fn = t ? cJSON_GetObjectItemCaseSensitive(t, "function") : NULL;
            const cJSON *name = fn ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
            bool it = cJSON_IsString(name) && !strcmp(name->valuestring, only);
            cJSON_Delete(t);
            if (!it) continue;
        }
        rc = tool_alternative(tools[i], (int)i, n_alt == 0, &rules, &alt, err);
        n_alt++;
    }
    if (!rc && !n_alt)
        rc = mf_err(err, MF_E_INVAL, only ? "no tool in 'tools' is named '%s'" : "no tools to call%s",
                    only ? only : "");
    if (!rc) {
        /* Qwen's format (the tool prompt of its templates): one JSON object per <tool_call> block */
        puts_(&g, parallel ? "root ::= call (\"\\n\" call)*\n" : "root ::= call\n");
        puts_(&g, "call ::= \"<tool_call>\\n{\\\"name\\\": \" (\n    ");
        put(&g, alt.s, alt.n);
        puts_(&g, "\n) \"}\\n</tool_call>\"\n");
        put(&g, rules.s, rules.n);
        if (rules.oom || alt.oom || g.oom)
            rc = mf_err(err, MF_E_NOMEM, "out of memory building the tool-call grammar");
    }
    free(rules.s);
    free(alt.s);
    if (rc)
        free(g.s);
    else
        *out = g.s;
    return rc;
}

int mf_srv_think_gbnf(const char *gbnf, char **out, mf_error *err) {
    *out = NULL;
    char *renamed = NULL;
    int rc = mf_gbnf_prefix(gbnf, strlen(gbnf), "a-", &renamed, err);
    if (rc) return rc;
    /* after </think> Qwen3 writes a blank line before the answer: a few blanks, bounded */
    sb g = {0};
    puts_(&g, "root ::= [ \\t\\n]{0,4} a-root\n");
    puts_(&g, renamed);
    free(renamed);
    if (g.oom) return mf_err(err, MF_E_NOMEM, "out of memory building a grammar");
    *out = g.s;
    return 0;
}
