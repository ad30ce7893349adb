#!/usr/bin/env bash
# The K-quant decode GEMVs prefetch their weights a few blocks ahead (src/quant/x8_x86.h): +10-50 % tg128
# on K-quant models (docs/PERFORMANCE.md).  Nothing in the results shows whether a prefetch ran, and gcc
# silently drops a prefetch helper it does not inline into a target("avx2"/"avx512") kernel - which is how
# every software prefetch of these kernels was missing from the binary until 2026-12-05.  So this reads the
# compiled objects: each K-quant x8 tile must hold a prefetcht0.
cd "$(dirname "$0")/../.."
source tests/cli/lib.bash
OBJ="${MF_BUILD:-build}/obj/src/quant"

if [ ! -f "$OBJ/x8_avx2.o" ] || [ ! -f "$OBJ/x8_avx512.o" ]; then
    skip x86_prefetch "no x86 kernel objects in $OBJ (not an x86-64 build)"
    finish
    exit
fi
if ! command -v objdump >/dev/null; then
    bad x86_prefetch "objdump (binutils) is needed to read $OBJ"
    finish
    exit
fi

# prefetches OBJECT FUNCTION: how many prefetch instructions FUNCTION's disassembly holds
prefetches() {
    objdump -d --no-show-raw-insn "$1" | awk -v f="<$2>:" '$2 == f { on = 1; next } /^$/ { on = 0 } on && /prefetcht0/ { n++ } END { print n + 0 }'
}

for isa in avx2 avx512; do
    for t in q4_Kx8 q5_Kx8 q6_Kx8 iq4_xsx8; do
        fn="mf_tile_${t}_$isa"
        n=$(prefetches "$OBJ/x8_$isa.o" "$fn")
        if [ "$n" -gt 0 ]; then ok "prefetch_$fn"; else bad "prefetch_$fn" "no prefetcht0 in $fn ($OBJ/x8_$isa.o)"; fi
    done
done
finish
