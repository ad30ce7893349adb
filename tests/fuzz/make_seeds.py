#!/usr/bin/env python3
"""Writes the committed seed corpora of the fuzz harnesses (tests/fuzz/corpus/<name>/).

Run from anywhere: `python3 tests/fuzz/make_seeds.py`.  The output is a pure function of this file
(plus the byte-level ids of the Qwen3 vocabulary, written out below), so rerunning it changes nothing;
files it does not write (regress-* inputs a harness once crashed on) are left alone.

Each seed follows its harness's input format (see the comment at the top of tests/fuzz/fuzz_<name>.c).
The GGUF seeds are hand-built tiny files: the writer's layout (v3, 32-byte alignment) with every value
type, nested arrays, a 268-token byte-level BPE vocabulary with merges and added tokens, and a qwen3
header with small tensors of several block types; one v2 file and one 64-byte-aligned file.  The session
seeds are small valid session files (docs/SESSION.md; the checksum is XXH64, implemented below)."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

# ---------------------------------------------------------------- GGUF
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
          U64: "<Q", I64: "<q", F64: "<d"}
# ggml types: (id, elements per block, bytes per block)
GT = {"f32": (0, 1, 4), "f16": (1, 1, 2), "q4_0": (2, 32, 18), "q8_0": (8, 32, 34), "q4_k": (12, 256, 144),
      "q6_k": (14, 256, 210), "bf16": (30, 1, 2)}


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gval(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        body = struct.pack("<IQ", et, len(items))
        return body + b"".join(gval(et, x) for x in items)
    return struct.pack(SCALAR[t], v)


def gguf(kvs, tensors=(), version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, ggml type name, ne list)] with deterministic data."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += gstr(k) + struct.pack("<I", t) + gval(t, v)
    offset, datas = 0, []
    for name, tname, ne in tensors:
        tid, blk, bb = GT[tname]
        n = 1
        for d in ne:
            n *= d
        nbytes = n // blk * bb
        offset = (offset + alignment - 1) // alignment * alignment
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<q", d) for d in ne)
        out += struct.pack("<IQ", tid, offset)
        datas.append((offset, bytes((i * 37 + len(name)) & 0xFF for i in range(nbytes))))
        offset += nbytes
    if tensors:
        out += b"\0" * (-len(out) % alignment)
        base = len(out)
        for off, d in datas:
            out += b"\0" * (base + off - len(out)) + d
    return out


def bytes_to_unicode():
    """GPT-2's byte -> printable character map (what byte-level BPE vocabularies store)."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tiny_vocab_kvs():
    b2u = bytes_to_unicode()
    toks = [b2u[b] for b in sorted(b2u)]  # 256 byte tokens, ids = byte values
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("Ġ", "w")]
    for a, b in merges:
        toks.append(a + b)
    types = [1] * len(toks)
    added = [("<|endoftext|>", 3), ("<|im_start|>", 3), ("<|im_end|>", 3), ("<think>", 4), ("</think>", 4)]
    for t, ty in added:
        toks.append(t)
        types.append(ty)
    ids = {t: i for i, t in enumerate(toks)}
    return [
        ("tokenizer.ggml.model", STR, "gpt2"),
        ("tokenizer.ggml.pre", STR, "qwen2"),
        ("tokenizer.ggml.tokens", ARR, (STR, toks)),
        ("tokenizer.ggml.token_type", ARR, (I32, types)),
        ("tokenizer.ggml.merges", ARR, (STR, [a + " " + b for a, b in merges])),
        ("tokenizer.ggml.eos_token_id", U32, ids["<|im_end|>"]),
        ("tokenizer.ggml.padding_token_id", U32, ids["<|endoftext|>"]),
        ("tokenizer.ggml.bos_token_id", U32, ids["<|endoftext|>"]),
        ("tokenizer.ggml.add_bos_token", BOOL, False),
        ("tokenizer.chat_template", STR, "{%- for message in messages %}<|im_start|>{{ message.role }}{% endfor %}"),
    ]


def qwen3_kvs(arch="qwen3"):
    return [
        ("general.architecture", STR, arch),
        ("general.name", STR, "fuzz-seed"),
        (arch + ".context_length", U32, 64),
        (arch + ".embedding_length", U32, 32),
        (arch + ".block_count", U32, 1),
        (arch + ".feed_forward_length", U32, 64),
        (arch + ".attention.head_count", U32, 2),
        (arch + ".attention.head_count_kv", U32, 1),
        (arch + ".attention.key_length", U32, 16),
        (arch + ".attention.value_length", U32, 16),
        (arch + ".attention.layer_norm_rms_epsilon", F32, 1e-6),
        (arch + ".rope.freq_base", F32, 1000000.0),
    ]


def gguf_seeds():
    every_type = [
        ("k.u8", U8, 7), ("k.i8", I8, -7), ("k.u16", U16, 65535), ("k.i16", I16, -32768),
        ("k.u32", U32, 4294967295), ("k.i32", I32, -1), ("k.f32", F32, 0.5), ("k.bool", BOOL, True),
        ("k.str", STR, "h\u00e9llo \"quoted\"\n"), ("k.u64", U64, 2**64 - 1), ("k.i64", I64, -(2**63)),
        ("k.f64", F64, 1e300),
        ("k.arr.u8", ARR, (U8, [1, 2, 3])), ("k.arr.i32", ARR, (I32, [-1, 0, 2**31 - 1])),
        ("k.arr.f32", ARR, (F32, [1.0, -2.5])), ("k.arr.f64", ARR, (F64, [3.25])),
        ("k.arr.bool", ARR, (BOOL, [True, False])), ("k.arr.str", ARR, (STR, ["a", "", "c\u00ff"])),
        ("k.arr.empty", ARR, (U64, [])),
        ("k.arr.nested", ARR, (ARR, [(U16, [1, 2]), (STR, ["x"]), (ARR, [(I8, [-1])])])),
        ("general.alignment", U32, 32),
    ]
    tensors = [("token_embd.weight", "q8_0", [32, 4]), ("output_norm.weight", "f32", [32]),
               ("blk.0.attn_q.weight", "q4_k", [256, 1]), ("blk.0.ffn_down.weight", "q6_k", [256, 1]),
               ("blk.0.attn_k.weight", "f16", [8, 2, 1, 1]), ("blk.0.attn_v.weight", "bf16", [4, 2]),
               ("blk.0.ffn_up.weight", "q4_0", [64])]
    # a complete 1-layer qwen3 the model loader accepts (n_embd 32, 2 heads of 16, 1 KV head, ff 64, 8 tokens)
    model = [("token_embd.weight", "q8_0", [32, 8]), ("output_norm.weight", "f32", [32]),
             ("blk.0.attn_norm.weight", "f32", [32]), ("blk.0.attn_q.weight", "q8_0", [32, 32]),
             ("blk.0.attn_k.weight", "q8_0", [32, 16]), ("blk.0.attn_v.weight", "q8_0", [32, 16]),
             ("blk.0.attn_q_norm.weight", "f32", [16]), ("blk.0.attn_k_norm.weight", "f32", [16]),
             ("blk.0.attn_output.weight", "q8_0", [32, 32]), ("blk.0.ffn_norm.weight", "f32", [32]),
             ("blk.0.ffn_gate.weight", "q8_0", [32, 64]), ("blk.0.ffn_up.weight", "q8_0", [32, 64]),
             ("blk.0.ffn_down.weight", "q8_0", [64, 32])]
    model_kvs = qwen3_kvs() + [("tokenizer.ggml.eos_token_id", U32, 3),
                               ("tokenizer.ggml.tokens", ARR, (STR, ["a", "b", "<|endoftext|>", "<|im_end|>", "c", "d", "e", "f"]))]
    # the same as a qwen3moe: 4 experts of width 32, 2 a token (an f32 router, the 3-D expert stacks)
    moe = model[:-3] + [("blk.0.ffn_gate_inp.weight", "f32", [32, 4]), ("blk.0.ffn_gate_exps.weight", "q8_0", [32, 32, 4]),
                        ("blk.0.ffn_up_exps.weight", "q8_0", [32, 32, 4]), ("blk.0.ffn_down_exps.weight", "q8_0", [32, 32, 4])]
    moe_kvs = [kv for kv in qwen3_kvs("qwen3moe")] + [("qwen3moe.expert_count", U32, 4), ("qwen3moe.expert_used_count", U32, 2),
                                                      ("qwen3moe.expert_feed_forward_length", U32, 32)] + model_kvs[len(qwen3_kvs()):]
    # a qwen2moe: qwen2's attention (q/k/v biases, no q/k norms), the same experts, and the shared expert (its
    # 1-D f32 gate input, a swiglu FFN of width 64)
    moe2 = model[:6] + [("blk.0.attn_q.bias", "f32", [32]), ("blk.0.attn_k.bias", "f32", [16]),
                        ("blk.0.attn_v.bias", "f32", [16])] + model[8:10] + moe[-4:] + [
        ("blk.0.ffn_gate_inp_shexp.weight", "f32", [32]), ("blk.0.ffn_gate_shexp.weight", "q8_0", [32, 64]),
        ("blk.0.ffn_up_shexp.weight", "q8_0", [32, 64]), ("blk.0.ffn_down_shexp.weight", "q8_0", [64, 32])]
    moe2_kvs = [kv for kv in qwen3_kvs("qwen2moe")] + [
        ("qwen2moe.expert_count", U32, 4), ("qwen2moe.expert_used_count", U32, 2),
        ("qwen2moe.expert_feed_forward_length", U32, 32),
        ("qwen2moe.expert_shared_feed_forward_length", U32, 64)] + model_kvs[len(qwen3_kvs()):]
    return {
        "qwen3-model": gguf(model_kvs, model),
        "qwen3moe-model": gguf(moe_kvs, moe),
        "qwen2moe-model": gguf(moe2_kvs, moe2),
        "empty-v3": gguf([]),
        "empty-v2": gguf([], version=2),
        "every-type": gguf(every_type),
        "vocab": gguf(tiny_vocab_kvs()),
        "qwen3-tensors": gguf(qwen3_kvs() + tiny_vocab_kvs()[:2], tensors),
        "qwen2-align64": gguf(qwen3_kvs("qwen2") + [("general.alignment", U32, 64)], tensors[:3], alignment=64),
    }


# ---------------------------------------------------------------- tokenizer
def ids3(ids):
    """fuzz_tok's id encoding: 3 bytes little-endian of id + 8 (so -8 .. n_vocab+7 are reachable)."""
    return b"".join(struct.pack("<I", i + 8)[:3] for i in ids)


def tok_seeds():
    b2u = bytes_to_unicode()
    order = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    order += [b for b in range(256) if b not in order]
    byte_id = {b: i for i, b in enumerate(order)}  # Qwen's ids 0..255 are the byte tokens in this order
    emoji = [byte_id[b] for b in "\U0001F600".encode()]
    assert b2u[0xF0] == "\u00f0" and byte_id[0xF0] == 172
    return {
        "text-plain": b"\x00Hello world, this is a test.",
        "text-special": b"\x04<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
        "text-special-as-plain": b"\x00<|im_start|>user<tool_call>x</tool_call><|endoftext|>",
        "text-cjk": b"\x01" + "你好，世界！こんにちは 안녕하세요".encode(),
        "text-combining": b"\x03" + "caf\u00e9 cafe\u0301 \u212b A\u030a \U0001F600\U0001F44D\U0001F3FD \u0338>".encode(),
        "text-invalid-utf8": b"\x00\xff\xfe\xc0\x80\xed\xa0\x80abc\xe2\x82 \xf0\x9f\x98",
        "text-contractions": b"\x13I'm don't they'll WE'VE 'S  \t\n\n  123456 3.14\r\n\xc2\xa0",
        "text-code": b"\x17def f(x):\n    return x**2  # comment\r\n\t}}\n",
        "ids-chat": b"\x06" + ids3([151644, 872, 198, 9707, 151645, 198, 151667, 151668]),
        "ids-split-emoji": b"\x02" + ids3([9707, emoji[0], emoji[1], emoji[2], emoji[3], emoji[0], 1879]),
        "ids-out-of-range": b"\x02" + ids3([-8, -1, 0, 151935, 151936, 151943, 9707]),
    }


# ---------------------------------------------------------------- chat
def chat(opts, msgs):
    """msgs: [(role index 0..5 or a role name, content, reasoning or None)]"""
    parts = []
    for role, content, reasoning in msgs:
        head = bytes([role]) if isinstance(role, int) else b"\x04" + role.encode() + b"\x1d"
        body = head + content.encode()
        if reasoning is not None:
            body += b"\x1f" + reasoning.encode()
        parts.append(body)
    return bytes([opts]) + b"\x1e".join(parts)


def chat_seeds():
    S, U, A, T = 0, 1, 2, 3
    convo = [(S, "You are terse.", None), (U, "Hi", None), (A, "<think>\nhmm\n</think>\n\nHello!", None),
             (U, "Weather?", None), (T, "{\"temp\": 20}", None), (T, "<tool_response>x</tool_response>", None),
             (A, "It is 20.", "checked the tool")]
    return {
        "chatml": chat(0x04, convo),
        "qwen25": chat(0x05, convo),
        "qwen3-think-default": chat(0x06, convo),
        "qwen3-think-off": chat(0x0E, convo),
        "qwen3-think-on-nogen": chat(0x12, convo[:3]),
        "qwen3-null-opts": chat(0x22, [(U, "<tool_response>q</tool_response>", None), (A, "a</think>b", None)]),
        "custom-role": chat(0x06, [("narrator", "Once", None), (U, "upon", None)]),
        "no-role": chat(0x04, [(5, "nobody", None)]),
        "auto-refused": chat(0x07, [(U, "x", None)]),
        "detect-qwen3-marks": bytes([0x46]) + b"<|im_start|>ns.last_query_index reasoning_content "
        b"message.content.split('</think>')[-1].lstrip('\\n') enable_thinking is defined and enable_thinking is false",
        "detect-name": bytes([0x40]) + b"qwen2.5",
        # bit 7: the first message's content is the tool's JSON, each assistant turn calls with its reasoning
        "qwen3-tools": chat(0x86, [(U, '{"type":"function","function":{"name":"f","parameters":{"x":[1,2.5e-3]}}}', None),
                                   (A, "", '{"city": "Paris"}'), (T, "ok", None)]),
        "qwen25-tools": chat(0x85, [(S, '{"type":"function","function":{"name":"g"}}', None), (U, "u", None),
                                    (A, "x", '{"a":"\\u00e9"}')]),
        "chatml-tools-refused": chat(0x84, [(U, "{}", None)]),
    }


# ---------------------------------------------------------------- session files (docs/SESSION.md)
M64 = (1 << 64) - 1
X1, X2, X3, X4, X5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                      0x27D4EB2F165667C5)


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def _xround(acc, v):
    return (_rotl((acc + v * X2) & M64, 31) * X1) & M64


def xxh64(b, seed=0):
    n, i = len(b), 0
    if n >= 32:
        v = [(seed + X1 + X2) & M64, (seed + X2) & M64, seed, (seed - X1) & M64]
        while i + 32 <= n:
            for k in range(4):
                v[k] = _xround(v[k], struct.unpack_from("<Q", b, i + 8 * k)[0])
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M64
        for k in range(4):
            h = ((h ^ _xround(0, v[k])) * X1 + X4) & M64
    else:
        h = (seed + X5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h = (_rotl(h ^ _xround(0, struct.unpack_from("<Q", b, i)[0]), 27) * X1 + X4) & M64
        i += 8
    if i + 4 <= n:
        h = (_rotl(h ^ ((struct.unpack_from("<I", b, i)[0] * X1) & M64), 23) * X2 + X3) & M64
        i += 4
    while i < n:
        h = (_rotl(h ^ ((b[i] * X5) & M64), 11) * X1) & M64
        i += 1
    h ^= h >> 33
    h = (h * X2) & M64
    h ^= h >> 29
    h = (h * X3) & M64
    return h ^ (h >> 32)


def session(k_type, v_type, n_embd_kv, positions, tokens, app=b"", rng=None, n_layer=2):
    row = {0: lambda n: 4 * n, 1: lambda n: 2 * n, 8: lambda n: n // 32 * 34}
    rk, rv = row[k_type](n_embd_kv), row[v_type](n_embd_kv)
    head = b"MFSESS\r\n" + struct.pack("<II", 1, 184) + b"qwen2".ljust(32, b"\0")
    head += struct.pack("<7iI", n_layer, 64, 4, 2, n_embd_kv // 2, 128, 300, 0)
    head += struct.pack("<QIIQQQQ", 0x0123456789ABCDEF, k_type, v_type, n_embd_kv, n_embd_kv, rk, rv)
    head += struct.pack("<iiQII", len(positions), len(tokens), len(app), 1 if rng else 0, 0)
    head += struct.pack("<4Q", *(rng or (0, 0, 0, 0)))
    assert len(head) == 184
    body = struct.pack("<%di" % len(positions), *positions) + struct.pack("<%di" % len(tokens), *tokens) + app
    for layer in range(n_layer):
        for kv, r in (("K", rk), ("V", rv)):
            body += bytes((layer * 37 + i * 11 + (kv == "V") * 5) & 0xFF for i in range(r * len(positions)))
    data = head + body
    return data + struct.pack("<Q", xxh64(data))


def session_seeds():
    assert xxh64(b"") == 0xEF46DB3751D8E999 and xxh64(b"Nobody inspects the spammish repetition") == 0xFBCEA83C8A378BF1
    return {
        "f32": session(0, 0, 8, [0, 1, 2], [10, 11, 12, 13], b"{\"turns\":[]}", (1, 2, 3, 4)),
        "f16-gaps": session(1, 1, 8, [0, 5, 9], [299, 0], b"", (0xFFFFFFFFFFFFFFFF, 0, 0, 0)),
        "q8_0-k-f16-v": session(8, 1, 32, [3, 4], [7], b"x", None, n_layer=1),
        "empty": session(0, 0, 8, [], [], b"", None),
    }


# ---------------------------------------------------------------- --tokens
def args_seeds():
    cases = ["[9707, 11, 1879]", "[]", " [ 1 ,2 ]\n", "[2147483647]", "[2147483648]", "[-1]", "[1,]", "[1e3]",
             "[\"1\"]", "[1, 2] x", "[0x10]", "[99999999999999999999]", "[\t0\n]", "", "[", "[[1]]", "+5", "3.5"]
    return {"case-%02d" % i: c.encode() for i, c in enumerate(cases)}


def request_seeds():
    """Byte 0: the route (% 4: 0 chat, 1 completions, 2 /completion, 3 /infill); the rest is the body."""
    return {
        "chat": b'\x00{"messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"temperature":0,"stream":true,'
                b'"stream_options":{"include_usage":true},"stop":["a","b"]}',
        "completion-ids": b'\x01{"prompt":[9707,11,1879],"n":2,"logprobs":3,"seed":7}',
        "native": b'\x02{"prompt":"The capital of","n_predict":-1,"top_k":3,"min_p":0.1,"cache_prompt":false,'
                  b'"id_slot":0}',
        "chat-parts": b'\x00{"messages":[{"role":"developer","content":[{"type":"text","text":"be "},{"type":"text",'
                      b'"text":"brief"}]},{"role":"user","content":"x"}],"chat_template_kwargs":'
                      b'{"enable_thinking":false},"tools":[]}',
        "bad-type": b'\x00{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}',
        "chat-schema": b'\x00{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema",'
                       b'"json_schema":{"name":"r","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}}',
        "chat-required": b'\x00{"messages":[{"role":"user","content":"x"}],"tool_choice":"required","tools":[{"type":'
                         b'"function","function":{"name":"f","parameters":{"type":"object","properties":{"q":{'
                         b'"type":"string"}}}}}]}',
        "native-grammar": b'\x02{"prompt":"x","grammar":"root ::= [0-9]{1,3}"}',
        "native-bias": b'\x02{"prompt":"x","logit_bias":[[5,-1.5],[5,false],["hi",2],[63,1e6]]}',
        "infill": b'\x03{"input_prefix":"def f():\\n","input_suffix":"","prompt":"ret","input_extra":[{"filename":'
                  b'"a.py","text":"A = 1"},{"text":"B"}],"n_predict":8}',
        "completion-suffix": b'\x01{"prompt":"x = ","suffix":";\\n","max_tokens":4}',
        "infill-llama-vim": b'\x03{"input_prefix":"a\\n","input_suffix":"\\n","input_extra":[{"text":"t","time":1,'
                            b'"filename":"f"}],"prompt":"  x","n_predict":16,"n_indent":2,"top_k":40,"top_p":0.99,'
                            b'"samplers":["top_k","top_p","infill"],"t_max_prompt_ms":500,"t_max_predict_ms":1000,'
                            b'"response_fields":["content","timings/prompt_n","truncated",""],"return_tokens":true,'
                            b'"n_cmpl":1,"timings_per_token":true}',
        "native-cache-reuse": b'\x02{"prompt":[1,2,3],"cache_prompt":true,"n_cache_reuse":256,"id_slot":0}',
        "native-samplers": b'\x02{"prompt":"x","dry_multiplier":0.8,"dry_base":1.75,"dry_allowed_length":2,'
                           b'"dry_penalty_last_n":-1,"dry_sequence_breakers":["\\n",":","\\"","*"],"xtc_probability":0.5,'
                           b'"xtc_threshold":0.1,"top_n_sigma":1.5,"dynatemp_range":0.5,"dynatemp_exponent":1,'
                           b'"mirostat":2,"mirostat_tau":5,"mirostat_eta":0.1,"n_probs":0,"samplers":"edskypmxt"}',
        "chat-dry-bad": b'\x00{"messages":[{"role":"user","content":"x"}],"dry_multiplier":1,"dry_base":0.5,'
                        b'"dry_sequence_breakers":["",1],"samplers":["dry","top_k","xtc"]}',
        "chat-bias": b'\x00{"messages":[{"role":"user","content":"x"}],"logit_bias":{"7":-100,"-1":3,"Hello":false}}',
        "chat-tools": b'\x00{"messages":[{"role":"user","content":"w?"},{"role":"assistant","content":null,"tool_calls":'
                      b'[{"id":"c","type":"function","function":{"name":"f","arguments":"{\\"x\\": 1}"}}]},{"role":"tool",'
                      b'"tool_call_id":"c","content":"Checking.<tool_call>{\\"name\\":\\"now\\",\\"arguments\\":{}}'
                      b'</tool_call>\\n<tool_call>\\n{\\"name\\": \\"f\\", \\"arguments\\": \\"{}\\"}\\n</tool_call>"}],'
                      b'"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],'
                      b'"tool_choice":"auto","parallel_tool_calls":false}',
        # not a request (refused): a model's answer, for the tool-call splitter the harness also runs
        "answer-tool-calls": b'\x05Checking.<tool_call>{"name":"now","arguments":{}}</tool_call>\n<tool_call>\n'
                             b'{"name": "f", "arguments": "{}"}\n</tool_call>\n<tool_call>\nnot json</tool_call> <tool',
    }


def embed_seeds():
    """Byte 0: the route (% 3: 0 /v1/embeddings, 1 /embedding, 2 /v1/rerank), bit 1 --matryoshka with last
    pooling (else the reranker's own rank; bit 7 then pooling none), from bit 2 on the context (16 + 8 * (byte >> 2) tokens); the rest
    is the body."""
    big, rank = 0xFC, 0xFB  # /v1/embeddings and /v1/rerank with a context of 520 / 512: room for a rerank prompt
    return {
        "oai-strings": bytes([big]) + b'{"input":["Hello world","x"],"model":"m","encoding_format":"base64"}',
        "oai-ids": bytes([0x06]) + b'{"input":[[9707,1879],[11]],"dimensions":256}',
        "native-content": bytes([0x0A]) + b'{"content":"one text","embd_normalize":-1}',
        "oai-dimensions": bytes([0x06]) + b'{"input":"shorter","dimensions":32}',
        "native-none": bytes([0x85]) + b'{"content":["per token","x"],"embd_normalize":-1}',
        "oai-bad-surrogate": bytes([big]) + b'{"input":"a\\ud800b"}',
        "rerank-jina": bytes([rank]) + b'{"query":"What is a panda?","documents":["hi",{"text":"a bear"}],'
                                            b'"top_n":1,"return_documents":true}',
        "rerank-tei": bytes([rank]) + b'{"query":"q","texts":["a","b","c"],"return_text":true}',
        "rerank-short-ctx": bytes([0x02]) + b'{"query":"q","documents":["d"]}',
        "rerank-bad": bytes([rank]) + b'{"query":"q","documents":[{"title":"x"}],"top_n":-1}',
    }


def grammar_seeds():
    """Byte 0: bit 0 = a JSON Schema (else GBNF), the rest where the text is cut; grammar NUL text."""
    return {
        "gbnf-record": b'\x08root ::= "{" ws pair ("," ws pair)* "}"\npair ::= key ":" ws [0-9]+\n'
                       b'key ::= "\\"" [a-z_]{1,16} "\\""\nws ::= [ \\t\\n]{0,4} # blanks\n\x00{"ab": 12, "c":3}',
        "gbnf-unicode": b'\x05root ::= "\\u00e9" [\\u4e00-\\u9fff]+ [^a-z]? .\x00\xc3\xa9\xe4\xb8\xad\xe6\x96\x87!x',
        "gbnf-nested": b'\x02root ::= "[" item ("," item)* "]"\nitem ::= [0-9]+ | root\x00[1,[2,[3]],4]',
        "gbnf-bad": b'\x00root ::= ( "a"? )*\x00aaa',
        "schema-object": b'\x11{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":'
                         b'"integer"},"tags":{"type":"array","items":{"enum":["a","b",1,null]},"maxItems":3}},'
                         b'"required":["name"],"additionalProperties":false}\x00{"name": "x", "tags": ["a", 1]}',
        "schema-refs": b'\x07{"$defs":{"n":{"type":"object","properties":{"v":{"type":"number"},"kids":{"type":"array",'
                       b'"items":{"$ref":"#/$defs/n"}}},"required":["v"]}},"$ref":"#/$defs/n"}\x00'
                       b'{"v": -1.5e3, "kids": [{"v": 0}]}',
        "schema-anyof": b'\x03{"anyOf":[{"type":"boolean"},{"type":["null","string"],"minLength":2}],"title":"t"}\x00"ab"',
        "schema-refused": b'\x01{"type":"string","pattern":"^a"}\x00"a"',
    }


def main():
    for name, seeds in (("gguf", gguf_seeds()), ("tok", tok_seeds()), ("chat", chat_seeds()),
                        ("args", args_seeds()), ("session", session_seeds()), ("request", request_seeds()),
                        ("grammar", grammar_seeds()), ("embed", embed_seeds())):
        d = os.path.join(CORPUS, name)
        os.makedirs(d, exist_ok=True)
        for fname, data in seeds.items():
            with open(os.path.join(d, fname), "wb") as f:
                f.write(data)
        total = sum(len(v) for v in seeds.values())
        print("%-5s %2d seeds, %6d bytes" % (name, len(seeds), total))


if __name__ == "__main__":
    main()
