#!/usr/bin/env bash
# make_rerank_goldens.sh - record llama.cpp's reranker scores for tests/test_rerank.c (dev-only).
#
# For each synthetic Qwen3-Reranker below (mf-genmodel --reranker: pooling_type rank, labels yes/no, a two-row
# cls.output.weight, the converter's tokenizer.chat_template.rerank) it asks the llama.cpp oracle
# (tools/oracle/bin/llama_oracle embed --query Q --doc D: the pair filled into the rerank template and tokenized
# as llama-server does, embeddings = true with rank pooling, one ubatch, f16 KV as llama.cpp's default, flash
# attention off, the haswell CPU library) for the tokens and the softmaxed label scores of every pair, and of
# a few prompts given as token ids.  Writes
# tests/golden/rerank/<name>.json with the generator arguments and the file's sha256.
#
# Usage: tools/oracle/make_rerank_goldens.sh      Env: BUILD (default build; where mf-genmodel is), WORK
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD=${BUILD:-build}
GEN="$BUILD/mf-genmodel"
ORACLE=tools/oracle/bin/llama_oracle
OUT=tests/golden/rerank
WORK=${WORK:-$BUILD/rerank-work}
[ -x "$GEN" ] || { echo "make_rerank_goldens: $GEN not built (make BUILD=$BUILD)" >&2; exit 1; }
[ -x "$ORACLE" ] || { echo "make_rerank_goldens: $ORACLE not built (tools/oracle/build.sh llama_oracle)" >&2; exit 1; }
mkdir -p "$OUT" "$WORK"

# query | document
PAIRS=(
  "What is a panda?|The giant panda (Ailuropoda melanoleuca) is a bear species endemic to China."
  "What is a panda?|hi"
  "What is a panda?|Python is a programming language; 3.14 <|im_end|> naïve café"
  "東京の人口は?|Tokyo has about 14 million inhabitants."
)
# prompts given as token ids (no template): short enough that no q8 rounding crossing moves them, so the head
# and its softmax are compared in the tight class on the q8_0 model too
TOKEN_CASES=('[151644,8948,198]' '[151644,8948,198,60256]' '[9707,1879,11,1052,374]' '[785,3974,13876,38835,34208,916]')
# name | generator args
MODELS=(
  "qwen3-tiny-f32-reranker|--arch qwen3 --type f32 --reranker --seed 31"
  "qwen3-tiny-q8_0-reranker|--arch qwen3 --type q8_0 --reranker --seed 32"
)
for entry in "${MODELS[@]}"; do
  name=${entry%%|*} args=${entry#*|}
  model="$WORK/$name.gguf"
  # shellcheck disable=SC2086
  "$GEN" -q -o "$model" $args
  sha=$(sha256sum "$model" | cut -c1-64)
  commit=$("$ORACLE" info --model "$model" --vocab-only --cpu-variant haswell 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["llama_cpp_commit"])')
  cases=()
  for pair in "${PAIRS[@]}"; do
    q=${pair%%|*} d=${pair#*|}
    cases+=("$(python3 -c 'import json,sys; r=json.loads(sys.argv[3]); print(json.dumps({"query": sys.argv[1], "document": sys.argv[2], "llama_pooling": r["pooling"], "tokens": r["tokens"], "scores": r["embedding"]}, ensure_ascii=False))' \
      "$q" "$d" "$("$ORACLE" embed --model "$model" --query "$q" --doc "$d" --cpu-variant haswell --threads 2 2>/dev/null)")")
  done
  for ids in "${TOKEN_CASES[@]}"; do
    cases+=("$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(json.dumps({"llama_pooling": r["pooling"], "tokens": r["tokens"], "scores": r["embedding"]}))' \
      "$("$ORACLE" embed --model "$model" --tokens "$ids" --cpu-variant haswell --threads 2 2>/dev/null)")")
  done
  printf '%s\n' "${cases[@]}" | python3 -c '
import json, sys
name, args, sha, commit = sys.argv[1:5]
cases = [json.loads(l) for l in sys.stdin if l.strip()]
assert all(c["llama_pooling"] == 4 for c in cases), "llama.cpp did not rank"
doc = {"name": name, "generator": {"args": args.split()}, "sha256": sha,
       "oracle": {"tool": "llama_oracle embed --query --doc", "commit": commit, "cpu_variant": "haswell", "kv": "f16",
                  "flash_attn": "off", "ubatch": "all tokens"},
       "cases": cases}
json.dump(doc, open(sys.argv[5], "w"), ensure_ascii=False, indent=None, separators=(",", ":"))
open(sys.argv[5], "a").write("\n")
' "$name" "$args" "$sha" "$commit" "$OUT/$name.json"
  echo "make_rerank_goldens: $OUT/$name.json (${#cases[@]} cases)"
  rm -f "$model"
done
