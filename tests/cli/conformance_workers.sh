#!/usr/bin/env bash
# test_conformance runs its goldens on MF_CONF_JOBS worker processes.  Invariants: what it prints is what the
# one-process run (MF_CONF_JOBS=1) prints, in golden order; a failing golden fails the test from any worker;
# a worker that dies inside a golden fails the test and names that golden; a bad MF_CONF_JOBS is refused.
source "$(dirname "$0")/lib.bash"
CONF="${MF_BUILD:-build}/tests/test_conformance"
D="$TMP/conformance-workers"
rm -rf "$D" && mkdir -p "$D/ok-drift" "$D/drift-dies" "$D/tmp"
G=tests/golden/conformance
# a: a real golden (it passes);  b: the same model with a wrong sha256 (the generator "drifted": it fails);
# c: a real golden whose generator kills its worker
cp "$G/qwen2-tiny-q4_0.json" "$D/ok-drift/a.json"
sed -e 's/"name": *"qwen2-tiny-q4_0"/"name": "b-drift"/' \
    -e 's/"sha256": *"[0-9a-f]*"/"sha256": "0000000000000000000000000000000000000000000000000000000000000000"/' \
    "$G/qwen2-tiny-q4_0.json" >"$D/ok-drift/b.json"
cp "$D/ok-drift/b.json" "$D/drift-dies/b.json" # the dying worker's partner needs no real golden (under qemu each costs ~50 s)
sed -e 's/"name": *"qwen2-tiny-q4_0"/"name": "c-dies"/' "$G/qwen2-tiny-q4_0.json" >"$D/drift-dies/c.json"
grep -q '"b-drift"' "$D/ok-drift/b.json" && grep -q '"c-dies"' "$D/drift-dies/c.json" || bad "golden copies" "sed missed"

conf() { # conf DIR JOBS OUT [ENV...]: runs the test over the goldens in DIR; its exit status
    local dir=$1 jobs=$2 out=$3; shift 3
    env MF_GOLDEN_DIR="$dir" MF_CONF_JOBS="$jobs" MF_TEST_TMP="$D/tmp" "$@" "$CONF" >"$out" 2>&1
}

conf "$D/ok-drift" 2 "$D/par.out"; rc=$?
[ "$rc" -ne 0 ] && grep -q '^FAIL test_conformance' "$D/par.out" &&
    grep -q 'b-drift: the generator drifted' "$D/par.out" &&
    ok "a golden failing in a worker fails the test" || bad "drift in a worker" "exit $rc: $(cat "$D/par.out")"
grep -q '^  2 goldens on 2 worker processes' "$D/par.out" && ok "two goldens ran on two workers" ||
    bad "worker count line" "$(head -3 "$D/par.out")"
conf "$D/ok-drift" 1 "$D/one.out"
if diff <(grep -v ' worker processes (MF_CONF_JOBS)$' "$D/par.out") "$D/one.out" >"$D/diff"; then
    ok "two workers print what one process prints, line for line"
else
    bad "parallel and serial output differ" "$(cat "$D/diff")"
fi
grep -q '^  measured over 2 goldens: ' "$D/par.out" && grep -q '^  measured qwen2-tiny-q4_0 ' "$D/par.out" &&
    ok "the good golden's rows and the totals are printed" || bad "measured lines" "$(cat "$D/par.out")"

# a generator that kills the worker running golden c-dies (its grandparent: generator <- sh <- worker) and
# passes every other golden to the generator the test would have used
real=${MF_TEST_GENMODEL:-${MF_BUILD:-build}/mf-genmodel}
case $real in /*) ;; *) real=$PWD/$real ;; esac
cat >"$D/gen.sh" <<EOF
#!/usr/bin/env bash
case "\$*" in *conf-c-dies.gguf*) kill -KILL "\$(cut -d' ' -f4 /proc/\$PPID/stat)"; sleep 5; exit 9 ;; esac
exec "$real" "\$@"
EOF
chmod +x "$D/gen.sh"
conf "$D/drift-dies" 2 "$D/dies.out" MF_TEST_GENMODEL="$D/gen.sh"; rc=$?
[ "$rc" -ne 0 ] && grep -q 'c.json: no verdict (its worker died running it' "$D/dies.out" &&
    grep -q 'conformance worker [01] ended with signal 9' "$D/dies.out" &&
    grep -q 'b-drift: the generator drifted' "$D/dies.out" &&
    ok "a worker killed inside a golden fails the test and names the golden" ||
    bad "dead worker" "exit $rc: $(cat "$D/dies.out")"

for v in 0 x 2x 65; do
    conf "$D/ok-drift" "$v" "$D/bad.out"; rc=$?
    [ "$rc" -ne 0 ] && grep -q "MF_CONF_JOBS='$v' is not a number of processes from 1 to 64" "$D/bad.out" &&
        ok "MF_CONF_JOBS=$v is refused" || bad "MF_CONF_JOBS=$v" "exit $rc: $(cat "$D/bad.out")"
done
finish
