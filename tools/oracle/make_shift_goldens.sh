#!/usr/bin/env bash
# make_shift_goldens.sh - record llama.cpp's logits after a KV shift for tests/test_kv_shift.c (dev-only).
#
# llama-server's --cache-reuse moves runs of cached tokens to new positions (llama_memory_seq_rm of the cells
# between, llama_memory_seq_add of the run: its K rows re-roped at the next decode); minfer's server does the
# same with mf_seq_rm / mf_seq_add, which the context shift of chat and conversations also uses.  For each
# model below the oracle (tools/oracle/bin/llama_oracle reuse, --no-repack, the haswell CPU library, flash
# attention off, f16 KV as llama.cpp's default; f32 KV for the f32 model, whose f16 cache already differs
# without a shift: see tests/test_kv_shift.c) decodes each case's cache, walks it as llama-server does for
# the case's prompt and run length, and records the moves, n_past, every remaining prompt row's top-5 logits
# and 8 greedy steps.  Writes tests/golden/shift/<name>.json with the generator arguments and the file's
# sha256.
#
# No q8_0 cache: the conformance goldens compare one only with LLAMA_ATTN_ROT_DISABLE=1 (with llama.cpp's
# rotation every row differs, docs/CONFORMANCE.md), and at the oracle's commit llama.cpp's K shift of a
# quantized cache then dereferences the absent rotation matrix (llama_kv_cache::build_rope_shift calls
# llama_mul_mat_hadamard with rot NULL): it segfaults.
#
# Usage: tools/oracle/make_shift_goldens.sh      Env: BUILD (default build; where mf-genmodel is), WORK
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=tools/oracle/golden_lib.bash
source tools/oracle/golden_lib.bash
golden_setup make_shift_goldens shift

# name | cache | prompt | min chunk: token ids from ranges of the real vocabulary (any ids do on random weights)
CASES=$(python3 - <<'EOF'
import json, random
r = random.Random(7)
def ids(n): return [r.randrange(100, 150000) for _ in range(n)]
P, X, S, T1, T2 = ids(6), ids(5), ids(12), ids(2), ids(3)
A, B, Y, Z = ids(8), ids(9), ids(4), ids(3)
X2, L = ids(60), ids(30)
cases = [
    ("middle-removed", P + X + S + T1, P + S + T2, 4),              # one run moves 5 back
    ("two-runs", P + X + A + Y + B + T1, P + A + B + T2, 4),          # both move, by 5 and then 9
    ("run-to-the-end", P + X + S, P + S, 4),                          # the last token is run again
    ("far", P + X2 + L + T1, P + L + T2, 8),                          # 30 move 60 back
    ("new-text-first", P + X + S + T1, P + Z + S + T2, 4),            # nothing moves (llama-server's walk)
    ("short-run-skipped", P + X + S[:3] + Y + S + T1, P + S + T2, 4), # a 3-run passed, the 12-run found inside
]
for name, c, p, m in cases: print(f"{name}|{json.dumps(c)}|{json.dumps(p)}|{m}")
EOF
)
# name | generator args | oracle flags | kv | flash attention | attention rotation
MODELS=(
  "qwen2-tiny-q8_0|--arch qwen2 --preset tiny --type q8_0 --seed 1 --untied|--kv f16|f16|off|"
  "qwen3-tiny-q8_0|--arch qwen3 --preset tiny --type q8_0 --seed 1 --untied|--kv f16|f16|off|"
  "qwen3-tiny-q8_0-kvf32|--arch qwen3 --preset tiny --type q8_0 --seed 1 --untied|--kv f32|f32|off|"
  "qwen2-tiny-f32-kvf32|--arch qwen2 --preset tiny --type f32 --seed 1 --untied|--kv f32|f32|off|"
  "qwen2-tiny-q8_0-yarn|--arch qwen2 --preset tiny --type q8_0 --seed 1 --untied --rope-scaling yarn --rope-scale 2.89 --yarn-orig-ctx 4096|--kv f16|f16|off|"
)
for entry in "${MODELS[@]}"; do
  IFS='|' read -r name args flags kv fa rot <<<"$entry"
  golden_model "$name" "$args"
  if [ "$rot" = false ]; then export LLAMA_ATTN_ROT_DISABLE=1; else unset LLAMA_ATTN_ROT_DISABLE; fi
  lines=()
  while IFS='|' read -r cname cache prompt min; do
    # shellcheck disable=SC2086
    out=$("$ORACLE" reuse --model "$model" --cache "$cache" --tokens "$prompt" --min-chunk "$min" -n 8 --top 5 \
      --no-repack --cpu-variant haswell --threads 2 $flags 2>/dev/null)
    lines+=("$(python3 -c 'import json,sys; r=json.loads(sys.argv[5]); print(json.dumps({"name": sys.argv[1], "cache": json.loads(sys.argv[2]), "prompt": json.loads(sys.argv[3]), "min_chunk": int(sys.argv[4]), "n_past": r["n_past"], "moves": r["moves"], "rows": r["rows"], "steps": r["steps"]}))' \
      "$cname" "$cache" "$prompt" "$min" "$out")")
  done <<<"$CASES"
  printf '%s\n' "${lines[@]}" | python3 -c '
import json, sys
name, args, sha, commit, kv, fa, rot, path = sys.argv[1:9]
doc = {"name": name, "generator": {"args": args.split()}, "sha256": sha,
       "oracle": {"tool": "llama_oracle reuse", "commit": commit, "cpu_variant": "haswell", "repack": False,
                  "kv": kv, "flash_attn": fa, "attn_rot": None if rot == "" else rot == "true"},
       "cases": [json.loads(l) for l in sys.stdin if l.strip()]}
json.dump(doc, open(path, "w"), separators=(",", ":"))
open(path, "a").write("\n")
' "$name" "$args" "$sha" "$commit" "$kv" "$fa" "$rot" "$OUT/$name.json"
  echo "make_shift_goldens: $OUT/$name.json (${#lines[@]} cases)"
  rm -f "$model"
done
