#!/usr/bin/env bash
# --gpu-layers / -ngl / --n-gpu-layers and MINFER_GPU_LAYERS / MINFER_GPU_MEM at the process level: bad values
# refused naming the value, 0 accepted everywhere, a count refused (before the file is read) where no CUDA
# device can take it, --backend cuda with 0 blocks refused, the flag on every command that loads a model.
source "$(dirname "$0")/lib.bash"

M="$TMP/gpu-layers.gguf"
if ! "$GEN" --arch qwen2 --preset tiny --type q8_0 --seed 1 -q -o "$M"; then
    bad genmodel "mf-genmodel failed"; finish; exit
fi
cuda_built=0
"$MINFER" backends 2>/dev/null | grep -qE '^2 +cuda +200 +yes' && cuda_built=1
cuda_usable=0
"$MINFER" backends 2>/dev/null | grep -qE '^2 +cuda +200 +yes +yes +yes' && cuda_usable=1

# bad values: usage errors (exit 2), naming the flag and the value, before any model is read
BADVAL="is not a block count: give a number 0..1000000"
expect ngl_negative 2 "Error: -ngl -3 $BADVAL" -- "$MINFER" run -m "$M" -p hi -ngl -3
expect ngl_word 2 "Error: --gpu-layers x $BADVAL" -- "$MINFER" run -m "$M" -p hi --gpu-layers x
expect ngl_empty 2 "Error: --n-gpu-layers '' $BADVAL" -- "$MINFER" eval -m "$M" -p hi --n-gpu-layers ''
expect ngl_too_big 2 "Error: -ngl 1000001 $BADVAL" -- "$MINFER" bench -m "$M" -p 4 -n 0 -r 1 -ngl 1000001
expect ngl_twice 2 "-ngl" -- "$MINFER" run -m "$M" -p hi -ngl 0 --gpu-layers 0
expect ngl_no_value 2 "needs a value" -- "$MINFER" run -m "$M" -p hi -ngl
expect env_layers_bad 2 "MINFER_GPU_LAYERS='banana' is not a count" -- env MINFER_GPU_LAYERS=banana "$MINFER" run -m "$M" -p hi
expect env_mem_bad 2 "MINFER_GPU_MEM='abc' is not a whole number" -- env MINFER_GPU_MEM=abc "$MINFER" run -m "$M" -p hi
expect env_mem_zero 2 "MINFER_GPU_MEM='0' is out of range" -- env MINFER_GPU_MEM=0 "$MINFER" run -m "$M" -p hi

# 0 is accepted on every command and spelling (a CPU run), and says so in one line
expect ngl0_run 0 "offload: cpu only - 0 of 2 blocks on cuda (-ngl 0)" -- "$MINFER" run -m "$M" -p hi -n 2 -ngl 0
expect ngl0_chat 0 "offload: cpu only" -- bash -c "echo hi | '$MINFER' chat -m '$M' -n 2 --gpu-layers 0"
expect ngl0_eval 0 "offload: cpu only" -- "$MINFER" eval -m "$M" -p hi --n-gpu-layers 0
expect ngl0_bench 0 "offload: cpu only" -- "$MINFER" bench -m "$M" -p 4 -n 2 -r 1 -ngl 0
expect ngl0_specverify 0 "offload: cpu only" -- "$MINFER" specverify -m "$M" -md "$M" -p hi -n 2 -ngl 0
expect ngl0_env 0 "(MINFER_GPU_LAYERS=0)" -- env MINFER_GPU_LAYERS=0 "$MINFER" run -m "$M" -p hi -n 2
expect ngl_flag_beats_env 0 "(--gpu-layers 0)" -- env MINFER_GPU_LAYERS=5 "$MINFER" run -m "$M" -p hi -n 2 --gpu-layers 0
# nothing asked: no offload line (a CPU build's runs are unchanged)
"$MINFER" run -m "$M" -p hi -n 2 2>"$TMP/_err" >/dev/null
if grep -q "offload:" "$TMP/_err"; then bad no_request_no_line "$(cat "$TMP/_err")"; else ok no_request_no_line; fi
# serve takes the flag too (its refusal shows it parsed it)
expect ngl_serve 2 "Error: -ngl x $BADVAL" -- "$MINFER" serve -m "$M" -ngl x

if [ "$cuda_usable" = 0 ]; then
    # a count refused up front, naming why and the way out; the file is not even read
    if [ "$cuda_built" = 0 ]; then WHY="the CUDA backend is compiled only with make CUDA=1"
    else WHY="no CUDA device is available, or CUDA is disabled (MINFER_DISABLE_CUDA)"; fi
    REFUSE="asks for blocks on cuda, which is not usable here: $WHY; use --gpu-layers 0"
    expect ngl1_refused 1 "Error: -ngl 1 $REFUSE" -- "$MINFER" run -m "$M" -p hi -ngl 1
    expect ngl1_before_file 1 "-ngl 1 $REFUSE" -- "$MINFER" run -m "$TMP/no-such.gguf" -p hi -ngl 1
    expect ngl_all_refused 1 "--gpu-layers all $REFUSE" -- "$MINFER" eval -m "$M" -p hi --gpu-layers all
    expect ngl_env_refused 1 "MINFER_GPU_LAYERS=3 $REFUSE" -- env MINFER_GPU_LAYERS=3 "$MINFER" run -m "$M" -p hi
    expect ngl_bench_refused 1 "-ngl 2 $REFUSE" -- "$MINFER" bench -m "$M" -p 4 -n 0 -r 1 -ngl 2
    # auto with no device plans nothing and says why
    expect ngl_auto_cpu 0 "offload: cpu only - 0 of 2 blocks on cuda (auto: cuda is not usable here: $WHY; -ngl auto)" \
        -- "$MINFER" run -m "$M" -p hi -n 2 -ngl auto
else
    skip ngl1_refused "a CUDA device is usable here (gpu-check covers the device runs)"
    # the device named but no block for it: refused before the load (naming cuda needs a usable device)
    expect cuda_named_zero 2 "cuda is named by --backend / MINFER_BACKENDS, but -ngl 0 puts no block on it" \
        -- "$MINFER" --backend cuda run -m "$M" -p hi -ngl 0
fi
rm -f "$M"
finish
