#!/usr/bin/env bash
# Runs the suite and checks that what ran is what the repository holds (docs/TESTING.md):
#   - every tests/test_*.c has its binary $BUILD/tests/test_* (a missing one fails, by name) and every
#     tests/cli/*.sh runs; MF_TESTS="test_quant engine.sh ..." narrows both to those names (an unknown
#     name fails);
#   - each prints "RESULT p passed, f failed, s skipped": a crash, no RESULT line, a non-zero exit with
#     0 failed, or 0 passed fails that test;
#   - each skip prints "SKIP name: reason"; their number must be the RESULT's, and each one must be in
#     tests/expected-skips.txt on a line whose condition holds here (else it fails); a listed skip whose
#     condition holds but that did not happen fails too, so the list is exact both ways;
#   - the last line is "N passed, N failed, N skipped" (CI reads it); the exit status is non-zero if
#     anything failed or nothing passed;
#   - MF_TEST_JOBS tests run at once (default: the CPU count, at most 4; 1 runs them one after another),
#     each with its own scratch folder MF_TEST_TMP/NAME/ (its log beside it, MF_TEST_TMP/NAME.log), and the
#     verdicts are printed in the list's order whatever order the tests end in.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export MF_BUILD="$BUILD"
export MF_TEST_TMP="${MF_TEST_TMP:-$BUILD/test-tmp}"
SKIPS=tests/expected-skips.txt
mkdir -p "$MF_TEST_TMP"
pass=0 fail=0 skip=0

# ---- the facts a skip condition may name ----
isa_level() { case ${1,,} in scalar) echo 0 ;; avx2) echo 1 ;; avx512) echo 2 ;; amx) echo 3 ;; *) echo -1 ;; esac; }
# The CPU's best kernel set, by the rule of src/quant/kernels.c (AVX2 = AVX2+FMA+F16C; AVX-512 =
# F+BW+VL+VNNI on top; AMX = AMX-TILE+AMX-INT8 on top, which Linux lists only when it manages the tile
# state), read from the OS rather than from minfer, so a detection bug shows as a mismatch.
cpu_isa() {
    case $(uname -m) in x86_64 | i?86 | amd64) ;; *) echo scalar; return ;; esac
    local flags
    flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null ||
        sysctl -n machdep.cpu.features machdep.cpu.leaf7_features 2>/dev/null | tr '[:upper:].' '[:lower:]_')
    flags=" ${flags//$'\n'/ } "
    has() { [[ $flags == *" $1 "* ]]; }
    if ! { has avx2 && has fma && has f16c; }; then echo scalar
    elif has avx512f && has avx512bw && has avx512vl && { has avx512_vnni || has avx512vnni; }; then
        if has amx_tile && has amx_int8; then echo amx; else echo avx512; fi
    else echo avx2; fi
}
f_cpu=$(cpu_isa)
# Under a user-mode emulator uname and /proc/cpuinfo are the host's: MF_TEST_CPU_ISA names the guest's.
if [ -n "${MF_TEST_CPU_ISA:-}" ]; then
    if [ "$(isa_level "$MF_TEST_CPU_ISA")" -ge 0 ]; then f_cpu=${MF_TEST_CPU_ISA,,}; else
        echo "FAIL MF_TEST_CPU_ISA='$MF_TEST_CPU_ISA' is not one of scalar|avx2|avx512|amx"; fail=$((fail + 1)); fi
fi
# vdpbf16ps (the BF16 batch tile's instruction, src/quant/float_avx512.c): the AVX-512 kernel set and
# avx512_bf16 (cpuid 7.1 EAX bit 5; Cooper Lake, Sapphire Rapids, Zen 4 on); never under an emulated guest
f_bf16dp=0
if [ "$(isa_level "$f_cpu")" -ge 2 ] && [ -z "${MF_TEST_CPU_ISA:-}" ] &&
    grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | grep -qw avx512_bf16; then f_bf16dp=1; fi
f_isa=$f_cpu # MINFER_ISA picks a kernel set the CPU has; anything else leaves the best one
if [ -n "${MINFER_ISA:-}" ] && [ "$(isa_level "$MINFER_ISA")" -ge 0 ] &&
    [ "$(isa_level "$MINFER_ISA")" -le "$(isa_level "$f_cpu")" ]; then f_isa=${MINFER_ISA,,}; fi
f_full=0 # test_conformance: getenv("MF_TEST_FULL") && atoi(...)
n=$(printf '%s' "${MF_TEST_FULL:-}" | sed -nE '1s/^[[:space:]]*[+-]?0*([0-9]+).*/\1/p')
[ -n "$n" ] && [ "$n" != 0 ] && f_full=1
f_cuda_build=0 # the library holds the nvcc objects (make CUDA=1)
ar t "$BUILD/libminfer.a" 2>/dev/null | grep -q '\.cu\.o$' && f_cuda_build=1
f_cuda_device=0 # a GPU, and CUDA not turned off (src/backend/cuda/cuda_entry.c checks the variable's presence)
[ -z "${MINFER_DISABLE_CUDA+set}" ] && nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && f_cuda_device=1
f_os=$(uname -s | tr '[:upper:]' '[:lower:]')
# The architecture the binaries were built for: uname's, or MF_TEST_ARCH under a user-mode emulator.
f_arch=${MF_TEST_ARCH:-$(uname -m)}
case $f_arch in amd64) f_arch=x86_64 ;; arm64) f_arch=aarch64 ;; esac
echo "run.sh: isa $f_isa (cpu $f_cpu), bf16dp $f_bf16dp, full $f_full, cuda-build $f_cuda_build, cuda-device $f_cuda_device, $f_os, $f_arch"

# cond_holds TOKEN...: 0 when every token holds, 1 when one does not, 2 on a token that names no fact.
cond_holds() {
    local tok t v neg lvl cur
    for tok in "$@"; do
        t=${tok#!}; neg=0; [ "$t" != "$tok" ] && neg=1
        case $t in
        always) v=1 ;;
        linux | darwin) v=0; [ "$f_os" = "$t" ] && v=1 ;;
        x86_64 | aarch64) v=0; [ "$f_arch" = "$t" ] && v=1 ;;
        emulated) v=0; [ "${MF_TEST_EMULATED:-}" = 1 ] && v=1 ;;
        full) v=$f_full ;;
        cuda-build) v=$f_cuda_build ;;
        cuda-device) v=$f_cuda_device ;;
        bf16dp) v=$f_bf16dp ;;
        isa\<* | cpu\<*)
            lvl=$(isa_level "${t#*<}"); [ "$lvl" -ge 0 ] || return 2
            if [ "${t%%<*}" = isa ]; then cur=$(isa_level "$f_isa"); else cur=$(isa_level "$f_cpu"); fi
            v=0; [ "$cur" -lt "$lvl" ] && v=1 ;;
        *) return 2 ;;
        esac
        [ "$neg" = 1 ] && v=$((1 - v))
        [ "$v" = 1 ] || return 1
    done
    return 0
}

# ---- what should run ----
names=() cmds=()
for src in tests/test_*.c; do
    [ -f "$src" ] || continue
    b=$(basename "$src" .c); names+=("$b"); cmds+=("bin")
done
for s in tests/cli/*.sh; do
    [ -f "$s" ] || continue
    names+=("$(basename "$s")"); cmds+=("cli")
done
known() { local x; for x in "${names[@]}"; do [ "$x" = "$1" ] && return 0; done; return 1; }
if [ -n "${MF_TESTS:-}" ]; then
    for w in $MF_TESTS; do
        known "$w" || { echo "FAIL MF_TESTS: no test named '$w' (tests/<name>.c or tests/cli/<name>)"; fail=$((fail + 1)); }
    done
fi
selected() { [ -z "${MF_TESTS:-}" ] && return 0; [[ " $MF_TESTS " == *" $1 "* ]]; }

# ---- the expected-skip list: "test | skip name | condition tokens (all must hold) | why" ----
es_test=() es_skip=() es_when=() es_holds=() es_seen=() es_where=()
if [ -f "$SKIPS" ]; then
    ln=0
    while IFS= read -r line || [ -n "$line" ]; do
        ln=$((ln + 1))
        [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
        IFS='|' read -r t s w _ <<<"$line"
        t=$(echo $t) s=$(echo "$s" | sed -E 's/^[[:space:]]+|[[:space:]]+$//g') w=$(echo $w)
        if [ -z "$t" ] || [ -z "$s" ] || [ -z "$w" ]; then
            echo "FAIL $SKIPS:$ln: wants 'test | skip name | condition | why', got: $line"; fail=$((fail + 1)); continue
        fi
        if ! known "$t"; then
            echo "FAIL $SKIPS:$ln: no test named '$t'"; fail=$((fail + 1)); continue
        fi
        # shellcheck disable=SC2086
        cond_holds $w; h=$?
        if [ "$h" = 2 ]; then
            echo "FAIL $SKIPS:$ln: unknown condition in '$w' (tokens: always linux darwin x86_64 aarch64 emulated full" \
                "cuda-build cuda-device bf16dp isa<L cpu<L, L = scalar|avx2|avx512|amx, each may start with !)"
            fail=$((fail + 1)); continue
        fi
        es_test+=("$t") es_skip+=("$s") es_when+=("$w") es_holds+=($((1 - h))) es_seen+=(0) es_where+=("$SKIPS:$ln")
    done <"$SKIPS"
fi

# check_skips NAME LOG SKIPPED: prints the verdict on each skip and sets nf to the number of failures.
check_skips() {
    local name=$1 log=$2 s=$3 line sname i listed holds n=0
    nf=0
    while IFS= read -r line; do
        n=$((n + 1))
        sname=${line#SKIP }; sname=${sname%%: *}
        listed=0 holds=0
        for i in "${!es_test[@]}"; do
            [ "${es_test[$i]}" = "$name" ] && [ "${es_skip[$i]}" = "$sname" ] || continue
            listed=1; es_seen[$i]=1
            [ "${es_holds[$i]}" = 1 ] && holds=1
        done
        if [ "$listed" = 0 ]; then
            echo "    FAIL unexpected skip (not in $SKIPS): $line"; nf=$((nf + 1))
        elif [ "$holds" = 0 ]; then
            echo "    FAIL skip listed in $SKIPS only for conditions that do not hold here: $line"; nf=$((nf + 1))
        else
            echo "    $line"
        fi
    done < <(grep -E '^SKIP ' "$log")
    if [ "$n" -ne "$s" ]; then
        echo "    FAIL $name reports $s skipped but printed $n 'SKIP name: reason' lines"; nf=$((nf + 1))
    fi
    for i in "${!es_test[@]}"; do
        [ "${es_test[$i]}" = "$name" ] && [ "${es_holds[$i]}" = 1 ] && [ "${es_seen[$i]}" = 0 ] || continue
        echo "    FAIL expected skip '${es_skip[$i]}' (${es_where[$i]}: ${es_when[$i]}) did not happen"
        nf=$((nf + 1))
    done
}

# verdict NAME: reads the finished test's log and exit status (MF_TEST_TMP/NAME.log, .rc) and prints its line.
verdict() {
    local name=$1
    local log="$MF_TEST_TMP/$name.log"
    local rc secs res p f s
    read -r rc secs <"$MF_TEST_TMP/$name.rc" 2>/dev/null || { rc=1 secs=0; }
    res=$(grep -E '^RESULT [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    if [ -z "$res" ]; then
        echo "FAIL $name: exited $rc without a RESULT line (log: $log)"; tail -n 20 "$log" | sed 's/^/    /'
        fail=$((fail + 1)); return
    fi
    p=$(echo "$res" | sed -E 's/^RESULT ([0-9]+) passed.*/\1/')
    f=$(echo "$res" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    s=$(echo "$res" | sed -nE 's/.* ([0-9]+) skipped.*/\1/p'); s=${s:-0}
    printf '%-32s %4d passed, %d failed, %d skipped  (%ds)\n' "$name" "$p" "$f" "$s" "$secs"
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "    FAIL $name: exit status $rc with 0 failed"; fi
    if [ "$p" -eq 0 ]; then f=$((f + 1)); echo "    FAIL $name: 0 passed (nothing it checks ran)"; fi
    grep -E '^FAIL|check failed' "$log" | head -n 30 | sed 's/^/    /'
    check_skips "$name" "$log" "$s"
    pass=$((pass + p)); fail=$((fail + f + nf)); skip=$((skip + s))
}

# launch NAME CMD...: runs CMD in the background in its own scratch folder; writes "rc seconds" to NAME.rc.
launch() {
    local name=$1; shift
    rm -rf "${MF_TEST_TMP:?}/$name" "$MF_TEST_TMP/$name.rc"
    mkdir -p "$MF_TEST_TMP/$name"
    (
        t0=$(date +%s)
        MF_TEST_TMP="$MF_TEST_TMP/$name" "$@" >"$MF_TEST_TMP/$name.log" 2>&1
        rc=$?
        echo "$rc $(($(date +%s) - t0))" >"$MF_TEST_TMP/$name.rc"
    ) &
}

# ---- the queue: what runs (a missing binary fails in its place in the list) ----
q_name=() q_cmd=()
for i in "${!names[@]}"; do
    name=${names[$i]}
    selected "$name" || continue
    if [ "${cmds[$i]}" = bin ] && [ ! -x "$BUILD/tests/$name" ]; then
        q_name+=("$name") q_cmd+=(missing)
    else
        q_name+=("$name") q_cmd+=("${cmds[$i]}")
    fi
done
jobs_max=${MF_TEST_JOBS:-}
if [ -z "$jobs_max" ]; then
    jobs_max=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
    [ "$jobs_max" -gt 4 ] 2>/dev/null && jobs_max=4
fi
if ! [[ $jobs_max =~ ^[0-9]+$ ]] || [ "$jobs_max" -lt 1 ]; then
    echo "FAIL MF_TEST_JOBS='${MF_TEST_JOBS:-}' is not a count of at least 1 (unset it for the CPU count)"
    fail=$((fail + 1)); jobs_max=1
fi

# Start tests while fewer than jobs_max run; print each verdict once every test before it has one.  A test
# has ended when its .rc exists (written as its last act); between looks the loop sleeps until some child
# ends (wait -n).
started=0 head=0 ended=0
while [ "$head" -lt "${#q_name[@]}" ]; do
    ended=0
    for ((k = head; k < started; k++)); do [ -f "$MF_TEST_TMP/${q_name[$k]}.rc" ] && ended=$((ended + 1)); done
    running=$((started - head - ended))
    while [ "$running" -lt "$jobs_max" ] && [ "$started" -lt "${#q_name[@]}" ]; do
        name=${q_name[$started]}
        case ${q_cmd[$started]} in
        bin) launch "$name" "$BUILD/tests/$name"; running=$((running + 1)) ;;
        cli) launch "$name" bash "tests/cli/$name"; running=$((running + 1)) ;;
        missing) : >"$MF_TEST_TMP/$name.rc" ;; # nothing to run: it has "ended"
        esac
        started=$((started + 1))
    done
    name=${q_name[$head]}
    if [ "${q_cmd[$head]}" = missing ]; then
        echo "FAIL $name: no binary $BUILD/tests/$name for tests/$name.c (run make BUILD=$BUILD)"
        fail=$((fail + 1)); head=$((head + 1))
    elif [ -f "$MF_TEST_TMP/$name.rc" ]; then
        verdict "$name"; head=$((head + 1))
    elif ! jobs -p | grep -q . && [ ! -f "$MF_TEST_TMP/$name.rc" ]; then
        echo "1 0" >"$MF_TEST_TMP/$name.rc" # its runner is gone without a word: the verdict says so
    else
        wait -n 2>/dev/null || sleep 0.05
    fi
done
wait
[ "$pass" -eq 0 ] && { echo "FAIL nothing passed"; fail=$((fail + 1)); }
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
