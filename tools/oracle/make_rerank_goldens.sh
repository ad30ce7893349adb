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
# shellcheck source=tools/oracle/golden_lib.bash
source tools/oracle/golden_lib.bash
golden_setup make_rerank_goldens rerank

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
  golden_model "$name" "$args"
  cases=()
  for pair in "${PAIRS[@]}"; do
    q=${pair%%|*} d=${pair#*|}
    cases+=("$(python3 -c 'import json,sys; r=json.loads(sys.argv[3]); assert r["pooling"] == 4, "llama.cpp did not rank"; print(json.dumps({"query": sys.argv[1], "document": sys.argv[2], "llama_pooling": r["pooling"], "tokens": r["tokens"], "scores": r["embedding"]}, ensure_ascii=False))' \
      "$q" "$d" "$("$ORACLE" embed --model "$model" --query "$q" --doc "$d" --cpu-variant haswell --threads 2 2>/dev/null)")")
  done
  for ids in "${TOKEN_CASES[@]}"; do
    cases+=("$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["pooling"] == 4, "llama.cpp did not rank"; print(json.dumps({"llama_pooling": r["pooling"], "tokens": r["tokens"], "scores": r["embedding"]}))' \
      "$("$ORACLE" embed --model "$model" --tokens "$ids" --cpu-variant haswell --threads 2 2>/dev/null)")")
  done
  printf '%s\n' "${cases[@]}" | golden_write "$name" "$args" "llama_oracle embed --query --doc" "$OUT/$name.json"
  echo "make_rerank_goldens: $OUT/$name.json (${#cases[@]} cases)"
  rm -f "$model"
done
