#!/usr/bin/env bash
# minfer embed (docs/EMBEDDINGS.md): texts split at the separator become one vector each, in OpenAI's list shape
# or as a bare array; the normalisations are llama.cpp's; the pooling flag changes the vector; the three ways
# to give a text agree; a reranker scores query/document pairs; every bad flag, empty text or over-long text is
# refused naming it.
cd "$(dirname "$0")/../.." || exit 1
source tests/cli/lib.bash

M="$TMP/cli-embed-qwen3.gguf"
if ! "$GEN" --arch qwen3 --preset tiny --type q8_0 --pooling last --add-eos --seed 6 -q -o "$M"; then
    bad genmodel "mf-genmodel failed"
    finish
    exit 1
fi
E() { "$MINFER" embed -m "$M" "$@"; }

# Two texts (newline-separated) -> two unit vectors, indices 0 and 1, usage counts every token (EOS included).
out=$(E -p $'Hello world\nSecond text here' 2>"$TMP/_embed_err")
if python3 -c '
import json, math, sys
d = json.loads(sys.argv[1])
assert d["object"] == "list" and [e["index"] for e in d["data"]] == [0, 1]
for e in d["data"]:
    v = e["embedding"]
    assert e["object"] == "embedding" and len(v) == 256 and abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5
assert d["data"][0]["embedding"] != d["data"][1]["embedding"]
assert d["usage"]["prompt_tokens"] == 7 and d["usage"]["total_tokens"] == 7   # 2 + 1 EOS, 3 + 1 EOS
' "$out"; then ok "two texts, unit vectors, usage"; else bad "two texts" "$out $(cat "$TMP/_embed_err")"; fi

# The same text three ways: -p, -f and --tokens (its ids with the EOS the tokenizer appends).
printf 'Hello world' >"$TMP/embed-in.txt"
a=$(E -p 'Hello world' --embd-output-format array) b=$(E -f "$TMP/embed-in.txt" --embd-output-format array)
c=$(E --tokens '[9707, 1879, 151645]' --embd-output-format array) d=$(E --tokens '[9707, 1879]' --embd-output-format array)
if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ] && [ "$a" != "$d" ]; then ok "-p, -f and --tokens agree (EOS appended)"; else bad "three ways" "$a | $b | $c"; fi

# Normalisations: raw / |raw| is the default output; max-abs puts the largest element at +-32760.
raw=$(E -p 'Hello world' --embd-normalize -1 --embd-output-format array)
mx=$(E -p 'Hello world' --embd-normalize 0 --embd-output-format array)
if python3 -c '
import json, math, sys
r, n, m = (json.loads(s)[0] for s in sys.argv[1:4])
s = math.sqrt(sum(x * x for x in r))
assert max(abs(x / s - y) for x, y in zip(r, n)) < 1e-6 and s > 1.5
assert max(abs(x) for x in m) == 32760
' "$raw" "$a" "$mx"; then ok "normalisations"; else bad "normalisations" "$raw"; fi

# The pooling flag: mean is not last; model (the file says last) is last.
mean=$(E -p 'Hello world' --pooling mean --embd-output-format array) last=$(E -p 'Hello world' --pooling last --embd-output-format array)
if [ -n "$mean" ] && [ "$mean" != "$last" ] && [ "$last" = "$a" ]; then ok "pooling flag"; else bad "pooling flag" "$mean"; fi

# Matryoshka truncation (--dimensions, on this Qwen3-Embedding-like file): the raw vector's first 64 floats,
# then normalised; elsewhere only with --matryoshka.
d64=$(E -p 'Hello world' --dimensions 64 --embd-output-format array)
m64=$(E -p 'Hello world' --pooling mean --dimensions 64 --matryoshka --embd-output-format array)
if python3 -c '
import json, math, sys
r, d, mean = (json.loads(s)[0] for s in sys.argv[1:4])
s = math.sqrt(sum(x * x for x in r[:64]))
assert len(d) == 64 and len(mean) == 64 and max(abs(x / s - y) for x, y in zip(r, d)) < 1e-6
' "$raw" "$d64" "$m64"; then ok "--dimensions: the first floats, normalised"; else bad "--dimensions" "$d64"; fi
expect "dimensions on mean pooling" 1 "not known to be (the Qwen3-Embedding family is)" -- E -p x --pooling mean --dimensions 64
expect "dimensions too large" 1 "--dimensions 257 is outside 1..256" -- E -p x --dimensions 257
expect "matryoshka without dimensions" 2 "--matryoshka vouches for --dimensions" -- E -p x --matryoshka

# Refusals: exit 2 for the command line, exit 1 for what the model cannot do.
expect "pooling none refused" 2 "--pooling none gives one vector per token" -- E -p x --pooling none
expect "pooling unknown" 2 "--pooling 'avg' is not one of model, mean, cls, last" -- E -p x --pooling avg
expect "output format" 2 "--embd-output-format 'csv' is not json or array" -- E -p x --embd-output-format csv
expect "normalize range" 2 "--embd-normalize" -- E -p x --embd-normalize 65
expect "empty text" 2 "text 0 is empty" -- E -p ''
expect "empty middle text" 2 "text 1 is empty" -- E -p $'a\n\nb'
expect "two inputs" 2 "exactly one of -p TEXT, -f FILE or --tokens" -- E -p x -f "$TMP/embed-in.txt"
expect "no model" 2 "no model given" -- "$MINFER" embed -p x
expect "flag twice" 2 "--pooling" -- E -p x --pooling mean --pooling last
expect "context too small" 1 "raise -c/--ctx-size" -- E -p 'one two three four five six seven' -c 4
expect "unknown flag" 2 "unknown flag '--embd-foo'" -- E -p x --embd-foo 1
# a custom separator: "a||b" is two texts
out=$(E -p 'a||b' --embd-separator '||' --embd-output-format array)
if python3 -c 'import json, sys; assert len(json.loads(sys.argv[1])) == 2' "$out"; then ok "custom separator"; else bad "custom separator" "$out"; fi

# A reranker (mf-genmodel --reranker: pooling_type rank, labels yes/no): each text is "QUERY<tab>DOCUMENT", its
# vector the labels' probabilities, printed as they are; --cls-separator changes the split; its hidden states
# still embed with another pooling; the rank-only rules are refused.
R="$TMP/cli-embed-rerank.gguf"
if "$GEN" --arch qwen3 --type q8_0 --reranker --seed 7 -q -o "$R"; then
    out=$("$MINFER" embed -m "$R" -p $'What is a panda?\tA bear.\nWhat is a panda?\tPython.' 2>"$TMP/_embed_err")
    if python3 -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["labels"] == ["yes", "no"] and [e["index"] for e in d["data"]] == [0, 1]
for e in d["data"]:
    p = e["embedding"]
    assert len(p) == 2 and abs(p[0] + p[1] - 1) < 1e-6 and 0 < p[0] < 1
assert d["data"][0]["embedding"] != d["data"][1]["embedding"] and d["usage"]["prompt_tokens"] > 140
' "$out"; then ok "rerank: pairs score as label probabilities"; else bad "rerank pairs" "$out $(cat "$TMP/_embed_err")"; fi
    a=$("$MINFER" embed -m "$R" -p $'What is a panda?\tA bear.' --embd-output-format array 2>/dev/null)
    b=$("$MINFER" embed -m "$R" -p 'What is a panda?<#sep#>A bear.' --cls-separator '<#sep#>' --embd-output-format array 2>/dev/null)
    c=$("$MINFER" embed -m "$R" -p 'What is a panda? A bear.' --pooling last --embd-output-format array 2>/dev/null)
    if [ -n "$a" ] && [ "$a" = "$b" ] && python3 -c 'import json, sys; assert len(json.loads(sys.argv[1])[0]) == 256' "$c"
    then ok "rerank: --cls-separator; --pooling last embeds a reranker's hidden states"; else bad "rerank separator" "$a | $b | $c"; fi
    expect "rerank: normalisation refused" 2 "are probabilities" -- "$MINFER" embed -m "$R" -p $'q\td' --embd-normalize 2
    expect "rerank: a text without the separator" 2 "text 1 has no --cls-separator" -- "$MINFER" embed -m "$R" -p $'q\td\nno pair'
    expect "rerank: --cls-separator without rank" 2 "--cls-separator splits" -- E -p x --cls-separator '|'
    expect "rerank: no dimensions for scores" 1 "labels' probabilities, which are not shortened" -- \
        "$MINFER" embed -m "$R" -p $'q\td' --dimensions 1
    expect "rerank: rank on a model without a head" 1 "classifier head (cls.output.weight)" -- E -p $'q\td' --pooling rank
    rm -f "$R"
else bad "rerank model" "mf-genmodel --reranker failed"; fi

# --help documents every flag it takes.
help=$("$MINFER" embed --help)
for f in --model --prompt --file --tokens --embd-separator --pooling --embd-normalize --embd-output-format --ctx-size \
    --ubatch-size --threads --cache-type-k --gpu-layers --cls-separator --dimensions --matryoshka; do
    [[ "$help" == *"$f"* ]] || bad "help $f" "not in minfer embed --help"
done
ok "help lists the flags"
rm -f "$M" "$TMP/embed-in.txt"
finish
