#!/usr/bin/env bash
# The K-quant decode GEMVs prefetch their weights a few blocks ahead (src/quant/x8_x86.h): +10-50 % tg128
# on K-quant models (docs/PERFORMANCE.md); the x16 ones (Q4_0 / Q5_0 / Q8_0 / IQ4_NL) a page ahead.
# Nothing in the results shows whether a prefetch ran, and gcc silently drops a prefetch helper it does not
# inline into a target("avx2"/"avx512") kernel - which is how every software prefetch of these kernels was
# missing from the binary until 2026-12-05.  So this checks the helpers' source form (every architecture)
# and reads the compiled objects: each K-quant x8 tile and each x16 tile must hold a prefetcht0 (x86-64).
cd "$(dirname "$0")/../.."
source tests/cli/lib.bash
OBJ="${MF_BUILD:-build}/obj/src/quant"

# Every architecture: a static inline helper in src/ that prefetches and has no target attribute of its
# own (so it can be called from a kernel that has one) must be always_inline: no kernel's prefetch may
# depend on gcc choosing to inline it (the bug above, by its source form).
bad_helpers=$(find src -name '*.[ch]' -print0 | xargs -0 awk '
    /^static inline/ { sig = $0; where = FILENAME ":" FNR; body = ""; on = 0; insig = 1 }
    insig { if (FNR > 0 && sig != $0) sig = sig $0
            if ($0 ~ /\{$/) { insig = 0; on = 1 } else if ($0 ~ /;$/) insig = 0
            next }
    on && /^}/ { if (body ~ /prefetch\(/ && sig !~ /always_inline|MF_AVX|MF_AMX|target\(/) print where; on = 0; next }
    on { body = body $0 }')
if [ -z "$bad_helpers" ]; then ok prefetch_helpers_always_inline; else
    bad prefetch_helpers_always_inline "a prefetching static inline helper without always_inline: $bad_helpers"; fi

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

# and the x16 decode GEMV (Q4_0 / Q5_0 / Q8_0 / IQ4_NL on AVX-512), a page ahead (src/quant/x16_avx512.c)
for t in q4_0x16 q5_0x16 q8_0x16 iq4_nlx16; do
    fn="mf_tile_${t}_avx512"
    n=$(prefetches "$OBJ/x16_avx512.o" "$fn")
    if [ "$n" -gt 0 ]; then ok "prefetch_$fn"; else bad "prefetch_$fn" "no prefetcht0 in $fn ($OBJ/x16_avx512.o)"; fi
done
for isa in avx2 avx512; do
    for t in q4_Kx8 q5_Kx8 q6_Kx8 iq4_xsx8; do
        fn="mf_tile_${t}_$isa"
        n=$(prefetches "$OBJ/x8_$isa.o" "$fn")
        if [ "$n" -gt 0 ]; then ok "prefetch_$fn"; else bad "prefetch_$fn" "no prefetcht0 in $fn ($OBJ/x8_$isa.o)"; fi
    done
done
finish
