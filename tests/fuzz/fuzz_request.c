/* libFuzzer harness: the server's request parser (src/server/request.c) and the JSON it answers with.
 *
 * Input: byte 0 picks the route (% 4: chat, completions, native /completion, /infill), the rest is the HTTP
 * body. Properties (request.h's rules):
 *   - any body is parsed or refused, never crashes or leaks;
 *   - a refusal is status 400 (500 only for out of memory) with a non-empty message, and the error JSON
 *     built from it parses back with the same message once cleaned (a message that quotes bad bytes);
 *   - an accepted request keeps its bounds: 1 <= n <= MF_SRV_MAX_N, n_stop <= MF_SRV_MAX_STOP and no empty
 *     stop string, top_logprobs <= 20, exactly one prompt form, every string valid UTF-8 (a FIM request's
 *     prefix, suffix and extra chunks too);
 *   - its logit_bias resolved against a 64-token vocabulary (no model: a text entry is refused) is refused
 * with 400/500 and a message, or gives entries inside the vocabulary with a finite or -inf bias;
 *   - the answer JSON built from an accepted request's strings parses back;
 *   - the body read as a model's answer: the tool-call splitter gives the same content and calls whole and
 *     cut in two at a place byte 0 picks (a stream's deltas join to the whole answer), and the answer JSON
 *     carrying those calls parses back. */
#include "fuzz.h"

#include "server/request.h"
#include "server/respond.h"
#include "server/toolcall.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

static void check_json(char *s) {
    FAIL_IF(!s);
    cJSON *o = cJSON_Parse(s);
    FAIL_IF(!o);
    cJSON_Delete(o);
    free(s);
}

static void split_calls(const char *s, size_t n, size_t cut, mf_srv_tools *t, mf_srv_buf *content) {
    FAIL_IF(!mf_srv_tools_push(t, s, cut, content) || !mf_srv_tools_push(t, s + cut, n - cut, content) ||
            !mf_srv_tools_flush(t, content));
}

static void check_tool_split(const char *s, size_t n, size_t cut) {
    mf_srv_tools a = {0}, b = {0};
    mf_srv_buf ca = {0}, cb = {0};
    split_calls(s, n, n, &a, &ca);
    split_calls(s, n, cut % (n + 1), &b, &cb);
    FAIL_IF(ca.n != cb.n || (ca.n && memcmp(ca.s, cb.s, ca.n)) || a.n_calls != b.n_calls);
    for (int32_t i = 0; i < a.n_calls; i++) {
        FAIL_IF(strcmp(a.calls[i].name, b.calls[i].name) || strcmp(a.calls[i].arguments, b.calls[i].arguments));
        FAIL_IF(!*a.calls[i].name);
    }
    if (a.n_calls && mf_srv_utf8_valid(ca.s ? ca.s : "", ca.n) && !memchr(ca.s ? ca.s : "", 0, ca.n)) {
        mf_srv_buf_add(&ca, "", 0);
        mf_srv_head h = {.kind = MF_SRV_CHAT, .id = "id-1", .model = "m", .created = 1};
        mf_srv_choice ch = {.content = ca.s, .finish_reason = "tool_calls", .calls = {a.calls, 0, a.n_calls, 7}};
        mf_srv_usage u = {.prompt_tokens = 1, .completion_tokens = 2};
        bool utf8 = true; /* names and arguments come from parsed JSON strings, which cJSON may leave ill-formed */
        for (int32_t i = 0; i < a.n_calls; i++)
            utf8 = utf8 && mf_srv_utf8_valid(a.calls[i].name, strlen(a.calls[i].name)) &&
                   mf_srv_utf8_valid(a.calls[i].arguments, strlen(a.calls[i].arguments));
        if (utf8) check_json(mf_srv_final_json(&h, &ch, 1, &u));
    }
    mf_srv_tools_free(&a), mf_srv_tools_free(&b);
    mf_srv_buf_free(&ca), mf_srv_buf_free(&cb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    check_tool_split((const char *)data + 1, size - 1, (size_t)data[0] * 7);
    static const mf_srv_kind k_kinds[4] = {MF_SRV_CHAT, MF_SRV_COMPLETION, MF_SRV_NATIVE, MF_SRV_INFILL};
    const mf_srv_kind kind = k_kinds[data[0] % 4];
    mf_srv_req r;
    mf_srv_err e;
    memset(&e, 0, sizeof e);
    if (mf_srv_req_parse(kind, (const char *)data + 1, size - 1, &r, &e)) {
        FAIL_IF(e.status != 400 && e.status != 500);
        FAIL_IF(!e.msg[0] || !e.type);
        check_json(mf_srv_error_json(&e));
        return 0;
    }
    FAIL_IF(r.n < 1 || r.n > MF_SRV_MAX_N);
    FAIL_IF(r.n_stop < 0 || r.n_stop > MF_SRV_MAX_STOP);
    for (int32_t i = 0; i < r.n_stop; i++) FAIL_IF(!r.stop[i][0] || !mf_srv_utf8_valid(r.stop[i], strlen(r.stop[i])));
    FAIL_IF(r.top_logprobs < 0 || r.top_logprobs > MF_SRV_MAX_TOP_LOGPROBS);
    FAIL_IF(r.n_indent < 0 || r.t_max_predict_ms < 0 || r.n_response_fields > MF_SRV_MAX_RESPONSE_FIELDS);
    for (int32_t i = 0; i < r.n_response_fields; i++)
        FAIL_IF(!r.response_fields[i] || !mf_srv_utf8_valid(r.response_fields[i], strlen(r.response_fields[i])));
    if (kind == MF_SRV_CHAT) {
        FAIL_IF(r.n_msgs < 1 || r.prompt || r.tokens);
        for (int32_t i = 0; i < r.n_msgs; i++)
            FAIL_IF(!r.msgs[i].role || !mf_srv_utf8_valid(r.msgs[i].content, strlen(r.msgs[i].content)));
    } else {
        FAIL_IF((r.prompt != NULL) == (r.tokens != NULL));
        if (r.prompt) FAIL_IF(!mf_srv_utf8_valid(r.prompt, strlen(r.prompt)));
        for (int32_t i = 0; i < r.n_tokens; i++) FAIL_IF(r.tokens[i] < 0);
    }
    FAIL_IF(r.fim != (kind == MF_SRV_INFILL || r.input_suffix != NULL));
    if (r.fim) {
        FAIL_IF(!r.input_prefix || !r.input_suffix || !r.prompt);
        FAIL_IF(!mf_srv_utf8_valid(r.input_prefix, strlen(r.input_prefix)) ||
                !mf_srv_utf8_valid(r.input_suffix, strlen(r.input_suffix)));
        for (int32_t i = 0; i < r.n_extra; i++)
            FAIL_IF(!r.extra[i].filename || !mf_srv_utf8_valid(r.extra[i].text, strlen(r.extra[i].text)));
    }
    for (int32_t i = 0; i < r.n_dry_seq; i++)
        FAIL_IF(!r.dry_seq[i][0] || strlen(r.dry_seq[i]) > MF_SRV_MAX_BREAKER_BYTES ||
                !mf_srv_utf8_valid(r.dry_seq[i], strlen(r.dry_seq[i])));
    for (int32_t i = 0; i < r.n_bias; i++)
        FAIL_IF(r.bias[i].text && (!r.bias[i].text[0] || !mf_srv_utf8_valid(r.bias[i].text, strlen(r.bias[i].text))));
    memset(&e, 0, sizeof e);
    if (mf_srv_req_resolve_bias(&r, NULL, 64, &e)) {
        FAIL_IF((e.status != 400 && e.status != 500) || !e.msg[0]);
    } else {
        mf_error err = {0}; /* what the server accepted, the sampler takes: the engine never refuses it later */
        FAIL_IF(mf_sampler_params_check(&r.sp, 64, &err) != 0);
        FAIL_IF(r.sp.n_logit_bias != r.n_bias || (r.n_bias && r.sp.logit_bias != r.logit_bias));
        for (int32_t i = 0; i < r.sp.n_logit_bias; i++)
            FAIL_IF(r.logit_bias[i].token < 0 || r.logit_bias[i].token >= 64 || r.logit_bias[i].bias != r.logit_bias[i].bias ||
                    r.logit_bias[i].bias == INFINITY);
    }
    /* an answer echoing the request's text parses back */
    const char *text = kind == MF_SRV_CHAT ? r.msgs[0].content : r.prompt ? r.prompt : "";
    mf_srv_head h = {.kind = mf_srv_shape(kind), .id = "id-1", .model = r.model ? r.model : "m", .created = 1,
                     .return_tokens = r.return_tokens, .fields = r.response_fields, .n_fields = r.n_response_fields,
                     .fields_given = r.response_fields_given};
    mf_srv_choice ch = {.content = (char *)text, .finish_reason = "stop"};
    mf_srv_usage u = {.prompt_tokens = 1, .completion_tokens = 2};
    check_json(mf_srv_final_json(&h, &ch, 1, &u));
    check_json(mf_srv_chunk_json(&h, 0, true, text, NULL, NULL, NULL, NULL, 0));
    mf_srv_req_free(&r);
    return 0;
}
