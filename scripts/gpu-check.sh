#!/usr/bin/env bash
# scripts/gpu-check.sh - the one prepared device check of the CUDA backend (issue 14 step 3; docs/TESTING.md,
# "The device check").  On a machine with an NVIDIA GPU it
#   1. finds the build's libraries (the system's, or the Debian packages --fetch-deps saved, unpacked with
#      dpkg -x into a private prefix under the build folder: a bare device image has no network);
#   2. stops at once, by name, when no CUDA device is there;
#   3. builds with make CUDA=1 (-j = the cores), and generates the benchmark models beside it;
#   4. runs the CUDA tests through tests/run.sh (so the expected-skip list holds both ways): the host tests
#      of the device math (tests/test_cuda_*), the registry's CUDA probe, the op matrix's CUDA columns
#      (matrix_cuda: the analytic references; matrix_cuda_vs_cpu: every claimed (op, dtype) at model shapes
#      against the CPU backend, per-op tolerances, batch invariance bitwise) and tests/test_gpu (identities
#      bitwise on the GPU, full-GPU and split runs against the CPU in named tolerance classes);
#   5. benchmarks pp512 / tg128 with every block on cuda on the Qwen2.5-0.5B Q8_0 and Qwen3-0.6B Q8_0
#      shapes (mf-genmodel, as bench/compare makes them), and llama.cpp's CUDA build beside it when one is
#      available (LLAMA_BENCH_CUDA: a llama-bench built with CUDA);
# writing every result into ONE file, and stopping loudly at the first broken check (the last line is
# PASS or FAIL; exit status 0 or 1).  That is set -e's discipline made explicit: every step's status is
# tested and named (fail below), which set -e alone would not do inside conditions and pipelines, and
# which lets --keep-going go on.  The whole run must fit in 8 minutes on one GPU; each step runs under
# what is left of that budget.
#
# Usage:
#   scripts/gpu-check.sh [options] [RESULTS]   the check (RESULTS default gpu-check.txt)
#   scripts/gpu-check.sh --fetch-deps DIR      where the network is: download the Debian packages the build
#                                              needs (dev + runtime) into DIR, e.g. .gpudeps (git-ignored),
#                                              to be carried to the device
# Options:
#   --deps DIR      the packages --fetch-deps saved (default .gpudeps); used only for what the system lacks
#   --build DIR     build folder (default build-gpu)
#   --keep-going    run every step even after a failure (the last line is still FAIL): for a device run
#                   that cannot be repeated, so a failed check does not cost the benchmark numbers
#   --no-bench      stop after the tests
#   --budget S      seconds for the whole run (default 480)
#   -h, --help
# Environment: GPU_CHECK_PRIVATE_DEPS=1 uses the saved packages even where the system has the libraries
# (to try that path on a machine that has them); LLAMA_BENCH_CUDA=/path/to/llama-bench (CUDA build).
set -uo pipefail
cd "$(dirname "$0")/.."

results=gpu-check.txt deps=.gpudeps build=build-gpu keep_going=0 bench=1 budget=480 fetch=""
usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
die() { echo "gpu-check.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --fetch-deps) [ $# -ge 2 ] || die "--fetch-deps needs a folder (e.g. .gpudeps)"; fetch=$2; shift 2 ;;
        --deps) [ $# -ge 2 ] || die "--deps needs a folder"; deps=$2; shift 2 ;;
        --build) [ $# -ge 2 ] || die "--build needs a folder"; build=$2; shift 2 ;;
        --keep-going) keep_going=1; shift ;;
        --no-bench) bench=0; shift ;;
        --budget) [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--budget wants whole seconds, got '${2:-}'"; budget=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        -*) die "unknown option '$1' (see scripts/gpu-check.sh --help)" ;;
        *) results=$1; shift ;;
    esac
done

# The Debian packages of the four libraries the Makefile asks pkg-config for, dev and runtime, and the
# runtime closure of libmicrohttpd (gnutls and what it links), so that a bare image can build and run.
DEB_PKGS="libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libutf8proc-dev libutf8proc2
 libcjson-dev libcjson1 libmicrohttpd-dev libmicrohttpd12 libgnutls30 libgmp10 libhogweed6 libidn2-0 libnettle8
 libp11-kit0 libtasn1-6 libunistring2 libffi8"
PC_MODULES="libpcre2-8 libutf8proc libcjson libmicrohttpd"
DEPS_MAX_KIB=16384 # far under the 64 MiB a device run carries

# ---------------- --fetch-deps DIR (here, with the network) ----------------
if [ -n "$fetch" ]; then
    command -v apt-get >/dev/null || die "--fetch-deps needs apt-get (a Debian or Ubuntu machine)"
    arch=$(dpkg --print-architecture 2>/dev/null)
    [ "$arch" = amd64 ] || die "--fetch-deps downloads amd64 packages for the x86-64 device; this machine's packages are '$arch'"
    mkdir -p "$fetch" || die "cannot create $fetch"
    rm -f "$fetch"/*.deb "$fetch"/MANIFEST
    # shellcheck disable=SC2086 # (word splitting of the list is the point)
    (cd "$fetch" && apt-get -q -o APT::Sandbox::User=root download $DEB_PKGS) ||
        die "apt-get download failed (apt-get update first? the list: $(echo $DEB_PKGS))"
    kib=$(du -sk "$fetch" | cut -f1)
    { echo "# scripts/gpu-check.sh --fetch-deps, $(date -u +%FT%TZ), from $(. /etc/os-release && echo "$PRETTY_NAME")"
      (cd "$fetch" && sha256sum ./*.deb); } >"$fetch/MANIFEST"
    n=$(find "$fetch" -maxdepth 1 -name '*.deb' | wc -l)
    [ "$kib" -le "$DEPS_MAX_KIB" ] || die "$fetch holds $kib KiB, more than the $DEPS_MAX_KIB KiB allowed (the device carries 64 MiB in all)"
    echo "gpu-check.sh: $n packages, $kib KiB in $fetch (MANIFEST lists them); carry it to the device (carry: [\"$fetch\"])"
    exit 0
fi

# ---------------- the check ----------------
mkdir -p "$(dirname "$results")" "$build" || die "cannot create the folders of $results and $build"
: >"$results" || die "cannot write $results"
results=$(cd "$(dirname "$results")" && pwd)/$(basename "$results")
t0=$(date +%s)
failed="" n_ok=0
say() { printf '%s\n' "$*" | tee -a "$results"; }
elapsed() { echo $(($(date +%s) - t0)); }
left() { local l=$((budget - $(elapsed))); [ "$l" -gt 0 ] && echo "$l" || echo 1; }
finish() {
    local t; t=$(elapsed)
    if [ -n "$failed" ]; then
        say ""; say "FAIL: $failed ($n_ok checks passed, ${t}s)"; exit 1
    fi
    if [ "$t" -gt "$budget" ]; then say ""; say "FAIL: the run took ${t}s, over its ${budget}s budget"; exit 1; fi
    say ""; say "PASS ($n_ok checks, ${t}s of ${budget}s)"; exit 0
}
# fail WHAT: the first broken check stops the run (unless --keep-going)
fail() {
    say "FAIL $1"
    failed="${failed:+$failed; }$1"
    [ "$keep_going" = 1 ] || finish
}
ok() { say "ok   $1"; n_ok=$((n_ok + 1)); }
# run_logged LOG CMD...: runs under what is left of the budget; 124 = killed at the budget
run_logged() { local log=$1; shift; timeout "$(left)" "$@" >"$log" 2>&1; }

say "gpu-check: $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')"
say "machine: $(uname -srm), $(nproc) cores, $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
NVCC=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || echo "")
say "nvcc: ${NVCC:-none} $([ -n "$NVCC" ] && "$NVCC" --version | sed -n 's/.*release \([^,]*\),.*/release \1/p')"
say "budget: ${budget}s; results: $results"
say ""

# ---- 1. libraries: the system's, or the saved packages in a private prefix ----
deps_probe() { # compile, link and run a program that calls each library (what the build needs of them)
    local d="$build/deps-probe"
    mkdir -p "$d"
    cat >"$d/probe.c" <<'EOF'
#define PCRE2_CODE_UNIT_WIDTH 8
#include <cJSON.h>
#include <microhttpd.h>
#include <pcre2.h>
#include <stdio.h>
#include <utf8proc.h>
int main(void) {
    unsigned char v[32] = "";
    pcre2_config(PCRE2_CONFIG_VERSION, v);
    printf("pcre2 %s, utf8proc %s, cJSON %s, microhttpd %s\n", (char *)v, utf8proc_version(), cJSON_Version(), MHD_get_version());
    return 0;
}
EOF
    # shellcheck disable=SC2046,SC2086
    ${CC:-cc} -o "$d/probe" "$d/probe.c" $(pkg-config --cflags --libs $PC_MODULES 2>"$d/log") >>"$d/log" 2>&1 && "$d/probe" 2>>"$d/log"
}
if [ "${GPU_CHECK_PRIVATE_DEPS:-0}" != 1 ] && pkg-config --exists $PC_MODULES 2>/dev/null; then
    if v=$(deps_probe); then ok "libraries: the system's ($v)"; else fail "libraries: the system's pkg-config finds them but a program cannot use them: $(tail -n 5 "$build/deps-probe/log")"; fi
else
    why=$([ "${GPU_CHECK_PRIVATE_DEPS:-0}" = 1 ] && echo "GPU_CHECK_PRIVATE_DEPS=1" || echo "the system lacks $(for m in $PC_MODULES; do pkg-config --exists "$m" 2>/dev/null || printf '%s ' "$m"; done)")
    if ! ls "$deps"/*.deb >/dev/null 2>&1; then
        fail "libraries: $why, and $deps holds no .deb: run scripts/gpu-check.sh --fetch-deps $deps where the network is, and carry $deps"
    else
        prefix=$PWD/$build/deps-root
        rm -rf "$prefix" && mkdir -p "$prefix/private-lib"
        for f in "$deps"/*.deb; do dpkg -x "$f" "$prefix" || fail "libraries: dpkg -x $f failed"; done
        pcdir=$prefix/usr/lib/x86_64-linux-gnu/pkgconfig
        # libmicrohttpd.pc names gnutls as Requires.private, and pkg-config looks only in the prefix now;
        # minfer includes no gnutls header and calls no gnutls function, so an empty gnutls.pc answers it
        # (the library itself is in the runtime closure above)
        printf 'Name: gnutls\nDescription: placeholder (scripts/gpu-check.sh)\nVersion: 3.7.9\nCflags:\nLibs:\n' >"$pcdir/gnutls.pc"
        # the runtime: only the sonames the system's loader does not know (its own copies win)
        known=$(ldconfig -p 2>/dev/null)
        for so in "$prefix"/usr/lib/x86_64-linux-gnu/lib*.so.* "$prefix"/lib/x86_64-linux-gnu/lib*.so.*; do
            [ -e "$so" ] || continue
            b=$(basename "$so")
            [[ "$b" =~ \.so\.[0-9]+$ ]] || continue
            if [ "${GPU_CHECK_PRIVATE_DEPS:-0}" = 1 ] || ! grep -q "^[[:space:]]$b " <<<"$known"; then ln -sf "$so" "$prefix/private-lib/$b"; fi
        done
        export PKG_CONFIG_LIBDIR=$pcdir PKG_CONFIG_SYSROOT_DIR=$prefix PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
        export LD_LIBRARY_PATH=$prefix/private-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        if v=$(deps_probe); then
            ok "libraries: $why; unpacked $(ls "$deps"/*.deb | wc -l) packages from $deps into $prefix ($v; private runtime: $(ls "$prefix/private-lib" | tr '\n' ' '))"
        else
            fail "libraries: the packages from $deps do not build a program: $(tail -n 5 "$build/deps-probe/log")"
        fi
    fi
fi
[ -d /usr/local/cuda/lib64 ] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64

# ---- 2. the device ----
if ! command -v nvidia-smi >/dev/null 2>&1; then
    fail "no CUDA device: nvidia-smi is not installed here (run this on a machine with an NVIDIA GPU and its driver)"
elif ! gpus=$(nvidia-smi -L 2>&1) || ! grep -q '^GPU ' <<<"$gpus"; then
    fail "no CUDA device: nvidia-smi lists no GPU ($(head -n 1 <<<"$gpus"))"
elif [ -n "${MINFER_DISABLE_CUDA+set}" ]; then
    fail "no CUDA device for minfer: MINFER_DISABLE_CUDA is set (unset it for this check)"
else
    ok "device: $(head -n 1 <<<"$gpus"); driver $(nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)"
fi
[ -n "$NVCC" ] || fail "no nvcc on PATH or at /usr/local/cuda/bin/nvcc: make CUDA=1 needs the CUDA toolkit"

# ---- 3. build (CUDA=1), and the benchmark models beside it ----
jobs=$(nproc)
models_log=$build/models.log
declare -A MODEL=([qwen2.5-0.5b]="$build/models/qwen2-qwen2.5-0.5b-q8_0.gguf" [qwen3-0.6b]="$build/models/qwen3-qwen3-0.6b-q8_0.gguf")
declare -A NLAYER=([qwen2.5-0.5b]=24 [qwen3-0.6b]=28) # the presets' block counts (mf-genmodel --help)
models_pid=""
if [ "$bench" = 1 ]; then
    # a host-only generator (no nvcc objects, so it is ready long before the CUDA build): the same files
    # bench/compare writes (mf-genmodel --arch A --preset P --type q8_0: a pure function of the options)
    (
        set -e
        make BUILD="$build-gen" -j4 "$build-gen/mf-genmodel"
        mkdir -p "$build/models"
        for p in qwen2.5-0.5b qwen3-0.6b; do
            f=${MODEL[$p]}
            [ -s "$f" ] && continue
            "$build-gen/mf-genmodel" --arch "$([ "$p" = qwen3-0.6b ] && echo qwen3 || echo qwen2)" --preset "$p" --type q8_0 -q -o "$f.tmp"
            mv "$f.tmp" "$f"
        done
    ) >"$models_log" 2>&1 &
    models_pid=$!
fi
tb=$(elapsed)
if run_logged "$build/build.log" make BUILD="$build" CUDA=1 -j"$jobs"; then
    ok "build: make BUILD=$build CUDA=1 -j$jobs ($(($(elapsed) - tb))s; $(ar t "$build/libminfer.a" | grep -c '\.cu\.o$') nvcc objects)"
else
    rc=$?
    tail -n 40 "$build/build.log" | sed 's/^/    /' | tee -a "$results" >/dev/null
    fail "build: make CUDA=1 failed$([ "$rc" = 124 ] && echo " (killed at the ${budget}s budget)") (log: $build/build.log)"
fi

# ---- 4. the tests ----
# run_tests NAME...: tests/run.sh on those tests; the interesting lines of their logs go to the results
run_tests() {
    local label=$1; shift
    local log="$build/run-${label//[^A-Za-z0-9]/-}.log"
    MF_TESTS="$*" BUILD="$build" MF_TEST_TMP="$build/test-tmp" run_logged "$log" bash tests/run.sh
    local rc=$?
    grep -E '^[a-z_0-9.]+ +[0-9]+ passed' "$log" | sed 's/^/    /' >>"$results"
    for t in "$@"; do
        grep -hE '^(PASS|FAIL|SKIP) |check failed|cuda vs cpu:|blocks on cuda:|cells against' "$build/test-tmp/$t.log" 2>/dev/null |
            sed "s/^/    $t: /" >>"$results"
    done
    grep -E '^    FAIL|^FAIL' "$log" | sed 's/^/    run.sh: /' >>"$results"
    tail -n 1 "$log" | sed 's/^/    run.sh: /' >>"$results"
    if [ "$rc" = 0 ]; then ok "$label: $(tail -n 1 "$log")"; else fail "$label: $(tail -n 1 "$log")$([ "$rc" = 124 ] && echo " (killed at the budget)") (log: $log)"; fi
}
# require LABEL TEST NAME...: each named check printed PASS (a skip here means the device was not used)
require() {
    local label=$1 t=$2; shift 2
    local n missing=""
    for n in "$@"; do grep -q "^PASS $n\$" "$build/test-tmp/$t.log" 2>/dev/null || missing="$missing $n"; done
    if [ -z "$missing" ]; then ok "$label: $* passed on the device"; else fail "$label: did not pass:$missing (see $build/test-tmp/$t.log)"; fi
}
if [ -x "$build/minfer" ]; then
    "$build/minfer" backends >"$build/backends.txt" 2>&1
    sed 's/^/    /' "$build/backends.txt" >>"$results"
    # the row "2   cuda   200   yes   yes   yes": compiled, allowed, available
    if grep -Eq '^2 +cuda +[0-9]+ +yes +yes +yes *$' "$build/backends.txt"; then ok "minfer backends: cuda is compiled, allowed and available"
    else fail "minfer backends: cuda is not listed as available (above)"; fi
fi
host_math=$(cd tests && ls test_cuda_*.c 2>/dev/null | sed 's/\.c$//' | tr '\n' ' ')
run_tests "host math + registry" ${host_math} test_registry
run_tests "op matrix" test_op_matrix
require "op matrix cuda columns" test_op_matrix matrix_cuda matrix_cuda_vs_cpu
run_tests "engine on the gpu" test_gpu
require "identities and conformance on the gpu" test_gpu gpu_all_blocks gpu_split

# ---- 5. benchmarks: pp512 / tg128, every block on cuda ----
bar_line=""
if [ "$bench" = 1 ]; then
    wait "$models_pid"; mrc=$?
    if [ "$mrc" != 0 ]; then
        tail -n 20 "$models_log" | sed 's/^/    /' >>"$results"
        fail "bench models: mf-genmodel failed (log: $models_log)"
    fi
    say ""
    say "bench: minfer bench -p 512 -n 128 -r 3 with MINFER_GPU_LAYERS=all (JSON for the numbers, then the table)"
    for p in qwen2.5-0.5b qwen3-0.6b; do
        f=${MODEL[$p]}
        [ -s "$f" ] || continue
        json="$build/bench-$p.json"
        # stdout alone is the JSON; stderr (the offload report line, warnings) is kept beside it
        if MINFER_GPU_LAYERS=all timeout "$(left)" "$build/minfer" bench -m "$f" -p 512 -n 128 -r 3 -o json >"$json" 2>"$json.err" &&
            MINFER_GPU_LAYERS=all run_logged "$build/bench-$p.md" "$build/minfer" bench -m "$f" -p 512 -n 128 -r 3; then
            sed 's/^/    /' "$build/bench-$p.md" >>"$results"
            line=$(python3 - "$json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
ts = {("pp%d" % t["n_prompt"]) if t["n_prompt"] else ("tg%d" % t["n_gen"]): t for t in d}
pp, tg = ts["pp512"], ts["tg128"]
print("%d %d %.1f %.1f %.1f %.1f" % (pp["n_gpu_layers"], tg["n_gpu_layers"], pp["avg_ts"], pp["stddev_ts"], tg["avg_ts"], tg["stddev_ts"]))
EOF
            )
            read -r ngl_pp ngl_tg pp pp_sd tg tg_sd <<<"$line"
            nl=${NLAYER[$p]}
            say "    $p q8_0: pp512 $pp ± $pp_sd t/s, tg128 $tg ± $tg_sd t/s (blocks on cuda: $ngl_pp of ${nl:-?})"
            if [ -z "$line" ] || [ "$ngl_pp" = 0 ] || [ "$ngl_tg" = 0 ] || { [ -n "$nl" ] && [ "$ngl_pp" != "$nl" ]; }; then
                fail "bench $p: the run was not fully offloaded (n_gpu_layers ${ngl_pp:-?} of ${nl:-?}; MINFER_GPU_LAYERS=all did not take)"
            else
                ok "bench $p: pp512 $pp t/s, tg128 $tg t/s, every block on cuda"
            fi
            if [ "$p" = qwen2.5-0.5b ] && [ -n "$line" ]; then
                bar_line=$(awk -v tg="$tg" -v pp="$pp" 'BEGIN {
                    printf "bar (issue 14, Qwen2.5-0.5B Q8_0, full offload): tg128 %s t/s %s 1000 (%s); pp512 %s t/s %s 20000 (%s)",
                        tg, tg >= 1000 ? ">=" : "<", tg >= 1000 ? "met" : "NOT met", pp, pp >= 20000 ? ">=" : "<", pp >= 20000 ? "met" : "NOT met" }')
            fi
        else
            tail -n 20 "$json.err" "$build/bench-$p.md" 2>/dev/null | sed 's/^/    /' >>"$results"
            fail "bench $p: minfer bench failed (above)"
        fi
    done
    # llama.cpp's CUDA build on the same files, when one is here
    if [ -n "${LLAMA_BENCH_CUDA:-}" ] && [ -x "$LLAMA_BENCH_CUDA" ]; then
        say "bench: $LLAMA_BENCH_CUDA -ngl 99 -p 512 -n 128 -r 3"
        for p in qwen2.5-0.5b qwen3-0.6b; do
            if run_logged "$build/llama-bench-$p.md" "$LLAMA_BENCH_CUDA" -m "${MODEL[$p]}" -ngl 99 -p 512 -n 128 -r 3; then
                grep '^|' "$build/llama-bench-$p.md" | sed 's/^/    /' >>"$results"; ok "llama.cpp CUDA bench $p"
            else
                tail -n 10 "$build/llama-bench-$p.md" | sed 's/^/    /' >>"$results"; fail "llama.cpp CUDA bench $p failed"
            fi
        done
    else
        say "llama.cpp CUDA: not available on this machine (node-llama-cpp 3.21.1's CUDA prebuilt, @node-llama-cpp/linux-x64-cuda, is 181 MiB unpacked, its libggml-cuda.so alone 152 MiB, over the 64 MiB a device run can carry; set LLAMA_BENCH_CUDA to a llama-bench built with CUDA to compare)"
    fi
    [ -n "$bar_line" ] && say "$bar_line"
fi
finish
