# Shared helpers for CLI tests (sourced).  Each script calls ok/bad and ends with `finish`.
MINFER="${MF_BUILD:-build}/minfer"
GEN="${MF_BUILD:-build}/mf-genmodel"
TMP="${MF_TEST_TMP:-build/test-tmp}"
mkdir -p "$TMP"
_p=0 _f=0
ok() { echo "PASS $1"; _p=$((_p + 1)); }
bad() { echo "FAIL $1: $2"; _f=$((_f + 1)); }
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
finish() { echo "RESULT $_p passed, $_f failed, 0 skipped"; [ "$_f" -eq 0 ]; }
