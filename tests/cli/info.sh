#!/usr/bin/env bash
# minfer info: prints a writer-made sample file's header, metadata and tensor table; refuses truncated,
# foreign and missing files with exit 1 and bad usage with exit 2.
source "$(dirname "$0")/lib.bash"
TESTBIN="${MF_BUILD:-build}/tests/test_gguf"
F="$TMP/info_sample.gguf"

# has NAME HAYSTACK NEEDLE...: every needle is a substring of the haystack
has() {
    local name=$1 hay=$2; shift 2
    for n in "$@"; do
        if [[ "$hay" != *"$n"* ]]; then bad "$name" "output lacks '$n'"; return; fi
    done
    ok "$name"
}

if ! "$TESTBIN" --write-sample "$F"; then
    bad write_sample "$TESTBIN --write-sample $F failed"
    finish; exit
fi

out=$("$MINFER" info -m "$F" 2>"$TMP/_err"); rc=$?
if [ "$rc" -ne 0 ]; then bad info_ok "exit $rc: $(cat "$TMP/_err")"; else ok info_ok; fi
has header "$out" "gguf:      version 3, alignment 32, data section at byte " "file $(stat -c %s "$F") bytes"
has metadata "$out" "metadata:  9 keys" 'general.architecture' 'string  "qwen2"' \
    'qwen2.rope.freq_base                    f32     1000000' 'layer_norm_rms_epsilon  f32     1e-06' \
    'tokenizer.ggml.add_bos_token            bool    false' \
    '[string x 40] "!", "\"", "t2", "t3", "t4", "t5", "t6", "t7", ...' '[i32 x 40] 1, 1, 1,'
has tensors "$out" "tensors:   3" "token_embd.weight    f16     [32, 40]" "blk.0.ffn_up.weight  q8_0    [256, 2]" \
    "total:     3 tensors, 1824 elements, 3232 bytes (3.2 KiB)"
row=$(grep 'output_norm.weight' <<<"$out" | tr -s ' ')
[ "$row" = " 1 output_norm.weight f32 [32] 128 2560" ] && ok tensor_row || bad tensor_row "got '$row'"

out=$("$MINFER" info -m "$F" --max-elems 2 --no-tensors 2>&1)
has max_elems "$out" '[string x 40] "!", "\"", ...' "total:     3 tensors"
[[ "$out" != *"token_embd.weight"* ]] && ok no_tensors || bad no_tensors "tensor table printed"
out=$("$MINFER" info --model "$F" --full --no-metadata 2>&1)
[[ "$out" != *"general.architecture"* && "$out" == *"token_embd.weight"* ]] && ok no_metadata || bad no_metadata "$out"
out=$("$MINFER" info -m "$F" --full 2>&1)
has full "$out" '"t38", "t39"'

help=$("$MINFER" info --help); rc=$?
[ "$rc" -eq 0 ] && ok help_rc || bad help_rc "exit $rc"
has help_flags "$help" "-m, --model FILE" "--max-elems N" "--max-str N" "--full" "--no-metadata" "--no-tensors" "--help"

# refusals: exit 1 with a reason naming what was wrong
head -c 1100 "$F" >"$TMP/info_cut_index.gguf"
expect truncated_index 1 "Error: '$TMP/info_cut_index.gguf': tensor index entry" -- "$MINFER" info -m "$TMP/info_cut_index.gguf"
head -c 3000 "$F" >"$TMP/info_cut_data.gguf"
expect truncated_data 1 "data [offset 0, 2560 bytes] ends past the file (3000 bytes; the data section starts at byte" -- "$MINFER" info -m "$TMP/info_cut_data.gguf"
head -c 10 "$F" >"$TMP/info_cut_header.gguf"
expect truncated_header 1 "header: tensor count at offset 8 needs 8 bytes, but the file ends at 10 (truncated)" -- "$MINFER" info -m "$TMP/info_cut_header.gguf"
echo "just some text, not a model" >"$TMP/info_text.gguf"
expect not_gguf 1 "not a GGUF file: magic bytes 'just', expected 'GGUF'" -- "$MINFER" info -m "$TMP/info_text.gguf"
expect missing_file 1 "Error: cannot open '$TMP/no-such-file.gguf': No such file or directory" -- "$MINFER" info -m "$TMP/no-such-file.gguf"

# every ggml type id: info shows the file whatever its tensor types (ids and names are ggml's, written out here
# so a missing or misnamed row in the type table fails)
A="$TMP/info_all_types.gguf"
if "$TESTBIN" --write-all-types "$A"; then
    out=$("$MINFER" info -m "$A" 2>&1); rc=$?
    [ "$rc" -eq 0 ] && ok all_types_rc || bad all_types_rc "exit $rc: $out"
    want=()
    for t in f32 f16 q4_0 q4_1 q5_0 q5_1 q8_0 q8_1 q2_K q3_K q4_K q5_K q6_K q8_K iq2_xxs iq2_xs iq3_xxs iq1_s \
        iq4_nl iq3_s iq2_s iq4_xs i8 i16 i32 i64 f64 iq1_m bf16 tq1_0 tq2_0 mxfp4 nvfp4 q1_0 q2_0; do
        want+=("t.$t ")
    done
    has all_types "$out" "tensors:   35" "${want[@]}"
    row=$(grep ' t.iq4_xs ' <<<"$out" | tr -s ' ')
    [[ "$row" == *" t.iq4_xs iq4_xs [256, 2] 272 "* ]] && ok all_types_row || bad all_types_row "got '$row'"
else
    bad all_types "$TESTBIN --write-all-types $A failed"
fi

# a model with a tensor of a type minfer does not run: info shows it, run refuses once, on one line, naming the
# type, the tensor and the types that run
M="$TMP/info_iq1_s.gguf"
if "$GEN" --arch qwen3 --type q8_0 --layers 1 -q --tensor-type blk.0.attn_k.weight=iq1_s -o "$M"; then
    out=$("$MINFER" info -m "$M" 2>&1)
    row=$(grep 'blk.0.attn_k.weight' <<<"$out" | tr -s ' ')
    [[ "$row" == *" blk.0.attn_k.weight iq1_s [256, 128] "* ]] && ok info_iq1_s || bad info_iq1_s "row '$row'"
    "$MINFER" run -m "$M" -p hi -n 1 >"$TMP/_out" 2>"$TMP/_err"; rc=$?
    err=$(cat "$TMP/_err")
    want="Error: cannot load model '$M': tensor 'blk.0.attn_k.weight' is iq1_s (ggml type 19), which minfer does not run; it runs f32, f16, q4_0"
    if [ "$rc" -ne 1 ] || [[ "$err" != "$want"*"requantize the model to one of these (llama-quantize)" ]]; then
        bad run_refuses_iq1_s "exit $rc: $err"
    elif [ "$(wc -l <"$TMP/_err")" -ne 1 ] || [ "$(grep -o 'Error:' "$TMP/_err" | wc -l)" -ne 1 ]; then
        bad run_refuses_iq1_s "not exactly one error line: $err"
    else ok run_refuses_iq1_s; fi
    # the same for a MoE layer's expert stack (3-D), named in its role
    ME="$TMP/info_iq1_s_experts.gguf"
    if "$GEN" --arch qwen3moe --type q8_0 --layers 1 -q --tensor-type blk.0.ffn_up_exps.weight=iq1_s -o "$ME"; then
        "$MINFER" run -m "$ME" -p hi -n 1 >/dev/null 2>"$TMP/_err"; rc=$?
        err=$(cat "$TMP/_err")
        want="Error: cannot load model '$ME': tensor 'blk.0.ffn_up_exps.weight' is iq1_s (ggml type 19), which minfer does not run as experts; it runs f32, f16, q4_0"
        [ "$rc" -eq 1 ] && [[ "$err" == "$want"*"requantize the model to one of these (llama-quantize)" ]] &&
            [ "$(wc -l <"$TMP/_err")" -eq 1 ] && ok run_refuses_iq1_s_experts || bad run_refuses_iq1_s_experts "exit $rc: $err"
        rm -f "$ME"
    else
        bad run_refuses_iq1_s_experts "mf-genmodel --arch qwen3moe --tensor-type blk.0.ffn_up_exps.weight=iq1_s failed"
    fi
    for cmd in eval bench; do
        "$MINFER" $cmd -m "$M" -p 2 >/dev/null 2>"$TMP/_err"
        [ "$(grep -c 'Error:.*is iq1_s (ggml type 19)' "$TMP/_err")" -eq 1 ] && [ "$(wc -l <"$TMP/_err")" -eq 1 ] && ok "${cmd}_refuses_once" ||
            bad "${cmd}_refuses_once" "$(cat "$TMP/_err")"
    done
    # a file the GGUF reader refuses: the load error names the file once, on one line
    C="$TMP/info_cut_model.gguf"
    head -c 200000 "$M" >"$C"
    "$MINFER" run -m "$C" -p hi -n 1 >/dev/null 2>"$TMP/_err"
    err=$(cat "$TMP/_err")
    if [[ "$err" == "Error: cannot load model '$C': "* && "$err" != *"'$C': '$C'"* ]] && [ "$(wc -l <"$TMP/_err")" -eq 1 ]; then
        ok run_cut_model_once
    else bad run_cut_model_once "$err"; fi
else
    bad gen_iq1_s "$GEN --tensor-type failed"
fi

# usage errors: exit 2
expect no_model 2 "Error: minfer info needs -m FILE" -- "$MINFER" info
expect unknown_flag 2 "unknown option '--bogus'" -- "$MINFER" info -m "$F" --bogus
expect bad_number 2 "--max-elems expects an integer in [0, 1000000000], got 'many'" -- "$MINFER" info -m "$F" --max-elems many
expect missing_value 2 "-m needs a value" -- "$MINFER" info -m
finish
