#!/usr/bin/env bash
# Replays every fuzz harness's committed seed corpus (tests/fuzz/corpus/<name>/, regress-* inputs
# included) through the harness built without libFuzzer ($MF_BUILD/fuzz-replay/fuzz_<name>, see
# tests/fuzz/replay.c): a crash or a broken property on a seed fails here, in every `make test` and, under
# the sanitizers, in `make asan`.  The fuzzing itself is `make fuzz` (docs/FUZZING.md).
cd "$(dirname "$0")/../.."
source tests/cli/lib.bash
B="${MF_BUILD:-build}"
n_harness=0
for src in tests/fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    short=${name#fuzz_}
    n_harness=$((n_harness + 1))
    bin="$B/fuzz-replay/$name"
    corpus="tests/fuzz/corpus/$short"
    if [ ! -x "$bin" ]; then bad "$name" "$bin is not built (make)"; continue; fi
    want=$(find "$corpus" -maxdepth 1 -type f 2>/dev/null | wc -l)
    if [ "$want" -eq 0 ]; then bad "$name" "no seeds in $corpus"; continue; fi
    out=$("$bin" "$corpus" 2>"$TMP/$name.err"); rc=$?
    if [ "$rc" -eq 0 ] && [ "$out" = "replayed $want inputs, 0 unreadable" ]; then
        ok "$name replays its $want seeds"
    else
        bad "$name" "exit $rc, '$out' (wanted $want inputs); $(grep -m 3 -E 'property failed|ERROR|runtime error' "$TMP/$name.err")"
    fi
done
[ "$n_harness" -ge 4 ] && ok "$n_harness harnesses found" || bad "harnesses" "only $n_harness in tests/fuzz"
finish
