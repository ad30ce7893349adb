/* server/toolcall: <tool_call> blocks out of a streamed chat answer (see toolcall.h). */
#include "server/toolcall.h"

#include "core/pyjson.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

static const char k_open[] = "<tool_call>", k_close[] = "</tool_call>";

static bool blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* Decided text s[0..n): what it holds up to its last non-blank goes out after the held blanks; its
 * trailing blanks are held (a call may follow them). */
static bool text(mf_srv_tools *t, const char *s, size_t n, mf_srv_buf *content) {
    size_t body = n;
    while (body && blank(s[body - 1])) body--;
    if (body) {
        if (!mf_srv_buf_add(content, t->blank.s, t->blank.n) || !mf_srv_buf_add(content, s, body)) return false;
        t->blank.n = 0;
    }
    return mf_srv_buf_add(&t->blank, s + body, n - body);
}

/* The inside of a call: {"name": string, "arguments": value}.  false: not a call (stays text). */
static bool parse_call(const char *s, size_t n, mf_srv_tool_call *out) {
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(s, n, &end, false);
    bool ok = false;
    while (end && end < s + n && blank(*end)) end++;
    const cJSON *name = o ? cJSON_GetObjectItemCaseSensitive(o, "name") : NULL;
    const cJSON *args = o ? cJSON_GetObjectItemCaseSensitive(o, "arguments") : NULL;
    if (cJSON_IsObject(o) && end == s + n && cJSON_IsString(name) && *name->valuestring && args) {
        char *compact = cJSON_IsString(args) ? NULL : cJSON_PrintUnformatted(args);
        char *py = NULL;
        if (cJSON_IsString(args)) py = strdup(args->valuestring); /* arguments already as a JSON string */
        else if (compact) mf_pyjson(compact, strlen(compact), &py, NULL, NULL);
        cJSON_free(compact);
        out->name = strdup(name->valuestring);
        out->arguments = py;
        ok = out->name && out->arguments;
        if (!ok) free(out->name), free(out->arguments);
    }
    cJSON_Delete(o);
    return ok;
}

/* A closed call: kept, dropped (a second call without parallel_tool_calls), or written back as text. */
static bool close_call(mf_srv_tools *t, size_t inner, mf_srv_buf *content) {
    mf_srv_tool_call c = {0};
    if (!parse_call(t->hold.s, inner, &c)) {
        bool ok = mf_srv_buf_add(content, t->blank.s, t->blank.n) && mf_srv_buf_add(content, k_open, sizeof k_open - 1) &&
                  mf_srv_buf_add(content, t->hold.s, inner + sizeof k_close - 1);
        t->blank.n = 0;
        return ok;
    }
    t->blank.n = 0;
    if (t->single && t->n_calls) {
        free(c.name), free(c.arguments);
        return true;
    }
    if (t->n_calls == t->cap_calls) {
        int32_t cap = t->cap_calls ? 2 * t->cap_calls : 4;
        mf_srv_tool_call *p = realloc(t->calls, (size_t)cap * sizeof *p);
        if (!p) {
            free(c.name), free(c.arguments);
            return false;
        }
        t->calls = p, t->cap_calls = cap;
    }
    t->calls[t->n_calls++] = c;
    return true;
}

static bool step(mf_srv_tools *t, mf_srv_buf *content) {
    mf_srv_buf *h = &t->hold;
    for (;;) {
        if (t->in_call) {
            char *end = h->n ? memmem(h->s, h->n, k_close, sizeof k_close - 1) : NULL;
            if (!end) return true; /* the call is still being written */
            size_t inner = (size_t)(end - h->s);
            if (!close_call(t, inner, content)) return false;
            mf_srv_buf_take(h, inner + sizeof k_close - 1);
            t->in_call = false;
            continue;
        }
        char *open = h->n ? memmem(h->s, h->n, k_open, sizeof k_open - 1) : NULL;
        if (open) {
            size_t k = (size_t)(open - h->s);
            if (!text(t, h->s, k, content)) return false;
            mf_srv_buf_take(h, k + sizeof k_open - 1);
            t->in_call = true;
            continue;
        }
        size_t decided = h->n - mf_srv_partial_tag(h->s, h->n, k_open);
        if (!text(t, h->s, decided, content)) return false;
        mf_srv_buf_take(h, decided);
        return true;
    }
}

bool mf_srv_tools_push(mf_srv_tools *t, const char *s, size_t n, mf_srv_buf *content) {
    if (!mf_srv_buf_add(&t->hold, s, n)) return false;
    return step(t, content);
}

bool mf_srv_tools_flush(mf_srv_tools *t, mf_srv_buf *content) {
    mf_srv_buf *h = &t->hold;
    bool ok = true;
    if (t->in_call) /* never closed: the text as written */
        ok = mf_srv_buf_add(content, t->blank.s, t->blank.n) && mf_srv_buf_add(content, k_open, sizeof k_open - 1) &&
             mf_srv_buf_add(content, h->s, h->n);
    else if (h->n || !t->n_calls) /* blanks after the last call are dropped */
        ok = mf_srv_buf_add(content, t->blank.s, t->blank.n) && mf_srv_buf_add(content, h->s, h->n);
    t->blank.n = 0;
    if (h->n) mf_srv_buf_take(h, h->n);
    t->in_call = false;
    return ok;
}

void mf_srv_tools_free(mf_srv_tools *t) {
    for (int32_t i = 0; i < t->n_calls; i++) free(t->calls[i].name), free(t->calls[i].arguments);
    free(t->calls);
    mf_srv_buf_free(&t->hold);
    mf_srv_buf_free(&t->blank);
    memset(t, 0, sizeof *t);
}
