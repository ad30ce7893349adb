#!/usr/bin/env bash
# Speculative decoding on the command line (run -md, chat -md, run --cnv -md, specverify) with an
# agreeing tiny pair from mf-genmodel --lowrank/--draft: the printed output is byte-identical to the run
# without a draft (greedy, seeded sampling, a stop string), run's summary reports the drafts, specverify
# passes and prints its figures, and bad draft flags are refused naming the value and the way out.
cd "$(dirname "$0")/../.." || exit 1
source tests/cli/lib.bash

T="$TMP/cli-spec-target.gguf" D="$TMP/cli-spec-draft.gguf"
PAIR=(--arch qwen2 --type q8_0 --lowrank 64 --layer-scale 0.06 --seed 7 -q)
if ! "$GEN" "${PAIR[@]}" -o "$T" || ! "$GEN" "${PAIR[@]}" --draft -o "$D"; then
    bad genmodel "mf-genmodel failed"
    finish
    exit 1
fi
O="$TMP/spec"
rm -rf "$O"
mkdir -p "$O"
run() { "$MINFER" run -m "$T" -t 1 -p "The capital of France is" "$@"; }

# greedy, seeded sampling and a stop string: the same bytes with and without the draft (40 tokens; under an
# emulator 20: every token there is two LM heads over the 151936-token vocabulary, target and draft)
N=40
[ "${MF_TEST_EMULATED:-}" = 1 ] && N=20
i=0
for args in "--temp 0 -n $N" "--seed 9 -n $N" "--temp 0 -n $N|--draft-max 4" "--seed 3 -n $N|--draft-max 1"; do
    i=$((i + 1))
    extra=${args#*|} args=${args%%|*}
    [ "$extra" = "$args" ] && extra=""
    # shellcheck disable=SC2086
    run $args >"$O/plain$i" 2>/dev/null
    # shellcheck disable=SC2086
    run $args -md "$D" $extra >"$O/spec$i" 2>"$O/err$i"
    rc=$?
    if [ $rc -eq 0 ] && cmp -s "$O/plain$i" "$O/spec$i" && [ -s "$O/plain$i" ]; then ok "run_md_output_identical_$i"
    else bad "run_md_output_identical_$i" "($args) exit $rc: $(cat "$O/err$i")"; fi
done
drafted=$(sed -n 's/.*drafted \([0-9]*\), accepted \([0-9]*\) (.*/\1/p' "$O/err1")
accepted=$(sed -n 's/.*drafted \([0-9]*\), accepted \([0-9]*\) (.*/\2/p' "$O/err1")
if [ -n "$drafted" ] && [ "$drafted" -gt 0 ] && [ "$accepted" -gt 0 ] && grep -q '^decode: .* %)$' "$O/err1"; then
    ok run_md_summary_counts_drafts
else bad run_md_summary_counts_drafts "$(cat "$O/err1")"; fi
# a stop string inside the output (its third to fifth bytes' word): cut at the same place
stop=$(head -c 12 "$O/plain1" | tail -c 4)
run --temp 0 -n $N --stop "$stop" >"$O/ps" 2>/dev/null
run --temp 0 -n $N --stop "$stop" -md "$D" >"$O/ss" 2>"$O/es"
if cmp -s "$O/ps" "$O/ss" && grep -q 'stop: stop' "$O/es"; then ok run_md_stop_string_identical
else bad run_md_stop_string_identical "stop '$stop': $(cat "$O/es")"; fi

# chat and run --cnv: the same replies
printf 'Hello there\nHow are you?\n' | "$MINFER" chat -m "$T" -t 1 -n 24 --temp 0 >"$O/c0" 2>/dev/null
printf 'Hello there\nHow are you?\n' | "$MINFER" chat -m "$T" -t 1 -n 24 --temp 0 -md "$D" --verbose >"$O/c1" 2>"$O/ce"
printf 'Hello there\nHow are you?\n' | "$MINFER" run --cnv -m "$T" -t 1 -n 24 --temp 0 -md "$D" >"$O/c2" 2>/dev/null
if [ -s "$O/c0" ] && cmp -s "$O/c0" "$O/c1" && cmp -s "$O/c0" "$O/c2" && grep -q '^turn 2: .*drafted [1-9]' "$O/ce"; then
    ok chat_md_replies_identical
else bad chat_md_replies_identical "$(cat "$O/ce")"; fi

# specverify: identical, with both speeds and the acceptance rate
"$MINFER" specverify -m "$T" -md "$D" -p "The capital of France is" -n 32 -t 1 >"$O/sv" 2>"$O/sve"
rc=$?
if [ $rc -eq 0 ] && grep -q '^specverify: identical: 32 generated tokens' "$O/sv" && grep -q '^plain: .* tok/s' "$O/sv" &&
    grep -q '^speculative: .* tok/s .*acceptance 0\.[0-9]*' "$O/sv"; then ok specverify_identical
else bad specverify_identical "exit $rc: $(cat "$O/sv" "$O/sve")"; fi
# the target as its own draft: every draft accepted
"$MINFER" specverify -m "$T" -md "$T" -p "The capital of France is" -n 16 -t 1 >"$O/sv2" 2>&1
grep -q 'acceptance 1.000' "$O/sv2" && ok specverify_self_draft_accepts_all || bad specverify_self_draft_accepts_all "$(cat "$O/sv2")"

# refusals: each names the value and the way out, exit 2 (1 for a file that cannot be loaded)
expect bad_draft_max_0 2 "--draft-max" -- run -md "$D" --draft-max 0
expect bad_draft_max_big 2 "--draft-max" -- run -md "$D" --draft-max 300
expect bad_draft_p_min 2 "--draft-p-min must be in 0..1, got 1.5" -- run -md "$D" --draft-p-min 1.5
expect bad_draft_min_over_max 2 "--draft-min 5 is above --draft-max 2" -- run -md "$D" --draft-max 2 --draft-min 5
expect draft_flag_without_md 2 "need a draft model: add -md/--model-draft" -- run --draft-max 4
expect chat_draft_flag_without_md 2 "need a draft model" -- "$MINFER" chat -m "$T" --draft-p-min 0.5
expect draft_md_twice 2 "-md/--model-draft" -- run -md "$D" --model-draft "$D"
expect draft_missing_file 1 "$O/none.gguf" -- run -md "$O/none.gguf"
expect specverify_needs_md 2 "specverify needs both models" -- "$MINFER" specverify -m "$T" -p hi
expect specverify_unknown_flag 2 "unknown flag '--bogus'" -- "$MINFER" specverify -m "$T" -md "$D" -p hi --bogus
finish
