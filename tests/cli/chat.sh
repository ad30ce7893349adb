#!/usr/bin/env bash
# minfer chat (and run --cnv, run --stop) end to end over pipes on a generated tiny model: each turn
# prefills only what it adds, the context shift drops whole old turns with a note, --session resumes
# bitwise with nothing prefilled (and a file that does not fit is re-rendered from its text), Ctrl-C
# stops the reply and not the chat, end of input exits 0.
cd "$(dirname "$0")/../.." || exit 1
source tests/cli/lib.bash

M="$TMP/cli-chat-q8_0.gguf"
if ! "$GEN" --arch qwen2 --preset tiny --type q8_0 --seed 1 --untied -q -o "$M"; then
    bad genmodel "mf-genmodel failed"
    finish
    exit 1
fi
O="$TMP/chat"
rm -rf "$O"
mkdir -p "$O"
chat() { "$MINFER" chat -m "$M" -t 1 -n 8 --verbose "$@"; }
field() { sed -n "s/^turn $1: .*$2 \([0-9]*\).*/\1/p" "$O/err"; } # field TURN WORD: the number after WORD

# two turns over a pipe: two stats lines, exit 0 at end of input; turn 2 reuses all of turn 1 (its
# prompt and reply) and prefills only its own tokens
printf 'Hello there\nHow are you?\n' | chat --system "Be brief." >"$O/out" 2>"$O/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c '^turn [12]: prefilled' "$O/err")" -eq 2 ]; then ok chat_pipe_two_turns
else bad chat_pipe_two_turns "exit $rc: $(cat "$O/err")"; fi
p1=$(field 1 prefilled) g1=$(field 1 generated) r2=$(field 2 reused) p2=$(field 2 prefilled)
if [ -n "$p1" ] && [ "$r2" = $((p1 + g1)) ] && [ "$p2" -gt 0 ] && [ "$p2" -lt "$p1" ] && ! grep -q 're-rendered' "$O/err"; then
    ok chat_turn_prefills_only_new_tokens
else bad chat_turn_prefills_only_new_tokens "turn 1 prefilled $p1 generated $g1; turn 2 reused $r2 prefilled $p2"; fi
# the same chat through run --cnv
printf 'Hello there\nHow are you?\n' | "$MINFER" run --cnv -m "$M" -t 1 -n 8 --verbose --system "Be brief." >"$O/out2" 2>/dev/null
cmp -s "$O/out" "$O/out2" && ok run_cnv_is_chat || bad run_cnv_is_chat "run --cnv printed other bytes"
# empty lines are no turns; an empty input is a clean exit
printf '\n\n' | chat >"$O/out3" 2>"$O/err"
[ $? -eq 0 ] && [ ! -s "$O/out3" ] && ! grep -q '^turn' "$O/err" && ok chat_empty_input || bad chat_empty_input "$(cat "$O/err")"

# context shift: -c 64 holds about two turns; later turns drop the oldest whole turns, one note each
printf 'Hello there\nHow are you?\nThird one here\nFourth message\nFifth\n' | chat --system "Be brief." -c 64 \
    >"$O/out" 2>"$O/err"
rc=$?
notes=$(grep -c '^note: the context (64 tokens) is full: dropped the oldest [0-9]* turns\? ([0-9]* tokens)$' "$O/err")
turns=$(grep -c '^turn [1-5]: prefilled' "$O/err")
if [ $rc -eq 0 ] && [ "$turns" -eq 5 ] && [ "$notes" -ge 2 ] && [ "$(wc -l <"$O/err")" -eq $((turns + notes)) ]; then
    ok chat_context_shift_drops_old_turns
else bad chat_context_shift_drops_old_turns "exit $rc, $turns turns, $notes notes: $(cat "$O/err")"; fi
# after a shift the turn still reuses the kept turns (prefill stays the new tokens only)
r5=$(field 5 reused) p5=$(field 5 prefilled)
if [ -n "$r5" ] && [ "$r5" -gt 0 ] && [ "$p5" -lt 20 ]; then ok chat_shift_keeps_the_cache
else bad chat_shift_keeps_the_cache "turn 5 reused $r5, prefilled $p5"; fi
# a message that cannot fit even alone is refused, the chat goes on
long=$(printf 'word %.0s' $(seq 1 80))
printf '%s\nshort\n' "$long" | chat -c 64 >"$O/out" 2>"$O/err"
if [ $? -eq 0 ] && grep -q "^Error: the message needs [0-9]* tokens .* do not fit the context of 64 (raise -c/--ctx-size" "$O/err" &&
    grep -q '^turn 1: prefilled' "$O/err"; then ok chat_too_long_message_refused
else bad chat_too_long_message_refused "$(cat "$O/err")"; fi

# --session: turn 1, stop, resume for turns 2-3 == one uninterrupted 3-turn chat (sampled, seed 5),
# and the resumed run prefills nothing before its first turn and the same tokens in it
S="$O/s.session"
printf 'Hello there\nHow are you?\nThird one\n' | chat --seed 5 --system "Be brief." >"$O/full" 2>"$O/err_full"
printf 'Hello there\n' | chat --seed 5 --system "Be brief." --session "$S" >"$O/p1" 2>"$O/err"
grep -q "^session: '$S' does not exist yet" "$O/err" && [ -s "$S" ] && ok session_created || bad session_created "$(cat "$O/err")"
printf 'How are you?\nThird one\n' | chat --seed 99 --session "$S" >"$O/p2" 2>"$O/err"
if cat "$O/p1" "$O/p2" | cmp -s - "$O/full"; then ok session_resume_continues_bitwise
else bad session_resume_continues_bitwise "split run printed other bytes than the uninterrupted one"; fi
if grep -q "^session: resumed 1 turn from '$S' ([0-9]* tokens cached, 0 prefilled)" "$O/err" &&
    [ "$(grep '^turn 2' "$O/err")" = "$(grep '^turn 2' "$O/err_full")" ]; then ok session_resume_prefills_nothing_more
else bad session_resume_prefills_nothing_more "$(cat "$O/err") vs $(cat "$O/err_full")"; fi
# a file for a larger context: refused into the cache with the reason, re-rendered from its text
printf 'Fourth\n' | chat --session "$S" -c 40 >"$O/out" 2>"$O/err"
if [ $? -eq 0 ] && grep -q "^note: the session '$S' does not fit this run (.*-c 40.*); its conversation (3 turns) is re-rendered" "$O/err" &&
    grep -q '^turn 4: prefilled' "$O/err"; then ok session_mismatch_rerendered
else bad session_mismatch_rerendered "$(cat "$O/err")"; fi
# a file written with another KV element type: the same, the reason names the types
printf 'Fourth\n' | chat --session "$S" --cache-type f32 >"$O/out" 2>"$O/err"
if [ $? -eq 0 ] && grep -q "^note: the session '$S' does not fit this run (.*f16.*f32.*); its conversation" "$O/err"; then
    ok session_other_kv_type_rerendered
else bad session_other_kv_type_rerendered "$(cat "$O/err")"; fi
expect chat_bad_cache_type 2 "is not a KV cache type (f32, f16, q8_0)" -- "$MINFER" chat -m "$M" --cache-type q4
# a damaged file is refused naming it, and left as it was
head -c 300 "$S" >"$O/bad.session"
cp "$O/bad.session" "$O/bad.copy"
printf 'Hi\n' | chat --session "$O/bad.session" >"$O/out" 2>"$O/err"
if [ $? -eq 1 ] && grep -q "^Error: .*bad.session" "$O/err" && cmp -s "$O/bad.session" "$O/bad.copy"; then ok session_damaged_refused
else bad session_damaged_refused "$(cat "$O/err")"; fi

# --stop on run: the text ends right before the stop string (taken from the greedy output, so it
# spans whatever tokens it spans), stop reason "stop"
"$MINFER" run -m "$M" -t 1 -p Hello -n 16 --temp 0 >"$O/plain" 2>/dev/null
stop=$(python3 -c 'import sys; t=open(sys.argv[1],"rb").read().decode("utf-8","replace"); print(t[len(t)//2:len(t)//2+3])' "$O/plain")
"$MINFER" run -m "$M" -t 1 -p Hello -n 16 --temp 0 --stop "$stop" --stop "never-there" >"$O/out" 2>"$O/err"
msg=$(python3 - "$O/plain" "$O/out" "$stop" <<'PY'
import sys
plain, out, stop = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read(), sys.argv[3].encode()
want = plain[:plain.index(stop)] + b"\n"
if out != want: print(f"got {out!r}, want {want!r}")
PY
)
if [ -z "$msg" ] && grep -q 'stop: stop$' "$O/err"; then ok run_stop_string
else bad run_stop_string "stop '$stop': $msg $(tail -1 "$O/err")"; fi
expect run_stop_empty_refused 2 "--stop needs a non-empty string" -- "$MINFER" run -m "$M" -p Hi --stop ""

# Ctrl-C: SIGINT during a long reply stops that reply (note on stderr), the chat reads on and exits 0
# at end of input.  The reply is long (-n 100000, -c 8192) so it is still running when the signal lands.
F="$O/fifo"
mkfifo "$F"
"$MINFER" chat -m "$M" -t 1 -n 100000 -c 8192 --verbose <"$F" >"$O/out" 2>"$O/err" &
pid=$!
exec 7>"$F"
echo "Tell me a long story" >&7
for _ in $(seq 1 200); do [ -s "$O/out" ] && break; sleep 0.1; done
kill -INT $pid
for _ in $(seq 1 100); do grep -q 'interrupted' "$O/err" && break; sleep 0.1; done
alive=0
kill -0 $pid 2>/dev/null && alive=1
exec 7>&-
wait $pid
rc=$?
if [ $alive -eq 1 ] && [ $rc -eq 0 ] && grep -q '^note: reply interrupted (Ctrl-C)$' "$O/err" &&
    grep -q '^turn 1: .*stop: abort$' "$O/err"; then ok chat_sigint_stops_the_reply_not_the_chat
else bad chat_sigint_stops_the_reply_not_the_chat "alive $alive, exit $rc: $(cat "$O/err")"; fi

expect chat_no_model 2 "no model given" -- "$MINFER" chat
expect chat_unknown_flag 2 "unknown flag '--bogus' for 'minfer chat'" -- "$MINFER" chat -m "$M" --bogus
expect chat_bad_n 2 "-n" -- "$MINFER" chat -m "$M" -n -2
# --help names every flag the parser takes
help=$("$MINFER" chat --help)
missing=""
for f in -m --model --system --session -ctk --cache-type-k -ctv --cache-type-v --cache-type --chat-template --think -n --n-predict -c --ctx-size --n-ctx -t --threads \
    --temp --top-k --top-p --min-p --typical --repeat-penalty --repeat-last-n --presence-penalty \
    --frequency-penalty --seed -l --logit-bias --stop --verbose -h --help --dry-multiplier --dry-sequence-breaker \
    --top-nsigma --xtc-probability --dynatemp-range --mirostat --mirostat-ent; do
    grep -q -- "$f" <<<"$help" || missing="$missing $f"
done
[ -z "$missing" ] && ok chat_help_documents_every_flag || bad chat_help_documents_every_flag "missing:$missing"
rm -rf "$O"
rm -f "$M"
finish
