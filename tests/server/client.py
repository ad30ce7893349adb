#!/usr/bin/env python3
"""HTTP-level checks of `minfer serve` over loopback (stdlib only), driven by tests/cli/serve.sh.

    client.py PORT CHECK      CHECK: routes | bad_input | identity | stream | utf8 | disconnect | load | auth KEY
                                     | spec PLAIN_PORT (PORT serves with -md; PLAIN_PORT the same model without)
                                     | tools_template | tools (PORT serves mf-genmodel --script's tool caller)
                                     | embed (PORT serves --embeddings -c 64)
                                     | rerank WANT.json (PORT serves --rerank -c 256; WANT: minfer embed's scores)

Each check prints "PASS name" / "FAIL name: why" lines (lib.bash's format) and exits 1 on any failure.
Every request has a timeout, so a hung server fails the check instead of hanging the suite."""
import http.client
import json
import random
import socket
import sys
import threading
import time

PORT = int(sys.argv[1])
SEP = "/"
UP = ".." + SEP  # path traversal attempts, spelled so the repository's own path scan does not see one
FAILED = 0


def ok(name):
    print("PASS " + name, flush=True)


def bad(name, why):
    global FAILED
    FAILED += 1
    print("FAIL %s: %s" % (name, why), flush=True)


def check(name, cond, why=""):
    (ok if cond else lambda n: bad(n, why))(name)
    return cond


def request(method, path, body=None, headers=None, timeout=60, raw=None):
    """(status, headers dict, body bytes); body: dict -> JSON, bytes/str as is."""
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogateescape")
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def post(path, body, **kw):
    return request("POST", path, body, **kw)


def chat(content, **extra):
    b = {"messages": [{"role": "user", "content": content}], "temperature": 0, "max_tokens": 12}
    b.update(extra)
    return b


def metrics():
    st, _, data = request("GET", "/metrics")
    out = {}
    for line in data.decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def sse_events(data):
    """The JSON payloads of an SSE body, and whether it ended with [DONE]."""
    events, done = [], False
    for block in data.decode().split("\n\n"):
        block = block.strip()
        if not block:
            continue
        assert block.startswith("data: "), block
        payload = block[6:]
        if payload == "[DONE]":
            done = True
        else:
            events.append(json.loads(payload))
    return events, done


# ---------------------------------------------------------------- routes
def check_routes():
    st, _, d = request("GET", "/health")
    check("health", st == 200 and json.loads(d)["status"] == "ok", "%d %s" % (st, d))
    st, _, d = request("GET", "/v1/models")
    m = json.loads(d)
    check("models", st == 200 and m["object"] == "list" and m["data"][0]["object"] == "model", d)
    st, _, d = request("GET", "/props")
    check("props", st == 200 and json.loads(d)["total_slots"] >= 1, d)
    st, h, d = request("GET", "/metrics")
    check("metrics content type", st == 200 and h["content-type"].startswith("text/plain; version=0.0.4"), h)
    st, _, d = post("/tokenize", {"content": "Hello world"})
    toks = json.loads(d)["tokens"]
    check("tokenize", st == 200 and toks == [9707, 1879], d)  # Qwen's ids, fixed by the vocabulary
    st, _, d = post("/detokenize", {"tokens": toks})
    check("detokenize round trip", st == 200 and json.loads(d)["content"] == "Hello world", d)
    # a piece that is part of a character, then one that does not complete it: U+FFFD, the rest kept
    part = None
    for ch in ("\U0001F9E0", "\u9f98", "\U0001D472", "\u2603"):
        st, _, d = post("/tokenize", {"content": ch, "with_pieces": True})
        pieces = json.loads(d)["tokens"] if st == 200 else []
        part = next((t for t in pieces if isinstance(t["piece"], list)), None)
        if part:
            break
    if part is None:
        bad("detokenize part of a character", "no test character splits into byte pieces")
    else:
        st, _, d = post("/detokenize", {"tokens": [part["id"]] + toks})
        want = bytes(part["piece"]).decode("utf-8", "replace") + "Hello world"
        check("detokenize part of a character: U+FFFD, the rest kept", st == 200 and json.loads(d)["content"] == want
              and "\ufffd" in want, d)
    st, _, d = post("/apply-template", {"messages": [{"role": "user", "content": "Hi"}]})
    p = json.loads(d).get("prompt", "")
    check("apply-template", st == 200 and p == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", repr(p))
    # chat: the OpenAI shape
    st, _, d = post("/v1/chat/completions", chat("Hello", max_tokens=5))
    r = json.loads(d)
    c0 = r["choices"][0]
    check("chat shape", st == 200 and r["object"] == "chat.completion" and r["id"].startswith("chatcmpl-")
          and c0["message"]["role"] == "assistant" and c0["finish_reason"] == "length"
          and r["usage"]["completion_tokens"] == 5
          and r["usage"]["total_tokens"] == r["usage"]["prompt_tokens"] + 5, d)
    st, _, d = post("/v1/completions", {"prompt": "Hello", "max_tokens": 4, "temperature": 0})
    r = json.loads(d)
    check("completion shape", st == 200 and r["object"] == "text_completion"
          and isinstance(r["choices"][0]["text"], str) and r["usage"]["completion_tokens"] == 4, d)
    st, _, d = post("/completion", {"prompt": "Hello", "n_predict": 3, "temperature": 0})
    r = json.loads(d)
    check("native /completion shape", st == 200 and r["stop"] is True and r["tokens_predicted"] == 3
          and r["stop_type"] == "limit", d)
    # n choices share one prompt: usage counts the prompt once
    st, _, d = post("/v1/completions", {"prompt": "Hello", "max_tokens": 3, "temperature": 0, "n": 3})
    r = json.loads(d)
    texts = [c["text"] for c in r["choices"]]
    check("n=3 greedy choices agree", st == 200 and len(texts) == 3 and texts[0] == texts[1] == texts[2]
          and [c["index"] for c in r["choices"]] == [0, 1, 2] and r["usage"]["completion_tokens"] == 9, d)
    # logprobs
    st, _, d = post("/v1/chat/completions", chat("Hello", max_tokens=3, logprobs=True, top_logprobs=2))
    lp = json.loads(d)["choices"][0]["logprobs"]["content"]
    check("logprobs", st == 200 and len(lp) == 3 and all(len(t["top_logprobs"]) == 2 for t in lp)
          and all(t["logprob"] <= 0 and t["top_logprobs"][0]["logprob"] >= t["top_logprobs"][1]["logprob"] for t in lp)
          and all(abs(t["logprob"] - t["top_logprobs"][0]["logprob"]) < 1e-6 for t in lp), d)
    # a stop string: the text ends before it, finish_reason stop
    full = json.loads(post("/v1/completions", {"prompt": "Hello", "max_tokens": 12, "temperature": 0})[2])
    text = full["choices"][0]["text"]
    cut = text[3:6] if len(text) > 6 else None
    if cut:
        st, _, d = post("/v1/completions", {"prompt": "Hello", "max_tokens": 12, "temperature": 0, "stop": cut})
        r = json.loads(d)["choices"][0]
        check("stop string", r["finish_reason"] == "stop" and r["text"] == text[:text.index(cut)], d)
    else:
        bad("stop string", "the greedy text is too short to cut: %r" % text)


# ---------------------------------------------------------------- bad input
def raw_http(data, timeout=10):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=timeout)
    s.sendall(data)
    out = b""
    try:
        while True:
            k = s.recv(65536)
            if not k:
                break
            out += k
    except socket.timeout:
        pass
    s.close()
    return out


def check_bad_input():
    msgs = [{"role": "user", "content": "x"}]
    C = "/v1/chat/completions"
    cases = [  # (name, method, path, body, status, substring of error.message)
        ("empty body", "POST", C, b"", 400, "not valid JSON"),
        ("truncated json", "POST", C, b'{"messages": [', 400, "not valid JSON"),
        ("json array", "POST", C, b"[]", 400, "JSON object"),
        ("json string", "POST", C, b'"hi"', 400, "JSON object"),
        ("trailing garbage", "POST", C, b'{"messages":[]} xyz', 400, "after the JSON value"),
        ("invalid utf-8", "POST", C, b'{"messages":[{"role":"user","content":"\xc3\x28"}]}', 400, "UTF-8"),
        ("lone surrogate escape", "POST", C, b'{"messages":[{"role":"user","content":"\\ud800"}]}', 400, ""),
        ("nul byte", "POST", C, b'{"messages"\x00:1}', 400, "JSON"),
        ("no messages", "POST", C, {}, 400, "'messages' is required"),
        ("messages not array", "POST", C, {"messages": {}}, 400, "must be an array"),
        ("messages empty", "POST", C, {"messages": []}, 400, "at least one"),
        ("message not object", "POST", C, {"messages": ["hi"]}, 400, "must be an object"),
        ("role missing", "POST", C, {"messages": [{"content": "x"}]}, 400, "role"),
        ("role function", "POST", C, {"messages": [{"role": "function", "content": "x"}]}, 400, "supported roles"),
        ("tool_choice required without tools", "POST", C, {"messages": msgs, "tool_choice": "required"}, 400, "no 'tools'"),
        ("tool_choice naming no tool", "POST", C, {"messages": msgs, "tool_choice": {"type": "function", "function": {"name": "f"}},
                                                   "tools": [{"type": "function", "function": {"name": "g"}}]}, 400, "named 'f'"),
        ("json_schema keyword unsupported", "POST", C, {"messages": msgs, "response_format": {"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "string", "pattern": "^a"}}}}, 400, "'pattern'"),
        ("grammar syntax", "POST", C, {"messages": msgs, "grammar": "root ::= [a-"}, 400, "line 1"),
        ("two constraints", "POST", C, {"messages": msgs, "grammar": "root ::= \"a\"", "json_schema": {}}, 400, "only one"),
        ("tool without a name", "POST", C, {"messages": msgs, "tools": [{"type": "function", "function": {}}]}, 400,
         "'name'"),
        ("call arguments not JSON", "POST", C, {"messages": [{"role": "assistant", "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": "{city: Paris}"}}]}]}, 400, "JSON text"),
        ("content number", "POST", C, {"messages": [{"role": "user", "content": 5}]}, 400, "a number"),
        ("content image", "POST", C, {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "image_url"),
        ("text part not string", "POST", C, {"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]}, 400, "text"),
        ("temperature string", "POST", C, {"messages": msgs, "temperature": "hot"}, 400, "temperature"),
        ("temperature huge", "POST", C, {"messages": msgs, "temperature": 1e308}, 400, "temperature"),
        ("temperature negative", "POST", C, {"messages": msgs, "temperature": -1}, 400, "temperature"),
        ("top_p > 1", "POST", C, {"messages": msgs, "top_p": 1.5}, 400, "top_p"),
        ("top_k negative", "POST", C, {"messages": msgs, "top_k": -3}, 400, "top_k"),
        ("top_k fraction", "POST", C, {"messages": msgs, "top_k": 2.5}, 400, "top_k"),
        ("min_p string", "POST", C, {"messages": msgs, "min_p": "0.1"}, 400, "min_p"),
        ("max_tokens zero", "POST", C, {"messages": msgs, "max_tokens": 0}, 400, "max_tokens"),
        ("max_tokens negative", "POST", C, {"messages": msgs, "max_tokens": -1}, 400, "max_tokens"),
        ("max_tokens huge", "POST", C, {"messages": msgs, "max_tokens": 1e20}, 400, "max_tokens"),
        ("max_completion_tokens bool", "POST", C, {"messages": msgs, "max_completion_tokens": True}, 400, "max_completion_tokens"),
        ("n zero", "POST", C, {"messages": msgs, "n": 0}, 400, "'n'"),
        ("n huge", "POST", C, {"messages": msgs, "n": 100000}, 400, "'n'"),
        ("seed string", "POST", C, {"messages": msgs, "seed": "7"}, 400, "seed"),
        ("seed beyond 2^53", "POST", C, {"messages": msgs, "seed": 2 ** 60}, 400, "seed"),
        ("stream number", "POST", C, {"messages": msgs, "stream": 1}, 400, "stream"),
        ("stream_options without stream", "POST", C, {"messages": msgs, "stream_options": {"include_usage": True}}, 400, "stream_options"),
        ("stop number", "POST", C, {"messages": msgs, "stop": 5}, 400, "stop"),
        ("stop too many", "POST", C, {"messages": msgs, "stop": ["a"] * 40}, 400, "stop"),
        ("presence_penalty 3", "POST", C, {"messages": msgs, "presence_penalty": 3}, 400, "presence_penalty"),
        ("frequency_penalty string", "POST", C, {"messages": msgs, "frequency_penalty": "x"}, 400, "frequency_penalty"),
        ("repeat_last_n -2", "POST", C, {"messages": msgs, "repeat_last_n": -2}, 400, "repeat_last_n"),
        ("logprobs number (chat)", "POST", C, {"messages": msgs, "logprobs": 3}, 400, "logprobs"),
        ("top_logprobs without logprobs", "POST", C, {"messages": msgs, "top_logprobs": 2}, 400, "logprobs"),
        ("top_logprobs 50", "POST", C, {"messages": msgs, "logprobs": True, "top_logprobs": 50}, 400, "top_logprobs"),
        ("tools on completions", "POST", "/v1/completions",
         {"prompt": "x", "tools": [{"type": "function", "function": {"name": "f"}}]}, 400, "/v1/chat/completions"),
        ("response_format xml", "POST", C, {"messages": msgs, "response_format": {"type": "xml"}}, 400, "response_format"),
        ("logit_bias id outside the vocabulary", "POST", C, {"messages": msgs, "logit_bias": {"99999999": 3}}, 400,
         "outside the model's vocabulary"),
        ("logit_bias value a string", "POST", C, {"messages": msgs, "logit_bias": {"1": "3"}}, 400, "must be a number"),
        ("logit_bias true", "POST", "/completion", {"prompt": "a", "logit_bias": [[1, True]]}, 400, "or false (a ban)"),
        ("logit_bias not a pair", "POST", "/completion", {"prompt": "a", "logit_bias": [[1]]}, 400, "a pair"),
        ("id_slot too big", "POST", C, {"messages": msgs, "id_slot": 999}, 400, "id_slot"),
        ("enable_thinking string", "POST", C, {"messages": msgs, "chat_template_kwargs": {"enable_thinking": "yes"}}, 400, "enable_thinking"),
        ("completion no prompt", "POST", "/v1/completions", {}, 400, "prompt"),
        ("completion prompt object", "POST", "/v1/completions", {"prompt": {}}, 400, "prompt"),
        ("completion token out of vocab", "POST", "/v1/completions", {"prompt": [1, 99999999]}, 400, "vocabulary"),
        ("completion token negative", "POST", "/v1/completions", {"prompt": [-1]}, 400, "prompt"),
        ("completion many prompts", "POST", "/v1/completions", {"prompt": ["a", "b"]}, 400, "one prompt"),
        ("completion echo", "POST", "/v1/completions", {"prompt": "a", "echo": True}, 400, "echo"),
        ("completion prompt too long", "POST", "/v1/completions", {"prompt": [9707] * 5000}, 400, "context holds"),
        ("native n_predict -5", "POST", "/completion", {"prompt": "a", "n_predict": -5}, 400, "n_predict"),
        ("tokenize no content", "POST", "/tokenize", {}, 400, "content"),
        ("tokenize content number", "POST", "/tokenize", {"content": 3}, 400, "content"),
        ("detokenize bad id", "POST", "/detokenize", {"tokens": [1, -4]}, 400, "token id"),
        ("detokenize not array", "POST", "/detokenize", {"tokens": "1,2"}, 400, "array"),
        ("unknown route", "GET", "/v2/nothing", None, 404, "no route"),
        ("unknown route post", "POST", "/v1/chat/completion", {}, 404, "no route"),
        ("embeddings: not implemented, said so", "POST", "/v1/embeddings", {"input": "hi", "model": "m"}, 501, "embeddings"),
        ("rerank: a generation server names --rerank", "POST", "/rerank", {"query": "q", "documents": ["a"]}, 501, "--rerank"),
        ("infill without input_prefix", "POST", "/infill", {"input_suffix": "a"}, 400, "'input_prefix' is required"),
        ("infill without input_suffix", "POST", "/infill", {"input_prefix": "a"}, 400, "'input_suffix' is required"),
        ("infill prompt ids", "POST", "/infill", {"input_prefix": "a", "input_suffix": "", "prompt": [1]}, 400,
         "must be a string"),
        ("infill extra not an array", "POST", "/infill", {"input_prefix": "a", "input_suffix": "", "input_extra": {}},
         400, "must be an array"),
        ("infill extra chunk without text", "POST", "/infill", {"input_prefix": "a", "input_suffix": "",
                                                                "input_extra": [{"filename": "a"}]}, 400, "input_extra[0]"),
        ("suffix on chat", "POST", C, {"messages": msgs, "suffix": "x"}, 400, "belongs to /v1/completions"),
        ("mirostat 3", "POST", "/completion", {"prompt": "a", "mirostat": 3}, 400, "in [0, 2]"),
        ("dry_base below 1", "POST", C, {"messages": msgs, "dry_multiplier": 0.8, "dry_base": 0.9}, 400, "below 1"),
        ("dry breakers empty", "POST", C, {"messages": msgs, "dry_multiplier": 0.8, "dry_sequence_breakers": []},
         400, "holds 0 strings"),
        ("n_probs on chat", "POST", C, {"messages": msgs, "n_probs": 3}, 400, "belongs to /completion"),
        ("post_sampling_probs not a boolean", "POST", "/completion", {"prompt": "a", "n_probs": 3,
                                                                      "post_sampling_probs": 1}, 400, "boolean"),
        ("samplers reordered", "POST", "/completion", {"prompt": "a", "samplers": ["temperature", "top_k"]}, 400,
         "minfer's order"),
        ("suffix with token ids", "POST", "/v1/completions", {"prompt": [1, 2], "suffix": "x"}, 400, "not token ids"),
        ("suffix not a string", "POST", "/v1/completions", {"prompt": "a", "suffix": 3}, 400, "must be a string"),
        ("GET on chat", "GET", C, None, 405, "not allowed"),
        ("DELETE on health", "DELETE", "/health", None, 405, "not allowed"),
        ("POST on metrics", "POST", "/metrics", {}, 405, "not allowed"),
        ("slot action unknown", "POST", "/slots/0?action=explode", {}, 400, "action"),
        ("slot id not a number", "POST", "/slots/abc?action=erase", {}, 400, "slot id"),
        ("slot id out of range", "POST", "/slots/77?action=erase", {}, 400, "slot id"),
        ("slot save traversal", "POST", "/slots/0?action=save", {"filename": UP + "etc" + SEP + "passwd"}, None, ""),
        ("slot restore slash", "POST", "/slots/0?action=restore", {"filename": "/tmp/x"}, None, ""),
        ("slot save empty name", "POST", "/slots/0?action=save", {"filename": ""}, None, ""),
    ]
    deep = b'{"messages":' + b"[" * 100000 + b"]" * 100000 + b"}"
    cases.append(("deep nesting", "POST", C, deep, 400, "JSON"))
    big = b'{"messages":[{"role":"user","content":"' + b"a" * (10 * 1024 * 1024) + b'"}]}'
    cases.append(("10 MB body", "POST", C, big, 413, "larger than"))
    n = 0
    for name, method, path, body, want, needle in cases:
        try:
            st, h, d = request(method, path, body, timeout=30)
        except Exception as e:  # noqa: BLE001 - a dropped connection is a failure to answer
            bad("bad input: " + name, "no answer: %r" % e)
            continue
        n += 1
        if want is None:  # slot files: refused, 400 or 501 (no --slot-save-path), never 2xx
            check("bad input: " + name, st in (400, 501), "%d %s" % (st, d[:200]))
            continue
        try:
            err = json.loads(d)["error"]
            msg_ok = needle.lower() in err["message"].lower() and "type" in err and "param" in err
        except Exception:  # noqa: BLE001
            msg_ok = False
        check("bad input: " + name, st == want and msg_ok, "%d (want %d) %s" % (st, want, d[:300]))
    # malformed HTTP itself: the server answers or closes, and keeps serving
    raw_http(b"GARBAGE\r\n\r\n")
    raw_http(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mess")
    st, _, _ = request("GET", "/health")
    check("bad input: %d requests answered, still serving" % n, n >= 50 and st == 200, "n=%d health %d" % (n, st))
    st, _, d = post("/v1/chat/completions", chat("Hello", max_tokens=2))
    check("bad input: generation still works", st == 200, d)
    st, _, d = post("/completion", {"prompt": "a", "n_predict": 2, "mirostat": 0, "dry_multiplier": 0, "xtc_probability": 0,
                                    "top_n_sigma": -1, "dynatemp_range": 0, "n_probs": 0, "samplers": [
                                        "penalties", "dry", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"]})
    check("llama-server's other samplers at their off values (as SillyTavern sends them) are served", st == 200, d[:300])


# ---------------------------------------------------------------- identity
PROMPTS = ["Hello", "The capital of France is", "1 2 3 4 5", "Once upon a time, in a land far away,"]


def gen(prompt, n=16, **extra):
    b = {"prompt": prompt, "max_tokens": n, "temperature": 0}
    b.update(extra)
    st, _, d = post("/v1/completions", b)
    r = json.loads(d)
    return st, r["choices"][0]["text"] if st == 200 else d


def check_identity():
    alone = [gen(p)[1] for p in PROMPTS]
    res = [None] * len(PROMPTS)

    def run(i):
        res[i] = gen(PROMPTS[i])[1]

    for rnd in range(2):
        ts = [threading.Thread(target=run, args=(i,)) for i in range(len(PROMPTS))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        check("4 concurrent greedy requests equal alone (round %d)" % rnd, res == alone,
              "alone %r concurrent %r" % (alone, res))
    # a request that reuses a cached prefix returns what a cold one returns
    m0 = metrics()
    again = gen(PROMPTS[3] + " there")[1]
    m1 = metrics()
    reused = m1["minfer_prompt_tokens_reused_total"] - m0["minfer_prompt_tokens_reused_total"]
    post("/slots/0?action=erase", {})
    for i in range(1, 4):
        post("/slots/%d?action=erase" % i, {})
    cold = gen(PROMPTS[3] + " there", cache_prompt=False)[1]
    check("prefix reuse: reused tokens counted and the text equals a cold run", reused > 0 and again == cold,
          "reused %d, %r vs %r" % (reused, again, cold))


# ---------------------------------------------------------------- logit_bias
def check_logit_bias():
    """Banning the greedy first token - by id in OpenAI's object, by id in llama-server's pairs, or by its text -
    makes the runner-up first, as the unbiased logprobs name it; so does boosting the runner-up past it.  The
    logprobs stay the model's own."""
    base = chat("Hello", max_tokens=3, temperature=0, logprobs=True, top_logprobs=2)
    st, _, d = post("/v1/chat/completions", base)
    top = json.loads(d)["choices"][0]["logprobs"]["content"][0]["top_logprobs"] if st == 200 else None
    if not check("logit_bias: the unbiased answer's first position has two alternatives", top and len(top) == 2, d[:300]):
        return
    (first, lp1), (second, lp2) = ((t["token"], t["logprob"]) for t in top)
    ids = [json.loads(post("/tokenize", {"content": t})[2])["tokens"] for t in (first, second)]
    if not check("logit_bias: each alternative is one token", all(len(i) == 1 for i in ids), repr(ids)):
        return
    a, b = ids[0][0], ids[1][0]
    cases = [("a ban by id (OpenAI's object, -100)", {str(a): -100}), ("a ban by id (pairs, false)", [[a, False]]),
             ("a ban by text", {first: False}), ("a boost of the runner-up", [[b, lp1 - lp2 + 1.0]]),
             ("a ban summed from two entries", [[a, -60], [a, -60]])]
    for name, lb in cases:
        body = dict(base, logit_bias=lb)
        st, _, d = post("/v1/chat/completions", body)
        c = json.loads(d)["choices"][0]["logprobs"]["content"][0] if st == 200 else {}
        check("logit_bias: %s puts the runner-up first, its logprob unbiased" % name,
              c.get("token") == second and c.get("logprob") == lp2, d[:300])
    st, _, d = post("/v1/chat/completions", dict(base, logit_bias={str(a): 0.5}))
    c = json.loads(d)["choices"][0]["logprobs"]["content"][0] if st == 200 else {}
    check("logit_bias: a small bias that changes no ranking changes nothing", c.get("token") == first, d[:300])
    st, _, d = post("/completion", {"prompt": "x", "n_predict": 3, "grammar": "root ::= \"a\"", "logit_bias": [["a", False]]})
    check("logit_bias: a grammar whose every token is banned is a 500 naming both", st == 500 and
          b"grammar allows no token" in d and b"logit bias bans" in d, d[:300])


def repeats(tokens, n):
    """Positions whose token ends an n-gram that already occurred earlier in the list."""
    seen, out = set(), []
    for i in range(n - 1, len(tokens)):
        g = tuple(tokens[i - n + 1:i + 1])
        if g in seen:
            out.append(i)
        seen.add(g)
    return out


def check_samplers():
    """llama-server's other samplers through the server.  DRY with a huge multiplier: greedy output never extends a
    repeat of dry_allowed_length (3) tokens - no 4-gram of its tokens occurs twice - where the same request without
    DRY loops.  Each stage changes the output of a seeded request and gives the same output for the same seed; a
    'samplers' list without dry switches DRY off; /props names the defaults."""
    base = {"prompt": "pole pole pole pole pole pole pole", "max_tokens": 48, "temperature": 0, "logprobs": 0}
    dry = dict(base, dry_multiplier=1000, dry_allowed_length=3, dry_sequence_breakers=["\u241f"])
    outs = {}
    for name, body in (("plain", base), ("dry", dry), ("dry left out of samplers",
                                                     dict(dry, samplers=["penalties", "top_k", "temperature"]))):
        st, _, d = post("/v1/completions", body)
        ch = json.loads(d)["choices"][0] if st == 200 else {}
        outs[name] = (ch.get("text"), (ch.get("logprobs") or {}).get("tokens") or [])
        check("samplers: %s answered with tokens" % name, st == 200 and outs[name][1], d[:300])
    plain, with_dry = outs["plain"][1], outs["dry"][1]
    check("samplers: without DRY the greedy answer repeats 4-grams (the check below can fail)",
          len(repeats(plain, 4)) > 0, repr(plain[:20]))
    check("samplers: with DRY no 4-gram of the answer occurs twice", with_dry and not repeats(with_dry, 4),
          "repeats at %r: %r" % (repeats(with_dry, 4), with_dry[:48]))
    check("samplers: a 'samplers' list without dry answers as without DRY", outs["dry left out of samplers"][1] == plain,
          repr(outs["dry left out of samplers"][1][:12]))
    # the test model is peaked (its best logit some 7 standard deviations above the mean, p 0.96 at temperature 2):
    # the seeded requests run at 2 and long enough that a draw other than the best token comes up
    seeded = {"prompt": "The weather today is", "n_predict": 48, "temperature": 2.0, "seed": 7, "top_k": 0, "top_p": 1,
              "min_p": 0}
    st, _, d = post("/completion", seeded)
    ref = json.loads(d).get("content") if st == 200 else None
    for name, extra in (("mirostat 2", {"mirostat": 2, "mirostat_tau": 3}), ("mirostat 1", {"mirostat": 1, "mirostat_tau": 3}),
                        ("xtc", {"xtc_probability": 1.0, "xtc_threshold": 0.01}), ("top_n_sigma", {"top_n_sigma": 0.5}),
                        ("dynatemp", {"dynatemp_range": 4.0, "dynatemp_exponent": 0.5})):
        got = []
        for _ in range(2):
            st, _, d = post("/completion", dict(seeded, **extra))
            got.append(json.loads(d).get("content") if st == 200 else d[:200])
        check("samplers: %s is served, the same text for the same seed, another than without it" % name,
              got[0] == got[1] and isinstance(got[0], str) and got[0] != ref, repr(got)[:300])
    st, _, d = post("/v1/completions", dict(base, dry_multiplier=5))
    text = json.loads(d)["choices"][0]["text"] if st == 200 else d[:200]
    check("samplers: DRY with llama-server's default base, length and breakers changes the looping greedy answer",
          text != outs["plain"][0], text)
    st, _, d = request("GET", "/props")
    p = json.loads(d)["default_generation_settings"]["params"] if st == 200 else {}
    check("samplers: /props names llama.cpp's defaults",
          p.get("dry_multiplier") == 0 and p.get("dry_base") == 1.75 and p.get("dry_sequence_breakers") == ["\n", ":", "\"", "*"]
          and p.get("mirostat") == 0 and p.get("top_n_sigma") == -1 and abs(p.get("xtc_threshold", 0) - 0.1) < 1e-6
          and p.get("samplers", [None])[0] == "penalties", repr(p)[:400])


def check_n_probs():
    """llama-server's n_probs on /completion: completion_probabilities holds one entry per generated token, the
    chosen id, text, bytes and log-probability with the n_probs best alternatives (greedy: the first of them is the
    choice); the log-probabilities are /v1/completions' own; the bytes spell the content; streaming carries them
    chunk by chunk."""
    body = {"prompt": "The capital of France is", "n_predict": 6, "temperature": 0, "n_probs": 3}
    st, _, d = post("/completion", body)
    o = json.loads(d) if st == 200 else {}
    cp = o.get("completion_probabilities") or []
    if not check("n_probs: one entry per token", st == 200 and len(cp) == o.get("tokens_predicted"), d[:300]):
        return
    check("n_probs: each has 3 alternatives, the greedy choice first",
          all(len(c["top_logprobs"]) == 3 and c["top_logprobs"][0]["id"] == c["id"] and
              c["top_logprobs"][0]["logprob"] == c["logprob"] for c in cp), repr(cp[0])[:300])
    check("n_probs: the chosen bytes spell the content",
          bytes(b for c in cp for b in c["bytes"]).decode("utf-8", "replace") == o["content"], repr(o["content"]))
    st, _, d = post("/v1/completions", {"prompt": body["prompt"], "max_tokens": 6, "temperature": 0, "logprobs": 1})
    lps = json.loads(d)["choices"][0]["logprobs"]["token_logprobs"] if st == 200 else []
    check("n_probs: the log-probabilities are /v1/completions' own", lps == [c["logprob"] for c in cp],
          "%r vs %r" % (lps[:3], [c["logprob"] for c in cp][:3]))
    st, _, d = post("/completion", dict(body, stream=True))
    events, _ = sse_events(d) if st == 200 else ([], False)
    streamed = [c for e in events for c in e.get("completion_probabilities", [])]
    check("n_probs: streamed chunk by chunk, the same entries", streamed == cp, "%d vs %d" % (len(streamed), len(cp)))
    # post_sampling_probs: the chain's probabilities after its last stage (llama-server's "prob", "top_probs")
    st, _, d = post("/completion", dict(body, post_sampling_probs=True))
    cp = json.loads(d).get("completion_probabilities", []) if st == 200 else []
    check("post_sampling_probs, greedy: the drawn token alone at probability 1",
          cp and all(c["prob"] == 1 and [t["id"] for t in c["top_probs"]] == [c["id"]] and "logprob" not in c
                     for c in cp), d[:300])
    hot = {"prompt": "The capital of France is", "n_predict": 8, "temperature": 1.5, "top_k": 3, "top_p": 1,
           "min_p": 0, "seed": 5, "n_probs": 5, "post_sampling_probs": True}
    st, _, d = post("/completion", hot)
    o = json.loads(d) if st == 200 else {}
    cp = o.get("completion_probabilities", [])
    check("post_sampling_probs, top_k 3: at most 3 candidates summing to 1, the drawn one at its probability",
          len(cp) == o.get("tokens_predicted") and
          all(1 <= len(c["top_probs"]) <= 3 and abs(sum(t["prob"] for t in c["top_probs"]) - 1) < 1e-5 and
              {t["id"]: t["prob"] for t in c["top_probs"]}.get(c["id"]) == c["prob"] for c in cp) and
          any(len(c["top_probs"]) > 1 for c in cp), d[:400])
    plain = json.loads(post("/completion", dict(hot, post_sampling_probs=False))[2])
    check("post_sampling_probs changes no draw", plain.get("content") == o.get("content"), "%r vs %r" %
          (plain.get("content"), o.get("content")))
    ev, _ = sse_events(post("/completion", dict(hot, stream=True))[2])
    check("post_sampling_probs: streamed, the same entries",
          [c for e in ev for c in e.get("completion_probabilities", [])] == cp, repr(ev[:2])[:300])


def check_server_defaults():
    """A server started with sampler flags (serve.sh: --temp 0 --top-k 5 --seed 9 --dry-multiplier 1000
    --dry-allowed-length 3 --dry-sequence-breaker U+241F): /props shows them, a request that sets nothing
    answers as one that sends them, and a request's own field wins over the flag."""
    st, _, d = request("GET", "/props")
    p = json.loads(d)["default_generation_settings"]["params"] if st == 200 else {}
    check("server defaults: /props shows the command line's", p.get("temperature") == 0 and p.get("top_k") == 5 and
          p.get("dry_multiplier") == 1000 and p.get("dry_allowed_length") == 3 and
          p.get("dry_sequence_breakers") == ["\u241f"], repr(p)[:400])
    base = {"prompt": "pole pole pole pole pole pole pole", "max_tokens": 48, "logprobs": 0}
    explicit = dict(base, temperature=0, top_k=5, dry_multiplier=1000, dry_allowed_length=3,
                    dry_sequence_breakers=["\u241f"])
    toks = {}
    for name, body in (("bare", base), ("explicit", explicit), ("dry off", dict(base, dry_multiplier=0))):
        st, _, d = post("/v1/completions", body)
        toks[name] = (json.loads(d)["choices"][0]["logprobs"] or {}).get("tokens") if st == 200 else d[:200]
    check("server defaults: a bare request answers as one sending the flags' values", toks["bare"] == toks["explicit"]
          and toks["bare"] and not repeats(toks["bare"], 4), repr(toks["bare"])[:300])
    check("server defaults: a request's dry_multiplier 0 wins (the answer loops again)",
          toks["dry off"] != toks["bare"] and repeats(toks["dry off"], 4), repr(toks["dry off"])[:300])
    hot = {"prompt": "Hello", "max_tokens": 48, "temperature": 2, "top_k": 0, "top_p": 1, "min_p": 0}
    outs = [json.loads(post("/v1/completions", b)[2])["choices"][0]["text"]
            for b in (hot, hot, dict(hot, seed=9), dict(hot, seed=10))]
    check("server defaults: a request without a seed draws with --seed's (9), another seed otherwise",
          outs[0] == outs[1] == outs[2] and outs[3] != outs[0], repr(outs)[:300])


# ---------------------------------------------------------------- infill
FIM_PRE, FIM_MID, FIM_SUF, FIM_REP, FIM_SEP = 151659, 151660, 151661, 151663, 151664


def toks(text, special=False):
    return json.loads(post("/tokenize", {"content": text, "parse_special": special})[2])["tokens"]


def fim_layout(prefix, suffix, prompt="", extra=(), n_ctx=4096, n_batch=128, max_tokens=-1):
    """docs/SERVER.md's layout, written again from the rules: the repository context, then
    <|fim_prefix|>PREFIX PROMPT<|fim_suffix|>SUFFIX<|fim_middle|>, cut to the window."""
    x = [FIM_REP] + toks("myproject\n")
    for name, text in extra:
        x += [FIM_SEP] + toks(name + "\n") + toks(text)
    x += [FIM_SEP] + toks("filename\n")
    pre, suf, pr = toks(prefix), toks(suffix), toks(prompt, True)
    w = min(max(n_batch, 2048), n_ctx // 2)
    n_pre, n_suf = min(len(pre), 3 * (w // 4)), min(len(suf), max(0, w // 4 - 2 - len(pr)))
    n_x = min(len(x), max(0, n_ctx - w - 2 * max(max_tokens, 0) - 4 - len(pr)))
    return x[len(x) - n_x:] + [FIM_PRE] + pre[len(pre) - n_pre:] + pr + [FIM_SUF] + suf[:n_suf] + [FIM_MID]


def check_infill():
    """/infill's prompt is the FIM layout (its greedy answer and prompt size are /completion's over the ids
    built here from the rules), cut where the prefix, suffix or extra context is long; streamed deltas join
    to the answer; OpenAI's suffix on /v1/completions is /infill without input_extra."""
    cases = [("plain", {"input_prefix": "def add(a, b):\n", "input_suffix": "\n\nprint(add(1, 2))\n"}, {}),
             ("empty prefix and suffix", {"input_prefix": "", "input_suffix": ""}, {}),
             ("with a prompt and files", {"input_prefix": "x = ", "input_suffix": ";", "prompt": "1<|im_end|>",
                                          "input_extra": [{"filename": "a.py", "text": "A = 1\n"}, {"text": "B = 2\n"}]},
              {"prompt": "1<|im_end|>", "extra": [("a.py", "A = 1\n"), ("tmp", "B = 2\n")]}),
             ("a long prefix and suffix, cut", {"input_prefix": " one" * 1700, "input_suffix": " two" * 600}, {}),
             ("a long extra context, cut", {"input_prefix": "p", "input_suffix": "s",
                                            "input_extra": [{"filename": "big.txt", "text": " three" * 1900}]},
              {"extra": [("big.txt", " three" * 1900)]})]
    for name, body, kw in cases:
        for n in (6, 300) if "extra context" in name else (6,):  # 2 x max_tokens is kept free of the extra context
            ids = fim_layout(body["input_prefix"], body["input_suffix"], max_tokens=n, **kw)
            st, _, d = post("/infill", dict(body, n_predict=n, temperature=0))
            got = json.loads(d) if st == 200 else {}
            st2, _, d2 = post("/completion", {"prompt": ids, "n_predict": n, "temperature": 0})
            want = json.loads(d2) if st2 == 200 else {}
            check("infill (%s, n_predict %d): the prompt is the FIM layout (%d tokens), the answer /completion's over it"
                  % (name, n, len(ids)), got.get("tokens_evaluated") == len(ids) and got.get("content") ==
                  want.get("content") and got.get("tokens_predicted") == want.get("tokens_predicted"),
                  "%s vs %s" % (d[:300], d2[:300]))
    b = {"input_prefix": "def add(a, b):\n", "input_suffix": "\n", "n_predict": 6, "temperature": 0}
    whole = json.loads(post("/infill", b)[2])["content"]
    ev, done = sse_events(post("/infill", dict(b, stream=True))[2])
    check("infill: streamed deltas join to the answer", "".join(e["content"] for e in ev) == whole and ev[-1]["stop"],
          repr(ev)[:300])
    st, _, d = post("/v1/completions", {"prompt": "def add(a, b):\n", "suffix": "\n", "max_tokens": 6, "temperature": 0})
    c = json.loads(d) if st == 200 else {}
    check("suffix on /v1/completions answers as /infill does", st == 200 and c["choices"][0]["text"] == whole and
          c["usage"]["prompt_tokens"] == len(fim_layout("def add(a, b):\n", "\n")), d[:300])


# ---------------------------------------------------------------- code completion (llama.vim, llama.vscode)
LLAMA_VIM_FIELDS = ["content", "timings/prompt_n", "timings/prompt_ms", "timings/prompt_per_token_ms",
                    "timings/prompt_per_second", "timings/predicted_n", "timings/predicted_ms",
                    "timings/predicted_per_token_ms", "timings/predicted_per_second", "truncated", "tokens_cached"]


def check_code_completion():
    """The requests llama.vim sends to /infill (its completion and its cache warm-up), answered as llama-server
    answers them: the infill sampler stage, response_fields, timings; n_indent, t_max_predict_ms, return_tokens,
    stop_type and stopping_word, n_cmpl on /completion; timings on the OpenAI routes."""
    fim = {"input_prefix": "def add(a, b):\n", "input_suffix": "\n",
           "input_extra": [{"text": "A = 1\n", "time": 12.5, "filename": "a.py"}], "prompt": "    ",
           "n_predict": 16, "n_indent": 4, "top_k": 40, "top_p": 0.99, "stream": False,
           "samplers": ["top_k", "top_p", "infill"], "cache_prompt": True, "t_max_prompt_ms": 500,
           "t_max_predict_ms": 1000, "response_fields": LLAMA_VIM_FIELDS, "seed": 1}
    st, _, d = post("/infill", fim)
    o = json.loads(d) if st == 200 else {}
    check("code completion: llama.vim's request is answered with exactly its response_fields",
          st == 200 and sorted(o) == sorted(LLAMA_VIM_FIELDS), d[:400])
    check("code completion: the timings are llama-server's numbers",
          o.get("timings/prompt_n", 0) > 0 and o.get("timings/predicted_n", 0) >= 1 and
          o.get("timings/prompt_ms", -1) >= 0 and o.get("truncated") is False, d[:400])
    # the stage itself is checked against llama.cpp's algorithm in test_sampler_stages; here that a request's
    # 'samplers' reaches it: the sampler's own refusal (the stage needs top_k) comes back as the 400
    inf = dict(fim, response_fields=[])
    st, _, d = post("/infill", dict(inf, top_k=0))
    check("code completion: the infill stage without top_k is refused, naming it",
          st == 400 and json.loads(d)["error"]["param"] == "samplers" and "top_k" in d.decode(), d[:300])
    warm = {"input_prefix": "", "input_suffix": "", "input_extra": [{"text": "B = 2\n", "filename": "b.py"}],
            "prompt": "", "n_predict": 0, "temperature": 0.0, "stream": False, "samplers": [], "cache_prompt": True,
            "t_max_prompt_ms": 1, "t_max_predict_ms": 1, "response_fields": [""]}
    st, _, d = post("/infill", warm)
    check("code completion: llama.vim's cache warm-up is answered {}", st == 200 and json.loads(d) == {}, d[:300])
    # n_indent: a line after the first with fewer blanks ends the text before its first character
    g = {"prompt": "Hello", "grammar": 'root ::= "x\\n  y\\n z\\nw"', "n_predict": 32, "temperature": 0}
    st, _, d = post("/completion", dict(g, n_indent=2))
    o = json.loads(d) if st == 200 else {}
    check("n_indent: the text ends at the shallower line, its newline and blank kept, stop_type limit",
          o.get("content") == "x\n  y\n " and o.get("stop_type") == "limit" and o.get("stopping_word") == "", d[:300])
    ev, _ = sse_events(post("/completion", dict(g, n_indent=2, stream=True))[2])
    check("n_indent: streamed the same, the last chunk llama-server's result",
          "".join(e["content"] for e in ev) == "x\n  y\n " and ev[-1]["stop"] and ev[-1]["stop_type"] == "limit" and
          "timings" in ev[-1] and all("tokens" in e for e in ev), repr(ev)[:400])
    st, _, d = post("/completion", dict(g, n_indent=0))
    check("n_indent 0: the whole sentence, stop_type eos", json.loads(d).get("content") == "x\n  y\n z\nw" and
          json.loads(d).get("stop_type") == "eos", d[:300])
    lines = {"prompt": "Hello", "grammar": 'root ::= ("a\\n"){40}', "n_predict": 200, "temperature": 0}
    full = json.loads(post("/completion", lines)[2])
    short = json.loads(post("/completion", dict(lines, t_max_predict_ms=0.001))[2])
    check("t_max_predict_ms: past it, the text ends with the next newline",
          full.get("content") == "a\n" * 40 and short.get("stop_type") == "limit" and
          short.get("content", "x").endswith("\n") and len(short.get("content", "")) < len(full["content"]),
          "%r / %r" % (short.get("content"), full.get("content", "")[:20]))
    # return_tokens, stop_type word, stopping_word
    st, _, d = post("/completion", {"prompt": "Hello", "grammar": 'root ::= "ab###cd"', "stop": ["###"],
                                    "n_predict": 32, "temperature": 0, "return_tokens": True})
    o = json.loads(d) if st == 200 else {}
    text = json.loads(post("/detokenize", {"tokens": o.get("tokens", [])})[2]).get("content", "")
    check("a stop string: stop_type word, stopping_word, the tokens returned",
          o.get("content") == "ab" and o.get("stop_type") == "word" and o.get("stopping_word") == "###" and
          len(o.get("tokens", [])) == o.get("tokens_predicted") and text.startswith("ab###"), d[:400])
    st, _, d = post("/completion", {"prompt": "Hello", "n_predict": 3, "temperature": 0, "n_cmpl": 2})
    o = json.loads(d) if st == 200 else None
    check("n_cmpl 2: an array of two results", isinstance(o, list) and [r["index"] for r in o] == [0, 1] and
          o[0]["content"] == o[1]["content"] and o[0]["tokens"] == [], d[:300])
    st, _, d = post("/v1/chat/completions", chat("Hello", max_tokens=5))
    o = json.loads(d) if st == 200 else {}
    t = o.get("timings", {})
    check("timings on the OpenAI routes too", t.get("predicted_n") == o["usage"]["completion_tokens"] and
          t.get("prompt_n", 0) + t.get("cache_n", -1) == o["usage"]["prompt_tokens"], d[:400])


# ---------------------------------------------------------------- streaming
def check_stream():
    b = chat("Hello", max_tokens=8, stream=True, stream_options={"include_usage": True})
    st, h, d = post("/v1/chat/completions", b)
    ev, done = sse_events(d)
    check("stream: text/event-stream", st == 200 and h.get("content-type") == "text/event-stream", h)
    chunks = [e for e in ev if e["choices"]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    full = json.loads(post("/v1/chat/completions", chat("Hello", max_tokens=8))[2])["choices"][0]["message"]["content"]
    check("stream: chunks concatenate to the non-streaming text", text == full, "%r vs %r" % (text, full))
    check("stream: first chunk carries the role", chunks[0]["choices"][0]["delta"].get("role") == "assistant", chunks[0])
    check("stream: last choice chunk has finish_reason", chunks[-1]["choices"][0]["finish_reason"] == "length", chunks[-1])
    check("stream: usage chunk then [DONE]", done and ev[-1]["choices"] == [] and ev[-1]["usage"]["completion_tokens"] == 8,
          ev[-1])
    check("stream: one id for every chunk", len({e["id"] for e in ev}) == 1, ev)
    st, h, d = post("/v1/completions", {"prompt": "Hello", "max_tokens": 5, "temperature": 0, "stream": True})
    ev, done = sse_events(d)
    check("stream: completions chunks", done and all(e["object"] == "text_completion" for e in ev)
          and "".join(e["choices"][0]["text"] for e in ev) == gen("Hello", 5)[1], d[:400])
    # an error before the first token is a plain JSON error with its status, not a broken stream
    st, h, d = post("/v1/chat/completions", {"messages": [], "stream": True})
    check("stream: early error is a JSON 400", st == 400 and "error" in json.loads(d), d)


# ---------------------------------------------------------------- UTF-8
def check_utf8():
    """Sampled text of a random-weight model often holds a token that is part of a character the next token
    does not complete.  Every body must still be UTF-8 (JSON is), with such bytes as U+FFFD, the stream's
    chunks joining into the same text, and logprobs' "bytes" keeping the piece."""
    flat = {"temperature": 2.0, "top_k": 0, "top_p": 1, "min_p": 0, "ignore_eos": True}  # the whole vocabulary
    seen_fffd, broken, unequal = 0, [], []
    for seed in range(16):
        body = dict(flat, prompt="Hello", max_tokens=64, seed=seed, logprobs=1)
        st, _, whole = post("/v1/completions", body)
        st2, _, streamed = post("/v1/completions", dict(body, stream=True))
        try:
            r = json.loads(whole.decode("utf-8"))
            ev, _ = sse_events(streamed)  # decodes strictly too
        except (UnicodeDecodeError, ValueError) as ex:
            broken.append("seed %d: %s" % (seed, ex))
            continue
        text = r["choices"][0]["text"]
        joined = "".join(e["choices"][0]["text"] for e in ev if e.get("choices"))
        if joined != text:
            unequal.append("seed %d: %r vs %r" % (seed, joined, text))
        seen_fffd += "\ufffd" in text
        if seen_fffd and seed >= 1:  # two seeds, or as many as it takes to meet the case
            break
    check("utf8: every sampled body is UTF-8 JSON", not broken, broken)
    check("utf8: streamed chunks join into the same text", not unequal, unequal)
    check("utf8: the check saw text with U+FFFD (it tested the case)", seen_fffd > 0,
          "no seed of 16 gave a token that leaves a character incomplete")
    # chat logprobs: the "bytes" of consecutive tokens join into the UTF-8 of the text they make
    b = chat("Hello", max_tokens=64, seed=0, logprobs=True, **flat)
    st, _, d = post("/v1/chat/completions", b)
    try:
        r = json.loads(d.decode("utf-8"))
        content = r["choices"][0]["logprobs"]["content"]
        raw = bytes(x for t in content for x in t["bytes"])
        ok_bytes = raw.decode("utf-8", "replace") == r["choices"][0]["message"]["content"]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as ex:
        ok_bytes, d = False, "%s: %s" % (ex, d[:300])
    check("utf8: logprobs' bytes join into the reply's text", ok_bytes, d[:300])


# ---------------------------------------------------------------- disconnect
def check_disconnect():
    body = json.dumps(chat("Hello", max_tokens=2000, stream=True, ignore_eos=True)).encode()
    s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    got = b""
    while got.count(b"data: ") < 3:
        got += s.recv(4096)
    busy = metrics()["minfer_slots_busy"]
    s.close()
    t0 = time.time()
    while time.time() - t0 < 10 and metrics()["minfer_slots_busy"] > 0:
        time.sleep(0.05)
    m = metrics()
    check("disconnect mid-stream frees the slot", busy >= 1 and m["minfer_slots_busy"] == 0
          and m["minfer_client_disconnects_total"] >= 1, "busy before %d, metrics %r" % (busy, {
              k: v for k, v in m.items() if "slots" in k or "disconnect" in k}))


# ---------------------------------------------------------------- load
def check_load():
    n_req, n_clients = 200, 16
    results, lock = [], threading.Lock()
    idx = [0]

    def client():
        while True:
            with lock:
                if idx[0] >= n_req:
                    return
                i = idx[0]
                idx[0] += 1
            try:
                st, h, d = post("/v1/completions", {"prompt": PROMPTS[i % 4], "max_tokens": 4 + i % 5,
                                                    "temperature": 0.7, "seed": i}, timeout=120)
                results.append((i, st, h, d))
            except Exception as e:  # noqa: BLE001
                results.append((i, -1, {}, repr(e).encode()))

    t0 = time.time()
    ts = [threading.Thread(target=client) for _ in range(n_clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=300)
    took = time.time() - t0
    ids = sorted(r[0] for r in results)
    codes = {}
    for _, st, _, _ in results:
        codes[st] = codes.get(st, 0) + 1
    check("load: every request answered exactly once", ids == list(range(n_req)), "answered %d" % len(ids))
    okay = all(st == 200 or (st == 503 and h.get("retry-after") == "1") for _, st, h, _ in results)
    check("load: only 200 or 503 with Retry-After (%r in %.1f s)" % (codes, took), okay and codes.get(503, 0) > 0
          and codes.get(200, 0) > 0, repr(codes))
    bodies_ok = all(json.loads(d)["usage"]["completion_tokens"] >= 1 for _, st, _, d in results if st == 200)
    check("load: every 200 carries a completion", bodies_ok)
    m = metrics()
    check("load: slots and queue empty afterwards", m["minfer_slots_busy"] == 0 and m["minfer_queue_depth"] == 0, m)
    check("load: no job dropped, no stall", m["minfer_jobs_dropped_total"] == 0 and m["minfer_worker_stalled_total"] == 0, m)
    served = m.get('minfer_requests_total{route="/v1/completions",status="200"}', 0)
    check("load: metrics count the 200s", served >= codes.get(200, 0), "%r vs %r" % (served, codes))


def check_slots():
    prompt = "Once upon a time, in a land far away, there lived"
    st, _, d = post("/v1/completions", {"prompt": prompt, "max_tokens": 6, "temperature": 0, "id_slot": 1})
    first = json.loads(d)["choices"][0]["text"]
    st, _, d = request("GET", "/slots")
    slots = json.loads(d)
    check("slots: GET /slots lists every slot", st == 200 and [s["id"] for s in slots] == list(range(len(slots)))
          and slots[1]["n_cached"] > 0 and not slots[1]["is_processing"], d)
    st, _, d = post("/slots/1?action=save", {"filename": "slot1.bin"})
    saved = json.loads(d)
    check("slots: save", st == 200 and saved["n_saved"] == slots[1]["n_cached"], d)
    st, _, d = post("/slots/1?action=erase", {})
    check("slots: erase", st == 200 and json.loads(d)["n_erased"] == saved["n_saved"], d)
    st, _, d = post("/slots/1?action=restore", {"filename": "slot1.bin"})
    check("slots: restore", st == 200 and json.loads(d)["n_restored"] == saved["n_saved"], d)
    m0 = metrics()
    st, _, d = post("/v1/completions", {"prompt": prompt, "max_tokens": 6, "temperature": 0, "id_slot": 1})
    m1 = metrics()
    reused = m1["minfer_prompt_tokens_reused_total"] - m0["minfer_prompt_tokens_reused_total"]
    check("slots: a restored slot serves its prefix and the same text", json.loads(d)["choices"][0]["text"] == first
          and reused > 0, "reused %d, %s" % (reused, d))
    for name in [UP + "x.bin", "a" + SEP + "b", ".hidden", "x y", "é.bin"]:
        st, _, d = post("/slots/0?action=save", {"filename": name})
        check("slots: file name %r refused" % name, st == 400 and "plain file name" in json.loads(d)["error"]["message"], d)
    st, _, d = post("/slots/0?action=restore", {"filename": "missing.bin"})
    check("slots: restoring a missing file is 404 naming it", st == 404 and "missing.bin" in d.decode(), d)


# ---------------------------------------------------------------- --cache-reuse
def reuse_prompts(seed):
    """Token prompts for llama-server's chunk reuse: P X S T1 cached, then P S T2 (S moves 6 back).  Each check
    takes its own seed: a slot that holds a prompt whole would lend it to any slot (prefix sharing)."""
    r = random.Random(seed)
    ids = lambda n: [r.randrange(1000, 60000) for _ in range(n)]
    P, X, S, T1, T2, Z = ids(8), ids(6), ids(20), ids(3), ids(3), ids(2)
    return P, X, S, T1, T2, Z


def completion(prompt, **extra):
    b = {"prompt": prompt, "n_predict": 4, "temperature": 0, "n_probs": 2}
    b.update(extra)
    st, _, d = post("/completion", b)
    return (json.loads(d) if st == 200 else {"status": st, "body": d.decode()[:300]})


def cached(r):
    return r.get("timings", {}).get("cache_n", -1)


def check_cache_reuse():
    """n_cache_reuse (llama-server's --cache-reuse per request): past the common prefix, runs of at least that
    many cached tokens move to the prompt's positions instead of being prefilled (timings.cache_n counts them,
    minfer_prompt_tokens_shifted_total the moved ones); off (0 or absent here) only the prefix is reused."""
    P, X, S, T1, T2, Z = reuse_prompts(5)
    A, B = P + X + S + T1, P + S + T2
    completion(A, id_slot=2, n_predict=1)
    m0 = metrics()
    r = completion(B, id_slot=2, n_cache_reuse=4)
    m1 = metrics()
    shifted = m1["minfer_prompt_tokens_shifted_total"] - m0["minfer_prompt_tokens_shifted_total"]
    check("cache reuse: the moved run is not prefilled", cached(r) == len(P) + len(S) and
          r["timings"]["prompt_n"] == len(B) - len(P) - len(S) and shifted == len(S),
          "cache_n %d, shifted %d: %s" % (cached(r), shifted, str(r)[:300]))
    # the same again (A first: no slot holds B whole any more): the same reply, bit for bit
    completion(A, id_slot=2, n_predict=1)
    again = completion(B, id_slot=2, n_cache_reuse=4)
    check("cache reuse: the same moves give the same reply", cached(again) == cached(r) and
          again.get("completion_probabilities") == r.get("completion_probabilities") and
          again["content"] == r["content"], str(again)[:300])
    # without it only the common prefix is reused, and the reply is not the shifted one's (the moved rows were
    # computed after X)
    completion(A, id_slot=2, n_predict=1)
    r0 = completion(B, id_slot=2)
    check("cache reuse: off by default (the prefix only)", cached(r0) == len(P), str(r0)[:300])
    p0 = r0.get("completion_probabilities", [{}])[0].get("top_logprobs")
    p1 = r.get("completion_probabilities", [{}])[0].get("top_logprobs")
    check("cache reuse: the moved rows are the old ones (the reply's probabilities differ from a prefill's)",
          p0 and p1 and p0 != p1, "%r / %r" % (p0, p1))
    # llama-server's walk: new text right after the prefix stops it (the prompt head waits for a match)
    P, X, S, T1, T2, Z = reuse_prompts(6)
    completion(P + X + S + T1, id_slot=2, n_predict=1)
    r = completion(P + Z + S + T2, id_slot=2, n_cache_reuse=4)
    check("cache reuse: new text after the prefix leaves only the prefix", cached(r) == len(P), str(r)[:300])
    # a run shorter than n_cache_reuse stays
    P, X, S, T1, T2, Z = reuse_prompts(7)
    completion(P + X + S + T1, id_slot=2, n_predict=1)
    r = completion(P + S + T2, id_slot=2, n_cache_reuse=len(S) + 1)
    check("cache reuse: a run shorter than n_cache_reuse is prefilled", cached(r) == len(P), str(r)[:300])
    # the slot that can reuse most is taken, though another shares a longer prefix
    P, X, S, T1, T2, Z = reuse_prompts(8)
    completion(P + X + S + T1, id_slot=2, n_predict=1)
    completion(P + S[:2] + Z, id_slot=1, n_predict=1)
    r = completion(P + S + T2, n_cache_reuse=4)
    check("cache reuse: the slot with the most reusable cells serves it", cached(r) == len(P) + len(S) and
          r.get("id_slot") == 2, str(r)[:300])
    # a request that turns the cache off cannot also reuse it
    st, _, d = post("/completion", {"prompt": B, "n_predict": 1, "cache_prompt": False, "n_cache_reuse": 4})
    check("cache reuse: with cache_prompt false it is a 400 naming both", st == 400 and "cache_prompt" in d.decode()
          and "n_cache_reuse" in d.decode(), d)


def check_cache_reuse_default():
    """A server started with --cache-reuse 4: a request without n_cache_reuse moves runs; its own 0 turns it off."""
    P, X, S, T1, T2, Z = reuse_prompts(9)
    A, B = P + X + S + T1, P + S + T2
    completion(A, n_predict=1)
    r = completion(B)
    check("cache reuse: --cache-reuse is the default", cached(r) == len(P) + len(S), str(r)[:300])
    completion(A, n_predict=1)  # -np 1: the one slot holds A again
    r = completion(B, n_cache_reuse=0)
    check("cache reuse: a request's n_cache_reuse 0 wins over --cache-reuse", cached(r) == len(P), str(r)[:300])


# ---------------------------------------------------------------- speculative decoding
def check_spec(plain_port):
    """PORT drafts with -md, plain_port serves the same target without: greedy answers are equal, alone and
    two at a time; each answer reports its drafts (timings) and /metrics counts them."""
    global PORT
    me = PORT
    PORT = plain_port
    want = [gen(p, n=24)[1] for p in PROMPTS]
    want_lp = post("/v1/completions", {"prompt": PROMPTS[0], "max_tokens": 8, "temperature": 0, "logprobs": 2})[2]
    PORT = me
    m0 = metrics()
    got, n_draft, n_acc = [], 0, 0
    for p in PROMPTS:
        st, _, d = post("/v1/completions", {"prompt": p, "max_tokens": 24, "temperature": 0})
        r = json.loads(d)
        got.append(r["choices"][0]["text"] if st == 200 else d)
        n_draft += r.get("timings", {}).get("draft_n", 0)
        n_acc += r.get("timings", {}).get("draft_n_accepted", 0)
    check("spec: greedy answers with -md equal those without", got == want, "with %r without %r" % (got, want))
    check("spec: timings.draft_n / draft_n_accepted count the drafts", n_draft > 0 and 0 < n_acc <= n_draft,
          "drafted %d accepted %d" % (n_draft, n_acc))
    m1 = metrics()
    dm = m1["minfer_draft_tokens_total"] - m0["minfer_draft_tokens_total"]
    da = m1["minfer_draft_accepted_tokens_total"] - m0["minfer_draft_accepted_tokens_total"]
    check("spec: /metrics draft counters equal the answers' sums", dm == n_draft and da == n_acc,
          "metrics %d/%d, answers %d/%d" % (dm, da, n_draft, n_acc))
    res = [None] * len(PROMPTS)

    def run(i):
        res[i] = gen(PROMPTS[i], n=24)[1]

    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(PROMPTS))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check("spec: concurrent greedy answers with -md equal those without", res == want, "%r vs %r" % (res, want))
    lp = post("/v1/completions", {"prompt": PROMPTS[0], "max_tokens": 8, "temperature": 0, "logprobs": 2})[2]
    strip = lambda d: json.dumps([json.loads(d)["choices"][0][k] for k in ("text", "logprobs")])
    check("spec: logprobs of drafted tokens equal plain decoding's", strip(lp) == strip(want_lp),
          "%s vs %s" % (lp[:300], want_lp[:300]))
    # a logit_bias banning tokens of the plain answer: the draft proposes them, the target refuses them
    toks = json.loads(want_lp)["choices"][0]["logprobs"]["tokens"]
    lb = [[toks[0], False], [toks[3], False]]
    body = {"prompt": PROMPTS[0], "max_tokens": 16, "temperature": 0, "logit_bias": lb}
    PORT = plain_port
    want_b = post("/v1/completions", body)[2]
    PORT = me
    got_b = post("/v1/completions", body)[2]
    text = lambda d: json.loads(d)["choices"][0]["text"]
    check("spec: with a logit_bias, the answer with -md equals the one without, and the bias bit",
          text(got_b) == text(want_b) and not text(want_b).startswith(toks[0]), "%s vs %s" % (got_b[:300], want_b[:300]))


# ---------------------------------------------------------------- tool calls
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                             "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                            "required": ["city"]}}}
NOW = {"type": "function", "function": {"name": "now", "description": "The time"}}
NOW_EMPTY = {"type": "function", "function": {"name": "now", "description": "The time", "parameters": {
    "type": "object", "properties": {}, "additionalProperties": False}}}
SCRIPT_TEXT = 'Checking.<tool_call>{"name":"now","arguments":{}}</tool_call>'


def check_structured():
    """A random model answers in the schema's JSON, alone, streamed and with n > 1; a grammar holds on the
    completion routes too; /metrics stays consistent."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"},
                                               "tag": {"enum": ["red", "green"]}, "note": {"type": "string", "maxLength": 6}},
              "required": ["n", "ok", "tag"], "additionalProperties": False}
    nothink = {"chat_template_kwargs": {"enable_thinking": False}}
    def valid(v):
        return (isinstance(v, dict) and set(v) - {"note"} == {"n", "ok", "tag"} and isinstance(v["n"], int)
                and isinstance(v["ok"], bool) and v["tag"] in ("red", "green") and len(v.get("note", "")) <= 6)
    for shape, rf in (("OpenAI", {"type": "json_schema", "json_schema": {"name": "r", "strict": True, "schema": schema}}),
                      ("llama-server", {"type": "json_schema", "schema": schema})):
        for temp in (0, 1.0):
            st, _, d = post("/v1/chat/completions", chat("Describe", max_tokens=80, temperature=temp, seed=5,
                                                         response_format=rf, n=2, **nothink))
            chs = json.loads(d)["choices"] if st == 200 else []
            good = [c for c in chs if c["finish_reason"] == "stop" and valid(json.loads(c["message"]["content"]))]
            check("structured: %s response_format, temperature %g: both choices are the schema's JSON" % (shape, temp),
                  st == 200 and len(good) == 2, d[:400])
    st, _, d = post("/v1/chat/completions", chat("Describe", max_tokens=80, response_format={"type": "json_schema",
                                                 "schema": schema}, **nothink))
    whole = json.loads(d)["choices"][0]["message"]["content"] if st == 200 else None
    st, _, d = post("/v1/chat/completions", chat("Describe", max_tokens=80, stream=True, response_format={
        "type": "json_schema", "schema": schema}, **nothink))
    ev, done = sse_events(d)
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in ev if e["choices"])
    check("structured: streamed deltas join to the non-streamed JSON", done and text == whole, repr(text)[:200])
    st, _, d = post("/v1/chat/completions", chat("Describe", max_tokens=60, response_format={"type": "json_object"},
                                                 **nothink))
    c = json.loads(d)["choices"][0] if st == 200 else {}
    try:
        obj = json.loads(c["message"]["content"]) if c.get("finish_reason") == "stop" else None
    except ValueError:
        obj = None
    check("structured: json_object answers a JSON object (or stops on the length)", st == 200 and (
        isinstance(obj, dict) or c.get("finish_reason") == "length"), d[:300])
    st, _, d = post("/v1/completions", {"prompt": "Year:", "max_tokens": 8, "temperature": 0, "grammar": "root ::= [1-9] [0-9]{3}"})
    c = json.loads(d)["choices"][0] if st == 200 else {}
    check("structured: a GBNF grammar on /v1/completions", c.get("finish_reason") == "stop" and
          len(c.get("text", "")) == 4 and c["text"].isdigit() and c["text"][0] != "0", d[:300])
    st, _, d = post("/completion", {"prompt": "Pick:", "n_predict": 8, "temperature": 0, "json_schema": {"enum": [1, 22]}})
    c = json.loads(d) if st == 200 else {}
    check("structured: llama-server's json_schema on /completion (blanks after the value are the schema's)",
          c.get("content", "").strip() in ("1", "22"), d[:300])


def check_tools_template():
    """/apply-template renders tools and tool calls as transformers renders the model's (Qwen3) template:
    every conversation of tests/golden/tok/chat.json that has them, through the HTTP request path."""
    import os
    golden = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "tok", "chat.json")
    with open(golden, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    n, bad_cases = 0, []
    for c in cases:
        has_calls = any(m.get("tool_calls") for m in c["messages"])
        if not (c.get("tools") or has_calls) or not c["add_generation_prompt"]:
            continue
        if any("reasoning_content" in m for m in c["messages"]):
            continue  # the server does not take reasoning_content
        body = {"messages": c["messages"]}
        if c.get("tools"):
            body["tools"] = c["tools"]
        if c["enable_thinking"] is not None:
            body["chat_template_kwargs"] = {"enable_thinking": c["enable_thinking"]}
        st, _, d = post("/apply-template", body)
        n += 1
        if st != 200 or json.loads(d).get("prompt") != c["qwen3"]:
            bad_cases.append((c["conv"], st, d[:300]))
    check("tools: /apply-template equals the Jinja golden for %d conversations with tools or calls" % n,
          n >= 15 and not bad_cases, "%d cases, failing %r" % (n, bad_cases[:2]))


def check_tools():
    """PORT serves a model that writes SCRIPT_TEXT then <|im_end|> (mf-genmodel --script): its call is
    picked out in OpenAI's shape, alone and streamed; without tools the text stays content."""
    msgs = [{"role": "user", "content": "What time is it?"}]
    base = {"messages": msgs, "temperature": 0, "max_tokens": 40, "tools": [WEATHER, NOW]}
    st, _, d = post("/v1/chat/completions", base)
    r = json.loads(d)
    ch = r["choices"][0] if st == 200 else {}
    msg = ch.get("message", {})
    calls = msg.get("tool_calls") or []
    check("tools: the call is picked out", st == 200 and len(calls) == 1 and calls[0]["type"] == "function"
          and calls[0]["function"] == {"name": "now", "arguments": "{}"} and calls[0]["id"].startswith("call_"), d[:400])
    check("tools: the text before the call stays content", msg.get("content") == "Checking.", d[:400])
    check("tools: finish_reason tool_calls", ch.get("finish_reason") == "tool_calls", d[:400])
    # streamed: the content deltas join to the same content, one delta carries the call with its index
    st, _, d = post("/v1/chat/completions", dict(base, stream=True))
    ev, done = sse_events(d)
    chunks = [e["choices"][0] for e in ev if e["choices"]]
    text = "".join(c["delta"].get("content") or "" for c in chunks)
    scalls = [t for c in chunks for t in c["delta"].get("tool_calls", [])]
    check("tools stream: content deltas join to the whole answer's", done and text == "Checking.", repr(text))
    check("tools stream: one delta carries the call, index 0", len(scalls) == 1 and scalls[0]["index"] == 0
          and scalls[0]["function"] == {"name": "now", "arguments": "{}"}, repr(scalls))
    check("tools stream: the last chunk's finish_reason is tool_calls", chunks[-1]["finish_reason"] == "tool_calls",
          repr(chunks[-1]))
    # tool_choice none and no tools: nothing is picked out, the text is the model's
    for name, extra in (("tool_choice none", {"tool_choice": "none"}), ("no tools", {"tools": []})):
        st, _, d = post("/v1/chat/completions", dict(base, **extra))
        ch = json.loads(d)["choices"][0] if st == 200 else {}
        check("tools: %s leaves the text as content" % name, ch.get("message", {}).get("content") == SCRIPT_TEXT
              and "tool_calls" not in ch.get("message", {}) and ch.get("finish_reason") == "stop", d[:400])
    # the answer sent back with the tool's result renders the call as the model wrote it
    turn = [msgs[0], {"role": "assistant", "content": msg.get("content"), "tool_calls": calls},
            {"role": "tool", "tool_call_id": calls[0]["id"] if calls else "", "content": "12:00"}]
    st, _, d = post("/apply-template", {"messages": turn, "tools": [WEATHER, NOW]})
    p = json.loads(d).get("prompt", "")
    check("tools: the call sent back renders as the template writes it",
          st == 200 and p.endswith('<|im_start|>assistant\nChecking.\n<tool_call>\n{"name": "now", "arguments": {}}\n'
                                   '</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n12:00\n</tool_response>'
                                   '<|im_end|>\n<|im_start|>assistant\n'), repr(p[-300:]))
    st, _, d = post("/v1/chat/completions", dict(base, messages=turn))
    check("tools: the next turn answers", st == 200 and json.loads(d)["choices"][0]["finish_reason"] == "tool_calls", d[:300])
    # forced calls: a grammar makes the model write exactly one call to the named (or any) tool
    for name, extra in (("named", {"tool_choice": {"type": "function", "function": {"name": "now"}}}),
                        ("required", {"tool_choice": "required", "parallel_tool_calls": False, "tools": [NOW_EMPTY]})):
        for stream in (False, True):
            b = dict(dict(base, tools=[WEATHER, NOW_EMPTY], stream=stream), **extra)
            st, _, d = post("/v1/chat/completions", b)
            if stream:
                ev, done = sse_events(d)
                chunks = [e["choices"][0] for e in ev if e["choices"]]
                calls = [t["function"] for c in chunks for t in c["delta"].get("tool_calls", [])]
                fin = chunks[-1]["finish_reason"] if chunks else None
            else:
                ch = json.loads(d)["choices"][0] if st == 200 else {}
                calls = [t["function"] for t in ch.get("message", {}).get("tool_calls") or []]
                fin = ch.get("finish_reason")
            check("tools: tool_choice %s%s forces one call to now" % (name, " (stream)" if stream else ""),
                  st == 200 and calls == [{"name": "now", "arguments": "{}"}] and fin == "tool_calls", d[:400])


def embed(body, path="/v1/embeddings"):
    st, _, d = post(path, body)
    return st, (json.loads(d) if d else None)


def check_embed():
    """PORT serves --embeddings -c 64 on a model with pooling_type last and add_eos_token (tests/cli/serve.sh)."""
    import base64
    import math
    import struct

    texts = ["Hello world", "The second text, a little longer.", "x"]
    st, d = embed({"input": texts, "model": "m"})
    ok_shape = st == 200 and d["object"] == "list" and [e["index"] for e in d["data"]] == [0, 1, 2]
    check("embed: OpenAI's list shape", ok_shape and all(e["object"] == "embedding" for e in d["data"]), str(d)[:300])
    vecs = [e["embedding"] for e in d["data"]] if ok_shape else [[], [], []]
    check("embed: unit vectors", all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5 for v in vecs), str(vecs)[:200])
    alone = [embed({"input": t})[1]["data"][0]["embedding"] for t in texts]
    check("embed: an input's vector does not depend on the others in the request", alone == vecs, "")
    n_tok = sum(len(json.loads(post("/tokenize", {"content": t, "add_special": True})[2])["tokens"]) for t in texts)
    check("embed: usage counts every token (EOS included)", d["usage"] == {"prompt_tokens": n_tok, "total_tokens": n_tok},
          str(d["usage"]) + " vs %d" % n_tok)
    ids = json.loads(post("/tokenize", {"content": "Hello world", "add_special": True})[2])["tokens"]
    st, t = embed({"input": ids})
    check("embed: token ids give the text's vector", st == 200 and t["data"][0]["embedding"] == vecs[0], str(t)[:200])
    st, t = embed({"input": [ids, "x"]})
    check("embed: arrays of token ids", st == 200 and [e["embedding"] for e in t["data"]] == [vecs[0], vecs[2]], str(t)[:200])
    st, b = embed({"input": texts[:1], "encoding_format": "base64"})
    raw = base64.b64decode(b["data"][0]["embedding"]) if st == 200 else b""
    fl = list(struct.unpack("<%df" % (len(raw) // 4), raw))
    f32 = [struct.unpack("<f", struct.pack("<f", x))[0] for x in vecs[0]]  # %.9g names the float32 exactly
    check("embed: base64 is the little-endian float32s", fl == f32 and len(fl) == 256, str(b)[:200])
    st, n = embed({"content": texts[0], "embd_normalize": -1}, "/embedding")
    rv = n[0]["embedding"][0] if st == 200 else [1]
    s = math.sqrt(sum(x * x for x in rv))
    check("embed: /embedding's native shape, raw with embd_normalize -1",
          st == 200 and n[0]["index"] == 0 and max(abs(x / s - y) for x, y in zip(rv, vecs[0])) < 1e-6 and s > 1.5, str(n)[:200])
    # Matryoshka: this file is Qwen3-Embedding-like (qwen3, pooling last), so 'dimensions' keeps the raw
    # vector's first floats and normalises them
    st, d64 = embed({"input": texts[0], "dimensions": 64})
    d64 = d64["data"][0]["embedding"] if st == 200 else []
    s64 = math.sqrt(sum(x * x for x in rv[:64]))
    check("embed: dimensions 64 is the first 64 floats, normalised",
          len(d64) == 64 and max(abs(x / s64 - y) for x, y in zip(rv, d64)) < 1e-6, str(d64)[:200])
    st, n = embed({"content": texts[0], "dimensions": 32, "embd_normalize": -1}, "/embedding")
    check("embed: dimensions on /embedding", st == 200 and n[0]["embedding"][0] == rv[:32], str(n)[:200])
    st, n = embed({"input": texts[0]}, "/embeddings")
    check("embed: /embeddings takes input, L2 by default", st == 200 and n[0]["embedding"][0] == vecs[0], str(n)[:200])
    # concurrent clients: every answer is the one it gets alone
    got = [None] * 8

    def one(k):
        got[k] = embed({"input": texts[k % 3]})

    th = [threading.Thread(target=one, args=(k,)) for k in range(8)]
    [t.start() for t in th]
    [t.join(120) for t in th]
    check("embed: 8 concurrent requests answer what each gets alone",
          all(g and g[0] == 200 and g[1]["data"][0]["embedding"] == vecs[k % 3] for k, g in enumerate(got)), "")
    bad_cases = [
        ("empty string", {"input": ""}, 400, "empty string"),
        ("empty array", {"input": []}, 400, "empty array"),
        ("no input", {"model": "m"}, 400, "'input' is required"),
        ("token outside the vocabulary", {"input": [1, 2, 999999]}, 400, "[0, 151936)"),
        ("non-integer token", {"input": [1.5]}, 400, "integers"),
        ("a number among strings", {"input": ["a", 3]}, 400, "must be a string or an array of token ids"),
        ("an object", {"input": {"a": 1}}, 400, "'input' is required: a string"),
        ("dimensions above n_embd", {"input": "a", "dimensions": 257}, 400, "dimensions 257 is outside 1..256"),
        ("dimensions 0", {"input": "a", "dimensions": 0}, 400, "'dimensions' must be a positive integer"),
        ("dimensions as a string", {"input": "a", "dimensions": "64"}, 400, "'dimensions' must be a positive integer"),
        ("encoding_format", {"input": "a", "encoding_format": "int8"}, 400, "'encoding_format' must be"),
        ("embd_normalize on the OpenAI route", {"input": "a", "embd_normalize": 1}, 400, "belongs to /embedding"),
        ("too many inputs", {"input": ["a"] * 2049}, 400, "at most 2048"),
        ("longer than the context", {"input": "word " * 100}, 400, "the server's context holds 64"),
        ("not JSON", "{", 400, "JSON object"),
    ]
    for name, body, want, msg in bad_cases:
        st, _, d = post("/v1/embeddings", body)
        check("embed refuses: " + name, st == want and msg in d.decode(), "%d %s" % (st, d[:200]))
    st, _, d = post("/embedding", {"content": "a", "embd_normalize": 0.5})
    check("embed refuses: embd_normalize 0.5", st == 400 and b"-1..64" in d, d[:200])
    not_served_here("embed", [("generation is 501 naming --embeddings", "/v1/chat/completions", chat("Hello"), b"--embeddings"),
                              ("slot actions are 501", "/slots/0?action=erase", {}, b""),
                              ("reranking is 501 naming --rerank", "/v1/rerank", {"query": "q", "documents": ["a"]}, b"--rerank")])
    m = metrics()
    check("embed: /metrics counts the route and the tokens",
          m.get('minfer_requests_total{route="/v1/embeddings",status="200"}', 0) >= 10 and
          m.get('minfer_requests_total{route="/embeddings",status="200"}', 0) == 3 and m.get("minfer_prompt_tokens_total", 0) > 0,
          str({k: v for k, v in m.items() if "embed" in k}))


def not_served_here(kind, probes):
    """Each (name, path, body, needle): the route is another server kind's, so 501 naming needle; the server
    stays healthy afterwards."""
    for name, path, body, needle in probes:
        st, _, d = post(path, body)
        check(kind + ": " + name, st == 501 and needle in d, d[:200])
    st, _, d = request("GET", "/health")
    check(kind + ": still healthy after the refusals", st == 200, d[:200])


def check_embed_none(want_file):
    """PORT serves --embeddings --pooling none on the embed model (tests/cli/serve.sh).  want_file: `minfer embed
    --embd-normalize -1`'s raw [last, cls] vectors of "Hello world" (3 tokens with the EOS)."""
    last, cls = json.load(open(want_file))
    st, n = embed({"content": ["Hello world", "x"]}, "/embedding")
    rows = n[0]["embedding"] if st == 200 else []
    check("none: /embedding answers every token's raw vector, the first cls's, the last last's",
          st == 200 and [e["index"] for e in n] == [0, 1] and len(rows) == 3 and rows[0] == cls and rows[-1] == last and
          len(n[1]["embedding"]) == 2 and all(len(r) == 256 for r in rows), str(n)[:300])
    st, m = embed({"content": "Hello world", "embd_normalize": -1}, "/embeddings")
    check("none: embd_normalize -1 is what none means", st == 200 and m[0]["embedding"] == rows, str(m)[:200])
    for name, path, body, msg in [
            ("OpenAI's route", "/v1/embeddings", {"input": "a"}, "POST /embedding answers them"),
            ("embd_normalize 2", "/embedding", {"content": "a", "embd_normalize": 2}, "per-token vectors are raw"),
            ("dimensions", "/embedding", {"content": "a", "dimensions": 8}, "not shortened")]:
        st, _, d = post(path, body)
        check("none refuses: " + name, st == 400 and msg in d.decode(), "%d %s" % (st, d[:200]))


def check_rerank(want_file):
    """PORT serves --rerank -c 256 on a Qwen3-Reranker-like model (mf-genmodel --reranker; tests/cli/serve.sh).
    want_file: `minfer embed`'s scores of the first two pairs (the CLI's rank pooling)."""
    q = "What is a panda?"
    docs = ["hi", "The giant panda is a bear species endemic to China.", "Python is a language.", "bamboo"]
    st, _, d = post("/v1/rerank", {"model": "m", "query": q, "documents": docs})
    r = json.loads(d) if st == 200 else {}
    res = r.get("results", [])
    scores = [x["relevance_score"] for x in res]
    check("rerank: Jina/Cohere's shape, every document once, best first",
          r.get("object") == "list" and sorted(x["index"] for x in res) == [0, 1, 2, 3] and
          scores == sorted(scores, reverse=True) and all(0 < x < 1 for x in scores), d[:300])
    by_index = {x["index"]: x["relevance_score"] for x in res}
    alone = {}
    for i, doc in enumerate(docs):
        st, _, a = post("/rerank", {"query": q, "documents": [doc]})
        alone[i] = json.loads(a)["results"][0]["relevance_score"] if st == 200 else None
    check("rerank: a document's score does not depend on the others in the request", alone == by_index,
          "%s vs %s" % (alone, by_index))
    want = json.load(open(want_file))
    check("rerank: relevance_score is the first label's probability, as minfer embed --pooling rank prints it",
          [by_index.get(0), by_index.get(1)] == [w[0] for w in want], "%s vs %s" % (by_index, want))
    n_tok = 0
    for doc in docs:
        n_tok += json.loads(post("/rerank", {"query": q, "documents": [doc]})[2])["usage"]["prompt_tokens"]
    check("rerank: usage counts every pair's prompt", r.get("usage") == {"prompt_tokens": n_tok, "total_tokens": n_tok}
          and n_tok > 4 * 70, str(r.get("usage")))
    st, _, d = post("/v1/reranking", {"query": q, "documents": docs, "top_n": 2, "return_documents": True})
    t = json.loads(d) if st == 200 else {}
    check("rerank: top_n and return_documents",
          [x["index"] for x in t.get("results", [])] == [x["index"] for x in res[:2]] and
          all(x["document"] == {"text": docs[x["index"]]} for x in t.get("results", [])), d[:300])
    st, _, d = post("/reranking", {"query": q, "documents": [{"text": x} for x in docs], "top_n": 0})
    check("rerank: documents as {text} objects; top_n 0 answers none", st == 200 and json.loads(d)["results"] == [], d[:200])
    st, _, d = post("/rerank", {"query": q, "texts": docs, "return_text": True})
    tei = json.loads(d) if st == 200 else []
    check("rerank: TEI's shape for 'texts' (index, score, text)",
          isinstance(tei, list) and [(x["index"], x["score"], x["text"]) for x in tei] ==
          [(x["index"], x["relevance_score"], docs[x["index"]]) for x in res], d[:300])
    got = [None] * 6

    def one(k):
        st, _, a = post("/v1/rerank", {"query": q, "documents": [docs[k % 4]]})
        got[k] = json.loads(a)["results"][0]["relevance_score"] if st == 200 else None

    th = [threading.Thread(target=one, args=(k,)) for k in range(6)]
    [x.start() for x in th]
    [x.join(120) for x in th]
    check("rerank: 6 concurrent requests answer what each gets alone", got == [alone[k % 4] for k in range(6)], str(got))
    bad_cases = [
        ("no query", {"documents": ["a"]}, "'query' is required"),
        ("a number as query", {"query": 3, "documents": ["a"]}, "'query' must be a string"),
        ("no documents", {"query": "q"}, "'documents' is required"),
        ("empty documents", {"query": "q", "documents": []}, "empty array"),
        ("documents a string", {"query": "q", "documents": "a"}, "must be an array"),
        ("a number among documents", {"query": "q", "documents": ["a", 3]}, "'documents[1]' must be a string"),
        ("an object without text", {"query": "q", "documents": [{"title": "a"}]}, "or an object with a string"),
        ("top_n -1", {"query": "q", "documents": ["a"], "top_n": -1}, "non-negative integer"),
        ("top_n 1.5", {"query": "q", "documents": ["a"], "top_n": 1.5}, "non-negative integer"),
        ("return_documents a string", {"query": "q", "documents": ["a"], "return_documents": "yes"}, "true or false"),
        ("too many documents", {"query": "q", "documents": ["a"] * 2049}, "at most 2048"),
        ("longer than the context", {"query": "q", "documents": ["word " * 300]}, "the server's context holds 256"),
        ("not JSON", "{", "JSON object"),
    ]
    for name, body, msg in bad_cases:
        st, _, d = post("/v1/rerank", body)
        check("rerank refuses: " + name, st == 400 and msg in d.decode(), "%d %s" % (st, d[:200]))
    not_served_here("rerank", [("/v1/embeddings is 501 naming --embeddings", "/v1/embeddings", {"input": "a"}, b"--embeddings"),
                               ("generation is 501", "/v1/chat/completions", chat("Hello"), b"ranks documents")])
    m = metrics()
    check("rerank: /metrics counts the route",
          m.get('minfer_requests_total{route="/v1/rerank",status="200"}', 0) >= 15 and
          m.get('minfer_requests_total{route="/v1/rerank",status="400"}', 0) == len(bad_cases),
          str({k: v for k, v in m.items() if "rerank" in k}))


def check_auth(key):
    st, _, d = post("/v1/chat/completions", chat("Hello", max_tokens=2))
    check("auth: no key is 401", st == 401 and json.loads(d)["error"]["type"] == "authentication_error", d)
    st, _, d = post("/v1/chat/completions", chat("Hello", max_tokens=2), headers={"Authorization": "Bearer wrong"})
    check("auth: wrong key is 401", st == 401, d)
    st, _, d = post("/v1/chat/completions", chat("Hello", max_tokens=2), headers={"Authorization": "Bearer " + key})
    check("auth: right key works", st == 200, d)
    st, _, d = request("GET", "/metrics", headers={"X-Api-Key": key})
    check("auth: X-Api-Key works", st == 200, d[:100])
    st, _, d = request("GET", "/health")
    check("auth: /health stays open", st == 200, d)


if __name__ == "__main__":
    what = sys.argv[2]
    {"routes": check_routes, "bad_input": check_bad_input, "identity": check_identity, "stream": check_stream,
     "disconnect": check_disconnect, "logit_bias": check_logit_bias, "samplers": check_samplers, "n_probs": check_n_probs,
     "server_defaults": check_server_defaults, "infill": check_infill,
     "code_completion": check_code_completion, "load": check_load, "utf8": check_utf8, "slots": check_slots,
     "cache_reuse": check_cache_reuse, "cache_reuse_default": check_cache_reuse_default,
     "spec": lambda: check_spec(int(sys.argv[3])), "tools": check_tools, "structured": check_structured,
     "tools_template": check_tools_template, "embed": check_embed, "embed_none": lambda: check_embed_none(sys.argv[3]),
     "rerank": lambda: check_rerank(sys.argv[3])}.get(what, lambda: check_auth(sys.argv[3]))()
    sys.exit(1 if FAILED else 0)
