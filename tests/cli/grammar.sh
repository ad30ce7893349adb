#!/usr/bin/env bash
# minfer run / chat under a grammar (docs/GRAMMAR.md): the output of a random model is a sentence of the
# GBNF or JSON Schema given, greedy and sampled, read from the command line or a file; every bad grammar,
# schema or combination is refused with exit 2 or 1 naming it, never run unconstrained.
cd "$(dirname "$0")/../.." || exit 1
source tests/cli/lib.bash

M="$TMP/cli-grammar-qwen3.gguf"
if ! "$GEN" --arch qwen3 --preset tiny --type q8_0 --seed 4 -q -o "$M"; then
    bad genmodel "mf-genmodel failed"
    finish
    exit 1
fi

# run_out NAME ARGS...: stdout of a run (the generated text), "" on failure
run_out() { "$MINFER" run -m "$M" -p 'Answer:' -n 120 "$@" 2>"$TMP/_grammar_err"; }

# A GBNF grammar: greedy and sampled outputs are four-digit years.
for args in "--temp 0" "--temp 1 --seed 3" "--temp 1 --seed 9 --top-k 0"; do
    # shellcheck disable=SC2086
    out=$(run_out --grammar 'root ::= [12] [0-9]{3}' $args)
    if [[ "$out" =~ ^[12][0-9]{3}$ ]]; then ok "gbnf year ($args)"; else bad "gbnf year ($args)" "'$out' $(cat "$TMP/_grammar_err")"; fi
done

# A JSON Schema from a file: the output parses and has the required members with their types.
cat >"$TMP/grammar-schema.json" <<'EOF'
{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"},
 "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}}, "required": ["name", "age"],
 "additionalProperties": false}
EOF
for args in "--temp 0" "--temp 0.9 --seed 5"; do
    # shellcheck disable=SC2086
    out=$(run_out -jf "$TMP/grammar-schema.json" $args)
    if python3 -c '
import json, sys
v = json.loads(sys.argv[1])
assert set(v) - {"tags"} == {"name", "age"} and isinstance(v["name"], str) and len(v["name"]) <= 12
assert isinstance(v["age"], int) and all(t in ("a", "b") for t in v.get("tags", []))
' "$out" 2>/dev/null; then ok "json schema file ($args)"; else bad "json schema file ($args)" "'$out' $(cat "$TMP/_grammar_err")"; fi
done
out=$(run_out -j '{"enum": ["yes", "no"]}' --temp 0)
if [[ "$out" == '"yes"'* || "$out" == '"no"'* ]]; then ok "json schema enum"; else bad "json schema enum" "'$out'"; fi

# A grammar in a file, with a comment and a rule per line; chat replies are held to it too.
printf 'root ::= "(" digit+ ")"  # a number in parentheses\ndigit ::= [0-9]\n' >"$TMP/grammar.gbnf"
out=$(run_out --grammar-file "$TMP/grammar.gbnf" --temp 0)
if [[ "$out" =~ ^\([0-9]+\)$ || "$out" =~ ^\([0-9]+$ ]]; then ok "gbnf file"; else bad "gbnf file" "'$out'"; fi
out=$(printf 'hello\n' | "$MINFER" chat -m "$M" --think off -n 40 --temp 0 --grammar 'root ::= "ok" [.!]' 2>/dev/null)
if [[ "$out" == *"ok."* || "$out" == *"ok!"* ]]; then ok "chat reply under a grammar"; else bad "chat reply under a grammar" "'$out'"; fi

# Refusals: exit 2 for flags, 1 for a grammar that does not compile (naming where), never unconstrained.
expect gbnf_syntax 1 "--grammar: grammar: line 1, column 10: a literal is not closed" -- \
    "$MINFER" run -m "$M" -p x --grammar 'root ::= "a'
expect gbnf_undefined 1 "rule 'digit' (line 1) is used but never defined" -- \
    "$MINFER" run -m "$M" -p x --grammar 'root ::= digit+'
expect gbnf_left_recursion 1 "rule 'root' can reach itself without consuming a character" -- \
    "$MINFER" run -m "$M" -p x --grammar 'root ::= root "a" | "b"'
expect schema_pattern 1 "JSON schema keyword 'pattern' at #/properties/zip is not supported" -- \
    "$MINFER" run -m "$M" -p x -j '{"type":"object","properties":{"zip":{"type":"string","pattern":"[0-9]{5}"}}}'
expect schema_not_json 1 "not valid JSON" -- "$MINFER" run -m "$M" -p x -j '{"type":'
expect two_constraints 2 "-j and --grammar both constrain the output" -- \
    "$MINFER" run -m "$M" -p x -j '{}' --grammar 'root ::= "a"'
expect grammar_file_missing 1 "cannot open '$TMP/no-such.gbnf'" -- \
    "$MINFER" run -m "$M" -p x --grammar-file "$TMP/no-such.gbnf"
expect grammar_ignore_eos 1 "ignore_eos" -- "$MINFER" run -m "$M" -p x --ignore-eos --grammar 'root ::= "a"'
expect grammar_no_value 2 "" -- "$MINFER" run -m "$M" -p x --grammar
finish
