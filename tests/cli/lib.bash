# Shared helpers for CLI tests (sourced).  Each script calls ok/bad/skip and ends with `finish`; a skip
# prints "SKIP name: reason" and is counted, and tests/run.sh holds it against tests/expected-skips.txt.
MINFER="${MF_BUILD:-build}/minfer"
GEN="${MF_BUILD:-build}/mf-genmodel"
TMP="${MF_TEST_TMP:-build/test-tmp}"
mkdir -p "$TMP"
_p=0 _f=0 _s=0
ok() { echo "PASS $1"; _p=$((_p + 1)); }
bad() { echo "FAIL $1: $2"; _f=$((_f + 1)); }
skip() { echo "SKIP $1: $2"; _s=$((_s + 1)); }
# expect NAME WANT_RC WANT_STDERR_SUBSTRING -- cmd...
expect() {
    local name=$1 want_rc=$2 want=$3; shift 4
    local out err rc
    out=$("$@" 2>"$TMP/_err") ; rc=$?
    err=$(cat "$TMP/_err")
    if [ "$rc" -ne "$want_rc" ]; then bad "$name" "exit $rc, wanted $want_rc; stderr: $err"; return; fi
    if [ -n "$want" ] && [[ "$err" != *"$want"* ]]; then bad "$name" "stderr lacks '$want': $err"; return; fi
    ok "$name"
}
finish() { echo "RESULT $_p passed, $_f failed, $_s skipped"; [ "$_f" -eq 0 ]; }
