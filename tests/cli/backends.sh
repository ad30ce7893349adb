#!/usr/bin/env bash
# The backend name fence at the process level: the three refusals word for word (before any model is
# touched), cpu always allowed, case/whitespace, repeat/comma spellings, flag beats MINFER_BACKENDS,
# and `minfer backends`.
source "$(dirname "$0")/lib.bash"

UNKNOWN="Error: unknown backend 'gpu2'; known backends are: cpu, metal, cuda"
NOMETAL="Error: backend 'metal' is known but not compiled into this build: Metal is compiled only on macOS"
NOCUDA="Error: backend 'cuda' is known but not compiled into this build: the CUDA backend is compiled only with make CUDA=1"
UNAVAIL="Error: backend 'cuda' is compiled in but not available on this machine: no CUDA device is available, or CUDA is disabled (MINFER_DISABLE_CUDA)"
MODEL="$TMP/no-such-model.gguf"
rm -f "$MODEL"

# A refusal is the whole of stderr: nothing else is printed (about backends or anything else).
refuse() { # NAME WANT_LINE -- cmd...
    local name=$1 want=$2; shift 3
    local err rc
    "$@" >"$TMP/_out" 2>"$TMP/_err"; rc=$?
    err=$(cat "$TMP/_err")
    if [ "$rc" -ne 1 ]; then bad "$name" "exit $rc, wanted 1; stderr: $err"; return; fi
    if [ "$err" != "$want" ]; then bad "$name" "stderr is not exactly '$want': '$err'"; return; fi
    if [ -s "$TMP/_out" ]; then bad "$name" "stdout not empty: $(cat "$TMP/_out")"; return; fi
    ok "$name"
}
# The fence lets the request through: whatever fails next is not about backends.
passes() { # NAME -- cmd...
    local name=$1; shift 2
    "$@" >"$TMP/_out" 2>"$TMP/_err"
    # the model's path is taken out first: the scratch folder is named after this script
    if sed "s|$MODEL|MODEL|g" "$TMP/_err" | grep -qiE "backend|not compiled into this build|not available on this machine"; then
        bad "$name" "stderr mentions backends: $(cat "$TMP/_err")"; return
    fi
    ok "$name"
}

cuda_built=0
"$MINFER" backends 2>/dev/null | grep -qE '^2 +cuda +200 +yes' && cuda_built=1

refuse unknown_name_flag "$UNKNOWN" -- "$MINFER" --backend gpu2 run -m "$MODEL" -p hi
refuse unknown_name_env "$UNKNOWN" -- env MINFER_BACKENDS=gpu2 "$MINFER" run -m "$MODEL" -p hi
refuse unknown_name_after_subcommand "$UNKNOWN" -- "$MINFER" run --backend=gpu2 -m "$MODEL"
refuse unknown_name_in_csv "$UNKNOWN" -- "$MINFER" --backend cpu,gpu2 run -m "$MODEL"
refuse unknown_name_any_subcommand "$UNKNOWN" -- "$MINFER" --backend gpu2 backends
refuse metal_not_compiled "$NOMETAL" -- "$MINFER" --backend metal run -m "$MODEL" -p hi
refuse metal_case_and_space "$NOMETAL" -- "$MINFER" --backend ' MeTaL ' run -m "$MODEL"
if [ "$cuda_built" = 0 ]; then
    refuse cuda_not_compiled "$NOCUDA" -- "$MINFER" --backend cuda run -m "$MODEL" -p hi
    refuse cpu_cuda_not_compiled "$NOCUDA" -- "$MINFER" --backend cpu,cuda run -m "$MODEL"
    refuse cuda_repeat_not_compiled "$NOCUDA" -- "$MINFER" --backend cpu --backend CUDA run -m "$MODEL"
    refuse cuda_env_not_compiled "$NOCUDA" -- env MINFER_BACKENDS=' Cuda ' "$MINFER" run -m "$MODEL"
else
    refuse cuda_disabled "$UNAVAIL" -- env MINFER_DISABLE_CUDA=1 "$MINFER" --backend cuda run -m "$MODEL" -p hi
    refuse cuda_disabled_empty "$UNAVAIL" -- env MINFER_DISABLE_CUDA= "$MINFER" --backend cpu,cuda run -m "$MODEL"
    # unnamed + disabled: not a refusal, the run is CPU
    passes cuda_disabled_unnamed -- env MINFER_DISABLE_CUDA=1 "$MINFER" run -m "$MODEL"
fi

# cpu is always allowed: the request passes the fence and the failure moves on to the missing model
passes cpu_passes -- "$MINFER" --backend cpu run -m "$MODEL" -p hi
passes cpu_case_space -- "$MINFER" --backend ' CPU ' run -m "$MODEL" -p hi
passes cpu_env -- env MINFER_BACKENDS=cpu "$MINFER" run -m "$MODEL" -p hi
# the flag wins over the environment (the environment is not parsed at all)
passes flag_beats_env -- env MINFER_BACKENDS=gpu2 "$MINFER" --backend cpu run -m "$MODEL"
expect flag_beats_env_rc 0 "" -- env MINFER_BACKENDS=gpu2 "$MINFER" --backend cpu backends
refuse flag_beats_env_bad_flag "$UNKNOWN" -- env MINFER_BACKENDS=cpu "$MINFER" --backend gpu2 backends
expect blank_env_is_unset 0 "" -- env MINFER_BACKENDS=' ' "$MINFER" backends
expect missing_value 2 "Error: --backend needs a value" -- "$MINFER" run --backend
expect empty_value 2 "Error: --backend needs a backend name" -- "$MINFER" --backend ' , ' backends

# minfer backends: every known backend, id, priority, compiled, allowed, available (and why not)
out=$("$MINFER" backends 2>&1); rc=$?
want_rows=("0 +cpu +100 +yes +yes +yes" "1 +metal +300 +no +no +no: Metal is compiled only on macOS")
if [ "$cuda_built" = 0 ]; then want_rows+=("2 +cuda +200 +no +no +no: the CUDA backend is compiled only with make CUDA=1"); fi
fail_rows=""
for r in "${want_rows[@]}"; do echo "$out" | grep -qE "^$r\$" || fail_rows="$fail_rows [$r]"; done
if [ "$rc" -ne 0 ] || [ -n "$fail_rows" ]; then bad backends_lists_all "rc=$rc missing$fail_rows in: $out"; else ok backends_lists_all; fi
echo "$out" | grep -q "^assignment order: " && ok backends_order_line || bad backends_order_line "$out"
out=$("$MINFER" --backend cpu backends 2>&1)
if [ "$cuda_built" = 1 ]; then
    echo "$out" | grep -qE "^2 +cuda +200 +yes +(fenced|no) " && ok backends_shows_fence || bad backends_shows_fence "$out"
else
    echo "$out" | grep -qE "^assignment order: cpu$" && ok backends_shows_fence || bad backends_shows_fence "$out"
fi
expect backends_help 0 "" -- "$MINFER" backends --help
"$MINFER" --help | grep -q -- "--backend NAME" && ok help_documents_flag || bad help_documents_flag "--help lacks --backend"
finish
