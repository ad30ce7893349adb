#!/usr/bin/env bash
# bench/compare's summary over written runs (--summarize, no engine runs): each figure is set against the
# FASTEST llama.cpp build, the table names that build, a second table lists every build; the oracle's JSON
# and llama-bench's both read; runs from before --llama (one contender, tool "llama") still summarize;
# a bad --llama item is refused by name.
source "$(dirname "$0")/lib.bash"
D="$TMP/compare"
rm -rf "$D" && mkdir -p "$D/runs"

# minfer: pp 400, tg 50.  auto (oracle JSON): pp 200, tg 20.  a native llama-bench: pp 100, tg 40.
cat >"$D/runs/m-1.json" <<'EOF'
[{"model_type":"qwen2 1B Q8_0","model_size":1000,"n_threads":2,"type_k":"f16","n_depth":0,"minfer_isa":"avx512",
  "n_prompt":512,"n_gen":0,"avg_ts":400,"samples_ts":[400]},
 {"model_type":"qwen2 1B Q8_0","model_size":1000,"n_threads":2,"type_k":"f16","n_depth":0,"minfer_isa":"avx512",
  "n_prompt":0,"n_gen":128,"avg_ts":50,"samples_ts":[50]}]
EOF
cat >"$D/runs/a-1.json" <<'EOF'
{"pp":{"samples_ts":[200]},"tg":{"samples_ts":[20]},"cpu_backend":"libggml-cpu-zen4.so","flash_attn":"auto"}
EOF
cat >"$D/runs/n-1.json" <<'EOF'
[{"build_commit":"80fb11a","n_prompt":512,"n_gen":0,"n_depth":0,"avg_ts":100,"samples_ts":[100],"flash_attn":false},
 {"build_commit":"80fb11a","n_prompt":0,"n_gen":128,"n_depth":0,"avg_ts":40,"samples_ts":[40],"flash_attn":false}]
EOF
for f in m-1 a-1 n-1; do echo 1000 >"$D/runs/$f.rss"; done
printf 'q2-q8_0\t1\t30\nq2-q8_0\t1\t30\n' >"$D/runs/bw.tsv"
summarize() { BENCH_COMPARE_BW=30 bench/compare --summarize --build "${MF_BUILD:-build}" --out "$D" --models q2-q8_0 >"$D/out" 2>"$D/err"; }

printf 'q2-q8_0\tminfer\t1\t%s\t1000000\nq2-q8_0\tllama0\t1\t%s\t1000000\tauto\nq2-q8_0\tllama1\t1\t%s\t1000000\tbench:/opt/llama-bench\n' \
    "$D/runs/m-1" "$D/runs/a-1" "$D/runs/n-1" >"$D/runs/index.tsv"
if summarize; then
    pp=$(grep -F '| pp512 |' "$D/out" | head -1) tg=$(grep -F '| tg128 |' "$D/out" | head -1)
    [[ $pp == *"| 200.00 ± 0.00 | 2.000 |"*"| prebuilt libggml-cpu-zen4.so (auto) |" ]] &&
        ok "pp is set against the fastest build (auto, 200)" || bad "pp row" "$pp"
    [[ $tg == *"| 40.00 ± 0.00 | 1.250 |"*"| llama-bench /opt/llama-bench (80fb11a) |" ]] &&
        ok "tg is set against the fastest build (the native llama-bench, 40)" || bad "tg row" "$tg"
    grep -qF '| qwen2 1B Q8_0 (q2-q8_0) | tg128 | 20.00 ± 0.00 | **40.00 ± 0.00** |' "$D/out" &&
        ok "the second table lists every build, the winner in bold" || bad "contenders table" "$(cat "$D/out")"
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["results"]
assert [x["llama_build"] for x in r] == ["prebuilt libggml-cpu-zen4.so (auto)", "llama-bench /opt/llama-bench (80fb11a)"], r
assert [len(x["llama_contenders"]) for x in r] == [2, 2] and r[1]["ratio"] == 1.25' "$D/results.json" 2>"$D/py" &&
        ok "results.json names the winner and every contender" || bad "results.json" "$(cat "$D/py")"
else
    bad "summarize" "$(cat "$D/err")"
fi

# a run from before --llama: tool "llama", no sixth column
printf 'q2-q8_0\tminfer\t1\t%s\t1000000\nq2-q8_0\tllama\t1\t%s\t1000000\n' "$D/runs/m-1" "$D/runs/a-1" >"$D/runs/index.tsv"
if summarize && grep -qF '| 20.00 ± 0.00 | 2.500 |' "$D/out" && ! grep -q 'Every llama.cpp build' "$D/out"; then
    ok "an older run (one llama.cpp, no --llama) still summarizes"
else bad "older run" "$(cat "$D/out" "$D/err")"; fi

expect "an unknown --llama item is refused" 2 "--llama: unknown item 'gpu'" -- \
    bench/compare --llama auto,gpu --build "${MF_BUILD:-build}" --out "$D" --models q2-q8_0
expect "a bench: path that is not an executable is refused" 2 "is not an executable file" -- \
    bench/compare --llama "bench:$D/nothing" --build "${MF_BUILD:-build}" --out "$D" --models q2-q8_0
rm -rf "$D"
finish
