#!/usr/bin/env bash
# scripts/amx-check.sh - the prepared check of the AMX kernel set (issue 13; docs/PERFORMANCE.md, "AMX
# prefill kernels"), for the first session whose machine has AMX (`grep -c amx_int8 /proc/cpuinfo` > 0).
# Elsewhere the AMX kernels run only over tests/support/amx_emu.c's model of the tiles; this runs the real
# instructions and measures them.  In order, stopping at the first broken check (the last line is PASS or
# FAIL; exit status 0 or 1):
#   1. the CPU has AMX-INT8 and Linux grants the tile state: test_quant's test_amx_kernels PASSES (a SKIP
#      prints its reason, e.g. the refused permission, and fails here), and so does the emulated one;
#   2. the kernel and conformance tests with MINFER_ISA=amx through tests/run.sh (skips held both ways);
#   3. every conformance row bitwise the same under amx as under avx512: test_conformance's per-golden
#      lines (every max |dlogit|, greedy count and headline) diffed, with only the timings taken out;
#   4. the kernel sets against each other: `minfer bench -p 512 -n 0 -r 3` with MINFER_ISA=avx512 and amx,
#      alternated for 2 rounds, on the Q8_0, Q4_0 and Q4_K_M (Qwen2.5-0.5B) and Q8_0 (Qwen3-0.6B) files;
#   4b. decode: where a step's time goes (MINFER_PROFILE=1 on the Q4_0 and Q4_K_M files, in OUT/profile-*.txt),
#      and the x16 GEMV's software prefetch: the default build's (4 KiB ahead) against none and 8 KiB
#      (builds with -DX16_PF_BYTES, in BUILD-pf0 / BUILD-pf8192), tg128 alternated, Q8_0, Q4_0 and Q4_K_M;
#      and the GEMV's q4_0 high nibbles kept in place (default) against shifted down (-DX16_Q4_HI_INPLACE=0,
#      in BUILD-q4s), tg128 of the Q4_0 file alternated; and the read-ahead at a decode step's barriers
#      (default, 512 KiB) against none and 1 MiB (-DMF_CPU_AHEAD_KB=0 / 1024, in BUILD-ra0 / BUILD-ra1024),
#      tg128 of the Q8_0 and Q4_0 files alternated;
#   5. unless --no-compare: bench/compare --reps 5 (llama.cpp beside it; the issue's bars), into OUT, against
#      the fastest of several llama.cpp builds per figure (--llama LIST, default: the prebuilt pick, which
#      is sapphirerapids with AMX, the prebuilt icelake without AMX, and a llama-bench on PATH if any).
# Every output goes to OUT (default bench/out-amx): amx-check.txt is the summary.
# --rehearse runs the same steps on a machine without AMX with avx512 in amx's place (step 1 then only asks
# for the emulated test), to try the script before an AMX machine comes: its figures compare nothing.
#
# Usage: scripts/amx-check.sh [--out DIR] [--build DIR] [--no-compare] [--llama LIST] [--rehearse] [-h]
set -uo pipefail
cd "$(dirname "$0")/.."

out=bench/out-amx build=${BUILD:-build} compare=1 amx=amx llama=auto,variant:icelake
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=${2:?--out needs a folder}; shift 2 ;;
        --build) build=${2:?--build needs a folder}; shift 2 ;;
        --no-compare) compare=0; shift ;;
        --llama) llama=${2:?--llama needs a list (bench/compare --help)}; shift 2 ;;
        --rehearse) amx=avx512; shift ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "amx-check: unknown argument '$1' (--help)" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
sum="$out/amx-check.txt"
: >"$sum"
say() { echo "$*" | tee -a "$sum"; }
fail() { say "FAIL: $*"; say "FAIL"; exit 1; }

say "amx-check $(date -u +%FT%TZ) at $(git rev-parse --short HEAD 2>/dev/null || echo '?'): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
[ "$amx" = amx ] || say "REHEARSAL: avx512 stands in for amx below, so nothing here measures AMX"
[ "$amx" != amx ] || [ "$(grep -c amx_int8 /proc/cpuinfo)" -gt 0 ] ||
    fail "this CPU has no amx_int8 in /proc/cpuinfo: nothing to check here (--rehearse tries the script)"

# ---- 0. the build ----
make BUILD="$build" -j"$(nproc)" >"$out/make.log" 2>&1 || fail "make failed ($out/make.log)"

# ---- 1. the real tiles ----
"$build/tests/test_quant" >"$out/test_quant.log" 2>&1
grep -E '^(PASS|SKIP|FAIL) test_amx_kernels' "$out/test_quant.log" | tee -a "$sum"
[ "$amx" != amx ] || grep -q '^PASS test_amx_kernels$' "$out/test_quant.log" ||
    fail "test_amx_kernels did not pass on this AMX machine ($out/test_quant.log; MINFER_LOG=info says why a tile state was refused)"
grep -q '^PASS test_amx_kernels_emulated$' "$out/test_quant.log" || fail "test_amx_kernels_emulated did not pass"

# ---- 2. the kernel and conformance tests under amx ----
MINFER_ISA=$amx MF_TESTS="test_quant test_cpu_ops test_op_matrix test_conformance" MF_TEST_TMP="$build/test-tmp-amx" \
    BUILD="$build" bash tests/run.sh >"$out/run-amx.log" 2>&1 || fail "tests/run.sh with MINFER_ISA=$amx ($out/run-amx.log)"
say "tests with MINFER_ISA=$amx: $(tail -n 1 "$out/run-amx.log")"

# ---- 3. conformance bitwise amx = avx512 ----
# In step 2's scratch folder, so the goldens' models are there; a run that measured nothing (its workers
# died, no model) must fail here, not compare equal to another such run.
ngold=$(ls tests/golden/conformance/*.json | grep -vc '/full-')
conf() { # conf ISA: test_conformance's per-golden lines, timings taken out, in OUT/conformance-ISA.log
    MINFER_ISA=$1 MF_BUILD="$build" MF_TEST_TMP="$build/test-tmp-amx/test_conformance" "$build/tests/test_conformance" \
        >"$out/conformance-$1.raw" 2>&1
    local rc=$?
    sed -E 's/\([0-9.]+ ?m?s\)//g; /^RESULT/d' "$out/conformance-$1.raw" >"$out/conformance-$1.log"
    [ "$rc" -eq 0 ] || fail "test_conformance with MINFER_ISA=$1 exited $rc ($out/conformance-$1.raw)"
    local n # goldens with a verdict (a golden with a second layout has a second 'measured' line)
    n=$(grep '^  measured ' "$out/conformance-$1.log" | grep -v '^  measured over ' | awk '{ print $2 }' | sort -u | wc -l)
    [ "$n" -eq "$ngold" ] || fail "test_conformance with MINFER_ISA=$1 measured $n goldens, not $ngold ($out/conformance-$1.raw)"
}
conf avx512
conf $amx
if ! diff "$out/conformance-avx512.log" "$out/conformance-$amx.log" >"$out/conformance.diff"; then
    fail "test_conformance differs between avx512 and amx ($out/conformance.diff): the AMX kernels must be bitwise"
fi
say "conformance amx = avx512 line for line ($(wc -l <"$out/conformance-$amx.log") lines, $ngold goldens measured): $(grep -m1 'measured over' "$out/conformance-$amx.log" | sed 's/^ *//')"

# ---- 4. avx512 vs amx kernels, the same files ----
# bench/compare's names and folder, so step 5 finds the files made
models="$out/compare/models"
mkdir -p "$models"
gen() { # gen ARCH PRESET TYPE
    local f="$models/$1-$2-$3.gguf"
    [ -f "$f" ] || { "$build/mf-genmodel" --arch "$1" --preset "$2" --type "$3" -q -o "$f.tmp" && mv "$f.tmp" "$f"; } ||
        fail "mf-genmodel --arch $1 --preset $2 --type $3"
}
gen qwen2 qwen2.5-0.5b q8_0
gen qwen2 qwen2.5-0.5b q4_0
gen qwen2 qwen2.5-0.5b q4_k_m
gen qwen3 qwen3-0.6b q8_0
# tps ISA BINARY MODEL ARGS...: the t/s of one `minfer bench` on 2 threads (its csv's last row), empty if none
tps() {
    local isa=$1 bin=$2 m=$3
    shift 3
    MINFER_ISA=$isa "$bin" bench -m "$models/$m.gguf" -t 2 -o csv "$@" 2>>"$out/bench.err" |
        tail -n 1 | awk -F'","' '{ printf "%.1f", $(NF-1) }'
}
# row LABEL VARIANT...: say one line of 2 rounds, each VARIANT timed in turn by `measure VARIANT` (defined
# before each use; "?" where it printed nothing)
row() {
    local line="  $1:" round v t
    shift
    for round in 1 2; do
        for v in "$@"; do
            t=$(measure "$v")
            line="$line $v ${t:-?}"
        done
    done
    say "$line"
}
say "pp512 t/s, 2 threads, avx512 vs amx kernels alternated, 2 rounds x 3 reps:"
measure() { tps "$1" "$build/minfer" "$f" -p 512 -n 0 -r 3; }
for f in qwen2-qwen2.5-0.5b-q8_0 qwen2-qwen2.5-0.5b-q4_0 qwen2-qwen2.5-0.5b-q4_k_m qwen3-qwen3-0.6b-q8_0; do
    row "$f" avx512 "$amx"
done

# ---- 4b. decode: where a step goes, and the x16 GEMV's software prefetch ----
# Issue 13 asks where decode's time goes on this class of machine, and for a prefetch that fits Intel's
# caches.  The x16 GEMV (Q8_0 / Q4_0 / Q5_0 / IQ4_NL decode) prefetches 4 KiB ahead by default (measured on
# Zen 5 only); here it is timed against none and 8 KiB.  A prefetch changes no result.
say "decode profile (MINFER_PROFILE=1, minfer bench -p 0 -n 128 -r 2 -t 2; thread 0 of 2, per token):"
for f in q4_0 q4_k_m; do
    MINFER_ISA=$amx MINFER_PROFILE=1 "$build/minfer" bench -m "$models/qwen2-qwen2.5-0.5b-$f.gguf" -p 0 -n 128 -r 2 -t 2 \
        >"$out/profile-$f.txt" 2>&1 || fail "minfer bench with MINFER_PROFILE=1 on $f ($out/profile-$f.txt)"
    say "  $f: $(grep -m1 'whole forward' "$out/profile-$f.txt" | sed 's/^ *//'); matmul (calls, run ms, wait ms, share):" \
        "$(grep -m1 '^  matmul ' "$out/profile-$f.txt" | awk '{ print $2, $3, $4, $5 }') (all ops in $out/profile-$f.txt)"
done
# variant NAME FLAG: the build with -DFLAG in BUILD-NAME (a compile-time switch, timed against the default)
variant() {
    make BUILD="$build-$1" OPT="-O2 -D$2" -j"$(nproc)" "$build-$1/minfer" >"$out/make-$1.log" 2>&1 ||
        fail "the build with $2 failed ($out/make-$1.log)"
}
# tg_builds LABEL DIR ...: the builds the next rows time by label: tg128 of qwen2-qwen2.5-0.5b-$f with DIR/minfer
declare -A dir_of
tg_builds() {
    dir_of=()
    while [ $# -gt 1 ]; do dir_of[$1]=$2; shift 2; done
}
measure() { tps "$amx" "${dir_of[$1]}/minfer" "qwen2-qwen2.5-0.5b-$f" -p 0 -n 128 -r 2; }
pf_count() { objdump -d --no-show-raw-insn "$1/obj/src/quant/x16_avx512.o" 2>/dev/null | grep -c prefetcht0; }
for pf in 0 8192; do variant "pf$pf" "X16_PF_BYTES=$pf"; done
# a prefetch gcc dropped would time the same code twice (how the K-quant prefetch once went missing)
[ "$(pf_count "$build")" -gt 0 ] && [ "$(pf_count "$build-pf8192")" -gt 0 ] ||
    fail "the default or the X16_PF_BYTES=8192 build's x16_avx512.o holds no prefetcht0 (objdump)"
[ "$(pf_count "$build-pf0")" -eq 0 ] || fail "the X16_PF_BYTES=0 build's x16_avx512.o still prefetches (objdump)"
say "tg128 t/s, MINFER_ISA=$amx, the x16 GEMV prefetch 4 KiB ahead (default) / none / 8 KiB alternated, 2 rounds x 2 reps:"
tg_builds 4096 "$build" 0 "$build-pf0" 8192 "$build-pf8192"
for f in q8_0 q4_0 q4_k_m; do row "$f" 4096 0 8192; done
# The q4_0 GEMV shifts a block's high-nibble sum once instead of every byte (x16_avx512.c, unpack_q4_0_gemv):
# fewer instructions, no gain on Zen 5's four vector pipes; Intel runs 512-bit work on two ports.
variant q4s X16_Q4_HI_INPLACE=0
srad_count() {
    objdump -d --no-show-raw-insn "$1/obj/src/quant/x16_avx512.o" 2>/dev/null |
        awk '/<mf_tile_q4_0x16_avx512>:/ { f = 1; next } /^$/ { f = 0 } f' | grep -c vpsrad
}
[ "$(srad_count "$build")" -gt 0 ] && [ "$(srad_count "$build-q4s")" -eq 0 ] ||
    fail "the q4_0 GEMV builds do not differ as they should (vpsrad in mf_tile_q4_0x16_avx512: default $(srad_count "$build"), X16_Q4_HI_INPLACE=0 $(srad_count "$build-q4s"))"
say "tg128 t/s, MINFER_ISA=$amx, the q4_0 GEMV's high nibbles in place (default, inplace) / shifted (shift) alternated, 2 rounds x 2 reps:"
tg_builds inplace "$build" shift "$build-q4s"
f=q4_0
row "$f" inplace shift
# A thread waiting at a barrier of a decode step prefetches half the lines of the first 512 KiB of its next
# matmul stretch (backend/cpu/cpu.c, exec_worker): +1-8 % tg128 on Zen 5, where the bus idles while the other
# thread finishes a one-row norm or its share of attention.  Zen 5 has 1 MiB of L2 a core; Intel's 2 MiB
# might take more, so 1 MiB is timed too.
variant ra0 MF_CPU_AHEAD_KB=0
variant ra1024 MF_CPU_AHEAD_KB=1024
ahead_calls() { objdump -r "$1/obj/src/backend/cpu/cpu.o" 2>/dev/null | grep -c mf_cpu_matmul_ahead; } # its call's relocations
[ "$(ahead_calls "$build")" -gt 0 ] && [ "$(ahead_calls "$build-ra0")" -eq 0 ] ||
    fail "the read-ahead builds do not differ as they should (relocations of mf_cpu_matmul_ahead in cpu.o: default $(ahead_calls "$build"), MF_CPU_AHEAD_KB=0 $(ahead_calls "$build-ra0"))"
# the size is the immediate handed to mf_cpu_matmul_ahead: 512 KiB is $0x80000, 1 MiB $0x100000
ahead_size() { objdump -d --no-show-raw-insn "$1/obj/src/backend/cpu/cpu.o" 2>/dev/null | grep -c "\$$2,"; }
[ "$(ahead_size "$build" 0x80000)" -gt 0 ] && [ "$(ahead_size "$build-ra1024" 0x80000)" -eq 0 ] &&
    [ "$(ahead_size "$build-ra1024" 0x100000)" -gt 0 ] ||
    fail "the MF_CPU_AHEAD_KB=1024 build does not read ahead 1 MiB as it should (immediates in cpu.o: default \$0x80000 $(ahead_size "$build" 0x80000), MF_CPU_AHEAD_KB=1024 \$0x80000 $(ahead_size "$build-ra1024" 0x80000) and \$0x100000 $(ahead_size "$build-ra1024" 0x100000))"
say "tg128 t/s, MINFER_ISA=$amx, the read-ahead at decode barriers 512 KiB (default, ahead) / none (none) / 1 MiB (ahead1m) alternated, 2 rounds x 2 reps:"
tg_builds ahead "$build" none "$build-ra0" ahead1m "$build-ra1024"
for f in q8_0 q4_0; do row "$f" ahead none ahead1m; done

# ---- 5. against llama.cpp ----
if [ "$compare" = 1 ]; then
    lb=$(command -v llama-bench 2>/dev/null) && [[ $llama != *bench:* ]] && llama="$llama,bench:$lb"
    bench/compare --reps 5 --llama "$llama" --out "$out/compare" >"$out/compare.log" 2>&1 || fail "bench/compare ($out/compare.log)"
    cat "$out/compare/results.md" >>"$sum"
fi
say "PASS"
