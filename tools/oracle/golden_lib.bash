# golden_lib.bash - what make_embed_goldens.sh and make_rerank_goldens.sh share (sourced, dev-only): the
# tools, the synthetic model of a golden, and the golden file written from its cases.

# golden_setup SCRIPT KIND: sets BUILD (default build), GEN, ORACLE, OUT (tests/golden/KIND) and WORK (default
# $BUILD/KIND-work), and stops naming what to build when mf-genmodel or the oracle is missing.
golden_setup() {
  BUILD=${BUILD:-build}
  GEN="$BUILD/mf-genmodel"
  ORACLE=tools/oracle/bin/llama_oracle
  OUT=tests/golden/$2
  WORK=${WORK:-$BUILD/$2-work}
  [ -x "$GEN" ] || { echo "$1: $GEN not built (make BUILD=$BUILD)" >&2; exit 1; }
  [ -x "$ORACLE" ] || { echo "$1: $ORACLE not built (tools/oracle/build.sh llama_oracle)" >&2; exit 1; }
  mkdir -p "$OUT" "$WORK"
}

# golden_model NAME ARGS: writes $WORK/NAME.gguf with mf-genmodel ARGS; sets model, sha (its sha256) and
# commit (the llama.cpp commit of the oracle's haswell library).
golden_model() {
  model="$WORK/$1.gguf"
  # shellcheck disable=SC2086
  "$GEN" -q -o "$model" $2
  sha=$(sha256sum "$model" | cut -c1-64)
  commit=$("$ORACLE" info --model "$model" --vocab-only --cpu-variant haswell 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["llama_cpp_commit"])')
}

# golden_write NAME ARGS TOOL FILE: the cases (one JSON object a line on stdin) into FILE, with the generator
# arguments, the model's sha256 (the tests report a drifted generator as such) and the oracle's settings.
golden_write() {
  python3 -c '
import json, sys
name, args, tool, sha, commit, path = sys.argv[1:7]
cases = [json.loads(l) for l in sys.stdin if l.strip()]
doc = {"name": name, "generator": {"args": args.split()}, "sha256": sha,
       "oracle": {"tool": tool, "commit": commit, "cpu_variant": "haswell", "kv": "f16",
                  "flash_attn": "off", "ubatch": "all tokens"},
       "cases": cases}
json.dump(doc, open(path, "w"), ensure_ascii=False, indent=None, separators=(",", ":"))
open(path, "a").write("\n")
' "$1" "$2" "$3" "$sha" "$commit" "$4"
}
