#!/usr/bin/env bash
# minfer bench: llama-bench's output shapes on a tiny synthetic model (markdown header and rows, the JSON
# array with llama-bench's field names, the CSV header), --depth labels, --help, and the refusals of bad
# flags naming the value.  No timing assertions: only that the numbers are there and positive.
source "$(dirname "$0")/lib.bash"
M="$TMP/bench_tiny_q8_0.gguf"
T="timeout 300"

if [ ! -s "$M" ]; then
    if ! "$GEN" --arch qwen2 --preset tiny --type q8_0 -q -o "$M"; then
        bad genmodel "$GEN could not write $M"
        finish; exit
    fi
fi

# llama-bench's test::get_fields(), in order (the CSV header and the JSON keys)
FIELDS="build_commit,build_number,cpu_info,gpu_info,backends,model_filename,model_type,model_size,model_n_params,n_batch,n_ubatch,n_threads,cpu_mask,cpu_strict,poll,type_k,type_v,n_gpu_layers,n_cpu_moe,split_mode,main_gpu,no_kv_offload,flash_attn,devices,tensor_split,tensor_buft_overrides,load_mode,lazy_mode,embeddings,no_op_offload,no_host,fit_target,fit_min_ctx,n_prompt,n_gen,n_depth,test_time,avg_ns,stddev_ns,avg_ts,stddev_ts"

# --- markdown ---
out=$($T "$MINFER" bench -m "$M" -p 8 -n 4 -r 1 2>"$TMP/_err"); rc=$?
if [ "$rc" -ne 0 ]; then
    bad md_run "exit $rc: $(cat "$TMP/_err")"
else
    ok md_run
    hdr=$(sed -n 1p <<<"$out") sep=$(sed -n 2p <<<"$out")
    # llama-bench's columns, plus type_k/type_v always (llama-bench shows them only off its f16 default)
    want='| model                          |       size |     params | backend    | threads | type_k | type_v |            test |                  t/s |'
    [ "$hdr" = "$want" ] && ok md_header || bad md_header "got '$hdr'"
    [ "$sep" = '| ------------------------------ | ---------: | ---------: | ---------- | ------: | -----: | -----: | --------------: | -------------------: |' ] &&
        ok md_separator || bad md_separator "got '$sep'"
    rows=$(grep -cE '^\| qwen2 \?B Q8_0 +\| +80\.03 MiB \| +78\.97 M \| CPU +\| +2 \| +f16 \| +f16 \| +(pp8|tg4) \| +[0-9]+\.[0-9]{2} ± [0-9]+\.[0-9]{2} \|$' <<<"$out")
    [ "$rows" = 2 ] && ok md_rows || bad md_rows "wanted a pp8 and a tg4 row, got: $out"
fi

# --- json ---
$T "$MINFER" bench -m "$M" -p 8 -n 4 -r 2 -o json >"$TMP/bench.json" 2>"$TMP/_err"; rc=$?
if [ "$rc" -ne 0 ]; then
    bad json_run "exit $rc: $(cat "$TMP/_err")"
else
    ok json_run
    msg=$(python3 - "$TMP/bench.json" "$FIELDS" "$M" <<'EOF' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
fields = sys.argv[2].split(",")
assert isinstance(d, list) and len(d) == 2, f"want an array of 2 tests, got {type(d).__name__} of {len(d)}"
for t, (p, n) in zip(d, [(8, 0), (0, 4)]):
    missing = [f for f in fields + ["samples_ns", "samples_ts"] if f not in t]
    assert not missing, f"missing fields {missing}"
    keys = [k for k in t if k in fields]
    assert keys == fields, f"field order differs from llama-bench's: {keys}"
    assert (t["n_prompt"], t["n_gen"], t["n_depth"]) == (p, n, 0), (t["n_prompt"], t["n_gen"], t["n_depth"])
    assert t["model_filename"] == sys.argv[3] and t["model_type"] == "qwen2 ?B Q8_0", t["model_type"]
    assert t["model_size"] == 83915776 and t["model_n_params"] == 78973184, (t["model_size"], t["model_n_params"])
    assert t["n_threads"] == 2 and t["n_ubatch"] == 512 and t["type_k"] == "f16" and t["type_v"] == "f16", (t["n_threads"], t["type_k"])
    assert isinstance(t["cpu_strict"], bool) and isinstance(t["avg_ns"], int) and isinstance(t["avg_ts"], float)
    assert len(t["samples_ns"]) == 2 and len(t["samples_ts"]) == 2, "want 2 samples (-r 2)"
    assert all(x > 0 for x in t["samples_ns"] + t["samples_ts"]) and t["avg_ts"] > 0 and t["stddev_ts"] >= 0
    want = sum(t["samples_ts"]) / 2
    assert abs(t["avg_ts"] - want) <= 1e-3 * want, (t["avg_ts"], want)
EOF
) && ok json_fields || bad json_fields "$msg"
fi

# --- csv ---
out=$($T "$MINFER" bench -m "$M" -p 8 -n 4 -r 1 -o csv 2>"$TMP/_err"); rc=$?
if [ "$rc" -ne 0 ]; then
    bad csv_run "exit $rc: $(cat "$TMP/_err")"
else
    ok csv_run
    [ "$(sed -n 1p <<<"$out")" = "$FIELDS" ] && ok csv_header || bad csv_header "got '$(sed -n 1p <<<"$out")'"
    msg=$(python3 -c '
import csv, sys
r = list(csv.DictReader(sys.stdin))
assert len(r) == 2, f"want 2 rows, got {len(r)}"
assert [(x["n_prompt"], x["n_gen"]) for x in r] == [("8", "0"), ("0", "4")], r
assert all(float(x["avg_ts"]) > 0 for x in r)' <<<"$out" 2>&1) && ok csv_rows || bad csv_rows "$msg"
fi

# --- depth, ubatch and cache type show up like llama-bench's columns/labels ---
out=$($T "$MINFER" bench -m "$M" -p 8 -n 2 -r 1 -d 4 -ub 4 -ctk f16 -t 1 2>"$TMP/_err"); rc=$?
if [ "$rc" -ne 0 ]; then
    bad depth_run "exit $rc: $(cat "$TMP/_err")"
else
    [[ "$(sed -n 1p <<<"$out")" == *"| n_ubatch | type_k | type_v |"* ]] && ok depth_columns ||
        bad depth_columns "header: $(sed -n 1p <<<"$out")"
    [[ "$out" == *"|        4 |    f16 |    f16 |        pp8 @ d4 |"* && "$out" == *"|    f16 |        tg2 @ d4 |"* ]] &&
        ok depth_labels || bad depth_labels "$out"
fi

# --- -c: a context larger than the test needs runs; one too small is refused naming both numbers ---
out=$($T "$MINFER" bench -m "$M" -p 0 -n 2 -r 1 -d 4 -c 300 -t 1 2>"$TMP/_err"); rc=$?
[ "$rc" -eq 0 ] && [[ "$out" == *"tg2 @ d4"* ]] && ok ctx_size_run || bad ctx_size_run "exit $rc: $(cat "$TMP/_err")"
expect refuse_ctx_small 2 "-c 5 cells cannot hold -d 4 + -n 2 tokens; give -c 6" -- "$MINFER" bench -m "$M" -p 0 -n 2 -d 4 -c 5

# --- help ---
out=$("$MINFER" bench --help 2>&1); rc=$?
miss=""
for f in -m --model -p --n-prompt -n --n-gen -t --threads -r --repetitions -d --depth -o --output -ub --ubatch-size \
    -c --ctx-size -ctk --cache-type-k -ctv --cache-type-v --cache-type --seed --no-warmup --progress -h --help; do
    [[ "$out" == *" $f"* ]] || miss="$miss $f"
done
[ "$rc" -eq 0 ] && [ -z "$miss" ] && ok help || bad help "exit $rc, undocumented:$miss"

# --- refusals (exit 2, naming the value) ---
expect refuse_p_text 2 "'abc'" -- "$MINFER" bench -m "$M" -p abc
expect refuse_p_neg 2 "got -1" -- "$MINFER" bench -m "$M" -p -1
expect refuse_threads0 2 "got 0" -- "$MINFER" bench -m "$M" -t 0
expect refuse_reps0 2 "got 0" -- "$MINFER" bench -m "$M" -r 0
expect refuse_depth 2 "'1k'" -- "$MINFER" bench -m "$M" -d 1k
expect refuse_output 2 "'xml'" -- "$MINFER" bench -m "$M" -o xml
expect refuse_cache 2 "-ctk q4_0 is not a KV cache type" -- "$MINFER" bench -m "$M" -ctk q4_0
expect refuse_seed 2 "'-3'" -- "$MINFER" bench -m "$M" --seed -3
expect refuse_unknown 2 "'--bogus'" -- "$MINFER" bench -m "$M" --bogus
expect refuse_nothing 2 "-p 0 and -n 0" -- "$MINFER" bench -m "$M" -p 0 -n 0
expect refuse_no_model 2 "-m/--model is required" -- "$MINFER" bench -p 8
expect refuse_model_novalue 2 "needs a value" -- "$MINFER" bench -m
expect refuse_missing_file 1 "$TMP/no_such_model.gguf" -- "$MINFER" bench -m "$TMP/no_such_model.gguf" -p 8 -n 0

# a file llama-quantize's ftype ids name: the model column says the type as llama-bench does (IQ4_XS is
# ftype 30; before every llama.h id was known the column read "(guessed) q8_0")
MX="$TMP/bench_tiny_iq4_xs.gguf"
if "$GEN" --arch qwen2 --preset tiny --type iq4_xs -q -o "$MX"; then
    out=$($T "$MINFER" bench -m "$MX" -p 0 -n 1 -r 1 --no-warmup 2>"$TMP/_err")
    if grep -q '| qwen2 .* IQ4_XS - 4.25 bpw ' <<<"$out"; then ok ftype_name_iq4_xs
    else bad ftype_name_iq4_xs "$(sed -n 3p <<<"$out") $(cat "$TMP/_err")"; fi
else bad ftype_name_iq4_xs "$GEN could not write $MX"; fi

finish
