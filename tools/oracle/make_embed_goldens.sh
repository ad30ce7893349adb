#!/usr/bin/env bash
# make_embed_goldens.sh - record llama.cpp's pooled embeddings for tests/test_embed.c (dev-only).
#
# For each model below it writes the synthetic GGUF with mf-genmodel and asks the llama.cpp oracle
# (tools/oracle/bin/llama_oracle embed: embeddings = true, one sequence in one ubatch, f16 KV as llama.cpp's
# default, flash attention off, the haswell CPU library) for the raw pooled vector of every text with the
# model's own pooling and with mean, cls and last.  The texts are tokenized by llama.cpp (add_special, special
# tokens parsed), so the golden also pins the tokenizer's BOS/EOS rule (--add-eos: Qwen3-Embedding's
# appended end-of-sequence token).  Writes tests/golden/embed/<name>.json with the generator arguments and the
# file's sha256 (the test reports a drifted generator as such).
#
# Usage: tools/oracle/make_embed_goldens.sh      Env: BUILD (default build; where mf-genmodel is), WORK
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=tools/oracle/golden_lib.bash
source tools/oracle/golden_lib.bash
golden_setup make_embed_goldens embed

TEXTS=("The quick brown fox jumps over the lazy dog." "Embeddings: 東京 is a city; naïve café, 3.14 <|im_start|> end")
# name | generator args
MODELS=(
  "qwen3-tiny-f16-last-eos|--arch qwen3 --type f16 --pooling last --add-eos --seed 11"
  "qwen2-tiny-q8_0-mean|--arch qwen2 --type q8_0 --pooling mean --seed 12"
)
for entry in "${MODELS[@]}"; do
  name=${entry%%|*} args=${entry#*|}
  golden_model "$name" "$args"
  cases=()
  for text in "${TEXTS[@]}"; do
    for pool in model mean cls last; do
      cases+=("$(python3 -c 'import json,sys; d=json.loads(sys.argv[3]); print(json.dumps({"text": sys.argv[1], "pooling": sys.argv[2], "llama_pooling": d["pooling"], "tokens": d["tokens"], "embedding": d["embedding"]}, ensure_ascii=False))' \
        "$text" "$pool" "$("$ORACLE" embed --model "$model" --text "$text" --pooling "$pool" --cpu-variant haswell --threads 2 2>/dev/null)")")
    done
  done
  printf '%s\n' "${cases[@]}" | golden_write "$name" "$args" "llama_oracle embed" "$OUT/$name.json"
  echo "make_embed_goldens: $OUT/$name.json (${#cases[@]} cases)"
  rm -f "$model"
done
