#!/usr/bin/env bash
# The CLI gives a straight answer to every input: numbers that are not finite or out of range, options
# given twice, writes that fail, NUL bytes in a prompt file, a model whose logits come out NaN, thinking
# switches a template does not have, --tokens that is not JSON; and the short form / --n-ctx.
cd "$(dirname "$0")/../.." || exit 1
source tests/cli/lib.bash

M="$TMP/cli-strict-q8_0.gguf"
if ! "$GEN" --arch qwen2 --preset tiny --type q8_0 --seed 1 --untied -q -o "$M"; then
    bad genmodel "mf-genmodel failed"
    finish
    exit 1
fi
P=(--tokens "[785, 6722, 315, 9625, 374]")

# ---- numbers: non-finite floats, out-of-range integers (naming the limit, not "expects an integer")
for f in --temp --top-p --min-p --typical --repeat-penalty --presence-penalty --frequency-penalty; do
    expect "float_nan$f" 2 "$f must be a finite number, got 'nan'" -- "$MINFER" run -m "$M" "${P[@]}" "$f" nan
done
expect float_inf 2 "--temp must be a finite number, got 'inf'" -- "$MINFER" run -m "$M" "${P[@]}" --temp inf
expect float_neg_inf 2 "--presence-penalty must be a finite number, got '-inf'" -- \
    "$MINFER" run -m "$M" "${P[@]}" --presence-penalty -inf
expect float_overflows_float 2 "--top-p must be a finite number within" -- "$MINFER" run -m "$M" "${P[@]}" --top-p 1e39
expect float_text 2 "--min-p expects a number, got 'x'" -- "$MINFER" run -m "$M" "${P[@]}" --min-p x
expect int_out_of_range 2 "-n must be in [0, 1073741824], got 99999999999999999999 (out of range)" -- \
    "$MINFER" run -m "$M" "${P[@]}" -n 99999999999999999999
expect int_neg_out_of_range 2 "--top-k must be in [0, 1073741824], got -99999999999999999999 (out of range)" -- \
    "$MINFER" run -m "$M" "${P[@]}" --top-k -99999999999999999999
expect int_above_max 2 "-t must be in [1, 1024], got 1025" -- "$MINFER" run -m "$M" "${P[@]}" -t 1025
expect int_not_integer 2 "-n expects an integer in [0, 1073741824], got '1e3'" -- "$MINFER" run -m "$M" "${P[@]}" -n 1e3
expect int_blank 2 "-n expects an integer in [0, 1073741824], got ' 5'" -- "$MINFER" run -m "$M" "${P[@]}" -n ' 5'
expect eval_top_out_of_range 2 "--top must be in [1, 1000], got 99999999999999999999 (out of range)" -- \
    "$MINFER" eval -m "$M" "${P[@]}" --top 99999999999999999999
expect info_out_of_range 2 "--max-str must be in [0, 1000000000], got 99999999999999999999 (out of range)" -- \
    "$MINFER" info -m "$M" --max-str 99999999999999999999
expect viz_out_of_range 2 "--tokens must be in [1, 1048576], got 99999999999999999999 (out of range)" -- \
    "$MINFER" viz -m "$M" --tokens 99999999999999999999
expect bench_seed_out_of_range 2 "--seed must be in [0, 18446744073709551615], got 18446744073709551616 (out of range)" -- \
    "$MINFER" bench -m "$M" -p 8 -n 0 --seed 18446744073709551616
expect run_seed_out_of_range 2 "--seed must be in [0, 18446744073709551615], got 18446744073709551616 (out of range)" -- \
    "$MINFER" run -m "$M" "${P[@]}" --seed 18446744073709551616
expect run_seed_plus 2 "--seed expects an unsigned decimal integer in [0, 18446744073709551615], got '+5'" -- \
    "$MINFER" run -m "$M" "${P[@]}" --seed +5
# the whole unsigned 64-bit range is a seed, and all of it is used (not clamped, not cut to 32 bits)
seeded() { "$MINFER" run -m "$M" "${P[@]}" -n 6 --seed "$1" --ids --temp 100 --top-k 0 --top-p 1 --min-p 0 2>/dev/null; }
a=$(seeded 18446744073709551615) b=$(seeded 18446744073709551614) c=$(seeded 4294967297) d=$(seeded 1)
[ -n "$a" ] && [ -n "$c" ] && [ "$a" != "$b" ] && [ "$c" != "$d" ] && ok run_seed_u64_range ||
    bad run_seed_u64_range "$a / $b / $c / $d"

# ---- one rule for repeated options, in every subcommand: refused naming both values
expect run_p_twice 2 "-p/--prompt given twice ('a', then 'b'); give it once" -- "$MINFER" run -m "$M" -p a -p b
expect run_p_prompt 2 "-p/--prompt given twice ('a', then 'b'); give it once" -- "$MINFER" run -m "$M" -p a --prompt b
expect run_m_twice 2 "-m/--model given twice ('x', then 'y'); give it once" -- "$MINFER" run -m x -m y -p a
expect run_temp_twice 2 "--temp given twice ('0', then '1'); give it once" -- "$MINFER" run -m "$M" -p a --temp 0 --temp 1
expect run_c_nctx 2 "-c/--ctx-size/--n-ctx given twice ('8', then '16'); give it once" -- \
    "$MINFER" run -m "$M" -p a -c 8 --n-ctx 16
expect run_switch_twice 2 "--ids given twice; give it once" -- "$MINFER" run -m "$M" -p a --ids --ids
expect run_p_and_f 2 "-p and -f both given; give exactly one prompt source" -- "$MINFER" run -m "$M" -p a -f "$M"
expect eval_tokens_twice 2 "--tokens given twice ('[1]', then '[2]'); give it once" -- \
    "$MINFER" eval -m "$M" --tokens '[1]' --tokens '[2]'
expect tokenize_p_twice 2 "-p/--prompt given twice ('a', then 'b'); give it once" -- "$MINFER" tokenize -m "$M" -p a -p b
expect tokenize_switch_twice 2 "--no-special given twice; give it once" -- \
    "$MINFER" tokenize -m "$M" -p a --no-special --no-special
expect info_m_twice 2 "-m/--model given twice" -- "$MINFER" info -m "$M" -m "$M"
expect info_full_and_limit 2 "--full and --max-elems both given" -- "$MINFER" info -m "$M" --full --max-elems 3
expect viz_format_twice 2 "--format given twice ('dot', then 'json'); give it once" -- \
    "$MINFER" viz -m "$M" --format dot --format json
expect bench_p_twice 2 "-p/--n-prompt given twice ('8', then '16'); give it once" -- "$MINFER" bench -m "$M" -p 8 -p 16
expect bench_seed_twice 2 "--seed given twice ('1', then '2'); give it once" -- "$MINFER" bench -m "$M" --seed 1 --seed 2
expect short_form_p_twice 2 "-p/--prompt given twice ('a', then 'b'); give it once" -- "$MINFER" "$M" a -p b
# --backend and --stop are the repeatable flags
expect backend_repeatable 0 "" -- "$MINFER" --backend cpu --backend cpu backends
expect stop_repeatable 0 "" -- "$MINFER" run -m "$M" --tokens "[785, 6722]" -n 2 --stop a --stop b
long=$(printf 'x%.0s' $(seq 1 100))
expect long_values_shortened 2 "given twice ('${long:0:60}...', then 'b')" -- "$MINFER" run -m "$M" -p "$long" -p b

# ---- every write is checked: a full disk or a reader that went away stops the command with exit 1
# expect_full NAME -- cmd...: stdout is /dev/full
expect_full() {
    local name=$1; shift 2
    "$@" >/dev/full 2>"$TMP/_err"
    local rc=$? err
    err=$(cat "$TMP/_err")
    if [ "$rc" -ne 1 ]; then bad "$name" "exit $rc, wanted 1; stderr: $err"; return; fi
    [[ "$err" == *"writing to stdout failed: No space left on device"* ]] && ok "$name" ||
        bad "$name" "stderr lacks the write error: $err"
}
T="[785,6722,315,9625,374]"
expect_full full_run -- "$MINFER" run -m "$M" --tokens "$T" -n 4
expect_full full_run_ids -- "$MINFER" run -m "$M" --tokens "$T" -n 4 --ids
expect_full full_chat -- bash -c 'printf "Hi\n" | "$0" chat -m "$1" -n 4' "$MINFER" "$M"
expect_full full_tokenize -- "$MINFER" tokenize -m "$M" -p hello
expect_full full_tokenize_ids -- "$MINFER" tokenize -m "$M" -p hello --ids
expect_full full_eval -- "$MINFER" eval -m "$M" --tokens "$T"
expect_full full_info -- "$MINFER" info -m "$M"
expect_full full_viz -- "$MINFER" viz -m "$M"
expect_full full_backends -- "$MINFER" backends
expect_full full_bench -- "$MINFER" bench -m "$M" -p 8 -n 0 -r 1
expect_full full_help -- "$MINFER" --help
expect_full full_run_help -- "$MINFER" run --help
expect viz_output_full 1 "writing to '/dev/full' failed: No space left on device" -- "$MINFER" viz -m "$M" -o /dev/full
# SIGPIPE ignored, the reader reads one byte and leaves: run stops at the next failed write (well before
# the 4096-token context is full), says so, exits 1, and never gets to its closing timings
t0=$(date +%s)
(
    trap '' PIPE
    "$MINFER" run -m "$M" --tokens "$T" -n 100000 --ignore-eos --temp 0 -t 1 2>"$TMP/_perr" | head -c 1 >/dev/null
    echo "${PIPESTATUS[0]}" >"$TMP/_prc"
)
t1=$(date +%s)
prc=$(cat "$TMP/_prc")
if [ "$prc" = 1 ] && grep -q "writing to stdout failed: Broken pipe; stopping" "$TMP/_perr" &&
    ! grep -q "^decode:" "$TMP/_perr" && [ $((t1 - t0)) -lt 20 ]; then
    ok closed_pipe_stops_run
else bad closed_pipe_stops_run "exit $prc after $((t1 - t0)) s: $(cat "$TMP/_perr")"; fi

# ---- run -f reads the file's bytes as tokenize -f does: a NUL byte is text, not the end of the prompt
printf 'The capital\0 of France' >"$TMP/_nul.txt"
want=$("$MINFER" tokenize -m "$M" -f "$TMP/_nul.txt" --ids | tr -cd ',' | wc -c)
"$MINFER" run -m "$M" -f "$TMP/_nul.txt" -n 0 2>"$TMP/_err" >/dev/null
grep -q "^prefill: $((want + 1)) tokens" "$TMP/_err" && ok run_file_keeps_nul ||
    bad run_file_keeps_nul "tokenize has $((want + 1)) tokens; run: $(cat "$TMP/_err")"
expect run_file_nul_chat 2 "holds a NUL byte at offset 11; --chat renders the text" -- \
    "$MINFER" run -m "$M" -f "$TMP/_nul.txt" --chat -n 0
rm -f "$TMP/_nul.txt"

# ---- non-finite logits: a model with a NaN in its LM head is refused, naming the position and the id
N="$TMP/cli-strict-nan.gguf"
poison_lm_head "$M" "$N" 1000 0x7E00
out=$("$MINFER" run -m "$N" --tokens "$T" -n 4 2>"$TMP/_err"); rc=$?
if [ "$rc" -eq 1 ] && [ -z "$out" ] &&
    grep -q "the logits at position 4 (sequence 0, batch row 4) are not finite (nan at vocab id 1000)" "$TMP/_err"; then
    ok run_nan_logits_refused
else bad run_nan_logits_refused "exit $rc, stdout '$out': $(cat "$TMP/_err")"; fi
"$MINFER" eval -m "$N" --tokens "[785, 6722, 315]" >"$TMP/_eval" 2>"$TMP/_err"; rc=$?
msg=$(python3 -c '
import json, sys
for line in open(sys.argv[1]): json.loads(line)
' "$TMP/_eval" 2>&1)
if [ "$rc" -eq 1 ] && [ -z "$msg" ] && ! grep -qi nan "$TMP/_eval" &&
    grep -q "the logits at position 0 (sequence 0, batch row 0) are not finite (nan at vocab id 1000)" "$TMP/_err"; then
    ok eval_nan_logits_refused_stdout_json
else bad eval_nan_logits_refused_stdout_json "exit $rc, json: $msg, stderr: $(cat "$TMP/_err")"; fi
expect bench_nan_logits_refused 1 "are not finite (nan at vocab id 1000)" -- "$MINFER" bench -m "$N" -p 8 -n 0 -r 1
# an infinite scale on row 2000 instead: inf logits (the first one of that row, whose first quant is not 0)
poison_lm_head "$M" "$N" 2000 0x7C00
expect eval_inf_logits_refused 1 "the logits at position 0 (sequence 0, batch row 0) are not finite (inf at vocab id 2000)" -- \
    "$MINFER" eval -m "$N" --tokens "[785, 6722, 315]"
rm -f "$N"
# the clean model's eval output is JSON, line by line
"$MINFER" eval -m "$M" --tokens "[785, 6722, 315]" >"$TMP/_eval" 2>/dev/null
msg=$(python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 3 and all(len(l["top"]) == 5 for l in lines), lines
' "$TMP/_eval" 2>&1)
[ -z "$msg" ] && ok eval_stdout_is_json || bad eval_stdout_is_json "$msg"
rm -f "$TMP/_eval"

# ---- chat: a thinking switch the template does not have, an empty template name
NT="$TMP/cli-strict-notemplate.gguf"
LC_ALL=C sed 's/tokenizer\.chat_template/tokenizer.chat_templatX/' "$M" >"$NT"
expect think_on_chatml 1 "--think on given but the chat template 'chatml' has no thinking switch (only qwen3 has; omit --think)" -- \
    "$MINFER" run -m "$NT" --chat --chat-template chatml --think on -p hi -n 1
expect think_off_qwen25 1 "--think off given but the chat template 'qwen2.5' has no thinking switch" -- \
    "$MINFER" run -m "$NT" --chat --chat-template qwen2.5 --think off -p hi -n 1
rm -f "$NT"
expect think_qwen3_accepted 0 "" -- "$MINFER" run -m "$M" --chat --think on -p hi -n 1
expect chat_template_empty 2 "--chat-template needs a name (auto, chatml, qwen2.5, qwen3), got ''" -- \
    "$MINFER" run -m "$M" --chat --chat-template '' -p hi -n 1

# ---- --tokens is JSON: an array of plain integers in [0, 2147483647]
expect tokens_plus 2 "got '[+1]' (not valid JSON at byte 1)" -- "$MINFER" run -m "$M" --tokens '[+1]'
expect tokens_leading_zero 2 "--tokens element 0 is '01'; token ids are plain decimal integers" -- \
    "$MINFER" run -m "$M" --tokens '[01]'
expect tokens_fraction 2 "--tokens element 1 is '2.0'" -- "$MINFER" run -m "$M" --tokens '[1, 2.0]'
expect tokens_exponent 2 "--tokens element 0 is '1e2'" -- "$MINFER" run -m "$M" --tokens '[1e2]'
expect tokens_negative 2 "--tokens element 0 is '-1'" -- "$MINFER" run -m "$M" --tokens '[-1]'
expect tokens_too_big 2 "--tokens element 2 is 2147483648, outside the token id range [0, 2147483647]" -- \
    "$MINFER" run -m "$M" --tokens '[1, 2, 2147483648]'
expect tokens_huge 2 "--tokens element 0 is 99999999999999999999, outside the token id range" -- \
    "$MINFER" eval -m "$M" --tokens '[99999999999999999999]'
expect tokens_trailing_comma 2 "not valid JSON" -- "$MINFER" run -m "$M" --tokens '[1,]'
expect tokens_trailing_text 2 "not valid JSON" -- "$MINFER" run -m "$M" --tokens '[1] x'
expect tokens_control_byte 2 "not valid JSON at byte 3" -- "$MINFER" run -m "$M" --tokens $'[1]\x01'
expect tokens_nested 2 "--tokens element 0 is not a number" -- "$MINFER" run -m "$M" --tokens '[[1]]'
expect tokens_string 2 "--tokens element 1 is not a number" -- "$MINFER" run -m "$M" --tokens '[1, "2"]'
expect tokens_object 2 "expects a JSON array of token ids" -- "$MINFER" run -m "$M" --tokens '{"a": 1}'
a=$("$MINFER" run -m "$M" --tokens $' \n[ 785 ,6722,\t315 ] \r\n' -n 2 --temp 0 --ids 2>/dev/null)
b=$("$MINFER" run -m "$M" --tokens '[785, 6722, 315]' -n 2 --temp 0 --ids 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] && ok tokens_json_whitespace || bad tokens_json_whitespace "'$a' vs '$b'"

# ---- the context message says what is missing and the fix
expect context_one_token 1 "the prompt has 1 token and the context holds 1: it must hold the prompt plus at least one generated token (raise -c/--ctx-size to at least 2" -- \
    "$MINFER" run -m "$M" --tokens '[785]' -c 1

# ---- the reference design's forms: minfer MODEL.gguf "prompt", --n-ctx
a=$("$MINFER" "$M" "The capital of France is" -n 3 --temp 0 --ids 2>/dev/null)
b=$("$MINFER" run -m "$M" -p "The capital of France is" -n 3 --temp 0 --ids 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] && ok short_form_equals_run || bad short_form_equals_run "'$a' vs '$b'"
a=$("$MINFER" --backend cpu "$M" --tokens "$T" -n 2 --temp 0 --ids 2>/dev/null)
b=$("$MINFER" run -m "$M" --tokens "$T" -n 2 --temp 0 --ids 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] && ok short_form_without_prompt_takes_options || bad short_form_without_prompt_takes_options "'$a' vs '$b'"
expect short_form_missing_file 1 "cannot open '$TMP/nope.gguf'" -- "$MINFER" "$TMP/nope.gguf" hi
expect n_ctx_is_c 1 "the prompt has 5 tokens and the context holds 4" -- "$MINFER" run -m "$M" --tokens "$T" --n-ctx 4
expect eval_n_ctx 1 "3 tokens do not fit a context of 2" -- "$MINFER" eval -m "$M" --tokens '[1, 2, 3]' --n-ctx 2
expect viz_n_ctx 2 "--tokens 8 does not fit a context of 4" -- "$MINFER" viz -m "$M" --tokens 8 --n-ctx 4
help_ok=1
"$MINFER" --help >"$TMP/_h" || help_ok=0
grep -q "MODEL.gguf \[PROMPT\]" "$TMP/_h" && grep -q -- "--n-ctx" "$TMP/_h" || help_ok=0
for c in run eval viz; do "$MINFER" "$c" --help | grep -q -- "--n-ctx" || { help_ok=0; echo "$c --help lacks --n-ctx"; }; done
grep -q "minfer MODEL.gguf" README.md && grep -q -- "--n-ctx" README.md || { help_ok=0; echo "README lacks the short form"; }
[ $help_ok -eq 1 ] && ok help_documents_short_form_and_n_ctx || bad help_documents_short_form_and_n_ctx "$(cat "$TMP/_h")"

rm -f "$M" "$TMP/_h" "$TMP/_err" "$TMP/_perr" "$TMP/_prc"
finish
