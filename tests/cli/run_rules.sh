#!/usr/bin/env bash
# tests/run.sh's rules, on a fake repository (a copy of run.sh and lib.bash, fake test binaries that print
# what a broken test would): a missing binary, 0 passed, an unexpected / unlisted / uncounted skip, a listed
# skip that did not happen, a crash, a bad MF_TESTS name all fail; a listed skip whose condition holds passes.
# The fake repository has no run_rules.sh, so nothing recurses.
cd "$(dirname "$0")/../.."
source tests/cli/lib.bash
R="$TMP/run_rules"
SUMMARY='^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$'

fresh() {
    rm -rf "$R"
    mkdir -p "$R/tests/cli" "$R/build/tests"
    cp tests/run.sh "$R/tests/run.sh"
    cp tests/cli/lib.bash "$R/tests/cli/lib.bash"
    : >"$R/tests/expected-skips.txt"
}
# fake_bin NAME: a test binary whose script is stdin, and its tests/NAME.c
fake_bin() {
    : >"$R/tests/$1.c"
    { echo '#!/usr/bin/env bash'; cat; } >"$R/build/tests/$1"
    chmod +x "$R/build/tests/$1"
}
fake_cli() { cat >"$R/tests/cli/$1"; }
skips() { cat >"$R/tests/expected-skips.txt"; }
# run_fake [VAR=value...]: run.sh in the fake tree, none of this run's own settings leaking in
run_fake() {
    env -u MF_TESTS -u MINFER_ISA -u MF_TEST_CPU_ISA -u MF_TEST_FULL -u MF_TEST_TMP -u MF_BUILD BUILD=build "$@" \
        bash "$R/tests/run.sh" >"$R/out" 2>&1
    rc=$?
    last=$(tail -n 1 "$R/out")
}
show() { tr '\n' '~' <"$R/out" | head -c 700; }
want_pass() { # name summary-line
    if [ "$rc" -eq 0 ] && [ "$last" = "$2" ]; then ok "$1"; else bad "$1" "exit $rc, last '$last', wanted '$2': $(show)"; fi
}
want_fail() { # name substring-of-output
    if [ "$rc" -ne 0 ] && [[ $last =~ $SUMMARY ]] && [[ $last != *" 0 failed,"* ]] && grep -qF -- "$2" "$R/out"; then
        ok "$1"
    else bad "$1" "exit $rc, last '$last', wanted a failure naming '$2': $(show)"; fi
}
good_a() { fake_bin test_a <<'EOF'
echo "PASS one"; echo "RESULT 1 passed, 0 failed, 0 skipped"
EOF
}
skip_a() { fake_bin test_a <<'EOF'
echo "PASS one"; echo "SKIP t1: not here"; echo "RESULT 1 passed, 0 failed, 1 skipped"
EOF
}

fresh; good_a
fake_cli ok.sh <<'EOF'
echo "RESULT 2 passed, 0 failed, 0 skipped"
EOF
run_fake; want_pass "binaries and CLI scripts both run" "3 passed, 0 failed, 0 skipped"

: >"$R/tests/test_b.c"
run_fake; want_fail "a tests/test_*.c without its binary fails by name" "test_b: no binary build/tests/test_b"
run_fake MF_TESTS="test_a ok.sh"; want_pass "MF_TESTS narrows the run" "3 passed, 0 failed, 0 skipped"
run_fake MF_TESTS="test_a test_zz"; want_fail "MF_TESTS with an unknown name fails" "no test named 'test_zz'"

fresh; fake_bin test_a <<'EOF'
echo "RESULT 0 passed, 0 failed, 0 skipped"
EOF
good_b() { fake_bin test_b <<'EOF'
echo "RESULT 4 passed, 0 failed, 0 skipped"
EOF
}
good_b
run_fake; want_fail "a test with 0 passed fails" "test_a: 0 passed"

fresh
run_fake; want_fail "nothing to run fails" "nothing passed"
[ "$last" = "0 passed, 1 failed, 0 skipped" ] && ok "an empty run closes with its summary" || bad "empty summary" "$last"

fresh; fake_bin test_a <<'EOF'
echo "PASS x"; kill -SEGV $$
EOF
run_fake; want_fail "a crash without RESULT fails" "test_a: exited"
fresh; fake_bin test_a <<'EOF'
echo "RESULT 1 passed, 0 failed, 0 skipped"; exit 3
EOF
run_fake; want_fail "a non-zero exit with 0 failed fails" "exit status 3"

fresh; skip_a
run_fake; want_fail "an unlisted skip fails" "unexpected skip (not in tests/expected-skips.txt): SKIP t1: not here"
skips <<'EOF'
# comment
test_a | t1 | always | fake
EOF
run_fake; want_pass "a listed skip passes" "1 passed, 0 failed, 1 skipped"
good_a
run_fake; want_fail "a listed skip that did not happen fails" "expected skip 't1' (tests/expected-skips.txt:2: always) did not happen"

skip_a
skips <<'EOF'
test_a | t1 | full | runs only with MF_TEST_FULL
EOF
run_fake; want_fail "a skip whose condition does not hold fails" "only for conditions that do not hold here"
run_fake MF_TEST_FULL=1; want_pass "the condition 'full' follows MF_TEST_FULL" "1 passed, 0 failed, 1 skipped"
skips <<'EOF'
test_a | t1 | !full | does not run with MF_TEST_FULL
EOF
run_fake MF_TEST_FULL=1; want_fail "'!full' with MF_TEST_FULL=1 fails the skip" "do not hold here"
run_fake MF_TEST_FULL=0; want_pass "MF_TEST_FULL=0 is not full" "1 passed, 0 failed, 1 skipped"
skips <<'EOF'
test_a | t1 | isa<avx2 | needs AVX2
EOF
run_fake MINFER_ISA=scalar; want_pass "isa<avx2 holds under MINFER_ISA=scalar" "1 passed, 0 failed, 1 skipped"
if grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo && grep -qw f16c /proc/cpuinfo; then
    run_fake MINFER_ISA=avx2; want_fail "isa<avx2 does not hold under MINFER_ISA=avx2" "do not hold here"
fi
skips <<'EOF'
test_a | t1 | cpu<avx2 | an emulated CPU
EOF
run_fake MF_TEST_CPU_ISA=scalar; want_pass "MF_TEST_CPU_ISA names the CPU's kernel set" "1 passed, 0 failed, 1 skipped"
run_fake MF_TEST_CPU_ISA=sse9; want_fail "an unknown MF_TEST_CPU_ISA fails" "MF_TEST_CPU_ISA='sse9' is not one of"
skips <<'EOF'
test_a | t1 | full | one line
test_a | t1 | linux | or another
EOF
if [ "$(uname -s)" = Linux ]; then
    run_fake; want_pass "several lines for one skip: any may hold" "1 passed, 0 failed, 1 skipped"
fi
skips <<'EOF'
test_a | t1 | fulll | a typo
EOF
run_fake; want_fail "an unknown condition fails" "tests/expected-skips.txt:1: unknown condition in 'fulll'"
skips <<'EOF'
test_q | t1 | always | a test that does not exist
EOF
run_fake; want_fail "a list line naming no test fails" "tests/expected-skips.txt:1: no test named 'test_q'"

fake_bin test_a <<'EOF'
echo "SKIP t1: uncounted"; echo "RESULT 1 passed, 0 failed, 0 skipped"
EOF
skips <<'EOF'
test_a | t1 | always | fake
EOF
run_fake; want_fail "an uncounted SKIP line fails" "reports 0 skipped but printed 1"
fake_bin test_a <<'EOF'
echo "RESULT 1 passed, 0 failed, 1 skipped"
EOF
run_fake; want_fail "a counted skip without its SKIP line fails" "reports 1 skipped but printed 0"

fresh
fake_cli s.sh <<'EOF'
cd "$(dirname "$0")/../.."
source tests/cli/lib.bash
ok "a"
skip "s1" "the reason"
finish
EOF
skips <<'EOF'
s.sh | s1 | always | fake
EOF
run_fake; want_pass "lib.bash's skip is counted in the RESULT line" "1 passed, 0 failed, 1 skipped"

# MF_TEST_JOBS: test_a can only pass if test_b ran while it waited (so two ran at once), and its verdict
# still comes first; each test has its own scratch folder MF_TEST_TMP/NAME.
fresh
fake_bin test_a <<'EOF'
for _ in $(seq 60); do [ -f "$MF_TEST_TMP/../b-ran" ] && break; sleep 0.05; done
f=0
[ -f "$MF_TEST_TMP/../b-ran" ] && echo "PASS saw b" || { echo "FAIL b did not run meanwhile"; f=1; }
[ "$(basename "$MF_TEST_TMP")" = test_a ] && [ -d "$MF_TEST_TMP" ] || { echo "FAIL folder $MF_TEST_TMP"; f=1; }
echo "RESULT 2 passed, $f failed, 0 skipped"
EOF
fake_bin test_b <<'EOF'
: >"$MF_TEST_TMP/../b-ran"; echo "RESULT 1 passed, 0 failed, 0 skipped"
EOF
run_fake MF_TEST_JOBS=2; want_pass "MF_TEST_JOBS=2 runs two tests at once, each in its own folder" "3 passed, 0 failed, 0 skipped"
if [ "$(grep -oE '^test_[ab]' "$R/out" | tr '\n' ' ')" = "test_a test_b " ]; then ok "verdicts in the list's order"
else bad "verdict order" "$(show)"; fi
rm -f "$R/build/test-tmp/b-ran"
run_fake MF_TEST_JOBS=1; want_fail "MF_TEST_JOBS=1 runs one at a time" "b did not run meanwhile"
run_fake MF_TEST_JOBS=0; want_fail "MF_TEST_JOBS=0 fails" "MF_TEST_JOBS='0' is not a count"

rm -rf "$R"
finish
