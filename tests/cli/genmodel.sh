#!/usr/bin/env bash
# mf-genmodel: tiny qwen2/qwen3/qwen3moe/qwen2moe files, byte-identical for a seed, different for another seed, refusals
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
gen_ok "tiny qwen3moe q4_k, expert ffn 128" "$D/moe.gguf" --arch qwen3moe --type q4_k --expert-ff 128
gen_ok "tiny qwen2moe f32" "$D/q2m32.gguf" --arch qwen2moe --type f32 --layers 1
gen_ok "tiny qwen2moe q8_0" "$D/q2m8.gguf" --arch qwen2moe --type q8_0 --seed 7
gen_ok "tiny qwen2moe q8_0 again" "$D/q2m8b.gguf" --arch qwen2moe --type q8_0 --seed 7
gen_ok "tiny qwen2moe q8_0 seed 8" "$D/q2m8c.gguf" --arch qwen2moe --type q8_0 --seed 8
gen_ok "tiny qwen2moe q4_k, expert ffn 128, shared ffn 384" "$D/q2mk.gguf" --arch qwen2moe --type q4_k --expert-ff 128 \
    --shared-ff 384
# Qwen1.5-MoE-A2.7B's shape (one layer, 4 of its 60 experts: the whole model is ~8 GB in q4_k)
gen_ok "qwen1.5-moe-a2.7b q4_k, 1 layer, 4 experts" "$D/a27.gguf" --arch qwen2moe --preset qwen1.5-moe-a2.7b --layers 1 \
    --experts 4 --type q4_k
# a long-context file's RoPE scaling keys (Qwen3's 128K GGUFs), and linear scaling on qwen3moe
gen_ok "tiny qwen3 yarn scaling" "$D/yarn.gguf" --arch qwen3 --type q8_0 --layers 1 --ctx 131072 \
    --rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 32768
gen_ok "tiny qwen3moe linear scaling" "$D/lin.gguf" --arch qwen3moe --type q4_0 --layers 1 \
    --rope-scaling linear --rope-scale 2.5
gen_ok "tiny qwen2 scaling type none" "$D/none.gguf" --arch qwen2 --type q4_0 --layers 1 --rope-scaling none

if cmp -s "$D/a.gguf" "$D/b.gguf"; then ok "same seed gives identical bytes"; else bad "same seed" "a.gguf and b.gguf differ"; fi
if ! cmp -s "$D/a.gguf" "$D/c.gguf"; then ok "another seed differs"; else bad "another seed" "seed 7 and 8 gave the same file"; fi
sz_a=$(stat -c %s "$D/a.gguf"); sz_c=$(stat -c %s "$D/c.gguf")
if [ "$sz_a" = "$sz_c" ]; then ok "seed changes values, not layout"; else bad "layout" "sizes $sz_a vs $sz_c"; fi
if cmp -s "$D/q2m8.gguf" "$D/q2m8b.gguf"; then ok "qwen2moe: same seed gives identical bytes"; else
    bad "qwen2moe same seed" "q2m8.gguf and q2m8b.gguf differ"; fi
if ! cmp -s "$D/q2m8.gguf" "$D/q2m8c.gguf" && [ "$(stat -c %s "$D/q2m8.gguf")" = "$(stat -c %s "$D/q2m8c.gguf")" ]; then
    ok "qwen2moe: another seed changes values, not layout"
else bad "qwen2moe another seed" "seed 7 and 8 gave the same file, or files of different sizes"; fi
line=$("$GEN" --arch qwen2moe --type q8_0 --layers 1 -o "$D/q2m1.gguf" 2>&1)
if [[ "$line" == "mf-genmodel: wrote $D/q2m1.gguf: qwen2moe tiny, 1 layers, q8_0, 20 tensors, "*"MiB of weights (8 f32, 12 q8_0), seed 1, "* ]]; then
    ok "qwen2moe summary line"
else bad "qwen2moe summary line" "$line"; fi

expect "refuses --arch llama" 2 "unknown --arch 'llama'; allowed: qwen2|qwen3|qwen3moe|qwen2moe" -- "$GEN" --arch llama -o "$D/x.gguf"
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
expect "refuses qwen3moe with a dense preset" 2 \
    "--arch qwen3moe needs a mixture-of-experts preset and 'qwen3-0.6b' is dense: use --preset tiny or qwen3-30b-a3b" -- \
    "$GEN" --arch qwen3moe --preset qwen3-0.6b -o "$D/x.gguf"
expect "refuses the qwen3-30b-a3b preset with qwen3" 2 \
    "--preset 'qwen3-30b-a3b' is a mixture-of-experts model: use it with --arch qwen3moe, not qwen3" -- \
    "$GEN" --arch qwen3 --preset qwen3-30b-a3b -o "$D/x.gguf"
expect "refuses --experts with a dense arch" 2 "--experts shapes a mixture of experts: it needs --arch qwen2moe (qwen2 is dense)" -- \
    "$GEN" --arch qwen2 --experts 4 -o "$D/x.gguf"
expect "refuses --expert-ff with qwen3" 2 "--expert-ff shapes a mixture of experts: it needs --arch qwen3moe (qwen3 is dense)" -- \
    "$GEN" --arch qwen3 --expert-ff 128 -o "$D/x.gguf"
# qwen2moe: its presets and qwen3moe's are refused with the other MoE arch, the dense presets with both
expect "refuses qwen2moe with a dense preset" 2 \
    "--arch qwen2moe needs a mixture-of-experts preset and 'qwen2.5-0.5b' is dense: use --preset tiny, qwen1.5-moe-a2.7b or qwen2-57b-a14b (or --arch qwen2 with 'qwen2.5-0.5b')" -- \
    "$GEN" --arch qwen2moe --preset qwen2.5-0.5b -o "$D/x.gguf"
expect "refuses the qwen3-30b-a3b preset with qwen2moe" 2 \
    "--preset 'qwen3-30b-a3b' is a qwen3moe model (qwen3's attention, no shared expert): use it with --arch qwen3moe, not qwen2moe" -- \
    "$GEN" --arch qwen2moe --preset qwen3-30b-a3b -o "$D/x.gguf"
expect "refuses the qwen1.5-moe-a2.7b preset with qwen3moe" 2 \
    "--preset 'qwen1.5-moe-a2.7b' is a qwen2moe model (qwen2's attention, a shared expert): use it with --arch qwen2moe, not qwen3moe" -- \
    "$GEN" --arch qwen3moe --preset qwen1.5-moe-a2.7b -o "$D/x.gguf"
expect "refuses the qwen2-57b-a14b preset with qwen2" 2 \
    "--preset 'qwen2-57b-a14b' is a mixture-of-experts model: use it with --arch qwen2moe, not qwen2" -- \
    "$GEN" --arch qwen2 --preset qwen2-57b-a14b -o "$D/x.gguf"
expect "refuses --shared-ff with qwen3moe" 2 \
    "--shared-ff shapes qwen2moe's shared expert: it needs --arch qwen2moe (qwen3moe has no shared expert)" -- \
    "$GEN" --arch qwen3moe --shared-ff 256 -o "$D/x.gguf"
expect "refuses --shared-ff with a dense arch" 2 "--shared-ff shapes qwen2moe's shared expert: it needs --arch qwen2moe (qwen2 is dense)" -- \
    "$GEN" --arch qwen2 --shared-ff 256 -o "$D/x.gguf"
for x in 0 100 65568; do
    expect "refuses --shared-ff $x" 2 "--shared-ff '$x' is not a multiple of 32 in 32..65536" -- \
        "$GEN" --arch qwen2moe --shared-ff "$x" -o "$D/x.gguf"
done
expect "refuses --experts-used above --experts for qwen2moe" 2 "--experts-used '3' is not in 1..2 (the expert count)" -- \
    "$GEN" --arch qwen2moe --experts 2 --experts-used 3 -o "$D/x.gguf"
expect "refuses the q3_k_m mix for qwen2moe" 2 "--type q3_k_m (llama.cpp's per-tensor mix) is not supported for --arch qwen2moe: use a single type" -- \
    "$GEN" --arch qwen2moe --type q3_k_m -o "$D/x.gguf"
for o in "--llama-quantize" "--lowrank 64" "--draft" "--script 1,2" "--pooling mean" "--reranker"; do
    expect "refuses ${o%% *} for qwen2moe" 2 "${o%% *} is not supported for --arch qwen2moe (drop it, or use --arch qwen2)" -- \
        "$GEN" --arch qwen2moe --type q4_0 $o -o "$D/x.gguf"
done
expect "refuses --tied for qwen2moe" 2 \
    "--tied is not supported for --arch qwen2moe: llama.cpp's qwen2moe requires a separate output.weight (drop --tied)" -- \
    "$GEN" --arch qwen2moe --tied -o "$D/x.gguf"
expect "refuses --experts-used above --experts" 2 "--experts-used '5' is not in 1..4 (the expert count)" -- \
    "$GEN" --arch qwen3moe --experts 4 --experts-used 5 -o "$D/x.gguf"
expect "refuses --experts below the preset's experts used" 2 \
    "--experts 4 is fewer than the 8 experts per token of preset 'qwen3-30b-a3b': add --experts-used K with K in 1..4" -- \
    "$GEN" --arch qwen3moe --preset qwen3-30b-a3b --experts 4 -o "$D/x.gguf"
expect "refuses --expert-ff 100" 2 "--expert-ff '100' is not a multiple of 32 in 32..65536" -- \
    "$GEN" --arch qwen3moe --expert-ff 100 -o "$D/x.gguf"
expect "refuses the q4_k_m mix for qwen3moe" 2 "--type q4_k_m (llama.cpp's per-tensor mix) is not supported for --arch qwen3moe" -- \
    "$GEN" --arch qwen3moe --type q4_k_m -o "$D/x.gguf"
expect "refuses --llama-quantize for qwen3moe" 2 "--llama-quantize is not supported for --arch qwen3moe" -- \
    "$GEN" --arch qwen3moe --type q4_0 --llama-quantize -o "$D/x.gguf"
expect "refuses --script for qwen3moe" 2 "--script is not supported for --arch qwen3moe" -- \
    "$GEN" --arch qwen3moe --script 1,2 -o "$D/x.gguf"
expect "refuses --rope-scale without --rope-scaling" 2 \
    "--rope-scale needs --rope-scaling: add --rope-scaling yarn (or linear)" -- "$GEN" --arch qwen3 --rope-scale 4 -o "$D/x.gguf"
expect "refuses --yarn-orig-ctx without --rope-scaling" 2 \
    "--yarn-orig-ctx needs --rope-scaling: add --rope-scaling yarn" -- "$GEN" --arch qwen3 --yarn-orig-ctx 32768 -o "$D/x.gguf"
expect "refuses --yarn-orig-ctx with linear scaling" 2 \
    "--yarn-orig-ctx needs --rope-scaling yarn, not 'linear'" -- \
    "$GEN" --arch qwen3 --rope-scaling linear --rope-scale 2 --yarn-orig-ctx 32768 -o "$D/x.gguf"
expect "refuses --rope-scaling ntk" 2 "unknown --rope-scaling 'ntk'; allowed: none|linear|yarn" -- \
    "$GEN" --arch qwen3 --rope-scaling ntk -o "$D/x.gguf"
for x in 0 -4 inf nan 1e39 4x; do
    expect "refuses --rope-scale $x" 2 "--rope-scale '$x' is not a finite number above 0" -- \
        "$GEN" --arch qwen3 --rope-scaling yarn --rope-scale "$x" -o "$D/x.gguf"
done
for x in 0 4294967296; do
    expect "refuses --yarn-orig-ctx $x" 2 "--yarn-orig-ctx '$x' is not in 1..4294967295" -- \
        "$GEN" --arch qwen3 --rope-scaling yarn --yarn-orig-ctx "$x" -o "$D/x.gguf"
done
expect "missing tokenizer dir" 1 "cannot open tokenizer file '$D/none/tokenizer.json'" -- \
    "$GEN" --arch qwen3 --tokenizer "$D/none" -o "$D/x.gguf"
if [ ! -e "$D/x.gguf" ]; then ok "refusals leave no file"; else bad "refusals leave no file" "$D/x.gguf exists"; fi
expect "--help documents every flag" 0 "" -- "$GEN" --help
help=$("$GEN" --help)
miss=""
for f in --arch --preset --type --seed --tied --untied --tokenizer --tensor-type --llama-quantize --layers --ctx -o q3_k_m \
    qwen3moe qwen3-30b-a3b --experts --experts-used --expert-ff --rope-scaling --rope-scale --yarn-orig-ctx \
    qwen2moe --shared-ff qwen1.5-moe-a2.7b qwen2-57b-a14b ffn_gate_inp_shexp; do
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
    "$MINFER" info -m "$D/moe.gguf" >"$D/infomoe.txt" 2>&1
    # token_embd + 12 per qwen3moe layer + output_norm + output; the router f32, the expert stacks 3-D (ffn_down_exps'
    # 128-long rows are no multiple of 256: q4_K falls back to q5_0), no dense ffn
    m="$D/infomoe.txt"
    if grep -Eq 'general.architecture +string +"qwen3moe"' "$m" && grep -Eq '^tensors: +27$' "$m" &&
        grep -Eq 'qwen3moe.expert_count +u32 +8$' "$m" && grep -Eq 'qwen3moe.expert_used_count +u32 +2$' "$m" &&
        grep -Eq 'qwen3moe.expert_feed_forward_length +u32 +128$' "$m" &&
        grep -Eq 'qwen3moe.feed_forward_length +u32 +512$' "$m" && grep -Eq 'qwen3moe.attention.key_length +u32 +64$' "$m" &&
        grep -Eq ' blk\.1\.ffn_gate_inp\.weight +f32 +\[256, 8\] ' "$m" &&
        grep -Eq ' blk\.1\.ffn_gate_exps\.weight +q4_K +\[256, 128, 8\] ' "$m" &&
        grep -Eq ' blk\.1\.ffn_up_exps\.weight +q4_K +\[256, 128, 8\] ' "$m" &&
        grep -Eq ' blk\.1\.ffn_down_exps\.weight +q5_0 +\[128, 256, 8\] ' "$m" &&
        grep -Eq ' blk\.1\.attn_k_norm\.weight +f32 +\[64\] ' "$m" && ! grep -Eq ' blk\.[0-9]+\.ffn_(gate|up|down)\.weight' "$m"; then
        ok "minfer info: qwen3moe keys, router and expert tensors"
    else bad "minfer info qwen3moe" "$(grep -v tokenizer "$m" | head -c 1500)"; fi
    # qwen2moe: qwen2's attention (q/k/v biases, no q/k norms or key_length), qwen3moe's router and expert stacks,
    # then the shared expert: its gate a 1-D f32 vector, gate/up/down in the --type (down_shexp's 384-long rows
    # are no multiple of 256: q4_K falls back to q5_0, as ffn_down_exps' 128-long ones); 3 + 17 per layer
    m="$D/infoq2m.txt"
    "$MINFER" info -m "$D/q2mk.gguf" >"$m" 2>&1
    if grep -Eq 'general.architecture +string +"qwen2moe"' "$m" && grep -Eq '^tensors: +37$' "$m" &&
        grep -Eq 'qwen2moe.expert_count +u32 +8$' "$m" && grep -Eq 'qwen2moe.expert_used_count +u32 +2$' "$m" &&
        grep -Eq 'qwen2moe.expert_feed_forward_length +u32 +128$' "$m" &&
        grep -Eq 'qwen2moe.expert_shared_feed_forward_length +u32 +384$' "$m" &&
        grep -Eq 'qwen2moe.feed_forward_length +u32 +512$' "$m" && ! grep -q 'key_length' "$m" &&
        grep -Eq ' blk\.1\.attn_q\.bias +f32 +\[256\] ' "$m" && grep -Eq ' blk\.1\.attn_v\.bias +f32 +\[128\] ' "$m" &&
        ! grep -q 'attn_q_norm' "$m" &&
        grep -Eq ' blk\.1\.ffn_gate_inp\.weight +f32 +\[256, 8\] ' "$m" &&
        grep -Eq ' blk\.1\.ffn_gate_exps\.weight +q4_K +\[256, 128, 8\] ' "$m" &&
        grep -Eq ' blk\.1\.ffn_down_exps\.weight +q5_0 +\[128, 256, 8\] ' "$m" &&
        grep -Eq ' blk\.1\.ffn_gate_inp_shexp\.weight +f32 +\[256\] ' "$m" &&
        grep -Eq ' blk\.1\.ffn_gate_shexp\.weight +q4_K +\[256, 384\] ' "$m" &&
        grep -Eq ' blk\.1\.ffn_up_shexp\.weight +q4_K +\[256, 384\] ' "$m" &&
        grep -Eq ' blk\.1\.ffn_down_shexp\.weight +q5_0 +\[384, 256\] ' "$m" &&
        ! grep -Eq ' blk\.[0-9]+\.ffn_(gate|up|down)\.weight' "$m" && grep -Eq ' output\.weight ' "$m" &&
        [ "$(awk '$2 ~ /^blk\.0\.ffn_/ { printf "%s ", $2 }' "$m")" = "blk.0.ffn_norm.weight blk.0.ffn_gate_inp.weight \
blk.0.ffn_gate_exps.weight blk.0.ffn_up_exps.weight blk.0.ffn_down_exps.weight blk.0.ffn_gate_inp_shexp.weight \
blk.0.ffn_gate_shexp.weight blk.0.ffn_up_shexp.weight blk.0.ffn_down_shexp.weight " ]; then
        ok "minfer info: qwen2moe keys, router, expert and shared-expert tensors in order"
    else bad "minfer info qwen2moe" "$(grep -v tokenizer "$m" | head -c 2500)"; fi
    "$MINFER" info -m "$D/q2m8.gguf" >"$D/infoq2m8.txt" 2>&1
    "$MINFER" info -m "$D/q2m32.gguf" >"$D/infoq2m32.txt" 2>&1
    m="$D/infoq2m8.txt"
    if grep -Eq 'qwen2moe.expert_shared_feed_forward_length +u32 +512$' "$m" &&
        grep -Eq ' blk\.0\.ffn_gate_inp_shexp\.weight +f32 +\[256\] ' "$m" &&
        grep -Eq ' blk\.0\.ffn_gate_shexp\.weight +q8_0 +\[256, 512\] ' "$m" &&
        grep -Eq ' blk\.0\.ffn_down_shexp\.weight +q8_0 +\[512, 256\] ' "$m" &&
        grep -Eq ' blk\.0\.ffn_down_exps\.weight +q8_0 +\[256, 256, 8\] ' "$m" &&
        grep -Eq '^tensors: +20$' "$D/infoq2m32.txt" &&
        [ "$(awk '$1 ~ /^[0-9]+$/ && $3 != "f32"' "$D/infoq2m32.txt" | wc -l)" = 0 ]; then
        ok "minfer info: tiny qwen2moe q8_0 (shared ffn 512) and f32"
    else bad "minfer info qwen2moe q8_0/f32" "$(grep -E 'shexp|^tensors' "$m" "$D/infoq2m32.txt")"; fi
    m="$D/infoa27.txt"
    "$MINFER" info -m "$D/a27.gguf" >"$m" 2>&1
    # 1408 is no multiple of 256: ffn_down_exps' rows fall back to q5_0; 5632 and 2048 are, so the shared expert is q4_K
    if grep -Eq 'qwen2moe.embedding_length +u32 +2048$' "$m" && grep -Eq 'qwen2moe.attention.head_count_kv +u32 +16$' "$m" &&
        grep -Eq 'qwen2moe.context_length +u32 +8192$' "$m" && grep -Eq 'qwen2moe.feed_forward_length +u32 +5632$' "$m" &&
        grep -Eq 'qwen2moe.expert_used_count +u32 +4$' "$m" &&
        grep -Eq 'qwen2moe.expert_feed_forward_length +u32 +1408$' "$m" &&
        grep -Eq 'qwen2moe.expert_shared_feed_forward_length +u32 +5632$' "$m" &&
        grep -Eq ' blk\.0\.ffn_down_exps\.weight +q5_0 +\[1408, 2048, 4\] ' "$m" &&
        grep -Eq ' blk\.0\.ffn_gate_exps\.weight +q4_K +\[2048, 1408, 4\] ' "$m" &&
        grep -Eq ' blk\.0\.ffn_down_shexp\.weight +q4_K +\[5632, 2048\] ' "$m" &&
        grep -Eq ' blk\.0\.ffn_gate_inp_shexp\.weight +f32 +\[2048\] ' "$m"; then
        ok "minfer info: qwen1.5-moe-a2.7b shape"
    else bad "minfer info qwen1.5-moe-a2.7b" "$(grep -v tokenizer "$m" | head -c 2500)"; fi
    # the scaling keys sit right after rope.freq_base; a file without the options has none of them
    "$MINFER" info -m "$D/yarn.gguf" >"$D/infoyarn.txt" 2>&1
    "$MINFER" info -m "$D/lin.gguf" >"$D/infolin.txt" 2>&1
    "$MINFER" info -m "$D/none.gguf" >"$D/infonone.txt" 2>&1
    y="$D/infoyarn.txt"
    if grep -A3 -E 'qwen3.rope.freq_base +f32' "$y" | tr -s ' ' | tr '\n' '|' | grep -Fq \
        'qwen3.rope.scaling.type string "yarn"| qwen3.rope.scaling.factor f32 4| qwen3.rope.scaling.original_context_length u32 32768|' &&
        grep -Eq 'qwen3.context_length +u32 +131072$' "$y" &&
        grep -Eq 'qwen3moe.rope.scaling.type +string +"linear"$' "$D/infolin.txt" &&
        grep -Eq 'qwen3moe.rope.scaling.factor +f32 +2.5$' "$D/infolin.txt" &&
        ! grep -q 'original_context_length' "$D/infolin.txt" &&
        grep -Eq 'qwen2.rope.scaling.type +string +"none"$' "$D/infonone.txt" &&
        [ "$(grep -c 'rope.scaling' "$D/infonone.txt")" = 1 ] && ! grep -q 'rope.scaling' "$D/info3.txt"; then
        ok "minfer info: --rope-scaling/--rope-scale/--yarn-orig-ctx keys, none without the options"
    else bad "minfer info rope scaling" "$(grep rope "$y" "$D/infolin.txt" "$D/infonone.txt" "$D/info3.txt")"; fi
else
    bad "minfer info reads the generated file" "exit $?: $(head -c 600 "$D/info.txt")"
fi

rm -f "$D"/*.gguf
finish
