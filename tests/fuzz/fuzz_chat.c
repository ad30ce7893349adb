/* libFuzzer harness: the chat renderer (src/tok/chat.c) and template recognition.
 *
 * Input: byte 0 holds the options, the rest is the conversation.
 *   bits 0-1   format: chatml, qwen2.5, qwen3, auto (auto must be refused)
 *   bit  2     add_generation_prompt
 *   bits 3-4   enable_thinking: -1, 0, 1, -1
 *   bit  5     pass opts = NULL (the defaults)
 *   bit  6     also run mf_chat_detect and mf_chat_format_parse on the conversation bytes, as a template
 *              text that is not NUL-terminated (the API takes a length) and as a name
 *   bit  7     tools: the first message's content is also the one tool's JSON, and every assistant turn
 *              calls "f" with its reasoning_content (or its content) as the arguments' JSON
 * Messages are separated by 0x1E.  A message's first byte picks the role (system, user, assistant,
 * tool, an unknown role named by the bytes up to 0x1D, or no role at all, which must be refused); the
 * content follows; after a 0x1F comes the reasoning_content (absent without one).
 *
 * Checked: the refusals (no messages, auto, a NULL role; tools: ChatML, text that is not JSON) happen and
 * say why; with tools, a rendering holds the tools block; a rendering's length is
 * its strlen; ChatML is exactly its definition; in every format each user turn appears verbatim as
 * "<|im_start|>user\n" content "<|im_end|>\n"; the generation prompt closes the text when asked. */
#include "fuzz.h"

#include "tok/tok.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MSGS 64

static char *dup_n(const uint8_t *p, size_t n) {
    char *s = malloc(n + 1);
    FAIL_IF(!s);
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

static bool ends_with(const char *s, size_t n, const char *suffix) {
    size_t k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

static void detect_and_parse(const uint8_t *p, size_t n) {
    mf_error err = {0};
    mf_chat_format f;
    /* an exact-size copy: a read past the given length is a heap overflow under ASan */
    char *t = malloc(n ? n : 1);
    FAIL_IF(!t);
    if (n) memcpy(t, p, n);
    int rc = mf_chat_detect(t, n, &f, &err);
    FAIL_IF(rc != 0 && rc != MF_E_UNSUPPORTED);
    FAIL_IF(rc && !err.msg[0]);
    FAIL_IF(!rc && f != MF_CHAT_QWEN3 && f != MF_CHAT_QWEN25);
    free(t);
    char *name = dup_n(p, n);
    rc = mf_chat_format_parse(name, &f, &err);
    FAIL_IF(rc != 0 && rc != MF_E_INVAL);
    if (!rc) {
        mf_chat_format g;
        FAIL_IF(mf_chat_format_parse(mf_chat_format_name(f), &g, &err) != 0 || g != f);
    }
    free(name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    unsigned o = data[0];
    static const mf_chat_format formats[4] = {MF_CHAT_CHATML, MF_CHAT_QWEN25, MF_CHAT_QWEN3, MF_CHAT_AUTO};
    static const int thinking[4] = {-1, 0, 1, -1};
    static const char *const roles[4] = {"system", "user", "assistant", "tool"};
    mf_chat_format fmt = formats[o & 3];
    mf_chat_opts opts = {.add_generation_prompt = (o >> 2) & 1, .enable_thinking = thinking[(o >> 3) & 3]};
    bool null_opts = (o >> 5) & 1;
    if (null_opts) opts = (mf_chat_opts){.add_generation_prompt = true, .enable_thinking = -1};
    const uint8_t *p = data + 1, *end = data + size;
    if ((o >> 6) & 1) detect_and_parse(p, (size_t)(end - p));

    mf_chat_msg msgs[MAX_MSGS];
    mf_chat_tool_call calls[MAX_MSGS];
    bool tools = (o >> 7) & 1 && !null_opts;
    char *owned[3 * MAX_MSGS];
    size_t n = 0, n_owned = 0;
    bool null_role = false;
    while (p < end && n < MAX_MSGS) {
        const uint8_t *e = memchr(p, 0x1E, (size_t)(end - p));
        if (!e) e = end;
        mf_chat_msg *m = &msgs[n++];
        memset(m, 0, sizeof *m);
        const uint8_t *q = p;
        unsigned r = q < e ? *q++ % 6 : 1;
        if (r < 4) m->role = roles[r];
        else if (r == 4) {
            const uint8_t *re = memchr(q, 0x1D, (size_t)(e - q));
            if (!re) re = q;
            m->role = owned[n_owned++] = dup_n(q, (size_t)(re - q));
            q = re < e && *re == 0x1D ? re + 1 : re;
        } else
            null_role = true;
        const uint8_t *sep = memchr(q, 0x1F, (size_t)(e - q));
        m->content = owned[n_owned++] = dup_n(q, (size_t)((sep ? sep : e) - q));
        if (sep) m->reasoning_content = owned[n_owned++] = dup_n(sep + 1, (size_t)(e - sep - 1));
        if (tools && m->role == roles[2]) {
            calls[n - 1] = (mf_chat_tool_call){.name = "f", .arguments = sep ? m->reasoning_content : m->content};
            m->tool_calls = &calls[n - 1], m->n_tool_calls = 1;
        }
        p = e < end ? e + 1 : end;
    }
    if (tools && n) opts.tools = (const char *const *)&msgs[0].content, opts.n_tools = 1;

    char *out = NULL;
    size_t len = 0;
    mf_error err = {0};
    int rc = mf_chat_render(fmt, msgs, n, null_opts ? NULL : &opts, &out, &len, &err);
    if (fmt == MF_CHAT_AUTO || n == 0 || null_role) {
        FAIL_IF(rc != MF_E_INVAL || out != NULL || !err.msg[0]);
        goto done;
    }
    if (tools) { /* refused (ChatML, not JSON) with a reason, or rendered with the tools block */
        FAIL_IF(rc && (out != NULL || !err.msg[0] || (rc != MF_E_INVAL && rc != MF_E_UNSUPPORTED)));
        FAIL_IF(fmt == MF_CHAT_CHATML && rc != MF_E_UNSUPPORTED);
        FAIL_IF(!rc && (!out || strlen(out) != len || !strstr(out, "\n<tools>\n") || !strstr(out, "</tools>")));
        goto done;
    }
    FAIL_IF(rc != 0 || !out);
    FAIL_IF(strlen(out) != len); /* no input holds a NUL, so neither does the text */

    if (fmt == MF_CHAT_CHATML) { /* plain ChatML: every turn as given, in order */
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            size_t rl = strlen(msgs[i].role), cl = strlen(msgs[i].content);
            FAIL_IF(at + 12 + rl + 1 + cl + 11 > len);
            FAIL_IF(memcmp(out + at, "<|im_start|>", 12) || memcmp(out + at + 12, msgs[i].role, rl) ||
                    out[at + 12 + rl] != '\n');
            at += 12 + rl + 1;
            FAIL_IF(memcmp(out + at, msgs[i].content, cl) || memcmp(out + at + cl, "<|im_end|>\n", 11));
            at += cl + 11;
        }
        FAIL_IF(len != at + (opts.add_generation_prompt ? 22 : 0));
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(msgs[i].role, "user")) continue;
        size_t cl = strlen(msgs[i].content);
        char *turn = malloc(cl + 40);
        FAIL_IF(!turn);
        snprintf(turn, cl + 40, "<|im_start|>user\n%s<|im_end|>\n", msgs[i].content);
        FAIL_IF(!strstr(out, turn));
        free(turn);
    }
    if (opts.add_generation_prompt) {
        bool closed = fmt == MF_CHAT_QWEN3 && opts.enable_thinking == 0
                          ? ends_with(out, len, "<|im_start|>assistant\n<think>\n\n</think>\n\n")
                          : ends_with(out, len, "<|im_start|>assistant\n");
        FAIL_IF(!closed);
    }
done:
    free(out);
    for (size_t i = 0; i < n_owned; i++) free(owned[i]);
    return 0;
}
