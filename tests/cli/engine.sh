#!/usr/bin/env bash
# minfer run / eval / viz end to end on a generated tiny model: text prompts through the tokenizer and
# the chat template give llama.cpp's greedy ids (tests/golden/conformance/qwen2-tiny-q8_0.json, the
# steps before any near-tie), the output shapes, and the refusals with their exit codes.
cd "$(dirname "$0")/../.." || exit 1
source tests/cli/lib.bash

M="$TMP/cli-engine-q8_0.gguf"
if ! "$GEN" --arch qwen2 --preset tiny --type q8_0 --seed 1 --untied -q -o "$M"; then
    bad genmodel "mf-genmodel failed"
    finish
    exit 1
fi

# llama.cpp greedy from the golden (cases "capital" and "chat"): the first 8 ids (top-2 gaps >= 0.05 there)
G=tests/golden/conformance/qwen2-tiny-q8_0.json
want_sha=$(grep -o '"sha256":"[0-9a-f]*"' "$G" | cut -d'"' -f4)
have_sha=$(sha256sum "$M" | cut -d' ' -f1)
if [ "$want_sha" != "$have_sha" ]; then
    bad generator_matches_golden "mf-genmodel drifted: $have_sha, golden $want_sha (re-record with tools/oracle/make_conformance_goldens.sh)"
fi
# case k's ids up to 8, cut before the first step whose llama.cpp gap is below 1.0 (q8_0's tolerance class)
ngen=$(grep -o '"n_gen":[0-9]*' "$G" | cut -d: -f2)
safe_n() { grep -o '"gap":[-0-9.e]*' "$G" | cut -d: -f2 | sed -n "$(( ($1 - 1) * ngen + 1 )),$(( $1 * ngen ))p" |
    awk '$1 < 1.0 { print NR - 1; found = 1; exit } END { if (!found) print 8 }' | awk '{ print ($1 > 8 ? 8 : $1) }'; }
want_ids() { grep -o '"generated":\[[0-9,]*\]' "$G" | sed -n "${1}p" | sed -E 's/.*\[//; s/\]//' | tr ',' '\n' |
    head -n "$2" | paste -sd, - | sed 's/,/, /g; s/^/[/; s/$/]/'; }
n_capital=$(safe_n 1)
n_chat=$(safe_n 3)
want_capital=$(want_ids 1 "$n_capital")
want_chat=$(want_ids 3 "$n_chat")
out=$("$MINFER" run -m "$M" -p "The capital of France is" -n "$n_capital" --temp 0 --ids -t 2 2>"$TMP/_err")
[ "$out" = "$want_capital" ] && ok run_text_prompt_matches_llama || bad run_text_prompt_matches_llama "got $out"
out=$("$MINFER" run -m "$M" --chat --system "You are a helpful assistant." \
    -p "What is the capital of France? Answer in one word." -n "$n_chat" --temp 0 --ids -t 2 2>"$TMP/_err")
[ "$out" = "$want_chat" ] && ok run_chat_prompt_matches_llama || bad run_chat_prompt_matches_llama "got $out"
out=$("$MINFER" run -m "$M" --tokens "[785, 6722, 315, 9625, 374]" -n "$n_capital" --temp 0 --ids -t 1 2>/dev/null)
[ "$out" = "$want_capital" ] && ok run_token_prompt_matches_llama || bad run_token_prompt_matches_llama "got $out"
printf 'The capital of France is' >"$TMP/_prompt.txt"
out=$("$MINFER" run -m "$M" -f "$TMP/_prompt.txt" -n "$n_capital" --temp 0 --ids 2>/dev/null)
[ "$out" = "$want_capital" ] && ok run_prompt_file || bad run_prompt_file "got $out"
rm -f "$TMP/_prompt.txt"
"$MINFER" run -m "$M" --tokens "[785, 6722, 315, 9625, 374]" -n 4 --temp 0 -t 1 >"$TMP/_out" 2>"$TMP/_err"
if grep -q "^load: " "$TMP/_err" && grep -q "^prefill: 5 tokens" "$TMP/_err" && grep -q "^decode: 3 tokens" "$TMP/_err"; then
    ok run_reports_timings
else bad run_reports_timings "$(cat "$TMP/_err")"; fi
[ -s "$TMP/_out" ] && ok run_streams_text || bad run_streams_text "no text on stdout"
# sampling is seeded: same seed, same text
a=$("$MINFER" run -m "$M" -p "Once upon a time" -n 12 --seed 7 --ids 2>/dev/null)
b=$("$MINFER" run -m "$M" -p "Once upon a time" -n 12 --seed 7 --ids -t 1 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] && ok run_seeded_sampling_is_deterministic || bad run_seeded_sampling_is_deterministic "$a vs $b"

# eval: one JSON line per position, raw logits highest first
"$MINFER" eval -m "$M" --tokens "[785, 6722, 315]" --top 3 >"$TMP/_eval" 2>"$TMP/_err"
lines=$(wc -l <"$TMP/_eval")
if [ "$lines" -eq 3 ] && head -n 1 "$TMP/_eval" | grep -qE '^\{"pos": 0, "token": 785, "top": \[\[[0-9]+, -?[0-9.e+-]+\], \[[0-9]+, -?[0-9.e+-]+\], \[[0-9]+, -?[0-9.e+-]+\]\]\}$'; then
    ok eval_shape
else bad eval_shape "$(head -c 300 "$TMP/_eval")"; fi

# viz
"$MINFER" viz -m "$M" --tokens 4 --format json -o "$TMP/_g.json" 2>"$TMP/_err"
grep -q '"blk.1.attn_q"' "$TMP/_g.json" && grep -q '"result_output"' "$TMP/_g.json" && ok viz_json || bad viz_json "$(cat "$TMP/_err")"
# parse the export: every node has the documented fields, sources point backwards, layers are 0..1 or -1
msg=$(python3 - "$TMP/_g.json" <<'PY' 2>&1
import json, sys
g = json.load(open(sys.argv[1]))
nodes = g["nodes"]
assert len(nodes) > 50, f"only {len(nodes)} nodes"
for i, n in enumerate(nodes):
    for k in ("id", "name", "op", "type", "ne", "src", "layer", "backend"):
        assert k in n, f"node {i} lacks {k}"
    assert n["id"] == i, f"node {i} has id {n['id']}"
    assert all(s < i for s in n["src"] if s >= 0), f"node {i} reads a later node"
    assert n["layer"] in (-1, 0, 1), f"node {i} layer {n['layer']}"
ops = {n["op"] for n in nodes}
for op in ("get_rows", "rms_norm", "matmul", "rope", "kv_store", "attention", "swiglu"):
    assert op in ops, f"no {op} node (ops: {sorted(ops)})"
PY
)
[ -z "$msg" ] && ok viz_json_parses || bad viz_json_parses "$msg"
"$MINFER" viz -m "$M" --format dot >"$TMP/_g.dot" 2>"$TMP/_err"
grep -q "digraph" "$TMP/_g.dot" && grep -q "blk.0.kqv_out" "$TMP/_g.dot" && ok viz_dot || bad viz_dot "$(head -c 200 "$TMP/_g.dot")"

# refusals
expect run_missing_model 1 "nope.gguf" -- "$MINFER" run -m "$TMP/nope.gguf" -p hi
expect run_prompt_longer_than_context 1 "the prompt has 5 tokens and the context holds 4: it must hold the prompt plus at least one generated token (raise -c/--ctx-size to at least 6" -- \
    "$MINFER" run -m "$M" --tokens "[785, 6722, 315, 9625, 374]" -c 4
expect run_unknown_flag 2 "unknown flag '--frobnicate'" -- "$MINFER" run -m "$M" -p hi --frobnicate
expect eval_unknown_flag 2 "unknown flag '--bogus'" -- "$MINFER" eval -m "$M" --bogus 1
expect viz_unknown_flag 2 "unknown flag '-x'" -- "$MINFER" viz -m "$M" -x
expect run_no_prompt 2 "exactly one prompt source" -- "$MINFER" run -m "$M"
expect run_bad_tokens 2 "JSON array" -- "$MINFER" run -m "$M" --tokens "[1, x]"
expect eval_token_out_of_vocab 1 "outside the vocabulary" -- "$MINFER" eval -m "$M" --tokens "[151936]"
expect viz_bad_format 2 "dot or json" -- "$MINFER" viz -m "$M" --format svg
L="$TMP/cli-engine-llama.gguf"
LC_ALL=C sed 's/qwen2/qwfn2/g' "$M" >"$L"
expect run_unsupported_architecture 1 "unsupported model architecture 'qwfn2' (supported: qwen2, qwen3)" -- \
    "$MINFER" run -m "$L" -p hi
rm -f "$L"

# --help documents every flag
help_ok=1
"$MINFER" run --help >"$TMP/_h" || help_ok=0
for f in -m -p -f --tokens -n --chat --system -t -c --temp --top-k --top-p --min-p --typical --repeat-penalty \
    --repeat-last-n --presence-penalty --frequency-penalty --seed --ignore-eos --ids --chat-template --think; do
    grep -q -- "$f" "$TMP/_h" || { help_ok=0; echo "run --help lacks $f"; }
done
"$MINFER" eval --help >"$TMP/_h" || help_ok=0
for f in -m -p --tokens --top -c -t; do grep -q -- "$f" "$TMP/_h" || { help_ok=0; echo "eval --help lacks $f"; }; done
"$MINFER" viz --help >"$TMP/_h" || help_ok=0
for f in -m --tokens --format -o -c; do grep -q -- "$f" "$TMP/_h" || { help_ok=0; echo "viz --help lacks $f"; }; done
[ $help_ok -eq 1 ] && ok help_documents_every_flag || bad help_documents_every_flag "see above"

# chat templates: an explicit format equals the recognised one for this model (its template is Qwen3's);
# the Qwen3 thinking switch changes the prompt; unknown names and a template-less model are refused.
a=$("$MINFER" run -m "$M" --chat -p hi -n 2 --temp 0 --ids -t 1 2>/dev/null)
b=$("$MINFER" run -m "$M" --chat --chat-template qwen3 -p hi -n 2 --temp 0 --ids -t 1 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] && ok chat_template_explicit_equals_auto || bad chat_template_explicit_equals_auto "auto $a, qwen3 $b"
"$MINFER" run -m "$M" --chat --think off -p hi -n 0 --temp 0 2>"$TMP/_err" >/dev/null
grep -q 'prefill: 13 tokens' "$TMP/_err" && ok chat_think_off_adds_empty_think_block ||
    bad chat_think_off_adds_empty_think_block "$(cat "$TMP/_err")"
expect chat_template_unknown 1 "unknown chat template 'bogus' (known: auto, chatml, qwen2.5, qwen3)" -- \
    "$MINFER" run -m "$M" --chat --chat-template bogus -p hi -n 1
expect chat_template_needs_chat 2 "only apply with --chat" -- "$MINFER" run -m "$M" --chat-template chatml -p hi -n 1
N="$TMP/cli-engine-notemplate.gguf"
LC_ALL=C sed 's/tokenizer\.chat_template/tokenizer.chat_templatX/' "$M" >"$N"
expect chat_without_template_refused 1 "has no chat template (tokenizer.chat_template); pass --chat-template chatml" -- \
    "$MINFER" run -m "$N" --chat -p hi -n 1
out=$("$MINFER" run -m "$N" --chat --chat-template chatml -p hi -n 1 --temp 0 --ids 2>/dev/null)
[ -n "$out" ] && ok chat_template_chatml_override || bad chat_template_chatml_override "no output"
rm -f "$N"

rm -f "$M" "$TMP/_g.json" "$TMP/_g.dot" "$TMP/_eval" "$TMP/_out" "$TMP/_h"

finish
