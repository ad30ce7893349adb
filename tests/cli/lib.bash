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
# poison_lm_head SRC DST ROW F16: DST = SRC with row ROW's first block scale of the LM head set to the f16 bits
# F16 (0x7E00 NaN, 0x7C00 inf), so every forward's logits come out non-finite at vocab id ROW.  SRC is an
# untied tiny q8_0 model: output.weight [256, n_vocab], 8 blocks of 34 bytes per row.
poison_lm_head() {
    cp "$1" "$2" || return 1
    local data off
    data=$("$MINFER" info -m "$1" --no-metadata | sed -n 's/.*data section at byte \([0-9]*\).*/\1/p')
    off=$("$MINFER" info -m "$1" --no-metadata | awk '$2 == "output.weight" { print $NF }')
    python3 - "$2" "$((data + off + $3 * 272))" "$4" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    f.write(struct.pack("<H", int(sys.argv[3], 16)))
PY
}
