#!/usr/bin/env bash
# KV cache element types on the command line (issue 11 §2): -ctk/--cache-type-k, -ctv/--cache-type-v and
# --cache-type on run, eval and bench, and MINFER_CACHE_TYPE.  Bad values are refused with exit 2, the exact
# message and nothing on stdout; a flag wins over the variable; the default is f16; the footprint of each
# type is what the load line and MINFER_LOG=info say (q8_0 = 34/128 of f32); bench says which type ran.
cd "$(dirname "$0")/../.." || exit 1
source tests/cli/lib.bash
unset MINFER_CACHE_TYPE MINFER_LOG

M="$TMP/cli-cache-q8_0.gguf"
if ! "$GEN" --arch qwen2 --preset tiny --type q8_0 --seed 1 -q -o "$M"; then
    bad genmodel "mf-genmodel failed"
    finish
    exit 1
fi

# refuse NAME WANT_STDERR cmd...: exit 2, exactly that stderr, empty stdout
refuse() {
    local name=$1 want=$2 out err rc
    shift 2
    out=$("$@" 2>"$TMP/_err"); rc=$?
    err=$(cat "$TMP/_err")
    if [ "$rc" -ne 2 ]; then bad "$name" "exit $rc, wanted 2; stderr: $err"
    elif [ "$err" != "$want" ]; then bad "$name" "stderr '$err', wanted '$want'"
    elif [ -n "$out" ]; then bad "$name" "stdout not empty: $out"
    else ok "$name"; fi
}
tail_msg="is not a KV cache type (f32, f16, q8_0); refusing rather than silently running with f16"
for cmd in "run -p hi -n 1" "eval --tokens [1,2]" "bench -p 4 -n 0 -r 1"; do
    c=${cmd%% *}
    # shellcheck disable=SC2086
    {
        refuse "$c:ctk_q4" "Error: -ctk q4 $tail_msg" "$MINFER" ${cmd} -m "$M" -ctk q4
        refuse "$c:ctv_q4_0" "Error: --cache-type-v q4_0 $tail_msg" "$MINFER" ${cmd} -m "$M" --cache-type-v q4_0
        refuse "$c:both_bf16" "Error: --cache-type bf16 $tail_msg" "$MINFER" ${cmd} -m "$M" --cache-type bf16
        refuse "$c:ctk_empty" "Error: -ctk '' $tail_msg" "$MINFER" ${cmd} -m "$M" -ctk ''
        refuse "$c:env_q4" "Error: MINFER_CACHE_TYPE=q4 $tail_msg" env MINFER_CACHE_TYPE=q4 "$MINFER" ${cmd} -m "$M"
        # a bad variable is refused even when a flag would win over it (strict: no value is ignored)
        refuse "$c:env_bad_flag_good" "Error: MINFER_CACHE_TYPE=int8 $tail_msg" \
            env MINFER_CACHE_TYPE=int8 "$MINFER" ${cmd} -m "$M" --cache-type f32
        expect "$c:ctk_twice" 2 "given twice" -- "$MINFER" ${cmd} -m "$M" -ctk f16 --cache-type-k f32
        expect "$c:ctk_novalue" 2 "needs a value" -- "$MINFER" ${cmd} -m "$M" -ctk
    }
    out=$("$MINFER" "$c" --help 2>&1)
    [[ "$out" == *"-ctk, --cache-type-k T"* && "$out" == *"-ctv, --cache-type-v T"* && "$out" == *"--cache-type T"* &&
        "$out" == *"MINFER_CACHE_TYPE"* ]] && ok "$c:help" || bad "$c:help" "flags missing from --help"
done

# the load line of run: cells, both types and the MiB; default f16; flags over the variable over the default
kvline() { # ENV... -- ARGS: the "KV cache ..." part of run's load line
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    env "${envs[@]}" "$MINFER" run -m "$M" -p hi -n 1 --temp 0 -c 1024 "$@" 2>&1 >/dev/null | grep -o 'KV cache 1024 cells.*'
}
check_line() { # NAME WANT ENV... -- ARGS
    local name=$1 want=$2 got
    shift 2
    got=$(kvline "$@")
    [ "$got" = "$want" ] && ok "$name" || bad "$name" "load line '$got', wanted '$want'"
}
check_line default "KV cache 1024 cells, K f16 V f16, 1.00 MiB" X=1 --
check_line env_f32 "KV cache 1024 cells, K f32 V f32, 2.00 MiB" MINFER_CACHE_TYPE=F32 --
check_line env_q8_0 "KV cache 1024 cells, K q8_0 V q8_0, 0.53 MiB" MINFER_CACHE_TYPE=' q8_0 ' --
check_line flag_over_env "KV cache 1024 cells, K q8_0 V q8_0, 0.53 MiB" MINFER_CACHE_TYPE=f32 -- --cache-type q8_0
check_line ctk_over_both "KV cache 1024 cells, K f32 V q8_0, 1.27 MiB" X=1 -- --cache-type q8_0 -ctk f32
check_line ctv_over_env "KV cache 1024 cells, K f32 V f16, 1.50 MiB" MINFER_CACHE_TYPE=f32 -- -ctv f16

# the footprint in bytes at MINFER_LOG=info: q8_0 is exactly 34/128 of f32 (and f16 half)
for t in f32 f16 q8_0; do
    b=$(MINFER_LOG=info "$MINFER" run -m "$M" -p hi -n 1 --temp 0 -c 1000 --cache-type "$t" 2>&1 >/dev/null |
        sed -n 's/.*K '"$t"', V '"$t"': \([0-9]*\) bytes.*/\1/p')
    eval "bytes_$t=\${b:-0}"
done
# shellcheck disable=SC2154
if [ "$bytes_f32" -gt 0 ] && [ $((bytes_q8_0 * 128)) -eq $((bytes_f32 * 34)) ] && [ $((bytes_f16 * 2)) -eq "$bytes_f32" ]; then
    ok footprint_bytes
else
    bad footprint_bytes "f32 $bytes_f32 f16 $bytes_f16 q8_0 $bytes_q8_0 bytes"
fi

# every type runs end to end on eval; the flag and the variable give the same output; q8_0 is not f32
for t in f32 f16 q8_0; do
    a=$("$MINFER" eval -m "$M" --tokens '[785,6722,315,9625,374]' --top 3 -t 2 --cache-type "$t" 2>"$TMP/_err")
    b=$(MINFER_CACHE_TYPE=$t "$MINFER" eval -m "$M" --tokens '[785,6722,315,9625,374]' --top 3 -t 2 2>>"$TMP/_err")
    [ -n "$a" ] && [ "$a" = "$b" ] && ok "eval_$t" || bad "eval_$t" "flag and variable differ or failed: $(cat "$TMP/_err")"
    eval "out_$t=\$a"
done
# shellcheck disable=SC2154
[ "$out_f32" != "$out_q8_0" ] && [ "$out_f32" != "$out_f16" ] && ok types_differ || bad types_differ "the types gave identical logits"

# bench: llama-bench's default (f16) unless told, and the table and JSON say which ran
out=$("$MINFER" bench -m "$M" -p 4 -n 0 -r 1 -t 1 2>"$TMP/_err")
[[ "$(sed -n 1p <<<"$out")" == *"| type_k | type_v |"* && "$out" == *"|    f16 |    f16 |             pp4 |"* ]] &&
    ok bench_default_f16 || bad bench_default_f16 "$out $(cat "$TMP/_err")"
out=$("$MINFER" bench -m "$M" -p 4 -n 0 -r 1 -t 1 -ctk q8_0 -ctv f32 -o json 2>"$TMP/_err")
[[ "$out" == *'"type_k": "q8_0"'* && "$out" == *'"type_v": "f32"'* ]] && ok bench_json_types ||
    bad bench_json_types "$out $(cat "$TMP/_err")"
finish
