/* The server's pure parts: request validation (every refusal names the field and value, unknown fields
 * are ignored, unsupported ones refused), OpenAI response shapes, <think> splitting while streaming, the
 * job hand-over's answer-exactly-once rule, and the Prometheus text. */
#include "grammar/grammar.h"
#include "harness.h"
#include "server/grammar.h"
#include "server/infill.h"

#include "core/utf8.h"

#include "server/job.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/respond.h"
#include "server/reuse.h"
#include "server/think.h"
#include "server/toolcall.h"

#include <cJSON.h>
#include <math.h>

static int parse(mf_srv_kind k, const char *body, mf_srv_req *r, mf_srv_err *e) {
    return mf_srv_req_parse(k, body, strlen(body), r, e);
}

static void test_chat_request_fields_are_read(void) {
    mf_srv_req r;
    mf_srv_err e = {0};
    const char *b = "{\"model\":\"x\",\"messages\":[{\"role\":\"developer\",\"content\":\"be brief\"},"
                    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"he\"},{\"type\":\"text\",\"text\":\"llo\"}]}],"
                    "\"max_tokens\":7,\"temperature\":0,\"top_p\":0.5,\"top_k\":3,\"min_p\":0.1,\"seed\":42,"
                    "\"stop\":[\"a\",\"\",\"bc\"],\"stream\":true,\"stream_options\":{\"include_usage\":true},"
                    "\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,\"repeat_penalty\":1.1,\"repeat_last_n\":32,"
                    "\"logprobs\":true,\"top_logprobs\":2,\"n\":2,\"cache_prompt\":false,\"id_slot\":1,"
                    "\"chat_template_kwargs\":{\"enable_thinking\":false},\"user\":\"u\",\"some_future_field\":[1,2]}";
    REQUIRE(parse(MF_SRV_CHAT, b, &r, &e) == 0, "refused: %s", e.msg);
    CHECK(r.n_msgs == 2, "n_msgs %d", r.n_msgs);
    CHECK(!strcmp(r.msgs[0].role, "system"), "developer maps to system, got %s", r.msgs[0].role);
    CHECK(!strcmp(r.msgs[1].role, "user"), "role outlives the parsed tree: '%s'", r.msgs[1].role);
    CHECK(!strcmp(r.msgs[1].content, "hello"), "text parts joined: '%s'", r.msgs[1].content);
    CHECK(r.max_tokens == 7 && r.sp.temp == 0 && r.sp.top_p == 0.5f && r.sp.top_k == 3, "limits/sampling");
    CHECK(r.sp.min_p == 0.1f && r.seed_given && r.sp.seed == 42, "min_p/seed");
    CHECK(r.n_stop == 2 && !strcmp(r.stop[0], "a") && !strcmp(r.stop[1], "bc"), "stop: empty strings dropped, n=%d",
          r.n_stop);
    CHECK(r.stream && r.include_usage && r.logprobs && r.top_logprobs == 2 && r.n == 2, "stream/logprobs/n");
    CHECK(r.sp.penalty_present == 0.5f && r.sp.penalty_freq == -0.5f && r.sp.penalty_repeat == 1.1f &&
              r.sp.penalty_last_n == 32, "penalties");
    CHECK(!r.cache_prompt && r.id_slot == 1 && r.enable_thinking == 0, "llama-server extras");
    CHECK(r.model && !strcmp(r.model, "x"), "model");
    mf_srv_req_free(&r);
}

static void test_defaults_follow_llama_server(void) {
    mf_srv_req r;
    mf_srv_err e = {0};
    REQUIRE(parse(MF_SRV_COMPLETION, "{\"prompt\":\"hi\"}", &r, &e) == 0, "%s", e.msg);
    mf_sampler_params d = mf_sampler_default_params();
    CHECK(r.max_tokens == -1 && r.n == 1 && r.cache_prompt && r.id_slot == -1 && !r.stream, "defaults");
    CHECK(r.sp.temp == d.temp && r.sp.top_k == d.top_k && !r.seed_given, "sampler defaults");
    CHECK(!strcmp(r.prompt, "hi") && !r.tokens, "prompt text");
    mf_srv_req_free(&r);
    REQUIRE(parse(MF_SRV_COMPLETION, "{\"prompt\":[1,2,3],\"n_predict\":-1,\"max_tokens\":null}", &r, &e) == 0, "%s",
            e.msg);
    CHECK(r.n_tokens == 3 && r.tokens[2] == 3 && !r.prompt, "token prompt");
    mf_srv_req_free(&r);
    REQUIRE(parse(MF_SRV_COMPLETION, "{\"prompt\":[\"only one\"]}", &r, &e) == 0, "%s", e.msg);
    CHECK(r.prompt && !strcmp(r.prompt, "only one"), "one-string array");
    mf_srv_req_free(&r);
}

/* Each bad body is refused with 400, naming the field (param) and showing the value or the rule. */
static void test_bad_requests_name_field_and_value(void) {
    static const struct {
        mf_srv_kind k;
        const char *body, *param, *needle;
    } cases[] = {
        {MF_SRV_CHAT, "", "", "not valid JSON"},
        {MF_SRV_CHAT, "{", "", "not valid JSON"},
        {MF_SRV_CHAT, "[1]", "", "must be a JSON object"},
        {MF_SRV_CHAT, "{} x", "", "after the JSON value"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", "", "UTF-8"},
        {MF_SRV_CHAT, "{}", "messages", "required"},
        {MF_SRV_CHAT, "{\"messages\":\"hi\"}", "messages", "array"},
        {MF_SRV_CHAT, "{\"messages\":[]}", "messages", "at least one"},
        {MF_SRV_CHAT, "{\"messages\":[1]}", "messages[0]", "object"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", "messages[0].role",
         "'function'"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages[0].content", "a number"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
         "messages[0].content", "image_url"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"hot\"}", "temperature",
         "\"hot\""},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":9}", "temperature", "9"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-5}", "max_tokens", "-5"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1.5}", "max_tokens", "1.5"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1e300}", "max_tokens",
         "1e+300"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":0}", "n", "got 0"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":1000}", "n", "1000"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":1}", "stream", "boolean"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":{}}", "stream_options",
         "only allowed"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[1]}", "stop", "stop[0]"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":3}", "top_logprobs",
         "logprobs"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"seed\":1e18}", "seed", "1e+18"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\"}]}",
         "tools[0]", "non-empty string 'name'"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":{}}", "tools", "array"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"web_search\"}]}",
         "tools[0]", "\"function\""},
        {MF_SRV_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":"
         "{\"name\":\"f\",\"parameters\":[]}}]}",
         "tools[0]", "JSON Schema object"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}", "tool_choice",
         "has no 'tools'"},
        {MF_SRV_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":{\"type\":\"function\",\"function\":"
         "{\"name\":\"f\"}},\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"g\"}}]}",
         "tool_choice", "no tool in 'tools' is named 'f'"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":{\"type\":\"function\"}}",
         "tool_choice", "{\"name\": ...}"},
        {MF_SRV_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\",\"tools\":[{\"type\":"
         "\"function\",\"function\":{\"name\":\"g\",\"parameters\":{\"type\":\"object\",\"properties\":{\"zip\":{"
         "\"type\":\"string\",\"pattern\":\"[0-9]+\"}}}}}]}",
         "tool_choice", "'pattern'"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"sometimes\"}", "tool_choice",
         "\"auto\", \"none\""},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"parallel_tool_calls\":1}",
         "parallel_tool_calls", "boolean"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"functions\":[{\"name\":\"f\"}]}",
         "functions", "as 'tools'"},
        {MF_SRV_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[{\"function\":{\"name\":\"f\","
         "\"arguments\":\"{}\"}}]}]}",
         "messages[0].tool_calls", "only assistant turns"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\"}}]}]}",
         "messages[0].tool_calls[0]", "\"arguments\": string"},
        {MF_SRV_CHAT,
         "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\","
         "\"arguments\":\"{city: 1}\"}}]}]}",
         "messages[0].tool_calls[0]", "must hold JSON text"},
        {MF_SRV_CHAT,
         "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"custom\",\"function\":{\"name\":"
         "\"f\",\"arguments\":\"{}\"}}]}]}",
         "messages[0].tool_calls[0]", "\"function\""},
        {MF_SRV_COMPLETION,
         "{\"prompt\":\"x\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}", "tools",
         "/v1/chat/completions"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"xml\"}}",
         "response_format", "\"json_schema\", got \"xml\""},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\"}}",
         "response_format", "'json_schema.schema'"},
        {MF_SRV_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
         "\"json_schema\":{\"name\":\"n\",\"schema\":{\"type\":\"string\",\"format\":\"email\"}}}}",
         "response_format", "'format'"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"grammar\":\"root ::= \\\"a\"}", "grammar",
         "line 1, column 10"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"grammar\":7}", "grammar", "string of GBNF"},
        {MF_SRV_NATIVE, "{\"prompt\":\"x\",\"json_schema\":{\"type\":\"object\"},\"grammar\":\"root ::= \\\"a\\\"\"}",
         "grammar", "has 2"},
        {MF_SRV_NATIVE, "{\"prompt\":\"x\",\"json_schema\":{\"type\":\"integer\"},\"ignore_eos\":true}", "ignore_eos",
         "do not mix"},
        {MF_SRV_NATIVE, "{\"prompt\":\"x\",\"json_schema\":[1]}", "json_schema", "JSON Schema object"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":5}", "logit_bias",
         "object {\"token id\": bias}"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"1\":\"5\"}}", "logit_bias",
         "'logit_bias[\"1\"]' must be a number"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"1\":true}}", "logit_bias",
         "or false (a ban), got a boolean true"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"1\":1e7}}", "logit_bias",
         "[-1e6, 1e6]"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"\":1}}", "logit_bias",
         "the empty text"},
        {MF_SRV_NATIVE, "{\"prompt\":\"x\",\"logit_bias\":[[1,2,3]]}", "logit_bias", "'logit_bias[0]' must be a pair"},
        {MF_SRV_NATIVE, "{\"prompt\":\"x\",\"logit_bias\":[[1,2],5]}", "logit_bias", "'logit_bias[1]' must be a pair"},
        {MF_SRV_NATIVE, "{\"prompt\":\"x\",\"logit_bias\":[[1.5,2]]}", "logit_bias", "token 1.5, not an integer"},
        {MF_SRV_NATIVE, "{\"prompt\":\"x\",\"logit_bias\":[[null,2]]}", "logit_bias", "got null first"},
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":{\"enable_thinking\":\"no\"}}",
         "enable_thinking", "boolean"},
        {MF_SRV_COMPLETION, "{}", "prompt", "required"},
        {MF_SRV_COMPLETION, "{\"prompt\":[]}", "prompt", "empty"},
        {MF_SRV_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", "prompt", "2 prompts"},
        {MF_SRV_COMPLETION, "{\"prompt\":[1,-2]}", "prompt", "prompt[1]"},
        {MF_SRV_COMPLETION, "{\"prompt\":\"x\",\"echo\":true}", "echo", "not supported"},
        {MF_SRV_COMPLETION, "{\"prompt\":\"x\",\"best_of\":3}", "best_of", "not supported"},
        {MF_SRV_NATIVE, "{\"prompt\":\"x\",\"n_predict\":-2}", "n_predict", "-2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mf_srv_req r;
        mf_srv_err e = {0};
        int rc = parse(cases[i].k, cases[i].body, &r, &e);
        CHECK(rc != 0, "case %zu accepted: %s", i, cases[i].body);
        if (rc == 0) {
            mf_srv_req_free(&r);
            continue;
        }
        CHECK(e.status == 400, "case %zu status %d", i, e.status);
        CHECK(!strcmp(e.param, cases[i].param), "case %zu param '%s', want '%s' (%s)", i, e.param, cases[i].param,
              e.msg);
        CHECK(strstr(e.msg, cases[i].needle) != NULL, "case %zu message '%s' lacks '%s'", i, e.msg, cases[i].needle);
    }
}

/* logit_bias in both shapes: OpenAI's object (id keys; other keys are texts, as llama-server reads them) and
 * llama-server's pairs (false bans).  Ids resolve against the vocabulary in order; an id outside it, and a
 * list banning every token, are refused when resolved. */
static void test_logit_bias_shapes_are_read(void) {
    mf_srv_req r;
    mf_srv_err e = {0};
    REQUIRE(parse(MF_SRV_CHAT,
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                  "\"logit_bias\":{\"7\":-2.5,\"hello\":3,\"3\":false}}",
                  &r, &e) == 0,
            "refused: %s", e.msg);
    CHECK(r.n_bias == 3 && r.bias[0].token == 7 && !r.bias[0].text && r.bias[0].bias == -2.5f, "object entry 0");
    CHECK(r.bias[1].text && !strcmp(r.bias[1].text, "hello") && r.bias[1].bias == 3.0f, "a text key");
    CHECK(r.bias[2].token == 3 && r.bias[2].bias == -INFINITY, "false is a ban");
    mf_srv_req_free(&r);
    REQUIRE(parse(MF_SRV_NATIVE, "{\"prompt\":\"x\",\"logit_bias\":[[5,1],[5,0.5],[2,false]]}", &r, &e) == 0,
            "refused: %s", e.msg);
    REQUIRE(mf_srv_req_resolve_bias(&r, NULL, 8, &e) == 0, "resolve: %s", e.msg);
    CHECK(r.sp.n_logit_bias == 3 && r.sp.logit_bias == r.logit_bias, "resolved list");
    CHECK(r.logit_bias[0].token == 5 && r.logit_bias[1].bias == 0.5f && r.logit_bias[2].bias == -INFINITY,
          "in order, duplicates kept (they add up)");
    mf_srv_req_free(&r);
    REQUIRE(parse(MF_SRV_NATIVE, "{\"prompt\":\"x\",\"logit_bias\":{}}", &r, &e) == 0 && !r.n_bias, "{} is no bias");
    mf_srv_req_free(&r);
    static const struct {
        const char *lb, *needle;
    } bad[] = {
        {"{\"8\":1}", "names token 8, outside the model's vocabulary [0, 8)"},
        {"{\"-1\":1}", "names token -1"},
        {"[[99999999999999999999,1]]", "names token 9223372036854775807"},
        {"[[0,false],[1,false],[2,false],[3,false],[4,false],[5,false],[6,false],[7,false]]", "bans every one of the 8"},
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(bad); i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"prompt\":\"x\",\"logit_bias\":%s}", bad[i].lb);
        REQUIRE(parse(MF_SRV_NATIVE, body, &r, &e) == 0, "case %zu refused at parse: %s", i, e.msg);
        int rc = mf_srv_req_resolve_bias(&r, NULL, 8, &e);
        CHECK(rc && e.status == 400 && !strcmp(e.param, "logit_bias") && strstr(e.msg, bad[i].needle),
              "case %zu: rc %d, %d %s: %s", i, rc, e.status, e.param, e.msg);
        mf_srv_req_free(&r);
    }
}

/* /infill's fields (llama-server's) and OpenAI's suffix on /v1/completions, which turns the prompt into the
 * prefix; both are FIM requests.  suffix elsewhere, or with token ids, is refused. */
static void test_infill_requests_are_read(void) {
    mf_srv_req r;
    mf_srv_err e = {0};
    REQUIRE(parse(MF_SRV_INFILL,
                  "{\"input_prefix\":\"def f():\\n\",\"input_suffix\":\"\",\"input_extra\":[{\"filename\":\"a.py\","
                  "\"text\":\"A=1\"},{\"text\":\"B\"}],\"n_predict\":9}",
                  &r, &e) == 0,
            "refused: %s", e.msg);
    CHECK(r.fim && !strcmp(r.input_prefix, "def f():\n") && !strcmp(r.input_suffix, "") && r.prompt && !*r.prompt,
          "prefix/suffix/prompt");
    CHECK(r.n_extra == 2 && !strcmp(r.extra[0].filename, "a.py") && !strcmp(r.extra[0].text, "A=1") &&
              !strcmp(r.extra[1].filename, "tmp") && r.max_tokens == 9,
          "extra chunks (a missing filename is llama-server's \"tmp\")");
    CHECK(mf_srv_shape(r.kind) == MF_SRV_NATIVE, "/infill answers as /completion");
    mf_srv_req_free(&r);
    REQUIRE(parse(MF_SRV_COMPLETION, "{\"prompt\":\"x = \",\"suffix\":\";\"}", &r, &e) == 0, "refused: %s", e.msg);
    CHECK(r.fim && !strcmp(r.input_prefix, "x = ") && !strcmp(r.input_suffix, ";") && !*r.prompt && !r.n_extra,
          "suffix: the prompt is the prefix");
    mf_srv_req_free(&r);
    static const struct {
        mf_srv_kind k;
        const char *body, *param, *needle;
    } bad[] = {
        {MF_SRV_INFILL, "{\"input_suffix\":\"\"}", "input_prefix", "'input_prefix' is required"},
        {MF_SRV_INFILL, "{\"input_prefix\":\"a\",\"input_suffix\":1}", "input_suffix", "must be a string"},
        {MF_SRV_INFILL, "{\"input_prefix\":\"a\",\"input_suffix\":\"\",\"prompt\":[1]}", "prompt", "must be a string"},
        {MF_SRV_INFILL, "{\"input_prefix\":\"a\",\"input_suffix\":\"\",\"input_extra\":[{\"text\":1}]}", "input_extra",
         "input_extra[0]"},
        {MF_SRV_INFILL, "{\"input_prefix\":\"a\",\"input_suffix\":\"\",\"input_extra\":[{\"text\":\"t\",\"filename\":2}]}",
         "input_extra", "input_extra[0]"},
        {MF_SRV_INFILL, "{\"input_prefix\":\"a\",\"input_suffix\":\"\",\"tools\":[{\"type\":\"function\",\"function\":"
                        "{\"name\":\"f\"}}]}",
         "tools", "/v1/chat/completions"},
        {MF_SRV_NATIVE, "{\"prompt\":\"a\",\"suffix\":\"b\"}", "suffix", "belongs to /v1/completions"},
        {MF_SRV_COMPLETION, "{\"prompt\":[1],\"suffix\":\"b\"}", "suffix", "not token ids"},
        {MF_SRV_COMPLETION, "{\"prompt\":\"a\",\"suffix\":[\"b\"]}", "suffix", "must be a string"},
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(bad); i++) {
        int rc = parse(bad[i].k, bad[i].body, &r, &e);
        CHECK(rc && e.status == 400 && !strcmp(e.param, bad[i].param) && strstr(e.msg, bad[i].needle),
              "case %zu: rc %d, %d '%s': %s", i, rc, e.status, e.param, e.msg);
        if (!rc) mf_srv_req_free(&r);
    }
}

/* The FIM layout and its cuts, on made-up ids: extra context (its end), <pre>, prefix (its end), prompt,
 * <suf>, suffix (its start), <mid>; a window of 16 keeps 12 of the prefix and 4 - 2 - prompt of the suffix;
 * the extra context gets what the window, twice max_tokens, 4 and the prompt leave of the context. */
static void test_fim_layout_cuts_as_llama_server(void) {
    mf_token x[40], pre[30], suf[10], pr[1] = {500};
    for (int i = 0; i < 40; i++) x[i] = 100 + i;
    for (int i = 0; i < 30; i++) pre[i] = 200 + i;
    for (int i = 0; i < 10; i++) suf[i] = 300 + i;
    mf_srv_fim f = {x, pre, pr, suf, 40, 30, 1, 10, -1, -2, -3, 16, 64, 5};
    mf_token *t = NULL;
    int32_t n = 0;
    REQUIRE(mf_srv_fim_layout(&f, &t, &n) == 0, "layout");
    /* extra room: 64 - 16 - 10 - 4 - 1 = 33 -> ids 107..139; prefix 12 -> 218..229; suffix 16/4 - 2 - 1 = 1 -> 300 */
    bool ok = n == 33 + 1 + 12 + 1 + 1 + 1 + 1;
    for (int i = 0; ok && i < 33; i++) ok = t[i] == 107 + i;
    ok = ok && t[33] == -1;
    for (int i = 0; ok && i < 12; i++) ok = t[34 + i] == 218 + i;
    ok = ok && t[46] == 500 && t[47] == -2 && t[48] == 300 && t[49] == -3;
    CHECK(ok, "layout of %d tokens: extra from %d, after <pre> %d, the last three %d %d %d", n, t[0], n > 34 ? t[34] : -9,
          n > 2 ? t[n - 3] : -9, n > 1 ? t[n - 2] : -9, t[n - 1]);
    free(t);
    f.n_predict = -1, f.n_ctx = 24; /* no limit counts as 0; the room is 24 - 16 - 4 - 1 = 3 */
    REQUIRE(mf_srv_fim_layout(&f, &t, &n) == 0, "layout");
    CHECK(n == 3 + 17 && t[0] == 137 && t[3] == -1, "a small context: %d tokens, first %d", n, t[0]);
    free(t);
    f.n_predict = INT32_MAX; /* max_tokens' largest: no room for the extra context (and no overflow) */
    REQUIRE(mf_srv_fim_layout(&f, &t, &n) == 0, "layout");
    CHECK(n == 17 && t[0] == -1, "n_predict INT32_MAX: %d tokens, first %d", n, t[0]);
    free(t);
    const mf_srv_fim empty = {.pre = -1, .suf = -2, .mid = -3, .window = 16, .n_ctx = 64, .n_predict = -1};
    REQUIRE(mf_srv_fim_layout(&empty, &t, &n) == 0, "layout");
    CHECK(n == 3 && t[0] == -1 && t[1] == -2 && t[2] == -3, "nothing but the FIM tokens: %d", n);
    free(t);
    CHECK(mf_srv_fim_window(128, 4096) == 2048 && mf_srv_fim_window(4096, 16384) == 4096 &&
              mf_srv_fim_window(512, 1024) == 512,
          "window: %d %d %d", mf_srv_fim_window(128, 4096), mf_srv_fim_window(4096, 16384), mf_srv_fim_window(512, 1024));
}

/* llama-server's sampler fields are read into the sampler's (their "off" values too: clients send every
 * field), a value outside the engine's range is refused naming the field, n_probs beyond 20 too;
 * 'samplers' switches off the stages it leaves out and may not reorder minfer's chain. */
static void test_llama_server_sampler_fields(void) {
    mf_srv_req r;
    mf_srv_err e = {0};
    REQUIRE(parse(MF_SRV_NATIVE,
                  "{\"prompt\":\"x\",\"mirostat\":0,\"mirostat_tau\":5,\"dry_multiplier\":0,\"dry_base\":1.75,"
                  "\"xtc_probability\":0,\"xtc_threshold\":0.1,\"top_n_sigma\":-1,\"dynatemp_range\":0,\"n_probs\":0,"
                  "\"samplers\":[\"penalties\",\"dry\",\"top_n_sigma\",\"top_k\",\"typ_p\",\"top_p\",\"min_p\",\"xtc\","
                  "\"temperature\"]}",
                  &r, &e) == 0,
            "the off values refused: %s", e.msg);
    mf_sampler_params d = mf_sampler_default_params();
    CHECK(r.sp.top_k == d.top_k && r.sp.top_p == d.top_p && r.sp.min_p == d.min_p && r.sp.temp == d.temp &&
              r.sp.penalty_last_n == d.penalty_last_n,
          "llama.cpp's full order changes nothing");
    CHECK(r.sp.dry_multiplier == 0 && r.sp.mirostat == 0 && r.sp.xtc_probability == 0 && !r.n_dry_seq,
          "the off values stay off");
    mf_srv_req_free(&r);
    REQUIRE(parse(MF_SRV_NATIVE,
                  "{\"prompt\":\"x\",\"dry_multiplier\":0.8,\"dry_base\":1.5,\"dry_allowed_length\":3,"
                  "\"dry_penalty_last_n\":128,\"dry_sequence_breakers\":[\"\\n\",\"###\"],\"xtc_probability\":0.5,"
                  "\"xtc_threshold\":0.2,\"top_n_sigma\":1.5,\"dynatemp_range\":0.4,\"dynatemp_exponent\":1.2,"
                  "\"mirostat\":2,\"mirostat_tau\":4,\"mirostat_eta\":0.2,\"min_keep\":3}",
                  &r, &e) == 0,
            "the stages on refused: %s", e.msg);
    CHECK(r.sp.dry_multiplier == 0.8f && r.sp.dry_base == 1.5f && r.sp.dry_allowed_length == 3 &&
              r.sp.dry_last_n == 128 && r.n_dry_seq == 2 && !strcmp(r.dry_seq[0], "\n") && !strcmp(r.dry_seq[1], "###"),
          "DRY: %g %g %d %d, %d breakers", r.sp.dry_multiplier, r.sp.dry_base, r.sp.dry_allowed_length,
          r.sp.dry_last_n, r.n_dry_seq);
    CHECK(r.sp.xtc_probability == 0.5f && r.sp.xtc_threshold == 0.2f && r.sp.top_n_sigma == 1.5f &&
              r.sp.dynatemp_range == 0.4f && r.sp.dynatemp_exponent == 1.2f && r.sp.mirostat == 2 &&
              r.sp.mirostat_tau == 4.0f && r.sp.mirostat_eta == 0.2f && r.sp.min_keep == 3,
          "XTC %g/%g, sigma %g, dynatemp %g/%g, mirostat %d %g %g", r.sp.xtc_probability, r.sp.xtc_threshold,
          r.sp.top_n_sigma, r.sp.dynatemp_range, r.sp.dynatemp_exponent, r.sp.mirostat, r.sp.mirostat_tau,
          r.sp.mirostat_eta);
    mf_error err = {0};
    CHECK(mf_sampler_params_check(&r.sp, 1000, &err) == 0, "the engine refuses what the server read: %s", err.msg);
    mf_srv_req_free(&r);
    REQUIRE(parse(MF_SRV_NATIVE,
                  "{\"prompt\":\"x\",\"dry_multiplier\":0.8,\"xtc_probability\":0.5,\"top_n_sigma\":1,"
                  "\"samplers\":[\"top_k\",\"temperature\"]}",
                  &r, &e) == 0,
            "%s", e.msg);
    CHECK(r.sp.dry_multiplier == 0 && r.sp.xtc_probability == 0 && r.sp.top_n_sigma <= 0,
          "samplers without dry, xtc, top_n_sigma switches them off (%g %g %g)", r.sp.dry_multiplier,
          r.sp.xtc_probability, r.sp.top_n_sigma);
    mf_srv_req_free(&r);
    REQUIRE(parse(MF_SRV_NATIVE, "{\"prompt\":\"x\",\"top_p\":0.5,\"samplers\":\"kt\"}", &r, &e) == 0, "%s", e.msg);
    CHECK(r.sp.top_k == d.top_k && r.sp.temp == d.temp && r.sp.top_p == 1.0f && r.sp.min_p == 0.0f &&
              r.sp.typ_p == 1.0f && r.sp.penalty_last_n == 0,
          "samplers \"kt\": only top_k and temperature stay on (top_p %g min_p %g)", r.sp.top_p, r.sp.min_p);
    mf_srv_req_free(&r);
    REQUIRE(parse(MF_SRV_NATIVE, "{\"prompt\":\"x\",\"temperature\":0.5,\"samplers\":[\"min_p\"]}", &r, &e) == 0, "%s",
            e.msg);
    CHECK(r.sp.temp == 1.0f && r.sp.top_k == 0 && r.sp.min_p == d.min_p, "no temperature stage: the draw at 1");
    mf_srv_req_free(&r);
    static const struct {
        const char *body, *param, *needle;
    } bad[] = {
        {"{\"prompt\":\"x\",\"mirostat\":3}", "mirostat", "'mirostat' must be in [0, 2], got 3"},
        {"{\"prompt\":\"x\",\"mirostat\":\"2\"}", "mirostat", "must be an integer"},
        {"{\"prompt\":\"x\",\"dry_multiplier\":-1}", "dry_multiplier", "must be in [0, 1e+06]"},
        {"{\"prompt\":\"x\",\"dry_multiplier\":0.8,\"dry_base\":0.5}", "dry_base", "'dry_base' 0.5 is below 1"},
        {"{\"prompt\":\"x\",\"dry_allowed_length\":1.5}", "dry_allowed_length", "must be an integer"},
        {"{\"prompt\":\"x\",\"dry_penalty_last_n\":-2}", "dry_penalty_last_n", "must be in [-1,"},
        {"{\"prompt\":\"x\",\"dry_sequence_breakers\":[]}", "dry_sequence_breakers", "holds 0 strings"},
        {"{\"prompt\":\"x\",\"dry_sequence_breakers\":\"\\n\"}", "dry_sequence_breakers", "an array of strings"},
        {"{\"prompt\":\"x\",\"dry_sequence_breakers\":[\"a\",\"\"]}", "dry_sequence_breakers",
         "'dry_sequence_breakers[1]' must be a non-empty string"},
        {"{\"prompt\":\"x\",\"dry_sequence_breakers\":[\"0123456789012345678901234567890123456789x\"]}",
         "dry_sequence_breakers", "is 41 bytes; a breaker is at most 40"},
        {"{\"prompt\":\"x\",\"xtc_probability\":1.5}", "xtc_probability", "must be in [0, 1]"},
        {"{\"prompt\":\"x\",\"xtc_probability\":0.5,\"xtc_threshold\":0}", "xtc_threshold", "'xtc_threshold' 0"},
        {"{\"prompt\":\"x\",\"top_n_sigma\":\"1\"}", "top_n_sigma", "must be a number"},
        {"{\"prompt\":\"x\",\"dynatemp_range\":-0.5}", "dynatemp_range", "must be in [0,"},
        {"{\"prompt\":\"x\",\"mirostat\":2,\"mirostat_tau\":-1}", "mirostat_tau", "must be in [0,"},
        {"{\"prompt\":\"x\",\"n_probs\":21}", "n_probs", "must be in [0, 20]"},
        {"{\"prompt\":\"x\",\"n_probs\":2,\"post_sampling_probs\":1}", "post_sampling_probs", "boolean"},
        {"{\"prompt\":\"x\",\"samplers\":[\"temperature\",\"top_k\"]}", "samplers", "'top_k' after a stage"},
        {"{\"prompt\":\"x\",\"samplers\":\"tk\"}", "samplers", "'k' after a stage"},
        {"{\"prompt\":\"x\",\"samplers\":[\"top_k\",\"tfs_z\"]}", "samplers", "'tfs_z', which is not a sampler"},
        {"{\"prompt\":\"x\",\"samplers\":[1]}", "samplers", "'samplers[0]' must be a string"},
        {"{\"prompt\":\"x\",\"samplers\":{}}", "samplers", "an array of sampler names"},
        {"{\"prompt\":\"x\",\"temperature\":0,\"samplers\":[\"top_k\"]}", "samplers", "leaves out temperature"},
        {"{\"prompt\":\"x\",\"samplers\":[\"temperature\",\"infill\"]}", "samplers", "'infill' after a stage"},
        {"{\"prompt\":\"x\",\"n_indent\":-1}", "n_indent", "must be in [0,"},
        {"{\"prompt\":\"x\",\"n_indent\":\"4\"}", "n_indent", "must be an integer"},
        {"{\"prompt\":\"x\",\"t_max_predict_ms\":-5}", "t_max_predict_ms", "must be in [-1,"},
        {"{\"prompt\":\"x\",\"return_tokens\":1}", "return_tokens", "boolean"},
        {"{\"prompt\":\"x\",\"response_fields\":\"content\"}", "response_fields", "an array of strings"},
        {"{\"prompt\":\"x\",\"response_fields\":[\"content\",2]}", "response_fields", "'response_fields[1]'"},
        {"{\"prompt\":\"x\",\"n\":2,\"n_cmpl\":3}", "n_cmpl", "ask for different numbers"},
        {"{\"prompt\":\"x\",\"n_cmpl\":2,\"stream\":true}", "n", "an array of 2 results"},
        {"{\"prompt\":\"x\",\"lora\":[{\"id\":0,\"scale\":0.5}]}", "lora", "no LoRA adapters"},
        {"{\"prompt\":\"x\",\"image_data\":[{\"data\":\"AAAA\",\"id\":1}]}", "image_data", "text models"},
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(bad); i++) {
        int rc = parse(MF_SRV_NATIVE, bad[i].body, &r, &e);
        CHECK(rc && e.status == 400 && !strcmp(e.param, bad[i].param) && strstr(e.msg, bad[i].needle),
              "case %zu: rc %d, %d '%s': %s", i, rc, e.status, e.param, e.msg);
        if (!rc) mf_srv_req_free(&r);
    }
}

/* What llama.vim's and llama.vscode's /infill requests carry: the infill stage, n_indent, t_max_predict_ms,
 * response_fields; and its cache warm-up (no samplers, temperature 0, n_predict 0: nothing is sampled). */
static void test_code_completion_fields_are_read(void) {
    mf_srv_req r;
    mf_srv_err e = {0};
    REQUIRE(parse(MF_SRV_INFILL,
                  "{\"input_prefix\":\"a\\n\",\"input_suffix\":\"\\n\",\"input_extra\":[{\"text\":\"t\",\"time\":1,"
                  "\"filename\":\"f.c\"}],\"prompt\":\"  x\",\"n_predict\":128,\"n_indent\":2,\"top_k\":40,"
                  "\"top_p\":0.99,\"stream\":false,\"samplers\":[\"top_k\",\"top_p\",\"infill\"],\"cache_prompt\":true,"
                  "\"t_max_prompt_ms\":500,\"t_max_predict_ms\":1000,\"response_fields\":[\"content\","
                  "\"timings/prompt_n\",\"truncated\"]}",
                  &r, &e) == 0,
            "llama.vim's request refused: %s", e.msg);
    CHECK(r.infill_stage && r.n_indent == 2 && r.t_max_predict_ms == 1000.0 && r.sp.top_k == 40 &&
              r.sp.top_p == 0.99f && r.sp.temp == 1.0f && r.sp.min_p == 0.0f,
          "infill %d, n_indent %d, t_max %g, top_k %d top_p %g temp %g min_p %g", r.infill_stage, r.n_indent,
          r.t_max_predict_ms, r.sp.top_k, r.sp.top_p, r.sp.temp, r.sp.min_p);
    CHECK(r.response_fields_given && r.n_response_fields == 3 && !strcmp(r.response_fields[1], "timings/prompt_n"),
          "response_fields: %d", r.n_response_fields);
    mf_srv_err e2 = {0};
    CHECK(mf_srv_req_resolve_infill(&r, NULL, "no tokenizer here", 1000, &e2) && e2.status == 400 &&
              !strcmp(e2.param, "samplers") && strstr(e2.msg, "no tokenizer here"),
          "infill without a vocabulary: %s", e2.msg);
    mf_srv_req_free(&r);
    REQUIRE(parse(MF_SRV_INFILL,
                  "{\"input_prefix\":\"\",\"input_suffix\":\"\",\"input_extra\":[],\"prompt\":\"\",\"n_predict\":0,"
                  "\"temperature\":0.0,\"stream\":false,\"samplers\":[],\"cache_prompt\":true,\"t_max_prompt_ms\":1,"
                  "\"t_max_predict_ms\":1,\"response_fields\":[\"\"]}",
                  &r, &e) == 0,
            "llama.vim's warm-up refused: %s", e.msg);
    CHECK(r.max_tokens == 0 && r.response_fields_given && r.n_response_fields == 1, "warm-up read");
    mf_srv_req_free(&r);
    REQUIRE(parse(MF_SRV_NATIVE, "{\"prompt\":\"x\",\"n_cmpl\":3,\"return_tokens\":true,\"lora\":[]}", &r, &e) == 0,
            "%s", e.msg);
    CHECK(r.n == 3 && r.return_tokens, "n_cmpl 3: n %d", r.n);
    mf_srv_req_free(&r);
    REQUIRE(parse(MF_SRV_NATIVE, "{\"prompt\":\"x\",\"n_probs\":4,\"post_sampling_probs\":true}", &r, &e) == 0, "%s",
            e.msg);
    CHECK(r.post_probs && r.logprobs && r.top_logprobs == 4, "post_sampling_probs read");
    mf_srv_req_free(&r);
    /* n_cache_reuse: the request's run length, else the server's (-1); no cache and a reuse of it conflict */
    REQUIRE(parse(MF_SRV_INFILL, "{\"input_prefix\":\"a\",\"input_suffix\":\"\",\"n_cache_reuse\":256}", &r, &e) == 0,
            "%s", e.msg);
    CHECK(r.n_cache_reuse == 256, "n_cache_reuse %d", r.n_cache_reuse);
    mf_srv_req_free(&r);
    REQUIRE(parse(MF_SRV_NATIVE, "{\"prompt\":\"x\"}", &r, &e) == 0, "%s", e.msg);
    CHECK(r.n_cache_reuse == -1, "n_cache_reuse unset: %d", r.n_cache_reuse);
    mf_srv_req_free(&r);
    REQUIRE(parse(MF_SRV_NATIVE, "{\"prompt\":\"x\",\"n_cache_reuse\":0,\"cache_prompt\":false}", &r, &e) == 0,
            "%s", e.msg);
    mf_srv_req_free(&r);
    CHECK(parse(MF_SRV_NATIVE, "{\"prompt\":\"x\",\"cache_prompt\":false,\"n_cache_reuse\":4}", &r, &e) &&
              e.status == 400 && !strcmp(e.param, "n_cache_reuse") && strstr(e.msg, "is 4") &&
              strstr(e.msg, "drop one"),
          "reuse without a cache: %s", e.msg);
    CHECK(parse(MF_SRV_NATIVE, "{\"prompt\":\"x\",\"n_cache_reuse\":-1}", &r, &e) && e.status == 400 &&
              !strcmp(e.param, "n_cache_reuse"),
          "negative n_cache_reuse: %s", e.msg);
}

static void test_deep_nesting_and_huge_input_are_refused_not_crashing(void) {
    size_t n = 200000;
    char *b = malloc(n * 2 + 64);
    REQUIRE(b, "oom");
    size_t k = (size_t)sprintf(b, "{\"messages\":");
    for (size_t i = 0; i < n; i++) b[k++] = '[';
    for (size_t i = 0; i < n; i++) b[k++] = ']';
    b[k++] = '}';
    mf_srv_req r;
    mf_srv_err e = {0};
    CHECK(mf_srv_req_parse(MF_SRV_CHAT, b, k, &r, &e) != 0 && e.status == 400, "deep nesting: %s", e.msg);
    static const char nul[] = "{\"messages\"\0:[{\"role\":\"user\",\"content\":\"x\"}]}";
    CHECK(mf_srv_req_parse(MF_SRV_CHAT, nul, sizeof nul - 1, &r, &e) != 0 && strstr(e.msg, "NUL byte at offset 11"),
          "a NUL byte is not a blank: %s", e.msg);
    free(b);
}

static void test_utf8_validation(void) {
    CHECK(mf_srv_utf8_valid("h\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 10), "valid");
    CHECK(!mf_srv_utf8_valid("\xc0\xaf", 2), "overlong refused");
    CHECK(!mf_srv_utf8_valid("\xed\xa0\x80", 3), "surrogate refused");
    CHECK(!mf_srv_utf8_valid("\xf4\x90\x80\x80", 4), "past U+10FFFF refused");
    CHECK(!mf_srv_utf8_valid("\xe2\x82", 2), "truncated refused");
    char s[] = "a\xff\xc3\xa9\xe2\x82";
    mf_srv_utf8_clean(s);
    CHECK(!strcmp(s, "a?\xc3\xa9??"), "clean: '%s'", s);
}

/* The rule by code points, written apart from core/utf8.c's byte ranges: a lead byte's length, then no
 * overlong, no surrogate, nothing past U+10FFFF. */
static bool utf8_by_code_points(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i], cp;
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!len || i + len > n) return false;
        cp = len == 1 ? c : c & (0x7F >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

static void test_utf8_validity_is_the_code_point_rule(void) {
    unsigned char b[4];
    long wrong = 0;
    for (unsigned x = 0; x < (1u << 24); x++) { /* every string of 1-3 bytes */
        b[0] = (unsigned char)(x >> 16), b[1] = (unsigned char)(x >> 8), b[2] = (unsigned char)x;
        for (size_t n = 1; n <= 3; n++)
            if ((n == 3 || (x & 0xFFFFu >> (8 * (n - 1))) == 0) &&
                mf_srv_utf8_valid((char *)b, n) != utf8_by_code_points(b, n))
                wrong++;
    }
    static const unsigned char edge[] = {0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xF4, 0xFF};
    for (unsigned lead = 0xF0; lead <= 0xFF; lead++) /* 4 bytes: every lead past EF, the range edges after it */
        for (size_t i = 0; i < sizeof edge; i++)
            for (size_t j = 0; j < sizeof edge; j++)
                for (size_t k = 0; k < sizeof edge; k++) {
                    b[0] = (unsigned char)lead, b[1] = edge[i], b[2] = edge[j], b[3] = edge[k];
                    wrong += mf_srv_utf8_valid((char *)b, 4) != utf8_by_code_points(b, 4);
                }
    CHECK(wrong == 0, "%ld strings judged otherwise than by their code points", wrong);
}

/* Generated text reaches JSON through mf_utf8_lossy: a token's piece may be part of a character that the
 * next token does not complete (seen from sampled text of the synthetic models: "\xe4\x9d appoint"). */
static void test_utf8_lossy_replaces_maximal_subparts(void) {
    static const struct {
        const char *in, *want; /* want: ~ stands for U+FFFD */
    } cases[] = {
        {"a\xf1\x80\x80\xe1\x80\xc2" "b\x80" "c\x80\xbf" "d", "a~~~b~c~~d"}, /* Unicode 3.9's example */
        {"\xe4\x9d appoint", "~ appoint"},
        {"\xf0\x9f\x89.j", "~.j"},
        {"\xed\xa0\x80", "~~~"},      /* a surrogate: ED takes 80-9F only */
        {"\xc0\xaf", "~~"},            /* overlong */
        {"\xe0\x80\xaf", "~~~"},      /* overlong: E0 takes A0-BF only */
        {"\xf4\x90\x80\x80", "~~~~"}, /* past U+10FFFF */
        {"x\xe2\x82", "x~"},           /* cut at the end */
        {"h\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "h\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"},
        {"", ""},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *in = cases[c].in;
        size_t n = strlen(in);
        char out[64], want[64];
        size_t wn = 0;
        for (const char *w = cases[c].want; *w; w++) {
            if (*w == '~') memcpy(want + wn, "\xEF\xBF\xBD", 3), wn += 3;
            else want[wn++] = *w;
        }
        size_t on = mf_utf8_lossy(in, n, out);
        CHECK(on == wn && !memcmp(out, want, wn), "case %zu: %zu bytes out, %zu wanted", c, on, wn);
        CHECK(mf_srv_utf8_valid(out, on), "case %zu: the output is not UTF-8", c);
        /* a stream's pieces split before an ASCII or lead byte: converted apart they give the same bytes */
        for (size_t at = 1; at < n; at++) {
            unsigned char b = (unsigned char)in[at];
            if (b >= 0x80 && b < 0xC0) continue;
            char parts[64];
            size_t pn = mf_utf8_lossy(in, at, parts);
            pn += mf_utf8_lossy(in + at, n - at, parts + pn);
            CHECK(pn == on && !memcmp(parts, out, on), "case %zu split at %zu: not the whole's bytes", c, at);
        }
    }
}

static char *split(const char *const *pieces, int n, char **reasoning) {
    mf_srv_think t = {0};
    mf_srv_buf c = {0}, r = {0};
    for (int i = 0; i < n; i++) mf_srv_think_push(&t, pieces[i], strlen(pieces[i]), &c, &r);
    mf_srv_think_flush(&t, &c, &r);
    mf_srv_think_free(&t);
    mf_srv_buf_add(&c, "", 0);
    mf_srv_buf_add(&r, "", 0);
    *reasoning = r.s;
    return c.s;
}

static void test_think_split_across_pieces(void) {
    const char *a[] = {"\n<th", "ink>\nLet me", " see</thi", "nk>\n\nThe answer", " is 4."};
    char *r, *c = split(a, 5, &r);
    CHECK(!strcmp(c, "The answer is 4."), "content '%s'", c);
    CHECK(!strcmp(r, "\nLet me see"), "reasoning '%s'", r);
    free(c), free(r);
    const char *b[] = {"<", "b>bold</b>"}; /* not a think tag: plain content, nothing lost */
    c = split(b, 2, &r);
    CHECK(!strcmp(c, "<b>bold</b>") && !*r, "content '%s' reasoning '%s'", c, r);
    free(c), free(r);
    const char *d[] = {"<think>unfinished"};
    c = split(d, 1, &r);
    CHECK(!*c && !strcmp(r, "unfinished"), "unfinished thought stays reasoning: '%s' / '%s'", c, r);
    free(c), free(r);
    const char *f[] = {"  hello <think>x</think>"}; /* only a leading tag opens a thought */
    c = split(f, 1, &r);
    CHECK(!strcmp(c, "  hello <think>x</think>") && !*r, "'%s'", c);
    free(c), free(r);
}

/* The tools as sent reach the renderer in order, as compact JSON; a turn's calls and a tool's result too.
 * tool_choice "none" offers no tools; parallel_tool_calls is read. */
static void test_tools_and_calls_are_read(void) {
    mf_srv_req r;
    mf_srv_err e = {0};
    const char *body =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"w?\"},{\"role\":\"assistant\",\"content\":null,"
        "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
        "\"{\\\"city\\\": \\\"Paris\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"21\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"
        "\"object\"}}},{\"type\":\"function\",\"function\":{\"name\":\"now\"}}],\"parallel_tool_calls\":false}";
    REQUIRE(parse(MF_SRV_CHAT, body, &r, &e) == 0, "%s", e.msg);
    CHECK(r.n_tools == 2 &&
              !strcmp(r.tools[0], "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
                                  "{\"type\":\"object\"}}}") &&
              !strcmp(r.tools[1], "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}"),
          "tools: %d", r.n_tools);
    CHECK(!r.parallel_tool_calls, "parallel_tool_calls false");
    CHECK(r.n_msgs == 3 && !strcmp(r.msgs[1].role, "assistant") && !strcmp(r.msgs[1].content, "") &&
              r.msgs[1].n_tool_calls == 1 && !strcmp(r.msgs[1].tool_calls[0].name, "get_weather") &&
              !strcmp(r.msgs[1].tool_calls[0].arguments, "{\"city\": \"Paris\"}"),
          "the assistant's call");
    CHECK(!strcmp(r.msgs[2].role, "tool") && !strcmp(r.msgs[2].content, "21"), "the tool's result");
    mf_srv_req_free(&r);
    REQUIRE(parse(MF_SRV_CHAT,
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"none\",\"tools\":[{"
                  "\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}",
                  &r, &e) == 0,
            "%s", e.msg);
    CHECK(r.n_tools == 0 && r.parallel_tool_calls, "tool_choice none offers nothing; parallel calls by default");
    mf_srv_req_free(&r);
}

/* Every constraint source becomes a grammar that compiles, and that grammar holds what it should: OpenAI's
 * and llama-server's response_format shapes, json_schema, grammar, and forced tool calls in Qwen's format
 * with each tool's arguments by its schema. */
static void test_constraints_become_grammars(void) {
    static const struct {
        mf_srv_kind k;
        const char *body, *from, *yes, *no;
    } cases[] = {
        {MF_SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_object\"}}",
         "response_format", "{\"a\": [1, true]}", "[1]"},
        {MF_SRV_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
         "\"json_schema\":{\"name\":\"p\",\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{\"age\":{"
         "\"type\":\"integer\"}},\"required\":[\"age\"]}}}}",
         "response_format", "{\"age\": 42}", "{\"age\": \"42\"}"},
        {MF_SRV_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
         "\"schema\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"}}}}",
         "response_format", "[true, false]", "[1]"},
        {MF_SRV_NATIVE, "{\"prompt\":\"x\",\"json_schema\":{\"enum\":[\"red\",\"green\"]}}", "json_schema", "\"green\"",
         "\"blue\""},
        {MF_SRV_COMPLETION, "{\"prompt\":\"x\",\"grammar\":\"root ::= [0-9]+\"}", "grammar", "2026", "x"},
        {MF_SRV_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\",\"tools\":[{\"type\":"
         "\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":"
         "{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}},{\"type\":\"function\",\"function\":{\"name\":"
         "\"now\"}}]}",
         "tool_choice",
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{"
         "\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"},
        {MF_SRV_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":{\"type\":\"function\",\"function\":"
         "{\"name\":\"now\"}},\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},{\"type\":"
         "\"function\",\"function\":{\"name\":\"now\"}}]}",
         "tool_choice", "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"},
        {MF_SRV_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\",\"parallel_tool_calls\":"
         "false,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]}",
         "tool_choice", "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
         "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", "
         "\"arguments\": {}}\n</tool_call>"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mf_srv_req r;
        mf_srv_err e = {0};
        REQUIRE(parse(cases[i].k, cases[i].body, &r, &e) == 0, "case %zu: %s", i, e.msg);
        CHECK(r.gbnf && r.constraint && !strcmp(r.constraint, cases[i].from), "case %zu: from %s", i,
              r.constraint ? r.constraint : "nothing");
        mf_grammar *g = NULL;
        mf_error err = {0};
        if (r.gbnf && !mf_grammar_new(r.gbnf, strlen(r.gbnf), &g, &err)) {
            CHECK(mf_grammar_matches(g, cases[i].yes, strlen(cases[i].yes)), "case %zu: '%s' refused", i, cases[i].yes);
            CHECK(!mf_grammar_matches(g, cases[i].no, strlen(cases[i].no)), "case %zu: '%s' taken", i, cases[i].no);
            if (cases[i].k == MF_SRV_CHAT) { /* after thinking: a few blanks, then the same sentence */
                char *w = NULL, txt[600];
                mf_grammar *t = NULL;
                snprintf(txt, sizeof txt, "\n\n%s", cases[i].yes);
                CHECK(!mf_srv_think_gbnf(r.gbnf, &w, &err) && !mf_grammar_new(w, strlen(w), &t, &err) &&
                          mf_grammar_matches(t, txt, strlen(txt)) && !mf_grammar_matches(t, cases[i].no, strlen(cases[i].no)),
                      "case %zu wrapped: %s", i, err.msg);
                mf_grammar_free(t);
                free(w);
            }
        } else {
            CHECK(0, "case %zu: %s", i, err.msg);
        }
        mf_grammar_free(g);
        mf_srv_req_free(&r);
    }
}

typedef struct {
    char *content;
    mf_srv_tools t;
} split_out;

static split_out split_calls(const char *const *pieces, int n, bool single) {
    split_out o = {0};
    mf_srv_buf c = {0};
    o.t.single = single;
    for (int i = 0; i < n; i++) mf_srv_tools_push(&o.t, pieces[i], strlen(pieces[i]), &c);
    mf_srv_tools_flush(&o.t, &c);
    mf_srv_buf_add(&c, "", 0);
    o.content = c.s;
    return o;
}

/* The answer split into content and calls is the same whatever the pieces it arrives in (a stream's
 * deltas join to the whole answer's content); blanks around calls go, text the model wrote stays. */
static void test_tool_calls_split_out_of_any_pieces(void) {
    static const struct {
        const char *text, *content;
        int n_calls;
        const char *name0, *args0, *args1;
    } k[] = {
        {"Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": [1, "
         "2.5]}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n",
         "Let me check.", 2, "get_weather", "{\"city\": \"Paris\", \"n\": [1, 2.5]}", "{}"},
        /* a close tag inside the arguments ends the call early: not JSON, so all of it stays text */
        {"<tool_call>\n{\"name\":\"f\",\"arguments\":{\"a\":\"</tool_call>\"}}\n</tool_call>",
         "<tool_call>\n{\"name\":\"f\",\"arguments\":{\"a\":\"</tool_call>\"}}\n</tool_call>", 0, NULL, NULL, NULL},
        {"<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>", "", 1, "f", "{\"x\": 1}",
         NULL},
        {"plain answer, no calls \n\n", "plain answer, no calls \n\n", 0, NULL, NULL, NULL},
        {"a <tool_call\nnot a tag", "a <tool_call\nnot a tag", 0, NULL, NULL, NULL},
        {"x\n<tool_call>\nnot json\n</tool_call>\ny", "x\n<tool_call>\nnot json\n</tool_call>\ny", 0, NULL, NULL, NULL},
        {"<tool_call>\n{\"arguments\": {}}\n</tool_call>", "<tool_call>\n{\"arguments\": {}}\n</tool_call>", 0, NULL,
         NULL, NULL},
        {"cut short <tool_call>\n{\"name\": \"f\", \"argu", "cut short <tool_call>\n{\"name\": \"f\", \"argu", 0, NULL,
         NULL, NULL},
        {"<tool_call>{\"name\":\"f\",\"arguments\":{\"q\":\"\\u00e9\"}}</tool_call> then text <tool",
         " then text <tool", 1, "f", "{\"q\": \"\xc3\xa9\"}", NULL},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const char *whole[] = {k[i].text};
        split_out w = split_calls(whole, 1, false);
        CHECK(!strcmp(w.content, k[i].content), "case %zu content '%s', want '%s'", i, w.content, k[i].content);
        CHECK(w.t.n_calls == k[i].n_calls, "case %zu: %d calls, want %d", i, w.t.n_calls, k[i].n_calls);
        if (k[i].n_calls && w.t.n_calls == k[i].n_calls) {
            CHECK(!strcmp(w.t.calls[0].name, k[i].name0) && !strcmp(w.t.calls[0].arguments, k[i].args0),
                  "case %zu call 0: %s %s", i, w.t.calls[0].name, w.t.calls[0].arguments);
            if (k[i].args1) CHECK(!strcmp(w.t.calls[1].arguments, k[i].args1), "case %zu call 1", i);
        }
        /* byte by byte, and cut at every place into two pieces: the same */
        size_t len = strlen(k[i].text);
        for (size_t cut = 0; cut <= len; cut++) {
            char *a = strndup(k[i].text, cut);
            const char *two[] = {a, k[i].text + cut};
            split_out p = split_calls(two, 2, false);
            CHECK(!strcmp(p.content, w.content) && p.t.n_calls == w.t.n_calls, "case %zu cut at %zu: '%s'", i, cut,
                  p.content);
            for (int32_t q = 0; q < p.t.n_calls && q < w.t.n_calls; q++)
                CHECK(!strcmp(p.t.calls[q].arguments, w.t.calls[q].arguments), "case %zu cut %zu call %d", i, cut, q);
            free(p.content), mf_srv_tools_free(&p.t), free(a);
        }
        free(w.content), mf_srv_tools_free(&w.t);
    }
    /* parallel_tool_calls false: the first call only */
    const char *two_calls[] = {k[0].text};
    split_out s1 = split_calls(two_calls, 1, true);
    CHECK(s1.t.n_calls == 1 && !strcmp(s1.t.calls[0].name, "get_weather") && !strcmp(s1.content, "Let me check."),
          "single: %d calls, '%s'", s1.t.n_calls, s1.content);
    free(s1.content), mf_srv_tools_free(&s1.t);
}

static cJSON *parsed(char *s) {
    cJSON *o = cJSON_Parse(s);
    free(s);
    return o;
}

static void test_response_shapes_match_openai(void) {
    mf_srv_head h = {.kind = MF_SRV_CHAT, .id = "chatcmpl-1", .model = "m.gguf", .created = 1700000000};
    mf_srv_choice ch = {.content = "hi", .reasoning = "hmm", .finish_reason = "stop"};
    mf_srv_usage u = {.prompt_tokens = 5, .completion_tokens = 2, .cached_tokens = 3};
    cJSON *o = parsed(mf_srv_final_json(&h, &ch, 1, &u));
    REQUIRE(o, "final is JSON");
    CHECK(!cJSON_GetObjectItem(o, "timings"), "no timings without a draft model");
    mf_srv_usage ud = u;
    ud.draft = true, ud.draft_n = 9, ud.draft_n_accepted = 7;
    cJSON *od = parsed(mf_srv_final_json(&h, &ch, 1, &ud));
    cJSON *tm = od ? cJSON_GetObjectItem(od, "timings") : NULL;
    CHECK(tm && cJSON_GetObjectItem(tm, "draft_n")->valueint == 9 &&
              cJSON_GetObjectItem(tm, "draft_n_accepted")->valueint == 7,
          "llama-server's timings.draft_n / draft_n_accepted with a draft model");
    cJSON_Delete(od);
    CHECK(!strcmp(cJSON_GetObjectItem(o, "object")->valuestring, "chat.completion"), "object");
    cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
    cJSON *msg = cJSON_GetObjectItem(c0, "message");
    CHECK(!strcmp(cJSON_GetObjectItem(msg, "role")->valuestring, "assistant"), "role");
    CHECK(!strcmp(cJSON_GetObjectItem(msg, "content")->valuestring, "hi"), "content");
    CHECK(!strcmp(cJSON_GetObjectItem(msg, "reasoning_content")->valuestring, "hmm"), "reasoning");
    CHECK(!strcmp(cJSON_GetObjectItem(c0, "finish_reason")->valuestring, "stop"), "finish");
    cJSON *us = cJSON_GetObjectItem(o, "usage");
    CHECK(cJSON_GetObjectItem(us, "total_tokens")->valueint == 7, "usage total");
    cJSON_Delete(o);
    o = parsed(mf_srv_chunk_json(&h, 0, true, "", NULL, NULL, NULL, NULL, 0));
    REQUIRE(o, "chunk is JSON");
    c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
    CHECK(!strcmp(cJSON_GetObjectItem(o, "object")->valuestring, "chat.completion.chunk"), "chunk object");
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(c0, "delta"), "role")->valuestring, "assistant"), "role");
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(c0, "finish_reason")), "finish null while running");
    cJSON_Delete(o);
    h.kind = MF_SRV_COMPLETION;
    o = parsed(mf_srv_final_json(&h, &ch, 1, &u));
    c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
    CHECK(!strcmp(cJSON_GetObjectItem(o, "object")->valuestring, "text_completion"), "completion object");
    CHECK(!strcmp(cJSON_GetObjectItem(c0, "text")->valuestring, "hi"), "text");
    cJSON_Delete(o);
    o = parsed(mf_srv_usage_chunk_json(&h, &u));
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(o, "choices")) == 0, "usage chunk has no choices");
    cJSON_Delete(o);
    mf_srv_err e = {.status = 400, .type = "invalid_request_error", .param = "n", .msg = "bad \xff value"};
    o = parsed(mf_srv_error_json(&e));
    REQUIRE(o, "error JSON parses (invalid UTF-8 in the message cleaned)");
    cJSON *er = cJSON_GetObjectItem(o, "error");
    CHECK(!strcmp(cJSON_GetObjectItem(er, "param")->valuestring, "n"), "param");
    CHECK(!strcmp(cJSON_GetObjectItem(er, "message")->valuestring, "bad ? value"), "message");
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(er, "code")), "code null");
    cJSON_Delete(o);
}

/* A piece that is part of a character: its "token" is U+FFFD (JSON text is UTF-8) and its "bytes" the piece,
 * as OpenAI gives them, so a client can join the bytes of consecutive tokens into the character. */
/* An answer with calls: content null when it made calls only, OpenAI's tool_calls (id, type, function with
 * the arguments as a JSON string), finish_reason as given; a stream's delta carries each call's index. */
static void test_tool_call_answers_match_openai(void) {
    mf_srv_tool_call tc[2] = {{"get_weather", "{\"city\": \"Paris\"}"}, {"now", "{}"}};
    mf_srv_head h = {.kind = MF_SRV_CHAT, .id = "chatcmpl-1", .model = "m.gguf", .created = 1700000000};
    mf_srv_choice ch = {.content = "", .finish_reason = "tool_calls", .calls = {tc, 0, 2, 0xabcdefull}};
    mf_srv_usage u = {.prompt_tokens = 5, .completion_tokens = 2};
    cJSON *o = parsed(mf_srv_final_json(&h, &ch, 1, &u));
    cJSON *c0 = o ? cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0) : NULL;
    cJSON *msg = cJSON_GetObjectItem(c0, "message"), *calls = cJSON_GetObjectItem(msg, "tool_calls");
    REQUIRE(msg && cJSON_GetArraySize(calls) == 2, "two calls in the message");
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(msg, "content")), "content null with calls only");
    cJSON *q = cJSON_GetArrayItem(calls, 1), *fn = cJSON_GetObjectItem(q, "function");
    CHECK(!strcmp(cJSON_GetObjectItem(q, "id")->valuestring, "call_0000000000abcdef_1") &&
              !strcmp(cJSON_GetObjectItem(q, "type")->valuestring, "function") && !cJSON_GetObjectItem(q, "index") &&
              !strcmp(cJSON_GetObjectItem(fn, "name")->valuestring, "now") &&
              !strcmp(cJSON_GetObjectItem(fn, "arguments")->valuestring, "{}"),
          "call 1's shape");
    CHECK(!strcmp(cJSON_GetObjectItem(c0, "finish_reason")->valuestring, "tool_calls"), "finish_reason");
    cJSON_Delete(o);
    ch.content = "Let me check.";
    o = parsed(mf_srv_final_json(&h, &ch, 1, &u));
    msg = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0), "message");
    CHECK(msg && !strcmp(cJSON_GetObjectItem(msg, "content")->valuestring, "Let me check."), "content kept beside calls");
    cJSON_Delete(o);
    mf_srv_calls later = {tc, 1, 2, 0xabcdefull};
    o = parsed(mf_srv_chunk_json(&h, 0, false, NULL, NULL, &later, NULL, NULL, 0));
    cJSON *d = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0), "delta");
    calls = cJSON_GetObjectItem(d, "tool_calls");
    q = cJSON_GetArrayItem(calls, 0);
    CHECK(cJSON_GetArraySize(calls) == 1 && cJSON_GetObjectItem(q, "index")->valueint == 1 &&
              !strcmp(cJSON_GetObjectItem(q, "id")->valuestring, "call_0000000000abcdef_1") &&
              !cJSON_GetObjectItem(d, "content"),
          "the delta's call carries its index");
    cJSON_Delete(o);
}

static void test_logprobs_of_part_of_a_character_keep_its_bytes(void) {
    char tok0[] = "\xe4\x9d", tok1[] = " a", alt[] = "\xe4";
    char *top0[] = {tok0, alt}, *top1[] = {tok1};
    float lp0[] = {-0.5f, -1.5f}, lp1[] = {-0.25f};
    mf_token id0[] = {7, 9}, id1[] = {11};
    mf_srv_logprob lp[2] = {
        {.token = tok0, .id = 7, .logprob = -0.5f, .n_top = 2, .top_token = top0, .top_logprob = lp0, .top_id = id0},
        {.token = tok1, .id = 11, .logprob = -0.25f, .n_top = 1, .top_token = top1, .top_logprob = lp1, .top_id = id1}};
    mf_srv_head h = {.kind = MF_SRV_CHAT, .id = "chatcmpl-1", .model = "m.gguf", .created = 1700000000};
    char *js = mf_srv_chunk_json(&h, 0, false, "\xEF\xBF\xBD a", NULL, NULL, NULL, lp, 2);
    REQUIRE(js, "chunk");
    CHECK(mf_srv_utf8_valid(js, strlen(js)), "the chunk is not UTF-8: %s", js);
    cJSON *o = parsed(js);
    REQUIRE(o, "chunk is JSON");
    cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
    cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(c0, "logprobs"), "content"), 0);
    REQUIRE(t0, "logprobs.content[0]");
    CHECK(!strcmp(cJSON_GetObjectItem(t0, "token")->valuestring, "\xEF\xBF\xBD"), "token: U+FFFD");
    cJSON *b = cJSON_GetObjectItem(t0, "bytes");
    CHECK(cJSON_GetArraySize(b) == 2 && cJSON_GetArrayItem(b, 0)->valueint == 0xe4 &&
              cJSON_GetArrayItem(b, 1)->valueint == 0x9d, "bytes: the piece's, [228, 157]");
    cJSON *a1 = cJSON_GetArrayItem(cJSON_GetObjectItem(t0, "top_logprobs"), 1);
    b = a1 ? cJSON_GetObjectItem(a1, "bytes") : NULL;
    CHECK(b && cJSON_GetArraySize(b) == 1 && cJSON_GetArrayItem(b, 0)->valueint == 0xe4 &&
              !strcmp(cJSON_GetObjectItem(a1, "token")->valuestring, "\xEF\xBF\xBD"), "top_logprobs: bytes too");
    cJSON_Delete(o);
    h.kind = MF_SRV_COMPLETION;
    js = mf_srv_chunk_json(&h, 0, false, "\xEF\xBF\xBD a", NULL, NULL, NULL, lp, 2);
    REQUIRE(js, "completion chunk");
    CHECK(mf_srv_utf8_valid(js, strlen(js)), "the completion chunk is not UTF-8: %s", js);
    o = parsed(js);
    REQUIRE(o, "completion chunk is JSON");
    cJSON *l = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0), "logprobs");
    CHECK(!strcmp(cJSON_GetArrayItem(cJSON_GetObjectItem(l, "tokens"), 0)->valuestring, "\xEF\xBF\xBD"), "tokens[0]");
    CHECK(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(l, "top_logprobs"), 0), "\xEF\xBF\xBD") != NULL,
          "top_logprobs[0] keyed by U+FFFD");
    CHECK(cJSON_GetArrayItem(cJSON_GetObjectItem(l, "text_offset"), 1)->valueint == 2, "text_offset counts bytes");
    cJSON_Delete(o);
    /* /completion with n_probs: llama-server's completion_probabilities, ids beside the texts and bytes */
    h.kind = MF_SRV_NATIVE;
    js = mf_srv_chunk_json(&h, 0, false, "\xEF\xBF\xBD a", NULL, NULL, NULL, lp, 2);
    REQUIRE(js, "native chunk");
    o = parsed(js);
    REQUIRE(o, "native chunk is JSON");
    cJSON *cp = cJSON_GetObjectItem(o, "completion_probabilities"), *p0 = cJSON_GetArrayItem(cp, 0);
    cJSON *q1 = p0 ? cJSON_GetArrayItem(cJSON_GetObjectItem(p0, "top_logprobs"), 1) : NULL;
    CHECK(cJSON_GetArraySize(cp) == 2 && cJSON_GetObjectItem(p0, "id")->valueint == 7 &&
              cJSON_GetObjectItem(p0, "logprob")->valuedouble == -0.5 &&
              cJSON_GetArraySize(cJSON_GetObjectItem(p0, "bytes")) == 2 && q1 &&
              cJSON_GetObjectItem(q1, "id")->valueint == 9 && cJSON_GetObjectItem(q1, "logprob")->valuedouble == -1.5,
          "completion_probabilities: ids, logprobs and bytes of the chosen token and its alternatives");
    cJSON_Delete(o);
}

static bool near(double a, double b) {
    return fabs(a - b) < 1e-9;
}

/* /completion's answer in llama-server's shape: every field of a result, stop_type from the generator's end,
 * response_fields cutting it to paths named whole ("timings/prompt_n"), several results as an array, and a
 * stream's last chunk without the text it already sent. */
static void test_native_answers_match_llama_server(void) {
    const mf_token toks[] = {11, 22, 33};
    char *fields[] = {"content", "timings/prompt_n", "timings/nope", "truncated", "tokens_cached", "stop_type/x"};
    mf_srv_head h = {.kind = MF_SRV_NATIVE, .id = "cmpl-1", .model = "m.gguf", .created = 1, .return_tokens = true,
                     .id_slot = 2};
    mf_srv_choice ch[2] = {
        {.content = "a\nb", .finish_reason = "stop", .nat = {toks, 3, 3, "word", "###", false, true}},
        {.content = "c", .finish_reason = "length", .nat = {toks, 1, 1, "limit", "", true, false}}};
    mf_srv_usage u = {.prompt_tokens = 9, .completion_tokens = 4, .cached_tokens = 5, .timings = true,
                      .prompt_n = 4, .predicted_n = 4, .prompt_ms = 8.0, .predicted_ms = 40.0};
    cJSON *o = parsed(mf_srv_final_json(&h, ch, 1, &u));
    REQUIRE(o, "final is JSON");
    cJSON *tk = cJSON_GetObjectItem(o, "tokens"), *tm = cJSON_GetObjectItem(o, "timings");
    CHECK(!strcmp(cJSON_GetObjectItem(o, "content")->valuestring, "a\nb") && cJSON_GetArraySize(tk) == 3 &&
              cJSON_GetArrayItem(tk, 2)->valueint == 33 && cJSON_GetObjectItem(o, "id_slot")->valueint == 2 &&
              !strcmp(cJSON_GetObjectItem(o, "stop_type")->valuestring, "word") &&
              !strcmp(cJSON_GetObjectItem(o, "stopping_word")->valuestring, "###") &&
              cJSON_IsTrue(cJSON_GetObjectItem(o, "has_new_line")) && cJSON_IsFalse(cJSON_GetObjectItem(o, "truncated")) &&
              cJSON_GetObjectItem(o, "tokens_predicted")->valueint == 3 &&
              cJSON_GetObjectItem(o, "tokens_evaluated")->valueint == 9 &&
              cJSON_GetObjectItem(o, "tokens_cached")->valueint == 5,
          "the result's fields");
    CHECK(tm && cJSON_GetObjectItem(tm, "prompt_n")->valueint == 4 &&
              near(cJSON_GetObjectItem(tm, "prompt_per_second")->valuedouble, 500.0) &&
              near(cJSON_GetObjectItem(tm, "predicted_per_token_ms")->valuedouble, 10.0) &&
              cJSON_GetObjectItem(tm, "cache_n")->valueint == 5 && !cJSON_GetObjectItem(tm, "draft_n"),
          "timings");
    cJSON_Delete(o);
    h.fields = fields, h.n_fields = 6, h.fields_given = true;
    o = parsed(mf_srv_final_json(&h, ch, 1, &u));
    REQUIRE(o, "projected is JSON");
    CHECK(cJSON_GetArraySize(o) == 4 && !strcmp(cJSON_GetObjectItem(o, "content")->valuestring, "a\nb") &&
              cJSON_GetObjectItem(o, "timings/prompt_n")->valueint == 4 &&
              cJSON_IsFalse(cJSON_GetObjectItem(o, "truncated")) && cJSON_GetObjectItem(o, "tokens_cached"),
          "response_fields: %d keys", cJSON_GetArraySize(o));
    cJSON_Delete(o);
    char *none[] = {""};
    h.fields = none, h.n_fields = 1;
    o = parsed(mf_srv_final_json(&h, ch, 1, &u));
    CHECK(o && cJSON_IsObject(o) && cJSON_GetArraySize(o) == 0, "response_fields [\"\"]: {}");
    cJSON_Delete(o);
    h.fields_given = false;
    o = parsed(mf_srv_final_json(&h, ch, 2, &u));
    CHECK(o && cJSON_IsArray(o) && cJSON_GetArraySize(o) == 2 &&
              cJSON_GetObjectItem(cJSON_GetArrayItem(o, 1), "index")->valueint == 1 &&
              cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(o, 1), "truncated")),
          "two results: an array");
    cJSON_Delete(o);
    h.streamed = true;
    o = parsed(mf_srv_final_json(&h, ch, 1, &u));
    CHECK(o && !strcmp(cJSON_GetObjectItem(o, "content")->valuestring, "") &&
              cJSON_GetArraySize(cJSON_GetObjectItem(o, "tokens")) == 0 && cJSON_IsTrue(cJSON_GetObjectItem(o, "stop")),
          "a stream's last chunk");
    cJSON_Delete(o);
    char tk0[] = "a", tk1[] = "b";
    char *top[] = {tk0, tk1};
    float pr[] = {0.75f, 0.25f};
    mf_token ids[] = {11, 22};
    mf_srv_logprob lp = {.token = tk0, .id = 11, .logprob = 0.75f, .n_top = 2, .top_token = top, .top_logprob = pr,
                         .top_id = ids};
    h.post_probs = true;
    o = parsed(mf_srv_native_chunk_json(&h, "a", toks, 1, 1, NULL, &lp, 1));
    cJSON *e0 = o ? cJSON_GetArrayItem(cJSON_GetObjectItem(o, "completion_probabilities"), 0) : NULL;
    cJSON *tp = e0 ? cJSON_GetObjectItem(e0, "top_probs") : NULL;
    CHECK(e0 && near(cJSON_GetObjectItem(e0, "prob")->valuedouble, 0.75) && !cJSON_GetObjectItem(e0, "logprob") &&
              cJSON_GetArraySize(tp) == 2 && near(cJSON_GetObjectItem(cJSON_GetArrayItem(tp, 1), "prob")->valuedouble, 0.25),
          "post_sampling_probs: prob and top_probs");
    cJSON_Delete(o);
    h.post_probs = false;
    o = parsed(mf_srv_native_chunk_json(&h, "b", toks + 1, 2, 3, NULL, NULL, 0));
    CHECK(o && !strcmp(cJSON_GetObjectItem(o, "content")->valuestring, "b") &&
              cJSON_GetArraySize(cJSON_GetObjectItem(o, "tokens")) == 2 && cJSON_IsFalse(cJSON_GetObjectItem(o, "stop")) &&
              !cJSON_GetObjectItem(o, "timings"),
          "a stream's chunk");
    cJSON_Delete(o);
}

static void test_job_is_answered_exactly_once(void) {
    mf_srv_job *j = mf_srv_job_new(MF_JOB_GENERATE);
    REQUIRE(j, "oom");
    CHECK(mf_srv_job_finish(j, 200, strdup("first")), "first answer taken");
    CHECK(!mf_srv_job_finish(j, 500, strdup("second")), "second answer ignored");
    CHECK(j->status == 200 && !strcmp(j->body, "first"), "status %d body %s", j->status, j->body);
    CHECK(!mf_srv_job_sse(j, "{}"), "no bytes after the answer");
    mf_srv_job_unref(j);
}

static void test_queue_bounds_generate_jobs(void) {
    mf_srv_queue q;
    REQUIRE(mf_srv_queue_init(&q, 2) == 0, "init");
    mf_srv_job *a = mf_srv_job_new(MF_JOB_GENERATE), *b = mf_srv_job_new(MF_JOB_GENERATE),
               *c = mf_srv_job_new(MF_JOB_GENERATE), *s = mf_srv_job_new(MF_JOB_SLOTS);
    CHECK(mf_srv_queue_push(&q, a) == 0 && mf_srv_queue_push(&q, b) == 0, "two fit");
    CHECK(mf_srv_queue_push(&q, c) == 1, "the third is refused (503)");
    CHECK(mf_srv_queue_push(&q, s) == 0, "a control job still fits");
    CHECK(mf_srv_queue_depth(&q) == 2, "depth counts generate jobs");
    mf_srv_job *p = mf_srv_queue_pop(&q, 0);
    CHECK(p == a, "FIFO");
    mf_srv_queue_unpop(&q, p);
    CHECK(mf_srv_queue_pop(&q, 0) == a, "unpop puts it back in front");
    mf_srv_job_unref(a);
    mf_srv_queue_close(&q);
    CHECK(mf_srv_queue_push(&q, c) == 2, "closed");
    mf_srv_queue_destroy(&q);
    mf_srv_job_unref(a), mf_srv_job_unref(b), mf_srv_job_unref(c), mf_srv_job_unref(s);
}

static void test_metrics_text_is_prometheus(void) {
    mf_srv_metrics *m = mf_srv_metrics_new();
    REQUIRE(m, "oom");
    mf_srv_metrics_request(m, "/v1/chat/completions", 200);
    mf_srv_metrics_request(m, "/v1/chat/completions", 200);
    mf_srv_metrics_request(m, "/v1/chat/completions", 503);
    mf_srv_metrics_add(m, MF_SRV_C_GENERATED_TOKENS, 5);
    mf_srv_metrics_set(m, MF_SRV_G_SLOTS_BUSY, 3);
    mf_srv_metrics_observe(m, MF_SRV_H_TTFT, 0.003);
    mf_srv_metrics_observe(m, MF_SRV_H_TTFT, 100);
    size_t len = 0;
    char *t = mf_srv_metrics_render(m, &len);
    REQUIRE(t && len == strlen(t), "render");
    CHECK(strstr(t, "minfer_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 2\n"), "requests");
    CHECK(strstr(t, "minfer_generated_tokens_total 5\n"), "counter");
    CHECK(strstr(t, "minfer_slots_busy 3\n"), "gauge");
    CHECK(strstr(t, "minfer_time_to_first_token_seconds_bucket{le=\"0.0025\"} 0\n"), "bucket below");
    CHECK(strstr(t, "minfer_time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n"), "cumulative bucket");
    CHECK(strstr(t, "minfer_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n"), "+Inf bucket");
    CHECK(strstr(t, "minfer_time_to_first_token_seconds_count 2\n"), "count");
    CHECK(strstr(t, "minfer_jobs_dropped_total 0\n") && strstr(t, "minfer_worker_stalled_total 0\n"),
          "the reference's counter names");
    /* every sample line's family has a # TYPE line */
    for (char *line = t; *line; line = strchr(line, '\n') + 1) {
        if (*line != '#') {
            char fam[128];
            sscanf(line, "%127[a-z_]", fam);
            char *suffix = strstr(fam, "_bucket");
            if (!suffix) suffix = strstr(fam, "_sum");
            if (!suffix && strstr(fam, "_seconds_count")) suffix = strstr(fam, "_count");
            if (suffix) *suffix = 0;
            char want[160];
            snprintf(want, sizeof want, "# TYPE %s ", fam);
            CHECK(strstr(t, want), "no TYPE line for %s", fam);
        }
        if (!strchr(line, '\n')) break;
    }
    free(t);
    mf_srv_metrics_free(m);
}

/* --cache-reuse's walk is llama-server's: past the common prefix a cache head and a prompt head; a run of at
 * least min_chunk matching tokens moves (both heads pass it), a shorter one advances the cache head by one;
 * the prompt's last token is never covered, which shortens a run that reaches it. */
#define CHECK_EQ_INT(a, b)                                                                                   \
    do {                                                                                                     \
        const int32_t a_ = (a), b_ = (b);                                                                    \
        CHECK(a_ == b_, "%s is %d, want %d", #a, a_, b_);                                                    \
    } while (0)

static int32_t plan(const mf_token *c, int32_t nc, const mf_token *p, int32_t np, int32_t keep, int32_t min,
                    mf_srv_move *m, int32_t *nm) {
    int32_t counted = mf_srv_reuse_plan(c, nc, p, np, keep, min, NULL, NULL);
    int32_t got = mf_srv_reuse_plan(c, nc, p, np, keep, min, m, nm);
    CHECK(counted == got, "counting gives %d, planning %d", counted, got);
    CHECK(*nm <= mf_srv_reuse_max_moves(np, min), "%d moves, room for %d", *nm, mf_srv_reuse_max_moves(np, min));
    return got;
}

static void test_cache_reuse_plan_walks_as_llama_server(void) {
    mf_srv_move m[16];
    int32_t nm;
    /* P X S T1 cached, P S T2 asked: S moves from 7 to 4 */
    const mf_token c1[] = {1, 2, 3, 4, 50, 51, 52, 10, 11, 12, 13, 14, 15, 99};
    const mf_token p1[] = {1, 2, 3, 4, 10, 11, 12, 13, 14, 15, 77};
    CHECK_EQ_INT(plan(c1, 14, p1, 11, 4, 3, m, &nm), 10);
    CHECK_EQ_INT(nm, 1);
    CHECK(m[0].from == 7 && m[0].to == 4 && m[0].n == 6, "move {%d, %d, %d}", m[0].from, m[0].to, m[0].n);
    CHECK_EQ_INT(plan(c1, 14, p1, 11, 4, 6, m, &nm), 10); /* a run exactly min_chunk long moves */
    CHECK_EQ_INT(plan(c1, 14, p1, 11, 4, 7, m, &nm), 4);  /* one shorter does not */
    CHECK_EQ_INT(nm, 0);
    /* the run reaches the prompt's end: its last token is run again, even below min_chunk then */
    CHECK_EQ_INT(plan(c1, 14, p1, 10, 4, 6, m, &nm), 9);
    CHECK(nm == 1 && m[0].n == 5, "%d moves, the last %d long", nm, nm ? m[0].n : -1);
    const mf_token p2[] = {1, 2, 3, 4, 10};
    CHECK_EQ_INT(plan(c1, 14, p2, 5, 4, 1, m, &nm), 4); /* a one-token run at the end is dropped whole */
    CHECK_EQ_INT(nm, 0);
    /* the cache head never goes back: a run the prompt has later but the cache earlier is not found */
    const mf_token c3[] = {1, 2, 3, 4, 10, 11, 20, 21, 22, 23};
    const mf_token p3[] = {1, 2, 3, 4, 20, 21, 22, 23, 10, 11, 9};
    CHECK_EQ_INT(plan(c3, 10, p3, 11, 4, 2, m, &nm), 8);
    CHECK(nm == 1 && m[0].from == 6 && m[0].to == 4, "%d moves", nm);
    /* a short run is passed by one token, and a longer one starting inside it found */
    const mf_token c4[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const mf_token p4[] = {1, 2, 3, 4, 6, 7, 8, 9, 0};
    CHECK_EQ_INT(plan(c4, 9, p4, 9, 4, 3, m, &nm), 8);
    CHECK(nm == 1 && m[0].from == 5 && m[0].to == 4 && m[0].n == 4, "move {%d, %d, %d}", m[0].from, m[0].to,
          m[0].n);
    /* several runs, each after the last: the gaps in the cache are skipped, the prompt's new text stays */
    const mf_token c5[] = {1, 2, 30, 31, 32, 40, 41, 42, 43, 50, 51, 52, 53};
    const mf_token p5[] = {1, 2, 31, 32, 7, 50, 51, 52, 53, 8};
    CHECK_EQ_INT(plan(c5, 13, p5, 10, 2, 2, m, &nm), 4); /* 31 32 moves; then 7 is new: nothing after moves */
    CHECK(nm == 1 && m[0].from == 3 && m[0].to == 2 && m[0].n == 2, "%d moves", nm);
    const mf_token p6[] = {1, 2, 31, 32, 50, 51, 52, 53, 8};
    CHECK_EQ_INT(plan(c5, 13, p6, 9, 2, 2, m, &nm), 8);
    CHECK(nm == 2 && m[1].from == 9 && m[1].to == 4 && m[1].n == 4, "%d moves", nm);
    /* nothing past a prefix that already reaches the last prompt token, nor with min_chunk 0 */
    CHECK_EQ_INT(plan(c1, 14, p1, 5, 4, 1, m, &nm), 4);
    CHECK_EQ_INT(plan(c1, 14, p1, 11, 4, 0, m, &nm), 4);
    CHECK_EQ_INT(plan(NULL, 0, p1, 11, 0, 1, m, &nm), 0);
}

int main(void) {
    RUN(test_chat_request_fields_are_read);
    RUN(test_defaults_follow_llama_server);
    RUN(test_bad_requests_name_field_and_value);
    RUN(test_logit_bias_shapes_are_read);
    RUN(test_infill_requests_are_read);
    RUN(test_llama_server_sampler_fields);
    RUN(test_code_completion_fields_are_read);
    RUN(test_native_answers_match_llama_server);
    RUN(test_fim_layout_cuts_as_llama_server);
    RUN(test_cache_reuse_plan_walks_as_llama_server);
    RUN(test_deep_nesting_and_huge_input_are_refused_not_crashing);
    RUN(test_utf8_validation);
    RUN(test_utf8_validity_is_the_code_point_rule);
    RUN(test_utf8_lossy_replaces_maximal_subparts);
    RUN(test_think_split_across_pieces);
    RUN(test_tools_and_calls_are_read);
    RUN(test_constraints_become_grammars);
    RUN(test_tool_calls_split_out_of_any_pieces);
    RUN(test_tool_call_answers_match_openai);
    RUN(test_response_shapes_match_openai);
    RUN(test_logprobs_of_part_of_a_character_keep_its_bytes);
    RUN(test_job_is_answered_exactly_once);
    RUN(test_queue_bounds_generate_jobs);
    RUN(test_metrics_text_is_prometheus);
    return mf_test_done();
}
