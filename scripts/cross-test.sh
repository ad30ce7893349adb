#!/usr/bin/env bash
# Proves minfer builds and passes its tests on aarch64 without an ARM machine: cross-compiles with Debian's
# gcc-aarch64-linux-gnu against the arm64 (multiarch) libraries, then runs the whole suite (tests/run.sh,
# every test binary and CLI script, golden conformance included) under qemu-user.  That build has the
# scalar and NEON kernels and no x86 code at all; tests/test_quant.c checks every NEON kernel bitwise
# against the scalar one.
#   bash scripts/cross-test.sh      (or make cross-test)   as root (CI) or as a user who may sudo
# Installs what is missing on first use (Debian 12, apt): the arm64 architecture, the cross compiler,
# qemu-user and the arm64 -dev packages of the libraries the build links.  Prints run.sh's lines (the
# summary "N passed, N failed, N skipped" second to last, then the suite's wall time); the exit status is
# non-zero if anything failed.
#   CROSS_BUILD=dir   build directory (default build-aarch64; the host build stays in build/)
#   CROSS_GOLDENS='glob ...'  only these conformance goldens (file names in tests/golden/conformance, e.g.
#                     '*q4_0* *q8_0* *q4_k_m* *q6_k*': the ones whose matmuls run the NEON kernels); default all.
#                     Under qemu every float operation is emulated, and the f16/f32 goldens' scalar LM heads
#                     (151936 x 256 multiply-adds per token) are most of the suite's time.
#   MF_TEST_THREADS   threads of the conformance and engine tests (default: the number of cores; results do
#                     not depend on it)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${CROSS_BUILD:-build-aarch64}
CC=aarch64-linux-gnu-gcc
LIBS="libc6-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 libcjson-dev:arm64 libmicrohttpd-dev:arm64"

as_root=""
if [ "$(id -u)" -ne 0 ]; then as_root="sudo"; fi
apt_install() {
    [ -z "$as_root" ] || command -v sudo >/dev/null 2>&1 || {
        echo "cross-test.sh: missing packages: $*; run this as root, or install sudo" >&2; exit 1; }
    $as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    [ -z "$as_root" ] || command -v sudo >/dev/null 2>&1 || {
        echo "cross-test.sh: the arm64 architecture is not enabled; run this as root, or install sudo" >&2; exit 1; }
    $as_root dpkg --add-architecture arm64
fi
missing=""
for p in gcc-aarch64-linux-gnu qemu-user $LIBS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
# shellcheck disable=SC2086
[ -z "$missing" ] || apt_install $missing
QEMU=$(command -v qemu-aarch64 || command -v qemu-aarch64-static || true)
[ -n "$QEMU" ] || { echo "cross-test.sh: no qemu-aarch64 after installing qemu-user" >&2; exit 1; }

# pkg-config must answer for the target: the arm64 .pc files only
export PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
t0=$(date +%s)
mkdir -p "$B"
make CC="$CC" BUILD="$B" -j"$(nproc)" >"$B/build.log" 2>&1 || { tail -n 40 "$B/build.log"; exit 1; }
file_out=$(file -b "$B/minfer" 2>/dev/null || true)
t1=$(date +%s)
echo "cross build: $CC -> $B ($((t1 - t0))s) ${file_out%%,*}"

# The suite runs its binaries directly ($BUILD/tests/test_*, $MF_BUILD/minfer, $MF_BUILD/mf-genmodel).
# binfmt_misc may not be registered (containers, CI), so $B/qemu mirrors them as scripts that start each
# one under qemu-aarch64; the arm64 loader and libraries are the multiarch ones installed above.
R="$B/qemu"
rm -rf "$R" && mkdir -p "$R/tests"
wrap() { # BINARY
    printf '#!/bin/sh\nexec %s %s "$@"\n' "$QEMU" "$(pwd)/$1" >"$R/${1#"$B"/}"
    chmod +x "$R/${1#"$B"/}"
}
wrap "$B/minfer"
wrap "$B/mf-genmodel"
# The generator promises byte-identical files for the same options on every machine, and under qemu it is
# most of the suite's time (quantizing the 151936-row embeddings of every test model: ~16x slower than
# natively).  So where the host build has one (CROSS_HOST_BUILD, default build/) and both write the same
# bytes for the check models below (the K-quant mix with qwen2 biases; a low-rank draft, whose target
# would take a minute under qemu; q8_0 and q4_k_m are checked again by the conformance goldens' sha256),
# the suite's models come from the host's generator; otherwise from the emulated one, and the line says why.
HB=${CROSS_HOST_BUILD:-build}
gen_check() {
    local d="$B/gen-check" a
    rm -rf "$d" && mkdir -p "$d"
    for a in "--arch qwen2 --layers 1 --type q4_k_m --seed 3" \
        "--arch qwen3 --layers 1 --type q8_0 --lowrank 64 --layer-scale 0.06 --seed 7 --draft"; do
        # shellcheck disable=SC2086
        "$HB/mf-genmodel" $a -q -o "$d/host.gguf" && "$R/mf-genmodel" $a -q -o "$d/target.gguf" || return 1
        cmp -s "$d/host.gguf" "$d/target.gguf" || { echo "cross-test: generators differ on: $a"; return 1; }
    done
    rm -rf "$d"
}
if [ ! -x "$HB/mf-genmodel" ] || file -b "$HB/mf-genmodel" | grep -q aarch64; then
    echo "cross-test: models from the emulated generator (no host build in $HB/; make builds one)"
elif gen_check; then
    printf '#!/bin/sh\nexec %s "$@"\n' "$(cd "$HB" && pwd)/mf-genmodel" >"$R/mf-genmodel"
    echo "cross-test: models from the host's generator ($HB/mf-genmodel: the same bytes as $B's on the check models)"
else
    echo "cross-test: models from the emulated generator (the host's $HB/mf-genmodel did not write the same bytes)"
fi
mkdir -p "$R/fuzz-replay"
for t in "$B"/tests/test_* "$B"/fuzz-replay/fuzz_*; do
    case "$t" in *.d) continue ;; esac
    [ -x "$t" ] && wrap "$t"
done
# tests/cli/public_header.sh links an embedder against the library and runs it: the target's compiler
# and the emulator (MF_TEST_CC / MF_TEST_EXEC)
ln -s "$(pwd)/$B/libminfer.a" "$R/libminfer.a"
export MF_TEST_CC="$CC" MF_TEST_EXEC="$QEMU"
# run.sh's skip conditions: the binaries' architecture, and no x86 kernel set (uname and /proc/cpuinfo
# are the host's under qemu)
export MF_TEST_ARCH=aarch64 MF_TEST_CPU_ISA=scalar
# tests that scale their work down under an emulator (test_spec: one model pair, fewer chi-square draws;
# test_engine, test_gen, spec.sh: shorter prefixes and generations; docs/TESTING.md)
export MF_TEST_EMULATED=1
"$R/minfer" backends >/dev/null || { echo "cross-test.sh: $B/minfer does not start under $QEMU" >&2; exit 1; }

if [ -n "${CROSS_GOLDENS:-}" ]; then
    G="$B/goldens"
    rm -rf "$G" && mkdir -p "$G"
    # the full-size goldens too: run.sh expects them reported as skipped (they run only with MF_TEST_FULL)
    for pat in $CROSS_GOLDENS 'full-*.json'; do
        for f in tests/golden/conformance/$pat; do [ -f "$f" ] && cp "$f" "$G/"; done
    done
    echo "cross-test: conformance goldens $(ls "$G" | tr '\n' ' ')"
    export MF_GOLDEN_DIR="$G"
fi
export MF_TEST_THREADS="${MF_TEST_THREADS:-$(nproc)}"
rc=0
BUILD="$R" MF_TEST_TMP="$B/test-tmp" bash tests/run.sh || rc=$?
echo "cross-test: aarch64 under $(basename "$QEMU"), $(($(date +%s) - t1))s for the suite (summary above)"
exit $rc
