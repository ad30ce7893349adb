#!/usr/bin/env bash
# minfer tokenize: --ids output against the HF/llama.cpp goldens (tests/golden/tok/tokenize.json) and fixed
# HF ids for invalid UTF-8, -p and
# -f (bytes exact, trailing newlines kept), --no-special, the per-token listing, and the refusals.
source "$(dirname "$0")/lib.bash"

MODEL="$TMP/tok.gguf"
if [ ! -f "$MODEL" ]; then
    "$GEN" --arch qwen3 --preset tiny --type q8_0 -o "$MODEL.tmp.$$" >/dev/null && mv "$MODEL.tmp.$$" "$MODEL"
fi
[ -f "$MODEL" ] || { bad "model" "mf-genmodel did not write $MODEL"; finish; exit 1; }

# ids NAME WANT -- args...: stdout must be exactly WANT (one line) and the exit status 0
ids() {
    local name=$1 want=$2; shift 3
    local out rc
    out=$("$MINFER" tokenize -m "$MODEL" --ids "$@" 2>"$TMP/_err"); rc=$?
    if [ "$rc" -ne 0 ]; then bad "$name" "exit $rc: $(cat "$TMP/_err")"; return; fi
    if [ "$out" != "$want" ]; then bad "$name" "got '$out', wanted '$want'"; return; fi
    ok "$name"
}

# from the goldens (HF == llama.cpp for each of these)
ids hello      '[9707, 11, 1879, 0]' -- -p 'Hello, world!'
ids contraction '[40, 6, 4086, 19677, 6, 4086]' -- -p "I'LL WE'LL"
ids cjk        '[108386, 3837, 99489, 6313]' -- -p '你好，世界！'
ids zwj        '[145367, 378, 235, 145233, 378, 235, 145665, 378, 235, 145988]' -- -p '👨‍👩‍👧‍👦'
ids newlines   '[64, 1406, 65]' -- -p $'a\n\n\nb'
ids tabs       '[571]' -- -p $'\t\t\t'
ids leading    '[220, 6388]' -- -p '  leading'
ids chat       '[151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198]' -- \
    -p $'<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n'
ids chat-plain '[27, 91, 318, 4906, 91, 29, 872, 198, 9707, 27, 91, 318, 6213, 91, 397, 27, 91, 318, 4906, 91, 29, 77091, 198]' -- \
    -p $'<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n' --no-special

# -f: the file's bytes exactly, trailing newlines included
printf 'trailing newlines\n\n' >"$TMP/tok_trailing.txt"
ids file-trailing '[376, 14277, 501, 7969, 271]' -- -f "$TMP/tok_trailing.txt"
printf 'Hello, world!' >"$TMP/tok_plain.txt"
ids file-plain '[9707, 11, 1879, 0]' -- -f "$TMP/tok_plain.txt"
: >"$TMP/tok_empty.txt"
ids file-empty '[]' -- -f "$TMP/tok_empty.txt"

# invalid UTF-8 in a file: each maximal ill-formed subpart is one U+FFFD (Unicode's "best practice", what
# Python's bytes.decode('utf-8', 'replace') and TextDecoder do); the ids are the HF tokenizer's for that
# text: byte-level BPE of the pre-tokenizer's pieces over tokenizers/qwen3's merges, fixed here (U+FFFD
# alone is 5691 as in the golden "\ufffd replacement", two of them 9973, three 57332).
bad_utf8() { # NAME BYTES WANT
    printf "$2" >"$TMP/tok_bad.txt"
    ids "$1" "$3" -- -f "$TMP/tok_bad.txt"
}
bad_utf8 invalid-utf8        'a\xff\xfeb'     '[64, 9973, 65]'   # two lone bytes: 'a' + 2 x U+FFFD + 'b'
bad_utf8 invalid-truncated   'x\xe4\xbd'      '[87, 5691]'       # a cut 3-byte sequence is ONE U+FFFD
bad_utf8 invalid-overlong    '\xc0\xafz'      '[9973, 89]'       # C0 never starts a sequence: 2 x U+FFFD
bad_utf8 invalid-surrogate   '\xed\xa0\x80!' '[57332, 0]'       # ED A0 80 (a surrogate): 3 x U+FFFD
bad_utf8 invalid-cut-emoji   ' \xf0\x9f\x98' '[29333]'          # ' ' + one U+FFFD, one piece
bad_utf8 invalid-after-cjk   '\xe4\xbd\xa0\xe5' '[56568, 5691]'   # '你' + a cut lead byte

# the listing: one line per token, id then the quoted piece, control characters escaped
out=$("$MINFER" tokenize -m "$MODEL" -p $'Hi\tthere\n' 2>&1)
lines=$(printf '%s\n' "$out" | wc -l)
n_ids=$("$MINFER" tokenize -m "$MODEL" --ids -p $'Hi\tthere\n' | tr -cd ',' | wc -c)
if [ "$lines" -eq $((n_ids + 1)) ] && [[ "$out" == *'"\n"'* ]] && [[ "$out" == *'"Hi"'* ]] && [[ "$out" == *'\t'* ]]; then
    ok listing
else
    bad listing "$out"
fi

# --help documents every flag
help=$("$MINFER" tokenize --help); rc=$?
missing=""
for f in -m --model -p --prompt -f --file --ids --no-special --help; do
    [[ "$help" == *"$f"* ]] || missing="$missing $f"
done
if [ "$rc" -eq 0 ] && [ -z "$missing" ]; then ok help; else bad help "rc $rc, missing:$missing"; fi

# refusals
expect no-model      2 "-m MODEL is required" -- "$MINFER" tokenize -p hi
expect no-text       2 "exactly one of -p TEXT or -f FILE" -- "$MINFER" tokenize -m "$MODEL"
expect both-texts    2 "exactly one of -p TEXT or -f FILE" -- "$MINFER" tokenize -m "$MODEL" -p a -f "$TMP/tok_plain.txt"
expect missing-model 1 "$TMP/does-not-exist.gguf" -- "$MINFER" tokenize -m "$TMP/does-not-exist.gguf" -p hi
expect missing-file  1 "does-not-exist.txt" -- "$MINFER" tokenize -m "$MODEL" -f "$TMP/does-not-exist.txt"
expect no-value      2 "-p needs a value" -- "$MINFER" tokenize -m "$MODEL" -p
expect unknown-flag  2 "unknown option '--bogus'" -- "$MINFER" tokenize -m "$MODEL" -p hi --bogus
finish
