#!/usr/bin/env bash
# build.sh - build the dev-only llama.cpp oracle programs (tools/oracle/*.c -> tools/oracle/bin/<name>).
#
# Idempotent. It never builds llama.cpp: it links the prebuilt CPU libraries that node-llama-cpp@3.21.1
# ships (llama.cpp commit 80fb11a) and takes the headers of that exact commit from the git bundle inside
# the npm package. Steps:
#   1. `npm ci` in tools/oracle when node_modules is missing;
#   2. clone node_modules/node-llama-cpp/llama/gitRelease.bundle into tools/oracle/llama.cpp (git-ignored)
#      when missing, only for include/ and ggml/include/;
#   3. compile every tools/oracle/*.c with -I llama.cpp/include -I llama.cpp/ggml/include and an rpath to the
#      prebuilt library folder. Each .c may name its own libraries in a line near its top:
#          // oracle-libs: -lggml-base
#      (tokens are passed to the linker as written; `-lllama`, `-lggml` and `-lllama-common` are mapped to the
#      versioned file names the prebuilt folder has; a CPU variant links as e.g. -lggml-cpu-haswell). Without
#      such a line: -lllama -lggml -lggml-base. Extra compiler flags go in a line
#          // oracle-cflags: -I../../tests/golden/quant
#      (paths relative to tools/oracle). Both lines may also be written as `/* oracle-libs: ... */` or as a
#      ` * oracle-libs: ...` line inside a block comment; only the first 40 lines are read.
#   A file that fails to compile is reported and the others are still built; the exit status is then 1.
#
# Usage: tools/oracle/build.sh [name ...]     (names without .c; default: every *.c)
# Env:   CC (default cc), CFLAGS (default -O2 -g), ORACLE_FORCE=1 to rebuild up-to-date binaries.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

if [ ! -d node_modules/node-llama-cpp ]; then
    echo "build.sh: node_modules missing, running npm ci" >&2
    npm ci --no-audit --no-fund >&2
fi

libdir="$here/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
bundle="$here/node_modules/node-llama-cpp/llama/gitRelease.bundle"
want_commit="80fb11ac73e66d89eae2c6a91d8a77428fa733ed"

for f in libllama.v0.4.0.so libggml.v0.4.0.so libggml-base.so; do
    [ -f "$libdir/$f" ] || { echo "build.sh: $libdir/$f not found (node-llama-cpp@3.21.1 linux-x64 prebuilt)" >&2; exit 1; }
done

if [ ! -f llama.cpp/include/llama.h ]; then
    [ -f "$bundle" ] || { echo "build.sh: $bundle not found" >&2; exit 1; }
    mkdir -p bin                      # git-ignored, so an interrupted clone leaves nothing untracked
    rm -rf bin/.llama.cpp.tmp llama.cpp
    git -c advice.detachedHead=false clone --quiet "$bundle" bin/.llama.cpp.tmp >&2
    mv bin/.llama.cpp.tmp llama.cpp
fi
have_commit="$(git -C llama.cpp rev-parse HEAD 2>/dev/null || echo unknown)"
if [ "$have_commit" != "$want_commit" ]; then
    echo "build.sh: warning: tools/oracle/llama.cpp is at $have_commit, the prebuilt libraries are $want_commit" >&2
fi

# $ORIGIN-relative, so the tree still works when copied elsewhere (e.g. onto another machine)
rpath='$ORIGIN/../node_modules/@node-llama-cpp/linux-x64/bins/linux-x64'
CC="${CC:-cc}"
CFLAGS="${CFLAGS:--O2 -g}"
mkdir -p bin

# the text after "<key>:" in the first matching comment line among a file's first 40 lines
directive() {
    head -n 40 "$1" | sed -n -E "s@^[[:space:]]*(//|/\*|\*)[[:space:]]*$2:[[:space:]]*@@p" | head -n 1 |
        sed -E 's@[[:space:]]*\*/[[:space:]]*$@@'
}

map_lib() {
    case "$1" in
        -lllama) echo "-l:libllama.v0.4.0.so" ;;
        -lggml) echo "-l:libggml.v0.4.0.so" ;;
        -lllama-common) echo "-l:libllama-common.so" ;;
        *) echo "$1" ;;
    esac
}

if [ $# -gt 0 ]; then
    srcs=()
    for n in "$@"; do srcs+=("${n%.c}.c"); done
else
    shopt -s nullglob
    srcs=(*.c)
fi

built=0
failed=()
for src in "${srcs[@]}"; do
    [ -f "$src" ] || { echo "build.sh: $src not found" >&2; exit 1; }
    name="${src%.c}"
    out="bin/$name"
    if [ -z "${ORACLE_FORCE:-}" ] && [ -x "$out" ] && [ "$out" -nt "$src" ] && [ "$out" -nt "$here/build.sh" ]; then
        continue
    fi
    spec="$(directive "$src" oracle-libs)"
    [ -n "$spec" ] || spec="-lllama -lggml -lggml-base"
    extra="$(directive "$src" oracle-cflags)"
    libs=()
    for tok in $spec; do libs+=("$(map_lib "$tok")"); done
    echo "build.sh: $CC $src -> $out (${libs[*]})" >&2
    # shellcheck disable=SC2086
    if ! "$CC" -std=c11 $CFLAGS -Wall -Wextra -D_GNU_SOURCE $extra \
        -I llama.cpp/include -I llama.cpp/ggml/include \
        -DORACLE_LLAMA_COMMIT="\"$have_commit\"" \
        -o "$out" "$src" \
        -L "$libdir" "${libs[@]}" -Wl,-rpath,"$rpath" -lm -lpthread -ldl; then
        echo "build.sh: FAILED $src" >&2
        failed+=("$src")
        continue
    fi
    built=$((built + 1))
done
echo "build.sh: $built built, ${#failed[@]} failed${failed:+ (${failed[*]})}, binaries in tools/oracle/bin/" >&2
[ ${#failed[@]} -eq 0 ]
