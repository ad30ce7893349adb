#!/usr/bin/env bash
# mf-genmodel: tiny qwen2/qwen3 files, byte-identical for a seed, different for another seed, refusals
# naming the bad value and the allowed set.  Runs from the repo root; the tokenizer is the repository's tokenizers/qwen3.
cd "$(dirname "$0")/../.."
source tests/cli/lib.bash
D="$TMP/genmodel"
mkdir -p "$D"
rm -f "$D"/*.gguf

gen_ok() { # name file args...
    local name=$1 f=$2; shift 2
    if "$GEN" -q "$@" -o "$f" 2>"$D/err" && [ -s "$f" ]; then ok "$name"; else bad "$name" "exit $?: $(cat "$D/err")"; fi
}

gen_ok "tiny qwen2 q4_0" "$D/a.gguf" --arch qwen2 --type q4_0 --seed 7
gen_ok "tiny qwen2 q4_0 again" "$D/b.gguf" --arch qwen2 --type q4_0 --seed 7
gen_ok "tiny qwen2 q4_0 seed 8" "$D/c.gguf" --arch qwen2 --type q4_0 --seed 8
gen_ok "tiny qwen3 q8_0" "$D/q3.gguf" --arch qwen3 --type q8_0
gen_ok "tiny qwen3 q4_k_m 1 layer tied" "$D/q3k.gguf" --arch qwen3 --type q4_k_m --layers 1 --tied --ctx 512

if cmp -s "$D/a.gguf" "$D/b.gguf"; then ok "same seed gives identical bytes"; else bad "same seed" "a.gguf and b.gguf differ"; fi
if ! cmp -s "$D/a.gguf" "$D/c.gguf"; then ok "another seed differs"; else bad "another seed" "seed 7 and 8 gave the same file"; fi
sz_a=$(stat -c %s "$D/a.gguf"); sz_c=$(stat -c %s "$D/c.gguf")
if [ "$sz_a" = "$sz_c" ]; then ok "seed changes values, not layout"; else bad "layout" "sizes $sz_a vs $sz_c"; fi

expect "refuses --arch llama" 2 "unknown --arch 'llama'; allowed: qwen2|qwen3" -- "$GEN" --arch llama -o "$D/x.gguf"
expect "refuses --type iq1_s" 2 "unknown --type 'iq1_s'; allowed: f32|f16|bf16|q8_0" -- "$GEN" --arch qwen2 --type iq1_s -o "$D/x.gguf"
expect "refuses --preset huge" 2 "unknown --preset 'huge'; allowed: tiny|qwen2.5-0.5b|qwen3-0.6b" -- "$GEN" --arch qwen3 --preset huge -o "$D/x.gguf"
expect "refuses --seed -1" 2 "--seed '-1' is not an unsigned decimal integer" -- "$GEN" --arch qwen3 --seed -1 -o "$D/x.gguf"
expect "refuses --llama-quantize for iq2_xs (imatrix)" 2 "--llama-quantize does not reproduce --type 'iq2_xs'; allowed: f16|" -- \
    "$GEN" --arch qwen3 --type iq2_xs --llama-quantize -o "$D/x.gguf"
expect "refuses --layers 0" 2 "--layers '0' is not in 1..512" -- "$GEN" --arch qwen3 --layers 0 -o "$D/x.gguf"
expect "refuses missing -o" 2 "-o OUT.gguf is required" -- "$GEN" --arch qwen3
expect "refuses missing --arch" 2 "--arch is required" -- "$GEN" -o "$D/x.gguf"
expect "refuses qwen2 with qwen3-0.6b shape" 2 "qwen2 needs n_head*head_dim == n_embd" -- \
    "$GEN" --arch qwen2 --preset qwen3-0.6b -o "$D/x.gguf"
expect "missing tokenizer dir" 1 "cannot open tokenizer file '$D/none/tokenizer.json'" -- \
    "$GEN" --arch qwen3 --tokenizer "$D/none" -o "$D/x.gguf"
if [ ! -e "$D/x.gguf" ]; then ok "refusals leave no file"; else bad "refusals leave no file" "$D/x.gguf exists"; fi
expect "--help documents every flag" 0 "" -- "$GEN" --help
help=$("$GEN" --help)
miss=""
for f in --arch --preset --type --seed --tied --untied --tokenizer --tensor-type --llama-quantize --layers --ctx -o q3_k_m; do
    [[ "$help" == *"$f"* ]] || miss="$miss $f"
done
if [ -z "$miss" ]; then ok "help lists flags"; else bad "help lists flags" "missing:$miss"; fi

# minfer info reads what the generator wrote (a failing info is a failure, not a skip)
if "$MINFER" info -m "$D/a.gguf" >"$D/info.txt" 2>&1; then
    if grep -Eq 'general.architecture +string +"qwen2"' "$D/info.txt" && grep -Eq '^tensors: +27$' "$D/info.txt"; then
        ok "minfer info: qwen2, 27 tensors"
    else bad "minfer info qwen2" "$(head -c 600 "$D/info.txt")"; fi
    "$MINFER" info -m "$D/q3.gguf" >"$D/info3.txt" 2>&1
    if grep -Eq 'general.architecture +string +"qwen3"' "$D/info3.txt" && grep -Eq '^tensors: +25$' "$D/info3.txt" &&
        grep -Eq 'tokenizer.ggml.tokens +array +\[string x 151936\]' "$D/info3.txt"; then
        ok "minfer info: qwen3, 25 tensors, 151936 tokens"
    else bad "minfer info qwen3" "$(head -c 600 "$D/info3.txt")"; fi
    "$MINFER" info -m "$D/q3k.gguf" >"$D/info3k.txt" 2>&1
    # 1 layer tied: token_embd + 11 per qwen3 layer + output_norm, no output.weight
    if grep -Eq '^tensors: +13$' "$D/info3k.txt" && ! grep -Eq ' output\.weight' "$D/info3k.txt" &&
        grep -Eq 'context_length +u32 +512' "$D/info3k.txt"; then
        ok "minfer info: --layers/--tied/--ctx honoured"
    else bad "minfer info q4_k_m" "$(head -c 600 "$D/info3k.txt")"; fi
else
    bad "minfer info reads the generated file" "exit $?: $(head -c 600 "$D/info.txt")"
fi

rm -f "$D"/*.gguf
finish
