#!/usr/bin/env bash
# Runs every test binary (build/tests/test_*) and every CLI test script (tests/cli/*.sh), then prints
# one closing line "N passed, N failed" and exits non-zero if anything failed.
# Each test prints "RESULT p passed, f failed, s skipped"; a crash or a missing RESULT line is a failure.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export MF_BUILD="$BUILD"
export MF_TEST_TMP="${MF_TEST_TMP:-$BUILD/test-tmp}"
mkdir -p "$MF_TEST_TMP"
pass=0 fail=0 skip=0
run_one() {
    local name=$1; shift
    local log="$MF_TEST_TMP/$(basename "$name").log"
    local t0=$(date +%s)
    "$@" >"$log" 2>&1
    local rc=$? t1=$(date +%s)
    local res
    res=$(grep -E '^RESULT [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    if [ -z "$res" ]; then
        echo "FAIL $name: exited $rc without a RESULT line (log: $log)"; tail -n 20 "$log" | sed 's/^/    /'
        fail=$((fail + 1)); return
    fi
    local p f s
    p=$(echo "$res" | sed -E 's/^RESULT ([0-9]+) passed.*/\1/')
    f=$(echo "$res" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    s=$(echo "$res" | sed -nE 's/.* ([0-9]+) skipped.*/\1/p'); s=${s:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "FAIL $name: exit status $rc"; fi
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
    printf '%-32s %4d passed, %d failed, %d skipped  (%ds)\n' "$name" "$p" "$f" "$s" "$((t1 - t0))"
    grep -E '^(FAIL|SKIP)|check failed' "$log" | head -n 30 | sed 's/^/    /'
}
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    run_one "$(basename "$t")" "$t"
done
for s in tests/cli/*.sh; do
    [ -f "$s" ] || continue
    run_one "$(basename "$s")" bash "$s"
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
