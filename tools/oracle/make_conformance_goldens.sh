#!/usr/bin/env bash
# make_conformance_goldens.sh - record llama.cpp's answers for the conformance test (dev-only).
#
# For every model of the matrix below it generates the synthetic GGUF with mf-genmodel, then asks the
# llama.cpp oracle (tools/oracle/bin/llama_oracle: raw logits, f32 KV, flash-attn off) for
#   greedy: >= 40 generated ids with the top-5 raw logits and the top-1/top-2 gap of every step,
#   eval:   the top-5 raw logits at every position of llama.cpp's own sequence (prompt + generated),
# for each prompt (given as token ids; the chat prompt is ChatML tokenized by the oracle with special
# tokens parsed), and writes tests/golden/conformance/<name>.json with the generator arguments and the
# model file's sha256 (so the test detects a generator that drifted instead of reporting a bogus
# mismatch).  The CI test (tests/test_conformance.c) regenerates each model and compares.
#
# llama.cpp-quantized models (entries whose generator args hold --llama-quantize, names *-llamaq): the
# model llama.cpp runs is the file llama.cpp's own quantizer writes (tools/oracle/bin/llama_quant quantize:
# llama_model_quantize, no imatrix, not --pure) from mf-genmodel's --type f16 file of the same arguments.
# The golden also gets llama_quantize.tensors, [name, type, FNV-1a 64] of every tensor of that file; the
# script regenerates the model with the generator's args (--llama-quantize: the same mix and ggml's own
# quantizers) and refuses to write the golden unless every tensor hash is equal, so the test suite, which
# has no llama.cpp, runs the bytes llama.cpp wrote (and checks them again).
#
# Usage: tools/oracle/make_conformance_goldens.sh [--full] [NAME_FILTER]
#   --full   also (only) the Qwen2.5-0.5B / Qwen3-0.6B shaped models (make test-full)
# Env: BUILD (default build-engine; where mf-genmodel is), WORK (model scratch folder),
#      KV (default f32; f16 or q8_0: the KV matrix, names suffixed -kvf16 / -kvq8_0), ROT (default 1: with KV=q8_0
#      llama.cpp's attention rotation on, as users run it, oracle.attn_rot true; 0: LLAMA_ATTN_ROT_DISABLE=1,
#      names suffixed -norot, oracle.attn_rot false),
#      REPACK (default 0: llama_oracle --no-repack, so ggml-cpu keeps q4_0 / q4_K weights in the plain layout and
#      runs the vec_dot kernels minfer mirrors instead of the repacked q4_0_8x8 / q4_K_8x8 GEMV/GEMM; it changes
#      nothing for types llama.cpp never repacks on x86. REPACK=1 records llama.cpp's default. The golden's
#      oracle.repack says which; tests/test_conformance.c applies its tight classes only to repack:false.)
#      IQ_PANEL (default 0: GGML_NO_IQ_PANEL=1, so ggml-cpu runs a batch of >= 8 rows of an IQ2/IQ3/IQ4_XS
#      matmul with the vec_dot kernels minfer mirrors instead of its "IQ panel" GEMM (iqp.cpp: rows decoded
#      to int8 panels, 8 interleaved, their own per-super-block order; --no-repack does not turn it off).
#      It changes nothing for the other types. IQ_PANEL=1 records llama.cpp's default. Written to
#      oracle.iq_panel; docs/CONFORMANCE.md "IQ4_XS and IQ3_S".)
#      CPU_VARIANT (default haswell): the ggml-cpu library llama_oracle loads (--cpu-variant). The variant
#      changes the bits (the AVX-512 ones have another vector exp for softmax and SiLU, 16 lanes wide), and
#      minfer's kernels repeat the AVX2 one; pinning it makes the goldens the same on every x86 machine.
#      Written to oracle.cpu_variant.
# MoE entries (generator args with --arch qwen3moe or qwen2moe) also record eval_serial per case: llama.cpp's eval of the
# same sequence one token at a time (--ubatch 1), and say so in oracle.both_paths.  llama.cpp's batched and
# one-token paths round differently and, in a mixture of experts, land on different sides of rounding flips at some
# rows; minfer is batch-invariant, and tests/test_conformance.c accepts a row that is tight to either of llama.cpp's
# own answers (docs/CONFORMANCE.md, "Mixture of experts").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD=${BUILD:-build-engine}
GEN="$BUILD/mf-genmodel"
ORACLE=tools/oracle/bin/llama_oracle
OUT=tests/golden/conformance
WORK=${WORK:-$BUILD/conformance-work}
N_GEN=${N_GEN:-40}
REPACK=${REPACK:-0}
CPU_VARIANT=${CPU_VARIANT:-haswell}
IQ_PANEL=${IQ_PANEL:-0}
if [ "$IQ_PANEL" = 1 ]; then unset GGML_NO_IQ_PANEL; iq_panel_json=true; else export GGML_NO_IQ_PANEL=1; iq_panel_json=false; fi
KV=${KV:-f32}
if [ "$KV" = q8_0 ]; then FA=${FA:-on}; else FA=${FA:-off}; fi
# llama.cpp rotates only quantized caches (Hadamard, attn_rot_k/v); ROT=0 records with LLAMA_ATTN_ROT_DISABLE=1
# under names suffixed -norot (minfer then runs them with no_attn_rot)
ROT=${ROT:-1}
attn_rot=null suffix=''
if [ "$KV" = q8_0 ]; then
    if [ "$ROT" = 0 ]; then export LLAMA_ATTN_ROT_DISABLE=1; attn_rot=false; suffix=-norot; else unset LLAMA_ATTN_ROT_DISABLE; attn_rot=true; fi
fi
repack_flag=--no-repack repack_json=false
if [ "$REPACK" = 1 ]; then repack_flag='' repack_json=true; fi
full=0
if [ "${1:-}" = "--full" ]; then full=1; shift; fi
filter=${1:-}
[ -x "$GEN" ] || { echo "make_conformance_goldens: $GEN not built (make BUILD=$BUILD)" >&2; exit 1; }
[ -x "$ORACLE" ] || tools/oracle/build.sh llama_oracle
LQ=tools/oracle/bin/llama_quant
[ -x "$LQ" ] || tools/oracle/build.sh llama_quant
mkdir -p "$OUT" "$WORK"

# name | generator args
if [ "$KV" != f32 ]; then
models=(
    "qwen2-tiny-q8_0-kv$KV$suffix|--arch qwen2 --preset tiny --type q8_0 --seed 1 --untied"
    "qwen3-tiny-q8_0-kv$KV$suffix|--arch qwen3 --preset tiny --type q8_0 --seed 1 --untied"
)
# q8_0: head size 128 too (the K rotation is 128 wide, its scale 1/sqrtf(128) not a power of two), 2 layers
if [ "$KV" = q8_0 ]; then models+=("qwen3-0.6b-2l-q8_0-kv$KV$suffix|--arch qwen3 --preset qwen3-0.6b --layers 2 --type q8_0 --seed 1"); fi
elif [ $full -eq 0 ]; then
models=(
    "qwen2-tiny-f32|--arch qwen2 --preset tiny --type f32 --seed 1 --untied"
    "qwen2-tiny-f16|--arch qwen2 --preset tiny --type f16 --seed 1 --untied"
    "qwen2-tiny-q8_0|--arch qwen2 --preset tiny --type q8_0 --seed 1 --untied"
    "qwen2-tiny-q4_0|--arch qwen2 --preset tiny --type q4_0 --seed 1 --untied"
    "qwen2-tiny-q4_k_m|--arch qwen2 --preset tiny --type q4_k_m --seed 1 --untied"
    "qwen2-tiny-q6_k|--arch qwen2 --preset tiny --type q6_k --seed 1 --untied"
    "qwen2-tiny-f16-tied|--arch qwen2 --preset tiny --type f16 --seed 2 --tied"
    "qwen2-tiny-q8_0-tied|--arch qwen2 --preset tiny --type q8_0 --seed 2 --tied"
    "qwen3-tiny-f32|--arch qwen3 --preset tiny --type f32 --seed 1 --untied"
    "qwen3-tiny-f16|--arch qwen3 --preset tiny --type f16 --seed 1 --untied"
    "qwen3-tiny-q8_0|--arch qwen3 --preset tiny --type q8_0 --seed 1 --untied"
    "qwen3-tiny-q4_0|--arch qwen3 --preset tiny --type q4_0 --seed 1 --untied"
    "qwen3-tiny-q4_k_m|--arch qwen3 --preset tiny --type q4_k_m --seed 1 --untied"
    "qwen3-tiny-q6_k|--arch qwen3 --preset tiny --type q6_k --seed 1 --untied"
    "qwen3-tiny-f16-tied|--arch qwen3 --preset tiny --type f16 --seed 2 --tied"
    "qwen3-tiny-q4_k_m-tied|--arch qwen3 --preset tiny --type q4_k_m --seed 2 --tied"
    "qwen3-tiny-bf16|--arch qwen3 --preset tiny --type bf16 --seed 1 --untied"
    "qwen2-tiny-q4_1|--arch qwen2 --preset tiny --type q4_1 --seed 1 --untied"
    "qwen3-tiny-q5_0|--arch qwen3 --preset tiny --type q5_0 --seed 1 --untied"
    "qwen2-tiny-q5_1|--arch qwen2 --preset tiny --type q5_1 --seed 1 --untied"
    "qwen3-tiny-q5_k|--arch qwen3 --preset tiny --type q5_k --seed 1 --untied"
    "qwen3-tiny-q2_k|--arch qwen3 --preset tiny --type q2_k --seed 1 --untied"
    "qwen2-tiny-q3_k|--arch qwen2 --preset tiny --type q3_k --seed 1 --untied"
    "qwen3-tiny-iq4_nl|--arch qwen3 --preset tiny --type iq4_nl --seed 1 --untied"
    "qwen2-tiny-iq4_xs|--arch qwen2 --preset tiny --type iq4_xs --seed 1 --untied"
    "qwen3-tiny-iq2_xxs|--arch qwen3 --preset tiny --type iq2_xxs --seed 1 --untied"
    "qwen2-tiny-iq2_xs|--arch qwen2 --preset tiny --type iq2_xs --seed 1 --untied"
    "qwen3-tiny-iq2_s|--arch qwen3 --preset tiny --type iq2_s --seed 1 --untied"
    "qwen2-tiny-iq3_xxs|--arch qwen2 --preset tiny --type iq3_xxs --seed 1 --untied"
    "qwen3-tiny-iq3_s|--arch qwen3 --preset tiny --type iq3_s --seed 1 --untied"
    "qwen3-tiny-q2_k-llamaq|--arch qwen3 --preset tiny --type q2_k --seed 1 --untied --llama-quantize"
    "qwen2-tiny-q3_k_s-llamaq|--arch qwen2 --preset tiny --type q3_k_s --seed 1 --untied --llama-quantize"
    "qwen3-tiny-q3_k_m-llamaq|--arch qwen3 --preset tiny --type q3_k_m --seed 1 --untied --llama-quantize"
    "qwen2-tiny-q3_k_m-llamaq|--arch qwen2 --preset tiny --type q3_k_m --seed 1 --untied --llama-quantize"
    "qwen3-tiny-iq4_nl-llamaq|--arch qwen3 --preset tiny --type iq4_nl --seed 1 --untied --llama-quantize"
    "qwen2-tiny-iq4_xs-llamaq|--arch qwen2 --preset tiny --type iq4_xs --seed 1 --untied --llama-quantize"
    "qwen3-tiny-iq3_s-llamaq|--arch qwen3 --preset tiny --type iq3_s --seed 1 --untied --llama-quantize"
    "qwen2-tiny-q4_1-llamaq|--arch qwen2 --preset tiny --type q4_1 --seed 1 --untied --llama-quantize"
    "qwen3-tiny-q5_0-llamaq|--arch qwen3 --preset tiny --type q5_0 --seed 1 --untied --llama-quantize"
    "qwen2-tiny-q5_1-llamaq|--arch qwen2 --preset tiny --type q5_1 --seed 1 --untied --llama-quantize"
    "qwen3-tiny-bf16-llamaq|--arch qwen3 --preset tiny --type bf16 --seed 1 --untied --llama-quantize"
    "qwen3moe-tiny-f32|--arch qwen3moe --preset tiny --type f32 --seed 1 --untied"
    "qwen3moe-tiny-f16|--arch qwen3moe --preset tiny --type f16 --seed 1 --untied"
    "qwen3moe-tiny-q8_0|--arch qwen3moe --preset tiny --type q8_0 --seed 1 --untied"
    "qwen3moe-tiny-q4_0|--arch qwen3moe --preset tiny --type q4_0 --seed 1 --untied"
    "qwen3moe-tiny-q4_k|--arch qwen3moe --preset tiny --type q4_k --seed 1 --untied"
    "qwen3moe-tiny-q6_k|--arch qwen3moe --preset tiny --type q6_k --seed 2 --tied --experts 16 --experts-used 4"
    "qwen3-tiny-q8_0-yarn|--arch qwen3 --preset tiny --type q8_0 --seed 1 --untied --rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 32768"
    "qwen2-tiny-f32-yarn|--arch qwen2 --preset tiny --type f32 --seed 1 --untied --rope-scaling yarn --rope-scale 2.89 --yarn-orig-ctx 4096"
    "qwen2-tiny-q8_0-linear|--arch qwen2 --preset tiny --type q8_0 --seed 1 --untied --rope-scaling linear --rope-scale 2"
    "qwen2moe-tiny-f32|--arch qwen2moe --preset tiny --type f32 --seed 1 --untied"
    "qwen2moe-tiny-q8_0|--arch qwen2moe --preset tiny --type q8_0 --seed 1 --untied"
    "qwen2moe-tiny-q4_0|--arch qwen2moe --preset tiny --type q4_0 --seed 1 --untied"
    "qwen2moe-tiny-q4_k|--arch qwen2moe --preset tiny --type q4_k --seed 2 --untied --experts 16 --experts-used 4"
)
else
models=(
    "full-qwen2.5-0.5b-q8_0|--arch qwen2 --preset qwen2.5-0.5b --type q8_0 --seed 1"
    "full-qwen3-0.6b-q8_0|--arch qwen3 --preset qwen3-0.6b --type q8_0 --seed 1"
)
fi

# prompts: name|text (the chat one is rendered ChatML; special tokens are parsed by the oracle)
chat_text=$'<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is the capital of France? Answer in one word.<|im_end|>\n<|im_start|>assistant\n'
prompts=(
    "capital|The capital of France is"
    "code|def fibonacci(n):
    \"\"\"Return the n-th Fibonacci number.\"\"\"
"
    "chat|$chat_text"
)
[ $full -eq 1 ] && prompts=("capital|The capital of France is" "chat|$chat_text")

commit=$(git -C tools/oracle/llama.cpp rev-parse --short HEAD 2>/dev/null || echo unknown)
for entry in "${models[@]}"; do
    name=${entry%%|*}
    args=${entry#*|}
    if [ -n "$filter" ] && [[ "$name" != *"$filter"* ]]; then continue; fi
    model="$WORK/$name.gguf"
    # shellcheck disable=SC2086
    "$GEN" $args -q -o "$model"
    sha=$(sha256sum "$model" | cut -d' ' -f1)
    run_model=$model lq_json=null
    if [[ " $args " == *" --llama-quantize "* ]]; then
        ftype=$(printf '%s\n' $args | grep -A1 -x -- --type | tail -1)
        src_args=$(printf ' %s ' "$args" | sed -e 's/ --llama-quantize / /' -e "s/ --type $ftype / --type f16 /")
        # shellcheck disable=SC2086
        "$GEN" $src_args -q -o "$WORK/$name.f16.gguf"
        "$LQ" quantize "$WORK/$name.f16.gguf" "$WORK/$name.llama.gguf" "$ftype" >/dev/null
        run_model=$WORK/$name.llama.gguf
        lq_hashes=$("$LQ" hashes "$run_model")
        if ! diff <(printf '%s' "$lq_hashes" | jq -c '.[]' | sort) <("$LQ" hashes "$model" | jq -c '.[]' | sort) >&2; then
            echo "make_conformance_goldens: $name: mf-genmodel $args does not write llama.cpp's tensors (< llama.cpp, > generator)" >&2
            exit 1
        fi
        lq_json=$(jq -n -c --arg ftype "$ftype" --arg src "${src_args# }" --argjson t "$lq_hashes" \
            '{ftype: $ftype, source: ("mf-genmodel " + ($src | sub(" +$"; ""))), program: "tools/oracle/bin/llama_quant quantize (llama_model_quantize, default params)", hash: "fnv1a64", tensors: $t}')
        rm -f "$WORK/$name.f16.gguf"
    fi
    cases_file="$WORK/$name.cases.jsonl"
    both_paths=false
    [[ " $args " == *" --arch qwen3moe "* || " $args " == *" --arch qwen2moe "* ]] && both_paths=true
    : >"$cases_file"
    for p in "${prompts[@]}"; do
        pname=${p%%|*}
        ptext=${p#*|}
        ids=$("$ORACLE" tokenize --cpu-variant "$CPU_VARIANT" --model "$run_model" --text "$ptext" 2>/dev/null | tr -d ' \n')
        greedy=$("$ORACLE" greedy --cpu-variant "$CPU_VARIANT" --model "$run_model" --tokens "$ids" -n "$N_GEN" --top 5 --threads 2 --kv "$KV" --fa "$FA" ${repack_flag:+"$repack_flag"} 2>/dev/null)
        seq=$(printf '%s' "$greedy" | jq -c '.prompt + .generated')
        evalj=$("$ORACLE" eval --cpu-variant "$CPU_VARIANT" --model "$run_model" --tokens "$seq" --top 5 --threads 2 --kv "$KV" --fa "$FA" ${repack_flag:+"$repack_flag"} 2>/dev/null | jq -s -c '.')
        serialj=null
        if [ "$both_paths" = true ]; then
            serialj=$("$ORACLE" eval --cpu-variant "$CPU_VARIANT" --model "$run_model" --tokens "$seq" --top 5 --threads 2 --kv "$KV" --fa "$FA" ${repack_flag:+"$repack_flag"} --ubatch 1 2>/dev/null | jq -s -c '.')
        fi
        jq -n -c --arg name "$pname" --arg text "$ptext" --argjson prompt "$ids" --argjson g "$greedy" \
            --argjson e "$evalj" --argjson es "$serialj" \
            '{name: $name, text: $text, prompt: $prompt, greedy: {generated: $g.generated, steps: $g.steps}, eval: $e}
             + (if $es == null then {} else {eval_serial: $es} end)' \
            >>"$cases_file"
    done
    jq -n -c --arg name "$name" --arg args "$args" --arg sha "$sha" --arg commit "$commit" --argjson n_gen "$N_GEN" \
        --argjson repack "$repack_json" --arg cpu_variant "$CPU_VARIANT" --argjson iq_panel "$iq_panel_json" --argjson both_paths "$both_paths" --arg kv "$KV" --arg fa "$FA" --argjson attn_rot "$attn_rot" --argjson lq "$lq_json" --slurpfile cases "$cases_file" \
        '{name: $name, generator: {args: ($args | split(" "))}, sha256: $sha,
          oracle: ({llama_cpp: $commit, kv: $kv, flash_attn: $fa, attn_rot: $attn_rot, logits: "raw", n_gen: $n_gen, repack: $repack,
                  cpu_variant: $cpu_variant, iq_panel: $iq_panel} + (if $both_paths then {both_paths: true} else {} end)),
          cases: $cases} + (if $lq == null then {} else {llama_quantize: $lq} end)' >"$OUT/$name.json"
    rm -f "$model" "$cases_file" "$WORK/$name.llama.gguf"
    echo "make_conformance_goldens: $OUT/$name.json ($sha)" >&2
done
